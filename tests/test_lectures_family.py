"""Tests of chapter 11's variants (lectures.family) and trained testbeds (lectures.family_testbeds)."""

import math

import numpy as np
import pytest

from course_lib import lm_rl
from course_lib.lectures import family, family_testbeds
from course_lib.lectures.protocol import recipe_hash

pytestmark = pytest.mark.usefixtures("one_thread")


def test_every_variant_is_valid_switches_with_its_paper():
    for name, v in family.VARIANTS.items():
        assert set(v) == {"switches", "paper", "changes"} and v["paper"] and v["changes"], name
        assert " " not in name, "names go on the benchmark's lines"
        lm_rl.LMRLConfig(**family.variant_switches(name)).validate()
    dapo = family.VARIANTS["DAPO"]["switches"]
    for part in ("DAPO-clip-higher", "DAPO-dyn-sampling", "DAPO-token-mean", "DAPO-overlong-filter"):
        assert all(dapo[k] == v for k, v in family.VARIANTS[part]["switches"].items()), part
    assert "overlong_cache" not in dapo, "the bundle leaves out the soft punishment (right answers reach the limit)"
    with pytest.raises(ValueError, match="name"):
        family.variant_switches("TRPO")


def test_ppo_is_chapter_08s_ppo():
    switches = family.variant_switches("PPO")
    assert switches.pop("algo") == "ppo" and switches == family.capstone.PPO_CHANGES


def test_testbeds_name_their_variants_baseline_first_and_a_lower_lr():
    for name, bed in family.TESTBEDS.items():
        assert bed.name == name and set(bed.variants) <= set(family.VARIANTS) | {"REINFORCE"}
        assert bed.baseline == "GRPO"
        if name in family.TRAINED:
            assert len(bed.lr_grid) >= 3 and min(bed.lr_grid) < family_testbeds.config(name).rl.lr in bed.lr_grid
    assert len(family.TESTBEDS["accuracy"].variants) == 10
    assert len(family.measured_variants()) >= 14


def test_each_testbed_has_its_problem_and_a_sample_budget():
    length, sparse = family_testbeds.config("length"), family_testbeds.config("sparse")
    drift, accuracy = family_testbeds.config("drift"), family_testbeds.config("accuracy")
    assert length.rl.max_new_tokens == 14 and length.n_digits == 3, "the longest scratchpads need 15"
    assert sparse.reward == "exact" and accuracy.reward == "digits+exact"
    assert (drift.rl.update_epochs, drift.rl.num_minibatches) == (8, 4)
    assert (accuracy.rl.update_epochs, accuracy.rl.num_minibatches, accuracy.rl.clip_eps_high) == (4, 2, None)
    for cfg in (length, sparse, drift, accuracy):
        assert cfg.rl.max_completions == cfg.rl.iterations * cfg.rl.prompts_per_step * cfg.rl.group_size
    assert accuracy.rl.max_completions == 48 * 64 * 8
    assert family_testbeds.warm_up_key("sparse") == family_testbeds.warm_up_key("drift"), "one warm-up, shared"
    assert family_testbeds.warm_up_key("length") != family_testbeds.warm_up_key("accuracy")


def test_recipes_differ_by_variant_and_lr():
    hashes = {
        recipe_hash(family_testbeds.recipe(bed, name, lr))
        for bed in family.TRAINED
        for name in family.TESTBEDS[bed].variants
        for lr in family.TESTBEDS[bed].lr_grid
    }
    assert len(hashes) == sum(
        len(family.TESTBEDS[b].variants) * len(family.TESTBEDS[b].lr_grid) for b in family.TRAINED
    )
    with pytest.raises(ValueError, match="variant"):
        family_testbeds.recipe("drift", "PPO", 1e-3)


@pytest.mark.parametrize(
    "testbed, variant",
    [("length", "DAPO-soft-overlong"), ("sparse", "DAPO-dyn-sampling"), ("drift", "GSPO"), ("accuracy", "PPO")],
)
def test_a_quick_run_of_each_testbed_gives_its_record(testbed, variant):
    lm, task, split = family_testbeds.warm_up(testbed, 0, quick=True)
    rec = family_testbeds.run(testbed, variant, 1e-3, 0, lm, task, split, "val", quick=True)
    cfg = family_testbeds.config(testbed, quick=True)
    assert rec["completions"] >= cfg.rl.max_completions and 1 <= rec["rounds"] <= cfg.rl.iterations
    assert 0 <= rec["score"] <= 1 and rec["eval"]["completions"][-1] == rec["completions"]
    assert set(family_testbeds.PER_ROUND) <= set(rec["final"]) and "silenced_low_prob" in rec["curves"]
    if testbed == "length":
        assert {"length_wrong", "truncated", "scratchpad_share"} <= set(rec["final"])
    if testbed == "sparse":
        assert set(rec["pass_at_k"]) == {"1", "4", "16"}
        assert rec["pass_at_k"]["1"] <= rec["pass_at_k"]["4"] <= rec["pass_at_k"]["16"]


