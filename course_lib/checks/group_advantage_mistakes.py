"""Classic wrong group advantages of chapter 06, which ``check_group_advantages`` (in :mod:`course_lib.checks.grpo`)
names.

``group_advantages`` is chapter 03's ``compute_deltas`` in two of its modes, so most of its mistakes are built from
:func:`course_lib.checks.baselines.wrong_deltas`; :func:`advantages_by` builds the others (another baseline, another
spread, another constant for eps, a group of one left as it is), each zeroing a group of equal rewards as the
reference does. ``GROUP_ADVANTAGE_MISTAKES`` pairs each with the message that names it and its fix.
"""

from __future__ import annotations

import torch

from course_lib.checks import Mistake
from course_lib.checks.baselines import _std, batch_std, group_std, population_std, wrong_deltas, zeroed_below_eps
from course_lib.grpo import group_advantages


def advantages_by(baseline=None, spread=None, single="zeros", eps_used=None):
    """A wrong group_advantages: ``baseline(rewards)`` in place of the group mean, ``spread(rewards, centred)`` in
    place of the group std, ``eps_used`` in place of the ``eps`` passed, and a group of one returned as its raw
    rewards (``single="raw"``); a group of equal rewards gives zeros, as in the reference."""

    def advantages(rewards, normalize_std=True, eps=1e-6):
        eps = eps if eps_used is None else eps_used
        if rewards.shape[-1] == 1:
            return torch.zeros_like(rewards) if single == "zeros" else rewards.clone()
        equal = (rewards == rewards[..., :1]).all(-1, keepdim=True)  # (B, 1)
        base = rewards.mean(-1, keepdim=True) if baseline is None else baseline(rewards)
        centred = torch.where(equal, torch.zeros_like(rewards), rewards - base)
        if not normalize_std:
            return centred
        scale = group_std(rewards) if spread is None else spread(rewards, centred)
        return centred / (scale + eps)

    return advantages


def _leave_one_out(rewards):
    """RLOO's baseline: the mean of the group's other rewards."""
    return (rewards.sum(-1, keepdim=True) - rewards) / (rewards.shape[-1] - 1)


def advantages_with(**mistake):
    # group_advantages is compute_deltas in two of its modes, so its mistakes are chapter 03's.
    wrong = wrong_deltas(**mistake)

    def advantages(rewards, normalize_std=True, eps=1e-6):
        return wrong(rewards, "normalized_rewards" if normalize_std else "centered_rewards", eps)

    return advantages


def zeroed_when_close(rewards, normalize_std=True, eps=1e-6):
    """group_advantages with "all equal" read as torch.isclose to the group mean (its default tolerances)."""
    mean = rewards.mean(-1, keepdim=True)  # (B, 1)
    close = torch.isclose(rewards, mean.expand_as(rewards)).all(-1, keepdim=True)  # (B, 1)
    right = group_advantages(rewards, normalize_std, eps)
    return torch.where(close, torch.zeros_like(right), right)


def flag_inverted(rewards, normalize_std=True, eps=1e-6):
    """normalize_std read backwards: the std divides when it is False, not when it is True."""
    return advantages_by()(rewards, not normalize_std, eps)


def tiled_statistics(rewards, normalize_std=True, eps=1e-6):
    """TRL's flat layout (B * G rewards in a row) with each group's statistics spread back by ``.repeat(G)``,
    which tiles ``[m_0, m_1, m_0, m_1, ...]``, where ``.repeat_interleave(G)`` gives ``[m_0, m_0, ..., m_1, ...]``."""
    B, G = rewards.shape
    flat = rewards.reshape(-1)  # (B * G,)
    equal = (rewards == rewards[:, :1]).all(-1).repeat(G)  # (B * G,), tiled
    advantages = torch.where(equal, torch.zeros_like(flat), flat - rewards.mean(-1).repeat(G))
    if normalize_std and G > 1:
        advantages = advantages / (rewards.std(-1).repeat(G) + eps)
    return advantages.view(B, G)


def eps_after_division(rewards, normalize_std=True, eps=1e-6):
    """adv / std + eps: eps added to the quotient, not to the std; a group of equal rewards still gives zeros."""
    centred = advantages_by()(rewards, False, eps)
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    equal = (rewards == rewards[..., :1]).all(-1, keepdim=True)  # (B, 1)
    return torch.where(equal, torch.zeros_like(centred), centred / group_std(rewards) + eps)


