"""Classic wrong (and correct) ways to write the warm-up exercises of chapter 00.

``discounted_return(rewards[..., T], gamma) -> [...]`` and
``reward_to_go(rewards[..., T], gamma) -> [..., T]``, checked by
``course_lib.checks.warmup.check_discounted_return`` and ``check_reward_to_go``.
"""

import math

import torch
from catalogue_round7_00_04 import (
    r00_return_horner_backwards,
    r00_rtg_cumsum_scaled,
    w00_return_einsum_wrong_axis,
    w00_return_exp_log_gamma,
    w00_return_gamma_squared,
    w00_return_gamma_times_t,
    w00_return_keepdim,
    w00_return_last_step_value,
    w00_return_numpy,
    w00_return_one_minus_gamma,
    w00_return_python_loop_list,
    w00_return_reversed_weights_loop,
    w00_return_skips_first_reward,
    w00_return_skips_last_reward,
    w00_return_slice_skip,
    w00_return_sum_everything,
    w00_rtg_abs_gap,
    w00_rtg_cumsum_times_discount,
    w00_rtg_discount_cumprod_wrong,
    w00_rtg_flip_cumsum_not_flipped_back,
    w00_rtg_float32_buffer,
    w00_rtg_gamma_power_t_only,
    w00_rtg_in_place_then_clone,
    w00_rtg_last_never_written,
    w00_rtg_loop_starts_one_early,
    w00_rtg_mean_not_sum,
    w00_rtg_normalised,
    w00_rtg_one_minus_gamma,
    w00_rtg_stack_time_first,
    w00_rtg_strict_triangle,
    w00_rtg_zero_at_t0,
)

# ---------------------------------------------------------------------------
# discounted_return: wrong
# ---------------------------------------------------------------------------


def return_discounts_first_reward(rewards, gamma):
    t = torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return (rewards * gamma ** (t + 1)).sum(-1)


def return_undiscounted(rewards, gamma):
    return rewards.sum(-1)


def return_discount_backwards(rewards, gamma):
    T = rewards.shape[-1]
    t = torch.arange(T, dtype=rewards.dtype)
    return (rewards * gamma ** (T - 1 - t)).sum(-1)


def return_reward_to_go_everywhere(rewards, gamma):
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out


def return_mean_not_sum(rewards, gamma):
    t = torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return (rewards * gamma**t).mean(-1)


def return_sum_over_first_axis(rewards, gamma):
    t = torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return (rewards * gamma**t).sum(0)


def return_forward_loop_bug(rewards, gamma):
    # A forward loop that discounts the running total instead of the new reward:
    # G <- gamma * G + r_t gives gamma^(T-1-t) weights, the backwards discount.
    G = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1]):
        G = gamma * G + rewards[..., t]
    return G


def return_in_place(rewards, gamma):
    for t in range(rewards.shape[-1]):
        rewards[..., t] *= gamma**t
    return rewards.sum(-1)


def return_python_float(rewards, gamma):
    # Loses the batch: one float for everything.
    t = torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return float((rewards * gamma**t).sum())


# ---------------------------------------------------------------------------
# discounted_return: correct variants
# ---------------------------------------------------------------------------


def return_loop(rewards, gamma):
    G = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1]):
        G = G + gamma**t * rewards[..., t]
    return G


def return_vectorised(rewards, gamma):
    discounts = torch.tensor(float(gamma), dtype=rewards.dtype) ** torch.arange(rewards.shape[-1])
    return rewards @ discounts


def return_backward_recursion(rewards, gamma):
    G = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        G = rewards[..., t] + gamma * G
    return G


def return_float32_inside(rewards, gamma):
    t = torch.arange(rewards.shape[-1], dtype=torch.float32)
    weights = torch.tensor(gamma, dtype=torch.float32) ** t
    return (rewards.float() * weights).sum(-1).to(rewards.dtype)


def return_math_pow(rewards, gamma):
    weights = torch.tensor([math.pow(gamma, t) for t in range(rewards.shape[-1])], dtype=rewards.dtype)
    return torch.einsum("...t,t->...", rewards, weights)


# ---------------------------------------------------------------------------
# reward_to_go: wrong
# ---------------------------------------------------------------------------


def rtg_discount_from_start(rewards, gamma):
    T = rewards.shape[-1]
    weights = gamma ** torch.arange(T, dtype=rewards.dtype)
    return (rewards * weights).flip(-1).cumsum(-1).flip(-1)


def rtg_discounts_own_reward(rewards, gamma):
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = gamma * (rewards[..., t] + running)
        out[..., t] = running
    return out


def rtg_undiscounted(rewards, gamma):
    return rewards.flip(-1).cumsum(-1).flip(-1)


def rtg_forward(rewards, gamma):
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1]):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out


def rtg_total_only(rewards, gamma):
    t = torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return (rewards * gamma**t).sum(-1)


def rtg_shifted(rewards, gamma):
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        out[..., t] = running  # stored before adding r_t: G_{t+1} at t
        running = rewards[..., t] + gamma * running
    return out


def rtg_cumsum_not_reversed(rewards, gamma):
    return rewards.cumsum(-1)


# ---------------------------------------------------------------------------
# reward_to_go: correct variants
# ---------------------------------------------------------------------------


def rtg_loop(rewards, gamma):
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out


def rtg_matrix(rewards, gamma):
    # W[t, k] = gamma^(k - t) above the diagonal: one matrix product for every step.
    T = rewards.shape[-1]
    t = torch.arange(T, dtype=rewards.dtype)
    gap = t[None, :] - t[:, None]  # (T, T): k - t
    W = torch.where(gap >= 0, gamma ** gap.clamp(min=0), torch.zeros((), dtype=rewards.dtype))
    return rewards @ W.T


