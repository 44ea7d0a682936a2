"""Exercise checks of chapter 00 (warm-up): the discounted return and the reward-to-go.

The checks import the reference implementations of ``course_lib.lectures.warmup``; the maths module never
imports its checks, so the file a student opens is the maths alone.
"""

from __future__ import annotations

import math

import torch

from course_lib.checks import Case, Mistake, check_against_reference
from course_lib.lectures.warmup import discounted_return, reward_to_go


def _cases() -> list[Case]:
    """The same grid for both exercises: every case names what it tests."""
    g = torch.Generator().manual_seed(0)

    def rewards(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    return [
        Case("one episode of 5 steps, gamma = 0.9", {"rewards": rewards(5), "gamma": 0.9}),
        Case(
            "a batch of 2 x 3 episodes of 4 steps (shape (2, 3, 4)), gamma = 0.8",
            {"rewards": rewards(2, 3, 4), "gamma": 0.8},
        ),
        Case("gamma = 0: only the first reward counts (0 ** 0 is 1)", {"rewards": rewards(3, 6), "gamma": 0.0}),
        Case("gamma = 1: no discount at all", {"rewards": rewards(3, 6), "gamma": 1.0}),
        Case("episodes of a single step (T = 1)", {"rewards": rewards(4, 1), "gamma": 0.9}),
        Case(
            "a sparse reward: 0 everywhere except +1 at the last of 10 steps, gamma = 0.5",
            {
                "rewards": torch.cat([torch.zeros(9, dtype=torch.float64), torch.ones(1, dtype=torch.float64)]),
                "gamma": 0.5,
            },
        ),
    ]


def _weighted_sum(rewards, gamma, exponents):
    """sum_t gamma^exponents[t] * r_t: the shape of every discount mistake."""
    return (rewards * gamma ** exponents.to(rewards.dtype)).sum(dim=-1)


def _steps(rewards):
    return torch.arange(rewards.shape[-1], dtype=rewards.dtype)


_RETURN_MISTAKES = [
    Mistake(
        "the first reward is discounted too: use gamma ** t with t starting at 0, not gamma ** (t + 1)",
        lambda rewards, gamma: _weighted_sum(rewards, gamma, _steps(rewards) + 1),
    ),
    Mistake(
        "you summed the rewards without discounting them: weight r_t by gamma ** t",
        lambda rewards, gamma: rewards.sum(dim=-1),
    ),
    Mistake(
        "your discount runs backwards (gamma ** (T - 1 - t)): the *first* reward gets weight 1, later ones less",
        lambda rewards, gamma: _weighted_sum(rewards, gamma, _steps(rewards).flip(0)),
    ),
    Mistake(
        "you returned the reward-to-go of every step; the exercise asks for one number per episode, "
        "the return from step 0 (keep only [..., 0], or sum without keeping the time axis)",
        lambda rewards, gamma: reward_to_go(rewards, gamma),
    ),
    Mistake(
        "you took the mean over time; the return is the discounted *sum*: use .sum(dim=-1)",
        lambda rewards, gamma: (rewards * gamma ** _steps(rewards)).mean(dim=-1),
    ),
    Mistake(
        "you summed over the wrong axis: time is the last one, use .sum(dim=-1)",
        lambda rewards, gamma: (rewards * gamma ** _steps(rewards)).sum(dim=0),
    ),
]


def _return_exp_log(rewards, gamma):
    """gamma ** t written as exp(t * log(gamma)): at gamma = 0, 0 * log(0) = 0 * -inf = NaN at t = 0."""
    log_gamma = math.log(gamma) if gamma > 0 else -math.inf
    return (rewards * torch.exp(_steps(rewards) * log_gamma)).sum(dim=-1)


def _return_without(rewards, gamma, step):
    """The discounted return with the reward of one step left out (a loop's range one short at one end)."""
    weights = gamma ** _steps(rewards)
    weights[step] = 0.0
    return (rewards * weights).sum(dim=-1)


_RETURN_MISTAKES += [
    Mistake(
        "your weights are gamma ** (T - t): backwards, and one power too many; r_t's weight is gamma ** t "
        "(the first reward gets weight 1)",
        lambda rewards, gamma: _weighted_sum(rewards, gamma, _steps(rewards).flip(0) + 1),
    ),
    Mistake(
        "your discount per step is gamma ** 2 (gamma applied twice): r_t's weight is gamma ** t",
        lambda rewards, gamma: discounted_return(rewards, gamma**2),
    ),
    Mistake(
        "your discount per step is 1 - gamma; gamma itself is the discount: r_t's weight is gamma ** t",
        lambda rewards, gamma: discounted_return(rewards, 1 - gamma),
    ),
    Mistake(
        "you dropped r_0 and discounted from r_1 on (rewards[..., 1:] weighted from gamma ** 0): that is the return "
        "from step 1, G_1; the return starts at step 0 with r_0",
        lambda rewards, gamma: torch.cat([reward_to_go(rewards, gamma), torch.zeros_like(rewards[..., :1])], -1)[
            ..., 1
        ],
    ),
    Mistake(
        "gamma ** t written as exp(t * log(gamma)) gives NaN at gamma = 0 (log(0) = -inf, and 0 * -inf is NaN at "
        "t = 0): use gamma ** t, where 0 ** 0 is 1",
        _return_exp_log,
    ),
    Mistake(
        "the first reward r_0 is left out (a loop that starts at t = 1): range(T) starts at 0, and r_0's weight "
        "is gamma ** 0 = 1",
        lambda rewards, gamma: _return_without(rewards, gamma, 0),
    ),
    Mistake(
        "the last reward r_{T-1} is left out (a loop over range(T - 1), or a slice [..., :-1]): sum every step, "
        "t = 0 to T - 1",
        lambda rewards, gamma: _return_without(rewards, gamma, -1),
    ),
    Mistake(
        "you weighted r_t by gamma * t; the discount is a power, gamma ** t",
        lambda rewards, gamma: (rewards * (gamma * _steps(rewards))).sum(dim=-1),
    ),
    Mistake(
        "your return is multiplied by (1 - gamma) (a normalised return some texts use); the exercise asks for "
        "the plain discounted sum, sum_t gamma ** t * r_t",
        lambda rewards, gamma: (1 - gamma) * discounted_return(rewards, gamma),
    ),
    Mistake(
        "you kept the time axis as an axis of 1 (keepdim=True): the return has shape [...], one number per "
        "episode; sum with .sum(dim=-1)",
        lambda rewards, gamma: discounted_return(rewards, gamma)[..., None],
    ),
    Mistake(
        "you summed over every axis, so a batch of episodes gives one number: sum over time only, .sum(dim=-1)",
        lambda rewards, gamma: discounted_return(rewards, gamma).sum(),
    ),
    Mistake(
        "you returned the reward-to-go of the last step, G_{T-1} = r_{T-1}; the return is the one from step 0, "
        "G_0 (index [..., 0] of the reward-to-go, not [..., -1])",
        lambda rewards, gamma: rewards[..., -1].clone(),
    ),
]


def check_discounted_return(fn) -> bool:
    """Check a student's ``discounted_return(rewards, gamma)``."""
    return check_against_reference(
        fn, discounted_return, _cases(), name="discounted_return", mistakes=_RETURN_MISTAKES, check_dtype=True
    )


def _suffix_weights(T, gamma, dtype, exponent):
    """W[t, k] = gamma ** exponent(t, k) for k >= t, else 0: row t of a reward-to-go as weights."""
    t = torch.arange(T, dtype=dtype)
    k_minus_t = t[None, :] - t[:, None]  # (T, T)
    return torch.where(k_minus_t >= 0, gamma ** exponent(t[:, None], t[None, :]), torch.zeros((), dtype=dtype))


def _rtg_mistake(exponent):
    def wrong(rewards, gamma):
        W = _suffix_weights(rewards.shape[-1], gamma, rewards.dtype, exponent)  # (T, T)
        return rewards @ W.T  # (..., T)

    return wrong


def _rtg_last_twice(rewards, gamma):
    """The running sum started from the last reward, then the loop adds it again at t = T - 1."""
    last = torch.zeros_like(rewards)
    last[..., -1] = rewards[..., -1]
    return reward_to_go(rewards, gamma) + gamma * reward_to_go(last, gamma)


def _rtg_divided_by_powers(rewards, gamma):
    """A discounted cumsum from the end, then divided by gamma ** t: 0 / 0 when gamma = 0."""
    powers = gamma ** torch.arange(rewards.shape[-1], dtype=rewards.dtype)
    return (rewards * powers).flip(-1).cumsum(-1).flip(-1) / powers


def _rtg_first_never_written(rewards, gamma):
    """A backward loop that stops at t = 1 (range(T - 1, 0, -1)): G_0 keeps the 0 it was created with."""
    out = reward_to_go(rewards, gamma)
    out[..., 0] = 0.0
    return out


_RTG_MISTAKES = [
    Mistake(
        "you divide by gamma ** t, which is 0 for t >= 1 when gamma = 0 (0 / 0 = NaN): accumulate backwards, "
        "G_t = r_t + gamma * G_{t+1}, which needs no division",
        _rtg_divided_by_powers,
    ),
    Mistake(
        "the last reward is counted twice: the running sum starts at 0 before the loop (G_T = 0), "
        "not at r_{T-1}, which the loop adds itself",
        _rtg_last_twice,
    ),
    Mistake(
        "your returns come out in reverse time order: a backward loop that appends G_t must reverse the list "
        "at the end (or write out[..., t] = G_t)",
        lambda rewards, gamma: reward_to_go(rewards, gamma).flip(-1),
    ),
    Mistake(
        "your discount counts from the start of the episode (gamma ** k); "
        "from step t on it restarts: weight r_k by gamma ** (k - t)",
        _rtg_mistake(lambda t, k: k),
    ),
    Mistake(
        "r_t itself is discounted: G_t = r_t + gamma * G_{t+1}, not gamma * (r_t + G_{t+1})",
        _rtg_mistake(lambda t, k: k - t + 1),
    ),
    Mistake(
        "you summed the rewards without discounting them: weight r_k by gamma ** (k - t)",
        lambda rewards, gamma: rewards.flip(-1).cumsum(-1).flip(-1),
    ),
    Mistake(
        "you accumulated forwards (rewards up to step t); the reward-to-go sums from step t to the end: "
        "loop over t backwards",
        lambda rewards, gamma: reward_to_go(rewards.flip(-1), gamma).flip(-1),
    ),
    Mistake(
        "you accumulated forwards without discounting (rewards.cumsum(-1): the rewards up to step t); the "
        "reward-to-go sums gamma ** (k - t) * r_k from step t to the end: loop over t backwards",
        lambda rewards, gamma: rewards.cumsum(-1),
    ),
    Mistake(
        "you returned one number per episode; the exercise asks for G_t at every step t, shape [..., T]",
        lambda rewards, gamma: discounted_return(rewards, gamma),
    ),
    Mistake(
        "your returns are shifted by one step: G_t includes r_t itself (you stored G_{t+1} at t)",
        lambda rewards, gamma: torch.cat(
            [reward_to_go(rewards, gamma)[..., 1:], torch.zeros_like(rewards[..., :1])], dim=-1
        ),
    ),
    Mistake(
        "G_0 is never written (it stays 0): your backward loop stops at t = 1, as range(T - 1, 0, -1) does; "
        "range's stop is excluded, so go down to t = 0 with range(T - 1, -1, -1), or reversed(range(T))",
        _rtg_first_never_written,
    ),
]


def _rtg_not_flipped_back(discount):
    """The rewards flipped and accumulated (cumsum) but the result never flipped back."""

    def wrong(rewards, gamma):
        weights = gamma ** _steps(rewards) if discount else torch.ones_like(rewards[..., 0:1])
        return (rewards.flip(-1) * weights).cumsum(-1)

    return wrong


def _rtg_every_step(rewards, gamma):
    """Weights gamma ** |k - t| over every step k, the past included: no triangle."""
    t = _steps(rewards)
    return rewards @ (gamma ** (t[None, :] - t[:, None]).abs()).T


def _rtg_first_reward_only(rewards, gamma):
    out = reward_to_go(rewards, gamma)
    out[..., 0] = rewards[..., 0]
    return out


def _rtg_mean_of_rest(rewards, gamma):
    """G_t divided by the number of steps from t to the end, T - t."""
    remaining = torch.arange(rewards.shape[-1], 0, -1, dtype=rewards.dtype)  # (T,): T - t
    return reward_to_go(rewards, gamma) / remaining


def _rtg_last_zero(rewards, gamma):
    out = reward_to_go(rewards, gamma)
    out[..., -1] = 0.0
    return out


def _rtg_without_last(rewards, gamma):
    """A backward loop that starts at t = T - 2 from G = 0: r_{T-1} never enters, and G_{T-1} stays 0."""
    cut = rewards.clone()
    cut[..., -1] = 0.0
    return _rtg_last_zero(cut, gamma)


def _rtg_power_of_t(rewards, gamma):
    """G_t = r_t + gamma ** (t + 1) * G_{t+1}: the exponent of the step, where one factor gamma belongs."""
    out = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma ** (t + 1) * running
        out[..., t] = running
    return out


def _rtg_normalised(eps):
    def wrong(rewards, gamma):
        returns = reward_to_go(rewards, gamma)
        return (returns - returns.mean()) / (returns.std() + eps)

    return wrong


_RTG_MISTAKES += [
    Mistake(
        "you multiplied the discounted cumsum by gamma ** t; the discount from step t restarts, so it is "
        "divided by gamma ** t (or, with no division at all, accumulated backwards: G_t = r_t + gamma * G_{t+1})",
        lambda rewards, gamma: reward_to_go(rewards, gamma) * (gamma ** _steps(rewards)) ** 2,
    ),
    Mistake(
        "G_0 is r_0 alone: your loop stops at t = 1 and sets G_0 to the first reward; G_0 = r_0 + gamma * G_1, "
        "the same recursion as every other step",
        _rtg_first_reward_only,
    ),
    Mistake(
        "you averaged the discounted rewards from step t on (.mean()); the reward-to-go is their sum: "
        "G_t = sum_{k >= t} gamma ** (k - t) * r_k",
        _rtg_mean_of_rest,
    ),
    Mistake(
        "your discount per step is gamma ** 2 (gamma applied twice): G_t = r_t + gamma * G_{t+1}",
        lambda rewards, gamma: reward_to_go(rewards, gamma**2),
    ),
    Mistake(
        "your discount per step is 1 - gamma; gamma itself is the discount: G_t = r_t + gamma * G_{t+1}",
        lambda rewards, gamma: reward_to_go(rewards, 1 - gamma),
    ),
    Mistake(
        "you flipped the rewards and accumulated them (cumsum), but never flipped the result back: "
        "flip, accumulate, then .flip(-1) again, so that index t holds G_t",
        _rtg_not_flipped_back(discount=True),
    ),
    Mistake(
        "you flipped the rewards and summed them (cumsum) without a discount, and never flipped the result back: "
        "G_t = r_t + gamma * G_{t+1}, stored at index t",
        _rtg_not_flipped_back(discount=False),
    ),
    Mistake(
        "your weights count the past too (gamma ** |k - t| for every k): the reward-to-go from step t sums only "
        "k >= t (an upper triangle, torch.triu, or a backward loop)",
        _rtg_every_step,
    ),
    Mistake(
        "r_t itself is left out: your G_t is gamma * G_{t+1} (a strict triangle, k > t); the reward-to-go from "
        "step t includes r_t with weight 1",
        lambda rewards, gamma: reward_to_go(rewards, gamma) - rewards,
    ),
    Mistake(
        "G_{T-1} is never written (it stays 0): a loop that starts from r_{T-1} must also store it at index "
        "T - 1; loop t = T - 1 down to 0 from G_T = 0 instead",
        _rtg_last_zero,
    ),
    Mistake(
        "r_{T-1} never enters: your backward loop starts at t = T - 2 (range(T - 2, -1, -1)); start at "
        "t = T - 1 with range(T - 1, -1, -1), from G_T = 0",
        _rtg_without_last,
    ),
    Mistake(
        "time is on the first axis of your output: torch.stack(steps) stacks on axis 0; the returns keep the "
        "rewards' shape [..., T], so stack with dim=-1",
        lambda rewards, gamma: reward_to_go(rewards, gamma).movedim(-1, 0),
    ),
    Mistake(
        "G_{t+1} is multiplied by gamma ** (t + 1); one step back costs one factor gamma: G_t = r_t + gamma * G_{t+1}",
        _rtg_power_of_t,
    ),
    *(
        Mistake(
            "you normalised the returns (minus their mean, over their std); the reward-to-go is the raw "
            "discounted sum (normalising, where wanted, is a later step's business)",
            _rtg_normalised(eps),
        )
        for eps in (1e-8, 1e-6, 1e-5, 0.0)
    ),
]


def check_reward_to_go(fn) -> bool:
    """Check a student's ``reward_to_go(rewards, gamma)``."""
    return check_against_reference(
        fn, reward_to_go, _cases(), name="reward_to_go", mistakes=_RTG_MISTAKES, check_dtype=True
    )
