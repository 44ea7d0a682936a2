"""Chapter 08's plots draw from plain history dicts (no training needed)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from course_lib.plotting import capstone as plots  # noqa: E402

HISTORY = {
    key: [0.1 * i for i in range(30)]
    for key in ("mean_reward", "mean_length", "kl", "clip_fraction", "frac_zero_std", "loss", "loss_on_policy")
}
EVAL = {"iteration": [0, 10, 20], "completions": [0, 100, 200], "seconds": [0.0, 1.0, 2.0], "score": [0.1, 0.5, 0.9]}
HISTORY["eval"] = EVAL


def test_plots_draw():
    figs = [
        plots.plot_grpo_run(HISTORY),
        plots.plot_loss_beside_reward(HISTORY),
        plots.plot_runs({"a": HISTORY, "b": HISTORY}, [("mean_length", "length"), ("kl", "KL")]),
        plots.plot_temperature_spread([0.5, 1.0], [0.8, 0.2], [0.1, 0.4]),
        plots.plot_grpo_vs_ppo(EVAL, EVAL),
    ]
    assert [len(f.axes) for f in figs] == [6, 2, 2, 2, 2]
    raw, line = (ln.get_ydata() for ln in figs[0].axes[1].lines)
    assert line[0] == 0.0 and abs(line[-1] - sum(HISTORY["mean_reward"][-10:]) / 10) < 1e-12, "a trailing mean"
    assert list(raw) == HISTORY["mean_reward"], "beside the raw rounds"
    assert figs[0].axes[1].get_legend_handles_labels()[1] == ["each round", "10-round mean"], "the smoothing is said"
    kl_rounds = figs[0].axes[3].lines[0].get_xdata()
    assert kl_rounds[0] == 1, "round 0's KL is exactly 0: not on a log axis"
    assert figs[3].axes[1].get_ylim()[0] == 0, "the reward spread's axis starts at 0"
    plt.close("all")


def test_ladder_plots_draw():
    evals = [
        {"iteration": [0, 10, 20], "score": [0.2, 0.6 + s, 0.9 + s], "seed": 1000 + i}
        for i, s in enumerate((0.0, -0.2, 0.05))
    ]
    fig = plots.plot_seed_curves({"GRPO": evals, "PPO": evals})
    assert len(fig.axes) == 2
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert labels[1] == "worst seed (1001: 0.700)"
    fig = plots.plot_ladder(
        ["GRPO", "+ a", "PPO"], [[0.9, 0.95], [0.92, 0.93], [0.8, 0.9]], [None, (0.0, 0.1), (-0.08, 0.05)]
    )
    colors = [line.get_color() for line in fig.axes[1].lines if line.get_marker() == "o"]
    assert colors == ["C7", "C3"], "an interval across 0 is grey (unresolved), one that excludes 0 red"
    fig = plots.plot_explained_variance({1000: [0.1] * 60, 1001: [-0.5, 0.5] * 29 + [-27.9, -3.0]})
    assert len(fig.axes) == 1
    assert fig.axes[0].get_ylim()[0] > -1.5, "one round at -28 must not squash every box into a line"
    assert [t.get_text() for t in fig.axes[0].texts] == ["2 below -1"], "the rounds under the axis are counted"
    plt.close("all")
