"""Classic wrong (and correct) ways to write the exercises of chapter 11 (the GRPO family).

``rloo_advantages(rewards[B, G])``, ``gspo_sequence_log_ratio(logp[..., T], logp_old, mask)`` and
``cispo_loss(logp, logp_old, adv, clip_eps_high, clip_eps=None)``, checked by ``course_lib.checks.family``.
"""

import catalogue_round7_09_11 as round7
import torch

# ---------------------------------------------------------------------------
# rloo_advantages
# ---------------------------------------------------------------------------


def rloo_divides_by_g(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return rewards - (rewards.sum(-1, keepdim=True) - rewards) / G


def rloo_includes_itself(rewards):
    return rewards - rewards.mean(-1, keepdim=True)


def rloo_sum_over_g_minus_1(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return rewards - rewards.sum(-1, keepdim=True) / (G - 1)


def rloo_sign_reversed(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return (rewards.sum(-1, keepdim=True) - rewards) / (G - 1) - rewards


def rloo_over_the_batch(rewards):
    B = rewards.shape[0]
    if B == 1:
        return torch.zeros_like(rewards)
    return rewards - (rewards.sum(0, keepdim=True) - rewards) / (B - 1)


def rloo_nan_for_group_of_one(rewards):
    G = rewards.shape[-1]
    return rewards - (rewards.sum(-1, keepdim=True) - rewards) / (G - 1)


def rloo_divided_by_std(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    adv = rewards - (rewards.sum(-1, keepdim=True) - rewards) / (G - 1)
    return adv / (rewards.std(-1, keepdim=True) + 1e-6)


def rloo_loop(rewards):
    """Correct: the leave-one-out mean written with a Python loop over the group."""
    B, G = rewards.shape
    out = torch.zeros_like(rewards)
    for i in range(G):
        if G > 1:
            others = torch.cat([rewards[:, :i], rewards[:, i + 1 :]], dim=-1)
            out[:, i] = rewards[:, i] - others.mean(-1)
    return out


def rloo_scaled_centred(rewards):
    """Correct: RLOO is the centred reward times G / (G - 1)."""
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return G / (G - 1) * (rewards - rewards.mean(-1, keepdim=True))


# ---------------------------------------------------------------------------
# gspo_sequence_log_ratio
# ---------------------------------------------------------------------------


def _valid(x, mask):
    return torch.where(mask.bool(), x, torch.zeros_like(x))


def gspo_sum(logp, logp_old, mask):
    return _valid(logp - logp_old.detach(), mask).sum(-1)


def gspo_mask_ignored(logp, logp_old, mask):
    return (logp - logp_old.detach()).mean(-1)


def gspo_divides_by_t(logp, logp_old, mask):
    return _valid(logp - logp_old.detach(), mask).sum(-1) / logp.shape[-1]


def gspo_mean_of_ratios(logp, logp_old, mask):
    n = mask.to(logp.dtype).sum(-1).clamp(min=1)
    return torch.log(_valid(torch.exp(logp - logp_old.detach()), mask).sum(-1) / n)


def gspo_ratio_of_means(logp, logp_old, mask):
    return torch.log(_valid(logp.exp(), mask).sum(-1) / _valid(logp_old.detach().exp(), mask).sum(-1))


def gspo_returns_ratio(logp, logp_old, mask):
    n = mask.to(logp.dtype).sum(-1).clamp(min=1)
    return torch.exp(_valid(logp - logp_old.detach(), mask).sum(-1) / n)


def gspo_nan_for_empty(logp, logp_old, mask):
    return _valid(logp - logp_old.detach(), mask).sum(-1) / mask.to(logp.dtype).sum(-1)


def gspo_old_attached(logp, logp_old, mask):
    n = mask.to(logp.dtype).sum(-1).clamp(min=1)
    return _valid(logp - logp_old, mask).sum(-1) / n


def gspo_times_mask(logp, logp_old, mask):
    """x * mask: the padding's NaN or inf survives (NaN * 0 = NaN)."""
    n = mask.to(logp.dtype).sum(-1).clamp(min=1)
    return ((logp - logp_old.detach()) * mask).sum(-1) / n


def gspo_times_mask_old_attached(logp, logp_old, mask):
    n = mask.to(logp.dtype).sum(-1).clamp(min=1)
    return ((logp - logp_old) * mask).sum(-1) / n


def gspo_old_attached_masked_fill(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = (logp - logp_old).masked_fill(~valid, 0.0)
    return log_ratio.sum(-1) / valid.sum(-1).clamp(min=1)


def gspo_old_attached_per_response(logp, logp_old, mask):
    flat_p, flat_q = logp.reshape(-1, logp.shape[-1]), logp_old.reshape(-1, logp.shape[-1])
    flat_m = mask.reshape(-1, mask.shape[-1]).bool()
    out = [(p[m] - q[m]).mean() if m.any() else p.sum() * 0 for p, q, m in zip(flat_p, flat_q, flat_m)]
    return torch.stack(out).nan_to_num(0.0).reshape(logp.shape[:-1])


def gspo_masked_select(logp, logp_old, mask):
    """Correct: one response at a time, its valid tokens picked with a boolean index."""
    flat_p, flat_q = logp.reshape(-1, logp.shape[-1]), logp_old.detach().reshape(-1, logp.shape[-1])
    flat_m = mask.reshape(-1, mask.shape[-1]).bool()
    out = [
        (p[m] - q[m]).mean() if m.any() else (p.sum() * 0).nan_to_num(0.0) for p, q, m in zip(flat_p, flat_q, flat_m)
    ]
    return torch.stack(out).reshape(logp.shape[:-1])


def gspo_from_masked_mean(logp, logp_old, mask):
    """The course's masked_mean over the last axis: borrowed, in the notebook as at grading."""
    from course_lib.masked import masked_mean

    return masked_mean(logp - logp_old.detach(), mask, dim=-1)


# ---------------------------------------------------------------------------
# cispo_loss
# ---------------------------------------------------------------------------


def _cispo(
    logp,
    logp_old,
    adv,
    clip_eps_high,
    clip_eps=None,
    *,
    detach=True,
    floor="given",
    sign=-1.0,
    clamp=True,
    detach_old=True,
    cap_at_eps=False,
):
    ratio = torch.exp(logp - (logp_old.detach() if detach_old else logp_old))
    low = {"given": None if clip_eps is None else 1 - clip_eps, "symmetric": 1 - clip_eps_high, "never": None}[floor]
    cap = clip_eps_high if cap_at_eps else 1 + clip_eps_high
    weight = ratio.clamp(min=low, max=cap) if clamp else ratio
    return sign * (weight.detach() if detach else weight) * adv.detach() * logp


def cispo_weight_attached(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    return _cispo(logp, logp_old, adv, clip_eps_high, clip_eps, detach=False)


def cispo_clipped_below_too(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    return _cispo(logp, logp_old, adv, clip_eps_high, clip_eps, floor="symmetric")


def cispo_clip_eps_ignored(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    return _cispo(logp, logp_old, adv, clip_eps_high, clip_eps, floor="never")


def cispo_cap_at_eps_high(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    """TRL's convention: its epsilon_high is the cap itself."""
    return _cispo(logp, logp_old, adv, clip_eps_high, clip_eps, cap_at_eps=True)


def cispo_sign(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    return _cispo(logp, logp_old, adv, clip_eps_high, clip_eps, sign=1.0)


def cispo_unclipped(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    return _cispo(logp, logp_old, adv, clip_eps_high, clip_eps, clamp=False)


def cispo_is_ppo(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    clipped = ratio.clamp(1 - (clip_eps or clip_eps_high), 1 + clip_eps_high)
    return -torch.min(ratio * adv.detach(), clipped * adv.detach())


def cispo_nothing_detached(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    return _cispo(logp, logp_old, adv, clip_eps_high, clip_eps, detach=False, detach_old=False)


def cispo_adv_attached(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1 - clip_eps
    return -ratio.clamp(min=low, max=1 + clip_eps_high).detach() * adv * logp


def cispo_with_min_and_where(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    """Correct: the cap written with torch.minimum, the floor with torch.where, the weight under no_grad."""
    with torch.no_grad():
        weight = torch.minimum(torch.exp(logp - logp_old), torch.tensor(1 + clip_eps_high, dtype=logp.dtype))
        if clip_eps is not None:
            weight = torch.where(weight < 1 - clip_eps, torch.full_like(weight, 1 - clip_eps), weight)
    return -(weight * adv.detach()) * logp


MUTANTS = [
    ("rloo_advantages", rloo_divides_by_g, "divided by G"),
    ("rloo_advantages", rloo_includes_itself, "includes the response itself"),
    ("rloo_advantages", rloo_sum_over_g_minus_1, "subtract r_i from the sum"),
    ("rloo_advantages", rloo_sign_reversed, "sign is reversed"),
    ("rloo_advantages", rloo_over_the_batch, "over the batch"),
    ("rloo_advantages", rloo_nan_for_group_of_one, "group of one"),
    ("rloo_advantages", rloo_divided_by_std, "std"),
    ("gspo_sequence_log_ratio", gspo_sum, "sum of the token log ratios"),
    ("gspo_sequence_log_ratio", gspo_mask_ignored, "mask is ignored"),
    ("gspo_sequence_log_ratio", gspo_divides_by_t, "not by T"),
    ("gspo_sequence_log_ratio", gspo_mean_of_ratios, "geometric mean"),
    ("gspo_sequence_log_ratio", gspo_ratio_of_means, "ratio of means"),
    ("gspo_sequence_log_ratio", gspo_returns_ratio, "returns its log"),
    ("gspo_sequence_log_ratio", gspo_nan_for_empty, "empty response"),
    ("gspo_sequence_log_ratio", gspo_old_attached, "a gradient flows into logp_old"),
    ("gspo_sequence_log_ratio", gspo_times_mask, "x * mask does not drop the padding"),
    ("gspo_sequence_log_ratio", gspo_times_mask_old_attached, "a gradient flows into logp_old"),
    ("gspo_sequence_log_ratio", gspo_old_attached_masked_fill, "a gradient flows into logp_old"),
    ("gspo_sequence_log_ratio", gspo_old_attached_per_response, "a gradient flows into logp_old"),
    ("cispo_loss", cispo_weight_attached, "not detached"),
    ("cispo_loss", cispo_clipped_below_too, "clipped below too"),
    ("cispo_loss", cispo_clip_eps_ignored, "clip_eps is ignored"),
    ("cispo_loss", cispo_sign, "sign is reversed"),
    ("cispo_loss", cispo_unclipped, "not clipped"),
    ("cispo_loss", cispo_cap_at_eps_high, "capped at clip_eps_high itself"),
    ("cispo_loss", cispo_is_ppo, "PPO's clipped surrogate"),
    ("gspo_sequence_log_ratio", gspo_from_masked_mean, "calls course_lib's own masked.masked_mean"),
    ("cispo_loss", cispo_nothing_detached, "logp_old"),
    ("cispo_loss", cispo_adv_attached, "advantages"),
]

VARIANTS = [
    ("rloo_advantages", rloo_loop),
    ("rloo_advantages", rloo_scaled_centred),
    ("gspo_sequence_log_ratio", gspo_masked_select),
    ("cispo_loss", cispo_with_min_and_where),
]

# Round seven (chapter 11): the new wrong answers of tests/catalogue_round7_09_11.py, each named by its check.
MUTANTS += [
    ("rloo_advantages", round7.g11_rloo_max_one, "raw reward"),
    ("rloo_advantages", round7.g11_rloo_slice_keeps_self, "includes the response itself"),
    ("gspo_sequence_log_ratio", round7.g11_gspo_times_mask_no_clamp, "divides 0 by 0"),
    ("cispo_loss", round7.g11_cispo_where_not_detached, "not detached"),
    ("rloo_advantages", round7.h11_rloo_mean_not_sum, "group's mean"),
    ("rloo_advantages", round7.h11_rloo_loop_global_mean, "every prompt at once"),
    ("gspo_sequence_log_ratio", round7.h11_gspo_boolean_index, "one number for the whole batch"),
    ("gspo_sequence_log_ratio", round7.h11_gspo_longest_count, "longest response"),
    ("cispo_loss", round7.h11_cispo_probability, "probability"),
    ("cispo_loss", round7.h11_cispo_clip_eps_both_bounds, "both bounds"),
    ("cispo_loss", round7.h11_cispo_summed, "summed over each response"),
    ("rloo_advantages", round7.w11_rloo_factor_inverted, "(G - 1) / G"),
    ("rloo_advantages", round7.w11_rloo_precedence, "precedence"),
    ("rloo_advantages", round7.w11_rloo_whole_batch, "whole batch"),
    ("rloo_advantages", round7.w11_rloo_g_from_first_axis, "B - 1"),
    ("rloo_advantages", round7.w11_rloo_factor_on_mean, "subtract r_i from the sum"),
    ("rloo_advantages", round7.w11_rloo_in_place, "in place"),
    ("rloo_advantages", round7.w11_rloo_float32, "float32"),
    ("rloo_advantages", round7.w11_rloo_others_mean_only, "baseline alone"),
    ("rloo_advantages", round7.w11_rloo_centred_then_scaled_by_g, "G / (G + 1)"),
    ("gspo_sequence_log_ratio", round7.w11_gspo_sign_reversed, "sign is reversed"),
    ("gspo_sequence_log_ratio", round7.w11_gspo_logp_detached, "logp is detached"),
    ("gspo_sequence_log_ratio", round7.w11_gspo_keepdim, "keepdim"),
    ("gspo_sequence_log_ratio", round7.w11_gspo_batch_token_count, "whole batch"),
    ("gspo_sequence_log_ratio", round7.w11_gspo_numerator_unmasked, "numerator"),
    ("gspo_sequence_log_ratio", round7.w11_gspo_over_batch_axis, "first axis"),
    ("gspo_sequence_log_ratio", round7.w11_gspo_times_length, "mask.mean(-1)"),
    ("gspo_sequence_log_ratio", round7.w11_gspo_masked_fill_wrong_way, "masked_fill"),
    ("gspo_sequence_log_ratio", round7.w11_gspo_float32, "float32"),
    ("cispo_loss", round7.w11_cispo_mean, "averaged over every token"),
    ("cispo_loss", round7.w11_cispo_ratio_inverted, "inverted"),
    ("cispo_loss", round7.w11_cispo_none_lower_bound_crash, "clip_eps is None by default"),
    ("cispo_loss", round7.w11_cispo_times_ratio, "multiplies the ratio"),
    ("cispo_loss", round7.w11_cispo_log_ratio_clipped, "log ratio is clipped"),
    ("cispo_loss", round7.w11_cispo_cap_for_positive_only, "only where the advantage is positive"),
    ("cispo_loss", round7.w11_cispo_sequence_mean, "each response's tokens"),
    ("cispo_loss", round7.w11_cispo_float32, "float32"),
    ("cispo_loss", round7.w11_cispo_logp_old_weighted, "log ratio logp - logp_old"),
]


def rloo_baseline_added(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return rewards + (rewards.sum(-1, keepdim=True) - rewards) / (G - 1)


def rloo_others_times_g_minus_1(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return rewards - (rewards.sum(-1, keepdim=True) - rewards) * (G - 1)


def cispo_cap_below_one(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    low = None if clip_eps is None else 1 - clip_eps
    weight = torch.exp(logp - logp_old.detach()).clamp(min=low, max=1 - clip_eps_high).detach()
    return -weight * adv.detach() * logp


MUTANTS += [
    ("rloo_advantages", rloo_baseline_added, "baseline is added"),
    ("rloo_advantages", rloo_others_times_g_minus_1, "multiplied by G - 1"),
    ("cispo_loss", cispo_cap_below_one, "1 - clip_eps_high"),
]
