"""Chapter 10, section 8: does a critic pay when completions are longer? The shipped report, read.

Chapter 08's ladder compared GRPO and PPO on 2-digit addition, where a completion is 4 tokens and a value model has
little to predict. ``benchmarks/critic_scratchpad.py`` runs three methods on chapter 10's 3-digit task with a
scratchpad (completions up to 15 tokens), from chapter 10's warm-up, under version 2 of the course's protocol:

- ``GRPO``: chapter 10's recipe as it is;
- ``rung 5``: chapter 08's changes from GRPO to PPO, all but the critic (token mean, KL in the reward, the
  symmetric clip, whitened advantages);
- ``PPO``: rung 5 with the advantage from a value model's GAE.

So ``PPO - rung 5`` is the critic's own effect, ``rung 5 - GRPO`` everything else, and ``PPO - GRPO`` the whole
change. Each method was tuned on seeds 0 to 3 (validation split), frozen, then run once on the same 24 fresh report
seeds (test split), so every difference is paired by seed.

The benchmark writes ``lectures/data/critic_10.json``; this module turns it into per-seed scores, the three paired
differences, and the same differences at every learning rate both methods were tuned at (a method's effect told
apart from its rate's).
"""

from __future__ import annotations

from course_lib.lectures.protocol import PairedDifference, matched_lr, paired_difference

METHODS = ("GRPO", "rung 5", "PPO")
"""In the order of the ladder: each adds to the one before."""
CONTRASTS = {
    "rung 5 - GRPO": ("GRPO", "rung 5"),
    "PPO - rung 5": ("rung 5", "PPO"),
    "PPO - GRPO": ("GRPO", "PPO"),
}
"""Each difference's name -> ``(a, b)``: the difference is ``b - a``, paired by seed."""


def frozen_lr(results: dict, method: str) -> float:
    """The learning rate ``method`` was frozen at."""
    return results["recipes"][method]["recipe"]["rl"]["lr"]


def scores_by_seed(results: dict, phase: str = "report") -> dict[str, dict[float, dict[int, float]]]:
    """method -> learning rate -> seed -> accuracy, over the runs of ``phase`` ("report" or "tune")."""
    runs = results["runs"] if phase == "report" else results["tuning"]
    table: dict[str, dict[float, dict[int, float]]] = {}
    for run in runs:
        if run["phase"] == phase:
            table.setdefault(run["method"], {}).setdefault(run["lr"], {})[run["seed"]] = run["score"]
    return table


def report_scores(results: dict) -> dict[str, dict[int, float]]:
    """method -> seed -> test accuracy, each method at its frozen rate, on the report seeds."""
    table = scores_by_seed(results, "report")
    return {method: table[method][frozen_lr(results, method)] for method in METHODS}


def differences(scores: dict[str, dict[int, float]]) -> dict[str, PairedDifference]:
    """The three contrasts, each paired by seed, with its 95% t-interval."""
    return {name: paired_difference(scores[a], scores[b]) for name, (a, b) in CONTRASTS.items()}


def matched_differences(results: dict) -> dict[str, dict[float, PairedDifference]]:
    """Each contrast at every learning rate both of its methods were tuned at, on the tuning seeds (validation)."""
    tuning = scores_by_seed(results, "tune")
    return {name: matched_lr(tuning.get(a, {}), tuning.get(b, {})) for name, (a, b) in CONTRASTS.items()}
