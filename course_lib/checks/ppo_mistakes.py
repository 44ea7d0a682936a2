"""Classic wrong implementations of chapter 05's functions, which the checks of ``checks/ppo.py`` recognise.

Each builder takes the mistake as options and returns a function with the exercise's signature (a wrong ratio, a
missing clip, a constant left attached, a wrong reduction or diagnostic); :mod:`course_lib.checks.ppo` pairs each
with the message that names the mistake and its fix. ``SURROGATE_MISTAKES`` serves the three checks that contain
the clipped surrogate.
"""

from __future__ import annotations

import torch

from course_lib.ppo import clipped_surrogate


def surrogate(ratio_fn=None, objective=None, clip_eps_high_used=True, attached=None, low="clip_eps"):
    """Build a wrong clipped surrogate: a different ratio or objective, or a constant left attached.

    ``low``: the lower clip bound's argument, for the diagnostics :func:`wrong_loss` reports with it."""

    def per_element(logp, logp_old, adv, clip_eps, clip_eps_high=None):
        high = clip_eps if (clip_eps_high is None or not clip_eps_high_used) else clip_eps_high
        logp_old = logp_old if attached == "logp_old" else logp_old.detach()
        adv = adv if attached == "adv" else adv.detach()
        ratio = (ratio_fn or (lambda a, b: torch.exp(a - b)))(logp, logp_old)
        if objective is not None:
            return objective(ratio, adv, clip_eps, high, logp - logp_old)
        return -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + high) * adv)

    per_element.low = low
    return per_element


