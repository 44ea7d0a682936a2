"""The wrong versions of course_lib.lectures.pitfalls: each differs from the right one as its docstring says."""

import pytest
import torch

from course_lib.baselines import gradient_variance
from course_lib.gae import compute_gae
from course_lib.lectures import pitfalls, variance


def test_inverted_ratio_reverses_the_gradient_at_ratio_one():
    table = pitfalls.surrogate_gradient_table(torch.tensor([1.0]))
    assert table["right A=+1"].item() == pytest.approx(1.0)
    assert table["inverted A=+1"].item() == pytest.approx(-1.0)
    assert table["inverted A=-1"].item() == pytest.approx(1.0)


def test_inverted_ratio_clips_where_one_over_r_leaves_the_band():
    table = pitfalls.surrogate_gradient_table(torch.tensor([0.8, 0.85, 1.2, 1.3]), clip_eps=0.2)
    # A = +1: 1/r > 1.2 (r < 0.833) stops the (wrong) push down; A = -1: 1/r < 0.8 (r > 1.25) stops the push up.
    assert table["inverted A=+1"].tolist()[0] == 0.0 and table["inverted A=+1"].tolist()[1] < 0
    assert table["inverted A=-1"].tolist()[2] > 0 and table["inverted A=-1"].tolist()[3] == 0.0


def test_inverted_ratio_training_goes_to_the_worst_action():
    rewards = torch.tensor([1.0, 0.0, 0.5, 2.0])
    assert pitfalls.train_bandit_ppo(rewards, iterations=20)[-1] > 1.9
    assert pitfalls.train_bandit_ppo(rewards, inverted=True, iterations=20)[-1] < 0.1


def test_sequence_ratio_variance_grows_with_length_and_gspo_shrinks():
    rows = pitfalls.sequence_ratio_stats([1, 8, 64], n=5000)
    assert rows[0]["var_sequence"] == pytest.approx(rows[0]["var_token"])
    assert rows[0]["var_gspo"] == pytest.approx(rows[0]["var_token"])
    assert rows[0]["var_sequence"] < rows[1]["var_sequence"] < rows[2]["var_sequence"]
    assert rows[0]["var_gspo"] > rows[1]["var_gspo"] > rows[2]["var_gspo"]


def _batch():
    g = torch.Generator().manual_seed(0)
    return dict(
        rewards=torch.rand(3, 6, generator=g, dtype=torch.float64),
        values=torch.rand(3, 6, generator=g, dtype=torch.float64),
        dones=torch.tensor([[0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1], [0, 0, 1, 0, 0, 0]]).bool(),
        last_values=torch.rand(3, generator=g, dtype=torch.float64),
        gamma=0.9,
        lam=0.8,
    )


@pytest.mark.parametrize("bug", pitfalls.GAE_BUGS)
def test_every_gae_bug_differs_from_compute_gae(bug):
    errors = pitfalls.gae_bug_errors(**_batch())
    assert errors[bug] > 1e-3


def test_gae_bugs_are_exactly_the_bug_described():
    batch = _batch()
    right, _ = compute_gae(**batch)
    # No dones at all: the done mask changes nothing.
    no_dones = {**batch, "dones": torch.zeros(3, 6, dtype=torch.bool)}
    torch.testing.assert_close(pitfalls.compute_gae_buggy(**no_dones, bug="no_done_mask"), compute_gae(**no_dones)[0])
    # One episode in the batch: looping over the batch axis is the only bug, and it shows.
    sliced = pitfalls.compute_gae_buggy(**batch, bug="slice")
    assert (sliced[:, -1] == 0).all()
    assert not torch.allclose(sliced[:, :-1], right[:, :-1])


def test_variance_conventions_of_the_two_state_example():
    out = pitfalls.variance_conventions(torch.tensor([11.0, 9.0, 0.0, 2.0]))
    values = sorted(round(v, 2) for v in out.values())
    assert values == [4.61, 5.32, 21.25, 28.33]


def test_population_std_scales_advantages_by_sqrt_g_over_g_minus_1():
    for row in pitfalls.std_convention_ratios((2, 4, 8)):
        assert row["measured"] == pytest.approx(row["sqrt(G / (G - 1))"], rel=1e-4)
    assert (pitfalls.population_std_advantages(torch.full((2, 4), 3.0)) == 0).all()


def test_mixed_state_groups_lose_the_signal_and_track_the_state():
    bandit = variance.random_bandit(num_states=6, num_actions=4, num_features=2, seed=0)
    logits = torch.randn(6, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    exact = variance.bandit_exact_gradient(bandit, logits)
    out = {}
    for mixed in (False, True):
        o = pitfalls.mixed_state_group_estimates(bandit, logits, 8, 4000, mixed, torch.Generator().manual_seed(5))
        along = float((o["estimates"] @ exact / exact.norm() ** 2).mean())
        corr = float(torch.corrcoef(torch.stack([o["adv"].flatten(), o["values"].flatten()]))[0, 1])
        out[mixed] = (along, corr, gradient_variance(o["estimates"]))
    assert out[False][0] > 3 * out[True][0]
    assert abs(out[False][1]) < 0.05 < 0.5 < out[True][1]


def test_bad_bug_name():
    with pytest.raises(ValueError, match="bug"):
        pitfalls.compute_gae_buggy(**_batch(), bug="typo")
