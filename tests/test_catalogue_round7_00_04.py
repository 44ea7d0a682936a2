"""Round seven of the catalogue, chapters 00 to 04 (issue 44, item 3): the wrong answers nobody had catalogued.

``catalogue_round7_00_04.py`` holds 105 wrong answers and 13 right ones for the twelve exercises of chapters 00 to
04, written as new students would (``tests/run_class_four.py --students catalogue_round7_00_04`` runs them). At first
sight (main at a244731), 17 of the 105 were named truly, 12 described truly, 70 met the plain difference or a bare
crash, 3 were named with a mistake the student did not make (``compute_deltas``' eps as a floor, and eps unused,
both told "eps is 1e-6, not 1e-8"; the GAE table's reward cut at a terminal step told "the sign is flipped") and 3
passed (``mc_policy_gradient`` with a one-hot too narrow or a float32 answer, ``math_answer_reward`` comparing
numbers after int()). Now every one is rejected and named, and the 13 right ones are accepted.

Wave two (24 wrong answers and 2 right ones, written after those fixes, to see how far the new names reach): at its
first sight 11 were named truly, 4 described truly, 8 met the plain difference or the statistical check's "biased",
0 named falsely, 1 passed (every comma removed from a math answer: a case '1,2' against '12' is added). Now every one
is rejected and named as well. Wave three (15 wrong answers, written after wave two's fixes): at first sight 7 named
truly, 8 generic, 0 named falsely, 0 passed; now all named. Two more of wave three were left out, answers no student
is likely to write (the std's mean squared times P, gamma * 0.95 in the residual): both are rejected, neither named.
Wave four (14 wrong answers after wave three's fixes): at first sight 5 named truly, 3 described truly, 5 generic, 0
false, 1 passed (a number within 0.5 accepted: a case 14.2 against 14 is added). Ten are kept here, now named; four
are left out and are rejected without a name: a bonus point on every reward (described: "plus 1 in every entry"),
a token mean weighted by each row's length, a vector filled with the mean of the estimate, and a residual cut by
both its own and the next step's done.

A name is given only on evidence: the new mistakes' near misses (the mistake on one case, right on the others) are
never given that mistake's name, as ``tests/test_naming.py`` asks of a spread of each catalogue.
"""

from __future__ import annotations

import contextlib
import io
import re

import pytest
import torch
from catalogue_round7_00_04 import ROWS
from run_class_four import judge
from test_naming import _arguments, _key, _wrong_cases

from course_lib.checks import check_against_reference
from course_lib.checks.compare import _default_outputs
from course_lib.checks.crash_hints import _crash_hint

# What a message that names nothing looks like: the plain difference, a shape, a described relation, the string
# table's "f(...) returned x, expected y", the GAE table's "off by more than".
GENERIC = (
    re.compile(r"differs from the reference"),
    re.compile(r"has shape \(.*\), expected"),
    re.compile(r"on every case where yours is wrong"),
    re.compile(r"^math_answer_reward\(.*\) returned .*, expected"),
    re.compile(r"off by more than"),
    re.compile(r"the estimate is biased"),
)


def _named(message: str) -> bool:
    """The first line (every line, for the GAE table, which names each wrong entry on its own line) says what the
    student did, not only that the output differs."""
    lines = message.splitlines()
    shown = lines if message.startswith("gae_table") else lines[:1]
    return not any(pattern.search(line) for pattern in GENERIC for line in shown)


@pytest.mark.parametrize("row", ROWS, ids=[row["student"].__name__ for row in ROWS])
def test_round_seven_is_rejected_and_named(row):
    result = judge(row)
    if row["right"]:
        assert result["passed"], f"a right answer was rejected:\n{result['message']}"
        return
    assert not result["passed"], f"a wrong answer passed ({row['mistake']})"
    assert _named(result["message"]), f"not named ({row['mistake']}):\n{result['message']}"


