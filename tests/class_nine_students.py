"""A ninth class of students, written blind: from the exercise notebooks' text, stubs and docstrings, the reference
modules in course_lib and the papers, without reading any check, its catalogue of mistakes or an earlier class.

The students this time read a paper and wrote its notation literally, wrote defensive code that silently changes
behaviour, batched wrongly, got a mask subtly wrong, handled only the docstring's common case, mis-used a torch API or
broke the gradient. Each wrong answer makes exactly one mistake, stated in its row; each right answer was compared with
the solution on random inputs of every allowed shape and dtype before the checks were ever run on it.
"""

import re

import numpy as np
import torch
import torch.nn.functional as F


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
