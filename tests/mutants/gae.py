"""Wrong and right implementations of the GAE exercises, for tests/test_mutants.py.

Each mutant is written the way a student might write it (not built from the
check's own mistake catalogue), so the test proves the check catches real code.
"""

import torch
from catalogue_round7_00_04 import (
    r04_gae_cleanrl_style,
    r04_table_numpy,
    r04_td_dones_equal_zero,
    r04_td_where,
    w04_gae_bootstrap_added_at_end,
    w04_gae_cut_after_adding,
    w04_gae_delta_minus_next,
    w04_gae_dones_as_keep_mask,
    w04_gae_lam_in_delta,
    w04_gae_lam_squared,
    w04_gae_last_bootstrap_zero,
    w04_gae_next_delta_not_advantage,
    w04_gae_normalise_per_row,
    w04_gae_normalised_whole_batch,
    w04_gae_outputs_swapped,
    w04_gae_python_scalars,
    w04_gae_returns_lam1,
    w04_gae_returns_next_values,
    w04_gae_terminal_advantage_zero,
    w04_table_advantages_from_t0,
    w04_table_delta_no_last_bootstrap,
    w04_table_deltas_reversed,
    w04_table_done_of_previous_step,
    w04_table_four_entries,
    w04_table_gamma_squared_delta,
    w04_table_lam_in_delta,
    w04_table_lam_one,
    w04_table_lambda_returns_as_deltas,
    w04_table_monte_carlo_advantages,
    w04_table_rounded_one_decimal,
    w04_table_terminal_advantage_zero,
    w04_table_terminal_reward_cut,
    w04_td_bootstrap_cut_by_last_done,
    w04_td_dones_as_keep_mask,
    w04_td_float32,
    w04_td_gamma_on_reward,
    w04_td_lam_as_gamma,
    w04_td_last_values_everywhere,
    w04_td_next_minus_current_swapped,
    w04_td_no_gamma_last,
    w04_td_terminal_reward_only,
    w04_td_values_cut_too,
)

# ---------------------------------------------------------------------------
# compute_gae mutants
# ---------------------------------------------------------------------------


def _gae_loop(
    rewards,
    values,
    dones,
    last_values,
    gamma,
    lam,
    *,
    factor="gamma_lam",
    use_dones=True,
    shift_dones=False,
    bootstrap=True,
    subtract=True,
    returns="sum",
):
    d = dones.to(rewards.dtype)
    if shift_dones:
        d = torch.cat([d[..., 1:], torch.zeros_like(d[..., :1])], dim=-1)
    if not use_dones:
        d = torch.zeros_like(d)
    T = rewards.shape[-1]
    adv = torch.zeros_like(rewards)
    next_adv = torch.zeros_like(last_values)
    next_value = last_values if bootstrap else torch.zeros_like(last_values)
    for t in range(T - 1, -1, -1):
        delta = rewards[..., t] + gamma * (1 - d[..., t]) * next_value - (values[..., t] if subtract else 0)
        k = {"gamma_lam": gamma * lam, "lam": lam, "gamma2_lam": gamma * gamma * lam}[factor]
        next_adv = delta + k * (1 - d[..., t]) * next_adv
        adv[..., t] = next_adv
        next_value = values[..., t]
    if returns == "mc":
        ret = torch.zeros_like(rewards)
        g = last_values
        for t in range(T - 1, -1, -1):
            g = rewards[..., t] + gamma * (1 - dones[..., t].to(rewards.dtype)) * g
            ret[..., t] = g
        return adv, ret
    if returns == "adv":
        return adv, adv.clone()
    return adv, adv + values


def gae_lam_not_gamma_lam(rewards, values, dones, last_values, gamma, lam):
    return _gae_loop(rewards, values, dones, last_values, gamma, lam, factor="lam")


def gae_gamma_twice(rewards, values, dones, last_values, gamma, lam):
    return _gae_loop(rewards, values, dones, last_values, gamma, lam, factor="gamma2_lam")


def gae_ignores_dones(rewards, values, dones, last_values, gamma, lam):
    return _gae_loop(rewards, values, dones, last_values, gamma, lam, use_dones=False)


def gae_next_done(rewards, values, dones, last_values, gamma, lam):
    return _gae_loop(rewards, values, dones, last_values, gamma, lam, shift_dones=True)


def gae_no_bootstrap(rewards, values, dones, last_values, gamma, lam):
    return _gae_loop(rewards, values, dones, last_values, gamma, lam, bootstrap=False)


