"""Benchmark: how fast the LM RL loop runs, and how much of the core's own matmul rate it reaches.

Every trained result of chapters 08 to 11 is a few hundred runs of the one loop (``course_lib.lm_rl``). This
measures it on one torch thread, the way the benchmarks run it:

- ``grpo`` and ``ppo``: chapter 08's recipes (``course_lib.lectures.capstone``: 64 prompts x G = 8, 4 passes in 2
  minibatches, 2-digit addition, PPO with its value model), from the chapter's warm-up;
- ``scratchpad``: chapter 10's 3-digit scratchpad task (``course_lib.lectures.reasoning_rl``), whose completions
  run to 14 tokens and more.

For each it prints the seconds a round takes and what 300 rounds take at that pace: CPU seconds of the one-thread
process (evaluation switched off), which on a quiet machine are its wall seconds and on a shared one what the loop
costs without the neighbours' share (the wall seconds are printed beside them). Then the floating-point operations
of one round by count (``torch.utils.flop_counter.FlopCounterMode``, the matrix products), the rate that makes, the
core's own matmul rate measured in the same process at the loop's shapes (a block's linear layers over a minibatch
of 256 * 9 tokens: ``@ (64, 192)``, ``@ (64, 64)``, ``@ (64, 256)``, ``@ (256, 64)``, best of five, before and after
the rounds, in CPU seconds too), and the share.

``--accuracy grpo --compare REV`` runs whole chapter 08 runs (300 rounds, the frozen recipe) of both loops on tuning
seeds and prints the paired difference of validation accuracy with its 95% t-interval: a loop whose numbers move
by float rounding must not move the results.

``--compare REV`` runs a git revision's loop (its ``course_lib``, exported with ``git archive`` into a temporary
folder) beside the working tree's, alternating, each a process of its own with one thread, starting from the same
warmed-up weights; the speedup is the median over repeats of the paired ratio old / new. The machine's load hits
both alike, but on a shared machine only ratios taken this way mean much; the absolute seconds say how busy it was.

The last line is ``loop: grpo_s300=… ppo_s300=… gflop_round=… rate=…GF/s peak=…GF/s share=…% speedup=…x``
(GRPO's FLOPs, rate and share; the speedup is GRPO's and PPO's, ``-`` without ``--compare``).

Usage::

    python benchmarks/loop_speed.py                       # 20 rounds of each workload on this tree
    python benchmarks/loop_speed.py --compare main~3      # ... alternating with that revision, 3 repeats
    python benchmarks/loop_speed.py --profile grpo        # where 20 rounds of GRPO go (cProfile)
    python benchmarks/loop_speed.py --compare main~3 --full-passes   # this tree without its shortcuts (protocol v2)
    python benchmarks/loop_speed.py --accuracy grpo --compare main~3 --seeds 0,1,2,3   # the paired accuracy check
    python benchmarks/loop_speed.py --quick               # a few small rounds: the pipeline in seconds
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ("grpo", "ppo", "scratchpad")
PEAK_SHAPES = ((64, 192), (64, 64), (64, 256), (256, 64))
"""The ``(in, out)`` sizes of a TinyLM block's linear layers (d_model 64): attention's qkv and proj, the MLP."""


# ---------------------------------------------------------------------------
# In the worker: one workload on whichever course_lib is first on the path
# ---------------------------------------------------------------------------


def matmul_peak(rows: int, repeats: int = 5) -> float:
    """The core's fp32 matmul rate in GFLOP/s at a block's linear shapes with ``rows`` tokens, best of ``repeats``
    (CPU seconds of this one-thread process, as the loop is timed)."""
    import torch

    flops, seconds = 0.0, 0.0
    for k, n in PEAK_SHAPES:
        a, w = torch.randn(rows, k), torch.randn(k, n)
        best = float("inf")
        for _ in range(repeats):
            start = time.process_time()
            for _ in range(20):
                torch.mm(a, w)
            best = min(best, (time.process_time() - start) / 20)
        flops += 2 * rows * k * n
        seconds += best
    return flops / seconds / 1e9


def _setting(workload: str, quick: bool, cache: Path):
    """The workload's warmed-up model, task, split and config; the warm-up is cached in ``cache`` (shared by the
    revisions compared, so both start from the same weights)."""
    import dataclasses

    import torch

    if workload == "scratchpad":
        from course_lib.lectures import reasoning

        cfg = reasoning.ReasoningConfig(sft_steps=300)
        if quick:  # 2-digit addition: 10,000 pairs to shuffle and encode, not the 3-digit task's million
            cfg = dataclasses.replace(cfg, n_digits=2, n_demos=200, sft_steps=20)
        make = lambda steps: reasoning.warm_up_reasoning(dataclasses.replace(cfg, sft_steps=steps), seed=0)  # noqa: E731
    else:
        from course_lib.lectures import capstone

        cfg = capstone.CapstoneConfig()
        if quick:
            cfg = dataclasses.replace(cfg, sft_steps=10, sft_target=None)
        make = lambda steps: capstone.warm_up(dataclasses.replace(cfg, sft_steps=steps), seed=0)  # noqa: E731
    path = cache / f"warm_{'scratchpad' if workload == 'scratchpad' else 'addition'}_{int(quick)}.pt"
    if path.exists():
        lm, task, split, _ = make(0)
        lm.load_state_dict(torch.load(path, weights_only=True))
    else:
        lm, task, split, _ = make(cfg.sft_steps)
        torch.save(lm.state_dict(), path)
    return lm, task, split, cfg


def _run(workload: str, lm, task, split, cfg, rounds: int, quick: bool) -> dict:
    """``rounds`` rounds of the workload's loop, evaluation switched off; the loop's history."""
    import dataclasses

    from course_lib.lectures import capstone, reasoning_rl

    small = {"prompts_per_step": 8, "group_size": 4} if quick else {}
    rl = dataclasses.replace(cfg.rl, iterations=rounds, **small)
    cfg = dataclasses.replace(cfg, rl=rl, eval_every=10**9)
    if workload == "scratchpad":
        reasoning_rl.greedy_accuracy = lambda *args: (0.0, {})  # evaluation is not the loop's time
        return reasoning_rl.run(lm, task, split, cfg, seed=0)
    capstone.accuracy = lambda *args: 0.0
    return capstone.run(lm, task, split, cfg, algo=workload, seed=0)


def accuracy_worker(job: dict) -> dict:
    """One whole chapter 08 run (300 rounds, the frozen recipe of ``job["algo"]``) on tuning seed ``job["seed"]``:
    validation accuracy at the end and the loop's seconds."""
    import dataclasses

    import torch

    from course_lib.lectures import capstone

    torch.set_num_threads(1)
    cfg = capstone.CapstoneConfig()
    path = Path(job["cache"]) / f"warm_accuracy_{job['seed']}.pt"
    if path.exists():  # the warm-up reads distinct prompts only: the same in every revision, run once
        lm, task, split, _ = capstone.warm_up(dataclasses.replace(cfg, sft_steps=0), job["seed"])
        lm.load_state_dict(torch.load(path, weights_only=True))
    else:
        lm, task, split, _ = capstone.warm_up(cfg, job["seed"])
        torch.save(lm.state_dict(), path)
    if job.get("warm_only"):
        return {}
    lr = {"grpo": 0.003, "ppo": 0.002}[job["algo"]]  # the ladder's frozen rates (rungs 0 and 6)
    cfg = dataclasses.replace(cfg, rl=dataclasses.replace(cfg.rl, iterations=job["rounds"]))
    history = capstone.run(lm, task, split, cfg, algo=job["algo"], seed=job["seed"], eval_on="val", lr=lr)
    return {"score": history["eval"]["score"][-1], "seconds": history["seconds"][-1]}


