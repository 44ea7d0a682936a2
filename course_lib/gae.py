"""Generalised advantage estimation: TD residuals, discounted returns, GAE(gamma, lambda).

Schulman et al. 2015, "High-Dimensional Continuous Control Using Generalized
Advantage Estimation". With the TD residual of eq. (9),

    delta_t = r_t + gamma * V(s_{t+1}) - V(s_t),

the GAE advantage of eq. (16) is the exponentially weighted sum

    A_t = sum_{l >= 0} (gamma * lam)^l * delta_{t+l},

computed backwards in one pass:  A_t = delta_t + gamma * lam * A_{t+1}.
lam = 0 gives the one-step TD residual (low variance, biased by V); lam = 1
gives the Monte-Carlo return minus V(s_t) (unbiased, high variance).

Conventions of the course (shapes ``[..., T]``: any leading batch, time last)

| symbol              | shape      | meaning                                                  |
|---------------------|------------|----------------------------------------------------------|
| ``rewards[..., t]`` | ``[..., T]`` | reward received for the action at step t               |
| ``values[..., t]``  | ``[..., T]`` | V(s_t), the critic's value of the state at step t      |
| ``dones[..., t]``   | ``[..., T]`` | the episode *terminated* at step t (bool, int or 0./1.) |
| ``last_values``     | ``[...]``    | V of the state after the last step, s_T (bootstrap)    |

A done at step t cuts the episode there: V(s_{t+1}) belongs to the next episode,
so it is never bootstrapped into step t or earlier (the ``1 - dones[..., t]``
factors below). CleanRL stores the flag with the *next* observation instead
(its ``dones[t]`` is our ``dones[t - 1]``, its ``next_done`` our ``dones[-1]``);
``tests/test_gae.py`` writes its loop out and checks that both agree.

Truncation (a time limit, not a terminal state). When gymnasium reports
``truncated`` the episode did not end: the state it stopped in still has a
value, and bootstrapping zero there would teach the critic that time limits
are terminal. The course handles it the way Stable-Baselines3 does:

1. fold ``gamma * V(final observation)`` into the reward of the truncated step,
   with :func:`bootstrap_truncated`;
2. mark the step done (``dones = terminated | truncated``), so the next
   episode's values are not bootstrapped into it.

Then delta_t = r_t + gamma * V(s_final) - V(s_t), exactly the residual of an
episode that goes on. For the last step of a rollout (cut by the rollout
length, not by the environment) nothing needs folding: leave it not done and
pass V(s_T) as ``last_values``. (CleanRL's PPO treats truncation as
termination, which is simpler and slightly biased.)
"""

from __future__ import annotations

import torch

from course_lib import _validate

# ---------------------------------------------------------------------------
# Truncation: fold the bootstrap value into the reward
# ---------------------------------------------------------------------------


def bootstrap_truncated(
    rewards: torch.Tensor, truncated: torch.Tensor, final_values: torch.Tensor, gamma: float
) -> torch.Tensor:
    """Return rewards with ``gamma * V(final observation)`` added at each truncated step.

    Mark those steps done afterwards (``dones = terminated | truncated``).

    Args:
        rewards: ``[..., T]`` rewards.
        truncated: ``[..., T]`` bool or 0/1: the episode hit a time limit at step t.
        final_values: ``[..., T]`` V(final observation) of the episode truncated at
            step t; read only where ``truncated`` (other entries may hold anything, even NaN).
        gamma: discount factor in [0, 1].

    Returns:
        ``[..., T]`` a new tensor; ``rewards`` is left unchanged.
    """
    _check_bootstrap_truncated(rewards, truncated, final_values, gamma)
    # torch.where, not a product: a NaN in an unused entry of final_values must not leak.
    bonus = torch.where(truncated.bool(), gamma * final_values, torch.zeros_like(rewards))
    return rewards + bonus


# ---------------------------------------------------------------------------
# TD residuals and Monte-Carlo returns
# ---------------------------------------------------------------------------


def td_residuals(
    rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, last_values: torch.Tensor, gamma: float
) -> torch.Tensor:
    """One-step TD residuals ``delta_t = r_t + gamma * (1 - done_t) * V(s_{t+1}) - V(s_t)`` (GAE eq. 9).

    Args:
        rewards: ``[..., T]`` rewards.
        values: ``[..., T]`` V(s_t).
        dones: ``[..., T]`` the episode terminated at step t (bool, int or float 0/1).
        last_values: ``[...]`` V(s_T), the value of the state after the last step.
        gamma: discount factor in [0, 1].

    Returns:
        ``[..., T]`` the residuals.
    """
    _check_trajectory(rewards, values, dones, last_values, gamma)
    dones = dones.to(rewards.dtype)  # bool, int or float: 0./1.
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)  # (..., T): V(s_{t+1})
    return rewards + gamma * (1.0 - dones) * next_values - values


