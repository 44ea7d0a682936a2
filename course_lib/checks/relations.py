"""Relations between a wrong output and the reference's, each tested on every wrong case at once.

Each relation takes the pairs (one wrong output or gradient on one case, both in float64) and returns the
words for what the student's output did, or None when one pair breaks it. These are about the values: a
factor (a constant, a count of the inputs, an input tensor), a sign, an offset, NaN where the reference has
numbers, a reduction too many or too few, a normalisation along the last axis, an input compared entry by
entry, no gradient where the reference has one. Where in the output a difference lies (a step, the padding,
a row) is :mod:`course_lib.checks.positions`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from course_lib.checks.compare import _Outcome
from course_lib.checks.counts import factor_names

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


def _outputs(pairs: list[_Pair]) -> str:
    """The outputs that disagree, as a student reads them: "your loss", "each of your loss and clip_fraction"."""
    names = []
    for pair in pairs:
        if pair.what not in names:
            names.append(pair.what)
    if len(names) == 1:
        return f"your {names[0]}"
    return f"each of your {', '.join(names[:-1])} and {names[-1]}"


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
    if not all(p.what.startswith("gradient of ") for p in pairs):
        return None
    names = sorted({p.what.removeprefix("gradient of ") for p in pairs})
    inputs = ", ".join(f"`{name}`" for name in names)
    # A constant that gets a gradient may get a NaN one (through padding that holds NaN): still a gradient.
    if all(not bool(p.expected.any()) for p in pairs) and all(bool(p.got.any()) for p in pairs):
        return (
            f"the values are right, but {inputs} gets a gradient, and in the reference it is a constant "
            "(no gradient at all): detach it where it enters"
        )
    if not _finite(pairs):
        return None
    if all(not bool(p.got.any()) for p in pairs):
        return (
            f"the values are right, and no gradient reaches {inputs} on any case where yours is wrong: the result "
            "is cut from it on the way (.detach(), .item(), torch.no_grad(), a comparison or a rounding)"
        )
    return None


def _zero(pairs, rtol, atol) -> str | None:
    if not _finite(pairs) or not all(_close(p.got, torch.zeros_like(p.got), 0.0, atol) for p in pairs):
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


def _an_input(pairs, rtol, atol) -> str | None:
    """Yours is one of the inputs as it came in: what should change it never did (a loop that has not run yet)."""
    if not _finite(pairs):
        return None
    keys = [k for k, v in pairs[0].seen.kwargs.items() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    for key in keys:
        inputs = [p.seen.kwargs.get(key) for p in pairs]
        if all(
            isinstance(x, torch.Tensor) and _close(p.got, x.detach().to(torch.float64), rtol, atol)
            for x, p in zip(inputs, pairs)
        ):
            return (
                f"{_outputs(pairs)} is the input `{key}` as it came in, on every case where yours is wrong: was "
                "it taken before what should change it was computed (a loop not run yet, a term left at 0)?"
            )
    return None


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
    # Over two entries or more a log-softmax is at most 0 and a softmax between 0 and 1, with some entry strictly
    # inside: a 0/1 output that happens to sum to 1 (a one-hot row, a probability of 1) is no normalisation.
    tests = (
        ("a log-softmax: exp(yours) sums to 1", lambda t: t.logsumexp(-1), 0.0, lambda t: _inside(t, -math.inf, 0)),
        ("a softmax: yours sums to 1", lambda t: t.sum(-1), 1.0, lambda t: _inside(t, 0, 1)),
    )
    for words, total, one, strict in tests:
        if not all(p.got.shape[-1] < 2 or strict(p.got) for p in pairs):
            continue
        sums = [total(p.got) for p in pairs]
        if not all(_close(s, torch.full_like(s, one), rtol, atol) for s in sums):
            continue
        reference = [total(p.expected) for p in pairs]
        if all(_close(s, torch.full_like(s, one), rtol, atol) for s in reference):
            continue
        return (
            f"{_outputs(pairs)} is {words} along the last axis, on every case where yours is wrong, and the "
            "reference's is not: which axis should your softmax run over (the one that holds the choices: the "
            "vocabulary, the group)?"
        )
    return None


def _inside(t: torch.Tensor, low: float, high: float) -> bool:
    """Every entry in [low, high], one of them strictly inside."""
    return bool(((t >= low) & (t <= high)).all()) and bool(((t > low) & (t < high)).any())


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


def _bounds(pairs, rtol, atol) -> str | None:
    """Every wrong entry of yours is a clip bound itself, ±(1 ± eps) or ±eps for a number argument eps: something
    is clipped that the reference does not clip there."""
    if not _finite(pairs):
        return None
    names = [k for k, v in pairs[0].seen.kwargs.items() if isinstance(v, float)]
    seen_bounds = set()
    for p in pairs:
        numbers = {k: p.seen.kwargs.get(k) for k in names if isinstance(p.seen.kwargs.get(k), float)}
        bounds = {}
        for key, eps in numbers.items():
            for words, value in ((f"1 - {key}", 1 - eps), (f"1 + {key}", 1 + eps), (key, eps)):
                bounds.setdefault(value, words)
                bounds.setdefault(-value, f"-({words})" if " " in words else f"-{words}")
        wrong = p.got[~_isclose(p.got, p.expected, rtol=rtol, atol=atol)]
        for entry in wrong.tolist():
            match = [words for value, words in bounds.items() if abs(entry - value) <= atol + rtol * abs(value)]
            if not match:
                return None
            seen_bounds.add(match[0])
    if sum(int((~_isclose(p.got, p.expected, rtol=rtol, atol=atol)).sum()) for p in pairs) < 2:
        return None
    shown = ", ".join(sorted(seen_bounds))
    return (
        f"where {_outputs(pairs)} is wrong, each entry is a bound itself ({shown}), on every case where yours is "
        "wrong: something is clipped there that the reference does not clip; what exactly do you clip?"
    )


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


_NARROW = (torch.bfloat16, torch.float16, torch.float32)  # by mantissa bits, 8, 11 and 24: the fewest first


def _input_dtype(seen: Seen) -> torch.dtype | None:
    """The floating dtype the case ran in (its floating inputs'), or None where it has none."""
    for value in seen.kwargs.values():
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.dtype
    return None


def _held_in(t: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether every entry of ``t`` (float64) is exactly a number of ``dtype``: a value that was rounded to it."""
    return bool((t.to(dtype).to(torch.float64) == t).all())


def _rounded(pairs, rtol, atol) -> str | None:
    """Every value of yours is exactly a number of a narrower dtype than the inputs', where the reference's are
    not: part of the computation ran in float16, bfloat16 or float32, and its rounding is the difference. Read
    before :func:`_nearly`, which says only the size of such a difference."""
    if not _finite(pairs):
        return None
    widths = {torch.float16: 16, torch.bfloat16: 16, torch.float32: 32, torch.float64: 64}
    for narrow in _NARROW:
        held = True
        for p in pairs:
            wide = _input_dtype(p.seen)
            if wide is None or widths.get(wide, 0) <= widths[narrow]:
                return None
            if not _held_in(p.got, narrow) or _held_in(p.expected, narrow):
                held = False
                break
        if held:
            name = str(narrow).removeprefix("torch.")
            wide_name = str(_input_dtype(pairs[0].seen)).removeprefix("torch.")
            return (
                f"every value of {_outputs(pairs)} is exactly a {name} number, on every case where yours is wrong, "
                f"though the inputs are {wide_name}: part of your computation ran in {name} (a .half(), "
                ".bfloat16() or .float(), or a tensor made without dtype=), and its rounding is the difference; "
                "compute in the inputs' dtype"
            )
    return None


def _nearly(pairs, rtol, atol) -> str | None:
    """Close to the reference but outside the check's tolerance, on every wrong case: a few significant digits
    agree. Read last, after every relation that names a shape of the difference: only the size is said here."""
    if not _finite(pairs):
        return None
    worst = 0.0
    for p in pairs:
        scale = float(p.expected.abs().max()) if p.expected.numel() else 0.0
        if scale <= atol:
            return None
        worst = max(worst, float((p.got - p.expected).abs().max()) / scale)
    if not 0.0 < worst <= 1e-2:
        return None
    digits = int(-math.log10(worst))
    return (
        f"{_outputs(pairs)} is close to the reference but not within the check's tolerance, on every case where "
        f"yours is wrong: the largest difference is {worst:.1g} of the output's size (about {digits} significant "
        "digits agree); look for a value kept in low precision (float16, bfloat16, or float32 for float64 inputs), "
        "a rounding, or a small constant (an eps) that differs"
    )
