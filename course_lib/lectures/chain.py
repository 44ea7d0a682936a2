"""A chain whose values are known exactly, to measure the bias and variance of GAE.

Schulman et al. 2015, "High-Dimensional Continuous Control Using Generalized
Advantage Estimation", section 3: GAE(gamma, 1) estimates the advantage without
bias whatever the critic, at a high variance; GAE(gamma, 0) has a low variance
but is biased unless the critic is exact; lam trades one for the other. On a
real task we cannot see that trade-off, because the true advantage is unknown.
Here it is known.

The environment is a random walk on ``n_states`` states in a row (Sutton & Barto's
random walk, examples 6.2 and 7.1, with actions). In state ``s`` the fixed policy moves right with
probability ``p_right``; with probability ``slip`` the move goes the other way.
Stepping off the right end ends the episode with reward ``reward_right``, off the
left end with ``reward_left``; every other step gives 0. With ``P`` the transitions
between non-terminal states under the policy and ``r`` the expected reward of a
step, the values solve the Bellman equation exactly by linear algebra:

    V = r + gamma * P V      =>      V = (I - gamma * P)^{-1} r,
    Q(s, a) = r(s, a) + gamma * sum_s' P(s' | s, a) V(s'),      A(s, a) = Q(s, a) - V(s).

(Every walk leaves the chain with probability 1, so ``I - P`` is invertible even for gamma = 1.)

What "the truth" is for an estimate made with an imperfect critic V_hat: GAE
returns A_hat_t = G^lam_t - V_hat(s_t), the lambda-return minus the critic's value.
Its error against A(s_t, a_t) splits in two,

    A_hat_t - A(s_t, a_t) = [G^lam_t - Q(s_t, a_t)] - [V_hat(s_t) - V(s_t)],

and the second part depends on the state only: a baseline, which leaves the
policy gradient unbiased (chapter 03; GAE paper, proposition 1). So the course
measures the estimate against ``Q(s_t, a_t) - V_hat(s_t)``, the true advantage
seen from the critic's baseline (equal to A when the critic is exact): with that
target, lam = 1 is unbiased for every critic, as the paper says.

Conventions: states ``0 .. n_states - 1``; the index ``n_states`` stands for "the
episode is over" (the terminal state, and the padding after it), with value 0.
Actions: ``LEFT = 0``, ``RIGHT = 1``. Everything is float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from course_lib import _validate, gae

LEFT, RIGHT = 0, 1


@dataclass(frozen=True)
class Chain:
    """A random walk with actions, small enough to solve exactly."""

    n_states: int = 7
    """Number of non-terminal states, in a row."""
    p_right: float = 0.5
    """The fixed policy: pi(RIGHT | s) in every state."""
    slip: float = 0.1
    """Probability that a move goes the other way (randomness of the environment)."""
    reward_left: float = -1.0
    """Reward for stepping off the left end."""
    reward_right: float = 1.0
    """Reward for stepping off the right end."""

    def __post_init__(self):
        if isinstance(self.n_states, bool) or not isinstance(self.n_states, int) or self.n_states < 1:
            raise ValueError(f"n_states: expected a positive integer, got {self.n_states!r}")
        _validate.require_unit_interval("p_right", self.p_right)
        slip = _validate.require_unit_interval("slip", self.slip)
        if slip >= 1.0:
            raise ValueError(f"slip: expected a number in [0, 1), got {slip}")
        _validate._as_float("reward_left", self.reward_left)
        _validate._as_float("reward_right", self.reward_right)

    @property
    def start(self) -> int:
        """Episodes start in the middle state (the left one of the two middles when n_states is even)."""
        return (self.n_states - 1) // 2


# ---------------------------------------------------------------------------
# The model: transitions, rewards, the policy
# ---------------------------------------------------------------------------


def dynamics(chain: Chain) -> tuple[torch.Tensor, torch.Tensor]:
    """Transition probabilities and expected rewards of every state-action pair.

    Returns:
        ``(P, r)``: ``P[s, a, s']`` (shape ``(S, 2, S)``) is the probability of moving to the
        non-terminal state s' (each row sums to less than 1 at the ends: the rest is
        termination); ``r[s, a]`` (shape ``(S, 2)``) the expected reward of the step.
    """
    S = chain.n_states
    P = torch.zeros(S, 2, S, dtype=torch.float64)
    r = torch.zeros(S, 2, dtype=torch.float64)
    for s in range(S):
        for a, direction in ((LEFT, -1), (RIGHT, +1)):
            # The intended move happens with probability 1 - slip, the opposite one with slip.
            for step, prob in ((direction, 1.0 - chain.slip), (-direction, chain.slip)):
                target = s + step
                if target < 0:
                    r[s, a] += prob * chain.reward_left
                elif target >= S:
                    r[s, a] += prob * chain.reward_right
                else:
                    P[s, a, target] += prob
    return P, r


def policy_probs(chain: Chain) -> torch.Tensor:
    """``pi[s, a]``, shape ``(S, 2)``: the fixed policy, the same in every state."""
    pi = torch.tensor([1.0 - chain.p_right, chain.p_right], dtype=torch.float64)
    return pi.expand(chain.n_states, 2).clone()


# ---------------------------------------------------------------------------
# The truth, by linear algebra
# ---------------------------------------------------------------------------


def true_values(chain: Chain, gamma: float) -> torch.Tensor:
    """V(s), shape ``(S,)``: the solution of ``V = r_pi + gamma * P_pi V``."""
    gamma = _validate.require_unit_interval("gamma", gamma)
    P, r = dynamics(chain)
    pi = policy_probs(chain)
    P_pi = torch.einsum("sa,sat->st", pi, P)  # (S, S): transitions under the policy
    r_pi = (pi * r).sum(-1)  # (S,): expected reward of a step
    eye = torch.eye(chain.n_states, dtype=torch.float64)
    return torch.linalg.solve(eye - gamma * P_pi, r_pi)


def true_q_values(chain: Chain, gamma: float) -> torch.Tensor:
    """Q(s, a), shape ``(S, 2)``: one step, then V (0 once the episode is over)."""
    V = true_values(chain, gamma)
    P, r = dynamics(chain)
    return r + gamma * torch.einsum("sat,t->sa", P, V)


def true_advantages(chain: Chain, gamma: float) -> torch.Tensor:
    """A(s, a) = Q(s, a) - V(s), shape ``(S, 2)``; its average under the policy is 0 in every state."""
    return true_q_values(chain, gamma) - true_values(chain, gamma)[:, None]


def imperfect_critic(chain: Chain, gamma: float, noise: float = 0.3, seed: int = 0) -> torch.Tensor:
    """V_hat, shape ``(S,)``: the true values plus a fixed perturbation ``noise * N(0, 1)`` per state.

    The perturbation depends on ``seed`` only, not on gamma, so sliding gamma moves the
    truth and the critic together.
    """
    noise = _validate.require_non_negative("noise", noise)
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(chain.n_states, generator=g, dtype=torch.float64)
    return true_values(chain, gamma) + noise * z


def expected_gae(chain: Chain, gamma: float, lam: float, values: torch.Tensor) -> torch.Tensor:
    """The exact mean of GAE(gamma, lam) at a step in (s, a), with critic ``values``: shape ``(S, 2)``.

    The lambda-return obeys ``G^lam_t = r_t + gamma * ((1 - lam) V_hat(s_{t+1}) + lam * G^lam_{t+1})``
    (and ``G^lam_t = r_t`` at a terminal step), so its mean ``x(s, a)`` solves the linear system

        x = r + gamma * (1 - lam) * P V_hat + gamma * lam * P pi x,

    and the mean estimate is ``x(s, a) - V_hat(s)``. For lam = 1, x = Q whatever V_hat.

    Args:
        values: ``(S,)`` the critic V_hat.
    """
    gamma = _validate.require_unit_interval("gamma", gamma)
    lam = _validate.require_unit_interval("lam", lam)
    values = _require_values(chain, values)
    S = chain.n_states
    P, r = dynamics(chain)
    pi = policy_probs(chain)
    M = torch.einsum("sat,tb->satb", P, pi).reshape(2 * S, 2 * S)  # (2S, 2S): (s, a) -> (s', a')
    b = r + gamma * (1.0 - lam) * torch.einsum("sat,t->sa", P, values)  # (S, 2)
    x = torch.linalg.solve(torch.eye(2 * S, dtype=torch.float64) - gamma * lam * M, b.reshape(2 * S))
    return x.reshape(S, 2) - values[:, None]


# ---------------------------------------------------------------------------
# Sampling episodes, and GAE on them
# ---------------------------------------------------------------------------


class Episodes(NamedTuple):
    """A batch of episodes, padded to a common length T: every field is ``(B, T)``.

    After an episode ends, its row is padding: ``states == n_states``, reward 0.
    """

    states: torch.Tensor  # (B, T) long: s_t, or n_states on padding
    actions: torch.Tensor  # (B, T) long: a_t (0 on padding)
    rewards: torch.Tensor  # (B, T) float64
    next_states: torch.Tensor  # (B, T) long: s_{t+1}, n_states once the episode is over
    terminated: torch.Tensor  # (B, T) bool: the episode stepped off the chain at t
    truncated: torch.Tensor  # (B, T) bool: the time limit cut the episode after step t
    n_states: int  # the chain's number of states, also the padding index

    @property
    def mask(self) -> torch.Tensor:
        """``(B, T)`` bool: the real steps (not padding)."""
        return self.states != self.n_states


def sample_episodes(
    chain: Chain, n_episodes: int, seed: int = 0, max_steps: int = 200, start: int | None = None
) -> Episodes:
    """Run the fixed policy from ``start`` (default: the middle) until each episode ends or hits ``max_steps``.

    Episodes still running after ``max_steps`` steps are cut by the time limit: their
    last step is marked ``truncated`` (not ``terminated``), and its ``next_states``
    entry holds the state they stopped in, whose value is not zero.
    """
    n_episodes = _validate.require_int("n_episodes", n_episodes, minimum=1)
    max_steps = _validate.require_int("max_steps", max_steps, minimum=1)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed: expected an integer, got {seed!r}")
    start = chain.start if start is None else start
    if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start < chain.n_states:
        raise ValueError(f"start: expected a state in 0 .. {chain.n_states - 1}, got {start!r}")
    S, g = chain.n_states, torch.Generator().manual_seed(seed)
    s = torch.full((n_episodes,), start, dtype=torch.long)  # (B,)
    alive = torch.ones(n_episodes, dtype=torch.bool)  # (B,)
    columns = []
    for _ in range(max_steps):
        if not alive.any():
            break
        u = torch.rand(n_episodes, 2, generator=g, dtype=torch.float64)  # (B, 2): policy, slip
        a = (u[:, 0] < chain.p_right).long()  # (B,)
        step = (2 * a - 1) * torch.where(u[:, 1] < chain.slip, -1, 1)  # (B,): +1 right, -1 left
        s_next = s + step
        off_left, off_right = alive & (s_next < 0), alive & (s_next >= S)
        rewards = chain.reward_left * off_left.double() + chain.reward_right * off_right.double()
        terminated = off_left | off_right
        s_next = torch.where(terminated | ~alive, S, s_next)
        columns.append((torch.where(alive, s, S), torch.where(alive, a, 0), rewards, s_next, terminated))
        alive = alive & ~terminated
        s = s_next
    states, actions, rewards, next_states, terminated = (torch.stack(c, dim=1) for c in zip(*columns))
    truncated = torch.zeros_like(terminated)
    truncated[:, -1] = alive  # still walking after the last step recorded: the time limit cut it
    return Episodes(states, actions, rewards, next_states, terminated, truncated, S)


def chain_gae(
    episodes: Episodes, values: torch.Tensor, gamma: float, lam: float, truncation: str = "bootstrap"
) -> torch.Tensor:
    """GAE advantages of a batch of episodes with critic ``values``: shape ``(B, T)``, 0 on padding.

    Args:
        episodes: from :func:`sample_episodes`.
        values: ``(S,)`` the critic's V(s).
        truncation: how an episode cut by the time limit is treated: ``"bootstrap"`` (right:
            fold gamma * V(state it stopped in) into its last reward, with
            :func:`course_lib.gae.bootstrap_truncated`) or ``"terminal"`` (wrong: as if it had ended).
    """
    truncation = _validate.require_choice("truncation", truncation, ("bootstrap", "terminal"))
    v = _require_values_like(values, episodes)
    v = torch.cat([v, v.new_zeros(1)])  # (S + 1,): V = 0 once the episode is over
    # torch.take(v, states) is v[states]; it stays fast when other processes keep the cores busy.
    rewards = episodes.rewards  # (B, T)
    if truncation == "bootstrap":
        rewards = gae.bootstrap_truncated(rewards, episodes.truncated, torch.take(v, episodes.next_states), gamma)
    # Padding steps count as terminal steps of their own (reward 0, value 0): nothing leaks through them.
    dones = episodes.terminated | episodes.truncated | ~episodes.mask  # (B, T)
    last_values = torch.zeros(rewards.shape[0], dtype=torch.float64)  # unused: every row ends done
    adv, _ = gae.compute_gae(rewards, torch.take(v, episodes.states), dones, last_values, gamma, lam)
    return adv


# ---------------------------------------------------------------------------
# Bias and variance of the estimate
# ---------------------------------------------------------------------------


def gae_errors(
    chain: Chain, episodes: Episodes, values: torch.Tensor, gamma: float, lam: float, truncation: str = "bootstrap"
) -> torch.Tensor:
    """``A_hat_t - (Q(s_t, a_t) - V_hat(s_t))`` at every step, shape ``(B, T)``, 0 on padding.

    Args:
        chain: the chain the episodes were sampled from (for the truth Q).
        episodes: from :func:`sample_episodes`.
        values: ``(S,)`` the critic V_hat used by GAE and in the target.
        gamma, lam: GAE's parameters, in [0, 1].
        truncation: ``"bootstrap"`` or ``"terminal"``, as in :func:`chain_gae`.
    """
    values = _require_values(chain, values)
    target = true_q_values(chain, gamma) - values[:, None]  # (S, 2): the truth seen from the critic's baseline
    target = torch.cat([target, target.new_zeros(1, 2)])  # (S + 1, 2): 0 on padding
    adv = chain_gae(episodes, values, gamma, lam, truncation)  # (B, T)
    return adv - torch.take(target, episodes.states * 2 + episodes.actions)  # target[s_t, a_t]


def gae_statistics(chain: Chain, episodes: Episodes, values: torch.Tensor, gamma: float, lam: float) -> dict:
    """The GAE estimate against the truth, per state-action pair and overall.

    Per pair (s, a), over the steps of the batch that visit it: ``bias`` is the mean
    error, ``variance`` its variance (divided by the count). Overall, weighted by the
    visit counts, the mean squared error splits exactly:  ``mse = bias2 + variance``.
    (A pair seen n times carries sampling noise of about variance / n in its bias.)

    Returns:
        A dict with ``(S, 2)`` tensors ``target`` (Q - V_hat), ``mean`` (of the estimates, NaN
        where unvisited), ``std``, ``count``; and floats ``mse``, ``bias2``, ``variance``.
    """
    values = _require_values(chain, values)
    errors = gae_errors(chain, episodes, values, gamma, lam).flatten()  # (B * T,): 0 on padding
    S = chain.n_states
    # Which (s, a) each step visits, as s * 2 + a; padding lands in the bins of state S, dropped below.
    pair = (episodes.states * 2 + episodes.actions).flatten()  # (B * T,)
    count = torch.bincount(pair, minlength=2 * S + 2)[: 2 * S].double()  # (2S,)
    total = torch.bincount(pair, weights=errors, minlength=2 * S + 2)[: 2 * S]
    total_sq = torch.bincount(pair, weights=errors * errors, minlength=2 * S + 2)[: 2 * S]
    bias = total / count.clamp(min=1)  # (2S,)
    var = (total_sq / count.clamp(min=1) - bias**2).clamp(min=0)
    n = count.sum()
    mse = float(total_sq.sum() / n)
    bias2 = float((count * bias**2).sum() / n)
    target = true_q_values(chain, gamma) - values[:, None]
    visited = (count > 0).reshape(S, 2)
    mean = torch.where(visited, target + bias.reshape(S, 2), torch.nan)
    return {
        "target": target,
        "mean": mean,
        "std": var.sqrt().reshape(S, 2),
        "count": count.reshape(S, 2),
        "mse": mse,
        "bias2": bias2,
        "variance": max(mse - bias2, 0.0),
    }


def bias_variance(
    chain: Chain, episodes: Episodes, values: torch.Tensor, gamma: float, lams: Sequence[float]
) -> dict[str, torch.Tensor]:
    """Mean squared error, bias^2 and variance of GAE(gamma, lam) for each lam: ``(L,)`` tensors.

    Also ``exact_bias2``: the bias^2 from :func:`expected_gae` (no sampling noise),
    weighted by the same visit counts, and ``lam``, the lambdas as a tensor.

    Args:
        lams: the lambdas, each in [0, 1]; the other arguments as in :func:`gae_statistics`.
    """
    lams = torch.as_tensor(lams, dtype=torch.float64).flatten()  # (L,)
    rows = {key: [] for key in ("mse", "bias2", "variance", "exact_bias2")}
    for lam in lams.tolist():
        stats = gae_statistics(chain, episodes, values, gamma, lam)
        exact = expected_gae(chain, gamma, lam, values) - stats["target"]  # (S, 2)
        rows["exact_bias2"].append(float((stats["count"] * exact**2).sum() / stats["count"].sum()))
        for key in ("mse", "bias2", "variance"):
            rows[key].append(stats[key])
    return {"lam": lams, **{key: torch.tensor(v, dtype=torch.float64) for key, v in rows.items()}}


# ---------------------------------------------------------------------------
# Validation helpers
# ---------------------------------------------------------------------------


def _require_values(chain: Chain, values) -> torch.Tensor:
    _validate.require_tensor("values", values)
    _validate.require_shape("values", values, (chain.n_states,), like="(n_states,)")
    return values.double()


def _require_values_like(values, episodes: Episodes) -> torch.Tensor:
    _validate.require_tensor("values", values)
    _validate.require_shape("values", values, (episodes.n_states,), like="(n_states,) of the episodes' chain")
    return values.double()
