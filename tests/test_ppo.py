"""Tests of course_lib.ppo: hand-computed losses and gradients, properties, CleanRL/TRL formulas, bad input."""

import dataclasses
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import gae, ppo
from course_lib.checks import ppo as ppo_checks
from course_lib.ppo import (
    PPOConfig,
    PPOLoss,
    clipped_surrogate,
    clipped_surrogate_loss,
    entropy_from_logits,
    explained_variance,
    value_loss,
)


def _leaf(values, dtype=torch.float64):
    return torch.tensor(values, dtype=dtype, requires_grad=True)


# ---------------------------------------------------------------------------
# The clipped surrogate by hand
# ---------------------------------------------------------------------------


def test_clipped_surrogate_by_hand_with_gradients():
    # Four entries, clip_eps = 0.2, so the ratio is kept in [0.8, 1.2]:
    #   ratio 1.4 (= 0.7 / 0.5), adv +2: min(2.8, 1.2 * 2 = 2.4) = 2.4     -> loss -2.4, clip binds: d/dlogp = 0
    #   ratio 1.4,               adv -2: min(-2.8, 1.2 * -2 = -2.4) = -2.8 -> loss  2.8, d/dlogp = -ratio * adv = 2.8
    #   ratio 0.5 (= 0.25 / 0.5), adv +1: min(0.5, 0.8) = 0.5              -> loss -0.5, d/dlogp = -0.5
    #   ratio 0.5,               adv -1: min(-0.5, -0.8) = -0.8            -> loss  0.8, clip binds: d/dlogp = 0
    logp = _leaf([math.log(0.7), math.log(0.7), math.log(0.25), math.log(0.25)])
    logp_old = _leaf([math.log(0.5)] * 4)
    adv = _leaf([2.0, -2.0, 1.0, -1.0])
    loss = clipped_surrogate(logp, logp_old, adv, clip_eps=0.2)
    torch.testing.assert_close(loss, torch.tensor([-2.4, 2.8, -0.5, 0.8], dtype=torch.float64))
    loss.sum().backward()
    # d(-ratio * adv)/dlogp = -ratio * adv, since d ratio / d logp = ratio.
    torch.testing.assert_close(logp.grad, torch.tensor([0.0, 2.8, -0.5, 0.0], dtype=torch.float64))
    assert logp_old.grad is None and adv.grad is None  # constants: detached


def test_clip_higher_by_hand():
    # ratio 1.25, adv +1: symmetric clip at 1.2 gives -1.2; DAPO's clip_eps_high = 0.28 lets it reach 1.25.
    logp, logp_old, adv = torch.tensor([math.log(1.25)]), torch.tensor([0.0]), torch.tensor([1.0])
    torch.testing.assert_close(clipped_surrogate(logp, logp_old, adv, 0.2), torch.tensor([-1.2]))
    torch.testing.assert_close(clipped_surrogate(logp, logp_old, adv, 0.2, clip_eps_high=0.28), torch.tensor([-1.25]))
    # The low side still uses clip_eps: ratio 0.7, adv -1: min(-0.7, -0.8) = -0.8 -> loss 0.8.
    low = clipped_surrogate(torch.tensor([math.log(0.7)]), logp_old, -adv, 0.2, clip_eps_high=0.28)
    torch.testing.assert_close(low, torch.tensor([0.8]))


def _policy_tensors(seed, shape, spread=1.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    logp_old = -torch.rand(shape, generator=g, dtype=torch.float64) * 3 - 0.05
    logp = logp_old + spread * torch.randn(shape, generator=g, dtype=torch.float64)
    adv = torch.randn(shape, generator=g, dtype=torch.float64)
    return logp.to(dtype), logp_old.to(dtype), adv.to(dtype)


shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), shape=shapes, clip_eps=st.floats(0.05, 0.5))
def test_equals_plain_surrogate_inside_the_clip_range(seed, shape, clip_eps):
    logp, logp_old, adv = _policy_tensors(seed, shape, spread=0.01)
    ratio = torch.exp(logp - logp_old)
    inside = (ratio > 1 - clip_eps) & (ratio < 1 + clip_eps)
    loss = clipped_surrogate(logp, logp_old, adv, clip_eps)
    torch.testing.assert_close(loss[inside], (-ratio * adv)[inside])


