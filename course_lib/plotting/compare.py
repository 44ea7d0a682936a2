"""Plots of Chapter 07: GRPO against PPO."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

_MEMORY_PARTS = {  # part -> (colour, legend)
    "actor": ("tab:blue", "actor (weights + grads)"),
    "critic": ("tab:red", "critic (weights + grads)"),
    "reference": ("tab:gray", "reference (weights)"),
    "reward": ("tab:brown", "reward model (weights)"),
    "optimizer": ("tab:orange", "optimizer (Adam state)"),
    "activations": ("tab:green", "activations"),
}


def _bytes_unit(largest: float) -> tuple[float, str]:
    """The decimal unit (B, kB, MB, GB) that shows ``largest`` bytes as a number below 1000."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if largest >= scale:
            return scale, unit
    return 1.0, "B"


def plot_memory_breakdown(tables: dict, title: str = "Memory of one training step") -> Figure:
    """Stacked horizontal bars of memory per algorithm: actor, critic, reference, reward, optimizer, activations.

    Args:
        tables: ``{algorithm: rows}`` with ``rows`` either the result of
            :func:`course_lib.lectures.memory.measure_training_memory` (``{part: {"bytes": int, ...}}``) or of
            :func:`course_lib.lectures.memory.memory_accounting` (``{part: int}``); a ``"total"`` row is ignored
            and recomputed.
        title: the figure's title.

    Returns:
        The figure: one bar per algorithm, one segment per part it has (non-zero).
    """
    if not isinstance(tables, dict) or not tables:
        raise ValueError(f"tables: expected a non-empty dict of algorithm -> rows, got {type(tables).__name__}")
    parts = {}
    for label, rows in tables.items():
        if not isinstance(rows, dict):
            raise ValueError(f"tables[{label!r}]: expected a dict of part -> bytes, got {type(rows).__name__}")
        values = {}
        for name, value in rows.items():
            if name == "total":
                continue
            if name not in _MEMORY_PARTS:
                raise ValueError(f"tables[{label!r}]: unknown part {name!r}; expected some of {tuple(_MEMORY_PARTS)}")
            values[name] = float(value["bytes"] if isinstance(value, dict) else value)
        parts[label] = values
    scale, unit = _bytes_unit(max(sum(v.values()) for v in parts.values()))
    fig, ax = plt.subplots(figsize=(8.0, 0.7 * len(parts) + 1.9))
    drawn = set()
    for y, values in enumerate(parts.values()):
        left = 0.0
        for name, (color, legend) in _MEMORY_PARTS.items():
            width = values.get(name, 0.0) / scale
            if width <= 0:
                continue
            ax.barh(y, width, left=left, height=0.6, color=color, label=None if name in drawn else legend)
            drawn.add(name)
            left += width
        ax.text(left, y, f"  {left:,.3g} {unit}", va="center", fontsize="small")
    ax.set_yticks(range(len(parts)), list(parts))
    ax.invert_yaxis()
    ax.set_xlim(0.0, max(sum(v.values()) for v in parts.values()) / scale * 1.18)
    ax.set_xlabel(f"memory ({unit})")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=3, frameon=False, fontsize="small")
    fig.tight_layout(rect=(0.0, 0.16, 1.0, 1.0))
    return fig


