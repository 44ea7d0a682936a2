"""Chapter 11's plots draw from records shaped like the benchmark's (no training needed)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_lib.plotting import family as plots  # noqa: E402

KEYS = ("completions", "mean_reward", "mean_length", "kl", "clip_fraction", "frac_zero_std")


def _rec(score, n=3):
    curves = {k: torch.linspace(0.0, 1.0, n + 2) for k in KEYS}
    curves["completions"] = torch.tensor([100.0, 200.0, 300.0, 400.0, 500.0])[: n + 2]
    return {
        "score": score,
        "eval_completions": torch.tensor([0.0, 250.0, 500.0]),
        "eval_score": torch.tensor([0.2, 0.5, score]),
        "curves": curves,
    }


RUNS = {"GRPO": [_rec(0.6), _rec(0.8)], "RLOO": [_rec(0.7), _rec(0.9, n=2)], "DAPO": [_rec(0.5)]}


def test_plots_draw():
    figs = [plots.plot_family_curves(RUNS, cols=2), plots.plot_family_scores(RUNS), plots.plot_family_diagnostics(RUNS)]
    assert [len(f.axes) for f in figs] == [4, 1, 4]
    grpo = figs[0].axes[0]
    assert grpo.lines[2].get_ydata()[[0, 12, 24]].tolist() == pytest.approx([0.2, 0.5, 0.7]), "the seeds' mean"
    rloo = figs[0].axes[1]
    assert rloo.lines[3].get_ydata()[[0, 12, 24]].tolist() == pytest.approx([0.2, 0.5, 0.7]), "GRPO's mean dashed"
    assert [t.get_text() for t in figs[1].axes[0].get_yticklabels()] == ["DAPO", "GRPO", "RLOO"], "by mean"
    assert figs[2].axes[0].lines[1].get_xdata()[-1] == pytest.approx(0.4), "up to the shortest seed's last x (k)"
    assert figs[2].axes[1].get_yscale() == "log", "the KL on a log scale"
    plt.close("all")


def test_plots_reject_empty_runs():
    with pytest.raises(ValueError, match="runs"):
        plots.plot_family_scores({})
    with pytest.raises(ValueError, match="runs"):
        plots.plot_family_curves({"GRPO": []})
    with pytest.raises(ValueError, match="cols"):
        plots.plot_family_curves(RUNS, cols=0)
