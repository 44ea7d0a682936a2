"""Variants of the sorting experiments: held-out prompts, a moving reference, and expert iteration.

Three questions the sorting results of chapters 02 to 07 leave open, each answered with a run:

1. **Memorised or learnt?** The policies train and are scored on the lecture's three prompts. The model
   reads the prompt, so it *could* sort a prompt it never saw; :func:`held_out_prompts` draws others
   (distinct integers, as in :func:`course_lib.tasks.random_sorting_prompts`) to score the trained
   policies on, and :func:`greedy_scores` scores a policy on any prompts.
2. **Which reference?** GRPO's KL penalty pulls toward ``pi_ref``. Frozen at the initial policy it is an
   anchor; copied from the policy every ``k`` rounds (``GRPOTrainerConfig.ref_refresh_every``) the anchor moves
   with it; copied every round it *is* the sampling policy ``pi_old``, and nothing anchors the policy at all.
   :func:`kl_to_reference` measures how far a trained policy went.
3. **Is RL needed?** Expert iteration (rejection-sampling fine-tuning: sample, keep the best of each group,
   fine-tune on it; STaR, Zelikman et al. 2022; RAFT, Dong et al. 2023) uses the same samples and steps as
   GRPO: :func:`train_expert_iteration`.

Shapes: ``B`` prompts, ``G`` group, ``T`` tokens, ``V`` vocabulary.
"""

from __future__ import annotations

import torch
from einops import repeat

from course_lib import _validate
from course_lib._threads import one_thread
from course_lib.models import SortingPolicy, greedy_responses, sample_responses
from course_lib.policy_gradient import gather_log_probs
from course_lib.rewards import sort_exact_match_reward, sort_inclusion_ordering_reward
from course_lib.tasks import random_sorting_prompts, sorting_prompts
from course_lib.trainers.grpo_trainer import GRPOHistory, GRPOTrainerConfig


def held_out_prompts(n: int = 24, length: int = 3, vocab_size: int = 5, seed: int = 1) -> torch.Tensor:
    """``n`` distinct prompts of ``length`` distinct tokens in ``[0, vocab_size)``, none of the lecture's three.

    Drawn with :func:`course_lib.tasks.random_sorting_prompts`; duplicates and the training prompts are
    dropped. With the lecture's ``length = 3`` and ``vocab_size = 5`` there are 60 possible prompts.

    Returns:
        ``(n, length)`` LongTensor.
    """
    _validate.require_int("n", n, minimum=1)
    pool = random_sorting_prompts(20 * n + 60, length, vocab_size, seed=seed)  # (M, T)
    seen = {tuple(p) for p in sorting_prompts().tolist()}
    keep = []
    for p in pool.tolist():
        if tuple(p) not in seen:
            seen.add(tuple(p))
            keep.append(p)
        if len(keep) == n:
            break
    if len(keep) < n:
        raise ValueError(f"n: only {len(keep)} distinct held-out prompts of length {length} over {vocab_size} tokens")
    return torch.tensor(keep, dtype=torch.long)


def greedy_scores(model, prompts: torch.Tensor) -> dict[str, float]:
    """Mean greedy reward (inclusion + ordering, at most ``2T - 1``) and fraction exactly sorted on ``prompts``."""
    answers = greedy_responses(model, prompts)  # (B, T)
    return {
        "greedy_reward": float(sort_inclusion_ordering_reward(prompts, answers).mean()),
        "sorted_fraction": float(sort_exact_match_reward(prompts, answers).mean()),
    }


def kl_to_reference(model, reference, prompts: torch.Tensor) -> float:
    """Exact ``KL(pi_model || pi_reference)`` per response position, averaged over positions and prompts."""
    with torch.no_grad():
        logp, logq = torch.log_softmax(model(prompts), -1), torch.log_softmax(reference(prompts), -1)  # (B, T, V)
        return float((logp.exp() * (logp - logq)).sum(-1).mean())


def policy_entropy(model, prompts: torch.Tensor) -> float:
    """Mean entropy (nats) of the policy's distribution at each response position."""
    with torch.no_grad():
        logp = torch.log_softmax(model(prompts), -1)  # (B, T, V)
        return float(-(logp.exp() * logp).sum(-1).mean())


