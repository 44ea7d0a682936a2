"""A sixth class of students, written blind: plausible answers to every exercise of chapters 00 to 11.

Each student is a function (a class for chapter 05's ``PPOLoss``) with its exercise's signature. ``ROWS`` lists
them with the ground truth: whether the answer is right, and, for a wrong one, one sentence saying exactly what
the student did wrong. The answers were written from the exercise notebooks, the solutions and the public
docstrings only, without reading the checks, any catalogue of mistakes or the earlier classes' answers, and
committed before any check ran on them. The students are several people: one who ports CleanRL, TRL or verl and
keeps their conventions, one who writes loops, one who vectorises with broadcasting, gather, cumsum and roll, one
careless with masks and empty responses, one who misreads a paper's formula, one careless with dtypes, in-place
operations, detach and Python numbers, and one who parses strings sloppily. Each wrong answer makes one mistake;
each right variant is right on every input its docstring allows, in another style than the solution's.

``tests/run_class_four.py --students class_six_students`` runs each exercise's check on each student once, as
its check cell does. This module holds no tests (pytest does not collect it): it is data for that measurement.
"""

import math
import re

import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange, reduce, repeat
from torch import nn

from course_lib import grpo
from course_lib.grpo import grpo_loss
from course_lib.lm_rl import LMRLConfig
from course_lib.lm_sampling import completion_mask
from course_lib.policy_gradient import gather_log_probs
from course_lib.rewards import math_answer_reward

# ---------------------------------------------------------------------------------------------------------------
# Chapter 00: returns
# ---------------------------------------------------------------------------------------------------------------


def w00_discounted_return_forward_horner(rewards, gamma):
    total = torch.zeros_like(rewards[..., 0])  # (...)
    # Horner's rule, but walking forwards in time
    for t in range(rewards.shape[-1]):
        total = gamma * total + rewards[..., t]
    return total


def r00_discounted_return_einsum(rewards, gamma):
    T = rewards.shape[-1]
    base = torch.full((T,), gamma, dtype=rewards.dtype)
    discounts = base.pow(torch.arange(T, dtype=rewards.dtype))  # (T,): 0^0 = 1
    return torch.einsum("...t,t->...", rewards, discounts)


def w00_reward_to_go_in_place(rewards, gamma):
    # G_t = r_t + gamma * G_{t+1}, accumulated right inside the rewards
    for t in reversed(range(rewards.shape[-1] - 1)):
        rewards[..., t] += gamma * rewards[..., t + 1]
    return rewards


def r00_reward_to_go_stack(rewards, gamma):
    running = torch.zeros_like(rewards[..., 0])  # (...)
    backwards = []
    for t in range(rewards.shape[-1] - 1, -1, -1):
        running = rewards[..., t] + gamma * running
        backwards.append(running)
    return torch.stack(backwards[::-1], dim=-1)  # (..., T)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 01: rewards
# ---------------------------------------------------------------------------------------------------------------


def w01_sort_reward_distinct_prompt_tokens(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    T = prompt.shape[-1]
    scores = []
    for p, r in zip(prompt.reshape(-1, T).tolist(), response.reshape(-1, T).tolist()):
        inclusion = len(set(p) & set(r))
        ordering = sum(a <= b for a, b in zip(r, r[1:]))
        scores.append(float(inclusion + ordering))
    return torch.tensor(scores, dtype=torch.float32).reshape(prompt.shape[:-1])


def w01_math_answer_cut_at_first_dot(response_text, ground_truth):
    def clean(text):
        text = text.replace("\\$", "").replace("$", "").strip()
        text = text.rstrip(".,;:!? \t\n")
        return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)

    answer = None
    start = response_text.rfind("\\boxed{")
    while answer is None and start != -1:
        depth = 0
        for i in range(start + len("\\boxed"), len(response_text)):
            if response_text[i] == "{":
                depth += 1
            elif response_text[i] == "}":
                depth -= 1
                if depth == 0:
                    answer = response_text[start + len("\\boxed{") : i]
                    break
        start = response_text.rfind("\\boxed{", 0, start)
    if answer is None:
        found = list(re.finditer(r"\banswer(?:\s+is\b\s*:?|\s*:)", response_text, flags=re.IGNORECASE))
        if not found:
            return 0.0
        rest = response_text[found[-1].end() :].lstrip()
        rest = re.split(r"[\n<]", rest)[0]
        answer = re.split(r"[.!?]", rest)[0]  # the end of the sentence
    answer, truth = clean(answer), clean(ground_truth)
    if not answer:
        return 0.0
    number = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
    if re.fullmatch(number, answer) and re.fullmatch(number, truth):
        return 1.0 if float(answer) == float(truth) else 0.0
    return 1.0 if answer == truth else 0.0


# ---------------------------------------------------------------------------------------------------------------
# Chapter 02: policy gradient
# ---------------------------------------------------------------------------------------------------------------


def w02_gather_cross_entropy(logits, tokens):
    V = logits.shape[-1]
    per_token = F.cross_entropy(logits.reshape(-1, V), tokens.reshape(-1).long(), reduction="none")
    return per_token.reshape(tokens.shape)


def w02_gather_shifted(logits, tokens):
    # logits at t predict the token at t + 1
    logp_all = torch.log_softmax(logits[..., :-1, :], dim=-1)  # (..., T - 1, V)
    return logp_all.gather(-1, tokens[..., 1:, None].long()).squeeze(-1)


def r02_gather_logsumexp(logits, tokens):
    picked = logits.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)  # (..., T)
    return picked - torch.logsumexp(logits, dim=-1)


def w02_reinforce_index_with_mask(logp, deltas, mask=None):
    per_token = -(deltas.detach()[..., None] * logp)  # (..., T)
    if mask is None:
        mask = torch.ones_like(logp, dtype=torch.bool)
    selected = per_token[mask]
    return selected.sum() / max(selected.numel(), 1)


def w02_reinforce_no_token_axis(logp, deltas, mask=None):
    per_token = -(deltas.detach() * logp)
    if mask is None:
        return per_token.mean()
    valid = mask.bool()
    return torch.where(valid, per_token, torch.zeros_like(per_token)).sum() / valid.sum().clamp(min=1)


