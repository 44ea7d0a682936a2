"""Chapter 08's plots: a GRPO run on the tiny LM, the FAQ plots, GRPO beside PPO on every seed, and the ladder."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

_PANELS = [  # (history key, title)
    ("mean_reward", "mean reward of the samples"),
    ("mean_length", "completion length (tokens, EOS included)"),
    ("kl", "KL to the reference (k3)"),
    ("clip_fraction", "clip fraction"),
    ("frac_zero_std", "groups with all rewards equal"),
]


def _smooth(xs: list[float], k: int) -> list[float]:
    out, acc = [], 0.0
    for i, x in enumerate(xs):  # a trailing mean over k rounds: the raw curves are noisy
        acc += x - (xs[i - k] if i >= k else 0.0)
        out.append(acc / min(i + 1, k))
    return out


def plot_grpo_run(history: dict, smooth: int = 10) -> Figure:
    """Six panels against the round: held-out accuracy at the evaluations (points), then the loop's diagnostics,
    each raw (thin) with its trailing mean over ``smooth`` rounds (thick); the KL on a log scale from round 1 (round
    0's policy is the reference: its KL is exactly 0, which a log axis cannot show)."""
    fig, axes = plt.subplots(2, 3, figsize=(11, 5.4), layout="constrained")
    ax = axes.flat[0]
    ax.plot(history["eval"]["iteration"], history["eval"]["score"], marker="o", ms=3, ls=":")
    ax.set(title="test accuracy (greedy), at evaluations", xlabel="round", ylim=(0, 1))
    for ax, (key, title) in zip(axes.flat[1:], _PANELS):
        values = history[key]
        rounds = np.arange(len(values))
        if key == "kl":
            rounds, values = rounds[1:], values[1:]
            ax.set_yscale("log")
        ax.plot(rounds, values, lw=0.5, alpha=0.5, color="C0", label="each round")
        ax.plot(rounds, _smooth(list(values), smooth), lw=1.6, color="C0", label=f"{smooth}-round mean")
        ax.set(title=title, xlabel="round")
        if key == "mean_length":  # from 0: a narrow axis would magnify a few hundredths of a token into a trend
            ax.set_ylim(0, max(values) * 1.15)
    axes.flat[1].legend(fontsize=8)
    return fig


def plot_loss_beside_reward(history: dict, smooth: int = 10) -> Figure:
    """The GRPO loss of each round's first step (on-policy: ratio 1) and of its last, beside the mean reward."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3), layout="constrained")
    first, last = _smooth(history["loss_on_policy"], smooth), _smooth(history["loss"], smooth)
    a.plot(first, label="first step (ratio 1)")
    a.plot(last, label="last step of the round")
    a.axhline(0, color="grey", lw=0.5)
    settled = first[smooth:] + last[smooth:]  # Adam's first rounds jump far: keep them off the scale, say so
    if settled and max(first + last) > 2 * max(abs(v) for v in settled) + 1e-3:
        span = max(abs(v) for v in settled) * 1.5 + 1e-3
        a.set_ylim(-span, span)
        a.annotate(f"first rounds up to {max(first + last):.2f}", (0.02, 0.92), xycoords="axes fraction", fontsize=8)
    a.set(title="GRPO loss", xlabel="round", ylabel="loss (trailing mean)")
    a.legend(fontsize=8)
    b.plot(_smooth(history["mean_reward"], smooth), color="C2")
    b.set(title="mean reward of the samples", xlabel="round", ylabel="reward (trailing mean)")
    return fig


def plot_runs(runs: dict[str, dict], keys: list[tuple[str, str]], smooth: int = 10) -> Figure:
    """One panel per ``(history key, title)``, one line per run (name -> history)."""
    fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 3), layout="constrained", squeeze=False)
    for ax, (key, title) in zip(axes[0], keys):
        for name, history in runs.items():
            ax.plot(_smooth(history[key], smooth), label=name)
        ax.set(title=title, xlabel="round")
    axes[0][0].legend(fontsize=8)
    return fig


def plot_temperature_spread(temperatures: list[float], zero_std: list[float], reward_std: list[float]) -> Figure:
    """Per temperature: the fraction of groups with no learning signal, and the mean within-group reward std."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3), layout="constrained")
    a.plot(temperatures, zero_std, marker="o")
    a.set(title="groups with all rewards equal", xlabel="temperature", ylim=(0, 1))
    b.plot(temperatures, reward_std, marker="o", color="C1")
    b.set(title="mean reward std within a group", xlabel="temperature", ylim=(0, None))
    return fig


def plot_seed_curves(curves: dict[str, list[dict]]) -> Figure:
    """Test accuracy against the round on every seed, one panel per method (``name -> one eval dict per seed``):
    each seed thin, the median thick, the worst seed (by its last score) dashed and named."""
    fig, axes = plt.subplots(1, len(curves), figsize=(4.6 * len(curves), 3.3), layout="constrained", squeeze=False)
    for ax, (name, evals) in zip(axes[0], curves.items()):
        rounds = evals[0]["iteration"]
        scores = np.array([e["score"] for e in evals], dtype=np.float64)  # (seeds, evaluations)
        for row in scores:
            ax.plot(rounds, row, color="C0", lw=0.7, alpha=0.45)
        ax.plot(rounds, np.median(scores, 0), color="C0", lw=2.2, label="median of the seeds")
        worst = int(np.argmin(scores[:, -1]))
        label = f"worst seed ({evals[worst].get('seed', worst)}: {scores[worst, -1]:.3f})"
        ax.plot(rounds, scores[worst], color="k", ls="--", lw=1.2, label=label)
        ax.axhline(0.9, color="grey", ls=":", lw=0.8, label="0.9")
        ax.set(title=f"{name}: {len(evals)} seeds", xlabel="round", ylim=(0, 1))
        ax.legend(fontsize=8, loc="lower right")
    axes[0][0].set_ylabel("test accuracy (greedy)")
    return fig


def plot_ladder(names: list[str], scores: list[list[float]], steps: list[tuple[float, float] | None]) -> Figure:
    """The ladder: each rung's test accuracy on every seed (dots) with its mean (bar), and each step's paired
    difference to the rung before with its 95% t-interval (an interval that crosses 0 is unresolved).

    Args:
        names: one per rung; scores: each rung's per-seed scores; steps: ``(mean, half_width)`` per rung, None
            for the first.
    """
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 3.8), layout="constrained", width_ratios=(1, 1))
    x = np.arange(len(names))
    jitter = np.linspace(-0.15, 0.15, max(len(s) for s in scores))
    for i, values in enumerate(scores):
        a.scatter(i + jitter[: len(values)], values, s=12, color="C0", alpha=0.7, zorder=3)
        a.hlines(np.mean(values), i - 0.3, i + 0.3, color="k", lw=2, zorder=4)
    a.set_xticks(x, names, rotation=30, ha="right", fontsize=8)
    a.set(title="test accuracy per rung: seeds (dots), mean (bar)", ylabel="test accuracy (greedy)")
    shown = [(i, step) for i, step in enumerate(steps) if step is not None]
    for i, (mean, half) in shown:
        color = "C3" if mean - half > 0 or mean + half < 0 else "C7"
        b.errorbar(i, mean, yerr=half, fmt="o", color=color, capsize=4)
    b.axhline(0, color="grey", lw=0.8)
    b.set_xticks(x[1:], names[1:], rotation=30, ha="right", fontsize=8)
    b.set_xlim(a.get_xlim())
    b.set(title="each step: paired difference, 95% t-interval (grey: crosses 0)", ylabel="accuracy change")
    return fig


