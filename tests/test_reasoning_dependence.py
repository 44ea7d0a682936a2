"""Chapter 10's measure of how strongly the answer follows the work (lectures.reasoning_stats.work_answer_*)."""

import json
import math
from pathlib import Path

import pytest

import course_lib
from course_lib.lectures.protocol import paired_difference
from course_lib.lectures.reasoning_stats import work_answer_counts, work_answer_log_odds


def _stats(share, totals_right, right_after_right, right_after_wrong):
    return {
        "share": {"scratchpad": share},
        "totals_right": totals_right,
        "accuracy_given_totals": {"right": right_after_right, "wrong": right_after_wrong},
    }


def test_the_table_and_the_log_odds_ratio_by_hand():
    """8 samples, half scratchpads (4), half of those with right work (2): both right after right work, one of two
    after wrong work. Cells 2, 0, 1, 1; plus 0.5 each: log((2.5 / 0.5) / (1.5 / 1.5)) = log 5."""
    stats = _stats(0.5, 0.5, 1.0, 0.5)
    assert work_answer_counts(stats, 8) == {
        "right_work_right": 2,
        "right_work_wrong": 0,
        "wrong_work_right": 1,
        "wrong_work_wrong": 1,
    }
    assert work_answer_log_odds(stats, 8) == pytest.approx(math.log(5))
    no_link = _stats(1.0, 0.5, 0.5, 0.5)  # the answer as often right after wrong work as after right work
    assert work_answer_log_odds(no_link, 8) == pytest.approx(0.0)
    assert work_answer_counts(_stats(0.0, float("nan"), float("nan"), float("nan")), 8)["right_work_right"] == 0
    with pytest.raises(ValueError, match="n_samples"):
        work_answer_counts(stats, 7)  # 3.5 scratchpads: the wrong number of samples


def test_the_shipped_report_links_answer_to_work_before_and_after():
    """reasoning_10.json: 50 prompts x 64 samples. Seed 1100 before RL: 981 scratchpads, 654 with right work, 474 of
    them right; 55 of the 327 with wrong work right. The dependence stays strong and its change is unresolved."""
    shipped = json.loads((Path(course_lib.__file__).parent / "lectures" / "data" / "reasoning_10.json").read_text())
    scratch = shipped["scratchpad"]
    assert work_answer_counts(scratch[0]["before"], 50 * 64) == {
        "right_work_right": 474,
        "right_work_wrong": 180,
        "wrong_work_right": 55,
        "wrong_work_wrong": 272,
    }
    before = {o["seed"]: work_answer_log_odds(o["before"], 50 * 64) for o in scratch}
    after = {o["seed"]: work_answer_log_odds(o["after"], 50 * 64) for o in scratch}
    assert min(before.values()) > 2.3 and min(after.values()) > 2.3  # right work: odds of a right answer x10 or more
    change = paired_difference(before, after)
    assert str(change) == "-0.110±1.166" and not change.excludes_zero()
