"""The hand-filled GAE table's classic wrong entries (chapter 04), which ``checks/gae.py``'s ``check_gae_table`` names.

The table is checked entry by entry, so its mistakes are columns: each wrong delta column from the episode's parts,
each wrong advantage entry from the right delta_t and the student's own A_{t+1}, and a few whole advantage columns.
A column mistake names an entry only on evidence (:func:`explains`): the student's column must be the mistake's
wherever the mistake's is wrong. A slip of the whole column (its order, its rounding) is said once for the column.
"""

from __future__ import annotations

import torch

from course_lib.gae import gae_table_episode

_LAM = gae_table_episode()["lam"]  # the table's one episode: its lam, for the delta that takes lam for gamma

# Each wrong delta column: a message (formatted with t) and the column the mistake produces.
TABLE_DELTA_MISTAKES = [
    (
        "step {t} is cut by dones[{tm}], the step before's flag: each step is cut by its own done flag, dones[{t}] "
        "(the episode ended at t = 2, so delta_2 has no bootstrap and delta_3 has one)",
        lambda r, v, d, vn, dn, g: r + g * (1 - torch.cat([d.new_zeros(1), d[:-1]])) * vn - v,
    ),
    (
        "at the terminal step t = {t} you cut the reward too: only the bootstrap is cut, delta_{t} = r_{t} - V(s_{t})",
        lambda r, v, d, vn, dn, g: (1 - d) * (r + g * vn) - v,
    ),
    (
        "delta_{t} discounts V(s_{t1}) by lam; the residual's discount is gamma: "
        "delta_t = r_t + gamma * (1 - done_t) * V(s_{{t+1}}) - V(s_t)",
        lambda r, v, d, vn, dn, g: r + _LAM * (1 - d) * vn - v,
    ),
    (
        "gamma is applied twice: delta_t = r_t + gamma * V(s_{{t+1}}) - V(s_t), not gamma ** 2 * V(s_{{t+1}})",
        lambda r, v, d, vn, dn, g: r + g * g * (1 - d) * vn - v,
    ),
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
TABLE_ADV_MISTAKES = [
    (
        "a terminal step keeps its own residual: A_{t} = delta_{t} (only A_{t1}, the next episode's, is cut), not 0",
        lambda dl, an, d, dn, g, lam, vt, vl, last: dl * 0 if d else torch.tensor(float("nan")),
    ),
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


def explains(column: torch.Tensor, got: torch.Tensor, want: torch.Tensor, t: int, atol: float) -> bool:
    """Whether a mistake's ``column`` explains entry ``t`` of the student's: it is wrong there, the student's entry is
    its entry, and on every entry where the mistake is wrong the student's is the mistake's (evidence, not a guess
    from one number: a sign flip that happens to give delta_2 must also give the others)."""
    column = torch.as_tensor(column, dtype=torch.float64)
    mistaken = (column - want).abs() > atol  # (5,): where the mistake is wrong
    if not bool(mistaken[t]) or bool(torch.isnan(column[mistaken]).any()):
        return False
    return bool(((got - column).abs()[mistaken] <= atol).all())


def column_slip(name: str, got: torch.Tensor, want: torch.Tensor, atol: float) -> str | None:
    """A slip of a whole column, in words: its entries in reverse order, or rounded too coarsely; None otherwise."""
    if bool(((got - want.flip(0)).abs() <= atol).all()):
        return (
            f"your {name} are in reverse order: {name}[0] is the entry of t = 0 (fill the column from t = 4 down, "
            "but list it from t = 0 up)"
        )
    for decimals in (0, 1, 2):
        rounded = torch.round(want, decimals=decimals)
        if bool(((got - rounded).abs() <= 1e-9).all()):
            return (
                f"your {name} are the right numbers rounded to {decimals} decimal{'s' if decimals != 1 else ''}: "
                f"each entry must be within {atol:g}, so keep 3 decimals or more"
            )
    return None


def whole_column_advantages(ep: dict, deltas: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """Whole advantage columns that are something else: the discounted returns of the rewards (with and without
    the bootstrap from last_values), and delta_t plus the next residual only."""
    r, d, g = ep["rewards"], ep["dones"].to(torch.float64), ep["gamma"]
    columns = []
    for start, words in ((0.0, "without the bootstrap"), (float(ep["last_values"]), "bootstrapped from V(s_5)")):
        returns, running = torch.empty_like(r), torch.tensor(start, dtype=torch.float64)
        for t in reversed(range(r.shape[0])):
            running = r[t] + g * (1 - d[t]) * running
            returns[t] = running
        message = (
            f"your advantages are the discounted returns of the rewards ({words}): GAE sums the residuals, "
            "A_t = delta_t + gamma * lam * (1 - done_t) * A_{{t+1}}, not the rewards"
        )
        columns.append((message, returns))
    keep = 1 - d
    following = torch.cat([deltas[1:], deltas.new_zeros(1)])  # (5,): delta_{t+1}, 0 after t = 4
    columns.append(
        (
            "you added gamma * lam * delta_{{t+1}}, the next residual; the recursion adds the next *advantage*, "
            "A_t = delta_t + gamma * lam * (1 - done_t) * A_{{t+1}}, which carries every later residual",
            deltas + g * ep["lam"] * keep * following,
        )
    )
    return columns