SURROGATE_MISTAKES = [
    ("your ratio looks like logp / logp_old; use exp(logp - logp_old)", dict(ratio_fn=lambda a, b: a / b)),
    (
        "your ratio is the log-ratio logp - logp_old; the ratio is its exponential, exp(logp - logp_old)",
        dict(ratio_fn=lambda a, b: a - b),
    ),
    ("your ratio is inverted: it is exp(logp - logp_old), new over old", dict(ratio_fn=lambda a, b: torch.exp(b - a))),
    (
        "you take the max of the two objectives; PPO takes the min (the pessimistic bound) before the minus sign",
        dict(objective=lambda r, a, lo, hi, lr: -torch.maximum(r * a, torch.clamp(r, 1 - lo, 1 + hi) * a)),
    ),
    (
        "there is no clip: that is the plain surrogate -ratio * adv; take the min with the clipped one",
        dict(objective=lambda r, a, lo, hi, lr: -r * a),
    ),
    (
        "only the clipped term is there (no min): -clip(ratio) * adv lets a ratio outside the range push "
        "further out; take -min(ratio * adv, clip(ratio) * adv)",
        dict(objective=lambda r, a, lo, hi, lr: -torch.clamp(r, 1 - lo, 1 + hi) * a),
    ),
    (
        "only the upper side is clipped: clip the ratio to [1 - clip_eps, 1 + clip_eps_high], both sides "
        "(torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps_high))",
        dict(objective=lambda r, a, lo, hi, lr: -torch.minimum(r * a, torch.clamp(r, max=1 + hi) * a)),
    ),
    (
        "only the lower side is clipped: clip the ratio to [1 - clip_eps, 1 + clip_eps_high], both sides "
        "(torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps_high))",
        dict(objective=lambda r, a, lo, hi, lr: -torch.minimum(r * a, torch.clamp(r, min=1 - lo) * a)),
    ),
    (
        "you take the min of the two ratios, then multiply by adv; take the min of the two products "
        "ratio * adv and clip(ratio) * adv (for adv < 0 the order flips)",
        dict(objective=lambda r, a, lo, hi, lr: -torch.minimum(r, torch.clamp(r, 1 - lo, 1 + hi)) * a),
    ),
    (
        "you clipped the advantage instead of the ratio; clip the ratio to [1 - clip_eps, 1 + clip_eps] and "
        "multiply by adv",
        dict(objective=lambda r, a, lo, hi, lr: -torch.minimum(r * a, r * torch.clamp(a, 1 - lo, 1 + hi))),
    ),
    (
        "you clipped the advantage instead of the ratio (to [-clip_eps, clip_eps]); clip the ratio to "
        "[1 - clip_eps, 1 + clip_eps] and multiply by adv",
        dict(objective=lambda r, a, lo, hi, lr: -torch.minimum(r * a, r * torch.clamp(a, -lo, hi))),
    ),
    (
        "you clipped the advantage instead of the ratio (to [-clip_eps, clip_eps], clip_eps_high unused); clip the "
        "ratio to [1 - clip_eps, 1 + clip_eps_high] and multiply by adv",
        dict(objective=lambda r, a, lo, hi, lr: -torch.minimum(r * a, r * torch.clamp(a, -lo, lo))),
    ),
    (
        "the clip's two sides are swapped: the ratio is clipped to [1 - clip_eps, 1 + clip_eps_high] "
        "(clip_eps below, clip_eps_high above)",
        dict(objective=lambda r, a, lo, hi, lr: -torch.minimum(r * a, torch.clamp(r, 1 - hi, 1 + lo) * a)),
    ),
    (
        "you clipped the product ratio * adv; clip the ratio alone to [1 - clip_eps, 1 + clip_eps_high], then "
        "multiply: -min(ratio * adv, clip(ratio) * adv)",
        dict(objective=lambda r, a, lo, hi, lr: -torch.minimum(r * a, torch.clamp(r * a, 1 - lo, 1 + hi))),
    ),
    (
        "you clipped the log-ratio; clip the ratio exp(logp - logp_old) to [1 - clip_eps, 1 + clip_eps]",
        dict(objective=lambda r, a, lo, hi, lr: -torch.minimum(r * a, torch.exp(torch.clamp(lr, 1 - lo, 1 + hi)) * a)),
    ),
    (
        "you clipped the log-ratio to [-clip_eps, clip_eps]; clip the ratio exp(logp - logp_old) to "
        "[1 - clip_eps, 1 + clip_eps]",
        dict(objective=lambda r, a, lo, hi, lr: -torch.minimum(r * a, torch.exp(torch.clamp(lr, -lo, hi)) * a)),
    ),
    (
        "clip_eps is ignored (0.2 is used whatever is passed): clip the ratio to [1 - clip_eps, 1 + clip_eps]",
        dict(objective=lambda r, a, lo, hi, lr: -torch.minimum(r * a, torch.clamp(r, 0.8, 1.2) * a)),
    ),
    (
        "the minus sign is missing: the loss is -min(...), since the optimiser minimises",
        dict(objective=lambda r, a, lo, hi, lr: torch.minimum(r * a, torch.clamp(r, 1 - lo, 1 + hi) * a)),
    ),
    ("gradient flows into logp_old: the old log-probs are constants, use logp_old.detach()", dict(attached="logp_old")),
    ("gradient flows into adv: the advantages are constants, use adv.detach()", dict(attached="adv")),
    (
        "this is dual-clip PPO (Ye et al. 2020): for adv < 0 the loss is also capped at -3 * adv; the course's "
        "PPO has no third clip, -min(ratio * adv, clip(ratio) * adv) alone",
        dict(
            objective=lambda r, a, lo, hi, lr: torch.where(
                a < 0,
                torch.minimum(-torch.minimum(r * a, torch.clamp(r, 1 - lo, 1 + hi) * a), -3.0 * a),
                -torch.minimum(r * a, torch.clamp(r, 1 - lo, 1 + hi) * a),
            )
        ),
    ),
    (
        "clip_eps_high is ignored: the upper clip is 1 + clip_eps_high (it defaults to clip_eps)",
        dict(clip_eps_high_used=False),
    ),
    (
        "clip_eps_high is used on both sides: the ratio is clipped to [1 - clip_eps, 1 + clip_eps_high], "
        "clip_eps below and clip_eps_high above",
        dict(objective=lambda r, a, lo, hi, lr: -torch.minimum(r * a, torch.clamp(r, 1 - hi, 1 + hi) * a), low="high"),
    ),
]
N_HIGH = 2  # the last entries concern clip_eps_high, which only clipped_surrogate takes


