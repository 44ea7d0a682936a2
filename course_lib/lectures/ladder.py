"""Chapter 08's ladder from GRPO to PPO: one difference between the two recipes at a time.

Chapter 08's GRPO and PPO differ in seven places, not two. Comparing the two recipes says which recipe won, not
why. The ladder starts at GRPO and changes one thing per rung until it is PPO; every rung is a config of the one
loop (:mod:`course_lib.lm_rl`), tuned under the same protocol (``benchmarks/PROTOCOL.md``: the same learning-rate
grid on the same tuning seeds, scored on the validation split) and run on the same fresh report seeds. The paired
difference between neighbouring rungs says what each change did.

==== ======================== ================================================================================
rung name                     what changes from the rung before
==== ======================== ================================================================================
0    GRPO                     chapter 08's recipe: group advantages, per-completion token mean, k3 KL in the
                              loss, clip-higher [0.8, 1.28], no lr warm-up
1    + token mean             the loss averaged over the batch's tokens (``loss_agg="token-mean"``, DAPO's)
2    + KL in the reward       k1 subtracted from each completion's reward, not k3 added to the loss
3    + symmetric clip         the ratio clipped to [0.8, 1.2]
4    + lr warm-up             the learning rate rises over the first 20 rounds
5    + whitened advantages    advantages shifted and scaled over the batch's valid tokens
6    PPO                      a value model's GAE in place of the group's advantage, plus its value loss
==== ======================== ================================================================================

Rung 6 is chapter 08's PPO (``capstone.PPO_CHANGES`` with ``algo="ppo"``); rung 5 differs from it in the
advantage's source alone.
"""

from __future__ import annotations

import json
from importlib import resources

from course_lib.lectures import capstone
from course_lib.lectures.protocol import (
    PairedDifference,
    paired_difference,
    protocol_version,
    seeds_for_half_width,
    summary,
)

RUNGS: list[tuple[str, dict]] = [
    ("GRPO", {}),
    ("+ token mean", {"loss_agg": "token-mean"}),
    ("+ KL in the reward", {"kl_placement": "reward"}),
    ("+ symmetric clip", {"clip_eps_high": None}),
    ("+ lr warm-up", {"warmup_iterations": 20}),
    ("+ whitened advantages", {"whiten_advantages": True}),
    ("PPO", {"algo": "ppo"}),
]
"""``(name, the change from the rung before)``, from GRPO to PPO."""

LR_GRID = (1e-3, 2e-3, 3e-3)
"""The learning rates every rung is tuned over (the same grid and tuning seeds for all)."""


def rung_changes(rung: int) -> dict:
    """The changes to chapter 08's GRPO recipe (``CapstoneConfig().rl``) that make rung ``rung``: cumulative."""
    if not 0 <= rung < len(RUNGS):
        raise ValueError(f"rung: expected 0 to {len(RUNGS) - 1}, got {rung}")
    changes: dict = {}
    for _, change in RUNGS[: rung + 1]:
        changes.update(change)
    return changes


def rung_algo_and_changes(rung: int) -> tuple[str, dict]:
    """``(algo, changes)`` as :func:`capstone.run` takes them (``algo`` is the advantage's source)."""
    changes = rung_changes(rung)
    return changes.pop("algo", "grpo"), changes


def check_the_top_is_ppo() -> None:
    """The ladder's last rung must be chapter 08's PPO, setting for setting (a test calls this)."""
    algo, changes = rung_algo_and_changes(len(RUNGS) - 1)
    if algo != "ppo" or changes != capstone.PPO_CHANGES:
        raise AssertionError(f"the ladder's top is not capstone.PPO_CHANGES: {algo}, {changes}")


def load_ladder() -> dict:
    """The shipped results of ``benchmarks/ladder.py`` (``course_lib/lectures/data/ladder_08.json``)."""
    text = resources.files("course_lib.lectures").joinpath("data", "ladder_08.json").read_text()
    return json.loads(text)


def frozen_lr(rung: int, results: dict | None = None) -> float:
    """The learning rate the protocol froze for rung ``rung`` (``ladder_08.json``'s recipes, or ``results``')."""
    results = load_ladder() if results is None else results
    return results["recipes"][str(rung)]["recipe"]["rl"]["lr"]


def rung_scores(results: dict, rung: int) -> dict[int, float]:
    """Seed -> test accuracy of rung ``rung``'s report runs in ``results`` (``ladder_08.json``'s runs)."""
    return {r["seed"]: r["score"] for r in results["runs"] if r["rung"] == rung}


def ladder_steps(results: dict) -> dict[str, PairedDifference]:
    """Each rung's paired difference to the rung below (``"4 + lr warm-up"`` -> rung 4 - rung 3): the six
    intervals the ladder reads together (so Holm's correction applies: ``protocol.holm_table``)."""
    steps = {}
    for rung in range(1, len(RUNGS)):
        steps[f"{rung} {RUNGS[rung][0]}"] = paired_difference(
            rung_scores(results, rung - 1), rung_scores(results, rung)
        )
    return steps


def paired_sd(results: dict, low: int, high: int) -> float:
    """The standard deviation over seeds of rung ``high`` minus rung ``low`` (what power is planned from)."""
    a, b = rung_scores(results, low), rung_scores(results, high)
    return summary([b[seed] - a[seed] for seed in sorted(set(a) & set(b))]).std


def ladder_plan(results: dict, half_widths=(0.03, 0.035)) -> str:
    """Protocol v2, rule 6, from a stored report: the paired sd of GRPO - PPO and of each step, the report seeds
    each would need for each half-width in ``half_widths``, and GRPO - PPO's computation in full."""
    top = len(RUNGS) - 1
    pairs = {"GRPO - PPO": (top, 0)}
    pairs.update({f"step {rung} {RUNGS[rung][0]}": (rung - 1, rung) for rung in range(1, len(RUNGS))})
    version = protocol_version(results)
    lines = [f"report seeds needed, from protocol v{version}'s {results['seed_set']} ({len(results['seeds'])} seeds):"]
    for name, (low, high) in pairs.items():
        sd = paired_sd(results, low, high)
        needs = ", ".join(f"±{h:g}: {seeds_for_half_width(sd, h).n}" for h in half_widths)
        lines.append(f"  {name:<30} paired sd {sd:.3f}  seeds for {needs}")
    sd = paired_sd(results, top, 0)
    lines.extend(f"  GRPO - PPO: {seeds_for_half_width(sd, h)}" for h in half_widths)
    return "\n".join(lines)
