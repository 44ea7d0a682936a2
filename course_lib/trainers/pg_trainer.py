"""Plain policy gradient (REINFORCE) on the sorting task, as in Stanford CS336 (2025) lecture 17.

Williams 1992 (REINFORCE): with ``G`` responses ``y_1 .. y_G`` sampled per prompt,

    grad J  ~=  1/(B G T) sum_{b, g, t}  delta[b, g] * grad log pi(y_{b,g,t} | x_b),

the gradient of the surrogate loss ``-mean(delta * logp)`` (:func:`course_lib.policy_gradient.reinforce_loss`),
where ``delta`` is the reward or the reward minus a baseline (:func:`course_lib.baselines.compute_deltas`).
One round of :meth:`PGTrainer.train`, in the lecture's order:

1. sample ``G`` responses per prompt from the current policy (:meth:`PGTrainer.generate_group_outputs`);
2. reward them (:meth:`PGTrainer.compute_rewards`), and turn the rewards into deltas (:meth:`PGTrainer.advantages`);
3. take ``steps_per_round`` Adam steps (:meth:`PGTrainer.training_step`) on the REINFORCE loss of *that* batch.

Only the first of those steps is exactly on-policy: after it the policy has moved while the
samples have not. The lecture reuses each batch because sampling is the expensive part of RL for
LMs; chapter 05's ratio and clip make the reuse principled. ``steps_per_round=1`` is REINFORCE.

The course's vocabulary, from this chapter to the last: a *round* samples a fresh batch and trains on it; an
*epoch* is one pass over a round's batch (PPO's ``update_epochs``, the LM loop's ``update_epochs``).

:class:`PGTrainer` is the skeleton of the course's trainers: :class:`~course_lib.trainers.grpo_trainer.GRPOTrainer`
(chapter 06) is this class with another advantage and another loss. :func:`train_sorting_pg` is chapter 02's
entry point, a thin wrapper; every trainer records a :class:`PGHistory` (GRPO's adds two fields).

The model is :class:`course_lib.models.SortingPolicy`, the lecture's non-autoregressive model.
Shapes: ``B`` prompts, ``G`` responses per prompt, ``T`` tokens, ``V`` vocabulary.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch
from einops import repeat
from torch import nn
from tqdm.auto import tqdm

from course_lib import _validate
from course_lib._threads import one_thread
from course_lib.baselines import MODES, compute_deltas
from course_lib.models import SortingPolicy, greedy_responses, sample_responses
from course_lib.policy_gradient import gather_log_probs, reinforce_loss
from course_lib.ppo import entropy_from_logits
from course_lib.rewards import sort_exact_match_reward, sort_inclusion_ordering_reward
from course_lib.tasks import sorting_prompts

REWARDS = {"inclusion_ordering": sort_inclusion_ordering_reward, "exact_match": sort_exact_match_reward}


@dataclass
class PGTrainerConfig:
    """Hyperparameters of :class:`PGTrainer`: the lecture's budget and model (``lecture()``: its lr and init)."""

    group_size: int = 10
    """G, responses sampled per prompt in every round."""
    rounds: int = 100
    """Number of rounds; each samples a fresh batch of responses."""
    steps_per_round: int = 10
    """Adam steps taken on each round's batch of samples (1 is strictly on-policy REINFORCE)."""
    lr: float = 1e-2
    """Adam's learning rate."""
    deltas_mode: str = "rewards"
    """How rewards become the loss weights: "rewards", "centered_rewards" or "normalized_rewards"."""
    temperature: float = 1.0
    """Sampling temperature; the losses use the log-probs of the tempered distribution."""
    ent_coef: float = 0.0
    """Weight of an entropy bonus (subtracted from the loss), 0 in the lecture."""
    embedding_dim: int = 10
    """D, the width of the model's embeddings and hidden vector."""
    init_scale: float = 1.0
    """Multiplies the decoder matrices at init, so the initial logits scale by it (1 keeps SortingPolicy's init)."""
    embedding_std: float | None = None
    """Std of the embedding table at init: None is SortingPolicy's 1/sqrt(D), 1.0 the lecture's nn.Embedding."""
    reward: str = "inclusion_ordering"
    """The reward: "inclusion_ordering" (dense, at most 2T - 1) or "exact_match" (sparse, 0 or 1)."""
    seed: int = 0
    """Seeds the initialisation and the sampling (two private generators)."""

    def __post_init__(self) -> None:
        self.validate()

    @classmethod
    def lecture(cls, **overrides) -> PGTrainerConfig:
        """The lecture's exact setup: Adam at lr 1e-3 and nn.Embedding's N(0, 1) table (``overrides`` on top)."""
        return cls(**{"lr": 1e-3, "embedding_std": 1.0, **overrides})

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first field that is out of range."""
        for name in ("group_size", "rounds", "steps_per_round", "embedding_dim"):
            _validate.require_int(name, getattr(self, name), minimum=1)
        _validate.require_int("seed", self.seed, minimum=0)
        for name in ("lr", "temperature", "init_scale"):
            _validate.require_positive(name, getattr(self, name))
        if self.embedding_std is not None:
            _validate.require_positive("embedding_std", self.embedding_std)
        _validate.require_non_negative("ent_coef", self.ent_coef)
        _validate.require_choice("deltas_mode", self.deltas_mode, MODES)
        _validate.require_choice("reward", self.reward, tuple(REWARDS))


@dataclass
class PGHistory:
    """What :meth:`PGTrainer.train` records, one entry per round (plus the trained model)."""

    mean_reward: list[float] = field(default_factory=list)
    """Mean reward of the B * G responses sampled at the start of the round."""
    greedy_reward: list[list[float]] = field(default_factory=list)
    """Reward of the greedy (argmax) response to each prompt, ``B`` numbers, at the end of the round."""
    loss: list[float] = field(default_factory=list)
    """The loss, averaged over the round's steps."""
    on_policy_loss: list[float] = field(default_factory=list)
    """The loss at the round's first step, on fresh samples: the on-policy one."""
    entropy: list[float] = field(default_factory=list)
    """Mean entropy (nats) of the policy's distribution at each response position, at the start of the round."""
    all_equal_fraction: list[float] = field(default_factory=list)
    """Fraction of the B groups whose G rewards are all equal."""
    nonzero_fraction: list[float] = field(default_factory=list)
    """Fraction of the sampled responses whose advantage is nonzero: those that carry a gradient."""
    exact_match: list[float] = field(default_factory=list)
    """Fraction of the sampled responses that are exactly right (the sorted prompt), whatever the reward."""
    max_reward: float = 0.0
    """The largest reward possible on every prompt (2T - 1, or 1 for exact match)."""
    model: nn.Module | None = None
    """The policy after training."""

    def append(self, record: dict) -> None:
        """Append one round's record (a dict with a key for every list field; other keys are ignored)."""
        for f in dataclasses.fields(self):
            if isinstance(getattr(self, f.name), list):
                getattr(self, f.name).append(record[f.name])

    def final_greedy_reward(self) -> list[float]:
        """Greedy reward per prompt of the trained model."""
        return self.greedy_reward[-1] if self.greedy_reward else []