def gae_no_baseline(rewards, values, dones, last_values, gamma, lam):
    return _gae_loop(rewards, values, dones, last_values, gamma, lam, subtract=False)


def gae_mc_returns(rewards, values, dones, last_values, gamma, lam):
    return _gae_loop(rewards, values, dones, last_values, gamma, lam, returns="mc")


def gae_returns_are_advantages(rewards, values, dones, last_values, gamma, lam):
    return _gae_loop(rewards, values, dones, last_values, gamma, lam, returns="adv")


def gae_forward(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1 - d) * next_values - values
    adv = torch.zeros_like(rewards)
    running = torch.zeros_like(last_values)
    for t in range(rewards.shape[-1]):
        not_done_before = 1 - d[..., t - 1] if t > 0 else 1.0
        running = deltas[..., t] + gamma * lam * not_done_before * running
        adv[..., t] = running
    return adv, adv + values


def gae_normalized(rewards, values, dones, last_values, gamma, lam):
    adv, _ = _gae_loop(rewards, values, dones, last_values, gamma, lam)
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    return adv, adv + values


def gae_in_place(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    rewards += gamma * (1 - d) * next_values - values  # overwrites the caller's rewards with the deltas
    running = torch.zeros_like(last_values)
    adv = torch.zeros_like(rewards)
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * lam * (1 - d[..., t]) * running
        adv[..., t] = running
    return adv, adv + values


def gae_no_return(rewards, values, dones, last_values, gamma, lam):
    _gae_loop(rewards, values, dones, last_values, gamma, lam)


def gae_only_advantages(rewards, values, dones, last_values, gamma, lam):
    return _gae_loop(rewards, values, dones, last_values, gamma, lam)[0]


def gae_dones_only_in_delta(rewards, values, dones, last_values, gamma, lam):
    # Cuts the bootstrap of V but lets A_{t+1} of the next episode flow back through the recursion.
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1 - d) * next_values - values
    adv = torch.zeros_like(rewards)
    running = torch.zeros_like(last_values)
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * running
        adv[..., t] = running
    return adv, adv + values


def gae_dones_only_in_recursion(rewards, values, dones, last_values, gamma, lam):
    # Cuts A_{t+1} at a terminal step but still bootstraps V(s_{t+1}) into its delta.
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * next_values - values
    adv = torch.zeros_like(rewards)
    running = torch.zeros_like(last_values)
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1 - d[..., t]) * running
        adv[..., t] = running
    return adv, adv + values


def _gae_general(
    rewards,
    values,
    dones,
    last_values,
    gamma,
    lam,
    *,
    next_values=None,
    d=None,
    k=None,
    delta_gamma=None,
    start=None,
    sign=1.0,
):
    d = dones.to(rewards.dtype) if d is None else d
    if next_values is None:
        next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    g = gamma if delta_gamma is None else delta_gamma
    deltas = sign * (rewards + g * (1 - d) * next_values - values)
    k = gamma * lam if k is None else k
    adv = torch.zeros_like(rewards)
    running = torch.zeros_like(last_values) if start is None else start
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + k * (1 - d[..., t]) * running
        adv[..., t] = running
    return adv, adv + values


def gae_gamma_ignored(rewards, values, dones, last_values, gamma, lam):
    return _gae_general(rewards, values, dones, last_values, gamma, lam, delta_gamma=1.0, k=lam)


def gae_gamma_missing_in_delta(rewards, values, dones, last_values, gamma, lam):
    return _gae_general(rewards, values, dones, last_values, gamma, lam, delta_gamma=1.0)


def gae_lam_ignored(rewards, values, dones, last_values, gamma, lam):
    return _gae_general(rewards, values, dones, last_values, gamma, lam, k=gamma)


def gae_no_factor(rewards, values, dones, last_values, gamma, lam):
    return _gae_general(rewards, values, dones, last_values, gamma, lam, k=1.0)


def gae_roll_next_values(rewards, values, dones, last_values, gamma, lam):
    # values.roll(-1): the last step's "next value" is V(s_0), not last_values.
    return _gae_general(rewards, values, dones, last_values, gamma, lam, next_values=values.roll(-1, dims=-1))