def worker(job: dict) -> dict:
    """Time ``job["rounds"]`` rounds of ``job["workload"]`` on one thread (and count one round's FLOPs)."""
    import copy

    import torch

    if "seed" in job:
        return accuracy_worker(job)
    if job.get("full_passes"):  # protocol v2's loop (PROTOCOL.md, rule 10): every pass in full
        from course_lib.tiny_lm import TinyLM

        TinyLM.fast_paths = False
    torch.set_num_threads(1)
    lm, task, split, cfg = _setting(job["workload"], job["quick"], Path(job["cache"]))
    rows = 256 * 9  # a chapter 08 minibatch: 256 sequences of 6 prompt + 3 fed completion tokens
    peak_before = matmul_peak(rows)
    cpu_start = time.process_time()
    history = _run(job["workload"], copy.deepcopy(lm), task, split, cfg, job["rounds"], job["quick"])
    cpu = time.process_time() - cpu_start
    peak_after = matmul_peak(rows)
    result = {
        "wall_per_round": history["seconds"][-1] / len(history["seconds"]),
        "seconds_per_round": cpu / len(history["seconds"]),
        "peak": max(peak_before, peak_after),
    }
    if job["count_flops"]:
        from torch.utils.flop_counter import FlopCounterMode

        counter = FlopCounterMode(display=False)
        with counter:
            _run(job["workload"], copy.deepcopy(lm), task, split, cfg, 1, job["quick"])
        result["gflop_round"] = counter.get_total_flops() / 1e9
    return result


# ---------------------------------------------------------------------------
# In the parent: start the workers, alternate the revisions, print
# ---------------------------------------------------------------------------


