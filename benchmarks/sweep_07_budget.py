"""Regenerate ``course_lib/lectures/data/sweep_07_budget.json``: chapter 07's group-size sweep at a fixed sample budget.

48 responses per round for every group size (``B = 48 / G`` groups; ``course_lib.lectures.budget_sweep``), 100
rounds, 8 seeds, the default clip range 0.2. The notebook only reads the file.

Usage::

    python benchmarks/sweep_07_budget.py              # a few minutes on one core
    python benchmarks/sweep_07_budget.py --quick --out /tmp/budget.json

The last line printed is ``total_seconds=...``.
"""

from __future__ import annotations

import time

import torch
from _results import DATA, refuse_overwrite, results_parser, write_results  # benchmarks/_results.py

from course_lib.lectures.budget_sweep import run_budget_sweep

OUT = DATA / "sweep_07_budget.json"


def main(argv=None) -> dict:
    parser = results_parser(__doc__, OUT, quick="2 seeds and 10 rounds, to check the script works")
    args = parser.parse_args(argv)
    refuse_overwrite(parser, args, OUT, args.quick)
    torch.set_num_threads(1)
    start = time.perf_counter()
    seeds, rounds = (range(2), 10) if args.quick else (range(8), 100)
    sweep = run_budget_sweep(seeds=seeds, rounds=rounds)
    for c in sweep["configs"]:
        print(
            f"G={c['group_size']:>2} ({c['groups_per_round']:>2} groups) clip_eps={c['clip_eps']:<4} "
            f"train greedy {c['train_greedy']:.3f}  held-out greedy {c['held_out_greedy']:.3f}  "
            f"sampled {c['final_mean_reward']:.3f}  all-equal groups {c['all_equal']:.2f}  {c['wall_time_s']:.2f} s"
        )
    total = time.perf_counter() - start
    return write_results(args.out, "sweep_07_budget.py", total, {"sweep": sweep})


if __name__ == "__main__":
    main()
