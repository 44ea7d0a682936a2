"""PPO with a critic and GAE, on CartPole or on the sorting task as token-level episodes.

Schulman et al. 2017, "Proximal Policy Optimization Algorithms", Algorithm 1 (actor-critic), a method per line:

    for iteration = 1, 2, ...:
        run pi_theta_old in N environments for T steps              -> collect_experiences (rollout.py)
        compute the advantages A_1 .. A_T with GAE                   -> compute_advantages
        optimise L^CLIP - c1 L^VF + c2 S for K epochs, minibatch M   -> update_policy

The loop follows CleanRL's ``ppo.py`` (Huang et al. 2022, "The 37 Implementation Details of
Proximal Policy Optimization"), written with the course's :func:`course_lib.gae.compute_gae` and
:class:`course_lib.ppo.PPOLoss`. Two differences from CleanRL, both deliberate:

- a time limit is not a terminal state: a step that gymnasium reports ``truncated`` gets
  ``gamma * V(final observation)`` folded into its reward (:func:`course_lib.gae.bootstrap_truncated`,
  as Stable-Baselines3 does); CleanRL treats it as termination. CartPole-v1 truncates at 500 steps,
  exactly where a good policy lives, so this matters for reaching a mean return of 475;
- with a frozen ``ref_model`` the per-step reward becomes ``r_t - kl_coef * kl_estimate(logp_t, logp_ref_t)``
  (:mod:`course_lib.kl`): the KL penalty of PPO-RLHF (Stiennon et al. 2020, Ouyang et al. 2022; TRL's
  PPOTrainer does the same, with ``kl_coef=0.05`` and k1 by default), so the critic learns the penalised return.

Environments plug in through a small vectorised protocol (``reset``/``step`` on tensors, gymnasium's
"same-step" autoreset): :class:`GymVectorEnv` wraps gymnasium's CartPole-v1; :class:`SortingEnv` turns
the sorting task into episodes of one step per response token, reward at the last, so GAE runs over tokens.

Shapes: ``N`` environments (parallel episodes), ``T`` steps per rollout, ``A`` actions (the ``V``
tokens for the sorting task). Experience is stored time last, ``(N, T)``, as :mod:`course_lib.gae` expects.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import torch
from torch import nn
from tqdm.auto import tqdm

from course_lib import _validate
from course_lib._threads import one_thread
from course_lib.gae import bootstrap_truncated, compute_gae
from course_lib.kl import KL_KINDS, kl_estimate
from course_lib.policy_gradient import gather_log_probs
from course_lib.ppo import PPOConfig, PPOLoss, clipped_surrogate_loss, entropy_from_logits, explained_variance
from course_lib.trainers.envs import (  # noqa: F401 (re-exported: chapter 05 imports its trainer and envs from here)
    GymVectorEnv,
    SortingEnv,
    TokenCritic,
    TokenPolicy,
    cartpole_models,
    evaluate_policy,
    mlp,
    sorting_ppo_models,
)
from course_lib.trainers.rollout import Rollout, RunningEpisodes, collect_rollout

DIAGNOSTICS = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")


@dataclass
class PPOTrainerConfig(PPOConfig):
    """Hyperparameters of :class:`PPOTrainer`: those of :class:`~course_lib.ppo.PPOConfig` plus these."""

    lr: float = 1e-3
    """Learning rate of Adam; solves CartPole in fewer steps than CleanRL's 2.5e-4 (benchmarks/cartpole_ppo.py --lr)."""
    num_steps: int = 128
    """T, steps collected in each environment before every update."""
    kl_coef: float = 0.05
    """Weight of the per-step KL penalty folded into the reward; used only with a ref_model."""
    kl_kind: str = "k1"
    """Estimator of that penalty, as in course_lib.kl.kl_estimate ("k1": InstructGPT, TRL's PPO)."""
    seed: int = 0
    """Seeds the action sampling, the minibatch order and the first reset of the environments."""
    num_threads: int | None = 1
    """torch threads inside train(); one is fastest for networks this small (None: leave it alone)."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first field that is out of range."""
        for name in ("clip_eps", "lr", "max_grad_norm"):
            _validate.require_positive(name, getattr(self, name))
        for name in ("gamma", "lam"):
            _validate.require_unit_interval(name, getattr(self, name))
        for name in ("value_loss_coef", "ent_coef", "kl_coef"):
            _validate.require_non_negative(name, getattr(self, name))
        for name in ("update_epochs", "num_minibatches", "num_steps"):
            _validate.require_int(name, getattr(self, name), minimum=1)
        _validate.require_int("seed", self.seed, minimum=0)
        if self.num_threads is not None:
            _validate.require_int("num_threads", self.num_threads, minimum=1)
        if self.target_kl is not None:
            _validate.require_positive("target_kl", self.target_kl)
        _validate.require_choice("kl_kind", self.kl_kind, KL_KINDS)
        for name in ("clip_value_loss", "norm_adv"):
            _validate.require_bool(name, getattr(self, name))


