"""Plain policy gradient (REINFORCE) on the sorting task, as in Stanford CS336 (2025) lecture 17.

Williams 1992 (REINFORCE): with ``G`` responses ``y_1 .. y_G`` sampled per prompt,

    grad J  ~=  1/(B G T) sum_{b, g, t}  delta[b, g] * grad log pi(y_{b,g,t} | x_b),

the gradient of the surrogate loss ``-mean(delta * logp)``
(:func:`course_lib.policy_gradient.reinforce_loss`), where ``delta`` is the reward or
the reward minus a baseline (:func:`course_lib.baselines.compute_deltas`).

One epoch of :func:`train_sorting_pg`, in the lecture's order:

1. sample ``G`` responses per prompt from the current policy;
2. reward them, and turn the rewards into deltas;
3. take ``steps_per_epoch`` Adam steps on the REINFORCE loss of *that* batch.

Only the first of those steps is exactly on-policy: after it the policy has moved
while the samples have not. The lecture reuses each batch this way because sampling
is the expensive part of RL for language models; chapter 05's importance ratio and
clip are what make the reuse principled. ``steps_per_epoch=1`` is textbook REINFORCE.

The model is :class:`course_lib.models.SortingPolicy`, the lecture's
non-autoregressive model. Shapes: ``B`` prompts, ``G`` responses per prompt, ``T``
tokens, ``V`` vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from einops import repeat
from tqdm.auto import tqdm

from course_lib import _validate
from course_lib.baselines import MODES, compute_deltas
from course_lib.models import SortingPolicy, greedy_responses, sample_responses
from course_lib.policy_gradient import gather_log_probs, reinforce_loss
from course_lib.rewards import sort_exact_match_reward, sort_inclusion_ordering_reward
from course_lib.tasks import sorting_prompts
from course_lib._threads import one_thread

REWARDS = {
    "inclusion_ordering": sort_inclusion_ordering_reward,
    "exact_match": sort_exact_match_reward,
}


@dataclass
class PGConfig:
    """Hyperparameters of :func:`train_sorting_pg`; the defaults are the lecture's."""

    deltas_mode: str = "rewards"
    """How rewards become the loss weights: "rewards", "centered_rewards" or "normalized_rewards"."""
    reward: str = "inclusion_ordering"
    """The reward: "inclusion_ordering" (dense, at most 2T - 1) or "exact_match" (sparse, 0 or 1)."""
    group_size: int = 10
    """G, responses sampled per prompt in every epoch."""
    epochs: int = 100
    """Number of epochs; each samples a fresh batch of responses."""
    steps_per_epoch: int = 10
    """Adam steps taken on each batch of samples (1 is strictly on-policy REINFORCE)."""
    lr: float = 1e-2
    """Adam's learning rate."""
    embedding_dim: int = 10
    """D, the width of the model's embeddings and hidden vector."""
    vocab_size: int | None = None
    """V; None takes the largest prompt token + 1."""
    seed: int = 0
    """Seeds the initialisation and the sampling (two private generators)."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first field that is out of range."""
        _validate.require_choice("deltas_mode", self.deltas_mode, MODES)
        _validate.require_choice("reward", self.reward, tuple(REWARDS))
        for name in ("group_size", "epochs", "steps_per_epoch", "embedding_dim"):
            _validate.require_int(name, getattr(self, name), minimum=1)
        _validate.require_positive("lr", self.lr)
        if self.vocab_size is not None:
            _validate.require_int("vocab_size", self.vocab_size, minimum=1)
        _validate.require_int("seed", self.seed, minimum=0)


