"""A contextual bandit with a tabular softmax policy: the test bed of chapter 03.

``S`` states (think prompts), ``K`` actions (think whole responses), one reward per
(state, action), and a softmax policy whose ``S * K`` logits are the parameters.
It is small enough to enumerate, so every expectation that ``course_lib.lectures.variance``
estimates from samples also has an exact value here to check it against.

Shapes: ``S`` states, ``K`` actions, ``D`` state features, ``P = S * K`` parameters,
``N`` samples, ``B`` groups (prompts), ``G`` responses per group.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from course_lib import _validate
from course_lib.policy_gradient import expected_reward_gradient

# ---------------------------------------------------------------------------
# 2. A contextual bandit with a tabular softmax policy
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ContextualBandit:
    """``S`` states, ``K`` actions, one reward per (state, action): a one-step RL problem.

    Think of a state as a prompt, an action as a whole response, and the reward
    as the verifier's score. The policy is ``pi(. | s) = softmax(logits[s])``
    with a ``[S, K]`` table of logits as its parameters.

    Args:
        rewards: ``[S, K]`` the reward of action ``a`` in state ``s``.
        features: ``[S, D]`` what a value function may see of each state.
        state_probs: ``[S]`` how often each state is drawn (sums to 1).
    """

    rewards: torch.Tensor
    features: torch.Tensor
    state_probs: torch.Tensor

    def __post_init__(self) -> None:
        _validate.require_tensor("rewards", self.rewards)
        if self.rewards.dim() != 2:
            raise ValueError(f"rewards: expected shape (S, K), got {tuple(self.rewards.shape)}")
        S = self.rewards.shape[0]
        _validate.require_tensor("features", self.features)
        if self.features.dim() != 2 or self.features.shape[0] != S:
            raise ValueError(f"features: expected shape ({S}, D), one row per state, got {tuple(self.features.shape)}")
        _require_probs("state_probs", self.state_probs, (S,))

    @property
    def num_states(self) -> int:
        return self.rewards.shape[0]

    @property
    def num_actions(self) -> int:
        return self.rewards.shape[1]


def two_state_bandit() -> ContextualBandit:
    """The example of Stanford CS336 (2025) lecture 17: in state 1 the actions earn 11 and 9, in state 2, 0 and 2.

    The better action of state 1 (11) and the worse one (9) both out-earn the
    better action of state 2 (2): without a baseline every action is pushed up,
    the worse of state 1 more than the better of state 2. Both states are equally
    likely; the features are one-hot, so a linear value function can fit each state.
    """
    rewards = torch.tensor([[11.0, 9.0], [0.0, 2.0]], dtype=torch.float64)  # (S=2, K=2)
    return ContextualBandit(rewards, torch.eye(2, dtype=torch.float64), torch.full((2,), 0.5, dtype=torch.float64))


def random_bandit(num_states: int = 6, num_actions: int = 4, num_features: int = 2, seed: int = 0) -> ContextualBandit:
    """A random bandit whose states differ a lot in their typical reward, as prompts differ in difficulty.

    ``R(s, a) = 5 + 3 * (phi(s) . u) + 0.5 * phi(s)_0^2 + eps(s, a)``: a state offset that a
    linear value function of ``phi`` captures mostly, not exactly, plus a
    per-action spread ``eps ~ N(0, 1)`` that only the policy can exploit.

    Args:
        num_states: ``S``, the number of states (prompts).
        num_actions: ``K``, the number of actions (responses) in each state.
        num_features: ``D``, the features per state a value function may use.
        seed: seeds a private ``torch.Generator``.
    """
    for name, value in (("num_states", num_states), ("num_actions", num_actions), ("num_features", num_features)):
        _validate.require_int(name, value, minimum=1)
    _validate.require_int("seed", seed)
    g = torch.Generator().manual_seed(seed)
    phi = torch.randn(num_states, num_features, generator=g, dtype=torch.float64)  # (S, D)
    u = torch.randn(num_features, generator=g, dtype=torch.float64)  # (D,)
    offset = 5.0 + 3.0 * phi @ u + 0.5 * phi[:, 0] ** 2  # (S,)
    rewards = offset[:, None] + torch.randn(num_states, num_actions, generator=g, dtype=torch.float64)  # (S, K)
    return ContextualBandit(rewards, phi, torch.full((num_states,), 1.0 / num_states, dtype=torch.float64))


def sample_groups(
    bandit: ContextualBandit,
    logits: torch.Tensor,
    num_groups: int,
    group_size: int,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draw ``B`` states and ``G`` actions in each from ``pi = softmax(logits)``.

    Args:
        bandit: the problem.
        logits: ``[S, K]`` the policy's parameters.
        num_groups: ``B``, the number of states drawn (one group each).
        group_size: ``G``, actions per state (1 for independent samples).
        generator: a seeded ``torch.Generator`` for reproducible draws.

    Returns:
        ``(states [B], actions [B, G], rewards [B, G])``.
    """
    _require_logits(bandit, logits)
    _validate.require_int("num_groups", num_groups, minimum=1)
    _validate.require_int("group_size", group_size, minimum=1)
    states = torch.multinomial(bandit.state_probs, num_groups, replacement=True, generator=generator)  # (B,)
    pi = torch.softmax(logits.detach(), dim=-1)[states]  # (B, K)
    actions = torch.multinomial(pi, group_size, replacement=True, generator=generator)  # (B, G)
    rewards = bandit.rewards.to(logits.dtype)[states[:, None], actions]  # (B, G)
    return states, actions, rewards


