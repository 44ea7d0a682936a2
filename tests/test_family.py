"""Tests for course_lib.family: the GRPO family's advantages, DAPO's parts and the per-token losses."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.family import (
    cispo_loss,
    dynamic_sampling_mask,
    filter_truncated,
    gmpo_loss,
    gspo_loss,
    gspo_sequence_log_ratio,
    reinforce_pp_advantages,
    rloo_advantages,
    sapo_loss,
    soft_overlong_penalty,
)
from course_lib.grpo import aggregate_loss, group_advantages
from course_lib.ppo import clipped_surrogate

F64 = torch.float64
rewards_tables = st.integers(1, 4).flatmap(
    lambda B: st.integers(1, 6).flatmap(
        lambda G: st.lists(st.floats(-5, 5, allow_nan=False), min_size=B * G, max_size=B * G).map(
            lambda xs: torch.tensor(xs, dtype=F64).view(B, G)
        )
    )
)


def grad_of(loss, x):
    (g,) = torch.autograd.grad(loss, x)
    return g


# ---------------------------------------------------------------------------
# RLOO
# ---------------------------------------------------------------------------


def test_rloo_hand_computed():
    # (1, 0, 0, 1): response 0's others average (0 + 0 + 1) / 3 = 1/3, so 1 - 1/3 = 2/3;
    # response 1's others average 2/3, so 0 - 2/3 = -2/3.
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [3.0, 1.0, 2.0, 2.0]], dtype=F64)
    expected = torch.tensor([[2 / 3, -2 / 3, -2 / 3, 2 / 3], [3 - 5 / 3, 1 - 7 / 3, 0.0, 0.0]], dtype=F64)
    torch.testing.assert_close(rloo_advantages(rewards), expected)


def test_rloo_group_of_one_and_of_two():
    torch.testing.assert_close(rloo_advantages(torch.tensor([[0.7], [-1.0]])), torch.zeros(2, 1))
    # G = 2: each is compared with the other alone.
    torch.testing.assert_close(rloo_advantages(torch.tensor([[2.0, 0.5]])), torch.tensor([[1.5, -1.5]]))


@settings(max_examples=60, deadline=None)
@given(rewards_tables)
def test_rloo_is_the_centred_reward_scaled_by_g_over_g_minus_1(rewards):
    G = rewards.shape[-1]
    adv = rloo_advantages(rewards)
    scale = G / (G - 1) if G > 1 else 0.0
    torch.testing.assert_close(adv, scale * group_advantages(rewards, normalize_std=False), atol=1e-9, rtol=1e-9)
    torch.testing.assert_close(adv.sum(-1), torch.zeros(rewards.shape[0], dtype=F64), atol=1e-9, rtol=0)


@settings(max_examples=40, deadline=None)
@given(rewards_tables)
def test_rloo_baseline_does_not_depend_on_own_reward(rewards):
    # Moving r_i changes adv_i by exactly the same amount (its baseline ignores it) when G > 1.
    if rewards.shape[-1] < 2:
        return
    moved = rewards.clone()
    moved[:, 0] += 1.5
    torch.testing.assert_close(
        rloo_advantages(moved)[:, 0] - rloo_advantages(rewards)[:, 0], torch.full((rewards.shape[0],), 1.5, dtype=F64)
    )


# ---------------------------------------------------------------------------
# REINFORCE++
# ---------------------------------------------------------------------------


def test_reinforce_pp_hand_computed():
    # Group-centred: (0.5, -0.5) and (1, -1); batch mean 0; Bessel std of (0.5, -0.5, 1, -1) = sqrt(2.5 / 3).
    rewards = torch.tensor([[1.0, 0.0], [3.0, 1.0]], dtype=F64)
    std = math.sqrt(2.5 / 3) + 1e-6
    torch.testing.assert_close(
        reinforce_pp_advantages(rewards), torch.tensor([[0.5, -0.5], [1.0, -1.0]], dtype=F64) / std
    )
    # Without the group baseline: the raw rewards whitened over the batch, mean 1.25.
    plain = reinforce_pp_advantages(rewards, group_baseline=False)
    torch.testing.assert_close(plain, (rewards - 1.25) / (rewards.flatten().std() + 1e-6))


def test_reinforce_pp_differs_from_grpo_in_where_it_normalises():
    rewards = torch.tensor([[1.0, 0.0], [3.0, 1.0]], dtype=F64)
    grpo = group_advantages(rewards)  # each group divided by its own std: both rows equal
    torch.testing.assert_close(grpo[0], grpo[1], atol=1e-5, rtol=0)  # up to eps
    rpp = reinforce_pp_advantages(rewards)  # one std for the batch: the wider group keeps larger advantages
    torch.testing.assert_close(rpp[1], 2 * rpp[0])


def test_reinforce_pp_no_spread_gives_zeros():
    assert torch.equal(reinforce_pp_advantages(torch.full((3, 4), 0.7)), torch.zeros(3, 4))
    assert torch.equal(reinforce_pp_advantages(torch.tensor([[0.7]]), group_baseline=False), torch.zeros(1, 1))
    assert torch.equal(reinforce_pp_advantages(torch.tensor([[1.0, 1.0], [0.0, 0.0]])), torch.zeros(2, 2))


@settings(max_examples=60, deadline=None)
@given(rewards_tables, st.booleans())
def test_reinforce_pp_is_whitened_over_the_batch(rewards, group_baseline):
    adv = reinforce_pp_advantages(rewards, group_baseline=group_baseline)
    assert torch.isfinite(adv).all()
    assert abs(adv.mean().item()) < 1e-9
    if adv.abs().max() > 0 and adv.numel() > 1:
        assert adv.std().item() <= 1.0 + 1e-9


# ---------------------------------------------------------------------------
# DAPO's parts
# ---------------------------------------------------------------------------


def test_dynamic_sampling_keeps_groups_with_spread():
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 1.0], [0.5, 0.5, 0.6]])
    assert dynamic_sampling_mask(rewards).tolist() == [False, False, True, True]
    assert dynamic_sampling_mask(torch.tensor([[0.3], [1.0]])).tolist() == [False, False]  # G = 1: no signal


@settings(max_examples=40, deadline=None)
@given(rewards_tables)
def test_dynamic_sampling_keeps_exactly_the_groups_with_nonzero_advantages(rewards):
    kept = dynamic_sampling_mask(rewards)
    assert kept.dtype == torch.bool and kept.shape == rewards.shape[:1]
    assert torch.equal(kept, group_advantages(rewards, normalize_std=False).abs().amax(-1) > 0)


def test_soft_overlong_penalty_eq_13():
    # L_max = 10, L_cache = 4: no penalty up to 6, then -1/4 per token, -1 past 10.
    lengths = torch.tensor([1, 6, 7, 8, 10, 11, 50])
    torch.testing.assert_close(
        soft_overlong_penalty(lengths, 10, 4), torch.tensor([0.0, 0.0, -0.25, -0.5, -1.0, -1.0, -1.0])
    )
    # cache 0: a hard edge. Float lengths keep their dtype.
    torch.testing.assert_close(
        soft_overlong_penalty(torch.tensor([10.0, 11.0], dtype=F64), 10, 0), torch.tensor([0.0, -1.0], dtype=F64)
    )


def test_soft_overlong_penalty_matches_trl():
    from trl.rewards import get_soft_overlong_punishment

    trl_reward = get_soft_overlong_punishment(max_completion_len=20, soft_punish_cache=5)
    lengths = list(range(0, 26))
    expected = torch.tensor(trl_reward([[7] * n for n in lengths]))
    torch.testing.assert_close(soft_overlong_penalty(torch.tensor(lengths), 20, 5), expected)


def test_filter_truncated_zeroes_the_rows():
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0]])
    truncated = torch.tensor([False, True, False])
    assert filter_truncated(mask, truncated).tolist() == [[1, 1, 0], [0, 0, 0], [1, 0, 0]]
    as_bool = filter_truncated(mask.bool(), truncated)
    assert as_bool.dtype == torch.bool and as_bool.sum() == 3
    # The filtered completion's tokens no longer count in any aggregation.
    per_token = torch.tensor([[1.0, 1.0, 0.0], [100.0, 100.0, 100.0], [3.0, 0.0, 0.0]])
    assert aggregate_loss(per_token, filter_truncated(mask, truncated), "token-mean").item() == pytest.approx(5 / 3)


# ---------------------------------------------------------------------------
# GSPO
# ---------------------------------------------------------------------------


def test_gspo_sequence_log_ratio_hand_computed():
    logp = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, float("nan"), float("-inf")]], dtype=F64)
    logp_old = torch.tensor([[-1.5, -1.0, -3.0], [-1.0, 0.0, 0.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    # Row 0: (0.5 - 1.0 + 0) / 3 = -1/6; row 1: one valid token, 0.5; padding ignored, NaN or not.
    torch.testing.assert_close(gspo_sequence_log_ratio(logp, logp_old, mask), torch.tensor([-1 / 6, 0.5], dtype=F64))
    empty = gspo_sequence_log_ratio(logp[:1], logp_old[:1], torch.zeros(1, 3))
    assert empty.item() == 0.0  # an empty response: ratio 1


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.integers(0, 10_000))
def test_gspo_ratio_is_the_geometric_mean_of_token_ratios(n, T, seed):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(n, T, generator=g, dtype=F64) * 3
    logp_old = logp + 0.3 * torch.randn(n, T, generator=g, dtype=F64)
    lengths = torch.randint(1, T + 1, (n,), generator=g)
    mask = torch.arange(T) < lengths[:, None]
    s = torch.exp(gspo_sequence_log_ratio(logp, logp_old, mask))
    token_ratio = torch.exp(logp - logp_old)
    for i in range(n):
        product = token_ratio[i, : lengths[i]].prod()
        torch.testing.assert_close(s[i], product ** (1.0 / lengths[i].item()))


def test_gspo_loss_is_one_clipped_value_per_response():
    logp_old = torch.zeros(2, 3, dtype=F64)
    logp = torch.tensor([[0.3, 0.3, 0.3], [0.05, -0.05, 9.0]], dtype=F64, requires_grad=True)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    adv = torch.tensor([1.0, -2.0], dtype=F64)
    loss = gspo_loss(logp, logp_old, adv, mask, clip_eps=0.2)
    # Row 0: s = e^0.3 = 1.35 > 1.2 with A > 0: clipped to 1.2, loss -1.2, no gradient.
    # Row 1: s = e^0 = 1 (the padding's 9.0 is ignored): loss -(1 * -2) = 2.
    torch.testing.assert_close(loss.detach(), torch.tensor([[-1.2] * 3, [2.0] * 3], dtype=F64))
    total = aggregate_loss(loss, mask, "seq-mean-token-mean")
    torch.testing.assert_close(total.detach(), torch.tensor(0.4, dtype=F64))
    g = grad_of(total, logp)
    assert torch.equal(g[0], torch.zeros(3, dtype=F64))
    # d/dlogp_t of -s * A / 2 (mean over 2 responses), with ds/dlogp_t = s / |y| for valid t.
    torch.testing.assert_close(g[1], torch.tensor([1.0, 1.0, 0.0], dtype=F64) / 2)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.05, 0.5), st.floats(0.05, 0.5))
def test_gspo_of_one_token_responses_is_ppo(seed, clip_eps, clip_eps_high):
    g = torch.Generator().manual_seed(seed)
    logp = torch.randn(5, 1, generator=g, dtype=F64).requires_grad_()
    logp_old = logp.detach() + 0.4 * torch.randn(5, 1, generator=g, dtype=F64)
    adv = torch.randn(5, generator=g, dtype=F64)
    ours = gspo_loss(logp, logp_old, adv, torch.ones(5, 1), clip_eps, clip_eps_high)
    ppo = clipped_surrogate(logp, logp_old, adv[:, None], clip_eps, clip_eps_high)
    torch.testing.assert_close(ours, ppo)
    torch.testing.assert_close(grad_of(ours.sum(), logp), grad_of(ppo.sum(), logp))


# ---------------------------------------------------------------------------
# CISPO and SAPO
# ---------------------------------------------------------------------------


def test_cispo_hand_computed_value_and_gradient():
    logp_old = torch.zeros(3, dtype=F64)
    logp = torch.tensor([math.log(2.0), math.log(0.5), math.log(1.1)], dtype=F64, requires_grad=True)
    adv = torch.tensor([1.0, -1.0, 2.0], dtype=F64)
    loss = cispo_loss(logp, logp_old, adv, clip_eps_high=0.2)
    # Weights: 2 capped at 1.2; 0.5 stays (no lower bound); 1.1 stays.
    weights = torch.tensor([1.2, 0.5, 1.1], dtype=F64)
    torch.testing.assert_close(loss.detach(), -weights * adv * logp.detach())
    # Every token keeps a gradient, even the capped one: -w * A.
    torch.testing.assert_close(grad_of(loss.sum(), logp), -weights * adv)
    # With a lower bound the 0.5 weight is floored at 0.8.
    low = cispo_loss(logp, logp_old, adv, clip_eps_high=0.2, clip_eps=0.2)
    torch.testing.assert_close(grad_of(low.sum(), logp), -torch.tensor([1.2, 0.8, 1.1], dtype=F64) * adv)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.05, 5.0))
def test_cispo_gradient_is_never_zeroed_and_equals_ppo_inside_the_range(seed, clip_eps_high):
    g = torch.Generator().manual_seed(seed)
    logp = torch.randn(6, generator=g, dtype=F64).requires_grad_()
    logp_old = logp.detach() + 0.5 * torch.randn(6, generator=g, dtype=F64)
    adv = torch.randn(6, generator=g, dtype=F64)
    grad = grad_of(cispo_loss(logp, logp_old, adv, clip_eps_high).sum(), logp)
    assert (grad != 0).all()
    ratio = torch.exp(logp.detach() - logp_old)
    inside = ratio <= 1 + clip_eps_high
    # Where the weight is not capped, CISPO's gradient is the unclipped surrogate's: -ratio * A * grad logp.
    torch.testing.assert_close(grad[inside], (-ratio * adv)[inside])


def test_sapo_is_the_policy_gradient_at_ratio_one_and_fades_far_from_it():
    logp = torch.tensor([-1.0, -1.0, -1.0, -1.0], dtype=F64, requires_grad=True)
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=F64)
    on_policy = logp.detach().clone()
    loss = sapo_loss(logp, on_policy, adv)
    torch.testing.assert_close(loss.detach(), -2.0 / torch.tensor([1.0, 1.05, 1.0, 1.05], dtype=F64) * adv)
    torch.testing.assert_close(grad_of(loss.sum(), logp), -adv)  # f'(1) * ratio = 1
    far = sapo_loss(logp, on_policy - 3.0, adv)  # ratio e^3 = 20
    assert (grad_of(far.sum(), logp).abs() < 1e-3).all()


# ---------------------------------------------------------------------------
# GMPO
# ---------------------------------------------------------------------------


def test_gmpo_hand_computed():
    # Token log ratios (0.5, -0.1) and a padded 9.0; the clip range is [-0.4, 0.4] in log space.
    logp_old = torch.zeros(2, 3, dtype=F64)
    logp = torch.tensor([[0.5, -0.1, 9.0], [0.5, -0.1, 9.0]], dtype=F64, requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [1, 1, 0]])
    adv = torch.tensor([2.0, -2.0], dtype=F64)
    loss = gmpo_loss(logp, logp_old, adv, mask)
    # A > 0: the smaller of each log ratio and its clip, (0.4, -0.1), mean 0.15.
    # A < 0: the larger, (0.5, -0.1), mean 0.2.
    expected = torch.tensor([-2.0 * math.exp(0.15), 2.0 * math.exp(0.2)], dtype=F64)
    torch.testing.assert_close(loss.detach(), expected[:, None].expand(2, 3))
    g = grad_of(loss[:, 0].sum(), logp)
    # d/dlogp_t of -A exp(mean): -A exp(mean) / 2 where the token is not clipped, 0 where it is (and padding).
    torch.testing.assert_close(g[0], torch.tensor([0.0, -math.exp(0.15), 0.0], dtype=F64))
    torch.testing.assert_close(g[1], torch.tensor([math.exp(0.2), math.exp(0.2), 0.0], dtype=F64))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.integers(0, 10_000), st.floats(0.05, 0.6))
def test_gmpo_is_the_papers_geometric_mean_of_clipped_terms(n, T, seed, clip_eps):
    """GMPO's objective as the paper writes it: sgn(A) (prod_t |min(r_t A, clip(r_t, e^-eps, e^eps) A)|)^(1/|y|)."""
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(n, T, generator=g, dtype=F64) * 3
    logp_old = logp + 0.4 * torch.randn(n, T, generator=g, dtype=F64)
    adv = torch.randn(n, generator=g, dtype=F64)
    lengths = torch.randint(1, T + 1, (n,), generator=g)
    mask = torch.arange(T) < lengths[:, None]
    ours = gmpo_loss(logp, logp_old, adv, mask, clip_eps)[:, 0]
    for i in range(n):
        ratio = torch.exp(logp[i, : lengths[i]] - logp_old[i, : lengths[i]])
        clipped = ratio.clamp(math.exp(-clip_eps), math.exp(clip_eps))
        terms = torch.minimum(ratio * adv[i], clipped * adv[i]).abs()
        objective = torch.sign(adv[i]) * terms.prod() ** (1.0 / lengths[i].item())
        torch.testing.assert_close(ours[i], -objective)


