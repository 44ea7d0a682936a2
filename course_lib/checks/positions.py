"""Where a wrong output is wrong: at the first or last step, only at padded positions, a row at a time, after the
first row, or in the order of its entries, or one number everywhere, on every wrong case (the relations of
:mod:`course_lib.checks.relations`, about places).
"""

from __future__ import annotations

import torch

from course_lib.checks.compare import moves_two_in_a_row
from course_lib.checks.counts import is_mask
from course_lib.checks.relations import _close, _finite, _outputs, _Pair

_isclose = torch.isclose


def _along_time(pairs: list[_Pair], rtol: float, atol: float) -> bool:
    """Every pair has a last axis, one of them three steps or more (on one step, first and last are all), that
    axis is not the batch of an input (an output with one value per row of an input, a reward each, has its
    examples along its last axis, not its steps), and two rows or more are wrong, on one case or several (one
    wrong row is one wrong example, whatever its place): the rule of :func:`course_lib.checks.compare._pattern`."""
    if not all(p.got.dim() >= 1 for p in pairs) or not any(p.got.shape[-1] >= 3 for p in pairs):
        return False
    if any(_per_input_row(p) for p in pairs):
        return False
    rows = 0
    for p in pairs:
        wrong = ~_isclose(p.got, p.expected, rtol=rtol, atol=atol)
        rows += int(wrong.reshape(-1, wrong.shape[-1]).any(-1).sum())
    return rows >= 2


def _per_input_row(p: _Pair) -> bool:
    """The output has one value per row of a tensor input: its shape is that input's without the last axis."""
    for value in p.seen.kwargs.values():
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and tuple(value.shape[:-1]) == tuple(p.got.shape):
            return True
    return False


def _some_row_moves_two(pairs, rtol, atol) -> bool:
    """Some row of some pair differs in two entries or more: a 0/1 row wrong in one entry at its edge lines up
    with a shift of itself, and says nothing of one."""
    return any(moves_two_in_a_row(~_isclose(p.got, p.expected, rtol=rtol, atol=atol)) for p in pairs)


def _boundary(pairs, rtol, atol) -> str | None:
    """Wrong only at the first step, or only at the last, along the last axis."""
    if not _finite(pairs) or not _along_time(pairs, rtol, atol):
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
    """The reference shifted one step or reversed along the last axis.

    A shift must move something: on some case the entries it lines up differ where they are (a row constant along
    the axis is its own shift). For a 0/1 output, some row differs in two entries or more, and the step it vacates
    holds 0 or the reference's own entry, what an index off by one leaves there: a mask wrong in one place (one
    entry longer, one shorter) would otherwise read as a shift of itself."""
    if not _finite(pairs) or not _along_time(pairs, rtol, atol):
        return None
    moves_two = _some_row_moves_two(pairs, rtol, atol)

    def vacated(e, g, edge):
        if not bool(((e == 0) | (e == 1)).all()):
            return True
        if not moves_two:
            return False
        return _close(g[..., edge], 0 * g[..., edge], rtol, atol) or _close(g[..., edge], e[..., edge], rtol, atol)

    def earlier(e, g):
        return _close(g[..., :-1], e[..., 1:], rtol, atol) and vacated(e, g, -1)

    def later(e, g):
        return _close(g[..., 1:], e[..., :-1], rtol, atol) and vacated(e, g, 0)

    def reversed_(e, g):
        return _close(g, e.flip(-1), rtol, atol)

    moves = (
        ("shifted one step earlier", earlier, lambda e, g: not _close(g[..., :-1], e[..., :-1], rtol, atol)),
        ("shifted one step later", later, lambda e, g: not _close(g[..., 1:], e[..., 1:], rtol, atol)),
        ("reversed", reversed_, lambda e, g: True),
    )
    for words, holds, moves_something in moves:
        if all(holds(p.expected, p.got) for p in pairs) and any(moves_something(p.expected, p.got) for p in pairs):
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


