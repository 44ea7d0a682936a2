"""The check of chapter 08's exact-answer reward (reference: ``course_lib.rewards.addition_exact_reward``)."""

from __future__ import annotations

import torch

from course_lib.checks import (
    Mistake,
    drawing,
    forget_pass,
    record_pass,
    recording,
    scalar_reply,
)
from course_lib.rewards import addition_exact_reward

# ---------------------------------------------------------------------------
# 1. The exact-answer reward
# ---------------------------------------------------------------------------

_REWARD_CASES = [  # (completion, answer, description)
    ("132$", "132", "the right answer then EOS"),
    ("131$", "132", "a wrong answer then EOS"),
    ("132", "132", "the right digits but no EOS: the model never stopped"),
    ("0132$", "132", "a leading zero"),
    ("00$", "0", "a leading zero on 0"),
    ("0$", "0", "the answer 0"),
    ("132$7", "132", "text after EOS (must be ignored: the model stopped)"),
    ("13$2", "132", "EOS too early, the rest after it"),
    ("1320$", "132", "an extra digit before EOS"),
    (" 132$", "132", "a space before the answer"),
    ("132 $", "132", "a space before EOS"),
    ("+132$", "132", "a sign before the answer"),
    ("$", "7", "EOS at once, nothing written"),
    ("", "7", "an empty completion"),
    ("7$$", "7", "two EOS in a row"),
    ("5$132$", "132", "the right answer after a first EOS (the model stopped at the first: it earns nothing)"),
]


def _reward_mistakes():
    def ignores_eos(c, a):
        return float(c.split("$")[0] == a)

    def reads_past_eos(c, a):
        return float(c.endswith("$") and c.replace("$", "") == a)

    def numeric_compare(c, a):
        head, eos, _ = c.partition("$")
        return float(bool(eos) and head.isdigit() and int(head) == int(a))

    def strips_spaces(c, a):
        head, eos, _ = c.partition("$")
        return float(bool(eos) and head.strip() == a)

    def startswith_answer(c, a):
        return float("$" in c and c.startswith(a))

    def whole_completion(c, a):
        return float(c == a + "$")

    def strips_eos(c, a):
        return float(c.rstrip("$") == a)

    def contains_answer(c, a):
        head, eos, _ = c.partition("$")
        return float(bool(eos) and a in head)

    def one_eos_only(c, a):
        return float(c.count("$") == 1 and c.split("$")[0] == a)

    def strips_zeros(c, a):
        head, eos, _ = c.partition("$")
        return float(bool(eos) and head.lstrip("0") == a)

    def int_compare(c, a):
        head, eos, _ = c.partition("$")
        try:
            return float(bool(eos) and int(head) == int(a))
        except ValueError:
            return 0.0

    def strips_completion(c, a):
        head, eos, _ = c.strip().partition("$")
        return float(bool(eos) and head == a)

    def last_eos(c, a):
        head, eos, _ = c.rpartition("$")
        return float(bool(eos) and head == a)

    return [
        Mistake("a completion with no EOS is rewarded: the model must also stop (require the EOS '$')", ignores_eos),
        Mistake(
            "the reward reads text after the first EOS: the model stopped there, so score only what "
            "comes before the first '$'",
            reads_past_eos,
        ),
        Mistake(
            "the answers are compared as numbers, so leading zeros ('0132') pass: compare the strings", numeric_compare
        ),
        Mistake("spaces are stripped, so extra text passes: the completion must be exactly the digits", strips_spaces),
        Mistake("only the beginning is compared, so extra digits before EOS pass", startswith_answer),
        Mistake(
            "the whole completion must equal the answer + '$': text after the first EOS is ignored (the model "
            "stopped there), so '132$7' earns 1.0; compare only what comes before the first '$'",
            whole_completion,
        ),
        Mistake(
            "rstrip('$') removes the EOS without checking that it is there: a completion that never stopped "
            "('132') is rewarded, and one with text after EOS is not; split at the first '$' and require it",
            strips_eos,
        ),
        Mistake(
            "the answer only has to appear inside the text before EOS ('in'): extra digits ('1320$', '0132$') "
            "pass; the text before the first '$' must equal the answer exactly",
            contains_answer,
        ),
        Mistake(
            "a completion with more than one EOS gets 0; only the first EOS counts, whatever follows it is ignored",
            one_eos_only,
        ),
        Mistake(
            "leading zeros are stripped (lstrip('0')), so '0132$' passes and '0$' fails; compare the strings as "
            "they are",
            strips_zeros,
        ),
        Mistake(
            "the answers are compared as numbers with int(), which accepts leading zeros, spaces and a sign "
            "('0132', ' 132', '+132'); compare the strings",
            int_compare,
        ),
        Mistake(
            "the text is split at the *last* EOS (rsplit, rpartition); the model stopped at the first one: split "
            "there, c.split('$', 1)",
            last_eos,
        ),
        Mistake(
            "the completion is stripped of spaces first (.strip()), so ' 132$' passes: the completion must be "
            "exactly the digits then EOS",
            strips_completion,
        ),
    ]


