"""Chapter 11's accuracy runs from before its protocol, read with the protocol's statistics and every caveat stated.

The first version of chapter 11 ran ten variants on chapter 08's task at one budget (``data/grpo_family_11.pt``,
eight seeds, 100 to 107). Those runs predate ``benchmarks/PROTOCOL.md`` and the testbeds, and two of their rows
measure something other than their name. They are kept because they show what happens when the problems the
variants fix are absent; this module reads them without the old chapter's mistakes:

1. :func:`load_before`: the per-seed test accuracies, the rounds each run got, the best accuracy any evaluation of
   any run reached, and the tuning runs, as plain data;
2. :func:`budget`: each run's completions against chapter 08's (``CapstoneConfig``: 300 rounds x 64 prompts x
   G = 8 = 153,600), not "a tenth of 128,000";
3. :func:`format_before`: mean, std and worst seed per variant, and the paired difference to GRPO with the 95%
   Student-t interval for ``n - 1`` degrees of freedom (``protocol.paired_difference``; the old chapter used 2
   standard errors), each called resolved or unresolved, never a tie; the rows that measure something else marked.
"""

from __future__ import annotations

from pathlib import Path

import torch

from course_lib.lectures.capstone import CapstoneConfig
from course_lib.lectures.protocol import paired_difference, summary

DATA = Path(__file__).resolve().parent / "data" / "grpo_family_11.pt"

CAVEATS = {
    "PPO": "chapter 05's recipe (one pass, two minibatches, a constant rate 1e-3), not chapter 08's PPO",
    "DAPO": "includes dynamic sampling with the old refill (below)",
    "DAPO-dyn-sampling": "the old refill: a whole second batch whenever one group had equal rewards, so 24 to 35 "
    "rounds instead of 48; the loop now samples only the missing groups (lm_rl.collect_groups)",
}
"""The rows that measure something other than their name, and why."""


def load_before(path: Path | str | None = None) -> dict:
    """The old runs as plain data: ``config``, ``seeds``, per variant its ``lr``, ``scores`` (seed -> test accuracy
    at the end), ``rounds`` (min, max) and ``schedule``; ``best_eval``, the highest test accuracy any evaluation of
    any run reached; ``tuning``, per variant the learning rates tried and their validation scores."""
    old = torch.load(Path(path or DATA), weights_only=False)
    variants = {}
    for name, records in old["runs"].items():
        switches = old["variants"][name]["switches"]
        variants[name] = {
            "lr": records[0]["lr"],
            "scores": {r["seed"]: float(r["score"]) for r in records},
            "rounds": (min(r["rounds"] for r in records), max(r["rounds"] for r in records)),
            "schedule": switches.get("lr_schedule", "linear"),
        }
    tuning: dict[str, dict[float, list[float]]] = {}
    for t in old["tuning"]:
        tuning.setdefault(t["name"], {}).setdefault(t["lr"], []).append(float(t["score"]))
    best = max(float(r["eval_score"].max()) for records in old["runs"].values() for r in records)
    return {"config": old["config"], "seeds": old["seeds"], "variants": variants, "best_eval": best, "tuning": tuning}


def budget(before: dict) -> dict:
    """Each old run's completions, chapter 08's, and the share."""
    rl = CapstoneConfig().rl
    chapter_08 = rl.iterations * rl.prompts_per_step * rl.group_size
    run = before["config"]["max_completions"]
    return {"run": run, "chapter_08": chapter_08, "share": run / chapter_08}


def format_before(before: dict, baseline: str = "GRPO") -> str:
    """Per variant (by mean): test accuracy mean (std) [worst seed], rounds, learning rate and schedule, and the
    paired difference to ``baseline`` with its 95% t-interval, resolved or unresolved; then the caveats."""
    variants = before["variants"]
    base = variants[baseline]["scores"]
    seeds = before["seeds"]
    lines = [
        f"test accuracy at the end, seeds {seeds[0]}-{seeds[-1]}: mean (std over seeds) [worst seed]; "
        f"difference to {baseline} paired by seed, 95% t-interval ({len(seeds) - 1} df)",
        f"  {'variant':<20} {'accuracy':<22} {'rounds':<7} {'lr':<15} {'- ' + baseline:<26}",
    ]
    order = sorted(variants, key=lambda n: -summary(list(variants[n]["scores"].values())).mean)
    for name in order:
        v = variants[name]
        s = summary(list(v["scores"].values()))
        rounds = f"{v['rounds'][0]}" if v["rounds"][0] == v["rounds"][1] else f"{v['rounds'][0]}-{v['rounds'][1]}"
        lr = f"{v['lr']:g} {v['schedule']}"
        diff = ""
        if name != baseline:
            d = paired_difference(base, v["scores"])
            state = "resolved" if d.excludes_zero() else "unresolved"
            diff = f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}] {state}"
        mark = " *" if name in CAVEATS else ""
        lines.append(f"  {name + mark:<20} {s.mean:.3f} ({s.std:.3f}) [{s.worst:.3f}] {rounds:<7} {lr:<15} {diff}")
    lines.append("  * measures something else:")
    lines.extend(f"    {name}: {why}" for name, why in CAVEATS.items())
    rates = {tuple(sorted(by_lr)) for by_lr in before["tuning"].values()}
    tried = "; ".join(", ".join(f"{lr:g}" for lr in r) for r in sorted(rates))
    lines.append(f"  tuning, seeds 0 and 1 on the validation split: two rates a variant ({tried}), none below the base")
    return "\n".join(lines)
