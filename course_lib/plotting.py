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


# ---------------------------------------------------------------------------
# Chapter 04: GAE
# ---------------------------------------------------------------------------


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
    ax.bar(n.numpy(), weights.numpy(), width=0.8, color="tab:blue",
           label=r"weight $(1-\lambda)\lambda^{n-1}$ of $\hat A^{(n)}$")
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
    from course_lib import chain

    key = (n_episodes, seed)
    if key not in _CHAIN_EPISODES:
        _CHAIN_EPISODES[key] = chain.sample_episodes(chain.Chain(), n_episodes, seed=seed)
    return _CHAIN_EPISODES[key]


def plot_gae_on_chain(gamma: float = 0.95, lam: float = 0.5, noise: float = 0.3, n_episodes: int = 300,
                      seed: int = 0) -> Figure:
    """GAE estimates beside the true advantages on :class:`course_lib.chain.Chain`, for one fixed batch.

    For each state and action: the truth ``Q(s, a) - V_hat(s)`` (the true advantage seen
    from the critic's baseline, see :mod:`course_lib.chain`) as a line, and the mean
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
    from course_lib import chain

    gamma = _validate.require_unit_interval("gamma", gamma)
    lam = _validate.require_unit_interval("lam", lam)
    ch = chain.Chain()
    # One thread for these small tensors: a second one only adds waiting, badly so on a busy machine,
    # and the widget redraws on every slider step.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        episodes = _chain_batch(n_episodes, seed)
        critic = chain.imperfect_critic(ch, gamma, noise=noise, seed=seed)
        stats = chain.gae_statistics(ch, episodes, critic, gamma, lam)
    finally:
        torch.set_num_threads(threads)

    s = torch.arange(ch.n_states, dtype=torch.float64).numpy()
    fig, ax = plt.subplots(figsize=(7.2, 3.6))
    for a, name, color, shift in ((chain.RIGHT, "right", "tab:blue", -0.1), (chain.LEFT, "left", "tab:orange", 0.1)):
        ax.plot(s, stats["target"][:, a].numpy(), color=color, marker="D", markersize=4, linewidth=1.5,
                label=f"truth Q(s, {name}) − V̂(s)")
        ax.errorbar(s + shift, stats["mean"][:, a].numpy(), yerr=stats["std"][:, a].numpy(), color=color,
                    fmt="o", markersize=4, capsize=3, alpha=0.75, label=f"GAE mean ± std, {name}")
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.set_ylim(-1.5, 1.9)  # fixed, so what moves with the sliders is the estimate, not the axis
    ax.set_yticks([-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5])
    ax.set_xticks(s)
    ax.set_xlabel(f"state s (episodes start at s = {ch.start}; off either end they stop)")
    ax.set_ylabel("advantage")
    # Plain text, no mathtext and no tight_layout: each costs tens of milliseconds per redraw.
    ax.set_title(f"GAE with γ = {gamma:.2f}, λ = {lam:.2f} ({n_episodes} episodes):  "
                 f"bias² {stats['bias2']:.3f} + variance {stats['variance']:.3f} = MSE {stats['mse']:.3f}",
                 fontsize="medium")
    ax.legend(loc="upper center", ncol=2, frameon=False, fontsize="small")
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.14, top=0.9)
    return fig


def plot_bias_variance(lams, mse, bias2, variance, exact_bias2=None) -> Figure:
    """Mean squared error, bias^2 and variance of the GAE estimate against lambda.

    Args:
        lams: ``(L,)`` the lambdas.
        mse, bias2, variance: ``(L,)`` each, as :func:`course_lib.chain.bias_variance` returns them.
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
    ax.plot(x, mse.numpy(), color="black", linewidth=2, marker="o", markersize=3, label="MSE = bias² + variance")
    ax.plot(x, bias2.numpy(), color="tab:red", marker="o", markersize=3, label="bias² (sampled)")
    ax.plot(x, variance.numpy(), color="tab:blue", marker="o", markersize=3, label="variance")
    if exact_bias2 is not None:
        exact_bias2 = _curve("exact_bias2", exact_bias2, "lams", lams)
        ax.plot(x, exact_bias2.numpy(), color="tab:red", linestyle="--", linewidth=1, label="bias² (exact)")
    best = int(mse.argmin())
    ax.axvline(x[best], color="0.6", linestyle=":", linewidth=1)
    ax.annotate(rf"least MSE at $\lambda$ = {x[best]:.2f}", (x[best], float(mse[best])),
                xytext=(0, 12), textcoords="offset points", ha="center", fontsize="small")
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
    ax.plot(k.numpy(), error_terminal.numpy(), color="tab:red", marker="o", markersize=4,
            label="cut treated as terminal (wrong)")
    ax.plot(k.numpy(), error_bootstrap.numpy(), color="tab:green", marker="o", markersize=4,
            label=r"bootstrap from $V$(last state) (right)")
    if gamma_lam is not None:
        ax.plot(k.numpy(), (error_terminal[0] * gamma_lam**k).numpy(), color="0.4", linestyle=":",
                label=r"first error $\times (\gamma\lambda)^k$")
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
    ax.legend(loc="upper left", frameon=False, fontsize="small")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------
# Chapter 03: baselines and variance
# ---------------------------------------------------------------------------