def r02_reinforce_masked_fill(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)  # (..., T)
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask != 0
    total = per_token.masked_fill(~valid, 0.0).sum()
    return total / valid.sum().clamp(min=1)


def w02_mc_without_replacement(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)  # (V,)
    actions = torch.multinomial(pi, n_samples, generator=generator)  # (n,)
    score = F.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi  # (n, V)
    return (reward_per_action[actions].unsqueeze(-1) * score).mean(dim=0)


def r02_mc_autograd(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)  # (n,)
    x = logits.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        objective = (reward_per_action.detach()[actions] * torch.log_softmax(x, dim=-1)[actions]).mean()
        (grad,) = torch.autograd.grad(objective, x)
    return grad


# ---------------------------------------------------------------------------------------------------------------
# Chapter 03: baselines
# ---------------------------------------------------------------------------------------------------------------


def w03_deltas_rewards_mode_aliases_input(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards
    G = rewards.shape[-1]
    same = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)  # (B, 1)
    centred = torch.where(same, torch.zeros_like(rewards), rewards - rewards.mean(dim=-1, keepdim=True))
    if mode == "centered_rewards" or (mode == "normalized_rewards" and G == 1):
        return centred
    if mode == "normalized_rewards":
        return centred / (rewards.std(dim=-1, keepdim=True) + eps)
    raise ValueError(f"mode: unknown {mode!r}")


def w03_variance_over_coordinates(grad_samples):
    return float(grad_samples.var(dim=1).sum())


def r03_variance_cov_trace(grad_samples):
    P = grad_samples.shape[1]
    cov = torch.cov(grad_samples.T)  # (P, P): the rows of grad_samples.T are the variables
    return float(cov.reshape(P, P).diagonal().sum())


# ---------------------------------------------------------------------------------------------------------------
# Chapter 04: GAE
# ---------------------------------------------------------------------------------------------------------------


def w04_gae_table_recursion_not_cut():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.607, 0.357, 1.33, 0.458, 1.4]
    return deltas, advantages


def w04_gae_cleanrl_next_done(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    T = rewards.shape[-1]
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(T)):
        if t == T - 1:
            nextnonterminal = torch.ones_like(lastgaelam)  # next_done: the rollout says nothing past its end
            nextvalues = last_values
        else:
            nextnonterminal = 1.0 - d[..., t + 1]
            nextvalues = values[..., t + 1]
        delta = rewards[..., t] + gamma * nextvalues * nextnonterminal - values[..., t]
        lastgaelam = delta + gamma * lam * nextnonterminal * lastgaelam
        advantages[..., t] = lastgaelam
    return advantages, advantages + values


def w04_gae_subtract_raw_dones(rewards, values, dones, last_values, gamma, lam):
    not_done = 1 - dones  # (..., T)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * not_done * next_values - values
    advantages = torch.zeros_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * not_done[..., t] * running
        advantages[..., t] = running
    return advantages, advantages + values


def r04_gae_stacked(rewards, values, dones, last_values, gamma, lam):
    not_done = (~dones.bool()).to(rewards.dtype)  # (..., T)
    next_values = torch.cat([values[..., 1:], last_values[..., None]], dim=-1)
    deltas = rewards + gamma * not_done * next_values - values
    running = torch.zeros_like(rewards[..., 0])
    backwards = []
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * not_done[..., t] * running
        backwards.append(running)
    advantages = torch.stack(backwards[::-1], dim=-1)
    return advantages, advantages + values


def w04_td_roll(rewards, values, dones, last_values, gamma):
    next_values = torch.roll(values, shifts=-1, dims=-1)  # V(s_{t+1})
    not_done = 1.0 - dones.to(rewards.dtype)
    return rewards + gamma * not_done * next_values - values


def w04_td_last_values_as_column(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], last_values.reshape(-1, 1)], dim=-1)
    return rewards + gamma * (1.0 - dones.to(rewards.dtype)) * next_values - values


