"""Chapter 11: the trained testbeds, each built so that plain GRPO has the problem its variants were made for.

Every run goes through the one loop (:func:`course_lib.lm_rl.train`) from a warmed-up tiny LM:

- **length**: chapter 10's 3-digit addition (:mod:`course_lib.lectures.reasoning_rl`), answered directly or after
  a scratchpad of column totals, with at most 14 tokens where the longest scratchpads need 15 (:data:`LENGTH_CUT`):
  completions run out of room (no EOS: malformed, reward 0), and wrong ones can be long. Tracked: the lengths of
  right and wrong completions, the share cut off, the scratchpad share;
- **sparse**: chapter 08's 2-digit addition with an exact-match reward (1 or 0) from its warm-up, where many
  groups are all wrong (or all right) and give no gradient. Tracked: entropy, the share of such groups, pass@k;
- **drift**: chapter 08's task with 8 passes over each batch in 4 minibatches (32 optimiser steps a round), so the
  ratios drift from 1. Tracked: accuracy, whether a seed falls below its warm-up, and each loss's diagnostics on its
  own quantity (``course_lib.family_diagnostics``: the clip fraction, the tokens it silences, the low-probability
  ones among them);
- **accuracy**: chapter 08's task and recipe, 48 of its rounds, where the problems above barely occur.

:func:`config` gives a testbed's task and loop config, :func:`warm_up` its warmed-up model, :func:`run` one
variant at one learning rate on one seed, reduced by :func:`record` to the numbers the claims and the notebook need.
Every run has a sample budget (``LMRLConfig.max_completions``): dynamic sampling, which draws more per round,
gets fewer rounds, and the learning rate decays to 0 over the budget, so each run is a complete schedule.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from course_lib import _validate, lm_sampling
from course_lib._threads import one_thread
from course_lib.lectures import capstone, reasoning, reasoning_rl
from course_lib.lectures.family import TRAINED, testbed_variants, variant_switches
from course_lib.lectures.reasoning import pass_at_k
from course_lib.tasks import score_completions
from course_lib.tasks_reasoning import ScratchpadAdditionTask

LENGTH_CUT = 1
"""The length testbed allows this many tokens fewer than the longest scratchpad needs: 14 for 3-digit addition,
where the longest scratchpads (all three column totals of two digits and a four-digit answer, an eighth of the
prompts) need 15."""

FINAL_ROUNDS = 5
"""The "final" value of a per-round quantity is its mean over the last this many rounds."""

PASS_K = (1, 4, 16)
"""pass@k at the end of a sparse-reward run: 16 samples of each of 100 prompts."""


# ---------------------------------------------------------------------------
# 1. Each testbed's task and loop
# ---------------------------------------------------------------------------


def config(testbed: str, quick: bool = False):
    """The task's config of ``testbed`` (``CapstoneConfig`` or ``ReasoningConfig``), its ``rl`` the loop's.

    ``quick``: two small rounds of one pass each over the samples (in the recipe's minibatches: where there are
    several, the later steps' ratios are off 1), 20 prompts scored, 10 warm-up steps (and 2-digit addition for the
    length testbed): the pipeline in seconds.
    """
    _validate.require_choice("testbed", testbed, TRAINED)
    if testbed == "length":  # chapter 10's recipe: 25 rounds of 64 prompts x G = 8, 2 passes, Adam 1e-3
        cfg = reasoning.ReasoningConfig(n_digits=2 if quick else 3)
        limit = ScratchpadAdditionTask(cfg.n_digits).max_new_tokens - LENGTH_CUT
        rl = dataclasses.replace(cfg.rl, max_new_tokens=limit)
    else:  # chapter 08's recipe with GRPO's symmetric clip, for 48 rounds of its 300
        cfg = capstone.CapstoneConfig(eval_every=8)
        rl = dataclasses.replace(cfg.rl, iterations=48, clip_eps_high=None)
        if testbed == "sparse":
            cfg = dataclasses.replace(cfg, reward="exact")
        if testbed == "drift":  # half the prompts a round, four times the steps: 8 passes x 4 minibatches
            rl = dataclasses.replace(rl, prompts_per_step=32, update_epochs=8, num_minibatches=4)
    if quick:
        rl = dataclasses.replace(
            rl, iterations=2, prompts_per_step=8, group_size=4, warmup_iterations=0, update_epochs=1
        )
        cfg = dataclasses.replace(cfg, sft_steps=10, n_heldout=20, n_val=20, eval_every=2)
        if testbed != "length":
            cfg = dataclasses.replace(cfg, sft_target=None)
    rl = dataclasses.replace(rl, max_completions=rl.iterations * rl.prompts_per_step * rl.group_size)
    return dataclasses.replace(cfg, rl=rl)


def warm_up_key(testbed: str, quick: bool = False) -> dict:
    """What decides a testbed's warm-up (not its RL): testbeds with the same key share one warm-up per seed."""
    cfg = config(testbed, quick)
    fields = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("rl", "eval_every", "reward")}
    return {"chapter": 10 if testbed == "length" else 8, **fields}


