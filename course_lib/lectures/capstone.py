"""Chapter 08: a tiny transformer learns 2-digit addition by warm-up, then GRPO (or PPO).

1. :func:`sft`: supervised warm-up, the NLL of the completion tokens (EOS in, PAD out);
2. :func:`accuracy`: held-out greedy exact match; :func:`sample_table`: completions as text;
3. :class:`CapstoneConfig`, :func:`warm_up` and :func:`run`: the benchmark's runs, GRPO or PPO with a
   value model, both through the one LM RL loop (:mod:`course_lib.lm_rl`);
4. :func:`grpo_step`: one GRPO update written out, the exercise's reference (the loop's ``update`` is its
   general form: K passes, minibatches, micro-batches).

Shapes: ``B`` prompts, ``G`` completions per prompt, ``P`` prompt tokens, ``L`` completion
tokens, ``D`` model width.
"""

from __future__ import annotations

import dataclasses

import torch
from einops import rearrange, repeat
from torch import nn

from course_lib import _validate, lm_rl, lm_sampling
from course_lib.grpo import grpo_loss
from course_lib.tasks import AdditionTask, score_completions
from course_lib.tiny_lm import TinyLM, TinyLMConfig, ValueModel

# ---------------------------------------------------------------------------
# 1. Supervised warm-up
# ---------------------------------------------------------------------------


def sft_loss(model: nn.Module, prompts: torch.Tensor, completions: torch.Tensor, eos_id: int) -> torch.Tensor:
    """Mean negative log-likelihood of the completion tokens, EOS included, PAD excluded.

    Args:
        prompts: ``(B, P)`` ids; completions: ``(B, L)`` demonstration ids (answer, EOS, PAD...).
    """
    logp = lm_sampling.token_logps(model, prompts, None, completions)  # (B, L)
    mask = lm_sampling.completion_mask(completions, eos_id)  # (B, L)
    return -(logp * mask).sum() / mask.sum()


def sft(
    model: nn.Module,
    prompts: torch.Tensor,
    completions: torch.Tensor,
    eos_id: int,
    steps: int = 300,
    lr: float = 3e-3,
    batch_size: int = 64,
    seed: int = 0,
    done=None,
    check_every: int = 25,
) -> list[float]:
    """Adam on :func:`sft_loss` over shuffled minibatches of the demonstrations.

    Args:
        done: optional ``() -> bool`` asked every ``check_every`` steps; the warm-up stops when it says True.

    Returns:
        The loss of every step.
    """
    steps = _validate.require_int("steps", steps, minimum=0)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    for _ in range(steps):
        idx = torch.randperm(prompts.shape[0], generator=g)[:batch_size]
        loss = sft_loss(model, prompts[idx], completions[idx], eos_id)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if done is not None and len(losses) % check_every == 0 and done():
            break
    return losses


# ---------------------------------------------------------------------------
# 2. Evaluation, and the whole run through the one LM RL loop
# ---------------------------------------------------------------------------


def accuracy(lm: TinyLM, task: AdditionTask, pairs: list[tuple[int, int]]) -> float:
    """Greedy exact-match accuracy on ``pairs``: the answer, then EOS, nothing else."""
    prompts, tok = task.prompts(pairs), task.tokenizer
    completions = lm_sampling.sample_completions(
        lm, prompts, None, 1, task.max_new_tokens, tok.eos_id, tok.pad_id, greedy=True
    )  # (N, L)
    return float(score_completions(prompts, completions, tok, "exact").mean())


