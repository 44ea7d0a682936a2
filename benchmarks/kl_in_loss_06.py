"""Regenerate ``course_lib/lectures/data/kl_in_loss_06.json``: chapter 06's k1 penalty off-policy, which it only reads.

Section 5's ablation has ``k1 instead of k3`` below ``no KL`` on 3 seeds. Section 4 derives why k1 in the loss
is not neutral on the later steps of a batch: its expected gradient is ``-kl_coef * grad KL(pi_old || pi_theta)``,
which pushes the policy away from the one that sampled the batch. This script trains, on 8 seeds and the lecture's
budget (100 rounds of 10 responses per prompt, 10 Adam steps each):

- GRPO with the course's defaults (k3, ``kl_coef = 0.04``);
- no KL (``kl_coef = 0``);
- k1 in the loss at ``kl_coef = 0.04``, and at ``kl_coef = 0.5`` (a stronger push, to see whether the damage grows
  with it);

with :class:`course_lib.lectures.kl_off_policy.BatchDriftGRPOTrainer`, which records after each batch's steps the
exact ``KL(pi_old || pi_theta)`` per position: how far that batch's steps moved the policy from the one that
sampled it.

Usage::

    python benchmarks/kl_in_loss_06.py                 # about 4 minutes on one core
    python benchmarks/kl_in_loss_06.py --seeds 1 --out /tmp/kl.json

The last line printed is ``total_seconds=...``.
"""

from __future__ import annotations

import time

import torch
from _results import DATA, refuse_overwrite, results_parser, write_results  # benchmarks/_results.py

from course_lib.lectures.kl_off_policy import BatchDriftGRPOTrainer
from course_lib.lectures.sorting_variants import greedy_scores, policy_entropy
from course_lib.tasks import sorting_prompts
from course_lib.trainers.grpo_trainer import GRPOTrainerConfig

OUT = DATA / "kl_in_loss_06.json"
VARIANTS = {
    "k3, kl_coef=0.04 (course default)": {},
    "no KL (kl_coef=0)": {"kl_coef": 0.0},
    "k1 in the loss, kl_coef=0.04": {"kl_kind": "k1"},
    "k1 in the loss, kl_coef=0.5": {"kl_kind": "k1", "kl_coef": 0.5},
}


def main(argv=None) -> dict:
    parser = results_parser(__doc__, OUT)
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args(argv)
    refuse_overwrite(parser, args, OUT, args.seeds != 8, what="fewer seeds")
    torch.set_num_threads(1)
    start = time.perf_counter()
    prompts = sorting_prompts()  # (B=3, T=3)
    runs = {}
    for label, overrides in VARIANTS.items():
        rows = []
        for seed in range(args.seeds):
            trainer = BatchDriftGRPOTrainer.for_sorting(GRPOTrainerConfig(seed=seed, **overrides), prompts)
            history = trainer.train(prompts, progress=False)
            rows.append(
                {
                    "train_greedy": round(greedy_scores(history.model, prompts)["greedy_reward"], 4),
                    "final_entropy": round(policy_entropy(history.model, prompts), 4),
                    "all_equal_last_20": round(sum(history.all_equal_fraction[-20:]) / 20, 4),
                    "batch_drift": [float(f"{d:.4g}") for d in history.batch_drift],  # one per round
                }
            )
        runs[label] = rows
        drift = [d for r in rows for d in r["batch_drift"]]
        greedy = [r["train_greedy"] for r in rows]
        print(
            f"{label:<36} greedy {sum(greedy) / len(greedy):.2f}  largest drift in a batch {max(drift):.3g} nats",
            flush=True,
        )
    total = time.perf_counter() - start
    return write_results(args.out, "kl_in_loss_06.py", total, {"runs": runs}, seeds=args.seeds)


if __name__ == "__main__":
    main()
