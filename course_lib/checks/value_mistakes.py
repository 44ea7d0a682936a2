"""Classic wrong value losses of chapter 05, which ``check_value_loss`` (in :mod:`course_lib.checks.ppo`) names.

:func:`wrong_value_loss` builds a value loss with the exercise's signature from the mistake's options (a factor,
a constant left attached, a clip taken the wrong way, a wrong reduction); ``VALUE_MISTAKES`` pairs each with the
message that names it and its fix.
"""

from __future__ import annotations

import torch

from course_lib.checks import Mistake


def wrong_value_loss(
    *,
    half=True,
    reduce=torch.maximum,
    detach_returns=True,
    detach_old=True,
    detach_values=False,
    detach_clipped=False,
    clip_values=False,
    clip_relative=False,
    ignore_mask=False,
    never_clip=False,
    denominator="valid",
    factor=0.5,
    huber=False,
    error="squared",
    reduction="mean",
    clamp=True,
    multiplied=False,
):
    """``multiplied``: the errors multiplied by the mask rather than selected (inf or NaN padding poisons them).
    ``error``: ``"squared"`` or ``"abs"``; ``reduction``: ``"mean"`` over the valid entries, ``"per_row"`` (each
    row's mean, then their mean), ``"sum_last"`` (each row's sum, then their mean), ``"rmse"`` (the root of the
    mean) or ``"square_of_mean"`` (the mean error, squared); ``clamp``: the count of valid entries clamped to 1, as
    the reference's (without it, a mask with no valid entry gives 0 / 0: that mistake alone)."""

    def measure(a, b):
        return (a - b).abs() if error == "abs" else (a - b) ** 2

    def wrong(values, returns, values_old=None, clip_eps=None, mask=None):
        if detach_returns:
            returns = returns.detach()
        if detach_values:
            values = values.detach()
        per_entry = measure(values, returns)
        if huber:
            per_entry = 2.0 * torch.nn.functional.smooth_l1_loss(values, returns, reduction="none")  # 0.5 below
        if clip_eps is not None and not never_clip:
            old = values_old.detach() if detach_old else values_old
            if clip_values:
                clipped = torch.clamp(values, -clip_eps, clip_eps)
            elif clip_relative:
                clipped = torch.minimum(torch.maximum(values, old * (1 - clip_eps)), old * (1 + clip_eps))
            else:
                clipped = old + torch.clamp(values - old, -clip_eps, clip_eps)
            if detach_clipped:
                clipped = clipped.detach()
            clipped_error = measure(clipped, returns)
            if huber is True:  # the Huber loss used for both errors ("unclipped": for the first one only)
                clipped_error = 2.0 * torch.nn.functional.smooth_l1_loss(clipped, returns, reduction="none")
            per_entry = reduce(per_entry, clipped_error)
        valid = torch.ones_like(values) if (mask is None or ignore_mask) else mask.to(values.dtype)
        scale = factor if half else 1.0
        if reduction == "per_row":
            return scale * ((per_entry * valid).sum(-1) / valid.sum(-1).clamp(min=1)).mean()
        if reduction == "sum_last":
            return scale * (per_entry * valid).sum(-1).mean()
        if reduction == "square_of_mean":
            return scale * (((values - returns) * valid).sum() / valid.sum().clamp(min=1)) ** 2
        count = valid.numel() if denominator == "numel" else valid.sum()
        count = count.clamp(min=1) if clamp and denominator != "numel" else count
        # Selected, not multiplied: the padding's entries get a gradient of exactly 0, even when count is 0.
        kept = per_entry * valid if multiplied else torch.where(valid > 0, per_entry, torch.zeros_like(per_entry))
        mean = kept.sum() / count
        return scale * mean.sqrt() if reduction == "rmse" else scale * mean

    return wrong


_SQUARED = "the course's value loss is 0.5 * (values - returns)^2 averaged over the valid entries"

