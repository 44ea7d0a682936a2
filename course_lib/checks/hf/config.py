"""The check of chapter 09's course config as TRL's ``GRPOConfig`` keyword arguments (reference:
``course_lib.hf.trl_contract.grpo_config_kwargs``). Each field is compared as the real ``GRPOConfig`` built from
the kwargs holds it (a string as its index in TRL's names, spelled out in the label); TRL's integers must be ints."""

from __future__ import annotations

import dataclasses

import torch

from course_lib.checks import Case, Mistake, check_against_reference, drawing
from course_lib.checks.hf.config_mistakes import BOOKKEEPING, _config_with, left_at_default, share_in_prompts
from course_lib.checks.hf.grpo_config import coded_fields, config_fields
from course_lib.hf.trl_contract import LOSS_TYPES, _check_translatable, grpo_config_kwargs
from course_lib.lm_rl import LMRLConfig

F64 = torch.float64

# ---------------------------------------------------------------------------
# 3. grpo_config_kwargs(cfg, num_processes=1)
# ---------------------------------------------------------------------------


def _config_cases() -> list[Case]:
    return [
        Case(
            "LMRLConfig's defaults (B=64, G=8, 4 epochs of 1 minibatch, 250 rounds), one process",
            {"cfg": LMRLConfig(), "num_processes": 1},
        ),
        Case(
            "B=4, G=8, 2 epochs of 2 minibatches, 50 rounds",
            {"cfg": LMRLConfig(prompts_per_step=4, group_size=8, update_epochs=2, num_minibatches=2, iterations=50)},
        ),
        Case(
            "B=8, G=4, 1 epoch of 2 minibatches, micro_batch_size=4, on 2 processes",
            {
                "cfg": LMRLConfig(
                    prompts_per_step=8,
                    group_size=4,
                    update_epochs=1,
                    num_minibatches=2,
                    micro_batch_size=4,
                    iterations=30,
                ),
                "num_processes": 2,
            },
        ),
        Case(
            "DAPO's settings: token-mean, clip_eps_high=0.28, no KL, overlong filter; B=16, G=4 on 4 processes",
            {
                "cfg": LMRLConfig(
                    prompts_per_step=16,
                    group_size=4,
                    loss_agg="token-mean",
                    clip_eps_high=0.28,
                    kl_coef=0.0,
                    overlong_filter=True,
                    iterations=20,
                ),
                "num_processes": 4,
            },
        ),
        Case(
            "Dr. GRPO: seq-mean-token-sum-norm, normalize_std=False; 5 warm-up rounds, cosine; B=2, G=4",
            {
                "cfg": LMRLConfig(
                    prompts_per_step=2,
                    group_size=4,
                    loss_agg="seq-mean-token-sum-norm",
                    normalize_std=False,
                    warmup_iterations=5,
                    lr_schedule="cosine",
                    iterations=40,
                    max_new_tokens=64,
                    lr=1e-6,
                    seed=3,
                )
            },
        ),
        Case(
            "a constant learning rate after 3 warm-up rounds; temperature 0.7, top_p 0.9, 3 epochs of 2 minibatches",
            {
                "cfg": LMRLConfig(
                    prompts_per_step=4,
                    group_size=2,
                    num_minibatches=2,
                    lr_schedule="constant",
                    warmup_iterations=3,
                    temperature=0.7,
                    top_p=0.9,
                    update_epochs=3,
                    iterations=10,
                    max_grad_norm=0.5,
                )
            },
        ),
        Case(
            "a constant learning rate, no warm-up",
            {"cfg": LMRLConfig(prompts_per_step=4, group_size=2, lr_schedule="constant", iterations=10)},
        ),
        Case(
            "RLOO's advantages (adv_estimator='rloo'): GRPOConfig has no such switch, so raise ValueError",
            {"cfg": LMRLConfig(prompts_per_step=4, group_size=4, adv_estimator="rloo", iterations=10)},
            refuses=True,
        ),
        *[
            Case(
                f"{switch}={value!r}: GRPOConfig has no such switch, so raise ValueError",
                {"cfg": LMRLConfig(prompts_per_step=4, group_size=4, iterations=10, **{switch: value})},
                refuses=True,
            )
            for switch, value in UNTRANSLATABLE.items()
            if switch != "adv_estimator"
        ],
        Case(
            "B=4, G=4 in 2 minibatches of 8 completions on 3 processes: they do not split, so raise ValueError",
            {"cfg": LMRLConfig(prompts_per_step=4, group_size=4, num_minibatches=2, iterations=10), "num_processes": 3},
            refuses=True,
        ),
    ]


UNTRANSLATABLE = {  # LMRLConfig switches with no GRPOConfig field in this translation, and a value that sets them
    "algo": "ppo",
    "adv_estimator": "reinforce++",
    "policy_loss": "gspo",
    "dynamic_sampling": True,
    "overlong_cache": 4,
    "kl_placement": "reward",
    "whiten_advantages": True,
}


