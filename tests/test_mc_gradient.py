"""Tests for course_lib.lectures.mc_gradient: the Monte-Carlo policy gradient of a categorical policy."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.checks.mc_gradient import check_mc_policy_gradient
from course_lib.lectures.mc_gradient import mc_gradient_errors, mc_gradient_std, mc_policy_gradient
from course_lib.policy_gradient import expected_reward_gradient, gather_log_probs, reinforce_loss


def test_one_sample_by_hand():
    # Uniform policy over 2 actions, pi = (1/2, 1/2), rewards (1, 3). Find which action a
    # seeded multinomial draws, then g = r[a] * (onehot(a) - pi):
    # a = 0 -> 1 * (1/2, -1/2); a = 1 -> 3 * (-1/2, 1/2).
    logits, r = torch.zeros(2, dtype=torch.float64), torch.tensor([1.0, 3.0], dtype=torch.float64)
    a = int(
        torch.multinomial(torch.full((2,), 0.5, dtype=torch.float64), 1, generator=torch.Generator().manual_seed(0))
    )
    expected = torch.tensor([0.5, -0.5]) if a == 0 else torch.tensor([-1.5, 1.5])
    got = mc_policy_gradient(logits, r, 1, torch.Generator().manual_seed(0))
    torch.testing.assert_close(got, expected.double())


def test_equals_minus_the_gradient_of_the_reinforce_loss_on_the_same_samples():
    # The REINFORCE surrogate -mean(r[a] log pi(a)) has gradient -g_hat: the two routes agree.
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, generator=g, dtype=torch.float64)
    r = torch.randn(6, generator=g, dtype=torch.float64)
    n = 50
    actions = torch.multinomial(
        torch.softmax(logits, -1), n, replacement=True, generator=torch.Generator().manual_seed(9)
    )
    leaf = logits.clone().requires_grad_(True)
    logp = gather_log_probs(leaf.expand(n, 1, 6), actions[:, None])  # (n, T=1)
    reinforce_loss(logp, r[actions]).backward()
    estimate = mc_policy_gradient(logits, r, n, torch.Generator().manual_seed(9))
    torch.testing.assert_close(estimate, -leaf.grad)


def test_sums_to_zero_and_keeps_dtype():
    # Each term r * (onehot - pi) sums to r * (1 - 1) = 0 over the actions.
    for dtype in (torch.float32, torch.float64):
        logits = torch.tensor([0.3, -0.2, 1.0], dtype=dtype)
        est = mc_policy_gradient(
            logits, torch.tensor([1.0, 2.0, -1.0], dtype=dtype), 17, torch.Generator().manual_seed(1)
        )
        assert est.dtype == dtype and est.shape == (3,)
        assert abs(float(est.sum())) < 1e-6


@settings(max_examples=20, deadline=None)
@given(V=st.integers(2, 6), seed=st.integers(0, 10_000))
def test_unbiased_mean_of_many_estimates(V, seed):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(V, generator=g, dtype=torch.float64)
    r = torch.randn(V, generator=g, dtype=torch.float64)
    M, n = 400, 5
    mean = sum(mc_policy_gradient(logits, r, n, torch.Generator().manual_seed(seed + s)) for s in range(M)) / M
    # The mean's RMS error is sigma / sqrt(M n); allow 5 of those.
    tol = 5 * mc_gradient_std(logits, r) / math.sqrt(M * n) + 1e-12
    assert float(torch.linalg.vector_norm(mean - expected_reward_gradient(logits, r))) < tol


def test_std_matches_the_spread_of_one_sample_estimates():
    logits = torch.tensor([0.5, -1.0, 1.5, 0.0], dtype=torch.float64)
    r = torch.tensor([1.0, 0.0, 3.0, -2.0], dtype=torch.float64)
    exact = expected_reward_gradient(logits, r)
    errs = torch.stack(
        [mc_policy_gradient(logits, r, 1, torch.Generator().manual_seed(s)) - exact for s in range(4000)]
    )
    empirical = float(errs.pow(2).sum(-1).mean().sqrt())
    assert abs(empirical - mc_gradient_std(logits, r)) < 0.05 * mc_gradient_std(logits, r)


def test_std_by_hand_for_two_actions():
    # pi = (1/2, 1/2), r = (0, 2): terms 0 (a=0) and 2 * (-1/2, 1/2) = (-1, 1) (a=1);
    # mean (-1/2, 1/2); each term is off by (1/2, -1/2) or (-1/2, 1/2), squared norm 1/2;
    # tr Sigma = 1/2, sigma = sqrt(1/2).
    assert mc_gradient_std(torch.zeros(2), torch.tensor([0.0, 2.0])) == pytest.approx(math.sqrt(0.5))


def test_errors_halve_when_samples_quadruple():
    logits = torch.tensor([0.5, -1.0, 1.5, 0.0], dtype=torch.float64)
    r = torch.tensor([1.0, 0.0, 3.0, -2.0], dtype=torch.float64)
    errors = mc_gradient_errors(logits, r, [16, 64, 256], n_seeds=200)
    assert errors.shape == (3, 200)
    rms = errors.pow(2).mean(1).sqrt()
    ratios = rms[1:] / rms[:-1]
    assert ((ratios > 0.4) & (ratios < 0.6)).all()
    torch.testing.assert_close(
        rms, mc_gradient_std(logits, r) / torch.tensor([4.0, 8.0, 16.0], dtype=torch.float64), rtol=0.15, atol=0
    )


def test_reference_passes_its_own_check(capsys):
    assert check_mc_policy_gradient(mc_policy_gradient) is True
    assert "\u2714" in capsys.readouterr().out


def test_check_asks_for_generator_none_and_leaves_the_global_rng_alone():
    """The docstring's generator=None (the global RNG) must not be refused; the check's own call with None puts the
    notebook's global RNG back, and its seeded calls never touch it (a student who ignores the generator is told)."""

    def estimate(logits, reward_per_action, n_samples, generator):  # a student's own, as the exercise says
        pi = torch.softmax(logits, dim=-1)
        actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator)
        score = torch.nn.functional.one_hot(actions, len(pi)).to(pi.dtype) - pi
        return (reward_per_action[actions, None] * score).mean(dim=0)

    def refuses_none(logits, reward_per_action, n_samples, generator=None):
        if generator is None:
            raise ValueError("generator: expected a torch.Generator")
        return estimate(logits, reward_per_action, n_samples, generator)

    def ignores_generator(logits, reward_per_action, n_samples, generator=None):
        return estimate(logits, reward_per_action, n_samples, None)

    with pytest.raises(AssertionError, match="with generator=None it raised ValueError"):
        check_mc_policy_gradient(refuses_none)
    with pytest.raises(AssertionError, match="use the generator|generator you are given"):
        check_mc_policy_gradient(ignores_generator)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check_mc_policy_gradient(mc_policy_gradient)
    assert torch.equal(torch.rand(3), expected)  # the notebook's global RNG is where it was


