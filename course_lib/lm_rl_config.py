"""The hyperparameters of the one LM RL loop (:mod:`course_lib.lm_rl`): one dataclass, two presets, one check.

``LMRLConfig.grpo(**changes)`` and ``LMRLConfig.ppo(**changes)`` set each algorithm's own switches (like CleanRL's
per-script defaults); every field then holds the value the run uses, so ``dataclasses.replace`` keeps what it shows.
:meth:`LMRLConfig.validate` checks every field once, before the loop starts; the loop's steps read a valid config.
"""

from __future__ import annotations

from dataclasses import dataclass

from course_lib import _validate
from course_lib.grpo import LOSS_AGG_MODES
from course_lib.policy_losses import POLICY_LOSSES as FAMILY_POLICY_LOSSES

ALGOS = ("grpo", "ppo")
KL_PLACEMENTS = ("loss", "reward")
ADV_ESTIMATORS = ("grpo", "rloo", "reinforce++")
POLICY_LOSSES = ("clip", *FAMILY_POLICY_LOSSES)


@dataclass
class LMRLConfig:
    """Hyperparameters of :func:`train`. ``LMRLConfig.grpo(...)`` or ``LMRLConfig.ppo(...)`` sets the algorithm's
    own switches; every field then holds the value the run uses (the bare defaults are GRPO's)."""

    # --- the round: what is sampled ---
    algo: str = "grpo"
    """The advantage's source: ``"grpo"`` (the group's rewards) or ``"ppo"`` (GAE against a value model)."""
    iterations: int = 250
    """Rounds of sample-then-update; each samples a fresh batch of ``B * G`` completions."""
    max_completions: int | None = None
    """A sample budget: stop once this many completions were sampled, the lr decaying with the share spent."""
    prompts_per_step: int = 64
    """B, prompts per round."""
    group_size: int = 8
    """G, completions per prompt (PPO samples as many, so both see the same completions per round)."""
    max_new_tokens: int = 4
    """L, the most tokens a completion may have, EOS included; also Dr. GRPO's constant."""
    temperature: float = 1.0
    """Sampling temperature; log-probs are taken at the same temperature."""
    top_p: float = 1.0
    """Nucleus sampling (``transformers`` models only; 1.0 samples the whole distribution)."""

    # --- the update: passes, minibatches, the optimiser ---
    update_epochs: int = 4
    """Passes over each round's batch (PPO's K epochs); the ratio leaves 1 after the first step."""
    num_minibatches: int = 1
    """Minibatches of whole sequences per pass, drawn at random (a group may be split between two)."""
    micro_batch_size: int | None = None
    """Sequences per forward pass, gradients accumulated over a minibatch (None: the whole minibatch)."""
    lr: float = 2e-3
    """Peak learning rate of Adam."""
    warmup_iterations: int = 0
    """The learning rate rises linearly from 0 over this many rounds..."""
    lr_schedule: str = "linear"
    """...then stays (``"constant"``) or falls to 0 by the last round (``"linear"``, ``"cosine"``)."""
    max_grad_norm: float = 1.0
    """The global gradient norm is clipped to this before every step."""

    # --- GRPO's loss (chapter 06) ---
    clip_eps: float = 0.2
    """PPO's clip range of the ratio."""
    clip_eps_high: float | None = None
    """Upper clip range (DAPO's clip-higher); None is a symmetric clip, ``clip_eps`` on both sides."""
    kl_coef: float = 0.02
    """Weight of the KL to the frozen reference."""
    kl_placement: str = "loss"
    """``"loss"`` (k3 added to each token's loss, GRPO's) or ``"reward"`` (k1 taken off the reward, PPO's)."""
    normalize_std: bool = True
    """GRPO: divide group-centred rewards by the group's std (False is Dr. GRPO)."""
    loss_agg: str = "seq-mean-token-mean"
    """How token losses are averaged (course_lib.grpo.aggregate_loss); PPO's is ``"token-mean"``."""
    whiten_advantages: bool = False
    """Whiten the advantages over the batch's valid tokens (PPO's habit)."""

    # --- PPO's value model (chapter 05) ---
    gamma: float = 1.0
    """PPO: discount over the completion's tokens (1: the score at the end is what counts)."""
    lam: float = 0.95
    """PPO: GAE's lambda."""
    value_loss_coef: float = 0.5
    """PPO: weight of the value loss (``PPOLoss``'s, and the trainers', ``value_loss_coef``)."""

    # --- the GRPO family (chapter 11) ---
    adv_estimator: str = "grpo"
    """The group's advantage (course_lib.family): ``"grpo"``, ``"rloo"`` (leave-one-out), ``"reinforce++"``."""
    policy_loss: str = "clip"
    """The per-token loss: ``"clip"`` (chapter 06's grpo_loss), ``"gspo"``, ``"cispo"``, ``"gmpo"``, ``"sapo"``."""
    dynamic_sampling: bool = False
    """DAPO: drop groups whose rewards are all equal and sample prompts again for the missing groups."""
    max_sampling_draws: int = 10
    """DAPO: the most draws of prompts in one round before it trains on the groups it has (verl's
    ``max_num_gen_batches``)."""
    overlong_filter: bool = False
    """DAPO: completions cut off without EOS leave the loss."""
    overlong_cache: int = 0
    """DAPO's soft overlong punishment: the last this many tokens before max_new_tokens cost reward (0: off)."""

    # --- reproducibility ---
    seed: int = 0
    """Seeds the prompt order and the sampling."""

    @classmethod
    def grpo(cls, **changes) -> LMRLConfig:
        """GRPO's preset (DeepSeekMath): k3 KL in the loss, each completion's tokens averaged first, no whitening."""
        preset = {"algo": "grpo", "kl_placement": "loss", "loss_agg": "seq-mean-token-mean", "whiten_advantages": False}
        return cls(**{**preset, **changes})

    @classmethod
    def ppo(cls, **changes) -> LMRLConfig:
        """PPO's preset (InstructGPT, TRL's PPO): k1 KL in the reward, a token mean, whitened advantages."""
        preset = {"algo": "ppo", "kl_placement": "reward", "loss_agg": "token-mean", "whiten_advantages": True}
        return cls(**{**preset, **changes})

    def validate(self) -> LMRLConfig:
        """Check every field; raise ValueError naming the first one that is wrong. Returns the config."""
        _check_sizes(self)
        _check_rates(self)
        _check_switches(self)
        if self.algo == "ppo":
            _check_ppo_switches(self)
        return self


