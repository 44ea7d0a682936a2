"""An eleventh class of students, written blind: over-defensive students who validate or "fix" inputs the
exercises allow, students who code only the docstring's example, students who carry lecture code or another
chapter's convention into the wrong place, students who copy a paper's equation where the course's convention
differs, return-type and API students (numpy, lists, tuples in the wrong order, aliasing), dtype students, and
edge-value students (gamma = 0 or 1, k = n, a single token, an all-padding row)."""

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


# ---------------------------------------------------------------- discounted_return (00)


def w01_discounted_return_rejects_gamma_one(rewards, gamma):
    if not 0.0 <= gamma < 1.0:
        raise ValueError("gamma must be in [0, 1)")
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    return (rewards * discounts).sum(dim=-1)


def w02_discounted_return_only_1d(rewards, gamma):
    total = torch.zeros((), dtype=rewards.dtype)
    for t in range(len(rewards)):
        total = total + gamma**t * rewards[t]
    return total


def w03_discounted_return_default_dtype_accumulator(rewards, gamma):
    total = torch.zeros(rewards.shape[:-1])
    for t in range(rewards.shape[-1]):
        total += gamma**t * rewards[..., t]
    return total


def w04_discounted_return_python_float(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    return (rewards * discounts).sum(dim=-1).tolist()


def w05_discounted_return_powers_from_one(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(1, T + 1, dtype=rewards.dtype)
    return (rewards * discounts).sum(dim=-1)


def w06_discounted_return_keepdim(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    return (rewards * discounts).sum(dim=-1, keepdim=True)


def r01_discounted_return_horner(rewards, gamma):
    total = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1] - 1, -1, -1):
        total = rewards[..., t] + gamma * total
    return total


def r02_discounted_return_cumprod(rewards, gamma):
    T = rewards.shape[-1]
    factors = torch.full((T,), float(gamma), dtype=rewards.dtype)
    factors[0] = 1.0
    discounts = torch.cumprod(factors, dim=0)
    return torch.einsum("...t,t->...", rewards, discounts)


ROWS += [
    _row(
        "discounted_return",
        "00",
        w01_discounted_return_rejects_gamma_one,
        ("Over-defensive: raises ValueError for gamma = 1, which the exercise allows (gamma in [0, 1])."),
    ),
    _row(
        "discounted_return",
        "00",
        w02_discounted_return_only_1d,
        (
            "Loops over len(rewards), the first axis, so it only handles a single 1-D episode; a "
            "batch [..., T] is summed over the wrong axis."
        ),
    ),
    _row(
        "discounted_return",
        "00",
        w03_discounted_return_default_dtype_accumulator,
        (
            "Accumulates into torch.zeros(batch shape), which has the default dtype (float32): "
            "float64 rewards come back as float32."
        ),
    ),
    _row(
        "discounted_return",
        "00",
        w04_discounted_return_python_float,
        "Returns .tolist() (a Python float or list) instead of a tensor.",
    ),
    _row(
        "discounted_return",
        "00",
        w05_discounted_return_powers_from_one,
        "Discounts start at gamma^1 instead of gamma^0: the first reward is discounted too.",
    ),
    _row(
        "discounted_return",
        "00",
        w06_discounted_return_keepdim,
        (
            "Sums with keepdim=True, so the result has a trailing axis of size 1 ([..., 1], and "
            "[1] for a single episode) instead of shape [...]."
        ),
    ),
    _row("discounted_return", "00", r01_discounted_return_horner),
    _row("discounted_return", "00", r02_discounted_return_cumprod),
]


# ---------------------------------------------------------------- reward_to_go (00)


def w07_reward_to_go_inplace(rewards, gamma):
    T = rewards.shape[-1]
    for t in range(T - 2, -1, -1):
        rewards[..., t] += gamma * rewards[..., t + 1]
    return rewards


def w08_reward_to_go_forward_loop(rewards, gamma):
    returns = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1]):
        running = rewards[..., t] + gamma * running
        returns[..., t] = running
    return returns


def w09_reward_to_go_undiscounted_flip(rewards, gamma):
    return torch.flip(torch.cumsum(torch.flip(rewards, dims=[-1]), dim=-1), dims=[-1])


def w10_reward_to_go_skips_gamma_zero(rewards, gamma):
    if gamma == 0:
        return torch.zeros_like(rewards)
    returns = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        returns[..., t] = running
    return returns


def w11_reward_to_go_matrix_float32(rewards, gamma):
    T = rewards.shape[-1]
    idx = torch.arange(T)
    exponent = (idx[None, :] - idx[:, None]).float()
    weights = torch.where(exponent >= 0, gamma**exponent, torch.zeros(()))
    return rewards.float() @ weights.T


def w12_reward_to_go_numpy(rewards, gamma):
    r = rewards.detach().cpu().numpy()
    out = np.zeros_like(r)
    running = np.zeros_like(r[..., 0])
    for t in reversed(range(r.shape[-1])):
        running = r[..., t] + gamma * running
        out[..., t] = running
    return out


def r03_reward_to_go_matrix(rewards, gamma):
    T = rewards.shape[-1]
    idx = torch.arange(T)
    exponent = (idx[None, :] - idx[:, None]).to(rewards.dtype)
    upper = idx[None, :] >= idx[:, None]
    weights = torch.where(
        upper,
        torch.pow(torch.tensor(float(gamma), dtype=rewards.dtype), exponent.clamp(min=0)),
        torch.zeros((), dtype=rewards.dtype),
    )
    return torch.einsum("...k,tk->...t", rewards, weights)


def r04_reward_to_go_list_stack(rewards, gamma):
    columns = []
    running = torch.zeros_like(rewards[..., -1])
    for t in range(rewards.shape[-1] - 1, -1, -1):
        running = gamma * running + rewards[..., t]
        columns.append(running)
    return torch.stack(columns[::-1], dim=-1)


ROWS += [
    _row(
        "reward_to_go",
        "00",
        w07_reward_to_go_inplace,
        (
            "Accumulates in place into the caller's rewards tensor (+=) and returns that same "
            "object, so the input is modified."
        ),
    ),
    _row(
        "reward_to_go",
        "00",
        w08_reward_to_go_forward_loop,
        (
            "Runs the recursion forward in time (t = 0 first), computing a discounted sum of past "
            "rewards instead of the return from each step on."
        ),
    ),
    _row(
        "reward_to_go",
        "00",
        w09_reward_to_go_undiscounted_flip,
        ("Reverse cumulative sum that ignores gamma: undiscounted reward-to-go (right only for gamma = 1)."),
    ),
    _row(
        "reward_to_go",
        "00",
        w10_reward_to_go_skips_gamma_zero,
        (
            "Edge-value special case gone wrong: for gamma = 0 returns zeros, but the reward-to-go "
            "is then the rewards themselves."
        ),
    ),
    _row(
        "reward_to_go",
        "00",
        w11_reward_to_go_matrix_float32,
        ("Casts to float32 (rewards.float() and float32 weights), so float64 input comes back float32."),
    ),
    _row(
        "reward_to_go",
        "00",
        w12_reward_to_go_numpy,
        "Computes in numpy and returns a numpy array instead of a torch tensor.",
    ),
    _row("reward_to_go", "00", r03_reward_to_go_matrix),
    _row("reward_to_go", "00", r04_reward_to_go_list_stack),
]


# ---------------------------------------------------------------- sort_inclusion_ordering_reward (01)


def w13_sort_inclusion_ordering_reward_set_inclusion(prompt, response):
    # counts distinct prompt tokens found: a prompt token that occurs twice counts once
    rewards = []
    flat_p = prompt.expand(torch.broadcast_shapes(prompt.shape, response.shape)).reshape(-1, prompt.shape[-1])
    flat_r = response.expand(torch.broadcast_shapes(prompt.shape, response.shape)).reshape(-1, response.shape[-1])
    for p, r in zip(flat_p.tolist(), flat_r.tolist()):
        inclusion = len(set(p) & set(r))
        ordering = sum(a <= b for a, b in zip(r[:-1], r[1:]))
        rewards.append(float(inclusion + ordering))
    shape = torch.broadcast_shapes(prompt.shape, response.shape)[:-1]
    return torch.tensor(rewards, dtype=torch.float32).reshape(shape)


