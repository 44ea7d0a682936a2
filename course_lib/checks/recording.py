"""Record, then judge: the two halves of a check at grading time (see :mod:`course_lib.checks`).

In a notebook no session is active and a check judges at once. ``python -m course_lib.grade`` opens a *record*
session in the grading kernel at the top of each check cell (:func:`start`), and a *judge* session in its own
process (:func:`judging`), where the check cell runs again and every ``check_against_reference`` call reads the
student's results from the records instead of calling the student's function.

A record file is plain data: ``numpy.savez`` of float64 arrays, named ``<case>.<dtype>.value.<output>`` and
``<case>.<dtype>.grad.<input>``, and a string array ``<case>.<dtype>.error`` for a drawn case the student's
function failed on. It is read back with ``allow_pickle=False``: nothing of the student's objects reaches the grader.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import os
import stat
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

MAX_RECORD = 64 << 20  # bytes: a record larger than this is refused


class ReferenceCalled(BaseException):
    """The student's code ran the reference while a check recorded (a BaseException: no check can swallow it)."""


class NotRecorded(Exception):
    """A judged check needed something the kernel did not record (a check that calls the function itself)."""


@dataclass
class Session:
    mode: str  # "record" (in the kernel) or "judge" (in the grader)
    folder: Path
    seed: int
    calls: int = 0
    lines: list[str] = field(default_factory=list)  # the "✔" lines of a judge session
    codes: set = field(default_factory=set)  # (file, line, name) of the references of this cell's checks
    seen: list = field(default_factory=list)  # the name of a reference that ran, once one did
    hook: object = None  # the profile hook watching for them
    replies: list = field(default_factory=list)  # what the student's function gave to direct calls, in order
    replayed: bool = False  # a judge session used the replies
    exercise: str = "the check"
    allowed: tuple = ()  # qualified names of course_lib code the student's code may call (and what they hold)
    kinds: dict = field(default_factory=dict)  # code object -> its qualified name if course_lib's, else "" or None

    def replay(self) -> list:
        """The kernel's replies to the check's direct calls (judge mode), loaded once."""
        if not self.replayed:
            self.replayed = True
            arrays = load(self.folder / "replies.npz", "replies")
            self.replies = [_unpack(arrays, n, str(kind)) for n, kind in enumerate(arrays["kinds"])][::-1]
        return self.replies

    def begin(self, name: str) -> "Records":
        self.calls += 1
        path = self.folder / f"record-{self.calls}.npz"
        return Records(self, name, path, {} if self.mode == "record" else load(path, name))


_SESSION: contextvars.ContextVar[Session | None] = contextvars.ContextVar("course_lib_check_session", default=None)


def current() -> Session | None:
    return _SESSION.get()


def is_recording() -> bool:
    """Whether this is the grading kernel, recording (the check must still make every call the judge may need)."""
    session = current()
    return session is not None and session.mode == "record"


def start(folder: str, seed: int, exercise: str = "the check", allowed=(), names=()) -> None:
    """Open a record session (called by the grader's code at the top of a check cell in the grading kernel).

    ``allowed``: the course_lib code the student's code may call while the check runs (the exercise's
    ``allowed`` list in the solution notebook's metadata); ``names``: what the solution cell defines, each of
    which must be the student's own code, not course_lib's (see :func:`watching`).
    """
    _disarm()  # an earlier cell's watch, if it ended by an exception
    Path(folder).mkdir(parents=True, exist_ok=True)
    session = Session("record", Path(folder), seed, exercise=exercise, allowed=tuple(ALWAYS_ALLOWED) + tuple(allowed))
    _SESSION.set(session)
    namespace = sys._getframe(1).f_globals
    for name in names:
        borrowed = _borrowed(namespace.get(name), session)
        if borrowed:
            raise ReferenceCalled(_message(exercise, borrowed, reference=False))
    _arm(session)


@contextlib.contextmanager
def judging(folder: Path, seed: int):
    """A judge session over the records of one check cell (in the grader's process, thread-safe)."""
    session = Session("judge", Path(folder), seed)
    token = _SESSION.set(session)
    try:
        yield session
    finally:
        _SESSION.reset(token)


def replayable(compute):
    """The student's reply to one direct call of a check (one that does not go through
    ``check_against_reference``), made plain by the check: a float, a float64 tensor, or a tuple of them.

    In a notebook, ``compute()``. While recording, ``compute()``, kept in order for the grader
    (saved by :func:`finish`). While judging, the kernel's reply, in the same order: the
    check's comparison and messages then run in the grader, on plain data.
    """
    session = current()
    if session is None:
        return compute()
    if session.mode == "record":
        reply = compute()
        session.replies.append(reply)
        return reply
    replies = session.replay()
    if not replies:
        raise NotRecorded("the check asked more than the kernel recorded")
    return replies.pop()


def _pack(replies: list) -> dict:
    arrays, kinds = {}, []
    for n, reply in enumerate(replies):
        parts = reply if isinstance(reply, tuple) else (reply,)
        kinds.append(
            f"tuple{len(parts)}" if isinstance(reply, tuple) else "float" if isinstance(reply, float) else "tensor"
        )
        for k, part in enumerate(parts):
            arrays[f"{n}.{k}"] = np.asarray(float(part), dtype=np.float64) if isinstance(part, float) else _plain(part)
    arrays["kinds"] = np.array(kinds)
    return arrays


