"""The warm-up: the discounted return, the quantity every later chapter estimates.

An episode gives one reward per step, ``r_0, r_1, ..., r_{T-1}``. Its discounted
return (Sutton & Barto 2018, "Reinforcement Learning: An Introduction", eq. 3.8,
with their R_{t+1} written r_t here) is

    G = sum_{t=0}^{T-1} gamma^t * r_t,

and reinforcement learning maximises its expectation, J(theta) = E_{tau ~ pi_theta}[G].
The return *from* step t on, the reward-to-go

    G_t = sum_{k=t}^{T-1} gamma^(k-t) * r_k = r_t + gamma * G_{t+1},    G_T = 0,

is what the policy gradient weights the log-probability of the action at step t
by (chapter 02), and what a critic learns to predict (chapters 04 and 05).
``G_0`` is the discounted return.

Conventions of the course (shapes ``[..., T]``: any leading batch, time last)

| symbol              | shape        | meaning                                         |
|---------------------|--------------|-------------------------------------------------|
| ``rewards[..., t]`` | ``[..., T]`` | reward received for the action at step t        |
| ``gamma``           | number       | discount factor in [0, 1]; 1 means no discount  |

- The first reward is not discounted: its weight is ``gamma^0 = 1`` (Sutton &
  Barto, Spinning Up's ``discount_cumsum`` and CleanRL's return loop all agree).
- ``gamma = 1`` is allowed: episodes here are finite. Language-model RL uses it
  (TRL's PPO and verl default to ``gamma = 1.0``): a response is short and its
  reward arrives at the end, so nothing is gained by discounting it.
- Each row is one whole episode that ends at its last step. Episodes cut by a
  rollout boundary, or several episodes in one row, need done flags and a
  bootstrap value: :func:`course_lib.gae.discounted_returns` handles those.
"""

from __future__ import annotations

import torch

from course_lib import _validate


def _validate_rewards(rewards, gamma) -> float:
    """Check the two arguments shared by both functions; return gamma as a float."""
    _validate.require_tensor("rewards", rewards, min_dim=1)
    if rewards.shape[-1] == 0:
        raise ValueError(f"rewards: expected at least one time step on the last axis, got shape {tuple(rewards.shape)}")
    return _validate.require_unit_interval("gamma", gamma)


def discounted_return(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """The discounted return ``G = sum_t gamma^t * r_t`` of each episode.

    Args:
        rewards: ``[..., T]`` float rewards, time on the last axis.
        gamma: discount factor in [0, 1].

    Returns:
        ``[...]`` one return per episode (a 0-dim tensor for a single episode).
    """
    gamma = _validate_rewards(rewards, gamma)
    T = rewards.shape[-1]
    # The weights gamma^0, gamma^1, ..., gamma^(T-1); 0.0 ** 0 is 1, so gamma = 0 keeps r_0.
    discounts = gamma ** torch.arange(T, dtype=rewards.dtype, device=rewards.device)  # (T,)
    return (rewards * discounts).sum(dim=-1)  # (...)


def reward_to_go(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """The discounted reward-to-go ``G_t = sum_{k >= t} gamma^(k - t) * r_k`` of every step.

    Args:
        rewards: ``[..., T]`` float rewards, time on the last axis; each row is one
            episode that ends at its last step.
        gamma: discount factor in [0, 1].

    Returns:
        ``[..., T]`` the return from each step on; ``[..., 0]`` is ``discounted_return(rewards, gamma)``.
    """
    gamma = _validate_rewards(rewards, gamma)
    returns = torch.empty_like(rewards)
    # One backward pass with G_t = r_t + gamma * G_{t+1}, starting from G_T = 0.
    running = torch.zeros_like(rewards[..., 0])  # (...)
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        returns[..., t] = running
    return returns  # (..., T)
