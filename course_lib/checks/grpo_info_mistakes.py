"""The wrong diagnostics of chapter 06's ``grpo_loss``: its ``info`` dict computed a wrong way.

``grpo_loss`` returns ``(loss, info)``, and a student can get the loss right and an entry of ``info`` wrong:
``clip_fraction`` counted where the clip binds or over padding, ``kl`` as the penalty or averaged per response,
``adv_abs_mean`` without the absolute value. Each builder here returns the wrong entries from the loss's inputs;
:func:`course_lib.checks.grpo_loss_mistakes.wrong_grpo` puts them beside an otherwise right loss.
"""

from __future__ import annotations

import torch

from course_lib.grpo import kl_estimate


def ratio_of(logp, logp_old):
    return torch.exp(logp - logp_old)


def info_clip_fraction(binding=False, every_token=False, bounds="right"):
    """clip_fraction counted a wrong way; ``bounds``: ``"low"`` (clip_eps on both sides, clip_eps_high ignored)
    or ``"high"`` (clip_eps_high on both sides)."""

    def info(p, p_old, q, adv, valid, eps, high, coef, kind):
        ratio = ratio_of(p, p_old)
        a = adv[..., None].expand_as(p)
        if bounds == "low":
            high = eps
        if bounds == "high":
            eps = high
        out = (ratio < 1 - eps) | (ratio > 1 + high)
        if binding:
            out = ((ratio > 1 + high) & (a > 0)) | ((ratio < 1 - eps) & (a < 0))
        where = torch.ones_like(valid) if every_token else valid
        return {"clip_fraction": float((out & where).sum()) / float(where.sum())}

    return info


def info_kl(transform):
    def info(p, p_old, q, adv, valid, eps, high, coef, kind):
        if q is None:
            return {}
        return {"kl": float(transform(kl_estimate(p, q.detach(), kind), valid, coef))}

    return info


def info_adv(value):
    def info(p, p_old, q, adv, valid, eps, high, coef, kind):
        return {"adv_abs_mean": float(value(adv))}

    return info
