"""Tests for course_lib.lectures.variance: per-sample gradients, the bandit, optimal, learned and group baselines."""

import math

import numpy as np
import pytest
import torch
from einops import repeat
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.baselines import gradient_variance
from course_lib.lectures import variance
from course_lib.lectures.variance import (
    ContextualBandit,
    bandit_exact_gradient,
    bandit_outcomes,
    bandit_scores,
    bandit_values,
    baselined_estimates,
    exact_moments,
    fit_linear_value,
    group_baseline,
    group_gradient_estimates,
    group_variance_table,
    linear_value,
    optimal_baseline,
    per_sample_grads,
    random_bandit,
    sample_groups,
    two_state_bandit,
)

SETTINGS = settings(max_examples=50, deadline=None)


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_thread):
    """Tiny tensors: one torch thread (tests/conftest.py)."""


def _random_problem(seed, num_states=3, num_actions=4, dtype=torch.float64):
    bandit = random_bandit(num_states=num_states, num_actions=num_actions, num_features=2, seed=seed)
    logits = torch.randn(num_states, num_actions, generator=torch.Generator().manual_seed(seed + 100), dtype=dtype)
    return bandit, logits


def _flat_outcomes(bandit, logits):
    out = bandit_outcomes(bandit, logits)
    return (out["probs"].flatten(), out["rewards"].flatten(), out["scores"].flatten(0, 1), out["states"].flatten(), out)


# ---------------------------------------------------------------------------
# per_sample_grads: each row is autograd's gradient of that sample alone
# ---------------------------------------------------------------------------


