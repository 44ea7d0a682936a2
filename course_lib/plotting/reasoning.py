"""Chapter 10's plots: what RL selects (style share, length, accuracy by style), the filler control, pass@k.

Each takes plain numbers as ``benchmarks/reasoning_length.py`` saves them (``reasoning_10.json``): one history
per seed, with per-round lists ``style_share[style]``, ``style_accuracy[style]``, ``mean_length`` and the
evaluations ``eval`` (``iteration``, ``score``). Across seeds they draw the mean, every seed thin, and the
worst seed where a bar is about the worst seed.
"""

from __future__ import annotations

import warnings

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure


def _rows(histories, get, name: str) -> np.ndarray:
    """``(S, R)``: one row per seed of ``get(history)``; every seed must have the same number of rounds."""
    if not isinstance(histories, (list, tuple)) or not histories:
        raise ValueError(
            f"{name}: expected a non-empty list of histories (one per seed), got {type(histories).__name__}"
        )
    rows = [np.asarray(get(h), dtype=np.float64) for h in histories]
    if len({r.shape for r in rows}) != 1 or rows[0].ndim != 1 or rows[0].size == 0:
        raise ValueError(f"{name}: every seed needs the same, non-zero number of rounds, got {[r.shape for r in rows]}")
    return np.stack(rows)


def trailing_mean(rows: np.ndarray, k: int) -> np.ndarray:
    """The trailing mean over the last ``k`` rounds along the last axis (fewer at the start)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k: expected a positive integer number of rounds, got {k!r}")
    rows = np.asarray(rows, dtype=np.float64)
    c = np.concatenate([np.zeros(rows.shape[:-1] + (1,)), np.cumsum(rows, axis=-1)], axis=-1)
    i = np.arange(1, rows.shape[-1] + 1)
    return (c[..., i] - c[..., np.maximum(i - k, 0)]) / np.minimum(i, k)


def _spread(ax, rows: np.ndarray, color: str, label: str, x=None, marker: str | None = None, ls: str = "-") -> None:
    """The mean over seeds (thick), every seed (thin) and the band between the lowest and highest seed."""
    x = np.arange(rows.shape[1]) if x is None else np.asarray(x)
    with warnings.catch_warnings():  # a column that is nan for every seed: a gap, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high, mean = np.nanmin(rows, 0), np.nanmax(rows, 0), np.nanmean(rows, 0)
    ax.fill_between(x, low, high, color=color, alpha=0.15, lw=0)
    for row in rows:
        ax.plot(x, row, color=color, lw=0.6, alpha=0.5)
    ax.plot(x, mean, color=color, lw=2, label=label, marker=marker, ms=4, ls=ls)


MIN_SAMPLES = 20
"""A style's accuracy in a round is drawn only where the seeds averaged at least this many samples of it."""


