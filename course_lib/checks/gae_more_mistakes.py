"""More of what students write for chapter 04's ``compute_gae`` (from round seven on), which ``checks/gae.py`` names:
each one slip in an otherwise right implementation, built from the reference or from the options of
:mod:`course_lib.checks.gae_mistakes`.
"""

from __future__ import annotations

import torch

from course_lib.checks import Mistake
from course_lib.checks.gae_mistakes import gae_mistake, wrong_deltas
from course_lib.gae import compute_gae, td_residuals


def _next_values(values, last_values):
    return torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)  # (..., T): V(s_{t+1})


def _swapped(rewards, values, dones, last_values, gamma, lam):
    adv, returns = compute_gae(rewards, values, dones, last_values, gamma, lam)
    return returns, adv


def _per_row(eps):
    def wrong(rewards, values, dones, last_values, gamma, lam):
        adv, returns = compute_gae(rewards, values, dones, last_values, gamma, lam)
        if adv.shape[-1] < 2:
            return adv, returns
        return (adv - adv.mean(-1, keepdim=True)) / (adv.std(-1, keepdim=True) + eps), returns

    return wrong


def _returns_next_values(rewards, values, dones, last_values, gamma, lam):
    adv, _ = compute_gae(rewards, values, dones, last_values, gamma, lam)
    return adv, adv + _next_values(values, last_values)


def _terminal_zero(returns_after: bool):
    def wrong(rewards, values, dones, last_values, gamma, lam):
        adv, returns = compute_gae(rewards, values, dones, last_values, gamma, lam)
        adv = adv * (1.0 - dones.to(adv.dtype))
        return adv, (adv + values) if returns_after else returns

    return wrong


def _dones_as_keep(rewards, values, dones, last_values, gamma, lam):
    return compute_gae(rewards, values, 1.0 - dones.to(rewards.dtype), last_values, gamma, lam)


def _discount_in_delta(discount):
    """The right recursion over residuals that discount V(s_{t+1}) by ``discount(gamma, lam)`` in place of gamma."""

    def wrong(rewards, values, dones, last_values, gamma, lam):
        deltas = wrong_deltas(rewards, values, dones, last_values, discount(gamma, lam))
        # GAE of the residuals themselves (values and last_values 0) is the right recursion over the wrong residuals.
        adv, _ = compute_gae(deltas, torch.zeros_like(values), dones, torch.zeros_like(last_values), gamma, lam)
        return adv, adv + values

    return wrong


def _next_delta(rewards, values, dones, last_values, gamma, lam):
    keep = 1.0 - dones.to(rewards.dtype)
    deltas = td_residuals(rewards, values, dones, last_values, gamma)
    following = torch.cat([deltas[..., 1:], torch.zeros_like(deltas[..., :1])], dim=-1)
    adv = deltas + gamma * lam * keep * following
    return adv, adv + values


def _zeroed_after_adding(rewards, values, dones, last_values, gamma, lam):
    """A_t = (delta_t + gamma * lam * A_{t+1}) * (1 - done_t): the cut applied to the whole sum, after it."""
    keep = 1.0 - dones.to(rewards.dtype)
    deltas = td_residuals(rewards, values, dones, last_values, gamma)
    adv = torch.empty_like(deltas)
    running = torch.zeros_like(deltas[..., 0])
    for t in reversed(range(deltas.shape[-1])):
        running = (deltas[..., t] + gamma * lam * running) * keep[..., t]
        adv[..., t] = running
    return adv, adv + values


GAE_MISTAKES_MORE = [
    Mistake(
        "you multiplied the whole sum by (1 - done_t), so a terminal step's advantage is 0 and that 0 flows "
        "back into the steps before it; cut only what comes after: "
        "A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}",
        _zeroed_after_adding,
    ),
    Mistake(
        "you subtracted gamma * lam * A_{t+1}; the recursion adds it: A_t = delta_t + gamma * lam * (1 - done_t) "
        "* A_{t+1}",
        gae_mistake(factor=lambda gamma, lam: -gamma * lam),
    ),
    Mistake(
        "lam is applied twice: the recursion's factor is gamma * lam, not gamma * lam ** 2",
        gae_mistake(factor=lambda gamma, lam: gamma * lam * lam),
    ),
    Mistake(
        "your two outputs are swapped: compute_gae returns (advantages, returns), in that order",
        _swapped,
    ),
    *(
        Mistake(
            "you normalised the advantages within each environment (each row); compute_gae returns them raw "
            "(PPO normalises per minibatch, in the loss)",
            _per_row(eps),
        )
        for eps in (1e-8, 1e-6, 1e-5)
    ),
    Mistake(
        "returns = advantages + V(s_{t+1}); the lambda-return adds the value of the step's own state: "
        "returns = advantages + values",
        _returns_next_values,
    ),
    *(
        Mistake(
            "you set the advantage of a terminal step to 0; the last step of an episode still has its residual, "
            "A_t = delta_t = r_t - V(s_t): only what comes after it is cut",
            _terminal_zero(returns_after),
        )
        for returns_after in (True, False)
    ),
    Mistake(
        "you used dones as the mask of steps that go on (1 = continue, as CleanRL's nextnonterminal); here "
        "dones[..., t] = 1 means the episode ended at t: multiply by (1 - dones[..., t])",
        _dones_as_keep,
    ),
    Mistake(
        "delta_t discounts V(s_{t+1}) by lam; the TD residual's discount is gamma: "
        "delta_t = r_t + gamma * (1 - done_t) * V(s_{t+1}) - V(s_t), and lam enters only the recursion",
        _discount_in_delta(lambda gamma, lam: lam),
    ),
    Mistake(
        "you added gamma * lam * delta_{t+1}, the next residual; the recursion adds the next *advantage*, "
        "A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}, which carries every later residual",
        _next_delta,
    ),
    Mistake(
        "the loop runs over len(rewards), the first axis: for a batch of shape (B, T) that is B steps, not T; "
        "loop over the time axis, for t in reversed(range(rewards.shape[-1]))",
        gae_mistake(first_axis=True),
    ),
    Mistake(
        "delta_t discounts V(s_{t+1}) by gamma * lam; the TD residual's discount is gamma alone: "
        "delta_t = r_t + gamma * (1 - done_t) * V(s_{t+1}) - V(s_t), and lam enters only the recursion",
        _discount_in_delta(lambda gamma, lam: gamma * lam),
    ),
]
