"""Chapter 11, testbed 1: each group advantage estimator against the exact policy gradient.

RLOO, Dr. GRPO and REINFORCE++ each claim to fix GRPO's advantage: RLOO's leave-one-out baseline is unbiased
(Kool et al. 2019; Ahmadian et al. 2024), Dr. GRPO drops the std that weighs prompts by their difficulty (Liu et al.
2025), REINFORCE++ scales by one batch-wide std (Hu 2025). Those are claims about the *estimator*, so they can be
settled exactly, without training: chapter 03's contextual bandit (:mod:`course_lib.lectures.bandits`) is small
enough that its policy gradient is known in closed form.

1. :func:`difficulty_bandit`: ``S`` prompts with one right action each, whose success probabilities ``p_s`` span
   0.02 to 0.98, and a binary reward, as a verifier gives;
2. :func:`group_advantages`: the five estimators, each the course's own function (``grpo``, ``family``);
3. :func:`exact_prompt_weight`: what one group's estimate is worth in expectation. For a binary reward,
   ``E[A_1 grad log pi(a_1)] = w(p, G) * grad p`` exactly (the derivation is in the docstring), so an estimator is
   a *weight per prompt*: 1 for an unbiased one, ``(G - 1) / G`` for the group mean, and a weight that grows
   towards ``p = 0`` and ``p = 1`` when the group's std divides;
4. :func:`sample_estimates` and :func:`measure`: the estimates of many batches (Monte Carlo, a seeded generator),
   their bias (the cosine with the exact gradient, and the magnitude along it), their variance (and a scale-free
   signal-to-noise ratio: GRPO's std rescales the gradient, so raw variances do not compare), each prompt's
   measured weight, and a standard error for every number (a jackknife over blocks of batches).

:func:`optimal_baselines` gives each prompt's variance-minimising baseline (chapter 03's), which a group mean does
not estimate. ``course_lib.lectures.family_results`` formats the testbed's tables.

Shapes: ``S`` prompts (states), ``K`` actions, ``P = S * K`` parameters, ``N`` batches, ``B`` prompts per batch,
``G`` responses per prompt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from einops import rearrange

from course_lib import _validate, family, grpo
from course_lib.lectures.bandits import ContextualBandit, bandit_exact_gradient, sample_groups
from course_lib.lectures.estimators import optimal_baseline

ESTIMATORS = ("REINFORCE", "GRPO", "Dr.GRPO", "RLOO", "REINFORCE++")
"""REINFORCE without a baseline, then the group estimators of the GRPO family."""

PER_GROUP = ("REINFORCE", "GRPO", "Dr.GRPO", "RLOO")
"""The estimators whose advantage depends on the group alone: their prompt weight has an exact value."""

# ---------------------------------------------------------------------------
# 1. A bandit whose prompts span difficulties
# ---------------------------------------------------------------------------


def difficulty_bandit(
    success_probs: torch.Tensor, num_actions: int = 4, seed: int = 0
) -> tuple[ContextualBandit, torch.Tensor]:
    """``S`` prompts, action 0 the right answer of each (reward 1), the others wrong (reward 0).

    The logits put probability ``p_s`` on the right action and share the rest among the wrong ones unevenly
    (a seeded softmax), so the score vectors are not all alike. Prompts are drawn uniformly.

    Args:
        success_probs: ``[S]`` each prompt's chance of a right answer, in (0, 1).
        num_actions: ``K >= 2``.
        seed: seeds the wrong actions' shares.

    Returns:
        ``(bandit, logits [S, K])``, float64.
    """
    _validate.require_tensor("success_probs", success_probs)
    if success_probs.dim() != 1 or not bool(((success_probs > 0) & (success_probs < 1)).all()):
        raise ValueError(f"success_probs: expected a 1-d tensor of probabilities in (0, 1), got {success_probs}")
    K = _validate.require_int("num_actions", num_actions, minimum=2)
    p = success_probs.to(torch.float64)  # (S,)
    S = p.shape[0]
    g = torch.Generator().manual_seed(_validate.require_int("seed", seed))
    wrong_share = torch.softmax(torch.randn(S, K - 1, generator=g, dtype=torch.float64), dim=-1)  # (S, K - 1)
    probs = torch.cat([p[:, None], (1 - p)[:, None] * wrong_share], dim=1)  # (S, K)
    rewards = torch.zeros(S, K, dtype=torch.float64)
    rewards[:, 0] = 1.0
    bandit = ContextualBandit(
        rewards, torch.eye(S, dtype=torch.float64), torch.full((S,), 1.0 / S, dtype=torch.float64)
    )
    return bandit, probs.log()


def default_success_probs(num_prompts: int = 16) -> torch.Tensor:
    """``num_prompts`` success probabilities from 0.02 to 0.98, evenly spaced in log-odds (``[S]``, float64)."""
    _validate.require_int("num_prompts", num_prompts, minimum=2)
    edge = math.log(0.98 / 0.02)
    return torch.sigmoid(torch.linspace(-edge, edge, num_prompts, dtype=torch.float64))


# ---------------------------------------------------------------------------
# 2. The estimators: [B, G] rewards -> [B, G] advantages
# ---------------------------------------------------------------------------


def group_advantages(rewards: torch.Tensor, estimator: str) -> torch.Tensor:
    """The advantage of each response under ``estimator``, each the course's own function.

    Args:
        rewards: ``[B, G]`` one row per prompt (for REINFORCE++ the ``B`` rows are one batch).
        estimator: one of :data:`ESTIMATORS`.
    """
    _validate.require_choice("estimator", estimator, ESTIMATORS)
    if estimator == "REINFORCE":  # no baseline: the reward itself
        return rewards.clone()
    if estimator == "GRPO":  # centred in the group, divided by its std
        return grpo.group_advantages(rewards)
    if estimator == "Dr.GRPO":  # centred in the group, no std
        return grpo.group_advantages(rewards, normalize_std=False)
    if estimator == "RLOO":  # minus the mean of the other G - 1
        return family.rloo_advantages(rewards)
    return family.reinforce_pp_advantages(rewards)  # centred in the group, scaled by the batch's std


# ---------------------------------------------------------------------------
# 3. The exact weight of a prompt
# ---------------------------------------------------------------------------


def exact_prompt_weight(p: float, group_size: int, estimator: str) -> float:
    """``w(p, G)``: one group's expected estimate for a prompt of success probability ``p``, over ``grad p``.

    Let response 1 have reward ``r_1``; the other ``G - 1`` rewards are independent of its action, so
    ``E[A_1 | a_1] = h(R(a_1))`` with ``h(r) = E[A_1 | r_1 = r]``. Then

        E[A_1 grad log pi(a_1)] = h(1) sum_{a right} pi(a) grad log pi(a) + h(0) sum_{a wrong} pi(a) grad log pi(a)
                                = (h(1) - h(0)) grad p,

    because ``sum_a pi(a) grad log pi(a) = grad 1 = 0`` and ``sum_{a right} pi(a) grad log pi(a) = grad p``. So the
    estimator scales this prompt's true gradient by ``w = h(1) - h(0)``, whatever the policy's parametrisation.
    ``h`` is an exact sum over ``k ~ Binomial(G - 1, p)``, the others' right answers, of the course's advantage
    function applied to the group ``[r, 1 x k, 0 x (G - 1 - k)]``.

    REINFORCE and RLOO give 1 (unbiased); Dr. GRPO's group mean ``(G - 1) / G``; GRPO a weight that grows as
    ``p`` nears 0 or 1. REINFORCE++ has none: its scale depends on the rest of the batch.

    Args:
        p: in [0, 1]; group_size: ``G >= 2``; estimator: one of :data:`PER_GROUP`.
    """
    _validate.require_choice("estimator", estimator, PER_GROUP)
    G = _validate.require_int("group_size", group_size, minimum=2)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p: expected a probability in [0, 1], got {p}")
    k = torch.arange(G, dtype=torch.float64)  # (G,): right answers among the other G - 1
    pmf = torch.exp(
        torch.lgamma(torch.tensor(G, dtype=torch.float64))
        - torch.lgamma(k + 1)
        - torch.lgamma(G - k)
        + _xlogy(k, p)
        + _xlogy(G - 1 - k, 1 - p)
    )  # (G,): Binomial(G - 1, p)
    others = (torch.arange(G - 1, dtype=torch.float64)[None, :] < k[:, None]).double()  # (G, G - 1): k ones

    def h(r: float) -> float:  # E[A_1 | r_1 = r]: the course's advantage of response 1, over the others' outcomes
        groups = torch.cat([torch.full((G, 1), r, dtype=torch.float64), others], dim=1)  # (G, G): response 1 first
        return float((pmf * group_advantages(groups, estimator)[:, 0]).sum())

    return h(1.0) - h(0.0)


def _xlogy(x: torch.Tensor, y: float) -> torch.Tensor:
    return torch.xlogy(x, torch.tensor(y, dtype=torch.float64))  # 0 log 0 = 0


def exact_mean_gradient(
    bandit: ContextualBandit, logits: torch.Tensor, group_size: int, estimator: str
) -> torch.Tensor:
    """``E[estimate]``, ``[P]``: each prompt's row of the exact gradient times its :func:`exact_prompt_weight`."""
    exact = rearrange(bandit_exact_gradient(bandit, logits), "(S K) -> S K", S=bandit.num_states)  # (S, K)
    p = torch.softmax(logits.detach(), -1)[:, 0]  # (S,): action 0 is the right one
    weights = torch.tensor([exact_prompt_weight(float(q), group_size, estimator) for q in p], dtype=exact.dtype)
    return (weights[:, None] * exact).flatten()  # (P,)


