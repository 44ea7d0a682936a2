"""Regenerate ``course_lib/lectures/data/sweep_07.json``: chapter 07's longer runs, which the notebook only reads.

Three sets of runs, each on one torch thread:

1. the sweep: GRPO on the sorting task for every group size in
   ``sweep.SWEEP_GROUP_SIZES`` and clip range in ``sweep.SWEEP_CLIP_EPS``, 6 seeds each,
   the lecture's 100 rounds (``course_lib.lectures.sweep.run_sweep``);
2. GRPO against PPO on the sorting task, 8 seeds, 100 iterations of 10 responses per prompt;
3. GRPO against PPO on CartPole-v1, 5 seeds, 150,000 environment steps each; and two controls, GRPO with
   one of its differences from PPO removed at a time: the ``token-mean`` aggregation (every step weighs the same,
   where ``seq-mean-token-mean`` weighs a step by one over its episode's length), and 16 Adam steps per batch
   (PPO's 4 epochs of 4 minibatches) instead of 4.

Every curve is stored thinned to at most 60 points; the file stays under 100 kB. Before thinning, each CartPole run
records its own first passage: the environment steps and seconds at which that seed's training return first
reached 400 (``first_400``).

The sorting and CartPole ``seconds`` are CPU seconds of the one thread that trains (``time.thread_time``), the clock
of ``benchmarks/lecture_07.py``; the sweep's ``wall_time_s`` are wall-clock seconds (``time.perf_counter``).

Usage::

    python benchmarks/sweep_07.py                # about 6 minutes on one core
    python benchmarks/sweep_07.py --quick --out /tmp/s07.json   # one seed, very short runs: a smoke test
    python benchmarks/sweep_07.py --parts sorting cartpole      # rerun those, keep the file's sweep

The last line printed is ``total_seconds=...``.
"""

from __future__ import annotations

import json
import time
import types

import numpy as np
import torch
from _results import DATA, refuse_overwrite, results_parser, write_results  # benchmarks/_results.py

from course_lib.lectures import cartpole as cartpole_lecture
from course_lib.lectures import compare
from course_lib.lectures.sweep import run_sweep

OUT = DATA / "sweep_07.json"
PARTS = ("sweep", "sorting", "cartpole")
CLOCK = "time.thread_time (CPU seconds of the training thread)"
CARTPOLE_CONTROLS = {
    "GRPO, token-mean": {"loss_agg": "token-mean"},
    "GRPO, 16 Adam steps per batch": {"steps_per_batch": 16},
}


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


def first_passage(curve: dict, level: float = 400.0) -> dict:
    """The environment steps and seconds at which this run's training return first reached ``level`` (None: never)."""
    reward = np.nan_to_num(np.asarray(curve["reward"], dtype=float), nan=-np.inf)
    reached = np.nonzero(reward >= level)[0]
    if not len(reached):
        return {"samples": None, "seconds": None}
    return {"samples": int(curve["samples"][reached[0]]), "seconds": round(float(curve["seconds"][reached[0]]), 3)}


def cartpole_run(run, seed: int, max_steps: int, **overrides) -> dict:
    curve = run(seed, max_steps, **overrides)
    return {**thin(curve), "first_400": first_passage(curve)}


def main(argv=None) -> dict:
    parser = results_parser(__doc__, OUT, quick="one seed and very short runs, to check the script works")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="rerun these, keep the rest")
    args = parser.parse_args(argv)
    refuse_overwrite(parser, args, OUT, args.quick)
    torch.set_num_threads(1)
    # compare and cartpole time their iterations with time.perf_counter; give them the thread's CPU clock, as
    # benchmarks/lecture_07.py does (the sweep keeps its wall clock: run_sweep times with its own).
    compare.time = cartpole_lecture.time = types.SimpleNamespace(perf_counter=time.thread_time)
    start = time.perf_counter()
    previous = json.loads(args.out.read_text()) if set(args.parts) != set(PARTS) else {}
    results = {part: previous[part] for part in PARTS if part not in args.parts}
    if "sweep" in args.parts:
        results["sweep"] = sweep_part(args.quick, start)
    if "sorting" in args.parts:
        results["sorting"] = sorting_part(args.quick)
    if "cartpole" in args.parts:
        results["cartpole"] = cartpole_part(args.quick)
    total = time.perf_counter() - start
    return write_results(args.out, "sweep_07.py", total, {part: results[part] for part in PARTS}, parts=args.parts)


def sweep_part(quick: bool, start: float) -> dict:
    seeds, rounds = (range(1), 3) if quick else (range(6), 100)
    sweep = run_sweep(seeds=seeds, rounds=rounds, progress=False)
    print(f"sweep: {len(sweep['configs'])} configurations x {len(seeds)} seeds in {time.perf_counter() - start:.0f} s")
    for config in sweep["configs"]:
        print(
            f"  G={config['group_size']:>2} clip_eps={config['clip_eps']:<4} final greedy "
            f"{config['final_greedy_reward']:.3f}  mean sampled {config['final_mean_reward']:.3f}  "
            f"{config['wall_time_s']:.2f} s per run",
            flush=True,
        )
    return {**sweep, "clock": CLOCK}


def sorting_part(quick: bool) -> dict:
    seeds, iterations = (range(1), 3) if quick else (range(8), 100)
    runs = {
        "GRPO": [thin(compare.run_sorting_grpo(seed, iterations)) for seed in seeds],
        "PPO": [thin(compare.run_sorting_ppo(seed, iterations)) for seed in seeds],
    }
    for label, curves in runs.items():
        print(
            f"sorting {label}: final greedy per seed {[curve['final_greedy'] for curve in curves]}, "
            f"CPU seconds per run {[curve['seconds'][-1] for curve in curves]}",
            flush=True,
        )
    return {"iterations": iterations, "group_size": 10, "clock": CLOCK, "runs": runs}


def cartpole_part(quick: bool) -> dict:
    seeds, max_steps = (range(1), 1_000) if quick else (range(5), 150_000)
    runs = {
        "GRPO": [cartpole_run(compare.run_cartpole_grpo, seed, max_steps) for seed in seeds],
        "PPO": [cartpole_run(compare.run_cartpole_ppo, seed, max_steps) for seed in seeds],
    }
    controls = {
        label: [cartpole_run(compare.run_cartpole_grpo, seed, max_steps, **overrides) for seed in seeds]
        for label, overrides in CARTPOLE_CONTROLS.items()
    }
    for label, curves in {**runs, **controls}.items():
        print(
            f"cartpole {label}: final evaluation per seed {[curve['final_eval'] for curve in curves]}, "
            f"first return of 400 at steps {[curve['first_400']['samples'] for curve in curves]}, "
            f"CPU seconds per run {[curve['seconds'][-1] for curve in curves]}",
            flush=True,
        )
    return {
        "max_steps": max_steps,
        "group_size": 8,
        "num_groups": 4,
        "clock": CLOCK,
        "runs": runs,
        "controls": controls,
    }


if __name__ == "__main__":
    main()
