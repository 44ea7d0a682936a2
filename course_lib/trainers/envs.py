"""Environments and models the PPO trainer runs on, as vectorised tensors.

Two tasks plug into :class:`~course_lib.trainers.ppo_trainer.PPOTrainer` through one
small protocol (``reset()`` and ``step(actions)`` on tensors, gymnasium's
"same-step" autoreset):

- :class:`GymVectorEnv` wraps ``N`` copies of gymnasium's CartPole-v1, with a small
  MLP actor and critic (:func:`cartpole_models`);
- :class:`SortingEnv` turns the sorting task into episodes of one step per response
  token with the reward at the last token, so GAE runs over tokens, with a token
  critic and a frozen reference (:func:`sorting_ppo_models`).

Shapes: ``N`` environments, ``A`` actions (the ``V`` tokens for the sorting task).
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from course_lib import _validate
from course_lib.rewards import sort_inclusion_ordering_reward

# ---------------------------------------------------------------------------
# CartPole: gymnasium's environments as tensors, and a small actor and critic
# ---------------------------------------------------------------------------


class GymVectorEnv:
    """``N`` copies of a gymnasium environment, stepped together, with torch tensors in and out.

    gymnasium's ``SyncVectorEnv`` in "same-step" autoreset mode: when an episode ends, ``step``
    returns the first observation of the next one, and the observation it ended in comes
    back separately (``final_obs``) so the trainer can bootstrap a truncated episode from it.

    Args:
        env_id: a gymnasium id, ``"CartPole-v1"`` by default (a discrete action space).
        num_envs: ``N``.
    """

    def __init__(self, env_id: str = "CartPole-v1", num_envs: int = 8):
        import gymnasium as gym  # imported here: the sorting task needs no gymnasium

        self.num_envs = _validate.require_int("num_envs", num_envs, minimum=1)
        self.envs = gym.vector.SyncVectorEnv(
            [lambda: gym.make(env_id) for _ in range(num_envs)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
        )
        self.obs_dim = int(self.envs.single_observation_space.shape[0])
        self.n_actions = int(self.envs.single_action_space.n)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        """Start every environment (env n seeded with ``seed + n``); returns ``(N, obs_dim)``."""
        obs, _ = self.envs.reset(seed=seed)
        return torch.as_tensor(obs, dtype=torch.float32)

    def step(self, actions: torch.Tensor):
        """Returns ``(obs, rewards, terminated, truncated, final_obs)``, each with leading axis ``N``."""
        obs, rewards, terminated, truncated, info = self.envs.step(actions.numpy())
        final_obs = obs.copy()
        if "_final_obs" in info:
            for n in info["_final_obs"].nonzero()[0]:
                final_obs[n] = info["final_obs"][n]
        return (
            torch.as_tensor(obs, dtype=torch.float32),
            torch.as_tensor(rewards, dtype=torch.float32),
            torch.as_tensor(terminated),
            torch.as_tensor(truncated),
            torch.as_tensor(final_obs, dtype=torch.float32),
        )

    def close(self) -> None:
        """Close the environments."""
        self.envs.close()


def mlp(
    in_dim: int, out_dim: int, hidden: int = 64, last_gain: float = 1.0, generator: torch.Generator | None = None
) -> nn.Sequential:
    """Two tanh hidden layers, orthogonal initialisation (CleanRL's ``layer_init``), zero biases.

    ``last_gain`` scales the output layer: 0.01 for an actor (its first policy is nearly
    uniform), 1.0 for a critic.
    """
    layers = [nn.Linear(in_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, out_dim)]
    for layer, gain in zip(layers[::2], (math.sqrt(2), math.sqrt(2), last_gain)):
        nn.init.orthogonal_(layer.weight, gain=gain, generator=generator)
        nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers)


def cartpole_models(hidden: int = 64, seed: int = 0, obs_dim: int = 4, n_actions: int = 2):
    """A fresh ``(actor, critic)`` pair for CartPole, initialised from ``seed`` (no global RNG touched)."""
    g = torch.Generator().manual_seed(_validate.require_int("seed", seed, minimum=0))
    return mlp(obs_dim, n_actions, hidden, 0.01, g), mlp(obs_dim, 1, hidden, 1.0, g)


def evaluate_policy(actor_model: nn.Module, env, seed: int = 10_000, greedy: bool = False) -> list[float]:
    """The return of one episode in each of the env's ``N`` environments, with the policy as it is.

    Args:
        actor_model: maps observations to logits.
        env: a vectorised environment (fresh episodes are started with ``seed``).
        greedy: take the most likely action instead of sampling one.
    """
    g = torch.Generator().manual_seed(seed)
    obs = env.reset(seed=seed)
    N = obs.shape[0]
    totals, running, finished = [math.nan] * N, torch.zeros(N, dtype=torch.float64), torch.zeros(N, dtype=torch.bool)
    with torch.no_grad():
        while not finished.all():
            logits = actor_model(obs)  # (N, A)
            if greedy:
                actions = logits.argmax(-1)  # (N,)
            else:
                actions = torch.multinomial(torch.softmax(logits, -1), 1, generator=g)[:, 0]  # (N,)
            obs, rewards, terminated, truncated, _ = env.step(actions)
            running += rewards.double()
            for n in ((terminated | truncated) & ~finished).nonzero()[:, 0].tolist():
                totals[n], finished[n] = float(running[n]), True
    return totals


# ---------------------------------------------------------------------------
# The sorting task as token-level episodes: PPO for a language model
# ---------------------------------------------------------------------------


class SortingEnv:
    """The sorting task with one step per response token and the reward at the last token.

    Each of the ``N = B * G`` environments writes one response (``G`` per prompt) of ``T``
    tokens, one token per step. The observation of a state s_t is the prompt, the response
    so far (``PAD = V`` where not written yet) and the position t: ``(Tp + T + 1,)`` long.
    Every episode lasts exactly ``T`` steps and terminates; the reward is 0 at every token
    but the last, where it is ``reward_fn(prompt, response)``. A rollout of ``T`` steps is then
    one response per environment, and GAE runs over its tokens.

    Args:
        prompts: ``(B, Tp)`` token ids; responses have ``T = Tp`` tokens.
        group_size: ``G``, episodes per prompt.
        vocab_size: ``V`` (default: largest prompt token + 1).
        reward_fn: ``(prompt (..., T), response (..., T)) -> (...)``, the CS336 sorting reward by default.
    """

    def __init__(
        self,
        prompts: torch.Tensor,
        group_size: int = 16,
        vocab_size: int | None = None,
        reward_fn=sort_inclusion_ordering_reward,
    ):
        _validate.require_tensor("prompts", prompts, floating=False, min_dim=2)
        if prompts.dim() != 2 or prompts.is_floating_point() or prompts.dtype == torch.bool:
            raise ValueError(
                f"prompts: expected integer token ids of shape (B, T), got {prompts.dtype} "
                f"of shape {tuple(prompts.shape)}"
            )
        self.group_size = _validate.require_int("group_size", group_size, minimum=1)
        self.vocab_size = (
            int(prompts.max()) + 1 if vocab_size is None else _validate.require_int("vocab_size", vocab_size, 1)
        )
        self.prompts = prompts.long().repeat_interleave(group_size, dim=0)  # (N, Tp): G copies of each prompt
        self.num_envs, self.length = self.prompts.shape
        self.reward_fn = reward_fn
        self.pad = self.vocab_size  # an id no token has: "not written yet"

    def _obs(self) -> torch.Tensor:
        position = torch.full((self.num_envs, 1), self.t, dtype=torch.long)
        return torch.cat([self.prompts, self.response, position], dim=1)  # (N, Tp + T + 1)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        """Start ``N`` empty responses (the task has no randomness: ``seed`` is ignored)."""
        self.response = torch.full_like(self.prompts, self.pad)  # (N, T)
        self.t = 0
        return self._obs()

    def step(self, actions: torch.Tensor):
        """Write token ``actions[n]`` at position t of response n; see :class:`GymVectorEnv` for the outputs."""
        self.response = self.response.clone()
        self.response[:, self.t] = actions
        self.t += 1
        no = torch.zeros(self.num_envs, dtype=torch.bool)
        if self.t < self.length:
            obs = self._obs()
            return obs, torch.zeros(self.num_envs), no, no, obs
        final_obs = self._obs()  # the finished response, scored at its last token
        rewards = self.reward_fn(self.prompts, self.response).float()  # (N,)
        return self.reset(), rewards, ~no, no, final_obs


class TokenPolicy(nn.Module):
    """The logits of the next token, from a model that maps prompts ``(M, Tp)`` to logits ``(M, T, V)``.

    Wraps :class:`course_lib.models.SortingPolicy` for :class:`SortingEnv`'s observations: it
    reads the prompt and the position t and returns position t's logits ``(M, V)``. (That
    model is non-autoregressive: it never looks at the tokens already written.)
    """

    def __init__(self, model: nn.Module, prompt_length: int):
        super().__init__()
        self.model, self.prompt_length = model, _validate.require_int("prompt_length", prompt_length, minimum=1)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        logits = self.model(obs[:, : self.prompt_length])  # (M, T, V)
        position = obs[:, -1].clamp(max=logits.shape[1] - 1)  # (M,); a finished response has t = T
        return logits[torch.arange(obs.shape[0]), position]  # (M, V)


class TokenCritic(nn.Module):
    """V(prompt, response so far): an MLP on the one-hot tokens and position of :class:`SortingEnv`'s states.

    Unlike the policy it reads the tokens already written, as a critic over a language
    model's prefixes must: the reward still to come depends on them.
    """

    def __init__(self, vocab_size: int, prompt_length: int, hidden: int = 64, seed: int = 0):
        super().__init__()
        self.vocab_size = _validate.require_int("vocab_size", vocab_size, minimum=1)
        self.length = _validate.require_int("prompt_length", prompt_length, minimum=1)
        in_dim = 2 * self.length * (vocab_size + 1) + self.length + 1  # tokens (PAD included), then t in 0..T
        g = torch.Generator().manual_seed(_validate.require_int("seed", seed, minimum=0))
        self.net = mlp(in_dim, 1, hidden, 1.0, g)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        tokens = nn.functional.one_hot(obs[:, :-1], self.vocab_size + 1).flatten(1)  # (M, 2T * (V + 1))
        position = nn.functional.one_hot(obs[:, -1], self.length + 1)  # (M, T + 1)
        return self.net(torch.cat([tokens, position], dim=1).float())[:, 0]  # (M,)


def sorting_ppo_models(model: nn.Module, prompt_length: int, vocab_size: int, hidden: int = 64, seed: int = 0):
    """``(actor, critic, ref)`` for PPO on :class:`SortingEnv`: the wrapped policy, a critic, a frozen copy."""
    actor = TokenPolicy(model, prompt_length)
    ref = copy.deepcopy(actor).requires_grad_(False)
    return actor, TokenCritic(vocab_size, prompt_length, hidden, seed), ref
