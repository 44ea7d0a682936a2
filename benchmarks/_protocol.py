"""The bookkeeping of the protocol (``benchmarks/PROTOCOL.md``): runs kept one a line, recipes frozen, seed sets spent.

The statistics (paired t-intervals, summaries, recipe hashes) are in ``course_lib.lectures.protocol``, where the
notebooks use them too.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import os
from pathlib import Path

from course_lib.lectures.protocol import PROTOCOL_VERSION, recipe_hash
from course_lib.tiny_lm import TinyLM

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SEED_SETS = HERE / "seed_sets.json"

FAST_PATHS = False
"""Version 2's runs take every pass in full (``TinyLM.fast_paths = False``, PROTOCOL.md rule 10): the loop bit for
bit as it was before issue 40's shortcuts, which move its numbers by float rounding. Their paired check (chapter 08's
frozen GRPO, 300 rounds, ``results/loop_speed_accuracy_grpo_300.jsonl``) is unresolved in the mean and lower with
the shortcuts on most seeds; a comparison that must answer to ±0.03 does not carry that doubt."""


# ---------------------------------------------------------------------------
# Runs: one JSON line each, appended as they finish (a run that was cut off resumes)
# ---------------------------------------------------------------------------


def load_runs(path: Path) -> list[dict]:
    """Every run recorded in ``path`` (a JSON-lines file), oldest first; ``[]`` if there is none."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def append_run(path: Path, record: dict) -> None:
    """Append one run to ``path`` and flush it to disk, so that nothing finished is lost."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(record, separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())


def run_jobs(run_job, jobs: list[tuple], n_jobs: int, path: Path) -> None:
    """``run_job(job)`` for each of ``jobs``, ``n_jobs`` processes at a time, appending each record to ``path`` as it
    finishes, with the loop it ran on (``"fast_paths"``). Each job gets a fresh forked process
    (``maxtasksperchild=1``): no run inherits another's state; each inherits the parent's ``TinyLM.fast_paths``."""
    if n_jobs == 1:
        for job in jobs:
            append_run(path, {**run_job(job), "fast_paths": TinyLM.fast_paths})
        return
    with mp.get_context("fork").Pool(n_jobs, maxtasksperchild=1) as pool:
        for record in pool.imap_unordered(run_job, jobs, chunksize=1):
            append_run(path, {**record, "fast_paths": TinyLM.fast_paths})


def runs_version(runs: list[dict]) -> int:
    """The protocol the runs were made under: their ``"protocol"`` key, 1 where there is none (every run made
    before version 2); runs of two versions in one file are refused, so that no table mixes them."""
    versions = {run.get("protocol", 1) for run in runs}
    if len(versions) > 1:
        raise SystemExit(f"runs of protocol versions {sorted(versions)} in one file: keep each version's runs apart")
    return versions.pop() if versions else 1


def run_key(record: dict, fields: tuple[str, ...]) -> tuple:
    """The fields that identify a run (its method, setting and seed), to skip runs already done."""
    return tuple(record[field] for field in fields)


# ---------------------------------------------------------------------------
# Recipes, frozen before the report
# ---------------------------------------------------------------------------


def pick_setting(scores: dict[float, list[float]]) -> float:
    """Version 1's rule: the setting with the highest mean score, then the higher worst seed, then the lower."""
    return max(
        scores, key=lambda setting: (sum(scores[setting]) / len(scores[setting]), min(scores[setting]), -setting)
    )


MIN_TUNE_SEEDS = 4
"""Version 2: every setting is tuned on at least this many seeds (two could not show a collapse seed)."""


def pick_setting_v2(scores: dict[float, list[float]], floor: float, min_seeds: int = MIN_TUNE_SEEDS) -> tuple:
    """Version 2's rule, guarding against collapse: ``(setting, cleared)``.

    A setting *clears the floor* when its worst tuning seed scores at least ``floor``. Among the settings that
    clear it, the highest mean wins (a tie: the higher worst seed, then the lower setting). If none clears it, the
    setting with the highest worst seed wins (then the higher mean, then the lower setting), and ``cleared`` is
    False: the benchmark prints that no setting cleared its floor, and the report carries it.
    """
    if not scores:
        raise ValueError("scores: expected at least one setting's tuning scores")
    short = sorted(setting for setting, values in scores.items() if len(values) < min_seeds)
    if short:
        raise ValueError(f"scores: version 2 tunes on at least {min_seeds} seeds a setting; {short} have fewer")
    cleared = [setting for setting, values in scores.items() if min(values) >= floor]
    if cleared:
        best = max(cleared, key=lambda s: (sum(scores[s]) / len(scores[s]), min(scores[s]), -s))
        return best, True
    best = max(scores, key=lambda s: (min(scores[s]), sum(scores[s]) / len(scores[s]), -s))
    return best, False


