"""Classic wrong implementations of chapter 04's ``td_residuals``, which ``checks/gae.py`` names.

:func:`td_mistake` builds one from the options of :func:`course_lib.checks.gae_mistakes.wrong_deltas` (which dones,
which next values, which factors); the round-seven list at the end holds more of what students wrote, each one
slip in an otherwise right residual.
"""

from __future__ import annotations

import torch

from course_lib.checks import Mistake
from course_lib.checks.gae_mistakes import wrong_deltas, wrong_dones
from course_lib.gae import td_residuals


def td_mistake(*, ignore_dones=False, shift=0, **delta):
    def wrong(rewards, values, dones, last_values, gamma):
        used = wrong_dones(dones, ignore_dones=ignore_dones, shift=shift)
        return wrong_deltas(rewards, values, used, last_values, gamma, **delta)

    return wrong


TD_MISTAKES = [
    Mistake(
        "the terminal step is not cut: you bootstrap through terminal steps; multiply V(s_{t+1}) "
        "by (1 - dones[..., t])",
        td_mistake(ignore_dones=True),
    ),
    Mistake("your done mask is off by one: use dones[..., t], not dones[..., t+1]", td_mistake(shift=1)),
    Mistake("your done mask is off by one: use dones[..., t], not dones[..., t-1]", td_mistake(shift=-1)),
    Mistake(
        "your done mask is off by one: use dones[..., t], not dones[..., t+1] (CleanRL's dones mark the first "
        "step of the next episode; the course's mark the last step of one)",
        td_mistake(shift=2),
    ),
    Mistake(
        "last_values is ignored: the last step bootstraps from last_values (V of the state after it), not from "
        "values[..., -1] again",
        td_mistake(next_values="repeat_last"),
    ),
    Mistake(
        "last_values is ignored: the last step must bootstrap from gamma * last_values "
        "(V of the state after it), not 0",
        td_mistake(bootstrap=False),
    ),
    Mistake(
        "the last step bootstraps from last_values even where it terminated: cut it with "
        "(1 - dones[..., -1]) like every other step",
        td_mistake(cut_last=False),
    ),
    Mistake(
        "values.roll(-1) wraps V(s_0) into the last step's next value: the last step bootstraps from "
        "last_values; build the next values with torch.cat([values[..., 1:], last_values[..., None]], -1)",
        td_mistake(next_values="roll"),
    ),
    Mistake(
        "values.roll(-1) wraps V(s_0) into the last step, and the terminal steps are not cut: the last step "
        "bootstraps from last_values, and (1 - dones[..., t]) multiplies V(s_{t+1})",
        td_mistake(next_values="roll", ignore_dones=True),
    ),
    Mistake(
        "V(s_{t+1}) is values[..., t+1] (and last_values at the end), not values[..., t-1] (roll(1) shifts "
        "the wrong way)",
        td_mistake(next_values="previous"),
    ),
    Mistake("you forgot to subtract V(s_t): delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)", td_mistake(subtract=False)),
    Mistake(
        "V(s_{t+1}) is values[..., t+1] (and last_values at the end), not values[..., t]",
        td_mistake(next_values="current"),
    ),
    Mistake("gamma is missing: delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)", td_mistake(use_gamma=False)),
    Mistake(
        "the sign is flipped: delta_t = r_t + gamma * V(s_{t+1}) - V(s_t), not V(s_t) - r_t - ...",
        td_mistake(sign=-1.0),
    ),
    Mistake(
        "the done mask removes the reward too: a terminal step still earns r_t; only gamma * V(s_{t+1}) is cut",
        td_mistake(cut_reward=True),
    ),
]


def _next_values(values, last_values):
    return torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)  # (..., T): V(s_{t+1})


def _keep(rewards, dones):
    return 1.0 - dones.to(rewards.dtype)  # (..., T): 1 where the episode goes on after step t


def _last_values_everywhere(rewards, values, dones, last_values, gamma):
    return rewards + gamma * _keep(rewards, dones) * last_values.unsqueeze(-1) - values


def _gamma_on_reward(rewards, values, dones, last_values, gamma):
    return gamma * (rewards + _keep(rewards, dones) * _next_values(values, last_values)) - values


def _values_swapped(rewards, values, dones, last_values, gamma):
    return rewards + gamma * _keep(rewards, dones) * values - _next_values(values, last_values)