class TinyPolicy(torch.nn.Module):
    """A linear softmax policy over 3 actions from 2 features, with a bias (9 parameters)."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.weight = torch.nn.Parameter(torch.randn(2, 3, generator=g, dtype=torch.float64))
        self.bias = torch.nn.Parameter(torch.randn(3, generator=g, dtype=torch.float64))

    def logp(self, x, actions):
        return torch.log_softmax(x @ self.weight + self.bias, -1).gather(-1, actions[:, None])[:, 0]


@pytest.mark.parametrize("vectorize", [True, False])
def test_per_sample_grads_match_autograd_on_each_sample(vectorize):
    policy = TinyPolicy()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(7, 2, generator=g, dtype=torch.float64)
    actions = torch.randint(0, 3, (7,), generator=g)
    rows = per_sample_grads(policy.logp(x, actions), list(policy.parameters()), vectorize=vectorize)
    assert rows.shape == (7, 2 * 3 + 3)
    for i in range(7):
        # The oracle: a fresh forward pass on sample i alone, and backward.
        policy.zero_grad()
        policy.logp(x[i : i + 1], actions[i : i + 1]).sum().backward()
        expected = torch.cat([policy.weight.grad.flatten(), policy.bias.grad.flatten()])
        torch.testing.assert_close(rows[i], expected)


def test_per_sample_grads_on_the_sorting_policy():
    from course_lib.models import SortingPolicy, sample_responses
    from course_lib.policy_gradient import gather_log_probs
    from course_lib.tasks import sorting_prompts

    model = SortingPolicy(5, 4, 3, 3, generator=torch.Generator().manual_seed(0)).double()
    prompts = sorting_prompts()
    responses = sample_responses(model, prompts, 2, generator=torch.Generator().manual_seed(1))  # (3, 2, 3)
    logp = gather_log_probs(repeat(model(prompts), "B T V -> B G T V", G=2), responses).sum(-1)  # (3, 2)
    rows = per_sample_grads(logp.flatten(), list(model.parameters()))
    for i, (b, g) in enumerate([(b, g) for b in range(3) for g in range(2)]):
        model.zero_grad()
        gather_log_probs(model(prompts[b : b + 1]), responses[b : b + 1, g]).sum().backward()
        torch.testing.assert_close(rows[i], torch.cat([p.grad.flatten() for p in model.parameters()]))
    # The batched and the looped paths agree, and logp can be used twice (the graph is kept).
    torch.testing.assert_close(per_sample_grads(logp.flatten(), list(model.parameters()), vectorize=False), rows)


def test_per_sample_grads_of_an_unused_parameter_are_zero():
    w = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    unused = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    logp = torch.stack([w[0] * 2.0, w[1] ** 2])  # d/dw: (2, 0) and (0, 2 * w1 = 4)
    rows = per_sample_grads(logp, [w, unused])
    torch.testing.assert_close(rows, torch.tensor([[2.0, 0, 0, 0, 0], [0, 4.0, 0, 0, 0]], dtype=torch.float64))


# ---------------------------------------------------------------------------
# The bandit: closed-form scores and exact gradient against autograd
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bandit_scores_match_autograd(dtype):
    _, logits = _random_problem(0, dtype=dtype)
    logits = logits.requires_grad_()
    states = torch.tensor([0, 2, 1, 2, 0])
    actions = torch.tensor([3, 0, 1, 1, 2])
    logp = torch.log_softmax(logits, -1)[states, actions]  # (5,)
    expected = per_sample_grads(logp, [logits])
    got = bandit_scores(logits, states, actions)
    assert got.dtype == dtype
    torch.testing.assert_close(got, expected)


def test_bandit_scores_hand_computed():
    # Uniform policy over K = 2 actions in S = 2 states: pi = (1/2, 1/2).
    # Action 0 in state 1: onehot(0) - pi = (1/2, -1/2) in row 1, zeros in row 0.
    scores = bandit_scores(torch.zeros(2, 2), torch.tensor([1]), torch.tensor([0]))
    torch.testing.assert_close(scores, torch.tensor([[0.0, 0.0, 0.5, -0.5]]))


def test_bandit_exact_gradient_matches_autograd_of_the_enumerated_objective():
    bandit, logits = _random_problem(3)
    logits = logits.requires_grad_()
    J = (bandit.state_probs[:, None] * torch.softmax(logits, -1) * bandit.rewards).sum()
    (expected,) = torch.autograd.grad(J, logits)
    torch.testing.assert_close(bandit_exact_gradient(bandit, logits), expected.flatten())


def test_two_state_example_exact_variances_hand_computed():
    # Uniform policy, each (s, a) with probability 1/4; the score has |s|^2 = 1/4 + 1/4 = 1/2.
    # Exact gradient: p(s) pi(a|s) (R - V(s)) = 1/4 * (+1, -1, -1, +1) = (0.25, -0.25, -0.25, 0.25).
    # No baseline: E|g|^2 = 1/4 * (121 + 81 + 0 + 4) * 1/2 = 25.75; minus |E g|^2 = 4 * 0.0625 = 0.25 -> 25.5.
    # b = 10, 1: every |g|^2 = 1 * 1/2, so E|g|^2 = 0.5; minus 0.25 -> 0.25.
    bandit = two_state_bandit()
    probs, rewards, scores, states, _ = _flat_outcomes(bandit, torch.zeros(2, 2, dtype=torch.float64))
    mean, var_none = exact_moments(probs, baselined_estimates(rewards, scores, torch.zeros_like(rewards)))
    torch.testing.assert_close(mean, torch.tensor([0.25, -0.25, -0.25, 0.25], dtype=torch.float64))
    assert var_none == pytest.approx(25.5)
    b = torch.tensor([10.0, 1.0], dtype=torch.float64)[states]
    assert exact_moments(probs, baselined_estimates(rewards, scores, b))[1] == pytest.approx(0.25)


def test_sample_groups_shapes_and_frequencies():
    bandit = two_state_bandit()
    logits = torch.tensor([[math.log(3.0), 0.0], [0.0, 0.0]], dtype=torch.float64)  # pi(a1 | s1) = 3/4
    states, actions, rewards = sample_groups(bandit, logits, 4000, 3, generator=torch.Generator().manual_seed(0))
    assert states.shape == (4000,) and actions.shape == rewards.shape == (4000, 3)
    torch.testing.assert_close(rewards, bandit.rewards[states[:, None], actions])
    in_s1 = actions[states == 0]
    assert (in_s1 == 0).double().mean().item() == pytest.approx(0.75, abs=0.02)
    assert (states == 0).double().mean().item() == pytest.approx(0.5, abs=0.02)


# ---------------------------------------------------------------------------
# Unbiasedness: a state-only baseline changes nothing in expectation; an action-dependent one does
# ---------------------------------------------------------------------------


@SETTINGS
@given(seed=st.integers(0, 10_000), level=st.floats(-100.0, 100.0))
def test_state_only_baselines_leave_the_exact_gradient_unchanged(seed, level):
    bandit, logits = _random_problem(seed)
    probs, rewards, scores, states, _ = _flat_outcomes(bandit, logits)
    per_state = level + torch.randn(
        bandit.num_states, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )
    mean, _ = exact_moments(probs, baselined_estimates(rewards, scores, per_state[states]))
    torch.testing.assert_close(mean, bandit_exact_gradient(bandit, logits), atol=1e-10, rtol=1e-8)


def test_state_only_baselines_unbiased_by_sampling():
    bandit, logits = _random_problem(7)
    exact = bandit_exact_gradient(bandit, logits)
    states, actions, rewards = sample_groups(bandit, logits, 50_000, 1, generator=torch.Generator().manual_seed(8))
    scores = bandit_scores(logits, states, actions[:, 0])
    for per_state in (torch.zeros(3), torch.full((3,), 100.0), bandit_values(bandit, logits)):
        est = baselined_estimates(rewards[:, 0], scores, per_state.double()[states])
        z = (est.mean(0) - exact).abs() / (est.std(0) / math.sqrt(len(est))).clamp(min=1e-12)
        assert z.max() < 4.5, f"baseline {per_state.tolist()}: the sampled mean is {z.max():.1f} standard errors off"


def test_an_action_dependent_baseline_biases_the_gradient_by_the_predicted_amount():
    bandit, logits = _random_problem(5)
    probs, rewards, scores, _, out = _flat_outcomes(bandit, logits)
    b = torch.randn(bandit.rewards.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64).flatten()
    mean, _ = exact_moments(probs, baselined_estimates(rewards, scores, b))
    predicted_bias = -(probs[:, None] * b[:, None] * scores).sum(0)
    torch.testing.assert_close(mean - bandit_exact_gradient(bandit, logits), predicted_bias)
    assert predicted_bias.abs().max() > 1e-3  # it is really biased
    # b(s, a) = R(s, a) cancels every estimate: the bias is minus the whole gradient.
    mean, _ = exact_moments(probs, baselined_estimates(rewards, scores, rewards))
    torch.testing.assert_close(mean, torch.zeros_like(mean))


# ---------------------------------------------------------------------------
# The optimal baseline
# ---------------------------------------------------------------------------


def test_optimal_baseline_hand_computed():
    # One state, pi = (0.8, 0.2), rewards (1, 0). Scores: a1 -> (0.2, -0.2), |s|^2 = 0.08;
    # a2 -> (-0.8, 0.8), |s|^2 = 1.28. b* = (0.8 * 1 * 0.08 + 0.2 * 0 * 1.28) / (0.8 * 0.08 + 0.2 * 1.28)
    #                                   = 0.064 / 0.32 = 0.2, far from the mean reward 0.8.
    probs = torch.tensor([0.8, 0.2], dtype=torch.float64)
    rewards = torch.tensor([1.0, 0.0], dtype=torch.float64)
    scores = torch.tensor([[0.2, -0.2], [-0.8, 0.8]], dtype=torch.float64)
    assert optimal_baseline(rewards, scores, probs).item() == pytest.approx(0.2)
    # Per parameter: both coordinates have the same s_p^2 pattern, so the same 0.2.
    torch.testing.assert_close(
        optimal_baseline(rewards, scores, probs, per_parameter=True), torch.tensor([0.2, 0.2], dtype=torch.float64)
    )
    # Without probs the samples count equally: (1 * 0.08 + 0) / (0.08 + 1.28) = 0.0588.
    assert optimal_baseline(rewards, scores).item() == pytest.approx(0.08 / 1.36)


def test_optimal_baseline_is_the_mean_when_every_score_has_the_same_length():
    # Two equally likely actions: |s|^2 = 1/2 for both, so b* = V(s) (the baselines 10 and 1 of the lecture).
    bandit = two_state_bandit()
    out = bandit_outcomes(bandit, torch.zeros(2, 2, dtype=torch.float64))
    b_star = optimal_baseline(out["rewards"], out["scores"], probs=torch.full((2, 2), 0.5, dtype=torch.float64))
    torch.testing.assert_close(b_star, torch.tensor([10.0, 1.0], dtype=torch.float64))


def test_optimal_baseline_a_coordinate_that_never_moves_gets_the_mean_reward():
    rewards = torch.tensor([1.0, 3.0], dtype=torch.float64)
    scores = torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=torch.float64)  # coordinate 1 is always 0
    b = optimal_baseline(rewards, scores, per_parameter=True)
    torch.testing.assert_close(b, torch.tensor([2.0, 2.0], dtype=torch.float64))
    assert not torch.isnan(b).any()


def _variance_with(bandit, logits, per_state):
    probs, rewards, scores, states, _ = _flat_outcomes(bandit, logits)
    return exact_moments(probs, baselined_estimates(rewards, scores, per_state[states]))[1]


@SETTINGS
@given(seed=st.integers(0, 10_000), num_actions=st.integers(2, 5), shift=st.floats(-1.0, 1.0))
def test_optimal_baseline_variance_is_no_larger_than_the_mean_or_any_other_baseline(seed, num_actions, shift):
    bandit, logits = _random_problem(seed, num_actions=num_actions)
    out = bandit_outcomes(bandit, logits)
    pi = torch.softmax(logits, -1)
    b_star = optimal_baseline(out["rewards"], out["scores"], probs=pi)  # (S,)
    b_star_p = optimal_baseline(out["rewards"], out["scores"], probs=pi, per_parameter=True)  # (S, P)
    optimal = _variance_with(bandit, logits, b_star)
    mean = _variance_with(bandit, logits, bandit_values(bandit, logits))
    tol = 1e-10 * (1 + mean)
    assert optimal <= mean + tol
    assert optimal <= _variance_with(bandit, logits, b_star + shift) + tol  # any other state-only baseline
    assert optimal <= _variance_with(bandit, logits, torch.zeros_like(b_star)) + tol
    assert _variance_with(bandit, logits, b_star_p) <= optimal + tol  # one per parameter is better still


def test_optimal_baseline_accepts_leading_batch_axes_and_float32():
    g = torch.Generator().manual_seed(0)
    rewards = torch.randn(2, 3, 5, generator=g)  # (..., N) with ... = (2, 3), float32
    scores = torch.randn(2, 3, 5, 4, generator=g)
    b = optimal_baseline(rewards, scores)
    assert b.shape == (2, 3) and b.dtype == torch.float32
    # Each leading entry is the 1-D formula on its own slice.
    w = (scores[1, 2] ** 2).sum(-1)
    assert b[1, 2].item() == pytest.approx(((rewards[1, 2] * w).sum() / w.sum()).item(), rel=1e-5)
    assert optimal_baseline(rewards, scores, per_parameter=True).shape == (2, 3, 4)


# ---------------------------------------------------------------------------
# exact_moments, baselined_estimates and gradient_variance agree
# ---------------------------------------------------------------------------


def test_exact_moments_hand_computed():
    # Values 0 and 2 with probabilities 3/4, 1/4: mean 0.5; variance 3/4 * 0.25 + 1/4 * 2.25 = 0.75.
    mean, var = exact_moments(torch.tensor([0.75, 0.25]), torch.tensor([[0.0], [2.0]]))
    torch.testing.assert_close(mean, torch.tensor([0.5]))
    assert var == pytest.approx(0.75)


def test_sampled_variance_approaches_the_exact_one():
    bandit, logits = _random_problem(11)
    probs, rewards, scores, states, _ = _flat_outcomes(bandit, logits)
    values = bandit_values(bandit, logits)
    exact = exact_moments(probs, baselined_estimates(rewards, scores, values[states]))[1]
    s, a, r = sample_groups(bandit, logits, 40_000, 1, generator=torch.Generator().manual_seed(0))
    est = baselined_estimates(r[:, 0], bandit_scores(logits, s, a[:, 0]), values[s])
    assert gradient_variance(est) == pytest.approx(exact, rel=0.05)


def test_baselined_estimates_per_parameter_baselines():
    rewards = torch.tensor([2.0, 1.0])
    scores = torch.tensor([[1.0, -1.0], [0.5, 0.5]])
    b = torch.tensor([[1.0, 0.0], [0.0, 3.0]])
    # Row 0: (2 - 1) * 1, (2 - 0) * -1 = (1, -2); row 1: (1 - 0) * 0.5, (1 - 3) * 0.5 = (0.5, -1).
    torch.testing.assert_close(baselined_estimates(rewards, scores, b), torch.tensor([[1.0, -2.0], [0.5, -1.0]]))


# ---------------------------------------------------------------------------
# The learned value baseline
# ---------------------------------------------------------------------------


def test_fit_linear_value_recovers_a_linear_function():
    g = torch.Generator().manual_seed(0)
    features = torch.randn(50, 3, generator=g, dtype=torch.float64)
    targets = features @ torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64) + 4.0
    w = fit_linear_value(features, targets, l2=0.0)
    torch.testing.assert_close(w, torch.tensor([1.0, -2.0, 0.5, 4.0], dtype=torch.float64))
    torch.testing.assert_close(linear_value(features, w), targets)


def test_fit_linear_value_agrees_with_numpy_lstsq():
    # numpy.linalg.lstsq on [features, 1] is the well-known least-squares solver.
    g = torch.Generator().manual_seed(1)
    features = torch.randn(40, 2, generator=g, dtype=torch.float64)
    targets = torch.randn(40, generator=g, dtype=torch.float64)
    X = np.concatenate([features.numpy(), np.ones((40, 1))], axis=1)
    expected = np.linalg.lstsq(X, targets.numpy(), rcond=None)[0]
    np.testing.assert_allclose(fit_linear_value(features, targets, l2=0.0).numpy(), expected, rtol=1e-8, atol=1e-10)


def test_fit_linear_value_with_one_hot_features_is_the_per_state_mean():
    # One-hot features (plus a bias): the fit can give each state its own mean; l2 = 0 and the
    # rank-deficient bias column need the tiny default ridge.
    features = torch.eye(2, dtype=torch.float64)[torch.tensor([0, 0, 1, 1, 1])]
    targets = torch.tensor([11.0, 9.0, 0.0, 2.0, 1.0], dtype=torch.float64)
    fitted = linear_value(torch.eye(2, dtype=torch.float64), fit_linear_value(features, targets))
    torch.testing.assert_close(fitted, torch.tensor([10.0, 1.0], dtype=torch.float64), atol=1e-4, rtol=0)


# ---------------------------------------------------------------------------
# Group baselines: the bridge to GRPO
# ---------------------------------------------------------------------------


def test_group_baseline_hand_computed():
    rewards = torch.tensor([[1.0, 2.0, 6.0]])
    # mean including itself: 9 / 3 = 3 for everyone; leave-one-out: (2 + 6)/2 = 4, (1 + 6)/2 = 3.5, (1 + 2)/2 = 1.5.
    torch.testing.assert_close(group_baseline(rewards, "group_mean"), torch.tensor([[3.0, 3.0, 3.0]]))
    torch.testing.assert_close(group_baseline(rewards, "leave_one_out"), torch.tensor([[4.0, 3.5, 1.5]]))


@SETTINGS
@given(seed=st.integers(0, 10_000), B=st.integers(1, 4), G=st.integers(2, 9))
def test_group_mean_centring_is_leave_one_out_shrunk_by_g_minus_1_over_g(seed, B, G):
    r = torch.randn(B, G, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    lhs = r - group_baseline(r, "group_mean")
    rhs = (G - 1) / G * (r - group_baseline(r, "leave_one_out"))
    torch.testing.assert_close(lhs, rhs)


def test_leave_one_out_ignores_the_responses_own_reward():
    r = torch.tensor([[1.0, 2.0, 4.0, 8.0]], requires_grad=True)
    (jac,) = torch.autograd.grad(group_baseline(r, "leave_one_out")[0, 2], r)
    assert jac[0, 2] == 0  # baseline 2 does not see reward 2 ...
    (jac,) = torch.autograd.grad(group_baseline(r, "group_mean")[0, 2], r)
    assert jac[0, 2] == pytest.approx(0.25)  # ... the group mean does, with weight 1/G


@pytest.mark.parametrize("G", [2, 4])
def test_group_mean_shrinks_the_expected_gradient_by_g_minus_1_over_g(G):
    bandit, logits = _random_problem(2)
    exact = bandit_exact_gradient(bandit, logits)
    for kind, factor in (("leave_one_out", 1.0), ("group_mean", (G - 1) / G), ("value", 1.0), ("optimal", 1.0)):
        est = group_gradient_estimates(bandit, logits, G, 20_000, kind, generator=torch.Generator().manual_seed(3))
        along = est @ exact / exact.norm() ** 2
        se = along.std() / math.sqrt(len(along))
        assert abs(along.mean().item() - factor) < 4 * se.item(), f"{kind} at G={G}"


def test_group_gradient_estimates_from_one_state_only_touch_that_row():
    bandit, logits = _random_problem(4)
    est = group_gradient_estimates(bandit, logits, 3, 50, "none", state=1, generator=torch.Generator().manual_seed(0))
    K = bandit.num_actions
    assert est.shape == (50, bandit.num_states * K)
    assert (est[:, :K] == 0).all() and (est[:, 2 * K :] == 0).all()


def test_group_variance_table_small():
    bandit, logits = _random_problem(6)
    table = group_variance_table(bandit, logits, state=0, group_sizes=(2, 4, 8), num_groups=300)
    assert table.group_sizes == (2, 4, 8)
    for name in variance.BASELINES:
        assert table.variance[name].shape == (3,)
        assert table.projections[name].shape == (3, 300)
    # A fixed baseline's variance per response does not depend on G; the leave-one-out one falls towards V(s).
    assert table.variance["leave_one_out"][0] > table.variance["value"][0]
    assert table.exact_norm > 0


# ---------------------------------------------------------------------------
# Bad input: ValueError naming the argument
# ---------------------------------------------------------------------------


def test_bad_input_raises_value_error_naming_the_argument():
    bandit, logits = _random_problem(0)
    f64 = torch.float64
    cases = [
        (lambda: per_sample_grads(torch.zeros(2, 2, requires_grad=True), [torch.zeros(1, requires_grad=True)]), "logp"),
        (lambda: per_sample_grads(torch.zeros(3), [torch.zeros(1, requires_grad=True)]), "logp"),
        (lambda: per_sample_grads(torch.zeros(3, requires_grad=True) * 2, []), "params"),
        (lambda: per_sample_grads(torch.zeros(3, requires_grad=True) * 2, [torch.zeros(2)]), "params"),
        (lambda: ContextualBandit(torch.zeros(3), torch.zeros(3, 1), torch.ones(3) / 3), "rewards"),
        (lambda: ContextualBandit(torch.zeros(3, 2), torch.zeros(2, 1), torch.ones(3) / 3), "features"),
        (lambda: ContextualBandit(torch.zeros(3, 2), torch.zeros(3, 1), torch.ones(3)), "state_probs"),
        (lambda: ContextualBandit(torch.zeros(3, 2), torch.zeros(3, 1), torch.tensor([1.5, -0.5, 0.0])), "state_probs"),
        (lambda: random_bandit(num_states=0), "num_states"),
        (lambda: random_bandit(num_actions=2.5), "num_actions"),
        (lambda: random_bandit(seed="x"), "seed"),
        (lambda: sample_groups(bandit, torch.zeros(2, 2), 3, 1), "logits"),
        (lambda: sample_groups("bandit", logits, 3, 1), "bandit"),
        (lambda: sample_groups(bandit, logits, 0, 1), "num_groups"),
        (lambda: sample_groups(bandit, logits, 3, 0), "group_size"),
        (lambda: bandit_scores(torch.zeros(3), torch.tensor([0]), torch.tensor([0])), "logits"),
        (lambda: bandit_scores(logits, torch.tensor([3]), torch.tensor([0])), "states"),
        (lambda: bandit_scores(logits, torch.tensor([0]), torch.tensor([4])), "actions"),
        (lambda: bandit_scores(logits, torch.tensor([0.0]), torch.tensor([0])), "states"),
        (lambda: bandit_scores(logits, torch.tensor([0, 1]), torch.tensor([0])), "actions"),
        (lambda: bandit_values(bandit, torch.zeros(3, 5)), "logits"),
        (lambda: bandit_exact_gradient(bandit, torch.zeros(3, 5)), "logits"),
        (lambda: bandit_outcomes(bandit, "logits"), "logits"),
        (lambda: exact_moments(torch.tensor([0.5, 0.5]), torch.zeros(2)), "estimates"),
        (lambda: exact_moments(torch.tensor([0.5, 0.6]), torch.zeros(2, 3)), "probs"),
        (lambda: exact_moments(torch.tensor([0.5, 0.5, 0.0]), torch.zeros(2, 3)), "probs"),
        (lambda: optimal_baseline(torch.zeros(4), torch.zeros(3, 2)), "scores"),
        (lambda: optimal_baseline(torch.zeros(4, dtype=torch.long), torch.zeros(4, 2)), "rewards"),
        (lambda: optimal_baseline(torch.zeros(4), torch.zeros(4, 2), probs=torch.ones(4)), "probs"),
        (lambda: optimal_baseline(torch.zeros(()), torch.zeros(4, 2)), "rewards"),
        (lambda: baselined_estimates(torch.zeros(4, 1), torch.zeros(4, 2), torch.zeros(4)), "rewards"),
        (lambda: baselined_estimates(torch.zeros(4), torch.zeros(3, 2), torch.zeros(4)), "scores"),
        (lambda: baselined_estimates(torch.zeros(4), torch.zeros(4, 2), torch.zeros(3)), "baselines"),
        (lambda: fit_linear_value(torch.zeros(4), torch.zeros(4)), "features"),
        (lambda: fit_linear_value(torch.zeros(4, 2), torch.zeros(3)), "targets"),
        (lambda: fit_linear_value(torch.zeros(4, 2), torch.zeros(4), l2=-1.0), "l2"),
        (lambda: linear_value(torch.zeros(4, 2), torch.zeros(2)), "weights"),
        (lambda: group_baseline(torch.zeros(4), "group_mean"), "rewards"),
        (lambda: group_baseline(torch.zeros(2, 3), "median"), "kind"),
        (lambda: group_baseline(torch.zeros(2, 1), "leave_one_out"), "rewards"),
        (lambda: group_gradient_estimates(bandit, logits, 2, 5, "max"), "baseline"),
        (lambda: group_gradient_estimates(bandit, logits, 2, 5, "none", state=7), "state"),
        (lambda: group_variance_table(bandit, logits, group_sizes=(1, 2)), "group_sizes"),
        (lambda: group_variance_table(bandit, torch.zeros(2, 2, dtype=f64)), "logits"),
    ]
    for call, argname in cases:
        with pytest.raises(ValueError, match=argname):
            call()
