"""The autograder's shared machinery: compare a student's function with the reference.

Every exercise check in the course (``course_lib.checks.gae.check_compute_gae`` and
friends) is a thin wrapper around :func:`check_against_reference`:

1. it runs the student's function and the reference on a grid of edge cases
   (terminal steps, equal rewards, ratios far outside the trust region, ...),
   in float64 and in float32, on fresh copies of the inputs;
2. it compares the outputs, and for losses the gradients with respect to the
   inputs (so a forgotten ``.detach()`` is caught, not only a wrong value);
3. when they differ, it replays a catalogue of *known mistakes* (wrong
   implementations with the same signature); if one of them reproduces the student's
   output on every case, the message names that mistake and how to fix it; otherwise
   it looks for a *structural* description that holds on every case where the student
   is wrong (the reference times a count of the inputs, a flipped sign, wrong only at
   the first step or at the padding, only in one mode: :mod:`course_lib.checks.structure`);
   failing that, it shows the difference with the failing case's inputs and both outputs;
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

Where the parts are: the cases and the loop here; running one case and comparing it in
:mod:`course_lib.checks.compare` (an output's kind, its dtype or a Python number, in
:mod:`course_lib.checks.kinds`); explaining a difference (a known mistake named only when every case agrees) in
:mod:`course_lib.checks.explain`, and describing it when no known mistake does in
:mod:`course_lib.checks.structure` (with :mod:`~course_lib.checks.relations`, :mod:`~course_lib.checks.positions`,
:mod:`~course_lib.checks.scope` and :mod:`~course_lib.checks.counts`);
what demo cells ask (:func:`your`: did this very function pass its check?) in
:mod:`course_lib.checks.demo`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch

from course_lib.checks import recording, watch
from course_lib.checks.compare import (
    _cast,
    _compare,
    _default_outputs,
    _from_torch,
    _label,
    _only_kind_differs,
    _Outcome,
    _run,
    _run_student,
)
from course_lib.checks.demo import CheckNotPassed, forget_pass, passed, record_pass, your  # noqa: F401 (demo cells)
from course_lib.checks.drawing import drawn_cases, is_drawn
from course_lib.checks.explain import _fail, _Others, explain_crash
from course_lib.checks.kinds import _with_dtypes


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
    refuses: bool = False  # the reference raises ValueError on this case: so must the student's function
    # A promise at the edge of the domain (a mask with no valid entry): told only once every other case is right,
    # and no evidence against naming a mistake made elsewhere. A student who makes a catalogued mistake and also
    # divides by an unclamped mask.sum() is told the mistake first, then the edge.
    last: bool = False


@dataclass
class Mistake:
    """A classic wrong implementation and the message that explains it."""

    message: str
    fn: Callable[..., Any]


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
    draw: Callable[[torch.Generator], Sequence[Case]] | None = None,
    check_dtype: bool = False,
    categorical: Sequence[str] = (),
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
        draw: ``draw(generator)``: fresh cases of the check's own, drawn at grading time (with every case
            moved a little: :mod:`course_lib.checks.drawing`).
        check_dtype: each output's kind must be the reference's: a tensor's dtype, or a Python number where the
            reference returns one. A wrong kind is told only once every value is right.
        categorical: the outputs (named as ``outputs`` names them) that are category codes, a label or an id as a
            number: a wrong one is described by where it is wrong, never by arithmetic (a factor, an offset).
    """
    if not callable(fn):
        raise AssertionError(f"{name}: expected a function, got {type(fn).__name__}")
    select = _with_dtypes(outputs or _default_outputs) if check_dtype else outputs or _default_outputs
    session = recording.current()
    if session is None and not watch.trusted():
        borrowed = watch.borrowed(fn, watch.allowed_for(name))
        if borrowed:  # the check would call course_lib's own code itself: the watch cannot see it
            raise watch.ReferenceCalled(watch.message(name, borrowed))
    if session is not None:
        cases = list(cases) + drawn_cases(cases, session.seed, draw)
    records = session.begin(name) if session is not None else None
    if session is not None and session.mode == "record":
        with recording.watching(reference, name):  # the reference must not run while the student's code can
            return _record(fn, cases, dtypes, select, name, records)
    judge = functools.partial(
        _judge, fn, reference, cases, name, mistakes, select, dtypes, rtol, atol, categorical, session, records
    )
    try:
        return judge()
    except watch.ReferenceCalled as rule:
        if session is not None or name not in watch.EARLIER:
            raise
        raise watch.ReferenceCalled(f"{rule}{_with_earlier_functions(name, judge)}") from None


