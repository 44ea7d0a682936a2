"""KL penalties toward a frozen reference policy, estimated from samples (Schulman's k1, k2, k3).

Both chapters that follow the reward with a KL term use these estimators: PPO-RLHF (chapter 05;
Stiennon et al. 2020, Ouyang et al. 2022) pays ``kl_coef * k1`` in every token's reward, and GRPO
(chapter 06; Shao et al. 2024, "DeepSeekMath", eq. 4) adds ``kl_coef * k3`` to every token's loss.
Schulman 2020, "Approximating KL Divergence", derives the three. ``course_lib.grpo`` re-exports them.
"""

from __future__ import annotations

import torch

from course_lib import _validate

KL_KINDS = ("k1", "k2", "k3")


def kl_estimate(logp: torch.Tensor, logp_ref: torch.Tensor, kind: str) -> torch.Tensor:
    """A per-sample estimate of KL(pi_theta || pi_ref) from samples of pi_theta.

    With ``log_r = logp_ref - logp`` (so ``r = pi_ref / pi_theta``) at a sample
    ``y ~ pi_theta``, Schulman's three estimators are

    - ``k1 = -log_r = logp - logp_ref``: unbiased, high variance, can be negative;
    - ``k2 = 0.5 * log_r**2``: biased, low variance, always >= 0;
    - ``k3 = (r - 1) - log_r``: unbiased, low variance, always >= 0 (DeepSeekMath's
      eq. 4; TRL's GRPO uses it, verl calls it ``low_var_kl``).

    verl clamps ``log_r`` to [-20, 20] and k3 to [-10, 10]; the course does not.

    Args:
        logp: ``[...]`` log pi_theta of the sampled tokens.
        logp_ref: ``[...]`` log pi_ref of the same tokens.
        kind: ``"k1"``, ``"k2"`` or ``"k3"``.

    Returns:
        ``[...]`` one estimate per token; their mean over samples estimates the KL.
    """
    _check_kl_estimate(logp, logp_ref, kind)
    log_r = logp_ref - logp  # (...), log pi_ref / pi_theta
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    # k3 = (exp(log_r) - 1) - log_r. expm1 is exact near log_r = 0, where
    # exp(log_r) - 1 would lose every digit to cancellation (and could dip below 0).
    return torch.expm1(log_r) - log_r


def _check_kl_estimate(logp, logp_ref, kind) -> None:
    _validate.require_tensor("logp", logp)
    _validate.require_same_shape("logp_ref", logp_ref, "logp", logp)
    _validate.require_choice("kind", kind, KL_KINDS)
