"""Tests of chapter 05's plots and widget: the clipped objective, PPO diagnostics, run comparisons."""

import math

import ipywidgets
import matplotlib
import pytest
import torch
from matplotlib.figure import Figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after choosing the backend

from course_lib.plotting import plot_ppo_clip, plot_ppo_diagnostics, plot_ppo_runs, ppo_clip_curves
from course_lib.plotting.widgets import SliderPlot, ppo_clip_widget
from course_lib.trainers.ppo_trainer import PPOHistory


@pytest.fixture(autouse=True)
def _no_figures_left(no_figures_left_behind):
    """Every test here must close the figures it opens (tests/conftest.py)."""


def _labelled_lines(ax):
    return [line for line in ax.get_lines() if not line.get_label().startswith("_")]


def _history(n=6, with_kl=False):
    history = PPOHistory()
    for i in range(n):
        history.append(
            {
                "steps": 1024 * (i + 1),
                "mean_return": math.nan if i == 2 else 20.0 + 10 * i,
                "loss": 1.0 / (i + 1),
                "policy_loss": -0.01,
                "value_loss": 5.0 - i,
                "entropy": 0.69 - 0.01 * i,
                "approx_kl": 0.001 * i,
                "clip_fraction": 0.02 * i,
                "explained_variance": 0.1 * i,
                "kl": 0.05 * i if with_kl else math.nan,
            }
        )
    return history


# ---------------------------------------------------------------------------
# The clipped objective
# ---------------------------------------------------------------------------


def test_clip_curves_by_hand():
    curves = ppo_clip_curves(clip_eps=0.2, ratio_max=2.0, n_points=20)  # ratios 0.1, 0.2, ..., 2.0
    r = curves["ratio"]
    assert len(r) == 20 and r[0] > 0

    def at(key, sign, ratio):
        return curves[key][sign][torch.argmin((r - ratio).abs())].item()

    # A = +1: objective min(r, clip(r)) = r below 1.2, 1.2 above; gradient 1, then 0.
    assert at("objective", +1, 0.5) == pytest.approx(0.5) and at("gradient", +1, 0.5) == pytest.approx(1.0)
    assert at("objective", +1, 1.5) == pytest.approx(1.2) and at("gradient", +1, 1.5) == 0.0
    # A = -1: objective min(-r, -clip(r)) = -0.8 below 0.8 (flat: gradient 0), -r above 0.8 (gradient -1).
    assert at("objective", -1, 0.5) == pytest.approx(-0.8) and at("gradient", -1, 0.5) == 0.0
    assert at("objective", -1, 1.5) == pytest.approx(-1.5) and at("gradient", -1, 1.5) == pytest.approx(-1.0)


def test_clip_curves_move_with_epsilon():
    wide = ppo_clip_curves(clip_eps=0.4)
    # With eps = 0.4 a ratio of 1.3 is inside the range: a good action still gets its full gradient.
    i = torch.argmin((wide["ratio"] - 1.3).abs())
    assert wide["gradient"][+1][i] == pytest.approx(1.0)
    assert ppo_clip_curves(clip_eps=0.2)["gradient"][+1][i] == 0.0


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(clip_eps=0.0), "clip_eps"),
        (dict(clip_eps=-0.1), "clip_eps"),
        (dict(ratio_max=0), "ratio_max"),
        (dict(n_points=1), "n_points"),
    ],
)
def test_clip_curves_reject_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ppo_clip_curves(**kwargs)


@pytest.mark.parametrize("clip_eps", [0.05, 0.2, 0.5])
def test_plot_ppo_clip_two_panels_two_lines_each(clip_eps):
    fig = plot_ppo_clip(clip_eps)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    for ax in fig.axes:
        assert [line.get_label() for line in _labelled_lines(ax)] == ["A = +1 (good action)", "A = -1 (bad action)"]
    assert f"{clip_eps:.2f}" in fig._suptitle.get_text()
    plt.close(fig)


def test_plot_ppo_clip_rejects_a_bad_epsilon():
    with pytest.raises(ValueError, match="clip_eps"):
        plot_ppo_clip(0.0)


def test_ppo_clip_widget_slider_and_redraw():
    widget = ppo_clip_widget()
    assert isinstance(widget, SliderPlot)
    (slider,) = widget.sliders.values()
    assert isinstance(slider, ipywidgets.FloatSlider) and slider.description == "clip_eps"
    assert (slider.min, slider.max, slider.step, slider.value) == (0.05, 0.5, 0.01, 0.2)
    assert slider.continuous_update
    slider.value = 0.3  # what ArrowRight does in the browser, ten times over
    fig = widget.redraw()
    assert "0.30" in fig._suptitle.get_text()


# ---------------------------------------------------------------------------
# Diagnostics and run comparisons
# ---------------------------------------------------------------------------


def test_plot_ppo_diagnostics_eight_panels_one_line_each():
    fig = plot_ppo_diagnostics(_history())
    assert isinstance(fig, Figure) and len(fig.axes) == 8
    assert all(len(ax.get_lines()) == 1 for ax in fig.axes)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[0] == "mean episode return" and titles[-1] == "total loss"  # no reference model: no KL panel
    # The update in which no episode ended (NaN) is skipped, not drawn as a gap or a zero.
    assert len(fig.axes[0].get_lines()[0].get_xdata()) == 5
    plt.close(fig)


def test_plot_ppo_diagnostics_shows_the_kl_to_the_reference_when_there_is_one():
    fig = plot_ppo_diagnostics(_history(with_kl=True).as_dict())
    assert fig.axes[-1].get_title() == "KL to the reference, per step"
    plt.close(fig)


def test_plot_ppo_runs_one_panel_per_metric_one_line_per_run():
    runs = {"right": _history(), "wrong": _history(4)}
    fig = plot_ppo_runs(runs, metrics=("mean_return", "entropy", "approx_kl"), title="compare")
    assert len(fig.axes) == 3
    assert all([line.get_label() for line in _labelled_lines(ax)] == ["right", "wrong"] for ax in fig.axes)
    plt.close(fig)
    fig = plot_ppo_runs({"only": _history().as_dict()})  # the default metric: the return
    assert len(fig.axes) == 1 and fig.axes[0].get_ylabel() == "mean episode return"
    plt.close(fig)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(histories={}), "histories"),
        (dict(histories=[1]), "histories"),
        (dict(histories={"a": PPOHistory()}), "histories"),
        (dict(histories={"a": None}, metrics=("reward",)), "metrics"),
        (dict(histories={"a": None}, metrics=()), "metrics"),
    ],
)
def test_plot_ppo_runs_rejects_bad_arguments(kwargs, name):
    if isinstance(kwargs["histories"], dict) and kwargs["histories"].get("a", 0) is None:
        kwargs["histories"]["a"] = _history()
    with pytest.raises(ValueError, match=name):
        plot_ppo_runs(**kwargs)  # and no figure is left open (the autouse fixture checks)


def test_plot_ppo_diagnostics_rejects_a_history_without_the_fields():
    with pytest.raises(ValueError, match="history"):
        plot_ppo_diagnostics({"steps": [1, 2], "mean_return": [1.0, 2.0]})
