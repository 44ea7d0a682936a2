"""Measuring what a baseline buys: per-sample gradients, the optimal baseline, a learned value baseline.

The REINFORCE estimate of ``grad J`` from one state ``s`` and one action ``a ~ pi(. | s)`` is

    g = (R(s, a) - b) * grad log pi(a | s).

For a baseline ``b = b(s)`` that ignores the action, ``E[g]`` is the true gradient
(Williams 1992; see ``course_lib.baselines``): the baseline can only change the
variance. This module measures that variance and finds the baseline that
minimises it, in the order chapter 03 teaches:

1. **Per-sample gradients** (:func:`per_sample_grads`): row ``i`` is
   ``grad log pi(a_i | s_i)``, a row of the Jacobian of the vector of log-probs.
2. **A contextual bandit** (:class:`~course_lib.lectures.bandits.ContextualBandit`, in ``bandits.py``): ``S``
   states (prompts), ``K`` actions (responses), a reward table, and a tabular softmax policy whose
   ``S * K`` logits are the parameters. Small enough to enumerate, so every
   expectation has an exact value to check samples against. Its score function
   is known in closed form (:func:`bandit_scores`).
3. **The optimal baseline** (:func:`optimal_baseline`). The total variance of
   ``g`` (the trace of its covariance) is ``E[(R - b)^2 |psi|^2] - |E[g]|^2`` with
   ``psi = grad log pi(a | s)`` the score; the second term does not depend on ``b``,
   so setting the derivative ``-2 E[(R - b) |psi|^2]`` to zero gives

       b*(s) = E[R |psi|^2] / E[|psi|^2],

   a reward average weighted by the squared score norm (Weaver and Tao 2001,
   "The Optimal Reward Baseline for Gradient-Based Reinforcement Learning"; Greensmith
   et al. 2004). Minimising each coordinate's variance separately gives one
   baseline per parameter, ``b*_p = E[R psi_p^2] / E[psi_p^2]``, lower still.
4. **A learned value baseline** (:func:`fit_linear_value`): ``V_w(s) = w . phi(s)``
   fit by least squares to sampled rewards, the critic of actor-critic methods
   in its smallest form (Schulman et al. 2015, "High-Dimensional Continuous
   Control Using Generalized Advantage Estimation", section 5, fits its value
   function by regression the same way).
5. **Group baselines** (:func:`group_baseline`): with ``G`` responses per prompt,
   the mean of the *other* responses' rewards (leave-one-out, Kool et al. 2019,
   "Buy 4 REINFORCE Samples, Get a Baseline for Free!"; RLOO in Ahmadian et al.
   2024) ignores the response it baselines, so it is unbiased; the mean of the
   whole group, itself included (GRPO, Shao et al. 2024), does not, and scales
   the expected gradient by ``(G - 1) / G`` (:func:`group_gradient_estimates`
   measures it).

Shapes: ``S`` states, ``K`` actions, ``D`` state features, ``P = S * K``
parameters, ``N`` samples, ``B`` groups (prompts), ``G`` responses per group.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import torch

from course_lib import _validate
from course_lib._threads import one_thread
from course_lib.lectures.bandits import (  # noqa: F401 (the test bed, re-exported: chapter 03 needs one import)
    ContextualBandit,
    _require_ids,
    _require_logits,
    _require_probs,
    bandit_exact_gradient,
    bandit_outcomes,
    bandit_scores,
    bandit_values,
    exact_moments,
    random_bandit,
    sample_groups,
    two_state_bandit,
)
from course_lib.policy_gradient import expected_reward_gradient

BASELINES = ("none", "group_mean", "leave_one_out", "value", "optimal")
BASELINE_LABELS = {
    "none": "no baseline",
    "group_mean": "group mean, itself included (GRPO)",
    "leave_one_out": "leave-one-out mean (RLOO)",
    "value": "true value V(s)",
    "optimal": "optimal b*(s)",
}

# ---------------------------------------------------------------------------
# 1. Per-sample gradients
# ---------------------------------------------------------------------------


def per_sample_grads(logp: torch.Tensor, params: Sequence[torch.Tensor], vectorize: bool = True) -> torch.Tensor:
    """One gradient per sample: row ``i`` is ``grad_theta logp[i]``, flattened over ``params``.

    ``logp[i]`` depends on the parameters and on sample ``i`` only, so these rows
    are the rows of the Jacobian ``d logp / d theta``. Autograd's ``backward``
    sums over the batch and would mix them; here each row is kept.

    Args:
        logp: ``[N]`` log-probabilities of ``N`` sampled responses, still attached
            to the graph (a loss built from them must not be reduced yet).
        params: the tensors to differentiate with respect to (``model.parameters()``).
        vectorize: ``True`` computes all rows in one batched backward pass
            (``is_grads_batched``); ``False`` loops over the samples, one
            ``torch.autograd.grad`` each (slower, same numbers).
            Either way the graph is kept, so ``logp`` can be used again.

    Returns:
        ``[N, P]`` with ``P`` the total number of entries of ``params``, in their order.
    """
    _validate.require_tensor("logp", logp)
    if logp.dim() != 1:
        raise ValueError(f"logp: expected shape (N,), one log-prob per sample, got {tuple(logp.shape)}")
    if not logp.requires_grad:
        raise ValueError("logp: carries no gradient; compute it from the parameters without .detach() or no_grad()")
    params = list(params)
    if not params or not all(isinstance(p, torch.Tensor) and p.requires_grad for p in params):
        raise ValueError("params: expected a non-empty list of tensors that require grad (model.parameters())")
    N = logp.shape[0]
    if vectorize:
        # Backpropagate the N unit vectors e_i at once: gradient i is row i of the Jacobian.
        eye = torch.eye(N, dtype=logp.dtype)  # (N, N)
        grads = torch.autograd.grad(
            logp, params, grad_outputs=eye, is_grads_batched=True, retain_graph=True, allow_unused=True
        )
        rows = [
            torch.zeros(N, p.numel(), dtype=logp.dtype) if g is None else g.reshape(N, -1)
            for g, p in zip(grads, params)
        ]
        return torch.cat(rows, dim=1)  # (N, P)
    out = []
    for i in range(N):
        grads = torch.autograd.grad(logp[i], params, retain_graph=True, allow_unused=True)
        out.append(
            torch.cat(
                [
                    torch.zeros(p.numel(), dtype=logp.dtype) if g is None else g.reshape(-1)
                    for g, p in zip(grads, params)
                ]
            )
        )
    return torch.stack(out)  # (N, P)


# ---------------------------------------------------------------------------
# 3. The optimal baseline
# ---------------------------------------------------------------------------


def optimal_baseline(
    rewards: torch.Tensor, scores: torch.Tensor, probs: torch.Tensor | None = None, per_parameter: bool = False
) -> torch.Tensor:
    """The variance-minimising baseline ``b* = E[R |psi|^2] / E[|psi|^2]`` over the last sample axis.

    Derivation (``psi`` the score ``grad log pi(a)``, ``g = (R - b) psi``): ``E[g]`` does
    not depend on ``b``, so minimising the trace of ``Cov(g)`` is minimising
    ``E[|g|^2] = E[(R - b)^2 |psi|^2]``, a parabola in ``b`` with its minimum where
    ``E[(R - b) |psi|^2] = 0``. With ``per_parameter`` each coordinate ``p`` gets its
    own ``b*_p = E[R psi_p^2] / E[psi_p^2]`` (the same argument, coordinate by coordinate).
    A coordinate whose score is always 0 gets the plain mean reward (any value is optimal there).

    Where ``|psi|^2`` is the same for every action (two equally likely actions), ``b*``
    is the mean reward; the rarer an action, the larger its score and its weight.

    Args:
        rewards: ``[..., N]`` rewards of ``N`` samples (or of all ``N`` outcomes, with ``probs``).
        scores: ``[..., N, P]`` their scores ``grad log pi``.
        probs: ``[..., N]`` the probability of each outcome for an exact expectation;
            ``None`` weighs the samples equally (a Monte Carlo estimate).
        per_parameter: one baseline per coordinate instead of one scalar.

    Returns:
        ``[...]``, or ``[..., P]`` with ``per_parameter``.
    """
    _validate.require_tensor("rewards", rewards, min_dim=1)
    _validate.require_tensor("scores", scores, min_dim=1)
    _validate.require_shape("scores", scores, (*rewards.shape, scores.shape[-1]), like="rewards plus a last (P) axis")
    if probs is None:
        probs = torch.full_like(rewards, 1.0 / rewards.shape[-1])
    else:
        _require_probs("probs", probs, rewards.shape)
        probs = probs.to(rewards.dtype)
    mean_reward = (probs * rewards).sum(-1) / probs.sum(-1)  # (...)
    weight = scores.to(rewards.dtype) ** 2  # (..., N, P)
    if not per_parameter:
        weight = weight.sum(-1)  # (..., N): |psi|^2
        num, den = (probs * rewards * weight).sum(-1), (probs * weight).sum(-1)  # (...)
    else:
        num = (probs[..., None] * rewards[..., None] * weight).sum(-2)  # (..., P)
        den = (probs[..., None] * weight).sum(-2)  # (..., P)
        mean_reward = mean_reward[..., None].expand_as(num)
    return torch.where(den > 0, num / den.clamp(min=torch.finfo(den.dtype).tiny), mean_reward)


def baselined_estimates(rewards: torch.Tensor, scores: torch.Tensor, baselines: torch.Tensor) -> torch.Tensor:
    """Per-sample REINFORCE estimates ``(R - b) * grad log pi``.

    Args:
        rewards: ``[N]`` the reward of each sample.
        scores: ``[N, P]`` its score ``grad log pi``.
        baselines: ``[N]`` one per sample, or ``[N, P]`` one per sample and parameter.

    Returns:
        ``[N, P]``.
    """
    _validate.require_tensor("rewards", rewards)
    if rewards.dim() != 1:
        raise ValueError(f"rewards: expected shape (N,), got {tuple(rewards.shape)}")
    _validate.require_tensor("scores", scores)
    if scores.dim() != 2 or scores.shape[0] != rewards.shape[0]:
        raise ValueError(f"scores: expected shape ({rewards.shape[0]}, P) like rewards, got {tuple(scores.shape)}")
    _validate.require_tensor("baselines", baselines)
    if baselines.shape == rewards.shape:
        return (rewards - baselines)[:, None] * scores  # (N, P)
    _validate.require_shape("baselines", baselines, scores.shape, like="rewards (N,) or scores (N, P)")
    return (rewards[:, None] - baselines) * scores  # (N, P)


# ---------------------------------------------------------------------------
# 4. A learned value baseline
# ---------------------------------------------------------------------------


def fit_linear_value(features: torch.Tensor, targets: torch.Tensor, l2: float = 1e-6) -> torch.Tensor:
    """Least-squares fit of ``V_w(s) = w[:D] . phi(s) + w[D]`` to observed rewards.

    Minimises ``mean_n (V_w(phi_n) - targets_n)^2 + l2 * |w|^2`` in closed form
    (the normal equations). A critic trained by SGD on the squared error
    (``course_lib.ppo.value_loss``) moves towards the same minimum.

    Args:
        features: ``[N, D]`` the features of the state of each sample.
        targets: ``[N]`` the reward each sample earned.
        l2: a small ridge penalty (non-negative) that keeps the solve well posed.

    Returns:
        ``[D + 1]`` weights, the last one the bias.
    """
    _validate.require_tensor("features", features)
    if features.dim() != 2:
        raise ValueError(f"features: expected shape (N, D), got {tuple(features.shape)}")
    _validate.require_tensor("targets", targets)
    _validate.require_shape("targets", targets, features.shape[:1], like="features without its last (D) axis")
    l2 = _validate.require_non_negative("l2", l2)
    X = torch.cat([features, torch.ones_like(features[:, :1])], dim=1)  # (N, D + 1)
    N = X.shape[0]
    A = X.T @ X / N + l2 * torch.eye(X.shape[1], dtype=X.dtype)  # (D + 1, D + 1)
    return torch.linalg.solve(A, X.T @ targets.to(X.dtype) / N)  # (D + 1,)


def linear_value(features: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``V_w(s) = weights[:D] . features + weights[D]``: ``[..., D] -> [...]``."""
    _validate.require_tensor("features", features, min_dim=1)
    _validate.require_tensor("weights", weights)
    _validate.require_shape("weights", weights, (features.shape[-1] + 1,), like="D + 1 for features (..., D)")
    return features @ weights[:-1].to(features.dtype) + weights[-1].to(features.dtype)


