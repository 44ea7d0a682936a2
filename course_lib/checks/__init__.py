"""The autograder's shared machinery: compare a student's function with the reference.

Every exercise check in the course (``course_lib.checks.gae.check_compute_gae`` and
friends) is a thin wrapper around :func:`check_against_reference`:

1. it runs the student's function and the reference on a grid of edge cases
   (terminal steps, equal rewards, ratios far outside the trust region, ...),
   in float64 and in float32, on fresh copies of the inputs;
2. it compares the outputs, and for losses the gradients with respect to the
   inputs (so a forgotten ``.detach()`` is caught, not only a wrong value);
3. when they differ, it replays a catalogue of *known mistakes* (wrong
   implementations with the same signature) on the same case; if the student's
   output matches one of them, the message names that mistake and how to fix it;
4. it raises ``AssertionError`` on the first failure (so nbval reports the cell)
   and prints one line and returns ``True`` when everything matches.

``NotImplementedError`` from an untouched stub is let through unchanged: the
grader reports it as "not attempted", which is not the same as "wrong".

**Record, then judge** (how ``python -m course_lib.grade`` uses the same checks). In a
notebook, a check runs the student's function and judges it at once. At grading time
the kernel that runs the student's code cannot be trusted to judge, so the same call
works in two halves (:mod:`course_lib.checks.recording` switches between them):

- in the kernel, *recording*: the student's function is run on the same cases, plus one
  extra case per case whose inputs are drawn from a seed chosen per grading run (the
  kernel learns it only when the check cell runs), and only plain float arrays come out,
  written with ``numpy.savez``: the values, the gradients, nothing of the student's objects;
- in the grader's process, *judging*: the same check cell is run again with the records
  in place of the student's function; the reference runs here, on the same cases, and the
  comparison and every diagnosis (the known mistakes) are this module's, unchanged.

A new check needs nothing for this: call :func:`check_against_reference`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

import torch

from course_lib.checks import recording

# Bound once, at import: a solution that later replaces torch.allclose (or torch.equal,
# torch.isnan) globally cannot make a wrong answer compare equal to the reference.
_allclose, _equal, _isnan = torch.allclose, torch.equal, torch.isnan


@dataclass
class Case:
    """One edge case: keyword arguments for the function, and a description for the student.

    ``grad`` names the tensor arguments to differentiate with respect to (for
    losses); the reference's gradient with respect to a constant (``logp_old``,
    ``deltas``) is zero, so a student who leaves one attached is caught.
    """

    description: str
    kwargs: Mapping[str, Any]
    grad: Sequence[str] = ()


@dataclass
class Mistake:
    """A classic wrong implementation and the message that explains it."""

    message: str
    fn: Callable[..., Any]


# ---------------------------------------------------------------------------
# Demo cells: run the student's function, and say whether its check passed
# ---------------------------------------------------------------------------

_PASSED: dict[str, Any] = {}  # check name -> the very object whose check passed last (not a copy, not its name)


class CheckNotPassed(NotImplementedError):
    """A demo cell refused to run a function whose check has not passed (yet).

    A ``NotImplementedError``: like an untouched stub, the exercise is not done yet.
    """

    def _render_traceback_(self):  # IPython shows this line alone, without a traceback
        return [f"{type(self).__name__}: {self}"]


def record_pass(name: str, fn: Any) -> None:
    """Remember that ``fn`` passed the check called ``name`` (demo cells ask :func:`passed`)."""
    _PASSED[name] = fn


def forget_pass(name: str) -> None:
    """The check called ``name`` failed: whatever passed it before no longer counts."""
    _PASSED.pop(name, None)


def passed(fn: Any) -> bool:
    """Whether this very function (or class) passed its check in this kernel, as it is now defined."""
    return any(fn is done for done in _PASSED.values())


def your(fn: Any, *, needs_pass: bool = False) -> Any:
    """``fn`` for a demo cell, announced: the demo runs the student's function, and says whether its check passed.

    With ``needs_pass`` (a demo that would hide a wrong function, such as a training run that
    still improves with a biased gradient), a function whose check has not passed is refused
    with :class:`CheckNotPassed`: "the check above has not passed yet".
    """
    if not callable(fn):
        raise AssertionError(f"the demo expected your function, got {type(fn).__name__}: run its cell first")
    name = getattr(fn, "__name__", "function")
    if passed(fn):
        print(f"Running your {name} (its check passed).")
    elif needs_pass:
        raise CheckNotPassed(f"{name}: the check above has not passed yet, so this demo does not run your {name}; "
                             "run the check cell, fix what it says, then run this cell again.")
    else:
        print(f"Running your {name}: the check above has not passed yet, so what follows may be wrong.")
    return fn


@dataclass
class _Outcome:
    values: dict[str, torch.Tensor] = field(default_factory=dict)
    grads: dict[str, torch.Tensor] = field(default_factory=dict)


def check_against_reference(
    fn: Callable[..., Any],
    reference: Callable[..., Any],
    cases: Sequence[Case],
    *,
    name: str,
    mistakes: Sequence[Mistake] = (),
    outputs: Callable[[Any], Mapping[str, Any]] | None = None,
    dtypes: Sequence[torch.dtype] = (torch.float64, torch.float32),
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> bool:
    """Raise ``AssertionError`` unless ``fn`` agrees with ``reference`` on every case.

    Args:
        fn: the student's function.
        reference: the course's implementation, same signature.
        cases: the grid of edge cases.
        name: the function's name, used in messages.
        mistakes: known wrong implementations, tried in order to diagnose a failure.
        outputs: maps a return value to named tensors to compare (default: the
            tensor itself, or each element of a returned tuple).
        dtypes: floating dtypes every case is run in.
    """
    if not callable(fn):
        raise AssertionError(f"{name}: expected a function, got {type(fn).__name__}")
    select = outputs or _default_outputs
    session = recording.current()
    if session is not None:
        cases = list(cases) + [c for c in (_secret_case(c, n, session.seed) for n, c in enumerate(cases)) if c]
    records = session.begin(name) if session is not None else None
    if session is not None and session.mode == "record":
        with recording.watching(reference, name):  # the reference must not run while the student's code can
            return _record(fn, cases, dtypes, select, name, records)
    def student_on(number: int, dtype: torch.dtype) -> _Outcome:
        if session is not None:  # in the grader: what the student's function gave in the kernel
            return _Outcome(*records.get(number, dtype))
        return _run_student(fn, _cast(cases[number].kwargs, dtype), cases[number], select, name)

    labels = []
    try:
        for dtype in dtypes:
            for number, case in enumerate(cases):
                kwargs = _cast(case.kwargs, dtype)
                try:
                    expected = _run(reference, kwargs, case.grad, select, name="reference")
                except ValueError:
                    if _is_secret(case):
                        continue  # a drawn case the reference refuses (say, out of its domain): not asked
                    raise
                got = student_on(number, dtype)
                problem = _compare(expected, got, rtol, atol)
                if problem is not None:
                    others = _Others(cases, dtypes, select, reference, student_on, rtol, atol)
                    _fail(name, case, dtype, problem, got, mistakes, kwargs, select, rtol, atol, expected, others)
                label = _label(kwargs, dtype)
                if label not in labels:
                    labels.append(label)
    except AssertionError:
        forget_pass(name)
        raise
    grads = ", gradients included" if any(c.grad for c in cases) else ""
    shown = len([c for c in cases if not _is_secret(c)])
    recording.report(f"\u2714 {name}: correct on all {shown} cases ({' and '.join(labels)}{grads}).")
    record_pass(name, fn)
    return True


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


def _record(fn, cases, dtypes, select, name, records) -> bool:
    """In the grading kernel: the student's results on every case, saved for the grader to judge."""
    for dtype in dtypes:
        for number, case in enumerate(cases):
            kwargs = _cast(case.kwargs, dtype)
            try:
                records.put(number, dtype, _run_student(fn, kwargs, case, select, name))
            except AssertionError as error:
                if not _is_secret(case):
                    raise  # the same message as in the notebook, at once
                records.put(number, dtype, None, error=str(error))
    records.save()
    print(f"{name}: recorded for grading")
    record_pass(name, fn)  # the kernel cannot judge: its demos run as they would after a pass
    return True


