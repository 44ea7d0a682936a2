"""The math reward's classic wrong implementations (chapter 01), each a function with the reference's signature,
replayed by :func:`course_lib.checks.rewards.check_math_answer_reward` on every case: one that gives the student's
reward on every case is named."""

from __future__ import annotations

import re

from course_lib.checks import Mistake
from course_lib.rewards import (
    _STATEMENT,
    _last_boxed,
    _same_answer,
    _stated_answer,
    extract_final_answer,
    math_answer_reward,
    normalize_answer,
)


def _mistake_last_number(response_text, ground_truth):
    answer = extract_final_answer(response_text)
    if answer is None:
        numbers = re.findall(r"-?\d[\d,]*(?:\.\d+)?", response_text)
        answer = normalize_answer(numbers[-1]) if numbers else None
    return _same_answer(answer, ground_truth)


def _mistake_first_boxed(response_text, ground_truth):
    start = response_text.find("\\boxed{")
    if start == -1:
        return math_answer_reward(response_text, ground_truth)
    depth = 0
    for end in range(start + len("\\boxed"), len(response_text)):
        depth += {"{": 1, "}": -1}.get(response_text[end], 0)
        if depth == 0:
            return math_answer_reward(response_text[: end + 1], ground_truth)  # only the first box is read
    return math_answer_reward(response_text, ground_truth)


def _mistake_first_statement(response_text, ground_truth):
    answer = _last_boxed(response_text)
    statements = list(_STATEMENT.finditer(response_text))
    if answer is None and statements:
        answer = _stated_answer(response_text, statements[0])
    return _same_answer(None if answer is None else normalize_answer(answer) or None, ground_truth)


def _mistake_flat_boxed(response_text, ground_truth):
    boxed = re.findall(r"\\boxed\{(.*?)\}", response_text)  # lazy: stops at the first "}"
    if boxed:
        return _same_answer(normalize_answer(boxed[-1]) or None, ground_truth)
    return math_answer_reward(response_text, ground_truth)


def _mistake_string_compare(response_text, ground_truth):
    answer = extract_final_answer(response_text)
    return float(answer is not None and answer == normalize_answer(ground_truth))


def _mistake_cut_at_point(response_text, ground_truth):
    answer = extract_final_answer(response_text)
    if answer is not None:
        answer = normalize_answer(answer.split(".")[0]) or None  # the answer ends at its first '.'
    return _same_answer(answer, ground_truth)


def _mistake_substring(response_text, ground_truth):
    return float(normalize_answer(ground_truth) in response_text)


def _mistake_raw_substring(response_text, ground_truth):
    return float(ground_truth.strip() in response_text)


MATH_MISTAKES = [
    Mistake(
        "you fall back to the last number in the text when no answer is stated; a response "
        "must state its answer (\\boxed{...}, 'the answer is', 'Answer:') to earn the reward",
        _mistake_last_number,
    ),
    Mistake("you take the first 'the answer is'; the last one is the final answer", _mistake_first_statement),
    Mistake(
        "you take the first \\boxed{...}; when a response boxes twice, the last box is the final answer",
        _mistake_first_boxed,
    ),
    Mistake(
        "your \\boxed{...} stops at the first '}'; count the braces so that \\boxed{\\frac{1}{2}} gives \\frac{1}{2}",
        _mistake_flat_boxed,
    ),
    Mistake(
        "you compare the answers only as strings; when both are numbers compare float(answer) "
        "== float(ground_truth), so that 2.50 equals 2.5",
        _mistake_string_compare,
    ),
    Mistake(
        "your answer ends at its first '.', so a decimal such as 2.50 is cut to 2; a period ends the answer "
        "only where no digit follows it",
        _mistake_cut_at_point,
    ),
    Mistake(
        "you check whether the ground truth appears anywhere in the response; extract the "
        "final answer and compare it whole (140 is not 14)",
        _mistake_substring,
    ),
    Mistake(
        "you check whether the ground truth appears anywhere in the response; extract the "
        "final answer and compare it whole (140 is not 14)",
        _mistake_raw_substring,
    ),
]
