"""GRPO against PPO: the same tasks, the same sample budget, measured side by side.

Chapter 07 puts the two trainers of chapters 05 and 06 on equal terms and measures:

1. **the same budget** (:func:`run_sorting_grpo`, :func:`run_sorting_ppo`): on the sorting
   task, both algorithms draw ``G`` responses for each of the ``B`` prompts per iteration,
   so after ``k`` iterations both have seen ``k * B * G`` responses. Each runs with the
   course's configuration from its own chapter and the same initial policy; every iteration
   is timed, so reward can be read against samples and against wall-clock seconds;
2. **GRPO on CartPole** (:mod:`course_lib.lectures.cartpole`, its functions re-exported here): the
   group trick of DeepSeekMath outside language, ``G`` episodes from one start state, beside PPO
   with GAE and its critic on the same number of environment steps;
3. **memory** (:func:`sorting_memory_tables`): one training step of each trainer, with every
   byte accounted for by :mod:`course_lib.lectures.memory`.

The sweep over GRPO's group size and clip range, and its reading, are in :mod:`course_lib.lectures.sweep`.

A run's result is a *curve*: a dict of equal-length lists ``samples`` (responses, or
environment steps), ``seconds`` (wall-clock since the start of training) and ``reward``
(the mean reward of that iteration's samples), one entry per iteration. :func:`band`
puts several seeds' curves on one grid. Shapes: ``B`` prompts (or start states), ``G``
group, ``T`` steps or tokens.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from course_lib import _validate
from course_lib._threads import one_thread
from course_lib.lectures.cartpole import (  # noqa: F401 (chapter 07 and its benchmark read them from compare)
    EpisodeGroups,
    collect_episode_groups,
    run_cartpole_grpo,
    run_cartpole_ppo,
)
from course_lib.lectures.memory import measure_training_memory
from course_lib.models import greedy_responses
from course_lib.rewards import sort_inclusion_ordering_reward
from course_lib.tasks import sorting_prompts
from course_lib.trainers.envs import SortingEnv, sorting_ppo_models
from course_lib.trainers.grpo_trainer import GRPOTrainer, GRPOTrainerConfig
from course_lib.trainers.ppo_trainer import PPOTrainer, PPOTrainerConfig

SORTING_PPO = dict(
    num_steps=3, gamma=1.0, lam=0.95, lr=5e-3, ent_coef=0.0, num_minibatches=2, kl_coef=0.05, kl_kind="k1"
)
"""PPO's configuration on the sorting task: chapter 05's (``num_steps`` = T, one response per environment)."""


# ---------------------------------------------------------------------------
# 1. The sorting task: the same prompts, the same initial policy, the same samples
# ---------------------------------------------------------------------------


def _one_thread(fn):
    """Run ``fn()`` on one torch thread (fastest for models this small), restoring the setting after."""
    with one_thread():
        return fn()


def run_sorting_grpo(
    seed: int = 0, rounds: int = 100, group_size: int = 10, clip_eps: float = 0.2, prompts: torch.Tensor | None = None
) -> dict:
    """``GRPOTrainer`` with the course's defaults on the sorting task, one round at a time, timed.

    Args:
        seed: seeds the initial policy and the sampling.
        rounds: each samples ``G`` responses per prompt and takes 10 Adam steps on them.
        group_size: ``G``.
        clip_eps: the clip range of the ratio.
        prompts: ``(B, T)`` the prompts (the lecture's three when None).

    Returns:
        a curve (``samples``: responses so far, ``seconds``, ``reward``: mean sampled reward,
        ``greedy``: mean greedy reward over prompts, ``entropy``: mean entropy of the policy per
        response position, in nats) plus ``final_greedy``.
    """
    prompts = sorting_prompts() if prompts is None else prompts
    trainer = GRPOTrainer.for_sorting(GRPOTrainerConfig(seed=seed, group_size=group_size, clip_eps=clip_eps), prompts)
    curve = {"samples": [], "seconds": [], "reward": [], "greedy": [], "entropy": []}

    def train():
        start = time.perf_counter()
        for i in range(_validate.require_int("rounds", rounds, 1)):
            history = trainer.train(prompts, rounds=1, progress=False)  # one round; the trainer keeps its state
            curve["samples"].append((i + 1) * prompts.shape[0] * group_size)
            curve["seconds"].append(time.perf_counter() - start)
            curve["reward"].append(history.mean_reward[-1])
            curve["greedy"].append(sum(history.greedy_reward[-1]) / prompts.shape[0])
            curve["entropy"].append(history.entropy[-1])

    _one_thread(train)
    curve["final_greedy"] = curve["greedy"][-1]
    return curve


def sorting_ppo_trainer(
    seed: int = 0, group_size: int = 10, clip_eps: float = 0.2, prompts: torch.Tensor | None = None, **overrides
) -> tuple[PPOTrainer, SortingEnv]:
    """PPO on the sorting task from GRPO's initial policy (``GRPOTrainer.for_sorting``'s), and its environment.

    Args:
        seed, group_size, clip_eps, prompts: as in :func:`run_sorting_grpo`; the environment has
            ``N = B * G`` episodes, ``G`` per prompt.
        overrides: fields of :data:`SORTING_PPO` to replace (``update_epochs=1``, ...).

    Returns:
        ``(trainer, env)``: a :class:`PPOTrainer` with actor, critic and frozen reference, and a :class:`SortingEnv`.
    """
    prompts = sorting_prompts() if prompts is None else prompts
    V, T = int(prompts.max()) + 1, prompts.shape[1]
    policy = GRPOTrainer.for_sorting(GRPOTrainerConfig(seed=seed), prompts).model  # the same start as GRPO
    actor, critic, ref = sorting_ppo_models(policy, prompt_length=T, vocab_size=V, hidden=64, seed=seed)
    config = PPOTrainerConfig(**{**SORTING_PPO, "num_steps": T, "seed": seed, **overrides})
    return PPOTrainer(actor, critic, ref, clip_epsilon=clip_eps, config=config), SortingEnv(prompts, group_size, V)


def run_sorting_ppo(
    seed: int = 0, updates: int = 100, group_size: int = 10, clip_eps: float = 0.2, prompts: torch.Tensor | None = None
) -> dict:
    """``PPOTrainer`` on the sorting task, ``B * G`` responses per update, timed: a curve like ``run_sorting_grpo``'s.

    Args:
        updates: iterations; each collects one response per environment and takes 8 Adam steps.
        seed, group_size, clip_eps, prompts: as in :func:`run_sorting_grpo`.
    """
    prompts = sorting_prompts() if prompts is None else prompts
    trainer, env = sorting_ppo_trainer(seed, group_size, clip_eps, prompts)
    policy = trainer.actor_model.model
    curve = {"samples": [], "seconds": [], "reward": [], "greedy": [], "entropy": []}

    def train():
        start = time.perf_counter()
        for _ in range(_validate.require_int("updates", updates, 1)):
            record = trainer.train_step(env)  # one rollout = one response per environment
            curve["samples"].append(trainer.total_steps // prompts.shape[1])
            curve["seconds"].append(time.perf_counter() - start)
            curve["reward"].append(record["mean_return"])
            curve["greedy"].append(
                sort_inclusion_ordering_reward(prompts, greedy_responses(policy, prompts)).float().mean().item()
            )
            curve["entropy"].append(record["entropy"])  # mean over the update's minibatches

    _one_thread(train)
    curve["final_greedy"] = curve["greedy"][-1]
    return curve


# ---------------------------------------------------------------------------
# 2. CartPole is course_lib.lectures.cartpole's (re-exported above). Curves of several seeds, read together:
# ---------------------------------------------------------------------------


def band(curves: list[dict], x: str = "samples", y: str = "reward", n_points: int = 50) -> dict:
    """Several seeds' curves on one grid of ``x``: the mean and the min-max band of ``y``.

    Each curve is linearly interpolated onto ``n_points`` points from the first to the
    smallest last ``x`` of the curves (so every seed covers the grid); NaN entries (PPO
    rollouts in which no episode ended) are dropped first.

    Returns:
        ``{"x", "mean", "low", "high"}``, numpy arrays of length ``n_points``.
    """
    if not isinstance(curves, (list, tuple)) or not curves:
        raise ValueError("curves: expected a non-empty list of curves (dicts of lists)")
    pairs = []
    for i, curve in enumerate(curves):
        if x not in curve or y not in curve:
            raise ValueError(f"curves[{i}]: expected the keys {x!r} and {y!r}, got {sorted(curve)}")
        xs, ys = np.asarray(curve[x], dtype=float), np.asarray(curve[y], dtype=float)
        keep = np.isfinite(ys)
        if keep.sum() < 1:
            raise ValueError(f"curves[{i}]: {y!r} has no finite value")
        pairs.append((xs[keep], ys[keep]))
    grid = np.linspace(min(p[0][0] for p in pairs), min(p[0][-1] for p in pairs), n_points)
    values = np.stack([np.interp(grid, xs, ys) for xs, ys in pairs])  # (seeds, n_points)
    return {"x": grid, "mean": values.mean(0), "low": values.min(0), "high": values.max(0)}


def first_reaching(x, y, level: float) -> float:
    """The first ``x`` at which ``y`` reaches ``level`` (NaN if it never does): samples or seconds to a target."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x, y: expected two 1-D sequences of the same length, got shapes {x.shape} and {y.shape}")
    reached = np.nonzero(y >= level)[0]
    return float(x[reached[0]]) if len(reached) else math.nan


