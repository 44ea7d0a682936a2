"""Tests of chapter 04's plots (course_lib.plotting) and of its widget (course_lib.plotting.widgets.gae_widget)."""

from __future__ import annotations

import matplotlib
import pytest
import torch
from matplotlib.figure import Figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from course_lib.lectures import chain
from course_lib.plotting import (
    plot_bias_variance,
    plot_gae_on_chain,
    plot_nstep_weights,
    plot_token_gae,
    plot_truncation_errors,
)
from course_lib.plotting.widgets import SliderPlot, gae_widget


@pytest.fixture(autouse=True)
def _no_figures_left(no_figures_left_behind):
    """Every test here must close the figures it opens (tests/conftest.py)."""


def _bars(ax):
    return [p for p in ax.patches if isinstance(p, matplotlib.patches.Rectangle)]


def _labels(ax):
    return [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]


# ---------------------------------------------------------------------------
# plot_nstep_weights
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("lam, horizon", [(0.9, 20), (0.5, 6), (0.0, 4), (1.0, 3)])
def test_nstep_weights_one_bar_per_estimator(lam, horizon):
    fig = plot_nstep_weights(lam=lam, horizon=horizon)
    assert isinstance(fig, Figure)
    bars = _bars(fig.axes[0])
    assert len(bars) == horizon
    for n, bar in enumerate(bars, start=1):
        assert bar.get_height() == pytest.approx((1 - lam) * lam ** (n - 1))  # lam = 0: all weight on n = 1
    plt.close(fig)


def test_nstep_weights_says_what_is_left_beyond_the_chart():
    fig = plot_nstep_weights(lam=0.5, horizon=3)
    texts = " ".join(t.get_text() for t in fig.axes[0].get_legend().get_texts())
    assert "0.125" in texts  # 1 - (0.5 + 0.25 + 0.125) = 0.5^3
    plt.close(fig)


@pytest.mark.parametrize(
    "kwargs, argname", [({"lam": 1.2}, "lam"), ({"horizon": 0}, "horizon"), ({"horizon": 2.0}, "horizon")]
)
def test_nstep_weights_bad_input(kwargs, argname):
    with pytest.raises(ValueError, match=argname):
        plot_nstep_weights(**kwargs)


# ---------------------------------------------------------------------------
# plot_gae_on_chain and gae_widget
# ---------------------------------------------------------------------------


def test_gae_on_chain_draws_truth_and_estimates_for_both_actions():
    fig = plot_gae_on_chain()
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert _labels(ax) == ["truth Q(s, right) − V̂(s)", "truth Q(s, left) − V̂(s)"]
    assert len(ax.containers) == 2  # one error-bar container per action
    n_states = chain.Chain().n_states
    right = ax.get_lines()[0]
    assert len(right.get_xdata()) == n_states
    # the plotted truth is Q - V_hat for the default critic
    ch = chain.Chain()
    target = chain.true_q_values(ch, 0.95) - chain.imperfect_critic(ch, 0.95, noise=0.3)[:, None]
    assert right.get_ydata() == pytest.approx(target[:, chain.RIGHT].tolist())
    assert "bias²" in ax.get_title() and "MSE" in ax.get_title()
    plt.close(fig)


def test_gae_on_chain_changes_with_lam():
    a, b = plot_gae_on_chain(lam=0.5), plot_gae_on_chain(lam=0.55)
    means = [fig.axes[0].containers[0].lines[0].get_ydata() for fig in (a, b)]
    assert means[0] != pytest.approx(means[1])
    assert a.axes[0].get_title() != b.axes[0].get_title()
    plt.close(a)
    plt.close(b)


@pytest.mark.parametrize("gamma, lam", [(0.5, 0.0), (1.0, 1.0), (0.0, 0.3)])
def test_gae_on_chain_at_the_edges(gamma, lam):
    plt.close(plot_gae_on_chain(gamma=gamma, lam=lam))


@pytest.mark.parametrize(
    "kwargs, argname",
    [({"gamma": 1.1}, "gamma"), ({"lam": -0.1}, "lam"), ({"noise": -1.0}, "noise"), ({"n_episodes": 0}, "n_episodes")],
)
def test_gae_on_chain_bad_input(kwargs, argname):
    with pytest.raises(ValueError, match=argname):
        plot_gae_on_chain(**kwargs)


def test_gae_on_chain_samples_its_batch_once(monkeypatch):
    # The widget redraws on every slider step, so a redraw must not sample the episodes again: the batch of
    # (n_episodes, seed) is sampled once and reused. (How fast a redraw is, the browser test measures.)
    plt.close(plot_gae_on_chain(lam=0.5))

    def sampled_again(*args, **kwargs):
        raise AssertionError("plot_gae_on_chain sampled the episodes again: they should be cached")

    monkeypatch.setattr(chain, "sample_episodes", sampled_again)
    for lam in (0.1, 0.35, 0.6, 0.85):
        plt.close(plot_gae_on_chain(lam=lam, gamma=0.9))


