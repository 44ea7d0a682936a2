"""Tests of chapter 03's plots and widget: plot_baseline_variances, plot_reward_curves_by_mode,
plot_baseline_variance and baseline_variance_widget, without a browser."""

from __future__ import annotations

import ipywidgets
import matplotlib
import pytest
import torch
from matplotlib.figure import Figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after choosing the backend

from course_lib.lectures import variance
from course_lib.plotting import plot_baseline_variance, plot_baseline_variances, plot_reward_curves_by_mode
from course_lib.plotting.widgets import SliderPlot, baseline_variance_widget


@pytest.fixture(autouse=True)
def _no_figures_left(no_figures_left_behind):
    """Every test here must close the figures it opens (tests/conftest.py)."""


@pytest.fixture(scope="module")
def small_table():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    bandit = variance.random_bandit(num_states=3, num_actions=3, seed=1)
    logits = torch.randn(3, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    table = variance.group_variance_table(bandit, logits, state=1, group_sizes=(2, 3, 4, 5), num_groups=200)
    torch.set_num_threads(threads)
    return table


def _bars(ax):
    return [p for p in ax.patches if isinstance(p, matplotlib.patches.Rectangle)]


# ---------------------------------------------------------------------------
# plot_baseline_variances
# ---------------------------------------------------------------------------


def test_baseline_variances_default_is_the_two_state_example():
    fig = plot_baseline_variances()
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    # A factor of 102 between the two: a log axis, where bars would mislead, so dots (no bars).
    assert _bars(ax) == []
    (dots,) = ax.lines
    # No baseline: 25.5; b(s1) = 10, b(s2) = 1: 0.25 (computed by hand in tests/test_variance.py).
    assert sorted(dots.get_xdata()) == pytest.approx([0.25, 25.5])
    assert ax.get_xscale() == "log"
    texts = [t.get_text() for t in ax.texts]
    assert any("25.5" in t and "102x the smallest" in t for t in texts) and any("0.25" in t for t in texts)
    plt.close(fig)


def test_baseline_variances_one_bar_per_name_in_order_with_exact_values():
    measured = {"none": 4.0, "mean": 2.0, "optimal": 1.5}
    fig = plot_baseline_variances(measured, exact={"none": 4.1, "mean": 2.05, "optimal": 1.49})
    (ax,) = fig.axes
    bars = _bars(ax)
    assert [b.get_width() for b in sorted(bars, key=lambda b: -b.get_y())] == [4.0, 2.0, 1.5]  # first on top
    labels = sorted(zip(ax.get_yticks(), [t.get_text() for t in ax.get_yticklabels()]), reverse=True)
    assert [text for _, text in labels] == ["none", "mean", "optimal"]  # top to bottom
    assert ax.get_xscale() == "linear"  # within a factor of 30
    assert any("4 measured, 4.1 exact" in t.get_text() for t in ax.texts)
    plt.close(fig)


@pytest.mark.parametrize(
    "kwargs, argname",
    [
        ({"variances": {}}, "variances"),
        ({"variances": [1.0, 2.0]}, "variances"),
        ({"variances": {"a": -1.0}}, "variances"),
        ({"variances": {"a": "big"}}, "variances"),
        ({"variances": {"a": 1.0}, "exact": {"b": 1.0}}, "exact"),
    ],
)
def test_baseline_variances_bad_input(kwargs, argname):
    with pytest.raises(ValueError, match=argname):
        plot_baseline_variances(**kwargs)


# ---------------------------------------------------------------------------
# plot_reward_curves_by_mode
# ---------------------------------------------------------------------------


def test_reward_curves_default_three_modes_with_bands():
    fig = plot_reward_curves_by_mode()
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert len(ax.get_lines()) == 3
    assert len(ax.collections) == 3  # one band per mode
    assert "min to max" in ax.get_legend().get_title().get_text()
    plt.close(fig)


def test_reward_curves_mean_line_and_band_values():
    rows = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 5.0]])  # 2 seeds, 3 rounds
    fig = plot_reward_curves_by_mode({"rewards": rows}, band="std", max_reward=5.0)
    (ax,) = fig.axes
    mean_line, max_line = ax.get_lines()
    assert list(mean_line.get_ydata()) == [2.0, 2.0, 4.0]
    assert list(max_line.get_ydata()) == [5.0, 5.0]
    assert "1 std" in ax.get_legend().get_title().get_text()
    # Bessel std of (1, 3) is sqrt(2): the band spans 2 - 1.414 .. 2 + 1.414 at round 0.
    (band,) = ax.collections
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() == pytest.approx(2.0 - 2**0.5)
    plt.close(fig)


