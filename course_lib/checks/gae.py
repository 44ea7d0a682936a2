"""Exercise checks of chapter 04 (GAE): TD residuals, compute_gae, and the table by hand.

The checks import the reference implementations of ``course_lib.gae``; the maths module never
imports its checks, so the file a student opens is the maths alone.
"""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference, forget_pass, record_pass, recording
from course_lib.gae import compute_gae, discounted_returns, gae_table_episode, td_residuals


def _trajectory(seed: int, shape: tuple[int, ...], done_at=(), dones_dtype=torch.bool) -> dict:
    """Seeded random rewards, values and last values; dones set at ``(index..., t)`` positions."""
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(shape, generator=g, dtype=torch.float64)
    values = torch.randn(shape, generator=g, dtype=torch.float64)
    last_values = torch.randn(shape[:-1], generator=g, dtype=torch.float64) + 1.0
    dones = torch.zeros(shape, dtype=torch.bool)
    for index in done_at:
        dones[index] = True
    return dict(rewards=rewards, values=values, dones=dones.to(dones_dtype), last_values=last_values)


def _gae_cases(with_lam: bool) -> list[Case]:
    def case(description, seed, shape, done_at=(), gamma=0.9, lam=0.8, dones_dtype=torch.bool):
        kwargs = _trajectory(seed, shape, done_at, dones_dtype)
        kwargs["gamma"] = gamma
        if with_lam:
            kwargs["lam"] = lam
        return Case(description, kwargs)

    every = tuple((i, t) for i in range(2) for t in range(3))
    return [
        case("one environment, 6 steps, no terminal step, bootstrap from last_values", 0, (6,)),
        case("one environment, 6 steps, terminates at t=2 (the next episode starts at t=3)", 1, (6,), [(2,)]),
        case("one environment, terminates at the last step (last_values must be ignored)", 2, (5,), [(4,)]),
        case("one environment, terminates at the first step t=0", 3, (5,), [(0,)]),
        case("4 environments, 7 steps, terminals at different steps", 4, (4, 7), [(0, 2), (1, 6), (2, 0), (2, 4)]),
        case("3 environments, dones given as 0./1. floats", 5, (3, 5), [(0, 1), (2, 3)], dones_dtype=torch.float64),
        case("3 environments, dones given as 0/1 integers", 6, (3, 5), [(1, 2)], dones_dtype=torch.int64),
        case("gamma = 1 and lam = 1 (undiscounted Monte-Carlo)", 7, (2, 6), [(0, 3)], gamma=1.0, lam=1.0),
        case("lam = 0 (one-step TD residuals)", 8, (2, 6), [(1, 1)], gamma=0.95, lam=0.0),
        case("lam = 1, gamma = 0.99", 9, (2, 6), [(0, 4)], gamma=0.99, lam=1.0),
        case("every step is terminal", 10, (2, 3), every),
        case("a single step (T = 1)", 11, (3, 1), [(1, 0)]),
        case("a (2, 3) batch of environments, 4 steps each", 12, (2, 3, 4), [(0, 1, 2), (1, 2, 0)]),
    ]


# Classic wrong implementations, for the messages of the checks. Each says which dones, which next values,
# which factors it (wrongly) uses; the messages name the mistake and the fix in one short paragraph.


def _wrong_dones(dones, *, ignore_dones=False, shift=0):
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