def _unpack(arrays: dict, n: int, kind: str):
    if kind == "float":
        return float(arrays[f"{n}.0"])
    if kind == "tensor":
        return torch.from_numpy(arrays[f"{n}.0"])
    return tuple(torch.from_numpy(arrays[f"{n}.{k}"]) for k in range(int(kind[len("tuple") :])))


def report(line: str) -> None:
    """A check's success line: printed in a notebook, kept by a judge session."""
    session = current()
    if session is not None and session.mode == "judge":
        session.lines.append(line)
    else:
        print(line)


def _key(number: int, dtype: torch.dtype) -> str:
    return f"{number}.{str(dtype).replace('torch.', '')}"


@dataclass
class Records:
    session: Session
    name: str
    path: Path
    arrays: dict

    def put(self, number: int, dtype: torch.dtype, outcome, error: str | None = None) -> None:
        key = _key(number, dtype)
        if error is not None:
            self.arrays[f"{key}.error"] = np.array(str(error)[:2000])
            return
        for kind, named in (("value", outcome.values), ("grad", outcome.grads)):
            for output, tensor in named.items():
                self.arrays[f"{key}.{kind}.{output}"] = _plain(tensor)

    def save(self) -> None:
        self.arrays["name"] = np.array(self.name)
        with open(self.path, "wb") as f:
            np.savez(f, **self.arrays)

    def get(self, number: int, dtype: torch.dtype) -> tuple[dict, dict]:
        """(values, gradients) the student's function gave on a case, as tensors of ``dtype``."""
        key = _key(number, dtype)
        if f"{key}.error" in self.arrays:
            raise AssertionError(str(self.arrays[f"{key}.error"]))
        values, grads = {}, {}
        for name, array in self.arrays.items():
            parts = name.split(".")
            if ".".join(parts[:2]) == key and parts[2] in ("value", "grad"):
                target = values if parts[2] == "value" else grads
                target[".".join(parts[3:])] = torch.from_numpy(array).to(dtype)
        if not values:
            raise NotRecorded(f"{self.name}: no record of case {key}")
        return values, grads


def _plain(tensor) -> np.ndarray:
    """A float64 numpy array of what a tensor holds, whatever class it claims to be."""
    t = torch.Tensor.detach(tensor)
    if type(t) is not torch.Tensor:
        t = t.as_subclass(torch.Tensor)  # a subclass's own __torch_function__ is not used from here on
    return np.array(t.to(torch.float64).cpu().tolist(), dtype=np.float64).reshape(tuple(t.shape))


def load(path: Path, name: str) -> dict:
    """The arrays of one record file: a regular file, not a link, not too large; no pickle."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        raise NotRecorded(f"{name}: the check left no record (did the solution stop it?)") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_RECORD:
            raise NotRecorded(f"{name}: the record is not a plain file of a reasonable size")
        try:
            with np.load(f, allow_pickle=False) as data:
                arrays = {key: data[key] for key in data.files}
        except Exception as error:  # noqa: BLE001 - a forged or broken file is the student's problem
            raise NotRecorded(f"{name}: the record cannot be read ({type(error).__name__})") from None
    if str(arrays.get("name", "")) != name:
        raise NotRecorded(f"{name}: the record is of another check")
    for key, array in arrays.items():
        if key not in ("name", "kinds") and not key.endswith(".error") and array.dtype != np.float64:
            raise NotRecorded(f"{name}: the record holds {array.dtype} data, not float64")
    return arrays


def _codes(fn) -> set:
    """(file, first line, name) of the reference's code; of the functions it wraps when it is a closure
    (``seeded(reference)`` wraps the student's function in the same code, which must not count)."""
    inner = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ()) if _callable_cell(c)]
    inner += [w for w in [getattr(fn, "__wrapped__", None)] if w is not None]
    if inner:
        return set().union(*(_codes(f) for f in inner if f is not fn))
    code = getattr(fn, "__code__", None)
    return {(code.co_filename, code.co_firstlineno, code.co_name)} if code is not None else set()


def _callable_cell(cell) -> bool:
    try:
        return callable(cell.cell_contents)
    except ValueError:  # an empty cell
        return False


