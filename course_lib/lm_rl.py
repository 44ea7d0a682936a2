"""One loop that trains a causal language model with RL: GRPO (and its family) or PPO with a value model.

It has the shape of the LM trainers (TRL's GRPOTrainer, OpenRLHF, verl), small enough to read top to bottom
like CleanRL's ``ppo.py``. The file follows one round of :func:`train`, in the order it runs:

0. the learning rate of the round (:func:`lr_at`);
1. sample ``G`` completions of each of ``B`` prompts, stopping at EOS (:func:`sample_groups`);
2. score every completion with a program, the verifier (:func:`score_groups`); DAPO's dynamic sampling
   repeats 1 and 2 for the groups still missing (:func:`collect_groups`);
3. per-token log-probs, without gradient: ``logp_old`` of the policy that sampled, ``logp_ref`` of the frozen
   reference and, for PPO, ``values_old`` of the value model (:func:`score_tokens`);
4. advantages, where the algorithms differ (:func:`advantages`): GRPO compares each completion with its
   group (Shao et al. 2024, "DeepSeekMath", eq. 3); PPO folds a per-token KL penalty into the reward, adds
   the score at the last token and runs GAE over the completion against the value model (Ouyang et al.
   2022, "InstructGPT", eq. 2). :func:`rollout` runs steps 1 to 4;
5. the loss of a minibatch (:func:`minibatch_loss`): chapter 06's ``grpo_loss``, a family variant's
   per-token loss (chapter 11), or chapter 05's ``PPOLoss``;
6. ``update_epochs`` passes over the batch in minibatches of whole sequences, gradients clipped (:func:`update`);
7. the loop (:func:`train`).

GRPO -> PPO is a ladder of config switches, each a few visible lines (chapter 08): how tokens are averaged
(``loss_agg``), where the KL goes (``kl_placement``), the clip (``clip_eps_high``), the lr warm-up
(``warmup_iterations``), whitening (``whiten_advantages``) and the advantage's source (``algo``).

Vocabulary: a *round* (``iterations`` of them) samples a fresh batch and updates on it; a *pass* (``update_epochs``
of them) goes once over that batch; a *step* is one optimiser step on one minibatch.

Shapes: ``B`` prompts, ``G`` completions per prompt, ``N = B * G`` sequences, ``P`` prompt tokens, ``L`` completion
tokens, ``V`` vocabulary.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass

import torch
from einops import rearrange, repeat
from torch import nn
from tqdm.auto import tqdm

from course_lib import _validate, family
from course_lib.family_diagnostics import policy_loss_diagnostics
from course_lib.gae import compute_gae
from course_lib.grpo import LOSS_AGG_MODES, aggregate_loss, group_advantages, grpo_loss
from course_lib.kl import kl_estimate
from course_lib.lm_sampling import completion_mask, model_logits, sample_completions, token_logps, token_values
from course_lib.masked import masked_mean
from course_lib.ppo import PPOLoss, explained_variance
from course_lib.tiny_lm import TinyLM

__all__ = [
    "LMRLConfig",
    "Groups",
    "lr_at",
    "completion_mask",
    "model_logits",
    "sample_completions",
    "token_logps",
    "token_values",
    "sample_groups",
    "score_groups",
    "collect_groups",
    "score_tokens",
    "advantages",
    "rollout",
    "minibatch_loss",
    "update",
    "train",
]

ALGOS = ("grpo", "ppo")
KL_PLACEMENTS = ("loss", "reward")
ADV_ESTIMATORS = ("grpo", "rloo", "reinforce++")
POLICY_LOSSES = ("clip", "gspo", "cispo", "gmpo", "sapo")


# ---------------------------------------------------------------------------
# 0. The hyperparameters
# ---------------------------------------------------------------------------


@dataclass
class LMRLConfig:
    """Hyperparameters of :func:`train`. A switch marked "the algorithm's own" may be left at None."""

    # --- the round: what is sampled ---
    algo: str = "grpo"
    """The advantage's source: ``"grpo"`` (the group's rewards) or ``"ppo"`` (GAE against a value model)."""
    iterations: int = 250
    """Rounds of sample-then-update; each samples a fresh batch of ``B * G`` completions."""
    max_completions: int | None = None
    """A sample budget: stop once this many completions were sampled, the lr decaying with the share spent."""
    prompts_per_step: int = 64
    """B, prompts per round."""
    group_size: int = 8
    """G, completions per prompt (PPO samples as many, so both see the same completions per round)."""
    max_new_tokens: int = 4
    """L, the most tokens a completion may have, EOS included; also Dr. GRPO's constant."""
    temperature: float = 1.0
    """Sampling temperature; log-probs are taken at the same temperature."""
    top_p: float = 1.0
    """Nucleus sampling (``transformers`` models only; 1.0 samples the whole distribution)."""

    # --- the update: passes, minibatches, the optimiser ---
    update_epochs: int = 4
    """Passes over each round's batch (PPO's K epochs); the ratio leaves 1 after the first step."""
    num_minibatches: int = 1
    """Minibatches of whole sequences per pass, drawn at random (a group may be split between two)."""
    micro_batch_size: int | None = None
    """Sequences per forward pass, gradients accumulated over a minibatch (None: the whole minibatch)."""
    lr: float = 2e-3
    """Peak learning rate of Adam."""
    warmup_iterations: int = 0
    """The learning rate rises linearly from 0 over this many rounds..."""
    lr_schedule: str = "linear"
    """...then stays (``"constant"``) or falls to 0 by the last round (``"linear"``, ``"cosine"``)."""
    max_grad_norm: float = 1.0
    """The global gradient norm is clipped to this before every step."""

    # --- GRPO's loss (chapter 06) ---
    clip_eps: float = 0.2
    """PPO's clip range of the ratio."""
    clip_eps_high: float | None = None
    """Upper clip range (DAPO's clip-higher); None means clip_eps."""
    kl_coef: float = 0.02
    """Weight of the KL to the frozen reference."""
    kl_placement: str | None = None
    """``"loss"`` (k3 added to each token's loss) or ``"reward"`` (k1 taken off the reward); the algorithm's own."""
    normalize_std: bool = True
    """GRPO: divide group-centred rewards by the group's std (False is Dr. GRPO)."""
    loss_agg: str | None = None
    """How token losses are averaged (course_lib.grpo.aggregate_loss); the algorithm's own."""
    whiten_advantages: bool | None = None
    """Whiten the advantages over the batch's valid tokens (PPO's habit); the algorithm's own."""

    # --- PPO's value model (chapter 05) ---
    gamma: float = 1.0
    """PPO: discount over the completion's tokens (1: the score at the end is what counts)."""
    lam: float = 0.95
    """PPO: GAE's lambda."""
    value_loss_coef: float = 0.5
    """PPO: weight of the value loss (``PPOLoss``'s, and the trainers', ``value_loss_coef``)."""

    # --- the GRPO family (chapter 11) ---
    adv_estimator: str = "grpo"
    """The group's advantage (course_lib.family): ``"grpo"``, ``"rloo"`` (leave-one-out), ``"reinforce++"``."""
    policy_loss: str = "clip"
    """The per-token loss: ``"clip"`` (chapter 06's grpo_loss), ``"gspo"``, ``"cispo"``, ``"gmpo"``, ``"sapo"``."""
    dynamic_sampling: bool = False
    """DAPO: drop groups whose rewards are all equal and sample prompts again for the missing groups."""
    max_sampling_draws: int = 10
    """DAPO: the most draws of prompts in one round before it trains on the groups it has (verl's
    ``max_num_gen_batches``)."""
    overlong_filter: bool = False
    """DAPO: completions cut off without EOS leave the loss."""
    overlong_cache: int = 0
    """DAPO's soft overlong punishment: the last this many tokens before max_new_tokens cost reward (0: off)."""

    # --- reproducibility ---
    seed: int = 0
    """Seeds the prompt order and the sampling."""

    def __post_init__(self):
        # A switch left at None takes the algorithm's own setting: PPO averages over tokens, puts the KL in the
        # reward and whitens its advantages; GRPO averages each completion's tokens first, puts the KL in the loss
        # and does not whiten. (dataclasses.replace keeps what was filled in: a GRPO config made PPO must say so.)
        ppo = self.algo == "ppo"
        if self.kl_placement is None:
            self.kl_placement = "reward" if ppo else "loss"
        if self.loss_agg is None:
            self.loss_agg = "token-mean" if ppo else "seq-mean-token-mean"
        if self.whiten_advantages is None:
            self.whiten_advantages = ppo

    def validate(self) -> LMRLConfig:
        """Check every field; raise ValueError naming the first one that is wrong. Returns the config."""
        _validate_sizes(self)
        _validate_rates(self)
        _validate_switches(self)
        return self


