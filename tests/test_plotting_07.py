"""Tests of chapter 07's plots and widget (course_lib.plotting, course_lib.plotting.widgets), without a browser."""

from __future__ import annotations

import matplotlib
import pytest
from matplotlib.figure import Figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after choosing the backend

from course_lib import plotting
from course_lib.lectures import memory
from course_lib.lectures.sweep import load_sweep
from course_lib.plotting.widgets import SliderPlot, sweep_widget


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _bars(ax):
    return [p for p in ax.patches if isinstance(p, matplotlib.patches.Rectangle) and p.get_width() > 0]


def _curve(scale, n=5):
    return {
        "samples": [10 * (k + 1) for k in range(n)],
        "seconds": [0.1 * scale * (k + 1) for k in range(n)],
        "reward": [scale * k for k in range(n)],
        "greedy": [5.0] * n,
    }


# -- plot_memory_breakdown ---------------------------------------------------------------


def test_memory_breakdown_one_segment_per_nonzero_part():
    tables = {"PPO": memory.memory_accounting(7e9, 7e9, 7e9, 7e9), "GRPO": memory.memory_accounting(7e9, 0, 7e9)}
    fig = plotting.plot_memory_breakdown(tables)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert len(_bars(ax)) == 5 + 3  # PPO: actor, critic, reference, reward, optimizer; GRPO: no critic, no reward
    assert ax.get_xlabel() == "memory (GB)"  # 252 GB at most
    assert len(ax.get_legend_handles_labels()[0]) == 5  # each part once in the legend


def test_memory_breakdown_from_measured_rows():
    rows = {
        "actor": {"params": 10, "bytes": 800},
        "activations": {"params": 0, "bytes": 1200},
        "total": {"params": 10, "bytes": 2000},
    }
    fig = plotting.plot_memory_breakdown({"toy": rows})
    assert len(_bars(fig.axes[0])) == 2 and fig.axes[0].get_xlabel() == "memory (kB)"


def test_memory_breakdown_bad_input():
    with pytest.raises(ValueError, match="tables"):
        plotting.plot_memory_breakdown({})
    with pytest.raises(ValueError, match="tables"):
        plotting.plot_memory_breakdown({"PPO": {"kv_cache": 3}})


# -- plot_budget_curves -------------------------------------------------------------------


def test_budget_curves_two_panels_one_line_and_band_per_label():
    runs = {"GRPO": [_curve(1.0), _curve(2.0)], "PPO": [_curve(3.0)]}
    fig = plotting.plot_budget_curves(runs, max_reward=5.0)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    for ax in fig.axes:
        means = [line for line in ax.get_lines() if len(line.get_xdata()) == 50]
        assert len(means) == 2
        assert len(ax.collections) == 2  # one band per label
    # GRPO's mean at the last grid point: (1 * 4 + 2 * 4) / 2 = 6
    assert [line for line in fig.axes[0].get_lines() if len(line.get_xdata()) == 50][0].get_ydata()[
        -1
    ] == pytest.approx(6.0)


def test_budget_curves_other_key_and_bad_input():
    fig = plotting.plot_budget_curves({"GRPO": [_curve(1.0)]}, y="greedy", ylabel="greedy reward")
    assert fig.axes[0].get_ylabel() == "greedy reward"
    with pytest.raises(ValueError, match="runs"):
        plotting.plot_budget_curves({})
    with pytest.raises(ValueError, match="curves"):
        plotting.plot_budget_curves({"GRPO": [_curve(1.0)]}, y="accuracy")


# -- plot_sweep and its widget ------------------------------------------------------------


def test_sweep_defaults_draw_the_committed_sweep():
    fig = plotting.plot_sweep()
    assert isinstance(fig, Figure)
    heatmap, curves = fig.axes[0], fig.axes[1]
    sweep = load_sweep()["sweep"]
    assert heatmap.images[0].get_array().shape == (len(sweep["group_sizes"]), len(sweep["clip_eps"]))
    assert len(heatmap.texts) == len(sweep["configs"])  # every cell annotated
    assert len(curves.get_lines()) == 3  # greedy, sampled, and the maximum


def test_sweep_unknown_configuration():
    with pytest.raises(ValueError, match="group_size"):
        plotting.plot_sweep(group_size=5)


def test_sweep_widget_redraws_without_leaking_figures(no_figures_left_behind):
    widget = sweep_widget(group_size=4, clip_eps=0.1)
    assert isinstance(widget, SliderPlot)
    assert set(widget.values()) == {"group_size", "clip_eps"}
    widget.sliders["group_size"].value = 16
    widget.sliders["clip_eps"].value = 0.5
    assert widget.values() == {"group_size": 16, "clip_eps": 0.5}


def test_sweep_widget_bad_input():
    with pytest.raises(ValueError, match="group_size"):
        sweep_widget(group_size=5)
    with pytest.raises(ValueError, match="clip_eps"):
        sweep_widget(clip_eps=0.25)


def test_budget_curves_without_a_clock_draw_the_samples_panel_only():
    fig = plotting.plot_budget_curves({"GRPO": [_curve(1.0)], "PPO": [_curve(2.0)]}, seconds_label=None)
    (ax,) = fig.axes
    assert ax.get_xlabel() == "samples"
    assert len(ax.lines) == 2
    plt.close(fig)
