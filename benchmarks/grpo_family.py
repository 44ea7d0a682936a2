"""Benchmark: chapter 11, each GRPO variant on a testbed where the problem it was made for occurs, under the protocol.

Every paper of the GRPO family claims a fix for one problem (``course_lib.lectures.family_claims.CLAIMS``). Each
claim is tested where its problem occurs under plain GRPO (``course_lib.lectures.family.TESTBEDS``):

- **estimators** (RLOO, Dr. GRPO's std, REINFORCE++, against GRPO and REINFORCE without a baseline): a contextual
  bandit whose exact policy gradient is known (``course_lib.lectures.group_estimators``); prompts with success
  probabilities 0.02 to 0.98 and a binary reward, G = 2, 4, 8, 16, 20,000 batches of 16 prompts per row. Exact
  where it can be, Monte Carlo with standard errors beside it. Nothing is tuned and no seed set is spent.
  ``--testbeds estimators`` runs it alone (10 CPU seconds): its table, each prompt's weight at G = 8, the three
  claims it settles, and the trained testbeds' claims listed as not yet measured; its output is kept in
  ``results/family_estimators.txt`` and, with ``--save``, in ``data/grpo_family_estimators_11.json``;
- **length** (Dr. GRPO, DAPO's token mean, overlong filter and soft overlong punishment): chapter 10's 3-digit
  addition with a scratchpad, at most 14 tokens where the longest scratchpads need 15;
- **sparse** (DAPO's clip-higher and dynamic sampling): chapter 08's task with an exact-match reward, where many
  groups are all wrong or all right;
- **drift** (GSPO, GMPO, CISPO, SAPO against PPO's clip): chapter 08's task with 8 passes x 4 minibatches a round;
- **accuracy** (the ten variants of the old chapter): chapter 08's task and recipe for 48 of its 300 rounds, where
  the problems barely occur: what separates the variants there, with intervals.

``course_lib.lectures.family_testbeds`` holds each testbed's task, loop and budget. The protocol
(``benchmarks/PROTOCOL.md``), stage by stage, every run appended as one JSON line so that a stage resumes:

1. ``--tune``: each variant of each trained testbed at each learning rate of its grid (three, one below the
   default), on tuning seeds 0 and 1, scored on the validation split (``results/family_tune.jsonl``);
2. ``--freeze``: each (testbed, variant)'s learning rate by the protocol's rule, written with its recipe's hash to
   ``results/family_recipes.json``;
3. the report (no flag): the frozen recipes on seed set ``family-1`` (``seed_sets.json``), scored on the 500 test
   prompts (``results/family_report.jsonl``); then the estimator testbed, each testbed's table with paired
   t-intervals against its baseline, the claims table with a verdict by the rule written in
   ``family_claims`` before the report ran, and the accuracy table; ``--save DIR`` writes the notebook's
   ``grpo_family_11.json``.

Every run is a process with one torch thread, ``--jobs`` at a time; a testbed's warm-up is done once per seed and
cached (``_build/family-warm``), and every variant of the seed starts from it (the runs pair by seed).
``cpu_seconds`` is each process's user + system time (``resource.getrusage``), which a loaded machine inflates far
less than wall time.

The last line is ``family: claims=C held=H not_seen=N contradicted=X variants=V seeds=S``.

``--protocol 2`` runs chapter 11's second round instead (``benchmarks/_family_v2.py``, tuned and frozen, its tuning
table there; the report on family-3 under way): the length
and drift testbeds tuned on seeds 0 to 3 with PROTOCOL.md's floors and edge rule, ``Dr.GRPO-divisor`` beside
Dr. GRPO, every length variant also at GRPO's tuned rate, reported on ``family-3``; its last line is
``family_v2: testbeds=length,drift recipes=R differences=D seeds=S``. ``--quick --protocol 2`` runs it tiny.

Tuning runs (78, in ``results/family_tune.jsonl``), as ``--freeze`` printed them::

    validation accuracy at the end, tuning seeds [0, 1]: mean (worst seed); * the pick
      length    GRPO                  lr 0.0005: 0.826 (0.818)*   lr 0.001: 0.824 (0.820)    lr 0.002: 0.820 (0.808)
      length    Dr.GRPO               lr 0.0005: 0.825 (0.818)    lr 0.001: 0.825 (0.822)*   lr 0.002: 0.824 (0.814)
      length    DAPO-token-mean       lr 0.0005: 0.826 (0.820)    lr 0.001: 0.830 (0.828)*   lr 0.002: 0.825 (0.816)
      length    DAPO-overlong-filter  lr 0.0005: 0.822 (0.818)    lr 0.001: 0.822 (0.816)    lr 0.002: 0.826 (0.820)*
      length    DAPO-soft-overlong    lr 0.0005: 0.546 (0.386)    lr 0.001: 0.567 (0.426)*   lr 0.002: 0.499 (0.264)
      sparse    GRPO                  lr 0.001: 0.787 (0.762)    lr 0.002: 0.796 (0.792)*   lr 0.004: 0.493 (0.374)
      sparse    DAPO-clip-higher      lr 0.001: 0.819 (0.814)*   lr 0.002: 0.755 (0.752)    lr 0.004: 0.571 (0.516)
      sparse    DAPO-dyn-sampling     lr 0.001: 0.755 (0.722)    lr 0.002: 0.763 (0.688)*   lr 0.004: 0.533 (0.486)
      drift     GRPO                  lr 0.001: 0.602 (0.530)*   lr 0.002: 0.424 (0.328)    lr 0.004: 0.076 (0.032)
      drift     GSPO                  lr 0.001: 0.581 (0.536)*   lr 0.002: 0.531 (0.412)    lr 0.004: 0.297 (0.134)
      drift     GMPO                  lr 0.001: 0.490 (0.416)*   lr 0.002: 0.319 (0.268)    lr 0.004: 0.129 (0.046)
      drift     CISPO                 lr 0.001: 0.353 (0.342)*   lr 0.002: 0.223 (0.106)    lr 0.004: 0.020 (0.014)
      drift     SAPO                  lr 0.001: 0.472 (0.430)*   lr 0.002: 0.311 (0.264)    lr 0.004: 0.060 (0.026)

The report on ``family-1`` (104 runs, 2,420 CPU-s; each testbed's table is in notebook 11), the claims::

    variant               testbed     effect [95% interval]       verdict
    RLOO                  estimators  1.003 [0.999, 1.007]        held here
    Dr.GRPO               estimators  -0.301 (exact)              held here
    REINFORCE++           estimators  -0.270 [-0.284, -0.257]     held here
    Dr.GRPO               length      -0.188 [-0.270, -0.106]     held here
    DAPO-token-mean       length      +0.108 [+0.025, +0.191]     contradicted here
    DAPO-overlong-filter  length      -0.007 [-0.013, -0.001]     contradicted here
    DAPO-soft-overlong    length      -0.130 [-0.145, -0.116]     held here
    DAPO-clip-higher      sparse      +0.001 [-0.024, +0.026]     not seen here
    DAPO-dyn-sampling     sparse      -0.018 [-0.046, +0.011]     not seen here
    GSPO                  drift       +0.055 [+0.020, +0.090]     held here
    GMPO                  drift       -0.003 [-0.043, +0.038]     not seen here
    CISPO                 drift       -0.076 [-0.150, -0.003]     contradicted here
    SAPO                  drift       -0.047 [-0.090, -0.004]     contradicted here
    family: claims=13 held=6 not_seen=3 contradicted=4 variants=14 seeds=8

(The report run printed ``variants=15``: it counted the accuracy testbed's variants too, which have not run; the
line now counts the variants measured, and rerunning the report from the stored runs prints 14.)

Since protocol v2 (rule 7) the report also prints each claim whose variant and GRPO were frozen at different rates,
read again at every rate both were tuned at; from the v1 tuning runs (two seeds, validation), for the length
testbed::

    tuned effect (report seeds, test prompts) | the same difference at matched rates (tuning runs, validation)
      Dr.GRPO - GRPO, final.length_wrong: tuned -0.188 (Dr.GRPO at 0.001, GRPO at 0.0005): held here
          at lr 0.0005 -0.394  (seeds [0, 1]: -0.500, -0.288)
          at lr 0.001  -0.509  (seeds [0, 1]: -0.587, -0.432)
          at lr 0.002  -0.332  (seeds [0, 1]: -0.487, -0.178)
      DAPO-token-mean - GRPO, final.length_wrong: tuned +0.108 (DAPO-token-mean at 0.001, GRPO at 0.0005): contradicted here
          at lr 0.0005 -0.202  (seeds [0, 1]: -0.246, -0.158)
          at lr 0.001  -0.004  (seeds [0, 1]: -0.006, -0.002)
          at lr 0.002  -0.099  (seeds [0, 1]: -0.128, -0.070)

(and the overlong filter's, the soft punishment's and, on the sparse testbed, clip-higher's likewise; notebook 11
prints the length testbed's, and its table to keep every verdict's caveat). Read together with
Holm's correction (rule 8), only Dr. GRPO's length and the soft punishment's cut-off share stay resolved among the ten
trained claims; the table to keep (``family_results.format_claims_kept(judged, results)``) carries each caveat.

The control, ``--testbeds accuracy`` on ``family-2`` (60 tuning runs, 80 report runs, 1,868 CPU-s)::

    accuracy: chapter 08's task and recipe (4 passes x 2 minibatches), 48 of its rounds; seeds 1210-1217; mean (std), accuracy's worst seed in brackets
      variant               lr      recipe               accuracy                  KL              rounds              to 0.8           accuracy - GRPO
      GRPO                  0.001   737c59a7  0.668 (0.167) [0.40]       0.378 (0.069)      48.000 (0.000)               never
      PPO                   0.002   35badfa6  0.646 (0.163) [0.37]       0.372 (0.028)      48.000 (0.000)               never   -0.022 [-0.053, +0.010]
      RLOO                  0.001   b1d368f1  0.675 (0.163) [0.41]       0.366 (0.086)      48.000 (0.000)               never   +0.008 [-0.013, +0.028]
      REINFORCE++           0.002   c125623e  0.639 (0.178) [0.32]       0.394 (0.047)      48.000 (0.000)               never   -0.029 [-0.075, +0.017]
      Dr.GRPO               0.002   451a6fba  0.669 (0.170) [0.39]       0.331 (0.044)      48.000 (0.000)               never   +0.001 [-0.038, +0.040]
      DAPO                  0.001   7cbc432f  0.650 (0.164) [0.37]       0.564 (0.302)      42.375 (2.774)               never   -0.018 [-0.051, +0.016]
      DAPO-clip-higher      0.001   5c59e693  0.654 (0.167) [0.36]       0.361 (0.083)      48.000 (0.000)               never   -0.014 [-0.031, +0.003]
      DAPO-dyn-sampling     0.001   41f362aa  0.667 (0.167) [0.37]       0.377 (0.124)      43.500 (2.563)               never   -0.001 [-0.029, +0.027]
      GSPO                  0.002   b214115d  0.647 (0.158) [0.37]       0.404 (0.343)      48.000 (0.000)               never   -0.021 [-0.062, +0.020]
      CISPO                 0.001   30e8957e  0.632 (0.183) [0.30]       0.333 (0.040)      48.000 (0.000)               never   -0.036 [-0.068, -0.004]
      above: none; below: CISPO; unresolved: PPO, RLOO, REINFORCE++, Dr.GRPO, DAPO, DAPO-clip-higher, DAPO-dyn-sampling, GSPO

Usage::

    python benchmarks/grpo_family.py --tune --jobs 2        # length, sparse and drift: the tuning grid
    python benchmarks/grpo_family.py --freeze               # pick and freeze each learning rate
    python benchmarks/grpo_family.py --save course_lib/lectures/data   # the report on family-1, the notebook's data
    python benchmarks/grpo_family.py --testbeds accuracy --tune   # the accuracy testbed, apart (seed set family-2)
    python benchmarks/grpo_family.py --quick                # the whole pipeline in seconds, into a temp dir
    python benchmarks/grpo_family.py --testbeds estimators --save course_lib/lectures/data   # that testbed alone

The estimator testbed at G = 8 (``results/family_estimators.txt`` has every group size)::

     G  estimator    cosine with grad J         magnitude along grad J   tr Cov / |grad J|^2  SNR |Eg|^2/tr Cov  difficulty tilt
     8  REINFORCE    1.0000+-0.0000 [1.0000]    0.999+-0.002 [1.000]     1.17+-0.01           0.852+-0.004       1.003+-0.006 [1.000]
     8  GRPO         0.9971+-0.0002 [0.9969]    1.871+-0.003 [1.867]     4.79+-0.01           0.735+-0.002       1.302+-0.007 [1.301]
     8  Dr.GRPO      0.9999+-0.0000 [1.0000]    0.875+-0.002 [0.875]     1.03+-0.00           0.745+-0.002       0.995+-0.005 [1.000]
     8  RLOO         1.0000+-0.0000 [1.0000]    1.003+-0.002 [1.000]     1.34+-0.01           0.750+-0.003       0.998+-0.007 [1.000]
     8  REINFORCE++  0.9999+-0.0000             2.692+-0.004             9.52+-0.03           0.761+-0.003       1.030+-0.007
    family estimators: claims=3 held=3 not_seen=0 contradicted=0 estimators=5 batches=20000 not_measured=10
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import tempfile
import time
from pathlib import Path

import _family_v2
import _protocol  # benchmarks/ is the script's folder, so its sibling modules import directly
import _results
import torch
from _warm_cache import save_whole

from course_lib.lectures import family_caveats, family_claims, family_results, family_testbeds, group_estimators
from course_lib.lectures.family import TESTBEDS, TRAINED
from course_lib.lectures.protocol import recipe_hash

TUNE_SEEDS = (0, 1)
REPORT_SETS = {"family-1": ("length", "sparse", "drift"), "family-2": ("accuracy",)}
"""The testbeds each report seed set is for. A set is spent once, on one set of recipes: family-1 was spent on the
length, sparse and drift testbeds; the accuracy testbed (the control) reports on a set of its own, with its own
recipes and results files."""


def report_set(testbeds: list[str]) -> str:
    """The seed set that ``testbeds`` report on (all of them must share one)."""
    for name, beds in REPORT_SETS.items():
        if set(testbeds) <= set(beds):
            return name
    raise SystemExit("--testbeds: length, sparse and drift report on family-1, accuracy on family-2: run them apart")


KEY = ("phase", "testbed", "variant", "lr", "seed")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ---------------------------------------------------------------------------
# One run: a variant of a testbed at a learning rate on a seed
# ---------------------------------------------------------------------------


def warm(testbed: str, seed: int, quick: bool, cache: Path):
    """The seed's warmed-up model, task and split for ``testbed``, from the cache when it is there."""
    key = family_testbeds.warm_up_key(testbed, quick)
    path = cache / f"warm_{recipe_hash(key)}_{seed}.pt"
    if path.exists():
        return family_testbeds.warm_up(testbed, seed, quick, state=torch.load(path, weights_only=True))
    lm, task, split = family_testbeds.warm_up(testbed, seed, quick)
    save_whole(lm.state_dict(), path)
    return lm, task, split


