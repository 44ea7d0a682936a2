"""Tests for course_lib.baselines: deltas in three modes, and the variance a baseline removes."""

import math
import warnings

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from course_lib.baselines import MODES, compute_deltas, gradient_variance
from course_lib.checks.baselines import check_compute_deltas, check_gradient_variance

# ---------------------------------------------------------------------------
# compute_deltas: hand-computed values
# ---------------------------------------------------------------------------


def test_compute_deltas_hand_computed():
    # Group (1, 0, 0, 1): mean 0.5, centred (0.5, -0.5, -0.5, 0.5);
    # Bessel std = sqrt((4 * 0.25) / (4 - 1)) = sqrt(1/3) = 0.57735;
    # normalised 0.5 / (0.57735 + 1e-6) = 0.866024...
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    torch.testing.assert_close(compute_deltas(rewards, "rewards"), rewards)
    torch.testing.assert_close(
        compute_deltas(rewards, "centered_rewards"), torch.tensor([[0.5, -0.5, -0.5, 0.5]], dtype=torch.float64)
    )
    z = 0.5 / (math.sqrt(1 / 3) + 1e-6)
    torch.testing.assert_close(
        compute_deltas(rewards, "normalized_rewards"), torch.tensor([[z, -z, -z, z]], dtype=torch.float64)
    )


def test_compute_deltas_groups_are_rows():
    # Each prompt's baseline is its own group mean: row 1 is shifted by 10 and gets the same deltas.
    rewards = torch.tensor([[1.0, 2.0, 3.0], [11.0, 12.0, 13.0]], dtype=torch.float64)
    centred = compute_deltas(rewards, "centered_rewards")
    torch.testing.assert_close(centred, torch.tensor([[-1.0, 0.0, 1.0], [-1.0, 0.0, 1.0]], dtype=torch.float64))
    # Bessel std of (1, 2, 3) is exactly 1, so normalising changes nothing here (up to eps).
    torch.testing.assert_close(compute_deltas(rewards, "normalized_rewards"), centred / (1.0 + 1e-6))


def test_compute_deltas_uses_bessels_correction_like_torch_std():
    # G=2, rewards (1, 0): Bessel std = sqrt(0.5) = 0.7071 (population std would be 0.5),
    # so the normalised deltas are +-0.5 / 0.7071 = +-0.7071, not +-1.
    deltas = compute_deltas(torch.tensor([[1.0, 0.0]], dtype=torch.float64), "normalized_rewards")
    torch.testing.assert_close(deltas, torch.tensor([[1.0, -1.0]], dtype=torch.float64) * 0.5 / (math.sqrt(0.5) + 1e-6))