def test_gae_widget_sliders_and_redraw(capsys):
    widget = gae_widget()
    assert isinstance(widget, SliderPlot) and widget.plot_fn is plot_gae_on_chain
    gamma, lam = widget.sliders["gamma"], widget.sliders["lam"]
    assert (gamma.description, gamma.min, gamma.max, gamma.step, gamma.value) == ("gamma", 0.5, 1.0, 0.01, 0.95)
    assert (lam.description, lam.min, lam.max, lam.step, lam.value) == ("lam", 0.0, 1.0, 0.05, 0.5)
    assert lam.continuous_update and lam.readout
    before = widget.redraw().axes[0].get_title()
    lam.value = lam.value + lam.step  # what ArrowRight does in the browser
    after = widget.redraw().axes[0].get_title()
    assert "λ = 0.55" in after and before != after
    assert plt.get_fignums() == []


# ---------------------------------------------------------------------------
# plot_bias_variance
# ---------------------------------------------------------------------------


def test_bias_variance_three_lines_and_the_exact_one():
    lams = torch.linspace(0, 1, 5)
    bias2 = torch.tensor([0.1, 0.07, 0.04, 0.02, 0.0])
    variance = torch.tensor([0.02, 0.03, 0.05, 0.1, 0.3])
    fig = plot_bias_variance(lams, bias2 + variance, bias2, variance)
    assert isinstance(fig, Figure)
    assert len(_labels(fig.axes[0])) == 3
    plt.close(fig)
    fig = plot_bias_variance(lams.tolist(), (bias2 + variance).tolist(), bias2, variance, exact_bias2=bias2)
    assert len(_labels(fig.axes[0])) == 4
    # the least-MSE lambda is marked: 0.12, 0.1, 0.09, 0.12, 0.3 -> lambda = 0.5
    assert "0.50" in " ".join(t.get_text() for t in fig.axes[0].texts)
    plt.close(fig)


def test_bias_variance_from_the_chain():
    ch = chain.Chain()
    episodes = chain.sample_episodes(ch, 100, seed=0)
    bv = chain.bias_variance(ch, episodes, chain.imperfect_critic(ch, 0.9), 0.9, [0.0, 0.5, 1.0])
    plt.close(plot_bias_variance(bv["lam"], bv["mse"], bv["bias2"], bv["variance"], bv["exact_bias2"]))


@pytest.mark.parametrize(
    "args, argname",
    [
        (([0.5], [1.0], [0.5], [0.5]), "lams"),
        (([0.0, 1.0], [1.0], [0.5, 0.5], [0.5, 0.5]), "mse"),
        (([0.0, 1.0], [1.0, 1.0], [0.5], [0.5, 0.5]), "bias2"),
        (([0.0, 1.0], [1.0, 1.0], [0.5, 0.5], [[0.5, 0.5]]), "variance"),
        (([0.0, 1.0], [1.0, 1.0], [0.5, 0.5], "abc"), "variance"),
    ],
)
def test_bias_variance_bad_input(args, argname):
    with pytest.raises(ValueError, match=argname):
        plot_bias_variance(*args)


# ---------------------------------------------------------------------------
# plot_truncation_errors and plot_token_gae
# ---------------------------------------------------------------------------


def test_truncation_errors_lines():
    k = torch.arange(6, dtype=torch.float64)
    fig = plot_truncation_errors(torch.zeros(6), -0.5 * 0.8**k)
    assert len(_labels(fig.axes[0])) == 2
    plt.close(fig)
    fig = plot_truncation_errors(torch.zeros(6), -0.5 * 0.8**k, gamma_lam=0.8)
    (ax,) = fig.axes
    assert len(_labels(ax)) == 3
    assert ax.get_lines()[2].get_ydata() == pytest.approx((-0.5 * 0.8**k).tolist())  # the predicted decay
    assert ax.xaxis_inverted()  # the cut on the right, as time runs
    plt.close(fig)


@pytest.mark.parametrize(
    "args, kwargs, argname",
    [
        (([0.0, 0.0], [0.0]), {}, "error_bootstrap"),
        (([0.0], [0.0]), {"gamma_lam": 1.5}, "gamma_lam"),
        (([], []), {}, "error_terminal"),
    ],
)
def test_truncation_errors_bad_input(args, kwargs, argname):
    with pytest.raises(ValueError, match=argname):
        plot_truncation_errors(*args, **kwargs)


def test_token_gae_bars_and_lines():
    T = 6
    fig = plot_token_gae(torch.zeros(T), torch.linspace(0, 1, T), torch.ones(T))
    (ax,) = fig.axes
    assert len(_bars(ax)) == T
    assert _labels(ax) == [r"value $V(s_t)$", r"advantage $\hat A_t$"]
    plt.close(fig)


@pytest.mark.parametrize(
    "args, argname",
    [
        (([0.0, 1.0], [0.0], [0.0, 1.0]), "values"),
        (([0.0, 1.0], [0.0, 1.0], [0.0]), "advantages"),
        ((torch.zeros(2, 3), torch.zeros(6), torch.zeros(6)), "rewards"),
    ],
)
def test_token_gae_bad_input(args, argname):
    with pytest.raises(ValueError, match=argname):
        plot_token_gae(*args)
