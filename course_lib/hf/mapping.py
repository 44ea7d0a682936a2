"""The course's names, TRL's ``GRPOConfig`` fields and verl's config keys, side by side.

One row per idea. ``trl`` is a field of TRL's ``GRPOConfig``; its default is read from the
installed TRL when the table is built (:func:`mapping_rows`), never copied by hand.
``trl_default_assumed`` is what this chapter's prose says TRL's default is: a test fails
when the installed TRL disagrees, so a TRL upgrade that changes a default (TRL's
``loss_type`` went from ``"grpo"`` to ``"dapo"``, its ``beta`` from 0.04 to 0.0) cannot
slip past the chapter unnoticed. verl keys are from its ``ppo_trainer.yaml``
(``actor_rollout_ref.actor.*`` shortened to ``actor.*``, ``actor_rollout_ref.rollout.*`` to ``rollout.*``).
"""

from __future__ import annotations

import dataclasses

from course_lib.hf.loop import HFGRPOConfig

# (course name, what it is, TRL GRPOConfig field, verl key, TRL default this chapter assumes)
ROWS = [
    ("group_size", "G, completions per prompt", "num_generations", "rollout.n", 8),
    (
        "prompts_per_step",
        "B, prompts per round; TRL counts completions: B * G per device (steps_per_generation=1)",
        "per_device_train_batch_size (counts B * G)",
        "data.train_batch_size (prompts, summed over all GPUs)",
        8,
    ),
    (
        "num_minibatches (lm_rl)",
        "optimiser steps per pass over a round's batch (minibatches)",
        "steps_per_generation (/ grad. accum.)",
        "actor.ppo_mini_batch_size (prompts per minibatch)",
        None,
    ),
    (
        "micro_batch_size (lm_rl)",
        "sequences per forward/backward; gradients accumulated over a minibatch",
        "gradient_accumulation_steps (micro-batches per step)",
        "actor.ppo_micro_batch_size_per_gpu",
        1,
    ),
    ("update_epochs", "optimiser steps on each generated batch", "num_iterations", "actor.ppo_epochs", 1),
    ("clip_eps", "PPO's clip range (lower side)", "epsilon", "actor.clip_ratio_low", 0.2),
    ("clip_eps_high", "upper clip range (DAPO's clip-higher)", "epsilon_high", "actor.clip_ratio_high", None),
    ("kl_coef", "weight of the KL penalty (beta)", "beta", "actor.kl_loss_coef (with actor.use_kl_loss)", 0.0),
    ("kl_kind='k3'", "KL estimator", "(always k3)", "actor.kl_loss_type=low_var_kl", None),
    (
        "(none: the course uses plain k3)",
        "k3's gradient at ratio 1 is the forward KL's; times pi/pi_old, the reverse KL's",
        "use_bias_correction_kl",
        "(none)",
        True,
    ),
    (
        "loss_agg",
        "token aggregation: seq-mean-token-mean / token-mean / seq-mean-token-sum-norm",
        "loss_type (grpo / dapo / dr_grpo)",
        "actor.loss_agg_mode",
        "dapo",
    ),
    (
        "normalize_std",
        "divide advantages by the group std",
        "scale_rewards ('group' / 'none')",
        "algorithm.norm_adv_by_std_in_grpo",
        "group",
    ),
    ("group_advantages", "the advantage estimator", "(GRPO's, built in)", "algorithm.adv_estimator=grpo", None),
    (
        "max_new_tokens",
        "completion budget; Dr. GRPO's max_len",
        "max_completion_length",
        "data.max_response_length",
        512,
    ),
    ("temperature", "sampling temperature", "temperature", "rollout.temperature", 1.0),
    ("top_p", "nucleus sampling", "top_p", "rollout.top_p", 1.0),
    ("lr", "learning rate", "learning_rate", "actor.optim.lr", 1e-6),
    ("max_grad_norm", "gradient clipping norm", "max_grad_norm", "actor.grad_clip", 1.0),
    (
        "iterations",
        "rounds; TRL counts optimiser steps: max_steps = iterations x update_epochs",
        "max_steps (x update_epochs)",
        "trainer.total_training_steps (rounds)",
        -1,
    ),
    (
        "save_every",
        "checkpoint period in rounds; TRL: save_steps = save_every x update_epochs",
        "save_steps (x update_epochs)",
        "trainer.save_freq (rounds)",
        500,
    ),
]


def installed_trl_defaults() -> dict:
    """``{field: default}`` of the installed TRL's ``GRPOConfig`` (read from the dataclass, nothing instantiated)."""
    from trl import GRPOConfig

    defaults = {}
    for f in dataclasses.fields(GRPOConfig):
        if f.default is not dataclasses.MISSING:
            defaults[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            defaults[f.name] = f.default_factory()
    return defaults


def trl_field(cell: str) -> str | None:
    """The ``GRPOConfig`` field named by a table cell (its first word), or None for "(...)" cells."""
    return None if cell.startswith("(") else cell.split()[0]


def mapping_rows() -> list[dict]:
    """The table, with the course's default and TRL's default as installed now."""
    course = HFGRPOConfig()
    trl_defaults = installed_trl_defaults()
    rows = []
    for name, meaning, trl, verl, assumed in ROWS:
        field = trl_field(trl)
        rows.append(
            {
                "course": name,
                "meaning": meaning,
                "trl": trl,
                "verl": verl,
                "course_default": getattr(course.rl, name, getattr(course, name, "")),
                "trl_default": trl_defaults.get(field, "(missing!)") if field else "",
                "trl_default_assumed": assumed,
            }
        )
    return rows


def disagreements() -> list[str]:
    """Rows where the installed TRL lacks the field or has another default than the chapter assumes."""
    trl_defaults = installed_trl_defaults()
    problems = []
    for name, _, trl, _, assumed in ROWS:
        field = trl_field(trl)
        if field is None:
            continue
        if field not in trl_defaults:
            problems.append(f"{name}: GRPOConfig has no field {field!r}")
        elif trl_defaults[field] != assumed:
            problems.append(
                f"{name}: GRPOConfig.{field} defaults to {trl_defaults[field]!r}, the chapter says {assumed!r}"
            )
    return problems


def format_table(rows: list[dict] | None = None) -> str:
    """The table as aligned text: course name, TRL field (installed default), verl key."""
    rows = mapping_rows() if rows is None else rows
    lines = [("course", "TRL GRPOConfig (default)", "verl")]
    for row in rows:
        trl = row["trl"] if row["trl"].startswith("(") else f"{row['trl']} = {row['trl_default']!r}"
        lines.append((row["course"], trl, row["verl"]))
    widths = [max(len(line[i]) for line in lines) for i in range(3)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)
