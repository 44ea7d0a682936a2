"""A fourth class of students, written blind: plausible answers to every exercise of chapters 00 to 11.

Each student is a function (a class for chapter 05's ``PPOLoss``) with its exercise's signature. ``ROWS`` lists
them with the ground truth: whether the answer is right, and, for a wrong one, one sentence saying exactly what
the student did wrong. The answers were written from the exercise notebooks, the solutions and the public
docstrings only, without reading the checks or any catalogue of mistakes, and committed before any check ran on
them; ``tests/run_class_four.py`` then runs each exercise's check on each student once, as its check cell does,
and stores what the check said ("at first sight") in ``tests/class_four_first_sight.json``.

This module holds no tests (pytest does not collect it): it is data for that measurement.
"""

import math
import re
from decimal import Decimal

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


def w00_discounted_return_cumprod(rewards, gamma):
    T = rewards.shape[-1]
    # gamma, gamma^2, ...: the discounts as a running product
    discounts = torch.cumprod(torch.full((T,), gamma, dtype=rewards.dtype), dim=0)
    return (rewards * discounts).sum(dim=-1)


def r00_discounted_return_horner(rewards, gamma):
    total = torch.zeros_like(rewards[..., 0])  # (...)
    for t in reversed(range(rewards.shape[-1])):
        total = rewards[..., t] + gamma * total
    return total


def w00_reward_to_go_divide_by_discount(rewards, gamma):
    T = rewards.shape[-1]
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype)  # (T,)
    discounted = rewards * discounts
    # sum_{k >= t} gamma^k r_k, then take gamma^t back out
    tail_sums = discounted.flip(-1).cumsum(-1).flip(-1)
    return tail_sums / discounts


def r00_reward_to_go_matrix(rewards, gamma):
    T = rewards.shape[-1]
    steps = torch.arange(T)
    lag = steps[None, :] - steps[:, None]  # (T, T): k - t
    base = torch.tensor(gamma, dtype=rewards.dtype)
    powers = base ** lag.clamp(min=0).to(rewards.dtype)
    weights = torch.where(lag >= 0, powers, torch.zeros_like(powers))  # (T, T): gamma^(k - t) for k >= t
    return rewards @ weights.T  # (..., T)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 01: rewards
# ---------------------------------------------------------------------------------------------------------------


def w01_sort_reward_isin(prompt, response):
    # np.isin habit: is each prompt token in the response?
    inclusion = torch.isin(prompt, response).sum(dim=-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)
    return (inclusion + ordering).float()


def r01_sort_reward_sets(prompt, response):
    prompt_b, response_b = torch.broadcast_tensors(prompt, response)
    T = prompt_b.shape[-1]
    batch_shape = prompt_b.shape[:-1]
    scores = []
    for row_p, row_r in zip(prompt_b.reshape(-1, T).tolist(), response_b.reshape(-1, T).tolist()):
        present = set(row_r)
        inclusion = sum(1 for token in row_p if token in present)
        ordering = sum(1 for a, b in zip(row_r, row_r[1:]) if a <= b)
        scores.append(inclusion + ordering)
    return torch.tensor(scores, dtype=torch.float32).reshape(batch_shape)


_PLAIN_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"


def w01_math_reward_cut_at_first_dot(response_text, ground_truth):
    def clean(text):
        text = text.replace("$", "").strip()
        while text and text[-1] in ".,;:!?":
            text = text[:-1].rstrip()
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
        found = list(re.finditer(r"\banswer(?:\s+is\b\s*:?|\s*:)", response_text, re.IGNORECASE))
        if not found:
            return 0.0
        rest = response_text[found[-1].end() :]
        rest = re.split(r"[\n<]", rest)[0]
        # the sentence ends at its full stop
        answer = rest.split(".")[0]
    answer, truth = clean(answer), clean(ground_truth)
    if not answer:
        return 0.0
    if re.fullmatch(_PLAIN_NUMBER, answer) and re.fullmatch(_PLAIN_NUMBER, truth):
        return float(float(answer) == float(truth))
    return float(answer == truth)


