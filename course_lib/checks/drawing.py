"""Cases drawn at grading time: what a table of answers learnt by heart cannot know.

At grading, every ``check_against_reference`` runs the notebook's cases and, after them, cases drawn from a seed
that the kernel learns only when its check cell starts (:mod:`course_lib.checks.guard`), and that the grader
uses again to judge. Two kinds:

- each case moved a little (:func:`moved`): its floating tensors get noise, unless they hold whole numbers
  (masks, counts, 0/1 rewards keep their meaning);
- the check's own drawing (its ``draw(g)``): fresh cases of every kind the exercise takes, integers, strings,
  lists, configs and 0/1 masks included, built with the helpers below from a ``torch.Generator``.

A drawn case the reference refuses with ``ValueError`` (out of its domain) is not asked.
"""

from __future__ import annotations

from dataclasses import replace

import torch

DRAWN = "a case drawn at grading time"


def is_drawn(case) -> bool:
    return case.description.startswith(DRAWN)


def _integral(t: torch.Tensor) -> bool:
    finite = t[torch.isfinite(t)]
    return bool(finite.numel() == 0 or torch.equal(finite, finite.round()))


def moved(case, number: int, seed: int):
    """A copy of ``case`` with its floating tensors moved by noise drawn from ``seed`` (None: nothing to move)."""
    g = torch.Generator().manual_seed(seed * 1000 + number)
    kwargs, any_moved = {}, False
    for key, value in case.kwargs.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() and not _integral(value):
            noise = torch.randn(value.shape, generator=g, dtype=torch.float64).to(value.dtype)
            value = value + 0.1 * noise * (1 + value.abs())
            any_moved = True
        kwargs[key] = value
    if not any_moved:
        return None
    return replace(case, description=f"{DRAWN}, like: {case.description}", kwargs=kwargs)


def drawn_cases(cases, seed: int, draw=None) -> list:
    """The drawn cases of one check: each case moved, then the check's own drawing."""
    found = [c for c in (moved(c, n, seed) for n, c in enumerate(cases)) if c is not None]
    if draw is not None:
        fresh = draw(torch.Generator().manual_seed(seed * 1000 + 999))
        found += [replace(c, description=f"{DRAWN}: {c.description}") for c in fresh]
    return found


# --- helpers for a check's own drawing: every one takes the generator first ------------------------------------


def integer(g: torch.Generator, low: int, high: int) -> int:
    """A whole number in ``[low, high]``."""
    return int(torch.randint(low, high + 1, (), generator=g))


def choice(g: torch.Generator, options):
    """One of ``options``."""
    options = list(options)
    return options[integer(g, 0, len(options) - 1)]


def shuffled(g: torch.Generator, items) -> list:
    items = list(items)
    return [items[i] for i in torch.randperm(len(items), generator=g).tolist()]


def lengths_mask(g: torch.Generator, shape, T: int, empty: bool = True) -> torch.Tensor:
    """A ``(*shape, T)`` 0/1 mask of ragged lengths from 0 (when ``empty``) or 1 to ``T``, valid tokens first."""
    low = 0 if empty else 1
    lengths = torch.randint(low, T + 1, tuple(shape), generator=g)
    return (torch.arange(T) < lengths[..., None]).long()


def garbage(g: torch.Generator, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``x`` with its padding (where ``mask`` is 0) holding NaN, +inf, -inf or a huge number, drawn."""
    junk = torch.tensor([float("nan"), float("inf"), -float("inf"), -1e4, 1e4], dtype=x.dtype)
    picks = junk[torch.randint(0, len(junk), x.shape, generator=g)]
    return torch.where(mask.bool(), x, picks)
