"""Chapter 11 under protocol version 2 (``benchmarks/grpo_family.py --protocol 2``): the verdicts whose recipe
changes, tuned again and re-reported on seed set ``family-3``.

- **length**: GRPO, Dr. GRPO, DAPO's three parts, and ``Dr.GRPO-divisor`` (Dr. GRPO's constant divisor alone, the
  group's std kept: the length claim is about the divisor, so Dr.GRPO - Dr.GRPO-divisor is the dropped std's share).
  Every variant is also frozen and reported at GRPO's tuned rate (``"length/NAME@matched"``), so that each length
  verdict is printed twice on the same fresh seeds: at the tuned rates, and at one matched rate (PROTOCOL.md,
  rule 7).
- **drift**: every variant picked the grid's lowest rate under version 1; the edge rule extends the grid below it.

Tuning: seeds 0 to 3, each testbed's floor (PROTOCOL.md, rule 2), ``_protocol.pick_with_edge_rule``. Files:
``results/family_v2_tune.jsonl``, ``family_v2_recipes.json``, ``family_v2_report.jsonl``, every run tagged
``"protocol": 2``. The claims are read with Holm's correction over every difference the report prints; ``--save
DIR`` writes ``grpo_family_v2_11.json`` beside version 1's ``grpo_family_11.json``.

Tuning (176 runs in ``results/family_v2_tune.jsonl``), as ``--freeze`` printed it: the drift grid was extended twice
below its edge, and four of its picks are still at the lowest rate; the soft overlong punishment clears no floor::

    validation accuracy, tuning seeds [0, 1, 2, 3] (protocol v2): mean (worst); * the pick
      length    GRPO                  lr 0.0005: 0.815 (0.792)    lr 0.001: 0.821 (0.800)*   lr 0.002: 0.821 (0.792)
      length    Dr.GRPO               lr 0.0005: 0.821 (0.804)    lr 0.001: 0.826 (0.812)*   lr 0.002: 0.811 (0.788)
      length    DAPO-token-mean       lr 0.0005: 0.824 (0.802)    lr 0.001: 0.826 (0.808)*   lr 0.002: 0.821 (0.804)
      length    DAPO-overlong-filter  lr 0.0005: 0.815 (0.794)    lr 0.001: 0.819 (0.800)*   lr 0.002: 0.810 (0.770)
      length    DAPO-soft-overlong    lr 0.00025: 0.491 (0.280)    lr 0.0005: 0.505 (0.318)*   lr 0.001: 0.499 (0.282)    lr 0.002: 0.463 (0.294)    (no rate cleared the floor 0.75)
      length    Dr.GRPO-divisor       lr 0.0005: 0.821 (0.802)    lr 0.001: 0.828 (0.816)*   lr 0.002: 0.811 (0.798)
      drift     GRPO                  lr 0.00025: 0.573 (0.468)*   lr 0.0005: 0.551 (0.418)    lr 0.001: 0.490 (0.400)    lr 0.002: 0.366 (0.336)    lr 0.004: 0.064 (0.046)    (at the grid's edge)
      drift     GSPO                  lr 0.00025: 0.503 (0.446)    lr 0.0005: 0.542 (0.460)*   lr 0.001: 0.498 (0.408)    lr 0.002: 0.461 (0.372)    lr 0.004: 0.202 (0.088)
      drift     GMPO                  lr 0.00025: 0.588 (0.462)*   lr 0.0005: 0.561 (0.462)    lr 0.001: 0.464 (0.328)    lr 0.002: 0.300 (0.204)    lr 0.004: 0.046 (0.026)    (at the grid's edge)
      drift     CISPO                 lr 0.00025: 0.591 (0.458)*   lr 0.0005: 0.584 (0.418)    lr 0.001: 0.492 (0.318)    lr 0.002: 0.239 (0.134)    lr 0.004: 0.020 (0.006)    (at the grid's edge)
      drift     SAPO                  lr 0.00025: 0.608 (0.446)*   lr 0.0005: 0.567 (0.444)    lr 0.001: 0.484 (0.370)    lr 0.002: 0.312 (0.210)    lr 0.004: 0.024 (0.018)    (at the grid's edge)

The report (288 runs on ``family-3``, seeds 1500 to 1523: 3.1 CPU-hours; the tuning took 1.8), as it printed it::

    11 differences read together; Holm's correction at family level 0.05:
      Dr.GRPO - GRPO, final.length_wrong (tuned)                   -0.276 [-0.417, -0.135]  p 0.001  Holm 0.004  held
      DAPO-token-mean - GRPO, final.length_wrong (tuned)           +0.009 [-0.029, +0.048]  p 0.626  Holm 1.000  not seen
      DAPO-overlong-filter - GRPO, score (tuned)                   -0.002 [-0.004, +0.001]  p 0.218  Holm 0.655  not seen
      DAPO-soft-overlong - GRPO, final.truncated (tuned)           -0.127 [-0.135, -0.118]  p 0.000  Holm 0.000  held
      DAPO-soft-overlong - GRPO, final.truncated (at GRPO's rate)  -0.129 [-0.138, -0.120]  p 0.000  Holm 0.000  held
      GSPO - GRPO, score (tuned)                                   -0.013 [-0.031, +0.004]  p 0.135  Holm 0.541  not seen
      GMPO - GRPO, score (tuned)                                   +0.025 [+0.013, +0.038]  p 0.000  Holm 0.002  held
      CISPO - GRPO, score (tuned)                                  +0.026 [+0.009, +0.043]  p 0.005  Holm 0.027  held
      SAPO - GRPO, score (tuned)                                   +0.016 [+0.000, +0.032]  p 0.044  Holm 0.221  not seen
      Dr.GRPO-divisor - GRPO, final.length_wrong (tuned)           +0.019 [-0.051, +0.088]  p 0.581  Holm 1.000  not seen
      Dr.GRPO - Dr.GRPO-divisor, final.length_wrong (tuned)        -0.295 [-0.383, -0.206]  p 0.000  Holm 0.000  resolved

Six of version 1's eight length and drift verdicts changed; notebook 11's section 8 reads them.
"""