def gae_previous_done(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    d_prev = torch.cat([torch.zeros_like(d[..., :1]), d[..., :-1]], dim=-1)
    return _gae_general(rewards, values, dones, last_values, gamma, lam, d=d_prev)


def gae_sign_flipped(rewards, values, dones, last_values, gamma, lam):
    return _gae_general(rewards, values, dones, last_values, gamma, lam, sign=-1.0)


def gae_starts_from_last_values(rewards, values, dones, last_values, gamma, lam):
    return _gae_general(rewards, values, dones, last_values, gamma, lam, start=last_values.clone())


def gae_current_value(rewards, values, dones, last_values, gamma, lam):
    return _gae_general(rewards, values, dones, last_values, gamma, lam, next_values=values)


def gae_returns_minus_values(rewards, values, dones, last_values, gamma, lam):
    adv, _ = _gae_general(rewards, values, dones, last_values, gamma, lam)
    return adv, adv - values


def gae_bootstraps_last_terminal(rewards, values, dones, last_values, gamma, lam):
    # Masks values[t+1] inside the episode, but adds gamma * last_values at the end whatever dones[-1] says.
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:] * (1 - d[..., :-1]), last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * next_values - values
    adv = torch.zeros_like(rewards)
    running = torch.zeros_like(last_values)
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1 - d[..., t]) * running
        adv[..., t] = running
    return adv, adv + values


def gae_appended_not_reversed(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1 - d) * next_values - values
    out, running = [], torch.zeros_like(last_values)
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1 - d[..., t]) * running
        out.append(running)
    adv = torch.stack(out, dim=-1)  # forgot out.reverse()
    return adv, adv + values


def gae_forward_indexed(rewards, values, dones, last_values, gamma, lam):
    """Issue 43's student: the recursion written with adv[..., t - 1], which at t = 0 reads the still-zero last
    entry, and no cut at the episode's ends."""
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1 - dones.to(rewards.dtype)) * next_values - values
    adv = torch.zeros_like(rewards)
    for t in range(rewards.shape[-1]):
        adv[..., t] = deltas[..., t] + gamma * lam * adv[..., t - 1]
    return adv, adv + values


def gae_forward_same_done(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1 - d) * next_values - values
    adv = torch.zeros_like(rewards)
    running = torch.zeros_like(last_values)
    for t in range(rewards.shape[-1]):
        running = deltas[..., t] + gamma * lam * (1 - d[..., t]) * running
        adv[..., t] = running
    return adv, adv + values


# ---------------------------------------------------------------------------
# td_residuals mutants
# ---------------------------------------------------------------------------


def td_ignores_dones(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    return rewards + gamma * next_values - values


def td_next_done(rewards, values, dones, last_values, gamma):
    d = dones.to(rewards.dtype)
    d_next = torch.cat([d[..., 1:], torch.zeros_like(d[..., :1])], dim=-1)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    return rewards + gamma * (1 - d_next) * next_values - values


def td_current_value(rewards, values, dones, last_values, gamma):
    return rewards + gamma * (1 - dones.to(rewards.dtype)) * values - values


def td_no_baseline(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    return rewards + gamma * (1 - dones.to(rewards.dtype)) * next_values


def td_no_bootstrap(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], torch.zeros_like(last_values).unsqueeze(-1)], dim=-1)
    return rewards + gamma * (1 - dones.to(rewards.dtype)) * next_values - values


def td_roll(rewards, values, dones, last_values, gamma):
    return rewards + gamma * (1 - dones.to(rewards.dtype)) * values.roll(-1, dims=-1) - values


def td_roll_no_dones(rewards, values, dones, last_values, gamma):
    return rewards + gamma * torch.roll(values, -1, -1) - values


def td_previous_done(rewards, values, dones, last_values, gamma):
    d = dones.to(rewards.dtype)
    d_prev = torch.cat([torch.zeros_like(d[..., :1]), d[..., :-1]], dim=-1)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    return rewards + gamma * (1 - d_prev) * next_values - values


def td_no_gamma(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    return rewards + (1 - dones.to(rewards.dtype)) * next_values - values


def td_sign_flipped(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    return values - rewards - gamma * (1 - dones.to(rewards.dtype)) * next_values


def td_reward_masked(rewards, values, dones, last_values, gamma):
    nonterminal = 1 - dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    return nonterminal * (rewards + gamma * next_values) - values


def td_bootstraps_last_terminal(rewards, values, dones, last_values, gamma):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:] * (1 - d[..., :-1]), last_values.unsqueeze(-1)], dim=-1)
    return rewards + gamma * next_values - values


