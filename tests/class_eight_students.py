"""An eighth class of students, written blind: answers, right and wrong, to every exercise of chapters 00 to 11.

The class was written from the exercise texts, their stubs and docstrings, the solution notebooks and the reference
modules they mirror, without reading the checks, their catalogues of mistakes, the mutants or any earlier class's
students. The students are new people: some ask an LLM assistant and paste a plausible answer with one subtle slip;
some port from JAX, numpy or their own homework of another course and keep its conventions (time-major arrays,
keepdims, integer dtypes, Python lists); some transcribe the lecture's formula with one index, sign, power or
normalisation wrong; some vectorise a loop (cumsum, flip, roll, scatter, masked_fill, where) and get one boundary
wrong; some handle an edge case the docstring states (empty mask, all-equal group, terminal step, padding value,
optional argument) wrongly, or mishandle dtype, in-place operations, ``.detach()``, ``torch.no_grad()`` or
``.item()``; some return the right values in the wrong form (shape, dtype, Python float or tensor, list).

Each wrong answer (``wNN_<exercise>_<mistake>``) makes exactly one mistake, stated in one sentence in its row's
``mistake``; each right answer (``rNN_<exercise>_<style>``) is right on every input its docstring allows, written
in another style than the solution's. A student is a function with the exercise's signature (for chapter 05's
``PPOLoss``, a class), called as the exercise's check cell calls it: ``check_x(student)``.

``tests/run_class_four.py --students class_eight_students`` runs every exercise's check on every student, once,
and stores what each check said in ``tests/class_eight_first_sight.json``.
This module holds no tests (pytest does not collect it).
"""

import collections
import math
import re
from functools import reduce

import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import nn

from course_lib import grpo
from course_lib.grpo import grpo_loss
from course_lib.lm_rl import LMRLConfig
from course_lib.policy_gradient import gather_log_probs
from course_lib.rewards import math_answer_reward


def _row(exercise: str, chapter: str, student, truth: str | None = None) -> dict:
    """One student's answer to one exercise; ``truth`` is None for a right answer, else what the student did wrong."""
    return {"exercise": exercise, "chapter": chapter, "student": student, "right": truth is None, "mistake": truth}


ROWS = []


# ---------------------------------------------------------------------------
# Chapter 00: discounted_return
# ---------------------------------------------------------------------------