@settings(max_examples=50, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    shape=shapes,
    clip_eps=st.floats(0.05, 0.5),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_gradient_is_zero_exactly_where_the_clip_binds(seed, shape, clip_eps, dtype):
    logp, logp_old, adv = _policy_tensors(seed, shape, spread=1.0, dtype=dtype)
    logp.requires_grad_(True)
    logp_old.requires_grad_(True)
    adv.requires_grad_(True)
    loss = clipped_surrogate(logp, logp_old, adv, clip_eps)
    assert loss.dtype == dtype and loss.shape == shape
    loss.sum().backward()
    ratio = torch.exp(logp - logp_old).detach()
    binds = ((ratio > 1 + clip_eps) & (adv > 0)) | ((ratio < 1 - clip_eps) & (adv < 0))
    assert torch.all(logp.grad[binds] == 0)
    # Elsewhere the gradient is the plain surrogate's, -ratio * adv.
    torch.testing.assert_close(logp.grad[~binds], (-ratio * adv.detach())[~binds])
    # And the loss is never below the plain surrogate (the pessimistic bound).
    assert torch.all(loss.detach() >= (-ratio * adv.detach()) - 1e-6)
    assert logp_old.grad is None and adv.grad is None


# ---------------------------------------------------------------------------
# The averaged loss and its diagnostics
# ---------------------------------------------------------------------------


def test_clipped_surrogate_loss_by_hand():
    # The four entries of the hand example above: mean of [-2.4, 2.8, -0.5, 0.8] = 0.7 / 4 = 0.175.
    logp = torch.tensor([math.log(0.7), math.log(0.7), math.log(0.25), math.log(0.25)], dtype=torch.float64)
    logp_old = torch.full((4,), math.log(0.5), dtype=torch.float64)
    adv = torch.tensor([2.0, -2.0, 1.0, -1.0], dtype=torch.float64)
    loss, info = clipped_surrogate_loss(logp, logp_old, adv, 0.2)
    torch.testing.assert_close(loss, torch.tensor(0.175, dtype=torch.float64))
    # Every ratio (1.4 or 0.5) is outside [0.8, 1.2]: clip_fraction = 4/4; the clip binds for 2 of them.
    assert info["clip_fraction"] == 1.0
    assert info["clip_active_fraction"] == 0.5
    # k3: (ratio - 1) - log(ratio) = 0.4 - log 1.4 = 0.063528... and -0.5 - log 0.5 = 0.193147...; mean of 2 each.
    expected_kl = ((0.4 - math.log(1.4)) + (-0.5 - math.log(0.5))) / 2
    assert info["approx_kl"] == pytest.approx(expected_kl)
    assert all(isinstance(v, float) for v in info.values())
    # With a mask keeping entries 0 and 1 only: (-2.4 + 2.8) / 2 = 0.2.
    masked, info = clipped_surrogate_loss(logp, logp_old, adv, 0.2, mask=torch.tensor([1, 1, 0, 0]))
    torch.testing.assert_close(masked, torch.tensor(0.2, dtype=torch.float64))
    assert info["clip_active_fraction"] == 0.5 and info["clip_fraction"] == 1.0


def test_ratio_one_gives_minus_mean_advantage_and_zero_diagnostics():
    logp, _, adv = _policy_tensors(3, (3, 4))
    logp = logp.requires_grad_(True)
    loss, info = clipped_surrogate_loss(logp, logp.detach().clone(), adv, 0.2)
    torch.testing.assert_close(loss, -adv.mean())
    loss.backward()
    torch.testing.assert_close(logp.grad, -adv / adv.numel())  # d/dlogp of -mean(ratio * adv) at ratio 1
    assert info["clip_fraction"] == 0.0 and info["approx_kl"] == 0.0


def test_all_masked_gives_zero_not_nan():
    logp, logp_old, adv = _policy_tensors(0, (2, 3))
    loss, info = clipped_surrogate_loss(logp, logp_old, adv, 0.2, mask=torch.zeros(2, 3, dtype=torch.bool))
    assert loss.item() == 0.0 and info["clip_fraction"] == 0.0 and info["approx_kl"] == 0.0
    assert value_loss(logp, adv, mask=torch.zeros(2, 3)).item() == 0.0


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), shape=st.tuples(st.integers(1, 4), st.integers(1, 6)))
def test_masked_entries_never_change_the_loss(seed, shape):
    logp, logp_old, adv = _policy_tensors(seed, shape)
    g = torch.Generator().manual_seed(seed + 1)
    mask = torch.rand(shape, generator=g) < 0.5
    leaf = logp.clone().requires_grad_(True)
    loss, info = clipped_surrogate_loss(leaf, logp_old, adv, 0.2, mask=mask)
    loss.backward()
    # Overwrite every padded entry with garbage (huge, inf, NaN): loss, info and gradients stay the same.
    junk = torch.where(mask, logp, torch.full_like(logp, 50.0))
    leaf2 = junk.clone().requires_grad_(True)
    loss2, info2 = clipped_surrogate_loss(
        leaf2, torch.where(mask, logp_old, -torch.inf), torch.where(mask, adv, torch.nan), 0.2, mask=mask
    )
    loss2.backward()
    torch.testing.assert_close(loss2, loss)
    assert info2 == pytest.approx(info)
    torch.testing.assert_close(leaf2.grad[mask], leaf.grad[mask])
    assert torch.all(leaf2.grad[~mask] == 0)
    # Value loss too.
    v, r = torch.randn(shape, generator=g, dtype=torch.float64), torch.randn(shape, generator=g, dtype=torch.float64)
    expected = value_loss(v, r, mask=mask)
    garbage = value_loss(torch.where(mask, v, 1e6), torch.where(mask, r, torch.nan), mask=mask)
    torch.testing.assert_close(garbage, expected)


