"""A KL penalty in the loss on the later steps of a batch, where the policy has moved off the sampling policy.

Chapter 06 puts the KL estimate into every token's loss, without an importance weight (DeepSeekMath, eq. 3; TRL 1.16
multiplies its k3 term by the ratio ``pi_theta / pi_old`` by default, ``use_bias_correction_kl``). The tokens were
sampled from ``pi_old``, the policy at the start of the batch, and the loop takes several steps on them, so from
the second step on ``pi_theta != pi_old``. Then the expected gradient of
``kl_coef * k1 = kl_coef * (log pi_theta(y) - log pi_ref(y))`` over ``y ~ pi_old`` is

    kl_coef * sum_y pi_old(y) grad log pi_theta(y) = -kl_coef * grad KL(pi_old || pi_theta),

which does not involve ``pi_ref`` at all: a descent step raises ``KL(pi_old || pi_theta)``, pushing the policy away
from the one that sampled the batch. At the first step (``pi_theta = pi_old``) that gradient is zero.

1. **Exact and sampled expected gradients** of a penalty in the loss, on one categorical distribution over ``V``
   tokens with logits as parameters (:func:`expected_penalty_gradient`, :func:`sampled_penalty_gradient`), and the
   gradients they are compared with (:func:`kl_gradient`, :func:`reverse_kl_gradient`, :func:`cosine`).
2. **The drift within a batch** in a real training run (:class:`BatchDriftGRPOTrainer`): the exact
   ``KL(pi_old || pi_theta)`` after each batch's steps, the quantity that force raises.

Shapes: ``V`` tokens; ``B`` prompts, ``T`` response positions (the sorting policy ignores earlier tokens, so each
position has its own categorical distribution).
"""

from __future__ import annotations

import torch

from course_lib import _validate
from course_lib.kl import KL_KINDS, kl_estimate
from course_lib.trainers.grpo_trainer import GRPOTrainer

# ---------------------------------------------------------------------------
# 1. The expected gradient of a penalty in the loss, samples from pi_old
# ---------------------------------------------------------------------------


def expected_penalty_gradient(
    logits: torch.Tensor,
    logits_old: torch.Tensor,
    logits_ref: torch.Tensor,
    kind: str,
    kl_coef: float,
    importance_weight: bool = False,
) -> torch.Tensor:
    """Exact ``E_{y ~ pi_old}[grad_logits kl_coef * k(y)]``, the expected gradient of the loss's KL term.

    The expectation is a sum over the ``V`` tokens weighted by ``pi_old`` (no gradient flows through the
    sampling). GRPO's loss puts no importance weight in front of the penalty (the default); with
    ``importance_weight=True`` each token's penalty is multiplied by the ratio ``pi_theta / pi_old``, gradient
    included, as TRL 1.16 does by default (``GRPOConfig.use_bias_correction_kl``).

    Args:
        logits: ``(V,)`` the current policy's logits, the parameters differentiated.
        logits_old: ``(V,)`` the sampling policy's logits (``pi_old``).
        logits_ref: ``(V,)`` the reference's logits.
        kind: ``"k1"``, ``"k2"`` or ``"k3"`` (:func:`course_lib.kl.kl_estimate`).
        kl_coef: the penalty's weight ``beta``.
        importance_weight: multiply each token's penalty by ``pi_theta(y) / pi_old(y)``.

    Returns:
        ``(V,)`` the gradient with respect to ``logits``.
    """
    _check_logits(logits, logits_old, logits_ref, kind, kl_coef)
    theta = logits.detach().double().requires_grad_(True)
    logp = torch.log_softmax(theta, -1)  # (V,)
    logp_old = torch.log_softmax(logits_old.detach().double(), -1)  # (V,)
    logp_ref = torch.log_softmax(logits_ref.detach().double(), -1)  # (V,)
    per_token = kl_coef * kl_estimate(logp, logp_ref, kind)  # (V,): the penalty if token v is sampled
    if importance_weight:
        per_token = torch.exp(logp - logp_old) * per_token
    penalty = (logp_old.exp() * per_token).sum()  # the expectation over y ~ pi_old
    return torch.autograd.grad(penalty, theta)[0]  # (V,)


def sampled_penalty_gradient(
    logits: torch.Tensor,
    logits_old: torch.Tensor,
    logits_ref: torch.Tensor,
    kind: str,
    kl_coef: float,
    num_samples: int,
    generator: torch.Generator | None = None,
    importance_weight: bool = False,
) -> torch.Tensor:
    """The Monte Carlo version: ``num_samples`` tokens drawn from ``pi_old``, the penalty's mean, its gradient.

    This is what a trainer computes: the mean of ``kl_coef * k`` over sampled tokens, differentiated.
    Arguments as in :func:`expected_penalty_gradient`; ``generator`` seeds the sampling.

    Returns:
        ``(V,)`` the gradient with respect to ``logits``.
    """
    _check_logits(logits, logits_old, logits_ref, kind, kl_coef)
    _validate.require_int("num_samples", num_samples, minimum=1)
    theta = logits.detach().double().requires_grad_(True)
    logp = torch.log_softmax(theta, -1)  # (V,)
    logp_old = torch.log_softmax(logits_old.detach().double(), -1)  # (V,)
    logp_ref = torch.log_softmax(logits_ref.detach().double(), -1)  # (V,)
    samples = torch.multinomial(logp_old.exp(), num_samples, replacement=True, generator=generator)  # (N,)
    per_sample = kl_coef * kl_estimate(logp[samples], logp_ref[samples], kind)  # (N,)
    if importance_weight:
        per_sample = torch.exp(logp[samples] - logp_old[samples]) * per_sample
    return torch.autograd.grad(per_sample.mean(), theta)[0]  # (V,)


