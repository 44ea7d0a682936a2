"""The checks of chapter 10's style classifier and style share (references:
``course_lib.tasks_reasoning.completion_style`` and ``course_lib.lectures.reasoning.style_share``)."""

from __future__ import annotations

import re

import numpy as np
import torch

from course_lib.checks import Case, Mistake, check_against_reference, drawing
from course_lib.checks.reasoning.style_rules import RULE_MISTAKES
from course_lib.lectures.reasoning import style_share
from course_lib.tasks_reasoning import STYLES, completion_style

# ---------------------------------------------------------------------------
# Styles: the classifier and the share
# ---------------------------------------------------------------------------

_CLASSIFIER_CASES = [  # (text, n_digits): each teaches one rule of the module docstring of tasks_reasoning
    ("1045$", 3),
    ("[15,14,10]1045$", 3),
    ("[........]1045$", 3),
    ("[.]1045$", 3),
    ("[1,2,3]999$", 3),
    ("0001045$", 3),
    ("1045$[15,14,10]", 3),
    ("1045$12$", 3),  # a second EOS: the completion still ends at the first
    ("[15,14]132$", 2),
    ("[7,0]7$", 2),
    ("[18,19,19]1998$", 3),  # 999 + 999: 9 + 9 = 18, then 9 + 9 and a carry = 19, twice
    ("[18]18$", 1),
    ("1045", 3),
    ("[15,14,10]1045", 3),
    ("$", 3),
    ("[15,14,10]$", 3),
    ("[]1045$", 3),
    ("[15,14]1045$", 3),
    ("[15,14,10,1]1045$", 3),
    ("[15,,14,10]1045$", 3),
    ("[15,4.,10]1045$", 3),
    ("[15,14,20]1045$", 3),
    ("[15,14,05]1045$", 3),
    ("[15,14,10]]1045$", 3),
    ("[15,14,10]10,45$", 3),
    ("1045]$", 3),
    # '+' is in the task's alphabet (the prompt's "478+567="), so a model can write it: int() would read a sign
    ("+1045$", 3),
    ("[15,+4,10]1045$", 3),
    ("[15,14,10]+1045$", 3),
    ("10+45$", 3),
    # a space is in no style's alphabet: stripping the text first would make these direct
    (" 1045$", 3),
    ("1045 $", 3),
]


def _any_bracket(body: str) -> str:
    """The style when a '[' before EOS makes a scratchpad (or the filler, with a dot in it), and no '[' a direct
    answer: the text itself is never read."""
    if "[" not in body:
        return "direct"
    return "filler" if "." in body else "scratchpad"


def _signed_numbers(text: str, n_digits: int) -> str | None:
    """The style when each number is read with int(), which takes a leading '+': '+1045$' direct,
    '[15,+4,10]1045$' a scratchpad (None where no number starts with '+')."""
    body, eos, _ = text.partition("$")
    unsigned = re.sub(r"(^|[\[,\]])\+(?=[0-9])", r"\1", body)
    if not eos or unsigned == body:
        return None
    return completion_style(unsigned + "$", n_digits)


def _stripped(text: str, n_digits: int = 3) -> str:
    """The style of the text with the spaces around its body (before EOS) stripped first."""
    body, eos, rest = text.partition("$")
    return completion_style(body.strip() + eos + rest, n_digits)