def test_check_lets_not_implemented_through():
    def stub(logits, reward_per_action, n_samples, generator=None):
        raise NotImplementedError("Exercise")

    with pytest.raises(NotImplementedError):
        check_mc_policy_gradient(stub)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(logits=torch.zeros(2, 3), reward_per_action=torch.zeros(2, 3), n_samples=2), "logits"),
        (dict(logits=torch.zeros(3), reward_per_action=torch.zeros(4), n_samples=2), "reward_per_action"),
        (dict(logits=torch.zeros(3), reward_per_action=torch.zeros(3), n_samples=0), "n_samples"),
        (dict(logits=torch.zeros(3), reward_per_action=torch.zeros(3), n_samples=2.0), "n_samples"),
        (dict(logits=torch.zeros(3), reward_per_action=torch.zeros(3), n_samples=2, generator=0), "generator"),
        (dict(logits=torch.zeros(3, dtype=torch.long), reward_per_action=torch.zeros(3), n_samples=2), "logits"),
    ],
)
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        mc_policy_gradient(**kwargs)


def test_bad_arguments_of_the_helpers():
    with pytest.raises(ValueError, match="reward_per_action"):
        mc_gradient_std(torch.zeros(3), torch.zeros(2))
    with pytest.raises(ValueError, match="n_samples"):
        mc_gradient_errors(torch.zeros(3), torch.zeros(3), [])
    with pytest.raises(ValueError, match="n_samples"):
        mc_gradient_errors(torch.zeros(3), torch.zeros(3), [4, 0])
    with pytest.raises(ValueError, match="n_seeds"):
        mc_gradient_errors(torch.zeros(3), torch.zeros(3), [4], n_seeds=0)
