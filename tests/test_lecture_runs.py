"""The precomputed runs of lecture notebooks 05, 06 and 07 (course_lib.lectures.lecture_runs): stored, loaded, drawn."""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after choosing the backend

from course_lib import plotting
from course_lib.lectures import lecture_runs
from course_lib.lectures.lecture_runs import history_from_json, history_to_json, load_lecture_runs, rounded
from course_lib.trainers.grpo_trainer import GRPOHistory
from course_lib.trainers.pg_trainer import PGHistory
from course_lib.trainers.ppo_trainer import PPOHistory

DATA = Path(lecture_runs.__file__).parent / "data"


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _lengths(history) -> set[int]:
    return {len(value) for value in vars(history).values() if isinstance(value, list) and value}


@pytest.mark.parametrize("notebook", lecture_runs.NOTEBOOKS)
def test_the_stored_files_are_small_and_say_who_wrote_them(notebook):
    path = DATA / f"lecture_{notebook}.json"
    assert path.stat().st_size < 300_000
    meta = json.loads(path.read_text())["meta"]
    assert meta["generated_by"] == f"benchmarks/lecture_{notebook}.py"
    assert meta["threads"] == 1 and meta["total_seconds"] > 0


def test_notebook_05_runs_load_as_ppo_histories():
    runs = load_lecture_runs("05")
    assert isinstance(runs["cartpole"], PPOHistory) and _lengths(runs["cartpole"]) == {30}
    assert runs["cartpole"].steps[-1] == 31 * 8 * 128  # the update by hand, then 30: N * T steps each
    assert list(runs["pitfalls"]) == ["right: exp(logp - logp_old)", "logp_old attached", "logp / logp_old"]
    assert all(isinstance(h, PPOHistory) and _lengths(h) == {15} for h in runs["pitfalls"].values())
    assert list(runs["lm"]) == ["kl_coef = 0.05", "kl_coef = 0.5"]
    assert all(_lengths(h) == {60} for h in runs["lm"].values())
    assert all(math.isnan(v) for v in runs["cartpole"].kl)  # no reference on CartPole: stored null, loaded NaN
    tokens = runs["lm_tokens"]
    assert all(len(tokens[key]) == 3 for key in ("prompt", "response", "rewards", "values", "advantages"))
    fig = plotting.plot_ppo_runs(runs["lm"], metrics=("mean_return", "kl", "explained_variance"))
    assert len(fig.axes) == 3 and all(len(ax.lines) == 2 for ax in fig.axes)


def test_notebook_06_runs_load_as_histories_with_what_the_trained_models_said():
    runs = load_lecture_runs("06")
    assert list(runs["pg_runs"]) == ["rewards", "centered_rewards", "normalized_rewards"]
    assert len(runs["grpo_runs"]) == 6 and "GRPO (course default)" in runs["grpo_runs"]
    for kind, cls in (("pg", PGHistory), ("grpo", GRPOHistory)):
        assert runs[f"{kind}_finals"].keys() == runs[f"{kind}_runs"].keys()
        for label, histories in runs[f"{kind}_runs"].items():
            assert len(histories) == 3 and all(isinstance(h, cls) and _lengths(h) == {100} for h in histories)
            assert all(len(row) == 3 for h in histories for row in h.greedy_reward)  # one per prompt
            finals = runs[f"{kind}_finals"][label]
            assert len(finals["greedy"]) == len(finals["entropy"]) == 3
            assert all(0 <= g <= 5 for g in finals["greedy"]) and all(0 <= e <= math.log(5) for e in finals["entropy"])
            assert [len(answers) for answers in finals["answers"]] == [3, 3, 3]  # B = 3 greedy responses
    fig = plotting.plot_sorting_curves(runs["grpo_runs"], fields=("entropy", "all_equal_fraction", "clip_fraction"))
    assert len(fig.axes) == 3 and all(len(ax.lines) == 6 for ax in fig.axes)


def test_notebook_07_runs_load_as_the_curves_of_compare():
    runs = load_lecture_runs("07")
    for task, seeds in (("sorting", 3), ("cartpole", 2)):
        curves = runs[task]["runs"]
        assert list(curves) == ["GRPO", "PPO"] and all(len(c) == seeds for c in curves.values())
        for curve in (c for label in curves.values() for c in label):
            assert len({len(curve[key]) for key in ("samples", "seconds", "reward")}) == 1
            assert curve["seconds"] == sorted(curve["seconds"])
    assert all(len(c["samples"]) == 60 and c["samples"][-1] == 1800 for c in runs["sorting"]["runs"]["GRPO"])
    assert all(c["samples"][-1] >= 25_000 and "final_eval" in c for c in runs["cartpole"]["runs"]["PPO"])
    fig = plotting.plot_budget_curves(runs["sorting"]["runs"], max_reward=5.0)
    assert len(fig.axes) == 2


def test_a_history_survives_the_round_trip_rounded():
    history = PPOHistory()
    history.append(
        {
            "steps": 1024,
            "mean_return": math.nan,
            "loss": 1.23456789,
            "policy_loss": -0.001234567,
            "value_loss": 3.0,
            "entropy": 0.69,
            "approx_kl": 1e-5,
            "clip_fraction": 0.0,
            "explained_variance": -0.5,
            "kl": math.nan,
        }
    )
    stored = json.loads(json.dumps(history_to_json(history, digits=3)))
    assert stored["fields"]["mean_return"] == [None] and stored["fields"]["steps"] == [1024]
    back = history_from_json(stored)
    assert isinstance(back, PPOHistory) and math.isnan(back.mean_return[0])
    assert back.loss == [1.23] and back.policy_loss == [-0.00123] and back.value_loss == [3]
    assert rounded([[5.0, 3.3333333]], 4) == [[5, 3.333]]


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="notebook"):
        load_lecture_runs("08")
    with pytest.raises(ValueError, match="fields"):
        history_to_json(PPOHistory(), fields=("reward",))
    with pytest.raises(ValueError, match="history"):
        history_to_json({"steps": []})
    with pytest.raises(ValueError, match="data"):
        history_from_json({"history": "Unknown", "fields": {}})