def accuracy_by_carry(lm: TinyLM, task: AdditionTask, pairs: list[tuple[int, int]]) -> dict[str, float]:
    """Greedy exact match split by whether the sum carries from any column (``47+85``: yes; ``12+30``: no)."""

    def carries(a: int, b: int) -> bool:
        return any((a // 10**k % 10) + (b // 10**k % 10) >= 10 for k in range(task.n_digits))

    groups = {"no carry": [p for p in pairs if not carries(*p)], "carry": [p for p in pairs if carries(*p)]}
    return {name: accuracy(lm, task, group) for name, group in groups.items() if group}


def sample_table(
    lm: TinyLM, task: AdditionTask, pairs, temperature: float | None = None, seed: int = 0
) -> list[tuple[str, str, str]]:
    """``(prompt, completion, answer)`` texts, greedy (``temperature=None``) or sampled."""
    prompts, tok = task.prompts(pairs), task.tokenizer
    out = lm_sampling.sample_completions(
        lm,
        prompts,
        None,
        1,
        task.max_new_tokens,
        tok.eos_id,
        tok.pad_id,
        temperature=temperature or 1.0,
        greedy=temperature is None,
        generator=torch.Generator().manual_seed(seed),
    )  # (N, L)
    return [(tok.decode(p), tok.decode(c), task.answer_text(a, b)) for p, c, (a, b) in zip(prompts, out, pairs)]


@dataclasses.dataclass
class CapstoneConfig:
    """Every knob of chapter 08's runs (``benchmarks/capstone.py`` uses the defaults)."""

    n_digits: int = 2
    """Digits per operand: prompts like "47+85=", 10,000 of them."""
    n_demos: int = 500
    """Demonstrations for the warm-up: too few on purpose (5% of the prompts)."""
    n_heldout: int = 500
    """Test prompts never trained on or tuned on: the greedy exact-match accuracy the course reports."""
    n_val: int = 500
    """Validation prompts, cut from the training prompts and never trained on: what the recipe was tuned on."""
    sft_steps: int = 600
    """The most Adam steps of supervised warm-up (batches of 64 demonstrations)."""
    sft_target: float | None = 0.25
    """Stop the warm-up once its greedy accuracy on the validation prompts reaches this (checked every 10
    steps): every seed starts RL from about the same level, whatever its luck in the warm-up (None: all steps)."""
    sft_lr: float = 3e-3
    """Learning rate of the warm-up."""
    d_model: int = 64
    """Width of the tiny LM (2 layers, 4 heads: about 100k parameters)."""
    reward: str = "digits+exact"
    """The verifier's reward (course_lib.tasks.score_completions): digit-wise credit plus 1 when exact."""
    rl: lm_rl.LMRLConfig = dataclasses.field(
        default_factory=lambda: lm_rl.LMRLConfig(
            iterations=300,
            prompts_per_step=64,
            group_size=8,
            update_epochs=4,
            num_minibatches=2,
            lr=2e-3,
            lr_schedule="linear",
            kl_coef=0.02,
            clip_eps_high=0.28,
        )
    )
    """The loop's hyperparameters (GRPO's; PPO changes :data:`PPO_CHANGES`): 64 prompts x G = 8 completions
    per round, four clipped passes over each batch, each pass in two minibatches of 256 completions drawn at random
    (a prompt's group may be split between them: the advantages were computed over whole groups first), 8 Adam steps
    a round, the ratio clipped to [0.8, 1.28] (DAPO's clip-higher), Adam decayed linearly from 2e-3. The learning
    rate is where tuning starts, not the chapter's pick: the ladder's tuning (``benchmarks/capstone.py --tune``,
    under ``benchmarks/PROTOCOL.md``) tried every rung at 1e-3, 2e-3 and 3e-3 and froze 3e-3 for GRPO and 2e-3 for
    PPO (``ladder.frozen_lr``); chapter 08's runs use the frozen rates. How the rest of this recipe was found, before
    the protocol, is in ``benchmarks/results/capstone_before_protocol.md``."""
    eval_every: int = 25
    """Rounds between two held-out evaluations."""


PPO_CHANGES: dict = {
    "loss_agg": "token-mean",
    "kl_placement": "reward",
    "clip_eps_high": None,
    "warmup_iterations": 20,
    "whiten_advantages": True,
}
"""PPO's differences from GRPO's recipe besides the advantage's source (a value model's GAE, ``algo="ppo"``): the
loss averaged over the batch's tokens (chapter 05's ``PPOLoss``), the KL as k1 in the reward (InstructGPT's) rather
than k3 in the loss, the ratio clipped symmetrically to [0.8, 1.2] (``PPOLoss`` has no clip-higher), a twenty-round
lr warm-up while the value model, which starts knowing nothing of the reward, gives noisy advantages, and advantages
whitened over the batch (TRL's PPO and OpenRLHF do). Chapter 08's ladder changes them one at a time
(``benchmarks/capstone.py --ladder``)."""


def warm_up(cfg: CapstoneConfig, seed: int = 0) -> tuple[TinyLM, AdditionTask, dict, list[float]]:
    """The task, its split, and a TinyLM after supervised warm-up on the demonstrations.

    Returns:
        ``(lm, task, split, sft_losses)``; ``split`` has ``"heldout"`` (test), ``"val"``, ``"train"`` and ``"demos"``.
    """
    task = AdditionTask(cfg.n_digits)
    split = task.split(cfg.n_demos, cfg.n_heldout, seed=0)  # the same held-out prompts for every seed
    split["val"], split["train"] = split["train"][-cfg.n_val :], split["train"][: -cfg.n_val]  # demos stay in train
    lm = TinyLM(
        TinyLMConfig(
            vocab_size=task.tokenizer.vocab_size,
            block_size=task.prompt_length + task.max_new_tokens,
            d_model=cfg.d_model,
        ),
        seed=seed,
    )
    prompts, completions = task.demonstrations(split["demos"])
    done = None if cfg.sft_target is None else (lambda: accuracy(lm, task, split["val"]) >= cfg.sft_target)
    losses = sft(
        lm,
        prompts,
        completions,
        task.tokenizer.eos_id,
        steps=cfg.sft_steps,
        lr=cfg.sft_lr,
        seed=seed,
        done=done,
        check_every=10,
    )
    return lm, task, split, losses


def _reward_fn(task: AdditionTask, prompts: torch.Tensor, reward: str):
    """The verifier as the loop calls it: ``(prompt_index (B,), completions (B, G, L)) -> (B, G)``."""
    return lambda pick, completions: score_completions(prompts[pick][:, None, :], completions, task.tokenizer, reward)


def run(
    lm: TinyLM,
    task: AdditionTask,
    split: dict,
    cfg: CapstoneConfig,
    algo: str = "grpo",
    seed: int = 0,
    progress: bool = False,
    eval_on: str = "heldout",
    **changes,
) -> dict:
    """GRPO or PPO (``algo``) from the warmed-up ``lm`` (trained in place) through :func:`course_lib.lm_rl.train`.

    Both sample the same completions per round (``cfg.rl``); ``changes`` override fields of the
    loop's config (for PPO, :data:`PPO_CHANGES` first). Greedy exact match on ``split[eval_on]`` (the test
    prompts, or ``"val"`` while tuning) every ``cfg.eval_every`` rounds.

    Returns:
        The loop's history dict (``history["eval"]["score"]`` is the held-out accuracy).
    """
    changes = {**(PPO_CHANGES if algo == "ppo" else {}), **changes}
    rl = dataclasses.replace(cfg.rl, algo=algo, seed=seed, max_new_tokens=task.max_new_tokens, **changes)
    prompts = task.prompts(split["train"])
    tok = task.tokenizer
    critic = ValueModel(lm) if algo == "ppo" else None  # PPO's separate value model, from the warmed-up LM
    return lm_rl.train(
        lm,
        _reward_fn(task, prompts, cfg.reward),
        prompts,
        rl,
        tok.eos_id,
        tok.pad_id,
        value_model=critic,
        eval_fn=lambda model: accuracy(model, task, split[eval_on]),
        eval_every=cfg.eval_every,
        progress=progress,
    )


# ---------------------------------------------------------------------------
# 4. The exercise: one GRPO step, written out (lm_rl.update does this for any K and minibatches)
# ---------------------------------------------------------------------------


def grpo_step(
    policy,
    ref_model,
    optimizer: torch.optim.Optimizer,
    prompts: torch.Tensor,
    completions: torch.Tensor,
    rewards: torch.Tensor,
    logp_old: torch.Tensor,
    eos_id: int,
    clip_eps: float = 0.2,
    kl_coef: float = 0.04,
    max_grad_norm: float = 1.0,
) -> float:
    """One optimiser step on the GRPO loss of ``G`` completions per prompt of a language model.

    Args:
        policy: the LM being trained, called as ``policy(ids) -> (N, T, V)`` logits;
            ref_model: the frozen reference (or ``None``: no KL).
        optimizer: over ``policy``'s parameters.
        prompts: ``(B, P)`` ids; completions: ``(B, G, L)`` sampled ids (PAD after EOS); the ``G``
            completions of ``prompts[b]`` are ``completions[b]``.
        rewards: ``(B, G)``; logp_old: ``(B, G, L)`` log-probs of the policy that sampled them.
        eos_id: the EOS id (the mask keeps it and drops what follows).
        clip_eps, kl_coef: as in :func:`course_lib.grpo.grpo_loss` (k3 KL).
        max_grad_norm: the global gradient norm is clipped to this before the step.

    Returns:
        The loss (a float).
    """
    B, G, L = completions.shape
    flat_prompts = repeat(prompts, "B P -> (B G) P", G=G)  # each prompt G times, in group order
    flat = rearrange(completions, "B G L -> (B G) L")
    logp = rearrange(
        lm_sampling.token_logps(policy, flat_prompts, None, flat), "(B G) L -> B G L", G=G
    )  # with gradient
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = rearrange(lm_sampling.token_logps(ref_model, flat_prompts, None, flat), "(B G) L -> B G L", G=G)
    mask = lm_sampling.completion_mask(completions, eos_id)  # (B, G, L): up to and including EOS
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef, kl_kind="k3")
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()
