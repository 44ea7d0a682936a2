"""Plots of Chapter 04: GAE."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from course_lib import _validate
from course_lib._threads import one_thread
from course_lib.plotting.base import FIGSIZE, _curve


def plot_nstep_weights(lam: float = 0.9, horizon: int = 20) -> Figure:
    """Bar chart of the weight ``(1 - lam) * lam^(n - 1)`` GAE gives the n-step estimator A^(n).

    GAE(gamma, lam) is the exponentially weighted average of the n-step advantage
    estimators (GAE paper, eq. 15-16); the weights sum to 1 over n = 1, 2, ...

    Args:
        lam: GAE lambda in [0, 1]. For lam = 1 all the weight sits at n = infinity (Monte-Carlo).
        horizon: number of estimators drawn, n = 1 .. horizon (a positive integer).
    """
    lam = _validate.require_unit_interval("lam", lam)
    if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
        raise ValueError(f"horizon: expected a positive integer number of estimators, got {horizon!r}")
    n = torch.arange(1, horizon + 1, dtype=torch.float64)
    weights = (1.0 - lam) * lam ** (n - 1)  # (horizon,)
    fig, ax = plt.subplots(figsize=FIGSIZE)
    ax.bar(
        n.numpy(),
        weights.numpy(),
        width=0.8,
        color="tab:blue",
        label=r"weight $(1-\lambda)\lambda^{n-1}$ of $\hat A^{(n)}$",
    )
    rest = 1.0 - float(weights.sum())
    ax.plot([], [], " ", label=f"weight left for n > {horizon}: {rest:.3f}")
    ax.set_xlim(0.4, horizon + 0.6)
    ax.set_ylim(0.0, 1.4 * max(float(weights.max()), 0.05))  # head room for the legend
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("n (the estimator looks n steps ahead, then bootstraps from V)")
    ax.set_ylabel("weight")
    ax.set_title(rf"GAE as an average of n-step estimators, $\lambda$ = {lam:.2f}")
    ax.legend(loc="upper right", frameon=False, fontsize="small")
    fig.tight_layout()
    return fig


_CHAIN_EPISODES: dict = {}  # (n_episodes, seed) -> Episodes: the widget's fixed batch, sampled once


def _chain_batch(n_episodes: int, seed: int):
    # Imported here, not at the top: the chain is chapter 04's, the plotting module everyone's.
    from course_lib.lectures import chain

    key = (n_episodes, seed)
    if key not in _CHAIN_EPISODES:
        _CHAIN_EPISODES[key] = chain.sample_episodes(chain.Chain(), n_episodes, seed=seed)
    return _CHAIN_EPISODES[key]


def plot_gae_on_chain(
    gamma: float = 0.95, lam: float = 0.5, noise: float = 0.3, n_episodes: int = 300, seed: int = 0
) -> Figure:
    """GAE estimates beside the true advantages on :class:`course_lib.lectures.chain.Chain`, for one fixed batch.

    For each state and action: the truth ``Q(s, a) - V_hat(s)`` (the true advantage seen
    from the critic's baseline, see :mod:`course_lib.lectures.chain`) as a line, and the mean
    +- one standard deviation of the GAE estimates at the steps that visit (s, a) as
    error bars. The title gives bias^2, variance and their sum, the mean squared error.
    The episodes are sampled once per ``(n_episodes, seed)`` and reused: sliding gamma
    or lam only recomputes the estimates.

    Args:
        gamma: discount factor in [0, 1].
        lam: GAE lambda in [0, 1].
        noise: scale of the critic's fixed error, V_hat = V + noise * N(0, 1) per state.
        n_episodes: size of the batch.
        seed: seed of the batch and of the critic's error.
    """
    from course_lib.lectures import chain

    ch, stats = _gae_on_chain_stats(gamma, lam, noise, n_episodes, seed)
    s = torch.arange(ch.n_states, dtype=torch.float64).numpy()
    fig, ax = plt.subplots(figsize=(7.2, 3.6))
    for a, name, color, shift in ((chain.RIGHT, "right", "tab:blue", -0.1), (chain.LEFT, "left", "tab:orange", 0.1)):
        ax.plot(
            s,
            stats["target"][:, a].numpy(),
            color=color,
            marker="D",
            markersize=4,
            linewidth=1.5,
            label=f"truth Q(s, {name}) − V̂(s)",
        )
        ax.errorbar(
            s + shift,
            stats["mean"][:, a].numpy(),
            yerr=stats["std"][:, a].numpy(),
            color=color,
            fmt="o",
            markersize=4,
            capsize=3,
            alpha=0.75,
            label=f"GAE mean ± std, {name}",
        )
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.set_ylim(-1.5, 1.9)  # fixed, so what moves with the sliders is the estimate, not the axis
    ax.set_yticks([-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5])
    ax.set_xticks(s)
    ax.set_xlabel(f"state s (episodes start at s = {ch.start}; off either end they stop)")
    ax.set_ylabel("advantage")
    # Plain text, no mathtext and no tight_layout: each costs tens of milliseconds per redraw.
    ax.set_title(_gae_on_chain_title(gamma, lam, n_episodes, stats), fontsize="medium")
    ax.legend(loc="upper center", ncol=2, frameon=False, fontsize="small")
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.14, top=0.9)
    return fig


def _gae_on_chain_stats(gamma, lam, noise, n_episodes, seed):
    """The chain and :func:`course_lib.lectures.chain.gae_statistics` on the fixed batch of ``(n_episodes, seed)``."""
    from course_lib.lectures import chain

    gamma = _validate.require_unit_interval("gamma", gamma)
    lam = _validate.require_unit_interval("lam", lam)
    ch = chain.Chain()
    # One thread for these small tensors: a second one only adds waiting, badly so on a busy machine,
    # and the widget redraws on every slider step.
    with one_thread():
        episodes = _chain_batch(n_episodes, seed)
        critic = chain.imperfect_critic(ch, gamma, noise=noise, seed=seed)
        stats = chain.gae_statistics(ch, episodes, critic, gamma, lam)
    return ch, stats


def _gae_on_chain_title(gamma, lam, n_episodes, stats) -> str:
    return (
        f"GAE with γ = {gamma:.2f}, λ = {lam:.2f} ({n_episodes} episodes):  "
        f"bias² {stats['bias2']:.3f} + variance {stats['variance']:.3f} = MSE {stats['mse']:.3f}"
    )


def update_gae_on_chain(
    fig: Figure, gamma: float = 0.95, lam: float = 0.5, noise: float = 0.3, n_episodes: int = 300, seed: int = 0
) -> list:
    """Redraw a figure of :func:`plot_gae_on_chain` for another gamma and lam in place; return the artists changed.

    The truth lines, the error bars (points, caps, bars) and the title change; the line at 0,
    the spines and (when the bars reach it) the legend, drawn over them, are redrawn with them.
    """
    from course_lib.lectures import chain

    ch, stats = _gae_on_chain_stats(gamma, lam, noise, n_episodes, seed)
    (ax,) = fig.axes
    truths = [line for line in ax.lines if line.get_marker() == "D"]
    for a, truth, bars in zip((chain.RIGHT, chain.LEFT), truths, ax.containers):
        mean, std = stats["mean"][:, a].numpy(), stats["std"][:, a].numpy()
        truth.set_ydata(stats["target"][:, a].numpy())
        points, (low, high), (verticals,) = bars
        x = points.get_xdata()
        points.set_ydata(mean)
        low.set_ydata(mean - std)
        high.set_ydata(mean + std)
        verticals.set_segments([[(xi, lo), (xi, hi)] for xi, lo, hi in zip(x, mean - std, mean + std)])
    ax.title.set_text(_gae_on_chain_title(gamma, lam, n_episodes, stats))
    changed = [*ax.lines, *ax.collections, ax.title, *ax.spines.values()]
    # The legend is drawn over the bars, so it is redrawn with them, but only when they reach it: its text is
    # about half the cost of a redraw. (Pixels: the highest bar or cap, plus half a marker, against its bottom.)
    legend = ax.get_legend()
    top = max(float((stats["mean"] + stats["std"]).nan_to_num(-9.0).max()), float(stats["target"].max()))
    top_px = ax.transData.transform((0.0, top))[1] + 4.0
    if top_px >= legend.get_window_extent().y0:
        changed.append(legend)
    return changed


def plot_bias_variance(lams, mse, bias2, variance, exact_bias2=None) -> Figure:
    """Mean squared error, bias^2 and variance of the GAE estimate against lambda.

    Args:
        lams: ``(L,)`` the lambdas.
        mse, bias2, variance: ``(L,)`` each, as :func:`course_lib.lectures.chain.bias_variance` returns them.
        exact_bias2: optional ``(L,)`` bias^2 computed exactly, drawn dashed.

    Returns:
        The figure: one line each for MSE, bias^2 and variance (and the exact bias^2 when given).
    """
    lams = _curve("lams", lams)
    if lams.numel() < 2:
        raise ValueError(f"lams: expected at least 2 values of lambda, got {lams.numel()}")
    mse = _curve("mse", mse, "lams", lams)
    bias2 = _curve("bias2", bias2, "lams", lams)
    variance = _curve("variance", variance, "lams", lams)
    x = lams.numpy()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    # Curves meet (MSE = variance where the bias is 0; sampled and exact bias² agree), so each has its own
    # style: a wide pale line under a thinner dashed one stays visible where the two coincide.
    ax.plot(x, mse.numpy(), color="0.55", linewidth=5, alpha=0.6, label="MSE = bias² + variance")
    ax.plot(
        x, variance.numpy(), color="tab:blue", linewidth=1.6, linestyle="--", marker="s", markersize=3, label="variance"
    )
    if exact_bias2 is not None:
        exact_bias2 = _curve("exact_bias2", exact_bias2, "lams", lams)
        ax.plot(x, exact_bias2.numpy(), color="tab:red", linewidth=3, alpha=0.35, label="bias² (exact)")
    ax.plot(x, bias2.numpy(), color="tab:red", linestyle="none", marker="o", markersize=4, label="bias² (sampled)")
    best = int(mse.argmin())
    ax.axvline(x[best], color="0.6", linestyle=":", linewidth=1)
    ax.annotate(
        rf"least MSE at $\lambda$ = {x[best]:.2f}",
        (x[best], float(mse[best])),
        xytext=(0, 12),
        textcoords="offset points",
        ha="center",
        fontsize="small",
    )
    ax.set_xlabel(r"$\lambda$  (0: one-step TD residual, 1: Monte-Carlo return minus V)")
    ax.set_ylabel("squared error (advantage²)")
    ax.set_ylim(0.0, 1.35 * float(torch.stack([mse.max(), bias2.max(), variance.max()]).max()))  # room for the legend
    ax.set_title("The bias-variance trade-off of GAE, measured")
    ax.legend(loc="upper center", ncol=2, frameon=False, fontsize="small")
    fig.tight_layout()
    return fig


def plot_truncation_errors(error_bootstrap, error_terminal, gamma_lam: float | None = None) -> Figure:
    """Mean advantage error of episodes cut by a time limit, against the number of steps before the cut.

    Args:
        error_bootstrap: ``(K,)`` mean error at k = 0 .. K-1 steps before the cut, bootstrapping
            from V of the state the episode stopped in (right).
        error_terminal: ``(K,)`` the same when the cut is treated as termination (wrong).
        gamma_lam: optional gamma * lam: draws the predicted decay of the error,
            ``error_terminal[0] * (gamma * lam)^k``, dotted.
    """
    error_terminal = _curve("error_terminal", error_terminal)
    error_bootstrap = _curve("error_bootstrap", error_bootstrap, "error_terminal", error_terminal)
    if gamma_lam is not None:
        gamma_lam = _validate.require_unit_interval("gamma_lam", gamma_lam)
    k = torch.arange(error_terminal.numel(), dtype=torch.float64)
    fig, ax = plt.subplots(figsize=FIGSIZE)
    curves = [
        (error_terminal, "tab:red", "cut treated as terminal (wrong)"),
        (error_bootstrap, "tab:green", r"bootstrap from $V$(last state) (right)"),
    ]
    for error, color, label in curves:
        ax.plot(k.numpy(), error.numpy(), color=color, marker="o", markersize=4, label=label)
    if gamma_lam is not None:
        ax.plot(
            k.numpy(),
            (error_terminal[0] * gamma_lam**k).numpy(),
            color="0.4",
            linestyle=":",
            label=r"first error $\times (\gamma\lambda)^k$",
        )
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.invert_xaxis()  # time runs left to right: the cut is on the right
    ax.set_xlabel("k, steps before the time limit (k = 0: the last step)")
    ax.set_ylabel("mean error of the advantage")
    ax.set_title("Time limits: what a wrong bootstrap does to the advantages")
    ax.legend(loc="lower left", frameon=False, fontsize="small")
    fig.tight_layout()
    return fig


def plot_token_gae(rewards, values, advantages) -> Figure:
    """Per-token rewards (bars), critic values and GAE advantages (lines) of one response.

    Args:
        rewards: ``(T,)`` per-token rewards (a KL penalty at every token, the score at the last).
        values: ``(T,)`` the critic's value of each prefix.
        advantages: ``(T,)`` the GAE advantages.
    """
    rewards = _curve("rewards", rewards)
    values = _curve("values", values, "rewards", rewards)
    advantages = _curve("advantages", advantages, "rewards", rewards)
    t = torch.arange(rewards.numel()).numpy()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    ax.bar(t, rewards.numpy(), width=0.6, color="0.7", label="reward $r_t$")
    ax.plot(t, values.numpy(), color="tab:blue", marker="s", markersize=4, label=r"value $V(s_t)$")
    ax.plot(t, advantages.numpy(), color="tab:red", marker="o", markersize=4, label=r"advantage $\hat A_t$")
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.set_xticks(t)
    ax.set_xlabel("token t of the response")
    ax.set_ylabel("per token")
    ax.set_title("GAE over the tokens of one response")
    # The legend sits outside the axes: inside, it covered the first token's markers.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize="small")
    fig.tight_layout()
    return fig
