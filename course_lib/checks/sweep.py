"""Exercise check of chapter 07: reading a sweep.

The checks import the reference implementations of ``course_lib.lectures.sweep``; the maths module never
imports its checks, so the file a student opens is the maths alone.
"""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference
from course_lib.checks.compare import Unfit
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
    within="absolute",
    largest_within=False,
    best_column_apart=False,
    tol_used=None,
    saturation_column=False,
    columns_first=False,
    walk_back=False,
    per_column=False,
    own_best=False,
):
    """A wrong read_sweep: the reference with one classic slip switched on (``within``: ``"relative"``, a reward
    within ``tol`` times the best, or ``"strict"``, strictly above best - tol)."""

    def wrong(group_sizes, clip_eps, reward, tol=0.1):
        tol = tol if tol_used is None else tol_used
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
        if columns_first:  # argmax of the transposed table: among ties, the smallest clip range first
            j, i = divmod(int(torch.argmax(reward.T)), n_rows)
        if best_column_apart:  # the best row, then the best column of the whole table, each on its own
            i, j = int(torch.argmax(reward.max(dim=1).values)), int(torch.argmax(reward.max(dim=0).values))
        per_group = reward.mean(dim=1) if mean_over_eps else reward.max(dim=1).values
        if per_column:  # each clip range's best over the group sizes: an index of clip ranges, read as a group size
            per_group = reward.max(dim=0).values
        if saturation_column:  # each group size at the best configuration's clip range only
            per_group = reward[:, j]
        if argmax_saturation:
            k = int(torch.argmax(per_group))
        elif walk_back:  # from the largest group size down, while the next smaller one stays within tol
            k = n_rows - 1
            while k > 0 and per_group[k - 1] >= reward.max() - tol:
                k -= 1
        elif plateau:  # stops at the first step that gains less than tol: a noisy dip ends it early
            gains = per_group[1:] - per_group[:-1]
            # "at most": a step that gains exactly tol stalls too (so that tol = 0 stops at the first flat step)
            stalled = gains <= tol if plateau == "at most" else gains < tol
            flat_steps = stalled.nonzero()
            k = int(flat_steps[0, 0]) if len(flat_steps) else n_rows - 1
        else:
            target = per_group[-1] if against_last else (per_group.max() if own_best else reward.max())
            if within == "relative":
                close = per_group >= target * (1 - tol)
            elif within == "strict":
                close = per_group > target - tol
            else:
                close = per_group >= target - tol
            found = close.nonzero()
            k = int(found[-1 if largest_within else 0, 0]) if len(found) else n_rows - 1
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
            "a dip: the smallest group size is within tol of the best, the next one is not (tol=0.1)",
            {
                "group_sizes": G4,
                "clip_eps": torch.tensor([0.2], dtype=torch.float64),
                "reward": torch.tensor([[0.95], [0.7], [0.99], [1.0]], dtype=torch.float64),
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
            "a loose tolerance, tol=0.5: the reward at group size 4 is within it",
            {
                "group_sizes": G3,
                "clip_eps": E4[:2],
                "reward": torch.tensor([[3.0, 3.2], [3.7, 3.6], [4.0, 3.9]], dtype=torch.float64),
                "tol": 0.5,
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
        *(
            Mistake(
                f"saturation stopped at the first step that gains {words} tol; a noisy dip is not saturation: "
                "take the smallest group size within tol of the best reward of the table",
                _sweep_reader(plateau=stall),
            )
            for stall, words in ((True, "less than"), ("at most", "at most"))
        ),
        Mistake(
            "saturation was judged on each group size's mean over the clip ranges, against the best of those means; "
            "it is each group size's best over the clip ranges (reward.max(dim=1)), within tol of the table's best",
            _sweep_reader(mean_over_eps=True, own_best=True),
        ),
        Mistake(
            "saturation read each clip range's best over the group sizes (max over dim 0); it reads each group "
            "size's best over the clip ranges, reward.max(dim=1), and returns the smallest group size within tol",
            _sweep_reader(per_column=True),
        ),
        Mistake(
            "you walked back from the largest group size while the next smaller one stayed within tol, so a dip "
            "stops the walk; saturation is the smallest group size within tol of the best, wherever it lies",
            _sweep_reader(walk_back=True),
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
        Mistake(
            "tol is read as relative (within tol * best of the best); it is absolute: a reward counts as saturated "
            "when it is at least best - tol",
            _sweep_reader(within="relative"),
        ),
        Mistake(
            "saturation asks for a reward strictly above best - tol; one exactly at best - tol counts too "
            "(>=, so that tol = 0 finds the best itself)",
            _sweep_reader(within="strict"),
        ),
        Mistake(
            "that is the *largest* group size within tol of the best; saturation is the smallest one",
            _sweep_reader(largest_within=True),
        ),
        Mistake(
            "the best clip range was taken over the whole table (reward.max(dim=0)), apart from the best group "
            "size; both come from one entry, the best configuration: divmod(argmax(reward), len(clip_eps))",
            _sweep_reader(best_column_apart=True),
        ),
        Mistake(
            "among equal rewards you took the smallest clip range first (the argmax of reward.T); the cheapest "
            "configuration is the smallest group size first, then the smallest clip range: torch.argmax(reward)",
            _sweep_reader(columns_first=True),
        ),
        Mistake(
            "tol is ignored (0.1 is used whatever is passed): compare with best - tol for the tol given",
            _sweep_reader(tol_used=0.1),
        ),
        Mistake(
            "saturation reads only the best configuration's clip range (one column); take each group size at its "
            "own best clip range, reward.max(dim=1)",
            _sweep_reader(saturation_column=True),
        ),
    ]
    return check_against_reference(
        fn, read_sweep, cases, name="read_sweep", mistakes=mistakes, outputs=_sweep_outputs, check_dtype=True
    )


def _sweep_outputs(result):
    """The three values; the two group sizes must be ints (values of group_sizes, an integer tensor)."""
    if not (isinstance(result, tuple) and len(result) == 3):
        raise Unfit("it should return a tuple of 3 (best_group_size, best_clip_eps, saturation_group_size)")
    for index in (0, 2):
        if isinstance(result[index], float):
            raise Unfit(f"output[{index}] is a float ({result[index]!r}); a group size is an int: int(group_sizes[i])")
    return {f"output[{i}]": value for i, value in enumerate(result)}