def warm_up(testbed: str, seed: int, quick: bool = False, state: dict | None = None):
    """``(lm, task, split)`` warmed up for ``testbed`` on ``seed``; ``state``: a saved warm-up to load instead."""
    cfg = config(testbed, quick)
    if testbed == "length":
        lm, task, split, _ = reasoning.warm_up_reasoning(dataclasses.replace(cfg, sft_steps=0) if state else cfg, seed)
    else:
        lm, task, split, _ = capstone.warm_up(dataclasses.replace(cfg, sft_steps=0) if state else cfg, seed)
    if state is not None:
        lm.load_state_dict(state)
    return lm.eval(), task, split


def recipe(testbed: str, variant: str, lr: float, quick: bool = False) -> dict:
    """Everything that decides a run but its seed: the task's config and the loop's, with the variant's switches."""
    measured = testbed_variants(testbed, version=2)
    if variant not in measured:
        raise ValueError(f"variant: {testbed!r} measures {measured}, got {variant!r}")
    cfg = config(testbed, quick)
    switches = variant_switches(variant)
    rl = dataclasses.replace(cfg.rl, lr=lr, **switches)
    task = {k: v for k, v in dataclasses.asdict(cfg).items() if k != "rl"}
    return {"testbed": testbed, "variant": variant, "task": task, "rl": dataclasses.asdict(rl)}


# ---------------------------------------------------------------------------
# 2. One run
# ---------------------------------------------------------------------------


def run(testbed: str, variant: str, lr: float, seed: int, lm, task, split, eval_on: str, quick: bool = False) -> dict:
    """``variant`` at peak learning rate ``lr`` from the warmed-up ``lm`` (trained in place), scored on
    ``split[eval_on]`` (``"val"`` while tuning, ``"heldout"`` for the report); the :func:`record` of its history."""
    _validate.require_choice("eval_on", eval_on, ("val", "heldout"))
    cfg = config(testbed, quick)
    switches = {**variant_switches(variant), "lr": lr}
    algo = switches.pop("algo", "grpo")
    if testbed == "length":
        with one_thread():
            history = reasoning_rl.run(
                lm, task, split, cfg, seed=seed, eval_on=eval_on, max_new_tokens=cfg.rl.max_new_tokens, **switches
            )
    else:
        history = capstone.run(lm, task, split, cfg, algo=algo, seed=seed, eval_on=eval_on, **switches)
    rec = record(history, testbed)
    if testbed == "sparse":
        rec["pass_at_k"] = pass_at_k_of(lm, task, split[eval_on][:100], seed)
    return rec


@torch.no_grad()
def pass_at_k_of(lm, task, pairs, seed: int, n: int = 16, ks=PASS_K) -> dict[str, float]:
    """pass@k of ``lm`` on ``pairs``: ``n`` samples of each at temperature 1, the unbiased estimator (chapter 10),
    averaged over the prompts; keys ``"1"``, ``"4"``, ... ."""
    prompts, tok = task.prompts(pairs), task.tokenizer  # (N, P)
    g = torch.Generator().manual_seed(seed)
    flat = lm_sampling.sample_completions(
        lm, prompts, None, n, task.max_new_tokens, tok.eos_id, tok.pad_id, generator=g
    )
    right = score_completions(prompts[:, None, :], flat.view(len(pairs), n, -1), tok, "exact")  # (N, n)
    c = right.sum(-1).long()  # (N,)
    return {str(k): float(pass_at_k(n, c, k).mean()) for k in ks}


