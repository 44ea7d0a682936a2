"""A fifth class of students, written blind: plausible answers to every exercise of chapters 00 to 11.

Each student is a function (a class for chapter 05's ``PPOLoss``) with its exercise's signature. ``ROWS`` lists
them with the ground truth: whether the answer is right, and, for a wrong one, one sentence saying exactly what
the student did wrong. The answers were written from the exercise notebooks, the solutions, the lecture notebooks
and the public reference modules only, without reading the checks, their catalogues of mistakes, the mutants or
the earlier classes' answers, and committed before any check ran on them. Each wrong answer was run beside the
course's reference on a small input of its exercise's domain to make sure it really differs somewhere, and each
right variant beside the reference on the edge cases its docstring allows to make sure it really agrees.

This module holds no tests (pytest does not collect it): it is data for the measurement of the checks.
"""

import math
import re

import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import nn

from course_lib import grpo
from course_lib.lm_rl import LMRLConfig
from course_lib.policy_gradient import gather_log_probs
from course_lib.rewards import math_answer_reward

# ---------------------------------------------------------------------------------------------------------------
# Chapter 00: returns
# ---------------------------------------------------------------------------------------------------------------


def w00_discounted_return_len_as_T(rewards, gamma):
    T = len(rewards)  # the number of steps
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)
    return (rewards * discounts).sum(dim=-1)


def r00_discounted_return_einsum(rewards, gamma):
    steps = torch.arange(rewards.shape[-1], dtype=rewards.dtype)  # (T,)
    discounts = torch.pow(torch.tensor(gamma, dtype=rewards.dtype), steps)  # 0^0 = 1
    return torch.einsum("...t,t->...", rewards, discounts)


def w00_reward_to_go_in_place(rewards, gamma):
    # G_t = r_t + gamma * G_{t+1}, accumulated from the end
    for t in reversed(range(rewards.shape[-1] - 1)):
        rewards[..., t] += gamma * rewards[..., t + 1]
    return rewards


# ---------------------------------------------------------------------------------------------------------------
# Chapter 01: rewards
# ---------------------------------------------------------------------------------------------------------------


def w01_sort_reward_counts_response_side(prompt, response):
    # is each response token one of the prompt's?
    found = (response[..., :, None] == prompt[..., None, :]).any(dim=-1)  # (..., T)
    inclusion = found.sum(dim=-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def r01_sort_reward_python_sets(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    leading = prompt.shape[:-1]
    T = prompt.shape[-1]
    scores = []
    for p, r in zip(prompt.reshape(-1, T).tolist(), response.reshape(-1, T).tolist()):
        present = set(r)
        inclusion = sum(1 for token in p if token in present)
        ordering = sum(1 for a, b in zip(r, r[1:]) if a <= b)
        scores.append(float(inclusion + ordering))
    return torch.tensor(scores, dtype=torch.float32).reshape(leading)


def w01_math_answer_first_statement(response_text, ground_truth):
    def normalise(text):
        text = text.replace("\\$", "").replace("$", "").strip()
        while text and text[-1] in ".,;:!?":
            text = text[:-1].rstrip()
        return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)

    answer = None
    start = response_text.rfind("\\boxed{")
    while answer is None and start != -1:
        depth, begin = 1, start + len("\\boxed{")
        for i in range(begin, len(response_text)):
            depth += {"{": 1, "}": -1}.get(response_text[i], 0)
            if depth == 0:
                answer = response_text[begin:i]
                break
        start = response_text.rfind("\\boxed{", 0, start)
    if answer is None:
        statement = re.search(r"\banswer(?:\s+is\b\s*:?|\s*:)", response_text, re.IGNORECASE)
        if statement is not None:
            rest = response_text[statement.end() :].lstrip()
            rest = re.split(r"[\n<]", rest)[0]
            answer = re.split(r"[.!?](?:\s|$)", rest)[0]
    if answer is None:
        return 0.0
    answer, truth = normalise(answer), normalise(ground_truth)
    if not answer:
        return 0.0
    number = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
    if re.fullmatch(number, answer) and re.fullmatch(number, truth):
        return float(float(answer) == float(truth))
    return float(answer == truth)


def w01_math_answer_cut_at_first_dot(response_text, ground_truth):
    def normalise(text):
        text = text.replace("\\$", "").replace("$", "").strip()
        text = text.rstrip(".,;:!? ")
        return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)

    def last_box(text):
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

    answer = last_box(response_text)
    if answer is None:
        statements = list(re.finditer(r"\banswer(?:\s+is\b\s*:?|\s*:)", response_text, re.IGNORECASE))
        if statements:
            rest = response_text[statements[-1].end() :].lstrip()
            rest = re.split(r"[\n<]", rest)[0]
            answer = rest.split(".")[0]  # end of the sentence
    if answer is None:
        return 0.0
    answer, truth = normalise(answer), normalise(ground_truth)
    if not answer:
        return 0.0
    number = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
    if re.fullmatch(number, answer) and re.fullmatch(number, truth):
        return 1.0 if float(answer) == float(truth) else 0.0
    return 1.0 if answer == truth else 0.0


# ---------------------------------------------------------------------------------------------------------------
# Chapter 02: policy gradient
# ---------------------------------------------------------------------------------------------------------------


def w02_gather_log_probs_softmax_dim1(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=1)  # over the vocabulary of (T, V)
    return logp_all.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


def w02_reinforce_loss_divides_by_numel(logp, deltas, mask=None):
    per_token = -(deltas.detach()[..., None] * logp)  # (..., T)
    if mask is None:
        return per_token.mean()
    kept = torch.where(mask.bool(), per_token, torch.zeros_like(per_token))
    return kept.sum() / per_token.numel()