def batch_baseline(rewards, normalize_std=True, eps=1e-6):
    # The whole batch's mean as every group's baseline; each group's own std, and zeros where a group is equal.
    equal = (rewards == rewards[..., :1]).all(-1, keepdim=True)
    centred = torch.where(equal, torch.zeros_like(rewards), rewards - rewards.mean())
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    return centred / (group_std(rewards) + eps)


WHOLE_BATCH = (
    "you used the statistics of the whole batch; GRPO's baseline and std are each prompt's group's: "
    "rewards.mean(dim=-1, keepdim=True) and rewards.std(dim=-1, keepdim=True)"
)

GROUP_ADVANTAGE_MISTAKES = [
    Mistake(
        "a group of equal rewards is not set to zero exactly: in float32 the mean of seven 0.7s rounds, and "
        "(r - mean) / (std + eps) turns that rounding into 0.06; where (rewards == rewards[..., :1]).all(-1), "
        "the group's advantages are 0",
        advantages_with(),
    ),
    Mistake(WHOLE_BATCH, advantages_with(mean_dim=None, std_fn=batch_std, g1_zero=False)),
    Mistake(WHOLE_BATCH, advantages_with(mean_dim=None, std_fn=batch_std)),
    # The same statistics, with the groups of equal rewards still found along each row and zeroed.
    Mistake(WHOLE_BATCH, advantages_by(baseline=lambda r: r.mean(), spread=lambda r, c: batch_std(r))),
    Mistake(
        "the mean and the std are over the batch (dim=0); take both within each group (dim=-1)",
        advantages_with(mean_dim=0, std_fn=lambda r: _std(r, dim=0).expand_as(r), g1_zero=False),
    ),
    Mistake(
        # The same axis slip, with the equal groups still found along each row and zeroed.
        "the mean and the std are over the batch (dim=0); take both within each group (dim=-1)",
        advantages_by(baseline=lambda r: r.mean(0, keepdim=True), spread=lambda r, c: _std(r, dim=0).expand_as(r)),
    ),
    Mistake(
        "normalize_std is ignored: normalize_std=True (GRPO) divides the centred rewards by std + eps",
        advantages_with(modes={"normalized_rewards": "centered_rewards"}),
    ),
    Mistake(
        "the eps argument is ignored (1e-6 is used whatever is passed): divide by std + eps",
        advantages_with(eps_used=1e-6),
    ),
    Mistake(
        "Bessel's correction is applied twice: rewards.std(dim=-1) already divides by G - 1; multiplying by "
        "sqrt(G / (G - 1)) again inflates the std",
        advantages_with(std_fn=lambda r: group_std(r) * (r.shape[-1] / max(r.shape[-1] - 1, 1)) ** 0.5),
    ),
    Mistake(
        "the std is floored at eps (std.clamp(min=eps)); GRPO adds eps to it: (r - mean) / (std + eps)",
        advantages_with(eps_where="floor"),
    ),
    Mistake(
        "eps is inside the square root (sqrt(var + eps)); add it to the std: (r - mean) / (std + eps)",
        advantages_with(std_fn=lambda r: _std(r, dim=-1) ** 2, eps_where="inside"),
    ),
    Mistake(
        "a group whose std is below eps is set to zero, but only a group whose rewards are all equal has "
        "nothing to learn: rewards that differ by less than eps still give (r - mean) / (std + eps), small and "
        "not 0; test (rewards == rewards[..., :1]).all(-1) for the equal groups",
        zeroed_below_eps,
    ),
    Mistake(
        "a group whose rewards are merely close (torch.isclose or allclose, rtol=1e-5) is set to zero; only a "
        "group whose rewards are exactly equal has nothing to learn: test (rewards == rewards[..., :1]).all(-1)",
        zeroed_when_close,
    ),
    Mistake(
        "the std divides by G, not G - 1: GRPO (like TRL and verl) uses Bessel's correction, rewards.std(dim=-1)",
        advantages_with(std_fn=population_std),
    ),
    Mistake(
        "equal rewards give 0 / 0 = NaN: add eps to the std, (r - mean) / (std + eps)",
        advantages_with(eps_where="none"),
    ),
    Mistake(
        "a group of one (G=1) gives NaN: torch.std divides by G - 1 = 0; return zeros there",
        advantages_with(g1_zero=False),
    ),
    Mistake(
        "the mean is over the batch (dim=0); the baseline is each prompt's own group mean, "
        "rewards.mean(dim=-1, keepdim=True)",
        advantages_with(mean_dim=0),
    ),
    Mistake(
        "the std is over the batch (dim=0); take it within each group, rewards.std(dim=-1)",
        advantages_with(std_fn=lambda r: _std(r, dim=0).expand_as(r)),
    ),
    Mistake("you divided the raw rewards by the std: subtract the group mean first", advantages_with(centre=False)),
    Mistake(
        "the rewards are never centred: subtract the group mean first, with normalize_std or without",
        advantages_with(centre="never"),
    ),
    Mistake(
        "you divided by the variance; divide by the standard deviation",
        advantages_with(std_fn=lambda r: group_std(r) ** 2),
    ),
    Mistake(
        "normalize_std=False (Dr. GRPO) must only centre the rewards, not divide by the std",
        advantages_with(modes={"centered_rewards": "normalized_rewards"}),
    ),
    Mistake(
        "the baseline is the mean of the whole batch, rewards.mean(); GRPO's baseline is each prompt's own "
        "group mean, rewards.mean(dim=-1, keepdim=True)",
        batch_baseline,
    ),
]

