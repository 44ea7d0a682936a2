"""Tests for course_lib.policy_gradient: log-probs of the tokens taken, the REINFORCE loss."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.checks.policy_gradient import check_gather_log_probs, check_reinforce_loss
from course_lib.policy_gradient import expected_reward_gradient, gather_log_probs, reinforce_loss

# ---------------------------------------------------------------------------
# gather_log_probs
# ---------------------------------------------------------------------------


def test_gather_log_probs_hand_computed():
    # Row 0: logits (0, 0) -> pi = (1/2, 1/2); token 0: log(1/2) = -0.6931.
    # Row 1: logits (0, ln 3) -> pi = (1/4, 3/4); token 1: log(3/4) = -0.2877.
    logits = torch.tensor([[0.0, 0.0], [0.0, math.log(3.0)]], dtype=torch.float64)  # (T=2, V=2)
    logp = gather_log_probs(logits, torch.tensor([0, 1]))
    torch.testing.assert_close(logp, torch.tensor([math.log(0.5), math.log(0.75)], dtype=torch.float64))


def test_gather_log_probs_agrees_with_torch_categorical():
    # torch.distributions.Categorical is the well-known implementation of the same thing.
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 3, 4, 7, generator=g, dtype=torch.float64)  # (B, G, T, V)
    tokens = torch.randint(0, 7, (2, 3, 4), generator=g)
    expected = torch.distributions.Categorical(logits=logits).log_prob(tokens)
    torch.testing.assert_close(gather_log_probs(logits, tokens), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gather_log_probs_keeps_dtype_and_shape(dtype):
    logits = torch.zeros(5, 3, dtype=dtype)
    tokens = torch.tensor([0, 1, 2, 1, 0], dtype=torch.int32)  # any integer dtype
    logp = gather_log_probs(logits, tokens)
    assert logp.dtype == dtype and logp.shape == (5,)
    torch.testing.assert_close(logp, torch.full((5,), -math.log(3.0), dtype=dtype))


def test_gather_log_probs_is_exact_for_very_unlikely_tokens():
    # log(softmax) would underflow to -inf; log_softmax gives -1000 exactly.
    logits = torch.tensor([[1000.0, 0.0]], dtype=torch.float32)
    logp = gather_log_probs(logits, torch.tensor([1]))
    assert torch.isfinite(logp).all()
    torch.testing.assert_close(logp, torch.tensor([-1000.0]))


def test_gather_log_probs_gradient_is_one_hot_minus_softmax():
    # d log pi(a) / d logits = onehot(a) - pi at the same position, 0 elsewhere.
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    tokens = torch.tensor([2, 0, 3])
    gather_log_probs(logits, tokens).sum().backward()
    expected = torch.nn.functional.one_hot(tokens, 4).double() - torch.softmax(logits.detach(), -1)
    torch.testing.assert_close(logits.grad, expected)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_gather_log_probs_every_token_sums_to_one(T, V, seed):
    # Gathering every token id in turn gives the whole distribution: log-probs <= 0, probs sum to 1.
    g = torch.Generator().manual_seed(seed)
    logits = 5.0 * torch.randn(T, V, generator=g, dtype=torch.float64)
    all_logp = torch.stack([gather_log_probs(logits, torch.full((T,), v)) for v in range(V)], -1)  # (T, V)
    assert (all_logp <= 0).all()
    torch.testing.assert_close(all_logp.exp().sum(-1), torch.ones(T, dtype=torch.float64))


@pytest.mark.parametrize(
    "logits, tokens, argname",
    [
        (torch.zeros(3, 4), torch.tensor([0.0, 1.0, 2.0]), "tokens"),  # float ids
        (torch.zeros(3, 4), torch.tensor([True, False, True]), "tokens"),  # bool ids
        (torch.zeros(3, 4), torch.tensor([0, 4, 1]), "tokens"),  # id == V
        (torch.zeros(3, 4), torch.tensor([0, -1, 1]), "tokens"),  # negative id
        (torch.zeros(3, 4), torch.tensor([0, 1]), "tokens"),  # wrong length
        (torch.zeros(4), torch.tensor([0]), "logits"),  # no T axis
        (torch.zeros(3, 4, dtype=torch.int64), torch.tensor([0, 1, 2]), "logits"),  # integer logits
        ([[0.0, 1.0]], torch.tensor([0]), "logits"),  # not a tensor
    ],
)
def test_gather_log_probs_bad_input(logits, tokens, argname):
    with pytest.raises(ValueError, match=argname):
        gather_log_probs(logits, tokens)


# ---------------------------------------------------------------------------
# reinforce_loss
# ---------------------------------------------------------------------------


def test_reinforce_loss_hand_computed_without_mask():
    # per token -(delta * logp): row 0 (delta 2): 2, 4; row 1 (delta -1): -0.5, -0.5.
    # mean over 4 tokens: (2 + 4 - 0.5 - 0.5) / 4 = 1.25.
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -0.5]], dtype=torch.float64)
    loss = reinforce_loss(logp, torch.tensor([2.0, -1.0], dtype=torch.float64))
    assert loss.item() == pytest.approx(1.25)


def test_reinforce_loss_hand_computed_with_mask_and_gradients():
    # The last token of row 1 is padding: (2 + 4 - 0.5) / 3 valid tokens = 5.5 / 3.
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -99.0]], dtype=torch.float64, requires_grad=True)
    deltas = torch.tensor([2.0, -1.0], dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1, 1], [1, 0]])
    loss = reinforce_loss(logp, deltas, mask)
    assert loss.item() == pytest.approx(5.5 / 3)
    loss.backward()
    # d loss / d logp = -delta / n_valid on valid tokens, 0 on padding.
    torch.testing.assert_close(logp.grad, torch.tensor([[-2 / 3, -2 / 3], [1 / 3, 0.0]], dtype=torch.float64))
    # The weights are constants: no gradient reaches them.
    assert deltas.grad is None or (deltas.grad == 0).all()


def test_reinforce_loss_scalar_delta_for_one_response():
    # logp (T=3,), deltas a 0-d tensor: -(0.5 * (-1 - 2 - 3)) / 3 = 1.0.
    loss = reinforce_loss(torch.tensor([-1.0, -2.0, -3.0]), torch.tensor(0.5))
    assert loss.item() == pytest.approx(1.0)
    assert loss.dtype == torch.float32


def test_reinforce_loss_with_no_valid_token_is_zero_not_nan():
    logp = torch.randn(2, 3, requires_grad=True)
    loss = reinforce_loss(logp, torch.ones(2), torch.zeros(2, 3, dtype=torch.bool))
    assert loss.item() == 0.0
    loss.backward()
    assert (logp.grad == 0).all()


def test_reinforce_loss_empty_response_contributes_nothing():
    # An empty response adds neither to the sum nor to the count of valid tokens.
    logp = torch.tensor([[-1.0, -1.0], [-5.0, -5.0]])
    with_empty = reinforce_loss(logp, torch.tensor([1.0, 3.0]), torch.tensor([[1, 1], [0, 0]]))
    alone = reinforce_loss(logp[:1], torch.tensor([1.0]))
    torch.testing.assert_close(with_empty, alone)


@settings(max_examples=50, deadline=None)
@given(
    st.integers(1, 4),
    st.integers(1, 5),
    st.integers(0, 2**31 - 1),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e6]),
)
def test_reinforce_loss_padding_never_changes_the_result(B, T, seed, garbage):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(B, T, generator=g, dtype=torch.float64)
    deltas = torch.randn(B, generator=g, dtype=torch.float64)
    mask = torch.rand(B, T, generator=g) < 0.6
    perturbed = torch.where(mask, logp, torch.full_like(logp, garbage))
    results = []
    for x in (logp, perturbed):
        x = x.clone().requires_grad_(True)
        loss = reinforce_loss(x, deltas, mask)
        loss.backward()
        results.append((loss.detach(), torch.where(mask, x.grad, 0.0)))
    torch.testing.assert_close(results[0][0], results[1][0])
    torch.testing.assert_close(results[0][1], results[1][1])
    assert torch.isfinite(results[1][0])


def test_reinforce_gradient_estimate_matches_the_exact_gradient():
    # Monte-Carlo REINFORCE on a 4-action bandit: the gradient of the loss is
    # -(1/N) sum r(a_i) grad log pi(a_i), which estimates -grad J. Seeded; tolerance ~5 sigma.
    g = torch.Generator().manual_seed(2)
    logits = torch.tensor([0.5, -0.3, 0.1, 0.8], dtype=torch.float64, requires_grad=True)
    rewards = torch.tensor([1.0, 0.0, 2.0, -1.0], dtype=torch.float64)
    N = 20_000
    actions = torch.multinomial(torch.softmax(logits.detach(), -1), N, replacement=True, generator=g)
    logp = gather_log_probs(logits.expand(N, 1, 4), actions[:, None])  # (N, T=1)
    reinforce_loss(logp, rewards[actions]).backward()
    exact = expected_reward_gradient(logits.detach(), rewards)
    torch.testing.assert_close(-logits.grad, exact, atol=0.04, rtol=0.0)


def test_expected_reward_gradient_matches_autograd():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 5, generator=g, dtype=torch.float64, requires_grad=True)
    rewards = torch.randn(2, 5, generator=g, dtype=torch.float64)
    (torch.softmax(logits, -1) * rewards).sum().backward()
    torch.testing.assert_close(expected_reward_gradient(logits.detach(), rewards), logits.grad)


@pytest.mark.parametrize(
    "kwargs, argname",
    [
        ({"logp": torch.zeros(2, 3), "deltas": torch.zeros(3)}, "deltas"),  # one delta per token
        ({"logp": torch.zeros(2, 3), "deltas": torch.zeros(2), "mask": torch.ones(2, 2)}, "mask"),
        ({"logp": torch.zeros(2, 3), "deltas": torch.zeros(2), "mask": torch.full((2, 3), 2.0)}, "mask"),
        ({"logp": torch.tensor(1.0), "deltas": torch.tensor(1.0)}, "logp"),  # no T axis
        ({"logp": torch.zeros(2, 3, dtype=torch.int64), "deltas": torch.zeros(2)}, "logp"),
    ],
)
def test_reinforce_loss_bad_input(kwargs, argname):
    with pytest.raises(ValueError, match=argname):
        reinforce_loss(**kwargs)


def test_expected_reward_gradient_bad_input():
    with pytest.raises(ValueError, match="rewards"):
        expected_reward_gradient(torch.zeros(4), torch.zeros(3))


# ---------------------------------------------------------------------------
# The checks accept the reference and reject a classic mistake
# ---------------------------------------------------------------------------


@pytest.mark.usefixtures("trusting")
def test_checks_accept_the_reference(capsys):
    assert check_gather_log_probs(gather_log_probs) is True
    assert check_reinforce_loss(reinforce_loss) is True
    assert capsys.readouterr().out.count("\u2714") == 2


def test_check_reinforce_loss_names_attached_deltas():
    def attached(logp, deltas, mask=None):
        # The padding selected away first (it may hold NaN, which * mask would keep): the one mistake is the detach.
        if mask is not None:
            logp = torch.where(mask.bool(), logp, torch.zeros_like(logp))
        per_token = -(deltas[..., None] * logp)
        if mask is None:
            return per_token.mean()
        return per_token.sum() / mask.sum().clamp(min=1)

    with pytest.raises(AssertionError, match="detach"):
        check_reinforce_loss(attached)