def _draw_configs(g: torch.Generator) -> list[Case]:
    """Fresh configs that translate (sizes that split over minibatches, processes and micro-batches; every
    schedule, aggregation and clip), and two that do not (a switch TRL cannot express; sizes that do not split)."""
    cases = []
    for _ in range(4):
        B, G = drawing.choice(g, (2, 4, 8, 16)), drawing.choice(g, (2, 4, 8))
        M = drawing.choice(g, [m for m in (1, 2, 4) if B * G % m == 0])
        n = drawing.choice(g, [p for p in (1, 2, 4) if B % p == 0 and (B * G // M) % p == 0])
        per_process = B * G // M // n
        micro = drawing.choice(g, [None] + [d for d in (1, 2, 4) if per_process % d == 0 and d < per_process])
        cfg = LMRLConfig(
            prompts_per_step=B,
            group_size=G,
            update_epochs=drawing.integer(g, 1, 4),
            num_minibatches=M,
            micro_batch_size=micro,
            iterations=drawing.integer(g, 5, 200),
            warmup_iterations=drawing.integer(g, 0, 4),
            lr_schedule=drawing.choice(g, ("constant", "linear", "cosine")),
            loss_agg=drawing.choice(g, tuple(LOSS_TYPES)),
            normalize_std=drawing.choice(g, (True, False)),
            clip_eps_high=drawing.choice(g, (None, 0.28)),
            kl_coef=drawing.choice(g, (0.0, 0.02, 0.04)),
            overlong_filter=drawing.choice(g, (True, False)),
            temperature=drawing.choice(g, (1.0, 0.7)),
            max_new_tokens=drawing.choice(g, (8, 32, 128)),
            seed=drawing.integer(g, 0, 9),
        )
        cases.append(Case(f"{cfg}, num_processes={n}", {"cfg": cfg, "num_processes": n}))
    switch = drawing.choice(g, sorted(UNTRANSLATABLE))
    odd = LMRLConfig(prompts_per_step=4, group_size=4, iterations=10, **{switch: UNTRANSLATABLE[switch]})
    cases.append(
        Case(
            f"{switch}={UNTRANSLATABLE[switch]!r}: no GRPOConfig field, so raise ValueError", {"cfg": odd}, refuses=True
        )
    )
    uneven = LMRLConfig(prompts_per_step=2, group_size=3, num_minibatches=2, iterations=10)
    cases.append(
        Case(
            "B=2, G=3 in 2 minibatches on 2 processes: 3 completions do not split, raise ValueError",
            {"cfg": uneven, "num_processes": 2},
            refuses=True,
        )
    )
    return cases


COUNTS_COMPLETIONS = (
    "per_device_train_batch_size counts completions, not prompts: one optimiser step sees "
    "B * G / num_minibatches of them (per process)"
)


def check_grpo_config_kwargs(fn) -> bool:
    """Check a student's ``grpo_config_kwargs(cfg, num_processes=1)`` field by field, as ``GRPOConfig`` reads it."""
    mistakes = [
        Mistake(
            COUNTS_COMPLETIONS,
            _config_with(per_device_train_batch_size=lambda c, n, k: k["per_device_train_batch_size"] // c.group_size),
        ),
        # The same count in prompts, with the micro-batch and the forward passes per step computed from it.
        Mistake(COUNTS_COMPLETIONS, share_in_prompts),
        Mistake(
            "max_steps counts TRL's optimiser steps, not the course's rounds: each round takes "
            "update_epochs * num_minibatches of them, so max_steps = iterations * update_epochs * "
            "num_minibatches",
            _config_with(max_steps=lambda c, n, k: c.iterations),
        ),
        Mistake(
            "max_steps = iterations * update_epochs forgets the minibatches: each epoch takes num_minibatches "
            "optimiser steps",
            _config_with(max_steps=lambda c, n, k: c.iterations * c.update_epochs),
        ),
        Mistake(
            "warmup_steps counts optimiser steps too: warmup_iterations * update_epochs * num_minibatches",
            _config_with(warmup_steps=lambda c, n, k: c.warmup_iterations),
        ),
        Mistake(
            "a minibatch is B * G / num_minibatches completions: per_device_train_batch_size is not the whole "
            "B * G when num_minibatches > 1",
            _config_with(
                per_device_train_batch_size=lambda c, n, k: c.prompts_per_step * c.group_size // n,
                gradient_accumulation_steps=1,
                steps_per_generation=1,
            ),
        ),
        Mistake(
            "steps_per_generation is not set: TRL then generates every gradient_accumulation_steps forward "
            "passes, B / num_minibatches prompts at a time; set it to num_minibatches * "
            "gradient_accumulation_steps so one generation serves the round",
            _config_with(steps_per_generation=None),
        ),
        Mistake(
            "the processes are forgotten: per_device_train_batch_size and gradient_accumulation_steps are per "
            "process; each process takes the minibatch divided by num_processes",
            lambda cfg, num_processes=1: grpo_config_kwargs(cfg, 1),
        ),
        Mistake(
            "gradient_accumulation_steps counts one process's forward passes per optimiser step: the minibatch "
            "divided by num_processes, then by per_device_train_batch_size; yours divides the whole minibatch, "
            "all processes together",
            _config_with(
                gradient_accumulation_steps=lambda c, n, k: _whole_minibatch(c) // k["per_device_train_batch_size"],
                steps_per_generation=lambda c, n, k: (
                    c.num_minibatches * (_whole_minibatch(c) // k["per_device_train_batch_size"])
                ),
            ),
        ),
        Mistake(
            "a switch this translation cannot express (adv_estimator, policy_loss, algo, dynamic sampling, the "
            "overlong cache, kl_placement, whiten_advantages) was dropped: raise ValueError naming it, or TRL "
            "trains something else",
            lambda cfg, num_processes=1: grpo_config_kwargs(_translatable(cfg), num_processes),
        ),
        Mistake(
            "only adv_estimator is refused: every switch GRPOConfig cannot express (algo, policy_loss, "
            "dynamic_sampling, overlong_cache, kl_placement, whiten_advantages) must raise ValueError too",
            _refuses_adv_estimator_only,
        ),
        Mistake(
            "B * G completions that do not split evenly into minibatches, processes and micro-batches were "
            "rounded down (//): raise ValueError, or TRL trains on other batches than the course",
            _config_floored,
        ),
        Mistake(
            "loss_type is not set: TRL's default is 'dapo' (token-mean); map loss_agg: "
            f"{', '.join(f'{a} -> {b}' for a, b in LOSS_TYPES.items())}",
            _config_with(loss_type=None),
        ),
        Mistake(
            "the loss_type names are swapped: TRL's 'grpo' is the per-sequence mean (seq-mean-token-mean), "
            "'dapo' the token mean, 'dr_grpo' the sum over max_completion_length",
            _config_with(
                loss_type=lambda c, n, k: {"grpo": "dapo", "dapo": "grpo"}.get(k["loss_type"], k["loss_type"])
            ),
        ),
        Mistake("beta is not set: TRL's default is 0.0 (no KL term); beta = kl_coef", _config_with(beta=None)),
        Mistake(
            "use_bias_correction_kl is left at TRL's default (True: k3 times the ratio pi / pi_old); the "
            "course's k3 (DeepSeekMath's) has no such factor: set it to False",
            _config_with(use_bias_correction_kl=None),
        ),
        Mistake(
            "scale_rewards is reversed: normalize_std=True divides by the group's std, 'group'; False is "
            "Dr. GRPO's 'none'",
            _config_with(scale_rewards=lambda c, n, k: "none" if c.normalize_std else "group"),
        ),
        Mistake(
            "HF's 'constant' schedule ignores warmup_steps; a warm-up then a constant rate is 'constant_with_warmup'",
            _config_with(
                lr_scheduler_type=lambda c, n, k: "constant" if c.lr_schedule == "constant" else c.lr_schedule
            ),
        ),
        Mistake(
            "num_iterations is TRL's epochs over one generated batch: update_epochs",
            _config_with(num_iterations=lambda c, n, k: c.num_minibatches),
        ),
        *BOOKKEEPING,
        *left_at_default(),
    ]
    return check_against_reference(
        fn,
        grpo_config_kwargs,
        _config_cases(),
        name="grpo_config_kwargs",
        mistakes=mistakes,
        outputs=config_fields,
        categorical=coded_fields(),
        dtypes=(F64,),
        draw=_draw_configs,
        check_dtype=True,
    )


def _whole_minibatch(cfg) -> int:
    return cfg.prompts_per_step * cfg.group_size // cfg.num_minibatches


def _refuses_adv_estimator_only(cfg, num_processes=1):
    """Issue 44's student: the one switch the notebook's example shows is refused, the others dropped."""
    if cfg.adv_estimator != LMRLConfig().adv_estimator:
        raise ValueError(f"adv_estimator={cfg.adv_estimator!r} has no GRPOConfig field")
    return grpo_config_kwargs(_translatable(cfg), num_processes)


def _translatable(cfg):
    """``cfg`` with every switch this translation cannot express put back to GRPO's default."""
    defaults = LMRLConfig()
    return dataclasses.replace(cfg, **{name: getattr(defaults, name) for name in UNTRANSLATABLE})


def _config_floored(cfg, num_processes=1):
    """The reference's arithmetic with // everywhere and no check that the sizes split (switches refused)."""
    _check_translatable(cfg)
    B, G, K, M = cfg.prompts_per_step, cfg.group_size, cfg.update_epochs, cfg.num_minibatches
    per_process = B * G // M // num_processes
    micro = cfg.micro_batch_size or per_process
    kwargs = grpo_config_kwargs(_translatable(dataclasses.replace(cfg, num_minibatches=1, micro_batch_size=None)))
    accumulation = max(per_process // max(micro, 1), 1)
    kwargs.update(
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=M * accumulation,
        num_iterations=K,
        max_steps=cfg.iterations * K * M,
        warmup_steps=cfg.warmup_iterations * K * M,
    )
    return kwargs
