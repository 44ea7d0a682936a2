"""Borrowed answers: the student's code calling course_lib's own code while a check runs it.

One rule, the same in a notebook and at grading, with the same words: while a check runs the
student's function, any call that the student's code makes into ``course_lib``'s code fails the
check ("your solution calls course_lib's own gae.discounted_returns; at grading time that counts
as not solved: write it yourself"), unless the check lists it under :data:`ALLOWED`. So does a call
into a library that does the exercise's job for it (:data:`BORROWED_LIBRARIES`: TRL); ``torch``,
``numpy``, ``transformers`` and Python's own library are tools, never counted. The reference the
check compares with counts whoever calls it. ``docs/grading.md`` ("Borrowed code") says why.

The watch is a profile hook (:func:`make_hook`). A call counts when its code is in a watched file,
the code that made it is the student's (a notebook cell's: neither course_lib's nor an installed
package's; the walk up the stack looks through torch and the standard library), and that code was
itself called by course_lib (it runs under the check, not at the top of the check cell); in any
thread but the check's, a student caller is enough. The hook keeps no state it could lose: what it
needs is bound in its keyword defaults when it is made (no global name is looked up, so patching
this module changes nothing), and it only appends what it saw to a list.

In a notebook, :func:`watched` turns the hook on around each call of the student's function, in
that thread and in threads started meanwhile. At grading, :mod:`course_lib.checks.guard` turns the
same hook on in every thread of the kernel for the whole check cell.
"""

from __future__ import annotations

import _thread
import contextlib
import importlib.util
import os
import sys
import threading
from pathlib import Path

COURSE = os.path.realpath(Path(__file__).resolve().parents[1])  # the course_lib package folder
ALWAYS_ALLOWED = ("course_lib._validate",)  # argument checks, which stubs may call
# What the top of a check cell calls while the guard watches: the check itself (any ``check_*`` of course_lib.checks)
# and the grader's ``recording.finish``. Any other course_lib call made there is the student's, whatever put it there
# (an input transformer's line, a module a finder of the student's handed to the check cell's import).
TOP_LEVEL = frozenset({"finish"})

# check name -> the course_lib (or TRL) code the student's function may call while that check runs it (a class or
# module allows everything it holds). Everything else of course_lib's is the student's to write.
ALLOWED = {
    "grpo_loss": ("course_lib.grpo.group_advantages", "course_lib.grpo.aggregate_loss", "course_lib.kl.kl_estimate"),
    "grpo_step": (
        "course_lib.tiny_lm.TinyLM",
        "course_lib.policy_gradient.gather_log_probs",
        "course_lib.grpo.grpo_loss",
    ),
    "answer_reward": ("course_lib.rewards.math_answer_reward", "course_lib.rewards.extract_final_answer"),
    "completion_logps": (
        "course_lib.policy_gradient.gather_log_probs",
        "trl.trainer.utils.selective_log_softmax",  # TRL's gather: the course's gather_log_probs under TRL's name
    ),
    "grpo_config_kwargs": ("course_lib.lm_rl_config.LMRLConfig",),
}


# (check name, what the student called) -> the student's own function that does that job, written in an earlier
# exercise of the same notebook: the message tells them to call it (chapter 08's grpo_step uses the student's own
# completion_mask of exercise 2).
OWN_VERSION = {
    (
        "grpo_step",
        "lm_sampling.completion_mask",
    ): "completion_mask, the function you wrote in exercise 2 of this notebook",
}


# check name -> the exercise's own earlier functions that its text tells the student to use ("Use your two
# functions"), as course_lib names them. A call of course_lib's is still the rule's failure; in a notebook the check
# adds what it finds with those calls allowed (``check_against_reference``), so the next mistake is told at once.
EARLIER = {
    "PPOLoss": ("course_lib.ppo.clipped_surrogate_loss", "course_lib.ppo.value_loss"),
}


