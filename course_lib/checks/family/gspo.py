"""The check of chapter 11's GSPO sequence log ratio (reference: ``course_lib.family.gspo_sequence_log_ratio``)."""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference, drawing
from course_lib.family import gspo_sequence_log_ratio

F64 = torch.float64


def _logps(g: torch.Generator, *shape):
    """(logp, logp_old) of some tokens: log-probs below 0, ratios spread around 1."""
    old = -3.0 * torch.rand(*shape, generator=g, dtype=F64)
    return old + 0.4 * torch.randn(*shape, generator=g, dtype=F64), old


def _gspo_cases() -> list[Case]:
    g = torch.Generator().manual_seed(12)
    ragged = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 0, 0]])
    logp, logp_old = _logps(g, 4, 5)
    with_empty = torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 0, 0]], dtype=torch.bool)
    garbage, garbage_old = _logps(g, 3, 4)
    garbage[~with_empty] = -1e4  # padding may hold anything: it must never change the result
    grouped, grouped_old = _logps(g, 2, 3, 4)
    nan_mask = torch.tensor([[1.0, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 0, 0, 0, 0]], dtype=F64)
    nan_pad, nan_pad_old = _logps(g, 3, 5)
    nan_pad[0, 3:], nan_pad[1, 4], nan_pad_old[0, 4] = float("nan"), float("inf"), float("nan")
    nan_pad_old[2, 1:] = -float("inf")  # a token the old policy could not have sampled: padding only
    grad = ("logp", "logp_old")
    return [
        Case(
            "4 responses of lengths 5, 2, 1, 3 (padded to T=5)",
            {"logp": logp, "logp_old": logp_old, "mask": ragged},
            grad,
        ),
        Case(
            "3 responses of lengths 3, 0 (empty: log ratio 0) and 2, a bool mask, -10000 in the padding",
            {"logp": garbage, "logp_old": garbage_old, "mask": with_empty},
            grad,
        ),
        Case(
            "3 responses of lengths 3, 4, 1 (a float mask), NaN, +inf and -inf in the padding of logp and logp_old",
            {"logp": nan_pad, "logp_old": nan_pad_old, "mask": nan_mask},
            grad,
        ),
        Case(
            "B=2, G=3 responses of T=4 tokens, all valid",
            {"logp": grouped, "logp_old": grouped_old, "mask": torch.ones(2, 3, 4)},
            grad,
        ),
        Case(
            "one response of 6 tokens, the last 2 padding",
            {
                "logp": logp[0, :4].repeat(2)[:6].clone(),
                "logp_old": logp_old[0, :4].repeat(2)[:6].clone(),
                "mask": torch.tensor([1, 1, 1, 1, 0, 0]),
            },
            grad,
        ),
        Case(
            "the first update: logp equals logp_old, every log ratio 0",
            {"logp": logp_old.clone(), "logp_old": logp_old, "mask": ragged},
            grad,
        ),
    ]


def _draw_gspo(g: torch.Generator) -> list[Case]:
    """Fresh batches: leading shapes, ragged lengths with empty responses, masks of every dtype, junk padding."""
    cases = []
    for kind in (torch.long, torch.bool, F64):
        shape = drawing.choice(g, ((3,), (2, 2), (1, 4), (5,)))
        T = drawing.integer(g, 2, 7)
        mask = drawing.lengths_mask(g, shape, T).to(kind)
        logp, logp_old = _logps(g, *shape, T)
        logp, logp_old = drawing.garbage(g, logp, mask), drawing.garbage(g, logp_old, mask)
        cases.append(
            Case(
                f"shape {tuple(shape) + (T,)}, lengths {mask.long().sum(-1).flatten().tolist()}, a "
                f"{str(kind).replace('torch.', '')} mask, NaN, inf or huge numbers in the padding",
                {"logp": logp, "logp_old": logp_old, "mask": mask},
                ("logp", "logp_old"),
            )
        )
    return cases