def r04_td_where(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    bootstrapped = rewards + gamma * next_values - values
    terminal = rewards - values
    return torch.where(dones.bool(), terminal, bootstrapped)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 05: PPO
# ---------------------------------------------------------------------------------------------------------------


def w05_clipped_ignores_clip_eps_high(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
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
        low, high = ratio < 1.0 - clip_eps, ratio > 1.0 + clip_eps
        binding = (high & (adv > 0)) | (low & (adv < 0))
        n = n_valid.item()
        info = {
            "clip_fraction": ((low | high) & valid).sum().item() / n,
            "clip_active_fraction": (binding & valid).sum().item() / n,
            "approx_kl": torch.where(valid, (ratio - 1.0) - (logp - logp_old), zero).sum().item() / n,
        }
    return loss, info


def w05_clipped_multiply_by_mask(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    m = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    log_ratio = logp - logp_old.detach()
    ratio = log_ratio.exp()
    adv = adv.detach()
    per_element = -torch.min(ratio * adv, ratio.clamp(1.0 - clip_eps, 1.0 + high) * adv)
    n = m.sum().clamp(min=1)
    loss = (per_element * m).sum() / n
    with torch.no_grad():
        outside = ((ratio < 1.0 - clip_eps) | (ratio > 1.0 + high)).to(logp.dtype)
        binds = (((ratio > 1.0 + high) & (adv > 0)) | ((ratio < 1.0 - clip_eps) & (adv < 0))).to(logp.dtype)
        info = {
            "clip_fraction": float((outside * m).sum() / n),
            "clip_active_fraction": float((binds * m).sum() / n),
            "approx_kl": float((((ratio - 1.0) - log_ratio) * m).sum() / n),
        }
    return loss, info


def w05_clipped_tensor_diagnostics(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    logp = torch.where(valid, logp, zero)
    logp_old = torch.where(valid, logp_old.detach(), zero)
    adv = torch.where(valid, adv.detach(), zero)
    ratio = torch.exp(logp - logp_old)
    per_element = -torch.minimum(ratio * adv, torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high) * adv)
    n_valid = valid.sum().clamp(min=1)
    loss = torch.where(valid, per_element, zero).sum() / n_valid
    with torch.no_grad():
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binding = (above & (adv > 0)) | (low & (adv < 0))
        info = {
            "clip_fraction": ((low | above) & valid).sum() / n_valid,
            "clip_active_fraction": (binding & valid).sum() / n_valid,
            "approx_kl": torch.where(valid, (ratio - 1.0) - (logp - logp_old), zero).sum() / n_valid,
        }
    return loss, info


def r05_clipped_index_first(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    # keep only the valid entries before any arithmetic: padding never enters the graph
    logp_v = logp[valid]  # (n,)
    logp_old_v = logp_old.detach()[valid]
    adv_v = adv.detach()[valid]
    log_ratio = logp_v - logp_old_v
    ratio = log_ratio.exp()
    pg_loss1 = -adv_v * ratio
    pg_loss2 = -adv_v * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    n = max(int(valid.sum()), 1)
    loss = torch.max(pg_loss1, pg_loss2).sum() / n
    with torch.no_grad():
        below, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binds = (above & (adv_v > 0)) | (below & (adv_v < 0))
        info = {
            "clip_fraction": float((below | above).sum()) / n,
            "clip_active_fraction": float(binds.sum()) / n,
            "approx_kl": float(((ratio - 1.0) - log_ratio).sum()) / n,
        }
    return loss, info


def w05_value_clip_minimum(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    values = torch.where(valid, values, zero)
    returns = torch.where(valid, returns.detach(), zero)
    squared_error = (values - returns) ** 2
    if clip_eps is not None:
        values_old = torch.where(valid, values_old.detach(), zero)
        values_clipped = values_old + (values - values_old).clamp(-clip_eps, clip_eps)
        squared_error = torch.minimum(squared_error, (values_clipped - returns) ** 2)
    return 0.5 * torch.where(valid, squared_error, zero).sum() / valid.sum().clamp(min=1)


def w05_value_no_half(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    v = values[valid]
    ret = returns.detach()[valid]
    loss_unclipped = (v - ret).pow(2)
    if clip_eps is None:
        per_entry = loss_unclipped
    else:
        v_old = values_old.detach()[valid]
        v_clipped = v_old + torch.clamp(v - v_old, -clip_eps, clip_eps)
        per_entry = torch.max(loss_unclipped, (v_clipped - ret).pow(2))
    return per_entry.sum() / max(v.numel(), 1)


def r05_value_mse(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    v = values[valid]
    ret = returns.detach()[valid]
    error = F.mse_loss(v, ret, reduction="none")
    if clip_eps is not None:
        v_old = values_old.detach()[valid]
        v_clipped = v_old + (v - v_old).clamp(-clip_eps, clip_eps)
        error = torch.maximum(error, F.mse_loss(v_clipped, ret, reduction="none"))
    return 0.5 * error.sum() / max(int(valid.sum()), 1)


class _PPOLossCoefficients(nn.Module):
    """The ``__init__`` the exercise gives; each student below writes ``forward``."""

    def __init__(self, clip_epsilon=0.2, value_loss_coef=0.5, entropy_coef=0.01):
        super().__init__()
        self.clip_epsilon = clip_epsilon
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef


class W05PPOLossEntropyOverPadding(_PPOLossCoefficients):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = r05_clipped_index_first(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = r05_value_mse(values, returns, mask=mask)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * entropy.mean()


class W05PPOLossDetachedEntropy(_PPOLossCoefficients):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = r05_clipped_index_first(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = r05_value_mse(values, returns, mask=mask)
        valid = torch.ones_like(entropy, dtype=torch.bool) if mask is None else mask.bool()
        entropy = entropy.detach()  # a bonus, not something to backpropagate
        mean_entropy = torch.where(valid, entropy, torch.zeros_like(entropy)).sum() / valid.sum().clamp(min=1)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * mean_entropy


class R05PPOLossIndexed(_PPOLossCoefficients):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = r05_clipped_index_first(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = r05_value_mse(values, returns, mask=mask)
        valid = torch.ones_like(entropy, dtype=torch.bool) if mask is None else mask.bool()
        mean_entropy = entropy[valid].sum() / max(int(valid.sum()), 1)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * mean_entropy


# ---------------------------------------------------------------------------------------------------------------
# Chapter 06: GRPO
# ---------------------------------------------------------------------------------------------------------------


def w06_group_adv_eps_under_sqrt(rewards, normalize_std=True, eps=1e-6):
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    equal = (rewards == rewards[..., :1]).all(dim=-1, keepdim=True)
    centred = centred.masked_fill(equal, 0.0)
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    var = rewards.var(dim=-1, keepdim=True)  # Bessel-corrected
    return centred / torch.sqrt(var + eps)


def w06_group_adv_zero_below_eps(rewards, normalize_std=True, eps=1e-6):
    G = rewards.shape[-1]
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True) if G > 1 else torch.zeros_like(rewards[..., :1])
    flat = std < eps  # no spread: nothing to learn
    centred = torch.where(flat, torch.zeros_like(centred), centred)
    if not normalize_std:
        return centred
    return torch.where(flat, torch.zeros_like(centred), centred / (std + eps))


def w06_group_adv_trl_eps(rewards, normalize_std=True, eps=1e-6):
    B, G = rewards.shape
    mean_grouped = rewards.mean(dim=1).repeat_interleave(G).view(B, G)
    adv = rewards - mean_grouped
    all_same = (rewards == rewards[:, :1]).all(dim=1, keepdim=True)
    adv = torch.where(all_same, torch.zeros_like(adv), adv)
    if not normalize_std or G == 1:
        return adv
    std_grouped = rewards.std(dim=1).repeat_interleave(G).view(B, G)
    return adv / (std_grouped + 1e-4)


def r06_group_adv_einops(rewards, normalize_std=True, eps=1e-6):
    G = rewards.shape[-1]
    baseline = reduce(rewards, "B G -> B 1", "mean")  # each prompt's own mean
    all_equal = reduce((rewards == rewards[:, :1]).int(), "B G -> B 1", "min").bool()
    adv = torch.where(all_equal, torch.zeros_like(rewards), rewards - baseline)  # (B, G)
    if not normalize_std or G == 1:
        return adv
    std = torch.std(rewards, dim=-1, correction=1, keepdim=True)  # (B, 1), divides by G - 1
    return adv / (std + eps)


def w06_kl_k3_inverted_ratio(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    if kind == "k3":
        log_ratio = logp - logp_ref  # r = pi_theta / pi_ref
        return torch.expm1(log_ratio) - log_ratio
    raise ValueError(f"kind: {kind!r}")


def w06_kl_verl_clamps(logp, logp_ref, kind):
    if kind == "k1":
        return logp - logp_ref
    if kind == "k2":
        return 0.5 * (logp_ref - logp) ** 2
    if kind == "k3":
        # as verl's low_var_kl
        log_r = torch.clamp(logp_ref - logp, min=-20, max=20)
        kl = torch.exp(log_r) - log_r - 1
        return torch.clamp(kl, min=-10, max=10)
    raise ValueError(f"kind: {kind!r}")


def r06_kl_match(logp, logp_ref, kind):
    log_r = logp_ref - logp
    match kind:
        case "k1":
            return -log_r
        case "k2":
            return log_r.square() / 2
        case "k3":
            return torch.expm1(log_r) - log_r
    raise ValueError(f"kind: expected k1, k2 or k3, got {kind!r}")


def w06_agg_skip_empty_responses(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    lengths = valid.sum(dim=-1)  # (...)
    if mode == "token-mean":
        return per_token.sum() / lengths.sum().clamp(min=1)
    sums = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        nonempty = lengths > 0
        means = sums[nonempty] / lengths[nonempty]
        return means.sum() / max(int(nonempty.sum()), 1)
    if mode == "seq-mean-token-sum-norm":
        L = per_token.shape[-1] if max_len is None else max_len
        return (sums / L).mean()
    raise ValueError(f"mode: {mode!r}")


def w06_agg_dr_grpo_total_over_max_len(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    n_valid = valid.sum(dim=-1).to(per_token.dtype)
    if mode == "token-mean":
        return per_token.sum() / n_valid.sum().clamp(min=1)
    if mode == "seq-mean-token-mean":
        return (per_token.sum(dim=-1) / n_valid.clamp(min=1)).mean()
    if mode == "seq-mean-token-sum-norm":
        L = per_token.shape[-1] if max_len is None else max_len
        return per_token.sum() / L
    raise ValueError(f"mode: {mode!r}")


def r06_agg_row_loop(per_token, mask, mode, max_len=None):
    T = per_token.shape[-1]
    rows = per_token.reshape(-1, T)  # (N, T)
    keep = mask.reshape(-1, T).bool()
    if mode == "token-mean":
        return rows[keep].sum() / keep.sum().clamp(min=1)
    terms = []
    for row, row_keep in zip(rows, keep):
        total = row[row_keep].sum()
        if mode == "seq-mean-token-mean":
            terms.append(total / max(int(row_keep.sum()), 1))
        elif mode == "seq-mean-token-sum-norm":
            terms.append(total / (T if max_len is None else max_len))
        else:
            raise ValueError(f"mode: {mode!r}")
    return torch.stack(terms).mean()


def w06_grpo_loss_renormalises_given_adv(
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
    scores = rewards if adv is None else adv
    adv = grpo.group_advantages(scores.detach(), normalize_std=normalize_std)  # (B, G)
    adv_tokens = adv.unsqueeze(-1).expand_as(logp)
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())
    per_token = -torch.minimum(ratio * adv_tokens, ratio.clamp(1 - clip_eps, 1 + high) * adv_tokens)
    kl = None
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    with torch.no_grad():
        valid = mask.bool()
        low, above = ratio < 1 - clip_eps, ratio > 1 + high
        binding = (above & (adv_tokens > 0)) | (low & (adv_tokens < 0))
        info = {
            "clip_fraction": (low | above)[valid].double().mean().item(),
            "clip_active_fraction": binding[valid].double().mean().item(),
            "kl": kl[valid].mean().item() if kl is not None else 0.0,
            "adv_abs_mean": adv.abs().mean().item(),
        }
        if rewards is not None:
            info["reward_mean"] = rewards.mean().item()
    return loss, info


def w06_grpo_loss_kl_on_detached_logp(
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
    A = adv.detach()[..., None]  # (B, G, 1)
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = (logp - logp_old.detach()).exp()
    surrogate = torch.min(ratio * A, torch.clamp(ratio, 1 - clip_eps, 1 + high) * A)
    per_token = -surrogate
    kl = torch.zeros_like(logp)
    if logp_ref is not None:
        # the penalty is a number we add, computed from the current log-probs
        kl = grpo.kl_estimate(logp.detach(), logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    valid = mask.bool()
    n = valid.sum().clamp(min=1).item()
    with torch.no_grad():
        outside = (ratio < 1 - clip_eps) | (ratio > 1 + high)
        binds = ((ratio > 1 + high) & (A > 0)) | ((ratio < 1 - clip_eps) & (A < 0))
        info = {
            "clip_fraction": (outside & valid).sum().item() / n,
            "clip_active_fraction": (binds & valid).sum().item() / n,
            "kl": torch.where(valid, kl, torch.zeros_like(kl)).sum().item() / n,
            "adv_abs_mean": A.abs().mean().item(),
        }
        if rewards is not None:
            info["reward_mean"] = rewards.mean().item()
    return loss, info


def r06_grpo_loss_cleanrl_style(
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
    A = adv[..., None]  # (B, G, 1): one advantage per response, shared by its tokens
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())  # (B, G, T)
    pg_loss1 = -A * ratio
    pg_loss2 = -A * torch.clamp(ratio, 1 - clip_eps, 1 + high)
    per_token = torch.max(pg_loss1, pg_loss2)
    kl = None
    if logp_ref is not None:
        kl = grpo.kl_estimate(logp, logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
    with torch.no_grad():
        valid = mask.bool()
        n = valid.sum().clamp(min=1)
        below, above = ratio < 1 - clip_eps, ratio > 1 + high
        binding = (above & (A > 0)) | (below & (A < 0))
        mean_kl = 0.0
        if kl is not None:
            mean_kl = float(torch.where(valid, kl, torch.zeros_like(kl)).sum() / n)
        info = {
            "clip_fraction": float(((below | above) & valid).sum() / n),
            "clip_active_fraction": float((binding & valid).sum() / n),
            "kl": mean_kl,
            "adv_abs_mean": float(adv.abs().mean()),
        }
        if rewards is not None:
            info["reward_mean"] = float(rewards.mean())
    return loss, info


# ---------------------------------------------------------------------------------------------------------------
# Chapter 07: GRPO against PPO
# ---------------------------------------------------------------------------------------------------------------


def w07_memory_master_when_dtypes_differ(
    n_params_actor,
    n_params_critic=0,
    n_params_ref=0,
    n_params_reward=0,
    weights_dtype="bf16",
    optimizer_dtype="fp32",
):
    size = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}
    w = size[weights_dtype]
    o = size[optimizer_dtype]
    # mixed precision keeps a master copy in the optimizer's dtype
    master = o if weights_dtype != optimizer_dtype else 0
    rows = {
        "actor": 2 * w * n_params_actor,
        "critic": 2 * w * n_params_critic,
        "reference": w * n_params_ref,
        "reward": w * n_params_reward,
        "optimizer": (2 * o + master) * (n_params_actor + n_params_critic),
    }
    rows["total"] = sum(rows.values())
    return rows


def r07_memory_per_model_loop(
    n_params_actor,
    n_params_critic=0,
    n_params_ref=0,
    n_params_reward=0,
    weights_dtype="bf16",
    optimizer_dtype="fp32",
):
    bits = {"fp64": 64, "fp32": 32, "bf16": 16, "fp16": 16}
    w = bits[weights_dtype] // 8
    o = bits[optimizer_dtype] // 8
    models = [
        ("actor", n_params_actor, True),
        ("critic", n_params_critic, True),
        ("reference", n_params_ref, False),
        ("reward", n_params_reward, False),
    ]
    account = {}
    optimizer = 0
    for name, count, trained in models:
        if trained:
            account[name] = count * (w + w)
            optimizer += count * (o + o + (o if o > w else 0))
        else:
            account[name] = count * w
    account["optimizer"] = optimizer
    account["total"] = sum(account.values())
    return account


def w07_sweep_last_of_ties(group_sizes, clip_eps, reward, tol=0.1):
    best = -math.inf
    best_i = best_j = 0
    for i in range(reward.shape[0]):
        for j in range(reward.shape[1]):
            if reward[i, j] >= best:
                best = reward[i, j]
                best_i, best_j = i, j
    saturation = 0
    for i in range(reward.shape[0]):
        if reward[i].max() >= reward.max() - tol:
            saturation = i
            break
    return int(group_sizes[best_i]), float(clip_eps[best_j]), int(group_sizes[saturation])


# ---------------------------------------------------------------------------------------------------------------
# Chapter 08: the capstone
# ---------------------------------------------------------------------------------------------------------------


def w08_addition_no_eos_required(completion, answer):
    return float(completion.split("$")[0] == answer)


def w08_mask_argmax_first_eos(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).int()
    first = is_eos.argmax(dim=-1, keepdim=True)  # (..., 1): position of the first EOS
    positions = torch.arange(completion_ids.shape[-1], device=completion_ids.device)
    return (positions <= first).float()


def w08_mask_roll_shift(completion_ids, eos_id):
    seen = torch.cumsum((completion_ids == eos_id).long(), dim=-1)  # EOS up to and including t
    seen_before = torch.roll(seen, shifts=1, dims=-1)  # EOS strictly before t
    return (seen_before == 0).float()


def w08_mask_bool(completion_ids, eos_id):
    is_eos = completion_ids == eos_id
    after_first = (is_eos.cumsum(dim=-1) - is_eos.long()) > 0
    return ~after_first


def w08_mask_cummax_minus_eos(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    from_first_eos = is_eos.cummax(dim=-1).values  # 1 from the first EOS on
    eos_before = from_first_eos - is_eos  # 1 strictly after the first EOS
    return (eos_before == 0).float()


def r08_mask_row_loop(completion_ids, eos_id):
    L = completion_ids.shape[-1]
    mask = torch.ones(completion_ids.shape, dtype=torch.float32, device=completion_ids.device)
    rows = completion_ids.reshape(-1, L)
    mask_rows = mask.view(-1, L)
    for i in range(rows.shape[0]):
        hits = (rows[i] == eos_id).nonzero()
        if len(hits) > 0:
            mask_rows[i, int(hits[0, 0]) + 1 :] = 0.0
    return mask


def w08_step_tiled_prompts(
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
    flat_prompts = prompts.repeat(G, 1)  # (B*G, P)
    flat = completions.reshape(B * G, L)
    ids = torch.cat([flat_prompts, flat[:, :-1]], dim=1)

    def logp_of(model):
        logits = model(ids)[:, P - 1 :, :]
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


def w08_step_logits_from_p(
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
        logits = model(ids)[:, P:, :]  # the completion's positions
        return rearrange(gather_log_probs(logits, flat), "(B G) L -> B G L", G=G)

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


# ---------------------------------------------------------------------------------------------------------------
# Chapter 09: TRL
# ---------------------------------------------------------------------------------------------------------------


def w09_answer_first_message(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(None)
            continue
        text = completion if isinstance(completion, str) else completion[0]["content"]
        rewards.append(math_answer_reward(text, str(truth)))
    return rewards


def w09_logps_no_position_ids(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    is_eos = (completion_ids == eos_id).long()
    mask = ((is_eos.cumsum(-1) - is_eos) == 0).float()
    attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    logits = model(input_ids=sequences, attention_mask=attention_mask).logits
    logits = logits[:, P - 1 : -1].float() / temperature
    return gather_log_probs(logits, completion_ids), mask


def w09_logps_temperature_after_log_softmax(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    is_eos = (completion_ids == eos_id).long()
    mask = ((is_eos.cumsum(-1) - is_eos) == 0).float()
    attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids).logits
    logp_all = torch.log_softmax(logits[:, P - 1 : -1].float(), dim=-1) / temperature
    logp = logp_all.gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)
    return logp, mask


def r09_logps_first_eos_by_argmax_guarded(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]  # (B, L)
    L = completion_ids.shape[1]
    is_eos = completion_ids == eos_id
    has_eos = is_eos.any(dim=-1, keepdim=True)  # (B, 1)
    first = torch.where(
        has_eos, is_eos.int().argmax(dim=-1, keepdim=True), torch.full_like(has_eos, L, dtype=torch.long)
    )
    mask = (torch.arange(L, device=sequences.device) <= first).float()  # (B, L)
    attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)  # (B, P + L)
    position_ids = (attention_mask.cumsum(dim=-1) - 1).clamp(min=0)
    out = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids)
    scaled = out.logits[:, P - 1 : sequences.shape[1] - 1, :].float() / temperature  # (B, L, V)
    return gather_log_probs(scaled, completion_ids), mask


def w09_config_true_division(cfg, num_processes=1):
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
            raise ValueError(f"cfg.{switch}: no GRPOConfig field for {getattr(cfg, switch)!r}")
    B, G = cfg.prompts_per_step, cfg.group_size
    K, M = cfg.update_epochs, cfg.num_minibatches
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


def w10_pass_at_k_one_whenever_short(n, c, k):
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x, dtype=torch.float64) for x in (n, c, k)))
    j = torch.arange(int(c.max()), dtype=torch.float64)
    i = (n - c + 1)[..., None] + j
    factors = torch.where(j < c[..., None], 1 - k[..., None] / i, torch.ones((), dtype=torch.float64))
    estimate = 1 - factors.prod(dim=-1)
    # fewer than k wrong samples: every draw of k holds a right one
    return torch.where(n - c < k, torch.ones_like(estimate), estimate)


def r10_pass_at_k_math_comb(n, c, k):
    n, c, k = torch.broadcast_tensors(torch.as_tensor(n), torch.as_tensor(c), torch.as_tensor(k))
    values = []
    for n_i, c_i, k_i in zip(n.reshape(-1).tolist(), c.reshape(-1).tolist(), k.reshape(-1).tolist()):
        n_i, c_i, k_i = int(n_i), int(c_i), int(k_i)
        if k_i > n_i:
            values.append(1.0 if c_i > 0 else 0.0)  # pass@n
        else:
            # exact integers: Python's int / int rounds the huge quotient once
            values.append(1.0 - math.comb(n_i - c_i, k_i) / math.comb(n_i, k_i))
    return torch.tensor(values, dtype=torch.float64).reshape(n.shape)


def w10_weight_n_counts_nonempty(length, mode, max_len=None):
    o = length if length.is_floating_point() else length.to(torch.get_default_dtype())
    N = int((o > 0).sum())  # the responses that have tokens
    if max_len is None:
        max_len = o.max()
    if mode == "seq-mean-token-mean":
        w = 1 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    elif mode == "seq-mean-token-sum-norm":
        w = torch.ones_like(o) / (N * max_len)
    else:
        raise ValueError(f"mode: {mode!r}")
    return torch.where(o > 0, w, torch.zeros_like(w))


def w10_style_two_digit_totals(text, n_digits=3):
    body, eos, _ = text.partition("$")
    if not eos or not body:
        return "malformed"
    if body.isdigit() and body.isascii():
        return "direct"
    m = re.fullmatch(r"\[([^\[\]]+)\](\d+)", body, flags=re.ASCII)
    if m is None:
        return "malformed"
    inside = m.group(1)
    if re.fullmatch(r"\.+", inside):
        return "filler"
    if re.fullmatch(r"\d{1,2}(?:,\d{1,2}){%d}" % (n_digits - 1), inside, flags=re.ASCII):
        return "scratchpad"
    return "malformed"


def w10_share_empty_is_zero(labels, style):
    flat = np.asarray(labels).reshape(-1)
    if flat.size == 0:
        return 0.0
    return float((flat == style).sum() / flat.size)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 11: the GRPO family
# ---------------------------------------------------------------------------------------------------------------


def w11_rloo_divide_by_g(rewards):
    G = rewards.shape[-1]
    others_sum = rewards.sum(dim=-1, keepdim=True) - rewards  # (B, G)
    return rewards - others_sum / G


def w11_rloo_group_of_one_raw_reward(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return rewards.clone()  # no baseline to subtract
    others_mean = (rewards.sum(dim=-1, keepdim=True) - rewards) / (G - 1)
    return rewards - others_mean


def r11_rloo_scaled_centred(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    # r_i - mean of the others = G / (G - 1) * (r_i - mean of all)
    return G / (G - 1) * (rewards - rewards.mean(dim=-1, keepdim=True))


def w11_gspo_sum_not_mean(logp, logp_old, mask):
    valid = mask.bool()
    log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    return log_ratio.sum(dim=-1)


def w11_cispo_weight_not_detached(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=1.0 + clip_eps_high)
    return -weight * adv.detach() * logp


def w11_cispo_trl_cap(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=clip_eps_high).detach()  # epsilon_high is the cap
    return -weight * adv.detach() * logp


def r11_cispo_where(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = (logp - logp_old.detach()).exp().detach()
    cap = 1.0 + clip_eps_high
    weight = torch.where(ratio > cap, torch.full_like(ratio, cap), ratio)
    if clip_eps is not None:
        floor = 1.0 - clip_eps
        weight = torch.where(weight < floor, torch.full_like(weight, floor), weight)
    return -weight * adv.detach() * logp


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
        w00_discounted_return_forward_horner,
        "Runs Horner's rule forwards in time (total = gamma * total + r_t for t = 0 .. T-1), so r_t is weighted by "
        "gamma^(T-1-t) instead of gamma^t.",
    ),
    _row("discounted_return", "00", r00_discounted_return_einsum),
    _row(
        "reward_to_go",
        "00",
        w00_reward_to_go_in_place,
        "Accumulates the recursion in place inside rewards and returns that tensor: the values are right, but the "
        "caller's rewards are overwritten.",
    ),
    _row("reward_to_go", "00", r00_reward_to_go_stack),
    # 01
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w01_sort_reward_distinct_prompt_tokens,
        "Counts inclusion over the set of distinct prompt tokens, so a token that occurs twice in the prompt earns "
        "one point instead of two.",
    ),
    _row(
        "math_answer_reward",
        "01",
        w01_math_answer_cut_at_first_dot,
        "Ends a stated answer at the first '.', '!' or '?' even inside a number, so 'the answer is 2.50' is read "
        "as '2'.",
    ),
    # 02
    _row(
        "gather_log_probs",
        "02",
        w02_gather_cross_entropy,
        "Returns F.cross_entropy per token, the negative log-probability, without negating it.",
    ),
    _row(
        "gather_log_probs",
        "02",
        w02_gather_shifted,
        "Shifts by one position (logits[..., :-1] score tokens[..., 1:]) although no shift is wanted, so it returns "
        "T - 1 values, each from the previous position's logits.",
    ),
    _row("gather_log_probs", "02", r02_gather_logsumexp),
    _row(
        "reinforce_loss",
        "02",
        w02_reinforce_index_with_mask,
        "Selects the valid tokens with per_token[mask], which works only for a bool mask: a 0/1 integer mask "
        "indexes rows 0 and 1 instead (and a float mask raises).",
    ),
    _row(
        "reinforce_loss",
        "02",
        w02_reinforce_no_token_axis,
        "Multiplies deltas by logp without adding a token axis, so the weights line up with the last (token) axis: "
        "wrong tokens get each weight when the sizes match, and the call raises when they do not.",
    ),
    _row("reinforce_loss", "02", r02_reinforce_masked_fill),
    _row(
        "mc_policy_gradient",
        "02",
        w02_mc_without_replacement,
        "Calls torch.multinomial without replacement=True, so the actions are not the prescribed draws (and "
        "n_samples > V raises).",
    ),
    _row("mc_policy_gradient", "02", r02_mc_autograd),
    # 03
    _row(
        "compute_deltas",
        "03",
        w03_deltas_rewards_mode_aliases_input,
        "Returns the rewards tensor itself in mode 'rewards' instead of a new tensor.",
    ),
    _row(
        "gradient_variance",
        "03",
        w03_variance_over_coordinates,
        "Takes each sample's variance over its P coordinates (dim=1) and sums over the samples, instead of each "
        "coordinate's variance over the N samples (dim=0) summed over the coordinates.",
    ),
    _row("gradient_variance", "03", r03_variance_cov_trace),
    # 04
    _row(
        "gae_table",
        "04",
        w04_gae_table_recursion_not_cut,
        "Cuts the bootstrap in delta_2 but not the recursion at the terminal step: A_2 = delta_2 + gamma * lam * A_3, "
        "which changes A_0, A_1 and A_2.",
    ),
    _row(
        "compute_gae",
        "04",
        w04_gae_cleanrl_next_done,
        "Ports CleanRL's convention: step t is cut by dones[..., t + 1] (and the last step never), instead of by "
        "dones[..., t].",
    ),
    _row(
        "compute_gae",
        "04",
        w04_gae_subtract_raw_dones,
        "Computes 1 - dones on the flags as given, which raises for bool dones (torch does not subtract a bool "
        "tensor).",
    ),
    _row("compute_gae", "04", r04_gae_stacked),
    _row(
        "td_residuals",
        "04",
        w04_td_roll,
        "Takes V(s_{t+1}) with torch.roll, so the last step bootstraps from values[..., 0] (wrapped around) instead "
        "of last_values.",
    ),
    _row(
        "td_residuals",
        "04",
        w04_td_last_values_as_column,
        "Reshapes last_values to (-1, 1), which lines up only with a 2-D (B, T) batch: one rollout (T,) or a "
        "(2, 3, 4) batch raises.",
    ),
    _row("td_residuals", "04", r04_td_where),
    # 05
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_clipped_ignores_clip_eps_high,
        "Ignores clip_eps_high: the upper clip bound (in the loss and the diagnostics) is always 1 + clip_eps.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_clipped_multiply_by_mask,
        "Drops the padding by multiplying by the mask instead of selecting, so -inf (or NaN) in the padding gives "
        "NaN (0 * inf) in the loss or the diagnostics.",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_clipped_tensor_diagnostics,
        "Returns the three diagnostics as 0-dim tensors instead of Python floats.",
    ),
    _row("clipped_surrogate_loss", "05", r05_clipped_index_first),
    _row(
        "value_loss",
        "05",
        w05_value_clip_minimum,
        "With value clipping, takes the smaller of the clipped and unclipped squared errors (torch.minimum) instead "
        "of the larger.",
    ),
    _row(
        "value_loss",
        "05",
        w05_value_no_half,
        "Leaves out the factor 0.5 (as SB3's F.mse_loss does), so the loss is twice the reference's.",
    ),
    _row("value_loss", "05", r05_value_mse),
    _row(
        "PPOLoss",
        "05",
        W05PPOLossEntropyOverPadding,
        "Averages the entropy over every entry, padding included (entropy.mean()), instead of over the valid entries.",
    ),
    _row(
        "PPOLoss",
        "05",
        W05PPOLossDetachedEntropy,
        "Detaches the entropy, so the entropy bonus changes the loss's value but sends no gradient into entropy.",
    ),
    _row("PPOLoss", "05", R05PPOLossIndexed),
    # 06
    _row(
        "group_advantages",
        "06",
        w06_group_adv_eps_under_sqrt,
        "Adds eps to the variance under the square root, sqrt(var + eps), instead of adding it to the std.",
    ),
    _row(
        "group_advantages",
        "06",
        w06_group_adv_zero_below_eps,
        "Zeroes every group whose std is below eps (in both modes) instead of only the groups whose rewards are "
        "all equal, so a nearly-equal group with std < eps gets zeros.",
    ),
    _row(
        "group_advantages",
        "06",
        w06_group_adv_trl_eps,
        "Ignores the eps argument and always adds TRL's 1e-4 to the std.",
    ),
    _row("group_advantages", "06", r06_group_adv_einops),
    _row(
        "kl_estimate",
        "06",
        w06_kl_k3_inverted_ratio,
        "Computes k3 with the inverted log-ratio logp - logp_ref, (pi_theta/pi_ref - 1) - log(pi_theta/pi_ref), "
        "instead of (r - 1) - log r with r = pi_ref / pi_theta.",
    ),
    _row(
        "kl_estimate",
        "06",
        w06_kl_verl_clamps,
        "Copies verl's low_var_kl clamps into k3 (log r to [-20, 20], k3 to [-10, 10]), which caps k3 at 10 (and "
        "zeroes its gradient) once the log-ratio passes about 2.5.",
    ),
    _row("kl_estimate", "06", r06_kl_match),
    _row(
        "aggregate_loss",
        "06",
        w06_agg_skip_empty_responses,
        "In seq-mean-token-mean leaves empty responses out of the mean over responses, instead of counting each as "
        "a response that contributes 0.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w06_agg_dr_grpo_total_over_max_len,
        "In seq-mean-token-sum-norm divides the sum over all responses by max_len without averaging over the N "
        "responses (verl's form), a loss N times too large.",
    ),
    _row("aggregate_loss", "06", r06_agg_row_loop),
    _row(
        "grpo_loss",
        "06",
        w06_grpo_loss_renormalises_given_adv,
        "When adv is given, passes it through group_advantages again (re-centred and re-scaled per group) instead "
        "of using it as given.",
    ),
    _row(
        "grpo_loss",
        "06",
        w06_grpo_loss_kl_on_detached_logp,
        "Computes the KL penalty from logp.detach(), so the penalty adds to the loss's value but sends no gradient "
        "into logp.",
    ),
    _row("grpo_loss", "06", r06_grpo_loss_cleanrl_style),
    # 07
    _row(
        "memory_accounting",
        "07",
        w07_memory_master_when_dtypes_differ,
        "Adds the master copy whenever weights_dtype differs from optimizer_dtype, instead of only when the weights "
        "are narrower, so fp64 weights with fp32 Adam get one too.",
    ),
    _row("memory_accounting", "07", r07_memory_per_model_loop),
    _row(
        "read_sweep",
        "07",
        w07_sweep_last_of_ties,
        "Scans for the best with >=, so among tied maxima it returns the last (most expensive) configuration "
        "instead of the smallest group size, then the smallest clip range.",
    ),
    # 08
    _row(
        "addition_exact_reward",
        "08",
        w08_addition_no_eos_required,
        "Never checks that an EOS is present, so a completion that never stopped ('132') earns 1.0.",
    ),
    _row(
        "completion_mask",
        "08",
        w08_mask_argmax_first_eos,
        "Finds the first EOS with argmax, which gives 0 for a row without EOS, so such a row keeps only its first "
        "token instead of all of them.",
    ),
    _row(
        "completion_mask",
        "08",
        w08_mask_roll_shift,
        "Shifts the running EOS count right with torch.roll, which wraps the row's total count into position 0, so "
        "every row that holds an EOS loses its first token.",
    ),
    _row(
        "completion_mask",
        "08",
        w08_mask_bool,
        "Returns a bool mask instead of a float32 one.",
    ),
    _row(
        "completion_mask",
        "08",
        w08_mask_cummax_minus_eos,
        "Computes 'EOS strictly before t' as cummax(is_eos) - is_eos, which is 0 again at every later EOS, so each "
        "EOS after the first is kept in the mask.",
    ),
    _row("completion_mask", "08", r08_mask_row_loop),
    _row(
        "grpo_step",
        "08",
        w08_step_tiled_prompts,
        "Repeats the prompts with prompts.repeat(G, 1), which tiles the batch (0, 1, .., B-1, 0, 1, ..), instead of "
        "repeating each prompt G times adjacently, so completions are scored after other prompts.",
    ),
    _row(
        "grpo_step",
        "08",
        w08_step_logits_from_p,
        "Takes the logits from position P instead of P - 1 (feeding the whole completion), so each completion token "
        "is scored by the logits that predict the token after it.",
    ),
    # 09
    _row(
        "answer_reward",
        "09",
        w09_answer_first_message,
        "Reads the first message's content of a conversational completion instead of the last one's.",
    ),
    _row(
        "completion_logps",
        "09",
        w09_logps_no_position_ids,
        "Passes no position_ids, so a model that does not derive positions from the attention mask (GPT-2) reads a "
        "left-padded prompt at shifted positions.",
    ),
    _row(
        "completion_logps",
        "09",
        w09_logps_temperature_after_log_softmax,
        "Divides the log-probabilities by temperature after log_softmax instead of dividing the logits before it.",
    ),
    _row("completion_logps", "09", r09_logps_first_eos_by_argmax_guarded),
    _row(
        "grpo_config_kwargs",
        "09",
        w09_config_true_division,
        "Divides with / instead of //, so per_device_train_batch_size (without micro_batch_size), "
        "gradient_accumulation_steps and steps_per_generation are floats.",
    ),
    # 10
    _row(
        "pass_at_k",
        "10",
        w10_pass_at_k_one_whenever_short,
        "Returns 1 whenever n - c < k, including k > n with c = 0, where pass@n is 0.",
    ),
    _row("pass_at_k", "10", r10_pass_at_k_math_comb),
    _row(
        "aggregation_token_weight",
        "10",
        w10_weight_n_counts_nonempty,
        "Counts only the non-empty responses in N, instead of every entry of length.",
    ),
    _row(
        "completion_style",
        "10",
        w10_style_two_digit_totals,
        "Accepts any one- or two-digit scratchpad total (20 to 99, and leading zeros such as '05') instead of 0 to "
        "19 without leading zeros.",
    ),
    _row(
        "style_share",
        "10",
        w10_share_empty_is_zero,
        "Returns 0.0 for an empty list of labels instead of raising ValueError.",
    ),
    # 11
    _row(
        "rloo_advantages",
        "11",
        w11_rloo_divide_by_g,
        "Divides the sum of the other rewards by G instead of G - 1.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w11_rloo_group_of_one_raw_reward,
        "Gives a group of one its raw reward (verl's convention) instead of 0.",
    ),
    _row("rloo_advantages", "11", r11_rloo_scaled_centred),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w11_gspo_sum_not_mean,
        "Sums the token log-ratios over the valid tokens instead of averaging them (the log of the whole sequence's "
        "ratio, not of its geometric mean).",
    ),
    _row(
        "cispo_loss",
        "11",
        w11_cispo_weight_not_detached,
        "Does not detach the clipped weight, so the gradient with respect to logp gets an extra term from the "
        "weight (where it is not clipped).",
    ),
    _row(
        "cispo_loss",
        "11",
        w11_cispo_trl_cap,
        "Caps the weight at clip_eps_high itself (TRL's epsilon_high convention) instead of 1 + clip_eps_high.",
    ),
    _row("cispo_loss", "11", r11_cispo_where),
]
