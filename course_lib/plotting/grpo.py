"""Plots of Chapter 06: GRPO."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from course_lib import _validate
from course_lib.plotting.base import _curve


def _seed_curves(name: str, runs, field: str) -> torch.Tensor:
    """``(n_seeds, rounds)`` curves of one field of a history (or a list of histories, one per seed)."""
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


def plot_sorting_curves(
    histories: dict,
    fields=("mean_reward", "greedy_reward"),
    max_reward: float | None = 5.0,
    title: str = "Sorting task: REINFORCE vs GRPO",
) -> Figure:
    """Per-round curves of a few history fields, one line per label, averaged over seeds.

    Args:
        histories: ``{label: history or list of histories}``; a history has one value per
            round in each field (``greedy_reward`` has ``B``, averaged over prompts), as
            ``trainers.pg_trainer.PGHistory`` and ``trainers.grpo_trainer.GRPOHistory`` do.
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
            curves = _seed_curves(f"histories[{label!r}]", runs, name)  # (seeds, rounds)
            ax.plot(
                torch.arange(curves.shape[1]).numpy(),
                curves.mean(0).numpy(),
                color=colors[i % len(colors)],
                linewidth=1.8,
                label=f"{label} ({curves.shape[0]} seeds)" if curves.shape[0] > 1 else str(label),
            )
    for ax, name in zip(axes, fields):
        if max_reward is not None and name in ("mean_reward", "greedy_reward"):
            ax.axhline(max_reward, color="black", linestyle="--", linewidth=0.8)
        ax.set_xlabel("round (one batch of samples each)")
        ax.set_title(_SORTING_FIELDS[name], fontsize="medium")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mean over prompts and seeds")
    axes[-1].legend(fontsize="small", frameon=False, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_ablation(
    results: dict, max_reward: float | None = 5.0, title: str = "Final greedy reward per configuration"
) -> Figure:
    """Horizontal bars of the mean final reward per configuration, one dot per seed.

    Args:
        results: ``{label: list of final rewards, one per seed}``, drawn top to bottom.
        max_reward: drawn as a dashed line (none when None).
        title: the figure's title.

    Returns:
        The figure: one bar per configuration.
    """
    if not isinstance(results, dict) or not results:
        raise ValueError(
            f"results: expected a non-empty dict of label -> list of rewards, got {type(results).__name__}"
        )
    labels = list(results)
    values = [_curve(f"results[{label!r}]", results[label]) for label in labels]
    fig, ax = plt.subplots(figsize=(7.0, 0.45 * len(labels) + 1.7))
    y = torch.arange(len(labels), dtype=torch.float64)
    means = torch.stack([v.mean() for v in values])
    right = max_reward if max_reward is not None else float(torch.cat(values).max())
    ax.barh(y.numpy(), means.numpy(), height=0.6, color="tab:blue", alpha=0.6, label="mean over seeds")
    for i, v in enumerate(values):
        ax.plot(
            v.numpy(), [float(y[i])] * v.numel(), "o", color="black", markersize=4, label="one seed" if i == 0 else None
        )
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
    # k1 and k3 are both unbiased, so their bias curves coincide at 0: a wide pale line for k1 under a thin
    # dashed one for k3 keeps both visible.
    bias_styles = {"k1": {"linewidth": 5, "alpha": 0.45, "marker": None}, "k3": {"linestyle": "--", "marker": "s"}}
    fig, axes = plt.subplots(1, 2, figsize=(10.0, 3.4))
    for name in bias:
        color = colors.get(name)
        style = {"marker": "o", "markersize": 3, **bias_styles.get(name, {})}
        axes[0].plot(
            kl.numpy(), (_curve(f"bias[{name!r}]", bias[name], "kl", kl) / kl).numpy(), color=color, label=name, **style
        )
        axes[1].plot(
            kl.numpy(),
            (_curve(f"std[{name!r}]", std[name], "kl", kl) / kl).numpy(),
            "o-",
            color=color,
            label=name,
            markersize=3,
        )
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


def token_gradient_weights(
    lengths=(2, 4, 8), advantages=(1.0, -1.0, -1.0), mode: str = "seq-mean-token-mean", max_len: float | None = None
) -> torch.Tensor:
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

    names = {
        "seq-mean-token-mean": "GRPO: seq-mean-token-mean",
        "token-mean": "DAPO: token-mean",
        "seq-mean-token-sum-norm": "Dr. GRPO: seq-mean-token-sum-norm",
    }
    weights = {mode: token_gradient_weights(lengths, advantages, mode, max_len) for mode in LOSS_AGG_MODES}
    lengths = [int(n) for n in lengths]
    adv = _curve("advantages", advantages)
    limit = 1.15 * max(float(w.abs().max()) for w in weights.values())
    colors = ["tab:blue", "tab:red", "tab:orange", "tab:green", "tab:purple", "tab:brown"]
    fig, axes = plt.subplots(1, 3, figsize=(12.0, 3.4), sharey=True)
    for ax, (mode, w) in zip(axes, weights.items()):
        x = 0
        for i, n in enumerate(lengths):
            ax.bar(
                range(x, x + n),
                w[i, :n].numpy(),
                width=0.8,
                color=colors[i % len(colors)],
                label=f"response {i + 1}: {n} tokens, adv {float(adv[i]):+.2g}",
            )
            x += n + 1  # a gap between responses
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_xticks([])
        ax.set_xlabel("tokens, response by response")
        ax.set_title(names[mode], fontsize="medium")
        ax.set_ylim(-limit, limit)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel(r"weight of $\nabla \log \pi$ per token")
    # One legend for the three panels, below them at a readable size (inside a panel it had to be tiny).
    handles, labels = axes[0].get_legend_handles_labels()
    fig.suptitle("How much each token is pushed up (+) or down (-), by loss aggregation")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize="medium", frameon=False)
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
    return {
        "p": p,
        "all_equal": p**G + (1 - p) ** G,
        "abs_adv_std": prob @ abs_std,
        "abs_adv_centred": prob @ abs_centred,
    }


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
