"""Chapter 11's plots: the GRPO family's runs from the shipped results (``lectures/data/grpo_family_11.pt``).

Every function takes ``runs``: variant name -> a list of per-seed records (:func:`course_lib.lectures.family.record`:
``score``, ``eval_completions``, ``eval_score``, ``curves``), the shape the benchmark saves.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from course_lib import _validate


def _check(runs: dict) -> dict:
    if not isinstance(runs, dict) or not runs or not all(runs.values()):
        raise ValueError("runs: a dict of variant name -> a non-empty list of per-seed records")
    return runs


def _mean_curve(records: list[dict], x_key: str, y_key: str, curves: bool = False, points: int = 25):
    """Every seed's y interpolated onto one grid of x (from the seeds' first x to the smallest last x: dynamic
    sampling spends the budget in a different number of rounds on each seed); the grid and the mean, min and max
    over the seeds."""
    get = (lambda r, k: r["curves"][k]) if curves else (lambda r, k: r[k])
    xs = [np.asarray(get(r, x_key), dtype=float) for r in records]
    grid = np.linspace(max(x[0] for x in xs), min(x[-1] for x in xs), points)
    ys = np.stack([np.interp(grid, x, np.asarray(get(r, y_key), dtype=float)) for x, r in zip(xs, records)])
    return grid, ys.mean(0), ys.min(0), ys.max(0)


def plot_family_curves(
    runs: dict[str, list[dict]], reference: str | None = "GRPO", threshold: float = 0.8, cols: int = 5
) -> Figure:
    """One small panel per variant: held-out accuracy against completions sampled, each seed a thin line, the
    mean over seeds bold; ``reference``'s mean dashed in every panel, and the ``threshold`` dotted."""
    _check(runs)
    cols = _validate.require_int("cols", cols, minimum=1)
    rows = math.ceil(len(runs) / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(2.4 * cols, 2.2 * rows), layout="constrained", sharex=True, sharey=True, squeeze=False
    )
    ref = _mean_curve(runs[reference], "eval_completions", "eval_score") if reference in runs else None
    for ax, (name, records) in zip(axes.flat, runs.items()):
        for r in records:
            ax.plot(np.asarray(r["eval_completions"]) / 1e3, r["eval_score"], color="C0", lw=0.6, alpha=0.4)
        x, mean, _, _ = _mean_curve(records, "eval_completions", "eval_score")
        ax.plot(x / 1e3, mean, color="C0", lw=2, label="mean")
        if ref is not None and name != reference:
            ax.plot(ref[0] / 1e3, ref[1], color="grey", lw=1, ls="--", label=f"{reference} mean")
        ax.axhline(threshold, color="grey", lw=0.5, ls=":")
        ax.set_title(name, fontsize=9)
        ax.set_ylim(0, 1)
    for ax in axes.flat[len(runs) :]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("completions (k)")
    for ax in axes[:, 0]:
        ax.set_ylabel("held-out accuracy")
    handles = [h for ax in axes.flat for h in ax.get_legend_handles_labels()[0]][:1]
    if ref is not None and len(runs) > 1:
        handles = axes.flat[1].get_legend_handles_labels()[0]
    axes.flat[0].legend(handles=handles, fontsize=7, loc="lower right")
    return fig


def plot_family_scores(runs: dict[str, list[dict]], threshold: float = 0.8) -> Figure:
    """Every seed's final held-out accuracy per variant (dots) and the mean (a bar), variants by mean: the
    seed-to-seed spread beside the differences between variants."""
    _check(runs)
    names = sorted(runs, key=lambda n: sum(r["score"] for r in runs[n]) / len(runs[n]))
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(names) + 1.2), layout="constrained")
    for i, name in enumerate(names):
        scores = [r["score"] for r in runs[name]]
        ax.scatter(scores, [i] * len(scores), s=14, color="C0", alpha=0.6, zorder=3)
        ax.plot([sum(scores) / len(scores)] * 2, [i - 0.3, i + 0.3], color="C3", lw=2.5, zorder=4)
    ax.axvline(threshold, color="grey", lw=0.5, ls=":")
    ax.set_yticks(range(len(names)), names)
    ax.set(xlabel="held-out accuracy at the end (dots: seeds; bar: mean)", xlim=(0, 1))
    ax.grid(axis="x", lw=0.3)
    return fig


_DIAGNOSTICS = [
    ("mean_length", "completion length (tokens)"),
    ("kl", "KL to the reference (k3)"),
    ("clip_fraction", "clip fraction"),
    ("frac_zero_std", "groups with all rewards equal"),
]


def plot_family_diagnostics(runs: dict[str, list[dict]], keys: list[tuple[str, str]] | None = None) -> Figure:
    """The loop's diagnostics against completions sampled, the mean over seeds of each variant, one panel each."""
    _check(runs)
    keys = keys or _DIAGNOSTICS
    fig, axes = plt.subplots(1, len(keys), figsize=(3.3 * len(keys), 3), layout="constrained", squeeze=False)
    for ax, (key, title) in zip(axes[0], keys):
        for i, (name, records) in enumerate(runs.items()):
            x, mean, _, _ = _mean_curve(records, "completions", key, curves=True)
            ax.plot(x / 1e3, mean, label=name, color=f"C{i % 10}", ls="-" if i < 10 else "--")
        if key == "kl":  # k3's exponential tail: one token's spike would flatten every other curve
            ax.set_yscale("log")
        ax.set(title=title + (" (log scale)" if key == "kl" else ""), xlabel="completions (k)")
    axes[0][0].legend(fontsize=7)
    return fig
