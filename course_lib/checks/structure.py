"""What a wrong output did, in words that hold on every case where it is wrong.

When no catalogued mistake reproduces a student's output (:mod:`course_lib.checks.explain`), the check
still looks at the whole evidence, every case and every output that disagrees, for one *relation* between
the student's output and the reference's that holds on each of them: the reference times one constant (and
whether that constant is a count the inputs show: the sequence length, the number of valid tokens, G/(G-1)),
a flipped sign, a constant offset, an offset or a factor of its own in each row, a difference only at the
first or last step or only at padded positions, the reference shifted or reversed along time, the reference
summed over an axis, no gradient where the reference has one. A relation that fails on one wrong case is not
said. These are facts about the output, not guesses about the code: the message says what the output did and
where to look, never which line is wrong. Where the wrong cases share something that the right ones lack
(``mode='token-mean'``, ``clip_eps=None``, a mask with padding) that is said too: :mod:`course_lib.checks.scope`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from course_lib.checks.compare import REFUSES, _Outcome
from course_lib.checks.counts import factor_names, is_mask
from course_lib.checks.scope import scope

_allclose, _isclose, _isfinite = torch.allclose, torch.isclose, torch.isfinite


@dataclass
class Seen:
    """One case of the failing check, in the dtype it failed in: what the reference and the student gave."""

    kwargs: dict[str, Any]
    expected: _Outcome
    got: _Outcome
    wrong: list[str]  # the outputs and gradients that disagree, as _differences names them


@dataclass
class _Pair:
    """One output (or gradient) that disagrees on one case, in float64."""

    seen: Seen
    what: str
    expected: torch.Tensor
    got: torch.Tensor


def describe(evidence: list[Seen], rtol: float, atol: float) -> str | None:
    """What the output did on every wrong case, and where it is wrong; None when nothing holds on all of them."""
    wrong = [seen for seen in evidence if seen.wrong]
    if not wrong or any(_unexplainable(what) for seen in wrong for what in seen.wrong):
        return None
    pairs = [_pair(seen, what) for seen in wrong for what in _first_kind(seen.wrong)]
    if any(pair is None for pair in pairs):
        return None
    relation = None
    for find in _RELATIONS:
        relation = find(pairs, rtol, atol)
        if relation is not None:
            break
    where = scope(evidence)
    if relation is None and where is None:
        return None
    parts = [part for part in (relation, where) if part is not None]
    return "; ".join(parts)


def _first_kind(wrong: list[str]) -> list[str]:
    """The values that disagree, or the gradients when every value is right: a wrong value makes its gradient
    wrong too, so a relation of the values explains the case."""
    values = [what for what in wrong if not what.startswith("gradient of ")]
    return values or wrong


def _unexplainable(what: str) -> bool:
    """A dtype or a refusal that disagrees: said plainly by the check's own message, no relation needed."""
    return what.startswith("dtype of ") or what == REFUSES


def _pair(seen: Seen, what: str) -> _Pair | None:
    if what.startswith("gradient of "):
        key = what.removeprefix("gradient of ")
        expected, got = seen.expected.grads.get(key), seen.got.grads.get(key)
    else:
        expected, got = seen.expected.values.get(what), seen.got.values.get(what)
    if expected is None or got is None:
        return None
    return _Pair(seen, what, expected.detach().to(torch.float64), got.detach().to(torch.float64))


def _outputs(pairs: list[_Pair]) -> str:
    """The outputs that disagree, as a student reads them: "the loss and the gradient of logp"."""
    names = []
    for pair in pairs:
        name = "your output" if pair.what == "output" else f"your {pair.what}"
        if name not in names:
            names.append(name)
    return " and ".join(names)


# ---------------------------------------------------------------------------
# Relations: each holds on every pair, or is not said
# ---------------------------------------------------------------------------


