"""GRPO on CartPole: groups of episodes from one start state, beside PPO with its critic (chapter 07).

The group trick of DeepSeekMath (Shao et al. 2024, section 4.1) outside language: ``G`` copies of the environment
are reset with the same seed, so they start in the same state, each plays one episode, and the episode's return is
the outcome reward (:func:`collect_episode_groups`). Every step of an episode gets its group-relative advantage (no
critic, no per-step credit), and the loss is :func:`course_lib.grpo.grpo_loss` over the padded episodes
(:func:`run_cartpole_grpo`). PPO runs (:func:`run_cartpole_ppo`) with GAE and its critic on the same number of
environment steps.

A run's result is a *curve*, as in :mod:`course_lib.lectures.compare` (which re-exports this module's functions):
equal-length lists ``samples`` (environment steps), ``seconds`` and ``reward``, one entry per iteration, plus
``final_eval``. Shapes: ``B`` start states, ``G`` episodes per start state, ``T`` steps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from course_lib import _validate
from course_lib._threads import one_thread
from course_lib.grpo import LOSS_AGG_MODES, grpo_loss
from course_lib.policy_gradient import gather_log_probs
from course_lib.trainers.envs import GymVectorEnv, cartpole_models, evaluate_policy
from course_lib.trainers.ppo_trainer import PPOTrainer, PPOTrainerConfig


def run_cartpole_ppo(seed: int = 0, max_steps: int = 50_000, num_envs: int = 8, lr: float = 1e-3) -> dict:
    """``PPOTrainer`` on CartPole-v1 (chapter 05's configuration) until ``max_steps`` environment steps, timed.

    Args:
        seed: seeds the networks, the sampling and the environments.
        max_steps: environment steps over all environments (``N * 128`` per update).
        num_envs: ``N``.
        lr: Adam's learning rate.

    Returns:
        a curve (``samples``: environment steps, ``reward``: mean return of the episodes that
        ended in the update's rollout, NaN when none did) plus ``final_eval``, the mean return of
        10 fresh episodes of the trained (sampling) policy.
    """
    _validate.require_int("max_steps", max_steps, 1)
    env = GymVectorEnv("CartPole-v1", num_envs)
    actor, critic = cartpole_models(hidden=64, seed=seed)
    trainer = PPOTrainer(actor, critic, None, config=PPOTrainerConfig(num_steps=128, lr=lr, seed=seed))
    curve = {"samples": [], "seconds": [], "reward": []}

    def train():
        start = time.perf_counter()
        while trainer.total_steps < max_steps:
            record = trainer.train_step(env)
            curve["samples"].append(trainer.total_steps)
            curve["seconds"].append(time.perf_counter() - start)
            curve["reward"].append(record["mean_return"])

    with one_thread():  # networks this small train fastest on one thread
        train()
    env.close()
    curve["final_eval"] = _evaluate(actor, seed)
    return curve


@dataclass
class EpisodeGroups:
    """``G`` episodes from each of ``B`` start states, padded to the longest episode ``T``."""

    obs: torch.Tensor
    """``(B, G, T, obs_dim)`` the observation each action was chosen from (padding repeats the last)."""
    actions: torch.Tensor
    """``(B, G, T)`` the actions taken (long)."""
    logp: torch.Tensor
    """``(B, G, T)`` their log-probs under the policy that played: the ``logp_old`` of the update."""
    mask: torch.Tensor
    """``(B, G, T)`` 1.0 for the steps of the episode, 0.0 for padding."""
    returns: torch.Tensor
    """``(B, G)`` each episode's undiscounted return: the outcome reward."""


def collect_episode_groups(
    actor: torch.nn.Module, envs: list, seeds: list[int], generator: torch.Generator
) -> EpisodeGroups:
    """Play one episode in each of ``B * G`` environments, group ``b`` all reset with ``seeds[b]``.

    Resetting ``G`` copies of a deterministic environment with the same seed puts them in the
    same start state: the episodes of a group then differ only by the actions the policy
    samples, as the ``G`` responses to one prompt do.

    Args:
        actor: maps observations ``(M, obs_dim)`` to logits ``(M, A)``.
        envs: ``B * G`` gymnasium environments; environments ``b * G .. b * G + G - 1`` form group ``b``.
        seeds: ``B`` reset seeds, one start state per group.
        generator: for the action sampling.
    """
    B = len(seeds)
    if B == 0 or len(envs) % B:
        raise ValueError(f"envs: expected a multiple of len(seeds) = {B} environments, got {len(envs)}")
    G = len(envs) // B
    obs = torch.stack(
        [torch.as_tensor(env.reset(seed=int(seeds[n // G]))[0], dtype=torch.float32) for n, env in enumerate(envs)]
    )  # (N, obs_dim), equal within each group
    alive = torch.ones(len(envs), dtype=torch.bool)  # (N,)
    returns = torch.zeros(len(envs))  # (N,)
    steps = {"obs": [], "actions": [], "logp": [], "mask": []}
    with torch.no_grad():  # logp_old is a constant of the update
        while alive.any():
            logits = actor(obs)  # (N, A): finished episodes are computed too, and masked out
            actions = torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)[:, 0]  # (N,)
            for name, value in zip(steps, (obs, actions, gather_log_probs(logits, actions), alive.float())):
                steps[name].append(value)
            obs = obs.clone()
            for n in alive.nonzero()[:, 0].tolist():  # only the episodes still running take a step
                next_obs, reward, terminated, truncated, _ = envs[n].step(int(actions[n]))
                obs[n], returns[n] = torch.as_tensor(next_obs), returns[n] + reward
                alive[n] = not (terminated or truncated)
    stacked = {name: torch.stack(values, dim=1) for name, values in steps.items()}  # (N, T, ...)
    stacked = {name: value.reshape(B, G, *value.shape[1:]) for name, value in stacked.items()}  # (B, G, T, ...)
    return EpisodeGroups(**stacked, returns=returns.reshape(B, G))


def run_cartpole_grpo(
    seed: int = 0,
    max_steps: int = 50_000,
    group_size: int = 8,
    num_groups: int = 4,
    clip_eps: float = 0.2,
    lr: float = 3e-3,
    steps_per_batch: int = 4,
    loss_agg: str = "seq-mean-token-mean",
) -> dict:
    """GRPO on CartPole-v1: groups of episodes from one start state, the return as the outcome reward.

    Each iteration plays ``num_groups`` groups of ``group_size`` episodes
    (:func:`collect_episode_groups`), then takes ``steps_per_batch`` Adam steps on
    ``grpo_loss(logp, logp_old, None, returns, mask)``: every step of episode ``i`` gets the
    advantage ``(R_i - mean(R)) / std(R)`` of its group, the ratio is clipped, and there is no
    KL term (PPO has no reference here either). The actor is PPO's (``cartpole_models``, same
    seed); there is no critic. The global gradient norm is clipped at 0.5, as PPO does.

    Args:
        seed: seeds the actor, the start states and the sampling.
        max_steps: environment steps; training stops after the first iteration that reaches them.
        group_size: ``G``, episodes per start state.
        num_groups: ``B``, start states per iteration.
        clip_eps: the clip range of the ratio.
        lr: Adam's learning rate.
        steps_per_batch: Adam steps on each batch of episodes.
        loss_agg: how steps become one loss (``course_lib.grpo.aggregate_loss``'s modes).

    Returns:
        a curve like :func:`run_cartpole_ppo`'s (``reward``: mean return of the iteration's
        ``B * G`` episodes) plus ``final_eval``.
    """
    import gymnasium as gym  # imported here: the sorting task needs no gymnasium

    _check_run_cartpole_grpo(max_steps, group_size, num_groups, steps_per_batch, clip_eps, lr, loss_agg)

    actor, _ = cartpole_models(hidden=64, seed=seed)
    optimizer = torch.optim.Adam(actor.parameters(), lr=lr, eps=1e-5)
    envs = [gym.make("CartPole-v1") for _ in range(num_groups * group_size)]
    generator = torch.Generator().manual_seed(seed)
    curve = {"samples": [], "seconds": [], "reward": []}

    def train():
        start, total_steps = time.perf_counter(), 0
        while total_steps < max_steps:
            seeds = torch.randint(2**31 - 1, (num_groups,), generator=generator).tolist()  # B fresh start states
            groups = collect_episode_groups(actor, envs, seeds, generator)
            for _ in range(steps_per_batch):
                logp = gather_log_probs(actor(groups.obs), groups.actions)  # (B, G, T)
                loss, _ = grpo_loss(
                    logp,
                    groups.logp,
                    None,
                    groups.returns,
                    groups.mask,
                    clip_eps=clip_eps,
                    kl_coef=0.0,
                    loss_agg=loss_agg,
                )
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(actor.parameters(), 0.5)
                optimizer.step()
            total_steps += int(groups.mask.sum())  # environment steps actually taken
            curve["samples"].append(total_steps)
            curve["seconds"].append(time.perf_counter() - start)
            curve["reward"].append(groups.returns.mean().item())

    with one_thread():
        train()
    for env in envs:
        env.close()
    curve["final_eval"] = _evaluate(actor, seed)
    return curve


def _evaluate(actor, seed: int) -> float:
    env = GymVectorEnv("CartPole-v1", 10)
    with one_thread():
        scores = evaluate_policy(actor, env, seed=10_000 + seed)
    env.close()
    return sum(scores) / len(scores)


def _check_run_cartpole_grpo(max_steps, group_size, num_groups, steps_per_batch, clip_eps, lr, loss_agg) -> None:
    for name, value in (
        ("max_steps", max_steps),
        ("group_size", group_size),
        ("num_groups", num_groups),
        ("steps_per_batch", steps_per_batch),
    ):
        _validate.require_int(name, value, 1)
    _validate.require_positive("clip_eps", clip_eps)
    _validate.require_positive("lr", lr)
    _validate.require_choice("loss_agg", loss_agg, LOSS_AGG_MODES)