def w02_reinforce_loss_deltas_keep_gradient(logp, deltas, mask=None):
    weights = deltas.unsqueeze(-1).expand_as(logp)  # (..., T)
    if mask is None:
        mask = torch.ones_like(logp, dtype=torch.bool)
    valid = mask.bool()
    terms = torch.where(valid, -weights * logp, torch.zeros_like(logp))
    return terms.sum() / valid.sum().clamp(min=1)


def r02_reinforce_loss_boolean_index(logp, deltas, mask=None):
    weights = deltas.detach()[..., None].expand_as(logp)  # (..., T)
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    chosen = -(weights[valid] * logp[valid])  # (n_valid,)
    return chosen.sum() / max(chosen.numel(), 1)


def w02_mc_policy_gradient_global_rng(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)  # (V,)
    actions = torch.multinomial(pi, n_samples, replacement=True)  # (n,)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi  # (n, V)
    return (reward_per_action[actions, None] * score).mean(dim=0)


def r02_mc_policy_gradient_autograd(logits, reward_per_action, n_samples, generator=None):
    actions = torch.multinomial(torch.softmax(logits, dim=-1), n_samples, replacement=True, generator=generator)
    with torch.enable_grad():
        x = logits.detach().clone().requires_grad_(True)
        objective = (reward_per_action.detach()[actions] * torch.log_softmax(x, dim=-1)[actions]).mean()
        (gradient,) = torch.autograd.grad(objective, x)
    return gradient


# ---------------------------------------------------------------------------------------------------------------
# Chapter 03: baselines and variance
# ---------------------------------------------------------------------------------------------------------------


