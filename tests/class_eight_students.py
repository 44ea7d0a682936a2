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
    weights = torch.where(offset >= 0, torch.full((T, T), float(gamma), dtype=torch.float64) ** offset.clamp(min=0), 0.0)
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
        "Reshapes last_values to (1, -1) before the concatenation, which only works for a single batch axis of one row.",
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
