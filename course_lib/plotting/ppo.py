"""Plots of Chapter 05: PPO."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from course_lib import _validate


def ppo_clip_curves(clip_eps: float = 0.2, ratio_max: float = 2.0, n_points: int = 301) -> dict:
    """The clipped objective and its derivative in the ratio, for adv = +1 and adv = -1, by autograd.

    The objective is ``min(ratio * adv, clip(ratio, 1 - eps, 1 + eps) * adv)``, minus
    :func:`course_lib.ppo.clipped_surrogate` (which returns the loss). The ratio enters as
    ``logp = log(ratio)`` with ``logp_old = 0``, so ``exp(logp - logp_old)`` is the ratio
    itself and autograd gives d(objective)/d(ratio) directly.

    Returns:
        ``{"ratio": (P,), "objective": {+1: (P,), -1: (P,)}, "gradient": {+1: (P,), -1: (P,)}}``.
    """
    from course_lib.ppo import clipped_surrogate

    clip_eps = _validate.require_positive("clip_eps", clip_eps)
    ratio_max = _validate.require_positive("ratio_max", ratio_max)
    if isinstance(n_points, bool) or not isinstance(n_points, int) or n_points < 2:
        raise ValueError(f"n_points: expected an int >= 2, got {n_points!r}")
    ratios = torch.linspace(0.0, ratio_max, n_points + 1, dtype=torch.float64)[1:]  # (P,): log(0) would be -inf
    # Both signs in one pass: row 0 has adv = +1, row 1 adv = -1; each entry depends on its own ratio only.
    ratio = torch.stack([ratios, ratios]).requires_grad_(True)  # (2, P)
    adv = torch.tensor([[1.0], [-1.0]], dtype=torch.float64).expand_as(ratio)  # (2, P)
    objective = -clipped_surrogate(torch.log(ratio), torch.zeros_like(ratio), adv, clip_eps)  # (2, P)
    (gradient,) = torch.autograd.grad(objective.sum(), ratio)  # (2, P)
    objective = objective.detach()
    return {
        "ratio": ratios,
        "objective": {+1: objective[0], -1: objective[1]},
        "gradient": {+1: gradient[0], -1: gradient[1]},
    }


def plot_ppo_clip(clip_eps: float = 0.2) -> Figure:
    """PPO's clipped objective (left) and its gradient in the ratio (right), for A > 0 and A < 0.

    The shaded band is the trust region [1 - eps, 1 + eps]. For A > 0 the objective stops
    rising at 1 + eps and its gradient drops to 0 there; for A < 0 the same happens below
    1 - eps. Outside the band, on the side the update would like to go, the sample stops
    pushing.

    Args:
        clip_eps: the clip range eps (positive).

    Returns:
        The figure: two panels, each with one line for A = +1 and one for A = -1.
    """
    curves = ppo_clip_curves(clip_eps)
    x = curves["ratio"].numpy()
    # A widget redraws this on every slider step, so it is kept cheap: plain text (no mathtext), few fixed
    # ticks, fixed margins (no tight_layout), one title. Text layout is most of the cost of a redraw.
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.0))
    styles = {+1: ("tab:blue", "A = +1 (good action)"), -1: ("tab:red", "A = -1 (bad action)")}
    for ax, key, ylabel in (
        (axes[0], "objective", "objective min(rA, clip(r)A)"),
        (axes[1], "gradient", "d objective / d r"),
    ):
        ax.axvspan(1.0 - clip_eps, 1.0 + clip_eps, color="0.92", zorder=0, gid="trust region")
        ax.axvline(1.0, color="0.6", linewidth=0.8, linestyle=":")
        ax.axhline(0.0, color="0.6", linewidth=0.8)
        for sign, (color, label) in styles.items():
            ax.plot(x, curves[key][sign].numpy(), color=color, linewidth=2, label=label, gid=f"{key} {sign:+d}")
        ax.set_xlim(0.0, float(x[-1]))
        ax.set_xticks([0.0, 0.5, 1.0, 1.5, 2.0])
        ax.set_xlabel("ratio r = π / π_old")
        ax.set_ylabel(ylabel)
    axes[0].set_ylim(-2.1, 2.1)  # head room for the legend above the A > 0 line
    axes[0].set_yticks([-2.0, -1.0, 0.0, 1.0, 2.0])
    axes[1].set_ylim(-1.3, 1.3)
    axes[1].set_yticks([-1.0, 0.0, 1.0])
    axes[0].legend(loc="upper left", fontsize="small", frameon=False)
    fig.suptitle(_ppo_clip_title(clip_eps), fontsize="medium")
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.16, top=0.88, wspace=0.26)
    return fig


def _ppo_clip_title(clip_eps: float) -> str:
    return f"clip_eps = {clip_eps:.2f}: the trust region [{1 - clip_eps:.2f}, {1 + clip_eps:.2f}] is shaded"


def update_ppo_clip(fig: Figure, clip_eps: float = 0.2) -> list:
    """Redraw a figure of :func:`plot_ppo_clip` for another clip range in place; return the artists changed.

    The shaded band, the four curves and the title move; the lines at r = 1 and at 0, the
    spines and the legend, which matplotlib draws over the band and the curves, are redrawn
    with them.
    """
    curves = ppo_clip_curves(clip_eps)
    changed = []
    for ax in fig.axes:
        for artist in [*ax.patches, *ax.lines]:
            gid = artist.get_gid() or ""
            if gid == "trust region":
                artist.set_x(1.0 - clip_eps)
                artist.set_width(2 * clip_eps)
            elif gid.startswith(("objective", "gradient")):
                key, sign = gid.split()
                artist.set_ydata(curves[key][int(sign)].numpy())
        # Everything matplotlib draws over the band: all the lines, the spines, the legend.
        changed += [*ax.patches, *ax.lines, *ax.spines.values(), *([ax.get_legend()] if ax.get_legend() else [])]
    fig._suptitle.set_text(_ppo_clip_title(clip_eps))
    return [*changed, fig._suptitle]


_PPO_METRICS = {
    "mean_return": "mean episode return",
    "loss": "total loss",
    "policy_loss": "policy loss (clipped surrogate)",
    "value_loss": "value loss",
    "entropy": "entropy (nats)",
    "approx_kl": "approx KL(old || new)",
    "clip_fraction": "clip fraction",
    "explained_variance": "explained variance",
    "kl": "KL to the reference, per step",
}


def _history_curve(history, metric: str, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)`` of one metric of a PPO history (an object with list fields, or a dict of lists)."""
    get = history.get if isinstance(history, dict) else (lambda key, default=None: getattr(history, key, default))
    y = get(metric)
    if y is None:
        raise ValueError(f"{name}: has no {metric!r} (expected a PPOHistory or a dict of lists)")
    y = torch.as_tensor(list(y), dtype=torch.float64)
    steps = get("steps")
    x = torch.as_tensor(list(steps), dtype=torch.float64) if steps else torch.arange(1, len(y) + 1, dtype=torch.float64)
    if y.dim() != 1 or len(y) < 1 or x.shape != y.shape:
        raise ValueError(f"{name}: expected {metric!r} and 'steps' as two lists of the same non-zero length")
    return x, y