# ---------------------------------------------------------------------------
# Bad input names the argument
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: rloo_advantages(torch.zeros(4)), "rewards"),
        (lambda: reinforce_pp_advantages(torch.zeros(2, 2), group_baseline=1), "group_baseline"),
        (lambda: reinforce_pp_advantages(torch.zeros(2, 2), eps=0.0), "eps"),
        (lambda: dynamic_sampling_mask(torch.zeros(2, 2, 2)), "rewards"),
        (lambda: soft_overlong_penalty([3, 4], 10, 2), "lengths"),
        (lambda: soft_overlong_penalty(torch.tensor([3]), 0, 0), "max_len"),
        (lambda: soft_overlong_penalty(torch.tensor([3]), 10, 11), "cache_len"),
        (lambda: soft_overlong_penalty(torch.tensor([3]), 10, -1), "cache_len"),
        (lambda: filter_truncated(torch.ones(2, 3), torch.tensor([1, 0])), "truncated"),
        (lambda: filter_truncated(torch.ones(2, 3), torch.tensor([True])), "truncated"),
        (lambda: filter_truncated(torch.full((2, 3), 2.0), torch.tensor([True, False])), "mask"),
        (lambda: gspo_sequence_log_ratio(torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3)), "logp_old"),
        (lambda: gspo_sequence_log_ratio(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(3)), "mask"),
        (lambda: gspo_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 3), 0.2), "adv"),
        (lambda: gspo_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2), torch.ones(2, 3), 0.0), "clip_eps"),
        (lambda: cispo_loss(torch.zeros(3), torch.zeros(3), torch.zeros(2), 0.2), "adv"),
        (lambda: cispo_loss(torch.zeros(3), torch.zeros(3), torch.zeros(3), -1.0), "clip_eps_high"),
        (lambda: cispo_loss(torch.zeros(3), torch.zeros(3), torch.zeros(3), 0.2, clip_eps=0.0), "clip_eps"),
        (lambda: sapo_loss(torch.zeros(3), torch.zeros(3), torch.zeros(3), tau_neg=0.0), "tau_neg"),
        (lambda: gmpo_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3), torch.ones(2, 3)), "adv"),
        (lambda: gmpo_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2), torch.ones(2, 3), -0.4), "clip_eps"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}:"):
        call()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtypes_are_kept(dtype):
    x = torch.zeros(2, 3, dtype=dtype)
    assert rloo_advantages(x).dtype == dtype and reinforce_pp_advantages(x).dtype == dtype
    assert gspo_loss(x, x, x[:, 0], torch.ones(2, 3), 0.2).dtype == dtype
    assert cispo_loss(x, x, x, 0.2).dtype == dtype and sapo_loss(x, x, x).dtype == dtype
    assert gmpo_loss(x, x, x[:, 0], torch.ones(2, 3)).dtype == dtype


@pytest.mark.usefixtures("trusting")
def test_checks_accept_the_references(capsys):
    from course_lib.checks.family import check_cispo_loss, check_gspo_sequence_log_ratio, check_rloo_advantages

    assert check_rloo_advantages(rloo_advantages)
    assert check_gspo_sequence_log_ratio(gspo_sequence_log_ratio)
    assert check_cispo_loss(cispo_loss)
    assert capsys.readouterr().out.count("\u2714") == 3
