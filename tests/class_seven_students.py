"""A seventh class of students, written blind: answers, right and wrong, to every exercise of chapters 00 to 11.

The class was written from the exercise texts, their stubs and docstrings and the reference modules they mirror,
without reading the checks, their catalogues of mistakes, the mutants or any earlier class. The students are new
people: some port code from Spinning Up, CleanRL, OpenRLHF, verl, DeepSpeed-Chat or TRL and keep its conventions;
some slip by one position; some think in numpy or Python lists; some reduce along the wrong axis; some read a
paper's formula slightly wrong; some forget an edge case; some mix up in-place operations, ``.detach()``,
``torch.no_grad()``, ``.item()`` and dtype casts.

Each wrong answer (``wNN_<exercise>_<mistake>``) makes exactly one mistake, stated in one sentence in its row's
``mistake``; each right answer (``rNN_<exercise>_<style>``) is right on every input its docstring allows, written
in another style than the solution's. A student is a function with the exercise's signature (for chapter 05's
``PPOLoss``, a class), called as the exercise's check cell calls it: ``check_x(student)``.

``tests/run_class_four.py --students class_seven_students`` runs every exercise's check on every student, once,
and stores what each check said in ``tests/class_seven_first_sight.json``.
This module holds no tests (pytest does not collect it).
"""

import math
import re

import numpy as np
import torch
from einops import rearrange, repeat
from torch import nn

from course_lib import grpo
from course_lib.grpo import grpo_loss
from course_lib.policy_gradient import gather_log_probs
from course_lib.rewards import math_answer_reward


def _row(exercise: str, chapter: str, student, truth: str | None = None) -> dict:
    """One student's answer to one exercise; ``truth`` is None for a right answer, else what the student did wrong."""
    return {"exercise": exercise, "chapter": chapter, "student": student, "right": truth is None, "mistake": truth}


ROWS = []


# ---------------------------------------------------------------------------
# Chapter 00: discounted_return
# ---------------------------------------------------------------------------


def w01_discounted_return_starts_at_gamma(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(1, T + 1, dtype=rewards.dtype)  # gamma, gamma^2, ...
    return (rewards * discounts).sum(dim=-1)


def w02_discounted_return_discounts_from_the_end(rewards, gamma):
    T = rewards.shape[-1]
    steps_left = torch.arange(T - 1, -1, -1, dtype=rewards.dtype)
    return (rewards * gamma**steps_left).sum(dim=-1)


def w03_discounted_return_log_of_gamma(rewards, gamma):
    T = rewards.shape[-1]
    t = torch.arange(T, dtype=rewards.dtype)
    discounts = torch.exp(t * math.log(gamma))  # gamma^t, computed in log space
    return (rewards * discounts).sum(dim=-1)


def w04_discounted_return_sums_first_axis(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    return (rewards * discounts).sum(dim=0)


def r01_discounted_return_horner(rewards, gamma):
    total = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1] - 1, -1, -1):
        total = rewards[..., t] + gamma * total
    return total


def r02_discounted_return_cumprod_einsum(rewards, gamma):
    T = rewards.shape[-1]
    factors = torch.full((T - 1,), float(gamma), dtype=rewards.dtype)
    discounts = torch.cat([torch.ones(1, dtype=rewards.dtype), torch.cumprod(factors, dim=0)])
    return torch.einsum("...t,t->...", rewards, discounts)


ROWS += [
    _row(
        "discounted_return",
        "00",
        w01_discounted_return_starts_at_gamma,
        "Weights the rewards by gamma^(t+1) instead of gamma^t, so even r_0 is discounted.",
    ),
    _row(
        "discounted_return",
        "00",
        w02_discounted_return_discounts_from_the_end,
        "Weights r_t by gamma^(T-1-t), discounting from the last step instead of the first.",
    ),
    _row(
        "discounted_return",
        "00",
        w03_discounted_return_log_of_gamma,
        "Computes gamma^t as exp(t * log(gamma)), which raises a math domain error at gamma = 0.",
    ),
    _row(
        "discounted_return",
        "00",
        w04_discounted_return_sums_first_axis,
        "Sums over the first axis instead of the time axis, so batches get the wrong shape and values.",
    ),
    _row("discounted_return", "00", r01_discounted_return_horner),
    _row("discounted_return", "00", r02_discounted_return_cumprod_einsum),
]


# ---------------------------------------------------------------------------
# Chapter 00: reward_to_go
# ---------------------------------------------------------------------------


def w05_reward_to_go_undiscounted_spinning_up(rewards, gamma):
    # Spinning Up's simple policy gradient: the reward-to-go is a reversed cumulative sum.
    return rewards.flip(-1).cumsum(dim=-1).flip(-1)


def w06_reward_to_go_no_triangle(rewards, gamma):
    T = rewards.shape[-1]
    t = torch.arange(T)
    distance = (t[None, :] - t[:, None]).abs()  # |k - t|
    weights = (gamma ** distance.to(rewards.dtype)).to(rewards.dtype)  # (t, k)
    return torch.einsum("...k,tk->...t", rewards, weights)


def w07_reward_to_go_in_place(rewards, gamma):
    for t in range(rewards.shape[-1] - 2, -1, -1):
        rewards[..., t] += gamma * rewards[..., t + 1]
    return rewards


def w08_reward_to_go_skips_first_step(rewards, gamma):
    returns = rewards.clone()
    for t in range(rewards.shape[-1] - 2, 0, -1):
        returns[..., t] = rewards[..., t] + gamma * returns[..., t + 1]
    return returns


def r03_reward_to_go_clone_then_backwards(rewards, gamma):
    returns = rewards.clone()
    T = rewards.shape[-1]
    for t in range(T - 2, -1, -1):
        returns[..., t] = returns[..., t] + gamma * returns[..., t + 1]
    return returns


def r04_reward_to_go_upper_triangle(rewards, gamma):
    T = rewards.shape[-1]
    t = torch.arange(T)
    distance = t[None, :] - t[:, None]  # (t, k): k - t
    later = distance >= 0
    weights = torch.where(
        later,
        torch.pow(torch.tensor(float(gamma), dtype=rewards.dtype), distance.clamp(min=0).to(rewards.dtype)),
        torch.zeros((), dtype=rewards.dtype),
    )
    return torch.einsum("...k,tk->...t", rewards, weights)


ROWS += [
    _row(
        "reward_to_go",
        "00",
        w05_reward_to_go_undiscounted_spinning_up,
        "Takes Spinning Up's undiscounted reward-to-go (a reversed cumsum), ignoring gamma.",
    ),
    _row(
        "reward_to_go",
        "00",
        w06_reward_to_go_no_triangle,
        "Weights every reward by gamma^|k - t| without keeping only k >= t, so past rewards count too.",
    ),
    _row(
        "reward_to_go",
        "00",
        w07_reward_to_go_in_place,
        "Accumulates the returns in place into the caller's rewards tensor and returns it.",
    ),
    _row(
        "reward_to_go",
        "00",
        w08_reward_to_go_skips_first_step,
        "Its backward loop stops at t = 1, so G_0 is left as r_0 alone.",
    ),
    _row("reward_to_go", "00", r03_reward_to_go_clone_then_backwards),
    _row("reward_to_go", "00", r04_reward_to_go_upper_triangle),
]


# ---------------------------------------------------------------------------
# Chapter 01: sort_inclusion_ordering_reward
# ---------------------------------------------------------------------------