def _plot_finite(ax, x, y, **kwargs):
    finite = torch.isfinite(y)  # no episode ended in some rollouts: skip those points, join the rest
    ax.plot(x[finite].numpy(), y[finite].numpy(), **kwargs)


def plot_ppo_diagnostics(history, title: str = "PPO diagnostics over a training run") -> Figure:
    """Eight panels over a run: return, the three losses' parts, entropy, approx KL, clip fraction, explained variance.

    Args:
        history: a :class:`course_lib.trainers.ppo_trainer.PPOHistory` (or a dict of its lists).
        title: the figure's title.

    Returns:
        The figure: a 2 x 4 grid, one line per panel. The last panel shows the KL to the
        reference when the run had one, the total loss otherwise.
    """
    _, kl = _history_curve(history, "kl", "history") if _has(history, "kl") else (None, None)
    last = "kl" if kl is not None and torch.isfinite(kl).any() else "loss"
    metrics = (
        "mean_return",
        "policy_loss",
        "value_loss",
        "entropy",
        "approx_kl",
        "clip_fraction",
        "explained_variance",
        last,
    )
    curves = [_history_curve(history, metric, "history") for metric in metrics]  # checked before drawing
    fig, axes = plt.subplots(2, 4, figsize=(12.0, 5.2), sharex=True)
    for ax, metric, (x, y) in zip(axes.flat, metrics, curves):
        _plot_finite(ax, x, y, color="tab:blue", linewidth=1.5)
        ax.set_title(_PPO_METRICS[metric], fontsize="medium")
        ax.grid(alpha=0.3)
    axes[1, 2].set_ylim(-1.05, 1.05)  # explained variance: 1 is perfect, 0 no better than a constant
    for ax in axes[1]:
        ax.set_xlabel("environment steps")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def _has(history, key: str) -> bool:
    return key in history if isinstance(history, dict) else hasattr(history, key)


def plot_ppo_runs(histories: dict, metrics=("mean_return",), title: str | None = None) -> Figure:
    """One panel per metric, one line per run, against environment steps: to compare PPO runs.

    Args:
        histories: ``{label: PPOHistory or dict of lists}``.
        metrics: names of history fields (``"mean_return"``, ``"kl"``, ``"explained_variance"``, ...).
        title: the figure's title (none when None).

    Returns:
        The figure: ``len(metrics)`` panels with ``len(histories)`` lines each.
    """
    if not isinstance(histories, dict) or not histories:
        raise ValueError(f"histories: expected a non-empty dict of label -> history, got {type(histories).__name__}")
    if isinstance(metrics, str):
        metrics = (metrics,)
    metrics = tuple(metrics)
    if not metrics:
        raise ValueError("metrics: expected at least one metric name")
    for metric in metrics:
        _validate.require_choice("metrics", metric, tuple(_PPO_METRICS))
    # Every curve is read (and checked) before the figure exists, so a bad history leaves no figure behind.
    curves = {
        metric: [_history_curve(history, metric, f"histories[{label!r}]") for label, history in histories.items()]
        for metric in metrics
    }
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.6 * len(metrics) + 0.6, 3.4), squeeze=False)
    colors = ["tab:blue", "tab:red", "tab:orange", "tab:green", "tab:purple", "tab:gray"]
    for ax, metric in zip(axes[0], metrics):
        for i, (label, (x, y)) in enumerate(zip(histories, curves[metric])):
            _plot_finite(ax, x, y, color=colors[i % len(colors)], linewidth=1.8, label=str(label))
        ax.set_xlabel("environment steps")
        ax.set_ylabel(_PPO_METRICS[metric])
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize="small", frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