@dataclass
class PPOHistory:
    """What :meth:`PPOTrainer.train` records, one entry per update."""

    steps: list[int] = field(default_factory=list)
    """Environment steps taken so far (N * T per update), counted over all environments."""
    mean_return: list[float] = field(default_factory=list)
    """Mean return of the episodes that ended in the update's rollout (NaN if none ended)."""
    loss: list[float] = field(default_factory=list)
    """Total loss, averaged over the update's minibatches (so are the next five)."""
    policy_loss: list[float] = field(default_factory=list)
    """The clipped surrogate loss."""
    value_loss: list[float] = field(default_factory=list)
    """The critic's loss 0.5 * (V - returns)^2."""
    entropy: list[float] = field(default_factory=list)
    """Mean entropy of the policy over the minibatch's states, in nats."""
    approx_kl: list[float] = field(default_factory=list)
    """k3 estimate of KL(pi_old || pi_theta): how far the update moved the policy."""
    clip_fraction: list[float] = field(default_factory=list)
    """Fraction of samples whose ratio left [1 - clip_eps, 1 + clip_eps]."""
    explained_variance: list[float] = field(default_factory=list)
    """1 - Var(returns - V) / Var(returns) on the rollout, before the update: 1 is a perfect critic."""
    kl: list[float] = field(default_factory=list)
    """Mean per-step KL estimate to the reference policy in the rollout (NaN without a ref_model)."""

    def append(self, record: dict[str, float]) -> None:
        """Append one update's record (a dict with one key per field)."""
        for f in dataclasses.fields(self):
            getattr(self, f.name).append(record[f.name])

    def as_dict(self) -> dict[str, list]:
        """The history as a plain dict of lists."""
        return dataclasses.asdict(self)


