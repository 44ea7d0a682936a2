"""Chapter 08's plots: a GRPO run on the tiny LM, the FAQ plots, and GRPO beside PPO."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

_PANELS = [  # (history key, title)
    ("mean_reward", "mean reward of the samples"),
    ("mean_length", "completion length (tokens, EOS included)"),
    ("kl", "KL to the reference (k3, log scale)"),
    ("clip_fraction", "clip fraction"),
    ("frac_zero_std", "groups with all rewards equal"),
]


def _smooth(xs: list[float], k: int) -> list[float]:
    out, acc = [], 0.0
    for i, x in enumerate(xs):  # a trailing mean over k epochs: the raw curves are noisy
        acc += x - (xs[i - k] if i >= k else 0.0)
        out.append(acc / min(i + 1, k))
    return out


def plot_grpo_run(history: dict, smooth: int = 10) -> Figure:
    """Six panels against the round: held-out accuracy (``history["eval"]``), then the loop's diagnostics
    (trailing means; the KL raw and on a log scale, so a spike shows without flattening the rest)."""
    fig, axes = plt.subplots(2, 3, figsize=(11, 5.4), layout="constrained")
    ax = axes.flat[0]
    ax.plot(history["eval"]["iteration"], history["eval"]["score"], marker="o", ms=3)
    ax.set(title="held-out accuracy (greedy)", xlabel="round", ylim=(0, 1))
    for ax, (key, title) in zip(axes.flat[1:], _PANELS):
        if key == "kl":
            ax.plot([max(k, 1e-4) for k in history[key]], lw=0.8)
            ax.set_yscale("log")
        else:
            ax.plot(_smooth(history[key], smooth))
        ax.set(title=title, xlabel="round")
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
    b.set(title="mean reward std within a group", xlabel="temperature")
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
