"""A ninth class of students, written blind: from the exercise notebooks' text, stubs and docstrings, the reference
modules in course_lib and the papers, without reading any check, its catalogue of mistakes or an earlier class.

The students this time read a paper and wrote its notation literally, wrote defensive code that silently changes
behaviour, batched wrongly, got a mask subtly wrong, handled only the docstring's common case, mis-used a torch API or
broke the gradient. Each wrong answer makes exactly one mistake, stated in its row; each right answer was compared with
the solution on random inputs of every allowed shape and dtype before the checks were ever run on it.
"""

import math
import re

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def _row(exercise: str, chapter: str, student, truth: str | None = None) -> dict:
    """One student's answer to one exercise; ``truth`` is None for a right answer, else what the student did wrong."""
    return {"exercise": exercise, "chapter": chapter, "student": student, "right": truth is None, "mistake": truth}


ROWS = []


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 00: discounted_return
# ----------------------------------------------------------------------------------------------------------------------


def w01_discounted_return_sutton_barto_offset(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(1, T + 1, dtype=rewards.dtype)
    return (rewards * discounts).sum(dim=-1)


def w02_discounted_return_forward_horner(rewards, gamma):
    G = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1]):
        G = rewards[..., t] + gamma * G
    return G


def w03_discounted_return_log_space_weights(rewards, gamma):
    T = rewards.shape[-1]
    t = torch.arange(T, dtype=rewards.dtype)
    discounts = torch.exp(t * torch.log(torch.tensor(gamma, dtype=rewards.dtype)))
    return (rewards * discounts).sum(dim=-1)


def w04_discounted_return_squeeze_time(rewards, gamma):
    r = rewards.squeeze()
    T = r.shape[-1] if r.dim() > 0 else 1
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    return (r * discounts).sum(dim=-1)


def w05_discounted_return_float_cast(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=torch.float32)
    return (rewards.float() * discounts).sum(dim=-1)


