"""Chapter 11's caveats beside its verdicts (lectures.family_caveats): the same difference at matched learning rates
from the tuning runs, and rates picked at the grid's edge (PROTOCOL.md, version 2, rules 2 and 7)."""

import pytest

from course_lib.lectures import family_caveats, family_claims, family_results
from course_lib.lectures.protocol import PairedDifference


def _claim(variant):
    return next(c for c in family_claims.CLAIMS if c.variant == variant and c.testbed != "estimators")


def test_matched_effects_and_caveats_by_hand():
    """Two tuning seeds at two rates of the length grid (0.0005, 0.001, 0.002); Dr. GRPO frozen at 0.001, GRPO at
    0.0005. At 0.001: (12.3 - 12.9) and (12.6 - 13.0), mean -0.5; at 0.0005: -0.4 and -0.2, mean -0.3."""
    claim = _claim("Dr.GRPO")
    wrong_length = {("GRPO", 0.001): (12.9, 13.0), ("Dr.GRPO", 0.001): (12.3, 12.6)}
    wrong_length |= {("GRPO", 0.0005): (12.6, 12.8), ("Dr.GRPO", 0.0005): (12.2, 12.6)}
    tuning = [
        {"testbed": "length", "variant": v, "lr": lr, "seed": seed, "score": 0.8, "final": {"length_wrong": x}}
        for (v, lr), values in wrong_length.items()
        for seed, x in enumerate(values)
    ]
    matched = family_caveats.matched_effects(claim, tuning)
    assert matched[0.001].mean == pytest.approx(-0.5) and matched[0.0005].mean == pytest.approx(-0.3)
    recipes = {"length/GRPO": {"lr": 0.0005}, "length/Dr.GRPO": {"lr": 0.001}}
    held = PairedDifference(n=8, mean=-0.19, half_width=0.08)
    caveats = family_caveats.claim_caveats(claim, held, recipes, tuning)
    assert "-0.300 at 0.0005, -0.500 at 0.001 (same sign as the tuned effect)" in caveats[0]
    assert caveats[1].startswith("picked at the grid's edge (0.0005, 0.001, 0.002): GRPO 0.0005 (lowest)")
    contradicted = PairedDifference(n=8, mean=+0.1, half_width=0.08)
    assert "not the same sign" in family_caveats.claim_caveats(claim, contradicted, recipes, tuning)[0]
    same_rate = {"length/GRPO": {"lr": 0.001}, "length/Dr.GRPO": {"lr": 0.001}}
    assert family_caveats.claim_caveats(claim, held, same_rate, tuning) == []  # matched already, inside the grid


def test_the_shipped_verdicts_carry_their_caveats():
    """The length testbed froze GRPO at 0.0005 and the token mean at 0.001; at every matched rate of the tuning runs
    the token mean's wrong completions are no longer than GRPO's, so its "contradicted" may be the rate's. Every drift
    variant picked the grid's lowest rate."""
    results = family_results.load_results()
    judged = family_claims.judge(results["estimators"], results["runs"])
    token_mean = family_caveats.matched_effects(_claim("DAPO-token-mean"), results["tuning"])
    assert [round(d.mean, 3) for d in token_mean.values()] == [-0.202, -0.004, -0.099]
    text = family_results.format_claims_kept(judged, results)
    assert "-0.202 at 0.0005, -0.004 at 0.001, -0.099 at 0.002 (not the same sign as the tuned effect)" in text
    assert text.count("caveat: picked at the grid's edge (0.001, 0.002, 0.004): ") == 5  # sparse 1 + drift 4
    assert text.count("SAPO 0.001 (lowest), GRPO 0.001 (lowest)") == 1
    assert "caveat" not in family_results.format_claims_kept(judged)  # without the results: the table as before
    # Holm over the ten trained intervals: only Dr. GRPO's and the soft punishment's verdicts stay resolved
    assert text.count("trained intervals (Holm's correction)") == 5  # GSPO held; four contradicted
    assert "with the other 9 trained intervals (Holm's correction), p 0.127: unresolved" in text  # the token mean
