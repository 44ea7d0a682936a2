"""A rollout: the current policy run in ``N`` environments for ``T`` steps, time last.

The first line of PPO's Algorithm 1 (Schulman et al. 2017), "run pi_theta_old in N environments for T timesteps",
and the first phase of CleanRL's ``ppo.py``. :func:`collect_rollout` plays the policy and keeps, for every step,
what the update needs later: the observation, the action, its log-prob under the policy that sampled it
(``logp_old``), the critic's value (``V_old``), the reward, and how the episode stopped. Nothing here builds a
graph: ``logp_old`` and ``V_old`` are constants of the update.

Environments follow gymnasium's vectorised "same-step" autoreset (``course_lib.trainers.envs``): when an episode
ends, ``step`` already returns the first observation of the next one, and the observation it ended in comes back
separately (``final_obs``), so a truncated episode can be bootstrapped from ``V(final_obs)`` (see
:func:`course_lib.gae.bootstrap_truncated`). Episodes carry on from one rollout to the next
(:class:`RunningEpisodes`).

Shapes: ``N`` environments, ``T`` steps, ``A`` actions; every tensor of a :class:`Rollout` is ``(N, T, ...)``,
time last as :mod:`course_lib.gae` expects.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from course_lib.policy_gradient import gather_log_probs


@dataclass
class Rollout:
    """The experience of one iteration: ``N`` environments, ``T`` steps each, time last."""

    obs: torch.Tensor
    """``(N, T, ...)`` s_t, the observation each action was chosen from."""
    actions: torch.Tensor
    """``(N, T)`` a_t, the actions taken (long)."""
    logp: torch.Tensor
    """``(N, T)`` log pi_old(a_t | s_t) when the action was sampled: the logp_old of the update."""
    values: torch.Tensor
    """``(N, T)`` V_old(s_t), the critic's values when the action was sampled."""
    rewards: torch.Tensor
    """``(N, T)`` r_t as the environment gave it (no bootstrap, no KL penalty)."""
    terminated: torch.Tensor
    """``(N, T)`` bool: the episode reached a terminal state at step t."""
    truncated: torch.Tensor
    """``(N, T)`` bool: the episode was cut by a time limit at step t."""
    final_values: torch.Tensor
    """``(N, T)`` V(final observation) where truncated, 0 elsewhere: the bootstrap of a cut episode."""
    last_values: torch.Tensor
    """``(N,)`` V(s_T), the value of the state after the last step (bootstraps the rollout's end)."""
    logp_ref: torch.Tensor | None = None
    """``(N, T)`` log pi_ref(a_t | s_t) under the frozen reference, or None without one."""
    episode_returns: list[float] = field(default_factory=list)
    """Undiscounted returns of the episodes that ended during the rollout."""
    episode_lengths: list[int] = field(default_factory=list)
    """Their lengths in steps."""


class RunningEpisodes:
    """The episodes under way in a vectorised environment: where each stands, and its return and length so far.

    Args:
        env: a vectorised environment (``reset(seed) -> obs (N, ...)``, ``step(actions)``), reset here.
        seed: the seed of that first reset.
    """

    def __init__(self, env, seed: int):
        self.env = env
        self.obs = env.reset(seed=seed)  # (N, ...): the observation each environment is in
        self.returns = torch.zeros(self.obs.shape[0], dtype=torch.float64)  # (N,): undiscounted, so far
        self.lengths = torch.zeros(self.obs.shape[0], dtype=torch.long)  # (N,)

    def record(self, rewards: torch.Tensor, ended: torch.Tensor) -> tuple[list[float], list[int]]:
        """Count one step's ``(N,)`` rewards; the returns and lengths of the episodes that ``ended``, restarted at 0."""
        self.returns += rewards.double()
        self.lengths += 1
        ended_ids = ended.nonzero()[:, 0].tolist()
        returns = [float(self.returns[n]) for n in ended_ids]
        lengths = [int(self.lengths[n]) for n in ended_ids]
        self.returns[ended] = 0.0
        self.lengths[ended] = 0
        return returns, lengths


def collect_rollout(
    actor_model: nn.Module,
    value_fn: Callable[[torch.Tensor], torch.Tensor],
    ref_model: nn.Module | None,
    episodes: RunningEpisodes,
    num_steps: int,
    generator: torch.Generator,
) -> Rollout:
    """Run the actor for ``num_steps`` steps in each of the ``N`` environments of ``episodes``, from where they stand.

    Args:
        actor_model: maps observations ``(N, ...)`` to action logits ``(N, A)``.
        value_fn: maps observations ``(M, ...)`` to the critic's values ``(M,)``.
        ref_model: a frozen policy like ``actor_model`` whose log-probs are kept too, or ``None``.
        episodes: the episodes under way; left where the rollout stops.
        num_steps: ``T``.
        generator: for the action sampling.

    Returns:
        A :class:`Rollout` of ``(N, T)`` tensors.
    """
    obs, N = episodes.obs, episodes.obs.shape[0]
    step = defaultdict(list)  # one entry per step, stacked at the end
    episode_returns, episode_lengths = [], []
    with torch.no_grad():  # logp_old and V_old are constants of the update: no graph is built
        for _ in range(num_steps):
            logits = actor_model(obs)  # (N, A)
            actions = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)[:, 0]  # (N,)
            step["obs"].append(obs)
            step["actions"].append(actions)
            step["logp"].append(gather_log_probs(logits, actions))  # (N,)
            step["values"].append(value_fn(obs).float())  # (N,)
            if ref_model is not None:
                step["logp_ref"].append(gather_log_probs(ref_model(obs), actions))  # (N,)

            obs, rewards, terminated, truncated, final_obs = episodes.env.step(actions)  # obs: the next episode's
            step["rewards"].append(rewards.float())
            step["terminated"].append(terminated.bool())
            step["truncated"].append(truncated.bool())
            # A time limit cut the episode: keep V(the state it stopped in) for the bootstrap.
            final_values = torch.zeros(N)
            if truncated.any():
                final_values[truncated] = value_fn(final_obs[truncated]).float()
            step["final_values"].append(final_values)

            # Bookkeeping of the undiscounted return of each episode, for the learning curve.
            ended_returns, ended_lengths = episodes.record(rewards, terminated | truncated)
            episode_returns += ended_returns
            episode_lengths += ended_lengths
        last_values = value_fn(obs).float()  # (N,): V(s_T) bootstraps the rollout's end
    episodes.obs = obs
    # Stack the steps along axis 1: (N, T, ...), time last as in course_lib.gae (no logp_ref without a reference).
    stacked = {name: torch.stack(xs, dim=1) for name, xs in step.items()}
    return Rollout(**stacked, last_values=last_values, episode_returns=episode_returns, episode_lengths=episode_lengths)