def r01_math_reward_decimal(response_text, ground_truth):
    def last_boxed(text):
        starts = [m.start() for m in re.finditer(r"\\boxed\{", text)]
        for start in reversed(starts):
            open_at = start + len("\\boxed")  # the index of "{"
            depth = 0
            for i in range(open_at, len(text)):
                if text[i] == "{":
                    depth += 1
                elif text[i] == "}":
                    depth -= 1
                    if depth == 0:
                        return text[open_at + 1 : i]
        return None

    def stated(text):
        found = list(re.finditer(r"\banswer(?:\s+is\b\s*:?|\s*:)", text, re.IGNORECASE))
        if not found:
            return None
        rest = text[found[-1].end() :].lstrip()
        end = len(rest)
        for i, ch in enumerate(rest):
            if ch in "\n<":
                end = i
                break
            if ch in ".!?" and (i + 1 == len(rest) or rest[i + 1].isspace()):
                end = i
                break
        return rest[:end]

    def normalise(text):
        text = text.replace("\\$", "").replace("$", "").strip()
        text = text.rstrip(".,;:!? \t\n")
        previous = None
        while previous != text:
            previous = text
            text = re.sub(r"(\d),(\d{3})(?!\d)", r"\1\2", text)
        return text

    answer = last_boxed(response_text)
    if answer is None:
        answer = stated(response_text)
    if answer is None:
        return 0.0
    answer, truth = normalise(answer), normalise(ground_truth)
    if not answer:
        return 0.0
    if re.fullmatch(_PLAIN_NUMBER, answer) and re.fullmatch(_PLAIN_NUMBER, truth):
        return 1.0 if Decimal(answer) == Decimal(truth) else 0.0
    return 1.0 if answer == truth else 0.0


# ---------------------------------------------------------------------------------------------------------------
# Chapter 02: policy gradient
# ---------------------------------------------------------------------------------------------------------------


def w02_gather_log_probs_squeeze_all(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=-1)
    return logp_all.gather(-1, tokens.long().unsqueeze(-1)).squeeze()


def r02_gather_log_probs_logsumexp(logits, tokens):
    picked = logits.gather(-1, tokens.long()[..., None])[..., 0]  # (..., T)
    return picked - torch.logsumexp(logits, dim=-1)


def w02_reinforce_loss_index_with_mask(logp, deltas, mask=None):
    per_token = -(deltas.detach()[..., None] * logp)
    if mask is None:
        return per_token.mean()
    valid_terms = per_token[mask]
    return valid_terms.sum() / mask.sum().clamp(min=1)


def r02_reinforce_loss_select(logp, deltas, mask=None):
    per_token = -(deltas.detach().unsqueeze(-1) * logp)  # (..., T)
    if mask is None:
        valid = torch.ones_like(per_token, dtype=torch.bool)
    else:
        valid = mask.bool()
    selected = per_token[valid]  # (n_valid,)
    return selected.sum() / max(selected.numel(), 1)


def w02_mc_policy_gradient_global_rng(logits, reward_per_action, n_samples, generator=None):
    pi = torch.softmax(logits, dim=-1)
    actions = torch.multinomial(pi, n_samples, replacement=True)
    onehot = F.one_hot(actions, logits.shape[0]).to(logits.dtype)
    return (reward_per_action[actions, None] * (onehot - pi)).mean(dim=0)


def r02_mc_policy_gradient_autograd(logits, reward_per_action, n_samples, generator=None):
    actions = torch.multinomial(torch.softmax(logits, dim=-1), n_samples, replacement=True, generator=generator)
    with torch.enable_grad():
        x = logits.detach().clone().requires_grad_(True)
        objective = (reward_per_action[actions] * torch.log_softmax(x, -1)[actions]).mean()
        (gradient,) = torch.autograd.grad(objective, x)
    return gradient


# ---------------------------------------------------------------------------------------------------------------
# Chapter 03: baselines
# ---------------------------------------------------------------------------------------------------------------