@dataclass
class PGHistory:
    """What :func:`train_sorting_pg` records, one entry per epoch (plus the trained model)."""

    mean_reward: list[float] = field(default_factory=list)
    """Mean reward of the B * G responses sampled at the start of the epoch."""
    greedy_reward: list[list[float]] = field(default_factory=list)
    """Reward of the greedy (argmax) response to each prompt, ``B`` numbers, at the start of the epoch."""
    loss: list[float] = field(default_factory=list)
    """REINFORCE loss at the first step of the epoch (on fresh samples: the on-policy one)."""
    nonzero_fraction: list[float] = field(default_factory=list)
    """Fraction of the sampled responses whose delta is nonzero: those that carry a gradient."""
    exact_match: list[float] = field(default_factory=list)
    """Fraction of the sampled responses that are exactly the sorted prompt, whatever the training reward."""
    max_reward: float = 0.0
    """The largest reward possible on every prompt (2T - 1, or 1 for exact match)."""
    model: SortingPolicy | None = None
    """The policy after training."""

    def final_greedy_reward(self) -> list[float]:
        """Greedy reward per prompt of the trained model."""
        return self.greedy_reward[-1] if self.greedy_reward else []


def train_sorting_pg(config: PGConfig | None = None, prompts: torch.Tensor | None = None,
                     progress: bool = False) -> PGHistory:
    """Train a :class:`~course_lib.models.SortingPolicy` on the sorting task with REINFORCE.

    Args:
        config: hyperparameters (``PGConfig()`` when ``None``).
        prompts: ``(B, T)`` integer prompts; the lecture's three
            (:func:`course_lib.tasks.sorting_prompts`) when ``None``.
        progress: show a tqdm progress bar over epochs.

    Returns:
        A :class:`PGHistory`; the last entries describe the model before the last
        epoch's updates, ``history.model`` the model after them.
    """
    config = PGConfig() if config is None else config
    if not isinstance(config, PGConfig):
        raise ValueError(f"config: expected a PGConfig, got {type(config).__name__}")
    config.validate()
    prompts = sorting_prompts() if prompts is None else prompts
    _validate.require_tensor("prompts", prompts, floating=False)
    if prompts.dim() != 2 or prompts.is_floating_point() or prompts.dtype == torch.bool:
        raise ValueError(f"prompts: expected an integer tensor of shape (B, T), got {prompts.dtype} "
                         f"of shape {tuple(prompts.shape)}")
    prompts = prompts.long()
    B, T = prompts.shape
    V = config.vocab_size if config.vocab_size is not None else int(prompts.max()) + 1
    if int(prompts.min()) < 0 or int(prompts.max()) >= V:
        raise ValueError(f"prompts: expected token ids in [0, {V}) for vocab_size={V}, "
                         f"got values in [{int(prompts.min())}, {int(prompts.max())}]")
    reward_fn = REWARDS[config.reward]

    # A model this small (a few hundred parameters) runs faster on one thread: the cost of
    # splitting a tiny matrix product across threads exceeds the product itself.
    with one_thread():
        init_gen = torch.Generator().manual_seed(config.seed)
        sample_gen = torch.Generator().manual_seed(config.seed + 1)
        model = SortingPolicy(V, config.embedding_dim, T, T, generator=init_gen)
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
        history = PGHistory(max_reward=float(reward_fn(prompts[:1], prompts[:1].sort(-1).values)))

        for _ in tqdm(range(config.epochs), desc="epochs", disable=not progress):
            # 1. Sample G responses per prompt from the current policy.
            responses = sample_responses(model, prompts, config.group_size, generator=sample_gen)  # (B, G, T)
            # 2. Reward them; the deltas are the loss weights.
            rewards = reward_fn(prompts[:, None, :], responses)  # (B, G)
            deltas = compute_deltas(rewards, config.deltas_mode)  # (B, G)
            greedy = reward_fn(prompts, greedy_responses(model, prompts))  # (B,)
            history.mean_reward.append(float(rewards.mean()))
            history.greedy_reward.append([float(r) for r in greedy])
            history.nonzero_fraction.append(float((deltas != 0).float().mean()))
            history.exact_match.append(float(sort_exact_match_reward(prompts[:, None, :], responses).mean()))

            # 3. Several Adam steps on the REINFORCE loss of this batch.
            for step in range(config.steps_per_epoch):
                logits = model(prompts)  # (B, T, V)
                # Every response to prompt b is scored by the same logits (the model ignores y_<t).
                logits = repeat(logits, "B T V -> B G T V", G=config.group_size)
                logp = gather_log_probs(logits, responses)  # (B, G, T)
                loss = reinforce_loss(logp, deltas)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if step == 0:
                    history.loss.append(loss.item())
        history.model = model
        return history