def w03_compute_deltas_eps_under_root(rewards, mode, eps=1e-6):
    if mode not in ("rewards", "centered_rewards", "normalized_rewards"):
        raise ValueError(f"mode: unknown mode {mode!r}")
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    same = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(same, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / torch.sqrt(rewards.var(dim=-1, keepdim=True) + eps)


def r03_compute_deltas_numpy(rewards, mode, eps=1e-6):
    if mode not in ("rewards", "centered_rewards", "normalized_rewards"):
        raise ValueError(f"mode: expected rewards, centered_rewards or normalized_rewards, got {mode!r}")
    if mode == "rewards":
        return rewards.clone()
    r = rewards.detach().cpu().numpy()  # keeps float32 / float64
    flat = r.max(axis=-1, keepdims=True) == r.min(axis=-1, keepdims=True)  # all equal, or G == 1
    centred = np.where(flat, 0, r - r.mean(axis=-1, keepdims=True)).astype(r.dtype)
    if mode == "normalized_rewards" and r.shape[-1] > 1:
        std = r.std(axis=-1, ddof=1, keepdims=True)  # Bessel, like torch.std
        centred = np.where(flat, 0, centred / (std + eps)).astype(r.dtype)
    return torch.from_numpy(centred).to(rewards.device)


def w03_gradient_variance_returns_tensor(grad_samples):
    return grad_samples.var(dim=0).sum()


def r03_gradient_variance_cov_trace(grad_samples):
    covariance = torch.atleast_2d(torch.cov(grad_samples.T))  # (P, P); 0-dim when P == 1
    return torch.trace(covariance).item()


# ---------------------------------------------------------------------------------------------------------------
# Chapter 04: GAE
# ---------------------------------------------------------------------------------------------------------------


def w04_gae_table_recursion_not_cut():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    # A_4 = 1.4, A_3 = -0.55 + 0.72 * 1.4, A_2 = 1.0 + 0.72 * A_3, ...
    advantages = [0.607, 0.357, 1.330, 0.458, 1.4]
    return deltas, advantages


def r04_gae_table_worked():
    gamma, lam = 0.9, 0.8
    deltas = [
        1 + gamma * 1.5 - 2.0,
        0 + gamma * 1.0 - 1.5,
        2 - 1.0,  # terminal: no bootstrap
        0 + gamma * 0.5 - 1.0,
        1 + gamma * 1.0 - 0.5,
    ]
    a4 = deltas[4]
    a3 = deltas[3] + gamma * lam * a4
    a2 = deltas[2]  # terminal: the recursion stops here
    a1 = deltas[1] + gamma * lam * a2
    a0 = deltas[0] + gamma * lam * a1
    return deltas, [a0, a1, a2, a3, a4]


def w04_compute_gae_cleanrl_next_done(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    T = rewards.shape[-1]
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(T)):
        if t == T - 1:
            nextnonterminal = torch.ones_like(rewards[..., 0])
            nextvalues = last_values
        else:
            nextnonterminal = 1.0 - d[..., t + 1]
            nextvalues = values[..., t + 1]
        delta = rewards[..., t] + gamma * nextvalues * nextnonterminal - values[..., t]
        lastgaelam = delta + gamma * lam * nextnonterminal * lastgaelam
        advantages[..., t] = lastgaelam
    return advantages, advantages + values


def w04_compute_gae_float32_buffer(rewards, values, dones, last_values, gamma, lam):
    not_done = 1.0 - dones.to(rewards.dtype)  # (..., T)
    next_values = torch.cat([values[..., 1:], last_values[..., None]], dim=-1)
    deltas = rewards + gamma * not_done * next_values - values
    advantages = torch.zeros(rewards.shape)
    running = torch.zeros(rewards.shape[:-1])
    for t in range(rewards.shape[-1] - 1, -1, -1):
        running = deltas[..., t] + gamma * lam * not_done[..., t] * running
        advantages[..., t] = running
    return advantages, advantages + values


def r04_compute_gae_unbind(rewards, values, dones, last_values, gamma, lam):
    alive = ~dones.bool()  # (..., T)
    next_value = last_values
    running = torch.zeros_like(rewards[..., 0])
    backwards = []
    steps = zip(rewards.unbind(-1), values.unbind(-1), alive.unbind(-1))
    for r_t, v_t, alive_t in reversed(list(steps)):
        keep = alive_t.to(rewards.dtype)
        delta = r_t + gamma * keep * next_value - v_t
        running = delta + gamma * lam * keep * running
        backwards.append(running)
        next_value = v_t
    advantages = torch.stack(backwards[::-1], dim=-1)
    return advantages, advantages + values


def w04_td_residuals_one_minus_bool(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    return rewards + gamma * (1 - dones) * next_values - values


# ---------------------------------------------------------------------------------------------------------------
# Chapter 05: PPO
# ---------------------------------------------------------------------------------------------------------------


def w05_clipped_surrogate_ignores_clip_eps_high(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    logp = torch.where(valid, logp, zero)
    logp_old = torch.where(valid, logp_old.detach(), zero)
    adv = torch.where(valid, adv.detach(), zero)
    ratio = torch.exp(logp - logp_old)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    per_element = -torch.minimum(ratio * adv, clipped * adv)
    n_valid = valid.sum().clamp(min=1)
    loss = torch.where(valid, per_element, zero).sum() / n_valid
    with torch.no_grad():
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + clip_eps
        binding = (above & (adv > 0)) | (low & (adv < 0))
        n = n_valid.item()
        info = {
            "clip_fraction": ((low | above) & valid).sum().item() / n,
            "clip_active_fraction": (binding & valid).sum().item() / n,
            "approx_kl": torch.where(valid, (ratio - 1.0) - (logp - logp_old), zero).sum().item() / n,
        }
    return loss, info


def w05_clipped_surrogate_old_approx_kl(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    n = max(int(valid.sum()), 1)
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    a = torch.where(valid, adv.detach(), torch.zeros_like(logp))
    ratio = log_ratio.exp()
    objective = torch.min(ratio * a, ratio.clamp(1 - clip_eps, 1 + high) * a)
    loss = -torch.where(valid, objective, torch.zeros_like(objective)).sum() / n
    with torch.no_grad():
        outside = ((ratio < 1 - clip_eps) | (ratio > 1 + high)) & valid
        binds = (((ratio > 1 + high) & (a > 0)) | ((ratio < 1 - clip_eps) & (a < 0))) & valid
        info = {
            "clip_fraction": outside.sum().item() / n,
            "clip_active_fraction": binds.sum().item() / n,
            "approx_kl": (-log_ratio).sum().item() / n,  # KL(old || new) = E_old[log old - log new]
        }
    return loss, info


def r05_clipped_surrogate_selected(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    # keep only the valid entries: the padding never enters any arithmetic
    lp, lp_old, a = logp[valid], logp_old.detach()[valid], adv.detach()[valid]
    ratio = torch.exp(lp - lp_old)  # (n_valid,)
    surrogate = torch.minimum(ratio * a, ratio.clamp(1 - clip_eps, 1 + high) * a)
    n = max(int(valid.sum()), 1)
    loss = -surrogate.sum() / n
    with torch.no_grad():
        above, below = ratio > 1 + high, ratio < 1 - clip_eps
        info = {
            "clip_fraction": float((above | below).sum()) / n,
            "clip_active_fraction": float(((above & (a > 0)) | (below & (a < 0))).sum()) / n,
            "approx_kl": float(((ratio - 1) - (lp - lp_old)).sum()) / n,
        }
    return loss, info


def w05_value_loss_values_old_attached(values, returns, values_old=None, clip_eps=None, mask=None):
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


def w05_value_loss_without_half(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    v = values.masked_fill(~valid, 0.0)
    target = returns.detach().masked_fill(~valid, 0.0)
    error = (v - target).pow(2)
    if clip_eps is not None:
        v_old = values_old.detach().masked_fill(~valid, 0.0)
        v_clipped = v_old + (v - v_old).clamp(-clip_eps, clip_eps)
        error = torch.max(error, (v_clipped - target).pow(2))
    return error.masked_fill(~valid, 0.0).sum() / valid.sum().clamp(min=1)  # the mean squared error


def r05_value_loss_mse_selected(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    v, target = values[valid], returns.detach()[valid]
    error = F.mse_loss(v, target, reduction="none")
    if clip_eps is not None:
        v_old = values_old.detach()[valid]
        v_clipped = v_old + (v - v_old).clamp(-clip_eps, clip_eps)
        error = torch.maximum(error, F.mse_loss(v_clipped, target, reduction="none"))
    return 0.5 * error.sum() / max(error.numel(), 1)


class w05_PPOLoss_entropy_mean_over_padding(nn.Module):
    def __init__(self, clip_epsilon: float = 0.2, value_loss_coef: float = 0.5, entropy_coef: float = 0.01):
        super().__init__()
        self.clip_epsilon = clip_epsilon
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef

    def forward(
        self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None
    ) -> torch.Tensor:
        policy_loss, _ = r05_clipped_surrogate_selected(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = r05_value_loss_mse_selected(values, returns, mask=mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * entropy.mean()


class r05_PPOLoss_selected_entropy(nn.Module):
    def __init__(self, clip_epsilon: float = 0.2, value_loss_coef: float = 0.5, entropy_coef: float = 0.01):
        super().__init__()
        self.clip_epsilon = clip_epsilon
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef

    def forward(
        self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None
    ) -> torch.Tensor:
        valid = torch.ones_like(entropy, dtype=torch.bool) if mask is None else mask.bool()
        policy_loss, _ = r05_clipped_surrogate_selected(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = r05_value_loss_mse_selected(values, returns, mask=mask)
        mean_entropy = entropy[valid].sum() / max(int(valid.sum()), 1)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * mean_entropy


# ---------------------------------------------------------------------------------------------------------------
# Chapter 06: GRPO
# ---------------------------------------------------------------------------------------------------------------


def w06_group_advantages_zero_std_test(rewards, normalize_std=True, eps=1e-6):
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    if not normalize_std:
        return centred
    std = rewards.std(dim=-1, keepdim=True)
    normalised = centred / (std + eps)
    # no spread, no signal
    return torch.where(std == 0, torch.zeros_like(normalised), normalised)


def w06_group_advantages_trl_eps(rewards, normalize_std=True, eps=1e-6):
    G = rewards.shape[-1]
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if not normalize_std or G == 1:
        return adv
    return adv / (rewards.std(dim=-1, keepdim=True) + 1e-4)


def r06_group_advantages_by_hand(rewards, normalize_std=True, eps=1e-6):
    G = rewards.shape[-1]
    centred = rewards - rewards.sum(dim=-1, keepdim=True) / G
    flat = rewards.amax(dim=-1, keepdim=True) == rewards.amin(dim=-1, keepdim=True)  # (B, 1)
    centred = centred.masked_fill(flat, 0.0)
    if not normalize_std or G == 1:
        return centred
    std = (centred.pow(2).sum(dim=-1, keepdim=True) / (G - 1)).sqrt()  # Bessel
    return centred / (std + eps)


def w06_kl_estimate_k2_without_half(logp, logp_ref, kind):
    log_ratio = logp_ref - logp
    if kind == "k1":
        return logp - logp_ref
    if kind == "k2":
        return log_ratio.pow(2)
    if kind == "k3":
        return torch.expm1(log_ratio) - log_ratio
    raise ValueError(f"kind: expected k1, k2 or k3, got {kind!r}")


def w06_kl_estimate_verl_clamp(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    if kind == "k3":
        return torch.clamp(torch.expm1(log_r) - log_r, min=-10, max=10)  # as verl's low_var_kl
    raise ValueError(f"kind: expected k1, k2 or k3, got {kind!r}")


def w06_aggregate_loss_skips_empty_responses(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    lengths = valid.sum(dim=-1)  # (...)
    if mode == "token-mean":
        return per_token.sum() / lengths.sum().clamp(min=1)
    if mode == "seq-mean-token-mean":
        nonempty = lengths > 0
        per_response = per_token.sum(dim=-1)[nonempty] / lengths[nonempty]
        if per_response.numel() == 0:
            return per_token.sum() * 0.0
        return per_response.mean()
    if mode == "seq-mean-token-sum-norm":
        L = per_token.shape[-1] if max_len is None else max_len
        return (per_token.sum(dim=-1) / L).mean()
    raise ValueError(f"mode: unknown {mode!r}")


def w06_aggregate_loss_ignores_max_len(per_token, mask, mode, max_len=None):
    valid = mask.bool() if mask.dtype == torch.bool else mask > 0
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        return (per_response / n_valid.clamp(min=1)).mean()
    if mode == "seq-mean-token-sum-norm":
        return (per_response / per_token.shape[-1]).mean()  # Dr. GRPO: a constant length
    raise ValueError(f"mode: unknown {mode!r}")


def r06_aggregate_loss_token_weights(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    clean = per_token.masked_fill(~valid, 0.0)  # (..., T)
    lengths = valid.sum(dim=-1, keepdim=True).to(per_token.dtype)  # (..., 1)
    n_responses = lengths.numel()
    if mode == "seq-mean-token-mean":
        weight = 1.0 / (n_responses * lengths.clamp(min=1))
    elif mode == "token-mean":
        weight = torch.ones_like(lengths) / lengths.sum().clamp(min=1)
    elif mode == "seq-mean-token-sum-norm":
        L = per_token.shape[-1] if max_len is None else max_len
        weight = torch.full_like(lengths, 1.0 / (n_responses * L))
    else:
        raise ValueError(f"mode: expected one of {grpo.LOSS_AGG_MODES}, got {mode!r}")
    return (clean * weight).sum()


def w06_grpo_loss_always_k3(
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
    ratio = torch.exp(logp - logp_old.detach())
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_token = -torch.minimum(ratio * adv_tokens, clipped * adv_tokens)
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), "k3")  # DeepSeekMath's estimator
        per_token = per_token + kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    with torch.no_grad():
        valid = mask.bool()
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binding = (above & (adv_tokens > 0)) | (low & (adv_tokens < 0))
        info = {
            "clip_fraction": (low | above)[valid].double().mean().item(),
            "clip_active_fraction": binding[valid].double().mean().item(),
            "kl": kl[valid].mean().item() if logp_ref is not None else 0.0,
            "adv_abs_mean": adv.abs().mean().item(),
        }
        if rewards is not None:
            info["reward_mean"] = rewards.mean().item()
    return loss, info


def w06_grpo_loss_kl_info_over_padding(
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
    if adv is None:
        adv = grpo.group_advantages(rewards.detach(), normalize_std=normalize_std)
    a = adv.detach()[..., None]  # (B, G, 1)
    ratio = (logp - logp_old.detach()).exp()
    per_token = -torch.min(ratio * a, ratio.clamp(1 - clip_eps, 1 + high) * a)
    kl = None
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    with torch.no_grad():
        valid = mask.bool()
        outside = (ratio < 1 - clip_eps) | (ratio > 1 + high)
        binds = ((ratio > 1 + high) & (a > 0)) | ((ratio < 1 - clip_eps) & (a < 0))
        info = {
            "clip_fraction": outside[valid].double().mean().item(),
            "clip_active_fraction": binds[valid].double().mean().item(),
            "kl": 0.0 if kl is None else kl.mean().item(),
            "adv_abs_mean": adv.abs().mean().item(),
        }
        if rewards is not None:
            info["reward_mean"] = rewards.mean().item()
    return loss, info


def r06_grpo_loss_one_sided_clip(
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
    if adv is None:
        adv = grpo.group_advantages(rewards.detach(), normalize_std=normalize_std)
    a = adv.detach()[..., None]  # (B, G, 1)
    ratio = torch.exp(logp - logp_old.detach())  # (B, G, T)
    # min(r A, clip(r) A) is min(r, 1 + eps_high) A for A > 0 and max(r, 1 - eps) A for A < 0
    capped = torch.where(a > 0, ratio.clamp(max=1 + high), ratio.clamp(min=1 - clip_eps))
    per_token = -capped * a
    kl = None
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    with torch.no_grad():
        valid = mask.bool()
        r, a_valid = ratio[valid], a.expand_as(ratio)[valid]
        above, below = r > 1 + high, r < 1 - clip_eps
        info = {
            "clip_fraction": float((above | below).double().mean()),
            "clip_active_fraction": float(((above & (a_valid > 0)) | (below & (a_valid < 0))).double().mean()),
            "kl": 0.0 if kl is None else float(kl[valid].mean()),
            "adv_abs_mean": float(adv.abs().mean()),
        }
        if rewards is not None:
            info["reward_mean"] = float(rewards.mean())
    return loss, info


# ---------------------------------------------------------------------------------------------------------------
# Chapter 07: GRPO against PPO
# ---------------------------------------------------------------------------------------------------------------


def w07_memory_accounting_master_always(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    size = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}
    w, o = size[weights_dtype], size[optimizer_dtype]
    trained = n_params_actor + n_params_critic
    account = {
        "actor": 2 * w * n_params_actor,
        "critic": 2 * w * n_params_critic,
        "reference": w * n_params_ref,
        "reward": w * n_params_reward,
        "optimizer": 3 * o * trained,  # exp_avg, exp_avg_sq and the master weights
    }
    account["total"] = sum(account.values())
    return account


def w07_read_sweep_divmod_rows(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, reward.shape[0])
    best_per_group = reward.max(dim=1).values
    k = int((best_per_group >= reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


# ---------------------------------------------------------------------------------------------------------------
# Chapter 08: the capstone
# ---------------------------------------------------------------------------------------------------------------


def w08_addition_exact_reward_strips_spaces(completion, answer):
    if "$" not in completion:
        return 0.0
    return 1.0 if completion.split("$", 1)[0].strip() == answer else 0.0


def w08_completion_mask_bool(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    seen_before = (torch.cumsum(is_eos, dim=-1) - is_eos) > 0
    return ~seen_before


def w08_completion_mask_cumsum_dim1(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    before = torch.cumsum(is_eos, dim=1) - is_eos
    return (before == 0).float()


def r08_completion_mask_cumprod(completion_ids, eos_id):
    before_first_eos = torch.cumprod((completion_ids != eos_id).long(), dim=-1)  # 1 strictly before it
    first = torch.ones_like(before_first_eos[..., :1])
    through_eos = torch.cat([first, before_first_eos[..., :-1]], dim=-1)  # shifted by one: the EOS too
    return through_eos.float()


def w08_grpo_step_logits_from_P(
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
    flat_prompts = repeat(prompts, "B P -> (B G) P", G=G)
    flat = rearrange(completions, "B G L -> (B G) L")
    ids = torch.cat([flat_prompts, flat], dim=1)  # (B*G, P + L)

    def logp_of(model):
        logits = model(ids)[:, P:, :]  # (B*G, L, V): the completion's positions
        return rearrange(gather_log_probs(logits, flat), "(B G) L -> B G L", G=G)

    logp = logp_of(policy)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = logp_of(ref_model)
    mask = r08_completion_mask_cumprod(completions, eos_id)
    loss, _ = grpo.grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


def w08_grpo_step_regroups_G_first(
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
    ids = torch.cat([repeat(prompts, "B P -> (B G) P", G=G), flat[:, :-1]], dim=1)

    def logp_of(model):
        logits = model(ids)[:, P - 1 :, :]
        return rearrange(gather_log_probs(logits, flat), "(G B) L -> B G L", G=G)

    logp = logp_of(policy)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = logp_of(ref_model)
    mask = r08_completion_mask_cumprod(completions, eos_id)
    loss, _ = grpo.grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


def r08_grpo_step_repeat_interleave(
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
    flat_completions = completions.reshape(B * G, L)
    ids = torch.cat([prompts.repeat_interleave(G, dim=0), flat_completions[:, :-1]], dim=1)  # (B*G, P + L - 1)

    def completion_logp(model):
        logits = model(ids)[:, P - 1 :]  # position P - 1 + t scores completion token t
        return gather_log_probs(logits, flat_completions).reshape(B, G, L)

    logp = completion_logp(policy)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = completion_logp(ref_model)
    mask = r08_completion_mask_cumprod(completions, eos_id)
    loss, _ = grpo.grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return float(loss.detach())


# ---------------------------------------------------------------------------------------------------------------
# Chapter 09: TRL
# ---------------------------------------------------------------------------------------------------------------


def w09_answer_reward_first_message(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(None)
            continue
        text = completion[0]["content"] if isinstance(completion, list) else completion
        rewards.append(math_answer_reward(text, str(truth)))
    return rewards


def w09_completion_logps_no_position_ids(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    is_eos = (completion_ids == eos_id).long()
    mask = ((torch.cumsum(is_eos, dim=-1) - is_eos) == 0).float()
    attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    logits = model(input_ids=sequences, attention_mask=attention_mask).logits
    logits = logits[:, P - 1 : -1].float() / temperature
    logp = torch.log_softmax(logits, dim=-1).gather(-1, completion_ids[..., None]).squeeze(-1)
    return logp, mask


def r09_completion_logps_cross_entropy(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion = sequences[:, P:]  # (B, L)
    attention = torch.cat([prompt_mask.to(sequences.dtype), torch.ones_like(completion)], dim=1)
    positions = (attention.cumsum(dim=-1) - 1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=attention, position_ids=positions).logits
    scores = logits[:, P - 1 : -1, :].float() / temperature  # (B, L, V)
    logp = -F.cross_entropy(scores.transpose(1, 2), completion, reduction="none")  # (B, L)
    eos = (completion == eos_id).long()
    mask = ((eos.cumsum(dim=-1) - eos) == 0).to(torch.float32)
    return logp, mask


def w09_grpo_config_kwargs_true_division(cfg, num_processes=1):
    defaults = LMRLConfig()
    for switch in (
        "algo",
        "adv_estimator",
        "policy_loss",
        "dynamic_sampling",
        "overlong_cache",
        "kl_placement",
        "whiten_advantages",
    ):
        if getattr(cfg, switch) != getattr(defaults, switch):
            raise ValueError(f"cfg.{switch}: TRL's GRPOConfig cannot do {getattr(cfg, switch)!r}")
    B, G, K, M = cfg.prompts_per_step, cfg.group_size, cfg.update_epochs, cfg.num_minibatches
    minibatch = B * G / M
    per_process = minibatch / num_processes
    micro = cfg.micro_batch_size or per_process
    if B * G % M or minibatch % num_processes or per_process % micro:
        raise ValueError(f"num_processes: {B * G} completions do not split evenly")
    accumulation = per_process / micro
    schedule = cfg.lr_schedule
    if schedule == "constant" and cfg.warmup_iterations > 0:
        schedule = "constant_with_warmup"
    loss_type = {"seq-mean-token-mean": "grpo", "token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}
    return {
        "num_generations": G,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": M * accumulation,
        "num_iterations": K,
        "max_steps": cfg.iterations * K * M,
        "warmup_steps": cfg.warmup_iterations * K * M,
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
        "loss_type": loss_type[cfg.loss_agg],
        "scale_rewards": "group" if cfg.normalize_std else "none",
        "mask_truncated_completions": cfg.overlong_filter,
        "seed": cfg.seed,
    }


# ---------------------------------------------------------------------------------------------------------------
# Chapter 10: reasoning length
# ---------------------------------------------------------------------------------------------------------------


def w10_pass_at_k_math_comb(n, c, k):
    n_t, c_t, k_t = torch.broadcast_tensors(torch.as_tensor(n), torch.as_tensor(c), torch.as_tensor(k))
    values = []
    for n_i, c_i, k_i in zip(n_t.flatten().tolist(), c_t.flatten().tolist(), k_t.flatten().tolist()):
        # exact integers: no overflow, Python divides big ints correctly
        values.append(1.0 - math.comb(n_i - c_i, k_i) / math.comb(n_i, k_i))
    return torch.tensor(values, dtype=torch.float64).reshape(n_t.shape)


def r10_pass_at_k_log_space(n, c, k):
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x, dtype=torch.float64) for x in (n, c, k)))
    estimate = torch.empty(n.shape, dtype=torch.float64)
    for index in np.ndindex(*n.shape):
        n_i, c_i, k_i = int(n[index]), int(c[index]), int(k[index])
        if n_i - c_i < k_i:  # every draw of k holds a right one (k > n: pass@n)
            estimate[index] = 1.0 if c_i > 0 else 0.0
        else:
            log_all_wrong = math.fsum(math.log1p(-k_i / i) for i in range(n_i - c_i + 1, n_i + 1))
            estimate[index] = 1.0 - math.exp(log_all_wrong)
    return estimate


def w10_token_weight_n_counts_nonempty(length, mode, max_len=None):
    o = length if length.is_floating_point() else length.to(torch.get_default_dtype())
    N = int((o > 0).sum())  # the responses
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


def w10_completion_style_two_digit_totals(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos:
        return "malformed"
    if re.fullmatch(r"[0-9]+", body):
        return "direct"
    m = re.fullmatch(r"\[([^\[\]]+)\]([0-9]+)", body)
    if m is None:
        return "malformed"
    inside = m.group(1)
    if re.fullmatch(r"\.+", inside):
        return "filler"
    if re.fullmatch(r"[0-9]{1,2}(?:,[0-9]{1,2}){%d}" % (n_digits - 1), inside):
        return "scratchpad"
    return "malformed"


def r10_completion_style_string_methods(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos or not body:
        return "malformed"

    def digits(s):
        return s != "" and all(ch in "0123456789" for ch in s)

    if digits(body):
        return "direct"
    if not body.startswith("[") or body.count("[") != 1 or body.count("]") != 1:
        return "malformed"
    inside, _, tail = body[1:].partition("]")
    if not inside or not digits(tail):
        return "malformed"
    if set(inside) == {"."}:
        return "filler"
    totals = inside.split(",")
    if len(totals) != n_digits:
        return "malformed"
    for total in totals:
        # 0 to 19, no leading zero
        if not digits(total) or len(total) > 2 or (len(total) == 2 and total[0] != "1"):
            return "malformed"
    return "scratchpad"


def w10_style_share_outer_list(labels, style):
    if len(labels) == 0:
        raise ValueError("labels: empty, no share")
    return sum(1 for label in labels if label == style) / len(labels)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 11: the GRPO family
# ---------------------------------------------------------------------------------------------------------------


def w11_rloo_advantages_group_of_one_nan(rewards):
    G = rewards.shape[-1]
    others_mean = (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1)
    return rewards - others_mean


def r11_rloo_advantages_rescaled_centre(rewards):
    G = rewards.shape[-1]
    if G < 2:
        return torch.zeros_like(rewards)
    # r_i - mean of the others = G / (G - 1) * (r_i - mean of all)
    return (rewards - rewards.mean(dim=-1, keepdim=True)) * (G / (G - 1))


def w11_gspo_log_ratio_divides_by_T(logp, logp_old, mask):
    valid = mask.bool()
    diff = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    return diff.sum(dim=-1) / logp.shape[-1]


def w11_cispo_loss_trl_cap(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = (logp - logp_old.detach()).exp()
    if clip_eps is None:
        weight = ratio.clamp(max=clip_eps_high)
    else:
        weight = ratio.clamp(min=1 - clip_eps, max=clip_eps_high)
    return -(weight.detach() * adv.detach() * logp)


# ---------------------------------------------------------------------------------------------------------------
# The class list: what each student wrote, and the truth about it
# ---------------------------------------------------------------------------------------------------------------


def _row(exercise, chapter, student, mistake=None):
    return {"exercise": exercise, "chapter": chapter, "student": student, "right": mistake is None, "mistake": mistake}


ROWS = [
    # 00
    _row(
        "discounted_return",
        "00",
        w00_discounted_return_len_as_T,
        "Takes T from len(rewards), the size of the first axis, so a batched input gets discounts of the wrong length.",
    ),
    _row("discounted_return", "00", r00_discounted_return_einsum),
    _row(
        "reward_to_go",
        "00",
        w00_reward_to_go_in_place,
        "Accumulates the returns in place in rewards and returns that same tensor, so the caller's rewards are "
        "overwritten.",
    ),
    # 01
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w01_sort_reward_counts_response_side,
        "Counts the response tokens found in the prompt instead of the prompt tokens found in the response, so "
        "repeated tokens are credited on the wrong side.",
    ),
    _row("sort_inclusion_ordering_reward", "01", r01_sort_reward_python_sets),
    _row(
        "math_answer_reward",
        "01",
        w01_math_answer_first_statement,
        "Reads the answer after the first 'the answer is' / 'Answer:' statement (re.search) instead of the last.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w01_math_answer_cut_at_first_dot,
        "Cuts a stated answer at its first '.', so a decimal answer such as 2.50 is read as 2.",
    ),
    # 02
    _row(
        "gather_log_probs",
        "02",
        w02_gather_log_probs_softmax_dim1,
        "Normalises with log_softmax over dim=1, the vocabulary only for 2-D (T, V) logits; for batched logits "
        "it normalises over the time axis.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w02_reinforce_loss_divides_by_numel,
        "With a mask, divides the masked sum by the number of all tokens, padding included, instead of the "
        "number of valid tokens.",
    ),
    _row(
        "reinforce_loss",
        "02",
        w02_reinforce_loss_deltas_keep_gradient,
        "Does not detach deltas, so gradient flows into the weights.",
    ),
    _row("reinforce_loss", "02", r02_reinforce_loss_boolean_index),
    _row(
        "mc_policy_gradient",
        "02",
        w02_mc_policy_gradient_global_rng,
        "Samples without passing generator, so it draws from the global RNG and ignores the generator it is given.",
    ),
    _row("mc_policy_gradient", "02", r02_mc_policy_gradient_autograd),
    # 03
    _row(
        "compute_deltas",
        "03",
        w03_compute_deltas_eps_under_root,
        "In the normalised mode divides by sqrt(var + eps) instead of std + eps.",
    ),
    _row("compute_deltas", "03", r03_compute_deltas_numpy),
    _row(
        "gradient_variance",
        "03",
        w03_gradient_variance_returns_tensor,
        "Returns a 0-dim tensor instead of a Python float.",
    ),
    _row("gradient_variance", "03", r03_gradient_variance_cov_trace),
    # 04
    _row(
        "gae_table",
        "04",
        w04_gae_table_recursion_not_cut,
        "Cuts the bootstrap in delta_2 but not the recursion at the terminal step, so A_2 still adds "
        "gamma * lam * A_3 (and A_1, A_0 inherit it).",
    ),
    _row("gae_table", "04", r04_gae_table_worked),
    _row(
        "compute_gae",
        "04",
        w04_compute_gae_cleanrl_next_done,
        "Uses CleanRL's convention: cuts step t's bootstrap and recursion with dones[t + 1] (never at the last "
        "step), whereas dones[t] here says that step t itself terminated.",
    ),
    _row(
        "compute_gae",
        "04",
        w04_compute_gae_float32_buffer,
        "Allocates the advantages with torch.zeros(rewards.shape), float32 by default, so float64 inputs get "
        "float32 advantages and returns rounded to float32.",
    ),
    _row("compute_gae", "04", r04_compute_gae_unbind),
    _row(
        "td_residuals",
        "04",
        w04_td_residuals_one_minus_bool,
        "Computes 1 - dones directly, which raises for bool dones (torch cannot subtract a bool tensor).",
    ),
    # 05
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_clipped_surrogate_ignores_clip_eps_high,
        "Ignores clip_eps_high: clips the ratio and counts the clip diagnostics at 1 + clip_eps on the upper side.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_clipped_surrogate_old_approx_kl,
        "Reports approx_kl as the mean of -log r (CleanRL's old_approx_kl) instead of the mean of (r - 1) - log r.",
    ),
    _row("clipped_surrogate_loss", "05", r05_clipped_surrogate_selected),
    _row(
        "value_loss",
        "05",
        w05_value_loss_values_old_attached,
        "Does not detach values_old, so the clipped branch sends gradient into values_old.",
    ),
    _row(
        "value_loss",
        "05",
        w05_value_loss_without_half,
        "Leaves out the factor 1/2 (SB3's mean squared error), so the loss and its gradient are twice the "
        "expected ones.",
    ),
    _row("value_loss", "05", r05_value_loss_mse_selected),
    _row(
        "PPOLoss",
        "05",
        w05_PPOLoss_entropy_mean_over_padding,
        "Averages the entropy over every entry, padding included, instead of over the valid entries.",
    ),
    _row("PPOLoss", "05", r05_PPOLoss_selected_entropy),
    # 06
    _row(
        "group_advantages",
        "06",
        w06_group_advantages_zero_std_test,
        "Zeroes a group only where its std is exactly 0 (and never when normalize_std is False), so a group of "
        "one (std NaN) gets NaN and a float32 group of seven 0.7s (std about 6e-8) gets 0.056 instead of 0.",
    ),
    _row(
        "group_advantages",
        "06",
        w06_group_advantages_trl_eps,
        "Adds a hard-coded 1e-4 (TRL's value) to the std instead of the eps argument.",
    ),
    _row("group_advantages", "06", r06_group_advantages_by_hand),
    _row(
        "kl_estimate",
        "06",
        w06_kl_estimate_k2_without_half,
        "Returns (log r)^2 for k2, without the factor 1/2.",
    ),
    _row(
        "kl_estimate",
        "06",
        w06_kl_estimate_verl_clamp,
        "Clamps k3 to [-10, 10] as verl does, so wherever k3 exceeds 10 (a log-ratio above about 2.6) the "
        "estimate is cut at 10 and its gradient is zero.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w06_aggregate_loss_skips_empty_responses,
        "In 'seq-mean-token-mean' leaves empty responses out of the mean over responses instead of counting each as 0.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w06_aggregate_loss_ignores_max_len,
        "Ignores max_len in 'seq-mean-token-sum-norm' and always divides by the padded length T.",
    ),
    _row("aggregate_loss", "06", r06_aggregate_loss_token_weights),
    _row(
        "grpo_loss",
        "06",
        w06_grpo_loss_always_k3,
        "Always uses the k3 estimator for the KL penalty, ignoring kl_kind.",
    ),
    _row(
        "grpo_loss",
        "06",
        w06_grpo_loss_kl_info_over_padding,
        "Reports info['kl'] as the mean over all tokens, padding included, instead of over the valid tokens.",
    ),
    _row("grpo_loss", "06", r06_grpo_loss_one_sided_clip),
    # 07
    _row(
        "memory_accounting",
        "07",
        w07_memory_accounting_master_always,
        "Always counts a master copy of the weights in optimizer_dtype, even when weights_dtype is not narrower "
        "than optimizer_dtype.",
    ),
    _row(
        "read_sweep",
        "07",
        w07_read_sweep_divmod_rows,
        "Splits the flat argmax with divmod by the number of rows instead of the number of columns, so a "
        "non-square table gives the wrong best cell.",
    ),
    # 08
    _row(
        "addition_exact_reward",
        "08",
        w08_addition_exact_reward_strips_spaces,
        "Strips whitespace before comparing, so a completion with spaces around the digits before EOS "
        "(' 132$', '132 $') is paid.",
    ),
    _row(
        "completion_mask",
        "08",
        w08_completion_mask_bool,
        "Returns a bool mask instead of the documented float32 one.",
    ),
    _row(
        "completion_mask",
        "08",
        w08_completion_mask_cumsum_dim1,
        "Takes the cumulative sum over dim=1, the token axis only for 2-D ids; for (B, G, L) ids it runs over "
        "the group (and 1-D ids raise).",
    ),
    _row("completion_mask", "08", r08_completion_mask_cumprod),
    _row(
        "grpo_step",
        "08",
        w08_grpo_step_logits_from_P,
        "Feeds the whole completion and takes the logits from position P, so each completion token is scored "
        "by the logits that predict the token after it.",
    ),
    _row(
        "grpo_step",
        "08",
        w08_grpo_step_regroups_G_first,
        "Reshapes the flat log-probs back with '(G B) L -> B G L' although the batch was flattened as "
        "'(B G)', so log-probs land on other prompts' completions.",
    ),
    _row("grpo_step", "08", r08_grpo_step_repeat_interleave),
    # 09
    _row(
        "answer_reward",
        "09",
        w09_answer_reward_first_message,
        "Reads the first message of a conversational completion instead of the last one.",
    ),
    _row(
        "completion_logps",
        "09",
        w09_completion_logps_no_position_ids,
        "Passes no position_ids, so a model that does not derive positions from the attention mask (GPT-2) "
        "reads a left-padded prompt at shifted positions.",
    ),
    _row("completion_logps", "09", r09_completion_logps_cross_entropy),
    _row(
        "grpo_config_kwargs",
        "09",
        w09_grpo_config_kwargs_true_division,
        "Divides with / instead of //, so per_device_train_batch_size, gradient_accumulation_steps and "
        "steps_per_generation are floats, not ints.",
    ),
    # 10
    _row(
        "pass_at_k",
        "10",
        w10_pass_at_k_math_comb,
        "Divides math.comb(n - c, k) by math.comb(n, k), which is 0 when k > n, so that case raises "
        "ZeroDivisionError instead of giving pass@n.",
    ),
    _row("pass_at_k", "10", r10_pass_at_k_log_space),
    _row(
        "aggregation_token_weight",
        "10",
        w10_token_weight_n_counts_nonempty,
        "Counts only the non-empty responses in N, though a response of length 0 still counts.",
    ),
    _row(
        "completion_style",
        "10",
        w10_completion_style_two_digit_totals,
        "Accepts any one- or two-digit total ([0-9]{1,2}), so totals of 20 or more and totals with a leading "
        "zero count as a scratchpad.",
    ),
    _row("completion_style", "10", r10_completion_style_string_methods),
    _row(
        "style_share",
        "10",
        w10_style_share_outer_list,
        "Counts over the outer list only, so for a nested [B][G] list or a 2-D array it compares whole rows "
        "with the style instead of counting every completion.",
    ),
    # 11
    _row(
        "rloo_advantages",
        "11",
        w11_rloo_advantages_group_of_one_nan,
        "Does not special-case G == 1, so a group of one divides 0 by 0 and gets NaN.",
    ),
    _row("rloo_advantages", "11", r11_rloo_advantages_rescaled_centre),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w11_gspo_log_ratio_divides_by_T,
        "Divides the masked sum by the padded length T instead of the number of valid tokens of each response.",
    ),
    _row(
        "cispo_loss",
        "11",
        w11_cispo_loss_trl_cap,
        "Caps the weight at clip_eps_high itself (TRL's convention) instead of 1 + clip_eps_high.",
    ),
]