def warm_job(job: tuple) -> dict:
    """Warm up one (testbed, seed) into the cache; its CPU seconds."""
    testbed, seed, quick, cache = job
    torch.set_num_threads(1)
    start = _cpu()
    warm(testbed, seed, quick, Path(cache))
    return {"testbed": testbed, "seed": seed, "cpu_seconds": round(_cpu() - start, 1)}


def run_job(job: tuple) -> dict:
    """One run; its record (plain data: the pool pickles it)."""
    phase, testbed, variant, lr, seed, quick, cache, *version = job  # version 2's jobs end with it
    torch.set_num_threads(1)  # a 100k-parameter model runs fastest on one thread
    start = _cpu()
    lm, task, split = warm(testbed, seed, quick, Path(cache))
    eval_on = "val" if phase == "tune" else "heldout"
    record = family_testbeds.run(testbed, variant, lr, seed, lm, task, split, eval_on, quick)
    record = {
        "phase": phase,
        "testbed": testbed,
        "variant": variant,
        "lr": lr,
        "seed": seed,
        "recipe_hash": recipe_hash(family_testbeds.recipe(testbed, variant, lr, quick)),
        **record,
        "cpu_seconds": round(_cpu() - start, 1),
    }
    if version and version[0] >= 2:  # version 1's runs carry no key (_protocol.runs_version reads them as 1)
        record["protocol"] = version[0]
    print(
        f"  done: {phase} {testbed} {variant} lr={lr:g} seed {seed}: {record['score']:.3f} "
        f"(from {record['start']:.3f}; {record['cpu_seconds']:.0f} CPU s)",
        flush=True,
    )
    return record


