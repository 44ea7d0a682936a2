"""The grading kernel's guard: the watch in every thread, the drawn cases' seeds, and a verdict the kernel cannot forge.

``python -m course_lib.grade`` installs it in the first cell of every graded notebook (:func:`install`), before
any student code runs. It adds two audit hooks (PEP 578): once added, no Python code can remove them, and these
two look up no global name, so patching a module changes nothing they do.

- The **keeper** holds what the kernel's own code must not hold: the run's key (read from a file the grader wrote,
  then deleted), the check cells that have started, and what the watch saw. It answers only course_lib's
  recording code (:mod:`course_lib.checks.recording`, known by its bytecode). ``arm`` turns the watch
  (:func:`course_lib.checks.watch.make_hook`) on in *every* thread of the kernel and gives the check cell its
  seed, once per cell; ``watch`` adds a check's reference and its allowed helpers; the watch reports each
  borrowed call to it (``seen``); ``disarm`` takes a digest of the cell's records folder while the watch is still on
  (which makes the records final at that moment), turns the watch off and writes the cell's verdict (what the watch saw;
  a thread or process started while the check ran; a process still running when it began; and that digest), signed with
  the key, to a pipe that only the grader reads. The grader believes that line, not the kernel, and judges only records
  whose digest is the signed one. ``arm`` also refuses a check whose import machinery or IPython transformers are not
  those of the grader's first cell (each check cell puts them back before it imports). Both in
  :mod:`course_lib.checks.seal`.
- The **blocker** refuses, when the student's code asks (the nearest code on the stack that is neither an
  installed package's nor course_lib's is a notebook cell's; course_lib's frames are looked through, since a
  course_lib frame doing one of these things is calling back a callable it was handed): replacing or turning off
  the watch (``sys.setprofile``, ``sys.settrace``), new audit hooks, making or relabelling code (``code.__new__`` and
  ``code.replace``, ``marshal``, ``compile`` under a course_lib or installed file name, a function made from
  another's code), ``ctypes``, the garbage collector's lists of objects, other threads' frames; and, from anyone,
  changing the watch's defaults or code, a look at a frame of the keeper (a signal handler run inside it would see
  its key), or a process's memory opened as a file (``/proc/self/mem``). The kernel is made non-dumpable, so no
  process it starts can read or write its memory either. Starting programs is allowed: a process still running
  when a check begins, or started while it runs, fails that check (the keeper's verdict).

What it cannot stop is native code: a ``ctypes`` function object obtained before (``ctypes.memmove``) or numpy's
``as_strided`` can rewrite the interpreter's memory. ``docs/grading.md`` ("Limits") says so.
"""

from __future__ import annotations

import sys

from course_lib.checks import seal
from course_lib.checks.recording import ARM, DISARM, SEEN, WATCH
from course_lib.checks.seal import NAME_CHARACTERS, RECORDS, make_digest

KEY_FILE = ".grading-key"  # in the kernel's scratch folder: "<key in hex> <fd of the verdict pipe>"
MACHINERY_CHANGED = (
    "your solution changed Python's import machinery or IPython's input transformers, and the check cell could not "
    "put them back: a check must import and run the course's own code"
)
TASKS_CHANGED = (
    "your solution started a thread or a process while the check ran: a check's answers must come from the "
    "function it calls, in the calling thread"
)


def seed_of(key: bytes, cell: str) -> int:
    """The seed of one check cell's drawn cases: the grader and the keeper compute the same."""
    import hmac

    return int.from_bytes(hmac.digest(key, cell.encode("utf-8"), "sha256")[:4], "big") % 2**31


def verify(key: bytes, line: str) -> str | None:
    """The text of a line the keeper signed with ``key``, or None when the signature is not the key's."""
    import hmac

    mac, _, text = line.rstrip("\r\n").partition(" ")
    good = hmac.digest(key, text.encode("utf-8"), "sha256").hex()
    return text if hmac.compare_digest(mac, good) else None


def install(key_path: str = KEY_FILE) -> None:
    """Add the keeper and the blocker (the grader's first cell calls this, before any student code)."""
    import builtins
    import os
    import sys

    import course_lib.checks.recording as recording
    import course_lib.checks.watch as watch
    from course_lib.checks.blocker import known_lines, make_blocker

    with open(key_path, encoding="utf-8") as f:
        key_hex, fd = f.read().split()
    os.unlink(key_path)
    all_threads, setter = _all_threads()
    template = watch.make_hook(frozenset(), (), None, 0)
    genuine = {
        (code.co_filename, code.co_name): code.co_code
        for code in (recording._arm.__code__, recording._watch.__code__, recording._disarm.__code__)
    }
    records = os.path.join(os.path.dirname(os.path.abspath(key_path)), RECORDS) + os.sep
    canonical = seal.canonical(vars(builtins))
    keeper = _keeper(
        bytes.fromhex(key_hex),
        int(fd),
        genuine,
        all_threads,
        template,
        vars(builtins),
        (records, NAME_CHARACTERS, make_digest(vars(builtins))),
        canonical,
    )
    _not_dumpable()
    lines = known_lines(watch.COURSE)  # what compiling copied course_lib text would show
    blocker = make_blocker(watch.COURSE + os.sep, watch.LIBRARY, keeper.__code__, setter, template.__code__, lines)
    sys.addaudithook(keeper)
    sys.addaudithook(blocker)