def plot_baseline_variances(variances: dict | None = None, exact: dict | None = None,
                            title: str = "Gradient variance with each baseline") -> Figure:
    """Horizontal bars: the total variance of the REINFORCE estimate with each baseline, numbers printed.

    Args:
        variances: ``{baseline name: measured total variance}`` (the trace of the
            covariance of per-sample gradients), drawn top to bottom in its order.
            ``None`` draws the two-state example of CS336 lecture 17 (no baseline,
            then the baselines 10 and 1), computed exactly.
        exact: optional ``{name: exact total variance}`` for the same names, printed beside the bars.
        title: the figure's title.

    Returns:
        The figure, one bar per baseline; the axis is logarithmic when the bars span
        more than a factor of 30.
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
    ax.barh(y, heights, color="tab:blue", height=0.6)
    positive = [h for h in heights if h > 0]
    log = bool(positive) and max(positive) / min(positive) > 30
    if log:
        ax.set_xscale("log")
        ax.set_xlim(min(positive) / 2, max(positive) * 12)  # room on the right for the printed numbers
    else:
        ax.set_xlim(0, max(heights) * 1.6 if max(heights) > 0 else 1.0)
    for yi, name in zip(y, names):
        text = f"{values[name]:.3g}" + (f" measured, {exact[name]:.3g} exact" if exact else "")
        ax.text(values[name] if values[name] > 0 else ax.get_xlim()[0], yi, "  " + text, va="center",
                fontsize="small")
    ax.set_yticks(y)
    ax.set_yticklabels(names)
    ax.set_xlabel("total variance of one gradient estimate, tr Cov(g)" + ("  (log scale)" if log else ""))
    ax.set_title(title)
    fig.tight_layout()
    return fig


def _two_state_variances() -> dict:
    """Exact total variances for the two-state example (uniform policy): no baseline, and b = 10, 1."""
    from course_lib import variance

    bandit = variance.two_state_bandit()
    logits = torch.zeros(2, 2, dtype=torch.float64)
    outcomes = variance.bandit_outcomes(bandit, logits)
    probs, rewards = outcomes["probs"].flatten(), outcomes["rewards"].flatten()  # (S * K,)
    scores = outcomes["scores"].flatten(0, 1)  # (S * K, P)
    per_state = torch.tensor([10.0, 1.0], dtype=torch.float64)[outcomes["states"].flatten()]
    return {
        "no baseline": variance.exact_moments(probs, variance.baselined_estimates(rewards, scores, 0 * rewards))[1],
        "b(s1) = 10, b(s2) = 1": variance.exact_moments(probs, variance.baselined_estimates(rewards, scores,
                                                                                              per_state))[1],
    }


def plot_reward_curves_by_mode(curves: dict | None = None, band: str = "minmax", max_reward: float | None = None,
                               ylabel: str = "mean reward of the sampled responses") -> Figure:
    """Mean reward against epoch for each deltas mode, averaged over seeds, with a band across seeds.

    Args:
        curves: ``{mode: [seeds, epochs] tensor}`` of mean rewards (one row per seed).
            ``None`` draws a made-up example with the three modes' names.
        band: ``"minmax"`` shades from the worst to the best seed at each epoch;
            ``"std"`` shades the mean plus or minus one standard deviation across seeds
            (Bessel-corrected, as ``torch.std``).
        max_reward: draws the highest reward possible as a dotted line.
        ylabel: the y-axis label.

    Returns:
        The figure: one line (the mean over seeds) and one band per mode.
    """
    if curves is None:
        epochs = torch.arange(50, dtype=torch.float64)
        g = torch.Generator().manual_seed(0)
        curves = {mode: 2.0 + rise * (1 - torch.exp(-epochs / 15)) + 0.1 * torch.randn(3, 50, generator=g,
                                                                                        dtype=torch.float64)
                  for mode, rise in (("rewards", 1.0), ("centered_rewards", 1.8), ("normalized_rewards", 1.7))}
    if not isinstance(curves, dict) or not curves:
        raise ValueError(f"curves: expected a non-empty dict of mode -> (seeds, epochs) tensor, got {curves!r}")
    _validate.require_choice("band", band, ("minmax", "std"))
    fig, ax = plt.subplots(figsize=FIGSIZE)
    colors = ["tab:gray", "tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    for i, (mode, rows) in enumerate(curves.items()):
        rows = torch.as_tensor(rows, dtype=torch.float64)
        if rows.dim() != 2 or rows.shape[1] < 1:
            raise ValueError(f"curves[{mode!r}]: expected shape (seeds, epochs), got {tuple(rows.shape)}")
        x = torch.arange(rows.shape[1]).numpy()
        mean = rows.mean(0)
        if band == "minmax":
            low, high = rows.min(0).values, rows.max(0).values
        else:
            spread = rows.std(0) if rows.shape[0] > 1 else torch.zeros_like(mean)
            low, high = mean - spread, mean + spread
        color = colors[i % len(colors)]
        ax.plot(x, mean.numpy(), color=color, linewidth=1.8, label=f"{mode} (mean of {rows.shape[0]} seeds)")
        ax.fill_between(x, low.numpy(), high.numpy(), color=color, alpha=0.2, linewidth=0)
    if max_reward is not None:
        ax.axhline(_validate._as_float("max_reward", max_reward), color="black", linestyle=":", linewidth=1,
                   label="highest possible reward")
    what = "min to max over seeds" if band == "minmax" else "mean ± 1 std over seeds"
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    ax.set_title("REINFORCE on the sorting task with each kind of deltas", fontsize="medium")
    ax.legend(loc="lower right", fontsize="x-small", frameon=False, title=f"line: mean; band: {what}",
              title_fontsize="x-small")
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
        baseline: one of ``course_lib.variance.BASELINES``.
        table: a ``course_lib.variance.GroupVarianceTable``; ``None`` uses the default one,
            computed once per process (about a second), so redraws only plot.

    Returns:
        The figure (two panels).
    """
    from course_lib import variance

    table = variance.default_group_variance_table() if table is None else table
    if not isinstance(table, variance.GroupVarianceTable):
        raise ValueError(f"table: expected a GroupVarianceTable, got {type(table).__name__}")
    _validate.require_choice("baseline", baseline, variance.BASELINES)
    if group_size not in table.group_sizes:
        raise ValueError(f"group_size: expected one of the precomputed group sizes "
                         f"{table.group_sizes[0]}..{table.group_sizes[-1]}, got {group_size!r}")
    j = table.group_sizes.index(group_size)
    colors = dict(zip(variance.BASELINES, ["tab:gray", "tab:orange", "tab:blue", "tab:green", "tab:red"]))

    fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 3.8), gridspec_kw={"width_ratios": [1.25, 1]})
    for name in variance.BASELINES:
        chosen = name == baseline
        left.plot(table.group_sizes, table.variance[name].numpy(), color=colors[name],
                  linewidth=2.6 if chosen else 1.0, alpha=1.0 if chosen else 0.55,
                  label=variance.BASELINE_LABELS[name])
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
    left.set_title(f"{variance.BASELINE_LABELS[baseline]}: {float(table.variance[baseline][j]):.3g} at G = {group_size}",
                   fontsize="medium")
    left.legend(fontsize="x-small", loc="center right", framealpha=0.9)

    proj = table.projections[baseline][j]  # (num_groups,)
    # Same bins at every G (those of the widest spread, at the smallest G): the histogram narrows as G grows.
    widest = table.projections[baseline][0]
    low = min(float(widest.quantile(0.005)), 0.0)
    high = max(float(widest.quantile(0.995)), 2 * table.exact_norm)
    right.hist(proj.clamp(low, high).numpy(), bins=torch.linspace(low, high, 41).numpy(), color=colors[baseline],
               alpha=0.7)
    right.set_xlim(low, high)
    right.axvline(table.exact_norm, color="black", linewidth=1.5, label=f"true gradient, |∇J| = {table.exact_norm:.3g}")
    right.axvline(float(proj.mean()), color=colors[baseline], linestyle="--", linewidth=1.5,
                  label=f"mean of the estimates = {float(proj.mean()):.3g}")
    right.set_xlabel("group estimate along the true gradient's direction")
    right.set_ylabel(f"count (of {proj.numel()} groups)")
    right.set_title(f"{proj.numel()} group estimates at G = {group_size}", fontsize="medium")
    right.legend(fontsize="x-small", loc="upper right", framealpha=0.9)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------