def _package_root(name: str) -> str | None:
    """The folder of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return os.path.realpath(locations[0]) if locations else None


# Libraries whose code does an exercise's job (TRL's selective_log_softmax is chapter 02's gather_log_probs):
# counted like course_lib's own. torch, numpy, transformers and the standard library are tools.
BORROWED_LIBRARIES = tuple(
    (name, root) for name, root in (("trl", _package_root("trl")),) if root is not None and root != COURSE
)
LIBRARY = tuple(
    {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    | {p for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
) + ("<frozen ",)


class ReferenceCalled(AssertionError):
    """The student's code ran course_lib's code (or TRL's) while a check ran it: the check fails with this."""

    def _render_traceback_(self):  # IPython shows the message alone: the traceback is the watch's, not the student's
        return [f"{type(self).__name__}: {self}"]


def owner_and_name(name: str) -> tuple[str, str]:
    """(whose code, its name as the message writes it) for a qualified name the hook saw."""
    if name.startswith("course_lib."):
        return "course_lib", name.removeprefix("course_lib.")
    return name.split(".")[0].upper() if name.startswith("trl.") else name.split(".")[0], name


def message(exercise: str, what: str, reference: bool = False) -> str:
    """The one message of a borrowed answer, in a notebook as at grading."""
    if reference:
        return (
            f"{exercise}: your solution calls course_lib's own {what} (the reference the check compares with); "
            "at grading time that counts as not solved: write it yourself"
        )
    owner, short = owner_and_name(what)
    fix = "write it yourself"
    if (exercise, short) in OWN_VERSION:
        fix = f"call your own {OWN_VERSION[exercise, short]}"
    return f"{exercise}: your solution calls {owner}'s own {short}; at grading time that counts as not solved: {fix}"


def verdict(exercise: str, seen) -> None:
    """Raise :class:`ReferenceCalled` for the first borrowed call the hook saw, if any."""
    for what, reference in seen:
        raise ReferenceCalled(message(exercise, what, reference))


def allowed_for(name: str, extra=()) -> tuple[str, ...]:
    return tuple(ALWAYS_ALLOWED) + tuple(ALLOWED.get(name, ())) + tuple(extra)


def reference_codes(fn) -> frozenset:
    """(file, first line, name) of the reference's code; of the functions it wraps when it is a closure
    (``seeded(reference)`` wraps the student's function in the same code, which must not count)."""
    inner = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ()) if _callable_cell(c)]
    inner += [w for w in [getattr(fn, "__wrapped__", None)] if w is not None]
    if inner:
        return frozenset().union(*(reference_codes(f) for f in inner if f is not fn))
    code = getattr(fn, "__code__", None)
    return frozenset({(code.co_filename, code.co_firstlineno, code.co_name)}) if code is not None else frozenset()


def _callable_cell(cell) -> bool:
    try:
        return callable(cell.cell_contents)
    except ValueError:  # an empty cell
        return False


def _roots(course: str = COURSE, borrowed=BORROWED_LIBRARIES) -> tuple:
    """(folder prefix, its length, package name) of every watched package."""
    found = [(course + os.sep, "course_lib")] + [(root + os.sep, name) for name, root in borrowed]
    return tuple((prefix, len(prefix), package) for prefix, package in found)


def make_hook(codes: frozenset, allowed: tuple, report, main: int, course: str = COURSE):
    """The watch: a profile function that calls ``report(qualified name, is the reference)`` for each borrowed
    call. Everything it reads is bound here, in its keyword defaults (see the module docstring)."""
    roots = _roots(course)

    def _sealed_watch(
        frame,
        event,
        arg,
        *,
        _watched=tuple(r[0] for r in roots),
        _roots=roots,
        _course=course + os.sep,
        _library=LIBRARY,
        _codes=frozenset(codes),
        _allowed=tuple(allowed),
        _report=report,
        _main=main,
        _ident=_thread.get_ident,
        _sep=os.sep,
        _checks=course + os.sep + "checks" + os.sep,
        _top=TOP_LEVEL,
    ):
        if event != "call":
            return None
        code = frame.f_code
        path = code.co_filename
        if not path.startswith(_watched):
            return None
        if (path, code.co_firstlineno, code.co_name) in _codes:
            _report(code.co_name, True)
            return None
        if code.co_name == "<module>":
            return None  # an import inside a function: module code, allowed
        for prefix, n, package in _roots:
            if path.startswith(prefix):
                module = (package + "." + path[n:-3].replace(_sep, ".")).removesuffix(".__init__")
                break
        name = module + "." + code.co_qualname
        for a in _allowed:
            if name == a or name.startswith(a + "."):
                return None
        caller = frame.f_back
        while caller is not None:  # the code that made the call: course_lib's, or the student's?
            c = caller.f_code
            p = c.co_filename
            if p.startswith(_watched):
                return None  # course_lib (or the library itself) made the call
            if not (p.startswith(_library) or (p == "<string>" and c.co_qualname.startswith("__create_fn__."))):
                break  # a notebook cell's code: the student's (a dataclass's generated __init__ is looked through)
            caller = caller.f_back
        if caller is not None and _ident() == _main:
            above = caller.f_back
            while above is not None and not above.f_code.co_filename.startswith(_course):
                above = above.f_back
            if above is None:  # the check cell's own top level: it calls the check (and the grader's finish) only
                checked = path.startswith(_checks) and (code.co_name.startswith("check_") or code.co_name in _top)
                if checked:
                    return None
        _report(name, False)
        return None

    return _sealed_watch


