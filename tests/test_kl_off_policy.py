"""course_lib.lectures.kl_off_policy: the expected gradient of a KL penalty in the loss when pi_theta != pi_old."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.lectures import kl_off_policy as ko
from course_lib.trainers import GRPOTrainer, GRPOTrainerConfig


def test_k1_expected_gradient_by_hand():
    # pi_old = (1/2, 1/2), pi_theta = softmax(log 3, 0) = (3/4, 1/4). d log pi_theta(y) / d logits = e_y - pi_theta,
    # so E_{pi_old}[beta (e_y - pi_theta)] = beta (pi_old - pi_theta) = 0.04 * (-1/4, +1/4) = (-0.01, +0.01).
    logits = torch.tensor([math.log(3.0), 0.0], dtype=torch.float64)
    logits_old = torch.zeros(2, dtype=torch.float64)
    logits_ref = torch.tensor([2.0, -1.0], dtype=torch.float64)
    grad = ko.expected_penalty_gradient(logits, logits_old, logits_ref, "k1", kl_coef=0.04)
    torch.testing.assert_close(grad, torch.tensor([-0.01, 0.01], dtype=torch.float64))
    # grad KL(pi_old || pi_theta) = pi_theta - pi_old = (+1/4, -1/4): the k1 gradient is -beta times it.
    torch.testing.assert_close(ko.kl_gradient(logits, logits_old), torch.tensor([0.25, -0.25], dtype=torch.float64))
    assert ko.cosine(grad, -ko.kl_gradient(logits, logits_old)) == pytest.approx(1.0)


def test_k1_expected_gradient_is_zero_on_the_first_step():
    logits = torch.tensor([0.3, -1.0, 2.0], dtype=torch.float64)
    grad = ko.expected_penalty_gradient(logits, logits, torch.zeros(3, dtype=torch.float64), "k1", kl_coef=0.5)
    assert grad.abs().max() < 1e-15


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 8), st.integers(0, 2**31 - 1), st.floats(0.0, 2.0))
def test_k1_expected_gradient_is_minus_beta_grad_kl_old_theta(V, seed, kl_coef):
    g = torch.Generator().manual_seed(seed)
    logits, logits_old, logits_ref = (3 * torch.randn(V, generator=g, dtype=torch.float64) for _ in range(3))
    grad = ko.expected_penalty_gradient(logits, logits_old, logits_ref, "k1", kl_coef)
    torch.testing.assert_close(grad, -kl_coef * ko.kl_gradient(logits, logits_old))
    # The reference drops out: another reference gives the same gradient.
    other = ko.expected_penalty_gradient(logits, logits_old, -logits_ref, "k1", kl_coef)
    torch.testing.assert_close(grad, other)


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 8), st.integers(0, 2**31 - 1))
def test_k3_on_policy_is_grad_kl_ref_theta(V, seed):
    # On the first step (pi_theta = pi_old) k3 in the loss follows grad KL(pi_ref || pi_theta) (section 4).
    g = torch.Generator().manual_seed(seed)
    logits, logits_ref = (2 * torch.randn(V, generator=g, dtype=torch.float64) for _ in range(2))
    grad = ko.expected_penalty_gradient(logits, logits, logits_ref, "k3", kl_coef=0.04)
    torch.testing.assert_close(grad, 0.04 * ko.kl_gradient(logits, logits_ref))


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 8), st.integers(0, 2**31 - 1), st.sampled_from(["k1", "k3"]))
def test_importance_weighted_penalty_follows_grad_kl_theta_ref_at_every_step(V, seed, kind):
    # With the ratio pi_theta / pi_old in front, E_{pi_old}[grad(ratio * k)] = grad sum_y pi_theta k,
    # which is grad KL(pi_theta || pi_ref) for k1 and for k3.
    g = torch.Generator().manual_seed(seed)
    logits, logits_old, logits_ref = (2 * torch.randn(V, generator=g, dtype=torch.float64) for _ in range(3))
    grad = ko.expected_penalty_gradient(logits, logits_old, logits_ref, kind, 0.04, importance_weight=True)
    torch.testing.assert_close(grad, 0.04 * ko.reverse_kl_gradient(logits, logits_ref))


def test_reverse_kl_gradient_by_hand():
    # pi_theta = (3/4, 1/4), pi_ref = (1/2, 1/2): d KL / d z_v = pi_v (log(pi_v / ref_v) - KL).
    logits = torch.tensor([math.log(3.0), 0.0], dtype=torch.float64)
    kl = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    expected = torch.tensor([0.75 * (math.log(1.5) - kl), 0.25 * (math.log(0.5) - kl)], dtype=torch.float64)
    torch.testing.assert_close(ko.reverse_kl_gradient(logits, torch.zeros(2, dtype=torch.float64)), expected)


def test_sampled_gradient_converges_to_the_expected_one():
    g = torch.Generator().manual_seed(0)
    logits, logits_old, logits_ref = (torch.randn(6, generator=g, dtype=torch.float64) for _ in range(3))
    exact = ko.expected_penalty_gradient(logits, logits_old, logits_ref, "k1", 0.04)
    sampled = ko.sampled_penalty_gradient(
        logits, logits_old, logits_ref, "k1", 0.04, 200_000, generator=torch.Generator().manual_seed(1)
    )
    assert ko.cosine(sampled, exact) > 0.99


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"kind": "k4"}, "kind"),
        ({"kl_coef": -0.1}, "kl_coef"),
        ({"logits": torch.zeros(2, 3)}, "logits"),
        ({"logits_old": torch.zeros(4)}, "logits_old"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, name):
    args = {"logits": torch.zeros(3), "logits_old": torch.zeros(3), "logits_ref": torch.zeros(3), "kind": "k1"}
    args["kl_coef"] = 0.04
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        ko.expected_penalty_gradient(**args)


def test_batch_drift_trainer_trains_as_the_plain_one_and_records_one_drift_per_round():
    config = GRPOTrainerConfig(seed=0, rounds=3, kl_kind="k1")
    plain = GRPOTrainer.for_sorting(config).train(progress=False)
    drifting = ko.BatchDriftGRPOTrainer.for_sorting(config).train(progress=False)
    assert drifting.mean_reward == plain.mean_reward
    assert len(drifting.batch_drift) == 3
    assert all(d > -1e-6 for d in drifting.batch_drift)  # a KL, up to float32 rounding
    assert drifting.batch_drift[0] > 0  # ten steps on a batch move the policy


def test_committed_runs_are_complete():
    import json
    from pathlib import Path

    path = Path(ko.__file__).parent / "data" / "kl_in_loss_06.json"
    runs = json.loads(path.read_text())
    assert runs["meta"]["seeds"] == 8
    assert len(runs["runs"]) == 4
    for rows in runs["runs"].values():
        assert len(rows) == 8
        # A KL is never negative; float32 rounding leaves a policy that did not move at about -1e-8.
        assert all(len(row["batch_drift"]) == 100 and min(row["batch_drift"]) > -1e-6 for row in rows)
