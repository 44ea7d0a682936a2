"""One loop that trains a causal language model with RL: GRPO (and its family) or PPO with a value model.

The shape of TRL's GRPOTrainer, OpenRLHF and verl, small enough to read top to bottom like CleanRL's ``ppo.py``.
The config is :class:`course_lib.lm_rl_config.LMRLConfig` (``LMRLConfig.grpo(...)``, ``LMRLConfig.ppo(...)``);
this file is what a run shares (:class:`Run`), then each step in the order :func:`loop` calls it:

0. the learning rate of the round (:func:`lr_at`);
1-2. sample ``G`` completions of each of ``B`` prompts and score them with the verifier (:func:`collect_groups`;
   DAPO's dynamic sampling draws again for the groups whose rewards are all equal);
3. ``logp_old``, ``logp_ref`` and, for PPO, ``values_old``, without gradient (:func:`score_tokens`);
4. advantages (:func:`advantages`): GRPO compares each completion with its group (Shao et al. 2024,
   "DeepSeekMath", eq. 3); PPO takes a per-token KL off the reward, adds the score at the last token and runs GAE
   against the value model (Ouyang et al. 2022, "InstructGPT", eq. 2). :func:`rollout` runs steps 1 to 4;
5. the loss of a minibatch (:func:`minibatch_loss`): chapter 06's ``grpo_loss``, a chapter 11 variant
   (``policy_losses.POLICY_LOSSES``) or chapter 05's ``PPOLoss``;
6. ``update_epochs`` passes over the batch in minibatches, gradients accumulated and clipped (:func:`update`);
7. the loop (:func:`loop`, and :func:`train`, which sets a run up and calls it).

A *round* samples a fresh batch and updates on it; a *pass* goes once over that batch; a *step* is one optimiser
step on one minibatch. Shapes: ``B`` prompts, ``G`` completions per prompt, ``N = B * G`` sequences, ``P`` prompt
tokens, ``L`` completion tokens, ``V`` vocabulary.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from einops import rearrange, repeat
from torch import nn
from tqdm.auto import tqdm

from course_lib import family
from course_lib.family_diagnostics import policy_loss_diagnostics
from course_lib.gae import compute_gae
from course_lib.grpo import aggregate_loss, group_advantages, grpo_loss
from course_lib.kl import kl_estimate
from course_lib.lm_rl_config import LMRLConfig
from course_lib.lm_sampling import completion_mask, sample_completions, token_logps, token_values
from course_lib.masked import masked_mean
from course_lib.policy_losses import POLICY_LOSSES
from course_lib.ppo import PPOLoss, explained_variance
from course_lib.tiny_lm import TinyLM


# --- 0. What a run shares; the learning rate of a round ---
@dataclass
class Run:
    """What every step of one run reads: the models, the verifier, the prompts, the special tokens, the generator."""

    policy: nn.Module  # trained in place
    ref: nn.Module  # the frozen reference: the policy before RL
    value_model: nn.Module | None  # PPO's critic (tiny_lm.ValueModel); None for GRPO
    reward_fn: Callable  # the verifier: (prompt_index (B,), completion_ids (B, G, L)) -> (B, G)
    prompt_ids: torch.Tensor  # (M, P) the training prompts
    prompt_mask: torch.Tensor | None  # (M, P) 0 at left padding, or None
    eos_id: int
    pad_id: int
    scored_pad: int | None  # PAD, left out of the scored distribution (TinyLM never samples it); None: PAD is EOS
    generator: torch.Generator  # seeds the prompt order, the sampling and the minibatches


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


# --- 1-2. Sample and score groups ---
@dataclass
class Groups:
    """``G`` completions of each of ``B`` prompts and their rewards."""

    prompt_index: torch.Tensor  # (B,) which training prompts were drawn
    completion_ids: torch.Tensor  # (B, G, L) the sampled completions, PAD after EOS
    scores: torch.Tensor  # (B, G) the verifier's reward of each completion (DAPO's overlong penalty included)
    logp_old: torch.Tensor | None = None  # (B, G, L) the sampler's log-prob of each token (TinyLM's), or None


def _prompts(run: Run, pick: torch.Tensor):
    """The prompts ``pick`` and their mask, without the columns that are padding in every one of them."""
    if run.prompt_mask is None:
        return run.prompt_ids[pick], None
    used = run.prompt_mask[pick].any(0)  # (P,): left padding that no chosen prompt needs is dropped
    return run.prompt_ids[pick][:, used], run.prompt_mask[pick][:, used]


def sample_groups(cfg: LMRLConfig, run: Run, n_prompts: int):
    """Step 1: draw ``n_prompts`` training prompts and sample ``G`` completions of each: ``(n,), (n, G, L)``, and
    the ``(n, G, L)`` log-probs the sampler drew them with where it hands them back (TinyLM's), else None."""
    pick = torch.randperm(run.prompt_ids.shape[0], generator=run.generator)[:n_prompts]  # (n,)
    ids, mask = _prompts(run, pick)
    G, L = cfg.group_size, cfg.max_new_tokens
    with_logps = isinstance(run.policy, TinyLM) and run.policy.fast_paths and run.scored_pad == run.pad_id
    draw = {"generator": run.generator, "top_p": cfg.top_p, "return_logps": with_logps}
    sampled = sample_completions(run.policy, ids, mask, G, L, run.eos_id, run.pad_id, cfg.temperature, **draw)
    flat, logp = sampled if with_logps else (sampled, None)  # (n * G, L): a prompt's G completions on adjacent rows
    return pick, *(None if x is None else rearrange(x, "(B G) L -> B G L", G=G) for x in (flat, logp))


def score_groups(cfg: LMRLConfig, run: Run, pick: torch.Tensor, completion_ids: torch.Tensor) -> torch.Tensor:
    """Step 2: the verifier's ``(B, G)`` rewards, plus DAPO's soft overlong penalty when it is on."""
    scores = run.reward_fn(pick, completion_ids).float()  # (B, G)
    if cfg.overlong_cache:
        lengths = completion_mask(completion_ids, run.eos_id).sum(-1)  # (B, G)
        scores = scores + family.soft_overlong_penalty(lengths, cfg.max_new_tokens, cfg.overlong_cache)
    return scores


def collect_groups(cfg: LMRLConfig, run: Run) -> tuple[Groups, torch.Tensor]:
    """Steps 1-2 of a round: ``B`` groups, sampled and scored.

    With DAPO's dynamic sampling (Yu et al. 2025, section 3.2), a group whose rewards are all equal has zero
    advantage everywhere and is dropped, and only the missing groups are drawn again, up to ``max_sampling_draws``
    draws; the round then trains on the groups it has (at most ``B``).

    Returns the :class:`Groups` to train on, and the ``(n, G)`` rewards of every group sampled this round, kept or
    not (what the round's mean reward reports).
    """
    kept: list[Groups] = []
    sampled_scores: list[torch.Tensor] = []
    missing = cfg.prompts_per_step
    for _ in range(cfg.max_sampling_draws if cfg.dynamic_sampling else 1):
        pick, completion_ids, logp = sample_groups(cfg, run, missing)
        scores = score_groups(cfg, run, pick, completion_ids)
        sampled_scores.append(scores)
        if cfg.dynamic_sampling:
            teaches = family.dynamic_sampling_mask(scores)  # (n,): some spread in the group's rewards
            pick, completion_ids, scores = pick[teaches], completion_ids[teaches], scores[teaches]
            logp = None if logp is None else logp[teaches]
        kept.append(Groups(pick, completion_ids, scores, logp))
        missing -= len(pick)
        if missing == 0:
            break
    prompt_index = torch.cat([g.prompt_index for g in kept])
    completion_ids = torch.cat([g.completion_ids for g in kept])
    scores = torch.cat([g.scores for g in kept])
    logp_old = None if kept[0].logp_old is None else torch.cat([g.logp_old for g in kept])
    return Groups(prompt_index, completion_ids, scores, logp_old), torch.cat(sampled_scores)


# --- 3. Log-probs (and values) of the sampled tokens ---
@torch.no_grad()
def score_tokens(cfg: LMRLConfig, run: Run, batch: dict) -> None:
    """Step 3: ``logp_old``, ``logp_ref`` and, for PPO, ``values_old``, each ``(N, L)``, written into ``batch``.

    One forward pass of each model over prompt + completion, without gradient: the policy that sampled (its
    log-probs are the constants of the ratio; a ``logp_old`` in ``batch`` is the sampler's own, kept), the frozen
    reference, and PPO's value model."""
    args = (batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"], cfg.temperature, run.scored_pad)
    if "logp_old" not in batch:
        batch["logp_old"] = token_logps(run.policy, *args)  # (N, L)
    batch["logp_ref"] = token_logps(run.ref, *args)  # (N, L)
    if cfg.algo == "ppo":
        batch["values_old"] = token_values(run.value_model, batch["prompt_ids"], batch["completion_ids"])  # (N, L)


# --- 4. Advantages: the group (GRPO) or GAE over tokens (PPO) ---
def _whiten(adv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``adv``, ``(N, L)`` or ``(N,)``, whitened over the batch's valid tokens (TRL's PPO and OpenRLHF do)."""
    per_token = adv if adv.dim() == 2 else repeat(adv, "N -> N L", L=mask.shape[1])
    valid = mask > 0
    mean = per_token[valid].mean()
    std = per_token[valid].std().clamp(min=1e-8)
    return (adv - mean) / std


def _group_advantages(cfg: LMRLConfig, scores: torch.Tensor, kl_tokens: torch.Tensor) -> torch.Tensor:
    """GRPO's ``(N,)`` advantages, one per completion: each completion against its own group."""
    rewards = scores  # (B, G)
    if cfg.kl_placement == "reward":  # the sequence's KL, summed over its tokens, comes off its reward
        rewards = scores - cfg.kl_coef * rearrange(kl_tokens.sum(-1), "(B G) -> B G", G=scores.shape[1])
    if cfg.adv_estimator == "rloo":  # chapter 11: the mean of the other completions
        adv = family.rloo_advantages(rewards)  # (B, G)
    elif cfg.adv_estimator == "reinforce++":  # chapter 11: centred in the group, scaled over the batch
        adv = family.reinforce_pp_advantages(rewards)  # (B, G)
    else:
        adv = group_advantages(rewards, normalize_std=cfg.normalize_std)  # (B, G)
    return rearrange(adv, "B G -> (B G)")  # (N,)


def _gae_advantages(cfg: LMRLConfig, scores, mask, kl_tokens, values_old) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's ``(N, L)`` advantages and value targets: reward_t = -beta * KL_t, plus the score at the last valid
    token; GAE over the completion against the value model."""
    last = (mask.sum(-1).long() - 1).clamp(min=0)  # (N,): index of the last valid token
    at_last = nn.functional.one_hot(last, mask.shape[1]).to(mask.dtype)  # (N, L)
    token_rewards = -cfg.kl_coef * kl_tokens + at_last * rearrange(scores, "B G -> (B G) 1")  # (N, L)
    no_bootstrap = torch.zeros(mask.shape[0])  # the completion ends at its last token: nothing follows
    return compute_gae(token_rewards, values_old * mask, at_last.bool(), no_bootstrap, cfg.gamma, cfg.lam)


def advantages(cfg: LMRLConfig, scores, mask, logp_old, logp_ref, values_old=None):
    """Step 4: the advantages and, for PPO, the value model's targets.

    ``scores`` are ``(B, G)``; ``mask``, ``logp_old``, ``logp_ref`` and PPO's ``values_old`` are ``(N, L)``.
    Returns GRPO's ``(N,)`` advantages, one per completion, and None; or PPO's ``(N, L)`` advantages, one per
    token, and its ``(N, L)`` value targets.
    """
    # The KL in the reward (InstructGPT's, PPO's): k1 = logp_old - logp_ref at every valid token.
    kl_tokens = torch.where(mask > 0, logp_old - logp_ref, torch.zeros_like(logp_old))  # (N, L)
    if cfg.algo == "grpo":
        adv = _group_advantages(cfg, scores, kl_tokens)  # (N,)
        returns = None
    else:
        adv, returns = _gae_advantages(cfg, scores, mask, kl_tokens, values_old)  # (N, L) each
    if cfg.whiten_advantages:
        adv = _whiten(adv, mask)
    if cfg.algo == "ppo":
        adv = adv * mask  # padding carries no advantage
    return adv, returns


def rollout(cfg: LMRLConfig, run: Run) -> tuple[dict, dict]:
    """Steps 1-4 of one round: ``(batch, stats)``, the ``(N, ...)`` tensors :func:`update` reads and the round's
    statistics."""
    groups, sampled_scores = collect_groups(cfg, run)
    G = cfg.group_size
    ids, pmask = _prompts(run, groups.prompt_index)
    completion_ids = rearrange(groups.completion_ids, "B G L -> (B G) L")
    batch = {
        "prompt_ids": repeat(ids, "B P -> (B G) P", G=G),
        "prompt_mask": None if pmask is None else repeat(pmask, "B P -> (B G) P", G=G),
        "completion_ids": completion_ids,
        "mask": completion_mask(completion_ids, run.eos_id),  # (N, L)
    }
    if groups.logp_old is not None:  # the sampler's log-probs: logp_old without a pass of its own
        batch["logp_old"] = rearrange(groups.logp_old, "B G L -> (B G) L")
    if cfg.overlong_filter:  # DAPO: a completion cut off without EOS leaves the loss
        truncated = ~(completion_ids == run.eos_id).any(-1)  # (N,)
        batch["mask"] = family.filter_truncated(batch["mask"], truncated)
    score_tokens(cfg, run, batch)
    with torch.no_grad():
        values_old = batch.get("values_old")
        adv, returns = advantages(cfg, groups.scores, batch["mask"], batch["logp_old"], batch["logp_ref"], values_old)
    batch["adv"] = adv
    batch["returns"] = returns
    return batch, _round_stats(cfg, batch, sampled_scores, groups)


def _round_stats(cfg: LMRLConfig, batch: dict, sampled_scores: torch.Tensor, groups: Groups) -> dict:
    """What a round logs before its update: rewards, the KL to the reference, lengths, DAPO's counts."""
    mask = batch["mask"]
    stats = {
        "mean_reward": sampled_scores.mean().item(),
        "kl": masked_mean(kl_estimate(batch["logp_old"], batch["logp_ref"], "k3"), mask).item(),
        "mean_length": mask.sum(-1).mean().item(),
        "frac_zero_std": (sampled_scores.std(-1) == 0).float().mean().item(),
        "completions": sampled_scores.numel(),
        "groups_kept": len(groups.scores),
    }
    if cfg.algo == "ppo":  # the share of the returns' variance that the value model predicted
        valid = mask > 0
        stats["explained_variance"] = explained_variance(batch["values_old"][valid], batch["returns"][valid])
    return stats


# --- 5. The loss of a minibatch ---
def _grpo_family_loss(cfg: LMRLConfig, logp: torch.Tensor, part: dict) -> torch.Tensor:
    """GRPO and its family: the loss of the minibatch ``part`` (advantages ``(n,)``, one per completion)."""
    kl_in_loss = cfg.kl_placement == "loss" and cfg.kl_coef > 0
    if cfg.policy_loss == "clip":
        # Chapter 06's grpo_loss, the function students write. Its (B, G, L) is (n, 1, L) here: the advantages
        # were computed over whole groups before the minibatches split them, so each completion stands alone.
        loss, _ = grpo_loss(
            rearrange(logp, "n L -> n 1 L"),
            rearrange(part["logp_old"], "n L -> n 1 L"),
            rearrange(part["logp_ref"], "n L -> n 1 L") if kl_in_loss else None,
            None,
            rearrange(part["mask"], "n L -> n 1 L"),
            clip_eps=cfg.clip_eps,
            kl_coef=cfg.kl_coef,
            loss_agg=cfg.loss_agg,
            max_len=cfg.max_new_tokens,
            clip_eps_high=cfg.clip_eps_high,
            adv=rearrange(part["adv"], "n -> n 1"),
        )
        return loss
    # Chapter 11's variants: one signature, so the variant is a table lookup.
    variant_loss = POLICY_LOSSES[cfg.policy_loss]
    per_token = variant_loss(logp, part["logp_old"], part["adv"], part["mask"], cfg.clip_eps, cfg.clip_eps_high)
    if kl_in_loss:
        per_token = per_token + cfg.kl_coef * kl_estimate(logp, part["logp_ref"], "k3")  # (n, L)
    return aggregate_loss(per_token, part["mask"], cfg.loss_agg, max_len=cfg.max_new_tokens)


def _ppo_loss(cfg: LMRLConfig, run: Run, logp, entropy, part: dict) -> tuple[torch.Tensor, dict]:
    """PPO: chapter 05's ``PPOLoss`` (clipped surrogate averaged over valid tokens, plus the value loss)."""
    values = token_values(run.value_model, part["prompt_ids"], part["completion_ids"])  # (n, L)
    ppo_loss = PPOLoss(cfg.clip_eps, cfg.value_loss_coef, entropy_coef=0.0)
    loss = ppo_loss(logp, part["logp_old"], values, part["returns"], part["adv"], entropy, mask=part["mask"])
    return loss, dict(ppo_loss.info)


def minibatch_loss(cfg: LMRLConfig, run: Run, batch: dict, idx: torch.Tensor, n_seq: int, n_tok: torch.Tensor):
    """Step 5: the loss of the sequences ``idx`` of ``batch``, with gradient, and its diagnostics.

    The loss is scaled by the share of the minibatch that ``idx`` is (``n_seq`` sequences and ``n_tok`` valid
    tokens in all), so that summing it over the minibatch's micro-batches gives the minibatch's loss.
    """
    part = {key: None if value is None else value[idx] for key, value in batch.items()}
    ids = (part["prompt_ids"], part["prompt_mask"], part["completion_ids"])
    logp, entropy = token_logps(run.policy, *ids, cfg.temperature, run.scored_pad, with_entropy=True)  # (n, L) each
    mask = part["mask"]
    if cfg.algo == "ppo":
        loss, info = _ppo_loss(cfg, run, logp, entropy, part)
    else:
        loss = _grpo_family_loss(cfg, logp, part)
        # What the loss does to drifted tokens, each variant measured on its own quantity (GSPO: the sequence ratio).
        info = policy_loss_diagnostics(
            cfg.policy_loss, logp, part["logp_old"], part["adv"], mask, cfg.clip_eps, cfg.clip_eps_high
        )
    # A token mean averages over the minibatch's tokens, the other modes over its sequences.
    share = mask.sum() / n_tok if cfg.loss_agg == "token-mean" else len(idx) / n_seq
    info["entropy"] = masked_mean(entropy, mask).item()
    return loss * share, info


# --- 6. The update: passes over minibatches of whole sequences ---
def _step(cfg: LMRLConfig, run: Run, optimizer, batch: dict, minibatch: torch.Tensor) -> tuple[float, float, dict]:
    """One optimiser step on ``minibatch``, its gradient accumulated over micro-batches; ``(loss, grad_norm, info)``."""
    n_tok = batch["mask"][minibatch].sum().clamp(min=1.0)
    micro_size = cfg.micro_batch_size or len(minibatch)
    optimizer.zero_grad(set_to_none=True)
    loss_sum = 0.0
    # Gradient accumulation: the micro-batches' scaled losses add up to the minibatch's gradient.
    for start in range(0, len(minibatch), micro_size):
        micro = minibatch[start : start + micro_size]
        loss, info = minibatch_loss(cfg, run, batch, micro, len(minibatch), n_tok)
        loss.backward()
        loss_sum += loss.item()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    grad_norm = nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
    optimizer.step()
    return loss_sum, float(grad_norm), info


def update(cfg: LMRLConfig, run: Run, optimizer, batch: dict) -> dict:
    """Step 6: ``cfg.update_epochs`` passes over ``batch`` in minibatches; the last step's diagnostics.

    ``loss_on_policy`` is the first step's loss, where every ratio is 1.
    """
    N = batch["mask"].shape[0]
    minibatch_size = -(-N // cfg.num_minibatches)  # sequences per minibatch, rounded up
    losses = []
    for _ in range(cfg.update_epochs):
        order = torch.randperm(N, generator=run.generator) if cfg.num_minibatches > 1 else torch.arange(N)
        for start in range(0, N, minibatch_size):
            loss, grad_norm, info = _step(cfg, run, optimizer, batch, order[start : start + minibatch_size])
            losses.append(loss)
    return {**info, "loss": losses[-1], "loss_on_policy": losses[0], "grad_norm": grad_norm}


# --- 7. The loop ---
_UPDATE_KEYS = ("loss", "loss_on_policy", "clip_fraction", "silenced", "silenced_low_prob", "grad_norm", "entropy")


def _log_round(history: dict, cfg: LMRLConfig, stats: dict, info: dict, lr: float, seconds: float, completions: int):
    """Append one round's row to ``history``: its statistics, the update's diagnostics, the running totals."""
    row = {**stats, "lr": lr, "seconds": seconds, "completions": completions}
    for key in _UPDATE_KEYS:  # what each round logs of its update
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


def make_run(
    cfg: LMRLConfig,
    policy,
    reward_fn,
    prompt_ids,
    eos_id,
    pad_id,
    *,
    prompt_mask=None,
    value_model=None,
    suppress_pad: bool = True,
) -> tuple[Run, torch.optim.Adam]:
    """The run's shared state (:class:`Run`: a frozen copy of ``policy`` as the reference, a seeded generator) and
    Adam over what is trained. The arguments are :func:`train`'s."""
    if cfg.algo == "ppo" and value_model is None:
        raise ValueError("value_model: PPO needs a critic (course_lib.tiny_lm.ValueModel(policy), say)")
    generator = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)  # transformers' generate samples from the global RNG
    run = Run(
        policy=policy,
        ref=copy.deepcopy(policy).eval().requires_grad_(False),  # the frozen reference: the policy before RL
        value_model=value_model,
        reward_fn=reward_fn,
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask,
        eos_id=eos_id,
        pad_id=pad_id,
        scored_pad=pad_id if suppress_pad else None,
        generator=generator,
    )
    params = list(policy.parameters()) + (list(value_model.parameters()) if cfg.algo == "ppo" else [])
    return run, torch.optim.Adam(params, lr=cfg.lr, fused=True)


def loop(
    cfg: LMRLConfig, run: Run, optimizer, *, eval_fn=None, eval_every=25, save_fn=None, save_every=0, progress=False
) -> dict:
    """Step 7: ``cfg.iterations`` rounds (or until the sample budget is spent) of rollout and update; the history."""
    history: dict = {"eval": {key: [] for key in ("iteration", "completions", "seconds", "score")}}
    run.policy.eval()
    _evaluate(history, eval_fn, run.policy, 0)
    seconds, completions = 0.0, 0
    try:  # Ctrl-C stops between rounds and keeps what was done
        for round_index in tqdm(range(cfg.iterations), desc=cfg.algo.upper(), disable=not progress):
            start = time.perf_counter()
            lr = lr_at(round_index, cfg, completions)
            for group in optimizer.param_groups:
                group["lr"] = lr
            batch, stats = rollout(cfg, run)
            run.policy.train()
            info = update(cfg, run, optimizer, batch) if stats["groups_kept"] else {}  # dynamic sampling: maybe none
            run.policy.eval()
            seconds += time.perf_counter() - start
            completions += stats["completions"]
            _log_round(history, cfg, stats, info, lr, seconds, completions)
            rounds = round_index + 1
            last = rounds == cfg.iterations or (cfg.max_completions is not None and completions >= cfg.max_completions)
            if rounds % eval_every == 0 or last:
                _evaluate(history, eval_fn, run.policy, rounds)  # its time is left out of seconds
            if save_fn is not None and ((save_every and rounds % save_every == 0) or last):
                save_fn(run.policy, rounds)
            if last:
                break
    except KeyboardInterrupt:
        history["interrupted"] = True
    return history


def train(
    policy,
    reward_fn,
    prompt_ids,
    cfg: LMRLConfig,
    eos_id: int,
    pad_id: int,
    *,
    prompt_mask=None,
    value_model=None,
    suppress_pad: bool = True,
    **hooks,
) -> dict:
    """Train ``policy`` in place with GRPO or PPO (``cfg.algo``) on the ``(M, P)`` ``prompt_ids``.

    ``reward_fn(prompt_index (B,), completion_ids (B, G, L)) -> (B, G)`` is the verifier; ``prompt_mask`` marks left
    padding; ``value_model`` is PPO's critic (``tiny_lm.ValueModel``); ``suppress_pad``: the sampler never writes PAD
    (TinyLM), so it is left out of the scored distribution (False where PAD is EOS). ``hooks``, :func:`loop`'s:
    ``eval_fn(policy) -> float`` before training, every ``eval_every`` rounds and after the last; ``save_fn(policy,
    round)`` every ``save_every`` rounds and after the last; ``progress`` shows a bar. Returns the history: per
    round ``mean_reward, kl, mean_length, lr, loss, clip_fraction``, ..., ``seconds`` and ``completions`` (cumulative),
    and ``eval``; Ctrl-C stops between rounds and sets ``history["interrupted"]``.
    """
    cfg = cfg.validate()  # once: the steps read a validated config
    run, optimizer = make_run(
        cfg,
        policy,
        reward_fn,
        prompt_ids,
        eos_id,
        pad_id,
        prompt_mask=prompt_mask,
        value_model=value_model,
        suppress_pad=suppress_pad,
    )
    return loop(cfg, run, optimizer, **hooks)
