"""More known mistakes of chapter 09's ``grpo_config_kwargs`` (checked in :mod:`.config`): a field left at TRL's
default, one field per mistake, and the bookkeeping slips of a translation (a cap for a width, B for G, forward
passes for optimiser steps, the micro-batch forgotten, TRL's 'bnpo' for the course's token mean).

Each mistake is the reference's kwargs with some fields computed wrongly (:func:`_config_with`), so it differs
from the reference exactly where the student's slip shows and nowhere else.
"""

from __future__ import annotations

import dataclasses
import functools

from course_lib.checks import Mistake
from course_lib.hf.trl_contract import grpo_config_kwargs


def _config_with(**changes):
    """The reference's kwargs with some fields computed wrongly (a value, or a function of cfg and num_processes);
    a change of None leaves the field out (TRL's default)."""

    def wrong(cfg, num_processes=1):
        kwargs = grpo_config_kwargs(cfg, num_processes)
        for key, change in changes.items():
            if change is None:
                kwargs.pop(key)
            else:
                kwargs[key] = change(cfg, num_processes, kwargs) if callable(change) else change
        return kwargs

    return wrong


# Where the course's value of each field comes from, for the message of a field left at TRL's default. The fields
# with a mistake of their own for it (steps_per_generation, loss_type, beta, use_bias_correction_kl) are not here.
SOURCES = {
    "num_generations": "cfg.group_size, the completions per prompt",
    "per_device_train_batch_size": "completions per forward pass: micro_batch_size, or a process's share of "
    "a minibatch",
    "gradient_accumulation_steps": "forward passes per optimiser step: a process's share of a minibatch // "
    "per_device_train_batch_size",
    "num_iterations": "cfg.update_epochs",
    "max_steps": "cfg.iterations * update_epochs * num_minibatches (optimiser steps)",
    "max_completion_length": "cfg.max_new_tokens",
    "temperature": "cfg.temperature",
    "top_p": "cfg.top_p",
    "learning_rate": "cfg.lr",
    "lr_scheduler_type": "cfg.lr_schedule ('constant_with_warmup' for a constant rate after a warm-up)",
    "warmup_steps": "cfg.warmup_iterations * update_epochs * num_minibatches (optimiser steps)",
    "max_grad_norm": "cfg.max_grad_norm",
    "epsilon": "cfg.clip_eps",
    "epsilon_high": "cfg.clip_eps_high (cfg.clip_eps when it is None)",
    "scale_rewards": "'group' when cfg.normalize_std, else 'none'",
    "mask_truncated_completions": "cfg.overlong_filter (DAPO's overlong filter)",
    "seed": "cfg.seed",
}


@functools.lru_cache(maxsize=1)
def _trl_defaults() -> dict:
    from trl import GRPOConfig

    return {f.name: f.default for f in dataclasses.fields(GRPOConfig)}


def left_at_default() -> list[Mistake]:
    """One mistake a field: the field not set (or set to TRL's default value), so GRPOConfig keeps its default."""
    defaults = _trl_defaults()
    return [
        Mistake(
            f"{key} is left at TRL's default ({defaults[key]!r}): is it set at all? The course's run sets "
            f"{key} from {source}",
            _config_with(**{key: None}),
        )
        for key, source in SOURCES.items()
    ]


def _steps_per_generation_is_m(cfg, num_processes, kwargs):
    return cfg.num_minibatches


def _micro_batch_ignored(cfg, num_processes=1):
    """The reference as if micro_batch_size were None: one forward pass a process's whole share."""
    return grpo_config_kwargs(dataclasses.replace(cfg, micro_batch_size=None), num_processes)


def _steps(field: str, rounds: str, how: str, change) -> Mistake:
    """``field`` (a count of optimiser steps, ``rounds`` of them a round each) computed with one factor wrong."""
    return Mistake(
        f"{field} {how}: it counts optimiser steps, {rounds} * update_epochs * num_minibatches (each round takes "
        "update_epochs * num_minibatches of them, all processes together)",
        _config_with(**{field: change}),
    )