# The new mistakes of each check built on check_against_reference: (module, exercise, the list they are in).
NEW = [
    ("warmup", "discounted_return", "course_lib.checks.warmup", "_RETURN_MISTAKES", 6),
    ("warmup", "reward_to_go", "course_lib.checks.warmup", "_RTG_MISTAKES", 11),
    ("rewards", "sort_inclusion_ordering_reward", "course_lib.checks.rewards_mistakes", "SORT_MISTAKES_MORE", 0),
    ("policy_gradient", "gather_log_probs", "course_lib.checks.policy_gradient_mistakes", "GATHER_MISTAKES_MORE", 0),
    ("policy_gradient", "reinforce_loss", "course_lib.checks.policy_gradient_mistakes", "REINFORCE_MISTAKES_MORE", 0),
    ("baselines", "compute_deltas", "course_lib.checks.baselines_mistakes", "DELTAS_MISTAKES_MORE", 0),
    ("baselines", "gradient_variance", "course_lib.checks.baselines_mistakes", "VARIANCE_MISTAKES_MORE", 0),
    ("gae", "compute_gae", "course_lib.checks.gae_more_mistakes", "GAE_MISTAKES_MORE", 0),
    ("gae", "td_residuals", "course_lib.checks.td_mistakes", "TD_MISTAKES_MORE", 0),
]


@pytest.mark.parametrize("module_name, exercise, where, listed, first", NEW, ids=[n[1] for n in NEW])
def test_a_near_miss_of_a_new_mistake_is_not_named(module_name, exercise, where, listed, first, monkeypatch, trusting):
    """Each new mistake wrong on two cases or more: its near miss (the mistake on the first of them only) is rejected
    without that mistake's name. ``first``: where the round's entries begin in a list that holds older ones too."""
    import importlib

    new = getattr(importlib.import_module(where), listed)[first:]
    args, kwargs = _arguments(module_name, exercise, monkeypatch)
    _, reference, cases = args
    select = kwargs.get("outputs") or _default_outputs
    dtype = kwargs.get("dtypes", (torch.float64,))[0]
    messages = [m.message for m in kwargs["mistakes"]]
    tried = 0
    for mistake in new:
        if messages.count(mistake.message) > 1:
            continue  # one message over several entries (eps values, temperatures): any of them may be named
        wrong = _wrong_cases(mistake, reference, cases, select, dtype)
        if len(wrong) < 2:
            continue
        target = _key(_cast_like(cases[wrong[0]].kwargs, dtype))

        def near_miss(_mistake=mistake, _target=target, **inputs):
            chosen = _mistake.fn if _key(inputs) == _target else reference
            return chosen(**inputs)

        with contextlib.redirect_stdout(io.StringIO()), pytest.raises(AssertionError) as rejected:
            check_against_reference(near_miss, *args[1:], **kwargs)
        assert mistake.message not in str(rejected.value), f"{exercise}: a near miss was named {mistake.message!r}"
        tried += 1
    assert tried >= 2, f"{exercise}: fewer than two new mistakes are wrong on two cases"


def _cast_like(kwargs, dtype):
    from course_lib.checks.compare import _cast

    return _cast(kwargs, dtype)


def test_the_gae_table_names_a_column_only_on_evidence():
    """A student right everywhere but at delta_2, where the value happens to be the sign-flipped one, is not told
    "the sign is flipped" (that mistake would be wrong at t = 0, 1, 3 and 4 too); with the whole column flipped, it is.
    """
    from course_lib.checks.gae import check_gae_table
    from course_lib.gae import gae_table_episode, td_residuals

    ep = gae_table_episode()
    deltas = td_residuals(ep["rewards"], ep["values"], ep["dones"], ep["last_values"], ep["gamma"]).tolist()
    one_entry = list(deltas)
    one_entry[2] = -deltas[2]
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(AssertionError) as rejected:
        check_gae_table(lambda: (one_entry, [0.0] * 5))
    assert "sign is flipped" not in str(rejected.value)
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(AssertionError) as rejected:
        check_gae_table(lambda: ([-x for x in deltas], [0.0] * 5))
    assert "sign is flipped" in str(rejected.value)


def test_the_numpy_scalar_hint_matches_todays_torch():
    """The crash hint for torch.from_numpy on a numpy scalar depends on torch's own words: tested against them."""
    import numpy as np

    with pytest.raises(TypeError) as error:
        torch.from_numpy(np.float64(1.0))
    assert "torch.as_tensor" in _crash_hint(error.value)
