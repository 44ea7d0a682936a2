"""Chapter 11: each paper's claim, where it was tested, and whether it held, by a rule written before the report.

:data:`CLAIMS` lists one claim per row: the variant, the paper's claim in one line, the testbed where its problem
occurs, and the number that tests it. The rule that turns a measurement into a verdict (:func:`verdict`) was fixed
before any report seed ran:

- a *difference* claim predicts the sign of (variant - baseline): **held here** when the 95% interval of that
  difference lies on the predicted side of 0, **contradicted here** when it lies on the other side, and **not seen
  here** when it contains 0. On a trained testbed the interval is the paired Student-t interval over the report
  seeds (``course_lib.lectures.protocol.paired_difference``); on the estimator testbed the difference of the
  measured (Monte Carlo, +- 1.96 standard errors) or exact (no interval) values at ``G = 8``, the group size of
  every trained testbed;
- an *equivalence* claim (an estimator is unbiased) predicts a value within ``tolerance`` of a target: held when the
  interval lies within it, contradicted when the interval lies wholly outside it, not seen otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from course_lib.lectures.protocol import PairedDifference, paired_difference

ESTIMATOR_G = 8
"""The group size at which the estimator claims are judged (every trained testbed samples G = 8)."""

Z_95 = 1.96
"""The normal quantile of a 95% interval: the Monte Carlo means average 20,000 batches."""


@dataclass(frozen=True)
class Claim:
    """One paper's claim, tested on one testbed by one number."""

    variant: str
    testbed: str
    claim: str
    """The paper's claim, in one line."""
    metric: str
    """What is measured, in words; a difference is always variant minus baseline."""
    key: str
    """Where the number is: a record's ``"score"``, ``"final.<name>"`` or ``"pass_at_k.<k>"``; or the estimator
    table's statistic (``"magnitude"``, ``"tilt"``)."""
    sign: int = 1
    """The predicted sign of variant - baseline (difference claims)."""
    baseline: str = "GRPO"
    target: float | None = None
    """Equivalence claims: the value predicted, within ``tolerance``."""
    tolerance: float = 0.0


CLAIMS: list[Claim] = [
    Claim(
        "RLOO",
        "estimators",
        "the leave-one-out baseline leaves the policy gradient unbiased",
        "E[g] along grad J over |grad J|^2 (1: unbiased; the group mean's is (G-1)/G)",
        "magnitude",
        target=1.0,
        tolerance=0.02,
    ),
    Claim(
        "Dr.GRPO",
        "estimators",
        "dividing by the group's std weighs prompts by difficulty; without it, every prompt weighs the same",
        "difficulty tilt: weight of prompts with p < 0.1 or > 0.9 over those with 0.3 <= p <= 0.7",
        "tilt",
        sign=-1,
    ),
    Claim(
        "REINFORCE++",
        "estimators",
        "one batch-wide scale in place of each group's std removes the per-prompt bias",
        "difficulty tilt (1: every prompt weighs the same)",
        "tilt",
        sign=-1,
    ),
    Claim(
        "Dr.GRPO",
        "length",
        "GRPO's 1/|o| per response lets wrong answers grow long; a constant divisor does not",
        "length of wrong completions, last 5 rounds (tokens)",
        "final.length_wrong",
        sign=-1,
    ),
    Claim(
        "DAPO-token-mean",
        "length",
        "a mean over all tokens weighs long (wrong) samples in full, so they do not grow",
        "length of wrong completions, last 5 rounds (tokens)",
        "final.length_wrong",
        sign=-1,
    ),
    Claim(
        "DAPO-overlong-filter",
        "length",
        "masking truncated samples removes their reward noise and improves accuracy",
        "test accuracy (greedy, at most 14 tokens)",
        "score",
    ),
    Claim(
        "DAPO-soft-overlong",
        "length",
        "a penalty ramp before the limit teaches the model to stop before it is cut off",
        "share of completions cut off, last 5 rounds",
        "final.truncated",
        sign=-1,
    ),
    Claim(
        "DAPO-clip-higher",
        "sparse",
        "a higher upper clip keeps the policy's entropy from collapsing",
        "entropy of the sampled tokens' distributions, last 5 rounds (nats)",
        "final.entropy",
    ),
    Claim(
        "DAPO-dyn-sampling",
        "sparse",
        "training only on groups with mixed rewards learns more from the same samples",
        "test accuracy at the same number of completions sampled",
        "score",
    ),
    Claim(
        "GSPO",
        "drift",
        "one ratio and one clip per sequence keep off-policy updates stable where token ratios do not",
        "test accuracy",
        "score",
    ),
    Claim(
        "GMPO",
        "drift",
        "a geometric mean of token ratios is less swayed by outliers: stabler updates",
        "test accuracy",
        "score",
    ),
    Claim(
        "CISPO",
        "drift",
        "clipping the weight, not the gradient, keeps learning from the tokens a clip silences",
        "test accuracy",
        "score",
    ),
    Claim(
        "SAPO",
        "drift",
        "a smooth gate in place of the hard clip gives stabler, better learning",
        "test accuracy",
        "score",
    ),
]
"""Every claim the chapter tests, in the order of the testbeds."""


# ---------------------------------------------------------------------------
# Measurements and verdicts
# ---------------------------------------------------------------------------

# Every measured effect is a protocol.PairedDifference: a mean with its interval. On a trained testbed it is the
# paired t-interval over the report seeds; on the estimator testbed ``n`` is 0 (an exact value, half-width 0, or a
# Monte Carlo mean +- 1.96 standard errors).


