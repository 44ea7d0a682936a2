"""Running one case and comparing it: the engine under :func:`course_lib.checks.check_against_reference`.

The student's function runs on fresh copies of a case's inputs (a crash, an input changed in
place, a missing ``return`` become messages); its outputs and gradients are compared with the
reference's. Explaining a difference (which known mistake, if any) is :mod:`course_lib.checks.explain`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch

from course_lib.checks.crash_hints import _crash_hint
from course_lib.checks.kinds import _kind_hint, _kind_name, _shape_hint, not_a_value, same_kind

# Bound once, at import: a solution that later replaces torch.allclose (or torch.equal,
# torch.isnan) globally cannot make a wrong answer compare equal to the reference.
_allclose, _equal, _isnan, _isclose = torch.allclose, torch.equal, torch.isnan, torch.isclose
_TORCH_DIR = os.path.dirname(torch.__file__)


class Unfit(TypeError):
    """A reply a check's ``outputs`` cannot read, with the reason in words (the message's first line)."""


@dataclass
class _Outcome:
    values: dict[str, torch.Tensor] = field(default_factory=dict)
    grads: dict[str, torch.Tensor] = field(default_factory=dict)
    # The outputs that are category codes (a label as a number), set on the reference's outcome: no arithmetic
    # (a factor, an offset, a sign) describes how two of them differ.
    categorical: frozenset[str] = frozenset()


def _label(kwargs: Mapping[str, Any], dtype: torch.dtype) -> str:
    """What a case ran in, in words: the floating dtype when it has floating inputs, else what it has."""
    tensors = [v for v in kwargs.values() if isinstance(v, torch.Tensor)]
    if any(t.is_floating_point() for t in tensors):
        return str(dtype).replace("torch.", "")
    if tensors:
        kinds = []
        for t in tensors:
            kind = str(t.dtype).replace("torch.", "")
            if kind not in kinds:
                kinds.append(kind)
        return " and ".join(kinds)
    return "Python numbers"


# ---------------------------------------------------------------------------
# Running one case
# ---------------------------------------------------------------------------


def _default_outputs(result: Any) -> Mapping[str, Any]:
    if isinstance(result, tuple):
        return {f"output[{i}]": r for i, r in enumerate(result)}
    return {"output": result}


def _cast(kwargs: Mapping[str, Any], dtype: torch.dtype) -> dict[str, Any]:
    """Floating tensors to ``dtype``; every tensor a fresh copy."""
    cast = {}
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            value = value.detach().clone()
            if value.is_floating_point():
                value = value.to(dtype)
        cast[key] = value
    return cast


def _fresh(kwargs: Mapping[str, Any], grad: Sequence[str]) -> dict[str, Any]:
    fresh = {}
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            value = value.detach().clone().requires_grad_(key in grad)
        fresh[key] = value
    return fresh


REFUSES = "raises ValueError (1 = yes)"  # the one output of a case the reference refuses (Case.refuses)
MUST_REFUSE = "this case must raise ValueError (it has no answer)"


def _refusal(raised: bool) -> _Outcome:
    return _Outcome(values={REFUSES: torch.tensor(float(raised), dtype=torch.float64)})


def _run(fn, kwargs, grad, select, name, refuses: bool = False) -> _Outcome:
    args = _fresh(kwargs, grad)
    if refuses:
        try:
            fn(**args)
        except ValueError:
            return _refusal(True)
        return _refusal(False)
    result = fn(**args)
    return _outcome(result, args, grad, select, name)


def _from_torch(error: BaseException) -> bool:
    """Whether ``error`` was raised inside torch (``x ^ y`` on floats raises NotImplementedError there),
    not by the student's own code: only a stub's own ``raise NotImplementedError`` means "not attempted"."""
    text = str(error)
    if "not implemented for '" in text or text.startswith("Could not run 'aten::"):
        return True  # raised by a kernel in C++, which leaves no Python frame of torch's behind
    frame = error.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and frame.tb_frame.f_code.co_filename.startswith(_TORCH_DIR)


def _outcome(result, args, grad, select, name) -> _Outcome:
    if result is None:
        raise AssertionError(f"{name} returned None: did you forget the `return` statement?")
    try:
        named = dict(select(result))
    except Unfit as error:
        raise AssertionError(f"{name}: {error}") from None
    except (TypeError, KeyError, IndexError) as error:
        raise AssertionError(
            f"{name} returned {type(result).__name__}, not what the exercise asks for ({error})"
        ) from None
    outcome = _Outcome()
    for key, value in named.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = torch.tensor(float(value), dtype=torch.float64)
        if not isinstance(value, torch.Tensor):
            raise AssertionError(not_a_value(name, key, value))
        outcome.values[key] = value
    if grad:
        first = next(iter(outcome.values.values()))
        if not first.requires_grad:
            raise AssertionError(
                f"{name}: the result carries no gradient with respect to {', '.join(grad)}; "
                "did you call .detach(), .item(), .numpy() or torch.no_grad() on the way, or return a new tensor "
                "(torch.tensor(0.0), torch.zeros(...)) that no gradient reaches? (an input's .sum() * 0 is a 0 "
                "that keeps it)"
            )
        # A fixed weighting turns a per-element output into a scalar without hiding entries.
        g = torch.Generator().manual_seed(1234)
        weights = torch.rand(first.shape, generator=g, dtype=torch.float64).to(first.dtype) + 0.5
        (first * weights).sum().backward()
        for key in grad:
            got = args[key].grad
            outcome.grads[key] = torch.zeros_like(args[key]) if got is None else got.detach()
    outcome.values = {k: v.detach() for k, v in outcome.values.items()}
    return outcome


def _unchanged(now: torch.Tensor, before: torch.Tensor) -> bool:
    """Equal, NaN where NaN was (padding may hold NaN, which equals nothing, itself included)."""
    if _equal(now, before):
        return True
    if not (now.is_floating_point() and now.shape == before.shape and now.dtype == before.dtype):
        return False
    nan = _isnan(before)
    return _equal(_isnan(now), nan) and _equal(now[~nan], before[~nan])


def _run_student(fn, kwargs, case, select, name) -> _Outcome:
    args = _fresh(kwargs, case.grad)
    originals = {k: v.detach().clone() for k, v in args.items() if isinstance(v, torch.Tensor)}
    try:
        result = fn(**args)
    except NotImplementedError as error:
        if not _from_torch(error):
            raise  # the untouched stub: not attempted
        raise AssertionError(
            f"{name} raised NotImplementedError inside torch: {error}{_crash_hint(error)}\n  on the case: "
            f"{case.description}"
        ) from error
    except ValueError as error:
        if case.refuses:
            return _refusal(True)
        raise AssertionError(
            f"{name} raised ValueError: {error}{_crash_hint(error)}\n  on the case: {case.description}"
        ) from error
    except Exception as error:  # noqa: BLE001 - any crash becomes feedback
        if case.refuses:
            raise AssertionError(
                f"{name}: this case has no answer and must raise ValueError; your function raised "
                f"{type(error).__name__}: {error}\n  on the case: {case.description}"
            ) from error
        raise AssertionError(
            f"{name} raised {type(error).__name__}: {error}{_crash_hint(error)}\n  on the case: {case.description}"
        ) from error
    if case.refuses:
        return _refusal(False)
    for key, before in originals.items():
        if not _unchanged(args[key].detach(), before):
            raise AssertionError(
                f"{name} changed its input `{key}` in place; work on a copy "
                f"(for example `{key}.clone()`) so the caller's tensor is left alone."
                f"\n  on the case: {case.description}"
            )
    try:
        return _outcome(result, args, case.grad, select, name)
    except AssertionError as error:
        raise AssertionError(f"{error}\n  on the case: {case.description}") from None
    except Exception as error:  # noqa: BLE001 - the check's own work on what the student returned (its backward)
        raise AssertionError(
            f"{name}: what your function returned could not be checked: {type(error).__name__}: {error}"
            f"{_crash_hint(error)}\n  on the case: {case.description}"
        ) from error


# ---------------------------------------------------------------------------
# Comparing and explaining
# ---------------------------------------------------------------------------


def _differences(expected: _Outcome, got: _Outcome, rtol: float, atol: float):
    """Yield ``(component, description)`` for each output or gradient that disagrees: values first, then
    gradients, then the outputs' kinds (``dtype of ...``: a wrong value is the first thing to fix)."""
    values = {k: v for k, v in expected.values.items() if not k.startswith("dtype of ")}
    kinds = {k: v for k, v in expected.values.items() if k.startswith("dtype of ")}
    parts = (("", values, got.values), ("gradient of ", expected.grads, got.grads), ("", kinds, got.values))
    for kind, exp_map, got_map in parts:
        for key, exp in exp_map.items():
            what = f"{kind}{key}"
            if key not in got_map:
                returned = {k for k in got_map if not k.startswith("dtype of ")}  # check_dtype adds their dtypes
                wanted = [k for k in exp_map if not k.startswith("dtype of ")]
                if kind == "" and returned == {"output"} and len(wanted) > 1:
                    yield (
                        what,
                        (
                            f"your function returned one value; it should return a tuple of {len(wanted)} "
                            f"(`return {', '.join(f'x{i}' for i in range(len(wanted)))}`)"
                        ),
                    )
                    return
                yield what, f"{key} is missing from what your function returned"
                continue
            value = got_map[key]
            if kind == "" and key.startswith("dtype of "):
                if not same_kind(int(value.item()), int(exp.item())):
                    got_kind, exp_kind = (_kind_name(int(t.item())) for t in (value, exp))
                    output = key.removeprefix("dtype of ")
                    hint = _kind_hint(value, exp)
                    yield what, f"{output} is {got_kind}; the exercise asks for {exp_kind}{hint}"
                continue
            if key == REFUSES:
                if not _equal(value.to(torch.float64), exp.to(torch.float64)):
                    yield (
                        what,
                        (
                            f"{MUST_REFUSE}, and your function returned one"
                            if float(exp) == 1.0
                            else "your function raised ValueError on a case that has an answer"
                        ),
                    )
                continue
            if tuple(value.shape) != tuple(exp.shape):
                yield (
                    what,
                    f"{what} has shape {tuple(value.shape)}, expected {tuple(exp.shape)}{_shape_hint(value, exp)}",
                )
                continue
            value64, exp64 = value.to(torch.float64), exp.to(torch.float64)
            if _isnan(value64).any() and not _isnan(exp64).any():
                yield what, f"{what} contains NaN where the reference has numbers"
            elif not _allclose(value64, exp64, rtol=rtol, atol=atol, equal_nan=True):
                yield what, f"{what} differs from the reference{_where(exp64, value64, rtol, atol, key, expected)}"


