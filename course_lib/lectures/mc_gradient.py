"""A Monte-Carlo policy gradient, checked against the exact one.

Williams 1992 (REINFORCE). For a one-step categorical policy ``pi = softmax(logits)``
over ``V`` actions with a reward ``r[a]`` per action, the log-derivative trick gives

    grad J = E_{a ~ pi}[ r[a] * grad log pi(a) ],    grad_logits log pi(a) = onehot(a) - pi,

so ``n`` samples ``a_1 .. a_n`` from ``pi`` give the unbiased estimate

    g_hat = 1/n sum_i r[a_i] * (onehot(a_i) - pi)                      (V,)

while the exact gradient sums over the actions instead of sampling them
(:func:`course_lib.policy_gradient.expected_reward_gradient`,
``pi * (r - sum_a pi_a r_a)``). The estimate's error shrinks like ``1/sqrt(n)``:
its covariance is ``Sigma / n``, where ``Sigma`` is the covariance of one sample's
term, so ``E ||g_hat - grad J||^2 = tr(Sigma) / n`` exactly
(:func:`mc_gradient_std` gives ``sqrt(tr Sigma)``).

Contents: :func:`mc_policy_gradient` (the exercise's reference),
:func:`mc_gradient_std` and :func:`mc_gradient_errors` (the experiment of chapter 02),
and :func:`check_mc_policy_gradient` at the bottom.
"""

from __future__ import annotations

import math

import torch

from course_lib import _validate
from course_lib.policy_gradient import expected_reward_gradient


def mc_policy_gradient(
    logits: torch.Tensor, reward_per_action: torch.Tensor, n_samples: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Monte-Carlo estimate of the gradient of ``E_{a ~ softmax(logits)}[reward_per_action[a]]``.

    Draw the actions with exactly
    ``torch.multinomial(torch.softmax(logits, dim=-1), n_samples, replacement=True, generator=generator)``,
    then average ``reward_per_action[a] * grad_logits log pi(a)`` over them, where
    ``grad_logits log pi(a) = onehot(a) - pi``.

    Args:
        logits: ``(V,)`` the policy's scores over ``V`` actions.
        reward_per_action: ``(V,)`` the reward of every action.
        n_samples: ``n``, the number of sampled actions, a positive int.
        generator: the ``torch.Generator`` to sample with (the global RNG when ``None``).

    Returns:
        ``(V,)`` the estimate of the gradient with respect to the logits (gradient
        *ascent* direction: the gradient of the expected reward, not of a loss).
    """
    _validate.require_tensor("logits", logits)
    if logits.dim() != 1:
        raise ValueError(f"logits: expected shape (V,), one score per action, got {tuple(logits.shape)}")
    _validate.require_same_shape("reward_per_action", reward_per_action, "logits", logits)
    _validate.require_int("n_samples", n_samples, minimum=1)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator: expected a torch.Generator or None, got {type(generator).__name__}")
    logits, reward_per_action = logits.detach(), reward_per_action.detach()

    pi = torch.softmax(logits, dim=-1)  # (V,)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)  # (n,)
    # The score function of a softmax: grad_logits log pi(a) = onehot(a) - pi.
    score = torch.nn.functional.one_hot(actions, logits.shape[0]).to(logits.dtype) - pi  # (n, V)
    # The log-derivative trick: weight each sample's score by its reward, then average.
    return (reward_per_action[actions, None] * score).mean(dim=0)  # (V,)


def mc_gradient_std(logits: torch.Tensor, reward_per_action: torch.Tensor) -> float:
    """``sqrt(tr Sigma)``: the root-mean-square error of a one-sample estimate, computed exactly.

    ``Sigma`` is the covariance of ``r[a] * (onehot(a) - pi)`` under ``a ~ pi``; it is a
    sum over the ``V`` actions, no sampling. The RMS error of an ``n``-sample estimate
    is this number divided by ``sqrt(n)``.

    Args:
        logits: ``(V,)``.
        reward_per_action: ``(V,)``.

    Returns:
        A Python float.
    """
    _validate.require_tensor("logits", logits)
    if logits.dim() != 1:
        raise ValueError(f"logits: expected shape (V,), got {tuple(logits.shape)}")
    _validate.require_same_shape("reward_per_action", reward_per_action, "logits", logits)
    logits, r = logits.detach().double(), reward_per_action.detach().double()
    pi = torch.softmax(logits, dim=-1)  # (V,)
    terms = r[:, None] * (torch.eye(len(pi), dtype=pi.dtype) - pi)  # (V actions, V coordinates)
    exact = expected_reward_gradient(logits, r)  # (V,) = sum_a pi_a terms[a]
    return math.sqrt(float((pi * ((terms - exact) ** 2).sum(-1)).sum()))


def mc_gradient_errors(
    logits: torch.Tensor, reward_per_action: torch.Tensor, n_samples: list[int], n_seeds: int = 20, seed: int = 0
) -> torch.Tensor:
    """Distance ``||g_hat - grad J||`` of :func:`mc_policy_gradient` to the exact gradient, per n and seed.

    Args:
        logits: ``(V,)``.
        reward_per_action: ``(V,)``.
        n_samples: the sample sizes to try.
        n_seeds: independent estimates per sample size (seeds ``seed .. seed + n_seeds - 1``).
        seed: the first seed.

    Returns:
        ``(len(n_samples), n_seeds)`` float64 tensor of Euclidean errors.
    """
    _validate.require_int("n_seeds", n_seeds, minimum=1)
    if not n_samples:
        raise ValueError("n_samples: expected a non-empty list of positive ints")
    for n in n_samples:
        _validate.require_int("n_samples", n, minimum=1)
    logits, r = logits.detach().double(), reward_per_action.detach().double()
    exact = expected_reward_gradient(logits, r)  # (V,)
    errors = torch.zeros(len(n_samples), n_seeds, dtype=torch.float64)
    for i, n in enumerate(n_samples):
        for s in range(n_seeds):
            g = torch.Generator().manual_seed(seed + s)
            errors[i, s] = torch.linalg.vector_norm(mc_policy_gradient(logits, r, n, g) - exact)
    return errors
