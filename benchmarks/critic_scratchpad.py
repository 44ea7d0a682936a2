"""Benchmark: does a critic pay when completions are longer? GRPO, rung 5 and PPO on chapter 10's scratchpad task.

Chapter 08's ladder compares GRPO and PPO on 2-digit addition, where a completion is 4 tokens and a value model has
little to predict. Chapter 10's 3-digit task with a scratchpad writes up to 15. This benchmark runs three methods
from chapter 10's warm-up (``reasoning.warm_up_reasoning``), with chapter 10's RL recipe
(``reasoning.ReasoningConfig().rl``: 25 rounds of 64 prompts x 8 completions):

- ``GRPO``: chapter 10's recipe as it is;
- ``rung 5``: chapter 08's changes from GRPO to PPO, all but the critic (token mean, KL in the reward, the
  symmetric clip, whitened advantages): the ladder's rung 5;
- ``PPO``: rung 5 with the advantage from a value model's GAE (``algo="ppo"``): the ladder's top.

So PPO - rung 5 is the critic's own effect, and rung 5 - GRPO everything else. Chapter 08's 20-round lr warm-up is
left out of both: chapter 10's recipe already warms up for 5 of its 25 rounds (``warmup_iterations=5``).

Under protocol version 2 (``benchmarks/PROTOCOL.md``), in three stages:

1. ``--tune``: each method at each rate of ``LR_GRID`` (chapter 10's 1e-3, one below, one above) on tuning seeds
   0 to 3, scored by greedy exact match on the validation split; a pick at the grid's edge extends it one step,
   at most twice (``_protocol.pick_with_edge_rule``); every run goes to ``results/critic_v2_tune.jsonl``;
2. ``--freeze``: each method's rate by ``_protocol.pick_setting_v2`` with the floor 0.85 (PROTOCOL.md, rule 2's
   table), written with its hash to ``results/critic_v2_recipes.json``;
3. the report (no flag): the frozen recipes on seed set ``critic-1`` (24 seeds, each method on all of them), test
   accuracy, appended to ``results/critic_v2_report.jsonl``; the three paired differences read with Holm's
   correction, each beside the same difference at every rate both were tuned at, and the last line
   ``critic: seeds=S grpo_mean=X rung5_mean=Y ppo_mean=Z ppo_minus_rung5=+d±h[lo,hi] ppo_minus_grpo=+d±h[lo,hi]``.

Run once (2026-11-27 to 28, one process at a time on a 2-core machine shared with other work): the tuning, 44 runs
without the loop's shortcuts (PROTOCOL.md, rule 10), as ``--freeze`` printed it, validation accuracy, mean (worst
seed) over tuning seeds 0 to 3, ``*`` the pick::

    GRPO     lr 0.0005: 0.962 (0.944)   lr 0.001: 0.964 (0.938)*   lr 0.002: 0.961 (0.942)
    rung 5   lr 0.00025: 0.957 (0.934)  lr 0.0005: 0.967 (0.946)*  lr 0.001: 0.964 (0.938)   lr 0.002: 0.952 (0.936)
    PPO      lr 0.00025: 0.961 (0.934)  lr 0.0005: 0.965 (0.938)*  lr 0.001: 0.964 (0.944)   lr 0.002: 0.953 (0.936)

and the report on ``critic-1`` (72 runs, 4,298 s of wall time for the last 56), as it printed::

    test accuracy (greedy), 24 seeds (protocol v2)
      GRPO    lr=0.001   [ca959812] mean 0.952  worst 0.922  std 0.016
      rung 5  lr=0.0005  [116bae9c] mean 0.946  worst 0.880  std 0.023
      PPO     lr=0.0005  [f95cd85b] mean 0.951  worst 0.918  std 0.018
    3 intervals read together; Holm's correction at family level 0.05:
      rung 5 - GRPO  -0.005 [-0.011, +0.000]  p 0.064  Holm 0.128  unresolved
      PPO - rung 5   +0.005 [+0.001, +0.009]  p 0.030  Holm 0.089  unresolved
      PPO - GRPO     -0.000 [-0.004, +0.003]  p 0.836  Holm 0.836  unresolved
    critic: seeds=24 grpo_mean=0.952 rung5_mean=0.946 ppo_mean=0.951 ppo_minus_rung5=+0.005±0.004[+0.001,+0.009]
    ppo_minus_grpo=-0.000±0.003[-0.004,+0.003]

Chapter 10's section 8 reads it (``course_lib/lectures/critic.py``). Usage::

    python benchmarks/critic_scratchpad.py --tune
    python benchmarks/critic_scratchpad.py --freeze
    python benchmarks/critic_scratchpad.py --save course_lib/lectures/data   # the report, and critic_10.json
    python benchmarks/critic_scratchpad.py --quick     # the whole pipeline, tiny, in a temp dir (no seed set spent)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path

import _protocol  # benchmarks/ is the script's folder, so its sibling modules import directly
import _results
import torch
from _warm_cache import cached_warm_up

from course_lib.lectures import capstone, critic, reasoning, reasoning_rl
from course_lib.lectures.protocol import (
    PROTOCOL_VERSION,
    holm_table,
    matched_lr,
    recipe_hash,
    summary,
)

CHANGES = {key: value for key, value in capstone.PPO_CHANGES.items() if key != "warmup_iterations"}
METHODS = {"GRPO": ("grpo", {}), "rung 5": ("grpo", CHANGES), "PPO": ("ppo", CHANGES)}
"""name -> ``(algo, changes to chapter 10's recipe)``."""
LR_GRID = (5e-4, 1e-3, 2e-3)
TUNE_SEEDS = (0, 1, 2, 3)
FLOOR = 0.85
REPORT_SET = "critic-1"
KEY = ("phase", "method", "lr", "seed")


def base_config(quick: bool) -> reasoning.ReasoningConfig:
    """Chapter 10's scratchpad config; ``quick``: two small rounds of one pass, scored on 20 prompts, on 2-digit
    addition.

    The quick mode proves the pipeline runs, not what it measures: with 3 digits each of its 30 runs spent most of
    its time shuffling and encoding the million pairs of the task's split, 10,000 with 2."""
    cfg = reasoning.ReasoningConfig()
    if quick:
        rl = dataclasses.replace(
            cfg.rl, iterations=2, prompts_per_step=8, group_size=4, warmup_iterations=1, update_epochs=1
        )
        cfg = dataclasses.replace(
            cfg, rl=rl, n_digits=2, n_demos=200, sft_steps=10, n_heldout=20, n_val=20, eval_every=2
        )
    return cfg


def recipe(cfg: reasoning.ReasoningConfig, method: str, lr: float) -> dict:
    """Everything that decides a run but the seed: the task's config and the loop's, as the method sets them."""
    algo, changes = METHODS[method]
    rl = dataclasses.replace(cfg.rl, algo=algo, lr=lr, **changes)
    top = {k: v for k, v in dataclasses.asdict(cfg).items() if k != "rl"}
    return {"method": method, "task": top, "rl": dataclasses.asdict(rl)}


def warm(cfg: reasoning.ReasoningConfig, seed: int, cache: Path):
    """The seed's warmed-up model, task and split, cached on disk (every method starts from it)."""
    return cached_warm_up(reasoning.warm_up_reasoning, cfg, seed, cache)


def run_job(job: tuple) -> dict:
    """One run; returns its record (plain data: the pool pickles it)."""
    phase, method, lr, seed, quick, cache = job
    torch.set_num_threads(1)
    cfg = base_config(quick)
    lm, task, split = warm(cfg, seed, Path(cache))
    eval_on = "val" if phase == "tune" else "heldout"
    algo, changes = METHODS[method]
    cpu = time.process_time()
    history = reasoning_rl.run(lm, task, split, cfg, seed=seed, eval_on=eval_on, algo=algo, lr=lr, **changes)
    record = {
        "protocol": PROTOCOL_VERSION,
        "phase": phase,
        "method": method,
        "lr": lr,
        "seed": seed,
        "score": history["eval"]["score"][-1],
        "sft": history["eval"]["score"][0],
        "mean_length": round(float(history["mean_length"][-1]), 3),
        "seconds": round(history["seconds"][-1], 1),
        "cpu_seconds": round(time.process_time() - cpu, 1),
        "recipe_hash": recipe_hash(recipe(cfg, method, lr)),
    }
    print(f"  done: {phase} {method} lr={lr:g} seed {seed}: {record['score']:.3f} ({record['cpu_seconds']:.0f} CPU s)")
    return record


def run_all(jobs: list[tuple], n_jobs: int, out: Path) -> None:
    """Run ``jobs`` ``n_jobs`` at a time, appending each record to ``out`` as it finishes (PPO's first)."""
    done = {_protocol.run_key(r, KEY) for r in _protocol.load_runs(out)}
    todo = sorted((job for job in jobs if tuple(job[:4]) not in done), key=lambda job: job[1] != "PPO")
    print(f"  {len(jobs)} runs, {len(todo)} to do, {n_jobs} at a time")
    _protocol.run_jobs(run_job, todo, n_jobs, out)


# ---------------------------------------------------------------------------
# The three stages
# ---------------------------------------------------------------------------


def by_seed(path: Path, seeds, phase: str) -> dict[str, dict[float, dict[int, float]]]:
    """method -> lr -> seed -> score, of ``phase``'s runs on ``seeds``."""
    out: dict[str, dict[float, dict[int, float]]] = {}
    for r in _protocol.load_runs(path):
        if r["phase"] == phase and r["seed"] in seeds:
            out.setdefault(r["method"], {}).setdefault(r["lr"], {})[r["seed"]] = r["score"]
    return out


def walks(args, files) -> dict[str, _protocol.EdgePick]:
    """method -> version 2's pick and edge rule over the tuning runs recorded so far."""
    scores = by_seed(files["tune"], args.seeds, "tune")
    min_seeds = len(args.seeds) if args.quick else _protocol.MIN_TUNE_SEEDS
    return {
        method: _protocol.pick_with_edge_rule(
            {lr: [v[s] for s in sorted(v)] for lr, v in scores.get(method, {}).items()},
            args.lrs,
            len(args.seeds),
            FLOOR,
            min_seeds,
        )
        for method in METHODS
    }


def tune(args, files) -> None:
    for _ in range(_protocol.MAX_EDGE_STEPS + 1):
        jobs = [
            ("tune", method, lr, seed, args.quick, files["cache"])
            for method, walk in walks(args, files).items()
            for lr in walk.missing
            for seed in args.seeds
        ]
        if not jobs:
            break
        print(f"tuning (protocol v{PROTOCOL_VERSION}):")
        run_all(jobs, args.jobs, files["tune"])
    print_tuning(args, files)


def print_tuning(args, files) -> None:
    scores = by_seed(files["tune"], args.seeds, "tune")
    print(f"validation accuracy, tuning seeds {list(args.seeds)}: mean (worst seed); * the pick (floor {FLOOR:g})")
    for method, walk in walks(args, files).items():
        rows = {lr: [v[s] for s in sorted(v)] for lr, v in scores.get(method, {}).items()}
        notes = [] if walk.pick is None or walk.cleared else [f"no rate cleared the floor {FLOOR:g}"]
        notes += ["at the grid's edge"] if walk.at_edge else []
        cells = _protocol.tuning_cells(rows, walk.grid, len(args.seeds), pick=walk.pick)
        print(f"  {method:<7} {cells}" + (f"   ({'; '.join(notes)})" if notes else ""))


def freeze(args, files) -> None:
    cfg = base_config(args.quick)
    recipes = {}
    for method, walk in walks(args, files).items():
        if walk.pick is None:
            raise SystemExit(f"{method} has not finished its tuning runs: --tune first")
        recipes[method] = recipe(cfg, method, walk.pick)
    hashes = _protocol.freeze(files["recipes"], recipes)
    print_tuning(args, files)
    print(f"froze {files['recipes']}: " + ", ".join(f"{m} [{h}]" for m, h in hashes.items()))


def report(args, files) -> None:
    frozen = _protocol.load_frozen(files["recipes"])
    seeds = [0, 1] if args.quick else _protocol.seed_set(REPORT_SET)
    if not args.quick:
        _protocol.spend(REPORT_SET, "benchmarks/critic_scratchpad.py", {k: v["hash"] for k, v in frozen.items()})
    jobs = [
        ("report", method, entry["recipe"]["rl"]["lr"], seed, args.quick, files["cache"])
        for method, entry in frozen.items()
        for seed in seeds
    ]
    print(f"report on {'quick seeds' if args.quick else REPORT_SET} {seeds}:")
    start = time.perf_counter()
    run_all(jobs, args.jobs, files["report"])
    scores = {
        m: by_seed(files["report"], seeds, "report").get(m, {}).get(e["recipe"]["rl"]["lr"], {})
        for m, e in frozen.items()
    }
    print_report(args, files, frozen, scores, seeds)
    if args.save is not None:
        runs = [r for r in _protocol.load_runs(files["report"]) if r["seed"] in seeds]
        results = {"protocol": PROTOCOL_VERSION, "seed_set": REPORT_SET, "seeds": seeds, "recipes": frozen}
        results.update({"runs": runs, "tuning": _protocol.load_runs(files["tune"]), "floor": FLOOR})
        _results.write_results(
            args.save / "critic_10.json", "critic_scratchpad.py", time.perf_counter() - start, results
        )


def print_report(args, files, frozen: dict, scores: dict, seeds) -> None:
    print(f"test accuracy (greedy), {len(seeds)} seeds (protocol v{PROTOCOL_VERSION})")
    for method, entry in frozen.items():
        if scores[method]:
            s = summary(list(scores[method].values()))
            lr = entry["recipe"]["rl"]["lr"]
            print(
                f"  {method:<7} lr={lr:<7g} [{entry['hash']}] mean {s.mean:.3f}  worst {s.worst:.3f}  std {s.std:.3f}"
            )
    if any(len(v) < len(seeds) for v in scores.values()):
        return
    pairs = critic.CONTRASTS  # the same three differences chapter 10 reads
    differences = critic.differences(scores)
    print(holm_table(differences))
    tuning = by_seed(files["tune"], args.seeds, "tune")
    print(f"at matched rates (PROTOCOL.md, rule 7): validation accuracy, tuning seeds {list(args.seeds)}")
    for name, (a, b) in pairs.items():
        matched = matched_lr(tuning.get(a, {}), tuning.get(b, {}))
        print(f"  {name:<14} " + ("   ".join(f"lr {lr:g}: {d}" for lr, d in matched.items()) or "no shared rate"))
    means = {m: summary(list(v.values())).mean for m, v in scores.items()}
    own, whole = differences["PPO - rung 5"], differences["PPO - GRPO"]
    print(
        f"critic: seeds={len(seeds)} grpo_mean={means['GRPO']:.3f} rung5_mean={means['rung 5']:.3f} "
        f"ppo_mean={means['PPO']:.3f} ppo_minus_rung5={own}[{own.low:+.3f},{own.high:+.3f}] "
        f"ppo_minus_grpo={whole}[{whole.low:+.3f},{whole.high:+.3f}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    stage = parser.add_mutually_exclusive_group()
    stage.add_argument("--tune", action="store_true", help="the tuning grid on the validation split, and the edge rule")
    stage.add_argument("--freeze", action="store_true", help="pick each method's lr from the tuning runs and freeze it")
    parser.add_argument("--quick", action="store_true", help="2 small rounds, 2 rates, 2 seeds, one process, temp dir")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes at a time, one thread each")
    parser.add_argument("--save", type=Path, default=None, help="folder for critic_10.json (the report's runs)")
    args = parser.parse_args()
    args.lrs = LR_GRID[1:] if args.quick else LR_GRID
    args.seeds = (0, 1) if args.quick else TUNE_SEEDS
    results = Path(tempfile.mkdtemp(prefix="critic-quick-")) if args.quick else _protocol.RESULTS
    files = {
        "tune": results / "critic_v2_tune.jsonl",
        "recipes": results / "critic_v2_recipes.json",
        "report": results / "critic_v2_report.jsonl",
        "cache": str(results / "cache" if args.quick else Path("_build") / "critic-warm"),
    }
    if args.quick:  # the whole pipeline, end to end, in a temporary folder, in this process
        args.jobs = 1
        args.save = args.save or results
    _protocol.run_stage(args, files, tune, freeze, report)


if __name__ == "__main__":
    main()
