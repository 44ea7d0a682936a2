"""Chapter 11's claims and the rule that gives each its verdict (lectures.family_claims)."""

import json
from pathlib import Path

import pytest

from course_lib.lectures import family, family_claims, family_results
from course_lib.lectures.family_claims import Claim, verdict
from course_lib.lectures.protocol import PairedDifference


def test_every_claim_names_a_variant_its_testbed_measures():
    for c in family_claims.CLAIMS:
        bed = family.TESTBEDS[c.testbed]
        assert c.variant in bed.variants and c.baseline in bed.variants, c
        assert c.sign in (1, -1) and c.claim and c.metric
    assert len(family_claims.CLAIMS) >= 10
    assert {c.variant for c in family_claims.CLAIMS} >= {"RLOO", "Dr.GRPO", "REINFORCE++", "GSPO", "GMPO", "CISPO"}


@pytest.mark.parametrize(
    "sign, mean, half, expected",
    [
        (1, 0.10, 0.05, "held"),
        (1, -0.10, 0.05, "contradicted"),
        (1, 0.03, 0.05, "not seen"),
        (-1, -0.10, 0.05, "held"),
        (-1, 0.10, 0.05, "contradicted"),
        (-1, 0.0, 0.0, "not seen"),  # an exact zero: no effect either way
        (1, 0.3, 0.0, "held"),  # an exact value
    ],
)
def test_difference_rule(sign, mean, half, expected):
    claim = Claim("X", "drift", "c", "m", "score", sign=sign)
    assert verdict(claim, PairedDifference(n=8, mean=mean, half_width=half)) == expected


@pytest.mark.parametrize(
    "mean, half, expected",
    [
        (1.005, 0.01, "held"),
        (1.0, 0.03, "not seen"),
        (0.875, 0.004, "contradicted"),
        (1.03, 0.02, "not seen"),
        (1.05, 0.02, "contradicted"),
    ],
)
def test_equivalence_rule(mean, half, expected):
    claim = Claim("RLOO", "estimators", "c", "m", "magnitude", target=1.0, tolerance=0.02)
    assert verdict(claim, PairedDifference(n=0, mean=mean, half_width=half)) == expected


def test_read_and_the_paired_effect_by_hand():
    record = {"score": 0.5, "final": {"truncated": 0.1}, "pass_at_k": {"16": 0.9}}
    assert family_claims.read(record, "final.truncated") == 0.1 and family_claims.read(record, "pass_at_k.16") == 0.9
    runs = [
        {"testbed": "drift", "variant": v, "seed": s, "score": score}
        for v, scores in (("GRPO", (0.5, 0.6, 0.7)), ("GSPO", (0.6, 0.8, 0.8)))
        for s, score in zip((10, 11, 12), scores)
    ]
    claim = next(c for c in family_claims.CLAIMS if c.variant == "GSPO")
    effect = family_claims.trained_effect(claim, runs)
    # differences 0.1, 0.2, 0.1: mean 0.1333, sd 0.0577, t(0.975, 2) = 4.303: half-width 0.1434
    assert effect.mean == pytest.approx(0.13333, abs=1e-4) and effect.half_width == pytest.approx(0.1434, abs=1e-3)
    assert effect.n == 3 and verdict(claim, effect) == "not seen"


def _table():
    def row(name, tilt, tilt_se, magnitude, magnitude_se, exact):
        return {
            "estimator": name,
            "G": 8,
            "tilt": tilt,
            "tilt_se": tilt_se,
            "magnitude": magnitude,
            "magnitude_se": magnitude_se,
            "exact": exact,
        }

    return {
        "rows": [
            row("GRPO", 1.31, 0.01, 1.87, 0.003, {"tilt": 1.30, "magnitude": 1.867}),
            row("Dr.GRPO", 1.0, 0.01, 0.875, 0.002, {"tilt": 1.0, "magnitude": 0.875}),
            row("RLOO", 1.0, 0.01, 1.003, 0.002, {"tilt": 1.0, "magnitude": 1.0}),
            row("REINFORCE++", 1.03, 0.01, 2.69, 0.004, None),
            row("REINFORCE", 1.0, 0.01, 1.0, 0.002, {"tilt": 1.0, "magnitude": 1.0}),
        ]
    }


def test_estimator_effects_use_exact_values_where_there_are_some():
    table = _table()
    rloo, drgrpo, rpp = (c for c in family_claims.CLAIMS if c.testbed == "estimators")
    e = family_claims.estimator_effect(rloo, table)  # equivalence: the measured value, +- 1.96 SE
    assert e.mean == 1.003 and e.half_width == pytest.approx(1.96 * 0.002) and verdict(rloo, e) == "held"
    e = family_claims.estimator_effect(drgrpo, table)  # both exact
    assert e.mean == pytest.approx(-0.30) and e.half_width == 0 and verdict(drgrpo, e) == "held"
    e = family_claims.estimator_effect(rpp, table)  # measured minus exact
    assert e.mean == pytest.approx(1.03 - 1.30) and e.half_width == pytest.approx(1.96 * 0.01)


def test_judge_leaves_out_claims_without_runs_and_formats_the_rest():
    rows = family_claims.judge(_table(), runs=[])
    assert [r["claim"].testbed for r in rows] == ["estimators"] * 3
    text = family_claims.format_claims(rows)
    assert "held here" in text and "(exact)" in text and "target 1 +- 0.02" in text and "at G = 8" in text
    pending = family_claims.pending(rows)
    assert len(pending) == len(family_claims.CLAIMS) - 3 and all(c.testbed != "estimators" for c in pending)
    text = family_claims.format_pending(rows)
    assert text.count(family_claims.NOT_MEASURED) == len(pending)


def test_the_shipped_reports_are_the_frozen_recipes_on_their_seed_sets():
    """grpo_family_11.json (family-1: length, sparse, drift) and grpo_family_accuracy_11.json (family-2): every
    run was made with its variant's frozen recipe, on every report seed of its set, and each set is spent on
    exactly those recipes (benchmarks/seed_sets.json)."""
    benchmarks = Path(__file__).resolve().parent.parent / "benchmarks"
    ledger = json.loads((benchmarks / "seed_sets.json").read_text())["sets"]
    shipped = [
        (family_results.load_results(), "family_recipes.json"),
        (family_results.load_accuracy_results(), "family_accuracy_recipes.json"),
    ]
    for results, recipes_file in shipped:
        frozen = json.loads((benchmarks / "results" / recipes_file).read_text())
        hashes = {key: entry["hash"] for key, entry in frozen.items()}
        assert {key: entry["hash"] for key, entry in results["recipes"].items()} == hashes
        assert ledger[results["seed_set"]]["spent_on"]["recipes"] == hashes
        assert results["seeds"] == ledger[results["seed_set"]]["seeds"]
        for key, h in hashes.items():
            testbed, variant = key.split("/")
            runs = [r for r in results["runs"] if r["testbed"] == testbed and r["variant"] == variant]
            assert {r["recipe_hash"] for r in runs} == {h}, key
            assert sorted(r["seed"] for r in runs) == results["seeds"], key
