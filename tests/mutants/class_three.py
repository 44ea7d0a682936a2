"""The mistakes of the third class of students (tests/test_class_three.py), each written again by another student.

The class's own answers are in tests/test_class_three.py; the answers here make the same mistakes in other code
(another loop, another reduction, another order), so the catalogue that names them is not fitted to one answer.
"""

import math

import torch


def rtg_loop_stops_at_one(rewards, gamma):
    """Fills G_t from G_{t+1} for t = T - 1 down to 1: reversed(range(1, T)) never reaches t = 0."""
    T = rewards.shape[-1]
    out = torch.zeros_like(rewards)
    for t in reversed(range(1, T)):
        after = out[..., t + 1] if t + 1 < T else 0.0
        out[..., t] = rewards[..., t] + gamma * after
    return out


def gather_then_logsumexp_over_time(logits, tokens):
    """The picked logits minus their logsumexp along the sequence, not along the vocabulary."""
    picked = torch.take_along_dim(logits, tokens.long()[..., None], dim=-1)[..., 0]
    return picked - torch.logsumexp(picked, dim=-1, keepdim=True)


def surrogate_clip_the_weighted_ratio(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    """The clip applied to ratio * adv, the clip range written as two bounds."""
    lower, upper = 1 - clip_eps, 1 + (clip_eps if clip_eps_high is None else clip_eps_high)
    weighted = torch.exp(logp - logp_old.detach()) * adv.detach()
    clipped = weighted.clamp(lower, upper)
    return -torch.where(weighted < clipped, weighted, clipped)


def advantages_one_baseline(rewards, normalize_std=True, eps=1e-6):
    """One baseline for the batch (a scalar mean), the std per group, and the equal groups set to zero first."""
    baseline = rewards.sum() / rewards.numel()
    equal = rewards.max(-1, keepdim=True).values == rewards.min(-1, keepdim=True).values
    advantages = (rewards - baseline) * (~equal)
    if normalize_std and rewards.shape[-1] > 1:
        advantages = advantages / (rewards.std(-1, keepdim=True) + eps)
    return advantages


def aggregate_dr_grpo_longest(per_token, mask, mode, max_len=None):
    """Dr. GRPO with the constant taken from the mask (the longest response) when max_len is not given."""
    m = mask.to(per_token.dtype)
    kept = torch.where(m.bool(), per_token, torch.zeros_like(per_token))
    per_response = kept.sum(-1)
    if mode == "token-mean":
        return per_response.sum() / m.sum().clamp(min=1)
    if mode == "seq-mean-token-mean":
        return (per_response / m.sum(-1).clamp(min=1)).mean()
    if max_len is None:
        max_len = max(int(m.sum(-1).max()), 1)
    return per_response.mean() / max_len


def mask_zero_at_eos(completion_ids, eos_id):
    """1 everywhere, 0 where the token is EOS: what follows an EOS stays in the mask."""
    mask = torch.ones(completion_ids.shape)
    mask[completion_ids == eos_id] = 0.0
    return mask


def pass_at_k_full_product(n, c, k):
    """The product (i - k) / i over every i from k + 1 to n, vectorised; c only decides 0 or the guard."""
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x).long() for x in (n, c, k)))
    out = torch.zeros(n.shape, dtype=torch.float64)
    for index in range(n.numel()):
        nn, cc, kk = (int(x.reshape(-1)[index]) for x in (n, c, k))
        if cc == 0:
            value = 0.0
        elif nn - cc < kk:
            value = 1.0
        else:
            value = 1.0 - math.prod((i - kk) / i for i in range(kk + 1, nn + 1))
        out.reshape(-1)[index] = value
    return out


def cispo_ratio_times_advantage(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    """PPO's clipped ratio times the advantage, the cap as a minimum and the floor as a maximum."""
    weight = torch.minimum(torch.exp(logp - logp_old.detach()), torch.tensor(1 + clip_eps_high, dtype=logp.dtype))
    if clip_eps is not None:
        weight = torch.maximum(weight, torch.tensor(1 - clip_eps, dtype=logp.dtype))
    return -(weight * adv.detach())


def cispo_floor_from_one_eps(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    """clip_eps defaults to clip_eps_high, as in the clip-higher of PPO: a floor at 1 - clip_eps_high."""
    if clip_eps is None:
        clip_eps = clip_eps_high
    with torch.no_grad():
        weight = (logp - logp_old).exp().clamp(1 - clip_eps, 1 + clip_eps_high)
    return -(adv.detach() * weight) * logp


MUTANTS = [
    ("reward_to_go", rtg_loop_stops_at_one, "G_0 is never written"),
    ("gather_log_probs", gather_then_logsumexp_over_time, "you normalised after the gather"),
    ("clipped_surrogate", surrogate_clip_the_weighted_ratio, "you clipped the product ratio * adv"),
    ("group_advantages", advantages_one_baseline, "the baseline is the mean of the whole batch"),
    ("aggregate_loss", aggregate_dr_grpo_longest, "the longest response's number of valid tokens"),
    ("completion_mask", mask_zero_at_eos, "the mask is 0 only at the EOS itself"),
    ("pass_at_k", pass_at_k_full_product, "whatever c is"),
    ("cispo_loss", cispo_ratio_times_advantage, "PPO's clipped term alone"),
    ("cispo_loss", cispo_floor_from_one_eps, "floored at 1 - clip_eps_high"),
]