def _pool(fn, jobs: list[tuple], n_jobs: int):
    """``fn`` over ``jobs``, ``n_jobs`` processes at a time (a fresh process per job), results as they finish."""
    if n_jobs == 1 or len(jobs) <= 1:
        yield from map(fn, jobs)
        return
    with mp.get_context("fork").Pool(n_jobs, maxtasksperchild=1) as pool:
        yield from pool.imap_unordered(fn, jobs, chunksize=1)


def run_all(jobs: list[tuple], n_jobs: int, out: Path, cache: Path, quick: bool) -> None:
    """Warm up what the jobs need, then run them, appending each record to ``out`` as it finishes."""
    warm_ups = sorted({(family_testbeds.warm_up_key(job[1], quick)["chapter"], job[1], job[4]) for job in jobs})
    needed = {}
    for chapter, testbed, seed in warm_ups:
        needed.setdefault((chapter, seed), testbed)  # one testbed per shared warm-up
    todo = [(testbed, seed, quick, str(cache)) for (_, seed), testbed in sorted(needed.items())]
    for done in _pool(warm_job, todo, n_jobs):
        print(f"  warm-up: {done['testbed']} seed {done['seed']}: {done['cpu_seconds']:.0f} CPU s", flush=True)
    slow_first = sorted(jobs, key=lambda job: (job[1] not in ("drift", "length"), job[2] != "PPO"))
    for record in _pool(run_job, slow_first, n_jobs):
        _protocol.append_run(out, record)


