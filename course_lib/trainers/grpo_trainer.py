"""GRPO on the sorting task: chapter 02's REINFORCE loop plus the ratio, the clip, reuse and a KL term.

Shao et al. 2024, "DeepSeekMath", section 4.1 and Algorithm 1 (iterative GRPO, one
iteration). :class:`GRPOTrainer` is chapter 02's :class:`~course_lib.trainers.pg_trainer.PGTrainer`
(it inherits its loop, sampling, rewards and log-probs) with four changes marked (*) below:

1. sample ``G`` responses per prompt from the current policy (:meth:`generate_group_outputs`);
2. reward them (:meth:`compute_rewards`); (*) the advantages are group-relative
   (:func:`course_lib.grpo.group_advantages`, which the loss computes) in place of chapter 03's deltas;
3. (*) hold fixed ``logp_old``, the log-probs of the policy that sampled them, and
   ``logp_ref``, those of the frozen reference policy;
4. take ``steps_per_round`` Adam steps (:meth:`training_step`) on
   :func:`course_lib.grpo.grpo_loss` of that batch: (*) the importance ratio
   ``exp(logp - logp_old)`` in place of ``logp``, clipped to ``[1 - clip_eps, 1 + clip_eps]``,
   which is what makes reusing one batch for several steps principled (PPO, Schulman et al.
   2017), and (*) ``kl_coef`` times the k3 estimate of KL(pi_theta || pi_ref) added to every
   token's loss.

The first step on each batch has every ratio exactly 1, so the clip cannot bind; without
the KL term (or while the policy still equals the reference, where the gradient of k3
vanishes) that step is a REINFORCE step with the group advantages as deltas, which the
tests check.

The course's defaults (:class:`GRPOTrainerConfig`) keep the lecture's budget and model
and take DeepSeekMath's ``kl_coef = 0.04`` with k3. What they add to the lecture is what
keeps the policy from collapsing onto a partial-credit answer: the clip, the KL toward
the (near-uniform) initial policy, and a small initialisation (``init_scale``) that starts
the policy closer to uniform still. ``benchmarks/sort_task.py`` measures them over 8 seeds;
chapter 06's notebook takes them away one at a time.

The model is :class:`course_lib.models.SortingPolicy`, which is non-autoregressive: one
forward pass of the ``B`` prompts gives the distributions of every response
position, shared by the ``G`` responses of a prompt. Shapes: ``B`` prompts, ``G``
responses per prompt, ``T`` tokens, ``V`` vocabulary.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from torch import nn

from course_lib import _validate
from course_lib.grpo import KL_KINDS, LOSS_AGG_MODES, group_advantages, grpo_loss
from course_lib.trainers.pg_trainer import PGHistory, PGTrainer, PGTrainerConfig


@dataclass
class GRPOTrainerConfig(PGTrainerConfig):
    """Hyperparameters of :class:`GRPOTrainer`: chapter 02's (:class:`PGTrainerConfig`) plus the clip and the KL.

    Every field of ``PGTrainerConfig`` means the same here except ``deltas_mode``, which GRPO does not read: its
    advantage is always group-relative, with or without the std as ``normalize_std`` says.
    """

    init_scale: float = 0.1
    """Multiplies the decoder matrices at init, so the initial logits scale by it (GRPO starts nearer uniform)."""
    clip_eps: float = 0.2
    """PPO's clip range: the ratio is kept in [1 - clip_eps, 1 + clip_eps]."""
    kl_coef: float = 0.04
    """Weight of the KL penalty toward the reference policy (DeepSeekMath's beta = 0.04)."""
    kl_kind: str = "k3"
    """The per-token KL estimator: "k1", "k2" or "k3"."""
    normalize_std: bool = True
    """Divide the group-centred rewards by the group std (GRPO) or not (Dr. GRPO)."""
    loss_agg: str = "seq-mean-token-mean"
    """How per-token losses become one number (see course_lib.grpo.aggregate_loss)."""
    ref_refresh_every: int = 0
    """Copy the policy into the reference every this many rounds (0: never, the frozen initial policy)."""

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first field that is out of range (chapter 02's fields first)."""
        super().validate()
        if self.deltas_mode != PGTrainerConfig.deltas_mode:
            raise ValueError(
                f"deltas_mode: GRPOTrainer does not read it (its advantage is group-relative; normalize_std "
                f"chooses the std or not), so leave it at {PGTrainerConfig.deltas_mode!r}; got {self.deltas_mode!r}"
            )
        _validate.require_positive("clip_eps", self.clip_eps)
        _validate.require_non_negative("kl_coef", self.kl_coef)
        _validate.require_choice("kl_kind", self.kl_kind, KL_KINDS)
        _validate.require_bool("normalize_std", self.normalize_std)
        _validate.require_choice("loss_agg", self.loss_agg, LOSS_AGG_MODES)
        _validate.require_int("ref_refresh_every", self.ref_refresh_every, minimum=0)


@dataclass
class GRPOHistory(PGHistory):
    """What :meth:`GRPOTrainer.train` records: chapter 02's history plus the KL and the clip fraction."""

    kl: list[float] = field(default_factory=list)
    """Mean per-token KL estimate to the reference policy, averaged over the round's steps."""
    clip_fraction: list[float] = field(default_factory=list)
    """Fraction of tokens whose ratio left [1 - clip_eps, 1 + clip_eps], averaged over the round's steps."""


class GRPOTrainer(PGTrainer):
    """GRPO for a policy that maps ``(B, T)`` prompts to ``(B, T, V)`` logits, such as ``SortingPolicy``.

    The homework's interface: ``GRPOTrainer(model, ref_model, group_size, clip_epsilon,
    kl_beta)`` and the three methods :meth:`generate_group_outputs`,
    :meth:`compute_rewards` and :meth:`training_step`; :meth:`train` loops over them.
    Everything but the advantage, the constants of a batch and the loss is :class:`PGTrainer`'s.

    Args:
        model: the policy pi_theta, trained in place.
        ref_model: the frozen reference pi_ref (a copy of the initial policy), or ``None``
            for no KL term. Its parameters are never updated.
        group_size: ``G``; overrides ``config.group_size`` when given.
        clip_epsilon: PPO's clip range; overrides ``config.clip_eps`` when given.
        kl_beta: weight of the KL penalty; overrides ``config.kl_coef`` when given.
        config: every other hyperparameter (``GRPOTrainerConfig()`` when ``None``).
    """

    Config, History = GRPOTrainerConfig, GRPOHistory

    def __init__(
        self,
        model: nn.Module,
        ref_model: nn.Module | None = None,
        group_size: int | None = None,
        clip_epsilon: float | None = None,
        kl_beta: float | None = None,
        config: GRPOTrainerConfig | None = None,
    ):
        if ref_model is not None and not isinstance(ref_model, nn.Module):
            raise ValueError(f"ref_model: expected a torch.nn.Module or None, got {type(ref_model).__name__}")
        super().__init__(model, group_size, config, clip_eps=clip_epsilon, kl_coef=kl_beta)
        self.ref_model = ref_model
        self.batches_seen = 0  # for config.ref_refresh_every
        if ref_model is not None:
            ref_model.requires_grad_(False)

    @classmethod
    def for_sorting(cls, config=None, prompts: torch.Tensor | None = None, vocab_size: int | None = None):
        """:meth:`PGTrainer.for_sorting`, with a frozen copy of the initial policy as the reference."""
        trainer = super().for_sorting(config, prompts, vocab_size)
        # The reference is the policy before RL, frozen (DeepSeekMath: the initial policy).
        trainer.ref_model = copy.deepcopy(trainer.model).requires_grad_(False)
        return trainer

    def advantages(self, rewards: torch.Tensor) -> torch.Tensor:
        """``(B, G)`` GRPO's group-relative advantages of ``(B, G)`` rewards (``grpo_loss`` computes the same)."""
        return group_advantages(rewards, self.config.normalize_std)  # (B, G)

    def batch_constants(self, prompts: torch.Tensor, responses: torch.Tensor) -> dict[str, torch.Tensor]:
        """``logp_old`` and ``logp_ref``, ``(B, G, T)``: the sampling policy's and the reference's log-probs."""
        use_ref = self.ref_model is not None and self.config.kl_coef > 0
        every = self.config.ref_refresh_every
        if use_ref and every and self.batches_seen % every == 0:
            # A moving reference: with ref_refresh_every=1 it is the sampling policy, pi_old.
            self.ref_model.load_state_dict(self.model.state_dict())
        self.batches_seen += 1
        return {
            "logp_old": self.log_probs(self.model, prompts, responses),
            "logp_ref": self.log_probs(self.ref_model, prompts, responses) if use_ref else None,
        }

    def training_step(
        self,
        prompts: torch.Tensor,
        responses: torch.Tensor,
        rewards: torch.Tensor,
        logp_old: torch.Tensor | None = None,
        logp_ref: torch.Tensor | None = None,
    ) -> dict[str, float]:
        """One Adam step on the GRPO loss of a batch of groups.

        Args:
            prompts: ``(B, T)`` integer prompts.
            responses: ``(B, G, T)`` the sampled responses.
            rewards: ``(B, G)`` their rewards.
            logp_old: ``(B, G, T)`` log-probs of the policy that sampled them; ``None`` takes the
                current policy's, detached (the first step on a batch: every ratio is 1).
            logp_ref: ``(B, G, T)`` log-probs of the reference; ``None`` computes them from
                ``ref_model`` (no KL term when there is no reference or ``kl_coef`` is 0).

        Returns:
            The floats of :func:`course_lib.grpo.grpo_loss`'s ``info`` plus ``loss`` and ``entropy``.
        """
        cfg = self.config
        logp = self.log_probs(self.model, prompts, responses)  # (B, G, T), carries the gradient
        logp_old = logp.detach() if logp_old is None else logp_old
        if logp_ref is None and self.ref_model is not None and cfg.kl_coef > 0:
            with torch.no_grad():
                logp_ref = self.log_probs(self.ref_model, prompts, responses)  # (B, G, T)
        mask = self.response_mask(responses).to(logp.dtype)  # (B, G, T)
        loss, info = grpo_loss(
            logp,
            logp_old,
            logp_ref if cfg.kl_coef > 0 else None,
            rewards.to(logp.dtype),
            mask,
            clip_eps=cfg.clip_eps,
            kl_coef=cfg.kl_coef,
            kl_kind=cfg.kl_kind,
            normalize_std=cfg.normalize_std,
            loss_agg=cfg.loss_agg,
        )
        return self.optimizer_step(loss, prompts, responses, info)
