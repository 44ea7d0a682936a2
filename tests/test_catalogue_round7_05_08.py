"""Round seven of the catalogue, chapters 05 to 08 (issue 44, item 3): new wrong answers are rejected and named.

``catalogue_round7_05_08.py`` holds 114 wrong answers to the twelve exercises of chapters 05 to 08, none of them in
the catalogue or in the class files when they were written. At first sight (the checks at a244731), of the first
102: 20 were named or described truly; 4 passed (clip_eps_high on both sides in grpo_loss, group sizes as floats in
read_sweep, a bool reward, a grpo_step that never passes clip_eps); 7 were named falsely or half-truly (a k3 whose
exp is detached was told "returns the k1 estimate", a gradient-only match; a clip_fraction that ignores
clip_eps_high was told the loss ignores it; a hard-coded tol was told "a matter of precision"); 71 got the plain
difference, a crash or a description that did not say what the student did. The last 12, one an exercise, were
written after the catalogue had been extended for the first 102, and tried before it was extended for them: 3 were
named truly, 1 half-truly (frozen models in fp32, told that bytes per parameter ignore weights_dtype) and 8 got a
generic message: a first sight of how far the catalogue generalises, well short of issue 44's bar of 90%.

Each test below runs the exercise's check on one of them, as its check cell does, and asserts that it is rejected
and that the first line of the message holds the phrase that names what the student did.

Rerun the whole table by hand with ``python tests/run_class_four.py --students catalogue_round7_05_08``.
"""

from __future__ import annotations

import pytest
from catalogue_round7_05_08 import ROWS
from run_class_four import judge

from course_lib.checks import watch
from course_lib.checks.crash_hints import _crash_hint


@pytest.mark.parametrize("row", ROWS, ids=[row["student"].__name__ for row in ROWS])
def test_each_new_wrong_answer_is_rejected_and_named(row):
    result = judge(row)
    assert not result["passed"], f"a wrong answer passed ({row['mistake']})"
    first = result["message"].splitlines()[0]
    assert row["named"] in first, f"{row['mistake']}\n  was told: {first}"


def test_a_step_that_borrows_the_course_mask_is_told_to_use_its_own():
    """grpo_step's check refuses course_lib's completion_mask: the message says which function to call instead."""
    text = watch.message("grpo_step", "course_lib.lm_sampling.completion_mask")
    assert "call your own completion_mask, the function you wrote in exercise 2" in text
    other = watch.message("grpo_loss", "course_lib.lm_sampling.completion_mask")
    assert other.endswith("write it yourself")


def test_a_crash_on_none_says_what_may_be_none():
    try:
        None.detach()
    except AttributeError as error:
        assert "something is None on this case" in _crash_hint(error)
    try:
        None(1)
    except TypeError as error:
        assert "something is None on this case" in _crash_hint(error)