def plot_explained_variance(per_seed: dict, last: int = 50, floor: float = -1.0) -> Figure:
    """The value model's explained variance over the last ``last`` rounds of each seed (``seed -> per-round list``):
    a box per seed, so one round is never quoted for a run. The axis stops at ``floor``: explained variance is
    unbounded below (a round whose returns barely vary can give -30), so the rounds under it are counted in text
    instead of squashing every box into a line."""
    seeds = list(per_seed)
    data = [np.asarray(per_seed[s][-last:], dtype=np.float64) for s in seeds]
    fig, ax = plt.subplots(figsize=(7, 3.2), layout="constrained")
    ax.boxplot(data, showfliers=True, flierprops={"markersize": 3})
    ax.set_xticks(np.arange(1, len(seeds) + 1), [str(s) for s in seeds])
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_ylim(floor - 0.15, 1.05)
    for position, values in enumerate(data, start=1):
        below = int((values < floor).sum())
        if below:
            ax.annotate(f"{below} below {floor:g}", (position, floor - 0.1), ha="center", fontsize=7)
    ax.set(
        title=f"PPO's value model: explained variance over the last {last} rounds",
        xlabel="seed",
        ylabel="explained variance",
    )
    return fig


def plot_grpo_vs_ppo(grpo_eval: dict, ppo_eval: dict) -> Figure:
    """Held-out accuracy against sampled completions and against training seconds (the loop's ``history["eval"]``)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3), layout="constrained")
    for name, ev in (("GRPO", grpo_eval), ("PPO + value model", ppo_eval)):
        a.plot(ev["completions"], ev["score"], marker="o", ms=3, label=name)
        b.plot(ev["seconds"], ev["score"], marker="o", ms=3, label=name)
    a.set(title="accuracy against samples", xlabel="completions sampled (thousands)", ylim=(0, 1))
    a.xaxis.set_major_formatter(lambda x, _: f"{x / 1000:g}")  # 160000 would run into its neighbours
    b.set(title="accuracy against wall-clock", xlabel="training seconds (2 cores, shared)", ylim=(0, 1))
    a.legend()
    return fig
