"""Tests of chapter 06's plots and widget (course_lib.plotting, course_lib.plotting.widgets), without a browser."""

from __future__ import annotations

import math

import matplotlib
import pytest
import torch
from matplotlib.figure import Figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after choosing the backend

from course_lib import plotting
from course_lib.plotting.widgets import SliderPlot, grpo_group_widget
from course_lib.trainers.grpo_trainer import GRPOHistory


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _history(n_epochs=5, level=3.0):
    h = GRPOHistory()
    for e in range(n_epochs):
        h.mean_reward.append(level + 0.1 * e)
        h.greedy_reward.append([level, level + 1.0, 5.0])
        h.entropy.append(1.6 / (e + 1))
        h.all_equal_fraction.append(e / n_epochs)
        h.kl.append(0.01 * e)
        h.clip_fraction.append(0.1)
    return h


def _bars(ax):
    return [p for p in ax.patches if isinstance(p, matplotlib.patches.Rectangle)]


# -- plot_sorting_curves ----------------------------------------------------------------


def test_sorting_curves_one_line_per_label_per_panel():
    fig = plotting.plot_sorting_curves({"a": _history(), "b": [_history(level=2.0), _history(level=4.0)]})
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    for ax in fig.axes:
        assert len([line for line in ax.get_lines() if len(line.get_xdata()) == 5]) == 2
    # The seeds are averaged: b's greedy curve is the mean of (2 + 3 + 5) / 3 and (4 + 5 + 5) / 3.
    greedy = [line for line in fig.axes[1].get_lines() if len(line.get_xdata()) == 5][1]
    assert greedy.get_ydata()[0] == pytest.approx(((2 + 3 + 5) / 3 + (4 + 5 + 5) / 3) / 2)


def test_sorting_curves_other_fields_and_bad_input():
    fig = plotting.plot_sorting_curves({"a": _history()}, fields=("entropy", "all_equal_fraction", "clip_fraction"))
    assert len(fig.axes) == 3
    with pytest.raises(ValueError, match="fields"):
        plotting.plot_sorting_curves({"a": _history()}, fields=("reward",))
    with pytest.raises(ValueError, match="histories"):
        plotting.plot_sorting_curves({})
    with pytest.raises(ValueError, match="histories"):
        plotting.plot_sorting_curves({"a": [_history(3), _history(4)]})


# -- plot_ablation --------------------------------------------------------------------------


def test_ablation_one_bar_per_configuration():
    results = {"x": [5.0, 4.0], "y": [3.0, 3.0, 4.0], "z": [5.0]}
    fig = plotting.plot_ablation(results)
    (ax,) = fig.axes
    bars = _bars(ax)
    assert len(bars) == 3
    assert [b.get_width() for b in bars] == pytest.approx([4.5, 10 / 3, 5.0])
    with pytest.raises(ValueError, match="results"):
        plotting.plot_ablation({})


# -- plot_kl_estimators ------------------------------------------------------------------


def test_kl_estimators_two_panels_three_lines():
    kl = [0.01, 0.1, 1.0]
    bias = {k: [0.0, 0.0, 0.0] for k in ("k1", "k2", "k3")}
    std = {k: [0.1, 0.2, 0.3] for k in ("k1", "k2", "k3")}
    fig = plotting.plot_kl_estimators(kl, bias, std)
    assert len(fig.axes) == 2
    assert all(len(ax.get_lines()) >= 3 for ax in fig.axes)
    with pytest.raises(ValueError, match="bias"):
        plotting.plot_kl_estimators(kl, {"k1": [0, 0, 0]}, std)
    with pytest.raises(ValueError, match="std"):
        plotting.plot_kl_estimators(kl, {"k1": [0, 0, 0]}, {"k1": [1.0, 2.0]})


# -- token weights ---------------------------------------------------------------------------


def test_token_gradient_weights_hand_computed():
    # Two responses of 2 and 6 tokens, advantages +1 and -1, N = 2 responses, T = 6:
    # seq-mean-token-mean: +1 / (2 * 2) = 0.25 and -1 / (2 * 6); token-mean: +-1 / 8; Dr. GRPO: +-1 / (2 * 6).
    w = plotting.token_gradient_weights((2, 6), (1.0, -1.0), "seq-mean-token-mean")
    torch.testing.assert_close(w[0, :2], torch.full((2,), 0.25, dtype=torch.float64))
    torch.testing.assert_close(w[1], torch.full((6,), -1 / 12, dtype=torch.float64))
    assert w[0, 2:].abs().sum() == 0  # padding gets nothing
    torch.testing.assert_close(
        plotting.token_gradient_weights((2, 6), (1.0, -1.0), "token-mean")[1, 0],
        torch.tensor(-1 / 8, dtype=torch.float64),
    )
    torch.testing.assert_close(
        plotting.token_gradient_weights((2, 6), (1.0, -1.0), "seq-mean-token-sum-norm")[0, 0],
        torch.tensor(1 / 12, dtype=torch.float64),
    )


def test_token_weights_plot_one_bar_per_token():
    fig = plotting.plot_token_weights()
    assert len(fig.axes) == 3
    assert all(len(_bars(ax)) == 2 + 4 + 8 for ax in fig.axes)
    with pytest.raises(ValueError, match="lengths"):
        plotting.plot_token_weights(lengths=(0, 3), advantages=(1.0, -1.0))
    with pytest.raises(ValueError, match="advantages"):
        plotting.plot_token_weights(lengths=(2, 3), advantages=(1.0,))


# -- group signal and its widget ---------------------------------------------------------


def test_group_signal_curves_exact_values():
    curves = plotting.group_signal_curves(group_size=2, n_points=1)  # p = 0.5 only
    # G = 2, p = 0.5: P(both equal) = 0.25 + 0.25; the mixed group (1, 0) has advantages
    # +-0.5 centred and +-0.5 / (std = sqrt(0.5)) = +-0.7071 normalised.
    assert curves["p"].tolist() == [0.5]
    assert curves["all_equal"].item() == pytest.approx(0.5)
    assert curves["abs_adv_centred"].item() == pytest.approx(0.5)
    assert curves["abs_adv_std"].item() == pytest.approx(0.5 / (math.sqrt(0.5) + 1e-6))
    with pytest.raises(ValueError, match="group_size"):
        plotting.group_signal_curves(group_size=1)


def test_group_signal_plot_and_widget():
    fig = plotting.plot_group_signal()
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert len(fig.axes[0].get_lines()) == 1 and len(fig.axes[1].get_lines()) == 2
    plt.close(fig)
    widget = grpo_group_widget(group_size=4)
    assert isinstance(widget, SliderPlot)
    widget.sliders["group_size"].value = 16
    assert widget.values() == {"group_size": 16}
    assert plt.get_fignums() == []  # the widget closes what it draws
    with pytest.raises(ValueError, match="group_size"):
        grpo_group_widget(group_size=1)
