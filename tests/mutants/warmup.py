"""Classic wrong (and correct) ways to write the warm-up exercises of chapter 00.

``discounted_return(rewards[..., T], gamma) -> [...]`` and
``reward_to_go(rewards[..., T], gamma) -> [..., T]``, checked by
``course_lib.checks.warmup.check_discounted_return`` and ``check_reward_to_go``.
"""

import math

import torch

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