def _validate_sizes(cfg: LMRLConfig) -> None:
    v = _validate
    for name in ("iterations", "prompts_per_step", "group_size", "max_new_tokens", "update_epochs", "num_minibatches"):
        v.require_int(name, getattr(cfg, name), minimum=1)
    if cfg.algo == "grpo" and cfg.group_size < 2:
        raise ValueError(f"group_size: GRPO needs at least 2 (a group of one has no baseline), got {cfg.group_size}")
    if cfg.micro_batch_size is not None:
        v.require_int("micro_batch_size", cfg.micro_batch_size, minimum=1)
    if cfg.max_completions is not None:
        v.require_int("max_completions", cfg.max_completions, minimum=1)
    for name in ("warmup_iterations", "overlong_cache"):
        v.require_int(name, getattr(cfg, name), minimum=0)
    v.require_int("max_sampling_draws", cfg.max_sampling_draws, minimum=1)


def _validate_rates(cfg: LMRLConfig) -> None:
    v = _validate
    for name in ("lr", "temperature", "max_grad_norm", "top_p"):
        v.require_positive(name, getattr(cfg, name))
    for name in ("kl_coef", "value_loss_coef"):
        v.require_non_negative(name, getattr(cfg, name))
    for name in ("gamma", "lam", "top_p"):
        v.require_unit_interval(name, getattr(cfg, name))
    v.require_clip_range(cfg.clip_eps, cfg.clip_eps_high)


