"""GRPO's sensitivity to its group size and clip range: a precomputed sweep, and how to read it.

Chapter 07 (section 4) trains GRPO (Shao et al. 2024, "DeepSeekMath", section 4.1) on the
sorting task for every pair of group size ``G`` and clip range ``clip_eps`` (Schulman et al.
2017, eq. 7), several seeds each, with every other hyperparameter at the course's default
(:func:`run_sweep`). ``benchmarks/sweep_07.py`` runs it once (about four minutes on one core)
and stores the results, with chapter 07's longer GRPO-against-PPO runs, in
``course_lib/lectures/data/sweep_07.json`` (:func:`load_sweep`); the notebook and
:func:`course_lib.plotting.widgets.sweep_widget` only read that file.

A sweep is a table ``reward[i, j]`` for ``group_sizes[i]`` and ``clip_eps[j]``
(:func:`sweep_grid`). :func:`read_sweep`, the chapter's second exercise, reads it: the best
configuration (the cheapest among equals) and the group size at which the reward saturates.
"""

from __future__ import annotations

import json
import math
from importlib import resources

import numpy as np
import torch

from course_lib import _validate
from course_lib.lectures.compare import run_sorting_grpo

# ---------------------------------------------------------------------------
# The sweep over group size and clip range (precomputed)
# ---------------------------------------------------------------------------

SWEEP_GROUP_SIZES = (2, 3, 4, 6, 8, 12, 16)
SWEEP_CLIP_EPS = (0.05, 0.1, 0.2, 0.3, 0.5)


def run_sweep(
    group_sizes=SWEEP_GROUP_SIZES,
    clip_eps=SWEEP_CLIP_EPS,
    seeds=range(6),
    rounds: int = 100,
    curve_every: int = 2,
    progress: bool = True,
) -> dict:
    """GRPO on the sorting task for every ``(group_size, clip_eps)``, averaged over seeds.

    Every other hyperparameter is the course's default (``GRPOTrainerConfig()``): the rounds
    are fixed, so a larger group also means more samples (``samples``).

    Returns:
        a JSON-ready dict: ``group_sizes``, ``clip_eps``, ``seeds``, ``rounds`` and ``configs``, a
        list of one dict per configuration with ``final_greedy_reward`` (mean over seeds and
        prompts), ``final_greedy_per_seed``, ``final_mean_reward`` (mean sampled reward of the
        last 10 rounds), ``greedy_curve`` and ``reward_curve`` (mean over seeds, every
        ``curve_every`` rounds), ``wall_time_s`` (mean per seed) and ``samples``.
    """
    from tqdm.auto import tqdm

    grid = [(G, eps) for G in group_sizes for eps in clip_eps]
    configs = []
    for G, eps in tqdm(grid, desc="sweep", disable=not progress):
        runs = [run_sorting_grpo(seed, rounds, G, eps) for seed in seeds]
        greedy = np.mean([run["greedy"] for run in runs], axis=0)  # (rounds,)
        reward = np.mean([run["reward"] for run in runs], axis=0)  # (rounds,)
        configs.append(
            {
                "group_size": G,
                "clip_eps": eps,
                "final_greedy_reward": round(float(greedy[-1]), 4),
                "final_greedy_per_seed": [round(run["final_greedy"], 4) for run in runs],
                "final_mean_reward": round(float(reward[-10:].mean()), 4),
                "greedy_curve": [round(float(v), 3) for v in greedy[curve_every - 1 :: curve_every]],
                "reward_curve": [round(float(v), 3) for v in reward[curve_every - 1 :: curve_every]],
                "wall_time_s": round(float(np.mean([run["seconds"][-1] for run in runs])), 3),
                "samples": runs[0]["samples"][-1],
            }
        )
    return {
        "group_sizes": list(group_sizes),
        "clip_eps": list(clip_eps),
        "seeds": list(seeds),
        "rounds": rounds,
        "curve_every": curve_every,
        "configs": configs,
    }


def load_sweep(path=None) -> dict:
    """The precomputed results of ``benchmarks/sweep_07.py`` (``course_lib/lectures/data/sweep_07.json`` by default)."""
    if path is None:
        text = resources.files("course_lib.lectures").joinpath("data", "sweep_07.json").read_text()
    else:
        with open(path) as file:
            text = file.read()
    return json.loads(text)


