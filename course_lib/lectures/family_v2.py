"""Chapter 11, second round: the length and drift testbeds under protocol version 2, read the way the benchmark reads
them.

The first round (:mod:`course_lib.lectures.family_results`) froze each variant at its own learning rate, tuned on
two seeds, and four of its drift verdicts sat at the grid's lowest rate. Version 2 (``benchmarks/PROTOCOL.md``)
tunes on four seeds with a floor on the worst one, extends a grid whose pick sits at its edge, and freezes every
length variant twice: at its own tuned rate, and at GRPO's (``"length/NAME@matched"``). The report runs each frozen
recipe on the fresh seed set ``family-3``. So each length claim is read twice on the same seeds: once as tuned, and
once with the learning rate held equal, which tells a method's effect apart from its rate's.

Every difference the report prints is read together with Holm's correction (``protocol.holm``), and a claim's
verdict follows the rule of :mod:`course_lib.lectures.family_claims` with the adjusted p-value in place of the bare
interval: **held here** when the difference is resolved (adjusted p < 0.05) on the predicted side, **contradicted
here** when it is resolved on the other, **not seen here** otherwise.

``benchmarks/grpo_family.py --protocol 2`` prints these tables, and its ``--save`` writes the notebook's
``data/grpo_family_v2_11.json``, which :func:`load_results` reads.
"""

from __future__ import annotations

import json
from pathlib import Path

from course_lib.lectures.family_claims import CLAIMS, Claim, read
from course_lib.lectures.protocol import PairedDifference, holm, paired_difference, summary

DATA = Path(__file__).parent / "data"
SAVE_NAME = "grpo_family_v2_11.json"
TESTBEDS = ("length", "drift")
MATCHED = "@matched"
"""The suffix of a length variant's recipe frozen at GRPO's tuned rate."""
ALPHA = 0.05
"""The family level at which Holm's correction reads the report's differences."""

EXTRA_CLAIMS: list[Claim] = [
    Claim(
        "Dr.GRPO-divisor",
        "length",
        "the constant divisor alone (the group's std kept) keeps wrong answers from growing long",
        "length of wrong completions, last 5 rounds (tokens)",
        "final.length_wrong",
        sign=-1,
    ),
    Claim(
        "Dr.GRPO",
        "length",
        "(no claim: the share of Dr. GRPO's length effect that dropping the group's std adds to the divisor)",
        "length of wrong completions, last 5 rounds (tokens)",
        "final.length_wrong",
        sign=0,
        baseline="Dr.GRPO-divisor",
    ),
]
"""Differences version 2 adds on the length testbed: the divisor alone against GRPO, and the std's share
(sign 0: nothing is predicted, so the difference is only measured)."""


def load_results(path: Path | str | None = None) -> dict:
    """The shipped results of ``benchmarks/grpo_family.py --protocol 2 --save`` (``data/grpo_family_v2_11.json``)."""
    return json.loads(Path(path or DATA / SAVE_NAME).read_text())


def recipe_values(runs: list[dict], recipes: dict, key: str, metric: str) -> dict[int, float]:
    """seed -> ``metric`` of the report runs of recipe ``key`` (``"length/GRPO"``), found by the recipe's hash.

    ``recipes`` maps each key to at least ``{"hash": ...}``. A matched recipe whose rate is the variant's own tuned
    rate has the tuned recipe's hash, so it reads the same runs.
    """
    wanted = recipes[key]["hash"]
    return {r["seed"]: read(r, metric) for r in runs if r["recipe_hash"] == wanted}


def claims(testbeds: tuple[str, ...] = TESTBEDS) -> list[Claim]:
    """The claims version 2 reads: chapter 11's on ``testbeds``, then :data:`EXTRA_CLAIMS`."""
    chosen = [claim for claim in CLAIMS if claim.testbed in testbeds]
    return chosen + [claim for claim in EXTRA_CLAIMS if claim.testbed in testbeds]


def differences(runs: list[dict], recipes: dict, testbeds: tuple[str, ...] = TESTBEDS) -> list[dict]:
    """Every difference the report reads: per claim, variant minus baseline at the tuned rates and, where the
    variant's matched recipe has a rate of its own, at GRPO's rate.

    Each row: ``claim``, ``rate`` (``"tuned"`` or ``"at GRPO's rate"``), ``name`` (as the benchmark prints it) and
    ``difference`` (a ``protocol.PairedDifference`` over the seeds both recipes ran) and ``per_seed`` (seed ->
    variant minus baseline, the differences the interval is taken over).
    """
    rows = []
    for claim in claims(testbeds):
        variant_key = f"{claim.testbed}/{claim.variant}"
        baseline_key = f"{claim.testbed}/{claim.baseline}"
        if variant_key not in recipes or baseline_key not in recipes:
            continue
        baseline = recipe_values(runs, recipes, baseline_key, claim.key)
        readings = [("tuned", variant_key)]
        matched_key = variant_key + MATCHED
        if matched_key in recipes and recipes[matched_key]["hash"] != recipes[variant_key]["hash"]:
            readings.append(("at GRPO's rate", matched_key))
        for rate, key in readings:
            variant = recipe_values(runs, recipes, key, claim.key)
            seeds = sorted(set(baseline) & set(variant))
            if len(seeds) < 2:
                continue  # not yet run on two seeds: nothing to read
            rows.append(
                {
                    "claim": claim,
                    "rate": rate,
                    "name": f"{claim.variant} - {claim.baseline}, {claim.key} ({rate})",
                    "difference": paired_difference(baseline, variant),
                    "per_seed": {seed: variant[seed] - baseline[seed] for seed in seeds},
                }
            )
    return rows