def check_gspo_sequence_log_ratio(fn) -> bool:
    """Check a student's ``gspo_sequence_log_ratio(logp, logp_old, mask)``, gradients included."""

    def valid(x, mask):
        return torch.where(mask.bool(), x, torch.zeros_like(x))

    def count(mask):
        return mask.to(F64).sum(-1).clamp(min=1)

    def with_detach(fn_):
        return lambda logp, logp_old, mask: fn_(logp, logp_old.detach(), mask)

    def empty_is_zero(per_response, mask):
        # an empty response's log ratio is 0 (the reference's): a mistake about the mean is not also one about it
        return torch.where(mask.to(F64).sum(-1) > 0, per_response, torch.zeros_like(per_response))

    def attached(fn_):  # the check calls with keywords: a mistake must take the exercise's argument names
        return lambda logp, logp_old, mask: fn_(logp, logp_old, mask)

    mistakes = [
        Mistake(
            "you averaged the token ratios exp(logp - logp_old), not their logs: the function returns the mean of "
            "the token LOG ratios, (logp - logp_old) averaged over the valid tokens (GSPO exponentiates that mean)",
            with_detach(lambda p, q, m: valid(torch.exp(p - q), m).sum(-1) / count(m)),
        ),
        Mistake(
            "this is the sum of the token log ratios (the log ratio of the whole sequences' probabilities); "
            "GSPO takes their mean, sum / |y_i|, so long responses do not get extreme ratios",
            with_detach(lambda p, q, m: valid(p - q, m).sum(-1)),
        ),
        Mistake(
            "the mask is ignored: padding is averaged in; average over the valid tokens only",
            with_detach(lambda p, q, m: (p - q).mean(-1)),
        ),
        Mistake(
            "padding is counted in the denominator: divide the masked sum by the number of valid tokens, "
            "mask.sum(-1), not by T",
            with_detach(lambda p, q, m: valid(p - q, m).sum(-1) / p.shape[-1]),
        ),
        Mistake(
            "x * mask does not drop the padding: a NaN or an infinite log-prob there survives it (NaN * 0 and "
            "inf * 0 are NaN); torch.where(mask.bool(), logp - logp_old, 0) drops whatever the padding holds",
            with_detach(lambda p, q, m: ((p - q) * m).sum(-1) / count(m)),
        ),
        Mistake(
            "this is the log of the mean of the token ratios (an arithmetic mean); GSPO's s_i is their "
            "geometric mean: the mean of the log ratios",
            with_detach(lambda p, q, m: empty_is_zero(torch.log(valid(torch.exp(p - q), m).sum(-1) / count(m)), m)),
        ),
        Mistake(
            "this is the log of the mean of the token ratios (an arithmetic mean); GSPO's s_i is their "
            "geometric mean: the mean of the log ratios (and an empty response's log ratio is 0, not log 0)",
            with_detach(lambda p, q, m: torch.log(valid(torch.exp(p - q), m).sum(-1) / count(m))),
        ),
        Mistake(
            "this is a ratio of means (the mean probability under each policy); GSPO averages the token "
            "log ratios logp - logp_old",
            with_detach(lambda p, q, m: torch.log(valid(p.exp(), m).sum(-1) / valid(q.exp(), m).sum(-1))),
        ),
        Mistake(
            "the result is the ratio s_i; the function returns its log, the mean of logp - logp_old",
            with_detach(lambda p, q, m: torch.exp(valid(p - q, m).sum(-1) / count(m))),
        ),
        Mistake(
            "an empty response (no valid token) gives 0 / 0 = NaN; divide by mask.sum(-1).clamp(min=1)",
            with_detach(lambda p, q, m: valid(p - q, m).sum(-1) / m.to(F64).sum(-1)),
        ),
        Mistake(
            "a gradient flows into logp_old: the old policy's log-probs are constants; detach them "
            "(logp - logp_old.detach())",
            attached(lambda p, q, m: valid(p - q, m).sum(-1) / count(m)),
        ),
        Mistake(
            "a gradient flows into logp_old (detach it: logp - logp_old.detach()), and x * mask keeps the "
            "padding's NaN or inf: torch.where(mask.bool(), ..., 0)",
            attached(lambda p, q, m: ((p - q) * m).sum(-1) / count(m)),
        ),
        Mistake(
            "x * mask keeps the padding's NaN or inf (NaN * 0 and inf * 0 are NaN), and an empty response divides "
            "0 by 0: torch.where(mask.bool(), logp - logp_old, 0).sum(-1) / mask.sum(-1).clamp(min=1)",
            with_detach(lambda p, q, m: ((p - q) * m).sum(-1) / m.to(F64).sum(-1)),
        ),
        Mistake(
            "the sign is reversed: GSPO's log ratio averages logp - logp_old (new over old), not logp_old - logp",
            with_detach(lambda p, q, m: valid(q - p, m).sum(-1) / count(m)),
        ),
        Mistake(
            "logp is detached (no gradient reaches the policy) and logp_old is not: the other way round, "
            "logp - logp_old.detach()",
            attached(lambda p, q, m: valid(p.detach() - q, m).sum(-1) / count(m)),
        ),
        Mistake(
            "the mean keeps the token axis (keepdim=True): one log ratio per response is shape [...], not [..., 1]",
            with_detach(lambda p, q, m: valid(p - q, m).sum(-1, keepdim=True) / count(m)[..., None]),
        ),
        Mistake(
            "each response's sum is divided by the valid tokens of the whole batch, mask.sum(); each response "
            "divides by its own count, mask.sum(-1)",
            with_detach(lambda p, q, m: valid(p - q, m).sum(-1) / m.to(F64).sum().clamp(min=1)),
        ),
        Mistake(
            "the padding is summed in the numerator (only the count is masked): drop it before summing, "
            "torch.where(mask.bool(), logp - logp_old, 0).sum(-1)",
            with_detach(lambda p, q, m: (p - q).sum(-1) / count(m)),
        ),
        Mistake(
            "this is one number for the whole batch, the mean over every valid token of every response (x[mask] "
            "flattens the batch); GSPO's log ratio is one per response: sum(-1) / mask.sum(-1)",
            with_detach(lambda p, q, m: (p - q)[m.bool()].mean()),
        ),
        Mistake(
            "every response's sum is divided by the longest response's count, mask.sum(-1).max(); each divides "
            "by its own, mask.sum(-1)",
            with_detach(lambda p, q, m: valid(p - q, m).sum(-1) / m.to(F64).sum(-1).max().clamp(min=1)),
        ),
        Mistake(
            "the mean runs over the first axis (the batch); the tokens of a response are the last axis: "
            "sum(-1) / mask.sum(-1)",
            with_detach(lambda p, q, m: valid(p - q, m).sum(0) / m.to(F64).sum(0).clamp(min=1)),
        ),
        Mistake(
            "the sum is divided by mask.mean(-1), the fraction of valid tokens, not by their number mask.sum(-1): "
            "that multiplies the mean by T, the padded length",
            with_detach(lambda p, q, m: empty_is_zero(valid(p - q, m).sum(-1) / count(m) * m.shape[-1], m)),
        ),
        Mistake(
            "masked_fill(mask, 0) fills where the mask is True, the valid tokens, and keeps the padding: fill "
            "where it is False, masked_fill(~mask.bool(), 0) (or torch.where(mask.bool(), x, 0))",
            with_detach(lambda p, q, m: torch.where(m.bool(), 0.0, p - q).sum(-1) / count(m)),
        ),
    ]
    return check_against_reference(
        fn,
        gspo_sequence_log_ratio,
        _gspo_cases(),
        name="gspo_sequence_log_ratio",
        mistakes=mistakes,
        draw=_draw_gspo,
        check_dtype=True,
    )
