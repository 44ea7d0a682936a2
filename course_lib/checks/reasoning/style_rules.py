"""The rules of chapter 10's completion styles, one argument each, and the known mistakes that bend one of them
(checked in :mod:`.styles`).

:func:`_classify` with its defaults labels every text as ``course_lib.tasks_reasoning.completion_style`` does
(tests/test_catalogue_round7_09_11.py holds it to that on every case of the check); each mistake below changes one
rule, so it differs from the reference only on the texts that rule decides, and is named only where a student's
labels differ exactly there.
"""

from __future__ import annotations

import re

from course_lib.checks import Mistake


def _classify(
    text: str,
    n_digits: int = 3,
    *,
    anchored: bool = True,
    count=lambda n: n,
    dots=lambda n: r"\.+",
    answer: str = r"[0-9]+",
    total: str = r"1?[0-9]",
    largest: int = 19,
) -> str:
    """The style of ``text`` under the rules given: ``count(n_digits)`` totals (None: any number), each matching
    ``total`` and at most ``largest``; filler matching ``dots(n_digits)``; an ``answer``; ``anchored``: the direct
    answer must be the whole text before EOS (re.fullmatch), not only start it (re.match)."""
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    direct = re.fullmatch(answer, body) if anchored else re.match(answer, body)
    if direct is not None:
        return "direct"
    bracket = re.fullmatch(r"\[([^\[\]]*)\](.*)", body)
    if bracket is None or re.fullmatch(answer, bracket.group(2)) is None:
        return "malformed"
    inside = bracket.group(1)
    if re.fullmatch(dots(n_digits), inside):
        return "filler"
    totals = inside.split(",")
    wanted = count(n_digits)
    if wanted is not None and len(totals) != wanted:
        return "malformed"
    if all(re.fullmatch(total, t) and int(t) <= largest for t in totals):
        return "scratchpad"
    return "malformed"


def _rule(**changed):
    def wrong(text, n_digits=3):
        return _classify(text, n_digits, **changed)

    return wrong


RULE_MISTAKES = [
    Mistake(
        "a direct answer is digits only, the whole text before EOS: re.match checks only that the text starts with "
        "digits ('1045]$' and '10,45$' start so); use re.fullmatch(r'[0-9]+', ...)",
        _rule(anchored=False),
    ),
    Mistake(
        "a scratchpad holds exactly n_digits totals, one per column; yours accepts any number of them",
        _rule(count=lambda n: None),
    ),
    Mistake(
        "n_digits is ignored: yours always expects three totals; a scratchpad holds n_digits totals, one per "
        "column of the operands",
        _rule(count=lambda n: 3),
    ),
    Mistake(
        "a scratchpad holds n_digits totals, one per column of the operands; n_digits + 1 is the number of the "
        "answer's digits",
        _rule(count=lambda n: n + 1),
    ),
    Mistake(
        "filler is any run of one or more dots between the brackets, not exactly 3 * n_digits - 1 of them (the "
        "dots are not counted: they carry no content)",
        _rule(dots=lambda n: r"\." * (3 * n - 1)),
    ),
    Mistake(
        "an answer needs at least one digit: '[15,14,10]$' and '$' state no answer and are malformed; "
        "[0-9]+, not [0-9]*",
        _rule(answer=r"[0-9]*"),
    ),
    Mistake(
        "leading zeros in the answer are allowed ('0001045$' is direct): the style is judged, not the answer",
        _rule(answer=r"[1-9][0-9]*|0"),
    ),
    Mistake(
        "a column total runs from 0 to 19 (9 + 9 and a carry of 1): 10 to 19 are totals too",
        _rule(total=r"[0-9]"),
    ),
    Mistake(
        "empty brackets '[]' are malformed: filler holds at least one dot ([.]+, not [.]*)",
        _rule(dots=lambda n: r"\.*"),
    ),
    Mistake(
        "a column total is a number from 0 to 19 written without a leading zero; yours takes any one- or two-digit "
        "number ('20' to '99' cannot be a column's total, and '05' is not how a total is written): 1?[0-9]",
        _rule(total=r"[0-9]{1,2}", largest=99),
    ),
    Mistake(
        "a column total is written without a leading zero ('05' is malformed; '0' alone is a total): 1?[0-9], "
        "not [01]?[0-9]",
        _rule(total=r"[01]?[0-9]"),
    ),
    Mistake(
        "each total is read with int(), which also takes '05' and '+4'; a total is written in digits without a "
        "leading zero, 0 to 19: re.fullmatch(r'1?[0-9]', total)",
        _rule(total=r"\+?[0-9]+"),
    ),
    Mistake(
        "n_digits defaults to 3 in the exercise's signature, completion_style(text, n_digits=3): a call without it "
        "reads three totals",
        lambda text, n_digits=2: _classify(text, n_digits),
    ),
    Mistake(
        "a column total can be 19: 9 + 9 and the carry of 1 from the column before",
        _rule(largest=18),
    ),
]
