"""Tests of the protocol's statistics (course_lib.lectures.protocol), its bookkeeping (benchmarks/_protocol.py) and
chapter 08's ladder (course_lib.lectures.ladder). Version 2's statistics (power, Holm, the pick and edge rules,
matched learning rates) are in tests/test_protocol_v2.py."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.lectures import capstone, ladder
from course_lib.lectures.protocol import paired_difference, recipe_hash, summary, t_quantile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _protocol  # noqa: E402

# --- the t quantile against published tables ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "df, expected",
    [(1, 12.706), (2, 4.303), (4, 2.776), (7, 2.365), (9, 2.262), (15, 2.131), (30, 2.042)],
)
def test_t_quantile_matches_the_tables(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-3)


def test_t_quantile_other_levels_and_errors():
    assert t_quantile(0.95, 7) == pytest.approx(1.895, abs=1e-3)  # a one-sided 95% bound over 8 seeds
    assert t_quantile(0.5, 3) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="p:"):
        t_quantile(1.0, 3)
    with pytest.raises(ValueError, match="df"):
        t_quantile(0.975, 0)


# --- summaries and paired differences by hand -----------------------------------------------------------------------


def test_summary_by_hand():
    s = summary([0.9, 0.8, 1.0])
    assert (s.n, s.worst, s.best) == (3, 0.8, 1.0)
    assert s.mean == pytest.approx(0.9) and s.std == pytest.approx(0.1)
    assert summary([0.5]).std == 0.0
    with pytest.raises(ValueError, match="values"):
        summary([])


def test_paired_difference_by_hand():
    a = {1: 0.90, 2: 0.80, 3: 0.85, 9: 0.5}  # seed 9 was not run with b: it is left out
    b = {1: 0.95, 2: 0.82, 3: 0.90}
    d = paired_difference(a, b)
    # differences 0.05, 0.02, 0.05: mean 0.04, sd 0.01732; t(0.975, 2) = 4.303; half width 4.303 * 0.01732 / sqrt 3
    assert d.n == 3 and d.mean == pytest.approx(0.04)
    assert d.half_width == pytest.approx(4.3027 * math.sqrt(0.0003) / math.sqrt(3), rel=1e-4)
    assert str(d) == "+0.040±0.043" and not d.excludes_zero()
    with pytest.raises(ValueError, match="at least 2 seeds"):
        paired_difference({1: 0.5}, {1: 0.6})


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=2, max_size=10), st.floats(-0.5, 0.5))
def test_a_constant_shift_is_resolved_exactly(values, shift):
    """Every seed moved by the same amount: the interval has width 0 and sits on the shift."""
    a = dict(enumerate(values))
    d = paired_difference(a, {k: v + shift for k, v in a.items()})
    assert d.mean == pytest.approx(shift, abs=1e-9) and d.half_width == pytest.approx(0.0, abs=1e-9)


def test_recipe_hash_is_stable_and_order_free():
    assert recipe_hash({"lr": 2e-3, "rung": "GRPO"}) == recipe_hash({"rung": "GRPO", "lr": 2e-3})
    assert recipe_hash({"lr": 2e-3}) != recipe_hash({"lr": 3e-3})
    assert len(recipe_hash({})) == 8


def test_a_renamed_field_is_hashed_under_its_old_name():
    """protocol.HASHED_AS: LMRLConfig.value_loss_coef was vf_coef when the shipped recipes were frozen."""
    assert recipe_hash({"rl": {"value_loss_coef": 0.5, "lr": 1e-3}}) == recipe_hash(
        {"rl": {"vf_coef": 0.5, "lr": 1e-3}}
    )
    assert recipe_hash({"runs": [{"value_loss_coef": 0.5}]}) == recipe_hash({"runs": [{"vf_coef": 0.5}]})
    assert recipe_hash({"rl": {"value_loss_coef": 0.5}}) != recipe_hash({"rl": {"value_loss_coef": 1.0}})
    with pytest.raises(ValueError, match="both the new and the old name"):
        recipe_hash({"value_loss_coef": 0.5, "vf_coef": 0.5})


def test_every_shipped_frozen_recipe_keeps_its_hash_under_todays_names():
    """Recipes rebuilt by today's code, with today's field names (value_loss_coef, not vf_coef), hash as they were
    frozen: chapter 08's ladder (results/ladder_recipes.json and its spent seed set), chapter 10's spent seed set
    (seed_sets.json) and chapter 11's tuning runs (results/family_tune.jsonl)."""
    import capstone as capstone_benchmark  # benchmarks/capstone.py, not course_lib's
    import reasoning_length

    from course_lib.lectures import family_testbeds

    ledger = json.loads(_protocol.SEED_SETS.read_text())["sets"]
    frozen = json.loads((_protocol.RESULTS / "ladder_recipes.json").read_text())
    cfg = capstone_benchmark.base_config(False)
    rebuilt = {
        rung: capstone_benchmark.recipe(cfg, int(rung), entry["recipe"]["rl"]["lr"]) for rung, entry in frozen.items()
    }
    assert all("value_loss_coef" in r["rl"] and "vf_coef" not in r["rl"] for r in rebuilt.values())
    hashes = {rung: recipe_hash(recipe) for rung, recipe in rebuilt.items()}
    assert hashes == {rung: entry["hash"] for rung, entry in frozen.items()}
    assert hashes == ledger["ladder-1"]["spent_on"]["recipes"]
    assert all(recipe_hash(entry["recipe"]) == entry["hash"] for entry in frozen.values())  # as stored, old names

    scratchpad, filler = reasoning_length.configs(False)
    assert hasattr(scratchpad.rl, "value_loss_coef")
    reasoning = {
        "scratchpad": recipe_hash(dataclasses.asdict(scratchpad)),
        "filler": recipe_hash(dataclasses.asdict(filler)),
    }
    assert reasoning == ledger["reasoning-1"]["spent_on"]["recipes"]

    tuned = [json.loads(line) for line in (_protocol.RESULTS / "family_tune.jsonl").read_text().splitlines() if line]
    for run in tuned:
        recipe = family_testbeds.recipe(run["testbed"], run["variant"], run["lr"])
        assert recipe_hash(recipe) == run["recipe_hash"], (run["testbed"], run["variant"], run["lr"])


