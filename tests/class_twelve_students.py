"""A twelfth class of students, written blind: 34 exercises, one mistake per wrong answer.

This class was written without reading the checks or their catalogues of mistakes: only the
exercise notebooks (their text, docstrings and stated cases) and the reference functions of
``course_lib`` were read, and every right answer was compared with its reference on random and
edge inputs before it was written down. Its students are of seven kinds:

- **from memory of the lecture notebook**: they remember the idea and get one detail of the
  course's convention wrong (which axis, mean against sum, where the mask goes, which std);
- **refactorers**: working code moved into helpers that loses one thing on the way (a
  ``keepdim``, a dtype, a ``detach``, a ``clone``);
- **shape fighters**: an ``unsqueeze``, ``expand``, ``reshape`` or transpose added to silence a
  shape error, which then computes something else;
- **edge-case special-casers**: a branch for an edge case (a group of one, ``gamma = 0``, an
  empty mask, a single step) that gets that one case wrong;
- **trusters of torch's defaults**: ``torch.std``/``torch.cov`` conventions, ``argmax`` ties,
  ``torch.multinomial`` without replacement, ``reduction="mean"``, ``torch.isin`` flattening;
- **literal translators of the paper**: a sum from ``t = 1``, the ``1/|o_i|`` outside where the
  course puts it inside, clipping the ratio instead of the objective;
- **clever students**: log-space tricks, ``cumprod`` for discounting, ``torch.roll`` for
  shifting, ``torch.where`` with a NaN branch, in-place operations on views.

Each row is ``_row(exercise, chapter, student, truth)``: ``truth`` is None for a right answer,
else one sentence saying exactly what that student did wrong.
"""

from __future__ import annotations

import math
import re

import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import nn

from course_lib.grpo import aggregate_loss as course_aggregate_loss
from course_lib.grpo import group_advantages as course_group_advantages
from course_lib.grpo import grpo_loss as course_grpo_loss
from course_lib.kl import kl_estimate as course_kl_estimate
from course_lib.policy_gradient import gather_log_probs as course_gather_log_probs
from course_lib.ppo import clipped_surrogate_loss as course_clipped_surrogate_loss
from course_lib.ppo import value_loss as course_value_loss
from course_lib.rewards import math_answer_reward as course_math_answer_reward


def _row(exercise: str, chapter: str, student, truth: str | None = None) -> dict:
    """One student's answer to one exercise; ``truth`` is None for a right answer, else what the student did wrong."""
    return {"exercise": exercise, "chapter": chapter, "student": student, "right": truth is None, "mistake": truth}


ROWS = []


# ---------------------------------------------------------------------------
# Chapter 00: discounted_return
# ---------------------------------------------------------------------------


def w01_discounted_return_cumprod_weights(rewards, gamma):
    # clever: the discounts as a running product of gamma
    T = rewards.shape[-1]
    discounts = torch.full((T,), gamma, dtype=rewards.dtype).cumprod(dim=0)
    return (rewards * discounts).sum(dim=-1)


def w02_discounted_return_log_space_weights(rewards, gamma):
    # clever: gamma ** t computed in log space, exp(t * log gamma)
    t = torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    discounts = torch.exp(t * torch.log(torch.tensor(gamma, dtype=rewards.dtype)))
    return (rewards * discounts).sum(dim=-1)


def w03_discounted_return_single_step_branch(rewards, gamma):
    if rewards.shape[-1] == 1:
        return rewards  # one step: nothing to discount
    t = torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return (rewards * gamma**t).sum(dim=-1)


def w04_discounted_return_flatten_batch(rewards, gamma):
    T = rewards.shape[-1]
    flat = rewards.reshape(-1, T)  # (N, T): one row per episode
    t = torch.arange(T, dtype=rewards.dtype)
    return (flat * gamma**t).sum(dim=1).reshape(-1)


def w05_discounted_return_horner_forward(rewards, gamma):
    # Horner's rule, run from the first step forward
    G = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1]):
        G = gamma * G + rewards[..., t]
    return G


def w06_discounted_return_sum_over_first_axis(rewards, gamma):
    t = torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return (rewards * gamma**t).sum(dim=0)


def r01_discounted_return_matmul(rewards, gamma):
    T = rewards.shape[-1]
    weights = torch.tensor([gamma**t for t in range(T)], dtype=rewards.dtype)
    return torch.matmul(rewards, weights)


def r02_discounted_return_backward_loop(rewards, gamma):
    G = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1] - 1, -1, -1):
        G = rewards[..., t] + gamma * G
    return G


ROWS += [
    _row(
        "discounted_return",
        "00",
        w01_discounted_return_cumprod_weights,
        "builds the discounts with cumprod of a tensor full of gamma, so they are gamma^1 .. gamma^T and r_0 is "
        "already discounted once (off by one step).",
    ),
    _row(
        "discounted_return",
        "00",
        w02_discounted_return_log_space_weights,
        "computes gamma^t as exp(t * log gamma), which for gamma = 0 gives exp(0 * -inf) = NaN at t = 0 instead of "
        "0^0 = 1.",
    ),
    _row(
        "discounted_return",
        "00",
        w03_discounted_return_single_step_branch,
        "special-cases episodes of a single step by returning rewards itself, of shape (..., 1) instead of (...).",
    ),
    _row(
        "discounted_return",
        "00",
        w04_discounted_return_flatten_batch,
        "flattens the leading axes to (N, T) and returns a flat (N,) tensor, so a (2, 3, 4) batch gives shape (6,) "
        "and a single episode shape (1,) instead of a 0-dim tensor.",
    ),
    _row(
        "discounted_return",
        "00",
        w05_discounted_return_horner_forward,
        "runs Horner's recursion G = gamma * G + r_t forward from t = 0, which weighs r_t by gamma^(T-1-t): the last "
        "reward undiscounted and the first the most discounted.",
    ),
    _row(
        "discounted_return",
        "00",
        w06_discounted_return_sum_over_first_axis,
        "sums the weighted rewards over dim=0 instead of the time axis dim=-1, which is right only for a single "
        "1-D episode.",
    ),
    _row("discounted_return", "00", r01_discounted_return_matmul),
    _row("discounted_return", "00", r02_discounted_return_backward_loop),
]


# ---------------------------------------------------------------------------
# Chapter 00: reward_to_go
# ---------------------------------------------------------------------------


def w07_reward_to_go_in_place_accumulate(rewards, gamma):
    out = rewards  # the returns, accumulated where the rewards are
    for t in reversed(range(rewards.shape[-1] - 1)):
        out[..., t] += gamma * out[..., t + 1]
    return out


def w08_reward_to_go_divide_by_discount(rewards, gamma):
    # clever: G_t = (sum_{k >= t} gamma^k r_k) / gamma^t with one reversed cumsum
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    tail = (rewards * discounts).flip(-1).cumsum(-1).flip(-1)
    return tail / discounts


def w09_reward_to_go_forward_recursion(rewards, gamma):
    out = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1]):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out


def w10_reward_to_go_start_from_last_reward(rewards, gamma):
    out = torch.empty_like(rewards)
    running = rewards[..., -1].clone()  # G_{T-1} = r_{T-1}
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out


def w11_reward_to_go_matrix_not_transposed(rewards, gamma):
    T = rewards.shape[-1]
    t = torch.arange(T)
    gap = t[None, :] - t[:, None]  # gap[i, j] = j - i
    M = torch.where(gap >= 0, gamma ** gap.clamp(min=0).to(rewards.dtype), torch.zeros((), dtype=rewards.dtype))
    return rewards @ M


def w12_reward_to_go_undiscounted_cumsum(rewards, gamma):
    # the reversed cumsum of the lecture's figure
    return rewards.flip(-1).cumsum(dim=-1).flip(-1)


def r03_reward_to_go_stack_list(rewards, gamma):
    returns = []
    G = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1] - 1, -1, -1):
        G = rewards[..., t] + gamma * G
        returns.append(G)
    return torch.stack(returns[::-1], dim=-1)


def r04_reward_to_go_masked_matrix(rewards, gamma):
    T = rewards.shape[-1]
    t = torch.arange(T)
    gap = t[None, :] - t[:, None]  # gap[k, j] = j - k
    # M[k, t] = gamma^(k - t) for k >= t: the weight of r_k in G_t
    power = (-gap).clamp(min=0).to(rewards.dtype)
    M = torch.where(
        gap <= 0, torch.pow(torch.tensor(gamma, dtype=rewards.dtype), power), torch.zeros((), dtype=rewards.dtype)
    )
    return rewards @ M


ROWS += [
    _row(
        "reward_to_go",
        "00",
        w07_reward_to_go_in_place_accumulate,
        "accumulates the returns in place in the rewards tensor itself (out = rewards, then +=), so the caller's "
        "rewards are overwritten with the returns.",
    ),
    _row(
        "reward_to_go",
        "00",
        w08_reward_to_go_divide_by_discount,
        "divides a reversed cumsum of gamma^k r_k by gamma^t, which is 0/0 = NaN after the first step when gamma = 0.",
    ),
    _row(
        "reward_to_go",
        "00",
        w09_reward_to_go_forward_recursion,
        "runs the recursion forward in time (G_t = r_t + gamma * G_{t-1}), which discounts the rewards before step t "
        "instead of those after it.",
    ),
    _row(
        "reward_to_go",
        "00",
        w10_reward_to_go_start_from_last_reward,
        "starts the backward recursion from G = r_{T-1} instead of G_T = 0 and then still runs it over t = T-1, so "
        "the last reward is counted twice in every step's return.",
    ),
    _row(
        "reward_to_go",
        "00",
        w11_reward_to_go_matrix_not_transposed,
        "multiplies by the discount matrix M[i, j] = gamma^(j-i) (j >= i) without transposing it, which sums the "
        "rewards up to step t (a discounted reward-so-far) instead of those from t on.",
    ),
    _row(
        "reward_to_go",
        "00",
        w12_reward_to_go_undiscounted_cumsum,
        "takes the reversed cumulative sum of the rewards without any discount, so gamma is ignored (right only for "
        "gamma = 1).",
    ),
    _row("reward_to_go", "00", r03_reward_to_go_stack_list),
    _row("reward_to_go", "00", r04_reward_to_go_masked_matrix),
]


# ---------------------------------------------------------------------------
# Chapter 01: sort_inclusion_ordering_reward
# ---------------------------------------------------------------------------


