"""Explaining a difference: a known mistake is named only when the evidence of every case agrees.

:func:`course_lib.checks.check_against_reference` calls :func:`_fail` on the first case where the
student's function and the reference disagree. A catalogued mistake (a wrong implementation with the
reference's signature) is named only when it *reproduces the student's output on every case* it can
run, not only on the failing one: a mistake that agrees with the student on one case and contradicts
them on another is a guess, and a wrong guess teaches the wrong fix. When no mistake explains every
case, the message is the plain difference, with the failing case's inputs and both outputs, so the
student can replay it by hand.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import Any, Mapping

import torch

from course_lib.checks.compare import MUST_REFUSE, _cast, _compare, _differences, _label, _Outcome, _run, _show
from course_lib.checks.crash_hints import BROADCAST_HINT, _crash_hint
from course_lib.checks.ranks import rank_split
from course_lib.checks.recording import NotRecorded
from course_lib.checks.structure import Seen, describe


def _component(outcome: _Outcome, what: str) -> _Outcome:
    """The part of an outcome named like ``"loss"`` or ``"gradient of logp_old"``, alone."""
    if what.startswith("gradient of "):
        key = what[len("gradient of ") :]
        return _Outcome(grads={key: outcome.grads[key]} if key in outcome.grads else {})
    return _Outcome(values={what: outcome.values[what]} if what in outcome.values else {})


CASE_SECONDS = 5.0  # a case runs in milliseconds; one that takes this long is a loop that does not end


class _TooLong(AssertionError):
    """A case the student's function did not finish within ``CASE_SECONDS``, while the check read the evidence."""


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Raise ``_TooLong`` in the block after ``seconds`` of wall clock, where a timer can: in the main thread (where
    a notebook runs its cells). A timer already set (pytest-timeout's, a grader's) is put back afterwards with the
    time it had left, and if it would ring first it is left to ring: this limit never delays another's."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous_handler = signal.getsignal(signal.SIGALRM)
    previous_left, previous_interval = signal.getitimer(signal.ITIMER_REAL)
    if previous_left and previous_left <= seconds:
        yield
        return

    def ring(signum, frame):
        raise _TooLong(f"ran past {seconds:g} s on a case the check had not reached yet")

    started = time.monotonic()
    signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)  # and again each second, should the loop catch it
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL if previous_handler is None else previous_handler)
        if previous_left:
            left = max(previous_left - (time.monotonic() - started), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, previous_interval)