def _where(expected: torch.Tensor, got: torch.Tensor, rtol, atol, key: str, reference: _Outcome) -> str:
    """The pattern of a difference, both outputs, and its largest entry; for a category code (``reference``
    names it categorical) no arithmetic: how far apart two labels' numbers are means nothing."""
    wrong = ~_isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    # Both shown from the first wrong entry when it lies past the first eight: two identical prefixes hide it.
    first_wrong = int(wrong.flatten().nonzero()[0, 0]) if bool(wrong.any()) else 0
    start = first_wrong if first_wrong >= SHOWN else 0
    shown = f": expected {_show(expected, start)}, got {_show(got, start)}"
    if key in reference.categorical:
        count = f" in {int(wrong.sum())} of {wrong.numel()} entries" if wrong.numel() > 1 else ""
        return f"{count}{shown}"
    diff = (got - expected).abs().nan_to_num(math.inf)
    worst = int(diff.flatten().argmax())
    largest = f" (largest difference {diff.flatten()[worst].item():.3g} at flat index {worst})"
    return f"{_pattern(expected, got, rtol, atol)}{shown}{largest}"


def _pattern(expected: torch.Tensor, got: torch.Tensor, rtol: float, atol: float) -> str:
    """What a wrong output looks like next to the right one, in words: the first clue for a mistake that no
    catalogue names (a flipped sign, a missing normaliser, an off-by-one, only the last step wrong)."""
    close = lambda a, b: bool(_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))  # noqa: E731
    if expected.numel() < 2 or not torch.isfinite(expected).all() or not torch.isfinite(got).all():
        return ""
    if close(got, -expected):
        return " by its sign (every entry negated)"
    if not bool(got.any()):
        return " (yours is 0 in every entry)"
    nonzero = expected.abs() > atol
    if nonzero.any():
        factor = (got[nonzero] / expected[nonzero]).median().item()
        if abs(factor - 1) > 1e-3 and close(got, factor * expected):
            return f" by a constant factor {factor:.4g} (a normaliser missing, extra or different?)"
    offset = (got - expected).flatten().median().item()
    if abs(offset) > atol and close(got, expected + offset):
        return f" by a constant {offset:+.4g} in every entry"
    wrong = ~_isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    if positional_evidence(wrong):
        # A 0/1 output (a mask) that is wrong in one place also "matches" a shift of itself: there a shift is said
        # only when it moves two entries or more of one row, and the position it vacates holds a zero or the
        # reference's own entry, what an off-by-one leaves.
        binary = bool(((expected == 0) | (expected == 1)).all())

        def zero_or_own(edge: int) -> bool:
            if not moves_two_in_a_row(wrong):
                return False
            return close(got[..., edge], 0 * got[..., edge]) or close(got[..., edge], expected[..., edge])

        if close(got[..., :-1], expected[..., 1:]) and (not binary or zero_or_own(-1)):
            return " by one position: yours is the reference shifted one step earlier along the last axis"
        if close(got[..., 1:], expected[..., :-1]) and (not binary or zero_or_own(0)):
            return " by one position: yours is the reference shifted one step later along the last axis"
        if not wrong[..., :-1].any():
            return " only in the last position along the last axis (how is the final step handled?)"
        if not wrong[..., 1:].any():
            return " only in the first position along the last axis"
    return f" in {int(wrong.sum())} of {wrong.numel()} entries"