# Chapter 02: policy gradient
# ---------------------------------------------------------------------------

_MC_LOGITS = (0.5, -1.0, 1.5, 0.0, -0.5)
_MC_REWARDS = (1.0, 0.0, 3.0, -2.0, 0.5)


def plot_mc_gradient_error(n_samples=None, errors=None, sigma: float | None = None,
                           title: str = "Monte-Carlo policy gradient: error against samples") -> Figure:
    """Log-log plot of the Monte-Carlo gradient's error against the number of samples, with ``sigma / sqrt(n)``.

    Each dot is one estimate's distance to the exact gradient; the line through the
    markers is their root mean square at each ``n``; the dashed line is the exact
    prediction ``sigma / sqrt(n)`` (not a fit), where ``sigma`` is the RMS error of a
    one-sample estimate (:func:`course_lib.mc_gradient.mc_gradient_std`).

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
        from course_lib import mc_gradient

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
        raise ValueError(f"errors: expected shape ({n.shape[0]}, seeds), one row per sample size, "
                         f"got {tuple(errors.shape)}")
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
    ax.scatter(xs[positive].numpy(), errors.flatten()[positive].numpy(), s=8, color="tab:blue", alpha=0.25,
               linewidths=0, label=f"one estimate ({seeds} seeds per n)")
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
    from course_lib import mc_gradient
    from course_lib.policy_gradient import expected_reward_gradient

    if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 1:
        raise ValueError(f"n_samples: expected a positive int, got {n_samples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed: expected an int, got {seed!r}")
    logits = torch.tensor(_MC_LOGITS, dtype=torch.float64) if logits is None else _curve("logits", logits)
    rewards = (torch.tensor(_MC_REWARDS, dtype=torch.float64) if rewards is None
               else _curve("rewards", rewards, "logits", logits))
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
    ax.set_xticklabels([f"a={a}\nπ={p:.2f}, r={r:g}" for a, (p, r) in enumerate(zip(pi.tolist(), rewards.tolist()))],
                       fontsize="small")
    # A fixed y range, so that the bars visibly settle as n grows under a slider.
    bound = 1.5 * float(exact.abs().max()) + 2.0 * mc_gradient.mc_gradient_std(logits, rewards) / n_samples**0.5
    ax.set_ylim(-max(bound, float(estimate.abs().max()) * 1.1), max(bound, float(estimate.abs().max()) * 1.1))
    ax.set_ylabel(r"$\partial J / \partial\,\mathrm{logit}_a$")
    ax.set_title(rf"n = {n_samples}, seed {seed}: error $\|\hat g - \nabla J\|$ = {error:.3g}", fontsize="medium")
    ax.legend(loc="upper left", fontsize="small", frameon=False)
    fig.tight_layout()
    return fig


def plot_pg_reward_curves(curves: dict | None = None, max_reward=None, ylabel: str = "mean sampled reward",
                          title: str = "REINFORCE on the sorting task") -> Figure:
    """Reward against epoch: one thin line per seed and a thick line for their mean, per run label.

    Thin lines, not a band, because the point is often where single runs *stop*: a
    run stuck in a local optimum is a flat line below the maximum.

    Args:
        curves: ``{label: (seeds, epochs)}`` rewards, one row per seed (a tensor or
            nested lists). ``None`` draws a made-up example.
        max_reward: the highest reward possible, drawn as a dotted line (``None`` for none).
        ylabel: the y-axis label.
        title: the figure's title.

    Returns:
        The figure: for each label, one line per seed and one for the mean (plus the dotted line).
    """
    if curves is None:
        epochs = torch.arange(60, dtype=torch.float64)
        curves = {"example": torch.stack([2.5 + top * (1 - torch.exp(-epochs / 10)) for top in (0.8, 1.2, 1.5)])}
        max_reward = 5.0 if max_reward is None else max_reward
    if not isinstance(curves, dict) or not curves:
        raise ValueError(f"curves: expected a non-empty dict of label -> (seeds, epochs) rewards, got {curves!r}")
    fig, ax = plt.subplots(figsize=FIGSIZE)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:gray"]
    for i, (label, rows) in enumerate(curves.items()):
        rows = torch.as_tensor(rows, dtype=torch.float64)
        if rows.dim() == 1:
            rows = rows[None]
        if rows.dim() != 2 or rows.shape[1] < 1:
            raise ValueError(f"curves[{label!r}]: expected shape (seeds, epochs), got {tuple(rows.shape)}")
        color = colors[i % len(colors)]
        x = torch.arange(rows.shape[1]).numpy()
        seeds = rows.shape[0]
        for row in rows:
            ax.plot(x, row.numpy(), color=color, linewidth=0.8, alpha=0.35)
        ax.plot(x, rows.mean(0).numpy(), color=color, linewidth=2.0,
                label=f"{label}: mean of {seeds} seeds (thin: each seed)" if seeds > 1 else f"{label} (one seed)")
    if max_reward is not None:
        ax.axhline(_validate._as_float("max_reward", max_reward), color="black", linestyle=":", linewidth=1,
                   label="highest possible reward")
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize="medium")
    # Below the axes: flat curves can sit anywhere, and a legend inside would hide one.
    entries = len(curves) + (max_reward is not None)
    fig.set_figheight(FIGSIZE[1] + 0.25 * entries)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize="small", frameon=False)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------
# Chapter 05: PPO
# ---------------------------------------------------------------------------


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
    return {"ratio": ratios, "objective": {+1: objective[0], -1: objective[1]},
            "gradient": {+1: gradient[0], -1: gradient[1]}}


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
    for ax, key, ylabel in ((axes[0], "objective", "objective min(rA, clip(r)A)"),
                            (axes[1], "gradient", "d objective / d r")):
        ax.axvspan(1.0 - clip_eps, 1.0 + clip_eps, color="0.92", zorder=0)
        ax.axvline(1.0, color="0.6", linewidth=0.8, linestyle=":")
        ax.axhline(0.0, color="0.6", linewidth=0.8)
        for sign, (color, label) in styles.items():
            ax.plot(x, curves[key][sign].numpy(), color=color, linewidth=2, label=label)
        ax.set_xlim(0.0, float(x[-1]))
        ax.set_xticks([0.0, 0.5, 1.0, 1.5, 2.0])
        ax.set_xlabel("ratio r = π / π_old")
        ax.set_ylabel(ylabel)
    axes[0].set_ylim(-2.1, 2.1)  # head room for the legend above the A > 0 line
    axes[0].set_yticks([-2.0, -1.0, 0.0, 1.0, 2.0])
    axes[1].set_ylim(-1.3, 1.3)
    axes[1].set_yticks([-1.0, 0.0, 1.0])
    axes[0].legend(loc="upper left", fontsize="small", frameon=False)
    fig.suptitle(f"clip_eps = {clip_eps:.2f}: the trust region [{1 - clip_eps:.2f}, {1 + clip_eps:.2f}] is shaded",
                 fontsize="medium")
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.16, top=0.88, wspace=0.26)
    return fig


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
    metrics = ("mean_return", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction",
               "explained_variance", last)
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
    curves = {metric: [_history_curve(history, metric, f"histories[{label!r}]") for label, history in histories.items()]
              for metric in metrics}
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


# ---------------------------------------------------------------------------
# Chapter 06: GRPO
# ---------------------------------------------------------------------------


def _seed_curves(name: str, runs, field: str) -> torch.Tensor:
    """``(n_seeds, epochs)`` curves of one field of a history (or a list of histories, one per seed)."""
    runs = runs if isinstance(runs, (list, tuple)) else [runs]
    if not runs:
        raise ValueError(f"{name}: expected a history or a non-empty list of histories")
    curves = []
    for run in runs:
        values = getattr(run, field, None)
        if values is None or len(values) == 0:
            raise ValueError(f"{name}: expected histories with a non-empty {field!r} field, got {type(run).__name__}")
        values = torch.as_tensor(values, dtype=torch.float64)
        curves.append(values.mean(-1) if values.dim() == 2 else values)  # greedy rewards: mean over prompts
    if len({c.numel() for c in curves}) != 1:
        raise ValueError(f"{name}: expected histories of equal length, got {[c.numel() for c in curves]}")
    return torch.stack(curves)


_SORTING_FIELDS = {
    "mean_reward": "mean reward of the sampled responses",
    "greedy_reward": "reward of the greedy response",
    "entropy": "policy entropy per position (nats)",
    "all_equal_fraction": "fraction of groups with all-equal rewards",
    "kl": "KL to the reference (nats per token)",
    "clip_fraction": "clip fraction",
}


def plot_sorting_curves(histories: dict, fields=("mean_reward", "greedy_reward"), max_reward: float | None = 5.0,
                        title: str = "Sorting task: REINFORCE vs GRPO") -> Figure:
    """Per-epoch curves of a few history fields, one line per label, averaged over seeds.

    Args:
        histories: ``{label: history or list of histories}``; a history has one value per
            epoch in each field (``greedy_reward`` has ``B``, averaged over prompts), as
            ``sorting_pg.PGHistory`` and ``trainers.grpo_trainer.GRPOHistory`` do.
        fields: one panel per field, among ``"mean_reward"``, ``"greedy_reward"``,
            ``"entropy"``, ``"all_equal_fraction"``, ``"kl"``, ``"clip_fraction"``.
        max_reward: drawn as a dashed line on the reward panels (none when None).
        title: the figure's title.

    Returns:
        The figure: ``len(fields)`` panels with ``len(histories)`` lines each.
    """
    if not isinstance(histories, dict) or not histories:
        raise ValueError(f"histories: expected a non-empty dict of label -> history, got {type(histories).__name__}")
    fields = (fields,) if isinstance(fields, str) else tuple(fields)
    if not fields:
        raise ValueError("fields: expected at least one field name")
    for name in fields:
        _validate.require_choice("fields", name, tuple(_SORTING_FIELDS))
    fig, axes = plt.subplots(1, len(fields), figsize=(5.0 * len(fields), 3.4), squeeze=False)
    axes = axes[0]
    colors = ["tab:gray", "tab:orange", "tab:purple", "tab:blue", "tab:green", "tab:red", "tab:brown", "tab:pink"]
    for i, (label, runs) in enumerate(histories.items()):
        for ax, name in zip(axes, fields):
            curves = _seed_curves(f"histories[{label!r}]", runs, name)  # (seeds, epochs)
            ax.plot(torch.arange(curves.shape[1]).numpy(), curves.mean(0).numpy(), color=colors[i % len(colors)],
                    linewidth=1.8, label=f"{label} ({curves.shape[0]} seeds)" if curves.shape[0] > 1 else str(label))
    for ax, name in zip(axes, fields):
        if max_reward is not None and name in ("mean_reward", "greedy_reward"):
            ax.axhline(max_reward, color="black", linestyle="--", linewidth=0.8)
        ax.set_xlabel("epoch (one batch of samples each)")
        ax.set_title(_SORTING_FIELDS[name], fontsize="medium")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mean over prompts and seeds")
    axes[-1].legend(fontsize="small", frameon=False, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_ablation(results: dict, max_reward: float | None = 5.0,
                  title: str = "Final greedy reward per configuration") -> Figure:
    """Horizontal bars of the mean final reward per configuration, one dot per seed.

    Args:
        results: ``{label: list of final rewards, one per seed}``, drawn top to bottom.
        max_reward: drawn as a dashed line (none when None).
        title: the figure's title.

    Returns:
        The figure: one bar per configuration.
    """
    if not isinstance(results, dict) or not results:
        raise ValueError(f"results: expected a non-empty dict of label -> list of rewards, got {type(results).__name__}")
    labels = list(results)
    values = [_curve(f"results[{label!r}]", results[label]) for label in labels]
    fig, ax = plt.subplots(figsize=(7.0, 0.45 * len(labels) + 1.7))
    y = torch.arange(len(labels), dtype=torch.float64)
    means = torch.stack([v.mean() for v in values])
    right = max_reward if max_reward is not None else float(torch.cat(values).max())
    ax.barh(y.numpy(), means.numpy(), height=0.6, color="tab:blue", alpha=0.6, label="mean over seeds")
    for i, v in enumerate(values):
        ax.plot(v.numpy(), [float(y[i])] * v.numel(), "o", color="black", markersize=4,
                label="one seed" if i == 0 else None)
        # The means in a column of their own, right of the bars and the dots.
        ax.text(right * 1.04, float(y[i]), f"{float(means[i]):.2f}", va="center", fontsize="small")
    if max_reward is not None:
        ax.axvline(max_reward, color="black", linestyle="--", linewidth=0.8, label=f"maximum ({max_reward:g})")
    ax.set_yticks(y.numpy(), labels)
    ax.invert_yaxis()
    ax.set_xlim(0.0, right * 1.14)
    ax.set_xlabel("final greedy reward (mean over prompts)")
    ax.set_title(title)
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=3, frameon=False, fontsize="small")
    fig.tight_layout(rect=(0.0, 0.06, 1.0, 1.0))
    return fig


def plot_kl_estimators(kl, bias: dict, std: dict) -> Figure:
    """Bias and standard deviation of per-sample KL estimators against the exact KL.

    Args:
        kl: ``(N,)`` exact KL(pi || pi_ref) at ``N`` distances, increasing.
        bias: ``{name: (N,)}`` the estimator's mean minus the exact KL.
        std: ``{name: (N,)}`` the standard deviation of one sample of the estimator.

    Returns:
        The figure: two panels, one line per estimator each.
    """
    kl = _curve("kl", kl)
    if not isinstance(bias, dict) or not isinstance(std, dict) or not bias or set(bias) != set(std):
        raise ValueError("bias: expected a non-empty dict of name -> curve with the same names as std")
    colors = {"k1": "tab:red", "k2": "tab:orange", "k3": "tab:blue"}
    fig, axes = plt.subplots(1, 2, figsize=(10.0, 3.4))
    for name in bias:
        color = colors.get(name)
        axes[0].plot(kl.numpy(), (_curve(f"bias[{name!r}]", bias[name], "kl", kl) / kl).numpy(), "o-", color=color,
                     label=name, markersize=3)
        axes[1].plot(kl.numpy(), (_curve(f"std[{name!r}]", std[name], "kl", kl) / kl).numpy(), "o-", color=color,
                     label=name, markersize=3)
    axes[0].axhline(0.0, color="black", linewidth=0.8)
    axes[0].set_ylabel("bias / KL")
    axes[0].set_title("relative bias (0: unbiased)", fontsize="medium")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("std of one sample / KL")
    axes[1].set_title("relative spread of a single-sample estimate", fontsize="medium")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel(r"exact KL($\pi_\theta \,\|\, \pi_{ref}$) (nats)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize="small", frameon=False)
    fig.suptitle(r"KL estimators from samples $y \sim \pi_\theta$ of a categorical distribution")
    fig.tight_layout()
    return fig


def token_gradient_weights(lengths=(2, 4, 8), advantages=(1.0, -1.0, -1.0), mode: str = "seq-mean-token-mean",
                           max_len: float | None = None) -> torch.Tensor:
    """The weight each token's ``logp`` gets in the gradient of ``-adv * logp`` aggregated by ``mode``.

    The weight is ``-d loss / d logp[i, t]``: positive pushes the token up, negative down.
    It is computed by autograd through :func:`course_lib.grpo.aggregate_loss`.

    Args:
        lengths: the number of tokens of each response.
        advantages: one advantage per response.
        mode: a ``loss_agg`` mode of :func:`course_lib.grpo.aggregate_loss`.
        max_len: Dr. GRPO's constant (default: the longest response).

    Returns:
        ``(N, T)`` weights, 0 on padding (``T`` the longest length).
    """
    from course_lib.grpo import aggregate_loss  # here: plotting stays importable without the chapter-06 module

    lengths = [int(n) for n in lengths]
    if not lengths or min(lengths) < 1:
        raise ValueError(f"lengths: expected positive numbers of tokens, got {lengths}")
    adv = _curve("advantages", advantages)
    if adv.numel() != len(lengths):
        raise ValueError(f"advantages: expected one per response ({len(lengths)}), got {adv.numel()}")
    T = max(lengths)
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (N, T)
    logp = torch.zeros(len(lengths), T, dtype=torch.float64, requires_grad=True)
    loss = aggregate_loss(-adv[:, None] * logp, mask, mode, max_len=max_len)
    (grad,) = torch.autograd.grad(loss, logp)
    return -grad


def plot_token_weights(lengths=(2, 4, 8), advantages=(1.0, -1.0, -1.0), max_len: float | None = None) -> Figure:
    """Per-token gradient weights of responses of uneven length under the three loss aggregations.

    Args:
        lengths: the number of tokens of each response.
        advantages: one advantage per response.
        max_len: Dr. GRPO's constant (default: the longest response).

    Returns:
        The figure: three panels (one per mode), one bar per valid token.
    """
    from course_lib.grpo import LOSS_AGG_MODES

    names = {"seq-mean-token-mean": "GRPO: seq-mean-token-mean", "token-mean": "DAPO: token-mean",
             "seq-mean-token-sum-norm": "Dr. GRPO: seq-mean-token-sum-norm"}
    weights = {mode: token_gradient_weights(lengths, advantages, mode, max_len) for mode in LOSS_AGG_MODES}
    lengths = [int(n) for n in lengths]
    adv = _curve("advantages", advantages)
    limit = 1.15 * max(float(w.abs().max()) for w in weights.values())
    colors = ["tab:blue", "tab:red", "tab:orange", "tab:green", "tab:purple", "tab:brown"]
    fig, axes = plt.subplots(1, 3, figsize=(12.0, 3.4), sharey=True)
    for ax, (mode, w) in zip(axes, weights.items()):
        x = 0
        for i, n in enumerate(lengths):
            ax.bar(range(x, x + n), w[i, :n].numpy(), width=0.8, color=colors[i % len(colors)],
                   label=f"response {i + 1}: {n} tokens, adv {float(adv[i]):+.2g}")
            x += n + 1  # a gap between responses
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_xticks([])
        ax.set_xlabel("tokens, response by response")
        ax.set_title(names[mode], fontsize="medium")
        ax.set_ylim(-limit, limit)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel(r"weight of $\nabla \log \pi$ per token")
    axes[0].legend(fontsize="x-small", frameon=False, loc="lower left")
    fig.suptitle("How much each token is pushed up (+) or down (-), by loss aggregation")
    fig.tight_layout()
    return fig


def group_signal_curves(group_size: int = 8, n_points: int = 99) -> dict:
    """For binary rewards with success rate p: P(a group is all equal), and the |advantage| of mixed groups.

    Exact, by summing over the number k of correct responses in a group of ``G``
    (binomial): the advantages depend only on k.

    Args:
        group_size: ``G``, at least 2.
        n_points: success rates on an even grid strictly inside (0, 1).

    Returns:
        ``{"p", "all_equal", "abs_adv_std", "abs_adv_centred"}``, each ``(n_points,)``: the
        probability that the G rewards are all equal, and, given that they are not, the
        expected mean |advantage| per response with and without the division by the std.
    """
    import math

    from course_lib.grpo import group_advantages

    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2:
        raise ValueError(f"group_size: expected an int >= 2, got {group_size!r}")
    if isinstance(n_points, bool) or not isinstance(n_points, int) or n_points < 1:
        raise ValueError(f"n_points: expected a positive int, got {n_points!r}")
    G = group_size
    p = torch.linspace(0.0, 1.0, n_points + 2, dtype=torch.float64)[1:-1]  # (P,)
    k = torch.arange(1, G)  # the mixed groups: 1 .. G - 1 correct responses
    rewards = (torch.arange(G)[None, :] < k[:, None]).double()  # (G - 1, G)
    abs_std = group_advantages(rewards, normalize_std=True).abs().mean(-1)  # (G - 1,)
    abs_centred = group_advantages(rewards, normalize_std=False).abs().mean(-1)  # (G - 1,)
    comb = torch.tensor([math.comb(G, int(i)) for i in k], dtype=torch.float64)
    prob = comb[None, :] * p[:, None] ** k[None, :] * (1 - p[:, None]) ** (G - k[None, :])  # (P, G - 1)
    prob = prob / prob.sum(-1, keepdim=True)  # conditioned on a mixed group
    return {"p": p, "all_equal": p**G + (1 - p) ** G, "abs_adv_std": prob @ abs_std,
            "abs_adv_centred": prob @ abs_centred}


def plot_group_signal(group_size: int = 8) -> Figure:
    """How much signal a group of G binary rewards carries, as a function of the success rate.

    Left: the probability that all G rewards are equal (no signal at all). Right: for the
    groups that are mixed, the expected mean |advantage| per response, with GRPO's std
    normalisation and without (Dr. GRPO): the std normalisation gives a prompt that is almost
    always (or almost never) solved as much push as one solved half the time, the
    difficulty bias of Liu et al. 2025.

    Args:
        group_size: ``G``, at least 2.
    """
    curves = group_signal_curves(group_size)
    p = curves["p"].numpy()
    fig, axes = plt.subplots(1, 2, figsize=(10.0, 3.4))
    axes[0].plot(p, curves["all_equal"].numpy(), color="tab:red")
    axes[0].set_ylim(0.0, 1.02)
    axes[0].set_ylabel("P(all G rewards equal)")
    axes[0].set_title("groups with no learning signal", fontsize="medium")
    axes[1].plot(p, curves["abs_adv_std"].numpy(), color="tab:blue", label="GRPO: (r - mean) / std")
    axes[1].plot(p, curves["abs_adv_centred"].numpy(), color="tab:orange", label="Dr. GRPO: r - mean")
    axes[1].set_ylim(0.0, 1.1)
    axes[1].set_ylabel("mean |advantage| per response")
    axes[1].set_title("advantage scale of a mixed group, by difficulty", fontsize="medium")
    axes[1].legend(fontsize="small", frameon=False)
    for ax in axes:
        ax.set_xlabel("success rate p of the prompt")
        ax.grid(alpha=0.3)
    fig.suptitle(f"Binary rewards, groups of G = {group_size}")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------
# Chapter 07: GRPO against PPO
# ---------------------------------------------------------------------------

_MEMORY_PARTS = {  # part -> (colour, legend)
    "actor": ("tab:blue", "actor (weights + grads)"), "critic": ("tab:red", "critic (weights + grads)"),
    "reference": ("tab:gray", "reference (weights)"), "reward": ("tab:brown", "reward model (weights)"),
    "optimizer": ("tab:orange", "optimizer (Adam state)"), "activations": ("tab:green", "activations"),
}


def _bytes_unit(largest: float) -> tuple[float, str]:
    """The decimal unit (B, kB, MB, GB) that shows ``largest`` bytes as a number below 1000."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if largest >= scale:
            return scale, unit
    return 1.0, "B"


