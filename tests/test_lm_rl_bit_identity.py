"""The loop trains bit for bit as it did before its rewrite (issue 42): a grid of configs, digests of the result.

TinyLM's shortcuts (``TinyLM.fast_paths``: a shared prompt read once, the sampler's log-probs) move the numbers by
float rounding and are switched off for the bit-for-bit test; a second test runs them and asks for the same sums.
``tests/lm_rl_before.json`` holds, for each case below, the SHA-256 of the trained parameters (policy and, for PPO,
value model) and of the logged history, taken with the loop as it was before the rewrite (commit 555660e). A
change to the loop that moves one bit of one parameter in any case fails here. The digests are of float32 CPU
arithmetic, and the last bits depend on the CPU: torch picks its kernels by the instructions a CPU has (AVX2,
AVX512), and another kernel adds in another order. So the file keeps one set of digests per platform (torch, the
machine, the capability torch dispatches to, the CPU's model), each taken by running 555660e's loop on that
platform; on a platform it does not know, the test compares the parameters' rounded sums instead. To add one, run
555660e's ``course_lib`` with this module's ``run_case`` on it (its ``LMRLConfig(algo=...)`` stands for the
presets the rewrite added) and record the result under :func:`platform_key`.
"""

import hashlib
import json
import platform
from pathlib import Path

import pytest
import torch

E, PAD = 12, 13
BEFORE = Path(__file__).parent / "lm_rl_before.json"

ROUND = {"iterations": 2, "prompts_per_step": 4, "group_size": 4, "max_new_tokens": 4, "update_epochs": 2}
ROUND = {**ROUND, "num_minibatches": 2, "lr": 1e-2}
CASES = {
    "grpo": {},
    "grpo-clip-higher-micro": {"clip_eps_high": 0.28, "micro_batch_size": 3},
    "grpo-ladder-top": {"loss_agg": "token-mean", "kl_placement": "reward", "whiten_advantages": True},
    "grpo-warmup-cosine": {"warmup_iterations": 1, "lr_schedule": "cosine", "iterations": 3},
    "dr-grpo": {"normalize_std": False, "loss_agg": "seq-mean-token-sum-norm"},
    "grpo-no-kl": {"kl_coef": 0.0},
    "rloo": {"adv_estimator": "rloo"},
    "reinforce++": {"adv_estimator": "reinforce++"},
    "gspo": {"policy_loss": "gspo", "clip_eps": 3e-4, "clip_eps_high": 4e-4},
    "gmpo": {"policy_loss": "gmpo", "clip_eps": 0.4},
    "cispo": {"policy_loss": "cispo", "clip_eps_high": 4.0},
    "cispo-symmetric": {"policy_loss": "cispo"},
    "sapo": {"policy_loss": "sapo"},
    "dapo": {"dynamic_sampling": True, "max_sampling_draws": 3, "overlong_filter": True, "overlong_cache": 2},
    "budget": {"max_completions": 24, "iterations": 5},
    "prompt-mask": {"left_pad": True},
    "pad-in-the-distribution": {"suppress_pad": False},
    "ppo": {"algo": "ppo"},
    "ppo-micro-gae": {"algo": "ppo", "micro_batch_size": 5, "gamma": 0.9, "lam": 0.8},
}
RUN_OPTIONS = ("left_pad", "suppress_pad")


def prompts_and_mask(left_pad: bool):
    """16 prompts ``d d + d d =`` (ids 0-9, 10, 11); with ``left_pad``, their mask (all ones: TinyLM reads
    unpadded prompts only, so the mask's path is taken without padding)."""
    prompts = torch.randint(0, 10, (16, 6), generator=torch.Generator().manual_seed(0))
    prompts[:, 2], prompts[:, 5] = 10, 11
    return prompts, torch.ones_like(prompts) if left_pad else None


def reward_fn(pick, completion_ids):
    """``(B,), (B, G, L) -> (B, G)``: a verifier whose groups have spread."""
    return ((completion_ids[..., 0] + pick[:, None]) % 3 == 0).float()