# ---------------------------------------------------------------------------
# 3. Memory of one training step, measured
# ---------------------------------------------------------------------------


def sorting_memory_tables(group_size: int = 8, seed: int = 0) -> dict[str, dict]:
    """Measure one training step of PPO and of GRPO on the same sorting batch (``B * G`` responses of ``T`` tokens).

    PPO takes one Adam step on the whole rollout (``update_epochs = num_minibatches = 1``),
    so both steps see the same samples. Returns ``{"PPO": rows, "GRPO": rows}`` of
    :func:`course_lib.lectures.memory.measure_training_memory`.
    """
    prompts = sorting_prompts()
    ppo, env = sorting_ppo_trainer(seed, group_size, prompts=prompts, update_epochs=1, num_minibatches=1)
    rollout = ppo.collect_experiences(env)
    advantages, returns = ppo.compute_advantages(rollout)
    tables = {
        "PPO": measure_training_memory(
            {"actor": ppo.actor_model, "critic": ppo.critic_model, "reference": ppo.ref_model},
            ppo.optimizer,
            lambda: ppo.update_policy(rollout, advantages, returns),
        )
    }

    grpo = GRPOTrainer.for_sorting(GRPOTrainerConfig(seed=seed, group_size=group_size), prompts)
    responses = grpo.generate_group_outputs(prompts)  # (B, G, T)
    rewards = grpo.compute_rewards(prompts, responses)  # (B, G)
    with torch.no_grad():
        logp_old = grpo.log_probs(grpo.model, prompts, responses)  # (B, G, T)
        logp_ref = grpo.log_probs(grpo.ref_model, prompts, responses)
    tables["GRPO"] = measure_training_memory(
        {"actor": grpo.model, "reference": grpo.ref_model},
        grpo.optimizer,
        lambda: grpo.training_step(prompts, responses, rewards, logp_old, logp_ref),
    )
    return tables
