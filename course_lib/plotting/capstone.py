"""Chapter 08's plots: a GRPO run on the tiny LM, the FAQ plots, and GRPO beside PPO."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

_PANELS = [  # (history key, title)
    ("mean_reward", "mean reward of the samples"),
    ("mean_length", "completion length (tokens, EOS included)"),
    ("kl", "KL to the reference (k3)"),
    ("clip_fraction", "clip fraction"),
    ("all_equal_fraction", "groups with all rewards equal"),
]


def _smooth(xs: list[float], k: int) -> list[float]:
    out, acc = [], 0.0
    for i, x in enumerate(xs):  # a trailing mean over k epochs: the raw curves are noisy
        acc += x - (xs[i - k] if i >= k else 0.0)
        out.append(acc / min(i + 1, k))
    return out


def plot_grpo_run(history: dict, evals: dict, smooth: int = 10) -> Figure:
    """Six panels against the epoch: held-out accuracy, then the history's diagnostics (trailing means)."""
    fig, axes = plt.subplots(2, 3, figsize=(11, 5.4), layout="constrained")
    ax = axes.flat[0]
    ax.plot(evals["epoch"], evals["accuracy"], marker="o", ms=3)
    ax.set(title="held-out accuracy (greedy)", xlabel="epoch", ylim=(0, 1))
    for ax, (key, title) in zip(axes.flat[1:], _PANELS):
        ax.plot(_smooth(history[key], smooth))
        ax.set(title=title, xlabel="epoch")
    return fig


def plot_loss_beside_reward(history: dict, smooth: int = 10) -> Figure:
    """The GRPO loss and the mean reward on the same epochs: the loss says little, the reward says it all."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3), layout="constrained")
    a.plot(history["loss"], lw=0.6, alpha=0.5)
    a.plot(_smooth(history["loss"], smooth))
    a.axhline(0, color="grey", lw=0.5)
    a.set(title="GRPO loss", xlabel="epoch")
    b.plot(_smooth(history["mean_reward"], smooth), color="C2")
    b.set(title="mean reward", xlabel="epoch")
    return fig


def plot_runs(runs: dict[str, dict], keys: list[tuple[str, str]], smooth: int = 10) -> Figure:
    """One panel per ``(history key, title)``, one line per run (name -> history)."""
    fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 3), layout="constrained", squeeze=False)
    for ax, (key, title) in zip(axes[0], keys):
        for name, history in runs.items():
            ax.plot(_smooth(history[key], smooth), label=name)
        ax.set(title=title, xlabel="epoch")
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
    """Held-out accuracy against sampled completions and against training seconds."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3), layout="constrained")
    for name, ev in (("GRPO", grpo_eval), ("PPO + value head", ppo_eval)):
        a.plot(ev["completions"], ev["accuracy"], marker="o", ms=3, label=name)
        b.plot(ev["seconds"], ev["accuracy"], marker="o", ms=3, label=name)
    a.set(title="accuracy against samples", xlabel="completions sampled", ylim=(0, 1))
    b.set(title="accuracy against wall-clock", xlabel="training seconds (2 cores, shared)", ylim=(0, 1))
    a.legend()
    return fig