def cleanrl_policy_loss(newlogprob, oldlogprob, mb_advantages, clip_coef):
    """CleanRL's ppo.py, written out: the loss, its clip fraction and its approx_kl."""
    logratio = newlogprob - oldlogprob
    ratio = logratio.exp()
    approx_kl = ((ratio - 1) - logratio).mean()
    clipfrac = ((ratio - 1.0).abs() > clip_coef).float().mean().item()
    pg_loss1 = -mb_advantages * ratio
    pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    pg_loss = torch.max(pg_loss1, pg_loss2).mean()
    return pg_loss, clipfrac, approx_kl.item()


def trl_clip_region_fraction(coef_1, advantages, epsilon_low, epsilon_high):
    """TRL's GRPO clip statistics: only where the clip zeroes the gradient."""
    is_low_clipped = (coef_1 < 1 - epsilon_low) & (advantages < 0)
    is_high_clipped = (coef_1 > 1 + epsilon_high) & (advantages > 0)
    return (is_low_clipped | is_high_clipped).float().mean().item()


@settings(max_examples=50, deadline=None)
@given(
    seed=st.integers(0, 10_000), shape=st.tuples(st.integers(1, 4), st.integers(1, 6)), clip_eps=st.floats(0.05, 0.5)
)
def test_matches_cleanrl_and_trl_definitions(seed, shape, clip_eps):
    logp, logp_old, adv = _policy_tensors(seed, shape, spread=0.5)
    loss, info = clipped_surrogate_loss(logp, logp_old, adv, clip_eps)
    pg_loss, clipfrac, approx_kl = cleanrl_policy_loss(logp, logp_old, adv, clip_eps)
    torch.testing.assert_close(loss, pg_loss)
    assert info["clip_fraction"] == pytest.approx(clipfrac)
    assert info["approx_kl"] == pytest.approx(approx_kl)
    assert info["approx_kl"] >= 0.0  # k3 is never negative
    ratio = torch.exp(logp - logp_old)
    assert info["clip_active_fraction"] == pytest.approx(trl_clip_region_fraction(ratio, adv, clip_eps, clip_eps))
    assert info["clip_active_fraction"] <= info["clip_fraction"]


# ---------------------------------------------------------------------------
# The value loss
# ---------------------------------------------------------------------------