def bandit_scores(logits: torch.Tensor, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """The score ``grad_logits log pi(a | s)`` of the tabular softmax policy, in closed form.

    ``log pi(a | s) = logits[s, a] - logsumexp(logits[s])``, so its gradient is
    ``onehot(a) - pi(. | s)`` in row ``s`` of the logits and zero in every other row.

    Args:
        logits: ``[S, K]`` the policy's parameters.
        states: ``[...]`` integer state ids.
        actions: ``[...]`` integer action ids, the same shape.

    Returns:
        ``[..., S * K]`` one flattened gradient per sample (row-major, like ``logits.flatten()``).
    """
    _validate.require_tensor("logits", logits)
    if logits.dim() != 2:
        raise ValueError(f"logits: expected shape (S, K), got {tuple(logits.shape)}")
    S, K = logits.shape
    _require_ids("states", states, S)
    _require_ids("actions", actions, K)
    _validate.require_shape("actions", actions, states.shape, like="states")
    pi = torch.softmax(logits.detach(), dim=-1)  # (S, K)
    in_row = torch.nn.functional.one_hot(actions, K).to(logits.dtype) - pi[states]  # (..., K)
    which_row = torch.nn.functional.one_hot(states, S).to(logits.dtype)  # (..., S)
    return (which_row[..., :, None] * in_row[..., None, :]).flatten(-2)  # (..., S * K)


def bandit_values(bandit: ContextualBandit, logits: torch.Tensor) -> torch.Tensor:
    """``V(s) = sum_a pi(a | s) R(s, a)``, the mean reward of each state under the policy: ``[S]``."""
    _require_logits(bandit, logits)
    return (torch.softmax(logits.detach(), -1) * bandit.rewards.to(logits.dtype)).sum(-1)  # (S,)


def bandit_exact_gradient(bandit: ContextualBandit, logits: torch.Tensor) -> torch.Tensor:
    """The exact ``grad J`` with ``J = sum_s p(s) sum_a pi(a | s) R(s, a)``: ``[S * K]``, by enumeration."""
    _require_logits(bandit, logits)
    per_state = expected_reward_gradient(logits.detach(), bandit.rewards.to(logits.dtype))  # (S, K)
    return (bandit.state_probs.to(logits.dtype)[:, None] * per_state).flatten()  # (S * K,)


def bandit_outcomes(bandit: ContextualBandit, logits: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every (state, action) pair with its probability ``p(s) pi(a | s)``, for exact expectations.

    Returns:
        A dict of ``[S, K]`` tensors ``probs``, ``states``, ``actions``, ``rewards``
        and ``scores`` ``[S, K, S * K]``.
    """
    _require_logits(bandit, logits)
    S, K = bandit.rewards.shape
    states = torch.arange(S)[:, None].expand(S, K)  # (S, K)
    actions = torch.arange(K)[None, :].expand(S, K)  # (S, K)
    probs = bandit.state_probs.to(logits.dtype)[:, None] * torch.softmax(logits.detach(), -1)  # (S, K)
    return {
        "probs": probs,
        "states": states,
        "actions": actions,
        "rewards": bandit.rewards.to(logits.dtype),
        "scores": bandit_scores(logits, states, actions),
    }


def exact_moments(probs: torch.Tensor, estimates: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Exact mean and total variance of an estimator that takes value ``estimates[n]`` with probability ``probs[n]``.

    The total variance is the trace of the covariance, ``sum_n probs[n] |estimates[n] - mean|^2``:
    the population formula, because this is the distribution itself, not a sample of it.

    Args:
        probs: ``[N]`` non-negative, summing to 1.
        estimates: ``[N, P]`` the value of the estimator on each outcome.

    Returns:
        ``(mean [P], total variance as a float)``.
    """
    _validate.require_tensor("estimates", estimates)
    if estimates.dim() != 2:
        raise ValueError(f"estimates: expected shape (N, P), got {tuple(estimates.shape)}")
    _require_probs("probs", probs, estimates.shape[:1])
    probs = probs.to(estimates.dtype)
    mean = (probs[:, None] * estimates).sum(0)  # (P,)
    return mean, float((probs * ((estimates - mean) ** 2).sum(-1)).sum())


# ---------------------------------------------------------------------------
# Validation helpers
# ---------------------------------------------------------------------------


def _require_ids(name: str, ids, size: int) -> None:
    _validate.require_tensor(name, ids, floating=False)
    if ids.is_floating_point() or ids.dtype == torch.bool:
        raise ValueError(f"{name}: expected an integer tensor of ids, got dtype {ids.dtype}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= size):
        raise ValueError(f"{name}: expected ids in [0, {size}), got values in [{int(ids.min())}, {int(ids.max())}]")


def _require_probs(name: str, probs, shape) -> None:
    _validate.require_tensor(name, probs)
    _validate.require_shape(name, probs, shape)
    if bool((probs < 0).any()):
        raise ValueError(f"{name}: expected non-negative probabilities, got a negative entry")
    total = probs.sum(-1)
    if not torch.allclose(total, torch.ones_like(total), atol=1e-5):
        raise ValueError(f"{name}: expected probabilities summing to 1 over the last axis, got sums {total.tolist()}")


def _require_logits(bandit: ContextualBandit, logits) -> None:
    if not isinstance(bandit, ContextualBandit):
        raise ValueError(f"bandit: expected a ContextualBandit, got {type(bandit).__name__}")
    _validate.require_tensor("logits", logits)
    _validate.require_shape("logits", logits, bandit.rewards.shape, like="bandit.rewards (S, K)")