def w03_compute_deltas_f_normalize(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return F.normalize(centred, dim=-1, eps=eps)


def w03_gradient_variance_cov_of_rows(grad_samples):
    return float(torch.cov(grad_samples).trace())


def r03_gradient_variance_cov_transposed(grad_samples):
    covariance = torch.atleast_2d(torch.cov(grad_samples.T, correction=1))  # (P, P)
    return float(covariance.diagonal().sum())


# ---------------------------------------------------------------------------------------------------------------
# Chapter 04: GAE
# ---------------------------------------------------------------------------------------------------------------


def w04_gae_table_lambda_only():
    deltas = [0.35, -0.6, 1.0, -0.55, 1.4]
    advantages = [0.51, 0.2, 1.0, 0.57, 1.4]
    return deltas, advantages


def w04_compute_gae_next_step_done(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    T = rewards.shape[-1]
    advantages = torch.zeros_like(rewards)
    last_gae = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(T)):
        if t == T - 1:
            next_non_terminal = 1.0 - d[..., -1]
            next_values = last_values
        else:
            next_non_terminal = 1.0 - d[..., t + 1]
            next_values = values[..., t + 1]
        delta = rewards[..., t] + gamma * next_values * next_non_terminal - values[..., t]
        last_gae = delta + gamma * lam * next_non_terminal * last_gae
        advantages[..., t] = last_gae
    return advantages, advantages + values


def r04_compute_gae_stack(rewards, values, dones, last_values, gamma, lam):
    not_done = 1.0 - dones.float()  # exact 0./1., whatever the flags' type
    next_values = torch.cat([values[..., 1:], last_values[..., None]], dim=-1)
    deltas = rewards + gamma * next_values * not_done - values
    running = torch.zeros_like(deltas[..., 0])
    backwards = []
    for t in range(rewards.shape[-1] - 1, -1, -1):
        running = deltas[..., t] + gamma * lam * running * not_done[..., t]
        backwards.append(running)
    advantages = torch.stack(backwards[::-1], dim=-1)
    return advantages, advantages + values


def w04_td_residuals_mask_whole_residual(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    not_done = 1.0 - dones.to(rewards.dtype)
    return (rewards + gamma * next_values - values) * not_done


# ---------------------------------------------------------------------------------------------------------------
# Chapter 05: PPO
# ---------------------------------------------------------------------------------------------------------------


def _surrogate_right(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    """A student's right clipped surrogate, used inside their PPOLoss."""
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    logp = torch.where(valid, logp, zero)
    logp_old = torch.where(valid, logp_old.detach(), zero)
    adv = torch.where(valid, adv.detach(), zero)
    ratio = torch.exp(logp - logp_old)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_element = -torch.minimum(ratio * adv, clipped * adv)
    n_valid = valid.sum().clamp(min=1)
    loss = torch.where(valid, per_element, zero).sum() / n_valid
    with torch.no_grad():
        low, above = ratio < 1.0 - clip_eps, ratio > 1.0 + high
        binding = (above & (adv > 0)) | (low & (adv < 0))
        n = n_valid.item()
        info = {
            "clip_fraction": ((low | above) & valid).sum().item() / n,
            "clip_active_fraction": (binding & valid).sum().item() / n,
            "approx_kl": torch.where(valid, (ratio - 1.0) - (logp - logp_old), zero).sum().item() / n,
        }
    return loss, info


def _value_right(values, returns, values_old=None, clip_eps=None, mask=None):
    """A student's right value loss, used inside their PPOLoss."""
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    values = torch.where(valid, values, zero)
    returns = torch.where(valid, returns.detach(), zero)
    squared_error = (values - returns) ** 2
    if clip_eps is not None:
        values_old = torch.where(valid, values_old.detach(), zero)
        values_clipped = values_old + torch.clamp(values - values_old, -clip_eps, clip_eps)
        squared_error = torch.maximum(squared_error, (values_clipped - returns) ** 2)
    return 0.5 * torch.where(valid, squared_error, zero).sum() / valid.sum().clamp(min=1)


def w05_clipped_surrogate_old_approx_kl(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    logp = torch.where(valid, logp, zero)
    logp_old = torch.where(valid, logp_old.detach(), zero)
    adv = torch.where(valid, adv.detach(), zero)
    log_ratio = logp - logp_old
    ratio = log_ratio.exp()
    pg_loss1 = -adv * ratio
    pg_loss2 = -adv * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_element = torch.max(pg_loss1, pg_loss2)
    n_valid = valid.sum().clamp(min=1)
    loss = torch.where(valid, per_element, zero).sum() / n_valid
    with torch.no_grad():
        outside = (ratio < 1.0 - clip_eps) | (ratio > 1.0 + high)
        binding = ((ratio > 1.0 + high) & (adv > 0)) | ((ratio < 1.0 - clip_eps) & (adv < 0))
        n = n_valid.item()
        info = {
            "clip_fraction": (outside & valid).sum().item() / n,
            "clip_active_fraction": (binding & valid).sum().item() / n,
            # CleanRL's approx_kl
            "approx_kl": torch.where(valid, -log_ratio, zero).sum().item() / n,
        }
    return loss, info


def w05_value_loss_clipped_only(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    values = torch.where(valid, values, zero)
    returns = torch.where(valid, returns.detach(), zero)
    if clip_eps is not None:
        values_old = torch.where(valid, values_old.detach(), zero)
        values = values_old + torch.clamp(values - values_old, -clip_eps, clip_eps)
    squared_error = (values - returns) ** 2
    return 0.5 * torch.where(valid, squared_error, zero).sum() / valid.sum().clamp(min=1)


def w05_value_loss_huber(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    values = torch.where(valid, values, zero)
    returns = torch.where(valid, returns.detach(), zero)
    error = F.smooth_l1_loss(values, returns, reduction="none")
    if clip_eps is not None:
        values_old = torch.where(valid, values_old.detach(), zero)
        values_clipped = values_old + torch.clamp(values - values_old, -clip_eps, clip_eps)
        error = torch.maximum(error, F.smooth_l1_loss(values_clipped, returns, reduction="none"))
    return torch.where(valid, error, zero).sum() / valid.sum().clamp(min=1)


def r05_value_loss_clamp_bounds(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(values)
    v = torch.where(valid, values, zero)
    target = torch.where(valid, returns.detach(), zero)
    error = (v - target) ** 2
    if clip_eps is not None:
        old = torch.where(valid, values_old.detach(), zero)
        v_clipped = torch.clamp(v, old - clip_eps, old + clip_eps)
        error = torch.max(error, (v_clipped - target) ** 2)
    return 0.5 * torch.where(valid, error, zero).sum() / valid.sum().clamp(min=1)


class W05PPOLossUnmaskedValue(nn.Module):
    def __init__(self, clip_epsilon: float = 0.2, value_loss_coef: float = 0.5, entropy_coef: float = 0.01):
        super().__init__()
        self.clip_epsilon = clip_epsilon
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef

    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = _surrogate_right(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask=mask
        )
        v_loss = _value_right(values, returns)
        valid = torch.ones_like(entropy, dtype=torch.bool) if mask is None else mask.bool()
        mean_entropy = torch.where(valid, entropy, torch.zeros_like(entropy)).sum() / valid.sum().clamp(min=1)
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * mean_entropy


# ---------------------------------------------------------------------------------------------------------------
# Chapter 06: GRPO
# ---------------------------------------------------------------------------------------------------------------


def w06_group_advantages_fixed_eps(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    adv = torch.where(all_equal, torch.zeros_like(adv), adv)
    if not normalize_std or rewards.shape[-1] == 1:
        return adv
    return adv / (rewards.std(dim=-1, keepdim=True) + 1e-6)


def r06_group_advantages_std_mean(rewards, normalize_std=True, eps=1e-6):
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)  # a group of one: nothing to compare with
    std, mean = torch.std_mean(rewards, dim=-1, keepdim=True)  # (B, 1) each, std Bessel-corrected
    same = rewards.amax(dim=-1, keepdim=True) == rewards.amin(dim=-1, keepdim=True)  # (B, 1)
    centred = torch.where(same, torch.zeros_like(rewards), rewards - mean)
    if normalize_std:
        return centred / (std + eps)
    return centred


def w06_kl_estimate_k2_no_half(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return log_r**2
    if kind == "k3":
        return torch.expm1(log_r) - log_r
    raise ValueError(f"kind: expected 'k1', 'k2' or 'k3', got {kind!r}")


def w06_aggregate_loss_skip_empty(per_token, mask, mode, max_len=None):
    valid = mask.bool()
    per_token = torch.where(valid, per_token, torch.zeros_like(per_token))
    lengths = valid.sum(dim=-1)  # (...)
    if mode == "token-mean":
        return per_token.sum() / lengths.sum().clamp(min=1)
    per_response = per_token.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        non_empty = lengths > 0
        return (per_response[non_empty] / lengths[non_empty]).mean()
    if mode == "seq-mean-token-sum-norm":
        L = per_token.shape[-1] if max_len is None else max_len
        return (per_response / L).mean()
    raise ValueError(f"mode: unknown {mode!r}")


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
    adv = adv.detach()
    adv_tokens = adv[..., None].expand_as(logp)  # (B, G, T)
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())
    clipped = ratio.clamp(1.0 - clip_eps, 1.0 + high)
    per_token = -torch.min(ratio * adv_tokens, clipped * adv_tokens)
    kl = None
    if logp_ref is not None:
        # the penalty is a number added to each token's loss
        kl = grpo.kl_estimate(logp.detach(), logp_ref.detach(), kl_kind)
        per_token = per_token + kl_coef * kl
    loss = grpo.aggregate_loss(per_token, mask, loss_agg, max_len)
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
    return loss, info


# ---------------------------------------------------------------------------------------------------------------
# Chapter 07: GRPO against PPO
# ---------------------------------------------------------------------------------------------------------------


def w07_memory_master_when_dtypes_differ(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    size = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}
    w, o = size[weights_dtype], size[optimizer_dtype]
    master = o if weights_dtype != optimizer_dtype else 0
    account = {
        "actor": 2 * w * n_params_actor,
        "critic": 2 * w * n_params_critic,
        "reference": w * n_params_ref,
        "reward": w * n_params_reward,
        "optimizer": (n_params_actor + n_params_critic) * (2 * o + master),
    }
    account["total"] = sum(account.values())
    return account


def w07_read_sweep_saturation_in_best_column(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, reward.shape[1])
    best = reward[i, j]
    # the best clip range's column: where does it come within tol?
    k = int((reward[:, j] >= best - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def r07_read_sweep_numpy(group_sizes, clip_eps, reward, tol=0.1):
    table = reward.detach().cpu().numpy()
    i, j = np.unravel_index(int(np.argmax(table)), table.shape)
    best_per_row = table.max(axis=1)
    k = int(np.flatnonzero(best_per_row >= table.max() - tol)[0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


# ---------------------------------------------------------------------------------------------------------------
# Chapter 08: the capstone
# ---------------------------------------------------------------------------------------------------------------


def w08_addition_reward_no_eos_required(completion, answer):
    return float(completion.split("$")[0] == answer)


def w08_completion_mask_inclusive_count(completion_ids, eos_id):
    eos_so_far = torch.cumsum((completion_ids == eos_id).long(), dim=-1)  # EOS up to and including t
    return (eos_so_far <= 1).float()


def _completion_mask_right(completion_ids, eos_id):
    """A student's right completion mask, used inside their grpo_step."""
    is_eos = (completion_ids == eos_id).long()
    return ((torch.cumsum(is_eos, dim=-1) - is_eos) == 0).float()


def w08_grpo_step_clip_after_step(
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
        return rearrange(gather_log_probs(logits, flat), "(B G) L -> B G L", G=G)

    logp = logp_of(policy)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = logp_of(ref_model)
    mask = _completion_mask_right(completions, eos_id)
    loss, _ = grpo.grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    return loss.item()


def r08_grpo_step_plain_torch(
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
    flat = completions.flatten(0, 1)  # (B*G, L): row b*G + g is completions[b, g]
    ids = torch.cat([prompts.repeat_interleave(G, dim=0), flat[:, :-1]], dim=1)  # (B*G, P + L - 1)

    def completion_logps(model):
        logits = model(ids)[:, P - 1 :]  # (B*G, L, V)
        logp_all = torch.log_softmax(logits, dim=-1)
        picked = logp_all.gather(-1, flat.long().unsqueeze(-1)).squeeze(-1)  # (B*G, L)
        return picked.reshape(B, G, L)

    logp = completion_logps(policy)
    logp_ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = completion_logps(ref_model)
    mask = _completion_mask_right(completions, eos_id)
    loss, _ = grpo.grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return float(loss.detach())


# ---------------------------------------------------------------------------------------------------------------
# Chapter 09: TRL
# ---------------------------------------------------------------------------------------------------------------


def w09_answer_reward_joins_messages(prompts, completions, answer, **kwargs):
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


def w09_completion_logps_temperature_after(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    is_eos = (completion_ids == eos_id).long()
    mask = ((torch.cumsum(is_eos, dim=-1) - is_eos) == 0).float()
    attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids).logits
    logits = logits[:, P - 1 : -1].float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, completion_ids[..., None]).squeeze(-1)
    return logp / temperature, mask


def w09_completion_logps_positions_from_one(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    is_eos = (completion_ids == eos_id).long()
    mask = ((torch.cumsum(is_eos, dim=-1) - is_eos) == 0).float()
    attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    position_ids = attention_mask.cumsum(-1)
    logits = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids).logits
    logits = logits[:, P - 1 : -1].float() / temperature
    logp = torch.log_softmax(logits, dim=-1).gather(-1, completion_ids[..., None]).squeeze(-1)
    return logp, mask


def r09_completion_logps_drop_last_input(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]  # (B, L)
    eos_before = torch.cumsum((completion_ids == eos_id).int(), dim=-1) - (completion_ids == eos_id).int()
    mask = (eos_before == 0).to(torch.float32)
    attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    # nothing is predicted after the last token: leave it out of the forward pass
    out = model(input_ids=sequences[:, :-1], attention_mask=attention_mask[:, :-1], position_ids=position_ids[:, :-1])
    logits = out.logits[:, P - 1 :].float() / temperature  # (B, L, V)
    return gather_log_probs(logits, completion_ids), mask


def w09_grpo_config_ignores_processes(cfg, num_processes=1):
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
    B, G, K, M = cfg.prompts_per_step, cfg.group_size, cfg.update_epochs, cfg.num_minibatches
    minibatch = B * G // M
    micro = cfg.micro_batch_size or minibatch
    if B * G % M or minibatch % micro:
        raise ValueError(f"cfg: {B * G} completions do not split into {M} minibatches of micro-batches of {micro}")
    accumulation = minibatch // micro
    steps_per_round = K * M
    schedule = cfg.lr_schedule
    if schedule == "constant" and cfg.warmup_iterations > 0:
        schedule = "constant_with_warmup"
    loss_types = {"seq-mean-token-mean": "grpo", "token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}
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
        "epsilon_high": cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high,
        "loss_type": loss_types[cfg.loss_agg],
        "scale_rewards": "group" if cfg.normalize_std else "none",
        "mask_truncated_completions": cfg.overlong_filter,
        "seed": cfg.seed,
    }


# ---------------------------------------------------------------------------------------------------------------
# Chapter 10: reasoning length
# ---------------------------------------------------------------------------------------------------------------


def w10_pass_at_k_product_shifted(n, c, k):
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x, dtype=torch.float64) for x in (n, c, k)))
    j = torch.arange(int(c.max()), dtype=torch.float64)
    i = (n - c)[..., None] + j  # i = n - c, ..., n - 1
    factors = torch.where(j < c[..., None], 1 - k[..., None] / i, torch.ones((), dtype=torch.float64))
    estimate = 1 - factors.prod(dim=-1)
    return torch.where(n - c < k, (c > 0).double(), estimate)


def r10_pass_at_k_exact_binomials(n, c, k):
    n_b, c_b, k_b = torch.broadcast_tensors(torch.as_tensor(n), torch.as_tensor(c), torch.as_tensor(k))
    values = []
    for n_i, c_i, k_i in zip(n_b.flatten().tolist(), c_b.flatten().tolist(), k_b.flatten().tolist()):
        n_i, c_i, k_i = int(n_i), int(c_i), int(k_i)
        if n_i - c_i < k_i:
            values.append(1.0 if c_i > 0 else 0.0)
        else:
            # Python's int / int is correctly rounded, however large the binomials
            values.append(1.0 - math.comb(n_i - c_i, k_i) / math.comb(n_i, k_i))
    return torch.tensor(values, dtype=torch.float64).reshape(n_b.shape)


def w10_token_weight_max_len_from_shape(length, mode, max_len=None):
    o = length.to(length.dtype if length.is_floating_point() else torch.get_default_dtype())
    N = o.numel()
    if max_len is None:
        max_len = length.shape[-1]  # the padded T
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
    if re.fullmatch(r"\[\.+\][0-9]+", body):
        return "filler"
    totals = ",".join(["[0-9]{1,2}"] * n_digits)
    if re.fullmatch(r"\[" + totals + r"\][0-9]+", body):
        return "scratchpad"
    return "malformed"


def w10_style_share_empty_is_zero(labels, style):
    flat = np.asarray(labels).reshape(-1)
    if flat.size == 0:
        return 0.0
    return float((flat == style).mean())


def r10_style_share_recursive(labels, style):
    def flatten(x):
        if isinstance(x, np.ndarray):
            return [str(v) for v in x.reshape(-1).tolist()]
        if isinstance(x, (list, tuple)):
            out = []
            for item in x:
                out.extend(flatten(item))
            return out
        return [x]

    flat = flatten(labels)
    if not flat:
        raise ValueError("labels: empty, so there is no share")
    return sum(1 for label in flat if label == style) / len(flat)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 11: the GRPO family
# ---------------------------------------------------------------------------------------------------------------


def w11_rloo_scaled_centred_no_guard(rewards):
    G = rewards.shape[-1]
    return G / (G - 1) * (rewards - rewards.mean(dim=-1, keepdim=True))


def r11_rloo_scaled_centred(rewards):
    G = rewards.shape[-1]
    if G < 2:
        return torch.zeros_like(rewards)
    return G / (G - 1) * (rewards - rewards.mean(dim=-1, keepdim=True))


def w11_gspo_log_of_mean_ratio(logp, logp_old, mask):
    valid = mask.bool()
    token_ratio = torch.exp(torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp)))
    count = valid.sum(dim=-1)
    mean_ratio = torch.where(valid, token_ratio, torch.zeros_like(token_ratio)).sum(dim=-1) / count.clamp(min=1)
    mean_ratio = torch.where(count > 0, mean_ratio, torch.ones_like(mean_ratio))
    return torch.log(mean_ratio)


def w11_cispo_trl_cap(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    low = None if clip_eps is None else 1.0 - clip_eps
    weight = torch.clamp(ratio, min=low, max=clip_eps_high).detach()  # TRL: epsilon_high is the cap
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
        w00_discounted_return_cumprod,
        "Builds the discounts with cumprod of gamma, so they run gamma^1 .. gamma^T instead of gamma^0 .. gamma^(T-1).",
    ),
    _row("discounted_return", "00", r00_discounted_return_horner),
    _row(
        "reward_to_go",
        "00",
        w00_reward_to_go_divide_by_discount,
        "Computes sum_k gamma^k r_k from the end and divides by gamma^t, which is 0 for t >= 1 when gamma = 0 (0/0).",
    ),
    _row("reward_to_go", "00", r00_reward_to_go_matrix),
    # 01
    _row(
        "sort_inclusion_ordering_reward",
        "01",
        w01_sort_reward_isin,
        "Uses torch.isin(prompt, response), which tests against every response token of the whole batch, "
        "not only the same row's.",
    ),
    _row("sort_inclusion_ordering_reward", "01", r01_sort_reward_sets),
    _row(
        "math_answer_reward",
        "01",
        w01_math_reward_cut_at_first_dot,
        "Ends a stated answer at the first '.', so a decimal answer such as 2.50 is cut to 2.",
    ),
    _row("math_answer_reward", "01", r01_math_reward_decimal),
    # 02
    _row(
        "gather_log_probs",
        "02",
        w02_gather_log_probs_squeeze_all,
        "Calls .squeeze() with no dimension, so a size-1 token or batch axis is dropped from the result's shape.",
    ),
    _row("gather_log_probs", "02", r02_gather_log_probs_logsumexp),
    _row(
        "reinforce_loss",
        "02",
        w02_reinforce_loss_index_with_mask,
        "Selects with per_token[mask] on the mask as given: a 0/1 integer mask then indexes rows 0 and 1 "
        "(a float mask raises), instead of selecting the valid tokens.",
    ),
    _row("reinforce_loss", "02", r02_reinforce_loss_select),
    _row(
        "mc_policy_gradient",
        "02",
        w02_mc_policy_gradient_global_rng,
        "Ignores the generator argument and samples from the global RNG.",
    ),
    _row("mc_policy_gradient", "02", r02_mc_policy_gradient_autograd),
    # 03
    _row(
        "compute_deltas",
        "03",
        w03_compute_deltas_f_normalize,
        "In the normalised mode divides by the group's L2 norm (F.normalize) instead of its std + eps.",
    ),
    _row(
        "gradient_variance",
        "03",
        w03_gradient_variance_cov_of_rows,
        "Calls torch.cov on the [N, P] samples as they are, which treats rows as variables: it returns the "
        "variances of the samples across coordinates.",
    ),
    _row("gradient_variance", "03", r03_gradient_variance_cov_transposed),
    # 04
    _row(
        "gae_table",
        "04",
        w04_gae_table_lambda_only,
        "Computed the advantages by hand with lambda alone as the recursion's factor instead of gamma * lambda "
        "(the deltas are right).",
    ),
    _row(
        "compute_gae",
        "04",
        w04_compute_gae_next_step_done,
        "Copied CleanRL's loop, which reads the done flag of step t + 1 (a flag that the next step starts an "
        "episode), so each termination cuts the bootstrap and the recursion one step early.",
    ),
    _row("compute_gae", "04", r04_compute_gae_stack),
    _row(
        "td_residuals",
        "04",
        w04_td_residuals_mask_whole_residual,
        "Multiplies the whole residual r + gamma V' - V by (1 - done), zeroing a terminal step's residual "
        "instead of dropping only its bootstrap.",
    ),
    # 05
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_clipped_surrogate_old_approx_kl,
        "Reports approx_kl as the mean of -log r (CleanRL's old_approx_kl) instead of (r - 1) - log r.",
    ),
    _row(
        "value_loss",
        "05",
        w05_value_loss_clipped_only,
        "With clip_eps uses only the clipped value's error (Stable-Baselines3's clip_range_vf) instead of the max "
        "of the clipped and unclipped errors.",
    ),
    _row(
        "value_loss",
        "05",
        w05_value_loss_huber,
        "Uses F.smooth_l1_loss (Huber), which equals 0.5 (V - R)^2 only where |V - R| < 1.",
    ),
    _row("value_loss", "05", r05_value_loss_clamp_bounds),
    _row(
        "PPOLoss",
        "05",
        W05PPOLossUnmaskedValue,
        "Does not pass the mask to the value loss, so padding counts in the value term.",
    ),
    # 06
    _row(
        "group_advantages",
        "06",
        w06_group_advantages_fixed_eps,
        "Adds a fixed 1e-6 to the std and ignores the eps argument.",
    ),
    _row("group_advantages", "06", r06_group_advantages_std_mean),
    _row(
        "kl_estimate",
        "06",
        w06_kl_estimate_k2_no_half,
        "Writes k2 as (log r)^2 without the factor 1/2.",
    ),
    _row(
        "aggregate_loss",
        "06",
        w06_aggregate_loss_skip_empty,
        "In seq-mean-token-mean leaves empty responses out of the mean over responses instead of counting them as 0.",
    ),
    _row(
        "grpo_loss",
        "06",
        w06_grpo_loss_kl_on_detached_logp,
        "Computes the KL penalty on logp.detach(), so the penalty adds to the loss but sends no gradient.",
    ),
    # 07
    _row(
        "memory_accounting",
        "07",
        w07_memory_master_when_dtypes_differ,
        "Adds the master copy whenever the weights' and optimizer's dtypes differ, also when the weights are wider "
        "(fp64 weights with fp32 Adam).",
    ),
    _row(
        "read_sweep",
        "07",
        w07_read_sweep_saturation_in_best_column,
        "Finds saturation in the best configuration's clip-range column only, instead of each group size's best "
        "over all clip ranges.",
    ),
    _row("read_sweep", "07", r07_read_sweep_numpy),
    # 08
    _row(
        "addition_exact_reward",
        "08",
        w08_addition_reward_no_eos_required,
        "Compares the text before the first '$' without requiring a '$', so a completion that never stopped "
        "('132') is paid.",
    ),
    _row(
        "completion_mask",
        "08",
        w08_completion_mask_inclusive_count,
        "Keeps every token whose inclusive EOS count is <= 1, so the tokens after the first EOS are kept up to a "
        "second EOS.",
    ),
    _row(
        "grpo_step",
        "08",
        w08_grpo_step_clip_after_step,
        "Clips the gradient norm after optimizer.step(), so the update uses the unclipped gradients.",
    ),
    _row("grpo_step", "08", r08_grpo_step_plain_torch),
    # 09
    _row(
        "answer_reward",
        "09",
        w09_answer_reward_joins_messages,
        "Joins the content of every message of a conversational completion instead of reading the last message.",
    ),
    _row(
        "completion_logps",
        "09",
        w09_completion_logps_temperature_after,
        "Divides the log-probs by the temperature after log_softmax instead of dividing the logits before it.",
    ),
    _row(
        "completion_logps",
        "09",
        w09_completion_logps_positions_from_one,
        "Numbers the positions from 1 (attention_mask.cumsum(-1) without the - 1 and the clamp).",
    ),
    _row("completion_logps", "09", r09_completion_logps_drop_last_input),
    _row(
        "grpo_config_kwargs",
        "09",
        w09_grpo_config_ignores_processes,
        "Ignores num_processes: per_device_train_batch_size is a whole minibatch, not one process's share.",
    ),
    # 10
    _row(
        "pass_at_k",
        "10",
        w10_pass_at_k_product_shifted,
        "Takes the product over i = n - c .. n - 1 instead of n - c + 1 .. n (off by one).",
    ),
    _row("pass_at_k", "10", r10_pass_at_k_exact_binomials),
    _row(
        "aggregation_token_weight",
        "10",
        w10_token_weight_max_len_from_shape,
        "With max_len=None uses length.shape[-1] (the number of responses on the last axis) instead of the "
        "longest length.",
    ),
    _row(
        "completion_style",
        "10",
        w10_completion_style_two_digit_totals,
        "Accepts any one- or two-digit total in a scratchpad (20 to 99, and leading zeros such as 05).",
    ),
    _row(
        "style_share",
        "10",
        w10_style_share_empty_is_zero,
        "Returns 0.0 for an empty list of labels instead of raising ValueError.",
    ),
    _row("style_share", "10", r10_style_share_recursive),
    # 11
    _row(
        "rloo_advantages",
        "11",
        w11_rloo_scaled_centred_no_guard,
        "Uses G / (G - 1) * (r - mean) with no case for G = 1, where G / (G - 1) divides by zero (ZeroDivisionError).",
    ),
    _row("rloo_advantages", "11", r11_rloo_scaled_centred),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w11_gspo_log_of_mean_ratio,
        "Takes the log of the arithmetic mean of the token ratios instead of the mean of the token log ratios.",
    ),
    _row(
        "cispo_loss",
        "11",
        w11_cispo_trl_cap,
        "Caps the weight at clip_eps_high itself (TRL's epsilon_high convention) instead of 1 + clip_eps_high.",
    ),
]