VALUE_MISTAKES = [
    Mistake(
        "the padding's inf or NaN reaches the loss: error * mask is NaN there (0 * inf), and so is the gradient; "
        "select the valid entries, torch.where(mask, error, 0), or select values and returns before the error",
        wrong_value_loss(multiplied=True),
    ),
    Mistake(
        "the factor 0.5 is missing: the course's value loss is 0.5 * (values - returns)^2 "
        "(as CleanRL; SB3 leaves it out)",
        wrong_value_loss(half=False),
    ),
    Mistake(
        "gradient flows into returns: the targets are constants, use returns.detach()",
        wrong_value_loss(detach_returns=False),
    ),
    Mistake(
        "values is detached and returns is not: the critic gets no gradient, the targets do; detach the "
        "targets, returns.detach(), and leave values as they come",
        wrong_value_loss(detach_returns=False, detach_values=True),
    ),
    Mistake(
        "value clipping takes the min of the two errors; PPO takes the max (the pessimistic one)",
        wrong_value_loss(reduce=torch.minimum),
    ),
    Mistake(
        "value clipping averages the two errors; PPO takes their max (the pessimistic one), "
        "torch.maximum(unclipped, clipped)",
        wrong_value_loss(reduce=lambda unclipped, clipped: 0.5 * (unclipped + clipped)),
    ),
    Mistake(
        "gradient flows into values_old: it is a constant, use values_old.detach()",
        wrong_value_loss(detach_old=False),
    ),
    Mistake(
        "the clipped value is detached, so where the clipped error is the larger no gradient reaches values; "
        "values_old + clamp(values - values_old, -clip_eps, clip_eps) keeps the gradient of values inside the range",
        wrong_value_loss(detach_clipped=True),
    ),
    Mistake(
        "clip the change values - values_old to [-clip_eps, clip_eps] and add it to values_old; "
        "do not clip the values themselves",
        wrong_value_loss(clip_values=True),
    ),
    Mistake(
        "the value clip is relative (values_old * (1 - clip_eps) to values_old * (1 + clip_eps), as for a ratio); "
        "it is absolute: values_old + clamp(values - values_old, -clip_eps, clip_eps)",
        wrong_value_loss(clip_relative=True),
    ),
    Mistake("the mask is ignored: average only over valid entries", wrong_value_loss(ignore_mask=True)),
    Mistake(
        f"this is the Huber loss (smooth_l1_loss); {_SQUARED}",
        wrong_value_loss(huber=True),
    ),
    Mistake(
        "this is the Huber loss (smooth_l1_loss) for the unclipped error; the course's value loss is the "
        "squared error, 0.5 * (values - returns)^2, in both branches",
        wrong_value_loss(huber="unclipped"),
    ),
    *(
        Mistake(f"this is the absolute error |values - returns| (an L1 loss); {_SQUARED}", wrong_value_loss(**half))
        for half in ({"error": "abs"}, {"error": "abs", "half": False})
    ),
    *(
        Mistake(
            f"you took the square root of the mean squared error (an RMSE); {_SQUARED}, with no root",
            wrong_value_loss(**half),
        )
        for half in ({"reduction": "rmse"}, {"reduction": "rmse", "half": False})
    ),
    Mistake(
        "you squared the mean error, (mean(values - returns))^2; the loss is the mean of the squared errors, "
        "0.5 * mean((values - returns)^2): errors of both signs must not cancel",
        wrong_value_loss(reduction="square_of_mean"),
    ),
    Mistake(
        "each row is averaged first, then the rows: rows with fewer valid entries weigh more; the loss is the mean "
        "over all valid entries at once, sum / mask.sum()",
        wrong_value_loss(reduction="per_row"),
    ),
    Mistake(
        "each row is summed over its last axis, then the rows averaged; the loss is the mean over all valid "
        "entries at once, sum / mask.sum()",
        wrong_value_loss(reduction="sum_last"),
    ),
    Mistake(
        "padding is counted in the denominator: divide by the number of valid entries, mask.sum(), not by mask.numel()",
        wrong_value_loss(denominator="numel"),
    ),
    Mistake(
        "the factor 0.5 is applied twice (0.25 in all): the loss is 0.5 * mean((values - returns)^2)",
        wrong_value_loss(factor=0.25),
    ),
    Mistake(
        "clip_eps is ignored, in effect: the value is never clipped, or clipped around the returns, where its error "
        "never exceeds the unclipped one; with clip_eps given, the loss is the max of the unclipped error and the "
        "error of values_old + clip(values - values_old, -clip_eps, clip_eps)",
        wrong_value_loss(never_clip=True),
    ),
    Mistake(
        "only the clipped error is used; the loss is the max (the pessimistic one) of the clipped and unclipped errors",
        wrong_value_loss(reduce=lambda unclipped, clipped: clipped),
    ),
    Mistake(
        "a mask with no valid entry gives 0 / 0 = NaN: divide by mask.sum().clamp(min=1), so the loss is 0",
        wrong_value_loss(clamp=False),
    ),
]
