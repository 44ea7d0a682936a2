"""Regenerate ``course_lib/lectures/data/sweep_07.json``: chapter 07's longer runs, which the notebook only reads.

Three sets of runs, each on one torch thread:

1. the sweep: GRPO on the sorting task for every group size in
   ``sweep.SWEEP_GROUP_SIZES`` and clip range in ``sweep.SWEEP_CLIP_EPS``, 6 seeds each,
   the lecture's 100 rounds (``course_lib.lectures.sweep.run_sweep``);
2. GRPO against PPO on the sorting task, 8 seeds, 100 iterations of 10 responses per prompt;
3. GRPO against PPO on CartPole-v1, 5 seeds, 150,000 environment steps each.

Every curve is stored thinned to at most 60 points; the file stays under 100 kB.

Usage::

    python benchmarks/sweep_07.py                # about 6 minutes on one core
    python benchmarks/sweep_07.py --quick --out /tmp/s07.json   # one seed, very short runs: a smoke test
    python benchmarks/sweep_07.py --out /tmp/sweep.json

The last line printed is ``total_seconds=...``.
"""

from __future__ import annotations

import time

import torch
from _results import DATA, refuse_overwrite, results_parser, write_results  # benchmarks/_results.py

from course_lib.lectures import compare
from course_lib.lectures.sweep import run_sweep

OUT = DATA / "sweep_07.json"


def thin(curve: dict, max_points: int = 60) -> dict:
    """Keep at most ``max_points`` entries of every list of a curve (always the last), rounded to 3 decimals."""
    n = len(curve["samples"])
    step = max(1, -(-n // max_points))
    keep = sorted(set(range(step - 1, n, step)) | {n - 1})
    out = {}
    for key, value in curve.items():
        if isinstance(value, list):
            out[key] = [None if v != v else round(float(v), 3) for v in (value[i] for i in keep)]
        else:
            out[key] = round(float(value), 3)
    return out


def main(argv=None) -> dict:
    parser = results_parser(__doc__, OUT, quick="one seed and very short runs, to check the script works")
    args = parser.parse_args(argv)
    refuse_overwrite(parser, args, OUT, args.quick)
    torch.set_num_threads(1)
    start = time.perf_counter()

    sweep_seeds, rounds = (range(1), 3) if args.quick else (range(6), 100)
    sweep = run_sweep(seeds=sweep_seeds, rounds=rounds, progress=False)
    print(
        f"sweep: {len(sweep['configs'])} configurations x {len(sweep_seeds)} seeds "
        f"in {time.perf_counter() - start:.0f} s",
        flush=True,
    )
    for config in sweep["configs"]:
        print(
            f"  G={config['group_size']:>2} clip_eps={config['clip_eps']:<4} final greedy "
            f"{config['final_greedy_reward']:.3f}  mean sampled {config['final_mean_reward']:.3f}  "
            f"{config['wall_time_s']:.2f} s per run"
        )

    seeds, iterations = (range(1), 3) if args.quick else (range(8), 100)
    sorting = {
        "GRPO": [thin(compare.run_sorting_grpo(seed, iterations)) for seed in seeds],
        "PPO": [thin(compare.run_sorting_ppo(seed, iterations)) for seed in seeds],
    }
    for label, runs in sorting.items():
        print(
            f"sorting {label}: final greedy per seed {[run['final_greedy'] for run in runs]}, "
            f"seconds per run {[run['seconds'][-1] for run in runs]}",
            flush=True,
        )

    seeds, max_steps = (range(1), 1_000) if args.quick else (range(5), 150_000)
    cartpole = {
        "GRPO": [thin(compare.run_cartpole_grpo(seed, max_steps)) for seed in seeds],
        "PPO": [thin(compare.run_cartpole_ppo(seed, max_steps)) for seed in seeds],
    }
    for label, runs in cartpole.items():
        print(
            f"cartpole {label}: final evaluation per seed {[run['final_eval'] for run in runs]}, "
            f"seconds per run {[run['seconds'][-1] for run in runs]}",
            flush=True,
        )

    total = time.perf_counter() - start
    return write_results(
        args.out,
        "sweep_07.py",
        total,
        {
            "sweep": sweep,
            "sorting": {"iterations": iterations, "group_size": 10, "runs": sorting},
            "cartpole": {"max_steps": max_steps, "group_size": 8, "num_groups": 4, "runs": cartpole},
        },
    )


if __name__ == "__main__":
    main()
