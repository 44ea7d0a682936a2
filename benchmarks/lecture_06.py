"""Regenerate ``course_lib/lectures/data/lecture_06.json``: notebook 06's training runs, which it only loads.

The notebook's own settings (the lecture's three prompts, seeds 0, 1, 2, one torch thread):

1. REINFORCE with each of the three kinds of deltas, ``train_sorting_pg(PGTrainerConfig(deltas_mode=mode,
   seed=seed))`` (cell ``grpo06-stall-train``);
2. GRPO with the course's defaults and five ablations, ``GRPOTrainer.for_sorting(GRPOTrainerConfig(seed=seed,
   **overrides)).train(prompts)`` (cell ``grpo06-train``; ``ABLATIONS`` below is the notebook's).

For every run: its history (the fields ``plot_sorting_curves`` draws, 4 significant digits), and what the
notebook reads from the trained model: the greedy reward (mean over the prompts), the policy's entropy (nats
per position) and the greedy answers. The file is about 80 kB.

Usage::

    python benchmarks/lecture_06.py              # 54 s of CPU (5 min with the 2 cores shared, load 15)
    python benchmarks/lecture_06.py --quick --out /tmp/l06.json   # 5 rounds, 1 seed: checks the script

The last line printed is ``total_seconds=...``.
"""

from __future__ import annotations

import os
import time

import torch
from _results import DATA, refuse_overwrite, results_parser, write_results  # benchmarks/_results.py

from course_lib.lectures.lecture_runs import history_to_json
from course_lib.models import greedy_responses
from course_lib.rewards import sort_inclusion_ordering_reward
from course_lib.tasks import sorting_prompts
from course_lib.trainers import GRPOTrainer, GRPOTrainerConfig
from course_lib.trainers.pg_trainer import PGTrainerConfig, train_sorting_pg

OUT = DATA / "lecture_06.json"
PG_MODES = ("rewards", "centered_rewards", "normalized_rewards")
# The fields plotting.plot_sorting_curves can draw (the losses and the other fractions are left out: the file
# stays small).
PG_FIELDS = ("mean_reward", "greedy_reward")
GRPO_FIELDS = ("mean_reward", "greedy_reward", "entropy", "all_equal_fraction", "kl", "clip_fraction")
ABLATIONS = {
    "GRPO (course default)": {},
    "no KL (kl_coef=0)": {"kl_coef": 0.0},
    "no KL, no clip": {"kl_coef": 0.0, "clip_eps": 1e6},
    "k1 instead of k3": {"kl_kind": "k1"},
    "lecture's init (N(0, 1) table)": {"init_scale": 1.0, "embedding_std": 1.0},
    "1 step per batch": {"steps_per_round": 1},
}


def finals(histories: list, prompts: torch.Tensor) -> dict:
    """What the notebook reads from each trained model: greedy reward, entropy, greedy answers (one per seed)."""
    out = {"greedy": [], "entropy": [], "answers": []}
    for h in histories:
        answers = greedy_responses(h.model, prompts)  # (B, T)
        with torch.no_grad():
            logp_all = torch.log_softmax(h.model(prompts), -1)  # (B, T, V)
        # Floats, even when whole: the notebook prints them as lists, 4.0 and not 4.
        out["greedy"].append(round(sort_inclusion_ordering_reward(prompts, answers).float().mean().item(), 6))
        out["entropy"].append(round(-(logp_all.exp() * logp_all).sum(-1).mean().item(), 6))
        out["answers"].append(answers.tolist())
    return out


def main(argv=None) -> dict:
    parser = results_parser(__doc__, OUT, quick="5 rounds and one seed, to check the script works")
    args = parser.parse_args(argv)
    refuse_overwrite(parser, args, OUT, args.quick)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    seeds, rounds = (range(1), 5) if args.quick else (range(3), 100)
    prompts = sorting_prompts()  # (B=3, T=3)
    start = time.perf_counter()
    pg_runs = {
        mode: [train_sorting_pg(PGTrainerConfig(deltas_mode=mode, seed=seed, rounds=rounds)) for seed in seeds]
        for mode in PG_MODES
    }
    print(f"{len(PG_MODES) * len(seeds)} REINFORCE runs in {time.perf_counter() - start:.0f} s", flush=True)
    grpo_runs = {
        label: [
            GRPOTrainer.for_sorting(GRPOTrainerConfig(seed=seed, rounds=rounds, **overrides)).train(
                prompts, progress=False
            )
            for seed in seeds
        ]
        for label, overrides in ABLATIONS.items()
    }
    total = time.perf_counter() - start
    pg_finals = {mode: finals(runs, prompts) for mode, runs in pg_runs.items()}
    grpo_finals = {label: finals(runs, prompts) for label, runs in grpo_runs.items()}
    for label, final in {**pg_finals, **grpo_finals}.items():
        print(
            f"{label:<32} final greedy per seed {[round(f, 2) for f in final['greedy']]}, "
            f"entropy {sum(final['entropy']) / len(final['entropy']):.3f}"
        )
    return write_results(
        args.out,
        "lecture_06.py",
        total,
        {
            "pg_runs": {mode: [history_to_json(h, fields=PG_FIELDS) for h in runs] for mode, runs in pg_runs.items()},
            "grpo_runs": {
                label: [history_to_json(h, fields=GRPO_FIELDS) for h in runs] for label, runs in grpo_runs.items()
            },
            "pg_finals": pg_finals,
            "grpo_finals": grpo_finals,
        },
        seeds=list(seeds),
        rounds=rounds,
        load_average=round(load, 1),
    )


if __name__ == "__main__":
    main()