def _validate_switches(cfg: LMRLConfig) -> None:
    v = _validate
    v.require_choice("algo", cfg.algo, ALGOS)
    v.require_choice("lr_schedule", cfg.lr_schedule, ("constant", "linear", "cosine"))
    v.require_choice("loss_agg", cfg.loss_agg, LOSS_AGG_MODES)
    v.require_choice("kl_placement", cfg.kl_placement, KL_PLACEMENTS)
    v.require_bool("whiten_advantages", cfg.whiten_advantages)
    v.require_choice("adv_estimator", cfg.adv_estimator, ADV_ESTIMATORS)
    v.require_choice("policy_loss", cfg.policy_loss, POLICY_LOSSES)
    if cfg.algo != "ppo":
        return
    # PPO's branch is chapter 05's PPOLoss: a GRPO switch that it cannot honour is refused, not ignored.
    ppo_only = (
        ("clip_eps_high", None),
        ("policy_loss", "clip"),
        ("adv_estimator", "grpo"),
        ("normalize_std", True),
        ("loss_agg", "token-mean"),
        ("kl_placement", "reward"),
        ("whiten_advantages", True),
        ("dynamic_sampling", False),
    )
    for name, allowed in ppo_only:
        value = getattr(cfg, name)
        if value != allowed:
            raise ValueError(f"{name}: a switch of GRPO's branch; algo='ppo' takes {allowed!r}, got {value!r}")


def lr_at(round_index: int, cfg: LMRLConfig, completions: int = 0) -> float:
    """The learning rate of round ``round_index`` (0-based), given the ``completions`` sampled before it."""
    # 1. Linear warm-up: the first rounds take small steps.
    if round_index < cfg.warmup_iterations:
        return cfg.lr * (round_index + 1) / (cfg.warmup_iterations + 1)
    # 2. A constant schedule stays at the peak.
    if cfg.lr_schedule == "constant":
        return cfg.lr
    # 3. How far the run has gone after the warm-up, from 0 to just under 1: by rounds or, with a sample budget,
    #    by the share of the budget spent (dynamic sampling draws more than B * G a round), whichever is further.
    progress = (round_index - cfg.warmup_iterations) / max(cfg.iterations - cfg.warmup_iterations, 1)
    if cfg.max_completions:
        progress = max(progress, min(completions / cfg.max_completions, 1.0))
    # 4. Decay to 0: a straight line, or half a cosine.
    if cfg.lr_schedule == "linear":
        return cfg.lr * (1.0 - progress)
    return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * progress))


# ---------------------------------------------------------------------------
# 1-2. Sample and score groups
# ---------------------------------------------------------------------------


@dataclass
class Groups:
    """``G`` completions of each of ``B`` prompts and their rewards."""

    prompt_index: torch.Tensor
    """``(B,)`` which training prompts were drawn."""
    completion_ids: torch.Tensor
    """``(B, G, L)`` the sampled completions, PAD after EOS."""
    scores: torch.Tensor
    """``(B, G)`` the verifier's reward of each completion (DAPO's overlong penalty included)."""
    logp_old: torch.Tensor | None = None
    """``(B, G, L)`` the sampler's log-prob of each token (TinyLM's sampler; None: scored in a pass of its own)."""


def _prompts(prompt_ids, prompt_mask, pick):
    """The prompts ``pick`` and their mask, without the columns that are padding in every one of them."""
    if prompt_mask is None:
        return prompt_ids[pick], None
    used = prompt_mask[pick].any(0)  # (P,): left padding that no chosen prompt needs is dropped
    return prompt_ids[pick][:, used], prompt_mask[pick][:, used]


