"""Held-out prompts, a moving reference, expert iteration and the fixed-budget sweep."""

import json
from pathlib import Path

import pytest
import torch

from course_lib.lectures import budget_sweep, sorting_variants
from course_lib.tasks import sorting_prompts
from course_lib.trainers.grpo_trainer import GRPOTrainer, GRPOTrainerConfig

DATA = Path(sorting_variants.__file__).parent / "data"


def test_held_out_prompts_are_distinct_and_never_the_training_ones():
    held = sorting_variants.held_out_prompts(24)
    rows = {tuple(p) for p in held.tolist()}
    assert held.shape == (24, 3) and len(rows) == 24
    assert not rows & {tuple(p) for p in sorting_prompts().tolist()}
    assert all(len(set(p)) == 3 and max(p) < 5 for p in rows)
    with pytest.raises(ValueError, match="n"):
        sorting_variants.held_out_prompts(60)  # only 57 prompts of 3 distinct tokens out of 5 are left


def test_greedy_scores_of_a_policy_that_sorts():
    class Sorter(torch.nn.Module):
        def forward(self, prompts):
            return torch.nn.functional.one_hot(prompts.sort(-1).values, 5).float() * 10

    scores = sorting_variants.greedy_scores(Sorter(), sorting_variants.held_out_prompts(8))
    assert scores == {"greedy_reward": 5.0, "sorted_fraction": 1.0}


def test_refreshing_every_epoch_makes_the_reference_the_sampling_policy():
    config = GRPOTrainerConfig(rounds=3, ref_refresh_every=1)
    trainer = GRPOTrainer.for_sorting(config)
    seen = []
    original = trainer.training_step

    def spy(prompts, responses, rewards, logp_old, logp_ref):
        seen.append(torch.allclose(logp_old, logp_ref))
        return original(prompts, responses, rewards, logp_old, logp_ref)

    trainer.training_step = spy
    trainer.train(progress=False)
    assert seen and all(seen)  # logp_ref == logp_old at every step: a KL toward pi_old
    frozen = GRPOTrainer.for_sorting(GRPOTrainerConfig(rounds=3))
    frozen.train(progress=False)
    init = sorting_variants.initial_sorting_policy(GRPOTrainerConfig(), sorting_prompts())
    assert all(torch.equal(a, b) for a, b in zip(frozen.ref_model.parameters(), init.parameters()))


def test_expert_iteration_trains_on_the_best_of_each_group():
    history = sorting_variants.train_expert_iteration(GRPOTrainerConfig(rounds=15))
    assert len(history.mean_reward) == 15 and history.mean_reward[-1] > history.mean_reward[0]
    assert history.entropy[-1] < history.entropy[0]


def test_budget_sweep_keeps_the_responses_per_epoch():
    for G in (2, 4, 8, 16):
        assert budget_sweep.grouped_prompts(48, G).shape[0] * G == 48
    with pytest.raises(ValueError, match="budget"):
        budget_sweep.grouped_prompts(50, 4)
    out = budget_sweep.run_budget_sweep(group_sizes=(2, 16), clip_eps=(0.2,), seeds=range(1), rounds=2)
    assert [c["groups_per_round"] * c["group_size"] for c in out["configs"]] == [48, 48]


@pytest.mark.parametrize("name", ["sweep_07_budget.json", "sorting_variants.json"])
def test_precomputed_results_are_small_and_complete(name):
    path = DATA / name
    assert path.stat().st_size < 50_000
    data = json.loads(path.read_text())
    assert data["meta"]["generated_by"].startswith("benchmarks/")
