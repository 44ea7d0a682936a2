"""Wrong and right implementations of the chapter 01 exercises, for tests/test_mutants.py.

``MUTANTS``: ``(check_name, wrong_fn, expected_substring_or_None)``; each must be rejected by
``course_lib.checks.rewards.check_<check_name>`` (with the substring in its message when given).
``VARIANTS``: ``(check_name, correct_fn)``; each must be accepted.
"""

import math
import re

import torch
from catalogue_round7_00_04 import (
    r01_math_helpers,
    r01_sort_loops,
    w01_math_answer_to_end_of_text,
    w01_math_boxed_only,
    w01_math_case_sensitive,
    w01_math_first_box_nested,
    w01_math_float_tolerance,
    w01_math_greedy_boxed,
    w01_math_int_compare,
    w01_math_keeps_dollars,
    w01_math_keeps_thousands_separator,
    w01_math_last_line,
    w01_math_no_answer_colon,
    w01_math_strip_only,
    w01_math_truth_not_stripped,
    w01_sort_all_or_nothing_ordering,
    w01_sort_all_ordered_pairs,
    w01_sort_counts_every_match,
    w01_sort_descending_pairs,
    w01_sort_diff_positive,
    w01_sort_inclusion_fraction,
    w01_sort_inclusion_response_positions,
    w01_sort_inclusion_response_unique,
    w01_sort_inclusion_same_position,
    w01_sort_int_output,
    w01_sort_only_inclusion_unique_prompt,
    w01_sort_ordering_halved,
    w01_sort_ordering_on_prompt,
    w01_sort_sorted_compare_ordering,
)

# ---------------------------------------------------------------------------
# sort_inclusion_ordering_reward
# ---------------------------------------------------------------------------


def _ordering(response):
    return (response[..., :-1] <= response[..., 1:]).sum(-1)


def _inclusion(prompt, response):
    return (prompt[..., :, None] == response[..., None, :]).any(-1).sum(-1)


def sort_strict(prompt, response):
    return (_inclusion(prompt, response) + (response[..., :-1] < response[..., 1:]).sum(-1)).float()


def sort_response_in_prompt(prompt, response):
    return ((response[..., :, None] == prompt[..., None, :]).any(-1).sum(-1) + _ordering(response)).float()