@torch.no_grad()
def length_problem(lm, task, pairs, seed: int, group_size: int = 8) -> dict[str, dict]:
    """The length testbed's problem before any RL: ``group_size`` samples (T = 1) of each prompt of ``pairs``, with
    room for the longest scratchpad (``"room"``) and at the testbed's limit, one token less (``"testbed"``).

    Returns:
        Per limit: ``limit`` and :func:`course_lib.lectures.reasoning_rl.round_style_stats` of the samples (the
        style shares, the lengths of right and wrong completions, the share cut off without EOS).
    """
    prompts, tok = task.prompts(pairs), task.tokenizer  # (B, P)
    out = {}
    for name, limit in (("room", task.max_new_tokens), ("testbed", task.max_new_tokens - LENGTH_CUT)):
        g = torch.Generator().manual_seed(seed)  # the same draws at both limits, up to the cut
        with one_thread():
            flat = lm_sampling.sample_completions(
                lm, prompts, None, group_size, limit, tok.eos_id, tok.pad_id, generator=g
            )
        completions = flat.view(len(pairs), group_size, -1)  # (B, G, L)
        rewards = task.score(prompts[:, None, :], completions)  # (B, G)
        out[name] = {"limit": limit, **reasoning_rl.round_style_stats(task, prompts, completions, rewards)}
    return out


# ---------------------------------------------------------------------------
# 3. A run's record: the numbers the claims and the notebook need
# ---------------------------------------------------------------------------

PER_ROUND = ("mean_reward", "entropy", "kl", "mean_length", "frac_zero_std", "clip_fraction", "silenced")
"""The loop's per-round diagnostics every record keeps (``silenced_low_prob`` too, where a round had such tokens)."""

LENGTH_ROUND = ("length_right", "length_wrong", "truncated")
"""The length testbed's per-round quantities (:func:`course_lib.lectures.reasoning_rl.round_style_stats`)."""


def _final(values) -> float:
    """The mean over the last :data:`FINAL_ROUNDS` rounds, ignoring the rounds that had no such value (nan)."""
    x = np.asarray(values, dtype=np.float64)[-FINAL_ROUNDS:]
    return float(np.nanmean(x)) if np.isfinite(x).any() else float("nan")


def _curve(values, points: int = 24) -> list:
    """Means over ``points`` equal chunks of ``values`` (nan-aware; all of it when shorter), rounded, JSON-safe."""
    x = np.asarray(values, dtype=np.float64)
    chunks = np.array_split(x, min(points, len(x))) if len(x) else []
    means = [np.nanmean(c) if np.isfinite(c).any() else float("nan") for c in chunks]
    return [round(float(m), 4) if math.isfinite(m) else None for m in means]


def record(history: dict, testbed: str) -> dict:
    """One run cut down to plain numbers: the accuracy before and after, the budget spent, each per-round quantity's
    final value (:data:`FINAL_ROUNDS`) and its curve (chunk means, against the completions sampled)."""
    ev = history["eval"]
    keys = PER_ROUND + ("silenced_low_prob",) + (LENGTH_ROUND if testbed == "length" else ())
    rec = {
        "score": float(ev["score"][-1]),
        "start": float(ev["score"][0]),
        "completions": int(history["completions"][-1]),
        "rounds": len(history["kl"]),
        "seconds": round(float(history["seconds"][-1]), 2),
        "final": {key: _final(history[key]) for key in keys},
        "eval": {"completions": list(ev["completions"]), "score": [round(float(s), 4) for s in ev["score"]]},
        "curves": {"completions": _curve(history["completions"]), **{k: _curve(history[k]) for k in keys}},
    }
    if testbed == "length":
        shares = history["style_share"]["scratchpad"]
        rec["final"]["scratchpad_share"] = _final(shares)
        rec["curves"]["scratchpad_share"] = _curve(shares)
    return rec
