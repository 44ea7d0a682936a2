"""Version 2 of the protocol (benchmarks/PROTOCOL.md, rules 2 and 6 to 8): the number of report seeds from the last
report's paired sd, Holm's correction, p-values that agree with the intervals, the collapse-guarding pick rule, the
edge rule and the same difference at matched learning rates. Hand-computed cases first, then properties."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from course_lib.lectures import protocol
from course_lib.lectures.protocol import (
    PairedDifference,
    expected_half_width,
    holm,
    matched_lr,
    paired_difference,
    seeds_for_half_width,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _protocol  # noqa: E402

# --- power: the number of report seeds --------------------------------------------------------------------------


def test_grpo_minus_ppo_needs_23_seeds_for_three_hundredths():
    """Chapter 08's GRPO - PPO on ladder-1 has paired sd 0.069. By hand: z = 1.960 gives (1.960 * 0.069 / 0.03)^2 =
    20.3, so 21; t(0.975, 20) = 2.086 gives 23.02, so 24; t(0.975, 23) = 2.069 gives 22.6, so 23; t(0.975, 22) =
    2.074 gives 22.7: 23 again, and it stops."""
    plan = seeds_for_half_width(0.069, 0.03)
    assert [n for n, _ in plan.steps] == [21, 24, 23] and plan.n == 23
    assert expected_half_width(0.069, 23) == pytest.approx(2.0739 * 0.069 / math.sqrt(23), abs=1e-5)
    assert expected_half_width(0.069, 23) <= 0.03 < expected_half_width(0.069, 22)
    assert seeds_for_half_width(0.069, 0.035).n == 18
    assert "needs 23 seeds" in str(plan) and "n=21" in str(plan)


def test_power_errors_name_the_argument():
    with pytest.raises(ValueError, match="sd"):
        seeds_for_half_width(0.0, 0.03)
    with pytest.raises(ValueError, match="half_width"):
        seeds_for_half_width(0.07, -0.03)
    with pytest.raises(ValueError, match="level"):
        seeds_for_half_width(0.07, 0.03, level=1.0)
    with pytest.raises(ValueError, match="n"):
        expected_half_width(0.07, 1)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.005, 0.2), st.floats(0.01, 0.1))
def test_the_plan_is_the_smallest_number_of_seeds_that_reaches_the_half_width(sd, half_width):
    n = seeds_for_half_width(sd, half_width).n
    assert n >= 2 and expected_half_width(sd, n) <= half_width
    if n > 2:
        assert expected_half_width(sd, n - 1) > half_width


@settings(max_examples=20, deadline=None)
@given(st.floats(0.01, 0.2), st.floats(0.01, 0.1), st.floats(1.05, 2.0))
def test_a_narrower_interval_never_needs_fewer_seeds(sd, half_width, factor):
    assert seeds_for_half_width(sd, half_width / factor).n >= seeds_for_half_width(sd, half_width).n


# --- p-values that agree with the intervals ---------------------------------------------------------------------


def test_p_values_by_hand():
    # 8 seeds, mean exactly one t(0.975, 7) standard error from 0: the interval touches 0 and p is 0.05
    assert PairedDifference(n=8, mean=1.0, half_width=1.0).p_value() == pytest.approx(0.05, abs=1e-6)
    # 2 seeds (Cauchy): half-width 12.706 means a standard error of 1; t = 1 gives p = 2 * (1/2 - atan(1)/pi) = 0.5
    assert PairedDifference(n=2, mean=1.0, half_width=12.7062047).p_value() == pytest.approx(0.5, abs=1e-6)
    # n = 0, a normal interval: 1.96 standard errors from 0 is p = 0.05
    assert PairedDifference(n=0, mean=-1.959964, half_width=1.959964).p_value() == pytest.approx(0.05, abs=1e-6)
    assert PairedDifference(n=0, mean=0.3, half_width=0.0).p_value() == 0.0  # an exact, non-zero value
    assert PairedDifference(n=0, mean=0.0, half_width=0.0).p_value() == 1.0
    assert 0 <= PairedDifference(n=8, mean=1.0, half_width=0.01).p_value() < 1e-9  # far out in the tail


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1, 1), min_size=3, max_size=12))
def test_a_p_value_below_five_percent_is_an_interval_that_excludes_zero(differences):
    d = paired_difference(dict(enumerate([0.0] * len(differences))), dict(enumerate(differences)))
    assume(d.half_width > 1e-6 and abs(abs(d.mean) - d.half_width) > 1e-6)  # not on the boundary itself
    assert (d.p_value() < 0.05) == d.excludes_zero()


# --- Holm's correction ------------------------------------------------------------------------------------------


def test_holm_by_hand():
    """p = 0.01, 0.04, 0.03, 0.005 (m = 4). Sorted: 0.005 x 4 = 0.02; 0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1 =
    0.04, raised to 0.06 (never below the one before)."""
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5]) == [0.5]
    assert holm([0.4, 0.6]) == pytest.approx([0.8, 0.8])  # 2 x 0.4 = 0.8; 1 x 0.6 is raised to 0.8
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])
    with pytest.raises(ValueError, match="p_values"):
        holm([])
    with pytest.raises(ValueError, match="p_values"):
        holm([0.1, 1.5])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=10))
def test_holm_lies_between_the_raw_p_values_and_bonferroni(p_values):
    adjusted = holm(p_values)
    m = len(p_values)
    for p, q in zip(p_values, adjusted):
        assert p - 1e-12 <= q <= min(1.0, m * p) + 1e-12
    order = sorted(range(m), key=lambda i: p_values[i])
    assert all(adjusted[i] <= adjusted[j] + 1e-12 for i, j in zip(order, order[1:]))  # monotone in p


def test_holm_table_reads_a_ladder():
    steps = {"a": PairedDifference(8, 0.069, 0.064), "b": PairedDifference(8, -0.009, 0.024)}
    text = protocol.holm_table(steps)
    assert text.startswith("2 intervals read together") and "unresolved" in text
    lines = text.splitlines()
    assert "+0.069 [+0.005, +0.133]" in lines[1] and lines[1].endswith("unresolved")  # alone, p 0.038; Holm: x 2


# --- matched learning rates and the protocol's version ----------------------------------------------------------


def test_matched_lr_by_hand():
    """Chapter 11's tuning runs, wrong-completion length at lr 1e-3: GRPO 12.912 and 12.999, the token mean 12.906
    and 12.997: -0.006 and -0.002, mean -0.004. Rates run by one method only are left out."""
    grpo = {1e-3: {0: 12.912, 1: 12.999}, 5e-4: {0: 12.641, 1: 12.882}}
    token_mean = {1e-3: {0: 12.906, 1: 12.997}, 2e-3: {0: 12.872, 1: 12.813}}
    matched = matched_lr(grpo, token_mean)
    assert list(matched) == [1e-3]
    assert matched[1e-3].mean == pytest.approx(-0.004) and matched[1e-3].n == 2
    assert matched_lr(grpo, {1e-3: {0: 1.0}}) == {}  # one shared seed: no interval


def test_results_stored_before_version_2_read_as_version_1():
    assert protocol.protocol_version({"seeds": [1000]}) == 1
    assert protocol.protocol_version({"protocol": 2}) == 2
    assert protocol.PROTOCOL_VERSION == 2


# --- the pick rule that guards against collapse -----------------------------------------------------------------


def test_pick_rule_v2_by_hand():
    steady = [0.95, 0.94, 0.93, 0.96]  # mean 0.945, worst 0.93
    collapse = [0.99, 0.99, 0.99, 0.85]  # mean 0.955, worst 0.85: one seed fell
    assert _protocol.pick_setting({1e-3: steady, 3e-3: collapse}) == 3e-3  # version 1 takes the collapse
    assert _protocol.pick_setting_v2({1e-3: steady, 3e-3: collapse}, floor=0.90) == (1e-3, True)
    assert _protocol.pick_setting_v2({1e-3: steady, 3e-3: collapse}, floor=0.80) == (3e-3, True)  # both clear
    low = {1e-3: [0.5, 0.6, 0.7, 0.8], 2e-3: [0.9, 0.9, 0.9, 0.4]}  # none clears 0.9: the higher worst seed
    assert _protocol.pick_setting_v2(low, floor=0.9) == (1e-3, False)
    tie = {1e-3: [0.9, 0.9, 0.9, 0.9], 2e-3: [0.9, 0.9, 0.9, 0.9]}
    assert _protocol.pick_setting_v2(tie, floor=0.5) == (1e-3, True)  # a full tie: the lower rate
    with pytest.raises(ValueError, match="at least 4 seeds"):
        _protocol.pick_setting_v2({1e-3: [0.9, 0.9]}, floor=0.5)
    with pytest.raises(ValueError, match="scores"):
        _protocol.pick_setting_v2({}, floor=0.5)


_SCORES = st.dictionaries(
    st.sampled_from([5e-4, 1e-3, 2e-3, 3e-3, 4e-3]),
    st.lists(st.floats(0, 1), min_size=4, max_size=6),
    min_size=1,
)


@settings(max_examples=50, deadline=None)
@given(_SCORES, st.floats(0, 1))
def test_the_pick_clears_the_floor_whenever_a_setting_does(scores, floor):
    pick, cleared = _protocol.pick_setting_v2(scores, floor)
    assert cleared == any(min(v) >= floor for v in scores.values())
    if cleared:
        assert min(scores[pick]) >= floor
        mean = sum(scores[pick]) / len(scores[pick])
        assert all(sum(v) / len(v) <= mean + 1e-12 for v in scores.values() if min(v) >= floor)
    else:
        assert min(scores[pick]) == max(min(v) for v in scores.values())


@settings(max_examples=50, deadline=None)
@given(_SCORES)
def test_with_no_floor_version_2_picks_as_version_1(scores):
    assert _protocol.pick_setting_v2(scores, floor=-math.inf) == (_protocol.pick_setting(scores), True)


# --- the edge rule ----------------------------------------------------------------------------------------------


def test_edge_rule_by_hand():
    ladder_grid = (1e-3, 2e-3, 3e-3)  # chapter 08's
    assert _protocol.edge_step(ladder_grid, 1e-3) == pytest.approx(5e-4)  # 1e-3 x (1e-3 / 2e-3)
    assert _protocol.edge_step(ladder_grid, 3e-3) == pytest.approx(4.5e-3)  # 3e-3 x (3e-3 / 2e-3)
    assert _protocol.edge_step(ladder_grid, 2e-3) is None
    drift_grid = (1e-3, 2e-3, 4e-3)  # chapter 11's drift testbed: every variant picked 1e-3
    assert _protocol.edge_step(drift_grid, 1e-3) == pytest.approx(5e-4)
    assert _protocol.edge_step((5e-4, *drift_grid), 5e-4) == pytest.approx(2.5e-4)  # the second extension
    with pytest.raises(ValueError, match="pick"):
        _protocol.edge_step(drift_grid, 3e-3)
    with pytest.raises(ValueError, match="grid"):
        _protocol.edge_step((1e-3,), 1e-3)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(1e-5, 1e-1), min_size=2, max_size=6, unique=True), st.integers(0, 5))
def test_the_edge_step_lies_past_the_edge_at_the_edges_ratio(grid, index):
    grid = sorted(grid)
    assume(grid[1] / grid[0] > 1.001 and grid[-1] / grid[-2] > 1.001)
    pick = grid[index % len(grid)]
    step = _protocol.edge_step(grid, pick)
    if pick == grid[0]:
        assert step < grid[0] and step / grid[0] == pytest.approx(grid[0] / grid[1])
    elif pick == grid[-1]:
        assert step > grid[-1] and step / grid[-1] == pytest.approx(grid[-1] / grid[-2])
    else:
        assert step is None


def test_the_edge_walk_by_hand():
    grid = (1e-3, 2e-3, 3e-3)
    scores = {1e-3: [0.95, 0.93, 0.94, 0.92], 2e-3: [0.93, 0.91, 0.92, 0.90], 3e-3: [0.97, 0.04, 0.96, 0.95]}
    first = _protocol.pick_with_edge_rule(scores, grid, n_seeds=4, floor=0.90)
    assert first.pick is None and first.missing == (5e-4,)  # 1e-3 won at the low edge: one step below it first
    assert _protocol.lr_step(1e-3 * 1e-3 / 2e-3) == 5e-4  # the key a resumed stage finds again, not 0.000500...01
    scores[5e-4] = [0.91, 0.90, 0.92, 0.91]  # lower is worse: the rule runs again and keeps 1e-3, now inside
    second = _protocol.pick_with_edge_rule(scores, grid, n_seeds=4, floor=0.90)
    assert (second.pick, second.cleared, second.at_edge, second.grid) == (1e-3, True, False, (5e-4, *grid))
    assert _protocol.pick_with_edge_rule(scores, grid, n_seeds=5, floor=0.9).missing == grid  # a fifth seed: all


def test_the_edge_walk_stops_after_two_steps_and_says_so():
    def falling(lr):  # lower is always better: the walk would go on for ever
        return [1.0 - lr] * 4

    grid = [1e-3, 2e-3, 4e-3]
    scores = {lr: falling(lr) for lr in grid}
    for _ in range(_protocol.MAX_EDGE_STEPS):
        walk = _protocol.pick_with_edge_rule(scores, grid, n_seeds=4, floor=0.5)
        assert walk.pick is None
        scores.update({lr: falling(lr) for lr in walk.missing})
    walk = _protocol.pick_with_edge_rule(scores, grid, n_seeds=4, floor=0.5)
    assert walk.grid == (2.5e-4, 5e-4, *grid) and walk.pick == 2.5e-4 and walk.at_edge


# --- version 1's ladder, read by version 2's rules (benchmarks/capstone.py --plan) --------------------------------


def test_the_shipped_ladder_read_by_version_2():
    """ladder_08.json (protocol v1, ladder-1): GRPO - PPO's paired sd asks for 23 seeds at ±0.03; read together
    with Holm's correction, none of the six steps is resolved, and rung 4 is level with GRPO."""
    from course_lib.lectures import ladder

    results = ladder.load_ladder()
    assert protocol.protocol_version(results) == 1
    plan = ladder.ladder_plan(results)
    assert "from protocol v1's ladder-1 (8 seeds)" in plan and "GRPO - PPO                     paired sd 0.069" in plan
    assert "needs 23 seeds" in plan and "needs 18 seeds" in plan
    steps = ladder.ladder_steps(results)
    assert len(steps) == 6 and sum(d.excludes_zero() for d in steps.values()) == 1  # the warm-up's, alone
    assert max(holm([d.p_value() for d in steps.values()])) == 1.0
    assert all(q >= 0.05 for q in holm([d.p_value() for d in steps.values()]))
    warm_up = paired_difference(ladder.rung_scores(results, 0), ladder.rung_scores(results, 4))
    assert str(warm_up) == "+0.001±0.058" and not warm_up.excludes_zero()


