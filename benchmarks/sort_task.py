"""Benchmark: the course's default GRPO configuration on the CS336 sorting task, over 8 seeds.

The lecture's budget (Stanford CS336 2025, lecture 17): the three prompts of
``course_lib.tasks.sorting_prompts()``, 100 epochs, each sampling 10 responses per
prompt and taking 10 Adam steps on them. The configuration is ``GRPOTrainerConfig()``
with nothing changed but the seed, so the benchmark measures the course's defaults.

For every seed it trains from scratch and scores the greedy (argmax) response to each
prompt at the end; the last line printed is ``mean_greedy_reward=X``, the mean over
seeds and prompts (the maximum is 5: three tokens present, two ordered pairs).

Usage::

    python benchmarks/sort_task.py            # 8 seeds, about half a minute on one core
    python benchmarks/sort_task.py --seeds 3  # fewer seeds
"""

from __future__ import annotations

import argparse
import time

from course_lib.tasks import sorting_prompts
from course_lib.trainers.grpo_trainer import GRPOTrainer, GRPOTrainerConfig

CONFIG = GRPOTrainerConfig()
"""The configuration every seed runs: the course's defaults (a test checks they stay equal)."""
SEEDS = tuple(range(8))


def run(seeds=SEEDS, config: GRPOTrainerConfig = CONFIG) -> dict[int, list[float]]:
    """Train one policy per seed; return each seed's final greedy reward per prompt."""
    prompts = sorting_prompts()
    results = {}
    for seed in seeds:
        trainer = GRPOTrainer.for_sorting(GRPOTrainerConfig(**{**vars(config), "seed": seed}), prompts)
        history = trainer.train(prompts, progress=False)
        results[seed] = history.final_greedy_reward()
    return results


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=len(SEEDS), help="number of seeds, 0 .. n - 1")
    args = parser.parse_args(argv)
    print(f"config: {CONFIG}")
    start = time.perf_counter()
    results = run(range(args.seeds))
    for seed, rewards in results.items():
        print(f"seed {seed}: greedy reward per prompt {rewards}, mean {sum(rewards) / len(rewards):.3f}")
    all_rewards = [r for rewards in results.values() for r in rewards]
    mean = sum(all_rewards) / len(all_rewards)
    print(f"{len(results)} seeds in {time.perf_counter() - start:.1f} s")
    print(f"mean_greedy_reward={mean:.3f}")
    return mean


if __name__ == "__main__":
    main()