class _Others:
    """Every case of a failing check, to test a mistake against all the evidence, not one case."""

    def __init__(self, cases, dtypes, select, reference, student_on, rtol, atol, categorical=(), edges=True):
        self.cases, self.dtypes, self.select, self.reference = cases, dtypes, select, reference
        self.student_on, self.rtol, self.atol = student_on, rtol, atol
        self.categorical = frozenset(categorical)
        # Without the edges, the cases marked ``last`` (Case.last) are no evidence: a failure elsewhere is explained
        # by the other cases alone, and the edge is told once they are right.
        self.edges = edges
        self._seen: dict[tuple[int, torch.dtype], _Outcome | AssertionError] = {}
        self._too_long: AssertionError | None = None

    def _student(self, number: int, dtype: torch.dtype) -> _Outcome:
        """What the student's function gave on one case, run once (AssertionError where it failed to give it).

        These are cases the check itself had not reached (it stopped at the first wrong one): a function that
        never returns on one of them must not hang the check cell that is about to explain a wrong answer, so
        each run here has a time limit, and a case that runs past it tells nothing (as a crash tells nothing)."""
        if (number, dtype) not in self._seen and self._too_long is not None:
            self._seen[number, dtype] = self._too_long  # one case that never ended: the others are not run
        if (number, dtype) not in self._seen:
            try:
                with _time_limit(CASE_SECONDS):
                    self._seen[number, dtype] = self.student_on(number, dtype)
            except _TooLong as error:
                self._too_long = self._seen[number, dtype] = error
            except AssertionError as error:
                self._seen[number, dtype] = error
                if isinstance(error.__cause__, _TooLong):  # the student's function caught it: the same
                    self._too_long = error
        seen = self._seen[number, dtype]
        if isinstance(seen, AssertionError):
            raise seen
        return seen

    def consistent(self, mistake, refusals: bool = False, component: str | None = None) -> bool:
        """Whether ``mistake`` gives what the student's function gave on every case it can run
        (in the first dtype: the cases differ in their values, not in their precision). Cases that must
        be refused count only for a mistake of refusing (``refusals``): the others are about answers.
        With ``component`` (``"loss"``, ``"gradient of x"``), only that part of the outputs must agree."""
        dtype = self.dtypes[0]
        for number, case in enumerate(self.cases):
            if case.refuses and not refusals:
                continue
            if case.last and not self.edges:
                continue
            kwargs = _cast(case.kwargs, dtype)
            try:
                got = self._student(number, dtype)
            except (AssertionError, NotRecorded):
                continue  # the student's function fails there: that case tells nothing about this mistake
            try:
                wrong = _run(mistake.fn, kwargs, case.grad, self.select, name="mistake", refuses=case.refuses)
            except Exception:  # noqa: BLE001 - a mistake that cannot run on this case tells nothing
                continue
            if component is not None and self._right_where_mistake_is_not(number, kwargs, case, wrong, got):
                return False
            if component is not None:
                wrong, got = _component(wrong, component), _component(got, component)
            if _compare(wrong, got, self.rtol, self.atol) is not None:
                return False
        return True

    def _right_where_mistake_is_not(self, number, kwargs, case, wrong, got) -> bool:
        """Whether the student is right on case ``number`` where ``mistake`` (its outputs ``wrong``) is wrong: a
        part of the outputs that agrees with the mistake is then no evidence of it (the mistake would have made
        this case wrong, and the student did not)."""
        try:
            expected = _run(self.reference, kwargs, case.grad, self.select, name="reference", refuses=case.refuses)
        except Exception:  # noqa: BLE001 - a case the reference refuses tells nothing here
            return False
        return not self._wrong_values(expected, got) and bool(self._wrong_values(expected, wrong))

    def _wrong_values(self, expected: _Outcome, got: _Outcome) -> list[str]:
        """The outputs whose values disagree. A kind alone (a float for a tensor) is not a value, and gradients
        are left out: a catalogued mistake written one way can carry a NaN gradient (0 / 0 in a branch it drops)
        that the student's way of making the same mistake does not."""
        differences = _differences(expected, got, self.rtol, self.atol)
        return [what for what, _ in differences if not what.startswith(("dtype of ", "gradient of "))]

    def right_in(self, dtype: torch.dtype) -> str | None:
        """The dtypes every case passed in before ``dtype`` (the check runs them in order), in words."""
        earlier = list(self.dtypes)[: list(self.dtypes).index(dtype)] if dtype in self.dtypes else []
        return " and ".join(str(d).replace("torch.", "") for d in earlier) or None

    def evidence(self, dtype: torch.dtype) -> list[Seen] | None:
        """Every case the reference answers, in ``dtype``, with both outputs and what disagrees; None when the
        student's function crashed on a case (no relation between two outputs explains a crash)."""
        seen = []
        for number, case in enumerate(self.cases):
            if case.last and not self.edges:
                continue
            kwargs = _cast(case.kwargs, dtype)
            try:
                expected = _run(self.reference, kwargs, case.grad, self.select, name="reference", refuses=case.refuses)
            except ValueError:
                continue  # a drawn case the reference refuses: not asked of the student either
            expected.categorical = self.categorical
            try:
                got = self._student(number, dtype)
            except (AssertionError, NotRecorded):
                return None
            wrong = [what for what, _ in _differences(expected, got, self.rtol, self.atol)]
            seen.append(Seen(kwargs, expected, got, wrong))
        return seen


def _fail(name, case, dtype, problem, got, mistakes, kwargs, select, rtol, atol, expected=None, others=None):
    """Raise the most helpful message: a known mistake that explains every case, else the first difference."""
    where = f"{case.description} ({_label(kwargs, dtype)})"
    replays = []
    for mistake in mistakes:
        try:
            replays.append((mistake, _run(mistake.fn, kwargs, case.grad, select, name="mistake", refuses=case.refuses)))
        except Exception:  # noqa: BLE001 - a mistake that cannot run on this case tells nothing
            continue
    # 1. The student made exactly this mistake: every output and gradient matches it, here and on every other
    #    case. Several mistakes that no case tells apart are all named.
    matching = [mistake for mistake, wrong in replays if _compare(wrong, got, rtol, atol) is None]
    if others is not None:
        matching = [m for m in matching if others.consistent(m, refusals=case.refuses)]
    if matching:
        also = "".join(f"\n  or, giving the same numbers on every case: {m.message}" for m in matching[1:])
        raise AssertionError(f"{name}: {matching[0].message}{also}\n  seen on the case: {where}")
    # 2. Several mistakes at once (say a quotient ratio *and* logp_old left attached): name the one
    #    that explains the first difference, where it reproduces exactly that output or gradient on every case.
    first = None
    if expected is not None and not case.refuses:
        first = next(iter(_differences(expected, got, rtol, atol)), None)
    if first is not None and not first[0].startswith("dtype of "):  # a mistake's message is about values
        what, _ = first
        for mistake, wrong in replays:
            own = _component(wrong, what)
            if (
                _compare(own, _component(got, what), rtol, atol) is None
                and _compare(own, _component(expected, what), rtol, atol) is not None
                and _same_values_for_a_gradient(what, wrong, got, rtol, atol)
                and (others is None or others.consistent(mistake, component=what))
            ):
                raise AssertionError(
                    f"{name}: {mistake.message}\n  seen on the case: {where}, "
                    f"in the {what}; fix it and run the check again: there may be more to fix"
                )
    evidence = f"\n  inputs: {_inputs(kwargs)}"
    if first is not None and "expected" not in problem and not first[0].startswith("dtype of "):
        what = first[0]
        evidence += f"\n  yours: {_outputs(got, what)}; the reference's: {_outputs(expected, what)}"
    # 3. No mistake explains the evidence, but one relation between the outputs holds on every wrong case.
    described = _structure(others, case, dtype, rtol, atol)
    if described is not None:
        raise AssertionError(f"{name}: {described}\n  seen on the case: {where}\n  {problem}{evidence}")
    # 4. Nothing explains the evidence: the difference, and what to replay it with. A case with no answer is named
    #    on the first line: what makes it unanswerable (an empty list, a group of one) is what the student missed.
    if case.refuses and problem.startswith(MUST_REFUSE):
        raise AssertionError(
            f"{name}: you returned an answer where there is none to give: {case.description}\n  {problem}{evidence}"
        )
    raise AssertionError(f"{name}: {problem}\n  on the case: {where}{evidence}")