def pending(jobs: list[tuple], out: Path) -> list[tuple]:
    """The jobs not yet in ``out``."""
    done = {_protocol.run_key(r, KEY) for r in _protocol.load_runs(out)}
    return [job for job in jobs if tuple(job[:5]) not in done]


# ---------------------------------------------------------------------------
# The stages
# ---------------------------------------------------------------------------


def lr_grid(testbed: str, quick: bool) -> tuple[float, ...]:
    return TESTBEDS[testbed].lr_grid[:2] if quick else TESTBEDS[testbed].lr_grid


def tune(args, files) -> None:
    jobs = [
        ("tune", bed, name, lr, seed, args.quick, str(files["cache"]))
        for bed in args.testbeds
        for name in TESTBEDS[bed].variants
        for lr in lr_grid(bed, args.quick)
        for seed in args.tune_seeds
    ]
    todo = pending(jobs, files["tune"])
    print(f"tuning: {len(jobs)} runs, {len(todo)} to do, {args.jobs} at a time", flush=True)
    run_all(todo, args.jobs, files["tune"], files["cache"], args.quick)
    print_tuning(files["tune"], args)


def tuning_scores(path: Path, args) -> dict:
    """(testbed, variant) -> lr -> the validation scores of the tuning seeds."""
    scores: dict = {}
    for r in _protocol.load_runs(path):
        if r["testbed"] in args.testbeds and r["seed"] in args.tune_seeds:
            scores.setdefault((r["testbed"], r["variant"]), {}).setdefault(r["lr"], []).append(r["score"])
    return scores


