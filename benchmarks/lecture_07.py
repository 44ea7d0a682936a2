"""Regenerate ``course_lib/lectures/data/lecture_07.json``: notebook 07's short GRPO-against-PPO runs.

The notebook's own settings (one torch thread):

1. the sorting task, GRPO and PPO, seeds 0, 1, 2, 60 iterations of 30 responses
   (``compare.run_sorting_grpo`` / ``run_sorting_ppo``, cell ``cmp07-budget-run``);
2. CartPole-v1, GRPO and PPO, seeds 0 and 1, 25,000 environment steps
   (``compare.run_cartpole_grpo`` / ``run_cartpole_ppo``, cell ``cmp07-cartpole-run``).

The curves are stored whole (6 significant digits); the file is about 15 kB. Their ``seconds`` are CPU
seconds of the one thread that trains (``time.thread_time``), not wall-clock seconds: on a quiet machine the
two agree, and a busy one stretches the CPU time far less than the wall clock (at load 15 on 2 cores, about
twice the quiet machine's wall clock, against five to ten times for the wall clock). The longer
runs of the chapter (more seeds, more steps, the sweep) are ``benchmarks/sweep_07.py``'s.

Usage::

    python benchmarks/lecture_07.py              # 28 s of CPU (4 min with the 2 cores shared, load 15)
    python benchmarks/lecture_07.py --quick --out /tmp/l07.json   # 5 iterations, 2,000 steps: checks the script

The last line printed is ``total_seconds=...``.
"""

from __future__ import annotations

import os
import time
import types

import torch
from _results import DATA, refuse_overwrite, results_parser, write_results  # benchmarks/_results.py

from course_lib.lectures import cartpole as cartpole_lecture
from course_lib.lectures import compare
from course_lib.lectures.lecture_runs import rounded

OUT = DATA / "lecture_07.json"


def stored(curve: dict) -> dict:
    return {key: rounded(value, 6) for key, value in curve.items()}


def main(argv=None) -> dict:
    parser = results_parser(__doc__, OUT, quick="5 iterations and 2,000 steps, to check the script works")
    args = parser.parse_args(argv)
    refuse_overwrite(parser, args, OUT, args.quick)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    # compare and cartpole time their iterations with time.perf_counter; give them the thread's CPU clock instead
    # (see above).
    compare.time = cartpole_lecture.time = types.SimpleNamespace(perf_counter=time.thread_time)
    load = os.getloadavg()[0]
    seeds, iterations = (range(1), 5) if args.quick else (range(3), 60)
    cartpole_seeds, max_steps = (range(1), 2_000) if args.quick else (range(2), 25_000)
    start = time.perf_counter()
    sorting = {
        "GRPO": [stored(compare.run_sorting_grpo(seed, rounds=iterations)) for seed in seeds],
        "PPO": [stored(compare.run_sorting_ppo(seed, updates=iterations)) for seed in seeds],
    }
    print(f"sorting: {2 * len(seeds)} runs in {time.perf_counter() - start:.0f} s", flush=True)
    cartpole = {
        "GRPO": [stored(compare.run_cartpole_grpo(seed, max_steps=max_steps)) for seed in cartpole_seeds],
        "PPO": [stored(compare.run_cartpole_ppo(seed, max_steps=max_steps)) for seed in cartpole_seeds],
    }
    total = time.perf_counter() - start
    for name, runs in (("sorting", sorting), ("cartpole", cartpole)):
        for label, curves in runs.items():
            print(
                f"{name} {label}: final reward per seed {[c['reward'][-1] for c in curves]}, "
                f"CPU seconds per run {[c['seconds'][-1] for c in curves]}"
            )
    return write_results(
        args.out,
        "lecture_07.py",
        total,
        {
            "sorting": {"iterations": iterations, "group_size": 10, "runs": sorting},
            "cartpole": {"max_steps": max_steps, "group_size": 8, "num_groups": 4, "runs": cartpole},
        },
        clock="time.thread_time (CPU seconds of the training thread)",
        load_average=round(load, 1),
    )


if __name__ == "__main__":
    main()