def _same_values_for_a_gradient(what: str, wrong: _Outcome, got: _Outcome, rtol, atol) -> bool:
    """Whether a mistake named for a gradient (the first difference, so the student's values are right) gives the
    student's values too: one that reproduces the gradient with other values (k1's gradient under k3's values) is
    not what the student wrote."""
    if not what.startswith("gradient of "):
        return True
    return _compare(_Outcome(values=wrong.values), _Outcome(values=got.values), rtol, atol) is None


def _structure(others, case, dtype, rtol, atol) -> str | None:
    """The structural description of every wrong case, or None. Reading the evidence runs the reference on every
    case and looks at shapes no case was written for: a failure there is the check's, and must not hide the
    student's message, so it falls back to the plain difference."""
    if others is None or case.refuses:
        return None
    try:
        seen = others.evidence(dtype)
        described = describe(seen, rtol, atol, others.right_in(dtype)) if seen else None
        return described or rank_split(others, dtype)
    except Exception:  # noqa: BLE001 - no description rather than a crash of the check
        return None


def explain_crash(name: str, crash: AssertionError, number: int, dtype: torch.dtype, others: _Others) -> None:
    """Raise a crash of the student's function on case ``number`` with what every case says, where that is more:
    a function that crashes on every batch and is right on every single row is told so (the crash itself follows).
    Returns, leaving the crash to be raised as it is, otherwise."""
    # Read from the words, which the grader has too (it holds the crash's text, not the exception): an input
    # changed in place or a wrong kind is not a crash of the student's code, and is said plainly already.
    words = str(crash)
    if not words.startswith(f"{name} raised ") or others.cases[number].refuses:
        return
    hint = _crash_hint(RuntimeError(words.split("\n  on the case:")[0]))
    if hint and hint != BROADCAST_HINT:
        return  # torch's words point to a cause (a shape unpacked, an einsum of fixed rank): more than where it fails
    # Shapes that do not broadcast have two likely causes, one a size read from the front: where every single row is
    # right and every batch fails, the cases say it is that one.
    others._seen[number, dtype] = crash
    try:
        split = rank_split(others, dtype)
    except Exception:  # noqa: BLE001 - the crash as it is rather than a crash of the check
        return
    if split is not None:
        first_seen = str(crash).replace("\n", "\n  ")
        raise AssertionError(f"{name}: {split}\n  first seen as: {first_seen}") from crash.__cause__


def _inputs(kwargs: Mapping[str, Any]) -> str:
    """A case's arguments, short: tensors rounded and cut after 8 entries, objects by their type."""
    shown = []
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            text = _show(value.detach().double()) if value.is_floating_point() else _show_exact(value)
        elif value is None or isinstance(value, (bool, int, float, str)):
            text = repr(value)
        elif isinstance(value, (list, tuple)) and len(repr(value)) <= 80:
            text = repr(value)
        else:
            text = f"<{type(value).__name__}>"
        if len(text) > 120:
            text = text[:117] + "..."
        shown.append(f"{key}={text}")
    return ", ".join(shown)


def _show_exact(t: torch.Tensor) -> str:
    """Integer and bool tensors as they are (a token id rounded to 4 digits would mislead)."""
    flat = t.flatten()[:8].tolist()
    more = ", ..." if t.numel() > 8 else ""
    if t.dim() == 0:
        return repr(t.item())
    return f"[{', '.join(repr(x) for x in flat)}{more}] (shape {tuple(t.shape)})"


def _outputs(outcome: _Outcome, what: str) -> str:
    part = _component(outcome, what)
    tensors = list(part.values.values()) + list(part.grads.values())
    if not tensors:
        return "nothing"
    return _show(tensors[0].detach().double())