def _with_earlier_functions(name: str, judge: Callable[..., bool]) -> str:
    """In a notebook, for a borrowed call of the exercise's own earlier functions (:data:`watch.EARLIER`, which the
    exercise's text tells the student to use): what the check finds with those calls allowed, as words to add to
    the rule's first line, so that the student who writes them learns the next mistake now rather than after.
    Nothing where something else is borrowed too: the rule alone, as at grading."""
    try:
        judge(allowed=watch.EARLIER[name], rehearsal=True)
    except watch.ReferenceCalled:
        return ""
    except AssertionError as diagnosis:
        first, _, rest = str(diagnosis).partition("\n")
        return f"; and with it, {first.removeprefix(f'{name}: ')}" + (f"\n{rest}" if rest else "")
    except Exception:  # noqa: BLE001 - the rule as it is rather than a crash of the check
        return ""
    return f"; otherwise your {name} agrees with the reference"


def _judge(
    fn,
    reference,
    cases,
    name,
    mistakes,
    select,
    dtypes,
    rtol,
    atol,
    categorical,
    session,
    records,
    *,
    allowed=(),
    rehearsal=False,
) -> bool:
    """The comparison itself, case by case, once the inputs are ready: the judging half at grading, the whole check
    in a notebook. ``allowed``: more course_lib calls the student's function may make (a ``rehearsal``, which
    neither prints its success nor marks the function as passed)."""

    def student_on(number: int, dtype: torch.dtype) -> _Outcome:
        if session is not None:  # in the grader: what the student's function gave in the kernel
            return _Outcome(*records.get(number, dtype))
        with watch.watched(name, reference, allowed):  # the same rule as at grading, with the same words
            return _run_student(fn, _cast(cases[number].kwargs, dtype), cases[number], select, name)

    labels = []
    edge_failure = None  # the first wrong case marked ``last``: told only if every other case is right
    kind_failure = None  # the first case whose values are right and whose dtype is not: told only if no value is wrong
    try:
        for dtype in dtypes:
            for number, case in enumerate(cases):
                kwargs = _cast(case.kwargs, dtype)
                try:
                    expected = _run(reference, kwargs, case.grad, select, name="reference", refuses=case.refuses)
                    expected.categorical = frozenset(categorical)
                except ValueError:
                    if _is_secret(case):
                        continue  # a drawn case the reference refuses (say, out of its domain): not asked
                    raise
                try:
                    got = student_on(number, dtype)
                except AssertionError as crash:
                    others = _Others(cases, dtypes, select, reference, student_on, rtol, atol, categorical, edges=False)
                    explain_crash(name, crash, number, dtype, others)
                    raise
                problem = _compare(expected, got, rtol, atol)
                if problem is not None and _only_kind_differs(expected, got, rtol, atol):
                    kind_failure = kind_failure or (case, dtype, problem, got, kwargs, expected)
                elif problem is not None and case.last:
                    edge_failure = edge_failure or (case, dtype, problem, got, kwargs, expected)
                elif problem is not None:
                    others = _Others(cases, dtypes, select, reference, student_on, rtol, atol, categorical, edges=False)
                    _fail(name, case, dtype, problem, got, mistakes, kwargs, select, rtol, atol, expected, others)
                label = _label(kwargs, dtype)
                if label not in labels:
                    labels.append(label)
        for deferred in (edge_failure, kind_failure):  # the edge's values first: a kind is told last of all
            if deferred is not None:
                case, dtype, problem, got, kwargs, expected = deferred
                others = _Others(cases, dtypes, select, reference, student_on, rtol, atol, categorical)
                _fail(name, case, dtype, problem, got, mistakes, kwargs, select, rtol, atol, expected, others)
    except AssertionError:
        forget_pass(fn)
        raise
    if rehearsal:
        return True
    grads = ", gradients included" if any(c.grad for c in cases) else ""
    shown = len([c for c in cases if not _is_secret(c)])
    recording.report(f"\u2714 {name}: correct on all {shown} cases ({' and '.join(labels)}{grads}).")
    record_pass(name, fn)
    return True


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
    return is_drawn(case)


def scalar_reply(
    fn: Callable,
    name: str,
    call: str,
    args: Sequence = (),
    kwargs: Mapping | None = None,
    what: str = "a float",
    context: str = "",
) -> float:
    """The student's ``fn(*args, **kwargs)`` as a float, for checks of functions that return one number.

    A crash, ``None`` or a reply that is not a number becomes an ``AssertionError`` naming ``call``
    (``NotImplementedError`` passes through: the stub is untouched). ``context`` ends the crash message.
    """
    try:
        result = fn(*args, **(kwargs or {}))
    except NotImplementedError as error:
        if not _from_torch(error):
            raise  # the untouched stub
        raise AssertionError(f"{call} raised NotImplementedError inside torch: {error}{context}") from error
    except Exception as error:  # noqa: BLE001 - any crash becomes feedback
        raise AssertionError(f"{call} raised {type(error).__name__}: {error}{context}") from error
    if result is None:
        raise AssertionError(f"{name} returned None: did you forget the `return` statement?")
    if isinstance(result, torch.Tensor) and result.numel() == 1:
        result = result.item()
    if not isinstance(result, (int, float)):
        raise AssertionError(f"{name} should return {what}, got {type(result).__name__}: {result!r}")
    return float(result)
