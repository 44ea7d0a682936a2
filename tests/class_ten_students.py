"""A tenth class of students, written blind: plausible answers to every exercise, wrong and right.

The wrong answers each make exactly one mistake, stated in their row. The students are of eight kinds:
those porting another library's conventions (numpy and JAX idioms, half-remembered CleanRL, TRL, OpenRLHF and
verl code), those who optimise a loop away (broadcasting, ``cumsum``/``flip``, ``roll``, ``einsum``, caching),
those who misread one sentence of the exercise, off-by-one and boundary students (the last step, the EOS token,
groups of one, ``k > n``), numerics students (log of a softmax, float16, Bessel's correction, eps inside a
sqrt), autograd students (a missing or misplaced ``detach``, in-place updates, ``.item()``), string-parsing
students (greedy regexes, the first match instead of the last) and configuration students (units, old TRL
spellings, defaults assumed). The right answers are correct variants written differently from the solutions
(another algorithm, a loop for a vectorised form, early returns for edge cases), each compared with the
reference on random and edge inputs before it was written down here.
"""

import math
import re
from collections import Counter

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
    return {
        "exercise": exercise,
        "chapter": chapter,
        "student": student,
        "right": truth is None,
        "mistake": truth,
    }


ROWS = []

# ======================================================================================
# 00 discounted_return
# ======================================================================================


def w01_discounted_return_numpy_weights(rewards, gamma):
    T = rewards.shape[-1]
    weights = torch.from_numpy(np.power(gamma, np.arange(T, dtype=np.float64)))
    return (rewards * weights).sum(dim=-1)


def w02_discounted_return_powers_from_one(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(1, T + 1, dtype=rewards.dtype)
    return (rewards * discounts).sum(dim=-1)


def w03_discounted_return_reversed_powers(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T - 1, -1, -1, dtype=rewards.dtype)
    return (rewards * discounts).sum(dim=-1)


def w04_discounted_return_sum_everything(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    return (rewards * discounts).sum()


def w05_discounted_return_exp_log(rewards, gamma):
    T = rewards.shape[-1]
    t = torch.arange(T, dtype=rewards.dtype)
    discounts = torch.exp(t * math.log(gamma)) if gamma > 0 else t * 0.0
    return (rewards * discounts).sum(dim=-1)


def w06_discounted_return_mean(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    return (rewards * discounts).mean(dim=-1)


def r01_discounted_return_horner(rewards, gamma):
    G = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1] - 1, -1, -1):
        G = rewards[..., t] + gamma * G
    return G


def r02_discounted_return_einsum(rewards, gamma):
    T = rewards.shape[-1]
    steps = torch.full((T,), gamma, dtype=rewards.dtype)
    discounts = torch.cat([torch.ones(1, dtype=rewards.dtype), torch.cumprod(steps, 0)[:-1]])
    return torch.einsum("...t,t->...", rewards, discounts)


def w07_discounted_return_einsum_two_dims(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    return torch.einsum("bt,t->b", rewards, discounts)


_C10_DISCOUNT_CACHE = {}


def w08_discounted_return_cached_discounts(rewards, gamma):
    key = (rewards.shape[-1], rewards.dtype)
    if key not in _C10_DISCOUNT_CACHE:
        _C10_DISCOUNT_CACHE[key] = gamma ** torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return (rewards * _C10_DISCOUNT_CACHE[key]).sum(dim=-1)


ROWS += [
    _row(
        "discounted_return",
        "00",
        w01_discounted_return_numpy_weights,
        "Builds the discount weights with numpy in float64, so a float32 episode comes back as a float64 return.",
    ),
    _row(
        "discounted_return",
        "00",
        w02_discounted_return_powers_from_one,
        "Starts the powers at 1 instead of 0: r_0 is discounted by gamma, every reward one power too many.",
    ),
    _row(
        "discounted_return",
        "00",
        w03_discounted_return_reversed_powers,
        "Reverses the discounts: the last reward gets gamma^0 and the first gamma^(T-1).",
    ),
    _row(
        "discounted_return",
        "00",
        w04_discounted_return_sum_everything,
        "Sums over every axis, so a batch of episodes collapses to one scalar instead of one return per episode.",
    ),
    _row(
        "discounted_return",
        "00",
        w05_discounted_return_exp_log,
        (
            "Computes gamma^t as exp(t log gamma) and sets every weight to 0 when gamma = 0, so r_0 (weight "
            "0^0 = 1) is "
            "lost."
        ),
    ),
    _row(
        "discounted_return",
        "00",
        w06_discounted_return_mean,
        "Averages the discounted rewards over time (mean) instead of summing them.",
    ),
    _row("discounted_return", "00", r01_discounted_return_horner),
    _row("discounted_return", "00", r02_discounted_return_einsum),
    _row(
        "discounted_return",
        "00",
        w07_discounted_return_einsum_two_dims,
        "Writes the einsum for a (B, T) batch only ('bt,t->b'), so a single episode (T,) or a (B, G, T) batch fails.",
    ),
    _row(
        "discounted_return",
        "00",
        w08_discounted_return_cached_discounts,
        (
            "Caches the discount vector by (T, dtype) to avoid recomputing it, so a later call with another gamma "
            "and the same T reuses the first gamma's weights."
        ),
    ),
]

# ======================================================================================
# 00 reward_to_go
# ======================================================================================


def w09_reward_to_go_in_place(rewards, gamma):
    T = rewards.shape[-1]
    for t in range(T - 2, -1, -1):
        rewards[..., t] += gamma * rewards[..., t + 1]
    return rewards.clone()


def w10_reward_to_go_flip_cumsum_undivided(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    discounted = rewards * discounts
    return torch.flip(torch.cumsum(torch.flip(discounted, [-1]), dim=-1), [-1])


def w11_reward_to_go_forward_cumsum(rewards, gamma):
    out = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1]):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out


def w12_reward_to_go_last_twice(rewards, gamma):
    out = torch.empty_like(rewards)
    running = rewards[..., -1].clone()
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out


def w13_reward_to_go_divide_by_discount(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    tail = torch.flip(torch.cumsum(torch.flip(rewards * discounts, [-1]), dim=-1), [-1])
    return tail / discounts


def w14_reward_to_go_stack_unreversed(rewards, gamma):
    outs = []
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        outs.append(running)
    return torch.stack(outs, dim=-1)


def r03_reward_to_go_matrix(rewards, gamma):
    T = rewards.shape[-1]
    t = torch.arange(T)
    gap = (t[None, :] - t[:, None]).to(rewards.dtype)  # gap[t, k] = k - t
    weights = torch.where(
        gap >= 0,
        torch.tensor(gamma, dtype=rewards.dtype) ** gap.clamp(min=0),
        torch.zeros((), dtype=rewards.dtype),
    )
    return rewards @ weights.T


def r04_reward_to_go_list(rewards, gamma):
    outs = [None] * rewards.shape[-1]
    nxt = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1] - 1, -1, -1):
        nxt = rewards[..., t] + gamma * nxt
        outs[t] = nxt
    return torch.stack(outs, dim=-1)


def r05_reward_to_go_unfold(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    padded = F.pad(rewards, (0, T - 1))
    windows = padded.unfold(-1, T, 1)  # (..., T, T): windows[..., t, j] = r_{t+j}, 0 past the end
    return (windows * discounts).sum(dim=-1)


ROWS += [
    _row(
        "reward_to_go",
        "00",
        w09_reward_to_go_in_place,
        (
            "Accumulates the returns in place into the caller's rewards tensor (the values are right, but rewards is "
            "modified)."
        ),
    ),
    _row(
        "reward_to_go",
        "00",
        w10_reward_to_go_flip_cumsum_undivided,
        (
            "Vectorises with flip/cumsum of gamma^k r_k but never divides by gamma^t, so G_t comes out multiplied by "
            "gamma^t."
        ),
    ),
    _row(
        "reward_to_go",
        "00",
        w11_reward_to_go_forward_cumsum,
        "Runs the recursion forwards in time: each entry is the discounted sum of the rewards up to t, not from t on.",
    ),
    _row(
        "reward_to_go",
        "00",
        w12_reward_to_go_last_twice,
        "Initialises the running return with the last reward instead of 0, so the last reward is counted twice.",
    ),
    _row(
        "reward_to_go",
        "00",
        w13_reward_to_go_divide_by_discount,
        "Divides the tail sums of gamma^k r_k by gamma^t, which is 0/0 = NaN when gamma = 0.",
    ),
    _row(
        "reward_to_go",
        "00",
        w14_reward_to_go_stack_unreversed,
        "Stacks the returns in the order the backward loop made them, so time comes out reversed.",
    ),
    _row("reward_to_go", "00", r03_reward_to_go_matrix),
    _row("reward_to_go", "00", r04_reward_to_go_list),
    _row("reward_to_go", "00", r05_reward_to_go_unfold),
]

# ======================================================================================
# 01 sort_inclusion_ordering_reward
# ======================================================================================


def w15_sort_inclusion_ordering_reward_response_in_prompt(prompt, response):
    found = (response[..., :, None] == prompt[..., None, :]).any(dim=-1)
    inclusion = found.sum(dim=-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w16_sort_inclusion_ordering_reward_strict_order(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-1).sum(dim=-1)
    ordering = (response[..., :-1] < response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w17_sort_inclusion_ordering_reward_sets(prompt, response):
    p, r = torch.broadcast_tensors(prompt, response)
    T = p.shape[-1]
    flat_p, flat_r = p.reshape(-1, T), r.reshape(-1, T)
    scores = []
    for row_p, row_r in zip(flat_p.tolist(), flat_r.tolist()):
        inclusion = len(set(row_p) & set(row_r))
        ordering = sum(a <= b for a, b in zip(row_r[:-1], row_r[1:]))
        scores.append(float(inclusion + ordering))
    return torch.tensor(scores, dtype=torch.float32).reshape(p.shape[:-1])


def w18_sort_inclusion_ordering_reward_long(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-1).sum(dim=-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return inclusion + ordering


def w19_sort_inclusion_ordering_reward_count_all_matches(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.sum(dim=(-1, -2))
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w20_sort_inclusion_ordering_reward_same_position(prompt, response):
    inclusion = (prompt == response).sum(dim=-1)
    ordering = (torch.diff(response, dim=-1) >= 0).sum(dim=-1)
    return (inclusion + ordering).to(torch.float32)


def r06_sort_inclusion_ordering_reward_amax_diff(prompt, response):
    hit = (prompt.unsqueeze(-1) == response.unsqueeze(-2)).to(torch.int64)
    inclusion = hit.amax(dim=-1).sum(dim=-1)
    ordering = (torch.diff(response, dim=-1) >= 0).to(torch.int64).sum(dim=-1)
    return (inclusion + ordering).to(torch.float32)


def r07_sort_inclusion_ordering_reward_loops(prompt, response):
    p, r = torch.broadcast_tensors(prompt, response)
    T = p.shape[-1]
    scores = []
    for row_p, row_r in zip(p.reshape(-1, T).tolist(), r.reshape(-1, T).tolist()):
        inclusion = sum(1 for token in row_p if token in row_r)
        ordering = sum(1 for t in range(T - 1) if row_r[t] <= row_r[t + 1])
        scores.append(inclusion + ordering)
    return torch.tensor(scores, dtype=torch.float32).reshape(p.shape[:-1])


ROWS += [
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w15_sort_inclusion_ordering_reward_response_in_prompt,
        (
            "Counts the response tokens that appear in the prompt instead of the prompt tokens that appear in the "
            "response, so a repeated right token earns several points."
        ),
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w16_sort_inclusion_ordering_reward_strict_order,
        "Uses a strict < for the ordering points, so equal neighbours earn no point.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w17_sort_inclusion_ordering_reward_sets,
        (
            "Counts inclusion with a set intersection, so a token repeated in the prompt earns one point "
            "instead of one "
            "per occurrence."
        ),
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w18_sort_inclusion_ordering_reward_long,
        "Returns the integer (int64) sum instead of a float tensor.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w19_sort_inclusion_ordering_reward_count_all_matches,
        (
            "Sums every (prompt, response) match instead of asking whether each prompt token appears, so "
            "repeated tokens "
            "are counted several times."
        ),
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w20_sort_inclusion_ordering_reward_same_position,
        (
            "Gives an inclusion point only when the prompt token is at the same position in the response, not anywhere "
            "in it."
        ),
    ),
    _row("sort_inclusion_ordering_reward", "01", r06_sort_inclusion_ordering_reward_amax_diff),
    _row("sort_inclusion_ordering_reward", "01", r07_sort_inclusion_ordering_reward_loops),
]

# ======================================================================================
# 01 math_answer_reward
# ======================================================================================
#
# The students of this exercise share one reading of the rules, ``_c10_math_reward``;
# each wrong one changes one step of it, named by its keyword.


def _c10_normalise(text, strip_dollars=True, drop_separators=True):
    if strip_dollars:
        text = text.replace("\\$", "").replace("$", "")
    text = text.strip()
    while text and text[-1] in ".,;:!?)":
        if text[-1] == ")" and text.count(")") <= text.count("("):
            break
        text = text[:-1].rstrip()
    if drop_separators:
        text = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)
    return text


def _c10_last_boxed(text, first=False):
    starts = [m.start() for m in re.finditer(r"\\boxed\{", text)]
    if first:
        starts = starts[:1]
    for start in reversed(starts):
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


def _c10_math_reward(
    response_text,
    ground_truth,
    first_box=False,
    flat_box=False,
    first_statement=False,
    case_sensitive=False,
    cut_at_any_dot=False,
    keep_tags=False,
    strip_dollars=True,
    drop_separators=True,
    strings_only=False,
    truncate_numbers=False,
    unsigned_numbers=False,
    last_number_fallback=False,
):
    if flat_box:
        boxes = re.findall(r"\\boxed\{([^}]*)\}", response_text)
        answer = boxes[-1] if boxes else None
    else:
        answer = _c10_last_boxed(response_text, first=first_box)
    if answer is None:
        flags = 0 if case_sensitive else re.IGNORECASE
        pattern = r"\banswer(?:\s+is\b\s*:?|\s*:)"
        if case_sensitive:
            pattern = r"\b[Aa]nswer(?:\s+is\b\s*:?|\s*:)"
        statements = list(re.finditer(pattern, response_text, flags))
        if statements:
            chosen = statements[0] if first_statement else statements[-1]
            rest = response_text[chosen.end() :].lstrip()
            rest = rest.split("\n")[0] if keep_tags else re.split(r"[\n<]", rest)[0]
            if cut_at_any_dot:
                answer = re.split(r"[.!?]", rest)[0]
            else:
                answer = re.split(r"[.!?](?:\s|$)", rest)[0]
    if answer is None and last_number_fallback:
        numbers = re.findall(r"[+-]?\d+(?:\.\d+)?", response_text)
        answer = numbers[-1] if numbers else None
    if answer is None:
        return 0.0
    answer = _c10_normalise(answer, strip_dollars, drop_separators)
    truth = _c10_normalise(ground_truth, strip_dollars, drop_separators)
    if not answer:
        return 0.0
    number = r"(?:\d+(?:\.\d*)?|\.\d+)" if unsigned_numbers else r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
    if not strings_only and re.fullmatch(number, answer) and re.fullmatch(number, truth):
        if truncate_numbers:
            return float(int(float(answer)) == int(float(truth)))
        return float(float(answer) == float(truth))
    return float(answer == truth)


def w21_math_answer_reward_first_box(response_text, ground_truth):
    return _c10_math_reward(response_text, ground_truth, first_box=True)


def w22_math_answer_reward_flat_box_regex(response_text, ground_truth):
    return _c10_math_reward(response_text, ground_truth, flat_box=True)


def w23_math_answer_reward_first_statement(response_text, ground_truth):
    return _c10_math_reward(response_text, ground_truth, first_statement=True)


def w24_math_answer_reward_case_sensitive(response_text, ground_truth):
    return _c10_math_reward(response_text, ground_truth, case_sensitive=True)


def w25_math_answer_reward_cut_at_dot(response_text, ground_truth):
    return _c10_math_reward(response_text, ground_truth, cut_at_any_dot=True)


def w26_math_answer_reward_tags_kept(response_text, ground_truth):
    return _c10_math_reward(response_text, ground_truth, keep_tags=True)


def w27_math_answer_reward_dollars_kept(response_text, ground_truth):
    return _c10_math_reward(response_text, ground_truth, strip_dollars=False)


def w28_math_answer_reward_separators_kept(response_text, ground_truth):
    return _c10_math_reward(response_text, ground_truth, drop_separators=False)


def w29_math_answer_reward_strings_only(response_text, ground_truth):
    return _c10_math_reward(response_text, ground_truth, strings_only=True)


def w30_math_answer_reward_int_compare(response_text, ground_truth):
    return _c10_math_reward(response_text, ground_truth, truncate_numbers=True)


def w31_math_answer_reward_unsigned(response_text, ground_truth):
    return _c10_math_reward(response_text, ground_truth, unsigned_numbers=True)


def w32_math_answer_reward_last_number(response_text, ground_truth):
    return _c10_math_reward(response_text, ground_truth, last_number_fallback=True)


def r08_math_answer_reward_regex_first(response_text, ground_truth):
    def clean(s):
        s = re.sub(r"\\?\$", "", s).strip()
        while True:
            stripped = re.sub(r"[.,;:!?]\s*$", "", s)
            if stripped.endswith(")") and stripped.count(")") > stripped.count("("):
                stripped = stripped[:-1].rstrip()
            if stripped == s:
                break
            s = stripped
        return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", s)

    found = None
    positions = [m.start() for m in re.finditer(r"\\boxed\{", response_text)]
    while positions and found is None:
        start = positions.pop() + len("\\boxed{")
        depth = 1
        for end in range(start, len(response_text)):
            ch = response_text[end]
            depth += (ch == "{") - (ch == "}")
            if depth == 0:
                found = response_text[start:end]
                break
    if found is None:
        hits = [m.end() for m in re.finditer(r"\banswer(\s+is\b\s*:?|\s*:)", response_text, re.I)]
        if not hits:
            return 0.0
        tail = response_text[hits[-1] :].lstrip()
        tail = re.match(r"[^\n<]*", tail).group(0)
        found = re.split(r"[.!?](?=\s|$)", tail)[0]
    a, b = clean(found), clean(ground_truth)
    if a == "":
        return 0.0
    num = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
    if num.fullmatch(a) and num.fullmatch(b):
        return 1.0 if float(a) == float(b) else 0.0
    return 1.0 if a == b else 0.0


def _c10_stack_math(response_text, ground_truth, consuming_separators=False):
    def boxed(text):
        start = len(text)
        while True:
            start = text.rfind("\\boxed{", 0, start)
            if start < 0:
                return None
            stack = ["{"]
            i = start + len("\\boxed{")
            while i < len(text) and stack:
                if text[i] == "{":
                    stack.append("{")
                elif text[i] == "}":
                    stack.pop()
                i += 1
            if not stack:
                return text[start + len("\\boxed{") : i - 1]

    def normal(text):
        text = text.replace("\\$", "").replace("$", "").strip()
        changed = True
        while changed and text:
            changed = False
            if text[-1] in ".,;:!?":
                text, changed = text[:-1].rstrip(), True
            elif text[-1] == ")" and text.count(")") > text.count("("):
                text, changed = text[:-1].rstrip(), True
        if consuming_separators:
            return re.sub(r"(\d),(\d{3})(?!\d)", r"\1\2", text)
        return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)

    answer = boxed(response_text)
    if answer is None:
        matches = list(re.finditer(r"\banswer(?:\s+is\b\s*:?|\s*:)", response_text, flags=re.IGNORECASE))
        if not matches:
            return 0.0
        rest = response_text[matches[-1].end() :].lstrip()
        for stop in ("\n", "<"):
            rest = rest.split(stop, 1)[0]
        m = re.search(r"[.!?](\s|$)", rest)
        answer = rest[: m.start()] if m else rest
    a, t = normal(answer), normal(ground_truth)
    if not a:
        return 0.0
    plain = r"[+-]?(\d+(\.\d*)?|\.\d+)"
    if re.fullmatch(plain, a) and re.fullmatch(plain, t):
        return float(float(a) == float(t))
    return float(a == t)


def r09_math_answer_reward_stack(response_text, ground_truth):
    return _c10_stack_math(response_text, ground_truth)


def w33_math_answer_reward_consuming_separators(response_text, ground_truth):
    return _c10_stack_math(response_text, ground_truth, consuming_separators=True)


ROWS += [
    _row(
        "math_answer_reward",
        "01",
        w21_math_answer_reward_first_box,
        "Reads the first \\boxed{...} of the response instead of the last one.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w22_math_answer_reward_flat_box_regex,
        (
            "Finds the box with the regex \\\\boxed\\{([^}]*)\\}, which stops at the first closing brace, so a nested "
            "\\boxed{\\frac{1}{2}} yields \\frac{1."
        ),
    ),
    _row(
        "math_answer_reward",
        "01",
        w23_math_answer_reward_first_statement,
        "Takes the text after the first 'the answer is' / 'Answer:' instead of the last one.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w24_math_answer_reward_case_sensitive,
        (
            "Matches the statement case-sensitively (only 'answer' or 'Answer'), so 'ANSWER: 14' or 'The Answer Is 14' "
            "is not found."
        ),
    ),
    _row(
        "math_answer_reward",
        "01",
        w25_math_answer_reward_cut_at_dot,
        "Cuts the stated answer at the first '.', '!' or '?' even inside a number, so '2.50' is read as '2'.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w26_math_answer_reward_tags_kept,
        "Does not stop the stated answer at the next '<', so 'the answer is 14</answer>' reads '14</answer>'.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w27_math_answer_reward_dollars_kept,
        "Never strips dollar signs, so '$14$' does not equal '14'.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w28_math_answer_reward_separators_kept,
        "Never removes thousands separators, so '1,000' does not equal '1000'.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w29_math_answer_reward_strings_only,
        "Compares the normalised answers only as strings, so '14.0' does not equal '14'.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w30_math_answer_reward_int_compare,
        "Compares numbers after int(float(...)), so '2.5' equals '2' and '14.9' equals '14'.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w31_math_answer_reward_unsigned,
        "Its plain-number pattern has no sign, so signed answers are compared as strings: '-3.0' does not equal '-3'.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w32_math_answer_reward_last_number,
        "Falls back to the last number in the text when no answer is stated, so an unstated right number is paid.",
    ),
    _row("math_answer_reward", "01", r08_math_answer_reward_regex_first),
    _row("math_answer_reward", "01", r09_math_answer_reward_stack),
    _row(
        "math_answer_reward",
        "01",
        w33_math_answer_reward_consuming_separators,
        "Removes thousands separators with a regex that consumes the digit before each comma, so in '1,234,567' "
        "only every other separator goes ('1234,567').",
    ),
]

# ======================================================================================
# 02 gather_log_probs
# ======================================================================================


def w34_gather_log_probs_log_of_softmax(logits, tokens):
    probs = torch.softmax(logits, dim=-1)
    return torch.log(probs.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1))


def w35_gather_log_probs_shifted(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=-1)
    picked = logp_all[..., :-1, :].gather(-1, tokens[..., 1:].long().unsqueeze(-1)).squeeze(-1)
    first = torch.zeros_like(picked[..., :1])
    return torch.cat([first, picked], dim=-1)


def w36_gather_log_probs_normalise_over_time(logits, tokens):
    logp_all = logits - torch.logsumexp(logits, dim=-2, keepdim=True)
    return logp_all.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


def w37_gather_log_probs_cached_normaliser(logits, tokens):
    normaliser = torch.logsumexp(logits.detach(), dim=-1)
    picked = logits.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)
    return picked - normaliser


