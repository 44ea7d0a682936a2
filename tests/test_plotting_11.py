"""Chapter 11's plots draw from data shaped like the benchmark's (no training needed)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from course_lib.lectures import group_estimators  # noqa: E402
from course_lib.plotting import family as plots  # noqa: E402


def _rec(variant, seed, score, rounds=6):
    return {
        "testbed": "drift",
        "variant": variant,
        "seed": seed,
        "score": score,
        "start": 0.3,
        "final": {"truncated": score / 2},
        "curves": {
            "completions": [100.0 * (i + 1) for i in range(rounds)],
            "kl": [0.01 * i for i in range(rounds)],
            "silenced_low_prob": [None] + [0.5] * (rounds - 1),
        },
    }


RUNS = [_rec("GRPO", 1, 0.6), _rec("GRPO", 2, 0.8), _rec("GSPO", 1, 0.7), _rec("GSPO", 2, 0.9, rounds=4)]


@pytest.fixture(scope="module")
def table():
    return group_estimators.estimator_testbed(group_sizes=(2, 8), num_batches=100)


def test_prompt_weights(table):
    fig = plots.plot_prompt_weights(table, group_size=8)
    left, right = fig.axes
    assert left.get_xscale() == "logit" and right.get_xscale() == "log"
    exact_lines = [line for line in left.lines if len(line.get_xdata()) == 16 and line.get_linestyle() == "-"]
    assert len(exact_lines) >= 4, "an exact line for each per-group estimator"
    assert len(fig.legends) == 1 and len(fig.legends[0].get_texts()) == len(group_estimators.ESTIMATORS)
    with pytest.raises(ValueError, match="group_size"):
        plots.plot_prompt_weights(table, group_size=3)
    plt.close("all")


def test_testbed_curves_and_scores():
    fig = plots.plot_testbed_curves(RUNS, "drift", [("kl", "KL"), ("silenced_low_prob", "silenced")])
    kl = fig.axes[0]
    grpo, gspo = kl.lines[:2]
    assert grpo.get_xdata()[-1] == pytest.approx(0.6) and gspo.get_xdata()[-1] == pytest.approx(0.4), (
        "each variant on one grid, from its seeds' first to their shortest last x (thousands)"
    )
    assert gspo.get_xdata()[0] == pytest.approx(0.1) and gspo.get_ydata()[-1] == pytest.approx(0.03)
    assert fig.axes[1].lines[0].get_ydata()[0] == pytest.approx(0.5), "a round without the quantity is skipped"
    assert all(ax.get_ylim()[0] == 0 for ax in fig.axes), "from 0: a small wobble is not blown up"
    assert len(fig.legends) == 1, "one legend, outside the panels"
    fig = plots.plot_testbed_scores(RUNS, "drift")
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["GSPO", "GRPO"], "the baseline on top"
    assert fig.axes[0].lines[0].get_xdata()[0] == pytest.approx(0.8), "GSPO's mean"
    fig = plots.plot_testbed_scores(RUNS, "drift", key="final.truncated", label="cut off")
    assert fig.axes[0].get_legend() is None, "the warm-up's line only for the accuracy"
    with pytest.raises(ValueError, match="runs"):
        plots.plot_testbed_scores(RUNS, "length")
    plt.close("all")


def test_paired_differences_one_panel_per_measured_number():
    from course_lib.lectures import family_v2

    recipes = {"drift/GRPO": {"hash": "g", "lr": 1e-3}, "drift/GSPO": {"hash": "s", "lr": 1e-3}}
    runs = [{**r, "recipe_hash": "g" if r["variant"] == "GRPO" else "s"} for r in RUNS]
    runs += [{**r, "seed": 3} for r in runs[:1]] + [{**r, "seed": 3, "score": 0.5} for r in runs[2:3]]
    judged = family_v2.verdicts(family_v2.differences(runs, recipes, ("drift",)))
    fig = plots.plot_paired_differences(judged)
    (ax,) = fig.axes  # the drift testbed reads one number: test accuracy
    assert [t.get_text() for t in ax.get_yticklabels()] == ["GSPO - GRPO (tuned): not seen"]
    assert len(ax.collections[0].get_offsets()) == 3  # one dot per seed
    plt.close(fig)
    with pytest.raises(ValueError, match="judged"):
        plots.plot_paired_differences([])
