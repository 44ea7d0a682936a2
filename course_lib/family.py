"""The GRPO family after DeepSeekMath: each variant is GRPO with one small piece changed.

GRPO (``course_lib.grpo``) is three choices: an advantage from the group's rewards, a per-token
loss (PPO's clipped surrogate), and a way to average the tokens (``grpo.aggregate_loss``). Every
variant below changes one of them, so each is one short function here and one switch of the loop:

=========== ================================================ =====================================================
variant     what changes                                     here
=========== ================================================ =====================================================
PPO         a value model's GAE advantage, per token         ``gae.compute_gae``, ``ppo.clipped_surrogate``
GRPO        the group baseline, divided by the group's std   ``grpo.group_advantages(normalize_std=True)``
Dr. GRPO    no std; a constant divisor of the token sums     ``normalize_std=False``, ``"seq-mean-token-sum-norm"``
RLOO        a leave-one-out baseline                         :func:`rloo_advantages`
REINFORCE++ normalised over the batch, no critic             :func:`reinforce_pp_advantages`
DAPO        clip-higher, dynamic sampling, token mean,       ``clip_eps_high``, :func:`dynamic_sampling_mask`,
            overlong filtering and soft punishment           ``"token-mean"``, :func:`filter_truncated`,
                                                             :func:`soft_overlong_penalty`
GSPO        one ratio and one clip per sequence              :func:`gspo_sequence_log_ratio`, :func:`gspo_loss`
CISPO       a clipped, detached weight on REINFORCE          :func:`cispo_loss`
GMPO        a geometric mean of clipped token ratios         :func:`gmpo_loss`
SAPO        a smooth gate in place of the clip               :func:`sapo_loss`
=========== ================================================ =====================================================

Advantages are ``[B, G]`` (one per response); per-token losses are ``[..., T]`` and are reduced by
``grpo.aggregate_loss(per_token, mask, mode, max_len)``, so the aggregation stays its own switch.
"""

from __future__ import annotations

import torch

from course_lib import _validate
from course_lib.grpo import group_advantages
from course_lib.masked import masked_mean
from course_lib.ppo import _clipped_objective

SAPO_TAU_POS, SAPO_TAU_NEG = 1.0, 1.05
"""SAPO's gate temperatures for positive and other advantages: the paper's, TRL's, and family_diagnostics'."""

# ---------------------------------------------------------------------------
# Advantages: [B, G] rewards -> [B, G]
# ---------------------------------------------------------------------------


def rloo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """RLOO: each reward minus the mean reward of the *other* ``G - 1`` responses to its prompt.

    Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE Style Optimization for Learning from
    Human Feedback in LLMs" (the estimator is Kool et al. 2019's "Buy 4 REINFORCE Samples, Get a
    Baseline for Free!"):

        adv_i = r_i - 1/(G-1) sum_{j != i} r_j  =  G/(G-1) (r_i - mean(r)).

    The baseline of response ``i`` does not use ``r_i``, so the gradient stays unbiased; the group mean
    (GRPO's) includes ``r_i`` and shrinks every advantage by ``(G-1)/G``. No std division. A group of one
    has no other response: advantage 0 (as TRL's ``RLOOTrainer``; verl keeps the raw reward there).

    Args:
        rewards: ``[B, G]`` the reward of response ``g`` to prompt ``b``.

    Returns:
        ``[B, G]`` advantages.
    """
    _validate.require_rewards_table("rewards", rewards)
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    # The leave-one-out baseline: the group's sum without r_i, over the G - 1 others.
    baseline = (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1)  # (B, G)
    return rewards - baseline