def _close(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> bool:
    return a.shape == b.shape and bool(_allclose(a, b, rtol=rtol, atol=atol))


def _finite(pairs: list[_Pair]) -> bool:
    return all(p.got.shape == p.expected.shape for p in pairs) and all(
        bool(_isfinite(p.got).all()) and bool(_isfinite(p.expected).all()) for p in pairs
    )


def _non_finite(pairs, rtol, atol) -> str | None:
    """NaN or inf where the reference has numbers, on every wrong case."""
    for p in pairs:
        if p.got.shape != p.expected.shape:
            return None
        if not bool((~_isfinite(p.got) & _isfinite(p.expected)).any()):
            return None
    return (
        f"{_outputs(pairs)} holds NaN or inf where the reference has numbers, on every case where yours is wrong "
        "(look for a division by a count or a std that can be 0, a log of 0, or padding values that enter a sum)"
    )


def _reduced(pairs, rtol, atol) -> str | None:
    """Yours is the reference summed or averaged over one axis (a reduction too many), or the other way round."""
    found = None
    for p in pairs:
        match = _reduction(p.expected, p.got, rtol, atol) or _reduction(p.got, p.expected, rtol, atol, flip=True)
        if match is None or (found is not None and match != found):
            return None
        found = match
    op, axis, flipped = found
    axis_words = "the last axis" if axis == -1 else f"axis {axis}"
    if flipped:
        return (
            f"{_outputs(pairs)} keeps {axis_words}, which the reference reduces: the reference is yours {op} over "
            f"{axis_words}, on every case where yours is wrong (a reduction missing)"
        )
    return (
        f"{_outputs(pairs)} is the reference {op} over {axis_words}, on every case where yours is wrong "
        "(a reduction too many: the answer keeps that axis)"
    )


def _reduction(full: torch.Tensor, small: torch.Tensor, rtol, atol, flip: bool = False):
    """(op, axis, flip) when ``small`` is ``full`` summed or averaged over one axis of two entries or more."""
    if full.dim() != small.dim() + 1:
        return None
    for axis in range(full.dim()):
        kept = full.shape[:axis] + full.shape[axis + 1 :]
        if tuple(kept) != tuple(small.shape) or full.shape[axis] < 2:
            continue
        for op, reduce in (("summed", torch.sum), ("averaged", torch.mean)):
            if _close(small, reduce(full, dim=axis), rtol, atol):
                return op, axis - full.dim(), flip
    return None


def _gradient(pairs, rtol, atol) -> str | None:
    """The values are right and a gradient is not: none where the reference has one, or one where it has none."""
    if not all(p.what.startswith("gradient of ") for p in pairs) or not _finite(pairs):
        return None
    names = sorted({p.what.removeprefix("gradient of ") for p in pairs})
    inputs = ", ".join(f"`{name}`" for name in names)
    if all(not bool(p.got.any()) for p in pairs):
        return (
            f"the values are right, and no gradient reaches {inputs} on any case where yours is wrong: the result "
            "is cut from it on the way (.detach(), .item(), torch.no_grad(), a comparison or a rounding)"
        )
    if all(not bool(p.expected.any()) for p in pairs):
        return (
            f"the values are right, but {inputs} gets a gradient, and in the reference it is a constant "
            "(no gradient at all): detach it where it enters"
        )
    return None


def _zero(pairs, rtol, atol) -> str | None:
    if not _finite(pairs) or any(bool(p.got.any()) for p in pairs):
        return None
    return f"{_outputs(pairs)} is 0 in every entry, on every case where yours is wrong"


def _factor(pairs, rtol, atol) -> str | None:
    """Yours is the reference times one constant, or times a count that the inputs show on each case."""
    if not _finite(pairs):
        return None
    ratios = []
    for p in pairs:
        ratio = _ratio(p.expected, p.got, rtol, atol)
        if ratio is None:
            return None
        ratios.append(ratio)
    if sum(int((p.expected.abs() > atol).sum()) for p in pairs) < 2:
        return None  # one number: any two numbers have a ratio
    common = float(torch.tensor(ratios).median())
    if all(_close(p.got, common * p.expected, rtol, atol) for p in pairs):
        if abs(common + 1) < 1e-6 or _close(torch.tensor(common), torch.tensor(-1.0), 1e-4, 1e-6):
            return (
                f"{_outputs(pairs)} is the reference with its sign flipped (every entry negated), on every case "
                "where yours is wrong: look at each minus sign (a loss is minus the objective)"
            )
        names = factor_names(pairs, rtol, atol)
        count = f" ({names}, on each of these cases)" if names else ""
        return (
            f"{_outputs(pairs)} is the reference times {common:.4g}{count}, on every case where yours is wrong: "
            "a factor missing, extra or different (a sum where a mean is wanted divides by a count too few)"
        )
    names = factor_names(pairs, rtol, atol)
    if names is None:
        return None
    shown = ", ".join(f"{r:.4g}" for r in ratios[:4])
    return (
        f"{_outputs(pairs)} is the reference times {names}, on every case where yours is wrong "
        f"(the factors {shown}{', ...' if len(ratios) > 4 else ''}): look at what you divide or multiply by"
    )


def _ratio(expected: torch.Tensor, got: torch.Tensor, rtol, atol) -> float | None:
    """The one number c with got = c * expected, or None."""
    nonzero = expected.abs() > atol
    if not bool(nonzero.any()):
        return None
    ratio = float((got[nonzero] / expected[nonzero]).median())
    return ratio if _close(got, ratio * expected, rtol, atol) else None


def _input_factor(pairs, rtol, atol) -> str | None:
    """Yours is the reference divided by one of the inputs, entry by entry (a factor left out), or times it."""
    if not _finite(pairs) or sum(int((p.expected.abs() > atol).sum()) for p in pairs) < 2:
        return None
    keys = [k for k, v in pairs[0].seen.kwargs.items() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    for key in keys:
        inputs = [p.seen.kwargs.get(key) for p in pairs]
        if not all(isinstance(x, torch.Tensor) and x.shape == p.got.shape for x, p in zip(inputs, pairs)):
            continue
        inputs = [x.detach().to(torch.float64) for x in inputs]
        if all(_close(x, torch.ones_like(x), rtol, atol) for x in inputs):
            continue
        if all(_close(p.got * x, p.expected, rtol, atol) for p, x in zip(pairs, inputs)):
            return (
                f"{_outputs(pairs)} times `{key}` is the reference, entry by entry, on every case where yours is "
                f"wrong: a factor `{key}` is missing from yours"
            )
        if all(_close(p.got, p.expected * x, rtol, atol) for p, x in zip(pairs, inputs)):
            return (
                f"{_outputs(pairs)} is the reference times `{key}`, entry by entry, on every case where yours is "
                f"wrong: `{key}` multiplies yours once too often"
            )
    return None


def _normalised(pairs, rtol, atol) -> str | None:
    """Yours is a log-softmax (or a softmax) along the last axis, and the reference's is not: the wrong axis."""
    if not _finite(pairs) or not all(p.got.dim() >= 1 for p in pairs) or not any(p.got.shape[-1] >= 2 for p in pairs):
        return None
    tests = (
        ("a log-softmax: exp(yours) sums to 1", lambda t: t.logsumexp(-1), 0.0),
        ("a softmax: yours sums to 1", lambda t: t.sum(-1), 1.0),
    )
    for words, total, one in tests:
        sums = [total(p.got) for p in pairs]
        if not all(_close(s, torch.full_like(s, one), rtol, atol) for s in sums):
            continue
        reference = [total(p.expected) for p in pairs]
        if all(_close(s, torch.full_like(s, one), rtol, atol) for s in reference):
            continue
        return (
            f"{_outputs(pairs)} is {words} along the last axis, on every case where yours is wrong, and the "
            "reference's is not: you normalised along another axis than the reference (which axis holds the "
            "choices, the vocabulary or the group?)"
        )
    return None


def _compares_input(pairs, rtol, atol) -> str | None:
    """Yours is one input compared with another entry by entry (ids != eos_id): each entry judged alone."""
    kwargs = pairs[0].seen.kwargs
    tensors = [k for k, v in kwargs.items() if isinstance(v, torch.Tensor) and not v.is_floating_point()]
    scalars = [k for k, v in kwargs.items() if isinstance(v, int) and not isinstance(v, bool)]
    tests = (("==", torch.eq), ("!=", torch.ne))
    for key in tensors:
        for scalar in scalars:
            for sign, compare in tests:
                if all(_compares(p, key, scalar, compare, rtol, atol) for p in pairs):
                    return (
                        f"{_outputs(pairs)} is `{key} {sign} {scalar}`, entry by entry, on every case where yours "
                        f"is wrong: each entry of yours depends on that entry of `{key}` alone, and the "
                        "reference's does not (what comes before an entry matters)"
                    )
    return None


def _compares(p: _Pair, key: str, scalar: str, compare, rtol, atol) -> bool:
    tensor, number = p.seen.kwargs.get(key), p.seen.kwargs.get(scalar)
    if not isinstance(tensor, torch.Tensor) or not isinstance(number, int) or tensor.shape != p.got.shape:
        return False
    return _close(p.got, compare(tensor, number).to(torch.float64), rtol, atol)


def _offset(pairs, rtol, atol) -> str | None:
    if not _finite(pairs) or sum(p.got.numel() for p in pairs) < 2:
        return None
    common = float(torch.cat([(p.got - p.expected).flatten() for p in pairs]).median())
    if abs(common) <= atol or not all(_close(p.got, p.expected + common, rtol, atol) for p in pairs):
        return None
    return (
        f"{_outputs(pairs)} is the reference plus {common:+.4g} in every entry, on every case where yours is "
        "wrong: a constant added or left out"
    )


def _along_time(pairs: list[_Pair]) -> bool:
    """Every pair has a last axis, and one of them three steps or more (on one step, first and last are all)."""
    return all(p.got.dim() >= 1 for p in pairs) and any(p.got.shape[-1] >= 3 for p in pairs)


def _boundary(pairs, rtol, atol) -> str | None:
    """Wrong only at the first step, or only at the last, along the last axis."""
    if not _finite(pairs) or not _along_time(pairs):
        return None
    for edge, words in ((0, "first"), (-1, "last")):
        if all(_wrong_only_at(p, edge, rtol, atol) for p in pairs):
            there = ""
            if all(not bool(p.got[..., edge].any()) for p in pairs):
                there = ", and there yours is 0"
            return (
                f"{_outputs(pairs)} is wrong only at the {words} position along the last axis{there}, on every "
                f"case where yours is wrong: how is the {words} step handled (a loop's range, an initial value)?"
            )
    return None


def _wrong_only_at(p: _Pair, edge: int, rtol, atol) -> bool:
    wrong = ~_isclose(p.got, p.expected, rtol=rtol, atol=atol)
    others = wrong[..., 1:] if edge == 0 else wrong[..., :-1]
    return not bool(others.any())


def _moved(pairs, rtol, atol) -> str | None:
    """The reference shifted one step or reversed along the last axis."""
    if not _finite(pairs) or not _along_time(pairs):
        return None
    moves = (
        ("shifted one step earlier", lambda e, g: _close(g[..., :-1], e[..., 1:], rtol, atol)),
        ("shifted one step later", lambda e, g: _close(g[..., 1:], e[..., :-1], rtol, atol)),
        ("reversed", lambda e, g: _close(g, e.flip(-1), rtol, atol)),
    )
    for words, holds in moves:
        if all(holds(p.expected, p.got) for p in pairs):
            return (
                f"{_outputs(pairs)} is the reference {words} along the last axis, on every case where yours is "
                "wrong: look at the order and the indices of your loop over time"
            )
    return None


def _padding(pairs, rtol, atol) -> str | None:
    """Wrong only where a mask argument is 0: the padding leaks in."""
    if not _finite(pairs):
        return None
    for p in pairs:
        masks = [m for m in _masks(p.seen.kwargs) if m.shape == p.got.shape]
        wrong = ~_isclose(p.got, p.expected, rtol=rtol, atol=atol)
        if not any(not bool((wrong & (m != 0)).any()) for m in masks):
            return None
    return (
        f"{_outputs(pairs)} is wrong only at padded positions (where the mask is 0), on every case where yours "
        "is wrong: the padding leaks in; what should a padded position hold, and does it enter your sums?"
    )


def _masks(kwargs) -> list[torch.Tensor]:
    return [v.detach() for k, v in kwargs.items() if isinstance(v, torch.Tensor) and is_mask(k, v)]


def _per_row(pairs, rtol, atol) -> str | None:
    """A difference, or a factor, of its own in each row: a per-row quantity (a baseline, a std) is wrong."""
    if not _finite(pairs) or not all(p.got.dim() >= 1 for p in pairs):
        return None
    offsets = [(p.got - p.expected).median(-1, keepdim=True).values for p in pairs]
    if all(_close(p.got, p.expected + off, rtol, atol) for p, off in zip(pairs, offsets)) and _varies(
        pairs, offsets, atol
    ):
        return (
            f"{_outputs(pairs)} minus the reference is the same along the last axis within each row and differs "
            "between rows, on every case where yours is wrong: something added or subtracted once per row (a "
            "baseline, a mean) is wrong: over which entries is it taken?"
        )
    factors = [_row_factors(p, rtol, atol) for p in pairs]
    if all(f is not None for f in factors) and _varies(pairs, factors, atol):
        return (
            f"each row of {_outputs(pairs)} is the reference's row times a factor of its own, on every case where "
            "yours is wrong: something each row is divided or multiplied by (a std, a count, a norm) is wrong: "
            "over which entries is it taken?"
        )
    return None


def _row_factors(p: _Pair, rtol, atol) -> torch.Tensor | None:
    nonzero = p.expected.abs() > atol
    ratio = torch.where(nonzero, p.got / torch.where(nonzero, p.expected, torch.ones_like(p.expected)), torch.nan)
    factors = ratio.nanmedian(-1, keepdim=True).values.nan_to_num(1.0)
    return factors if _close(p.got, factors * p.expected, rtol, atol) else None


def _varies(pairs, per_row: list[torch.Tensor], atol: float) -> bool:
    """A row of two entries or more with a wrong entry, and two rows whose own numbers differ."""
    rows = torch.cat([values.flatten() for values in per_row])
    wide = any(p.got.shape[-1] >= 2 and not _close(p.got, p.expected, 0, atol) for p in pairs)
    return wide and rows.numel() >= 2 and float(rows.max() - rows.min()) > 1e-3 * max(1.0, float(rows.abs().max()))


_RELATIONS: list[Callable[..., str | None]] = [
    _non_finite,
    _reduced,
    _gradient,
    _zero,
    _factor,
    _input_factor,
    _offset,
    _normalised,
    _compares_input,
    _boundary,
    _moved,
    _padding,
    _per_row,
]
