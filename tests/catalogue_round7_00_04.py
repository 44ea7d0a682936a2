"""Round seven of the catalogue (issue 44, item 3), chapters 00 to 04: wrong answers nobody had catalogued yet.

Each student is a function with its exercise's signature (``gae_table`` takes none), written as one of the course's
students would: a port of Spinning Up, CleanRL, TRL or verl conventions; an off-by-one slice; a numpy habit; a
broadcast along the wrong axis; a paper's formula misread; a careless edge case (an empty mask, gamma at 0 or 1,
G = 1); a dtype, in-place or detach slip. None repeats a mistake of the catalogue (``tests/mutants``) or of the
blind classes (``tests/class_*_students.py``) as it stood when this round began. ``ROWS`` lists them with the
truth: for a wrong answer, one sentence saying what the student did; a right variant has none.

Wave one (``wave=1``, the rows first listed) was written and run before any check changed; wave two (``wave=2``), after
the fixes for wave one, to measure how far the new names reach beyond the answers they were made for; wave three
(``wave=3``) after the fixes for wave two, and wave four (``wave=4``) after wave three's, the same way.

``tests/run_class_four.py --students catalogue_round7_00_04`` runs each exercise's check on each student once, as
its check cell does; ``tests/test_catalogue_round7_00_04.py`` asserts that each wrong answer is rejected and named.
This module holds no tests (pytest does not collect it): it is data.
"""

import math
import re

import numpy as np
import torch
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------------------------
# Chapter 00: discounted_return(rewards[..., T], gamma) -> [...]
# ---------------------------------------------------------------------------------------------------------------


def w00_return_exp_log_gamma(rewards, gamma):
    t = torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    weights = torch.exp(t * math.log(gamma)) if gamma > 0 else torch.exp(t * -math.inf)  # (T,)
    return (rewards * weights).sum(-1)


def w00_return_skips_first_reward(rewards, gamma):
    total = torch.zeros_like(rewards[..., 0])
    for t in range(1, rewards.shape[-1]):
        total = total + gamma**t * rewards[..., t]
    return total


def w00_return_skips_last_reward(rewards, gamma):
    total = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1] - 1):
        total = total + gamma**t * rewards[..., t]
    return total


def w00_return_gamma_times_t(rewards, gamma):
    t = torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return (rewards * (gamma * t)).sum(-1)


def w00_return_one_minus_gamma(rewards, gamma):
    # the "normalised" discounted return of some texts, (1 - gamma) * sum_t gamma^t r_t
    t = torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return (1 - gamma) * (rewards * gamma**t).sum(-1)


def w00_return_keepdim(rewards, gamma):
    t = torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return (rewards * gamma**t).sum(-1, keepdim=True)


def w00_return_sum_everything(rewards, gamma):
    t = torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return (rewards * gamma**t).sum()


def w00_return_last_step_value(rewards, gamma):
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out[..., -1]  # G_{T-1}, not G_0


def w00_return_numpy(rewards, gamma):
    r = rewards.numpy()
    weights = gamma ** np.arange(r.shape[-1])  # float64 whatever the rewards are
    return torch.from_numpy((r * weights).sum(-1))


def r00_return_horner_backwards(rewards, gamma):
    total = torch.zeros_like(rewards[..., 0])
    for r_t in rewards.unbind(-1)[::-1]:
        total = r_t + gamma * total
    return total


# ---------------------------------------------------------------------------------------------------------------
# Chapter 00: reward_to_go(rewards[..., T], gamma) -> [..., T]
# ---------------------------------------------------------------------------------------------------------------


def _gaps(rewards):
    t = torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return t[None, :] - t[:, None]  # (T, T): k - t


def w00_rtg_flip_cumsum_not_flipped_back(rewards, gamma):
    weights = gamma ** torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return (rewards.flip(-1) * weights).cumsum(-1)


def w00_rtg_abs_gap(rewards, gamma):
    W = gamma ** _gaps(rewards).abs()  # no triangle: the past counts too
    return rewards @ W.T


def w00_rtg_strict_triangle(rewards, gamma):
    gap = _gaps(rewards)
    W = torch.where(gap > 0, gamma ** gap.clamp(min=0), torch.zeros((), dtype=rewards.dtype))
    return rewards @ W.T


def w00_rtg_last_never_written(rewards, gamma):
    out = torch.zeros_like(rewards)
    running = rewards[..., -1].clone()
    for t in range(rewards.shape[-1] - 2, -1, -1):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out  # out[..., -1] stays 0


def w00_rtg_loop_starts_one_early(rewards, gamma):
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1] - 2, -1, -1):  # the last reward never enters
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out


def w00_rtg_stack_time_first(rewards, gamma):
    running = torch.zeros_like(rewards[..., 0])
    steps = []
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        steps.insert(0, running)
    return torch.stack(steps)  # time on axis 0


def w00_rtg_normalised(rewards, gamma):
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return (out - out.mean()) / (out.std() + 1e-8)  # Spinning Up normalises its advantages, not the returns


def w00_rtg_float32_buffer(rewards, gamma):
    out = torch.zeros(rewards.shape)  # float32, whatever the rewards are
    running = 0.0
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out


def w00_rtg_gamma_power_t_only(rewards, gamma):
    # G_t = r_t + gamma^t * G_{t+1}: the exponent of the whole trajectory, not one step's
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma ** (t + 1) * running
        out[..., t] = running
    return out


def r00_rtg_cumsum_scaled(rewards, gamma):
    T = rewards.shape[-1]
    G = torch.zeros_like(rewards)
    for t in range(T):
        G[..., t] = (rewards[..., t:] * gamma ** torch.arange(T - t, dtype=rewards.dtype)).sum(-1)
    return G


# ---------------------------------------------------------------------------------------------------------------
# Chapter 01: sort_inclusion_ordering_reward(prompt[..., T], response[..., T]) -> [...] float
# ---------------------------------------------------------------------------------------------------------------


def _inclusion(prompt, response):
    return (prompt[..., :, None] == response[..., None, :]).any(-1).sum(-1)


def _ordering(response):
    return (response[..., :-1] <= response[..., 1:]).sum(-1)


def w01_sort_ordering_on_prompt(prompt, response):
    return (_inclusion(prompt, response) + _ordering(prompt)).float()


def w01_sort_descending_pairs(prompt, response):
    return (_inclusion(prompt, response) + (response[..., :-1] >= response[..., 1:]).sum(-1)).float()