def optimal_baselines(bandit: ContextualBandit, logits: torch.Tensor) -> torch.Tensor:
    """``[S]`` each prompt's variance-minimising baseline ``b* = E[R |psi|^2] / E[|psi|^2]`` (chapter 03's
    :func:`course_lib.lectures.estimators.optimal_baseline`), exact over the ``K`` actions. A group baseline
    estimates ``E[R] = p`` instead; a constant baseline lowers the variance only between 0 and ``2 b*``."""
    pi = torch.softmax(logits.detach(), -1)  # (S, K)
    K = pi.shape[-1]
    scores = torch.eye(K, dtype=pi.dtype)[None] - pi[:, None, :]  # (S, K, K): row a is grad log pi(a) in its state
    return optimal_baseline(bandit.rewards, scores, probs=pi)  # (S,)


# ---------------------------------------------------------------------------
# 4. Monte Carlo: the estimates of many batches, and what they show
# ---------------------------------------------------------------------------


def sample_estimates(
    bandit: ContextualBandit,
    logits: torch.Tensor,
    estimator: str,
    group_size: int,
    batch_prompts: int,
    num_batches: int,
    generator: torch.Generator,
    chunk: int = 2000,
) -> torch.Tensor:
    """``num_batches`` independent batch estimates ``g = 1/(B G) sum_{b, i} A_{b,i} grad log pi(a_{b,i} | s_b)``.

    Each batch draws ``B`` prompts (uniformly, with replacement) and ``G`` responses to each, as a GRPO batch does.

    Returns:
        ``[N, P]`` float64, one flattened gradient estimate per batch.
    """
    _validate.require_choice("estimator", estimator, ESTIMATORS)
    B, G = batch_prompts, group_size
    S, K = bandit.num_states, bandit.num_actions
    pi = torch.softmax(logits.detach(), -1)  # (S, K)
    out = []
    for start in range(0, num_batches, chunk):
        n = min(chunk, num_batches - start)
        states, actions, rewards = sample_groups(bandit, logits, n * B, G, generator)  # (nB,), (nB, G), (nB, G)
        if estimator == "REINFORCE++":  # the batch's statistics: one call per batch of B groups
            per_batch = rearrange(rewards, "(n B) G -> n B G", B=B)
            adv = torch.cat([group_advantages(table, estimator) for table in per_batch])  # (nB, G)
        else:
            adv = group_advantages(rewards, estimator)  # (nB, G)
        # The score of action a in state s is onehot(a) - pi(. | s), in row s of the logits only.
        score = torch.nn.functional.one_hot(actions, K).double() - pi[states][:, None, :]  # (nB, G, K)
        row = (adv[..., None] * score).sum(1) / (B * G)  # (nB, K): each group's part of its batch's estimate
        cell = rearrange(torch.arange(n), "n -> n 1").expand(n, B).flatten() * S + states  # (nB,): (batch, state)
        est = torch.zeros(n * S, K, dtype=torch.float64).index_add_(0, cell, row)  # (n S, K)
        out.append(rearrange(est, "(n S) K -> n (S K)", n=n))
    return torch.cat(out)  # (N, P)


