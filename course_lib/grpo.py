"""GRPO: PPO's clipped surrogate with a group baseline in place of the critic.

Shao et al. 2024, "DeepSeekMath", section 4.1 (eq. 3). For each prompt, sample a
group of ``G`` responses, score them, and give every token of response ``i`` the
same advantage, its reward standardised within the group (section 4.1.2):

    adv_i = (r_i - mean(r)) / std(r).

The loss is PPO's clipped surrogate (``course_lib.ppo.clipped_surrogate``) on
every token, plus a KL penalty toward a frozen reference policy, estimated per
token with Schulman's k3 (DeepSeekMath eq. 4; Schulman 2020, "Approximating KL
Divergence"):

    loss_{i,t} = -min(ratio * adv_i, clip(ratio, 1 - eps, 1 + eps) * adv_i) + kl_coef * k3_{i,t}.

How the per-token losses become one number matters (:func:`aggregate_loss`):

- ``"seq-mean-token-mean"``: DeepSeekMath's ``1/G sum_i 1/|o_i| sum_t``; each
  token of a long response weighs less, which favours short right answers and long wrong ones
  (Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective").
- ``"token-mean"``: DAPO's token-level loss (Yu et al. 2025, "DAPO"): the mean over
  all valid tokens of the batch.
- ``"seq-mean-token-sum-norm"``: Dr. GRPO (Liu et al. 2025): sum over each
  response's tokens divided by a constant ``max_len``, then mean over responses;
  with ``normalize_std=False`` (no division by the group std) it is their whole fix.
"""

from __future__ import annotations

import torch
from torch import nn

from course_lib import _validate
from course_lib.baselines import compute_deltas
from course_lib.kl import KL_KINDS, kl_estimate
from course_lib.masked import masked_mean, masked_normalize
from course_lib.ppo import clip_diagnostics, clipped_surrogate

LOSS_AGG_MODES = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm")


# ---------------------------------------------------------------------------
# Group-relative advantages
# ---------------------------------------------------------------------------


