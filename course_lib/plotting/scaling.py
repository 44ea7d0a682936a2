"""Plots of Chapter 09: the same GRPO run under the course's loop and TRL, from the shipped results.

:func:`plot_three_runs` draws held-out accuracy against rounds, one panel per seed; :func:`plot_trl_metrics`
draws what TRL logs per optimiser step; :func:`plot_step_rewards` draws one run's mean reward per step,
with the maximum and, for TRL, each reward function on its own.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

RUN_LABELS = {
    "course_tiny": "course loop, TinyLM",
    "course_hf": "course loop, transformers export",
    "trl": "TRL GRPOTrainer, transformers export",
}
RUN_COLORS = {"course_tiny": "tab:gray", "course_hf": "tab:blue", "trl": "tab:orange"}


def plot_three_runs(
    results: dict, title: str = "Held-out greedy exact match, three GRPO runs from one warm-up"
) -> Figure:
    """One panel per seed: the held-out accuracy of each run against rounds (``benchmarks/hf_learning.py``'s file).

    Args:
        results: the results file's dict, with ``seeds: {seed: {run: {"eval": {"iteration", "score"}}}}``.
    """
    seeds = results.get("seeds") if isinstance(results, dict) else None
    if not seeds:
        raise ValueError("results: expected the dict of benchmarks/hf_learning.py, with a non-empty 'seeds'")
    fig, axes = plt.subplots(1, len(seeds), figsize=(4.4 * len(seeds), 3.4), squeeze=False, sharey=True)
    for ax, (seed, runs) in zip(axes[0], seeds.items()):
        for run, label in RUN_LABELS.items():
            ev = runs[run]["eval"]
            ax.plot(
                ev["iteration"],
                ev["score"],
                marker="o",
                markersize=3,
                color=RUN_COLORS[run],
                linewidth=1.6,
                label=f"{label}: {ev['score'][-1]:.2f}",
            )
        ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8)
        ax.set_title(f"seed {seed} (one run each)", fontsize="medium")
        ax.set_xlabel("round (64 prompts x 8 completions, 4 updates)")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", frameon=False, loc="lower right")
    axes[0][0].set_ylabel("greedy exact match, 500 test prompts")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


TRL_PANELS = (
    (("rewards/digits/mean", "rewards/exact/mean", "reward"), "rewards/<name>/mean: each reward function"),
    (("frac_reward_zero_std",), "frac_reward_zero_std: groups that teach nothing"),
    (("completions/clipped_ratio", "clip_ratio/region_mean"), "cut-off completions; clipped tokens"),
    (("entropy", "kl"), "entropy and KL to the reference (nats/token, log scale)"),
)


def plot_trl_metrics(log: dict, num_iterations: int, title: str = "What TRL logs, one run") -> Figure:
    """Four panels of TRL's log (``{key: one value per optimiser step}``), one point per round.

    TRL logs every optimiser step; the reward columns only on a round's first step (the completions
    are generated once and reused ``num_iterations`` times). The other columns are averaged over a
    round's steps (the KL: its median).
    """
    if not isinstance(log, dict) or "reward" not in log:
        raise ValueError("log: expected TRL's logged columns, with at least 'reward'")
    fig, axes = plt.subplots(1, len(TRL_PANELS), figsize=(4.2 * len(TRL_PANELS), 3.3))
    for ax, (keys, panel_title) in zip(axes, TRL_PANELS):
        for key in keys:
            if key not in log:
                continue
            values, label = log[key], key
            if any(v != v for v in values):  # a round's column (rewards): logged on its first step, NaN elsewhere
                points = [(i // num_iterations, v) for i, v in enumerate(values) if v == v]
            else:  # logged every step: one point per round, the mean of its steps (the median for the KL,
                # whose k3 estimate explodes now and then on the round's later, off-policy steps)
                points = []
                for r in range(len(values) // num_iterations):
                    chunk = sorted(values[r * num_iterations : (r + 1) * num_iterations])
                    points.append((r, chunk[len(chunk) // 2] if key == "kl" else sum(chunk) / len(chunk)))
                label = f"{key} ({'median' if key == 'kl' else 'mean'} of the round's steps)"
            ax.plot([x for x, _ in points], [y for _, y in points], linewidth=1.2, label=label)
        if "kl" in keys:  # the first round's KL is orders of magnitude above the rest (see the notebook)
            ax.set_yscale("log")
        if keys[0].startswith("rewards/"):
            ax.axhline(2.0, color="black", linestyle="--", linewidth=0.8, label="maximum (1 + 1)")
        ax.set_title(panel_title, fontsize="small")
        ax.set_xlabel(f"round ({num_iterations} optimiser steps, TRL logs each)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", frameon=False, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_step_rewards(
    course_rewards,
    trl_log_rows: list[dict],
    num_iterations: int,
    max_reward: float,
    title: str = "One run each: the mean reward of each step's completions",
) -> Figure:
    """The course loop's mean reward per step beside TRL's, and TRL's reward functions one by one.

    Args:
        course_rewards: the course loop's ``mean_reward``, one per step (one generated batch and its updates).
        trl_log_rows: ``trainer.state.log_history``'s rows with a ``reward``; one per optimiser step.
        num_iterations: TRL's optimiser steps per generated batch (only the first of each carries new rewards).
        max_reward: the most a completion can earn (the sum of the weights), drawn dashed.
    """
    rounds = {}
    for row in trl_log_rows:  # the first logged row of each generated batch carries its rewards
        if "reward" in row and "step" in row:
            rounds.setdefault((row["step"] - 1) // num_iterations, row)
    rows = [rounds[k] for k in sorted(rounds)]
    if not rows or not len(course_rewards):
        raise ValueError("course_rewards, trl_log_rows: expected at least one step each")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), sharey=True)
    axes[0].plot(range(1, len(course_rewards) + 1), course_rewards, marker="o", label="course loop")
    axes[0].plot(range(1, len(rows) + 1), [r["reward"] for r in rows], marker="o", label="TRL GRPOTrainer")
    axes[0].set_title("weighted sum of the rewards", fontsize="medium")
    for key in sorted(k for k in rows[0] if k.startswith("rewards/") and k.endswith("/mean")):
        axes[1].plot(range(1, len(rows) + 1), [r[key] for r in rows], marker="o", label=key)
    axes[1].set_title("TRL, each reward function (unweighted)", fontsize="medium")
    for ax, top in zip(axes, (max_reward, 1.0)):  # each reward function pays at most 1 before its weight
        ax.axhline(top, color="black", linestyle="--", linewidth=0.8, label=f"maximum ({top:g})")
        ax.set_xlabel("step (one generated batch and its updates)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", frameon=False, loc="best")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].set_ylabel("mean over the step's completions")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