def print_tuning(path: Path, args) -> None:
    scores = tuning_scores(path, args)
    version = _protocol.runs_version(_protocol.load_runs(path))
    print(
        f"validation accuracy at the end, tuning seeds {list(args.tune_seeds)} (protocol v{version}): "
        "mean (worst seed); * the pick"
    )
    for bed in args.testbeds:
        grid = lr_grid(bed, args.quick)
        for name in TESTBEDS[bed].variants:
            cells = _protocol.tuning_cells(scores.get((bed, name), {}), grid, len(args.tune_seeds))
            print(f"  {bed:<9} {name:<21} {cells}")


def freeze(args, files) -> None:
    scores = tuning_scores(files["tune"], args)
    recipes = {}
    for bed in args.testbeds:
        for name in TESTBEDS[bed].variants:
            by_lr = scores.get((bed, name), {})
            grid = lr_grid(bed, args.quick)
            if len(by_lr) != len(grid) or any(len(v) != len(args.tune_seeds) for v in by_lr.values()):
                raise SystemExit(f"{bed} / {name} has not finished its tuning runs: --tune first")
            recipes[f"{bed}/{name}"] = family_testbeds.recipe(bed, name, _protocol.pick_setting(by_lr), args.quick)
    hashes = _protocol.freeze(files["recipes"], recipes)
    print_tuning(files["tune"], args)
    print(f"froze {len(hashes)} recipes in {files['recipes']}")