def w14_sort_inclusion_ordering_reward_strict_order(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-1).sum(dim=-1)
    ordering = (response[..., :-1] < response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w15_sort_inclusion_ordering_reward_no_broadcast(prompt, response):
    if prompt.shape != response.shape:
        raise ValueError("prompt and response must have the same shape")
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-1).sum(dim=-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w16_sort_inclusion_ordering_reward_long_dtype(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-1).sum(dim=-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return inclusion + ordering


def w17_sort_inclusion_ordering_reward_response_side(prompt, response):
    # counts response tokens found in the prompt: a repeated right token earns twice
    matches = response[..., :, None] == prompt[..., None, :]
    inclusion = matches.any(dim=-1).sum(dim=-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def w18_sort_inclusion_ordering_reward_prompt_pairs(prompt, response):
    matches = prompt[..., :, None] == response[..., None, :]
    inclusion = matches.any(dim=-1).sum(dim=-1)
    ordering = (prompt[..., :-1] <= prompt[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def r05_sort_inclusion_ordering_reward_isin_loop(prompt, response):
    shape = torch.broadcast_shapes(prompt.shape, response.shape)
    p = prompt.expand(shape)
    r = response.expand(shape)
    inclusion = torch.zeros(shape[:-1], dtype=torch.float32)
    for i in range(shape[-1]):
        inclusion += (r == p[..., i : i + 1]).any(dim=-1).float()
    ordering = (torch.diff(r, dim=-1) >= 0).float().sum(dim=-1)
    return inclusion + ordering


def r06_sort_inclusion_ordering_reward_searchsorted(prompt, response):
    p, r = torch.broadcast_tensors(prompt, response)
    r_sorted = torch.sort(r, dim=-1).values.contiguous()
    where = torch.searchsorted(r_sorted, p.contiguous()).clamp(max=r.shape[-1] - 1)
    found = torch.gather(r_sorted, -1, where) == p
    pairs_in_order = r[..., 1:] >= r[..., :-1]
    return found.sum(dim=-1).to(torch.float32) + pairs_in_order.sum(dim=-1).to(torch.float32)


ROWS += [
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w13_sort_inclusion_ordering_reward_set_inclusion,
        (
            "Inclusion counts the distinct prompt tokens (a set intersection), so a prompt token "
            "that occurs twice earns only one point."
        ),
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w14_sort_inclusion_ordering_reward_strict_order,
        ("Ordering uses strict < instead of <=: an adjacent pair of equal tokens earns no point."),
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w15_sort_inclusion_ordering_reward_no_broadcast,
        (
            "Over-defensive: raises ValueError unless prompt and response have the same shape, "
            "rejecting the (B, 1, T) prompt against (B, G, T) responses that the docstring allows."
        ),
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w16_sort_inclusion_ordering_reward_long_dtype,
        "Returns the integer (int64) sum instead of a float32 tensor.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w17_sort_inclusion_ordering_reward_response_side,
        (
            "Inclusion counts response tokens found in the prompt instead of prompt tokens found "
            "in the response, so a response repeating one right token earns a point per "
            "repetition."
        ),
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w18_sort_inclusion_ordering_reward_prompt_pairs,
        "Counts the ordering points on the prompt's adjacent pairs instead of the response's.",
    ),
    _row("sort_inclusion_ordering_reward", "01", r05_sort_inclusion_ordering_reward_isin_loop),
    _row("sort_inclusion_ordering_reward", "01", r06_sort_inclusion_ordering_reward_searchsorted),
]


# ---------------------------------------------------------------- math_answer_reward (01)


def _c11_balanced_boxed(text):
    """The content of the last \\boxed{...} with balanced braces, or None."""
    start = text.rfind("\\boxed{")
    while start != -1:
        depth = 1
        begin = start + len("\\boxed{")
        for i in range(begin, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return text[begin:i]
        start = text.rfind("\\boxed{", 0, start)
    return None


def _c11_stated(text):
    found = list(re.finditer(r"\banswer(?:\s+is\b\s*:?|\s*:)", text, re.IGNORECASE))
    if not found:
        return None
    rest = text[found[-1].end() :].lstrip()
    rest = re.split(r"[\n<]", rest)[0]
    return re.split(r"[.!?](?:\s|$)", rest)[0]


def _c11_normalise(text):
    text = text.replace("\\$", "").replace("$", "").strip()
    while text and text[-1] in ".,;:!?)":
        if text[-1] == ")" and text.count(")") <= text.count("("):
            break
        text = text[:-1].rstrip()
    return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)


_c11_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"


def _c11_same(answer, truth):
    if re.fullmatch(_c11_NUMBER, answer) and re.fullmatch(_c11_NUMBER, truth):
        return float(answer) == float(truth)
    return answer == truth


def w19_math_answer_reward_first_boxed(response_text: str, ground_truth: str) -> float:
    m = re.search(r"\\boxed\{", response_text)
    answer = None
    if m:
        depth, begin = 1, m.end()
        for i in range(begin, len(response_text)):
            depth += {"{": 1, "}": -1}.get(response_text[i], 0)
            if depth == 0:
                answer = response_text[begin:i]
                break
    if answer is None:
        answer = _c11_stated(response_text)
    if answer is None:
        return 0.0
    answer, truth = _c11_normalise(answer), _c11_normalise(ground_truth)
    if not answer:
        return 0.0
    return float(_c11_same(answer, truth))


def w20_math_answer_reward_last_number_fallback(response_text: str, ground_truth: str) -> float:
    answer = _c11_balanced_boxed(response_text)
    if answer is None:
        answer = _c11_stated(response_text)
    if answer is None:
        numbers = re.findall(r"-?\d+(?:\.\d+)?", response_text)
        if not numbers:
            return 0.0
        answer = numbers[-1]
    answer, truth = _c11_normalise(answer), _c11_normalise(ground_truth)
    if not answer:
        return 0.0
    return float(_c11_same(answer, truth))


def w21_math_answer_reward_string_only(response_text: str, ground_truth: str) -> float:
    answer = _c11_balanced_boxed(response_text)
    if answer is None:
        answer = _c11_stated(response_text)
    if answer is None:
        return 0.0
    answer, truth = _c11_normalise(answer), _c11_normalise(ground_truth)
    if not answer:
        return 0.0
    return float(answer == truth)


def w22_math_answer_reward_truth_not_normalised(response_text: str, ground_truth: str) -> float:
    answer = _c11_balanced_boxed(response_text)
    if answer is None:
        answer = _c11_stated(response_text)
    if answer is None:
        return 0.0
    answer = _c11_normalise(answer)
    if not answer:
        return 0.0
    return float(_c11_same(answer, ground_truth))


def w23_math_answer_reward_flat_boxed_regex(response_text: str, ground_truth: str) -> float:
    boxed = re.findall(r"\\boxed\{([^{}]*)\}", response_text)
    answer = boxed[-1] if boxed else _c11_stated(response_text)
    if answer is None:
        return 0.0
    answer, truth = _c11_normalise(answer), _c11_normalise(ground_truth)
    if not answer:
        return 0.0
    return float(_c11_same(answer, truth))


def w24_math_answer_reward_no_commas(response_text: str, ground_truth: str) -> float:
    answer = _c11_balanced_boxed(response_text)
    if answer is None:
        answer = _c11_stated(response_text)
    if answer is None:
        return 0.0

    def norm(text):
        text = text.replace("\\$", "").replace("$", "").strip()
        while text and text[-1] in ".,;:!?)":
            if text[-1] == ")" and text.count(")") <= text.count("("):
                break
            text = text[:-1].rstrip()
        return text

    answer, truth = norm(answer), norm(ground_truth)
    if not answer:
        return 0.0
    return float(_c11_same(answer, truth))


def w25_math_answer_reward_lowercase_statement(response_text: str, ground_truth: str) -> float:
    answer = _c11_balanced_boxed(response_text)
    if answer is None:
        found = list(re.finditer(r"\banswer(?:\s+is\b\s*:?|\s*:)", response_text))
        if found:
            rest = response_text[found[-1].end() :].lstrip()
            rest = re.split(r"[\n<]", rest)[0]
            answer = re.split(r"[.!?](?:\s|$)", rest)[0]
    if answer is None:
        return 0.0
    answer, truth = _c11_normalise(answer), _c11_normalise(ground_truth)
    if not answer:
        return 0.0
    return float(_c11_same(answer, truth))


def r07_math_answer_reward_stack(response_text: str, ground_truth: str) -> float:
    # every \boxed{ opening, matched with a stack; keep the last one that closes
    contents = []
    for m in re.finditer(r"\\boxed\{", response_text):
        depth = 0
        for i in range(m.end() - 1, len(response_text)):
            if response_text[i] == "{":
                depth += 1
            elif response_text[i] == "}":
                depth -= 1
                if depth == 0:
                    contents.append((m.start(), response_text[m.end() : i]))
                    break
    if contents:
        answer = max(contents)[1]
    else:
        answer = _c11_stated(response_text)
        if answer is None:
            return 0.0
    answer = _c11_normalise(answer)
    truth = _c11_normalise(ground_truth)
    if answer == "":
        return 0.0
    try:
        if re.fullmatch(_c11_NUMBER, answer) and re.fullmatch(_c11_NUMBER, truth):
            return 1.0 if float(answer) == float(truth) else 0.0
    except ValueError:
        pass
    return 1.0 if answer == truth else 0.0


ROWS += [
    _row(
        "math_answer_reward",
        "01",
        w19_math_answer_reward_first_boxed,
        "Takes the first \\boxed{...} of the response instead of the last one.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w20_math_answer_reward_last_number_fallback,
        (
            "Falls back to the last number in the text when there is neither a \\boxed{} nor an "
            "answer statement, which the exercise forbids."
        ),
    ),
    _row(
        "math_answer_reward",
        "01",
        w21_math_answer_reward_string_only,
        ('Compares as strings only: numerically equal answers written differently ("14" vs "14.0") earn 0.'),
    ),
    _row(
        "math_answer_reward",
        "01",
        w22_math_answer_reward_truth_not_normalised,
        (
            "Normalises the extracted answer but not the ground truth, so a ground truth with "
            "spaces, $ or thousands separators never matches."
        ),
    ),
    _row(
        "math_answer_reward",
        "01",
        w23_math_answer_reward_flat_boxed_regex,
        (
            "Finds \\boxed{} with a regex that allows no nested braces, so \\boxed{\\frac{1}{2}} "
            "is not read as a boxed answer."
        ),
    ),
    _row(
        "math_answer_reward",
        "01",
        w24_math_answer_reward_no_commas,
        'Never removes thousands separators: "1,000" does not equal "1000".',
    ),
    _row(
        "math_answer_reward",
        "01",
        w25_math_answer_reward_lowercase_statement,
        (
            "Matches the answer statement case-sensitively (lower-case 'answer' only, as in the "
            "example), so 'Answer: 7' or 'ANSWER IS 7' finds no answer."
        ),
    ),
    _row("math_answer_reward", "01", r07_math_answer_reward_stack),
]


# ---------------------------------------------------------------- gather_log_probs (02)


def w26_gather_log_probs_shifted(logits, tokens):
    # lecture habit: logits at t predict token t + 1
    logp_all = torch.log_softmax(logits[..., :-1, :], dim=-1)
    picked = logp_all.gather(-1, tokens[..., 1:].long().unsqueeze(-1)).squeeze(-1)
    return F.pad(picked, (1, 0))


def w27_gather_log_probs_log_of_softmax(logits, tokens):
    probs = torch.softmax(logits, dim=-1)
    return torch.log(probs.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1))


def w28_gather_log_probs_only_2d(logits, tokens):
    T = tokens.shape[0]
    logp_all = torch.log_softmax(logits, dim=-1)
    return logp_all[torch.arange(T), tokens]


def w29_gather_log_probs_detached_copy(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=-1)
    picked = logp_all.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)
    return torch.tensor(picked.tolist(), dtype=logits.dtype)


def r08_gather_log_probs_logsumexp(logits, tokens):
    chosen = torch.take_along_dim(logits, tokens.long()[..., None], dim=-1)[..., 0]
    return chosen - torch.logsumexp(logits, dim=-1)


def r09_gather_log_probs_cross_entropy(logits, tokens):
    V = logits.shape[-1]
    flat = F.cross_entropy(logits.reshape(-1, V), tokens.reshape(-1).long(), reduction="none")
    return -flat.reshape(tokens.shape)


ROWS += [
    _row(
        "gather_log_probs",
        "02",
        w26_gather_log_probs_shifted,
        (
            "Shifts by one as in a language-model lecture (logits at t score token t + 1) although "
            "the exercise says the caller already shifted; the first position is padded with 0."
        ),
    ),
    _row(
        "gather_log_probs",
        "02",
        w27_gather_log_probs_log_of_softmax,
        (
            "Takes log(softmax(logits)) instead of log_softmax: a token whose probability "
            "underflows (e.g. a logit 200 below the others in float32) gets log(0) = -inf instead "
            "of its finite log-probability."
        ),
    ),
    _row(
        "gather_log_probs",
        "02",
        w28_gather_log_probs_only_2d,
        (
            "Indexes with arange(T) on the first axis, so only a single [T, V] sequence works; "
            "batched [..., T, V] input fails or is wrong."
        ),
    ),
    _row(
        "gather_log_probs",
        "02",
        w29_gather_log_probs_detached_copy,
        (
            "Rebuilds the result with torch.tensor(....tolist()), which drops the graph: the "
            "output is not differentiable in logits."
        ),
    ),
    _row("gather_log_probs", "02", r08_gather_log_probs_logsumexp),
    _row("gather_log_probs", "02", r09_gather_log_probs_cross_entropy),
]


# ---------------------------------------------------------------- reinforce_loss (02)


def w30_reinforce_loss_rejects_empty_mask(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    valid = mask.bool()
    if valid.sum() == 0:
        raise ValueError("mask has no valid token")
    return per_token[valid].sum() / valid.sum()


def w31_reinforce_loss_times_mask(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    m = mask.to(logp.dtype)
    return (per_token * m).sum() / m.sum().clamp(min=1)


def w32_reinforce_loss_sequence_mean(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    m = mask.to(logp.dtype)
    per_seq = (per_token * m).sum(-1) / m.sum(-1).clamp(min=1)
    return per_seq.mean()


def w33_reinforce_loss_no_detach(logp, deltas, mask=None):
    per_token = -(deltas.unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    valid = mask.bool()
    total = torch.where(valid, per_token, torch.zeros_like(per_token)).sum()
    return total / valid.sum().clamp(min=1)


def w34_reinforce_loss_objective_sign(logp, deltas, mask=None):
    per_token = deltas.detach().unsqueeze(-1) * logp
    if mask is None:
        return per_token.mean()
    valid = mask.bool()
    total = torch.where(valid, per_token, torch.zeros_like(per_token)).sum()
    return total / valid.sum().clamp(min=1)


def r10_reinforce_loss_masked_select(logp, deltas, mask=None):
    weights = deltas.detach()[..., None].expand_as(logp)
    if mask is None:
        mask = torch.ones_like(logp, dtype=torch.bool)
    valid = mask != 0
    if not bool(valid.any()):
        return torch.where(valid, logp, torch.zeros_like(logp)).sum()
    return -(weights[valid] * logp[valid]).mean()


ROWS += [
    _row(
        "reinforce_loss",
        "02",
        w30_reinforce_loss_rejects_empty_mask,
        ("Over-defensive: raises ValueError on a mask with no valid token, where the exercise asks for 0."),
    ),
    _row(
        "reinforce_loss",
        "02",
        w31_reinforce_loss_times_mask,
        (
            "Masks by multiplying (per_token * mask), so a NaN or inf in the padding's logp still "
            "poisons the sum (0 * inf = NaN)."
        ),
    ),
    _row(
        "reinforce_loss",
        "02",
        w32_reinforce_loss_sequence_mean,
        (
            "Carries chapter 06's per-sequence mean: averages each response's tokens, then the "
            "responses, instead of one token mean over the whole batch."
        ),
    ),
    _row(
        "reinforce_loss",
        "02",
        w33_reinforce_loss_no_detach,
        "Does not detach deltas, so a gradient flows into the weights when they require grad.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w34_reinforce_loss_objective_sign,
        ("Returns the objective deltas * logp (the paper's quantity to maximise) instead of its negative, the loss."),
    ),
    _row("reinforce_loss", "02", r10_reinforce_loss_masked_select),
]


# ---------------------------------------------------------------- mc_policy_gradient (02)


def w35_mc_policy_gradient_loss_gradient(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return -(reward_per_action[actions, None] * score).mean(dim=0)


def w36_mc_policy_gradient_without_replacement(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    n = min(n_samples, logits.shape[0])
    actions = torch.multinomial(pi, n, replacement=False, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).mean(dim=0)


def w37_mc_policy_gradient_onehot_only(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype)
    return (reward_per_action[actions, None] * score).mean(dim=0)


def w38_mc_policy_gradient_sum(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi
    return (reward_per_action[actions, None] * score).sum(dim=0)


def r11_mc_policy_gradient_autograd(logits, reward_per_action, n_samples, generator=None):
    with torch.no_grad():
        pi = torch.softmax(logits, dim=-1)
        actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    leaf = logits.detach().clone().requires_grad_(True)
    logp = torch.log_softmax(leaf, dim=-1)[actions]
    objective = (reward_per_action.detach()[actions] * logp).mean()
    (grad,) = torch.autograd.grad(objective, leaf)
    return grad


def r12_mc_policy_gradient_bincount(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    V = logits.shape[0]
    r = reward_per_action[actions].to(logits.dtype)
    reward_by_action = torch.zeros(V, dtype=logits.dtype).index_add_(0, actions, r)
    return reward_by_action / n_samples - r.mean() * pi


ROWS += [
    _row(
        "mc_policy_gradient",
        "02",
        w35_mc_policy_gradient_loss_gradient,
        (
            "Returns the gradient of the loss (negated), the descent direction, where the exercise "
            "asks for the gradient of the expected reward."
        ),
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w36_mc_policy_gradient_without_replacement,
        (
            "Samples without replacement (and at most V actions), so the draws differ from the "
            "prescribed multinomial call and the estimate is biased."
        ),
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w37_mc_policy_gradient_onehot_only,
        "Uses onehot(a) as the score, forgetting the - pi term of grad log softmax.",
    ),
    _row(
        "mc_policy_gradient",
        "02",
        w38_mc_policy_gradient_sum,
        ("Sums over the samples instead of averaging: the estimate is n_samples times too large."),
    ),
    _row("mc_policy_gradient", "02", r11_mc_policy_gradient_autograd),
    _row("mc_policy_gradient", "02", r12_mc_policy_gradient_bincount),
]


# ---------------------------------------------------------------- compute_deltas (03)


def w39_compute_deltas_rejects_group_of_one(rewards, mode, eps=1e-6):
    if rewards.shape[-1] < 2:
        raise ValueError("need at least two responses per group")
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards":
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def w40_compute_deltas_population_std(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards":
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True, unbiased=False) + eps)


def w41_compute_deltas_batch_mean(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean()
    if mode == "centered_rewards":
        return centred
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    return centred / (rewards.std() + eps)


def w42_compute_deltas_int_rewards(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    G = rewards.shape[-1]
    centred = rewards - rewards.sum(dim=-1, keepdim=True) // G
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or G == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def w43_compute_deltas_unknown_mode_passthrough(rewards, mode, eps=1e-6):
    if mode == "centered_rewards" or mode == "normalized_rewards":
        centred = rewards - rewards.mean(dim=-1, keepdim=True)
        all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
        centred = torch.where(all_equal, torch.zeros_like(centred), centred)
        if mode == "centered_rewards" or rewards.shape[-1] == 1:
            return centred
        return centred / (rewards.std(dim=-1, keepdim=True) + eps)
    return rewards.clone()


def w44_compute_deltas_normalized_not_centred(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    scaled = rewards / (rewards.std(dim=-1, keepdim=True) + eps)
    return torch.where(all_equal, torch.zeros_like(scaled), scaled)


def r13_compute_deltas_manual_moments(rewards, mode, eps=1e-6):
    modes = {"rewards", "centered_rewards", "normalized_rewards"}
    if mode not in modes:
        raise ValueError(f"mode: expected one of {sorted(modes)}, got {mode!r}")
    if mode == "rewards":
        return torch.clone(rewards)
    G = rewards.shape[-1]
    mean = rewards.sum(dim=-1, keepdim=True) / G
    spread = rewards.max(dim=-1, keepdim=True).values - rewards.min(dim=-1, keepdim=True).values
    centred = torch.where(spread == 0, torch.zeros_like(rewards), rewards - mean)
    if mode == "centered_rewards":
        return centred
    if G == 1:
        return torch.zeros_like(rewards)
    var = ((rewards - mean) ** 2).sum(dim=-1, keepdim=True) / (G - 1)
    return centred / (var.sqrt() + eps)


ROWS += [
    _row(
        "compute_deltas",
        "03",
        w39_compute_deltas_rejects_group_of_one,
        "Over-defensive: raises ValueError for groups of one (G = 1), which must give zeros.",
    ),
    _row(
        "compute_deltas",
        "03",
        w40_compute_deltas_population_std,
        ("Divides by the population std (unbiased=False, 1/G) instead of the Bessel-corrected one."),
    ),
    _row(
        "compute_deltas",
        "03",
        w41_compute_deltas_batch_mean,
        ("Centres (and scales) with the whole batch's mean and std instead of each group's own."),
    ),
    _row(
        "compute_deltas",
        "03",
        w42_compute_deltas_int_rewards,
        (
            "Computes the group mean with integer division (sum // G), so the baseline is floored "
            "whenever the sum is not a multiple of G."
        ),
    ),
    _row(
        "compute_deltas",
        "03",
        w43_compute_deltas_unknown_mode_passthrough,
        ("Accepts an unknown mode silently, returning the raw rewards instead of raising ValueError."),
    ),
    _row(
        "compute_deltas",
        "03",
        w44_compute_deltas_normalized_not_centred,
        ("In the normalised mode divides the raw rewards by the std without centring them first."),
    ),
    _row("compute_deltas", "03", r13_compute_deltas_manual_moments),
]


# ---------------------------------------------------------------- gradient_variance (03)


def w45_gradient_variance_of_mean(grad_samples):
    N = grad_samples.shape[0]
    return float(grad_samples.var(dim=0).sum() / N)


def w46_gradient_variance_population(grad_samples):
    return float(grad_samples.var(dim=0, unbiased=False).sum())


def w47_gradient_variance_tensor(grad_samples):
    return grad_samples.var(dim=0).sum()


def w48_gradient_variance_norm_variance(grad_samples):
    return float(grad_samples.norm(dim=1).var())


def w49_gradient_variance_float32(grad_samples):
    g = grad_samples.float()
    return float(((g - g.mean(0)) ** 2).sum(0).div(g.shape[0] - 1).sum())


def w50_gradient_variance_covariance_sum(grad_samples):
    cov = torch.cov(grad_samples.T) if grad_samples.shape[1] > 1 else grad_samples.var().reshape(1, 1)
    return float(cov.sum())


def r14_gradient_variance_column_loop(grad_samples):
    per_coordinate = [grad_samples[:, p].var() for p in range(grad_samples.shape[1])]
    return float(torch.stack(per_coordinate).sum())


def r15_gradient_variance_pairwise(grad_samples):
    # sum_p Var = sum over pairs |g_i - g_j|^2 / (N (N - 1))
    g = grad_samples.to(torch.float64)
    N = g.shape[0]
    diffs = g[:, None, :] - g[None, :, :]
    return float((diffs**2).sum() / (2 * N * (N - 1)))


ROWS += [
    _row(
        "gradient_variance",
        "03",
        w45_gradient_variance_of_mean,
        "Divides by N: the variance of the mean of the estimates, not of a single estimate.",
    ),
    _row(
        "gradient_variance",
        "03",
        w46_gradient_variance_population,
        ("Uses the population variance (divides by N) instead of the Bessel-corrected one (N - 1)."),
    ),
    _row("gradient_variance", "03", w47_gradient_variance_tensor, "Returns a 0-d tensor instead of a Python float."),
    _row(
        "gradient_variance",
        "03",
        w48_gradient_variance_norm_variance,
        (
            "Takes the variance of the gradient's norm instead of the trace of the covariance (sum "
            "of per-coordinate variances)."
        ),
    ),
    _row(
        "gradient_variance",
        "03",
        w49_gradient_variance_float32,
        (
            "Computes in float32 whatever the input dtype, so float64 samples lose precision (a "
            "large common offset cancels badly)."
        ),
    ),
    _row(
        "gradient_variance",
        "03",
        w50_gradient_variance_covariance_sum,
        ("Sums every entry of the covariance matrix (variances and covariances) instead of its trace."),
    ),
    _row("gradient_variance", "03", r14_gradient_variance_column_loop),
    _row("gradient_variance", "03", r15_gradient_variance_pairwise),
]


# ---------------------------------------------------------------- gae_table (04)


def w51_gae_table_recursion_not_cut():
    # cut the bootstrap at the terminal step but kept the recursion running through it
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.607, 0.357, 1.330, 0.458, 1.4]
    return deltas, advantages


def w52_gae_table_bootstrap_not_cut():
    # cut the recursion at the terminal step but bootstrapped V(s_3) into delta_2
    deltas = [0.35, -0.6, 1.9, -0.55, 1.4]
    advantages = [0.903, 0.768, 1.9, 0.458, 1.4]
    return deltas, advantages


def w53_gae_table_gamma_only():
    # the recursion multiplied by gamma alone, lambda forgotten
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.62, 0.3, 1.0, 0.71, 1.4]
    return deltas, advantages


def w54_gae_table_swapped():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.436, 0.12, 1.0, 0.458, 1.4]
    return advantages, deltas


def w55_gae_table_no_last_value():
    # treated the end of the rollout as terminal: V(s_5) never bootstrapped
    deltas = [0.35, -0.6, 1.0, -0.55, 0.5]
    advantages = [0.436, 0.12, 1.0, -0.19, 0.5]
    return deltas, advantages


def r16_gae_table_exact_fractions():
    deltas = [1.0 + 0.9 * 1.5 - 2.0, 0.0 + 0.9 * 1.0 - 1.5, 2.0 - 1.0, 0.0 + 0.9 * 0.5 - 1.0, 1.0 + 0.9 * 1.0 - 0.5]
    a4 = deltas[4]
    a3 = deltas[3] + 0.72 * a4
    a2 = deltas[2]
    a1 = deltas[1] + 0.72 * a2
    a0 = deltas[0] + 0.72 * a1
    return deltas, [a0, a1, a2, a3, a4]


ROWS += [
    _row(
        "gae_table",
        "04",
        w51_gae_table_recursion_not_cut,
        (
            "The residuals are right, but the advantage recursion runs through the terminal step 2 "
            "(A_2 = delta_2 + gamma*lam*A_3), so A_0..A_2 are wrong."
        ),
    ),
    _row(
        "gae_table",
        "04",
        w52_gae_table_bootstrap_not_cut,
        (
            "delta_2 bootstraps V(s_3) across the terminal step (1.9 instead of 1.0), so A_0..A_2 "
            "are wrong too; the recursion itself is cut correctly."
        ),
    ),
    _row(
        "gae_table",
        "04",
        w53_gae_table_gamma_only,
        ("The advantage recursion uses gamma instead of gamma*lambda (lambda forgotten); the residuals are right."),
    ),
    _row(
        "gae_table",
        "04",
        w54_gae_table_swapped,
        "Both columns right, but returned in the wrong order: (advantages, deltas).",
    ),
    _row(
        "gae_table",
        "04",
        w55_gae_table_no_last_value,
        (
            "Treats the end of the rollout as terminal: delta_4 leaves out gamma * V(s_5), so "
            "delta_4, A_4 and A_3 are wrong."
        ),
    ),
    _row("gae_table", "04", r16_gae_table_exact_fractions),
]


# ---------------------------------------------------------------- td_residuals (04)


def w56_td_residuals_last_value_zero(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], torch.zeros_like(values[..., :1])], dim=-1)
    return rewards + gamma * (1.0 - dones.to(rewards.dtype)) * next_values - values


def r17_td_residuals_logical_not(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    not_done = torch.logical_not(dones)
    return rewards + gamma * not_done * next_values - values


def w57_td_residuals_dones_next(rewards, values, dones, last_values, gamma):
    # masks V(s_{t+1}) with done_{t+1}, the "next state is terminal" reading
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    d = dones.to(rewards.dtype)
    next_done = torch.cat([d[..., 1:], torch.zeros_like(d[..., :1])], dim=-1)
    return rewards + gamma * (1.0 - next_done) * next_values - values


def w58_td_residuals_roll(rewards, values, dones, last_values, gamma):
    next_values = torch.roll(values, -1, dims=-1)
    return rewards + gamma * (1.0 - dones.to(rewards.dtype)) * next_values - values


def w59_td_residuals_only_1d_last(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[1:], last_values.reshape(1)])
    return rewards + gamma * (1.0 - dones.to(rewards.dtype)) * next_values - values


def r18_td_residuals_where(rewards, values, dones, last_values, gamma):
    next_values = torch.empty_like(values)
    next_values[..., :-1] = values[..., 1:]
    next_values[..., -1] = last_values
    terminal = dones.bool() if dones.dtype == torch.bool else dones != 0
    bootstrap = torch.where(terminal, torch.zeros_like(next_values), gamma * next_values)
    return rewards - values + bootstrap


ROWS += [
    _row(
        "td_residuals",
        "04",
        w56_td_residuals_last_value_zero,
        "Ignores last_values: the last step bootstraps from 0 instead of V(s_T).",
    ),
    _row("td_residuals", "04", r17_td_residuals_logical_not),
    _row(
        "td_residuals",
        "04",
        w57_td_residuals_dones_next,
        ("Masks V(s_{t+1}) with done_{t+1} (whether the next step is terminal) instead of done_t."),
    ),
    _row(
        "td_residuals",
        "04",
        w58_td_residuals_roll,
        (
            "Builds V(s_{t+1}) with roll, which wraps around: the last step bootstraps from V(s_0) "
            "instead of last_values."
        ),
    ),
    _row(
        "td_residuals",
        "04",
        w59_td_residuals_only_1d_last,
        (
            "Slices values[1:] on the first axis and reshapes last_values to one value, so only a "
            "single 1-D episode works; batches fail."
        ),
    ),
    _row("td_residuals", "04", r18_td_residuals_where),
]


# ---------------------------------------------------------------- compute_gae (04)


def w60_compute_gae_returns_before_fill(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1.0 - d) * next_values - values
    advantages = torch.zeros_like(deltas)
    returns = advantages + values
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages, returns


def w61_compute_gae_no_cut_in_recursion(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1.0 - d) * next_values - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * running
        advantages[..., t] = running
    return advantages, advantages + values


def w62_compute_gae_discounted_returns_target(rewards, values, dones, last_values, gamma, lam):
    # the critic's target as the bootstrapped Monte-Carlo return (lambda = 1), not advantages + values
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1.0 - d) * next_values - values
    advantages = torch.zeros_like(deltas)
    returns = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    ret = last_values.clone().to(rewards.dtype)
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
        ret = rewards[..., t] + gamma * (1.0 - d[..., t]) * ret
        returns[..., t] = ret
    return advantages, returns


def w63_compute_gae_lam_one_shortcut(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1.0 - d) * next_values - values
    if lam == 0:
        return deltas, deltas + values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    if lam == 1:
        return advantages, advantages
    return advantages, advantages + values


def w64_compute_gae_float_dones_only(rewards, values, dones, last_values, gamma, lam):
    if dones.dtype == torch.bool:
        raise TypeError("dones must be a float tensor of 0/1")
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1.0 - dones) * next_values - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - dones[..., t]) * running
        advantages[..., t] = running
    return advantages, advantages + values


def w65_compute_gae_tuple_swapped(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1.0 - d) * next_values - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - d[..., t]) * running
        advantages[..., t] = running
    return advantages + values, advantages


def r19_compute_gae_matrix(rewards, values, dones, last_values, gamma, lam):
    # A_t = sum_{k >= t} (gamma lam)^(k - t) prod_{t <= j < k} (1 - done_j) delta_k
    T = rewards.shape[-1]
    alive = 1.0 - dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values[..., None].to(values.dtype)], dim=-1)
    deltas = rewards + gamma * alive * next_values - values
    # carry[..., t, k] = prod_{j=t}^{k-1} gamma*lam*alive_j for k >= t
    step = gamma * lam * alive  # (..., T)
    carry = torch.zeros(*rewards.shape[:-1], T, T, dtype=rewards.dtype)
    for t in range(T):
        running = torch.ones_like(rewards[..., 0])
        for k in range(t, T):
            carry[..., t, k] = running
            running = running * step[..., k]
    advantages = (carry * deltas[..., None, :]).sum(dim=-1)
    return advantages, values + advantages


def r20_compute_gae_list_of_columns(rewards, values, dones, last_values, gamma, lam):
    not_done = (~dones.bool()).to(rewards.dtype)
    T = rewards.shape[-1]
    next_value = last_values.to(values.dtype)
    carry = torch.zeros_like(last_values, dtype=rewards.dtype)
    columns = [None] * T
    for t in range(T - 1, -1, -1):
        delta = rewards[..., t] + gamma * not_done[..., t] * next_value - values[..., t]
        carry = delta + gamma * lam * not_done[..., t] * carry
        columns[t] = carry
        next_value = values[..., t]
    advantages = torch.stack(columns, dim=-1)
    return advantages, advantages + values


ROWS += [
    _row(
        "compute_gae",
        "04",
        w60_compute_gae_returns_before_fill,
        (
            "Takes returns = advantages + values before the loop fills the advantages (a new "
            "tensor from the zeros), so returns equal the values."
        ),
    ),
    _row(
        "compute_gae",
        "04",
        w61_compute_gae_no_cut_in_recursion,
        (
            "Cuts the bootstrap in the residual at a terminal step but not the recursion: "
            "advantages leak across episode boundaries."
        ),
    ),
    _row(
        "compute_gae",
        "04",
        w62_compute_gae_discounted_returns_target,
        (
            "Returns the bootstrapped discounted return (the lambda = 1 target) as the critic's "
            "target instead of advantages + values (the lambda-return); the advantages are right."
        ),
    ),
    _row(
        "compute_gae",
        "04",
        w63_compute_gae_lam_one_shortcut,
        ("Edge-value special case: for lam = 1 returns the advantages themselves as the returns (forgets + values)."),
    ),
    _row(
        "compute_gae",
        "04",
        w64_compute_gae_float_dones_only,
        ("Over-defensive: raises TypeError on bool dones, which the exercise allows (bool, int or float)."),
    ),
    _row(
        "compute_gae",
        "04",
        w65_compute_gae_tuple_swapped,
        "Returns the tuple in the wrong order: (returns, advantages).",
    ),
    _row("compute_gae", "04", r19_compute_gae_matrix),
    _row("compute_gae", "04", r20_compute_gae_list_of_columns),
]


# ---------------------------------------------------------------- clipped_surrogate_loss (05)


def _c11_masked_mean(x, valid):
    return torch.where(valid, x, torch.zeros_like(x)).sum() / valid.sum().clamp(min=1)


def w66_clipped_surrogate_loss_ignores_high(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    logp = torch.where(valid, logp, zero)
    logp_old = torch.where(valid, logp_old.detach(), zero)
    adv = torch.where(valid, adv.detach(), zero)
    ratio = torch.exp(logp - logp_old)
    clipped = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)
    loss = _c11_masked_mean(-torch.min(ratio * adv, clipped * adv), valid)
    with torch.no_grad():
        low, above = ratio < 1 - clip_eps, ratio > 1 + clip_eps
        binding = (above & (adv > 0)) | (low & (adv < 0))
        info = {
            "clip_fraction": _c11_masked_mean((low | above).to(logp.dtype), valid).item(),
            "clip_active_fraction": _c11_masked_mean(binding.to(logp.dtype), valid).item(),
            "approx_kl": _c11_masked_mean((ratio - 1) - (logp - logp_old), valid).item(),
        }
    return loss, info


def _c11_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, kl="k3", fill_first=True, active="binding"):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    if fill_first:
        logp = torch.where(valid, logp, zero)
        logp_old = torch.where(valid, logp_old.detach(), zero)
        adv = torch.where(valid, adv.detach(), zero)
    else:
        logp_old = logp_old.detach()
        adv = adv.detach()
    ratio = torch.exp(logp - logp_old)
    clipped = torch.clamp(ratio, 1 - clip_eps, 1 + high)
    loss = _c11_masked_mean(-torch.min(ratio * adv, clipped * adv), valid)
    with torch.no_grad():
        log_ratio = logp - logp_old
        low, above = ratio < 1 - clip_eps, ratio > 1 + high
        binding = (above & (adv > 0)) | (low & (adv < 0))
        if active == "any":
            binding = low | above
        approx = (ratio - 1) - log_ratio if kl == "k3" else -log_ratio
        info = {
            "clip_fraction": _c11_masked_mean((low | above).to(logp.dtype), valid).item(),
            "clip_active_fraction": _c11_masked_mean(binding.to(logp.dtype), valid).item(),
            "approx_kl": _c11_masked_mean(approx, valid).item(),
        }
    return loss, info