def w01_sort_inclusion_same_position(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    return ((prompt == response).sum(-1) + _ordering(response)).float()


def w01_sort_inclusion_fraction(prompt, response):
    return (_inclusion(prompt, response) / prompt.shape[-1] + _ordering(response)).float()


def w01_sort_all_ordered_pairs(prompt, response):
    T = response.shape[-1]
    later = torch.ones(T, T, dtype=torch.bool).triu(1)  # every pair i < j, not only neighbours
    pairs = (response[..., :, None] <= response[..., None, :]) & later
    return (_inclusion(prompt, response) + pairs.sum((-2, -1))).float()


def w01_sort_all_or_nothing_ordering(prompt, response):
    T = response.shape[-1]
    sorted_bonus = (_ordering(response) == T - 1) * (T - 1)
    return (_inclusion(prompt, response) + sorted_bonus).float()


def w01_sort_counts_every_match(prompt, response):
    matches = (prompt[..., :, None] == response[..., None, :]).sum(-1)  # how often, not whether
    return (matches.sum(-1) + _ordering(response)).float()


def w01_sort_diff_positive(prompt, response):
    increasing = torch.diff(response, dim=-1) > 0  # strictly: a repeat earns nothing
    steady = torch.diff(response, dim=-1) == 0
    return (_inclusion(prompt, response) + increasing.sum(-1) - steady.sum(-1)).float()


def w01_sort_ordering_halved(prompt, response):
    # "the two parts weigh the same": ordering scaled to T points like inclusion
    T = response.shape[-1]
    return (_inclusion(prompt, response) + _ordering(response) * T / max(T - 1, 1)).float()


def r01_sort_loops(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    T = prompt.shape[-1]
    out = []
    for p, r in zip(prompt.reshape(-1, T).tolist(), response.reshape(-1, T).tolist()):
        out.append(sum(tok in r for tok in p) + sum(a <= b for a, b in zip(r, r[1:])))
    return torch.tensor(out, dtype=torch.float32).reshape(prompt.shape[:-1])


# ---------------------------------------------------------------------------------------------------------------
# Chapter 01: math_answer_reward(response_text, ground_truth) -> float
# ---------------------------------------------------------------------------------------------------------------

_SENTENCE = re.compile(r"[.!?](?:\s|$)")


def _last_boxed(text):
    """The content of the last \\boxed{...} whose braces close (each student wrote this part right)."""
    start = text.rfind("\\boxed{")
    while start != -1:
        depth, begin = 1, start + len("\\boxed{")
        for i in range(begin, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return text[begin:i]
        start = text.rfind("\\boxed{", 0, start)
    return None


def normalize_answer(text):
    """Dollars, surrounding space, trailing punctuation, a ')' that closes nothing, thousands separators, '.0'."""
    answer = text.replace("\\$", "").replace("$", "").strip()
    while answer:
        if answer[-1] in ".,;:!?":
            answer = answer[:-1].rstrip()
        elif answer[-1] == ")" and answer.count(")") > answer.count("("):
            answer = answer[:-1].rstrip()
        else:
            break
    answer = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", answer)
    return re.sub(r"^([+-]?\d+)\.0+$", r"\1", answer)


def _number_or_text(answer, truth):
    try:
        return float(float(answer) == float(truth))
    except ValueError:
        return float(answer == truth)


def _stated(text, statement=r"\banswer(?:\s+is\b\s*:?|\s*:)", flags=re.IGNORECASE, cut=True):
    found = list(re.finditer(statement, text, flags))
    if not found:
        return None
    rest = text[found[-1].end() :].lstrip()
    if cut:
        rest = re.split(r"[\n<]", rest)[0]
        rest = _SENTENCE.split(rest)[0]
    return rest


def w01_math_case_sensitive(response_text, ground_truth):
    answer = _last_boxed(response_text)
    if answer is None:
        answer = _stated(response_text, r"\b(?:answer is|Answer:)", flags=0)
    if answer is None or not normalize_answer(answer):
        return 0.0
    return _number_or_text(normalize_answer(answer), normalize_answer(ground_truth))


def w01_math_keeps_thousands_separator(response_text, ground_truth):
    def normal(text):
        return text.replace("$", "").strip().rstrip(".,;:!?").strip()

    answer = _last_boxed(response_text)
    if answer is None:
        answer = _stated(response_text)
    if answer is None or not normal(answer):
        return 0.0
    return _number_or_text(normal(answer), normal(ground_truth))


def w01_math_keeps_dollars(response_text, ground_truth):
    answer = _last_boxed(response_text)
    if answer is None:
        answer = _stated(response_text)
    if answer is None:
        return 0.0
    answer = normalize_answer(answer.replace("$", "#")).replace("#", "$")
    if not answer:
        return 0.0
    return _number_or_text(answer, normalize_answer(ground_truth))


def w01_math_answer_to_end_of_text(response_text, ground_truth):
    answer = _last_boxed(response_text)
    if answer is None:
        answer = _stated(response_text, cut=False)  # the rest of the text, all of it
    if answer is None or not normalize_answer(answer):
        return 0.0
    return _number_or_text(normalize_answer(answer), normalize_answer(ground_truth))


def w01_math_boxed_only(response_text, ground_truth):
    answer = _last_boxed(response_text)
    if answer is None:
        return 0.0
    return _number_or_text(normalize_answer(answer), normalize_answer(ground_truth))


def w01_math_truth_not_stripped(response_text, ground_truth):
    answer = _last_boxed(response_text)
    if answer is None:
        answer = _stated(response_text)
    if answer is None or not normalize_answer(answer):
        return 0.0
    return float(normalize_answer(answer) == ground_truth or _loose_equal(normalize_answer(answer), ground_truth))


def _loose_equal(a, b):
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def w01_math_greedy_boxed(response_text, ground_truth):
    boxed = re.findall(r"\\boxed\{(.*)\}", response_text)  # greedy: to the last "}" of the text
    answer = boxed[-1] if boxed else _stated(response_text)
    if answer is None or not normalize_answer(answer):
        return 0.0
    return _number_or_text(normalize_answer(answer), normalize_answer(ground_truth))


def w01_math_no_answer_colon(response_text, ground_truth):
    answer = _last_boxed(response_text)
    if answer is None:
        answer = _stated(response_text, r"\banswer\s+is\b\s*:?")  # "Answer: 14" is not read
    if answer is None or not normalize_answer(answer):
        return 0.0
    return _number_or_text(normalize_answer(answer), normalize_answer(ground_truth))


def w01_math_int_compare(response_text, ground_truth):
    answer = _last_boxed(response_text)
    if answer is None:
        answer = _stated(response_text)
    if answer is None or not normalize_answer(answer):
        return 0.0
    answer, truth = normalize_answer(answer), normalize_answer(ground_truth)
    try:
        return float(int(float(answer)) == int(float(truth)))  # decimals truncated
    except ValueError:
        return float(answer == truth)


def r01_math_helpers(response_text, ground_truth):
    answer = _last_boxed(response_text)
    if answer is None:
        answer = _stated(response_text)
    if answer is None or not normalize_answer(answer):
        return 0.0
    return _number_or_text(normalize_answer(answer), normalize_answer(ground_truth))


# ---------------------------------------------------------------------------------------------------------------
# Chapter 02: gather_log_probs(logits[..., T, V], tokens[..., T]) -> [..., T]
# ---------------------------------------------------------------------------------------------------------------


def w02_gather_keeps_last_axis(logits, tokens):
    return torch.log_softmax(logits, -1).gather(-1, tokens.long()[..., None])  # (..., T, 1)


def w02_gather_greedy_max(logits, tokens):
    return torch.log_softmax(logits, -1).max(-1).values  # the best token's, whatever was taken


def w02_gather_minus_max_only(logits, tokens):
    shifted = logits - logits.max(-1, keepdim=True).values  # the max-shift, without the log-sum-exp
    return shifted.gather(-1, tokens.long()[..., None]).squeeze(-1)


def w02_gather_cross_entropy_mean(logits, tokens):
    V = logits.shape[-1]
    return -F.cross_entropy(logits.reshape(-1, V), tokens.reshape(-1).long())  # reduction='mean' by default


def w02_gather_onehot_mean(logits, tokens):
    onehot = F.one_hot(tokens.long(), logits.shape[-1]).to(logits.dtype)
    return (onehot * torch.log_softmax(logits, -1)).mean(-1)  # mean over V, not sum


def w02_gather_detached(logits, tokens):
    return torch.log_softmax(logits.detach(), -1).gather(-1, tokens.long()[..., None]).squeeze(-1)


def w02_gather_float32(logits, tokens):
    logp = torch.log_softmax(logits.float(), -1)  # "log-probs in float32, like the trainers"
    return logp.gather(-1, tokens.long()[..., None]).squeeze(-1)


def w02_gather_log_softmax_eps(logits, tokens):
    probs = torch.softmax(logits, -1).gather(-1, tokens.long()[..., None]).squeeze(-1)
    return torch.log(probs.clamp(min=1e-12))


def w02_gather_temperature(logits, tokens):
    # a sampling temperature of 0.7 carried over from generation
    return torch.log_softmax(logits / 0.7, -1).gather(-1, tokens.long()[..., None]).squeeze(-1)


def w02_gather_logsumexp_wrong_axis(logits, tokens):
    picked = logits.gather(-1, tokens.long()[..., None]).squeeze(-1)  # (..., T)
    return picked - torch.logsumexp(picked, -1, keepdim=True)  # over the T picked logits


def r02_gather_take_along_dim(logits, tokens):
    logp = logits - torch.logsumexp(logits, -1, keepdim=True)
    return torch.take_along_dim(logp, tokens.long()[..., None], dim=-1)[..., 0]


# ---------------------------------------------------------------------------------------------------------------
# Chapter 02: reinforce_loss(logp[..., T], deltas[...], mask[..., T] | None) -> scalar
# ---------------------------------------------------------------------------------------------------------------


def _where_valid(logp, mask):
    return logp if mask is None else torch.where(mask.bool(), logp, torch.zeros_like(logp))


def w02_reinforce_normalises_deltas(logp, deltas, mask=None):
    adv = (deltas - deltas.mean()) / (deltas.std() + 1e-8) if deltas.numel() > 1 else deltas
    valid = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    per_token = -(adv.detach()[..., None] * _where_valid(logp, mask))
    return (per_token * valid).sum() / valid.sum().clamp(min=1)


def w02_reinforce_fresh_zero(logp, deltas, mask=None):
    valid = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    if valid.sum() == 0:
        return torch.tensor(0.0)  # a new tensor: no gradient, float32
    per_token = -(deltas.detach()[..., None] * _where_valid(logp, mask))
    return (per_token * valid).sum() / valid.sum()


def r02_reinforce_masked_fill(logp, deltas, mask=None):
    if mask is None:
        mask = torch.ones_like(logp)
    logp = logp.masked_fill(mask == 0, 0.0)
    per_token = -(deltas.detach()[..., None] * logp)
    return per_token.sum() / mask.sum().clamp(min=1)


def w02_reinforce_drgrpo_constant(logp, deltas, mask=None):
    # Dr. GRPO's constant: each response's sum over its tokens, divided by the longest length T
    valid = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    per_token = -(deltas.detach()[..., None] * _where_valid(logp, mask))
    return (per_token * valid).sum(-1).mean() / logp.shape[-1]


def w02_reinforce_mean_of_deltas_times_mean_logp(logp, deltas, mask=None):
    valid = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    mean_logp = (_where_valid(logp, mask) * valid).sum() / valid.sum().clamp(min=1)
    return -(deltas.detach().mean() * mean_logp)


def w02_reinforce_squared_deltas(logp, deltas, mask=None):
    valid = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    per_token = -(deltas.detach().abs()[..., None] * _where_valid(logp, mask))  # |delta|: a reward can't be < 0
    return (per_token * valid).sum() / valid.sum().clamp(min=1)


def w02_reinforce_neg_logp_mean_only(logp, deltas, mask=None):
    # "the loss is the negative log-likelihood": deltas forgotten
    valid = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    return -(_where_valid(logp, mask) * valid).sum() / valid.sum().clamp(min=1)


def w02_reinforce_batch_mean_of_sums(logp, deltas, mask=None):
    # each response's summed loss, then divided by the number of valid tokens of the batch, per row
    valid = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    per_token = -(deltas.detach()[..., None] * _where_valid(logp, mask))
    return ((per_token * valid).sum(-1) / valid.sum().clamp(min=1)).mean()


def r02_reinforce_masked_select(logp, deltas, mask=None):
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    weights = deltas.detach().unsqueeze(-1).expand_as(logp)
    picked = -(weights[valid] * logp[valid])
    return picked.sum() / max(int(valid.sum()), 1)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 02: mc_policy_gradient(logits[V], reward_per_action[V], n_samples, generator) -> [V]
# ---------------------------------------------------------------------------------------------------------------


def _draw(logits, n_samples, generator):
    pi = torch.softmax(logits, dim=-1)
    return pi, torch.multinomial(pi, n_samples, replacement=True, generator=generator)


def w02_mc_score_pi_of_action(logits, reward_per_action, n_samples, generator=None):
    pi, a = _draw(logits, n_samples, generator)
    onehot = F.one_hot(a, logits.shape[0]).to(pi.dtype)
    return (reward_per_action[a, None] * (onehot - pi[a, None])).mean(0)  # pi(a), not the whole pi


def w02_mc_score_log_pi(logits, reward_per_action, n_samples, generator=None):
    pi, a = _draw(logits, n_samples, generator)
    onehot = F.one_hot(a, logits.shape[0]).to(pi.dtype)
    return (reward_per_action[a, None] * (onehot - torch.log_softmax(logits, -1))).mean(0)


def w02_mc_divides_by_n_minus_one(logits, reward_per_action, n_samples, generator=None):
    pi, a = _draw(logits, n_samples, generator)
    onehot = F.one_hot(a, logits.shape[0]).to(pi.dtype)
    return (reward_per_action[a, None] * (onehot - pi)).sum(0) / max(n_samples - 1, 1)


def w02_mc_one_hot_no_classes(logits, reward_per_action, n_samples, generator=None):
    pi, a = _draw(logits, n_samples, generator)
    onehot = F.one_hot(a).to(pi.dtype)  # as wide as the largest action drawn
    return (reward_per_action[a, None] * (onehot - pi[: onehot.shape[-1]])).mean(0)


def w02_mc_float32(logits, reward_per_action, n_samples, generator=None):
    pi, a = _draw(logits, n_samples, generator)
    onehot = F.one_hot(a, logits.shape[0]).float()
    return (reward_per_action[a, None].float() * (onehot - pi.float())).mean(0)


def w02_mc_mean_reward_times_mean_score(logits, reward_per_action, n_samples, generator=None):
    pi, a = _draw(logits, n_samples, generator)
    onehot = F.one_hot(a, logits.shape[0]).to(pi.dtype)
    return reward_per_action[a].mean() * (onehot - pi).mean(0)  # E[r] E[score], not E[r score]


def w02_mc_probs_as_weights(logits, reward_per_action, n_samples, generator=None):
    pi, a = _draw(logits, n_samples, generator)
    onehot = F.one_hot(a, logits.shape[0]).to(pi.dtype)
    return (reward_per_action[a, None] * pi[a, None] * (onehot - pi)).sum(0)  # re-weighted by pi(a) as well


def w02_mc_reward_of_index(logits, reward_per_action, n_samples, generator=None):
    pi, a = _draw(logits, n_samples, generator)
    onehot = F.one_hot(a, logits.shape[0]).to(pi.dtype)
    r = reward_per_action[torch.arange(n_samples) % logits.shape[0]]  # the i-th sample's reward by position
    return (r[:, None] * (onehot - pi)).mean(0)


def r02_mc_autograd(logits, reward_per_action, n_samples, generator=None):
    theta = logits.detach().clone().requires_grad_(True)
    pi = torch.softmax(theta, -1)
    a = torch.multinomial(pi.detach(), n_samples, replacement=True, generator=generator)
    surrogate = (reward_per_action[a] * torch.log_softmax(theta, -1)[a]).mean()
    (grad,) = torch.autograd.grad(surrogate, theta)
    return grad


# ---------------------------------------------------------------------------------------------------------------
# Chapter 03: compute_deltas(rewards[B, G], mode, eps=1e-6) -> [B, G]
# ---------------------------------------------------------------------------------------------------------------


def _zero_flat(rewards, centred):
    flat = (rewards == rewards[..., :1]).all(-1, keepdim=True)
    return torch.where(flat, torch.zeros_like(centred), centred)


def w03_deltas_std_floor(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = _zero_flat(rewards, rewards - rewards.mean(-1, keepdim=True))
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / rewards.std(-1, keepdim=True).clamp(min=eps)


def w03_deltas_leave_one_out(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    others = (rewards.sum(-1, keepdim=True) - rewards) / (G - 1)  # RLOO's baseline
    centred = _zero_flat(rewards, rewards - others)
    if mode == "centered_rewards":
        return centred
    return centred / (rewards.std(-1, keepdim=True) + eps)


def w03_deltas_layer_norm(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = _zero_flat(rewards, rewards - rewards.mean(-1, keepdim=True))
    if mode == "centered_rewards":
        return centred
    return _zero_flat(rewards, F.layer_norm(rewards, rewards.shape[-1:], eps=eps))


def w03_deltas_min_max(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = _zero_flat(rewards, rewards - rewards.mean(-1, keepdim=True))
    if mode == "centered_rewards":
        return centred
    spread = rewards.amax(-1, keepdim=True) - rewards.amin(-1, keepdim=True)
    return centred / (spread + eps)


def w03_deltas_in_place(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards
    rewards -= rewards.mean(-1, keepdim=True)
    centred = _zero_flat(rewards, rewards)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(-1, keepdim=True) + eps)


def w03_deltas_no_keepdim(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    mean = rewards.mean(-1)  # (B,): broadcasts along G, not B
    centred = _zero_flat(rewards, rewards - mean[:, None])
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(-1) + eps)


def w03_deltas_eps_in_numerator(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = _zero_flat(rewards, rewards - rewards.mean(-1, keepdim=True))
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    std = rewards.std(-1, keepdim=True)
    return torch.where(std > 0, centred / std, centred) + 0 * eps  # eps never used


def w03_deltas_mean_abs_deviation(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = _zero_flat(rewards, rewards - rewards.mean(-1, keepdim=True))
    if mode == "centered_rewards":
        return centred
    return centred / (centred.abs().mean(-1, keepdim=True) + eps)


def w03_deltas_g1_nan_to_num(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(-1, keepdim=True)
    if mode == "centered_rewards":
        return torch.nan_to_num(centred)
    return torch.nan_to_num(centred / (rewards.std(-1, keepdim=True) + eps))  # the all-equal group never zeroed


def r03_deltas_std_mean(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards + 0
    std, mean = torch.std_mean(rewards, dim=-1, keepdim=True) if rewards.shape[-1] > 1 else (None, rewards)
    centred = torch.where((rewards == rewards[..., :1]).all(-1, keepdim=True), 0.0, rewards - mean)
    if mode == "centered_rewards" or std is None:
        return centred
    return centred / (std + eps)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 03: gradient_variance(grad_samples[N, P]) -> float
# ---------------------------------------------------------------------------------------------------------------


def w03_variance_std_sum(grad_samples):
    return float(grad_samples.std(0).sum())


def w03_variance_of_norms(grad_samples):
    return float(grad_samples.norm(dim=1).var())


def w03_variance_scalar_mean(grad_samples):
    N = grad_samples.shape[0]
    return float(((grad_samples - grad_samples.mean()) ** 2).sum() / (N - 1))  # one mean for every coordinate


def w03_variance_max_coordinate(grad_samples):
    return float(grad_samples.var(0).max())


def w03_variance_sqrt(grad_samples):
    return float(grad_samples.var(0).sum().sqrt())


def w03_variance_norm_of_mean_subtracted(grad_samples):
    # the squared norm of the mean gradient subtracted from the mean squared norm, without Bessel
    return float((grad_samples**2).sum(1).mean() - (grad_samples.mean(0) ** 2).sum())


def w03_variance_of_the_sum(grad_samples):
    return float(grad_samples.sum(1).var())  # the variance of the coordinates' sum: covariances enter


def w03_variance_cov_diag_mean(grad_samples):
    return float(torch.cov(grad_samples.T).diagonal().mean())


def r03_variance_cov_trace(grad_samples):
    return float(torch.cov(grad_samples.T, correction=1).reshape(grad_samples.shape[1], -1).trace())


# ---------------------------------------------------------------------------------------------------------------
# Chapter 04: gae_table() -> (deltas, advantages), 5 numbers each, for gae_table_episode()
# ---------------------------------------------------------------------------------------------------------------


def _episode():
    """The table's episode, copied from the notebook: rewards, values V(s_0) .. V(s_5), dones, gamma, lam."""
    return [1.0, 0.0, 2.0, 0.0, 1.0], [2.0, 1.5, 1.0, 1.0, 0.5, 1.0], [0.0, 0.0, 1.0, 0.0, 0.0], 0.9, 0.8


def _right_deltas():
    r, v, d, g, _ = _episode()
    return [r[t] + g * (1 - d[t]) * v[t + 1] - v[t] for t in range(5)]


def _advantages_from(deltas, factor_of=None):
    _, _, d, g, lam = _episode()
    adv, running = [0.0] * 5, 0.0
    for t in reversed(range(5)):
        running = deltas[t] + g * lam * (1 - d[t]) * running
        adv[t] = running
    return adv


def w04_table_rounded_one_decimal():
    deltas = _right_deltas()
    adv = _advantages_from(deltas)
    return [round(x, 1) for x in deltas], [round(x, 1) for x in adv]


def w04_table_deltas_reversed():
    deltas = _right_deltas()
    return deltas[::-1], _advantages_from(deltas)[::-1]


def w04_table_done_of_previous_step():
    r, v, d, g, _ = _episode()
    d_prev = [0.0] + d[:-1]
    deltas = [r[t] + g * (1 - d_prev[t]) * v[t + 1] - v[t] for t in range(5)]
    return deltas, _advantages_from(deltas)


def w04_table_monte_carlo_advantages():
    r, v, d, g, _ = _episode()
    adv, running = [0.0] * 5, 0.0
    for t in reversed(range(5)):
        running = r[t] + g * (1 - d[t]) * running  # the discounted return of the rewards alone
        adv[t] = running
    return _right_deltas(), adv


def w04_table_terminal_reward_cut():
    r, v, d, g, _ = _episode()
    deltas = [(1 - d[t]) * (r[t] + g * v[t + 1]) - v[t] for t in range(5)]
    return deltas, _advantages_from(deltas)


def w04_table_terminal_advantage_zero():
    deltas = _right_deltas()
    adv = _advantages_from(deltas)
    _, _, d, _, _ = _episode()
    return deltas, [0.0 if d[t] else adv[t] for t in range(5)]


def w04_table_lambda_returns_as_deltas():
    r, v, d, g, _ = _episode()
    deltas = _right_deltas()
    adv = _advantages_from(deltas)
    return [deltas[t] + v[t] for t in range(5)], adv  # the one-step target r + gamma V', not the residual


def w04_table_gamma_squared_delta():
    r, v, d, g, _ = _episode()
    deltas = [r[t] + g * g * (1 - d[t]) * v[t + 1] - v[t] for t in range(5)]
    return deltas, _advantages_from(deltas)


def w04_table_four_entries():
    deltas = _right_deltas()
    return deltas[:4], _advantages_from(deltas)[:4]


def r04_table_numpy():
    deltas = np.array(_right_deltas())
    return deltas, np.array(_advantages_from(list(deltas)))


# ---------------------------------------------------------------------------------------------------------------
# Chapter 04: compute_gae(rewards, values, dones, last_values, gamma, lam) -> (advantages, returns)
# ---------------------------------------------------------------------------------------------------------------


def _next_values(values, last_values):
    return torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)


def _gae(deltas, dones, gamma, lam):
    adv = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(deltas.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - dones[..., t]) * running
        adv[..., t] = running
    return adv


def _right_td(rewards, values, dones, last_values, gamma):
    d = dones.to(rewards.dtype)
    return rewards + gamma * (1.0 - d) * _next_values(values, last_values) - values


def w04_gae_outputs_swapped(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    adv = _gae(_right_td(rewards, values, dones, last_values, gamma), d, gamma, lam)
    return adv + values, adv


def w04_gae_lam_in_delta(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    deltas = rewards + lam * (1.0 - d) * _next_values(values, last_values) - values  # lam where gamma belongs
    adv = _gae(deltas, d, gamma, lam)
    return adv, adv + values


def w04_gae_normalise_per_row(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    adv = _gae(_right_td(rewards, values, dones, last_values, gamma), d, gamma, lam)
    returns = adv + values
    if adv.shape[-1] > 1:
        adv = (adv - adv.mean(-1, keepdim=True)) / (adv.std(-1, keepdim=True) + 1e-8)
    return adv, returns


def w04_gae_returns_next_values(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    adv = _gae(_right_td(rewards, values, dones, last_values, gamma), d, gamma, lam)
    return adv, adv + _next_values(values, last_values)


def w04_gae_terminal_advantage_zero(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    adv = _gae(_right_td(rewards, values, dones, last_values, gamma), d, gamma, lam)
    adv = adv * (1.0 - d)  # "nothing to gain after the end"
    return adv, adv + values


def w04_gae_dones_as_keep_mask(rewards, values, dones, last_values, gamma, lam):
    keep = dones.to(rewards.dtype)  # read as CleanRL's nextnonterminal: 1 where the episode goes on
    deltas = rewards + gamma * keep * _next_values(values, last_values) - values
    adv = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(deltas.shape[-1])):
        running = deltas[..., t] + gamma * lam * keep[..., t] * running
        adv[..., t] = running
    return adv, adv + values


def w04_gae_next_delta_not_advantage(rewards, values, dones, last_values, gamma, lam):
    # A_t = delta_t + gamma * lam * delta_{t+1}: the next residual where the next advantage belongs
    d = dones.to(rewards.dtype)
    deltas = _right_td(rewards, values, dones, last_values, gamma)
    following = torch.cat([deltas[..., 1:], torch.zeros_like(deltas[..., :1])], dim=-1)
    adv = deltas + gamma * lam * (1.0 - d) * following
    return adv, adv + values


def w04_gae_bootstrap_added_at_end(rewards, values, dones, last_values, gamma, lam):
    # the bootstrap V(s_T) added to the last reward, then the deltas built with a 0 after the last step
    d = dones.to(rewards.dtype)
    r = rewards.clone()
    r[..., -1] = r[..., -1] + gamma * last_values
    deltas = r + gamma * (1.0 - d) * _next_values(values, torch.zeros_like(last_values)) - values
    adv = _gae(deltas, d, gamma, lam)
    return adv, adv + values


def w04_gae_python_scalars(rewards, values, dones, last_values, gamma, lam):
    # a loop over Python numbers, one environment at a time; float() makes every entry a float64 number
    flat_r = rewards.reshape(-1, rewards.shape[-1]).tolist()
    flat_v = values.reshape(-1, values.shape[-1]).tolist()
    flat_d = dones.reshape(-1, dones.shape[-1]).to(torch.float64).tolist()
    flat_last = last_values.reshape(-1).tolist()
    adv_rows = []
    for r, v, d, last in zip(flat_r, flat_v, flat_d, flat_last):
        T, running, row = len(r), 0.0, [0.0] * len(r)
        for t in reversed(range(T)):
            nxt = v[t + 1] if t + 1 < T else last
            running = r[t] + gamma * (1 - d[t]) * nxt - v[t] + gamma * lam * (1 - d[t]) * running
            row[t] = running
        adv_rows.append(row)
    adv = torch.tensor(adv_rows).reshape(rewards.shape)  # float32: torch.tensor's default
    return adv, adv + values


def r04_gae_cleanrl_style(rewards, values, dones, last_values, gamma, lam):
    T = rewards.shape[-1]
    nonterminal = 1.0 - dones.to(rewards.dtype)
    advantages = torch.zeros_like(rewards)
    lastgaelam = 0.0
    for t in reversed(range(T)):
        nextvalues = last_values if t == T - 1 else values[..., t + 1]
        delta = rewards[..., t] + gamma * nextvalues * nonterminal[..., t] - values[..., t]
        lastgaelam = delta + gamma * lam * nonterminal[..., t] * lastgaelam
        advantages[..., t] = lastgaelam
    return advantages, advantages + values


# ---------------------------------------------------------------------------------------------------------------
# Chapter 04: td_residuals(rewards, values, dones, last_values, gamma) -> [..., T]
# ---------------------------------------------------------------------------------------------------------------


def w04_td_values_cut_too(rewards, values, dones, last_values, gamma):
    keep = 1.0 - dones.to(rewards.dtype)
    return rewards + gamma * keep * _next_values(values, last_values) - keep * values


def w04_td_last_values_everywhere(rewards, values, dones, last_values, gamma):
    keep = 1.0 - dones.to(rewards.dtype)
    return rewards + gamma * keep * last_values.unsqueeze(-1) - values


def w04_td_gamma_on_reward(rewards, values, dones, last_values, gamma):
    keep = 1.0 - dones.to(rewards.dtype)
    return gamma * (rewards + keep * _next_values(values, last_values)) - values


def w04_td_dones_as_keep_mask(rewards, values, dones, last_values, gamma):
    keep = dones.to(rewards.dtype)  # read as "not done"
    return rewards + gamma * keep * _next_values(values, last_values) - values


def w04_td_next_minus_current_swapped(rewards, values, dones, last_values, gamma):
    keep = 1.0 - dones.to(rewards.dtype)
    return rewards + gamma * keep * values - _next_values(values, last_values)


def w04_td_float32(rewards, values, dones, last_values, gamma):
    keep = 1.0 - dones.float()
    return rewards.float() + gamma * keep * _next_values(values, last_values).float() - values.float()


def w04_td_terminal_reward_only(rewards, values, dones, last_values, gamma):
    # at a terminal step the residual is r_t alone (V(s_t) dropped with the bootstrap)
    d = dones.to(torch.bool)
    bootstrapped = rewards + gamma * _next_values(values, last_values) - values
    return torch.where(d, rewards, bootstrapped)


def w04_td_bootstrap_cut_by_last_done(rewards, values, dones, last_values, gamma):
    # only the rollout's last step is checked for a terminal; earlier dones are forgotten
    keep = torch.ones_like(rewards)
    keep[..., -1] = 1.0 - dones[..., -1].to(rewards.dtype)
    return rewards + gamma * keep * _next_values(values, last_values) - values


def w04_td_lam_as_gamma(rewards, values, dones, last_values, gamma):
    # gamma squared: the discount applied once in V' and once more "for the next step"
    keep = 1.0 - dones.to(rewards.dtype)
    return rewards + gamma**2 * keep * _next_values(values, last_values) - values


def r04_td_where(rewards, values, dones, last_values, gamma):
    next_values = _next_values(values, last_values)
    return torch.where(dones.bool(), rewards - values, rewards + gamma * next_values - values)


# ---------------------------------------------------------------------------------------------------------------
# Wave two, every chapter: written after the fixes for wave one
# ---------------------------------------------------------------------------------------------------------------


def w00_return_gamma_squared(rewards, gamma):
    t = torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return (rewards * (gamma**2) ** t).sum(-1)


def w00_return_slice_skip(rewards, gamma):
    t = torch.arange(rewards.shape[-1] - 1, dtype=rewards.dtype)
    return (rewards[..., 1:] * gamma**t).sum(-1)  # r_1.. weighted from gamma^0


def w00_rtg_one_minus_gamma(rewards, gamma):
    out = torch.zeros_like(rewards)
    run = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        run = rewards[..., t] + (1 - gamma) * run
        out[..., t] = run
    return out


def w00_rtg_cumsum_discount_trick(rewards, gamma):
    # cumsum of gamma^k r_k from the end, divided by gamma^t: NaN-free for gamma>0 only
    T = rewards.shape[-1]
    p = torch.tensor(gamma, dtype=rewards.dtype) ** torch.arange(T, dtype=rewards.dtype)
    s = (rewards * p).flip(-1).cumsum(-1).flip(-1)
    return torch.where(p > 0, s / p, rewards)


def w00_rtg_in_place_then_clone(rewards, gamma):
    r = rewards
    for t in reversed(range(r.shape[-1] - 1)):
        r[..., t] = r[..., t] + gamma * r[..., t + 1]
    return r.clone()


def w01_sort_inclusion_response_unique(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    T = prompt.shape[-1]
    out = []
    for p, r in zip(prompt.reshape(-1, T).tolist(), response.reshape(-1, T).tolist()):
        inc = sum(1 for tok in set(r) if tok in p)  # distinct response tokens in prompt
        out.append(inc + sum(a <= b for a, b in zip(r, r[1:])))
    return torch.tensor(out, dtype=torch.float32).reshape(prompt.shape[:-1])


def w01_sort_sorted_compare_ordering(prompt, response):
    inc = (prompt[..., :, None] == response[..., None, :]).any(-1).sum(-1)
    ordered = (response == response.sort(-1).values).sum(-1)  # positions already in sorted place
    return (inc + ordered).float()


def w01_sort_int_output(prompt, response):
    inc = (prompt[..., :, None] == response[..., None, :]).any(-1).sum(-1)
    return (inc + (response[..., :-1] <= response[..., 1:]).sum(-1)).double()


def w01_math_strip_only(response_text, ground_truth):
    m = list(re.finditer(r"(?i)\\boxed\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}", response_text))
    if m:
        ans = m[-1].group(1)
    else:
        s = list(re.finditer(r"(?i)\banswer(?:\s+is\b\s*:?|\s*:)", response_text))
        if not s:
            return 0.0
        ans = re.split(r"[.!?](?:\s|$)|[\n<]", response_text[s[-1].end() :].strip())[0]
    a = ans.strip().strip("$").strip().rstrip(".,;:!?").replace(",", "")
    g = ground_truth.strip().strip("$").rstrip(".").replace(",", "")
    try:
        return float(float(a) == float(g))
    except ValueError:
        return float(a == g)


def w01_math_first_box_nested(response_text, ground_truth):
    i = response_text.find("\\boxed{")
    if i < 0:
        s = list(re.finditer(r"(?i)\banswer(?:\s+is\b\s*:?|\s*:)", response_text))
        if not s:
            return 0.0
        ans = re.split(r"[.!?](?:\s|$)|[\n<]", response_text[s[-1].end() :].strip())[0]
    else:
        depth, j = 0, i + 6
        for j in range(i + 6, len(response_text)):
            depth += {"{": 1, "}": -1}.get(response_text[j], 0)
            if depth == 0:
                break
        ans = response_text[i + 7 : j]
    a = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", ans.replace("$", "").strip().rstrip(".,;:!?"))
    g = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", ground_truth.replace("$", "").strip().rstrip(".,;:!?"))
    try:
        return float(float(a) == float(g))
    except ValueError:
        return float(a == g)


def w02_gather_squeeze_everything(logits, tokens):
    return torch.log_softmax(logits, -1).gather(-1, tokens[..., None].long()).squeeze()  # squeeze all


def w02_gather_softmax_dim0(logits, tokens):
    return torch.log_softmax(logits, 0).gather(-1, tokens.long()[..., None]).squeeze(-1)


def w02_reinforce_sum_over_batch_mean_over_T(logp, deltas, mask=None):
    valid = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    lp = torch.where(valid > 0, logp, torch.zeros_like(logp))
    per = -(deltas.detach()[..., None] * lp)
    return (per.sum(-1) / valid.sum(-1).clamp(min=1)).sum()  # sum over responses of their token means


def r02_reinforce_nansum(logp, deltas, mask=None):
    valid = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    per = -(deltas.detach()[..., None] * logp * valid)
    return per.nansum() / valid.sum().clamp(min=1)


def w02_reinforce_centred_deltas(logp, deltas, mask=None):
    valid = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    lp = torch.where(valid > 0, logp, torch.zeros_like(logp))
    adv = deltas.detach() - deltas.detach().mean()
    return -(adv[..., None] * lp).sum() / valid.sum().clamp(min=1)


def w02_mc_baseline(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, -1)
    a = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    score = F.one_hot(a, len(pi)).to(pi.dtype) - pi
    b = reward_per_action[a].mean()
    return ((reward_per_action[a] - b)[:, None] * score).mean(0)


def w03_deltas_unbiased_false(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    c = rewards - rewards.mean(-1, keepdim=True)
    c = torch.where((rewards == rewards[..., :1]).all(-1, keepdim=True), 0.0, c)
    if mode == "centered_rewards":
        return c
    return c / (rewards.std(-1, keepdim=True, unbiased=False) + eps)


def w03_deltas_eps_fixed(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    c = rewards - rewards.mean(-1, keepdim=True)
    c = torch.where((rewards == rewards[..., :1]).all(-1, keepdim=True), 0.0, c)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return c
    return c / (rewards.std(-1, keepdim=True) + 1e-4)


def w03_variance_mean_of_sq_norm(grad_samples):
    c = grad_samples - grad_samples.mean(0)
    return float((c**2).sum(1).mean())


def w03_variance_trace_over_N(grad_samples):
    return float(torch.cov(grad_samples.T).trace() / grad_samples.shape[0])


def w04_td_no_gamma_last(rewards, values, dones, last_values, gamma):
    nxt = torch.cat([values[..., 1:], last_values[..., None]], -1)
    keep = 1 - dones.to(rewards.dtype)
    d = rewards + gamma * keep * nxt - values
    d[..., -1] = rewards[..., -1] + keep[..., -1] * last_values - values[..., -1]
    return d


def r04_td_dones_equal_zero(rewards, values, dones, last_values, gamma):
    nxt = torch.cat([values[..., 1:], last_values[..., None]], -1)
    return rewards + gamma * nxt * (dones == 0) - values


def w04_gae_cut_after_adding(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    nxt = torch.cat([values[..., 1:], last_values[..., None]], -1)
    delta = rewards + gamma * (1 - d) * nxt - values
    adv = torch.zeros_like(delta)
    run = torch.zeros_like(delta[..., 0])
    for t in reversed(range(delta.shape[-1])):
        run = delta[..., t] + gamma * lam * run
        run = run * (1 - d[..., t])  # reset after adding
        adv[..., t] = run
    return adv, adv + values


def w04_gae_lam_squared(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    nxt = torch.cat([values[..., 1:], last_values[..., None]], -1)
    delta = rewards + gamma * (1 - d) * nxt - values
    adv = torch.zeros_like(delta)
    run = torch.zeros_like(delta[..., 0])
    for t in reversed(range(delta.shape[-1])):
        run = delta[..., t] + gamma * lam * lam * (1 - d[..., t]) * run
        adv[..., t] = run
    return adv, adv + values


def w04_gae_normalised_whole_batch(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    nxt = torch.cat([values[..., 1:], last_values[..., None]], -1)
    delta = rewards + gamma * (1 - d) * nxt - values
    adv = torch.zeros_like(delta)
    run = torch.zeros_like(delta[..., 0])
    for t in reversed(range(delta.shape[-1])):
        run = delta[..., t] + gamma * lam * (1 - d[..., t]) * run
        adv[..., t] = run
    ret = adv + values
    return (adv - adv.mean()) / (adv.std() + 1e-8), ret


def w04_table_lam_one():
    r, v, d, g, _ = [1.0, 0.0, 2.0, 0.0, 1.0], [2.0, 1.5, 1.0, 1.0, 0.5, 1.0], [0, 0, 1, 0, 0], 0.9, 0.8
    de = [r[t] + g * (1 - d[t]) * v[t + 1] - v[t] for t in range(5)]
    a, run = [0.0] * 5, 0.0
    for t in reversed(range(5)):
        run = de[t] + g * (1 - d[t]) * run  # lam forgotten
        a[t] = run
    return de, a


def w04_table_delta_no_last_bootstrap():
    r, v, d, g, lam = [1.0, 0.0, 2.0, 0.0, 1.0], [2.0, 1.5, 1.0, 1.0, 0.5, 0.0], [0, 0, 1, 0, 0], 0.9, 0.8
    de = [r[t] + g * (1 - d[t]) * v[t + 1] - v[t] for t in range(5)]
    a, run = [0.0] * 5, 0.0
    for t in reversed(range(5)):
        run = de[t] + g * lam * (1 - d[t]) * run
        a[t] = run
    return de, a


# ---------------------------------------------------------------------------------------------------------------
# Wave three, every chapter: written after the fixes for wave two
# ---------------------------------------------------------------------------------------------------------------


def w00_return_reversed_weights_loop(rewards, gamma):
    T = rewards.shape[-1]
    total = torch.zeros_like(rewards[..., 0])
    for t in range(T):
        total = total + gamma ** (T - t) * rewards[..., t]
    return total


def w00_return_python_loop_list(rewards, gamma):
    rows = rewards.reshape(-1, rewards.shape[-1]).tolist()
    totals = [sum(gamma**t * r for t, r in enumerate(row)) for row in rows]
    return torch.tensor(totals).reshape(rewards.shape[:-1])  # float32: torch.tensor's default


def w00_rtg_discount_cumprod_wrong(rewards, gamma):
    T = rewards.shape[-1]
    out = torch.zeros_like(rewards)
    for t in range(T):
        out[..., t] = (rewards[..., t:] * gamma ** torch.arange(1, T - t + 1, dtype=rewards.dtype)).sum(-1)
    return out


def w00_rtg_mean_not_sum(rewards, gamma):
    T = rewards.shape[-1]
    out = torch.zeros_like(rewards)
    for t in range(T):
        out[..., t] = (rewards[..., t:] * gamma ** torch.arange(T - t, dtype=rewards.dtype)).mean(-1)
    return out


def w01_sort_inclusion_response_positions(prompt, response):
    inc = (response[..., :, None] == prompt[..., None, :]).any(-1).sum(-1)
    return (inc + (response[..., :-1] <= response[..., 1:]).sum(-1)).float()


def w01_sort_only_inclusion_unique_prompt(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    T = prompt.shape[-1]
    out = []
    for p, r in zip(prompt.reshape(-1, T).tolist(), response.reshape(-1, T).tolist()):
        out.append(sum(1 for tok in set(p) if tok in r) + sum(a <= b for a, b in zip(r, r[1:])))
    return torch.tensor(out, dtype=torch.float32).reshape(prompt.shape[:-1])


def w01_math_last_line(response_text, ground_truth):
    def last_box(t):
        s = t.rfind("\\boxed{")
        while s != -1:
            depth, b = 1, s + 7
            for k in range(b, len(t)):
                depth += {"{": 1, "}": -1}.get(t[k], 0)
                if depth == 0:
                    return t[b:k]
            s = t.rfind("\\boxed{", 0, s)
        return None

    ans = last_box(response_text)
    if ans is None:
        m = list(re.finditer(r"(?i)\banswer(?:\s+is\b\s*:?|\s*:)", response_text))
        if not m:
            return 0.0
        ans = response_text[m[-1].end() :].strip().split("\n")[0]  # to the end of the line only
        ans = re.split(r"<", ans)[0]

    def norm(x):
        x = x.replace("$", "").strip()
        x = x.rstrip(".,;:!?").strip()
        x = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", x)
        return re.sub(r"^([+-]?\d+)\.0+$", r"\1", x)

    a, g = norm(ans), norm(ground_truth)
    if not a:
        return 0.0
    try:
        return float(float(a) == float(g))
    except ValueError:
        return float(a == g)


def w02_gather_softmax_then_log_of_gathered_eps(logits, tokens):
    p = F.softmax(logits, dim=-1)
    return torch.log(torch.gather(p, -1, tokens.long().unsqueeze(-1)).squeeze(-1) + 1e-9)


def w02_reinforce_mean_over_T_only(logp, deltas, mask=None):
    valid = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    lp = torch.where(valid > 0, logp, torch.zeros_like(logp))
    return (-(deltas.detach()[..., None] * lp)).sum() / logp.shape[-1]


def w02_reinforce_max_len_per_row(logp, deltas, mask=None):
    valid = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    lp = torch.where(valid > 0, logp, torch.zeros_like(logp))
    per = -(deltas.detach()[..., None] * lp)
    return per.sum() / valid.sum(-1).max().clamp(min=1) / max(valid[..., 0].numel(), 1)


def w02_mc_score_softmax_grad_wrt_a(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, -1)
    a = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
    onehot = F.one_hot(a, len(pi)).to(pi.dtype)
    return (reward_per_action[a, None] * onehot * (1 - pi)).mean(0)


def w03_deltas_center_then_std_of_centred_biased(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    c = rewards - rewards.mean(-1, keepdim=True)
    c = torch.where((rewards == rewards[..., :1]).all(-1, keepdim=True), 0.0, c)
    if mode == "centered_rewards":
        return c
    return c / (c.pow(2).mean(-1, keepdim=True).sqrt() + eps)


def w03_variance_numpy_default(grad_samples):
    return float(np.var(grad_samples.numpy(), axis=0).sum())


def w04_gae_returns_lam1(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    nxt = torch.cat([values[..., 1:], last_values[..., None]], -1)
    delta = rewards + gamma * (1 - d) * nxt - values
    adv = torch.zeros_like(delta)
    run = torch.zeros_like(delta[..., 0])
    ret = torch.zeros_like(delta)
    g = last_values.clone()
    for t in reversed(range(delta.shape[-1])):
        run = delta[..., t] + gamma * lam * (1 - d[..., t]) * run
        adv[..., t] = run
        g = rewards[..., t] + gamma * (1 - d[..., t]) * g
        ret[..., t] = g
    return adv, ret


def w04_gae_delta_minus_next(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    nxt = torch.cat([values[..., 1:], last_values[..., None]], -1)
    delta = rewards + gamma * (1 - d) * nxt - values
    adv = torch.zeros_like(delta)
    run = torch.zeros_like(delta[..., 0])
    for t in reversed(range(delta.shape[-1])):
        run = delta[..., t] - gamma * lam * (1 - d[..., t]) * run
        adv[..., t] = run
    return adv, adv + values


def w04_table_advantages_from_t0():
    r, v, d, g, lam = [1.0, 0.0, 2.0, 0.0, 1.0], [2.0, 1.5, 1.0, 1.0, 0.5, 1.0], [0, 0, 1, 0, 0], 0.9, 0.8
    de = [r[t] + g * (1 - d[t]) * v[t + 1] - v[t] for t in range(5)]
    a = [0.0] * 5
    for t in range(5):
        a[t] = de[t] + (g * lam * (1 - d[t]) * de[t + 1] if t < 4 else 0.0)
    return de, a


# ---------------------------------------------------------------------------------------------------------------
# Wave four, every chapter: written after the fixes for wave three
# ---------------------------------------------------------------------------------------------------------------


def w00_return_einsum_wrong_axis(rewards, gamma):
    T = rewards.shape[-1]
    w = gamma ** torch.arange(T, dtype=rewards.dtype)
    return torch.einsum("t,...t->...", w.flip(0), rewards)


def w00_rtg_cumsum_times_discount(rewards, gamma):
    T = rewards.shape[-1]
    w = gamma ** torch.arange(T, dtype=rewards.dtype)
    return (rewards * w).flip(-1).cumsum(-1).flip(-1) * w  # times instead of divided


def w00_rtg_zero_at_t0(rewards, gamma):
    out = torch.zeros_like(rewards)
    run = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(1, rewards.shape[-1])):
        run = rewards[..., t] + gamma * run
        out[..., t] = run
    out[..., 0] = rewards[..., 0]
    return out


def w01_math_float_tolerance(response_text, ground_truth):
    def last_box(t):
        s = t.rfind("\\boxed{")
        while s != -1:
            depth, b = 1, s + 7
            for k in range(b, len(t)):
                depth += {"{": 1, "}": -1}.get(t[k], 0)
                if depth == 0:
                    return t[b:k]
            s = t.rfind("\\boxed{", 0, s)
        return None

    ans = last_box(response_text)
    if ans is None:
        m = list(re.finditer(r"(?i)\banswer(?:\s+is\b\s*:?|\s*:)", response_text))
        if not m:
            return 0.0
        ans = re.split(r"[.!?](?:\s|$)", re.split(r"[\n<]", response_text[m[-1].end() :].strip())[0])[0]

    def norm(x):
        x = x.replace("$", "").strip().rstrip(".,;:!?").strip()
        return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", x)

    a, g = norm(ans), norm(ground_truth)
    if not a:
        return 0.0
    try:
        return float(abs(float(a) - float(g)) < 0.5)  # "close enough"
    except ValueError:
        return float(a.lower() == g.lower())


def w02_gather_dim_two(logits, tokens):
    dim = -1 if logits.dim() == 2 else 2
    return torch.log_softmax(logits, dim).gather(-1, tokens.long()[..., None]).squeeze(-1)


def w02_reinforce_logp_detached(logp, deltas, mask=None):
    valid = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    lp = torch.where(valid > 0, logp, torch.zeros_like(logp))
    return -(deltas[..., None] * lp.detach()).sum() / valid.sum().clamp(min=1)


def w03_deltas_sqrt_var_plus_eps(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    c = rewards - rewards.mean(-1, keepdim=True)
    c = torch.where((rewards == rewards[..., :1]).all(-1, keepdim=True), 0.0, c)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return c
    return c / (rewards.var(-1, keepdim=True) + eps).sqrt()


def w03_variance_times_n_minus_one_over_n(grad_samples):
    N, P = grad_samples.shape
    return float(((grad_samples - grad_samples.mean(0)) ** 2).sum() / (N - 1) / P * P + 0.0) * (N - 1) / N


def w04_gae_last_bootstrap_zero(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    nxt = torch.cat([values[..., 1:], torch.zeros_like(last_values)[..., None]], -1)
    delta = rewards + gamma * (1 - d) * nxt - values
    adv = torch.zeros_like(delta)
    run = torch.zeros_like(delta[..., 0])
    for t in reversed(range(delta.shape[-1])):
        run = delta[..., t] + gamma * lam * (1 - d[..., t]) * run
        adv[..., t] = run
    return adv, adv + values


def w04_table_lam_in_delta():
    r, v, d, g, lam = [1.0, 0.0, 2.0, 0.0, 1.0], [2.0, 1.5, 1.0, 1.0, 0.5, 1.0], [0, 0, 1, 0, 0], 0.9, 0.8
    de = [r[t] + lam * (1 - d[t]) * v[t + 1] - v[t] for t in range(5)]
    a, run = [0.0] * 5, 0.0
    for t in reversed(range(5)):
        run = de[t] + g * lam * (1 - d[t]) * run
        a[t] = run
    return de, a


# ---------------------------------------------------------------------------------------------------------------
# The list: what each student wrote, and the truth about it
# ---------------------------------------------------------------------------------------------------------------


def _row(exercise, chapter, student, mistake=None, wave=1):
    return {
        "exercise": exercise,
        "chapter": chapter,
        "student": student,
        "right": mistake is None,
        "mistake": mistake,
        "wave": wave,
    }


ROWS = [
    # 00: discounted_return
    _row("discounted_return", "00", w00_return_exp_log_gamma, "gamma ** t as exp(t log gamma): NaN at gamma = 0."),
    _row("discounted_return", "00", w00_return_skips_first_reward, "The loop starts at t = 1: r_0 is left out."),
    _row("discounted_return", "00", w00_return_skips_last_reward, "The loop stops at T - 2: r_{T-1} is left out."),
    _row("discounted_return", "00", w00_return_gamma_times_t, "Weights gamma * t instead of gamma ** t."),
    _row("discounted_return", "00", w00_return_one_minus_gamma, "Multiplies the return by (1 - gamma)."),
    _row("discounted_return", "00", w00_return_keepdim, "Keeps the time axis (keepdim=True): shape [..., 1]."),
    _row("discounted_return", "00", w00_return_sum_everything, "Sums over every axis: one number for the batch."),
    _row("discounted_return", "00", w00_return_last_step_value, "Returns G_{T-1} (the last step's) not G_0."),
    _row("discounted_return", "00", w00_return_numpy, "numpy weights are float64: a float32 input gets float64."),
    _row("discounted_return", "00", r00_return_horner_backwards),
    # 00: reward_to_go
    _row("reward_to_go", "00", w00_rtg_flip_cumsum_not_flipped_back, "Flips and cumsums, never flips back."),
    _row("reward_to_go", "00", w00_rtg_abs_gap, "Weights gamma ** |k - t| over every k: the past counts too."),
    _row("reward_to_go", "00", w00_rtg_strict_triangle, "A strict triangle (k > t): r_t is left out of G_t."),
    _row("reward_to_go", "00", w00_rtg_last_never_written, "Starts from r_{T-1} but never writes G_{T-1}: 0 there."),
    _row("reward_to_go", "00", w00_rtg_loop_starts_one_early, "The loop starts at T - 2: r_{T-1} never enters."),
    _row("reward_to_go", "00", w00_rtg_stack_time_first, "torch.stack on axis 0: time first, shape [T, ...]."),
    _row("reward_to_go", "00", w00_rtg_normalised, "Normalises the returns (minus mean, over std)."),
    _row("reward_to_go", "00", w00_rtg_float32_buffer, "A float32 buffer (torch.zeros(shape)): float64 lost."),
    _row("reward_to_go", "00", w00_rtg_gamma_power_t_only, "G_t = r_t + gamma ** (t + 1) * G_{t+1}."),
    _row("reward_to_go", "00", r00_rtg_cumsum_scaled),
    # 01: sort_inclusion_ordering_reward
    _row("sort_inclusion_ordering_reward", "01", w01_sort_ordering_on_prompt, "Ordering counted on the prompt."),
    _row("sort_inclusion_ordering_reward", "01", w01_sort_descending_pairs, "Ordering counts >= (descending)."),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w01_sort_inclusion_same_position,
        "Inclusion counts positions where prompt == response.",
    ),
    _row("sort_inclusion_ordering_reward", "01", w01_sort_inclusion_fraction, "Inclusion divided by T."),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w01_sort_all_ordered_pairs,
        "Ordering over every pair i < j, not adjacent pairs.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w01_sort_all_or_nothing_ordering,
        "Ordering points only when the whole response is sorted.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w01_sort_counts_every_match,
        "Inclusion counts every matching response token (sum, not any).",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w01_sort_diff_positive,
        "Ordering: +1 per strict rise, -1 per repeat.",
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w01_sort_ordering_halved,
        "Ordering points scaled by T / (T - 1).",
    ),
    _row("sort_inclusion_ordering_reward", "01", r01_sort_loops),
    # 01: math_answer_reward
    _row("math_answer_reward", "01", w01_math_case_sensitive, "The statement is matched case-sensitively."),
    _row("math_answer_reward", "01", w01_math_keeps_thousands_separator, "Thousands separators are kept."),
    _row("math_answer_reward", "01", w01_math_keeps_dollars, "Dollar signs are kept."),
    _row("math_answer_reward", "01", w01_math_answer_to_end_of_text, "The answer runs to the end of the text."),
    _row("math_answer_reward", "01", w01_math_boxed_only, "Only \\boxed{...} is read; statements are ignored."),
    _row("math_answer_reward", "01", w01_math_truth_not_stripped, "The ground truth is not normalised."),
    _row("math_answer_reward", "01", w01_math_greedy_boxed, "A greedy \\boxed{(.*)} runs to the text's last '}'."),
    _row("math_answer_reward", "01", w01_math_no_answer_colon, "'Answer:' is not read, only 'the answer is'."),
    _row("math_answer_reward", "01", w01_math_int_compare, "Numbers compared after int(): decimals truncated."),
    _row("math_answer_reward", "01", r01_math_helpers),
    # 02: gather_log_probs
    _row("gather_log_probs", "02", w02_gather_keeps_last_axis, "No squeeze: shape [..., T, 1]."),
    _row("gather_log_probs", "02", w02_gather_greedy_max, "The max log-prob of each position, tokens ignored."),
    _row("gather_log_probs", "02", w02_gather_minus_max_only, "logits - max gathered: the log-sum-exp is missing."),
    _row("gather_log_probs", "02", w02_gather_cross_entropy_mean, "-cross_entropy with reduction='mean': a scalar."),
    _row("gather_log_probs", "02", w02_gather_onehot_mean, "onehot * logp averaged over V, not summed."),
    _row("gather_log_probs", "02", w02_gather_detached, "logits detached: no gradient."),
    _row("gather_log_probs", "02", w02_gather_float32, "Computed in float32: float64 lost."),
    _row("gather_log_probs", "02", w02_gather_log_softmax_eps, "log(softmax.clamp(min=1e-12)): floored."),
    _row("gather_log_probs", "02", w02_gather_temperature, "Logits divided by a temperature 0.7."),
    _row("gather_log_probs", "02", w02_gather_logsumexp_wrong_axis, "logsumexp over the T picked logits."),
    _row("gather_log_probs", "02", r02_gather_take_along_dim),
    # 02: reinforce_loss
    _row("reinforce_loss", "02", w02_reinforce_normalises_deltas, "Normalises the deltas inside the loss."),
    _row("reinforce_loss", "02", w02_reinforce_fresh_zero, "Returns a fresh torch.tensor(0.0) on an empty batch."),
    _row("reinforce_loss", "02", r02_reinforce_masked_fill),
    _row("reinforce_loss", "02", w02_reinforce_drgrpo_constant, "Dr. GRPO: sums per response, divides by B * T."),
    _row("reinforce_loss", "02", w02_reinforce_mean_of_deltas_times_mean_logp, "mean(deltas) * mean(logp)."),
    _row("reinforce_loss", "02", w02_reinforce_squared_deltas, "Weights by |deltas|."),
    _row("reinforce_loss", "02", w02_reinforce_neg_logp_mean_only, "The deltas are left out: -mean(logp)."),
    _row("reinforce_loss", "02", w02_reinforce_batch_mean_of_sums, "Each row's sum over the batch's count, then mean."),
    _row("reinforce_loss", "02", r02_reinforce_masked_select),
    # 02: mc_policy_gradient
    _row("mc_policy_gradient", "02", w02_mc_score_pi_of_action, "Score onehot(a) - pi(a), not onehot(a) - pi."),
    _row("mc_policy_gradient", "02", w02_mc_score_log_pi, "Score onehot(a) - log pi."),
    _row("mc_policy_gradient", "02", w02_mc_divides_by_n_minus_one, "Sum over samples divided by n - 1."),
    _row("mc_policy_gradient", "02", w02_mc_one_hot_no_classes, "one_hot without num_classes: too narrow."),
    _row("mc_policy_gradient", "02", w02_mc_float32, "Computed in float32."),
    _row("mc_policy_gradient", "02", w02_mc_mean_reward_times_mean_score, "mean(r[a]) * mean(score)."),
    _row("mc_policy_gradient", "02", w02_mc_probs_as_weights, "r[a] * pi(a) * score, summed over samples."),
    _row("mc_policy_gradient", "02", w02_mc_reward_of_index, "Sample i weighted by the reward of action i % V."),
    _row("mc_policy_gradient", "02", r02_mc_autograd),
    # 03: compute_deltas
    _row("compute_deltas", "03", w03_deltas_std_floor, "std.clamp(min=eps), not std + eps."),
    _row("compute_deltas", "03", w03_deltas_leave_one_out, "RLOO's leave-one-out baseline."),
    _row("compute_deltas", "03", w03_deltas_layer_norm, "F.layer_norm: biased variance, eps inside the root."),
    _row("compute_deltas", "03", w03_deltas_min_max, "Divides by max - min + eps."),
    _row("compute_deltas", "03", w03_deltas_in_place, "rewards -= mean: the input changed in place."),
    _row("compute_deltas", "03", w03_deltas_no_keepdim, "std without keepdim: broadcasts along G."),
    _row("compute_deltas", "03", w03_deltas_eps_in_numerator, "Divides by std where it is > 0; eps ignored."),
    _row("compute_deltas", "03", w03_deltas_mean_abs_deviation, "Divides by the mean absolute deviation."),
    _row("compute_deltas", "03", w03_deltas_g1_nan_to_num, "nan_to_num, no exact zero for an all-equal group."),
    _row("compute_deltas", "03", r03_deltas_std_mean),
    # 03: gradient_variance
    _row("gradient_variance", "03", w03_variance_std_sum, "Sums the stds, not the variances."),
    _row("gradient_variance", "03", w03_variance_of_norms, "The variance of the gradients' norms."),
    _row("gradient_variance", "03", w03_variance_scalar_mean, "One mean over every entry subtracted."),
    _row("gradient_variance", "03", w03_variance_max_coordinate, "The largest coordinate's variance."),
    _row("gradient_variance", "03", w03_variance_sqrt, "The square root of the total variance."),
    _row("gradient_variance", "03", w03_variance_norm_of_mean_subtracted, "E|g|^2 - |E g|^2: divides by N."),
    _row("gradient_variance", "03", w03_variance_of_the_sum, "The variance of the sum of the coordinates."),
    _row("gradient_variance", "03", w03_variance_cov_diag_mean, "The mean of the covariance's diagonal."),
    _row("gradient_variance", "03", r03_variance_cov_trace),
    # 04: gae_table
    _row("gae_table", "04", w04_table_rounded_one_decimal, "Every entry rounded to one decimal."),
    _row("gae_table", "04", w04_table_deltas_reversed, "Both columns listed from t = 4 down."),
    _row("gae_table", "04", w04_table_done_of_previous_step, "delta_t cut by done_{t-1}."),
    _row("gae_table", "04", w04_table_monte_carlo_advantages, "Advantages = discounted returns of the rewards."),
    _row("gae_table", "04", w04_table_terminal_reward_cut, "(1 - done) cuts r_t too in the delta."),
    _row("gae_table", "04", w04_table_terminal_advantage_zero, "A terminal step's advantage set to 0."),
    _row("gae_table", "04", w04_table_lambda_returns_as_deltas, "Deltas column holds delta + V, the TD target."),
    _row("gae_table", "04", w04_table_gamma_squared_delta, "gamma ** 2 in the delta."),
    _row("gae_table", "04", w04_table_four_entries, "Four entries each: t = 4 left out."),
    _row("gae_table", "04", r04_table_numpy),
    # 04: compute_gae
    _row("compute_gae", "04", w04_gae_outputs_swapped, "Returns (returns, advantages): swapped."),
    _row("compute_gae", "04", w04_gae_lam_in_delta, "lam in place of gamma in the delta."),
    _row("compute_gae", "04", w04_gae_normalise_per_row, "Advantages normalised within each environment."),
    _row("compute_gae", "04", w04_gae_returns_next_values, "returns = A_t + V(s_{t+1})."),
    _row("compute_gae", "04", w04_gae_terminal_advantage_zero, "Advantages zeroed at terminal steps."),
    _row("compute_gae", "04", w04_gae_dones_as_keep_mask, "dones used as the keep mask (1 = goes on)."),
    _row("compute_gae", "04", w04_gae_next_delta_not_advantage, "A_t = delta_t + gamma lam delta_{t+1}."),
    _row("compute_gae", "04", w04_gae_bootstrap_added_at_end, "gamma V(s_T) added to r_{T-1} even when done."),
    _row("compute_gae", "04", w04_gae_python_scalars, "torch.tensor of Python lists: float32 advantages."),
    _row("compute_gae", "04", r04_gae_cleanrl_style),
    # 04: td_residuals
    _row("td_residuals", "04", w04_td_values_cut_too, "(1 - done) multiplies V(s_t) too."),
    _row("td_residuals", "04", w04_td_last_values_everywhere, "last_values as every step's next value."),
    _row("td_residuals", "04", w04_td_gamma_on_reward, "gamma multiplies r_t too."),
    _row("td_residuals", "04", w04_td_dones_as_keep_mask, "dones used as the keep mask (1 = goes on)."),
    _row("td_residuals", "04", w04_td_next_minus_current_swapped, "V(s_t) and V(s_{t+1}) swapped."),
    _row("td_residuals", "04", w04_td_float32, "Computed in float32."),
    _row("td_residuals", "04", w04_td_terminal_reward_only, "At a terminal step r_t alone (a where)."),
    _row("td_residuals", "04", w04_td_bootstrap_cut_by_last_done, "Only the last step's done is used."),
    _row("td_residuals", "04", w04_td_lam_as_gamma, "gamma ** 2 multiplies V(s_{t+1})."),
    _row("td_residuals", "04", r04_td_where),
]

# Wave two: written after the fixes above, to see how far the new names reach (their first sight is in the report).
ROWS += [
    _row("discounted_return", "00", w00_return_gamma_squared, "gamma ** 2 per step.", wave=2),
    _row("discounted_return", "00", w00_return_slice_skip, "rewards[..., 1:] weighted from gamma ** 0: G_1.", wave=2),
    _row("reward_to_go", "00", w00_rtg_one_minus_gamma, "1 - gamma per step.", wave=2),
    _row("reward_to_go", "00", w00_rtg_in_place_then_clone, "Accumulates in place, returns a clone.", wave=2),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w01_sort_inclusion_response_unique,
        "Inclusion counts the distinct response tokens found in the prompt.",
        wave=2,
    ),
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w01_sort_sorted_compare_ordering,
        "Ordering counts positions holding their sorted value.",
        wave=2,
    ),
    _row("sort_inclusion_ordering_reward", "01", w01_sort_int_output, "Returns float64, not float32.", wave=2),
    _row("math_answer_reward", "01", w01_math_strip_only, "Removes every comma, not only separators.", wave=2),
    _row("math_answer_reward", "01", w01_math_first_box_nested, "Reads the first box.", wave=2),
    _row("gather_log_probs", "02", w02_gather_squeeze_everything, ".squeeze() with no axis.", wave=2),
    _row("gather_log_probs", "02", w02_gather_softmax_dim0, "log_softmax over dim 0.", wave=2),
    _row("reinforce_loss", "02", w02_reinforce_sum_over_batch_mean_over_T, "Sum over rows of row means.", wave=2),
    _row("reinforce_loss", "02", r02_reinforce_nansum, wave=2),
    _row("reinforce_loss", "02", w02_reinforce_centred_deltas, "Deltas centred inside the loss.", wave=2),
    _row("mc_policy_gradient", "02", w02_mc_baseline, "The samples' mean reward subtracted.", wave=2),
    _row("compute_deltas", "03", w03_deltas_unbiased_false, "unbiased=False: the population std.", wave=2),
    _row("compute_deltas", "03", w03_deltas_eps_fixed, "eps fixed at 1e-4.", wave=2),
    _row("gradient_variance", "03", w03_variance_mean_of_sq_norm, "Mean squared norm: divides by N.", wave=2),
    _row("gradient_variance", "03", w03_variance_trace_over_N, "The covariance's trace over N.", wave=2),
    _row("td_residuals", "04", w04_td_no_gamma_last, "The last bootstrap without gamma.", wave=2),
    _row("td_residuals", "04", r04_td_dones_equal_zero, wave=2),
    _row("compute_gae", "04", w04_gae_cut_after_adding, "(1 - done) multiplies the whole sum.", wave=2),
    _row("compute_gae", "04", w04_gae_lam_squared, "gamma * lam ** 2.", wave=2),
    _row("compute_gae", "04", w04_gae_normalised_whole_batch, "Advantages normalised over the batch.", wave=2),
    _row("gae_table", "04", w04_table_lam_one, "lam left out of the recursion.", wave=2),
    _row("gae_table", "04", w04_table_delta_no_last_bootstrap, "delta_4 without the bootstrap.", wave=2),
]

# Wave three: written after the fixes for wave two, the same way.
ROWS += [
    _row("discounted_return", "00", w00_return_reversed_weights_loop, "Weights gamma ** (T - t).", wave=3),
    _row("discounted_return", "00", w00_return_python_loop_list, "Python floats: a float32 tensor back.", wave=3),
    _row("reward_to_go", "00", w00_rtg_discount_cumprod_wrong, "Weights gamma ** (k - t + 1).", wave=3),
    _row("reward_to_go", "00", w00_rtg_mean_not_sum, "The mean of the discounted rest.", wave=3),
    _row("sort_inclusion_ordering_reward", "01", w01_sort_inclusion_response_positions, "Response side.", wave=3),
    _row("sort_inclusion_ordering_reward", "01", w01_sort_only_inclusion_unique_prompt, "A set.", wave=3),
    _row("math_answer_reward", "01", w01_math_last_line, "The answer runs to the end of its line.", wave=3),
    _row("gather_log_probs", "02", w02_gather_softmax_then_log_of_gathered_eps, "log(p + 1e-9).", wave=3),
    _row("reinforce_loss", "02", w02_reinforce_mean_over_T_only, "The masked sum over T.", wave=3),
    _row("mc_policy_gradient", "02", w02_mc_score_softmax_grad_wrt_a, "Score onehot(a) * (1 - pi).", wave=3),
    _row("compute_deltas", "03", w03_deltas_center_then_std_of_centred_biased, "Population std.", wave=3),
    _row("gradient_variance", "03", w03_variance_numpy_default, "np.var: ddof=0.", wave=3),
    _row("compute_gae", "04", w04_gae_returns_lam1, "Returns: the discounted rewards.", wave=3),
    _row("compute_gae", "04", w04_gae_delta_minus_next, "The recursion subtracts.", wave=3),
    _row("gae_table", "04", w04_table_advantages_from_t0, "A_t = delta_t + gamma lam delta_{t+1}.", wave=3),
]

# Wave four: written after the fixes for wave three, the same way.
ROWS += [
    _row("discounted_return", "00", w00_return_einsum_wrong_axis, "The weights flipped in an einsum.", wave=4),
    _row("reward_to_go", "00", w00_rtg_cumsum_times_discount, "The cumsum multiplied by gamma ** t.", wave=4),
    _row("reward_to_go", "00", w00_rtg_zero_at_t0, "G_0 set to r_0.", wave=4),
    _row("math_answer_reward", "01", w01_math_float_tolerance, "Numbers within 0.5 accepted.", wave=4),
    _row("gather_log_probs", "02", w02_gather_dim_two, "log_softmax over dim 2 for 3-d logits.", wave=4),
    _row("reinforce_loss", "02", w02_reinforce_logp_detached, "logp detached, deltas attached.", wave=4),
    _row("compute_deltas", "03", w03_deltas_sqrt_var_plus_eps, "sqrt(var + eps).", wave=4),
    _row("gradient_variance", "03", w03_variance_times_n_minus_one_over_n, "Divides by N.", wave=4),
    _row("compute_gae", "04", w04_gae_last_bootstrap_zero, "last_values never used.", wave=4),
    _row("gae_table", "04", w04_table_lam_in_delta, "lam in place of gamma in the deltas.", wave=4),
]