def test_value_loss_by_hand():
    # values [1, 2], returns [0, 0]: 0.5 * (1 + 4) / 2 = 1.25; gradient (values - returns) / 2 = [0.5, 1.0].
    values, returns = _leaf([1.0, 2.0]), _leaf([0.0, 0.0])
    loss = value_loss(values, returns)
    torch.testing.assert_close(loss, torch.tensor(1.25, dtype=torch.float64))
    loss.backward()
    torch.testing.assert_close(values.grad, torch.tensor([0.5, 1.0], dtype=torch.float64))
    assert returns.grad is None


def test_clipped_value_loss_by_hand():
    # clip_eps = 0.2, three entries:
    #  v_old 0.5, v 1.0, R 0: clipped v = 0.7; errors 1.0 and 0.49; max 1.0 (unclipped, gradient 2 * 1.0)
    #  v_old 0.0, v 1.0, R 1: clipped v = 0.2; errors 0.0 and 0.64; max 0.64 (clipped, gradient 0)
    #  v_old 0.0, v 0.1, R 1: clipped v = 0.1 (inside); both errors 0.81 (gradient 2 * -0.9)
    # loss = 0.5 * (1.0 + 0.64 + 0.81) / 3 = 0.408333...
    values, returns, values_old = _leaf([1.0, 1.0, 0.1]), _leaf([0.0, 1.0, 1.0]), _leaf([0.5, 0.0, 0.0])
    loss = value_loss(values, returns, values_old=values_old, clip_eps=0.2)
    torch.testing.assert_close(loss, torch.tensor(0.5 * 2.45 / 3, dtype=torch.float64))
    loss.backward()
    # d/dv of 0.5 * e / 3: (v - R) / 3 where the unclipped error is taken, 0 where the clip binds
    torch.testing.assert_close(values.grad, torch.tensor([1.0 / 3, 0.0, -0.9 / 3], dtype=torch.float64))
    assert returns.grad is None and values_old.grad is None


def cleanrl_value_loss(newvalue, b_returns, b_values, clip_coef):
    """CleanRL's clip_vloss branch, written out."""
    v_loss_unclipped = (newvalue - b_returns) ** 2
    v_clipped = b_values + torch.clamp(newvalue - b_values, -clip_coef, clip_coef)
    v_loss_clipped = (v_clipped - b_returns) ** 2
    v_loss_max = torch.max(v_loss_unclipped, v_loss_clipped)
    return 0.5 * v_loss_max.mean()


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 20), clip_eps=st.floats(0.01, 1.0))
def test_value_loss_matches_cleanrl_and_sb3(seed, n, clip_eps):
    g = torch.Generator().manual_seed(seed)
    values, returns, values_old = (torch.randn(n, generator=g, dtype=torch.float64) for _ in range(3))
    torch.testing.assert_close(
        value_loss(values, returns, values_old, clip_eps), cleanrl_value_loss(values, returns, values_old, clip_eps)
    )
    # SB3 uses F.mse_loss without the 0.5: the course's loss is exactly half of it.
    torch.testing.assert_close(value_loss(values, returns), 0.5 * torch.nn.functional.mse_loss(values, returns))
    # Clipping is pessimistic: never below the unclipped loss.
    assert value_loss(values, returns, values_old, clip_eps) >= value_loss(values, returns) - 1e-12


# ---------------------------------------------------------------------------
# Entropy and explained variance
# ---------------------------------------------------------------------------


def test_entropy_from_logits():
    # Uniform over 4 actions: log 4; a certain action (others -inf): 0, not NaN.
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [3.0, -torch.inf, -torch.inf, -torch.inf]])
    torch.testing.assert_close(entropy_from_logits(logits), torch.tensor([math.log(4.0), 0.0]))
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 3, 5, generator=g, dtype=torch.float64)
    expected = torch.distributions.Categorical(logits=logits).entropy()
    torch.testing.assert_close(entropy_from_logits(logits), expected)


def test_explained_variance():
    returns = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(returns, returns) == pytest.approx(1.0)
    assert explained_variance(torch.full((4,), 2.5), returns) == pytest.approx(0.0)  # a constant: the mean
    # Var(returns - values) = Var([1, 2, 3, 4]) with values = 0: 1 - 1 = 0; values = returns / 2: 1 - 0.25 = 0.75.
    assert explained_variance(returns / 2, returns) == pytest.approx(0.75)
    assert math.isnan(explained_variance(returns, torch.ones(4)))


