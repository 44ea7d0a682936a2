"""Chapter 10's plots draw from plain history dicts (no training needed)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from course_lib.plotting import reasoning as plots  # noqa: E402

STYLES = ("direct", "scratchpad", "filler", "malformed")


def history(shift: float = 0.0, rounds: int = 6) -> dict:
    share = [min(1.0, 0.5 + 0.1 * i + shift) for i in range(rounds)]
    return {
        "style_share": {
            "scratchpad": share,
            "direct": [1 - s for s in share],
            "filler": share,
            "malformed": [0.0] * rounds,
        },
        "style_accuracy": {
            "scratchpad": [0.6] * rounds,
            "direct": [0.2] * (rounds - 1) + [float("nan")],
            "filler": [0.3] * rounds,
            "malformed": [float("nan")] * rounds,
        },
        "mean_length": [9.0 + i for i in range(rounds)],
        "eval": {"iteration": [0, 3, 6], "score": [0.6 + shift, 0.8, 0.9 + shift]},
    }


def test_trailing_mean_by_hand():
    assert plots.trailing_mean(np.array([1.0, 3.0, 5.0]), 2).tolist() == [1.0, 2.0, 4.0]
    assert plots.trailing_mean(np.array([[1.0, 3.0], [2.0, 2.0]]), 1).tolist() == [[1.0, 3.0], [2.0, 2.0]]
    with pytest.raises(ValueError, match="k"):
        plots.trailing_mean(np.ones(3), 0)


def test_plots_draw():
    hs = [history(0.0), history(-0.2)]
    figs = [
        plots.plot_style_curves(hs),
        plots.plot_filler_control({"grpo": hs, "token_mean": hs, "drgrpo": hs}),
        plots.plot_pass_at_k([{"1": 0.4, "64": 0.99}] * 2, [{1: 0.9, 64: 0.99}] * 2),
    ]
    assert [len(f.axes) for f in figs] == [4, 6, 1], "the filler control: 2 rows x one column per aggregation"
    mean_line = figs[0].axes[0].lines[2].get_ydata()  # after the two seeds' thin lines: the mean, trailing over 3
    assert mean_line[1] == pytest.approx(((0.5 + 0.6) / 2 + (0.3 + 0.4) / 2) / 2)
    worst = figs[0].axes[3].lines[-2].get_ydata()  # the last is the 0.9 line
    assert list(worst) == pytest.approx([0.4, 0.8, 0.7]), "the worst seed by its last evaluation"
    assert figs[0].axes[3].get_legend_handles_labels()[1][-1] == "0.9 (the bar)", "the bar's line is labelled"
    assert "3-round mean" in figs[0].axes[0].get_title(), "the smoothing is said"
    # direct answers fall to 0.5 - 0.2 = 0.3 of 512 and below: still drawn; a style under 20 samples a round is not
    direct_mean = figs[0].axes[2].lines[5].get_ydata()  # scratchpad: 2 thin + mean; direct: 2 thin + mean
    assert np.isfinite(direct_mean[:4]).all()
    plt.close("all")


def test_bad_arguments():
    with pytest.raises(ValueError, match="histories"):
        plots.plot_style_curves([])
    with pytest.raises(ValueError, match="histories"):
        plots.plot_style_curves([history(rounds=6), history(rounds=5)])
    with pytest.raises(ValueError, match="runs"):
        plots.plot_filler_control({})
    with pytest.raises(ValueError, match="after"):
        plots.plot_pass_at_k([{1: 0.5}], [])
    plt.close("all")
