"""Classic wrong PPO losses of chapter 05, which ``check_ppo_loss`` (in :mod:`course_lib.checks.ppo`) names.

:func:`wrong_ppo_loss` builds a full PPO loss (policy loss + value loss - entropy bonus) with one slip switched
on (a term's sign, coefficient, mask, reduction or gradient); ``PPO_LOSS_MISTAKES`` pairs each with the message
that names it and its fix, followed by the clipped surrogate's own mistakes inside the full loss.
"""

from __future__ import annotations

import torch

from course_lib.checks import Mistake
from course_lib.checks.ppo_mistakes import N_HIGH, SURROGATE_MISTAKES, surrogate
from course_lib.ppo import clipped_surrogate


def wrong_ppo_loss(
    *,
    sign=-1.0,
    half=True,
    policy=None,
    value_loss_coef_used=None,
    entropy_coef_used=None,
    clip=None,
    detach_entropy=False,
    entropy_sum=False,
    returns_attached=False,
    entropy_over_padding=False,
    value_over_padding=False,
    normalise_adv=False,
    swap_coefs=False,
    scale=1.0,
    entropy_padding_summed=False,
    detach_values=False,
    policy_over_padding=False,
    policy_sum=False,
    value_factor=1.0,
    coef_on_policy=False,
    coef_moved=False,
):
    """A wrong PPO loss: the reference's three terms with one slip switched on by the options."""

    def wrong(
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
        c_v = value_loss_coef if value_loss_coef_used is None else value_loss_coef_used
        c_e = entropy_coef if entropy_coef_used is None else entropy_coef_used
        if swap_coefs:
            c_v, c_e = c_e, c_v
        eps = clip_epsilon if clip is None else clip
        valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
        everything = torch.ones_like(valid)
        # The padding's log-probs may be -inf: selected away before the ratio, as the reference does.
        logp, logp_old = policy_logprobs, old_policy_logprobs
        if not policy_over_padding:
            logp = torch.where(valid, logp, torch.zeros_like(logp))
            logp_old = torch.where(valid, logp_old, torch.zeros_like(logp_old))
        adv = advantages.detach()
        if normalise_adv:  # CleanRL's norm_adv: over the valid entries, or ("all") over every entry, padding too
            pool = adv if normalise_adv == "all" else adv[valid]
            adv = (adv - pool.mean()) / (pool.std() + 1e-8)
        per = (policy or clipped_surrogate)(logp, logp_old, adv, eps)
        p_mask = everything if policy_over_padding else valid
        p_loss = torch.where(p_mask, per, torch.zeros_like(per)).sum() if policy_sum else _mean(per, p_mask)
        target = returns if returns_attached else returns.detach()
        v = values.detach() if detach_values else values
        if detach_values:
            target = returns
        v_mask = everything if value_over_padding else valid
        v_loss = value_factor * (0.5 if half else 1.0) * _mean(((v - target) ** 2), v_mask)
        h = entropy.detach() if detach_entropy else entropy
        h_mask = everything if entropy_over_padding else valid
        if entropy_sum:
            h_term = (h * h_mask).sum()
        elif entropy_padding_summed:
            h_term = h.sum() / valid.sum()
        else:
            h_term = _mean(h, h_mask)
        if coef_on_policy:  # value_loss_coef * (policy_loss + value_loss)
            return scale * (c_v * (p_loss + v_loss) + sign * c_e * h_term)
        if coef_moved:  # value_loss_coef * policy_loss + value_loss
            return scale * (c_v * p_loss + v_loss + sign * c_e * h_term)
        return scale * (p_loss + c_v * v_loss + sign * c_e * h_term)

    return wrong


def _mean(x, mask):
    """The mean of the entries where ``mask`` holds (0 when none does)."""
    return torch.where(mask, x, torch.zeros_like(x)).sum() / mask.sum().clamp(min=1)


PPO_LOSS_MISTAKES = [
    Mistake(
        "the entropy term has the wrong sign: subtract entropy_coef * mean(entropy), "
        "so that more entropy lowers the loss",
        wrong_ppo_loss(sign=1.0),
    ),
    Mistake("the value loss lacks its factor 0.5 (0.5 * (values - returns)^2)", wrong_ppo_loss(half=False)),
    Mistake(
        "value_loss_coef is ignored (0.5 is used whatever is passed): the loss adds self.value_loss_coef * value_loss",
        wrong_ppo_loss(value_loss_coef_used=0.5),
    ),
    Mistake(
        "value_loss_coef is ignored (the value loss is added with weight 1): the loss adds "
        "self.value_loss_coef * value_loss",
        wrong_ppo_loss(value_loss_coef_used=1.0),
    ),
    Mistake(
        "entropy_coef is ignored (0.01 is used whatever is passed): the loss subtracts "
        "self.entropy_coef * mean(entropy)",
        wrong_ppo_loss(entropy_coef_used=0.01),
    ),
    Mistake(
        "the entropy bonus is missing: subtract entropy_coef * mean(entropy)",
        wrong_ppo_loss(entropy_coef_used=0.0),
    ),
    Mistake(
        "clip_epsilon is ignored (0.2 is used whatever is passed): pass self.clip_epsilon to the surrogate",
        wrong_ppo_loss(clip=0.2),
    ),
    Mistake(
        "the entropy is detached: it carries the gradient that keeps the policy exploring; "
        "subtract entropy_coef * entropy.mean() as it comes",
        wrong_ppo_loss(detach_entropy=True),
    ),
    Mistake("the entropy is summed; subtract entropy_coef times its mean", wrong_ppo_loss(entropy_sum=True)),
    Mistake(
        "the entropy is averaged over the padding too: its mean is over the valid entries, masked_mean(entropy, mask)",
        wrong_ppo_loss(entropy_over_padding=True),
    ),
    Mistake(
        "the value loss is averaged over the padding too: pass the mask to value_loss",
        wrong_ppo_loss(value_over_padding=True),
    ),
    Mistake(
        "gradient flows into returns: the value targets are constants, use returns.detach()",
        wrong_ppo_loss(returns_attached=True),
    ),
] + [Mistake(message, wrong_ppo_loss(policy=surrogate(**options))) for message, options in SURROGATE_MISTAKES[:-N_HIGH]]
PPO_LOSS_MISTAKES += [
    *(
        Mistake(
            "the advantages are normalised inside the loss (CleanRL's norm_adv): PPOLoss uses them as given; "
            "normalise them before the call if wanted",
            wrong_ppo_loss(normalise_adv=pool),
        )
        for pool in (True, "all")
    ),
    Mistake(
        "the coefficients are swapped: value_loss_coef weighs the value loss and entropy_coef the entropy, "
        "policy_loss + value_loss_coef * value_loss - entropy_coef * entropy",
        wrong_ppo_loss(swap_coefs=True),
    ),
    Mistake(
        "the total is divided by 3 (a mean of the three terms); PPO's loss is their weighted sum, "
        "policy_loss + value_loss_coef * value_loss - entropy_coef * entropy",
        wrong_ppo_loss(scale=1 / 3),
    ),
    Mistake(
        "the entropy of the padding is summed in: entropy.sum() / mask.sum() counts every entry on top and only "
        "the valid ones below; average the valid entries only, masked_mean(entropy, mask)",
        wrong_ppo_loss(entropy_padding_summed=True),
    ),
    Mistake(
        "values is detached and returns is not: the critic gets no gradient, the targets do; detach the "
        "targets, returns.detach(), and leave values as they come",
        wrong_ppo_loss(detach_values=True),
    ),
    Mistake(
        "the policy loss ignores the mask: the padding's -inf log-probs reach it (NaN); pass the mask to the "
        "clipped surrogate loss, which selects the valid entries before the ratio",
        wrong_ppo_loss(policy_over_padding=True),
    ),
    Mistake(
        "the policy loss is summed over the entries; average it over the valid entries (the clipped surrogate "
        "loss's mean)",
        wrong_ppo_loss(policy_sum=True),
    ),
    Mistake(
        "value_loss_coef multiplies the policy loss too (value_loss_coef * (policy_loss + value_loss)); it weighs "
        "the value loss alone: policy_loss + value_loss_coef * value_loss - entropy_coef * entropy",
        wrong_ppo_loss(coef_on_policy=True),
    ),
    Mistake(
        "value_loss_coef multiplies the policy loss instead of the value loss (value_loss_coef * policy_loss + "
        "value_loss); it weighs the value loss: policy_loss + value_loss_coef * value_loss - entropy_coef * entropy",
        wrong_ppo_loss(coef_moved=True),
    ),
    Mistake(
        "the value loss's 0.5 is applied twice: value_loss already holds the 0.5, so the loss adds "
        "value_loss_coef * value_loss, no more 0.5",
        wrong_ppo_loss(value_factor=0.5),
    ),
]