def _terminal_reward_only(rewards, values, dones, last_values, gamma):
    right = td_residuals(rewards, values, dones, last_values, gamma)
    return torch.where(dones.to(torch.bool), rewards, right)


def _last_done_only(rewards, values, dones, last_values, gamma):
    keep = torch.ones_like(rewards)
    keep[..., -1] = 1.0 - dones[..., -1].to(rewards.dtype)
    return rewards + gamma * keep * _next_values(values, last_values) - values


def _last_without_gamma(rewards, values, dones, last_values, gamma):
    deltas = td_residuals(rewards, values, dones, last_values, gamma)
    keep = _keep(rewards, dones)
    deltas[..., -1] = rewards[..., -1] + keep[..., -1] * last_values - values[..., -1]
    return deltas


def _gamma_on_both_values(rewards, values, dones, last_values, gamma):
    """r_t + gamma * ((1 - done_t) * V(s_{t+1}) - V(s_t)): the discount read as applying to the difference."""
    return rewards + gamma * (_keep(rewards, dones) * _next_values(values, last_values) - values)


def _previous_values_after_last(rewards, values, dones, last_values, gamma):
    """V(s_{t-1}) for V(s_{t+1}), with last_values put in front: the shift of the values made the wrong way."""
    previous = torch.cat([last_values.unsqueeze(-1).to(values.dtype), values[..., :-1]], dim=-1)  # (..., T)
    return rewards + gamma * _keep(rewards, dones) * previous - values


TD_MISTAKES_MORE = [
    Mistake(
        "the last step bootstraps from last_values without gamma; it is discounted like every other step: "
        "delta_{T-1} = r_{T-1} + gamma * (1 - done_{T-1}) * last_values - V(s_{T-1})",
        _last_without_gamma,
    ),
    Mistake(
        "at a terminal step your residual is r_t alone (V(s_t) is cut with the bootstrap, say by a (1 - dones) "
        "that multiplies it too); only gamma * V(s_{t+1}) is cut there: delta_t = r_t - V(s_t)",
        _terminal_reward_only,
    ),
    Mistake(
        "every step bootstraps from last_values; last_values is V(s_T), the state after the last step only: "
        "V(s_{t+1}) is values[..., t+1] for t < T - 1",
        _last_values_everywhere,
    ),
    Mistake(
        "gamma multiplies r_t too; the reward of step t is not discounted in its own residual: "
        "delta_t = r_t + gamma * (1 - done_t) * V(s_{t+1}) - V(s_t)",
        _gamma_on_reward,
    ),
    Mistake(
        "you used dones as the mask of steps that go on (1 = continue, as CleanRL's nextnonterminal); here "
        "dones[..., t] = 1 means the episode ended at t: multiply by (1 - dones[..., t])",
        lambda rewards, values, dones, last_values, gamma: td_residuals(
            rewards, values, 1.0 - dones.to(rewards.dtype), last_values, gamma
        ),
    ),
    Mistake(
        "V(s_t) and V(s_{t+1}) are swapped: the residual adds the discounted next value and subtracts the "
        "current one, r_t + gamma * V(s_{t+1}) - V(s_t)",
        _values_swapped,
    ),
    Mistake(
        "only the last step's done is used; a terminal step anywhere in the rollout cuts its own bootstrap: "
        "multiply V(s_{t+1}) by (1 - dones[..., t]) at every t",
        _last_done_only,
    ),
    Mistake(
        "V(s_{t+1}) is discounted by gamma ** 2; one step ahead costs one factor gamma",
        lambda rewards, values, dones, last_values, gamma: td_residuals(rewards, values, dones, last_values, gamma**2),
    ),
    Mistake(
        "gamma multiplies V(s_t) too; only the next state's value is discounted: "
        "delta_t = r_t + gamma * (1 - done_t) * V(s_{t+1}) - V(s_t), not r_t + gamma * (V(s_{t+1}) - V(s_t))",
        _gamma_on_both_values,
    ),
    Mistake(
        "your next values are shifted the wrong way: step t bootstraps from V(s_{t-1}) (and step 0 from "
        "last_values); V(s_{t+1}) is values[..., t+1], and last_values at the end: "
        "torch.cat([values[..., 1:], last_values[..., None]], -1)",
        _previous_values_after_last,
    ),
]