# --- borrowed answers: course_lib's code run by the student's code while a check records ---------------------
COURSE = os.path.realpath(Path(__file__).resolve().parents[1])  # the course_lib package folder
ALWAYS_ALLOWED = ("course_lib._validate",)  # argument checks, which stubs may call
LIBRARY = tuple(
    {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    | {p for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
)


def _course_name(code, session: Session) -> str | None:
    """``course_lib.module.Qual.name`` of a code object from course_lib's files ("" for module code), else None."""
    try:
        return session.kinds[code]
    except KeyError:
        pass
    name = None
    path = os.path.realpath(code.co_filename) if not code.co_filename.startswith("<") else ""
    if path.startswith(COURSE + os.sep) and path.endswith(".py"):
        module = ("course_lib." + path[len(COURSE) + 1 : -3].replace(os.sep, ".")).removesuffix(".__init__")
        name = "" if code.co_name == "<module>" else f"{module}.{code.co_qualname}"
    session.kinds[code] = name
    return name


def _allowed(name: str, session: Session) -> bool:
    return not name or any(name == a or name.startswith(a + ".") for a in session.allowed)


def _library(code) -> bool:
    """Code of Python or an installed package: the walk in :func:`_under_student` looks through it."""
    return (
        code.co_filename.startswith(LIBRARY)
        or code.co_filename.startswith("<frozen ")
        or code.co_qualname.startswith("__create_fn__.")
    )  # a dataclass's generated __init__ ("<string>")


def _under_student(frame, session: Session) -> bool:
    """Whether the code that made this call is the student's, running under the check.

    Walk up from the caller: course_lib's own code first (the check machinery, or an allowed helper)
    means course_lib called it; the student's code first (a notebook cell's code: neither course_lib's
    nor an installed library's) counts when course_lib code called *it* (it runs under the check, not at
    the top of the check cell). A thread with neither is the student's too.
    """
    while frame is not None and _course_name(frame.f_code, session) is None and _library(frame.f_code):
        frame = frame.f_back
    if frame is None:
        return True
    if _course_name(frame.f_code, session) is not None:
        return False
    frame = frame.f_back
    while frame is not None:
        if _course_name(frame.f_code, session) is not None:
            return True
        frame = frame.f_back
    return False


def _borrowed(obj, session: Session, depth: int = 0) -> str | None:
    """The course_lib function or class a name of the solution cell holds (or wraps), if not allowed."""
    import functools

    if obj is None or depth > 5:
        return None
    if isinstance(obj, functools.partial):
        return _borrowed(obj.func, session, depth + 1)
    obj = getattr(obj, "__func__", obj)  # a bound method
    code = getattr(obj, "__code__", None)
    if code is not None:
        name = _course_name(code, session)
        return name if name and not _allowed(name, session) else None
    classes = obj.__mro__ if isinstance(obj, type) else type(obj).__mro__
    for cls in classes:  # a course_lib class, a subclass with nothing of its own, an instance of either
        for value in vars(cls).values():
            value = getattr(value, "__func__", value)
            code = getattr(value, "__code__", None)
            name = _course_name(code, session) if code is not None else None
            if name and not _allowed(name, session):
                return name.rsplit(".", 1)[0] if "." in code.co_qualname else name
    return None


def _message(exercise: str, what: str, reference: bool) -> str:
    what = what.removeprefix("course_lib.") if not reference else what
    return (
        f"{exercise}: your solution calls course_lib's own {what}"
        + (" (the reference the check compares with)" if reference else "")
        + "; at grading time that counts as not solved: write it yourself"
    )


@contextlib.contextmanager
def watching(reference, name: str):
    """While a check records in the grading kernel: fail if the student's code runs course_lib's code.

    A profile hook, on from :func:`start` to :func:`finish` (the end of the check cell), sees every
    call. A call into course_lib's code fails the exercise when the student's code made it while the
    check ran (:func:`_under_student`) and the exercise does not allow it; the reference's code (its
    file, first line and name, whatever the import path: an alias, ``getattr(__import__(...), ...)``, a
    reloaded module, the file's source executed again) fails it whoever calls it, since the check
    never calls the reference while it records.
    """
    session = current()
    session.codes |= _codes(reference)
    _arm(session)
    yield
    _verdict(session, name)


def _arm(session: Session) -> None:
    if session.hook is None:

        def hook(frame, event, arg):
            code = frame.f_code
            name = _course_name(code, session) if event == "call" and not session.seen else None
            if name is None:
                return None
            if (code.co_filename, code.co_firstlineno, code.co_name) in session.codes:
                session.seen.append((code.co_name, True))
            elif not _allowed(name, session) and _under_student(frame.f_back, session):
                session.seen.append((name, False))
            return None

        session.hook = hook
    sys.setprofile(session.hook)
    threading.setprofile(session.hook)


@atexit.register
def _disarm() -> None:
    """The hook off; also at exit, where a watch that a raising check left on would outlive the globals it calls."""
    sys.setprofile(None)
    threading.setprofile(None)


def _verdict(session: Session, name: str) -> None:
    if session.hook is not None and sys.getprofile() is not session.hook:
        raise ReferenceCalled(f"{name}: your solution turned off the grader's profile hook while the check ran")
    if session.seen:
        raise ReferenceCalled(_message(name if name != "the check" else session.exercise, *session.seen[0]))


def finish() -> None:
    """The end of a check cell in the grading kernel: course_lib code borrowed since, then the hook off."""
    session = current()
    if session is None:
        return
    if session.replies:
        arrays = {**_pack(session.replies), "name": np.array("replies")}
        with open(session.folder / "replies.npz", "wb") as f:
            np.savez(f, **arrays)
    if session.hook is None:
        return
    try:
        _verdict(session, "the check")
    finally:
        _disarm()