def w38_gather_log_probs_one_hot_inferred(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=-1)
    onehot = F.one_hot(tokens.long()).to(logits.dtype)
    return (onehot * logp_all).sum(dim=-1)


def w39_gather_log_probs_half(logits, tokens):
    logp_all = torch.log_softmax(logits.half().to(logits.dtype), dim=-1)
    return logp_all.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


def r10_gather_log_probs_logsumexp(logits, tokens):
    picked = torch.take_along_dim(logits, tokens.long()[..., None], dim=-1)[..., 0]
    return picked - torch.logsumexp(logits, dim=-1)


def r11_gather_log_probs_one_hot(logits, tokens):
    V = logits.shape[-1]
    onehot = F.one_hot(tokens.long(), num_classes=V).to(logits.dtype)
    return (onehot * F.log_softmax(logits, dim=-1)).sum(dim=-1)


ROWS += [
    _row(
        "gather_log_probs",
        "02",
        w34_gather_log_probs_log_of_softmax,
        "Takes log(softmax(logits)) instead of log_softmax, which underflows to -inf when the logits are far apart.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w35_gather_log_probs_shifted,
        (
            "Shifts by one position (logits[..., :-1] score tokens[..., 1:], with 0 for the first token) although the "
            "caller already did."
        ),
    ),
    _row(
        "gather_log_probs",
        "02",
        w36_gather_log_probs_normalise_over_time,
        "Normalises with logsumexp over the time axis (dim=-2) instead of the vocabulary.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w37_gather_log_probs_cached_normaliser,
        (
            "Computes the logsumexp normaliser from detached logits, so the values are right but the gradient "
            "misses the "
            "-softmax term."
        ),
    ),
    _row(
        "gather_log_probs",
        "02",
        w38_gather_log_probs_one_hot_inferred,
        (
            "Calls F.one_hot without num_classes, so the one-hot width is max(token) + 1 and it fails (shape mismatch) "
            "when the largest id is below V - 1."
        ),
    ),
    _row(
        "gather_log_probs",
        "02",
        w39_gather_log_probs_half,
        (
            "Rounds the logits through float16 before log_softmax, losing precision (and overflowing for logits past "
            "65504)."
        ),
    ),
    _row("gather_log_probs", "02", r10_gather_log_probs_logsumexp),
    _row("gather_log_probs", "02", r11_gather_log_probs_one_hot),
]

# ======================================================================================
# 02 reinforce_loss
# ======================================================================================