def verdict(claim: Claim, effect: PairedDifference) -> str:
    """``"held"``, ``"not seen"`` or ``"contradicted"``, by the rule of the module docstring."""
    if claim.target is not None:  # equivalence: within tolerance of the target
        low, high = claim.target - claim.tolerance, claim.target + claim.tolerance
        if low <= effect.low and effect.high <= high:
            return "held"
        return "contradicted" if effect.low > high or effect.high < low else "not seen"
    if claim.sign * effect.low > 0 and claim.sign * effect.high > 0:
        return "held"
    if claim.sign * effect.low < 0 and claim.sign * effect.high < 0:
        return "contradicted"
    return "not seen"


def read(record: dict, key: str) -> float:
    """The number ``key`` of a run's record (``"score"``, ``"final.truncated"``, ``"pass_at_k.16"``)."""
    value = record
    for part in key.split("."):
        value = value[part]
    return float(value)


def trained_effect(claim: Claim, runs: list[dict]) -> PairedDifference:
    """Variant minus baseline on the claim's number, paired by seed over ``runs`` (report records of the testbed)."""
    by_variant: dict[str, dict[int, float]] = {}
    for r in runs:
        value = read(r, claim.key)
        if math.isfinite(value):
            by_variant.setdefault(r["variant"], {})[r["seed"]] = value
    return paired_difference(by_variant.get(claim.baseline, {}), by_variant.get(claim.variant, {}))


def estimator_effect(claim: Claim, table: dict) -> PairedDifference:
    """The claim's number on the estimator testbed (:func:`course_lib.lectures.group_estimators.estimator_testbed`) at
    :data:`ESTIMATOR_G`: the exact value where there is one (the per-group estimators), else the Monte Carlo mean
    +- 1.96 standard errors; a difference claim subtracts the baseline's."""
    rows = {row["estimator"]: row for row in table["rows"] if row["G"] == ESTIMATOR_G}

    def value(name: str) -> tuple[float, float]:
        row = rows[name]
        if row["exact"] is not None and claim.target is None:
            return row["exact"][claim.key], 0.0
        return row[claim.key], Z_95 * row[claim.key + "_se"]

    mean, half = value(claim.variant)
    if claim.target is not None:
        return PairedDifference(n=0, mean=mean, half_width=half)
    base, base_half = value(claim.baseline)
    return PairedDifference(n=0, mean=mean - base, half_width=math.hypot(half, base_half))


def judge(table: dict, runs: list[dict]) -> list[dict]:
    """Every claim of :data:`CLAIMS` with its effect and verdict; a claim whose runs are missing is left out."""
    rows = []
    for claim in CLAIMS:
        if claim.testbed == "estimators":
            effect = estimator_effect(claim, table)
        else:
            mine = [r for r in runs if r["testbed"] == claim.testbed]
            seeds = {r["seed"] for r in mine if r["variant"] == claim.variant}
            if len(seeds & {r["seed"] for r in mine if r["variant"] == claim.baseline}) < 2:
                continue
            effect = trained_effect(claim, mine)
        rows.append({"claim": claim, "effect": effect, "verdict": verdict(claim, effect)})
    return rows


def effect_text(claim: Claim, effect: PairedDifference) -> str:
    """``"value [low, high]"`` for an equivalence claim; ``"+difference [low, high]"`` or ``"+difference (exact)"``."""
    e = effect
    if claim.target is not None:
        return f"{e.mean:.3f} [{e.low:.3f}, {e.high:.3f}]"
    if e.n == 0 and e.half_width == 0:
        return f"{e.mean:+.3f} (exact)"
    return f"{e.mean:+.3f} [{e.low:+.3f}, {e.high:+.3f}]"


def format_claims(rows: list[dict]) -> str:
    """The claims table as text: per claim, the variant, its testbed, the measured effect with its 95% interval and
    the verdict; then the paper's claim and what was measured (a difference is variant minus baseline)."""
    lines = [f"{'variant':<21} {'testbed':<11} {'effect [95% interval]':<27} verdict"]
    for row in rows:
        c, e = row["claim"], row["effect"]
        effect = effect_text(c, e)
        against = (
            f"; target {c.target:g} +- {c.tolerance:g}" if c.target is not None else f"; {c.variant} - {c.baseline}"
        )
        where = f" at G = {ESTIMATOR_G}" if c.testbed == "estimators" else f" over {e.n} seeds"
        lines.append(f"{c.variant:<21} {c.testbed:<11} {effect:<27} {row['verdict']} here")
        lines.append(f"    claim: {c.claim}")
        lines.append(f"    measured: {c.metric}{where}{against}")
    return "\n".join(lines)


NOT_MEASURED = "not yet measured: needs `python benchmarks/grpo_family.py` (trained testbeds)"
"""The verdict column of a claim whose testbed has no report runs yet."""


def pending(rows: list[dict]) -> list[Claim]:
    """The claims of :data:`CLAIMS` that :func:`judge` left out (their testbed's report runs are missing)."""
    judged = {id(row["claim"]) for row in rows}
    return [claim for claim in CLAIMS if id(claim) not in judged]


def format_pending(rows: list[dict]) -> str:
    """The claims :func:`judge` left out, each with :data:`NOT_MEASURED` where the verdict would be."""
    lines = []
    for c in pending(rows):
        lines.append(f"{c.variant:<21} {c.testbed:<11} {NOT_MEASURED}")
        lines.append(f"    claim: {c.claim}")
        lines.append(f"    to measure: {c.metric}; {c.variant} - {c.baseline} over the report seeds")
    return "\n".join(lines)
