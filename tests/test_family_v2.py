"""course_lib.lectures.family_v2: chapter 11's second round read by hand-computed cases.

Three seeds and recipes whose differences are chosen so that each paired interval, p-value and Holm adjustment is
known: a constant difference has sd 0, so its interval is one point (p 0), and a difference of +1, -1, 0 has mean 0
(p 1).
"""

import pytest

from course_lib.lectures import family_v2
from course_lib.lectures.family_claims import Claim
from course_lib.lectures.protocol import PairedDifference


def _run(hash_, seed, score, length_wrong=10.0, truncated=0.1):
    final = {"length_wrong": length_wrong, "truncated": truncated}
    return {"recipe_hash": hash_, "seed": seed, "score": score, "final": final, "testbed": "length"}


def _results():
    recipes = {
        "length/GRPO": {"hash": "g", "lr": 5e-4},
        "length/Dr.GRPO": {"hash": "d", "lr": 1e-3},
        "length/Dr.GRPO@matched": {"hash": "dm", "lr": 5e-4},
        "length/DAPO-token-mean": {"hash": "t", "lr": 5e-4},
        "length/DAPO-token-mean@matched": {"hash": "t", "lr": 5e-4},  # tuned at GRPO's rate: one recipe
    }
    runs = []
    for seed in (0, 1, 2):
        runs.append(_run("g", seed, 0.8, length_wrong=12.0))
        runs.append(_run("d", seed, 0.8, length_wrong=10.0))  # 2 tokens shorter on every seed
        runs.append(_run("dm", seed, 0.8, length_wrong=12.0 + (1, -1, 0)[seed]))  # no change on average
        runs.append(_run("t", seed, 0.8, length_wrong=13.0))  # 1 token longer on every seed
    return {"recipes": recipes, "runs": runs, "seeds": [0, 1, 2], "seed_set": "family-3"}


def test_each_claim_is_read_tuned_and_at_grpos_rate_where_that_rate_differs():
    results = _results()
    rows = family_v2.differences(results["runs"], results["recipes"])
    names = [row["name"] for row in rows]
    assert names == [
        "Dr.GRPO - GRPO, final.length_wrong (tuned)",
        "Dr.GRPO - GRPO, final.length_wrong (at GRPO's rate)",
        "DAPO-token-mean - GRPO, final.length_wrong (tuned)",  # its matched recipe is the tuned one: read once
    ]
    tuned, matched, token_mean = (row["difference"] for row in rows)
    assert (tuned.mean, tuned.half_width, tuned.n) == (pytest.approx(-2.0), 0.0, 3)
    assert matched.mean == pytest.approx(0.0)
    assert token_mean.mean == pytest.approx(1.0)


def test_verdicts_follow_holm_and_the_predicted_sign():
    results = _results()
    judged = family_v2.verdicts(family_v2.differences(results["runs"], results["recipes"]))
    # p-values 0, 1, 0: Holm multiplies the smallest two by 3 and 2 (still 0) and keeps 1 at 1
    assert [row["p_holm"] for row in judged] == [0.0, 1.0, 0.0]
    # Dr. GRPO predicts shorter wrong answers (sign -1): -2 resolved is held; 0 is not seen; DAPO's +1 contradicts
    assert [row["verdict"] for row in judged] == ["held", "not seen", "contradicted"]


def test_a_difference_without_a_prediction_is_only_measured():
    share = Claim("Dr.GRPO", "length", "(no claim)", "length", "final.length_wrong", sign=0, baseline="X")
    resolved = family_v2._verdict(share, PairedDifference(n=5, mean=-1.0, half_width=0.5), 0.01, 0.05)
    unresolved = family_v2._verdict(share, PairedDifference(n=5, mean=-1.0, half_width=1.5), 0.30, 0.05)
    assert (resolved, unresolved) == ("resolved", "unresolved")


def test_the_extra_claims_are_the_divisor_and_the_stds_share():
    pairs = [(c.variant, c.baseline, c.sign) for c in family_v2.EXTRA_CLAIMS]
    assert pairs == [("Dr.GRPO-divisor", "GRPO", -1), ("Dr.GRPO", "Dr.GRPO-divisor", 0)]
    assert family_v2.claims(("drift",))[-1].testbed == "drift"  # the length-only extras stay out of drift


def test_a_recipe_run_on_fewer_than_two_seeds_is_left_out_and_said():
    results = _results()
    results["runs"] = [r for r in results["runs"] if r["recipe_hash"] != "d" or r["seed"] == 0]
    rows = family_v2.differences(results["runs"], results["recipes"])
    assert "Dr.GRPO - GRPO, final.length_wrong (tuned)" not in [row["name"] for row in rows]
    assert "length/Dr.GRPO " in family_v2.format_recipes(results)
    assert "not yet run" in family_v2.format_recipes(results)


def test_the_tables_print_what_was_computed():
    results = _results()
    results |= {"tune_seeds": [0, 1], "floors": {"length": 0.75}}
    results["tuning"] = [
        {"testbed": "length", "variant": "GRPO", "lr": lr, "seed": seed, "score": score}
        for lr, scores in ((5e-4, (0.80, 0.78)), (1e-3, (0.90, 0.70)))
        for seed, score in zip((0, 1, 9), scores + (0.1,))  # seed 9 is not a tuning seed: left out
    ]
    tuning = family_v2.format_tuning(results)
    assert "0.0005: 0.790 (0.780) *" in tuning  # the frozen rate, its worst seed above the floor
    assert "0.001: 0.800 (0.700)<" in tuning  # a better mean, but its worst seed is below the floor
    recipes = family_v2.format_recipes(results)
    assert "length/GRPO" in recipes and "0.800 (0.000) 0.800" in recipes
    judged = family_v2.verdicts(family_v2.differences(results["runs"], results["recipes"]))
    table = family_v2.format_verdicts(judged)
    assert table.splitlines()[0].startswith("3 differences read together")
    assert "-2.000 [-2.000, -2.000]  p 0.000  Holm 0.000  held" in table
    assert family_v2.format_verdicts([]) == "no difference has run on two seeds yet"


def test_each_recipes_caveats_are_read_from_its_tuning_runs():
    results = _results()
    results |= {"tune_seeds": [0, 1], "floors": {"length": 0.75}}
    tuning = [
        ("GRPO", 5e-4, (0.80, 0.78)),  # GRPO's frozen 5e-4 is the lowest of its two rates: at the edge
        ("GRPO", 1e-3, (0.90, 0.70)),
        ("Dr.GRPO", 5e-4, (0.50, 0.40)),  # Dr. GRPO's three rates all miss the floor 0.75 on a seed
        ("Dr.GRPO", 1e-3, (0.60, 0.50)),
        ("Dr.GRPO", 2e-3, (0.60, 0.30)),
    ]
    results["tuning"] = [
        {"testbed": "length", "variant": name, "lr": lr, "seed": seed, "score": score}
        for name, lr, scores in tuning
        for seed, score in zip((0, 1), scores)
    ]
    found = family_v2.caveats(results)
    assert found["length/GRPO"] == ["at the grid's edge: the lowest of 2 rates tried"]
    assert found["length/Dr.GRPO"] == ["no rate cleared the floor 0.75: picked by its worst seed"]  # 1e-3: inside
    assert found["length/Dr.GRPO@matched"][0] == "frozen at GRPO's rate, not its own"
    table = family_v2.format_caveats(results)
    assert "length/GRPO " in table and "@matched" not in table
