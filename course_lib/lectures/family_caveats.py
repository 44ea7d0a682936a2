"""Chapter 11: what each verdict cannot tell apart, read from the runs already made (protocol v2, rules 2 and 7).

A verdict compares each variant at the learning rate its own tuning picked. Two things can hide behind it:

- **the rate, not the method.** When the variant and its baseline were frozen at different rates, the difference
  mixes the method's effect with its rate's. The tuning runs hold both at every rate of the grid, on the same
  tuning seeds, so the same difference can be read at a *matched* rate (:func:`matched_effects`,
  ``protocol.matched_lr``). These are readings of tuning runs (validation prompts, two seeds each under protocol
  v1), not verdicts: they say whether a verdict might be the rate's, not what the method does;
- **the grid's edge.** A rate picked at the edge of the grid says that the best rate may lie past it, where no run
  went (version 2's edge rule extends the grid before freezing; version 1 did not).

:func:`claim_caveats` states both for each claim, and ``family_results.format_claims_kept`` prints them under the
verdicts.
"""

from __future__ import annotations

from course_lib.lectures.family import TESTBEDS
from course_lib.lectures.family_claims import Claim, read
from course_lib.lectures.protocol import PairedDifference, matched_lr


def _by_lr(tuning: list[dict], claim: Claim, variant: str) -> dict[float, dict[int, float]]:
    """lr -> tuning seed -> the claim's number, for one variant of the claim's testbed."""
    values: dict[float, dict[int, float]] = {}
    for record in tuning:
        if record["testbed"] == claim.testbed and record["variant"] == variant:
            values.setdefault(record["lr"], {})[record["seed"]] = read(record, claim.key)
    return values


def matched_effects(claim: Claim, tuning: list[dict]) -> dict[float, PairedDifference]:
    """Variant minus baseline on the claim's number at each rate of the grid, paired by tuning seed.

    ``tuning`` is the shipped tuning records (``grpo_family_11.json``'s ``"tuning"``); a record holds the claim's
    ``final.*`` number where the benchmark kept it."""
    return matched_lr(_by_lr(tuning, claim, claim.baseline), _by_lr(tuning, claim, claim.variant))


def _edge(testbed: str, lr: float) -> str | None:
    grid = sorted(TESTBEDS[testbed].lr_grid)
    if lr == grid[0]:
        return "lowest"
    if lr == grid[-1]:
        return "highest"
    return None


def claim_caveats(claim: Claim, effect: PairedDifference, recipes: dict, tuning: list[dict]) -> list[str]:
    """What the claim's verdict cannot tell apart: different tuned rates (with the matched-rate readings, and
    whether they agree in sign with the tuned effect) and rates picked at the grid's edge. ``recipes`` maps
    ``"testbed/variant"`` to ``{"lr", ...}``, as the shipped results hold them."""
    if claim.testbed not in recipes_testbeds(recipes):
        return []
    lr_variant = recipes[f"{claim.testbed}/{claim.variant}"]["lr"]
    lr_baseline = recipes[f"{claim.testbed}/{claim.baseline}"]["lr"]
    caveats = []
    if lr_variant != lr_baseline:
        matched = matched_effects(claim, tuning)
        readings = ", ".join(f"{d.mean:+.3f} at {lr:g}" for lr, d in matched.items())
        agree = all(d.mean * effect.mean > 0 for d in matched.values())
        sign = (
            f" ({'same sign' if agree else 'not the same sign'} as the tuned effect)" if effect.excludes_zero() else ""
        )
        caveats.append(
            f"tuned at different rates ({claim.variant} {lr_variant:g}, {claim.baseline} {lr_baseline:g}); at matched "
            f"rates, tuning runs: {readings}{sign}"
        )
    edges = [(name, lr) for name, lr in ((claim.variant, lr_variant), (claim.baseline, lr_baseline))]
    at_edge = [f"{name} {lr:g} ({_edge(claim.testbed, lr)})" for name, lr in edges if _edge(claim.testbed, lr)]
    if at_edge:
        grid = ", ".join(f"{lr:g}" for lr in TESTBEDS[claim.testbed].lr_grid)
        caveats.append(f"picked at the grid's edge ({grid}): {', '.join(at_edge)}; no rate past it was tried")
    return caveats


def recipes_testbeds(recipes: dict) -> set[str]:
    """The testbeds that have frozen recipes in ``recipes`` (``"testbed/variant"`` keys)."""
    return {key.split("/")[0] for key in recipes}


def format_matched(claims: list[Claim], judged: list[dict], recipes: dict, tuning: list[dict]) -> str:
    """For each claim: the tuned effect with both rates, then the same difference at each matched rate, every
    tuning seed's value in brackets (two seeds give no interval worth the name: t for 1 degree of freedom is 12.7)."""
    effects = {id(row["claim"]): row for row in judged}
    lines = [
        "tuned effect (report seeds, test prompts) | the same difference at matched rates (tuning runs, validation)"
    ]
    for claim in claims:
        row = effects[id(claim)]
        lr_variant = recipes[f"{claim.testbed}/{claim.variant}"]["lr"]
        lr_baseline = recipes[f"{claim.testbed}/{claim.baseline}"]["lr"]
        lines.append(
            f"  {claim.variant} - {claim.baseline}, {claim.key}: tuned {row['effect'].mean:+.3f} "
            f"({claim.variant} at {lr_variant:g}, {claim.baseline} at {lr_baseline:g}): {row['verdict']} here"
        )
        baseline, variant = _by_lr(tuning, claim, claim.baseline), _by_lr(tuning, claim, claim.variant)
        for lr, d in matched_effects(claim, tuning).items():
            seeds = sorted(set(baseline[lr]) & set(variant[lr]))
            per_seed = ", ".join(f"{variant[lr][s] - baseline[lr][s]:+.3f}" for s in seeds)
            lines.append(f"      at lr {lr:<6g} {d.mean:+.3f}  (seeds {seeds}: {per_seed})")
    return "\n".join(lines)