def w06_discounted_return_time_average(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    return (rewards * discounts).mean(dim=-1)


def r01_discounted_return_backward_horner(rewards, gamma):
    G = torch.zeros(rewards.shape[:-1], dtype=rewards.dtype)
    for t in range(rewards.shape[-1] - 1, -1, -1):
        G = rewards[..., t] + gamma * G
    return G


def r02_discounted_return_cumprod_weights(rewards, gamma):
    T = rewards.shape[-1]
    ones = torch.ones(1, dtype=rewards.dtype)
    later = torch.full((T - 1,), float(gamma), dtype=rewards.dtype).cumprod(dim=0)
    weights = torch.cat([ones, later])
    return torch.einsum("...t,t->...", rewards, weights)


ROWS += [
    _row(
        "discounted_return",
        "00",
        w01_discounted_return_sutton_barto_offset,
        "Discounts from gamma^1 (Sutton and Barto's G_t = R_{t+1} + ...), so even the first reward is multiplied "
        "by gamma.",
    ),
    _row(
        "discounted_return",
        "00",
        w02_discounted_return_forward_horner,
        "Runs the recursion G = r_t + gamma * G forwards in time, so the last reward gets weight 1 and the first "
        "gamma^(T-1).",
    ),
    _row(
        "discounted_return",
        "00",
        w03_discounted_return_log_space_weights,
        "Builds gamma^t as exp(t * log(gamma)), which is 0 * -inf = NaN at t = 0 when gamma = 0.",
    ),
    _row(
        "discounted_return",
        "00",
        w04_discounted_return_squeeze_time,
        "Calls squeeze() on the rewards, which also drops a time axis (or batch axis) of length one, so batches of "
        "single-step episodes are summed into one number.",
    ),
    _row(
        "discounted_return",
        "00",
        w05_discounted_return_float_cast,
        "Casts the rewards to float32 with .float(), so float64 episodes come back in float32.",
    ),
    _row(
        "discounted_return",
        "00",
        w06_discounted_return_time_average,
        "Averages the discounted rewards over time instead of summing them (divides the return by T).",
    ),
    _row("discounted_return", "00", r01_discounted_return_backward_horner),
    _row("discounted_return", "00", r02_discounted_return_cumprod_weights),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 00: reward_to_go
# ----------------------------------------------------------------------------------------------------------------------


def w07_reward_to_go_in_place(rewards, gamma):
    for t in reversed(range(rewards.shape[-1] - 1)):
        rewards[..., t] += gamma * rewards[..., t + 1]
    return rewards


def w08_reward_to_go_divide_by_gamma_power(rewards, gamma):
    T = rewards.shape[-1]
    powers = gamma ** torch.arange(T, dtype=rewards.dtype)
    discounted = rewards * powers
    tail_sums = discounted.flip(-1).cumsum(-1).flip(-1)
    return tail_sums / powers


def w09_reward_to_go_running_not_reset(rewards, gamma):
    flat = rewards.reshape(-1, rewards.shape[-1])
    out = torch.empty_like(flat)
    running = torch.zeros((), dtype=rewards.dtype)
    for b in range(flat.shape[0]):
        for t in reversed(range(flat.shape[1])):
            running = flat[b, t] + gamma * running
            out[b, t] = running
    return out.reshape(rewards.shape)


def w10_reward_to_go_transposed_matrix(rewards, gamma):
    T = rewards.shape[-1]
    k = torch.arange(T)[:, None]
    t = torch.arange(T)[None, :]
    exponent = (k - t).clamp(min=0).to(rewards.dtype)
    W = torch.where(k >= t, gamma**exponent, torch.zeros_like(exponent))  # W[k, t] = gamma^(k - t), k >= t
    return rewards @ W.T


def w11_reward_to_go_default_dtype(rewards, gamma):
    returns = torch.zeros(rewards.shape)
    running = torch.zeros(rewards.shape[:-1])
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        returns[..., t] = running
    return returns


def w12_reward_to_go_discounts_current_reward(rewards, gamma):
    returns = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = gamma * (rewards[..., t] + running)
        returns[..., t] = running
    return returns


def r03_reward_to_go_flip_and_stack(rewards, gamma):
    flipped = rewards.flip(-1)
    running = torch.zeros_like(flipped[..., 0])
    columns = []
    for column in flipped.unbind(-1):
        running = column + gamma * running
        columns.append(running)
    return torch.stack(columns, dim=-1).flip(-1)


def r04_reward_to_go_discount_matrix(rewards, gamma):
    T = rewards.shape[-1]
    k = torch.arange(T)[:, None]
    t = torch.arange(T)[None, :]
    exponent = (k - t).clamp(min=0).to(rewards.dtype)
    W = torch.where(k >= t, gamma**exponent, torch.zeros_like(exponent))
    return rewards @ W


ROWS += [
    _row(
        "reward_to_go",
        "00",
        w07_reward_to_go_in_place,
        "Accumulates the returns in place in the caller's rewards tensor and returns it, so the input is overwritten.",
    ),
    _row(
        "reward_to_go",
        "00",
        w08_reward_to_go_divide_by_gamma_power,
        "Takes tail sums of gamma^k r_k and divides by gamma^t, which is 0/0 = NaN past the first step when gamma = 0.",
    ),
    _row(
        "reward_to_go",
        "00",
        w09_reward_to_go_running_not_reset,
        "Loops over the batch without resetting the running return, so each row's last step adds gamma times the "
        "previous row's G_0.",
    ),
    _row(
        "reward_to_go",
        "00",
        w10_reward_to_go_transposed_matrix,
        "Builds the right discount matrix but multiplies by its transpose, so each step sums the rewards before it "
        "instead of after it.",
    ),
    _row(
        "reward_to_go",
        "00",
        w11_reward_to_go_default_dtype,
        "Allocates the output with torch.zeros(shape), the default float32, so float64 rewards come back in float32.",
    ),
    _row(
        "reward_to_go",
        "00",
        w12_reward_to_go_discounts_current_reward,
        "Multiplies the current reward by gamma too (G_t = gamma * (r_t + G_{t+1})).",
    ),
    _row("reward_to_go", "00", r03_reward_to_go_flip_and_stack),
    _row("reward_to_go", "00", r04_reward_to_go_discount_matrix),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 01: sort_inclusion_ordering_reward
# ----------------------------------------------------------------------------------------------------------------------


def w13_sort_reward_counts_response_side(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-2).sum(dim=-1)  # response tokens found in the prompt
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w14_sort_reward_set_intersection(prompt, response):
    p, r = torch.broadcast_tensors(prompt, response)
    T = p.shape[-1]
    p_rows, r_rows = p.reshape(-1, T).tolist(), r.reshape(-1, T).tolist()
    scores = []
    for pr, rr in zip(p_rows, r_rows):
        inclusion = len(set(pr) & set(rr))
        ordering = sum(a <= b for a, b in zip(rr, rr[1:]))
        scores.append(inclusion + ordering)
    return torch.tensor(scores, dtype=torch.float32).reshape(p.shape[:-1])


def w15_sort_reward_strict_order(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-1).sum(dim=-1)
    ordering = (response[..., :-1] < response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w16_sort_reward_integer_result(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-1).sum(dim=-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return inclusion + ordering


def w17_sort_reward_isin_whole_batch(prompt, response):
    inclusion = torch.isin(prompt, response).sum(dim=-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w18_sort_reward_all_or_nothing_order(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-1).sum(dim=-1)
    is_sorted = (response.sort(dim=-1).values == response).all(dim=-1)
    ordering = is_sorted.long() * (response.shape[-1] - 1)
    return (inclusion + ordering).float()


def r05_sort_reward_clamped_counts(prompt, response):
    hits = (prompt.unsqueeze(-1) == response.unsqueeze(-2)).sum(dim=-1).clamp(max=1)
    inclusion = hits.sum(dim=-1)
    ordering = torch.diff(response, dim=-1).ge(0).sum(dim=-1)
    return (inclusion + ordering).to(torch.float32)


def r06_sort_reward_python_rows(prompt, response):
    p, r = torch.broadcast_tensors(prompt, response)
    T = p.shape[-1]
    scores = []
    for pr, rr in zip(p.reshape(-1, T).tolist(), r.reshape(-1, T).tolist()):
        inclusion = sum(1 for token in pr if token in rr)
        ordering = sum(1 for i in range(T - 1) if rr[i] <= rr[i + 1])
        scores.append(float(inclusion + ordering))
    return torch.tensor(scores, dtype=torch.float32).reshape(p.shape[:-1])


ROWS += [
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w13_sort_reward_counts_response_side,
        "Counts the response tokens found in the prompt (any over the prompt axis) instead of the prompt tokens found "
        "in the response, so a repeated right token scores every time.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w14_sort_reward_set_intersection,
        "Counts inclusion as the size of a set intersection, so a token repeated in the prompt earns one point instead "
        "of one per occurrence.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w15_sort_reward_strict_order,
        "Counts an ordering point only for strictly increasing pairs (<), so equal neighbours earn nothing.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w16_sort_reward_integer_result,
        "Returns the integer count (int64) instead of a float32 tensor.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w17_sort_reward_isin_whole_batch,
        "Uses torch.isin(prompt, response), which looks for each prompt token in every response of the batch, not "
        "only in its own row.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w18_sort_reward_all_or_nothing_order,
        "Gives all T - 1 ordering points only when the whole response is sorted and none otherwise, instead of one "
        "per ordered adjacent pair.",
    ),
    _row("sort_inclusion_ordering_reward", "01", r05_sort_reward_clamped_counts),
    _row("sort_inclusion_ordering_reward", "01", r06_sort_reward_python_rows),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 01: math_answer_reward. The wrong students share one reader, each with a single habit switched on.
# ----------------------------------------------------------------------------------------------------------------------

_PLAIN_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"


def _boxed_contents(text, first=False):
    """The content of the last (or first) balanced \\boxed{...}, else None."""
    starts = [m.start() for m in re.finditer(r"\\boxed\{", text)]
    if first:
        starts = starts[::-1]
    while starts:
        start = starts.pop()
        depth = 0
        begin = start + len("\\boxed{")
        for i in range(begin, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                if depth == 0:
                    return text[begin:i]
                depth -= 1
    return None


def _tidy(text, drop_commas=True):
    text = text.replace("\\$", "").replace("$", "").strip()
    while text and text[-1] in ".,;:!?)":
        if text[-1] == ")" and text.count(")") <= text.count("("):
            break
        text = text[:-1].rstrip()
    if drop_commas:
        text = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)
    return text


def _math_reader(
    response_text,
    ground_truth,
    *,
    first_box=False,
    lazy_box=False,
    first_statement=False,
    case_sensitive=False,
    cut_every_period=False,
    last_number_fallback=False,
    strings_only=False,
    numbers_only=False,
    drop_commas=True,
):
    if lazy_box:
        boxes = re.findall(r"\\boxed\{(.*?)\}", response_text)
        answer = boxes[-1] if boxes else None
    else:
        answer = _boxed_contents(response_text, first=first_box)
    if answer is None:
        flags = 0 if case_sensitive else re.IGNORECASE
        statements = list(re.finditer(r"\banswer(?:\s+is\b\s*:?|\s*:)", response_text, flags))
        if statements:
            chosen = statements[0] if first_statement else statements[-1]
            rest = response_text[chosen.end() :].lstrip()
            rest = re.split(r"[\n<]", rest)[0]
            if cut_every_period:
                answer = re.split(r"[.!?]", rest)[0]
            else:
                answer = re.split(r"[.!?](?:\s|$)", rest)[0]
    if answer is None and last_number_fallback:
        numbers = re.findall(_PLAIN_NUMBER, response_text)
        answer = numbers[-1] if numbers else None
    if answer is None:
        return 0.0
    answer = _tidy(answer, drop_commas)
    truth = _tidy(ground_truth, drop_commas)
    if not answer:
        return 0.0
    if numbers_only:
        try:
            return float(float(answer) == float(truth))
        except ValueError:
            return 0.0
    both_numbers = re.fullmatch(_PLAIN_NUMBER, answer) and re.fullmatch(_PLAIN_NUMBER, truth)
    if both_numbers and not strings_only:
        return float(float(answer) == float(truth))
    return float(answer == truth)


def w19_math_answer_reward_last_number_fallback(response_text, ground_truth):
    return _math_reader(response_text, ground_truth, last_number_fallback=True)


def w20_math_answer_reward_first_box(response_text, ground_truth):
    return _math_reader(response_text, ground_truth, first_box=True)


def w21_math_answer_reward_lazy_box_regex(response_text, ground_truth):
    return _math_reader(response_text, ground_truth, lazy_box=True)


def w22_math_answer_reward_strings_only(response_text, ground_truth):
    return _math_reader(response_text, ground_truth, strings_only=True)


def w23_math_answer_reward_keeps_thousands_commas(response_text, ground_truth):
    return _math_reader(response_text, ground_truth, drop_commas=False)


def w24_math_answer_reward_first_statement(response_text, ground_truth):
    return _math_reader(response_text, ground_truth, first_statement=True)


def w25_math_answer_reward_case_sensitive(response_text, ground_truth):
    return _math_reader(response_text, ground_truth, case_sensitive=True)


def w26_math_answer_reward_cuts_decimals(response_text, ground_truth):
    return _math_reader(response_text, ground_truth, cut_every_period=True)


def w27_math_answer_reward_numbers_only(response_text, ground_truth):
    return _math_reader(response_text, ground_truth, numbers_only=True)


def r07_math_answer_reward_scanner(response_text, ground_truth):
    """A hand-written scanner: boxes first, then statements, then normalise and compare."""

    def clean(s):
        s = s.replace("\\$", "").replace("$", "").strip()
        changed = True
        while changed and s:
            changed = False
            if s[-1] in ".,;:!?":
                s = s[:-1].rstrip()
                changed = True
            elif s[-1] == ")" and s.count(")") > s.count("("):
                s = s[:-1].rstrip()
                changed = True
        return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", s)

    found = None
    search_end = len(response_text)
    while found is None:
        start = response_text.rfind("\\boxed{", 0, search_end)
        if start < 0:
            break
        depth = 1
        i = start + 7
        while i < len(response_text) and depth:
            depth += response_text[i] == "{"
            depth -= response_text[i] == "}"
            i += 1
        if depth == 0:
            found = response_text[start + 7 : i - 1]
        search_end = start
    if found is None:
        last = None
        for m in re.finditer(r"\banswer(\s+is\b\s*:?|\s*:)", response_text, flags=re.I):
            last = m
        if last is None:
            return 0.0
        tail = response_text[last.end() :].lstrip()
        for stop in ("\n", "<"):
            tail = tail.split(stop)[0]
        sentence_end = re.search(r"[.!?](\s|$)", tail)
        found = tail[: sentence_end.start()] if sentence_end else tail
    got = clean(found)
    want = clean(ground_truth)
    if got == "":
        return 0.0
    number = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
    if number.fullmatch(got) and number.fullmatch(want):
        return 1.0 if float(got) == float(want) else 0.0
    return 1.0 if got == want else 0.0


def r08_math_answer_reward_decimal_compare(response_text, ground_truth):
    """Compares plain numbers as exact decimals instead of floats."""
    from decimal import Decimal

    answer = _boxed_contents(response_text)
    if answer is None:
        statements = list(re.finditer(r"\banswer(?:\s+is\b\s*:?|\s*:)", response_text, re.IGNORECASE))
        if not statements:
            return 0.0
        rest = re.split(r"[\n<]", response_text[statements[-1].end() :].lstrip())[0]
        answer = re.split(r"[.!?](?:\s|$)", rest)[0]
    answer, truth = _tidy(answer), _tidy(ground_truth)
    if not answer:
        return 0.0
    if re.fullmatch(_PLAIN_NUMBER, answer) and re.fullmatch(_PLAIN_NUMBER, truth):
        to_decimal = lambda s: Decimal(s + "0" if s.endswith(".") else s)  # noqa: E731
        return 1.0 if float(to_decimal(answer)) == float(to_decimal(truth)) else 0.0
    return 1.0 if answer == truth else 0.0


ROWS += [
    _row(
        "math_answer_reward",
        "01",
        w19_math_answer_reward_last_number_fallback,
        "Falls back to the last number in the text when the response states no answer.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w20_math_answer_reward_first_box,
        "Takes the first balanced \\boxed{...} instead of the last.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w21_math_answer_reward_lazy_box_regex,
        "Extracts boxes with the lazy regex \\\\boxed\\{(.*?)\\}, which stops at the first closing brace of a nested "
        "answer such as \\frac{1}{2}.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w22_math_answer_reward_strings_only,
        "Compares the normalised answers only as strings, so 14.0 does not match 14.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w23_math_answer_reward_keeps_thousands_commas,
        "Does not remove thousands separators, so 1,000 does not match 1000.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w24_math_answer_reward_first_statement,
        "Reads the answer after the first 'the answer is' / 'Answer:' instead of the last.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w25_math_answer_reward_case_sensitive,
        "Matches the statement case-sensitively (lower-case 'answer' only), so 'Answer:' or 'ANSWER IS' is not found.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w26_math_answer_reward_cuts_decimals,
        "Ends the stated answer at any '.', '!' or '?', even one followed by a digit, so 3.5 is read as 3.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w27_math_answer_reward_numbers_only,
        "Compares only through float() and returns 0.0 when either side is not a number, so non-numeric answers never "
        "match.",
    ),
    _row("math_answer_reward", "01", r07_math_answer_reward_scanner),
    _row("math_answer_reward", "01", r08_math_answer_reward_decimal_compare),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 02: gather_log_probs
# ----------------------------------------------------------------------------------------------------------------------


def w28_gather_log_probs_lse_without_max(logits, tokens):
    log_normaliser = torch.log(torch.exp(logits).sum(dim=-1, keepdim=True))
    return (logits - log_normaliser).gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


def w29_gather_log_probs_softmax_over_time(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=-2)
    return logp_all.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


def w30_gather_log_probs_bare_squeeze(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=-1)
    return logp_all.gather(-1, tokens.long().unsqueeze(-1)).squeeze()


def w31_gather_log_probs_shifts_anyway(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=-1)
    picked = logp_all[..., :-1, :].gather(-1, tokens[..., 1:].long().unsqueeze(-1)).squeeze(-1)
    first = torch.zeros_like(picked[..., :1])
    return torch.cat([first, picked], dim=-1)


def w32_gather_log_probs_detached_logits(logits, tokens):
    logp_all = torch.log_softmax(logits.detach(), dim=-1)  # "no need to keep the graph of every logit"
    return logp_all.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


def w33_gather_log_probs_float_cast(logits, tokens):
    logp_all = F.log_softmax(logits.float(), dim=-1)
    return logp_all.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


def r09_gather_log_probs_picked_minus_logsumexp(logits, tokens):
    picked = torch.take_along_dim(logits, tokens.long()[..., None], dim=-1)[..., 0]
    return picked - torch.logsumexp(logits, dim=-1)


def r10_gather_log_probs_one_hot(logits, tokens):
    logp_all = F.log_softmax(logits, dim=-1)
    one_hot = F.one_hot(tokens.long(), num_classes=logits.shape[-1]).to(logits.dtype)
    return (logp_all * one_hot).sum(dim=-1)


ROWS += [
    _row(
        "gather_log_probs",
        "02",
        w28_gather_log_probs_lse_without_max,
        "Computes log-sum-exp as log(exp(logits).sum()) without subtracting the max, which overflows to inf for large "
        "logits.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w29_gather_log_probs_softmax_over_time,
        "Normalises with log_softmax over the time axis (dim=-2) instead of the vocabulary.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w30_gather_log_probs_bare_squeeze,
        "Ends with a bare squeeze(), which also drops a time or batch axis of length one.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w31_gather_log_probs_shifts_anyway,
        "Shifts by one position (logits t score token t + 1) and pads the first position with 0, although the caller "
        "already aligned them.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w32_gather_log_probs_detached_logits,
        "Detaches the logits before log_softmax, so no gradient reaches them.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w33_gather_log_probs_float_cast,
        "Casts the logits to float32 with .float(), so float64 logits give float32 log-probs.",
    ),
    _row("gather_log_probs", "02", r09_gather_log_probs_picked_minus_logsumexp),
    _row("gather_log_probs", "02", r10_gather_log_probs_one_hot),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 02: reinforce_loss
# ----------------------------------------------------------------------------------------------------------------------


def w34_reinforce_loss_per_response_mean(logp, deltas, mask=None):
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    per_token = torch.where(valid, -(deltas.detach().unsqueeze(-1) * logp), torch.zeros_like(logp))
    per_response = per_token.sum(dim=-1) / valid.sum(dim=-1).clamp(min=1)  # GRPO's 1/|o_i|
    return per_response.mean()


def w35_reinforce_loss_weights_keep_gradient(logp, deltas, mask=None):
    per_token = -(deltas.unsqueeze(-1) * logp)
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    total = torch.where(valid, per_token, torch.zeros_like(per_token)).sum()
    return total / valid.sum().clamp(min=1)


def w36_reinforce_loss_no_unsqueeze(logp, deltas, mask=None):
    per_token = -(deltas.detach() * logp)  # broadcasts against the last axis
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    total = torch.where(valid, per_token, torch.zeros_like(per_token)).sum()
    return total / valid.sum().clamp(min=1)


def w37_reinforce_loss_divides_by_numel(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is not None:
        per_token = torch.where(mask.bool(), per_token, torch.zeros_like(per_token))
    return per_token.sum() / per_token.numel()


def w38_reinforce_loss_empty_batch_nan(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    return torch.where(valid, per_token, torch.zeros_like(per_token)).sum() / valid.sum()


def w39_reinforce_loss_ascent_sign(logp, deltas, mask=None):
    per_token = deltas.detach().unsqueeze(-1) * logp
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    total = torch.where(valid, per_token, torch.zeros_like(per_token)).sum()
    return total / valid.sum().clamp(min=1)


def w40_reinforce_loss_index_with_raw_mask(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    chosen = per_token[mask]
    return chosen.sum() / max(chosen.numel(), 1)


def r11_reinforce_loss_boolean_select(logp, deltas, mask=None):
    per_token = -(deltas.detach()[..., None] * logp)
    if mask is None:
        chosen = per_token.reshape(-1)
    else:
        chosen = per_token[mask.bool()]
    return chosen.sum() / max(chosen.numel(), 1)


def r12_reinforce_loss_weight_matrix(logp, deltas, mask=None):
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask != 0
    weights = valid.to(logp.dtype) / valid.sum().clamp(min=1)
    safe_logp = torch.where(valid, logp, torch.zeros_like(logp))
    return -(safe_logp * deltas.detach().unsqueeze(-1) * weights).sum()


ROWS += [
    _row(
        "reinforce_loss",
        "02",
        w34_reinforce_loss_per_response_mean,
        "Averages each response over its own tokens, then over responses (GRPO's per-sequence mean), instead of one "
        "mean over all valid tokens of the batch.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w35_reinforce_loss_weights_keep_gradient,
        "Does not detach deltas, so a gradient flows into the weights.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w36_reinforce_loss_no_unsqueeze,
        "Multiplies deltas [...] by logp [..., T] without adding a token axis, so the weights broadcast along time "
        "(wrong when B == T, an error otherwise).",
    ),
    _row(
        "reinforce_loss",
        "02",
        w37_reinforce_loss_divides_by_numel,
        "Divides the masked sum by every entry, padding included (numel), instead of by the number of valid tokens.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w38_reinforce_loss_empty_batch_nan,
        "Divides by the raw count of valid tokens, so a batch that is all padding gives 0/0 = NaN.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w39_reinforce_loss_ascent_sign,
        "Returns the objective deltas * logp (to climb) instead of the loss -deltas * logp.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w40_reinforce_loss_index_with_raw_mask,
        "Indexes with the mask as given (per_token[mask]), which for a 0/1 integer or float mask is integer indexing, "
        "not selection.",
    ),
    _row("reinforce_loss", "02", r11_reinforce_loss_boolean_select),
    _row("reinforce_loss", "02", r12_reinforce_loss_weight_matrix),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 02: mc_policy_gradient
# ----------------------------------------------------------------------------------------------------------------------


def _draw(logits, n_samples, generator):
    return torch.multinomial(torch.softmax(logits, dim=-1), n_samples, replacement=True, generator=generator)


def w41_mc_policy_gradient_loss_gradient(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = _draw(logits, n_samples, generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return -(reward_per_action[actions, None] * score).mean(dim=0)


def w42_mc_policy_gradient_empirical_pi(logits, reward_per_action, n_samples, generator=None):
    actions = _draw(logits, n_samples, generator)
    one_hot = F.one_hot(actions, logits.shape[0]).to(logits.dtype)
    frequencies = one_hot.mean(dim=0)  # the sampled policy, as seen in the samples
    return (reward_per_action[actions, None] * (one_hot - frequencies)).mean(dim=0)


def w43_mc_policy_gradient_ignores_generator(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).mean(dim=0)


def w44_mc_policy_gradient_sum_over_samples(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = _draw(logits, n_samples, generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).sum(dim=0)


def w45_mc_policy_gradient_subtracts_logits(logits, reward_per_action, n_samples, generator=None):
    actions = _draw(logits, n_samples, generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - logits
    return (reward_per_action[actions, None] * score).mean(dim=0)


def w46_mc_policy_gradient_bessel(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = _draw(logits, n_samples, generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).sum(dim=0) / max(n_samples - 1, 1)


def r13_mc_policy_gradient_autograd(logits, reward_per_action, n_samples, generator=None):
    actions = _draw(logits, n_samples, generator)
    x = logits.detach().clone().requires_grad_(True)
    objective = (reward_per_action.detach()[actions] * torch.log_softmax(x, dim=-1)[actions]).mean()
    (gradient,) = torch.autograd.grad(objective, x)
    return gradient


def r14_mc_policy_gradient_bincount(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = _draw(logits, n_samples, generator)
    counts = torch.bincount(actions, minlength=logits.shape[0]).to(logits.dtype)
    mean_reward = reward_per_action[actions].mean()
    return counts * reward_per_action / n_samples - pi * mean_reward


ROWS += [
    _row(
        "mc_policy_gradient",
        "02",
        w41_mc_policy_gradient_loss_gradient,
        "Returns the gradient of the loss (minus the estimate) instead of the gradient of the expected reward.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w42_mc_policy_gradient_empirical_pi,
        "Subtracts the empirical action frequencies of the samples instead of the policy's probabilities pi.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w43_mc_policy_gradient_ignores_generator,
        "Samples with the global RNG, ignoring the generator argument.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w44_mc_policy_gradient_sum_over_samples,
        "Sums the per-sample gradients (the paper's sum over i) instead of averaging them.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w45_mc_policy_gradient_subtracts_logits,
        "Uses onehot(a) - logits as the score instead of onehot(a) - softmax(logits).",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w46_mc_policy_gradient_bessel,
        "Divides the sum over samples by n - 1 instead of n, as if it were a variance.",
    ),
    _row("mc_policy_gradient", "02", r13_mc_policy_gradient_autograd),
    _row("mc_policy_gradient", "02", r14_mc_policy_gradient_bincount),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 03: compute_deltas
# ----------------------------------------------------------------------------------------------------------------------


def _check_mode(mode):
    if mode not in ("rewards", "centered_rewards", "normalized_rewards"):
        raise ValueError(f"mode: expected 'rewards', 'centered_rewards' or 'normalized_rewards', got {mode!r}")


def w47_compute_deltas_numpy_std(rewards, mode, eps=1e-6):
    _check_mode(mode)
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards":
        return centred
    std = torch.from_numpy(np.std(rewards.detach().cpu().numpy(), axis=-1, keepdims=True)).to(rewards.dtype)
    return centred / (std + eps)


def w48_compute_deltas_eps_in_variance(rewards, mode, eps=1e-6):
    _check_mode(mode)
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / torch.sqrt(rewards.var(dim=-1, keepdim=True) + eps)


def w49_compute_deltas_mean_without_keepdim(rewards, mode, eps=1e-6):
    _check_mode(mode)
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1)  # (B,) broadcasts along the group axis
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def w50_compute_deltas_small_std_is_equal(rewards, mode, eps=1e-6):
    _check_mode(mode)
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    std = rewards.std(dim=-1, keepdim=True)
    flat = std < eps  # "no spread to speak of"
    centred = torch.where(flat, torch.zeros_like(centred), centred)
    if mode == "centered_rewards":
        return centred
    return centred / (std + eps)


def w51_compute_deltas_nan_to_num_no_eps(rewards, mode, eps=1e-6):
    _check_mode(mode)
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards":
        return centred
    return torch.nan_to_num(centred / rewards.std(dim=-1, keepdim=True), nan=0.0)


def w52_compute_deltas_in_place_centring(rewards, mode, eps=1e-6):
    _check_mode(mode)
    if mode == "rewards":
        return rewards.clone()
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True) if rewards.shape[-1] > 1 else None
    rewards -= rewards.mean(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(rewards), rewards)
    if mode == "centered_rewards" or std is None:
        return centred
    return centred / (std + eps)


def r15_compute_deltas_explicit_sums(rewards, mode, eps=1e-6):
    _check_mode(mode)
    if mode == "rewards":
        return rewards.clone()
    G = rewards.shape[-1]
    mean = rewards.sum(dim=-1, keepdim=True) / G
    centred = rewards - mean
    flat = rewards.amax(dim=-1, keepdim=True) == rewards.amin(dim=-1, keepdim=True)
    centred = centred.masked_fill(flat, 0.0)
    if mode == "centered_rewards" or G == 1:
        return centred
    variance = ((rewards - mean) ** 2).sum(dim=-1, keepdim=True) / (G - 1)
    return centred / (variance.sqrt() + eps)


def r16_compute_deltas_row_loop(rewards, mode, eps=1e-6):
    _check_mode(mode)
    if mode == "rewards":
        return rewards.clone()
    rows = []
    for row in rewards:
        if bool((row == row[0]).all()):
            rows.append(torch.zeros_like(row))
            continue
        centred = row - row.mean()
        rows.append(centred if mode == "centered_rewards" else centred / (row.std() + eps))
    return torch.stack(rows)


ROWS += [
    _row(
        "compute_deltas",
        "03",
        w47_compute_deltas_numpy_std,
        "Takes the std with numpy's np.std, which divides by G (no Bessel correction).",
    ),
    _row(
        "compute_deltas",
        "03",
        w48_compute_deltas_eps_in_variance,
        "Adds eps to the variance under the square root instead of to the std.",
    ),
    _row(
        "compute_deltas",
        "03",
        w49_compute_deltas_mean_without_keepdim,
        "Subtracts rewards.mean(dim=-1) without keepdim, so the [B] means broadcast along the group axis (wrong when "
        "B == G, an error otherwise).",
    ),
    _row(
        "compute_deltas",
        "03",
        w50_compute_deltas_small_std_is_equal,
        "Treats a group whose std is below eps as all-equal and zeroes it, although its rewards differ.",
    ),
    _row(
        "compute_deltas",
        "03",
        w51_compute_deltas_nan_to_num_no_eps,
        "Divides by the bare std (no eps) and patches the resulting NaNs with nan_to_num.",
    ),
    _row(
        "compute_deltas",
        "03",
        w52_compute_deltas_in_place_centring,
        "Centres with rewards -= mean, modifying the caller's rewards in place.",
    ),
    _row("compute_deltas", "03", r15_compute_deltas_explicit_sums),
    _row("compute_deltas", "03", r16_compute_deltas_row_loop),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 03: gradient_variance
# ----------------------------------------------------------------------------------------------------------------------


def w53_gradient_variance_over_columns(grad_samples):
    return float(grad_samples.var(dim=1).sum())


def w54_gradient_variance_mean_over_coordinates(grad_samples):
    return float(grad_samples.var(dim=0).mean())


def w55_gradient_variance_returns_tensor(grad_samples):
    return grad_samples.var(dim=0).sum()


def w56_gradient_variance_of_the_mean(grad_samples):
    return float(grad_samples.var(dim=0).sum() / grad_samples.shape[0])


def w57_gradient_variance_flattened(grad_samples):
    return float(torch.var(grad_samples) * grad_samples.shape[1])


def w58_gradient_variance_shortcut_formula(grad_samples):
    N = grad_samples.shape[0]
    mean_of_squares = (grad_samples**2).mean(dim=0)
    square_of_mean = grad_samples.mean(dim=0) ** 2
    return float(((mean_of_squares - square_of_mean) * N / (N - 1)).sum())


def r17_gradient_variance_covariance_trace(grad_samples):
    covariance = torch.atleast_2d(torch.cov(grad_samples.T))
    return float(covariance.trace())


def r18_gradient_variance_numpy(grad_samples):
    samples = grad_samples.detach().cpu().numpy()
    return float(np.var(samples, axis=0, ddof=1).sum())


ROWS += [
    _row(
        "gradient_variance",
        "03",
        w53_gradient_variance_over_columns,
        "Takes each sample's variance across its coordinates (dim=1) instead of each coordinate's across samples.",
    ),
    _row(
        "gradient_variance",
        "03",
        w54_gradient_variance_mean_over_coordinates,
        "Averages the P per-coordinate variances instead of summing them.",
    ),
    _row(
        "gradient_variance",
        "03",
        w55_gradient_variance_returns_tensor,
        "Returns a 0-dim tensor instead of a Python float.",
    ),
    _row(
        "gradient_variance",
        "03",
        w56_gradient_variance_of_the_mean,
        "Divides by N again, returning the variance of the mean of the estimates rather than of one estimate.",
    ),
    _row(
        "gradient_variance",
        "03",
        w57_gradient_variance_flattened,
        "Takes one variance over all N * P entries around the global mean (times P) instead of per coordinate.",
    ),
    _row(
        "gradient_variance",
        "03",
        w58_gradient_variance_shortcut_formula,
        "Uses the shortcut E[g^2] - E[g]^2, which cancels catastrophically when the mean is large (in float32 "
        "especially).",
    ),
    _row("gradient_variance", "03", r17_gradient_variance_covariance_trace),
    _row("gradient_variance", "03", r18_gradient_variance_numpy),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 04: gae_table (hand-computed; gamma = 0.9, lambda = 0.8, step 2 terminal, V(s_5) = 1)
# ----------------------------------------------------------------------------------------------------------------------


def w59_gae_table_recursion_not_cut():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.607, 0.357, 1.330, 0.458, 1.4]
    return deltas, advantages


def w60_gae_table_bootstrap_not_cut():
    deltas = [0.35, -0.6, 1.9, -0.55, 1.4]
    advantages = [0.903, 0.768, 1.9, 0.458, 1.4]
    return deltas, advantages


def w61_gae_table_forgot_lambda():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.62, 0.3, 1.0, 0.71, 1.4]
    return deltas, advantages


def w62_gae_table_no_last_value():
    deltas = [0.35, -0.6, 1.0, -0.55, 0.5]
    advantages = [0.436, 0.12, 1.0, -0.19, 0.5]
    return deltas, advantages


def w63_gae_table_bottom_up_order():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [1.4, 0.458, 1.0, 0.12, 0.436]
    return deltas, advantages


def w64_gae_table_one_decimal():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.4, 0.1, 1.0, 0.5, 1.4]
    return deltas, advantages


def r19_gae_table_fractions():
    gamma, lam = 0.9, 0.8
    deltas = [1 + gamma * 1.5 - 2.0, 0 + gamma * 1.0 - 1.5, 2 - 1.0, 0 + gamma * 0.5 - 1.0, 1 + gamma * 1.0 - 0.5]
    a4 = deltas[4]
    a3 = deltas[3] + gamma * lam * a4
    a2 = deltas[2]
    a1 = deltas[1] + gamma * lam * a2
    a0 = deltas[0] + gamma * lam * a1
    return deltas, [a0, a1, a2, a3, a4]


def r20_gae_table_four_decimals():
    return [0.35, -0.6, 1.0, -0.55, 1.4], [0.4364, 0.12, 1.0, 0.458, 1.4]


ROWS += [
    _row(
        "gae_table",
        "04",
        w59_gae_table_recursion_not_cut,
        "Cuts the bootstrap in delta_2 but not the recursion at A_2, so A_2 and the steps before it include A_3.",
    ),
    _row(
        "gae_table",
        "04",
        w60_gae_table_bootstrap_not_cut,
        "Cuts the recursion at A_2 but bootstraps delta_2 from V(s_3), the next episode's first value.",
    ),
    _row(
        "gae_table",
        "04",
        w61_gae_table_forgot_lambda,
        "Runs the advantage recursion with gamma alone (lambda = 1) instead of gamma * lambda.",
    ),
    _row(
        "gae_table",
        "04",
        w62_gae_table_no_last_value,
        "Treats V(s_5) as 0 at the last step instead of bootstrapping from last_values = 1.",
    ),
    _row(
        "gae_table",
        "04",
        w63_gae_table_bottom_up_order,
        "Lists the advantages in the order computed (A_4 first) instead of for t = 0, ..., 4.",
    ),
    _row(
        "gae_table",
        "04",
        w64_gae_table_one_decimal,
        "Rounds the advantages to one decimal, off by more than the 0.001 allowed.",
    ),
    _row("gae_table", "04", r19_gae_table_fractions),
    _row("gae_table", "04", r20_gae_table_four_decimals),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 04: compute_gae
# ----------------------------------------------------------------------------------------------------------------------


def _next_values(values, last_values):
    return torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)


def w65_compute_gae_recursion_not_cut(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    deltas = rewards + gamma * (1.0 - d) * _next_values(values, last_values) - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * running
        advantages[..., t] = running
    return advantages, advantages + values


def w66_compute_gae_next_step_done(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    d_next = torch.cat([d[..., 1:], torch.zeros_like(d[..., :1])], dim=-1)  # the done flag of s_{t+1}
    deltas = rewards + gamma * (1.0 - d_next) * _next_values(values, last_values) - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d_next[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + values


def w67_compute_gae_last_step_always_bootstraps(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    T = rewards.shape[-1]
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(T)):
        if t == T - 1:
            delta = rewards[..., t] + gamma * last_values - values[..., t]
        else:
            delta = rewards[..., t] + gamma * (1.0 - d[..., t]) * values[..., t + 1] - values[..., t]
        running = delta + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + values


def w68_compute_gae_bool_arithmetic(rewards, values, dones, last_values, gamma, lam):
    not_done = 1 - dones
    deltas = rewards + gamma * not_done * _next_values(values, last_values) - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * not_done[..., t] * running
        advantages[..., t] = running
    return advantages, advantages + values


def w69_compute_gae_lambda_only(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    deltas = rewards + gamma * (1.0 - d) * _next_values(values, last_values) - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + values


def w70_compute_gae_loops_first_axis(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    deltas = rewards + gamma * (1.0 - d) * _next_values(values, last_values) - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(len(rewards))):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + values


def w71_compute_gae_deltas_into_rewards(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    rewards += gamma * (1.0 - d) * _next_values(values, last_values) - values  # reuse the buffer
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + values


def w72_compute_gae_float32_buffer(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    deltas = rewards + gamma * (1.0 - d) * _next_values(values, last_values) - values
    advantages = torch.zeros(rewards.shape)
    running = torch.zeros(rewards.shape[:-1], dtype=rewards.dtype)
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + values


def r21_compute_gae_unbind_stack(rewards, values, dones, last_values, gamma, lam):
    keep = torch.logical_not(dones.bool()).to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values[..., None]], dim=-1)
    deltas = rewards + gamma * keep * next_values - values
    running = torch.zeros_like(last_values, dtype=rewards.dtype)
    columns = []
    for delta_t, keep_t in zip(reversed(deltas.unbind(-1)), reversed(keep.unbind(-1))):
        running = delta_t + gamma * lam * keep_t * running
        columns.append(running)
    advantages = torch.stack(columns[::-1], dim=-1)
    return advantages, advantages + values


def r22_compute_gae_flattened_rows(rewards, values, dones, last_values, gamma, lam):
    T = rewards.shape[-1]
    r = rewards.reshape(-1, T)
    v = values.reshape(-1, T)
    d = dones.reshape(-1, T).to(rewards.dtype)
    last = last_values.reshape(-1)
    advantages = torch.zeros_like(r)
    for b in range(r.shape[0]):
        following_advantage = torch.zeros((), dtype=rewards.dtype)
        following_value = last[b]
        for t in range(T - 1, -1, -1):
            alive = 1.0 - d[b, t]
            delta = r[b, t] + gamma * alive * following_value - v[b, t]
            following_advantage = delta + gamma * lam * alive * following_advantage
            advantages[b, t] = following_advantage
            following_value = v[b, t]
    advantages = advantages.reshape(rewards.shape)
    return advantages, advantages + values


ROWS += [
    _row(
        "compute_gae",
        "04",
        w65_compute_gae_recursion_not_cut,
        "Masks the bootstrap in delta at a terminal step but not the advantage recursion, so A_t carries the next "
        "episode's advantages across the boundary.",
    ),
    _row(
        "compute_gae",
        "04",
        w66_compute_gae_next_step_done,
        "Reads the done flag one step late (done_{t+1} instead of done_t), as if dones marked the first step of a new "
        "episode.",
    ),
    _row(
        "compute_gae",
        "04",
        w67_compute_gae_last_step_always_bootstraps,
        "Always bootstraps the last step from last_values, even when dones[..., -1] says the episode ended there.",
    ),
    _row(
        "compute_gae",
        "04",
        w68_compute_gae_bool_arithmetic,
        "Computes 1 - dones directly, which torch refuses for bool dones (and keeps integer dones integer).",
    ),
    _row(
        "compute_gae",
        "04",
        w69_compute_gae_lambda_only,
        "Decays the advantage recursion by lambda alone instead of gamma * lambda.",
    ),
    _row(
        "compute_gae",
        "04",
        w70_compute_gae_loops_first_axis,
        "Loops over len(rewards), the first axis, instead of the time axis, so batched inputs get the wrong number of "
        "steps.",
    ),
    _row(
        "compute_gae",
        "04",
        w71_compute_gae_deltas_into_rewards,
        "Stores the TD residuals in the caller's rewards tensor (rewards += ...), modifying the input.",
    ),
    _row(
        "compute_gae",
        "04",
        w72_compute_gae_float32_buffer,
        "Allocates the advantages with torch.zeros(shape), float32, so float64 inputs give float32 advantages.",
    ),
    _row("compute_gae", "04", r21_compute_gae_unbind_stack),
    _row("compute_gae", "04", r22_compute_gae_flattened_rows),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 04: td_residuals
# ----------------------------------------------------------------------------------------------------------------------


def w73_td_residuals_zero_after_last(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], torch.zeros_like(values[..., :1])], dim=-1)
    return rewards + gamma * (1.0 - dones.to(rewards.dtype)) * next_values - values


def w74_td_residuals_done_masks_current_value(rewards, values, dones, last_values, gamma):
    alive = 1.0 - dones.to(rewards.dtype)
    return rewards + gamma * _next_values(values, last_values) - alive * values


def w75_td_residuals_sign_flipped(rewards, values, dones, last_values, gamma):
    alive = 1.0 - dones.to(rewards.dtype)
    return values - (rewards + gamma * alive * _next_values(values, last_values))


def w76_td_residuals_unsqueeze_front(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(0)], dim=-1)
    return rewards + gamma * (1.0 - dones.to(rewards.dtype)) * next_values - values


def w77_td_residuals_discounted_reward(rewards, values, dones, last_values, gamma):
    alive = 1.0 - dones.to(rewards.dtype)
    return gamma * (rewards + alive * _next_values(values, last_values)) - values


def r23_td_residuals_logical_not(rewards, values, dones, last_values, gamma):
    alive = torch.logical_not(dones.bool())
    bootstrap = torch.where(alive, _next_values(values, last_values), torch.zeros_like(values))
    return rewards + gamma * bootstrap - values


def r24_td_residuals_step_loop(rewards, values, dones, last_values, gamma):
    T = rewards.shape[-1]
    d = dones.to(rewards.dtype)
    out = torch.empty_like(rewards)
    for t in range(T):
        following = values[..., t + 1] if t + 1 < T else last_values
        out[..., t] = rewards[..., t] + gamma * (1 - d[..., t]) * following - values[..., t]
    return out


ROWS += [
    _row(
        "td_residuals",
        "04",
        w73_td_residuals_zero_after_last,
        "Pads V(s_{t+1}) with 0 after the last step instead of last_values.",
    ),
    _row(
        "td_residuals",
        "04",
        w74_td_residuals_done_masks_current_value,
        "Applies (1 - done_t) to V(s_t) instead of to V(s_{t+1}).",
    ),
    _row(
        "td_residuals",
        "04",
        w75_td_residuals_sign_flipped,
        "Returns V(s_t) - (r_t + gamma V(s_{t+1})), the residual with its sign flipped.",
    ),
    _row(
        "td_residuals",
        "04",
        w76_td_residuals_unsqueeze_front,
        "Lines up last_values with unsqueeze(0) instead of unsqueeze(-1), which only works for a single rollout.",
    ),
    _row(
        "td_residuals",
        "04",
        w77_td_residuals_discounted_reward,
        "Discounts the reward too: gamma * (r_t + V(s_{t+1})) instead of r_t + gamma V(s_{t+1}).",
    ),
    _row("td_residuals", "04", r23_td_residuals_logical_not),
    _row("td_residuals", "04", r24_td_residuals_step_loop),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 05: clipped_surrogate_loss
# ----------------------------------------------------------------------------------------------------------------------


def _surrogate(
    logp,
    logp_old,
    adv,
    clip_eps,
    mask=None,
    clip_eps_high=None,
    *,
    ignore_high=False,
    detach_old=True,
    detach_adv=True,
    select_late=False,
    fraction_binding=False,
    kl_k1=False,
    optimistic=False,
    raw_count=False,
    tensor_info=False,
):
    high = clip_eps if (clip_eps_high is None or ignore_high) else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    logp_old = logp_old.detach() if detach_old else logp_old
    adv = adv.detach() if detach_adv else adv
    if not select_late:
        logp = torch.where(valid, logp, zero)
        logp_old = torch.where(valid, logp_old, zero)
        adv = torch.where(valid, adv, zero)
    log_ratio = logp - logp_old
    ratio = torch.exp(log_ratio)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    if optimistic:
        per_element = -torch.maximum(ratio * adv, clipped * adv)
    else:
        per_element = -torch.minimum(ratio * adv, clipped * adv)
    count = valid.sum() if raw_count else valid.sum().clamp(min=1)
    loss = torch.where(valid, per_element, zero).sum() / count
    with torch.no_grad():
        below = ratio < 1.0 - clip_eps
        above = ratio > 1.0 + high
        binding = (above & (adv > 0)) | (below & (adv < 0))
        outside = binding if fraction_binding else (below | above)
        kl_terms = -log_ratio if kl_k1 else (ratio - 1.0) - log_ratio
        n = valid.sum().clamp(min=1)
        info = {
            "clip_fraction": (outside & valid).sum() / n,
            "clip_active_fraction": (binding & valid).sum() / n,
            "approx_kl": torch.where(valid, kl_terms, zero).sum() / n,
        }
        if not tensor_info:
            info = {key: value.item() for key, value in info.items()}
    return loss, info


def w78_clipped_surrogate_loss_ignores_clip_high(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, ignore_high=True)


def w79_clipped_surrogate_loss_old_logp_not_detached(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, detach_old=False)


def w80_clipped_surrogate_loss_selects_padding_last(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, select_late=True)


def w81_clipped_surrogate_loss_fraction_is_binding(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, fraction_binding=True)


def w82_clipped_surrogate_loss_k1_approx_kl(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, kl_k1=True)


def w83_clipped_surrogate_loss_optimistic_max(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, optimistic=True)


def w84_clipped_surrogate_loss_empty_mask_nan(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, raw_count=True)


def w85_clipped_surrogate_loss_tensor_diagnostics(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, tensor_info=True)


def r25_clipped_surrogate_loss_boolean_select(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    lp, lp_old, a = logp[valid], logp_old.detach()[valid], adv.detach()[valid]
    log_ratio = lp - lp_old
    ratio = log_ratio.exp()
    surrogate = torch.min(ratio * a, ratio.clamp(1 - clip_eps, 1 + eps_high) * a)
    n = max(int(valid.sum()), 1)
    loss = -surrogate.sum() / n
    with torch.no_grad():
        low = ratio < 1 - clip_eps
        high = ratio > 1 + eps_high
        info = {
            "clip_fraction": float((low | high).sum()) / n,
            "clip_active_fraction": float(((high & (a > 0)) | (low & (a < 0))).sum()) / n,
            "approx_kl": float((torch.expm1(log_ratio) - log_ratio).sum()) / n,
        }
    return loss, info


def r26_clipped_surrogate_loss_pessimistic_max(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    upper = 1.0 + (clip_eps if clip_eps_high is None else clip_eps_high)
    lower = 1.0 - clip_eps
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask != 0
    weights = valid.to(logp.dtype)
    n = weights.sum().clamp(min=1.0)
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    a = torch.where(valid, adv.detach(), torch.zeros_like(logp))
    ratio = torch.exp(log_ratio)
    unclipped_loss = -a * ratio
    clipped_loss = -a * torch.clamp(ratio, lower, upper)
    loss = (torch.maximum(unclipped_loss, clipped_loss) * weights).sum() / n
    with torch.no_grad():
        out_of_range = ((ratio < lower) | (ratio > upper)) & valid
        binds = (((ratio > upper) & (a > 0)) | ((ratio < lower) & (a < 0))) & valid
        info = {
            "clip_fraction": (out_of_range.sum() / n).item(),
            "clip_active_fraction": (binds.sum() / n).item(),
            "approx_kl": (((ratio - 1) - log_ratio) * weights).sum().item() / n.item(),
        }
    return loss, info


ROWS += [
    _row(
        "clipped_surrogate_loss",
        "05",
        w78_clipped_surrogate_loss_ignores_clip_high,
        "Ignores clip_eps_high and clips to [1 - clip_eps, 1 + clip_eps] on both sides.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w79_clipped_surrogate_loss_old_logp_not_detached,
        "Does not detach logp_old, so a gradient flows into the old policy's log-probs.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w80_clipped_surrogate_loss_selects_padding_last,
        "Computes the ratio on the raw inputs and removes the padding only at the end with torch.where, so -inf "
        "padding makes NaN (in the diagnostics, and in the gradient through the unselected branch).",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w81_clipped_surrogate_loss_fraction_is_binding,
        "Reports clip_fraction as the share where the clip binds (taking the advantage's sign into account), the same "
        "number as clip_active_fraction.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w82_clipped_surrogate_loss_k1_approx_kl,
        "Reports approx_kl as the mean of -log r (the k1 estimator) instead of (r - 1) - log r.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w83_clipped_surrogate_loss_optimistic_max,
        "Takes the max of the unclipped and clipped objectives (the optimistic bound) instead of the min.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w84_clipped_surrogate_loss_empty_mask_nan,
        "Divides the loss by the raw number of valid entries, so an all-padding mask gives 0/0 = NaN.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w85_clipped_surrogate_loss_tensor_diagnostics,
        "Returns the three diagnostics as 0-dim tensors instead of Python floats.",
    ),
    _row("clipped_surrogate_loss", "05", r25_clipped_surrogate_loss_boolean_select),
    _row("clipped_surrogate_loss", "05", r26_clipped_surrogate_loss_pessimistic_max),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 05: value_loss
# ----------------------------------------------------------------------------------------------------------------------


def _value_loss(
    values,
    returns,
    values_old=None,
    clip_eps=None,
    mask=None,
    *,
    half=0.5,
    optimistic=False,
    clip_around_returns=False,
    detach_returns=True,
    detach_old=True,
    count_padding=False,
):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    values = torch.where(valid, values, zero)
    returns = torch.where(valid, returns.detach() if detach_returns else returns, zero)
    squared_error = (values - returns) ** 2
    if clip_eps is not None:
        anchor = returns if clip_around_returns else values_old
        anchor = torch.where(valid, anchor.detach() if detach_old else anchor, zero)
        values_clipped = anchor + torch.clamp(values - anchor, -clip_eps, clip_eps)
        clipped_error = (values_clipped - returns) ** 2
        pick = torch.minimum if optimistic else torch.maximum
        squared_error = pick(squared_error, clipped_error)
    count = torch.tensor(values.numel()) if count_padding else valid.sum().clamp(min=1)
    return half * torch.where(valid, squared_error, zero).sum() / count


def w86_value_loss_no_half(values, returns, values_old=None, clip_eps=None, mask=None):
    return _value_loss(values, returns, values_old, clip_eps, mask, half=1.0)


def w87_value_loss_clipped_min(values, returns, values_old=None, clip_eps=None, mask=None):
    return _value_loss(values, returns, values_old, clip_eps, mask, optimistic=True)


def w88_value_loss_clips_around_returns(values, returns, values_old=None, clip_eps=None, mask=None):
    return _value_loss(values, returns, values_old, clip_eps, mask, clip_around_returns=True)


def w89_value_loss_returns_not_detached(values, returns, values_old=None, clip_eps=None, mask=None):
    return _value_loss(values, returns, values_old, clip_eps, mask, detach_returns=False)


def w90_value_loss_old_values_not_detached(values, returns, values_old=None, clip_eps=None, mask=None):
    return _value_loss(values, returns, values_old, clip_eps, mask, detach_old=False)


def w91_value_loss_counts_padding(values, returns, values_old=None, clip_eps=None, mask=None):
    return _value_loss(values, returns, values_old, clip_eps, mask, count_padding=True)


def w92_value_loss_mse_on_selection(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    v, R = values[valid], returns.detach()[valid]
    if clip_eps is None:
        return 0.5 * F.mse_loss(v, R)
    old = values_old.detach()[valid]
    v_clipped = old + (v - old).clamp(-clip_eps, clip_eps)
    return 0.5 * torch.maximum((v - R) ** 2, (v_clipped - R) ** 2).mean()


def r27_value_loss_selected_entries(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    v = values[valid]
    target = returns.detach()[valid]
    error = (v - target).pow(2)
    if clip_eps is not None:
        old = values_old.detach()[valid]
        moved = old + torch.clamp(v - old, min=-clip_eps, max=clip_eps)
        error = torch.max(error, (moved - target).pow(2))
    return error.sum() / (2 * max(v.numel(), 1))


def r28_value_loss_weighted(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask != 0
    w = valid.to(values.dtype) / valid.sum().clamp(min=1)
    v = values.masked_fill(~valid, 0.0)
    target = returns.detach().masked_fill(~valid, 0.0)
    loss_terms = 0.5 * (v - target) ** 2
    if clip_eps is not None:
        old = values_old.detach().masked_fill(~valid, 0.0)
        step = torch.clamp(v - old, -clip_eps, clip_eps)
        loss_terms = torch.maximum(loss_terms, 0.5 * (old + step - target) ** 2)
    return (loss_terms * w).sum()


ROWS += [
    _row(
        "value_loss",
        "05",
        w86_value_loss_no_half,
        "Leaves out the factor 1/2 (Stable-Baselines3's convention), doubling the loss.",
    ),
    _row(
        "value_loss",
        "05",
        w87_value_loss_clipped_min,
        "With value clipping takes the min of the clipped and unclipped errors instead of the pessimistic max.",
    ),
    _row(
        "value_loss",
        "05",
        w88_value_loss_clips_around_returns,
        "Clips the new value to within clip_eps of the returns instead of within clip_eps of values_old.",
    ),
    _row(
        "value_loss",
        "05",
        w89_value_loss_returns_not_detached,
        "Does not detach the returns, so a gradient flows into the regression targets.",
    ),
    _row(
        "value_loss",
        "05",
        w90_value_loss_old_values_not_detached,
        "Does not detach values_old, so with clipping a gradient flows into the old values.",
    ),
    _row(
        "value_loss",
        "05",
        w91_value_loss_counts_padding,
        "Divides the masked sum by every entry (numel), padding included, instead of by the valid ones.",
    ),
    _row(
        "value_loss",
        "05",
        w92_value_loss_mse_on_selection,
        "Averages the selected entries with F.mse_loss / .mean(), which is NaN when no entry is valid.",
    ),
    _row("value_loss", "05", r27_value_loss_selected_entries),
    _row("value_loss", "05", r28_value_loss_weighted),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 05: PPOLoss (a class, built as PPOLoss(clip_epsilon, value_loss_coef, entropy_coef))
# ----------------------------------------------------------------------------------------------------------------------


def _masked_mean(x, mask):
    valid = torch.ones_like(x, dtype=torch.bool) if mask is None else mask.bool()
    return torch.where(valid, x, torch.zeros_like(x)).sum() / valid.sum().clamp(min=1)


class _PPOLossInit(nn.Module):
    def __init__(self, clip_epsilon: float = 0.2, value_loss_coef: float = 0.5, entropy_coef: float = 0.01):
        super().__init__()
        self.clip_epsilon = clip_epsilon
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef


class w93_PPOLoss_entropy_added(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _surrogate(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask)
        v_loss = _value_loss(values, returns, mask=mask)
        return policy_loss + self.value_loss_coef * v_loss + self.entropy_coef * _masked_mean(entropy, mask)


class w94_PPOLoss_entropy_detached(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _surrogate(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask)
        v_loss = _value_loss(values, returns, mask=mask)
        bonus = _masked_mean(entropy.detach(), mask)  # "the entropy is only a regulariser"
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * bonus


class w95_PPOLoss_entropy_over_padding(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _surrogate(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask)
        v_loss = _value_loss(values, returns, mask=mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * entropy.mean()


class w96_PPOLoss_coefficient_on_policy(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _surrogate(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask)
        v_loss = _value_loss(values, returns, mask=mask)
        return self.value_loss_coef * policy_loss + v_loss - self.entropy_coef * _masked_mean(entropy, mask)


class w97_PPOLoss_normalises_advantages(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        policy_loss, _ = _surrogate(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask)
        v_loss = _value_loss(values, returns, mask=mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * _masked_mean(entropy, mask)


class w98_PPOLoss_mse_value_term(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _surrogate(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask)
        v_loss = _value_loss(values, returns, mask=mask, half=1.0)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * _masked_mean(entropy, mask)


class w99_PPOLoss_value_loss_unmasked(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _surrogate(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask)
        v_loss = _value_loss(values, returns)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * _masked_mean(entropy, mask)


class w100_PPOLoss_entropy_summed(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _surrogate(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask)
        v_loss = _value_loss(values, returns, mask=mask)
        valid = torch.ones_like(entropy, dtype=torch.bool) if mask is None else mask.bool()
        total_entropy = torch.where(valid, entropy, torch.zeros_like(entropy)).sum()
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * total_entropy


class w101_PPOLoss_advantages_keep_gradient(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _surrogate(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask, detach_adv=False
        )
        v_loss = _value_loss(values, returns, mask=mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * _masked_mean(entropy, mask)


class r29_PPOLoss_inline(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        valid = torch.ones_like(policy_logprobs, dtype=torch.bool) if mask is None else mask.bool()
        n = valid.sum().clamp(min=1)
        zero = torch.zeros_like(policy_logprobs)
        log_ratio = torch.where(valid, policy_logprobs - old_policy_logprobs.detach(), zero)
        adv = torch.where(valid, advantages.detach(), zero)
        ratio = log_ratio.exp()
        eps = self.clip_epsilon
        surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
        policy_term = -torch.where(valid, surrogate, zero).sum() / n
        v = torch.where(valid, values, zero)
        R = torch.where(valid, returns.detach(), zero)
        value_term = 0.5 * ((v - R) ** 2).sum() / n
        entropy_term = torch.where(valid, entropy, zero).sum() / n
        return policy_term + self.value_loss_coef * value_term - self.entropy_coef * entropy_term


class r30_PPOLoss_helper_functions(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = r25_clipped_surrogate_loss_boolean_select(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        critic_loss = r27_value_loss_selected_entries(values, returns, mask=mask)
        valid = torch.ones_like(entropy, dtype=torch.bool) if mask is None else mask.bool()
        mean_entropy = entropy[valid].sum() / max(int(valid.sum()), 1)
        return policy_loss + self.value_loss_coef * critic_loss - self.entropy_coef * mean_entropy


ROWS += [
    _row(
        "PPOLoss",
        "05",
        w93_PPOLoss_entropy_added,
        "Adds the entropy term (+ c2 * H) instead of subtracting it, so more entropy raises the loss.",
    ),
    _row(
        "PPOLoss",
        "05",
        w94_PPOLoss_entropy_detached,
        "Detaches the entropy, so the bonus sends no gradient to the policy.",
    ),
    _row(
        "PPOLoss",
        "05",
        w95_PPOLoss_entropy_over_padding,
        "Averages the entropy over every entry, padding included, instead of over the valid ones.",
    ),
    _row(
        "PPOLoss",
        "05",
        w96_PPOLoss_coefficient_on_policy,
        "Multiplies the policy loss by value_loss_coef instead of the value loss.",
    ),
    _row(
        "PPOLoss",
        "05",
        w97_PPOLoss_normalises_advantages,
        "Normalises the advantages inside the loss (minus mean, over std), although they are to be used as given.",
    ),
    _row(
        "PPOLoss",
        "05",
        w98_PPOLoss_mse_value_term,
        "Uses the mean squared error without the factor 1/2 as the value term.",
    ),
    _row(
        "PPOLoss",
        "05",
        w99_PPOLoss_value_loss_unmasked,
        "Does not pass the mask to the value loss, so padding counts in it.",
    ),
    _row(
        "PPOLoss",
        "05",
        w100_PPOLoss_entropy_summed,
        "Sums the entropy over the valid entries (the paper's S[pi] summed) instead of averaging it.",
    ),
    _row(
        "PPOLoss",
        "05",
        w101_PPOLoss_advantages_keep_gradient,
        "Does not detach the advantages in the policy term, so a gradient flows into them.",
    ),
    _row("PPOLoss", "05", r29_PPOLoss_inline),
    _row("PPOLoss", "05", r30_PPOLoss_helper_functions),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 06: group_advantages
# ----------------------------------------------------------------------------------------------------------------------


def _centred_with_zeros(rewards):
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    return torch.where(all_equal, torch.zeros_like(centred), centred)


def w102_group_advantages_always_divides(rewards, normalize_std=True, eps=1e-6):
    adv = _centred_with_zeros(rewards)
    if rewards.shape[-1] == 1:
        return adv
    return adv / (rewards.std(dim=-1, keepdim=True) + eps)


def w103_group_advantages_group_of_one_nan(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True)
    adv = torch.where(std == 0, torch.zeros_like(adv), adv)  # all-equal groups
    if not normalize_std:
        return adv
    return adv / (std + eps)


def w104_group_advantages_batch_std(rewards, normalize_std=True, eps=1e-6):
    adv = _centred_with_zeros(rewards)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    return adv / (rewards.std() + eps)  # one scale for the whole batch


def w105_group_advantages_fixed_eps(rewards, normalize_std=True, eps=1e-6):
    adv = _centred_with_zeros(rewards)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    return adv / (rewards.std(dim=-1, keepdim=True) + 1e-6)


def w106_group_advantages_groups_on_rows(rewards, normalize_std=True, eps=1e-6):
    centred = rewards - rewards.mean(dim=0, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    adv = torch.where(all_equal, torch.zeros_like(centred), centred)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    return adv / (rewards.std(dim=0, keepdim=True) + eps)


def w107_group_advantages_float_cast(rewards, normalize_std=True, eps=1e-6):
    rewards = rewards.float()
    adv = _centred_with_zeros(rewards)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    return adv / (rewards.std(dim=-1, keepdim=True) + eps)


def r31_group_advantages_masked_fill(rewards, normalize_std=True, eps=1e-6):
    G = rewards.shape[1]
    flat = (rewards.max(dim=1, keepdim=True).values - rewards.min(dim=1, keepdim=True).values) == 0
    adv = (rewards - rewards.mean(dim=1, keepdim=True)).masked_fill(flat, 0.0)
    if normalize_std and G > 1:
        adv = adv / (torch.std(rewards, dim=1, keepdim=True, correction=1) + eps)
    return adv


def r32_group_advantages_per_group(rewards, normalize_std=True, eps=1e-6):
    out = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        group = rewards[b]
        if group.numel() == 1 or bool((group == group[0]).all()):
            continue
        adv = group - group.mean()
        if normalize_std:
            adv = adv / (group.std() + eps)
        out[b] = adv
    return out


ROWS += [
    _row(
        "group_advantages",
        "06",
        w102_group_advantages_always_divides,
        "Ignores normalize_std=False and always divides by the group std (no Dr. GRPO mode).",
    ),
    _row(
        "group_advantages",
        "06",
        w103_group_advantages_group_of_one_nan,
        "Finds all-equal groups by std == 0 without handling G == 1, where torch.std is NaN, so groups of one give "
        "NaN.",
    ),
    _row(
        "group_advantages",
        "06",
        w104_group_advantages_batch_std,
        "Centres per group but divides by the std of the whole batch instead of each group's std.",
    ),
    _row(
        "group_advantages",
        "06",
        w105_group_advantages_fixed_eps,
        "Adds a hard-coded 1e-6 to the std, ignoring the eps argument.",
    ),
    _row(
        "group_advantages",
        "06",
        w106_group_advantages_groups_on_rows,
        "Takes the mean and std over dim=0 (across prompts) instead of over each prompt's group (the last axis).",
    ),
    _row(
        "group_advantages",
        "06",
        w107_group_advantages_float_cast,
        "Casts the rewards to float32 with .float(), so float64 rewards give float32 advantages.",
    ),
    _row("group_advantages", "06", r31_group_advantages_masked_fill),
    _row("group_advantages", "06", r32_group_advantages_per_group),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 06: kl_estimate
# ----------------------------------------------------------------------------------------------------------------------


def _kind_error(kind):
    return ValueError(f"kind: expected 'k1', 'k2' or 'k3', got {kind!r}")


def w108_kl_estimate_k1_sign(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return log_r  # "k1 = log r"
    if kind == "k2":
        return 0.5 * log_r**2
    if kind == "k3":
        return torch.expm1(log_r) - log_r
    raise _kind_error(kind)


def w109_kl_estimate_k2_no_half(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return log_r**2
    if kind == "k3":
        return torch.expm1(log_r) - log_r
    raise _kind_error(kind)


def w110_kl_estimate_k3_other_ratio(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    if kind == "k3":
        log_ratio = logp - logp_ref  # r = pi_theta / pi_ref, as in PPO's ratio
        return torch.expm1(log_ratio) - log_ratio
    raise _kind_error(kind)


def w111_kl_estimate_k3_ratio_detached(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    if kind == "k3":
        ratio = torch.exp(log_r).detach()  # a weight, like PPO's ratio
        return (ratio - 1) - log_r
    raise _kind_error(kind)


def w112_kl_estimate_mean_over_tokens(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        estimate = -log_r
    elif kind == "k2":
        estimate = 0.5 * log_r**2
    elif kind == "k3":
        estimate = torch.expm1(log_r) - log_r
    else:
        raise _kind_error(kind)
    return estimate.mean()


def r33_kl_estimate_dictionary(logp, logp_ref, kind):
    estimators = {
        "k1": lambda x: -x,
        "k2": lambda x: torch.square(x) / 2,
        "k3": lambda x: torch.exp(x) - 1 - x,
    }
    if kind not in estimators:
        raise _kind_error(kind)
    return estimators[kind](logp_ref - logp)


def r34_kl_estimate_forward_ratio(logp, logp_ref, kind):
    d = logp - logp_ref  # log(pi_theta / pi_ref)
    if kind == "k1":
        return d
    if kind == "k2":
        return 0.5 * d * d
    if kind == "k3":
        return torch.expm1(-d) + d
    raise _kind_error(kind)


ROWS += [
    _row(
        "kl_estimate",
        "06",
        w108_kl_estimate_k1_sign,
        "Returns log r = logp_ref - logp for k1 instead of -log r.",
    ),
    _row(
        "kl_estimate",
        "06",
        w109_kl_estimate_k2_no_half,
        "Leaves out the factor 1/2 in k2 ((log r)^2 instead of (log r)^2 / 2).",
    ),
    _row(
        "kl_estimate",
        "06",
        w110_kl_estimate_k3_other_ratio,
        "Computes k3 with the ratio pi_theta / pi_ref (PPO's direction) instead of pi_ref / pi_theta.",
    ),
    _row(
        "kl_estimate",
        "06",
        w111_kl_estimate_k3_ratio_detached,
        "Detaches the ratio r in k3, so its gradient is only that of -log r.",
    ),
    _row(
        "kl_estimate",
        "06",
        w112_kl_estimate_mean_over_tokens,
        "Returns the mean over tokens instead of one estimate per token.",
    ),
    _row("kl_estimate", "06", r33_kl_estimate_dictionary),
    _row("kl_estimate", "06", r34_kl_estimate_forward_ratio),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 06: aggregate_loss
# ----------------------------------------------------------------------------------------------------------------------

_AGG_MODES = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm")


def _aggregate(
    per_token,
    mask,
    mode,
    max_len=None,
    *,
    ignore_max_len=False,
    skip_empty=False,
    verl_sum=False,
    divide_by_T=False,
    first_axis_count=False,
):
    if mode not in _AGG_MODES:
        raise ValueError(f"mode: expected one of {_AGG_MODES}, got {mode!r}")
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    n_responses = per_token.shape[0] if first_axis_count else per_response.numel()
    if mode == "seq-mean-token-mean":
        denominator = torch.full_like(n_valid, per_token.shape[-1]) if divide_by_T else n_valid.clamp(min=1)
        if skip_empty:
            keep = n_valid > 0
            return (per_response[keep] / n_valid[keep]).sum() / keep.sum().clamp(min=1)
        return (per_response / denominator).sum() / n_responses
    L = per_token.shape[-1] if (max_len is None or ignore_max_len) else max_len
    if verl_sum:
        return per_response.sum() / L
    return (per_response / L).sum() / n_responses


def w113_aggregate_loss_ignores_max_len(per_token, mask, mode, max_len=None):
    return _aggregate(per_token, mask, mode, max_len, ignore_max_len=True)


def w114_aggregate_loss_skips_empty_responses(per_token, mask, mode, max_len=None):
    return _aggregate(per_token, mask, mode, max_len, skip_empty=True)


def w115_aggregate_loss_verl_sum_norm(per_token, mask, mode, max_len=None):
    return _aggregate(per_token, mask, mode, max_len, verl_sum=True)


def w116_aggregate_loss_seq_mean_over_T(per_token, mask, mode, max_len=None):
    return _aggregate(per_token, mask, mode, max_len, divide_by_T=True)


def w117_aggregate_loss_counts_first_axis(per_token, mask, mode, max_len=None):
    return _aggregate(per_token, mask, mode, max_len, first_axis_count=True)


def w118_aggregate_loss_mask_after_sum(per_token, mask, mode, max_len=None):
    if mode not in _AGG_MODES:
        raise ValueError(f"mode: expected one of {_AGG_MODES}, got {mode!r}")
    m = mask.to(per_token.dtype)
    n_valid = m.sum(dim=-1)
    if mode == "token-mean":
        return (per_token * m).sum() / n_valid.sum().clamp(min=1)
    # the mean of each response over its own tokens, taken as (mean over T) * T / |o|
    per_response = per_token.mean(dim=-1) * per_token.shape[-1] * (n_valid > 0)
    if mode == "seq-mean-token-mean":
        return (per_response / n_valid.clamp(min=1)).mean()
    L = per_token.shape[-1] if max_len is None else max_len
    return (per_response / L).mean()


def r35_aggregate_loss_weights(per_token, mask, mode, max_len=None):
    if mode not in _AGG_MODES:
        raise ValueError(f"mode: expected one of {_AGG_MODES}, got {mode!r}")
    valid = mask != 0
    lengths = valid.sum(dim=-1, keepdim=True).to(per_token.dtype)  # (..., 1)
    n_responses = lengths.numel()
    if mode == "token-mean":
        weights = torch.ones_like(lengths) / lengths.sum().clamp(min=1)
    elif mode == "seq-mean-token-mean":
        weights = 1.0 / (n_responses * lengths.clamp(min=1))
    else:
        L = per_token.shape[-1] if max_len is None else max_len
        weights = torch.full_like(lengths, 1.0 / (n_responses * L))
    return (torch.where(valid, per_token, torch.zeros_like(per_token)) * weights).sum()


def r36_aggregate_loss_flattened_rows(per_token, mask, mode, max_len=None):
    if mode not in _AGG_MODES:
        raise ValueError(f"mode: expected one of {_AGG_MODES}, got {mode!r}")
    T = per_token.shape[-1]
    rows = per_token.reshape(-1, T)
    keep = mask.reshape(-1, T).bool()
    clean = rows.masked_fill(~keep, 0.0)
    sums = clean.sum(dim=1)
    counts = keep.sum(dim=1)
    if mode == "token-mean":
        return sums.sum() / max(int(counts.sum()), 1)
    if mode == "seq-mean-token-mean":
        return torch.stack([s / max(int(c), 1) for s, c in zip(sums, counts)]).mean()
    return (sums / (T if max_len is None else max_len)).mean()


ROWS += [
    _row(
        "aggregate_loss",
        "06",
        w113_aggregate_loss_ignores_max_len,
        "Always divides by the padded length T in Dr. GRPO's mode, ignoring max_len.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w114_aggregate_loss_skips_empty_responses,
        "Leaves empty responses out of the mean over responses (as later verl versions do) instead of counting them "
        "with 0.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w115_aggregate_loss_verl_sum_norm,
        "In Dr. GRPO's mode divides the sum over all responses by L without the mean over responses (verl's "
        "seq-mean-token-sum-norm), N times too large.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w116_aggregate_loss_seq_mean_over_T,
        "In the per-sequence mean divides each response's sum by the padded length T instead of its own length |o_i|.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w117_aggregate_loss_counts_first_axis,
        "Averages over responses by dividing by per_token.shape[0] (the prompts) instead of the number of responses "
        "over all leading axes.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w118_aggregate_loss_mask_after_sum,
        "In the per-sequence modes sums each response over all T tokens, padding included, and applies the mask only "
        "afterwards (to the count), so garbage in the padding enters the loss.",
    ),
    _row("aggregate_loss", "06", r35_aggregate_loss_weights),
    _row("aggregate_loss", "06", r36_aggregate_loss_flattened_rows),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 06: grpo_loss (uses the library's group_advantages, kl_estimate and aggregate_loss, as the exercise says)
# ----------------------------------------------------------------------------------------------------------------------


def _grpo(
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
    *,
    detach_given_adv=True,
    ignore_high=False,
    bias_corrected_kl=False,
    beta_on_surrogate=False,
    drop_normalize_std=False,
    drop_max_len=False,
    kl_info_over_padding=False,
    adv_abs_over_tokens=False,
    kl_from_old=False,
    ratio_to_reference=False,
):
    from course_lib import grpo

    if adv is None:
        adv = grpo.group_advantages(rewards.detach(), normalize_std=True if drop_normalize_std else normalize_std)
    elif detach_given_adv:
        adv = adv.detach()
    adv_tokens = adv.unsqueeze(-1).expand_as(logp)
    high = clip_eps if (clip_eps_high is None or ignore_high) else clip_eps_high
    if ratio_to_reference and logp_ref is not None:
        base = logp_ref.detach()
    else:
        base = logp_old.detach()
    ratio = torch.exp(logp - base)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_token = -torch.minimum(ratio * adv_tokens, clipped * adv_tokens)
    if beta_on_surrogate:
        per_token = kl_coef * per_token
    kl = None
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp_old.detach() if kl_from_old else logp, logp_ref.detach(), kl_kind)
        penalty = kl
        if bias_corrected_kl:
            penalty = torch.exp(logp - logp_old.detach()) * kl  # TRL's use_bias_correction_kl
        per_token = per_token + (penalty if beta_on_surrogate else kl_coef * penalty)
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, None if drop_max_len else max_len)
    with torch.no_grad():
        valid = mask.bool()
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binding = (above & (adv_tokens > 0)) | (low & (adv_tokens < 0))
        if kl is None:
            kl_mean = 0.0
        elif kl_info_over_padding:
            kl_mean = kl.mean().item()
        else:
            kl_mean = kl[valid].mean().item()
        if adv_abs_over_tokens:
            adv_abs = adv_tokens.abs()[valid].mean().item()
        else:
            adv_abs = adv.abs().mean().item()
        info = {
            "clip_fraction": (low | above)[valid].double().mean().item(),
            "clip_active_fraction": binding[valid].double().mean().item(),
            "kl": kl_mean,
            "adv_abs_mean": adv_abs,
        }
        if rewards is not None:
            info["reward_mean"] = rewards.mean().item()
    return loss, info


def w119_grpo_loss_given_adv_keeps_gradient(
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
    return _grpo(*args, clip_eps_high, adv, detach_given_adv=False)


def w120_grpo_loss_ignores_clip_high(
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
    return _grpo(*args, clip_eps_high, adv, ignore_high=True)


def w121_grpo_loss_bias_corrected_kl(
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
    return _grpo(*args, clip_eps_high, adv, bias_corrected_kl=True)


def w122_grpo_loss_beta_on_surrogate(
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
    return _grpo(*args, clip_eps_high, adv, beta_on_surrogate=True)


def w123_grpo_loss_drops_normalize_std(
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
    return _grpo(*args, clip_eps_high, adv, drop_normalize_std=True)


def w124_grpo_loss_drops_max_len(
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
    return _grpo(*args, clip_eps_high, adv, drop_max_len=True)


def w125_grpo_loss_kl_info_over_padding(
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
    return _grpo(*args, clip_eps_high, adv, kl_info_over_padding=True)


def w126_grpo_loss_adv_abs_over_tokens(
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
    return _grpo(*args, clip_eps_high, adv, adv_abs_over_tokens=True)


def w127_grpo_loss_kl_from_old_policy(
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
    return _grpo(*args, clip_eps_high, adv, kl_from_old=True)


def w128_grpo_loss_ratio_to_reference(
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
    return _grpo(*args, clip_eps_high, adv, ratio_to_reference=True)


def r37_grpo_loss_pessimistic_max(
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
    from course_lib import grpo

    eps_high = clip_eps_high if clip_eps_high is not None else clip_eps
    if adv is not None:
        advantages = adv.detach()
    else:
        advantages = grpo.group_advantages(rewards.detach(), normalize_std=normalize_std)
    A = advantages[..., None]  # (B, G, 1) broadcasts over tokens
    log_ratio = logp - logp_old.detach()
    ratio = log_ratio.exp()
    per_token = torch.maximum(-ratio * A, -ratio.clamp(1 - clip_eps, 1 + eps_high) * A)
    kl_mean = 0.0
    valid = mask.bool()
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
        kl_mean = kl.detach()[valid].mean().item()
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    r = ratio.detach()
    outside = (r < 1 - clip_eps) | (r > 1 + eps_high)
    binds = ((r > 1 + eps_high) & (A > 0)) | ((r < 1 - clip_eps) & (A < 0))
    info = {
        "clip_fraction": outside[valid].double().mean().item(),
        "clip_active_fraction": binds[valid].double().mean().item(),
        "kl": kl_mean,
        "adv_abs_mean": advantages.abs().mean().item(),
    }
    if rewards is not None:
        info["reward_mean"] = rewards.mean().item()
    return loss, info


def r38_grpo_loss_piecewise(
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
    """The clipped objective written piecewise: where the clip binds, the ratio is a constant."""
    from course_lib import grpo

    upper = 1 + (clip_eps if clip_eps_high is None else clip_eps_high)
    lower = 1 - clip_eps
    advantages = grpo.group_advantages(rewards.detach(), normalize_std=normalize_std) if adv is None else adv.detach()
    A = advantages.unsqueeze(-1).expand_as(logp)
    ratio = torch.exp(logp - logp_old.detach())
    binds = ((ratio > upper) & (A > 0)) | ((ratio < lower) & (A < 0))
    frozen = torch.clamp(ratio, lower, upper).detach()
    objective = torch.where(binds, frozen * A, ratio * A)
    per_token = -objective
    valid = mask.bool()
    kl_value = 0.0
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
        kl_value = float(kl.detach()[valid].mean())
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    with torch.no_grad():
        n = valid.sum().double()
        outside = ((ratio < lower) | (ratio > upper)) & valid
        info = {
            "clip_fraction": float(outside.sum() / n),
            "clip_active_fraction": float((binds & valid).sum() / n),
            "kl": kl_value,
            "adv_abs_mean": float(advantages.abs().mean()),
        }
        if rewards is not None:
            info["reward_mean"] = float(rewards.mean())
    return loss, info


ROWS += [
    _row(
        "grpo_loss",
        "06",
        w119_grpo_loss_given_adv_keeps_gradient,
        "Does not detach advantages passed in as adv (only those computed from rewards), so a gradient flows into adv.",
    ),
    _row(
        "grpo_loss",
        "06",
        w120_grpo_loss_ignores_clip_high,
        "Ignores clip_eps_high and clips the ratio to [1 - clip_eps, 1 + clip_eps].",
    ),
    _row(
        "grpo_loss",
        "06",
        w121_grpo_loss_bias_corrected_kl,
        "Multiplies the KL term by the ratio pi_theta / pi_old (TRL's use_bias_correction_kl), which the course does "
        "not.",
    ),
    _row(
        "grpo_loss",
        "06",
        w122_grpo_loss_beta_on_surrogate,
        "Puts kl_coef on the clipped surrogate instead of on the KL term.",
    ),
    _row(
        "grpo_loss",
        "06",
        w123_grpo_loss_drops_normalize_std,
        "Does not pass normalize_std to group_advantages, so Dr. GRPO's normalize_std=False still divides by the std.",
    ),
    _row(
        "grpo_loss",
        "06",
        w124_grpo_loss_drops_max_len,
        "Does not pass max_len to aggregate_loss, so Dr. GRPO's constant is always T.",
    ),
    _row(
        "grpo_loss",
        "06",
        w125_grpo_loss_kl_info_over_padding,
        "Reports info['kl'] as the mean over every token, padding included, instead of over the valid ones.",
    ),
    _row(
        "grpo_loss",
        "06",
        w126_grpo_loss_adv_abs_over_tokens,
        "Reports adv_abs_mean as the mean of |A| over valid tokens instead of over responses.",
    ),
    _row(
        "grpo_loss",
        "06",
        w127_grpo_loss_kl_from_old_policy,
        "Estimates the KL from logp_old instead of logp, so the penalty is a constant with no gradient.",
    ),
    _row(
        "grpo_loss",
        "06",
        w128_grpo_loss_ratio_to_reference,
        "Takes the importance ratio against the reference policy (logp - logp_ref) instead of the old policy whenever "
        "a reference is given.",
    ),
    _row("grpo_loss", "06", r37_grpo_loss_pessimistic_max),
    _row("grpo_loss", "06", r38_grpo_loss_piecewise),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 07: memory_accounting
# ----------------------------------------------------------------------------------------------------------------------

_BYTES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}


def _memory(
    n_params_actor,
    n_params_critic,
    n_params_ref,
    n_params_reward,
    weights_dtype,
    optimizer_dtype,
    *,
    master_always=False,
    optimizer_for_frozen=False,
    grads_in_optimizer_dtype=False,
    master_when_different=False,
    total_without_optimizer=False,
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    g = o if grads_in_optimizer_dtype else w
    if master_always:
        master = o
    elif master_when_different:
        master = o if w != o else 0
    else:
        master = o if w < o else 0
    optimised = n_params_actor + n_params_critic
    if optimizer_for_frozen:
        optimised += n_params_ref + n_params_reward
    account = {
        "actor": n_params_actor * (w + g),
        "critic": n_params_critic * (w + g),
        "reference": n_params_ref * w,
        "reward": n_params_reward * w,
        "optimizer": optimised * (2 * o + master),
    }
    account["total"] = sum(v for k, v in account.items() if not (total_without_optimizer and k == "optimizer"))
    return account


def w129_memory_accounting_master_always(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    args = (n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype)
    return _memory(*args, master_always=True)


def w130_memory_accounting_adam_for_frozen_models(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    args = (n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype)
    return _memory(*args, optimizer_for_frozen=True)


def w131_memory_accounting_fp32_gradients(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    args = (n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype)
    return _memory(*args, grads_in_optimizer_dtype=True)


def w132_memory_accounting_master_when_different(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    args = (n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype)
    return _memory(*args, master_when_different=True)


def w133_memory_accounting_bits_over_eight(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    bits = {"fp64": 64, "fp32": 32, "bf16": 16, "fp16": 16}
    w, o = bits[weights_dtype] / 8, bits[optimizer_dtype] / 8
    master = o if w < o else 0
    account = {
        "actor": n_params_actor * 2 * w,
        "critic": n_params_critic * 2 * w,
        "reference": n_params_ref * w,
        "reward": n_params_reward * w,
        "optimizer": (n_params_actor + n_params_critic) * (2 * o + master),
    }
    account["total"] = sum(account.values())
    return account


def w134_memory_accounting_total_of_models(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    args = (n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype)
    return _memory(*args, total_without_optimizer=True)


def r39_memory_accounting_per_model_table(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    size = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}
    weight_bytes = size[weights_dtype]
    state_bytes = size[optimizer_dtype]
    needs_master = weight_bytes < state_bytes
    per_trained_param_optimizer = 2 * state_bytes + (state_bytes if needs_master else 0)
    result = {}
    for name, count, trained in (
        ("actor", n_params_actor, True),
        ("critic", n_params_critic, True),
        ("reference", n_params_ref, False),
        ("reward", n_params_reward, False),
    ):
        result[name] = int(count) * weight_bytes * (2 if trained else 1)
    result["optimizer"] = (int(n_params_actor) + int(n_params_critic)) * per_trained_param_optimizer
    result["total"] = result["actor"] + result["critic"] + result["reference"] + result["reward"] + result["optimizer"]
    return result


def r40_memory_accounting_torch_itemsize(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    dtypes = {"fp64": torch.float64, "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    w = dtypes[weights_dtype].itemsize
    o = dtypes[optimizer_dtype].itemsize
    trained = n_params_actor + n_params_critic
    optimizer = trained * 2 * o
    if w < o:
        optimizer += trained * o
    out = dict(
        actor=2 * w * n_params_actor,
        critic=2 * w * n_params_critic,
        reference=w * n_params_ref,
        reward=w * n_params_reward,
        optimizer=optimizer,
    )
    out["total"] = sum(out.values())
    return out


ROWS += [
    _row(
        "memory_accounting",
        "07",
        w129_memory_accounting_master_always,
        "Always counts a master copy of the weights in the optimizer (ZeRO's 12 bytes), even when the weights are "
        "already as wide as the optimizer's dtype.",
    ),
    _row(
        "memory_accounting",
        "07",
        w130_memory_accounting_adam_for_frozen_models,
        "Counts Adam's state for the frozen reference and reward models too, not only for the trained ones.",
    ),
    _row(
        "memory_accounting",
        "07",
        w131_memory_accounting_fp32_gradients,
        "Stores the gradients in optimizer_dtype instead of weights_dtype.",
    ),
    _row(
        "memory_accounting",
        "07",
        w132_memory_accounting_master_when_different,
        "Adds the master copy whenever the two dtypes differ, so fp64 weights with fp32 Adam get one too.",
    ),
    _row(
        "memory_accounting",
        "07",
        w133_memory_accounting_bits_over_eight,
        "Converts bits to bytes with / 8, so every entry is a float instead of an int.",
    ),
    _row(
        "memory_accounting",
        "07",
        w134_memory_accounting_total_of_models,
        "Leaves the optimizer out of the total (sums only the four models).",
    ),
    _row("memory_accounting", "07", r39_memory_accounting_per_model_table),
    _row("memory_accounting", "07", r40_memory_accounting_torch_itemsize),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 07: read_sweep
# ----------------------------------------------------------------------------------------------------------------------


def w135_read_sweep_last_tie(group_sizes, clip_eps, reward, tol=0.1):
    i, j = (reward == reward.max()).nonzero()[-1].tolist()
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w136_read_sweep_indices(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(torch.argmax(reward)), reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= reward.max() - tol).nonzero()[0, 0])
    return i, j, k


def w137_read_sweep_row_mean_saturation(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(torch.argmax(reward)), reward.shape[1])
    typical = reward.mean(dim=1)  # each group size over all clip ranges
    k = int((typical >= reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w138_read_sweep_stops_at_first_plateau(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(torch.argmax(reward)), reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = len(best_per_group) - 1
    for g in range(len(best_per_group) - 1):
        if best_per_group[g + 1] - best_per_group[g] < tol:  # the next size adds less than tol
            k = g
            break
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w139_read_sweep_strict_tolerance(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(torch.argmax(reward)), reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group > reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w140_read_sweep_divmod_rows(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(torch.argmax(reward)), reward.shape[0])
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def r41_read_sweep_python_scan(group_sizes, clip_eps, reward, tol=0.1):
    table = reward.tolist()
    best = max(max(row) for row in table)
    best_cell = None
    for i, row in enumerate(table):
        for j, value in enumerate(row):
            if value == best and best_cell is None:
                best_cell = (i, j)
    threshold = float(reward.max() - tol)  # in the table's own dtype, as the table's numbers are
    saturation = next(i for i, row in enumerate(table) if max(row) >= threshold)
    i, j = best_cell
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[saturation])


def r42_read_sweep_row_then_column(group_sizes, clip_eps, reward, tol=0.1):
    row_best, row_arg = reward.max(dim=1)
    top = row_best.max()
    i = int(torch.nonzero(row_best == top)[0, 0])
    j = int(torch.nonzero(reward[i] == top)[0, 0])
    k = int(torch.nonzero(row_best >= top - tol)[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


ROWS += [
    _row(
        "read_sweep",
        "07",
        w135_read_sweep_last_tie,
        "Among tied best cells takes the last one (largest group size, largest clip range) instead of the cheapest.",
    ),
    _row(
        "read_sweep",
        "07",
        w136_read_sweep_indices,
        "Returns the row and column indices instead of the group sizes and clip range they stand for.",
    ),
    _row(
        "read_sweep",
        "07",
        w137_read_sweep_row_mean_saturation,
        "Judges saturation by each group size's mean reward over the clip ranges instead of its best.",
    ),
    _row(
        "read_sweep",
        "07",
        w138_read_sweep_stops_at_first_plateau,
        "Takes as saturation the first group size after which the next one gains less than tol, so a stall before a "
        "later rise counts as saturation.",
    ),
    _row(
        "read_sweep",
        "07",
        w139_read_sweep_strict_tolerance,
        "Tests 'within tol' with a strict >, so a reward exactly tol below the best (or any with tol = 0) does not "
        "count.",
    ),
    _row(
        "read_sweep",
        "07",
        w140_read_sweep_divmod_rows,
        "Unflattens the argmax with divmod by the number of rows instead of columns (right only for square tables).",
    ),
    _row("read_sweep", "07", r41_read_sweep_python_scan),
    _row("read_sweep", "07", r42_read_sweep_row_then_column),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 08: addition_exact_reward
# ----------------------------------------------------------------------------------------------------------------------


def w141_addition_exact_reward_eos_optional(completion, answer):
    return float(completion.split("$")[0] == answer)


def w142_addition_exact_reward_strips_spaces(completion, answer):
    head, eos, _ = completion.partition("$")
    return float(bool(eos) and head.strip() == answer)


def w143_addition_exact_reward_integer_compare(completion, answer):
    head, eos, _ = completion.partition("$")
    if not eos:
        return 0.0
    try:
        return float(int(head) == int(answer))
    except ValueError:
        return 0.0


def w144_addition_exact_reward_last_eos(completion, answer):
    head, eos, _ = completion.rpartition("$")
    return float(bool(eos) and head == answer)


def w145_addition_exact_reward_substring(completion, answer):
    head, eos, _ = completion.partition("$")
    return float(bool(eos) and answer in head)


def w146_addition_exact_reward_whole_string(completion, answer):
    return float(completion == answer + "$")


def r43_addition_exact_reward_startswith(completion, answer):
    return 1.0 if completion.startswith(answer + "$") else 0.0


def r44_addition_exact_reward_index(completion, answer):
    position = completion.find("$")
    if position < 0:
        return 0.0
    return float(completion[:position] == answer)


ROWS += [
    _row(
        "addition_exact_reward",
        "08",
        w141_addition_exact_reward_eos_optional,
        "Compares the text before the first '$' without requiring that a '$' exists, so '132' (never stopped) is paid.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w142_addition_exact_reward_strips_spaces,
        "Strips whitespace before comparing, so ' 132$' and '132 $' are paid.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w143_addition_exact_reward_integer_compare,
        "Compares as integers, so leading zeros ('0132$') are paid.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w144_addition_exact_reward_last_eos,
        "Splits at the last '$' (rpartition) instead of the first, so text between two EOS tokens counts.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w145_addition_exact_reward_substring,
        "Tests whether the answer occurs in the text before EOS (a substring) instead of equality, so '1320$' is paid.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w146_addition_exact_reward_whole_string,
        "Requires the whole completion to be the answer and '$', so anything after the first EOS ('132$7') loses the "
        "reward.",
    ),
    _row("addition_exact_reward", "08", r43_addition_exact_reward_startswith),
    _row("addition_exact_reward", "08", r44_addition_exact_reward_index),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 08: completion_mask
# ----------------------------------------------------------------------------------------------------------------------


def w147_completion_mask_drops_eos(completion_ids, eos_id):
    return (torch.cumsum((completion_ids == eos_id).long(), dim=-1) == 0).float()


def w148_completion_mask_not_eos(completion_ids, eos_id):
    return (completion_ids != eos_id).float()


def w149_completion_mask_cumsum_dim0(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return ((torch.cumsum(is_eos, dim=0) - is_eos) == 0).float()


def w150_completion_mask_long(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return (torch.cumsum(is_eos, dim=-1) - is_eos) == 0


def w151_completion_mask_up_to_second_eos(completion_ids, eos_id):
    seen = torch.cumsum((completion_ids == eos_id).long(), dim=-1)
    return (seen <= 1).float()  # "up to and including the EOS"


def w152_completion_mask_two_dim_loop(completion_ids, eos_id):
    mask = torch.ones(completion_ids.shape, dtype=torch.float32)
    for b in range(completion_ids.shape[0]):
        hits = (completion_ids[b] == eos_id).nonzero()
        if len(hits):
            mask[b, hits[0, -1] + 1 :] = 0.0
    return mask


def r45_completion_mask_cummax(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).to(torch.int64)
    seen_by_now = torch.cummax(is_eos, dim=-1).values  # 1 from the first EOS on
    before = torch.cat([torch.zeros_like(seen_by_now[..., :1]), seen_by_now[..., :-1]], dim=-1)
    return (1 - before).to(torch.float32)


def r46_completion_mask_rows(completion_ids, eos_id):
    L = completion_ids.shape[-1]
    rows = completion_ids.reshape(-1, L).tolist()
    out = []
    for row in rows:
        keep = []
        stopped = False
        for token in row:
            keep.append(0.0 if stopped else 1.0)
            stopped = stopped or token == eos_id
        out.append(keep)
    return torch.tensor(out, dtype=torch.float32).reshape(completion_ids.shape)


ROWS += [
    _row(
        "completion_mask",
        "08",
        w147_completion_mask_drops_eos,
        "Masks out the EOS itself (cumsum == 0 is 1 only strictly before the first EOS).",
    ),
    _row(
        "completion_mask",
        "08",
        w148_completion_mask_not_eos,
        "Marks every token that is not EOS as valid, so everything after the first EOS (but the EOS itself) counts.",
    ),
    _row(
        "completion_mask",
        "08",
        w149_completion_mask_cumsum_dim0,
        "Takes the cumulative sum over dim=0 (the batch) instead of the last axis.",
    ),
    _row(
        "completion_mask",
        "08",
        w150_completion_mask_long,
        "Returns a bool mask instead of a float32 one.",
    ),
    _row(
        "completion_mask",
        "08",
        w151_completion_mask_up_to_second_eos,
        "Keeps tokens while the EOS count is <= 1, so everything up to (not including) a second EOS counts.",
    ),
    _row(
        "completion_mask",
        "08",
        w152_completion_mask_two_dim_loop,
        "Loops over the first axis as if the input were (B, L), which mis-handles a 1-D row or a (B, G, L) batch.",
    ),
    _row("completion_mask", "08", r45_completion_mask_cummax),
    _row("completion_mask", "08", r46_completion_mask_rows),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 08: grpo_step (the course's grpo_loss and gather_log_probs, the student's own mask)
# ----------------------------------------------------------------------------------------------------------------------


def _own_completion_mask(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return ((torch.cumsum(is_eos, dim=-1) - is_eos) == 0).float()


def _grpo_step(
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
    *,
    no_shift=False,
    no_clip=False,
    clip_values=False,
    mask_without_eos=False,
    return_tensor=False,
    ratio_one=False,
    tiled_unflatten=False,
    clip_after_step=False,
):
    from course_lib.grpo import grpo_loss
    from course_lib.policy_gradient import gather_log_probs

    B, G, L = completions.shape
    P = prompts.shape[1]
    flat_prompts = prompts.repeat_interleave(G, dim=0)
    flat = completions.reshape(B * G, L)
    start = P if no_shift else P - 1
    ids = torch.cat([flat_prompts, flat if no_shift else flat[:, :-1]], dim=1)

    def logp_of(model):
        logits = model(ids)[:, start : start + L, :]
        logp = gather_log_probs(logits, flat)
        if tiled_unflatten:
            return logp.reshape(G, B, L).transpose(0, 1)
        return logp.reshape(B, G, L)

    logp = logp_of(policy)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = logp_of(ref_model)
    if mask_without_eos:
        mask = (torch.cumsum((completions == eos_id).long(), dim=-1) == 0).float()
    else:
        mask = _own_completion_mask(completions, eos_id)
    old = logp.detach() if ratio_one else logp_old
    loss, _ = grpo_loss(logp, old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    if clip_values:
        torch.nn.utils.clip_grad_value_(policy.parameters(), max_grad_norm)
    elif not no_clip and not clip_after_step:
        torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    if clip_after_step:
        torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    return loss if return_tensor else loss.item()


def w153_grpo_step_no_shift(
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
    args = (policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id)
    return _grpo_step(*args, clip_eps, kl_coef, max_grad_norm, no_shift=True)


def w154_grpo_step_no_grad_clip(
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
    args = (policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id)
    return _grpo_step(*args, clip_eps, kl_coef, max_grad_norm, no_clip=True)


def w155_grpo_step_clip_grad_value(
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
    args = (policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id)
    return _grpo_step(*args, clip_eps, kl_coef, max_grad_norm, clip_values=True)


def w156_grpo_step_mask_without_eos(
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
    args = (policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id)
    return _grpo_step(*args, clip_eps, kl_coef, max_grad_norm, mask_without_eos=True)


def w157_grpo_step_returns_tensor(
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
    args = (policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id)
    return _grpo_step(*args, clip_eps, kl_coef, max_grad_norm, return_tensor=True)


def w158_grpo_step_ratio_one(
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
    args = (policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id)
    return _grpo_step(*args, clip_eps, kl_coef, max_grad_norm, ratio_one=True)


def w159_grpo_step_tiled_unflatten(
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
    args = (policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id)
    return _grpo_step(*args, clip_eps, kl_coef, max_grad_norm, tiled_unflatten=True)


def w160_grpo_step_clip_after_step(
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
    args = (policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id)
    return _grpo_step(*args, clip_eps, kl_coef, max_grad_norm, clip_after_step=True)


def r47_grpo_step_expand_groups(
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
    """Expands the prompts along a group axis before flattening, instead of repeat_interleave."""
    from course_lib.grpo import grpo_loss
    from course_lib.policy_gradient import gather_log_probs

    B, G, L = completions.shape
    P = prompts.shape[1]
    inputs = torch.cat([prompts[:, None, :].expand(B, G, P), completions[..., :-1]], dim=-1)
    sequences = inputs.reshape(B * G, P + L - 1)
    targets = completions.reshape(B * G, L)

    def score(model):
        logits = model(sequences)[:, P - 1 :]
        return gather_log_probs(logits, targets).view(B, G, L)

    logp = score(policy)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = score(ref_model)
    mask = r45_completion_mask_cummax(completions, eos_id)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return float(loss.detach())


def r48_grpo_step_einops(
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
    from einops import rearrange, repeat

    from course_lib.grpo import grpo_loss
    from course_lib.policy_gradient import gather_log_probs

    G = completions.shape[1]
    P = prompts.shape[1]
    mask = r46_completion_mask_rows(completions, eos_id)
    optimizer.zero_grad(set_to_none=True)
    inputs = torch.cat(
        [repeat(prompts, "b p -> (b g) p", g=G), rearrange(completions[..., :-1], "b g l -> (b g) l")], dim=1
    )
    targets = rearrange(completions, "b g l -> (b g) l")
    logp = rearrange(gather_log_probs(policy(inputs)[:, P - 1 :], targets), "(b g) l -> b g l", g=G)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            ref_logits = ref_model(inputs)[:, P - 1 :]
            logp_ref = rearrange(gather_log_probs(ref_logits, targets), "(b g) l -> b g l", g=G)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(policy.parameters()), max_norm=max_grad_norm)
    optimizer.step()
    return loss.item()


ROWS += [
    _row(
        "grpo_step",
        "08",
        w153_grpo_step_no_shift,
        "Scores completion token t with the logits at position P + t (no shift), which predict token t + 1.",
    ),
    _row(
        "grpo_step",
        "08",
        w154_grpo_step_no_grad_clip,
        "Never clips the gradient norm before the step.",
    ),
    _row(
        "grpo_step",
        "08",
        w155_grpo_step_clip_grad_value,
        "Clips each gradient entry to [-max_grad_norm, max_grad_norm] (clip_grad_value_) instead of the global norm.",
    ),
    _row(
        "grpo_step",
        "08",
        w156_grpo_step_mask_without_eos,
        "Builds the mask without the EOS token (1 strictly before the first EOS).",
    ),
    _row(
        "grpo_step",
        "08",
        w157_grpo_step_returns_tensor,
        "Returns the loss tensor instead of a Python float.",
    ),
    _row(
        "grpo_step",
        "08",
        w158_grpo_step_ratio_one,
        "Passes logp.detach() as the old log-probs instead of logp_old, so every ratio is 1 and the clip never acts.",
    ),
    _row(
        "grpo_step",
        "08",
        w159_grpo_step_tiled_unflatten,
        "Flattens the groups interleaved but unflattens the log-probs as if they were tiled ((G, B, L) then "
        "transposed), so log-probs land on the wrong completions.",
    ),
    _row(
        "grpo_step",
        "08",
        w160_grpo_step_clip_after_step,
        "Clips the gradient norm after optimizer.step(), so the step uses the unclipped gradient.",
    ),
    _row("grpo_step", "08", r47_grpo_step_expand_groups),
    _row("grpo_step", "08", r48_grpo_step_einops),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 09: answer_reward (TRL's keyword call; chapter 01's math_answer_reward, as the setup cell imports it)
# ----------------------------------------------------------------------------------------------------------------------


def _completion_text(completion):
    return completion if isinstance(completion, str) else completion[-1]["content"]


def w161_answer_reward_first_message(prompts, completions, answer, **kwargs):
    from course_lib.rewards import math_answer_reward

    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(None)
            continue
        text = completion if isinstance(completion, str) else completion[0]["content"]
        rewards.append(math_answer_reward(text, str(truth)))
    return rewards


def w162_answer_reward_zero_for_missing(prompts, completions, answer, **kwargs):
    from course_lib.rewards import math_answer_reward

    return [
        0.0 if truth is None else math_answer_reward(_completion_text(c), str(truth))
        for c, truth in zip(completions, answer)
    ]


def w163_answer_reward_no_kwargs(prompts, completions, answer, completion_ids=None):
    from course_lib.rewards import math_answer_reward

    return [
        None if truth is None else math_answer_reward(_completion_text(c), str(truth))
        for c, truth in zip(completions, answer)
    ]


def w164_answer_reward_tensor(prompts, completions, answer, **kwargs):
    from course_lib.rewards import math_answer_reward

    scores = [
        float("nan") if t is None else math_answer_reward(_completion_text(c), str(t))
        for c, t in zip(completions, answer)
    ]
    return torch.tensor(scores)


def w165_answer_reward_stringified_messages(prompts, completions, answer, **kwargs):
    from course_lib.rewards import math_answer_reward

    return [None if truth is None else math_answer_reward(str(c), str(truth)) for c, truth in zip(completions, answer)]


def r49_answer_reward_index_loop(prompts, completions, answer, **kwargs):
    from course_lib.rewards import math_answer_reward

    out = []
    for i in range(len(completions)):
        if answer[i] is None:
            out.append(None)
            continue
        completion = completions[i]
        if isinstance(completion, list):
            text = completion[-1]["content"]
        else:
            text = completion
        out.append(float(math_answer_reward(text, str(answer[i]))))
    return out


def r50_answer_reward_comprehension(prompts, completions, answer, **kwargs):
    from course_lib.rewards import math_answer_reward

    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    return [None if a is None else math_answer_reward(t, str(a)) for t, a in zip(texts, answer)]


ROWS += [
    _row(
        "answer_reward",
        "09",
        w161_answer_reward_first_message,
        "Reads the first message of a conversational completion instead of the last, missing the answer after a tool "
        "call.",
    ),
    _row(
        "answer_reward",
        "09",
        w162_answer_reward_zero_for_missing,
        "Returns 0.0 instead of None where the row has no answer.",
    ),
    _row(
        "answer_reward",
        "09",
        w163_answer_reward_no_kwargs,
        "Names completion_ids but has no **kwargs, so TRL's other keyword arguments (trainer_state, log_metric, ...) "
        "raise a TypeError.",
    ),
    _row(
        "answer_reward",
        "09",
        w164_answer_reward_tensor,
        "Returns a tensor (with NaN for missing answers) instead of a list of floats and None.",
    ),
    _row(
        "answer_reward",
        "09",
        w165_answer_reward_stringified_messages,
        "Scores str(completion), so a list of messages is read as its Python repr instead of the last message's "
        "content.",
    ),
    _row("answer_reward", "09", r49_answer_reward_index_loop),
    _row("answer_reward", "09", r50_answer_reward_comprehension),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 09: completion_logps
# ----------------------------------------------------------------------------------------------------------------------


def _logps(
    model,
    sequences,
    prompt_mask,
    eos_id,
    temperature=1.0,
    *,
    no_positions=False,
    no_shift=False,
    ignore_prompt_mask=False,
    temperature_after=False,
    no_grad=False,
):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    is_eos = (completion_ids == eos_id).long()
    mask = ((torch.cumsum(is_eos, dim=-1) - is_eos) == 0).float()
    prompt_part = torch.ones_like(prompt_mask.long()) if ignore_prompt_mask else prompt_mask.long()
    attention_mask = torch.cat([prompt_part, torch.ones_like(completion_ids)], dim=1)
    kwargs = {"input_ids": sequences, "attention_mask": attention_mask}
    if not no_positions:
        kwargs["position_ids"] = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    if no_grad:
        with torch.no_grad():
            logits = model(**kwargs).logits
    else:
        logits = model(**kwargs).logits
    logits = logits[:, P:] if no_shift else logits[:, P - 1 : -1]
    if temperature_after:
        logp_all = torch.log_softmax(logits.float(), dim=-1) / temperature
    else:
        logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp_all.gather(-1, completion_ids[..., None]).squeeze(-1), mask


def w166_completion_logps_no_position_ids(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _logps(model, sequences, prompt_mask, eos_id, temperature, no_positions=True)


def w167_completion_logps_no_shift(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _logps(model, sequences, prompt_mask, eos_id, temperature, no_shift=True)


def w168_completion_logps_attends_padding(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _logps(model, sequences, prompt_mask, eos_id, temperature, ignore_prompt_mask=True)


def w169_completion_logps_temperature_after_softmax(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _logps(model, sequences, prompt_mask, eos_id, temperature, temperature_after=True)


def w170_completion_logps_no_grad(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _logps(model, sequences, prompt_mask, eos_id, temperature, no_grad=True)


def r51_completion_logps_logsumexp(model, sequences, prompt_mask, eos_id, temperature=1.0):
    B, P = prompt_mask.shape
    completion = sequences[:, P:]
    stopped_before = torch.cummax((completion == eos_id).long(), dim=-1).values
    stopped_before = torch.cat([torch.zeros_like(stopped_before[:, :1]), stopped_before[:, :-1]], dim=1)
    mask = (stopped_before == 0).to(torch.float32)
    attention_mask = torch.ones_like(sequences)
    attention_mask[:, :P] = prompt_mask
    position_ids = torch.clamp(torch.cumsum(attention_mask, dim=1) - 1, min=0)
    out = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids)
    scaled = out.logits[:, P - 1 : sequences.shape[1] - 1, :].float() / temperature
    picked = torch.take_along_dim(scaled, completion.unsqueeze(-1), dim=-1).squeeze(-1)
    return picked - torch.logsumexp(scaled, dim=-1), mask


def r52_completion_logps_row_mask_loop(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    mask = torch.ones(completion_ids.shape, dtype=torch.float32)
    for b, row in enumerate(completion_ids.tolist()):
        if eos_id in row:
            mask[b, row.index(eos_id) + 1 :] = 0.0
    full_mask = torch.cat([prompt_mask.to(sequences.dtype), torch.ones_like(completion_ids)], dim=1)
    positions = full_mask.cumsum(dim=1).sub(1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=full_mask, position_ids=positions).logits
    logp_all = F.log_softmax(logits[:, P - 1 : -1].float() / temperature, dim=-1)
    return logp_all.gather(2, completion_ids.unsqueeze(2)).squeeze(2), mask


ROWS += [
    _row(
        "completion_logps",
        "09",
        w166_completion_logps_no_position_ids,
        "Passes the attention mask but no position_ids, so a model that does not derive positions from the mask "
        "(GPT-2) numbers left-padded rows from the padding.",
    ),
    _row(
        "completion_logps",
        "09",
        w167_completion_logps_no_shift,
        "Takes logits[:, P:] instead of logits[:, P - 1:-1], so each completion token is scored by the logits that "
        "predict the next one.",
    ),
    _row(
        "completion_logps",
        "09",
        w168_completion_logps_attends_padding,
        "Uses an attention mask of all ones, ignoring prompt_mask, so left padding is attended to.",
    ),
    _row(
        "completion_logps",
        "09",
        w169_completion_logps_temperature_after_softmax,
        "Divides the log-probs by the temperature after log_softmax instead of the logits before it.",
    ),
    _row(
        "completion_logps",
        "09",
        w170_completion_logps_no_grad,
        "Runs the forward pass under torch.no_grad(), so logp carries no gradient.",
    ),
    _row("completion_logps", "09", r51_completion_logps_logsumexp),
    _row("completion_logps", "09", r52_completion_logps_row_mask_loop),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 09: grpo_config_kwargs
# ----------------------------------------------------------------------------------------------------------------------

_SWITCHES = ("algo", "adv_estimator", "policy_loss", "dynamic_sampling", "overlong_cache", "kl_placement")
_SWITCHES += ("whiten_advantages",)
_LOSS_TYPES = {"seq-mean-token-mean": "grpo", "token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}


def _config(
    cfg,
    num_processes=1,
    *,
    true_division=False,
    ignore_processes=False,
    steps_are_iterations=False,
    keep_constant=False,
    raw_clip_high=False,
):
    from course_lib.lm_rl import LMRLConfig

    defaults = LMRLConfig()
    for switch in _SWITCHES:
        if getattr(cfg, switch) != getattr(defaults, switch):
            raise ValueError(f"cfg.{switch}: GRPOConfig has no field for {getattr(cfg, switch)!r}")
    B, G, K, M = cfg.prompts_per_step, cfg.group_size, cfg.update_epochs, cfg.num_minibatches
    processes = 1 if ignore_processes else num_processes
    minibatch = B * G // M
    per_process = minibatch // processes
    micro = cfg.micro_batch_size or per_process
    if B * G % M or minibatch % processes or per_process % micro:
        raise ValueError(f"num_processes: {B * G} completions do not split evenly")
    accumulation = per_process // micro
    if true_division:
        micro = B * G / M / processes if cfg.micro_batch_size is None else cfg.micro_batch_size
        accumulation = B * G / M / processes / micro
    steps_per_round = 1 if steps_are_iterations else K * M
    schedule = cfg.lr_schedule
    if schedule == "constant" and cfg.warmup_iterations > 0 and not keep_constant:
        schedule = "constant_with_warmup"
    return {
        "num_generations": G,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": M * accumulation,
        "num_iterations": K,
        "max_steps": cfg.iterations * steps_per_round,
        "warmup_steps": cfg.warmup_iterations * steps_per_round,
        "lr_scheduler_type": schedule,
        "learning_rate": cfg.lr,
        "max_grad_norm": cfg.max_grad_norm,
        "max_completion_length": cfg.max_new_tokens,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "beta": cfg.kl_coef,
        "use_bias_correction_kl": False,
        "epsilon": cfg.clip_eps,
        "epsilon_high": cfg.clip_eps_high if raw_clip_high or cfg.clip_eps_high is not None else cfg.clip_eps,
        "loss_type": _LOSS_TYPES[cfg.loss_agg],
        "scale_rewards": "group" if cfg.normalize_std else "none",
        "mask_truncated_completions": cfg.overlong_filter,
        "seed": cfg.seed,
    }


def w171_grpo_config_kwargs_true_division(cfg, num_processes=1):
    return _config(cfg, num_processes, true_division=True)


def w172_grpo_config_kwargs_ignores_processes(cfg, num_processes=1):
    return _config(cfg, num_processes, ignore_processes=True)


def w173_grpo_config_kwargs_steps_are_rounds(cfg, num_processes=1):
    return _config(cfg, num_processes, steps_are_iterations=True)


def w174_grpo_config_kwargs_constant_with_warmup_dropped(cfg, num_processes=1):
    return _config(cfg, num_processes, keep_constant=True)


def w175_grpo_config_kwargs_raw_clip_high(cfg, num_processes=1):
    return _config(cfg, num_processes, raw_clip_high=True)


def r53_grpo_config_kwargs_step_by_step(cfg, num_processes=1):
    from course_lib.lm_rl import LMRLConfig

    reference = LMRLConfig()
    for name in ("algo", "adv_estimator", "policy_loss", "dynamic_sampling", "overlong_cache"):
        if getattr(cfg, name) != getattr(reference, name):
            raise ValueError(f"cfg.{name}: no GRPOConfig field for {getattr(cfg, name)!r}")
    for name in ("kl_placement", "whiten_advantages"):
        if getattr(cfg, name) != getattr(reference, name):
            raise ValueError(f"cfg.{name}: no GRPOConfig field for {getattr(cfg, name)!r}")
    completions = cfg.prompts_per_step * cfg.group_size
    if completions % cfg.num_minibatches:
        raise ValueError(f"num_processes: {completions} completions into {cfg.num_minibatches} minibatches")
    minibatch = completions // cfg.num_minibatches
    if minibatch % num_processes:
        raise ValueError(f"num_processes: a minibatch of {minibatch} over {num_processes} processes")
    share = minibatch // num_processes
    micro = share if cfg.micro_batch_size is None else cfg.micro_batch_size
    if share % micro:
        raise ValueError(f"num_processes: {share} completions in micro-batches of {micro}")
    accumulation = share // micro
    optimiser_steps = cfg.update_epochs * cfg.num_minibatches
    scheduler = cfg.lr_schedule
    if scheduler == "constant" and cfg.warmup_iterations:
        scheduler = "constant_with_warmup"
    kwargs = dict(
        num_generations=cfg.group_size,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=cfg.num_minibatches * accumulation,
        num_iterations=cfg.update_epochs,
        max_steps=cfg.iterations * optimiser_steps,
        warmup_steps=cfg.warmup_iterations * optimiser_steps,
        lr_scheduler_type=scheduler,
        learning_rate=cfg.lr,
        max_grad_norm=cfg.max_grad_norm,
        max_completion_length=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        beta=cfg.kl_coef,
        use_bias_correction_kl=False,
        epsilon=cfg.clip_eps,
    )
    kwargs["epsilon_high"] = cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high
    kwargs["loss_type"] = {"seq-mean-token-mean": "grpo", "token-mean": "dapo"}.get(cfg.loss_agg, "dr_grpo")
    kwargs["scale_rewards"] = "group" if cfg.normalize_std else "none"
    kwargs["mask_truncated_completions"] = cfg.overlong_filter
    kwargs["seed"] = cfg.seed
    return kwargs


def r54_grpo_config_kwargs_divmod(cfg, num_processes=1):
    from dataclasses import asdict

    from course_lib.lm_rl import LMRLConfig

    given, grpo_defaults = asdict(cfg), asdict(LMRLConfig())
    refused = [name for name in _SWITCHES if given[name] != grpo_defaults[name]]
    if refused:
        raise ValueError(f"cfg.{refused[0]}: TRL's GRPOConfig cannot express {given[refused[0]]!r}")
    minibatch, left = divmod(cfg.prompts_per_step * cfg.group_size, cfg.num_minibatches)
    per_process, left_2 = divmod(minibatch, num_processes)
    micro = cfg.micro_batch_size if cfg.micro_batch_size else per_process
    accumulation, left_3 = divmod(per_process, micro)
    if left or left_2 or left_3:
        raise ValueError("num_processes: the batch does not split evenly over minibatches, processes and micro-batches")
    per_round = cfg.update_epochs * cfg.num_minibatches
    warm = cfg.warmup_iterations > 0
    out = {
        "num_generations": cfg.group_size,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": cfg.num_minibatches * accumulation,
        "num_iterations": cfg.update_epochs,
        "max_steps": cfg.iterations * per_round,
        "warmup_steps": cfg.warmup_iterations * per_round,
        "lr_scheduler_type": "constant_with_warmup" if cfg.lr_schedule == "constant" and warm else cfg.lr_schedule,
    }
    out.update(learning_rate=cfg.lr, max_grad_norm=cfg.max_grad_norm, max_completion_length=cfg.max_new_tokens)
    out.update(temperature=cfg.temperature, top_p=cfg.top_p, beta=cfg.kl_coef, use_bias_correction_kl=False)
    out.update(epsilon=cfg.clip_eps, epsilon_high=cfg.clip_eps_high or cfg.clip_eps)
    out.update(loss_type=_LOSS_TYPES[cfg.loss_agg], scale_rewards="group" if cfg.normalize_std else "none")
    out.update(mask_truncated_completions=cfg.overlong_filter, seed=cfg.seed)
    return out


ROWS += [
    _row(
        "grpo_config_kwargs",
        "09",
        w171_grpo_config_kwargs_true_division,
        "Computes the per-device batch size and accumulation steps with / instead of //, so the counts are floats.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w172_grpo_config_kwargs_ignores_processes,
        "Ignores num_processes: the per-device batch is the whole minibatch, as if there were one process.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w173_grpo_config_kwargs_steps_are_rounds,
        "Sets max_steps and warmup_steps to the number of rounds instead of optimiser steps (times update_epochs * "
        "num_minibatches).",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w174_grpo_config_kwargs_constant_with_warmup_dropped,
        "Passes lr_schedule 'constant' through even with a warm-up, where HF's 'constant' ignores the warm-up.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w175_grpo_config_kwargs_raw_clip_high,
        "Passes clip_eps_high as epsilon_high even when it is None, instead of falling back to clip_eps.",
    ),
    _row("grpo_config_kwargs", "09", r53_grpo_config_kwargs_step_by_step),
    _row("grpo_config_kwargs", "09", r54_grpo_config_kwargs_divmod),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 10: pass_at_k
# ----------------------------------------------------------------------------------------------------------------------


def _as_float64(*values):
    return torch.broadcast_tensors(*(torch.as_tensor(v, dtype=torch.float64) for v in values))


def _product_pass_at_k(n, c, k, first_offset=1):
    j = torch.arange(int(c.max()) if c.numel() else 0, dtype=torch.float64)
    i = (n - c + first_offset)[..., None] + j
    factors = torch.where(j < c[..., None], 1 - k[..., None] / i, torch.ones((), dtype=torch.float64))
    return 1 - factors.prod(dim=-1)


def w176_pass_at_k_plug_in(n, c, k):
    n, c, k = _as_float64(n, c, k)
    return 1 - (1 - c / n) ** k


def w177_pass_at_k_no_k_above_n(n, c, k):
    n, c, k = _as_float64(n, c, k)
    estimate = _product_pass_at_k(n, c, k)
    return torch.where((n - c < k) & (k <= n), torch.ones_like(estimate), estimate)


def w178_pass_at_k_default_dtype(n, c, k):
    n, c, k = _as_float64(n, c, k)
    estimate = _product_pass_at_k(n, c, k)
    return torch.where(n - c < k, (c > 0).double(), estimate).to(torch.get_default_dtype())


def w179_pass_at_k_range_off_by_one(n, c, k):
    n, c, k = _as_float64(n, c, k)
    estimate = _product_pass_at_k(n, c, k, first_offset=0)  # i = n - c, ..., n - 1
    return torch.where(n - c < k, (c > 0).double(), estimate)


def w180_pass_at_k_tensor_only(n, c, k):
    n, c, k = torch.broadcast_tensors(n.double(), c.double(), k.double())
    estimate = _product_pass_at_k(n, c, k)
    return torch.where(n - c < k, (c > 0).double(), estimate)


def r55_pass_at_k_exact_binomials(n, c, k):
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(v) for v in (n, c, k)))
    out = []
    for n_i, c_i, k_i in zip(n.reshape(-1).tolist(), c.reshape(-1).tolist(), k.reshape(-1).tolist()):
        n_i, c_i, k_i = int(n_i), int(c_i), int(k_i)
        if k_i > n_i:
            out.append(1.0 if c_i > 0 else 0.0)
        else:
            out.append(1.0 - math.comb(n_i - c_i, k_i) / math.comb(n_i, k_i))  # exact integers, one rounding
    return torch.tensor(out, dtype=torch.float64).reshape(n.shape)


def r56_pass_at_k_log_space(n, c, k):
    n, c, k = _as_float64(n, c, k)
    C = int(c.max()) if c.numel() else 0
    offsets = torch.arange(C, dtype=torch.float64)
    i = (n - c + 1).unsqueeze(-1) + offsets
    terms = torch.log1p(-k.unsqueeze(-1) / i)
    terms = torch.where(offsets < c.unsqueeze(-1), terms, torch.zeros((), dtype=torch.float64))
    all_wrong = torch.exp(terms.sum(dim=-1))
    certain = n - c < k
    return torch.where(certain, (c > 0).to(torch.float64), 1 - torch.where(certain, 0.0, all_wrong))


ROWS += [
    _row(
        "pass_at_k",
        "10",
        w176_pass_at_k_plug_in,
        "Returns the plug-in estimate 1 - (1 - c/n)^k (drawing with replacement) instead of Chen et al.'s unbiased "
        "one.",
    ),
    _row(
        "pass_at_k",
        "10",
        w177_pass_at_k_no_k_above_n,
        "Handles n - c < k only when k <= n, so k > n falls through to the product, whose factors are then negative.",
    ),
    _row(
        "pass_at_k",
        "10",
        w178_pass_at_k_default_dtype,
        "Casts the result to the default dtype (float32) instead of returning float64.",
    ),
    _row(
        "pass_at_k",
        "10",
        w179_pass_at_k_range_off_by_one,
        "Runs the product over i = n - c, ..., n - 1 instead of i = n - c + 1, ..., n.",
    ),
    _row(
        "pass_at_k",
        "10",
        w180_pass_at_k_tensor_only,
        "Calls .double() on its arguments, so Python ints (which the docstring allows) raise AttributeError.",
    ),
    _row("pass_at_k", "10", r55_pass_at_k_exact_binomials),
    _row("pass_at_k", "10", r56_pass_at_k_log_space),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 10: aggregation_token_weight
# ----------------------------------------------------------------------------------------------------------------------


def _token_weight(
    length,
    mode,
    max_len=None,
    *,
    keep_empty=False,
    max_len_from_shape=False,
    first_axis_n=False,
    integer_result=False,
    no_n=False,
):
    o = length.to(length.dtype if length.is_floating_point() else torch.get_default_dtype())
    N = o.shape[0] if first_axis_n else o.numel()
    if max_len is None:
        max_len = length.shape[-1] if max_len_from_shape else o.max()
    if mode == "seq-mean-token-mean":
        w = 1 / ((1 if no_n else N) * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    elif mode == "seq-mean-token-sum-norm":
        w = torch.ones_like(o) / (N * max_len)
    else:
        raise ValueError(f"mode: expected one of {_AGG_MODES}, got {mode!r}")
    if not keep_empty:
        w = torch.where(o > 0, w, torch.zeros_like(w))
    return w.to(length.dtype) if integer_result else w


def w181_aggregation_token_weight_empty_weighted(length, mode, max_len=None):
    return _token_weight(length, mode, max_len, keep_empty=True)


def w182_aggregation_token_weight_max_len_is_shape(length, mode, max_len=None):
    return _token_weight(length, mode, max_len, max_len_from_shape=True)


def w183_aggregation_token_weight_n_first_axis(length, mode, max_len=None):
    return _token_weight(length, mode, max_len, first_axis_n=True)


def w184_aggregation_token_weight_integer_dtype(length, mode, max_len=None):
    return _token_weight(length, mode, max_len, integer_result=True)


def w185_aggregation_token_weight_no_n(length, mode, max_len=None):
    return _token_weight(length, mode, max_len, no_n=True)


def r57_aggregation_token_weight_autograd(length, mode, max_len=None):
    """Builds aggregate_loss's reduction on a tensor of ones and reads each token's weight from its gradient."""
    if mode not in _AGG_MODES:
        raise ValueError(f"mode: expected one of {_AGG_MODES}, got {mode!r}")
    dtype = length.dtype if length.is_floating_point() else torch.get_default_dtype()
    lengths = length.reshape(-1).to(dtype)
    N = lengths.numel()
    T = int(lengths.max().item()) if N else 0
    L = lengths.max() if max_len is None else max_len
    per_token = torch.ones(N, max(T, 1), dtype=dtype, requires_grad=True)
    valid = torch.arange(max(T, 1)) < lengths[:, None]
    kept = torch.where(valid, per_token, torch.zeros_like(per_token))
    if mode == "token-mean":
        loss = kept.sum() / valid.sum()
    elif mode == "seq-mean-token-mean":
        loss = (kept.sum(dim=1) / lengths.clamp(min=1)).mean()
    else:
        loss = (kept.sum(dim=1) / L).mean()
    (grad,) = torch.autograd.grad(loss, per_token)
    weights = grad[:, 0].clone()
    weights[lengths == 0] = 0.0
    return weights.reshape(length.shape)


def r58_aggregation_token_weight_table(length, mode, max_len=None):
    dtype = length.dtype if length.is_floating_point() else torch.get_default_dtype()
    o = length.to(dtype)
    n_responses = o.numel()
    nonempty = o > 0
    if mode == "token-mean":
        per_response = torch.full_like(o, 1.0) / o.sum()
    elif mode == "seq-mean-token-mean":
        per_response = 1.0 / (n_responses * torch.where(nonempty, o, torch.ones_like(o)))
    elif mode == "seq-mean-token-sum-norm":
        constant = o.max() if max_len is None else torch.as_tensor(max_len, dtype=dtype)
        per_response = torch.full_like(o, 1.0) / (n_responses * constant)
    else:
        raise ValueError(f"mode: expected one of {_AGG_MODES}, got {mode!r}")
    return per_response * nonempty.to(dtype)


ROWS += [
    _row(
        "aggregation_token_weight",
        "10",
        w181_aggregation_token_weight_empty_weighted,
        "Gives a response of length 0 the same weight as the others in the token-mean and Dr. GRPO modes instead of 0.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w182_aggregation_token_weight_max_len_is_shape,
        "Takes max_len=None as length.shape[-1] (the number of entries on the last axis) instead of the longest "
        "length.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w183_aggregation_token_weight_n_first_axis,
        "Counts N as length.shape[0] instead of every entry of length, wrong for a [B, G] table of lengths.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w184_aggregation_token_weight_integer_dtype,
        "Casts the weights back to length's dtype, so integer lengths give integer weights (all 0).",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w185_aggregation_token_weight_no_n,
        "Gives the per-sequence mean's tokens 1 / |o_i|, leaving out the 1 / N of the mean over responses.",
    ),
    _row("aggregation_token_weight", "10", r57_aggregation_token_weight_autograd),
    _row("aggregation_token_weight", "10", r58_aggregation_token_weight_table),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 10: completion_style
# ----------------------------------------------------------------------------------------------------------------------


def _style(
    text,
    n_digits=3,
    *,
    whole_text=False,
    two_digit_totals=False,
    any_count=False,
    empty_filler=False,
    digits_optional=False,
):
    if whole_text:
        if not text.endswith("$"):
            return "malformed"
        body = text[:-1]
    else:
        body, eos, _ = text.partition("$")
        if not eos:
            return "malformed"
    if re.fullmatch(r"[0-9]+", body):
        return "direct"
    tail = "[0-9]*" if digits_optional else "[0-9]+"
    inside = r"[^\[\]]*" if empty_filler else r"[^\[\]]+"
    m = re.fullmatch(r"\[(" + inside + r")\](" + tail + ")", body)
    if m is None:
        return "malformed"
    content = m.group(1)
    if re.fullmatch(r"\.*" if empty_filler else r"\.+", content):
        return "filler"
    totals = content.split(",")
    total = r"[0-9]{1,2}" if two_digit_totals else r"1?[0-9]"
    if (any_count or len(totals) == n_digits) and all(re.fullmatch(total, t) for t in totals):
        return "scratchpad"
    return "malformed"


def w186_completion_style_whole_text(text, n_digits=3):
    return _style(text, n_digits, whole_text=True)


def w187_completion_style_two_digit_totals(text, n_digits=3):
    return _style(text, n_digits, two_digit_totals=True)


def w188_completion_style_any_number_of_totals(text, n_digits=3):
    return _style(text, n_digits, any_count=True)


def w189_completion_style_empty_bracket_filler(text, n_digits=3):
    return _style(text, n_digits, empty_filler=True)


def w190_completion_style_digits_optional(text, n_digits=3):
    return _style(text, n_digits, digits_optional=True)


def r59_completion_style_string_methods(text, n_digits=3):
    if "$" not in text:
        return "malformed"
    body = text[: text.index("$")]
    if body.isdigit() and body.isascii():
        return "direct"
    if not body.startswith("[") or body.count("[") != 1 or body.count("]") != 1:
        return "malformed"
    close = body.index("]")
    content, answer = body[1:close], body[close + 1 :]
    if not content or not (answer.isdigit() and answer.isascii()):
        return "malformed"
    if set(content) == {"."}:
        return "filler"
    parts = content.split(",")
    if len(parts) != n_digits:
        return "malformed"
    for part in parts:
        if not (part.isdigit() and part.isascii()) or len(part) > 2:
            return "malformed"
        if len(part) == 2 and part[0] != "1":
            return "malformed"
    return "scratchpad"


def r60_completion_style_one_regex_per_label(text, n_digits=3):
    body = text.split("$", 1)[0]
    if "$" not in text:
        return "malformed"
    total = r"(?:1[0-9]|[0-9])"
    patterns = {
        "direct": r"[0-9]+",
        "scratchpad": r"\[" + ",".join([total] * n_digits) + r"\][0-9]+",
        "filler": r"\[\.+\][0-9]+",
    }
    for label, pattern in patterns.items():
        if re.fullmatch(pattern, body):
            return label
    return "malformed"


ROWS += [
    _row(
        "completion_style",
        "10",
        w186_completion_style_whole_text,
        "Requires the text to end with '$' and reads all of it, instead of reading only up to the first '$' and "
        "ignoring what follows.",
    ),
    _row(
        "completion_style",
        "10",
        w187_completion_style_two_digit_totals,
        "Accepts any total of one or two digits (up to 99, and leading zeros) instead of 0 to 19 without leading "
        "zeros.",
    ),
    _row(
        "completion_style",
        "10",
        w188_completion_style_any_number_of_totals,
        "Does not check that there are exactly n_digits totals.",
    ),
    _row(
        "completion_style",
        "10",
        w189_completion_style_empty_bracket_filler,
        "Lets the dots be zero or more, so an empty bracket '[]1045$' is filler instead of malformed.",
    ),
    _row(
        "completion_style",
        "10",
        w190_completion_style_digits_optional,
        "Lets the digits after the bracket be empty, so '[15,14,10]$' is a scratchpad instead of malformed.",
    ),
    _row("completion_style", "10", r59_completion_style_string_methods),
    _row("completion_style", "10", r60_completion_style_one_regex_per_label),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 10: style_share
# ----------------------------------------------------------------------------------------------------------------------


def w191_style_share_flat_list_count(labels, style):
    labels = list(labels)
    if not labels:
        raise ValueError("labels: no completion, so no share")
    return labels.count(style) / len(labels)


def w192_style_share_empty_is_zero(labels, style):
    flat = np.asarray(labels).reshape(-1)
    if flat.size == 0:
        return 0.0
    return float((flat == style).mean())


def w193_style_share_without_malformed(labels, style):
    flat = np.asarray(labels).reshape(-1)
    if flat.size == 0:
        raise ValueError("labels: no completion, so no share")
    well_formed = flat[flat != "malformed"]
    return float((well_formed == style).sum() / max(well_formed.size, 1))


def r61_style_share_recursive(labels, style):
    def walk(x):
        if isinstance(x, str):
            yield x
        else:
            for item in x:
                yield from walk(item)

    every = list(walk(labels.tolist() if isinstance(labels, np.ndarray) else labels))
    if not every:
        raise ValueError("labels: empty, no completion to share")
    return sum(label == style for label in every) / len(every)


def r62_style_share_ravel(labels, style):
    array = np.array(labels, dtype=object).ravel()
    if len(array) == 0:
        raise ValueError("labels: expected at least one completion")
    return float(np.count_nonzero(array == style)) / len(array)


ROWS += [
    _row(
        "style_share",
        "10",
        w191_style_share_flat_list_count,
        "Counts with list.count and len, so a nested [B][G] list or a 2-D array is counted per prompt, not per "
        "completion.",
    ),
    _row(
        "style_share",
        "10",
        w192_style_share_empty_is_zero,
        "Returns 0.0 for an empty list of labels instead of raising ValueError.",
    ),
    _row(
        "style_share",
        "10",
        w193_style_share_without_malformed,
        "Leaves malformed completions out of the denominator.",
    ),
    _row("style_share", "10", r61_style_share_recursive),
    _row("style_share", "10", r62_style_share_ravel),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 11: rloo_advantages
# ----------------------------------------------------------------------------------------------------------------------


def w194_rloo_advantages_divides_by_G(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    others_mean = (rewards.sum(dim=-1, keepdim=True) - rewards) / G
    return rewards - others_mean


def w195_rloo_advantages_group_of_one_nan(rewards):
    G = rewards.shape[-1]
    others_mean = (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1)
    return rewards - others_mean


def w196_rloo_advantages_batch_others(rewards):
    B = rewards.shape[0]
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    others_mean = (rewards.sum(dim=0, keepdim=True) - rewards) / (B - 1)  # the other prompts' responses
    return rewards - others_mean


def w197_rloo_advantages_raw_reward_alone(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return rewards.clone()  # verl: no baseline, the reward itself
    others_mean = (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1)
    return rewards - others_mean


def w198_rloo_advantages_divided_by_std(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    adv = rewards - (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1)
    return adv / (rewards.std(dim=-1, keepdim=True) + 1e-6)


def r63_rloo_advantages_rescaled_grpo(rewards):
    G = rewards.shape[1]
    if G < 2:
        return torch.zeros_like(rewards)
    return G / (G - 1) * (rewards - rewards.mean(dim=1, keepdim=True))


def r64_rloo_advantages_explicit_others(rewards):
    B, G = rewards.shape
    out = torch.zeros_like(rewards)
    if G == 1:
        return out
    for i in range(G):
        others = torch.cat([rewards[:, :i], rewards[:, i + 1 :]], dim=1)
        out[:, i] = rewards[:, i] - others.mean(dim=1)
    return out


ROWS += [
    _row(
        "rloo_advantages",
        "11",
        w194_rloo_advantages_divides_by_G,
        "Divides the sum of the other rewards by G instead of G - 1.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w195_rloo_advantages_group_of_one_nan,
        "Has no case for G == 1, where it divides 0 by 0 and returns NaN.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w196_rloo_advantages_batch_others,
        "Leaves one out along dim=0, so the baseline is the same response slot of the other prompts instead of the "
        "other responses to the same prompt.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w197_rloo_advantages_raw_reward_alone,
        "Returns the raw reward for a group of one (verl's convention) instead of 0.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w198_rloo_advantages_divided_by_std,
        "Divides the leave-one-out advantage by the group std, as GRPO does, although RLOO divides by nothing.",
    ),
    _row("rloo_advantages", "11", r63_rloo_advantages_rescaled_grpo),
    _row("rloo_advantages", "11", r64_rloo_advantages_explicit_others),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 11: gspo_sequence_log_ratio
# ----------------------------------------------------------------------------------------------------------------------


def w199_gspo_sequence_log_ratio_sum(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    return log_ratio.sum(dim=-1)  # log of the sequence ratio pi(y|x) / pi_old(y|x)


def w200_gspo_sequence_log_ratio_over_T(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    return log_ratio.mean(dim=-1)


def w201_gspo_sequence_log_ratio_old_not_detached(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old, torch.zeros_like(logp))
    return log_ratio.sum(dim=-1) / valid.sum(dim=-1).clamp(min=1)


def w202_gspo_sequence_log_ratio_empty_nan(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    return log_ratio.sum(dim=-1) / valid.sum(dim=-1)


def w203_gspo_sequence_log_ratio_batch_token_mean(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    shared = log_ratio.sum() / valid.sum().clamp(min=1)  # DAPO-style token mean over the batch
    return shared.expand(logp.shape[:-1])


def r65_gspo_sequence_log_ratio_masked_fill(logp, logp_old, mask):
    keep = mask != 0
    per_token = (logp - logp_old.detach()).masked_fill(~keep, 0.0)
    lengths = keep.sum(dim=-1)
    return per_token.sum(dim=-1) / torch.maximum(lengths, torch.ones_like(lengths))


def r66_gspo_sequence_log_ratio_separate_sums(logp, logp_old, mask):
    valid = mask.bool()
    zero = torch.zeros_like(logp)
    new_total = torch.where(valid, logp, zero).sum(dim=-1)
    old_total = torch.where(valid, logp_old.detach(), zero).sum(dim=-1)
    n = valid.sum(dim=-1).clamp(min=1).to(logp.dtype)
    return (new_total - old_total) / n


ROWS += [
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w199_gspo_sequence_log_ratio_sum,
        "Sums the token log ratios (the log of the whole sequence's ratio) without the 1/|y_i| of the geometric mean.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w200_gspo_sequence_log_ratio_over_T,
        "Divides by the padded length T instead of the number of valid tokens.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w201_gspo_sequence_log_ratio_old_not_detached,
        "Does not detach logp_old, so a gradient flows into it.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w202_gspo_sequence_log_ratio_empty_nan,
        "Divides by the raw number of valid tokens, so an empty response gives 0/0 = NaN.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w203_gspo_sequence_log_ratio_batch_token_mean,
        "Takes one token mean over the whole batch and gives every response that same log ratio.",
    ),
    _row("gspo_sequence_log_ratio", "11", r65_gspo_sequence_log_ratio_masked_fill),
    _row("gspo_sequence_log_ratio", "11", r66_gspo_sequence_log_ratio_separate_sums),
]


# ----------------------------------------------------------------------------------------------------------------------
# Chapter 11: cispo_loss
# ----------------------------------------------------------------------------------------------------------------------


def w204_cispo_loss_weight_not_detached(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high)
    return -weight * adv.detach() * logp


def w205_cispo_loss_symmetric_floor(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    eps_low = clip_eps_high if clip_eps is None else clip_eps  # "eps_low defaults to eps_high", as in PPO
    weight = torch.clamp(ratio, 1.0 - eps_low, 1.0 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def w206_cispo_loss_trl_cap(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=clip_eps_high).detach()  # TRL's epsilon_high is the cap
    return -weight * adv.detach() * logp


def w207_cispo_loss_adv_not_detached(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high).detach()
    return -weight * adv * logp


def w208_cispo_loss_reduced(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high).detach()
    return (-weight * adv.detach() * logp).mean()


def w209_cispo_loss_times_ratio(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high).detach()
    return -weight * adv.detach() * ratio  # the importance-sampled objective, as in PPO


def r67_cispo_loss_where(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    with torch.no_grad():
        ratio = (logp - logp_old).exp()
        cap = torch.full_like(ratio, 1.0 + clip_eps_high)
        weight = torch.where(ratio > cap, cap, ratio)
        if clip_eps is not None:
            floor = torch.full_like(ratio, 1.0 - clip_eps)
            weight = torch.where(weight < floor, floor, weight)
    return -(weight * adv.detach()) * logp


def r68_cispo_loss_min_max(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp.detach() - logp_old.detach())
    weight = torch.minimum(ratio, torch.tensor(1.0 + clip_eps_high, dtype=ratio.dtype))
    if clip_eps is not None:
        weight = torch.maximum(weight, torch.tensor(1.0 - clip_eps, dtype=ratio.dtype))
    return logp * (-weight * adv.detach())


ROWS += [
    _row(
        "cispo_loss",
        "11",
        w204_cispo_loss_weight_not_detached,
        "Does not stop the gradient of the clipped weight, so the unclipped tokens get an extra term from the ratio.",
    ),
    _row(
        "cispo_loss",
        "11",
        w205_cispo_loss_symmetric_floor,
        "Floors the weight at 1 - clip_eps_high when clip_eps is None, instead of applying no lower bound.",
    ),
    _row(
        "cispo_loss",
        "11",
        w206_cispo_loss_trl_cap,
        "Caps the weight at clip_eps_high itself (TRL's convention) instead of 1 + clip_eps_high.",
    ),
    _row(
        "cispo_loss",
        "11",
        w207_cispo_loss_adv_not_detached,
        "Does not detach adv, so a gradient flows into the advantages.",
    ),
    _row(
        "cispo_loss",
        "11",
        w208_cispo_loss_reduced,
        "Returns the mean over tokens instead of the per-token loss.",
    ),
    _row(
        "cispo_loss",
        "11",
        w209_cispo_loss_times_ratio,
        "Multiplies the weight and advantage by the ratio instead of by logp, so the gradient carries an extra factor "
        "of the ratio.",
    ),
    _row("cispo_loss", "11", r67_cispo_loss_where),
    _row("cispo_loss", "11", r68_cispo_loss_min_max),
]
