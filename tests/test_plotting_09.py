"""Chapter 09's plots draw the shipped results' shapes and reject what is not."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from course_lib.plotting.scaling import RUN_LABELS, plot_step_rewards, plot_three_runs, plot_trl_metrics  # noqa: E402

NAN = float("nan")


def _results(seeds=("100", "101")):
    ev = {"iteration": [0, 25, 50], "score": [0.3, 0.6, 0.9]}
    return {"seeds": {s: {run: {"eval": ev} for run in RUN_LABELS} for s in seeds}}


def test_three_runs_one_panel_per_seed_three_lines_each():
    fig = plot_three_runs(_results())
    assert len(fig.axes) == 2 and all(len(ax.get_lines()) == 4 for ax in fig.axes)  # 3 runs + the maximum
    assert "0.90" in fig.axes[0].get_legend().get_texts()[0].get_text()
    plt.close(fig)
    with pytest.raises(ValueError, match="results"):
        plot_three_runs({"seeds": {}})


def test_trl_metrics_skip_the_steps_without_rewards():
    log = {"reward": [1.0, NAN, 1.5, NAN], "rewards/exact/mean": [0.2, NAN, 0.4, NAN], "kl": [0.0, 0.1, 0.2, 0.3]}
    fig = plot_trl_metrics(log, num_iterations=2)
    reward_line = [line for line in fig.axes[0].get_lines() if line.get_label() == "reward"][0]
    assert list(reward_line.get_xdata()) == [0, 1]  # rounds, NaN rows dropped
    kl_line = [line for line in fig.axes[3].get_lines() if line.get_label().startswith("kl")][0]
    assert list(kl_line.get_ydata()) == [0.1, 0.3]  # one point per round: the median (upper middle) of its steps
    plt.close(fig)
    with pytest.raises(ValueError, match="log"):
        plot_trl_metrics({"kl": [0.0]}, num_iterations=1)


def test_step_rewards_one_point_per_generated_batch():
    rows = [
        {"step": s, "reward": r, "rewards/answer_reward/mean": r / 2}
        for s, r in [(1, 0.1), (2, 0.1), (3, 0.5), (4, 0.5)]
    ]
    fig = plot_step_rewards([0.2, 0.4], rows, num_iterations=2, max_reward=1.5)
    trl = [line for line in fig.axes[0].get_lines() if line.get_label() == "TRL GRPOTrainer"][0]
    assert list(trl.get_ydata()) == [0.1, 0.5]
    plt.close(fig)
    with pytest.raises(ValueError, match="course_rewards"):
        plot_step_rewards([], rows, 2, 1.5)