# ---------------------------------------------------------------------------
# 5. Group baselines: the bridge to GRPO
# ---------------------------------------------------------------------------


def group_baseline(rewards: torch.Tensor, kind: str) -> torch.Tensor:
    """The baseline of each response from the rewards of its group.

    ``"group_mean"`` is the mean of all ``G`` rewards, the response's own included
    (GRPO's centring). ``"leave_one_out"`` is the mean of the other ``G - 1``
    (RLOO): it ignores the response's own action, so it leaves the gradient
    unbiased. They are related by ``r_i - group_mean = (G - 1) / G * (r_i - leave_one_out_i)``,
    so centring on the group mean is RLOO shrunk by ``(G - 1) / G``.

    Args:
        rewards: ``[B, G]``.
        kind: ``"group_mean"`` or ``"leave_one_out"`` (which needs ``G >= 2``).

    Returns:
        ``[B, G]``.
    """
    _validate.require_tensor("rewards", rewards)
    if rewards.dim() != 2:
        raise ValueError(f"rewards: expected shape (B, G), got {tuple(rewards.shape)}")
    _validate.require_choice("kind", kind, ("group_mean", "leave_one_out"))
    G = rewards.shape[1]
    total = rewards.sum(dim=1, keepdim=True)  # (B, 1)
    if kind == "group_mean":
        return (total / G).expand_as(rewards)
    if G < 2:
        raise ValueError(f"rewards: the leave-one-out mean needs G >= 2 responses per group, got G={G}")
    return (total - rewards) / (G - 1)  # (B, G)


