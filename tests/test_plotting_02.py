"""Tests of chapter 02's plots and widget, without a browser."""

from __future__ import annotations

import matplotlib
import pytest
import torch
from matplotlib.figure import Figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after choosing the backend

from course_lib.plotting import plot_mc_gradient_error, plot_mc_gradient_estimate, plot_pg_reward_curves
from course_lib.plotting.widgets import SliderPlot, mc_gradient_widget


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_mc_gradient_error_defaults_follow_the_reference_line():
    fig = plot_mc_gradient_error()
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    rms, reference = ax.get_lines()  # the RMS over seeds, then sigma / sqrt(n)
    assert len(rms.get_xdata()) == 7
    # The measured RMS stays within a factor 1.5 of the exact prediction.
    ratio = torch.tensor(rms.get_ydata()) / torch.tensor(reference.get_ydata())
    assert ((ratio > 0.67) & (ratio < 1.5)).all()
    assert len(ax.collections) == 1  # the dots of single estimates


def test_mc_gradient_error_from_given_numbers_without_sigma():
    errors = torch.tensor([[1.0, 0.8], [0.5, 0.45], [0.26, 0.24]])
    fig = plot_mc_gradient_error([1, 4, 16], errors)
    (ax,) = fig.axes
    assert len(ax.get_lines()) == 2
    # Without sigma the reference line goes through the first RMS point.
    assert ax.get_lines()[1].get_ydata()[0] == pytest.approx(float(errors[0].pow(2).mean().sqrt()))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(n_samples=[1, 4], errors=torch.ones(3, 2)), "errors"),
        (dict(n_samples=[0, 4], errors=torch.ones(2, 2)), "n_samples"),
        (dict(n_samples=[1, 4], errors=None), "errors"),
        (dict(n_samples=[1, 4], errors=torch.ones(2, 2), sigma=-1.0), "sigma"),
    ],
)
def test_mc_gradient_error_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        plot_mc_gradient_error(**kwargs)


def test_mc_gradient_estimate_draws_two_bars_per_action():
    fig = plot_mc_gradient_estimate()
    (ax,) = fig.axes
    assert len(ax.patches) == 10  # 5 actions, exact and estimate
    fig = plot_mc_gradient_estimate(n_samples=4, seed=3, logits=[0.0, 1.0], rewards=[1.0, 0.0])
    assert len(fig.axes[0].patches) == 4
    with pytest.raises(ValueError, match="n_samples"):
        plot_mc_gradient_estimate(n_samples=0)
    with pytest.raises(ValueError, match="rewards"):
        plot_mc_gradient_estimate(logits=[0.0, 1.0], rewards=[1.0])


def test_pg_reward_curves_one_line_per_seed_plus_mean():
    fig = plot_pg_reward_curves()
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert len(ax.get_lines()) == 3 + 1 + 1  # three seeds, their mean, the maximum
    curves = {"dense": torch.rand(4, 10), "sparse": [[0.0, 0.5, 1.0]]}
    fig = plot_pg_reward_curves(curves, max_reward=None)
    assert len(fig.axes[0].get_lines()) == (4 + 1) + (1 + 1)
    with pytest.raises(ValueError, match="curves"):
        plot_pg_reward_curves({})
    with pytest.raises(ValueError, match="curves"):
        plot_pg_reward_curves({"bad": torch.ones(2, 3, 4)})


def test_mc_gradient_widget_redraws_on_slider_change():
    widget = mc_gradient_widget()
    assert isinstance(widget, SliderPlot)
    assert widget.values() == {"n_samples": 16, "seed": 0}
    widget.sliders["n_samples"].value = 256
    fig = widget.redraw()
    assert "n = 256" in fig.axes[0].get_title()
    with pytest.raises(ValueError, match="n_samples"):
        mc_gradient_widget(n_samples=10)