@pytest.mark.parametrize(
    "kwargs, argname",
    [
        ({"curves": {}}, "curves"),
        ({"curves": {"rewards": torch.zeros(5)}}, "curves"),
        ({"band": "iqr"}, "band"),
        ({"max_reward": "five"}, "max_reward"),
    ],
)
def test_reward_curves_bad_input(kwargs, argname):
    with pytest.raises(ValueError, match=argname):
        plot_reward_curves_by_mode(**kwargs)
    plt.close("all")


# ---------------------------------------------------------------------------
# plot_baseline_variance and the widget
# ---------------------------------------------------------------------------


def test_baseline_variance_plot_default_arguments():
    fig = plot_baseline_variance()
    assert isinstance(fig, Figure)
    left, right = fig.axes
    assert len(variance.default_group_variance_table().group_sizes) == 31  # G = 2 .. 32
    # one line per baseline, plus the chosen point and the vertical line at the chosen G
    assert len(left.get_lines()) == len(variance.BASELINES) + 2
    assert len(_bars(right)) == 40  # the histogram
    plt.close(fig)


@pytest.mark.parametrize("baseline", variance.BASELINES)
def test_baseline_variance_plot_highlights_the_chosen_baseline(small_table, baseline):
    fig = plot_baseline_variance(group_size=3, baseline=baseline, table=small_table)
    left, right = fig.axes
    lines = left.get_lines()[: len(variance.BASELINES)]
    widths = {line.get_label(): line.get_linewidth() for line in lines}
    chosen = variance.BASELINE_LABELS[baseline]
    assert widths[chosen] == max(widths.values()) and sorted(widths.values())[-2] < widths[chosen]
    assert list(lines[0].get_xdata()) == [2, 3, 4, 5]
    assert "G = 3" in left.get_title()
    plt.close(fig)


@pytest.mark.parametrize(
    "kwargs, argname",
    [
        ({"group_size": 40}, "group_size"),
        ({"baseline": "median"}, "baseline"),
        ({"table": "table"}, "table"),
    ],
)
def test_baseline_variance_plot_bad_input(small_table, kwargs, argname):
    kwargs = {"table": small_table, "group_size": 2, **kwargs}
    with pytest.raises(ValueError, match=argname):
        plot_baseline_variance(**kwargs)


def test_baseline_variance_widget_controls_and_redraw_only_plots(monkeypatch):
    widget = baseline_variance_widget()
    assert isinstance(widget, SliderPlot)
    size, menu = widget.sliders["group_size"], widget.sliders["baseline"]
    assert isinstance(size, ipywidgets.IntSlider) and size.description == "group_size"
    assert (size.min, size.max, size.value) == (2, 32, 8)
    assert isinstance(menu, ipywidgets.Dropdown)
    assert [value for _, value in menu.options] == list(variance.BASELINES)

    # A redraw only plots the table measured when the widget was built (a wall-clock bound would measure the
    # machine's load too): measuring again during a redraw is an error here.
    def measured_again(*args, **kwargs):
        raise AssertionError("a redraw measured the variances again: it should only plot the widget's table")

    monkeypatch.setattr(variance, "group_variance_table", measured_again)
    monkeypatch.setattr(variance, "default_group_variance_table", measured_again)
    size.value = 16
    menu.value = "group_mean"
    assert widget.values() == {"group_size": 16, "baseline": "group_mean"}
    assert plt.get_fignums() == []  # every figure closed once shown
    plt.close(widget.redraw())  # and directly, where an error in a slider's callback cannot be caught
