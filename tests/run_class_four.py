"""Run every exercise's check on every student of the fourth class, once, and store what each check said.

    PYTHONPATH=$PWD python tests/run_class_four.py
    PYTHONPATH=$PWD python tests/run_class_four.py --students class_five_students   # a later class, the same way

Each check is called exactly as its check cell calls it (``check_x(student)``), after the setup cell's seeding.
A check that passes prints its line; one that fails raises, and the message it raised is what a student sees.
The results go to ``tests/class_four_first_sight.json``, one record per row of ``class_four_students.ROWS``.
This module holds no tests (pytest does not collect it).
"""

import argparse
import contextlib
import importlib
import io
import json
import random
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


# exercise -> (module under course_lib.checks, check function), as each exercise notebook's check cell imports it
CHECKS = {
    "discounted_return": ("warmup", "check_discounted_return"),
    "reward_to_go": ("warmup", "check_reward_to_go"),
    "sort_inclusion_ordering_reward": ("rewards", "check_sort_inclusion_ordering_reward"),
    "math_answer_reward": ("rewards", "check_math_answer_reward"),
    "gather_log_probs": ("policy_gradient", "check_gather_log_probs"),
    "reinforce_loss": ("policy_gradient", "check_reinforce_loss"),
    "mc_policy_gradient": ("mc_gradient", "check_mc_policy_gradient"),
    "compute_deltas": ("baselines", "check_compute_deltas"),
    "gradient_variance": ("baselines", "check_gradient_variance"),
    "gae_table": ("gae", "check_gae_table"),
    "compute_gae": ("gae", "check_compute_gae"),
    "td_residuals": ("gae", "check_td_residuals"),
    "clipped_surrogate_loss": ("ppo", "check_clipped_surrogate_loss"),
    "value_loss": ("ppo", "check_value_loss"),
    "PPOLoss": ("ppo", "check_ppo_loss"),
    "group_advantages": ("grpo", "check_group_advantages"),
    "kl_estimate": ("grpo", "check_kl_estimate"),
    "aggregate_loss": ("grpo", "check_aggregate_loss"),
    "grpo_loss": ("grpo", "check_grpo_loss"),
    "memory_accounting": ("memory", "check_memory_accounting"),
    "read_sweep": ("sweep", "check_read_sweep"),
    "addition_exact_reward": ("capstone", "check_addition_exact_reward"),
    "completion_mask": ("capstone", "check_completion_mask"),
    "grpo_step": ("capstone", "check_grpo_step"),
    "answer_reward": ("hf", "check_answer_reward"),
    "completion_logps": ("hf", "check_completion_logps"),
    "grpo_config_kwargs": ("hf", "check_grpo_config_kwargs"),
    "pass_at_k": ("reasoning", "check_pass_at_k"),
    "aggregation_token_weight": ("reasoning", "check_aggregation_token_weight"),
    "completion_style": ("reasoning", "check_completion_style"),
    "style_share": ("reasoning", "check_style_share"),
    "rloo_advantages": ("family", "check_rloo_advantages"),
    "gspo_sequence_log_ratio": ("family", "check_gspo_sequence_log_ratio"),
    "cispo_loss": ("family", "check_cispo_loss"),
}


def seed_like_the_setup_cell(seed: int = 0) -> None:
    """What every exercise notebook's setup cell does before its check cells run."""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


def judge(row: dict) -> dict:
    """Run the row's check on its student; what the check said, as the student would see it."""
    module, name = CHECKS[row["exercise"]]
    check = getattr(importlib.import_module(f"course_lib.checks.{module}"), name)
    seed_like_the_setup_cell()
    printed = io.StringIO()
    started = time.perf_counter()
    error_type, message = None, None
    with contextlib.redirect_stdout(printed):
        try:
            check(row["student"])
        except Exception as error:  # the check cell shows whatever it raised
            error_type = type(error).__name__
            message = str(error)
            if not isinstance(error, AssertionError):
                message += "\n" + "".join(traceback.format_exception(error)[-3:])
    return {
        "exercise": row["exercise"],
        "chapter": row["chapter"],
        "student": row["student"].__name__,
        "right": row["right"],
        "mistake": row["mistake"],
        "passed": error_type is None,
        "error_type": error_type,
        "message": message,
        "printed": printed.getvalue(),
        "seconds": round(time.perf_counter() - started, 2),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", default="class_four_students", help="the module under tests/ holding ROWS")
    args = parser.parse_args(argv)
    students = importlib.import_module(args.students)
    torch.set_num_threads(1)
    results = []
    for row in students.ROWS:
        result = judge(row)
        verdict = "passed" if result["passed"] else f"rejected ({result['error_type']})"
        print(f"{result['chapter']} {result['student']:<48} right={result['right']!s:<5} {verdict}", flush=True)
        results.append(result)
    out = HERE / f"{args.students.removesuffix('_students')}_first_sight.json"
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {out.relative_to(HERE.parent)}: {len(results)} rows")


if __name__ == "__main__":
    main()
