"""Tests for course_lib.trainers.pg_trainer: the REINFORCE loop on the CS336 sorting task."""

import dataclasses

import pytest
import torch

from course_lib.trainers.pg_trainer import PGHistory, PGTrainerConfig, train_sorting_pg


def test_history_shapes_and_ranges():
    cfg = PGTrainerConfig(rounds=4, steps_per_round=2, group_size=5)
    h = train_sorting_pg(cfg)
    assert isinstance(h, PGHistory)
    assert len(h.mean_reward) == len(h.loss) == len(h.greedy_reward) == len(h.nonzero_fraction) == 4
    assert all(len(g) == 3 for g in h.greedy_reward)  # the lecture's three prompts
    assert h.max_reward == 5.0  # 3 inclusion points + 2 ordering points
    assert all(0.0 <= r <= 5.0 for r in h.mean_reward)
    assert h.model is not None and h.model(torch.tensor([[1, 0, 2]])).shape == (1, 3, 5)


def test_same_seed_same_history_and_other_seed_differs():
    cfg = PGTrainerConfig(rounds=5, steps_per_round=2)
    a, b = train_sorting_pg(cfg), train_sorting_pg(cfg)
    assert a.mean_reward == b.mean_reward and a.loss == b.loss and a.greedy_reward == b.greedy_reward
    c = train_sorting_pg(dataclasses.replace(cfg, seed=1))
    assert c.loss != a.loss


def test_global_rng_and_thread_count_are_left_alone():
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    train_sorting_pg(PGTrainerConfig(rounds=2, steps_per_round=1))
    torch.testing.assert_close(torch.rand(3), expected)
    assert torch.get_num_threads() == threads


def test_reward_rises_on_an_easy_setting():
    # The lecture's prompts, 30 rounds: the sampled reward ends well above where it
    # starts, and the loss on fresh samples shrinks as the policy becomes confident.
    h = train_sorting_pg(PGTrainerConfig(rounds=30, seed=0))
    start, end = sum(h.mean_reward[:3]) / 3, sum(h.mean_reward[-3:]) / 3
    assert end > start + 0.5
    assert abs(h.on_policy_loss[-1]) < abs(h.on_policy_loss[0])


def test_exact_match_reward_is_zero_or_one_and_mostly_zero_at_start():
    h = train_sorting_pg(PGTrainerConfig(reward="exact_match", rounds=3, steps_per_round=1))
    assert h.max_reward == 1.0
    assert all(0.0 <= r <= 1.0 for r in h.mean_reward)
    # With rewards as deltas, a response carries a gradient only when it is exactly right.
    assert h.nonzero_fraction[0] == pytest.approx(h.mean_reward[0])


def test_centered_deltas_have_zero_signal_when_a_group_agrees():
    # G = 1: every group agrees with itself, so centred deltas are all zero and nothing moves.
    h = train_sorting_pg(PGTrainerConfig(deltas_mode="centered_rewards", group_size=1, rounds=3))
    assert h.nonzero_fraction == [0.0, 0.0, 0.0]
    assert h.loss == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "field, value",
    [
        ("deltas_mode", "advantages"),
        ("reward", "sorted"),
        ("group_size", 0),
        ("rounds", -1),
        ("steps_per_round", 1.5),
        ("lr", 0.0),
        ("embedding_dim", 0),
        ("seed", -1),
    ],
)
def test_bad_config_raises_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        PGTrainerConfig(**{field: value})
    # A config changed after construction is caught when training starts.
    cfg = PGTrainerConfig()
    setattr(cfg, field, value)
    with pytest.raises(ValueError, match=field):
        train_sorting_pg(cfg)


def test_bad_prompts_vocab_size_and_config_type():
    with pytest.raises(ValueError, match="config"):
        train_sorting_pg({"rounds": 1})
    with pytest.raises(ValueError, match="prompts"):
        train_sorting_pg(PGTrainerConfig(rounds=1), prompts=torch.tensor([1, 0, 2]))
    with pytest.raises(ValueError, match="prompts"):
        train_sorting_pg(PGTrainerConfig(rounds=1), prompts=torch.tensor([[1, 0, 4]]), vocab_size=3)
    with pytest.raises(ValueError, match="vocab_size"):
        train_sorting_pg(PGTrainerConfig(rounds=1), vocab_size=0)


def test_lecture_config_is_the_lectures_optimiser_and_init():
    cfg = PGTrainerConfig.lecture(seed=3)
    assert (cfg.lr, cfg.embedding_std, cfg.group_size, cfg.rounds, cfg.steps_per_round, cfg.seed) == (
        1e-3,
        1.0,
        10,
        100,
        10,
        3,
    )
    with pytest.raises(ValueError, match="embedding_std"):
        PGTrainerConfig(embedding_std=-1.0)