def gae_is_td_residuals(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    adv = rewards + gamma * (1 - d) * next_values - values
    return adv, adv + values


def gae_monte_carlo(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    ret = torch.zeros_like(rewards)
    running = last_values
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * (1 - d[..., t]) * running
        ret[..., t] = running
    return ret - values, ret


def gae_next_done_in_delta_only(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    d_next = torch.cat([d[..., 1:], torch.zeros_like(d[..., :1])], dim=-1)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1 - d_next) * next_values - values
    adv, running = torch.zeros_like(rewards), torch.zeros_like(last_values)
    for t in reversed(range(rewards.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1 - d[..., t]) * running
        adv[..., t] = running
    return adv, adv + values


def gae_roll_wrong_way(rewards, values, dones, last_values, gamma, lam):
    return _gae_general(rewards, values, dones, last_values, gamma, lam, next_values=values.roll(1, dims=-1))


def td_roll_wrong_way(rewards, values, dones, last_values, gamma):
    return rewards + gamma * (1 - dones.to(rewards.dtype)) * values.roll(1, dims=-1) - values


def gae_cleanrl_indexing_copied(rewards, values, dones, last_values, gamma, lam):
    # CleanRL's loop, whose dones[t + 1] marks the first step of the next episode, copied as it is.
    d = dones.to(rewards.dtype)
    T = rewards.shape[-1]
    adv, lastgaelam = torch.zeros_like(rewards), torch.zeros_like(last_values)
    for t in reversed(range(T)):
        if t == T - 1:
            nextnonterminal, nextvalues = 1.0 - d[..., -1], last_values
        else:
            nextnonterminal, nextvalues = 1.0 - d[..., t + 1], values[..., t + 1]
        delta = rewards[..., t] + gamma * nextvalues * nextnonterminal - values[..., t]
        adv[..., t] = lastgaelam = delta + gamma * lam * nextnonterminal * lastgaelam
    return adv, adv + values


def gae_repeats_last_value(rewards, values, dones, last_values, gamma, lam):
    return _gae_general(
        rewards,
        values,
        dones,
        last_values,
        gamma,
        lam,
        next_values=torch.cat([values[..., 1:], values[..., -1:]], dim=-1),
    )


def td_repeats_last_value(rewards, values, dones, last_values, gamma):
    next_values = torch.cat([values[..., 1:], values[..., -1:]], dim=-1)
    return rewards + gamma * (1 - dones.to(rewards.dtype)) * next_values - values


MUTANTS = [
    ("compute_gae", gae_lam_not_gamma_lam, "lam alone"),
    ("compute_gae", gae_gamma_twice, "gamma is applied twice"),
    ("compute_gae", gae_ignores_dones, "bootstrap through terminal steps"),
    ("compute_gae", gae_next_done, "off by one"),
    ("compute_gae", gae_no_bootstrap, "bootstrap at the end is missing"),
    ("compute_gae", gae_no_baseline, "subtract V(s_t)"),
    ("compute_gae", gae_mc_returns, "advantages + values"),
    ("compute_gae", gae_forward, "forwards"),
    ("compute_gae", gae_normalized, "normalised"),
    ("compute_gae", gae_in_place, "in place"),
    ("compute_gae", gae_no_return, "return"),
    ("compute_gae", gae_only_advantages, "tuple of 2"),
    ("compute_gae", gae_returns_are_advantages, "returns = advantages"),
    ("compute_gae", gae_dones_only_in_delta, "applied in delta_t only"),
    ("compute_gae", gae_dones_only_in_recursion, "applied in the recursion only"),
    ("compute_gae", gae_gamma_ignored, "gamma is ignored"),
    ("compute_gae", gae_gamma_missing_in_delta, "gamma is missing from delta_t"),
    ("compute_gae", gae_lam_ignored, "lam is ignored"),
    ("compute_gae", gae_no_factor, "without its factor"),
    ("compute_gae", gae_roll_next_values, "roll(-1)"),
    ("compute_gae", gae_previous_done, "dones[..., t-1]"),
    ("compute_gae", gae_sign_flipped, "sign of delta is flipped"),
    ("compute_gae", gae_starts_from_last_values, "starts from A_T = last_values"),
    ("compute_gae", gae_current_value, "not values[..., t]"),
    ("compute_gae", gae_returns_minus_values, "advantages - values"),
    ("compute_gae", gae_bootstraps_last_terminal, "even where it terminated"),
    ("compute_gae", gae_appended_not_reversed, "reverse time order"),
    ("compute_gae", gae_forward_same_done, "forwards"),
    ("compute_gae", gae_forward_indexed, "you built A_t from A_{t-1}"),
    ("compute_gae", gae_is_td_residuals, "lam = 0"),
    ("compute_gae", gae_monte_carlo, "lam = 1"),
    ("compute_gae", gae_next_done_in_delta_only, "off by one in delta_t"),
    ("compute_gae", gae_roll_wrong_way, "roll(1)"),
    ("compute_gae", gae_cleanrl_indexing_copied, "CleanRL's dones"),
    ("compute_gae", gae_repeats_last_value, "not from values[..., -1] again"),
    ("td_residuals", td_ignores_dones, "terminal step is not cut"),
    ("td_residuals", td_next_done, "off by one"),
    ("td_residuals", td_current_value, "values[..., t+1]"),
    ("td_residuals", td_no_baseline, "subtract V(s_t)"),
    ("td_residuals", td_no_bootstrap, "last_values is ignored"),
    ("td_residuals", td_roll, "roll(-1)"),
    ("td_residuals", td_roll_wrong_way, "roll(1)"),
    ("td_residuals", td_repeats_last_value, "not from values[..., -1] again"),
    ("td_residuals", td_roll_no_dones, "roll(-1)"),
    ("td_residuals", td_previous_done, "dones[..., t-1]"),
    ("td_residuals", td_no_gamma, "gamma is missing"),
    ("td_residuals", td_sign_flipped, "sign is flipped"),
    ("td_residuals", td_reward_masked, "removes the reward too"),
    ("td_residuals", td_bootstraps_last_terminal, "even where it terminated"),
]


# ---------------------------------------------------------------------------
# Correct variants
# ---------------------------------------------------------------------------


def gae_cleanrl_style(rewards, values, dones, last_values, gamma, lam):
    """CleanRL's loop over the time axis moved first, with our done_t as its nextnonterminal."""
    r, v = rewards.movedim(-1, 0), values.movedim(-1, 0)  # (T, ...)
    d = dones.to(rewards.dtype).movedim(-1, 0)
    T = r.shape[0]
    advantages = torch.zeros_like(r)
    lastgaelam = 0.0
    for t in reversed(range(T)):
        nextnonterminal = 1.0 - d[t]
        nextvalues = last_values if t == T - 1 else v[t + 1]
        delta = r[t] + gamma * nextvalues * nextnonterminal - v[t]
        advantages[t] = lastgaelam = delta + gamma * lam * nextnonterminal * lastgaelam
    advantages = advantages.movedim(0, -1)
    return advantages, advantages + values


def gae_matrix(rewards, values, dones, last_values, gamma, lam):
    """No loop: A = W @ delta with W[t, k] = prod_{j=t}^{k-1} gamma * lam * (1 - done_j) for k >= t."""
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    deltas = rewards + gamma * (1 - d) * next_values - values
    T = rewards.shape[-1]
    step = gamma * lam * (1 - d)  # (..., T)
    # log-free cumulative product: W[t, k] = prod over j in [t, k) of step_j.
    weights = torch.ones(*rewards.shape[:-1], T, T, dtype=rewards.dtype)
    for k in range(T):
        for t in range(k - 1, -1, -1):
            weights[..., t, k] = weights[..., t + 1, k] * step[..., t]
    weights = torch.triu(weights)
    adv = (weights @ deltas.unsqueeze(-1)).squeeze(-1)
    return adv, adv + values


def gae_float32_inside(rewards, values, dones, last_values, gamma, lam):
    """Computes in float32 whatever comes in, then casts back (within the check's tolerance)."""
    adv, _ = gae_cleanrl_style(rewards.float(), values.float(), dones, last_values.float(), gamma, lam)
    adv = adv.to(rewards.dtype)
    return adv, adv + values


def td_cleanrl_style(rewards, values, dones, last_values, gamma):
    nonterminal = 1.0 - dones.to(rewards.dtype)
    next_values = torch.roll(values, -1, dims=-1).clone()
    next_values[..., -1] = last_values
    return rewards + gamma * nonterminal * next_values - values


VARIANTS = [
    ("compute_gae", gae_cleanrl_style),
    ("compute_gae", gae_matrix),
    ("compute_gae", gae_float32_inside),
    ("td_residuals", td_cleanrl_style),
]


# Round seven of issue 44 (chapters 00 to 04): the wrong answers of tests/catalogue_round7_00_04.py, each
# named by the mistake it makes, and its right variants.
MUTANTS += [
    ("gae_table", w04_table_rounded_one_decimal, "your deltas are the right numbers rounded to"),
    ("gae_table", w04_table_deltas_reversed, "your deltas are in reverse order: deltas[0]"),
    ("gae_table", w04_table_done_of_previous_step, "step 2 is cut by dones[1], the step before's"),
    ("gae_table", w04_table_monte_carlo_advantages, "the deltas are right; advantages[4] = 1 is"),
    ("gae_table", w04_table_terminal_reward_cut, "at the terminal step t = 2 you cut the"),
    ("gae_table", w04_table_terminal_advantage_zero, "the deltas are right; advantages[2] = 0 is"),
    ("gae_table", w04_table_lambda_returns_as_deltas, "you forgot to subtract V(s_0): delta_t = r_t"),
    ("gae_table", w04_table_gamma_squared_delta, "gamma is applied twice: delta_t = r_t +"),
    ("gae_table", w04_table_four_entries, "deltas should hold 5 numbers (t = 0, ...,"),
    ("compute_gae", w04_gae_outputs_swapped, "your two outputs are swapped: compute_gae"),
    ("compute_gae", w04_gae_lam_in_delta, "delta_t discounts V(s_{t+1}) by lam; the TD"),
    ("compute_gae", w04_gae_normalise_per_row, "you normalised the advantages within each"),
    ("compute_gae", w04_gae_returns_next_values, "returns = advantages + V(s_{t+1}); the"),
    ("compute_gae", w04_gae_terminal_advantage_zero, "you set the advantage of a terminal step to"),
    ("compute_gae", w04_gae_dones_as_keep_mask, "you used dones as the mask of steps that go"),
    ("compute_gae", w04_gae_next_delta_not_advantage, "you added gamma * lam * delta_{t+1}, the"),
    ("compute_gae", w04_gae_bootstrap_added_at_end, "the last step bootstraps from last_values"),
    ("compute_gae", w04_gae_python_scalars, "output[0] is a float32 tensor; the exercise"),
    ("td_residuals", w04_td_values_cut_too, "at a terminal step your residual is r_t"),
    ("td_residuals", w04_td_last_values_everywhere, "every step bootstraps from last_values;"),
    ("td_residuals", w04_td_gamma_on_reward, "gamma multiplies r_t too; the reward of step"),
    ("td_residuals", w04_td_dones_as_keep_mask, "you used dones as the mask of steps that go"),
    ("td_residuals", w04_td_next_minus_current_swapped, "V(s_t) and V(s_{t+1}) are swapped: the"),
    ("td_residuals", w04_td_float32, "output is a float32 tensor; the exercise"),
    ("td_residuals", w04_td_terminal_reward_only, "at a terminal step your residual is r_t"),
    ("td_residuals", w04_td_bootstrap_cut_by_last_done, "only the last step's done is used; a"),
    ("td_residuals", w04_td_lam_as_gamma, "V(s_{t+1}) is discounted by gamma ** 2; one"),
]

VARIANTS += [
    ("gae_table", r04_table_numpy),
    ("compute_gae", r04_gae_cleanrl_style),
    ("td_residuals", r04_td_where),
]

# Wave two of round seven, written after the fixes for wave one.
MUTANTS += [
    ("td_residuals", w04_td_no_gamma_last, "the last step bootstraps from last_values"),
    ("compute_gae", w04_gae_cut_after_adding, "you multiplied the whole sum by (1 -"),
    ("compute_gae", w04_gae_lam_squared, "lam is applied twice: the recursion's factor"),
    ("compute_gae", w04_gae_normalised_whole_batch, "you normalised the advantages; compute_gae"),
    ("gae_table", w04_table_lam_one, "the deltas are right; advantages[3] = 0.71"),
    ("gae_table", w04_table_delta_no_last_bootstrap, "the last step bootstraps from last_values ="),
]

VARIANTS += [
    ("td_residuals", r04_td_dones_equal_zero),
]

# Wave three of round seven, written after the fixes for wave two.
MUTANTS += [
    ("compute_gae", w04_gae_returns_lam1, "returns should be advantages + values (the"),
    ("compute_gae", w04_gae_delta_minus_next, "you subtracted gamma * lam * A_{t+1}; the"),
    ("gae_table", w04_table_advantages_from_t0, "you added gamma * lam * delta_{t+1}, the"),
]

# Wave four of round seven, written after the fixes for wave three.
MUTANTS += [
    ("compute_gae", w04_gae_last_bootstrap_zero, "last_values is ignored, so the"),
    ("gae_table", w04_table_lam_in_delta, "delta_0 discounts V(s_1) by lam; the"),
]
