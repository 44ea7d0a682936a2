"""Chapter 11's runs from before the protocol, read with its statistics: the budget, the intervals, the caveats."""

import pytest

from course_lib.lectures import family_before


@pytest.fixture(scope="module")
def before():
    return family_before.load_before()


def test_the_budget_is_eight_percent_of_chapter_08s(before):
    b = family_before.budget(before)
    assert b["run"] == 12_288 and b["chapter_08"] == 300 * 64 * 8 == 153_600 and b["share"] == pytest.approx(0.08)


def test_no_run_reached_the_threshold_and_the_table_says_resolved_or_unresolved(before):
    assert before["best_eval"] < 0.8, "no evaluation of any run reached 0.8"
    text = family_before.format_before(before)
    assert "7 df" in text and "tie" not in text
    assert "DAPO-clip-higher     0.496" in text and "+0.006 [-0.042, +0.053] unresolved" in text
    assert "PPO *" in text and "DAPO-dyn-sampling *" in text and "none below the base" in text
    assert before["variants"]["PPO"]["schedule"] == "constant" and before["variants"]["GRPO"]["schedule"] == "linear"
