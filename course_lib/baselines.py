"""Baselines: subtract the group mean from the reward, and maybe divide by the group std.

Williams 1992 already notes that any baseline ``b`` that does not depend on the
response leaves the REINFORCE gradient unbiased, because
``E_{y ~ pi}[b * grad log pi(y)] = b * grad sum_y pi(y) = b * grad 1 = 0``,
while a good one shrinks its variance. With ``G`` responses sampled per prompt,
the mean reward of the group is such a baseline (an estimate of V(prompt)), and
dividing by the group's standard deviation is GRPO's normalisation (Shao et al.
2024, "DeepSeekMath", section 4.1.2: ``adv_i = (r_i - mean(r)) / std(r)``).

The weights ``deltas`` that multiply ``log pi`` in the REINFORCE loss come in
three modes (:func:`compute_deltas`):

==================== ========================================== ======================
mode                 deltas[b, g]                               what it is
==================== ========================================== ======================
rewards              r[b, g]                                    plain REINFORCE
centered_rewards     r[b, g] - mean_g r[b, :]                   group mean as baseline
normalized_rewards   (r[b, g] - mean_g r[b, :]) / (std + eps)   GRPO's advantage
==================== ========================================== ======================

Convention: the std is Bessel-corrected (divides by ``G - 1``), as ``torch.std``
computes it and as TRL (``GRPOTrainer``) and verl (``compute_grpo_outcome_advantage``)
use it; the GRPO paper does not say. ``eps`` is added to the std, outside the
square root: the course uses ``1e-6`` like verl, TRL uses ``1e-4``. A group whose
rewards are all equal gets zeros, and so does a group of one (verl leaves a
group of one unchanged instead; the course gives it no signal, as its mean is
its own reward).

:func:`gradient_variance` measures what the baseline buys: the total variance
of per-sample gradient estimates, with and without it.
"""

from __future__ import annotations

import torch

from course_lib import _validate

MODES = ("rewards", "centered_rewards", "normalized_rewards")


def compute_deltas(rewards: torch.Tensor, mode: str, eps: float = 1e-6) -> torch.Tensor:
    """The weights of the REINFORCE loss: rewards, centred rewards or normalised rewards.

    Args:
        rewards: ``[B, G]`` the reward of response ``g`` to prompt ``b``.
        mode: ``"rewards"`` (unchanged), ``"centered_rewards"`` (minus the group
            mean) or ``"normalized_rewards"`` (centred, then divided by the
            group's Bessel-corrected std plus ``eps``).
        eps: added to the std so that the division is safe; positive.

    Returns:
        ``[B, G]`` deltas, never NaN. Groups whose rewards are all equal, and groups
        of one (``G == 1``), get zeros in the centred and normalised modes.
    """
    _check_compute_deltas(rewards, mode, eps)
    if mode == "rewards":
        return rewards.clone()

    # The baseline: the mean reward of each prompt's group (axis G, not the batch axis B).
    mean = rewards.mean(dim=-1, keepdim=True)  # (B, 1)
    centred = rewards - mean  # (B, G)
    # A group whose rewards all agree carries no signal. Rounding in its mean would
    # otherwise leave noise of size ulp / eps after the division (0.06 for float32
    # rewards of 0.7), so it is set to zero exactly.
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)  # (B, 1)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards":
        return centred

    G = rewards.shape[-1]
    if G == 1:
        # Bessel's correction divides by G - 1 = 0: torch.std gives NaN. A group of
        # one is already all zeros after centring.
        return centred
    std = rewards.std(dim=-1, keepdim=True)  # (B, 1), unbiased: divides by G - 1
    return centred / (std + eps)  # (B, G)


def gradient_variance(grad_samples: torch.Tensor) -> float:
    """Total variance of a gradient estimator: the trace of the covariance of its samples.

    With ``N`` independent estimates ``g_1 .. g_N`` of a ``P``-dimensional
    gradient, ``sum_p Var(g[:, p])``, each variance Bessel-corrected (divided by
    ``N - 1``, as ``torch.var``). This is the variance of a single estimate, not
    of their mean (which is ``N`` times smaller). It is the number to compare
    with and without a baseline.

    Args:
        grad_samples: ``[N, P]`` one flattened gradient estimate per row, ``N >= 2``.

    Returns:
        A Python float.
    """
    _check_gradient_variance(grad_samples)
    centred = grad_samples - grad_samples.mean(dim=0, keepdim=True)  # (N, P)
    N = grad_samples.shape[0]
    per_coordinate = (centred**2).sum(dim=0) / (N - 1)  # (P,)
    return float(per_coordinate.sum())


# ---------------------------------------------------------------------------
# Argument checks: a public function's first line calls its own
# ---------------------------------------------------------------------------


def _check_compute_deltas(rewards, mode, eps) -> None:
    _validate.require_rewards_table("rewards", rewards)
    _validate.require_choice("mode", mode, MODES)
    _validate.require_positive("eps", eps)


def _check_gradient_variance(grad_samples) -> None:
    _validate.require_tensor("grad_samples", grad_samples)
    if grad_samples.dim() != 2 or grad_samples.shape[0] < 2:
        raise ValueError(f"grad_samples: expected shape (N, P) with N >= 2 samples, got {tuple(grad_samples.shape)}")
