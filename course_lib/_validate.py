"""Argument validation shared by every public function of the course.

Every public function checks its inputs first and raises ``ValueError`` that
names the argument, says what was given and what was expected. Students meet
these messages when they call the library with the wrong thing, so they are
written to teach ("adv: expected shape (4, 3) like logp, got (4,)").
"""

from __future__ import annotations

import math
from typing import Iterable

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def require_tensor(name: str, x, *, floating: bool = True, min_dim: int = 0) -> torch.Tensor:
    """Check that ``x`` is a tensor (of a floating dtype when ``floating``)."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if floating and x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"{name}: expected a floating-point tensor (float32 or float64), got dtype {x.dtype}")
    if x.dim() < min_dim:
        raise ValueError(f"{name}: expected at least {min_dim} dimension(s), got shape {tuple(x.shape)}")
    return x


def require_shape(name: str, x: torch.Tensor, shape: Iterable[int], like: str | None = None) -> None:
    """Check that ``x.shape == shape``; ``like`` names the argument the shape comes from."""
    shape = tuple(shape)
    if tuple(x.shape) != shape:
        source = f" like {like}" if like else ""
        raise ValueError(f"{name}: expected shape {shape}{source}, got {tuple(x.shape)}")


def require_same_shape(name: str, x, like_name: str, like: torch.Tensor, *, floating: bool = True) -> torch.Tensor:
    """Check that ``x`` is a tensor with the same shape as ``like``."""
    require_tensor(name, x, floating=floating)
    require_shape(name, x, like.shape, like=like_name)
    return x


def require_mask(name: str, mask, like_name: str, like: torch.Tensor) -> torch.Tensor:
    """Check a validity mask and return it as a float tensor of ``like``'s dtype.

    A mask may be bool, integer (0/1) or floating (0.0/1.0); it must have the
    same shape as ``like``. Entries where it is 0 are padding: they never
    change a result.
    """
    if not isinstance(mask, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor of 0/1 or bool, got {type(mask).__name__}")
    require_shape(name, mask, like.shape, like=like_name)
    if mask.dtype != torch.bool:
        if not bool(((mask == 0) | (mask == 1)).all()):
            raise ValueError(f"{name}: expected only 0 and 1 (or a bool tensor), got other values")
    return mask.to(like.dtype)


def valid_entries(name: str, mask, like_name: str, like: torch.Tensor) -> torch.Tensor:
    """A checked mask as a bool tensor of ``like``'s shape; ``None`` means every entry is valid."""
    if mask is None:
        return torch.ones_like(like, dtype=torch.bool)
    return require_mask(name, mask, like_name, like) > 0


def require_clip_range(clip_eps, clip_eps_high=None) -> tuple[float, float]:
    """PPO's clip range ``(clip_eps, clip_eps_high)``, both positive; ``clip_eps_high`` defaults to ``clip_eps``."""
    clip_eps = require_positive("clip_eps", clip_eps)
    return clip_eps, clip_eps if clip_eps_high is None else require_positive("clip_eps_high", clip_eps_high)


def require_rewards_table(name: str, rewards) -> torch.Tensor:
    """Check a ``[B, G]`` table of rewards: one row of ``G`` responses' rewards per prompt."""
    require_tensor(name, rewards)
    if rewards.dim() != 2:
        raise ValueError(f"{name}: expected shape (B, G), one row of G rewards per prompt, got {tuple(rewards.shape)}")
    return rewards


def require_bool(name: str, value) -> bool:
    """Check a flag: exactly ``True`` or ``False`` (not 0, 1 or a string)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name}: expected True or False, got {value!r}")
    return value


def require_unit_interval(name: str, value: float) -> float:
    """Check ``0 <= value <= 1`` (gamma, lambda)."""
    value = _as_float(name, value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name}: expected a number in [0, 1], got {value}")
    return value


def require_positive(name: str, value: float) -> float:
    """Check ``value > 0`` (clip epsilon, eps)."""
    value = _as_float(name, value)
    if not value > 0.0:
        raise ValueError(f"{name}: expected a positive number, got {value}")
    return value


def require_non_negative(name: str, value: float) -> float:
    """Check ``value >= 0`` (coefficients)."""
    value = _as_float(name, value)
    if not value >= 0.0:
        raise ValueError(f"{name}: expected a non-negative number, got {value}")
    return value


def require_int(name: str, value, minimum: int | None = None) -> int:
    """Check that ``value`` is an int (not a bool), at least ``minimum`` when given (sizes, counts, seeds)."""
    at_least = f" >= {minimum}" if minimum is not None else ""
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        raise ValueError(f"{name}: expected an int{at_least}, got {value!r}")
    return value


def require_count(name: str, value) -> int:
    """A number of parameters or tokens: a non-negative int (a whole float such as ``7e9`` is accepted)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name}: expected a non-negative int, got {value!r}")
    return value


def require_choice(name: str, value: str, choices: Iterable[str]) -> str:
    """Check that a mode string is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name}: expected one of {options}, got {value!r}")
    return value


def _as_float(name: str, value) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name}: expected a number, got {type(value).__name__}")
    value = float(value)
    if value != value:  # NaN
        raise ValueError(f"{name}: expected a number, got nan")
    return value
