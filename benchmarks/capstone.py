"""Benchmark: chapter 08's tiny LM on 2-digit addition, warm-up then GRPO, and PPO on the same budget.

For each seed: supervised warm-up on 500 demonstrations (``CapstoneConfig()``), then from
that same warmed-up model GRPO, and separately PPO with a value head, both until they have
sampled the same number of completions (300 epochs x 64 prompts x 8 = 153,600). Accuracy is
greedy exact match on 500 held-out prompts never trained on. Every run is a process with one
torch thread (``--jobs`` at a time); a phase's seconds count its training only (evaluations
excluded), and the last line's seconds are the wall-clock of the whole script.

Bars (issue 13): after warm-up <= 0.25; after GRPO >= 0.80 on every seed; whole run < 10 min.
The last line is ``capstone: sft=X grpo=Y ppo=Z seconds=S`` (means over seeds; S the total).

With ``--save DIR`` seed 0's GRPO model, the warm-up model (float16) and every history are
written to ``DIR/capstone_08.pt`` (about 500 kB), which chapter 08's notebook loads; with
``--extras`` too, five short GRPO runs for the notebook's pitfalls (KL or not on the
digit reward, the three loss aggregations) run beside the seeds and are saved with them.

Usage::

    python benchmarks/capstone.py                    # 3 seeds, GRPO and PPO
    python benchmarks/capstone.py --seeds 1 --no-ppo  # quicker
    python benchmarks/capstone.py --jobs 8 --save course_lib/lectures/data --extras   # the shipped file
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import time
from pathlib import Path

import torch

from course_lib.lectures.capstone import CapstoneConfig, accuracy, run_grpo, run_ppo, warm_up
from course_lib.tiny_lm import save_checkpoint


def run_seed(seed: int, cfg: CapstoneConfig, ppo: bool = True) -> dict:
    """Warm-up, GRPO and (optionally) PPO for one seed; accuracies, seconds and histories."""
    start = time.perf_counter()
    lm, task, split, sft_losses = warm_up(cfg, seed)
    out = {"seed": seed, "sft_seconds": time.perf_counter() - start, "sft_losses": sft_losses}
    out["sft"] = accuracy(lm, task, split["heldout"])
    sft_state = copy.deepcopy(lm.state_dict())
    grpo_lm = copy.deepcopy(lm)
    out["grpo_run"] = run_grpo(grpo_lm, task, split, cfg, seed=seed)
    out["grpo"] = out["grpo_run"]["eval"]["accuracy"][-1]
    out["grpo_seconds"] = out["grpo_run"]["eval"]["seconds"][-1]
    out["models"] = {"sft": sft_state, "grpo": grpo_lm.state_dict()}
    if ppo:
        ppo_lm = copy.deepcopy(lm)
        out["ppo_run"] = run_ppo(ppo_lm, task, split, cfg, seed=seed)
        out["ppo"] = out["ppo_run"]["eval"]["accuracy"][-1]
        out["ppo_seconds"] = out["ppo_run"]["eval"]["seconds"][-1]
    return out


EXTRAS = {  # name -> (changes to CapstoneConfig.grpo, reward, epochs): short runs for the notebook's pitfalls
    "kl_coef=0 (digits reward)": ({"kl_coef": 0.0, "lr": 3e-3}, "digits", 100),
    "kl_coef=0.1 (digits reward)": ({"kl_coef": 0.1, "lr": 3e-3}, "digits", 100),
    "seq-mean-token-mean": ({"loss_agg": "seq-mean-token-mean"}, None, 60),
    "token-mean": ({"loss_agg": "token-mean"}, None, 60),
    "seq-mean-token-sum-norm": ({"loss_agg": "seq-mean-token-sum-norm"}, None, 60),
}


def run_extra(name: str, cfg: CapstoneConfig) -> dict:
    """One short GRPO run from seed 0's warmed-up model (recomputed: the warm-up is deterministic)."""
    changes, reward, epochs = EXTRAS[name]
    lm, task, split, _ = warm_up(cfg, seed=0)
    grpo = dataclasses.replace(cfg.grpo, epochs=epochs, **changes)
    run_cfg = dataclasses.replace(cfg, grpo=grpo, prompts_per_step=32, reward=reward or cfg.reward, eval_every=epochs)
    return run_grpo(lm, task, split, run_cfg, seed=0)


def _job(kind: str, arg, cfg: CapstoneConfig, ppo: bool):
    torch.set_num_threads(1)  # a 100k-parameter model runs fastest on one thread
    return run_seed(arg, cfg, ppo=ppo) if kind == "seed" else run_extra(arg, cfg)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds, 0 .. n - 1")
    parser.add_argument("--no-ppo", action="store_true", help="skip the PPO runs")
    parser.add_argument("--save", type=Path, default=None, help="folder for capstone_08.pt")
    parser.add_argument("--jobs", type=int, default=3, help="runs in parallel processes (one thread each)")
    parser.add_argument("--extras", action="store_true", help="with --save: the notebook's short extra runs")
    args = parser.parse_args()
    torch.set_num_threads(1)  # a 100k-parameter model runs fastest on one thread
    cfg = CapstoneConfig()
    start = time.perf_counter()
    jobs = [("seed", seed) for seed in range(args.seeds)]
    if args.save is not None and args.extras:
        jobs += [("extra", name) for name in EXTRAS]
    jobs = [(kind, arg, cfg, not args.no_ppo) for kind, arg in jobs]
    if args.jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.jobs) as pool:
            outputs = pool.starmap(_job, jobs)
    else:
        outputs = [_job(*job) for job in jobs]
    results = outputs[:args.seeds]
    extras = {name: out for (kind, name, _, _), out in zip(jobs, outputs) if kind == "extra"}
    total = time.perf_counter() - start
    for seed, r in enumerate(results):
        ppo = f" ppo={r['ppo']:.3f} ({r['ppo_seconds']:.0f} s)" if "ppo" in r else ""
        print(f"seed {seed}: sft={r['sft']:.3f} ({r['sft_seconds']:.0f} s) "
              f"grpo={r['grpo']:.3f} ({r['grpo_seconds']:.0f} s){ppo}", flush=True)

    if args.save is not None:
        from course_lib.tiny_lm import TinyLM, TinyLMConfig

        r0 = results[0]
        lm = TinyLM(TinyLMConfig(**_lm_config(cfg)))
        lm.load_state_dict(r0["models"]["grpo"])
        history = {"config": json.loads(json.dumps(dataclasses.asdict(cfg))),
                   "seeds": [{k: v for k, v in r.items() if k != "models"} for r in results]}
        if extras:
            history["extras"] = extras
        args.save.mkdir(parents=True, exist_ok=True)
        # float16 weights: half the file; load_state_dict casts them back into the float32 model.
        half = {k: v.half() for k, v in r0["models"]["sft"].items()}
        save_checkpoint(args.save / "capstone_08.pt", lm.half(), history, sft_state_dict=half)
        print(f"saved {args.save / 'capstone_08.pt'}")

    def mean(key):
        vals = [r[key] for r in results if key in r]
        return sum(vals) / len(vals) if vals else float("nan")

    print(f"capstone: sft={mean('sft'):.3f} grpo={mean('grpo'):.3f} ppo={mean('ppo'):.3f} seconds={total:.0f}")


def _lm_config(cfg: CapstoneConfig) -> dict:
    from course_lib.tasks import AdditionTask

    task = AdditionTask(cfg.n_digits)
    return {"vocab_size": task.tokenizer.vocab_size, "block_size": task.prompt_length + task.max_new_tokens,
            "d_model": cfg.d_model}


if __name__ == "__main__":
    main()
