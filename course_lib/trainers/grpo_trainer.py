"""GRPO on the sorting task: chapter 02's REINFORCE loop plus the ratio, the clip, reuse and a KL term.

Shao et al. 2024, "DeepSeekMath", section 4.1 and Algorithm 1 (iterative GRPO, one
iteration). One epoch of :meth:`GRPOTrainer.train` does what one epoch of
:func:`course_lib.trainers.pg_trainer.train_sorting_pg` does, in the same order, with four changes
marked (*) below:

1. sample ``G`` responses per prompt from the current policy (:meth:`generate_group_outputs`);
2. reward them (:meth:`compute_rewards`); the group-relative advantages come from
   :func:`course_lib.grpo.group_advantages` inside the loss;
3. (*) record ``logp_old``, the log-probs of the policy that sampled them, and
   ``logp_ref``, those of the frozen reference policy;
4. take ``steps_per_epoch`` Adam steps (:meth:`training_step`) on
   :func:`course_lib.grpo.grpo_loss` of that batch: (*) the importance ratio
   ``exp(logp - logp_old)`` in place of ``logp``, (*) clipped to
   ``[1 - clip_eps, 1 + clip_eps]``, which is what makes (*) reusing one batch for several
   steps principled (PPO, Schulman et al. 2017), and (*) ``kl_coef`` times the k3
   estimate of KL(pi_theta || pi_ref) added to every token's loss.

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
import dataclasses
from dataclasses import dataclass, field

import torch
from einops import repeat
from torch import nn
from tqdm.auto import tqdm

from course_lib import _validate
from course_lib.grpo import KL_KINDS, LOSS_AGG_MODES, grpo_loss
from course_lib.models import SortingPolicy, greedy_responses, sample_responses
from course_lib.policy_gradient import gather_log_probs
from course_lib.trainers.pg_trainer import REWARDS  # the same two rewards as chapter 02's loop
from course_lib.tasks import sorting_prompts
from course_lib._threads import one_thread


@dataclass
class GRPOTrainerConfig:
    """Hyperparameters of :class:`GRPOTrainer`; the defaults are the course's GRPO configuration."""

    group_size: int = 10
    """G, responses sampled per prompt in every epoch (the lecture's 10)."""
    epochs: int = 100
    """Number of epochs; each samples a fresh batch of responses (the lecture's 100)."""
    steps_per_epoch: int = 10
    """Adam steps on each batch; the ratio and the clip keep the reuse in check (the lecture's 10)."""
    lr: float = 1e-2
    """Adam's learning rate."""
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
    temperature: float = 1.0
    """Sampling temperature; the losses use the log-probs of the tempered distribution."""
    entropy_coef: float = 0.0
    """Weight of an entropy bonus (subtracted from the loss), 0 in GRPO."""
    embedding_dim: int = 10
    """D, the width of the model's embeddings (the lecture's 10)."""
    init_scale: float = 0.1
    """Multiplies the decoder matrices at initialisation, so the initial logits scale by it (1 is the lecture's)."""
    reward: str = "inclusion_ordering"
    """The reward: "inclusion_ordering" (dense, at most 2T - 1) or "exact_match" (0 or 1)."""
    seed: int = 0
    """Seeds the initialisation and the sampling (two private generators)."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first field that is out of range."""
        for name in ("group_size", "epochs", "steps_per_epoch", "embedding_dim"):
            _validate.require_int(name, getattr(self, name), minimum=1)
        _validate.require_int("seed", self.seed, minimum=0)
        for name in ("lr", "clip_eps", "temperature", "init_scale"):
            _validate.require_positive(name, getattr(self, name))
        for name in ("kl_coef", "entropy_coef"):
            _validate.require_non_negative(name, getattr(self, name))
        _validate.require_choice("kl_kind", self.kl_kind, KL_KINDS)
        _validate.require_choice("loss_agg", self.loss_agg, LOSS_AGG_MODES)
        _validate.require_choice("reward", self.reward, tuple(REWARDS))
        if not isinstance(self.normalize_std, bool):
            raise ValueError(f"normalize_std: expected True or False, got {self.normalize_std!r}")


@dataclass
class GRPOHistory:
    """What :meth:`GRPOTrainer.train` records, one entry per epoch (plus the trained model)."""

    mean_reward: list[float] = field(default_factory=list)
    """Mean reward of the B * G responses sampled at the start of the epoch."""
    greedy_reward: list[list[float]] = field(default_factory=list)
    """Reward of the greedy (argmax) response to each prompt, ``B`` numbers, at the end of the epoch."""
    loss: list[float] = field(default_factory=list)
    """GRPO loss, averaged over the epoch's steps."""
    kl: list[float] = field(default_factory=list)
    """Mean per-token KL estimate to the reference policy, averaged over the epoch's steps."""
    clip_fraction: list[float] = field(default_factory=list)
    """Fraction of tokens whose ratio left [1 - clip_eps, 1 + clip_eps], averaged over the epoch's steps."""
    entropy: list[float] = field(default_factory=list)
    """Mean entropy (nats) of the policy's distribution at each response position, at the start of the epoch."""
    all_equal_fraction: list[float] = field(default_factory=list)
    """Fraction of the B groups whose G rewards are all equal: zero advantages, no learning signal."""
    max_reward: float = 0.0
    """The largest reward possible on every prompt (2T - 1, or 1 for exact match)."""
    model: nn.Module | None = None
    """The policy after training."""

    def final_greedy_reward(self) -> list[float]:
        """Greedy reward per prompt of the trained model."""
        return self.greedy_reward[-1] if self.greedy_reward else []