def _wrong_deltas(
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


def _gae_mistake(
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
    **delta,
):
    def wrong(rewards, values, dones, last_values, gamma, lam):
        lam = lam if lam_used is None else lam_used
        used = _wrong_dones(dones, ignore_dones=ignore_dones, shift=shift).to(rewards.dtype)
        in_delta = used if shift_delta is None else _wrong_dones(dones, shift=shift_delta).to(rewards.dtype)
        deltas = _wrong_deltas(rewards, values, in_delta, last_values, gamma, **delta)
        k = gamma * lam if factor is None else factor(gamma, lam)
        adv, T = torch.empty_like(deltas), deltas.shape[-1]
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
        if returns == "delta":
            return adv, deltas + values
        return adv, adv + values

    return wrong


_TERMINAL = "so nothing after a terminal step flows back into it"
_GAE_MISTAKES = [
    Mistake(
        "you bootstrap through terminal steps (the dones are not used): multiply V(s_{t+1}) in delta_t "
        f"and A_{{t+1}} in the recursion by (1 - dones[..., t]), {_TERMINAL}",
        _gae_mistake(ignore_dones=True),
    ),
    Mistake(
        "the done mask is applied in delta_t only: the recursion A_t = delta_t + gamma * lam * A_{t+1} must "
        f"be cut too, A_t = delta_t + gamma * lam * (1 - dones[..., t]) * A_{{t+1}}, {_TERMINAL}",
        _gae_mistake(cut_recursion=False),
    ),
    Mistake(
        "the done mask is applied in the recursion only: delta_t must be cut too, "
        "delta_t = r_t + gamma * (1 - dones[..., t]) * V(s_{t+1}) - V(s_t); a terminal step has no next state "
        "to bootstrap from",
        _gae_mistake(cut=False),
    ),
    Mistake(
        "your done mask is off by one: step t is cut by dones[..., t] (it terminated at t), not by dones[..., t+1]",
        _gae_mistake(shift=1),
    ),
    Mistake(
        "your done mask is off by one: step t is cut by dones[..., t] (it terminated at t), not by dones[..., t-1]",
        _gae_mistake(shift=-1),
    ),
    Mistake(
        "your done mask is off by one: step t is cut by dones[..., t] (it terminated at t), not by "
        "dones[..., t+1] (CleanRL's dones mark the first step of the next episode; the course's mark the last "
        "step of one)",
        _gae_mistake(shift=2),
    ),
    Mistake(
        "last_values is ignored: the last step bootstraps from last_values (V of the state after it), not from "
        "values[..., -1] again",
        _gae_mistake(next_values="repeat_last"),
    ),
    Mistake(
        "your done mask is off by one in delta_t: delta_t is cut by dones[..., t] (step t terminated), not by "
        "dones[..., t+1]",
        _gae_mistake(shift_delta=1),
    ),
    Mistake(
        "your done mask is off by one in the recursion: A_{t+1} is cut by dones[..., t] (step t terminated), "
        "not by dones[..., t+1]",
        _gae_mistake(shift=1, shift_delta=0),
    ),
    Mistake(
        "that is lam = 0 whatever lam is: A_t = delta_t alone; add gamma * lam * (1 - dones[..., t]) * A_{t+1}",
        _gae_mistake(lam_used=0.0),
    ),
    Mistake(
        "lam is ignored: that is lam = 1 whatever lam is (the recursion multiplies A_{t+1} by gamma alone: "
        "Monte-Carlo advantages, the discounted return minus V); the recursion's factor is gamma * lam",
        _gae_mistake(lam_used=1.0),
    ),
    Mistake(
        "V(s_{t+1}) is values[..., t+1] (and last_values at the end), not values[..., t-1] (roll(1) shifts "
        "the wrong way)",
        _gae_mistake(next_values="previous"),
    ),
    Mistake(
        "last_values is ignored, so the bootstrap at the end is missing: the last step's delta uses "
        "gamma * last_values (V of the state after the last step), not 0, unless that step terminated",
        _gae_mistake(bootstrap=False),
    ),
    Mistake(
        "the last step bootstraps from last_values even where it terminated: cut it with "
        "(1 - dones[..., -1]) like every other step",
        _gae_mistake(cut_last=False),
    ),
    Mistake(
        "values.roll(-1) wraps V(s_0) into the last step's next value: the last step bootstraps from "
        "last_values; build the next values with torch.cat([values[..., 1:], last_values[..., None]], -1)",
        _gae_mistake(next_values="roll"),
    ),
    Mistake(
        "V(s_{t+1}) is values[..., t+1] (and last_values at the end), not values[..., t]",
        _gae_mistake(next_values="current"),
    ),
    Mistake("you forgot to subtract V(s_t): delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)", _gae_mistake(subtract=False)),
    Mistake(
        "the sign of delta is flipped: delta_t = r_t + gamma * V(s_{t+1}) - V(s_t), not V(s_t) - r_t - ...",
        _gae_mistake(sign=-1.0),
    ),
    Mistake(
        "the recursion multiplies A_{t+1} by lam alone (lambda in place of gamma * lambda); it must be gamma * lam",
        _gae_mistake(factor=lambda gamma, lam: lam),
    ),
    Mistake(
        "the recursion adds A_{t+1} without its factor: A_t = delta_t + gamma * lam * A_{t+1}",
        _gae_mistake(factor=lambda gamma, lam: 1.0),
    ),
    Mistake(
        "gamma is ignored: it discounts V(s_{t+1}) in delta_t and, with lam, A_{t+1} in the recursion",
        _gae_mistake(factor=lambda gamma, lam: lam, use_gamma=False),
    ),
    Mistake(
        "gamma is missing from delta_t: delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)", _gae_mistake(use_gamma=False)
    ),
    Mistake(
        "gamma is applied twice: the recursion factor is gamma * lam, not gamma**2 * lam",
        _gae_mistake(factor=lambda gamma, lam: gamma * gamma * lam),
    ),
    Mistake(
        "the recursion runs forwards; GAE sums future residuals, so loop backwards from t = T-1",
        _gae_mistake(forward=True),
    ),
    Mistake(
        "the recursion runs forwards; GAE sums future residuals, so loop backwards from t = T-1",
        _gae_mistake(forward=True, forward_cut="same"),
    ),
    Mistake(
        "the advantages come out in reverse time order: a backward loop fills index t with A_t "
        "(adv[..., t] = ...), it does not append and forget to reverse",
        _gae_mistake(flip=True),
    ),
    Mistake(
        "the recursion starts from A_T = last_values; it starts from 0 (last_values already enters "
        "through the last step's delta)",
        _gae_mistake(init_last=True),
    ),
    Mistake(
        "returns = advantages: the returns the critic regresses on are advantages + values (the lambda-return)",
        _gae_mistake(returns="adv"),
    ),
    Mistake(
        "returns = advantages - values: the returns are advantages + values (the lambda-return)",
        _gae_mistake(returns="minus"),
    ),
    Mistake(
        "returns should be advantages + values (the lambda-return), not the discounted reward-to-go",
        _gae_mistake(returns="mc"),
    ),
    Mistake(
        "returns should be advantages + values (the lambda-return), not the one-step target delta + values",
        _gae_mistake(returns="delta"),
    ),
    Mistake(
        "you normalised the advantages; compute_gae returns them raw (PPO normalises per minibatch, in the loss)",
        _gae_mistake(normalize=True),
    ),
]


def check_compute_gae(fn) -> bool:
    """Check a student's ``compute_gae(rewards, values, dones, last_values, gamma, lam)``."""
    return check_against_reference(
        fn, compute_gae, _gae_cases(with_lam=True), name="compute_gae", mistakes=_GAE_MISTAKES
    )


def _td_mistake(*, ignore_dones=False, shift=0, **delta):
    def wrong(rewards, values, dones, last_values, gamma):
        used = _wrong_dones(dones, ignore_dones=ignore_dones, shift=shift)
        return _wrong_deltas(rewards, values, used, last_values, gamma, **delta)

    return wrong


_TD_MISTAKES = [
    Mistake(
        "the terminal step is not cut: you bootstrap through terminal steps; multiply V(s_{t+1}) "
        "by (1 - dones[..., t])",
        _td_mistake(ignore_dones=True),
    ),
    Mistake("your done mask is off by one: use dones[..., t], not dones[..., t+1]", _td_mistake(shift=1)),
    Mistake("your done mask is off by one: use dones[..., t], not dones[..., t-1]", _td_mistake(shift=-1)),
    Mistake(
        "your done mask is off by one: use dones[..., t], not dones[..., t+1] (CleanRL's dones mark the first "
        "step of the next episode; the course's mark the last step of one)",
        _td_mistake(shift=2),
    ),
    Mistake(
        "last_values is ignored: the last step bootstraps from last_values (V of the state after it), not from "
        "values[..., -1] again",
        _td_mistake(next_values="repeat_last"),
    ),
    Mistake(
        "last_values is ignored: the last step must bootstrap from gamma * last_values "
        "(V of the state after it), not 0",
        _td_mistake(bootstrap=False),
    ),
    Mistake(
        "the last step bootstraps from last_values even where it terminated: cut it with "
        "(1 - dones[..., -1]) like every other step",
        _td_mistake(cut_last=False),
    ),
    Mistake(
        "values.roll(-1) wraps V(s_0) into the last step's next value: the last step bootstraps from "
        "last_values; build the next values with torch.cat([values[..., 1:], last_values[..., None]], -1)",
        _td_mistake(next_values="roll"),
    ),
    Mistake(
        "values.roll(-1) wraps V(s_0) into the last step, and the terminal steps are not cut: the last step "
        "bootstraps from last_values, and (1 - dones[..., t]) multiplies V(s_{t+1})",
        _td_mistake(next_values="roll", ignore_dones=True),
    ),
    Mistake(
        "V(s_{t+1}) is values[..., t+1] (and last_values at the end), not values[..., t-1] (roll(1) shifts "
        "the wrong way)",
        _td_mistake(next_values="previous"),
    ),
    Mistake("you forgot to subtract V(s_t): delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)", _td_mistake(subtract=False)),
    Mistake(
        "V(s_{t+1}) is values[..., t+1] (and last_values at the end), not values[..., t]",
        _td_mistake(next_values="current"),
    ),
    Mistake("gamma is missing: delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)", _td_mistake(use_gamma=False)),
    Mistake(
        "the sign is flipped: delta_t = r_t + gamma * V(s_{t+1}) - V(s_t), not V(s_t) - r_t - ...",
        _td_mistake(sign=-1.0),
    ),
    Mistake(
        "the done mask removes the reward too: a terminal step still earns r_t; only gamma * V(s_{t+1}) is cut",
        _td_mistake(cut_reward=True),
    ),
]


def check_td_residuals(fn) -> bool:
    """Check a student's ``td_residuals(rewards, values, dones, last_values, gamma)``."""
    return check_against_reference(
        fn, td_residuals, _gae_cases(with_lam=False), name="td_residuals", mistakes=_TD_MISTAKES
    )


def _table_parts(ep):
    r, v, d = ep["rewards"], ep["values"], ep["dones"].double()
    v_next = torch.cat([v[1:], ep["last_values"].reshape(1)])  # (T,): V(s_{t+1})
    d_next = torch.cat([d[1:], torch.zeros(1, dtype=d.dtype)])  # (T,): done_{t+1}
    return r, v, d, v_next, d_next, ep["gamma"], ep["lam"]


# Each wrong delta column: a message (formatted with t) and the column the mistake produces.
_TABLE_DELTA_MISTAKES = [
    (
        (
            "the episode terminates at t = {t}, so nothing after it is bootstrapped: "
            "delta_{t} = r_{t} - V(s_{t}), without gamma * V(s_{t1})"
        ),
        lambda r, v, d, vn, dn, g: r + g * vn - v,
    ),
    (
        "the last step bootstraps from last_values = V(s_5): delta_4 = r_4 + gamma * V(s_5) - V(s_4)",
        lambda r, v, d, vn, dn, g: r + g * (1 - d) * torch.cat([vn[:-1], vn.new_zeros(1)]) - v,
    ),
    (
        "you forgot to subtract V(s_{t}): delta_t = r_t + gamma * V(s_{{t+1}}) - V(s_t)",
        lambda r, v, d, vn, dn, g: r + g * (1 - d) * vn,
    ),
    (
        "gamma is missing: delta_t = r_t + gamma * V(s_{{t+1}}) - V(s_t)",
        lambda r, v, d, vn, dn, g: r + (1 - d) * vn - v,
    ),
    (
        "V(s_{t1}) is the value of the next state (values[{t1}], or last_values after t = 4), not V(s_{t})",
        lambda r, v, d, vn, dn, g: r + g * (1 - d) * v - v,
    ),
    (
        "the sign is flipped: delta_t = r_t + gamma * V(s_{{t+1}}) - V(s_t)",
        lambda r, v, d, vn, dn, g: -(r + g * (1 - d) * vn - v),
    ),
    (
        "step {t} is cut by its own done flag dones[{t}] (it ended the episode), not by dones[{t1}]",
        lambda r, v, d, vn, dn, g: r + g * (1 - dn) * vn - v,
    ),
]

# Each wrong advantage entry, from the right delta_t and the student's own A_{t+1} (right, since the
# entries are checked from t = 4 down): (message, fn(delta, a_next, done, done_next, g, lam, v_t, v_last, last)).
_TABLE_ADV_MISTAKES = [
    (
        "the episode terminates at t = {t}: A_{t} = delta_{t}, nothing of A_{t1} (the next episode) flows back",
        lambda dl, an, d, dn, g, lam, vt, vl, last: dl + g * lam * an,
    ),
    (
        "step {t} is cut by its own done flag dones[{t}], not by dones[{t1}]",
        lambda dl, an, d, dn, g, lam, vt, vl, last: dl + g * lam * (1 - dn) * an,
    ),
    (
        "the recursion multiplies A_{t1} by lam alone; it must be gamma * lam",
        lambda dl, an, d, dn, g, lam, vt, vl, last: dl + lam * (1 - d) * an,
    ),
    (
        "the recursion multiplies A_{t1} by gamma alone; it must be gamma * lam",
        lambda dl, an, d, dn, g, lam, vt, vl, last: dl + g * (1 - d) * an,
    ),
    (
        "you forgot gamma * lam: A_t = delta_t + gamma * lam * A_{{t+1}}",
        lambda dl, an, d, dn, g, lam, vt, vl, last: dl + (1 - d) * an,
    ),
    (
        "gamma is applied twice: the factor is gamma * lam, not gamma^2 * lam",
        lambda dl, an, d, dn, g, lam, vt, vl, last: dl + g * g * lam * (1 - d) * an,
    ),
    (
        "A_t is not delta_t alone (that is lam = 0): add gamma * lam * A_{{t+1}}",
        lambda dl, an, d, dn, g, lam, vt, vl, last: dl,
    ),
    (
        "A_4 = delta_4: the recursion starts from A_5 = 0 (last_values already entered through delta_4)",
        lambda dl, an, d, dn, g, lam, vt, vl, last: dl + g * lam * vl if last else torch.tensor(float("nan")),
    ),
    (
        "that is the return A_{t} + V(s_{t}); the table asks for the advantage A_{t}",
        lambda dl, an, d, dn, g, lam, vt, vl, last: dl + g * lam * (1 - d) * an + vt,
    ),
]


def _table_column(name: str, column) -> torch.Tensor:
    """One column of the student's table as a (5,) float64 tensor; AssertionError naming what is wrong."""
    if isinstance(column, torch.Tensor):
        column = column.detach().flatten().tolist()
    try:
        entries = list(column)
    except TypeError:
        raise AssertionError(f"gae_table: {name} should be a list of 5 numbers, got {type(column).__name__}") from None
    if len(entries) != 5:
        raise AssertionError(f"gae_table: {name} should hold 5 numbers (t = 0, ..., 4), got {len(entries)}")
    for t, x in enumerate(entries):
        if isinstance(x, torch.Tensor) and x.numel() == 1:
            x = x.item()
        if isinstance(x, bool) or not isinstance(x, (int, float)) or x != x:  # noqa: PLR0124 (only NaN != NaN)
            raise AssertionError(f"gae_table: {name}[{t}] should be a number, got {x!r}: fill it in")
        entries[t] = float(x)
    return torch.tensor(entries, dtype=torch.float64)


def _table(fn) -> tuple[torch.Tensor, torch.Tensor]:
    """The student's two columns, as float64 tensors."""
    result = fn()
    if result is None:
        raise AssertionError("gae_table returned None: did you forget `return deltas, advantages`?")
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise AssertionError("gae_table should return two lists, `return deltas, advantages`")
    return _table_column("deltas", result[0]), _table_column("advantages", result[1])


def check_gae_table(fn, atol: float = 1e-3) -> bool:
    """Check a hand-filled table: ``fn()`` returns ``(deltas, advantages)`` for :func:`gae_table_episode`.

    The deltas are compared with :func:`td_residuals`, the advantages with
    :func:`compute_gae`, each entry to ``atol`` (3 decimals are enough). A wrong
    entry is named, and matched against the classic mistakes to say why.
    """
    forget_pass(fn)  # until this run of the check passes
    deltas, advantages = recording.replayable(lambda: _table(fn))  # recorded in the grading kernel
    ep = gae_table_episode()
    want_deltas = td_residuals(ep["rewards"], ep["values"], ep["dones"], ep["last_values"], ep["gamma"])
    want_adv, _ = compute_gae(**ep)
    r, v, d, v_next, d_next, g, lam = _table_parts(ep)

    def off(got, want):
        return abs(float(got) - float(want)) > atol

    # 1. The deltas: every entry on its own.
    wrong = [t for t in range(5) if off(deltas[t], want_deltas[t])]
    if wrong:
        lines = []
        for t in wrong:
            why = f"off by more than {atol:g}: delta_{t} = r_{t} + gamma * (1 - done_{t}) * V(s_{t + 1}) - V(s_{t})"
            for message, mistake in _TABLE_DELTA_MISTAKES:
                guess = mistake(r, v, d, v_next, d_next, g)[t]
                if off(guess, want_deltas[t]) and not off(deltas[t], guess):
                    why = message.format(t=t, t1=t + 1)
                    break
            lines.append(f"  deltas[{t}] = {deltas[t].item():.4g}: {why}")
        count = "1 of the 5 deltas is" if len(wrong) == 1 else f"{len(wrong)} of the 5 deltas are"
        raise AssertionError(
            f"gae_table: {count} wrong (the advantages are checked once the deltas are right)\n" + "\n".join(lines)
        )

    # 2. The advantages, from t = 4 down: the first wrong entry is diagnosed from the (right) ones after it.
    wrong = [t for t in reversed(range(5)) if off(advantages[t], want_adv[t])]
    if wrong:
        t = wrong[0]
        a_next = advantages[t + 1] if t < 4 else torch.tensor(0.0, dtype=torch.float64)
        why = f"off by more than {atol:g}: A_{t} = delta_{t} + gamma * lam * (1 - done_{t}) * A_{t + 1}, with A_5 = 0"
        candidates = [
            (m, f(want_deltas[t], a_next, d[t], d_next[t], g, lam, v[t], ep["last_values"], t == 4))
            for m, f in _TABLE_ADV_MISTAKES
        ]
        forward, _ = _gae_mistake(forward=True)(**ep)
        candidates.append(
            ("the recursion runs backwards: start at t = 4 with A_4 = delta_4, then t = 3, ..., 0", forward[t])
        )
        for message, guess in candidates:
            if not torch.isnan(torch.as_tensor(guess)) and off(guess, want_adv[t]) and not off(advantages[t], guess):
                why = message.format(t=t, t1=t + 1)
                break
        later = ", ".join(f"advantages[{s}]" for s in wrong[1:])
        verb = "is" if len(wrong) == 2 else "are"
        also = f"\n  ({later} {verb} off too, perhaps only because they build on it)" if later else ""
        raise AssertionError(
            f"gae_table: the deltas are right; advantages[{t}] = {advantages[t].item():.4g} is wrong "
            f"(fill the column from t = 4 down to t = 0): {why}{also}"
        )
    recording.report(
        f"\u2714 gae_table: all 5 deltas and 5 advantages agree with td_residuals and compute_gae (to {atol:g})."
    )
    record_pass("gae_table", fn)
    return True