def check_completion_style(fn) -> bool:
    """Check a student's ``completion_style(text, n_digits=3)`` on completions of every kind."""
    numbered = ", ".join(f"{s}={i}" for i, s in enumerate(STYLES))
    cases = [
        Case(
            f"the completion {text!r} with n_digits={n}, which is {completion_style(text, n)} "
            f"(labels as numbers: {numbered})",
            {"text": text, "n_digits": n},
        )
        for text, n in _CLASSIFIER_CASES
    ]
    default = "[15,14,10]1045$"  # three totals: a scratchpad only when n_digits is the signature's default, 3
    cases.append(
        Case(
            f"the completion {default!r} with n_digits left at its default (3), which is "
            f"{completion_style(default)} (labels as numbers: {numbered})",
            {"text": default},
        )
    )

    def as_number(label):
        return {"style": float(STYLES.index(label)) if label in STYLES else -1.0}

    def keep(rule):
        def wrong(text, n_digits=3):
            return rule(text, n_digits) or completion_style(text, n_digits)

        return wrong

    mistakes = [
        Mistake(
            "you strip spaces before reading the style; a space is in no style's alphabet, so ' 1045$' and "
            "'1045 $' are malformed: read the text as it is",
            _stripped,
        ),
        Mistake(
            "a completion with no EOS never stopped: it is malformed, whatever it holds",
            keep(
                lambda s, n: (
                    (
                        "direct"
                        if s.isdigit()
                        else "scratchpad"
                        if s.endswith(tuple("0123456789"))
                        and s.startswith("[")
                        and "." not in s
                        and completion_style(s + "$", n) == "scratchpad"
                        else None
                    )
                    if "$" not in s
                    else None
                )
            ),
        ),
        Mistake(
            "the text after the first EOS ($) must be ignored: cut it off before classifying",
            keep(lambda s, n: "malformed" if "$" in s and (not s.endswith("$") or s.count("$") > 1) else None),
        ),
        Mistake(
            "the completion ends at the first EOS ($), not the last: '1045$12$' is the direct answer 1045 "
            "(text.partition('$'), not rpartition)",
            keep(lambda s, n: "malformed" if s.count("$") > 1 else None),  # a '$' inside the body fits no style
        ),
        Mistake(
            "a run of dots is the filler, not a scratchpad: the scratchpad holds column totals",
            keep(lambda s, n: "scratchpad" if completion_style(s, n) == "filler" else None),
        ),
        Mistake(
            "a real scratchpad holds exactly n_digits column totals, each 0 to 19 without a leading zero; "
            "anything else between the brackets is malformed",
            keep(
                lambda s, n: (
                    "scratchpad"
                    if completion_style(s, n) == "malformed"
                    and s.partition("$")[1]
                    and re.fullmatch(r"\[[0-9.,]*[0-9,][0-9.,]*\][0-9]+", s.partition("$")[0])
                    else None
                )
            ),
        ),
        Mistake(
            "a bracket alone does not make a scratchpad, nor its absence a direct answer: read the text (direct: "
            "digits only; scratchpad: exactly n_digits totals in brackets, then digits; filler: only dots in "
            "brackets, then digits); anything else before EOS is malformed",
            keep(lambda s, n: _any_bracket(s.partition("$")[0]) if s.partition("$")[1] else None),
        ),
        Mistake(
            "a number with a '+' sign ('+1045$', '[15,+4,10]...') is malformed: '+' is in the task's alphabet, "
            "and int() reads a sign; the answer and the totals are digits only (re.fullmatch(r'[0-9]+', ...))",
            keep(_signed_numbers),
        ),
        *RULE_MISTAKES,
    ]
    try:
        return _check_styles(fn, cases, mistakes, as_number)
    except AssertionError as error:
        first, _, rest = str(error).partition("\n")
        if "raised ValueError: substring not found" in first:
            raise AssertionError(
                f"{first} (text.index('$') raises where there is no EOS: a completion that never stopped is "
                f"malformed; test '$' in text, or cut with text.partition('$'))\n{rest}"
            ) from None
        raise


def _check_styles(fn, cases, mistakes, as_number) -> bool:
    return check_against_reference(
        fn,
        completion_style,
        cases,
        name="completion_style",
        mistakes=mistakes,
        outputs=as_number,
        categorical=("style",),
        dtypes=(torch.float64,),
        draw=_draw_completions,
        check_dtype=True,
    )


def _draw_completions(g: torch.Generator) -> list[Case]:
    """Fresh completions of every kind: direct, scratchpad, filler and malformed ones of each sort."""

    def digits(n):
        return "".join(str(drawing.integer(g, 0, 9)) for _ in range(n))

    def totals(n, high=19):
        return ",".join(str(drawing.integer(g, 0, high)) for _ in range(n))

    n = drawing.choice(g, (2, 3, 4))
    answer = digits(n + 1)
    made = [
        answer + "$",
        f"[{totals(n)}]{answer}$",
        f"[{'.' * drawing.integer(g, 1, 9)}]{answer}$",
        f"[{totals(n)}]{answer}$" + digits(2),
        f"[{totals(n)}]{answer}",
        f"[{totals(n - 1)}]{answer}$",
        f"[{totals(n + 1)}]{answer}$",
        f"[{totals(n - 1)},{drawing.integer(g, 20, 99)}]{answer}$",
        f"[{totals(n - 1)},0{drawing.integer(g, 1, 9)}]{answer}$",
        f"[[{totals(n)}]]{answer}$",
        f"[{totals(n)}][{totals(n)}]{answer}$",
        f"[{totals(n)}]$",
        f"{answer[:1]},{answer[1:]}$",
        "[]" + answer + "$",
        "$" + answer,
    ]
    return [
        Case(f"the completion {text!r} with n_digits={n}", {"text": text, "n_digits": n})
        for text in drawing.shuffled(g, made)
    ]


