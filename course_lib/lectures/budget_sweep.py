"""Chapter 07's group-size sweep at a fixed sample budget: ``B * G`` responses per round, whatever ``G``.

The sweep of ``course_lib.lectures.sweep`` keeps the three prompts and the 100 rounds, so its samples grow with
the group: ``3 * G * 100``, and ``G = 16`` sees eight times the data of ``G = 2``. Here every round
draws the same number of responses, ``budget`` (48 by default): ``B = budget / G`` groups, the lecture's
three prompts each repeated ``B / 3`` times (every group is sampled independently). Same rounds, same
Adam steps, same samples; only how they are grouped changes. Each trained policy is scored on the
training prompts and on held-out ones (:func:`course_lib.lectures.sorting_variants.held_out_prompts`).
"""

from __future__ import annotations

import time

import numpy as np

from course_lib import _validate
from course_lib.lectures.sorting_variants import greedy_scores, held_out_prompts
from course_lib.tasks import sorting_prompts
from course_lib.trainers.grpo_trainer import GRPOTrainer, GRPOTrainerConfig

BUDGET_GROUP_SIZES = (2, 4, 8, 16)
BUDGET_CLIP_EPS = (0.2,)


def grouped_prompts(budget: int, group_size: int):
    """``(budget / G, T)`` prompts: the lecture's three, each repeated ``budget / (3 G)`` times."""
    _validate.require_int("group_size", group_size, minimum=1)
    prompts = sorting_prompts()  # (3, T)
    if budget % (group_size * len(prompts)):
        raise ValueError(f"budget: expected a multiple of 3 * group_size = {3 * group_size}, got {budget}")
    return prompts.repeat(budget // (group_size * len(prompts)), 1)  # (B, T)


def run_budget_sweep(
    group_sizes=BUDGET_GROUP_SIZES, clip_eps=BUDGET_CLIP_EPS, seeds=range(8), budget: int = 48, rounds: int = 100
) -> dict:
    """GRPO on the sorting task with ``budget`` responses per round for every ``(G, clip_eps)``.

    Returns:
        A JSON-ready dict: ``budget``, ``rounds``, ``seeds``, ``group_sizes``, ``clip_eps`` and ``configs``, one
        dict per configuration with means over seeds of ``train_greedy`` (final greedy reward on the training
        prompts), ``held_out_greedy``, ``final_mean_reward`` (mean sampled reward of the last 10 rounds),
        ``all_equal`` (fraction of groups with all rewards equal, last 10 rounds), ``wall_time_s``, and
        ``train_greedy_per_seed``.
    """
    held_out = held_out_prompts()
    configs = []
    for G in group_sizes:
        prompts = grouped_prompts(budget, G)
        for eps in clip_eps:
            rows = []
            for seed in seeds:
                start = time.perf_counter()
                config = GRPOTrainerConfig(group_size=G, clip_eps=eps, rounds=rounds, seed=seed)
                history = GRPOTrainer.for_sorting(config, prompts).train(prompts, progress=False)
                rows.append(
                    {
                        "train": greedy_scores(history.model, sorting_prompts())["greedy_reward"],
                        "held_out": greedy_scores(history.model, held_out)["greedy_reward"],
                        "reward": float(np.mean(history.mean_reward[-10:])),
                        "all_equal": float(np.mean(history.all_equal_fraction[-10:])),
                        "seconds": time.perf_counter() - start,
                    }
                )
            mean = {key: round(float(np.mean([r[key] for r in rows])), 4) for key in rows[0]}
            configs.append(
                {
                    "group_size": G,
                    "clip_eps": eps,
                    "groups_per_round": len(prompts),
                    "train_greedy": mean["train"],
                    "held_out_greedy": mean["held_out"],
                    "final_mean_reward": mean["reward"],
                    "all_equal": mean["all_equal"],
                    "wall_time_s": mean["seconds"],
                    "train_greedy_per_seed": [round(r["train"], 3) for r in rows],
                }
            )
    return {
        "budget": budget,
        "rounds": rounds,
        "seeds": list(seeds),
        "group_sizes": list(group_sizes),
        "clip_eps": list(clip_eps),
        "configs": configs,
    }


def load_budget_sweep() -> dict:
    """The precomputed results of ``benchmarks/sweep_07_budget.py``.

    They are stored in ``course_lib/lectures/data/sweep_07_budget.json``.
    """
    import json
    from importlib import resources

    return json.loads(resources.files("course_lib.lectures").joinpath("data", "sweep_07_budget.json").read_text())