def _step_slips() -> list[Mistake]:
    """The slips of the two step counts, max_steps and warmup_steps: a factor forgotten or one too many (max_steps
    without num_minibatches has a mistake of its own in :mod:`.config`)."""
    slips = []
    for field, rounds in (("max_steps", "iterations"), ("warmup_steps", "warmup_iterations")):
        slips += [
            _steps(field, rounds, "is multiplied by num_processes", lambda c, n, k, f=field: k[f] * n),
            _steps(field, rounds, "forgets update_epochs", lambda c, n, k, f=field: k[f] // c.update_epochs),
        ]
    slips.append(
        _steps(
            "warmup_steps",
            "warmup_iterations",
            "forgets num_minibatches",
            lambda c, n, k: k["warmup_steps"] // c.num_minibatches,
        )
    )
    return slips


BOOKKEEPING = [
    Mistake(
        "epsilon_high is the clip's width above 1, like clip_eps_high (TRL caps the ratio at 1 + epsilon_high): "
        "epsilon_high = clip_eps_high (clip_eps when clip_eps_high is None), not the cap 1 + clip_eps_high",
        _config_with(epsilon_high=lambda c, n, k: 1 + k["epsilon_high"]),
    ),
    Mistake(
        "num_generations is the group size G (completions per prompt), not the number of prompts B",
        _config_with(num_generations=lambda c, n, k: c.prompts_per_step),
    ),
    Mistake(
        "micro_batch_size is ignored: when it is set, one forward pass takes micro_batch_size completions "
        "(per_device_train_batch_size), and gradient_accumulation_steps = a process's share // micro_batch_size "
        "passes make one optimiser step",
        _micro_batch_ignored,
    ),
    Mistake(
        "steps_per_generation counts forward passes, not optimiser steps: one generated batch serves "
        "num_minibatches * gradient_accumulation_steps of them",
        _config_with(steps_per_generation=_steps_per_generation_is_m),
    ),
    Mistake(
        "the course's token-mean divides by every token of the optimiser step, which is TRL's 'dapo'; 'bnpo' "
        "divides by the tokens of one forward pass (one process's micro-batch)",
        _config_with(loss_type=lambda c, n, k: "bnpo" if k["loss_type"] == "dapo" else k["loss_type"]),
    ),
    Mistake(
        "max_steps counts optimiser steps, not forward passes: iterations * update_epochs * num_minibatches, "
        "without gradient_accumulation_steps",
        _config_with(max_steps=lambda c, n, k: k["max_steps"] * k["gradient_accumulation_steps"]),
    ),
    Mistake(
        "num_iterations is the number of epochs over one generated batch, update_epochs; the minibatches of an "
        "epoch are steps_per_generation's business, not num_iterations'",
        _config_with(num_iterations=lambda c, n, k: c.update_epochs * c.num_minibatches),
    ),
    Mistake(
        "with micro_batch_size None, a forward pass takes a process's whole share of the minibatch (one pass per "
        "optimiser step), not one completion: gradient_accumulation_steps is 1 then",
        _config_with(
            gradient_accumulation_steps=lambda c, n, k: _share(c, n) // (c.micro_batch_size or 1),
            steps_per_generation=lambda c, n, k: c.num_minibatches * (_share(c, n) // (c.micro_batch_size or 1)),
        ),
    ),
    Mistake(
        "with clip_eps_high None, epsilon_high is clip_eps (a symmetric clip), not DAPO's 0.28",
        _config_with(epsilon_high=lambda c, n, k: c.clip_eps_high or 0.28),
    ),
    *_step_slips(),
]


def share_in_prompts(cfg, num_processes=1):
    """A process's share of a minibatch counted in prompts, B / num_minibatches / num_processes (at least one),
    where it is completions, B * G / num_minibatches / num_processes: the micro-batch (micro_batch_size, or the
    whole share, never more than the share) and the forward passes per optimiser step follow from it."""
    kwargs = grpo_config_kwargs(cfg, num_processes)  # the sizes that do not split are refused as the reference does
    share = max(cfg.prompts_per_step // cfg.num_minibatches // num_processes, 1)
    micro = min(cfg.micro_batch_size or share, share)
    accumulation = share // micro
    kwargs.update(
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=cfg.num_minibatches * accumulation,
    )
    return kwargs


def _share(cfg, num_processes) -> int:
    """One process's completions per optimiser step."""
    return cfg.prompts_per_step * cfg.group_size // cfg.num_minibatches // num_processes