from __future__ import annotations

import time
from pathlib import Path

import _protocol
import _results

from course_lib.lectures import family_testbeds, family_v2
from course_lib.lectures.family import TESTBEDS as FAMILY_TESTBEDS
from course_lib.lectures.family import testbed_variants

VERSION = 2
SAVE_NAME = family_v2.SAVE_NAME
TESTBEDS = ("length", "drift")
FLOORS = {"length": 0.75, "drift": 0.30}
"""PROTOCOL.md, rule 2's table: validation accuracy a setting's worst tuning seed must reach."""
TUNE_SEEDS = (0, 1, 2, 3)
REPORT_SET = "family-3"
MATCHED = family_v2.MATCHED


def files(results: Path, quick: bool) -> dict:
    return {
        "tune": results / "family_v2_tune.jsonl",
        "recipes": results / "family_v2_recipes.json",
        "report": results / "family_v2_report.jsonl",
        "cache": results / "cache" if quick else Path("_build") / "family-warm",
    }


def _grid(bed: str, quick: bool) -> tuple[float, ...]:
    return FAMILY_TESTBEDS[bed].lr_grid[:2] if quick else FAMILY_TESTBEDS[bed].lr_grid


def walks(args, paths) -> dict[tuple[str, str], _protocol.EdgePick]:
    """(testbed, variant) -> version 2's pick and edge rule over the tuning runs recorded so far."""
    scores: dict = {}
    for r in _protocol.load_runs(paths["tune"]):
        if r["seed"] in args.tune_seeds:
            scores.setdefault((r["testbed"], r["variant"]), {}).setdefault(r["lr"], {})[r["seed"]] = r["score"]
    min_seeds = len(args.tune_seeds) if args.quick else _protocol.MIN_TUNE_SEEDS
    out = {}
    for bed in args.testbeds:
        for name in testbed_variants(bed, VERSION):
            by_lr = {lr: [v[s] for s in sorted(v)] for lr, v in scores.get((bed, name), {}).items()}
            grid = _grid(bed, args.quick)
            out[bed, name] = _protocol.pick_with_edge_rule(by_lr, grid, len(args.tune_seeds), FLOORS[bed], min_seeds)
    return out