def discounted_returns(
    rewards: torch.Tensor, dones: torch.Tensor, last_values: torch.Tensor, gamma: float
) -> torch.Tensor:
    """Discounted reward-to-go ``G_t = r_t + gamma * (1 - done_t) * G_{t+1}``, with ``G_T = last_values``.

    The Monte-Carlo return of each step, bootstrapped by V(s_T) where the
    rollout ends mid-episode. ``compute_gae`` with ``lam=1`` gives ``G_t - V(s_t)``.

    Args:
        rewards: ``[..., T]`` rewards.
        dones: ``[..., T]`` the episode terminated at step t.
        last_values: ``[...]`` V(s_T).
        gamma: discount factor in [0, 1].

    Returns:
        ``[..., T]`` the returns.
    """
    _check_trajectory(rewards, None, dones, last_values, gamma)
    dones = dones.to(rewards.dtype)  # bool, int or float: 0./1.
    returns = torch.empty_like(rewards)
    running = last_values.to(rewards.dtype)  # (...): G_{t+1}, starting from the bootstrap
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * (1.0 - dones[..., t]) * running
        returns[..., t] = running
    return returns


# ---------------------------------------------------------------------------
# GAE(gamma, lambda)
# ---------------------------------------------------------------------------


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_values: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE advantages and the returns the critic regresses on.

    Args:
        rewards: ``[..., T]`` rewards.
        values: ``[..., T]`` V(s_t).
        dones: ``[..., T]`` the episode terminated at step t (bool, int or float 0/1):
            nothing after step t is bootstrapped into step t or earlier.
        last_values: ``[...]`` V(s_T), the value of the state after the last step
            (ignored where ``dones[..., -1]``).
        gamma: discount factor in [0, 1].
        lam: GAE lambda in [0, 1].

    Returns:
        ``(advantages, returns)``, both ``[..., T]``, with ``returns = advantages + values``
        (the lambda-return; CleanRL, SB3 and TRL use the same target).
    """
    _check_compute_gae(rewards, values, dones, last_values, gamma, lam)
    dones = dones.to(rewards.dtype)  # bool, int or float: 0./1.
    deltas = td_residuals(rewards, values, dones, last_values, gamma)  # (..., T)
    # The next lines implement GAE-lambda: A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}, backwards.
    advantages = torch.empty_like(deltas)
    running = torch.zeros(deltas.shape[:-1], dtype=deltas.dtype)  # (...): A_{t+1}, zero after the last step
    for t in reversed(range(deltas.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1.0 - dones[..., t]) * running
        advantages[..., t] = running
    returns = advantages + values
    return advantages, returns


# ---------------------------------------------------------------------------
# Chapter 04's table by hand: one episode, checked entry by entry
# ---------------------------------------------------------------------------


def gae_table_episode() -> dict:
    """The 5-step rollout of the hand-computed table, as keyword arguments of :func:`compute_gae`.

    An episode terminates at t = 2; a new one starts at t = 3 and is still running
    after t = 4, so the last step bootstraps from ``last_values`` = V(s_5).
    """
    return {
        "rewards": torch.tensor([1.0, 0.0, 2.0, 0.0, 1.0], dtype=torch.float64),  # (T,) = (5,)
        "values": torch.tensor([2.0, 1.5, 1.0, 1.0, 0.5], dtype=torch.float64),  # (5,): V(s_0) .. V(s_4)
        "dones": torch.tensor([False, False, True, False, False]),  # (5,): terminates at t = 2
        "last_values": torch.tensor(1.0, dtype=torch.float64),  # (): V(s_5)
        "gamma": 0.9,
        "lam": 0.8,
    }


# ---------------------------------------------------------------------------
# Argument checks: a public function's first line calls its own
# ---------------------------------------------------------------------------


def _check_bootstrap_truncated(rewards, truncated, final_values, gamma) -> None:
    _validate.require_tensor("rewards", rewards, min_dim=1)
    _validate.require_mask("truncated", truncated, "rewards", rewards)
    _validate.require_same_shape("final_values", final_values, "rewards", rewards)
    _validate.require_unit_interval("gamma", gamma)


def _check_trajectory(rewards, values, dones, last_values, gamma) -> None:
    """The arguments the TD residuals, the returns and GAE share (``values`` where they take it)."""
    _validate.require_tensor("rewards", rewards, min_dim=1)
    if values is not None:
        _validate.require_same_shape("values", values, "rewards", rewards)
    _validate.require_mask("dones", dones, "rewards", rewards)
    _validate.require_tensor("last_values", last_values)
    _validate.require_shape("last_values", last_values, rewards.shape[:-1], like="rewards without its last (time) axis")
    _validate.require_unit_interval("gamma", gamma)


def _check_compute_gae(rewards, values, dones, last_values, gamma, lam) -> None:
    _check_trajectory(rewards, values, dones, last_values, gamma)
    _validate.require_unit_interval("lam", lam)
