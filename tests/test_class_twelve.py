"""The twelfth class of students, written blind on 2026-11-28 (issue 44), after the eleventh class's fixes.

``class_twelve_students.py`` holds 245 wrong answers and 68 right ones to all 34 exercises. Its writer read the
exercises, the solutions and the reference modules, never the checks, their catalogues, the mutants or an earlier
class, and ran no check. Its students write from memory of the lecture, refactor working code and lose one thing,
fight a shape error until the code runs, special-case the edges, trust torch's defaults, translate a paper's formula
literally, or are clever (log-space tricks, ``torch.where`` with a NaN branch, ``cumprod``, in-place ops).
``class_twelve_first_sight.json`` keeps what the checks said the first time (main at 4d88d28), and
``class_twelve_judgement.json`` the reading of each first line against the student's own code (a second helper
judged the first sight, strictly and alone; the lead judged each line that changed since):

- at first sight: 244 of 245 rejected, 213 named truly (87%), 9 described truly, 22 generic, 0 named falsely;
  67 of 68 right answers accepted, and the 68th is not right: its ``PPOLoss`` calls course_lib's
  ``clipped_surrogate_loss``, where exercise 3 says "use your two functions". One passed: ``answer_reward``
  returning ints 1 and 0, which TRL turns into a float tensor like any float (the mutant catalogue's
  ``reward_keyword_only`` is accepted for the same reason): not wrong in effect.
- after a second round (two helpers, each on half the chapters, then the lead judging every changed line): 235
  named (96%), 9 described, 0 generic, 0 false. New: a batch mean with equal groups zeroed, a second moment,
  gamma * lam in the TD residual, gamma on both values, next values shifted the wrong way, whole-batch statistics
  and RLOO's batch axis with per-group guards, saturation at the first stall, an argmax mask for a row without EOS,
  prompts counted for completions in TRL's config, pass@k padded with 0, PPO's surrogate in place of CISPO's; a
  broadcast crash on every batch read by ``course_lib.checks.ranks``, a split at "at most d axes" (with a second
  (B, G, T) case of ``reinforce_loss``), an int too large for a float (a crash hint), and in a notebook, a
  ``PPOLoss`` that calls course_lib's ``clipped_surrogate_loss`` told the rule and then what else is wrong.

Rerun the record with ``python tests/run_class_four.py --students class_twelve_students`` (it rewrites the first
sight: keep the committed one).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from class_twelve_students import ROWS
from run_class_four import judge

JUDGEMENT = {
    row["student"]: row for row in json.loads((Path(__file__).parent / "class_twelve_judgement.json").read_text())
}
NOT_RIGHT = "r29_PPOLoss_info_kept"  # calls course_lib's clipped_surrogate_loss, which exercise 3 forbids


@pytest.mark.parametrize("row", ROWS, ids=[row["student"].__name__ for row in ROWS])
def test_the_twelfth_class_is_judged(row):
    result = judge(row)
    if row["right"]:
        if row["student"].__name__ == NOT_RIGHT:
            return  # see test_the_one_rejected_right_answer_is_not_right
        assert result["passed"], f"a right answer was rejected:\n{result['message']}"
        return
    judged = JUDGEMENT[result["student"]]
    if judged["verdict_now"] == "passed":
        return  # not wrong in effect (see the module's docstring)
    assert not result["passed"], f"a wrong answer passed ({row['mistake']})"
    if judged["verdict_now"] in ("true", "described"):
        assert result["message"].splitlines()[0] == judged["first_line_now"], result["message"]


def test_the_record_is_whole():
    wrong = [row["student"].__name__ for row in ROWS if not row["right"]]
    assert list(JUDGEMENT) == wrong
    first_sight = json.loads((Path(__file__).parent / "class_twelve_first_sight.json").read_text())
    assert [r["student"] for r in first_sight] == [row["student"].__name__ for row in ROWS]
    assert sum(r["verdict"] == "true" for r in JUDGEMENT.values()) == 213  # the first sight, judged
    assert sum(r["verdict_now"] == "false" for r in JUDGEMENT.values()) == 0
    assert sum(r["verdict_now"] == "passed" for r in JUDGEMENT.values()) == 1  # the module's docstring says which


def test_the_one_rejected_right_answer_is_not_right():
    rejected = [row for row in ROWS if row["right"] and not judge(row)["passed"]]
    assert [row["student"].__name__ for row in rejected] == [NOT_RIGHT]
    assert "calls course_lib's own ppo.clipped_surrogate_loss" in judge(rejected[0])["message"]
