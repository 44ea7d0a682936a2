"""Tests of course_lib.lectures.warmup: the discounted return and the reward-to-go."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.checks import warmup as warmup_checks
from course_lib.checks.warmup import check_discounted_return, check_reward_to_go
from course_lib.gae import compute_gae
from course_lib.lectures.warmup import discounted_return, reward_to_go

ROOT = Path(__file__).resolve().parent.parent
DTYPES = [torch.float32, torch.float64]
rewards_1d = st.lists(st.floats(-10, 10, allow_nan=False, width=32), min_size=1, max_size=12)
gammas = st.floats(0.0, 1.0)


# ---------------------------------------------------------------------------
# Hand-computed values
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_discounted_return_by_hand(dtype):
    rewards = torch.tensor([1.0, 2.0, 3.0], dtype=dtype)
    # 1 * 0.5^0 + 2 * 0.5^1 + 3 * 0.5^2 = 1 + 1 + 0.75 = 2.75
    G = discounted_return(rewards, 0.5)
    assert G.shape == () and G.dtype == dtype
    assert G.item() == pytest.approx(2.75)


def test_discounted_return_batch_by_hand():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    # row 0: 1 + 0.9^3 * 1 = 1 + 0.729 = 1.729;  row 1: 0.9^3 = 0.729
    torch.testing.assert_close(discounted_return(rewards, 0.9), torch.tensor([1.729, 0.729]))


def test_discounted_return_edge_gammas_by_hand():
    rewards = torch.tensor([2.0, -1.0, 4.0])
    # gamma = 0: only r_0 counts (0^0 = 1, 0^1 = 0^2 = 0) -> 2
    assert discounted_return(rewards, 0.0).item() == 2.0
    # gamma = 1: the plain sum 2 - 1 + 4 = 5
    assert discounted_return(rewards, 1.0).item() == 5.0
    # T = 1: the single reward, whatever gamma is
    assert discounted_return(torch.tensor([[7.0]]), 0.3).tolist() == [7.0]


def test_discounted_return_leading_dims():
    rewards = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(0))
    G = discounted_return(rewards, 0.9)
    assert G.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            # each episode on its own gives the same number
            torch.testing.assert_close(G[i, j], discounted_return(rewards[i, j], 0.9))


def test_discounted_return_gradient_is_the_discounts():
    rewards = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    discounted_return(rewards, 0.5).backward()
    # dG / dr_t = gamma^t = 1, 0.5, 0.25, 0.125
    assert rewards.grad.tolist() == [1.0, 0.5, 0.25, 0.125]


@pytest.mark.parametrize("dtype", DTYPES)
def test_reward_to_go_by_hand(dtype):
    rewards = torch.tensor([1.0, 2.0, 3.0], dtype=dtype)
    # backwards: G_2 = 3;  G_1 = 2 + 0.5 * 3 = 3.5;  G_0 = 1 + 0.5 * 3.5 = 2.75
    G = reward_to_go(rewards, 0.5)
    assert G.dtype == dtype
    torch.testing.assert_close(G, torch.tensor([2.75, 3.5, 3.0], dtype=dtype))


def test_reward_to_go_sparse_reward_by_hand():
    rewards = torch.tensor([[0.0, 0.0, 0.0, 1.0]])
    # a single +1 at the end reaches step t discounted by gamma^(3 - t): 0.125, 0.25, 0.5, 1
    torch.testing.assert_close(reward_to_go(rewards, 0.5), torch.tensor([[0.125, 0.25, 0.5, 1.0]]))
    # gamma = 0: each step sees only its own reward
    torch.testing.assert_close(reward_to_go(rewards, 0.0), rewards)


def test_reward_to_go_leaves_input_alone_and_keeps_gradient():
    rewards = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    before = rewards.detach().clone()
    reward_to_go(rewards, 0.5).sum().backward()
    assert torch.equal(rewards.detach(), before)
    # sum_t G_t weighs r_k by sum_{t <= k} 0.5^(k - t): 1, 1.5, 1.75
    torch.testing.assert_close(rewards.grad, torch.tensor([1.0, 1.5, 1.75]))


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(rewards_1d, rewards_1d, st.floats(-3, 3), st.floats(-3, 3), gammas)
def test_discounted_return_is_linear_in_rewards(r1, r2, a, b, gamma):
    T = min(len(r1), len(r2))
    x = torch.tensor(r1[:T], dtype=torch.float64)
    y = torch.tensor(r2[:T], dtype=torch.float64)
    left = discounted_return(a * x + b * y, gamma)
    right = a * discounted_return(x, gamma) + b * discounted_return(y, gamma)
    torch.testing.assert_close(left, right, rtol=1e-9, atol=1e-9)


@settings(max_examples=50, deadline=None)
@given(rewards_1d)
def test_gamma_one_is_the_plain_sum(r):
    x = torch.tensor(r, dtype=torch.float64)
    torch.testing.assert_close(discounted_return(x, 1.0), x.sum())
    torch.testing.assert_close(reward_to_go(x, 1.0), x.flip(0).cumsum(0).flip(0))


@settings(max_examples=50, deadline=None)
@given(rewards_1d, gammas, gammas)
def test_monotone_in_gamma_for_non_negative_rewards(r, g1, g2):
    x = torch.tensor(r, dtype=torch.float64).abs()
    low, high = sorted([g1, g2])
    assert discounted_return(x, low) <= discounted_return(x, high) + 1e-9


@settings(max_examples=50, deadline=None)
@given(rewards_1d, st.floats(0.0, 0.99))
def test_return_is_bounded_by_the_effective_horizon(r, gamma):
    # |G| <= max|r| * (1 + gamma + gamma^2 + ...) = max|r| / (1 - gamma)
    x = torch.tensor(r, dtype=torch.float64)
    assert discounted_return(x, gamma).abs() <= x.abs().max() / (1 - gamma) + 1e-9


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 3), st.integers(1, 9), gammas, st.integers(0, 2**31 - 1))
def test_reward_to_go_recursion_and_first_step(B, T, gamma, seed):
    rewards = torch.randn(B, T, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    G = reward_to_go(rewards, gamma)  # (B, T)
    assert G.shape == (B, T)
    # G_0 is the discounted return of the whole episode
    torch.testing.assert_close(G[:, 0], discounted_return(rewards, gamma))
    # G_t = r_t + gamma * G_{t+1}, and G_{T-1} = r_{T-1}
    torch.testing.assert_close(G[:, :-1], rewards[:, :-1] + gamma * G[:, 1:])
    torch.testing.assert_close(G[:, -1], rewards[:, -1])


# ---------------------------------------------------------------------------
# Cross-checks with well-known implementations
# ---------------------------------------------------------------------------


def spinning_up_discount_cumsum(x: np.ndarray, discount: float) -> np.ndarray:
    """Spinning Up's ``core.discount_cumsum``: ``lfilter([1], [1, -discount], x[::-1])[::-1]``.

    The filter is y[n] = x[n] + discount * y[n - 1] on the reversed sequence; written
    out here because scipy is not a course dependency.
    """
    reversed_x = x[::-1]
    y = np.zeros_like(reversed_x)
    for n in range(len(reversed_x)):
        y[n] = reversed_x[n] + (discount * y[n - 1] if n > 0 else 0.0)
    return y[::-1]


@settings(max_examples=50, deadline=None)
@given(rewards_1d, gammas)
def test_reward_to_go_matches_spinning_up(r, gamma):
    x = np.array(r, dtype=np.float64)
    expected = torch.from_numpy(spinning_up_discount_cumsum(x, gamma).copy())
    torch.testing.assert_close(reward_to_go(torch.from_numpy(x), gamma), expected)


def test_reward_to_go_is_gae_with_lambda_one_and_no_critic():
    # With V = 0, no done inside the row and nothing to bootstrap, GAE(gamma, 1) is the reward-to-go.
    rewards = torch.randn(3, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    zeros = torch.zeros_like(rewards)
    adv, _ = compute_gae(rewards, zeros, zeros.bool(), torch.zeros(3, dtype=torch.float64), gamma=0.9, lam=1.0)
    torch.testing.assert_close(reward_to_go(rewards, 0.9), adv)


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [discounted_return, reward_to_go])
@pytest.mark.parametrize(
    "rewards",
    [
        [1.0, 2.0],  # a list, not a tensor
        torch.tensor([1, 2, 3]),  # integer rewards
        torch.tensor(1.0),  # no time axis
        torch.zeros(3, 0),  # no time step
    ],
)
def test_bad_rewards_raise(fn, rewards):
    with pytest.raises(ValueError, match="rewards"):
        fn(rewards, 0.9)


@pytest.mark.parametrize("fn", [discounted_return, reward_to_go])
@pytest.mark.parametrize("gamma", [-0.1, 1.5, float("nan"), "0.9", None])
def test_bad_gamma_raises(fn, gamma):
    with pytest.raises(ValueError, match="gamma"):
        fn(torch.ones(4), gamma)


def test_gamma_may_be_a_one_element_tensor():
    assert discounted_return(torch.ones(2), torch.tensor(0.5)).item() == 1.5


# ---------------------------------------------------------------------------
# The checks accept the reference and let an untouched stub through
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "check, reference",
    [
        (check_discounted_return, discounted_return),
        (check_reward_to_go, reward_to_go),
    ],
)
@pytest.mark.usefixtures("trusting")
def test_check_accepts_reference_and_lets_stub_through(check, reference, capsys):
    assert check(reference) is True
    assert "\u2714" in capsys.readouterr().out

    def stub(rewards, gamma):
        raise NotImplementedError("Exercise: write your solution here")

    with pytest.raises(NotImplementedError):
        check(stub)


def test_check_names_the_mistake():
    def no_discount(rewards, gamma):
        return rewards.sum(-1)

    with pytest.raises(AssertionError, match="without discounting"):
        check_discounted_return(no_discount)


def test_cases_are_deterministic():
    first, second = warmup_checks._cases(), warmup_checks._cases()
    for a, b in zip(first, second):
        assert torch.equal(a.kwargs["rewards"], b.kwargs["rewards"]) and a.kwargs["gamma"] == b.kwargs["gamma"]


# ---------------------------------------------------------------------------
# The authored exercise notebook matches the reference
# ---------------------------------------------------------------------------


def _header(source: str, name: str):
    """Arguments, return annotation and docstring of the function ``name`` defined in ``source``."""
    tree = ast.parse(source)
    fn = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name)
    # The docstring word for word: the notebook wraps at 88 columns, the library at 120.
    return ast.unparse(fn.args), ast.unparse(fn.returns), " ".join(ast.get_docstring(fn).split())


@pytest.mark.parametrize("reference", [discounted_return, reward_to_go])
def test_solution_notebook_has_the_reference_signature_and_docstring(reference):
    nb = nbformat.read(ROOT / "solutions" / "00_warmup.ipynb", as_version=4)
    name = reference.__name__
    cells = [c for c in nb.cells if c.metadata.get("course", {}).get("exercise") == name]
    solution = [c for c in cells if "solution" in c.metadata.get("tags", [])]
    check = [c for c in cells if "check" in c.metadata.get("tags", [])]
    assert len(solution) == 1 and len(check) == 1
    assert f"check_{name}({name})" in check[0].source
    assert _header(solution[0].source, name) == _header(inspect.getsource(reference), name)
    assert name in nb.metadata["course"]["exercises"]
