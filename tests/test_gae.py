"""Tests of course_lib.gae: hand-computed episodes, properties, CleanRL's loop, truncation, bad input."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.checks import gae as gae_checks
from course_lib.gae import bootstrap_truncated, compute_gae, discounted_returns, td_residuals

# ---------------------------------------------------------------------------
# A worked 5-step episode, by hand
# ---------------------------------------------------------------------------
# rewards [1, 0, 2, 0, 1], values [0.5, 0.4, 0.3, 0.2, 0.1], the episode terminates at t=2
# (a new one starts at t=3), V(s_5) = last_value = 0.6, gamma = 0.9, lam = 0.8, gamma * lam = 0.72.

REWARDS = torch.tensor([1.0, 0.0, 2.0, 0.0, 1.0], dtype=torch.float64)
VALUES = torch.tensor([0.5, 0.4, 0.3, 0.2, 0.1], dtype=torch.float64)
DONES = torch.tensor([False, False, True, False, False])
LAST_VALUE = torch.tensor(0.6, dtype=torch.float64)

# delta_t = r_t + gamma * (1 - done_t) * V(s_{t+1}) - V(s_t)
DELTAS = [
    1.0 + 0.9 * 0.4 - 0.5,  # t=0: 1 + 0.36 - 0.5 = 0.86
    0.0 + 0.9 * 0.3 - 0.4,  # t=1: 0.27 - 0.4 = -0.13
    2.0 + 0.0 - 0.3,  # t=2: terminal, no bootstrap: 2 - 0.3 = 1.7
    0.0 + 0.9 * 0.1 - 0.2,  # t=3: 0.09 - 0.2 = -0.11
    1.0 + 0.9 * 0.6 - 0.1,  # t=4: bootstrap from last_value: 1 + 0.54 - 0.1 = 1.44
]
# A_t = delta_t + 0.72 * (1 - done_t) * A_{t+1}, from the end
A4 = 1.44
A3 = -0.11 + 0.72 * A4  # -0.11 + 1.0368 = 0.9268
A2 = 1.7  # terminal: A_3 (the next episode) does not flow back
A1 = -0.13 + 0.72 * A2  # -0.13 + 1.224 = 1.094
A0 = 0.86 + 0.72 * A1  # 0.86 + 0.78768 = 1.64768
ADVANTAGES = [A0, A1, A2, A3, A4]
# returns = advantages + values = [2.14768, 1.494, 2.0, 1.1268, 1.54]
RETURNS = [2.14768, 1.494, 2.0, 1.1268, 1.54]


def test_td_residuals_by_hand():
    got = td_residuals(REWARDS, VALUES, DONES, LAST_VALUE, gamma=0.9)
    torch.testing.assert_close(got, torch.tensor(DELTAS, dtype=torch.float64))
    torch.testing.assert_close(got, torch.tensor([0.86, -0.13, 1.7, -0.11, 1.44], dtype=torch.float64))


def test_compute_gae_by_hand():
    adv, ret = compute_gae(REWARDS, VALUES, DONES, LAST_VALUE, gamma=0.9, lam=0.8)
    torch.testing.assert_close(adv, torch.tensor([1.64768, 1.094, 1.7, 0.9268, 1.44], dtype=torch.float64))
    torch.testing.assert_close(adv, torch.tensor(ADVANTAGES, dtype=torch.float64))
    torch.testing.assert_close(ret, torch.tensor(RETURNS, dtype=torch.float64))


def test_discounted_returns_by_hand():
    # G_t = r_t + 0.9 * (1 - done_t) * G_{t+1}, G_5 = 0.6:
    # G4 = 1 + 0.9 * 0.6 = 1.54; G3 = 0.9 * 1.54 = 1.386; G2 = 2 (terminal); G1 = 0.9 * 2 = 1.8; G0 = 1 + 1.62 = 2.62
    got = discounted_returns(REWARDS, DONES, LAST_VALUE, gamma=0.9)
    torch.testing.assert_close(got, torch.tensor([2.62, 1.8, 2.0, 1.386, 1.54], dtype=torch.float64))


def test_dones_as_bool_int_or_float_agree():
    expected = compute_gae(REWARDS, VALUES, DONES, LAST_VALUE, 0.9, 0.8)[0]
    for dones in (DONES.long(), DONES.double(), DONES.float(), DONES.int()):
        torch.testing.assert_close(compute_gae(REWARDS, VALUES, dones, LAST_VALUE, 0.9, 0.8)[0], expected)


def test_float32_in_float32_out():
    adv, ret = compute_gae(REWARDS.float(), VALUES.float(), DONES, LAST_VALUE.float(), 0.9, 0.8)
    assert adv.dtype == ret.dtype == torch.float32
    torch.testing.assert_close(adv, torch.tensor(ADVANTAGES, dtype=torch.float32))


def test_inputs_are_not_modified():
    r, v, d, lv = REWARDS.clone(), VALUES.clone(), DONES.clone(), LAST_VALUE.clone()
    compute_gae(r, v, d, lv, 0.9, 0.8)
    discounted_returns(r, d, lv, 0.9)
    assert torch.equal(r, REWARDS) and torch.equal(v, VALUES) and torch.equal(d, DONES) and torch.equal(lv, LAST_VALUE)


def test_empty_time_axis():
    adv, ret = compute_gae(torch.zeros(2, 0), torch.zeros(2, 0), torch.zeros(2, 0), torch.zeros(2), 0.9, 0.9)
    assert adv.shape == ret.shape == (2, 0)


# ---------------------------------------------------------------------------
# Cross-check: CleanRL's GAE loop (ppo.py), written out
# ---------------------------------------------------------------------------


def cleanrl_gae(rewards, values, dones, next_value, next_done, gamma, gae_lambda):
    """CleanRL's loop, arrays (num_steps, num_envs). Its dones[t] is stored with obs[t]:
    "obs[t] starts a new episode", i.e. the episode ended at step t - 1; next_done belongs to the
    observation after the last step."""
    num_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    lastgaelam = 0
    for t in reversed(range(num_steps)):
        if t == num_steps - 1:
            nextnonterminal = 1.0 - next_done
            nextvalues = next_value
        else:
            nextnonterminal = 1.0 - dones[t + 1]
            nextvalues = values[t + 1]
        delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
        advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
    returns = advantages + values
    return advantages, returns


@settings(max_examples=50, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    num_steps=st.integers(1, 12),
    num_envs=st.integers(1, 4),
    gamma=st.floats(0.0, 1.0),
    lam=st.floats(0.0, 1.0),
)
def test_matches_cleanrl(seed, num_steps, num_envs, gamma, lam):
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(num_steps, num_envs, generator=g, dtype=torch.float64)
    values = torch.randn(num_steps, num_envs, generator=g, dtype=torch.float64)
    ours_dones = (torch.rand(num_steps, num_envs, generator=g) < 0.3).double()  # terminated at step t
    next_value = torch.randn(num_envs, generator=g, dtype=torch.float64)
    # The mapping: CleanRL's dones are ours shifted one step later; its first row comes from the previous
    # rollout (it never affects this rollout's advantages), and its next_done is our last row.
    previous = (torch.rand(num_envs, generator=g) < 0.5).double()
    cleanrl_dones = torch.cat([previous[None], ours_dones[:-1]], dim=0)
    next_done = ours_dones[-1]
    expected_adv, expected_ret = cleanrl_gae(rewards, values, cleanrl_dones, next_value, next_done, gamma, lam)
    # Ours puts time last: (N, T).
    adv, ret = compute_gae(rewards.T, values.T, ours_dones.T, next_value, gamma, lam)
    torch.testing.assert_close(adv.T, expected_adv)
    torch.testing.assert_close(ret.T, expected_ret)


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------


def _random(seed, shape, p_done=0.3):
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(shape, generator=g, dtype=torch.float64)
    values = torch.randn(shape, generator=g, dtype=torch.float64)
    dones = torch.rand(shape, generator=g) < p_done
    last_values = torch.randn(shape[:-1], generator=g, dtype=torch.float64)
    return rewards, values, dones, last_values


shapes = st.tuples(st.integers(1, 3), st.integers(1, 10))


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), shape=shapes, gamma=st.floats(0.0, 1.0))
def test_lambda_zero_gives_td_residuals(seed, shape, gamma):
    rewards, values, dones, last_values = _random(seed, shape)
    adv, _ = compute_gae(rewards, values, dones, last_values, gamma, 0.0)
    torch.testing.assert_close(adv, td_residuals(rewards, values, dones, last_values, gamma))


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), shape=shapes, gamma=st.floats(0.0, 1.0), p_done=st.sampled_from([0.0, 0.3]))
def test_lambda_one_gives_discounted_return_minus_value(seed, shape, gamma, p_done):
    # Without terminals (the textbook statement) and with them (each episode's return).
    rewards, values, dones, last_values = _random(seed, shape, p_done)
    adv, ret = compute_gae(rewards, values, dones, last_values, gamma, 1.0)
    mc = discounted_returns(rewards, dones, last_values, gamma)
    torch.testing.assert_close(adv, mc - values)
    torch.testing.assert_close(ret, mc)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), T=st.integers(1, 10), gamma=st.floats(0.0, 1.0), lam=st.floats(0.0, 1.0))
def test_gae_is_the_discounted_sum_of_residuals(seed, T, gamma, lam):
    # Eq. (16): A_t = sum_l (gamma * lam)^l * delta_{t+l}, when no episode ends inside the rollout.
    rewards, values, _, last_values = _random(seed, (2, T))
    dones = torch.zeros(2, T, dtype=torch.bool)
    deltas = td_residuals(rewards, values, dones, last_values, gamma)
    expected = torch.stack([sum((gamma * lam) ** (k - t) * deltas[:, k] for k in range(t, T)) for t in range(T)], -1)
    torch.testing.assert_close(compute_gae(rewards, values, dones, last_values, gamma, lam)[0], expected)


@settings(max_examples=50, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    T=st.integers(2, 10),
    data=st.data(),
    gamma=st.floats(0.0, 1.0),
    lam=st.floats(0.0, 1.0),
)
def test_terminal_step_blocks_bootstrapping(seed, T, data, gamma, lam):
    k = data.draw(st.integers(0, T - 1), label="terminal step")
    rewards, values, dones, last_values = _random(seed, (T,))
    dones[k] = True
    adv, ret = compute_gae(rewards, values, dones, last_values, gamma, lam)
    # Change everything after step k, and the bootstrap value: nothing at or before k may move.
    g = torch.Generator().manual_seed(seed + 1)
    rewards2, values2, dones2 = rewards.clone(), values.clone(), dones.clone()
    rewards2[k + 1 :] = torch.randn(T - k - 1, generator=g, dtype=torch.float64) * 10
    values2[k + 1 :] = torch.randn(T - k - 1, generator=g, dtype=torch.float64) * 10
    dones2[k + 1 :] = torch.rand(T - k - 1, generator=g) < 0.5
    adv2, ret2 = compute_gae(rewards2, values2, dones2, last_values + 100.0, gamma, lam)
    torch.testing.assert_close(adv2[: k + 1], adv[: k + 1])
    torch.testing.assert_close(ret2[: k + 1], ret[: k + 1])


@settings(max_examples=50, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    shape=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 6)),
    gamma=st.floats(0.0, 1.0),
    lam=st.floats(0.0, 1.0),
)
def test_batch_rows_are_independent_and_dtypes_agree(seed, shape, gamma, lam):
    rewards, values, dones, last_values = _random(seed, shape)
    adv, ret = compute_gae(rewards, values, dones, last_values, gamma, lam)
    torch.testing.assert_close(ret, adv + values)
    for i in range(shape[0]):
        for j in range(shape[1]):
            row = compute_gae(rewards[i, j], values[i, j], dones[i, j], last_values[i, j], gamma, lam)[0]
            torch.testing.assert_close(adv[i, j], row)
    adv32, _ = compute_gae(rewards.float(), values.float(), dones, last_values.float(), gamma, lam)
    torch.testing.assert_close(adv32, adv.float(), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------
# Truncation
# ---------------------------------------------------------------------------


def test_bootstrap_truncated_by_hand():
    rewards = torch.tensor([1.0, 0.0, 2.0])
    truncated = torch.tensor([False, True, False])
    final_values = torch.tensor([float("nan"), 5.0, float("nan")])  # read only where truncated
    # step 1: 0 + 0.9 * 5 = 4.5; the others unchanged (and the NaNs do not leak)
    folded = bootstrap_truncated(rewards, truncated, final_values, 0.9)
    torch.testing.assert_close(folded, torch.tensor([1.0, 4.5, 2.0]))
    assert torch.equal(rewards, torch.tensor([1.0, 0.0, 2.0]))


def test_truncation_mid_rollout_equals_an_episode_that_goes_on():
    # Steps 0-2 belong to an episode cut by a time limit at t=2, whose final observation has value 0.7;
    # steps 3-5 to the next episode. GAE of the first part must be the GAE of steps 0-2 bootstrapped from 0.7.
    rewards, values, _, last_values = _random(7, (6,))
    terminated = torch.zeros(6, dtype=torch.bool)
    truncated = torch.tensor([False, False, True, False, False, False])
    final_values = torch.full((6,), float("nan"), dtype=torch.float64)
    final_values[2] = 0.7
    folded = bootstrap_truncated(rewards, truncated, final_values, 0.9)
    adv, _ = compute_gae(folded, values, terminated | truncated, last_values, 0.9, 0.8)
    first, _ = compute_gae(rewards[:3], values[:3], terminated[:3], torch.tensor(0.7, dtype=torch.float64), 0.9, 0.8)
    second, _ = compute_gae(rewards[3:], values[3:], terminated[3:], last_values, 0.9, 0.8)
    torch.testing.assert_close(adv, torch.cat([first, second]))


def test_truncation_at_the_rollout_end_either_way():
    # Folding into the last reward and marking it done equals passing V(final obs) as last_values.
    rewards, values, dones, _ = _random(8, (2, 5))
    dones[:, -1] = False
    final = torch.tensor([0.3, -1.2], dtype=torch.float64)
    via_last_values = compute_gae(rewards, values, dones, final, 0.99, 0.95)[0]
    truncated = torch.zeros(2, 5, dtype=torch.bool)
    truncated[:, -1] = True
    folded = bootstrap_truncated(rewards, truncated, final[:, None].expand(2, 5), 0.99)
    via_fold = compute_gae(folded, values, dones | truncated, torch.zeros(2, dtype=torch.float64), 0.99, 0.95)[0]
    torch.testing.assert_close(via_fold, via_last_values)


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

R, V, D, L = torch.zeros(2, 4), torch.zeros(2, 4), torch.zeros(2, 4, dtype=torch.bool), torch.zeros(2)


@pytest.mark.parametrize(
    "kwargs, argname",
    [
        (dict(rewards=torch.zeros(())), "rewards"),
        (dict(rewards=[0.0, 1.0]), "rewards"),
        (dict(rewards=torch.zeros(2, 4, dtype=torch.long)), "rewards"),
        (dict(values=torch.zeros(2, 3)), "values"),
        (dict(dones=torch.zeros(4)), "dones"),
        (dict(dones=torch.full((2, 4), 2.0)), "dones"),
        (dict(last_values=torch.zeros(2, 4)), "last_values"),
        (dict(last_values=torch.zeros(())), "last_values"),
        (dict(gamma=1.5), "gamma"),
        (dict(gamma=-0.1), "gamma"),
        (dict(lam=1.01), "lam"),
        (dict(lam=-1.0), "lam"),
        (dict(lam="0.9"), "lam"),
    ],
)
def test_compute_gae_bad_input(kwargs, argname):
    args = dict(rewards=R, values=V, dones=D, last_values=L, gamma=0.9, lam=0.9) | kwargs
    with pytest.raises(ValueError, match=argname):
        compute_gae(**args)


@pytest.mark.parametrize(
    "kwargs, argname",
    [
        (dict(values=torch.zeros(4)), "values"),
        (dict(dones=torch.zeros(2, 5)), "dones"),
        (dict(last_values=torch.zeros(4)), "last_values"),
        (dict(gamma=2.0), "gamma"),
    ],
)
def test_td_residuals_bad_input(kwargs, argname):
    args = dict(rewards=R, values=V, dones=D, last_values=L, gamma=0.9) | kwargs
    with pytest.raises(ValueError, match=argname):
        td_residuals(**args)


@pytest.mark.parametrize(
    "kwargs, argname",
    [
        (dict(rewards=torch.zeros(())), "rewards"),
        (dict(dones=torch.zeros(3)), "dones"),
        (dict(last_values=torch.zeros(3)), "last_values"),
        (dict(gamma=1.1), "gamma"),
    ],
)
def test_discounted_returns_bad_input(kwargs, argname):
    args = dict(rewards=R, dones=D, last_values=L, gamma=0.9) | kwargs
    with pytest.raises(ValueError, match=argname):
        discounted_returns(**args)


@pytest.mark.parametrize(
    "kwargs, argname",
    [
        (dict(rewards=torch.zeros(())), "rewards"),
        (dict(truncated=torch.zeros(2, 3)), "truncated"),
        (dict(truncated=torch.full((2, 4), 0.5)), "truncated"),
        (dict(final_values=torch.zeros(2)), "final_values"),
        (dict(gamma=-0.5), "gamma"),
    ],
)
def test_bootstrap_truncated_bad_input(kwargs, argname):
    args = dict(rewards=R, truncated=D, final_values=V, gamma=0.9) | kwargs
    with pytest.raises(ValueError, match=argname):
        bootstrap_truncated(**args)


# ---------------------------------------------------------------------------
# The checks themselves
# ---------------------------------------------------------------------------


@pytest.mark.usefixtures("trusting")
def test_checks_accept_the_reference(capsys):
    assert gae_checks.check_compute_gae(compute_gae) is True
    assert gae_checks.check_td_residuals(td_residuals) is True
    assert capsys.readouterr().out.count("\u2714") == 2


def test_checks_let_not_implemented_through():
    def stub(*args, **kwargs):
        raise NotImplementedError("write compute_gae")

    with pytest.raises(NotImplementedError):
        gae_checks.check_compute_gae(stub)
    with pytest.raises(NotImplementedError):
        gae_checks.check_td_residuals(stub)


@pytest.mark.usefixtures("trusting")
def test_check_names_a_classic_mistake():
    def lam_only(rewards, values, dones, last_values, gamma, lam):
        deltas = td_residuals(rewards, values, dones, last_values, gamma)
        adv = torch.zeros_like(deltas)
        running = torch.zeros_like(last_values)
        for t in reversed(range(deltas.shape[-1])):
            running = deltas[..., t] + lam * (1 - dones[..., t].to(deltas.dtype)) * running
            adv[..., t] = running
        return adv, adv + values

    with pytest.raises(AssertionError, match="gamma \\* lam"):
        gae_checks.check_compute_gae(lam_only)