def w40_reinforce_loss_deltas_attached(logp, deltas, mask=None):
    per_token = -(deltas.unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    valid = mask.bool()
    total = torch.where(valid, per_token, torch.zeros_like(per_token)).sum()
    return total / valid.sum().clamp(min=1)


def w41_reinforce_loss_multiply_mask(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    m = mask.to(per_token.dtype)
    return (per_token * m).sum() / m.sum().clamp(min=1)


def w42_reinforce_loss_sequence_mean(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    valid = mask.bool()
    per_seq = torch.where(valid, per_token, torch.zeros_like(per_token)).sum(-1)
    return (per_seq / valid.sum(-1).clamp(min=1)).mean()


def w43_reinforce_loss_no_unsqueeze(logp, deltas, mask=None):
    per_token = -(deltas.detach() * logp)
    if mask is None:
        return per_token.mean()
    valid = mask.bool()
    total = torch.where(valid, per_token, torch.zeros_like(per_token)).sum()
    return total / valid.sum().clamp(min=1)


def w44_reinforce_loss_empty_nan(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    valid = mask.bool()
    return torch.where(valid, per_token, torch.zeros_like(per_token)).sum() / valid.sum()


def w45_reinforce_loss_ascent_sign(logp, deltas, mask=None):
    per_token = deltas.detach().unsqueeze(-1) * logp
    if mask is None:
        return per_token.mean()
    valid = mask.bool()
    total = torch.where(valid, per_token, torch.zeros_like(per_token)).sum()
    return total / valid.sum().clamp(min=1)


def w46_reinforce_loss_numel(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    valid = mask.bool()
    return torch.where(valid, per_token, torch.zeros_like(per_token)).sum() / valid.numel()


def w47_reinforce_loss_where_raw_mask(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    total = torch.where(mask, per_token, torch.zeros_like(per_token)).sum()
    return total / mask.sum().clamp(min=1)


def r12_reinforce_loss_masked_mean_helper(logp, deltas, mask=None):
    def masked_mean(x, m):
        m = torch.ones_like(x, dtype=torch.bool) if m is None else m.bool()
        return x.masked_fill(~m, 0.0).sum() / torch.clamp(m.sum(), min=1)

    weights = deltas.detach()[..., None].expand_as(logp)
    return masked_mean(-weights * logp, mask)


def r13_reinforce_loss_boolean_index(logp, deltas, mask=None):
    weighted = -logp * deltas.detach().unsqueeze(-1)
    if mask is None:
        mask = torch.ones(logp.shape, dtype=torch.bool)
    valid = mask.bool()
    n = int(valid.sum())
    if n == 0:
        return torch.where(valid, weighted, torch.zeros_like(weighted)).sum()
    return weighted[valid].sum() / n


ROWS += [
    _row(
        "reinforce_loss",
        "02",
        w40_reinforce_loss_deltas_attached,
        "Does not detach deltas, so a gradient flows into the weights.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w41_reinforce_loss_multiply_mask,
        (
            "Multiplies by the mask instead of selecting with torch.where, so a NaN or inf in the padding "
            "makes the loss "
            "NaN."
        ),
    ),
    _row(
        "reinforce_loss",
        "02",
        w42_reinforce_loss_sequence_mean,
        (
            "Averages each response over its own tokens, then over responses (a sequence mean), instead of one "
            "mean over "
            "all valid tokens."
        ),
    ),
    _row(
        "reinforce_loss",
        "02",
        w43_reinforce_loss_no_unsqueeze,
        (
            "Multiplies deltas by logp without a trailing axis, so the weights broadcast along the token axis (wrong "
            "when B == T, a crash otherwise)."
        ),
    ),
    _row(
        "reinforce_loss",
        "02",
        w44_reinforce_loss_empty_nan,
        "Divides by the number of valid tokens without clamping it, so a batch of padding only gives 0/0 = NaN.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w45_reinforce_loss_ascent_sign,
        "Drops the minus sign: returns the mean of deltas * logp (the objective to climb) instead of the loss.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w46_reinforce_loss_numel,
        "Divides the sum over valid tokens by every token of the batch (numel), padding included.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w47_reinforce_loss_where_raw_mask,
        (
            "Passes the mask to torch.where as it is, which fails for a float or 0/1 integer mask (only a bool mask "
            "works)."
        ),
    ),
    _row("reinforce_loss", "02", r12_reinforce_loss_masked_mean_helper),
    _row("reinforce_loss", "02", r13_reinforce_loss_boolean_index),
]

# ======================================================================================
# 02 mc_policy_gradient
# ======================================================================================


def w48_mc_policy_gradient_loss_sign(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return -(reward_per_action[actions, None] * score).mean(dim=0)


def w49_mc_policy_gradient_no_pi(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype)
    return (reward_per_action[actions, None] * score).mean(dim=0)


def w50_mc_policy_gradient_no_generator(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).mean(dim=0)


def w51_mc_policy_gradient_bessel(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).sum(dim=0) / max(n_samples - 1, 1)


def w52_mc_policy_gradient_without_replacement(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=False, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).mean(dim=0)


def r14_mc_policy_gradient_autograd(logits, reward_per_action, n_samples, generator=None):
    actions = torch.multinomial(torch.softmax(logits, dim=-1), n_samples, replacement=True, generator=generator)
    x = logits.detach().clone().requires_grad_(True)
    objective = (reward_per_action[actions] * torch.log_softmax(x, -1)[actions]).mean()
    (grad,) = torch.autograd.grad(objective, x)
    return grad


def r15_mc_policy_gradient_bincount(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    r = reward_per_action[actions].to(logits.dtype)
    per_action = torch.bincount(actions, weights=r.double(), minlength=logits.shape[0])
    return per_action.to(logits.dtype) / n_samples - pi * r.mean()


def w53_mc_policy_gradient_mean_without_dim(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).mean()


def w54_mc_policy_gradient_autograd_sum(logits, reward_per_action, n_samples, generator=None):
    actions = torch.multinomial(torch.softmax(logits, dim=-1), n_samples, replacement=True, generator=generator)
    x = logits.detach().clone().requires_grad_(True)
    objective = (reward_per_action[actions] * torch.log_softmax(x, -1)[actions]).sum()
    (grad,) = torch.autograd.grad(objective, x)
    return grad


ROWS += [
    _row(
        "mc_policy_gradient",
        "02",
        w48_mc_policy_gradient_loss_sign,
        "Returns minus the estimate (the gradient of a loss to descend) instead of the ascent direction.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w49_mc_policy_gradient_no_pi,
        (
            "Uses onehot(a) as the score and forgets to subtract pi, so the estimate is biased (nonzero when every "
            "reward is equal)."
        ),
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w50_mc_policy_gradient_no_generator,
        "Samples without passing the generator, so two calls with the same seed draw different actions.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w51_mc_policy_gradient_bessel,
        "Divides the sum by n - 1 (a variance habit) instead of averaging over the n samples.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w52_mc_policy_gradient_without_replacement,
        "Samples with replacement=False, which is not the prescribed call (and fails when n_samples exceeds V).",
    ),
    _row("mc_policy_gradient", "02", r14_mc_policy_gradient_autograd),
    _row("mc_policy_gradient", "02", r15_mc_policy_gradient_bincount),
    _row(
        "mc_policy_gradient",
        "02",
        w53_mc_policy_gradient_mean_without_dim,
        (
            "Calls .mean() without dim=0, averaging over samples and actions together, so it returns one number "
            "instead of a (V,) vector."
        ),
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w54_mc_policy_gradient_autograd_sum,
        (
            "Lets autograd differentiate the sum of r * log pi over the samples instead of their mean, so the "
            "estimate is n times too large."
        ),
    ),
]

# ======================================================================================
# 03 compute_deltas
# ======================================================================================


def w55_compute_deltas_population_std(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True, unbiased=False) + eps)


def w56_compute_deltas_eps_in_sqrt(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / torch.sqrt(rewards.var(dim=-1, keepdim=True) + eps)


def w57_compute_deltas_batch_mean(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean()
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def w58_compute_deltas_returns_input(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def w59_compute_deltas_zero_std_test(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True)
    centred = torch.where(std == 0, torch.zeros_like(centred), centred)
    if mode == "centered_rewards":
        return centred
    return centred / (std + eps)


def w60_compute_deltas_single_raw(rewards, mode, eps=1e-6):
    if mode == "rewards" or rewards.shape[-1] == 1:
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards":
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def w61_compute_deltas_in_place(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    G = rewards.shape[-1]
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True) if G > 1 else None
    rewards -= rewards.mean(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(rewards), rewards)
    if mode == "centered_rewards" or G == 1:
        return centred
    return centred / (std + eps)


def w62_compute_deltas_normalised_uncentred(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    scaled = rewards / (rewards.std(dim=-1, keepdim=True) + eps)
    return torch.where(all_equal, torch.zeros_like(scaled), scaled)


def r16_compute_deltas_rowwise(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    out = torch.zeros_like(rewards)
    if rewards.shape[-1] == 1:
        return out
    mean = rewards.mean(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True)
    for b in range(rewards.shape[0]):
        row = rewards[b]
        if bool((row == row[0]).all()):
            continue
        centred = row - mean[b]
        if mode == "normalized_rewards":
            centred = centred / (std[b] + eps)
        out[b] = centred
    return out


def r17_compute_deltas_var_sqrt(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards + 0
    G = rewards.shape[-1]
    spread = rewards.amax(dim=-1, keepdim=True) - rewards.amin(dim=-1, keepdim=True)
    degenerate = spread == 0
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    centred = centred.masked_fill(degenerate, 0.0)
    if mode == "centered_rewards" or G == 1:
        return centred
    std = rewards.var(dim=-1, keepdim=True).sqrt()
    return centred / (std + eps)


ROWS += [
    _row(
        "compute_deltas",
        "03",
        w55_compute_deltas_population_std,
        "Uses the population std (unbiased=False, numpy's default) instead of Bessel's correction.",
    ),
    _row(
        "compute_deltas",
        "03",
        w56_compute_deltas_eps_in_sqrt,
        "Adds eps to the variance inside the square root instead of to the std.",
    ),
    _row(
        "compute_deltas",
        "03",
        w57_compute_deltas_batch_mean,
        "Subtracts the mean of the whole batch instead of each prompt's group mean.",
    ),
    _row(
        "compute_deltas",
        "03",
        w58_compute_deltas_returns_input,
        "In the 'rewards' mode returns the input tensor itself instead of a new tensor.",
    ),
    _row(
        "compute_deltas",
        "03",
        w59_compute_deltas_zero_std_test,
        (
            "Detects all-equal groups by std == 0, which rounding misses (torch.std of a float32 group of seven 0.7s "
            "can be 6e-8), so such groups get nonzero deltas."
        ),
    ),
    _row(
        "compute_deltas",
        "03",
        w60_compute_deltas_single_raw,
        "Returns the raw rewards for groups of one (G == 1) in the centred and normalised modes instead of zeros.",
    ),
    _row(
        "compute_deltas",
        "03",
        w61_compute_deltas_in_place,
        "Centres the rewards in place (rewards -= mean), modifying the caller's tensor.",
    ),
    _row(
        "compute_deltas",
        "03",
        w62_compute_deltas_normalised_uncentred,
        "In the normalised mode divides the raw rewards by the std, forgetting to centre them first.",
    ),
    _row("compute_deltas", "03", r16_compute_deltas_rowwise),
    _row("compute_deltas", "03", r17_compute_deltas_var_sqrt),
]

# ======================================================================================
# 03 gradient_variance
# ======================================================================================


def w63_gradient_variance_population(grad_samples):
    return float(np.var(grad_samples.numpy(), axis=0).sum())


def w64_gradient_variance_over_columns(grad_samples):
    return float(grad_samples.var(dim=1).sum())


def w65_gradient_variance_mean_over_coordinates(grad_samples):
    return float(grad_samples.var(dim=0).mean())


def w66_gradient_variance_tensor(grad_samples):
    return grad_samples.var(dim=0).sum()


def w67_gradient_variance_of_the_mean(grad_samples):
    N = grad_samples.shape[0]
    return float(grad_samples.var(dim=0).sum() / N)


def w68_gradient_variance_cov_rows(grad_samples):
    return float(torch.atleast_2d(torch.cov(grad_samples)).trace())


def r18_gradient_variance_cov(grad_samples):
    cov = torch.atleast_2d(torch.cov(grad_samples.T.double()))
    return float(torch.diagonal(cov).sum())


def r19_gradient_variance_columns(grad_samples):
    total = 0.0
    for p in range(grad_samples.shape[1]):
        column = grad_samples[:, p].double()
        total += float(((column - column.mean()) ** 2).sum()) / (len(column) - 1)
    return total


ROWS += [
    _row(
        "gradient_variance",
        "03",
        w63_gradient_variance_population,
        "Uses numpy.var's default, dividing by N instead of N - 1 (no Bessel correction).",
    ),
    _row(
        "gradient_variance",
        "03",
        w64_gradient_variance_over_columns,
        "Takes each variance over dim=1 (across coordinates of one sample) instead of over the samples.",
    ),
    _row(
        "gradient_variance",
        "03",
        w65_gradient_variance_mean_over_coordinates,
        "Averages the P coordinate variances instead of summing them.",
    ),
    _row(
        "gradient_variance",
        "03",
        w66_gradient_variance_tensor,
        "Returns a 0-dim tensor instead of a Python float.",
    ),
    _row(
        "gradient_variance",
        "03",
        w67_gradient_variance_of_the_mean,
        "Divides by N again: returns the variance of the mean of the estimates, not of one estimate.",
    ),
    _row(
        "gradient_variance",
        "03",
        w68_gradient_variance_cov_rows,
        (
            "Passes grad_samples to torch.cov untransposed, so the rows are taken as variables and the columns as "
            "observations."
        ),
    ),
    _row("gradient_variance", "03", r18_gradient_variance_cov),
    _row("gradient_variance", "03", r19_gradient_variance_columns),
]

# ======================================================================================
# 04 gae_table
# ======================================================================================


def w69_gae_table_bootstrap_through_terminal():
    deltas = [0.35, -0.6, 1.9, -0.55, 1.4]
    advantages = [0.903, 0.768, 1.9, 0.458, 1.4]
    return deltas, advantages


def w70_gae_table_recursion_not_cut():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.607, 0.357, 1.33, 0.458, 1.4]
    return deltas, advantages


def w71_gae_table_lambda_forgotten():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.62, 0.3, 1.0, 0.71, 1.4]
    return deltas, advantages


def w72_gae_table_last_step_terminal():
    deltas = [0.35, -0.6, 1.0, -0.55, 0.5]
    advantages = [0.436, 0.12, 1.0, -0.19, 0.5]
    return deltas, advantages


def w73_gae_table_listed_bottom_up():
    deltas = [1.4, -0.55, 1.0, -0.6, 0.35]
    advantages = [1.4, 0.458, 1.0, 0.12, 0.436]
    return deltas, advantages


def r20_gae_table_more_decimals():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.43568, 0.1196, 1.0, 0.458, 1.4]
    return deltas, advantages


def r21_gae_table_fractions():
    deltas = [7 / 20, -3 / 5, 1.0, -11 / 20, 7 / 5]
    advantages = [0.4357, 0.1196, 1.0, 0.4580, 1.4000]
    return deltas, advantages


def w74_gae_table_two_decimals():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.44, 0.12, 1.0, 0.46, 1.4]
    return deltas, advantages


def w75_gae_table_gamma_missing_in_delta():
    deltas = [0.5, -0.5, 1.0, -0.5, 1.5]
    advantages = [0.658, 0.22, 1.0, 0.58, 1.5]
    return deltas, advantages


ROWS += [
    _row(
        "gae_table",
        "04",
        w69_gae_table_bootstrap_through_terminal,
        (
            "Bootstraps V(s_3) into delta_2 at the terminal step (only the recursion is cut there), so delta_2 "
            "= 1.9 and "
            "the advantages before it grow."
        ),
    ),
    _row(
        "gae_table",
        "04",
        w70_gae_table_recursion_not_cut,
        (
            "Cuts the bootstrap in delta_2 but not the recursion: A_2 carries gamma*lambda*A_3 across the episode "
            "boundary."
        ),
    ),
    _row(
        "gae_table",
        "04",
        w71_gae_table_lambda_forgotten,
        "Runs the advantage recursion with gamma alone instead of gamma*lambda.",
    ),
    _row(
        "gae_table",
        "04",
        w72_gae_table_last_step_terminal,
        "Treats the end of the rollout as terminal and uses 0 instead of last_values for V(s_5).",
    ),
    _row(
        "gae_table",
        "04",
        w73_gae_table_listed_bottom_up,
        "Lists both columns in the order it computed the advantages (t = 4 down to 0) instead of t = 0 to 4.",
    ),
    _row("gae_table", "04", r20_gae_table_more_decimals),
    _row("gae_table", "04", r21_gae_table_fractions),
    _row(
        "gae_table",
        "04",
        w74_gae_table_two_decimals,
        "Rounds every entry to two decimals (0.44, 0.46) although the check allows only 0.001 per entry.",
    ),
    _row(
        "gae_table",
        "04",
        w75_gae_table_gamma_missing_in_delta,
        (
            "Forgets gamma in the TD residuals (delta_t = r_t + V(s_{t+1}) - V(s_t)) while using gamma*lambda in "
            "the recursion."
        ),
    ),
]

# ======================================================================================
# 04 compute_gae
# ======================================================================================


def w76_compute_gae_one_minus_bool(rewards, values, dones, last_values, gamma, lam):
    not_done = (1 - dones).to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * not_done * next_values - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * not_done[..., t] * running
        advantages[..., t] = running
    return advantages, advantages + values


def w77_compute_gae_recursion_not_cut(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1.0 - d) * next_values - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * running
        advantages[..., t] = running
    return advantages, advantages + values


def w78_compute_gae_cleanrl_next_done(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    T = rewards.shape[-1]
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(T)):
        if t == T - 1:
            nextnonterminal = 1.0 - d[..., -1]
            nextvalues = last_values
        else:
            nextnonterminal = 1.0 - d[..., t + 1]
            nextvalues = values[..., t + 1]
        delta = rewards[..., t] + gamma * nextvalues * nextnonterminal - values[..., t]
        lastgaelam = delta + gamma * lam * nextnonterminal * lastgaelam
        advantages[..., t] = lastgaelam
    return advantages, advantages + values


def w79_compute_gae_mc_returns(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1.0 - d) * next_values - values
    advantages = torch.zeros_like(deltas)
    returns = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    ret = last_values.clone()
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        ret = rewards[..., t] + gamma * (1.0 - d[..., t]) * ret
        advantages[..., t] = running
        returns[..., t] = ret
    return advantages, returns


def w80_compute_gae_last_step_always_bootstraps(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    cut = torch.cat([d[..., :-1], torch.zeros_like(d[..., :1])], dim=-1)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1.0 - cut) * next_values - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + values


def w81_compute_gae_rewards_in_place(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards
    deltas += gamma * (1.0 - d) * next_values - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + values


def w82_compute_gae_discount_matrix(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1.0 - d) * next_values - values
    T = rewards.shape[-1]
    t = torch.arange(T)
    gap = (t[None, :] - t[:, None]).to(rewards.dtype)
    weights = torch.where(
        gap >= 0,
        torch.tensor(gamma * lam, dtype=rewards.dtype) ** gap.clamp(min=0),
        torch.zeros((), dtype=rewards.dtype),
    )
    advantages = deltas @ weights.T
    return advantages, advantages + values


def w83_compute_gae_returns_next_values(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1.0 - d) * next_values - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + next_values


def r22_compute_gae_where_stack(rewards, values, dones, last_values, gamma, lam):
    done = dones.bool()
    T = rewards.shape[-1]
    next_value = last_values
    next_adv = torch.zeros_like(last_values)
    out = []
    for t in range(T - 1, -1, -1):
        bootstrap = torch.where(done[..., t], torch.zeros_like(next_value), next_value)
        delta = rewards[..., t] + gamma * bootstrap - values[..., t]
        carried = torch.where(done[..., t], torch.zeros_like(next_adv), next_adv)
        next_adv = delta + gamma * lam * carried
        out.append(next_adv)
        next_value = values[..., t]
    advantages = torch.stack(out[::-1], dim=-1)
    return advantages, values + advantages


def r23_compute_gae_flat_rows(rewards, values, dones, last_values, gamma, lam):
    shape = rewards.shape
    T = shape[-1]
    r = rewards.reshape(-1, T)
    v = values.reshape(-1, T)
    keep = 1.0 - dones.reshape(-1, T).to(rewards.dtype)
    v_next = torch.cat([v[:, 1:], last_values.reshape(-1, 1)], dim=1)
    delta = r + gamma * keep * v_next - v
    adv = delta.clone()
    for t in range(T - 2, -1, -1):
        adv[:, t] = delta[:, t] + gamma * lam * keep[:, t] * adv[:, t + 1]
    adv = adv.reshape(shape)
    return adv, adv + values


def w84_compute_gae_float32_work(rewards, values, dones, last_values, gamma, lam):
    r, v, lv = rewards.float(), values.float(), last_values.float()
    d = dones.float()
    next_values = torch.cat([v[..., 1:], lv.unsqueeze(-1)], dim=-1)
    deltas = r + gamma * (1.0 - d) * next_values - v
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(r.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + v


ROWS += [
    _row(
        "compute_gae",
        "04",
        w76_compute_gae_one_minus_bool,
        (
            "Writes 1 - dones before converting the flags, which raises for bool dones (torch forbids '-' on bool "
            "tensors)."
        ),
    ),
    _row(
        "compute_gae",
        "04",
        w77_compute_gae_recursion_not_cut,
        (
            "Cuts the bootstrap in delta at a terminal step but not the advantage recursion, which carries A_{t+1} "
            "across episodes."
        ),
    ),
    _row(
        "compute_gae",
        "04",
        w78_compute_gae_cleanrl_next_done,
        (
            "Ports CleanRL's loop, where done means the next step starts an episode: uses dones[t + 1] instead of "
            "dones[t] to cut step t."
        ),
    ),
    _row(
        "compute_gae",
        "04",
        w79_compute_gae_mc_returns,
        "Returns the bootstrapped Monte-Carlo discounted return as the critic's target instead of advantages + values.",
    ),
    _row(
        "compute_gae",
        "04",
        w80_compute_gae_last_step_always_bootstraps,
        "Never cuts the bootstrap at the last step: last_values is added even where dones[..., -1] is true.",
    ),
    _row(
        "compute_gae",
        "04",
        w81_compute_gae_rewards_in_place,
        (
            "Builds the deltas in place in the rewards tensor (deltas = rewards; deltas += ...), modifying the "
            "caller's "
            "rewards."
        ),
    ),
    _row(
        "compute_gae",
        "04",
        w82_compute_gae_discount_matrix,
        (
            "Vectorises the recursion with a (gamma*lambda)^(k-t) matrix that ignores the done flags, so "
            "advantages flow "
            "across episode boundaries."
        ),
    ),
    _row(
        "compute_gae",
        "04",
        w83_compute_gae_returns_next_values,
        "Returns advantages + V(s_{t+1}) as the returns instead of advantages + V(s_t).",
    ),
    _row("compute_gae", "04", r22_compute_gae_where_stack),
    _row("compute_gae", "04", r23_compute_gae_flat_rows),
    _row(
        "compute_gae",
        "04",
        w84_compute_gae_float32_work,
        "Does the work in float32 (`.float()` on every input), so float64 rollouts come back as float32, rounded.",
    ),
]

# ======================================================================================
# 04 td_residuals
# ======================================================================================


def w85_td_residuals_no_dones(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    return rewards + gamma * next_values - values


def w86_td_residuals_roll(rewards, values, dones, last_values, gamma):
    next_values = torch.roll(values, shifts=-1, dims=-1)
    return rewards + gamma * (1.0 - dones.to(rewards.dtype)) * next_values - values


def w87_td_residuals_sign(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    return values - (rewards + gamma * (1.0 - dones.to(rewards.dtype)) * next_values)


def w88_td_residuals_cut_current(rewards, values, dones, last_values, gamma):
    keep = 1.0 - dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    return rewards + gamma * next_values - keep * values


def w89_td_residuals_bitwise_not(rewards, values, dones, last_values, gamma):
    keep = (~dones).to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    return rewards + gamma * keep * next_values - values


def r24_td_residuals_where(rewards, values, dones, last_values, gamma):
    nxt = torch.cat([values[..., 1:], last_values[..., None]], dim=-1)
    nxt = torch.where(dones.bool(), torch.zeros_like(nxt), nxt)
    return rewards - values + gamma * nxt


def r25_td_residuals_pad(rewards, values, dones, last_values, gamma):
    shifted = torch.cat([values, last_values.unsqueeze(-1)], dim=-1)[..., 1:]
    alive = dones.to(torch.bool).logical_not().to(rewards.dtype)
    return torch.addcmul(rewards - values, alive, shifted, value=gamma)


def w90_td_residuals_repeat_last_value(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], values[..., -1:]], dim=-1)
    return rewards + gamma * (1.0 - dones.to(rewards.dtype)) * next_values - values


ROWS += [
    _row(
        "td_residuals",
        "04",
        w85_td_residuals_no_dones,
        "Ignores the done flags: bootstraps V(s_{t+1}) even at terminal steps.",
    ),
    _row(
        "td_residuals",
        "04",
        w86_td_residuals_roll,
        (
            "Gets V(s_{t+1}) with torch.roll, which wraps around: the last step bootstraps from values[..., 0] instead "
            "of last_values."
        ),
    ),
    _row(
        "td_residuals",
        "04",
        w87_td_residuals_sign,
        "Returns V(s_t) - (r_t + gamma V(s_{t+1})), the residual with the opposite sign.",
    ),
    _row(
        "td_residuals",
        "04",
        w88_td_residuals_cut_current,
        "Applies (1 - done) to the current value V(s_t) instead of the bootstrapped V(s_{t+1}).",
    ),
    _row(
        "td_residuals",
        "04",
        w89_td_residuals_bitwise_not,
        (
            "Negates the flags with ~dones, which is right for bool flags but gives -1/-2 for 0/1 integers and "
            "fails for "
            "floats."
        ),
    ),
    _row("td_residuals", "04", r24_td_residuals_where),
    _row("td_residuals", "04", r25_td_residuals_pad),
    _row(
        "td_residuals",
        "04",
        w90_td_residuals_repeat_last_value,
        (
            "Pads V(s_{t+1}) with the last value V(s_{T-1}) instead of last_values, so the last step bootstraps "
            "from its own state."
        ),
    ),
]

# ======================================================================================
# 05 clipped_surrogate_loss
# ======================================================================================


def _c10_surrogate(
    logp,
    logp_old,
    adv,
    clip_eps,
    mask=None,
    clip_eps_high=None,
    *,
    use_high=True,
    quotient=False,
    multiply_mask=False,
    max_not_min=False,
    attach_adv=False,
    attach_old=False,
    symmetric_fraction=False,
    k1_kl=False,
    tensors=False,
    clamp_count=True,
    swapped_binding=False,
    clip_product=False,
):
    high = clip_eps if (clip_eps_high is None or not use_high) else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    old = logp_old if attach_old else logp_old.detach()
    a = adv if attach_adv else adv.detach()
    if not multiply_mask:
        logp = torch.where(valid, logp, zero)
        old = torch.where(valid, old, zero)
        a = torch.where(valid, a, zero)
    ratio = logp / old if quotient else torch.exp(logp - old)
    if clip_product:
        per = -torch.minimum(ratio * a, torch.clamp(ratio * a, 1.0 - clip_eps, 1.0 + high))
    else:
        clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
        pick = torch.maximum if max_not_min else torch.minimum
        per = -pick(ratio * a, clipped * a)
    n_valid = valid.sum().clamp(min=1) if clamp_count else valid.sum()
    if multiply_mask:
        loss = (per * valid.to(per.dtype)).sum() / n_valid
    else:
        loss = torch.where(valid, per, zero).sum() / n_valid
    with torch.no_grad():
        log_ratio = logp - old
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        outside = (ratio - 1.0).abs() > clip_eps if symmetric_fraction else low | above
        if swapped_binding:
            binding = (above & (a < 0)) | (low & (a > 0))
        else:
            binding = (above & (a > 0)) | (low & (a < 0))
        kl = -log_ratio if k1_kl else (ratio - 1.0) - log_ratio
        n = n_valid
        info = {
            "clip_fraction": (outside & valid).sum() / n,
            "clip_active_fraction": (binding & valid).sum() / n,
            "approx_kl": torch.where(valid, kl, zero).sum() / n,
        }
        if not tensors:
            info = {key: float(value) for key, value in info.items()}
    return loss, info


def w91_clipped_surrogate_loss_no_high(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _c10_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, use_high=False)


def w92_clipped_surrogate_loss_quotient(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _c10_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, quotient=True)


def w93_clipped_surrogate_loss_multiply_mask(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _c10_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, multiply_mask=True)


def w94_clipped_surrogate_loss_max(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _c10_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, max_not_min=True)


def w95_clipped_surrogate_loss_adv_attached(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _c10_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, attach_adv=True)


def w96_clipped_surrogate_loss_old_attached(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _c10_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, attach_old=True)


def w97_clipped_surrogate_loss_cleanrl_fraction(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _c10_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, symmetric_fraction=True)


def w98_clipped_surrogate_loss_k1_kl(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _c10_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, k1_kl=True)


def w99_clipped_surrogate_loss_tensor_info(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _c10_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, tensors=True)


def w100_clipped_surrogate_loss_empty_nan(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _c10_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, clamp_count=False)


def w101_clipped_surrogate_loss_binding_swapped(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _c10_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, swapped_binding=True)


def w102_clipped_surrogate_loss_clip_product(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _c10_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, clip_product=True)


def r26_clipped_surrogate_loss_cleanrl_max(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    eps_high = clip_eps_high if clip_eps_high is not None else clip_eps
    keep = torch.ones(logp.shape, dtype=torch.bool) if mask is None else mask != 0
    logratio = torch.where(keep, logp - logp_old.detach(), torch.zeros_like(logp))
    a = torch.where(keep, adv.detach(), torch.zeros_like(logp))
    ratio = logratio.exp()
    pg1 = -a * ratio
    pg2 = -a * ratio.clamp(1 - clip_eps, 1 + eps_high)
    per = torch.max(pg1, pg2).masked_fill(~keep, 0.0)
    count = max(int(keep.sum()), 1)
    loss = per.sum() / count
    with torch.no_grad():
        outside = ((ratio < 1 - clip_eps) | (ratio > 1 + eps_high)) & keep
        binds = (((ratio > 1 + eps_high) & (a > 0)) | ((ratio < 1 - clip_eps) & (a < 0))) & keep
        kl = ((ratio - 1) - logratio).masked_fill(~keep, 0.0)
        info = {
            "clip_fraction": outside.sum().item() / count,
            "clip_active_fraction": binds.sum().item() / count,
            "approx_kl": kl.sum().item() / count,
        }
    return loss, info


def r27_clipped_surrogate_loss_index(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    hi = 1.0 + (clip_eps if clip_eps_high is None else clip_eps_high)
    lo = 1.0 - clip_eps
    if mask is None:
        sel = torch.ones_like(logp, dtype=torch.bool)
    else:
        sel = mask.bool()
    if not bool(sel.any()):
        empty = {"clip_fraction": 0.0, "clip_active_fraction": 0.0, "approx_kl": 0.0}
        return torch.where(sel, logp, torch.zeros_like(logp)).sum(), empty
    lp = logp[sel]
    diff = lp - logp_old.detach()[sel]
    A = adv.detach()[sel]
    ratio = torch.exp(diff)
    surrogate = torch.minimum(ratio * A, torch.clamp(ratio, lo, hi) * A)
    loss = -surrogate.mean()
    with torch.no_grad():
        info = {
            "clip_fraction": ((ratio < lo) | (ratio > hi)).double().mean().item(),
            "clip_active_fraction": (((ratio > hi) & (A > 0)) | ((ratio < lo) & (A < 0))).double().mean().item(),
            "approx_kl": (torch.expm1(diff) - diff).mean().item(),
        }
    return loss, info


def w103_clipped_surrogate_loss_clamp_in_place(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    logp_v = torch.where(valid, logp, zero)
    old = torch.where(valid, logp_old.detach(), zero)
    a = torch.where(valid, adv.detach(), zero)
    ratio = torch.exp(logp_v - old)
    with torch.no_grad():
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binding = (above & (a > 0)) | (low & (a < 0))
        n = valid.sum().clamp(min=1).item()
        info = {
            "clip_fraction": ((low | above) & valid).sum().item() / n,
            "clip_active_fraction": (binding & valid).sum().item() / n,
            "approx_kl": torch.where(valid, (ratio - 1.0) - (logp_v - old), zero).sum().item() / n,
        }
    clipped = ratio.clamp_(1.0 - clip_eps, 1.0 + high)
    per_element = -torch.minimum(ratio * a, clipped * a)
    loss = torch.where(valid, per_element, zero).sum() / valid.sum().clamp(min=1)
    return loss, info


ROWS += [
    _row(
        "clipped_surrogate_loss",
        "05",
        w91_clipped_surrogate_loss_no_high,
        (
            "Ignores clip_eps_high: clips to [1 - clip_eps, 1 + clip_eps] even when a larger upper range is "
            "given (loss "
            "and diagnostics)."
        ),
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w92_clipped_surrogate_loss_quotient,
        "Takes the ratio as a quotient of log-probs, logp / logp_old, instead of exp(logp - logp_old).",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w93_clipped_surrogate_loss_multiply_mask,
        "Multiplies by the mask instead of selecting, so NaN in the padding (or -inf in logp_old's) makes it NaN.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w94_clipped_surrogate_loss_max,
        "Takes the max of the clipped and unclipped objectives instead of the min (the optimistic bound).",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w95_clipped_surrogate_loss_adv_attached,
        "Does not detach adv, so a gradient flows into the advantages.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w96_clipped_surrogate_loss_old_attached,
        "Does not detach logp_old, so a gradient flows into the old log-probs.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w97_clipped_surrogate_loss_cleanrl_fraction,
        "Computes clip_fraction as CleanRL writes it, |ratio - 1| > clip_eps, which ignores clip_eps_high.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w98_clipped_surrogate_loss_k1_kl,
        "Reports approx_kl as the mean of -log r (the k1 estimator of old CleanRL) instead of (r - 1) - log r.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w99_clipped_surrogate_loss_tensor_info,
        "Returns the three diagnostics as 0-dim tensors instead of Python floats.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w100_clipped_surrogate_loss_empty_nan,
        "Divides by the number of valid entries without clamping it, so an empty mask gives NaN instead of 0.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w101_clipped_surrogate_loss_binding_swapped,
        "Swaps the sides of clip_active_fraction: counts above the range with A < 0 and below it with A > 0.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w102_clipped_surrogate_loss_clip_product,
        "Clips the product ratio * A to [1 - eps, 1 + eps] instead of clipping the ratio before multiplying by A.",
    ),
    _row("clipped_surrogate_loss", "05", r26_clipped_surrogate_loss_cleanrl_max),
    _row("clipped_surrogate_loss", "05", r27_clipped_surrogate_loss_index),
    _row(
        "clipped_surrogate_loss",
        "05",
        w103_clipped_surrogate_loss_clamp_in_place,
        (
            "Clamps the ratio in place (ratio.clamp_), so the unclipped term is clipped too and backward fails: "
            "exp's saved output was modified."
        ),
    ),
]

# ======================================================================================
# 05 value_loss
# ======================================================================================


def _c10_value(
    values,
    returns,
    values_old=None,
    clip_eps=None,
    mask=None,
    *,
    half=0.5,
    attach_returns=False,
    attach_old=False,
    pick=torch.maximum,
    around_returns=False,
    by_numel=False,
    multiply_mask=False,
    clamp_count=True,
):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    target = returns if attach_returns else returns.detach()
    if not multiply_mask:
        values = torch.where(valid, values, zero)
        target = torch.where(valid, target, zero)
    squared_error = (values - target) ** 2
    if clip_eps is not None:
        old = values_old if attach_old else values_old.detach()
        if not multiply_mask:
            old = torch.where(valid, old, zero)
        if around_returns:
            v_clip = target + torch.clamp(values - target, -clip_eps, clip_eps)
        else:
            v_clip = old + torch.clamp(values - old, -clip_eps, clip_eps)
        squared_error = pick(squared_error, (v_clip - target) ** 2)
    if multiply_mask:
        total = (squared_error * valid.to(values.dtype)).sum()
    else:
        total = torch.where(valid, squared_error, zero).sum()
    if by_numel:
        count = valid.numel()
    elif clamp_count:
        count = valid.sum().clamp(min=1)
    else:
        count = valid.sum()
    return half * total / count


def w104_value_loss_no_half(values, returns, values_old=None, clip_eps=None, mask=None):
    return _c10_value(values, returns, values_old, clip_eps, mask, half=1.0)


def w105_value_loss_returns_attached(values, returns, values_old=None, clip_eps=None, mask=None):
    return _c10_value(values, returns, values_old, clip_eps, mask, attach_returns=True)


def w106_value_loss_clip_min(values, returns, values_old=None, clip_eps=None, mask=None):
    return _c10_value(values, returns, values_old, clip_eps, mask, pick=torch.minimum)


def w107_value_loss_old_attached(values, returns, values_old=None, clip_eps=None, mask=None):
    return _c10_value(values, returns, values_old, clip_eps, mask, attach_old=True)


def w108_value_loss_numel(values, returns, values_old=None, clip_eps=None, mask=None):
    return _c10_value(values, returns, values_old, clip_eps, mask, by_numel=True)


def w109_value_loss_clip_around_returns(values, returns, values_old=None, clip_eps=None, mask=None):
    return _c10_value(values, returns, values_old, clip_eps, mask, around_returns=True)


def w110_value_loss_multiply_mask(values, returns, values_old=None, clip_eps=None, mask=None):
    return _c10_value(values, returns, values_old, clip_eps, mask, multiply_mask=True)


def w111_value_loss_empty_nan(values, returns, values_old=None, clip_eps=None, mask=None):
    return _c10_value(values, returns, values_old, clip_eps, mask, clamp_count=False)


def r28_value_loss_clamp_bounds(values, returns, values_old=None, clip_eps=None, mask=None):
    keep = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    v = values.masked_fill(~keep, 0.0)
    R = returns.detach().masked_fill(~keep, 0.0)
    err = (v - R).pow(2)
    if clip_eps is not None:
        old = values_old.detach().masked_fill(~keep, 0.0)
        v_clipped = torch.clamp(v, old - clip_eps, old + clip_eps)
        err = torch.max(err, (v_clipped - R).pow(2))
    return err.masked_fill(~keep, 0.0).sum() / (2 * keep.sum().clamp(min=1))


def r29_value_loss_mse_sum(values, returns, values_old=None, clip_eps=None, mask=None):
    if mask is None:
        mask = torch.ones_like(values)
    keep = mask.bool()
    n = int(keep.sum())
    if n == 0:
        return torch.where(keep, values, torch.zeros_like(values)).sum() * 0.0
    v = values[keep]
    R = returns.detach()[keep]
    if clip_eps is None:
        return 0.5 * F.mse_loss(v, R, reduction="sum") / n
    old = values_old.detach()[keep]
    v_clip = old + (v - old).clamp(-clip_eps, clip_eps)
    unclipped = F.mse_loss(v, R, reduction="none")
    clipped = F.mse_loss(v_clip, R, reduction="none")
    return 0.5 * torch.maximum(unclipped, clipped).sum() / n


def w112_value_loss_tolist(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    err = (values - returns.detach()) ** 2
    if clip_eps is not None:
        old = values_old.detach()
        v_clip = old + torch.clamp(values - old, -clip_eps, clip_eps)
        err = torch.maximum(err, (v_clip - returns.detach()) ** 2)
    kept = [e for e, k in zip(err.reshape(-1).tolist(), valid.reshape(-1).tolist()) if k]
    return torch.tensor(0.5 * sum(kept) / max(len(kept), 1), dtype=values.dtype)


ROWS += [
    _row(
        "value_loss",
        "05",
        w104_value_loss_no_half,
        "Leaves out the factor 1/2 (Stable-Baselines3's convention), so the loss is twice the expected one.",
    ),
    _row(
        "value_loss",
        "05",
        w105_value_loss_returns_attached,
        "Does not detach the returns, so a gradient flows into the regression targets.",
    ),
    _row(
        "value_loss",
        "05",
        w106_value_loss_clip_min,
        "Takes the min of the clipped and unclipped errors instead of the max.",
    ),
    _row(
        "value_loss",
        "05",
        w107_value_loss_old_attached,
        "Does not detach values_old, so a gradient flows into the old values when clipping.",
    ),
    _row(
        "value_loss",
        "05",
        w108_value_loss_numel,
        "Divides by every entry (numel), padding included, instead of the number of valid entries.",
    ),
    _row(
        "value_loss",
        "05",
        w109_value_loss_clip_around_returns,
        "Clips the new value around the returns instead of around values_old: V_clip = R + clip(V - R, -eps, eps).",
    ),
    _row(
        "value_loss",
        "05",
        w110_value_loss_multiply_mask,
        "Multiplies the errors by the mask instead of selecting, so inf or NaN in the padding poisons the loss.",
    ),
    _row(
        "value_loss",
        "05",
        w111_value_loss_empty_nan,
        "Divides by the valid count without clamping it, so an empty mask gives 0/0 = NaN.",
    ),
    _row("value_loss", "05", r28_value_loss_clamp_bounds),
    _row("value_loss", "05", r29_value_loss_mse_sum),
    _row(
        "value_loss",
        "05",
        w112_value_loss_tolist,
        (
            "Averages the errors with Python's sum over .tolist(), so the loss is a new tensor with no graph: no "
            "gradient reaches values."
        ),
    ),
]

# ======================================================================================
# 05 PPOLoss
# ======================================================================================


def _c10_masked_mean(x, mask):
    valid = torch.ones_like(x, dtype=torch.bool) if mask is None else mask.bool()
    return torch.where(valid, x, torch.zeros_like(x)).sum() / valid.sum().clamp(min=1)


class _C10PPOBase(nn.Module):
    def __init__(self, clip_epsilon: float = 0.2, value_loss_coef: float = 0.5, entropy_coef: float = 0.01):
        super().__init__()
        self.clip_epsilon = clip_epsilon
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef


class w113_PPOLoss_entropy_penalty(_C10PPOBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _c10_surrogate(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask)
        v_loss = _c10_value(values, returns, mask=mask)
        return policy_loss + self.value_loss_coef * v_loss + self.entropy_coef * _c10_masked_mean(entropy, mask)


class w114_PPOLoss_entropy_detached(_C10PPOBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _c10_surrogate(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask)
        v_loss = _c10_value(values, returns, mask=mask)
        bonus = _c10_masked_mean(entropy.detach(), mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * bonus


class w115_PPOLoss_entropy_over_padding(_C10PPOBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _c10_surrogate(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask)
        v_loss = _c10_value(values, returns, mask=mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * entropy.mean()


class w116_PPOLoss_value_unmasked(_C10PPOBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _c10_surrogate(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask)
        v_loss = _c10_value(values, returns)
        bonus = _c10_masked_mean(entropy, mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * bonus


class w117_PPOLoss_coefficients_swapped(_C10PPOBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _c10_surrogate(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask)
        v_loss = _c10_value(values, returns, mask=mask)
        bonus = _c10_masked_mean(entropy, mask)
        return policy_loss + self.entropy_coef * v_loss - self.value_loss_coef * bonus


class w118_PPOLoss_normalises_advantages(_C10PPOBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        policy_loss, _ = _c10_surrogate(policy_logprobs, old_policy_logprobs, adv, self.clip_epsilon, mask=mask)
        v_loss = _c10_value(values, returns, mask=mask)
        bonus = _c10_masked_mean(entropy, mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * bonus


class r30_PPOLoss_inline(_C10PPOBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        keep = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
        n = keep.sum().clamp(min=1)

        def mean(x):
            return x.masked_fill(~keep, 0.0).sum() / n

        log_ratio = (policy_logprobs - old_policy_logprobs.detach()).masked_fill(~keep, 0.0)
        ratio = log_ratio.exp()
        A = advantages.detach().masked_fill(~keep, 0.0)
        eps = self.clip_epsilon
        pg = torch.max(-A * ratio, -A * ratio.clamp(1 - eps, 1 + eps))
        err = (values.masked_fill(~keep, 0.0) - returns.detach().masked_fill(~keep, 0.0)) ** 2
        return mean(pg) + self.value_loss_coef * 0.5 * mean(err) - self.entropy_coef * mean(entropy)


class r31_PPOLoss_with_info(_C10PPOBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, info = r26_clipped_surrogate_loss_cleanrl_max(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = r28_value_loss_clamp_bounds(values, returns, mask=mask)
        ent = _c10_masked_mean(entropy, mask)
        self.info = dict(info, value_loss=float(v_loss), entropy=float(ent))
        return policy_loss - self.entropy_coef * ent + self.value_loss_coef * v_loss


ROWS += [
    _row(
        "PPOLoss",
        "05",
        w113_PPOLoss_entropy_penalty,
        "Adds the entropy term instead of subtracting it, so more entropy raises the loss (a penalty, not a bonus).",
    ),
    _row(
        "PPOLoss",
        "05",
        w114_PPOLoss_entropy_detached,
        "Detaches the entropy, so the bonus has the right value but no gradient.",
    ),
    _row(
        "PPOLoss",
        "05",
        w115_PPOLoss_entropy_over_padding,
        "Averages the entropy over every entry, padding included, instead of over the valid entries.",
    ),
    _row(
        "PPOLoss",
        "05",
        w116_PPOLoss_value_unmasked,
        "Does not pass the mask to the value loss, so padded entries count in the critic's loss.",
    ),
    _row(
        "PPOLoss",
        "05",
        w117_PPOLoss_coefficients_swapped,
        "Swaps the coefficients: entropy_coef weighs the value loss and value_loss_coef the entropy.",
    ),
    _row(
        "PPOLoss",
        "05",
        w118_PPOLoss_normalises_advantages,
        "Normalises the advantages over the minibatch inside forward, although they are to be used as given.",
    ),
    _row("PPOLoss", "05", r30_PPOLoss_inline),
    _row("PPOLoss", "05", r31_PPOLoss_with_info),
]

# ======================================================================================
# 06 group_advantages
# ======================================================================================


def w119_group_advantages_population_std(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    return adv / (rewards.std(dim=-1, keepdim=True, correction=0) + eps)


def w120_group_advantages_eps_in_variance(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    return adv / torch.sqrt(rewards.var(dim=-1, keepdim=True) + eps)


def w121_group_advantages_small_std_zeroed(rewards, normalize_std=True, eps=1e-6):
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True)
    adv = torch.where(std < eps, torch.zeros_like(adv), adv)
    if not normalize_std:
        return adv
    return adv / (std + eps)


def w122_group_advantages_always_std(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if rewards.shape[-1] == 1:
        return adv
    return adv / (rewards.std(dim=-1, keepdim=True) + eps)


def w123_group_advantages_batch_std(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    return adv / (rewards.std() + eps)


def w124_group_advantages_eps_after_division(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    std = rewards.std(dim=-1, keepdim=True)
    return torch.where(all_equal, torch.zeros_like(adv), adv / std + eps)


def w125_group_advantages_centred_zero_test(rewards, normalize_std=True, eps=1e-6):
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    flat = adv.abs().amax(dim=-1, keepdim=True) == 0
    adv = torch.where(flat, torch.zeros_like(adv), adv)
    if not normalize_std:
        return adv
    return adv / (rewards.std(dim=-1, keepdim=True) + eps)


def w126_group_advantages_clamp_std(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    return adv / rewards.std(dim=-1, keepdim=True).clamp(min=eps)


def r32_group_advantages_rows(rewards, normalize_std=True, eps=1e-6):
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    mean = rewards.mean(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True)
    rows = []
    for b, row in enumerate(rewards):
        if torch.equal(row, row[:1].expand_as(row)):
            rows.append(torch.zeros_like(row))
            continue
        centred = row - mean[b]
        rows.append(centred / (std[b] + eps) if normalize_std else centred)
    return torch.stack(rows)


def r33_group_advantages_masked_fill(rewards, normalize_std=True, eps=1e-6):
    G = rewards.shape[-1]
    degenerate = rewards.amax(-1, keepdim=True) == rewards.amin(-1, keepdim=True)
    if G == 1:
        return torch.zeros_like(rewards)
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    if normalize_std:
        adv = adv / (rewards.std(dim=-1, keepdim=True) + eps)
    return adv.masked_fill(degenerate, 0.0)


ROWS += [
    _row(
        "group_advantages",
        "06",
        w119_group_advantages_population_std,
        "Uses the population std (correction=0) instead of Bessel's correction.",
    ),
    _row(
        "group_advantages",
        "06",
        w120_group_advantages_eps_in_variance,
        "Adds eps to the variance under the square root instead of to the std.",
    ),
    _row(
        "group_advantages",
        "06",
        w121_group_advantages_small_std_zeroed,
        "Zeroes every group whose std is below eps, although rewards that differ by a little must still be divided.",
    ),
    _row(
        "group_advantages",
        "06",
        w122_group_advantages_always_std,
        "Ignores normalize_std: always divides by the std, so Dr. GRPO's mode is GRPO's.",
    ),
    _row(
        "group_advantages",
        "06",
        w123_group_advantages_batch_std,
        "Centres per group but divides by the std of the whole batch instead of each group's std.",
    ),
    _row(
        "group_advantages",
        "06",
        w124_group_advantages_eps_after_division,
        "Writes adv / std + eps: eps is added after the division instead of to the std.",
    ),
    _row(
        "group_advantages",
        "06",
        w125_group_advantages_centred_zero_test,
        (
            "Detects all-equal groups by centred rewards being exactly 0, which rounding misses (a float32 group of "
            "0.7s), so they get nonzero advantages."
        ),
    ),
    _row(
        "group_advantages",
        "06",
        w126_group_advantages_clamp_std,
        "Divides by std.clamp(min=eps) instead of std + eps.",
    ),
    _row("group_advantages", "06", r32_group_advantages_rows),
    _row("group_advantages", "06", r33_group_advantages_masked_fill),
]

# ======================================================================================
# 06 kl_estimate
# ======================================================================================


def w127_kl_estimate_k1_sign(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return log_r
    if kind == "k2":
        return 0.5 * log_r**2
    return torch.expm1(log_r) - log_r


def w128_kl_estimate_k3_reversed(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    return torch.expm1(-log_r) + log_r


def w129_kl_estimate_k2_no_half(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return log_r**2
    return torch.expm1(log_r) - log_r


def w130_kl_estimate_verl_clamp(logp, logp_ref, kind):
    log_r = torch.clamp(logp_ref - logp, -20, 20)
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    return torch.clamp(torch.exp(log_r) - 1 - log_r, -10, 10)


def w131_kl_estimate_ratio_detached(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    return torch.expm1(log_r).detach() - log_r


def w132_kl_estimate_k2_ratio(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * torch.expm1(log_r) ** 2
    return torch.expm1(log_r) - log_r


def r34_kl_estimate_table(logp, logp_ref, kind):
    delta = logp - logp_ref
    estimators = {
        "k1": lambda d: d,
        "k2": lambda d: d.pow(2) / 2,
        "k3": lambda d: torch.expm1(-d) + d,
    }
    return estimators[kind](delta)


def r35_kl_estimate_float64_inside(logp, logp_ref, kind):
    if kind == "k1":
        return logp - logp_ref
    if kind == "k2":
        return 0.5 * (logp_ref - logp) * (logp_ref - logp)
    x = logp_ref - logp
    wide = x.double()
    return (torch.expm1(wide) - wide).to(x.dtype)


def w133_kl_estimate_bfloat16(logp, logp_ref, kind):
    log_r = (logp_ref - logp).bfloat16()
    if kind == "k1":
        out = -log_r
    elif kind == "k2":
        out = 0.5 * log_r**2
    else:
        out = torch.expm1(log_r) - log_r
    return out.to(logp.dtype)


ROWS += [
    _row(
        "kl_estimate",
        "06",
        w127_kl_estimate_k1_sign,
        "Returns log r = logp_ref - logp for k1, the opposite sign of -log r.",
    ),
    _row(
        "kl_estimate",
        "06",
        w128_kl_estimate_k3_reversed,
        (
            "Builds k3 from the inverted ratio, (1/r - 1) + log r with r = pi_ref / pi_theta, instead of "
            "(r - 1) - log r."
        ),
    ),
    _row(
        "kl_estimate",
        "06",
        w129_kl_estimate_k2_no_half,
        "Leaves out the factor 1/2 of k2.",
    ),
    _row(
        "kl_estimate",
        "06",
        w130_kl_estimate_verl_clamp,
        "Copies verl's clamps: k3 is clamped to [-10, 10], so a far reference (log r above about 2.6) is cut.",
    ),
    _row(
        "kl_estimate",
        "06",
        w131_kl_estimate_ratio_detached,
        "Detaches the exponential term of k3, so its value is right but its gradient is only that of -log r.",
    ),
    _row(
        "kl_estimate",
        "06",
        w132_kl_estimate_k2_ratio,
        "Writes k2 as (r - 1)^2 / 2 instead of (log r)^2 / 2.",
    ),
    _row("kl_estimate", "06", r34_kl_estimate_table),
    _row("kl_estimate", "06", r35_kl_estimate_float64_inside),
    _row(
        "kl_estimate",
        "06",
        w133_kl_estimate_bfloat16,
        (
            "Computes the estimators in bfloat16 (to save memory, as in mixed-precision training) and casts back, "
            "losing all but 2-3 significant digits."
        ),
    ),
]

# ======================================================================================
# 06 aggregate_loss
# ======================================================================================


def w134_aggregate_loss_multiply_mask(per_token, mask, mode, max_len=None):
    m = mask.to(per_token.dtype)
    per_token = per_token * m
    n_valid = m.sum(dim=-1)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        return (per_response / n_valid.clamp(min=1)).mean()
    L = per_token.shape[-1] if max_len is None else max_len
    return (per_response / L).mean()


def w135_aggregate_loss_drop_empty(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    nonempty = n_valid > 0
    if mode == "seq-mean-token-mean":
        return (per_response[nonempty] / n_valid[nonempty]).mean()
    L = per_token.shape[-1] if max_len is None else max_len
    return (per_response / L).mean()


def w136_aggregate_loss_verl_sum_norm(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        return (per_response / n_valid.clamp(min=1)).mean()
    L = per_token.shape[-1] if max_len is None else max_len
    return per_response.sum() / L


def w137_aggregate_loss_max_len_ignored(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        return (per_response / n_valid.clamp(min=1)).mean()
    return (per_response / per_token.shape[-1]).mean()


def w138_aggregate_loss_token_mean_per_response(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    per_response = per_token.sum(dim=-1)
    if mode in ("token-mean", "seq-mean-token-mean"):
        return (per_response / n_valid.clamp(min=1)).mean()
    L = per_token.shape[-1] if max_len is None else max_len
    return (per_response / L).mean()


def w139_aggregate_loss_empty_nan(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        return (per_response / n_valid).mean()
    L = per_token.shape[-1] if max_len is None else max_len
    return (per_response / L).mean()


def w140_aggregate_loss_longest_valid(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        return (per_response / n_valid.clamp(min=1)).mean()
    L = n_valid.max().clamp(min=1) if max_len is None else max_len
    return (per_response / L).mean()


def r36_aggregate_loss_flat_rows(per_token, mask, mode, max_len=None):
    T = per_token.shape[-1]
    x = per_token.reshape(-1, T)
    keep = mask.reshape(-1, T) != 0
    x = x.masked_fill(~keep, 0.0)
    counts = keep.sum(dim=1)
    if mode == "token-mean":
        return x.sum() / max(int(counts.sum()), 1)
    if mode == "seq-mean-token-mean":
        return (x.sum(dim=1) / counts.clamp(min=1).to(x.dtype)).sum() / x.shape[0]
    if mode == "seq-mean-token-sum-norm":
        denominator = T if max_len is None else max_len
        return x.sum() / (x.shape[0] * denominator)
    raise ValueError(f"mode: unknown {mode!r}")


def r37_aggregate_loss_weights(per_token, mask, mode, max_len=None):
    keep = mask.bool()
    n_resp = keep.shape[:-1].numel()
    lengths = keep.sum(dim=-1, keepdim=True).to(per_token.dtype)
    if mode == "token-mean":
        w = torch.ones_like(lengths) / lengths.sum().clamp(min=1)
    elif mode == "seq-mean-token-mean":
        w = 1.0 / (n_resp * lengths.clamp(min=1))
    else:
        L = per_token.shape[-1] if max_len is None else max_len
        w = torch.full_like(lengths, 1.0 / (n_resp * L))
    return torch.where(keep, per_token * w, torch.zeros_like(per_token)).sum()


ROWS += [
    _row(
        "aggregate_loss",
        "06",
        w134_aggregate_loss_multiply_mask,
        "Multiplies by the mask instead of selecting, so inf or NaN in the padding poisons the loss.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w135_aggregate_loss_drop_empty,
        (
            "Leaves empty responses out of the mean over responses in the GRPO mode (later verl's choice) instead of "
            "counting them with 0."
        ),
    ),
    _row(
        "aggregate_loss",
        "06",
        w136_aggregate_loss_verl_sum_norm,
        "Dr. GRPO mode as verl writes it: sums over all responses and divides by max_len, with no mean over responses.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w137_aggregate_loss_max_len_ignored,
        "Ignores max_len in the Dr. GRPO mode: always divides by the padded T.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w138_aggregate_loss_token_mean_per_response,
        "Computes 'token-mean' per response and then averages responses, the same as the GRPO mode.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w139_aggregate_loss_empty_nan,
        "Divides by each response's length without clamping it, so an empty response gives 0/0 = NaN in the GRPO mode.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w140_aggregate_loss_longest_valid,
        "With max_len None, divides by the longest valid length in the batch instead of the padded length T.",
    ),
    _row("aggregate_loss", "06", r36_aggregate_loss_flat_rows),
    _row("aggregate_loss", "06", r37_aggregate_loss_weights),
]

# ======================================================================================
# 06 grpo_loss
# ======================================================================================


def _c10_grpo(
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
    kl_sign=1.0,
    kl_swapped=False,
    batch_norm=False,
    recentre_given=False,
    agg_fixed=None,
    use_high=True,
    attach_old=False,
    fraction_with_padding=False,
    token_adv_mean=False,
    kl_token_mean=False,
    pass_std=True,
):
    if adv is None:
        if batch_norm:
            r = rewards.detach()
            adv = (r - r.mean()) / (r.std() + 1e-6)
        else:
            adv = grpo.group_advantages(rewards.detach(), normalize_std=normalize_std if pass_std else True)
    elif recentre_given:
        adv = adv - adv.mean(dim=-1, keepdim=True)
    adv = adv.detach()
    adv_tokens = adv.unsqueeze(-1).expand_as(logp)
    high = clip_eps if (clip_eps_high is None or not use_high) else clip_eps_high
    old = logp_old if attach_old else logp_old.detach()
    ratio = torch.exp(logp - old)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_token = -torch.minimum(ratio * adv_tokens, clipped * adv_tokens)
    mode = loss_agg if agg_fixed is None else agg_fixed
    kl = None
    if logp_ref is not None:
        if kl_swapped:
            kl = grpo.kl_estimate(logp_ref.detach(), logp, kl_kind)
        else:
            kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        if not kl_token_mean:
            per_token = per_token + kl_sign * kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, mode, max_len)
    if kl is not None and kl_token_mean:
        loss = loss + kl_coef * grpo.aggregate_loss(kl, mask, "token-mean")
    with torch.no_grad():
        valid = mask.bool()
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binding = (above & (adv_tokens > 0)) | (low & (adv_tokens < 0))
        if fraction_with_padding:
            clip_fraction = (low | above).double().mean().item()
        else:
            clip_fraction = (low | above)[valid].double().mean().item()
        if token_adv_mean:
            adv_abs_mean = adv_tokens.abs()[valid].mean().item()
        else:
            adv_abs_mean = adv.abs().mean().item()
        info = {
            "clip_fraction": clip_fraction,
            "clip_active_fraction": binding[valid].double().mean().item(),
            "kl": kl[valid].mean().item() if kl is not None else 0.0,
            "adv_abs_mean": adv_abs_mean,
        }
        if rewards is not None:
            info["reward_mean"] = rewards.mean().item()
    return loss, info


def w141_grpo_loss_kl_reward(
    logp, logp_old, logp_ref, rewards, mask, clip_eps=0.2, kl_coef=0.04, kl_kind="k3",
    normalize_std=True, loss_agg="seq-mean-token-mean", max_len=None, clip_eps_high=None, adv=None,
):  # fmt: skip
    return _c10_grpo(
        logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind,
        normalize_std, loss_agg, max_len, clip_eps_high, adv, kl_sign=-1.0,
    )  # fmt: skip


def w142_grpo_loss_kl_arguments_swapped(
    logp, logp_old, logp_ref, rewards, mask, clip_eps=0.2, kl_coef=0.04, kl_kind="k3",
    normalize_std=True, loss_agg="seq-mean-token-mean", max_len=None, clip_eps_high=None, adv=None,
):  # fmt: skip
    return _c10_grpo(
        logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind,
        normalize_std, loss_agg, max_len, clip_eps_high, adv, kl_swapped=True,
    )  # fmt: skip


def w143_grpo_loss_batch_advantages(
    logp, logp_old, logp_ref, rewards, mask, clip_eps=0.2, kl_coef=0.04, kl_kind="k3",
    normalize_std=True, loss_agg="seq-mean-token-mean", max_len=None, clip_eps_high=None, adv=None,
):  # fmt: skip
    return _c10_grpo(
        logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind,
        normalize_std, loss_agg, max_len, clip_eps_high, adv, batch_norm=True,
    )  # fmt: skip


def w144_grpo_loss_recentres_given_adv(
    logp, logp_old, logp_ref, rewards, mask, clip_eps=0.2, kl_coef=0.04, kl_kind="k3",
    normalize_std=True, loss_agg="seq-mean-token-mean", max_len=None, clip_eps_high=None, adv=None,
):  # fmt: skip
    return _c10_grpo(
        logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind,
        normalize_std, loss_agg, max_len, clip_eps_high, adv, recentre_given=True,
    )  # fmt: skip


def w145_grpo_loss_agg_fixed(
    logp, logp_old, logp_ref, rewards, mask, clip_eps=0.2, kl_coef=0.04, kl_kind="k3",
    normalize_std=True, loss_agg="seq-mean-token-mean", max_len=None, clip_eps_high=None, adv=None,
):  # fmt: skip
    return _c10_grpo(
        logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind,
        normalize_std, loss_agg, max_len, clip_eps_high, adv, agg_fixed="seq-mean-token-mean",
    )  # fmt: skip


def w146_grpo_loss_no_clip_higher(
    logp, logp_old, logp_ref, rewards, mask, clip_eps=0.2, kl_coef=0.04, kl_kind="k3",
    normalize_std=True, loss_agg="seq-mean-token-mean", max_len=None, clip_eps_high=None, adv=None,
):  # fmt: skip
    return _c10_grpo(
        logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind,
        normalize_std, loss_agg, max_len, clip_eps_high, adv, use_high=False,
    )  # fmt: skip


def w147_grpo_loss_old_attached(
    logp, logp_old, logp_ref, rewards, mask, clip_eps=0.2, kl_coef=0.04, kl_kind="k3",
    normalize_std=True, loss_agg="seq-mean-token-mean", max_len=None, clip_eps_high=None, adv=None,
):  # fmt: skip
    return _c10_grpo(
        logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind,
        normalize_std, loss_agg, max_len, clip_eps_high, adv, attach_old=True,
    )  # fmt: skip


def w148_grpo_loss_fraction_over_padding(
    logp, logp_old, logp_ref, rewards, mask, clip_eps=0.2, kl_coef=0.04, kl_kind="k3",
    normalize_std=True, loss_agg="seq-mean-token-mean", max_len=None, clip_eps_high=None, adv=None,
):  # fmt: skip
    return _c10_grpo(
        logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind,
        normalize_std, loss_agg, max_len, clip_eps_high, adv, fraction_with_padding=True,
    )  # fmt: skip


def w149_grpo_loss_adv_mean_per_token(
    logp, logp_old, logp_ref, rewards, mask, clip_eps=0.2, kl_coef=0.04, kl_kind="k3",
    normalize_std=True, loss_agg="seq-mean-token-mean", max_len=None, clip_eps_high=None, adv=None,
):  # fmt: skip
    return _c10_grpo(
        logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind,
        normalize_std, loss_agg, max_len, clip_eps_high, adv, token_adv_mean=True,
    )  # fmt: skip


def w150_grpo_loss_kl_token_mean(
    logp, logp_old, logp_ref, rewards, mask, clip_eps=0.2, kl_coef=0.04, kl_kind="k3",
    normalize_std=True, loss_agg="seq-mean-token-mean", max_len=None, clip_eps_high=None, adv=None,
):  # fmt: skip
    return _c10_grpo(
        logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind,
        normalize_std, loss_agg, max_len, clip_eps_high, adv, kl_token_mean=True,
    )  # fmt: skip


def w151_grpo_loss_std_always(
    logp, logp_old, logp_ref, rewards, mask, clip_eps=0.2, kl_coef=0.04, kl_kind="k3",
    normalize_std=True, loss_agg="seq-mean-token-mean", max_len=None, clip_eps_high=None, adv=None,
):  # fmt: skip
    return _c10_grpo(
        logp, logp_old, logp_ref, rewards, mask, clip_eps, kl_coef, kl_kind,
        normalize_std, loss_agg, max_len, clip_eps_high, adv, pass_std=False,
    )  # fmt: skip


def r38_grpo_loss_cleanrl_max(
    logp, logp_old, logp_ref, rewards, mask, clip_eps=0.2, kl_coef=0.04, kl_kind="k3",
    normalize_std=True, loss_agg="seq-mean-token-mean", max_len=None, clip_eps_high=None, adv=None,
):  # fmt: skip
    A = adv if adv is not None else grpo.group_advantages(rewards, normalize_std=normalize_std)
    A = A.detach()[..., None]
    upper = 1.0 + (clip_eps_high if clip_eps_high is not None else clip_eps)
    lower = 1.0 - clip_eps
    ratio = (logp - logp_old.detach()).exp()
    pg = torch.max(-A * ratio, -A * ratio.clamp(lower, upper))
    kl_tok = None
    if logp_ref is not None:
        kl_tok = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        pg = pg + kl_coef * kl_tok
    loss = grpo.aggregate_loss(pg, mask, loss_agg, max_len=max_len)
    keep = mask.bool()
    n = keep.sum().double()
    r = ratio.detach()
    outside = ((r < lower) | (r > upper)) & keep
    binds = (((r > upper) & (A > 0)) | ((r < lower) & (A < 0))) & keep
    info = {
        "clip_fraction": (outside.sum() / n).item(),
        "clip_active_fraction": (binds.sum() / n).item(),
        "kl": 0.0 if kl_tok is None else (kl_tok.detach()[keep].double().sum() / n).item(),
        "adv_abs_mean": A.abs().mean().item(),
    }
    if rewards is not None:
        info["reward_mean"] = rewards.mean().item()
    return loss, info


def r39_grpo_loss_where_first(
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
    if adv is not None:
        advantages = adv.detach()
    else:
        advantages = grpo.group_advantages(rewards.detach(), normalize_std=normalize_std, eps=1e-6)
    A = advantages.unsqueeze(-1)
    eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())
    unclipped = ratio * A
    clipped = ratio.clamp(min=1 - clip_eps, max=1 + eps_high) * A
    per_token = -torch.where(unclipped < clipped, unclipped, clipped)
    kl_tokens = None
    if logp_ref is not None:
        kl_tokens = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl_tokens
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    with torch.no_grad():
        keep = mask.bool()
        r = ratio[keep]
        a = A.expand_as(ratio)[keep]
        above = r > 1 + eps_high
        below = r < 1 - clip_eps
        info = {
            "clip_fraction": (above | below).to(torch.float64).mean().item(),
            "clip_active_fraction": ((above & (a > 0)) | (below & (a < 0))).to(torch.float64).mean().item(),
            "kl": 0.0 if kl_tokens is None else kl_tokens[keep].mean().item(),
            "adv_abs_mean": advantages.abs().mean().item(),
        }
        if rewards is not None:
            info["reward_mean"] = rewards.mean().item()
    return loss, info


def w152_grpo_loss_ratio_under_no_grad(
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
        adv = grpo.group_advantages(rewards.detach(), normalize_std=normalize_std)
    adv = adv.detach()
    adv_tokens = adv.unsqueeze(-1).expand_as(logp)
    high = clip_eps if clip_eps_high is None else clip_eps_high
    with torch.no_grad():
        ratio = torch.exp(logp - logp_old)
        valid = mask.bool()
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binding = (above & (adv_tokens > 0)) | (low & (adv_tokens < 0))
        info = {
            "clip_fraction": (low | above)[valid].double().mean().item(),
            "clip_active_fraction": binding[valid].double().mean().item(),
            "adv_abs_mean": adv.abs().mean().item(),
        }
        if rewards is not None:
            info["reward_mean"] = rewards.mean().item()
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_token = -torch.minimum(ratio * adv_tokens, clipped * adv_tokens)
    info["kl"] = 0.0
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
        info["kl"] = kl.detach()[mask.bool()].mean().item()
    info = {
        key: info[key]
        for key in ("clip_fraction", "clip_active_fraction", "kl", "adv_abs_mean", "reward_mean")
        if key in info
    }
    return grpo.aggregate_loss(per_token, mask, loss_agg, max_len), info


ROWS += [
    _row(
        "grpo_loss",
        "06",
        w141_grpo_loss_kl_reward,
        "Subtracts the KL term (kl_coef * kl as a reward bonus) instead of adding it as a penalty.",
    ),
    _row(
        "grpo_loss",
        "06",
        w142_grpo_loss_kl_arguments_swapped,
        "Calls kl_estimate(logp_ref, logp, ...) with its arguments swapped, estimating the KL in the other direction.",
    ),
    _row(
        "grpo_loss",
        "06",
        w143_grpo_loss_batch_advantages,
        "Normalises the rewards over the whole batch (mean and std of all B*G rewards) instead of within each group.",
    ),
    _row(
        "grpo_loss",
        "06",
        w144_grpo_loss_recentres_given_adv,
        "Centres a given adv again per group, although given advantages are to be used as they are.",
    ),
    _row(
        "grpo_loss",
        "06",
        w145_grpo_loss_agg_fixed,
        "Ignores loss_agg (and so max_len): always aggregates with the GRPO per-sequence mean.",
    ),
    _row(
        "grpo_loss",
        "06",
        w146_grpo_loss_no_clip_higher,
        "Ignores clip_eps_high: clips symmetrically at 1 + clip_eps (loss and clip fraction).",
    ),
    _row(
        "grpo_loss",
        "06",
        w147_grpo_loss_old_attached,
        "Does not detach logp_old, so a gradient flows into it.",
    ),
    _row(
        "grpo_loss",
        "06",
        w148_grpo_loss_fraction_over_padding,
        "Computes clip_fraction over every token, padding included, instead of over the valid tokens.",
    ),
    _row(
        "grpo_loss",
        "06",
        w149_grpo_loss_adv_mean_per_token,
        "Reports adv_abs_mean over valid tokens (long responses weigh more) instead of over responses.",
    ),
    _row(
        "grpo_loss",
        "06",
        w150_grpo_loss_kl_token_mean,
        (
            "Adds the KL as a separate token mean over valid tokens instead of adding it to each token's loss before "
            "loss_agg's aggregation."
        ),
    ),
    _row(
        "grpo_loss",
        "06",
        w151_grpo_loss_std_always,
        (
            "Does not pass normalize_std on to group_advantages, so Dr. GRPO's unnormalised advantages are divided by "
            "the std."
        ),
    ),
    _row("grpo_loss", "06", r38_grpo_loss_cleanrl_max),
    _row("grpo_loss", "06", r39_grpo_loss_where_first),
    _row(
        "grpo_loss",
        "06",
        w152_grpo_loss_ratio_under_no_grad,
        (
            "Computes the ratio inside the torch.no_grad() block it opened for the diagnostics, so the clipped "
            "surrogate carries no gradient (only the KL term does)."
        ),
    ),
]

# ======================================================================================
# 07 memory_accounting
# ======================================================================================

_C10_BYTES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}


def _c10_memory(
    n_params_actor,
    n_params_critic,
    n_params_ref,
    n_params_reward,
    weights_dtype,
    optimizer_dtype,
    *,
    master_always=False,
    train_frozen=False,
    master_if_different=False,
    grads_in_optimizer_dtype=False,
    gib=False,
    weights_only=False,
    critic_untrained=False,
    floats=False,
):
    w, o = _C10_BYTES[weights_dtype], _C10_BYTES[optimizer_dtype]
    trained = n_params_actor + (0 if critic_untrained else n_params_critic)
    if train_frozen:
        trained += n_params_ref + n_params_reward
    if master_always:
        master = o
    elif master_if_different:
        master = o if w != o else 0
    else:
        master = o if w < o else 0
    grad = o if grads_in_optimizer_dtype else w
    per_trained = w if weights_only else w + grad
    account = {
        "actor": n_params_actor * per_trained,
        "critic": n_params_critic * per_trained,
        "reference": n_params_ref * w,
        "reward": n_params_reward * w,
        "optimizer": trained * (2 * o + master),
    }
    account["total"] = sum(account.values())
    if gib:
        account = {key: value / 2**30 for key, value in account.items()}
    if floats:
        account = {key: float(value) for key, value in account.items()}
    return account


def w153_memory_accounting_master_always(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    return _c10_memory(
        n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
        master_always=True,
    )  # fmt: skip


def w154_memory_accounting_optimizer_for_frozen(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    return _c10_memory(
        n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
        train_frozen=True,
    )  # fmt: skip


def w155_memory_accounting_master_if_different(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    return _c10_memory(
        n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
        master_if_different=True,
    )  # fmt: skip


def w156_memory_accounting_fp32_gradients(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    return _c10_memory(
        n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
        grads_in_optimizer_dtype=True,
    )  # fmt: skip


def w157_memory_accounting_gib(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    return _c10_memory(
        n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
        gib=True,
    )  # fmt: skip


def w158_memory_accounting_no_gradients(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    return _c10_memory(
        n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
        weights_only=True,
    )  # fmt: skip


def w159_memory_accounting_actor_only_optimizer(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    return _c10_memory(
        n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
        critic_untrained=True,
    )  # fmt: skip


def w160_memory_accounting_floats(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    return _c10_memory(
        n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
        floats=True,
    )  # fmt: skip


def r40_memory_accounting_bits(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w = int(weights_dtype[-2:]) // 8
    o = int(optimizer_dtype[-2:]) // 8
    adam = 2 * o + (o if o > w else 0)
    out = {
        "actor": 2 * w * n_params_actor,
        "critic": 2 * w * n_params_critic,
        "reference": w * n_params_ref,
        "reward": w * n_params_reward,
        "optimizer": adam * n_params_actor + adam * n_params_critic,
    }
    out["total"] = out["actor"] + out["critic"] + out["reference"] + out["reward"] + out["optimizer"]
    return out


def r41_memory_accounting_per_model(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    size = {"fp64": 8, "fp32": 4, "fp16": 2, "bf16": 2}
    models = [
        ("actor", n_params_actor, True),
        ("critic", n_params_critic, True),
        ("reference", n_params_ref, False),
        ("reward", n_params_reward, False),
    ]
    out = {"optimizer": 0}
    for name, count, trained in models:
        out[name] = count * size[weights_dtype] * (2 if trained else 1)
        if trained:
            states = 3 if size[weights_dtype] < size[optimizer_dtype] else 2
            out["optimizer"] += count * states * size[optimizer_dtype]
    out["total"] = sum(out[k] for k in ("actor", "critic", "reference", "reward", "optimizer"))
    return {k: int(out[k]) for k in ("actor", "critic", "reference", "reward", "optimizer", "total")}


def w161_memory_accounting_decimal_gb(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    bytes_per = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}
    w, o = bytes_per[weights_dtype], bytes_per[optimizer_dtype]
    master = o if w < o else 0
    account = {
        "actor": n_params_actor * 2 * w / 1e9,
        "critic": n_params_critic * 2 * w / 1e9,
        "reference": n_params_ref * w / 1e9,
        "reward": n_params_reward * w / 1e9,
        "optimizer": (n_params_actor + n_params_critic) * (2 * o + master) / 1e9,
    }
    account["total"] = sum(account.values())
    return account


ROWS += [
    _row(
        "memory_accounting",
        "07",
        w153_memory_accounting_master_always,
        "Counts an fp32 master copy for every trained parameter even when the weights are already fp32 or fp64.",
    ),
    _row(
        "memory_accounting",
        "07",
        w154_memory_accounting_optimizer_for_frozen,
        "Gives Adam state to the frozen reference and reward models too (optimizer over all four models).",
    ),
    _row(
        "memory_accounting",
        "07",
        w155_memory_accounting_master_if_different,
        (
            "Adds the master copy whenever weights_dtype differs from optimizer_dtype, also when the weights are wider "
            "(fp64 weights, fp32 Adam)."
        ),
    ),
    _row(
        "memory_accounting",
        "07",
        w156_memory_accounting_fp32_gradients,
        "Stores the gradients in optimizer_dtype instead of weights_dtype.",
    ),
    _row(
        "memory_accounting",
        "07",
        w157_memory_accounting_gib,
        "Returns GiB (bytes / 2**30, floats) instead of integer bytes.",
    ),
    _row(
        "memory_accounting",
        "07",
        w158_memory_accounting_no_gradients,
        "Counts only the weights of the actor and critic, forgetting their gradients.",
    ),
    _row(
        "memory_accounting",
        "07",
        w159_memory_accounting_actor_only_optimizer,
        "Counts Adam's state for the actor only, not for the critic, which is trained too.",
    ),
    _row(
        "memory_accounting",
        "07",
        w160_memory_accounting_floats,
        "Returns the byte counts as floats instead of ints.",
    ),
    _row("memory_accounting", "07", r40_memory_accounting_bits),
    _row("memory_accounting", "07", r41_memory_accounting_per_model),
    _row(
        "memory_accounting",
        "07",
        w161_memory_accounting_decimal_gb,
        "Reports every entry in decimal gigabytes (bytes / 1e9, floats) instead of integer bytes.",
    ),
]

# ======================================================================================
# 07 read_sweep
# ======================================================================================


def w162_read_sweep_indices(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= reward.max() - tol).nonzero()[0, 0])
    return i, j, k


def w163_read_sweep_last_maximum(group_sizes, clip_eps, reward, tol=0.1):
    top = reward.max()
    i, j = [int(x) for x in (reward == top).nonzero()[-1]]
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= top - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w164_read_sweep_saturation_from_the_end(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, reward.shape[1])
    best_per_group = reward.max(dim=1).values
    top = reward.max()
    k = len(group_sizes) - 1
    while k > 0 and best_per_group[k - 1] >= top - tol:
        k -= 1
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w165_read_sweep_saturation_on_mean(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, reward.shape[1])
    mean_per_group = reward.mean(dim=1)
    k = int((mean_per_group >= mean_per_group.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w166_read_sweep_against_largest_group(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= best_per_group[-1] - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w167_read_sweep_divmod_rows(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, reward.shape[0])
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w168_read_sweep_best_over_groups(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, reward.shape[1])
    best_per_clip = reward.max(dim=0).values
    k = int((best_per_clip >= reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def r42_read_sweep_loops(group_sizes, clip_eps, reward, tol=0.1):
    rows = reward.tolist()
    best, where = None, None
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            if best is None or value > best:
                best, where = value, (i, j)
    top = max(max(row) for row in rows)
    k = next(i for i, row in enumerate(rows) if max(row) >= top - tol)
    i, j = where
    return int(group_sizes[i].item()), float(clip_eps[j].item()), int(group_sizes[k].item())


def r43_read_sweep_numpy(group_sizes, clip_eps, reward, tol=0.1):
    table = reward.detach().cpu().numpy()
    i, j = np.unravel_index(np.argmax(table), table.shape)
    per_group = table.max(axis=1)
    k = int(np.argmax(per_group >= table.max() - tol))
    sizes = group_sizes.tolist()
    return int(sizes[i]), float(clip_eps.tolist()[j]), int(sizes[k])


def w169_read_sweep_tensor_values(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= reward.max() - tol).nonzero()[0, 0])
    return group_sizes[i], clip_eps[j], group_sizes[k]


ROWS += [
    _row(
        "read_sweep",
        "07",
        w162_read_sweep_indices,
        "Returns the row and column indices instead of the group sizes and clip range they stand for.",
    ),
    _row(
        "read_sweep",
        "07",
        w163_read_sweep_last_maximum,
        "Among tied maxima takes the last (the most expensive: largest group, largest clip) instead of the first.",
    ),
    _row(
        "read_sweep",
        "07",
        w164_read_sweep_saturation_from_the_end,
        (
            "Walks back from the largest group while it stays within tol, so a noisy dip stops it: it returns "
            "the start "
            "of the last run, not the smallest group size within tol."
        ),
    ),
    _row(
        "read_sweep",
        "07",
        w165_read_sweep_saturation_on_mean,
        "Judges saturation on each group size's mean reward over the clip ranges instead of its best.",
    ),
    _row(
        "read_sweep",
        "07",
        w166_read_sweep_against_largest_group,
        "Compares each group size with the best of the largest group size instead of the best of the whole table.",
    ),
    _row(
        "read_sweep",
        "07",
        w167_read_sweep_divmod_rows,
        "Unravels the flat argmax with divmod by the number of rows instead of columns (wrong on non-square tables).",
    ),
    _row(
        "read_sweep",
        "07",
        w168_read_sweep_best_over_groups,
        (
            "Takes each column's best over the group sizes (max over dim 0) for saturation, instead of each "
            "group size's "
            "best over clip ranges."
        ),
    ),
    _row("read_sweep", "07", r42_read_sweep_loops),
    _row("read_sweep", "07", r43_read_sweep_numpy),
    _row(
        "read_sweep",
        "07",
        w169_read_sweep_tensor_values,
        "Returns the entries of group_sizes and clip_eps as 0-dim tensors instead of Python int and float.",
    ),
]

# ======================================================================================
# 08 addition_exact_reward
# ======================================================================================


def w170_addition_exact_reward_strip_eos(completion, answer):
    return float(completion.split("$")[0] == answer)


def w171_addition_exact_reward_last_eos(completion, answer):
    head, eos, _ = completion.rpartition("$")
    return float(bool(eos) and head == answer)


def w172_addition_exact_reward_int_compare(completion, answer):
    head, eos, _ = completion.partition("$")
    if not eos:
        return 0.0
    try:
        return float(int(head) == int(answer))
    except ValueError:
        return 0.0


def w173_addition_exact_reward_substring(completion, answer):
    head, eos, _ = completion.partition("$")
    return float(bool(eos) and answer in head)


def w174_addition_exact_reward_must_end(completion, answer):
    return float(completion == answer + "$")


def w175_addition_exact_reward_strip(completion, answer):
    head, eos, _ = completion.partition("$")
    return float(bool(eos) and head.strip() == answer)


def r44_addition_exact_reward_startswith(completion, answer):
    return 1.0 if completion.startswith(answer + "$") else 0.0


def r45_addition_exact_reward_regex(completion, answer):
    m = re.match(r"([^$]*)\$", completion)
    return float(m is not None and m.group(1) == answer)


ROWS += [
    _row(
        "addition_exact_reward",
        "08",
        w170_addition_exact_reward_strip_eos,
        "Compares the text before the first EOS without requiring an EOS, so '132' (the model never stopped) is paid.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w171_addition_exact_reward_last_eos,
        "Splits at the last EOS instead of the first, so what follows the first EOS counts ('132$7$' is not right).",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w172_addition_exact_reward_int_compare,
        "Compares the answers as integers, so leading zeros ('0132$') and surrounding spaces (' 132$') are accepted.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w173_addition_exact_reward_substring,
        "Checks that the answer occurs in the text before EOS instead of equalling it, so '1320$' is paid.",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w174_addition_exact_reward_must_end,
        (
            "Requires the whole completion to be the answer then EOS, so anything after the first EOS "
            "('132$7') makes it "
            "wrong."
        ),
    ),
    _row(
        "addition_exact_reward",
        "08",
        w175_addition_exact_reward_strip,
        "Strips whitespace before comparing, so ' 132$' and '132 $' are paid.",
    ),
    _row("addition_exact_reward", "08", r44_addition_exact_reward_startswith),
    _row("addition_exact_reward", "08", r45_addition_exact_reward_regex),
]

# ======================================================================================
# 08 completion_mask
# ======================================================================================


def w176_completion_mask_excludes_eos(completion_ids, eos_id):
    return (torch.cumsum((completion_ids == eos_id).long(), dim=-1) == 0).float()


def w177_completion_mask_argmax(completion_ids, eos_id):
    first = (completion_ids == eos_id).long().argmax(dim=-1, keepdim=True)
    positions = torch.arange(completion_ids.shape[-1])
    return (positions <= first).float()


def w178_completion_mask_roll(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    before = torch.cumsum(torch.roll(is_eos, shifts=1, dims=-1), dim=-1)
    return (before == 0).float()


def w179_completion_mask_bool(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return (torch.cumsum(is_eos, dim=-1) - is_eos) == 0


def w180_completion_mask_up_to_second_eos(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return (torch.cumsum(is_eos, dim=-1) <= 1).float()


def w181_completion_mask_dim_one(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    eos_before = torch.cumsum(is_eos, dim=1) - is_eos
    return (eos_before == 0).float()


def r46_completion_mask_cumprod_shift(completion_ids, eos_id):
    not_eos = (completion_ids != eos_id).float()
    alive = torch.cumprod(not_eos, dim=-1)
    ones = torch.ones_like(alive[..., :1])
    return torch.cat([ones, alive[..., :-1]], dim=-1)


def r47_completion_mask_loop(completion_ids, eos_id):
    L = completion_ids.shape[-1]
    flat = completion_ids.reshape(-1, L).tolist()
    rows = []
    for row in flat:
        end = row.index(eos_id) + 1 if eos_id in row else L
        rows.append([1.0] * end + [0.0] * (L - end))
    return torch.tensor(rows, dtype=torch.float32).reshape(completion_ids.shape)


def w182_completion_mask_scatter_clamped(completion_ids, eos_id):
    L = completion_ids.shape[-1]
    is_eos = completion_ids == eos_id
    has_eos = is_eos.any(dim=-1, keepdim=True)
    first = is_eos.int().argmax(dim=-1, keepdim=True)
    cut = torch.where(has_eos, first + 1, torch.full_like(first, L)).clamp(max=L - 1)
    marks = torch.zeros(completion_ids.shape, dtype=torch.float32).scatter_(-1, cut, 1.0)
    return (marks.cumsum(dim=-1) == 0).float()


ROWS += [
    _row(
        "completion_mask",
        "08",
        w176_completion_mask_excludes_eos,
        "Keeps only the tokens before the first EOS: the EOS itself is masked out.",
    ),
    _row(
        "completion_mask",
        "08",
        w177_completion_mask_argmax,
        "Finds the first EOS with argmax, which is 0 for a row without EOS, so such rows keep only their first token.",
    ),
    _row(
        "completion_mask",
        "08",
        w178_completion_mask_roll,
        (
            "Shifts the EOS flags with torch.roll, which wraps around: an EOS in the last position is moved to "
            "the front "
            "and masks the whole row."
        ),
    ),
    _row(
        "completion_mask",
        "08",
        w179_completion_mask_bool,
        "Returns a bool mask instead of float32.",
    ),
    _row(
        "completion_mask",
        "08",
        w180_completion_mask_up_to_second_eos,
        (
            "Keeps every token while at most one EOS has been seen, so the tokens after the first EOS up to and "
            "including a second EOS are kept."
        ),
    ),
    _row(
        "completion_mask",
        "08",
        w181_completion_mask_dim_one,
        (
            "Takes the cumulative sum over dim=1 instead of the last axis, which is wrong for ids with more than two "
            "dimensions (B, G, L)."
        ),
    ),
    _row("completion_mask", "08", r46_completion_mask_cumprod_shift),
    _row("completion_mask", "08", r47_completion_mask_loop),
    _row(
        "completion_mask",
        "08",
        w182_completion_mask_scatter_clamped,
        (
            "Marks the position after the first EOS with scatter_, clamping that index to L - 1, so a row without "
            "EOS (or with EOS in the last position) loses its last token."
        ),
    ),
]

# ======================================================================================
# 08 grpo_step
# ======================================================================================


def _c10_mask(completion_ids, eos_id, keep_eos=True, upto_second=False):
    is_eos = (completion_ids == eos_id).long()
    seen = torch.cumsum(is_eos, dim=-1)
    if upto_second:
        return (seen <= 1).float()
    if keep_eos:
        seen = seen - is_eos
    return (seen == 0).float()


def _c10_step(
    policy,
    ref_model,
    optimizer,
    prompts,
    completions,
    rewards,
    logp_old,
    eos_id,
    clip_eps,
    kl_coef,
    max_grad_norm,
    *,
    tiled=False,
    no_shift=False,
    zero_after_backward=False,
    clip_after_step=False,
    keep_eos=True,
    upto_second=False,
    tensor_out=False,
    group_major=False,
):
    B, G, L = completions.shape
    P = prompts.shape[1]
    if tiled:
        flat_prompts = prompts.repeat(G, 1)
    else:
        flat_prompts = repeat(prompts, "B P -> (B G) P", G=G)
    flat = rearrange(completions, "B G L -> (B G) L")
    if no_shift:
        ids = torch.cat([flat_prompts, flat], dim=1)
        start = P
    else:
        ids = torch.cat([flat_prompts, flat[:, :-1]], dim=1)
        start = P - 1

    def logp_of(model):
        logits = model(ids)[:, start : start + L, :]
        pattern = "(G B) L -> B G L" if group_major else "(B G) L -> B G L"
        return rearrange(gather_log_probs(logits, flat), pattern, G=G)

    logp = logp_of(policy)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = logp_of(ref_model)
    mask = _c10_mask(completions, eos_id, keep_eos=keep_eos, upto_second=upto_second)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    if not zero_after_backward:
        optimizer.zero_grad()
    loss.backward()
    if zero_after_backward:
        optimizer.zero_grad()
    if not clip_after_step:
        torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    if clip_after_step:
        torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    return loss.detach() if tensor_out else loss.item()


def w183_grpo_step_tiled_prompts(
    policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
    clip_eps=0.2, kl_coef=0.04, max_grad_norm=1.0,
):  # fmt: skip
    return _c10_step(
        policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
        clip_eps, kl_coef, max_grad_norm, tiled=True,
    )  # fmt: skip


def w184_grpo_step_no_shift(
    policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
    clip_eps=0.2, kl_coef=0.04, max_grad_norm=1.0,
):  # fmt: skip
    return _c10_step(
        policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
        clip_eps, kl_coef, max_grad_norm, no_shift=True,
    )  # fmt: skip


def w185_grpo_step_zero_grad_after_backward(
    policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
    clip_eps=0.2, kl_coef=0.04, max_grad_norm=1.0,
):  # fmt: skip
    return _c10_step(
        policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
        clip_eps, kl_coef, max_grad_norm, zero_after_backward=True,
    )  # fmt: skip


def w186_grpo_step_clip_after_step(
    policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
    clip_eps=0.2, kl_coef=0.04, max_grad_norm=1.0,
):  # fmt: skip
    return _c10_step(
        policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
        clip_eps, kl_coef, max_grad_norm, clip_after_step=True,
    )  # fmt: skip


def w187_grpo_step_mask_without_eos(
    policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
    clip_eps=0.2, kl_coef=0.04, max_grad_norm=1.0,
):  # fmt: skip
    return _c10_step(
        policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
        clip_eps, kl_coef, max_grad_norm, keep_eos=False,
    )  # fmt: skip


def w188_grpo_step_mask_to_second_eos(
    policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
    clip_eps=0.2, kl_coef=0.04, max_grad_norm=1.0,
):  # fmt: skip
    return _c10_step(
        policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
        clip_eps, kl_coef, max_grad_norm, upto_second=True,
    )  # fmt: skip


def w189_grpo_step_returns_tensor(
    policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
    clip_eps=0.2, kl_coef=0.04, max_grad_norm=1.0,
):  # fmt: skip
    return _c10_step(
        policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
        clip_eps, kl_coef, max_grad_norm, tensor_out=True,
    )  # fmt: skip


def w190_grpo_step_group_major_unflatten(
    policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
    clip_eps=0.2, kl_coef=0.04, max_grad_norm=1.0,
):  # fmt: skip
    return _c10_step(
        policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
        clip_eps, kl_coef, max_grad_norm, group_major=True,
    )  # fmt: skip


def r48_grpo_step_repeat_interleave(
    policy, ref_model, optimizer, prompts, completions, rewards, logp_old, eos_id,
    clip_eps=0.2, kl_coef=0.04, max_grad_norm=1.0,
):  # fmt: skip
    B, G, L = completions.shape
    P = prompts.shape[1]
    flat_completions = completions.reshape(B * G, L)
    # the last completion token predicts nothing: leave it out of the input
    ids = torch.cat([prompts.repeat_interleave(G, dim=0), flat_completions[:, :-1]], dim=1)

    def scores(model):
        logits = model(ids)[:, P - 1 :]
        return gather_log_probs(logits, flat_completions).view(B, G, L)

    logp = scores(policy)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = scores(ref_model)
    is_eos = completions == eos_id
    after_eos = torch.cumsum(is_eos.int(), dim=-1) - is_eos.int()
    mask = (after_eos < 1).to(torch.float32)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_norm=max_grad_norm)
    optimizer.step()
    return float(loss.detach())


def r49_grpo_step_zero_grad_first(
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
    optimizer.zero_grad()
    B, G, L = completions.shape
    P = prompts.shape[1]
    rows = rearrange(completions, "b g l -> (b g) l")
    inputs = torch.cat([repeat(prompts, "b p -> (b g) p", g=G), rows[:, : L - 1]], dim=1)

    def token_logps(model):
        scores = F.log_softmax(model(inputs)[:, P - 1 :, :], dim=-1)
        picked = scores.gather(-1, rows.long().unsqueeze(-1)).squeeze(-1)
        return rearrange(picked, "(b g) l -> b g l", g=G)

    logp = token_logps(policy)
    logp_ref = None
    if kl_coef > 0 and ref_model is not None:
        with torch.no_grad():
            logp_ref = token_logps(ref_model)
    alive = torch.cumprod((completions != eos_id).float(), dim=-1)
    mask = torch.cat([torch.ones_like(alive[..., :1]), alive[..., :-1]], dim=-1)
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(policy.parameters()), max_grad_norm)
    optimizer.step()
    return float(loss)


ROWS += [
    _row(
        "grpo_step",
        "08",
        w183_grpo_step_tiled_prompts,
        (
            "Repeats the prompts with prompts.repeat(G, 1) (tiled: p0, p1, p0, p1) instead of interleaved, so "
            "completions are paired with the wrong prompts when B > 1."
        ),
    ),
    _row(
        "grpo_step",
        "08",
        w184_grpo_step_no_shift,
        (
            "Feeds the whole completion and reads the logits from position P, so each token is scored by the "
            "logits that "
            "predict the next one (no shift)."
        ),
    ),
    _row(
        "grpo_step",
        "08",
        w185_grpo_step_zero_grad_after_backward,
        "Calls zero_grad after backward (just before the step), so the step uses zero gradients.",
    ),
    _row(
        "grpo_step",
        "08",
        w186_grpo_step_clip_after_step,
        "Clips the gradient norm after optimizer.step(), so the step uses the unclipped gradient.",
    ),
    _row(
        "grpo_step",
        "08",
        w187_grpo_step_mask_without_eos,
        "Its mask stops before the first EOS: the EOS token itself gets no advantage.",
    ),
    _row(
        "grpo_step",
        "08",
        w188_grpo_step_mask_to_second_eos,
        (
            "Its mask keeps every token while at most one EOS has been seen, so after the first EOS the tokens up to a "
            "second EOS count."
        ),
    ),
    _row(
        "grpo_step",
        "08",
        w189_grpo_step_returns_tensor,
        "Returns the loss as a detached tensor instead of a Python float.",
    ),
    _row(
        "grpo_step",
        "08",
        w190_grpo_step_group_major_unflatten,
        (
            "Flattens the completions as (B G) but reshapes the log-probs back with '(G B) L -> B G L', "
            "scrambling which "
            "completion each row belongs to."
        ),
    ),
    _row("grpo_step", "08", r48_grpo_step_repeat_interleave),
    _row("grpo_step", "08", r49_grpo_step_zero_grad_first),
]

# ======================================================================================
# 09 answer_reward
# ======================================================================================


def _c10_text(completion):
    return completion if isinstance(completion, str) else completion[-1]["content"]


def w191_answer_reward_first_message(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(None)
            continue
        text = completion if isinstance(completion, str) else completion[0]["content"]
        rewards.append(math_answer_reward(text, str(truth)))
    return rewards


def w192_answer_reward_zero_for_none(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(0.0)
            continue
        rewards.append(math_answer_reward(_c10_text(completion), str(truth)))
    return rewards


def w193_answer_reward_indexed_by_prompt(prompts, completions, answer, **kwargs):
    keys = [str(p) for p in prompts]
    unique = list(dict.fromkeys(keys))
    G = max(len(completions) // max(len(unique), 1), 1)
    rewards = []
    for i, completion in enumerate(completions):
        truth = answer[i // G]
        if truth is None:
            rewards.append(None)
            continue
        rewards.append(math_answer_reward(_c10_text(completion), str(truth)))
    return rewards


def w194_answer_reward_joined_messages(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(None)
            continue
        if isinstance(completion, str):
            text = completion
        else:
            text = "\n".join(message["content"] for message in completion)
        rewards.append(math_answer_reward(text, str(truth)))
    return rewards


def w195_answer_reward_numpy_array(prompts, completions, answer, **kwargs):
    rewards = [
        np.nan if truth is None else math_answer_reward(_c10_text(c), str(truth))
        for c, truth in zip(completions, answer)
    ]
    return np.asarray(rewards, dtype=np.float64)


def w196_answer_reward_dict_message(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(None)
            continue
        text = completion["content"] if isinstance(completion, dict) else completion
        rewards.append(math_answer_reward(text, str(truth)))
    return rewards


def r50_answer_reward_comprehension(prompts, completions, answer, **kwargs):
    def text_of(c):
        if isinstance(c, list):
            return c[-1].get("content", "") if c else ""
        return c

    return [
        None if truth is None else float(math_answer_reward(text_of(c), f"{truth}"))
        for c, truth in zip(completions, answer)
    ]


def r51_answer_reward_loop(prompts, completions, answer, **kwargs):
    out = []
    for i in range(len(completions)):
        if answer[i] is None:
            out.append(None)
            continue
        completion = completions[i]
        if not isinstance(completion, str):
            completion = completion[len(completion) - 1]["content"]
        out.append(math_answer_reward(completion, str(answer[i])))
    return out


ROWS += [
    _row(
        "answer_reward",
        "09",
        w191_answer_reward_first_message,
        (
            "Reads the first message of a conversational completion instead of the last, so after a tool call "
            "it scores "
            "the wrong message."
        ),
    ),
    _row(
        "answer_reward",
        "09",
        w192_answer_reward_zero_for_none,
        "Returns 0.0 for a row whose answer is None instead of None.",
    ),
    _row(
        "answer_reward",
        "09",
        w193_answer_reward_indexed_by_prompt,
        "Indexes the answers by prompt (answer[i // G]) although TRL has already repeated every column G times.",
    ),
    _row(
        "answer_reward",
        "09",
        w194_answer_reward_joined_messages,
        (
            "Joins the contents of every message of a conversational completion instead of reading the last one, so an "
            "answer in a tool message is paid."
        ),
    ),
    _row(
        "answer_reward",
        "09",
        w195_answer_reward_numpy_array,
        "Returns a numpy array with NaN for missing answers instead of a list of floats and None.",
    ),
    _row(
        "answer_reward",
        "09",
        w196_answer_reward_dict_message,
        (
            "Expects a conversational completion to be one message dict, so a list of messages is passed on as "
            "it is and "
            "fails."
        ),
    ),
    _row("answer_reward", "09", r50_answer_reward_comprehension),
    _row("answer_reward", "09", r51_answer_reward_loop),
]

# ======================================================================================
# 09 completion_logps
# ======================================================================================


def _c10_logps(
    model,
    sequences,
    prompt_mask,
    eos_id,
    temperature,
    *,
    positions=True,
    use_temperature=True,
    shift=True,
    hide_padding=True,
    keep_eos=True,
    multiply_temperature=False,
    no_grad=False,
):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    is_eos = (completion_ids == eos_id).long()
    seen = torch.cumsum(is_eos, dim=-1)
    if keep_eos:
        seen = seen - is_eos
    mask = (seen == 0).float()
    if hide_padding:
        attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    else:
        attention_mask = torch.ones_like(sequences)
    kwargs = {"input_ids": sequences, "attention_mask": attention_mask}
    if positions:
        kwargs["position_ids"] = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    if no_grad:
        with torch.no_grad():
            logits = model(**kwargs).logits
    else:
        logits = model(**kwargs).logits
    logits = logits[:, P - 1 : -1] if shift else logits[:, P:]
    logits = logits.float()
    if multiply_temperature:
        logits = logits * temperature
    elif use_temperature:
        logits = logits / temperature
    logp = torch.log_softmax(logits, dim=-1).gather(-1, completion_ids[..., None]).squeeze(-1)
    return logp, mask


def w197_completion_logps_no_positions(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _c10_logps(model, sequences, prompt_mask, eos_id, temperature, positions=False)


def w198_completion_logps_no_temperature(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _c10_logps(model, sequences, prompt_mask, eos_id, temperature, use_temperature=False)


def w199_completion_logps_no_shift(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _c10_logps(model, sequences, prompt_mask, eos_id, temperature, shift=False)


def w200_completion_logps_padding_attended(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _c10_logps(model, sequences, prompt_mask, eos_id, temperature, hide_padding=False)


def w201_completion_logps_mask_without_eos(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _c10_logps(model, sequences, prompt_mask, eos_id, temperature, keep_eos=False)


def w202_completion_logps_times_temperature(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _c10_logps(model, sequences, prompt_mask, eos_id, temperature, multiply_temperature=True)


def w203_completion_logps_no_grad(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _c10_logps(model, sequences, prompt_mask, eos_id, temperature, no_grad=True)


def r52_completion_logps_gather_helper(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion = sequences[:, P:]
    not_eos = (completion != eos_id).float()
    alive = torch.cumprod(not_eos, dim=-1)
    mask = torch.cat([torch.ones_like(alive[:, :1]), alive[:, :-1]], dim=1)
    attention = torch.cat([prompt_mask.long(), torch.ones_like(completion)], dim=1)
    position_ids = torch.clamp(torch.cumsum(attention, dim=1) - 1, min=0)
    out = model(input_ids=sequences, attention_mask=attention, position_ids=position_ids)
    logits = out.logits[:, P - 1 : P - 1 + completion.shape[1], :].float()
    return gather_log_probs(logits / temperature, completion), mask


def r53_completion_logps_cross_entropy(model, sequences, prompt_mask, eos_id, temperature=1.0):
    B, P = prompt_mask.shape
    targets = sequences[:, P:]
    L = targets.shape[1]
    eos_seen = torch.cumsum((targets == eos_id).int(), dim=1)
    first_or_before = (eos_seen == 0) | ((eos_seen == 1) & (targets == eos_id))
    mask = first_or_before.float()
    attention_mask = torch.ones_like(sequences)
    attention_mask[:, :P] = prompt_mask
    position_ids = (torch.cumsum(attention_mask, dim=1) - 1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids).logits
    scores = logits[:, P - 1 : P - 1 + L].float() / temperature
    nll = F.cross_entropy(scores.reshape(B * L, -1), targets.reshape(-1), reduction="none")
    return -nll.view(B, L), mask


ROWS += [
    _row(
        "completion_logps",
        "09",
        w197_completion_logps_no_positions,
        (
            "Passes no position_ids, so a model that does not derive positions from the attention mask (GPT-2) numbers "
            "left-padded rows from the padding."
        ),
    ),
    _row(
        "completion_logps",
        "09",
        w198_completion_logps_no_temperature,
        "Does not divide the logits by temperature before log_softmax.",
    ),
    _row(
        "completion_logps",
        "09",
        w199_completion_logps_no_shift,
        (
            "Takes logits[:, P:] instead of logits[:, P - 1:-1], so every token is scored by the logits that "
            "predict the "
            "next one."
        ),
    ),
    _row(
        "completion_logps",
        "09",
        w200_completion_logps_padding_attended,
        "Uses an attention mask of all ones, so the left padding of short prompts is attended to.",
    ),
    _row(
        "completion_logps",
        "09",
        w201_completion_logps_mask_without_eos,
        "Its mask stops before the first EOS instead of including it.",
    ),
    _row(
        "completion_logps",
        "09",
        w202_completion_logps_times_temperature,
        "Multiplies the logits by temperature instead of dividing by it.",
    ),
    _row(
        "completion_logps",
        "09",
        w203_completion_logps_no_grad,
        "Runs the forward pass under torch.no_grad(), so logp carries no gradient.",
    ),
    _row("completion_logps", "09", r52_completion_logps_gather_helper),
    _row("completion_logps", "09", r53_completion_logps_cross_entropy),
]

# ======================================================================================
# 09 grpo_config_kwargs
# ======================================================================================

_C10_SWITCHES = (
    "algo",
    "adv_estimator",
    "policy_loss",
    "dynamic_sampling",
    "overlong_cache",
    "kl_placement",
    "whiten_advantages",
)
_C10_LOSS_TYPES = {"seq-mean-token-mean": "grpo", "token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}


def _c10_config(
    cfg,
    num_processes,
    *,
    true_division=False,
    steps_in_rounds=False,
    batch_in_prompts=False,
    keep_bias_correction=False,
    loss_types=None,
    bool_scale=False,
    switches=_C10_SWITCHES,
    plain_constant=False,
    high_none=False,
    ignore_processes=False,
    round_down=False,
):
    defaults = LMRLConfig()
    for switch in switches:
        if getattr(cfg, switch) != getattr(defaults, switch):
            raise ValueError(f"cfg.{switch}: no GRPOConfig field for {getattr(cfg, switch)!r}")
    B, G, K, M = cfg.prompts_per_step, cfg.group_size, cfg.update_epochs, cfg.num_minibatches
    procs = 1 if ignore_processes else num_processes
    unit = B if batch_in_prompts else B * G
    if true_division:
        minibatch = unit / M
        per_process = minibatch / procs
    else:
        minibatch = unit // M
        per_process = minibatch // procs
    micro = cfg.micro_batch_size or per_process
    if not round_down and (unit % M or minibatch % procs or per_process % micro):
        raise ValueError(f"num_processes: {unit} completions do not split evenly")
    accumulation = per_process / micro if true_division else per_process // micro
    steps_per_round = 1 if steps_in_rounds else K * M
    schedule = cfg.lr_schedule
    if not plain_constant and schedule == "constant" and cfg.warmup_iterations > 0:
        schedule = "constant_with_warmup"
    kwargs = {
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
        "epsilon": cfg.clip_eps,
        "epsilon_high": cfg.clip_eps_high if (high_none or cfg.clip_eps_high is not None) else cfg.clip_eps,
        "loss_type": (loss_types or _C10_LOSS_TYPES)[cfg.loss_agg],
        "scale_rewards": cfg.normalize_std if bool_scale else ("group" if cfg.normalize_std else "none"),
        "mask_truncated_completions": cfg.overlong_filter,
        "seed": cfg.seed,
    }
    if not keep_bias_correction:
        kwargs["use_bias_correction_kl"] = False
    return kwargs


def w204_grpo_config_kwargs_float_sizes(cfg, num_processes=1):
    return _c10_config(cfg, num_processes, true_division=True)


def w205_grpo_config_kwargs_steps_are_rounds(cfg, num_processes=1):
    return _c10_config(cfg, num_processes, steps_in_rounds=True)


def w206_grpo_config_kwargs_batch_in_prompts(cfg, num_processes=1):
    return _c10_config(cfg, num_processes, batch_in_prompts=True)


def w207_grpo_config_kwargs_bias_correction_default(cfg, num_processes=1):
    return _c10_config(cfg, num_processes, keep_bias_correction=True)


def w208_grpo_config_kwargs_loss_types_swapped(cfg, num_processes=1):
    swapped = {"seq-mean-token-mean": "dapo", "token-mean": "grpo", "seq-mean-token-sum-norm": "dr_grpo"}
    return _c10_config(cfg, num_processes, loss_types=swapped)


def w209_grpo_config_kwargs_bool_scale_rewards(cfg, num_processes=1):
    return _c10_config(cfg, num_processes, bool_scale=True)


def w210_grpo_config_kwargs_only_adv_estimator(cfg, num_processes=1):
    return _c10_config(cfg, num_processes, switches=("adv_estimator",))


def w211_grpo_config_kwargs_constant_with_warmup(cfg, num_processes=1):
    return _c10_config(cfg, num_processes, plain_constant=True)


def w212_grpo_config_kwargs_epsilon_high_none(cfg, num_processes=1):
    return _c10_config(cfg, num_processes, high_none=True)


def w213_grpo_config_kwargs_global_batch(cfg, num_processes=1):
    return _c10_config(cfg, num_processes, ignore_processes=True)


def w214_grpo_config_kwargs_round_down(cfg, num_processes=1):
    return _c10_config(cfg, num_processes, round_down=True)


def r54_grpo_config_kwargs_flat(cfg, num_processes=1):
    base = LMRLConfig()
    for name in ("algo", "adv_estimator", "policy_loss", "dynamic_sampling", "overlong_cache", "kl_placement"):
        if getattr(cfg, name) != getattr(base, name):
            raise ValueError(f"cfg.{name}={getattr(cfg, name)!r} has no TRL GRPOConfig equivalent")
    if cfg.whiten_advantages != base.whiten_advantages:
        raise ValueError("cfg.whiten_advantages: TRL's GRPOConfig cannot whiten advantages")
    completions = cfg.prompts_per_step * cfg.group_size
    if completions % cfg.num_minibatches:
        raise ValueError("num_minibatches: the completions do not split evenly")
    minibatch = completions // cfg.num_minibatches
    if minibatch % num_processes:
        raise ValueError("num_processes: a minibatch does not split over the processes")
    share = minibatch // num_processes
    micro = share if cfg.micro_batch_size is None else cfg.micro_batch_size
    if share % micro:
        raise ValueError("micro_batch_size: does not divide one process's share")
    accumulation = share // micro
    optimiser_steps = cfg.update_epochs * cfg.num_minibatches
    warm = cfg.warmup_iterations > 0
    return dict(
        num_generations=cfg.group_size,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=cfg.num_minibatches * accumulation,
        num_iterations=cfg.update_epochs,
        max_steps=cfg.iterations * optimiser_steps,
        warmup_steps=cfg.warmup_iterations * optimiser_steps,
        lr_scheduler_type="constant_with_warmup" if cfg.lr_schedule == "constant" and warm else cfg.lr_schedule,
        learning_rate=cfg.lr,
        max_grad_norm=cfg.max_grad_norm,
        max_completion_length=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        beta=cfg.kl_coef,
        use_bias_correction_kl=False,
        epsilon=cfg.clip_eps,
        epsilon_high=cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high,
        loss_type={"token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}.get(cfg.loss_agg, "grpo"),
        scale_rewards="group" if cfg.normalize_std else "none",
        mask_truncated_completions=cfg.overlong_filter,
        seed=cfg.seed,
    )


def r55_grpo_config_kwargs_table(cfg, num_processes=1):
    grpo_defaults = LMRLConfig()
    unsupported = [
        name
        for name in (
            "algo",
            "adv_estimator",
            "policy_loss",
            "dynamic_sampling",
            "overlong_cache",
            "kl_placement",
            "whiten_advantages",
        )
        if getattr(cfg, name) != getattr(grpo_defaults, name)
    ]
    if unsupported:
        raise ValueError(f"cfg.{unsupported[0]}: TRL's GRPOConfig has no field for it")
    total = cfg.prompts_per_step * cfg.group_size
    per_step, rest = divmod(total, cfg.num_minibatches)
    if rest:
        raise ValueError(f"num_minibatches: {total} completions do not split into {cfg.num_minibatches}")
    per_process, rest = divmod(per_step, num_processes)
    if rest:
        raise ValueError(f"num_processes: a minibatch of {per_step} does not split over {num_processes}")
    micro = cfg.micro_batch_size if cfg.micro_batch_size else per_process
    accumulation, rest = divmod(per_process, micro)
    if rest:
        raise ValueError(f"micro_batch_size: {micro} does not divide {per_process}")
    steps = cfg.update_epochs * cfg.num_minibatches
    renamed = {
        "learning_rate": "lr",
        "max_grad_norm": "max_grad_norm",
        "max_completion_length": "max_new_tokens",
        "temperature": "temperature",
        "top_p": "top_p",
        "beta": "kl_coef",
        "epsilon": "clip_eps",
        "mask_truncated_completions": "overlong_filter",
        "seed": "seed",
        "num_generations": "group_size",
        "num_iterations": "update_epochs",
    }
    kwargs = {trl: getattr(cfg, course) for trl, course in renamed.items()}
    kwargs.update(
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=cfg.num_minibatches * accumulation,
        max_steps=cfg.iterations * steps,
        warmup_steps=cfg.warmup_iterations * steps,
        lr_scheduler_type=(
            "constant_with_warmup"
            if (cfg.lr_schedule, cfg.warmup_iterations > 0) == ("constant", True)
            else cfg.lr_schedule
        ),
        use_bias_correction_kl=False,
        epsilon_high=cfg.clip_eps_high if cfg.clip_eps_high is not None else cfg.clip_eps,
        loss_type=["grpo", "dapo", "dr_grpo"][
            ["seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm"].index(cfg.loss_agg)
        ],
        scale_rewards=["none", "group"][bool(cfg.normalize_std)],
    )
    return kwargs


ROWS += [
    _row(
        "grpo_config_kwargs",
        "09",
        w204_grpo_config_kwargs_float_sizes,
        (
            "Divides the batch sizes with / instead of //, so per_device_train_batch_size and the accumulation counts "
            "are floats."
        ),
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w205_grpo_config_kwargs_steps_are_rounds,
        (
            "Sets max_steps and warmup_steps to the course's rounds (iterations, warmup_iterations) instead of "
            "optimiser "
            "steps (times update_epochs * num_minibatches)."
        ),
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w206_grpo_config_kwargs_batch_in_prompts,
        "Counts per_device_train_batch_size in prompts (B / M) instead of completions (B * G / M).",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w207_grpo_config_kwargs_bias_correction_default,
        "Leaves out use_bias_correction_kl=False, so TRL's default (True) multiplies the k3 term by the ratio.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w208_grpo_config_kwargs_loss_types_swapped,
        "Maps seq-mean-token-mean to 'dapo' and token-mean to 'grpo' (the two loss types swapped).",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w209_grpo_config_kwargs_bool_scale_rewards,
        "Passes scale_rewards as the boolean normalize_std (older TRL's spelling) instead of 'group' or 'none'.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w210_grpo_config_kwargs_only_adv_estimator,
        (
            "Refuses only a non-default adv_estimator; the other switches (algo, policy_loss, "
            "dynamic_sampling, ...) are "
            "dropped silently."
        ),
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w211_grpo_config_kwargs_constant_with_warmup,
        "Passes lr_schedule 'constant' through unchanged even with a warm-up, which HF's 'constant' ignores.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w212_grpo_config_kwargs_epsilon_high_none,
        "Passes epsilon_high = cfg.clip_eps_high even when it is None instead of falling back to clip_eps.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w213_grpo_config_kwargs_global_batch,
        (
            "Ignores num_processes: per_device_train_batch_size and the accumulation count are those of the whole "
            "minibatch, not one process's share."
        ),
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w214_grpo_config_kwargs_round_down,
        "Rounds sizes that do not split evenly down with // instead of raising ValueError.",
    ),
    _row("grpo_config_kwargs", "09", r54_grpo_config_kwargs_flat),
    _row("grpo_config_kwargs", "09", r55_grpo_config_kwargs_table),
]

# ======================================================================================
# 10 pass_at_k
# ======================================================================================


def _c10_broadcast(n, c, k):
    return torch.broadcast_tensors(*(torch.as_tensor(x, dtype=torch.float64) for x in (n, c, k)))


def _c10_product(n, c, k, first=1):
    j = torch.arange(int(c.max()) if c.numel() else 0, dtype=torch.float64)
    i = (n - c + first)[..., None] + j
    factors = torch.where(j < c[..., None], 1 - k[..., None] / i, torch.ones((), dtype=torch.float64))
    return 1 - factors.prod(dim=-1)


def w215_pass_at_k_lgamma(n, c, k):
    n, c, k = _c10_broadcast(n, c, k)

    def log_comb(a, b):
        return torch.lgamma(a + 1) - torch.lgamma(b + 1) - torch.lgamma(a - b + 1)

    estimate = 1 - torch.exp(log_comb(n - c, k)) / torch.exp(log_comb(n, k))
    return torch.where(n - c < k, (c > 0).double(), estimate)


def w216_pass_at_k_plug_in(n, c, k):
    n, c, k = _c10_broadcast(n, c, k)
    return 1 - (1 - c / n) ** k


def w217_pass_at_k_one_when_short(n, c, k):
    n, c, k = _c10_broadcast(n, c, k)
    return torch.where(n - c < k, torch.ones_like(n), _c10_product(n, c, k))


def w218_pass_at_k_float32(n, c, k):
    n, c, k = _c10_broadcast(n, c, k)
    return torch.where(n - c < k, (c > 0).double(), _c10_product(n, c, k)).float()


def w219_pass_at_k_range_shifted(n, c, k):
    n, c, k = _c10_broadcast(n, c, k)
    return torch.where(n - c < k, (c > 0).double(), _c10_product(n, c, k, first=0))


def w220_pass_at_k_comb_k_over_n(n, c, k):
    shape = torch.broadcast_shapes(*(torch.as_tensor(x).shape for x in (n, c, k)))
    nn_, cc, kk = (torch.as_tensor(x).expand(shape).reshape(-1).tolist() for x in (n, c, k))
    out = [1.0 - math.comb(a - b, m) / math.comb(a, m) for a, b, m in zip(nn_, cc, kk)]
    return torch.tensor(out, dtype=torch.float64).reshape(shape)


def w221_pass_at_k_python_float(n, c, k):
    if all(isinstance(x, int) for x in (n, c, k)):
        if n - c < k:
            return float(c > 0)
        return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))
    n, c, k = _c10_broadcast(n, c, k)
    return torch.where(n - c < k, (c > 0).double(), _c10_product(n, c, k))


def r56_pass_at_k_exact_comb(n, c, k):
    shape = torch.broadcast_shapes(*(torch.as_tensor(x).shape for x in (n, c, k)))
    flat = [torch.as_tensor(x).expand(shape).reshape(-1).tolist() for x in (n, c, k)]
    out = []
    for a, b, m in zip(*flat):
        a, b, m = int(a), int(b), int(m)
        if b == 0:
            out.append(0.0)
        elif a - b < m:
            out.append(1.0)
        else:
            out.append(1.0 - math.comb(a - b, m) / math.comb(a, m))
    return torch.tensor(out, dtype=torch.float64).reshape(shape)


def r57_pass_at_k_log_space(n, c, k):
    n, c, k = _c10_broadcast(n, c, k)
    width = max(int(c.max()), 1)
    j = torch.arange(width, dtype=torch.float64)
    i = (n - c + 1)[..., None] + j
    terms = torch.log1p(-(k[..., None] / i).clamp(max=1.0))
    terms = torch.where(j < c[..., None], terms, torch.zeros((), dtype=torch.float64))
    estimate = -torch.expm1(terms.sum(dim=-1))
    estimate = torch.where(c == 0, torch.zeros_like(estimate), estimate)
    return torch.where(n - c < k, (c > 0).to(torch.float64), estimate)


ROWS += [
    _row(
        "pass_at_k",
        "10",
        w215_pass_at_k_lgamma,
        (
            "Computes each binomial as exp(lgamma(...)) and divides them instead of the product: both overflow to inf "
            "for large n (C(5000, 200)), giving NaN."
        ),
    ),
    _row(
        "pass_at_k",
        "10",
        w216_pass_at_k_plug_in,
        "Uses the biased plug-in 1 - (1 - c/n)^k (drawing with replacement) instead of the unbiased estimator.",
    ),
    _row(
        "pass_at_k",
        "10",
        w217_pass_at_k_one_when_short,
        "Returns 1 whenever n - c < k, also when c = 0 and k > n, where pass@n is 0.",
    ),
    _row(
        "pass_at_k",
        "10",
        w218_pass_at_k_float32,
        "Casts the result to float32 instead of returning float64.",
    ),
    _row(
        "pass_at_k",
        "10",
        w219_pass_at_k_range_shifted,
        "Runs the product over i = n - c, ..., n - 1 instead of n - c + 1, ..., n (the range shifted down by one).",
    ),
    _row(
        "pass_at_k",
        "10",
        w220_pass_at_k_comb_k_over_n,
        "Uses 1 - comb(n - c, k) / comb(n, k) with no guard for k > n, where comb(n, k) = 0 and the division fails.",
    ),
    _row(
        "pass_at_k",
        "10",
        w221_pass_at_k_python_float,
        "Returns a Python float when n, c and k are ints instead of a 0-dimensional float64 tensor.",
    ),
    _row("pass_at_k", "10", r56_pass_at_k_exact_comb),
    _row("pass_at_k", "10", r57_pass_at_k_log_space),
]

# ======================================================================================
# 10 aggregation_token_weight
# ======================================================================================


def _c10_float_length(length):
    return length.to(length.dtype if length.is_floating_point() else torch.get_default_dtype())


def w222_aggregation_token_weight_nonempty_count(length, mode: str, max_len=None):
    o = _c10_float_length(length)
    N = int((o > 0).sum())
    L = o.max() if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / (N * L)
    return torch.where(o > 0, w, torch.zeros_like(w))


def w223_aggregation_token_weight_own_length(length, mode: str, max_len=None):
    o = _c10_float_length(length)
    N = o.numel()
    L = o.clamp(min=1) if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / (N * L)
    return torch.where(o > 0, w, torch.zeros_like(w))


def w224_aggregation_token_weight_integer_division(length, mode: str, max_len=None):
    N = length.numel()
    L = length.max() if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1 // (N * length.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(length) // length.sum()
    else:
        w = torch.ones_like(length) // (N * L)
    w = torch.where(length > 0, w, torch.zeros_like(w))
    return w.to(torch.get_default_dtype()) if not length.is_floating_point() else w


def w225_aggregation_token_weight_empty_weighted(length, mode: str, max_len=None):
    o = _c10_float_length(length)
    N = o.numel()
    L = o.max() if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        return torch.where(o > 0, 1 / (N * o.clamp(min=1)), torch.zeros_like(o))
    if mode == "token-mean":
        return torch.ones_like(o) / o.sum()
    return torch.ones_like(o) / (N * L)


def w226_aggregation_token_weight_no_n(length, mode: str, max_len=None):
    o = _c10_float_length(length)
    N = o.numel()
    L = o.max() if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1 / o.clamp(min=1)
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / (N * L)
    return torch.where(o > 0, w, torch.zeros_like(w))


def w227_aggregation_token_weight_first_axis(length, mode: str, max_len=None):
    o = _c10_float_length(length)
    N = o.shape[0] if o.dim() else 1
    L = o.max() if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / (N * L)
    return torch.where(o > 0, w, torch.zeros_like(w))


def r58_aggregation_token_weight_loop(length, mode: str, max_len=None):
    values = [float(x) for x in length.reshape(-1).tolist()]
    N = len(values)
    longest = max(values) if max_len is None else float(max_len)
    total = sum(values)
    out = []
    for o in values:
        if o == 0:
            out.append(0.0)
        elif mode == "seq-mean-token-mean":
            out.append(1.0 / (N * o))
        elif mode == "token-mean":
            out.append(1.0 / total)
        else:
            out.append(1.0 / (N * longest))
    dtype = length.dtype if length.is_floating_point() else torch.get_default_dtype()
    return torch.tensor(out, dtype=dtype).reshape(length.shape)


def r59_aggregation_token_weight_vectorised(length, mode: str, max_len=None):
    lengths = length.double()
    N = lengths.numel()
    if mode == "token-mean":
        w = torch.full_like(lengths, 1.0) / lengths.sum()
    elif mode == "seq-mean-token-mean":
        w = 1.0 / (N * torch.where(lengths > 0, lengths, torch.ones_like(lengths)))
    elif mode == "seq-mean-token-sum-norm":
        L = lengths.max() if max_len is None else torch.tensor(float(max_len), dtype=torch.float64)
        w = torch.full_like(lengths, 1.0) / (N * L)
    else:
        raise ValueError(f"mode: unknown {mode!r}")
    w = w.masked_fill(lengths == 0, 0.0)
    return w.to(length.dtype if length.is_floating_point() else torch.get_default_dtype())


ROWS += [
    _row(
        "aggregation_token_weight",
        "10",
        w222_aggregation_token_weight_nonempty_count,
        "Counts only the non-empty responses in N, although a response of length 0 still counts as a response.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w223_aggregation_token_weight_own_length,
        "With max_len None, uses each response's own length instead of the longest length in the Dr. GRPO mode.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w224_aggregation_token_weight_integer_division,
        "Divides with // (floor division) instead of /, so the weights are floored, mostly to 0.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w225_aggregation_token_weight_empty_weighted,
        "Gives empty responses a nonzero weight in the token-mean and Dr. GRPO modes (only the GRPO mode zeroes them).",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w226_aggregation_token_weight_no_n,
        "Forgets the 1/N of the mean over responses in the GRPO mode: w = 1/|o_i|.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w227_aggregation_token_weight_first_axis,
        "Takes N as length.shape[0] instead of the number of entries, wrong for a multi-dimensional length.",
    ),
    _row("aggregation_token_weight", "10", r58_aggregation_token_weight_loop),
    _row("aggregation_token_weight", "10", r59_aggregation_token_weight_vectorised),
]

# ======================================================================================
# 10 completion_style
# ======================================================================================


def _c10_style(
    text,
    n_digits,
    *,
    last_eos=False,
    eos_optional=False,
    loose_totals=False,
    empty_direct=False,
    fixed_three=False,
    empty_filler=False,
    digits_optional=False,
    strip=False,
    prefix_match=False,
):
    if last_eos:
        body, eos, _ = text.rpartition("$")
    else:
        body, eos, _ = text.partition("$")
    if not eos and not eos_optional:
        return "malformed"
    if not eos:
        body = text
    if strip:
        body = body.strip()
    direct = r"[0-9]*" if empty_direct else r"[0-9]+"
    if prefix_match:
        if re.match(direct, body) and body[:1].isdigit():
            return "direct"
    elif re.fullmatch(direct, body):
        return "direct"
    tail = r"[0-9]*" if digits_optional else r"[0-9]+"
    inner = r"[^\[\]]*" if empty_filler else r"[^\[\]]+"
    m = re.fullmatch(r"\[(" + inner + r")\](" + tail + ")", body)
    if m is None:
        return "malformed"
    content = m.group(1)
    if re.fullmatch(r"\.*" if empty_filler else r"\.+", content):
        return "filler"
    totals = content.split(",")
    wanted = 3 if fixed_three else n_digits
    total = r"[0-9]{1,2}" if loose_totals else r"1?[0-9]"
    if len(totals) == wanted and all(re.fullmatch(total, t) for t in totals):
        return "scratchpad"
    return "malformed"


def w228_completion_style_last_eos(text: str, n_digits: int = 3) -> str:
    return _c10_style(text, n_digits, last_eos=True)


def w229_completion_style_eos_optional(text: str, n_digits: int = 3) -> str:
    return _c10_style(text, n_digits, eos_optional=True)


def w230_completion_style_two_digit_totals(text: str, n_digits: int = 3) -> str:
    return _c10_style(text, n_digits, loose_totals=True)


def w231_completion_style_empty_direct(text: str, n_digits: int = 3) -> str:
    return _c10_style(text, n_digits, empty_direct=True)


def w232_completion_style_three_totals(text: str, n_digits: int = 3) -> str:
    return _c10_style(text, n_digits, fixed_three=True)


def w233_completion_style_empty_filler(text: str, n_digits: int = 3) -> str:
    return _c10_style(text, n_digits, empty_filler=True)


def w234_completion_style_no_answer_digits(text: str, n_digits: int = 3) -> str:
    return _c10_style(text, n_digits, digits_optional=True)


def w235_completion_style_stripped(text: str, n_digits: int = 3) -> str:
    return _c10_style(text, n_digits, strip=True)


def w236_completion_style_match_prefix(text: str, n_digits: int = 3) -> str:
    return _c10_style(text, n_digits, prefix_match=True)


def r60_completion_style_string_methods(text: str, n_digits: int = 3) -> str:
    if "$" not in text:
        return "malformed"
    body = text[: text.index("$")]
    if body.isdigit() and body.isascii():
        return "direct"
    if not body.startswith("[") or body.count("[") != 1 or body.count("]") != 1:
        return "malformed"
    close = body.index("]")
    inside, answer = body[1:close], body[close + 1 :]
    if not (answer.isdigit() and answer.isascii()) or not inside:
        return "malformed"
    if set(inside) == {"."}:
        return "filler"
    parts = inside.split(",")
    if len(parts) != n_digits:
        return "malformed"
    for part in parts:
        if not (part.isdigit() and part.isascii()):
            return "malformed"
        if len(part) > 1 and part[0] == "0":
            return "malformed"
        if int(part) > 19:
            return "malformed"
    return "scratchpad"


def r61_completion_style_one_regex(text: str, n_digits: int = 3) -> str:
    body = text.split("$", 1)[0] if "$" in text else None
    if body is None:
        return "malformed"
    total = r"(?:1[0-9]|[0-9])"
    if re.fullmatch(r"[0-9]+", body):
        return "direct"
    if re.fullmatch(r"\[\.+\][0-9]+", body):
        return "filler"
    if n_digits >= 1 and re.fullmatch(r"\[" + total + r"(?:," + total + r"){" + str(n_digits - 1) + r"}\][0-9]+", body):
        return "scratchpad"
    return "malformed"


ROWS += [
    _row(
        "completion_style",
        "10",
        w228_completion_style_last_eos,
        "Reads up to the last '$' instead of the first, so text after the first EOS is judged too.",
    ),
    _row(
        "completion_style",
        "10",
        w229_completion_style_eos_optional,
        (
            "Does not require an EOS: a completion without '$' (it never stopped) is classified by its whole text "
            "instead of being malformed."
        ),
    ),
    _row(
        "completion_style",
        "10",
        w230_completion_style_two_digit_totals,
        (
            "Accepts any one- or two-digit total ([0-9]{1,2}), so totals of 20 or more and leading zeros pass as a "
            "scratchpad."
        ),
    ),
    _row(
        "completion_style",
        "10",
        w231_completion_style_empty_direct,
        "Matches direct answers with [0-9]*, so an empty completion '$' is 'direct' instead of malformed.",
    ),
    _row(
        "completion_style",
        "10",
        w232_completion_style_three_totals,
        "Ignores n_digits and always expects three column totals.",
    ),
    _row(
        "completion_style",
        "10",
        w233_completion_style_empty_filler,
        "Allows zero dots in a filler bracket, so an empty bracket '[]1045$' is 'filler' instead of malformed.",
    ),
    _row(
        "completion_style",
        "10",
        w234_completion_style_no_answer_digits,
        "Allows no digits after the bracket ([0-9]*), so '[15,14,10]$' is a scratchpad instead of malformed.",
    ),
    _row(
        "completion_style",
        "10",
        w235_completion_style_stripped,
        "Strips whitespace from the text before EOS, so ' 1045$' or '1045 $' is 'direct' instead of malformed.",
    ),
    _row(
        "completion_style",
        "10",
        w236_completion_style_match_prefix,
        (
            "Tests 'direct' with re.match (a prefix) instead of re.fullmatch, so anything that starts with a digit "
            "('10,45$') is 'direct'."
        ),
    ),
    _row("completion_style", "10", r60_completion_style_string_methods),
    _row("completion_style", "10", r61_completion_style_one_regex),
]

# ======================================================================================
# 10 style_share
# ======================================================================================


def w237_style_share_per_prompt(labels, style: str) -> float:
    rows = np.asarray(labels)
    if rows.size == 0:
        raise ValueError("labels: empty")
    if rows.ndim < 2:
        return float((rows == style).mean())
    hits = (rows == style).reshape(rows.shape[0], -1).any(axis=1)
    return float(hits.mean())


def w238_style_share_empty_zero(labels, style: str) -> float:
    flat = np.asarray(labels).reshape(-1)
    if flat.size == 0:
        return 0.0
    return float((flat == style).mean())


def w239_style_share_without_malformed(labels, style: str) -> float:
    flat = np.asarray(labels).reshape(-1)
    if flat.size == 0:
        raise ValueError("labels: empty")
    counted = flat[flat != "malformed"]
    if counted.size == 0:
        return 0.0
    return float((counted == style).mean())


def w240_style_share_list_count(labels, style: str) -> float:
    labels = list(labels)
    if not labels:
        raise ValueError("labels: empty")
    return labels.count(style) / len(labels)


def w241_style_share_percent(labels, style: str) -> float:
    flat = np.asarray(labels).reshape(-1)
    if flat.size == 0:
        raise ValueError("labels: empty")
    return float(100.0 * (flat == style).mean())


def r62_style_share_recursive(labels, style: str) -> float:
    counts = Counter()

    def walk(x):
        if isinstance(x, str):
            counts[x] += 1
        else:
            for item in x:
                walk(item)

    walk(labels.tolist() if isinstance(labels, np.ndarray) else labels)
    total = sum(counts.values())
    if total == 0:
        raise ValueError("labels: no completion to take a share of")
    return counts[style] / total


def r63_style_share_counter(labels, style: str) -> float:
    flat = np.ravel(np.array(labels, dtype=object))
    if len(flat) == 0:
        raise ValueError("labels: empty, no share to take")
    counts = Counter(flat.tolist())
    return counts[style] / len(flat)


def w242_style_share_per_row_denominator(labels, style: str) -> float:
    if len(labels) == 0:
        raise ValueError("labels: empty")
    hits = int((np.asarray(labels) == style).sum())
    return hits / len(labels)


ROWS += [
    _row(
        "style_share",
        "10",
        w237_style_share_per_prompt,
        "For nested labels counts the prompts with at least one completion of the style, instead of the completions.",
    ),
    _row(
        "style_share",
        "10",
        w238_style_share_empty_zero,
        "Returns 0.0 for an empty list of labels instead of raising ValueError.",
    ),
    _row(
        "style_share",
        "10",
        w239_style_share_without_malformed,
        "Leaves malformed completions out of the denominator.",
    ),
    _row(
        "style_share",
        "10",
        w240_style_share_list_count,
        "Uses list.count, which works only on a flat list: a nested [B][G] list counts 0 and a 2-D array raises.",
    ),
    _row(
        "style_share",
        "10",
        w241_style_share_percent,
        "Returns a percentage (0 to 100) instead of a fraction in [0, 1].",
    ),
    _row("style_share", "10", r62_style_share_recursive),
    _row("style_share", "10", r63_style_share_counter),
    _row(
        "style_share",
        "10",
        w242_style_share_per_row_denominator,
        (
            "Divides the count by len(labels), which for nested [B][G] labels or a 2-D array is the number of "
            "prompts, not of completions."
        ),
    ),
]

# ======================================================================================
# 11 rloo_advantages
# ======================================================================================


def w243_rloo_advantages_divide_by_g(rewards):
    G = rewards.shape[-1]
    others = (rewards.sum(dim=-1, keepdim=True) - rewards) / G
    return rewards - others


def w244_rloo_advantages_single_nan(rewards):
    G = rewards.shape[-1]
    others = (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1) if G > 1 else rewards * float("nan")
    return rewards - others


def w245_rloo_advantages_batch_sum(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    n = rewards.numel()
    others = (rewards.sum() - rewards) / (n - 1)
    return rewards - others


def w246_rloo_advantages_own_included(rewards):
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    return rewards - rewards.mean(dim=-1, keepdim=True)


def w247_rloo_advantages_verl_single(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return rewards.clone()
    others = (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1)
    return rewards - others


def w248_rloo_advantages_sign(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    others = (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1)
    return others - rewards


def r64_rloo_advantages_scaled_centring(rewards):
    G = rewards.shape[-1]
    if G < 2:
        return rewards * 0
    return (rewards - rewards.mean(dim=-1, keepdim=True)) * (G / (G - 1))


def r65_rloo_advantages_loop(rewards):
    B, G = rewards.shape
    out = torch.zeros_like(rewards)
    for i in range(G):
        others = torch.cat([rewards[:, :i], rewards[:, i + 1 :]], dim=1)
        if others.shape[1]:
            out[:, i] = rewards[:, i] - others.mean(dim=1)
    return out


ROWS += [
    _row(
        "rloo_advantages",
        "11",
        w243_rloo_advantages_divide_by_g,
        "Divides the sum of the others by G instead of G - 1.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w244_rloo_advantages_single_nan,
        "Has no answer for a group of one: its leave-one-out mean is 0/0, so the advantage is NaN instead of 0.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w245_rloo_advantages_batch_sum,
        "Leaves one out of the whole batch (sums over every reward) instead of out of the prompt's own group.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w246_rloo_advantages_own_included,
        (
            "Subtracts the whole group's mean, its own reward included (GRPO's centring), instead of the mean of the "
            "others."
        ),
    ),
    _row(
        "rloo_advantages",
        "11",
        w247_rloo_advantages_verl_single,
        "Keeps the raw reward for a group of one (verl's convention) instead of 0.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w248_rloo_advantages_sign,
        "Returns the others' mean minus the reward, the opposite sign.",
    ),
    _row("rloo_advantages", "11", r64_rloo_advantages_scaled_centring),
    _row("rloo_advantages", "11", r65_rloo_advantages_loop),
]

# ======================================================================================
# 11 gspo_sequence_log_ratio
# ======================================================================================


def w249_gspo_sequence_log_ratio_multiply_mask(logp, logp_old, mask):
    m = mask.to(logp.dtype)
    log_ratio = (logp - logp_old.detach()) * m
    return log_ratio.sum(dim=-1) / m.sum(dim=-1).clamp(min=1)


def w250_gspo_sequence_log_ratio_empty_nan(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    return log_ratio.sum(dim=-1) / valid.sum(dim=-1)


def w251_gspo_sequence_log_ratio_sum(logp, logp_old, mask):
    valid = mask.bool()
    return torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp)).sum(dim=-1)


def w252_gspo_sequence_log_ratio_old_attached(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old, torch.zeros_like(logp))
    return log_ratio.sum(dim=-1) / valid.sum(dim=-1).clamp(min=1)


def w253_gspo_sequence_log_ratio_mean_over_t(logp, logp_old, mask):
    valid = mask.bool()
    return torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp)).mean(dim=-1)


def w254_gspo_sequence_log_ratio_ratio(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    return torch.exp(log_ratio.sum(dim=-1) / valid.sum(dim=-1).clamp(min=1))


def r66_gspo_sequence_log_ratio_masked_fill(logp, logp_old, mask):
    pad = ~mask.bool()
    new = logp.masked_fill(pad, 0.0)
    old = logp_old.detach().masked_fill(pad, 0.0)
    count = (~pad).sum(dim=-1).clamp(min=1).to(logp.dtype)
    return new.sum(dim=-1) / count - old.sum(dim=-1) / count


def r67_gspo_sequence_log_ratio_index_rows(logp, logp_old, mask):
    T = logp.shape[-1]
    new = logp.reshape(-1, T)
    old = logp_old.detach().reshape(-1, T)
    keep = mask.reshape(-1, T).bool()
    rows = []
    for i in range(new.shape[0]):
        sel = keep[i]
        if bool(sel.any()):
            rows.append((new[i][sel] - old[i][sel]).mean())
        else:
            rows.append(new[i][sel].sum() * 0.0)
    return torch.stack(rows).reshape(logp.shape[:-1])


ROWS += [
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w249_gspo_sequence_log_ratio_multiply_mask,
        "Multiplies the log ratios by the mask instead of selecting, so NaN or inf in the padding poisons the result.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w250_gspo_sequence_log_ratio_empty_nan,
        "Divides by the number of valid tokens without clamping it, so an empty response gets 0/0 = NaN instead of 0.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w251_gspo_sequence_log_ratio_sum,
        (
            "Sums the token log ratios (the log of the whole sequence's ratio) instead of averaging them over "
            "the valid "
            "tokens."
        ),
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w252_gspo_sequence_log_ratio_old_attached,
        "Does not detach logp_old, so a gradient flows into it.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w253_gspo_sequence_log_ratio_mean_over_t,
        "Averages over all T positions (padding counted in the denominator) instead of the valid tokens.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w254_gspo_sequence_log_ratio_ratio,
        "Returns the ratio s_i itself (exp of the mean) instead of log s_i.",
    ),
    _row("gspo_sequence_log_ratio", "11", r66_gspo_sequence_log_ratio_masked_fill),
    _row("gspo_sequence_log_ratio", "11", r67_gspo_sequence_log_ratio_index_rows),
]

# ======================================================================================
# 11 cispo_loss
# ======================================================================================


def w255_cispo_loss_weight_attached(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high)
    return -weight * adv.detach() * logp


def w256_cispo_loss_trl_cap(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=clip_eps_high).detach()
    return -weight * adv.detach() * logp


def w257_cispo_loss_symmetric_floor(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    eps_low = clip_eps_high if clip_eps is None else clip_eps
    weight = torch.clamp(ratio, 1.0 - eps_low, 1.0 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def w258_cispo_loss_adv_attached(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high).detach()
    return -weight * adv * logp


def w259_cispo_loss_ratio_not_logp(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high).detach()
    return -weight * adv.detach() * ratio


def w260_cispo_loss_floor_ignored(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    weight = torch.clamp(ratio, max=1.0 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def w261_cispo_loss_inverse_ratio(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp_old.detach() - logp)
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def r68_cispo_loss_no_grad_weight(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    with torch.no_grad():
        weight = (logp - logp_old).exp()
        weight = torch.minimum(weight, torch.full_like(weight, 1.0 + clip_eps_high))
        if clip_eps is not None:
            weight = torch.maximum(weight, torch.full_like(weight, 1.0 - clip_eps))
        scale = weight * adv
    return -(scale * logp)


def r69_cispo_loss_where(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = (logp.detach() - logp_old.detach()).exp()
    cap = 1.0 + clip_eps_high
    weight = torch.where(ratio > cap, torch.full_like(ratio, cap), ratio)
    if clip_eps is not None:
        floor = 1.0 - clip_eps
        weight = torch.where(weight < floor, torch.full_like(weight, floor), weight)
    return -logp * weight * adv.detach()


ROWS += [
    _row(
        "cispo_loss",
        "11",
        w255_cispo_loss_weight_attached,
        "Does not detach the clipped weight, so the gradient gets an extra term through the ratio.",
    ),
    _row(
        "cispo_loss",
        "11",
        w256_cispo_loss_trl_cap,
        "Caps the weight at clip_eps_high itself (TRL's CISPO convention) instead of 1 + clip_eps_high.",
    ),
    _row(
        "cispo_loss",
        "11",
        w257_cispo_loss_symmetric_floor,
        "With clip_eps None, floors the weight at 1 - clip_eps_high instead of leaving it without a lower bound.",
    ),
    _row(
        "cispo_loss",
        "11",
        w258_cispo_loss_adv_attached,
        "Does not detach adv, so a gradient flows into the advantages.",
    ),
    _row(
        "cispo_loss",
        "11",
        w259_cispo_loss_ratio_not_logp,
        (
            "Multiplies the weight by the ratio instead of logp (a PPO-style surrogate), so the gradient is -w A ratio "
            "instead of -w A."
        ),
    ),
    _row(
        "cispo_loss",
        "11",
        w260_cispo_loss_floor_ignored,
        "Ignores a given clip_eps: the weight is never floored at 1 - clip_eps.",
    ),
    _row(
        "cispo_loss",
        "11",
        w261_cispo_loss_inverse_ratio,
        "Computes the ratio as exp(logp_old - logp), the inverse of pi_theta / pi_old.",
    ),
    _row("cispo_loss", "11", r68_cispo_loss_no_grad_weight),
    _row("cispo_loss", "11", r69_cispo_loss_where),
]
