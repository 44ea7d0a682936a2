"""Record, then judge: the two halves of a check at grading time (see :mod:`course_lib.checks`).

In a notebook no session is active and a check judges at once. ``python -m course_lib.grade`` opens a *record*
session in the grading kernel at the top of each check cell (:func:`start`), and a *judge* session in its own
process (:func:`judging`), where the check cell runs again and every ``check_against_reference`` call reads the
student's results from the records instead of calling the student's function.

A record file is plain data: ``numpy.savez`` of float64 arrays, named ``<case>.<dtype>.value.<output>`` and
``<case>.<dtype>.grad.<input>``, and a string array ``<case>.<dtype>.error`` for a drawn case the student's
function failed on. It is read back with ``allow_pickle=False``: nothing of the student's objects reaches the grader.

While a check cell records, the borrowed-code watch (:mod:`course_lib.checks.watch`) is on: in every thread of
the kernel when the grader's guard is installed (:mod:`course_lib.checks.guard`, which also gives the cell its
drawn cases' seed and signs the cell's verdict for the grader), else in this thread (a test, a notebook rerun by
hand with a session opened by hand).
"""

from __future__ import annotations

import _thread
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

import course_lib.checks.watch as watch
from course_lib.checks.watch import ReferenceCalled  # noqa: F401 (re-exported: the grader names it)

MAX_RECORD = 64 << 20  # bytes: a record larger than this is refused
MAX_UNPACKED = 256 << 20  # bytes: a record whose arrays would take more, once decompressed, is refused unread
# The events this module sends the grader's guard (course_lib.checks.guard), which knows these functions' bytecode.
ARM, WATCH, SEEN, DISARM = (f"course_lib.grading.{e}" for e in ("arm", "watch", "seen", "disarm"))


class NotRecorded(Exception):
    """A judged check needed something the kernel did not record (a check that calls the function itself)."""


@dataclass
class Session:
    mode: str  # "record" (in the kernel) or "judge" (in the grader)
    folder: Path
    seed: int
    calls: int = 0
    lines: list[str] = field(default_factory=list)  # the "✔" lines of a judge session
    replies: list = field(default_factory=list)  # what the student's function gave to direct calls, in order
    replayed: bool = False  # a judge session used the replies
    exercise: str = "the check"
    allowed: tuple = ()  # qualified names of course_lib code the student's code may call (and what they hold)
    guarded: bool = False  # the grader's guard watches every thread; else the watch below, in this thread
    seen: list = field(default_factory=list)  # what the watch saw (without the guard)
    codes: frozenset = frozenset()  # the references of this cell's checks (without the guard)

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


def start(folder: str, seed: int | None = None, exercise: str = "the check", allowed=(), names=(), cell=None) -> None:
    """Open a record session (called by the grader's code at the top of a check cell in the grading kernel).

    ``allowed``: what the exercise may call besides :data:`course_lib.checks.watch.ALLOWED` (the exercise's
    ``allowed`` list in the solution notebook's metadata); ``names``: what the solution cell defines, each of
    which must be the student's own code, not course_lib's (the check calls it, so the watch would see
    course_lib calling course_lib); ``cell``: the check cell's id, for which the grader's guard gives the seed
    of the drawn cases (without the guard, ``seed``).
    """
    Path(folder).mkdir(parents=True, exist_ok=True)
    allowed = watch.allowed_for(exercise, allowed)
    session = Session("record", Path(folder), seed if seed is not None else 0, exercise=exercise, allowed=allowed)
    _SESSION.set(session)
    namespace = sys._getframe(1).f_globals
    for name in names:
        borrowed = watch.borrowed(namespace.get(name), allowed)
        if borrowed:
            raise ReferenceCalled(watch.message(exercise, borrowed))
    answer = _arm(cell if cell is not None else "", exercise, allowed)
    if answer is None:
        if cell is not None:
            raise ReferenceCalled(f"{exercise}: the grader's guard did not answer (was the kernel tampered with?)")
        session.seen = []
        _local_on(session)
        return
    session.guarded = True
    drawn, problems = answer
    if problems:
        raise ReferenceCalled(f"{exercise}: {problems[0]}")
    session.seed = drawn


def _arm(cell: str, exercise: str, allowed: tuple):
    """Ask the guard (if installed) to turn the watch on in every thread: (seed, problems), or None without it."""
    box: list = []
    sys.audit(ARM, cell, exercise, tuple(allowed), box)
    return box[0] if box else None


def _watch(codes: frozenset, allowed: tuple) -> None:
    """Tell the guard a check's reference (its code counts whoever calls it) and its allowed helpers."""
    sys.audit(WATCH, codes, tuple(allowed))


def _disarm():
    """Ask the guard to turn the watch off and sign the cell's verdict: (seen, problems), or None without it."""
    box: list = []
    sys.audit(DISARM, box)
    return box[0] if box else None


def _local_on(session: Session) -> None:
    """The watch without the guard: in this thread and the threads started from now on."""
    hook = watch.make_hook(
        session.codes, session.allowed, lambda what, ref: session.seen.append((what, ref)), _thread.get_ident()
    )
    sys.setprofile(hook)
    threading.setprofile(hook)