GROUP_ADVANTAGE_MISTAKES += [
    Mistake(
        "the std is the whole batch's (rewards.std(), every reward of every group); each group is divided by its "
        "own std, rewards.std(dim=-1, keepdim=True) + eps",
        advantages_by(spread=lambda r, c: r.std()),
    ),
    Mistake(
        "eps is added after the division (adv / std + eps); it belongs to the std: (r - mean) / (std + eps)",
        eps_after_division,
    ),
    Mistake(
        "you divided by the group's range (max - min); GRPO divides by the group's standard deviation, "
        "rewards.std(dim=-1, keepdim=True) + eps",
        advantages_by(spread=lambda r, c: r.amax(-1, keepdim=True) - r.amin(-1, keepdim=True)),
    ),
    Mistake(
        "you divided by the mean absolute deviation, mean(|r - mean|); GRPO divides by the group's standard "
        "deviation, rewards.std(dim=-1, keepdim=True) + eps",
        advantages_by(spread=lambda r, c: c.abs().mean(-1, keepdim=True)),
    ),
    Mistake(
        "one std for the whole batch (the mean of the groups' stds); each group is divided by its own std, "
        "rewards.std(dim=-1, keepdim=True)",
        advantages_by(spread=lambda r, c: group_std(r).mean()),
    ),
    Mistake(
        "the baseline is the group's median; GRPO's baseline is the group's mean, rewards.mean(dim=-1, keepdim=True)",
        advantages_by(baseline=lambda r: r.median(-1, keepdim=True).values),
    ),
    Mistake(
        "the baseline is the mean of the *other* responses (RLOO's leave-one-out); GRPO subtracts the mean of the "
        "whole group, the response's own reward included: rewards.mean(dim=-1, keepdim=True)",
        advantages_by(baseline=_leave_one_out),
    ),
    Mistake(
        "a group of one (G=1) returns its raw reward; with nothing to compare it with, its advantage is 0",
        advantages_by(single="raw"),
    ),
    *(
        Mistake(
            f"the eps argument is ignored ({constant:g} is used whatever is passed): divide by std + eps with the "
            "eps given",
            advantages_by(eps_used=constant),
        )
        for constant in (1e-8, 1e-5, 1e-4)
    ),
    Mistake(
        "normalize_std is read backwards: True (GRPO) divides the centred rewards by std + eps, False (Dr. GRPO) "
        "only centres them",
        flag_inverted,
    ),
    Mistake(
        "the group statistics are spread back over the flat batch with .repeat(G), which tiles them (m_0, m_1, "
        "m_0, m_1, ...) and gives each response another prompt's mean and std; .repeat_interleave(G) keeps each "
        "group's together (m_0, m_0, ..., m_1, ...), or stay in the (B, G) shape with keepdim=True",
        tiled_statistics,
    ),
]