def positional_evidence(wrong: torch.Tensor) -> bool:
    """Whether a wrong output (``wrong``: True where it differs) can be described by places along its last axis.

    The last axis must be one of three steps or more, and two rows or more (slices along it) must be wrong: a
    1-D output may be one value per row of a batch (a reward each), where "the last position" is the last
    example, not the last step, and one wrong row is one wrong example, whatever its position."""
    if wrong.dim() < 2 or wrong.shape[-1] < 3:
        return False
    return int(wrong.reshape(-1, wrong.shape[-1]).any(-1).sum()) >= 2


def moves_two_in_a_row(wrong: torch.Tensor) -> bool:
    """Whether some row (a slice along the last axis) differs in two entries or more: a 0/1 row wrong in one
    entry at its edge lines up with a shift of itself, and says nothing of one."""
    return wrong.dim() >= 1 and bool((wrong.reshape(-1, wrong.shape[-1]).sum(-1) >= 2).any())


def _compare(expected: _Outcome, got: _Outcome, rtol: float, atol: float) -> str | None:
    """Return a description of the first difference, or None when they agree."""
    return next((description for _, description in _differences(expected, got, rtol, atol)), None)


def _only_kind_differs(expected: _Outcome, got: _Outcome, rtol: float, atol: float) -> bool:
    """Whether every difference is in an output's kind (its dtype, a tensor for a number): the values are right."""
    return all(what.startswith("dtype of ") for what, _ in _differences(expected, got, rtol, atol))


SHOWN = 8  # the entries of a tensor a message shows


def _show(t: torch.Tensor, start: int = 0) -> str:
    """A short, rounded rendering of a tensor for a message: ``SHOWN`` entries of the flattened tensor from flat
    index ``start``."""
    if t.numel() == 1:
        return f"{t.item():.4g}"
    flat = [f"{x:.4g}" for x in t.flatten()[start : start + SHOWN].tolist()]
    before = "..., " if start > 0 else ""
    more = ", ..." if t.numel() > start + SHOWN else ""
    where = f", from flat index {start}" if start > 0 else ""
    return f"[{before}{', '.join(flat)}{more}] (shape {tuple(t.shape)}{where})"
