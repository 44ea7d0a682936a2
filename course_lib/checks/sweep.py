"""Exercise check of chapter 07: reading a sweep.

The checks import the reference implementations of ``course_lib.lectures.sweep``; the maths module never
imports its checks, so the file a student opens is the maths alone.
"""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference
from course_lib.lectures.sweep import read_sweep


def _sweep_reader(
    *,
    indices=False,
    swap_unravel=False,
    last_tie=False,
    mean_over_eps=False,
    plateau=False,
    against_last=False,
    argmax_saturation=False,
):
    """A wrong read_sweep: the reference with one classic slip switched on."""

    def wrong(group_sizes, clip_eps, reward, tol=0.1):
        n_rows, n_cols = reward.shape
        if last_tie:  # the last maximal entry: the largest group size among equals
            flat = n_rows * n_cols - 1 - int(torch.argmax(reward.flatten().flip(0)))
        else:
            flat = int(torch.argmax(reward))
        if swap_unravel == "modulo":
            i, j = flat % n_rows, flat // n_rows
        elif swap_unravel:
            i, j = flat // n_rows, flat % n_rows
        else:
            i, j = divmod(flat, n_cols)
        i, j = min(i, n_rows - 1), min(j, n_cols - 1)
        per_group = reward.mean(dim=1) if mean_over_eps else reward.max(dim=1).values
        if argmax_saturation:
            k = int(torch.argmax(per_group))
        elif plateau:  # stops at the first step that gains less than tol: a noisy dip ends it early
            gains = per_group[1:] - per_group[:-1]
            flat_steps = (gains < tol).nonzero()
            k = int(flat_steps[0, 0]) if len(flat_steps) else n_rows - 1
        else:
            target = per_group[-1] if against_last else reward.max()
            within = (per_group >= target - tol).nonzero()
            k = int(within[0, 0]) if len(within) else n_rows - 1
        if indices:
            return i, j, k
        return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])

    return wrong


def check_read_sweep(fn) -> bool:
    """Check a student's ``read_sweep(group_sizes, clip_eps, reward, tol=0.1)``."""

    g = torch.Generator().manual_seed(7)
    G4, E4 = torch.tensor([2, 4, 8, 16]), torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    G3, E5 = torch.tensor([4, 8, 16]), torch.tensor([0.05, 0.1, 0.2, 0.3, 0.5], dtype=torch.float64)
    rising = torch.tensor([3.0, 4.0, 4.6, 4.65], dtype=torch.float64)[:, None]  # saturates at 8 with tol 0.1
    cases = [
        Case(
            "4 x 4 table, reward rising with the group size, distinct values, tol=0.1",
            {
                "group_sizes": G4,
                "clip_eps": E4,
                "reward": rising + 0.01 * torch.rand(4, 4, generator=g, dtype=torch.float64),
            },
        ),
        Case(
            "3 group sizes x 5 clip ranges (not square), best in the last column",
            {
                "group_sizes": G3,
                "clip_eps": E5,
                "reward": torch.tensor(
                    [[1.0, 1.2, 1.5, 1.7, 2.0], [1.1, 1.4, 1.6, 1.9, 2.3], [1.0, 1.3, 1.8, 2.1, 2.4]],
                    dtype=torch.float64,
                ),
                "tol": 0.2,
            },
        ),
        Case(
            "a noisy dip: the reward stalls from 4 to 8, then rises again (tol=0.1)",
            {
                "group_sizes": torch.tensor([2, 4, 8, 16, 32]),
                "clip_eps": torch.tensor([0.2], dtype=torch.float64),
                "reward": torch.tensor([[2.0], [3.0], [3.05], [4.0], [4.95]], dtype=torch.float64),
            },
        ),
        Case(
            "the largest group size is not the best (tol=0.3)",
            {
                "group_sizes": G4,
                "clip_eps": E4[:2],
                "reward": torch.tensor([[3.0, 3.2], [4.0, 4.1], [4.8, 4.5], [4.2, 4.3]], dtype=torch.float64),
                "tol": 0.3,
            },
        ),
        Case(
            "one clip range is much worse than the others (the mean over clip ranges misleads)",
            {
                "group_sizes": G3,
                "clip_eps": E5[:3],
                "reward": torch.tensor([[0.5, 4.0, 4.1], [1.0, 4.9, 4.8], [4.95, 4.9, 4.95]], dtype=torch.float64),
                "tol": 0.1,
            },
        ),
        Case(
            "saturated: several configurations reach the maximum 5.0 exactly (ties: the smallest group size, "
            "then the smallest clip_eps)",
            {
                "group_sizes": G4,
                "clip_eps": E4,
                "reward": torch.tensor(
                    [[4.0, 4.2, 4.1, 3.9], [4.8, 5.0, 5.0, 4.9], [5.0, 5.0, 4.7, 5.0], [5.0, 5.0, 5.0, 5.0]],
                    dtype=torch.float64,
                ),
                "tol": 0.0,
            },
        ),
        Case(
            "a single configuration",
            {
                "group_sizes": torch.tensor([8]),
                "clip_eps": torch.tensor([0.2]),
                "reward": torch.tensor([[3.5]]),
                "tol": 0.1,
            },
        ),
    ]
    mistakes = [
        Mistake(
            "you returned indices; return the group size and clip range themselves, group_sizes[i] and clip_eps[j]",
            _sweep_reader(indices=True),
        ),
        *(
            Mistake(
                "the flat index of the best entry was unravelled with the wrong row length: "
                "row = flat // len(clip_eps), column = flat % len(clip_eps) (or use divmod)",
                _sweep_reader(swap_unravel=swap),
            )
            for swap in ("modulo", "divide")
        ),
        Mistake(
            "among equal rewards take the cheapest configuration, the smallest group size (then the smallest "
            "clip_eps): torch.argmax returns the first maximal entry",
            _sweep_reader(last_tie=True),
        ),
        Mistake(
            "saturation used the mean over clip ranges; take each group size at its best clip range, reward.max(dim=1)",
            _sweep_reader(mean_over_eps=True),
        ),
        Mistake(
            "saturation stopped at the first step that gains less than tol; a noisy dip is not saturation: "
            "take the smallest group size within tol of the best reward of the table",
            _sweep_reader(plateau=True),
        ),
        Mistake(
            "saturation was measured against the largest group size; measure it against the best reward of "
            "the whole table",
            _sweep_reader(against_last=True),
        ),
        Mistake(
            "that is the best group size; saturation is the *smallest* group size within tol of the best",
            _sweep_reader(argmax_saturation=True),
        ),
    ]
    return check_against_reference(fn, read_sweep, cases, name="read_sweep", mistakes=mistakes, check_dtype=True)
