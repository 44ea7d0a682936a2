"""Regenerate ``course_lib/lectures/data/cartpole_controls_07.json``: two controls of chapter 07's CartPole comparison.

GRPO on CartPole differs from PPO in more than its outcome reward. This script removes two of those differences, one
at a time, on the seeds and budget of ``benchmarks/sweep_07.py``'s CartPole runs (5 seeds, 150,000 environment
steps, ``compare.run_cartpole_grpo`` otherwise unchanged):

- ``token-mean`` aggregation: every step of every episode weighs the same, where GRPO's default
  ``seq-mean-token-mean`` weighs a step by one over its episode's length;
- 16 Adam steps per batch instead of 4 (PPO takes 4 epochs of 4 minibatches).

The third difference, GRPO's hand-set learning rate, is left open. Curves are stored thinned exactly as
``sweep_07.py`` thins its own, so the notebook reads first passages the same way for both files. Only environment
steps are compared: the seconds are wall clock and are not stored.

Usage::

    python benchmarks/cartpole_controls_07.py            # 18 minutes at load 12 to 15 on 2 cores
    python benchmarks/cartpole_controls_07.py --seeds 1 --max-steps 2000 --out /tmp/controls.json

The last line printed is ``total_seconds=...``.
"""

from __future__ import annotations

import time

import torch
from _results import DATA, refuse_overwrite, results_parser, write_results  # benchmarks/_results.py
from sweep_07 import thin  # benchmarks/sweep_07.py: the same thinning as the runs these control

from course_lib.lectures import compare

OUT = DATA / "cartpole_controls_07.json"
CONTROLS = {
    "GRPO, token-mean": {"loss_agg": "token-mean"},
    "GRPO, 16 Adam steps per batch": {"steps_per_batch": 16},
}


def main(argv=None) -> dict:
    parser = results_parser(__doc__, OUT)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--max-steps", type=int, default=150_000)
    args = parser.parse_args(argv)
    refuse_overwrite(parser, args, OUT, args.seeds != 5 or args.max_steps != 150_000, what="a shorter run")
    torch.set_num_threads(1)
    start = time.perf_counter()
    runs = {}
    for label, overrides in CONTROLS.items():
        curves = []
        for seed in range(args.seeds):
            curve = thin(compare.run_cartpole_grpo(seed, args.max_steps, **overrides))
            curve.pop("seconds")  # wall clock on a shared machine: not a measurement worth keeping
            curves.append(curve)
        runs[label] = curves
        print(f"{label}: final evaluation per seed {[c['final_eval'] for c in curves]}", flush=True)
    total = time.perf_counter() - start
    return write_results(args.out, "cartpole_controls_07.py", total, {"runs": runs}, max_steps=args.max_steps)


if __name__ == "__main__":
    main()
