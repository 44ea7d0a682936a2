"""One loop that trains a causal language model with RL: GRPO (and its family) or PPO with a value model.

It has the shape of the LM trainers (TRL's GRPOTrainer, OpenRLHF, verl), small enough to read top to
bottom like CleanRL's ``ppo.py``. One iteration of :func:`train`:

1. take ``B`` prompts and sample ``G`` completions of each, stopping at EOS (``sample_completions``);
2. score every completion with a program, the verifier (``reward_fn``);
3. one forward pass each over prompt + completion, without gradient: ``logp_old`` of the policy that sampled,
   ``logp_ref`` of the frozen reference (``token_logps``) and, for PPO, ``values_old`` of the value model;
4. advantages, the one place where the algorithms differ (:func:`advantages`):
   GRPO compares each completion with its group (Shao et al. 2024, "DeepSeekMath", eq. 3);
   PPO folds a per-token KL penalty into the reward, adds the score at the last token and runs GAE over the
   completion axis against the value model (Ouyang et al. 2022, "InstructGPT", eq. 2);
5. ``update_epochs`` passes over minibatches of whole sequences: the clipped surrogate, plus GRPO's
   KL term in the loss or PPO's value loss, gradients clipped, one learning-rate schedule (:func:`lr_at`).

Steps 1 and 3 read a language model, TinyLM or a ``transformers`` model alike: they are the small pieces of
:mod:`course_lib.lm_sampling` (the completion mask, sampling, per-token log-probs and values), imported here
and used by nothing else.

Shapes: ``B`` prompts, ``G`` completions per prompt, ``N = B * G`` sequences, ``P`` prompt tokens,
``L`` completion tokens, ``V`` vocabulary.
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
from course_lib.gae import compute_gae
from course_lib.grpo import LOSS_AGG_MODES, aggregate_loss, group_advantages
from course_lib.kl import kl_estimate
from course_lib.lm_sampling import completion_mask, model_logits, sample_completions, token_logps, token_values
from course_lib.masked import masked_mean
from course_lib.ppo import PPOLoss, clip_diagnostics, clipped_surrogate, explained_variance

__all__ = [
    "LMRLConfig",
    "lr_at",
    "completion_mask",
    "model_logits",
    "sample_completions",
    "token_logps",
    "token_values",
    "advantages",
    "update",
    "rollout",
    "train",
]


@dataclass
class LMRLConfig:
    """Hyperparameters of :func:`train`; GRPO's and PPO's differ only where marked."""

    algo: str = "grpo"
    """``"grpo"`` (advantages from the group) or ``"ppo"`` (GAE against a value model)."""
    iterations: int = 250
    """Rounds of sample-then-update; each samples a fresh batch of ``B * G`` completions."""
    max_completions: int | None = None
    """A sample budget: stop once this many completions were sampled, and decay the learning rate with the
    share of it spent (dynamic sampling draws more than ``B * G`` per round); None: ``iterations`` rounds."""
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
    update_epochs: int = 4
    """Passes over each batch (PPO's K epochs; the ratio leaves 1 after the first step)."""
    num_minibatches: int = 1
    """Minibatches of whole sequences per pass."""
    micro_batch_size: int | None = None
    """Sequences per forward pass, gradients accumulated over a minibatch (None: the whole minibatch)."""
    lr: float = 2e-3
    """Peak learning rate of Adam."""
    warmup_iterations: int = 0
    """The learning rate rises linearly from 0 over this many rounds..."""
    lr_schedule: str = "linear"
    """...then stays (``"constant"``) or falls by the last round (``"linear"``, ``"cosine"``)..."""
    min_lr_ratio: float = 0.0
    """...to this share of ``lr`` (verl's ``min_lr_ratio``; 0: to zero)."""
    clip_eps: float = 0.2
    """PPO's clip range of the ratio."""
    clip_eps_high: float | None = None
    """Upper clip range (DAPO's clip-higher); None means clip_eps."""
    kl_coef: float = 0.02
    """Weight of the KL to the frozen reference: k3 in GRPO's loss, k1 in PPO's per-token reward."""
    normalize_std: bool = True
    """GRPO: divide group-centred rewards by the group's std (False is Dr. GRPO)."""
    loss_agg: str = "seq-mean-token-mean"
    """How token losses are averaged (course_lib.grpo.aggregate_loss); PPO uses "token-mean"."""
    adv_estimator: str = "grpo"
    """The group's advantage (course_lib.family): ``"grpo"``, ``"rloo"`` (leave-one-out), ``"reinforce++"``."""
    policy_loss: str = "clip"
    """The per-token loss (course_lib.family): PPO's ``"clip"``, ``"gspo"``, ``"cispo"``, ``"gmpo"``, ``"sapo"``."""
    dynamic_sampling: bool = False
    """DAPO: drop groups whose rewards are all equal and sample more prompts until B groups are kept."""
    overlong_filter: bool = False
    """DAPO: completions cut off without EOS leave the loss."""
    overlong_cache: int = 0
    """DAPO's soft overlong punishment: the last this many tokens before max_new_tokens cost reward (0: off)."""
    max_grad_norm: float = 1.0
    """The global gradient norm is clipped to this before every step."""
    gamma: float = 1.0
    """PPO: discount over the completion's tokens (1: the score at the end is what counts)."""
    lam: float = 0.95
    """PPO: GAE's lambda."""
    vf_coef: float = 0.5
    """PPO: weight of the value loss."""
    critic_warmup_iterations: int = 0
    """PPO: the first rounds train the value model only, the policy held still (OpenRLHF's freezing_actor_steps)."""
    critic_lr: float | None = None
    """PPO: the value model's peak learning rate, on the same schedule (None: ``lr``)."""
    clip_grad_per_model: bool = False
    """PPO: clip the policy's and the value model's gradient norms each on its own, as two optimisers would."""
    seed: int = 0
    """Seeds the prompt order and the sampling."""

    def validate(self) -> "LMRLConfig":
        v = _validate
        v.require_choice("algo", self.algo, ("grpo", "ppo"))
        for name in (
            "iterations",
            "prompts_per_step",
            "group_size",
            "max_new_tokens",
            "update_epochs",
            "num_minibatches",
        ):
            v.require_int(name, getattr(self, name), minimum=1)
        if self.algo == "grpo" and self.group_size < 2:
            raise ValueError(
                f"group_size: GRPO needs at least 2 (a group of one has no baseline), got {self.group_size}"
            )
        v.require_int("micro_batch_size", self.micro_batch_size or 1, minimum=1)
        if self.max_completions is not None:
            v.require_int("max_completions", self.max_completions, minimum=1)
        for name in ("warmup_iterations", "critic_warmup_iterations", "overlong_cache"):
            v.require_int(name, getattr(self, name), minimum=0)
        v.require_choice("lr_schedule", self.lr_schedule, ("constant", "linear", "cosine"))
        for name in ("lr", "temperature", "max_grad_norm", "top_p", "critic_lr")[: 5 if self.critic_lr else 4]:
            v.require_positive(name, getattr(self, name))
        for name in ("kl_coef", "vf_coef"):
            v.require_non_negative(name, getattr(self, name))
        for name in ("gamma", "lam", "top_p", "min_lr_ratio"):
            v.require_unit_interval(name, getattr(self, name))
        v.require_clip_range(self.clip_eps, self.clip_eps_high)
        v.require_choice("loss_agg", self.loss_agg, LOSS_AGG_MODES)
        v.require_choice("adv_estimator", self.adv_estimator, ("grpo", "rloo", "reinforce++"))
        v.require_choice("policy_loss", self.policy_loss, ("clip", "gspo", "cispo", "gmpo", "sapo"))
        for name, default in (
            ("clip_eps_high", None),
            ("policy_loss", "clip"),
            ("adv_estimator", "grpo"),
            ("normalize_std", True),
        ):  # PPO's branch is chapter 05's PPOLoss: refuse, not ignore
            if self.algo == "ppo" and getattr(self, name) != default:
                raise ValueError(
                    f"{name}: a switch of GRPO's branch; algo='ppo' takes {default!r}, got {getattr(self, name)!r}"
                )
        return self


def lr_at(iteration: int, cfg: LMRLConfig, completions: int = 0) -> float:
    """The learning rate of round ``iteration`` (0-based): linear warm-up, then the schedule's decay
    (with ``cfg.max_completions``, over the rounds or the ``completions`` already sampled, whichever is further)."""
    if iteration < cfg.warmup_iterations:
        return cfg.lr * (iteration + 1) / (cfg.warmup_iterations + 1)
    progress = (iteration - cfg.warmup_iterations) / max(cfg.iterations - cfg.warmup_iterations, 1)  # 0 .. <1
    if cfg.max_completions:
        progress = max(progress, min(completions / cfg.max_completions, 1.0))
    if cfg.lr_schedule == "constant":
        return cfg.lr
    left = 1.0 - progress if cfg.lr_schedule == "linear" else 0.5 * (1.0 + math.cos(math.pi * progress))  # 1 .. 0
    return cfg.lr * (cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * left)


# ---------------------------------------------------------------------------
# 4. Advantages: the group (GRPO) or GAE over tokens (PPO)
# ---------------------------------------------------------------------------


def advantages(
    cfg: LMRLConfig,
    scores: torch.Tensor,
    mask: torch.Tensor,
    logp_old: torch.Tensor,
    logp_ref: torch.Tensor,
    values_old: torch.Tensor | None = None,
):
    """Per-token advantages ``(N, L)`` and, for PPO, the value targets ``(N, L)`` (else None).

    Args:
        scores: ``(B, G)`` the verifier's reward of each completion; mask: ``(N, L)``.
        logp_old, logp_ref: ``(N, L)`` of the sampling policy and the reference; values_old: ``(N, L)`` (PPO).
    """
    if cfg.algo == "grpo":
        # ALGO LOGIC (GRPO): each completion against its own group; every token shares its completion's advantage.
        if cfg.adv_estimator == "rloo":  # the family's switch (course_lib.family): the mean of the others
            adv = family.rloo_advantages(scores)  # (B, G)
        elif cfg.adv_estimator == "reinforce++":  # centred in the group, scaled over the whole batch
            adv = family.reinforce_pp_advantages(scores)
        else:
            adv = group_advantages(scores, normalize_std=cfg.normalize_std)
        return repeat(adv, "B G -> (B G) L", L=mask.shape[1]) * mask, None
    # ALGO LOGIC (PPO): reward_t = -beta * KL_t + score at the last valid token; GAE over the completion.
    last = (mask.sum(-1).long() - 1).clamp(min=0)  # (N,) index of the last valid token
    at_last = nn.functional.one_hot(last, mask.shape[1]).to(mask.dtype)  # (N, L)
    rewards = -cfg.kl_coef * (logp_old - logp_ref) * mask + at_last * rearrange(scores, "B G -> (B G) 1")
    adv, returns = compute_gae(
        rewards, values_old * mask, at_last.bool(), torch.zeros(mask.shape[0]), cfg.gamma, cfg.lam
    )  # (N, L) each
    valid = mask > 0  # whiten over the valid tokens of the batch, as TRL's PPO and OpenRLHF do
    mean, std = adv[valid].mean(), adv[valid].std().clamp(min=1e-8)
    return (adv - mean) / std * mask, returns


# ---------------------------------------------------------------------------
# 5. The update: K passes over minibatches of whole sequences
# ---------------------------------------------------------------------------


def _policy_loss(cfg: LMRLConfig, logp, logp_old, adv, mask) -> torch.Tensor:
    """``(n, L)`` per-token policy loss: PPO's clipped surrogate, or one of the family's (``cfg.policy_loss``)."""
    adv_seq = (adv * mask).sum(-1) / mask.sum(-1).clamp(min=1)  # (n,): the sequence variants' one advantage
    if cfg.policy_loss in ("gspo", "gmpo"):  # sequence-level: one value per response, at each of its tokens
        sequence_loss = family.gspo_loss if cfg.policy_loss == "gspo" else family.gmpo_loss
        return sequence_loss(logp, logp_old, adv_seq, mask, cfg.clip_eps, cfg.clip_eps_high)
    if cfg.policy_loss == "cispo":
        return family.cispo_loss(logp, logp_old, adv, cfg.clip_eps_high or cfg.clip_eps)
    if cfg.policy_loss == "sapo":
        return family.sapo_loss(logp, logp_old, adv)
    return clipped_surrogate(logp, logp_old, adv, cfg.clip_eps, cfg.clip_eps_high)


def _loss(
    cfg: LMRLConfig, policy, value_model, batch: dict, idx: torch.Tensor, n_seq: int, n_tok: float, pad_id: int | None
):
    """The loss of the sequences ``idx``, scaled so that summing it over a minibatch's micro-batches
    gives the minibatch's loss (``n_seq`` sequences, ``n_tok`` valid tokens in that minibatch)."""
    b = {k: (None if v is None else v[idx]) for k, v in batch.items()}
    logp, entropy = token_logps(
        policy, b["prompt_ids"], b["prompt_mask"], b["completion_ids"], cfg.temperature, pad_id, with_entropy=True
    )  # (n, L) each
    mask = b["mask"]
    if cfg.algo == "ppo":
        values = token_values(value_model, b["prompt_ids"], b["completion_ids"])  # (n, L)
        ppo_loss = PPOLoss(cfg.clip_eps, cfg.vf_coef, entropy_coef=0.0)
        loss = ppo_loss(logp, b["logp_old"], values, b["returns"], b["adv"], entropy, mask=mask)
        return loss * mask.sum() / n_tok, {**ppo_loss.info, "entropy": masked_mean(entropy, mask).item()}
    per_token = _policy_loss(cfg, logp, b["logp_old"], b["adv"], mask)  # (n, L)
    if cfg.kl_coef > 0:
        per_token = per_token + cfg.kl_coef * kl_estimate(logp, b["logp_ref"], "k3")
    loss = aggregate_loss(per_token, mask, cfg.loss_agg, max_len=cfg.max_new_tokens)
    share = mask.sum() / n_tok if cfg.loss_agg == "token-mean" else len(idx) / n_seq
    ratio = torch.exp(logp - b["logp_old"]).detach()
    info = clip_diagnostics(ratio, b["adv"], mask > 0, cfg.clip_eps, cfg.clip_eps_high)
    return loss * share, {**info, "entropy": masked_mean(entropy, mask).item()}


def update(
    cfg: LMRLConfig, policy, value_model, optimizer, batch: dict, generator: torch.Generator, pad_id: int | None = None
) -> dict:
    """``cfg.update_epochs`` passes over ``batch`` in minibatches of whole sequences; the last step's diagnostics."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    N = batch["mask"].shape[0]
    mb = -(-N // cfg.num_minibatches)  # sequences per minibatch
    micro = cfg.micro_batch_size or mb
    first_loss = None
    for _ in range(cfg.update_epochs):
        order = torch.randperm(N, generator=generator) if cfg.num_minibatches > 1 else torch.arange(N)
        for start in range(0, N, mb):
            mb_idx = order[start : start + mb]
            n_tok = batch["mask"][mb_idx].sum().clamp(min=1.0)
            optimizer.zero_grad(set_to_none=True)
            loss_sum, info = 0.0, {}
            for m in range(0, len(mb_idx), micro):  # gradient accumulation: the same gradient as one pass
                loss, info = _loss(cfg, policy, value_model, batch, mb_idx[m : m + micro], len(mb_idx), n_tok, pad_id)
                loss.backward()
                loss_sum += loss.item()
            per_model = [g["params"] for g in optimizer.param_groups] if cfg.clip_grad_per_model else [params]
            grad_norm = [nn.utils.clip_grad_norm_(p, cfg.max_grad_norm) for p in per_model][0]  # the policy's first
            optimizer.step()
            first_loss = loss_sum if first_loss is None else first_loss  # ratio 1: the on-policy loss
    return {**info, "loss": loss_sum, "loss_on_policy": first_loss, "grad_norm": float(grad_norm)}


# ---------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------


def _prompts(prompt_ids, prompt_mask, pick):
    """The prompts ``pick`` and their mask, without the columns that are padding in every one of them."""
    if prompt_mask is None:
        return prompt_ids[pick], None
    used = prompt_mask[pick].any(0)  # (P,): left padding that no chosen prompt needs is dropped
    return prompt_ids[pick][:, used], prompt_mask[pick][:, used]


def rollout(
    cfg: LMRLConfig,
    policy,
    ref,
    value_model,
    reward_fn,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor | None,
    eos_id: int,
    pad_id: int,
    generator: torch.Generator,
    skip_pad: int | None,
) -> tuple[dict, dict]:
    """Steps 1-4 of one round: sample, score, score the tokens, advantages.

    Returns:
        ``(batch, stats)``: the ``(N, ...)`` tensors :func:`update` reads, and the round's statistics.
    """
    B, G, L = cfg.prompts_per_step, cfg.group_size, cfg.max_new_tokens
    # 1-2. Sample G completions of B prompts and score them (DAPO: keep only groups that teach).
    kept, sampled = [], 0
    while sum(len(k[0]) for k in kept) < B and sampled < 4 * B:
        pick = torch.randperm(prompt_ids.shape[0], generator=generator)[:B]  # (B,)
        comp = rearrange(
            sample_completions(
                policy,
                *_prompts(prompt_ids, prompt_mask, pick),
                G,
                L,
                eos_id,
                pad_id,
                cfg.temperature,
                generator=generator,
                top_p=cfg.top_p,
            ),
            "(B G) L -> B G L",
            G=G,
        )
        scores = reward_fn(pick, comp).float()  # (B, G)
        if cfg.overlong_cache:  # DAPO's soft overlong punishment, by the completion's length
            lengths = completion_mask(comp, eos_id).sum(-1)  # (B, G)
            scores = scores + family.soft_overlong_penalty(lengths, L, cfg.overlong_cache)
        sampled += len(pick)
        keep = (scores.std(-1) > 0) if cfg.dynamic_sampling else torch.ones(len(pick), dtype=torch.bool)
        kept.append((pick[keep], comp[keep], scores[keep], scores))
        if not cfg.dynamic_sampling:
            break
    pick, comp, scores = (torch.cat([k[i] for k in kept])[:B] for i in range(3))  # B' <= B groups
    all_scores = torch.cat([k[3] for k in kept])  # every group sampled, kept or not
    comp = rearrange(comp, "B G L -> (B G) L")
    ids, pmask = (
        None if x is None else repeat(x, "B P -> (B G) P", G=G) for x in _prompts(prompt_ids, prompt_mask, pick)
    )
    batch = {"prompt_ids": ids, "prompt_mask": pmask, "completion_ids": comp, "mask": completion_mask(comp, eos_id)}
    if cfg.overlong_filter:  # DAPO: a completion cut off without EOS leaves the loss
        batch["mask"] = family.filter_truncated(batch["mask"], ~(comp == eos_id).any(-1))
    # 3. The sampling policy's and the reference's log-probs (and PPO's values), no gradient.
    with torch.no_grad():
        args = (batch["prompt_ids"], batch["prompt_mask"], comp, cfg.temperature, skip_pad)
        batch["logp_old"], batch["logp_ref"] = token_logps(policy, *args), token_logps(ref, *args)
        values_old = token_values(value_model, batch["prompt_ids"], comp) if cfg.algo == "ppo" else None
        # 4. Advantages.
        batch["adv"], batch["returns"] = advantages(
            cfg, scores, batch["mask"], batch["logp_old"], batch["logp_ref"], values_old
        )
        kl = masked_mean(kl_estimate(batch["logp_old"], batch["logp_ref"], "k3"), batch["mask"]).item()
    stats = {
        "mean_reward": all_scores.mean().item(),
        "kl": kl,
        "mean_length": batch["mask"].sum(-1).mean().item(),
        "frac_zero_std": (all_scores.std(-1) == 0).float().mean().item(),
        "completions": sampled * G,
        "groups_kept": len(scores),
    }
    if cfg.algo == "ppo":  # the share of the returns' variance that the value model predicted
        stats["explained_variance"] = explained_variance(
            values_old[valid := batch["mask"] > 0], batch["returns"][valid]
        )
    return batch, stats


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
    """Train ``policy`` in place with GRPO or PPO (``cfg.algo``) on ``prompt_ids``.

    Args:
        policy: the LM (TinyLM or a ``transformers`` causal LM); a frozen copy becomes the reference.
        reward_fn: ``(prompt_index (B,), completion_ids (B, G, L)) -> (B, G)`` rewards: the verifier.
        prompt_ids, prompt_mask: ``(M, P)`` the training prompts (``prompt_mask`` for left padding).
        cfg: hyperparameters; eos_id, pad_id: the tokenizer's.
        value_model: PPO's critic, ``ids (N, T) -> values (N, T)`` (``course_lib.tiny_lm.ValueModel``).
        eval_fn: ``policy -> float``, run before training, every ``eval_every`` rounds and after the last
            (its time is not counted in ``seconds``).
        suppress_pad: the sampler never writes PAD (TinyLM); score without it too (False for models whose
            PAD is their EOS).
        save_fn: ``(policy, iteration) -> None``, every ``save_every`` rounds and after the last (checkpoints).

    Returns:
        A history dict: lists with one entry per round (``mean_reward, kl, mean_length, frac_zero_std, lr, loss,
        clip_fraction``, ..., ``seconds`` and ``completions`` cumulative) and ``eval``: ``{"iteration",
        "completions", "seconds", "score"}``. Ctrl-C stops between rounds: ``history["interrupted"] = True``.
    """
    cfg = cfg.validate()
    generator = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)  # transformers' generate samples from the global RNG
    ref = copy.deepcopy(policy).eval().requires_grad_(False)  # the frozen reference: the policy before RL
    if cfg.algo == "ppo" and value_model is None:
        raise ValueError("value_model: PPO needs a critic (course_lib.tiny_lm.ValueModel(policy), say)")
    trained = [policy] + ([value_model] if cfg.algo == "ppo" else [])  # a parameter group each
    optimizer = torch.optim.Adam([{"params": list(m.parameters())} for m in trained], lr=cfg.lr, fused=True)
    skip_pad = pad_id if suppress_pad else None
    history: dict = {"eval": {"iteration": [], "completions": [], "seconds": [], "score": []}}

    def evaluate(it):
        if eval_fn is not None:
            done = (history["completions"][-1], history["seconds"][-1]) if it else (0, 0.0)
            for key, value in zip(("iteration", "completions", "seconds", "score"), (it, *done, eval_fn(policy))):
                history["eval"][key].append(value)

    policy.eval()
    evaluate(0)
    seconds, completions = 0.0, 0
    try:
        for it in tqdm(range(cfg.iterations), desc=cfg.algo.upper(), disable=not progress):
            start = time.perf_counter()
            held = cfg.algo == "ppo" and it < cfg.critic_warmup_iterations  # critic warm-up: the policy at lr 0
            for group, peak in zip(optimizer.param_groups, (0.0 if held else cfg.lr, cfg.critic_lr or cfg.lr)):
                group["lr"] = lr_at(it, cfg, completions) * (peak / cfg.lr)  # the policy's group, then the critic's
            batch, stats = rollout(
                cfg, policy, ref, value_model, reward_fn, prompt_ids, prompt_mask, eos_id, pad_id, generator, skip_pad
            )
            policy.train()
            info = (
                update(cfg, policy, value_model, optimizer, batch, generator, skip_pad) if stats["groups_kept"] else {}
            )
            policy.eval()
            seconds += time.perf_counter() - start
            completions += stats["completions"]
            row = {
                **stats,
                "lr": lr_at(it, cfg, completions - stats["completions"]),
                "seconds": seconds,
                "completions": completions,
                **{
                    k: info.get(k, float("nan"))
                    for k in ("loss", "loss_on_policy", "clip_fraction", "grad_norm", "entropy")
                },
            }
            if cfg.algo == "ppo":
                row["value_loss"] = info.get("value_loss", float("nan"))
            for key, value in row.items():
                history.setdefault(key, []).append(value)
            last = it + 1 == cfg.iterations or (cfg.max_completions is not None and completions >= cfg.max_completions)
            if (it + 1) % eval_every == 0 or last:
                evaluate(it + 1)
            if save_fn is not None and ((save_every and (it + 1) % save_every == 0) or last):
                save_fn(policy, it + 1)
            if last:  # the sample budget is spent
                break
    except KeyboardInterrupt:  # stop between rounds, keep what was done
        history["interrupted"] = True
    return history
