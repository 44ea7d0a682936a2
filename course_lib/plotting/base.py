"""Shared figure settings, and chapter 00's plot (discount weights)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from course_lib import _validate

FIGSIZE = (6.4, 3.2)


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
    if gamma < 1.0:
        effective = 1.0 / (1.0 - gamma)
        steps = "step" if effective == 1.0 else "steps"
        label = rf"effective horizon $1/(1-\gamma)$ = {effective:.3g} {steps}"
        if effective <= horizon:
            # The line sits after the first 1/(1 - gamma) bars and stops below the legend.
            ax.vlines(effective - 0.5, 0.0, 1.08, color="tab:red", linestyle="--", label=label)
        else:
            ax.plot([], [], color="tab:red", linestyle="--", label=label + " (off the chart)")
    else:
        ax.plot([], [], " ", label=r"$\gamma = 1$: no discount, every step counts fully")
    ax.set_xlim(-0.6, horizon - 0.4)
    # Head room above the tallest bar (gamma^0 = 1) for a one-row legend.
    ax.set_ylim(0.0, 1.3)
    ax.set_yticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_xlabel("step t")
    ax.set_ylabel(r"$\gamma^t$")
    ax.set_title(rf"Discount weights for $\gamma$ = {gamma:.2f}")
    ax.legend(loc="upper center", ncol=2, frameon=False, fontsize="small")
    fig.tight_layout()
    return fig


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