def sweep_grid(sweep: dict, metric: str = "final_greedy_reward") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A sweep as tensors: ``group_sizes (nG,)``, ``clip_eps (nE,)`` and ``table (nG, nE)`` of one metric.

    Args:
        sweep: from :func:`load_sweep` (its ``"sweep"`` entry) or :func:`run_sweep`.
        metric: a number every config holds (``"final_greedy_reward"``, ``"final_mean_reward"``, ``"wall_time_s"``).
    """
    if not isinstance(sweep, dict) or "configs" not in sweep:
        raise ValueError("sweep: expected the dict of run_sweep (with 'group_sizes', 'clip_eps', 'configs')")
    group_sizes = torch.tensor(sweep["group_sizes"], dtype=torch.long)
    clip_eps = torch.tensor(sweep["clip_eps"], dtype=torch.float64)
    table = torch.full((len(group_sizes), len(clip_eps)), math.nan, dtype=torch.float64)
    for config in sweep["configs"]:
        if metric not in config:
            raise ValueError(f"metric: expected a key of the sweep's configs, got {metric!r}")
        i, j = sweep["group_sizes"].index(config["group_size"]), sweep["clip_eps"].index(config["clip_eps"])
        table[i, j] = config[metric]
    return group_sizes, clip_eps, table


def sweep_config(sweep: dict, group_size: int, clip_eps: float) -> dict:
    """The one configuration of a sweep with this group size and clip range."""
    for config in sweep["configs"]:
        if config["group_size"] == group_size and math.isclose(config["clip_eps"], clip_eps):
            return config
    raise ValueError(
        f"group_size, clip_eps: ({group_size}, {clip_eps}) is not in the sweep; group sizes "
        f"{sweep['group_sizes']}, clip_eps {sweep['clip_eps']}"
    )


# ---------------------------------------------------------------------------
# Reading a sweep (the exercise)
# ---------------------------------------------------------------------------


def read_sweep(
    group_sizes: torch.Tensor, clip_eps: torch.Tensor, reward: torch.Tensor, tol: float = 0.1
) -> tuple[int, float, int]:
    """The best configuration of a sweep, and the group size at which the reward saturates.

    - **best**: the ``(group_size, clip_eps)`` with the highest reward; among equal rewards the
      cheapest, that is the smallest group size (fewest samples), then the smallest clip range.
    - **saturation**: the smallest group size whose best reward over the clip ranges is within
      ``tol`` of the best reward of the whole table: beyond it, larger groups buy (almost) nothing.

    Args:
        group_sizes: ``(nG,)`` strictly increasing group sizes (the rows of ``reward``).
        clip_eps: ``(nE,)`` strictly increasing clip ranges (the columns).
        reward: ``(nG, nE)`` the reward of each configuration (mean over seeds).
        tol: how far below the best a reward may be and still count as saturated, non-negative.

    Returns:
        ``(best_group_size, best_clip_eps, saturation_group_size)``: values from
        ``group_sizes`` and ``clip_eps``, not indices.
    """
    _validate.require_tensor("group_sizes", group_sizes, floating=False)
    if group_sizes.is_floating_point() or group_sizes.dtype == torch.bool:
        raise ValueError(f"group_sizes: expected an integer tensor, got dtype {group_sizes.dtype}")
    _validate.require_tensor("clip_eps", clip_eps)
    _validate.require_tensor("reward", reward)
    for name, axis in (("group_sizes", group_sizes), ("clip_eps", clip_eps)):
        if axis.dim() != 1 or axis.numel() == 0 or (axis.numel() > 1 and not bool((axis[1:] > axis[:-1]).all())):
            raise ValueError(f"{name}: expected a non-empty 1-D tensor of strictly increasing values, got {axis}")
    _validate.require_shape("reward", reward, (len(group_sizes), len(clip_eps)), like="(group_sizes, clip_eps)")
    tol = _validate.require_non_negative("tol", tol)
    # torch.argmax returns the first maximal entry; rows (group sizes) vary slowest, so that is the cheapest.
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, reward.shape[1])  # row = flat // (number of columns)
    best_per_group = reward.max(dim=1).values  # (nG,): each group size at its best clip range
    saturated = best_per_group >= reward.max() - tol  # (nG,)
    k = int(saturated.nonzero()[0, 0])  # the first (smallest) group size within tol of the best
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])
