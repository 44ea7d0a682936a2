"""The math reward's classic wrong implementations (chapter 01), each a function with the reference's signature,
replayed by :func:`course_lib.checks.rewards.check_math_answer_reward` on every case: one that gives the student's
reward on every case is named."""

from __future__ import annotations

import re

from course_lib.checks import Mistake
from course_lib.rewards import (
    _NUMBER,
    _SENTENCE_END,
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


# Round seven: one step of the docstring's recipe left out or done another way, the rest right.


def _answer_with(
    response_text, statement=_STATEMENT, boxed=True, cut=True, normalise=normalize_answer, sentence=True, ends=r"[\n<]"
):
    """The reference's extraction with its parts as arguments: the statement's pattern, whether \\boxed{...} is read,
    whether the stated answer ends at its sentence, what else ends it (``ends``), and the normalisation."""
    answer = _last_boxed(response_text) if boxed else None
    if answer is None:
        statements = list(statement.finditer(response_text))
        if not statements:
            return None
        rest = response_text[statements[-1].end() :].lstrip()
        line = re.split(ends, rest)[0]
        answer = (_SENTENCE_END.split(line)[0] if sentence else line) if cut else rest
    return normalise(answer) or None


def _compare_with(answer, truth):
    if answer is None:
        return 0.0
    if _NUMBER.fullmatch(answer) and _NUMBER.fullmatch(truth):
        return float(float(answer) == float(truth))
    return float(answer == truth)


def _keeps_trailing_zeros(text):
    """The normalisation without its last rule: '14.0' stays '14.0' (a decimal point hidden from it)."""
    return normalize_answer(re.sub(r"\.(?=\d)", "\x00", text)).replace("\x00", ".")


def _mistake_strings_only(response_text, ground_truth):
    answer = _answer_with(response_text, normalise=_keeps_trailing_zeros)
    return float(answer is not None and answer == _keeps_trailing_zeros(ground_truth))


def _mistake_numbers_only(response_text, ground_truth):
    answer = extract_final_answer(response_text)
    try:
        return float(float(answer) == float(normalize_answer(ground_truth)))
    except (TypeError, ValueError):  # no answer, or one that float() cannot read: never a match
        return 0.0


def _keeps_separators(text):
    return normalize_answer(text.replace(",", "\x00")).replace("\x00", ",")


def _keeps_dollars(text):
    return normalize_answer(text.replace("$", "\x00")).replace("\x00", "$")


def _mistake_case_sensitive(response_text, ground_truth):
    statement = re.compile(r"\b(?:answer is\b\s*:?|Answer\s*:)")
    return _same_answer(_answer_with(response_text, statement=statement), ground_truth)


def _mistake_case_sensitive_lower(response_text, ground_truth):
    return _same_answer(_answer_with(response_text, statement=re.compile(_STATEMENT.pattern)), ground_truth)


def _mistake_separators_kept(response_text, ground_truth):
    answer = _answer_with(response_text, normalise=_keeps_separators)
    return _compare_with(answer, _keeps_separators(ground_truth))


def _separators_consumed(text):
    # One pass of a pattern that consumes the digit before each comma: in '1,234,567' the first match takes
    # '1,234', so the search resumes at ',567' with no digit before it, and that comma stays.
    return _keeps_separators(re.sub(r"(\d),(\d{3})(?!\d)", r"\1\2", text))


def _mistake_separators_consumed(response_text, ground_truth):
    answer = _answer_with(response_text, normalise=_separators_consumed)
    return _compare_with(answer, _separators_consumed(ground_truth))


def _mistake_truth_as_given(response_text, ground_truth):
    # The answer normalised, the ground truth compared as it came: '1,000' or ' 14 ' never matches.
    return _compare_with(_answer_with(response_text), ground_truth)


def _mistake_dollars_kept(response_text, ground_truth):
    return _compare_with(_answer_with(response_text, normalise=_keeps_dollars), _keeps_dollars(ground_truth))


def _mistake_to_end_of_text(response_text, ground_truth):
    return _same_answer(_answer_with(response_text, cut=False), ground_truth)


def _mistake_to_end_of_line(response_text, ground_truth):
    return _same_answer(_answer_with(response_text, sentence=False), ground_truth)


def _mistake_boxed_only(response_text, ground_truth):
    answer = _last_boxed(response_text)
    return _same_answer(None if answer is None else normalize_answer(answer) or None, ground_truth)


def _mistake_truth_raw(response_text, ground_truth):
    answer = extract_final_answer(response_text)
    if answer is None:
        return 0.0
    try:
        return float(answer == ground_truth or float(answer) == float(ground_truth))
    except ValueError:
        return float(answer == ground_truth)


def _mistake_greedy_boxed(response_text, ground_truth):
    boxed = re.findall(r"\\boxed\{(.*)\}", response_text)  # greedy: up to the text's last "}"
    if not boxed:
        return math_answer_reward(response_text, ground_truth)
    return _same_answer(normalize_answer(boxed[-1]) or None, ground_truth)


def _mistake_no_answer_colon(response_text, ground_truth):
    statement = re.compile(r"\banswer\s+is\b\s*:?", re.IGNORECASE)
    return _same_answer(_answer_with(response_text, statement=statement), ground_truth)


def _mistake_whole_numbers(response_text, ground_truth):
    answer, truth = extract_final_answer(response_text), normalize_answer(ground_truth)
    if answer is not None and _NUMBER.fullmatch(answer) and _NUMBER.fullmatch(truth):
        return float(int(float(answer)) == int(float(truth)))
    return _same_answer(answer, ground_truth)


def _every_comma_removed(text):
    return normalize_answer(text.replace(",", ""))


def _mistake_every_comma(response_text, ground_truth):
    return _compare_with(
        _answer_with(response_text, normalise=_every_comma_removed), _every_comma_removed(ground_truth)
    )


def _mistake_tag_kept(response_text, ground_truth):
    return _same_answer(_answer_with(response_text, ends=r"\n"), ground_truth)


_UNSIGNED = re.compile(r"\d+(?:\.\d*)?|\.\d+")


def _mistake_unsigned_numbers(response_text, ground_truth):
    answer, truth = extract_final_answer(response_text), normalize_answer(ground_truth)
    if answer is None:
        return 0.0
    if _UNSIGNED.fullmatch(answer) and _UNSIGNED.fullmatch(truth):
        return float(float(answer) == float(truth))
    return float(answer == truth)  # '-3.0' against '-3', '+5' against '5': compared as strings


def _with_tolerance(tolerance):
    def wrong(response_text, ground_truth):
        answer, truth = extract_final_answer(response_text), normalize_answer(ground_truth)
        if answer is not None and _NUMBER.fullmatch(answer) and _NUMBER.fullmatch(truth):
            return float(abs(float(answer) - float(truth)) < tolerance)
        return _same_answer(answer, ground_truth)

    return wrong


MATH_MISTAKES_MORE = [
    Mistake(
        "your numbers have no sign: '-2.50' and '+5' are compared as strings, so they miss '-2.5' and '5'; a plain "
        "decimal may start with '+' or '-' ([+-]?)",
        _mistake_unsigned_numbers,
    ),
    Mistake(
        "the stated answer runs on past a tag ('14</answer>'): it ends at its line, its sentence or the next '<'",
        _mistake_tag_kept,
    ),
    Mistake(
        "you accept a number within 0.5 of the ground truth; the answer must equal it: "
        "float(answer) == float(ground_truth) (14.2 is not 14)",
        _with_tolerance(0.5),
    ),
    Mistake(
        "you remove every comma; only a thousands separator goes (a ',' between a digit and exactly three "
        "digits: '1,000' is 1000, '1,2' stays '1,2')",
        _mistake_every_comma,
    ),
    Mistake(
        "you match the answer statement case by case ('the ANSWER is' is missed): match 'the answer is' and "
        "'Answer:' in any case, re.IGNORECASE",
        _mistake_case_sensitive,
    ),
    Mistake(
        "you match the answer statement case by case ('Answer:' and 'the ANSWER is' are missed): match 'the "
        "answer is' and 'Answer:' in any case, re.IGNORECASE",
        _mistake_case_sensitive_lower,
    ),
    Mistake(
        "you keep thousands separators, so '1,000' differs from '1000': remove a ',' between digits from both "
        "the answer and the ground truth",
        _mistake_separators_kept,
    ),
    Mistake(
        "you keep dollar signs, so '$14$' differs from '14': strip '$' from the answer and the ground truth",
        _mistake_dollars_kept,
    ),
    Mistake(
        "your stated answer runs to the end of the text; it ends at the end of its sentence ('.', '!' or '?' "
        "followed by a space or the end), its line, or the next '<'",
        _mistake_to_end_of_text,
    ),
    Mistake(
        "your stated answer runs to the end of its line; it ends at the end of its sentence too ('.', '!' or '?' "
        "followed by a space or the end)",
        _mistake_to_end_of_line,
    ),
    Mistake(
        "you read only \\boxed{...}; without a box, the answer is the text after the last 'the answer is' or 'Answer:'",
        _mistake_boxed_only,
    ),
    Mistake(
        "you normalise the answer and not the ground truth: normalise both alike (' 14 ' and '1,000' are "
        "ground truths too)",
        _mistake_truth_raw,
    ),
    Mistake(
        "your \\boxed\\{(.*)\\} is greedy: it runs to the last '}' of the text, across two boxes; count the "
        "braces from the last '\\boxed{' instead",
        _mistake_greedy_boxed,
    ),
    Mistake(
        "you read 'the answer is' and not 'Answer:'; the docstring accepts both statements",
        _mistake_no_answer_colon,
    ),
    Mistake(
        "you compare numbers after int(), which cuts a decimal: 2.5 is not 2; compare float(answer) == "
        "float(ground_truth)",
        _mistake_whole_numbers,
    ),
]

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
    Mistake(
        "you compare the answers only as strings, so '14.0' is not '14' and '2.50' is not '2.5'; when both "
        "are numbers compare float(answer) == float(ground_truth)",
        _mistake_strings_only,
    ),
    Mistake(
        "you compare the answers only as numbers (float()), so an answer that is not a number, such as "
        "\\frac{1}{2} or x + 1, never matches; compare as strings when either side is not a number",
        _mistake_numbers_only,
    ),
    Mistake(
        "your separator pattern consumes the digit before each comma, so a second separator is never matched: "
        "'1,234,567' becomes '1234,567'; match the comma alone with lookarounds, (?<=\\d),(?=\\d{3}(?!\\d))",
        _mistake_separators_consumed,
    ),
    Mistake(
        "you normalise the extracted answer but not the ground truth, so '1,000', ' 14 ' or '$14$' as the ground "
        "truth never matches: normalize_answer(ground_truth) too",
        _mistake_truth_as_given,
    ),
    *MATH_MISTAKES_MORE,
]