def stages(run_all, pending):
    """The three stages, over ``grpo_family``'s own ``run_all`` and ``pending`` (its jobs, pool and warm-ups)."""

    def job(phase, bed, name, lr, seed, args, paths):
        return (phase, bed, name, lr, seed, args.quick, str(paths["cache"]), VERSION)

    def tune(args, paths) -> None:
        for _ in range(_protocol.MAX_EDGE_STEPS + 1):
            jobs = [
                job("tune", bed, name, lr, seed, args, paths)
                for (bed, name), walk in walks(args, paths).items()
                for lr in walk.missing
                for seed in args.tune_seeds
            ]
            todo = pending(jobs, paths["tune"])
            if not todo:
                break
            print(f"tuning (protocol v{VERSION}): {len(todo)} runs to do, {args.jobs} at a time", flush=True)
            run_all(todo, args.jobs, paths["tune"], paths["cache"], args.quick)
        print_tuning(args, paths)

    def freeze(args, paths) -> None:
        recipes = {}
        picks = walks(args, paths)
        for (bed, name), walk in picks.items():
            if walk.pick is None:
                raise SystemExit(f"{bed} / {name} has not finished its tuning runs: --tune first")
            recipes[f"{bed}/{name}"] = family_testbeds.recipe(bed, name, walk.pick, args.quick)
        if "length" in args.testbeds:  # rule 7: every length variant also at GRPO's tuned rate
            grpo_lr = picks["length", "GRPO"].pick
            for name in testbed_variants("length", VERSION)[1:]:
                recipes[f"length/{name}{MATCHED}"] = family_testbeds.recipe("length", name, grpo_lr, args.quick)
        hashes = _protocol.freeze(paths["recipes"], recipes)
        print_tuning(args, paths)
        print(f"froze {len(hashes)} recipes in {paths['recipes']}")

    def report(args, paths) -> None:
        frozen = _protocol.load_frozen(paths["recipes"])
        seeds = [0, 1] if args.quick else _protocol.seed_set(REPORT_SET)
        if not args.quick:
            _protocol.spend(REPORT_SET, "benchmarks/grpo_family.py", {k: v["hash"] for k, v in frozen.items()})
        jobs = [
            job("report", e["recipe"]["testbed"], e["recipe"]["variant"], e["recipe"]["rl"]["lr"], seed, args, paths)
            for e in frozen.values()
            for seed in seeds
        ]
        todo = pending(list(dict.fromkeys(jobs)), paths["report"])  # a matched recipe may be the tuned one
        print(f"report on {'quick seeds' if args.quick else REPORT_SET} {seeds}: {len(todo)} runs to do", flush=True)
        start = time.perf_counter()
        run_all(todo, args.jobs, paths["report"], paths["cache"], args.quick)
        print_report(args, paths, frozen, seeds)
        if args.save is not None:
            save(args, paths, frozen, seeds, time.perf_counter() - start)

    return tune, freeze, report


def save(args, paths, frozen: dict, seeds, seconds: float) -> None:
    """``grpo_family_v2_11.json``: version 2's report runs, recipes and tuning runs, for notebook 11."""
    results = {
        "protocol": VERSION,
        "seed_set": "quick seeds" if args.quick else REPORT_SET,
        "seeds": list(seeds),
        "tune_seeds": list(args.tune_seeds),
        "floors": FLOORS,
        "recipes": {key: {"hash": e["hash"], "lr": e["recipe"]["rl"]["lr"]} for key, e in frozen.items()},
        "runs": [r for r in _protocol.load_runs(paths["report"]) if r["seed"] in seeds],
        "tuning": _protocol.load_runs(paths["tune"]),
    }
    _results.write_results(args.save / SAVE_NAME, "grpo_family.py", seconds, results, seeds=len(seeds))


def print_tuning(args, paths) -> None:
    scores: dict = {}
    for r in _protocol.load_runs(paths["tune"]):
        if r["seed"] in args.tune_seeds:
            scores.setdefault((r["testbed"], r["variant"]), {}).setdefault(r["lr"], []).append(r["score"])
    print(f"validation accuracy, tuning seeds {list(args.tune_seeds)} (protocol v{VERSION}): mean (worst); * the pick")
    for (bed, name), walk in walks(args, paths).items():
        notes = [] if walk.pick is None or walk.cleared else [f"no rate cleared the floor {FLOORS[bed]:g}"]
        notes += ["at the grid's edge"] if walk.at_edge else []
        cells = _protocol.tuning_cells(scores.get((bed, name), {}), walk.grid, len(args.tune_seeds), pick=walk.pick)
        print(f"  {bed:<9} {name:<21} {cells}" + (f"   ({'; '.join(notes)})" if notes else ""))


def print_report(args, paths, frozen: dict, seeds) -> None:
    runs = [r for r in _protocol.load_runs(paths["report"]) if r["seed"] in seeds]
    recipes = {key: {"hash": e["hash"], "lr": e["recipe"]["rl"]["lr"]} for key, e in frozen.items()}
    results = {
        "runs": runs,
        "recipes": recipes,
        "seeds": list(seeds),
        "seed_set": "quick seeds" if args.quick else REPORT_SET,
    }
    print(family_v2.format_recipes(results))
    judged = family_v2.verdicts(family_v2.differences(runs, recipes, tuple(args.testbeds)))
    print("the claims, tuned and at a matched rate, read together (PROTOCOL.md, rules 7 and 8):")
    print(family_v2.format_verdicts(judged))
    n_seeds = min((len({r["seed"] for r in runs if r["testbed"] == bed}) for bed in args.testbeds), default=0)
    print(f"family_v2: testbeds={','.join(args.testbeds)} recipes={len(frozen)} differences={len(judged)} "
          f"seeds={n_seeds}")  # fmt: skip