def w09_sort_inclusion_ordering_reward_counts_response_tokens(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]  # (..., T_prompt, T_response)
    inclusion = matches.any(dim=-2).sum(dim=-1)  # each response token found in the prompt
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w10_sort_inclusion_ordering_reward_strict_order(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-1).sum(dim=-1)
    ordering = (response[..., :-1] < response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w11_sort_inclusion_ordering_reward_sets(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    T = prompt.shape[-1]
    rows = []
    for p, r in zip(prompt.reshape(-1, T).tolist(), response.reshape(-1, T).tolist()):
        inclusion = len(set(p) & set(r))
        ordering = sum(a <= b for a, b in zip(r[:-1], r[1:]))
        rows.append(float(inclusion + ordering))
    return torch.tensor(rows, dtype=torch.float32).reshape(prompt.shape[:-1])


def w12_sort_inclusion_ordering_reward_isin(prompt, response):
    inclusion = torch.isin(prompt, response).sum(dim=-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w13_sort_inclusion_ordering_reward_integer_result(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-1).sum(dim=-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return inclusion + ordering


def r05_sort_inclusion_ordering_reward_counts_clamped(prompt, response):
    hits = (prompt.unsqueeze(-1) == response.unsqueeze(-2)).sum(dim=-1).clamp(max=1)  # (..., T)
    ordered = torch.diff(response, dim=-1) >= 0  # (..., T - 1)
    total = hits.sum(dim=-1) + ordered.sum(dim=-1)
    return total.to(torch.float32)


def r06_sort_inclusion_ordering_reward_python_rows(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    T = prompt.shape[-1]
    scores = []
    for p, r in zip(prompt.reshape(-1, T).tolist(), response.reshape(-1, T).tolist()):
        present = set(r)
        inclusion = sum(1 for token in p if token in present)
        ordering = sum(1 for t in range(T - 1) if r[t] <= r[t + 1])
        scores.append(inclusion + ordering)
    return torch.tensor(scores, dtype=torch.float32).reshape(prompt.shape[:-1])


ROWS += [
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w09_sort_inclusion_ordering_reward_counts_response_tokens,
        "Counts the response tokens found in the prompt instead of the prompt tokens found in the response, "
        "so a repeated right token earns several points.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w10_sort_inclusion_ordering_reward_strict_order,
        "Counts an ordered pair only when strictly increasing (<), so equal neighbours earn no point.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w11_sort_inclusion_ordering_reward_sets,
        "Counts inclusion as the size of a set intersection, so a token repeated in the prompt earns one point "
        "instead of one per occurrence.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w12_sort_inclusion_ordering_reward_isin,
        "Uses torch.isin, which tests each prompt token against every response of the whole batch, not its own.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w13_sort_inclusion_ordering_reward_integer_result,
        "Returns an integer tensor instead of the float32 rewards the docstring promises.",
    ),
    _row("sort_inclusion_ordering_reward", "01", r05_sort_inclusion_ordering_reward_counts_clamped),
    _row("sort_inclusion_ordering_reward", "01", r06_sort_inclusion_ordering_reward_python_rows),
]


# ---------------------------------------------------------------------------
# Chapter 01: math_answer_reward
# ---------------------------------------------------------------------------

_PLAIN_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"


def _normalise_like_the_text(text):
    """Strip whitespace, dollars, trailing punctuation and thousands separators, as the exercise's step 2 says."""
    text = text.replace("\\$", "").replace("$", "").strip()
    while text and (text[-1] in ".,;:!?" or (text[-1] == ")" and text.count(")") > text.count("("))):
        text = text[:-1].rstrip()  # trailing punctuation, and a ")" that closes nothing
    return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)


def _compare_like_the_text(answer, truth):
    answer, truth = _normalise_like_the_text(answer), _normalise_like_the_text(truth)
    if not answer:
        return 0.0
    if re.fullmatch(_PLAIN_NUMBER, answer) and re.fullmatch(_PLAIN_NUMBER, truth):
        return float(float(answer) == float(truth))
    return float(answer == truth)


def _last_boxed_content(text):
    start = text.rfind("\\boxed{")
    while start != -1:
        depth, begin = 1, start + len("\\boxed{")
        for i in range(begin, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return text[begin:i]
        start = text.rfind("\\boxed{", 0, start)
    return None


def _stated(text, statements):
    rest = text[statements[-1].end() :].lstrip()
    rest = re.split(r"[\n<]", rest)[0]
    return re.split(r"[.!?](?:\s|$)", rest)[0]


_STATEMENT = r"\banswer(?:\s+is\b\s*:?|\s*:)"


def w14_math_answer_reward_flat_box_regex(response_text, ground_truth):
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", response_text)
    if boxes:
        answer = boxes[-1]
    else:
        statements = list(re.finditer(_STATEMENT, response_text, re.IGNORECASE))
        if not statements:
            return 0.0
        answer = _stated(response_text, statements)
    return _compare_like_the_text(answer, ground_truth)


def w15_math_answer_reward_cuts_at_any_dot(response_text, ground_truth):
    answer = _last_boxed_content(response_text)
    if answer is None:
        statements = list(re.finditer(_STATEMENT, response_text, re.IGNORECASE))
        if not statements:
            return 0.0
        rest = response_text[statements[-1].end() :].lstrip()
        rest = re.split(r"[\n<]", rest)[0]
        answer = re.split(r"[.!?]", rest)[0]  # the end of the sentence
    return _compare_like_the_text(answer, ground_truth)


def w16_math_answer_reward_case_sensitive(response_text, ground_truth):
    answer = _last_boxed_content(response_text)
    if answer is None:
        statements = list(re.finditer(r"\b(?:answer\s+is\b\s*:?|Answer\s*:)", response_text))
        if not statements:
            return 0.0
        answer = _stated(response_text, statements)
    return _compare_like_the_text(answer, ground_truth)


def w17_math_answer_reward_first_statement(response_text, ground_truth):
    answer = _last_boxed_content(response_text)
    if answer is None:
        first = re.search(_STATEMENT, response_text, re.IGNORECASE)
        if first is None:
            return 0.0
        answer = _stated(response_text, [first])
    return _compare_like_the_text(answer, ground_truth)


def w18_math_answer_reward_float_or_string(response_text, ground_truth):
    answer = _last_boxed_content(response_text)
    if answer is None:
        statements = list(re.finditer(_STATEMENT, response_text, re.IGNORECASE))
        if not statements:
            return 0.0
        answer = _stated(response_text, statements)
    answer, truth = _normalise_like_the_text(answer), _normalise_like_the_text(ground_truth)
    if not answer:
        return 0.0
    try:
        return float(float(answer) == float(truth))  # Python reads "1e3", "inf", " 14" too
    except ValueError:
        return float(answer == truth)


def w19_math_answer_reward_statement_before_box(response_text, ground_truth):
    statements = list(re.finditer(_STATEMENT, response_text, re.IGNORECASE))
    if statements:
        answer = _stated(response_text, statements)
    else:
        answer = _last_boxed_content(response_text)
        if answer is None:
            return 0.0
    return _compare_like_the_text(answer, ground_truth)


def w20_math_answer_reward_strips_only_dots(response_text, ground_truth):
    answer = _last_boxed_content(response_text)
    if answer is None:
        statements = list(re.finditer(_STATEMENT, response_text, re.IGNORECASE))
        if not statements:
            return 0.0
        answer = _stated(response_text, statements)

    def normalise(text):
        text = text.replace("\\$", "").replace("$", "").strip().rstrip(".")
        if text.endswith(")") and text.count(")") > text.count("("):
            text = text[:-1].rstrip()
        return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)

    answer, truth = normalise(answer), normalise(ground_truth)
    if not answer:
        return 0.0
    if re.fullmatch(_PLAIN_NUMBER, answer) and re.fullmatch(_PLAIN_NUMBER, truth):
        return float(float(answer) == float(truth))
    return float(answer == truth)


def r07_math_answer_reward_scanner_and_decimal(response_text, ground_truth):
    from decimal import Decimal

    def boxed(text):
        marker = "\\boxed{"
        positions = [m.start() for m in re.finditer(re.escape(marker), text)]
        for start in reversed(positions):
            depth = 0
            for i in range(start + len(marker) - 1, len(text)):
                if text[i] == "{":
                    depth += 1
                elif text[i] == "}":
                    depth -= 1
                    if depth == 0:
                        return text[start + len(marker) : i]
        return None

    def tidy(text):
        text = text.replace("\\$", "").replace("$", "").strip()
        while True:
            unmatched_close = text.endswith(")") and text.count(")") > text.count("(")
            if not (text.endswith((".", ",", ";", ":", "!", "?")) or unmatched_close):
                break
            text = text[:-1].rstrip()
        return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)

    found = boxed(response_text)
    if found is None:
        statements = [m for m in re.finditer(r"\banswer(?:\s+is\b\s*:?|\s*:)", response_text, flags=re.I)]
        if not statements:
            return 0.0
        last = statements[-1]
        tail = response_text[last.end() :].lstrip()
        tail = tail.split("\n")[0].split("<")[0]
        end = re.search(r"[.!?](?=\s|$)", tail)
        found = tail if end is None else tail[: end.start()]
    answer, truth = tidy(found), tidy(ground_truth)
    if answer == "":
        return 0.0
    number = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
    if number.fullmatch(answer) and number.fullmatch(truth):
        return 1.0 if Decimal(answer) == Decimal(truth) else 0.0
    return 1.0 if answer == truth else 0.0


def r50_math_answer_reward_partition_loops(response_text, ground_truth):
    def last_closed_box(text):
        end = len(text)
        while True:
            start = text.rfind("\\boxed{", 0, end)
            if start < 0:
                return None
            depth = 1
            position = start + len("\\boxed{")
            while position < len(text) and depth:
                depth += (text[position] == "{") - (text[position] == "}")
                position += 1
            if depth == 0:
                return text[start + len("\\boxed{") : position - 1]
            end = start  # unclosed: look further left

    def stated(text):
        statements = list(re.finditer(r"\banswer(?:\s+is\b\s*:?|\s*:)", text, re.IGNORECASE))
        if not statements:
            return None
        rest = text[statements[-1].end() :].lstrip()
        for stop in ("\n", "<"):
            rest = rest.partition(stop)[0]
        sentence_end = re.search(r"[.!?](?:\s|$)", rest)
        return rest if sentence_end is None else rest[: sentence_end.start()]

    def canonical(text):
        text = text.replace("\\$", "").replace("$", "").strip()
        changed = True
        while changed and text:
            changed = False
            if text[-1] in ".,;:!?" or (text[-1] == ")" and text.count(")") > text.count("(")):
                text, changed = text[:-1].rstrip(), True
        return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)

    found = last_closed_box(response_text)
    if found is None:
        found = stated(response_text)
    if found is None:
        return 0.0
    answer, truth = canonical(found), canonical(ground_truth)
    if not answer:
        return 0.0
    plain = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
    if plain.fullmatch(answer) and plain.fullmatch(truth):
        return float(float(answer) == float(truth))
    return float(answer == truth)


ROWS += [
    _row(
        "math_answer_reward",
        "01",
        w14_math_answer_reward_flat_box_regex,
        "Finds boxes with a regex that allows no brace inside, so a nested \\boxed{\\frac{1}{2}} is not found.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w15_math_answer_reward_cuts_at_any_dot,
        "Ends the stated answer at any '.', so a decimal such as 2.5 is cut to 2.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w16_math_answer_reward_case_sensitive,
        "Matches the answer statements case-sensitively, so 'ANSWER:' or 'The Answer is' is not found.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w17_math_answer_reward_first_statement,
        "Takes the first answer statement of the text instead of the last.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w18_math_answer_reward_float_or_string,
        "Compares with Python's float() whenever it parses, so non-plain numbers such as '1e3' or 'inf' compare "
        "as numbers instead of as strings.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w19_math_answer_reward_statement_before_box,
        "Looks for an answer statement before a \\boxed{}, so a stated answer wins over the last box.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w20_math_answer_reward_strips_only_dots,
        "Strips only trailing dots, not the other trailing punctuation (',', ';', ':', '!', '?').",
    ),
    _row("math_answer_reward", "01", r07_math_answer_reward_scanner_and_decimal),
    _row("math_answer_reward", "01", r50_math_answer_reward_partition_loops),
]


# ---------------------------------------------------------------------------
# Chapter 02: gather_log_probs
# ---------------------------------------------------------------------------


def w21_gather_log_probs_logsumexp_no_keepdim(logits, tokens):
    normalised = logits - torch.logsumexp(logits, dim=-1)  # (..., T) broadcast against (..., T, V)
    return normalised.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


def w22_gather_log_probs_shifts_by_one(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=-1)
    # logits at t predict token t + 1; the first token has no logits before it
    shifted = logp_all[..., :-1, :].gather(-1, tokens[..., 1:].long().unsqueeze(-1)).squeeze(-1)
    return torch.cat([torch.zeros_like(shifted[..., :1]), shifted], dim=-1)


def w23_gather_log_probs_through_numpy(logits, tokens):
    scores = logits.detach().cpu().numpy()
    scores = scores - scores.max(axis=-1, keepdims=True)
    logp_all = scores - np.log(np.exp(scores).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(logp_all, tokens.cpu().numpy()[..., None], axis=-1)[..., 0]
    return torch.from_numpy(picked)


def w24_gather_log_probs_upcast_to_float32(logits, tokens):
    logp_all = torch.log_softmax(logits.float(), dim=-1)  # TRL's habit: compute the softmax in float32
    return logp_all.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


def r08_gather_log_probs_minus_logsumexp(logits, tokens):
    picked = logits.gather(-1, tokens.long()[..., None])[..., 0]
    return picked - torch.logsumexp(logits, dim=-1)


def r09_gather_log_probs_cross_entropy(logits, tokens):
    V = logits.shape[-1]
    flat = nn.functional.cross_entropy(logits.reshape(-1, V), tokens.reshape(-1).long(), reduction="none")
    return -flat.reshape(tokens.shape)


ROWS += [
    _row(
        "gather_log_probs",
        "02",
        w21_gather_log_probs_logsumexp_no_keepdim,
        "Subtracts logsumexp without keepdim, so the (..., T) normaliser broadcasts along the vocabulary axis.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w22_gather_log_probs_shifts_by_one,
        "Shifts by one position (logits[:-1] score tokens[1:], a zero in front) though the caller already did.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w23_gather_log_probs_through_numpy,
        "Computes the log-softmax in numpy, so the result carries no gradient to the logits.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w24_gather_log_probs_upcast_to_float32,
        "Casts the logits to float32 before the log-softmax, so float64 inputs come back in float32.",
    ),
    _row("gather_log_probs", "02", r08_gather_log_probs_minus_logsumexp),
    _row("gather_log_probs", "02", r09_gather_log_probs_cross_entropy),
]


# ---------------------------------------------------------------------------
# Chapter 02: reinforce_loss
# ---------------------------------------------------------------------------


def w25_reinforce_loss_mean_per_response_first(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    per_response = per_token.sum(dim=-1) / valid.sum(dim=-1).clamp(min=1)
    return per_response.mean()


def w26_reinforce_loss_divides_by_T_without_mask(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.sum() / logp.shape[-1]  # the number of tokens
    valid = mask.bool()
    total = torch.where(valid, per_token, torch.zeros_like(per_token)).sum()
    return total / valid.sum().clamp(min=1)


def w27_reinforce_loss_constant_zero_when_empty(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    valid = mask.bool()
    if valid.sum() == 0:
        return torch.tensor(0.0)
    return torch.where(valid, per_token, torch.zeros_like(per_token)).sum() / valid.sum()


def w28_reinforce_loss_indexes_with_the_mask(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    chosen = per_token[mask]  # the valid tokens
    return chosen.sum() / max(chosen.numel(), 1)


def r10_reinforce_loss_weights_under_no_grad(logp, deltas, mask=None):
    with torch.no_grad():
        weights = -deltas.unsqueeze(-1)  # (..., 1), a constant
    per_token = weights * logp
    if mask is None:
        mask = torch.ones_like(logp)
    padding = ~mask.to(torch.bool)
    per_token = per_token.masked_fill(padding, 0.0)
    count = (~padding).sum()
    return per_token.sum() / torch.clamp(count, min=1)


def r11_reinforce_loss_boolean_selection(logp, deltas, mask=None):
    per_token = -(deltas.detach()[..., None] * logp)
    valid = torch.ones(logp.shape, dtype=torch.bool) if mask is None else mask.to(torch.bool)
    chosen = per_token[valid]
    return chosen.sum() / max(chosen.numel(), 1)


ROWS += [
    _row(
        "reinforce_loss",
        "02",
        w25_reinforce_loss_mean_per_response_first,
        "Averages each response's tokens first and then the responses, instead of one mean over all valid tokens.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w26_reinforce_loss_divides_by_T_without_mask,
        "Without a mask, divides the sum by T instead of by the number of tokens of the whole batch.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w27_reinforce_loss_constant_zero_when_empty,
        "For an all-padding batch returns a fresh float32 constant, detached from logp and of the wrong dtype "
        "for float64 inputs.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w28_reinforce_loss_indexes_with_the_mask,
        "Indexes with the mask as given, so a 0/1 integer mask gathers rows 0 and 1 instead of selecting tokens.",
    ),
    _row("reinforce_loss", "02", r10_reinforce_loss_weights_under_no_grad),
    _row("reinforce_loss", "02", r11_reinforce_loss_boolean_selection),
]


# ---------------------------------------------------------------------------
# Chapter 02: mc_policy_gradient
# ---------------------------------------------------------------------------


def _sample(logits, n_samples, generator):
    return torch.multinomial(torch.softmax(logits, dim=-1), n_samples, replacement=True, generator=generator)


def w29_mc_policy_gradient_subtracts_pi_of_action(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = _sample(logits, n_samples, generator)
    onehot = nn.functional.one_hot(actions, logits.shape[0]).to(logits.dtype)
    score = onehot - pi[actions, None]  # grad log pi(a) = onehot(a) - pi(a)
    return (reward_per_action[actions, None] * score).mean(dim=0)


def w30_mc_policy_gradient_sums_samples(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = _sample(logits, n_samples, generator)
    score = nn.functional.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).sum(dim=0)


def w31_mc_policy_gradient_without_replacement(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    n = min(n_samples, logits.shape[0])  # distinct actions only
    actions = torch.multinomial(pi, n, replacement=False, generator=generator)
    score = nn.functional.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).mean(dim=0)


def w32_mc_policy_gradient_ignores_generator(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True)
    score = nn.functional.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).mean(dim=0)


def r12_mc_policy_gradient_autograd(logits, reward_per_action, n_samples, generator=None):
    actions = _sample(logits.detach(), n_samples, generator)
    x = logits.detach().clone().requires_grad_(True)
    surrogate = (reward_per_action.detach()[actions] * torch.log_softmax(x, dim=-1)[actions]).mean()
    (gradient,) = torch.autograd.grad(surrogate, x)
    return gradient


def r13_mc_policy_gradient_index_add(logits, reward_per_action, n_samples, generator=None):
    logits, reward_per_action = logits.detach(), reward_per_action.detach()
    dtype = torch.promote_types(logits.dtype, reward_per_action.dtype)
    pi = torch.softmax(logits, dim=-1)
    actions = _sample(logits, n_samples, generator)
    sampled_rewards = reward_per_action[actions].to(dtype)  # (n,)
    per_action = torch.zeros(logits.shape, dtype=dtype).index_add_(0, actions, sampled_rewards)  # r summed per action
    return per_action / n_samples - sampled_rewards.mean() * pi


ROWS += [
    _row(
        "mc_policy_gradient",
        "02",
        w29_mc_policy_gradient_subtracts_pi_of_action,
        "Reads the score as onehot(a) - pi(a), subtracting the sampled action's probability from every coordinate "
        "instead of the vector pi.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w30_mc_policy_gradient_sums_samples,
        "Sums the n per-sample terms instead of averaging them.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w31_mc_policy_gradient_without_replacement,
        "Samples the actions without replacement (at most V of them), which biases the estimate.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w32_mc_policy_gradient_ignores_generator,
        "Samples from the global RNG instead of the generator it is given, so equal seeds do not repeat the samples.",
    ),
    _row("mc_policy_gradient", "02", r12_mc_policy_gradient_autograd),
    _row("mc_policy_gradient", "02", r13_mc_policy_gradient_index_add),
]


# ---------------------------------------------------------------------------
# Chapter 03: compute_deltas
# ---------------------------------------------------------------------------


def w33_compute_deltas_tiny_spread_counts_as_equal(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    std = rewards.std(dim=-1, keepdim=True)
    flat = std < eps  # "all equal", up to rounding
    centred = torch.where(flat, torch.zeros_like(centred), centred)
    if mode == "centered_rewards":
        return centred
    return torch.where(flat, torch.zeros_like(centred), centred / (std + eps))


def w34_compute_deltas_group_of_one_keeps_reward_verl(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    if rewards.shape[-1] == 1:
        return rewards.clone()  # verl: a lone response keeps its score (mean 0, std 1)
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards":
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def w35_compute_deltas_centres_in_place(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True) if rewards.shape[-1] > 1 else None
    rewards -= rewards.mean(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(rewards), rewards)
    if mode == "centered_rewards" or std is None:
        return centred
    return centred / (std + eps)


def w36_compute_deltas_divides_without_centring(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    zeros = torch.zeros_like(rewards)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return torch.where(all_equal, zeros, centred)
    scaled = rewards / (rewards.std(dim=-1, keepdim=True) + eps)  # the normalised reward
    return torch.where(all_equal, zeros, scaled)


def r14_compute_deltas_manual_bessel(rewards, mode, eps=1e-6):
    if mode not in ("rewards", "centered_rewards", "normalized_rewards"):
        raise ValueError(f"mode: unknown {mode!r}")
    out = rewards.clone()
    if mode == "rewards":
        return out
    B, G = rewards.shape
    if G == 1:
        return torch.zeros_like(rewards)
    centred = rewards - rewards.sum(dim=1, keepdim=True) / G
    flat = rewards.amax(dim=1, keepdim=True) == rewards.amin(dim=1, keepdim=True)
    centred = centred.masked_fill(flat, 0.0)
    if mode == "centered_rewards":
        return centred
    deviations = rewards - rewards.mean(dim=1, keepdim=True)
    std = torch.sqrt((deviations**2).sum(dim=1, keepdim=True) / (G - 1))
    return centred / (std + eps)


def r15_compute_deltas_row_by_row(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    rows = []
    for row in rewards:
        if row.numel() == 1 or bool((row == row[0]).all()):
            rows.append(torch.zeros_like(row))
            continue
        centred = row - row.mean()
        if mode == "normalized_rewards":
            centred = centred / (row.std() + eps)
        rows.append(centred)
    return torch.stack(rows)


ROWS += [
    _row(
        "compute_deltas",
        "03",
        w33_compute_deltas_tiny_spread_counts_as_equal,
        "Treats a group whose std is below eps as all equal and zeroes it, though its rewards differ.",
    ),
    _row(
        "compute_deltas",
        "03",
        w34_compute_deltas_group_of_one_keeps_reward_verl,
        "Gives a group of one its raw reward, as verl does, instead of zeros in the centred and normalised modes.",
    ),
    _row(
        "compute_deltas",
        "03",
        w35_compute_deltas_centres_in_place,
        "Subtracts the group mean in place, changing the caller's rewards tensor.",
    ),
    _row(
        "compute_deltas",
        "03",
        w36_compute_deltas_divides_without_centring,
        "In the normalised mode divides the raw rewards by the std, forgetting to subtract the group mean first.",
    ),
    _row("compute_deltas", "03", r14_compute_deltas_manual_bessel),
    _row("compute_deltas", "03", r15_compute_deltas_row_by_row),
]


# ---------------------------------------------------------------------------
# Chapter 03: gradient_variance
# ---------------------------------------------------------------------------


def w37_gradient_variance_of_all_entries(grad_samples):
    return float(torch.var(grad_samples))


def w38_gradient_variance_torch_cov_rows(grad_samples):
    return float(torch.atleast_2d(torch.cov(grad_samples)).trace())  # torch.cov: variables are rows


def w39_gradient_variance_returns_tensor(grad_samples):
    return grad_samples.var(dim=0).sum()


def w40_gradient_variance_mean_of_coordinates(grad_samples):
    return float(grad_samples.var(dim=0).mean())


def w41_gradient_variance_in_float32(grad_samples):
    return grad_samples.float().var(dim=0).sum().item()


def r16_gradient_variance_cov_of_columns(grad_samples):
    covariance = torch.atleast_2d(torch.cov(grad_samples.T, correction=1))  # (P, P)
    return covariance.diagonal().sum().item()


def r17_gradient_variance_numpy_ddof(grad_samples):
    samples = grad_samples.detach().cpu().numpy()
    return float(np.var(samples, axis=0, ddof=1).sum())


ROWS += [
    _row(
        "gradient_variance",
        "03",
        w37_gradient_variance_of_all_entries,
        "Takes one variance over all N * P entries instead of each coordinate's variance over the samples, summed.",
    ),
    _row(
        "gradient_variance",
        "03",
        w38_gradient_variance_torch_cov_rows,
        "Passes the (N, P) samples to torch.cov, which reads rows as variables, so it sums the variances of samples.",
    ),
    _row(
        "gradient_variance",
        "03",
        w39_gradient_variance_returns_tensor,
        "Returns a 0-dim tensor instead of a Python float.",
    ),
    _row(
        "gradient_variance",
        "03",
        w40_gradient_variance_mean_of_coordinates,
        "Averages the P coordinate variances instead of summing them.",
    ),
    _row(
        "gradient_variance",
        "03",
        w41_gradient_variance_in_float32,
        "Casts the samples to float32 first, losing float64's precision when the mean is large.",
    ),
    _row("gradient_variance", "03", r16_gradient_variance_cov_of_columns),
    _row("gradient_variance", "03", r17_gradient_variance_numpy_ddof),
]


# ---------------------------------------------------------------------------
# Chapter 04: gae_table (gamma = 0.9, lam = 0.8, terminal at t = 2, V(s_5) = 1)
# ---------------------------------------------------------------------------


def w42_gae_table_forgets_gamma_in_recursion():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.51, 0.2, 1.0, 0.57, 1.4]  # A_t = delta_t + lam * A_{t+1}
    return deltas, advantages


def w43_gae_table_last_step_bootstraps_own_value():
    deltas = [0.35, -0.6, 1.0, -0.55, 0.95]  # delta_4 = 1 + 0.9 * V(s_4) - V(s_4)
    advantages = [0.436, 0.12, 1.0, 0.134, 0.95]
    return deltas, advantages


def w44_gae_table_bottom_up_order():
    deltas = [1.4, -0.55, 1.0, -0.6, 0.35]  # in the order computed: t = 4 first
    advantages = [1.4, 0.458, 1.0, 0.12, 0.436]
    return deltas, advantages


def w45_gae_table_two_decimals():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.44, 0.12, 1.0, 0.46, 1.4]
    return deltas, advantages


def r18_gae_table_exact_arithmetic():
    gamma, lam = 0.9, 0.8
    d4 = 1.0 + gamma * 1.0 - 0.5
    d3 = 0.0 + gamma * 0.5 - 1.0
    d2 = 2.0 - 1.0  # terminal: no bootstrap
    d1 = 0.0 + gamma * 1.0 - 1.5
    d0 = 1.0 + gamma * 1.5 - 2.0
    a4 = d4
    a3 = d3 + gamma * lam * a4
    a2 = d2  # terminal: the recursion stops
    a1 = d1 + gamma * lam * a2
    a0 = d0 + gamma * lam * a1
    return [d0, d1, d2, d3, d4], [a0, a1, a2, a3, a4]


ROWS += [
    _row(
        "gae_table",
        "04",
        w42_gae_table_forgets_gamma_in_recursion,
        "Runs the advantage recursion with lambda alone instead of gamma * lambda.",
    ),
    _row(
        "gae_table",
        "04",
        w43_gae_table_last_step_bootstraps_own_value,
        "Bootstraps the last step from V(s_4) instead of last_values = V(s_5), so delta_4 and A_4, A_3 are off.",
    ),
    _row(
        "gae_table",
        "04",
        w44_gae_table_bottom_up_order,
        "Lists both columns in the order computed, t = 4 down to 0, instead of t = 0 to 4.",
    ),
    _row(
        "gae_table",
        "04",
        w45_gae_table_two_decimals,
        "Rounds the advantages to two decimals (0.44, 0.46), off by more than the 0.001 allowed.",
    ),
    _row("gae_table", "04", r18_gae_table_exact_arithmetic),
]


# ---------------------------------------------------------------------------
# Chapter 04: compute_gae
# ---------------------------------------------------------------------------


def w46_compute_gae_last_value_from_values(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], values[..., -1:]], dim=-1)  # the last state's value again
    deltas = rewards + gamma * (1.0 - d) * next_values - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + values


def w47_compute_gae_one_minus_bool(rewards, values, dones, last_values, gamma, lam):
    not_done = 1 - dones  # 1 where the episode goes on
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * not_done * next_values - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * not_done[..., t] * running
        advantages[..., t] = running
    return advantages, advantages + values


def w48_compute_gae_cleanrl_next_done(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    T = rewards.shape[-1]
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(T)):
        if t == T - 1:
            nextnonterminal = 1.0 - d[..., -1]
            nextvalues = last_values
        else:
            nextnonterminal = 1.0 - d[..., t + 1]  # CleanRL's dones[t + 1]
            nextvalues = values[..., t + 1]
        delta = rewards[..., t] + gamma * nextvalues * nextnonterminal - values[..., t]
        lastgaelam = delta + gamma * lam * nextnonterminal * lastgaelam
        advantages[..., t] = lastgaelam
    return advantages, advantages + values


def w49_compute_gae_lambda_in_the_bootstrap(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * lam * (1.0 - d) * next_values - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + values


def w50_compute_gae_deltas_in_rewards(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards
    deltas += gamma * (1.0 - d) * next_values
    deltas -= values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + values


def w51_compute_gae_returns_spinning_up(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1.0 - d) * next_values - values
    advantages = torch.zeros_like(deltas)
    returns = torch.zeros_like(deltas)
    running_adv = torch.zeros_like(deltas[..., 0])
    running_ret = last_values * (1.0 - d[..., -1])
    for t in reversed(range(rewards.shape[-1])):
        running_adv = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running_adv
        running_ret = rewards[..., t] + gamma * (1.0 - d[..., t]) * running_ret  # the discounted return
        advantages[..., t] = running_adv
        returns[..., t] = running_ret
    return advantages, returns


def r19_compute_gae_cleanrl_style_course_dones(rewards, values, dones, last_values, gamma, lam):
    T = rewards.shape[-1]
    nonterminal = 1.0 - dones.to(rewards.dtype)
    advantages = torch.empty_like(rewards)
    lastgaelam = torch.zeros_like(rewards[..., 0])
    for t in range(T - 1, -1, -1):
        nextvalues = last_values if t == T - 1 else values[..., t + 1]
        delta = rewards[..., t] + gamma * nextvalues * nonterminal[..., t] - values[..., t]
        lastgaelam = delta + gamma * lam * nonterminal[..., t] * lastgaelam
        advantages[..., t] = lastgaelam
    returns = advantages + values
    return advantages, returns


def r20_compute_gae_list_then_stack(rewards, values, dones, last_values, gamma, lam):
    keep = torch.where(dones.bool(), 0.0, 1.0).to(rewards.dtype)
    following_value = last_values
    following_adv = torch.zeros_like(last_values, dtype=rewards.dtype)
    columns = []
    for t in reversed(range(rewards.shape[-1])):
        delta = rewards[..., t] + gamma * keep[..., t] * following_value - values[..., t]
        following_adv = delta + gamma * lam * keep[..., t] * following_adv
        following_value = values[..., t]
        columns.append(following_adv)
    advantages = torch.stack(columns[::-1], dim=-1)
    return advantages, advantages + values


ROWS += [
    _row(
        "compute_gae",
        "04",
        w46_compute_gae_last_value_from_values,
        "Bootstraps the last step from values[..., -1] instead of last_values.",
    ),
    _row(
        "compute_gae",
        "04",
        w47_compute_gae_one_minus_bool,
        "Computes 1 - dones directly, which raises for bool dones instead of converting them to numbers first.",
    ),
    _row(
        "compute_gae",
        "04",
        w48_compute_gae_cleanrl_next_done,
        "Keeps CleanRL's convention that masks step t with dones[t + 1], though here dones[t] ends the episode at t.",
    ),
    _row(
        "compute_gae",
        "04",
        w49_compute_gae_lambda_in_the_bootstrap,
        "Puts gamma * lambda instead of gamma in front of V(s_{t+1}) inside the TD residual.",
    ),
    _row(
        "compute_gae",
        "04",
        w50_compute_gae_deltas_in_rewards,
        "Builds the residuals with += and -= on an alias of rewards, changing the caller's rewards in place.",
    ),
    _row(
        "compute_gae",
        "04",
        w51_compute_gae_returns_spinning_up,
        "Returns the bootstrapped discounted return as the critic's target, as Spinning Up does, instead of "
        "advantages + values.",
    ),
    _row("compute_gae", "04", r19_compute_gae_cleanrl_style_course_dones),
    _row("compute_gae", "04", r20_compute_gae_list_then_stack),
]


# ---------------------------------------------------------------------------
# Chapter 04: td_residuals
# ---------------------------------------------------------------------------


def w52_td_residuals_last_step_never_masked(rewards, values, dones, last_values, gamma):
    d = dones.to(rewards.dtype)
    inside = values[..., 1:] * (1.0 - d[..., :-1])  # steps 0 .. T-2
    next_values = torch.cat([inside, last_values.unsqueeze(-1)], dim=-1)
    return rewards + gamma * next_values - values


def w53_td_residuals_previous_value(rewards, values, dones, last_values, gamma):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([last_values.unsqueeze(-1), values[..., :-1]], dim=-1)
    return rewards + gamma * (1.0 - d) * next_values - values


def w54_td_residuals_flat_last_values(rewards, values, dones, last_values, gamma):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.reshape(-1, 1)], dim=-1)
    return rewards + gamma * (1.0 - d) * next_values - values


def r21_td_residuals_roll_then_fix(rewards, values, dones, last_values, gamma):
    next_values = torch.roll(values, shifts=-1, dims=-1).clone()
    next_values[..., -1] = last_values
    next_values = torch.where(dones.bool(), torch.zeros_like(next_values), next_values)
    return rewards + gamma * next_values - values


def r51_td_residuals_pad_and_place(rewards, values, dones, last_values, gamma):
    T = rewards.shape[-1]
    shifted = nn.functional.pad(values[..., 1:], (0, 1))  # V(s_{t+1}), 0 in the last column
    last_column = nn.functional.pad(last_values.unsqueeze(-1), (T - 1, 0))  # V(s_T) in the last column only
    next_values = shifted + last_column
    keep = 1.0 - dones.to(rewards.dtype)
    return rewards + gamma * keep * next_values - values


ROWS += [
    _row(
        "td_residuals",
        "04",
        w52_td_residuals_last_step_never_masked,
        "Masks V(s_{t+1}) only for t < T-1, so a terminal last step still bootstraps from last_values.",
    ),
    _row(
        "td_residuals",
        "04",
        w53_td_residuals_previous_value,
        "Shifts the values the wrong way, pairing step t with V(s_{t-1}) (and last_values with step 0).",
    ),
    _row(
        "td_residuals",
        "04",
        w54_td_residuals_flat_last_values,
        "Reshapes last_values to (-1, 1), which lines up with the values only when there is exactly one batch axis.",
    ),
    _row("td_residuals", "04", r21_td_residuals_roll_then_fix),
    _row("td_residuals", "04", r51_td_residuals_pad_and_place),
]


# ---------------------------------------------------------------------------
# Chapter 05: clipped_surrogate_loss
# ---------------------------------------------------------------------------


def _surrogate_parts(logp, logp_old, adv, mask):
    """The valid entries, with padding replaced by zeros before any arithmetic, and the constants detached."""
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    logp = torch.where(valid, logp, zero)
    logp_old = torch.where(valid, logp_old.detach(), zero)
    adv = torch.where(valid, adv.detach(), zero)
    return valid, logp, logp_old, adv


def _diagnostics(ratio, adv, valid, low_edge, high_edge):
    with torch.no_grad():
        n = max(int(valid.sum()), 1)
        low, above = ratio < low_edge, ratio > high_edge
        binding = (above & (adv > 0)) | (low & (adv < 0))
        kl = torch.where(valid, (ratio - 1.0) - torch.log(ratio), torch.zeros_like(ratio))
        return {
            "clip_fraction": ((low | above) & valid).sum().item() / n,
            "clip_active_fraction": (binding & valid).sum().item() / n,
            "approx_kl": kl.sum().item() / n,
        }


def w55_clipped_surrogate_loss_max_instead_of_min(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid, logp, logp_old, adv = _surrogate_parts(logp, logp_old, adv, mask)
    ratio = torch.exp(logp - logp_old)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_entry = -torch.maximum(ratio * adv, clipped * adv)
    loss = torch.where(valid, per_entry, torch.zeros_like(per_entry)).sum() / valid.sum().clamp(min=1)
    return loss, _diagnostics(ratio, adv, valid, 1.0 - clip_eps, 1.0 + high)


def w56_clipped_surrogate_loss_clips_the_advantage(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid, logp, logp_old, adv = _surrogate_parts(logp, logp_old, adv, mask)
    ratio = torch.exp(logp - logp_old)
    per_entry = -torch.minimum(ratio * adv, ratio * torch.clamp(adv, -clip_eps, high))
    loss = torch.where(valid, per_entry, torch.zeros_like(per_entry)).sum() / valid.sum().clamp(min=1)
    return loss, _diagnostics(ratio, adv, valid, 1.0 - clip_eps, 1.0 + high)


def w57_clipped_surrogate_loss_ignores_clip_eps_high(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    valid, logp, logp_old, adv = _surrogate_parts(logp, logp_old, adv, mask)
    ratio = torch.exp(logp - logp_old)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    per_entry = -torch.minimum(ratio * adv, clipped * adv)
    loss = torch.where(valid, per_entry, torch.zeros_like(per_entry)).sum() / valid.sum().clamp(min=1)
    return loss, _diagnostics(ratio, adv, valid, 1.0 - clip_eps, 1.0 + clip_eps)


def w58_clipped_surrogate_loss_cleanrl_clipfrac(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid, logp, logp_old, adv = _surrogate_parts(logp, logp_old, adv, mask)
    ratio = torch.exp(logp - logp_old)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_entry = -torch.minimum(ratio * adv, clipped * adv)
    loss = torch.where(valid, per_entry, torch.zeros_like(per_entry)).sum() / valid.sum().clamp(min=1)
    info = _diagnostics(ratio, adv, valid, 1.0 - clip_eps, 1.0 + high)
    with torch.no_grad():
        outside = ((ratio - 1.0).abs() > clip_eps) & valid  # CleanRL's clipfracs
        info["clip_fraction"] = outside.sum().item() / max(int(valid.sum()), 1)
    return loss, info


def w59_clipped_surrogate_loss_cleanrl_old_approx_kl(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid, logp, logp_old, adv = _surrogate_parts(logp, logp_old, adv, mask)
    log_ratio = logp - logp_old
    ratio = torch.exp(log_ratio)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_entry = -torch.minimum(ratio * adv, clipped * adv)
    loss = torch.where(valid, per_entry, torch.zeros_like(per_entry)).sum() / valid.sum().clamp(min=1)
    info = _diagnostics(ratio, adv, valid, 1.0 - clip_eps, 1.0 + high)
    with torch.no_grad():
        info["approx_kl"] = (-log_ratio[valid]).sum().item() / max(int(valid.sum()), 1)  # old_approx_kl
    return loss, info


def w60_clipped_surrogate_loss_diagnostics_as_tensors(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid, logp, logp_old, adv = _surrogate_parts(logp, logp_old, adv, mask)
    ratio = torch.exp(logp - logp_old)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_entry = -torch.minimum(ratio * adv, clipped * adv)
    n = valid.sum().clamp(min=1)
    loss = torch.where(valid, per_entry, torch.zeros_like(per_entry)).sum() / n
    with torch.no_grad():
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binding = (above & (adv > 0)) | (low & (adv < 0))
        info = {
            "clip_fraction": ((low | above) & valid).sum() / n,
            "clip_active_fraction": (binding & valid).sum() / n,
            "approx_kl": torch.where(valid, (ratio - 1.0) - torch.log(ratio), torch.zeros_like(ratio)).sum() / n,
        }
    return loss, info


def w61_clipped_surrogate_loss_mean_over_all_entries(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid, logp, logp_old, adv = _surrogate_parts(logp, logp_old, adv, mask)
    ratio = torch.exp(logp - logp_old)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_entry = -torch.minimum(ratio * adv, clipped * adv)
    loss = torch.where(valid, per_entry, torch.zeros_like(per_entry)).mean()
    return loss, _diagnostics(ratio, adv, valid, 1.0 - clip_eps, 1.0 + high)


def w62_clipped_surrogate_loss_ratio_under_no_grad(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid, logp, logp_old, adv = _surrogate_parts(logp, logp_old, adv, mask)
    with torch.no_grad():  # one ratio for the loss and the diagnostics
        ratio = torch.exp(logp - logp_old)
        info = _diagnostics(ratio, adv, valid, 1.0 - clip_eps, 1.0 + high)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_entry = -torch.minimum(ratio * adv, clipped * adv)
    loss = torch.where(valid, per_entry, torch.zeros_like(per_entry)).sum() / valid.sum().clamp(min=1)
    return loss, info


def r22_clipped_surrogate_loss_max_of_negatives_masked_fill(
    logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None
):
    upper = 1.0 + (clip_eps if clip_eps_high is None else clip_eps_high)
    lower = 1.0 - clip_eps
    padding = torch.zeros_like(logp, dtype=torch.bool) if mask is None else ~mask.bool()
    log_ratio = logp.masked_fill(padding, 0.0) - logp_old.detach().masked_fill(padding, 0.0)
    advantage = adv.detach().masked_fill(padding, 0.0)
    ratio = log_ratio.exp()
    loss_unclipped = -advantage * ratio
    loss_clipped = -advantage * ratio.clamp(lower, upper)
    per_entry = torch.max(loss_unclipped, loss_clipped).masked_fill(padding, 0.0)
    count = int((~padding).sum())
    loss = per_entry.sum() / max(count, 1)
    with torch.no_grad():
        kept = ~padding
        r, a = ratio[kept], advantage[kept]
        below, above = r < lower, r > upper
        denominator = max(count, 1)
        info = {
            "clip_fraction": float((below | above).sum()) / denominator,
            "clip_active_fraction": float(((above & (a > 0)) | (below & (a < 0))).sum()) / denominator,
            "approx_kl": float(((r - 1) - torch.log(r)).sum()) / denominator,
        }
    return loss, info


def r52_clipped_surrogate_loss_selected_entries(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    upper = 1.0 + (clip_eps if clip_eps_high is None else clip_eps_high)
    lower = 1.0 - clip_eps
    keep = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    # Only the valid entries ever enter the arithmetic: padding (even -inf) is left behind.
    new, old, advantage = logp[keep], logp_old.detach()[keep], adv.detach()[keep]  # (n,)
    ratio = torch.exp(new - old)
    surrogate = torch.min(ratio * advantage, torch.clamp(ratio, lower, upper) * advantage)
    n = new.numel()
    loss = -surrogate.sum() / max(n, 1)
    with torch.no_grad():
        outside_low, outside_high = ratio < lower, ratio > upper
        binds = (outside_high & (advantage > 0)) | (outside_low & (advantage < 0))
        info = {
            "clip_fraction": (outside_low | outside_high).sum().item() / max(n, 1),
            "clip_active_fraction": binds.sum().item() / max(n, 1),
            "approx_kl": ((ratio - 1) - (new - old)).sum().item() / max(n, 1),
        }
    return loss, info


ROWS += [
    _row(
        "clipped_surrogate_loss",
        "05",
        w55_clipped_surrogate_loss_max_instead_of_min,
        "Takes the max of the clipped and unclipped objectives instead of the min (the optimistic bound).",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w56_clipped_surrogate_loss_clips_the_advantage,
        "Clips the advantage to [-clip_eps, clip_eps_high] instead of clipping the ratio.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w57_clipped_surrogate_loss_ignores_clip_eps_high,
        "Ignores clip_eps_high: clips (and counts clipping) symmetrically at 1 +- clip_eps.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w58_clipped_surrogate_loss_cleanrl_clipfrac,
        "Computes clip_fraction as CleanRL's |ratio - 1| > clip_eps, which ignores a larger clip_eps_high.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w59_clipped_surrogate_loss_cleanrl_old_approx_kl,
        "Reports CleanRL's old_approx_kl, the mean of -log(ratio), instead of the mean of (ratio - 1) - log(ratio).",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w60_clipped_surrogate_loss_diagnostics_as_tensors,
        "Returns the three diagnostics as 0-dim tensors instead of Python floats.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w61_clipped_surrogate_loss_mean_over_all_entries,
        "Averages over all entries, padding included, instead of over the valid ones.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w62_clipped_surrogate_loss_ratio_under_no_grad,
        "Computes the ratio inside torch.no_grad() (shared with the diagnostics), so the loss has no gradient.",
    ),
    _row("clipped_surrogate_loss", "05", r22_clipped_surrogate_loss_max_of_negatives_masked_fill),
    _row("clipped_surrogate_loss", "05", r52_clipped_surrogate_loss_selected_entries),
]


# ---------------------------------------------------------------------------
# Chapter 05: value_loss
# ---------------------------------------------------------------------------


def _value_parts(values, returns, values_old, mask):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    values = torch.where(valid, values, zero)
    returns = torch.where(valid, returns.detach(), zero)
    if values_old is not None:
        values_old = torch.where(valid, values_old.detach(), zero)
    return valid, values, returns, values_old


def w63_value_loss_sb3_mse(values, returns, values_old=None, clip_eps=None, mask=None):
    valid, values, returns, values_old = _value_parts(values, returns, values_old, mask)
    squared_error = (values - returns) ** 2
    if clip_eps is not None:
        clipped = values_old + torch.clamp(values - values_old, -clip_eps, clip_eps)
        squared_error = torch.maximum(squared_error, (clipped - returns) ** 2)
    return torch.where(valid, squared_error, torch.zeros_like(squared_error)).sum() / valid.sum().clamp(min=1)


def w64_value_loss_min_of_errors(values, returns, values_old=None, clip_eps=None, mask=None):
    valid, values, returns, values_old = _value_parts(values, returns, values_old, mask)
    squared_error = (values - returns) ** 2
    if clip_eps is not None:
        clipped = values_old + torch.clamp(values - values_old, -clip_eps, clip_eps)
        squared_error = torch.minimum(squared_error, (clipped - returns) ** 2)
    return 0.5 * torch.where(valid, squared_error, torch.zeros_like(squared_error)).sum() / valid.sum().clamp(min=1)


def w65_value_loss_clips_around_returns(values, returns, values_old=None, clip_eps=None, mask=None):
    valid, values, returns, values_old = _value_parts(values, returns, values_old, mask)
    squared_error = (values - returns) ** 2
    if clip_eps is not None:
        clipped = returns + torch.clamp(values - returns, -clip_eps, clip_eps)
        squared_error = torch.maximum(squared_error, (clipped - returns) ** 2)
    return 0.5 * torch.where(valid, squared_error, torch.zeros_like(squared_error)).sum() / valid.sum().clamp(min=1)


def w66_value_loss_mse_over_masked_tensors(values, returns, values_old=None, clip_eps=None, mask=None):
    valid, values, returns, values_old = _value_parts(values, returns, values_old, mask)
    if clip_eps is not None:
        clipped = values_old + torch.clamp(values - values_old, -clip_eps, clip_eps)
        squared_error = torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)
        return 0.5 * squared_error.mean()
    return 0.5 * nn.functional.mse_loss(values, returns)  # padding is zero on both sides


def r23_value_loss_clamp_between_bounds(values, returns, values_old=None, clip_eps=None, mask=None):
    padding = torch.zeros_like(values, dtype=torch.bool) if mask is None else ~mask.bool()
    v = values.masked_fill(padding, 0.0)
    target = returns.detach().masked_fill(padding, 0.0)
    error = (v - target).pow(2)
    if clip_eps is not None:
        old = values_old.detach().masked_fill(padding, 0.0)
        v_clipped = torch.max(torch.min(v, old + clip_eps), old - clip_eps)
        error = torch.max(error, (v_clipped - target).pow(2))
    n = int((~padding).sum())
    return error.masked_fill(padding, 0.0).sum() / (2 * max(n, 1))


def r53_value_loss_selected_entries(values, returns, values_old=None, clip_eps=None, mask=None):
    keep = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    v, target = values[keep], returns.detach()[keep]  # (n,)
    errors = (v - target) ** 2
    if clip_eps is not None:
        old = values_old.detach()[keep]
        v_clipped = old + (v - old).clamp(-clip_eps, clip_eps)
        errors = torch.maximum(errors, (v_clipped - target) ** 2)
    return 0.5 * errors.sum() / max(v.numel(), 1)


ROWS += [
    _row(
        "value_loss",
        "05",
        w63_value_loss_sb3_mse,
        "Leaves out the factor 1/2, as Stable-Baselines3's F.mse_loss does.",
    ),
    _row(
        "value_loss",
        "05",
        w64_value_loss_min_of_errors,
        "With clipping takes the min of the clipped and unclipped errors instead of the pessimistic max.",
    ),
    _row(
        "value_loss",
        "05",
        w65_value_loss_clips_around_returns,
        "Clips the new value around the returns instead of around values_old.",
    ),
    _row(
        "value_loss",
        "05",
        w66_value_loss_mse_over_masked_tensors,
        "Averages the squared errors over every entry, padding included, instead of over the valid ones.",
    ),
    _row("value_loss", "05", r23_value_loss_clamp_between_bounds),
    _row("value_loss", "05", r53_value_loss_selected_entries),
]


# ---------------------------------------------------------------------------
# Chapter 05: PPOLoss (each student's own surrogate and value loss are right: r22 and r23)
# ---------------------------------------------------------------------------


class _PPOLossBase(nn.Module):
    def __init__(self, clip_epsilon: float = 0.2, value_loss_coef: float = 0.5, entropy_coef: float = 0.01):
        super().__init__()
        self.clip_epsilon = clip_epsilon
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef


def _masked_entropy_mean(entropy, mask):
    valid = torch.ones_like(entropy, dtype=torch.bool) if mask is None else mask.bool()
    return torch.where(valid, entropy, torch.zeros_like(entropy)).sum() / valid.sum().clamp(min=1)


class w67_PPOLoss_entropy_as_penalty(_PPOLossBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = r22_clipped_surrogate_loss_max_of_negatives_masked_fill(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = r23_value_loss_clamp_between_bounds(values, returns, mask=mask)
        return policy_loss + self.value_loss_coef * v_loss + self.entropy_coef * _masked_entropy_mean(entropy, mask)


class w68_PPOLoss_entropy_mean_over_padding(_PPOLossBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = r22_clipped_surrogate_loss_max_of_negatives_masked_fill(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = r23_value_loss_clamp_between_bounds(values, returns, mask=mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * entropy.mean()


class w69_PPOLoss_detached_entropy(_PPOLossBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = r22_clipped_surrogate_loss_max_of_negatives_masked_fill(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = r23_value_loss_clamp_between_bounds(values, returns, mask=mask)
        bonus = _masked_entropy_mean(entropy.detach(), mask)  # a statistic of the batch
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * bonus


class w70_PPOLoss_value_loss_unmasked(_PPOLossBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = r22_clipped_surrogate_loss_max_of_negatives_masked_fill(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = r23_value_loss_clamp_between_bounds(values, returns)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * _masked_entropy_mean(entropy, mask)


class r24_PPOLoss_masked_select(_PPOLossBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        surrogate, _ = r22_clipped_surrogate_loss_max_of_negatives_masked_fill(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask
        )
        critic = r23_value_loss_clamp_between_bounds(values, returns, None, None, mask)
        keep = torch.ones_like(entropy, dtype=torch.bool) if mask is None else mask.bool()
        kept_entropy = entropy.masked_select(keep)
        mean_entropy = kept_entropy.sum() / max(kept_entropy.numel(), 1)
        total = surrogate + self.value_loss_coef * critic
        return total - self.entropy_coef * mean_entropy


class r54_PPOLoss_selected_entries(nn.Module):
    def __init__(self, clip_epsilon: float = 0.2, value_loss_coef: float = 0.5, entropy_coef: float = 0.01):
        super().__init__()
        self.clip_epsilon = clip_epsilon
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef

    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, self.info = r52_clipped_surrogate_loss_selected_entries(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask
        )
        critic_loss = r53_value_loss_selected_entries(values, returns, mask=mask)
        keep = torch.ones_like(entropy, dtype=torch.bool) if mask is None else mask.bool()
        entropies = entropy[keep]
        bonus = entropies.sum() / max(entropies.numel(), 1)
        return policy_loss + self.value_loss_coef * critic_loss - self.entropy_coef * bonus


ROWS += [
    _row(
        "PPOLoss",
        "05",
        w67_PPOLoss_entropy_as_penalty,
        "Adds entropy_coef times the mean entropy instead of subtracting it, a penalty instead of a bonus.",
    ),
    _row(
        "PPOLoss",
        "05",
        w68_PPOLoss_entropy_mean_over_padding,
        "Averages the entropy over every entry, padding included, instead of over the valid ones.",
    ),
    _row(
        "PPOLoss",
        "05",
        w69_PPOLoss_detached_entropy,
        "Detaches the entropy, so the bonus gives the policy no gradient.",
    ),
    _row(
        "PPOLoss",
        "05",
        w70_PPOLoss_value_loss_unmasked,
        "Passes the mask to the surrogate but not to the value loss, which then averages over padding too.",
    ),
    _row("PPOLoss", "05", r24_PPOLoss_masked_select),
    _row("PPOLoss", "05", r54_PPOLoss_selected_entries),
]


# ---------------------------------------------------------------------------
# Chapter 06: group_advantages
# ---------------------------------------------------------------------------


def w71_group_advantages_spread_below_eps_is_equal(rewards, normalize_std=True, eps=1e-6):
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    flat = (rewards.amax(dim=-1, keepdim=True) - rewards.amin(dim=-1, keepdim=True)) < eps  # equal up to eps
    centred = torch.where(flat, torch.zeros_like(centred), centred)
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def w72_group_advantages_flag_inverted(rewards, normalize_std=True, eps=1e-6):
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if normalize_std or rewards.shape[-1] == 1:  # "normalize" = keep the rewards' own scale
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def w73_group_advantages_eps_in_the_variance(rewards, normalize_std=True, eps=1e-6):
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    return centred / torch.sqrt(rewards.var(dim=-1, keepdim=True) + eps)


def w74_group_advantages_trl_flat_repeat(rewards, normalize_std=True, eps=1e-6):
    B, G = rewards.shape
    flat = rewards.reshape(-1)  # TRL's rewards: one flat list of B * G
    grouped = flat.view(-1, G)
    mean = grouped.mean(dim=1).repeat(G)  # back to B * G entries
    adv = flat - mean
    all_equal = (grouped == grouped[:, :1]).all(dim=1).repeat(G)
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if normalize_std and G > 1:
        adv = adv / (grouped.std(dim=1).repeat(G) + eps)
    return adv.view(B, G)


def w75_group_advantages_mean_without_keepdim(rewards, normalize_std=True, eps=1e-6):
    centred = rewards - rewards.mean(dim=-1)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def r25_group_advantages_per_row_unique(rewards, normalize_std=True, eps=1e-6):
    out = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        row = rewards[b]
        if torch.unique(row).numel() == 1:
            continue  # no signal in this group (also a group of one)
        centred = row - row.mean()
        out[b] = centred / (row.std(unbiased=True) + eps) if normalize_std else centred
    return out


def r26_group_advantages_nan_to_num_for_one(rewards, normalize_std=True, eps=1e-6):
    centred = rewards - rewards.mean(-1, keepdim=True)
    same = rewards.eq(rewards[..., :1]).all(-1, keepdim=True)
    centred = centred.masked_fill(same, 0.0)
    if not normalize_std:
        return centred
    std = rewards.std(-1, keepdim=True)  # NaN for a group of one, whose centred rewards are 0 already
    return torch.nan_to_num(centred / (std + eps), nan=0.0)


ROWS += [
    _row(
        "group_advantages",
        "06",
        w71_group_advantages_spread_below_eps_is_equal,
        "Treats a group whose rewards differ by less than eps as all equal and zeroes it, though they differ.",
    ),
    _row(
        "group_advantages",
        "06",
        w72_group_advantages_flag_inverted,
        "Reads normalize_std backwards: divides by the std when it is False and not when it is True.",
    ),
    _row(
        "group_advantages",
        "06",
        w73_group_advantages_eps_in_the_variance,
        "Adds eps to the variance under the square root instead of to the std.",
    ),
    _row(
        "group_advantages",
        "06",
        w74_group_advantages_trl_flat_repeat,
        "Ports TRL's flat layout but expands the group statistics with repeat instead of repeat_interleave, so "
        "each response gets another group's mean and std.",
    ),
    _row(
        "group_advantages",
        "06",
        w75_group_advantages_mean_without_keepdim,
        "Subtracts the group mean without keepdim, so the (B,) means broadcast along the group axis.",
    ),
    _row("group_advantages", "06", r25_group_advantages_per_row_unique),
    _row("group_advantages", "06", r26_group_advantages_nan_to_num_for_one),
]


# ---------------------------------------------------------------------------
# Chapter 06: kl_estimate
# ---------------------------------------------------------------------------


def w76_kl_estimate_k1_sign_flipped(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return log_r  # log(pi_ref / pi)
    if kind == "k2":
        return 0.5 * log_r**2
    return torch.expm1(log_r) - log_r


def w77_kl_estimate_k3_other_direction(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    log_ratio = logp - logp_ref  # r = pi / pi_ref
    return torch.expm1(log_ratio) - log_ratio


def w78_kl_estimate_k2_without_half(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return log_r**2
    return torch.expm1(log_r) - log_r


def w79_kl_estimate_verl_clamps(logp, logp_ref, kind):
    log_r = torch.clamp(logp_ref - logp, min=-20, max=20)
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    return torch.clamp(torch.exp(log_r) - 1 - log_r, min=-10, max=10)  # verl's low_var_kl


def w80_kl_estimate_k3_reduced_to_mean(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    return (torch.expm1(log_r) - log_r).mean()  # the KL estimate


def r27_kl_estimate_table_of_lambdas(logp, logp_ref, kind):
    diff = logp - logp_ref  # log(pi / pi_ref)
    estimators = {
        "k1": lambda d: d,
        "k2": lambda d: 0.5 * d * d,
        "k3": lambda d: torch.expm1(-d) + d,
    }
    if kind not in estimators:
        raise ValueError(f"kind: expected k1, k2 or k3, got {kind!r}")
    return estimators[kind](diff)


def r55_kl_estimate_match_statement(logp, logp_ref, kind):
    log_r = logp_ref - logp
    match kind:
        case "k1":
            return -log_r
        case "k2":
            return log_r.square() / 2
        case "k3":
            return torch.expm1(log_r) - log_r
        case _:
            raise ValueError(f"kind: expected 'k1', 'k2' or 'k3', got {kind!r}")


ROWS += [
    _row(
        "kl_estimate", "06", w76_kl_estimate_k1_sign_flipped, "Returns log(pi_ref / pi) for k1 instead of its negative."
    ),
    _row(
        "kl_estimate",
        "06",
        w77_kl_estimate_k3_other_direction,
        "Computes k3 with the ratio pi / pi_ref instead of pi_ref / pi, estimating the reverse KL.",
    ),
    _row("kl_estimate", "06", w78_kl_estimate_k2_without_half, "Leaves out the 1/2 of k2."),
    _row(
        "kl_estimate",
        "06",
        w79_kl_estimate_verl_clamps,
        "Keeps verl's clamps (log-ratio to [-20, 20], k3 to [-10, 10]), which cut k3 for far-apart policies.",
    ),
    _row(
        "kl_estimate",
        "06",
        w80_kl_estimate_k3_reduced_to_mean,
        "Returns the mean of k3 over all tokens instead of one estimate per token.",
    ),
    _row("kl_estimate", "06", r27_kl_estimate_table_of_lambdas),
    _row("kl_estimate", "06", r55_kl_estimate_match_statement),
]


# ---------------------------------------------------------------------------
# Chapter 06: aggregate_loss
# ---------------------------------------------------------------------------


def _valid_and_clean(per_token, mask):
    valid = mask.bool()
    return valid, torch.where(valid, per_token, torch.zeros_like(per_token))


def w81_aggregate_loss_drops_empty_responses(per_token, mask, mode, max_len=None):
    valid, per_token = _valid_and_clean(per_token, mask)
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        nonempty = n_valid > 0  # later verl: empty responses leave the mean
        means = per_response[nonempty] / n_valid[nonempty]
        return means.sum() / max(int(nonempty.sum()), 1)
    L = per_token.shape[-1] if max_len is None else max_len
    return (per_response / L).mean()


def w82_aggregate_loss_verl_sum_norm(per_token, mask, mode, max_len=None):
    valid, per_token = _valid_and_clean(per_token, mask)
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        return (per_response / n_valid.clamp(min=1)).mean()
    L = per_token.shape[-1] if max_len is None else max_len
    return per_response.sum() / L  # verl: the sum over responses, divided by the constant


def w83_aggregate_loss_token_mean_per_prompt(per_token, mask, mode, max_len=None):
    valid, per_token = _valid_and_clean(per_token, mask)
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        rows = per_token.reshape(-1, per_token.shape[-1]) if per_token.dim() < 3 else per_token.flatten(1)
        counts = valid.reshape(rows.shape).sum(dim=-1).clamp(min=1)
        per_prompt = rows.sum(dim=-1) / counts  # each prompt's token mean
        return per_prompt.mean()
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        return (per_response / n_valid.clamp(min=1)).mean()
    L = per_token.shape[-1] if max_len is None else max_len
    return (per_response / L).mean()


def w84_aggregate_loss_ignores_max_len(per_token, mask, mode, max_len=None):
    valid, per_token = _valid_and_clean(per_token, mask)
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        return (per_response / n_valid.clamp(min=1)).mean()
    return (per_response / per_token.shape[-1]).mean()  # the padded length


def w85_aggregate_loss_lengths_on_first_axis(per_token, mask, mode, max_len=None):
    valid, per_token = _valid_and_clean(per_token, mask)
    if mode == "token-mean":
        return per_token.sum() / valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        lengths = valid.sum(dim=0).to(per_token.dtype)  # |o_i|
        return (per_response / lengths.clamp(min=1)).mean()
    L = per_token.shape[-1] if max_len is None else max_len
    return (per_response / L).mean()


def r28_aggregate_loss_weights_einsum(per_token, mask, mode, max_len=None):
    valid = mask.to(torch.bool)
    clean = per_token.masked_fill(~valid, 0.0)
    lengths = valid.sum(-1).to(per_token.dtype)  # (...)
    n_responses = lengths.numel()
    if mode == "token-mean":
        weight = torch.full_like(lengths, 1.0) / lengths.sum().clamp(min=1)
    elif mode == "seq-mean-token-mean":
        weight = 1.0 / (n_responses * lengths.clamp(min=1))
    elif mode == "seq-mean-token-sum-norm":
        constant = per_token.shape[-1] if max_len is None else max_len
        weight = torch.full_like(lengths, 1.0 / (n_responses * constant))
    else:
        raise ValueError(f"mode: unknown {mode!r}")
    return (weight * clean.sum(-1)).sum()


def r29_aggregate_loss_nan_to_num(per_token, mask, mode, max_len=None):
    valid = mask > 0
    clean = torch.where(valid, per_token, torch.zeros((), dtype=per_token.dtype))
    if mode == "token-mean":
        return clean.sum() / valid.sum().clamp(min=1)
    sums = clean.sum(-1)
    if mode == "seq-mean-token-mean":
        return torch.nan_to_num(sums / valid.sum(-1), nan=0.0).mean()  # an empty response: 0 / 0 -> 0
    if mode == "seq-mean-token-sum-norm":
        return (sums / (clean.shape[-1] if max_len is None else max_len)).mean()
    raise ValueError(f"mode: unknown {mode!r}")


ROWS += [
    _row(
        "aggregate_loss",
        "06",
        w81_aggregate_loss_drops_empty_responses,
        "In the per-sequence mean leaves empty responses out of the mean over responses (later verl), instead of "
        "counting them as 0.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w82_aggregate_loss_verl_sum_norm,
        "In Dr. GRPO's mode divides the sum over all responses by max_len (verl's), with no mean over responses.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w83_aggregate_loss_token_mean_per_prompt,
        "Takes the token mean within each leading row first and then the mean over rows, instead of one token "
        "mean over the whole batch.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w84_aggregate_loss_ignores_max_len,
        "Ignores max_len and always divides by the padded length T in Dr. GRPO's mode.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w85_aggregate_loss_lengths_on_first_axis,
        "Counts each response's valid tokens along the first axis instead of the last (mask.sum(0)).",
    ),
    _row("aggregate_loss", "06", r28_aggregate_loss_weights_einsum),
    _row("aggregate_loss", "06", r29_aggregate_loss_nan_to_num),
]


# ---------------------------------------------------------------------------
# Chapter 06: grpo_loss (with the library's group_advantages, kl_estimate and aggregate_loss, as the text says)
# ---------------------------------------------------------------------------


def _grpo_info(ratio, adv, adv_tokens, valid, clip_eps, clip_eps_high, kl, rewards):
    with torch.no_grad():
        low, high = ratio < 1.0 - clip_eps, ratio > 1.0 + clip_eps_high
        binding = (high & (adv_tokens > 0)) | (low & (adv_tokens < 0))
        info = {
            "clip_fraction": (low | high)[valid].double().mean().item(),
            "clip_active_fraction": binding[valid].double().mean().item(),
            "kl": kl[valid].mean().item() if kl is not None else 0.0,
            "adv_abs_mean": adv.abs().mean().item(),
        }
        if rewards is not None:
            info["reward_mean"] = rewards.mean().item()
    return info


def _grpo_student(
    logp,
    logp_old,
    logp_ref,
    rewards,
    mask,
    clip_eps,
    kl_coef,
    kl_kind,
    normalize_std,
    loss_agg,
    max_len,
    clip_eps_high,
    adv,
    *,
    adv_axis=-1,
    kl_against=None,
    kl_outside=False,
    kl_in_reward=False,
    whiten_given=False,
    forget_max_len=False,
):
    """One student's grpo_loss, right unless one of the keyword switches turns on that student's one mistake."""
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = mask.bool()
    kl = None
    if logp_ref is not None:
        against = logp_ref.detach() if kl_against is None else kl_against.detach()
        kl = grpo.kl_estimate(logp, against, kl_kind)
    if adv is None:
        scores = rewards.detach()
        if kl_in_reward and kl is not None:  # InstructGPT: the KL is a penalty on the reward
            scores = scores - kl_coef * torch.where(valid, kl, torch.zeros_like(kl)).sum(-1).detach()
        adv = grpo.group_advantages(scores, normalize_std=normalize_std)
    elif whiten_given:  # PPO's habit: whiten the advantages
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    adv = adv.detach()
    adv_tokens = adv.unsqueeze(adv_axis).expand_as(logp)
    ratio = torch.exp(logp - logp_old.detach())
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_token = -torch.minimum(ratio * adv_tokens, clipped * adv_tokens)
    if kl is not None and not kl_outside and not kl_in_reward:
        per_token = per_token + kl_coef * kl
    if forget_max_len:
        loss = grpo.aggregate_loss(per_token, mask, loss_agg)
    else:
        loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    if kl is not None and kl_outside:
        loss = loss + kl_coef * kl.mean()
    return loss, _grpo_info(ratio, adv, adv_tokens, valid, clip_eps, high, kl, rewards)


def w86_grpo_loss_adv_on_group_axis(
    logp,
    logp_old,
    logp_ref,
    rewards,
    mask,
    clip_eps=0.2,
    kl_coef=0.04,
    kl_kind="k3",
    normalize_std=True,
    loss_agg="seq-mean-token-mean",
    max_len=None,
    clip_eps_high=None,
    adv=None,
):
    args = (logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind, normalize_std, loss_agg, max_len)
    return _grpo_student(*args, clip_eps_high, adv, adv_axis=1)


def w87_grpo_loss_kl_against_old_policy(
    logp,
    logp_old,
    logp_ref,
    rewards,
    mask,
    clip_eps=0.2,
    kl_coef=0.04,
    kl_kind="k3",
    normalize_std=True,
    loss_agg="seq-mean-token-mean",
    max_len=None,
    clip_eps_high=None,
    adv=None,
):
    args = (logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind, normalize_std, loss_agg, max_len)
    return _grpo_student(*args, clip_eps_high, adv, kl_against=logp_old)


def w88_grpo_loss_kl_mean_outside(
    logp,
    logp_old,
    logp_ref,
    rewards,
    mask,
    clip_eps=0.2,
    kl_coef=0.04,
    kl_kind="k3",
    normalize_std=True,
    loss_agg="seq-mean-token-mean",
    max_len=None,
    clip_eps_high=None,
    adv=None,
):
    args = (logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind, normalize_std, loss_agg, max_len)
    return _grpo_student(*args, clip_eps_high, adv, kl_outside=True)


def w89_grpo_loss_kl_in_the_reward(
    logp,
    logp_old,
    logp_ref,
    rewards,
    mask,
    clip_eps=0.2,
    kl_coef=0.04,
    kl_kind="k3",
    normalize_std=True,
    loss_agg="seq-mean-token-mean",
    max_len=None,
    clip_eps_high=None,
    adv=None,
):
    args = (logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind, normalize_std, loss_agg, max_len)
    return _grpo_student(*args, clip_eps_high, adv, kl_in_reward=True)


def w90_grpo_loss_whitens_given_adv(
    logp,
    logp_old,
    logp_ref,
    rewards,
    mask,
    clip_eps=0.2,
    kl_coef=0.04,
    kl_kind="k3",
    normalize_std=True,
    loss_agg="seq-mean-token-mean",
    max_len=None,
    clip_eps_high=None,
    adv=None,
):
    args = (logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind, normalize_std, loss_agg, max_len)
    return _grpo_student(*args, clip_eps_high, adv, whiten_given=True)


def w91_grpo_loss_forgets_max_len(
    logp,
    logp_old,
    logp_ref,
    rewards,
    mask,
    clip_eps=0.2,
    kl_coef=0.04,
    kl_kind="k3",
    normalize_std=True,
    loss_agg="seq-mean-token-mean",
    max_len=None,
    clip_eps_high=None,
    adv=None,
):
    args = (logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind, normalize_std, loss_agg, max_len)
    return _grpo_student(*args, clip_eps_high, adv, forget_max_len=True)


def w92_grpo_loss_info_over_padding(
    logp,
    logp_old,
    logp_ref,
    rewards,
    mask,
    clip_eps=0.2,
    kl_coef=0.04,
    kl_kind="k3",
    normalize_std=True,
    loss_agg="seq-mean-token-mean",
    max_len=None,
    clip_eps_high=None,
    adv=None,
):
    args = (logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind, normalize_std, loss_agg, max_len)
    loss, info = _grpo_student(*args, clip_eps_high, adv)
    high = clip_eps if clip_eps_high is None else clip_eps_high
    with torch.no_grad():
        ratio = torch.exp(logp - logp_old)
        info["clip_fraction"] = ((ratio < 1.0 - clip_eps) | (ratio > 1.0 + high)).double().mean().item()
    return loss, info


def w93_grpo_loss_adv_abs_mean_per_token(
    logp,
    logp_old,
    logp_ref,
    rewards,
    mask,
    clip_eps=0.2,
    kl_coef=0.04,
    kl_kind="k3",
    normalize_std=True,
    loss_agg="seq-mean-token-mean",
    max_len=None,
    clip_eps_high=None,
    adv=None,
):
    args = (logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind, normalize_std, loss_agg, max_len)
    loss, info = _grpo_student(*args, clip_eps_high, adv)
    with torch.no_grad():
        if adv is None:
            adv = grpo.group_advantages(rewards, normalize_std=normalize_std)
        adv_tokens = adv.unsqueeze(-1).expand_as(logp)
        info["adv_abs_mean"] = adv_tokens[mask.bool()].abs().mean().item()  # over the valid tokens
    return loss, info


def r30_grpo_loss_cleanrl_style(
    logp,
    logp_old,
    logp_ref,
    rewards,
    mask,
    clip_eps=0.2,
    kl_coef=0.04,
    kl_kind="k3",
    normalize_std=True,
    loss_agg="seq-mean-token-mean",
    max_len=None,
    clip_eps_high=None,
    adv=None,
):
    upper = 1.0 + (clip_eps if clip_eps_high is None else clip_eps_high)
    lower = 1.0 - clip_eps
    if adv is None:
        with torch.no_grad():
            adv = grpo.group_advantages(rewards, normalize_std=normalize_std)
    advantages = adv.detach()[:, :, None]  # (B, G, 1)
    ratio = (logp - logp_old.detach()).exp()
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * ratio.clamp(lower, upper)
    per_token = torch.max(pg_losses1, pg_losses2)
    kl = None
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len=max_len)
    with torch.no_grad():
        keep = mask.bool()
        r = ratio[keep]
        a = advantages.expand_as(ratio)[keep]
        n = max(r.numel(), 1)
        info = {
            "clip_fraction": float(((r < lower) | (r > upper)).sum()) / n,
            "clip_active_fraction": float((((r > upper) & (a > 0)) | ((r < lower) & (a < 0))).sum()) / n,
            "kl": float(kl[keep].sum()) / n if kl is not None else 0.0,
            "adv_abs_mean": float(adv.abs().mean()),
        }
        if rewards is not None:
            info["reward_mean"] = float(rewards.mean())
    return loss, info


def r56_grpo_loss_einops_and_selection(
    logp,
    logp_old,
    logp_ref,
    rewards,
    mask,
    clip_eps=0.2,
    kl_coef=0.04,
    kl_kind="k3",
    normalize_std=True,
    loss_agg="seq-mean-token-mean",
    max_len=None,
    clip_eps_high=None,
    adv=None,
):
    eps_high = clip_eps_high if clip_eps_high is not None else clip_eps
    given = adv is not None
    advantages = adv.detach() if given else grpo.group_advantages(rewards.detach(), normalize_std=normalize_std)
    T = logp.shape[-1]
    adv_tokens = repeat(advantages, "B G -> B G T", T=T)
    ratio = torch.exp(logp - logp_old.detach())
    objective = torch.minimum(ratio * adv_tokens, ratio.clamp(1 - clip_eps, 1 + eps_high) * adv_tokens)
    per_token = -objective
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    with torch.no_grad():
        keep = mask.bool()
        r, a = ratio[keep], adv_tokens[keep]
        low, high = r < 1 - clip_eps, r > 1 + eps_high
        count = max(r.numel(), 1)
        info = {
            "clip_fraction": (low | high).sum().item() / count,
            "clip_active_fraction": ((high & (a > 0)) | (low & (a < 0))).sum().item() / count,
            "kl": kl[keep].sum().item() / count if logp_ref is not None else 0.0,
            "adv_abs_mean": advantages.abs().mean().item(),
        }
        if rewards is not None:
            info["reward_mean"] = rewards.mean().item()
    return loss, info


ROWS += [
    _row(
        "grpo_loss",
        "06",
        w86_grpo_loss_adv_on_group_axis,
        "Unsqueezes the advantages on axis 1 instead of the last, so they broadcast along the wrong axis.",
    ),
    _row(
        "grpo_loss",
        "06",
        w87_grpo_loss_kl_against_old_policy,
        "Estimates the KL against logp_old instead of logp_ref.",
    ),
    _row(
        "grpo_loss",
        "06",
        w88_grpo_loss_kl_mean_outside,
        "Adds kl_coef times the mean KL over all tokens, padding included, after aggregation instead of adding "
        "the KL to each token's loss before it.",
    ),
    _row(
        "grpo_loss",
        "06",
        w89_grpo_loss_kl_in_the_reward,
        "Takes the KL off the rewards before the group advantages (InstructGPT's KL-in-reward) instead of adding "
        "it to each token's loss.",
    ),
    _row(
        "grpo_loss",
        "06",
        w90_grpo_loss_whitens_given_adv,
        "Whitens the given advantages over the batch instead of using them as they are.",
    ),
    _row(
        "grpo_loss",
        "06",
        w91_grpo_loss_forgets_max_len,
        "Does not pass max_len on to aggregate_loss, so Dr. GRPO divides by T.",
    ),
    _row(
        "grpo_loss",
        "06",
        w92_grpo_loss_info_over_padding,
        "Computes clip_fraction over every token, padding included, instead of over the valid tokens.",
    ),
    _row(
        "grpo_loss",
        "06",
        w93_grpo_loss_adv_abs_mean_per_token,
        "Computes adv_abs_mean over the valid tokens (longer responses weigh more) instead of over responses.",
    ),
    _row("grpo_loss", "06", r30_grpo_loss_cleanrl_style),
    _row("grpo_loss", "06", r56_grpo_loss_einops_and_selection),
]


# ---------------------------------------------------------------------------
# Chapter 07: memory_accounting
# ---------------------------------------------------------------------------

_BYTES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}


def _account(actor, critic, reference, reward, optimizer):
    account = {"actor": actor, "critic": critic, "reference": reference, "reward": reward, "optimizer": optimizer}
    account["total"] = sum(account.values())
    return account


def w94_memory_accounting_master_copy_always(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    trained = n_params_actor + n_params_critic
    # ZeRO's K = 12: two moments and a master copy, for every trained parameter
    return _account(
        n_params_actor * 2 * w, n_params_critic * 2 * w, n_params_ref * w, n_params_reward * w, trained * 3 * o
    )


def w95_memory_accounting_master_copy_when_dtypes_differ(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    trained = n_params_actor + n_params_critic
    master = o if weights_dtype != optimizer_dtype else 0
    return _account(
        n_params_actor * 2 * w,
        n_params_critic * 2 * w,
        n_params_ref * w,
        n_params_reward * w,
        trained * (2 * o + master),
    )


def w96_memory_accounting_gradients_in_optimizer_dtype(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    trained = n_params_actor + n_params_critic
    master = o if w < o else 0
    return _account(
        n_params_actor * (w + o),  # AMP keeps fp32 gradients
        n_params_critic * (w + o),
        n_params_ref * w,
        n_params_reward * w,
        trained * (2 * o + master),
    )


def w97_memory_accounting_reference_with_gradients(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    trained = n_params_actor + n_params_critic
    master = o if w < o else 0
    return _account(
        n_params_actor * 2 * w,
        n_params_critic * 2 * w,
        n_params_ref * 2 * w,  # a copy of the actor: weights and gradients
        n_params_reward * w,
        trained * (2 * o + master),
    )


def w98_memory_accounting_optimizer_for_actor_only(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    master = o if w < o else 0
    return _account(
        n_params_actor * 2 * w,
        n_params_critic * 2 * w,
        n_params_ref * w,
        n_params_reward * w,
        n_params_actor * (2 * o + master),
    )


def w99_memory_accounting_bits_over_eight(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w = int(weights_dtype[2:]) / 8  # "bf16" -> 16 bits -> 2 bytes
    o = int(optimizer_dtype[2:]) / 8
    trained = n_params_actor + n_params_critic
    master = o if w < o else 0
    return _account(
        n_params_actor * 2 * w,
        n_params_critic * 2 * w,
        n_params_ref * w,
        n_params_reward * w,
        trained * (2 * o + master),
    )


def r31_memory_accounting_from_bit_widths(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    bits = {name: int(name[-2:]) for name in ("fp64", "fp32", "bf16", "fp16")}
    weight_bytes = bits[weights_dtype] // 8
    state_bytes = bits[optimizer_dtype] // 8
    per_trained = 2 * state_bytes  # exp_avg and exp_avg_sq
    if weight_bytes < state_bytes:
        per_trained += state_bytes  # the master copy of a narrow weight
    rows = {
        "actor": 2 * weight_bytes * n_params_actor,
        "critic": 2 * weight_bytes * n_params_critic,
        "reference": weight_bytes * n_params_ref,
        "reward": weight_bytes * n_params_reward,
        "optimizer": per_trained * (n_params_actor + n_params_critic),
    }
    rows["total"] = rows["actor"] + rows["critic"] + rows["reference"] + rows["reward"] + rows["optimizer"]
    return rows


ROWS += [
    _row(
        "memory_accounting",
        "07",
        w94_memory_accounting_master_copy_always,
        "Counts a master copy for every trained parameter, also when the weights are as wide as the optimizer's dtype.",
    ),
    _row(
        "memory_accounting",
        "07",
        w95_memory_accounting_master_copy_when_dtypes_differ,
        "Adds the master copy whenever the two dtypes differ, so fp64 weights with fp32 Adam get one too.",
    ),
    _row(
        "memory_accounting",
        "07",
        w96_memory_accounting_gradients_in_optimizer_dtype,
        "Counts the gradients in optimizer_dtype instead of weights_dtype.",
    ),
    _row(
        "memory_accounting",
        "07",
        w97_memory_accounting_reference_with_gradients,
        "Counts gradients for the frozen reference model too.",
    ),
    _row(
        "memory_accounting",
        "07",
        w98_memory_accounting_optimizer_for_actor_only,
        "Counts Adam's state for the actor only, not for the critic.",
    ),
    _row(
        "memory_accounting",
        "07",
        w99_memory_accounting_bits_over_eight,
        "Converts bits to bytes with true division, so every entry is a float instead of an int.",
    ),
    _row("memory_accounting", "07", r31_memory_accounting_from_bit_widths),
]


# ---------------------------------------------------------------------------
# Chapter 07: read_sweep
# ---------------------------------------------------------------------------


def _saturation(group_sizes, reward, tol):
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[k])


def w100_read_sweep_divmod_by_rows(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(torch.argmax(reward)), reward.shape[0])
    return int(group_sizes[i]), float(clip_eps[j]), _saturation(group_sizes, reward, tol)


def w101_read_sweep_last_of_ties(group_sizes, clip_eps, reward, tol=0.1):
    best, where = -math.inf, (0, 0)
    for i in range(reward.shape[0]):
        for j in range(reward.shape[1]):
            if reward[i, j] >= best:
                best, where = float(reward[i, j]), (i, j)
    i, j = where
    return int(group_sizes[i]), float(clip_eps[j]), _saturation(group_sizes, reward, tol)


def w102_read_sweep_clip_range_first(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward.T))  # walk the clip ranges first
    j, i = divmod(flat, reward.shape[0])
    return int(group_sizes[i]), float(clip_eps[j]), _saturation(group_sizes, reward, tol)


def w103_read_sweep_saturation_at_first_stall(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(torch.argmax(reward)), reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = len(group_sizes) - 1
    for step in range(len(group_sizes) - 1):
        if best_per_group[step + 1] - best_per_group[step] <= tol:  # the next group size buys little
            k = step
            break
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w104_read_sweep_strictly_within_tol(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(torch.argmax(reward)), reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group > reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def r32_read_sweep_python_loops(group_sizes, clip_eps, reward, tol=0.1):
    table = reward.tolist()
    best_value, best_cell = None, None
    for i, row in enumerate(table):
        for j, value in enumerate(row):
            if best_value is None or value > best_value:  # strictly better: ties keep the cheaper, earlier cell
                best_value, best_cell = value, (i, j)
    threshold = reward.max() - tol  # in the table's own dtype
    row_best = reward.amax(dim=1)
    saturation = next(i for i in range(len(table)) if bool(row_best[i] >= threshold))
    i, j = best_cell
    return int(group_sizes[i].item()), float(clip_eps[j].item()), int(group_sizes[saturation].item())


def r61_read_sweep_nonzero(group_sizes, clip_eps, reward, tol=0.1):
    best = reward.max()
    i, j = torch.nonzero(reward == best)[0].tolist()  # row-major order: the cheapest of the ties first
    within = reward.amax(dim=1) >= best - tol  # (nG,)
    k = int(torch.argmax(within.to(torch.int8)))  # the first True
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


ROWS += [
    _row(
        "read_sweep",
        "07",
        w100_read_sweep_divmod_by_rows,
        "Turns the flat argmax into (row, column) dividing by the number of rows instead of columns.",
    ),
    _row(
        "read_sweep",
        "07",
        w101_read_sweep_last_of_ties,
        "Keeps the last of equal maxima (>=) instead of the first, the most expensive configuration of a tie.",
    ),
    _row(
        "read_sweep",
        "07",
        w102_read_sweep_clip_range_first,
        "Breaks ties by the smallest clip range first and then the smallest group size, instead of group size first.",
    ),
    _row(
        "read_sweep",
        "07",
        w103_read_sweep_saturation_at_first_stall,
        "Takes saturation where the reward first stops growing by more than tol, instead of the first group size "
        "within tol of the table's best.",
    ),
    _row(
        "read_sweep",
        "07",
        w104_read_sweep_strictly_within_tol,
        "Counts a group size as saturated only when strictly within tol (>), so tol = 0 finds none.",
    ),
    _row("read_sweep", "07", r32_read_sweep_python_loops),
    _row("read_sweep", "07", r61_read_sweep_nonzero),
]


# ---------------------------------------------------------------------------
# Chapter 08: addition_exact_reward
# ---------------------------------------------------------------------------


def w105_addition_exact_reward_no_eos_needed(completion, answer):
    return float(completion.split("$")[0] == answer)


def w106_addition_exact_reward_eos_must_end(completion, answer):
    return float(completion.endswith("$") and completion[:-1] == answer)


def w107_addition_exact_reward_compares_ints(completion, answer):
    head, eos, _ = completion.partition("$")
    if not eos:
        return 0.0
    try:
        return float(int(head) == int(answer))
    except ValueError:
        return 0.0


def w108_addition_exact_reward_strips_spaces(completion, answer):
    head, eos, _ = completion.partition("$")
    return float(bool(eos) and head.strip() == answer)


def w109_addition_exact_reward_last_eos(completion, answer):
    head, eos, _ = completion.rpartition("$")
    return float(bool(eos) and head == answer)


def r33_addition_exact_reward_regex_prefix(completion, answer):
    match = re.match(r"([^$]*)\$", completion)
    return 1.0 if match is not None and match.group(1) == answer else 0.0


def r34_addition_exact_reward_find(completion, answer):
    stop = completion.find("$")
    if stop == -1:
        return 0.0
    return float(completion[:stop] == answer)


ROWS += [
    _row(
        "addition_exact_reward",
        "08",
        w105_addition_exact_reward_no_eos_needed,
        "Compares the text before the first '$' without requiring a '$', so a completion that never stopped earns 1.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w106_addition_exact_reward_eos_must_end,
        "Requires the EOS to be the last character, so text after the first EOS is not ignored.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w107_addition_exact_reward_compares_ints,
        "Compares the numbers as ints, so leading zeros and surrounding spaces are accepted.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w108_addition_exact_reward_strips_spaces,
        "Strips whitespace before comparing, so a space before the EOS is accepted.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w109_addition_exact_reward_last_eos,
        "Splits at the last EOS instead of the first, so text between two EOS counts.",
    ),
    _row("addition_exact_reward", "08", r33_addition_exact_reward_regex_prefix),
    _row("addition_exact_reward", "08", r34_addition_exact_reward_find),
]


# ---------------------------------------------------------------------------
# Chapter 08: completion_mask
# ---------------------------------------------------------------------------


def w110_completion_mask_excludes_eos(completion_ids, eos_id):
    return (torch.cumsum((completion_ids == eos_id).long(), dim=-1) == 0).float()


def w111_completion_mask_until_second_eos(completion_ids, eos_id):
    seen = torch.cumsum((completion_ids == eos_id).long(), dim=-1)
    return (seen <= 1).float()  # up to and including the first EOS


def w112_completion_mask_bool(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return (torch.cumsum(is_eos, dim=-1) - is_eos) == 0


def w113_completion_mask_cumsum_over_flat_batch(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long().reshape(-1)
    before = torch.cumsum(is_eos, dim=0) - is_eos
    return (before == 0).float().reshape(completion_ids.shape)


def completion_mask(completion_ids, eos_id):
    """The mask of chapter 08's exercise 2, right: what the grpo_step students of this class call."""
    is_eos = (completion_ids == eos_id).long()
    return ((torch.cumsum(is_eos, dim=-1) - is_eos) == 0).float()


def r35_completion_mask_shift_by_concatenation(completion_ids, eos_id):
    no_eos_yet = torch.cumsum((completion_ids == eos_id).int(), dim=-1) == 0  # strictly before the first EOS
    first_column = torch.ones_like(no_eos_yet[..., :1])
    return torch.cat([first_column, no_eos_yet[..., :-1]], dim=-1).to(torch.float32)


def r36_completion_mask_first_eos_index(completion_ids, eos_id):
    L = completion_ids.shape[-1]
    is_eos = completion_ids == eos_id
    first = torch.where(
        is_eos.any(dim=-1), is_eos.int().argmax(dim=-1), torch.full_like(is_eos[..., 0], L, dtype=torch.long)
    )
    positions = torch.arange(L, device=completion_ids.device)
    return (positions <= first[..., None]).float()


ROWS += [
    _row(
        "completion_mask",
        "08",
        w110_completion_mask_excludes_eos,
        "Stops the mask before the first EOS instead of including it.",
    ),
    _row(
        "completion_mask",
        "08",
        w111_completion_mask_until_second_eos,
        "Keeps every token while at most one EOS has been seen, so the tokens after the first EOS stay valid up "
        "to a second one.",
    ),
    _row(
        "completion_mask",
        "08",
        w112_completion_mask_bool,
        "Returns a bool mask instead of the float32 mask the docstring promises.",
    ),
    _row(
        "completion_mask",
        "08",
        w113_completion_mask_cumsum_over_flat_batch,
        "Flattens the batch before the cumsum, so an EOS in one row masks the rows after it.",
    ),
    _row("completion_mask", "08", r35_completion_mask_shift_by_concatenation),
    _row("completion_mask", "08", r36_completion_mask_first_eos_index),
]


# ---------------------------------------------------------------------------
# Chapter 08: grpo_step (each student calls this class's right completion_mask, and the library's
# gather_log_probs and grpo_loss, as the setup cell imports them)
# ---------------------------------------------------------------------------


def _completion_logps(model, prompts, completions):
    """(B, G, L) log-probs of the completion tokens, each prompt G times in group order, shifted logits."""
    B, G, L = completions.shape
    P = prompts.shape[1]
    flat_prompts = repeat(prompts, "B P -> (B G) P", G=G)
    flat = rearrange(completions, "B G L -> (B G) L")
    logits = model(torch.cat([flat_prompts, flat[:, :-1]], dim=1))[:, P - 1 :, :]
    return rearrange(gather_log_probs(logits, flat), "(B G) L -> B G L", G=G)


def w114_grpo_step_unshifted_logits(
    policy,
    ref_model,
    optimizer,
    prompts,
    completions,
    rewards,
    logp_old,
    eos_id,
    clip_eps=0.2,
    kl_coef=0.04,
    max_grad_norm=1.0,
):
    B, G, L = completions.shape
    P = prompts.shape[1]
    flat_prompts = prompts.repeat_interleave(G, dim=0)
    flat = completions.reshape(B * G, L)

    def logp_of(model):
        logits = model(torch.cat([flat_prompts, flat], dim=1))[:, P:, :]  # the completion's own positions
        return gather_log_probs(logits, flat).reshape(B, G, L)

    logp = logp_of(policy)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = logp_of(ref_model)
    mask = completion_mask(completions, eos_id)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


def w115_grpo_step_no_grad_clipping(
    policy,
    ref_model,
    optimizer,
    prompts,
    completions,
    rewards,
    logp_old,
    eos_id,
    clip_eps=0.2,
    kl_coef=0.04,
    max_grad_norm=1.0,
):
    logp = _completion_logps(policy, prompts, completions)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = _completion_logps(ref_model, prompts, completions)
    mask = completion_mask(completions, eos_id)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()  # Adam normalises the step anyway
    return loss.item()


def w116_grpo_step_clips_after_the_step(
    policy,
    ref_model,
    optimizer,
    prompts,
    completions,
    rewards,
    logp_old,
    eos_id,
    clip_eps=0.2,
    kl_coef=0.04,
    max_grad_norm=1.0,
):
    logp = _completion_logps(policy, prompts, completions)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = _completion_logps(ref_model, prompts, completions)
    mask = completion_mask(completions, eos_id)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    return loss.item()


def w117_grpo_step_recomputes_logp_old(
    policy,
    ref_model,
    optimizer,
    prompts,
    completions,
    rewards,
    logp_old,
    eos_id,
    clip_eps=0.2,
    kl_coef=0.04,
    max_grad_norm=1.0,
):
    logp = _completion_logps(policy, prompts, completions)
    with torch.no_grad():
        sampling_logp = _completion_logps(policy, prompts, completions)  # the policy that sampled: this one
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = _completion_logps(ref_model, prompts, completions)
    mask = completion_mask(completions, eos_id)
    loss, _ = grpo_loss(logp, sampling_logp, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


def w118_grpo_step_clips_values(
    policy,
    ref_model,
    optimizer,
    prompts,
    completions,
    rewards,
    logp_old,
    eos_id,
    clip_eps=0.2,
    kl_coef=0.04,
    max_grad_norm=1.0,
):
    logp = _completion_logps(policy, prompts, completions)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = _completion_logps(ref_model, prompts, completions)
    mask = completion_mask(completions, eos_id)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_value_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


def w119_grpo_step_returns_tensor(
    policy,
    ref_model,
    optimizer,
    prompts,
    completions,
    rewards,
    logp_old,
    eos_id,
    clip_eps=0.2,
    kl_coef=0.04,
    max_grad_norm=1.0,
):
    logp = _completion_logps(policy, prompts, completions)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = _completion_logps(ref_model, prompts, completions)
    mask = completion_mask(completions, eos_id)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.detach()


def r37_grpo_step_full_sequence_then_slice(
    policy,
    ref_model,
    optimizer,
    prompts,
    completions,
    rewards,
    logp_old,
    eos_id,
    clip_eps=0.2,
    kl_coef=0.04,
    max_grad_norm=1.0,
):
    B, G, L = completions.shape
    P = prompts.shape[1]
    sequences = torch.cat([prompts.repeat_interleave(G, dim=0), completions.reshape(B * G, L)], dim=1)
    targets = sequences[:, P:]  # (B*G, L)

    def scores(model):
        logits = model(sequences)[:, P - 1 : -1]  # causal: the last position predicts nothing we need
        return gather_log_probs(logits, targets).view(B, G, L)

    logp = scores(policy)
    use_ref = ref_model is not None and kl_coef > 0
    if use_ref:
        with torch.no_grad():
            logp_ref = scores(ref_model)
    else:
        logp_ref = None
    loss, _ = grpo_loss(
        logp, logp_old, logp_ref, rewards, completion_mask(completions, eos_id), clip_eps=clip_eps, kl_coef=kl_coef
    )
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(policy.parameters()), max_norm=max_grad_norm)
    optimizer.step()
    return float(loss.detach())


ROWS += [
    _row(
        "grpo_step",
        "08",
        w114_grpo_step_unshifted_logits,
        "Feeds the whole completion and scores each token with the logits at its own position instead of the "
        "previous one (no shift).",
    ),
    _row(
        "grpo_step",
        "08",
        w115_grpo_step_no_grad_clipping,
        "Leaves out the clipping of the global gradient norm to max_grad_norm.",
    ),
    _row(
        "grpo_step",
        "08",
        w116_grpo_step_clips_after_the_step,
        "Clips the gradient norm after optimizer.step(), when the step has already used the unclipped gradients.",
    ),
    _row(
        "grpo_step",
        "08",
        w117_grpo_step_recomputes_logp_old,
        "Recomputes the old log-probs from the current policy instead of using the logp_old it is given.",
    ),
    _row(
        "grpo_step",
        "08",
        w118_grpo_step_clips_values,
        "Clips each gradient entry with clip_grad_value_ instead of the global norm with clip_grad_norm_.",
    ),
    _row(
        "grpo_step",
        "08",
        w119_grpo_step_returns_tensor,
        "Returns the loss as a detached 0-dim tensor instead of a Python float.",
    ),
    _row("grpo_step", "08", r37_grpo_step_full_sequence_then_slice),
]


# ---------------------------------------------------------------------------
# Chapter 09: answer_reward (each student scores with chapter 01's math_answer_reward, as the setup cell imports it)
# ---------------------------------------------------------------------------


def _text_of(completion):
    return completion if isinstance(completion, str) else completion[-1]["content"]


def w120_answer_reward_no_kwargs(prompts, completions, answer):
    return [
        None if truth is None else math_answer_reward(_text_of(c), str(truth)) for c, truth in zip(completions, answer)
    ]


def w121_answer_reward_first_message(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(None)
            continue
        text = completion if isinstance(completion, str) else completion[0]["content"]  # the assistant's reply
        rewards.append(math_answer_reward(text, str(truth)))
    return rewards


def w122_answer_reward_zero_without_answer(prompts, completions, answer, **kwargs):
    return [
        0.0 if truth is None else math_answer_reward(_text_of(c), str(truth)) for c, truth in zip(completions, answer)
    ]


def w123_answer_reward_by_prompt(prompts, completions, answer, **kwargs):
    answer_of = dict(zip(prompts, answer))  # each prompt's reference answer
    rewards = []
    for prompt, completion in zip(prompts, completions):
        truth = answer_of[prompt]
        rewards.append(None if truth is None else math_answer_reward(_text_of(completion), str(truth)))
    return rewards


def r38_answer_reward_helper_and_comprehension(prompts, completions, answer, **kwargs):
    def score(completion, truth):
        if truth is None:
            return None  # no reward from this function: TRL leaves it out
        if isinstance(completion, list):
            completion = completion[-1]["content"]
        return math_answer_reward(completion, str(truth))

    return [score(completion, truth) for completion, truth in zip(completions, answer)]


ROWS += [
    _row(
        "answer_reward",
        "09",
        w120_answer_reward_no_kwargs,
        "Has no **kwargs in its signature, so TRL's other keyword arguments make the call fail.",
    ),
    _row(
        "answer_reward",
        "09",
        w121_answer_reward_first_message,
        "Reads the first message of a conversational completion instead of the last, missing answers after tool calls.",
    ),
    _row(
        "answer_reward",
        "09",
        w122_answer_reward_zero_without_answer,
        "Returns 0.0 instead of None for a row whose answer is None.",
    ),
    _row(
        "answer_reward",
        "09",
        w123_answer_reward_by_prompt,
        "Looks each answer up by its prompt in a dict, which fails for conversational prompts (lists are "
        "unhashable) and mixes up rows with equal prompts.",
    ),
    _row("answer_reward", "09", r38_answer_reward_helper_and_comprehension),
]


# ---------------------------------------------------------------------------
# Chapter 09: completion_logps
# ---------------------------------------------------------------------------


def _mask_through_first_eos(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return ((torch.cumsum(is_eos, dim=-1) - is_eos) == 0).float()


def _forward(model, sequences, prompt_mask, positions=True, attention=True):
    L = sequences.shape[1] - prompt_mask.shape[1]
    attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(sequences[:, :L])], dim=1)
    kwargs = {"input_ids": sequences}
    if attention:
        kwargs["attention_mask"] = attention_mask
    if positions:
        kwargs["position_ids"] = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return model(**kwargs).logits


def _pick(logits, completion_ids):
    return torch.log_softmax(logits, dim=-1).gather(-1, completion_ids[..., None]).squeeze(-1)


def w124_completion_logps_without_position_ids(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    logits = _forward(model, sequences, prompt_mask, positions=False)[:, P - 1 : -1].float() / temperature
    return _pick(logits, completion_ids), _mask_through_first_eos(completion_ids, eos_id)


def w125_completion_logps_without_temperature(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    logits = _forward(model, sequences, prompt_mask)[:, P - 1 : -1].float()
    return _pick(logits, completion_ids), _mask_through_first_eos(completion_ids, eos_id)


def w126_completion_logps_logits_not_shifted(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    logits = _forward(model, sequences, prompt_mask)[:, P:].float() / temperature  # the completion's positions
    return _pick(logits, completion_ids), _mask_through_first_eos(completion_ids, eos_id)


def w127_completion_logps_without_attention_mask(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    logits = model(input_ids=sequences).logits[:, P - 1 : -1].float() / temperature
    return _pick(logits, completion_ids), _mask_through_first_eos(completion_ids, eos_id)


def w128_completion_logps_temperature_after_softmax(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    logits = _forward(model, sequences, prompt_mask)[:, P - 1 : -1].float()
    return _pick(logits, completion_ids) / temperature, _mask_through_first_eos(completion_ids, eos_id)


def w129_completion_logps_mask_not_eos(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    logits = _forward(model, sequences, prompt_mask)[:, P - 1 : -1].float() / temperature
    return _pick(logits, completion_ids), (completion_ids != eos_id).float()


def w130_completion_logps_under_no_grad(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    with torch.no_grad():  # a forward pass for scoring
        logits = _forward(model, sequences, prompt_mask)[:, P - 1 : -1].float() / temperature
    return _pick(logits, completion_ids), _mask_through_first_eos(completion_ids, eos_id)


def r39_completion_logps_gather_log_probs_and_shifted_mask(model, sequences, prompt_mask, eos_id, temperature=1.0):
    B, P = prompt_mask.shape
    completion = sequences[:, P:]
    attention = torch.cat([prompt_mask.to(torch.long), torch.ones_like(completion, dtype=torch.long)], dim=-1)
    positions = torch.clamp(torch.cumsum(attention, dim=-1) - 1, min=0)
    out = model(input_ids=sequences, attention_mask=attention, position_ids=positions)
    scores = out.logits[:, P - 1 : sequences.shape[1] - 1, :].float()
    logp = gather_log_probs(scores / temperature, completion)
    before = torch.cumsum((completion == eos_id).int(), dim=-1) == 0  # strictly before the first EOS
    mask = torch.cat([torch.ones_like(before[:, :1]), before[:, :-1]], dim=-1).float()
    return logp, mask


def r62_completion_logps_take_along_dim(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    L = sequences.shape[1] - P
    completion_ids = sequences[:, P:]
    attention_mask = torch.ones_like(sequences)
    attention_mask[:, :P] = prompt_mask
    position_ids = (torch.cumsum(attention_mask, dim=1) - 1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids).logits
    scores = logits[:, P - 1 : P - 1 + L].float() / temperature  # (B, L, V)
    logp = torch.take_along_dim(nn.functional.log_softmax(scores, dim=-1), completion_ids[..., None], dim=-1)[..., 0]
    is_eos = completion_ids == eos_id
    first_eos = torch.where(
        is_eos.any(dim=1), is_eos.int().argmax(dim=1), torch.full_like(is_eos[:, 0], L, dtype=torch.long)
    )
    mask = (torch.arange(L)[None, :] <= first_eos[:, None]).float()
    return logp, mask


ROWS += [
    _row(
        "completion_logps",
        "09",
        w124_completion_logps_without_position_ids,
        "Passes no position_ids, so a model that does not derive positions from the attention mask (GPT-2) "
        "numbers a left-padded prompt from the padding.",
    ),
    _row(
        "completion_logps",
        "09",
        w125_completion_logps_without_temperature,
        "Does not divide the logits by the temperature.",
    ),
    _row(
        "completion_logps",
        "09",
        w126_completion_logps_logits_not_shifted,
        "Scores completion token t with the logits at its own position P + t instead of P - 1 + t.",
    ),
    _row(
        "completion_logps",
        "09",
        w127_completion_logps_without_attention_mask,
        "Runs the model without the attention mask, so the left padding is attended to.",
    ),
    _row(
        "completion_logps",
        "09",
        w128_completion_logps_temperature_after_softmax,
        "Divides the log-probs by the temperature after the log-softmax instead of the logits before it.",
    ),
    _row(
        "completion_logps",
        "09",
        w129_completion_logps_mask_not_eos,
        "Builds the mask as 'not EOS', which drops the EOS itself and keeps the padding after it.",
    ),
    _row(
        "completion_logps",
        "09",
        w130_completion_logps_under_no_grad,
        "Runs the forward pass under torch.no_grad(), so logp carries no gradient.",
    ),
    _row("completion_logps", "09", r39_completion_logps_gather_log_probs_and_shifted_mask),
    _row("completion_logps", "09", r62_completion_logps_take_along_dim),
]


# ---------------------------------------------------------------------------
# Chapter 09: grpo_config_kwargs
# ---------------------------------------------------------------------------

_GRPO_DEFAULTS = {
    "algo": "grpo",
    "adv_estimator": "grpo",
    "policy_loss": "clip",
    "dynamic_sampling": False,
    "overlong_cache": 0,
    "kl_placement": "loss",
    "whiten_advantages": False,
}
_LOSS_TYPES = {"seq-mean-token-mean": "grpo", "token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}


def _config_student(
    cfg,
    num_processes,
    *,
    refused=tuple(_GRPO_DEFAULTS),
    per_process_share=True,
    optimiser_steps=True,
    bias_correction_off=True,
    counts_completions=True,
    warmup_schedule=True,
    accumulation_in_generation=True,
    sets_loss_type=True,
):
    """One student's grpo_config_kwargs, right unless one keyword switch turns on that student's one mistake."""
    for switch in refused:
        if getattr(cfg, switch) != _GRPO_DEFAULTS[switch]:
            raise ValueError(f"cfg.{switch}: GRPOConfig has no field for {getattr(cfg, switch)!r}")
    B, G, K, M = cfg.prompts_per_step, cfg.group_size, cfg.update_epochs, cfg.num_minibatches
    minibatch = B * G // M if counts_completions else B // M
    per_process = minibatch // num_processes if per_process_share else minibatch
    micro = cfg.micro_batch_size or per_process
    if B * G % M or minibatch % num_processes or per_process % micro:
        raise ValueError(f"num_processes: {B * G} completions do not split evenly")
    accumulation = per_process // micro
    steps = K * M if optimiser_steps else 1
    schedule = cfg.lr_schedule
    if warmup_schedule and schedule == "constant" and cfg.warmup_iterations > 0:
        schedule = "constant_with_warmup"
    kwargs = {
        "num_generations": G,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": M * accumulation if accumulation_in_generation else M,
        "num_iterations": K,
        "max_steps": cfg.iterations * steps,
        "warmup_steps": cfg.warmup_iterations * steps,
        "lr_scheduler_type": schedule,
        "learning_rate": cfg.lr,
        "max_grad_norm": cfg.max_grad_norm,
        "max_completion_length": cfg.max_new_tokens,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "beta": cfg.kl_coef,
        "epsilon": cfg.clip_eps,
        "epsilon_high": cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high,
        "scale_rewards": "group" if cfg.normalize_std else "none",
        "mask_truncated_completions": cfg.overlong_filter,
        "seed": cfg.seed,
    }
    if bias_correction_off:
        kwargs["use_bias_correction_kl"] = False
    if sets_loss_type:
        kwargs["loss_type"] = _LOSS_TYPES[cfg.loss_agg]
    return kwargs


def w131_grpo_config_kwargs_ignores_processes(cfg, num_processes=1):
    return _config_student(cfg, num_processes, per_process_share=False)


def w132_grpo_config_kwargs_max_steps_in_rounds(cfg, num_processes=1):
    return _config_student(cfg, num_processes, optimiser_steps=False)


def w133_grpo_config_kwargs_keeps_bias_correction(cfg, num_processes=1):
    return _config_student(cfg, num_processes, bias_correction_off=False)


def w134_grpo_config_kwargs_batch_in_prompts(cfg, num_processes=1):
    return _config_student(cfg, num_processes, counts_completions=False)


def w135_grpo_config_kwargs_constant_ignores_warmup(cfg, num_processes=1):
    return _config_student(cfg, num_processes, warmup_schedule=False)


def w136_grpo_config_kwargs_steps_per_generation_is_minibatches(cfg, num_processes=1):
    return _config_student(cfg, num_processes, accumulation_in_generation=False)


def w137_grpo_config_kwargs_no_loss_type(cfg, num_processes=1):
    return _config_student(cfg, num_processes, sets_loss_type=False)


def w138_grpo_config_kwargs_refuses_only_algo(cfg, num_processes=1):
    return _config_student(cfg, num_processes, refused=("algo",))


def r40_grpo_config_kwargs_step_by_step(cfg, num_processes=1):
    unsupported = [name for name, value in _GRPO_DEFAULTS.items() if getattr(cfg, name) != value]
    if unsupported:
        raise ValueError(f"cfg.{unsupported[0]}: not translatable to GRPOConfig, got {getattr(cfg, unsupported[0])!r}")
    completions = cfg.prompts_per_step * cfg.group_size
    if completions % cfg.num_minibatches:
        raise ValueError(f"num_minibatches: {completions} completions do not split into {cfg.num_minibatches}")
    per_minibatch = completions // cfg.num_minibatches
    if per_minibatch % num_processes:
        raise ValueError(f"num_processes: {per_minibatch} completions do not split over {num_processes}")
    per_process = per_minibatch // num_processes
    micro = per_process if cfg.micro_batch_size is None else cfg.micro_batch_size
    if per_process % micro:
        raise ValueError(f"micro_batch_size: {per_process} completions do not split into micro-batches of {micro}")
    accumulation = per_process // micro
    optimiser_steps_per_round = cfg.update_epochs * cfg.num_minibatches
    warmup_steps = cfg.warmup_iterations * optimiser_steps_per_round
    scheduler = "constant_with_warmup" if cfg.lr_schedule == "constant" and warmup_steps else cfg.lr_schedule
    return dict(
        num_generations=cfg.group_size,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=cfg.num_minibatches * accumulation,
        num_iterations=cfg.update_epochs,
        max_steps=cfg.iterations * optimiser_steps_per_round,
        warmup_steps=warmup_steps,
        lr_scheduler_type=scheduler,
        learning_rate=cfg.lr,
        max_grad_norm=cfg.max_grad_norm,
        max_completion_length=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        beta=cfg.kl_coef,
        use_bias_correction_kl=False,
        epsilon=cfg.clip_eps,
        epsilon_high=cfg.clip_eps_high if cfg.clip_eps_high is not None else cfg.clip_eps,
        loss_type=_LOSS_TYPES[cfg.loss_agg],
        scale_rewards="group" if cfg.normalize_std else "none",
        mask_truncated_completions=cfg.overlong_filter,
        seed=cfg.seed,
    )


ROWS += [
    _row(
        "grpo_config_kwargs",
        "09",
        w131_grpo_config_kwargs_ignores_processes,
        "Sets per_device_train_batch_size to a whole minibatch, not dividing it among the num_processes processes.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w132_grpo_config_kwargs_max_steps_in_rounds,
        "Sets max_steps (and warmup_steps) in rounds instead of optimiser steps, forgetting the factor "
        "update_epochs * num_minibatches.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w133_grpo_config_kwargs_keeps_bias_correction,
        "Does not set use_bias_correction_kl=False, so TRL's default multiplies the KL term by the ratio.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w134_grpo_config_kwargs_batch_in_prompts,
        "Counts per_device_train_batch_size in prompts (B / num_minibatches) instead of completions (B * G / "
        "num_minibatches).",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w135_grpo_config_kwargs_constant_ignores_warmup,
        "Keeps HF's 'constant' schedule with a warm-up, which ignores the warm-up, instead of 'constant_with_warmup'.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w136_grpo_config_kwargs_steps_per_generation_is_minibatches,
        "Sets steps_per_generation to num_minibatches, forgetting the gradient-accumulation passes of each.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w137_grpo_config_kwargs_no_loss_type,
        "Sets no loss_type, so TRL's default 'dapo' replaces the course's aggregation.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w138_grpo_config_kwargs_refuses_only_algo,
        "Refuses only a non-GRPO algo and silently drops the other switches TRL has no field for.",
    ),
    _row("grpo_config_kwargs", "09", r40_grpo_config_kwargs_step_by_step),
]


# ---------------------------------------------------------------------------
# Chapter 10: pass_at_k
# ---------------------------------------------------------------------------


def _broadcast_counts(n, c, k):
    return torch.broadcast_tensors(*(torch.as_tensor(x, dtype=torch.float64) for x in (n, c, k)))


def _pass_product(n, c, k, first_offset=1, last_offset=0):
    """1 - prod (1 - k / i) over i from n - c + first_offset to n - last_offset, with the edge cases handled."""
    n, c, k = _broadcast_counts(n, c, k)
    width = int(c.max()) + 1
    j = torch.arange(width, dtype=torch.float64)
    start = n - c + first_offset
    stop = n - last_offset
    i = start[..., None] + j
    factors = torch.where(i <= stop[..., None], 1 - k[..., None] / i, torch.ones((), dtype=torch.float64))
    return torch.where(n - c < k, (c > 0).double(), 1 - factors.prod(dim=-1))


def w139_pass_at_k_plug_in(n, c, k):
    n, c, k = _broadcast_counts(n, c, k)
    return 1 - (1 - c / n) ** k


def w140_pass_at_k_one_factor_too_many(n, c, k):
    return _pass_product(n, c, k, first_offset=0)  # i from n - c


def w141_pass_at_k_one_when_k_exceeds(n, c, k):
    n, c, k = _broadcast_counts(n, c, k)
    j = torch.arange(int(c.max()), dtype=torch.float64)
    i = (n - c + 1)[..., None] + j
    factors = torch.where(j < c[..., None], 1 - k[..., None] / i, torch.ones((), dtype=torch.float64))
    return torch.where(n - c < k, torch.ones_like(n), 1 - factors.prod(dim=-1))  # every draw holds a right one


def w142_pass_at_k_float32(n, c, k):
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x, dtype=torch.float32) for x in (n, c, k)))
    j = torch.arange(int(c.max()), dtype=torch.float32)
    i = (n - c + 1)[..., None] + j
    factors = torch.where(j < c[..., None], 1 - k[..., None] / i, torch.ones((), dtype=torch.float32))
    return torch.where(n - c < k, (c > 0).float(), 1 - factors.prod(dim=-1))


def w143_pass_at_k_scalars_only(n, c, k):
    if n - c < k:
        return torch.tensor(1.0 if c > 0 else 0.0, dtype=torch.float64)
    factors = 1.0 - k / np.arange(n - c + 1, n + 1)
    return torch.tensor(1.0 - np.prod(factors), dtype=torch.float64)


def r41_pass_at_k_log_space(n, c, k):
    n, c, k = _broadcast_counts(n, c, k)
    if c.numel() == 0:
        return torch.zeros(c.shape, dtype=torch.float64)
    offsets = torch.arange(int(c.max()), dtype=torch.float64)
    i = (n - c + 1).unsqueeze(-1) + offsets
    inside = offsets < c.unsqueeze(-1)
    safe = torch.where(inside & (n - c >= k).unsqueeze(-1), 1 - k.unsqueeze(-1) / i, torch.ones_like(i))
    log_all_wrong = torch.log(safe).sum(dim=-1)
    estimate = -torch.expm1(log_all_wrong)
    return torch.where(n - c < k, (c > 0).to(torch.float64), estimate)


def r42_pass_at_k_python_loop(n, c, k):
    n, c, k = _broadcast_counts(n, c, k)
    out = torch.empty(n.shape, dtype=torch.float64)
    flat_out = out.view(-1)
    for index, (ni, ci, ki) in enumerate(zip(n.reshape(-1).tolist(), c.reshape(-1).tolist(), k.reshape(-1).tolist())):
        if ni - ci < ki:
            flat_out[index] = 1.0 if ci > 0 else 0.0
            continue
        all_wrong = 1.0
        for i in range(int(ni - ci) + 1, int(ni) + 1):
            all_wrong *= 1.0 - ki / i
        flat_out[index] = 1.0 - all_wrong
    return out


ROWS += [
    _row(
        "pass_at_k",
        "10",
        w139_pass_at_k_plug_in,
        "Returns the plug-in 1 - (1 - c/n)^k, sampling with replacement, instead of the unbiased estimator.",
    ),
    _row(
        "pass_at_k",
        "10",
        w140_pass_at_k_one_factor_too_many,
        "Starts the product at i = n - c instead of n - c + 1, one factor too many.",
    ),
    _row(
        "pass_at_k",
        "10",
        w141_pass_at_k_one_when_k_exceeds,
        "Returns 1 whenever n - c < k, also when c = 0 and k > n, where no sample is right and it must be 0.",
    ),
    _row(
        "pass_at_k",
        "10",
        w142_pass_at_k_float32,
        "Computes and returns float32 instead of the float64 the docstring promises.",
    ),
    _row(
        "pass_at_k",
        "10",
        w143_pass_at_k_scalars_only,
        "Handles Python ints only (if and np.arange on n, c, k), so tensors of counts fail to broadcast.",
    ),
    _row("pass_at_k", "10", r41_pass_at_k_log_space),
    _row("pass_at_k", "10", r42_pass_at_k_python_loop),
]


# ---------------------------------------------------------------------------
# Chapter 10: aggregation_token_weight
# ---------------------------------------------------------------------------


def _float_lengths(length):
    return length.to(length.dtype if length.is_floating_point() else torch.get_default_dtype())


def w144_aggregation_token_weight_counts_nonempty_responses(length, mode, max_len=None):
    o = _float_lengths(length)
    N = int((o > 0).sum())  # the responses that have tokens
    L = o.max() if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / (N * L)
    return torch.where(o > 0, w, torch.zeros_like(w))


def w145_aggregation_token_weight_verl_sum_norm(length, mode, max_len=None):
    o = _float_lengths(length)
    N = o.numel()
    L = o.max() if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / L  # verl: the sum over responses, over the constant
    return torch.where(o > 0, w, torch.zeros_like(w))


def w146_aggregation_token_weight_infinite_for_empty(length, mode, max_len=None):
    o = _float_lengths(length)
    N = o.numel()
    L = o.max() if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        return 1 / (N * o)
    if mode == "token-mean":
        return torch.where(o > 0, torch.ones_like(o) / o.sum(), torch.zeros_like(o))
    return torch.where(o > 0, torch.ones_like(o) / (N * L), torch.zeros_like(o))


def w147_aggregation_token_weight_default_dtype_always(length, mode, max_len=None):
    o = length.to(torch.get_default_dtype())
    N = o.numel()
    L = o.max() if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / (N * L)
    return torch.where(o > 0, w, torch.zeros_like(w))


def w148_aggregation_token_weight_responses_on_first_axis(length, mode, max_len=None):
    o = _float_lengths(length)
    N = o.shape[0]  # the number of responses
    L = o.max() if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / (N * L)
    return torch.where(o > 0, w, torch.zeros_like(w))


def r43_aggregation_token_weight_chained_where(length, mode, max_len=None):
    lengths = length.double() if not length.is_floating_point() else length
    N = lengths.numel()
    constant = lengths.max() if max_len is None else torch.as_tensor(max_len, dtype=lengths.dtype)
    has_tokens = lengths > 0
    per_mode = {
        "seq-mean-token-mean": 1.0 / (N * torch.where(has_tokens, lengths, torch.ones_like(lengths))),
        "token-mean": (1.0 / lengths.sum().clamp(min=1)).expand_as(lengths),
        "seq-mean-token-sum-norm": (1.0 / (N * constant)).expand_as(lengths),
    }
    weights = torch.where(has_tokens, per_mode[mode], torch.zeros_like(lengths))
    return weights.to(lengths.dtype if length.is_floating_point() else torch.get_default_dtype())


def r60_aggregation_token_weight_differentiate_my_own(length, mode, max_len=None):
    dtype = length.dtype if length.is_floating_point() else torch.get_default_dtype()
    lengths = length.reshape(-1).to(torch.long)  # (N,) every entry is one response
    T = max(int(lengths.max()), 1)
    valid = torch.arange(T) < lengths[:, None]  # (N, T)
    per_token = torch.ones(valid.shape, dtype=dtype, requires_grad=True)
    kept = per_token * valid
    if mode == "seq-mean-token-mean":
        loss = (kept.sum(-1) / lengths.clamp(min=1)).mean()
    elif mode == "token-mean":
        loss = kept.sum() / lengths.sum().clamp(min=1)
    elif mode == "seq-mean-token-sum-norm":
        loss = (kept.sum(-1) / (T if max_len is None else max_len)).mean()
    else:
        raise ValueError(f"mode: unknown {mode!r}")
    (grad,) = torch.autograd.grad(loss, per_token)
    return grad[:, 0].where(lengths > 0, torch.zeros((), dtype=dtype)).reshape(length.shape)


ROWS += [
    _row(
        "aggregation_token_weight",
        "10",
        w144_aggregation_token_weight_counts_nonempty_responses,
        "Counts only the non-empty responses in N, though an empty response still counts in the mean.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w145_aggregation_token_weight_verl_sum_norm,
        "Gives Dr. GRPO's tokens 1 / max_len (verl's sum over responses) instead of 1 / (N * max_len).",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w146_aggregation_token_weight_infinite_for_empty,
        "In the per-sequence mean divides by |o_i| unguarded, so an empty response gets an infinite weight "
        "instead of 0.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w147_aggregation_token_weight_default_dtype_always,
        "Always converts to the default dtype, so float64 lengths come back as float32 weights.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w148_aggregation_token_weight_responses_on_first_axis,
        "Takes N from the first axis (length.shape[0]) instead of counting every entry, wrong for 2-D lengths.",
    ),
    _row("aggregation_token_weight", "10", r43_aggregation_token_weight_chained_where),
    _row("aggregation_token_weight", "10", r60_aggregation_token_weight_differentiate_my_own),
]


# ---------------------------------------------------------------------------
# Chapter 10: completion_style
# ---------------------------------------------------------------------------


def _style_of_body(body, n_digits, total=r"1?[0-9]", dots=r"\.+", count=True):
    if re.fullmatch(r"[0-9]+", body):
        return "direct"
    m = re.fullmatch(r"\[([^\[\]]+)\]([0-9]+)", body)
    if m is None:
        return "malformed"
    content = m.group(1)
    if re.fullmatch(dots, content):
        return "filler"
    totals = content.split(",")
    if (not count or len(totals) == n_digits) and all(re.fullmatch(total, t) for t in totals):
        return "scratchpad"
    return "malformed"


def w149_completion_style_no_eos_check(text, n_digits=3):
    return _style_of_body(text.split("$")[0], n_digits)


def w150_completion_style_two_digit_totals(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    return _style_of_body(body, n_digits, total=r"[0-9]{1,2}")


def w151_completion_style_counts_no_totals(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    return _style_of_body(body, n_digits, count=False)


def w152_completion_style_match_not_fullmatch(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    if re.match(r"[0-9]+", body):
        return "direct"
    m = re.fullmatch(r"\[([^\[\]]+)\]([0-9]+)", body)
    if m is None:
        return "malformed"
    if re.fullmatch(r"\.+", m.group(1)):
        return "filler"
    totals = m.group(1).split(",")
    if len(totals) == n_digits and all(re.fullmatch(r"1?[0-9]", t) for t in totals):
        return "scratchpad"
    return "malformed"


def w153_completion_style_empty_body_direct(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    if re.fullmatch(r"[0-9]*", body):  # digits only
        return "direct"
    return _style_of_body(body, n_digits)


def r44_completion_style_string_methods(text, n_digits=3):
    stop = text.find("$")
    if stop < 0:
        return "malformed"
    body = text[:stop]
    if body and body.isascii() and body.isdigit():
        return "direct"
    if not body.startswith("[") or body.count("[") != 1 or body.count("]") != 1:
        return "malformed"
    close = body.index("]")
    inside, after = body[1:close], body[close + 1 :]
    if not inside or not after or not (after.isascii() and after.isdigit()):
        return "malformed"
    if set(inside) == {"."}:
        return "filler"
    parts = inside.split(",")
    if len(parts) != n_digits:
        return "malformed"
    for part in parts:
        if not (part.isascii() and part.isdigit()) or (len(part) > 1 and part[0] == "0") or int(part) > 19:
            return "malformed"
    return "scratchpad"


_STYLE_PATTERN = re.compile(r"(?P<direct>[0-9]+)|\[(?:(?P<filler>\.+)|(?P<totals>[0-9,]+))\][0-9]+")


def r59_completion_style_one_regex(text, n_digits=3):
    if "$" not in text:
        return "malformed"
    body = text[: text.index("$")]
    match = _STYLE_PATTERN.fullmatch(body)
    if match is None:
        return "malformed"
    if match.group("direct") is not None:
        return "direct"
    if match.group("filler") is not None:
        return "filler"
    totals = match.group("totals").split(",")
    well_formed = all(re.fullmatch(r"[0-9]|1[0-9]", total) for total in totals)
    return "scratchpad" if well_formed and len(totals) == n_digits else "malformed"


ROWS += [
    _row(
        "completion_style",
        "10",
        w149_completion_style_no_eos_check,
        "Reads up to the first '$' without requiring one, so a completion that never stopped gets a style.",
    ),
    _row(
        "completion_style",
        "10",
        w150_completion_style_two_digit_totals,
        "Accepts any one- or two-digit total, so totals of 20 or more and leading zeros pass as a scratchpad.",
    ),
    _row(
        "completion_style",
        "10",
        w151_completion_style_counts_no_totals,
        "Does not check that the scratchpad holds exactly n_digits totals.",
    ),
    _row(
        "completion_style",
        "10",
        w152_completion_style_match_not_fullmatch,
        "Tests 'direct' with re.match instead of re.fullmatch, so any body that starts with a digit is direct.",
    ),
    _row(
        "completion_style",
        "10",
        w153_completion_style_empty_body_direct,
        "Uses [0-9]* for direct, so an empty completion ('$') is direct instead of malformed.",
    ),
    _row("completion_style", "10", r44_completion_style_string_methods),
    _row("completion_style", "10", r59_completion_style_one_regex),
]


# ---------------------------------------------------------------------------
# Chapter 10: style_share
# ---------------------------------------------------------------------------


def w154_style_share_counts_top_level(labels, style):
    if len(labels) == 0:
        raise ValueError("labels: no completion")
    return (
        labels.count(style) / len(labels) if isinstance(labels, list) else float((np.asarray(labels) == style).mean())
    )


def w155_style_share_without_malformed(labels, style):
    flat = np.asarray(labels).reshape(-1)
    if flat.size == 0:
        raise ValueError("labels: no completion")
    well_formed = flat[flat != "malformed"]
    return float((well_formed == style).sum() / max(well_formed.size, 1))


def w156_style_share_zero_division(labels, style):
    flat = np.asarray(labels).reshape(-1).tolist()
    return sum(label == style for label in flat) / len(flat)


def r45_style_share_recursive_flatten(labels, style):
    def leaves(x):
        if isinstance(x, np.ndarray):
            yield from x.reshape(-1).tolist()
        elif isinstance(x, (list, tuple)):
            for item in x:
                yield from leaves(item)
        else:
            yield x

    every = list(leaves(labels))
    if not every:
        raise ValueError("labels: empty, so no style has a share")
    return every.count(style) / len(every)


ROWS += [
    _row(
        "style_share",
        "10",
        w154_style_share_counts_top_level,
        "Counts with list.count over the top level, so a nested [B][G] list counts prompts, not completions.",
    ),
    _row(
        "style_share",
        "10",
        w155_style_share_without_malformed,
        "Leaves malformed completions out of the denominator.",
    ),
    _row(
        "style_share",
        "10",
        w156_style_share_zero_division,
        "Divides by the number of labels without a check, so no labels raise ZeroDivisionError instead of ValueError.",
    ),
    _row("style_share", "10", r45_style_share_recursive_flatten),
]


# ---------------------------------------------------------------------------
# Chapter 11: rloo_advantages
# ---------------------------------------------------------------------------


def w157_rloo_advantages_divides_by_G(rewards):
    others = rewards.sum(dim=-1, keepdim=True) - rewards
    return rewards - others / rewards.shape[-1]


def w158_rloo_advantages_group_of_one_keeps_reward_verl(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return rewards.clone()  # verl: a lone response keeps its score
    return rewards - (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1)


def w159_rloo_advantages_scale_inverted(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return (G - 1) / G * (rewards - rewards.mean(dim=-1, keepdim=True))


def w160_rloo_advantages_others_of_the_batch(rewards):
    B, G = rewards.shape
    if G == 1:
        return torch.zeros_like(rewards)
    others = rewards.sum(dim=0, keepdim=True) - rewards  # everyone else
    return rewards - others / (B - 1) if B > 1 else torch.zeros_like(rewards)


def r46_rloo_advantages_scaled_centred(rewards):
    G = rewards.shape[-1]
    if G < 2:
        return torch.zeros_like(rewards)
    return (rewards - rewards.mean(dim=-1, keepdim=True)) * (G / (G - 1))


def r47_rloo_advantages_explicit_loop(rewards):
    B, G = rewards.shape
    out = torch.zeros_like(rewards)
    if G == 1:
        return out
    for i in range(G):
        keep = [j for j in range(G) if j != i]
        out[:, i] = rewards[:, i] - rewards[:, keep].mean(dim=-1)
    return out


ROWS += [
    _row(
        "rloo_advantages",
        "11",
        w157_rloo_advantages_divides_by_G,
        "Divides the sum of the others by G instead of G - 1.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w158_rloo_advantages_group_of_one_keeps_reward_verl,
        "Gives a group of one its raw reward, as verl does, instead of 0.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w159_rloo_advantages_scale_inverted,
        "Scales the centred rewards by (G - 1) / G instead of G / (G - 1).",
    ),
    _row(
        "rloo_advantages",
        "11",
        w160_rloo_advantages_others_of_the_batch,
        "Leaves one out along the batch axis (the other prompts) instead of within the prompt's group.",
    ),
    _row("rloo_advantages", "11", r46_rloo_advantages_scaled_centred),
    _row("rloo_advantages", "11", r47_rloo_advantages_explicit_loop),
]


# ---------------------------------------------------------------------------
# Chapter 11: gspo_sequence_log_ratio
# ---------------------------------------------------------------------------


def w161_gspo_sequence_log_ratio_sum_not_mean(logp, logp_old, mask):
    valid = mask.bool()
    return torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp)).sum(dim=-1)


def w162_gspo_sequence_log_ratio_divides_by_T(logp, logp_old, mask):
    valid = mask.bool()
    return torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp)).mean(dim=-1)


def w163_gspo_sequence_log_ratio_multiplies_by_mask(logp, logp_old, mask):
    mask = mask.to(logp.dtype)
    return ((logp - logp_old.detach()) * mask).sum(dim=-1) / mask.sum(dim=-1).clamp(min=1)


def w164_gspo_sequence_log_ratio_log_of_mean_ratio(logp, logp_old, mask):
    valid = mask.bool()
    ratio = torch.where(valid, torch.exp(logp - logp_old.detach()), torch.zeros_like(logp))
    mean_ratio = ratio.sum(dim=-1) / valid.sum(dim=-1).clamp(min=1)
    return torch.where(valid.any(dim=-1), torch.log(mean_ratio), torch.zeros_like(mean_ratio))


def w165_gspo_sequence_log_ratio_returns_the_ratio(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    return torch.exp(log_ratio.sum(dim=-1) / valid.sum(dim=-1).clamp(min=1))  # s_i


def r48_gspo_sequence_log_ratio_masked_fill(logp, logp_old, mask):
    padding = ~mask.to(torch.bool)
    differences = (logp - logp_old.detach()).masked_fill(padding, 0.0)
    lengths = (~padding).sum(-1)
    return differences.sum(-1) / torch.where(lengths > 0, lengths, torch.ones_like(lengths))


def r57_gspo_sequence_log_ratio_nanmean(logp, logp_old, mask):
    valid = mask.bool()
    nan = torch.full((), float("nan"), dtype=logp.dtype)
    per_token = torch.where(valid, logp - logp_old.detach(), nan)  # padding: NaN, which nanmean skips
    return torch.nan_to_num(per_token.nanmean(dim=-1), nan=0.0)  # an empty response: 0


ROWS += [
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w161_gspo_sequence_log_ratio_sum_not_mean,
        "Sums the token log-ratios instead of averaging them over the valid tokens (no length normalisation).",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w162_gspo_sequence_log_ratio_divides_by_T,
        "Divides by the padded length T instead of the number of valid tokens.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w163_gspo_sequence_log_ratio_multiplies_by_mask,
        "Multiplies by the mask instead of selecting, so a NaN or infinite log-prob in the padding poisons the result.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w164_gspo_sequence_log_ratio_log_of_mean_ratio,
        "Takes the log of the mean token ratio instead of the mean of the token log-ratios (the geometric mean).",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w165_gspo_sequence_log_ratio_returns_the_ratio,
        "Returns the ratio s_i itself instead of its log.",
    ),
    _row("gspo_sequence_log_ratio", "11", r48_gspo_sequence_log_ratio_masked_fill),
    _row("gspo_sequence_log_ratio", "11", r57_gspo_sequence_log_ratio_nanmean),
]


# ---------------------------------------------------------------------------
# Chapter 11: cispo_loss
# ---------------------------------------------------------------------------


def w166_cispo_loss_weight_not_detached(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high)
    return -weight * adv.detach() * logp


def w167_cispo_loss_trl_cap(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=clip_eps_high).detach()  # TRL: epsilon_high is the cap
    return -weight * adv.detach() * logp


def w168_cispo_loss_symmetric_floor(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = 1.0 - (clip_eps_high if clip_eps is None else clip_eps)  # PPO's symmetric range by default
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def w169_cispo_loss_floor_at_one(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    weight = torch.clamp(ratio, min=1.0 - (clip_eps or 0.0), max=1.0 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def w170_cispo_loss_log_ratio_term(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    log_ratio = logp - logp_old.detach()
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(torch.exp(log_ratio), min=low, max=1.0 + clip_eps_high).detach()
    return -weight * adv.detach() * log_ratio  # the same gradient as with logp


def w171_cispo_loss_mean_reduction(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high).detach()
    return (-weight * adv.detach() * logp).mean()


def r49_cispo_loss_weight_under_no_grad(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    with torch.no_grad():
        weight = torch.exp(logp - logp_old).clamp(max=1.0 + clip_eps_high)
        if clip_eps is not None:
            weight = weight.clamp(min=1.0 - clip_eps)
        scaled_adv = weight * adv
    return -(scaled_adv * logp)


def r58_cispo_loss_tensor_bounds(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    log_ratio = logp.detach() - logp_old.detach()
    weight = torch.minimum(log_ratio.exp(), torch.full_like(log_ratio, 1.0 + clip_eps_high))
    if clip_eps is not None:
        weight = torch.maximum(weight, torch.full_like(weight, 1.0 - clip_eps))
    return -(weight * adv.detach()) * logp


ROWS += [
    _row(
        "cispo_loss",
        "11",
        w166_cispo_loss_weight_not_detached,
        "Does not stop the gradient of the clipped weight, so the loss differentiates through the ratio too.",
    ),
    _row(
        "cispo_loss",
        "11",
        w167_cispo_loss_trl_cap,
        "Caps the weight at clip_eps_high itself (TRL's convention) instead of 1 + clip_eps_high.",
    ),
    _row(
        "cispo_loss",
        "11",
        w168_cispo_loss_symmetric_floor,
        "Floors the weight at 1 - clip_eps_high when clip_eps is None, though None means no lower bound.",
    ),
    _row(
        "cispo_loss",
        "11",
        w169_cispo_loss_floor_at_one,
        "Writes the floor as 1 - (clip_eps or 0), so with clip_eps=None every weight is floored at 1.",
    ),
    _row(
        "cispo_loss",
        "11",
        w170_cispo_loss_log_ratio_term,
        "Multiplies the weight by the log-ratio instead of logp: the same gradient, another loss value.",
    ),
    _row(
        "cispo_loss",
        "11",
        w171_cispo_loss_mean_reduction,
        "Returns the mean over tokens instead of the per-token loss.",
    ),
    _row("cispo_loss", "11", r49_cispo_loss_weight_under_no_grad),
    _row("cispo_loss", "11", r58_cispo_loss_tensor_bounds),
]
