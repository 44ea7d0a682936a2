"""What a wrong output did, in words that hold on every case where it is wrong.

When no catalogued mistake reproduces a student's output (:mod:`course_lib.checks.explain`), the check
still looks at the whole evidence, every case and every output that disagrees, for one *relation* between
the student's output and the reference's that holds on each of them: the reference times one constant (and
whether that constant is a count the inputs show: the sequence length, the number of valid tokens, G/(G-1)),
a flipped sign, a constant offset, an offset or a factor of its own in each row, a difference only at the
first or last step or only at padded positions, the reference shifted or reversed along time, the reference
summed over an axis, no gradient where the reference has one, an output close to the reference's
but outside the tolerance (a few significant digits agree). A relation that fails on one wrong case is not
said. These are facts about the output, not guesses about the code: the message says what the output did and
where to look, never which line is wrong. Where the wrong cases share something that the right ones lack
(``mode='token-mean'``, ``clip_eps=None``, a mask with padding) that is said too: :mod:`course_lib.checks.scope`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch

from course_lib.checks.compare import REFUSES
from course_lib.checks.positions import (
    _boundary,
    _first_row_right,
    _flagged,
    _moved,
    _padding,
    _per_row,
    _permuted,
    _same_everywhere,
)
from course_lib.checks.relations import (
    Seen,
    _an_input,
    _bounds,
    _compares_input,
    _factor,
    _gradient,
    _input_factor,
    _nearly,
    _non_finite,
    _normalised,
    _offset,
    _Pair,
    _reduced,
    _rounded,
    _zero,
)
from course_lib.checks.scope import scope


def describe(evidence: list[Seen], rtol: float, atol: float, right_in: str | None = None) -> str | None:
    """What the output did on every wrong case, and where it is wrong; None when nothing holds on all of them.

    ``right_in``: the dtypes every case already passed in (float64, when the evidence is float32's)."""
    # A count returned as a float (``n / 2`` for ``n * 2``) is wrong in value and in kind, and the kind is told
    # once every value is right: the relation and the scope read the values alone.
    evidence = [dataclasses.replace(seen, wrong=_values(seen.wrong)) for seen in evidence]
    wrong = [seen for seen in evidence if seen.wrong]
    if not wrong or any(REFUSES in seen.wrong for seen in wrong):  # a refusal is said plainly by the check
        return None
    pairs = [_pair(seen, what) for seen in wrong for what in _first_kind(seen.wrong)]
    if any(pair is None for pair in pairs):
        return None
    relation = None
    categorical = any(pair.what.removeprefix("gradient of ") in pair.seen.expected.categorical for pair in pairs)
    for find in _PLACES if categorical else _RELATIONS:
        relation = find(pairs, rtol, atol)
        if relation is not None:
            break
    where = scope(evidence)
    precision = None
    if right_in is not None:
        dtype = str(_first_dtype(wrong)).replace("torch.", "")
        precision = (
            f"it is right on every case in {right_in} and wrong in {dtype} ({len(wrong)} of {len(evidence)} cases): "
            "a matter of precision (floats compared exactly, a constant or a sum kept in low precision?)"
        )
    if relation is None and where is None and precision is None:
        return None
    parts = [part for part in (relation, where, precision) if part is not None]
    return "; ".join(parts)


def _first_dtype(wrong: list[Seen]) -> torch.dtype:
    """The floating dtype the wrong cases ran in (their floating inputs')."""
    for seen in wrong:
        for value in seen.kwargs.values():
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                return value.dtype
    return torch.float32


def _first_kind(wrong: list[str]) -> list[str]:
    """The values that disagree, or the gradients when every value is right: a wrong value makes its gradient
    wrong too, so a relation of the values explains the case."""
    values = [what for what in wrong if not what.startswith("gradient of ")]
    return values or wrong


def _values(wrong: list[str]) -> list[str]:
    """What disagrees but the dtypes."""
    return [what for what in wrong if not what.startswith("dtype of ")]


def _pair(seen: Seen, what: str) -> _Pair | None:
    if what.startswith("gradient of "):
        key = what.removeprefix("gradient of ")
        expected, got = seen.expected.grads.get(key), seen.got.grads.get(key)
    else:
        expected, got = seen.expected.values.get(what), seen.got.values.get(what)
    if expected is None or got is None:
        return None
    return _Pair(seen, what, expected.detach().to(torch.float64), got.detach().to(torch.float64))


# The first relation that holds on every wrong case is said: the specific ones (NaN, a shape, a gradient, all
# zeros, a sign) before the general ones (a factor, an offset), the values before the places.
_RELATIONS: list[Callable[..., str | None]] = [
    _non_finite,
    _reduced,
    _gradient,
    _zero,
    _same_everywhere,
    _factor,
    _an_input,
    _input_factor,
    _offset,
    _normalised,
    _compares_input,
    _bounds,
    _boundary,
    _moved,
    _padding,
    _flagged,
    _per_row,
    _first_row_right,
    _permuted,
    _rounded,
    _nearly,
]

# For an output of category codes (a label as a number: direct=0, scratchpad=1), arithmetic means nothing: a
# "factor 1/3" between two labels is an accident of their numbering. Only what is said of places remains.
_PLACES: list[Callable[..., str | None]] = [_non_finite, _reduced, _boundary, _moved, _padding, _flagged, _permuted]
