"""Exercise check of chapter 07: memory accounting for PPO and GRPO.

The checks import the reference implementations of ``course_lib.lectures.memory``; the maths module never
imports its checks, so the file a student opens is the maths alone.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from course_lib.checks import Case, Mistake, check_against_reference, drawing
from course_lib.lectures.memory import ACCOUNT_KEYS, DTYPE_BYTES, memory_accounting


def _account_outputs(result) -> dict[str, Any]:
    if not isinstance(result, Mapping):
        raise TypeError(f"expected a dict with the keys {', '.join(ACCOUNT_KEYS)}")
    missing = [key for key in ACCOUNT_KEYS if key not in result]
    if missing:
        raise KeyError(f"the returned dict has no {', '.join(repr(k) for k in missing)}")
    return {key: result[key] for key in ACCOUNT_KEYS}


def _accounting_with(
    *,
    adam_states=2,
    master="mixed",
    frozen_grads=False,
    frozen_optimizer=False,
    critic_optimizer=True,
    trained_grads=True,
    bits=False,
    weights_always_fp32=False,
    optimizer_like_weights=False,
    master_from_declared=False,
    grads_like_optimizer=False,
    master_like_weights=False,
    critic_grads=True,
    grads_in_optimizer_row=False,
    total_without_optimizer=False,
    fp64_bytes=8,
    unit=1,
    frozen_bytes=None,
):
    """A wrong memory_accounting: the reference formula with one classic slip switched on (``master="different"``:
    a master copy whenever the two dtypes differ; ``frozen_grads="reference"``: gradients for the reference only;
    ``unit``: bytes per reported unit, 1e9 for gigabytes)."""

    def wrong(
        n_params_actor,
        n_params_critic=0,
        n_params_ref=0,
        n_params_reward=0,
        weights_dtype="bf16",
        optimizer_dtype="fp32",
    ):
        sizes = {**DTYPE_BYTES, "fp64": fp64_bytes}
        w, o = sizes[weights_dtype], sizes[optimizer_dtype]
        declared_narrower = w < o  # what the dtypes say, before any slip
        if weights_always_fp32:
            w = 4
        if optimizer_like_weights:
            o = w
        narrower = declared_narrower if master_from_declared else w < o
        if bits:
            w, o = 8 * w, 8 * o
        copy_bytes = w if master_like_weights else o
        copy = {"mixed": copy_bytes if narrower else 0, "never": 0, "always": o, "different": o if w != o else 0}
        grad = (o if grads_like_optimizer else w) if trained_grads else 0  # bytes of one gradient
        frozen = {None: w, "optimizer": o, "fp32": 4}  # bytes per parameter of a frozen model
        trained = n_params_actor + (n_params_critic if critic_optimizer else 0)
        if frozen_optimizer:
            trained += n_params_ref + n_params_reward
        account = {
            "actor": n_params_actor * (w + grad),
            "critic": n_params_critic * (w + (grad if critic_grads else 0)),
            "reference": n_params_ref * frozen[frozen_bytes] * (2 if frozen_grads else 1),
            "reward": n_params_reward * frozen[frozen_bytes] * (2 if frozen_grads is True else 1),
            "optimizer": trained * (adam_states * o + copy[master]),
        }
        if grads_in_optimizer_row:  # the gradients moved from the models' rows to the optimizer's
            account["actor"], account["critic"] = n_params_actor * w, n_params_critic * w
            account["optimizer"] += (n_params_actor + n_params_critic) * grad
        account["total"] = sum(account.values())
        if total_without_optimizer:
            account["total"] -= account["optimizer"]
        return {key: value / unit for key, value in account.items()} if unit != 1 else account

    return wrong


def check_memory_accounting(fn) -> bool:
    """Check a student's ``memory_accounting(n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0,
    weights_dtype="bf16", optimizer_dtype="fp32")``."""

    seven_b = 7_000_000_000
    cases = [
        Case(
            "the CPU toy in fp32: actor 650, critic 6,849, reference 650 parameters (fp32 weights: no master copy)",
            {
                "n_params_actor": 650,
                "n_params_critic": 6_849,
                "n_params_ref": 650,
                "weights_dtype": "fp32",
                "optimizer_dtype": "fp32",
            },
        ),
        Case(
            "PPO-RLHF at 7B: actor, critic, reference and reward model of 7e9 parameters each, bf16 / fp32 Adam",
            {
                "n_params_actor": seven_b,
                "n_params_critic": seven_b,
                "n_params_ref": seven_b,
                "n_params_reward": seven_b,
            },
        ),
        Case(
            "GRPO at 7B: actor and reference only (n_params_critic and n_params_reward left at 0)",
            {"n_params_actor": seven_b, "n_params_ref": seven_b},
        ),
        Case(
            "a 7B actor with a 1B critic and a 1B reward model, no reference",
            {"n_params_actor": seven_b, "n_params_critic": 1_000_000_000, "n_params_reward": 1_000_000_000},
        ),
        Case(
            "fp16 weights, fp32 Adam: an actor of 1,000 parameters alone",
            {"n_params_actor": 1_000, "weights_dtype": "fp16", "optimizer_dtype": "fp32"},
        ),
        Case(
            "LoRA-like: 40M trainable parameters, the 7B frozen base counted as the reference",
            {"n_params_actor": 40_000_000, "n_params_ref": seven_b},
        ),
        Case(
            "everything in bf16, Adam's moments too (then there is no master copy)",
            {
                "n_params_actor": 5_000,
                "n_params_critic": 3_000,
                "n_params_ref": 5_000,
                "weights_dtype": "bf16",
                "optimizer_dtype": "bf16",
            },
        ),
        Case(
            "fp64 weights and fp32 Adam: a wider weight needs no master copy",
            {"n_params_actor": 100, "n_params_ref": 100, "weights_dtype": "fp64", "optimizer_dtype": "fp32"},
        ),
    ]
    mistakes = [
        Mistake(
            "the optimizer row has no master copy: with bf16 (or fp16) weights and fp32 Adam, mixed precision "
            "keeps an fp32 copy of every trained weight, 4 + 4 + 4 = 12 bytes of optimizer state per parameter",
            _accounting_with(master="never"),
        ),
        Mistake(
            "Adam keeps two states per trained parameter (exp_avg and exp_avg_sq), you counted one",
            _accounting_with(adam_states=1),
        ),
        Mistake(
            "the master copy is only needed when the weights are narrower than the optimizer's dtype "
            "(bf16 or fp16 weights with fp32 Adam); fp32 weights are their own master",
            _accounting_with(master="always"),
        ),
        Mistake(
            "the frozen reference (and reward model) got gradients: a frozen model stores its weights only",
            _accounting_with(frozen_grads=True),
        ),
        Mistake(
            "the frozen reference got gradients, as if it were the actor it was copied from: a frozen model "
            "stores its weights only",
            _accounting_with(frozen_grads="reference"),  # the reward model counted right
        ),
        Mistake(
            "the frozen reference (and reward model) got Adam states: only trained models have optimizer state",
            _accounting_with(frozen_optimizer=True),
        ),
        Mistake(
            "the critic is trained too: its parameters need Adam states (and a master copy) in the optimizer row",
            _accounting_with(critic_optimizer=False),
        ),
        Mistake(
            "trained models also store a gradient per parameter, in the weights' dtype: actor and critic rows "
            "are 2 x weights",
            _accounting_with(trained_grads=False),
        ),
        Mistake(
            "bf16 and fp16 are 16 *bits* = 2 bytes, fp32 is 4 bytes: you counted bits", _accounting_with(bits=True)
        ),
        *(
            Mistake(
                "bytes per parameter ignore weights_dtype: bf16 and fp16 weights take 2 bytes, not 4",
                _accounting_with(weights_always_fp32=True, master_from_declared=declared),
            )
            for declared in (False, True)
        ),
        Mistake(
            "Adam's states are stored in optimizer_dtype (fp32: 4 bytes each), not in the weights' dtype",
            _accounting_with(optimizer_like_weights=True),
        ),
        Mistake(
            "the gradients are counted in optimizer_dtype; they are stored like the weights, in weights_dtype "
            "(bf16: 2 bytes each), so the actor and critic rows are 2 x weights_dtype bytes per parameter",
            _accounting_with(grads_like_optimizer=True),
        ),
        Mistake(
            "the master copy is counted in weights_dtype; it is a copy in optimizer_dtype (fp32: 4 bytes), that is "
            "its point: updates too small for bf16 accumulate there",
            _accounting_with(master_like_weights=True),
        ),
        Mistake(
            "a master copy is counted whenever the two dtypes differ; only weights *narrower* than optimizer_dtype "
            "need one (fp64 weights with fp32 Adam do not)",
            _accounting_with(master="different"),
        ),
        Mistake(
            "the critic row has no gradients: the critic is trained too, so it stores weights + gradients, "
            "2 x weights_dtype bytes per parameter, like the actor",
            _accounting_with(critic_grads=False),
        ),
        Mistake(
            "the gradients are counted in the optimizer row; they belong to the model they train: the actor and "
            "critic rows are weights + gradients, the optimizer row Adam's states (and the master copy) only",
            _accounting_with(grads_in_optimizer_row=True),
        ),
        Mistake(
            "the total leaves out the optimizer row: it is the sum of every row, the optimizer's included",
            _accounting_with(total_without_optimizer=True),
        ),
        *(
            Mistake(
                f"the frozen reference (and reward model) are counted in {words}; a frozen model is loaded in "
                "weights_dtype like the actor (bf16: 2 bytes per parameter)",
                _accounting_with(frozen_bytes=frozen),
            )
            for words, frozen in (("optimizer_dtype", "optimizer"), ("fp32 (4 bytes) whatever weights_dtype", "fp32"))
        ),
        Mistake("fp64 takes 8 bytes per number (64 bits), not 4", _accounting_with(fp64_bytes=4)),
        Mistake(
            "the sizes are in gigabytes; the exercise asks for bytes, as ints (no division by 1e9 or 2**30)",
            _accounting_with(unit=1e9),
        ),
        Mistake(
            "the sizes are in gibibytes; the exercise asks for bytes, as ints (no division by 1e9 or 2**30)",
            _accounting_with(unit=2**30),
        ),
    ]
    return check_against_reference(
        fn,
        memory_accounting,
        cases,
        name="memory_accounting",
        mistakes=mistakes,
        outputs=_account_outputs,
        dtypes=(torch.float64,),
        draw=_draw_models,
        check_dtype=True,
    )


def _draw_models(g: torch.Generator) -> list[Case]:
    """Fresh sizes: which models are there, how large, in which dtypes."""
    cases = []
    for _ in range(4):
        sizes = {
            name: drawing.choice(g, (0, 0, drawing.integer(g, 1, 10**6), drawing.integer(g, 1, 9) * 10**9))
            for name in ("n_params_critic", "n_params_ref", "n_params_reward")
        }
        kwargs = {"n_params_actor": drawing.integer(g, 1, 10**10), **sizes}
        kwargs.update(
            weights_dtype=drawing.choice(g, sorted(DTYPE_BYTES)),
            optimizer_dtype=drawing.choice(g, ("fp32", "bf16", "fp64")),
        )
        cases.append(Case(", ".join(f"{k}={v}" for k, v in kwargs.items()), kwargs))
    return cases