def group_gradient_estimates(
    bandit: ContextualBandit,
    logits: torch.Tensor,
    group_size: int,
    num_groups: int,
    baseline: str,
    state: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``B`` independent group estimates ``(1/G) sum_i (R_i - b_i) grad log pi(a_i | s)``, one state per group.

    Args:
        bandit: the problem.
        logits: ``[S, K]`` the policy's parameters.
        group_size: ``G``, responses per group.
        num_groups: ``B``, the number of groups.
        baseline: one of ``"none"``, ``"group_mean"``, ``"leave_one_out"``, ``"value"``
            (the exact ``V(s)``) or ``"optimal"`` (the exact scalar ``b*(s)``).
        state: draw every group from this state (one prompt); ``None`` draws states from ``p(s)``.
        generator: seeds the draws.

    Returns:
        ``[B, S * K]``; their mean estimates ``grad J`` (times ``(G - 1) / G`` for ``"group_mean"``),
        or ``grad_{logits[state]} J / p(state)`` when ``state`` is fixed.
    """
    _validate.require_choice("baseline", baseline, BASELINES)
    if state is not None:
        _validate.require_int("state", state, minimum=0)
        if state >= bandit.num_states:
            raise ValueError(f"state: expected a state id in [0, {bandit.num_states}), got {state}")
        only = torch.zeros_like(bandit.state_probs)
        only[state] = 1.0
        bandit = ContextualBandit(bandit.rewards, bandit.features, only)
    states, actions, rewards = sample_groups(bandit, logits, num_groups, group_size, generator)  # (B,), (B, G)
    if baseline == "none":
        b = torch.zeros_like(rewards)
    elif baseline in ("group_mean", "leave_one_out"):
        b = group_baseline(rewards, baseline)
    elif baseline == "value":
        b = bandit_values(bandit, logits)[states][:, None].expand_as(rewards)
    else:
        outcomes = bandit_outcomes(bandit, logits)
        b_star = optimal_baseline(outcomes["rewards"], outcomes["scores"], probs=torch.softmax(logits.detach(), -1))
        b = b_star[states][:, None].expand_as(rewards)  # (B, G)
    # The score lives in row s of the logits only: average over the group in that row, then place the row.
    K = bandit.num_actions
    pi = torch.softmax(logits.detach(), dim=-1)[states]  # (B, K)
    in_row = torch.nn.functional.one_hot(actions, K).to(rewards.dtype) - pi[:, None, :]  # (B, G, K)
    row = ((rewards - b)[..., None] * in_row).mean(dim=1)  # (B, K)
    which_row = torch.nn.functional.one_hot(states, bandit.num_states).to(rewards.dtype)  # (B, S)
    return (which_row[:, :, None] * row[:, None, :]).flatten(1)  # (B, S * K)


@dataclass(frozen=True)
class GroupVarianceTable:
    """Precomputed group estimates for the widget: variance and spread against group size.

    ``variance[name][j]``: trace of the covariance of the group estimate at ``group_sizes[j]``,
    times ``G`` (the variance per response: constant when the baseline is fixed).
    ``projections[name][j]``: ``[B]`` the estimates projected on the true gradient's direction.
    ``exact_norm``: ``|grad J|``, where the projections should centre.
    """

    group_sizes: tuple[int, ...]
    variance: dict[str, torch.Tensor]
    projections: dict[str, torch.Tensor]
    exact_norm: float


def group_variance_table(
    bandit: ContextualBandit | None = None,
    logits: torch.Tensor | None = None,
    state: int = 0,
    group_sizes: Sequence[int] = tuple(range(2, 33)),
    num_groups: int = 2000,
    seed: int = 0,
) -> GroupVarianceTable:
    """Measure every baseline of :data:`BASELINES` at every group size, for groups from one state.

    The widget's precomputation. Defaults: :func:`random_bandit`, logits drawn from a
    seeded normal, its state 0, ``G`` from 2 to 32, 2000 groups each.
    """
    if bandit is None:
        bandit = random_bandit()
    if logits is None:
        logits = torch.randn(
            bandit.rewards.shape, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64
        )
    _require_logits(bandit, logits)
    sizes = tuple(group_sizes)
    for G in sizes:
        _validate.require_int("group_sizes", G, minimum=2)
    # The gradient with respect to this state's logits, as a group from this state estimates it.
    exact = expected_reward_gradient(logits.detach()[state], bandit.rewards[state].to(logits.dtype))  # (K,)
    direction = exact / exact.norm()
    K = bandit.num_actions
    variance, projections = {}, {}
    # Tensors this small are faster on one thread (splitting them costs more than it saves).
    with one_thread():
        for name in BASELINES:
            # The same seed for every baseline: they see the same draws, so their differences are not noise.
            g = torch.Generator().manual_seed(seed)
            rows_var, rows_proj = [], []
            for G in sizes:
                est = group_gradient_estimates(bandit, logits, G, num_groups, name, state=state, generator=g)
                est = est[:, state * K : (state + 1) * K]  # (B, K): the other rows are zero
                rows_var.append(G * est.var(dim=0).sum())  # trace of the covariance, per response
                rows_proj.append(est @ direction)  # (B,)
            variance[name], projections[name] = torch.stack(rows_var), torch.stack(rows_proj)
    return GroupVarianceTable(sizes, variance, projections, float(exact.norm()))


@lru_cache(maxsize=1)
def default_group_variance_table() -> GroupVarianceTable:
    """:func:`group_variance_table` with its defaults, computed once per process."""
    return group_variance_table()