def edge_step(grid, pick: float) -> float | None:
    """Version 2's edge rule: the setting one step past the grid's edge when ``pick`` is at that edge, else None.

    Learning rates are compared on a log scale, so the step is geometric: past the lowest rate, the lowest times
    (lowest / its neighbour); past the highest, the highest times (highest / its neighbour). The benchmark tunes
    the new setting on the same seeds, runs the rule again over the grid it extended, and only then freezes.
    """
    grid = sorted(grid)
    if len(grid) < 2:
        raise ValueError(f"grid: expected at least 2 settings to extend, got {grid}")
    if pick not in grid:
        raise ValueError(f"pick: expected one of the grid's settings {grid}, got {pick}")
    if pick == grid[0]:
        return grid[0] * grid[0] / grid[1]
    if pick == grid[-1]:
        return grid[-1] * grid[-1] / grid[-2]
    return None


MAX_EDGE_STEPS = 2
"""Version 2: the grid is extended at most this many times; a pick still at the edge is frozen with a caveat."""


def lr_step(value: float) -> float:
    """A grid step written to 4 significant digits (``5e-4``, not ``0.0005000000000000001``), so that a tuning
    run's key matches when a resumed stage computes the same step again."""
    return float(f"{value:.4g}")


@dataclasses.dataclass(frozen=True)
class EdgePick:
    """The edge rule walked over one method's tuning scores (:func:`pick_with_edge_rule`)."""

    grid: tuple[float, ...]
    """The grid the rule reached: the base grid and every step it added past an edge."""
    pick: float | None
    """The setting picked, or None while a setting of ``grid`` still lacks tuning runs (run ``missing``)."""
    cleared: bool
    """Whether the pick's worst tuning seed clears the floor (``pick_setting_v2``'s first branch)."""
    at_edge: bool
    """The pick is still at the grid's edge after ``MAX_EDGE_STEPS`` extensions: tables say so."""
    missing: tuple[float, ...]
    """The settings of ``grid`` that still need tuning runs before the rule can go on."""


def pick_with_edge_rule(
    scores: dict[float, list[float]], grid, n_seeds: int, floor: float, min_seeds: int = MIN_TUNE_SEEDS
) -> EdgePick:
    """Version 2's pick and edge rule together, over the tuning scores recorded so far (``setting -> scores``).

    Start from ``grid``; once each of its settings has ``n_seeds`` scores, pick with :func:`pick_setting_v2`; a pick
    at an edge adds :func:`edge_step`'s setting and the rule runs again, at most ``MAX_EDGE_STEPS`` times. The walk
    depends only on the scores, so a tuning stage that was cut off, or the freeze stage after it, walks it the
    same way: the tune stage runs ``missing`` until it is empty, the freeze stage freezes ``pick``.
    """
    grid = sorted(grid)
    for extended in range(MAX_EDGE_STEPS + 1):
        missing = tuple(s for s in grid if len(scores.get(s, [])) < n_seeds)
        if missing:
            return EdgePick(tuple(grid), None, False, False, missing)
        pick, cleared = pick_setting_v2({s: scores[s][:n_seeds] for s in grid}, floor, min_seeds)
        step = edge_step(grid, pick)
        if step is None or extended == MAX_EDGE_STEPS:
            return EdgePick(tuple(grid), pick, cleared, step is not None, ())
        grid = sorted([*grid, lr_step(step)])
    raise AssertionError("unreachable: the loop returns on its last pass")


_VERSION_1 = object()


