"""Plots of Chapter 02: policy gradient."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from course_lib import _validate
from course_lib.plotting.base import FIGSIZE, _curve, _max_reward_line

_MC_LOGITS = (0.5, -1.0, 1.5, 0.0, -0.5)
_MC_REWARDS = (1.0, 0.0, 3.0, -2.0, 0.5)


def plot_mc_gradient_error(
    n_samples=None,
    errors=None,
    sigma: float | None = None,
    title: str = "Monte-Carlo policy gradient: error against samples",
) -> Figure:
    """Log-log plot of the Monte-Carlo gradient's error against the number of samples, with ``sigma / sqrt(n)``.

    Each dot is one estimate's distance to the exact gradient; the line through the
    markers is their root mean square at each ``n``; the dashed line is the exact
    prediction ``sigma / sqrt(n)`` (not a fit), where ``sigma`` is the RMS error of a
    one-sample estimate (:func:`course_lib.lectures.mc_gradient.mc_gradient_std`).

    Args:
        n_samples: the sample sizes, ``(N,)`` (a list or tensor of positive numbers).
        errors: ``(N, S)`` distances ``||g_hat - grad J||``, ``S`` seeds per sample size.
        sigma: the one-sample RMS error for the reference line; ``None`` draws the line
            through the first RMS point instead.
        title: the figure's title.

    With ``n_samples`` and ``errors`` both ``None``, computes them on a five-action
    categorical policy (20 seeds per ``n``, ``n`` from 1 to 4096).

    Returns:
        The figure: the RMS line and the reference line (the dots are one scatter collection).
    """
    if n_samples is None and errors is None:
        from course_lib.lectures import mc_gradient

        logits = torch.tensor(_MC_LOGITS, dtype=torch.float64)
        rewards = torch.tensor(_MC_REWARDS, dtype=torch.float64)
        n_samples = [4**k for k in range(7)]
        errors = mc_gradient.mc_gradient_errors(logits, rewards, n_samples, n_seeds=20)
        sigma = mc_gradient.mc_gradient_std(logits, rewards)
    n = _curve("n_samples", n_samples)
    if (n <= 0).any():
        raise ValueError("n_samples: expected positive sample sizes")
    if errors is None:
        raise ValueError("errors: expected an (N, S) tensor of errors, one row per sample size, got None")
    errors = torch.as_tensor(errors, dtype=torch.float64)
    if errors.dim() == 1:
        errors = errors[:, None]
    if errors.dim() != 2 or errors.shape[0] != n.shape[0]:
        raise ValueError(
            f"errors: expected shape ({n.shape[0]}, seeds), one row per sample size, got {tuple(errors.shape)}"
        )
    rms = errors.pow(2).mean(dim=1).sqrt()  # (N,)
    if sigma is None:
        sigma = float(rms[0] * n[0].sqrt())
        label = r"$\propto 1/\sqrt{n}$ through the first point"
    else:
        sigma = _validate.require_positive("sigma", sigma)
        label = rf"exact prediction $\sigma/\sqrt{{n}}$, $\sigma$ = {sigma:.3g}"

    fig, ax = plt.subplots(figsize=FIGSIZE)
    seeds = errors.shape[1]
    xs = n[:, None].expand_as(errors).flatten()
    positive = errors.flatten() > 0  # a zero error cannot sit on a log axis
    ax.scatter(
        xs[positive].numpy(),
        errors.flatten()[positive].numpy(),
        s=8,
        color="tab:blue",
        alpha=0.25,
        linewidths=0,
        label=f"one estimate ({seeds} seeds per n)",
    )
    ax.plot(n.numpy(), rms.numpy(), "o-", color="tab:blue", linewidth=1.8, label="root mean square over seeds")
    ax.plot(n.numpy(), (sigma / n.sqrt()).numpy(), "--", color="black", linewidth=1.2, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of samples n (log scale)")
    ax.set_ylabel(r"error $\|\hat g - \nabla J\|$ (log scale)")
    ax.set_title(title, fontsize="medium")
    ax.legend(loc="lower left", fontsize="small", frameon=False)
    fig.tight_layout()
    return fig


def plot_mc_gradient_estimate(n_samples: int = 16, seed: int = 0, logits=None, rewards=None) -> Figure:
    """Bars: the exact policy gradient of a categorical policy next to one Monte-Carlo estimate.

    Args:
        n_samples: actions sampled for the estimate (a positive int).
        seed: seeds the sampling.
        logits: ``(V,)`` the policy's logits (a five-action example when ``None``).
        rewards: ``(V,)`` the reward of each action (the example's when ``None``).

    Returns:
        The figure: two bars per action (exact, estimate) and the policy's probabilities as text.
    """
    from course_lib.lectures import mc_gradient
    from course_lib.policy_gradient import expected_reward_gradient

    if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 1:
        raise ValueError(f"n_samples: expected a positive int, got {n_samples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed: expected an int, got {seed!r}")
    logits = torch.tensor(_MC_LOGITS, dtype=torch.float64) if logits is None else _curve("logits", logits)
    rewards = (
        torch.tensor(_MC_REWARDS, dtype=torch.float64)
        if rewards is None
        else _curve("rewards", rewards, "logits", logits)
    )
    exact = expected_reward_gradient(logits, rewards)  # (V,)
    estimate = mc_gradient.mc_policy_gradient(logits, rewards, n_samples, torch.Generator().manual_seed(seed))
    error = float(torch.linalg.vector_norm(estimate - exact))
    pi = torch.softmax(logits, dim=-1)

    V = logits.shape[0]
    x = torch.arange(V, dtype=torch.float64).numpy()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    ax.bar(x - 0.2, exact.numpy(), width=0.4, color="black", label=r"exact $\nabla J$")
    ax.bar(x + 0.2, estimate.numpy(), width=0.4, color="tab:orange", label=f"estimate from n = {n_samples}")
    ax.axhline(0.0, color="gray", linewidth=0.8)
    ax.set_xticks(x)
    ax.set_xticklabels(
        [f"a={a}\nπ={p:.2f}, r={r:g}" for a, (p, r) in enumerate(zip(pi.tolist(), rewards.tolist()))], fontsize="small"
    )
    # A fixed y range, so that the bars visibly settle as n grows under a slider.
    bound = 1.5 * float(exact.abs().max()) + 2.0 * mc_gradient.mc_gradient_std(logits, rewards) / n_samples**0.5
    ax.set_ylim(-max(bound, float(estimate.abs().max()) * 1.1), max(bound, float(estimate.abs().max()) * 1.1))
    ax.set_ylabel(r"$\partial J / \partial\,\mathrm{logit}_a$")
    ax.set_title(rf"n = {n_samples}, seed {seed}: error $\|\hat g - \nabla J\|$ = {error:.3g}", fontsize="medium")
    ax.legend(loc="upper left", fontsize="small", frameon=False)
    fig.tight_layout()
    return fig


def plot_pg_reward_curves(
    curves: dict | None = None,
    max_reward=None,
    ylabel: str = "mean sampled reward",
    title: str = "REINFORCE on the sorting task",
) -> Figure:
    """Reward against round: one thin line per seed and a thick line for their mean, per run label.

    Thin lines, not a band, because the point is often where single runs *stop*: a
    run stuck in a local optimum is a flat line below the maximum.

    Args:
        curves: ``{label: (seeds, rounds)}`` rewards, one row per seed (a tensor or
            nested lists). ``None`` draws a made-up example.
        max_reward: the highest reward possible, drawn as a dotted line (``None`` for none).
        ylabel: the y-axis label.
        title: the figure's title.

    Returns:
        The figure: for each label, one line per seed and one for the mean (plus the dotted line).
    """
    if curves is None:
        rounds = torch.arange(60, dtype=torch.float64)
        curves = {"example": torch.stack([2.5 + top * (1 - torch.exp(-rounds / 10)) for top in (0.8, 1.2, 1.5)])}
        max_reward = 5.0 if max_reward is None else max_reward
    if not isinstance(curves, dict) or not curves:
        raise ValueError(f"curves: expected a non-empty dict of label -> (seeds, rounds) rewards, got {curves!r}")
    fig, ax = plt.subplots(figsize=FIGSIZE)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:gray"]
    for i, (label, rows) in enumerate(curves.items()):
        rows = torch.as_tensor(rows, dtype=torch.float64)
        if rows.dim() == 1:
            rows = rows[None]
        if rows.dim() != 2 or rows.shape[1] < 1:
            raise ValueError(f"curves[{label!r}]: expected shape (seeds, rounds), got {tuple(rows.shape)}")
        color = colors[i % len(colors)]
        x = torch.arange(rows.shape[1]).numpy()
        seeds = rows.shape[0]
        for row in rows:
            ax.plot(x, row.numpy(), color=color, linewidth=0.8, alpha=0.35)
        ax.plot(
            x,
            rows.mean(0).numpy(),
            color=color,
            linewidth=2.0,
            label=f"{label}: mean of {seeds} seeds (thin: each seed)" if seeds > 1 else f"{label} (one seed)",
        )
    if max_reward is not None:
        _max_reward_line(ax, max_reward)
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize="medium")
    # Below the axes: flat curves can sit anywhere, and a legend inside would hide one.
    entries = len(curves) + (max_reward is not None)
    fig.set_figheight(FIGSIZE[1] + 0.25 * entries)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize="small", frameon=False)
    fig.tight_layout()
    return fig
