"""Classic wrong implementations of chapter 04's functions, which the checks of ``checks/gae.py`` recognise.

Each says which dones, which next values and which factors it (wrongly) uses: :func:`wrong_deltas` builds the TD
residuals and :func:`gae_mistake` the GAE recursion from those options, and ``GAE_MISTAKES`` and ``TD_MISTAKES``
pair each with a message that names the mistake and the fix in one short paragraph.
"""

from __future__ import annotations

import torch

from course_lib.checks import Mistake
from course_lib.gae import discounted_returns


def wrong_dones(dones, *, ignore_dones=False, shift=0):
    """The done flags a mistake uses: none at all, done_{t+1} (shift=1) or done_{t-1} (shift=-1) for done_t."""
    d = dones.to(torch.float64)
    if ignore_dones:
        return torch.zeros_like(d)
    if shift == 1:
        return torch.cat([d[..., 1:], torch.zeros_like(d[..., :1])], dim=-1)
    if shift == -1:
        return torch.cat([torch.zeros_like(d[..., :1]), d[..., :-1]], dim=-1)
    if shift == 2:  # CleanRL's indexing copied: dones[t + 1] inside the rollout, the last flag again at its end
        return torch.cat([d[..., 1:], d[..., -1:]], dim=-1)
    return d


def wrong_deltas(
    rewards,
    values,
    used_dones,
    last_values,
    gamma,
    *,
    bootstrap=True,
    subtract=True,
    next_values="next",
    cut=True,
    cut_last=True,
    use_gamma=True,
    sign=1.0,
    cut_reward=False,
):
    last = last_values if bootstrap else 0 * last_values
    if next_values == "roll":  # values.roll(-1): V(s_0) wraps into the last step
        following = values.roll(-1, dims=-1)
    elif next_values == "previous":  # values.roll(1): V(s_{t-1}) for V(s_{t+1})
        following = values.roll(1, dims=-1)
    elif next_values == "repeat_last":  # values[..., -1] again in place of last_values
        following = torch.cat([values[..., 1:], values[..., -1:]], -1)
    elif next_values == "current":  # V(s_t) for V(s_{t+1})
        following = values
    else:
        following = torch.cat([values[..., 1:], last.unsqueeze(-1)], -1)
    keep = 1.0 - used_dones.to(rewards.dtype) if cut else torch.ones_like(rewards)
    if not cut_last:  # the last step bootstraps from last_values even when it terminated
        keep = torch.cat([keep[..., :-1], torch.ones_like(keep[..., -1:])], -1)
    g = gamma if use_gamma else 1.0
    r = rewards * (1.0 - used_dones.to(rewards.dtype)) if cut_reward else rewards
    return sign * (r + g * keep * following - (values if subtract else 0.0))


def gae_mistake(
    *,
    factor=None,
    ignore_dones=False,
    shift=0,
    forward=False,
    forward_cut="previous",
    returns="sum",
    normalize=False,
    cut_recursion=True,
    init_last=False,
    flip=False,
    shift_delta=None,
    lam_used=None,
    first_axis=False,
    **delta,
):
    def wrong(rewards, values, dones, last_values, gamma, lam):
        lam = lam if lam_used is None else lam_used
        used = wrong_dones(dones, ignore_dones=ignore_dones, shift=shift).to(rewards.dtype)
        in_delta = used if shift_delta is None else wrong_dones(dones, shift=shift_delta).to(rewards.dtype)
        deltas = wrong_deltas(rewards, values, in_delta, last_values, gamma, **delta)
        k = gamma * lam if factor is None else factor(gamma, lam)
        # ``first_axis``: the loop counts len(rewards), the batch axis of a (B, T) input, and leaves the rest 0.
        adv, T = torch.zeros_like(deltas), deltas.shape[0 if first_axis else -1]
        running = last_values.clone() if init_last else torch.zeros_like(deltas[..., 0])
        for t in range(T) if forward else reversed(range(T)):
            # Forwards, the mistake reads A_{t-1} and cuts at done_{t-1} (or done_t); backwards, A_{t+1} and done_t.
            if forward:
                cut = (used[..., t - 1] if t > 0 else 0.0) if forward_cut == "previous" else used[..., t]
            else:
                cut = used[..., t]
            running = deltas[..., t] + k * ((1.0 - cut) if cut_recursion else 1.0) * running
            adv[..., t] = running
        if flip:
            adv = adv.flip(-1)
        if normalize:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        if returns == "mc":
            return adv, discounted_returns(rewards, dones, last_values, gamma)
        if returns == "adv":
            return adv, adv.clone()
        if returns == "minus":
            return adv, adv - values
        if returns == "early":  # adv + values taken while adv was still zeros
            return adv, values.clone()
        if returns == "delta":
            return adv, deltas + values
        return adv, adv + values

    return wrong


