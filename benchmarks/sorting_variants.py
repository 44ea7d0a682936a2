"""Regenerate ``course_lib/lectures/data/sorting_variants.json``: chapter 06's section 9, which the notebook only reads.

On the sorting task, the lecture's budget (100 rounds of 10 responses per prompt, 10 Adam steps each),
8 seeds, every trained policy scored on the training prompts and on 24 held-out prompts:

- GRPO with the course's defaults (the reference frozen at the initial policy);
- the reference refreshed from the policy every 10 rounds, and every round (then it *is* pi_old: a KL
  penalty toward the sampling policy), also with a strong penalty (``kl_coef = 0.5``);
- no reference (``kl_coef = 0``), and no reference with an entropy bonus (maximum-entropy RL);
- expert iteration: the best response of each group, fine-tuned on, same samples and steps;
- REINFORCE with the lecture's exact setup (``PGTrainerConfig.lecture()``), for the three kinds of deltas.

Usage::

    python benchmarks/sorting_variants.py          # several minutes on one core
    python benchmarks/sorting_variants.py --seeds 2 --out /tmp/variants.json

The last line printed is ``total_seconds=...``.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from _results import DATA, refuse_overwrite, results_parser, write_results  # benchmarks/_results.py

from course_lib.lectures.sorting_variants import (
    greedy_scores,
    held_out_prompts,
    kl_to_reference,
    policy_entropy,
    summarize_run,
    train_expert_iteration,
)
from course_lib.models import SortingPolicy
from course_lib.tasks import sorting_prompts
from course_lib.trainers.grpo_trainer import GRPOTrainer, GRPOTrainerConfig
from course_lib.trainers.pg_trainer import PGTrainerConfig, train_sorting_pg

OUT = DATA / "sorting_variants.json"
GRPO_VARIANTS = {
    "GRPO, reference frozen (default)": {},
    "reference refreshed every 10 rounds": {"ref_refresh_every": 10},
    "reference refreshed every round (KL to pi_old)": {"ref_refresh_every": 1},
    "kl_coef=0.5, reference frozen": {"kl_coef": 0.5},
    "kl_coef=0.5, KL to pi_old": {"kl_coef": 0.5, "ref_refresh_every": 1},
    "no reference (kl_coef=0)": {"kl_coef": 0.0},
    "no reference, entropy bonus 0.05": {"kl_coef": 0.0, "ent_coef": 0.05},
}
LECTURE_MODES = ("rewards", "centered_rewards", "normalized_rewards")


def main(argv=None) -> dict:
    parser = results_parser(__doc__, OUT)
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args(argv)
    refuse_overwrite(parser, args, OUT, args.seeds != 8, what="fewer seeds")
    torch.set_num_threads(1)
    start = time.perf_counter()
    prompts, held_out = sorting_prompts(), held_out_prompts()
    runs = {}
    for label, overrides in GRPO_VARIANTS.items():
        rows = []
        for seed in range(args.seeds):
            config = GRPOTrainerConfig(seed=seed, **overrides)
            history = GRPOTrainer.for_sorting(config, prompts).train(prompts, progress=False)
            rows.append(summarize_run(history, config, prompts, held_out))
        runs[label] = rows
    rows = []
    for seed in range(args.seeds):
        config = GRPOTrainerConfig(seed=seed)
        rows.append(summarize_run(train_expert_iteration(config, prompts), config, prompts, held_out))
    runs["expert iteration (best of each group, SFT)"] = rows
    for mode in LECTURE_MODES:
        rows = []
        for seed in range(args.seeds):
            config = PGTrainerConfig.lecture(deltas_mode=mode, seed=seed)
            history = train_sorting_pg(config, prompts)
            init = SortingPolicy(5, 10, 3, 3, generator=torch.Generator().manual_seed(seed), embedding_std=1.0)
            train, test = greedy_scores(history.model, prompts), greedy_scores(history.model, held_out)
            rows.append(
                {
                    "train_greedy": round(train["greedy_reward"], 4),
                    "train_sorted": round(train["sorted_fraction"], 4),
                    "held_out_greedy": round(test["greedy_reward"], 4),
                    "held_out_sorted": round(test["sorted_fraction"], 4),
                    "final_entropy": round(policy_entropy(history.model, prompts), 4),
                    "kl_to_initial": round(kl_to_reference(history.model, init, prompts), 4),
                    "final_mean_reward": round(float(np.mean(history.mean_reward[-10:])), 4),
                }
            )
        runs[f"REINFORCE, lecture's exact setup, {mode}"] = rows
    for label, rows in runs.items():
        means = {key: np.mean([r[key] for r in rows]) for key in rows[0]}
        print(
            f"{label:<48} train {means['train_greedy']:.2f}  held-out {means['held_out_greedy']:.2f} "
            f"(sorted {means['held_out_sorted']:.2f})  entropy {means['final_entropy']:.3f}  "
            f"KL to initial {means['kl_to_initial']:.3f}",
            flush=True,
        )
    total = time.perf_counter() - start
    return write_results(
        args.out, "sorting_variants.py", total, {"runs": runs}, seeds=args.seeds, held_out_prompts=held_out.tolist()
    )


if __name__ == "__main__":
    main()