@dataclass(frozen=True)
class Measurement:
    """What :func:`measure` reads from ``N`` batch estimates; each ``*_se`` is that number's standard error."""

    cosine: float
    """Cosine of the mean estimate with the exact gradient (1: the right direction)."""
    cosine_se: float
    magnitude: float
    """The mean estimate's length along the exact gradient, over the gradient's (1: unbiased along it)."""
    magnitude_se: float
    variance: float
    """Total variance of one batch's estimate (the trace of its covariance), in the estimator's own units."""
    rel_variance: float
    """``tr Cov(g) / |grad J|^2``: the variance in units of the exact gradient's squared length."""
    rel_variance_se: float
    snr: float
    """Signal-to-noise ratio ``|E g|^2 / tr Cov(g)`` of one batch: scale-free, so GRPO's std does not move it."""
    snr_se: float
    tilt: float
    """The difficulty bias: the mean weight of the extreme prompts (p < 0.1 or p > 0.9) over that of the middle
    ones (0.3 <= p <= 0.7); 1 when every prompt is weighed alike. (A ratio of means: noise barely moves it, where
    the largest weight over the smallest would grow with the noise.)"""
    tilt_se: float
    weights: torch.Tensor
    """``[S]`` each prompt's measured weight: its mean row along its exact row, over that row's squared norm."""
    weights_se: torch.Tensor


