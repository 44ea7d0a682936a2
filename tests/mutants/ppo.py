"""Wrong and right implementations of the PPO exercises, for tests/test_mutants.py.

Each mutant is written the way a student might write it (not built from the
check's own mistake catalogue), so the test proves the check catches real code.
"""

import torch

from course_lib import ppo  # only the reference class, as a mutant (borrowed)

# ---------------------------------------------------------------------------
# clipped_surrogate mutants
# ---------------------------------------------------------------------------


def surrogate_quotient_ratio(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = logp / logp_old.detach()
    return -torch.min(ratio * adv.detach(), torch.clamp(ratio, 1 - clip_eps, 1 + high) * adv.detach())


def surrogate_inverted_ratio(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp_old.detach() - logp)
    return -torch.min(ratio * adv.detach(), torch.clamp(ratio, 1 - clip_eps, 1 + high) * adv.detach())


def surrogate_max(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())
    return -torch.max(ratio * adv.detach(), torch.clamp(ratio, 1 - clip_eps, 1 + high) * adv.detach())


def surrogate_clips_advantage(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())
    adv = adv.detach()
    return -torch.min(ratio * adv, ratio * torch.clamp(adv, 1 - clip_eps, 1 + high))


def surrogate_clips_log_ratio(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    log_ratio = logp - logp_old.detach()
    adv = adv.detach()
    return -torch.min(log_ratio.exp() * adv, torch.clamp(log_ratio, 1 - clip_eps, 1 + high).exp() * adv)


def surrogate_no_clip(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    return -torch.exp(logp - logp_old.detach()) * adv.detach()


def surrogate_no_minus(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())
    return torch.min(ratio * adv.detach(), torch.clamp(ratio, 1 - clip_eps, 1 + high) * adv.detach())


def surrogate_old_attached(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old)
    return -torch.min(ratio * adv.detach(), torch.clamp(ratio, 1 - clip_eps, 1 + high) * adv.detach())


def surrogate_adv_attached(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())
    return -torch.min(ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + high) * adv)


def surrogate_symmetric_only(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    ratio = torch.exp(logp - logp_old.detach())
    return -torch.min(ratio * adv.detach(), torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv.detach())


def surrogate_reduced(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    return surrogate_sb3_style(logp, logp_old, adv, clip_eps, clip_eps_high).mean()


def surrogate_clipped_term_only(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())
    return -torch.clamp(ratio, 1 - clip_eps, 1 + high) * adv.detach()


def surrogate_upper_side_only(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())
    return -torch.min(ratio * adv.detach(), ratio.clamp(max=1 + high) * adv.detach())


def surrogate_lower_side_only(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    ratio = torch.exp(logp - logp_old.detach())
    return -torch.min(ratio * adv.detach(), ratio.clamp(min=1 - clip_eps) * adv.detach())


def surrogate_min_of_ratios(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())
    return -torch.min(ratio, torch.clamp(ratio, 1 - clip_eps, 1 + high)) * adv.detach()


def surrogate_log_ratio_as_ratio(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = logp - logp_old.detach()
    return -torch.min(ratio * adv.detach(), torch.clamp(ratio, 1 - clip_eps, 1 + high) * adv.detach())


def surrogate_fixed_eps(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    ratio = torch.exp(logp - logp_old.detach())
    return -torch.min(ratio * adv.detach(), torch.clamp(ratio, 0.8, 1.2) * adv.detach())


def surrogate_adv_clipped_symmetric(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    ratio = torch.exp(logp - logp_old.detach())
    adv = adv.detach()
    return -torch.min(ratio * adv, ratio * adv.clamp(-clip_eps, clip_eps))


# ---------------------------------------------------------------------------
# clipped_surrogate_loss mutants
# ---------------------------------------------------------------------------


def _zero_padding(logp, logp_old, adv, mask):
    """The padding's log-probs may be -inf or NaN: every mutant below selects the valid entries first."""
    if mask is None:
        return logp, logp_old, adv
    valid = mask.bool()
    return (torch.where(valid, x, torch.zeros_like(x)) for x in (logp, logp_old, adv))


def _diagnostics(
    logp, logp_old, adv, clip_eps, m, *, binding_fraction=False, active_is_outside=False, kl="k3", high=None
):
    high = clip_eps if high is None else high
    with torch.no_grad():
        log_ratio = logp - logp_old
        ratio = torch.exp(log_ratio)
        outside = (ratio < 1 - clip_eps) | (ratio > 1 + high)
        binding = ((ratio > 1 + high) & (adv > 0)) | ((ratio < 1 - clip_eps) & (adv < 0))
        n = m.sum().clamp(min=1)
        kl_terms = {"k3": (ratio - 1) - log_ratio, "k1": logp_old - logp}[kl]
        return {
            "clip_fraction": ((binding if binding_fraction else outside).to(logp.dtype) * m).sum().item() / n.item(),
            "clip_active_fraction": ((outside if active_is_outside else binding).to(logp.dtype) * m).sum().item()
            / n.item(),
            "approx_kl": (kl_terms * m).sum().item() / n.item(),
        }


def _loss_with(
    per_element, logp, logp_old, adv, clip_eps, mask, *, use_mask=True, binding=False, clip_eps_high=None, **info
):
    logp, logp_old, adv = _zero_padding(logp, logp_old, adv, mask)
    per = per_element(logp, logp_old, adv, clip_eps, clip_eps_high)
    m = torch.ones_like(logp) if (mask is None or not use_mask) else mask.to(logp.dtype)
    loss = (per * m).sum() / m.sum().clamp(min=1)
    return loss, _diagnostics(logp, logp_old, adv, clip_eps, m, binding_fraction=binding, high=clip_eps_high, **info)


def loss_quotient_ratio(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _loss_with(surrogate_quotient_ratio, logp, logp_old, adv, clip_eps, mask, clip_eps_high=clip_eps_high)


def loss_max(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _loss_with(surrogate_max, logp, logp_old, adv, clip_eps, mask, clip_eps_high=clip_eps_high)


def loss_old_attached(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _loss_with(surrogate_old_attached, logp, logp_old, adv, clip_eps, mask, clip_eps_high=clip_eps_high)


def loss_ignores_mask(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _loss_with(
        surrogate_sb3_style, logp, logp_old, adv, clip_eps, mask, clip_eps_high=clip_eps_high, use_mask=False
    )


def loss_binding_clip_fraction(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _loss_with(
        surrogate_sb3_style, logp, logp_old, adv, clip_eps, mask, clip_eps_high=clip_eps_high, binding=True
    )


def loss_sum_not_mean(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    _, info = loss_masked_mean(logp.detach(), logp_old, adv, clip_eps, mask, clip_eps_high)
    logp, logp_old, adv = _zero_padding(logp, logp_old, adv, mask)
    per = surrogate_sb3_style(logp, logp_old, adv, clip_eps, clip_eps_high)
    m = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    return (per * m).sum(), info


def loss_returns_tensor_only(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return loss_masked_mean(logp, logp_old, adv, clip_eps, mask, clip_eps_high)[0]


def loss_clipped_term_only(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _loss_with(surrogate_clipped_term_only, logp, logp_old, adv, clip_eps, mask, clip_eps_high=clip_eps_high)


def loss_upper_side_only(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _loss_with(surrogate_upper_side_only, logp, logp_old, adv, clip_eps, mask, clip_eps_high=clip_eps_high)


def loss_clips_advantage(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _loss_with(surrogate_clips_advantage, logp, logp_old, adv, clip_eps, mask, clip_eps_high=clip_eps_high)


def loss_approx_kl_k1(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _loss_with(surrogate_sb3_style, logp, logp_old, adv, clip_eps, mask, clip_eps_high=clip_eps_high, kl="k1")


def loss_active_fraction_is_clip_fraction(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _loss_with(
        surrogate_sb3_style, logp, logp_old, adv, clip_eps, mask, clip_eps_high=clip_eps_high, active_is_outside=True
    )


def loss_without_approx_kl(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    loss, info = _loss_with(surrogate_sb3_style, logp, logp_old, adv, clip_eps, mask, clip_eps_high=clip_eps_high)
    del info["approx_kl"]
    return loss, info


def loss_padding_in_denominator(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    logp, logp_old, adv = _zero_padding(logp, logp_old, adv, mask)
    per = surrogate_sb3_style(logp, logp_old, adv, clip_eps, clip_eps_high)
    m = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    return (per * m).mean(), _diagnostics(logp, logp_old, adv, clip_eps, m, high=clip_eps_high)


def loss_padding_multiplied(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    """Issue 44's student: x * mask, which is NaN where the padding holds -inf (0 * inf)."""
    per = surrogate_sb3_style(logp, logp_old, adv, clip_eps, clip_eps_high)
    m = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    _, info = loss_masked_mean(logp.detach(), logp_old, adv, clip_eps, mask, clip_eps_high)
    return (per * m).sum() / m.sum().clamp(min=1), info


def loss_ignores_clip_eps_high(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _loss_with(surrogate_sb3_style, logp, logp_old, adv, clip_eps, mask)


def loss_empty_mask_nan(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    logp, logp_old, adv = _zero_padding(logp, logp_old, adv, mask)
    per = surrogate_sb3_style(logp, logp_old, adv, clip_eps, clip_eps_high)
    m = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    _, info = loss_masked_mean(logp.detach(), logp_old, adv, clip_eps, mask, clip_eps_high)
    return (per * m).sum() / m.sum(), info


# ---------------------------------------------------------------------------
# value_loss mutants
# ---------------------------------------------------------------------------


def _vloss(
    values, returns, values_old, clip_eps, mask, *, half=0.5, reduce=torch.max, detach_returns=True, clip_values=False
):
    target = returns.detach() if detach_returns else returns
    err = (values - target) ** 2
    if clip_eps is not None:
        if clip_values:
            v_clip = torch.clamp(values, -clip_eps, clip_eps)
        else:
            v_clip = values_old.detach() + torch.clamp(values - values_old.detach(), -clip_eps, clip_eps)
        err = reduce(err, (v_clip - target) ** 2)
    m = torch.ones_like(values) if mask is None else mask.to(values.dtype)
    return half * (err * m).sum() / m.sum()


def value_loss_no_half(values, returns, values_old=None, clip_eps=None, mask=None):
    return _vloss(values, returns, values_old, clip_eps, mask, half=1.0)


def value_loss_min(values, returns, values_old=None, clip_eps=None, mask=None):
    return _vloss(values, returns, values_old, clip_eps, mask, reduce=torch.min)


def value_loss_returns_attached(values, returns, values_old=None, clip_eps=None, mask=None):
    return _vloss(values, returns, values_old, clip_eps, mask, detach_returns=False)


def value_loss_clips_values(values, returns, values_old=None, clip_eps=None, mask=None):
    return _vloss(values, returns, values_old, clip_eps, mask, clip_values=True)


def value_loss_never_clips(values, returns, values_old=None, clip_eps=None, mask=None):
    return _vloss(values, returns, None, None, mask)


# ---------------------------------------------------------------------------
# PPOLoss mutants
# ---------------------------------------------------------------------------


def _masked(x, valid):
    return torch.where(valid, x, torch.zeros_like(x)).sum() / valid.sum().clamp(min=1)


def _ppo(
    policy_logprobs,
    old_policy_logprobs,
    values,
    returns,
    advantages,
    entropy,
    mask,
    clip_epsilon,
    value_loss_coef,
    entropy_coef,
    *,
    per_element=None,
    entropy_term=None,
    entropy_sign=-1.0,
):
    """A PPO loss that averages each term over the valid entries; each mutant changes one part of it."""
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    logp, logp_old, adv = _zero_padding(policy_logprobs, old_policy_logprobs, advantages, mask)
    policy_loss = _masked((per_element or surrogate_sb3_style)(logp, logp_old, adv, clip_epsilon), valid)
    v_loss = 0.5 * _masked((values - returns.detach()) ** 2, valid)
    bonus = _masked(entropy, valid) if entropy_term is None else entropy_term(entropy, valid)
    return policy_loss + value_loss_coef * v_loss + entropy_sign * entropy_coef * bonus


class PPOLossEntropyAdded(torch.nn.Module):
    def __init__(self, clip_epsilon=0.2, value_loss_coef=0.5, entropy_coef=0.01):
        super().__init__()
        self.clip_epsilon, self.value_loss_coef, self.entropy_coef = clip_epsilon, value_loss_coef, entropy_coef

    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        tensors = (policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask)
        return _ppo(*tensors, self.clip_epsilon, self.value_loss_coef, self.entropy_coef, entropy_sign=1.0)


def ppo_loss_old_attached(
    policy_logprobs,
    old_policy_logprobs,
    values,
    returns,
    advantages,
    entropy,
    mask=None,
    clip_epsilon=0.2,
    value_loss_coef=0.5,
    entropy_coef=0.01,
):
    tensors = (policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask)
    return _ppo(*tensors, clip_epsilon, value_loss_coef, entropy_coef, per_element=surrogate_old_attached)


def ppo_loss_ignores_value_loss_coef(
    policy_logprobs,
    old_policy_logprobs,
    values,
    returns,
    advantages,
    entropy,
    mask=None,
    clip_epsilon=0.2,
    value_loss_coef=0.5,
    entropy_coef=0.01,
):
    tensors = (policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask)
    return _ppo(*tensors, clip_epsilon, 0.5, entropy_coef)


def ppo_loss_entropy_detached(
    policy_logprobs,
    old_policy_logprobs,
    values,
    returns,
    advantages,
    entropy,
    mask=None,
    clip_epsilon=0.2,
    value_loss_coef=0.5,
    entropy_coef=0.01,
):
    tensors = (policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask)
    detached = lambda h, valid: _masked(h.detach(), valid)  # noqa: E731
    return _ppo(*tensors, clip_epsilon, value_loss_coef, entropy_coef, entropy_term=detached)


def ppo_loss_entropy_over_padding(
    policy_logprobs,
    old_policy_logprobs,
    values,
    returns,
    advantages,
    entropy,
    mask=None,
    clip_epsilon=0.2,
    value_loss_coef=0.5,
    entropy_coef=0.01,
):
    """Issue 44's student: every term masked but the entropy's, which is entropy.mean()."""
    tensors = (policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask)
    return _ppo(*tensors, clip_epsilon, value_loss_coef, entropy_coef, entropy_term=lambda h, valid: h.mean())


def ppo_loss_no_entropy(
    policy_logprobs,
    old_policy_logprobs,
    values,
    returns,
    advantages,
    entropy,
    mask=None,
    clip_epsilon=0.2,
    value_loss_coef=0.5,
    entropy_coef=0.01,
):
    tensors = (policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask)
    return _ppo(*tensors, clip_epsilon, value_loss_coef, 0.0)


def ppo_loss_fixed_clip(
    policy_logprobs,
    old_policy_logprobs,
    values,
    returns,
    advantages,
    entropy,
    mask=None,
    clip_epsilon=0.2,
    value_loss_coef=0.5,
    entropy_coef=0.01,
):
    tensors = (policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask)
    return _ppo(*tensors, 0.2, value_loss_coef, entropy_coef)


class PPOLossClippedTermOnly(torch.nn.Module):
    def __init__(self, clip_epsilon=0.2, value_loss_coef=0.5, entropy_coef=0.01):
        super().__init__()
        self.clip_epsilon, self.value_loss_coef, self.entropy_coef = clip_epsilon, value_loss_coef, entropy_coef

    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        tensors = (policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask)
        coefs = (self.clip_epsilon, self.value_loss_coef, self.entropy_coef)
        return _ppo(*tensors, *coefs, per_element=surrogate_clipped_term_only)


MUTANTS = [
    ("clipped_surrogate", surrogate_quotient_ratio, "logp / logp_old"),
    ("clipped_surrogate", surrogate_inverted_ratio, "inverted"),
    ("clipped_surrogate", surrogate_max, "max of the two"),
    ("clipped_surrogate", surrogate_clips_advantage, "clipped the advantage"),
    ("clipped_surrogate", surrogate_clips_log_ratio, "clipped the log-ratio"),
    ("clipped_surrogate", surrogate_no_clip, "no clip"),
    ("clipped_surrogate", surrogate_no_minus, "minus sign"),
    ("clipped_surrogate", surrogate_old_attached, "logp_old.detach()"),
    ("clipped_surrogate", surrogate_adv_attached, "adv.detach()"),
    ("clipped_surrogate", surrogate_symmetric_only, "clip_eps_high"),
    ("clipped_surrogate", surrogate_reduced, "shape"),
    ("clipped_surrogate", surrogate_clipped_term_only, "only the clipped term"),
    ("clipped_surrogate", surrogate_upper_side_only, "only the upper side is clipped"),
    ("clipped_surrogate", surrogate_lower_side_only, "only the lower side is clipped"),
    ("clipped_surrogate", surrogate_min_of_ratios, "min of the two ratios"),
    ("clipped_surrogate", surrogate_log_ratio_as_ratio, "log-ratio logp - logp_old"),
    ("clipped_surrogate", surrogate_fixed_eps, "clip_eps is ignored"),
    ("clipped_surrogate", surrogate_adv_clipped_symmetric, "clipped the advantage"),
    ("clipped_surrogate_loss", loss_quotient_ratio, "logp / logp_old"),
    ("clipped_surrogate_loss", loss_max, "max of the two"),
    ("clipped_surrogate_loss", loss_old_attached, "logp_old.detach()"),
    ("clipped_surrogate_loss", loss_ignores_mask, "mask is ignored"),
    ("clipped_surrogate_loss", loss_binding_clip_fraction, "clip binds"),
    ("clipped_surrogate_loss", loss_sum_not_mean, "summed"),
    ("clipped_surrogate_loss", loss_clipped_term_only, "only the clipped term"),
    ("clipped_surrogate_loss", loss_upper_side_only, "only the upper side is clipped"),
    ("clipped_surrogate_loss", loss_clips_advantage, "clipped the advantage"),
    ("clipped_surrogate_loss", loss_approx_kl_k1, "approx_kl is the mean of logp_old - logp"),
    ("clipped_surrogate_loss", loss_active_fraction_is_clip_fraction, "clip_active_fraction counts every ratio"),
    ("clipped_surrogate_loss", loss_without_approx_kl, "no 'approx_kl'"),
    ("clipped_surrogate_loss", loss_padding_in_denominator, "mask.numel()"),
    ("clipped_surrogate_loss", loss_returns_tensor_only, "tuple (loss, info)"),
    ("clipped_surrogate_loss", loss_padding_multiplied, "x * mask is NaN there"),
    ("clipped_surrogate_loss", loss_ignores_clip_eps_high, "clip_eps_high is ignored"),
    ("clipped_surrogate_loss", loss_empty_mask_nan, "an empty mask"),
    ("value_loss", value_loss_no_half, "0.5"),
    ("value_loss", value_loss_min, "min of the two errors"),
    ("value_loss", value_loss_returns_attached, "returns.detach()"),
    ("value_loss", value_loss_clips_values, "do not clip the values themselves"),
    ("value_loss", value_loss_never_clips, "clip_eps is ignored"),
    ("ppo_loss", PPOLossEntropyAdded, "entropy term has the wrong sign"),
    ("ppo_loss", ppo_loss_old_attached, "logp_old.detach()"),
    ("ppo_loss", ppo_loss_ignores_value_loss_coef, "value_loss_coef is ignored"),
    ("ppo_loss", ppo_loss_entropy_detached, "entropy is detached"),
    ("ppo_loss", ppo_loss_no_entropy, "entropy bonus is missing"),
    ("ppo_loss", ppo_loss_fixed_clip, "clip_epsilon is ignored"),
    ("ppo_loss", PPOLossClippedTermOnly, "only the clipped term"),
    ("ppo_loss", ppo_loss_entropy_over_padding, "entropy is averaged over the padding"),
    ("ppo_loss", ppo.PPOLoss, "calls course_lib's own ppo.PPOLoss"),
]


# ---------------------------------------------------------------------------
# Correct variants
# ---------------------------------------------------------------------------


def surrogate_sb3_style(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    """SB3 writes -min(a, b) as max(-a, -b)."""
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())
    adv = adv.detach()
    return torch.max(-adv * ratio, -adv * torch.clamp(ratio, 1 - clip_eps, 1 + high))


def surrogate_where(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    """Picks the branch by hand: the clipped one where it is the smaller objective."""
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = logp.exp() / logp_old.detach().exp()
    adv = adv.detach()
    clipped = ratio.clamp(1 - clip_eps, 1 + high)
    return torch.where(clipped * adv < ratio * adv, -clipped * adv, -ratio * adv)


def loss_masked_mean(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    m = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    logp, logp_old, adv = _zero_padding(logp, logp_old, adv, mask)
    per = surrogate_sb3_style(logp, logp_old, adv, clip_eps, clip_eps_high)
    n = m.sum().clamp(min=1)
    with torch.no_grad():
        log_ratio = logp - logp_old
        ratio = log_ratio.exp()
        frac = (((ratio < 1 - clip_eps) | (ratio > 1 + high)).to(logp.dtype) * m).sum() / n
        binds = (torch.where(adv > 0, ratio > 1 + high, ratio < 1 - clip_eps) & (adv != 0)).to(logp.dtype)
        approx_kl = (((ratio - 1) - log_ratio) * m).sum() / n
    return (per * m).sum() / n, {
        "clip_fraction": float(frac),
        "clip_active_fraction": float((binds * m).sum() / n),
        "approx_kl": float(approx_kl),
    }


def loss_float32_inside(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    loss, info = loss_masked_mean(logp.float(), logp_old.float(), adv.float(), clip_eps, mask, clip_eps_high)
    return loss.to(logp.dtype), info


def value_loss_mse(values, returns, values_old=None, clip_eps=None, mask=None):
    """CleanRL's form: 0.5 * max(unclipped, clipped), with torch.nn.functional for the plain case."""
    m = torch.ones_like(values) if mask is None else mask.to(values.dtype)
    if clip_eps is None:
        if mask is None:
            return 0.5 * torch.nn.functional.mse_loss(values, returns.detach())
        values, returns = torch.where(m > 0, values, 0.0), torch.where(m > 0, returns, 0.0)  # padding may hold inf
        return 0.5 * ((values - returns.detach()) ** 2).sum() / m.sum().clamp(min=1)
    values, returns = torch.where(m > 0, values, 0.0), torch.where(m > 0, returns, 0.0)
    old = torch.where(m > 0, values_old.detach(), 0.0)
    v_clipped = old + torch.clamp(values - old, -clip_eps, clip_eps)
    v_loss_max = torch.max((values - returns.detach()) ** 2, (v_clipped - returns.detach()) ** 2)
    return 0.5 * v_loss_max.sum() / m.sum().clamp(min=1)  # the docstring: 0 when no entry is valid


def ppo_loss_function(
    policy_logprobs,
    old_policy_logprobs,
    values,
    returns,
    advantages,
    entropy,
    mask=None,
    clip_epsilon=0.2,
    value_loss_coef=0.5,
    entropy_coef=0.01,
):
    policy_loss, _ = loss_masked_mean(policy_logprobs, old_policy_logprobs, advantages, clip_epsilon, mask)
    m = torch.ones_like(entropy) if mask is None else mask.to(entropy.dtype)
    mean_entropy = (entropy * m).sum() / m.sum().clamp(min=1)
    return policy_loss + value_loss_coef * value_loss_mse(values, returns, mask=mask) - entropy_coef * mean_entropy


VARIANTS = [
    ("clipped_surrogate", surrogate_sb3_style),
    ("clipped_surrogate", surrogate_where),
    ("clipped_surrogate_loss", loss_masked_mean),
    ("clipped_surrogate_loss", loss_float32_inside),
    ("value_loss", value_loss_mse),
    ("ppo_loss", ppo_loss_function),
]


# Round seven of issue 44: new wrong answers to chapter(s) 05, written as students write them, each with the phrase
# its message names it by (tests/catalogue_round7_05_08.py).
from catalogue_round7_05_08 import ROWS as ROUND_SEVEN  # noqa: E402

CHECK_NAMES = {"PPOLoss": "ppo_loss"}  # the check of chapter 05's class is check_ppo_loss
MUTANTS += [
    (CHECK_NAMES.get(row["exercise"], row["exercise"]), row["student"], row["named"])
    for row in ROUND_SEVEN
    if row["chapter"] == "05"
]