def sample_groups(cfg, policy, prompt_ids, prompt_mask, n_prompts, eos_id, pad_id, generator):
    """Step 1: draw ``n_prompts`` training prompts and sample ``G`` completions of each.

    Returns:
        ``(prompt_index (n,), completion_ids (n, G, L), logp (n, G, L) or None)``: the course's TinyLM hands back
        the log-prob of each token it drew (``logp_old``, without a pass of its own); other models give None.
    """
    pick = torch.randperm(prompt_ids.shape[0], generator=generator)[:n_prompts]  # (n,)
    ids, mask = _prompts(prompt_ids, prompt_mask, pick)
    G, L = cfg.group_size, cfg.max_new_tokens
    with_logps = isinstance(policy, TinyLM)
    sampled = sample_completions(
        policy,
        ids,
        mask,
        G,
        L,
        eos_id,
        pad_id,
        cfg.temperature,
        generator=generator,
        top_p=cfg.top_p,
        return_logps=with_logps,
    )  # (n * G, L), each prompt's G completions on adjacent rows; TinyLM: and their log-probs
    flat, logp = sampled if with_logps else (sampled, None)
    by_group = lambda x: None if x is None else rearrange(x, "(B G) L -> B G L", G=G)  # noqa: E731
    return pick, by_group(flat), by_group(logp)


def score_groups(cfg, reward_fn, pick, completion_ids, eos_id) -> torch.Tensor:
    """Step 2: the verifier's ``(B, G)`` rewards, plus DAPO's soft overlong penalty when it is on."""
    scores = reward_fn(pick, completion_ids).float()  # (B, G)
    if cfg.overlong_cache:
        lengths = completion_mask(completion_ids, eos_id).sum(-1)  # (B, G)
        scores = scores + family.soft_overlong_penalty(lengths, cfg.max_new_tokens, cfg.overlong_cache)
    return scores


def collect_groups(cfg, policy, reward_fn, prompt_ids, prompt_mask, eos_id, pad_id, generator):
    """Steps 1-2 of a round: ``B`` groups, sampled and scored.

    With DAPO's dynamic sampling (Yu et al. 2025, section 3.2), a group whose rewards are all equal has
    zero advantage everywhere and is dropped, and only the missing groups are drawn again, up to
    ``max_sampling_draws`` draws; the round then trains on the groups it has (at most ``B``).

    Returns:
        ``(kept, sampled_scores)``: the :class:`Groups` to train on, and the ``(n, G)`` rewards of every group
        sampled this round, kept or not (what the round's mean reward reports).
    """
    B = cfg.prompts_per_step
    kept: list[Groups] = []
    sampled_scores: list[torch.Tensor] = []
    n_kept = 0
    draws = cfg.max_sampling_draws if cfg.dynamic_sampling else 1
    for _ in range(draws):
        pick, completion_ids, logp = sample_groups(
            cfg, policy, prompt_ids, prompt_mask, B - n_kept, eos_id, pad_id, generator
        )
        scores = score_groups(cfg, reward_fn, pick, completion_ids, eos_id)
        sampled_scores.append(scores)
        if cfg.dynamic_sampling:
            teaches = family.dynamic_sampling_mask(scores)  # (n,): some spread in the group's rewards
            pick, completion_ids, scores = pick[teaches], completion_ids[teaches], scores[teaches]
            logp = None if logp is None else logp[teaches]
        kept.append(Groups(pick, completion_ids, scores, logp))
        n_kept += len(pick)
        if n_kept == B:
            break
    groups = Groups(
        prompt_index=torch.cat([g.prompt_index for g in kept]),
        completion_ids=torch.cat([g.completion_ids for g in kept]),
        scores=torch.cat([g.scores for g in kept]),
        logp_old=None if kept[0].logp_old is None else torch.cat([g.logp_old for g in kept]),
    )
    return groups, torch.cat(sampled_scores)


# ---------------------------------------------------------------------------
# 3. Log-probs (and values) of the sampled tokens
# ---------------------------------------------------------------------------