def plot_memory_breakdown(tables: dict, title: str = "Memory of one training step") -> Figure:
    """Stacked horizontal bars of memory per algorithm: actor, critic, reference, reward, optimizer, activations.

    Args:
        tables: ``{algorithm: rows}`` with ``rows`` either the result of
            :func:`course_lib.memory.measure_training_memory` (``{part: {"bytes": int, ...}}``) or of
            :func:`course_lib.memory.memory_accounting` (``{part: int}``); a ``"total"`` row is ignored
            and recomputed.
        title: the figure's title.

    Returns:
        The figure: one bar per algorithm, one segment per part it has (non-zero).
    """
    if not isinstance(tables, dict) or not tables:
        raise ValueError(f"tables: expected a non-empty dict of algorithm -> rows, got {type(tables).__name__}")
    parts = {}
    for label, rows in tables.items():
        if not isinstance(rows, dict):
            raise ValueError(f"tables[{label!r}]: expected a dict of part -> bytes, got {type(rows).__name__}")
        values = {}
        for name, value in rows.items():
            if name == "total":
                continue
            if name not in _MEMORY_PARTS:
                raise ValueError(f"tables[{label!r}]: unknown part {name!r}; expected some of {tuple(_MEMORY_PARTS)}")
            values[name] = float(value["bytes"] if isinstance(value, dict) else value)
        parts[label] = values
    scale, unit = _bytes_unit(max(sum(v.values()) for v in parts.values()))
    fig, ax = plt.subplots(figsize=(8.0, 0.7 * len(parts) + 1.9))
    drawn = set()
    for y, (label, values) in enumerate(parts.items()):
        left = 0.0
        for name, (color, legend) in _MEMORY_PARTS.items():
            width = values.get(name, 0.0) / scale
            if width <= 0:
                continue
            ax.barh(y, width, left=left, height=0.6, color=color, label=None if name in drawn else legend)
            drawn.add(name)
            left += width
        ax.text(left, y, f"  {left:,.3g} {unit}", va="center", fontsize="small")
    ax.set_yticks(range(len(parts)), list(parts))
    ax.invert_yaxis()
    ax.set_xlim(0.0, max(sum(v.values()) for v in parts.values()) / scale * 1.18)
    ax.set_xlabel(f"memory ({unit})")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=3, frameon=False, fontsize="small")
    fig.tight_layout(rect=(0.0, 0.16, 1.0, 1.0))
    return fig