def tuning_cells(scores: dict[float, list[float]], grid, n_seeds: int, pick=_VERSION_1) -> str:
    """One method's row of a tuning table: each setting's mean (worst seed), ``*`` on the pick: ``pick`` where
    given (version 2's, from :func:`pick_with_edge_rule`; None marks nothing), else version 1's rule once the grid
    is complete (every setting run on all ``n_seeds`` tuning seeds)."""
    if pick is _VERSION_1:
        complete = len(scores) == len(grid) and all(len(v) == n_seeds for v in scores.values())
        pick = pick_setting(scores) if complete else None
    cells = []
    for setting in grid:
        v = scores.get(setting, [])
        mark = "*" if setting == pick else " "
        cells.append(f"lr {setting:g}: {sum(v) / len(v):.3f} ({min(v):.3f}){mark}" if v else f"lr {setting:g}: -")
    return "   ".join(cells)


def run_stage(args, files: dict, tune, freeze, report) -> None:
    """The stage the command line asked for (``--tune``, ``--freeze``, or the report); ``--quick`` runs all three
    in order, the whole pipeline in one go. Each stage is the benchmark's own ``stage(args, files)``. Under version 2
    every stage runs the loop in full (``FAST_PATHS``), its forked runs too."""
    if getattr(args, "version", PROTOCOL_VERSION) >= 2:
        TinyLM.fast_paths = FAST_PATHS
    if args.quick:
        tune(args, files)
        freeze(args, files)
        report(args, files)
    elif args.tune:
        tune(args, files)
    elif args.freeze:
        freeze(args, files)
    else:
        report(args, files)


def freeze(path: Path, recipes: dict[str, dict]) -> dict[str, str]:
    """Write ``recipes`` (name -> recipe) with their hashes to ``path``; return name -> hash."""
    hashes = {name: recipe_hash(recipe) for name, recipe in recipes.items()}
    payload = {name: {"recipe": recipe, "hash": hashes[name]} for name, recipe in recipes.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1) + "\n")
    return hashes


def load_frozen(path: Path) -> dict[str, dict]:
    """name -> ``{"recipe", "hash"}``; the hash is checked against the recipe (a hand-edited file is refused)."""
    if not path.exists():
        raise SystemExit(f"{path} does not exist: tune, then --freeze, before any report run")
    frozen = json.loads(path.read_text())
    for name, entry in frozen.items():
        if recipe_hash(entry["recipe"]) != entry["hash"]:
            raise SystemExit(f"{path}: the recipe of {name!r} no longer matches its hash: freeze it again")
    return frozen


# ---------------------------------------------------------------------------
# Report seed sets: each spent once
# ---------------------------------------------------------------------------


def seed_set(name: str) -> list[int]:
    """The seeds of report set ``name`` (``benchmarks/seed_sets.json``)."""
    sets = json.loads(SEED_SETS.read_text())["sets"]
    if name not in sets:
        raise SystemExit(f"seed set {name!r} is not in {SEED_SETS}: add it there, with seeds no run has used")
    return sets[name]["seeds"]


def spend(name: str, benchmark: str, hashes: dict[str, str]) -> None:
    """Mark set ``name`` as spent on these recipes; refuse if it was spent on other ones."""
    ledger = json.loads(SEED_SETS.read_text())
    entry = ledger["sets"][name]
    spent = entry.get("spent_on")
    if spent is not None and (spent["benchmark"] != benchmark or spent["recipes"] != hashes):
        changed = sorted(k for k in set(spent["recipes"]) | set(hashes) if spent["recipes"].get(k) != hashes.get(k))
        raise SystemExit(
            f"seed set {name!r} was spent on {spent['benchmark']} with other recipes (changed: {', '.join(changed)}): "
            "a recipe changed after its report run needs a new set of seeds no run has used (PROTOCOL.md, rule 4)"
        )
    entry["spent_on"] = {"benchmark": benchmark, "recipes": hashes}
    _write_ledger(ledger)


def _write_ledger(ledger: dict) -> None:
    """The ledger with one line per seed set, so that a diff shows which set was spent."""
    rows = [f'  "{name}": {json.dumps(entry)}' for name, entry in ledger["sets"].items()]
    text = '{\n "note": ' + json.dumps(ledger.get("note", "")) + ',\n "sets": {\n' + ",\n".join(rows) + "\n }\n}\n"
    SEED_SETS.write_text(text)