def _check_sizes(cfg: LMRLConfig) -> None:
    for name in ("iterations", "prompts_per_step", "group_size", "max_new_tokens", "update_epochs", "num_minibatches"):
        _validate.require_int(name, getattr(cfg, name), minimum=1)
    if cfg.algo == "grpo" and cfg.group_size < 2:
        raise ValueError(f"group_size: GRPO needs at least 2 (a group of one has no baseline), got {cfg.group_size}")
    for name in ("micro_batch_size", "max_completions"):  # None: no micro-batches, no budget
        if getattr(cfg, name) is not None:
            _validate.require_int(name, getattr(cfg, name), minimum=1)
    for name in ("warmup_iterations", "overlong_cache"):
        _validate.require_int(name, getattr(cfg, name), minimum=0)
    _validate.require_int("max_sampling_draws", cfg.max_sampling_draws, minimum=1)


def _check_rates(cfg: LMRLConfig) -> None:
    for name in ("lr", "temperature", "max_grad_norm"):
        _validate.require_positive(name, getattr(cfg, name))
    for name in ("kl_coef", "value_loss_coef"):
        _validate.require_non_negative(name, getattr(cfg, name))
    for name in ("gamma", "lam", "top_p"):
        _validate.require_unit_interval(name, getattr(cfg, name))
    _validate.require_clip_range(cfg.clip_eps, cfg.clip_eps_high)


def _check_switches(cfg: LMRLConfig) -> None:
    _validate.require_choice("algo", cfg.algo, ALGOS)
    _validate.require_choice("lr_schedule", cfg.lr_schedule, ("constant", "linear", "cosine"))
    _validate.require_choice("loss_agg", cfg.loss_agg, LOSS_AGG_MODES)
    _validate.require_choice("kl_placement", cfg.kl_placement, KL_PLACEMENTS)
    _validate.require_bool("whiten_advantages", cfg.whiten_advantages)
    _validate.require_choice("adv_estimator", cfg.adv_estimator, ADV_ESTIMATORS)
    _validate.require_choice("policy_loss", cfg.policy_loss, POLICY_LOSSES)


def _check_ppo_switches(cfg: LMRLConfig) -> None:
    """PPO's branch is chapter 05's PPOLoss: a GRPO switch that it cannot honour is refused, not ignored."""
    preset = LMRLConfig.ppo()
    grpo_switches = ("clip_eps_high", "policy_loss", "adv_estimator", "normalize_std", "dynamic_sampling")
    for name in (*grpo_switches, "loss_agg", "kl_placement", "whiten_advantages"):
        if getattr(cfg, name) != getattr(preset, name):
            raise ValueError(
                f"{name}: a switch of GRPO's branch; algo='ppo' takes LMRLConfig.ppo()'s "
                f"{getattr(preset, name)!r}, got {getattr(cfg, name)!r}"
            )