def export(rev: str) -> Path:
    """``course_lib`` as it was at ``rev``, in a temporary folder (``git archive``); ``rev`` may also be a folder
    that holds a ``course_lib`` (another checkout), used as it is."""
    if (Path(rev) / "course_lib").is_dir():
        return Path(rev).resolve()
    folder = Path(tempfile.mkdtemp(prefix="loop-speed-"))
    archive = subprocess.run(["git", "archive", rev, "course_lib"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


def start_worker(tree: Path, job: dict) -> dict:
    """Run :func:`worker` in a fresh process whose ``course_lib`` is ``tree``'s; its result."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(job)], env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"worker {job} on {tree} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def paired_accuracy(compare: str, algo: str, seeds: list[int], jobs: int, rounds: int, cache: Path | None) -> None:
    """Runs of ``rounds`` rounds of ``algo`` on tuning ``seeds``, this tree's loop and ``compare``'s, ``jobs`` at a
    time; the validation accuracy of each and the paired difference (new - old) with its 95% t-interval.

    Each run's result is printed when it ends and kept a line in ``cache`` (``accuracy_<algo>_<rounds>.jsonl``,
    with the two trees' commits): a call with the same ``--warm-cache`` skips the runs it holds, so a check that
    takes hours can be stopped and resumed."""
    from concurrent.futures import ThreadPoolExecutor

    from course_lib.lectures.protocol import paired_difference

    trees = {"new": ROOT, "old": export(compare)}
    commits = {"new": _commit("HEAD") + ("+" if _dirty() else ""), "old": _commit(compare)}
    cache = cache or Path(tempfile.mkdtemp(prefix="loop-speed-warm-"))
    ledger = cache / f"accuracy_{algo}_{rounds}.jsonl"
    results = _ledger_results(ledger, commits)
    runs = [(name, seed) for seed in seeds for name in trees if (name, seed) not in results]

    def job(run):
        result = start_worker(trees[run[0]], {"algo": algo, "seed": run[1], "cache": str(cache), "rounds": rounds})
        line = {"tree": run[0], "commit": commits[run[0]], "seed": run[1], **result}
        with ledger.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")
        print(f"  {run[0]} seed {run[1]}: {result['score']:.3f} ({result['seconds']:.0f} s)", flush=True)
        return result

    warm = lambda seed: start_worker(ROOT, {"algo": algo, "seed": seed, "cache": str(cache), "warm_only": True})  # noqa: E731
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(warm, seeds))  # the warm-ups first, one per seed, shared by both trees
        results.update(zip(runs, pool.map(job, runs)))
    for seed in seeds:
        new, old = results[("new", seed)], results[("old", seed)]
        print(
            f"  seed {seed}: old {old['score']:.3f} ({old['seconds']:.0f} s)  new {new['score']:.3f} ({new['seconds']:.0f} s)"
        )
    scores = {name: {seed: results[(name, seed)]["score"] for seed in seeds} for name in trees}
    difference = paired_difference(scores["old"], scores["new"])
    print(f"accuracy: {algo} {rounds} rounds, new - old on tuning seeds {seeds}: {difference}")


def _commit(rev: str) -> str:
    """The commit ``rev`` names (a folder given as ``--compare``: its path)."""
    if Path(rev).is_dir():
        return str(Path(rev).resolve())
    return subprocess.run(
        ["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def _dirty() -> bool:
    """Whether course_lib has changes not committed (the new tree's results then name no commit of their own)."""
    status = subprocess.run(["git", "status", "--porcelain", "course_lib"], cwd=ROOT, capture_output=True, text=True)
    return bool(status.stdout.strip())


def _ledger_results(ledger: Path, commits: dict) -> dict:
    """The runs ``ledger`` holds for these two trees: ``(tree, seed) -> result``."""
    if not ledger.exists():
        return {}
    kept = {}
    for line in ledger.read_text(encoding="utf-8").splitlines():
        run = json.loads(line)
        if commits.get(run["tree"]) == run["commit"]:
            kept[(run["tree"], run["seed"])] = {"score": run["score"], "seconds": run["seconds"]}
    return kept


def profile(workload: str, rounds: int) -> None:
    """cProfile of ``rounds`` rounds on this tree, the functions that take the most time."""
    import cProfile
    import pstats

    import torch

    torch.set_num_threads(1)
    lm, task, split, cfg = _setting(workload, False, Path(tempfile.mkdtemp(prefix="loop-speed-")))
    profiler = cProfile.Profile(time.process_time)  # CPU seconds: the neighbours' share left out
    profiler.enable()
    history = _run(workload, lm, task, split, cfg, rounds, False)
    profiler.disable()
    print(f"{workload}: {rounds} rounds in {history['seconds'][-1]:.2f} s wall (the loop's clock); CPU seconds below")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(r"course_lib|torch\._C|built-in", 30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--compare",
        metavar="REV",
        help="a git revision (or a folder holding a course_lib) whose loop runs beside this tree's",
    )
    parser.add_argument("--rounds", type=int, default=20, help="rounds timed per run (GRPO and PPO; default 20)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating repeats with --compare (default 3)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated subset of " + str(WORKLOADS))
    parser.add_argument("--profile", choices=WORKLOADS, help="profile this workload's rounds instead")
    parser.add_argument("--quick", action="store_true", help="2 small rounds of each workload, no repeats")
    parser.add_argument("--accuracy", choices=("grpo", "ppo"), help="with --compare: whole runs, paired accuracy")
    parser.add_argument("--seeds", default="0,1,2,3", help="tuning seeds of --accuracy (default 0,1,2,3)")
    parser.add_argument("--accuracy-rounds", type=int, default=300, help="rounds of each --accuracy run (300)")
    parser.add_argument("--warm-cache", type=Path, help="a folder that keeps --accuracy's warm-ups between calls")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time for --accuracy (default 2)")
    parser.add_argument(
        "--full-passes",
        action="store_true",
        help="this tree's loop without its shortcuts (TinyLM.fast_paths = False), as protocol v2's runs take it",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    if args.profile:
        profile(args.profile, args.rounds)
        return
    if args.accuracy:
        if not args.compare:
            raise SystemExit("--accuracy: compares two loops; name the other with --compare REV")
        seeds = [int(x) for x in args.seeds.split(",")]
        paired_accuracy(args.compare, args.accuracy, seeds, args.jobs, args.accuracy_rounds, args.warm_cache)
        return
    workloads = [w for w in args.workloads.split(",") if w]
    if not set(workloads) <= set(WORKLOADS):
        raise SystemExit(f"--workloads: expected names among {WORKLOADS}, got {workloads}")
    rounds = 2 if args.quick else args.rounds
    repeats = 1 if args.quick else args.repeats
    cache = Path(tempfile.mkdtemp(prefix="loop-speed-warm-"))
    trees = {"new": ROOT}
    if args.compare:
        trees["old"] = export(args.compare)
    results: dict = {w: {name: [] for name in trees} for w in workloads}
    flops: dict = {}
    for repeat in range(repeats):
        for workload in workloads:
            order = list(trees) if repeat % 2 == 0 else list(reversed(trees))  # who goes first alternates
            for name in order:
                job = {"workload": workload, "rounds": rounds, "quick": args.quick, "cache": str(cache)}
                job["count_flops"] = name == "new" and workload not in flops
                job["full_passes"] = name == "new" and args.full_passes
                result = start_worker(trees[name], job)
                flops.setdefault(workload, result.get("gflop_round"))
                results[workload][name].append(result)
                print(
                    f"  {workload:<10} {name}: {result['seconds_per_round']:.3f} CPU s/round"
                    f" ({result['wall_per_round']:.3f} wall)",
                    flush=True,
                )
    report(results, flops, args.compare)


def report(results: dict, flops: dict, compare: str | None) -> None:
    """One line per workload, then the summary line."""
    line = {}
    for workload, by_tree in results.items():
        new = by_tree["new"]
        seconds = statistics.median(r["seconds_per_round"] for r in new)
        peak = statistics.median(r["peak"] for r in new)
        rate = flops[workload] / seconds
        text = (
            f"{workload:<10} {seconds:.3f} s/round  {300 * seconds:.0f} s/300 rounds  {flops[workload]:.2f} GFLOP/round"
            f"  {rate:.1f} GF/s of {peak:.1f} GF/s ({100 * rate / peak:.0f}%)"
        )
        speedup = None
        if compare:
            ratios = [o["seconds_per_round"] / n["seconds_per_round"] for o, n in zip(by_tree["old"], new)]
            speedup = statistics.median(ratios)
            old = statistics.median(r["seconds_per_round"] for r in by_tree["old"])
            text += f"  {compare}: {old:.3f} s/round  speedup {speedup:.2f}x ({', '.join(f'{r:.2f}' for r in ratios)})"
        print(text)
        line[workload] = {"s300": 300 * seconds, "gflop": flops[workload], "rate": rate, "peak": peak, "x": speedup}
    grpo, ppo = line.get("grpo"), line.get("ppo")
    head = grpo or next(iter(line.values()))
    speedups = "/".join("-" if v is None or v["x"] is None else f"{v['x']:.2f}" for v in (grpo, ppo))
    print(
        f"loop: grpo_s300={grpo['s300'] if grpo else float('nan'):.0f} ppo_s300={ppo['s300'] if ppo else float('nan'):.0f}"
        f" gflop_round={head['gflop']:.2f} rate={head['rate']:.1f}GF/s peak={head['peak']:.1f}GF/s"
        f" share={100 * head['rate'] / head['peak']:.0f}% speedup={speedups}x"
    )


if __name__ == "__main__":
    main()