def cut_long_errors(shell) -> None:
    """A 200 MB exception message, formatted and sent by the kernel, would cost it gigabytes: cut it first (over
    20,000 characters, the exception and those it was raised from). Course_lib's code, not a notebook cell's, so
    that formatting a traceback is never taken for the student's doing."""
    show = shell.showtraceback

    def showtraceback(exc_tuple=None, *args, **kwargs):
        value = (exc_tuple or sys.exc_info())[1]
        for _ in range(10):  # the exception and those it was raised from
            try:
                if len(str(value)) > 20_000:
                    value.args = (str(value)[:10_000] + " [... cut by the grader]",)
                value = value.__cause__ or value.__context__
            except Exception:  # noqa: BLE001 - an exception that cannot say what it is: shown as it is
                break
        return show(exc_tuple, *args, **kwargs)

    shell.showtraceback = showtraceback


def _not_dumpable() -> None:
    """No other process, even one the kernel starts, may read or write this one's memory (``/proc/PID/mem``,
    ptrace): only root could (``prctl(PR_SET_DUMPABLE, 0)``)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE


def _all_threads():
    """``all_threads(hook or None)``: that profile function in every thread of the interpreter (CPython 3.11's
    ``_PyEval_SetProfile`` on each thread state, as 3.12's ``PyEval_SetProfileAllThreads`` does), and the code that
    calls ``_PyEval_SetProfile`` (the blocker lets it). The C function behind a Python profile function is read
    from this thread's state after ``sys.setprofile``, its place checked against the hook's address."""
    import ctypes
    import sys

    api = ctypes.pythonapi
    get, head, after, set_profile, interp = (
        api.PyThreadState_Get,
        api.PyInterpreterState_ThreadHead,
        api.PyThreadState_Next,
        api._PyEval_SetProfile,
        api.PyInterpreterState_Get,
    )
    get.restype = head.restype = after.restype = interp.restype = ctypes.c_void_p
    head.argtypes = after.argtypes = [ctypes.c_void_p]
    set_profile.argtypes, set_profile.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.py_object], ctypes.c_int

    def sentinel(frame, event, arg):
        return None

    sys.setprofile(sentinel)
    words = (ctypes.c_void_p * 16).from_address(get())
    found = [i for i in range(2, 16) if words[i] == id(sentinel)]
    trampoline = words[found[0] - 2] if found else None
    sys.setprofile(None)
    if not trampoline:
        raise RuntimeError("course_lib.grade: cannot find the profile function of this Python (not CPython 3.11?)")

    states = interp()

    def all_threads(hook, _head=head, _after=after, _set=set_profile, _states=states, _c=trampoline):
        state = _head(_states)
        while state:
            _set(state, _c if hook is not None else None, hook)
            state = _after(state)

    return all_threads, all_threads.__code__


def _keeper(key, pipe, genuine, all_threads, template, builtins, records, changed):
    """The audit hook that arms and disarms the watch and writes the signed verdicts (see the module docstring).

    Everything it uses is bound here: no global name is looked up when it runs, and it never raises (a traceback
    would show its frame)."""
    import _hashlib
    import _thread
    import functools
    import os
    import sys

    _type, _str, _int, _bool, _tuple, _frozenset, _dict, _list, _len, _open, _BaseException = (
        builtins[n]
        for n in ("type", "str", "int", "bool", "tuple", "frozenset", "dict", "list", "len", "open", "BaseException")
    )
    hmac_digest, ident, getframe, audit, write, listdir, getpid, function = (
        _hashlib.hmac_digest,
        _thread.get_ident,
        sys._getframe,
        sys.audit,
        os.write,
        os.listdir,
        os.getpid,
        _type(template),
    )
    code, name, defaults = template.__code__, template.__name__, _dict(template.__kwdefaults__)
    report = functools.partial(audit, SEEN)
    arm, watch, seen_event, disarm = ARM, WATCH, SEEN, DISARM
    mine = (ARM, WATCH, SEEN, DISARM)
    tasks_changed = TASKS_CHANGED
    machinery_changed = MACHINERY_CHANGED
    folder_of, characters, digest = records
    state = {"released": set(), "armed": None}

    def strings(value):
        if _type(value) is not _tuple:
            return False
        for item in value:
            if _type(item) is not _str:
                return False
        return True

    def codes(value):
        if _type(value) is not _frozenset:
            return False
        for item in value:
            if _type(item) is not _tuple or _len(item) != 3 or _type(item[0]) is not _str:
                return False
            if _type(item[1]) is not _int or _type(item[2]) is not _str:
                return False
        return True

    def read(path):
        try:
            with _open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except _BaseException:
            return ""

    def others():
        """Processes of the kernel's own pid namespace, other than the kernel (pid 1 there), not zombies."""
        found = []
        for entry in listdir("/proc"):
            if entry.isdigit() and entry != "1":
                status = read("/proc/" + entry + "/stat").rpartition(")")[2].split()
                if status and status[0] != "Z":
                    found.append(entry)
        return found

    def turn_on(armed):
        hook = function(code, {"__builtins__": {}}, name, None, None)
        kwdefaults = _dict(defaults)
        kwdefaults.update(_codes=armed["codes"], _allowed=armed["allowed"], _report=report, _main=armed["main"])
        hook.__kwdefaults__ = kwdefaults
        all_threads(hook)

    def _keeper_hook(event, args):
        if event not in mine:
            return
        try:
            caller = getframe(0).f_back
            called = caller.f_code
            if event == seen_event:
                armed = state["armed"]
                if called is code and armed is not None and _len(args) == 2 and _type(args[0]) is _str:
                    armed["seen"].append((args[0], args[1] is True))
                return
            if genuine.get((called.co_filename, called.co_name)) != called.co_code:
                return
            own = getpid() == 1  # the kernel is pid 1 of a pid namespace of its own: its processes can be counted
            if event == arm:
                cell, exercise, allowed, box = args
                if not (_type(cell) is _str and _type(exercise) is _str and _type(box) is _list and strings(allowed)):
                    return
                if state["armed"] is not None:
                    all_threads(None)
                seed, problems = None, []
                if cell in state["released"]:
                    problems.append("this check's drawn cases were asked for before the check ran")
                else:
                    state["released"].add(cell)
                    seed = _int.from_bytes(hmac_digest(key, cell.encode("utf-8"), "sha256")[:4], "big") % 2**31
                if changed():
                    problems.append(machinery_changed)
                running = others() if own else []
                if running:
                    problems.append(
                        "a process your solution started was still running when the check began: a check's "
                        "answers must come from the function it calls"
                    )
                armed = {
                    "cell": cell,
                    "codes": _frozenset(),
                    "allowed": _tuple(allowed),
                    "seen": [],
                    "main": ident(),
                    "tasks": read("/proc/sys/kernel/ns_last_pid") if own else "",
                    "problems": problems,
                }
                state["armed"] = armed
                turn_on(armed)
                box.append((seed, _tuple(problems)))
            elif event == watch:
                new_codes, allowed = args
                armed = state["armed"]
                if armed is not None and codes(new_codes) and strings(allowed):
                    armed["codes"] = armed["codes"] | new_codes
                    armed["allowed"] = armed["allowed"] + allowed
                    turn_on(armed)
            elif event == disarm:
                (box,) = args
                armed = state["armed"]
                if armed is None or _type(box) is not _list:
                    return
                # The records are final now, while the watch is still on and still reports to this cell: what the
                # grader judges must be what the folder holds at this moment. Taken after the watch went off, a
                # signal handler run in between (a SIGALRM timer's, between two bytecodes here) could rewrite the
                # folder unseen and have its rewrite signed.
                name = "".join([c if c in characters else "_" for c in armed["cell"]])
                records_digest = "records=" + digest(folder_of + name)
                state["armed"] = None
                all_threads(None)
                problems = _list(armed["problems"])
                if own and read("/proc/sys/kernel/ns_last_pid") != armed["tasks"]:
                    problems.append(tasks_changed)
                seen = armed["seen"][:1]
                verdict = ("borrowed " + seen[0][0] + (" reference" if seen[0][1] else "")) if seen else "clean"
                text = " ".join(["cell", armed["cell"], records_digest, verdict, "|", " ".join(problems)])
                text = text.replace("\n", " ")
                line = hmac_digest(key, text.encode("utf-8"), "sha256").hex() + " " + text + "\n"
                write(pipe, line.encode("utf-8"))
                box.append((_tuple(seen), _tuple(problems)))
        except _BaseException:  # noqa: BLE001 - never raise: a traceback would show this frame, and its key
            return

    return _keeper_hook
