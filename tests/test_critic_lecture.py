"""Chapter 10's critic section reads the shipped report (course_lib.lectures.critic): by hand, on a tiny report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import course_lib
from course_lib.lectures import critic


def _run(phase, method, lr, seed, score):
    return {"phase": phase, "method": method, "lr": lr, "seed": seed, "score": score}


def _results():
    lrs = {"GRPO": 1e-3, "rung 5": 5e-4, "PPO": 5e-4}
    report = {"GRPO": [0.90, 0.80, 0.70], "rung 5": [0.92, 0.83, 0.71], "PPO": [0.95, 0.82, 0.74]}
    runs = [
        _run("report", method, lrs[method], 100 + i, score)
        for method, scores in report.items()
        for i, score in enumerate(scores)
    ]
    runs.append(_run("report", "PPO", 1e-3, 100, 0.10))  # another rate: never read as PPO's report
    tuning = [_run("tune", m, lr, s, 0.5 + 0.1 * s) for m in lrs for lr in (5e-4, 1e-3) for s in (0, 1)]
    tuning += [_run("tune", "PPO", 2.5e-4, s, 0.4) for s in (0, 1)]  # PPO alone: no matched rate
    recipes = {method: {"recipe": {"rl": {"lr": lr}}} for method, lr in lrs.items()}
    return {"runs": runs, "tuning": tuning, "recipes": recipes}


def test_report_scores_take_each_method_at_its_frozen_rate():
    scores = critic.report_scores(_results())
    assert list(scores) == ["GRPO", "rung 5", "PPO"]
    assert scores["PPO"] == {100: 0.95, 101: 0.82, 102: 0.74}


def test_differences_by_hand():
    d = critic.differences(critic.report_scores(_results()))
    # PPO - rung 5 per seed: +0.03, -0.01, +0.03 -> mean 0.05 / 3
    assert d["PPO - rung 5"].mean == pytest.approx(0.05 / 3)
    assert d["PPO - GRPO"].mean == pytest.approx((0.05 + 0.02 + 0.04) / 3)
    assert d["rung 5 - GRPO"].n == 3


def test_matched_differences_only_at_shared_rates():
    matched = critic.matched_differences(_results())
    assert sorted(matched["PPO - rung 5"]) == [5e-4, 1e-3]
    assert matched["PPO - GRPO"][1e-3].mean == pytest.approx(0.0)


def test_the_shipped_report_reads():
    path = Path(course_lib.__file__).parent / "lectures" / "data" / "critic_10.json"
    results = json.loads(path.read_text())
    scores = critic.report_scores(results)
    assert {len(by_seed) for by_seed in scores.values()} == {len(results["seeds"])}
    assert set(critic.differences(scores)) == set(critic.CONTRASTS)
