"""The REINFORCE estimator one sample at a time: per-sample gradients, the optimal baseline, a learned value.

Chapter 03's measurements of what a baseline buys (:mod:`course_lib.lectures.variance` gives the overview and
re-exports everything here, so a notebook needs one import):

1. **Per-sample gradients** (:func:`per_sample_grads`): row ``i`` is ``grad log pi(a_i | s_i)``, a row of the
   Jacobian of the vector of log-probs.
3. **The optimal baseline** (:func:`optimal_baseline`): ``b*(s) = E[R |psi|^2] / E[|psi|^2]``, the baseline that
   minimises the total variance of ``g = (R - b) psi`` (Weaver and Tao 2001; Greensmith et al. 2004), and the
   per-sample estimates ``(R - b) psi`` it is measured on (:func:`baselined_estimates`).
4. **A learned value baseline** (:func:`fit_linear_value`): ``V_w(s) = w . phi(s)`` fit by least squares to
   sampled rewards, the critic of actor-critic methods in its smallest form.

(Item 2 is the contextual bandit they run on, :mod:`course_lib.lectures.bandits`.) Shapes: ``S`` states, ``K``
actions, ``D`` state features, ``P`` parameters, ``N`` samples.
"""

from __future__ import annotations

from typing import Sequence

import torch

from course_lib import _validate
from course_lib.lectures.bandits import _require_probs

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
    params = list(params)  # model.parameters() is a generator: read it once
    _check_per_sample_grads(logp, params)
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
    _check_optimal_baseline(rewards, scores, probs)
    if probs is None:
        probs = torch.full_like(rewards, 1.0 / rewards.shape[-1])  # (..., N): the samples weigh the same
    else:
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
    _check_baselined_estimates(rewards, scores, baselines)
    if baselines.shape == rewards.shape:  # one baseline per sample
        return (rewards - baselines)[:, None] * scores  # (N, P)
    return (rewards[:, None] - baselines) * scores  # (N, P): one per sample and parameter


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
    _check_fit_linear_value(features, targets, l2)
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
# Argument checks: a public function's first line calls its own
# ---------------------------------------------------------------------------


def _check_per_sample_grads(logp, params: list) -> None:
    _validate.require_tensor("logp", logp)
    if logp.dim() != 1:
        raise ValueError(f"logp: expected shape (N,), one log-prob per sample, got {tuple(logp.shape)}")
    if not logp.requires_grad:
        raise ValueError("logp: carries no gradient; compute it from the parameters without .detach() or no_grad()")
    if not params or not all(isinstance(p, torch.Tensor) and p.requires_grad for p in params):
        raise ValueError("params: expected a non-empty list of tensors that require grad (model.parameters())")


def _check_optimal_baseline(rewards, scores, probs) -> None:
    _validate.require_tensor("rewards", rewards, min_dim=1)
    _validate.require_tensor("scores", scores, min_dim=1)
    _validate.require_shape("scores", scores, (*rewards.shape, scores.shape[-1]), like="rewards plus a last (P) axis")
    if probs is not None:
        _require_probs("probs", probs, rewards.shape)


def _check_baselined_estimates(rewards, scores, baselines) -> None:
    _validate.require_tensor("rewards", rewards)
    if rewards.dim() != 1:
        raise ValueError(f"rewards: expected shape (N,), got {tuple(rewards.shape)}")
    _validate.require_tensor("scores", scores)
    if scores.dim() != 2 or scores.shape[0] != rewards.shape[0]:
        raise ValueError(f"scores: expected shape ({rewards.shape[0]}, P) like rewards, got {tuple(scores.shape)}")
    _validate.require_tensor("baselines", baselines)
    if baselines.shape != rewards.shape:
        _validate.require_shape("baselines", baselines, scores.shape, like="rewards (N,) or scores (N, P)")


def _check_fit_linear_value(features, targets, l2) -> None:
    _validate.require_tensor("features", features)
    if features.dim() != 2:
        raise ValueError(f"features: expected shape (N, D), got {tuple(features.shape)}")
    _validate.require_tensor("targets", targets)
    _validate.require_shape("targets", targets, features.shape[:1], like="features without its last (D) axis")
    _validate.require_non_negative("l2", l2)