def reinforce_pp_advantages(rewards: torch.Tensor, group_baseline: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """REINFORCE++ with outcome rewards: normalised over the whole batch, not within each group.

    Hu 2025, "REINFORCE++: An Efficient RLHF Algorithm with Robustness to Both Prompt and Reward
    Models". With ``group_baseline=True`` this is the paper's **REINFORCE++-baseline** (for ``G > 1``
    samples per prompt): subtract each group's mean reward, then normalise over all ``B * G``
    responses of the batch,

        a_i = r_i - mean(group of i),   adv_i = (a_i - mean_batch(a)) / (std_batch(a) + eps).

    With ``group_baseline=False`` it is plain **REINFORCE++** for one outcome reward per response (the
    paper's per-token KL penalty, if any, already subtracted from the rewards): the rewards whitened.

    Conventions: one entry per response, ``torch.std``'s Bessel correction. verl and OpenRLHF whiten over
    valid *tokens* (a long response weighs more); the same when all lengths agree. TRL's
    ``scale_rewards="batch"`` divides the centred rewards by the std of the *raw* ones: close, not equal.
    A batch with no spread (or of one response) gives zeros, never NaN.

    Args:
        rewards: ``[B, G]`` one reward per response.
        group_baseline: subtract the group mean first (REINFORCE++-baseline) or not.
        eps: added to the batch std; positive.

    Returns:
        ``[B, G]`` advantages.
    """
    _check_reinforce_pp_advantages(rewards, group_baseline, eps)
    a = group_advantages(rewards, normalize_std=False) if group_baseline else rewards  # (B, G)
    if a.numel() == 1 or bool((a == a.flatten()[0]).all()):
        return torch.zeros_like(rewards)  # no spread in the batch: no signal (and no 0 / 0)
    # The change from GRPO: the statistics of the whole batch, not of each group.
    return (a - a.mean()) / (a.std() + eps)


# ---------------------------------------------------------------------------
# DAPO's data-side parts (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at Scale")
# ---------------------------------------------------------------------------


def dynamic_sampling_mask(rewards: torch.Tensor) -> torch.Tensor:
    """DAPO's dynamic sampling: keep only the prompts whose group rewards are not all equal.

    DAPO section 3.2: a group where every response is right (or every one wrong) has zero
    advantage for every response, so it only dilutes the batch; DAPO's objective requires
    ``0 < |{o_i correct}| < G`` and keeps sampling prompts until the batch is full of such groups.
    This function says which groups to keep; refilling the batch is the loop's job.

    Args:
        rewards: ``[B, G]`` one reward per response.

    Returns:
        ``[B]`` bool, True for the prompts to keep.
    """
    _validate.require_rewards_table("rewards", rewards)
    return rewards.amax(dim=-1) > rewards.amin(dim=-1)  # (B,)


def soft_overlong_penalty(lengths: torch.Tensor, max_len: int, cache_len: int) -> torch.Tensor:
    """DAPO's soft overlong punishment (section 3.4, eq. 13), a reward added to the task's reward.

        R_length(y) = 0                                    if |y| <= L_max - L_cache
                    = ((L_max - L_cache) - |y|) / L_cache  if L_max - L_cache < |y| <= L_max
                    = -1                                   if |y| > L_max

    The penalty grows linearly from 0 to -1 over the last ``cache_len`` tokens before ``max_len``,
    so the model learns to stop before it is cut off. TRL: ``trl.rewards.get_soft_overlong_punishment``.

    Args:
        lengths: ``[...]`` completion lengths ``|y|`` in tokens (integer or float tensor).
        max_len: ``L_max``, a positive int.
        cache_len: ``L_cache``, an int in ``[0, max_len]``; 0 means a hard -1 past ``max_len`` only.

    Returns:
        ``[...]`` penalties in ``[-1, 0]`` (float, the default dtype for integer ``lengths``).
    """
    _check_soft_overlong_penalty(lengths, max_len, cache_len)
    y = lengths if lengths.is_floating_point() else lengths.to(torch.get_default_dtype())
    start = max_len - cache_len  # where the penalty begins
    ramp = (start - y) / max(cache_len, 1)  # only used where start < |y| <= max_len, so cache_len > 0
    penalty = torch.where(y <= start, torch.zeros_like(y), ramp)
    return torch.where(y > max_len, -torch.ones_like(y), penalty)


def filter_truncated(mask: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
    """DAPO's overlong filtering: truncated completions leave the loss (their mask becomes all 0).

    DAPO section 3.4: a completion cut off at the length limit gets a reward for an unfinished
    answer, which punishes a possibly sound line of reasoning only for its length; its tokens are
    masked out instead. A completion is truncated when it has no EOS (``completion_mask`` runs to
    the end): ``truncated = ~(completion_ids == eos_id).any(-1)``, TRL's ``mask_truncated_completions``.

    Args:
        mask: ``[..., T]`` the completion mask, 1 (True) for response tokens.
        truncated: ``[...]`` bool, True for completions cut off without EOS.

    Returns:
        ``[..., T]`` the mask, of ``mask``'s dtype, with every truncated completion's row zeroed.
    """
    _check_filter_truncated(mask, truncated)
    return torch.where(truncated.unsqueeze(-1), torch.zeros_like(mask), mask)  # (..., T)


# ---------------------------------------------------------------------------
# Per-token policy losses: each [..., T], reduced by grpo.aggregate_loss
# ---------------------------------------------------------------------------


def gspo_sequence_log_ratio(logp: torch.Tensor, logp_old: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GSPO's sequence-level log importance ratio: the mean over valid tokens of the token log ratios.

    Zheng et al. 2025, "Group Sequence Policy Optimization", its importance ratio s_i:

        s_i = (pi_theta(y_i | x) / pi_old(y_i | x)) ** (1 / |y_i|)
        log s_i = 1/|y_i| sum_t (logp_{i,t} - logp_old_{i,t}).

    The ``1 / |y_i|`` keeps ``s_i`` near 1 whatever the length (a product of ``|y_i|`` token ratios
    would not be), so one clip range suits every response. ``logp_old`` is a constant (detached).
    An empty response has log ratio 0 (ratio 1), as TRL's ``clamp(min=1)`` gives; padding may hold
    anything, a NaN or an infinite log-prob included.

    Args:
        logp: ``[..., T]`` log pi_theta of the response tokens.
        logp_old: ``[..., T]`` log pi_old of the same tokens.
        mask: ``[..., T]`` 1 (True) for response tokens, 0 for padding.

    Returns:
        ``[...]`` ``log s_i``, one per response.
    """
    _check_gspo_sequence_log_ratio(logp, logp_old, mask)
    return masked_mean(logp - logp_old.detach(), mask, dim=-1)  # (...)


def gspo_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float,
    clip_eps_high: float | None = None,
) -> torch.Tensor:
    """GSPO's loss: PPO's clipped surrogate on the sequence ratio ``s_i``, the same value at every token.

    GSPO's objective (eq. 5): ``-min(s_i * A_i, clip(s_i, 1 - eps, 1 + eps_high) * A_i)`` per response, written at
    each of its ``T`` positions, as TRL's ``importance_sampling_level="sequence"`` does: then
    ``aggregate_loss(..., "seq-mean-token-mean")`` is GSPO's ``1/G sum_i`` (the paper's setting), and
    the other modes weigh each response by its length, as TRL's do. GSPO's ranges are tiny beside
    PPO's (the paper uses 3e-4 and 4e-4), because ``s_i`` is a per-token geometric mean.

    Args:
        logp, logp_old, mask: ``[..., T]`` as in :func:`gspo_sequence_log_ratio`.
        adv: ``[...]`` one advantage per response (a constant: detached).
        clip_eps: the lower clip range; ``clip_eps_high`` the upper one (default ``clip_eps``).

    Returns:
        ``[..., T]`` the per-token loss (padding positions hold the same value; the mask drops them).
    """
    _check_gspo_loss(logp, logp_old, adv, mask, clip_eps, clip_eps_high)
    clip_eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    log_s = gspo_sequence_log_ratio(logp, logp_old, mask)  # (...)
    # GSPO's change to GRPO: one ratio and one clip per response, not per token.
    per_response = _clipped_objective(torch.exp(log_s), adv.detach(), clip_eps, clip_eps_high)  # (...)
    return per_response.unsqueeze(-1).expand_as(logp)  # (..., T)


def cispo_loss(
    logp: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor, clip_eps_high: float, clip_eps: float | None = None
) -> torch.Tensor:
    """CISPO: REINFORCE weighted by a clipped, detached importance ratio; every token keeps its gradient.

    MiniMax 2025, "MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning Attention",
    section 3.1 (CISPO):

        loss_t = -sg(clip(ratio_t, 1 - eps_low, 1 + eps_high)) * A_t * logp_t.

    PPO's clip zeroes the gradient of a token whose ratio left the range (often the rare "fork"
    tokens of a reasoning chain); CISPO clips the *weight* instead and stops its gradient, so the
    token still contributes ``-w * A * grad logp``. The paper sets no lower bound ("a large eps_low"),
    and TRL's ``loss_type="cispo"`` has none either: ``clip_eps=None`` (the default) means none.

    Conventions: TRL's CISPO caps the ratio at ``epsilon_high`` itself (ScaleRL's eps_max, recommended 5.0);
    the course at ``1 + clip_eps_high``, as every clip here: TRL's 5.0 is ``clip_eps_high=4.0``. (Left at
    TRL's default, ``epsilon_high = epsilon = 0.2``, every weight is capped at 0.2.)

    Args:
        logp: ``[..., T]`` log pi_theta of the tokens (carries the gradient).
        logp_old: ``[..., T]`` log pi_old (a constant).
        adv: ``[..., T]`` advantages (a constant).
        clip_eps_high: the weight is capped at ``1 + clip_eps_high``; positive.
        clip_eps: optional lower range: the weight is floored at ``1 - clip_eps``.

    Returns:
        ``[..., T]`` the per-token loss.
    """
    _check_cispo_loss(logp, logp_old, adv, clip_eps_high, clip_eps)
    low = None if clip_eps is None else 1.0 - clip_eps
    ratio = torch.exp(logp - logp_old.detach())  # (..., T)
    # CISPO's change to PPO: clip the weight and stop its gradient; logp itself carries the gradient.
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high).detach()  # (..., T)
    return -weight * adv.detach() * logp


def gmpo_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float = 0.4,
    clip_eps_high: float | None = None,
) -> torch.Tensor:
    """GMPO: the geometric mean of the token-level clipped terms, one value per response, at every token.

    "Geometric-Mean Policy Optimization" (2025, arXiv 2507.20673): GRPO's objective with the arithmetic mean
    over tokens replaced by the geometric one,

        J_i = sgn(A_i) * (prod_t |min(ratio_t * A_i, clip(ratio_t, e^-eps, e^eps_high) * A_i)|) ** (1/|y_i|),

    computed in log space: each token's log ratio is clipped to ``[-clip_eps, clip_eps_high]`` on the
    pessimistic side (as PPO's min does), then ``loss_i = -A_i * exp(mean_t clipped log ratio)``. One outlier
    token moves a geometric mean less than an arithmetic one, so the paper's range is wider (0.4 in log
    space). verl: ``policy_loss.loss_mode="geo_mean"``.

    Args:
        logp, logp_old, mask: ``[..., T]`` as in :func:`gspo_sequence_log_ratio`.
        adv: ``[...]`` one advantage per response (a constant).
        clip_eps, clip_eps_high: the clip range of the log ratio (``clip_eps_high`` defaults to ``clip_eps``).

    Returns:
        ``[..., T]`` the per-token loss (the same value at every position; the mask drops the padding).
    """
    _check_gspo_loss(logp, logp_old, adv, mask, clip_eps, clip_eps_high)  # GSPO's arguments, the same checks
    clip_eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    adv = adv.detach()
    log_ratio = logp - logp_old.detach()  # (..., T)
    sign = torch.sign(adv).unsqueeze(-1)  # (..., 1)
    # PPO's pessimistic clip, token by token in log space: the smaller log ratio for A > 0, the larger for A < 0.
    clipped = sign * torch.minimum(sign * log_ratio, sign * log_ratio.clamp(-clip_eps, clip_eps_high))
    # GMPO's change to GRPO: a geometric mean over the tokens, exp of the mean log ratio.
    per_response = -adv * torch.exp(masked_mean(clipped, mask, dim=-1))  # (...)
    return per_response.unsqueeze(-1).expand_as(logp)  # (..., T)


def sapo_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    adv: torch.Tensor,
    tau_pos: float = SAPO_TAU_POS,
    tau_neg: float = SAPO_TAU_NEG,
) -> torch.Tensor:
    """SAPO: a smooth, temperature-controlled gate on the ratio in place of PPO's hard clip.

    "Soft Adaptive Policy Optimization" (Qwen team 2025, arXiv 2511.20347):

        loss_t = -f(ratio_t) * A_t,   f(r) = 4 / tau * sigmoid(tau * (r - 1)),

    with ``tau = tau_pos`` where ``A_t > 0`` and ``tau_neg`` otherwise. At ``r = 1`` the gradient is the policy
    gradient (``f'(1) = 1``); far from 1 it fades smoothly instead of dropping to 0 at an edge. A larger ``tau_neg``
    fades negative updates faster. TRL: ``loss_type="sapo"`` (``sapo_temperature_pos`` / ``_neg``, same defaults).

    Args:
        logp, logp_old, adv: ``[..., T]`` as in :func:`cispo_loss`.
        tau_pos, tau_neg: the gate's temperatures for positive and non-positive advantages; positive.

    Returns:
        ``[..., T]`` the per-token loss.
    """
    _check_sapo_loss(logp, logp_old, adv, tau_pos, tau_neg)
    adv = adv.detach()
    ratio = torch.exp(logp - logp_old.detach())  # (..., T)
    tau = torch.where(adv > 0, torch.full_like(adv, tau_pos), torch.full_like(adv, tau_neg))  # (..., T)
    return -(4.0 / tau) * torch.sigmoid(tau * (ratio - 1.0)) * adv


# ---------------------------------------------------------------------------
# Argument checks: a public function's first line calls its own
# ---------------------------------------------------------------------------


def _check_reinforce_pp_advantages(rewards, group_baseline, eps) -> None:
    _validate.require_rewards_table("rewards", rewards)
    _validate.require_bool("group_baseline", group_baseline)
    _validate.require_positive("eps", eps)


def _check_soft_overlong_penalty(lengths, max_len, cache_len) -> None:
    _validate.require_tensor("lengths", lengths, floating=False)
    _validate.require_int("max_len", max_len, minimum=1)
    _validate.require_int("cache_len", cache_len, minimum=0)
    if cache_len > max_len:
        raise ValueError(f"cache_len: expected at most max_len={max_len}, got {cache_len}")


def _check_filter_truncated(mask, truncated) -> None:
    _validate.require_tensor("mask", mask, floating=False, min_dim=1)
    _validate.require_mask("mask", mask, "mask", mask)
    _validate.require_tensor("truncated", truncated, floating=False)
    if truncated.dtype != torch.bool:
        raise ValueError(f"truncated: expected a bool tensor, got dtype {truncated.dtype}")
    _validate.require_shape("truncated", truncated, mask.shape[:-1], like="mask without its last axis")


def _check_gspo_sequence_log_ratio(logp, logp_old, mask) -> None:
    _validate.require_tensor("logp", logp, min_dim=1)
    _validate.require_same_shape("logp_old", logp_old, "logp", logp)
    _validate.require_mask("mask", mask, "logp", logp)


def _check_gspo_loss(logp, logp_old, adv, mask, clip_eps, clip_eps_high) -> None:
    _check_gspo_sequence_log_ratio(logp, logp_old, mask)
    _validate.require_tensor("adv", adv)
    _validate.require_shape("adv", adv, logp.shape[:-1], like="logp without T")
    _validate.require_clip_range(clip_eps, clip_eps_high)


def _check_cispo_loss(logp, logp_old, adv, clip_eps_high, clip_eps) -> None:
    _validate.require_tensor("logp", logp)
    _validate.require_same_shape("logp_old", logp_old, "logp", logp)
    _validate.require_same_shape("adv", adv, "logp", logp)
    _validate.require_positive("clip_eps_high", clip_eps_high)
    if clip_eps is not None:
        _validate.require_positive("clip_eps", clip_eps)


def _check_sapo_loss(logp, logp_old, adv, tau_pos, tau_neg) -> None:
    _validate.require_tensor("logp", logp)
    _validate.require_same_shape("logp_old", logp_old, "logp", logp)
    _validate.require_same_shape("adv", adv, "logp", logp)
    _validate.require_positive("tau_pos", tau_pos)
    _validate.require_positive("tau_neg", tau_neg)