def wrong_loss(
    per_element=None, *, ignore_mask=False, reduce="mean", padding="zeroed", normalise_adv=None, **info_mistakes
):
    """A wrong clipped_surrogate_loss built from a wrong per-element loss, reduction or diagnostic.

    ``padding="multiplied"``: the padding's log-probs reach the loss and are only multiplied by the mask
    (``x * mask`` is NaN where x is -inf or NaN); ``"where_after"``: they reach the ratio, and the per-entry loss
    is selected with ``torch.where`` afterwards (the value is right, its gradient NaN); otherwise they are zeroed
    first, as the reference does. ``normalise_adv``: ``"valid"`` or ``"all"``, the advantages normalised inside
    the loss (over the valid entries, or over every entry) as CleanRL's ``norm_adv`` does before the call.
    """

    def loss_fn(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
        valid_bool = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
        if normalise_adv is not None:
            pool = adv.detach()[valid_bool] if normalise_adv == "valid" else adv.detach()
            spread = ((pool - pool.mean()) ** 2).sum() / (pool.numel() - 1)  # torch.std, without its warning at n=1
            adv = (adv.detach() - pool.mean()) / (spread.sqrt() + 1e-8)
        if padding == "zeroed":
            logp = torch.where(valid_bool, logp, torch.zeros_like(logp))
            logp_old = torch.where(valid_bool, logp_old, torch.zeros_like(logp_old))
            adv = torch.where(valid_bool, adv, torch.zeros_like(adv))
        per = (per_element or clipped_surrogate)(logp, logp_old, adv, clip_eps, clip_eps_high)
        if padding == "where_after":
            per = torch.where(valid_bool, per, torch.zeros_like(per))
            logp = torch.where(valid_bool, logp, torch.zeros_like(logp))  # for the diagnostics, which are right
            logp_old = torch.where(valid_bool, logp_old, torch.zeros_like(logp_old))
        valid = torch.ones_like(logp) if (mask is None or ignore_mask) else mask.to(logp.dtype)
        if reduce == "per_row":
            loss = ((per * valid).sum(-1) / valid.sum(-1).clamp(min=1)).mean()
        elif reduce == "sum":
            loss = (per * valid).sum()
        elif reduce == "numel":
            loss = (per * valid).sum() / valid.numel()
        elif reduce == "unclamped":
            loss = (per * valid).sum() / valid.sum()
        else:
            loss = (per * valid).sum() / valid.sum().clamp(min=1)
        high = clip_eps if clip_eps_high is None else clip_eps_high
        low = high if getattr(per_element, "low", "clip_eps") == "high" else clip_eps
        return loss, wrong_info(logp, logp_old, adv, low, mask, high=high, **info_mistakes)

    return loss_fn


def wrong_info(
    logp,
    logp_old,
    adv,
    clip_eps,
    mask,
    *,
    high=None,
    clip_fraction="outside",
    active="binding",
    kl="k3",
    count="valid",
    kl_count=None,
    fraction_high=True,
):
    """PPO's three diagnostics, each possibly computed a wrong way (``kl_count``: approx_kl's own ``count``;
    ``fraction_high=False``: clip_fraction's upper bound is 1 + clip_eps, whatever ``high`` is)."""
    with torch.no_grad():
        valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
        log_ratio = logp.detach() - logp_old.detach()
        ratio = log_ratio.exp()
        low, high = ratio < 1 - clip_eps, ratio > 1 + (clip_eps if high is None else high)
        binding = (high & (adv > 0)) | (low & (adv < 0))
        outside = low | high
        n = float(valid.sum().clamp(min=1)) if count == "valid" else float(valid.numel())
        where = valid if count == "valid" else torch.ones_like(valid)
        if not fraction_high:
            outside = low | (ratio > 1 + clip_eps)
        swapped = (high & (adv < 0)) | (low & (adv > 0))  # the binding sides' signs exchanged
        frac = {"outside": outside, "binding": binding, "high": high, "swapped": swapped}
        kl_count = count if kl_count is None else kl_count
        kl_n = float(valid.sum().clamp(min=1)) if kl_count == "valid" else float(valid.numel())
        kl_where = valid if kl_count == "valid" else torch.ones_like(valid)
        estimate = {
            "k3": (ratio - 1) - log_ratio,
            "k1": -log_ratio,
            "k1_reversed": log_ratio,
            "k2": 0.5 * log_ratio**2,
            "k3_reversed": (1 / ratio - 1) + log_ratio,
        }[kl]
        return {
            "clip_fraction": float((frac[clip_fraction] & where).sum()) / n,
            "clip_active_fraction": float((frac[active] & where).sum()) / n,
            "approx_kl": float(torch.where(kl_where, estimate, torch.zeros_like(estimate)).sum()) / kl_n,
        }