# --- the bookkeeping: the rule, frozen recipes, spent seed sets -----------------------------------------------------


def test_pick_setting_follows_the_rule():
    assert _protocol.pick_setting({1e-3: [0.9, 0.9], 2e-3: [0.95, 0.8]}) == 1e-3  # mean first: 0.9 > 0.875
    assert _protocol.pick_setting({1e-3: [0.9, 0.8], 2e-3: [0.95, 0.75]}) == 1e-3  # equal means: the better worst
    assert _protocol.pick_setting({1e-3: [0.9], 2e-3: [0.9]}) == 1e-3  # a full tie: the lower rate


def test_a_frozen_recipe_edited_by_hand_is_refused(tmp_path):
    path = tmp_path / "recipes.json"
    hashes = _protocol.freeze(path, {"0": {"lr": 2e-3}})
    assert _protocol.load_frozen(path)["0"]["hash"] == hashes["0"]
    edited = json.loads(path.read_text())
    edited["0"]["recipe"]["lr"] = 3e-3
    path.write_text(json.dumps(edited))
    with pytest.raises(SystemExit, match="no longer matches"):
        _protocol.load_frozen(path)


def test_a_spent_seed_set_refuses_a_changed_recipe(tmp_path, monkeypatch):
    ledger = tmp_path / "seed_sets.json"
    ledger.write_text(json.dumps({"sets": {"x-1": {"seeds": [7, 8]}}}))
    monkeypatch.setattr(_protocol, "SEED_SETS", ledger)
    assert _protocol.seed_set("x-1") == [7, 8]
    _protocol.spend("x-1", "bench.py", {"0": "aaaa", "1": "bbbb"})
    _protocol.spend("x-1", "bench.py", {"0": "aaaa", "1": "bbbb"})  # the same recipes: resuming is allowed
    with pytest.raises(SystemExit, match="changed: 1"):
        _protocol.spend("x-1", "bench.py", {"0": "aaaa", "1": "cccc"})
    with pytest.raises(SystemExit, match="not in"):
        _protocol.seed_set("x-2")


def test_runs_are_appended_and_read_back(tmp_path):
    path = tmp_path / "runs.jsonl"
    assert _protocol.load_runs(path) == []
    _protocol.append_run(path, {"rung": 0, "seed": 1})
    _protocol.append_run(path, {"rung": 1, "seed": 1})
    assert [r["rung"] for r in _protocol.load_runs(path)] == [0, 1]


def test_the_shipped_seed_sets_start_above_every_seed_used_before():
    sets = json.loads(_protocol.SEED_SETS.read_text())["sets"]
    seeds = [seed for entry in sets.values() for seed in entry["seeds"]]
    assert min(seeds) >= 1000 and len(seeds) == len(set(seeds)), "each seed in one set only"


# --- the ladder ---------------------------------------------------------------------------------------------------


def test_the_ladder_climbs_from_grpo_to_chapter_08s_ppo():
    ladder.check_the_top_is_ppo()
    assert ladder.rung_algo_and_changes(0) == ("grpo", {})
    algo, changes = ladder.rung_algo_and_changes(5)
    assert algo == "grpo" and changes == capstone.PPO_CHANGES, "rung 5 differs from PPO in the advantage alone"
    for rung in range(1, len(ladder.RUNGS)):  # one change per rung
        assert len(ladder.RUNGS[rung][1]) == 1
    with pytest.raises(ValueError, match="rung"):
        ladder.rung_changes(len(ladder.RUNGS))
    assert len(ladder.LR_GRID) >= 3 and min(ladder.LR_GRID) < capstone.CapstoneConfig().rl.lr


def test_the_shipped_ladder_is_the_frozen_one():
    """ladder_08.json (what notebook 08 loads) holds the recipes frozen in benchmarks/results, and every report
    run in it was made with its rung's frozen recipe, on the report seeds, for every rung."""
    results = ladder.load_ladder()
    frozen = json.loads((_protocol.RESULTS / "ladder_recipes.json").read_text())
    assert {k: v["hash"] for k, v in results["recipes"].items()} == {k: v["hash"] for k, v in frozen.items()}
    for rung in range(len(ladder.RUNGS)):
        assert ladder.frozen_lr(rung, results) == frozen[str(rung)]["recipe"]["rl"]["lr"]
        hashes = {r["recipe_hash"] for r in results["runs"] if r["rung"] == rung}
        assert hashes == {frozen[str(rung)]["hash"]}, f"rung {rung} has runs of another recipe"
        seeds = sorted(r["seed"] for r in results["runs"] if r["rung"] == rung)
        assert seeds == results["seeds"], f"rung {rung} is missing report seeds"
