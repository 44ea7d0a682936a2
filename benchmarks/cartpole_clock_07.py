"""Regenerate ``course_lib/lectures/data/cartpole_clock_07.json``: chapter 07's long CartPole runs on one clock.

``benchmarks/sweep_07.py`` stored its CartPole runs (GRPO and PPO, 5 seeds, 150,000 environment steps) with
wall-clock seconds on a machine whose load it did not record, so the chapter could not say which algorithm reaches
a return of 400 first *in time*. This script reruns them, and GRPO with the ``token-mean`` aggregation
(``benchmarks/cartpole_controls_07.py``'s first control), on the same seeds and budget, timing every iteration
with the CPU clock of the one thread that trains (``time.thread_time``, the clock of ``benchmarks/lecture_07.py``).

Each run stores, from its whole curve (before thinning): the environment steps and the CPU seconds at which its
own training return first reached 400 (``first_400``; ``None``: never), and its total CPU seconds. The curve itself
is stored thinned as ``sweep_07.py`` thins its own, so the notebook can set the rerun beside the stored runs: each
starts on the same trajectory and may leave it later (a run follows its rounding, and the code has changed since
``sweep_07.json`` was written).

The three sets run one after the other, so on a shared machine they may run at different loads, and a busy machine
stretches CPU time too (less than the wall clock); ``meta.load_average`` is the load at the start and at the end.

Usage::

    python benchmarks/cartpole_clock_07.py         # 8 CPU-minutes of training; 30 min at load 5 to 14 on 2 cores
    python benchmarks/cartpole_clock_07.py --seeds 1 --max-steps 3000 --out /tmp/clock.json   # a smoke test

The last line printed is ``total_seconds=...``.
"""

from __future__ import annotations

import os
import time
import types

import numpy as np
import torch
from _results import DATA, refuse_overwrite, results_parser, write_results  # benchmarks/_results.py
from sweep_07 import thin  # benchmarks/sweep_07.py: the same thinning as the runs rerun here

from course_lib.lectures import cartpole as cartpole_lecture
from course_lib.lectures import compare

OUT = DATA / "cartpole_clock_07.json"
LEVEL = 400.0
RUNS = {
    "GRPO": (compare.run_cartpole_grpo, {}),
    "PPO": (compare.run_cartpole_ppo, {}),
    "GRPO, token-mean": (compare.run_cartpole_grpo, {"loss_agg": "token-mean"}),
}


def first_passage(curve: dict, level: float = LEVEL) -> dict:
    """Environment steps and CPU seconds at which the run's training return first reached ``level`` (None: never)."""
    reward = np.nan_to_num(np.asarray(curve["reward"], dtype=float), nan=-np.inf)
    reached = np.nonzero(reward >= level)[0]
    if not len(reached):
        return {"steps": None, "cpu_seconds": None}
    first = reached[0]
    return {"steps": int(curve["samples"][first]), "cpu_seconds": round(float(curve["seconds"][first]), 3)}


def main(argv=None) -> dict:
    parser = results_parser(__doc__, OUT)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--max-steps", type=int, default=150_000)
    args = parser.parse_args(argv)
    refuse_overwrite(parser, args, OUT, args.seeds != 5 or args.max_steps != 150_000, what="a shorter run")
    torch.set_num_threads(1)
    # compare and cartpole time their iterations with time.perf_counter; give them the thread's CPU clock instead
    compare.time = cartpole_lecture.time = types.SimpleNamespace(perf_counter=time.thread_time)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    runs = {}
    for label, (run, overrides) in RUNS.items():
        curves = []
        for seed in range(args.seeds):
            curve = run(seed, args.max_steps, **overrides)
            curves.append({**thin(curve), "first_400": first_passage(curve)})
        runs[label] = curves
        print(
            f"{label}: first {LEVEL:.0f} per seed {[c['first_400'] for c in curves]}, "
            f"CPU seconds per run {[c['seconds'][-1] for c in curves]}",
            flush=True,
        )
    total = time.perf_counter() - start
    load_after = os.getloadavg()[0]
    return write_results(
        args.out,
        "cartpole_clock_07.py",
        total,
        {"runs": runs},
        max_steps=args.max_steps,
        clock="time.thread_time (CPU seconds of the training thread)",
        load_average=[round(load_before, 1), round(load_after, 1)],
    )


if __name__ == "__main__":
    main()