def _is_secret(case: Case) -> bool:
    return case.description.startswith("a case drawn at grading time")


def _integral(t: torch.Tensor) -> bool:
    finite = t[torch.isfinite(t)]
    return bool(finite.numel() == 0 or _equal(finite, finite.round()))


def _secret_case(case: Case, number: int, seed: int) -> Case | None:
    """A copy of ``case`` with its floating tensors moved by noise drawn from this run's ``seed``."""
    g = torch.Generator().manual_seed(seed * 1000 + number)
    kwargs, moved = {}, False
    for key, value in case.kwargs.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() \
                and not _integral(value):  # masks, counts and 0/1 rewards keep their meaning
            noise = torch.randn(value.shape, generator=g, dtype=torch.float64).to(value.dtype)
            value = value + 0.1 * noise * (1 + value.abs())
            moved = True
        kwargs[key] = value
    if not moved:
        return None
    return replace(case, description=f"a case drawn at grading time, like: {case.description}", kwargs=kwargs)


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


def scalar_reply(fn: Callable, name: str, call: str, args: Sequence = (), kwargs: Mapping | None = None,
                 what: str = "a float", context: str = "") -> float:
    """The student's ``fn(*args, **kwargs)`` as a float, for checks of functions that return one number.

    A crash, ``None`` or a reply that is not a number becomes an ``AssertionError`` naming ``call``
    (``NotImplementedError`` passes through: the stub is untouched). ``context`` ends the crash message.
    """
    try:
        result = fn(*args, **(kwargs or {}))
    except NotImplementedError:
        raise
    except Exception as error:  # noqa: BLE001 - any crash becomes feedback
        raise AssertionError(f"{call} raised {type(error).__name__}: {error}{context}") from error
    if result is None:
        raise AssertionError(f"{name} returned None: did you forget the `return` statement?")
    if isinstance(result, torch.Tensor) and result.numel() == 1:
        result = result.item()
    if not isinstance(result, (int, float)):
        raise AssertionError(f"{name} should return {what}, got {type(result).__name__}: {result!r}")
    return float(result)


