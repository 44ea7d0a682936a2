"""Benchmark: the sorting task of Stanford CS336 (2025) lecture 17, the lecture's exact setup beside the course's.

Every run keeps the lecture's budget: the three prompts of ``course_lib.tasks.sorting_prompts()``,
100 rounds, each sampling 10 responses per prompt and taking 10 Adam steps on them. Four setups:

- **the lecture's exact setup** (``PGTrainerConfig.lecture()``): REINFORCE with its Adam learning rate 1e-3 and
  its ``nn.Embedding`` table drawn from N(0, 1), with each of its three kinds of deltas;
- **the course's REINFORCE** (``PGTrainerConfig()``): learning rate 1e-2 and the scaled N(0, 1/D) table;
- **the course's GRPO** (``GRPOTrainerConfig()``, the configuration this benchmark is named for).

Every trained policy is scored by its greedy (argmax) answer, on the three training prompts and on 24
held-out prompts it never saw (``course_lib.lectures.sorting_variants.held_out_prompts``: distinct integers, as
``random_sorting_prompts`` draws them). The reward is at most 5 (three tokens present, two ordered pairs).
A policy that sorts the training prompts but not the held-out ones has memorised three answers.

The last line printed is ``mean_greedy_reward=X``: GRPO's mean over seeds and training prompts.

Usage::

    python benchmarks/sort_task.py            # 8 seeds, about a minute on one core
    python benchmarks/sort_task.py --seeds 3  # fewer seeds
"""

from __future__ import annotations

import argparse
import time

import torch

from course_lib.lectures.sorting_variants import greedy_scores, held_out_prompts
from course_lib.tasks import sorting_prompts
from course_lib.trainers.grpo_trainer import GRPOTrainer, GRPOTrainerConfig
from course_lib.trainers.pg_trainer import PGTrainerConfig, train_sorting_pg

CONFIG = GRPOTrainerConfig()
"""The configuration every GRPO seed runs: the course's defaults (a test checks they stay equal)."""
SEEDS = tuple(range(8))
BASELINES = {
    "lecture: REINFORCE, rewards": PGTrainerConfig.lecture(deltas_mode="rewards"),
    "lecture: REINFORCE, centered": PGTrainerConfig.lecture(deltas_mode="centered_rewards"),
    "lecture: REINFORCE, normalized": PGTrainerConfig.lecture(deltas_mode="normalized_rewards"),
    "course: REINFORCE, rewards": PGTrainerConfig(),
}
"""The REINFORCE setups printed beside GRPO: the lecture's exact optimiser and init, then the course's."""


def run(seeds=SEEDS, config: GRPOTrainerConfig = CONFIG) -> dict[int, list[float]]:
    """Train one GRPO policy per seed; return each seed's final greedy reward per training prompt."""
    prompts = sorting_prompts()
    results = {}
    for seed in seeds:
        trainer = GRPOTrainer.for_sorting(GRPOTrainerConfig(**{**vars(config), "seed": seed}), prompts)
        history = trainer.train(prompts, progress=False)
        results[seed] = history.final_greedy_reward()
    return results


def run_all(seeds=SEEDS) -> dict[str, dict[str, float]]:
    """Every setup, every seed: mean greedy reward and sorted fraction on the training and held-out prompts."""
    prompts, held_out = sorting_prompts(), held_out_prompts()
    models = {
        label: [train_sorting_pg(PGTrainerConfig(**{**vars(cfg), "seed": seed})).model for seed in seeds]
        for label, cfg in BASELINES.items()
    }
    models["course: GRPO (default)"] = [
        GRPOTrainer.for_sorting(GRPOTrainerConfig(**{**vars(CONFIG), "seed": seed}), prompts)
        .train(prompts, progress=False)
        .model
        for seed in seeds
    ]
    table = {}
    for label, trained in models.items():
        scores = [(greedy_scores(m, prompts), greedy_scores(m, held_out)) for m in trained]
        table[label] = {
            "train_greedy": sum(s[0]["greedy_reward"] for s in scores) / len(scores),
            "train_sorted": sum(s[0]["sorted_fraction"] for s in scores) / len(scores),
            "held_out_greedy": sum(s[1]["greedy_reward"] for s in scores) / len(scores),
            "held_out_sorted": sum(s[1]["sorted_fraction"] for s in scores) / len(scores),
        }
    return table


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=len(SEEDS), help="number of seeds, 0 .. n - 1")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    start = time.perf_counter()
    print(
        f"budget: 100 rounds x 10 responses per prompt x 10 Adam steps, {args.seeds} seeds; "
        f"held-out: {len(held_out_prompts())} prompts the policies never saw"
    )
    for label, cfg in BASELINES.items():
        print(
            f"  {label:<32} lr={cfg.lr:g}  embedding_std={'1/sqrt(D)' if cfg.embedding_std is None else cfg.embedding_std}"
        )
    print(
        f"  {'course: GRPO (default)':<32} lr={CONFIG.lr:g}  embedding_std=1/sqrt(D), init_scale={CONFIG.init_scale}\n"
    )
    table = run_all(range(args.seeds))
    print(f"{'setup':<34}{'train: greedy':>14}{'sorted':>8}{'held-out: greedy':>18}{'sorted':>8}")
    for label, row in table.items():
        print(
            f"{label:<34}{row['train_greedy']:>14.2f}{row['train_sorted']:>8.2f}"
            f"{row['held_out_greedy']:>18.2f}{row['held_out_sorted']:>8.2f}"
        )
    print("(greedy: mean greedy reward, at most 5; sorted: fraction of prompts answered exactly sorted)\n")
    results = run(range(args.seeds))
    for seed, rewards in results.items():
        print(f"GRPO seed {seed}: greedy reward per training prompt {rewards}, mean {sum(rewards) / len(rewards):.3f}")
    all_rewards = [r for rewards in results.values() for r in rewards]
    mean = sum(all_rewards) / len(all_rewards)
    print(f"{time.perf_counter() - start:.1f} s in all")
    print(f"mean_greedy_reward={mean:.3f}")
    return mean


if __name__ == "__main__":
    main()