def w01_discounted_return_python_float_for_one_episode(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    returns = (rewards * discounts).sum(dim=-1)
    if returns.dim() == 0:
        return returns.item()  # a single episode: just the number
    return returns


def w02_discounted_return_numpy_polyval(rewards, gamma):
    # Horner's rule from numpy: polyval(p, x) = p[0] x^(n-1) + ... + p[-1], so reverse time.
    coefficients = np.flip(rewards.detach().cpu().numpy(), axis=-1)
    if coefficients.ndim == 1:
        return np.polyval(coefficients, gamma)
    flat = coefficients.reshape(-1, coefficients.shape[-1])
    return np.array([np.polyval(row, gamma) for row in flat]).reshape(coefficients.shape[:-1])


def w03_discounted_return_keepdims(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    return (rewards * discounts).sum(dim=-1, keepdim=True)  # (..., 1), as in my old course's helpers


def w04_discounted_return_single_step_returned_as_is(rewards, gamma):
    T = rewards.shape[-1]
    if T == 1:
        return rewards  # one step: nothing to discount
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    return (rewards * discounts).sum(dim=-1)


def w05_discounted_return_scales_rewards_in_place(rewards, gamma):
    T = rewards.shape[-1]
    rewards *= gamma ** torch.arange(T, dtype=rewards.dtype)  # saves a temporary
    return rewards.sum(dim=-1)


def r01_discounted_return_reduce_horner(rewards, gamma):
    steps = rewards.unbind(dim=-1)  # T tensors of shape (...)
    # G = r_0 + gamma (r_1 + gamma (r_2 + ...)), folded from the last step backwards
    return reduce(lambda later, r_t: r_t + gamma * later, reversed(steps), torch.zeros_like(steps[0]))


def r02_discounted_return_matmul(rewards, gamma):
    weights = torch.tensor([gamma**t for t in range(rewards.shape[-1])], dtype=torch.float64)
    return rewards @ weights.to(rewards.dtype)  # (..., T) @ (T,) -> (...)


ROWS += [
    _row(
        "discounted_return",
        "00",
        w01_discounted_return_python_float_for_one_episode,
        "Returns a Python float for a single episode instead of a 0-dimensional tensor.",
    ),
    _row(
        "discounted_return",
        "00",
        w02_discounted_return_numpy_polyval,
        "Computes the returns with numpy's polyval and returns a numpy array (or numpy float), not a tensor.",
    ),
    _row(
        "discounted_return",
        "00",
        w03_discounted_return_keepdims,
        "Sums over time with keepdim=True, so it returns shape (..., 1) instead of (...).",
    ),
    _row(
        "discounted_return",
        "00",
        w04_discounted_return_single_step_returned_as_is,
        "Returns the rewards tensor itself for single-step episodes, keeping the time axis of length 1.",
    ),
    _row(
        "discounted_return",
        "00",
        w05_discounted_return_scales_rewards_in_place,
        "Multiplies the caller's rewards by the discounts in place, changing the input.",
    ),
    _row("discounted_return", "00", r01_discounted_return_reduce_horner),
    _row("discounted_return", "00", r02_discounted_return_matmul),
]


# ---------------------------------------------------------------------------
# Chapter 00: reward_to_go
# ---------------------------------------------------------------------------


def w06_reward_to_go_rescaled_cumsum(rewards, gamma):
    T = rewards.shape[-1]
    powers = gamma ** torch.arange(T, dtype=rewards.dtype)  # gamma^k
    # sum_{k >= t} gamma^k r_k, then divide by gamma^t: no Python loop
    tail_sums = torch.flip(torch.cumsum(torch.flip(rewards * powers, dims=[-1]), dim=-1), dims=[-1])
    return tail_sums / powers


def w07_reward_to_go_accumulates_in_rewards(rewards, gamma):
    for t in reversed(range(rewards.shape[-1] - 1)):
        rewards[..., t] += gamma * rewards[..., t + 1]
    return rewards


def w08_reward_to_go_time_major(rewards, gamma):
    # my RL homework stored rollouts as (T, batch): time is the first axis
    returns = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def w09_reward_to_go_stacked_on_first_axis(rewards, gamma):
    returns = []
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        returns.append(running)
    return torch.stack(returns[::-1])  # one entry per step


def w10_reward_to_go_strict_upper_triangle(rewards, gamma):
    T = rewards.shape[-1]
    steps = torch.arange(T, dtype=rewards.dtype)
    exponents = (steps[None, :] - steps[:, None]).clamp(min=0)  # [t, k] = k - t
    weights = torch.triu(gamma**exponents, diagonal=1)  # later rewards only
    return rewards @ weights.T


def r03_reward_to_go_masked_power_matrix(rewards, gamma):
    T = rewards.shape[-1]
    t = torch.arange(T)
    offset = t[None, :] - t[:, None]  # [t, k] = k - t
    weights = torch.where(
        offset >= 0, torch.full((T, T), float(gamma), dtype=torch.float64) ** offset.clamp(min=0), 0.0
    )
    return torch.einsum("...k,tk->...t", rewards, weights.to(rewards.dtype))


def r04_reward_to_go_list_then_stack_last(rewards, gamma):
    columns = [None] * rewards.shape[-1]
    later = torch.zeros(rewards.shape[:-1], dtype=rewards.dtype)
    for t in range(rewards.shape[-1] - 1, -1, -1):
        later = rewards[..., t] + gamma * later
        columns[t] = later
    return torch.stack(columns, dim=-1)


ROWS += [
    _row(
        "reward_to_go",
        "00",
        w06_reward_to_go_rescaled_cumsum,
        "Vectorises with a reversed cumsum of gamma^k r_k divided by gamma^t, which divides by zero when gamma = 0.",
    ),
    _row(
        "reward_to_go",
        "00",
        w07_reward_to_go_accumulates_in_rewards,
        "Accumulates the returns into the caller's rewards tensor in place and returns it.",
    ),
    _row(
        "reward_to_go",
        "00",
        w08_reward_to_go_time_major,
        "Treats the first axis as time (time-major layout), so batches are summed along the batch axis.",
    ),
    _row(
        "reward_to_go",
        "00",
        w09_reward_to_go_stacked_on_first_axis,
        "Stacks the per-step returns on a new first axis, giving shape (T, ...) instead of (..., T).",
    ),
    _row(
        "reward_to_go",
        "00",
        w10_reward_to_go_strict_upper_triangle,
        "Builds the discount matrix with triu(diagonal=1), so each step's own reward is left out.",
    ),
    _row("reward_to_go", "00", r03_reward_to_go_masked_power_matrix),
    _row("reward_to_go", "00", r04_reward_to_go_list_then_stack_last),
]


# ---------------------------------------------------------------------------
# Chapter 01: sort_inclusion_ordering_reward
# ---------------------------------------------------------------------------


def w11_sort_inclusion_ordering_reward_counts_response_tokens(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]  # (..., T, T)
    inclusion = matches.any(dim=-2).sum(dim=-1)  # response tokens found in the prompt
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w12_sort_inclusion_ordering_reward_strict_diff(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-1).sum(dim=-1)
    ordering = (torch.diff(response, dim=-1) > 0).sum(dim=-1)  # increasing steps
    return (inclusion + ordering).float()


def w13_sort_inclusion_ordering_reward_integer_result(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-1).sum(dim=-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return inclusion + ordering  # points are whole numbers anyway


def w14_sort_inclusion_ordering_reward_isin_whole_batch(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    inclusion = torch.isin(prompt, response).sum(dim=-1)  # is each prompt token in the response?
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w15_sort_inclusion_ordering_reward_total_inclusion(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-1).sum()
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def r05_sort_inclusion_ordering_reward_python_sets(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    T = response.shape[-1]
    scores = []
    for p_row, r_row in zip(prompt.reshape(-1, T).tolist(), response.reshape(-1, T).tolist()):
        present = set(r_row)
        inclusion = sum(token in present for token in p_row)
        ordering = sum(a <= b for a, b in zip(r_row, r_row[1:]))
        scores.append(inclusion + ordering)
    return torch.tensor(scores, dtype=torch.float32).reshape(response.shape[:-1])


def r06_sort_inclusion_ordering_reward_searchsorted(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    sorted_response = response.sort(dim=-1).values.contiguous()
    where = torch.searchsorted(sorted_response, prompt.contiguous()).clamp(max=response.shape[-1] - 1)
    found = sorted_response.gather(-1, where) == prompt
    ordering = (torch.diff(response, dim=-1) >= 0).sum(dim=-1)
    return (found.sum(dim=-1) + ordering).to(torch.float32)


ROWS += [
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w11_sort_inclusion_ordering_reward_counts_response_tokens,
        "Counts inclusion over the response's tokens (any(dim=-2)), so a repeated right token is paid twice.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w12_sort_inclusion_ordering_reward_strict_diff,
        "Counts ordered pairs with diff > 0, so equal adjacent tokens earn no ordering point.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w13_sort_inclusion_ordering_reward_integer_result,
        "Returns the integer sum of points instead of a float32 tensor.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w14_sort_inclusion_ordering_reward_isin_whole_batch,
        "Uses torch.isin, which looks for each prompt token in every response of the batch, not only its own.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w15_sort_inclusion_ordering_reward_total_inclusion,
        "Sums the inclusion points over the whole batch (no dim), adding every response's points to each reward.",
    ),
    _row("sort_inclusion_ordering_reward", "01", r05_sort_inclusion_ordering_reward_python_sets),
    _row("sort_inclusion_ordering_reward", "01", r06_sort_inclusion_ordering_reward_searchsorted),
]


# ---------------------------------------------------------------------------
# Chapter 01: math_answer_reward
# ---------------------------------------------------------------------------

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"


def _normalise_answer(text):
    """Chapter 01's normalisation, written once by the students who got it right."""
    text = text.replace("\\$", "").replace("$", "").strip()
    while text and text[-1] in ".,;:!?)":
        if text[-1] == ")" and text.count(")") <= text.count("("):
            break
        text = text[:-1].rstrip()
    return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)


def _last_balanced_box(text):
    start = text.rfind("\\boxed{")
    while start != -1:
        depth, begin = 1, start + len("\\boxed{")
        for i in range(begin, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return text[begin:i]
        start = text.rfind("\\boxed{", 0, start)
    return None


def _stated_answer(text):
    statements = list(re.finditer(r"\banswer(?:\s+is\b\s*:?|\s*:)", text, re.IGNORECASE))
    if not statements:
        return None
    rest = text[statements[-1].end() :].lstrip()
    rest = re.split(r"[\n<]", rest)[0]
    return re.split(r"[.!?](?:\s|$)", rest)[0]


def _same(answer, ground_truth):
    if answer is None:
        return 0.0
    answer, truth = _normalise_answer(answer), _normalise_answer(ground_truth)
    if not answer:
        return 0.0
    if re.fullmatch(_NUMBER, answer) and re.fullmatch(_NUMBER, truth):
        return float(float(answer) == float(truth))
    return float(answer == truth)


def w16_math_answer_reward_greedy_box_regex(response_text, ground_truth):
    boxes = re.findall(r"\\boxed\{(.*)\}", response_text)  # greedy, so nested braces stay inside
    answer = boxes[-1] if boxes else _stated_answer(response_text)
    return _same(answer, ground_truth)


def w17_math_answer_reward_first_statement(response_text, ground_truth):
    answer = _last_balanced_box(response_text)
    if answer is None:
        statement = re.search(r"\banswer(?:\s+is\b\s*:?|\s*:)", response_text, re.IGNORECASE)
        if statement is not None:
            rest = response_text[statement.end() :].lstrip()
            rest = re.split(r"[\n<]", rest)[0]
            answer = re.split(r"[.!?](?:\s|$)", rest)[0]
    return _same(answer, ground_truth)


def w18_math_answer_reward_unsigned_numbers(response_text, ground_truth):
    answer = _last_balanced_box(response_text)
    if answer is None:
        answer = _stated_answer(response_text)
    if answer is None:
        return 0.0
    answer, truth = _normalise_answer(answer), _normalise_answer(ground_truth)
    if not answer:
        return 0.0
    number = r"\d+(?:\.\d*)?|\.\d+"
    if re.fullmatch(number, answer) and re.fullmatch(number, truth):
        return float(float(answer) == float(truth))
    return float(answer == truth)


def w19_math_answer_reward_normalises_answer_only(response_text, ground_truth):
    answer = _last_balanced_box(response_text)
    if answer is None:
        answer = _stated_answer(response_text)
    if answer is None:
        return 0.0
    answer, truth = _normalise_answer(answer), ground_truth.strip()  # the dataset's answers are clean
    if not answer:
        return 0.0
    if re.fullmatch(_NUMBER, answer) and re.fullmatch(_NUMBER, truth):
        return float(float(answer) == float(truth))
    return float(answer == truth)


def w20_math_answer_reward_drops_every_comma(response_text, ground_truth):
    def normalise(text):
        text = text.replace("\\$", "").replace("$", "").strip()
        while text and text[-1] in ".,;:!?)":
            if text[-1] == ")" and text.count(")") <= text.count("("):
                break
            text = text[:-1].rstrip()
        return text.replace(",", "")  # 1,000 -> 1000

    answer = _last_balanced_box(response_text)
    if answer is None:
        answer = _stated_answer(response_text)
    if answer is None:
        return 0.0
    answer, truth = normalise(answer), normalise(ground_truth)
    if not answer:
        return 0.0
    if re.fullmatch(_NUMBER, answer) and re.fullmatch(_NUMBER, truth):
        return float(float(answer) == float(truth))
    return float(answer == truth)


def w21_math_answer_reward_does_not_stop_at_a_tag(response_text, ground_truth):
    answer = _last_balanced_box(response_text)
    if answer is None:
        statements = list(re.finditer(r"\banswer(?:\s+is\b\s*:?|\s*:)", response_text, re.IGNORECASE))
        if statements:
            rest = response_text[statements[-1].end() :].lstrip()
            rest = rest.split("\n")[0]
            answer = re.split(r"[.!?](?:\s|$)", rest)[0]
    return _same(answer, ground_truth)


def w22_math_answer_reward_case_sensitive_statement(response_text, ground_truth):
    answer = _last_balanced_box(response_text)
    if answer is None:
        statements = list(re.finditer(r"\b(?:[Tt]he answer is\b\s*:?|Answer\s*:)", response_text))
        if statements:
            rest = response_text[statements[-1].end() :].lstrip()
            rest = re.split(r"[\n<]", rest)[0]
            answer = re.split(r"[.!?](?:\s|$)", rest)[0]
    return _same(answer, ground_truth)


def r07_math_answer_reward_lowercase_scan(response_text, ground_truth):
    # 1. the last box whose braces balance, scanning backwards through every "\boxed{"
    answer = None
    starts = [m.start() for m in re.finditer(re.escape("\\boxed{"), response_text)]
    for start in reversed(starts):
        depth = 0
        for i in range(start + len("\\boxed"), len(response_text)):
            if response_text[i] == "{":
                depth += 1
            elif response_text[i] == "}":
                depth -= 1
                if depth == 0:
                    answer = response_text[start + len("\\boxed{") : i]
                    break
        if answer is not None:
            break
    if answer is None:
        answer = _stated_answer(response_text)
    if answer is None:
        return 0.0
    answer, truth = _normalise_answer(answer), _normalise_answer(ground_truth)
    if answer == "":
        return 0.0
    both_numbers = all(re.fullmatch(_NUMBER, s) for s in (answer, truth))
    return 1.0 if (float(answer) == float(truth) if both_numbers else answer == truth) else 0.0


def r08_math_answer_reward_cut_with_indices(response_text, ground_truth):
    answer = _last_balanced_box(response_text)
    if answer is None:
        statements = list(re.finditer(r"\banswer(?:\s+is\b\s*:?|\s*:)", response_text, flags=re.I))
        if statements:
            rest = response_text[statements[-1].end() :].lstrip()
            # the first line end, tag or sentence end, whichever comes first
            cuts = [len(rest)]
            cuts += [i for i in (rest.find("\n"), rest.find("<")) if i != -1]
            sentence_end = re.search(r"[.!?](?:\s|$)", rest)
            if sentence_end is not None:
                cuts.append(sentence_end.start())
            answer = rest[: min(cuts)]
    return _same(answer, ground_truth)


ROWS += [
    _row(
        "math_answer_reward",
        "01",
        w16_math_answer_reward_greedy_box_regex,
        "Finds the box with the greedy regex \\\\boxed\\{(.*)\\}, which runs to the last '}' of the line.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w17_math_answer_reward_first_statement,
        "Takes the first 'the answer is' / 'Answer:' statement (re.search) instead of the last.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w18_math_answer_reward_unsigned_numbers,
        "Recognises only unsigned numbers, so signed answers such as '-3' and '-3.0' are compared as strings.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w19_math_answer_reward_normalises_answer_only,
        "Normalises only the response's answer, not the ground truth (which it only strips of whitespace).",
    ),
    _row(
        "math_answer_reward",
        "01",
        w20_math_answer_reward_drops_every_comma,
        "Removes every comma, not only thousands separators, so '1,5' becomes '15'.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w21_math_answer_reward_does_not_stop_at_a_tag,
        "Cuts a stated answer at the line end or sentence end but not at the next '<', so a closing tag stays in.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w22_math_answer_reward_case_sensitive_statement,
        "Matches the statements case-sensitively, so 'THE ANSWER IS' or 'answer:' are not found.",
    ),
    _row("math_answer_reward", "01", r07_math_answer_reward_lowercase_scan),
    _row("math_answer_reward", "01", r08_math_answer_reward_cut_with_indices),
]


# ---------------------------------------------------------------------------
# Chapter 02: gather_log_probs
# ---------------------------------------------------------------------------


def w23_gather_log_probs_normalises_first_axis(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=0)  # numpy's habit: axis 0
    return logp_all.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


def w24_gather_log_probs_unshifted_logsumexp(logits, tokens):
    log_normaliser = logits.exp().sum(dim=-1, keepdim=True).log()  # log sum_v e^{z_v}
    logp_all = logits - log_normaliser
    return logp_all.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


def w25_gather_log_probs_squeezes_every_axis(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=-1)
    return torch.take_along_dim(logp_all, tokens.long()[..., None], dim=-1).squeeze()


def w26_gather_log_probs_under_no_grad(logits, tokens):
    with torch.no_grad():  # we only read values here
        logp_all = torch.log_softmax(logits, dim=-1)
    return logp_all.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


def w27_gather_log_probs_one_hot_without_num_classes(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=-1)
    one_hot = F.one_hot(tokens.long()).to(logp_all.dtype)  # (..., T, V)
    return (one_hot * logp_all).sum(dim=-1)


def w28_gather_log_probs_index_select_diagonal(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=-1)  # (..., T, V)
    picked = logp_all.index_select(-1, tokens.long().flatten())  # (..., T, N): every token's column
    return picked.diagonal(dim1=-2, dim2=-1)  # row t, column t


def r09_gather_log_probs_categorical(logits, tokens):
    return torch.distributions.Categorical(logits=logits).log_prob(tokens.long())


def r10_gather_log_probs_one_hot_einsum(logits, tokens):
    logp_all = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    picks = F.one_hot(tokens.long(), num_classes=logits.shape[-1]).to(logits.dtype)
    return torch.einsum("...v,...v->...", picks, logp_all)


ROWS += [
    _row(
        "gather_log_probs",
        "02",
        w23_gather_log_probs_normalises_first_axis,
        "Applies log_softmax over dim=0 instead of the vocabulary axis.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w24_gather_log_probs_unshifted_logsumexp,
        "Computes log(sum(exp(logits))) without subtracting the max, which overflows for large logits.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w25_gather_log_probs_squeezes_every_axis,
        "Calls .squeeze() with no axis, so a single token (T = 1) or a batch of one loses its axes.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w26_gather_log_probs_under_no_grad,
        "Computes the log-softmax under torch.no_grad(), so the result carries no gradient to the logits.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w27_gather_log_probs_one_hot_without_num_classes,
        "Calls F.one_hot without num_classes, so the one-hot width is max(token) + 1 instead of V.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w28_gather_log_probs_index_select_diagonal,
        "Picks with index_select on the flattened tokens and takes the diagonal, which mixes responses in a batch.",
    ),
    _row("gather_log_probs", "02", r09_gather_log_probs_categorical),
    _row("gather_log_probs", "02", r10_gather_log_probs_one_hot_einsum),
]


# ---------------------------------------------------------------------------
# Chapter 02: reinforce_loss
# ---------------------------------------------------------------------------


def w29_reinforce_loss_mean_per_response_first(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    valid = mask.bool()
    per_response = torch.where(valid, per_token, torch.zeros_like(per_token)).sum(dim=-1)
    per_response = per_response / valid.sum(dim=-1).clamp(min=1)
    return per_response.mean()


def w30_reinforce_loss_boolean_index_with_mask_as_given(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    selected = per_token[mask]  # keep the real tokens
    if selected.numel() == 0:
        return per_token.sum() * 0.0
    return selected.mean()


def w31_reinforce_loss_fresh_zero_for_empty_batch(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    n_valid = valid.sum()
    if n_valid == 0:
        return torch.tensor(0.0)  # nothing to learn from
    return torch.where(valid, per_token, torch.zeros_like(per_token)).sum() / n_valid


def w32_reinforce_loss_divides_by_every_position(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    return torch.where(mask.bool(), per_token, torch.zeros_like(per_token)).mean()


def w33_reinforce_loss_truthiness_of_mask(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if not mask:
        return per_token.mean()
    valid = mask.bool()
    return torch.where(valid, per_token, torch.zeros_like(per_token)).sum() / valid.sum().clamp(min=1)


def w34_reinforce_loss_returns_python_float(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    loss = torch.where(valid, per_token, torch.zeros_like(per_token)).sum() / valid.sum().clamp(min=1)
    return loss.item()


def r11_reinforce_loss_masked_fill(logp, deltas, mask=None):
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.to(torch.bool)
    weights = deltas.detach()[..., None].expand_as(logp)
    per_token = (-weights * logp).masked_fill(~valid, 0.0)
    return per_token.sum() / valid.sum().clamp(min=1)


def r12_reinforce_loss_weighted_einsum(logp, deltas, mask=None):
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask != 0
    clean_logp = torch.where(valid, logp, torch.zeros_like(logp))
    total = torch.einsum("...t,...->", clean_logp, deltas.detach().to(logp.dtype))
    count = valid.sum().clamp(min=1).to(logp.dtype)
    return -total / count


ROWS += [
    _row(
        "reinforce_loss",
        "02",
        w29_reinforce_loss_mean_per_response_first,
        "Averages the tokens of each response first and then the responses, instead of one mean over all tokens.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w30_reinforce_loss_boolean_index_with_mask_as_given,
        "Indexes with the mask as given, which only selects tokens for a bool mask (a 0/1 mask indexes rows).",
    ),
    _row(
        "reinforce_loss",
        "02",
        w31_reinforce_loss_fresh_zero_for_empty_batch,
        "Returns a new torch.tensor(0.0) for an all-padding batch, detached from logp (no gradient, float32).",
    ),
    _row(
        "reinforce_loss",
        "02",
        w32_reinforce_loss_divides_by_every_position,
        "Divides the masked sum by every position of the batch (a .mean() after zeroing the padding).",
    ),
    _row(
        "reinforce_loss",
        "02",
        w33_reinforce_loss_truthiness_of_mask,
        "Tests `if not mask:`, which raises for a mask with more than one entry.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w34_reinforce_loss_returns_python_float,
        "Returns the loss as a Python float (.item()), so it cannot be backpropagated.",
    ),
    _row("reinforce_loss", "02", r11_reinforce_loss_masked_fill),
    _row("reinforce_loss", "02", r12_reinforce_loss_weighted_einsum),
]


# ---------------------------------------------------------------------------
# Chapter 02: mc_policy_gradient
# ---------------------------------------------------------------------------


def w35_mc_policy_gradient_score_minus_log_pi(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - torch.log_softmax(logits, dim=-1)
    return (reward_per_action[actions, None] * score).mean(dim=0)


def w36_mc_policy_gradient_bessel_average(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).sum(dim=0) / max(n_samples - 1, 1)


def w37_mc_policy_gradient_gradient_of_the_loss(logits, reward_per_action, n_samples, generator=None):
    x = logits.detach().clone().requires_grad_(True)
    pi = torch.softmax(x, dim=-1).detach()
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    loss = -(reward_per_action[actions] * torch.log_softmax(x, dim=-1)[actions]).mean()
    (grad,) = torch.autograd.grad(loss, x)
    return grad


def w38_mc_policy_gradient_default_replacement(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).mean(dim=0)


def w39_mc_policy_gradient_global_rng(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).mean(dim=0)


def r13_mc_policy_gradient_autograd_ascent(logits, reward_per_action, n_samples, generator=None):
    actions = torch.multinomial(torch.softmax(logits, dim=-1), n_samples, replacement=True, generator=generator)
    x = logits.detach().clone().requires_grad_(True)
    objective = (reward_per_action[actions].detach() * torch.log_softmax(x, dim=-1)[actions]).mean()
    (grad,) = torch.autograd.grad(objective, x)
    return grad


def r14_mc_policy_gradient_bincount(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    sampled_rewards = reward_per_action[actions]
    # sum_i r_i onehot(a_i) is a weighted histogram of the actions
    histogram = torch.bincount(actions, weights=sampled_rewards.double(), minlength=logits.shape[0])
    estimate = histogram / n_samples - pi.double() * sampled_rewards.double().mean()
    return estimate.to(logits.dtype)


ROWS += [
    _row(
        "mc_policy_gradient",
        "02",
        w35_mc_policy_gradient_score_minus_log_pi,
        "Uses onehot(a) - log pi instead of onehot(a) - pi as the score.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w36_mc_policy_gradient_bessel_average,
        "Divides the sum over samples by n - 1 (a Bessel habit) instead of n.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w37_mc_policy_gradient_gradient_of_the_loss,
        "Returns the gradient of the loss -J (a descent direction) instead of the gradient of the expected reward.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w38_mc_policy_gradient_default_replacement,
        "Leaves out replacement=True, so actions are drawn without replacement (and n > V fails).",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w39_mc_policy_gradient_global_rng,
        "Samples with the global RNG, ignoring the generator argument.",
    ),
    _row("mc_policy_gradient", "02", r13_mc_policy_gradient_autograd_ascent),
    _row("mc_policy_gradient", "02", r14_mc_policy_gradient_bincount),
]


# ---------------------------------------------------------------------------
# Chapter 03: compute_deltas
# ---------------------------------------------------------------------------


def _check_mode(mode):
    if mode not in ("rewards", "centered_rewards", "normalized_rewards"):
        raise ValueError(f"mode: expected 'rewards', 'centered_rewards' or 'normalized_rewards', got {mode!r}")


def w40_compute_deltas_rewards_mode_returns_input(rewards, mode, eps=1e-6):
    _check_mode(mode)
    if mode == "rewards":
        return rewards
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def w41_compute_deltas_small_std_counts_as_equal(rewards, mode, eps=1e-6):
    _check_mode(mode)
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    std = rewards.std(dim=-1, keepdim=True)
    flat = std < eps  # no spread to speak of
    centred = torch.where(flat, torch.zeros_like(centred), centred)
    if mode == "centered_rewards":
        return centred
    return centred / (std + eps)


def w42_compute_deltas_subtracts_in_place(rewards, mode, eps=1e-6):
    _check_mode(mode)
    if mode == "rewards":
        return rewards.clone()
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True) if rewards.shape[-1] > 1 else None
    centred = rewards.sub_(rewards.mean(dim=-1, keepdim=True))
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or std is None:
        return centred
    return centred / (std + eps)


def w43_compute_deltas_zero_std_test(rewards, mode, eps=1e-6):
    _check_mode(mode)
    if mode == "rewards":
        return rewards.clone()
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True)
    centred = torch.where(std == 0, torch.zeros_like(centred), centred)  # all-equal groups
    if mode == "centered_rewards":
        return centred
    return centred / (std + eps)


def w44_compute_deltas_british_spelling(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centred_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def w45_compute_deltas_trl_eps_default(rewards, mode, eps=1e-4):
    _check_mode(mode)
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def r15_compute_deltas_range_test_masked_fill(rewards, mode, eps=1e-6):
    _check_mode(mode)
    if mode == "rewards":
        return rewards.detach().clone()
    G = rewards.shape[-1]
    constant = rewards.amax(dim=-1, keepdim=True) == rewards.amin(dim=-1, keepdim=True)  # (B, 1)
    if G == 1:
        return torch.zeros_like(rewards)
    mean = rewards.mean(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True, correction=1)
    deltas = rewards - mean
    if mode == "normalized_rewards":
        deltas = deltas / (std + eps)
    return deltas.masked_fill(constant, 0.0)


def r16_compute_deltas_group_by_group(rewards, mode, eps=1e-6):
    _check_mode(mode)
    out = rewards.clone()
    if mode == "rewards":
        return out
    for b in range(rewards.shape[0]):
        group = rewards[b]
        if bool((group == group[0]).all()):
            out[b] = 0.0
            continue
        centred = group - group.mean()
        out[b] = centred if mode == "centered_rewards" else centred / (group.std() + eps)
    return out


ROWS += [
    _row(
        "compute_deltas",
        "03",
        w40_compute_deltas_rewards_mode_returns_input,
        "Returns the rewards tensor itself in the 'rewards' mode instead of a new tensor.",
    ),
    _row(
        "compute_deltas",
        "03",
        w41_compute_deltas_small_std_counts_as_equal,
        "Zeroes every group whose std is below eps, not only groups whose rewards are all equal.",
    ),
    _row(
        "compute_deltas",
        "03",
        w42_compute_deltas_subtracts_in_place,
        "Subtracts the group mean from the rewards in place (sub_), changing the caller's tensor.",
    ),
    _row(
        "compute_deltas",
        "03",
        w43_compute_deltas_zero_std_test,
        "Finds all-equal groups with std == 0, which misses float groups whose std rounds to a tiny nonzero value.",
    ),
    _row(
        "compute_deltas",
        "03",
        w44_compute_deltas_british_spelling,
        "Compares the mode with 'centred_rewards', so 'centered_rewards' is normalised as well.",
    ),
    _row(
        "compute_deltas",
        "03",
        w45_compute_deltas_trl_eps_default,
        "Keeps TRL's eps default of 1e-4 instead of the documented 1e-6.",
    ),
    _row("compute_deltas", "03", r15_compute_deltas_range_test_masked_fill),
    _row("compute_deltas", "03", r16_compute_deltas_group_by_group),
]


# ---------------------------------------------------------------------------
# Chapter 03: gradient_variance
# ---------------------------------------------------------------------------


def w46_gradient_variance_returns_a_tensor(grad_samples):
    return grad_samples.var(dim=0).sum()


def w47_gradient_variance_numpy_cov_rows(grad_samples):
    covariance = torch.cov(grad_samples)  # as np.cov(x): one variable per row
    return float(torch.atleast_2d(covariance).diagonal().sum())


def w48_gradient_variance_one_pass_formula(grad_samples):
    N = grad_samples.shape[0]
    mean_of_squares = (grad_samples**2).mean(dim=0)
    square_of_mean = grad_samples.mean(dim=0) ** 2
    return float(((mean_of_squares - square_of_mean) * N / (N - 1)).sum())


def w49_gradient_variance_pooled_over_entries(grad_samples):
    return float(grad_samples.var() * grad_samples.shape[1])  # P coordinates, one variance each


def w50_gradient_variance_sums_stds(grad_samples):
    return float(grad_samples.std(dim=0).sum())


def r17_gradient_variance_cov_of_columns(grad_samples):
    covariance = torch.atleast_2d(torch.cov(grad_samples.T))  # variables are the columns
    return covariance.diagonal().sum().item()


def r18_gradient_variance_pairwise_differences(grad_samples):
    N = grad_samples.shape[0]
    differences = grad_samples[:, None, :] - grad_samples[None, :, :]  # (N, N, P)
    # sum over ordered pairs of (g_i - g_j)^2 is 2 N sum_i (g_i - mean)^2
    return float((differences**2).sum() / (2 * N * (N - 1)))


ROWS += [
    _row(
        "gradient_variance",
        "03",
        w46_gradient_variance_returns_a_tensor,
        "Returns a 0-dimensional tensor instead of a Python float.",
    ),
    _row(
        "gradient_variance",
        "03",
        w47_gradient_variance_numpy_cov_rows,
        "Calls torch.cov on the samples as given, which treats rows as variables (np.cov's rowvar), not columns.",
    ),
    _row(
        "gradient_variance",
        "03",
        w48_gradient_variance_one_pass_formula,
        "Uses the one-pass formula E[g^2] - E[g]^2, which cancels catastrophically when the mean is large.",
    ),
    _row(
        "gradient_variance",
        "03",
        w49_gradient_variance_pooled_over_entries,
        "Takes one variance over all N * P entries and multiplies by P, mixing in the spread between coordinates.",
    ),
    _row(
        "gradient_variance",
        "03",
        w50_gradient_variance_sums_stds,
        "Sums the per-coordinate standard deviations instead of the variances.",
    ),
    _row("gradient_variance", "03", r17_gradient_variance_cov_of_columns),
    _row("gradient_variance", "03", r18_gradient_variance_pairwise_differences),
]


# ---------------------------------------------------------------------------
# Chapter 04: gae_table
# ---------------------------------------------------------------------------


def w51_gae_table_last_step_treated_as_terminal():
    # the rollout stops after t = 4, so I took V(s_5) = 0
    deltas = [0.35, -0.6, 1.0, -0.55, 0.5]
    advantages = [0.436, 0.12, 1.0, -0.19, 0.5]
    return deltas, advantages


def w52_gae_table_decays_by_gamma_only():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.62, 0.3, 1.0, 0.71, 1.4]  # A_t = delta_t + gamma * A_{t+1}
    return deltas, advantages


def w53_gae_table_gives_returns():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [2.436, 1.62, 2.0, 1.458, 1.9]  # A_t + V(s_t), the critic's target
    return deltas, advantages


def w54_gae_table_one_decimal():
    deltas = [0.4, -0.6, 1.0, -0.6, 1.4]
    advantages = [0.4, 0.1, 1.0, 0.5, 1.4]
    return deltas, advantages


def w55_gae_table_done_one_step_late():
    # I cut the bootstrap at the step after the terminal one
    deltas = [0.35, -0.6, 1.9, -1.0, 1.4]
    advantages = [0.53, 0.25, 1.18, -1.0, 1.4]
    return deltas, advantages


def r19_gae_table_full_precision():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.4364, 0.12, 1.0, 0.458, 1.4]
    return deltas, advantages


def r20_gae_table_computed_in_a_loop():
    rewards = [1.0, 0.0, 2.0, 0.0, 1.0]
    values = [2.0, 1.5, 1.0, 1.0, 0.5, 1.0]  # V(s_0) .. V(s_5)
    terminal = [False, False, True, False, False]
    gamma, lam = 0.9, 0.8
    deltas = [rewards[t] + gamma * (0.0 if terminal[t] else values[t + 1]) - values[t] for t in range(5)]
    advantages = [0.0] * 5
    running = 0.0
    for t in reversed(range(5)):
        running = deltas[t] + (0.0 if terminal[t] else gamma * lam * running)
        advantages[t] = running
    return deltas, advantages


ROWS += [
    _row(
        "gae_table",
        "04",
        w51_gae_table_last_step_treated_as_terminal,
        "Treats the last step as terminal (V(s_5) = 0) instead of bootstrapping from last_values.",
    ),
    _row(
        "gae_table",
        "04",
        w52_gae_table_decays_by_gamma_only,
        "Decays the advantages by gamma alone instead of gamma * lambda.",
    ),
    _row(
        "gae_table",
        "04",
        w53_gae_table_gives_returns,
        "Gives the lambda-returns (advantages + values) in place of the advantages.",
    ),
    _row(
        "gae_table",
        "04",
        w54_gae_table_one_decimal,
        "Rounds every entry to one decimal, where three are asked for.",
    ),
    _row(
        "gae_table",
        "04",
        w55_gae_table_done_one_step_late,
        "Applies the terminal flag one step late: t = 2 bootstraps from V(s_3) and t = 3 does not bootstrap.",
    ),
    _row("gae_table", "04", r19_gae_table_full_precision),
    _row("gae_table", "04", r20_gae_table_computed_in_a_loop),
]


# ---------------------------------------------------------------------------
# Chapter 04: compute_gae
# ---------------------------------------------------------------------------


def w56_compute_gae_cleanrl_next_done(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1.0 - d) * next_values - values
    # CleanRL: nextnonterminal = 1 - dones[t + 1]
    next_d = torch.cat([d[..., 1:], torch.zeros_like(d[..., :1])], dim=-1)
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - next_d[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + values


def w57_compute_gae_returns_alias_advantages(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1.0 - d) * next_values - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    returns = advantages
    returns += values  # the lambda-return
    return advantages, returns


def w58_compute_gae_bitwise_not_of_dones(rewards, values, dones, last_values, gamma, lam):
    alive = (~dones).to(rewards.dtype)  # 1 where the episode goes on
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * alive * next_values - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * alive[..., t] * running
        advantages[..., t] = running
    return advantages, advantages + values


def w59_compute_gae_lambda_in_the_residual(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * lam * (1.0 - d) * next_values - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + values


def w60_compute_gae_last_step_never_written(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1.0 - d) * next_values - values
    advantages = torch.zeros_like(deltas)
    running = deltas[..., -1]  # A_{T-1} = delta_{T-1}
    for t in reversed(range(rewards.shape[-1] - 1)):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + values


def r21_compute_gae_discount_matrix(rewards, values, dones, last_values, gamma, lam):
    T = rewards.shape[-1]
    alive = 1.0 - dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values[..., None]], dim=-1)
    deltas = rewards + gamma * alive * next_values - values
    carry = gamma * lam * alive  # (..., T): how much of A_{t+1} reaches A_t
    advantages = torch.zeros_like(deltas)
    for t in range(T):
        weight = torch.ones_like(deltas[..., 0])
        for k in range(t, T):
            advantages[..., t] = advantages[..., t] + weight * deltas[..., k]
            weight = weight * carry[..., k]
    return advantages, values + advantages


def r22_compute_gae_where_and_stack(rewards, values, dones, last_values, gamma, lam):
    terminal = dones.bool()
    zero = torch.zeros_like(rewards[..., 0])
    columns = []
    next_value, next_advantage = last_values.to(rewards.dtype), zero
    for t in range(rewards.shape[-1] - 1, -1, -1):
        bootstrap = torch.where(terminal[..., t], zero, gamma * next_value)
        delta = rewards[..., t] + bootstrap - values[..., t]
        advantage = delta + torch.where(terminal[..., t], zero, gamma * lam * next_advantage)
        columns.append(advantage)
        next_value, next_advantage = values[..., t], advantage
    advantages = torch.stack(columns[::-1], dim=-1)
    return advantages, advantages + values


ROWS += [
    _row(
        "compute_gae",
        "04",
        w56_compute_gae_cleanrl_next_done,
        "Cuts the advantage recursion with the next step's done flag (CleanRL's nextnonterminal) instead of done_t.",
    ),
    _row(
        "compute_gae",
        "04",
        w57_compute_gae_returns_alias_advantages,
        "Builds the returns with `returns = advantages; returns += values`, so the advantages get the values too.",
    ),
    _row(
        "compute_gae",
        "04",
        w58_compute_gae_bitwise_not_of_dones,
        "Uses ~dones for the continuation flag, which for 0/1 integer dones gives -1 and -2 (and fails on floats).",
    ),
    _row(
        "compute_gae",
        "04",
        w59_compute_gae_lambda_in_the_residual,
        "Multiplies the bootstrap term of the TD residual by gamma * lambda instead of gamma.",
    ),
    _row(
        "compute_gae",
        "04",
        w60_compute_gae_last_step_never_written,
        "Starts the recursion from delta_{T-1} but never writes it, so the last advantage stays 0.",
    ),
    _row("compute_gae", "04", r21_compute_gae_discount_matrix),
    _row("compute_gae", "04", r22_compute_gae_where_and_stack),
]


# ---------------------------------------------------------------------------
# Chapter 04: td_residuals
# ---------------------------------------------------------------------------


def w61_td_residuals_roll_wraps_around(rewards, values, dones, last_values, gamma):
    next_values = torch.roll(values, shifts=-1, dims=-1)  # V(s_{t+1})
    return rewards + gamma * (1.0 - dones.to(rewards.dtype)) * next_values - values


def w62_td_residuals_done_also_drops_own_value(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    return rewards + (1.0 - dones.to(rewards.dtype)) * (gamma * next_values - values)


def w63_td_residuals_last_values_on_first_axis(rewards, values, dones, last_values, gamma):
    # time-major habit: the bootstrap row goes below the last step
    next_values = torch.cat([values[..., 1:], last_values.reshape(1, -1)], dim=-1)
    return rewards + gamma * (1.0 - dones.to(rewards.dtype)) * next_values - values


def w64_td_residuals_in_place_on_rewards(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    rewards += gamma * (1.0 - dones.to(rewards.dtype)) * next_values
    return rewards.sub_(values)


def w65_td_residuals_pads_with_zero(rewards, values, dones, last_values, gamma):
    next_values = F.pad(values[..., 1:], (0, 1))  # V(s_{t+1}), nothing after the last step
    return rewards + gamma * (1.0 - dones.to(rewards.dtype)) * next_values - values


def r23_td_residuals_where_terminal(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], last_values[..., None].to(values.dtype)], dim=-1)
    bootstrapped = rewards + gamma * next_values - values
    return torch.where(dones.bool(), rewards - values, bootstrapped)


def r24_td_residuals_roll_then_overwrite(rewards, values, dones, last_values, gamma):
    next_values = values.roll(-1, dims=-1).clone()
    next_values[..., -1] = last_values
    alive = dones.to(rewards.dtype).neg().add(1.0)
    return rewards - values + gamma * alive * next_values


ROWS += [
    _row(
        "td_residuals",
        "04",
        w61_td_residuals_roll_wraps_around,
        "Shifts the values with torch.roll, so the last step bootstraps from V(s_0) instead of last_values.",
    ),
    _row(
        "td_residuals",
        "04",
        w62_td_residuals_done_also_drops_own_value,
        "Multiplies (gamma V(s_{t+1}) - V(s_t)) by (1 - done), so a terminal step also drops its own V(s_t).",
    ),
    _row(
        "td_residuals",
        "04",
        w63_td_residuals_last_values_on_first_axis,
        "Reshapes last_values to (1, -1) before concatenating, which only fits a batch of exactly one row.",
    ),
    _row(
        "td_residuals",
        "04",
        w64_td_residuals_in_place_on_rewards,
        "Builds the residuals in place in the caller's rewards tensor.",
    ),
    _row(
        "td_residuals",
        "04",
        w65_td_residuals_pads_with_zero,
        "Pads V(s_{t+1}) with 0 after the last step instead of using last_values.",
    ),
    _row("td_residuals", "04", r23_td_residuals_where_terminal),
    _row("td_residuals", "04", r24_td_residuals_roll_then_overwrite),
]


# ---------------------------------------------------------------------------
# Chapter 05: clipped_surrogate_loss
# ---------------------------------------------------------------------------


def _surrogate_parts(logp, logp_old, adv, clip_eps, mask, clip_eps_high):
    """The masked ratio, advantages and per-entry loss that chapter 05's students all start from."""
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    logp = torch.where(valid, logp, zero)
    logp_old = torch.where(valid, logp_old.detach(), zero)
    adv = torch.where(valid, adv.detach(), zero)
    ratio = torch.exp(logp - logp_old)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_element = -torch.minimum(ratio * adv, clipped * adv)
    return valid, zero, logp - logp_old, ratio, adv, high, per_element


def w66_clipped_surrogate_loss_fractions_over_every_entry(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    valid, zero, log_ratio, ratio, adv, high, per_element = _surrogate_parts(
        logp, logp_old, adv, clip_eps, mask, clip_eps_high
    )
    n_valid = valid.sum().clamp(min=1)
    loss = torch.where(valid, per_element, zero).sum() / n_valid
    with torch.no_grad():
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binding = (above & (adv > 0)) | (low & (adv < 0))
        info = {
            "clip_fraction": (low | above).float().mean().item(),
            "clip_active_fraction": binding.float().mean().item(),
            "approx_kl": (torch.where(valid, (ratio - 1.0) - log_ratio, zero).sum() / n_valid).item(),
        }
    return loss, info


def w67_clipped_surrogate_loss_active_is_any_clip(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    valid, zero, log_ratio, ratio, adv, high, per_element = _surrogate_parts(
        logp, logp_old, adv, clip_eps, mask, clip_eps_high
    )
    n_valid = valid.sum().clamp(min=1)
    loss = torch.where(valid, per_element, zero).sum() / n_valid
    with torch.no_grad():
        clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
        outside = (ratio != clipped) & valid
        n = n_valid.item()
        info = {
            "clip_fraction": outside.sum().item() / n,
            "clip_active_fraction": (outside & (adv != 0)).sum().item() / n,  # the clip changed the term
            "approx_kl": torch.where(valid, (ratio - 1.0) - log_ratio, zero).sum().item() / n,
        }
    return loss, info


def w68_clipped_surrogate_loss_old_cleanrl_kl(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    valid, zero, log_ratio, ratio, adv, high, per_element = _surrogate_parts(
        logp, logp_old, adv, clip_eps, mask, clip_eps_high
    )
    n_valid = valid.sum().clamp(min=1)
    loss = torch.where(valid, per_element, zero).sum() / n_valid
    with torch.no_grad():
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binding = (above & (adv > 0)) | (low & (adv < 0))
        n = n_valid.item()
        info = {
            "clip_fraction": ((low | above) & valid).sum().item() / n,
            "clip_active_fraction": (binding & valid).sum().item() / n,
            "approx_kl": torch.where(valid, -log_ratio, zero).sum().item() / n,  # old_approx_kl = (-logratio).mean()
        }
    return loss, info


def w69_clipped_surrogate_loss_tensor_diagnostics(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    valid, zero, log_ratio, ratio, adv, high, per_element = _surrogate_parts(
        logp, logp_old, adv, clip_eps, mask, clip_eps_high
    )
    n_valid = valid.sum().clamp(min=1)
    loss = torch.where(valid, per_element, zero).sum() / n_valid
    with torch.no_grad():
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binding = (above & (adv > 0)) | (low & (adv < 0))
        info = {
            "clip_fraction": ((low | above) & valid).sum() / n_valid,
            "clip_active_fraction": (binding & valid).sum() / n_valid,
            "approx_kl": torch.where(valid, (ratio - 1.0) - log_ratio, zero).sum() / n_valid,
        }
    return loss, info


def w70_clipped_surrogate_loss_unclamped_count_in_diagnostics(
    logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None
):
    valid, zero, log_ratio, ratio, adv, high, per_element = _surrogate_parts(
        logp, logp_old, adv, clip_eps, mask, clip_eps_high
    )
    loss = torch.where(valid, per_element, zero).sum() / valid.sum().clamp(min=1)
    with torch.no_grad():
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binding = (above & (adv > 0)) | (low & (adv < 0))
        n = valid.sum()  # the loss already handles an empty batch
        info = {
            "clip_fraction": (((low | above) & valid).sum() / n).item(),
            "clip_active_fraction": ((binding & valid).sum() / n).item(),
            "approx_kl": (torch.where(valid, (ratio - 1.0) - log_ratio, zero).sum() / n).item(),
        }
    return loss, info


def w71_clipped_surrogate_loss_kl_log_ratio_flipped(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    valid, zero, log_ratio, ratio, adv, high, per_element = _surrogate_parts(
        logp, logp_old, adv, clip_eps, mask, clip_eps_high
    )
    n_valid = valid.sum().clamp(min=1)
    loss = torch.where(valid, per_element, zero).sum() / n_valid
    with torch.no_grad():
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binding = (above & (adv > 0)) | (low & (adv < 0))
        n = n_valid.item()
        log_r = torch.where(valid, logp_old - logp, zero)  # log r
        info = {
            "clip_fraction": ((low | above) & valid).sum().item() / n,
            "clip_active_fraction": (binding & valid).sum().item() / n,
            "approx_kl": torch.where(valid, (ratio - 1.0) - log_r, zero).sum().item() / n,
        }
    return loss, info


def r25_clipped_surrogate_loss_clip_in_log_space(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    upper = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones(logp.shape, dtype=torch.bool) if mask is None else mask != 0
    log_ratio = (logp - logp_old.detach()).masked_fill(~valid, 0.0)
    advantages = adv.detach().masked_fill(~valid, 0.0)
    # clipping the ratio to [1 - eps, 1 + eps_high] is clipping its log to [log(1 - eps), log(1 + eps_high)]
    lowest = math.log(1.0 - clip_eps) if clip_eps < 1.0 else -math.inf
    clipped_log_ratio = log_ratio.clamp(lowest, math.log1p(upper))
    ratio = log_ratio.exp()
    per_element = -torch.minimum(ratio * advantages, clipped_log_ratio.exp() * advantages)
    count = max(int(valid.sum()), 1)
    loss = per_element.masked_fill(~valid, 0.0).sum() / count
    with torch.no_grad():
        outside = valid & ((ratio < 1.0 - clip_eps) | (ratio > 1.0 + upper))
        binds = valid & (((ratio > 1.0 + upper) & (advantages > 0)) | ((ratio < 1.0 - clip_eps) & (advantages < 0)))
        kl = ((ratio - 1.0) - log_ratio).masked_fill(~valid, 0.0)
        info = {
            "clip_fraction": float(outside.sum()) / count,
            "clip_active_fraction": float(binds.sum()) / count,
            "approx_kl": float(kl.sum()) / count,
        }
    return loss, info


def r26_clipped_surrogate_loss_boolean_selection(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    upper = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    new, old, a = logp[valid], logp_old.detach()[valid], adv.detach()[valid]  # (n,) valid entries only
    ratio = torch.exp(new - old)
    surrogate = torch.minimum(ratio * a, ratio.clamp(1.0 - clip_eps, 1.0 + upper) * a)
    n = max(new.numel(), 1)
    loss = -surrogate.sum() / n
    with torch.no_grad():
        below, above = ratio < 1.0 - clip_eps, ratio > 1.0 + upper
        info = {
            "clip_fraction": (below | above).sum().item() / n,
            "clip_active_fraction": ((above & (a > 0)) | (below & (a < 0))).sum().item() / n,
            "approx_kl": (torch.expm1(new - old) - (new - old)).sum().item() / n,
        }
    return loss, info


ROWS += [
    _row(
        "clipped_surrogate_loss",
        "05",
        w66_clipped_surrogate_loss_fractions_over_every_entry,
        "Divides clip_fraction and clip_active_fraction by every entry, padding included, instead of the valid ones.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w67_clipped_surrogate_loss_active_is_any_clip,
        "Counts the clip as active wherever the ratio is outside the range and the advantage is nonzero, any sign.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w68_clipped_surrogate_loss_old_cleanrl_kl,
        "Reports CleanRL's old approx_kl, the mean of -log(ratio), instead of the mean of (ratio - 1) - log(ratio).",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w69_clipped_surrogate_loss_tensor_diagnostics,
        "Returns the three diagnostics as 0-dimensional tensors instead of Python floats.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w70_clipped_surrogate_loss_unclamped_count_in_diagnostics,
        "Divides the diagnostics by the unclamped count of valid entries, so an all-padding batch gives NaN.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w71_clipped_surrogate_loss_kl_log_ratio_flipped,
        "Subtracts log(pi_old / pi_theta) instead of log(ratio) in approx_kl, so it averages (r - 1) + log r.",
    ),
    _row("clipped_surrogate_loss", "05", r25_clipped_surrogate_loss_clip_in_log_space),
    _row("clipped_surrogate_loss", "05", r26_clipped_surrogate_loss_boolean_selection),
]


# ---------------------------------------------------------------------------
# Chapter 05: value_loss
# ---------------------------------------------------------------------------


def w72_value_loss_clips_around_returns(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    values = torch.where(valid, values, zero)
    returns = torch.where(valid, returns.detach(), zero)
    squared_error = (values - returns) ** 2
    if clip_eps is not None:
        values_clipped = returns + torch.clamp(values - returns, -clip_eps, clip_eps)
        squared_error = torch.maximum(squared_error, (values_clipped - returns) ** 2)
    return 0.5 * torch.where(valid, squared_error, zero).sum() / valid.sum().clamp(min=1)


def w73_value_loss_values_old_keeps_its_graph(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    values = torch.where(valid, values, zero)
    returns = torch.where(valid, returns.detach(), zero)
    squared_error = (values - returns) ** 2
    if clip_eps is not None:
        values_old = torch.where(valid, values_old, zero)
        values_clipped = values_old + torch.clamp(values - values_old, -clip_eps, clip_eps)
        squared_error = torch.maximum(squared_error, (values_clipped - returns) ** 2)
    return 0.5 * torch.where(valid, squared_error, zero).sum() / valid.sum().clamp(min=1)


def w74_value_loss_sb3_mse(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    values = torch.where(valid, values, zero)
    returns = torch.where(valid, returns.detach(), zero)
    squared_error = (values - returns) ** 2
    if clip_eps is not None:
        values_old = torch.where(valid, values_old.detach(), zero)
        values_clipped = values_old + torch.clamp(values - values_old, -clip_eps, clip_eps)
        squared_error = torch.maximum(squared_error, (values_clipped - returns) ** 2)
    return torch.where(valid, squared_error, zero).sum() / valid.sum().clamp(min=1)  # F.mse_loss, as SB3


def w75_value_loss_mse_of_selected_entries(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    v, R = values[valid], returns.detach()[valid]
    if clip_eps is None:
        return 0.5 * F.mse_loss(v, R)
    v_old = values_old.detach()[valid]
    v_clipped = v_old + torch.clamp(v - v_old, -clip_eps, clip_eps)
    return 0.5 * torch.maximum((v - R) ** 2, (v_clipped - R) ** 2).mean()


def w76_value_loss_optimistic_min(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    values = torch.where(valid, values, zero)
    returns = torch.where(valid, returns.detach(), zero)
    squared_error = (values - returns) ** 2
    if clip_eps is not None:
        values_old = torch.where(valid, values_old.detach(), zero)
        values_clipped = values_old + torch.clamp(values - values_old, -clip_eps, clip_eps)
        squared_error = torch.minimum(squared_error, (values_clipped - returns) ** 2)
    return 0.5 * torch.where(valid, squared_error, zero).sum() / valid.sum().clamp(min=1)


def r27_value_loss_tensor_bounds(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones(values.shape, dtype=torch.bool) if mask is None else mask != 0
    targets = returns.detach().masked_fill(~valid, 0.0)
    current = values.masked_fill(~valid, 0.0)
    errors = [(current - targets).square()]
    if clip_eps is not None:
        old = values_old.detach().masked_fill(~valid, 0.0)
        kept_near = torch.clamp(current, old - clip_eps, old + clip_eps)  # clamp with tensor bounds
        errors.append((kept_near - targets).square())
    worst = torch.stack(errors).amax(dim=0)
    return worst.masked_fill(~valid, 0.0).sum() / (2 * valid.sum().clamp(min=1))


def r28_value_loss_huberless_halves(values, returns, values_old=None, clip_eps=None, mask=None):
    weights = torch.ones_like(values) if mask is None else mask.to(values.dtype)
    keep = weights > 0
    diff = torch.where(keep, values - returns.detach(), torch.zeros_like(values))
    loss_terms = 0.5 * diff * diff
    if clip_eps is not None:
        moved = torch.where(keep, values - values_old.detach(), torch.zeros_like(values))
        clipped_diff = torch.where(keep, values_old.detach() - returns.detach(), torch.zeros_like(values))
        clipped_diff = clipped_diff + moved.clamp(-clip_eps, clip_eps)
        loss_terms = torch.maximum(loss_terms, 0.5 * clipped_diff * clipped_diff)
    return loss_terms.sum() / keep.sum().clamp(min=1)


ROWS += [
    _row(
        "value_loss",
        "05",
        w72_value_loss_clips_around_returns,
        "Clips the new value around the returns instead of around values_old.",
    ),
    _row(
        "value_loss",
        "05",
        w73_value_loss_values_old_keeps_its_graph,
        "Does not detach values_old, so gradient flows into it through the clipped term.",
    ),
    _row(
        "value_loss",
        "05",
        w74_value_loss_sb3_mse,
        "Leaves out the factor 0.5 (Stable-Baselines3's mean squared error).",
    ),
    _row(
        "value_loss",
        "05",
        w75_value_loss_mse_of_selected_entries,
        "Averages the selected valid entries with F.mse_loss / .mean(), which is NaN when no entry is valid.",
    ),
    _row(
        "value_loss",
        "05",
        w76_value_loss_optimistic_min,
        "Takes the minimum of the clipped and unclipped errors instead of the maximum.",
    ),
    _row("value_loss", "05", r27_value_loss_tensor_bounds),
    _row("value_loss", "05", r28_value_loss_huberless_halves),
]


# ---------------------------------------------------------------------------
# Chapter 05: PPOLoss
# ---------------------------------------------------------------------------


def _my_clipped_surrogate_loss(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    """A chapter 05 student's own (right) exercise 1, reused by the PPOLoss students."""
    valid, zero, log_ratio, ratio, adv, high, per_element = _surrogate_parts(
        logp, logp_old, adv, clip_eps, mask, clip_eps_high
    )
    return torch.where(valid, per_element, zero).sum() / valid.sum().clamp(min=1), {}


def _my_value_loss(values, returns, values_old=None, clip_eps=None, mask=None):
    """A chapter 05 student's own (right) exercise 2, reused by the PPOLoss students."""
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    error = torch.where(valid, values - returns.detach(), zero) ** 2
    return 0.5 * error.sum() / valid.sum().clamp(min=1)


def _masked_mean(x, mask):
    valid = torch.ones_like(x, dtype=torch.bool) if mask is None else mask.bool()
    return torch.where(valid, x, torch.zeros_like(x)).sum() / valid.sum().clamp(min=1)


class _PPOLossInit(nn.Module):
    """``__init__`` as the exercise gives it."""

    def __init__(self, clip_epsilon: float = 0.2, value_loss_coef: float = 0.5, entropy_coef: float = 0.01):
        super().__init__()
        self.clip_epsilon = clip_epsilon
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef


class w77_PPOLoss_entropy_detached(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _my_clipped_surrogate_loss(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = _my_value_loss(values, returns, mask=mask)
        mean_entropy = _masked_mean(entropy.detach(), mask)  # a bonus, logged like the others
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * mean_entropy


class w78_PPOLoss_policy_term_unmasked(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _my_clipped_surrogate_loss(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon)
        v_loss = _my_value_loss(values, returns, mask=mask)
        mean_entropy = _masked_mean(entropy, mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * mean_entropy


class w79_PPOLoss_normalises_advantages(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        # CleanRL's norm_adv, per minibatch
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        policy_loss, _ = _my_clipped_surrogate_loss(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = _my_value_loss(values, returns, mask=mask)
        mean_entropy = _masked_mean(entropy, mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * mean_entropy


class w80_PPOLoss_returns_loss_and_parts(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _my_clipped_surrogate_loss(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = _my_value_loss(values, returns, mask=mask)
        mean_entropy = _masked_mean(entropy, mask)
        total = policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * mean_entropy
        parts = {"policy": policy_loss.item(), "value": v_loss.item(), "entropy": mean_entropy.item()}
        return total, parts


class w81_PPOLoss_value_loss_mse(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _my_clipped_surrogate_loss(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = 2.0 * _my_value_loss(values, returns, mask=mask)  # the plain mean squared error of eq. 9
        mean_entropy = _masked_mean(entropy, mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * mean_entropy


class w82_PPOLoss_clip_epsilon_as_value_clip(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _my_clipped_surrogate_loss(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        # the critic may not move further than clip_epsilon from the targets either
        clipped_values = torch.clamp(values, returns - self.clip_epsilon, returns + self.clip_epsilon)
        v_loss = _my_value_loss(clipped_values, returns, mask=mask)
        mean_entropy = _masked_mean(entropy, mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * mean_entropy


class r29_PPOLoss_one_masked_mean_helper(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = r25_clipped_surrogate_loss_clip_in_log_space(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = r27_value_loss_tensor_bounds(values, returns, mask=mask)
        valid = torch.ones(entropy.shape, dtype=torch.bool) if mask is None else mask != 0
        bonus = entropy.masked_fill(~valid, 0.0).sum() / valid.sum().clamp(min=1)
        self.info = {"policy_loss": policy_loss.item(), "value_loss": v_loss.item(), "entropy": bonus.item()}
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * bonus


class r30_PPOLoss_weighted_sum_of_terms(_PPOLossInit):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        terms = torch.stack(
            [
                _my_clipped_surrogate_loss(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask)[
                    0
                ],
                r28_value_loss_huberless_halves(values, returns, mask=mask),
                _masked_mean(entropy, mask),
            ]
        )
        coefficients = torch.tensor([1.0, self.value_loss_coef, -self.entropy_coef], dtype=terms.dtype)
        return (coefficients * terms).sum()


ROWS += [
    _row("PPOLoss", "05", w77_PPOLoss_entropy_detached, "Detaches the entropy, so the bonus gives no gradient."),
    _row(
        "PPOLoss",
        "05",
        w78_PPOLoss_policy_term_unmasked,
        "Does not pass the mask to the clipped surrogate, so padding enters the policy loss.",
    ),
    _row(
        "PPOLoss",
        "05",
        w79_PPOLoss_normalises_advantages,
        "Normalises the advantages inside forward (CleanRL's norm_adv) instead of using them as given.",
    ),
    _row(
        "PPOLoss",
        "05",
        w80_PPOLoss_returns_loss_and_parts,
        "Returns a (loss, parts) tuple instead of the loss tensor.",
    ),
    _row(
        "PPOLoss",
        "05",
        w81_PPOLoss_value_loss_mse,
        "Uses the plain mean squared error for the value term, twice the exercise's value loss with its 0.5.",
    ),
    _row(
        "PPOLoss",
        "05",
        w82_PPOLoss_clip_epsilon_as_value_clip,
        "Clamps the values to within clip_epsilon of the returns before the value loss, which is to stay unclipped.",
    ),
    _row("PPOLoss", "05", r29_PPOLoss_one_masked_mean_helper),
    _row("PPOLoss", "05", r30_PPOLoss_weighted_sum_of_terms),
]


# ---------------------------------------------------------------------------
# Chapter 06: group_advantages
# ---------------------------------------------------------------------------


def w83_group_advantages_isclose_counts_as_equal(rewards, normalize_std=True, eps=1e-6):
    mean = rewards.mean(dim=-1, keepdim=True)
    adv = rewards - mean
    all_equal = torch.isclose(rewards, mean).all(dim=-1, keepdim=True)  # robust to rounding
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    return adv / (rewards.std(dim=-1, keepdim=True) + eps)


def w84_group_advantages_eps_inside_sqrt(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    return adv / torch.sqrt(rewards.var(dim=-1, keepdim=True) + eps)


def w85_group_advantages_mean_without_keepdim(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    return adv / (rewards.std(dim=-1, keepdim=True) + eps)


def w86_group_advantages_equality_over_the_batch(rewards, normalize_std=True, eps=1e-6):
    if rewards.shape[-1] == 1 or bool((rewards == rewards.flatten()[0]).all()):
        return torch.zeros_like(rewards)  # nothing to learn from
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    if not normalize_std:
        return adv
    return adv / (rewards.std(dim=-1, keepdim=True) + eps)


def w87_group_advantages_eps_after_division(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    if not normalize_std or rewards.shape[-1] == 1:
        return torch.where(all_equal, torch.zeros_like(adv), adv)
    std = rewards.std(dim=-1, keepdim=True)
    return torch.where(all_equal, torch.zeros_like(adv), adv / std + eps)


def w88_group_advantages_subtracts_in_place(rewards, normalize_std=True, eps=1e-6):
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True) if rewards.shape[-1] > 1 else None
    adv = rewards.sub_(rewards.mean(dim=-1, keepdim=True))
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if not normalize_std or std is None:
        return adv
    return adv / (std + eps)


def r31_group_advantages_masked_fill_range(rewards, normalize_std=True, eps=1e-6):
    G = rewards.shape[-1]
    spread_zero = rewards.amax(dim=-1, keepdim=True) == rewards.amin(dim=-1, keepdim=True)
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    if normalize_std and G > 1:
        adv = adv / (rewards.std(dim=-1, keepdim=True) + eps)
    return adv.masked_fill(spread_zero, 0.0)


def r32_group_advantages_row_loop(rewards, normalize_std=True, eps=1e-6):
    rows = []
    for group in rewards:
        if len(group) == 1 or torch.unique(group).numel() == 1:
            rows.append(torch.zeros_like(group))
            continue
        centred = group - group.mean()
        rows.append(centred / (group.std() + eps) if normalize_std else centred)
    return torch.stack(rows)


ROWS += [
    _row(
        "group_advantages",
        "06",
        w83_group_advantages_isclose_counts_as_equal,
        "Finds all-equal groups with torch.isclose against the mean, so nearly equal rewards get zeros.",
    ),
    _row(
        "group_advantages",
        "06",
        w84_group_advantages_eps_inside_sqrt,
        "Adds eps to the variance inside the square root instead of to the std.",
    ),
    _row(
        "group_advantages",
        "06",
        w85_group_advantages_mean_without_keepdim,
        "Takes the group mean without keepdim, so the (B,) means broadcast along the group axis.",
    ),
    _row(
        "group_advantages",
        "06",
        w86_group_advantages_equality_over_the_batch,
        "Tests whether all rewards of the whole batch are equal, not each group, so an all-equal group beside a "
        "mixed one is not zeroed.",
    ),
    _row(
        "group_advantages",
        "06",
        w87_group_advantages_eps_after_division,
        "Adds eps after dividing by the std (adv / std + eps) instead of to the std.",
    ),
    _row(
        "group_advantages",
        "06",
        w88_group_advantages_subtracts_in_place,
        "Subtracts the group mean from the rewards in place (sub_), changing the caller's tensor.",
    ),
    _row("group_advantages", "06", r31_group_advantages_masked_fill_range),
    _row("group_advantages", "06", r32_group_advantages_row_loop),
]


# ---------------------------------------------------------------------------
# Chapter 06: kl_estimate
# ---------------------------------------------------------------------------


def _kl_kind(kind):
    if kind not in ("k1", "k2", "k3"):
        raise ValueError(f"kind: expected 'k1', 'k2' or 'k3', got {kind!r}")


def w89_kl_estimate_verl_clamp(logp, logp_ref, kind):
    _kl_kind(kind)
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    return torch.clamp(torch.expm1(log_r) - log_r, -10.0, 10.0)  # verl's low_var_kl bounds


def w90_kl_estimate_mean_over_tokens(logp, logp_ref, kind):
    _kl_kind(kind)
    log_r = logp_ref - logp
    estimates = {"k1": -log_r, "k2": 0.5 * log_r**2, "k3": torch.expm1(log_r) - log_r}
    return estimates[kind].mean()  # the estimate of the KL


def w91_kl_estimate_ratio_through_numpy(logp, logp_ref, kind):
    _kl_kind(kind)
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    r = torch.as_tensor(np.exp(log_r.detach().cpu().numpy()), dtype=logp.dtype)
    return (r - 1.0) - log_r


def w92_kl_estimate_k2_squares_ratio_minus_one(logp, logp_ref, kind):
    _kl_kind(kind)
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * torch.expm1(log_r) ** 2  # 0.5 (r - 1)^2
    return torch.expm1(log_r) - log_r


def w93_kl_estimate_k3_of_the_reverse_ratio(logp, logp_ref, kind):
    _kl_kind(kind)
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    log_ratio = logp - logp_ref  # pi_theta / pi_ref
    return torch.expm1(log_ratio) - log_ratio


def r33_kl_estimate_table_of_lambdas(logp, logp_ref, kind):
    estimators = {
        "k1": lambda d: d,  # d = logp - logp_ref = -log r
        "k2": lambda d: d.square() / 2,
        "k3": lambda d: torch.expm1(-d) + d,
    }
    if kind not in estimators:
        raise ValueError(f"kind: expected one of {sorted(estimators)}, got {kind!r}")
    return estimators[kind](logp - logp_ref)


def r34_kl_estimate_match_statement(logp, logp_ref, kind):
    log_r = logp_ref - logp
    match kind:
        case "k1":
            return log_r.neg()
        case "k2":
            return 0.5 * log_r * log_r
        case "k3":
            return log_r.expm1() - log_r
        case _:
            raise ValueError(f"kind: expected 'k1', 'k2' or 'k3', got {kind!r}")


ROWS += [
    _row(
        "kl_estimate",
        "06",
        w89_kl_estimate_verl_clamp,
        "Clamps k3 to [-10, 10] as verl does, which the course does not.",
    ),
    _row(
        "kl_estimate",
        "06",
        w90_kl_estimate_mean_over_tokens,
        "Returns the mean over the tokens instead of one estimate per token.",
    ),
    _row(
        "kl_estimate",
        "06",
        w91_kl_estimate_ratio_through_numpy,
        "Computes k3's ratio r with numpy on detached values, so its term gives no gradient to logp.",
    ),
    _row(
        "kl_estimate",
        "06",
        w92_kl_estimate_k2_squares_ratio_minus_one,
        "Computes k2 as 0.5 * (r - 1)^2 instead of 0.5 * (log r)^2.",
    ),
    _row(
        "kl_estimate",
        "06",
        w93_kl_estimate_k3_of_the_reverse_ratio,
        "Uses pi_theta / pi_ref as the ratio in k3, instead of r = pi_ref / pi_theta.",
    ),
    _row("kl_estimate", "06", r33_kl_estimate_table_of_lambdas),
    _row("kl_estimate", "06", r34_kl_estimate_match_statement),
]


# ---------------------------------------------------------------------------
# Chapter 06: aggregate_loss
# ---------------------------------------------------------------------------

_AGG_MODES = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm")


def _agg_mode(mode):
    if mode not in _AGG_MODES:
        raise ValueError(f"mode: expected one of {_AGG_MODES}, got {mode!r}")


def w94_aggregate_loss_drops_empty_responses(per_token, mask, mode, max_len=None):
    _agg_mode(mode)
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        nonempty = n_valid > 0  # later verl: empty responses leave the mean
        return (per_response / n_valid.clamp(min=1))[nonempty].sum() / nonempty.sum().clamp(min=1)
    L = per_token.shape[-1] if max_len is None else max_len
    return (per_response / L).mean()


def w95_aggregate_loss_longest_valid_length(per_token, mask, mode, max_len=None):
    _agg_mode(mode)
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        return (per_response / n_valid.clamp(min=1)).mean()
    L = n_valid.max().clamp(min=1) if max_len is None else max_len  # the longest response
    return (per_response / L).mean()


def w96_aggregate_loss_verl_sum_norm(per_token, mask, mode, max_len=None):
    _agg_mode(mode)
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        return (per_response / n_valid.clamp(min=1)).mean()
    L = per_token.shape[-1] if max_len is None else max_len
    return per_response.sum() / L  # verl: the sum over responses, over the padded length


def w97_aggregate_loss_returns_item(per_token, mask, mode, max_len=None):
    _agg_mode(mode)
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        loss = per_token.sum() / n_valid.sum().clamp(min=1)
    elif mode == "seq-mean-token-mean":
        loss = (per_token.sum(dim=-1) / n_valid.clamp(min=1)).mean()
    else:
        L = per_token.shape[-1] if max_len is None else max_len
        loss = (per_token.sum(dim=-1) / L).mean()
    return loss.item()


def w98_aggregate_loss_mean_over_first_axis_only(per_token, mask, mode, max_len=None):
    _agg_mode(mode)
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        per_response = per_response / n_valid.clamp(min=1)
    else:
        per_response = per_response / (per_token.shape[-1] if max_len is None else max_len)
    if per_response.dim() == 0:
        return per_response
    return per_response.mean(dim=0).sum()  # mean over the batch


def r35_aggregate_loss_weights_per_response(per_token, mask, mode, max_len=None):
    _agg_mode(mode)
    valid = mask.bool() if mask.dtype == torch.bool else mask > 0
    lengths = valid.sum(dim=-1, keepdim=True).to(per_token.dtype)  # (..., 1)
    N = lengths.numel()
    if mode == "token-mean":
        weight = torch.ones_like(lengths) / lengths.sum().clamp(min=1)
    elif mode == "seq-mean-token-mean":
        weight = 1.0 / (N * lengths.clamp(min=1))
    else:
        weight = torch.full_like(lengths, 1.0 / (N * (per_token.shape[-1] if max_len is None else max_len)))
    return per_token.masked_fill(~valid, 0.0).mul(weight).sum()


def r36_aggregate_loss_flattened_rows(per_token, mask, mode, max_len=None):
    _agg_mode(mode)
    T = per_token.shape[-1]
    rows = per_token.reshape(-1, T)
    keep = (mask != 0).reshape(-1, T)
    sums = torch.where(keep, rows, torch.zeros_like(rows)).sum(dim=1)  # (N,)
    counts = keep.sum(dim=1)
    if mode == "token-mean":
        return sums.sum() / max(int(counts.sum()), 1)
    if mode == "seq-mean-token-mean":
        return (sums / counts.clamp(min=1)).mean()
    return sums.mean() / (T if max_len is None else max_len)


ROWS += [
    _row(
        "aggregate_loss",
        "06",
        w94_aggregate_loss_drops_empty_responses,
        "Leaves empty responses out of the per-sequence mean over responses, instead of counting them as 0.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w95_aggregate_loss_longest_valid_length,
        "Uses the longest valid length in the batch as Dr. GRPO's default constant instead of the padded T.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w96_aggregate_loss_verl_sum_norm,
        "Sums the Dr. GRPO mode over responses (verl's convention) instead of taking the mean over them.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w97_aggregate_loss_returns_item,
        "Returns the loss as a Python float (.item()) instead of a tensor that carries the gradient.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w98_aggregate_loss_mean_over_first_axis_only,
        "Averages the per-response terms over the first axis only and sums the rest, so [B, G, T] inputs are G "
        "times too large.",
    ),
    _row("aggregate_loss", "06", r35_aggregate_loss_weights_per_response),
    _row("aggregate_loss", "06", r36_aggregate_loss_flattened_rows),
]


# ---------------------------------------------------------------------------
# Chapter 06: grpo_loss
# ---------------------------------------------------------------------------


def _grpo_pieces(logp, logp_old, rewards, clip_eps, normalize_std, clip_eps_high, adv):
    """What every chapter 06 grpo_loss student computes first: advantages, ratio and the clipped surrogate."""
    if adv is None:
        adv = grpo.group_advantages(rewards.detach(), normalize_std=normalize_std)
    adv = adv.detach()
    adv_tokens = adv.unsqueeze(-1).expand_as(logp)
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_token = -torch.minimum(ratio * adv_tokens, clipped * adv_tokens)
    return adv, adv_tokens, high, ratio, per_token


def _grpo_info(ratio, adv, adv_tokens, mask, clip_eps, high, kl, rewards):
    with torch.no_grad():
        valid = mask.bool()
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binding = (above & (adv_tokens > 0)) | (low & (adv_tokens < 0))
        info = {
            "clip_fraction": (low | above)[valid].double().mean().item(),
            "clip_active_fraction": binding[valid].double().mean().item(),
            "kl": kl[valid].mean().item() if kl is not None else 0.0,
            "adv_abs_mean": adv.abs().mean().item(),
        }
        if rewards is not None:
            info["reward_mean"] = rewards.mean().item()
    return info


def w99_grpo_loss_kl_info_over_padding(
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
    adv, adv_tokens, high, ratio, per_token = _grpo_pieces(
        logp, logp_old, rewards, clip_eps, normalize_std, clip_eps_high, adv
    )
    kl = None
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    info = _grpo_info(ratio, adv, adv_tokens, mask, clip_eps, high, kl, rewards)
    if kl is not None:
        info["kl"] = kl.detach().mean().item()  # the mean estimate
    return loss, info


def w100_grpo_loss_adv_abs_mean_over_tokens(
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
    adv, adv_tokens, high, ratio, per_token = _grpo_pieces(
        logp, logp_old, rewards, clip_eps, normalize_std, clip_eps_high, adv
    )
    kl = None
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    info = _grpo_info(ratio, adv, adv_tokens, mask, clip_eps, high, kl, rewards)
    info["adv_abs_mean"] = adv_tokens[mask.bool()].abs().mean().item()  # over the tokens it weighs
    return loss, info


def w101_grpo_loss_fraction_with_symmetric_range(
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
    adv, adv_tokens, high, ratio, per_token = _grpo_pieces(
        logp, logp_old, rewards, clip_eps, normalize_std, clip_eps_high, adv
    )
    kl = None
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    info = _grpo_info(ratio, adv, adv_tokens, mask, clip_eps, clip_eps, kl, rewards)  # the clip range
    return loss, info


def w102_grpo_loss_kl_token_mean_after_aggregation(
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
    adv, adv_tokens, high, ratio, per_token = _grpo_pieces(
        logp, logp_old, rewards, clip_eps, normalize_std, clip_eps_high, adv
    )
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    kl = None
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        valid = mask.bool()
        loss = loss + kl_coef * kl[valid].mean()  # the mean KL over the valid tokens
    info = _grpo_info(ratio, adv, adv_tokens, mask, clip_eps, high, kl, rewards)
    return loss, info


def w103_grpo_loss_default_normalisation(
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
    if adv is None:
        adv = grpo.group_advantages(rewards.detach())
    adv, adv_tokens, high, ratio, per_token = _grpo_pieces(
        logp, logp_old, None, clip_eps, normalize_std, clip_eps_high, adv
    )
    kl = None
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    return loss, _grpo_info(ratio, adv, adv_tokens, mask, clip_eps, high, kl, rewards)


def w104_grpo_loss_max_len_not_passed(
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
    adv, adv_tokens, high, ratio, per_token = _grpo_pieces(
        logp, logp_old, rewards, clip_eps, normalize_std, clip_eps_high, adv
    )
    kl = None
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, loss_agg)
    return loss, _grpo_info(ratio, adv, adv_tokens, mask, clip_eps, high, kl, rewards)


def r37_grpo_loss_log_space_clip(
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
    upper = clip_eps if clip_eps_high is None else clip_eps_high
    given = adv is not None
    advantages = (adv if given else grpo.group_advantages(rewards, normalize_std=normalize_std)).detach()
    A = advantages[..., None]  # (B, G, 1) broadcasts over the tokens
    log_ratio = logp - logp_old.detach()
    lowest = math.log(1.0 - clip_eps) if clip_eps < 1.0 else -math.inf
    surrogate = torch.minimum(log_ratio.exp() * A, log_ratio.clamp(lowest, math.log1p(upper)).exp() * A)
    per_token = -surrogate
    kl_tokens = None
    if logp_ref is not None:
        kl_tokens = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl_tokens
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len=max_len)
    with torch.no_grad():
        keep = mask.bool()
        ratio = log_ratio.exp()[keep]
        a = A.expand_as(logp)[keep]
        below, above = ratio < 1.0 - clip_eps, ratio > 1.0 + upper
        info = {
            "clip_fraction": (below | above).double().mean().item(),
            "clip_active_fraction": ((above & (a > 0)) | (below & (a < 0))).double().mean().item(),
            "kl": 0.0 if kl_tokens is None else kl_tokens[keep].double().mean().item(),
            "adv_abs_mean": advantages.abs().mean().item(),
        }
        if rewards is not None:
            info["reward_mean"] = rewards.mean().item()
    return loss, info


def r38_grpo_loss_where_clip(
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
    upper = clip_eps if clip_eps_high is None else clip_eps_high
    if adv is None:
        adv = grpo.group_advantages(rewards.detach(), normalize_std, 1e-6)
    A = repeat(adv.detach(), "B G -> B G T", T=logp.shape[-1])
    ratio = (logp - logp_old.detach()).exp()
    # the clipped branch wins where it is smaller: above the range with A > 0, below it with A < 0
    above = (ratio > 1.0 + upper) & (A > 0)
    below = (ratio < 1.0 - clip_eps) & (A < 0)
    capped = torch.where(above, torch.full_like(ratio, 1.0 + upper), ratio)
    capped = torch.where(below, torch.full_like(ratio, 1.0 - clip_eps), capped)
    per_token = -capped * A
    kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind) if logp_ref is not None else None
    if kl is not None:
        per_token = per_token + kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    return loss, _grpo_info(ratio, adv.detach(), A, mask, clip_eps, upper, kl, rewards)


ROWS += [
    _row(
        "grpo_loss",
        "06",
        w99_grpo_loss_kl_info_over_padding,
        "Reports info['kl'] as the mean over every token, padding included, instead of over the valid tokens.",
    ),
    _row(
        "grpo_loss",
        "06",
        w100_grpo_loss_adv_abs_mean_over_tokens,
        "Reports adv_abs_mean over the valid tokens (weighting long responses more) instead of over responses.",
    ),
    _row(
        "grpo_loss",
        "06",
        w101_grpo_loss_fraction_with_symmetric_range,
        "Computes the clip diagnostics with clip_eps on both sides, ignoring clip_eps_high there.",
    ),
    _row(
        "grpo_loss",
        "06",
        w102_grpo_loss_kl_token_mean_after_aggregation,
        "Adds the KL as a token mean after aggregating the surrogate, instead of to every token before loss_agg.",
    ),
    _row(
        "grpo_loss",
        "06",
        w103_grpo_loss_default_normalisation,
        "Calls group_advantages without normalize_std, so Dr. GRPO's advantages are still divided by the std.",
    ),
    _row(
        "grpo_loss",
        "06",
        w104_grpo_loss_max_len_not_passed,
        "Does not pass max_len to aggregate_loss, so Dr. GRPO divides by T instead of max_len.",
    ),
    _row("grpo_loss", "06", r37_grpo_loss_log_space_clip),
    _row("grpo_loss", "06", r38_grpo_loss_where_clip),
]


# ---------------------------------------------------------------------------
# Chapter 07: memory_accounting
# ---------------------------------------------------------------------------

_BYTES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}


def w105_memory_accounting_master_copy_when_dtypes_differ(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    master = o if weights_dtype != optimizer_dtype else 0  # mixed precision keeps a copy
    account = {
        "actor": n_params_actor * 2 * w,
        "critic": n_params_critic * 2 * w,
        "reference": n_params_ref * w,
        "reward": n_params_reward * w,
        "optimizer": (n_params_actor + n_params_critic) * (2 * o + master),
    }
    account["total"] = sum(account.values())
    return account


def w106_memory_accounting_bytes_from_bits(
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


def w107_memory_accounting_optimizer_for_every_model(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    master = o if w < o else 0
    loaded = n_params_actor + n_params_critic + n_params_ref + n_params_reward
    account = {
        "actor": n_params_actor * 2 * w,
        "critic": n_params_critic * 2 * w,
        "reference": n_params_ref * w,
        "reward": n_params_reward * w,
        "optimizer": loaded * (2 * o + master),  # Adam state for the parameters on the GPU
    }
    account["total"] = sum(account.values())
    return account


def w108_memory_accounting_master_in_weights_dtype(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    master = w if w < o else 0  # a second copy of the weights
    account = {
        "actor": n_params_actor * 2 * w,
        "critic": n_params_critic * 2 * w,
        "reference": n_params_ref * w,
        "reward": n_params_reward * w,
        "optimizer": (n_params_actor + n_params_critic) * (2 * o + master),
    }
    account["total"] = sum(account.values())
    return account


def w109_memory_accounting_total_of_models_only(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    master = o if w < o else 0
    account = {
        "actor": n_params_actor * 2 * w,
        "critic": n_params_critic * 2 * w,
        "reference": n_params_ref * w,
        "reward": n_params_reward * w,
    }
    account["total"] = sum(account.values())  # the models themselves
    account["optimizer"] = (n_params_actor + n_params_critic) * (2 * o + master)
    return account


def r39_memory_accounting_per_model_table(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    size = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}
    weight_bytes, state_bytes = size[weights_dtype], size[optimizer_dtype]
    models = {  # name: (parameters, trained?)
        "actor": (n_params_actor, True),
        "critic": (n_params_critic, True),
        "reference": (n_params_ref, False),
        "reward": (n_params_reward, False),
    }
    account, optimizer = {}, 0
    for name, (count, trained) in models.items():
        account[name] = count * weight_bytes * (2 if trained else 1)
        if trained:
            copies = 3 if weight_bytes < state_bytes else 2  # moments (+ master weights)
            optimizer += count * copies * state_bytes
    account["optimizer"] = optimizer
    account["total"] = sum(account.values())
    return account


def r40_memory_accounting_torch_itemsize(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    dtypes = {"fp64": torch.float64, "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    w = dtypes[weights_dtype].itemsize
    o = dtypes[optimizer_dtype].itemsize
    trained = int(n_params_actor) + int(n_params_critic)
    per_trained_state = 2 * o + (o if o > w else 0)
    account = {
        "actor": 2 * w * n_params_actor,
        "critic": 2 * w * n_params_critic,
        "reference": w * n_params_ref,
        "reward": w * n_params_reward,
        "optimizer": per_trained_state * trained,
    }
    account["total"] = account["actor"] + account["critic"] + account["reference"]
    account["total"] += account["reward"] + account["optimizer"]
    return account


ROWS += [
    _row(
        "memory_accounting",
        "07",
        w105_memory_accounting_master_copy_when_dtypes_differ,
        "Adds the master copy whenever the two dtypes differ, also when the weights are wider (fp64 weights).",
    ),
    _row(
        "memory_accounting",
        "07",
        w106_memory_accounting_bytes_from_bits,
        "Computes bytes as bits / 8 with true division, so every entry is a float instead of an int.",
    ),
    _row(
        "memory_accounting",
        "07",
        w107_memory_accounting_optimizer_for_every_model,
        "Counts Adam's state for the frozen reference and reward models too, not only the trained ones.",
    ),
    _row(
        "memory_accounting",
        "07",
        w108_memory_accounting_master_in_weights_dtype,
        "Counts the master copy in weights_dtype instead of optimizer_dtype.",
    ),
    _row(
        "memory_accounting",
        "07",
        w109_memory_accounting_total_of_models_only,
        "Computes the total before adding the optimizer row, so the total leaves out Adam's state.",
    ),
    _row("memory_accounting", "07", r39_memory_accounting_per_model_table),
    _row("memory_accounting", "07", r40_memory_accounting_torch_itemsize),
]


# ---------------------------------------------------------------------------
# Chapter 07: read_sweep
# ---------------------------------------------------------------------------


def _best_cell(reward):
    flat = int(torch.argmax(reward))
    return divmod(flat, reward.shape[1])


def w110_read_sweep_saturation_as_plateau(group_sizes, clip_eps, reward, tol=0.1):
    i, j = _best_cell(reward)
    best_per_group = reward.max(dim=1).values
    k = len(group_sizes) - 1
    for row in range(1, len(group_sizes)):
        if best_per_group[row] - best_per_group[row - 1] <= tol:  # no real gain from the larger group
            k = row - 1
            break
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w111_read_sweep_last_of_the_ties(group_sizes, clip_eps, reward, tol=0.1):
    i, j = (int(x) for x in torch.nonzero(reward == reward.max())[-1])
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w112_read_sweep_strictly_within_tol(group_sizes, clip_eps, reward, tol=0.1):
    i, j = _best_cell(reward)
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group > reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w113_read_sweep_tensor_clip_eps(group_sizes, clip_eps, reward, tol=0.1):
    i, j = _best_cell(reward)
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), clip_eps[j], int(group_sizes[k])


def w114_read_sweep_saturation_on_row_means(group_sizes, clip_eps, reward, tol=0.1):
    i, j = _best_cell(reward)
    typical = reward.mean(dim=1)  # each group size over the clip ranges
    k = int((typical >= reward.max() - tol).nonzero()[0, 0]) if (typical >= reward.max() - tol).any() else -1
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def r41_read_sweep_python_loops(group_sizes, clip_eps, reward, tol=0.1):
    table = reward.tolist()
    best_value, best = None, None
    for i, row in enumerate(table):
        for j, value in enumerate(row):
            if best_value is None or value > best_value:  # strict: the first (cheapest) maximum stays
                best_value, best = value, (i, j)
    saturation = next(i for i, row in enumerate(table) if max(row) >= best_value - tol)
    return int(group_sizes[best[0]]), float(clip_eps[best[1]]), int(group_sizes[saturation])


def r42_read_sweep_numpy_lexsort(group_sizes, clip_eps, reward, tol=0.1):
    table = reward.detach().cpu().numpy()
    rows, cols = np.indices(table.shape)
    order = np.lexsort((cols.ravel(), rows.ravel(), -table.ravel()))  # highest reward, then row, then column
    i, j = rows.ravel()[order[0]], cols.ravel()[order[0]]
    row_best = table.max(axis=1)
    k = int(np.flatnonzero(row_best >= table.max() - tol)[0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


ROWS += [
    _row(
        "read_sweep",
        "07",
        w110_read_sweep_saturation_as_plateau,
        "Takes saturation as the first group size after which the next one gains at most tol, not the first within "
        "tol of the table's best.",
    ),
    _row(
        "read_sweep",
        "07",
        w111_read_sweep_last_of_the_ties,
        "Breaks ties at the maximum with the last maximal cell (largest group, then clip range), not the first.",
    ),
    _row(
        "read_sweep",
        "07",
        w112_read_sweep_strictly_within_tol,
        "Requires a group's best to be strictly more than best - tol, so a row exactly tol below does not count.",
    ),
    _row(
        "read_sweep",
        "07",
        w113_read_sweep_tensor_clip_eps,
        "Returns best_clip_eps as a 0-dimensional tensor instead of a Python float.",
    ),
    _row(
        "read_sweep",
        "07",
        w114_read_sweep_saturation_on_row_means,
        "Finds saturation from each group size's mean over the clip ranges instead of its best.",
    ),
    _row("read_sweep", "07", r41_read_sweep_python_loops),
    _row("read_sweep", "07", r42_read_sweep_numpy_lexsort),
]


# ---------------------------------------------------------------------------
# Chapter 08: addition_exact_reward
# ---------------------------------------------------------------------------


def w115_addition_exact_reward_strips_spaces(completion, answer):
    head, eos, _ = completion.partition("$")
    return float(bool(eos) and head.strip() == answer)


def w116_addition_exact_reward_compares_as_integers(completion, answer):
    head, eos, _ = completion.partition("$")
    if not eos or not head.isdigit():
        return 0.0
    return float(int(head) == int(answer))


def w117_addition_exact_reward_last_eos(completion, answer):
    head, eos, _ = completion.rpartition("$")
    return float(bool(eos) and head == answer)


def w118_addition_exact_reward_returns_bool(completion, answer):
    head, eos, _ = completion.partition("$")
    return bool(eos) and head == answer


def w119_addition_exact_reward_regex_search(completion, answer):
    found = re.search(r"(\d+)\$", completion)  # the digits right before EOS
    return 1.0 if found is not None and found.group(1) == answer else 0.0


def r43_addition_exact_reward_startswith(completion, answer):
    return 1.0 if completion.startswith(answer + "$") else 0.0


def r44_addition_exact_reward_find_index(completion, answer):
    stop = completion.find("$")
    if stop == -1:
        return 0.0
    return float(completion[:stop] == answer)


ROWS += [
    _row(
        "addition_exact_reward",
        "08",
        w115_addition_exact_reward_strips_spaces,
        "Strips whitespace before comparing, so ' 132$' is paid.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w116_addition_exact_reward_compares_as_integers,
        "Compares int(head) with int(answer), so leading zeros ('0132$') are paid.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w117_addition_exact_reward_last_eos,
        "Splits at the last EOS (rpartition) instead of the first.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w118_addition_exact_reward_returns_bool,
        "Returns a bool instead of the float 1.0 or 0.0.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w119_addition_exact_reward_regex_search,
        "Looks for digits before a '$' anywhere with re.search, so text before the answer ('x132$') is paid.",
    ),
    _row("addition_exact_reward", "08", r43_addition_exact_reward_startswith),
    _row("addition_exact_reward", "08", r44_addition_exact_reward_find_index),
]


# ---------------------------------------------------------------------------
# Chapter 08: completion_mask
# ---------------------------------------------------------------------------


def w120_completion_mask_bool_mask(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return (torch.cumsum(is_eos, dim=-1) - is_eos) == 0


def w121_completion_mask_cumsum_over_first_axis(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    eos_before = torch.cumsum(is_eos, dim=0) - is_eos
    return (eos_before == 0).float()


def w122_completion_mask_through_second_eos(completion_ids, eos_id):
    seen = torch.cumsum((completion_ids == eos_id).long(), dim=-1)
    return (seen <= 1).float()  # up to the first EOS (one EOS seen)


def w123_completion_mask_first_eos_of_the_batch(completion_ids, eos_id):
    L = completion_ids.shape[-1]
    positions = (completion_ids == eos_id).nonzero()
    cut = int(positions[0, -1]) if len(positions) else L - 1  # where generation stopped
    return (torch.arange(L) <= cut).float().expand(completion_ids.shape).contiguous()


def w124_completion_mask_scatter_last_write_wins(completion_ids, eos_id):
    L = completion_ids.shape[-1]
    rows = completion_ids.reshape(-1, L)
    first = torch.full((rows.shape[0],), L - 1)
    r, c = (rows == eos_id).nonzero(as_tuple=True)
    first[r] = c  # one EOS per row
    mask = torch.arange(L)[None, :] <= first[:, None]
    return mask.float().reshape(completion_ids.shape)


def r45_completion_mask_cummax_shift(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).to(torch.int64)
    seen = is_eos.cummax(dim=-1).values  # 1 from the first EOS on
    seen_before = F.pad(seen, (1, 0))[..., :-1]  # ... strictly before t
    return (1 - seen_before).to(torch.float32)


def r46_completion_mask_cumprod_of_not_eos(completion_ids, eos_id):
    not_eos = (completion_ids != eos_id).float()
    alive = torch.cumprod(not_eos, dim=-1)  # 1 until the first EOS (exclusive)
    ones = torch.ones_like(alive[..., :1])
    return torch.cat([ones, alive[..., :-1]], dim=-1)  # shifted: the EOS itself stays in


ROWS += [
    _row(
        "completion_mask",
        "08",
        w120_completion_mask_bool_mask,
        "Returns a bool mask instead of a float32 one.",
    ),
    _row(
        "completion_mask",
        "08",
        w121_completion_mask_cumsum_over_first_axis,
        "Takes the cumulative sum over dim 0 instead of the token axis.",
    ),
    _row(
        "completion_mask",
        "08",
        w122_completion_mask_through_second_eos,
        "Keeps every position where at most one EOS has been seen, so tokens after the first EOS stay in until a "
        "second one.",
    ),
    _row(
        "completion_mask",
        "08",
        w123_completion_mask_first_eos_of_the_batch,
        "Cuts every row at the first EOS found in the whole batch instead of at each row's own.",
    ),
    _row(
        "completion_mask",
        "08",
        w124_completion_mask_scatter_last_write_wins,
        "Scatters every EOS position into one slot per row, so with two EOS a row is cut at the last one.",
    ),
    _row("completion_mask", "08", r45_completion_mask_cummax_shift),
    _row("completion_mask", "08", r46_completion_mask_cumprod_of_not_eos),
]


# ---------------------------------------------------------------------------
# Chapter 08: grpo_step
# ---------------------------------------------------------------------------


def _my_completion_mask(completion_ids, eos_id):
    """A chapter 08 student's own (right) completion_mask, the one their grpo_step calls."""
    is_eos = (completion_ids == eos_id).long()
    return ((torch.cumsum(is_eos, dim=-1) - is_eos) == 0).float()


def _step_logps(model, prompts, completions):
    """(B, G, L) log-probs of the completions under ``model``, the right way."""
    B, G, L = completions.shape
    P = prompts.shape[1]
    flat = rearrange(completions, "B G L -> (B G) L")
    ids = torch.cat([repeat(prompts, "B P -> (B G) P", G=G), flat[:, :-1]], dim=1)
    logits = model(ids)[:, P - 1 :, :]
    return rearrange(gather_log_probs(logits, flat), "(B G) L -> B G L", G=G)


def _reference_logps(ref_model, prompts, completions, kl_coef):
    if ref_model is None or kl_coef <= 0:
        return None
    with torch.no_grad():
        return _step_logps(ref_model, prompts, completions)


def w125_grpo_step_scores_each_token_at_its_own_position(
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
    flat = rearrange(completions, "B G L -> (B G) L")
    ids = torch.cat([repeat(prompts, "B P -> (B G) P", G=G), flat], dim=1)  # (B*G, P + L)
    logits = policy(ids)[:, P:, :]  # the completion's positions
    logp = rearrange(gather_log_probs(logits, flat), "(B G) L -> B G L", G=G)
    logp_ref = _reference_logps(ref_model, prompts, completions, kl_coef)
    mask = _my_completion_mask(completions, eos_id)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


def w126_grpo_step_clips_after_the_step(
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
    logp = _step_logps(policy, prompts, completions)
    logp_ref = _reference_logps(ref_model, prompts, completions, kl_coef)
    mask = _my_completion_mask(completions, eos_id)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    return loss.item()


def w127_grpo_step_returns_the_tensor(
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
    logp = _step_logps(policy, prompts, completions)
    logp_ref = _reference_logps(ref_model, prompts, completions, kl_coef)
    mask = _my_completion_mask(completions, eos_id)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.detach()


def w128_grpo_step_kl_coef_left_at_default(
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
    logp = _step_logps(policy, prompts, completions)
    logp_ref = _reference_logps(ref_model, prompts, completions, kl_coef)
    mask = _my_completion_mask(completions, eos_id)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


def w129_grpo_step_recomputes_logp_old(
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
    logp = _step_logps(policy, prompts, completions)
    logp_old = logp.detach()  # the policy that sampled them is the current one
    logp_ref = _reference_logps(ref_model, prompts, completions, kl_coef)
    mask = _my_completion_mask(completions, eos_id)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


def r47_grpo_step_repeat_interleave_and_view(
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
    flat = completions.reshape(B * G, L)
    inputs = torch.cat([prompts.repeat_interleave(G, dim=0), flat[:, : L - 1]], dim=1)

    def token_logps(model):
        logits = model(inputs).narrow(1, P - 1, L)  # (B*G, L, V)
        return gather_log_probs(logits, flat).view(B, G, L)

    logp = token_logps(policy)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = token_logps(ref_model)
    mask = _my_completion_mask(completions, eos_id)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    for p in policy.parameters():
        p.grad = None
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_norm=max_grad_norm)
    optimizer.step()
    return float(loss.detach())


def r48_grpo_step_group_by_group(
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

    def group_logps(model, b):
        ids = torch.cat([prompts[b].expand(G, P), completions[b, :, :-1]], dim=1)  # (G, P + L - 1)
        return gather_log_probs(model(ids)[:, P - 1 :], completions[b])  # (G, L)

    logp = torch.stack([group_logps(policy, b) for b in range(B)])
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = torch.stack([group_logps(ref_model, b) for b in range(B)])
    mask = _my_completion_mask(completions, eos_id)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


ROWS += [
    _row(
        "grpo_step",
        "08",
        w125_grpo_step_scores_each_token_at_its_own_position,
        "Feeds the whole completion and scores token t with the logits at position P + t, which predict the next "
        "token.",
    ),
    _row(
        "grpo_step",
        "08",
        w126_grpo_step_clips_after_the_step,
        "Clips the gradient norm after optimizer.step(), so the step uses unclipped gradients.",
    ),
    _row(
        "grpo_step",
        "08",
        w127_grpo_step_returns_the_tensor,
        "Returns the detached loss tensor instead of a Python float.",
    ),
    _row(
        "grpo_step",
        "08",
        w128_grpo_step_kl_coef_left_at_default,
        "Does not pass kl_coef to grpo_loss, so the KL weight is always grpo_loss's default 0.04.",
    ),
    _row(
        "grpo_step",
        "08",
        w129_grpo_step_recomputes_logp_old,
        "Ignores the given logp_old and uses the current policy's detached log-probs, so every ratio is 1.",
    ),
    _row("grpo_step", "08", r47_grpo_step_repeat_interleave_and_view),
    _row("grpo_step", "08", r48_grpo_step_group_by_group),
]


# ---------------------------------------------------------------------------
# Chapter 09: answer_reward
# ---------------------------------------------------------------------------


def _completion_text(completion):
    return completion if isinstance(completion, str) else completion[-1]["content"]


def w130_answer_reward_first_message(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(None)
            continue
        text = completion if isinstance(completion, str) else completion[0]["content"]  # the assistant's message
        rewards.append(math_answer_reward(text, str(truth)))
    return rewards


def w131_answer_reward_answer_per_prompt(prompts, completions, answer, **kwargs):
    distinct_prompts = []
    for prompt in prompts:
        if prompt not in distinct_prompts:
            distinct_prompts.append(prompt)
    G = len(completions) // len(distinct_prompts)  # completions per prompt
    rewards = []
    for i, completion in enumerate(completions):
        truth = answer[i // G]  # the answer of completion i's prompt
        rewards.append(None if truth is None else math_answer_reward(_completion_text(completion), str(truth)))
    return rewards


def w132_answer_reward_no_kwargs(prompts, completions, answer, completion_ids=None):
    return [
        None if truth is None else math_answer_reward(_completion_text(completion), str(truth))
        for completion, truth in zip(completions, answer)
    ]


def w133_answer_reward_joins_every_message(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(None)
            continue
        if isinstance(completion, str):
            text = completion
        else:
            text = "\n".join(message["content"] for message in completion)  # the whole conversation turn
        rewards.append(math_answer_reward(text, str(truth)))
    return rewards


def w134_answer_reward_tensor_with_nan(prompts, completions, answer, **kwargs):
    scores = [
        float("nan") if truth is None else math_answer_reward(_completion_text(completion), str(truth))
        for completion, truth in zip(completions, answer)
    ]
    return torch.tensor(scores)  # TRL stacks the rewards into a tensor anyway


def r49_answer_reward_comprehension(prompts, completions, answer, **kwargs):
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    return [None if a is None else math_answer_reward(t, str(a)) for t, a in zip(texts, answer)]


def r50_answer_reward_indexed_loop(*, prompts, completions, answer, **kwargs):
    rewards = [None] * len(completions)
    for i in range(len(completions)):
        if answer[i] is not None:
            last = completions[i] if isinstance(completions[i], str) else completions[i][len(completions[i]) - 1]
            text = last if isinstance(last, str) else last.get("content", "")
            rewards[i] = math_answer_reward(text, str(answer[i]))
    return rewards


ROWS += [
    _row(
        "answer_reward",
        "09",
        w130_answer_reward_first_message,
        "Reads the first message of a conversational completion instead of the last.",
    ),
    _row(
        "answer_reward",
        "09",
        w131_answer_reward_answer_per_prompt,
        "Indexes the answers by prompt (answer[i // G]), although TRL already repeated them once per completion.",
    ),
    _row(
        "answer_reward",
        "09",
        w132_answer_reward_no_kwargs,
        "Has no **kwargs in its signature, so TRL's other keyword arguments make the call fail.",
    ),
    _row(
        "answer_reward",
        "09",
        w133_answer_reward_joins_every_message,
        "Scores the text of every message joined together instead of the last message's content.",
    ),
    _row(
        "answer_reward",
        "09",
        w134_answer_reward_tensor_with_nan,
        "Returns a tensor with NaN for rows without an answer instead of a list with None.",
    ),
    _row("answer_reward", "09", r49_answer_reward_comprehension),
    _row("answer_reward", "09", r50_answer_reward_indexed_loop),
]


# ---------------------------------------------------------------------------
# Chapter 09: completion_logps
# ---------------------------------------------------------------------------


def _first_eos_mask(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return ((torch.cumsum(is_eos, dim=-1) - is_eos) == 0).float()


def w135_completion_logps_temperature_after_log_softmax(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids).logits
    logp_all = torch.log_softmax(logits[:, P - 1 : -1].float(), dim=-1) / temperature
    logp = logp_all.gather(-1, completion_ids[..., None]).squeeze(-1)
    return logp, _first_eos_mask(completion_ids, eos_id)


def w136_completion_logps_attends_to_padding(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    real = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    position_ids = (real.cumsum(-1) - 1).clamp(min=0)
    attention_mask = torch.ones_like(sequences)  # every column holds a token
    logits = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids).logits
    logp_all = torch.log_softmax(logits[:, P - 1 : -1].float() / temperature, dim=-1)
    logp = logp_all.gather(-1, completion_ids[..., None]).squeeze(-1)
    return logp, _first_eos_mask(completion_ids, eos_id)


def w137_completion_logps_bool_mask(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids).logits
    logp_all = torch.log_softmax(logits[:, P - 1 : -1].float() / temperature, dim=-1)
    logp = logp_all.gather(-1, completion_ids[..., None]).squeeze(-1)
    is_eos = (completion_ids == eos_id).long()
    return logp, (torch.cumsum(is_eos, dim=-1) - is_eos) == 0


def w138_completion_logps_padding_positions_minus_one(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    position_ids = attention_mask.cumsum(-1) - 1  # the first real token is position 0
    logits = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids).logits
    logp_all = torch.log_softmax(logits[:, P - 1 : -1].float() / temperature, dim=-1)
    logp = logp_all.gather(-1, completion_ids[..., None]).squeeze(-1)
    return logp, _first_eos_mask(completion_ids, eos_id)


def w139_completion_logps_under_no_grad(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():  # scoring only: no need for a graph
        logits = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids).logits
    logp_all = torch.log_softmax(logits[:, P - 1 : -1].float() / temperature, dim=-1)
    logp = logp_all.gather(-1, completion_ids[..., None]).squeeze(-1)
    return logp, _first_eos_mask(completion_ids, eos_id)


def r51_completion_logps_cross_entropy(model, sequences, prompt_mask, eos_id, temperature=1.0):
    B, P = prompt_mask.shape
    L = sequences.shape[1] - P
    targets = sequences[:, P:]
    attention = torch.ones_like(sequences)
    attention[:, :P] = prompt_mask.to(attention.dtype)
    positions = torch.where(attention.bool(), attention.cumsum(dim=1) - 1, torch.zeros_like(attention))
    out = model(input_ids=sequences, attention_mask=attention, position_ids=positions)
    scores = out.logits[:, P - 1 : P - 1 + L].float() / temperature  # (B, L, V)
    logp = -F.cross_entropy(scores.reshape(B * L, -1), targets.reshape(-1), reduction="none").view(B, L)
    eos_seen = (targets == eos_id).int().cumsum(dim=1)
    mask = ((eos_seen == 0) | ((eos_seen == 1) & (targets == eos_id))).float()
    return logp, mask


def r52_completion_logps_logsumexp(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion = sequences[:, P:]
    L = completion.shape[1]
    attention_mask = torch.cat([prompt_mask.long(), completion.new_ones(completion.shape)], dim=1)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids).logits
    scaled = logits[:, -L - 1 : -1].float() / temperature  # the L positions that predict the completion
    picked = scaled.gather(-1, completion.unsqueeze(-1)).squeeze(-1)
    logp = picked - torch.logsumexp(scaled, dim=-1)
    mask = _first_eos_mask(completion, eos_id)
    return logp, mask


ROWS += [
    _row(
        "completion_logps",
        "09",
        w135_completion_logps_temperature_after_log_softmax,
        "Divides the log-probs by the temperature after log_softmax instead of dividing the logits before it.",
    ),
    _row(
        "completion_logps",
        "09",
        w136_completion_logps_attends_to_padding,
        "Passes an all-ones attention mask, so the left padding is attended to.",
    ),
    _row(
        "completion_logps",
        "09",
        w137_completion_logps_bool_mask,
        "Returns the completion mask as a bool tensor instead of a float one.",
    ),
    _row(
        "completion_logps",
        "09",
        w138_completion_logps_padding_positions_minus_one,
        "Leaves the positions of the left padding at -1 (no clamp(min=0)), an invalid position for models with "
        "learned position embeddings.",
    ),
    _row(
        "completion_logps",
        "09",
        w139_completion_logps_under_no_grad,
        "Runs the forward pass under torch.no_grad(), so the log-probs carry no gradient.",
    ),
    _row("completion_logps", "09", r51_completion_logps_cross_entropy),
    _row("completion_logps", "09", r52_completion_logps_logsumexp),
]


# ---------------------------------------------------------------------------
# Chapter 09: grpo_config_kwargs
# ---------------------------------------------------------------------------

_SWITCHES = ("algo", "adv_estimator", "policy_loss", "dynamic_sampling", "overlong_cache", "kl_placement")
_SWITCHES += ("whiten_advantages",)
_LOSS_TYPES = {"seq-mean-token-mean": "grpo", "token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}


def _refuse(cfg, switches=_SWITCHES):
    defaults = LMRLConfig()
    for switch in switches:
        if getattr(cfg, switch) != getattr(defaults, switch):
            raise ValueError(f"cfg.{switch}: GRPOConfig has no field for {getattr(cfg, switch)!r} here")


def _split(cfg, num_processes):
    """(micro-batch, accumulation steps per process) of a course round, refusing what does not divide."""
    completions = cfg.prompts_per_step * cfg.group_size
    M = cfg.num_minibatches
    minibatch = completions // M
    per_process = minibatch // num_processes
    micro = cfg.micro_batch_size or per_process
    if completions % M or minibatch % num_processes or per_process % micro:
        raise ValueError(f"num_processes: {completions} completions do not split over {num_processes} processes")
    return micro, per_process // micro


def w140_grpo_config_kwargs_max_steps_in_rounds(cfg, num_processes=1):
    _refuse(cfg)
    micro, accumulation = _split(cfg, num_processes)
    steps = cfg.update_epochs * cfg.num_minibatches
    schedule = cfg.lr_schedule
    if schedule == "constant" and cfg.warmup_iterations > 0:
        schedule = "constant_with_warmup"
    return {
        "num_generations": cfg.group_size,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": cfg.num_minibatches * accumulation,
        "num_iterations": cfg.update_epochs,
        "max_steps": cfg.iterations,  # one step per round
        "warmup_steps": cfg.warmup_iterations * steps,
        "lr_scheduler_type": schedule,
        "learning_rate": cfg.lr,
        "max_grad_norm": cfg.max_grad_norm,
        "max_completion_length": cfg.max_new_tokens,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "beta": cfg.kl_coef,
        "use_bias_correction_kl": False,
        "epsilon": cfg.clip_eps,
        "epsilon_high": cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high,
        "loss_type": _LOSS_TYPES[cfg.loss_agg],
        "scale_rewards": "group" if cfg.normalize_std else "none",
        "mask_truncated_completions": cfg.overlong_filter,
        "seed": cfg.seed,
    }


def w141_grpo_config_kwargs_warmup_in_rounds(cfg, num_processes=1):
    _refuse(cfg)
    micro, accumulation = _split(cfg, num_processes)
    steps = cfg.update_epochs * cfg.num_minibatches
    schedule = cfg.lr_schedule
    if schedule == "constant" and cfg.warmup_iterations > 0:
        schedule = "constant_with_warmup"
    return {
        "num_generations": cfg.group_size,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": cfg.num_minibatches * accumulation,
        "num_iterations": cfg.update_epochs,
        "max_steps": cfg.iterations * steps,
        "warmup_steps": cfg.warmup_iterations,
        "lr_scheduler_type": schedule,
        "learning_rate": cfg.lr,
        "max_grad_norm": cfg.max_grad_norm,
        "max_completion_length": cfg.max_new_tokens,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "beta": cfg.kl_coef,
        "use_bias_correction_kl": False,
        "epsilon": cfg.clip_eps,
        "epsilon_high": cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high,
        "loss_type": _LOSS_TYPES[cfg.loss_agg],
        "scale_rewards": "group" if cfg.normalize_std else "none",
        "mask_truncated_completions": cfg.overlong_filter,
        "seed": cfg.seed,
    }


def w142_grpo_config_kwargs_accumulation_over_all_processes(cfg, num_processes=1):
    _refuse(cfg)
    micro, _ = _split(cfg, num_processes)
    minibatch = cfg.prompts_per_step * cfg.group_size // cfg.num_minibatches
    accumulation = minibatch // micro  # forward passes per optimiser step
    steps = cfg.update_epochs * cfg.num_minibatches
    schedule = cfg.lr_schedule
    if schedule == "constant" and cfg.warmup_iterations > 0:
        schedule = "constant_with_warmup"
    return {
        "num_generations": cfg.group_size,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": cfg.num_minibatches * accumulation,
        "num_iterations": cfg.update_epochs,
        "max_steps": cfg.iterations * steps,
        "warmup_steps": cfg.warmup_iterations * steps,
        "lr_scheduler_type": schedule,
        "learning_rate": cfg.lr,
        "max_grad_norm": cfg.max_grad_norm,
        "max_completion_length": cfg.max_new_tokens,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "beta": cfg.kl_coef,
        "use_bias_correction_kl": False,
        "epsilon": cfg.clip_eps,
        "epsilon_high": cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high,
        "loss_type": _LOSS_TYPES[cfg.loss_agg],
        "scale_rewards": "group" if cfg.normalize_std else "none",
        "mask_truncated_completions": cfg.overlong_filter,
        "seed": cfg.seed,
    }


def w143_grpo_config_kwargs_epsilon_high_passed_through(cfg, num_processes=1):
    _refuse(cfg)
    micro, accumulation = _split(cfg, num_processes)
    steps = cfg.update_epochs * cfg.num_minibatches
    schedule = cfg.lr_schedule
    if schedule == "constant" and cfg.warmup_iterations > 0:
        schedule = "constant_with_warmup"
    return {
        "num_generations": cfg.group_size,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": cfg.num_minibatches * accumulation,
        "num_iterations": cfg.update_epochs,
        "max_steps": cfg.iterations * steps,
        "warmup_steps": cfg.warmup_iterations * steps,
        "lr_scheduler_type": schedule,
        "learning_rate": cfg.lr,
        "max_grad_norm": cfg.max_grad_norm,
        "max_completion_length": cfg.max_new_tokens,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "beta": cfg.kl_coef,
        "use_bias_correction_kl": False,
        "epsilon": cfg.clip_eps,
        "epsilon_high": cfg.clip_eps_high,  # the same field under TRL's name
        "loss_type": _LOSS_TYPES[cfg.loss_agg],
        "scale_rewards": "group" if cfg.normalize_std else "none",
        "mask_truncated_completions": cfg.overlong_filter,
        "seed": cfg.seed,
    }


def w144_grpo_config_kwargs_constant_schedule_kept(cfg, num_processes=1):
    _refuse(cfg)
    micro, accumulation = _split(cfg, num_processes)
    steps = cfg.update_epochs * cfg.num_minibatches
    return {
        "num_generations": cfg.group_size,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": cfg.num_minibatches * accumulation,
        "num_iterations": cfg.update_epochs,
        "max_steps": cfg.iterations * steps,
        "warmup_steps": cfg.warmup_iterations * steps,
        "lr_scheduler_type": cfg.lr_schedule,
        "learning_rate": cfg.lr,
        "max_grad_norm": cfg.max_grad_norm,
        "max_completion_length": cfg.max_new_tokens,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "beta": cfg.kl_coef,
        "use_bias_correction_kl": False,
        "epsilon": cfg.clip_eps,
        "epsilon_high": cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high,
        "loss_type": _LOSS_TYPES[cfg.loss_agg],
        "scale_rewards": "group" if cfg.normalize_std else "none",
        "mask_truncated_completions": cfg.overlong_filter,
        "seed": cfg.seed,
    }


def w145_grpo_config_kwargs_trl_kl_correction_left_on(cfg, num_processes=1):
    _refuse(cfg)
    micro, accumulation = _split(cfg, num_processes)
    steps = cfg.update_epochs * cfg.num_minibatches
    schedule = cfg.lr_schedule
    if schedule == "constant" and cfg.warmup_iterations > 0:
        schedule = "constant_with_warmup"
    return {
        "num_generations": cfg.group_size,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": cfg.num_minibatches * accumulation,
        "num_iterations": cfg.update_epochs,
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
        "loss_type": _LOSS_TYPES[cfg.loss_agg],
        "scale_rewards": "group" if cfg.normalize_std else "none",
        "mask_truncated_completions": cfg.overlong_filter,
        "seed": cfg.seed,
    }


def w146_grpo_config_kwargs_refuses_five_switches(cfg, num_processes=1):
    _refuse(cfg, ("algo", "adv_estimator", "policy_loss", "dynamic_sampling", "overlong_cache"))
    micro, accumulation = _split(cfg, num_processes)
    steps = cfg.update_epochs * cfg.num_minibatches
    schedule = cfg.lr_schedule
    if schedule == "constant" and cfg.warmup_iterations > 0:
        schedule = "constant_with_warmup"
    return {
        "num_generations": cfg.group_size,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": cfg.num_minibatches * accumulation,
        "num_iterations": cfg.update_epochs,
        "max_steps": cfg.iterations * steps,
        "warmup_steps": cfg.warmup_iterations * steps,
        "lr_scheduler_type": schedule,
        "learning_rate": cfg.lr,
        "max_grad_norm": cfg.max_grad_norm,
        "max_completion_length": cfg.max_new_tokens,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "beta": cfg.kl_coef,
        "use_bias_correction_kl": False,
        "epsilon": cfg.clip_eps,
        "epsilon_high": cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high,
        "loss_type": _LOSS_TYPES[cfg.loss_agg],
        "scale_rewards": "group" if cfg.normalize_std else "none",
        "mask_truncated_completions": cfg.overlong_filter,
        "seed": cfg.seed,
    }


def r53_grpo_config_kwargs_divmod(cfg, num_processes=1):
    defaults = LMRLConfig.grpo()
    for name in _SWITCHES:
        if getattr(cfg, name) != getattr(defaults, name):
            raise ValueError(f"cfg.{name}: no GRPOConfig field for {getattr(cfg, name)!r}")
    minibatch, left = divmod(cfg.prompts_per_step * cfg.group_size, cfg.num_minibatches)
    per_process, left_p = divmod(minibatch, num_processes)
    micro = per_process if cfg.micro_batch_size is None else cfg.micro_batch_size
    passes, left_m = divmod(per_process, micro) if micro else (0, 1)
    if left or left_p or left_m:
        raise ValueError(f"num_processes: the batch does not split evenly over {num_processes} processes")
    optimiser_steps = cfg.update_epochs * cfg.num_minibatches  # per round
    warm = cfg.warmup_iterations > 0
    kwargs = dict(num_generations=cfg.group_size, num_iterations=cfg.update_epochs)
    kwargs.update(per_device_train_batch_size=micro, gradient_accumulation_steps=passes)
    kwargs.update(steps_per_generation=cfg.num_minibatches * passes)
    kwargs.update(max_steps=cfg.iterations * optimiser_steps, warmup_steps=cfg.warmup_iterations * optimiser_steps)
    kwargs["lr_scheduler_type"] = "constant_with_warmup" if cfg.lr_schedule == "constant" and warm else cfg.lr_schedule
    kwargs.update(learning_rate=cfg.lr, max_grad_norm=cfg.max_grad_norm, max_completion_length=cfg.max_new_tokens)
    kwargs.update(temperature=cfg.temperature, top_p=cfg.top_p, beta=cfg.kl_coef, use_bias_correction_kl=False)
    kwargs.update(
        epsilon=cfg.clip_eps, epsilon_high=cfg.clip_eps_high if cfg.clip_eps_high is not None else cfg.clip_eps
    )
    kwargs["loss_type"] = {"seq-mean-token-mean": "grpo", "token-mean": "dapo"}.get(cfg.loss_agg, "dr_grpo")
    kwargs["scale_rewards"] = "group" if cfg.normalize_std else "none"
    kwargs.update(mask_truncated_completions=cfg.overlong_filter, seed=cfg.seed)
    return kwargs


def r54_grpo_config_kwargs_named_quantities(cfg, num_processes=1):
    _refuse(cfg)
    micro, accumulation = _split(cfg, num_processes)
    rounds_to_steps = cfg.update_epochs * cfg.num_minibatches
    by_name = {  # fields copied under another name
        "num_generations": "group_size",
        "num_iterations": "update_epochs",
        "learning_rate": "lr",
        "max_grad_norm": "max_grad_norm",
        "max_completion_length": "max_new_tokens",
        "temperature": "temperature",
        "top_p": "top_p",
        "beta": "kl_coef",
        "epsilon": "clip_eps",
        "mask_truncated_completions": "overlong_filter",
        "seed": "seed",
    }
    kwargs = {field: getattr(cfg, name) for field, name in by_name.items()}
    kwargs["per_device_train_batch_size"] = micro
    kwargs["gradient_accumulation_steps"] = accumulation
    kwargs["steps_per_generation"] = cfg.num_minibatches * accumulation
    kwargs["max_steps"] = cfg.iterations * rounds_to_steps
    kwargs["warmup_steps"] = cfg.warmup_iterations * rounds_to_steps
    constant_with_warmup = cfg.lr_schedule == "constant" and cfg.warmup_iterations > 0
    kwargs["lr_scheduler_type"] = "constant_with_warmup" if constant_with_warmup else cfg.lr_schedule
    kwargs["epsilon_high"] = cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high
    kwargs["loss_type"] = _LOSS_TYPES[cfg.loss_agg]
    kwargs["scale_rewards"] = "group" if cfg.normalize_std else "none"
    kwargs["use_bias_correction_kl"] = False
    return kwargs


ROWS += [
    _row(
        "grpo_config_kwargs",
        "09",
        w140_grpo_config_kwargs_max_steps_in_rounds,
        "Sets max_steps to the number of rounds instead of the number of optimiser steps.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w141_grpo_config_kwargs_warmup_in_rounds,
        "Sets warmup_steps to the warm-up rounds instead of converting them to optimiser steps.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w142_grpo_config_kwargs_accumulation_over_all_processes,
        "Counts gradient_accumulation_steps over the whole minibatch instead of one process's share.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w143_grpo_config_kwargs_epsilon_high_passed_through,
        "Passes clip_eps_high through as epsilon_high, None when unset, instead of falling back to clip_eps.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w144_grpo_config_kwargs_constant_schedule_kept,
        "Keeps lr_scheduler_type 'constant' with a warm-up instead of 'constant_with_warmup'.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w145_grpo_config_kwargs_trl_kl_correction_left_on,
        "Leaves out use_bias_correction_kl, so TRL's default (True) reweights the KL term.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w146_grpo_config_kwargs_refuses_five_switches,
        "Refuses only five of the switches, letting kl_placement and whiten_advantages through.",
    ),
    _row("grpo_config_kwargs", "09", r53_grpo_config_kwargs_divmod),
    _row("grpo_config_kwargs", "09", r54_grpo_config_kwargs_named_quantities),
]


# ---------------------------------------------------------------------------
# Chapter 10: pass_at_k
# ---------------------------------------------------------------------------


def _pass_at_k_factors(n, c, k, start_offset=1):
    """The broadcast n, c, k (float64) and the factors (1 - k / i) laid out on a new last axis."""
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x, dtype=torch.float64) for x in (n, c, k)))
    j = torch.arange(int(c.max()), dtype=torch.float64)
    i = (n - c + start_offset)[..., None] + j
    factors = torch.where(j < c[..., None], 1 - k[..., None] / i, torch.ones((), dtype=torch.float64))
    return n, c, k, factors


def w147_pass_at_k_float32(n, c, k):
    n, c, k, factors = _pass_at_k_factors(n, c, k)
    estimate = 1 - factors.prod(dim=-1)
    return torch.where(n - c < k, (c > 0).double(), estimate).float()  # a probability


def w148_pass_at_k_one_when_k_exceeds_n(n, c, k):
    n, c, k, factors = _pass_at_k_factors(n, c, k)
    estimate = 1 - factors.prod(dim=-1)
    return torch.where(n - c < k, torch.ones_like(estimate), estimate)  # every draw holds a right one


def w149_pass_at_k_product_from_n_minus_c(n, c, k):
    n, c, k, factors = _pass_at_k_factors(n, c, k, start_offset=0)  # i = n - c, ..., n - 1
    estimate = 1 - factors.prod(dim=-1)
    return torch.where(n - c < k, (c > 0).double(), estimate)


def w150_pass_at_k_python_float_for_ints(n, c, k):
    n_t, c_t, k_t, factors = _pass_at_k_factors(n, c, k)
    result = torch.where(n_t - c_t < k_t, (c_t > 0).double(), 1 - factors.prod(dim=-1))
    if all(isinstance(x, int) for x in (n, c, k)):
        return result.item()
    return result


def w151_pass_at_k_k_without_factor_axis(n, c, k):
    n, c = torch.broadcast_tensors(*(torch.as_tensor(x, dtype=torch.float64) for x in (n, c)))
    k = torch.as_tensor(k, dtype=torch.float64)
    j = torch.arange(int(c.max()), dtype=torch.float64)
    i = (n - c + 1)[..., None] + j
    factors = torch.where(j < c[..., None], 1 - k / i, torch.ones((), dtype=torch.float64))
    estimate = 1 - factors.prod(dim=-1)
    return torch.where(n - c < k, (c > 0).double(), estimate)


def w152_pass_at_k_boundary_at_equality(n, c, k):
    n, c, k, factors = _pass_at_k_factors(n, c, k)
    estimate = 1 - factors.prod(dim=-1)
    return torch.where(n - c <= k, (c > 0).double(), estimate)


def r55_pass_at_k_exact_binomials(n, c, k):
    n_a, c_a, k_a = np.broadcast_arrays(*(np.asarray(torch.as_tensor(x).cpu()) for x in (n, c, k)))
    flat = []
    for n_i, c_i, k_i in zip(n_a.ravel().tolist(), c_a.ravel().tolist(), k_a.ravel().tolist()):
        n_i, c_i, k_i = int(n_i), int(c_i), int(k_i)
        if n_i - c_i < k_i:
            flat.append(1.0 if c_i > 0 else 0.0)
        else:
            flat.append(1.0 - math.comb(n_i - c_i, k_i) / math.comb(n_i, k_i))  # exact integers, one rounding
    return torch.tensor(flat, dtype=torch.float64).reshape(n_a.shape)


def r56_pass_at_k_log1p_sum(n, c, k):
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x).to(torch.float64) for x in (n, c, k)))
    C = int(c.max()) if c.numel() else 0
    steps = torch.arange(C, dtype=torch.float64)
    i = n[..., None] - steps  # n, n - 1, ..., n - c + 1
    inside = steps < c[..., None]
    ratio = torch.where(inside, k[..., None] / i, torch.zeros((), dtype=torch.float64))
    log_all_wrong = torch.log1p(-ratio.clamp(max=1.0)).sum(dim=-1)  # log C(n - c, k) / C(n, k)
    estimate = -torch.expm1(log_all_wrong)
    return torch.where(n - c < k, (c > 0).to(torch.float64), estimate)


ROWS += [
    _row("pass_at_k", "10", w147_pass_at_k_float32, "Returns a float32 tensor instead of float64."),
    _row(
        "pass_at_k",
        "10",
        w148_pass_at_k_one_when_k_exceeds_n,
        "Returns 1 whenever n - c < k, also when c = 0 (k > n with no right sample gives 1 instead of 0).",
    ),
    _row(
        "pass_at_k",
        "10",
        w149_pass_at_k_product_from_n_minus_c,
        "Runs the product over i = n - c, ..., n - 1 instead of i = n - c + 1, ..., n.",
    ),
    _row(
        "pass_at_k",
        "10",
        w150_pass_at_k_python_float_for_ints,
        "Returns a Python float for int inputs instead of a 0-dimensional float64 tensor.",
    ),
    _row(
        "pass_at_k",
        "10",
        w151_pass_at_k_k_without_factor_axis,
        "Divides by i without giving a tensor k a factor axis, so a k tensor broadcasts against the factors wrongly.",
    ),
    _row(
        "pass_at_k",
        "10",
        w152_pass_at_k_boundary_at_equality,
        "Returns 1 already when n - c == k (<= instead of <), where the estimate is 1 - 1 / C(n, k).",
    ),
    _row("pass_at_k", "10", r55_pass_at_k_exact_binomials),
    _row("pass_at_k", "10", r56_pass_at_k_log1p_sum),
]


# ---------------------------------------------------------------------------
# Chapter 10: aggregation_token_weight
# ---------------------------------------------------------------------------


def _as_float_lengths(length):
    return length.to(length.dtype if length.is_floating_point() else torch.get_default_dtype())


def w153_aggregation_token_weight_counts_nonempty_responses(length, mode, max_len=None):
    _agg_mode(mode)
    o = _as_float_lengths(length)
    N = (o > 0).sum()  # responses that have tokens
    L = o.max() if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / (N * L)
    return torch.where(o > 0, w, torch.zeros_like(w))


def w154_aggregation_token_weight_default_from_shape(length, mode, max_len=None):
    _agg_mode(mode)
    o = _as_float_lengths(length)
    N = o.numel()
    L = length.shape[-1] if max_len is None else max_len  # the padded length
    if mode == "seq-mean-token-mean":
        w = 1 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / (N * L)
    return torch.where(o > 0, w, torch.zeros_like(w))


def w155_aggregation_token_weight_empty_keeps_clamped_weight(length, mode, max_len=None):
    _agg_mode(mode)
    o = _as_float_lengths(length)
    N = o.numel()
    L = o.max() if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        return 1 / (N * o.clamp(min=1))  # clamp(min=1), as aggregate_loss
    if mode == "token-mean":
        return torch.where(o > 0, torch.ones_like(o) / o.sum(), torch.zeros_like(o))
    return torch.where(o > 0, torch.ones_like(o) / (N * L), torch.zeros_like(o))


def w156_aggregation_token_weight_dr_grpo_without_n(length, mode, max_len=None):
    _agg_mode(mode)
    o = _as_float_lengths(length)
    N = o.numel()
    L = o.max() if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / L  # 1 / max_len
    return torch.where(o > 0, w, torch.zeros_like(w))


def w157_aggregation_token_weight_n_from_first_axis(length, mode, max_len=None):
    _agg_mode(mode)
    o = _as_float_lengths(length)
    N = o.shape[0] if o.dim() else 1  # one entry per response
    L = o.max() if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / (N * L)
    return torch.where(o > 0, w, torch.zeros_like(w))


def r57_aggregation_token_weight_table_of_lambdas(length, mode, max_len=None):
    o = length.double()
    N = o.numel()
    L = o.max() if max_len is None else torch.tensor(float(max_len), dtype=torch.float64)
    weight_of = {
        "seq-mean-token-mean": lambda: 1.0 / (N * o.clamp(min=1)),
        "token-mean": lambda: torch.full_like(o, 1.0) / o.sum().clamp(min=1),
        "seq-mean-token-sum-norm": lambda: torch.full_like(o, 1.0) / (N * L),
    }
    if mode not in weight_of:
        raise ValueError(f"mode: expected one of {sorted(weight_of)}, got {mode!r}")
    w = weight_of[mode]().masked_fill(o == 0, 0.0)
    return w.to(length.dtype if length.is_floating_point() else torch.get_default_dtype())


def r58_aggregation_token_weight_autograd_of_aggregate_loss(length, mode, max_len=None):
    _agg_mode(mode)
    dtype = length.dtype if length.is_floating_point() else torch.get_default_dtype()
    lengths = length.reshape(-1).long()
    T = max(int(lengths.max()), 1) if lengths.numel() else 1
    mask = torch.arange(T)[None, :] < lengths[:, None]  # (N, T)
    per_token = torch.zeros(mask.shape, dtype=torch.float64, requires_grad=True)
    L = int(lengths.max()) if max_len is None else max_len
    loss = grpo.aggregate_loss(per_token, mask, mode, max_len=L if mode == "seq-mean-token-sum-norm" else None)
    (grad,) = torch.autograd.grad(loss, per_token)
    w = grad[:, 0].masked_fill(lengths == 0, 0.0)  # every valid token of response i has the same weight
    return w.reshape(length.shape).to(dtype)


ROWS += [
    _row(
        "aggregation_token_weight",
        "10",
        w153_aggregation_token_weight_counts_nonempty_responses,
        "Counts only the non-empty responses in N, although an empty response still counts.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w154_aggregation_token_weight_default_from_shape,
        "Takes the default max_len from length's last dimension instead of the longest length.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w155_aggregation_token_weight_empty_keeps_clamped_weight,
        "Gives an empty response the clamped weight 1 / N in the per-sequence mode instead of 0.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w156_aggregation_token_weight_dr_grpo_without_n,
        "Gives Dr. GRPO's weight as 1 / max_len, leaving out the 1 / N of the mean over responses.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w157_aggregation_token_weight_n_from_first_axis,
        "Takes N from the first axis of length instead of its number of entries.",
    ),
    _row("aggregation_token_weight", "10", r57_aggregation_token_weight_table_of_lambdas),
    _row("aggregation_token_weight", "10", r58_aggregation_token_weight_autograd_of_aggregate_loss),
]


# ---------------------------------------------------------------------------
# Chapter 10: completion_style
# ---------------------------------------------------------------------------


def w158_completion_style_up_to_last_eos(text, n_digits=3):
    body, eos, _ = text.rpartition("$")
    if not eos:
        return "malformed"
    if re.fullmatch(r"[0-9]+", body):
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


def w159_completion_style_totals_by_value(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    if re.fullmatch(r"[0-9]+", body):
        return "direct"
    m = re.fullmatch(r"\[([^\[\]]+)\]([0-9]+)", body)
    if m is None:
        return "malformed"
    if re.fullmatch(r"\.+", m.group(1)):
        return "filler"
    totals = m.group(1).split(",")
    if len(totals) == n_digits and all(t.isdigit() and int(t) <= 19 for t in totals):
        return "scratchpad"
    return "malformed"


def w160_completion_style_empty_bracket_is_filler(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    if re.fullmatch(r"[0-9]+", body):
        return "direct"
    m = re.fullmatch(r"\[([^\[\]]*)\]([0-9]+)", body)
    if m is None:
        return "malformed"
    if re.fullmatch(r"\.*", m.group(1)):  # dots, however many
        return "filler"
    totals = m.group(1).split(",")
    if len(totals) == n_digits and all(re.fullmatch(r"1?[0-9]", t) for t in totals):
        return "scratchpad"
    return "malformed"


def w161_completion_style_any_number_of_totals(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    if re.fullmatch(r"[0-9]+", body):
        return "direct"
    m = re.fullmatch(r"\[([^\[\]]+)\]([0-9]+)", body)
    if m is None:
        return "malformed"
    if re.fullmatch(r"\.+", m.group(1)):
        return "filler"
    if all(re.fullmatch(r"1?[0-9]", t) for t in m.group(1).split(",")):
        return "scratchpad"
    return "malformed"


def w162_completion_style_no_eos_reads_everything(text, n_digits=3):
    body = text.split("$")[0]  # what comes before EOS
    if re.fullmatch(r"[0-9]+", body):
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


def w163_completion_style_answer_digits_optional(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    if re.fullmatch(r"[0-9]+", body):
        return "direct"
    m = re.fullmatch(r"\[([^\[\]]+)\]([0-9]*)", body)
    if m is None:
        return "malformed"
    if re.fullmatch(r"\.+", m.group(1)):
        return "filler"
    totals = m.group(1).split(",")
    if len(totals) == n_digits and all(re.fullmatch(r"1?[0-9]", t) for t in totals):
        return "scratchpad"
    return "malformed"


def r59_completion_style_string_methods(text, n_digits=3):
    digits = set("0123456789")
    if "$" not in text:
        return "malformed"
    body = text[: text.index("$")]
    if body and set(body) <= digits:
        return "direct"
    if not body.startswith("[") or body.count("[") != 1 or body.count("]") != 1:
        return "malformed"
    close = body.index("]")
    inside, answer = body[1:close], body[close + 1 :]
    if not inside or not answer or not set(answer) <= digits:
        return "malformed"
    if set(inside) == {"."}:
        return "filler"
    totals = inside.split(",")

    def is_total(t):
        return t in {str(v) for v in range(20)}

    if len(totals) == n_digits and all(is_total(t) for t in totals):
        return "scratchpad"
    return "malformed"


def r60_completion_style_one_pattern(text, n_digits=3):
    body, eos, _ = text.partition("$")
    total = r"(?:1[0-9]|[0-9])"
    patterns = {
        "direct": r"[0-9]+",
        "filler": r"\[\.+\][0-9]+",
        "scratchpad": r"\[" + ",".join([total] * n_digits) + r"\][0-9]+" if n_digits > 0 else r"(?!)",
    }
    if eos:
        for label, pattern in patterns.items():
            if re.fullmatch(pattern, body):
                return label
    return "malformed"


ROWS += [
    _row(
        "completion_style",
        "10",
        w158_completion_style_up_to_last_eos,
        "Reads the text up to the last '$' (rpartition) instead of the first.",
    ),
    _row(
        "completion_style",
        "10",
        w159_completion_style_totals_by_value,
        "Checks each total with int(t) <= 19, which accepts totals with a leading zero such as '07'.",
    ),
    _row(
        "completion_style",
        "10",
        w160_completion_style_empty_bracket_is_filler,
        "Matches filler with \\.* (zero or more dots), so an empty bracket counts as filler.",
    ),
    _row(
        "completion_style",
        "10",
        w161_completion_style_any_number_of_totals,
        "Accepts any number of totals in the scratchpad instead of exactly n_digits.",
    ),
    _row(
        "completion_style",
        "10",
        w162_completion_style_no_eos_reads_everything,
        "Reads the whole text when there is no '$', so a completion that never stopped still gets a style.",
    ),
    _row(
        "completion_style",
        "10",
        w163_completion_style_answer_digits_optional,
        "Lets the digits after the bracket be empty, so '[15,14,10]$' is a scratchpad.",
    ),
    _row("completion_style", "10", r59_completion_style_string_methods),
    _row("completion_style", "10", r60_completion_style_one_pattern),
]


# ---------------------------------------------------------------------------
# Chapter 10: style_share
# ---------------------------------------------------------------------------


def w164_style_share_counts_outer_list(labels, style):
    if len(labels) == 0:
        raise ValueError("labels: no completion, so no share")
    return list(labels).count(style) / len(labels)


def w165_style_share_empty_is_zero(labels, style):
    flat = np.asarray(labels).reshape(-1)
    if flat.size == 0:
        return 0.0  # no completion of that style
    return float((flat == style).mean())


def w166_style_share_among_well_formed(labels, style):
    flat = np.asarray(labels).reshape(-1)
    if flat.size == 0:
        raise ValueError("labels: no completion, so no share")
    well_formed = flat[flat != "malformed"]
    if well_formed.size == 0:
        return 0.0
    return float((well_formed == style).mean())


def w167_style_share_numpy_float32(labels, style):
    flat = np.asarray(labels).reshape(-1)
    if flat.size == 0:
        raise ValueError("labels: no completion, so no share")
    return np.mean(flat == style, dtype=np.float32)


def w168_style_share_len_for_emptiness(labels, style):
    if len(labels) == 0:
        raise ValueError("labels: no completion, so no share")
    flat = np.asarray(labels).reshape(-1)
    with np.errstate(invalid="ignore"):
        return float(np.sum(flat == style) / flat.size) if flat.size else float("nan")


def r61_style_share_recursive_flatten(labels, style):
    def leaves(x):
        if isinstance(x, str):
            yield x
        else:
            for item in x:
                yield from leaves(item)

    every = list(leaves(labels.tolist() if isinstance(labels, np.ndarray) else labels))
    if not every:
        raise ValueError("labels: expected at least one completion, got none")
    return sum(label == style for label in every) / len(every)


def r62_style_share_counter(labels, style):
    counts = collections.Counter(np.ravel(np.asarray(labels, dtype=object)).tolist())
    total = sum(counts.values())
    if total == 0:
        raise ValueError("labels: no completion, so no share")
    return counts[style] / total


ROWS += [
    _row(
        "style_share",
        "10",
        w164_style_share_counts_outer_list,
        "Counts with list.count over the outer list, so a nested [B][G] list (or an array) counts prompts, not "
        "completions.",
    ),
    _row(
        "style_share",
        "10",
        w165_style_share_empty_is_zero,
        "Returns 0.0 for no labels instead of raising ValueError.",
    ),
    _row(
        "style_share",
        "10",
        w166_style_share_among_well_formed,
        "Leaves the malformed completions out of the denominator.",
    ),
    _row(
        "style_share",
        "10",
        w167_style_share_numpy_float32,
        "Returns a numpy float32 (np.mean with dtype=float32) instead of a Python float.",
    ),
    _row(
        "style_share",
        "10",
        w168_style_share_len_for_emptiness,
        "Tests emptiness with len(labels), so an array of shape (2, 0) gives NaN instead of ValueError.",
    ),
    _row("style_share", "10", r61_style_share_recursive_flatten),
    _row("style_share", "10", r62_style_share_counter),
]


# ---------------------------------------------------------------------------
# Chapter 11: rloo_advantages
# ---------------------------------------------------------------------------


def w169_rloo_advantages_inverted_scale(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return (G - 1) / G * (rewards - rewards.mean(dim=-1, keepdim=True))


def w170_rloo_advantages_group_of_one_keeps_reward(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return rewards.clone()  # no baseline to subtract
    others_mean = (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1)
    return rewards - others_mean


def w171_rloo_advantages_groups_on_first_axis(rewards):
    G = rewards.shape[0]  # JAX code of mine: [G, B]
    if G == 1:
        return torch.zeros_like(rewards)
    others_mean = (rewards.sum(dim=0, keepdim=True) - rewards) / (G - 1)
    return rewards - others_mean


def w172_rloo_advantages_in_place(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    others_mean = (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1)
    rewards -= others_mean
    return rewards


def w173_rloo_advantages_divides_by_group_std(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    others_mean = (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1)
    return (rewards - others_mean) / (rewards.std(dim=-1, keepdim=True) + 1e-6)


def r63_rloo_advantages_scaled_centring(rewards):
    G = rewards.shape[-1]
    if G < 2:
        return rewards.new_zeros(rewards.shape)
    # the docstring's identity: r_i - mean of the others = G / (G - 1) * (r_i - mean of all)
    return G / (G - 1) * (rewards - rewards.mean(dim=-1, keepdim=True))


def r64_rloo_advantages_nan_to_num_for_one(rewards):
    G = rewards.shape[-1]
    others_mean = rewards.sum(dim=-1, keepdim=True).sub(rewards) / (G - 1)  # a group of one: 0 / 0 = NaN
    return torch.nan_to_num(rewards - others_mean, nan=0.0)


ROWS += [
    _row(
        "rloo_advantages",
        "11",
        w169_rloo_advantages_inverted_scale,
        "Scales the centred rewards by (G - 1) / G instead of G / (G - 1).",
    ),
    _row(
        "rloo_advantages",
        "11",
        w170_rloo_advantages_group_of_one_keeps_reward,
        "Returns the raw reward for a group of one (verl's choice) instead of 0.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w171_rloo_advantages_groups_on_first_axis,
        "Takes the group along the first axis (a [G, B] layout) instead of the last.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w172_rloo_advantages_in_place,
        "Subtracts the baseline from the rewards in place and returns the caller's tensor.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w173_rloo_advantages_divides_by_group_std,
        "Divides the leave-one-out advantages by the group std, as GRPO does.",
    ),
    _row("rloo_advantages", "11", r63_rloo_advantages_scaled_centring),
    _row("rloo_advantages", "11", r64_rloo_advantages_nan_to_num_for_one),
]


# ---------------------------------------------------------------------------
# Chapter 11: gspo_sequence_log_ratio
# ---------------------------------------------------------------------------


def w174_gspo_sequence_log_ratio_divides_by_t(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    return log_ratio.sum(dim=-1) / logp.shape[-1]


def w175_gspo_sequence_log_ratio_returns_ratio(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    return torch.exp(log_ratio.sum(dim=-1) / valid.sum(dim=-1).clamp(min=1))  # s_i


def w176_gspo_sequence_log_ratio_sum_of_log_ratios(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    return log_ratio.sum(dim=-1)  # log of the sequence ratio


def w177_gspo_sequence_log_ratio_where_with_mask_as_given(logp, logp_old, mask):
    log_ratio = torch.where(mask, logp - logp_old.detach(), torch.zeros_like(logp))
    lengths = mask.sum(dim=-1).clamp(min=1)
    return log_ratio.sum(dim=-1) / lengths


def w178_gspo_sequence_log_ratio_keepdim(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    return log_ratio.sum(dim=-1, keepdim=True) / valid.sum(dim=-1, keepdim=True).clamp(min=1)


def r65_gspo_sequence_log_ratio_masked_fill_nan_to_num(logp, logp_old, mask):
    padding = ~mask.bool()
    log_ratio = (logp - logp_old.detach()).masked_fill(padding, 0.0)
    mean = log_ratio.sum(dim=-1) / (~padding).sum(dim=-1).to(logp.dtype)
    return torch.nan_to_num(mean, nan=0.0)  # an empty response is 0 / 0


def r66_gspo_sequence_log_ratio_weights_einsum(logp, logp_old, mask):
    keep = mask != 0
    weights = keep.to(logp.dtype) / keep.sum(dim=-1, keepdim=True).clamp(min=1)  # 1 / |y_i| on valid tokens
    clean = torch.where(keep, logp, torch.zeros_like(logp)) - torch.where(
        keep, logp_old.detach(), torch.zeros_like(logp)
    )
    return torch.einsum("...t,...t->...", weights, clean)


ROWS += [
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w174_gspo_sequence_log_ratio_divides_by_t,
        "Divides the summed log ratio by the padded length T instead of the number of valid tokens.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w175_gspo_sequence_log_ratio_returns_ratio,
        "Returns the sequence ratio s_i (its exponential) instead of log s_i.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w176_gspo_sequence_log_ratio_sum_of_log_ratios,
        "Sums the token log ratios without dividing by the response length.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w177_gspo_sequence_log_ratio_where_with_mask_as_given,
        "Passes the mask to torch.where as given, which fails for a 0/1 float or integer mask.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w178_gspo_sequence_log_ratio_keepdim,
        "Keeps the token axis (keepdim=True), returning shape [..., 1] instead of [...].",
    ),
    _row("gspo_sequence_log_ratio", "11", r65_gspo_sequence_log_ratio_masked_fill_nan_to_num),
    _row("gspo_sequence_log_ratio", "11", r66_gspo_sequence_log_ratio_weights_einsum),
]


# ---------------------------------------------------------------------------
# Chapter 11: cispo_loss
# ---------------------------------------------------------------------------


def w179_cispo_loss_trl_cap(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=clip_eps_high).detach()  # TRL: epsilon_high is the cap
    return -weight * adv.detach() * logp


def w180_cispo_loss_symmetric_default_floor(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = 1.0 - (clip_eps_high if clip_eps is None else clip_eps)  # symmetric unless told otherwise
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def w181_cispo_loss_token_mean(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high).detach()
    return (-weight * adv.detach() * logp).mean()  # DAPO's token mean


def w182_cispo_loss_none_floor_as_zero_range(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = 1.0 - (clip_eps or 0.0)
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def w183_cispo_loss_ratio_upside_down(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp_old.detach() - logp)
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def w184_cispo_loss_advantages_keep_their_graph(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high).detach()
    return -weight * adv * logp


def r67_cispo_loss_where_bounds(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    with torch.no_grad():
        ratio = (logp - logp_old).exp()
        cap = torch.full_like(ratio, 1.0 + clip_eps_high)
        weight = torch.where(ratio > cap, cap, ratio)
        if clip_eps is not None:
            floor = torch.full_like(ratio, 1.0 - clip_eps)
            weight = torch.where(weight < floor, floor, weight)
    return -(weight * adv.detach()) * logp


def r68_cispo_loss_log_space_weight(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    log_ratio = (logp - logp_old).detach()
    upper = math.log1p(clip_eps_high)
    if clip_eps is None or clip_eps >= 1.0:
        lower = -math.inf
    else:
        lower = math.log1p(-clip_eps)
    weight = log_ratio.clamp(min=lower, max=upper).exp()
    return logp * (-weight * adv.detach())


ROWS += [
    _row(
        "cispo_loss",
        "11",
        w179_cispo_loss_trl_cap,
        "Caps the weight at clip_eps_high itself (TRL's convention) instead of 1 + clip_eps_high.",
    ),
    _row(
        "cispo_loss",
        "11",
        w180_cispo_loss_symmetric_default_floor,
        "Floors the weight at 1 - clip_eps_high when clip_eps is None, where None means no lower bound.",
    ),
    _row(
        "cispo_loss",
        "11",
        w181_cispo_loss_token_mean,
        "Returns the mean over tokens instead of the per-token loss.",
    ),
    _row(
        "cispo_loss",
        "11",
        w182_cispo_loss_none_floor_as_zero_range,
        "Treats clip_eps=None as a lower range of 0 (clip_eps or 0.0), flooring every weight at 1.",
    ),
    _row(
        "cispo_loss",
        "11",
        w183_cispo_loss_ratio_upside_down,
        "Computes the ratio as pi_old / pi_theta (exp(logp_old - logp)) instead of pi_theta / pi_old.",
    ),
    _row(
        "cispo_loss",
        "11",
        w184_cispo_loss_advantages_keep_their_graph,
        "Does not detach the advantages, so gradient flows into adv.",
    ),
    _row("cispo_loss", "11", r67_cispo_loss_where_bounds),
    _row("cispo_loss", "11", r68_cispo_loss_log_space_weight),
]
