"""Chapter 11: the GRPO family, measured on chapter 08's task from the same warm-up and the same sample budget.

1. :data:`VARIANTS`: each variant as a small dict of the loop's switches (:class:`course_lib.lm_rl.LMRLConfig`),
   its paper and the one line of the objective it changes; DAPO's parts are separate variants too, so each
   part's share can be measured;
2. :func:`family_config` and :func:`run_variant`: chapter 08's warm-up (:func:`capstone.warm_up`) and run
   (:func:`capstone.run`), with the family's common sample budget;
3. :func:`record`, :func:`completions_to` and :func:`summarize`: one run's history cut down to the numbers and
   curves the table and the notebook need, and the table's row of a variant over its seeds.

The variants change only what their papers change from GRPO's recipe (chapter 08's: k3 KL at 0.02, clip 0.2,
the mean over each completion's tokens, then over completions); everything else stays the same.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from course_lib.lectures import capstone

# ---------------------------------------------------------------------------
# 1. The variants: switches of the one loop
# ---------------------------------------------------------------------------

VARIANTS: dict[str, dict] = {
    "GRPO": {
        "switches": {},
        "paper": "Shao et al. 2024, DeepSeekMath (arXiv 2402.03300)",
        "changes": "A_i = (r_i - mean(r)) / std(r) within the group; PPO's clipped ratio per token; k3 KL in the loss",
    },
    "PPO": {
        # chapter 05's recipe, as measured here (chapter 08's PPO later took GRPO's and an lr warm-up): one pass,
        # two minibatches, Adam at a constant rate (1e-3, BASE_LR) from the first round
        "switches": {
            "algo": "ppo",
            "update_epochs": 1,
            "num_minibatches": 2,
            "lr_schedule": "constant",
            "warmup_iterations": 0,
        },
        "paper": "Schulman et al. 2017; Ouyang et al. 2022, InstructGPT (arXiv 2203.02155)",
        "changes": "A_t = GAE(r_t - beta KL_t, V(s_t)) per token against a learned value model",
    },
    "RLOO": {
        "switches": {"adv_estimator": "rloo"},
        "paper": "Ahmadian et al. 2024, Back to Basics (arXiv 2402.14740)",
        "changes": "A_i = r_i - mean_{j != i} r_j: the others' mean, no std",
    },
    "REINFORCE++": {
        "switches": {"adv_estimator": "reinforce++"},
        "paper": "Hu 2025, REINFORCE++ (arXiv 2501.03262)",
        "changes": "A_i = (r_i - mean_group(r) - mean_batch) / std_batch: normalised over the batch, not the group",
    },
    "Dr.GRPO": {
        "switches": {"normalize_std": False, "loss_agg": "seq-mean-token-sum-norm"},
        "paper": "Liu et al. 2025, Understanding R1-Zero-Like Training (arXiv 2503.20783)",
        "changes": "A_i = r_i - mean(r) (no std); token sums divided by a constant L, not by |o_i|",
    },
    "DAPO": {
        "switches": {"clip_eps_high": 0.28, "dynamic_sampling": True, "loss_agg": "token-mean", "kl_coef": 0.0},
        "paper": "Yu et al. 2025, DAPO (arXiv 2503.14476)",
        "changes": "clip(ratio, 1 - 0.2, 1 + 0.28); only groups with 0 < acc < 1; mean over all tokens; no KL",
    },
    "DAPO-clip-higher": {
        "switches": {"clip_eps_high": 0.28},
        "paper": "Yu et al. 2025, DAPO, section 3.1",
        "changes": "clip(ratio, 1 - 0.2, 1 + 0.28): the upper clip range alone",
    },
    "DAPO-dyn-sampling": {
        "switches": {"dynamic_sampling": True},
        "paper": "Yu et al. 2025, DAPO, section 3.2",
        "changes": "groups whose rewards are all equal are dropped and more prompts sampled: that alone",
    },
    "DAPO-token-mean": {
        "switches": {"loss_agg": "token-mean"},
        "paper": "Yu et al. 2025, DAPO, section 3.3",
        "changes": "1/sum|o_i| sum_i sum_t: the mean over all tokens of the batch, that alone",
    },
    "GSPO": {
        "switches": {"policy_loss": "gspo", "clip_eps": 3e-4, "clip_eps_high": 4e-4},
        "paper": "Zheng et al. 2025, Group Sequence Policy Optimization (arXiv 2507.18071)",
        "changes": "s_i = (pi/pi_old)(o_i)^(1/|o_i|), one ratio and one clip (3e-4, 4e-4) per sequence",
    },
    "CISPO": {
        "switches": {"policy_loss": "cispo", "clip_eps_high": 4.0, "loss_agg": "token-mean"},
        "paper": "MiniMax 2025, MiniMax-M1 (arXiv 2506.13585), section 3.1",
        "changes": (
            "-sg(min(ratio, 5)) A_t log pi(o_t): the weight clipped and detached, every token keeps its gradient"
        ),
    },
    "GMPO": {
        "switches": {"policy_loss": "gmpo", "clip_eps": 0.4},
        "paper": "Zhao et al. 2025, Geometric-Mean Policy Optimization (arXiv 2507.20673)",
        "changes": "A_i * (prod_t clipped ratio_t)^(1/|o_i|): a geometric mean over tokens, log-ratio clip 0.4",
    },
    "SAPO": {
        "switches": {"policy_loss": "sapo"},
        "paper": "Gao et al. 2025, Soft Adaptive Policy Optimization (arXiv 2511.20347)",
        "changes": "-(4/tau) sigmoid(tau (ratio - 1)) A_t: a smooth gate in place of the hard clip",
    },
}
"""Every variant as switches of :func:`course_lib.lm_rl.train` (beside GRPO's recipe), its paper, and the one line
of the objective it changes. DAPO's overlong filter and soft punishment stay off: an answer here is at most 3
digits + EOS = ``max_new_tokens``, so a correct answer would be "overlong"."""

MEASURED = [
    "GRPO",
    "PPO",
    "DAPO",
    "DAPO-clip-higher",
    "DAPO-dyn-sampling",
    "RLOO",
    "GSPO",
    "CISPO",
    "Dr.GRPO",
    "REINFORCE++",
]
"""The variants ``benchmarks/grpo_family.py`` reports (Dr. GRPO's and REINFORCE++'s report runs came last, on quiet
cores); GMPO, SAPO and DAPO's token mean alone run through the same loop (the tests train each) and were not
measured."""

TUNED_ONLY: list[str] = []
"""Tuned on the validation split (``benchmarks/grpo_family.py --tune``) but not reported on the test prompts: none."""

BASE_LR = {"PPO": 1e-3}
"""The learning rate a variant starts from (chapter 08's: 2e-3; PPO chapter 05's 1e-3); tuning tries it and twice it."""

TUNED_LR: dict[str, float] = {
    "GRPO": 2e-3,
    "PPO": 1e-3,
    "RLOO": 2e-3,
    "REINFORCE++": 2e-3,
    "Dr.GRPO": 2e-3,
    "DAPO": 2e-3,
    "DAPO-clip-higher": 2e-3,
    "DAPO-dyn-sampling": 2e-3,
    "GSPO": 2e-3,
    "CISPO": 2e-3,
}
"""The learning rate tuning chose per variant (``benchmarks/grpo_family.py --tune``: the base, for every one;
twice the base was worse on both tuning seeds for each); a missing one is the base."""


def base_lr(name: str) -> float:
    """The learning rate variant ``name`` starts from before tuning."""
    return BASE_LR.get(name, capstone.CapstoneConfig().rl.lr)


# ---------------------------------------------------------------------------
# 2. The runs
# ---------------------------------------------------------------------------

ROUNDS, PROMPTS, GROUP = 48, 32, 8
"""The family's common sample budget: 48 rounds x 32 prompts x G = 8 = 12,288 completions, a tenth of chapter
08's 250 x 64 x 8 = 128,000, which did not fit the CPU budget of ten variants x (8 + 4 tuning) runs."""


def family_config(
    rounds: int = ROUNDS, prompts: int = PROMPTS, group: int = GROUP, eval_every: int = 6
) -> capstone.CapstoneConfig:
    """Chapter 08's config with the family's sample budget: ``rounds * prompts * group`` completions, whatever
    a variant does with them (dynamic sampling draws more per round, so it gets fewer rounds)."""
    rl = dataclasses.replace(
        capstone.CapstoneConfig().rl,
        iterations=rounds,
        prompts_per_step=prompts,
        group_size=group,
        max_completions=rounds * prompts * group,
        num_minibatches=1,
        clip_eps_high=None,
    )  # as measured: chapter 08's recipe then (it
    # later took two minibatches and DAPO's clip-higher; here clip-higher is a variant of its own)
    return dataclasses.replace(capstone.CapstoneConfig(), rl=rl, eval_every=eval_every)


def warm_state(cfg: capstone.CapstoneConfig, seed: int) -> dict:
    """The warmed-up TinyLM's state_dict of ``seed``: what every variant of that seed starts from."""
    lm, *_ = capstone.warm_up(cfg, seed)
    return {k: v.clone() for k, v in lm.state_dict().items()}


def run_variant(
    name: str,
    seed: int,
    cfg: capstone.CapstoneConfig | None = None,
    lr: float | None = None,
    state: dict | None = None,
    eval_on: str = "heldout",
    progress: bool = False,
) -> dict:
    """Variant ``name`` for one seed: chapter 08's warm-up (or its ``state``), then :func:`capstone.run` with the
    variant's switches.

    Args:
        cfg: the task and the budget (default :func:`family_config`); lr: the peak learning rate (default the
            tuned one, else :func:`base_lr`); state: a warmed-up state_dict (:func:`warm_state`) to skip the warm-up.
        eval_on: ``"heldout"`` (the test prompts) or ``"val"`` (tuning).

    Returns:
        The loop's history (``history["eval"]["score"]``: greedy exact match on ``split[eval_on]``).
    """
    if name not in VARIANTS:
        raise ValueError(f"name: one of {sorted(VARIANTS)}, got {name!r}")
    cfg = cfg or family_config()
    if state is None:
        lm, task, split, _ = capstone.warm_up(cfg, seed)
    else:
        lm, task, split, _ = capstone.warm_up(dataclasses.replace(cfg, sft_steps=0), seed)
        lm.load_state_dict(state)
    switches = dict(VARIANTS[name]["switches"])
    algo = switches.pop("algo", "grpo")
    lr = lr if lr is not None else TUNED_LR.get(name, base_lr(name))
    return capstone.run(
        lm, task, split, cfg, algo=algo, seed=seed, eval_on=eval_on, progress=progress, lr=lr, **switches
    )


# ---------------------------------------------------------------------------
# 3. The table
# ---------------------------------------------------------------------------

CURVE_KEYS = ("mean_reward", "mean_length", "kl", "clip_fraction", "frac_zero_std")
"""The per-round diagnostics a record keeps (downsampled)."""


def _downsample(xs: list[float], points: int) -> torch.Tensor:
    """Means over ``points`` equal chunks of ``xs`` (all of it when shorter), float32."""
    x = torch.tensor([float("nan") if v is None else v for v in xs], dtype=torch.float64)
    if len(x) <= points:
        return x.float()
    return torch.stack([c.nanmean() for c in torch.tensor_split(x, points)]).float()


def record(history: dict, points: int = 20) -> dict:
    """One run cut down to what the table and the notebook need: final numbers, the evaluation curve, and the
    diagnostics downsampled to ``points`` chunk means (float32), against the completions sampled."""
    ev = history["eval"]
    tail = max(1, len(history["kl"]) // 10)  # the last tenth of the rounds: "final" length and KL
    return {
        "score": float(ev["score"][-1]),
        "start": float(ev["score"][0]),
        "eval_completions": torch.tensor(ev["completions"], dtype=torch.float32),
        "eval_score": torch.tensor(ev["score"], dtype=torch.float32),
        "seconds": float(history["seconds"][-1]),
        "completions": int(history["completions"][-1]),
        "rounds": len(history["kl"]),
        "final_length": sum(history["mean_length"][-tail:]) / tail,
        "final_kl": sum(history["kl"][-tail:]) / tail,
        "clip_fraction": float(torch.tensor(history["clip_fraction"], dtype=torch.float64).nanmean()),
        "curves": {
            "completions": _downsample(history["completions"], points),
            **{k: _downsample(history[k], points) for k in CURVE_KEYS},
        },
    }


def completions_to(completions, scores, threshold: float = 0.8) -> float:
    """The completions sampled when the evaluation first reached ``threshold`` (inf if it never did)."""
    for c, s in zip(completions, scores):
        if float(s) >= threshold:
            return float(c)
    return math.inf


def summarize(runs: list[dict], threshold: float = 0.8) -> dict:
    """A variant's row over its seeds' :func:`record` s: held-out accuracy mean, min and std; median completions
    to reach ``threshold`` (inf when half the seeds or more never reach it); mean seconds, final length, final KL,
    clip fraction; and how many seeds ended below ``threshold``."""
    if not runs:
        raise ValueError("runs: at least one run's record")
    scores = torch.tensor([r["score"] for r in runs], dtype=torch.float64)
    reach = sorted(completions_to(r["eval_completions"], r["eval_score"], threshold) for r in runs)
    mean = lambda key: sum(r[key] for r in runs) / len(runs)  # noqa: E731
    return {
        "n": len(runs),
        "mean": float(scores.mean()),
        "min": float(scores.min()),
        "std": float(scores.std()) if len(runs) > 1 else 0.0,
        "to_threshold": reach[(len(reach) - 1) // 2],  # the lower median: finite iff most seeds got there
        "seconds": mean("seconds"),
        "final_length": mean("final_length"),
        "final_kl": mean("final_kl"),
        "clip_fraction": mean("clip_fraction"),
        "completions": mean("completions"),
        "failing": int((scores < threshold).sum()),
    }


def format_table(rows: dict[str, dict], threshold: float = 0.8) -> str:
    """The table as text, one line per variant (``rows``: name -> :func:`summarize`), best mean first."""
    head = (
        f"{'variant':<22} {'mean':>6} {'min':>6} {'std':>6} {f'to {threshold:g}':>8} {'s/run':>6} "
        f"{'length':>6} {'KL':>7} {'clip':>6} {f'<{threshold:g}':>5}"
    )
    lines = [head]
    for name, r in sorted(rows.items(), key=lambda kv: -kv[1]["mean"]):
        reach = "never" if math.isinf(r["to_threshold"]) else f"{r['to_threshold'] / 1e3:.1f}k"
        lines.append(
            f"{name:<22} {r['mean']:6.3f} {r['min']:6.3f} {r['std']:6.3f} {reach:>8} {r['seconds']:6.0f} "
            f"{r['final_length']:6.2f} {r['final_kl']:7.4f} {r['clip_fraction']:6.3f} "
            f"{r['failing']:>3}/{r['n']}"
        )
    return "\n".join(lines)