def plot_budget_curves(runs: dict, y: str = "reward", max_reward: float | None = None, sample_label: str = "samples",
                       ylabel: str = "mean reward of the samples", title: str = "GRPO against PPO") -> Figure:
    """Reward against samples (left) and against wall-clock seconds (right), mean and min-max band over seeds.

    Args:
        runs: ``{label: list of curves}``, each curve a dict of lists ``samples``, ``seconds``
            and ``reward`` (as ``course_lib.compare``'s runners return them); the seeds of a
            label are put on one grid by :func:`course_lib.compare.band`.
        y: the curve key to draw (``"reward"``; ``"greedy"`` for the sorting runs).
        max_reward: drawn as a dashed line (none when None).
        sample_label: what a sample is, for the left axis ("responses sampled", "environment steps").
        ylabel: the vertical axis.
        title: the figure's title.

    Returns:
        The figure: two panels with one mean line and one band per label.
    """
    from course_lib.compare import band

    if not isinstance(runs, dict) or not runs:
        raise ValueError(f"runs: expected a non-empty dict of label -> list of curves, got {type(runs).__name__}")
    bands = {label: [band(curves, x=x, y=y) for x in ("samples", "seconds")] for label, curves in runs.items()}
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 3.6), sharey=True)
    colors = ["tab:blue", "tab:red", "tab:green", "tab:purple"]
    for i, (label, (by_samples, by_seconds)) in enumerate(bands.items()):
        n = len(runs[label])
        for ax, b in zip(axes, (by_samples, by_seconds)):
            ax.fill_between(b["x"], b["low"], b["high"], color=colors[i % len(colors)], alpha=0.2, linewidth=0)
            ax.plot(b["x"], b["mean"], color=colors[i % len(colors)], linewidth=1.8,
                    label=f"{label} (mean of {n} seeds, band: min-max)" if n > 1 else str(label))
    for ax, xlabel in zip(axes, (sample_label, "wall-clock seconds (one CPU thread)")):
        if max_reward is not None:
            ax.axhline(max_reward, color="black", linestyle="--", linewidth=0.8)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel)
    axes[0].legend(fontsize="small", frameon=False, loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_sweep(group_size: int = 8, clip_eps: float = 0.2, sweep: dict | None = None) -> Figure:
    """GRPO's sweep over group size and clip range: the table of final rewards, and one configuration's curves.

    Left: the final greedy reward (mean over seeds and prompts) of every configuration, the
    selected one outlined. Right: its greedy and sampled reward per epoch, mean over seeds.

    Args:
        group_size, clip_eps: the configuration to show; must be in the sweep.
        sweep: the ``"sweep"`` entry of :func:`course_lib.sweep.load_sweep` (loaded when None).

    Returns:
        The figure: a heatmap and two curves.
    """
    from course_lib.sweep import load_sweep, sweep_config, sweep_grid

    sweep = load_sweep()["sweep"] if sweep is None else sweep
    config = sweep_config(sweep, group_size, clip_eps)  # raises ValueError for an unknown pair
    group_sizes, eps, table = sweep_grid(sweep, "final_greedy_reward")
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 3.9), gridspec_kw={"width_ratios": [1.0, 1.3]})
    image = axes[0].imshow(table.numpy(), cmap="viridis", vmin=float(table.min()), vmax=5.0, aspect="auto")
    for i in range(table.shape[0]):
        for j in range(table.shape[1]):
            value = float(table[i, j])
            axes[0].text(j, i, f"{value:.2f}", ha="center", va="center", fontsize="x-small",
                         color="black" if value > float(table.min()) + 0.6 * (5.0 - float(table.min())) else "white")
    i, j = sweep["group_sizes"].index(config["group_size"]), sweep["clip_eps"].index(config["clip_eps"])
    axes[0].add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2.5))
    axes[0].set_xticks(range(len(eps)), [f"{e:g}" for e in eps.tolist()])
    axes[0].set_yticks(range(len(group_sizes)), [str(g) for g in group_sizes.tolist()])
    axes[0].set_xlabel("clip_eps")
    axes[0].set_ylabel("group size G")
    axes[0].set_title(f"final greedy reward, mean of {len(sweep['seeds'])} seeds", fontsize="medium")
    fig.colorbar(image, ax=axes[0], fraction=0.05)
    every = sweep.get("curve_every", 1)
    epochs = [every * (k + 1) for k in range(len(config["greedy_curve"]))]
    axes[1].plot(epochs, config["greedy_curve"], color="tab:blue", linewidth=1.8, label="greedy response")
    axes[1].plot(epochs, config["reward_curve"], color="tab:orange", linewidth=1.8, label="sampled responses (mean)")
    axes[1].axhline(5.0, color="black", linestyle="--", linewidth=0.8)
    axes[1].set_ylim(min(1.5, min(config["reward_curve"]) - 0.2), 5.3)
    axes[1].set_xlabel("epoch")
    axes[1].set_ylabel("reward (mean over seeds and prompts)")
    axes[1].set_title(f"G = {config['group_size']}, clip_eps = {config['clip_eps']:g}: {config['samples']:,} samples, "
                      f"{config['wall_time_s']:.2f} s per run", fontsize="medium")
    axes[1].legend(fontsize="small", frameon=False, loc="lower right")
    axes[1].grid(alpha=0.3)
    fig.tight_layout()
    return fig
