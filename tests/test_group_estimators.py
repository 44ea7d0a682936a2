"""Chapter 11's estimator testbed: each group advantage's exact weight per prompt, and its Monte Carlo measurement."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import family, grpo
from course_lib.lectures import family_results
from course_lib.lectures import group_estimators as E
from course_lib.lectures.bandits import bandit_exact_gradient

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def bed():
    bandit, logits = E.difficulty_bandit(E.default_success_probs(8), num_actions=3, seed=1)
    return bandit, logits, bandit_exact_gradient(bandit, logits)


def test_difficulty_bandit_puts_p_on_the_right_action():
    p = torch.tensor([0.02, 0.5, 0.98])
    bandit, logits = E.difficulty_bandit(p, num_actions=4)
    pi = torch.softmax(logits, -1)
    assert torch.allclose(pi[:, 0], p.double()) and torch.allclose(pi.sum(-1), torch.ones(3, dtype=torch.float64))
    assert bandit.rewards[:, 0].tolist() == [1.0] * 3 and bandit.rewards[:, 1:].sum() == 0
    probs = E.default_success_probs(16)
    assert probs[0] == pytest.approx(0.02) and probs[-1] == pytest.approx(0.98) and torch.all(probs.diff() > 0)
    for bad in (torch.tensor([0.0, 0.5]), torch.tensor([[0.5]]), torch.tensor([1.0])):
        with pytest.raises(ValueError, match="success_probs"):
            E.difficulty_bandit(bad)
    with pytest.raises(ValueError, match="num_actions"):
        E.difficulty_bandit(p, num_actions=1)


def test_group_advantages_are_the_course_functions():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0]])
    assert torch.equal(E.group_advantages(r, "REINFORCE"), r)
    assert torch.equal(E.group_advantages(r, "GRPO"), grpo.group_advantages(r))
    assert torch.equal(E.group_advantages(r, "Dr.GRPO"), grpo.group_advantages(r, normalize_std=False))
    assert torch.equal(E.group_advantages(r, "RLOO"), family.rloo_advantages(r))
    assert torch.equal(E.group_advantages(r, "REINFORCE++"), family.reinforce_pp_advantages(r))
    with pytest.raises(ValueError, match="estimator"):
        E.group_advantages(r, "PPO")


def test_exact_prompt_weight_by_hand():
    # G = 2: a mixed group [1, 0] has mean 0.5 and Bessel std sqrt(0.5); GRPO gives +-0.5 / sqrt(0.5) = +-0.7071
    # whatever p is (an equal group gives 0), so h(1) = (1 - p) 0.7071, h(0) = -p 0.7071 and w = 0.7071.
    for p in (0.1, 0.5, 0.9):
        assert E.exact_prompt_weight(p, 2, "GRPO") == pytest.approx(math.sqrt(0.5), rel=1e-5)
    # G = 3, p = 0.5, GRPO: the others hold k = 0, 1, 2 right answers with probability 1/4, 1/2, 1/4.
    # r = 1: [1,0,0] -> (1 - 1/3) / sqrt(1/3) = 1.1547; [1,1,0] -> (1 - 2/3) / sqrt(1/3) = 0.5774; [1,1,1] -> 0.
    # r = 0: [0,0,0] -> 0; [0,1,0] -> -0.5774; [0,1,1] -> -1.1547.
    h1 = 0.25 * 1.1547005 + 0.5 * 0.5773503
    h0 = -(0.5 * 0.5773503 + 0.25 * 1.1547005)
    assert E.exact_prompt_weight(0.5, 3, "GRPO") == pytest.approx(h1 - h0, rel=1e-5)
    assert E.exact_prompt_weight(0.0, 8, "GRPO") == pytest.approx(7 / math.sqrt(8), rel=1e-5)  # one right in 8
    with pytest.raises(ValueError, match="estimator"):
        E.exact_prompt_weight(0.5, 4, "REINFORCE++")  # its weight depends on the rest of the batch
    with pytest.raises(ValueError, match="group_size"):
        E.exact_prompt_weight(0.5, 1, "RLOO")
    with pytest.raises(ValueError, match="^p:"):
        E.exact_prompt_weight(1.5, 4, "RLOO")


@settings(max_examples=40, deadline=None)
@given(p=st.floats(0.0, 1.0), G=st.integers(2, 16))
def test_exact_weights_property(p, G):
    """Unbiased estimators weigh every prompt 1, the group mean (G - 1) / G; GRPO is symmetric in p <-> 1 - p."""
    assert E.exact_prompt_weight(p, G, "REINFORCE") == pytest.approx(1.0)
    assert E.exact_prompt_weight(p, G, "RLOO") == pytest.approx(1.0)
    assert E.exact_prompt_weight(p, G, "Dr.GRPO") == pytest.approx((G - 1) / G)
    assert E.exact_prompt_weight(p, G, "GRPO") == pytest.approx(E.exact_prompt_weight(1 - p, G, "GRPO"), rel=1e-6)


def test_grpo_weighs_the_extremes_more_and_its_tilt():
    middle, extreme = E.exact_prompt_weight(0.5, 8, "GRPO"), E.exact_prompt_weight(0.02, 8, "GRPO")
    assert extreme > 1.3 * middle
    w, p = torch.tensor([2.0, 1.0, 1.0, 2.0, 4.0]), torch.tensor([0.05, 0.3, 0.7, 0.95, 0.2])
    assert float(E.difficulty_tilt(w, p)) == pytest.approx(2.0)  # (2 + 2) / 2 over (1 + 1) / 2; p = 0.2 in neither
    with pytest.raises(ValueError, match="success_probs"):
        E.difficulty_tilt(w[:3], torch.tensor([0.4, 0.5, 0.6]))


@pytest.mark.parametrize("name", E.PER_GROUP)
def test_monte_carlo_mean_matches_the_exact_mean(bed, name):
    bandit, logits, exact = bed
    est = E.sample_estimates(bandit, logits, name, 4, 8, 6000, torch.Generator().manual_seed(0), chunk=1000)
    assert est.shape == (6000, bandit.num_states * bandit.num_actions)
    want = E.exact_mean_gradient(bandit, logits, 4, name)
    se = est.std(0) / math.sqrt(len(est))
    assert torch.all((est.mean(0) - want).abs() <= 5 * se + 1e-12), "within 5 standard errors, coordinate by coordinate"


def test_measure_by_hand(bed):
    _, _, exact = bed
    probs = E.default_success_probs(8)
    d = torch.zeros_like(exact)
    d[0] = 0.5 * exact.norm()  # a deviation of known length
    estimates = torch.stack([exact + d, exact - d] * 20)  # mean: exact; trace of the covariance: |d|^2
    m = E.measure(estimates, exact, probs, blocks=4)
    assert m.cosine == pytest.approx(1.0) and m.magnitude == pytest.approx(1.0) and m.tilt == pytest.approx(1.0)
    assert m.variance == pytest.approx(float(d.square().sum())) and m.snr == pytest.approx(4.0)
    assert m.cosine_se == pytest.approx(0.0, abs=1e-9) and torch.allclose(m.weights, torch.ones(8, dtype=torch.float64))
    doubled = E.measure(2 * estimates, exact, probs, blocks=4)
    assert doubled.magnitude == pytest.approx(2.0) and doubled.snr == pytest.approx(m.snr), "the SNR is scale-free"
    with pytest.raises(ValueError, match="estimates"):
        E.measure(estimates[:3], exact, probs, blocks=4)


def test_estimator_testbed_and_its_table():
    table = E.estimator_testbed(group_sizes=(2,), num_batches=200)
    assert [row["estimator"] for row in table["rows"]] == list(E.ESTIMATORS)
    rows = {row["estimator"]: row for row in table["rows"]}
    assert rows["REINFORCE++"]["exact"] is None and rows["RLOO"]["exact"]["magnitude"] == pytest.approx(1.0)
    assert rows["Dr.GRPO"]["exact"]["magnitude"] == pytest.approx(0.5) and len(rows["GRPO"]["weights"]) == 16
    text = family_results.format_estimator_table(table)
    assert "bias and variance against the exact gradient" in text and "[0.500]" in text
    weights = family_results.format_prompt_weights(table, group_size=2).splitlines()
    assert len(weights) == 2 + 16 and "+-" in weights[-1], "a line a prompt; REINFORCE++'s weight is measured"
    assert weights[2].split()[1:5] == ["1.000", "0.707", "0.500", "1.000"], "the exact weights at G = 2"
    with pytest.raises(ValueError, match="group_size"):
        family_results.format_prompt_weights(table, group_size=8)


def test_optimal_baselines_by_hand():
    """b* = E[R |psi|^2] / E[|psi|^2]. With K = 2, |psi|^2 is 2 (1 - p)^2 for the right action and 2 p^2 for the
    wrong one, so b* = p (1 - p)^2 / (p (1 - p)^2 + (1 - p) p^2) = 1 - p: the mean reward p only at p = 1/2."""
    bandit, logits = E.difficulty_bandit(torch.tensor([0.2, 0.5, 0.9], dtype=torch.float64), num_actions=2)
    assert torch.allclose(E.optimal_baselines(bandit, logits), torch.tensor([0.8, 0.5, 0.1], dtype=torch.float64))
    bandit, logits = E.difficulty_bandit(torch.tensor([0.98], dtype=torch.float64), num_actions=4)
    assert E.optimal_baselines(bandit, logits)[0] < 0.1, "an easy prompt's right answer has a short score"