def sort_set_intersection(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    p, r = prompt.reshape(-1, prompt.shape[-1]), response.reshape(-1, response.shape[-1])
    shared = torch.tensor([len(set(a.tolist()) & set(b.tolist())) for a, b in zip(p, r)])
    return (shared.reshape(prompt.shape[:-1]) + _ordering(response)).float()


def sort_gated(prompt, response):
    inclusion = _inclusion(prompt, response)
    return (inclusion + _ordering(response) * (inclusion == prompt.shape[-1])).float()


def sort_wrapped(prompt, response):
    return (_inclusion(prompt, response) + (response <= response.roll(-1, dims=-1)).sum(-1)).float()


def sort_missing_pair(prompt, response):
    return (_inclusion(prompt, response) + (response[..., :-2] <= response[..., 1:-1]).sum(-1)).float()


def sort_positionwise(prompt, response):
    return (response == prompt.sort(dim=-1).values).sum(-1).float()


def sort_integer_output(prompt, response):
    return _inclusion(prompt, response) + _ordering(response)


def sort_no_broadcast(prompt, response):
    # Loops over the rows of the prompt only: breaks when the prompt broadcasts against a group.
    p, r = prompt.reshape(-1, prompt.shape[-1]), response.reshape(-1, response.shape[-1])
    out = [
        sum(x in b.tolist() for x in a.tolist()) + sum(u <= v for u, v in zip(b.tolist(), b.tolist()[1:]))
        for a, b in zip(p, r)
    ]
    return torch.tensor(out, dtype=torch.float32).reshape(prompt.shape[:-1])


def sort_ordering_only(prompt, response):
    return _ordering(response).float()


def sort_loop(prompt, response):
    """The lecture's list formula, row by row."""
    prompt, response = torch.broadcast_tensors(prompt, response)
    p, r = prompt.reshape(-1, prompt.shape[-1]).tolist(), response.reshape(-1, response.shape[-1]).tolist()
    out = []
    for a, b in zip(p, r):
        inclusion = sum(1 for x in a if x in b)
        ordering = sum(1 for x, y in zip(b, b[1:]) if x <= y)
        out.append(inclusion + ordering)
    return torch.tensor(out, dtype=torch.float32).reshape(prompt.shape[:-1])  # the docstring's dtype


def sort_one_hot(prompt, response):
    """Inclusion through one-hot counts: is count_response[token] > 0 at each prompt token?"""
    prompt, response = torch.broadcast_tensors(prompt, response)
    V = int(max(prompt.max(), response.max())) + 1
    present = torch.nn.functional.one_hot(response, V).sum(-2) > 0  # (..., V)
    inclusion = present.gather(-1, prompt).sum(-1)
    return (inclusion + _ordering(response)).to(torch.float32)


# ---------------------------------------------------------------------------
# math_answer_reward
# ---------------------------------------------------------------------------


def _boxed(text):
    start = text.rfind("\\boxed{")
    while start != -1:
        depth, i = 0, start + len("\\boxed")
        for j in range(i, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                return text[i + 1 : j]
        start = text.rfind("\\boxed{", 0, start)
    return None


def _norm(s):
    s = s.replace("\\$", "").replace("$", "").strip().rstrip(".,;:!?").strip()
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", s)


def _statement(text, which=-1, flags=re.IGNORECASE):
    found = re.findall(r"answer(?:\s+is\s*:?|\s*:)(?=\s*([^\n<]*))", text, flags)
    if not found:
        return None
    return re.split(r"[.!?](?:\s|$)", found[which])[0]


def _equal(answer, truth):
    if answer is None or answer == "":
        return 0.0
    try:
        return float(math.isclose(float(answer), float(truth), rel_tol=0.0, abs_tol=0.0))
    except ValueError:
        return float(answer == truth)


def math_last_number(response_text, ground_truth):
    answer = _boxed(response_text) or _statement(response_text)
    if answer is None:
        numbers = re.findall(r"-?\d+(?:\.\d+)?", response_text)
        answer = numbers[-1] if numbers else None
    return _equal(None if answer is None else _norm(answer), _norm(ground_truth))


def math_first_statement(response_text, ground_truth):
    answer = _boxed(response_text) or _statement(response_text, which=0)
    return _equal(None if answer is None else _norm(answer), _norm(ground_truth))


def math_first_boxed(response_text, ground_truth):
    """Issue 44's student: re.search finds the first box, and a response that boxes twice means the last."""
    found = re.search(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}", response_text)
    answer = found.group(1) if found else _statement(response_text)
    return _equal(None if answer is None else _norm(answer), _norm(ground_truth))


def math_flat_boxed(response_text, ground_truth):
    found = re.findall(r"\\boxed\{(.*?)\}", response_text)
    answer = found[-1] if found else _statement(response_text)
    return _equal(None if answer is None else _norm(answer), _norm(ground_truth))


def math_string_only(response_text, ground_truth):
    answer = _boxed(response_text) or _statement(response_text)
    if answer is None:
        return 0.0
    strip_zero = lambda s: re.sub(r"^(-?\d+)\.0+$", r"\1", s)  # noqa: E731
    return float(strip_zero(_norm(answer)) == strip_zero(_norm(ground_truth)))


def math_stops_at_point(response_text, ground_truth):  # the statement read up to its first '.'
    answer = _boxed(response_text) or _statement(response_text)
    if answer is not None:
        answer = answer.partition(".")[0]
    return _equal(None if answer is None else _norm(answer), _norm(ground_truth))


def math_substring(response_text, ground_truth):
    return float(ground_truth.strip() in response_text)


def math_case_sensitive(response_text, ground_truth):
    answer = _boxed(response_text) or _statement(response_text, flags=0)
    return _equal(None if answer is None else _norm(answer), _norm(ground_truth))


def math_no_thousands(response_text, ground_truth):
    answer = _boxed(response_text) or _statement(response_text)
    strip = lambda s: s.replace("$", "").strip().rstrip(".!?").strip()  # noqa: E731
    return _equal(None if answer is None else strip(answer), strip(ground_truth))


def math_crashes_without_answer(response_text, ground_truth):
    answer = re.search(r"answer(?: is|:)\s*(\S+)", response_text, re.IGNORECASE).group(1)  # None.group: crash
    return _equal(_norm(answer), _norm(ground_truth))


def math_returns_string(response_text, ground_truth):
    return "1.0" if math_first_statement(response_text, ground_truth) else "0.0"


def math_variant(response_text, ground_truth):
    """A second implementation: a brace-counting boxed parser and a lookahead statement regex."""
    answer = _boxed(response_text)
    if answer is None:
        answer = _statement(response_text)
    if answer is None:
        return 0.0
    return _equal(_norm(answer), _norm(ground_truth))


def math_variant_int(response_text, ground_truth):
    """Returns an int, 1 or 0: a number, so it is accepted."""
    return int(math_variant(response_text, ground_truth))


def math_variant_tensor(response_text, ground_truth):
    """Returns a 0-dim tensor: also a number."""
    return torch.tensor(math_variant(response_text, ground_truth))


MUTANTS = [
    ("sort_inclusion_ordering_reward", sort_strict, "non-decreasing"),
    ("sort_inclusion_ordering_reward", sort_response_in_prompt, "response tokens that appear in the prompt"),
    ("sort_inclusion_ordering_reward", sort_set_intersection, "set intersection"),
    ("sort_inclusion_ordering_reward", sort_gated, "independent"),
    ("sort_inclusion_ordering_reward", sort_wrapped, "wrapping"),
    ("sort_inclusion_ordering_reward", sort_missing_pair, "T - 2"),
    ("sort_inclusion_ordering_reward", sort_positionwise, "sorted prompt"),
    ("sort_inclusion_ordering_reward", sort_integer_output, "floating-point"),
    ("sort_inclusion_ordering_reward", sort_no_broadcast, "broadcasting"),
    ("sort_inclusion_ordering_reward", sort_ordering_only, "inclusion points are missing"),
    ("math_answer_reward", math_last_number, "last number"),
    ("math_answer_reward", math_first_statement, "the last one is the final answer"),
    ("math_answer_reward", math_flat_boxed, "count the braces"),
    ("math_answer_reward", math_string_only, "compare float(answer)"),
    ("math_answer_reward", math_stops_at_point, "ends at its first '.'"),
    ("math_answer_reward", math_substring, "anywhere in the response"),
    ("math_answer_reward", math_first_boxed, "the first \\boxed"),
    ("math_answer_reward", math_case_sensitive, "'Answer:'"),
    ("math_answer_reward", math_no_thousands, "thousands separator"),
    ("math_answer_reward", math_crashes_without_answer, "raised AttributeError"),
    ("math_answer_reward", math_returns_string, "should return a float"),
]

VARIANTS = [
    ("sort_inclusion_ordering_reward", sort_loop),
    ("sort_inclusion_ordering_reward", sort_one_hot),
    ("math_answer_reward", math_variant),
    ("math_answer_reward", math_variant_int),
    ("math_answer_reward", math_variant_tensor),
]


# Round seven of issue 44 (chapters 00 to 04): the wrong answers of tests/catalogue_round7_00_04.py, each
# named by the mistake it makes, and its right variants.
MUTANTS += [
    ("sort_inclusion_ordering_reward", w01_sort_ordering_on_prompt, "your ordering points look at the prompt;"),
    ("sort_inclusion_ordering_reward", w01_sort_descending_pairs, "you count pairs in decreasing order (>=);"),
    ("sort_inclusion_ordering_reward", w01_sort_inclusion_same_position, "your inclusion points count the positions"),
    ("sort_inclusion_ordering_reward", w01_sort_inclusion_fraction, "your inclusion points are a fraction"),
    ("sort_inclusion_ordering_reward", w01_sort_all_ordered_pairs, "you count every pair i < j in order; the"),
    ("sort_inclusion_ordering_reward", w01_sort_all_or_nothing_ordering, "you give the ordering points only when the"),
    ("sort_inclusion_ordering_reward", w01_sort_counts_every_match, "your inclusion points count every matching"),
    ("sort_inclusion_ordering_reward", w01_sort_diff_positive, "a repeated token costs you a point (+1 for a"),
    ("sort_inclusion_ordering_reward", w01_sort_ordering_halved, "your ordering points are rescaled (times T /"),
    ("math_answer_reward", w01_math_case_sensitive, "you match the answer statement case by case"),
    ("math_answer_reward", w01_math_keeps_thousands_separator, "you keep thousands separators, so '1,000'"),
    ("math_answer_reward", w01_math_keeps_dollars, "you keep dollar signs, so '$14$' differs"),
    ("math_answer_reward", w01_math_answer_to_end_of_text, "your stated answer runs to the end of the"),
    ("math_answer_reward", w01_math_boxed_only, "you read only \\boxed{...}; without a box,"),
    ("math_answer_reward", w01_math_truth_not_stripped, "you normalise the answer and not the ground"),
    ("math_answer_reward", w01_math_greedy_boxed, "your \\boxed\\{(.*)\\} is greedy: it runs to"),
    ("math_answer_reward", w01_math_no_answer_colon, "you read 'the answer is' and not 'Answer:';"),
    ("math_answer_reward", w01_math_int_compare, "you compare numbers after int(), which cuts"),
]

VARIANTS += [
    ("sort_inclusion_ordering_reward", r01_sort_loops),
    ("math_answer_reward", r01_math_helpers),
]

# Wave two of round seven, written after the fixes for wave one.
MUTANTS += [
    ("sort_inclusion_ordering_reward", w01_sort_inclusion_response_unique, "the distinct values shared by prompt"),
    ("sort_inclusion_ordering_reward", w01_sort_sorted_compare_ordering, "already holds its own sorted value"),
    ("sort_inclusion_ordering_reward", w01_sort_int_output, "float64 tensor; the exercise asks for a float32"),
    ("math_answer_reward", w01_math_strip_only, "you remove every comma; only a thousands"),
    ("math_answer_reward", w01_math_first_box_nested, "you take the first \\boxed{...}; when a"),
]

# Wave three of round seven, written after the fixes for wave two.
MUTANTS += [
    ("sort_inclusion_ordering_reward", w01_sort_inclusion_response_positions, "the response tokens that appear"),
    ("sort_inclusion_ordering_reward", w01_sort_only_inclusion_unique_prompt, "the distinct values shared"),
    ("math_answer_reward", w01_math_last_line, "your stated answer runs to the end of its"),
]

# Wave four of round seven, written after the fixes for wave three.
MUTANTS += [
    ("math_answer_reward", w01_math_float_tolerance, "you accept a number within 0.5 of the"),
]