def difficulty_tilt(weights: torch.Tensor, success_probs: torch.Tensor) -> torch.Tensor:
    """The mean weight of the prompts with ``p < 0.1`` or ``p > 0.9`` over that of those with ``0.3 <= p <= 0.7``.

    Args:
        weights, success_probs: ``[S]``; both groups of prompts must be non-empty.
    """
    extreme = (success_probs < 0.1) | (success_probs > 0.9)  # (S,)
    middle = (success_probs >= 0.3) & (success_probs <= 0.7)  # (S,)
    if not extreme.any() or not middle.any():
        raise ValueError("success_probs: expected prompts with p < 0.1 or p > 0.9 and prompts with 0.3 <= p <= 0.7")
    return weights[extreme].mean() / weights[middle].mean()


def _statistics(mean: torch.Tensor, second: torch.Tensor, exact: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """``[5 + S]``: cosine, magnitude, SNR, tilt, relative variance and the prompt weights, from the mean ``[P]``
    and ``E|g|^2``."""
    S = probs.shape[0]
    variance = second - mean.square().sum()
    cosine = mean @ exact / (mean.norm() * exact.norm())
    magnitude = mean @ exact / exact.square().sum()
    rows, exact_rows = mean.view(S, -1), exact.view(S, -1)  # (S, K)
    weights = (rows * exact_rows).sum(-1) / exact_rows.square().sum(-1)  # (S,)
    tilt = difficulty_tilt(weights, probs)
    snr = mean.square().sum() / variance
    return torch.cat([torch.stack([cosine, magnitude, snr, tilt, variance / exact.square().sum()]), weights])


def measure(estimates: torch.Tensor, exact: torch.Tensor, success_probs: torch.Tensor, blocks: int = 20) -> Measurement:
    """Bias, variance and prompt weights of ``estimates`` ``[N, P]`` against the ``exact`` gradient ``[P]``, for
    prompts of success probabilities ``success_probs`` ``[S]``.

    Standard errors come from a jackknife over ``blocks`` blocks of batches: each statistic is recomputed with one
    block left out, and ``se = sqrt((n - 1) / n * sum (theta_i - mean theta)^2)``, valid for any smooth function of
    the means (Efron and Tibshirani 1993, chapter 11).
    """
    _validate.require_tensor("estimates", estimates)
    N = estimates.shape[0]
    _validate.require_int("blocks", blocks, minimum=2)
    if N < blocks:
        raise ValueError(f"estimates: expected at least blocks={blocks} batches, got {N}")
    parts = torch.tensor_split(estimates, blocks)
    sums = torch.stack([part.sum(0) for part in parts])  # (blocks, P)
    squares = torch.stack([part.square().sum() for part in parts])  # (blocks,)
    counts = torch.tensor([len(part) for part in parts], dtype=torch.float64)  # (blocks,)
    full = _statistics(sums.sum(0) / N, squares.sum() / N, exact, success_probs)
    left_out = torch.stack(
        [
            _statistics(
                (sums.sum(0) - sums[i]) / (N - counts[i]),
                (squares.sum() - squares[i]) / (N - counts[i]),
                exact,
                success_probs,
            )
            for i in range(blocks)
        ]
    )  # (blocks, 5 + S)
    se = ((blocks - 1) / blocks * (left_out - left_out.mean(0)).square().sum(0)).sqrt()
    variance = float(squares.sum() / N - (sums.sum(0) / N).square().sum())
    return Measurement(
        cosine=float(full[0]),
        cosine_se=float(se[0]),
        magnitude=float(full[1]),
        magnitude_se=float(se[1]),
        variance=variance,
        snr=float(full[2]),
        snr_se=float(se[2]),
        tilt=float(full[3]),
        tilt_se=float(se[3]),
        rel_variance=float(full[4]),
        rel_variance_se=float(se[4]),
        weights=full[5:],
        weights_se=se[5:],
    )


# ---------------------------------------------------------------------------
# 5. The testbed: every estimator at every group size
# ---------------------------------------------------------------------------


def exact_row(bandit: ContextualBandit, logits: torch.Tensor, group_size: int, estimator: str) -> dict:
    """A per-group estimator's exact cosine, magnitude, difficulty tilt and prompt weights (no sampling)."""
    exact = bandit_exact_gradient(bandit, logits)  # (P,)
    mean = exact_mean_gradient(bandit, logits, group_size, estimator)  # (P,)
    p = torch.softmax(logits.detach(), -1)[:, 0]  # (S,)
    weights = [exact_prompt_weight(float(q), group_size, estimator) for q in p]
    return {
        "cosine": float(mean @ exact / (mean.norm() * exact.norm())),
        "magnitude": float(mean @ exact / exact.square().sum()),
        "tilt": float(difficulty_tilt(torch.tensor(weights, dtype=torch.float64), p)),
        "weights": weights,
    }


def estimator_testbed(
    group_sizes=(2, 4, 8, 16), num_prompts: int = 16, batch_prompts: int = 16, num_batches: int = 20000, seed: int = 0
) -> dict:
    """Every estimator of :data:`ESTIMATORS` at every group size: measured over ``num_batches`` batches (each
    estimator and size from its own seeded stream) and, for the per-group ones, exactly.

    Returns:
        Plain data: ``success_probs`` ``[S]``, the sizes, and ``rows``, one dict per (estimator, G) with the
        :class:`Measurement`'s numbers (weights as lists) and ``exact`` (:func:`exact_row`, or None).
    """
    bandit, logits = difficulty_bandit(default_success_probs(num_prompts), seed=seed)
    exact = bandit_exact_gradient(bandit, logits)
    probs = torch.softmax(logits, -1)[:, 0]  # (S,)
    rows = []
    for G in group_sizes:
        for i, name in enumerate(ESTIMATORS):
            generator = torch.Generator().manual_seed(seed * 1000 + 10 * G + i)
            estimates = sample_estimates(bandit, logits, name, G, batch_prompts, num_batches, generator)
            m = measure(estimates, exact, probs)
            row = {key: value for key, value in vars(m).items() if key not in ("weights", "weights_se")}
            row.update(estimator=name, G=G, weights=m.weights.tolist(), weights_se=m.weights_se.tolist())
            row["exact"] = exact_row(bandit, logits, G, name) if name in PER_GROUP else None
            rows.append(row)
    return {
        "success_probs": probs.tolist(),
        "group_sizes": list(group_sizes),
        "batch_prompts": batch_prompts,
        "num_batches": num_batches,
        "rows": rows,
    }