ESTIMATOR_SIZES = (2, 4, 8, 16)
ESTIMATOR_BATCHES = 20000


def estimator_table(args, files, fresh: bool = False) -> dict:
    """The estimator testbed: computed once and kept (it is deterministic and seeded), unless ``fresh``."""
    path = files["estimators"]
    if path.exists() and not fresh:
        return json.loads(path.read_text())
    start = _cpu()
    sizes, batches = ((2, 8), 400) if args.quick else (ESTIMATOR_SIZES, ESTIMATOR_BATCHES)
    table = group_estimators.estimator_testbed(group_sizes=sizes, num_batches=batches)
    table["cpu_seconds"] = round(_cpu() - start, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table) + "\n")
    return table


def estimators_report(args, files) -> None:
    """``--testbeds estimators``: the estimator testbed alone (exact and Monte Carlo, nothing trained, no seed set
    spent), its tables, the claims it settles, and the trained testbeds' claims listed as not yet measured."""
    torch.set_num_threads(1)  # [N, 64] tensors: a second thread only waits
    start = time.perf_counter()
    table = estimator_table(args, files, fresh=True)
    judged = family_claims.judge(table, [])  # no trained run: only the estimator testbed's claims are judged
    print(family_results.format_estimator_table(table))
    print()
    print(family_results.format_prompt_weights(table, family_claims.ESTIMATOR_G))
    print()
    print(family_claims.format_claims(judged))
    print(family_claims.format_pending(judged))
    seconds = time.perf_counter() - start
    print(f"\nCPU seconds: {table['cpu_seconds']:.0f} ({seconds:.0f} s of wall time)")
    if args.save is not None:
        results = {"estimators": table, "claims": claims_data(judged)}
        _results.write_results(args.save / ESTIMATORS_FILE, "grpo_family.py", seconds, results)
    counts = {v: sum(row["verdict"] == v for row in judged) for v in ("held", "not seen", "contradicted")}
    print(
        f"family estimators: claims={len(judged)} held={counts['held']} not_seen={counts['not seen']} "
        f"contradicted={counts['contradicted']} estimators={len(group_estimators.ESTIMATORS)} "
        f"batches={table['num_batches']} not_measured={len(family_claims.CLAIMS) - len(judged)}"
    )


def report(args, files) -> None:
    frozen = _protocol.load_frozen(files["recipes"])
    seeds = (0, 1) if args.quick else tuple(_protocol.seed_set(args.report_set))
    if not args.quick:
        _protocol.spend(args.report_set, "benchmarks/grpo_family.py", {k: v["hash"] for k, v in frozen.items()})
    jobs = [
        ("report", entry["recipe"]["testbed"], entry["recipe"]["variant"], entry["recipe"]["rl"]["lr"], seed)
        + (args.quick, str(files["cache"]))
        for entry in frozen.values()
        for seed in seeds
        if entry["recipe"]["testbed"] in args.testbeds
    ]
    todo = pending(jobs, files["report"])
    print(
        f"report on {'quick seeds' if args.quick else args.report_set} {list(seeds)}: {len(jobs)} runs, {len(todo)} to do"
    )
    start = time.perf_counter()
    run_all(todo, args.jobs, files["report"], files["cache"], args.quick)
    table = estimator_table(args, files)
    runs = [
        r
        for r in _protocol.load_runs(files["report"])
        if r["seed"] in seeds and r["recipe_hash"] == frozen.get(f"{r['testbed']}/{r['variant']}", {}).get("hash")
    ]
    print()
    print(family_results.format_estimator_table(table))
    recipes = {key: {"hash": entry["hash"], "lr": entry["recipe"]["rl"]["lr"]} for key, entry in frozen.items()}
    for bed in TRAINED:
        if bed in args.testbeds:
            print()
            print(family_results.format_testbed(bed, runs, recipes))
            if bed == "accuracy":
                print("  " + family_results.resolved(family_results.testbed_rows(bed, runs)))
    judged = family_claims.judge(table, runs)
    print()
    print(family_claims.format_claims(judged))
    print_matched(judged, recipes, _protocol.load_runs(files["tune"]))
    print_totals(runs, table)
    if args.save is not None:
        save(args, files, frozen, table, runs, judged, seeds, time.perf_counter() - start)
    counts = {v: sum(row["verdict"] == v for row in judged) for v in ("held", "not seen", "contradicted")}
    variants = {r["variant"] for r in runs} | set(TESTBEDS["estimators"].variants)  # the variants measured
    trained_seeds = min((len({r["seed"] for r in runs if r["testbed"] == bed}) for bed in args.testbeds), default=0)
    print(
        f"family: claims={len(judged)} held={counts['held']} not_seen={counts['not seen']} "
        f"contradicted={counts['contradicted']} variants={len(variants)} seeds={trained_seeds}"
    )


