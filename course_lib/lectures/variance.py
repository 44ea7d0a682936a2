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

Items 1, 3 and 4 are :mod:`course_lib.lectures.estimators`'s, item 2 :mod:`course_lib.lectures.bandits`'s; both
are re-exported here, so chapter 03 needs one import. Item 5 is this module's own.

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
from course_lib.lectures.estimators import (  # noqa: F401 (items 1, 3 and 4, re-exported for the same reason)
    baselined_estimates,
    fit_linear_value,
    linear_value,
    optimal_baseline,
    per_sample_grads,
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
# 5. Group baselines: the bridge to GRPO (1, 3 and 4 are in estimators.py)
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