@torch.no_grad()
def score_tokens(cfg, policy, ref, value_model, batch: dict, pad_id: int | None) -> None:
    """Step 3: ``logp_old``, ``logp_ref`` and, for PPO, ``values_old``, each ``(N, L)``, written into ``batch``.

    One forward pass of each model over prompt + completion, without gradient: the policy that sampled
    (its log-probs are the constants of the ratio), the frozen reference, and PPO's value model. A
    ``logp_old`` already in ``batch`` (the sampler's own) is kept: the sampler had those log-probs in hand.
    """
    args = (batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"], cfg.temperature, pad_id)
    if "logp_old" not in batch:
        batch["logp_old"] = token_logps(policy, *args)  # (N, L)
    batch["logp_ref"] = token_logps(ref, *args)  # (N, L)
    if cfg.algo == "ppo":
        batch["values_old"] = token_values(value_model, batch["prompt_ids"], batch["completion_ids"])  # (N, L)


# ---------------------------------------------------------------------------
# 4. Advantages: the group (GRPO) or GAE over tokens (PPO)
# ---------------------------------------------------------------------------


def _whiten(adv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``adv`` shifted and scaled to mean 0 and std 1 over the batch's valid tokens, as TRL's PPO and OpenRLHF do.

    ``adv`` is ``(N, L)`` per token, or ``(N,)`` per sequence (each of its valid tokens counts once).
    """
    per_token = adv if adv.dim() == 2 else repeat(adv, "N -> N L", L=mask.shape[1])
    valid = mask > 0
    mean = per_token[valid].mean()
    std = per_token[valid].std().clamp(min=1e-8)
    return (adv - mean) / std


def advantages(cfg, scores, mask, logp_old, logp_ref, values_old=None):
    """Step 4: the advantages and, for PPO, the value model's targets.

    Args:
        cfg: a validated config (:meth:`LMRLConfig.validate`).
        scores: ``(B, G)`` the verifier's reward of each completion.
        mask: ``(N, L)`` the completion mask, ``N = B * G``.
        logp_old, logp_ref: ``(N, L)`` of the sampling policy and the reference.
        values_old: ``(N, L)`` the value model's values (PPO).

    Returns:
        ``(adv, returns)``: GRPO's ``(N,)`` advantages, one per completion, and None; or PPO's ``(N, L)``
        advantages, one per token, and its ``(N, L)`` value targets.
    """
    # The KL in the reward (InstructGPT's, PPO's): k1 = logp_old - logp_ref at every valid token.
    kl_tokens = torch.where(mask > 0, logp_old - logp_ref, torch.zeros_like(logp_old))  # (N, L)
    if cfg.algo == "grpo":
        # ALGO LOGIC (GRPO): each completion against its own group.
        rewards = scores
        if cfg.kl_placement == "reward":  # the sequence's KL, summed over its tokens, comes off its reward
            rewards = scores - cfg.kl_coef * rearrange(kl_tokens.sum(-1), "(B G) -> B G", G=scores.shape[1])
        if cfg.adv_estimator == "rloo":  # chapter 11: the mean of the other completions
            adv = family.rloo_advantages(rewards)  # (B, G)
        elif cfg.adv_estimator == "reinforce++":  # chapter 11: centred in the group, scaled over the batch
            adv = family.reinforce_pp_advantages(rewards)  # (B, G)
        else:
            adv = group_advantages(rewards, normalize_std=cfg.normalize_std)  # (B, G)
        adv = rearrange(adv, "B G -> (B G)")  # (N,)
        if cfg.whiten_advantages:
            adv = _whiten(adv, mask)
        return adv, None
    # ALGO LOGIC (PPO): reward_t = -beta * KL_t, plus the score at the last valid token; GAE over the completion.
    last = (mask.sum(-1).long() - 1).clamp(min=0)  # (N,): index of the last valid token
    at_last = nn.functional.one_hot(last, mask.shape[1]).to(mask.dtype)  # (N, L)
    token_rewards = -cfg.kl_coef * kl_tokens + at_last * rearrange(scores, "B G -> (B G) 1")  # (N, L)
    no_bootstrap = torch.zeros(mask.shape[0])  # the completion ends at its last token: nothing follows
    adv, returns = compute_gae(token_rewards, values_old * mask, at_last.bool(), no_bootstrap, cfg.gamma, cfg.lam)
    if cfg.whiten_advantages:
        adv = _whiten(adv, mask)
    return adv * mask, returns


def rollout(cfg, policy, ref, value_model, reward_fn, prompt_ids, prompt_mask, eos_id, pad_id, generator, skip_pad):
    """Steps 1-4 of one round: sample, score, log-probs, advantages.

    Args:
        cfg: a validated config; ``skip_pad``: the PAD id to leave out of the scored distribution, or None.

    Returns:
        ``(batch, stats)``: the ``(N, ...)`` tensors :func:`update` reads, and the round's statistics.
    """
    groups, sampled_scores = collect_groups(cfg, policy, reward_fn, prompt_ids, prompt_mask, eos_id, pad_id, generator)
    G = cfg.group_size
    ids, pmask = _prompts(prompt_ids, prompt_mask, groups.prompt_index)
    completion_ids = rearrange(groups.completion_ids, "B G L -> (B G) L")
    batch = {
        "prompt_ids": repeat(ids, "B P -> (B G) P", G=G),
        "prompt_mask": None if pmask is None else repeat(pmask, "B P -> (B G) P", G=G),
        "completion_ids": completion_ids,
        "mask": completion_mask(completion_ids, eos_id),  # (N, L)
    }
    if groups.logp_old is not None and skip_pad == pad_id:  # the sampler's, PAD out of the distribution as here
        batch["logp_old"] = rearrange(groups.logp_old, "B G L -> (B G) L")
    if cfg.overlong_filter:  # DAPO: a completion cut off without EOS leaves the loss
        truncated = ~(completion_ids == eos_id).any(-1)  # (N,)
        batch["mask"] = family.filter_truncated(batch["mask"], truncated)
    score_tokens(cfg, policy, ref, value_model, batch, skip_pad)
    with torch.no_grad():
        batch["adv"], batch["returns"] = advantages(
            cfg, groups.scores, batch["mask"], batch["logp_old"], batch["logp_ref"], batch.get("values_old")
        )
    return batch, _round_stats(cfg, batch, sampled_scores, groups)


def _round_stats(cfg, batch: dict, sampled_scores: torch.Tensor, groups: Groups) -> dict:
    """What a round logs before its update: rewards, the KL to the reference, lengths, DAPO's counts."""
    mask = batch["mask"]
    kl = masked_mean(kl_estimate(batch["logp_old"], batch["logp_ref"], "k3"), mask).item()
    stats = {
        "mean_reward": sampled_scores.mean().item(),
        "kl": kl,
        "mean_length": mask.sum(-1).mean().item(),
        "frac_zero_std": (sampled_scores.std(-1) == 0).float().mean().item(),
        "completions": sampled_scores.numel(),
        "groups_kept": len(groups.scores),
    }
    if cfg.algo == "ppo":  # the share of the returns' variance that the value model predicted
        valid = mask > 0
        stats["explained_variance"] = explained_variance(batch["values_old"][valid], batch["returns"][valid])
    return stats


# ---------------------------------------------------------------------------
# 5. The loss of a minibatch
# ---------------------------------------------------------------------------


def _family_per_token_loss(cfg, logp, logp_old, adv, mask) -> torch.Tensor:
    """``(n, L)`` the per-token loss of a family variant (chapter 11), for ``(n,)`` advantages."""
    adv_tokens = repeat(adv, "n -> n L", L=logp.shape[1])  # every token shares its completion's advantage
    if cfg.policy_loss == "gspo":  # one ratio and one clip per sequence
        return family.gspo_loss(logp, logp_old, adv, mask, cfg.clip_eps, cfg.clip_eps_high)
    if cfg.policy_loss == "gmpo":  # a geometric mean of the clipped token ratios
        return family.gmpo_loss(logp, logp_old, adv, mask, cfg.clip_eps, cfg.clip_eps_high)
    if cfg.policy_loss == "cispo":  # a clipped, detached weight on REINFORCE
        return family.cispo_loss(logp, logp_old, adv_tokens, cfg.clip_eps_high or cfg.clip_eps)
    return family.sapo_loss(logp, logp_old, adv_tokens)  # "sapo": a smooth gate in place of the clip


def _grpo_branch_loss(cfg, logp, part: dict) -> tuple[torch.Tensor, dict]:
    """GRPO and its family: the loss of the minibatch ``part`` (advantages ``(n,)``, one per completion)."""
    kl_in_loss = cfg.kl_placement == "loss" and cfg.kl_coef > 0
    # What the loss does to drifted tokens, measured on the variant's own quantity (GSPO: the sequence ratio).
    drift = policy_loss_diagnostics(
        cfg.policy_loss, logp, part["logp_old"], part["adv"], part["mask"], cfg.clip_eps, cfg.clip_eps_high
    )
    if cfg.policy_loss == "clip":
        # Chapter 06's grpo_loss, the function students write. The n completions go in as n groups of one,
        # (n, 1, L): their advantages were computed from whole groups before the minibatches split them.
        loss, info = grpo_loss(
            rearrange(logp, "n L -> n 1 L"),
            rearrange(part["logp_old"], "n L -> n 1 L"),
            rearrange(part["logp_ref"], "n L -> n 1 L") if kl_in_loss else None,
            None,
            rearrange(part["mask"], "n L -> n 1 L"),
            clip_eps=cfg.clip_eps,
            kl_coef=cfg.kl_coef,
            kl_kind="k3",
            loss_agg=cfg.loss_agg,
            max_len=cfg.max_new_tokens,
            clip_eps_high=cfg.clip_eps_high,
            adv=rearrange(part["adv"], "n -> n 1"),
        )
        return loss, {**info, **drift}
    per_token = _family_per_token_loss(cfg, logp, part["logp_old"], part["adv"], part["mask"])  # (n, L)
    if kl_in_loss:
        per_token = per_token + cfg.kl_coef * kl_estimate(logp, part["logp_ref"], "k3")
    loss = aggregate_loss(per_token, part["mask"], cfg.loss_agg, max_len=cfg.max_new_tokens)
    return loss, drift


def _ppo_branch_loss(cfg, value_model, logp, entropy, part: dict) -> tuple[torch.Tensor, dict]:
    """PPO: chapter 05's ``PPOLoss`` (clipped surrogate averaged over valid tokens, plus the value loss)."""
    values = token_values(value_model, part["prompt_ids"], part["completion_ids"])  # (n, L)
    ppo_loss = PPOLoss(cfg.clip_eps, cfg.value_loss_coef, entropy_coef=0.0)
    loss = ppo_loss(logp, part["logp_old"], values, part["returns"], part["adv"], entropy, mask=part["mask"])
    return loss, dict(ppo_loss.info)


def minibatch_loss(cfg, policy, value_model, batch: dict, idx, n_seq: int, n_tok, pad_id: int | None):
    """Step 5: the loss of the sequences ``idx`` of ``batch``, with gradient, and its diagnostics.

    The loss is scaled by the share of the minibatch that ``idx`` is (``n_seq`` sequences and ``n_tok`` valid
    tokens in all), so that summing it over the minibatch's micro-batches gives the minibatch's loss.
    """
    part = {key: None if value is None else value[idx] for key, value in batch.items()}
    logp, entropy = token_logps(
        policy, part["prompt_ids"], part["prompt_mask"], part["completion_ids"], cfg.temperature, pad_id, True
    )  # (n, L) each, with gradient
    mask = part["mask"]
    if cfg.algo == "ppo":
        loss, info = _ppo_branch_loss(cfg, value_model, logp, entropy, part)
    else:
        loss, info = _grpo_branch_loss(cfg, logp, part)
    # A token mean averages over the minibatch's tokens, the other modes over its sequences.
    per_token_mean = cfg.algo == "ppo" or cfg.loss_agg == "token-mean"
    share = mask.sum() / n_tok if per_token_mean else len(idx) / n_seq
    info["entropy"] = masked_mean(entropy, mask).item()
    return loss * share, info


# ---------------------------------------------------------------------------
# 6. The update: passes over minibatches of whole sequences
# ---------------------------------------------------------------------------


def update(cfg, policy, value_model, optimizer, batch: dict, generator, pad_id: int | None = None) -> dict:
    """Step 6: ``cfg.update_epochs`` passes over ``batch`` in minibatches; the last step's diagnostics.

    ``loss_on_policy`` is the first step's loss, where every ratio is 1.
    """
    params = [p for group in optimizer.param_groups for p in group["params"]]
    N = batch["mask"].shape[0]
    minibatch_size = -(-N // cfg.num_minibatches)  # sequences per minibatch, rounded up
    micro_size = cfg.micro_batch_size or minibatch_size
    first_loss = None
    for _ in range(cfg.update_epochs):
        order = torch.randperm(N, generator=generator) if cfg.num_minibatches > 1 else torch.arange(N)
        for start in range(0, N, minibatch_size):
            minibatch = order[start : start + minibatch_size]
            n_tok = batch["mask"][minibatch].sum().clamp(min=1.0)
            optimizer.zero_grad(set_to_none=True)
            loss_sum = 0.0
            # Gradient accumulation: the micro-batches' scaled losses add up to the minibatch's gradient.
            for micro_start in range(0, len(minibatch), micro_size):
                micro = minibatch[micro_start : micro_start + micro_size]
                loss, info = minibatch_loss(cfg, policy, value_model, batch, micro, len(minibatch), n_tok, pad_id)
                loss.backward()
                loss_sum += loss.item()
            grad_norm = nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            optimizer.step()
            if first_loss is None:
                first_loss = loss_sum
    return {**info, "loss": loss_sum, "loss_on_policy": first_loss, "grad_norm": float(grad_norm)}


# ---------------------------------------------------------------------------
# 7. The loop
# ---------------------------------------------------------------------------

_LOGGED_AFTER_UPDATE = (
    "loss",
    "loss_on_policy",
    "clip_fraction",
    "silenced",
    "silenced_low_prob",
    "grad_norm",
    "entropy",
)


def _log_round(history: dict, cfg, stats: dict, info: dict, lr: float, seconds: float, completions: int) -> None:
    """Append one round's row to ``history``: its statistics, the update's diagnostics, the running totals."""
    row = {**stats, "lr": lr, "seconds": seconds, "completions": completions}
    for key in _LOGGED_AFTER_UPDATE:
        row[key] = info.get(key, float("nan"))  # nan: a round with no group to train on
    if cfg.algo == "ppo":
        row["value_loss"] = info.get("value_loss", float("nan"))
    for key, value in row.items():
        history.setdefault(key, []).append(value)


def _evaluate(history: dict, eval_fn, policy, round_number: int) -> None:
    """Append ``eval_fn(policy)`` to ``history["eval"]`` with the round, completions and seconds so far."""
    if eval_fn is None:
        return
    evaluations = history["eval"]
    evaluations["iteration"].append(round_number)
    evaluations["completions"].append(history["completions"][-1] if round_number else 0)
    evaluations["seconds"].append(history["seconds"][-1] if round_number else 0.0)
    evaluations["score"].append(eval_fn(policy))


def _set_up(cfg: LMRLConfig, policy, value_model):
    """The validated config, the seeded generator, the frozen reference and Adam over what is trained."""
    cfg = cfg.validate()
    if cfg.algo == "ppo" and value_model is None:
        raise ValueError("value_model: PPO needs a critic (course_lib.tiny_lm.ValueModel(policy), say)")
    generator = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)  # transformers' generate samples from the global RNG
    ref = copy.deepcopy(policy).eval().requires_grad_(False)  # the frozen reference: the policy before RL
    params = list(policy.parameters()) + (list(value_model.parameters()) if cfg.algo == "ppo" else [])
    optimizer = torch.optim.Adam(params, lr=cfg.lr, fused=True)
    return cfg, generator, ref, optimizer


def train(
    policy,
    reward_fn,
    prompt_ids: torch.Tensor,
    cfg: LMRLConfig,
    eos_id: int,
    pad_id: int,
    prompt_mask: torch.Tensor | None = None,
    value_model: nn.Module | None = None,
    eval_fn=None,
    eval_every: int = 25,
    progress: bool = False,
    suppress_pad: bool = True,
    save_fn=None,
    save_every: int = 0,
) -> dict:
    """Step 7: train ``policy`` in place with GRPO or PPO (``cfg.algo``) on the ``(M, P)`` ``prompt_ids``.
    ``reward_fn(prompt_index (B,), completion_ids (B, G, L)) -> (B, G)`` is the verifier; ``prompt_mask`` marks left
    padding; ``value_model`` is PPO's critic (``tiny_lm.ValueModel``). ``eval_fn(policy) -> float`` runs before
    training, every ``eval_every`` rounds and after the last (its time is left out of ``seconds``); ``save_fn(policy,
    round)`` every ``save_every`` rounds and after the last. ``suppress_pad``: the sampler never writes PAD
    (TinyLM), so it is left out of the scored distribution (False for models whose PAD is their EOS).

    Returns a history: per round ``mean_reward, kl, mean_length, lr, loss, clip_fraction``, ... (``seconds`` and
    ``completions`` cumulative) and ``eval``. Ctrl-C stops between rounds and sets ``history["interrupted"]``.
    """
    cfg, generator, ref, optimizer = _set_up(cfg, policy, value_model)
    skip_pad = pad_id if suppress_pad else None
    history: dict = {"eval": {key: [] for key in ("iteration", "completions", "seconds", "score")}}
    policy.eval()
    _evaluate(history, eval_fn, policy, 0)
    seconds, completions = 0.0, 0
    try:  # Ctrl-C stops between rounds and keeps what was done
        for round_index in tqdm(range(cfg.iterations), desc=cfg.algo.upper(), disable=not progress):
            start = time.perf_counter()
            lr = lr_at(round_index, cfg, completions)
            for group in optimizer.param_groups:
                group["lr"] = lr
            batch, stats = rollout(
                cfg, policy, ref, value_model, reward_fn, prompt_ids, prompt_mask, eos_id, pad_id, generator, skip_pad
            )
            policy.train()
            info = {}
            if stats["groups_kept"]:  # dynamic sampling may keep no group at all
                info = update(cfg, policy, value_model, optimizer, batch, generator, skip_pad)
            policy.eval()
            seconds += time.perf_counter() - start
            completions += stats["completions"]
            _log_round(history, cfg, stats, info, lr, seconds, completions)
            budget_spent = cfg.max_completions is not None and completions >= cfg.max_completions
            last = round_index + 1 == cfg.iterations or budget_spent
            if (round_index + 1) % eval_every == 0 or last:
                _evaluate(history, eval_fn, policy, round_index + 1)
            if save_fn is not None and ((save_every and (round_index + 1) % save_every == 0) or last):
                save_fn(policy, round_index + 1)
            if last:
                break
    except KeyboardInterrupt:
        history["interrupted"] = True
    return history