# ---------------------------------------------------------------------------
# What the report prints and saves
# ---------------------------------------------------------------------------


def print_matched(judged: list[dict], recipes: dict, tuning: list[dict]) -> None:
    """PROTOCOL.md, rule 7: each claim whose variant and baseline were frozen at different rates, read again at
    every rate both were tuned at (the tuning runs, paired by tuning seed)."""
    testbeds = family_caveats.recipes_testbeds(recipes)
    mixed = [
        row["claim"]
        for row in judged
        if row["claim"].testbed in testbeds
        and recipes[f"{row['claim'].testbed}/{row['claim'].variant}"]["lr"]
        != recipes[f"{row['claim'].testbed}/{row['claim'].baseline}"]["lr"]
    ]
    if mixed:
        print()
        print(family_caveats.format_matched(mixed, judged, recipes, tuning))


def print_totals(runs: list[dict], table: dict) -> None:
    """CPU seconds per testbed and in all (each run's own process; the warm-ups are printed as they run)."""
    totals = family_results.cpu_seconds(runs, table.get("cpu_seconds", 0.0))
    print()
    print(f"CPU seconds (user + system of each run's process): estimators {totals['estimators']['cpu']:.0f}")
    for bed in TRAINED:
        if bed in totals:
            t = totals[bed]
            print(f"  {bed:<9} {t['runs']} runs, {t['cpu']:.0f} CPU s ({t['per_run']:.1f} a run)")
    print(f"  in all {totals['all']['cpu']:.0f} CPU s = {totals['all']['cpu'] / 60:.1f} core-minutes")


ESTIMATORS_FILE = "grpo_family_estimators_11.json"
"""What ``--testbeds estimators --save DIR`` writes: the estimator testbed and the claims it settles."""


def claims_data(judged: list[dict]) -> list[dict]:
    """The judged claims as plain data (``family_claims.judge``'s rows)."""
    return [
        {
            **{k: getattr(row["claim"], k) for k in ("variant", "testbed", "claim", "metric", "key", "sign")},
            **{k: getattr(row["claim"], k) for k in ("baseline", "target", "tolerance")},
            "mean": row["effect"].mean,
            "half_width": row["effect"].half_width,
            "n": row["effect"].n,
            "verdict": row["verdict"],
        }
        for row in judged
    ]


TUNING_FINAL = ("length_wrong", "truncated", "entropy")
"""The claims' ``final.*`` numbers each tuning record keeps, for the same differences at matched learning rates
(``family_caveats``; PROTOCOL.md, rule 7)."""