def kl_gradient(logits: torch.Tensor, logits_anchor: torch.Tensor) -> torch.Tensor:
    """``grad_logits KL(pi_anchor || pi_theta)`` by autograd; for a softmax it equals ``pi_theta - pi_anchor``.

    Args:
        logits: ``(V,)`` the policy's logits, differentiated.
        logits_anchor: ``(V,)`` the fixed first argument's logits (``pi_old`` or ``pi_ref``).

    Returns:
        ``(V,)`` the gradient.
    """
    _validate.require_tensor("logits", logits)
    _validate.require_same_shape("logits_anchor", logits_anchor, "logits", logits)
    theta = logits.detach().double().requires_grad_(True)
    logp = torch.log_softmax(theta, -1)  # (V,)
    logp_anchor = torch.log_softmax(logits_anchor.detach().double(), -1)  # (V,)
    kl = (logp_anchor.exp() * (logp_anchor - logp)).sum()
    return torch.autograd.grad(kl, theta)[0]  # (V,)


def reverse_kl_gradient(logits: torch.Tensor, logits_ref: torch.Tensor) -> torch.Tensor:
    """``grad_logits KL(pi_theta || pi_ref)``, the KL the penalty estimates, by autograd.

    Args:
        logits: ``(V,)`` the policy's logits, differentiated.
        logits_ref: ``(V,)`` the reference's logits.

    Returns:
        ``(V,)`` the gradient.
    """
    _validate.require_tensor("logits", logits)
    _validate.require_same_shape("logits_ref", logits_ref, "logits", logits)
    theta = logits.detach().double().requires_grad_(True)
    logp = torch.log_softmax(theta, -1)  # (V,)
    logp_ref = torch.log_softmax(logits_ref.detach().double(), -1)  # (V,)
    kl = (logp.exp() * (logp - logp_ref)).sum()
    return torch.autograd.grad(kl, theta)[0]  # (V,)


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine similarity of two gradients: 1 the same direction, -1 opposite, 0 unrelated."""
    return float(torch.nn.functional.cosine_similarity(a.flatten().double(), b.flatten().double(), dim=0))


def _check_logits(logits, logits_old, logits_ref, kind, kl_coef) -> None:
    _validate.require_tensor("logits", logits)
    if logits.dim() != 1:
        raise ValueError(f"logits: expected a (V,) tensor for one categorical distribution, got {tuple(logits.shape)}")
    _validate.require_same_shape("logits_old", logits_old, "logits", logits)
    _validate.require_same_shape("logits_ref", logits_ref, "logits", logits)
    _validate.require_choice("kind", kind, KL_KINDS)
    _validate.require_non_negative("kl_coef", kl_coef)


# ---------------------------------------------------------------------------
# 2. How far each batch's steps move the policy from pi_old, in a training run
# ---------------------------------------------------------------------------


class BatchDriftGRPOTrainer(GRPOTrainer):
    """:class:`~course_lib.trainers.GRPOTrainer` that also records how far each batch's steps moved the policy.

    After the ``steps_per_round`` steps on a batch it records the exact ``KL(pi_old || pi_theta)`` per response
    position, averaged over the prompts and positions, in ``batch_drift`` (one float per round; the history
    returned by :meth:`train` carries the same list). Training itself is unchanged: the same samples, steps and
    numbers as the plain trainer.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batch_drift: list[float] = []
        self._logp_old_all = None  # (B, T, V): pi_old of the batch in progress

    def batch_constants(self, prompts: torch.Tensor, responses: torch.Tensor) -> dict[str, torch.Tensor]:
        # A new batch begins: the previous one's steps are done.
        self._close_batch(prompts)
        with torch.no_grad():
            self._logp_old_all = torch.log_softmax(self.model(prompts) / self.config.temperature, -1)  # (B, T, V)
        return super().batch_constants(prompts, responses)

    def train(self, prompts: torch.Tensor | None = None, rounds: int | None = None, progress: bool = True):
        history = super().train(prompts, rounds, progress)
        self._close_batch(self._prompts_seen)
        history.batch_drift = list(self.batch_drift)
        return history

    def _close_batch(self, prompts: torch.Tensor) -> None:
        self._prompts_seen = prompts
        if self._logp_old_all is None:
            return
        with torch.no_grad():
            logp_all = torch.log_softmax(self.model(prompts) / self.config.temperature, -1)  # (B, T, V)
            kl = (self._logp_old_all.exp() * (self._logp_old_all - logp_all)).sum(-1)  # (B, T)
        self.batch_drift.append(float(kl.mean()))
        self._logp_old_all = None