def initial_sorting_policy(config: GRPOTrainerConfig, prompts: torch.Tensor) -> SortingPolicy:
    """The untrained policy ``GRPOTrainer.for_sorting(config)`` starts from, built the same way."""
    V, T = int(prompts.max()) + 1, prompts.shape[-1]
    model = SortingPolicy(
        V,
        config.embedding_dim,
        T,
        T,
        generator=torch.Generator().manual_seed(config.seed),
        embedding_std=config.embedding_std,
    )
    with torch.no_grad():
        model.decode.mul_(config.init_scale)
    return model


def train_expert_iteration(config: GRPOTrainerConfig | None = None, prompts: torch.Tensor | None = None) -> GRPOHistory:
    """Expert iteration on the sorting task, with GRPO's budget: the same samples, steps and optimiser.

    Each round samples ``G`` responses per prompt (as :class:`~course_lib.trainers.GRPOTrainer` does), keeps
    the **best of each group** (every response whose reward equals its group's maximum), and takes
    ``steps_per_round`` Adam steps of supervised fine-tuning on them: the cross-entropy ``-mean log pi`` over
    their tokens. No advantage, no ratio, no clip, no reference. ``clip_eps``, ``kl_*`` and
    ``normalize_std`` of the config are unused.

    Returns:
        A :class:`~course_lib.trainers.grpo_trainer.GRPOHistory` (``loss`` is the SFT loss; ``kl`` and
        ``clip_fraction`` are left empty).
    """
    cfg = GRPOTrainerConfig() if config is None else config
    prompts = sorting_prompts() if prompts is None else prompts
    model = initial_sorting_policy(cfg, prompts)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    generator = torch.Generator().manual_seed(cfg.seed + 1)
    history = GRPOHistory(max_reward=float(sort_inclusion_ordering_reward(prompts[:1], prompts[:1].sort(-1).values)))
    with one_thread():  # a model of a few hundred parameters: one thread is faster
        for _ in range(cfg.rounds):
            responses = sample_responses(model, prompts, cfg.group_size, generator=generator)  # (B, G, T)
            rewards = sort_inclusion_ordering_reward(prompts[:, None, :], responses)  # (B, G)
            keep = (rewards == rewards.max(-1, keepdim=True).values).to(torch.float32)  # (B, G): best of each group
            history.mean_reward.append(float(rewards.mean()))
            history.entropy.append(policy_entropy(model, prompts))
            history.all_equal_fraction.append(float((rewards == rewards[:, :1]).all(-1).double().mean()))
            losses = []
            for _ in range(cfg.steps_per_round):
                logits = repeat(model(prompts), "B T V -> B G T V", G=cfg.group_size)
                logp = gather_log_probs(logits, responses)  # (B, G, T)
                loss = -(logp.mean(-1) * keep).sum() / keep.sum()  # SFT on the kept responses
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            history.loss.append(sum(losses) / len(losses))
            history.greedy_reward.append(
                [float(r) for r in sort_inclusion_ordering_reward(prompts, greedy_responses(model, prompts))]
            )
    history.model = model
    return history


def summarize_run(
    history: GRPOHistory, config: GRPOTrainerConfig, prompts: torch.Tensor, held_out: torch.Tensor
) -> dict[str, float]:
    """The numbers the notebooks quote for one trained policy, rounded for a small JSON."""
    init = initial_sorting_policy(config, prompts)
    train, test = greedy_scores(history.model, prompts), greedy_scores(history.model, held_out)
    return {
        "train_greedy": round(train["greedy_reward"], 4),
        "train_sorted": round(train["sorted_fraction"], 4),
        "held_out_greedy": round(test["greedy_reward"], 4),
        "held_out_sorted": round(test["sorted_fraction"], 4),
        "final_entropy": round(policy_entropy(history.model, prompts), 4),
        "kl_to_initial": round(kl_to_reference(history.model, init, prompts), 4),
        "final_mean_reward": round(sum(history.mean_reward[-10:]) / len(history.mean_reward[-10:]), 4),
    }