def group_advantages(rewards: torch.Tensor, normalize_std: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """GRPO's advantage: each reward minus its group's mean, divided by the group's std.

    The same computation as ``baselines.compute_deltas`` in the modes
    ``"normalized_rewards"`` (GRPO) and ``"centered_rewards"`` (Dr. GRPO, which drops
    the std because it up-weights prompts that are nearly always or never solved).
    The std is Bessel-corrected (``torch.std``; TRL and verl do the same) and ``eps``
    is added to it (the course and verl use 1e-6, TRL 1e-4). A group whose
    rewards are all equal, or a group of one, gets zeros: no signal, no NaN.

    Args:
        rewards: ``[B, G]`` the reward of response ``g`` to prompt ``b``.
        normalize_std: divide by the group std (GRPO) or not (Dr. GRPO).
        eps: added to the std; positive.

    Returns:
        ``[B, G]`` advantages, one per response.
    """
    _check_group_advantages(rewards, normalize_std, eps)
    mode = "normalized_rewards" if normalize_std else "centered_rewards"
    return compute_deltas(rewards, mode, eps)  # (B, G)


# ---------------------------------------------------------------------------
# Loss aggregation (the masked reductions are course_lib.masked's, re-exported here)
# ---------------------------------------------------------------------------


def aggregate_loss(
    per_token: torch.Tensor, mask: torch.Tensor, mode: str, max_len: float | None = None
) -> torch.Tensor:
    """Reduce a per-token loss to a scalar in one of the three ways GRPO variants use.

    =========================== ============================================= ==============
    mode                        loss                                          used by
    =========================== ============================================= ==============
    ``seq-mean-token-mean``     mean_i ( sum_t l_{i,t} / |o_i| )              GRPO
    ``token-mean``              sum_{i,t} l_{i,t} / sum_i |o_i|               DAPO
    ``seq-mean-token-sum-norm`` mean_i ( sum_t l_{i,t} / max_len )            Dr. GRPO
    =========================== ============================================= ==============

    ``|o_i|`` is the number of valid tokens of response ``i``; "mean_i" runs over
    every leading index of ``per_token`` (all ``B * G`` responses).

    Conventions:
        - ``max_len`` defaults to ``T``, the padded length of this batch. TRL's
          ``loss_type="dr_grpo"`` divides by the configured ``max_completion_length``
          (pass it as ``max_len`` to match); verl's ``seq-mean-token-sum-norm`` divides
          by the padded length too, but divides the *sum* over all responses by it
          (no mean over responses), a loss ``B * G`` times larger.
        - An empty response (no valid token) contributes 0 to the per-response
          sum and still counts as a response in the mean, as TRL's
          ``clamp(min=1)`` does; never NaN. (Some verl versions divide by zero there,
          later ones leave empty responses out of the mean.)

    Args:
        per_token: ``[..., T]`` the loss of every token.
        mask: ``[..., T]`` 1 (True) for real tokens, 0 for padding.
        mode: one of the three modes above.
        max_len: Dr. GRPO's constant; positive; ``None`` means ``T``.

    Returns:
        A scalar.
    """
    _check_aggregate_loss(per_token, mask, mode, max_len)
    if mode == "token-mean":
        # Every valid token of the batch weighs the same, whatever its response's length.
        return masked_mean(per_token, mask)
    if mode == "seq-mean-token-mean":
        per_response = masked_mean(per_token, mask, dim=-1)  # (...)
    else:
        # A constant divisor: a token's weight no longer depends on its response's length.
        max_len = per_token.shape[-1] if max_len is None else max_len
        per_response = masked_normalize(per_token, mask, dim=-1, normalize_constant=max_len)  # (...)
    return per_response.mean()


# ---------------------------------------------------------------------------
# The GRPO loss
# ---------------------------------------------------------------------------


def grpo_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    logp_ref: torch.Tensor | None,
    rewards: torch.Tensor | None,
    mask: torch.Tensor,
    clip_eps: float = 0.2,
    kl_coef: float = 0.04,
    kl_kind: str = "k3",
    normalize_std: bool = True,
    loss_agg: str = "seq-mean-token-mean",
    max_len: float | None = None,
    clip_eps_high: float | None = None,
    adv: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The GRPO loss of a batch of ``B`` prompts with ``G`` responses each.

    Args:
        logp: ``[B, G, T]`` log pi_theta of the response tokens (carries the gradient).
        logp_old: ``[B, G, T]`` log pi_theta_old, the policy that sampled them (a constant).
        logp_ref: ``[B, G, T]`` log pi_ref of the frozen reference policy (a constant),
            or ``None`` for no KL penalty.
        rewards: ``[B, G]`` one reward per response (a constant), or ``None`` when ``adv`` is given.
        mask: ``[B, G, T]`` 1 (True) for response tokens, 0 for padding.
        clip_eps: PPO's clip range, positive.
        kl_coef: weight of the KL penalty (DeepSeekMath's beta = 0.04), non-negative.
        kl_kind: the KL estimator, ``"k1"``, ``"k2"`` or ``"k3"``.
        normalize_std: divide advantages by the group std (GRPO) or not (Dr. GRPO).
        loss_agg: how tokens are averaged, see :func:`aggregate_loss`.
        max_len: Dr. GRPO's constant (default ``T``).
        clip_eps_high: the upper clip range (default ``clip_eps``); larger is DAPO's
            clip-higher, which lets low-probability tokens with a positive advantage grow.
        adv: ``[B, G]`` advantages computed elsewhere (a constant), used in place of the group
            advantages of ``rewards``. Chapter 08's loop computes them once over the whole batch, before
            its minibatches split the groups, and chapter 11's RLOO and REINFORCE++ compute them their
            own way. Pass exactly one of ``rewards`` and ``adv``.

    Returns:
        ``(loss, info)``: the scalar loss and floats ``clip_fraction`` (valid tokens
        with the ratio outside ``[1 - clip_eps, 1 + clip_eps_high]``, as ``ppo.clipped_surrogate_loss``),
        ``clip_active_fraction`` (where the clip zeroes the gradient), ``kl`` (the
        mean estimate over valid tokens, 0 without ``logp_ref``), ``adv_abs_mean``
        (mean |advantage| over responses) and, when ``rewards`` are given, ``reward_mean``.
    """
    _check_grpo_tensors(logp, logp_old, logp_ref, rewards, adv, mask)
    _check_grpo_options(clip_eps, clip_eps_high, kl_coef, kl_kind, normalize_std, loss_agg, max_len)
    clip_eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = mask.bool()  # (B, G, T)

    # GRPO's change to PPO: the critic-free baseline, each response compared with its own group.
    if adv is None:
        adv = group_advantages(rewards.detach(), normalize_std)  # (B, G)
    adv = adv.detach()
    adv_tokens = adv.unsqueeze(-1).expand_as(logp)  # (B, G, T): every token shares its response's adv

    # PPO's clipped surrogate, token by token (logp_old and the advantages are constants).
    per_token = clipped_surrogate(logp, logp_old, adv_tokens, clip_eps, clip_eps_high)  # (B, G, T)
    if logp_ref is not None:
        kl = kl_estimate(logp, logp_ref.detach(), kl_kind)  # (B, G, T)
        per_token = per_token + kl_coef * kl
    loss = aggregate_loss(per_token, valid, loss_agg, max_len)

    with torch.no_grad():  # diagnostics, not part of the graph
        ratio = torch.exp(logp - logp_old)  # (B, G, T)
        info = clip_diagnostics(ratio, adv_tokens, valid, clip_eps, clip_eps_high)
        info["kl"] = masked_mean(kl, valid).item() if logp_ref is not None else 0.0
        info["adv_abs_mean"] = adv.abs().mean().item()
        if rewards is not None:
            info["reward_mean"] = rewards.mean().item()
    return loss, info


class GRPOLoss(nn.Module):
    """GRPO's loss for one log-prob per response (a response of one token, or summed log-probs).

    ``forward(policy_logprobs, old_policy_logprobs, rewards, reference_logprobs)``, all
    ``[B, G]``, returns :func:`grpo_loss` with ``T = 1``, where the three
    aggregation modes agree, the k3 KL estimator and std-normalised advantages.

    Args:
        clip_epsilon: PPO's clip range.
        kl_beta: weight of the KL penalty.
    """

    def __init__(self, clip_epsilon: float = 0.2, kl_beta: float = 0.1):
        super().__init__()
        self.clip_epsilon = _validate.require_positive("clip_epsilon", clip_epsilon)
        self.kl_beta = _validate.require_non_negative("kl_beta", kl_beta)

    def forward(self, policy_logprobs, old_policy_logprobs, rewards, reference_logprobs=None):
        _check_grpo_loss_forward(policy_logprobs, old_policy_logprobs, rewards, reference_logprobs)
        if reference_logprobs is not None:
            reference_logprobs = reference_logprobs.unsqueeze(-1)  # (B, G, 1)
        loss, _ = grpo_loss(
            policy_logprobs.unsqueeze(-1),  # (B, G, 1)
            old_policy_logprobs.unsqueeze(-1),
            reference_logprobs,
            rewards,
            torch.ones_like(policy_logprobs).unsqueeze(-1),
            clip_eps=self.clip_epsilon,
            kl_coef=self.kl_beta,
        )
        return loss


# ---------------------------------------------------------------------------
# Argument checks: a public function's first line calls its own
# ---------------------------------------------------------------------------


def _check_group_advantages(rewards, normalize_std, eps) -> None:
    _validate.require_rewards_table("rewards", rewards)
    _validate.require_bool("normalize_std", normalize_std)
    _validate.require_positive("eps", eps)


def _check_aggregate_loss(per_token, mask, mode, max_len) -> None:
    _validate.require_tensor("per_token", per_token, min_dim=1)
    _validate.require_mask("mask", mask, "per_token", per_token)
    _validate.require_choice("mode", mode, LOSS_AGG_MODES)
    if max_len is not None:
        _validate.require_positive("max_len", max_len)


def _check_grpo_tensors(logp, logp_old, logp_ref, rewards, adv, mask) -> None:
    """The tensors of :func:`grpo_loss`: shapes ``[B, G, T]``, exactly one of ``rewards`` and ``adv``."""
    _validate.require_tensor("logp", logp)
    if logp.dim() != 3:
        raise ValueError(f"logp: expected shape (B, G, T), got {tuple(logp.shape)}")
    _validate.require_same_shape("logp_old", logp_old, "logp", logp)
    if logp_ref is not None:
        _validate.require_same_shape("logp_ref", logp_ref, "logp", logp)
    if (rewards is None) == (adv is None):
        raise ValueError("rewards, adv: pass exactly one (rewards for the group advantages, or adv computed elsewhere)")
    given_name, given = ("rewards", rewards) if adv is None else ("adv", adv)
    _validate.require_tensor(given_name, given)
    _validate.require_shape(given_name, given, logp.shape[:2], like="logp's (B, G)")
    _validate.require_mask("mask", mask, "logp", logp)


def _check_grpo_options(clip_eps, clip_eps_high, kl_coef, kl_kind, normalize_std, loss_agg, max_len) -> None:
    """The hyperparameters of :func:`grpo_loss`."""
    _validate.require_clip_range(clip_eps, clip_eps_high)
    _validate.require_non_negative("kl_coef", kl_coef)
    _validate.require_choice("kl_kind", kl_kind, KL_KINDS)
    _validate.require_bool("normalize_std", normalize_std)
    _validate.require_choice("loss_agg", loss_agg, LOSS_AGG_MODES)
    if max_len is not None:
        _validate.require_positive("max_len", max_len)


def _check_grpo_loss_forward(policy_logprobs, old_policy_logprobs, rewards, reference_logprobs) -> None:
    _validate.require_tensor("policy_logprobs", policy_logprobs)
    if policy_logprobs.dim() != 2:
        raise ValueError(f"policy_logprobs: expected shape (B, G), got {tuple(policy_logprobs.shape)}")
    _validate.require_same_shape("old_policy_logprobs", old_policy_logprobs, "policy_logprobs", policy_logprobs)
    _validate.require_same_shape("rewards", rewards, "policy_logprobs", policy_logprobs)
    if reference_logprobs is not None:
        _validate.require_same_shape("reference_logprobs", reference_logprobs, "policy_logprobs", policy_logprobs)
