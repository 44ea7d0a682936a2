"""Shared figure settings, and chapter 00's plot (discount weights)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from course_lib import _validate

FIGSIZE = (6.4, 3.2)


def _horizon_marker(gamma: float, horizon: int) -> tuple[str, str]:
    """How the effective horizon 1 / (1 - gamma) is marked: (kind, legend label); kind is "line", "off" or "none"."""
    if gamma >= 1.0:
        return "none", r"$\gamma = 1$: no discount, every step counts fully"
    effective = 1.0 / (1.0 - gamma)
    steps = "step" if effective == 1.0 else "steps"
    label = rf"effective horizon $1/(1-\gamma)$ = {effective:.3g} {steps}"
    if effective > horizon:
        return "off", label + " (off the chart)"
    return "line", label


def plot_discount_weights(gamma: float = 0.9, horizon: int = 30) -> Figure:
    """Bar chart of the discount weights gamma^t, with the effective horizon 1 / (1 - gamma) marked.

    The weights sum to 1 / (1 - gamma) over an infinite episode: a reward that
    many steps away still counts, one much further away hardly does.

    Args:
        gamma: discount factor in [0, 1].
        horizon: number of steps drawn, t = 0, ..., horizon - 1 (a positive integer).

    Returns:
        The figure, one bar per step.
    """
    gamma = _validate.require_unit_interval("gamma", gamma)
    if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
        raise ValueError(f"horizon: expected a positive integer number of steps, got {horizon!r}")

    t = torch.arange(horizon, dtype=torch.float64)
    weights = gamma**t  # (horizon,): 0.0 ** 0 is 1, so gamma = 0 keeps the first bar

    fig, ax = plt.subplots(figsize=FIGSIZE)
    ax.bar(t.numpy(), weights.numpy(), width=0.8, color="tab:blue", label=r"weight $\gamma^t$ of $r_t$")
    kind, label = _horizon_marker(gamma, horizon)
    if kind == "line":
        # The line sits after the first 1/(1 - gamma) bars and stops below the legend.
        effective = 1.0 / (1.0 - gamma)
        ax.vlines(effective - 0.5, 0.0, 1.08, color="tab:red", linestyle="--", label=label, gid="horizon-line")
    elif kind == "off":
        ax.plot([], [], color="tab:red", linestyle="--", label=label, gid="horizon-off")
    else:
        ax.plot([], [], " ", label=label, gid="horizon-none")
    ax.set_xlim(-0.6, horizon - 0.4)
    # Head room above the tallest bar (gamma^0 = 1) for a one-row legend.
    ax.set_ylim(0.0, 1.3)
    ax.set_yticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    # The line is drawn after 1/(1 - gamma) bars (at x = 1/(1 - gamma) - 0.5): the steps it counts are left of it.
    ax.set_xlabel("step t (the horizon line counts the bars left of it)" if kind == "line" else "step t")
    ax.set_ylabel(r"$\gamma^t$")
    ax.set_title(rf"Discount weights for $\gamma$ = {gamma:.2f}")
    ax.legend(loc="upper center", ncol=2, frameon=False, fontsize="small")
    fig.tight_layout()
    return fig


def update_discount_weights(fig: Figure, gamma: float = 0.9, horizon: int = 30) -> list | None:
    """Redraw a figure of :func:`plot_discount_weights` for another gamma in place; return the artists changed.

    The bars take their new heights, the horizon line moves, the legend and the title get
    their new text. None when only a new figure will do: another horizon, or the horizon mark
    changing kind (a line on the chart, off the chart, no discount).
    """
    gamma = _validate.require_unit_interval("gamma", gamma)
    (ax,) = fig.axes
    bars = ax.containers[0].patches
    (marker,) = [a for a in ax.get_children() if str(a.get_gid()).startswith("horizon-")]
    kind, label = _horizon_marker(gamma, horizon)
    if len(bars) != horizon or marker.get_gid() != f"horizon-{kind}":
        return None
    legend = ax.get_legend()
    weights = (gamma ** torch.arange(horizon, dtype=torch.float64)).tolist()
    for bar, weight in zip(bars, weights):
        bar.set_height(weight)
    if kind == "line":
        x = 1.0 / (1.0 - gamma) - 0.5
        marker.set_segments([[(x, 0.0), (x, 1.08)]])
    for text in legend.get_texts():
        if text.get_text() == marker.get_label():
            text.set_text(label)
    marker.set_label(label)
    ax.set_title(rf"Discount weights for $\gamma$ = {gamma:.2f}")
    # The bottom spine is drawn over the bars' feet: it moves with them.
    return [*bars, marker, legend, ax.title, ax.spines["bottom"]]


def _max_reward_line(ax, max_reward) -> None:
    """A dotted horizontal line at the largest reward possible (the reward curves of chapters 02 and 03)."""
    ax.axhline(
        _validate._as_float("max_reward", max_reward),
        color="black",
        linestyle=":",
        linewidth=1,
        label="highest possible reward",
    )


def _curve(name: str, y, like_name: str | None = None, like: torch.Tensor | None = None) -> torch.Tensor:
    """A 1-D curve (tensor or list of numbers) as float64; with ``like``, as many points as it has."""
    if isinstance(y, torch.Tensor):
        y = y.detach().double()
    else:
        try:
            y = torch.as_tensor(y, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"{name}: expected a 1-D tensor or a list of numbers, got {type(y).__name__}") from None
    if y.dim() != 1 or y.numel() < 1:
        raise ValueError(f"{name}: expected a non-empty 1-D curve, got shape {tuple(y.shape)}")
    if like is not None:
        _validate.require_shape(name, y, like.shape, like=like_name)
    return y