def test_version_2s_seed_sets_are_new_unspent_and_large_enough():
    """PROTOCOL.md rule 4: version 2's reports use sets no run has used, with at least the seeds rule 6 asks;
    ladder-3 holds GRPO - PPO's 23 (for ±0.03) with one to spare."""
    from course_lib.lectures import ladder

    sets = json.loads(_protocol.SEED_SETS.read_text())["sets"]
    new = ("ladder-3", "critic-1", "family-3", "reasoning-2")
    reported = {"critic-1": "critic", "family-3": "family", "ladder-3": "ladder"}
    benchmarks = {
        "critic": "benchmarks/critic_scratchpad.py",
        "family": "benchmarks/grpo_family.py",
        "ladder": "benchmarks/capstone.py",
    }
    assert all("spent_on" not in sets[name] for name in new if name not in reported)
    # critic-1, family-3 and ladder-3 are spent once, each by its report, on exactly the recipes its tuning froze.
    for name, files in reported.items():
        frozen = json.loads((_protocol.RESULTS / f"{files}_v2_recipes.json").read_text())
        spent = sets[name]["spent_on"]
        assert spent["benchmark"] == benchmarks[files]
        assert spent["recipes"] == {key: entry["hash"] for key, entry in frozen.items()}
    used = {seed for name, entry in sets.items() if name not in new for seed in entry["seeds"]}
    assert not used & {seed for name in new for seed in sets[name]["seeds"]}
    needed = seeds_for_half_width(ladder.paired_sd(ladder.load_ladder(), 6, 0), 0.03).n
    assert len(sets["ladder-3"]["seeds"]) >= needed == 23