def test_compute_deltas_eps_argument():
    # std of (0, 2) is sqrt(2); eps=1 gives 1 / (sqrt(2) + 1) = 0.41421.
    deltas = compute_deltas(torch.tensor([[2.0, 0.0]], dtype=torch.float64), "normalized_rewards", eps=1.0)
    torch.testing.assert_close(deltas, torch.tensor([[1.0, -1.0]], dtype=torch.float64) / (math.sqrt(2) + 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("value", [0.7, 0.1, 1.0, -3.3])
@pytest.mark.parametrize("G", [1, 2, 7, 16])
def test_compute_deltas_equal_rewards_give_exact_zeros(dtype, value, G):
    # In float32 the mean of sixteen 0.7s is off by one ulp; without the exact zero,
    # ulp / eps would leave deltas of about 0.06. A group of one must not give NaN
    # (torch.std with Bessel's correction does) nor warn.
    rewards = torch.full((2, G), value, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for mode in ("centered_rewards", "normalized_rewards"):
            deltas = compute_deltas(rewards, mode)
            assert deltas.dtype == dtype
            assert (deltas == 0).all(), (mode, deltas)


def test_compute_deltas_returns_a_copy_in_rewards_mode():
    rewards = torch.tensor([[1.0, 2.0]])
    deltas = compute_deltas(rewards, "rewards")
    deltas += 1.0
    assert rewards.tolist() == [[1.0, 2.0]]


# ---------------------------------------------------------------------------
# compute_deltas: agreement with well-known implementations
# ---------------------------------------------------------------------------


def _trl_advantages(rewards_flat, G, eps):
    """TRL GRPOTrainer's advantage: a flat (B * G,) vector, statistics repeated per group."""
    mean_grouped = rewards_flat.view(-1, G).mean(dim=1).repeat_interleave(G, dim=0)
    std_grouped = rewards_flat.view(-1, G).std(dim=1).repeat_interleave(G, dim=0)
    return (rewards_flat - mean_grouped) / (std_grouped + eps)


def _verl_grpo_scores(scores, index, eps):
    """verl's compute_grpo_outcome_advantage: a dict of groups keyed by prompt id."""
    groups = {}
    for i, idx in enumerate(index):
        groups.setdefault(idx, []).append(scores[i])
    out = scores.clone()
    for i, idx in enumerate(index):
        group = torch.stack(groups[idx])
        if len(group) == 1:
            mean, std = torch.tensor(0.0, dtype=scores.dtype), torch.tensor(1.0, dtype=scores.dtype)
        else:
            mean, std = group.mean(), group.std()
        out[i] = (scores[i] - mean) / (std + eps)
    return out


def test_compute_deltas_agrees_with_trl_and_verl_formulas():
    g = torch.Generator().manual_seed(0)
    B, G = 4, 6
    rewards = torch.randint(0, 3, (B, G), generator=g).double()
    ours = compute_deltas(rewards, "normalized_rewards", eps=1e-4)
    torch.testing.assert_close(ours.reshape(-1), _trl_advantages(rewards.reshape(-1), G, eps=1e-4))
    index = [b for b in range(B) for _ in range(G)]
    torch.testing.assert_close(ours.reshape(-1), _verl_grpo_scores(rewards.reshape(-1), index, eps=1e-4))


def test_group_of_one_differs_from_verl_by_design():
    # verl leaves a lone response's reward unchanged (mean 0, std 1); the course gives it no signal.
    rewards = torch.tensor([[0.8], [0.2]], dtype=torch.float64)
    verl = _verl_grpo_scores(rewards.reshape(-1), [0, 1], eps=1e-6)
    assert torch.allclose(verl, rewards.reshape(-1), atol=1e-5)
    assert (compute_deltas(rewards, "normalized_rewards") == 0).all()


# ---------------------------------------------------------------------------
# compute_deltas: properties
# ---------------------------------------------------------------------------

_rewards = st.integers(1, 4).flatmap(
    lambda B: st.integers(1, 6).flatmap(
        lambda G: st.lists(
            st.lists(st.floats(-100, 100, allow_nan=False, width=32), min_size=G, max_size=G),
            min_size=B,
            max_size=B,
        )
    )
)


@settings(max_examples=50, deadline=None)
@given(_rewards, st.sampled_from([torch.float32, torch.float64]))
def test_centred_and_normalised_deltas_have_zero_group_mean_and_no_nan(rows, dtype):
    rewards = torch.tensor(rows, dtype=dtype)
    for mode in ("centered_rewards", "normalized_rewards"):
        deltas = compute_deltas(rewards, mode)
        assert torch.isfinite(deltas).all()
        scale = 1.0 if mode == "normalized_rewards" else 1.0 + rewards.abs().max().item()
        tol = (1e-4 if dtype == torch.float32 else 1e-10) * scale * rewards.shape[-1]
        assert deltas.mean(-1).abs().max().item() <= tol


@settings(max_examples=50, deadline=None)
@given(_rewards, st.floats(-50, 50), st.floats(0.1, 10))
def test_normalised_deltas_ignore_shift_and_scale(rows, shift, scale):
    # Adding a constant to every reward, or multiplying them by a positive one, changes
    # nothing when the std is well above eps: only ranks and spacing within the group matter.
    rewards = torch.tensor(rows, dtype=torch.float64)
    assume(rewards.shape[-1] == 1 or (rewards.std(-1) > 1e-2).all())
    base = compute_deltas(rewards, "normalized_rewards")
    torch.testing.assert_close(compute_deltas(rewards + shift, "normalized_rewards"), base, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(compute_deltas(rewards * scale, "normalized_rewards"), base, atol=1e-4, rtol=1e-4)


@settings(max_examples=50, deadline=None)
@given(_rewards)
def test_normalised_deltas_have_unit_bessel_std(rows):
    rewards = torch.tensor(rows, dtype=torch.float64)
    assume(rewards.shape[-1] > 1 and (rewards.std(-1) > 1e-2).all())
    deltas = compute_deltas(rewards, "normalized_rewards")
    torch.testing.assert_close(deltas.std(-1), torch.ones(rewards.shape[0], dtype=torch.float64), atol=1e-3, rtol=0)


@pytest.mark.parametrize(
    "args, argname",
    [
        ((torch.zeros(4), "rewards"), "rewards"),  # one axis: is it B or G?
        ((torch.zeros(2, 3, 4), "rewards"), "rewards"),
        ((torch.zeros(2, 3, dtype=torch.int64), "rewards"), "rewards"),
        ((torch.zeros(2, 3), "advantages"), "mode"),
        ((torch.zeros(2, 3), "normalized_rewards", 0.0), "eps"),
        ((torch.zeros(2, 3), "normalized_rewards", -1e-6), "eps"),
    ],
)
def test_compute_deltas_bad_input(args, argname):
    with pytest.raises(ValueError, match=argname):
        compute_deltas(*args)


# ---------------------------------------------------------------------------
# gradient_variance, and what a baseline buys
# ---------------------------------------------------------------------------


def test_gradient_variance_hand_computed():
    # Samples (1, 0) and (3, 2): each coordinate has mean +1 away and deviations +-1;
    # Bessel variance = (1 + 1) / (2 - 1) = 2 per coordinate, trace = 4.
    assert gradient_variance(torch.tensor([[1.0, 0.0], [3.0, 2.0]])) == pytest.approx(4.0)
    assert isinstance(gradient_variance(torch.tensor([[1.0, 0.0], [3.0, 2.0]])), float)


def test_gradient_variance_is_the_trace_of_torch_cov():
    g = torch.Generator().manual_seed(1)
    samples = torch.randn(30, 5, generator=g, dtype=torch.float64) * torch.arange(1, 6)
    assert gradient_variance(samples) == pytest.approx(torch.cov(samples.T).trace().item())
    assert gradient_variance(samples[:1].repeat(7, 1)) == pytest.approx(0.0, abs=1e-20)


def _per_action_gradients(logits):
    """grad log pi(a) with respect to the logits, for every action a: onehot(a) - pi."""
    pi = torch.softmax(logits, -1)
    return torch.eye(len(logits), dtype=logits.dtype) - pi  # (V actions, V logits)


def test_a_constant_baseline_leaves_the_gradient_unbiased_exactly():
    # E_a[b * grad log pi(a)] = b * sum_a pi_a (onehot(a) - pi) = b * (pi - pi) = 0, for any b.
    logits = torch.tensor([0.3, -1.0, 2.0, 0.5], dtype=torch.float64)
    pi = torch.softmax(logits, -1)
    rewards = torch.tensor([1.0, 0.0, 0.5, 2.0], dtype=torch.float64) + 10.0  # a large common offset
    grads = _per_action_gradients(logits)  # (V, V)

    def expected(b):
        return (pi[:, None] * (rewards - b)[:, None] * grads).sum(0)

    torch.testing.assert_close(expected(0.0), expected(10.0))
    torch.testing.assert_close(expected(0.0), expected((pi * rewards).sum()))


def test_the_mean_baseline_reduces_gradient_variance():
    # Sample REINFORCE estimates r(a) * grad log pi(a) with and without subtracting the
    # (exact) mean reward: same mean, much smaller variance when rewards share an offset.
    g = torch.Generator().manual_seed(2)
    logits = torch.tensor([0.3, -1.0, 2.0, 0.5], dtype=torch.float64)
    pi = torch.softmax(logits, -1)
    rewards = torch.tensor([1.0, 0.0, 0.5, 2.0], dtype=torch.float64) + 10.0
    actions = torch.multinomial(pi, 5000, replacement=True, generator=g)
    grads = _per_action_gradients(logits)[actions]  # (N, V)
    plain = rewards[actions, None] * grads
    baseline = (pi * rewards).sum()
    with_baseline = (rewards[actions] - baseline)[:, None] * grads
    assert gradient_variance(with_baseline) < 0.05 * gradient_variance(plain)
    torch.testing.assert_close(plain.mean(0), with_baseline.mean(0), atol=0.3, rtol=0)


@pytest.mark.parametrize(
    "samples", [torch.zeros(1, 3), torch.zeros(5), torch.zeros(2, 3, 4), torch.zeros(4, 3, dtype=torch.int64)]
)
def test_gradient_variance_bad_input(samples):
    with pytest.raises(ValueError, match="grad_samples"):
        gradient_variance(samples)


# ---------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------


@pytest.mark.usefixtures("trusting")
def test_checks_accept_the_reference(capsys):
    assert check_compute_deltas(compute_deltas) is True
    assert check_gradient_variance(gradient_variance) is True
    assert capsys.readouterr().out.count("\u2714") == 2


def test_check_compute_deltas_names_population_std():
    def population(rewards, mode, eps=1e-6):
        if mode == "rewards":
            return rewards.clone()
        centred = rewards - rewards.mean(-1, keepdim=True)
        if mode == "centered_rewards" or rewards.shape[-1] == 1:
            return centred
        return centred / (rewards.std(-1, keepdim=True, correction=0) + eps)

    with pytest.raises(AssertionError, match="Bessel"):
        check_compute_deltas(population)


def test_modes_constant():
    assert MODES == ("rewards", "centered_rewards", "normalized_rewards")
