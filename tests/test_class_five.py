"""The fifth class of students, written blind on 2026-11-28 (issue 44): what the checks say to it now.

``class_five_students.py`` holds 45 wrong answers and 20 right ones, each wrong one with the mistake its student
made; its writer read the exercises, the solutions and the reference modules, not the checks or their catalogues,
and ran no check. ``class_five_first_sight.json`` keeps what the checks said the first time (main at c65c68f, the
commit that made every check compare the outputs' kinds), and ``class_five_judgement.json`` the reading of each
message against the student's own mistake, at first sight and now:

- at first sight: 45 of 45 rejected, 35 named truly, 2 described truly (a relation that holds on every wrong
  case), 8 with the plain difference or a crash, 0 named with a mistake the student did not make; 20 of 20 right
  answers accepted;
- now (after round seven of the catalogues): 41 named, 1 described, 3 crashes (each with a hint that lists the
  student's cause among others), 0 false.

The fixes are classes, not this class's answers: an axis counted from the front (``dim=1``) in gather_log_probs
and completion_mask, a flattening undone in the other order in grpo_step, an empty response left out of the mean
(the verl variant aggregate_loss's docstring describes), a constant whose gradient is NaN through NaN padding
(still a gradient), and crash hints for a size read with ``len()``, an index past an axis and a Python division
by zero. Rerun the record with ``python tests/run_class_four.py --students class_five_students``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from class_five_students import ROWS
from run_class_four import judge

JUDGEMENT = {
    row["student"]: row for row in json.loads((Path(__file__).parent / "class_five_judgement.json").read_text())
}


@pytest.mark.parametrize("row", ROWS, ids=[row["student"].__name__ for row in ROWS])
def test_the_fifth_class_is_judged(row):
    result = judge(row)
    if row["right"]:
        assert result["passed"], f"a right answer was rejected:\n{result['message']}"
        return
    assert not result["passed"], f"a wrong answer passed ({row['mistake']})"
    judged = JUDGEMENT[result["student"]]
    if judged["verdict_now"] in ("true", "described"):
        # what was read as naming the student's own mistake is still what the check says first
        assert result["message"].splitlines()[0] == judged["first_line_now"], result["message"]
