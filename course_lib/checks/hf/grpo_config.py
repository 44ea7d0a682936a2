"""Reading a ``GRPOConfig`` as the config check compares it: the real ``GRPOConfig`` built from the student's
kwargs (TRL's own errors are the feedback), each field a number (a string as its index in TRL's names, spelled
out in the label), and TRL's integers required to be ints (a float breaks TRL's trainer, not its config)."""

from __future__ import annotations

import dataclasses
import functools

import torch

from course_lib.checks.compare import Unfit
from course_lib.hf.trl_contract import grpo_config_kwargs
from course_lib.lm_rl import LMRLConfig

F64 = torch.float64

# String fields compare as their index in these lists (TRL's and transformers' names), spelled out in the label.
NAMES = {
    "loss_type": ("grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
    "scale_rewards": ("group", "batch", "none"),
    "lr_scheduler_type": (
        "linear",
        "cosine",
        "constant",
        "constant_with_warmup",
        "cosine_with_restarts",
        "polynomial",
        "inverse_sqrt",
        "reduce_lr_on_plateau",
        "cosine_with_min_lr",
        "warmup_stable_decay",
    ),
}


@functools.lru_cache(maxsize=1)
def _grpo_config_kinds() -> dict:
    """``{field: (kind, None allowed)}``: what TRL's ``GRPOConfig`` declares each field to be, kind one of
    ``"int"``, ``"float"``, ``"bool"``, ``"str"`` or ``""`` (anything else)."""
    import types

    from trl import GRPOConfig

    kinds = {}
    for f in dataclasses.fields(GRPOConfig):
        declared = set(f.type.__args__) if isinstance(f.type, types.UnionType) else {f.type}
        optional = type(None) in declared
        declared.discard(type(None))
        kinds[f.name] = (next((k.__name__ for k in (bool, int, float, str) if declared == {k}), ""), optional)
    return kinds


def _check_kinds(kwargs: dict) -> None:
    """``Unfit`` for a value GRPOConfig would take but TRL's trainer would not: an int written as a float."""
    kinds = _grpo_config_kinds()
    for key, value in kwargs.items():
        (kind, optional), got = kinds.get(key, ("", True)), type(value).__name__
        if value is None and optional:
            continue
        if kind == "int" and type(value) is not int:
            raise Unfit(
                f"{key} = {value!r} is {'a ' + got if got != 'int' else 'not an int'}: GRPOConfig's {key} is an int "
                "(TRL's trainer fails on a float, at deque(maxlen=...) for one): use // for integer division"
            )
        if kind == "float" and (type(value) is bool or not isinstance(value, (int, float))):
            raise Unfit(f"{key} = {value!r} is a {got}: GRPOConfig's {key} is a number")
        if kind == "bool" and type(value) is not bool:
            raise Unfit(f"{key} = {value!r} is a {got}: GRPOConfig's {key} is True or False")


def _build(kwargs: dict):
    """The real ``GRPOConfig(output_dir=..., **kwargs)``, on the CPU, reporting nowhere; TRL's own error if it fails."""
    import tempfile
    import warnings

    from trl import GRPOConfig

    settings = {"output_dir": tempfile.gettempdir(), "use_cpu": True, "report_to": "none", **kwargs}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # transformers' deprecation notices
            return GRPOConfig(**settings)
    except Exception as error:  # noqa: BLE001 - TRL's own message is the feedback
        raise Unfit(f"GRPOConfig(**kwargs) raised {type(error).__name__}: {error}") from None


def config_fields(result) -> dict:
    """What the real ``GRPOConfig(**result)`` holds in each field the reference sets (TRL's default where unset)."""
    if not isinstance(result, dict):
        raise Unfit(f"GRPOConfig(**kwargs) needs a dict of keyword arguments, got {type(result).__name__}")
    unknown = [key for key in result if key not in _grpo_config_kinds()]
    if unknown:
        raise Unfit(f"GRPOConfig has no field {unknown[0]!r}: GRPOConfig(**kwargs) would raise TypeError")
    _check_kinds(result)
    config = _build(result)
    out = {}
    for key in FIELDS:
        v = getattr(config, key)
        v = getattr(v, "value", v)  # an enum (SchedulerType) -> its string
        if key == "scale_rewards":  # TRL's trainer reads True as "group", False as "none": write either
            v = {True: "group", False: "none"}.get(v, v)
        if key == "epsilon_high" and v is None:  # the trainer's default: epsilon
            v = config.epsilon
        if key == "lr_scheduler_type" and v == "constant_with_warmup" and not _warms_up(config):
            v = "constant"  # no warm-up step: the same constant rate as HF's "constant"
        if key in NAMES:
            if v not in NAMES[key]:
                raise Unfit(f"{key}={v!r} is not one of TRL's names: {', '.join(NAMES[key])}")
            out[_coded(key)] = torch.tensor(float(NAMES[key].index(v)), dtype=F64)
        elif isinstance(v, (int, float)):  # bools too
            out[key] = torch.tensor(float(v), dtype=F64)
        else:
            raise Unfit(f"{key} should be a number, got {type(v).__name__}")
    return out


def _warms_up(config) -> bool:
    """Whether the config's schedule has a warm-up (steps, or a ratio where transformers still has one)."""
    return bool(config.warmup_steps) or bool(getattr(config, "warmup_ratio", 0))


def _coded(key: str) -> str:
    """A named field's output, its names numbered in it: ``"loss_type (0=grpo, 1=dapo, ...)"``."""
    return f"{key} ({', '.join(f'{i}={n}' for i, n in enumerate(NAMES[key]))})"


FIELDS = tuple(grpo_config_kwargs(LMRLConfig()))


def coded_fields() -> tuple[str, ...]:
    """The outputs of :func:`config_fields` that are codes, names or switches as numbers (``loss_type``,
    ``use_bias_correction_kl``): no arithmetic describes how two of them differ."""
    switches = [key for key, value in grpo_config_kwargs(LMRLConfig()).items() if isinstance(value, bool)]
    return tuple(_coded(key) for key in NAMES) + tuple(switches)
