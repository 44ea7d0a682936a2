"""Benchmark: chapter 08's tiny LM on 2-digit addition, warm-up then GRPO, and PPO on the same budget.

For each seed: supervised warm-up on 500 demonstrations (``CapstoneConfig()``), then from
that same warmed-up model GRPO, and separately PPO with a value head, both until they have
sampled the same number of completions (250 epochs x 64 prompts x 8 = 128,000). Accuracy is
greedy exact match on 500 held-out prompts never trained on. Every run is a process with one
torch thread (``--jobs`` at a time, one per core by default); a seed's GRPO and PPO are separate
jobs that each redo its (deterministic, 5 s) warm-up. A phase's seconds count its training only
(evaluations excluded); the last line's seconds are the wall-clock of the whole script.

How GRPO's recipe was chosen (held-out accuracy after 300 epochs, one run each; ``tune`` runs
made with ``run_grpo`` directly, seeds as here):

    2 steps per batch, Adam 1e-3 (the first recipe)      seeds 0/1/2: 0.84 0.53 0.45
    4 steps per batch, 1e-3                              seeds 1/2:   0.67 0.75
    4 steps, 2e-3                                        seeds 0/1/2: 0.69 0.68 0.82
    4 steps, 2e-3 decayed linearly (the default)         seeds 0/1/2/3: 0.95 0.87 0.93 0.41
    4 steps, 3e-3 decayed linearly                       seeds 1/2/3: 0.88 0.80 0.66
    (seed 3 also tried: G = 16 x 32 prompts 0.34, no std normalisation 0.44, kl_coef 0 0.44)

The budget was then cut from 300 to 250 epochs (the lr decays over whichever is set) so that the
whole benchmark fits 10 minutes on 2 cores: at 300 epochs it took 682 s, PPO 260 s a seed.

So the bar holds on the three benchmark seeds, and a fourth seed shows its limit: when the
policy "takes off" (learns the carry) varies from run to run, and a late take-off does not
finish within the budget. PPO keeps chapter 05's recipe (lr 1e-3, no decay), not retuned here.

Bars (issue 13): after warm-up <= 0.25; after GRPO >= 0.80 on every seed; whole run < 10 min.
The last line is ``capstone: sft=X grpo=Y ppo=Z seconds=S`` (means over seeds; S the total).

With ``--save DIR`` seed 0's GRPO model, the warm-up model (float16) and every history are
written to ``DIR/capstone_08.pt`` (about 500 kB), which chapter 08's notebook loads; with
``--extras`` too, five short GRPO runs for the notebook's pitfalls (KL or not on the
digit reward, the three loss aggregations) run beside the seeds and are saved with them.

Usage::

    python benchmarks/capstone.py                    # 3 seeds, GRPO and PPO
    python benchmarks/capstone.py --seeds 1 --no-ppo  # quicker
    python benchmarks/capstone.py --save course_lib/lectures/data --extras   # the shipped file
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import time
from pathlib import Path

import torch

from course_lib.lectures.capstone import CapstoneConfig, accuracy, run_grpo, run_ppo, warm_up
from course_lib.tiny_lm import save_checkpoint


def run_phase(phase: str, seed: int, cfg: CapstoneConfig) -> dict:
    """Warm-up, then one RL phase (``"grpo"`` or ``"ppo"``) for one seed: accuracies, seconds, history.

    The warm-up is deterministic for a seed, so the GRPO and PPO jobs of a seed start from the
    same model while running in parallel processes.
    """
    start = time.perf_counter()
    lm, task, split, sft_losses = warm_up(cfg, seed)
    out = {"seed": seed, "sft_seconds": time.perf_counter() - start, "sft_losses": sft_losses}
    out["sft"] = accuracy(lm, task, split["heldout"])
    sft_state = copy.deepcopy(lm.state_dict())
    run = (run_grpo if phase == "grpo" else run_ppo)(lm, task, split, cfg, seed=seed)
    out[f"{phase}_run"] = run
    out[phase] = run["eval"]["accuracy"][-1]
    out[f"{phase}_seconds"] = run["eval"]["seconds"][-1]
    if phase == "grpo":
        out["models"] = {"sft": sft_state, "grpo": lm.state_dict()}
    return out


EXTRAS = {  # name -> (changes to CapstoneConfig.grpo, reward, epochs): short runs for the notebook's pitfalls
    # The reward-hacking pair: a large constant step (3e-3, 2 steps per batch, no decay) so that the
    # unanchored policy finds the digit reward's blind spot (no EOS needed) within 100 epochs.
    "kl_coef=0 (digits reward)": ({"kl_coef": 0.0, "lr": 3e-3, "steps_per_epoch": 2, "lr_decay": False}, "digits", 100),
    "kl_coef=0.1 (digits reward)": ({"kl_coef": 0.1, "lr": 3e-3, "steps_per_epoch": 2, "lr_decay": False}, "digits", 100),
    "seq-mean-token-mean": ({"loss_agg": "seq-mean-token-mean"}, None, 60),
    "token-mean": ({"loss_agg": "token-mean"}, None, 60),
    "seq-mean-token-sum-norm": ({"loss_agg": "seq-mean-token-sum-norm"}, None, 60),
}


def run_extra(name: str, cfg: CapstoneConfig) -> dict:
    """One short GRPO run from seed 0's warmed-up model (recomputed: the warm-up is deterministic)."""
    changes, reward, epochs = EXTRAS[name]
    lm, task, split, _ = warm_up(cfg, seed=0)
    changes = dict(changes)
    lr_decay = changes.pop("lr_decay", cfg.lr_decay)
    grpo = dataclasses.replace(cfg.grpo, epochs=epochs, **changes)
    run_cfg = dataclasses.replace(cfg, grpo=grpo, prompts_per_step=32, reward=reward or cfg.reward, eval_every=epochs,
                                  lr_decay=lr_decay)
    return run_grpo(lm, task, split, run_cfg, seed=0)


