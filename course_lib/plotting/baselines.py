"""Plots of Chapter 03: baselines and variance."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from course_lib import _validate
from course_lib.plotting.base import FIGSIZE, _max_reward_line


def plot_baseline_variances(
    variances: dict | None = None, exact: dict | None = None, title: str = "Gradient variance with each baseline"
) -> Figure:
    """Horizontal bars: the total variance of the REINFORCE estimate with each baseline, numbers printed.

    Args:
        variances: ``{baseline name: measured total variance}`` (the trace of the
            covariance of per-sample gradients), drawn top to bottom in its order.
            ``None`` draws the two-state example of CS336 lecture 17 (no baseline,
            then the baselines 10 and 1), computed exactly.
        exact: optional ``{name: exact total variance}`` for the same names, printed beside the bars.
        title: the figure's title.

    Returns:
        The figure, one bar per baseline; when the values span more than a factor of 30
        the axis is logarithmic and each baseline is a dot (a bar's length would mislead
        there), labelled with its ratio to the smallest.
    """
    if variances is None:
        variances, exact = _two_state_variances(), None
    if not isinstance(variances, dict) or not variances:
        raise ValueError(f"variances: expected a non-empty dict of name -> variance, got {variances!r}")
    values = {str(k): _validate._as_float(f"variances[{k!r}]", v) for k, v in variances.items()}
    if min(values.values()) < 0:
        raise ValueError("variances: expected non-negative variances")
    if exact is not None:
        if not isinstance(exact, dict) or set(map(str, exact)) != set(values):
            raise ValueError(f"exact: expected a dict with the same names as variances, {sorted(values)}")
        exact = {str(k): _validate._as_float(f"exact[{k!r}]", v) for k, v in exact.items()}

    names = list(values)
    heights = [values[n] for n in names]
    fig, ax = plt.subplots(figsize=(FIGSIZE[0], 0.45 * len(names) + 1.3))
    y = list(range(len(names)))[::-1]  # first name on top
    positive = [h for h in heights if h > 0]
    log = bool(positive) and max(positive) / min(positive) > 30
    if log:
        # A bar on a log axis starts at an arbitrary left edge, so its length misleads (a ratio of 100
        # can look like 2.5). Dots on a log axis show positions only; the text gives the ratios.
        ax.set_xscale("log")
        ax.set_xlim(min(positive) / 2, max(positive) * 40)  # room on the right for the printed numbers
        ax.plot([h if h > 0 else min(positive) / 2 for h in heights], y, "o", color="tab:blue", markersize=8)
        ax.grid(axis="x", which="major", alpha=0.4)
    else:
        ax.barh(y, heights, color="tab:blue", height=0.6)
        ax.set_xlim(0, max(heights) * 1.6 if max(heights) > 0 else 1.0)
    smallest = min(positive) if positive else 0.0
    for yi, name in zip(y, names):
        text = f"{values[name]:.3g}" + (f" measured, {exact[name]:.3g} exact" if exact else "")
        if log and values[name] > 0:
            text += f"  ({values[name] / smallest:.3g}x the smallest)"
        ax.text(values[name] if values[name] > 0 else ax.get_xlim()[0], yi, "  " + text, va="center", fontsize="small")
    ax.set_yticks(y)
    ax.set_yticklabels(names)
    ax.set_xlabel("total variance of one gradient estimate, tr Cov(g)" + ("  (log scale)" if log else ""))
    ax.set_title(title)
    fig.tight_layout()
    return fig


def _two_state_variances() -> dict:
    """Exact total variances for the two-state example (uniform policy): no baseline, and b = 10, 1."""
    from course_lib.lectures import variance

    bandit = variance.two_state_bandit()
    logits = torch.zeros(2, 2, dtype=torch.float64)
    outcomes = variance.bandit_outcomes(bandit, logits)
    probs, rewards = outcomes["probs"].flatten(), outcomes["rewards"].flatten()  # (S * K,)
    scores = outcomes["scores"].flatten(0, 1)  # (S * K, P)
    per_state = torch.tensor([10.0, 1.0], dtype=torch.float64)[outcomes["states"].flatten()]
    return {
        "no baseline": variance.exact_moments(probs, variance.baselined_estimates(rewards, scores, 0 * rewards))[1],
        "b(s1) = 10, b(s2) = 1": variance.exact_moments(
            probs, variance.baselined_estimates(rewards, scores, per_state)
        )[1],
    }


LINESTYLES = ("-", "--", (0, (1, 1.5)), "-.")


def plot_reward_curves_by_mode(
    curves: dict | None = None,
    band: str = "minmax",
    max_reward: float | None = None,
    ylabel: str = "mean reward of the sampled responses",
) -> Figure:
    """Mean reward against round for each deltas mode, averaged over seeds, with a band across seeds.

    Args:
        curves: ``{mode: [seeds, rounds] tensor}`` of mean rewards (one row per seed).
            ``None`` draws a made-up example with the three modes' names.
        band: ``"minmax"`` shades from the worst to the best seed at each round;
            ``"std"`` shades the mean plus or minus one standard deviation across seeds
            (Bessel-corrected, as ``torch.std``).
        max_reward: draws the highest reward possible as a dotted line.
        ylabel: the y-axis label.

    Returns:
        The figure: one line (the mean over seeds) and one band per mode.
    """
    if curves is None:
        rounds = torch.arange(50, dtype=torch.float64)
        g = torch.Generator().manual_seed(0)
        curves = {
            mode: 2.0
            + rise * (1 - torch.exp(-rounds / 15))
            + 0.1 * torch.randn(3, 50, generator=g, dtype=torch.float64)
            for mode, rise in (("rewards", 1.0), ("centered_rewards", 1.8), ("normalized_rewards", 1.7))
        }
    if not isinstance(curves, dict) or not curves:
        raise ValueError(f"curves: expected a non-empty dict of mode -> (seeds, rounds) tensor, got {curves!r}")
    _validate.require_choice("band", band, ("minmax", "std"))
    fig, ax = plt.subplots(figsize=FIGSIZE)
    colors = ["tab:gray", "tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    for i, (mode, rows) in enumerate(curves.items()):
        rows = torch.as_tensor(rows, dtype=torch.float64)
        if rows.dim() != 2 or rows.shape[1] < 1:
            raise ValueError(f"curves[{mode!r}]: expected shape (seeds, rounds), got {tuple(rows.shape)}")
        x = torch.arange(rows.shape[1]).numpy()
        mean = rows.mean(0)
        if band == "minmax":
            low, high = rows.min(0).values, rows.max(0).values
        else:
            spread = rows.std(0) if rows.shape[0] > 1 else torch.zeros_like(mean)
            low, high = mean - spread, mean + spread
        color = colors[i % len(colors)]
        # Curves that coincide must stay visible: each mode gets its own dash pattern, and later ones are thinner.
        ax.plot(
            x,
            mean.numpy(),
            color=color,
            linewidth=2.6 - 0.6 * (i % 3),
            linestyle=LINESTYLES[i % len(LINESTYLES)],
            label=f"{mode} (mean of {rows.shape[0]} seeds)",
        )
        ax.fill_between(x, low.numpy(), high.numpy(), color=color, alpha=0.2, linewidth=0)
    if max_reward is not None:
        _max_reward_line(ax, max_reward)
    what = "min to max over seeds" if band == "minmax" else "mean ± 1 std over seeds"
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    ax.set_title("REINFORCE on the sorting task with each kind of deltas", fontsize="medium")
    ax.legend(
        loc="lower right",
        fontsize="x-small",
        frameon=False,
        title=f"line: mean; band: {what}",
        title_fontsize="x-small",
    )
    fig.tight_layout()
    return fig


def plot_baseline_variance(group_size: int = 8, baseline: str = "leave_one_out", table=None) -> Figure:
    """Gradient variance against group size for every baseline, and the spread of the chosen one's estimates.

    Left: the variance per response, ``G * tr Cov(g_G)`` for the group estimate ``g_G``
    (flat when the baseline does not come from the group), one line per baseline,
    the chosen one bold, the chosen ``G`` marked. Right: the chosen baseline's group
    estimates at that ``G``, projected on the true gradient's direction, with the true
    gradient's length marked: a biased baseline shifts the histogram.

    Args:
        group_size: ``G``, one of ``table.group_sizes`` (2 to 32 by default).
        baseline: one of ``course_lib.lectures.variance.BASELINES``.
        table: a ``course_lib.lectures.variance.GroupVarianceTable``; ``None`` uses the default one,
            computed once per process (about a second), so redraws only plot.

    Returns:
        The figure (two panels).
    """
    from course_lib.lectures import variance

    table = variance.default_group_variance_table() if table is None else table
    if not isinstance(table, variance.GroupVarianceTable):
        raise ValueError(f"table: expected a GroupVarianceTable, got {type(table).__name__}")
    _validate.require_choice("baseline", baseline, variance.BASELINES)
    if group_size not in table.group_sizes:
        raise ValueError(
            f"group_size: expected one of the precomputed group sizes "
            f"{table.group_sizes[0]}..{table.group_sizes[-1]}, got {group_size!r}"
        )
    j = table.group_sizes.index(group_size)
    colors = dict(zip(variance.BASELINES, ["tab:gray", "tab:orange", "tab:blue", "tab:green", "tab:red"]))

    fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 3.8), gridspec_kw={"width_ratios": [1.25, 1]})
    for name in variance.BASELINES:
        chosen = name == baseline
        left.plot(
            table.group_sizes,
            table.variance[name].numpy(),
            color=colors[name],
            linewidth=2.6 if chosen else 1.0,
            alpha=1.0 if chosen else 0.55,
            label=variance.BASELINE_LABELS[name],
        )
    left.axvline(group_size, color="black", linestyle=":", linewidth=1)
    left.plot([group_size], [float(table.variance[baseline][j])], "o", color=colors[baseline])
    left.set_yscale("log")
    # Plain numbers on the log axis (0.2, 0.5, 1), not 2 x 10^-1.
    from matplotlib import ticker

    left.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    left.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    left.yaxis.set_minor_formatter(ticker.NullFormatter())
    left.set_xlabel("group size G (responses per prompt)")
    left.set_ylabel("variance per response, G · tr Cov (log)")
    left.set_title(
        f"{variance.BASELINE_LABELS[baseline]}: {float(table.variance[baseline][j]):.3g} at G = {group_size}",
        fontsize="medium",
    )
    left.legend(fontsize="x-small", loc="center right", framealpha=0.9)

    proj = table.projections[baseline][j]  # (num_groups,)
    # Same bins at every G (those of the widest spread, at the smallest G): the histogram narrows as G grows.
    widest = table.projections[baseline][0]
    low = min(float(widest.quantile(0.005)), 0.0)
    high = max(float(widest.quantile(0.995)), 2 * table.exact_norm)
    right.hist(
        proj.clamp(low, high).numpy(), bins=torch.linspace(low, high, 41).numpy(), color=colors[baseline], alpha=0.7
    )
    right.set_xlim(low, high)
    right.axvline(table.exact_norm, color="black", linewidth=1.5, label=f"true gradient, |∇J| = {table.exact_norm:.3g}")
    right.axvline(
        float(proj.mean()),
        color=colors[baseline],
        linestyle="--",
        linewidth=1.5,
        label=f"mean of the estimates = {float(proj.mean()):.3g}",
    )
    right.set_xlabel("group estimate along the true gradient's direction")
    right.set_ylabel(f"count (of {proj.numel()} groups)")
    right.set_title(f"{proj.numel()} group estimates at G = {group_size}", fontsize="medium")
    right.legend(fontsize="x-small", loc="upper right", framealpha=0.9)
    fig.tight_layout()
    return fig