def plot_budget_curves(
    runs: dict,
    y: str = "reward",
    max_reward: float | None = None,
    sample_label: str = "samples",
    ylabel: str = "mean reward of the samples",
    title: str = "GRPO against PPO",
    seconds_label: str | None = "wall-clock seconds (one CPU thread)",
) -> Figure:
    """Reward against samples (left) and against seconds (right), mean and min-max band over seeds.

    Args:
        runs: ``{label: list of curves}``, each curve a dict of lists ``samples``, ``seconds``
            and ``reward`` (as ``course_lib.lectures.compare``'s runners return them); the seeds of a
            label are put on one grid by :func:`course_lib.lectures.compare.band`.
        y: the curve key to draw (``"reward"``; ``"greedy"`` for the sorting runs).
        max_reward: drawn as a dashed line (none when None).
        sample_label: what a sample is, for the left axis ("responses sampled", "environment steps").
        ylabel: the vertical axis.
        title: the figure's title.
        seconds_label: the right axis: what the curves' ``seconds`` measure (wall clock, or a thread's CPU time);
            None draws the left panel only (for curves whose clock should not be read).

    Returns:
        The figure: two panels (one when ``seconds_label`` is None) with one mean line and one band per label.
    """
    from course_lib.lectures.compare import band

    if not isinstance(runs, dict) or not runs:
        raise ValueError(f"runs: expected a non-empty dict of label -> list of curves, got {type(runs).__name__}")
    xs = ("samples",) if seconds_label is None else ("samples", "seconds")
    bands = {label: [band(curves, x=x, y=y) for x in xs] for label, curves in runs.items()}
    fig, axes = plt.subplots(1, len(xs), figsize=(11.0 if len(xs) == 2 else 7.5, 3.6), sharey=True, squeeze=False)
    axes = axes[0]  # (len(xs),)
    colors = ["tab:blue", "tab:red", "tab:green", "tab:purple"]
    for i, (label, label_bands) in enumerate(bands.items()):
        n = len(runs[label])
        for ax, b in zip(axes, label_bands):
            ax.fill_between(b["x"], b["low"], b["high"], color=colors[i % len(colors)], alpha=0.2, linewidth=0)
            ax.plot(
                b["x"],
                b["mean"],
                color=colors[i % len(colors)],
                linewidth=1.8,
                label=f"{label} (mean of {n} seeds, band: min-max)" if n > 1 else str(label),
            )
    for ax, xlabel in zip(axes, (sample_label, seconds_label)):
        if max_reward is not None:
            ax.axhline(max_reward, color="black", linestyle="--", linewidth=0.8)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel)
    axes[0].legend(fontsize="small", frameon=False, loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_sweep(group_size: int = 8, clip_eps: float = 0.2, sweep: dict | None = None) -> Figure:
    """GRPO's sweep over group size and clip range: the table of final rewards, and one configuration's curves.

    Left: the final greedy reward (mean over seeds and prompts) of every configuration, the
    selected one outlined. Right: its greedy and sampled reward per round, mean over seeds.

    Args:
        group_size, clip_eps: the configuration to show; must be in the sweep.
        sweep: the ``"sweep"`` entry of :func:`course_lib.lectures.sweep.load_sweep` (loaded when None).

    Returns:
        The figure: a heatmap and two curves.
    """
    from course_lib.lectures.sweep import load_sweep, sweep_config, sweep_grid

    sweep = load_sweep()["sweep"] if sweep is None else sweep
    config = sweep_config(sweep, group_size, clip_eps)  # raises ValueError for an unknown pair
    group_sizes, eps, table = sweep_grid(sweep, "final_greedy_reward")
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 3.9), gridspec_kw={"width_ratios": [1.0, 1.3]})
    image = axes[0].imshow(table.numpy(), cmap="viridis", vmin=float(table.min()), vmax=5.0, aspect="auto")
    for i in range(table.shape[0]):
        for j in range(table.shape[1]):
            value = float(table[i, j])
            axes[0].text(
                j,
                i,
                f"{value:.2f}",
                ha="center",
                va="center",
                fontsize="x-small",
                color="black" if value > float(table.min()) + 0.6 * (5.0 - float(table.min())) else "white",
            )
    i, j = sweep["group_sizes"].index(config["group_size"]), sweep["clip_eps"].index(config["clip_eps"])
    axes[0].add_patch(
        plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2.5, gid="selected")
    )
    axes[0].set_xticks(range(len(eps)), [f"{e:g}" for e in eps.tolist()])
    axes[0].set_yticks(range(len(group_sizes)), [str(g) for g in group_sizes.tolist()])
    axes[0].set_xlabel("clip_eps")
    axes[0].set_ylabel("group size G")
    axes[0].set_title(f"final greedy reward, mean of {len(sweep['seeds'])} seeds", fontsize="medium")
    fig.colorbar(image, ax=axes[0], fraction=0.05)
    rounds = _sweep_rounds(sweep, config)
    axes[1].plot(rounds, config["greedy_curve"], color="tab:blue", linewidth=1.8, label="greedy response", gid="greedy")
    axes[1].plot(
        rounds,
        config["reward_curve"],
        color="tab:orange",
        linewidth=1.8,
        label="sampled responses (mean)",
        gid="sampled",
    )
    axes[1].axhline(5.0, color="black", linestyle="--", linewidth=0.8)
    # One y range for the whole sweep, so that what moves with the sliders is the curves, not the axis.
    axes[1].set_ylim(min(1.5, min(min(c["reward_curve"]) for c in sweep["configs"]) - 0.2), 5.3)
    axes[1].set_xlabel("round")
    axes[1].set_ylabel("reward (mean over seeds and prompts)")
    axes[1].set_title(_sweep_title(config), fontsize="medium")
    axes[1].legend(fontsize="small", frameon=False, loc="lower right")
    axes[1].grid(alpha=0.3)
    # A fixed layout, not tight_layout: the widget redraws this on every slider step, and
    # tight_layout's extra layout pass costs about 50 ms of the redraw.
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.14, top=0.9, wspace=0.25)
    return fig


def _sweep_rounds(sweep: dict, config: dict) -> list[int]:
    every = sweep.get("curve_every", 1)
    return [every * (k + 1) for k in range(len(config["greedy_curve"]))]


def _sweep_title(config: dict) -> str:
    return (
        f"G = {config['group_size']}, clip_eps = {config['clip_eps']:g}: {config['samples']:,} samples, "
        f"{config['wall_time_s']:.2f} s per run"
    )


def update_sweep(fig: Figure, group_size: int = 8, clip_eps: float = 0.2, sweep: dict | None = None) -> list:
    """Redraw a figure of :func:`plot_sweep` for another configuration in place; return the artists changed.

    The outline on the table moves, the two curves and the title change; what matplotlib draws
    over them is redrawn with them: the table's frame, the line at the maximum reward, the legend.
    """
    from course_lib.lectures.sweep import load_sweep, sweep_config

    sweep = load_sweep()["sweep"] if sweep is None else sweep
    config = sweep_config(sweep, group_size, clip_eps)  # raises ValueError for an unknown pair
    table, curves = fig.axes[0], fig.axes[1]
    (selected,) = [p for p in table.patches if p.get_gid() == "selected"]
    i, j = sweep["group_sizes"].index(config["group_size"]), sweep["clip_eps"].index(config["clip_eps"])
    selected.set_xy((j - 0.5, i - 0.5))
    rounds = _sweep_rounds(sweep, config)
    for line in curves.lines:
        if line.get_gid() in ("greedy", "sampled"):
            line.set_data(rounds, config["greedy_curve" if line.get_gid() == "greedy" else "reward_curve"])
    curves.title.set_text(_sweep_title(config))
    return [selected, *table.spines.values(), *curves.lines, curves.get_legend(), curves.title]
