"""Chapter 11's plots: each testbed's results as ``benchmarks/grpo_family.py`` saves them (``grpo_family_11.json``).

- :func:`plot_prompt_weights`: the estimator testbed: each estimator's weight per prompt against its difficulty,
  and its signal-to-noise ratio against the group size;
- :func:`plot_testbed_curves`: a trained testbed's per-round quantities against the completions sampled, the mean
  over seeds of each variant with the range over seeds as a band;
- :func:`plot_testbed_scores`: one number per seed and variant (dots), its mean (a bar), the warm-up's start;
- :func:`plot_paired_differences`: the second round's differences (``lectures.family_v2``), each seed's
  variant minus baseline (dots), the mean (a bar) and the 95% interval, one panel per measured number.

``runs`` is a list of report records (:func:`course_lib.lectures.family_testbeds.record` plus ``testbed``,
``variant`` and ``seed``), the shape the benchmark saves.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from course_lib.lectures.family_claims import read

COLOURS = {"REINFORCE": "grey", "GRPO": "black"}
"""Fixed colours for the references; other variants take the default cycle in the order given."""


def _colour(name: str, i: int) -> str:
    return COLOURS.get(name, f"C{i % 10}")


def _by_variant(runs: list[dict], testbed: str, variants=None) -> dict[str, list[dict]]:
    mine = [r for r in runs if r["testbed"] == testbed]
    names = variants or list(dict.fromkeys(r["variant"] for r in mine))
    out = {name: sorted((r for r in mine if r["variant"] == name), key=lambda r: r["seed"]) for name in names}
    out = {name: records for name, records in out.items() if records}
    if not out:
        raise ValueError(f"runs: no run of testbed {testbed!r}")
    return out


def plot_prompt_weights(table: dict, group_size: int = 8) -> Figure:
    """Left: each estimator's weight per prompt against its success probability at ``group_size`` (exact lines where
    there is an exact value, measured points +- 2 standard errors); right: the SNR of one batch against ``G``."""
    rows = [r for r in table["rows"] if r["G"] == group_size]
    if not rows:
        raise ValueError(f"group_size: the table has no row at G={group_size}")
    p = np.asarray(table["success_probs"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
    for i, row in enumerate(rows):
        colour = _colour(row["estimator"], i)
        w, se = np.asarray(row["weights"]), np.asarray(row["weights_se"])
        hollow = row["estimator"] == "REINFORCE"  # a ring: RLOO's points (also 1) show inside it
        left.errorbar(p, w, yerr=2 * se, fmt="o", ms=7 if hollow else 3, mfc="none" if hollow else colour,
                      color=colour, lw=0.8, label=f"{row['estimator']} (measured)")  # fmt: skip
        if row["exact"] is not None:
            left.plot(p, row["exact"]["weights"], color=colour, lw=1, alpha=0.7)
    left.set_xscale("logit")
    ticks = [0.02, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98]
    left.set_xticks(ticks, [f"{t:g}" for t in ticks])
    left.xaxis.set_minor_locator(plt.NullLocator())
    left.set(xlabel="success probability p of the prompt (logit scale)", ylabel="weight: E[estimate] / true gradient")
    left.set_title(f"G = {group_size}: lines exact, points measured (+- 2 SE)", fontsize=9)
    left.set_ylim(0, max(max(r["weights"]) for r in rows) * 1.15)
    sizes = table["group_sizes"]
    for i, name in enumerate(dict.fromkeys(r["estimator"] for r in table["rows"])):
        snr = [next(r for r in table["rows"] if r["estimator"] == name and r["G"] == G) for G in sizes]
        right.errorbar(sizes, [r["snr"] for r in snr], yerr=[2 * r["snr_se"] for r in snr], marker="o", ms=3,
                       color=_colour(name, i), lw=1, label=name)  # fmt: skip
    right.set_xscale("log", base=2)
    right.set_xticks(sizes, [str(G) for G in sizes])
    right.set(xlabel="group size G", ylabel="SNR of one batch: |E g|^2 / tr Cov g", ylim=(0, None))
    right.set_title("signal to noise (scale-free; +- 2 SE)", fontsize=9)
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, [label.replace(" (measured)", "") for label in labels], loc="outside right center", fontsize=8)
    return fig


def _interp(grid: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``y(x)`` on ``grid``, linear between the points where ``y`` is known (a round may have had no such token)."""
    known = np.isfinite(y)
    return np.interp(grid, x[known], y[known]) if known.any() else np.full_like(grid, np.nan)


