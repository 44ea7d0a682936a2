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
    line = figs[0].axes[1].lines[0].get_ydata()
    assert line[0] == 0.0 and abs(line[-1] - sum(HISTORY["mean_reward"][-10:]) / 10) < 1e-12, "a trailing mean"
    plt.close("all")