# ---------------------------------------------------------------------------
# PPOLoss and PPOConfig
# ---------------------------------------------------------------------------


def test_ppo_loss_is_the_sum_of_its_parts_with_gradients():
    logp, logp_old, adv = _policy_tensors(5, (3, 4), spread=0.5)
    g = torch.Generator().manual_seed(6)
    values, returns = (torch.randn(3, 4, generator=g, dtype=torch.float64) for _ in range(2))
    entropy = torch.rand(3, 4, generator=g, dtype=torch.float64)
    leaves = [x.clone().requires_grad_(True) for x in (logp, logp_old, values, returns, adv, entropy)]
    module = PPOLoss(clip_epsilon=0.1, value_loss_coef=0.7, entropy_coef=0.05)
    total = module(*leaves)
    expected = (
        clipped_surrogate_loss(logp, logp_old, adv, 0.1)[0] + 0.7 * value_loss(values, returns) - 0.05 * entropy.mean()
    )
    torch.testing.assert_close(total, expected)
    total.backward()
    lp, lp_old, v, ret, a, ent = leaves
    torch.testing.assert_close(ent.grad, torch.full_like(entropy, -0.05 / 12))  # more entropy, lower loss
    torch.testing.assert_close(v.grad, 0.7 * (values - returns) / 12)
    assert lp_old.grad is None and ret.grad is None and a.grad is None
    assert lp.grad is not None
    assert set(module.info) >= {"policy_loss", "value_loss", "entropy", "clip_fraction", "approx_kl"}


def test_ppo_loss_with_a_mask_averages_valid_entries_only():
    logp, logp_old, adv = _policy_tensors(7, (2, 5), spread=0.5)
    values, returns, entropy = (torch.randn(2, 5, dtype=torch.float64) for _ in range(3))
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    total = PPOLoss()(logp, logp_old, values, returns, adv, entropy, mask=mask)
    expected = (
        clipped_surrogate_loss(logp[mask], logp_old[mask], adv[mask], 0.2)[0]
        + 0.5 * value_loss(values[mask], returns[mask])
        - 0.01 * entropy[mask].mean()
    )
    torch.testing.assert_close(total, expected)


def test_ppo_loss_compute_gae_treats_rows_as_whole_episodes():
    # rewards [1, 1, 1], values 0, gamma = lam = 1: advantages are the rewards-to-go [3, 2, 1].
    adv, ret = PPOLoss().compute_gae(torch.ones(1, 3), torch.zeros(1, 3), gamma=1.0, lam=1.0)
    torch.testing.assert_close(adv, torch.tensor([[3.0, 2.0, 1.0]]))
    torch.testing.assert_close(ret, adv)
    # Same as course_lib.gae.compute_gae with a terminal at the last step of each row (no bootstrap).
    rewards, values = torch.randn(4, 6, dtype=torch.float64), torch.randn(4, 6, dtype=torch.float64)
    dones = torch.zeros(4, 6, dtype=torch.bool)
    dones[:, -1] = True
    expected = gae.compute_gae(rewards, values, dones, torch.full((4,), 99.0, dtype=torch.float64), 0.99, 0.95)
    for got, exp in zip(PPOLoss().compute_gae(rewards, values), expected):
        torch.testing.assert_close(got, exp)


def test_ppo_config_defaults_and_docstrings():
    config = PPOConfig()
    module = PPOLoss()
    assert (config.clip_eps, config.value_loss_coef, config.ent_coef) == (
        module.clip_epsilon,
        module.value_loss_coef,
        module.entropy_coef,
    )
    assert (config.gamma, config.lam) == (0.99, 0.95)
    source = open(ppo.__file__).read()
    for field in dataclasses.fields(PPOConfig):  # one docstring line under every field
        line = next(row for row in source.splitlines() if row.strip().startswith(f"{field.name}:"))
        following = source.splitlines()[source.splitlines().index(line) + 1].strip()
        assert following.startswith('"""'), field.name


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

X = torch.zeros(2, 3)