def _drawn_rewards(seed: int) -> list[tuple[str, str, str]]:
    """Fresh completions for grading: an answer drawn, written right, wrong, padded, cut or followed by text."""
    g = torch.Generator().manual_seed(seed * 1000 + 998)
    drawn = []
    for _ in range(8):
        answer = str(drawing.integer(g, 0, 198))
        written = drawing.choice(
            g,
            (
                answer + "$",
                "0" + answer + "$",
                answer,
                answer + "$" + answer,
                str(int(answer) + 1) + "$",
                " " + answer + "$",
            ),
        )
        drawn.append((written, answer, f"a case drawn at grading time: {written!r} for the answer {answer!r}"))
    return drawn


def _no_bool(fn):
    """``fn``, refusing a bool reply: the docstring promises a float, and a batch of bools makes a bool tensor of
    rewards, which the group advantages cannot average."""

    def reply(completion, answer):
        result = fn(completion, answer)
        if isinstance(result, bool):
            raise TypeError(f"it returned a bool ({result}); the reward is a float, 1.0 or 0.0: float(...)")
        return result

    return reply


def check_addition_exact_reward(fn) -> bool:
    """Check a student's ``addition_exact_reward(completion, answer) -> float`` on a table of strings."""
    name = "addition_exact_reward"
    forget_pass(fn)  # until this run of the check passes (the demo cells ask)
    if not callable(fn):
        raise AssertionError(f"{name}: expected a function, got {type(fn).__name__}")

    session = recording.current()
    table = _REWARD_CASES + (_drawn_rewards(session.seed) if session is not None else [])
    # Every call is recorded in the grading kernel and replayed by the grader (checks.recording).
    student = [
        recording.replayable(lambda c=c, a=a: scalar_reply(_no_bool(fn), name, f"{name}({c!r}, {a!r})", (c, a)))
        for c, a, _ in table
    ]
    expected = [addition_exact_reward(c, a) for c, a, _ in table]
    if student == expected:
        recording.report(f"\u2714 {name}: correct on all {len(_REWARD_CASES)} completions.")
        record_pass(name, fn)
        return True
    first = next(i for i, (s, e) in enumerate(zip(student, expected)) if s != e)
    c, a, description = table[first]
    # A mistake is named only when it gives the student's reward on every completion of the table.
    for mistake in _reward_mistakes():
        wrong = [float(mistake.fn(cc, aa)) for cc, aa, _ in table]
        if wrong == student:
            raise AssertionError(
                f"{name}: {mistake.message}\n  seen on {c!r} with answer {a!r} ({description}): "
                f"returned {student[first]}, expected {expected[first]}"
            )
    raise AssertionError(
        f"{name}({c!r}, {a!r}) returned {student[first]}, expected {expected[first]}\n  on the case: {description}"
    )
