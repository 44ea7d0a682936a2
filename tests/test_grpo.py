"""Tests for course_lib.grpo: group advantages, KL estimators, loss aggregation, the GRPO loss."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.baselines import compute_deltas
from course_lib.checks.grpo import (
    check_aggregate_loss,
    check_group_advantages,
    check_grpo_loss,
    check_kl_estimate,
)
from course_lib.grpo import (
    KL_KINDS,
    LOSS_AGG_MODES,
    GRPOLoss,
    aggregate_loss,
    group_advantages,
    grpo_loss,
    kl_estimate,
    masked_mean,
    masked_normalize,
)

F64 = torch.float64

# ---------------------------------------------------------------------------
# group_advantages
# ---------------------------------------------------------------------------


def test_group_advantages_hand_computed():
    # Group (1, 0, 0): mean 1/3, centred (2/3, -1/3, -1/3);
    # Bessel std = sqrt((4/9 + 1/9 + 1/9) / 2) = sqrt(1/3) = 0.57735;
    # advantages (2/3, -1/3, -1/3) / 0.57735 = (1.1547, -0.57735, -0.57735).
    rewards = torch.tensor([[1.0, 0.0, 0.0]], dtype=F64)
    std = math.sqrt(1 / 3) + 1e-6
    torch.testing.assert_close(group_advantages(rewards), torch.tensor([[2 / 3, -1 / 3, -1 / 3]], dtype=F64) / std)
    # Dr. GRPO: centred only.
    torch.testing.assert_close(
        group_advantages(rewards, normalize_std=False), torch.tensor([[2 / 3, -1 / 3, -1 / 3]], dtype=F64)
    )


def test_group_advantages_is_compute_deltas():
    g = torch.Generator().manual_seed(0)
    rewards = torch.randn(3, 5, generator=g, dtype=F64)
    torch.testing.assert_close(group_advantages(rewards), compute_deltas(rewards, "normalized_rewards"))
    torch.testing.assert_close(group_advantages(rewards, False), compute_deltas(rewards, "centered_rewards"))
    torch.testing.assert_close(group_advantages(rewards, eps=0.3), compute_deltas(rewards, "normalized_rewards", 0.3))


def test_group_advantages_agree_with_trl():
    # TRL GRPOTrainer (scale_rewards=True): flat rewards, group statistics repeated; it uses eps=1e-4.
    g = torch.Generator().manual_seed(1)
    B, G = 3, 4
    flat = torch.randint(0, 2, (B * G,), generator=g).double()
    mean = flat.view(-1, G).mean(dim=1).repeat_interleave(G, dim=0)
    std = flat.view(-1, G).std(dim=1).repeat_interleave(G, dim=0)
    trl = (flat - mean) / (std + 1e-4)
    torch.testing.assert_close(group_advantages(flat.view(B, G), eps=1e-4).reshape(-1), trl)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 4), st.integers(1, 8), st.integers(0, 2**31 - 1), st.booleans(), st.booleans())
def test_group_advantages_zero_mean_per_group_and_never_nan(B, G, seed, normalize_std, binary):
    g = torch.Generator().manual_seed(seed)
    # Binary rewards make all-equal groups frequent, the case that used to give NaN.
    rewards = (torch.rand(B, G, generator=g) < 0.5).double() if binary else torch.randn(B, G, generator=g, dtype=F64)
    adv = group_advantages(rewards, normalize_std=normalize_std)
    assert torch.isfinite(adv).all()
    torch.testing.assert_close(adv.mean(-1), torch.zeros(B, dtype=F64), atol=1e-9, rtol=0)


def test_group_advantages_bad_input():
    with pytest.raises(ValueError, match="normalize_std"):
        group_advantages(torch.zeros(2, 3), normalize_std="yes")
    with pytest.raises(ValueError, match="rewards"):
        group_advantages(torch.zeros(6))
    with pytest.raises(ValueError, match="eps"):
        group_advantages(torch.zeros(2, 3), eps=0.0)


# ---------------------------------------------------------------------------
# kl_estimate
# ---------------------------------------------------------------------------


def test_kl_estimate_hand_computed():
    # logp = -1, logp_ref = -2: log_r = logp_ref - logp = -1.
    # k1 = -log_r = 1; k2 = 0.5 * 1 = 0.5; k3 = e^-1 - (-1) - 1 = 0.36788.
    logp, logp_ref = torch.tensor([-1.0], dtype=F64), torch.tensor([-2.0], dtype=F64)
    assert kl_estimate(logp, logp_ref, "k1").item() == pytest.approx(1.0)
    assert kl_estimate(logp, logp_ref, "k2").item() == pytest.approx(0.5)
    assert kl_estimate(logp, logp_ref, "k3").item() == pytest.approx(math.exp(-1.0))


def test_kl_estimate_k3_matches_trl_formula_and_gradient():
    # TRL: exp(ref - logp) - (ref - logp) - 1. d k3 / d logp = 1 - exp(ref - logp) = 1 - r.
    g = torch.Generator().manual_seed(2)
    logp = (-3 * torch.rand(2, 3, 4, generator=g, dtype=F64)).requires_grad_(True)
    ref = logp.detach() + torch.randn(2, 3, 4, generator=g, dtype=F64)
    k3 = kl_estimate(logp, ref, "k3")
    torch.testing.assert_close(k3, torch.exp(ref - logp) - (ref - logp) - 1)
    k3.sum().backward()
    torch.testing.assert_close(logp.grad, 1 - torch.exp(ref - logp.detach()))


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-20, 0), st.floats(-20, 0)), min_size=1, max_size=20),
    st.sampled_from([torch.float32, torch.float64]),
)
def test_k3_is_non_negative_and_zero_only_where_the_policies_agree(pairs, dtype):
    logp = torch.tensor([p for p, _ in pairs], dtype=dtype)
    logp_ref = torch.tensor([q for _, q in pairs], dtype=dtype)
    k3 = kl_estimate(logp, logp_ref, "k3")
    assert (k3 >= 0).all()
    assert (k3[logp == logp_ref] == 0).all()
    clearly_apart = (logp - logp_ref).abs() > (1e-3 if dtype == torch.float32 else 1e-6)
    assert (k3[clearly_apart] > 0).all()
    assert (kl_estimate(logp, logp_ref, "k2") >= 0).all()


def test_k3_is_accurate_for_tiny_log_ratios():
    # k3 ~ log_r^2 / 2 near 0; exp(x) - 1 - x would lose it all to rounding.
    x = torch.tensor([1e-9, -1e-9, 1e-6], dtype=F64)
    k3 = kl_estimate(torch.zeros(3, dtype=F64), x, "k3")
    torch.testing.assert_close(k3, x**2 / 2, rtol=1e-5, atol=0)


def test_k1_and_k3_average_to_the_exact_kl_of_two_categoricals():
    # Sample tokens from pi; the sample mean of k1 (and of k3) estimates
    # KL(pi || pi_ref) = sum_y pi(y) log(pi(y) / pi_ref(y)). Seeded; tolerance ~5 sigma.
    g = torch.Generator().manual_seed(3)
    # Per-sample std of k1 is about 0.86 and of k3 about 0.64: with 50,000 samples the
    # standard error is under 0.004, so 0.02 is a 5-sigma tolerance.
    pi = torch.tensor([0.7, 0.2, 0.05, 0.05], dtype=F64)
    pi_ref = torch.tensor([0.25, 0.25, 0.25, 0.25], dtype=F64)
    exact = (pi * (pi / pi_ref).log()).sum().item()  # 0.5152
    y = torch.multinomial(pi, 50_000, replacement=True, generator=g)
    logp, logp_ref = pi.log()[y], pi_ref.log()[y]
    assert kl_estimate(logp, logp_ref, "k1").mean().item() == pytest.approx(exact, abs=0.02)
    assert kl_estimate(logp, logp_ref, "k3").mean().item() == pytest.approx(exact, abs=0.02)
    # The reversed direction is another number, KL(pi_ref || pi) = 0.6031, and its k3
    # (the ratio inverted) averages to something else again: the test tells them apart.
    assert (pi_ref * (pi_ref / pi).log()).sum().item() == pytest.approx(0.6031, abs=1e-4)
    wrong_k3 = torch.expm1(logp - logp_ref) - (logp - logp_ref)
    assert abs(wrong_k3.mean().item() - exact) > 0.1


@pytest.mark.parametrize(
    "args, argname",
    [
        ((torch.zeros(3), torch.zeros(3), "k4"), "kind"),
        ((torch.zeros(3), torch.zeros(3), "K1"), "kind"),
        ((torch.zeros(3), torch.zeros(4), "k1"), "logp_ref"),
        ((torch.zeros(3, dtype=torch.int64), torch.zeros(3), "k1"), "logp"),
    ],
)
def test_kl_estimate_bad_input(args, argname):
    with pytest.raises(ValueError, match=argname):
        kl_estimate(*args)


# ---------------------------------------------------------------------------
# masked_mean, masked_normalize
# ---------------------------------------------------------------------------


def test_masked_mean_and_normalize_hand_computed():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert masked_mean(x, mask).item() == pytest.approx(7 / 3)  # (1 + 2 + 4) / 3
    torch.testing.assert_close(masked_mean(x, mask, dim=-1), torch.tensor([1.5, 4.0]))  # 3 / 2, 4 / 1
    torch.testing.assert_close(masked_mean(x, mask, dim=0), torch.tensor([2.5, 2.0, 0.0]))  # empty column -> 0
    assert masked_normalize(x, mask).item() == pytest.approx(7.0)
    torch.testing.assert_close(masked_normalize(x, mask, dim=1, normalize_constant=4.0), torch.tensor([0.75, 1.0]))


def test_masked_mean_of_nothing_is_zero_and_padding_nan_is_ignored():
    x = torch.tensor([1.0, float("nan"), float("inf")], requires_grad=True)
    assert masked_mean(x, torch.zeros(3)).item() == 0.0
    out = masked_mean(x, torch.tensor([True, False, False]))
    assert out.item() == 1.0
    out.backward()
    torch.testing.assert_close(x.grad, torch.tensor([1.0, 0.0, 0.0]))


@pytest.mark.parametrize(
    "call, argname",
    [
        (lambda: masked_mean(torch.zeros(2, 3), torch.ones(3, 2)), "mask"),
        (lambda: masked_mean(torch.zeros(2, 3), torch.full((2, 3), 0.5)), "mask"),
        (lambda: masked_mean(torch.zeros(2, 3), torch.ones(2, 3), dim=2), "dim"),
        (lambda: masked_normalize(torch.zeros(2, 3), torch.ones(2, 3), normalize_constant=0.0), "normalize_constant"),
        (lambda: masked_normalize([1.0], torch.ones(1)), "x"),
    ],
)
def test_masked_reductions_bad_input(call, argname):
    with pytest.raises(ValueError, match=argname):
        call()


# ---------------------------------------------------------------------------
# aggregate_loss
# ---------------------------------------------------------------------------

# Two responses: (1, 2, 3) of 3 tokens, and (4) of 1 token padded to T=3.
_PER_TOKEN = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]], dtype=F64)
_MASK = torch.tensor([[1, 1, 1], [1, 0, 0]])


@pytest.mark.parametrize(
    "mode, max_len, expected, grad",
    [
        # (1 + 2 + 3 + 4) / 4 tokens = 2.5; every valid token weighs 1/4.
        ("token-mean", None, 2.5, [[0.25] * 3, [0.25, 0, 0]]),
        # (6/3 + 4/1) / 2 = 3; a token weighs 1 / (|o_i| * 2): 1/6 in the long response, 1/2 in the short one.
        ("seq-mean-token-mean", None, 3.0, [[1 / 6] * 3, [0.5, 0, 0]]),
        # (6/3 + 4/3) / 2 = 5/3 with max_len = T = 3; every token weighs 1 / (3 * 2).
        ("seq-mean-token-sum-norm", None, 5 / 3, [[1 / 6] * 3, [1 / 6, 0, 0]]),
        # (6/5 + 4/5) / 2 = 1 with max_len = 5; every token weighs 1 / (5 * 2).
        ("seq-mean-token-sum-norm", 5, 1.0, [[0.1] * 3, [0.1, 0, 0]]),
    ],
)
def test_aggregate_loss_hand_computed(mode, max_len, expected, grad):
    per_token = _PER_TOKEN.clone().requires_grad_(True)
    loss = aggregate_loss(per_token, _MASK, mode, max_len=max_len)
    assert loss.item() == pytest.approx(expected)
    loss.backward()
    torch.testing.assert_close(per_token.grad, torch.tensor(grad, dtype=F64))


def test_aggregate_loss_agrees_with_trl_loss_types():
    # TRL's GRPO loss types, written as in its trainer: "grpo", "bnpo", "dr_grpo".
    g = torch.Generator().manual_seed(4)
    loss = torch.randn(6, 5, generator=g, dtype=F64)  # (B * G, T)
    mask = (torch.rand(6, 5, generator=g) < 0.7).double()
    mask[2] = 0  # an empty completion
    max_completion_length = 8
    trl_grpo = ((loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    trl_bnpo = (loss * mask).sum() / mask.sum().clamp(min=1.0)
    trl_dr_grpo = (loss * mask).sum() / (loss.size(0) * max_completion_length)
    torch.testing.assert_close(aggregate_loss(loss, mask, "seq-mean-token-mean"), trl_grpo)
    torch.testing.assert_close(aggregate_loss(loss, mask, "token-mean"), trl_bnpo)
    torch.testing.assert_close(aggregate_loss(loss, mask, "seq-mean-token-sum-norm", max_len=8), trl_dr_grpo)
    # verl's seq-mean-token-sum-norm sums over responses instead of averaging: B * G times ours.
    verl = (loss * mask).sum(-1).sum() / mask.shape[-1]
    torch.testing.assert_close(aggregate_loss(loss, mask, "seq-mean-token-sum-norm") * 6, verl)


def test_seq_mean_favours_short_responses_token_mean_does_not():
    # The length bias: under seq-mean-token-mean, a token of a 1-token response weighs
    # 3 times a token of a 3-token response; under token-mean and Dr. GRPO they weigh the same.
    for mode, ratio in [("seq-mean-token-mean", 3.0), ("token-mean", 1.0), ("seq-mean-token-sum-norm", 1.0)]:
        per_token = torch.zeros(2, 3, dtype=F64, requires_grad=True)
        aggregate_loss(per_token, _MASK, mode).backward()
        assert (per_token.grad[1, 0] / per_token.grad[0, 0]).item() == pytest.approx(ratio)


def test_aggregate_loss_empty_responses():
    # An empty response contributes 0 and still counts as a response in the mean over responses.
    per_token = torch.tensor([[1.0, 2.0], [7.0, 7.0]], dtype=F64, requires_grad=True)
    mask = torch.tensor([[1, 1], [0, 0]])
    assert aggregate_loss(per_token, mask, "seq-mean-token-mean").item() == pytest.approx(1.5 / 2)
    assert aggregate_loss(per_token, mask, "token-mean").item() == pytest.approx(1.5)
    assert aggregate_loss(per_token, mask, "seq-mean-token-sum-norm").item() == pytest.approx(1.5 / 2)
    # A batch with nothing valid: 0 in every mode, zero gradients, no NaN.
    for mode in LOSS_AGG_MODES:
        x = per_token.detach().clone().requires_grad_(True)
        loss = aggregate_loss(x, torch.zeros(2, 2), mode)
        loss.backward()
        assert loss.item() == 0.0 and (x.grad == 0).all()


@settings(max_examples=50, deadline=None)
@given(
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 6),
    st.integers(0, 2**31 - 1),
    st.sampled_from(LOSS_AGG_MODES),
    st.sampled_from([float("nan"), float("inf"), -1e9]),
)
def test_aggregate_loss_padding_never_changes_the_result(B, G, T, seed, mode, garbage):
    g = torch.Generator().manual_seed(seed)
    per_token = torch.randn(B, G, T, generator=g, dtype=F64)
    mask = torch.rand(B, G, T, generator=g) < 0.6
    results = []
    for x in (per_token, torch.where(mask, per_token, torch.full_like(per_token, garbage))):
        x = x.clone().requires_grad_(True)
        loss = aggregate_loss(x, mask, mode)
        loss.backward()
        results.append((loss.detach(), x.grad))
    torch.testing.assert_close(results[0][0], results[1][0])
    torch.testing.assert_close(results[0][1], results[1][1])
    assert torch.isfinite(results[1][0])


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.integers(0, 2**31 - 1), st.integers(1, 20))
def test_aggregate_modes_agree_when_every_response_has_full_length(N, T, seed, max_len):
    g = torch.Generator().manual_seed(seed)
    per_token = torch.randn(N, T, generator=g, dtype=F64)
    full = torch.ones(N, T)
    seq_mean = aggregate_loss(per_token, full, "seq-mean-token-mean")
    torch.testing.assert_close(aggregate_loss(per_token, full, "token-mean"), seq_mean)
    torch.testing.assert_close(aggregate_loss(per_token, full, "seq-mean-token-sum-norm"), seq_mean)  # max_len = T
    torch.testing.assert_close(
        aggregate_loss(per_token, full, "seq-mean-token-sum-norm", max_len=max_len), seq_mean * T / max_len
    )


@pytest.mark.parametrize(
    "args, kwargs, argname",
    [
        ((torch.zeros(2, 3), torch.ones(2, 3), "sum"), {}, "mode"),
        ((torch.zeros(2, 3), torch.ones(2, 3), "seq-mean-token-sum"), {}, "mode"),  # verl has it; the course does not
        ((torch.zeros(2, 3), torch.ones(3), "token-mean"), {}, "mask"),
        ((torch.zeros(2, 3), torch.ones(2, 3), "seq-mean-token-sum-norm"), {"max_len": 0}, "max_len"),
        ((torch.tensor(1.0), torch.tensor(1.0), "token-mean"), {}, "per_token"),
    ],
)
def test_aggregate_loss_bad_input(args, kwargs, argname):
    with pytest.raises(ValueError, match=argname):
        aggregate_loss(*args, **kwargs)


# ---------------------------------------------------------------------------
# grpo_loss
# ---------------------------------------------------------------------------


def _batch(seed=5, B=2, G=3, T=4):
    g = torch.Generator().manual_seed(seed)
    logp_old = -2.0 * torch.rand(B, G, T, generator=g, dtype=F64)
    logp = logp_old + 0.3 * torch.randn(B, G, T, generator=g, dtype=F64)
    logp_ref = logp_old + 0.2 * torch.randn(B, G, T, generator=g, dtype=F64)
    rewards = (torch.rand(B, G, generator=g) < 0.5).double()
    lengths = torch.randint(1, T + 1, (B, G), generator=g)
    mask = torch.arange(T) < lengths[..., None]  # (B, G, T)
    return logp, logp_old, logp_ref, rewards, mask


def test_grpo_loss_first_update_hand_computed():
    # One prompt, G=2 responses of T=2 tokens, ratio 1 (logp == logp_old), no KL.
    # rewards (1, 0): centred (0.5, -0.5), Bessel std sqrt(0.5): adv = +-0.5 / 0.70711 = +-0.70711.
    # Per token -min(1 * adv, clip(1) * adv) = -adv; seq-mean: (-0.707 + 0.707) / 2 = 0.
    # d loss / d logp_{i,t} = -adv_i * ratio / (|o_i| * G) = -+0.70711 / 4.
    logp = torch.tensor([[[-1.0, -2.0], [-0.5, -1.5]]], dtype=F64, requires_grad=True)
    loss, info = grpo_loss(
        logp, logp.detach().clone(), None, torch.tensor([[1.0, 0.0]], dtype=F64), torch.ones(1, 2, 2)
    )
    assert loss.item() == pytest.approx(0.0, abs=1e-12)
    loss.backward()
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    torch.testing.assert_close(logp.grad, torch.tensor([[[-a / 4, -a / 4], [a / 4, a / 4]]], dtype=F64))
    assert info["clip_fraction"] == 0.0 and info["kl"] == 0.0
    assert info["adv_abs_mean"] == pytest.approx(a)
    assert info["reward_mean"] == pytest.approx(0.5)


def test_grpo_loss_agrees_with_trl_formula():
    # TRL's _compute_loss on (B * G, T), with its eps replaced by the course's 1e-6.
    logp, logp_old, logp_ref, rewards, mask = _batch()
    B, G, T = logp.shape
    eps, beta = 0.2, 0.04
    flat = rewards.reshape(-1)
    mean = flat.view(-1, G).mean(1).repeat_interleave(G)
    std = flat.view(-1, G).std(1).repeat_interleave(G)
    advantages = ((flat - mean) / (std + 1e-6)).unsqueeze(1)  # (B * G, 1)
    lp, old, ref, m = (x.reshape(B * G, T) for x in (logp, logp_old, logp_ref, mask.double()))
    per_token_kl = torch.exp(ref - lp) - (ref - lp) - 1
    coef_1 = torch.exp(lp - old)
    coef_2 = torch.clamp(coef_1, 1 - eps, 1 + eps)
    per_token_loss = -torch.min(coef_1 * advantages, coef_2 * advantages) + beta * per_token_kl
    trl = ((per_token_loss * m).sum(-1) / m.sum(-1).clamp(min=1.0)).mean()
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, clip_eps=eps, kl_coef=beta)
    torch.testing.assert_close(loss, trl)


def test_grpo_loss_gradients_flow_only_into_logp():
    logp, logp_old, logp_ref, rewards, mask = (x.clone().requires_grad_(x.is_floating_point()) for x in _batch())
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask)
    loss.backward()
    assert logp.grad is not None and logp.grad.abs().sum() > 0
    for constant in (logp_old, logp_ref, rewards):
        assert constant.grad is None or (constant.grad == 0).all()
    assert (logp.grad[~mask] == 0).all()  # padding gets no gradient


def test_grpo_loss_info():
    # Ratios exp(+-0.5) = 1.65 / 0.61 are outside [0.8, 1.2]; exp(0.1) = 1.105 is inside.
    logp_old = torch.zeros(1, 2, 2, dtype=F64)
    logp = torch.tensor([[[0.5, 0.1], [-0.5, 9.0]]], dtype=F64)  # 9.0 is padding
    mask = torch.tensor([[[1, 1], [1, 0]]])
    rewards = torch.tensor([[1.0, 0.0]], dtype=F64)  # adv = (+0.707, -0.707)
    _, info = grpo_loss(logp, logp_old, logp_old, rewards, mask)
    assert info["clip_fraction"] == pytest.approx(2 / 3)  # 2 of 3 valid tokens outside the range
    # Where the clip binds: ratio 1.65 with adv > 0 and ratio 0.61 with adv < 0: both.
    assert info["clip_active_fraction"] == pytest.approx(2 / 3)

    def k3(x):  # logp_ref = 0, so log_r = -x
        return math.exp(-x) + x - 1

    assert info["kl"] == pytest.approx((k3(0.5) + k3(0.1) + k3(-0.5)) / 3)
    assert set(info) >= {"clip_fraction", "kl", "adv_abs_mean"}
    assert all(isinstance(v, float) for v in info.values())


def test_grpo_loss_dr_grpo_configuration():
    # Dr. GRPO = centred advantages + token sums divided by max_len, then the mean over responses.
    logp, logp_old, _, rewards, mask = _batch(seed=6)
    loss, _ = grpo_loss(
        logp, logp_old, None, rewards, mask, normalize_std=False, loss_agg="seq-mean-token-sum-norm", max_len=10
    )
    adv = rewards - rewards.mean(-1, keepdim=True)
    ratio = torch.exp(logp - logp_old)
    per_token = -torch.minimum(ratio * adv[..., None], ratio.clamp(0.8, 1.2) * adv[..., None])
    expected = (per_token * mask).sum(-1).div(10).mean()
    torch.testing.assert_close(loss, expected)


def test_grpo_loss_empty_response_contributes_nothing_and_no_nan():
    logp, logp_old, logp_ref, rewards, mask = _batch(seed=7)
    mask[0, 1] = False  # response (0, 1) is empty
    logp = logp.clone().requires_grad_(True)
    for loss_agg in LOSS_AGG_MODES:
        logp.grad = None
        loss, info = grpo_loss(logp, logp_old, logp_ref, rewards, mask, loss_agg=loss_agg)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
        assert (logp.grad[0, 1] == 0).all()
        assert all(math.isfinite(v) for v in info.values())
    # All responses empty: loss 0.
    loss, info = grpo_loss(logp, logp_old, logp_ref, rewards, torch.zeros_like(mask))
    assert loss.item() == 0.0 and info["clip_fraction"] == 0.0 and info["kl"] == 0.0


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(LOSS_AGG_MODES), st.sampled_from(KL_KINDS), st.floats(-30, 30))
def test_grpo_loss_padding_never_changes_the_result(seed, loss_agg, kl_kind, garbage):
    logp, logp_old, logp_ref, rewards, mask = _batch(seed=seed % 1000)
    g = torch.Generator().manual_seed(seed)

    def junk(x):
        return torch.where(mask, x, garbage + torch.randn(x.shape, generator=g, dtype=F64))

    results = []
    for tensors in ((logp, logp_old, logp_ref), (junk(logp), junk(logp_old), junk(logp_ref))):
        lp = tensors[0].clone().requires_grad_(True)
        loss, info = grpo_loss(lp, tensors[1], tensors[2], rewards, mask, kl_kind=kl_kind, loss_agg=loss_agg)
        loss.backward()
        results.append((loss.detach(), lp.grad, info))
    torch.testing.assert_close(results[0][0], results[1][0])
    torch.testing.assert_close(results[0][1], results[1][1])
    for key in results[0][2]:
        assert results[0][2][key] == pytest.approx(results[1][2][key])


def test_grpo_loss_float32():
    logp, logp_old, logp_ref, rewards, mask = (x.float() if x.is_floating_point() else x for x in _batch())
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask)
    assert loss.dtype == torch.float32


def test_one_grpo_training_loop_learns_a_bandit():
    # One prompt, 4 possible answers, reward 1 for answer 2. Groups of 8, one update per
    # group (ratio 1), kl_coef 0: the probability of the right answer should rise.
    g = torch.Generator().manual_seed(8)
    logits = torch.zeros(4, dtype=F64, requires_grad=True)
    optimiser = torch.optim.SGD([logits], lr=0.5)
    for _ in range(40):
        with torch.no_grad():
            answers = torch.multinomial(torch.softmax(logits, -1), 8, replacement=True, generator=g)  # (G,)
        logp = torch.log_softmax(logits, -1)[answers].view(1, 8, 1)  # (B=1, G=8, T=1)
        rewards = (answers == 2).double().view(1, 8)
        loss, _ = grpo_loss(logp, logp.detach(), None, rewards, torch.ones(1, 8, 1), kl_coef=0.0)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    assert torch.softmax(logits, -1)[2].item() > 0.9


@pytest.mark.parametrize(
    "change, argname",
    [
        ({"logp": torch.zeros(2, 3)}, "logp"),
        ({"logp_old": torch.zeros(2, 3, 5)}, "logp_old"),
        ({"logp_ref": torch.zeros(2, 3, 5)}, "logp_ref"),
        ({"rewards": torch.zeros(3, 2)}, "rewards"),
        ({"mask": torch.ones(2, 3)}, "mask"),
        ({"clip_eps": 0.0}, "clip_eps"),
        ({"clip_eps": -0.2}, "clip_eps"),
        ({"kl_coef": -0.1}, "kl_coef"),
        ({"kl_kind": "k5"}, "kl_kind"),
        ({"loss_agg": "mean"}, "loss_agg"),
        ({"normalize_std": 1}, "normalize_std"),
        ({"max_len": -4}, "max_len"),
    ],
)
def test_grpo_loss_bad_input(change, argname):
    logp, logp_old, logp_ref, rewards, mask = _batch()
    kwargs = {"logp": logp, "logp_old": logp_old, "logp_ref": logp_ref, "rewards": rewards, "mask": mask}
    kwargs.update(change)
    with pytest.raises(ValueError, match=argname):
        grpo_loss(**kwargs)


# ---------------------------------------------------------------------------
# GRPOLoss
# ---------------------------------------------------------------------------


def test_grpo_loss_module_is_grpo_loss_with_one_token():
    g = torch.Generator().manual_seed(9)
    old = -torch.rand(3, 4, generator=g, dtype=F64)
    policy = (old + 0.3 * torch.randn(3, 4, generator=g, dtype=F64)).requires_grad_(True)
    ref = old + 0.1 * torch.randn(3, 4, generator=g, dtype=F64)
    rewards = torch.randn(3, 4, generator=g, dtype=F64)
    module = GRPOLoss(clip_epsilon=0.1, kl_beta=0.5)
    loss = module(policy, old, rewards, ref)
    expected, _ = grpo_loss(
        policy[..., None], old[..., None], ref[..., None], rewards, torch.ones(3, 4, 1), clip_eps=0.1, kl_coef=0.5
    )
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert policy.grad.abs().sum() > 0
    # With T=1 every aggregation gives the same loss.
    for loss_agg in LOSS_AGG_MODES:
        same, _ = grpo_loss(
            policy[..., None],
            old[..., None],
            ref[..., None],
            rewards,
            torch.ones(3, 4, 1),
            clip_eps=0.1,
            kl_coef=0.5,
            loss_agg=loss_agg,
        )
        torch.testing.assert_close(same, expected)


def test_grpo_loss_module_defaults_and_bad_input():
    module = GRPOLoss()
    assert module.clip_epsilon == 0.2 and module.kl_beta == 0.1
    with pytest.raises(ValueError, match="clip_epsilon"):
        GRPOLoss(clip_epsilon=0.0)
    with pytest.raises(ValueError, match="kl_beta"):
        GRPOLoss(kl_beta=-1.0)
    with pytest.raises(ValueError, match="old_policy_logprobs"):
        module(torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2, 3), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="policy_logprobs"):
        module(torch.zeros(6), torch.zeros(6), torch.zeros(6), torch.zeros(6))
    with pytest.raises(ValueError, match="reference_logprobs"):
        module(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3, 2))


# ---------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------


@pytest.mark.usefixtures("trusting")
def test_checks_accept_the_reference(capsys):
    assert check_group_advantages(group_advantages) is True
    assert check_kl_estimate(kl_estimate) is True
    assert check_aggregate_loss(aggregate_loss) is True
    assert check_grpo_loss(grpo_loss) is True
    assert capsys.readouterr().out.count("\u2714") == 4


def test_check_kl_estimate_names_the_reversed_direction():
    def reversed_k1(logp, logp_ref, kind):
        return logp_ref - logp if kind == "k1" else kl_estimate(logp, logp_ref, kind)

    with pytest.raises(AssertionError, match="reversed"):
        check_kl_estimate(reversed_k1)


def test_check_aggregate_loss_names_the_length_bias_mistake():
    def always_token_mean(per_token, mask, mode, max_len=None):
        mask = mask.to(per_token.dtype)
        return (per_token * mask).sum() / mask.sum().clamp(min=1)

    with pytest.raises(AssertionError, match="token mean"):
        check_aggregate_loss(always_token_mean)


def test_grpo_loss_clip_higher_lets_a_positive_advantage_token_grow():
    # One prompt, two responses of one token: rewards 1 and 0 give advantages +0.707 and -0.707.
    # The first token's ratio is exp(0.22) = 1.246: outside [0.8, 1.2], inside [0.8, 1.28].
    from course_lib.grpo import grpo_loss

    logp_old = torch.tensor([[[-1.0], [-1.0]]], dtype=torch.float64)
    rewards = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    mask = torch.ones(1, 2, 1)
    grads = {}
    for high in (None, 0.28):
        logp = (logp_old + torch.tensor([[[0.22], [0.0]]], dtype=torch.float64)).requires_grad_(True)
        loss, info = grpo_loss(logp, logp_old, None, rewards, mask, clip_eps=0.2, clip_eps_high=high)
        loss.backward()
        grads[high] = logp.grad[0, 0, 0].item()
        assert info["clip_fraction"] == (0.5 if high is None else 0.0)
    assert grads[None] == 0.0, "the symmetric clip binds: no gradient"
    # Unclipped: d/dlogp of -(ratio * adv) / 2 responses = -1.246 * 0.7071 / 2 (eps=1e-6 in the std shifts it by 1e-6).
    assert grads[0.28] == pytest.approx(-math.exp(0.22) * 2**-0.5 / 2, rel=1e-5)