@pytest.mark.parametrize(
    "fn, kwargs, argname",
    [
        (clipped_surrogate, dict(logp=[0.0]), "logp"),
        (clipped_surrogate, dict(logp_old=torch.zeros(3)), "logp_old"),
        (clipped_surrogate, dict(adv=torch.zeros(3, 2)), "adv"),
        (clipped_surrogate, dict(clip_eps=0.0), "clip_eps"),
        (clipped_surrogate, dict(clip_eps=-0.2), "clip_eps"),
        (clipped_surrogate, dict(clip_eps_high=0.0), "clip_eps_high"),
        (clipped_surrogate_loss, dict(logp=torch.zeros(2, 3, dtype=torch.long)), "logp"),
        (clipped_surrogate_loss, dict(adv=torch.zeros(2)), "adv"),
        (clipped_surrogate_loss, dict(clip_eps=0), "clip_eps"),
        (clipped_surrogate_loss, dict(mask=torch.ones(3, 2)), "mask"),
        (clipped_surrogate_loss, dict(mask=torch.full((2, 3), 0.5)), "mask"),
    ],
)
def test_policy_loss_bad_input(fn, kwargs, argname):
    args = dict(logp=X, logp_old=X, adv=X, clip_eps=0.2) | kwargs
    with pytest.raises(ValueError, match=argname):
        fn(**args)


@pytest.mark.parametrize(
    "kwargs, argname",
    [
        (dict(values="0"), "values"),
        (dict(returns=torch.zeros(3)), "returns"),
        (dict(values_old=torch.zeros(3), clip_eps=0.2), "values_old"),
        (dict(clip_eps=0.2), "values_old"),  # clipping needs the old values
        (dict(values_old=X, clip_eps=-1.0), "clip_eps"),
        (dict(mask=torch.ones(6)), "mask"),
    ],
)
def test_value_loss_bad_input(kwargs, argname):
    args = dict(values=X, returns=X) | kwargs
    with pytest.raises(ValueError, match=argname):
        value_loss(**args)


def test_other_bad_input():
    with pytest.raises(ValueError, match="logits"):
        entropy_from_logits(torch.zeros(()))
    with pytest.raises(ValueError, match="returns"):
        explained_variance(X, torch.zeros(3))
    with pytest.raises(ValueError, match="clip_epsilon"):
        PPOLoss(clip_epsilon=0.0)
    with pytest.raises(ValueError, match="value_loss_coef"):
        PPOLoss(value_loss_coef=-1.0)
    with pytest.raises(ValueError, match="entropy_coef"):
        PPOLoss(entropy_coef=-0.1)
    with pytest.raises(ValueError, match="entropy"):
        PPOLoss()(X, X, X, X, X, torch.zeros(3))
    with pytest.raises(ValueError, match="values"):
        PPOLoss().compute_gae(X, torch.zeros(3))
    with pytest.raises(ValueError, match="gamma"):
        PPOLoss().compute_gae(X, X, gamma=1.5)
    with pytest.raises(ValueError, match="lam"):
        PPOLoss().compute_gae(X, X, lam=-0.5)


# ---------------------------------------------------------------------------
# The checks themselves
# ---------------------------------------------------------------------------


def test_checks_accept_the_reference(capsys):
    assert ppo_checks.check_clipped_surrogate(clipped_surrogate) is True
    assert ppo_checks.check_clipped_surrogate_loss(clipped_surrogate_loss) is True
    assert ppo_checks.check_value_loss(value_loss) is True
    assert ppo_checks.check_ppo_loss(PPOLoss) is True
    assert capsys.readouterr().out.count("\u2714") == 4


def test_checks_let_not_implemented_through():
    def stub(*args, **kwargs):
        raise NotImplementedError

    for check in (
        ppo_checks.check_clipped_surrogate,
        ppo_checks.check_clipped_surrogate_loss,
        ppo_checks.check_value_loss,
        ppo_checks.check_ppo_loss,
    ):
        with pytest.raises(NotImplementedError):
            check(stub)


def test_check_names_the_quotient_ratio():
    def quotient(logp, logp_old, adv, clip_eps, clip_eps_high=None):
        ratio = logp / logp_old.detach()
        high = clip_eps if clip_eps_high is None else clip_eps_high
        return -torch.min(ratio * adv.detach(), ratio.clamp(1 - clip_eps, 1 + high) * adv.detach())

    with pytest.raises(AssertionError, match="logp / logp_old; use exp"):
        ppo_checks.check_clipped_surrogate(quotient)