class GRPOTrainer:
    """GRPO for a policy that maps ``(B, T)`` prompts to ``(B, T, V)`` logits, such as ``SortingPolicy``.

    The homework's interface: ``GRPOTrainer(model, ref_model, group_size, clip_epsilon,
    kl_beta)`` and the three methods :meth:`generate_group_outputs`,
    :meth:`compute_rewards` and :meth:`training_step`; :meth:`train` loops over them.

    Args:
        model: the policy pi_theta, trained in place.
        ref_model: the frozen reference pi_ref (a copy of the initial policy), or ``None``
            for no KL term. Its parameters are never updated.
        group_size: ``G``; overrides ``config.group_size`` when given.
        clip_epsilon: PPO's clip range; overrides ``config.clip_eps`` when given.
        kl_beta: weight of the KL penalty; overrides ``config.kl_coef`` when given.
        config: every other hyperparameter (``GRPOTrainerConfig()`` when ``None``).
    """

    def __init__(self, model: nn.Module, ref_model: nn.Module | None, group_size: int | None = None,
                 clip_epsilon: float | None = None, kl_beta: float | None = None,
                 config: GRPOTrainerConfig | None = None):
        if not isinstance(model, nn.Module):
            raise ValueError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
        if ref_model is not None and not isinstance(ref_model, nn.Module):
            raise ValueError(f"ref_model: expected a torch.nn.Module or None, got {type(ref_model).__name__}")
        config = GRPOTrainerConfig() if config is None else config
        if not isinstance(config, GRPOTrainerConfig):
            raise ValueError(f"config: expected a GRPOTrainerConfig, got {type(config).__name__}")
        overrides = {"group_size": group_size, "clip_eps": clip_epsilon, "kl_coef": kl_beta}
        # dataclasses.replace re-runs __post_init__, so a bad override raises ValueError naming its field.
        self.config = dataclasses.replace(config, **{k: v for k, v in overrides.items() if v is not None})
        self.model = model
        self.ref_model = ref_model
        if ref_model is not None:
            ref_model.requires_grad_(False)
        self.reward_fn = REWARDS[self.config.reward]
        self.optimizer = torch.optim.Adam(model.parameters(), lr=self.config.lr)
        self.generator = torch.Generator().manual_seed(self.config.seed + 1)  # for sampling

    @classmethod
    def for_sorting(cls, config: GRPOTrainerConfig | None = None, prompts: torch.Tensor | None = None) -> GRPOTrainer:
        """A trainer with a fresh ``SortingPolicy`` (seeded by ``config.seed``) and a frozen copy as reference.

        Args:
            config: hyperparameters (``GRPOTrainerConfig()`` when ``None``).
            prompts: ``(B, T)`` the prompts it will train on, for ``V`` and ``T``; the lecture's three when ``None``.
        """
        config = GRPOTrainerConfig() if config is None else config
        prompts = _require_prompts(sorting_prompts() if prompts is None else prompts)
        V, T = int(prompts.max()) + 1, prompts.shape[-1]
        model = SortingPolicy(V, config.embedding_dim, T, T, generator=torch.Generator().manual_seed(config.seed))
        with torch.no_grad():
            # The logits are linear in the decoder, so this scales the initial logits by init_scale.
            model.decode.mul_(config.init_scale)
        # The reference is the policy before RL, frozen (DeepSeekMath: the initial policy).
        return cls(model, copy.deepcopy(model), config=config)

    # -- the three steps of the homework -------------------------------------------------

    def generate_group_outputs(self, prompts: torch.Tensor) -> torch.Tensor:
        """Sample ``G`` responses per prompt from the current policy at ``config.temperature``.

        Args:
            prompts: ``(B, T)`` integer prompts.

        Returns:
            ``(B, G, T)`` LongTensor of responses (no gradient).
        """
        def tempered(p):
            return self.model(p) / self.config.temperature
        return sample_responses(tempered, prompts, self.config.group_size, generator=self.generator)  # (B, G, T)

    def compute_rewards(self, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
        """Score every response against its prompt.

        Args:
            prompts: ``(B, T)`` integer prompts.
            responses: ``(B, G, T)`` integer responses.

        Returns:
            ``(B, G)`` float32 rewards.
        """
        prompts = _require_prompts(prompts)
        _validate.require_tensor("responses", responses, floating=False)
        if responses.is_floating_point() or responses.dim() != 3 or responses.shape[0] != prompts.shape[0]:
            raise ValueError(f"responses: expected an integer tensor of shape (B, G, T) with B = {prompts.shape[0]} "
                             f"like prompts {tuple(prompts.shape)}, got {tuple(responses.shape)} of {responses.dtype}")
        return self.reward_fn(prompts[:, None, :], responses)  # (B, G): the prompt broadcasts over the group

    def log_probs(self, model: nn.Module, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
        """``log pi(y_t | x)`` of every response token under ``model`` at ``config.temperature``.

        Args:
            model: the policy or the reference.
            prompts: ``(B, T)``; responses: ``(B, G, T)``.

        Returns:
            ``(B, G, T)`` log-probs (with a gradient when ``model``'s parameters need one).
        """
        logits = model(prompts) / self.config.temperature  # (B, T, V)
        # The model ignores y_<t, so the G responses to prompt b share its logits.
        logits = repeat(logits, "B T V -> B G T V", G=responses.shape[1])
        return gather_log_probs(logits, responses)  # (B, G, T)

    def training_step(self, prompts: torch.Tensor, responses: torch.Tensor, rewards: torch.Tensor,
                      logp_old: torch.Tensor | None = None, logp_ref: torch.Tensor | None = None) -> dict[str, float]:
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
        mask = torch.ones_like(logp)  # every sorting response has all T tokens
        loss, info = grpo_loss(logp, logp_old, logp_ref if cfg.kl_coef > 0 else None, rewards.to(logp.dtype), mask,
                               clip_eps=cfg.clip_eps, kl_coef=cfg.kl_coef, kl_kind=cfg.kl_kind,
                               normalize_std=cfg.normalize_std, loss_agg=cfg.loss_agg)
        entropy = torch.zeros(())
        if cfg.entropy_coef > 0:
            # An entropy bonus, as in PPO (chapter 05): mean entropy of every position's distribution.
            logp_all = torch.log_softmax(self.model(prompts) / cfg.temperature, dim=-1)  # (B, T, V)
            entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
            loss = loss - cfg.entropy_coef * entropy
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {**info, "loss": loss.item(), "entropy": entropy.item()}

    # -- the loop --------------------------------------------------------------------------

    def train(self, prompts: torch.Tensor | None = None, epochs: int | None = None,
              progress: bool = True) -> GRPOHistory:
        """Train for ``epochs`` epochs (``config.epochs`` when ``None``) on ``prompts``.

        Seeded and deterministic: the same config, model and prompts give the same history.
        A model this small runs faster on one thread (a few hundred parameters: splitting
        its matrix products across threads costs more than the products; measured several
        times faster than two threads on a 2-core machine), so the loop sets
        ``torch.set_num_threads(1)`` and restores the previous value at the end.

        Args:
            prompts: ``(B, T)`` integer prompts; the lecture's three when ``None``.
            epochs: number of epochs, a positive int.
            progress: show a tqdm progress bar over epochs.

        Returns:
            A :class:`GRPOHistory`.
        """
        cfg = self.config
        prompts = _require_prompts(sorting_prompts() if prompts is None else prompts)
        epochs = cfg.epochs if epochs is None else _validate.require_int("epochs", epochs, minimum=1)
        history = GRPOHistory(max_reward=float(self.reward_fn(prompts[:1], prompts[:1].sort(-1).values)))

        with one_thread():
            for _ in tqdm(range(epochs), desc="GRPO epochs", disable=not progress):
                # 1-2. Sample a group per prompt and reward it.
                responses = self.generate_group_outputs(prompts)  # (B, G, T)
                rewards = self.compute_rewards(prompts, responses)  # (B, G)
                # 3. The sampling policy's and the reference's log-probs: constants for this epoch.
                with torch.no_grad():
                    logp_all = torch.log_softmax(self.model(prompts) / cfg.temperature, dim=-1)  # (B, T, V)
                    entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
                    logp_old = self.log_probs(self.model, prompts, responses)  # (B, G, T)
                    logp_ref = (self.log_probs(self.ref_model, prompts, responses)
                                if self.ref_model is not None and cfg.kl_coef > 0 else None)
                # 4. Several clipped steps on the same batch.
                infos = [self.training_step(prompts, responses, rewards, logp_old, logp_ref)
                         for _ in range(cfg.steps_per_epoch)]
                history.mean_reward.append(float(rewards.mean()))
                history.entropy.append(float(entropy))
                history.all_equal_fraction.append(float((rewards == rewards[:, :1]).all(-1).double().mean()))
                history.loss.append(sum(i["loss"] for i in infos) / len(infos))
                history.kl.append(sum(i["kl"] for i in infos) / len(infos))
                history.clip_fraction.append(sum(i["clip_fraction"] for i in infos) / len(infos))
                greedy = self.reward_fn(prompts, greedy_responses(self.model, prompts))  # (B,)
                history.greedy_reward.append([float(r) for r in greedy])
        history.model = self.model
        return history


def _require_prompts(prompts) -> torch.Tensor:
    _validate.require_tensor("prompts", prompts, floating=False)
    if prompts.is_floating_point() or prompts.is_complex() or prompts.dtype == torch.bool or prompts.dim() != 2:
        raise ValueError(f"prompts: expected a (B, T) integer tensor of token ids, "
                         f"got shape {tuple(prompts.shape)} and dtype {prompts.dtype}")
    return prompts.long()