def check_style_share(fn) -> bool:
    """Check a student's ``style_share(labels, style)``."""
    flat = ["direct", "scratchpad", "scratchpad", "malformed", "filler", "direct", "scratchpad", "direct"]
    nested = [flat[:4], flat[4:]]
    cases = [
        Case("8 labels in a list, style='scratchpad' (3 of 8)", {"labels": flat, "style": "scratchpad"}),
        Case(
            "the same 8 labels as B=2 prompts x G=4 (a nested list), style='direct'",
            {"labels": nested, "style": "direct"},
        ),
        Case(
            "the same as a numpy array of shape (2, 4), style='malformed' (malformed ones count in the total)",
            {"labels": np.array(nested), "style": "malformed"},
        ),
        Case("a style that never occurs: share 0", {"labels": flat[:4], "style": "filler"}),
        Case("every label the same: share 1", {"labels": ["scratchpad"] * 5, "style": "scratchpad"}),
        Case(
            "no labels at all (an empty list): no share to give, raise ValueError",
            {"labels": [], "style": "direct"},
            refuses=True,
        ),
        Case(
            "B=2 prompts with no completion each (a numpy array of shape (2, 0)): no share, raise ValueError",
            {"labels": np.empty((2, 0), dtype=object), "style": "direct"},
            refuses=True,
        ),
    ]

    def flatten(labels):
        return np.asarray(labels, dtype=object).reshape(-1)

    def top_level_count(labels, style):
        return float(list(labels).count(style) / len(labels))

    def prompts_with_one(labels, style):
        # for nested labels, the share of prompts (rows) with at least one completion of the style
        rows = np.asarray(labels, dtype=object)
        if rows.ndim < 2:
            return float((rows == style).mean())
        return float((rows == style).reshape(rows.shape[0], -1).any(axis=1).mean())

    mistakes = [
        Mistake(
            "you returned a count; the share is the count divided by the number of completions",
            lambda labels, style: float((flatten(labels) == style).sum()),
        ),
        Mistake(
            "malformed completions count in the total: the share is over all completions, so a model "
            "that writes garbage cannot raise its shares",
            lambda labels, style: float(
                (flatten(labels) == style).sum() / max(1, (flatten(labels) != "malformed").sum())
            ),
        ),
        Mistake(
            "malformed completions are left out (of the total, and so of their own share): the share is over all "
            "completions, so a model that writes garbage cannot raise its shares",
            lambda labels, style: float(
                ((flatten(labels) == style) & (flatten(labels) != "malformed")).sum()
                / max(1, (flatten(labels) != "malformed").sum())
            ),
        ),
        Mistake(
            "you counted the prompts with at least one completion of the style; the share counts completions: "
            "of all B * G completions, the fraction with that style (flatten the labels first)",
            prompts_with_one,
        ),
        Mistake(
            "the denominator is the number of prompts (rows), not of completions: flatten the labels first",
            lambda labels, style: float((flatten(labels) == style).sum() / max(1, len(labels))),
        ),
        Mistake(
            "the labels are counted at the top level only (labels.count(style), or label == style for each entry): "
            "in a nested list [B][G] or a 2-D array each entry is a row, never a label; flatten first, "
            "np.asarray(labels).reshape(-1)",
            top_level_count,
        ),
        Mistake(
            "only the first row (the first prompt's group, or the first label of a flat list) is counted: the "
            "share is over every completion of every prompt; flatten the labels first",
            lambda labels, style: float(np.mean(np.asarray(labels, dtype=object)[0] == style)),
        ),
        Mistake(
            "this is a percentage (the share times 100); style_share is a fraction in [0, 1]",
            lambda labels, style: 100.0 * style_share(labels, style),
        ),
        Mistake(
            "this is the share of the other labels, 1 - share: count the labels equal to style (==, not !=)",
            lambda labels, style: 1.0 - style_share(labels, style),
        ),
        Mistake(
            "this is the odds, count / (total - count); the share divides the count by every completion, count / total",
            lambda labels, style: float((flatten(labels) == style).sum() / max(1, (flatten(labels) != style).sum())),
        ),
        Mistake(
            "the share is rounded; return it as it is (round only when you print it)",
            lambda labels, style: round(style_share(labels, style), 2),
        ),
        Mistake(
            "count // total is a floor division, 0 for every share below 1: divide with /",
            lambda labels, style: float(int((flatten(labels) == style).sum()) // flatten(labels).size),
        ),
        Mistake(
            "labels == style compares the whole list with the string, one False (only a numpy array compares "
            "entry by entry): compare each label, np.asarray(labels) == style",
            lambda labels, style: float(np.mean(labels == style)),
        ),
        Mistake(
            "the count is divided by the number of distinct labels seen; the share divides it by the number of "
            "completions",
            lambda labels, style: float((flatten(labels) == style).sum() / max(1, len(set(flatten(labels).tolist())))),
        ),
    ]
    return check_against_reference(
        fn,
        style_share,
        cases,
        name="style_share",
        mistakes=mistakes,
        dtypes=(torch.float64,),
        draw=_draw_labels,
        check_dtype=True,
    )


def _draw_labels(g: torch.Generator) -> list[Case]:
    """Fresh labels: flat, nested [B][G] and numpy arrays, each style asked."""
    B, G = drawing.integer(g, 1, 4), drawing.integer(g, 1, 6)
    labels = [[drawing.choice(g, STYLES) for _ in range(G)] for _ in range(B)]
    return [
        Case(f"{B * G} labels in a list, style={style!r}", {"labels": sum(labels, []), "style": style})
        for style in STYLES[:2]
    ] + [
        Case(f"B={B} x G={G} labels, nested, style={STYLES[2]!r}", {"labels": labels, "style": STYLES[2]}),
        Case(
            f"B={B} x G={G} labels, a numpy array, style={STYLES[3]!r}",
            {"labels": np.array(labels), "style": STYLES[3]},
        ),
    ]