def w13_sort_reward_count_every_match(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.sum(dim=(-2, -1))
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w14_sort_reward_any_over_prompt_axis(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]  # (..., T prompt, T response)
    inclusion = matches.any(dim=-2).sum(dim=-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


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
    prompt, response = torch.broadcast_tensors(prompt, response)
    inclusion = torch.isin(prompt, response).sum(dim=-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w18_sort_reward_repeated_prompt_token_once(prompt, response):
    found = (prompt[..., :, None] == response[..., None, :]).any(dim=-1)  # (..., T)
    # a prompt token that already occurred earlier in the prompt is not counted again
    same = prompt[..., :, None] == prompt[..., None, :]
    seen_before = same.tril(diagonal=-1).any(dim=-1)
    inclusion = (found & ~seen_before).sum(dim=-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w19_sort_reward_diff_first_axis(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-1).sum(dim=-1)
    ordered = torch.diff(response, dim=0) >= 0
    ordering = ordered.sum(dim=-1)
    return (inclusion + ordering).float()


def r05_sort_reward_rows_with_sets(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    T = prompt.shape[-1]
    shape = prompt.shape[:-1]
    rewards = []
    for p, r in zip(prompt.reshape(-1, T).tolist(), response.reshape(-1, T).tolist()):
        present = set(r)
        inclusion = sum(1 for token in p if token in present)
        ordering = sum(1 for a, b in zip(r[:-1], r[1:]) if a <= b)
        rewards.append(float(inclusion + ordering))
    return torch.tensor(rewards, dtype=torch.float32).reshape(shape)


def r06_sort_reward_diff_and_eq(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    inclusion = torch.eq(prompt.unsqueeze(-1), response.unsqueeze(-2)).any(-1).to(torch.float32).sum(-1)
    ordering = (torch.diff(response, dim=-1) >= 0).to(torch.float32).sum(-1)
    return inclusion + ordering


ROWS += [
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w13_sort_reward_count_every_match,
        "sums the whole (T, T) match matrix for inclusion, so a response that repeats a right token earns that "
        "token's point once per repetition.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w14_sort_reward_any_over_prompt_axis,
        "reduces the match matrix with any(dim=-2), counting the response tokens found in the prompt instead of the "
        "prompt tokens found in the response.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w15_sort_reward_strict_order,
        "counts an ordered pair only when response[t] < response[t + 1] (strict), so equal neighbours earn no point.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w16_sort_reward_integer_result,
        "returns the integer sum of inclusion and ordering points, without converting it to the float32 tensor the "
        "exercise asks for.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w17_sort_reward_isin_whole_batch,
        "uses torch.isin(prompt, response), which tests membership in all responses of the batch at once, so a token "
        "present only in another row's response still earns an inclusion point.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w18_sort_reward_repeated_prompt_token_once,
        "special-cases repeated prompt tokens by counting only their first occurrence, while a token that occurs "
        "twice in the prompt must count twice.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w19_sort_reward_diff_first_axis,
        "takes torch.diff(response, dim=0), the difference along the first axis, so for batches the ordering points "
        "compare rows instead of adjacent tokens.",
    ),
    _row("sort_inclusion_ordering_reward", "01", r05_sort_reward_rows_with_sets),
    _row("sort_inclusion_ordering_reward", "01", r06_sort_reward_diff_and_eq),
]


# ---------------------------------------------------------------------------
# Chapter 01: math_answer_reward
#
# The students of this exercise share the helpers of a right answer (r07's): each wrong one
# replaces exactly one of them, or one line of the glue, with its own version.
# ---------------------------------------------------------------------------

_STATEMENT_RE = re.compile(r"\banswer(?:\s+is\b\s*:?|\s*:)", re.IGNORECASE)
_PLAIN_NUMBER_RE = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"


def _last_boxed_content(text):
    """The content of the last \\boxed{...} whose braces close (an unclosed one is skipped), or None."""
    start = text.rfind("\\boxed{")
    while start != -1:
        depth = 0
        for i in range(start + len("\\boxed"), len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return text[start + len("\\boxed{") : i]
        start = text.rfind("\\boxed{", 0, start)
    return None


def _cut_statement(rest):
    rest = rest.lstrip()
    rest = re.split(r"[\n<]", rest)[0]
    return re.split(r"[.!?](?:\s|$)", rest)[0]


def _last_statement(text):
    matches = list(_STATEMENT_RE.finditer(text))
    if not matches:
        return None
    return _cut_statement(text[matches[-1].end() :])


def _normalise(answer):
    answer = answer.replace("\\$", "").replace("$", "").strip()
    while answer:
        if answer[-1] in ".,;:!?":
            answer = answer[:-1].rstrip()
        elif answer[-1] == ")" and answer.count(")") > answer.count("("):
            answer = answer[:-1].rstrip()
        else:
            break
    return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", answer)


def _same(answer, truth):
    if re.fullmatch(_PLAIN_NUMBER_RE, answer) and re.fullmatch(_PLAIN_NUMBER_RE, truth):
        return 1.0 if float(answer) == float(truth) else 0.0
    return 1.0 if answer == truth else 0.0


def r07_math_answer_reward_helpers(response_text, ground_truth):
    found = _last_boxed_content(response_text)
    if found is None:
        found = _last_statement(response_text)
    if found is None:
        return 0.0
    answer = _normalise(found)
    if not answer:
        return 0.0
    return _same(answer, _normalise(ground_truth))


def w20_math_answer_reward_flat_boxed_regex(response_text, ground_truth):
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", response_text)
    found = boxes[-1] if boxes else _last_statement(response_text)
    if found is None:
        return 0.0
    answer = _normalise(found)
    return _same(answer, _normalise(ground_truth)) if answer else 0.0


def w21_math_answer_reward_first_box(response_text, ground_truth):
    found = None
    start = response_text.find("\\boxed{")
    if start != -1:
        depth = 0
        for i in range(start + len("\\boxed"), len(response_text)):
            depth += {"{": 1, "}": -1}.get(response_text[i], 0)
            if depth == 0:
                found = response_text[start + len("\\boxed{") : i]
                break
    if found is None:
        found = _last_statement(response_text)
    if found is None:
        return 0.0
    answer = _normalise(found)
    return _same(answer, _normalise(ground_truth)) if answer else 0.0


def w22_math_answer_reward_last_number_fallback(response_text, ground_truth):
    found = _last_boxed_content(response_text)
    if found is None:
        found = _last_statement(response_text)
    if found is None:
        numbers = re.findall(r"[+-]?\d+(?:\.\d+)?", response_text.replace(",", ""))
        found = numbers[-1] if numbers else None
    if found is None:
        return 0.0
    answer = _normalise(found)
    return _same(answer, _normalise(ground_truth)) if answer else 0.0


def w23_math_answer_reward_case_sensitive(response_text, ground_truth):
    found = _last_boxed_content(response_text)
    if found is None:
        matches = list(re.finditer(r"\banswer(?:\s+is\b\s*:?|\s*:)", response_text))
        found = _cut_statement(response_text[matches[-1].end() :]) if matches else None
    if found is None:
        return 0.0
    answer = _normalise(found)
    return _same(answer, _normalise(ground_truth)) if answer else 0.0


def w24_math_answer_reward_cut_at_every_dot(response_text, ground_truth):
    found = _last_boxed_content(response_text)
    if found is None:
        matches = list(_STATEMENT_RE.finditer(response_text))
        if matches:
            rest = response_text[matches[-1].end() :].lstrip()
            found = re.split(r"[\n<.!?]", rest)[0]
    if found is None:
        return 0.0
    answer = _normalise(found)
    return _same(answer, _normalise(ground_truth)) if answer else 0.0


def w25_math_answer_reward_strings_only(response_text, ground_truth):
    found = _last_boxed_content(response_text)
    if found is None:
        found = _last_statement(response_text)
    if found is None:
        return 0.0
    answer = _normalise(found)
    return float(bool(answer) and answer == _normalise(ground_truth))


def w26_math_answer_reward_keeps_thousands_separators(response_text, ground_truth):
    found = _last_boxed_content(response_text)
    if found is None:
        found = _last_statement(response_text)
    if found is None:
        return 0.0

    def normalise(s):
        s = s.replace("\\$", "").replace("$", "").strip()
        while s and (s[-1] in ".,;:!?" or (s[-1] == ")" and s.count(")") > s.count("("))):
            s = s[:-1].rstrip()
        return s

    answer = normalise(found)
    return _same(answer, normalise(ground_truth)) if answer else 0.0


def w27_math_answer_reward_first_statement(response_text, ground_truth):
    found = _last_boxed_content(response_text)
    if found is None:
        match = _STATEMENT_RE.search(response_text)
        found = _cut_statement(response_text[match.end() :]) if match else None
    if found is None:
        return 0.0
    answer = _normalise(found)
    return _same(answer, _normalise(ground_truth)) if answer else 0.0


def w28_math_answer_reward_dollars_kept(response_text, ground_truth):
    found = _last_boxed_content(response_text)
    if found is None:
        found = _last_statement(response_text)
    if found is None:
        return 0.0

    def normalise(s):
        s = s.strip()
        while s and (s[-1] in ".,;:!?" or (s[-1] == ")" and s.count(")") > s.count("("))):
            s = s[:-1].rstrip()
        return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", s)

    answer = normalise(found)
    return _same(answer, normalise(ground_truth)) if answer else 0.0


def r08_math_answer_reward_scan(response_text, ground_truth):
    def boxed(text):
        key = "\\boxed{"
        starts = [m.start() for m in re.finditer(re.escape(key), text)]
        for start in reversed(starts):
            depth, i = 1, start + len(key)
            while i < len(text):
                if text[i] == "{":
                    depth += 1
                elif text[i] == "}":
                    depth -= 1
                    if depth == 0:
                        return text[start + len(key) : i]
                i += 1
        return None

    def stated(text):
        last = None
        for m in re.finditer(r"\banswer(\s+is\b\s*:?|\s*:)", text, flags=re.I):
            last = m
        if last is None:
            return None
        rest = text[last.end() :].lstrip()
        for stop in ("\n", "<"):
            rest = rest.split(stop, 1)[0]
        m = re.search(r"[.!?](\s|$)", rest)
        return rest if m is None else rest[: m.start()]

    def clean(s):
        s = s.replace("\\$", "").replace("$", "").strip()
        changed = True
        while changed and s:
            changed = False
            if s.endswith((".", ",", ";", ":", "!", "?")):
                s, changed = s[:-1].rstrip(), True
            elif s.endswith(")") and s.count(")") > s.count("("):
                s, changed = s[:-1].rstrip(), True
        return re.sub(r"(\d),(?=\d{3}(?!\d))", r"\1", s)

    text = boxed(response_text)
    if text is None:
        text = stated(response_text)
    answer = None if text is None else clean(text)
    if not answer:
        return 0.0
    truth = clean(ground_truth)
    number = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
    if number.fullmatch(answer) and number.fullmatch(truth):
        return float(float(answer) == float(truth))
    return float(answer == truth)


ROWS += [
    _row(
        "math_answer_reward",
        "01",
        w20_math_answer_reward_flat_boxed_regex,
        "finds boxes with the regex \\\\boxed\\{([^{}]*)\\}, which cannot match nested braces, so "
        "\\boxed{\\frac{1}{2}} is not read at all.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w21_math_answer_reward_first_box,
        "reads the first \\boxed{...} of the response (text.find) instead of the last one.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w22_math_answer_reward_last_number_fallback,
        "falls back to the last number in the text when the response states no answer, which the exercise forbids.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w23_math_answer_reward_case_sensitive,
        "searches for the answer statement without re.IGNORECASE, so 'The Answer is' or 'ANSWER:' is not found.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w24_math_answer_reward_cut_at_every_dot,
        "cuts the stated answer at every '.', '!' or '?', even one not followed by a space, so '3.5' is read as '3'.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w25_math_answer_reward_strings_only,
        "compares the normalised answers only as strings, so '14.0' or '2.50' does not equal '14' or '2.5'.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w26_math_answer_reward_keeps_thousands_separators,
        "its own normalisation helper drops the removal of thousands separators, so '1,000' does not equal '1000'.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w27_math_answer_reward_first_statement,
        "takes the first 'the answer is' / 'Answer:' statement (re.search) instead of the last one.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w28_math_answer_reward_dollars_kept,
        "its own normalisation helper does not strip dollar signs, so '$14$' does not equal '14'.",
    ),
    _row("math_answer_reward", "01", r07_math_answer_reward_helpers),
    _row("math_answer_reward", "01", r08_math_answer_reward_scan),
]


# ---------------------------------------------------------------------------
# Chapter 02: gather_log_probs
# ---------------------------------------------------------------------------


def w29_gather_log_probs_log_of_softmax(logits, tokens):
    probs = torch.softmax(logits, dim=-1)
    return torch.log(probs).gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


def w30_gather_log_probs_normalise_over_time(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=-2)
    return logp_all.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


def w31_gather_log_probs_shifted(logits, tokens):
    # the lecture's LM: the logits at t predict the token at t + 1
    logp_all = torch.log_softmax(logits[..., :-1, :], dim=-1)
    return logp_all.gather(-1, tokens[..., 1:].long().unsqueeze(-1)).squeeze(-1)


def w32_gather_log_probs_detached_normaliser(logits, tokens):
    def normaliser(x):  # log-sum-exp, a constant per position
        return torch.logsumexp(x, dim=-1, keepdim=True).detach()

    picked = logits.gather(-1, tokens.long().unsqueeze(-1))
    return (picked - normaliser(logits)).squeeze(-1)


def w33_gather_log_probs_max_as_normaliser(logits, tokens):
    # clever: for peaked logits log-sum-exp is about the max
    picked = logits.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)
    return picked - logits.max(dim=-1).values


def w34_gather_log_probs_cross_entropy_default(logits, tokens):
    V = logits.shape[-1]
    nll = F.cross_entropy(logits.reshape(-1, V), tokens.reshape(-1).long())
    return (-nll).expand(tokens.shape)


def w35_gather_log_probs_index_last_axis(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=-1)  # (..., T, V)
    picked = logp_all[..., tokens.long()]  # (..., T, T): every position, every token
    return picked.diagonal(dim1=-2, dim2=-1)


def r09_gather_log_probs_one_hot(logits, tokens):
    logp_all = F.log_softmax(logits, dim=-1)
    onehot = F.one_hot(tokens.long(), num_classes=logits.shape[-1]).to(logp_all.dtype)
    return (logp_all * onehot).sum(dim=-1)


def r10_gather_log_probs_cross_entropy_none(logits, tokens):
    V = logits.shape[-1]
    nll = F.cross_entropy(logits.reshape(-1, V), tokens.reshape(-1).long(), reduction="none")
    return -nll.reshape(tokens.shape)


ROWS += [
    _row(
        "gather_log_probs",
        "02",
        w29_gather_log_probs_log_of_softmax,
        "takes torch.log of torch.softmax, which underflows to -inf for logits 1000 apart instead of using "
        "log_softmax.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w30_gather_log_probs_normalise_over_time,
        "normalises with log_softmax over dim=-2, the position axis, instead of the vocabulary axis dim=-1.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w31_gather_log_probs_shifted,
        "shifts by one position (logits[..., :-1, :] scoring tokens[..., 1:]), which the exercise says the caller "
        "has already done, so it returns T - 1 values scored by the wrong logits.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w32_gather_log_probs_detached_normaliser,
        "detaches the log-sum-exp in its normaliser helper, so the value is right but the gradient with respect to "
        "the logits misses the -softmax term.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w33_gather_log_probs_max_as_normaliser,
        "subtracts the max logit instead of the log-sum-exp, so the result is not a log-probability (0 for the "
        "most likely token).",
    ),
    _row(
        "gather_log_probs",
        "02",
        w34_gather_log_probs_cross_entropy_default,
        "calls F.cross_entropy with its default reduction='mean', so every position gets the batch's mean "
        "log-probability instead of its own.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w35_gather_log_probs_index_last_axis,
        "indexes logp_all[..., tokens] and takes the diagonal, which pairs positions and tokens correctly only for a "
        "single (T, V) response: with leading batch axes it scores every row's logits with every row's tokens and "
        "returns the wrong shape.",
    ),
    _row("gather_log_probs", "02", r09_gather_log_probs_one_hot),
    _row("gather_log_probs", "02", r10_gather_log_probs_cross_entropy_none),
]


# ---------------------------------------------------------------------------
# Chapter 02: reinforce_loss
# ---------------------------------------------------------------------------


def w36_reinforce_loss_deltas_attached(logp, deltas, mask=None):
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    per_token = -(deltas[..., None] * torch.where(valid, logp, torch.zeros_like(logp)))
    return per_token.sum() / valid.sum().clamp(min=1)


def w37_reinforce_loss_multiply_by_mask(logp, deltas, mask=None):
    m = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    per_token = -(deltas.detach()[..., None] * logp) * m
    return per_token.sum() / m.sum().clamp(min=1)


def w38_reinforce_loss_mean_per_response_first(logp, deltas, mask=None):
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    per_token = torch.where(valid, -(deltas.detach()[..., None] * logp), torch.zeros_like(logp))
    per_response = per_token.sum(dim=-1) / valid.sum(dim=-1).clamp(min=1)
    return per_response.mean()


def w39_reinforce_loss_weights_as_column(logp, deltas, mask=None):
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    weights = deltas.detach().reshape(-1, 1)  # one weight per row
    per_token = torch.where(valid, -(weights * logp), torch.zeros_like(logp))
    return per_token.sum() / valid.sum().clamp(min=1)


def w40_reinforce_loss_no_clamp(logp, deltas, mask=None):
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    per_token = torch.where(valid, -(deltas.detach()[..., None] * logp), torch.zeros_like(logp))
    return per_token.sum() / valid.sum()


def w41_reinforce_loss_mean_over_padding(logp, deltas, mask=None):
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    per_token = torch.where(valid, -(deltas.detach()[..., None] * logp), torch.zeros_like(logp))
    return per_token.mean()


def w42_reinforce_loss_objective_sign(logp, deltas, mask=None):
    # the lecture's objective: J = E[delta * log pi]
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    per_token = torch.where(valid, deltas.detach()[..., None] * logp, torch.zeros_like(logp))
    return per_token.sum() / valid.sum().clamp(min=1)


def r11_reinforce_loss_boolean_index(logp, deltas, mask=None):
    weights = deltas.detach().unsqueeze(-1).expand_as(logp)
    if mask is None:
        return -(weights * logp).mean()
    valid = mask.bool()
    picked = logp[valid]
    if picked.numel() == 0:
        return (logp * 0.0)[valid].sum()
    return -(weights[valid] * picked).sum() / picked.numel()


def r12_reinforce_loss_where_then_divide(logp, deltas, mask=None):
    if mask is None:
        mask = torch.ones(logp.shape, dtype=torch.bool)
    keep = mask != 0
    safe = logp.masked_fill(~keep, 0.0)
    total = -(safe * deltas.detach().unsqueeze(-1)).sum()
    return total / max(int(keep.sum()), 1)


ROWS += [
    _row(
        "reinforce_loss",
        "02",
        w36_reinforce_loss_deltas_attached,
        "does not detach deltas, so gradient flows into the weights, which must be constants.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w37_reinforce_loss_multiply_by_mask,
        "drops the padding by multiplying by the mask, so a NaN or infinite value in the padding turns the loss "
        "into NaN instead of being ignored.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w38_reinforce_loss_mean_per_response_first,
        "averages over each response's valid tokens first and then over the responses, instead of one mean over "
        "all valid tokens of the batch.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w39_reinforce_loss_weights_as_column,
        "reshapes deltas to a (-1, 1) column, which lines the weights up only for (B, T) batches: with a "
        "(B, G, T) batch the weights broadcast along the wrong axes (or not at all).",
    ),
    _row(
        "reinforce_loss",
        "02",
        w40_reinforce_loss_no_clamp,
        "divides by the number of valid tokens without clamp(min=1), so a batch that is all padding gives 0/0 = NaN "
        "instead of 0.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w41_reinforce_loss_mean_over_padding,
        "zeroes the padding but then takes .mean() over every position, so padding tokens count in the denominator.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w42_reinforce_loss_objective_sign,
        "returns the objective mean(delta * logp) without the minus sign, so minimising it lowers the probability "
        "of rewarded responses.",
    ),
    _row("reinforce_loss", "02", r11_reinforce_loss_boolean_index),
    _row("reinforce_loss", "02", r12_reinforce_loss_where_then_divide),
]


# ---------------------------------------------------------------------------
# Chapter 02: mc_policy_gradient
# ---------------------------------------------------------------------------


def w43_mc_policy_gradient_loss_direction(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return -(reward_per_action[actions, None] * score).mean(dim=0)


def w44_mc_policy_gradient_no_minus_pi(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype)  # d log pi(a) / d logit_a
    return (reward_per_action[actions, None] * score).mean(dim=0)


def w45_mc_policy_gradient_without_replacement(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).mean(dim=0)


def w46_mc_policy_gradient_global_rng(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).mean(dim=0)


def w47_mc_policy_gradient_autograd_sum(logits, reward_per_action, n_samples, generator=None):
    actions = torch.multinomial(torch.softmax(logits, dim=-1), n_samples, replacement=True, generator=generator)
    x = logits.detach().clone().requires_grad_(True)
    objective = (reward_per_action[actions] * torch.log_softmax(x, -1)[actions]).sum()
    (grad,) = torch.autograd.grad(objective, x)
    return grad


def w48_mc_policy_gradient_reward_per_column(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi  # (n, V)
    return (score * reward_per_action).mean(dim=0)


def r13_mc_policy_gradient_bincount(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    counts = torch.bincount(actions, minlength=logits.shape[0]).to(logits.dtype)
    mean_reward = reward_per_action[actions].mean()
    return counts * reward_per_action / n_samples - pi * mean_reward


def r14_mc_policy_gradient_autograd_mean(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    x = logits.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        objective = (reward_per_action.detach()[actions] * torch.log_softmax(x, -1)[actions]).mean()
        (grad,) = torch.autograd.grad(objective, x)
    return grad


ROWS += [
    _row(
        "mc_policy_gradient",
        "02",
        w43_mc_policy_gradient_loss_direction,
        "returns minus the estimate (the gradient of a loss), while the exercise asks for the ascent direction, the "
        "gradient of the expected reward.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w44_mc_policy_gradient_no_minus_pi,
        "uses onehot(a) as the score instead of onehot(a) - pi, so the estimate is biased (it is not zero when every "
        "reward is equal).",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w45_mc_policy_gradient_without_replacement,
        "calls torch.multinomial without replacement=True (its default is False), so the samples are not the ones the "
        "exercise prescribes and more than V samples cannot be drawn.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w46_mc_policy_gradient_global_rng,
        "does not pass generator to torch.multinomial, so it samples from the global RNG and two calls with the same "
        "seeded generator disagree.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w47_mc_policy_gradient_autograd_sum,
        "lets autograd differentiate the sum instead of the mean of reward * log pi over the samples, so the "
        "estimate is n_samples times too large.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w48_mc_policy_gradient_reward_per_column,
        "multiplies the (n, V) scores by reward_per_action itself, which broadcasts along the action axis (each column "
        "weighted by its action's reward) instead of weighting each sample by its own reward.",
    ),
    _row("mc_policy_gradient", "02", r13_mc_policy_gradient_bincount),
    _row("mc_policy_gradient", "02", r14_mc_policy_gradient_autograd_mean),
]


# ---------------------------------------------------------------------------
# Chapter 03: compute_deltas
# ---------------------------------------------------------------------------


def w49_compute_deltas_population_std(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True, unbiased=False) + eps)


def w50_compute_deltas_eps_in_sqrt(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / torch.sqrt(rewards.var(dim=-1, keepdim=True) + eps)


def w51_compute_deltas_batch_mean(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=0, keepdim=True)
    equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def w52_compute_deltas_returns_input(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def w53_compute_deltas_group_of_one_raw(rewards, mode, eps=1e-6):
    if mode == "rewards" or rewards.shape[-1] == 1:
        return rewards.clone()  # a single response: nothing to compare it with
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards":
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def w54_compute_deltas_lost_keepdim(rewards, mode, eps=1e-6):
    def group_stats(r):
        return r.mean(dim=-1), r.std(dim=-1)

    if mode == "rewards":
        return rewards.clone()
    mean, std = group_stats(rewards)
    centred = rewards - mean
    equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / (std + eps)


def w55_compute_deltas_subtract_in_place(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True) if rewards.shape[-1] > 1 else None
    centred = rewards.sub_(rewards.mean(dim=-1, keepdim=True))
    centred = torch.where(equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or std is None:
        return centred
    return centred / (std + eps)


def w56_compute_deltas_nan_to_num_no_eps(rewards, mode, eps=1e-6):
    # clever: let 0 / 0 happen and clean it up afterwards
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards":
        return centred
    return torch.nan_to_num(centred / rewards.std(dim=-1, keepdim=True), nan=0.0)


def r15_compute_deltas_dispatch(rewards, mode, eps=1e-6):
    B, G = rewards.shape
    mean = rewards.mean(dim=-1, keepdim=True)
    centred = rewards - mean
    for b in range(B):  # a group without spread carries no signal
        if bool((rewards[b] == rewards[b, 0]).all()):
            centred[b] = 0.0

    def normalised():
        if G == 1:
            return centred
        return centred / (rewards.std(dim=-1, keepdim=True) + eps)

    choices = {
        "rewards": lambda: rewards.clone(),
        "centered_rewards": lambda: centred,
        "normalized_rewards": normalised,
    }
    return choices[mode]()


def r16_compute_deltas_min_max_flat(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.new_empty(rewards.shape).copy_(rewards)
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    flat = rewards.amax(dim=-1, keepdim=True) == rewards.amin(dim=-1, keepdim=True)
    centred = (rewards - rewards.mean(dim=-1, keepdim=True)).masked_fill(flat, 0.0)
    if mode == "centered_rewards":
        return centred
    return centred / (torch.std(rewards, dim=-1, keepdim=True, correction=1) + eps)


ROWS += [
    _row(
        "compute_deltas",
        "03",
        w49_compute_deltas_population_std,
        "divides by the population std (unbiased=False, dividing by G) instead of the Bessel-corrected std.",
    ),
    _row(
        "compute_deltas",
        "03",
        w50_compute_deltas_eps_in_sqrt,
        "adds eps to the variance inside the square root, sqrt(var + eps), instead of to the std outside it.",
    ),
    _row(
        "compute_deltas",
        "03",
        w51_compute_deltas_batch_mean,
        "subtracts the mean over the batch axis (dim=0) instead of each prompt's group mean (dim=-1).",
    ),
    _row(
        "compute_deltas",
        "03",
        w52_compute_deltas_returns_input,
        'returns the rewards tensor itself in the "rewards" mode, not a new tensor.',
    ),
    _row(
        "compute_deltas",
        "03",
        w53_compute_deltas_group_of_one_raw,
        "special-cases groups of one (G == 1) by returning the raw rewards in every mode, while the centred and "
        "normalised modes must give zeros.",
    ),
    _row(
        "compute_deltas",
        "03",
        w54_compute_deltas_lost_keepdim,
        "its group_stats helper takes the mean and std without keepdim=True, so the (B,) statistics broadcast along "
        "the group axis instead of the batch axis (wrong when B == G, an error otherwise).",
    ),
    _row(
        "compute_deltas",
        "03",
        w55_compute_deltas_subtract_in_place,
        "centres with rewards.sub_(mean), which changes the caller's rewards in place.",
    ),
    _row(
        "compute_deltas",
        "03",
        w56_compute_deltas_nan_to_num_no_eps,
        "divides by the std without adding eps and cleans the 0/0 with nan_to_num, so normalised deltas are "
        "centred / std instead of centred / (std + eps).",
    ),
    _row("compute_deltas", "03", r15_compute_deltas_dispatch),
    _row("compute_deltas", "03", r16_compute_deltas_min_max_flat),
]


# ---------------------------------------------------------------------------
# Chapter 03: gradient_variance
# ---------------------------------------------------------------------------


def w57_gradient_variance_over_columns(grad_samples):
    return float(grad_samples.var(dim=1).sum())


def w58_gradient_variance_numpy_default(grad_samples):
    return float(np.var(grad_samples.detach().cpu().numpy(), axis=0).sum())


def w59_gradient_variance_mean_of_coordinates(grad_samples):
    return float(grad_samples.var(dim=0).mean())


def w60_gradient_variance_of_the_mean(grad_samples):
    N = grad_samples.shape[0]
    return float(grad_samples.var(dim=0).sum() / N)


def w61_gradient_variance_returns_tensor(grad_samples):
    return grad_samples.var(dim=0).sum()


def w62_gradient_variance_second_moment(grad_samples):
    N = grad_samples.shape[0]
    return float((grad_samples**2).sum(dim=0).sum() / (N - 1))


def w63_gradient_variance_cov_default(grad_samples):
    cov = torch.atleast_2d(torch.cov(grad_samples))
    return float(torch.trace(cov))


def r17_gradient_variance_cov_transposed(grad_samples):
    cov = torch.atleast_2d(torch.cov(grad_samples.T))
    return float(cov.diagonal().sum())


def r18_gradient_variance_numpy_ddof(grad_samples):
    x = grad_samples.detach().cpu().double().numpy()
    return float(np.var(x, axis=0, ddof=1).sum())


ROWS += [
    _row(
        "gradient_variance",
        "03",
        w57_gradient_variance_over_columns,
        "takes each row's variance (dim=1, across the coordinates) instead of each coordinate's variance across the "
        "samples (dim=0).",
    ),
    _row(
        "gradient_variance",
        "03",
        w58_gradient_variance_numpy_default,
        "uses numpy.var with its default ddof=0, dividing by N instead of N - 1.",
    ),
    _row(
        "gradient_variance",
        "03",
        w59_gradient_variance_mean_of_coordinates,
        "averages the P per-coordinate variances instead of summing them.",
    ),
    _row(
        "gradient_variance",
        "03",
        w60_gradient_variance_of_the_mean,
        "divides the total variance by N, the variance of the mean of the N estimates instead of one estimate's.",
    ),
    _row(
        "gradient_variance",
        "03",
        w61_gradient_variance_returns_tensor,
        "returns a 0-dim tensor instead of a Python float.",
    ),
    _row(
        "gradient_variance",
        "03",
        w62_gradient_variance_second_moment,
        "sums the squared samples without subtracting each coordinate's mean, a second moment rather than a variance.",
    ),
    _row(
        "gradient_variance",
        "03",
        w63_gradient_variance_cov_default,
        "calls torch.cov on the (N, P) samples, which by default treats the rows as the variables, so it sums the "
        "variances of the N samples across coordinates.",
    ),
    _row("gradient_variance", "03", r17_gradient_variance_cov_transposed),
    _row("gradient_variance", "03", r18_gradient_variance_numpy_ddof),
]


# ---------------------------------------------------------------------------
# Chapter 04: gae_table (gamma = 0.9, lam = 0.8, terminal at t = 2, V(s_5) = 1)
# ---------------------------------------------------------------------------


def w64_gae_table_recursion_not_cut():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.607, 0.357, 1.330, 0.458, 1.4]
    return deltas, advantages


def w65_gae_table_bootstrap_not_cut():
    deltas = [0.35, -0.6, 1.9, -0.55, 1.4]
    advantages = [0.903, 0.768, 1.9, 0.458, 1.4]
    return deltas, advantages


def w66_gae_table_lambda_only():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.51, 0.2, 1.0, 0.57, 1.4]
    return deltas, advantages


def w67_gae_table_one_decimal():
    deltas = [0.4, -0.6, 1.0, -0.6, 1.4]
    advantages = [0.4, 0.1, 1.0, 0.5, 1.4]
    return deltas, advantages


def w68_gae_table_last_value_zero():
    deltas = [0.35, -0.6, 1.0, -0.55, 0.5]
    advantages = [0.436, 0.12, 1.0, -0.19, 0.5]
    return deltas, advantages


def w69_gae_table_columns_swapped():
    advantages = [0.436, 0.12, 1.0, 0.458, 1.4]
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    return advantages, deltas


def w70_gae_table_returns_column():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [2.436, 1.62, 2.0, 1.458, 1.9]  # A_t + V(s_t)
    return deltas, advantages


def r19_gae_table_three_decimals():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.436, 0.12, 1.0, 0.458, 1.4]
    return deltas, advantages


def r20_gae_table_exact():
    deltas = [0.35, -0.60, 1.00, -0.55, 1.40]
    advantages = [0.4364, 0.1200, 1.0000, 0.4580, 1.4000]
    return deltas, advantages


ROWS += [
    _row(
        "gae_table",
        "04",
        w64_gae_table_recursion_not_cut,
        "cuts the bootstrap in delta_2 but not the recursion at the terminal step, so A_2 = 1 + 0.72 * A_3 carries "
        "the next episode's advantage back into this one (A_0, A_1, A_2 wrong).",
    ),
    _row(
        "gae_table",
        "04",
        w65_gae_table_bootstrap_not_cut,
        "cuts the recursion at the terminal step but not the bootstrap in delta_2, which adds gamma * V(s_3) "
        "(delta_2 = 1.9 instead of 1.0).",
    ),
    _row(
        "gae_table",
        "04",
        w66_gae_table_lambda_only,
        "runs the advantage recursion with lambda alone (A_t = delta_t + lam * A_{t+1}) instead of gamma * lambda.",
    ),
    _row(
        "gae_table",
        "04",
        w67_gae_table_one_decimal,
        "computes the right columns but hands them in rounded to one decimal, off by more than the 0.001 allowed.",
    ),
    _row(
        "gae_table",
        "04",
        w68_gae_table_last_value_zero,
        "takes V(s_5) = 0 after the last row instead of last_values = 1, though the episode is still running there "
        "(delta_4 and A_3, A_4 wrong).",
    ),
    _row(
        "gae_table",
        "04",
        w69_gae_table_columns_swapped,
        "returns the two right columns in the wrong order, (advantages, deltas) instead of (deltas, advantages).",
    ),
    _row(
        "gae_table",
        "04",
        w70_gae_table_returns_column,
        "writes the lambda-returns A_t + V(s_t) in the advantages column instead of the advantages.",
    ),
    _row("gae_table", "04", r19_gae_table_three_decimals),
    _row("gae_table", "04", r20_gae_table_exact),
]


# ---------------------------------------------------------------------------
# Chapter 04: compute_gae
# ---------------------------------------------------------------------------


def _next_values(values, last_values):
    return torch.cat([values[..., 1:], last_values.unsqueeze(-1).to(values.dtype)], dim=-1)


def w71_compute_gae_recursion_not_cut(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    deltas = rewards + gamma * (1.0 - d) * _next_values(values, last_values) - values
    adv = torch.empty_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(deltas.shape[-1])):
        running = deltas[..., t] + gamma * lam * running
        adv[..., t] = running
    return adv, adv + values


def w72_compute_gae_bitwise_not_done(rewards, values, dones, last_values, gamma, lam):
    alive = (~dones).to(rewards.dtype)  # 1 while the episode goes on
    deltas = rewards + gamma * alive * _next_values(values, last_values) - values
    adv = torch.empty_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(deltas.shape[-1])):
        running = deltas[..., t] + gamma * lam * alive[..., t] * running
        adv[..., t] = running
    return adv, adv + values


def w73_compute_gae_monte_carlo_returns(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    deltas = rewards + gamma * (1.0 - d) * _next_values(values, last_values) - values
    adv = torch.empty_like(deltas)
    returns = torch.empty_like(deltas)
    running_adv = torch.zeros_like(deltas[..., 0])
    running_ret = last_values.to(rewards.dtype).clone()
    for t in reversed(range(deltas.shape[-1])):
        running_adv = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running_adv
        running_ret = rewards[..., t] + gamma * (1.0 - d[..., t]) * running_ret
        adv[..., t] = running_adv
        returns[..., t] = running_ret
    return adv, returns


def w74_compute_gae_lambda_in_delta(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    deltas = rewards + gamma * lam * (1.0 - d) * _next_values(values, last_values) - values
    adv = torch.empty_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(deltas.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        adv[..., t] = running
    return adv, adv + values


def w75_compute_gae_writes_into_rewards(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    adv = rewards  # reuse the buffer: delta_t overwrites r_t once it is used
    adv += gamma * (1.0 - d) * _next_values(values, last_values) - values
    running = torch.zeros_like(adv[..., 0])
    for t in reversed(range(adv.shape[-1])):
        running = adv[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        adv[..., t] = running
    return adv, adv + values


def w76_compute_gae_zero_after_rollout(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    # after the rollout there is nothing: V(s_T) = 0
    next_values = F.pad(values[..., 1:], (0, 1))
    deltas = rewards + gamma * (1.0 - d) * next_values - values
    adv = torch.empty_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(deltas.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        adv[..., t] = running
    return adv, adv + values


def w77_compute_gae_done_of_next_step(rewards, values, dones, last_values, gamma, lam):
    # CleanRL's loop, from memory: the flag that cuts step t is the one stored at t + 1
    d = dones.to(rewards.dtype)
    next_alive = 1.0 - torch.cat([d[..., 1:], torch.zeros_like(d[..., :1])], dim=-1)
    deltas = rewards + gamma * next_alive * _next_values(values, last_values) - values
    adv = torch.empty_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(deltas.shape[-1])):
        running = deltas[..., t] + gamma * lam * next_alive[..., t] * running
        adv[..., t] = running
    return adv, adv + values


def r21_compute_gae_list_stack(rewards, values, dones, last_values, gamma, lam):
    alive = 1.0 - dones.to(rewards.dtype)
    next_value = last_values.to(rewards.dtype)
    next_adv = torch.zeros_like(rewards[..., 0])
    out = []
    for t in range(rewards.shape[-1] - 1, -1, -1):
        delta = rewards[..., t] + gamma * alive[..., t] * next_value - values[..., t]
        next_adv = delta + gamma * lam * alive[..., t] * next_adv
        out.append(next_adv)
        next_value = values[..., t]
    adv = torch.stack(out[::-1], dim=-1)
    return adv, adv + values


def r22_compute_gae_where_terminal(rewards, values, dones, last_values, gamma, lam):
    terminal = dones.bool()
    zero = torch.zeros((), dtype=rewards.dtype)
    nxt = torch.cat([values[..., 1:], last_values[..., None].to(rewards.dtype)], dim=-1)
    deltas = rewards + gamma * torch.where(terminal, zero, nxt) - values
    adv = torch.zeros_like(deltas)
    T = deltas.shape[-1]
    adv[..., T - 1] = deltas[..., T - 1]
    for t in range(T - 2, -1, -1):
        carried = torch.where(terminal[..., t], zero, adv[..., t + 1])
        adv[..., t] = deltas[..., t] + gamma * lam * carried
    return adv, values + adv


ROWS += [
    _row(
        "compute_gae",
        "04",
        w71_compute_gae_recursion_not_cut,
        "cuts the bootstrap in delta at a terminal step but runs the advantage recursion without (1 - done_t), so "
        "the next episode's advantages leak back into this one.",
    ),
    _row(
        "compute_gae",
        "04",
        w72_compute_gae_bitwise_not_done,
        "writes 'not done' as ~dones, which is right for bool flags but gives -1 and -2 for 0/1 integer flags (and "
        "fails on float flags).",
    ),
    _row(
        "compute_gae",
        "04",
        w73_compute_gae_monte_carlo_returns,
        "returns the bootstrapped Monte-Carlo reward-to-go as the returns instead of advantages + values (the "
        "lambda-return).",
    ),
    _row(
        "compute_gae",
        "04",
        w74_compute_gae_lambda_in_delta,
        "puts gamma * lam in front of V(s_{t+1}) in the TD residual, which takes gamma alone.",
    ),
    _row(
        "compute_gae",
        "04",
        w75_compute_gae_writes_into_rewards,
        "reuses the rewards tensor as the advantages buffer (adv = rewards; adv += ...), so the caller's rewards are "
        "overwritten.",
    ),
    _row(
        "compute_gae",
        "04",
        w76_compute_gae_zero_after_rollout,
        "pads V(s_{t+1}) with 0 after the last step instead of last_values, so a rollout cut mid-episode is "
        "treated as terminated.",
    ),
    _row(
        "compute_gae",
        "04",
        w77_compute_gae_done_of_next_step,
        "cuts step t with the done flag of step t + 1 (CleanRL's next-done convention), while here dones[..., t] "
        "means the episode terminated at step t.",
    ),
    _row("compute_gae", "04", r21_compute_gae_list_stack),
    _row("compute_gae", "04", r22_compute_gae_where_terminal),
]


# ---------------------------------------------------------------------------
# Chapter 04: td_residuals
# ---------------------------------------------------------------------------


def w78_td_residuals_roll(rewards, values, dones, last_values, gamma):
    # clever: the next value is the value rolled one step back
    next_values = torch.roll(values, shifts=-1, dims=-1)
    return rewards + gamma * (1.0 - dones.to(rewards.dtype)) * next_values - values


def w79_td_residuals_no_done(rewards, values, dones, last_values, gamma):
    return rewards + gamma * _next_values(values, last_values) - values


def w80_td_residuals_discount_both_values(rewards, values, dones, last_values, gamma):
    # literal: r_t + gamma * (V(s_{t+1}) - V(s_t))
    alive = 1.0 - dones.to(rewards.dtype)
    return rewards + gamma * (alive * _next_values(values, last_values) - values)


def w81_td_residuals_last_step_always_bootstraps(rewards, values, dones, last_values, gamma):
    alive = 1.0 - dones.to(rewards.dtype)
    alive[..., -1] = 1.0  # the last step bootstraps from last_values
    return rewards + gamma * alive * _next_values(values, last_values) - values


def w82_td_residuals_prepended_shift(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([last_values.unsqueeze(-1).to(values.dtype), values[..., :-1]], dim=-1)
    return rewards + gamma * (1.0 - dones.to(rewards.dtype)) * next_values - values


def w83_td_residuals_subtract_bool(rewards, values, dones, last_values, gamma):
    alive = 1 - dones  # fine for 0/1 flags
    return rewards + gamma * alive * _next_values(values, last_values) - values


def r23_td_residuals_logical_not(rewards, values, dones, last_values, gamma):
    alive = dones.logical_not().to(rewards.dtype)
    nxt = values.clone()
    nxt[..., :-1] = values[..., 1:]
    nxt[..., -1] = last_values
    return rewards - values + gamma * alive * nxt


def r24_td_residuals_pad_then_fill(rewards, values, dones, last_values, gamma):
    nxt = F.pad(values[..., 1:], (0, 1)) + F.pad(last_values.to(values.dtype).unsqueeze(-1), (values.shape[-1] - 1, 0))
    bootstrap = torch.where(dones.bool(), torch.zeros_like(nxt), nxt)
    return rewards + gamma * bootstrap - values


ROWS += [
    _row(
        "td_residuals",
        "04",
        w78_td_residuals_roll,
        "shifts the values with torch.roll, which wraps around: the last step bootstraps from V(s_0) instead of "
        "last_values.",
    ),
    _row(
        "td_residuals",
        "04",
        w79_td_residuals_no_done,
        "ignores dones, so a terminal step still bootstraps from the next state's value.",
    ),
    _row(
        "td_residuals",
        "04",
        w80_td_residuals_discount_both_values,
        "multiplies gamma into both values, r_t + gamma * (V(s_{t+1}) - V(s_t)), so V(s_t) is discounted too.",
    ),
    _row(
        "td_residuals",
        "04",
        w81_td_residuals_last_step_always_bootstraps,
        "special-cases the last step to always bootstrap from last_values, even when dones[..., -1] says the "
        "episode terminated there.",
    ),
    _row(
        "td_residuals",
        "04",
        w82_td_residuals_prepended_shift,
        "shifts the values the wrong way, prepending last_values, so step t bootstraps from V(s_{t-1}).",
    ),
    _row(
        "td_residuals",
        "04",
        w83_td_residuals_subtract_bool,
        "computes 1 - dones without converting the flags, which raises for bool dones (torch refuses to subtract "
        "a bool tensor).",
    ),
    _row("td_residuals", "04", r23_td_residuals_logical_not),
    _row("td_residuals", "04", r24_td_residuals_pad_then_fill),
]


# ---------------------------------------------------------------------------
# Chapter 05: clipped_surrogate_loss
# ---------------------------------------------------------------------------


def _ppo_diagnostics(ratio, adv, valid, low, high):
    with torch.no_grad():
        ratio = torch.where(valid, ratio, torch.ones_like(ratio))
        below, above = ratio < low, ratio > high
        binds = (above & (adv > 0)) | (below & (adv < 0))
        n = max(int(valid.sum()), 1)
        return {
            "clip_fraction": float(((below | above) & valid).sum()) / n,
            "clip_active_fraction": float((binds & valid).sum()) / n,
            "approx_kl": float(torch.where(valid, (ratio - 1) - torch.log(ratio), torch.zeros_like(ratio)).sum()) / n,
        }


def _surrogate_inputs(logp, logp_old, adv, mask):
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    return (
        valid,
        torch.where(valid, logp, zero),
        torch.where(valid, logp_old.detach(), zero),
        torch.where(valid, adv.detach(), zero),
    )


def w84_clipped_surrogate_loss_ratio_quotient(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    one = torch.ones_like(logp)
    ratio = torch.where(valid, logp, one) / torch.where(valid, logp_old.detach(), one)
    a = torch.where(valid, adv.detach(), torch.zeros_like(adv))
    per = -torch.minimum(ratio * a, ratio.clamp(1 - clip_eps, 1 + high) * a)
    loss = torch.where(valid, per, torch.zeros_like(per)).sum() / valid.sum().clamp(min=1)
    return loss, _ppo_diagnostics(ratio, a, valid, 1 - clip_eps, 1 + high)


def w85_clipped_surrogate_loss_old_attached(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    lp, lp_old = torch.where(valid, logp, zero), torch.where(valid, logp_old, zero)
    a = torch.where(valid, adv.detach(), zero)
    ratio = torch.exp(lp - lp_old)
    per = -torch.minimum(ratio * a, ratio.clamp(1 - clip_eps, 1 + high) * a)
    loss = torch.where(valid, per, zero).sum() / valid.sum().clamp(min=1)
    return loss, _ppo_diagnostics(ratio, a, valid, 1 - clip_eps, 1 + high)


def w86_clipped_surrogate_loss_adv_attached(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    lp, lp_old = torch.where(valid, logp, zero), torch.where(valid, logp_old.detach(), zero)
    a = torch.where(valid, adv, zero)
    ratio = torch.exp(lp - lp_old)
    per = -torch.minimum(ratio * a, ratio.clamp(1 - clip_eps, 1 + high) * a)
    loss = torch.where(valid, per, zero).sum() / valid.sum().clamp(min=1)
    return loss, _ppo_diagnostics(ratio, a, valid, 1 - clip_eps, 1 + high)


def w87_clipped_surrogate_loss_symmetric_clip(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    valid, lp, lp_old, a = _surrogate_inputs(logp, logp_old, adv, mask)
    ratio = torch.exp(lp - lp_old)
    per = -torch.minimum(ratio * a, ratio.clamp(1 - clip_eps, 1 + clip_eps) * a)
    loss = torch.where(valid, per, torch.zeros_like(per)).sum() / valid.sum().clamp(min=1)
    return loss, _ppo_diagnostics(ratio, a, valid, 1 - clip_eps, 1 + clip_eps)


def w88_clipped_surrogate_loss_clip_ratio_only(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid, lp, lp_old, a = _surrogate_inputs(logp, logp_old, adv, mask)
    ratio = torch.exp(lp - lp_old)
    per = -ratio.clamp(1 - clip_eps, 1 + high) * a  # the clipped ratio times the advantage
    loss = torch.where(valid, per, torch.zeros_like(per)).sum() / valid.sum().clamp(min=1)
    return loss, _ppo_diagnostics(ratio, a, valid, 1 - clip_eps, 1 + high)


def w89_clipped_surrogate_loss_multiply_mask(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    m = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    ratio = torch.exp(logp - logp_old.detach())
    a = adv.detach()
    per = -torch.minimum(ratio * a, ratio.clamp(1 - clip_eps, 1 + high) * a)
    loss = (per * m).sum() / m.sum().clamp(min=1)
    return loss, _ppo_diagnostics(ratio, a, m.bool(), 1 - clip_eps, 1 + high)


def w90_clipped_surrogate_loss_clip_fraction_binding(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid, lp, lp_old, a = _surrogate_inputs(logp, logp_old, adv, mask)
    ratio = torch.exp(lp - lp_old)
    per = -torch.minimum(ratio * a, ratio.clamp(1 - clip_eps, 1 + high) * a)
    loss = torch.where(valid, per, torch.zeros_like(per)).sum() / valid.sum().clamp(min=1)
    info = _ppo_diagnostics(ratio, a, valid, 1 - clip_eps, 1 + high)
    info["clip_fraction"] = info["clip_active_fraction"]  # the share of entries the clip acts on
    return loss, info


def w91_clipped_surrogate_loss_kl_as_log_ratio(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid, lp, lp_old, a = _surrogate_inputs(logp, logp_old, adv, mask)
    ratio = torch.exp(lp - lp_old)
    per = -torch.minimum(ratio * a, ratio.clamp(1 - clip_eps, 1 + high) * a)
    loss = torch.where(valid, per, torch.zeros_like(per)).sum() / valid.sum().clamp(min=1)
    info = _ppo_diagnostics(ratio, a, valid, 1 - clip_eps, 1 + high)
    with torch.no_grad():
        info["approx_kl"] = float((lp_old - lp)[valid].sum()) / max(int(valid.sum()), 1)
    return loss, info


def w92_clipped_surrogate_loss_diagnostics_over_padding(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid, lp, lp_old, a = _surrogate_inputs(logp, logp_old, adv, mask)
    ratio = torch.exp(lp - lp_old)
    per = -torch.minimum(ratio * a, ratio.clamp(1 - clip_eps, 1 + high) * a)
    loss = torch.where(valid, per, torch.zeros_like(per)).sum() / valid.sum().clamp(min=1)
    with torch.no_grad():
        outside = (ratio < 1 - clip_eps) | (ratio > 1 + high)
        binds = ((ratio > 1 + high) & (a > 0)) | ((ratio < 1 - clip_eps) & (a < 0))
        info = {
            "clip_fraction": outside.double().mean().item(),
            "clip_active_fraction": binds.double().mean().item(),
            "approx_kl": ((ratio - 1) - torch.log(ratio)).double().mean().item(),
        }
    return loss, info


def r25_clipped_surrogate_loss_by_sign(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid, lp, lp_old, a = _surrogate_inputs(logp, logp_old, adv, mask)
    ratio = torch.exp(lp - lp_old)
    # A >= 0: the ratio is capped above; A < 0: it is floored below
    capped = torch.where(a >= 0, torch.clamp(ratio, max=1 + high), torch.clamp(ratio, min=1 - clip_eps))
    per = -capped * a
    n = valid.sum()
    loss = torch.where(valid, per, torch.zeros_like(per)).sum() / torch.clamp(n, min=1)
    return loss, _ppo_diagnostics(ratio, a, valid, 1 - clip_eps, 1 + high)


def r26_clipped_surrogate_loss_selected(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones(logp.shape, dtype=torch.bool) if mask is None else mask != 0
    lp, lp_old, a = logp[valid], logp_old.detach()[valid], adv.detach()[valid]
    ratio = (lp - lp_old).exp()
    unclipped = ratio * a
    clipped = ratio.clamp(1 - clip_eps, 1 + high) * a
    objective = torch.min(unclipped, clipped)
    loss = -objective.sum() / max(lp.numel(), 1)
    if lp.numel() == 0:
        loss = (logp * 0.0)[valid].sum()
    with torch.no_grad():
        n = max(lp.numel(), 1)
        out_low, out_high = ratio < 1 - clip_eps, ratio > 1 + high
        info = {
            "clip_fraction": (out_low | out_high).sum().item() / n,
            "clip_active_fraction": ((out_high & (a > 0)) | (out_low & (a < 0))).sum().item() / n,
            "approx_kl": (ratio - 1 - ratio.log()).sum().item() / n,
        }
    return loss, info


ROWS += [
    _row(
        "clipped_surrogate_loss",
        "05",
        w84_clipped_surrogate_loss_ratio_quotient,
        "computes the ratio as the quotient logp / logp_old of the log-probs instead of exp(logp - logp_old).",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w85_clipped_surrogate_loss_old_attached,
        "does not detach logp_old, so gradient flows into the old log-probs, which are constants.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w86_clipped_surrogate_loss_adv_attached,
        "does not detach adv, so gradient flows into the advantages, which are constants.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w87_clipped_surrogate_loss_symmetric_clip,
        "ignores clip_eps_high and clips the ratio to [1 - clip_eps, 1 + clip_eps] in the loss and the diagnostics.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w88_clipped_surrogate_loss_clip_ratio_only,
        "clips the ratio and uses -clip(r) * A alone, dropping the min with the unclipped objective r * A.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w89_clipped_surrogate_loss_multiply_mask,
        "drops the padding by multiplying the per-entry loss by the mask, so a NaN in the padding, or a -inf old "
        "log-prob there (an infinite ratio), makes the loss NaN (0 * nan, 0 * inf).",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w90_clipped_surrogate_loss_clip_fraction_binding,
        "reports clip_fraction as the share where the clip binds (the same number as clip_active_fraction), instead of "
        "the share of ratios outside the range whatever the advantage's sign.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w91_clipped_surrogate_loss_kl_as_log_ratio,
        "reports approx_kl as the mean of logp_old - logp (the k1 estimate) instead of the mean of (r - 1) - log r.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w92_clipped_surrogate_loss_diagnostics_over_padding,
        "averages the three diagnostics over every entry, padding included, instead of over the valid entries.",
    ),
    _row("clipped_surrogate_loss", "05", r25_clipped_surrogate_loss_by_sign),
    _row("clipped_surrogate_loss", "05", r26_clipped_surrogate_loss_selected),
]


# ---------------------------------------------------------------------------
# Chapter 05: value_loss
# ---------------------------------------------------------------------------


def _value_inputs(values, returns, mask):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    return valid, torch.where(valid, values, zero), torch.where(valid, returns.detach(), zero)


def _masked_average(x, valid):
    return torch.where(valid, x, torch.zeros_like(x)).sum() / valid.sum().clamp(min=1)


def w93_value_loss_no_half(values, returns, values_old=None, clip_eps=None, mask=None):
    valid, v, ret = _value_inputs(values, returns, mask)
    err = (v - ret) ** 2
    if clip_eps is not None:
        v_old = torch.where(valid, values_old.detach(), torch.zeros_like(v))
        err = torch.maximum(err, (v_old + (v - v_old).clamp(-clip_eps, clip_eps) - ret) ** 2)
    return _masked_average(err, valid)  # F.mse_loss, as in SB3


def w94_value_loss_returns_attached(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    v, ret = torch.where(valid, values, zero), torch.where(valid, returns, zero)
    err = (v - ret) ** 2
    if clip_eps is not None:
        v_old = torch.where(valid, values_old.detach(), zero)
        err = torch.maximum(err, (v_old + (v - v_old).clamp(-clip_eps, clip_eps) - ret) ** 2)
    return 0.5 * _masked_average(err, valid)


def w95_value_loss_old_attached(values, returns, values_old=None, clip_eps=None, mask=None):
    valid, v, ret = _value_inputs(values, returns, mask)
    err = (v - ret) ** 2
    if clip_eps is not None:
        v_old = torch.where(valid, values_old, torch.zeros_like(v))
        err = torch.maximum(err, (v_old + (v - v_old).clamp(-clip_eps, clip_eps) - ret) ** 2)
    return 0.5 * _masked_average(err, valid)


def w96_value_loss_optimistic_min(values, returns, values_old=None, clip_eps=None, mask=None):
    valid, v, ret = _value_inputs(values, returns, mask)
    err = (v - ret) ** 2
    if clip_eps is not None:
        v_old = torch.where(valid, values_old.detach(), torch.zeros_like(v))
        err = torch.minimum(err, (v_old + (v - v_old).clamp(-clip_eps, clip_eps) - ret) ** 2)
    return 0.5 * _masked_average(err, valid)


def w97_value_loss_clipped_error_only(values, returns, values_old=None, clip_eps=None, mask=None):
    valid, v, ret = _value_inputs(values, returns, mask)
    if clip_eps is not None:
        v_old = torch.where(valid, values_old.detach(), torch.zeros_like(v))
        v = v_old + (v - v_old).clamp(-clip_eps, clip_eps)  # the value may move at most clip_eps
    return 0.5 * _masked_average((v - ret) ** 2, valid)


def w98_value_loss_multiply_mask(values, returns, values_old=None, clip_eps=None, mask=None):
    m = torch.ones_like(values) if mask is None else mask.to(values.dtype)
    err = (values - returns.detach()) ** 2
    if clip_eps is not None:
        v_old = values_old.detach()
        err = torch.maximum(err, (v_old + (values - v_old).clamp(-clip_eps, clip_eps) - returns.detach()) ** 2)
    return 0.5 * (err * m).sum() / m.sum().clamp(min=1)


def w99_value_loss_mean_over_padding(values, returns, values_old=None, clip_eps=None, mask=None):
    valid, v, ret = _value_inputs(values, returns, mask)
    err = (v - ret) ** 2
    if clip_eps is not None:
        v_old = torch.where(valid, values_old.detach(), torch.zeros_like(v))
        err = torch.maximum(err, (v_old + (v - v_old).clamp(-clip_eps, clip_eps) - ret) ** 2)
    return 0.5 * torch.where(valid, err, torch.zeros_like(err)).mean()


def r27_value_loss_selected(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones(values.shape, dtype=torch.bool) if mask is None else mask != 0
    v, ret = values[valid], returns.detach()[valid]
    err = (v - ret).pow(2)
    if clip_eps is not None:
        v_old = values_old.detach()[valid]
        clipped = torch.clamp(v, v_old - clip_eps, v_old + clip_eps)
        err = torch.max(err, (clipped - ret).pow(2))
    if err.numel() == 0:
        return (values * 0.0)[valid].sum()
    return err.sum() / (2 * err.numel())


def r28_value_loss_mse_none(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    v = values.masked_fill(~valid, 0.0)
    ret = returns.detach().masked_fill(~valid, 0.0)
    err = F.mse_loss(v, ret, reduction="none")
    if clip_eps is not None:
        v_old = values_old.detach().masked_fill(~valid, 0.0)
        step = torch.clamp(v - v_old, min=-clip_eps, max=clip_eps)
        err = torch.maximum(err, F.mse_loss(v_old + step, ret, reduction="none"))
    count = valid.sum().clamp(min=1)
    return 0.5 * err.masked_fill(~valid, 0.0).sum() / count


ROWS += [
    _row(
        "value_loss",
        "05",
        w93_value_loss_no_half,
        "leaves out the factor 1/2 (SB3's F.mse_loss convention), so the loss and its gradients are twice the "
        "course's.",
    ),
    _row(
        "value_loss",
        "05",
        w94_value_loss_returns_attached,
        "does not detach returns, so gradient flows into the regression targets.",
    ),
    _row(
        "value_loss",
        "05",
        w95_value_loss_old_attached,
        "does not detach values_old in the clipped branch, so gradient flows into the rollout's values where the "
        "clip binds.",
    ),
    _row(
        "value_loss",
        "05",
        w96_value_loss_optimistic_min,
        "takes the minimum of the clipped and unclipped squared errors instead of the pessimistic maximum.",
    ),
    _row(
        "value_loss",
        "05",
        w97_value_loss_clipped_error_only,
        "with clip_eps uses only the clipped value's error, dropping the max with the unclipped error.",
    ),
    _row(
        "value_loss",
        "05",
        w98_value_loss_multiply_mask,
        "drops the padding by multiplying the squared errors by the mask, so an infinite value in the padding makes "
        "the loss NaN or inf.",
    ),
    _row(
        "value_loss",
        "05",
        w99_value_loss_mean_over_padding,
        "zeroes the padding and then takes .mean() over every entry, so padding counts in the denominator.",
    ),
    _row("value_loss", "05", r27_value_loss_selected),
    _row("value_loss", "05", r28_value_loss_mse_none),
]


# ---------------------------------------------------------------------------
# Chapter 05: PPOLoss (classes; __init__ is the one the exercise gives)
# ---------------------------------------------------------------------------


class _GivenPPOLossInit(nn.Module):
    def __init__(self, clip_epsilon: float = 0.2, value_loss_coef: float = 0.5, entropy_coef: float = 0.01):
        super().__init__()
        self.clip_epsilon = clip_epsilon
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef


def _valid_mean(x, mask):
    valid = torch.ones_like(x, dtype=torch.bool) if mask is None else mask.bool()
    return torch.where(valid, x, torch.zeros_like(x)).sum() / valid.sum().clamp(min=1)


class w100_PPOLoss_entropy_added(_GivenPPOLossInit):
    def forward(
        self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None
    ) -> torch.Tensor:
        policy_loss, _ = course_clipped_surrogate_loss(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask
        )
        v_loss = course_value_loss(values, returns, mask=mask)
        return policy_loss + self.value_loss_coef * v_loss + self.entropy_coef * _valid_mean(entropy, mask)


class w101_PPOLoss_entropy_detached(_GivenPPOLossInit):
    def forward(
        self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None
    ) -> torch.Tensor:
        policy_loss, _ = course_clipped_surrogate_loss(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask
        )
        v_loss = course_value_loss(values, returns, mask=mask)
        bonus = _valid_mean(entropy.detach(), mask)  # a diagnostic, like approx_kl
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * bonus


class w102_PPOLoss_entropy_over_padding(_GivenPPOLossInit):
    def forward(
        self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None
    ) -> torch.Tensor:
        policy_loss, _ = course_clipped_surrogate_loss(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask
        )
        v_loss = course_value_loss(values, returns, mask=mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * entropy.mean()


class w103_PPOLoss_coefficients_swapped(_GivenPPOLossInit):
    def forward(
        self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None
    ) -> torch.Tensor:
        policy_loss, _ = course_clipped_surrogate_loss(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask
        )
        v_loss = course_value_loss(values, returns, mask=mask)
        coef_v, coef_h = self.entropy_coef, self.value_loss_coef
        return policy_loss + coef_v * v_loss - coef_h * _valid_mean(entropy, mask)


class w104_PPOLoss_value_unmasked(_GivenPPOLossInit):
    def forward(
        self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None
    ) -> torch.Tensor:
        policy_loss, _ = course_clipped_surrogate_loss(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask
        )
        v_loss = course_value_loss(values, returns)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * _valid_mean(entropy, mask)


class w105_PPOLoss_entropy_summed(_GivenPPOLossInit):
    def forward(
        self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None
    ) -> torch.Tensor:
        policy_loss, _ = course_clipped_surrogate_loss(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask
        )
        v_loss = course_value_loss(values, returns, mask=mask)
        valid = torch.ones_like(entropy, dtype=torch.bool) if mask is None else mask.bool()
        total_entropy = torch.where(valid, entropy, torch.zeros_like(entropy)).sum()
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * total_entropy


class w106_PPOLoss_normalises_advantages(_GivenPPOLossInit):
    def forward(
        self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None
    ) -> torch.Tensor:
        adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)  # per-minibatch normalisation
        policy_loss, _ = course_clipped_surrogate_loss(
            policy_logprobs, old_policy_logprobs, adv, self.clip_epsilon, mask
        )
        v_loss = course_value_loss(values, returns, mask=mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * _valid_mean(entropy, mask)


class r29_PPOLoss_info_kept(_GivenPPOLossInit):
    def forward(
        self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None
    ) -> torch.Tensor:
        policy_loss, info = course_clipped_surrogate_loss(
            policy_logprobs, old_policy_logprobs, advantages, clip_eps=self.clip_epsilon, mask=mask
        )
        v_loss = course_value_loss(values, returns, mask=mask)
        valid = torch.ones(entropy.shape, dtype=torch.bool) if mask is None else mask != 0
        h = entropy.masked_fill(~valid, 0.0).sum() / valid.sum().clamp(min=1)
        self.info = {**info, "policy_loss": policy_loss.item(), "value_loss": v_loss.item(), "entropy": h.item()}
        return policy_loss - self.entropy_coef * h + self.value_loss_coef * v_loss


class r30_PPOLoss_from_scratch(_GivenPPOLossInit):
    def forward(
        self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None
    ) -> torch.Tensor:
        valid = torch.ones_like(policy_logprobs, dtype=torch.bool) if mask is None else mask.bool()
        n = valid.sum().clamp(min=1)

        def mean(x):
            return torch.where(valid, x, torch.zeros_like(x)).sum() / n

        zero = torch.zeros_like(policy_logprobs)
        log_ratio = torch.where(valid, policy_logprobs - old_policy_logprobs.detach(), zero)
        ratio = log_ratio.exp()
        adv = torch.where(valid, advantages.detach(), zero)
        eps = self.clip_epsilon
        surrogate = -torch.min(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
        v = torch.where(valid, values, zero)
        ret = torch.where(valid, returns.detach(), zero)
        value_term = 0.5 * mean((v - ret) ** 2)
        return mean(surrogate) + self.value_loss_coef * value_term - self.entropy_coef * mean(entropy)


ROWS += [
    _row(
        "PPOLoss",
        "05",
        w100_PPOLoss_entropy_added,
        "adds entropy_coef * mean entropy to the loss instead of subtracting it, so minimising the loss lowers the "
        "entropy.",
    ),
    _row(
        "PPOLoss",
        "05",
        w101_PPOLoss_entropy_detached,
        "detaches the entropy before averaging it, so the bonus changes the value but gives no gradient.",
    ),
    _row(
        "PPOLoss",
        "05",
        w102_PPOLoss_entropy_over_padding,
        "averages the entropy with entropy.mean() over every entry, padding included, instead of over the valid "
        "entries.",
    ),
    _row(
        "PPOLoss",
        "05",
        w103_PPOLoss_coefficients_swapped,
        "swaps the two coefficients, weighing the value loss by entropy_coef and the entropy by value_loss_coef.",
    ),
    _row(
        "PPOLoss",
        "05",
        w104_PPOLoss_value_unmasked,
        "does not pass the mask to the value loss, so padding entries count in the critic's error.",
    ),
    _row(
        "PPOLoss",
        "05",
        w105_PPOLoss_entropy_summed,
        "sums the entropy over the valid entries instead of averaging it.",
    ),
    _row(
        "PPOLoss",
        "05",
        w106_PPOLoss_normalises_advantages,
        "normalises the advantages to mean 0 and std 1 before the surrogate, while the exercise uses them as given.",
    ),
    _row("PPOLoss", "05", r29_PPOLoss_info_kept),
    _row("PPOLoss", "05", r30_PPOLoss_from_scratch),
]


# ---------------------------------------------------------------------------
# Chapter 06: group_advantages
# ---------------------------------------------------------------------------


def _centred_or_zero(rewards):
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    return torch.where(equal, torch.zeros_like(centred), centred)


def w107_group_advantages_population_std(rewards, normalize_std=True, eps=1e-6):
    centred = _centred_or_zero(rewards)
    if not normalize_std:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True, correction=0) + eps)


def w108_group_advantages_eps_on_variance(rewards, normalize_std=True, eps=1e-6):
    centred = _centred_or_zero(rewards)
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.var(dim=-1, keepdim=True) + eps).sqrt()


def w109_group_advantages_small_std_is_flat(rewards, normalize_std=True, eps=1e-6):
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    std = rewards.std(dim=-1, keepdim=True)
    flat = std < eps  # no spread to speak of: no signal
    if normalize_std:
        centred = centred / (std + eps)
    return torch.where(flat, torch.zeros_like(centred), centred)


def w110_group_advantages_always_divides(rewards, normalize_std=True, eps=1e-6):
    centred = _centred_or_zero(rewards)
    if rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def w111_group_advantages_whole_batch(rewards, normalize_std=True, eps=1e-6):
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    centred = rewards - rewards.mean()
    equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(equal, torch.zeros_like(centred), centred)
    if not normalize_std:
        return centred
    return centred / (rewards.std() + eps)


def w112_group_advantages_trl_eps(rewards, normalize_std=True, eps=1e-6):
    centred = _centred_or_zero(rewards)
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + 1e-4)  # TRL's epsilon


def w113_group_advantages_std_zero_test(rewards, normalize_std=True, eps=1e-6):
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True)
    if normalize_std:
        centred = centred / (std + eps)
    return torch.where(std == 0, torch.zeros_like(centred), centred)


def r31_group_advantages_loops(rewards, normalize_std=True, eps=1e-6):
    B, G = rewards.shape
    if G == 1:
        return torch.zeros_like(rewards)
    mean = rewards.mean(dim=-1, keepdim=True)
    scale = rewards.std(dim=-1, keepdim=True) + eps if normalize_std else torch.ones_like(mean)
    out = (rewards - mean) / scale
    for b in range(B):
        if torch.all(rewards[b] == rewards[b, 0]):
            out[b] = 0.0
    return out


def r32_group_advantages_masked_fill(rewards, normalize_std=True, eps=1e-6):
    G = rewards.shape[-1]
    flat = (rewards.max(dim=-1, keepdim=True).values == rewards.min(dim=-1, keepdim=True).values) | (G < 2)
    mean = rewards.mean(dim=-1, keepdim=True)
    adv = rewards - mean
    if normalize_std:
        std = rewards.std(dim=-1, keepdim=True).nan_to_num(0.0) if G > 1 else torch.ones_like(mean)
        adv = adv / (std + eps)
    return adv.masked_fill(flat, 0.0)


ROWS += [
    _row(
        "group_advantages",
        "06",
        w107_group_advantages_population_std,
        "divides by the population std (correction=0, dividing by G) instead of the Bessel-corrected std.",
    ),
    _row(
        "group_advantages",
        "06",
        w108_group_advantages_eps_on_variance,
        "adds eps to the variance and takes the square root, sqrt(var + eps), instead of adding eps to the std.",
    ),
    _row(
        "group_advantages",
        "06",
        w109_group_advantages_small_std_is_flat,
        "treats a group whose std is below eps as all equal and gives it zeros, while rewards that differ however "
        "little must still be divided.",
    ),
    _row(
        "group_advantages",
        "06",
        w110_group_advantages_always_divides,
        "ignores normalize_std and divides by the std even when normalize_std=False (Dr. GRPO).",
    ),
    _row(
        "group_advantages",
        "06",
        w111_group_advantages_whole_batch,
        "subtracts the mean and divides by the std of the whole batch instead of each prompt's group.",
    ),
    _row(
        "group_advantages",
        "06",
        w112_group_advantages_trl_eps,
        "ignores the eps argument and adds TRL's 1e-4 to the std, so the default 1e-6 and an explicit eps are not "
        "used.",
    ),
    _row(
        "group_advantages",
        "06",
        w113_group_advantages_std_zero_test,
        "finds the groups without signal by testing std == 0, but torch.std of a group of one is NaN, not 0, so "
        "groups of one get NaN advantages.",
    ),
    _row("group_advantages", "06", r31_group_advantages_loops),
    _row("group_advantages", "06", r32_group_advantages_masked_fill),
]


# ---------------------------------------------------------------------------
# Chapter 06: kl_estimate
# ---------------------------------------------------------------------------


def w114_kl_estimate_ratio_inverted(logp, logp_ref, kind):
    log_r = logp - logp_ref  # log(pi_theta / pi_ref)
    if kind == "k1":
        return log_r
    if kind == "k2":
        return 0.5 * log_r**2
    return torch.expm1(log_r) - log_r


def w115_kl_estimate_k1_sign(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return log_r
    if kind == "k2":
        return 0.5 * log_r**2
    return torch.expm1(log_r) - log_r


def w116_kl_estimate_k2_no_half(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return log_r**2
    return torch.expm1(log_r) - log_r


def w117_kl_estimate_verl_clamps(logp, logp_ref, kind):
    log_r = (logp_ref - logp).clamp(-20, 20)
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    return (torch.expm1(log_r) - log_r).clamp(-10, 10)


def w118_kl_estimate_ratio_detached(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    r = torch.exp(log_r).detach()  # the ratio is a weight, not something to differentiate
    return (r - 1) - log_r


def w119_kl_estimate_reduced(logp, logp_ref, kind):
    # the KL is an expectation: average the estimator over the samples
    log_r = logp_ref - logp
    if kind == "k1":
        return (-log_r).mean()
    if kind == "k2":
        return (0.5 * log_r**2).mean()
    return (torch.expm1(log_r) - log_r).mean()


def w120_kl_estimate_k2_of_ratio(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * torch.expm1(log_r) ** 2  # (r - 1)^2 / 2
    return torch.expm1(log_r) - log_r


def r33_kl_estimate_from_k1(logp, logp_ref, kind):
    k1 = logp - logp_ref
    estimates = {
        "k1": lambda: k1,
        "k2": lambda: k1.square() / 2,
        "k3": lambda: torch.expm1(-k1) + k1,
    }
    return estimates[kind]()


def r34_kl_estimate_branches(logp, logp_ref, kind):
    x = torch.sub(logp_ref, logp)
    if kind == "k3":
        return torch.special.expm1(x) - x
    if kind == "k2":
        return 0.5 * x * x
    if kind == "k1":
        return torch.neg(x)
    raise ValueError(f"unknown kind {kind!r}")


ROWS += [
    _row(
        "kl_estimate",
        "06",
        w114_kl_estimate_ratio_inverted,
        "defines log r as logp - logp_ref (pi_theta / pi_ref) instead of logp_ref - logp, which flips k1's sign and "
        "turns k3 into an estimator of the other direction.",
    ),
    _row(
        "kl_estimate",
        "06",
        w115_kl_estimate_k1_sign,
        "returns log r = logp_ref - logp for k1 instead of -log r = logp - logp_ref.",
    ),
    _row(
        "kl_estimate",
        "06",
        w116_kl_estimate_k2_no_half,
        "returns (log r)^2 for k2, without the factor 1/2.",
    ),
    _row(
        "kl_estimate",
        "06",
        w117_kl_estimate_verl_clamps,
        "clamps log r to [-20, 20] and k3 to [-10, 10] as verl does, which the course does not, so far-apart "
        "policies get a capped estimate.",
    ),
    _row(
        "kl_estimate",
        "06",
        w118_kl_estimate_ratio_detached,
        "detaches the ratio r in k3, so the value is right but the gradient with respect to logp is 1 instead of "
        "1 - r.",
    ),
    _row(
        "kl_estimate",
        "06",
        w119_kl_estimate_reduced,
        "returns the mean of the estimates, a scalar, instead of one estimate per token.",
    ),
    _row(
        "kl_estimate",
        "06",
        w120_kl_estimate_k2_of_ratio,
        "computes k2 as (r - 1)^2 / 2 instead of (log r)^2 / 2.",
    ),
    _row("kl_estimate", "06", r33_kl_estimate_from_k1),
    _row("kl_estimate", "06", r34_kl_estimate_branches),
]


# ---------------------------------------------------------------------------
# Chapter 06: aggregate_loss
# ---------------------------------------------------------------------------


def w121_aggregate_loss_multiply_mask(per_token, mask, mode, max_len=None):
    m = mask.to(per_token.dtype)
    x = per_token * m
    if mode == "token-mean":
        return x.sum() / m.sum().clamp(min=1)
    if mode == "seq-mean-token-mean":
        return (x.sum(-1) / m.sum(-1).clamp(min=1)).mean()
    L = per_token.shape[-1] if max_len is None else max_len
    return (x.sum(-1) / L).mean()


def w122_aggregate_loss_skip_empty(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    x = torch.where(valid, per_token, torch.zeros_like(per_token))
    lengths = valid.sum(-1)
    if mode == "token-mean":
        return x.sum() / lengths.sum().clamp(min=1)
    L = per_token.shape[-1] if max_len is None else max_len
    denom = lengths.clamp(min=1) if mode == "seq-mean-token-mean" else torch.full_like(lengths, L)
    per_response = x.sum(-1) / denom
    nonempty = lengths > 0  # an empty response has no loss to average
    return per_response[nonempty].sum() / nonempty.sum().clamp(min=1)


def w123_aggregate_loss_token_mean_over_padding(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    x = torch.where(valid, per_token, torch.zeros_like(per_token))
    if mode == "token-mean":
        return x.mean()
    if mode == "seq-mean-token-mean":
        return (x.sum(-1) / valid.sum(-1).clamp(min=1)).mean()
    L = per_token.shape[-1] if max_len is None else max_len
    return (x.sum(-1) / L).mean()


def w124_aggregate_loss_longest_response(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    x = torch.where(valid, per_token, torch.zeros_like(per_token))
    lengths = valid.sum(-1)
    if mode == "token-mean":
        return x.sum() / lengths.sum().clamp(min=1)
    if mode == "seq-mean-token-mean":
        return (x.sum(-1) / lengths.clamp(min=1)).mean()
    L = lengths.max().clamp(min=1) if max_len is None else max_len  # the longest response
    return (x.sum(-1) / L).mean()


def w125_aggregate_loss_ignores_max_len(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    x = torch.where(valid, per_token, torch.zeros_like(per_token))
    lengths = valid.sum(-1)
    if mode == "token-mean":
        return x.sum() / lengths.sum().clamp(min=1)
    if mode == "seq-mean-token-mean":
        return (x.sum(-1) / lengths.clamp(min=1)).mean()
    return (x.sum(-1) / per_token.shape[-1]).mean()


def w126_aggregate_loss_length_outside(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    x = torch.where(valid, per_token, torch.zeros_like(per_token))
    lengths = valid.sum(-1).to(per_token.dtype)
    if mode == "token-mean":
        return x.sum() / lengths.sum().clamp(min=1)
    if mode == "seq-mean-token-mean":
        # 1/N sum_i 1/|o_i| sum_t: the mean of the sums over the mean length
        return x.sum(-1).mean() / lengths.mean().clamp(min=1)
    L = per_token.shape[-1] if max_len is None else max_len
    return (x.sum(-1) / L).mean()


def w127_aggregate_loss_divide_by_first_axis(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    x = torch.where(valid, per_token, torch.zeros_like(per_token))
    lengths = valid.sum(-1)
    if mode == "token-mean":
        return x.sum() / lengths.sum().clamp(min=1)
    L = per_token.shape[-1] if max_len is None else max_len
    denom = lengths.clamp(min=1) if mode == "seq-mean-token-mean" else L
    per_response = x.sum(-1) / denom
    return per_response.sum() / per_token.shape[0]  # mean over the responses


def w128_aggregate_loss_no_clamp(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    x = torch.where(valid, per_token, torch.zeros_like(per_token))
    lengths = valid.sum(-1)
    if mode == "token-mean":
        return x.sum() / lengths.sum()
    if mode == "seq-mean-token-mean":
        return (x.sum(-1) / lengths).mean()
    L = per_token.shape[-1] if max_len is None else max_len
    return (x.sum(-1) / L).mean()


def r35_aggregate_loss_weights(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    lengths = valid.sum(dim=-1, keepdim=True).to(per_token.dtype)
    N = valid[..., 0].numel()
    if mode == "token-mean":
        weight = torch.ones_like(lengths) / lengths.sum().clamp(min=1)
    elif mode == "seq-mean-token-mean":
        weight = 1.0 / (N * lengths.clamp(min=1))
    else:
        L = per_token.shape[-1] if max_len is None else max_len
        weight = torch.full_like(lengths, 1.0 / (N * L))
    return torch.where(valid, per_token * weight, torch.zeros_like(per_token)).sum()


def r36_aggregate_loss_flat_rows(per_token, mask, mode, max_len=None):
    T = per_token.shape[-1]
    rows = per_token.reshape(-1, T)
    keep = mask.reshape(-1, T) != 0
    sums = rows.masked_fill(~keep, 0.0).sum(dim=1)
    counts = keep.sum(dim=1)
    if mode == "token-mean":
        return sums.sum() / max(int(counts.sum()), 1)
    if mode == "seq-mean-token-mean":
        return (sums / counts.clamp(min=1)).mean()
    return (sums / (T if max_len is None else max_len)).mean()


ROWS += [
    _row(
        "aggregate_loss",
        "06",
        w121_aggregate_loss_multiply_mask,
        "drops the padding by multiplying by the mask, so a NaN or inf in the padding turns the loss into NaN "
        "instead of being ignored.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w122_aggregate_loss_skip_empty,
        "leaves empty responses out of the mean over responses, while they must contribute 0 and still count in N.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w123_aggregate_loss_token_mean_over_padding,
        'in "token-mean" zeroes the padding and then takes .mean() over every position, dividing by the padded size '
        "instead of the number of valid tokens.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w124_aggregate_loss_longest_response,
        'in "seq-mean-token-sum-norm" divides by the longest valid length when max_len is None, instead of the '
        "padded T.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w125_aggregate_loss_ignores_max_len,
        'in "seq-mean-token-sum-norm" always divides by T, ignoring the max_len argument.',
    ),
    _row(
        "aggregate_loss",
        "06",
        w126_aggregate_loss_length_outside,
        'in "seq-mean-token-mean" divides the mean of the per-response sums by the mean length, putting 1/|o_i| '
        "outside the mean over responses instead of inside it.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w127_aggregate_loss_divide_by_first_axis,
        "in the per-response modes divides the sum over responses by per_token.shape[0] (B) instead of the number "
        "of responses (every leading index, B * G).",
    ),
    _row(
        "aggregate_loss",
        "06",
        w128_aggregate_loss_no_clamp,
        "divides by the numbers of valid tokens without clamp(min=1), so an empty response gives 0/0 = NaN.",
    ),
    _row("aggregate_loss", "06", r35_aggregate_loss_weights),
    _row("aggregate_loss", "06", r36_aggregate_loss_flat_rows),
]


# ---------------------------------------------------------------------------
# Chapter 06: grpo_loss (with the library's group_advantages, kl_estimate, aggregate_loss)
# ---------------------------------------------------------------------------


def _grpo_info(logp, logp_old, adv, valid, clip_eps, high, kl, rewards):
    with torch.no_grad():
        ratio = torch.where(valid, torch.exp(logp - logp_old), torch.ones_like(logp))
        adv_t = adv.unsqueeze(-1).expand_as(logp)
        below, above = ratio < 1 - clip_eps, ratio > 1 + high
        n = max(int(valid.sum()), 1)
        info = {
            "clip_fraction": float(((below | above) & valid).sum()) / n,
            "clip_active_fraction": float((((above & (adv_t > 0)) | (below & (adv_t < 0))) & valid).sum()) / n,
            "kl": 0.0 if kl is None else float(torch.where(valid, kl, torch.zeros_like(kl)).sum()) / n,
            "adv_abs_mean": float(adv.abs().mean()),
        }
        if rewards is not None:
            info["reward_mean"] = float(rewards.mean())
    return info


def _surrogate(logp, logp_old, adv, clip_eps, high):
    ratio = torch.exp(logp - logp_old.detach())
    a = adv.detach().unsqueeze(-1)
    return -torch.minimum(ratio * a, ratio.clamp(1 - clip_eps, 1 + high) * a)


def w129_grpo_loss_kl_reversed(
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
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = mask.bool()
    if adv is None:
        adv = course_group_advantages(rewards.detach(), normalize_std)
    adv = adv.detach()
    per_token = _surrogate(logp, logp_old, adv, clip_eps, high)
    kl = None
    if logp_ref is not None:
        kl = course_kl_estimate(logp_ref.detach(), logp, kl_kind)  # KL(pi_ref || pi_theta)
        per_token = per_token + kl_coef * kl
    loss = course_aggregate_loss(per_token, valid, loss_agg, max_len)
    return loss, _grpo_info(logp, logp_old, adv, valid, clip_eps, high, kl, rewards)


def w130_grpo_loss_kl_as_bonus(
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
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = mask.bool()
    if adv is None:
        adv = course_group_advantages(rewards.detach(), normalize_std)
    adv = adv.detach()
    per_token = _surrogate(logp, logp_old, adv, clip_eps, high)
    kl = None
    if logp_ref is not None:
        kl = course_kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token - kl_coef * kl  # J - beta * KL
    loss = course_aggregate_loss(per_token, valid, loss_agg, max_len)
    return loss, _grpo_info(logp, logp_old, adv, valid, clip_eps, high, kl, rewards)


def w131_grpo_loss_batch_normalised(
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
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = mask.bool()
    if adv is None:
        r = rewards.detach()
        adv = r - r.mean()
        if normalize_std:
            adv = adv / (r.std() + 1e-6)
    adv = adv.detach()
    per_token = _surrogate(logp, logp_old, adv, clip_eps, high)
    kl = None
    if logp_ref is not None:
        kl = course_kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = course_aggregate_loss(per_token, valid, loss_agg, max_len)
    return loss, _grpo_info(logp, logp_old, adv, valid, clip_eps, high, kl, rewards)


def w132_grpo_loss_fixed_aggregation(
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
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = mask.bool()
    if adv is None:
        adv = course_group_advantages(rewards.detach(), normalize_std)
    adv = adv.detach()
    per_token = _surrogate(logp, logp_old, adv, clip_eps, high)
    kl = None
    if logp_ref is not None:
        kl = course_kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = course_aggregate_loss(per_token, valid, "seq-mean-token-mean")  # GRPO's
    return loss, _grpo_info(logp, logp_old, adv, valid, clip_eps, high, kl, rewards)


def w133_grpo_loss_regroups_given_adv(
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
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = mask.bool()
    scores = rewards if adv is None else adv
    adv = course_group_advantages(scores.detach(), normalize_std)  # both through the group baseline
    per_token = _surrogate(logp, logp_old, adv, clip_eps, high)
    kl = None
    if logp_ref is not None:
        kl = course_kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = course_aggregate_loss(per_token, valid, loss_agg, max_len)
    return loss, _grpo_info(logp, logp_old, adv, valid, clip_eps, high, kl, rewards)


def w134_grpo_loss_ref_attached(
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
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = mask.bool()
    if adv is None:
        adv = course_group_advantages(rewards.detach(), normalize_std)
    adv = adv.detach()
    per_token = _surrogate(logp, logp_old, adv, clip_eps, high)
    kl = None
    if logp_ref is not None:
        kl = course_kl_estimate(logp, logp_ref, kl_kind)
        per_token = per_token + kl_coef * kl
    loss = course_aggregate_loss(per_token, valid, loss_agg, max_len)
    return loss, _grpo_info(logp, logp_old, adv, valid, clip_eps, high, kl, rewards)


def w135_grpo_loss_symmetric_clip(
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
    valid = mask.bool()
    if adv is None:
        adv = course_group_advantages(rewards.detach(), normalize_std)
    adv = adv.detach()
    per_token = _surrogate(logp, logp_old, adv, clip_eps, clip_eps)
    kl = None
    if logp_ref is not None:
        kl = course_kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = course_aggregate_loss(per_token, valid, loss_agg, max_len)
    return loss, _grpo_info(logp, logp_old, adv, valid, clip_eps, clip_eps, kl, rewards)


def w136_grpo_loss_max_len_dropped(
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
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = mask.bool()
    if adv is None:
        adv = course_group_advantages(rewards.detach(), normalize_std)
    adv = adv.detach()
    per_token = _surrogate(logp, logp_old, adv, clip_eps, high)
    kl = None
    if logp_ref is not None:
        kl = course_kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = course_aggregate_loss(per_token, valid, loss_agg)
    return loss, _grpo_info(logp, logp_old, adv, valid, clip_eps, high, kl, rewards)


def r37_grpo_loss_by_sign(
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
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = mask.bool()
    a = (course_group_advantages(rewards.detach(), normalize_std) if adv is None else adv).detach()
    a_tok = a[..., None].expand_as(logp)
    ratio = (logp - logp_old.detach()).exp()
    capped = torch.where(a_tok >= 0, ratio.clamp(max=1 + high), ratio.clamp(min=1 - clip_eps))
    per_token = -capped * a_tok
    kl = None
    if logp_ref is not None:
        kl = course_kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = course_aggregate_loss(per_token, valid, loss_agg, max_len)
    return loss, _grpo_info(logp, logp_old, a, valid, clip_eps, high, kl, rewards)


def r38_grpo_loss_own_diagnostics(
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
    keep = mask != 0
    if adv is not None:
        advantages = adv.detach()
    else:
        advantages = course_group_advantages(rewards.detach(), normalize_std=normalize_std)
    A = advantages.unsqueeze(-1)
    ratio = torch.exp(logp - logp_old.detach())
    loss_tok = torch.max(-ratio * A, -torch.clamp(ratio, 1 - clip_eps, 1 + eps_high) * A)
    kl_tok = None
    if logp_ref is not None:
        kl_tok = course_kl_estimate(logp, logp_ref.detach(), kl_kind)
        loss_tok = loss_tok + kl_coef * kl_tok
    loss = course_aggregate_loss(loss_tok, keep, loss_agg, max_len=max_len)
    with torch.no_grad():
        n = max(int(keep.sum()), 1)
        r = ratio.detach()[keep]
        A_tok = A.expand_as(logp)[keep]
        low, up = r < 1 - clip_eps, r > 1 + eps_high
        info = {
            "clip_fraction": int((low | up).sum()) / n,
            "clip_active_fraction": int(((up & (A_tok > 0)) | (low & (A_tok < 0))).sum()) / n,
            "kl": float(kl_tok.detach()[keep].sum()) / n if kl_tok is not None else 0.0,
            "adv_abs_mean": advantages.abs().mean().item(),
        }
        if rewards is not None:
            info["reward_mean"] = rewards.double().mean().item()
    return loss, info


ROWS += [
    _row(
        "grpo_loss",
        "06",
        w129_grpo_loss_kl_reversed,
        "calls kl_estimate(logp_ref, logp, ...) with the arguments swapped, estimating KL(pi_ref || pi_theta) "
        "instead of KL(pi_theta || pi_ref).",
    ),
    _row(
        "grpo_loss",
        "06",
        w130_grpo_loss_kl_as_bonus,
        "subtracts kl_coef * KL from the per-token loss (copying the objective's sign) instead of adding it as a "
        "penalty.",
    ),
    _row(
        "grpo_loss",
        "06",
        w131_grpo_loss_batch_normalised,
        "normalises the rewards with the mean and std of the whole batch instead of each prompt's group.",
    ),
    _row(
        "grpo_loss",
        "06",
        w132_grpo_loss_fixed_aggregation,
        'ignores loss_agg and max_len and always aggregates with "seq-mean-token-mean".',
    ),
    _row(
        "grpo_loss",
        "06",
        w133_grpo_loss_regroups_given_adv,
        "passes a given adv through group_advantages again (centring and dividing it per group) instead of using it "
        "as it is.",
    ),
    _row(
        "grpo_loss",
        "06",
        w134_grpo_loss_ref_attached,
        "does not detach logp_ref in the KL term, so gradient flows into the frozen reference's log-probs.",
    ),
    _row(
        "grpo_loss",
        "06",
        w135_grpo_loss_symmetric_clip,
        "ignores clip_eps_high and clips the ratio to [1 - clip_eps, 1 + clip_eps], in the loss and in clip_fraction.",
    ),
    _row(
        "grpo_loss",
        "06",
        w136_grpo_loss_max_len_dropped,
        "does not pass max_len to aggregate_loss, so Dr. GRPO divides by T instead of the given max_len.",
    ),
    _row("grpo_loss", "06", r37_grpo_loss_by_sign),
    _row("grpo_loss", "06", r38_grpo_loss_own_diagnostics),
]


# ---------------------------------------------------------------------------
# Chapter 07: memory_accounting
# ---------------------------------------------------------------------------

_BYTES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}


def w137_memory_accounting_master_always(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    out = {
        "actor": 2 * w * n_params_actor,
        "critic": 2 * w * n_params_critic,
        "reference": w * n_params_ref,
        "reward": w * n_params_reward,
        "optimizer": 3 * o * (n_params_actor + n_params_critic),  # two moments and the master copy
    }
    out["total"] = sum(out.values())
    return out


def w138_memory_accounting_master_when_different(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    per_param = 2 * o + (o if weights_dtype != optimizer_dtype else 0)
    out = {
        "actor": 2 * w * n_params_actor,
        "critic": 2 * w * n_params_critic,
        "reference": w * n_params_ref,
        "reward": w * n_params_reward,
        "optimizer": per_param * (n_params_actor + n_params_critic),
    }
    out["total"] = sum(out.values())
    return out


def w139_memory_accounting_reference_gradients(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    per_param = 2 * o + (o if w < o else 0)
    out = {
        "actor": 2 * w * n_params_actor,
        "critic": 2 * w * n_params_critic,
        "reference": 2 * w * n_params_ref,  # a copy of the actor
        "reward": w * n_params_reward,
        "optimizer": per_param * (n_params_actor + n_params_critic),
    }
    out["total"] = sum(out.values())
    return out


def w140_memory_accounting_optimizer_for_all(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    per_param = 2 * o + (o if w < o else 0)
    every = n_params_actor + n_params_critic + n_params_ref + n_params_reward
    out = {
        "actor": 2 * w * n_params_actor,
        "critic": 2 * w * n_params_critic,
        "reference": w * n_params_ref,
        "reward": w * n_params_reward,
        "optimizer": per_param * every,
    }
    out["total"] = sum(out.values())
    return out


def w141_memory_accounting_two_byte_default(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    def size(dtype):
        return 4 if dtype == "fp32" else 2  # fp32, or one of the 16-bit types

    w, o = size(weights_dtype), size(optimizer_dtype)
    per_param = 2 * o + (o if w < o else 0)
    out = {
        "actor": 2 * w * n_params_actor,
        "critic": 2 * w * n_params_critic,
        "reference": w * n_params_ref,
        "reward": w * n_params_reward,
        "optimizer": per_param * (n_params_actor + n_params_critic),
    }
    out["total"] = sum(out.values())
    return out


def w142_memory_accounting_bits_over_eight(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    bits = {"fp64": 64, "fp32": 32, "bf16": 16, "fp16": 16}
    w, o = bits[weights_dtype] / 8, bits[optimizer_dtype] / 8
    per_param = 2 * o + (o if w < o else 0)
    out = {
        "actor": 2 * w * n_params_actor,
        "critic": 2 * w * n_params_critic,
        "reference": w * n_params_ref,
        "reward": w * n_params_reward,
        "optimizer": per_param * (n_params_actor + n_params_critic),
    }
    out["total"] = sum(out.values())
    return out


def w143_memory_accounting_actor_optimizer_only(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    per_param = 2 * o + (o if w < o else 0)
    out = {
        "actor": 2 * w * n_params_actor,
        "critic": 2 * w * n_params_critic,
        "reference": w * n_params_ref,
        "reward": w * n_params_reward,
        "optimizer": per_param * n_params_actor,  # the policy's optimizer
    }
    out["total"] = sum(out.values())
    return out


def w144_memory_accounting_total_without_optimizer(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _BYTES[weights_dtype], _BYTES[optimizer_dtype]
    per_param = 2 * o + (o if w < o else 0)
    models = {
        "actor": 2 * w * n_params_actor,
        "critic": 2 * w * n_params_critic,
        "reference": w * n_params_ref,
        "reward": w * n_params_reward,
    }
    return {**models, "optimizer": per_param * (n_params_actor + n_params_critic), "total": sum(models.values())}


def r39_memory_accounting_per_model(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    size = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}
    w, o = size[weights_dtype], size[optimizer_dtype]
    trained = {"actor": n_params_actor, "critic": n_params_critic}
    frozen = {"reference": n_params_ref, "reward": n_params_reward}
    out = {name: int(n) * (w + w) for name, n in trained.items()}
    out.update({name: int(n) * w for name, n in frozen.items()})
    adam = o + o
    if w < o:
        adam += o  # fp32 master weights
    out["optimizer"] = adam * (int(n_params_actor) + int(n_params_critic))
    out["total"] = out["actor"] + out["critic"] + out["reference"] + out["reward"] + out["optimizer"]
    return out


def r40_memory_accounting_bits(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    bits = {"fp64": 64, "fp32": 32, "bf16": 16, "fp16": 16}
    wb, ob = bits[weights_dtype] // 8, bits[optimizer_dtype] // 8
    master = ob if bits[weights_dtype] < bits[optimizer_dtype] else 0
    trained = n_params_actor + n_params_critic
    result = {
        "actor": n_params_actor * wb * 2,
        "critic": n_params_critic * wb * 2,
        "reference": n_params_ref * wb,
        "reward": n_params_reward * wb,
        "optimizer": trained * (2 * ob + master),
    }
    result["total"] = sum(result[k] for k in ("actor", "critic", "reference", "reward", "optimizer"))
    return result


ROWS += [
    _row(
        "memory_accounting",
        "07",
        w137_memory_accounting_master_always,
        "always counts a master copy in the optimizer (3 numbers per trained parameter), also when the weights are "
        "already fp32 or wider.",
    ),
    _row(
        "memory_accounting",
        "07",
        w138_memory_accounting_master_when_different,
        "adds the master copy whenever weights_dtype differs from optimizer_dtype, so fp64 weights with fp32 Adam get "
        "one although fp64 is wider, not narrower.",
    ),
    _row(
        "memory_accounting",
        "07",
        w139_memory_accounting_reference_gradients,
        "counts the frozen reference with weights and gradients (2 numbers per parameter) instead of weights only.",
    ),
    _row(
        "memory_accounting",
        "07",
        w140_memory_accounting_optimizer_for_all,
        "counts Adam's state for every model, reference and reward model included, instead of for the trained "
        "actor and critic only.",
    ),
    _row(
        "memory_accounting",
        "07",
        w141_memory_accounting_two_byte_default,
        "its size helper returns 4 for fp32 and 2 for everything else, so fp64 is counted as 2 bytes instead of 8.",
    ),
    _row(
        "memory_accounting",
        "07",
        w142_memory_accounting_bits_over_eight,
        "converts bits to bytes with true division (bits / 8), so every entry is a float instead of an int.",
    ),
    _row(
        "memory_accounting",
        "07",
        w143_memory_accounting_actor_optimizer_only,
        "counts Adam's state for the actor only, leaving out the trained critic's.",
    ),
    _row(
        "memory_accounting",
        "07",
        w144_memory_accounting_total_without_optimizer,
        "computes total as the sum of the four models only, leaving out the optimizer row.",
    ),
    _row("memory_accounting", "07", r39_memory_accounting_per_model),
    _row("memory_accounting", "07", r40_memory_accounting_bits),
]


# ---------------------------------------------------------------------------
# Chapter 07: read_sweep
# ---------------------------------------------------------------------------


def _saturation(group_sizes, reward, tol):
    best_per_group = reward.max(dim=1).values
    k = int(torch.nonzero(best_per_group >= reward.max() - tol)[0, 0])
    return int(group_sizes[k])


def w145_read_sweep_argmax_transposed(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward.T))  # shape error otherwise when I index clip first
    j, i = divmod(flat, reward.shape[0])
    return int(group_sizes[i]), float(clip_eps[j]), _saturation(group_sizes, reward, tol)


def w146_read_sweep_last_maximum(group_sizes, clip_eps, reward, tol=0.1):
    where = torch.nonzero(reward == reward.max())
    i, j = where[-1].tolist()
    return int(group_sizes[i]), float(clip_eps[j]), _saturation(group_sizes, reward, tol)


def w147_read_sweep_indices(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(torch.argmax(reward)), reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = int(torch.nonzero(best_per_group >= reward.max() - tol)[0, 0])
    return i, float(j), k


def w148_read_sweep_stops_growing(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(torch.argmax(reward)), reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = len(group_sizes) - 1
    for g in range(len(group_sizes) - 1):
        if best_per_group[g + 1] - best_per_group[g] <= tol:  # the next group buys (almost) nothing
            k = g
            break
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w149_read_sweep_mean_over_clips(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(torch.argmax(reward)), reward.shape[1])
    per_group = reward.mean(dim=1)
    k = (
        int(torch.nonzero(per_group >= reward.max() - tol)[0, 0])
        if bool((per_group >= reward.max() - tol).any())
        else -1
    )
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w150_read_sweep_strict_tolerance(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(torch.argmax(reward)), reward.shape[1])
    best_per_group = reward.max(dim=1).values
    close = best_per_group > reward.max() - tol
    k = int(torch.nonzero(close)[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w151_read_sweep_tensor_values(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(torch.argmax(reward)), reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = int(torch.nonzero(best_per_group >= reward.max() - tol)[0, 0])
    return group_sizes[i], clip_eps[j], group_sizes[k]


def r41_read_sweep_loops(group_sizes, clip_eps, reward, tol=0.1):
    table = reward.tolist()
    best, bi, bj = None, 0, 0
    for i, row in enumerate(table):
        for j, value in enumerate(row):
            if best is None or value > best:
                best, bi, bj = value, i, j
    top = max(max(row) for row in table)
    k = next(i for i, row in enumerate(table) if max(row) >= top - tol)
    return int(group_sizes[bi].item()), float(clip_eps[bj].item()), int(group_sizes[k].item())


def r42_read_sweep_sort_key(group_sizes, clip_eps, reward, tol=0.1):
    nG, nE = reward.shape
    cells = [(-reward[i, j].item(), i, j) for i in range(nG) for j in range(nE)]
    _, i, j = min(cells)
    row_best = reward.amax(dim=1)
    ok = (row_best >= reward.amax() - tol).tolist()
    k = ok.index(True)
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


ROWS += [
    _row(
        "read_sweep",
        "07",
        w145_read_sweep_argmax_transposed,
        "takes the argmax of reward.T, so among equal rewards it prefers the smallest clip range first and the "
        "smallest group size only second, instead of the other way round.",
    ),
    _row(
        "read_sweep",
        "07",
        w146_read_sweep_last_maximum,
        "picks the last maximal cell (nonzero()[-1]), the most expensive of the tied configurations instead of the "
        "cheapest.",
    ),
    _row(
        "read_sweep",
        "07",
        w147_read_sweep_indices,
        "returns the row and column indices (and the saturation's index) instead of the values from group_sizes and "
        "clip_eps.",
    ),
    _row(
        "read_sweep",
        "07",
        w148_read_sweep_stops_growing,
        "takes as saturation the first group size after which the next one improves by at most tol, instead of the "
        "smallest group within tol of the table's best, so a stall before a later rise is read as saturation.",
    ),
    _row(
        "read_sweep",
        "07",
        w149_read_sweep_mean_over_clips,
        "compares each group size's mean reward over the clip ranges with the best, instead of its best reward over "
        "the clip ranges.",
    ),
    _row(
        "read_sweep",
        "07",
        w150_read_sweep_strict_tolerance,
        "tests best_per_group > best - tol with a strict inequality, so a group exactly tol below the best (or, with "
        "tol = 0, the best group itself) does not count as saturated.",
    ),
    _row(
        "read_sweep",
        "07",
        w151_read_sweep_tensor_values,
        "returns 0-dim tensors picked from group_sizes and clip_eps instead of a Python int, float and int.",
    ),
    _row("read_sweep", "07", r41_read_sweep_loops),
    _row("read_sweep", "07", r42_read_sweep_sort_key),
]


# ---------------------------------------------------------------------------
# Chapter 08: addition_exact_reward
# ---------------------------------------------------------------------------


def w152_addition_exact_reward_strips_spaces(completion, answer):
    head, eos, _ = completion.partition("$")
    return float(bool(eos) and head.strip() == answer)


def w153_addition_exact_reward_as_integers(completion, answer):
    head, eos, _ = completion.partition("$")
    if not eos or not head.isdigit():
        return 0.0
    return float(int(head) == int(answer))


def w154_addition_exact_reward_last_eos(completion, answer):
    head, eos, _ = completion.rpartition("$")
    return float(bool(eos) and head == answer)


def w155_addition_exact_reward_eos_optional(completion, answer):
    return float(completion.split("$")[0] == answer)


def w156_addition_exact_reward_whole_string(completion, answer):
    return float(completion == answer + "$")


def w157_addition_exact_reward_substring(completion, answer):
    head, eos, _ = completion.partition("$")
    return float(bool(eos) and answer in head)


def w158_addition_exact_reward_strip_zeros(completion, answer):
    head, eos, _ = completion.partition("$")
    return float(bool(eos) and head.lstrip("0") == answer.lstrip("0"))


def r43_addition_exact_reward_startswith(completion, answer):
    return 1.0 if completion.startswith(answer + "$") else 0.0


def r44_addition_exact_reward_index(completion, answer):
    if "$" not in completion:
        return 0.0
    return float(completion[: completion.index("$")] == answer)


ROWS += [
    _row(
        "addition_exact_reward",
        "08",
        w152_addition_exact_reward_strips_spaces,
        "strips whitespace from the text before EOS, so ' 132$' and '132 $' are paid as right.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w153_addition_exact_reward_as_integers,
        "compares the text before EOS with the answer as integers, so a leading zero ('0132$') is paid as right.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w154_addition_exact_reward_last_eos,
        "splits at the last '$' (rpartition) instead of the first, so text after the first EOS is read ('132$7$' "
        "gets 0).",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w155_addition_exact_reward_eos_optional,
        "compares completion.split('$')[0] with the answer without requiring an EOS, so '132' (never stopped) is "
        "paid as right.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w156_addition_exact_reward_whole_string,
        "compares the whole completion with answer + '$', so anything after the first EOS ('132$7') makes a right "
        "answer wrong.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w157_addition_exact_reward_substring,
        "tests whether the answer occurs in the text before EOS, so '1320$' or ' 132$' is paid as right.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w158_addition_exact_reward_strip_zeros,
        "strips leading zeros before comparing, so '0132$' is paid as right.",
    ),
    _row("addition_exact_reward", "08", r43_addition_exact_reward_startswith),
    _row("addition_exact_reward", "08", r44_addition_exact_reward_index),
]


# ---------------------------------------------------------------------------
# Chapter 08: completion_mask
# ---------------------------------------------------------------------------


def w159_completion_mask_eos_excluded(completion_ids, eos_id):
    return (torch.cumsum((completion_ids == eos_id).long(), dim=-1) == 0).float()


def w160_completion_mask_argmax_first_eos(completion_ids, eos_id):
    is_eos = completion_ids == eos_id
    first = is_eos.long().argmax(dim=-1, keepdim=True)  # index of the first EOS
    positions = torch.arange(completion_ids.shape[-1])
    return (positions <= first).float()


def w161_completion_mask_last_eos(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    after_last = is_eos.flip(-1).cumsum(-1).flip(-1) == 0  # no EOS from here on
    has_eos = is_eos.any(dim=-1, keepdim=True)
    return torch.where(has_eos, ~after_last | (is_eos == 1), torch.ones_like(after_last)).float()


def w162_completion_mask_bool(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return (torch.cumsum(is_eos, dim=-1) - is_eos) == 0


def w163_completion_mask_cumsum_first_axis(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return ((torch.cumsum(is_eos, dim=0) - is_eos) == 0).float()


def w164_completion_mask_at_most_one_eos(completion_ids, eos_id):
    # clever: valid while at most one EOS has been seen
    return (torch.cumsum((completion_ids == eos_id).long(), dim=-1) <= 1).float()


def r45_completion_mask_rows(completion_ids, eos_id):
    L = completion_ids.shape[-1]
    rows = completion_ids.reshape(-1, L).tolist()
    out = []
    for row in rows:
        stop = row.index(eos_id) + 1 if eos_id in row else L
        out.append([1.0] * stop + [0.0] * (L - stop))
    return torch.tensor(out, dtype=torch.float32).reshape(completion_ids.shape)


def r46_completion_mask_shifted_cummax(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).to(torch.int64)
    seen = torch.cummax(is_eos, dim=-1).values  # 1 from the first EOS on
    before = F.pad(seen[..., :-1], (1, 0))  # an EOS strictly before t
    return (1 - before).to(torch.float32)


ROWS += [
    _row(
        "completion_mask",
        "08",
        w159_completion_mask_eos_excluded,
        "keeps only the tokens before the first EOS (cumsum == 0), so the EOS itself gets 0 instead of 1.",
    ),
    _row(
        "completion_mask",
        "08",
        w160_completion_mask_argmax_first_eos,
        "finds the first EOS with argmax, which returns 0 for a row without EOS, so such a row keeps only its first "
        "token instead of being valid everywhere.",
    ),
    _row(
        "completion_mask",
        "08",
        w161_completion_mask_last_eos,
        "keeps everything up to the last EOS of the row instead of the first, so a row with two EOS keeps the tokens "
        "between them.",
    ),
    _row(
        "completion_mask",
        "08",
        w162_completion_mask_bool,
        "returns a bool mask instead of a float32 one.",
    ),
    _row(
        "completion_mask",
        "08",
        w163_completion_mask_cumsum_first_axis,
        "takes the cumulative sum over dim=0 instead of the token axis dim=-1, so for batches it counts EOS down the "
        "rows instead of along each row.",
    ),
    _row(
        "completion_mask",
        "08",
        w164_completion_mask_at_most_one_eos,
        "keeps the tokens where at most one EOS has been seen (cumsum <= 1), so the PAD tokens after the first EOS "
        "stay valid until a second EOS.",
    ),
    _row("completion_mask", "08", r45_completion_mask_rows),
    _row("completion_mask", "08", r46_completion_mask_shifted_cummax),
]


# ---------------------------------------------------------------------------
# Chapter 08: grpo_step (each student has its own mask, as the exercise demands)
# ---------------------------------------------------------------------------


def _own_mask(completions, eos_id):
    is_eos = (completions == eos_id).long()
    return ((is_eos.cumsum(-1) - is_eos) == 0).float()


def _step_logps(model, flat_prompts, flat):
    P = flat_prompts.shape[1]
    ids = torch.cat([flat_prompts, flat[:, :-1]], dim=1).long()
    logits = model(ids)[:, P - 1 :]
    return course_gather_log_probs(logits, flat.long())


def w165_grpo_step_no_shift(
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
    ids = torch.cat([flat_prompts, flat], dim=1).long()

    def logps(model):
        return course_gather_log_probs(model(ids)[:, P:], flat.long()).reshape(B, G, L)

    logp = logps(policy)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = logps(ref_model)
    mask = _own_mask(completions, eos_id)
    loss, _ = course_grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


def w166_grpo_step_tiled_prompts(
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
    flat_prompts = prompts.repeat(G, 1)  # (B * G, P)
    flat = completions.reshape(B * G, L)
    logp = _step_logps(policy, flat_prompts, flat).reshape(B, G, L)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = _step_logps(ref_model, flat_prompts, flat).reshape(B, G, L)
    mask = _own_mask(completions, eos_id)
    loss, _ = course_grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


def w167_grpo_step_reshape_transposed(
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
    flat_prompts = repeat(prompts, "B P -> (B G) P", G=G)
    flat = rearrange(completions, "B G L -> (B G) L")
    # back to (B, G, L): the groups were laid out G-major
    logp = _step_logps(policy, flat_prompts, flat).reshape(G, B, L).transpose(0, 1)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = _step_logps(ref_model, flat_prompts, flat).reshape(G, B, L).transpose(0, 1)
    mask = _own_mask(completions, eos_id)
    loss, _ = course_grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


def w168_grpo_step_mask_without_eos(
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
    flat_prompts = repeat(prompts, "B P -> (B G) P", G=G)
    flat = rearrange(completions, "B G L -> (B G) L")
    logp = rearrange(_step_logps(policy, flat_prompts, flat), "(B G) L -> B G L", G=G)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = rearrange(_step_logps(ref_model, flat_prompts, flat), "(B G) L -> B G L", G=G)
    mask = ((completions == eos_id).long().cumsum(-1) == 0).float()  # the tokens before EOS
    loss, _ = course_grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


def w169_grpo_step_clip_before_backward(
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
    flat_prompts = repeat(prompts, "B P -> (B G) P", G=G)
    flat = rearrange(completions, "B G L -> (B G) L")
    logp = rearrange(_step_logps(policy, flat_prompts, flat), "(B G) L -> B G L", G=G)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = rearrange(_step_logps(ref_model, flat_prompts, flat), "(B G) L -> B G L", G=G)
    mask = _own_mask(completions, eos_id)
    loss, _ = course_grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    loss.backward()
    optimizer.step()
    return loss.item()


def w170_grpo_step_returns_tensor(
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
    flat_prompts = repeat(prompts, "B P -> (B G) P", G=G)
    flat = rearrange(completions, "B G L -> (B G) L")
    logp = rearrange(_step_logps(policy, flat_prompts, flat), "(B G) L -> B G L", G=G)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = rearrange(_step_logps(ref_model, flat_prompts, flat), "(B G) L -> B G L", G=G)
    mask = _own_mask(completions, eos_id)
    loss, _ = course_grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.detach()


def w171_grpo_step_course_mask(
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
    from course_lib import lm_sampling

    B, G, L = completions.shape
    flat_prompts = repeat(prompts, "B P -> (B G) P", G=G)
    flat = rearrange(completions, "B G L -> (B G) L")
    logp = rearrange(_step_logps(policy, flat_prompts, flat), "(B G) L -> B G L", G=G)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = rearrange(_step_logps(ref_model, flat_prompts, flat), "(B G) L -> B G L", G=G)
    mask = lm_sampling.completion_mask(completions, eos_id)
    loss, _ = course_grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


def w172_grpo_step_no_grad_clip(
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
    flat_prompts = repeat(prompts, "B P -> (B G) P", G=G)
    flat = rearrange(completions, "B G L -> (B G) L")
    logp = rearrange(_step_logps(policy, flat_prompts, flat), "(B G) L -> B G L", G=G)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = rearrange(_step_logps(ref_model, flat_prompts, flat), "(B G) L -> B G L", G=G)
    mask = _own_mask(completions, eos_id)
    loss, _ = course_grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()  # Adam normalises the step anyway
    return loss.item()


def r47_grpo_step_interleave(
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
    flat = completions.reshape(B * G, L).long()
    ids = torch.cat([prompts.long().repeat_interleave(G, dim=0), flat[:, : L - 1]], dim=1)

    def score(model):
        logits = model(ids)[:, P - 1 : P - 1 + L]
        logp_all = torch.log_softmax(logits, dim=-1)
        return logp_all.gather(-1, flat.unsqueeze(-1)).squeeze(-1).view(B, G, L)

    logp = score(policy)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = score(ref_model)
    mask = torch.ones(B, G, L)
    for b in range(B):
        for g in range(G):
            hits = (completions[b, g] == eos_id).nonzero()
            if len(hits):
                mask[b, g, int(hits[0]) + 1 :] = 0.0
    loss, _ = course_grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(policy.parameters(), max_norm=max_grad_norm)
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
    G = completions.shape[1]
    flat_prompts = repeat(prompts, "B P -> (B G) P", G=G)
    flat = rearrange(completions, "B G L -> (B G) L")
    logp = rearrange(_step_logps(policy, flat_prompts, flat), "(B G) L -> B G L", G=G)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = rearrange(_step_logps(ref_model, flat_prompts, flat), "(B G) L -> B G L", G=G)
    is_eos = (completions == eos_id).to(torch.int64)
    seen_before = F.pad(torch.cummax(is_eos, dim=-1).values[..., :-1], (1, 0))
    mask = (seen_before == 0).to(torch.float32)
    loss, _ = course_grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


ROWS += [
    _row(
        "grpo_step",
        "08",
        w165_grpo_step_no_shift,
        "feeds the whole completion and scores token t with the logits at position P + t instead of P - 1 + t, so "
        "every log-prob is that of the next token's distribution.",
    ),
    _row(
        "grpo_step",
        "08",
        w166_grpo_step_tiled_prompts,
        "repeats the prompts with prompts.repeat(G, 1), which tiles the whole batch G times instead of repeating each "
        "prompt G times adjacently, so completions are scored after another prompt.",
    ),
    _row(
        "grpo_step",
        "08",
        w167_grpo_step_reshape_transposed,
        "reshapes the flat (B * G, L) log-probs back with reshape(G, B, L).transpose(0, 1) although they were "
        "flattened B-major, so log-probs land on the wrong completions.",
    ),
    _row(
        "grpo_step",
        "08",
        w168_grpo_step_mask_without_eos,
        "builds the mask from the tokens before the first EOS only, so the EOS itself is left out of the loss.",
    ),
    _row(
        "grpo_step",
        "08",
        w169_grpo_step_clip_before_backward,
        "clips the gradient norm before loss.backward(), when the gradients are still empty, so the step is taken "
        "with unclipped gradients.",
    ),
    _row(
        "grpo_step",
        "08",
        w170_grpo_step_returns_tensor,
        "returns the loss as a detached tensor instead of a Python float.",
    ),
    _row(
        "grpo_step",
        "08",
        w171_grpo_step_course_mask,
        "calls course_lib's lm_sampling.completion_mask instead of its own completion_mask, which the exercise "
        "counts as not solved.",
    ),
    _row(
        "grpo_step",
        "08",
        w172_grpo_step_no_grad_clip,
        "leaves out the clipping of the global gradient norm to max_grad_norm before the step.",
    ),
    _row("grpo_step", "08", r47_grpo_step_interleave),
    _row("grpo_step", "08", r48_grpo_step_einops),
]


# ---------------------------------------------------------------------------
# Chapter 09: answer_reward (with chapter 01's math_answer_reward)
# ---------------------------------------------------------------------------


def _text_of(completion):
    if isinstance(completion, str):
        return completion
    return completion[-1]["content"]


def w173_answer_reward_first_message(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        text = completion if isinstance(completion, str) else completion[0]["content"]
        rewards.append(None if truth is None else course_math_answer_reward(text, truth))
    return rewards


def w174_answer_reward_zero_for_missing(prompts, completions, answer, **kwargs):
    return [
        0.0 if truth is None else course_math_answer_reward(_text_of(c), truth) for c, truth in zip(completions, answer)
    ]


def w175_answer_reward_str_of_messages(prompts, completions, answer, **kwargs):
    return [
        None if truth is None else course_math_answer_reward(str(c), truth) for c, truth in zip(completions, answer)
    ]


def w176_answer_reward_arguments_swapped(prompts, completions, answer, **kwargs):
    return [
        None if truth is None else course_math_answer_reward(truth, _text_of(c))
        for c, truth in zip(completions, answer)
    ]


def w177_answer_reward_generator(prompts, completions, answer, **kwargs):
    return (
        None if truth is None else course_math_answer_reward(_text_of(c), truth)
        for c, truth in zip(completions, answer)
    )


def w178_answer_reward_all_messages(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if isinstance(completion, str):
            text = completion
        else:
            text = "\n".join(message["content"] for message in completion)  # the whole conversation
        rewards.append(None if truth is None else course_math_answer_reward(text, truth))
    return rewards


def w179_answer_reward_integer_rewards(prompts, completions, answer, **kwargs):
    return [
        None if truth is None else int(course_math_answer_reward(_text_of(c), truth))
        for c, truth in zip(completions, answer)
    ]


def r49_answer_reward_loop(prompts, completions, answer, **kwargs):
    out = []
    for i in range(len(completions)):
        completion, truth = completions[i], answer[i]
        if truth is None:
            out.append(None)
            continue
        if isinstance(completion, list):
            completion = completion[-1]["content"]
        out.append(float(course_math_answer_reward(completion, str(truth))))
    return out


def r50_answer_reward_comprehension(prompts, completions, answer, **kwargs):
    texts = [c if isinstance(c, str) else c[-1].get("content") or "" for c in completions]
    return [None if a is None else course_math_answer_reward(t, a) for t, a in zip(texts, answer)]


ROWS += [
    _row(
        "answer_reward",
        "09",
        w173_answer_reward_first_message,
        "reads a conversational completion's first message (completion[0]['content']) instead of its last one.",
    ),
    _row(
        "answer_reward",
        "09",
        w174_answer_reward_zero_for_missing,
        "returns 0.0 for a row whose answer is None instead of None, which punishes the completion.",
    ),
    _row(
        "answer_reward",
        "09",
        w175_answer_reward_str_of_messages,
        "scores str(completion), so a conversational completion is read as the repr of its list of messages "
        "instead of the last message's content.",
    ),
    _row(
        "answer_reward",
        "09",
        w176_answer_reward_arguments_swapped,
        "calls math_answer_reward(answer, text) with the arguments swapped, so the reference answer is searched "
        "for a stated answer.",
    ),
    _row(
        "answer_reward",
        "09",
        w177_answer_reward_generator,
        "returns a generator expression instead of a list of rewards.",
    ),
    _row(
        "answer_reward",
        "09",
        w178_answer_reward_all_messages,
        "joins the contents of every message of a conversational completion, so an answer stated in an earlier "
        "(tool-call) message can be paid when the last message states none.",
    ),
    _row(
        "answer_reward",
        "09",
        w179_answer_reward_integer_rewards,
        "converts each reward with int(), so the list holds ints 1 and 0 instead of floats.",
    ),
    _row("answer_reward", "09", r49_answer_reward_loop),
    _row("answer_reward", "09", r50_answer_reward_comprehension),
]


# ---------------------------------------------------------------------------
# Chapter 09: completion_logps
# ---------------------------------------------------------------------------


def _first_eos_mask(completion, eos_id):
    is_eos = (completion == eos_id).long()
    return ((is_eos.cumsum(-1) - is_eos) == 0).float()


def _forward(model, sequences, prompt_mask):
    attention = torch.cat([prompt_mask, torch.ones_like(sequences[:, prompt_mask.shape[1] :])], dim=1)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    return model(input_ids=sequences, attention_mask=attention, position_ids=positions).logits


def w180_completion_logps_no_attention_mask(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion = sequences[:, P:]
    logits = model(input_ids=sequences).logits[:, P - 1 : -1] / temperature
    logp = torch.log_softmax(logits, -1).gather(-1, completion.unsqueeze(-1)).squeeze(-1)
    return logp, _first_eos_mask(completion, eos_id)


def w181_completion_logps_no_temperature(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion = sequences[:, P:]
    logits = _forward(model, sequences, prompt_mask)[:, P - 1 : -1]
    logp = torch.log_softmax(logits, -1).gather(-1, completion.unsqueeze(-1)).squeeze(-1)
    return logp, _first_eos_mask(completion, eos_id)


def w182_completion_logps_no_shift(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion = sequences[:, P:]
    logits = _forward(model, sequences, prompt_mask)[:, P:] / temperature
    logp = torch.log_softmax(logits, -1).gather(-1, completion.unsqueeze(-1)).squeeze(-1)
    return logp, _first_eos_mask(completion, eos_id)


def w183_completion_logps_temperature_after(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion = sequences[:, P:]
    logits = _forward(model, sequences, prompt_mask)[:, P - 1 : -1]
    logp = torch.log_softmax(logits, -1).gather(-1, completion.unsqueeze(-1)).squeeze(-1) / temperature
    return logp, _first_eos_mask(completion, eos_id)


def w184_completion_logps_mask_before_eos(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion = sequences[:, P:]
    logits = _forward(model, sequences, prompt_mask)[:, P - 1 : -1] / temperature
    logp = torch.log_softmax(logits, -1).gather(-1, completion.unsqueeze(-1)).squeeze(-1)
    mask = ((completion == eos_id).long().cumsum(-1) == 0).float()
    return logp, mask


def w185_completion_logps_no_grad(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion = sequences[:, P:]
    with torch.no_grad():  # inference: no need for a graph
        logits = _forward(model, sequences, prompt_mask)[:, P - 1 : -1] / temperature
    logp = torch.log_softmax(logits, -1).gather(-1, completion.unsqueeze(-1)).squeeze(-1)
    return logp, _first_eos_mask(completion, eos_id)


def w186_completion_logps_integer_mask(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion = sequences[:, P:]
    logits = _forward(model, sequences, prompt_mask)[:, P - 1 : -1] / temperature
    logp = torch.log_softmax(logits, -1).gather(-1, completion.unsqueeze(-1)).squeeze(-1)
    is_eos = (completion == eos_id).long()
    mask = (is_eos.cumsum(-1) - is_eos == 0).long()  # 0/1, like prompt_mask
    return logp, mask


def w187_completion_logps_pad_is_not_eos(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion = sequences[:, P:]
    logits = _forward(model, sequences, prompt_mask)[:, P - 1 : -1] / temperature
    logp = torch.log_softmax(logits, -1).gather(-1, completion.unsqueeze(-1)).squeeze(-1)
    first = (completion == eos_id).long().argmax(dim=-1, keepdim=True)  # where generation stopped
    mask = (torch.arange(completion.shape[1]) <= first).float()
    return logp, mask


def r51_completion_logps_one_pass(model, sequences, prompt_mask, eos_id, temperature=1.0):
    B, T = sequences.shape
    P = prompt_mask.shape[1]
    L = T - P
    attention = torch.ones(B, T, dtype=prompt_mask.dtype)
    attention[:, :P] = prompt_mask
    position_ids = torch.clamp(attention.long().cumsum(dim=-1) - 1, min=0)
    out = model(input_ids=sequences, attention_mask=attention, position_ids=position_ids)
    scores = out.logits[:, P - 1 : P - 1 + L, :] / temperature
    completion = sequences[:, P:]
    logp = F.log_softmax(scores, dim=-1).gather(2, completion[:, :, None]).squeeze(2)
    mask = torch.ones(B, L)
    for b in range(B):
        hits = (completion[b] == eos_id).nonzero()
        if hits.numel():
            mask[b, int(hits[0, 0]) + 1 :] = 0.0
    return logp, mask


def r52_completion_logps_cummax(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion = sequences[:, P:]
    logits = _forward(model, sequences, prompt_mask)[:, P - 1 : -1]
    logp = course_gather_log_probs(logits / temperature, completion)
    is_eos = (completion == eos_id).long()
    seen = torch.cummax(is_eos, dim=-1).values
    mask = 1.0 - F.pad(seen[:, :-1], (1, 0)).float()
    return logp, mask


ROWS += [
    _row(
        "completion_logps",
        "09",
        w180_completion_logps_no_attention_mask,
        "runs the model on the sequences without the attention mask (and positions), so a left-padded prompt "
        "attends to its padding and its log-probs differ from the unpadded prompt's.",
    ),
    _row(
        "completion_logps",
        "09",
        w181_completion_logps_no_temperature,
        "does not divide the logits by temperature, so the log-probs are not those of the distribution sampled from.",
    ),
    _row(
        "completion_logps",
        "09",
        w182_completion_logps_no_shift,
        "takes logits[:, P:] instead of logits[:, P - 1:-1], so each completion token is scored by the logits that "
        "predict the next one.",
    ),
    _row(
        "completion_logps",
        "09",
        w183_completion_logps_temperature_after,
        "divides the log-probs by temperature after log_softmax instead of dividing the logits before it.",
    ),
    _row(
        "completion_logps",
        "09",
        w184_completion_logps_mask_before_eos,
        "builds the mask from the tokens before the first EOS (cumsum == 0), so the EOS itself gets 0 instead of 1.",
    ),
    _row(
        "completion_logps",
        "09",
        w185_completion_logps_no_grad,
        "runs the forward pass under torch.no_grad(), so the returned log-probs carry no gradient.",
    ),
    _row(
        "completion_logps",
        "09",
        w186_completion_logps_integer_mask,
        "returns the mask as a long tensor of 0 and 1, like prompt_mask, instead of a float tensor.",
    ),
    _row(
        "completion_logps",
        "09",
        w187_completion_logps_pad_is_not_eos,
        "finds the first EOS with argmax, which is 0 for a row without EOS, so such a row keeps only its first token "
        "instead of being 1.0 everywhere.",
    ),
    _row("completion_logps", "09", r51_completion_logps_one_pass),
    _row("completion_logps", "09", r52_completion_logps_cummax),
]


# ---------------------------------------------------------------------------
# Chapter 09: grpo_config_kwargs
# ---------------------------------------------------------------------------

_TRL_LOSS = {"seq-mean-token-mean": "grpo", "token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}
_GRPO_DEFAULTS = {
    "algo": "grpo",
    "adv_estimator": "grpo",
    "policy_loss": "clip",
    "dynamic_sampling": False,
    "overlong_cache": 0,
    "kl_placement": "loss",
    "whiten_advantages": False,
}


def _refuse_switches(cfg):
    for name, default in _GRPO_DEFAULTS.items():
        if getattr(cfg, name) != default:
            raise ValueError(f"cfg.{name}={getattr(cfg, name)!r}: TRL's GRPOTrainer has no field for it")


def _sizes(cfg, num_processes):
    B, G, M = cfg.prompts_per_step, cfg.group_size, cfg.num_minibatches
    if (B * G) % M:
        raise ValueError(f"num_minibatches: {B * G} completions do not split into {M} minibatches")
    minibatch = B * G // M
    if minibatch % num_processes:
        raise ValueError(f"num_processes: a minibatch of {minibatch} does not split over {num_processes}")
    per_process = minibatch // num_processes
    micro = cfg.micro_batch_size or per_process
    if per_process % micro:
        raise ValueError(f"micro_batch_size: {per_process} completions do not split into micro-batches of {micro}")
    return micro, per_process // micro


def _common_fields(cfg):
    schedule = cfg.lr_schedule
    if schedule == "constant" and cfg.warmup_iterations:
        schedule = "constant_with_warmup"
    return dict(
        num_generations=cfg.group_size,
        num_iterations=cfg.update_epochs,
        max_completion_length=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        learning_rate=cfg.lr,
        lr_scheduler_type=schedule,
        max_grad_norm=cfg.max_grad_norm,
        beta=cfg.kl_coef,
        use_bias_correction_kl=False,
        epsilon=cfg.clip_eps,
        epsilon_high=cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high,
        loss_type=_TRL_LOSS[cfg.loss_agg],
        scale_rewards="group" if cfg.normalize_std else "none",
        mask_truncated_completions=cfg.overlong_filter,
        seed=cfg.seed,
    )


def w188_grpo_config_kwargs_true_division(cfg, num_processes=1):
    _refuse_switches(cfg)
    _sizes(cfg, num_processes)  # refuses uneven splits
    B, G, K, M = cfg.prompts_per_step, cfg.group_size, cfg.update_epochs, cfg.num_minibatches
    per_process = B * G / M / num_processes
    micro = cfg.micro_batch_size or per_process
    accumulation = per_process / micro
    return dict(
        _common_fields(cfg),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=M * accumulation,
        max_steps=cfg.iterations * K * M,
        warmup_steps=cfg.warmup_iterations * K * M,
    )


def w189_grpo_config_kwargs_counts_prompts(cfg, num_processes=1):
    _refuse_switches(cfg)
    _sizes(cfg, num_processes)
    B, K, M = cfg.prompts_per_step, cfg.update_epochs, cfg.num_minibatches
    per_process = max(B // M // num_processes, 1)  # prompts per process per minibatch
    micro = min(cfg.micro_batch_size or per_process, per_process)
    accumulation = max(per_process // micro, 1)
    return dict(
        _common_fields(cfg),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=M * accumulation,
        max_steps=cfg.iterations * K * M,
        warmup_steps=cfg.warmup_iterations * K * M,
    )


def w190_grpo_config_kwargs_trl_loss_default(cfg, num_processes=1):
    _refuse_switches(cfg)
    micro, accumulation = _sizes(cfg, num_processes)
    K, M = cfg.update_epochs, cfg.num_minibatches
    fields = _common_fields(cfg)
    del fields["loss_type"]  # TRL's GRPOTrainer is GRPO already
    return dict(
        fields,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=M * accumulation,
        max_steps=cfg.iterations * K * M,
        warmup_steps=cfg.warmup_iterations * K * M,
    )


def w191_grpo_config_kwargs_bias_correction_left(cfg, num_processes=1):
    _refuse_switches(cfg)
    micro, accumulation = _sizes(cfg, num_processes)
    K, M = cfg.update_epochs, cfg.num_minibatches
    fields = _common_fields(cfg)
    del fields["use_bias_correction_kl"]  # only the fields the course has
    return dict(
        fields,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=M * accumulation,
        max_steps=cfg.iterations * K * M,
        warmup_steps=cfg.warmup_iterations * K * M,
    )


def w192_grpo_config_kwargs_constant_schedule(cfg, num_processes=1):
    _refuse_switches(cfg)
    micro, accumulation = _sizes(cfg, num_processes)
    K, M = cfg.update_epochs, cfg.num_minibatches
    return dict(
        _common_fields(cfg),
        lr_scheduler_type=cfg.lr_schedule,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=M * accumulation,
        max_steps=cfg.iterations * K * M,
        warmup_steps=cfg.warmup_iterations * K * M,
    )


def w193_grpo_config_kwargs_steps_are_rounds(cfg, num_processes=1):
    _refuse_switches(cfg)
    micro, accumulation = _sizes(cfg, num_processes)
    M = cfg.num_minibatches
    return dict(
        _common_fields(cfg),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=M * accumulation,
        max_steps=cfg.iterations,
        warmup_steps=cfg.warmup_iterations,
    )


def w194_grpo_config_kwargs_ignores_processes(cfg, num_processes=1):
    _refuse_switches(cfg)
    micro, accumulation = _sizes(cfg, 1)  # the minibatch, as in the course
    K, M = cfg.update_epochs, cfg.num_minibatches
    return dict(
        _common_fields(cfg),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=M * accumulation,
        max_steps=cfg.iterations * K * M,
        warmup_steps=cfg.warmup_iterations * K * M,
    )


def w195_grpo_config_kwargs_drops_switches(cfg, num_processes=1):
    micro, accumulation = _sizes(cfg, num_processes)
    K, M = cfg.update_epochs, cfg.num_minibatches
    return dict(
        _common_fields(cfg),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=M * accumulation,
        max_steps=cfg.iterations * K * M,
        warmup_steps=cfg.warmup_iterations * K * M,
    )


def r53_grpo_config_kwargs_helpers(cfg, num_processes=1):
    _refuse_switches(cfg)
    micro, accumulation = _sizes(cfg, num_processes)
    steps = cfg.update_epochs * cfg.num_minibatches
    return dict(
        _common_fields(cfg),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=cfg.num_minibatches * accumulation,
        max_steps=cfg.iterations * steps,
        warmup_steps=cfg.warmup_iterations * steps,
    )


def r54_grpo_config_kwargs_inline(cfg, num_processes=1):
    unsupported = [
        name
        for name, value in (
            ("algo", "grpo"),
            ("adv_estimator", "grpo"),
            ("policy_loss", "clip"),
            ("dynamic_sampling", False),
            ("overlong_cache", 0),
            ("kl_placement", "loss"),
            ("whiten_advantages", False),
        )
        if getattr(cfg, name) != value
    ]
    if unsupported:
        raise ValueError(f"TRL cannot do {unsupported}")
    completions = cfg.prompts_per_step * cfg.group_size
    minibatch, rest = divmod(completions, cfg.num_minibatches)
    share, rest2 = divmod(minibatch, num_processes)
    micro = cfg.micro_batch_size if cfg.micro_batch_size is not None else share
    passes, rest3 = divmod(share, micro)
    if rest or rest2 or rest3:
        raise ValueError("num_processes / num_minibatches / micro_batch_size: the sizes do not split evenly")
    per_round = cfg.update_epochs * cfg.num_minibatches
    scheduler = cfg.lr_schedule
    if scheduler == "constant" and cfg.warmup_iterations > 0:
        scheduler = "constant_with_warmup"
    loss_type = {"seq-mean-token-mean": "grpo", "token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}
    return {
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": passes,
        "steps_per_generation": cfg.num_minibatches * passes,
        "num_generations": cfg.group_size,
        "num_iterations": cfg.update_epochs,
        "max_steps": cfg.iterations * per_round,
        "warmup_steps": cfg.warmup_iterations * per_round,
        "beta": cfg.kl_coef,
        "epsilon": cfg.clip_eps,
        "epsilon_high": cfg.clip_eps_high if cfg.clip_eps_high is not None else cfg.clip_eps,
        "loss_type": loss_type[cfg.loss_agg],
        "scale_rewards": "group" if cfg.normalize_std else "none",
        "max_completion_length": cfg.max_new_tokens,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "learning_rate": cfg.lr,
        "lr_scheduler_type": scheduler,
        "max_grad_norm": cfg.max_grad_norm,
        "mask_truncated_completions": cfg.overlong_filter,
        "use_bias_correction_kl": False,
        "seed": cfg.seed,
    }


ROWS += [
    _row(
        "grpo_config_kwargs",
        "09",
        w188_grpo_config_kwargs_true_division,
        "computes the batch sizes with true division (/), so per_device_train_batch_size and the accumulation "
        "steps are floats instead of ints.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w189_grpo_config_kwargs_counts_prompts,
        "counts per_device_train_batch_size in prompts (B / M / num_processes) instead of completions "
        "(B * G / M / num_processes).",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w190_grpo_config_kwargs_trl_loss_default,
        "leaves loss_type out, so TRL's default \"dapo\" replaces the loss the course's loss_agg asks for.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w191_grpo_config_kwargs_bias_correction_left,
        "leaves use_bias_correction_kl out, so TRL's default True multiplies the k3 term by pi_theta / pi_old.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w192_grpo_config_kwargs_constant_schedule,
        'passes lr_schedule as it is, so "constant" with warm-up iterations stays HF\'s "constant", which ignores '
        'the warm-up, instead of "constant_with_warmup".',
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w193_grpo_config_kwargs_steps_are_rounds,
        "sets max_steps and warmup_steps to the numbers of rounds instead of optimiser steps (times "
        "update_epochs * num_minibatches).",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w194_grpo_config_kwargs_ignores_processes,
        "does not split a minibatch over num_processes, so with several processes per_device_train_batch_size (or "
        "the accumulation) counts the whole minibatch on every process.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w195_grpo_config_kwargs_drops_switches,
        "does not refuse the switches TRL has no field for (algo, adv_estimator, policy_loss, ...): a cfg with, say, "
        'policy_loss="cispo" is silently translated as plain GRPO instead of raising ValueError.',
    ),
    _row("grpo_config_kwargs", "09", r53_grpo_config_kwargs_helpers),
    _row("grpo_config_kwargs", "09", r54_grpo_config_kwargs_inline),
]


# ---------------------------------------------------------------------------
# Chapter 10: pass_at_k
# ---------------------------------------------------------------------------


def _counts(n, c, k):
    n, c, k = (torch.as_tensor(x).long() for x in (n, c, k))
    return torch.broadcast_tensors(n, c, k)


def _all_wrong(n, c, k, pad):
    j = torch.arange(int(c.max()) if c.numel() else 0, dtype=torch.float64)
    i = (n - c + 1).double()[..., None] + j
    factors = torch.where(j < c[..., None], 1.0 - k[..., None] / i, torch.tensor(pad, dtype=torch.float64))
    return factors.prod(dim=-1)


def w196_pass_at_k_plug_in(n, c, k):
    n, c, k = _counts(n, c, k)
    return 1.0 - (1.0 - c.double() / n.double()) ** k.double()


def w197_pass_at_k_float_binomials(n, c, k):
    n, c, k = _counts(n, c, k)
    values = []
    for nn_, cc, kk in zip(n.reshape(-1).tolist(), c.reshape(-1).tolist(), k.reshape(-1).tolist()):
        if cc == 0:
            values.append(0.0)
        elif nn_ - cc < kk:
            values.append(1.0)
        else:
            values.append(1.0 - float(math.comb(nn_ - cc, kk)) / float(math.comb(nn_, kk)))
    return torch.tensor(values, dtype=torch.float64).reshape(n.shape)


def w198_pass_at_k_default_dtype(n, c, k):
    n, c, k = _counts(n, c, k)
    j = torch.arange(int(c.max()))
    i = (n - c + 1)[..., None] + j
    factors = torch.where(j < c[..., None], 1.0 - k[..., None] / i, torch.ones(()))
    return torch.where(n - c < k, (c > 0).float(), 1.0 - factors.prod(dim=-1))


def w199_pass_at_k_k_above_n(n, c, k):
    n, c, k = _counts(n, c, k)
    # fewer wrong samples than k: every draw holds a right one
    return torch.where(n - c < k, torch.ones((), dtype=torch.float64), 1.0 - _all_wrong(n, c, k, 1.0))


def w200_pass_at_k_range_shifted(n, c, k):
    n, c, k = _counts(n, c, k)
    j = torch.arange(int(c.max()), dtype=torch.float64)
    i = (n - c).double()[..., None] + j  # i = n - c, ..., n - 1
    factors = torch.where(j < c[..., None], 1.0 - k[..., None] / i, torch.ones((), dtype=torch.float64))
    return torch.where(n - c < k, (c > 0).double(), 1.0 - factors.prod(dim=-1))


def w201_pass_at_k_python_float(n, c, k):
    if all(isinstance(x, int) for x in (n, c, k)):
        if c == 0:
            return 0.0
        if n - c < k:
            return 1.0
        return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))
    n, c, k = _counts(n, c, k)
    return torch.where(n - c < k, (c > 0).double(), 1.0 - _all_wrong(n, c, k, 1.0))


def w202_pass_at_k_zero_padding(n, c, k):
    n, c, k = _counts(n, c, k)
    # the factors past each entry's c are padding: zero them
    return torch.where(n - c < k, (c > 0).double(), 1.0 - _all_wrong(n, c, k, 0.0))


def r55_pass_at_k_log_space(n, c, k):
    n, c, k = _counts(n, c, k)
    C = int(c.max())
    i = (n - c + 1).double()[..., None] + torch.arange(C, dtype=torch.float64)
    inside = torch.arange(C) < c[..., None]
    ratio = (k.double()[..., None] / i).clamp(max=1.0)
    logs = torch.where(inside, torch.log1p(-ratio), torch.zeros((), dtype=torch.float64))
    estimate = -torch.expm1(logs.sum(dim=-1))
    return torch.where(n - c < k, (c > 0).double(), estimate)


def r56_pass_at_k_elementwise(n, c, k):
    n, c, k = _counts(n, c, k)
    values = []
    for nn_, cc, kk in zip(n.reshape(-1).tolist(), c.reshape(-1).tolist(), k.reshape(-1).tolist()):
        if nn_ - cc < kk:
            values.append(1.0 if cc > 0 else 0.0)
            continue
        p = 1.0
        for i in range(nn_ - cc + 1, nn_ + 1):
            p *= 1.0 - kk / i
        values.append(1.0 - p)
    return torch.tensor(values, dtype=torch.float64).reshape(n.shape)


ROWS += [
    _row(
        "pass_at_k",
        "10",
        w196_pass_at_k_plug_in,
        "returns the plug-in estimate 1 - (1 - c/n)^k (drawing with replacement) instead of Chen et al.'s unbiased "
        "product.",
    ),
    _row(
        "pass_at_k",
        "10",
        w197_pass_at_k_float_binomials,
        "computes the two binomial coefficients with math.comb and converts each to a float before dividing, which "
        "overflows (OverflowError) once they pass float64's range, as C(5000, 200) does.",
    ),
    _row(
        "pass_at_k",
        "10",
        w198_pass_at_k_default_dtype,
        "builds the factors with torch's default float32, so the result is float32 (and loses precision over "
        "thousands of factors) instead of float64.",
    ),
    _row(
        "pass_at_k",
        "10",
        w199_pass_at_k_k_above_n,
        "returns 1 wherever n - c < k, also when c = 0 and k > n, where pass@n of no right sample is 0.",
    ),
    _row(
        "pass_at_k",
        "10",
        w200_pass_at_k_range_shifted,
        "runs the product over i = n - c, ..., n - 1 instead of i = n - c + 1, ..., n (off by one).",
    ),
    _row(
        "pass_at_k",
        "10",
        w201_pass_at_k_python_float,
        "special-cases int arguments with a pure-Python computation that returns a Python float instead of a "
        "0-dimensional float64 tensor.",
    ),
    _row(
        "pass_at_k",
        "10",
        w202_pass_at_k_zero_padding,
        "fills the factors past each entry's own c with 0 instead of 1, so in a batch with different c every entry "
        "below the largest c gets a zero product (pass@k = 1).",
    ),
    _row("pass_at_k", "10", r55_pass_at_k_log_space),
    _row("pass_at_k", "10", r56_pass_at_k_elementwise),
]


# ---------------------------------------------------------------------------
# Chapter 10: aggregation_token_weight
# ---------------------------------------------------------------------------


def _lengths(length):
    return length.to(length.dtype if length.is_floating_point() else torch.get_default_dtype())


def w203_aggregation_token_weight_empty_not_zero(length, mode, max_len=None):
    o = _lengths(length)
    N = o.numel()
    if mode == "seq-mean-token-mean":
        return 1.0 / (N * o.clamp(min=1))
    if mode == "token-mean":
        w = torch.ones_like(o) / o.sum().clamp(min=1)
    else:
        w = torch.ones_like(o) / (N * (o.max().clamp(min=1) if max_len is None else max_len))
    return torch.where(o > 0, w, torch.zeros_like(w))


def w204_aggregation_token_weight_nonempty_count(length, mode, max_len=None):
    o = _lengths(length)
    N = int((o > 0).sum())  # the responses that have tokens
    if mode == "seq-mean-token-mean":
        w = 1.0 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum().clamp(min=1)
    else:
        w = torch.ones_like(o) / (N * (o.max().clamp(min=1) if max_len is None else max_len))
    return torch.where(o > 0, w, torch.zeros_like(w))


def w205_aggregation_token_weight_last_axis_as_T(length, mode, max_len=None):
    o = _lengths(length)
    N = o.numel()
    if mode == "seq-mean-token-mean":
        w = 1.0 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum().clamp(min=1)
    else:
        T = o.shape[-1] if o.dim() else 1  # the padded length
        w = torch.ones_like(o) / (N * (T if max_len is None else max_len))
    return torch.where(o > 0, w, torch.zeros_like(w))


def w206_aggregation_token_weight_first_axis_as_N(length, mode, max_len=None):
    o = _lengths(length)
    N = o.shape[0] if o.dim() else 1  # the batch
    if mode == "seq-mean-token-mean":
        w = 1.0 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum().clamp(min=1)
    else:
        w = torch.ones_like(o) / (N * (o.max().clamp(min=1) if max_len is None else max_len))
    return torch.where(o > 0, w, torch.zeros_like(w))


def w207_aggregation_token_weight_ignores_max_len(length, mode, max_len=None):
    o = _lengths(length)
    N = o.numel()
    if mode == "seq-mean-token-mean":
        w = 1.0 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum().clamp(min=1)
    else:
        w = torch.ones_like(o) / (N * o.max().clamp(min=1))
    return torch.where(o > 0, w, torch.zeros_like(w))


def w208_aggregation_token_weight_token_mean_per_response(length, mode, max_len=None):
    o = _lengths(length)
    N = o.numel()
    if mode == "seq-mean-token-mean":
        w = 1.0 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / (N * o.sum().clamp(min=1))  # a mean over responses too
    else:
        w = torch.ones_like(o) / (N * (o.max().clamp(min=1) if max_len is None else max_len))
    return torch.where(o > 0, w, torch.zeros_like(w))


def w209_aggregation_token_weight_no_N(length, mode, max_len=None):
    o = _lengths(length)
    N = o.numel()
    if mode == "seq-mean-token-mean":
        w = 1.0 / o.clamp(min=1)  # 1 / |o_i|
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum().clamp(min=1)
    else:
        w = torch.ones_like(o) / (N * (o.max().clamp(min=1) if max_len is None else max_len))
    return torch.where(o > 0, w, torch.zeros_like(w))


def r57_aggregation_token_weight_loops(length, mode, max_len=None):
    dtype = length.dtype if length.is_floating_point() else torch.get_default_dtype()
    lengths = [float(x) for x in length.reshape(-1).tolist()]
    N = len(lengths)
    longest = max(lengths) if max_len is None else float(max_len)
    total = sum(lengths)
    weights = []
    for o in lengths:
        if o == 0:
            weights.append(0.0)
        elif mode == "seq-mean-token-mean":
            weights.append(1.0 / (N * o))
        elif mode == "token-mean":
            weights.append(1.0 / total)
        else:
            weights.append(1.0 / (N * longest))
    return torch.tensor(weights, dtype=dtype).reshape(length.shape)


def r58_aggregation_token_weight_masked(length, mode, max_len=None):
    o = length.to(length.dtype if length.is_floating_point() else torch.get_default_dtype())
    N = o.numel()
    has = o > 0
    if mode == "seq-mean-token-mean":
        w = torch.where(has, 1.0 / (N * o.masked_fill(~has, 1.0)), torch.zeros_like(o))
    elif mode == "token-mean":
        w = has.to(o.dtype) / torch.clamp(o.sum(), min=1)
    else:
        L = torch.clamp(o.max(), min=1) if max_len is None else torch.tensor(float(max_len), dtype=o.dtype)
        w = has.to(o.dtype) / (N * L)
    return w


ROWS += [
    _row(
        "aggregation_token_weight",
        "10",
        w203_aggregation_token_weight_empty_not_zero,
        'in "seq-mean-token-mean" returns 1 / (N * max(|o_i|, 1)) before the zeroing, so a response of length 0 '
        "gets weight 1/N instead of 0.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w204_aggregation_token_weight_nonempty_count,
        "counts N as the number of non-empty responses, while an empty response still counts in N.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w205_aggregation_token_weight_last_axis_as_T,
        'with max_len=None in "seq-mean-token-sum-norm" divides by length.shape[-1], the size of the last axis, '
        "instead of the longest length.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w206_aggregation_token_weight_first_axis_as_N,
        "takes N = length.shape[0], so for a (B, G) tensor of lengths N is B instead of every entry, B * G.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w207_aggregation_token_weight_ignores_max_len,
        'in "seq-mean-token-sum-norm" always divides by the longest length, ignoring the max_len argument.',
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w208_aggregation_token_weight_token_mean_per_response,
        'in "token-mean" divides by N * sum_j |o_j| instead of sum_j |o_j|.',
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w209_aggregation_token_weight_no_N,
        'in "seq-mean-token-mean" returns 1 / |o_i|, leaving out the 1/N of the mean over responses.',
    ),
    _row("aggregation_token_weight", "10", r57_aggregation_token_weight_loops),
    _row("aggregation_token_weight", "10", r58_aggregation_token_weight_masked),
]


# ---------------------------------------------------------------------------
# Chapter 10: completion_style
# ---------------------------------------------------------------------------


def _style_of_body(body, n_digits, total=r"(?:1[0-9]|[0-9])"):
    if re.fullmatch(r"[0-9]+", body):
        return "direct"
    m = re.fullmatch(r"\[([^\[\]]+)\]([0-9]+)", body)
    if m is None:
        return "malformed"
    if re.fullmatch(r"\.+", m.group(1)):
        return "filler"
    if re.fullmatch(total + ("," + total) * (n_digits - 1), m.group(1)):
        return "scratchpad"
    return "malformed"


def w210_completion_style_no_eos_needed(text, n_digits=3):
    return _style_of_body(text.split("$", 1)[0], n_digits)


def w211_completion_style_two_digit_totals(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    return _style_of_body(body, n_digits, total=r"[0-9]{1,2}")


def w212_completion_style_leading_zero_total(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    return _style_of_body(body, n_digits, total=r"[01]?[0-9]")


def w213_completion_style_any_count(text, n_digits=3):
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
    if re.fullmatch(r"(?:1[0-9]|[0-9])(?:,(?:1[0-9]|[0-9]))*", m.group(1)):
        return "scratchpad"
    return "malformed"


def w214_completion_style_empty_filler(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    if re.fullmatch(r"[0-9]+", body):
        return "direct"
    m = re.fullmatch(r"\[([^\[\]]*)\]([0-9]+)", body)
    if m is None:
        return "malformed"
    if re.fullmatch(r"\.*", m.group(1)):
        return "filler"
    total = r"(?:1[0-9]|[0-9])"
    if re.fullmatch(total + ("," + total) * (n_digits - 1), m.group(1)):
        return "scratchpad"
    return "malformed"


def w215_completion_style_empty_direct(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    if re.fullmatch(r"[0-9]*", body):
        return "direct"
    return _style_of_body(body, n_digits)


def w216_completion_style_last_eos(text, n_digits=3):
    body, eos, _ = text.rpartition("$")
    if not eos:
        return "malformed"
    return _style_of_body(body, n_digits)


def w217_completion_style_re_match(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    if re.match(r"[0-9]+", body):
        return "direct"
    return _style_of_body(body, n_digits)


def r59_completion_style_one_regex(text, n_digits=3):
    if "$" not in text:
        return "malformed"
    body = text[: text.index("$")]
    total = r"(?:[0-9]|1[0-9])"
    pattern = re.compile(
        r"(?P<direct>[0-9]+)"
        r"|\[(?P<filler>\.+)\][0-9]+"
        r"|\[(?P<scratch>" + total + r"(?:," + total + r"){" + str(n_digits - 1) + r"})\][0-9]+"
    )
    m = pattern.fullmatch(body)
    if m is None:
        return "malformed"
    if m.group("direct") is not None:
        return "direct"
    return "filler" if m.group("filler") is not None else "scratchpad"


def r60_completion_style_string_methods(text, n_digits=3):
    digits = set("0123456789")
    if "$" not in text:
        return "malformed"
    body = text.split("$", 1)[0]
    if body and set(body) <= digits:
        return "direct"
    if not body.startswith("[") or body.count("[") != 1 or body.count("]") != 1:
        return "malformed"
    inside, _, after = body[1:].partition("]")
    if not after or not set(after) <= digits or not inside:
        return "malformed"
    if set(inside) == {"."}:
        return "filler"
    totals = inside.split(",")
    if len(totals) != n_digits:
        return "malformed"
    for t in totals:
        if not t or not set(t) <= digits or (len(t) > 1 and t[0] == "0") or int(t) > 19:
            return "malformed"
    return "scratchpad"


ROWS += [
    _row(
        "completion_style",
        "10",
        w210_completion_style_no_eos_needed,
        "reads the text before the first '$' without requiring that there is one, so a completion that never stopped "
        "('1045') is classified by its text instead of being malformed.",
    ),
    _row(
        "completion_style",
        "10",
        w211_completion_style_two_digit_totals,
        "accepts any one- or two-digit total ([0-9]{1,2}), so totals of 20 or more and totals with a leading zero make "
        "a scratchpad.",
    ),
    _row(
        "completion_style",
        "10",
        w212_completion_style_leading_zero_total,
        "matches a total with [01]?[0-9], which also accepts a leading zero such as '05'.",
    ),
    _row(
        "completion_style",
        "10",
        w213_completion_style_any_count,
        "accepts any number of comma-separated totals instead of exactly n_digits of them.",
    ),
    _row(
        "completion_style",
        "10",
        w214_completion_style_empty_filler,
        "matches the filler's dots with \\.* (zero or more), so an empty bracket '[]1045$' is classified as filler "
        "instead of malformed.",
    ),
    _row(
        "completion_style",
        "10",
        w215_completion_style_empty_direct,
        "tests direct answers with [0-9]* (zero or more digits), so a lone '$' is classified as direct instead of "
        "malformed.",
    ),
    _row(
        "completion_style",
        "10",
        w216_completion_style_last_eos,
        "splits at the last '$' (rpartition) instead of the first, so what follows the first EOS is read.",
    ),
    _row(
        "completion_style",
        "10",
        w217_completion_style_re_match,
        "tests for a direct answer with re.match, which only anchors at the start, so any text that begins with a "
        "digit ('10,45$', '1045x$') is classified as direct.",
    ),
    _row("completion_style", "10", r59_completion_style_one_regex),
    _row("completion_style", "10", r60_completion_style_string_methods),
]


# ---------------------------------------------------------------------------
# Chapter 10: style_share
# ---------------------------------------------------------------------------


def w218_style_share_outer_length(labels, style):
    flat = np.asarray(labels, dtype=object).reshape(-1)
    if flat.size == 0:
        raise ValueError("no labels")
    return float((flat == style).sum()) / len(labels)


def w219_style_share_without_malformed(labels, style):
    flat = np.asarray(labels, dtype=object).reshape(-1).tolist()
    if not flat:
        raise ValueError("no labels")
    well_formed = [label for label in flat if label != "malformed"]
    if style == "malformed":
        return flat.count(style) / len(flat)
    return well_formed.count(style) / max(len(well_formed), 1)


def w220_style_share_empty_is_zero(labels, style):
    flat = np.asarray(labels, dtype=object).reshape(-1).tolist()
    if not flat:
        return 0.0  # no completions, no share
    return flat.count(style) / len(flat)


def w221_style_share_list_count(labels, style):
    labels = list(labels)
    if not labels:
        raise ValueError("no labels")
    return labels.count(style) / len(labels)


def w222_style_share_division_by_zero(labels, style):
    flat = np.asarray(labels, dtype=object).reshape(-1).tolist()
    return flat.count(style) / len(flat)


def w223_style_share_rounded(labels, style):
    flat = np.asarray(labels, dtype=object).reshape(-1).tolist()
    if not flat:
        raise ValueError("no labels")
    return round(flat.count(style) / len(flat), 2)


def r61_style_share_recursive(labels, style):
    def walk(x):
        if isinstance(x, str):
            yield x
        else:
            for item in x:
                yield from walk(item)

    flat = list(walk(labels.tolist() if isinstance(labels, np.ndarray) else labels))
    if not flat:
        raise ValueError("labels: no completions to share")
    return sum(1 for label in flat if label == style) / len(flat)


def r62_style_share_ravel(labels, style):
    arr = np.array(labels, dtype=object).ravel()
    if len(arr) == 0:
        raise ValueError("labels is empty")
    return float(np.count_nonzero(arr == style) / len(arr))


ROWS += [
    _row(
        "style_share",
        "10",
        w218_style_share_outer_length,
        "divides by len(labels), the number of prompts of a nested [B][G] list, instead of the number of completions.",
    ),
    _row(
        "style_share",
        "10",
        w219_style_share_without_malformed,
        "leaves the malformed completions out of the denominator of the other styles' shares.",
    ),
    _row(
        "style_share",
        "10",
        w220_style_share_empty_is_zero,
        "returns 0.0 for an empty list of labels instead of raising ValueError.",
    ),
    _row(
        "style_share",
        "10",
        w221_style_share_list_count,
        "counts with list(labels).count(style), which for a nested list or a 2-D array compares whole rows with the "
        "label instead of counting every completion.",
    ),
    _row(
        "style_share",
        "10",
        w222_style_share_division_by_zero,
        "does not check for an empty list, which then raises ZeroDivisionError instead of ValueError.",
    ),
    _row(
        "style_share",
        "10",
        w223_style_share_rounded,
        "rounds the share to two decimals.",
    ),
    _row("style_share", "10", r61_style_share_recursive),
    _row("style_share", "10", r62_style_share_ravel),
]


# ---------------------------------------------------------------------------
# Chapter 11: rloo_advantages
# ---------------------------------------------------------------------------


def w224_rloo_advantages_divide_by_G(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    others = rewards.sum(dim=-1, keepdim=True) - rewards
    return rewards - others / G


def w225_rloo_advantages_group_mean(rewards):
    # the baseline: the group's mean reward
    return rewards - rewards.mean(dim=-1, keepdim=True)


def w226_rloo_advantages_no_group_of_one(rewards):
    G = rewards.shape[-1]
    others = rewards.sum(dim=-1, keepdim=True) - rewards
    return rewards - others / (G - 1)


def w227_rloo_advantages_batch_axis(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    others = rewards.sum(dim=0, keepdim=True) - rewards
    return rewards - others / (G - 1)


def w228_rloo_advantages_lost_keepdim(rewards):
    def others_sum(r):
        return r.sum(dim=-1)

    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return rewards - (others_sum(rewards) - rewards) / (G - 1)


def w229_rloo_advantages_divided_by_std(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    adv = rewards - (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1)
    return adv / (rewards.std(dim=-1, keepdim=True) + 1e-6)


def w230_rloo_advantages_factor_inverted(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return (G - 1) / G * (rewards - rewards.mean(dim=-1, keepdim=True))


def r63_rloo_advantages_scaled_centred(rewards):
    G = rewards.shape[-1]
    if G < 2:
        return rewards * 0.0
    return G / (G - 1) * (rewards - rewards.mean(dim=-1, keepdim=True))


def r64_rloo_advantages_other_mask(rewards):
    B, G = rewards.shape
    if G == 1:
        return torch.zeros_like(rewards)
    others = ~torch.eye(G, dtype=torch.bool)  # others[i, j]: j is another response than i
    baseline = (rewards[:, None, :] * others).sum(dim=-1) / (G - 1)
    return rewards - baseline


ROWS += [
    _row(
        "rloo_advantages",
        "11",
        w224_rloo_advantages_divide_by_G,
        "divides the sum of the other rewards by G instead of G - 1.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w225_rloo_advantages_group_mean,
        "subtracts the mean of the whole group, the response's own reward included, instead of the mean of the "
        "other G - 1.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w226_rloo_advantages_no_group_of_one,
        "has no case for a group of one, where (sum - r) / (G - 1) is 0 / 0 = NaN instead of an advantage of 0.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w227_rloo_advantages_batch_axis,
        "sums the other rewards over the batch axis (dim=0) instead of over each prompt's group.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w228_rloo_advantages_lost_keepdim,
        "its others_sum helper sums without keepdim=True, so the (B,) group sums broadcast along the group axis "
        "(wrong when B == G, an error otherwise).",
    ),
    _row(
        "rloo_advantages",
        "11",
        w229_rloo_advantages_divided_by_std,
        "divides the leave-one-out advantage by the group's std, which RLOO does not do.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w230_rloo_advantages_factor_inverted,
        "scales the centred rewards by (G - 1) / G instead of G / (G - 1).",
    ),
    _row("rloo_advantages", "11", r63_rloo_advantages_scaled_centred),
    _row("rloo_advantages", "11", r64_rloo_advantages_other_mask),
]


# ---------------------------------------------------------------------------
# Chapter 11: gspo_sequence_log_ratio
# ---------------------------------------------------------------------------


def w231_gspo_sequence_log_ratio_old_attached(logp, logp_old, mask):
    valid = mask.bool()
    diff = torch.where(valid, logp - logp_old, torch.zeros_like(logp))
    return diff.sum(-1) / valid.sum(-1).clamp(min=1)


def w232_gspo_sequence_log_ratio_sum(logp, logp_old, mask):
    valid = mask.bool()
    return torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp)).sum(-1)


def w233_gspo_sequence_log_ratio_over_T(logp, logp_old, mask):
    valid = mask.bool()
    return torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp)).mean(-1)


def w234_gspo_sequence_log_ratio_multiply_mask(logp, logp_old, mask):
    m = mask.to(logp.dtype)
    return ((logp - logp_old.detach()) * m).sum(-1) / m.sum(-1).clamp(min=1)


def w235_gspo_sequence_log_ratio_no_clamp(logp, logp_old, mask):
    valid = mask.bool()
    return torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp)).sum(-1) / valid.sum(-1)


def w236_gspo_sequence_log_ratio_arithmetic_mean(logp, logp_old, mask):
    valid = mask.bool()
    ratios = torch.where(valid, torch.exp(logp - logp_old.detach()), torch.zeros_like(logp))
    return torch.log(ratios.sum(-1).clamp(min=1e-30) / valid.sum(-1).clamp(min=1)).where(
        valid.any(-1), torch.zeros_like(logp[..., 0])
    )


def w237_gspo_sequence_log_ratio_mask_on_logp_only(logp, logp_old, mask):
    valid = mask.bool()
    diff = torch.where(valid, logp, torch.zeros_like(logp)) - logp_old.detach()
    return diff.sum(-1) / valid.sum(-1).clamp(min=1)


def r65_gspo_sequence_log_ratio_rows(logp, logp_old, mask):
    T = logp.shape[-1]
    lp, lo, keep = logp.reshape(-1, T), logp_old.detach().reshape(-1, T), mask.reshape(-1, T) != 0
    out = []
    for i in range(lp.shape[0]):
        d = lp[i][keep[i]] - lo[i][keep[i]]
        out.append(d.mean() if d.numel() else (lp[i] * 0.0)[keep[i]].sum())
    return torch.stack(out).reshape(logp.shape[:-1])


def r66_gspo_sequence_log_ratio_masked_fill(logp, logp_old, mask):
    keep = mask.bool()
    log_ratio = (logp - logp_old.detach()).masked_fill(~keep, 0.0)
    counts = keep.sum(dim=-1).to(logp.dtype)
    return log_ratio.sum(dim=-1) / torch.maximum(counts, torch.ones_like(counts))


ROWS += [
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w231_gspo_sequence_log_ratio_old_attached,
        "does not detach logp_old, so gradient flows into the old log-probs.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w232_gspo_sequence_log_ratio_sum,
        "sums the token log ratios (the log of the whole sequences' ratio) instead of averaging them over the valid "
        "tokens.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w233_gspo_sequence_log_ratio_over_T,
        "zeroes the padding and then averages over all T positions, dividing by T instead of the response's length.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w234_gspo_sequence_log_ratio_multiply_mask,
        "drops the padding by multiplying by the mask, so a NaN or infinite log-prob in the padding turns the "
        "response's ratio into NaN.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w235_gspo_sequence_log_ratio_no_clamp,
        "divides by the number of valid tokens without clamp(min=1), so an empty response gets 0/0 = NaN instead of 0.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w236_gspo_sequence_log_ratio_arithmetic_mean,
        "takes the log of the arithmetic mean of the token ratios instead of the mean of the log ratios (the "
        "geometric mean).",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w237_gspo_sequence_log_ratio_mask_on_logp_only,
        "applies the mask to logp only and subtracts logp_old everywhere, so the padding's old log-probs are "
        "subtracted too.",
    ),
    _row("gspo_sequence_log_ratio", "11", r65_gspo_sequence_log_ratio_rows),
    _row("gspo_sequence_log_ratio", "11", r66_gspo_sequence_log_ratio_masked_fill),
]


# ---------------------------------------------------------------------------
# Chapter 11: cispo_loss
# ---------------------------------------------------------------------------


def w238_cispo_loss_weight_attached(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(torch.exp(logp - logp_old.detach()), min=low, max=1.0 + clip_eps_high)
    return -weight * adv.detach() * logp


def w239_cispo_loss_trl_cap(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    low = None if clip_eps is None else 1.0 - clip_eps
    ratio = torch.exp(logp - logp_old.detach())
    weight = torch.clamp(ratio, min=low, max=clip_eps_high).detach()  # TRL's epsilon_high is the cap
    return -weight * adv.detach() * logp


def w240_cispo_loss_default_floor(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    eps_low = clip_eps_high if clip_eps is None else clip_eps  # symmetric unless told otherwise
    ratio = torch.exp(logp - logp_old.detach())
    weight = torch.clamp(ratio, 1.0 - eps_low, 1.0 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def w241_cispo_loss_no_floor(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    weight = torch.clamp(ratio, max=1.0 + clip_eps_high).detach()  # MiniMax-M1 has no lower bound
    return -weight * adv.detach() * logp


def w242_cispo_loss_ppo_min(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    low = None if clip_eps is None else 1.0 - clip_eps
    ratio = torch.exp(logp - logp_old.detach())
    a = adv.detach()
    clipped = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high)
    return -torch.minimum(ratio * a, clipped * a)


def w243_cispo_loss_sign(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(torch.exp(logp - logp_old.detach()), min=low, max=1.0 + clip_eps_high).detach()
    return weight * adv.detach() * logp  # the objective sg(w) * A * log pi


def w244_cispo_loss_adv_attached(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(torch.exp(logp - logp_old.detach()), min=low, max=1.0 + clip_eps_high).detach()
    return -weight * adv * logp


def w245_cispo_loss_reduced(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(torch.exp(logp - logp_old.detach()), min=low, max=1.0 + clip_eps_high).detach()
    return (-weight * adv.detach() * logp).mean()


def r67_cispo_loss_where(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    with torch.no_grad():
        w = torch.exp(logp - logp_old)
        cap = torch.full_like(w, 1.0 + clip_eps_high)
        w = torch.where(w > cap, cap, w)
        if clip_eps is not None:
            floor = torch.full_like(w, 1.0 - clip_eps)
            w = torch.where(w < floor, floor, w)
    return -(w * adv.detach()) * logp


def r68_cispo_loss_min_max(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = (logp.detach() - logp_old.detach()).exp()
    weight = torch.minimum(ratio, torch.tensor(1.0 + clip_eps_high, dtype=ratio.dtype))
    if clip_eps is not None:
        weight = torch.maximum(weight, torch.tensor(1.0 - clip_eps, dtype=ratio.dtype))
    return -(weight * adv.detach()) * logp


ROWS += [
    _row(
        "cispo_loss",
        "11",
        w238_cispo_loss_weight_attached,
        "does not detach the clipped weight, so the gradient with respect to logp gets an extra term from the "
        "weight (-w A (1 + log pi) where the ratio is inside the range).",
    ),
    _row(
        "cispo_loss",
        "11",
        w239_cispo_loss_trl_cap,
        "caps the weight at clip_eps_high itself (TRL's epsilon_high convention) instead of 1 + clip_eps_high.",
    ),
    _row(
        "cispo_loss",
        "11",
        w240_cispo_loss_default_floor,
        "with clip_eps=None floors the weight at 1 - clip_eps_high, while None means no lower bound.",
    ),
    _row(
        "cispo_loss",
        "11",
        w241_cispo_loss_no_floor,
        "never applies a lower bound, ignoring a given clip_eps (which floors the weight at 1 - clip_eps).",
    ),
    _row(
        "cispo_loss",
        "11",
        w242_cispo_loss_ppo_min,
        "writes PPO's clipped objective -min(r A, clip(r) A) instead of REINFORCE weighted by the detached clipped "
        "ratio, so clipped tokens lose their gradient.",
    ),
    _row(
        "cispo_loss",
        "11",
        w243_cispo_loss_sign,
        "returns the objective sg(w) * A * log pi without the minus sign.",
    ),
    _row(
        "cispo_loss",
        "11",
        w244_cispo_loss_adv_attached,
        "does not detach adv, so gradient flows into the advantages.",
    ),
    _row(
        "cispo_loss",
        "11",
        w245_cispo_loss_reduced,
        "returns the mean over tokens, a scalar, instead of the per-token loss [..., T].",
    ),
    _row("cispo_loss", "11", r67_cispo_loss_where),
    _row("cispo_loss", "11", r68_cispo_loss_min_max),
]
