"""The counts a case's inputs show, to name a factor: "times 4" is a clue, "times T, the sequence length" a cause.

A student who divides by the wrong count (a sum where a mean is wanted, the longest response's length for
T, G for G - 1) gives the reference times a ratio of counts, which changes from case to case with the shapes
and the masks. :func:`factor_names` tries the counts of each case's inputs, one at a time, their inverses and
their ratios, and names those that reproduce the student's output on every wrong case.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

_allclose = torch.allclose


def is_mask(key: str, value: torch.Tensor) -> bool:
    """A 0/1 tensor that marks valid positions: a bool tensor, or a tensor named like a mask holding 0s and 1s."""
    if value.dtype == torch.bool:
        return True
    if "mask" not in key.lower() or value.is_complex():
        return False
    return bool(((value == 0) | (value == 1)).all())


def counts(kwargs: Mapping[str, Any]) -> dict[str, float]:
    """Each count the inputs show, by the code that computes it: `rewards.shape[-1]`, `mask.sum()`, `k`."""
    found: dict[str, float] = {}
    for key, value in kwargs.items():
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            found[f"`{key}`"] = float(value)
        if not isinstance(value, torch.Tensor) or value.dim() == 0:
            continue
        for axis in range(value.dim()):
            found[f"`{key}.shape[{axis - value.dim()}]`"] = float(value.shape[axis])
        if value.shape[-1] >= 2:
            found[f"`{key}.shape[-1] - 1`"] = float(value.shape[-1] - 1)
        if value.dim() >= 2:
            found[f"`{key}.numel()`"] = float(value.numel())
        if is_mask(key, value):
            valid = value.detach().to(torch.float64)
            found[f"`{key}.sum()` (the number of valid positions)"] = float(valid.sum())
            if value.dim() >= 1:
                found[f"`{key}.sum(-1).max()` (the longest row's valid positions)"] = float(valid.sum(-1).max())
                found[f"`{key}.sum(-1).min()` (the shortest row's valid positions)"] = float(valid.sum(-1).min())
    return {name: number for name, number in found.items() if number > 0}


def _candidates(kwargs: Mapping[str, Any]) -> list[tuple[int, str, float]]:
    """(tier, words, value): each count, then its inverse, then each ratio of two counts, then the square roots of
    these (a std taken with another count: Bessel's correction twice gives sqrt(G / (G - 1)))."""
    shown = counts(kwargs)
    found = [(0, name, number) for name, number in shown.items()]
    found += [(1, f"1 / {name}", 1 / number) for name, number in shown.items()]
    for top, top_number in shown.items():
        for bottom, bottom_number in shown.items():
            if top != bottom:
                found.append((2, f"{top} / {bottom}", top_number / bottom_number))
    found += [(3, f"sqrt({words})", value**0.5) for tier, words, value in list(found)]
    return found


def factor_names(pairs, rtol: float, atol: float) -> str | None:
    """The counts that, on every pair, make ``got == count * expected``: words for the best tier, else None.

    ``pairs`` carry ``seen.kwargs``, ``expected`` and ``got`` (:mod:`course_lib.checks.structure`). A count
    must be computable on every case, and reproduce the student's output on each one; when several of the
    same tier do (two axes of one length on every case), they are all named, joined by "or"."""
    per_case = [{words: (tier, value) for tier, words, value in _candidates(p.seen.kwargs)} for p in pairs]
    common = set(per_case[0]).intersection(*per_case[1:])
    matches = []
    for words in common:
        values = [table[words][1] for table in per_case]
        holds = all(
            p.got.shape == p.expected.shape and bool(_allclose(p.got, v * p.expected, rtol=rtol, atol=atol))
            for p, v in zip(pairs, values)
        )
        if holds and any(abs(v - 1) > 1e-9 for v in values):
            matches.append((per_case[0][words][0], words))
    if not matches:
        return None
    best = min(tier for tier, _ in matches)
    named = sorted((words for tier, words in matches if tier == best), key=lambda words: (len(words), words))
    shown = " or ".join(named[:2])
    return shown + (f" (or {len(named) - 2} more counts equal to it)" if len(named) > 2 else "")