def save(args, files, frozen, table, runs, judged, seeds, seconds) -> None:
    """``grpo_family_11.json``: the estimator testbed, every report run, the claims and verdicts, the tuning runs."""
    claims = claims_data(judged)
    tuning = [{**{k: r[k] for k in ("testbed", "variant", "lr", "seed", "score", "cpu_seconds")},
               "final": {k: v for k, v in r["final"].items() if k in TUNING_FINAL}}
              for r in _protocol.load_runs(files["tune"])]  # fmt: skip
    results = {
        "seed_set": args.report_set,
        "seeds": list(seeds),
        "tune_seeds": list(args.tune_seeds),
        "recipes": {key: {"hash": entry["hash"], "lr": entry["recipe"]["rl"]["lr"]} for key, entry in frozen.items()},
        "cpu_seconds": family_results.cpu_seconds(runs, table.get("cpu_seconds", 0.0)),
        "estimators": table,
        "runs": runs,
        "claims": claims,
        "tuning": tuning,
    }
    name = "grpo_family_11.json" if args.report_set == "family-1" else "grpo_family_accuracy_11.json"
    _results.write_results(args.save / name, "grpo_family.py", seconds, results, seeds=len(seeds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    stage = parser.add_mutually_exclusive_group()
    stage.add_argument("--tune", action="store_true", help="the tuning grid on the validation split")
    stage.add_argument("--freeze", action="store_true", help="pick each learning rate from the tuning runs, freeze")
    parser.add_argument("--quick", action="store_true", help="every stage, tiny runs, one process, into a temp dir")
    parser.add_argument(
        "--testbeds",
        nargs="+",
        choices=("estimators", *TRAINED),
        default=None,
        help="default: length, sparse and drift (seed set family-1; the report adds the estimator testbed); "
        "'accuracy' alone: that testbed, on family-2; 'estimators' alone: that testbed only, exact and Monte "
        "Carlo, in about a minute of CPU, nothing trained; --quick: every testbed",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes at a time, one thread each")
    parser.add_argument("--save", type=Path, default=None, help="folder for grpo_family_11.json (the notebook's)")
    parser.add_argument(
        "--protocol",
        dest="version",
        type=int,
        choices=(1, 2),
        default=1,
        help="2: the length and drift testbeds under protocol v2 (benchmarks/_family_v2.py): tuning seeds 0-3, "
        "floors, the edge rule, Dr.GRPO-divisor, matched-rate report runs, on family-3 (family_v2_* files)",
    )
    args = parser.parse_args()
    if args.version >= 2:
        main_v2(args)
        return
    args.tune_seeds = TUNE_SEEDS
    if args.testbeds is None:
        args.testbeds = list(TRAINED) if args.quick else list(REPORT_SETS["family-1"])
    results = Path(tempfile.mkdtemp(prefix="family-quick-")) if args.quick else _protocol.RESULTS
    trained = [bed for bed in args.testbeds if bed in TRAINED]
    args.report_set = "family-1" if args.quick or not trained else report_set(trained)
    apart = "" if args.report_set == "family-1" else "_accuracy"  # each seed set's recipes and results apart
    files = {
        "tune": results / "family_tune.jsonl",
        "recipes": results / f"family{apart}_recipes.json",
        "report": results / f"family{apart}_report.jsonl",
        "estimators": results / "family_estimators.json",
        "cache": results / "cache" if args.quick else Path("_build") / "family-warm",
    }
    if args.testbeds == ["estimators"]:  # the estimator testbed alone: no tuning, no seed set
        if args.tune or args.freeze:
            parser.error("--testbeds estimators: nothing to tune or freeze (nothing is trained)")
        estimators_report(args, files)
        return
    args.testbeds = [bed for bed in args.testbeds if bed in TRAINED]
    if args.quick:  # the whole pipeline, end to end, in a temporary folder, in this process
        args.jobs = 1
        args.tune_seeds = (0,)
        args.save = args.save or results
    _protocol.run_stage(args, files, tune, freeze, report)


def main_v2(args) -> None:
    """``--protocol 2``: the length and drift testbeds (or those of ``--testbeds``) under version 2."""
    args.testbeds = [bed for bed in (args.testbeds or _family_v2.TESTBEDS) if bed in _family_v2.TESTBEDS]
    args.tune_seeds = (0,) if args.quick else _family_v2.TUNE_SEEDS
    results = Path(tempfile.mkdtemp(prefix="family-v2-quick-")) if args.quick else _protocol.RESULTS
    if args.quick:  # every stage, tiny, in a temporary folder, in this process
        args.jobs = 1
        args.save = args.save or results
    tune_v2, freeze_v2, report_v2 = _family_v2.stages(run_all, pending)
    _protocol.run_stage(args, _family_v2.files(results, args.quick), tune_v2, freeze_v2, report_v2)


if __name__ == "__main__":
    main()