_TERMINAL = "so nothing after a terminal step flows back into it"
# The classic GAE mistake, in what the student did and how to fix it (issue 43).
FORWARD = (
    "you built A_t from A_{t-1}: the recursion runs forwards, from t = 0, so each advantage sums past "
    "residuals. GAE sums future ones, A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}: loop backwards, "
    "for t in reversed(range(T)), starting from A_T = 0"
)

GAE_MISTAKES = [
    Mistake(
        "you bootstrap through terminal steps (the dones are not used): multiply V(s_{t+1}) in delta_t "
        f"and A_{{t+1}} in the recursion by (1 - dones[..., t]), {_TERMINAL}",
        gae_mistake(ignore_dones=True),
    ),
    Mistake(
        "the done mask is applied in delta_t only: the recursion A_t = delta_t + gamma * lam * A_{t+1} must "
        f"be cut too, A_t = delta_t + gamma * lam * (1 - dones[..., t]) * A_{{t+1}}, {_TERMINAL}",
        gae_mistake(cut_recursion=False),
    ),
    Mistake(
        "the done mask is applied in the recursion only: delta_t must be cut too, "
        "delta_t = r_t + gamma * (1 - dones[..., t]) * V(s_{t+1}) - V(s_t); a terminal step has no next state "
        "to bootstrap from",
        gae_mistake(cut=False),
    ),
    Mistake(
        "your done mask is off by one: step t is cut by dones[..., t] (it terminated at t), not by dones[..., t+1]",
        gae_mistake(shift=1),
    ),
    Mistake(
        "your done mask is off by one: step t is cut by dones[..., t] (it terminated at t), not by dones[..., t-1]",
        gae_mistake(shift=-1),
    ),
    Mistake(
        "your done mask is off by one: step t is cut by dones[..., t] (it terminated at t), not by "
        "dones[..., t+1] (CleanRL's dones mark the first step of the next episode; the course's mark the last "
        "step of one)",
        gae_mistake(shift=2),
    ),
    Mistake(
        "last_values is ignored: the last step bootstraps from last_values (V of the state after it), not from "
        "values[..., -1] again",
        gae_mistake(next_values="repeat_last"),
    ),
    Mistake(
        "your done mask is off by one in delta_t: delta_t is cut by dones[..., t] (step t terminated), not by "
        "dones[..., t+1]",
        gae_mistake(shift_delta=1),
    ),
    Mistake(
        "your done mask is off by one in the recursion: A_{t+1} is cut by dones[..., t] (step t terminated), "
        "not by dones[..., t+1]",
        gae_mistake(shift=1, shift_delta=0),
    ),
    Mistake(
        "that is lam = 0 whatever lam is: A_t = delta_t alone; add gamma * lam * (1 - dones[..., t]) * A_{t+1}",
        gae_mistake(lam_used=0.0),
    ),
    Mistake(
        "lam is ignored: that is lam = 1 whatever lam is (the recursion multiplies A_{t+1} by gamma alone: "
        "Monte-Carlo advantages, the discounted return minus V); the recursion's factor is gamma * lam",
        gae_mistake(lam_used=1.0),
    ),
    Mistake(
        "V(s_{t+1}) is values[..., t+1] (and last_values at the end), not values[..., t-1] (roll(1) shifts "
        "the wrong way)",
        gae_mistake(next_values="previous"),
    ),
    Mistake(
        "last_values is ignored, so the bootstrap at the end is missing: the last step's delta uses "
        "gamma * last_values (V of the state after the last step), not 0, unless that step terminated",
        gae_mistake(bootstrap=False),
    ),
    Mistake(
        "the last step bootstraps from last_values even where it terminated: cut it with "
        "(1 - dones[..., -1]) like every other step",
        gae_mistake(cut_last=False),
    ),
    Mistake(
        "values.roll(-1) wraps V(s_0) into the last step's next value: the last step bootstraps from "
        "last_values; build the next values with torch.cat([values[..., 1:], last_values[..., None]], -1)",
        gae_mistake(next_values="roll"),
    ),
    Mistake(
        "V(s_{t+1}) is values[..., t+1] (and last_values at the end), not values[..., t]",
        gae_mistake(next_values="current"),
    ),
    Mistake("you forgot to subtract V(s_t): delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)", gae_mistake(subtract=False)),
    Mistake(
        "the sign of delta is flipped: delta_t = r_t + gamma * V(s_{t+1}) - V(s_t), not V(s_t) - r_t - ...",
        gae_mistake(sign=-1.0),
    ),
    Mistake(
        "the recursion multiplies A_{t+1} by lam alone (lambda in place of gamma * lambda); it must be gamma * lam",
        gae_mistake(factor=lambda gamma, lam: lam),
    ),
    Mistake(
        "the recursion adds A_{t+1} without its factor: A_t = delta_t + gamma * lam * A_{t+1}",
        gae_mistake(factor=lambda gamma, lam: 1.0),
    ),
    Mistake(
        "gamma is ignored: it discounts V(s_{t+1}) in delta_t and, with lam, A_{t+1} in the recursion",
        gae_mistake(factor=lambda gamma, lam: lam, use_gamma=False),
    ),
    Mistake("gamma is missing from delta_t: delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)", gae_mistake(use_gamma=False)),
    Mistake(
        "gamma is applied twice: the recursion factor is gamma * lam, not gamma**2 * lam",
        gae_mistake(factor=lambda gamma, lam: gamma * gamma * lam),
    ),
    Mistake(FORWARD, gae_mistake(forward=True)),
    Mistake(FORWARD, gae_mistake(forward=True, forward_cut="same")),
    Mistake(
        FORWARD + " (and an episode's end cuts the recursion: multiply by 1 - done_t)",
        gae_mistake(forward=True, cut_recursion=False),
    ),
    Mistake(
        "the advantages come out in reverse time order: a backward loop fills index t with A_t "
        "(adv[..., t] = ...), it does not append and forget to reverse",
        gae_mistake(flip=True),
    ),
    Mistake(
        "the recursion starts from A_T = last_values; it starts from 0 (last_values already enters "
        "through the last step's delta)",
        gae_mistake(init_last=True),
    ),
    Mistake(
        "returns = advantages: the returns the critic regresses on are advantages + values (the lambda-return)",
        gae_mistake(returns="adv"),
    ),
    Mistake(
        "your returns equal values: they were taken (adv + values) before the loop filled the advantages; "
        "compute returns = advantages + values after the loop",
        gae_mistake(returns="early"),
    ),
    Mistake(
        "returns = advantages - values: the returns are advantages + values (the lambda-return)",
        gae_mistake(returns="minus"),
    ),
    Mistake(
        "returns should be advantages + values (the lambda-return), not the discounted reward-to-go",
        gae_mistake(returns="mc"),
    ),
    Mistake(
        "returns should be advantages + values (the lambda-return), not the one-step target delta + values",
        gae_mistake(returns="delta"),
    ),
    Mistake(
        "you normalised the advantages; compute_gae returns them raw (PPO normalises per minibatch, in the loss)",
        gae_mistake(normalize=True),
    ),
]