@atexit.register
def _local_off() -> None:
    """The local watch off; also at exit, where a watch that a raising check left on would outlive its globals
    (with the guard installed, only the guard turns the watch off: nothing to do)."""
    with contextlib.suppress(PermissionError):
        sys.setprofile(None)
    threading.setprofile(None)


@contextlib.contextmanager
def watching(reference, name: str):
    """While a check records in the grading kernel: the reference's code counts whoever calls it (the check never
    calls it while it records), and the check's own allowed helpers are added; the verdict when it ends."""
    session = current()
    codes, allowed = watch.reference_codes(reference), watch.allowed_for(name)
    if session.guarded:
        _watch(codes, allowed)
    else:
        session.codes, session.allowed = session.codes | codes, session.allowed + allowed
        _local_on(session)
    yield
    if not session.guarded:
        watch.verdict(name if name != "the check" else session.exercise, session.seen)


@contextlib.contextmanager
def judging(folder: Path, seed: int):
    """A judge session over the records of one check cell (in the grader's process, thread-safe)."""
    session = Session("judge", Path(folder), seed)
    token = _SESSION.set(session)
    try:
        yield session
    finally:
        _SESSION.reset(token)


def replayable(compute, name: str | None = None):
    """The student's reply to one direct call of a check (one that does not go through
    ``check_against_reference``), made plain by the check: a float, a float64 tensor, or a tuple of them.

    In a notebook, ``compute()`` under the borrowed-code watch (``name``: the check's, for its message). While
    recording, ``compute()``, kept in order for the grader (saved by :func:`finish`). While judging, the kernel's
    reply, in the same order: the check's comparison and messages then run in the grader, on plain data.
    """
    session = current()
    if session is None:
        with watch.watched(name or _checker_name()):
            return compute()
    if session.mode == "record":
        reply = compute()
        session.replies.append(reply)
        return reply
    replies = session.replay()
    if not replies:
        raise NotRecorded("the check asked more than the kernel recorded")
    return replies.pop()


def _checker_name() -> str:
    """The exercise of the ``check_<name>`` function that called :func:`replayable` (for the watch's message)."""
    frame = sys._getframe(2)
    while frame is not None and not frame.f_code.co_name.startswith("check_"):
        frame = frame.f_back
    return frame.f_code.co_name.removeprefix("check_") if frame is not None else "the check"


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
            unpacked = _unpacked_size(f)
            if unpacked > MAX_UNPACKED:
                raise NotRecorded(
                    f"{name}: the record would take {unpacked / 2**20:.0f} MB once decompressed (a check's records "
                    f"take a few kB; at most {MAX_UNPACKED >> 20} MB is read)"
                )
            f.seek(0)
            with np.load(f, allow_pickle=False) as data:
                arrays = {key: data[key] for key in data.files}
        except NotRecorded:
            raise
        except Exception as error:  # noqa: BLE001 - a forged or broken file is the student's problem
            raise NotRecorded(f"{name}: the record cannot be read ({type(error).__name__})") from None
    if str(arrays.get("name", "")) != name:
        raise NotRecorded(f"{name}: the record is of another check")
    for key, array in arrays.items():
        if key not in ("name", "kinds") and not key.endswith(".error") and array.dtype != np.float64:
            raise NotRecorded(f"{name}: the record holds {array.dtype} data, not float64")
    return arrays


def _unpacked_size(f) -> int:
    """Bytes a record's arrays would take once loaded, read from the zip's directory and each array's header
    before anything is decompressed: a record bomb (a few MB that expand to gigabytes, or a header that claims a
    huge shape) is refused before it costs the grader its memory."""
    import zipfile

    total = 0
    with zipfile.ZipFile(f) as archive:
        for member in archive.infolist():
            total += member.file_size  # what the zip says it holds (reading stops there: zipfile checks)
            if not member.filename.endswith(".npy") or total > MAX_UNPACKED:
                continue
            with archive.open(member) as array:
                major, _ = np.lib.format.read_magic(array)
                read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
                shape, _, dtype = read_header(array)
            items = 1
            for size in shape:
                items *= int(size)
            total += items * dtype.itemsize  # what its header says it holds
    return total


def finish() -> None:
    """The end of a check cell in the grading kernel: the replies saved, the watch off, and its verdict."""
    session = current()
    if session is None:
        return
    if session.replies:
        arrays = {**_pack(session.replies), "name": np.array("replies")}
        with open(session.folder / "replies.npz", "wb") as f:
            np.savez(f, **arrays)
    if not session.guarded:
        _local_off()
        watch.verdict(session.exercise, session.seen)
        return
    answer = _disarm()
    if answer is None:
        raise ReferenceCalled(f"{session.exercise}: the grader's guard did not answer (was the kernel tampered with?)")
    seen, problems = answer
    watch.verdict(session.exercise, seen)
    if problems:
        raise ReferenceCalled(f"{session.exercise}: {problems[0]}")