def test_a_saved_warm_up_loads_into_the_same_model():
    lm, _, _ = family_testbeds.warm_up("drift", 3, quick=True)
    state = {k: v.clone() for k, v in lm.state_dict().items()}
    again, _, _ = family_testbeds.warm_up("sparse", 3, quick=True, state=state)
    assert all((again.state_dict()[k] == v).all() for k, v in state.items())


def test_length_problem_samples_the_same_draws_at_both_limits():
    lm, task, split = family_testbeds.warm_up("length", 0, quick=True)
    out = family_testbeds.length_problem(lm, task, split["val"][:6], seed=0, group_size=4)
    assert out["room"]["limit"] == task.max_new_tokens and out["testbed"]["limit"] == task.max_new_tokens - 1
    assert out["room"]["truncated"] <= out["testbed"]["truncated"], "one token less cuts off at least as many"
    assert sum(out["testbed"]["share"].values()) == pytest.approx(1.0)


def _history(rounds=8):
    h = {k: [float(i) for i in range(rounds)] for k in family_testbeds.PER_ROUND + ("silenced_low_prob",)}
    h["silenced_low_prob"][-1] = float("nan")  # a round with no low-probability token
    h.update(
        completions=[100 * (i + 1) for i in range(rounds)],
        seconds=[1.0 * (i + 1) for i in range(rounds)],
        eval={"completions": [0, 400, 800], "score": [0.2, 0.4, 0.5]},
    )
    return h


def test_record_by_hand():
    rec = family_testbeds.record(_history(), "drift")
    assert rec["score"] == 0.5 and rec["start"] == 0.2 and rec["rounds"] == 8 and rec["completions"] == 800
    assert rec["final"]["kl"] == pytest.approx(np.mean([3, 4, 5, 6, 7])), "the mean of the last 5 rounds"
    assert rec["final"]["silenced_low_prob"] == pytest.approx(np.mean([3, 4, 5, 6])), "nan rounds left out"
    assert len(rec["curves"]["kl"]) == 8 and rec["curves"]["silenced_low_prob"][-1] is None
    long = family_testbeds.record(_history(60), "accuracy")
    assert len(long["curves"]["kl"]) == 24 and long["curves"]["kl"][0] == pytest.approx(np.mean([0, 1, 2]))
    assert math.isnan(family_testbeds._final([float("nan")] * 3))


def test_lecture_11_sends_students_to_the_exercises_not_the_answers():
    import json
    from pathlib import Path

    notebook = Path(__file__).resolve().parent.parent / "notebooks" / "11_grpo_family.ipynb"
    first = "".join(json.loads(notebook.read_text())["cells"][0]["source"])
    assert "exercises/11_grpo_family.ipynb" in first and "solutions/" not in first


def test_dr_grpo_divisor_is_dr_grpo_with_the_std_kept():
    """Protocol v2's length testbed adds Dr. GRPO's constant divisor alone, so that the length claim (about the
    divisor) is told apart from the dropped std: the two recipes differ in ``normalize_std`` and nothing else."""
    assert family.testbed_variants("length") == family.TESTBEDS["length"].variants  # version 1's tables unchanged
    assert family.testbed_variants("length", 2) == (*family.TESTBEDS["length"].variants, "Dr.GRPO-divisor")
    assert family.testbed_variants("drift", 2) == family.TESTBEDS["drift"].variants
    whole = family_testbeds.recipe("length", "Dr.GRPO", 1e-3, quick=True)["rl"]
    divisor = family_testbeds.recipe("length", "Dr.GRPO-divisor", 1e-3, quick=True)["rl"]
    grpo = family_testbeds.recipe("length", "GRPO", 1e-3, quick=True)["rl"]
    assert {k for k in whole if whole[k] != divisor[k]} == {"normalize_std"}
    assert {k for k in grpo if grpo[k] != divisor[k]} == {"loss_agg"}
    with pytest.raises(ValueError, match="testbed"):
        family.testbed_variants("nowhere")
