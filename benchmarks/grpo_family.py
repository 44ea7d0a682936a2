"""Benchmark: chapter 11's GRPO family on chapter 08's task, each variant from the same warm-up and budget.

Every variant of ``course_lib.lectures.family.MEASURED`` is a few switches of the one LM RL loop
(``family.VARIANTS``) and trains the same tiny LM on 2-digit addition from the same per-seed warm-up
(chapter 08's, stopped at 0.25 validation accuracy; computed once per seed and cached, so variants do
not redo it) with the same sample budget: 12,288 completions (48 rounds x 32 prompts x G = 8; dynamic
sampling draws more per round, so it stops after fewer rounds: ``LMRLConfig.max_completions``). That is
a tenth of chapter 08's 128,000: ten variants x (8 report + 4 tuning) runs at chapter 08's budget would be
some 6 core-hours, and this benchmark had 80 core-minutes on two cores shared with four other agents. Accuracy is greedy exact match on the 500 held-out test prompts.
Every job (a variant, a seed, a learning rate) is a process of a fork pool with one torch thread; it
writes its result to its own file as it ends (``--work``), so a cut-off run loses only the jobs in
flight and a rerun skips what is done. Seconds count training only (evaluations excluded).

**Protocol.** Every variant gets the same tuning budget: its learning rate from {base, 2 x base} (base:
chapter 08's 2e-3, PPO's chapter 05 1e-3), each on tuning seeds 0 and 1, scored by greedy accuracy on the
validation split (500 prompts cut from the training prompts, never trained on); the rate with the higher
mean is kept (the base on a tie). Nothing else was tuned: every other switch is the paper's or GRPO's
recipe (``family.VARIANTS``). The report runs use seeds 100 to 107, which tuning never saw.

**Tuning runs** (``--tune``: validation accuracy at the end of the budget, tuning seeds 0 and 1; 40 runs, 2 jobs,
48 minutes on a machine at load 10 to 17, where the jobs got 5 to 30% of a core each):

    variant              lr = base            lr = 2 x base        chosen
    GRPO                 0.674  0.512 (0.593)  0.294  0.066 (0.180)  2e-3
    PPO (base 1e-3)      0.472  0.488 (0.480)  0.226  0.256 (0.241)  1e-3
    RLOO                 0.626  0.526 (0.576)  0.358  0.180 (0.269)  2e-3
    REINFORCE++          0.614  0.448 (0.531)  0.190  0.058 (0.124)  2e-3   (reported last, below)
    Dr.GRPO              0.612  0.472 (0.542)  0.482  0.234 (0.358)  2e-3   (reported last, below)
    DAPO                 0.114  0.302 (0.208)  0.012  0.058 (0.035)  2e-3
    DAPO-clip-higher     0.710  0.538 (0.624)  0.330  0.082 (0.206)  2e-3
    DAPO-dyn-sampling    0.600  0.476 (0.538)  0.206  0.054 (0.130)  2e-3
    GSPO                 0.648  0.488 (0.568)  0.400  0.076 (0.238)  2e-3
    CISPO                0.334  0.208 (0.271)  0.074  0.016 (0.045)  2e-3
    (warm-up accuracy on the validation split: seed 0 0.348, seed 1 0.284)

Twice the base rate was worse for every variant on both seeds, so every variant runs at its base rate; a lower
rate was not tried (the sweep went one way only), which may matter most for the variants that lost accuracy at
the base rate (DAPO, CISPO).

**The report run** (three processes of 2 jobs each, ``--variants`` split between them, then ``--collect``; the
machine at load 10 to 17; test prompts; per-seed scores, then the table):

    test accuracy, seeds [100, 101, 102, 103, 104, 105, 106, 107], 12288 completions per run
      GRPO                 lr 0.002: 0.744 0.588 0.460 0.346 0.526 0.198 0.406 0.654
      PPO                  lr 0.001: 0.584 0.516 0.416 0.326 0.470 0.210 0.366 0.516
      DAPO                 lr 0.002: 0.166 0.506 0.198 0.104 0.228 0.056 0.288 0.280
      DAPO-clip-higher     lr 0.002: 0.688 0.688 0.524 0.322 0.472 0.228 0.416 0.628
      DAPO-dyn-sampling    lr 0.002: 0.674 0.512 0.306 0.326 0.438 0.126 0.310 0.336
      RLOO                 lr 0.002: 0.682 0.598 0.456 0.346 0.528 0.260 0.428 0.560
      GSPO                 lr 0.002: 0.696 0.640 0.420 0.366 0.494 0.262 0.438 0.542
      CISPO                lr 0.002: 0.206 0.306 0.190 0.242 0.360 0.070 0.216 0.332
    variant                  mean    min    std   to 0.8  s/run length      KL   clip  <0.8
    DAPO-clip-higher        0.496  0.228  0.169    never    138   3.51  0.3505  0.193   8/8
    GRPO                    0.490  0.198  0.176    never    142   3.50  0.3332  0.206   8/8
    RLOO                    0.482  0.260  0.138    never    147   3.50  0.3113  0.216   8/8
    GSPO                    0.482  0.262  0.142    never    147   3.50  0.2457  0.684   8/8
    PPO                     0.425  0.210  0.122    never    108   3.52  0.3207  0.119   8/8
    DAPO-dyn-sampling       0.379  0.126  0.163    never     89   3.48  0.3448  0.214   8/8
    CISPO                   0.240  0.070  0.093    never    135   3.51  0.5315  0.181   8/8
    DAPO                    0.228  0.056  0.138    never     96   3.51  0.7750  0.197   8/8
    seconds=1
    family: variants=8 seeds=8 best=DAPO-clip-higher worst=DAPO

Wall time: the three report processes ran 28, 32 and 22 minutes (2 jobs each: 163 wall-core-minutes at load
10 to 17), and the jobs' own CPU time was 14.7 core-minutes for the 64 runs (about 14 s each, evaluations
included); the tuning ran 48 minutes x 2 jobs. ``s/run`` is each run's wall-clock training time on that loaded
machine, not its CPU time.

Dr. GRPO's and REINFORCE++'s 16 report runs came last (``--variants Dr.GRPO REINFORCE++ --jobs 1`` on quiet cores,
178 s in all, about 10 s a run), then ``--collect`` over all ten:

      Dr.GRPO              lr 0.002: 0.746 0.666 0.374 0.332 0.476 0.286 0.414 0.634
      REINFORCE++          lr 0.002: 0.634 0.690 0.444 0.336 0.454 0.262 0.386 0.468
    variant                  mean    min    std   to 0.8  s/run length      KL   clip  <0.8
    DAPO-clip-higher        0.496  0.228  0.169    never    138   3.51  0.3505  0.193   8/8
    Dr.GRPO                 0.491  0.286  0.170    never     10   3.50  0.2874  0.215   8/8
    GRPO                    0.490  0.198  0.176    never    142   3.50  0.3332  0.206   8/8
    RLOO                    0.482  0.260  0.138    never    147   3.50  0.3113  0.216   8/8
    GSPO                    0.482  0.262  0.142    never    147   3.50  0.2457  0.684   8/8
    REINFORCE++             0.459  0.262  0.143    never     10   3.51  0.3649  0.207   8/8
    PPO                     0.425  0.210  0.122    never    108   3.52  0.3207  0.119   8/8
    DAPO-dyn-sampling       0.379  0.126  0.163    never     89   3.48  0.3448  0.214   8/8
    CISPO                   0.240  0.070  0.093    never    135   3.51  0.5315  0.181   8/8
    DAPO                    0.228  0.056  0.138    never     96   3.51  0.7750  0.197   8/8
    family: variants=10 seeds=8 best=DAPO-clip-higher worst=DAPO

On quiet cores a run takes about 10 s, so the whole report (80 runs) is about 7 minutes on 2 cores and the tuning
(40 runs) about 4; chapter 08's full budget (10x the completions) would take about 70 minutes for the report.

Usage::

    python benchmarks/grpo_family.py --tune --seeds 0 1          # the tuning runs (validation split)
    python benchmarks/grpo_family.py --save course_lib/lectures/data   # seeds 100-107, writes grpo_family_11.pt
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import time
from pathlib import Path

import torch

from course_lib.lectures import family

REPORT_SEEDS = list(range(100, 108))
TUNE_SEEDS = [0, 1]


def _save(obj, path: Path) -> None:
    """torch.save through a temporary file, so a cut-off never leaves half a result."""
    tmp = path.with_suffix(".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def warm_job(seed: int, work: Path) -> bytes:
    """Warm up ``seed`` once and cache its state_dict (every variant of the seed starts from it)."""
    torch.set_num_threads(1)
    path = work / f"warm_{seed}.pt"
    if not path.exists():
        start = time.perf_counter()
        _save({"state": family.warm_state(family.family_config(), seed), "seconds": time.perf_counter() - start}, path)
    buffer = io.BytesIO()
    torch.save(torch.load(path)["seconds"], buffer)
    return buffer.getvalue()


def job_path(work: Path, mode: str, name: str, seed: int, lr: float) -> Path:
    return work / mode / f"{name}__{seed}__{lr:g}.pt"


def run_job(name: str, seed: int, lr: float, mode: str, work: Path) -> bytes:
    """One variant, one seed, one learning rate: its :func:`family.record`, written to its own file and returned
    as ``torch.save`` bytes (a pool would otherwise pass tensors through shared memory, which can stall)."""
    torch.set_num_threads(1)  # a 100k-parameter model runs fastest on one thread
    path = job_path(work, mode, name, seed, lr)
    if not path.exists():
        state = torch.load(work / f"warm_{seed}.pt")["state"]
        cpu = resource.getrusage(resource.RUSAGE_SELF)
        history = family.run_variant(name, seed, lr=lr, state=state, eval_on="val" if mode == "tune" else "heldout")
        used = resource.getrusage(resource.RUSAGE_SELF)
        rec = {
            "name": name,
            "seed": seed,
            "lr": lr,
            **family.record(history),
            "cpu_seconds": used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime,
        }
        _save(rec, path)
        print(
            f"  done: {name} seed {seed} lr {lr:g}: {rec['score']:.3f} (from {rec['start']:.3f}; "
            f"{rec['seconds']:.0f} s, {rec['rounds']} rounds)",
            flush=True,
        )
    return path.read_bytes()


def choose_lr(records: list[dict]) -> tuple[dict, dict]:
    """Per variant, the learning rate whose tuning runs have the higher mean score (the smaller on a tie);
    and every score, ``{name: {lr: [scores by seed]}}``."""
    scores: dict = {}
    for r in sorted(records, key=lambda r: r["seed"]):
        scores.setdefault(r["name"], {}).setdefault(r["lr"], []).append(r["score"])
    mean = lambda v: sum(v) / len(v)  # noqa: E731
    return {n: max(sorted(by_lr), key=lambda lr: (mean(by_lr[lr]), -lr)) for n, by_lr in scores.items()}, scores


def tuned_lr(work: Path, names: list[str]) -> dict:
    """The learning rates tuning chose, from its files in ``work / "tune"`` when every variant has its four runs,
    else ``family.TUNED_LR`` (the base where it has none)."""
    records = [torch.load(p, weights_only=False) for p in sorted((work / "tune").glob("*.pt"))]
    chosen, scores = choose_lr(records)
    if all(n in scores and sum(len(v) for v in scores[n].values()) == 2 * len(TUNE_SEEDS) for n in names):
        return chosen
    return {n: family.TUNED_LR.get(n, family.base_lr(n)) for n in names}


def _pool_map(fn, jobs, n):
    if n > 1 and len(jobs) > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(n, maxtasksperchild=1) as pool:
            return pool.starmap(fn, jobs, chunksize=1)
    return [fn(*job) for job in jobs]


def _load(data: bytes):
    return torch.load(io.BytesIO(data), weights_only=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tune", action="store_true", help="each variant at {base, 2 x base} lr on the val split")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default: 100-107 (0 1 with --tune)")
    parser.add_argument(
        "--variants",
        nargs="+",
        default=None,
        choices=sorted(family.VARIANTS),
        help="default: family.MEASURED (with --tune, also family.TUNED_ONLY)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes at a time, one thread each")
    parser.add_argument("--work", type=Path, default=Path("/work/runs/ch11-work"), help="cache and per-job results")
    parser.add_argument(
        "--collect",
        action="store_true",
        help="run nothing: the table and the file from the jobs already done (a cut-off run's)",
    )
    parser.add_argument("--save", type=Path, default=None, help="folder for grpo_family_11.pt (the notebook's data)")
    args = parser.parse_args()
    mode = "tune" if args.tune else "report"
    args.variants = args.variants or (family.MEASURED + family.TUNED_ONLY if args.tune else family.MEASURED)
    seeds = args.seeds or (TUNE_SEEDS if args.tune else REPORT_SEEDS)
    (args.work / mode).mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    warm_seconds = (
        [] if args.collect else [_load(b) for b in _pool_map(warm_job, [(s, args.work) for s in seeds], args.jobs)]
    )
    slow_first = {"PPO": 0, "GSPO": 1, "DAPO": 2, "DAPO-dyn-sampling": 3}  # the longest jobs first
    order = sorted(args.variants, key=lambda n: slow_first.get(n, 9)) if args.tune else args.variants  # as given
    if args.tune:
        jobs = [
            (n, s, lr, mode, args.work)
            for n in order
            for lr in (family.base_lr(n), 2 * family.base_lr(n))
            for s in seeds
        ]
    else:
        lrs = tuned_lr(args.work, args.variants)
        print(f"learning rates: {lrs}", flush=True)
        # seed-major: a run cut off early leaves whole seeds of every variant, not whole variants
        jobs = [(n, s, lrs[n], mode, args.work) for s in seeds for n in order]
    if args.collect:  # what finished; the seeds that every variant finished
        records = [
            torch.load(p, weights_only=False) for p in (job_path(args.work, j[3], *j[:3]) for j in jobs) if p.exists()
        ]
        done = {(r["name"], r["seed"]) for r in records}
        seeds = [s for s in seeds if all((n, s) in done for n in args.variants)]
        records = [r for r in records if r["seed"] in seeds]
    else:
        records = [_load(b) for b in _pool_map(run_job, jobs, args.jobs)]
    total = time.perf_counter() - start
    cpu = sum(r.get("cpu_seconds", float("nan")) for r in records)
    print(
        f"jobs: {len(jobs)}, CPU {cpu / 60:.1f} core-minutes in the runs (evaluations included), "
        f"wall {total / 60:.1f} min x {args.jobs} processes"
    )
    print(f"warm-ups: {sum(warm_seconds):.0f} s for {len(seeds)} seeds (once per seed, then cached)")
    if args.tune:
        print(f"tuning: validation accuracy at the end, seeds {seeds}")
        chosen, scores = choose_lr(records)
        for name in args.variants:
            cells = "  ".join(
                f"lr {lr:g}: " + " ".join(f"{v:.3f}" for v in vs) + f" (mean {sum(vs) / len(vs):.3f})"
                for lr, vs in sorted(scores[name].items())
            )
            print(f"  {name:<20} {cells}  -> {chosen[name]:g}")
        print(f"TUNED_LR = {chosen!r}")
        print(f"family-tune: variants={len(args.variants)} seeds={len(seeds)} jobs={len(jobs)} seconds={total:.0f}")
        return
    rows = {}
    for name in args.variants:
        runs = [r for r in records if r["name"] == name]
        rows[name] = family.summarize(runs)
    print(f"test accuracy, seeds {seeds}, {family.family_config().rl.max_completions} completions per run")
    for name in args.variants:
        runs = sorted((r for r in records if r["name"] == name), key=lambda r: r["seed"])
        print(f"  {name:<20} lr {runs[0]['lr']:g}: " + " ".join(f"{r['score']:.3f}" for r in runs))
    print(family.format_table(rows))
    if args.save is not None:
        args.save.mkdir(parents=True, exist_ok=True)
        cfg = family.family_config()
        data = {
            "config": {
                "rounds": cfg.rl.iterations,
                "prompts": cfg.rl.prompts_per_step,
                "group": cfg.rl.group_size,
                "max_completions": cfg.rl.max_completions,
                "eval_every": cfg.eval_every,
            },
            "seeds": seeds,
            "threshold": 0.8,
            "variants": {n: {**family.VARIANTS[n], "lr": lrs[n]} for n in args.variants},
            "runs": {n: sorted((r for r in records if r["name"] == n), key=lambda r: r["seed"]) for n in args.variants},
            "warm_state": {"seed": seeds[0], "state": torch.load(args.work / f"warm_{seeds[0]}.pt")["state"]},
            "tuning": [
                {k: r[k] for k in ("name", "seed", "lr", "score")}
                for r in (torch.load(p, weights_only=False) for p in sorted((args.work / "tune").glob("*.pt")))
            ],
        }
        path = args.save / "grpo_family_11.pt"
        _save(data, path)
        print(f"saved {path} ({path.stat().st_size / 1e3:.0f} kB)")
    ranked = sorted(rows, key=lambda n: rows[n]["mean"])
    print(f"seconds={total:.0f}")
    print(f"family: variants={len(rows)} seeds={len(seeds)} best={ranked[-1]} worst={ranked[0]}")


if __name__ == "__main__":
    main()