def plot_testbed_curves(
    runs: list[dict], testbed: str, keys: list[tuple[str, str]], variants: list[str] | None = None
) -> Figure:
    """One panel per ``(key, title)``: the per-round quantity against completions sampled (chunk means of rounds,
    as the record keeps them), each variant's mean over seeds as a line and its range over seeds as a band; the
    y-axis starts at 0 (every quantity drawn is non-negative) and the legend sits outside the panels."""
    by_variant = _by_variant(runs, testbed, variants)
    fig, axes = plt.subplots(1, len(keys), figsize=(3.4 * len(keys) + 1.6, 3.0), layout="constrained", squeeze=False)
    for ax, (key, title) in zip(axes[0], keys):
        for i, (name, records) in enumerate(by_variant.items()):
            xs = [np.asarray(r["curves"]["completions"], dtype=float) for r in records]
            ys = [np.asarray([np.nan if v is None else v for v in r["curves"][key]], dtype=float) for r in records]
            grid = np.linspace(max(x[0] for x in xs), min(x[-1] for x in xs), 20)
            on_grid = np.stack([_interp(grid, x, y) for x, y in zip(xs, ys)])  # (seeds, 20)
            colour = _colour(name, i)
            ax.plot(grid / 1e3, np.nanmean(on_grid, 0), color=colour, lw=1.5, label=name)
            ax.fill_between(grid / 1e3, np.nanmin(on_grid, 0), np.nanmax(on_grid, 0), color=colour, alpha=0.12, lw=0)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("completions sampled (thousands)")
        ax.set_ylim(0, None)  # every quantity here is >= 0: from 0, so that noise is not magnified
    axes[0][0].set_ylabel("mean over seeds (band: range)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center", fontsize=8)
    return fig


def plot_testbed_scores(
    runs: list[dict], testbed: str, key: str = "score", label: str = "test accuracy at the end", variants=None
) -> Figure:
    """Every seed's ``key`` per variant (dots), the mean over seeds (a bar); for the accuracy, the seeds' warm-up
    accuracy as a dashed line: the spread between seeds beside the differences between variants."""
    by_variant = _by_variant(runs, testbed, variants)
    names = list(by_variant)[::-1]  # the baseline on top
    fig, ax = plt.subplots(figsize=(7, 0.38 * len(names) + 1.3), layout="constrained")
    for i, name in enumerate(names):
        values = [read(r, key) for r in by_variant[name]]
        ax.scatter(values, [i] * len(values), s=14, color="C0", alpha=0.6, zorder=3)
        ax.plot([np.mean(values)] * 2, [i - 0.3, i + 0.3], color="C3", lw=2.5, zorder=4)
    if key == "score":
        start = np.mean([r["start"] for records in by_variant.values() for r in records])
        ax.axvline(start, color="grey", lw=0.8, ls="--", label=f"warm-up, mean over seeds ({start:.2f})")
        ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.0), frameon=False)
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel(f"{label} (dots: seeds; bar: mean)")
    ax.grid(axis="x", lw=0.3)
    return fig


def plot_paired_differences(judged: list[dict]) -> Figure:
    """One row per difference of :func:`course_lib.lectures.family_v2.verdicts`: each seed's variant minus baseline
    (dots), the mean (a bar) and its 95% t-interval (a line), coloured by the verdict; one panel per measured number,
    since a length in tokens and an accuracy share no axis. A dotted line marks 0."""
    if not judged:
        raise ValueError("judged: expected at least one difference (lectures.family_v2.verdicts)")
    keys = list(dict.fromkeys(row["claim"].key for row in judged))
    heights = [sum(row["claim"].key == key for row in judged) for key in keys]
    fig, axes = plt.subplots(
        len(keys), 1, figsize=(8, 0.42 * sum(heights) + 1.0 * len(keys)), layout="constrained",
        gridspec_kw={"height_ratios": heights}, squeeze=False,
    )  # fmt: skip
    colours = {"held": "C2", "contradicted": "C3", "resolved": "C0"}
    for ax, key in zip(axes[:, 0], keys):
        rows = [row for row in judged if row["claim"].key == key][::-1]  # the first on top
        for i, row in enumerate(rows):
            d = row["difference"]
            colour = colours.get(row["verdict"], "grey")
            per_seed = list(row["per_seed"].values())
            ax.scatter(per_seed, [i] * len(per_seed), s=10, color=colour, alpha=0.45, zorder=3)
            ax.plot([d.low, d.high], [i, i], color="black", lw=1.2, zorder=4)
            ax.plot([d.mean] * 2, [i - 0.3, i + 0.3], color="black", lw=2.5, zorder=5)
        ax.axvline(0, color="grey", lw=0.8, ls=":")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6))  # a narrow panel's ticks would run into each other
        labels = [f"{row['name'].split(',')[0]} ({row['rate']}): {row['verdict']}" for row in rows]
        ax.set_yticks(range(len(rows)), labels)
        ax.set_xlabel(rows[0]["claim"].metric)
        ax.grid(axis="x", lw=0.3)
    fig.suptitle(
        "each row: variant - baseline, paired by seed; dots: seeds; bar: mean; line: 95% t-interval", fontsize=9
    )
    return fig
