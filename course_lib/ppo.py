"""PPO: the importance ratio, the clipped surrogate, the value loss, ``PPOLoss``.

Schulman et al. 2017, "Proximal Policy Optimization Algorithms". PPO is the
policy-gradient loss of chapter 02 with two changes: the log-prob is replaced
by the importance ratio of the new policy to the one that sampled the data,

    ratio_t = pi_theta(a_t | s_t) / pi_theta_old(a_t | s_t) = exp(logp_t - logp_old_t),

and the ratio is clipped so one batch cannot push the policy far (eq. 7):

    L^CLIP = E_t[ min(ratio_t * A_t, clip(ratio_t, 1 - eps, 1 + eps) * A_t) ].

The course minimises ``-L^CLIP``. ``logp_old`` and the advantages ``adv`` are
constants: they were computed before the update, so no gradient flows into
them. The full objective (eq. 9) adds a value loss and an entropy bonus:

    loss = -L^CLIP + value_loss_coef * L^VF - ent_coef * entropy.

Yu et al. 2025 ("DAPO") clip asymmetrically ("clip-higher"): a larger upper
range ``clip_eps_high`` lets unlikely tokens grow faster; ``clipped_surrogate``
takes it as an option.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from course_lib import _validate, gae
from course_lib.masked import masked_mean


@dataclass
class PPOConfig:
    """Hyperparameters of PPO, with CleanRL's defaults where they apply."""

    clip_eps: float = 0.2
    """Clip range of the ratio: it is kept in [1 - clip_eps, 1 + clip_eps]."""
    gamma: float = 0.99
    """Discount factor."""
    lam: float = 0.95
    """GAE lambda: 0 is one-step TD, 1 is Monte-Carlo."""
    value_loss_coef: float = 0.5
    """Weight of the value loss in the total loss."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus (subtracted from the loss)."""
    clip_value_loss: bool = False
    """Clip the value update to [values_old - clip_eps, values_old + clip_eps] (CleanRL's clip_vloss)."""
    norm_adv: bool = True
    """Normalise the advantages to mean 0, std 1 within each minibatch."""
    lr: float = 3e-4
    """Learning rate of Adam."""
    update_epochs: int = 4
    """Passes over each rollout."""
    num_minibatches: int = 4
    """Minibatches per pass."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    target_kl: float | None = None
    """Stop the epochs early when approx_kl exceeds this (None: never)."""


# ---------------------------------------------------------------------------
# The clipped surrogate
# ---------------------------------------------------------------------------


def clipped_surrogate(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    adv: torch.Tensor,
    clip_eps: float,
    clip_eps_high: float | None = None,
) -> torch.Tensor:
    """Per-element clipped surrogate loss ``-min(ratio * adv, clip(ratio, 1 - eps, 1 + eps_high) * adv)``.

    Args:
        logp: ``[...]`` log pi_theta of the actions taken (carries the gradient).
        logp_old: ``[...]`` log pi_theta_old of the same actions (a constant: detached).
        adv: ``[...]`` advantages (a constant: detached).
        clip_eps: the ratio is clipped below at ``1 - clip_eps``.
        clip_eps_high: the ratio is clipped above at ``1 + clip_eps_high``
            (default ``clip_eps``; DAPO's clip-higher uses a larger one, e.g. 0.28).

    Returns:
        ``[...]`` the loss of every element, not reduced.
    """
    _check_clipped_surrogate(logp, logp_old, adv, clip_eps, clip_eps_high)
    clip_eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())  # (...); exp of a difference, never a quotient of log-probs
    return _clipped_objective(ratio, adv.detach(), clip_eps, clip_eps_high)


def _clipped_objective(ratio: torch.Tensor, adv: torch.Tensor, clip_eps: float, clip_eps_high: float) -> torch.Tensor:
    """``-min(ratio * adv, clip(ratio) * adv)`` element by element, for checked arguments."""
    clipped_ratio = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps_high)
    # The pessimistic (smaller) objective: the clip only ever removes incentive, never adds it.
    return -torch.minimum(ratio * adv, clipped_ratio * adv)  # (...)


def clipped_surrogate_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    adv: torch.Tensor,
    clip_eps: float,
    mask: torch.Tensor | None = None,
    clip_eps_high: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped surrogate averaged over valid entries, with PPO's diagnostics.

    Args:
        logp: ``[...]`` log pi_theta of the actions taken.
        logp_old: ``[...]`` log pi_theta_old (constant).
        adv: ``[...]`` advantages (constant).
        clip_eps: clip range; ``clip_eps_high`` as in :func:`clipped_surrogate`.
        mask: ``[...]`` optional, 1 for valid entries, 0 for padding (which never changes anything).

    Returns:
        ``(loss, info)``: the scalar loss (0 when no entry is valid) and floats (see
        :func:`clip_diagnostics`):

        - ``clip_fraction``: fraction of valid entries with the ratio outside
          [1 - clip_eps, 1 + clip_eps_high], whatever the advantage's sign (CleanRL's and SB3's);
        - ``clip_active_fraction``: fraction where the clip binds and zeroes the gradient (TRL's, verl's);
        - ``approx_kl``: mean of ``(ratio - 1) - log(ratio)``.
    """
    _check_clipped_surrogate(logp, logp_old, adv, clip_eps, clip_eps_high, mask)
    clip_eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()  # (...)

    # Padding may hold anything (a -inf or NaN log-prob): zero it before it reaches the loss or its gradient.
    logp = torch.where(valid, logp, torch.zeros_like(logp))
    logp_old = torch.where(valid, logp_old.detach(), torch.zeros_like(logp_old))
    adv = torch.where(valid, adv.detach(), torch.zeros_like(adv))
    # PPO's two changes to REINFORCE: the importance ratio in place of logp, and its clip.
    ratio = torch.exp(logp - logp_old)  # (...); exp of a difference, never a quotient of log-probs
    per_token = _clipped_objective(ratio, adv, clip_eps, clip_eps_high)  # (...)
    return masked_mean(per_token, valid), clip_diagnostics(ratio, adv, valid, clip_eps, clip_eps_high)


def clip_diagnostics(
    ratio: torch.Tensor, adv: torch.Tensor, valid: torch.Tensor, clip_eps: float, clip_eps_high: float | None = None
) -> dict[str, float]:
    """PPO's diagnostics of one batch, as floats over its valid entries.

    - ``clip_fraction``: fraction of valid entries with the ratio outside
      [1 - clip_eps, 1 + clip_eps_high], whatever the advantage's sign. This is
      CleanRL's and SB3's definition (``|ratio - 1| > clip_eps``) and the one the course uses.
    - ``clip_active_fraction``: fraction where the clip actually binds (the
      gradient is zeroed): ratio above the range with adv > 0, or below with
      adv < 0. TRL's GRPO (``clip_ratio/region_mean``) and verl (``pg_clipfrac``)
      report this one; it is at most ``clip_fraction``.
    - ``approx_kl``: mean of ``(ratio - 1) - log(ratio)``, the k3 estimator of
      KL(pi_old || pi_theta) from samples of pi_old, as CleanRL logs it.

    Args:
        ratio: ``[...]`` importance ratios ``exp(logp - logp_old)``.
        adv: ``[...]`` advantages.
        valid: ``[...]`` bool, True for the entries to count.
        clip_eps, clip_eps_high: the clip range (``clip_eps_high`` defaults to ``clip_eps``).
    """
    clip_eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    with torch.no_grad():  # diagnostics, not part of the graph
        ratio = torch.where(valid, ratio, torch.ones_like(ratio))  # padding: ratio 1, inside the range
        low, high = ratio < 1.0 - clip_eps, ratio > 1.0 + clip_eps_high
        binding = (high & (adv > 0)) | (low & (adv < 0))
        n_valid = max(int(valid.sum()), 1)
        return {
            "clip_fraction": ((low | high) & valid).sum().item() / n_valid,
            "clip_active_fraction": (binding & valid).sum().item() / n_valid,
            "approx_kl": ((ratio - 1.0) - torch.log(ratio)).sum().item() / n_valid,
        }


# ---------------------------------------------------------------------------
# The value loss, entropy, explained variance
# ---------------------------------------------------------------------------


def value_loss(
    values: torch.Tensor,
    returns: torch.Tensor,
    values_old: torch.Tensor | None = None,
    clip_eps: float | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """``0.5 * (values - returns)^2`` averaged over valid entries; optionally clipped.

    The factor 0.5 follows CleanRL, TRL and verl (its gradient is ``values - returns``);
    SB3 (``F.mse_loss``) and Spinning Up leave it out, so their ``vf_coef`` weighs twice as much.

    With ``clip_eps`` (PPO2's value clipping, as in CleanRL's ``clip_vloss``), the new
    value may move at most ``clip_eps`` from ``values_old`` before the loss stops
    rewarding it: the loss is the pessimistic max of the clipped and unclipped errors.

    Args:
        values: ``[...]`` V(s_t) from the critic being trained.
        returns: ``[...]`` regression targets (constant: detached).
        values_old: ``[...]`` the critic's values when the rollout was collected
            (constant); required with ``clip_eps``.
        clip_eps: optional clip range of the value update (positive).
        mask: ``[...]`` optional, 1 for valid entries.

    Returns:
        the scalar loss (0 when no entry is valid).
    """
    _check_value_loss(values, returns, values_old, clip_eps, mask)
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()  # (...)

    # Padding may hold anything: zero it before it can reach the loss or its gradient.
    values = torch.where(valid, values, torch.zeros_like(values))
    returns = torch.where(valid, returns.detach(), torch.zeros_like(returns))
    squared_error = (values - returns) ** 2  # (...)
    if clip_eps is not None:
        # PPO2's value clipping: the new value moves at most clip_eps from the old one, pessimistically.
        values_old = torch.where(valid, values_old.detach(), torch.zeros_like(values_old))
        values_clipped = values_old + torch.clamp(values - values_old, -clip_eps, clip_eps)
        squared_error = torch.maximum(squared_error, (values_clipped - returns) ** 2)
    return 0.5 * masked_mean(squared_error, valid)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy ``-sum_v p_v log p_v`` of the categorical distribution softmax(logits).

    Args:
        logits: ``[..., V]`` unnormalised log-probabilities (``-inf`` allowed for masked actions).

    Returns:
        ``[...]`` the entropy in nats.
    """
    _validate.require_tensor("logits", logits, min_dim=1)
    logp = torch.log_softmax(logits, dim=-1)  # (..., V)
    p = logp.exp()
    # 0 * log 0 = 0: torch.where keeps a -inf logit from producing NaN.
    return -torch.where(p > 0, p * logp, torch.zeros_like(p)).sum(dim=-1)  # (...)


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float:
    """``1 - Var(returns - values) / Var(returns)``: 1 is a perfect critic, 0 no better than a constant.

    NaN when the returns do not vary (as in SB3 and CleanRL).

    Args:
        values: ``[...]`` predicted values.
        returns: ``[...]`` targets.
    """
    _validate.require_tensor("values", values)
    _validate.require_same_shape("returns", returns, "values", values)
    with torch.no_grad():
        var_returns = returns.double().var(unbiased=False).item()
        if not var_returns > 0:
            return float("nan")
        return 1.0 - (returns.double() - values.double()).var(unbiased=False).item() / var_returns


# ---------------------------------------------------------------------------
# The full PPO loss
# ---------------------------------------------------------------------------


class PPOLoss(nn.Module):
    """The PPO objective: clipped surrogate + value loss - entropy bonus (Schulman et al. 2017, eq. 9).

    Advantages are used as given: normalise them per minibatch before the call
    if wanted (CleanRL and SB3 do by default). After each call ``self.info``
    holds the parts (``policy_loss``, ``value_loss``, ``entropy``) and the
    diagnostics of :func:`clipped_surrogate_loss`, as floats.

    Two options serve :class:`~course_lib.trainers.ppo_trainer.PPOTrainer`: ``clip_value_loss``
    clips the value update around ``values_old`` (see :func:`value_loss`), and ``policy_loss_fn``,
    ``(logp, logp_old, adv, clip_eps) -> (loss, info)``, replaces the clipped surrogate (a
    student's, or a broken one, to watch what it does to training; unmasked entries only).
    """

    def __init__(
        self,
        clip_epsilon: float = 0.2,
        value_loss_coef: float = 0.5,
        entropy_coef: float = 0.01,
        clip_value_loss: bool = False,
        policy_loss_fn=None,
    ):
        super().__init__()
        self.clip_epsilon = _validate.require_positive("clip_epsilon", clip_epsilon)
        self.value_loss_coef = _validate.require_non_negative("value_loss_coef", value_loss_coef)
        self.entropy_coef = _validate.require_non_negative("entropy_coef", entropy_coef)
        self.clip_value_loss = _validate.require_bool("clip_value_loss", clip_value_loss)
        if policy_loss_fn is not None and not callable(policy_loss_fn):
            raise ValueError("policy_loss_fn: expected a function (logp, logp_old, adv, clip_eps) -> (loss, info)")
        self.policy_loss_fn = policy_loss_fn
        self.info: dict[str, float] = {}

    def forward(
        self,
        policy_logprobs: torch.Tensor,
        old_policy_logprobs: torch.Tensor,
        values: torch.Tensor,
        returns: torch.Tensor,
        advantages: torch.Tensor,
        entropy: torch.Tensor,
        mask: torch.Tensor | None = None,
        values_old: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Total loss ``policy_loss + value_loss_coef * value_loss - entropy_coef * mean(entropy)``.

        Args:
            policy_logprobs: ``[...]`` logp under the current policy.
            old_policy_logprobs: ``[...]`` logp_old (constant).
            values: ``[...]`` the critic's current values.
            returns: ``[...]`` value targets (constant).
            advantages: ``[...]`` advantages (constant).
            entropy: ``[...]`` the policy's entropy at each state (carries the gradient).
            mask: ``[...]`` optional, 1 for valid entries.
            values_old: ``[...]`` the critic's values at collection (constant); required with ``clip_value_loss``.
        """
        self._check_forward(
            policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask, values_old
        )
        valid = torch.ones_like(policy_logprobs, dtype=torch.bool) if mask is None else mask.bool()  # (...)
        eps = self.clip_epsilon
        if self.policy_loss_fn is None:
            policy_loss, info = clipped_surrogate_loss(policy_logprobs, old_policy_logprobs, advantages, eps, valid)
        else:
            policy_loss, info = self.policy_loss_fn(policy_logprobs, old_policy_logprobs, advantages, eps)
        if self.clip_value_loss:
            v_loss = value_loss(values, returns, values_old, eps, valid)
        else:
            v_loss = value_loss(values, returns, mask=valid)
        mean_entropy = masked_mean(entropy, valid)
        self.info = {
            "policy_loss": policy_loss.item(),
            "value_loss": v_loss.item(),
            "entropy": mean_entropy.item(),
            **info,
        }
        return policy_loss + self.value_loss_coef * v_loss - self.entropy_coef * mean_entropy

    def _check_forward(
        self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask, values_old
    ):
        _validate.require_tensor("policy_logprobs", policy_logprobs)
        names = ["old_policy_logprobs", "values", "returns", "advantages", "entropy"]
        tensors = [old_policy_logprobs, values, returns, advantages, entropy]
        for name, x in zip(names, tensors):
            _validate.require_same_shape(name, x, "policy_logprobs", policy_logprobs)
        if mask is not None:
            _validate.require_mask("mask", mask, "policy_logprobs", policy_logprobs)
        if self.clip_value_loss:
            _validate.require_same_shape("values_old", values_old, "values", values)
        if self.policy_loss_fn is not None and mask is not None:
            raise ValueError("mask: a policy_loss_fn sees every entry, so PPOLoss takes no mask with one")

    def compute_gae(self, rewards: torch.Tensor, values: torch.Tensor, gamma: float = 0.99, lam: float = 0.95):
        """GAE for complete episodes: each row of ``rewards`` is one episode that terminates at its last step.

        Args:
            rewards: ``[..., T]`` rewards, one episode per row.
            values: ``[..., T]`` V(s_t).

        Returns:
            ``(advantages, returns)``, both ``[..., T]`` (see :func:`course_lib.gae.compute_gae`).
        """
        _validate.require_tensor("rewards", rewards, min_dim=1)
        dones = torch.zeros_like(rewards, dtype=torch.bool)
        dones[..., -1] = True  # the episode ends here: nothing to bootstrap
        last_values = torch.zeros(rewards.shape[:-1], dtype=rewards.dtype)
        return gae.compute_gae(rewards, values, dones, last_values, gamma, lam)


# ---------------------------------------------------------------------------
# Argument checks: a public function's first line calls its own
# ---------------------------------------------------------------------------


def _check_clipped_surrogate(logp, logp_old, adv, clip_eps, clip_eps_high, mask=None) -> None:
    """The arguments of :func:`clipped_surrogate`, and the mask of :func:`clipped_surrogate_loss`."""
    _validate.require_tensor("logp", logp)
    _validate.require_same_shape("logp_old", logp_old, "logp", logp)
    _validate.require_same_shape("adv", adv, "logp", logp)
    if mask is not None:
        _validate.require_mask("mask", mask, "logp", logp)
    _validate.require_clip_range(clip_eps, clip_eps_high)


def _check_value_loss(values, returns, values_old, clip_eps, mask) -> None:
    _validate.require_tensor("values", values)
    _validate.require_same_shape("returns", returns, "values", values)
    if values_old is not None:
        _validate.require_same_shape("values_old", values_old, "values", values)
    if clip_eps is not None:
        _validate.require_positive("clip_eps", clip_eps)
        if values_old is None:
            raise ValueError("values_old: required when clip_eps is given (the clip is around the old values)")
    if mask is not None:
        _validate.require_mask("mask", mask, "values", values)