class PGTrainer:
    """REINFORCE for a policy that maps ``(B, T)`` prompts to ``(B, T, V)`` logits, such as ``SortingPolicy``.

    The skeleton of the course's trainers: :meth:`generate_group_outputs`, :meth:`compute_rewards`
    and :meth:`training_step`, with :meth:`train` looping over them. Chapter 06's ``GRPOTrainer``
    overrides the advantage, what the steps on one batch hold fixed, and the loss.

    Args:
        model: the policy pi_theta, trained in place.
        group_size: ``G``; overrides ``config.group_size`` when given.
        config: every other hyperparameter (``PGTrainerConfig()`` when ``None``).
    """

    Config, History = PGTrainerConfig, PGHistory

    def __init__(
        self, model: nn.Module, group_size: int | None = None, config: PGTrainerConfig | None = None, **overrides
    ):
        if not isinstance(model, nn.Module):
            raise ValueError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
        config = self.Config() if config is None else config
        if not isinstance(config, self.Config):
            raise ValueError(f"config: expected a {self.Config.__name__}, got {type(config).__name__}")
        overrides = {"group_size": group_size, **overrides}
        # dataclasses.replace re-runs __post_init__, so a bad override raises ValueError naming its field.
        self.config = dataclasses.replace(config, **{k: v for k, v in overrides.items() if v is not None})
        self.model = model
        self.reward_fn = REWARDS[self.config.reward]
        self.optimizer = torch.optim.Adam(model.parameters(), lr=self.config.lr)
        self.generator = torch.Generator().manual_seed(self.config.seed + 1)  # for sampling

    @classmethod
    def for_sorting(cls, config=None, prompts: torch.Tensor | None = None, vocab_size: int | None = None):
        """A trainer with a fresh ``SortingPolicy`` seeded by ``config`` (``cls.Config()`` when ``None``).

        ``prompts`` ``(B, T)`` (the lecture's three when ``None``) give ``T`` and, unless ``vocab_size`` does, ``V``.
        """
        config = cls.Config() if config is None else config
        prompts = _require_prompts(sorting_prompts() if prompts is None else prompts)
        V, T = vocab_size if vocab_size is not None else int(prompts.max()) + 1, prompts.shape[-1]
        gen = torch.Generator().manual_seed(config.seed)
        model = SortingPolicy(V, config.embedding_dim, T, T, generator=gen, embedding_std=config.embedding_std)
        with torch.no_grad():
            # The logits are linear in the decoder, so this scales the initial logits by init_scale.
            model.decode.mul_(config.init_scale)
        return cls(model, config=config)

    # -- the steps of the homework, and the pieces a new model or task replaces ---------

    def generate_group_outputs(self, prompts: torch.Tensor) -> torch.Tensor:
        """``(B, G, T)`` responses (long, no gradient): ``G`` per ``(B, T)`` prompt, at ``config.temperature``."""

        def tempered(p):
            return self.model(p) / self.config.temperature

        return sample_responses(tempered, prompts, self.config.group_size, generator=self.generator)  # (B, G, T)

    def compute_rewards(self, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
        """``(B, G)`` float32 rewards: every one of the ``(B, G, T)`` responses scored against its ``(B, T)`` prompt."""
        prompts = _require_prompts(prompts)
        _validate.require_tensor("responses", responses, floating=False)
        if responses.is_floating_point() or responses.dim() != 3 or responses.shape[0] != prompts.shape[0]:
            raise ValueError(
                f"responses: expected an integer tensor of shape (B, G, T) with B = {prompts.shape[0]} "
                f"like prompts {tuple(prompts.shape)}, got {tuple(responses.shape)} of {responses.dtype}"
            )
        return self.reward_fn(prompts[:, None, :], responses)  # (B, G): the prompt broadcasts over the group

    def advantages(self, rewards: torch.Tensor) -> torch.Tensor:
        """``(B, G)`` the weight of each response in the loss: chapter 03's deltas of ``(B, G)`` rewards."""
        return compute_deltas(rewards, self.config.deltas_mode)  # (B, G)

    def log_probs(self, model: nn.Module, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
        """``log pi(y_t | x)`` of every response token under ``model`` at ``config.temperature``.

        Args:
            model: the policy (or, for GRPO, the reference).
            prompts: ``(B, T)``; responses: ``(B, G, T)``.

        Returns:
            ``(B, G, T)`` log-probs (with a gradient when ``model``'s parameters need one).
        """
        logits = model(prompts) / self.config.temperature  # (B, T, V)
        # The model ignores y_<t, so the G responses to prompt b share its logits.
        logits = repeat(logits, "B T V -> B G T V", G=responses.shape[1])
        return gather_log_probs(logits, responses)  # (B, G, T)

    def response_mask(self, responses: torch.Tensor) -> torch.Tensor:
        """``(B, G, T)`` 1.0 for the response tokens that count, 0.0 for padding: every sorting token counts."""
        return torch.ones(responses.shape)

    def entropy(self, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
        """Mean entropy (nats) of the policy's distribution at each response position, at ``config.temperature``."""
        return entropy_from_logits(self.model(prompts) / self.config.temperature).mean()

    def batch_constants(self, prompts: torch.Tensor, responses: torch.Tensor) -> dict[str, torch.Tensor]:
        """What every step on one batch holds fixed, passed to :meth:`training_step`: nothing for REINFORCE."""
        return {}

    def training_step(self, prompts: torch.Tensor, responses: torch.Tensor, rewards: torch.Tensor) -> dict[str, float]:
        """One Adam step on the REINFORCE loss of ``(B, G, T)`` responses to ``(B, T)`` prompts, ``(B, G)`` rewards.

        Returns:
            ``loss`` and ``entropy`` as floats.
        """
        logp = self.log_probs(self.model, prompts, responses)  # (B, G, T), carries the gradient
        loss = reinforce_loss(logp, self.advantages(rewards), self.response_mask(responses))
        return self.optimizer_step(loss, prompts, responses, {})

    def optimizer_step(
        self, loss: torch.Tensor, prompts: torch.Tensor, responses: torch.Tensor, info: dict[str, float]
    ) -> dict[str, float]:
        """Subtract the entropy bonus (if ``ent_coef > 0``) and take one Adam step; ``info`` + loss, entropy."""
        entropy = torch.zeros(())
        if self.config.ent_coef > 0:
            # An entropy bonus, as in PPO (chapter 05): mean entropy of every position's distribution.
            entropy = self.entropy(prompts, responses)
            loss = loss - self.config.ent_coef * entropy
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {**info, "loss": loss.item(), "entropy": entropy.item()}

    def greedy_rewards(self, prompts: torch.Tensor) -> list[float]:
        """Reward of the greedy (argmax) response to each prompt: ``B`` floats."""
        return [float(r) for r in self.reward_fn(prompts, greedy_responses(self.model, prompts))]

    def exact_match(self, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
        """``(B, G)`` 1.0 where a response is exactly right (the sorted prompt), else 0.0."""
        return sort_exact_match_reward(prompts[:, None, :], responses)

    # -- the loop --------------------------------------------------------------------------

    def train(self, prompts: torch.Tensor | None = None, rounds: int | None = None, progress: bool = True) -> PGHistory:
        """Train for ``rounds`` rounds (``config.rounds`` when ``None``) on ``prompts``.

        Seeded and deterministic. A model this small runs several times faster on one thread than on
        two (splitting its tiny matrix products costs more than they do), so the loop runs on one.

        Args:
            prompts: ``(B, T)`` integer prompts; the lecture's three when ``None``.
            rounds: number of rounds, a positive int.
            progress: show a tqdm progress bar over rounds.

        Returns:
            A history (:attr:`History`): one entry per round.
        """
        cfg = self.config
        prompts = _require_prompts(sorting_prompts() if prompts is None else prompts)
        rounds = cfg.rounds if rounds is None else _validate.require_int("rounds", rounds, minimum=1)
        history = self.History(max_reward=float(self.reward_fn(prompts[:1], prompts[:1].sort(-1).values)))

        with one_thread():
            for _ in tqdm(range(rounds), desc=f"{type(self).__name__} rounds", disable=not progress):
                # 1-2. Sample a group per prompt and reward it.
                responses = self.generate_group_outputs(prompts)  # (B, G, T)
                rewards = self.compute_rewards(prompts, responses)  # (B, G)
                # 3. The policy's entropy before the steps, and what the steps hold fixed.
                with torch.no_grad():
                    entropy = self.entropy(prompts, responses)
                    constants = self.batch_constants(prompts, responses)
                # 4. Several steps on the same batch.
                infos = [
                    self.training_step(prompts, responses, rewards, **constants) for _ in range(cfg.steps_per_round)
                ]
                record = {key: sum(i[key] for i in infos) / len(infos) for key in infos[0]}  # the steps' mean
                history.append(
                    {
                        **record,
                        "mean_reward": float(rewards.mean()),
                        "entropy": float(entropy),
                        "on_policy_loss": infos[0]["loss"],
                        "all_equal_fraction": float((rewards == rewards[:, :1]).all(-1).double().mean()),
                        "nonzero_fraction": float((self.advantages(rewards) != 0).float().mean()),
                        "exact_match": float(self.exact_match(prompts, responses).mean()),
                        "greedy_reward": self.greedy_rewards(prompts),
                    }
                )
        history.model = self.model
        return history


def _require_prompts(prompts) -> torch.Tensor:
    _validate.require_tensor("prompts", prompts, floating=False)
    if prompts.is_floating_point() or prompts.is_complex() or prompts.dtype == torch.bool or prompts.dim() != 2:
        raise ValueError(
            f"prompts: expected a (B, T) integer tensor of token ids, "
            f"got shape {tuple(prompts.shape)} and dtype {prompts.dtype}"
        )
    return prompts.long()


def train_sorting_pg(
    config: PGTrainerConfig | None = None,
    prompts: torch.Tensor | None = None,
    progress: bool = False,
    vocab_size: int | None = None,
) -> PGHistory:
    """Train a :class:`~course_lib.models.SortingPolicy` on the sorting task with REINFORCE (:class:`PGTrainer`).

    Args:
        config: hyperparameters (``PGTrainerConfig()`` when ``None``; ``PGTrainerConfig.lecture()`` is the
            lecture's exact setup).
        prompts: ``(B, T)`` integer prompts; the lecture's three
            (:func:`course_lib.tasks.sorting_prompts`) when ``None``.
        progress: show a tqdm progress bar over rounds.
        vocab_size: ``V``; ``None`` takes the largest prompt token + 1.

    Returns:
        A :class:`PGHistory`, the trainer's: one entry per round, ``history.model`` the trained model.
    """
    config = PGTrainerConfig() if config is None else config
    if not isinstance(config, PGTrainerConfig):
        raise ValueError(f"config: expected a PGTrainerConfig, got {type(config).__name__}")
    config.validate()
    if vocab_size is not None:
        _validate.require_int("vocab_size", vocab_size, minimum=1)
    trainer = PGTrainer.for_sorting(config, prompts, vocab_size=vocab_size)
    return trainer.train(prompts, progress=progress)
