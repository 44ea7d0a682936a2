"""Tests of course_lib.lectures.chain (the chain with known values) and of chapter 04's hand-table check (gae)."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import gae
from course_lib.checks import gae as gae_checks
from course_lib.lectures import chain as C

chains = st.builds(
    C.Chain,
    n_states=st.integers(1, 8),
    p_right=st.floats(0.0, 1.0),
    slip=st.floats(0.0, 0.5),
    reward_left=st.floats(-2.0, 2.0),
    reward_right=st.floats(-2.0, 2.0),
)
gammas = st.floats(0.0, 1.0)


@pytest.fixture(scope="module")
def batch():
    """One batch of 1000 episodes of the default chain, sampled once for the module."""
    return C.sample_episodes(C.Chain(), 1000, seed=0)


# ---------------------------------------------------------------------------
# The exact solution
# ---------------------------------------------------------------------------


def test_dynamics_by_hand():
    # 3 states, slip 0.1, rewards -1 (left end) and +1 (right end).
    ch = C.Chain(n_states=3, p_right=0.5, slip=0.1, reward_left=-1.0, reward_right=1.0)
    P, r = C.dynamics(ch)
    # From state 0, LEFT steps off the left end with 0.9 (reward -1) and slips to state 1 with 0.1.
    assert P[0, C.LEFT].tolist() == pytest.approx([0.0, 0.1, 0.0])
    assert r[0, C.LEFT].item() == pytest.approx(-0.9)
    # From state 0, RIGHT reaches state 1 with 0.9 and slips off the left end with 0.1: r = 0.1 * -1.
    assert P[0, C.RIGHT].tolist() == pytest.approx([0.0, 0.9, 0.0])
    assert r[0, C.RIGHT].item() == pytest.approx(-0.1)
    # The middle state never ends the episode in one step.
    assert P[1].sum(-1).tolist() == pytest.approx([1.0, 1.0])
    assert r[1].tolist() == pytest.approx([0.0, 0.0])


def test_values_of_the_symmetric_walk_by_hand():
    # gamma = 1, no slip, a fair coin, -1 / +1 at the ends: the gambler's ruin. Starting from s, the walk
    # leaves on the right with probability (s + 1) / (n + 1), so V(s) = 2 (s + 1) / (n + 1) - 1:
    # for n = 5, V = [-2/3, -1/3, 0, 1/3, 2/3].
    ch = C.Chain(n_states=5, p_right=0.5, slip=0.0, reward_left=-1.0, reward_right=1.0)
    V = C.true_values(ch, gamma=1.0)
    assert V.tolist() == pytest.approx([-2 / 3, -1 / 3, 0.0, 1 / 3, 2 / 3])
    # Q(s, right) = V(s + 1) (1 past the right end), so A(s, right) = 1/3 everywhere, A(s, left) = -1/3.
    A = C.true_advantages(ch, gamma=1.0)
    assert A[:, C.RIGHT].tolist() == pytest.approx([1 / 3] * 5)
    assert A[:, C.LEFT].tolist() == pytest.approx([-1 / 3] * 5)


def test_one_state_chain_by_hand():
    # One state, always right, no slip: one step, reward 2, then the end. V = Q(right) = 2, Q(left) = -1.
    ch = C.Chain(n_states=1, p_right=1.0, slip=0.0, reward_left=-1.0, reward_right=2.0)
    assert C.true_values(ch, 0.9).tolist() == pytest.approx([2.0])
    assert C.true_q_values(ch, 0.9)[0].tolist() == pytest.approx([-1.0, 2.0])


@settings(max_examples=50, deadline=None)
@given(ch=chains, gamma=gammas)
def test_values_satisfy_the_bellman_equation(ch, gamma):
    P, r = C.dynamics(ch)
    pi = C.policy_probs(ch)
    V = C.true_values(ch, gamma)
    # V(s) = sum_a pi(a|s) [r(s, a) + gamma * sum_s' P(s'|s, a) V(s')]
    bellman = (pi * (r + gamma * torch.einsum("sat,t->sa", P, V))).sum(-1)
    torch.testing.assert_close(V, bellman, rtol=1e-9, atol=1e-9)
    # and Q is one step of it
    torch.testing.assert_close(C.true_q_values(ch, gamma), r + gamma * torch.einsum("sat,t->sa", P, V))


@settings(max_examples=50, deadline=None)
@given(ch=chains, gamma=gammas)
def test_true_advantages_average_to_zero_under_the_policy(ch, gamma):
    A = C.true_advantages(ch, gamma)  # (S, 2)
    torch.testing.assert_close(
        (C.policy_probs(ch) * A).sum(-1), torch.zeros(ch.n_states, dtype=torch.float64), rtol=0, atol=1e-9
    )


@settings(max_examples=50, deadline=None)
@given(ch=chains, gamma=gammas, noise=st.floats(0.0, 1.0), seed=st.integers(0, 5))
def test_expected_gae_at_the_two_ends(ch, gamma, noise, seed):
    V_hat = C.imperfect_critic(ch, gamma, noise=noise, seed=seed)
    P, r = C.dynamics(ch)
    # lam = 1: the Monte-Carlo return has mean Q whatever the critic, so the mean estimate is Q - V_hat.
    torch.testing.assert_close(
        C.expected_gae(ch, gamma, 1.0, V_hat), C.true_q_values(ch, gamma) - V_hat[:, None], rtol=1e-7, atol=1e-7
    )
    # lam = 0: the mean TD residual, r + gamma * E[V_hat(s')] - V_hat(s).
    torch.testing.assert_close(
        C.expected_gae(ch, gamma, 0.0, V_hat), r + gamma * torch.einsum("sat,t->sa", P, V_hat) - V_hat[:, None]
    )


def test_imperfect_critic_is_the_truth_plus_a_fixed_perturbation():
    ch = C.Chain()
    V = C.true_values(ch, 0.9)
    assert torch.equal(C.imperfect_critic(ch, 0.9, noise=0.0), V)
    gap_a = C.imperfect_critic(ch, 0.9, noise=0.3, seed=1) - V
    gap_b = C.imperfect_critic(ch, 0.6, noise=0.3, seed=1) - C.true_values(ch, 0.6)
    torch.testing.assert_close(gap_a, gap_b)  # the same perturbation for every gamma
    assert not torch.allclose(gap_a, C.imperfect_critic(ch, 0.9, noise=0.3, seed=2) - V)


# ---------------------------------------------------------------------------
# Sampling
# ---------------------------------------------------------------------------


def test_episodes_are_well_formed(batch):
    S = C.Chain().n_states
    mask = batch.mask
    B, T = batch.states.shape
    assert batch.n_states == S and batch.rewards.dtype == torch.float64
    # each episode ends exactly once, terminated or truncated, at its last real step
    ends = batch.terminated | batch.truncated
    assert ends.sum(1).tolist() == [1] * B
    lengths = mask.sum(1)
    assert ends[torch.arange(B), lengths - 1].all()
    # real steps come first, padding after; the next state of a step is the state of the next step
    assert torch.equal(mask, torch.arange(T) < lengths[:, None])
    assert torch.equal(batch.next_states[:, :-1][mask[:, 1:]], batch.states[:, 1:][mask[:, 1:]])
    # moves are +-1; rewards only when stepping off an end; padding holds state S, reward 0
    steps = (batch.next_states - batch.states)[mask & ~batch.terminated]
    assert set(steps.abs().tolist()) == {1}
    assert batch.rewards[~batch.terminated].abs().sum() == 0
    assert set(batch.rewards[batch.terminated].tolist()) <= {-1.0, 1.0}
    assert (batch.states[~mask] == S).all() and (batch.next_states[batch.terminated] == S).all()
    assert batch.states[:, 0].eq(C.Chain().start).all()


def test_sampling_is_seeded():
    a = C.sample_episodes(C.Chain(), 50, seed=3)
    b = C.sample_episodes(C.Chain(), 50, seed=3)
    c = C.sample_episodes(C.Chain(), 50, seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a[:-1], b[:-1]))
    assert not torch.equal(a.rewards.sum(1), c.rewards.sum(1))


def test_time_limit_marks_truncation_not_termination():
    ep = C.sample_episodes(C.Chain(), 300, seed=0, max_steps=5)
    assert ep.states.shape[1] == 5
    cut = ep.truncated[:, -1]
    assert cut.any() and (~cut).any()
    assert not ep.truncated[:, :-1].any()
    assert not (ep.truncated & ep.terminated).any()
    # a cut episode stopped in a real state, which has a value
    assert (ep.next_states[cut, -1] < ep.n_states).all()


@pytest.mark.parametrize("start", [0, 3, 6])
def test_monte_carlo_returns_approach_the_true_values(start):
    ch, gamma = C.Chain(), 0.9
    ep = C.sample_episodes(ch, 4000, seed=start, start=start)
    G = gae.discounted_returns(ep.rewards, ep.terminated | ~ep.mask, torch.zeros(4000, dtype=torch.float64), gamma)
    G0 = G[:, 0]  # (B,): the return of each episode from its start
    stderr = G0.std() / 4000**0.5
    assert abs(G0.mean() - C.true_values(ch, gamma)[start]) < 4 * stderr + 1e-3


# ---------------------------------------------------------------------------
# GAE on the chain: the two ends, truncation, bias and variance
# ---------------------------------------------------------------------------


def test_lam_0_is_the_td_residual_and_lam_1_the_monte_carlo_return_minus_value(batch):
    ch, gamma = C.Chain(), 0.95
    V_hat = C.imperfect_critic(ch, gamma)
    v = torch.cat([V_hat, torch.zeros(1, dtype=torch.float64)])
    values, dones = v[batch.states], batch.terminated | ~batch.mask
    last = torch.zeros(batch.states.shape[0], dtype=torch.float64)
    torch.testing.assert_close(
        C.chain_gae(batch, V_hat, gamma, 0.0), gae.td_residuals(batch.rewards, values, dones, last, gamma)
    )
    torch.testing.assert_close(
        C.chain_gae(batch, V_hat, gamma, 1.0), gae.discounted_returns(batch.rewards, dones, last, gamma) - values
    )


def test_float32_critic_is_accepted(batch):
    ch = C.Chain()
    V_hat = C.imperfect_critic(ch, 0.9)
    torch.testing.assert_close(
        C.chain_gae(batch, V_hat.float(), 0.9, 0.5), C.chain_gae(batch, V_hat, 0.9, 0.5), rtol=1e-5, atol=1e-6
    )


def test_truncation_modes_differ_by_the_discounted_bootstrap():
    ch, gamma, lam = C.Chain(), 0.9, 0.8
    ep = C.sample_episodes(ch, 200, seed=1, max_steps=6)
    V = C.true_values(ch, gamma)
    right = C.chain_gae(ep, V, gamma, lam, truncation="bootstrap")
    wrong = C.chain_gae(ep, V, gamma, lam, truncation="terminal")
    # Treating the cut as terminal drops gamma * V(s_T) from the last delta; the recursion carries
    # (gamma * lam)^k of it to the step k before the cut. Episodes that ended on their own are untouched.
    cut = ep.truncated[:, -1]
    k = torch.arange(5, -1, -1, dtype=torch.float64)  # steps before the cut, for t = 0 .. 5
    expected = -gamma * V[ep.next_states[cut, -1]][:, None] * (gamma * lam) ** k
    torch.testing.assert_close(wrong[cut] - right[cut], expected)
    torch.testing.assert_close(wrong[~cut], right[~cut])


def test_bootstrap_is_unbiased_at_the_cut_and_terminal_is_not():
    # With the exact critic, the estimate of the cut step is unbiased only with the bootstrap.
    ch, gamma, lam = C.Chain(), 0.95, 0.9
    ep = C.sample_episodes(ch, 4000, seed=2, max_steps=8)
    V = C.true_values(ch, gamma)
    cut = ep.truncated[:, -1]
    right = C.gae_errors(ch, ep, V, gamma, lam, truncation="bootstrap")[cut, -1]
    wrong = C.gae_errors(ch, ep, V, gamma, lam, truncation="terminal")[cut, -1]
    assert abs(right.mean()) < 4 * right.std() / cut.sum() ** 0.5
    torch.testing.assert_close(wrong.mean(), right.mean() - gamma * V[ep.next_states[cut, -1]].mean())


def test_bias_is_zero_at_lam_1_and_not_at_lam_0(batch):
    ch, gamma = C.Chain(), 0.95
    V_hat = C.imperfect_critic(ch, gamma, noise=0.3)
    bv = C.bias_variance(ch, batch, V_hat, gamma, [0.0, 0.5, 1.0])
    # exact: no bias at all with the Monte-Carlo return, a clear one with the one-step residual
    assert bv["exact_bias2"][2] < 1e-20
    assert bv["exact_bias2"][0] > 0.05
    # sampled: the same picture, up to the sampling noise of the per-pair means
    assert bv["bias2"][2] < 0.05 * bv["bias2"][0]
    # and the other side of the trade-off: the variance grows with lam
    assert bv["variance"][2] > 3 * bv["variance"][0]
    # MSE = bias^2 + variance, exactly
    torch.testing.assert_close(bv["mse"], bv["bias2"] + bv["variance"])


def test_sampled_bias_converges_to_the_exact_bias(batch):
    ch, gamma, lam = C.Chain(), 0.9, 0.5
    V_hat = C.imperfect_critic(ch, gamma, noise=0.3, seed=1)
    stats = C.gae_statistics(ch, batch, V_hat, gamma, lam)
    exact = C.expected_gae(ch, gamma, lam, V_hat)  # (S, 2)
    seen = stats["count"] > 100
    stderr = stats["std"][seen] / stats["count"][seen].sqrt()
    assert ((stats["mean"][seen] - exact[seen]).abs() < 5 * stderr + 1e-9).all()


def test_perfect_critic_at_lam_0_has_no_bias(batch):
    ch = C.Chain()
    V = C.true_values(ch, 0.9)
    stats = C.gae_statistics(ch, batch, V, 0.9, 0.0)
    torch.testing.assert_close(stats["target"], C.true_advantages(ch, 0.9))
    assert stats["bias2"] < 1e-3
    torch.testing.assert_close(C.expected_gae(ch, 0.9, 0.0, V), C.true_advantages(ch, 0.9))


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, argname",
    [
        ({"n_states": 0}, "n_states"),
        ({"n_states": 2.5}, "n_states"),
        ({"n_states": True}, "n_states"),
        ({"p_right": 1.5}, "p_right"),
        ({"p_right": -0.1}, "p_right"),
        ({"slip": 1.0}, "slip"),
        ({"slip": -0.2}, "slip"),
        ({"reward_left": "one"}, "reward_left"),
        ({"reward_right": None}, "reward_right"),
    ],
)
def test_bad_chain(kwargs, argname):
    with pytest.raises(ValueError, match=argname):
        C.Chain(**kwargs)


def test_bad_arguments(batch):
    ch, V = C.Chain(), C.true_values(C.Chain(), 0.9)
    bad = [
        (lambda: C.true_values(ch, 1.5), "gamma"),
        (lambda: C.true_advantages(ch, -0.1), "gamma"),
        (lambda: C.imperfect_critic(ch, 0.9, noise=-1.0), "noise"),
        (lambda: C.expected_gae(ch, 0.9, 1.2, V), "lam"),
        (lambda: C.expected_gae(ch, 0.9, 0.5, V[:3]), "values"),
        (lambda: C.expected_gae(ch, 0.9, 0.5, V.tolist()), "values"),
        (lambda: C.sample_episodes(ch, 0), "n_episodes"),
        (lambda: C.sample_episodes(ch, 10, max_steps=0), "max_steps"),
        (lambda: C.sample_episodes(ch, 10, start=7), "start"),
        (lambda: C.sample_episodes(ch, 10, seed=0.5), "seed"),
        (lambda: C.chain_gae(batch, V, 0.9, 0.5, truncation="ignore"), "truncation"),
        (lambda: C.chain_gae(batch, V[:-1], 0.9, 0.5), "values"),
        (lambda: C.chain_gae(batch, V, 0.9, -0.5), "lam"),
        (lambda: C.chain_gae(batch, V, 2.0, 0.5), "gamma"),
        (lambda: C.gae_statistics(ch, batch, V[None], 0.9, 0.5), "values"),
        (lambda: C.bias_variance(ch, batch, V, 0.9, [0.0, 1.5]), "lam"),
    ]
    for call, argname in bad:
        with pytest.raises(ValueError, match=argname):
            call()


# ---------------------------------------------------------------------------
# course_lib.checks.gae_checks.check_gae_table: the hand-computed table of the exercise
# ---------------------------------------------------------------------------

# The episode: r = [1, 0, 2, 0, 1], V = [2, 1.5, 1, 1, 0.5], done at t = 2, V(s_5) = 1, gamma = 0.9, lam = 0.8.
#   delta_0 = 1 + 0.9 * 1.5 - 2   =  0.35          A_4 = 1.4
#   delta_1 = 0 + 0.9 * 1.0 - 1.5 = -0.6           A_3 = -0.55 + 0.72 * 1.4 = 0.458
#   delta_2 = 2 - 1.0 (terminal)  =  1.0           A_2 = 1.0 (terminal: nothing flows back)
#   delta_3 = 0 + 0.9 * 0.5 - 1.0 = -0.55          A_1 = -0.6 + 0.72 * 1.0 = 0.12
#   delta_4 = 1 + 0.9 * 1.0 - 0.5 =  1.4           A_0 = 0.35 + 0.72 * 0.12 = 0.4364
DELTAS = [0.35, -0.6, 1.0, -0.55, 1.4]
ADVANTAGES = [0.4364, 0.12, 1.0, 0.458, 1.4]


def table(deltas=DELTAS, advantages=ADVANTAGES):
    def fn():
        return list(deltas), list(advantages)

    return fn


def _rejects(fn) -> str:
    with contextlib.redirect_stdout(io.StringIO()) as printed, pytest.raises(AssertionError) as error:
        gae_checks.check_gae_table(fn)
    assert "\u2714" not in printed.getvalue()
    return str(error.value)


def test_hand_values_agree_with_the_library():
    ep = gae.gae_table_episode()
    deltas = gae.td_residuals(ep["rewards"], ep["values"], ep["dones"], ep["last_values"], ep["gamma"])
    adv, _ = gae.compute_gae(**ep)
    torch.testing.assert_close(deltas, torch.tensor(DELTAS, dtype=torch.float64))
    torch.testing.assert_close(adv, torch.tensor(ADVANTAGES, dtype=torch.float64))


@pytest.mark.parametrize(
    "fn",
    [
        table(),
        table(advantages=[0.436, 0.12, 1.0, 0.458, 1.4]),  # rounded to 3 decimals
        lambda: (torch.tensor(DELTAS), torch.tensor(ADVANTAGES)),  # float32 tensors
        lambda: (tuple(DELTAS), [1.0 * a for a in ADVANTAGES]),
    ],
)
def test_table_check_accepts_right_tables(fn, capsys):
    assert gae_checks.check_gae_table(fn) is True
    assert "\u2714 gae_table" in capsys.readouterr().out


# (wrong deltas, wrong advantages, a phrase the message must contain)
TABLE_MUTANTS = [
    ([0.35, -0.6, 1.9, -0.55, 1.4], ADVANTAGES, "deltas[2] = 1.9: the episode terminates at t = 2"),
    ([0.35, -0.6, 1.0, -0.55, 0.5], ADVANTAGES, "deltas[4] = 0.5: the last step bootstraps from last_values"),
    ([2.35, 0.9, 2.0, 0.45, 1.9], ADVANTAGES, "forgot to subtract V(s_0)"),
    ([0.5, -0.5, 1.0, -0.5, 1.5], ADVANTAGES, "gamma is missing"),
    ([0.8, -0.15, 1.0, -0.1, 0.95], ADVANTAGES, "is the value of the next state"),
    ([-0.35, 0.6, -1.0, 0.55, -1.4], ADVANTAGES, "the sign is flipped"),
    ([0.35, -1.5, 1.9, -0.55, 1.4], ADVANTAGES, "deltas[1] = -1.5: step 1 is cut by its own done flag"),
    # through the terminal: A_2 = 1 + 0.72 * 0.458 = 1.32976, then A_1 = 0.357427, A_0 = 0.607347
    (DELTAS, [0.607347, 0.357427, 1.32976, 0.458, 1.4], "advantages[2] = 1.33 is wrong"),
    (DELTAS, [0.35 + 0.8 * 0.2, -0.6 + 0.8 * 1.0, 1.0, -0.55 + 0.8 * 1.4, 1.4], "by lam alone"),
    (DELTAS, [0.35 + 0.9 * 0.3, -0.6 + 0.9 * 1.0, 1.0, -0.55 + 0.9 * 1.4, 1.4], "by gamma alone"),
    (DELTAS, [0.35 + 0.4, -0.6 + 1.0, 1.0, -0.55 + 1.4, 1.4], "you forgot gamma * lam"),
    (DELTAS, [0.35 + 0.648 * 0.048, -0.6 + 0.648, 1.0, -0.55 + 0.648 * 1.4, 1.4], "gamma is applied twice"),
    (DELTAS, DELTAS, "advantages[3] = -0.55 is wrong"),
    (DELTAS, [0.4364, 0.12, 1.0, 0.458, 2.12], "the recursion starts from A_5 = 0"),
    (DELTAS, [a + v for a, v in zip(ADVANTAGES, [2.0, 1.5, 1.0, 1.0, 0.5])], "that is the return A_4 + V(s_4)"),
    (DELTAS, [0.35, -0.6 + 0.72 * 0.35, 1.0, -0.55, 1.4 + 0.72 * -0.55], "the recursion runs backwards"),
    (DELTAS, [0.4364, -0.6, 1.0, 0.458, 1.4], "advantages[1] = -0.6 is wrong"),
    (DELTAS, [0.4364, 0.12, 1.0, 0.458, 1.3], "off by more than 0.001"),
]


@pytest.mark.parametrize("deltas, advantages, phrase", TABLE_MUTANTS)
def test_table_check_names_the_wrong_entry_and_the_mistake(deltas, advantages, phrase):
    assert phrase in _rejects(table(deltas, advantages))


def test_table_check_reports_every_wrong_delta():
    message = _rejects(table([0.35, -0.6, 1.9, -0.55, 0.5]))
    assert "2 of the 5 deltas are wrong" in message and "deltas[2]" in message and "deltas[4]" in message


@pytest.mark.parametrize(
    "fn, phrase",
    [
        (lambda: None, "forget `return deltas, advantages`"),
        (lambda: DELTAS, "should return two lists"),
        (lambda: (DELTAS[:4], ADVANTAGES), "deltas should hold 5 numbers"),
        (lambda: (DELTAS, [0.4364, 0.12, None, 0.458, 1.4]), "advantages[2] should be a number"),
        (lambda: (DELTAS, [0.4364, 0.12, ..., 0.458, 1.4]), "advantages[2] should be a number"),
        (lambda: (DELTAS, 1.0), "advantages should be a list of 5 numbers"),
    ],
)
def test_table_check_explains_a_malformed_answer(fn, phrase):
    assert phrase in _rejects(fn)


def test_table_check_lets_an_untouched_stub_through():
    def stub():
        raise NotImplementedError("Exercise gae_table: write your solution here")

    with pytest.raises(NotImplementedError):
        gae_checks.check_gae_table(stub)


def test_linear_solve_agrees_with_iterative_policy_evaluation():
    # The textbook's other route to V (Sutton & Barto, section 4.1): sweep V <- r_pi + gamma * P_pi V to a fixed point.
    ch, gamma = C.Chain(n_states=5, p_right=0.6, slip=0.2), 0.9
    P, r = C.dynamics(ch)
    pi = C.policy_probs(ch)
    V = torch.zeros(5, dtype=torch.float64)
    for _ in range(500):  # the error shrinks by gamma per sweep: 0.9^500 ~ 1e-23
        V = (pi * (r + gamma * torch.einsum("sat,t->sa", P, V))).sum(-1)
    torch.testing.assert_close(C.true_values(ch, gamma), V)