def _run(fn, kwargs, grad, select, name) -> _Outcome:
    args = _fresh(kwargs, grad)
    result = fn(**args)
    return _outcome(result, args, grad, select, name)


def _crash_hint(error: Exception) -> str:
    """A likely cause of a crash that says little by itself (a broadcast of two shapes that do not fit)."""
    text = str(error)
    if "must match the size of tensor" in text or "shapes cannot be multiplied" in text:
        return (" (two shapes that do not broadcast: did a .mean(), .std() or .sum() drop an axis? keepdim=True "
                "keeps it, or index with [..., None] to add one back)")
    if "bitwise_not" in text or "bitwise_xor" in text:
        return " (~ negates bool tensors only: for 0/1 numbers use 1 - x, after x.float() where x is bool)"
    if "with a bool tensor is not supported" in text:
        return " (a bool tensor such as dones or a mask: convert it first, for example dones.float())"
    return ""


def _outcome(result, args, grad, select, name) -> _Outcome:
    if result is None:
        raise AssertionError(f"{name} returned None: did you forget the `return` statement?")
    try:
        named = dict(select(result))
    except (TypeError, KeyError, IndexError) as error:
        raise AssertionError(
            f"{name} returned {type(result).__name__}, not what the exercise asks for ({error})"
        ) from None
    outcome = _Outcome()
    for key, value in named.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = torch.tensor(float(value), dtype=torch.float64)
        if not isinstance(value, torch.Tensor):
            raise AssertionError(f"{name}: {key} should be a tensor or a number, got {type(value).__name__}")
        outcome.values[key] = value
    if grad:
        first = next(iter(outcome.values.values()))
        if not first.requires_grad:
            raise AssertionError(
                f"{name}: the result carries no gradient with respect to {', '.join(grad)}; "
                "did you call .detach(), .item(), .numpy() or torch.no_grad() on the way?"
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


def _run_student(fn, kwargs, case, select, name) -> _Outcome:
    args = _fresh(kwargs, case.grad)
    originals = {k: v.detach().clone() for k, v in args.items() if isinstance(v, torch.Tensor)}
    try:
        result = fn(**args)
    except NotImplementedError:
        raise
    except Exception as error:  # noqa: BLE001 - any crash becomes feedback
        raise AssertionError(
            f"{name} raised {type(error).__name__}: {error}{_crash_hint(error)}\n  on the case: {case.description}"
        ) from error
    for key, before in originals.items():
        if not _equal(args[key].detach(), before):
            raise AssertionError(
                f"{name} changed its input `{key}` in place; work on a copy "
                f"(for example `{key}.clone()`) so the caller's tensor is left alone."
                f"\n  on the case: {case.description}"
            )
    return _outcome(result, args, case.grad, select, name)


# ---------------------------------------------------------------------------
# Comparing and explaining
# ---------------------------------------------------------------------------


def _differences(expected: _Outcome, got: _Outcome, rtol: float, atol: float):
    """Yield ``(component, description)`` for each output or gradient that disagrees, values first."""
    for kind, exp_map, got_map in (("", expected.values, got.values), ("gradient of ", expected.grads, got.grads)):
        for key, exp in exp_map.items():
            what = f"{kind}{key}"
            if key not in got_map:
                if kind == "" and set(got_map) == {"output"} and len(exp_map) > 1:
                    yield what, (f"your function returned one value; it should return a tuple of {len(exp_map)} "
                                 f"(`return {', '.join(f'x{i}' for i in range(len(exp_map)))}`)")
                    return
                yield what, f"{key} is missing from what your function returned"
                continue
            value = got_map[key]
            if tuple(value.shape) != tuple(exp.shape):
                yield what, f"{what} has shape {tuple(value.shape)}, expected {tuple(exp.shape)}"
                continue
            value64, exp64 = value.to(torch.float64), exp.to(torch.float64)
            if _isnan(value64).any() and not _isnan(exp64).any():
                yield what, f"{what} contains NaN where the reference has numbers"
            elif not _allclose(value64, exp64, rtol=rtol, atol=atol, equal_nan=True):
                diff = (value64 - exp64).abs().nan_to_num(math.inf)
                worst = int(diff.flatten().argmax())
                yield what, (
                    f"{what} differs from the reference: expected {_show(exp64)}, got {_show(value64)} "
                    f"(largest difference {diff.flatten()[worst].item():.3g} at flat index {worst})"
                )


def _compare(expected: _Outcome, got: _Outcome, rtol: float, atol: float) -> str | None:
    """Return a description of the first difference, or None when they agree."""
    return next((description for _, description in _differences(expected, got, rtol, atol)), None)


def _component(outcome: _Outcome, what: str) -> _Outcome:
    """The part of an outcome named like ``"loss"`` or ``"gradient of logp_old"``, alone."""
    if what.startswith("gradient of "):
        key = what[len("gradient of "):]
        return _Outcome(grads={key: outcome.grads[key]} if key in outcome.grads else {})
    return _Outcome(values={what: outcome.values[what]} if what in outcome.values else {})


class _Others:
    """The other cases of a failing check, to tell apart mistakes that agree on the failing one."""

    def __init__(self, cases, dtypes, select, reference, student_on, rtol, atol):
        self.cases, self.dtypes, self.select, self.reference = cases, dtypes, select, reference
        self.student_on, self.rtol, self.atol = student_on, rtol, atol
        self._seen: dict[int, _Outcome] = {}

    def consistent(self, mistake: Mistake) -> bool:
        """Whether ``mistake`` gives what the student's function gave on every case it can run
        (in the first dtype: the cases differ in their values, not in their precision)."""
        dtype = self.dtypes[0]
        for number, case in enumerate(self.cases):
            kwargs = _cast(case.kwargs, dtype)
            try:
                if number not in self._seen:
                    self._seen[number] = self.student_on(number, dtype)
                got = self._seen[number]
            except (AssertionError, recording.NotRecorded):
                continue  # the student's function fails there: that case tells nothing about this mistake
            try:
                wrong = _run(mistake.fn, kwargs, case.grad, self.select, name="mistake")
            except Exception:  # noqa: BLE001 - a mistake that cannot run on this case tells nothing
                continue
            if _compare(wrong, got, self.rtol, self.atol) is not None:
                return False
        return True


def _fail(name, case, dtype, problem, got, mistakes, kwargs, select, rtol, atol, expected=None, others=None):
    """Raise the most helpful message: a known mistake the student's output matches, else the first difference."""
    where = f"{case.description} ({_label(kwargs, dtype)})"
    replays = []
    for mistake in mistakes:
        try:
            replays.append((mistake, _run(mistake.fn, kwargs, case.grad, select, name="mistake")))
        except Exception:  # noqa: BLE001 - a mistake that cannot run on this case tells nothing
            continue
    # 1. The student made exactly this mistake: every output and gradient matches it. When several
    #    mistakes give these numbers, the other cases tell them apart; those that none tells apart are all named.
    matching = [mistake for mistake, wrong in replays if _compare(wrong, got, rtol, atol) is None]
    if len(matching) > 1 and others is not None:
        matching = [m for m in matching if others.consistent(m)] or matching[:1]
    if matching:
        also = "".join(f"\n  or, giving the same numbers on every case: {m.message}" for m in matching[1:])
        raise AssertionError(f"{name}: {matching[0].message}{also}\n  seen on the case: {where}")
    # 2. Several mistakes at once (say a quotient ratio *and* logp_old left attached): name the one
    #    that explains the first difference, where it reproduces exactly that output or gradient.
    if expected is not None:
        first = next(iter(_differences(expected, got, rtol, atol)), None)
        if first is not None:
            what, _ = first
            for mistake, wrong in replays:
                own = _component(wrong, what)
                if _compare(own, _component(got, what), rtol, atol) is None and \
                        _compare(own, _component(expected, what), rtol, atol) is not None:
                    raise AssertionError(
                        f"{name}: {mistake.message}\n  seen on the case: {where}, "
                        f"in the {what}; fix it and run the check again: there may be more to fix"
                    )
    raise AssertionError(f"{name}: {problem}\n  on the case: {where}")


def _show(t: torch.Tensor) -> str:
    """A short, rounded rendering of a tensor for a message."""
    if t.numel() == 1:
        return f"{t.item():.4g}"
    flat = [f"{x:.4g}" for x in t.flatten()[:8].tolist()]
    more = ", ..." if t.numel() > 8 else ""
    return f"[{', '.join(flat)}{more}] (shape {tuple(t.shape)})"
