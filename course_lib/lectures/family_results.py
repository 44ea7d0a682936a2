"""Chapter 11's results as tables: each trained testbed's, with paired t-intervals, and where the CPU time went;
the estimator testbed's (:func:`format_estimator_table`, :func:`format_prompt_weights`); and the claims table a
learner keeps (:func:`format_claims_kept`).

``benchmarks/grpo_family.py`` prints these tables and saves what they read (``data/grpo_family_11.json``, and
``data/grpo_family_estimators_11.json`` for the estimator testbed alone); ``notebooks/11_grpo_family.ipynb`` loads
the files (:func:`load_results`, :func:`load_estimator_results`) and prints the same tables.

A record is one report run (:func:`course_lib.lectures.family_testbeds.record` plus ``testbed``, ``variant``,
``seed``, ``lr``, ``recipe_hash`` and ``cpu_seconds``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from course_lib.lectures.family import TESTBEDS, TRAINED, VARIANTS
from course_lib.lectures.family_caveats import claim_caveats
from course_lib.lectures.family_claims import CLAIMS, NOT_MEASURED, effect_text, read
from course_lib.lectures.protocol import holm, paired_difference, summary

DATA = Path(__file__).resolve().parent / "data" / "grpo_family_11.json"
ESTIMATOR_DATA = Path(__file__).resolve().parent / "data" / "grpo_family_estimators_11.json"
ACCURACY_DATA = Path(__file__).resolve().parent / "data" / "grpo_family_accuracy_11.json"
"""``benchmarks/grpo_family.py --testbeds estimators --save``: the estimator testbed and the claims it settles."""

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


def load_accuracy_results(path: Path | str | None = None) -> dict:
    """The shipped accuracy testbed, reported apart on seed set family-2 (``data/grpo_family_accuracy_11.json``)."""
    return json.loads(Path(path or ACCURACY_DATA).read_text())


def load_estimator_results(path: Path | str | None = None) -> dict:
    """The shipped estimator testbed (``data/grpo_family_estimators_11.json`` by default)."""
    return json.loads(Path(path or ESTIMATOR_DATA).read_text())


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


def format_claims_kept(judged: list[dict], results: dict | None = None) -> str:
    """The table a learner keeps: every claim of ``family_claims.CLAIMS`` in order, with its paper, its testbed and
    its verdict, the measured effect beside it (``family_claims.judge``'s rows), or ``NOT_MEASURED`` where its
    testbed has no report runs yet. With ``results`` (the shipped report: its recipes and tuning runs), each
    verdict's caveats under it (``family_caveats.claim_caveats``: different tuned rates, a rate at the grid's edge),
    and, for a verdict that is not "not seen", whether it survives Holm's correction over the trained intervals
    read together (PROTOCOL.md, version 2, rule 8)."""
    by_claim = {id(row["claim"]): row for row in judged}
    trained = [row for row in judged if row["effect"].n > 0]  # the paired intervals the table reads together
    adjusted = dict(zip((id(row["claim"]) for row in trained), holm([row["effect"].p_value() for row in trained])))
    lines = [f"{'variant':<21} {'testbed':<11} verdict (effect [95% interval]; see the claims' table for the measure)"]
    for claim in CLAIMS:
        row = by_claim.get(id(claim))
        verdict = NOT_MEASURED if row is None else f"{row['verdict']} here: {effect_text(claim, row['effect'])}"
        lines.append(f"{claim.variant:<21} {claim.testbed:<11} {verdict}")
        lines.append(f"    {VARIANTS[claim.variant]['paper']}: {claim.claim}")
        if row is not None and results is not None:
            for caveat in claim_caveats(claim, row["effect"], results["recipes"], results["tuning"]):
                lines.append(f"    caveat: {caveat}")
            p_holm = adjusted.get(id(claim), 0.0)
            if row["verdict"] != "not seen" and p_holm >= 0.05:
                lines.append(
                    f"    caveat: read with the other {len(trained) - 1} trained intervals (Holm's correction), "
                    f"p {p_holm:.3f}: unresolved"
                )
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# The estimator testbed's tables (course_lib.lectures.group_estimators.estimator_testbed's result)
# ---------------------------------------------------------------------------


def _estimator_cell(row: dict, key: str, digits: int) -> str:
    """``"value+-se [exact]"`` for one statistic of one row (the exact value only where there is one)."""
    text = f"{row[key]:.{digits}f}+-{row[key + '_se']:.{digits}f}"
    if row["exact"] is not None and key in row["exact"]:
        text += f" [{row['exact'][key]:.{digits}f}]"
    return text


def format_estimator_table(result: dict) -> str:
    """The testbed as text: bias (cosine, magnitude along the exact gradient), variance (relative to the exact
    gradient's squared length, and as a scale-free SNR) and the difficulty tilt."""
    probs = result["success_probs"]
    lines = [
        f"bias and variance against the exact gradient: {len(probs)} prompts (p = {probs[0]:.2f} to "
        f"{probs[-1]:.2f}), {result['batch_prompts']} a batch, {result['num_batches']:,} batches a row; "
        "measured +- one standard error [exact]",
        f"  {'G':>2}  {'estimator':<12} {'cosine with grad J':<26} {'magnitude along grad J':<24} "
        f"{'tr Cov / |grad J|^2':<20} {'SNR |Eg|^2/tr Cov':<18} {'difficulty tilt':<22}",
    ]
    for row in result["rows"]:
        lines.append(
            f"  {row['G']:>2}  {row['estimator']:<12} {_estimator_cell(row, 'cosine', 4):<26} "
            f"{_estimator_cell(row, 'magnitude', 3):<24} {_estimator_cell(row, 'rel_variance', 2):<20} "
            f"{_estimator_cell(row, 'snr', 3):<18} {_estimator_cell(row, 'tilt', 3):<22}"
        )
    return "\n".join(lines)


def format_prompt_weights(result: dict, group_size: int = 8) -> str:
    """Each estimator's weight per prompt at ``group_size``: the exact value where there is one, else the measured
    one +- one standard error; one line per prompt, from the hardest to the easiest."""
    rows = [row for row in result["rows"] if row["G"] == group_size]
    if not rows:
        raise ValueError(f"group_size: the table has no row at G={group_size}")
    lines = [
        f"weight per prompt at G = {group_size}: E[estimate] along the prompt's exact gradient over its squared "
        "length (exact; REINFORCE++ measured +- one standard error)",
        f"  {'p':>5}  " + "".join(f"{row['estimator']:>16}" for row in rows),
    ]
    for s, p in enumerate(result["success_probs"]):
        cells = []
        for row in rows:
            if row["exact"] is not None:
                cells.append(f"{row['exact']['weights'][s]:>16.3f}")
            else:
                cells.append(f"{row['weights'][s]:>9.3f}+-{row['weights_se'][s]:.3f}")
        lines.append(f"  {p:>5.3f}  " + "".join(cells))
    return "\n".join(lines)
