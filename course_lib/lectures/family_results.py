"""Chapter 11's results as tables: each trained testbed's, with paired t-intervals, and where the CPU time went.

``benchmarks/grpo_family.py`` prints these tables and saves what they read (``data/grpo_family_11.json``);
``notebooks/11_grpo_family.ipynb`` loads the file (:func:`load_results`) and prints the same tables.

A record is one report run (:func:`course_lib.lectures.family_testbeds.record` plus ``testbed``, ``variant``,
``seed``, ``lr``, ``recipe_hash`` and ``cpu_seconds``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from course_lib.lectures.family import TESTBEDS, TRAINED
from course_lib.lectures.family_claims import read
from course_lib.lectures.protocol import paired_difference, summary

DATA = Path(__file__).resolve().parent / "data" / "grpo_family_11.json"

COLUMNS = {
    "length": [("accuracy", "score"), ("wrong len", "final.length_wrong"), ("right len", "final.length_right"),
               ("cut off", "final.truncated"), ("scratchpad", "final.scratchpad_share")],
    "sparse": [("accuracy", "score"), ("entropy", "final.entropy"), ("zero-std", "final.frac_zero_std"),
               ("pass@16", "pass_at_k.16"), ("rounds", "rounds")],
    "drift": [("accuracy", "score"), ("clip frac", "final.clip_fraction"), ("silenced", "final.silenced"),
              ("silenced low-p", "final.silenced_low_prob"), ("below start", "below_start")],
    "accuracy": [("accuracy", "score"), ("KL", "final.kl"), ("rounds", "rounds"), ("to 0.8", "to_threshold")],
}  # fmt: skip
"""Each testbed's columns: a label and where the number is in a record (``final.*``: the last 5 rounds' mean)."""

THRESHOLD = 0.8
"""The accuracy table's threshold: completions until the test accuracy first reached it."""


def load_results(path: Path | str | None = None) -> dict:
    """The shipped results of ``benchmarks/grpo_family.py --save`` (``data/grpo_family_11.json`` by default)."""
    return json.loads(Path(path or DATA).read_text())


def completions_to(record: dict, threshold: float = THRESHOLD) -> float:
    """The completions sampled when the run's evaluation first reached ``threshold`` (inf if it never did)."""
    for completions, score in zip(record["eval"]["completions"], record["eval"]["score"]):
        if score >= threshold:
            return float(completions)
    return math.inf


def value(record: dict, key: str) -> float:
    """A column's number: :func:`read`, or ``"below_start"`` (1 when the run ended below its warm-up) or
    ``"to_threshold"`` (:func:`completions_to`)."""
    if key == "below_start":
        return float(record["score"] < record["start"])
    if key == "to_threshold":
        return completions_to(record)
    return read(record, key)


def _cell(values: list[float], key: str) -> str:
    if key == "to_threshold":  # the median over seeds ("never" when half or more never got there)
        ordered = sorted(values)
        middle = ordered[(len(ordered) - 1) // 2]
        return "never" if math.isinf(middle) else f"{middle / 1e3:.1f}k"
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return "-"
    s = summary(finite)
    if key == "score":
        return f"{s.mean:.3f} ({s.std:.3f}) [{s.worst:.2f}]"
    return f"{s.mean:.3f} ({s.std:.3f})"


def testbed_rows(bed: str, runs: list[dict]) -> dict[str, dict]:
    """Per variant of ``bed`` (in the testbed's order): its records by seed and, but for the baseline, the paired
    difference of its test accuracy to the baseline's (``protocol.paired_difference``; None below 2 seeds)."""
    mine = [r for r in runs if r["testbed"] == bed]
    spec = TESTBEDS[bed]
    base = {r["seed"]: r["score"] for r in mine if r["variant"] == spec.baseline}
    rows = {}
    for name in spec.variants:
        records = sorted((r for r in mine if r["variant"] == name), key=lambda r: r["seed"])
        if not records:
            continue
        scores = {r["seed"]: r["score"] for r in records}
        paired = name != spec.baseline and len(set(base) & set(scores)) >= 2
        rows[name] = {"records": records, "difference": paired_difference(base, scores) if paired else None}
    return rows


def format_testbed(bed: str, runs: list[dict], recipes: dict) -> str:
    """One testbed: per variant, each column's mean (std over seeds; for the accuracy, the worst seed in brackets),
    the accuracy's paired difference to the baseline with its 95% t-interval, the learning rate and recipe hash.

    Args:
        recipes: ``"testbed/variant" -> {"lr", "hash"}`` (the frozen recipes).
    """
    spec, rows = TESTBEDS[bed], testbed_rows(bed, runs)
    seeds = sorted({r["seed"] for row in rows.values() for r in row["records"]})
    lines = [f"{bed}: {spec.task}; seeds {seeds[0]}-{seeds[-1]}; mean (std), accuracy's worst seed in brackets"]
    head = f"  {'variant':<21} {'lr':<7} {'recipe':<9}" + "".join(f" {label:>19}" for label, _ in COLUMNS[bed])
    lines.append(head + f" {'accuracy - ' + spec.baseline:>25}")
    for name, row in rows.items():
        recipe = recipes[f"{bed}/{name}"]
        cells = "".join(f" {_cell([value(r, key) for r in row['records']], key):>19}" for _, key in COLUMNS[bed])
        d = row["difference"]
        diff = "" if d is None else f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"
        lines.append(f"  {name:<21} {recipe['lr']:<7g} {recipe['hash']:<9}{cells} {diff:>25}")
    return "\n".join(lines)


def resolved(rows: dict[str, dict]) -> str:
    """Which accuracy differences to the baseline are resolved (their interval excludes 0), in words."""
    above = [n for n, r in rows.items() if r["difference"] is not None and r["difference"].low > 0]
    below = [n for n, r in rows.items() if r["difference"] is not None and r["difference"].high < 0]
    rest = [n for n, r in rows.items() if r["difference"] is not None and n not in above + below]
    return f"above: {', '.join(above) or 'none'}; below: {', '.join(below) or 'none'}; unresolved: {', '.join(rest)}"


def cpu_seconds(runs: list[dict], estimator_cpu: float = 0.0) -> dict[str, dict]:
    """Per trained testbed: runs, CPU seconds in all and per run (each run's own process, its warm-up not counted
    where a cache held it); ``"estimators"``: the estimator testbed's; ``"all"``: the sum."""
    out = {"estimators": {"runs": 0, "cpu": estimator_cpu, "per_run": 0.0}}
    for bed in TRAINED:
        cpu = [r["cpu_seconds"] for r in runs if r["testbed"] == bed]
        if cpu:
            out[bed] = {"runs": len(cpu), "cpu": sum(cpu), "per_run": sum(cpu) / len(cpu)}
    out["all"] = {"runs": sum(v["runs"] for v in out.values()), "cpu": sum(v["cpu"] for v in out.values())}
    return out
