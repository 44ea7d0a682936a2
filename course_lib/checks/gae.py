"""Exercise checks of chapter 04 (GAE): TD residuals, compute_gae, and the table by hand.

The checks import the reference implementations of ``course_lib.gae``; the maths module never
imports its checks, so the file a student opens is the maths alone. The wrong implementations of
``compute_gae`` and ``td_residuals`` that the checks name are built in :mod:`course_lib.checks.gae_mistakes` (more in
:mod:`course_lib.checks.gae_more_mistakes`) and :mod:`course_lib.checks.td_mistakes`; the table's, a column at a
time, are here.
"""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference, forget_pass, record_pass, recording
from course_lib.checks.gae_mistakes import GAE_MISTAKES, gae_mistake
from course_lib.checks.gae_more_mistakes import GAE_MISTAKES_MORE
from course_lib.checks.gae_table_mistakes import (
    TABLE_ADV_MISTAKES,
    TABLE_DELTA_MISTAKES,
    column_slip,
    explains,
    whole_column_advantages,
)
from course_lib.checks.td_mistakes import TD_MISTAKES, TD_MISTAKES_MORE
from course_lib.gae import compute_gae, gae_table_episode, td_residuals


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
        case("gamma = 0: nothing after step t counts, A_t = r_t - V(s_t)", 13, (2, 5), [(0, 2)], gamma=0.0, lam=0.9),
    ]


def _one_tensor(rewards, values, dones, last_values, gamma, lam):
    _, returns = compute_gae(rewards, values, dones, last_values, gamma, lam)
    return returns, returns


ONE_TENSOR = Mistake(
    "your advantages and returns are one tensor: `returns = advantages` names the same tensor, so "
    "`returns += values` changed the advantages too; make a new one, returns = advantages + values",
    _one_tensor,
)


def check_compute_gae(fn) -> bool:
    """Check a student's ``compute_gae(rewards, values, dones, last_values, gamma, lam)``."""
    return check_against_reference(
        fn,
        compute_gae,
        _gae_cases(with_lam=True),
        name="compute_gae",
        mistakes=GAE_MISTAKES + GAE_MISTAKES_MORE + [ONE_TENSOR],
        check_dtype=True,
    )


def check_td_residuals(fn) -> bool:
    """Check a student's ``td_residuals(rewards, values, dones, last_values, gamma)``."""
    return check_against_reference(
        fn,
        td_residuals,
        _gae_cases(with_lam=False),
        name="td_residuals",
        mistakes=TD_MISTAKES + TD_MISTAKES_MORE,
        check_dtype=True,
    )


def _table_parts(ep):
    r, v, d = ep["rewards"], ep["values"], ep["dones"].double()
    v_next = torch.cat([v[1:], ep["last_values"].reshape(1)])  # (T,): V(s_{t+1})
    d_next = torch.cat([d[1:], torch.zeros(1, dtype=d.dtype)])  # (T,): done_{t+1}
    return r, v, d, v_next, d_next, ep["gamma"], ep["lam"]


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

    # 0. The two columns swapped: each is the other's right answer (they agree where A_t = delta_t).
    if any(off(deltas[t], want_deltas[t]) for t in range(5)) and not any(
        off(deltas[t], want_adv[t]) or off(advantages[t], want_deltas[t]) for t in range(5)
    ):
        raise AssertionError(
            "gae_table: your two columns are swapped: the first holds the advantages and the second the deltas; "
            "return (deltas, advantages), in that order"
        )

    # 1. The deltas: every entry on its own.
    wrong = [t for t in range(5) if off(deltas[t], want_deltas[t])]
    if wrong:
        slip = column_slip("deltas", deltas, want_deltas, atol)
        if slip is not None:
            raise AssertionError(f"gae_table: {slip} (the advantages are checked once the deltas are right)")
        lines = []
        named = 0
        for t in wrong:
            why = f"off by more than {atol:g}: delta_{t} = r_{t} + gamma * (1 - done_{t}) * V(s_{t + 1}) - V(s_{t})"
            for message, mistake in TABLE_DELTA_MISTAKES:
                # named only on evidence: the student's column is the mistake's wherever the mistake is off
                if explains(mistake(r, v, d, v_next, d_next, g), deltas, want_deltas, t, atol):
                    why = message.format(t=t, t1=t + 1, tm=t - 1)
                    named += 1
                    break
            lines.append(f"deltas[{t}] = {deltas[t].item():.4g}: {why}")
        count = "1 of the 5 deltas is" if len(wrong) == 1 else f"{len(wrong)} of the 5 deltas are"
        if named == len(wrong):  # every wrong entry has its mistake: the first one leads, where a student reads
            raise AssertionError(
                f"gae_table: {lines[0]} ({count} wrong; the advantages are checked once the deltas are right)"
                + "".join(f"\n  {line}" for line in lines[1:])
            )
        raise AssertionError(
            f"gae_table: {count} wrong (the advantages are checked once the deltas are right)"
            + "".join(f"\n  {line}" for line in lines)
        )

    # 2. The advantages, from t = 4 down: the first wrong entry is diagnosed from the (right) ones after it.
    wrong = [t for t in reversed(range(5)) if off(advantages[t], want_adv[t])]
    if wrong:
        slip = column_slip("advantages", advantages, want_adv, atol)
        if slip is not None:
            raise AssertionError(f"gae_table: the deltas are right; {slip}")
        t = wrong[0]
        a_next = advantages[t + 1] if t < 4 else torch.tensor(0.0, dtype=torch.float64)
        why = f"off by more than {atol:g}: A_{t} = delta_{t} + gamma * lam * (1 - done_{t}) * A_{t + 1}, with A_5 = 0"
        candidates = [
            (m, f(want_deltas[t], a_next, d[t], d_next[t], g, lam, v[t], ep["last_values"], t == 4))
            for m, f in TABLE_ADV_MISTAKES
        ]
        forward, _ = gae_mistake(forward=True)(**ep)
        candidates.append(
            ("the recursion runs backwards: start at t = 4 with A_4 = delta_4, then t = 3, ..., 0", forward[t])
        )
        for message, column in whole_column_advantages(ep, want_deltas):
            if explains(column, advantages, want_adv, t, atol):
                candidates.insert(0, (message, column[t]))
        for message, guess in candidates:
            if not torch.isnan(torch.as_tensor(guess)) and off(guess, want_adv[t]) and not off(advantages[t], guess):
                why = message.format(t=t, t1=t + 1, tm=t - 1)
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