def _flagged(pairs, rtol, atol) -> str | None:
    """Wrong only where a 0/1 input other than a mask is 1 (a terminal step, ``dones``): what happens at a flagged
    entry is wrong, and everything else is right."""
    if not _finite(pairs):
        return None
    names, unset = None, set()  # unset: the flags seen at 0 somewhere (a flag set everywhere says nothing)
    for p in pairs:
        wrong = ~_isclose(p.got, p.expected, rtol=rtol, atol=atol)
        flags = _flags(p.seen.kwargs, p.got.shape)
        here = [key for key, flag in flags if not bool((wrong & (flag == 0)).any())]
        unset |= {key for key, flag in flags if bool((flag == 0).any())}
        names = here if names is None else [key for key in names if key in here]
        if not names:
            return None
    names = [key for key in names if key in unset]
    if not names:
        return None
    zero = all(bool((p.got[~_isclose(p.got, p.expected, rtol=rtol, atol=atol)] == 0).all()) for p in pairs)
    there = " (and 0 there)" if zero else ""
    return (
        f"{_outputs(pairs)} is wrong only where `{names[0]}` is 1{there}, on every case where yours is wrong, and "
        f"right everywhere else: what should happen at a step where `{names[0]}` is set?"
    )


def _flags(kwargs, shape) -> list[tuple[str, torch.Tensor]]:
    """The inputs of ``shape`` that hold only 0s and 1s, some 1s, and are not named like a mask (``dones``)."""
    found = []
    for key, value in kwargs.items():
        if not isinstance(value, torch.Tensor) or value.shape != shape or "mask" in key.lower():
            continue
        flag = value.detach()
        if flag.is_complex() or not bool(((flag == 0) | (flag == 1)).all()):
            continue
        if bool((flag != 0).any()):
            found.append((key, flag))
    return found


def _permuted(pairs, rtol, atol) -> str | None:
    """The reference's numbers, every one of them, in another order: a reshape, a repeat or a transpose."""
    if not _finite(pairs) or sum(p.got.numel() for p in pairs) < 3:
        return None
    for p in pairs:
        got, expected = p.got.flatten().sort().values, p.expected.flatten().sort().values
        if not _close(got, expected, rtol, atol):
            return None
    transposed = all(p.got.dim() >= 2 and _close(p.got, p.expected.mT, rtol, atol) for p in pairs)
    how = "transposed (its last two axes swapped)" if transposed else "in another order"
    return (
        f"{_outputs(pairs)} holds the reference's numbers, each of them, {how}, on every case where yours is "
        "wrong: the values are right and their places are not (a reshape, a repeat, a transpose or an index?)"
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
        if all(bool(((p.expected == 0) | (p.expected == 1)).all()) for p in pairs):
            return (
                f"whole rows of {_outputs(pairs)} are wrong, every entry of such a row off by the same amount, and "
                "the other rows right, on every case where yours is wrong: what in your code decides a whole row "
                "at once?"
            )
        return (
            f"{_outputs(pairs)} minus the reference is the same along the last axis within each row and differs "
            "between rows, on every case where yours is wrong: something added or subtracted once per row (a "
            "baseline, a mean) is wrong: over which entries is it taken?"
        )
    factors = [_row_factors(p, rtol, atol) for p in pairs]
    if all(f is not None for f in factors) and _varies(pairs, factors, atol):
        return (
            f"in {_outputs(pairs)}, each row is the reference's row times a factor of its own, on every case where "
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


def _same_everywhere(pairs, rtol, atol) -> str | None:
    """One number in every entry where the reference has several: each row's own quantity (a mean, a sum, a
    baseline) computed once for the whole batch. Said of the values, on every case where they are wrong (a case
    where only a gradient is wrong, one response alone, has no entries to compare)."""
    values = [p for p in pairs if not p.what.startswith("gradient of ")]
    if not values or not _finite(values):
        return None
    for p in values:
        if p.got.numel() < 2 or not _close(p.got, p.got.flatten()[0].expand_as(p.got), rtol, atol):
            return None
        if _close(p.expected, p.expected.flatten()[0].expand_as(p.expected), rtol, atol):
            return None
    return (
        f"every entry of {_outputs(values)} is one and the same number where the reference's differ, on every case "
        "where its values are wrong: was a mean or a sum taken over the whole batch where each row has its own?"
    )


def _first_row_right(pairs, rtol, atol) -> str | None:
    """Right in the first row of the batch and wrong in a later one: something carried from one row into the next."""
    if not _finite(pairs):
        return None
    for p in pairs:
        if p.got.dim() < 2 or p.got.shape != p.expected.shape:
            return None
        rows_got, rows_expected = p.got.reshape(-1, p.got.shape[-1]), p.expected.reshape(-1, p.got.shape[-1])
        if not _close(rows_got[0], rows_expected[0], rtol, atol):
            return None
    return (
        f"{_outputs(pairs)} is right in the first row and wrong in a later row, on every case where yours is wrong: "
        "does a value carry over from one row into the next (a running total not reset for each row, a loop "
        "over the wrong axis)?"
    )