def w67_clipped_surrogate_loss_k1_approx_kl(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _c11_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, kl="k1")


def w68_clipped_surrogate_loss_padding_not_filled(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _c11_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, fill_first=False)


def w69_clipped_surrogate_loss_active_equals_fraction(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _c11_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, active="any")


def w70_clipped_surrogate_loss_objective(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    loss, info = _c11_surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high)
    return -loss, info


def w71_clipped_surrogate_loss_info_tensors(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    logp = torch.where(valid, logp, zero)
    logp_old = torch.where(valid, logp_old.detach(), zero)
    adv = torch.where(valid, adv.detach(), zero)
    ratio = torch.exp(logp - logp_old)
    clipped = torch.clamp(ratio, 1 - clip_eps, 1 + high)
    loss = _c11_masked_mean(-torch.min(ratio * adv, clipped * adv), valid)
    with torch.no_grad():
        low, above = ratio < 1 - clip_eps, ratio > 1 + high
        binding = (above & (adv > 0)) | (low & (adv < 0))
        info = {
            "clip_fraction": _c11_masked_mean((low | above).to(logp.dtype), valid),
            "clip_active_fraction": _c11_masked_mean(binding.to(logp.dtype), valid),
            "approx_kl": _c11_masked_mean((ratio - 1) - (logp - logp_old), valid),
        }
    return loss, info


def w72_clipped_surrogate_loss_clip_then_max(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    # the paper's min written as max over the loss, but with the clip on the high side only
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    logp = torch.where(valid, logp, zero)
    logp_old = torch.where(valid, logp_old.detach(), zero)
    adv = torch.where(valid, adv.detach(), zero)
    ratio = torch.exp(logp - logp_old)
    clipped = torch.clamp(ratio, max=1 + high)
    loss = _c11_masked_mean(torch.max(-ratio * adv, -clipped * adv), valid)
    with torch.no_grad():
        low, above = ratio < 1 - clip_eps, ratio > 1 + high
        binding = (above & (adv > 0)) | (low & (adv < 0))
        info = {
            "clip_fraction": _c11_masked_mean((low | above).to(logp.dtype), valid).item(),
            "clip_active_fraction": _c11_masked_mean(binding.to(logp.dtype), valid).item(),
            "approx_kl": _c11_masked_mean((ratio - 1) - (logp - logp_old), valid).item(),
        }
    return loss, info


def r21_clipped_surrogate_loss_max_form(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    eps_high = clip_eps_high if clip_eps_high is not None else clip_eps
    if mask is None:
        mask = torch.ones(logp.shape, dtype=torch.bool)
    keep = mask != 0
    n = max(int(keep.sum()), 1)
    lp = logp.masked_fill(~keep, 0.0)
    lp_old = logp_old.detach().masked_fill(~keep, 0.0)
    a = adv.detach().masked_fill(~keep, 0.0)
    log_ratio = lp - lp_old
    ratio = log_ratio.exp()
    unclipped_loss = -a * ratio
    clipped_loss = -a * ratio.clamp(1.0 - clip_eps, 1.0 + eps_high)
    loss = torch.maximum(unclipped_loss, clipped_loss).masked_fill(~keep, 0.0).sum() / n
    with torch.no_grad():
        outside = (ratio < 1.0 - clip_eps) | (ratio > 1.0 + eps_high)
        # the clip binds where the clipped branch is the max and has no gradient
        binds = ((ratio > 1.0 + eps_high) & (a > 0)) | ((ratio < 1.0 - clip_eps) & (a < 0))
        info = {
            "clip_fraction": float((outside & keep).sum()) / n,
            "clip_active_fraction": float((binds & keep).sum()) / n,
            "approx_kl": float(torch.expm1(log_ratio).sub(log_ratio).masked_fill(~keep, 0.0).sum()) / n,
        }
    return loss, info


ROWS += [
    _row(
        "clipped_surrogate_loss",
        "05",
        w66_clipped_surrogate_loss_ignores_high,
        (
            "Accepts clip_eps_high but ignores it: the upper clip is always 1 + clip_eps (DAPO's "
            "clip-higher has no effect)."
        ),
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w67_clipped_surrogate_loss_k1_approx_kl,
        ("approx_kl is the mean of -log(ratio) (the k1 estimator) instead of (ratio - 1) - log(ratio)."),
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w68_clipped_surrogate_loss_padding_not_filled,
        (
            "Does not replace the padding before the arithmetic (only masks the final mean with "
            "torch.where): NaN or -inf in the padding's logp_old/adv then reaches the gradient (0 "
            "* inf or 0 * NaN = NaN in the backward pass)."
        ),
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w69_clipped_surrogate_loss_active_equals_fraction,
        (
            "clip_active_fraction counts every entry outside the clip range, whatever the "
            "advantage's sign (the same as clip_fraction) instead of only where the clip binds."
        ),
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w70_clipped_surrogate_loss_objective,
        ("Returns the paper's objective L^CLIP (to maximise) instead of the loss, its negative."),
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w71_clipped_surrogate_loss_info_tensors,
        "The info values are 0-d tensors instead of Python floats.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w72_clipped_surrogate_loss_clip_then_max,
        (
            "Clips the ratio only from above (clamp(max=1 + high)): the lower bound 1 - clip_eps "
            "is missing, so negative-advantage entries with a small ratio are not clipped."
        ),
    ),
    _row("clipped_surrogate_loss", "05", r21_clipped_surrogate_loss_max_form),
]


# ---------------------------------------------------------------- value_loss (05)


def w73_value_loss_mse_no_half(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    err = (torch.where(valid, values, zero) - torch.where(valid, returns.detach(), zero)) ** 2
    if clip_eps is not None:
        old = torch.where(valid, values_old.detach(), zero)
        v = torch.where(valid, values, zero)
        v_clip = old + (v - old).clamp(-clip_eps, clip_eps)
        err = torch.maximum(err, (v_clip - torch.where(valid, returns.detach(), zero)) ** 2)
    return _c11_masked_mean(err, valid)


def w74_value_loss_min_of_clipped(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    v = torch.where(valid, values, zero)
    ret = torch.where(valid, returns.detach(), zero)
    err = (v - ret) ** 2
    if clip_eps is not None:
        old = torch.where(valid, values_old.detach(), zero)
        v_clip = old + (v - old).clamp(-clip_eps, clip_eps)
        err = torch.minimum(err, (v_clip - ret) ** 2)
    return 0.5 * _c11_masked_mean(err, valid)


def w75_value_loss_clip_returns(values, returns, values_old=None, clip_eps=None, mask=None):
    # clips the values around the returns instead of around values_old
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    v = torch.where(valid, values, zero)
    ret = torch.where(valid, returns.detach(), zero)
    err = (v - ret) ** 2
    if clip_eps is not None:
        v_clip = ret + (v - ret).clamp(-clip_eps, clip_eps)
        err = torch.maximum(err, (v_clip - ret) ** 2)
    return 0.5 * _c11_masked_mean(err, valid)


def w76_value_loss_returns_not_detached(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    v = torch.where(valid, values, zero)
    ret = torch.where(valid, returns, zero)
    err = (v - ret) ** 2
    if clip_eps is not None:
        old = torch.where(valid, values_old.detach(), zero)
        v_clip = old + (v - old).clamp(-clip_eps, clip_eps)
        err = torch.maximum(err, (v_clip - ret) ** 2)
    return 0.5 * _c11_masked_mean(err, valid)


def w77_value_loss_boolean_index_mean(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    v = values[valid]
    ret = returns.detach()[valid]
    err = (v - ret) ** 2
    if clip_eps is not None:
        old = values_old.detach()[valid]
        v_clip = old + (v - old).clamp(-clip_eps, clip_eps)
        err = torch.maximum(err, (v_clip - ret) ** 2)
    return 0.5 * err.mean()


def r22_value_loss_huber_free(values, returns, values_old=None, clip_eps=None, mask=None):
    keep = torch.ones(values.shape, dtype=torch.bool) if mask is None else mask != 0
    target = returns.detach().masked_fill(~keep, 0.0)
    v = values.masked_fill(~keep, 0.0)
    per_entry = 0.5 * (v - target).square()
    if clip_eps is not None:
        anchor = values_old.detach().masked_fill(~keep, 0.0)
        v_clipped = torch.clamp(v, anchor - clip_eps, anchor + clip_eps)
        per_entry = torch.max(per_entry, 0.5 * (v_clipped - target).square())
    return per_entry.masked_fill(~keep, 0.0).sum() / keep.sum().clamp(min=1)


def r23_value_loss_mse_none(values, returns, values_old=None, clip_eps=None, mask=None):
    keep = torch.ones(values.shape, dtype=torch.bool) if mask is None else mask.bool()
    v = torch.where(keep, values, torch.zeros_like(values))
    target = torch.where(keep, returns.detach(), torch.zeros_like(values))
    err = F.mse_loss(v, target, reduction="none")
    if clip_eps is not None:
        old = torch.where(keep, values_old.detach(), torch.zeros_like(values))
        err = torch.maximum(err, F.mse_loss(old + (v - old).clamp(-clip_eps, clip_eps), target, reduction="none"))
    return err[keep].sum() / (2 * max(int(keep.sum()), 1))


ROWS += [
    _row(
        "value_loss",
        "05",
        w73_value_loss_mse_no_half,
        ("Leaves out the factor 0.5 (SB3's F.mse_loss convention): the loss is twice the course's."),
    ),
    _row(
        "value_loss",
        "05",
        w74_value_loss_min_of_clipped,
        "Takes the min of the clipped and unclipped errors instead of the pessimistic max.",
    ),
    _row(
        "value_loss",
        "05",
        w75_value_loss_clip_returns,
        "Clips the new value around the returns instead of around values_old.",
    ),
    _row(
        "value_loss",
        "05",
        w76_value_loss_returns_not_detached,
        ("Does not detach returns, so a gradient flows into the targets when they require grad."),
    ),
    _row(
        "value_loss",
        "05",
        w77_value_loss_boolean_index_mean,
        ("Averages with err[valid].mean(), which is NaN when no entry is valid, where the exercise asks for 0."),
    ),
    _row("value_loss", "05", r22_value_loss_huber_free),
    _row("value_loss", "05", r23_value_loss_mse_none),
]


# ---------------------------------------------------------------- PPOLoss (05)


class _c11_PPOBase(nn.Module):
    def __init__(self, clip_epsilon: float = 0.2, value_loss_coef: float = 0.5, entropy_coef: float = 0.01):
        super().__init__()
        self.clip_epsilon = clip_epsilon
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef

    def _parts(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask):
        valid = torch.ones_like(policy_logprobs, dtype=torch.bool) if mask is None else mask.bool()
        zero = torch.zeros_like(policy_logprobs)
        lp = torch.where(valid, policy_logprobs, zero)
        lp_old = torch.where(valid, old_policy_logprobs.detach(), zero)
        adv = torch.where(valid, advantages.detach(), zero)
        ratio = torch.exp(lp - lp_old)
        clipped = ratio.clamp(1 - self.clip_epsilon, 1 + self.clip_epsilon)
        policy = _c11_masked_mean(-torch.min(ratio * adv, clipped * adv), valid)
        v = torch.where(valid, values, zero)
        ret = torch.where(valid, returns.detach(), zero)
        v_loss = 0.5 * _c11_masked_mean((v - ret) ** 2, valid)
        ent = _c11_masked_mean(torch.where(valid, entropy, zero), valid)
        return policy, v_loss, ent


class w78_PPOLoss_entropy_plus(_c11_PPOBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy, v_loss, ent = self._parts(
            policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask
        )
        return policy + self.value_loss_coef * v_loss + self.entropy_coef * ent


class w79_PPOLoss_entropy_over_padding(_c11_PPOBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy, v_loss, _ = self._parts(
            policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask
        )
        return policy + self.value_loss_coef * v_loss - self.entropy_coef * entropy.mean()


class w80_PPOLoss_normalises_advantages(_c11_PPOBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        # CleanRL's norm_adv, done here although the exercise says advantages are used as given
        adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        policy, v_loss, ent = self._parts(policy_logprobs, old_policy_logprobs, values, returns, adv, entropy, mask)
        return policy + self.value_loss_coef * v_loss - self.entropy_coef * ent


class w81_PPOLoss_default_coef(_c11_PPOBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy, v_loss, ent = self._parts(
            policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask
        )
        return policy + 0.5 * v_loss - self.entropy_coef * ent


class w82_PPOLoss_tuple(_c11_PPOBase):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy, v_loss, ent = self._parts(
            policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask
        )
        total = policy + self.value_loss_coef * v_loss - self.entropy_coef * ent
        return total, {"policy_loss": policy.item(), "value_loss": v_loss.item(), "entropy": ent.item()}


class r24_PPOLoss_inline(nn.Module):
    def __init__(self, clip_epsilon: float = 0.2, value_loss_coef: float = 0.5, entropy_coef: float = 0.01):
        super().__init__()
        self.clip_epsilon = clip_epsilon
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef

    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        keep = torch.ones(policy_logprobs.shape, dtype=torch.bool) if mask is None else mask != 0
        n = keep.sum().clamp(min=1)

        def mean(x):
            return x.masked_fill(~keep, 0.0).sum() / n

        lr = policy_logprobs.masked_fill(~keep, 0.0) - old_policy_logprobs.detach().masked_fill(~keep, 0.0)
        ratio = lr.exp()
        a = advantages.detach().masked_fill(~keep, 0.0)
        eps = self.clip_epsilon
        policy = mean(torch.maximum(-a * ratio, -a * ratio.clamp(1 - eps, 1 + eps)))
        err = values.masked_fill(~keep, 0.0) - returns.detach().masked_fill(~keep, 0.0)
        value = mean(0.5 * err * err)
        bonus = mean(entropy.masked_fill(~keep, 0.0))
        return policy + self.value_loss_coef * value - self.entropy_coef * bonus


ROWS += [
    _row(
        "PPOLoss",
        "05",
        w78_PPOLoss_entropy_plus,
        (
            "Adds the entropy bonus to the loss (+ entropy_coef * entropy) instead of subtracting "
            "it, so minimising lowers entropy."
        ),
    ),
    _row(
        "PPOLoss",
        "05",
        w79_PPOLoss_entropy_over_padding,
        ("Averages the entropy over every entry, padding included, instead of over the valid entries only."),
    ),
    _row(
        "PPOLoss",
        "05",
        w80_PPOLoss_normalises_advantages,
        (
            "Normalises the advantages inside the loss (CleanRL's norm_adv), although the exercise "
            "says they are used as given."
        ),
    ),
    _row(
        "PPOLoss",
        "05",
        w81_PPOLoss_default_coef,
        "Hard-codes the value-loss weight 0.5 instead of using self.value_loss_coef.",
    ),
    _row("PPOLoss", "05", w82_PPOLoss_tuple, "Returns a (loss, info dict) tuple instead of the scalar loss."),
    _row("PPOLoss", "05", r24_PPOLoss_inline),
]


# ---------------------------------------------------------------- group_advantages (06)


def w83_group_advantages_no_all_equal_guard(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    return adv / (rewards.std(dim=-1, keepdim=True) + eps)


def w84_group_advantages_nan_to_num(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if not normalize_std:
        return adv
    return torch.nan_to_num(adv / rewards.std(dim=-1, keepdim=True), nan=0.0, posinf=0.0, neginf=0.0)


def w85_group_advantages_eps_inside_sqrt(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    var = rewards.var(dim=-1, keepdim=True)
    return adv / torch.sqrt(var + eps)


def w86_group_advantages_ignores_flag(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if rewards.shape[-1] == 1:
        return adv
    return adv / (rewards.std(dim=-1, keepdim=True) + eps)


def w87_group_advantages_numpy(rewards, normalize_std=True, eps=1e-6):
    r = rewards.detach().cpu().numpy()
    adv = r - r.mean(axis=-1, keepdims=True)
    same = (r == r[:, :1]).all(axis=-1, keepdims=True)
    adv = np.where(same, 0.0, adv).astype(r.dtype)
    if not normalize_std or r.shape[-1] == 1:
        return adv
    return adv / (r.std(axis=-1, ddof=1, keepdims=True) + eps)


def w88_group_advantages_flat_groups(rewards, normalize_std=True, eps=1e-6):
    # the DeepSeekMath formula over "the group": here every reward of the batch
    flat = rewards.reshape(-1)
    adv = (flat - flat.mean()).reshape(rewards.shape)
    if torch.all(flat == flat[0]):
        return torch.zeros_like(rewards)
    if not normalize_std or flat.numel() == 1:
        return adv
    return adv / (flat.std() + eps)


def r25_group_advantages_loop(rewards, normalize_std=True, eps=1e-6):
    out = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        group = rewards[b]
        if group.numel() < 2 or bool((group == group[0]).all()):
            continue
        centred = group - group.mean()
        if normalize_std:
            centred = centred / (group.std(unbiased=True) + eps)
        out[b] = centred
    return out


def r26_group_advantages_var_mean(rewards, normalize_std=True, eps=1e-6):
    var, mean = (
        torch.var_mean(rewards, dim=-1, keepdim=True, correction=1) if rewards.shape[-1] > 1 else (None, rewards)
    )
    constant = rewards.amax(dim=-1, keepdim=True) == rewards.amin(dim=-1, keepdim=True)
    centred = (rewards - mean).masked_fill(constant, 0.0)
    if normalize_std and var is not None:
        centred = centred / (var.sqrt() + eps)
    return centred


ROWS += [
    _row(
        "group_advantages",
        "06",
        w83_group_advantages_no_all_equal_guard,
        (
            "No exact-zero guard for all-equal groups: rounding in the mean leaves tiny values "
            "(e.g. a float32 group of equal 0.7s), which dividing by std + eps blows up."
        ),
    ),
    _row(
        "group_advantages",
        "06",
        w84_group_advantages_nan_to_num,
        (
            "Leaves eps out of the division and hides the 0/0 with nan_to_num: every non-constant "
            "group is divided by std instead of std + eps."
        ),
    ),
    _row(
        "group_advantages",
        "06",
        w85_group_advantages_eps_inside_sqrt,
        "Adds eps inside the square root (sqrt(var + eps)) instead of to the std.",
    ),
    _row(
        "group_advantages",
        "06",
        w86_group_advantages_ignores_flag,
        (
            "Accepts normalize_std but ignores it: always divides by the std (Dr. GRPO's "
            "normalize_std=False is never honoured)."
        ),
    ),
    _row(
        "group_advantages",
        "06",
        w87_group_advantages_numpy,
        "Computes with numpy and returns a numpy array instead of a torch tensor.",
    ),
    _row(
        "group_advantages",
        "06",
        w88_group_advantages_flat_groups,
        (
            "Reads 'the group' as the whole batch: the mean and std are taken over every reward of "
            "all B prompts, not per row."
        ),
    ),
    _row("group_advantages", "06", r25_group_advantages_loop),
    _row("group_advantages", "06", r26_group_advantages_var_mean),
]


# ---------------------------------------------------------------- kl_estimate (06)


def w89_kl_estimate_ratio_inverted(logp, logp_ref, kind):
    log_r = logp - logp_ref  # log pi_theta / pi_ref
    if kind == "k1":
        return log_r
    if kind == "k2":
        return 0.5 * log_r**2
    if kind == "k3":
        return torch.expm1(log_r) - log_r
    raise ValueError(f"kind: expected 'k1', 'k2' or 'k3', got {kind!r}")


def w90_kl_estimate_clamped_like_verl(logp, logp_ref, kind):
    log_r = (logp_ref - logp).clamp(-20, 20)
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    if kind == "k3":
        return (torch.expm1(log_r) - log_r).clamp(-10, 10)
    raise ValueError(f"kind: expected 'k1', 'k2' or 'k3', got {kind!r}")


def w91_kl_estimate_k2_no_half(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return log_r**2
    if kind == "k3":
        return torch.expm1(log_r) - log_r
    raise ValueError(f"kind: expected 'k1', 'k2' or 'k3', got {kind!r}")


def w92_kl_estimate_mean(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        per = -log_r
    elif kind == "k2":
        per = 0.5 * log_r**2
    elif kind == "k3":
        per = torch.expm1(log_r) - log_r
    else:
        raise ValueError(f"kind: expected 'k1', 'k2' or 'k3', got {kind!r}")
    return per.mean()


def w93_kl_estimate_unknown_kind_k3(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    return torch.expm1(log_r) - log_r


def r27_kl_estimate_exp_form(logp, logp_ref, kind):
    if kind not in ("k1", "k2", "k3"):
        raise ValueError(f"kind: expected one of 'k1', 'k2', 'k3', got {kind!r}")
    diff = logp - logp_ref
    if kind == "k1":
        return diff
    if kind == "k2":
        return diff * diff / 2
    return torch.exp(-diff) - 1 + diff


def r28_kl_estimate_table(logp, logp_ref, kind):
    estimators = {
        "k1": lambda lr: -lr,
        "k2": lambda lr: lr.square() * 0.5,
        "k3": lambda lr: lr.exp() - 1.0 - lr,
    }
    if kind not in estimators:
        raise ValueError(f"kind: expected 'k1', 'k2' or 'k3', got {kind!r}")
    return estimators[kind](logp_ref - logp)


ROWS += [
    _row(
        "kl_estimate",
        "06",
        w89_kl_estimate_ratio_inverted,
        (
            "Takes log_r = logp - logp_ref (pi_theta / pi_ref, inverted): k1 has the wrong sign "
            "and k3 estimates the wrong quantity."
        ),
    ),
    _row(
        "kl_estimate",
        "06",
        w90_kl_estimate_clamped_like_verl,
        (
            "Copies verl's clamps (log_r to [-20, 20], k3 to [-10, 10]), which the course does not "
            "apply: large log-ratios give clipped estimates."
        ),
    ),
    _row("kl_estimate", "06", w91_kl_estimate_k2_no_half, "k2 is log_r**2 without the factor 0.5."),
    _row(
        "kl_estimate",
        "06",
        w92_kl_estimate_mean,
        "Returns the mean over samples (a scalar) instead of one estimate per token.",
    ),
    _row(
        "kl_estimate",
        "06",
        w93_kl_estimate_unknown_kind_k3,
        "Any unknown kind silently gives k3 instead of raising ValueError.",
    ),
    _row("kl_estimate", "06", r27_kl_estimate_exp_form),
    _row("kl_estimate", "06", r28_kl_estimate_table),
]


# ---------------------------------------------------------------- aggregate_loss (06)


def _c11_aggregate(per_token, mask, mode, max_len=None):
    valid = mask.bool() if mask.dtype == torch.bool else mask > 0
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        return (per_response / n_valid.clamp(min=1)).mean()
    if mode == "seq-mean-token-sum-norm":
        L = per_token.shape[-1] if max_len is None else max_len
        return (per_response / L).mean()
    raise ValueError(f"mode: unknown {mode!r}")


def w94_aggregate_loss_verl_sum_norm(per_token, mask, mode, max_len=None):
    if mode == "seq-mean-token-sum-norm":
        valid = mask.bool()
        per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
        L = per_token.shape[-1] if max_len is None else max_len
        return per_token.sum() / L
    return _c11_aggregate(per_token, mask, mode, max_len)


def w95_aggregate_loss_skip_empty(per_token, mask, mode, max_len=None):
    if mode == "seq-mean-token-mean":
        valid = mask.bool()
        per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
        n_valid = valid.sum(dim=-1)
        nonempty = n_valid > 0
        per_response = per_token.sum(dim=-1)[nonempty] / n_valid[nonempty]
        return per_response.mean()
    return _c11_aggregate(per_token, mask, mode, max_len)


def w96_aggregate_loss_max_len_from_mask(per_token, mask, mode, max_len=None):
    if mode == "seq-mean-token-sum-norm" and max_len is None:
        longest = mask.bool().sum(dim=-1).max().clamp(min=1)
        return _c11_aggregate(per_token, mask, mode, float(longest))
    return _c11_aggregate(per_token, mask, mode, max_len)


def w97_aggregate_loss_only_3d(per_token, mask, mode, max_len=None):
    B, G, T = per_token.shape
    return _c11_aggregate(per_token, mask, mode, max_len)


def w98_aggregate_loss_mask_weights(per_token, mask, mode, max_len=None):
    # multiplies by the mask as weights: a float mask of 0/1 is fine, but padding garbage leaks
    m = mask.to(per_token.dtype)
    weighted = per_token * m
    n_valid = m.sum(dim=-1)
    if mode == "token-mean":
        return weighted.sum() / n_valid.sum().clamp(min=1)
    per_response = weighted.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        return (per_response / n_valid.clamp(min=1)).mean()
    if mode == "seq-mean-token-sum-norm":
        L = per_token.shape[-1] if max_len is None else max_len
        return (per_response / L).mean()
    raise ValueError(f"mode: unknown {mode!r}")


def w99_aggregate_loss_modes_swapped(per_token, mask, mode, max_len=None):
    # remembered DAPO as the per-sequence mean and GRPO as the token mean
    swap = {"token-mean": "seq-mean-token-mean", "seq-mean-token-mean": "token-mean"}
    return _c11_aggregate(per_token, mask, swap.get(mode, mode), max_len)


def r29_aggregate_loss_weights(per_token, mask, mode, max_len=None):
    keep = mask != 0
    lengths = keep.sum(dim=-1, keepdim=True).to(per_token.dtype)
    N = lengths.numel()
    if mode == "seq-mean-token-mean":
        w = 1.0 / (N * lengths.clamp(min=1))
    elif mode == "token-mean":
        w = 1.0 / lengths.sum().clamp(min=1)
    elif mode == "seq-mean-token-sum-norm":
        L = float(per_token.shape[-1]) if max_len is None else float(max_len)
        w = torch.full_like(lengths, 1.0 / (N * L))
    else:
        raise ValueError(f"mode: expected a known aggregation, got {mode!r}")
    return (per_token.masked_fill(~keep, 0.0) * w).sum()


def r30_aggregate_loss_flatten_loop(per_token, mask, mode, max_len=None):
    T = per_token.shape[-1]
    rows = per_token.reshape(-1, T)
    keep = (mask != 0).reshape(-1, T)
    sums = [torch.where(k, row, torch.zeros_like(row)).sum() for row, k in zip(rows, keep)]
    counts = [int(k.sum()) for k in keep]
    if mode == "token-mean":
        return torch.stack(sums).sum() / max(sum(counts), 1)
    if mode == "seq-mean-token-mean":
        return torch.stack([s / max(c, 1) for s, c in zip(sums, counts)]).mean()
    if mode == "seq-mean-token-sum-norm":
        return torch.stack(sums).mean() / (T if max_len is None else max_len)
    raise ValueError(f"mode: expected 'seq-mean-token-mean', 'token-mean' or 'seq-mean-token-sum-norm', got {mode!r}")


ROWS += [
    _row(
        "aggregate_loss",
        "06",
        w94_aggregate_loss_verl_sum_norm,
        (
            "Copies verl's seq-mean-token-sum-norm: the sum over all responses divided by max_len, "
            "with no mean over responses (B * G times too large)."
        ),
    ),
    _row(
        "aggregate_loss",
        "06",
        w95_aggregate_loss_skip_empty,
        (
            "In seq-mean-token-mean, leaves empty responses out of the mean (the later verl "
            "behaviour) instead of counting them as 0; an all-empty batch gives NaN."
        ),
    ),
    _row(
        "aggregate_loss",
        "06",
        w96_aggregate_loss_max_len_from_mask,
        ("When max_len is None, uses the longest valid response length from the mask instead of the padded length T."),
    ),
    _row(
        "aggregate_loss",
        "06",
        w97_aggregate_loss_only_3d,
        ("Unpacks per_token.shape as (B, G, T), so only 3-D input works; any other [..., T] shape raises."),
    ),
    _row(
        "aggregate_loss",
        "06",
        w98_aggregate_loss_mask_weights,
        ("Masks by multiplying per_token * mask, so NaN or inf in the padding poisons the result."),
    ),
    _row(
        "aggregate_loss",
        "06",
        w99_aggregate_loss_modes_swapped,
        ("Swaps the two modes: token-mean computes the per-sequence mean and seq-mean-token-mean the token mean."),
    ),
    _row("aggregate_loss", "06", r29_aggregate_loss_weights),
    _row("aggregate_loss", "06", r30_aggregate_loss_flatten_loop),
]


# ---------------------------------------------------------------- grpo_loss (06)


def _c11_group_adv(rewards, normalize_std, eps=1e-6, unbiased=True):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    return adv / (rewards.std(dim=-1, keepdim=True, unbiased=unbiased) + eps)


def _c11_kl(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    if kind == "k3":
        return torch.expm1(log_r) - log_r
    raise ValueError(f"kl_kind: unknown {kind!r}")


def _c11_grpo(
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
    **how,
):
    if adv is None or how.get("ignore_adv"):
        adv = _c11_group_adv(rewards.detach(), normalize_std, unbiased=how.get("unbiased", True))
    adv = adv.detach()
    adv_tokens = adv.unsqueeze(-1).expand_as(logp)
    high = clip_eps if clip_eps_high is None or how.get("ignore_high") else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_token = -torch.minimum(ratio * adv_tokens, clipped * adv_tokens)
    kind = "k3" if how.get("always_k3") else kl_kind
    valid = mask.bool()
    if logp_ref is not None:
        kl = _c11_kl(logp, logp_ref.detach(), kind)
        if not how.get("kl_after"):
            per_token = per_token + kl_coef * kl
    loss = _c11_aggregate(per_token, mask, loss_agg, max_len)
    if logp_ref is not None and how.get("kl_after"):
        loss = loss + kl_coef * _c11_aggregate(kl, mask, "token-mean")
    with torch.no_grad():
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binding = (above & (adv_tokens > 0)) | (low & (adv_tokens < 0))
        over = torch.ones_like(valid) if how.get("fraction_all") else valid
        info = {
            "clip_fraction": (low | above)[over].double().mean().item(),
            "clip_active_fraction": binding[valid].double().mean().item(),
            "kl": kl[valid].mean().item() if logp_ref is not None else 0.0,
            "adv_abs_mean": adv.abs().mean().item(),
        }
        if rewards is not None:
            info["reward_mean"] = rewards.mean().item()
    return loss, info


def w100_grpo_loss_kl_after_aggregation(
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
    return _c11_grpo(
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
        kl_after=True,
    )


def w101_grpo_loss_population_std(
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
    return _c11_grpo(
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
        unbiased=False,
    )


def w102_grpo_loss_ignores_adv(
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
    return _c11_grpo(
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
        ignore_adv=True,
    )


def w103_grpo_loss_always_k3(
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
    return _c11_grpo(
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
        always_k3=True,
    )


def w104_grpo_loss_clip_fraction_padding(
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
    return _c11_grpo(
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
        fraction_all=True,
    )


def w105_grpo_loss_ignores_high(
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
    return _c11_grpo(
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
        ignore_high=True,
    )


def w106_grpo_loss_kl_coef_zero_skips_info(
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
    if kl_coef == 0:
        logp_ref = None  # no penalty, so no reference needed
    return _c11_grpo(
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
    )


def r31_grpo_loss_per_response_loop(
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
        r = rewards.detach()
        G = r.shape[1]
        adv = torch.zeros_like(r)
        for b in range(r.shape[0]):
            if G > 1 and not bool((r[b] == r[b, 0]).all()):
                adv[b] = r[b] - r[b].mean()
                if normalize_std:
                    adv[b] = adv[b] / (r[b].std() + 1e-6)
    a = adv.detach()[..., None]
    eps_hi = clip_eps_high if clip_eps_high is not None else clip_eps
    log_ratio = logp - logp_old.detach()
    ratio = log_ratio.exp()
    surrogate = torch.maximum(-a * ratio, -a * ratio.clamp(1 - clip_eps, 1 + eps_hi))
    keep = mask != 0
    if logp_ref is not None:
        d = logp_ref.detach() - logp
        kl_tok = {"k1": -d, "k2": d.square() / 2, "k3": d.exp() - 1 - d}[kl_kind]
        surrogate = surrogate + kl_coef * kl_tok
    surrogate = surrogate.masked_fill(~keep, 0.0)
    lengths = keep.sum(-1).to(logp.dtype)
    if loss_agg == "token-mean":
        loss = surrogate.sum() / lengths.sum().clamp(min=1)
    elif loss_agg == "seq-mean-token-mean":
        loss = (surrogate.sum(-1) / lengths.clamp(min=1)).mean()
    else:
        L = logp.shape[-1] if max_len is None else max_len
        loss = surrogate.sum(-1).mean() / L
    with torch.no_grad():
        n = keep.sum().item()
        out_low = ratio < 1 - clip_eps
        out_high = ratio > 1 + eps_hi
        binds = (out_high & (a > 0)) | (out_low & (a < 0))
        info = {
            "clip_fraction": ((out_low | out_high) & keep).sum().item() / n if n else float("nan"),
            "clip_active_fraction": (binds & keep).sum().item() / n if n else float("nan"),
            "kl": (kl_tok.masked_fill(~keep, 0.0).sum().item() / n if n else float("nan"))
            if logp_ref is not None
            else 0.0,
            "adv_abs_mean": adv.abs().mean().item(),
        }
        if rewards is not None:
            info["reward_mean"] = rewards.double().mean().item()
    return loss, info


ROWS += [
    _row(
        "grpo_loss",
        "06",
        w100_grpo_loss_kl_after_aggregation,
        (
            "Adds the KL penalty after aggregation, as kl_coef times the token mean of the "
            "estimate, instead of adding it to every token's loss before aggregate_loss; differs "
            "whenever loss_agg is not token-mean."
        ),
    ),
    _row(
        "grpo_loss",
        "06",
        w101_grpo_loss_population_std,
        (
            "Normalises the group advantages by the population std (1/G, unbiased=False) instead "
            "of the Bessel-corrected std."
        ),
    ),
    _row(
        "grpo_loss",
        "06",
        w102_grpo_loss_ignores_adv,
        (
            "Ignores the adv argument and always computes group advantages from rewards; crashes "
            "when rewards is None and adv is given."
        ),
    ),
    _row("grpo_loss", "06", w103_grpo_loss_always_k3, "Ignores kl_kind: always uses the k3 estimator."),
    _row(
        "grpo_loss",
        "06",
        w104_grpo_loss_clip_fraction_padding,
        ("clip_fraction is averaged over every token, padding included, instead of over the valid tokens."),
    ),
    _row(
        "grpo_loss",
        "06",
        w105_grpo_loss_ignores_high,
        "Accepts clip_eps_high but ignores it: the upper clip is always 1 + clip_eps.",
    ),
    _row(
        "grpo_loss",
        "06",
        w106_grpo_loss_kl_coef_zero_skips_info,
        (
            "Edge value: with kl_coef = 0 drops logp_ref, so info['kl'] reports 0.0 instead of the "
            "measured KL (the loss itself is right)."
        ),
    ),
    _row("grpo_loss", "06", r31_grpo_loss_per_response_loop),
]


# ---------------------------------------------------------------- memory_accounting (07)

_c11_BYTES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}


def _c11_account(actor, critic, ref, reward, w, o, master):
    trained = actor + critic
    account = {
        "actor": actor * 2 * w,
        "critic": critic * 2 * w,
        "reference": ref * w,
        "reward": reward * w,
        "optimizer": trained * (2 * o + master),
    }
    account["total"] = sum(account.values())
    return account


def w107_memory_accounting_master_always(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _c11_BYTES[weights_dtype], _c11_BYTES[optimizer_dtype]
    return _c11_account(n_params_actor, n_params_critic, n_params_ref, n_params_reward, w, o, o)


def w108_memory_accounting_reference_trained(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _c11_BYTES[weights_dtype], _c11_BYTES[optimizer_dtype]
    master = o if w < o else 0
    account = _c11_account(n_params_actor, n_params_critic, n_params_ref, n_params_reward, w, o, master)
    account["reference"] = n_params_ref * 2 * w  # weights + gradients
    account["total"] = sum(v for k, v in account.items() if k != "total")
    return account


def w109_memory_accounting_fp16_is_bf16_only(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    # only knows the two dtypes of the lecture's example
    w = 2 if weights_dtype == "bf16" else 4
    o = 2 if optimizer_dtype == "bf16" else 4
    master = o if w < o else 0
    return _c11_account(n_params_actor, n_params_critic, n_params_ref, n_params_reward, w, o, master)


def w110_memory_accounting_float_bytes(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    bits = {"fp64": 64, "fp32": 32, "bf16": 16, "fp16": 16}
    w, o = bits[weights_dtype] / 8, bits[optimizer_dtype] / 8
    master = o if w < o else 0
    return _c11_account(n_params_actor, n_params_critic, n_params_ref, n_params_reward, w, o, master)


def w111_memory_accounting_key_typo(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _c11_BYTES[weights_dtype], _c11_BYTES[optimizer_dtype]
    master = o if w < o else 0
    account = _c11_account(n_params_actor, n_params_critic, n_params_ref, n_params_reward, w, o, master)
    account["ref"] = account.pop("reference")
    return account


def w112_memory_accounting_optimizer_counts_ref(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _c11_BYTES[weights_dtype], _c11_BYTES[optimizer_dtype]
    master = o if w < o else 0
    account = _c11_account(n_params_actor, n_params_critic, n_params_ref, n_params_reward, w, o, master)
    account["optimizer"] = (n_params_actor + n_params_critic + n_params_ref) * (2 * o + master)
    account["total"] = sum(v for k, v in account.items() if k != "total")
    return account


def w113_memory_accounting_total_models_only(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = _c11_BYTES[weights_dtype], _c11_BYTES[optimizer_dtype]
    master = o if w < o else 0
    account = _c11_account(n_params_actor, n_params_critic, n_params_ref, n_params_reward, w, o, master)
    account["total"] = account["actor"] + account["critic"] + account["reference"] + account["reward"]
    return account


def r32_memory_accounting_itemsize(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    torch_dtypes = {"fp64": torch.float64, "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    w = torch.tensor([], dtype=torch_dtypes[weights_dtype]).element_size()
    o = torch.tensor([], dtype=torch_dtypes[optimizer_dtype]).element_size()
    per_trained_optimizer = 2 * o
    if w < o:
        per_trained_optimizer += o
    rows = {}
    rows["actor"] = int(n_params_actor * (w + w))
    rows["critic"] = int(n_params_critic * (w + w))
    rows["reference"] = int(n_params_ref * w)
    rows["reward"] = int(n_params_reward * w)
    rows["optimizer"] = int((n_params_actor + n_params_critic) * per_trained_optimizer)
    rows["total"] = rows["actor"] + rows["critic"] + rows["reference"] + rows["reward"] + rows["optimizer"]
    return rows


def r33_memory_accounting_rows(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    size = {"fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}
    weight_bytes = size[weights_dtype]
    moment_bytes = size[optimizer_dtype]
    needs_master = weight_bytes < moment_bytes
    optimizer_per_param = moment_bytes * (3 if needs_master else 2)
    models = [
        ("actor", n_params_actor, True),
        ("critic", n_params_critic, True),
        ("reference", n_params_ref, False),
        ("reward", n_params_reward, False),
    ]
    out = {name: count * weight_bytes * (2 if trained else 1) for name, count, trained in models}
    out["optimizer"] = sum(count for _, count, trained in models if trained) * optimizer_per_param
    out["total"] = sum(out.values())
    return out


ROWS += [
    _row(
        "memory_accounting",
        "07",
        w107_memory_accounting_master_always,
        (
            "Always counts a master copy in the optimizer row, even when the weights are already "
            "as wide as the optimizer dtype (fp32 training needs none)."
        ),
    ),
    _row(
        "memory_accounting",
        "07",
        w108_memory_accounting_reference_trained,
        ("Counts gradients for the frozen reference model (weights + gradients) instead of weights only."),
    ),
    _row(
        "memory_accounting",
        "07",
        w109_memory_accounting_fp16_is_bf16_only,
        (
            "Knows only bf16 (2 bytes) and takes every other dtype as 4 bytes: fp16 is counted as "
            "4 bytes and fp64 as 4 instead of 8."
        ),
    ),
    _row(
        "memory_accounting",
        "07",
        w110_memory_accounting_float_bytes,
        ("Computes bytes as bits / 8, a Python float, so every row is a float instead of an int."),
    ),
    _row(
        "memory_accounting",
        "07",
        w111_memory_accounting_key_typo,
        "Returns the reference row under the key 'ref' instead of 'reference'.",
    ),
    _row(
        "memory_accounting",
        "07",
        w112_memory_accounting_optimizer_counts_ref,
        (
            "Gives the reference model optimizer state too (Adam moments and master copy for "
            "n_params_ref), though it is never trained."
        ),
    ),
    _row(
        "memory_accounting",
        "07",
        w113_memory_accounting_total_models_only,
        "The total leaves out the optimizer row (sums the four models only).",
    ),
    _row("memory_accounting", "07", r32_memory_accounting_itemsize),
    _row("memory_accounting", "07", r33_memory_accounting_rows),
]


# ---------------------------------------------------------------- read_sweep (07)


def w114_read_sweep_indices(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= reward.max() - tol).nonzero()[0, 0])
    return i, float(j), k


def w115_read_sweep_last_max(group_sizes, clip_eps, reward, tol=0.1):
    # ties resolved toward the largest configuration (the last maximal entry)
    flipped = torch.flip(reward.reshape(-1), dims=[0])
    flat = reward.numel() - 1 - int(torch.argmax(flipped))
    i, j = divmod(flat, reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w116_read_sweep_strict_tol(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group > reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w117_read_sweep_saturation_mean_over_clip(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, reward.shape[1])
    mean_per_group = reward.mean(dim=1)
    k = (
        int((mean_per_group >= reward.max() - tol).nonzero()[0, 0])
        if bool((mean_per_group >= reward.max() - tol).any())
        else i
    )
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w118_read_sweep_relative_tol(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= reward.max() * (1 - tol)).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w119_read_sweep_tensor_values(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, reward.shape[1])
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= reward.max() - tol).nonzero()[0, 0])
    return group_sizes[i], clip_eps[j], group_sizes[k]


def r34_read_sweep_python_scan(group_sizes, clip_eps, reward, tol=0.1):
    table = reward.tolist()
    best_value = max(max(row) for row in table)
    best = None
    for gi, row in enumerate(table):
        for ci, value in enumerate(row):
            if value == best_value and best is None:
                best = (gi, ci)
    threshold = float(reward.max() - tol)  # in the table's own dtype, as the comparison should be
    saturation = next(gi for gi, row in enumerate(table) if max(row) >= threshold)
    return int(group_sizes[best[0]]), float(clip_eps[best[1]]), int(group_sizes[saturation])


ROWS += [
    _row(
        "read_sweep",
        "07",
        w114_read_sweep_indices,
        ("Returns the indices (row, column, row) instead of the values from group_sizes and clip_eps."),
    ),
    _row(
        "read_sweep",
        "07",
        w115_read_sweep_last_max,
        (
            "Breaks ties toward the last maximal entry (largest group size, then largest clip "
            "range) instead of the cheapest configuration."
        ),
    ),
    _row(
        "read_sweep",
        "07",
        w116_read_sweep_strict_tol,
        ("Uses a strict > for 'within tol', so a group size exactly tol below the best does not count as saturated."),
    ),
    _row(
        "read_sweep",
        "07",
        w117_read_sweep_saturation_mean_over_clip,
        (
            "Saturation compares each group size's mean reward over the clip ranges, not its best "
            "reward, with the best of the table."
        ),
    ),
    _row(
        "read_sweep",
        "07",
        w118_read_sweep_relative_tol,
        ("Reads tol as a relative tolerance (within best * (1 - tol)) instead of an absolute distance below the best."),
    ),
    _row(
        "read_sweep",
        "07",
        w119_read_sweep_tensor_values,
        ("Returns 0-d tensors (group_sizes[i], clip_eps[j], ...) instead of an int, a float and an int."),
    ),
    _row("read_sweep", "07", r34_read_sweep_python_scan),
]


# ---------------------------------------------------------------- addition_exact_reward (08)


def w120_addition_exact_reward_strip(completion: str, answer: str) -> float:
    head, eos, _ = completion.partition("$")
    return float(bool(eos) and head.strip() == answer.strip())


def w121_addition_exact_reward_int_compare(completion: str, answer: str) -> float:
    head, eos, _ = completion.partition("$")
    if not eos or not head.isdigit():
        return 0.0
    return float(int(head) == int(answer))


def w122_addition_exact_reward_no_eos_ok(completion: str, answer: str) -> float:
    head = completion.split("$")[0]
    return float(head == answer)


def w123_addition_exact_reward_last_eos(completion: str, answer: str) -> float:
    head, eos, _ = completion.rpartition("$")
    return float(bool(eos) and head == answer)


def w124_addition_exact_reward_startswith(completion: str, answer: str) -> float:
    return float(completion.startswith(answer) and "$" in completion)


def r35_addition_exact_reward_regex(completion: str, answer: str) -> float:
    m = re.match(r"([^$]*)\$", completion)
    if m is None:
        return 0.0
    return 1.0 if m.group(1) == answer else 0.0


def r36_addition_exact_reward_index(completion: str, answer: str) -> float:
    cut = completion.find("$")
    if cut < 0:
        return 0.0
    return float(completion[:cut] == answer)


ROWS += [
    _row(
        "addition_exact_reward",
        "08",
        w120_addition_exact_reward_strip,
        ('Over-forgiving: strips whitespace before comparing, so extra spaces before EOS ("132 $") still earn 1.0.'),
    ),
    _row(
        "addition_exact_reward",
        "08",
        w121_addition_exact_reward_int_compare,
        'Compares as integers, so leading zeros ("0132$") earn 1.0.',
    ),
    _row(
        "addition_exact_reward",
        "08",
        w122_addition_exact_reward_no_eos_ok,
        'Does not require EOS: a completion that never stopped ("132") earns 1.0.',
    ),
    _row(
        "addition_exact_reward",
        "08",
        w123_addition_exact_reward_last_eos,
        ("Splits at the last EOS instead of the first, so text after the first EOS is compared."),
    ),
    _row(
        "addition_exact_reward",
        "08",
        w124_addition_exact_reward_startswith,
        (
            "Only checks that the completion starts with the answer and holds an EOS somewhere, so "
            '"1325$" or "132x$" earn 1.0.'
        ),
    ),
    _row("addition_exact_reward", "08", r35_addition_exact_reward_regex),
    _row("addition_exact_reward", "08", r36_addition_exact_reward_index),
]


# ---------------------------------------------------------------- completion_mask (08)


def w125_completion_mask_excludes_eos(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return (torch.cumsum(is_eos, dim=-1) == 0).float()


def w126_completion_mask_argmax(completion_ids, eos_id):
    L = completion_ids.shape[-1]
    first = torch.argmax((completion_ids == eos_id).long(), dim=-1, keepdim=True)
    positions = torch.arange(L)
    return (positions <= first).float()


def w127_completion_mask_bool(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return (torch.cumsum(is_eos, dim=-1) - is_eos) == 0


def w128_completion_mask_2d_only(completion_ids, eos_id):
    B, L = completion_ids.shape
    mask = torch.ones(B, L)
    for b in range(B):
        hits = (completion_ids[b] == eos_id).nonzero()
        if len(hits):
            mask[b, hits[0, 0] + 1 :] = 0.0
    return mask


def w129_completion_mask_last_eos(completion_ids, eos_id):
    # keeps everything up to the last EOS of the row
    is_eos = (completion_ids == eos_id).long()
    after = torch.flip(torch.cumsum(torch.flip(is_eos, dims=[-1]), dim=-1), dims=[-1])
    has = is_eos.sum(dim=-1, keepdim=True) > 0
    return torch.where(has, (after > 0).float(), torch.ones_like(is_eos, dtype=torch.float32))


def r37_completion_mask_cummax(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).to(torch.int32)
    seen = torch.cummax(is_eos, dim=-1).values  # 1 from the first EOS on
    seen_before = F.pad(seen[..., :-1], (1, 0))
    return 1.0 - seen_before.to(torch.float32)


def r38_completion_mask_argmax_guarded(completion_ids, eos_id):
    is_eos = completion_ids == eos_id
    L = completion_ids.shape[-1]
    first = torch.where(is_eos.any(dim=-1), is_eos.int().argmax(dim=-1), L)
    return (torch.arange(L) <= first[..., None]).float()


ROWS += [
    _row(
        "completion_mask",
        "08",
        w125_completion_mask_excludes_eos,
        (
            "Excludes the EOS token itself (mask is 1 only strictly before the first EOS), "
            "although the EOS is part of the completion."
        ),
    ),
    _row(
        "completion_mask",
        "08",
        w126_completion_mask_argmax,
        (
            "Finds the first EOS with argmax, which returns 0 for a row without EOS, so such a row "
            "keeps only its first token instead of all."
        ),
    ),
    _row("completion_mask", "08", w127_completion_mask_bool, "Returns a bool mask instead of float32."),
    _row(
        "completion_mask",
        "08",
        w128_completion_mask_2d_only,
        ("Unpacks the shape as (B, L), so only 2-D input works; the [..., L] ids (e.g. [B, G, L]) raise."),
    ),
    _row(
        "completion_mask",
        "08",
        w129_completion_mask_last_eos,
        "Keeps every token up to the last EOS of the row instead of the first.",
    ),
    _row("completion_mask", "08", r37_completion_mask_cummax),
    _row("completion_mask", "08", r38_completion_mask_argmax_guarded),
]


# ---------------------------------------------------------------- grpo_step (08)


def _c11_step(
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
    **how,
):
    from course_lib.grpo import grpo_loss

    B, G, L = completions.shape
    P = prompts.shape[1]
    flat_prompts = prompts.repeat_interleave(G, dim=0)
    flat = completions.reshape(B * G, L)
    ids = torch.cat([flat_prompts, flat[:, :-1]], dim=1)

    def logp_of(model):
        if how.get("off_by_one"):
            logits = model(torch.cat([flat_prompts, flat], dim=1))[:, P:, :]
        else:
            logits = model(ids)[:, P - 1 :, :]
        logp = torch.log_softmax(logits, dim=-1).gather(-1, flat.long()[..., None]).squeeze(-1)
        return logp.reshape(B, G, L)

    logp = logp_of(policy)
    logp_ref = None
    if how.get("always_ref") or (ref_model is not None and kl_coef > 0):
        with torch.no_grad():
            logp_ref = logp_of(ref_model)
    is_eos = (completions == eos_id).long()
    if how.get("mask_no_eos"):
        mask = (torch.cumsum(is_eos, dim=-1) == 0).float()
    else:
        mask = ((torch.cumsum(is_eos, dim=-1) - is_eos) == 0).float()
    coef = 0.04 if how.get("default_kl") else kl_coef
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=coef)
    optimizer.zero_grad()
    loss.backward()
    if how.get("clip_after"):
        optimizer.step()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    else:
        if not how.get("no_clip"):
            torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
        optimizer.step()
    if how.get("tensor"):
        return loss.detach()
    return loss.item()


def w130_grpo_step_no_grad_clip(
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
    return _c11_step(
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
        no_clip=True,
    )


def w131_grpo_step_clip_after_step(
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
    return _c11_step(
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
        clip_after=True,
    )


def w132_grpo_step_mask_drops_eos(
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
    return _c11_step(
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
        mask_no_eos=True,
    )


def w133_grpo_step_off_by_one(
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
    return _c11_step(
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
        off_by_one=True,
    )


def w134_grpo_step_ref_none_crashes(
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
    return _c11_step(
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
        always_ref=True,
    )


def w135_grpo_step_default_kl(
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
    return _c11_step(
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
        default_kl=True,
    )


def w136_grpo_step_returns_tensor(
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
    return _c11_step(
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
        tensor=True,
    )


def r39_grpo_step_full_sequence(
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
    from course_lib.grpo import grpo_loss

    B, G, L = completions.shape
    P = prompts.shape[1]
    rows = []
    for b in range(B):
        for g in range(G):
            rows.append(torch.cat([prompts[b], completions[b, g]]))
    sequences = torch.stack(rows)  # (B*G, P + L), group order

    def token_logps(model):
        logits = model(sequences[:, :-1])[:, P - 1 :]  # (B*G, L, V)
        targets = sequences[:, P:]
        return (-F.cross_entropy(logits.transpose(1, 2), targets.long(), reduction="none")).view(B, G, L)

    logp = token_logps(policy)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = token_logps(ref_model)
    eos_seen = torch.cumsum((completions == eos_id).int(), dim=-1)
    mask = ((eos_seen == 0) | ((eos_seen == 1) & (completions == eos_id))).float()
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    for p in policy.parameters():
        p.grad = None
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(policy.parameters()), max_norm=max_grad_norm)
    optimizer.step()
    return float(loss.detach())


ROWS += [
    _row(
        "grpo_step",
        "08",
        w130_grpo_step_no_grad_clip,
        "Never clips the gradient norm: max_grad_norm is accepted but ignored.",
    ),
    _row(
        "grpo_step",
        "08",
        w131_grpo_step_clip_after_step,
        ("Clips the gradient norm after optimizer.step(), so the step uses the unclipped gradient."),
    ),
    _row(
        "grpo_step",
        "08",
        w132_grpo_step_mask_drops_eos,
        ("Builds the mask strictly before the first EOS, dropping the EOS token itself from the loss."),
    ),
    _row(
        "grpo_step",
        "08",
        w133_grpo_step_off_by_one,
        (
            "Off by one in the logits: completion token t is scored by the logits at position P + "
            "t (which predict token t + 1) instead of P - 1 + t."
        ),
    ),
    _row(
        "grpo_step",
        "08",
        w134_grpo_step_ref_none_crashes,
        "Always calls ref_model, so ref_model=None (allowed: no KL) crashes.",
    ),
    _row(
        "grpo_step", "08", w135_grpo_step_default_kl, "Ignores the kl_coef argument: always passes 0.04 to grpo_loss."
    ),
    _row(
        "grpo_step",
        "08",
        w136_grpo_step_returns_tensor,
        "Returns the loss as a 0-d tensor (loss.detach()) instead of a Python float.",
    ),
    _row("grpo_step", "08", r39_grpo_step_full_sequence),
]


# ---------------------------------------------------------------- answer_reward (09)


def _c11_text(completion):
    return completion if isinstance(completion, str) else completion[-1]["content"]


def w137_answer_reward_first_message(prompts: list, completions: list, answer: list, **kwargs) -> list:
    from course_lib.rewards import math_answer_reward

    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(None)
            continue
        text = completion if isinstance(completion, str) else completion[0]["content"]
        rewards.append(math_answer_reward(text, str(truth)))
    return rewards


def w138_answer_reward_none_is_zero(prompts: list, completions: list, answer: list, **kwargs) -> list:
    from course_lib.rewards import math_answer_reward

    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(0.0)  # defensive: never hand TRL a None
            continue
        rewards.append(math_answer_reward(_c11_text(completion), str(truth)))
    return rewards


def w139_answer_reward_joined_messages(prompts: list, completions: list, answer: list, **kwargs) -> list:
    from course_lib.rewards import math_answer_reward

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


def w140_answer_reward_strings_only(prompts: list, completions: list, answer: list, **kwargs) -> list:
    from course_lib.rewards import math_answer_reward

    return [
        None if truth is None else math_answer_reward(completion, truth)
        for completion, truth in zip(completions, answer)
    ]


def w141_answer_reward_tensor(prompts: list, completions: list, answer: list, **kwargs) -> list:
    from course_lib.rewards import math_answer_reward

    values = [
        float("nan") if truth is None else math_answer_reward(_c11_text(c), str(truth))
        for c, truth in zip(completions, answer)
    ]
    return torch.tensor(values)


def w142_answer_reward_grouped_answers(prompts: list, completions: list, answer: list, **kwargs) -> list:
    # thinks answer holds one entry per prompt, and the G completions of prompt b are adjacent
    from course_lib.rewards import math_answer_reward

    G = len(completions) // len(set(map(str, prompts))) if prompts else 1
    rewards = []
    for i, completion in enumerate(completions):
        truth = answer[i // G * G] if G > 0 else answer[i]
        if truth is None:
            rewards.append(None)
            continue
        rewards.append(math_answer_reward(_c11_text(completion), str(truth)))
    return rewards


def r40_answer_reward_indexed(prompts: list, completions: list, answer: list, **kwargs) -> list:
    from course_lib.rewards import math_answer_reward

    out = [None] * len(completions)
    for i in range(len(completions)):
        if answer[i] is None:
            continue
        c = completions[i]
        if isinstance(c, list):
            c = c[-1].get("content", "")
        out[i] = math_answer_reward(c, f"{answer[i]}")
    return out


def r41_answer_reward_comprehension(prompts: list, completions: list, answer: list, **kwargs) -> list:
    from course_lib.rewards import math_answer_reward

    def last_text(completion):
        if isinstance(completion, str):
            return completion
        return completion[len(completion) - 1]["content"]

    return [None if a is None else math_answer_reward(last_text(c), str(a)) for c, a in zip(completions, answer)]


ROWS += [
    _row(
        "answer_reward",
        "09",
        w137_answer_reward_first_message,
        ("For conversational completions, reads the first message's content instead of the last one."),
    ),
    _row(
        "answer_reward",
        "09",
        w138_answer_reward_none_is_zero,
        ("Over-defensive: returns 0.0 where answer is None instead of None (TRL's 'no reward')."),
    ),
    _row(
        "answer_reward",
        "09",
        w139_answer_reward_joined_messages,
        (
            "Joins the contents of all messages of a conversational completion instead of reading "
            "the last one, so an answer in an earlier (e.g. tool) message counts."
        ),
    ),
    _row(
        "answer_reward",
        "09",
        w140_answer_reward_strings_only,
        (
            "Handles only string completions: a completion given as a list of messages is passed "
            "to math_answer_reward as a list and crashes."
        ),
    ),
    _row(
        "answer_reward",
        "09",
        w141_answer_reward_tensor,
        ("Returns a torch tensor (NaN for missing answers) instead of a list of floats with None."),
    ),
    _row(
        "answer_reward",
        "09",
        w142_answer_reward_grouped_answers,
        (
            "Assumes the G completions of a prompt are adjacent and takes the group's first answer "
            "for all of them (answer[i // G * G]) instead of answer[i]; wrong when the answers of "
            "one group differ or the batch is not grouped that way."
        ),
    ),
    _row("answer_reward", "09", r40_answer_reward_indexed),
    _row("answer_reward", "09", r41_answer_reward_comprehension),
]


# ---------------------------------------------------------------- completion_logps (09)


def _c11_logps(model, sequences, prompt_mask, eos_id, temperature, **how):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    is_eos = (completion_ids == eos_id).long()
    if how.get("mask_no_eos"):
        mask = (torch.cumsum(is_eos, dim=-1) == 0).float()
    else:
        mask = ((torch.cumsum(is_eos, dim=-1) - is_eos) == 0).float()
    attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    if how.get("no_attention"):
        attention_mask = torch.ones_like(attention_mask)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    if how.get("no_positions"):
        out = model(input_ids=sequences, attention_mask=attention_mask)
    else:
        out = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids)
    logits = out.logits[:, P - 1 : -1].float()
    if how.get("temp_after"):
        logp = torch.log_softmax(logits, dim=-1) / temperature
    elif how.get("temp_ignored"):
        logp = torch.log_softmax(logits, dim=-1)
    else:
        logp = torch.log_softmax(logits / temperature, dim=-1)
    logp = logp.gather(-1, completion_ids[..., None]).squeeze(-1)
    return logp, mask


def w143_completion_logps_no_position_ids(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _c11_logps(model, sequences, prompt_mask, eos_id, temperature, no_positions=True)


def w144_completion_logps_temperature_after(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _c11_logps(model, sequences, prompt_mask, eos_id, temperature, temp_after=True)


def w145_completion_logps_temperature_ignored(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _c11_logps(model, sequences, prompt_mask, eos_id, temperature, temp_ignored=True)


def w146_completion_logps_mask_drops_eos(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _c11_logps(model, sequences, prompt_mask, eos_id, temperature, mask_no_eos=True)


def w147_completion_logps_padding_attended(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _c11_logps(model, sequences, prompt_mask, eos_id, temperature, no_attention=True)


def w148_completion_logps_tuple_swapped(model, sequences, prompt_mask, eos_id, temperature=1.0):
    logp, mask = _c11_logps(model, sequences, prompt_mask, eos_id, temperature)
    return mask, logp


def r42_completion_logps_cross_entropy(model, sequences, prompt_mask, eos_id, temperature=1.0):
    B, P = prompt_mask.shape
    L = sequences.shape[1] - P
    attention = torch.ones_like(sequences)
    attention[:, :P] = prompt_mask.to(sequences.dtype)
    # left padding: each row's first real token sits at position 0
    n_pad = P - prompt_mask.long().sum(dim=1, keepdim=True)
    positions = (torch.arange(P + L, device=sequences.device)[None, :] - n_pad).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=attention, position_ids=positions).logits
    scores = logits[:, P - 1 : P - 1 + L].to(torch.float32) / temperature
    targets = sequences[:, P:]
    logp = -F.cross_entropy(scores.transpose(1, 2), targets, reduction="none")
    eos_positions = torch.where(targets == eos_id, torch.arange(L, device=targets.device)[None, :], L)
    first = eos_positions.min(dim=1, keepdim=True).values
    mask = (torch.arange(L, device=targets.device)[None, :] <= first).to(torch.float32)
    return logp, mask


ROWS += [
    _row(
        "completion_logps",
        "09",
        w143_completion_logps_no_position_ids,
        (
            "Passes the attention mask but no position_ids, so with left padding a model that does "
            "not derive positions from the mask (GPT-2) counts the padding as positions."
        ),
    ),
    _row(
        "completion_logps",
        "09",
        w144_completion_logps_temperature_after,
        ("Divides the log-probs by the temperature after log_softmax instead of dividing the logits before it."),
    ),
    _row(
        "completion_logps",
        "09",
        w145_completion_logps_temperature_ignored,
        "Ignores temperature: returns the log-probs of the temperature-1 distribution.",
    ),
    _row(
        "completion_logps",
        "09",
        w146_completion_logps_mask_drops_eos,
        "The mask stops before the first EOS instead of including it.",
    ),
    _row(
        "completion_logps",
        "09",
        w147_completion_logps_padding_attended,
        (
            "Uses an all-ones attention mask (and positions derived from it), so the prompt's left "
            "padding is attended to and counted as positions."
        ),
    ),
    _row(
        "completion_logps", "09", w148_completion_logps_tuple_swapped, "Returns (mask, logp) instead of (logp, mask)."
    ),
    _row("completion_logps", "09", r42_completion_logps_cross_entropy),
]


# ---------------------------------------------------------------- grpo_config_kwargs (09)

_c11_SWITCHES = (
    "algo",
    "adv_estimator",
    "policy_loss",
    "dynamic_sampling",
    "overlong_cache",
    "kl_placement",
    "whiten_advantages",
)
_c11_LOSS_TYPES = {"seq-mean-token-mean": "grpo", "token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}


def _c11_kwargs(cfg, num_processes, **how):
    from course_lib.lm_rl import LMRLConfig

    defaults = LMRLConfig()
    switches = _c11_SWITCHES[:1] if how.get("only_algo") else _c11_SWITCHES
    for switch in switches:
        if getattr(cfg, switch) != getattr(defaults, switch):
            raise ValueError(f"cfg.{switch}: GRPOConfig has no field for {getattr(cfg, switch)!r} here")
    B, G, K, M = cfg.prompts_per_step, cfg.group_size, cfg.update_epochs, cfg.num_minibatches
    minibatch = B * G // M
    per_process = minibatch // num_processes
    if how.get("ignore_processes"):
        per_process = minibatch
    micro = cfg.micro_batch_size or per_process
    if B * G % M or minibatch % num_processes or per_process % micro:
        raise ValueError(
            f"num_processes: {B * G} completions do not split into {M} minibatches over {num_processes} processes"
        )
    accumulation = per_process // micro
    steps_per_round = K * M
    schedule = cfg.lr_schedule
    if schedule == "constant" and cfg.warmup_iterations > 0:
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
        "use_bias_correction_kl": False,
        "epsilon": cfg.clip_eps,
        "epsilon_high": cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high,
        "loss_type": _c11_LOSS_TYPES[cfg.loss_agg],
        "scale_rewards": "group" if cfg.normalize_std else "none",
        "mask_truncated_completions": cfg.overlong_filter,
        "seed": cfg.seed,
    }
    return kwargs


def w149_grpo_config_kwargs_max_steps_iterations(cfg, num_processes: int = 1) -> dict:
    kwargs = _c11_kwargs(cfg, num_processes)
    kwargs["max_steps"] = cfg.iterations
    return kwargs


def w150_grpo_config_kwargs_only_algo_checked(cfg, num_processes: int = 1) -> dict:
    return _c11_kwargs(cfg, num_processes, only_algo=True)


def w151_grpo_config_kwargs_ignores_processes(cfg, num_processes: int = 1) -> dict:
    return _c11_kwargs(cfg, num_processes, ignore_processes=True)


def w152_grpo_config_kwargs_scale_rewards_bool(cfg, num_processes: int = 1) -> dict:
    kwargs = _c11_kwargs(cfg, num_processes)
    kwargs["scale_rewards"] = cfg.normalize_std  # the older TRL's boolean
    return kwargs


def w153_grpo_config_kwargs_epsilon_high_none(cfg, num_processes: int = 1) -> dict:
    kwargs = _c11_kwargs(cfg, num_processes)
    kwargs["epsilon_high"] = cfg.clip_eps_high
    return kwargs


def w154_grpo_config_kwargs_loss_type_bnpo(cfg, num_processes: int = 1) -> dict:
    kwargs = _c11_kwargs(cfg, num_processes)
    if cfg.loss_agg == "token-mean":
        kwargs["loss_type"] = "bnpo"
    return kwargs


def w155_grpo_config_kwargs_warmup_iterations(cfg, num_processes: int = 1) -> dict:
    kwargs = _c11_kwargs(cfg, num_processes)
    kwargs["warmup_steps"] = cfg.warmup_iterations
    return kwargs


def r43_grpo_config_kwargs_restructured(cfg, num_processes: int = 1) -> dict:
    from course_lib.lm_rl import LMRLConfig

    reference = LMRLConfig()
    for name in (
        "algo",
        "adv_estimator",
        "policy_loss",
        "dynamic_sampling",
        "overlong_cache",
        "kl_placement",
        "whiten_advantages",
    ):
        value = getattr(cfg, name)
        if value != getattr(reference, name):
            raise ValueError(f"cfg.{name}: no GRPOConfig field translates {value!r}")
    completions = cfg.prompts_per_step * cfg.group_size
    if completions % cfg.num_minibatches:
        raise ValueError(
            f"num_processes: {completions} completions do not split into {cfg.num_minibatches} minibatches"
        )
    per_step = completions // cfg.num_minibatches
    if per_step % num_processes:
        raise ValueError(f"num_processes: {per_step} completions per step do not split over {num_processes} processes")
    per_process = per_step // num_processes
    micro = per_process if cfg.micro_batch_size is None or cfg.micro_batch_size == 0 else cfg.micro_batch_size
    if per_process % micro:
        raise ValueError(
            f"num_processes: {per_process} completions per process do not split into micro-batches of {micro}"
        )
    accumulation = per_process // micro
    optimiser_steps = cfg.update_epochs * cfg.num_minibatches
    scheduler = (
        "constant_with_warmup" if cfg.lr_schedule == "constant" and cfg.warmup_iterations > 0 else cfg.lr_schedule
    )
    out = dict(
        seed=cfg.seed,
        learning_rate=cfg.lr,
        lr_scheduler_type=scheduler,
        warmup_steps=optimiser_steps * cfg.warmup_iterations,
        max_steps=optimiser_steps * cfg.iterations,
        max_grad_norm=cfg.max_grad_norm,
        num_generations=cfg.group_size,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=cfg.num_minibatches * accumulation,
        num_iterations=cfg.update_epochs,
        max_completion_length=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        beta=cfg.kl_coef,
        use_bias_correction_kl=False,
        epsilon=cfg.clip_eps,
        epsilon_high=cfg.clip_eps_high if cfg.clip_eps_high is not None else cfg.clip_eps,
        loss_type={"token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}.get(cfg.loss_agg, "grpo"),
        scale_rewards="none" if not cfg.normalize_std else "group",
        mask_truncated_completions=cfg.overlong_filter,
    )
    return out


ROWS += [
    _row(
        "grpo_config_kwargs",
        "09",
        w149_grpo_config_kwargs_max_steps_iterations,
        (
            "max_steps is cfg.iterations (rounds) instead of optimiser steps, iterations * "
            "update_epochs * num_minibatches."
        ),
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w150_grpo_config_kwargs_only_algo_checked,
        (
            "Refuses only a non-GRPO algo; the other switches with no GRPOConfig field "
            "(adv_estimator, policy_loss, dynamic_sampling, ...) are silently dropped."
        ),
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w151_grpo_config_kwargs_ignores_processes,
        ("Ignores num_processes when sizing per_device_train_batch_size: each process is given the whole minibatch."),
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w152_grpo_config_kwargs_scale_rewards_bool,
        ('scale_rewards is the boolean cfg.normalize_std (an older TRL\'s form) instead of "group" / "none".'),
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w153_grpo_config_kwargs_epsilon_high_none,
        ("epsilon_high is cfg.clip_eps_high as is, None when unset, instead of falling back to clip_eps."),
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w154_grpo_config_kwargs_loss_type_bnpo,
        'Maps token-mean to TRL\'s loss_type "bnpo" instead of "dapo".',
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w155_grpo_config_kwargs_warmup_iterations,
        (
            "warmup_steps is cfg.warmup_iterations (rounds) instead of optimiser steps (times "
            "update_epochs * num_minibatches)."
        ),
    ),
    _row("grpo_config_kwargs", "09", r43_grpo_config_kwargs_restructured),
]


# ---------------------------------------------------------------- pass_at_k (10)


def w156_pass_at_k_plugin(n, c, k):
    n, c, k = (torch.as_tensor(x, dtype=torch.float64) for x in (n, c, k))
    return 1 - (1 - c / n) ** k


def r44_pass_at_k_exact_comb(n, c, k):
    def one(n_, c_, k_):
        if n_ - c_ < k_:
            return 1.0 if c_ > 0 else 0.0
        return 1.0 - math.comb(n_ - c_, k_) / math.comb(n_, k_)

    n_t, c_t, k_t = torch.broadcast_tensors(*(torch.as_tensor(x) for x in (n, c, k)))
    values = [one(int(a), int(b), int(d)) for a, b, d in zip(n_t.reshape(-1), c_t.reshape(-1), k_t.reshape(-1))]
    return torch.tensor(values, dtype=torch.float64).reshape(n_t.shape)


def w157_pass_at_k_product_shifted(n, c, k):
    # misreads the product's range as i = n - c, ..., n - 1
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x, dtype=torch.float64) for x in (n, c, k)))
    j = torch.arange(int(c.max()), dtype=torch.float64)
    i = (n - c)[..., None] + j
    factors = torch.where(j < c[..., None], 1 - k[..., None] / i, torch.ones((), dtype=torch.float64))
    estimate = 1 - factors.prod(dim=-1)
    return torch.where(n - c < k, (c > 0).double(), estimate)


def w158_pass_at_k_k_greater_n_zero(n, c, k):
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x, dtype=torch.float64) for x in (n, c, k)))
    out = torch.empty_like(n)
    flat_n, flat_c, flat_k = n.reshape(-1), c.reshape(-1), k.reshape(-1)
    flat_out = out.reshape(-1)
    for idx in range(flat_n.numel()):
        nn_, cc, kk = flat_n[idx].item(), flat_c[idx].item(), flat_k[idx].item()
        if kk > nn_:
            flat_out[idx] = 0.0  # cannot draw k from n
        elif nn_ - cc < kk:
            flat_out[idx] = 1.0
        else:
            prod = 1.0
            for i in range(int(nn_ - cc) + 1, int(nn_) + 1):
                prod *= 1 - kk / i
            flat_out[idx] = 1 - prod
    return out


def w159_pass_at_k_int_only(n, c, k):
    # Chen et al.'s numpy code, for one int triple
    if n - c < k:
        return torch.tensor(float(c > 0), dtype=torch.float64)
    return torch.tensor(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)), dtype=torch.float64)


def w160_pass_at_k_float32(n, c, k):
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x, dtype=torch.float32) for x in (n, c, k)))
    j = torch.arange(int(c.max()) if c.numel() else 0, dtype=torch.float32)
    i = (n - c + 1)[..., None] + j
    factors = torch.where(j < c[..., None], 1 - k[..., None] / i, torch.ones(()))
    estimate = 1 - factors.prod(dim=-1)
    return torch.where(n - c < k, (c > 0).float(), estimate)


def r45_pass_at_k_log_space(n, c, k):
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x).to(torch.float64) for x in (n, c, k)))
    all_right_drawn = n - c < k
    # safe values where the product is not used
    k_safe = torch.where(all_right_drawn, torch.zeros_like(k), k)
    # log prod_{i=n-c+1}^{n} (1 - k/i) = sum log((i - k) / i)
    #   = [lgamma(n-k+1) - lgamma(n-c-k+1)] - [lgamma(n+1) - lgamma(n-c+1)]
    log_prod = (torch.lgamma(n - k_safe + 1) - torch.lgamma(n - c - k_safe + 1)) - (
        torch.lgamma(n + 1) - torch.lgamma(n - c + 1)
    )
    estimate = -torch.expm1(log_prod)
    return torch.where(all_right_drawn, (c > 0).to(torch.float64), estimate)


ROWS += [
    _row(
        "pass_at_k",
        "10",
        w156_pass_at_k_plugin,
        (
            "Uses the plug-in estimate 1 - (1 - c/n)^k (drawing with replacement) instead of Chen "
            "et al.'s unbiased estimator."
        ),
    ),
    _row(
        "pass_at_k",
        "10",
        w157_pass_at_k_product_shifted,
        (
            "Misreads the product's range: multiplies (1 - k/i) for i = n - c, ..., n - 1 instead "
            "of i = n - c + 1, ..., n."
        ),
    ),
    _row(
        "pass_at_k",
        "10",
        w158_pass_at_k_k_greater_n_zero,
        ("For k > n returns 0 ('cannot draw k from n') instead of pass@n (1 when any sample was right)."),
    ),
    _row(
        "pass_at_k",
        "10",
        w159_pass_at_k_int_only,
        (
            "Copies Chen et al.'s numpy code for one int triple: tensor or array n, c, k (allowed, "
            "broadcast) fail or give a wrong shape."
        ),
    ),
    _row("pass_at_k", "10", w160_pass_at_k_float32, "Computes in float32 and returns float32 instead of float64."),
    _row("pass_at_k", "10", r45_pass_at_k_log_space),
    _row("pass_at_k", "10", r44_pass_at_k_exact_comb),
]


# ---------------------------------------------------------------- aggregation_token_weight (10)


def _c11_weight(length, mode, max_len=None, **how):
    dtype = length.dtype if length.is_floating_point() else torch.get_default_dtype()
    o = length.to(dtype)
    N = o.numel()
    if max_len is None:
        max_len = o.max()
    if mode == "seq-mean-token-mean":
        w = 1 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    elif mode == "seq-mean-token-sum-norm":
        w = torch.ones_like(o) / (N * max_len) if not how.get("no_n") else torch.ones_like(o) / max_len
    else:
        raise ValueError(f"mode: unknown {mode!r}")
    if how.get("keep_empty"):
        return w
    return torch.where(o > 0, w, torch.zeros_like(w))


def w161_aggregation_token_weight_empty_not_zero(length, mode: str, max_len=None):
    return _c11_weight(length, mode, max_len, keep_empty=True)


def w162_aggregation_token_weight_verl_sum_norm(length, mode: str, max_len=None):
    return _c11_weight(length, mode, max_len, no_n=True)


def w163_aggregation_token_weight_float32(length, mode: str, max_len=None):
    o = length.to(torch.float32)
    N = o.numel()
    if max_len is None:
        max_len = o.max()
    if mode == "seq-mean-token-mean":
        w = 1 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    elif mode == "seq-mean-token-sum-norm":
        w = torch.ones_like(o) / (N * max_len)
    else:
        raise ValueError(f"mode: unknown {mode!r}")
    return torch.where(o > 0, w, torch.zeros_like(w))


def w164_aggregation_token_weight_per_row_groups(length, mode: str, max_len=None):
    # treats each row of a 2-D length as its own group of N = G responses
    dtype = length.dtype if length.is_floating_point() else torch.get_default_dtype()
    o = length.to(dtype)
    N = o.shape[-1]
    if max_len is None:
        max_len = o.max()
    if mode == "seq-mean-token-mean":
        w = 1 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum(dim=-1, keepdim=True)
    elif mode == "seq-mean-token-sum-norm":
        w = torch.ones_like(o) / (N * max_len)
    else:
        raise ValueError(f"mode: unknown {mode!r}")
    return torch.where(o > 0, w, torch.zeros_like(w))


def w165_aggregation_token_weight_max_len_padded_plus_one(length, mode: str, max_len=None):
    # counts EOS again on top of the longest length
    dtype = length.dtype if length.is_floating_point() else torch.get_default_dtype()
    o = length.to(dtype)
    if max_len is None:
        max_len = o.max() + 1
    return _c11_weight(length, mode, max_len)


def r46_aggregation_token_weight_autograd(length, mode: str, max_len=None):
    from course_lib.grpo import aggregate_loss

    dtype = length.dtype if length.is_floating_point() else torch.get_default_dtype()
    o = length.to(dtype).reshape(-1)
    T = int(o.max().item()) if o.numel() else 0
    T = max(T, 1)
    mask = torch.arange(T)[None, :] < o[:, None]
    per_token = torch.zeros(o.numel(), T, dtype=dtype, requires_grad=True)
    L = float(o.max()) if max_len is None else max_len
    loss = aggregate_loss(per_token, mask, mode, L)
    (grad,) = torch.autograd.grad(loss, per_token, allow_unused=True)
    if grad is None:
        grad = torch.zeros_like(per_token)
    return grad[:, 0].masked_fill(o == 0, 0.0).reshape(length.shape)


ROWS += [
    _row(
        "aggregation_token_weight",
        "10",
        w161_aggregation_token_weight_empty_not_zero,
        (
            "Leaves out the zero for empty responses: a response of length 0 gets a non-zero "
            "weight (1/N under the per-sequence mean)."
        ),
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w162_aggregation_token_weight_verl_sum_norm,
        (
            "For seq-mean-token-sum-norm uses verl's 1 / max_len (no mean over the N responses) "
            "instead of 1 / (N * max_len)."
        ),
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w163_aggregation_token_weight_float32,
        ("Hard-codes float32, so a float64 length (or a float64 default dtype) gets float32 weights."),
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w164_aggregation_token_weight_per_row_groups,
        (
            "Treats each row of a multi-dimensional length as its own group (N = last dimension, "
            "token sums per row) instead of aggregating all entries together."
        ),
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w165_aggregation_token_weight_max_len_padded_plus_one,
        ("With max_len None, uses the longest length + 1 (counting EOS again) instead of the longest length."),
    ),
    _row("aggregation_token_weight", "10", r46_aggregation_token_weight_autograd),
]


# ---------------------------------------------------------------- completion_style (10)


def w166_completion_style_whole_text(text: str, n_digits: int = 3) -> str:
    # reads the whole text, not only what comes before the first "$"
    if not text.endswith("$"):
        return "malformed"
    body = text[:-1]
    if re.fullmatch(r"[0-9]+", body):
        return "direct"
    m = re.fullmatch(r"\[([^\[\]]+)\]([0-9]+)", body)
    if m is None:
        return "malformed"
    content = m.group(1)
    if re.fullmatch(r"\.+", content):
        return "filler"
    totals = content.split(",")
    if len(totals) == n_digits and all(re.fullmatch(r"1?[0-9]", t) for t in totals):
        return "scratchpad"
    return "malformed"


def _c11_style(text, n_digits, total=r"1?[0-9]", count=True, leading_digits_after=True):
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    if re.fullmatch(r"[0-9]+", body):
        return "direct"
    after = r"([0-9]+)" if leading_digits_after else r"([0-9]*)"
    m = re.fullmatch(r"\[([^\[\]]+)\]" + after, body)
    if m is None:
        return "malformed"
    content = m.group(1)
    if re.fullmatch(r"\.+", content):
        return "filler"
    totals = content.split(",")
    if (not count or len(totals) == n_digits) and all(re.fullmatch(total, t) for t in totals):
        return "scratchpad"
    return "malformed"


def w167_completion_style_totals_any_int(text: str, n_digits: int = 3) -> str:
    return _c11_style(text, n_digits, total=r"[0-9]+")


def w168_completion_style_count_ignored(text: str, n_digits: int = 3) -> str:
    return _c11_style(text, n_digits, count=False)


def w169_completion_style_digits_optional(text: str, n_digits: int = 3) -> str:
    return _c11_style(text, n_digits, leading_digits_after=False)


def w170_completion_style_isdigit(text: str, n_digits: int = 3) -> str:
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    if body.isdigit():  # str.isdigit also accepts other digits, e.g. superscripts
        return "direct"
    return _c11_style(text, n_digits)


def w171_completion_style_strips(text: str, n_digits: int = 3) -> str:
    # forgiving: trims spaces around the body
    body, eos, rest = text.partition("$")
    return _c11_style(body.strip() + eos + rest, n_digits)


def r47_completion_style_parser(text: str, n_digits: int = 3) -> str:
    cut = text.find("$")
    if cut < 0:
        return "malformed"
    body = text[:cut]
    digits = set("0123456789")
    if body and set(body) <= digits:
        return "direct"
    if not body.startswith("[") or "]" not in body:
        return "malformed"
    close = body.index("]")
    inside, tail = body[1:close], body[close + 1 :]
    if not tail or not set(tail) <= digits or "[" in inside or not inside:
        return "malformed"
    if set(inside) == {"."}:
        return "filler"
    parts = inside.split(",")
    if len(parts) != n_digits:
        return "malformed"
    for p in parts:
        if not p or not set(p) <= digits:
            return "malformed"
        if len(p) > 1 and p[0] == "0":
            return "malformed"
        if int(p) > 19:
            return "malformed"
    return "scratchpad"


ROWS += [
    _row(
        "completion_style",
        "10",
        w166_completion_style_whole_text,
        (
            "Reads the whole text and requires it to end with '$', instead of reading only up to "
            "the first '$' and ignoring what follows."
        ),
    ),
    _row(
        "completion_style",
        "10",
        w167_completion_style_totals_any_int,
        (
            "Accepts any non-negative integer as a total (20 or more, leading zeros) instead of 0 "
            "to 19 without leading zeros."
        ),
    ),
    _row(
        "completion_style",
        "10",
        w168_completion_style_count_ignored,
        "Does not check that there are exactly n_digits totals.",
    ),
    _row(
        "completion_style",
        "10",
        w169_completion_style_digits_optional,
        (
            'Allows no digits after the closing bracket ("[15,14,10]$" is a scratchpad, '
            '"[...]$" a filler) instead of malformed.'
        ),
    ),
    _row(
        "completion_style",
        "10",
        w170_completion_style_isdigit,
        (
            "Tests the direct style with str.isdigit, which also accepts non-ASCII digits (e.g. "
            "'²' or Arabic-Indic digits)."
        ),
    ),
    _row(
        "completion_style",
        "10",
        w171_completion_style_strips,
        ('Strips whitespace around the body before judging, so " 1045 $" is direct instead of malformed.'),
    ),
    _row("completion_style", "10", r47_completion_style_parser),
]


# ---------------------------------------------------------------- style_share (10)


def w172_style_share_nested_only(labels, style: str) -> float:
    # the docstring's [B][G] example: a list of rows of labels
    total = sum(len(row) for row in labels)
    count = sum(list(row).count(style) for row in labels)
    return count / total


def w173_style_share_excludes_malformed(labels, style: str) -> float:
    flat = np.asarray(labels).reshape(-1)
    counted = flat[flat != "malformed"]
    if counted.size == 0:
        return 0.0
    return float((counted == style).mean())


def w174_style_share_list_count(labels, style: str) -> float:
    # only a flat list: a nested list's rows are never equal to the style
    return labels.count(style) / len(labels)


def w175_style_share_numpy_float(labels, style: str) -> float:
    flat = np.asarray(labels).reshape(-1)
    return (flat == style).mean()


def w176_style_share_empty_zero(labels, style: str) -> float:
    flat = np.asarray(labels).reshape(-1)
    if flat.size == 0:
        return 0.0
    return float((flat == style).mean())


def r48_style_share_recursive(labels, style: str) -> float:
    def walk(x):
        if isinstance(x, str):
            yield x
        else:
            for item in x:
                yield from walk(item)

    if isinstance(labels, np.ndarray):
        labels = labels.tolist()
    total = 0
    hits = 0
    for label in walk(labels):
        total += 1
        hits += label == style
    if total == 0:
        raise ValueError("labels: empty, no share to compute")
    return hits / total


def r49_style_share_ravel_count(labels, style: str) -> float:
    everything = np.ravel(np.array(labels, dtype=object))
    if len(everything) == 0:
        raise ValueError("labels: expected at least one label")
    return sum(1 for label in everything if label == style) / len(everything)


ROWS += [
    _row(
        "style_share",
        "10",
        w172_style_share_nested_only,
        (
            "Handles only the nested [B][G] list of the docstring's example: a flat list's labels "
            "are taken as rows (their characters are counted), and deeper arrays count nothing."
        ),
    ),
    _row(
        "style_share",
        "10",
        w173_style_share_excludes_malformed,
        ("Leaves malformed completions out of the denominator, although every completion counts."),
    ),
    _row(
        "style_share",
        "10",
        w174_style_share_list_count,
        ("Uses list.count on the top level, so nested lists (rows) and numpy arrays give a wrong share or crash."),
    ),
    _row(
        "style_share",
        "10",
        w175_style_share_numpy_float,
        "Returns a numpy float64 (np.mean's scalar) instead of a Python float.",
    ),
    _row(
        "style_share",
        "10",
        w176_style_share_empty_zero,
        "Returns 0.0 for no completions instead of raising ValueError.",
    ),
    _row("style_share", "10", r48_style_share_recursive),
    _row("style_share", "10", r49_style_share_ravel_count),
]


# ---------------------------------------------------------------- rloo_advantages (11)


def w177_rloo_advantages_verl_group_of_one(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return rewards.clone()  # verl keeps the raw reward
    others_mean = (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1)
    return rewards - others_mean


def w178_rloo_advantages_divides_by_g(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    others_mean = (rewards.sum(dim=-1, keepdim=True) - rewards) / G
    return rewards - others_mean


def w179_rloo_advantages_scaled_wrong_way(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return (G - 1) / G * (rewards - rewards.mean(dim=-1, keepdim=True))


def w180_rloo_advantages_std_normalised(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    others_mean = (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1)
    adv = rewards - others_mean
    return adv / (rewards.std(dim=-1, keepdim=True) + 1e-6)


def w181_rloo_advantages_int_division(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    others_mean = torch.div(rewards.sum(dim=-1, keepdim=True) - rewards, G - 1, rounding_mode="floor")
    return rewards - others_mean


def w182_rloo_advantages_flat_batch(rewards):
    # leave-one-out over the whole batch, not per prompt
    flat = rewards.reshape(-1)
    N = flat.numel()
    if N == 1:
        return torch.zeros_like(rewards)
    return (flat - (flat.sum() - flat) / (N - 1)).reshape(rewards.shape)


def r50_rloo_advantages_scaled(rewards):
    G = rewards.shape[-1]
    if G < 2:
        return rewards.new_zeros(rewards.shape)
    return G / (G - 1) * (rewards - rewards.mean(dim=-1, keepdim=True))


def r51_rloo_advantages_matrix(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    leave_out = (torch.ones(G, G, dtype=rewards.dtype) - torch.eye(G, dtype=rewards.dtype)) / (G - 1)
    return rewards - rewards @ leave_out


ROWS += [
    _row(
        "rloo_advantages",
        "11",
        w177_rloo_advantages_verl_group_of_one,
        "For a group of one keeps the raw reward (verl's behaviour) instead of returning 0.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w178_rloo_advantages_divides_by_g,
        "Divides the sum of the other rewards by G instead of G - 1.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w179_rloo_advantages_scaled_wrong_way,
        "Misreads the identity: scales the centred rewards by (G - 1)/G instead of G/(G - 1).",
    ),
    _row(
        "rloo_advantages",
        "11",
        w180_rloo_advantages_std_normalised,
        ("Divides the leave-one-out advantages by the group std (carried over from GRPO), which RLOO does not do."),
    ),
    _row(
        "rloo_advantages",
        "11",
        w181_rloo_advantages_int_division,
        ("Computes the others' mean with floor division (rounding_mode='floor'), so the baseline is floored."),
    ),
    _row(
        "rloo_advantages",
        "11",
        w182_rloo_advantages_flat_batch,
        "Leaves one out of the whole batch instead of the response's own group.",
    ),
    _row("rloo_advantages", "11", r50_rloo_advantages_scaled),
    _row("rloo_advantages", "11", r51_rloo_advantages_matrix),
]


# ---------------------------------------------------------------- gspo_sequence_log_ratio (11)


def w183_gspo_sequence_log_ratio_sum(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    return log_ratio.sum(dim=-1)


def w184_gspo_sequence_log_ratio_times_mask(logp, logp_old, mask):
    m = mask.to(logp.dtype)
    return ((logp - logp_old.detach()) * m).sum(dim=-1) / m.sum(dim=-1).clamp(min=1)


def w185_gspo_sequence_log_ratio_ratio_not_log(logp, logp_old, mask):
    valid = mask.bool()
    ratio = torch.where(valid, torch.exp(logp - logp_old.detach()), torch.zeros_like(logp))
    return ratio.sum(dim=-1) / valid.sum(dim=-1).clamp(min=1)


def w186_gspo_sequence_log_ratio_padded_length(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    return log_ratio.sum(dim=-1) / logp.shape[-1]


def w187_gspo_sequence_log_ratio_empty_nan(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    return log_ratio.sum(dim=-1) / valid.sum(dim=-1)


def r52_gspo_sequence_log_ratio_masked_fill(logp, logp_old, mask):
    keep = mask != 0
    diff = (logp - logp_old.detach()).masked_fill(~keep, 0.0)
    counts = keep.sum(dim=-1)
    means = diff.sum(dim=-1) / torch.maximum(counts, torch.ones_like(counts))
    return means


ROWS += [
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w183_gspo_sequence_log_ratio_sum,
        (
            "Sums the token log-ratios (the log of the product of ratios) instead of averaging "
            "over the valid tokens: the 1/|y_i| is missing."
        ),
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w184_gspo_sequence_log_ratio_times_mask,
        (
            "Masks by multiplying with the mask, so NaN or infinite log-probs in the padding "
            "poison the response's result."
        ),
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w185_gspo_sequence_log_ratio_ratio_not_log,
        (
            "Averages the token ratios exp(logp - logp_old) instead of the log-ratios (and so "
            "returns a ratio, not a log-ratio)."
        ),
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w186_gspo_sequence_log_ratio_padded_length,
        "Divides by the padded length T instead of each response's number of valid tokens.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w187_gspo_sequence_log_ratio_empty_nan,
        ("Divides by the valid-token count without clamping, so an empty response gives NaN instead of 0."),
    ),
    _row("gspo_sequence_log_ratio", "11", r52_gspo_sequence_log_ratio_masked_fill),
]


# ---------------------------------------------------------------- cispo_loss (11)


def w188_cispo_loss_trl_cap(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    # TRL's convention: the cap is epsilon_high itself
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=clip_eps_high).detach()
    return -weight * adv.detach() * logp


def w189_cispo_loss_weight_not_detached(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high)
    return -weight * adv.detach() * logp


def w190_cispo_loss_default_low(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    # assumes a symmetric clip when no lower range is given
    ratio = torch.exp(logp - logp_old.detach())
    eps_low = clip_eps_high if clip_eps is None else clip_eps
    weight = torch.clamp(ratio, 1.0 - eps_low, 1.0 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def w191_cispo_loss_mean(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high).detach()
    return (-weight * adv.detach() * logp).mean()


def w192_cispo_loss_ppo_form(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    # the clipped ratio itself times the advantage, as in PPO's surrogate
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    return -torch.clamp(ratio, min=low, max=1.0 + clip_eps_high) * adv.detach()


def w193_cispo_loss_ignores_low(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    weight = torch.clamp(ratio, max=1.0 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def r53_cispo_loss_minimum(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    with torch.no_grad():
        w = (logp - logp_old).exp()
        w = torch.minimum(w, torch.full_like(w, 1.0 + clip_eps_high))
        if clip_eps is not None:
            w = torch.maximum(w, torch.full_like(w, 1.0 - clip_eps))
        coef = w * adv
    return -(coef * logp)


def r54_cispo_loss_where(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = (logp.detach() - logp_old.detach()).exp()
    cap = 1.0 + clip_eps_high
    weight = torch.where(ratio > cap, torch.full_like(ratio, cap), ratio)
    if clip_eps is not None:
        floor = 1.0 - clip_eps
        weight = torch.where(weight < floor, torch.full_like(weight, floor), weight)
    return logp * (-(weight * adv.detach()))


ROWS += [
    _row(
        "cispo_loss",
        "11",
        w188_cispo_loss_trl_cap,
        ("Uses TRL's convention, capping the weight at clip_eps_high itself instead of at 1 + clip_eps_high."),
    ),
    _row(
        "cispo_loss",
        "11",
        w189_cispo_loss_weight_not_detached,
        (
            "Does not detach the clipped weight, so the gradient also flows through the ratio (and "
            "is zero where the clip binds), unlike CISPO's stop-gradient."
        ),
    ),
    _row(
        "cispo_loss",
        "11",
        w190_cispo_loss_default_low,
        (
            "When clip_eps is None, floors the weight at 1 - clip_eps_high (a symmetric clip) "
            "instead of applying no lower bound."
        ),
    ),
    _row(
        "cispo_loss",
        "11",
        w191_cispo_loss_mean,
        "Returns the mean over tokens (a scalar) instead of the per-token loss [..., T].",
    ),
    _row(
        "cispo_loss",
        "11",
        w192_cispo_loss_ppo_form,
        (
            "Returns -clip(ratio) * adv (PPO's surrogate form, gradient through the ratio) instead "
            "of -sg(clip(ratio)) * adv * logp."
        ),
    ),
    _row(
        "cispo_loss",
        "11",
        w193_cispo_loss_ignores_low,
        ("Ignores clip_eps: the weight is never floored at 1 - clip_eps, even when a lower range is given."),
    ),
    _row("cispo_loss", "11", r53_cispo_loss_minimum),
    _row("cispo_loss", "11", r54_cispo_loss_where),
]
