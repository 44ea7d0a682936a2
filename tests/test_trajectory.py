"""The trajectory policy gradient and the reward-to-go (course_lib.lectures.trajectory)."""

import pytest
import torch

from course_lib.baselines import gradient_variance
from course_lib.lectures import trajectory


def test_exact_gradient_matches_autograd():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    rewards = torch.randn(3, 4, generator=g, dtype=torch.float64)
    J = (torch.softmax(logits, -1) * rewards).sum()
    (grad,) = torch.autograd.grad(J, logits)
    torch.testing.assert_close(trajectory.exact_trajectory_gradient(logits.detach(), rewards), grad)


def test_both_estimators_are_unbiased_and_reward_to_go_has_less_variance():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(4, 3, generator=g, dtype=torch.float64)
    rewards = torch.randn(4, 3, generator=g, dtype=torch.float64) + 1.0
    exact = trajectory.exact_trajectory_gradient(logits, rewards).flatten()
    n = 40_000
    spread = {}
    for weights in trajectory.WEIGHTS:
        est = trajectory.trajectory_gradient_estimates(
            logits, rewards, n, weights, generator=torch.Generator().manual_seed(2)
        ).flatten(1)
        z = (est.mean(0) - exact).abs() / (est.std(0) / n**0.5)
        assert z.max() < 4.5
        spread[weights] = gradient_variance(est)
    assert spread["reward_to_go"] < spread["return"]


def test_one_step_return_and_reward_to_go_agree():
    logits, rewards = torch.zeros(1, 3, dtype=torch.float64), torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    a = trajectory.trajectory_gradient_estimates(logits, rewards, 10, "return", torch.Generator().manual_seed(0))
    b = trajectory.trajectory_gradient_estimates(logits, rewards, 10, "reward_to_go", torch.Generator().manual_seed(0))
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"logits": torch.zeros(3)}, "logits"),
        ({"step_rewards": torch.zeros(2, 2)}, "step_rewards"),
        ({"n_samples": 0}, "n_samples"),
        ({"weights": "full"}, "weights"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name):
    args = {"logits": torch.zeros(2, 3), "step_rewards": torch.zeros(2, 3), "n_samples": 4, **kwargs}
    with pytest.raises(ValueError, match=name):
        trajectory.trajectory_gradient_estimates(**args)