def plot_style_curves(histories: list[dict], smooth: int = 3, samples_per_round: int = 512) -> Figure:
    """Four panels over the RL rounds, across seeds (mean thick, each seed thin, the band from the lowest to the
    highest seed): each style's share of the samples, their mean length and each style's accuracy (trailing means
    over ``smooth`` rounds, said in the titles), and greedy test accuracy at the evaluations (points; worst seed
    dashed; the 0.9 bar). A style's accuracy is left out of rounds with fewer than :data:`MIN_SAMPLES` of its
    samples per seed on average (``samples_per_round`` times its share): a handful of samples is noise."""
    fig, grid = plt.subplots(2, 2, figsize=(11, 6.4), layout="constrained")
    axes = grid.flat
    for style, color in (("scratchpad", "C0"), ("direct", "C1")):
        share = _rows(histories, lambda h, style=style: h["style_share"][style], "histories")
        _spread(axes[0], trailing_mean(share, smooth), color, style)
        acc = _rows(histories, lambda h, style=style: h["style_accuracy"][style], "histories")  # nan: not sampled
        enough = share.mean(0) * samples_per_round >= MIN_SAMPLES  # (R,)
        smoothed = np.where(enough, acc, np.nan)
        _spread(axes[2], smoothed, color, style)
    axes[0].set(title=f"share of the samples ({smooth}-round mean)", xlabel="round", ylim=(0, 1))
    axes[0].legend(fontsize=8, loc="center right")
    length = _rows(histories, lambda h: h["mean_length"], "histories")
    _spread(axes[1], trailing_mean(length, smooth), "C2", "mean over seeds")
    axes[1].set(title=f"mean length, tokens ({smooth}-round mean)", xlabel="round")
    axes[2].set(title=f"accuracy of each style (>= {MIN_SAMPLES} samples)", xlabel="round", ylim=(0, 1))
    axes[2].legend(fontsize=8, loc="lower right")
    rounds = histories[0]["eval"]["iteration"]
    scores = _rows(histories, lambda h: h["eval"]["score"], "histories")
    _spread(axes[3], scores, "C3", "mean over seeds", x=rounds, marker="o", ls=":")  # evaluations: points
    worst = scores[np.argmin(scores[:, -1])]
    axes[3].plot(rounds, worst, color="k", ls=":", lw=1, marker="s", ms=3, label="worst seed")
    axes[3].axhline(0.9, color="grey", lw=0.8, ls=":", label="0.9 (the bar)")
    axes[3].set(title="greedy test accuracy (at the evaluations)", xlabel="round", ylim=(0, 1))
    axes[3].legend(fontsize=8, loc="lower right")
    return fig


def plot_filler_control(runs: dict[str, list[dict]], smooth: int = 5) -> Figure:
    """The filler control, one column per aggregation (``name -> one history per seed``): the filler share of the
    samples (top) and their mean length (bottom), trailing means over ``smooth`` rounds; each seed thin, the mean
    over seeds thick. Small multiples, so that the three aggregations' seeds do not merge into one mass."""
    if not isinstance(runs, dict) or not runs:
        raise ValueError("runs: expected a dict aggregation name -> list of histories")
    fig, axes = plt.subplots(2, len(runs), figsize=(4.2 * len(runs), 5.4), layout="constrained", squeeze=False)
    for i, (name, histories) in enumerate(runs.items()):
        color = f"C{i}"
        share = trailing_mean(_rows(histories, lambda h: h["style_share"]["filler"], "runs"), smooth)
        length = trailing_mean(_rows(histories, lambda h: h["mean_length"], "runs"), smooth)
        _spread(axes[0][i], share, color, "mean over seeds")
        _spread(axes[1][i], length, color, "mean over seeds")
        axes[0][i].set(title=name, ylim=(0, 1))
        axes[1][i].set(xlabel="round")
    axes[0][0].set_ylabel(f"filler share ({smooth}-round mean)")
    axes[1][0].set_ylabel(f"mean length, tokens ({smooth}-round mean)")
    fig.suptitle(
        f"the filler control: each thin line one seed ({len(next(iter(runs.values())))} seeds), thick the mean"
    )
    return fig


def plot_pass_at_k(before: list[dict], after: list[dict]) -> Figure:
    """pass@k against k (log scale) before and after RL: one thin line per seed, the mean thick.

    Args:
        before, after: one ``{k: pass@k}`` dict per seed (keys may be str, as JSON writes them).
    """
    if not before or len(before) != len(after):
        raise ValueError(f"after: expected as many seeds as before ({len(before)}), got {len(after)}")
    fig, ax = plt.subplots(figsize=(5.5, 3.4), layout="constrained")
    for curves, color, label in ((before, "C1", "before RL (warm-up)"), (after, "C0", "after RL")):
        ks = sorted(int(k) for k in curves[0])
        rows = _rows(curves, lambda d, ks=ks: [d[k] if k in d else d[str(k)] for k in ks], "before/after")
        _spread(ax, rows, color, label, x=ks)
    ax.set_xscale("log", base=2)
    ax.set(title="pass@k on test prompts (64 samples each)", xlabel="k", ylabel="pass@k", ylim=(0, 1.02))
    ax.legend(fontsize=8)
    return fig