def verdicts(rows: list[dict], alpha: float = ALPHA) -> list[dict]:
    """``rows`` (:func:`differences`) with Holm's adjusted p-value and the verdict added, all read together."""
    if not rows:
        return []
    adjusted = holm([row["difference"].p_value() for row in rows])
    judged = []
    for row, p_holm in zip(rows, adjusted):
        judged.append({**row, "p_holm": p_holm, "verdict": _verdict(row["claim"], row["difference"], p_holm, alpha)})
    return judged


def _verdict(claim: Claim, difference: PairedDifference, p_holm: float, alpha: float) -> str:
    resolved = p_holm < alpha
    if claim.sign == 0:  # nothing predicted: the difference is only measured
        return "resolved" if resolved else "unresolved"
    if not resolved:
        return "not seen"
    return "held" if claim.sign * difference.mean > 0 else "contradicted"


# ---------------------------------------------------------------------------
# The tables, as the benchmark prints them and notebook 11 shows them
# ---------------------------------------------------------------------------


def format_tuning(results: dict) -> str:
    """Validation accuracy at the end of each tuning run: per (testbed, variant) and rate, the mean over the tuning
    seeds and the worst seed in brackets; ``*`` marks the frozen rate, ``<`` a floor the worst seed missed."""
    scores: dict = {}
    for r in results["tuning"]:
        if r["seed"] in results["tune_seeds"]:
            scores.setdefault((r["testbed"], r["variant"]), {}).setdefault(r["lr"], []).append(r["score"])
    lines = [
        f"validation accuracy, tuning seeds {results['tune_seeds']}: mean (worst seed); * the frozen rate, "
        f"< the worst seed below the testbed's floor ({_floors(results)})"
    ]
    for (bed, name), by_lr in scores.items():
        picked = results["recipes"].get(f"{bed}/{name}", {}).get("lr")
        cells = []
        for lr in sorted(by_lr):
            s = summary(by_lr[lr])
            mark = "*" if lr == picked else " "
            low = "<" if s.worst < results["floors"][bed] else " "
            cells.append(f"{lr:g}: {s.mean:.3f} ({s.worst:.3f}){low}{mark}")
        lines.append(f"  {bed:<7} {name:<21} " + "  ".join(f"{cell:<24}" for cell in cells).rstrip())
    return "\n".join(lines)


def _floors(results: dict) -> str:
    return ", ".join(f"{bed} {floor:g}" for bed, floor in results["floors"].items())


def format_recipes(results: dict) -> str:
    """Each frozen recipe's test accuracy (greedy) over the report seeds: mean (std), worst seed, rate and hash."""
    runs = results["runs"]
    lines = [f"test accuracy (greedy), {len(results['seeds'])} seeds of {results['seed_set']}: mean (std), worst"]
    for key, entry in results["recipes"].items():
        scores = list(recipe_values(runs, results["recipes"], key, "score").values())
        if len(scores) < 2:
            lines.append(f"  {key:<36} lr {entry['lr']:<9g} [{entry['hash']}] not yet run")
            continue
        s = summary(scores)
        lines.append(f"  {key:<36} lr {entry['lr']:<9g} [{entry['hash']}] {s.mean:.3f} ({s.std:.3f}) {s.worst:.3f}")
    return "\n".join(lines)


def caveats(results: dict) -> dict[str, list[str]]:
    """Each frozen recipe's caveats, read from its tuning runs: a rate at the edge of the rates tried (after the
    edge rule's extensions), and a grid where no rate's worst tuning seed cleared the testbed's floor."""
    tried: dict = {}
    for r in results["tuning"]:
        if r["seed"] in results["tune_seeds"]:
            tried.setdefault((r["testbed"], r["variant"]), {}).setdefault(r["lr"], []).append(r["score"])
    found = {}
    for key, entry in results["recipes"].items():
        bed, name = key.removesuffix(MATCHED).split("/")
        by_lr = tried.get((bed, name), {})
        notes = []
        if key.endswith(MATCHED):
            notes.append("frozen at GRPO's rate, not its own")
        elif by_lr and entry["lr"] in (min(by_lr), max(by_lr)):
            side = "lowest" if entry["lr"] == min(by_lr) else "highest"
            notes.append(f"at the grid's edge: the {side} of {len(by_lr)} rates tried")
        if by_lr and all(min(scores) < results["floors"][bed] for scores in by_lr.values()):
            notes.append(f"no rate cleared the floor {results['floors'][bed]:g}: picked by its worst seed")
        found[key] = notes
    return found


def format_caveats(results: dict) -> str:
    """The caveats of :func:`caveats`, one line per recipe that has any."""
    lines = ["each recipe's caveats (from its tuning runs):"]
    for key, notes in caveats(results).items():
        if notes and not key.endswith(MATCHED):
            lines.append(f"  {key:<28} " + "; ".join(notes))
    return "\n".join(lines)


def format_verdicts(judged: list[dict], alpha: float = ALPHA) -> str:
    """The differences read together: each with its interval, its own and Holm's p-value, and the verdict."""
    if not judged:
        return "no difference has run on two seeds yet"
    width = max(len(row["name"]) for row in judged)
    lines = [f"{len(judged)} differences read together; Holm's correction at family level {alpha:g}:"]
    for row in judged:
        d = row["difference"]
        interval = f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"
        lines.append(f"  {row['name']:<{width}}  {interval}  p {d.p_value():.3f}  Holm {row['p_holm']:.3f}  "
                     f"{row['verdict']}")  # fmt: skip
    return "\n".join(lines)
