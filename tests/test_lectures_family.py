"""Tests of course_lib.lectures.family: the variants as switches, run_variant, and the table's reduction."""

import dataclasses
import math

import pytest
import torch

from course_lib import lm_rl
from course_lib.lectures import family


def _tiny(rounds=2):
    cfg = family.family_config(rounds=rounds, prompts=4, group=4, eval_every=1)
    return dataclasses.replace(cfg, sft_steps=0, n_heldout=20, n_val=20)


def test_every_variant_is_valid_switches_with_its_paper():
    for name, v in family.VARIANTS.items():
        assert set(v) == {"switches", "paper", "changes"} and v["paper"] and v["changes"], name
        assert " " not in name, "names go on the benchmark's last line"
        switches = {k: val for k, val in v["switches"].items()}
        lm_rl.LMRLConfig(**switches).validate()
    assert set(family.MEASURED + family.TUNED_ONLY) <= set(family.VARIANTS) and len(family.MEASURED) >= 7
    dapo = family.VARIANTS["DAPO"]["switches"]
    for part in ("DAPO-clip-higher", "DAPO-dyn-sampling", "DAPO-token-mean"):  # each part is DAPO's own value
        assert all(dapo[k] == v for k, v in family.VARIANTS[part]["switches"].items()), part


def test_family_config_is_one_sample_budget():
    cfg = family.family_config()
    assert cfg.rl.max_completions == family.ROUNDS * family.PROMPTS * family.GROUP == 12288
    assert cfg.rl.prompts_per_step == 32 and cfg.rl.group_size == 8 and cfg.rl.lr == 2e-3  # the rest: chapter 08's
    assert family.base_lr("PPO") == 1e-3 and family.base_lr("GRPO") == 2e-3


@pytest.fixture(scope="module")
def state():
    return family.warm_state(_tiny(), seed=0)


@pytest.mark.parametrize("name", ["GRPO", "PPO", "DAPO", "GSPO", "CISPO"])
def test_run_variant_trains_from_a_given_state_within_the_budget(name, state):
    cfg = _tiny()
    h = family.run_variant(name, 0, cfg, state=state, eval_on="val")
    assert h["completions"][-1] >= cfg.rl.max_completions > (h["completions"][-2] if len(h["completions"]) > 1 else 0)
    assert h["eval"]["completions"][-1] == h["completions"][-1]
    rec = family.record(h, points=1)
    assert rec["eval_score"].dtype == torch.float32 and rec["curves"]["kl"].shape == (1,)
    if name == "PPO":
        assert "value_loss" in h and h["lr"][0] == pytest.approx(1e-3), "PPO's own recipe and base lr"
    if name == "GRPO":
        again = family.run_variant(name, 0, cfg, state=state, eval_on="val")
        assert again["mean_reward"] == h["mean_reward"], "seeded"


def test_run_variant_rejects_an_unknown_name():
    with pytest.raises(ValueError, match="name"):
        family.run_variant("TRPO", 0, _tiny())


def _rec(score, curve, seconds=10.0):
    return {
        "score": score,
        "eval_completions": torch.tensor([0.0, 100.0, 200.0]),
        "eval_score": torch.tensor(curve),
        "seconds": seconds,
        "final_length": 3.0,
        "final_kl": 0.01,
        "clip_fraction": 0.1,
        "completions": 200,
    }


def test_completions_to_and_summarize_by_hand():
    assert family.completions_to([0, 100, 200], [0.2, 0.8, 0.9]) == 100.0
    assert math.isinf(family.completions_to([0, 100], [0.2, 0.79]))
    runs = [_rec(0.9, [0.2, 0.85, 0.9]), _rec(0.7, [0.2, 0.5, 0.7]), _rec(0.85, [0.2, 0.6, 0.85], seconds=20.0)]
    row = family.summarize(runs)
    assert row["mean"] == pytest.approx(2.45 / 3) and row["min"] == pytest.approx(0.7) and row["failing"] == 1
    assert row["to_threshold"] == 200.0, "the lower median of 100, 200, inf"
    assert row["seconds"] == pytest.approx(40 / 3)
    assert math.isinf(family.summarize(runs[1:2])["to_threshold"])
    text = family.format_table({"A": row, "B": family.summarize(runs[1:2])})
    assert text.splitlines()[1].startswith("A ") and "never" in text.splitlines()[2]
    with pytest.raises(ValueError, match="runs"):
        family.summarize([])


def test_record_downsamples_to_chunk_means():
    h = {
        "eval": {"completions": [0, 10], "score": [0.1, 0.5]},
        "seconds": [1.0, 2.0, 3.0, 4.0],
        "completions": [10, 20, 30, 40],
        **{k: [1.0, 2.0, 3.0, 4.0] for k in family.CURVE_KEYS},
    }
    h["clip_fraction"] = [0.1, float("nan"), 0.3, 0.2]
    rec = family.record(h, points=2)
    assert rec["curves"]["mean_reward"].tolist() == [1.5, 3.5] and rec["curves"]["completions"].tolist() == [15, 35]
    assert rec["clip_fraction"] == pytest.approx(0.2) and rec["final_kl"] == 4.0 and rec["score"] == 0.5