def rtg_double_loop(rewards, gamma):
    T = rewards.shape[-1]
    cols = []
    for t in range(T):
        total = torch.zeros_like(rewards[..., 0])
        for k in range(t, T):
            total = total + gamma ** (k - t) * rewards[..., k]
        cols.append(total)
    return torch.stack(cols, dim=-1)


MUTANTS = [
    ("discounted_return", return_discounts_first_reward, "gamma ** t with t starting at 0"),
    ("discounted_return", return_undiscounted, "without discounting"),
    ("discounted_return", return_discount_backwards, "backwards"),
    ("discounted_return", return_reward_to_go_everywhere, "one number per episode"),
    ("discounted_return", return_mean_not_sum, "mean"),
    ("discounted_return", return_sum_over_first_axis, "wrong axis"),
    ("discounted_return", return_forward_loop_bug, "backwards"),
    ("discounted_return", return_in_place, "in place"),
    ("discounted_return", return_python_float, None),
    ("reward_to_go", rtg_discount_from_start, "gamma ** (k - t)"),
    ("reward_to_go", rtg_discounts_own_reward, "r_t itself is discounted"),
    ("reward_to_go", rtg_undiscounted, "without discounting"),
    ("reward_to_go", rtg_forward, "backwards"),
    ("reward_to_go", rtg_total_only, "one number per episode"),
    ("reward_to_go", rtg_shifted, "shifted by one step"),
    ("reward_to_go", rtg_cumsum_not_reversed, "cumsum"),
]

VARIANTS = [
    ("discounted_return", return_loop),
    ("discounted_return", return_vectorised),
    ("discounted_return", return_backward_recursion),
    ("discounted_return", return_float32_inside),
    ("discounted_return", return_math_pow),
    ("reward_to_go", rtg_loop),
    ("reward_to_go", rtg_matrix),
    ("reward_to_go", rtg_double_loop),
]


# Round seven of issue 44 (chapters 00 to 04): the wrong answers of tests/catalogue_round7_00_04.py, each
# named by the mistake it makes, and its right variants.
MUTANTS += [
    ("discounted_return", w00_return_exp_log_gamma, "gamma ** t written as exp(t * log(gamma))"),
    ("discounted_return", w00_return_skips_first_reward, "the first reward r_0 is left out (a loop"),
    ("discounted_return", w00_return_skips_last_reward, "the last reward r_{T-1} is left out (a loop"),
    ("discounted_return", w00_return_gamma_times_t, "you weighted r_t by gamma * t; the discount"),
    ("discounted_return", w00_return_one_minus_gamma, "your return is multiplied by (1 - gamma) (a"),
    ("discounted_return", w00_return_keepdim, "you kept the time axis as an axis of 1"),
    ("discounted_return", w00_return_sum_everything, "you summed over every axis, so a batch of"),
    ("discounted_return", w00_return_last_step_value, "you returned the reward-to-go of the last"),
    ("discounted_return", w00_return_numpy, "torch.from_numpy takes an array"),
    ("reward_to_go", w00_rtg_flip_cumsum_not_flipped_back, "you flipped the rewards and accumulated them"),
    ("reward_to_go", w00_rtg_abs_gap, "your weights count the past too (gamma ** |k"),
    ("reward_to_go", w00_rtg_strict_triangle, "r_t itself is left out: your G_t is gamma *"),
    ("reward_to_go", w00_rtg_last_never_written, "G_{T-1} is never written (it stays 0): a"),
    ("reward_to_go", w00_rtg_loop_starts_one_early, "r_{T-1} never enters: your backward loop"),
    ("reward_to_go", w00_rtg_stack_time_first, "time is on the first axis of your output:"),
    ("reward_to_go", w00_rtg_normalised, "you normalised the returns (minus their"),
    ("reward_to_go", w00_rtg_float32_buffer, "output is a float32 tensor; the exercise"),
    ("reward_to_go", w00_rtg_gamma_power_t_only, "G_{t+1} is multiplied by gamma ** (t + 1);"),
]

VARIANTS += [
    ("discounted_return", r00_return_horner_backwards),
    ("reward_to_go", r00_rtg_cumsum_scaled),
]

# Wave two of round seven, written after the fixes for wave one.
MUTANTS += [
    ("discounted_return", w00_return_gamma_squared, "your discount per step is gamma ** 2 (gamma"),
    ("discounted_return", w00_return_slice_skip, "you dropped r_0 and discounted from r_1 on"),
    ("reward_to_go", w00_rtg_one_minus_gamma, "your discount per step is 1 - gamma; gamma"),
    ("reward_to_go", w00_rtg_in_place_then_clone, "changed its input `rewards` in place"),
]

# Wave three of round seven, written after the fixes for wave two.
MUTANTS += [
    ("discounted_return", w00_return_reversed_weights_loop, "your weights are gamma ** (T - t):"),
    ("discounted_return", w00_return_python_loop_list, "float32 tensor; the exercise asks for a float64"),
    ("reward_to_go", w00_rtg_discount_cumprod_wrong, "r_t itself is discounted: G_t = r_t + gamma"),
    ("reward_to_go", w00_rtg_mean_not_sum, "you averaged the discounted rewards from"),
]

# Wave four of round seven, written after the fixes for wave three.
MUTANTS += [
    ("discounted_return", w00_return_einsum_wrong_axis, "your discount runs backwards (gamma **"),
    ("reward_to_go", w00_rtg_cumsum_times_discount, "you multiplied the discounted cumsum by"),
    ("reward_to_go", w00_rtg_zero_at_t0, "G_0 is r_0 alone: your loop stops at t"),
]
