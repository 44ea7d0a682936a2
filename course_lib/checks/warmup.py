"""Exercise checks of chapter 00 (warm-up): the discounted return and the reward-to-go.

The checks import the reference implementations of ``course_lib.lectures.warmup``; the maths module never
imports its checks, so the file a student opens is the maths alone.
"""

from __future__ import annotations

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


def check_reward_to_go(fn) -> bool:
    """Check a student's ``reward_to_go(rewards, gamma)``."""
    return check_against_reference(
        fn, reward_to_go, _cases(), name="reward_to_go", mistakes=_RTG_MISTAKES, check_dtype=True
    )
