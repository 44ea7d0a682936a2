"""Right for one row and wrong for a batch (or the other way round): a reading of the inputs' number of axes.

Most exercises take inputs of any leading shape: ``rewards[..., T]``, ``logits[..., T, V]``, a flat list of labels
or rows of them (a list is not read: see :func:`axes`). A student who tried one row alone writes ``len(x)``,
``x[t]`` or ``x.shape[0]``, which read the first axis: right on every case of one row, and on a batch a crash,
another shape or other numbers. Neither a crash nor an output of another shape has a relation to the reference's
that :mod:`course_lib.checks.relations` could read, so this reading sorts the cases instead. Each case is *low* when
every input is at the fewest axes any case gives it, and *high* otherwise. When the student is right on every low
case and fails on every high one (or the other way round), that split is what the student should look at.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch

from course_lib.checks.compare import _cast, _run
from course_lib.checks.recording import NotRecorded


def axes(value: Any) -> int | None:
    """How many axes an input has: a tensor's or an array's, else None. A list is not counted: a nested one may be
    rows of a batch or one conversation's messages, and only the exercise's text tells which."""
    if isinstance(value, torch.Tensor):
        return value.dim()
    if isinstance(value, np.ndarray):
        return value.ndim
    return None


def _axes_of(kwargs: Mapping[str, Any]) -> dict[str, int]:
    counted = {key: axes(value) for key, value in kwargs.items()}
    return {key: depth for key, depth in counted.items() if depth is not None}


def rank_split(others, dtype: torch.dtype) -> str | None:
    """The words for "right on every case whose inputs have this many axes, failing on every other", or None.

    ``others`` is the failing check's :class:`course_lib.checks.explain._Others`: every case, the reference and
    the student's function run once per case. A case fails when the student's function crashes there, returns
    another shape or kind, or gives other numbers. At least two cases must fail and two be right (one right case
    alone can be right by chance: a Huber loss is the squared error's on small errors), and the number of axes
    must be all the cases say: the right cases are exactly those where the inputs have one number of axes."""
    numbers, counted = [], []  # the cases asked, and each one's axes per input
    right = set()
    for number, case in enumerate(others.cases):
        if case.refuses or (case.last and not others.edges):
            continue
        is_right = _right_on(others, number, dtype)
        if is_right is None:
            continue  # the reference refuses this case (a drawn one out of its domain): not asked
        numbers.append(number)
        counted.append(_axes_of(case.kwargs))
        if is_right:
            right.add(number)
    failing = len(numbers) - len(right)
    if len(right) < 2 or failing < 2:
        return None
    keys = sorted({key for axes_here in counted for key in axes_here})
    for depth, up_to, names in _shapes_that_split(keys, numbers, counted, right):
        fewest = all(depth <= axes_here.get(names[0], depth) for axes_here in counted)
        listed = _listed(names)
        if up_to:
            return (
                f"yours is right on every case where {listed} at most {depth} {'axis' if depth == 1 else 'axes'} and "
                f"fails on every case with more ({failing} of {len(numbers)} cases): a shape built for that many "
                "axes (x.reshape(-1, 1), B, T = x.shape) breaks on more leading axes, which the exercise allows; "
                "add and read axes at the end: x[..., None] (x.unsqueeze(-1)), x.shape[-1], dim=-1"
            )
        if fewest:
            return (
                f"yours is right on every case of one row (the fewest axes each input has) and fails on every "
                f"case where {listed} more leading axes, a batch ({failing} of {len(numbers)} cases): a size or "
                "an index read from the front (len(x), x[t], x.shape[0], a loop over the first axis) reads the "
                "batch there; the exercise allows any leading axes, so count and index from the end: "
                "x.shape[-1], x[..., t], dim=-1"
            )
        return (
            f"yours is right on every case where {listed} {depth} axes and fails on every case with another "
            f"number of axes ({failing} of {len(numbers)} cases): written for one shape, it breaks on the others "
            "the exercise allows (a single row, more leading axes); count and index from the end (x.shape[-1], "
            "x[..., t], dim=-1), or flatten the leading axes (x.reshape(-1, x.shape[-1])) and restore them after"
        )
    return None


def _shapes_that_split(keys, numbers, counted, right):
    """Each (number of axes, up to it, inputs) such that the cases where those inputs have that many axes (or, with
    ``up to``, at most that many, fewer than the most any case gives) are exactly the right cases; inputs that split
    the cases the same way are named together."""
    found: dict[tuple[int, bool, frozenset], list[str]] = {}
    for key in keys:
        depths = sorted({axes_here[key] for axes_here in counted if key in axes_here})
        for depth in depths:
            holders = frozenset(n for n, axes_here in zip(numbers, counted) if axes_here.get(key) == depth)
            at_most = frozenset(n for n, axes_here in zip(numbers, counted) if axes_here.get(key, depth + 1) <= depth)
            if holders == right:
                found.setdefault((depth, False, holders), []).append(key)
            elif at_most == right and depth < depths[-1]:
                found.setdefault((depth, True, at_most), []).append(key)
    return [(depth, up_to, names) for (depth, up_to, _), names in found.items()]


def _listed(keys: list[str]) -> str:
    """``a`` has; ``a`` and ``b`` have; ``a``, ``b`` and ``c`` have."""
    quoted = [f"`{key}`" for key in keys]
    if len(quoted) == 1:
        return f"{quoted[0]} has"
    return f"{', '.join(quoted[:-1])} and {quoted[-1]} have"


def _right_on(others, number: int, dtype: torch.dtype) -> bool | None:
    """Whether the student's function gives the reference's outputs on case ``number`` (None: no reference)."""
    case = others.cases[number]
    kwargs = _cast(case.kwargs, dtype)
    try:
        expected = _run(others.reference, kwargs, case.grad, others.select, name="reference", refuses=case.refuses)
    except ValueError:
        return None
    expected.categorical = others.categorical
    try:
        got = others._student(number, dtype)
    except NotRecorded:
        return None  # the grading kernel stopped before this case: nothing is known of it
    except AssertionError:
        return False
    return not others._wrong_values(expected, got)  # the values: a kind alone (a float for a tensor) is told last