def test_runs_without_a_version_are_version_1_and_versions_never_mix():
    assert _protocol.runs_version([]) == 1
    assert _protocol.runs_version([{"seed": 1}, {"seed": 2, "protocol": 1}]) == 1
    assert _protocol.runs_version([{"protocol": 2}]) == 2
    with pytest.raises(SystemExit, match="versions \\[1, 2\\]"):
        _protocol.runs_version([{"seed": 1}, {"protocol": 2}])
    assert _protocol.runs_version(_protocol.load_runs(_protocol.RESULTS / "ladder_report.jsonl")) == 1


# --- rule 10: version 2's runs take the loop in full -------------------------------------------------------------


def test_version_two_runs_the_loop_in_full_and_records_it(monkeypatch, tmp_path):
    """Every stage of a version 2 benchmark, and every run it forks, has TinyLM.fast_paths off, and each run's
    record says which loop made it (a run of version 1 keeps the loop it had)."""
    from types import SimpleNamespace

    from course_lib.tiny_lm import TinyLM

    monkeypatch.setattr(TinyLM, "fast_paths", True)
    seen = []

    def stage(args, files):
        seen.append(TinyLM.fast_paths)
        _protocol.run_jobs(lambda job: {"job": job}, [1, 2], 1, tmp_path / "runs.jsonl")

    _protocol.run_stage(SimpleNamespace(version=2, quick=False, tune=True), {}, stage, None, None)
    assert seen == [False]
    records = _protocol.load_runs(tmp_path / "runs.jsonl")
    assert [r["fast_paths"] for r in records] == [False, False]

    monkeypatch.setattr(TinyLM, "fast_paths", True)
    _protocol.run_stage(SimpleNamespace(version=1, quick=False, tune=True), {}, stage, None, None)
    assert seen == [False, True]