class PPOTrainer:
    """PPO (actor-critic, clipped surrogate, GAE) over a vectorised environment.

    The homework's interface: ``PPOTrainer(actor_model, critic_model, ref_model, clip_epsilon, gamma, lam)``
    and :meth:`collect_experiences`, :meth:`compute_advantages`, :meth:`update_policy`; :meth:`train` loops.

    Args:
        actor_model: maps observations ``(M, ...)`` to action logits ``(M, A)``; trained in place.
        critic_model: maps observations ``(M, ...)`` to values ``(M,)`` or ``(M, 1)``; trained in place.
        ref_model: a frozen policy like ``actor_model`` (its KL penalty enters the reward), or None.
        clip_epsilon, gamma, lam: override the config's ``clip_eps``, ``gamma`` and ``lam`` when given.
        config: the other hyperparameters (``PPOTrainerConfig()`` when None).
        policy_loss_fn: ``(logp, logp_old, adv, clip_eps) -> (loss, info)``, by default ``clipped_surrogate_loss``;
            swap in another (yours, or a broken one) to watch what it does to training.
        ppo_loss: the whole loss in place of eq. 9's ``PPOLoss`` (yours: ``PPOLoss(clip, c_1, c_2)``), or None.
    """

    Config, History = PPOTrainerConfig, PPOHistory

    def __init__(
        self,
        actor_model: nn.Module,
        critic_model: nn.Module,
        ref_model: nn.Module | None = None,
        clip_epsilon: float | None = None,
        gamma: float | None = None,
        lam: float | None = None,
        config: PPOTrainerConfig | None = None,
        policy_loss_fn=clipped_surrogate_loss,
        ppo_loss=None,
    ):
        config = self.Config() if config is None else config
        if not isinstance(config, self.Config):
            raise ValueError(f"config: expected a {self.Config.__name__}, got {type(config).__name__}")
        if clip_epsilon is not None:
            _validate.require_positive("clip_epsilon", clip_epsilon)  # the homework's name, not the config's
        overrides = {"clip_eps": clip_epsilon, "gamma": gamma, "lam": lam}
        # dataclasses.replace re-runs __post_init__, so a bad override raises ValueError naming its field.
        self.config = dataclasses.replace(config, **{k: v for k, v in overrides.items() if v is not None})
        for name, model in (("actor_model", actor_model), ("critic_model", critic_model)):
            if not isinstance(model, nn.Module):
                raise ValueError(f"{name}: expected a torch.nn.Module, got {type(model).__name__}")
        if ref_model is not None and not isinstance(ref_model, nn.Module):
            raise ValueError(f"ref_model: expected a torch.nn.Module or None, got {type(ref_model).__name__}")
        if not callable(policy_loss_fn):
            raise ValueError("policy_loss_fn: expected a function (logp, logp_old, adv, clip_eps) -> (loss, info)")
        self.actor_model, self.critic_model, self.ref_model = actor_model, critic_model, ref_model
        if ref_model is not None:
            ref_model.requires_grad_(False)
        self.policy_loss_fn, self.ppo_loss = policy_loss_fn, ppo_loss
        self.params = [*actor_model.parameters(), *critic_model.parameters()]
        # eps=1e-5, as CleanRL and OpenAI Baselines (PPO2) use, in place of the default 1e-8.
        self.optimizer = torch.optim.Adam(self.params, lr=self.config.lr, eps=1e-5)
        self.generator = torch.Generator().manual_seed(self.config.seed)
        self.history = self.History()
        self.episodes = None  # the episodes under way in the env collected from (RunningEpisodes)
        self.total_steps = 0

    @property
    def clip_epsilon(self) -> float:
        """The clip range of the ratio (``config.clip_eps``)."""
        return self.config.clip_eps

    @property
    def gamma(self) -> float:
        """The discount factor (``config.gamma``)."""
        return self.config.gamma

    @property
    def lam(self) -> float:
        """GAE's lambda (``config.lam``)."""
        return self.config.lam

    def _values(self, obs: torch.Tensor) -> torch.Tensor:
        values = self.critic_model(obs)
        return values.squeeze(-1) if values.dim() == 2 and values.shape[-1] == 1 else values  # (M,)

    # -- 1. Collect experience with the current policy -----------------------------------

    def collect_experiences(self, env, num_steps: int | None = None) -> Rollout:
        """Run the current policy for ``num_steps`` steps in each of the env's ``N`` environments.

        Episodes carry on across calls: the next rollout starts where this one stopped
        (the env is reset, with ``config.seed``, the first time it is seen).

        Args:
            env: a vectorised environment: ``reset(seed) -> obs (N, ...)`` and
                ``step(actions (N,)) -> (obs, rewards, terminated, truncated, final_obs)``, where
                ``obs`` is already reset where an episode ended and ``final_obs`` is the
                observation it ended in (:class:`GymVectorEnv`, :class:`SortingEnv`).
            num_steps: ``T`` (default ``config.num_steps``).

        Returns:
            A :class:`Rollout` of ``(N, T)`` tensors.
        """
        T = self.config.num_steps if num_steps is None else _validate.require_int("num_steps", num_steps, minimum=1)
        if self.episodes is None or env is not self.episodes.env:
            self.episodes = RunningEpisodes(env, seed=self.config.seed)  # a new env: reset it
        rollout = collect_rollout(self.actor_model, self._values, self.ref_model, self.episodes, T, self.generator)
        self.total_steps += rollout.actions.numel()  # N * T
        return rollout

    # -- 2. Advantages: GAE on the rewards the critic must learn -------------------------

    def shaped_rewards(self, rollout: Rollout) -> torch.Tensor:
        """The rewards GAE sees: the env's, plus the truncation bootstrap, minus the KL penalty.

        Returns:
            ``(N, T)`` ``r_t + [truncated_t] gamma V(final obs) - kl_coef * kl_estimate(logp_t, logp_ref_t)``
            (the last term only with a ref_model).
        """
        rewards = bootstrap_truncated(rollout.rewards, rollout.truncated, rollout.final_values, self.gamma)  # (N, T)
        if rollout.logp_ref is not None:
            # PPO-RLHF: the KL penalty is part of the reward, paid at every step (token).
            rewards = rewards - self.config.kl_coef * kl_estimate(rollout.logp, rollout.logp_ref, self.config.kl_kind)
        return rewards

    def compute_advantages(self, rollout: Rollout) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE advantages and value targets of a rollout (:func:`course_lib.gae.compute_gae`).

        A step is done when it terminated *or* was truncated: the truncated ones already
        carry their bootstrap in :meth:`shaped_rewards`, and either way the next
        episode's values must not flow back into them.

        Returns:
            ``(advantages, returns)``, both ``(N, T)``; ``returns = advantages + values``.
        """
        dones = rollout.terminated | rollout.truncated  # (N, T)
        return compute_gae(
            self.shaped_rewards(rollout), rollout.values, dones, rollout.last_values, self.gamma, self.lam
        )

    # -- 3. The update: K epochs of minibatch steps on the PPO loss ----------------------

    def update_policy(self, rollout: Rollout, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, float]:
        """``update_epochs`` passes over the rollout in ``num_minibatches`` shuffled minibatches.

        Each minibatch step minimises :class:`~course_lib.ppo.PPOLoss` (eq. 9, its surrogate ``policy_loss_fn``) or
        the ``ppo_loss`` given, advantages normalised per minibatch (``norm_adv``), the gradient norm clipped.

        Args:
            rollout: from :meth:`collect_experiences`.
            advantages, returns: ``(N, T)`` from :meth:`compute_advantages`.

        Returns:
            the means over minibatches of ``loss``, ``policy_loss``, ``value_loss``, ``entropy``, ``approx_kl`` and
            ``clip_fraction``, and ``explained_variance`` of the rollout's values (before the update, as CleanRL's).
        """
        cfg = self.config
        _validate.require_same_shape("advantages", advantages, "rollout.values", rollout.values)
        _validate.require_same_shape("returns", returns, "rollout.values", rollout.values)
        # Every step of every environment is one sample: flatten (N, T) to (N * T,).
        obs = rollout.obs.flatten(0, 1)  # (N*T, ...)
        actions, logp_old, values_old, adv, ret = (
            x.reshape(-1) for x in (rollout.actions, rollout.logp, rollout.values, advantages, returns)
        )  # (N*T,)
        ppo_loss = (
            self.ppo_loss
            if self.ppo_loss is not None
            else PPOLoss(self.clip_epsilon, cfg.value_loss_coef, cfg.ent_coef, cfg.clip_value_loss, self.policy_loss_fn)
        )
        records = []
        for _ in range(cfg.update_epochs):
            epoch_kl, epoch_count = 0.0, 0
            for idx in torch.randperm(actions.shape[0], generator=self.generator).chunk(cfg.num_minibatches):
                logits = self.actor_model(obs[idx])  # (M, A)
                logp = gather_log_probs(logits, actions[idx])  # (M,)
                values = self._values(obs[idx])  # (M,)
                mb_adv = adv[idx]
                if cfg.norm_adv and mb_adv.numel() > 1:
                    mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                loss = ppo_loss(
                    logp,
                    logp_old[idx],
                    values,
                    ret[idx],
                    mb_adv,
                    entropy_from_logits(logits),
                    **({"values_old": values_old[idx]} if self.ppo_loss is None else {}),
                )

                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
                self.optimizer.step()

                records.append(
                    dict.fromkeys(DIAGNOSTICS, math.nan) | {"loss": loss.item()} | getattr(ppo_loss, "info", {})
                )
                epoch_kl, epoch_count = epoch_kl + records[-1]["approx_kl"], epoch_count + 1
            # Early stopping (Spinning Up, CleanRL's target_kl): the policy moved far enough.
            if cfg.target_kl is not None and epoch_kl / epoch_count > cfg.target_kl:
                break
        diagnostics = {key: sum(float(r[key]) for r in records) / len(records) for key in DIAGNOSTICS}  # their mean
        diagnostics["explained_variance"] = explained_variance(rollout.values, returns)
        return diagnostics

    # -- The loop ------------------------------------------------------------------------

    def train_step(self, env) -> dict[str, float]:
        """One iteration: collect, compute the advantages, update; appends a record to ``self.history``."""
        rollout = self.collect_experiences(env)
        advantages, returns = self.compute_advantages(rollout)
        record = self.update_policy(rollout, advantages, returns)
        kl = (
            kl_estimate(rollout.logp, rollout.logp_ref, self.config.kl_kind).mean().item()
            if rollout.logp_ref is not None
            else math.nan
        )
        returns_ended = rollout.episode_returns
        record.update(
            steps=self.total_steps,
            kl=kl,
            mean_return=sum(returns_ended) / len(returns_ended) if returns_ended else math.nan,
        )
        self.history.append(record)
        return record

    def train(self, env, num_updates: int, progress: bool = True) -> PPOHistory:
        """``num_updates`` iterations of :meth:`train_step`, with a tqdm progress bar.

        Runs on ``config.num_threads`` torch threads (restored afterwards): for networks this small,
        splitting each matrix product across threads costs more than it saves.

        Returns:
            ``self.history``, which holds every update so far (several calls append).
        """
        num_updates = _validate.require_int("num_updates", num_updates, minimum=1)
        with one_thread(self.config.num_threads):
            bar = tqdm(range(num_updates), desc="PPO updates", disable=not progress)
            for _ in bar:
                record = self.train_step(env)
                bar.set_postfix(ret=f"{record['mean_return']:.1f}", kl=f"{record['approx_kl']:.4f}")
        return self.history