_TRUSTED = [False]


@contextlib.contextmanager
def trusting():
    """For the course's own tests: checks run here without the watch (a reference passed to its own check, a wrong
    function built on course_lib's helpers to prove a message). Grading never trusts: it records under the guard."""
    _TRUSTED[0] = True
    try:
        yield
    finally:
        _TRUSTED[0] = False


def trusted() -> bool:
    return _TRUSTED[0]


@contextlib.contextmanager
def watched(name: str, reference=None, allowed=()):
    """In a notebook: the watch on around a call of the student's function, then its verdict (the same words as
    at grading). At grading (:mod:`course_lib.checks.guard` installed) the guard watches instead."""
    if _TRUSTED[0]:
        yield
        return
    seen: list = []
    codes = reference_codes(reference) if reference is not None else frozenset()
    hook = make_hook(codes, allowed_for(name, allowed), lambda what, ref: seen.append((what, ref)), _thread.get_ident())
    before = sys.getprofile()
    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(before)
        threading.setprofile(None)
    verdict(name, seen)


def borrowed(obj, allowed, depth: int = 0) -> str | None:
    """The course_lib function or class a name of the solution cell holds (or wraps), if not allowed: the check
    calls it itself, so the watch would see course_lib calling course_lib."""
    import functools

    if obj is None or depth > 5:
        return None
    if isinstance(obj, functools.partial):
        return borrowed(obj.func, allowed, depth + 1)
    obj = getattr(obj, "__func__", obj)  # a bound method
    code = getattr(obj, "__code__", None)
    if code is not None:
        name = course_name(code)
        inner = [c.cell_contents for c in (getattr(obj, "__closure__", None) or ()) if _callable_cell(c)]
        if name and inner:  # a check's own wrapper around the student's function (``seeded(fn)``): look inside
            for f in inner:
                found = borrowed(f, allowed, depth + 1)
                if found:
                    return found
            return None
        return name if name and not is_allowed(name, allowed) else None
    classes = obj.__mro__ if isinstance(obj, type) else type(obj).__mro__
    for cls in classes:  # a course_lib class, a subclass with nothing of its own, an instance of either
        for value in vars(cls).values():
            value = getattr(value, "__func__", value)
            code = getattr(value, "__code__", None)
            name = course_name(code) if code is not None else None
            if name and not is_allowed(name, allowed):
                return name.rsplit(".", 1)[0] if "." in code.co_qualname else name
    return None


def course_name(code) -> str | None:
    """``course_lib.module.Qual.name`` of a code object from course_lib's files ("" for module code), else None."""
    path = os.path.realpath(code.co_filename) if not code.co_filename.startswith("<") else ""
    if not (path.startswith(COURSE + os.sep) and path.endswith(".py")):
        return None
    module = ("course_lib." + path[len(COURSE) + 1 : -3].replace(os.sep, ".")).removesuffix(".__init__")
    return "" if code.co_name == "<module>" else f"{module}.{code.co_qualname}"


def is_allowed(name: str, allowed) -> bool:
    return not name or any(name == a or name.startswith(a + ".") for a in allowed)