def split(case: dict) -> tuple[dict, dict]:
    """A case's config changes and its run options."""
    changes = {**ROUND, **{k: v for k, v in case.items() if k not in RUN_OPTIONS}}
    options = {"left_pad": case.get("left_pad", False), "suppress_pad": case.get("suppress_pad", True)}
    return changes, options


def digest(policy, value_model, history: dict) -> dict:
    """SHA-256 of the parameters and of the history (``seconds`` left out), and the parameters' rounded sum."""
    params = list(policy.parameters()) + ([] if value_model is None else list(value_model.parameters()))
    flat = torch.cat([p.detach().flatten() for p in params])
    logged = {k: v for k, v in history.items() if k not in ("seconds", "eval")}
    return {
        "params": hashlib.sha256(flat.numpy().tobytes()).hexdigest(),
        "history": hashlib.sha256(json.dumps(logged, sort_keys=True).encode()).hexdigest(),
        "param_sum": round(float(flat.double().sum()), 4),
    }


DIGEST_THREADS = 2  # torch threads when the digests were taken


def platform_key() -> str:
    """What the last bits of float32 CPU arithmetic depend on: torch, the machine, the kernels' instruction set, the
    CPU."""
    capability = torch.backends.cpu.get_cpu_capability()
    return f"torch {torch.__version__} on {platform.machine()}, {capability}, {cpu_model()}"


def cpu_model() -> str:
    """The CPU's model name, from /proc/cpuinfo on Linux."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown CPU"
    for line in lines:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def recorded() -> tuple[dict, bool]:
    """The digests taken on this platform, and True; else the first platform's (only their sums can be compared),
    and False."""
    platforms = json.loads(BEFORE.read_text())["platforms"]
    if platform_key() in platforms:
        return platforms[platform_key()], True
    return next(iter(platforms.values())), False


def run_case(name: str, fast_paths: bool = False) -> dict:
    """Train a fresh tiny model with the case's config, two or so rounds, and digest the result; ``fast_paths``:
    TinyLM's shortcuts (a shared prompt read once, the sampler's log-probs), which move the numbers by rounding."""
    from course_lib import lm_rl
    from course_lib.tiny_lm import TinyLM, TinyLMConfig, ValueModel

    changes, options = split(CASES[name])
    algo = changes.pop("algo", "grpo")
    cfg = lm_rl.LMRLConfig.ppo(**changes) if algo == "ppo" else lm_rl.LMRLConfig.grpo(**changes)
    policy = TinyLM(TinyLMConfig(vocab_size=14, block_size=12, n_layer=1, n_head=2, d_model=16), seed=0)
    policy.fast_paths = fast_paths  # copied to the reference and the value model
    value_model = ValueModel(policy) if algo == "ppo" else None
    prompts, mask = prompts_and_mask(options["left_pad"])
    # The digests were taken with torch's two threads of this 2-core machine: a sum split over another number of
    # threads is added in another order, and the last bits differ (make test's workers run on one thread).
    threads = torch.get_num_threads()
    torch.set_num_threads(DIGEST_THREADS)
    try:
        history = lm_rl.train(
            policy,
            reward_fn,
            prompts,
            cfg,
            E,
            PAD,
            prompt_mask=mask,
            value_model=value_model,
            suppress_pad=options["suppress_pad"],
        )
    finally:
        torch.set_num_threads(threads)
    return digest(policy, value_model, history)


@pytest.mark.parametrize("name", list(CASES))
def test_the_loop_trains_as_before_its_rewrite(name):
    before, this_platform = recorded()
    now = run_case(name)
    if not this_platform:
        assert now["param_sum"] == pytest.approx(before[name]["param_sum"], abs=1e-3)
        return
    assert now == before[name]


@pytest.mark.parametrize("name", list(CASES))
def test_the_fast_paths_move_the_result_by_rounding_only(name):
    """With TinyLM's shortcuts on (as every run has them), two rounds end where the loop before them ended, to
    float rounding: the parameters' sum within 1e-3 of the recorded one."""
    before, _ = recorded()
    assert run_case(name, fast_paths=True)["param_sum"] == pytest.approx(before[name]["param_sum"], abs=1e-3)
