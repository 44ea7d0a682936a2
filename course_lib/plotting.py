"""The course's plots: plain functions that take numbers or tensors and return a Figure.

The convention every chapter follows when it adds a plot here:

- one function per picture, named ``plot_<what>``, with defaults that draw
  something meaningful when called with no arguments;
- it validates its arguments like the rest of ``course_lib`` (``ValueError``
  naming the argument);
- it creates its own figure with ``plt.subplots`` (never draws on the current
  one) and **returns** it; it never calls ``plt.show()``. A notebook cell that
  ends with ``fig = plot_...()`` shows it once; a widget in
  :mod:`course_lib.widgets` displays it and closes it;
- keyword arguments only for the knobs a slider may turn, so
  ``slider_plot(plot_fn, gamma=FloatSlider(...))`` can bind to them by name;
- small and quick: a widget redraws it on every slider step.
"""

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
