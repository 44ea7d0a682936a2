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


def _spread(ax, rows: np.ndarray, color: str, label: str, x=None) -> None:
    """The mean over seeds (thick), every seed (thin) and the band between the lowest and highest seed."""
    x = np.arange(rows.shape[1]) if x is None else np.asarray(x)
    ax.fill_between(x, np.nanmin(rows, 0), np.nanmax(rows, 0), color=color, alpha=0.15, lw=0)
    for row in rows:
        ax.plot(x, row, color=color, lw=0.6, alpha=0.5)
    ax.plot(x, np.nanmean(rows, 0), color=color, lw=2, label=label)


def plot_style_curves(histories: list[dict], smooth: int = 3) -> Figure:
    """Four panels over the RL rounds, across seeds: the scratchpad's share of the samples, their mean length,
    the accuracy of each style (trailing means over ``smooth`` rounds), and greedy test accuracy (worst seed dashed)."""
    share = _rows(histories, lambda h: h["style_share"]["scratchpad"], "histories")
    length = _rows(histories, lambda h: h["mean_length"], "histories")
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.2), layout="constrained")
    _spread(axes[0], trailing_mean(share, smooth), "C0", "scratchpad")
    _spread(
        axes[0],
        trailing_mean(_rows(histories, lambda h: h["style_share"]["direct"], "histories"), smooth),
        "C1",
        "direct",
    )
    axes[0].set(title="share of the samples (T = 1)", xlabel="round", ylim=(0, 1))
    axes[0].legend(fontsize=8)
    _spread(axes[1], trailing_mean(length, smooth), "C2", "mean")
    axes[1].set(title="mean sampled length (tokens)", xlabel="round")
    for style, color in (("scratchpad", "C0"), ("direct", "C1")):
        acc = _rows(histories, lambda h, style=style: h["style_accuracy"][style], "histories")  # nan where not sampled
        with warnings.catch_warnings():  # a round where no seed sampled the style: nan, a gap in the line
            warnings.simplefilter("ignore", RuntimeWarning)
            axes[2].plot(np.nanmean(acc, 0), color=color, lw=1.5, label=style)
    axes[2].set(title="accuracy of each style's samples", xlabel="round", ylim=(0, 1))
    axes[2].legend(fontsize=8)
    its = histories[0]["eval"]["iteration"]
    scores = _rows(histories, lambda h: h["eval"]["score"], "histories")
    _spread(axes[3], scores, "C3", "mean", x=its)
    axes[3].plot(its, scores[np.argmin(scores[:, -1])], color="k", ls="--", lw=1, label="worst seed")
    axes[3].axhline(0.9, color="grey", lw=0.5)
    axes[3].set(title="greedy accuracy (test prompts)", xlabel="round", ylim=(0, 1))
    axes[3].legend(fontsize=8)
    return fig


def plot_filler_control(runs: dict[str, list[dict]], smooth: int = 5) -> Figure:
    """The filler control: the filler share (trailing mean over ``smooth`` rounds) and the mean length over the
    rounds, one colour per aggregation (``name -> one history per seed``), mean and spread over seeds."""
    if not isinstance(runs, dict) or not runs:
        raise ValueError("runs: expected a dict aggregation name -> list of histories")
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(13, 3.2), layout="constrained")
    for i, (name, histories) in enumerate(runs.items()):
        color = f"C{i}"
        _spread(a, trailing_mean(_rows(histories, lambda h: h["style_share"]["filler"], "runs"), smooth), color, name)
        _spread(b, trailing_mean(_rows(histories, lambda h: h["mean_length"], "runs"), smooth), color, name)
        scores = _rows(histories, lambda h: h["eval"]["score"], "runs")
        _spread(c, scores, color, name, x=histories[0]["eval"]["iteration"])
    a.set(title="filler share of the samples", xlabel="round", ylim=(0, 1))
    b.set(title="mean sampled length (tokens)", xlabel="round")
    c.set(title="greedy accuracy (test prompts)", xlabel="round", ylim=(0, 1))
    a.legend(fontsize=8)
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