def _job(kind: str, arg, cfg: CapstoneConfig):
    torch.set_num_threads(1)  # a 100k-parameter model runs fastest on one thread
    return run_extra(arg, cfg) if kind == "extra" else run_phase(kind, arg, cfg)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds, 0 .. n - 1")
    parser.add_argument("--no-ppo", action="store_true", help="skip the PPO runs")
    parser.add_argument("--save", type=Path, default=None, help="folder for capstone_08.pt")
    parser.add_argument("--jobs", type=int, default=min(3, os.cpu_count() or 1),
                        help="runs in parallel processes, one thread each (default: one per core, at most 3)")
    parser.add_argument("--extras", action="store_true", help="with --save: the notebook's short extra runs")
    args = parser.parse_args()
    torch.set_num_threads(1)  # a 100k-parameter model runs fastest on one thread
    cfg = CapstoneConfig()
    start = time.perf_counter()
    phases = ["grpo"] if args.no_ppo else ["ppo", "grpo"]  # the longest jobs first: the cores finish together
    jobs = [(phase, seed) for phase in phases for seed in range(args.seeds)]
    if args.save is not None and args.extras:
        jobs += [("extra", name) for name in EXTRAS]
    jobs = [(kind, arg, cfg) for kind, arg in jobs]
    if args.jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.jobs) as pool:
            outputs = pool.starmap(_job, jobs, chunksize=1)
    else:
        outputs = [_job(*job) for job in jobs]
    results = [{} for _ in range(args.seeds)]
    for (kind, arg, _), out in zip(jobs, outputs):
        if kind != "extra":
            results[arg].update(out)  # the warm-up keys agree: the same deterministic warm-up
    extras = {name: out for (kind, name, _), out in zip(jobs, outputs) if kind == "extra"}
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
