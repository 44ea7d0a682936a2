"""The grading kernel's blocker: what the student's code may not do while it is graded (see
:mod:`course_lib.checks.guard`, which adds it as an audit hook before any student code runs).

It refuses, when the student's code asks (the nearest code on the stack that is neither an installed package's
nor course_lib's is a notebook cell's; for ``BY_THE_STUDENT``, the very code that asks): replacing or turning off
the watch (``sys.setprofile``, ``sys.settrace``: only the guard and a new thread's start may), new audit hooks,
making or relabelling code (``code.__new__`` and ``code.replace``, ``marshal``, ``compile`` under a course_lib or
installed file name but of another text than that file's, a function made from another's code, course_lib's text
compiled at run time), ``ctypes``, the garbage collector's lists of objects, other threads' frames.
From anyone: changing the watch's defaults or code, a look at a frame of the keeper (a signal handler run inside
it would see its key), or a process's memory opened as a file (``/proc/self/mem``). The import system compiling
or loading an installed or course_lib module is let through, when its machinery is untouched.

Like the keeper, it looks up no global name when it runs; unlike the keeper, it raises (``PermissionError``), so
its closure holds nothing secret and nothing mutable: its frame may show in a student's traceback.
"""

from __future__ import annotations

SOURCE_LINES = ".source-lines"  # in the grading kernel's course_lib: the digests of course_lib's source lines
LONG = 30  # characters: a line this long (stripped) that a solution compiles from course_lib's text is copied


def line_digest(line: str) -> str:
    import hashlib

    return hashlib.blake2b(line.strip().encode("utf-8"), digest_size=8).hexdigest()


def source_lines(course) -> set[str]:
    """The digests of every line of course_lib's source at least ``LONG`` characters long (stripped)."""
    from pathlib import Path

    digests = set()
    for path in Path(course).rglob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if len(line.strip()) >= LONG:
                digests.add(line_digest(line))
    return digests


def known_lines(course) -> frozenset:
    """The digests the grader wrote into the source-free course_lib, else (not isolated) those of the source."""
    import os

    try:
        with open(os.path.join(course, SOURCE_LINES), encoding="ascii") as f:
            return frozenset(f.read().split())
    except OSError:
        return frozenset(source_lines(course))


# Refused when the code that does it is the student's own (a notebook cell's); a package doing it for itself (while
# the student imports it: transformers copies functions, a package loads a library) is let through.
BY_THE_STUDENT = (
    "code.__new__",
    "function.__new__",
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.dlsym/handle",
    "ctypes.cdata",
    "ctypes.cdata/buffer",
    "ctypes.addressof",
    "ctypes.string_at",
    "ctypes.wstring_at",
    "ctypes.PyObj_FromPtr",
)
# Refused whenever the student's code is the nearest on the stack that is not a package's or course_lib's: what no
# package needs while the student's code runs, and what a package could hand back to it (the guard's own objects).
FOR_THE_STUDENT = (
    "marshal.loads",
    "marshal.load",
    "marshal.dumps",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "sys._current_frames",
)


def make_blocker(course, library, keeper_code, setter_code, watch_code, lines=frozenset()):
    """The audit hook that refuses what the student's code may not do while it is graded (module docstring).
    Its closure holds no secret and nothing mutable: its frame may show in a student's traceback."""
    import _thread
    import builtins
    import sys
    import threading
    import types
    from importlib import _bootstrap, _bootstrap_external

    _type, _vars, _getattr, _str, _bytes, _open, PermissionError_, RuntimeError_, OSError_ = (
        builtins.type,
        builtins.vars,
        builtins.getattr,
        builtins.str,
        builtins.bytes,
        builtins.open,
        builtins.PermissionError,
        builtins.RuntimeError,
        builtins.OSError,
    )
    getframe, ident, function = sys._getframe, _thread.get_ident, types.FunctionType
    import hashlib

    blake2b, long_line = hashlib.blake2b, LONG
    main = ident()
    bootstrap_code = threading.Thread._bootstrap_inner.__code__
    library = tuple(p for p in library if p != "<frozen ")
    by_the_student, for_the_student = BY_THE_STUDENT, FOR_THE_STUDENT
    memory_files = ("mem", "pagemap")  # /proc/<pid>/mem: another way to write the interpreter's memory
    sealed = ("__defaults__", "__kwdefaults__", "__code__")
    frames = ("tb_frame", "gi_frame", "cr_frame", "ag_frame")
    removed = _bootstrap._call_with_frames_removed.__code__
    compile_code = _bootstrap_external.SourceLoader.source_to_code.__code__
    marshal_code = _bootstrap_external._compile_bytecode.__code__
    get_codes = (
        _bootstrap_external.SourceLoader.get_code.__code__,
        _bootstrap_external.SourcelessFileLoader.get_code.__code__,
    )
    loaders = (_bootstrap_external.SourceFileLoader, _bootstrap_external.SourcelessFileLoader)
    snapshot = tuple(
        (owner, tuple(_vars(owner).items()))
        for owner in (
            _bootstrap_external,
            _bootstrap_external.FileLoader,
            _bootstrap_external.SourceLoader,
            _bootstrap_external.SourceFileLoader,
            _bootstrap_external.SourcelessFileLoader,
        )
    )
    me = None

    def student(frame, immediate=False):
        """Whether the nearest code on the stack that is neither an installed package's nor course_lib's is a
        notebook cell's (a dataclass's generated methods are looked through); with ``immediate``, whether the
        code of ``frame`` itself is, course_lib's frames looked through.

        course_lib's frames are looked through, never taken as the answer: course_lib's own code does none of what
        this blocker refuses while a kernel is graded (but the keeper, which makes the watch's function), so a
        course_lib frame that does is calling back a callable it was handed (``recording.replayable(gc.get_objects)``
        under ``watch.trusting()``), and whoever handed it decides."""
        while frame is not None:
            code = frame.f_code
            path = code.co_filename
            if code is keeper_code:
                return False  # the keeper making the watch's function (``function.__new__``) for the check
            if path.startswith(course):
                frame = frame.f_back
                continue
            if not (
                path.startswith(library)
                or path.startswith("<frozen ")
                or (path == "<string>" and code.co_qualname.startswith("__create_fn__."))
            ):
                return True
            if immediate:
                return False
            frame = frame.f_back
        return False

    def under(frame, code):
        while frame is not None:
            if frame.f_code is code:
                return True
            frame = frame.f_back
        return False

    def importing(frame, kind):
        """The import system compiling or loading a course_lib or installed module, with its machinery untouched."""
        if kind == "compile":
            if frame.f_code is removed:
                frame = frame.f_back
            if frame is None or frame.f_code is not compile_code:
                return False
        elif frame.f_code is not marshal_code:
            return False
        get_code = frame.f_back
        if get_code is None or get_code.f_code not in get_codes:
            return False
        local = get_code.f_locals
        if _type(local.get("self")) not in loaders:
            return False
        for key in ("source_path", "bytecode_path", "path"):
            path = local.get(key)
            if path is not None and not (_type(path) is _str and (path.startswith(course) or path.startswith(library))):
                return False
        for owner, items in snapshot:
            now = _vars(owner)
            for name, value in items:
                if now.get(name) is not value:
                    return False
        return True

    def own_text(filename, source):
        """Whether ``source`` is the very text of the file ``filename`` (so the code compiled is that file's)."""
        if _type(source) is not _str and _type(source) is not _bytes:
            return False
        try:
            with _open(filename, "rb") as f:
                text = f.read()
        except OSError_:
            return False
        return text == (source.encode("utf-8") if _type(source) is _str else source)

    def _blocker_hook(event, args):
        if event == "sys._getframe":
            frame = args[0]
            if frame.f_code is me or frame.f_code is keeper_code or ident() != main:
                return
            if under(frame, keeper_code):  # a signal handler run inside the keeper, looking at it
                raise PermissionError_("course_lib.grade: the grader's keeper is not to be looked at")
            return
        if event == "object.__getattr__" or event == "object.__setattr__" or event == "object.__delattr__":
            target, name = args[0], args[1]
            if name in sealed:
                if event != "object.__getattr__" and _type(target) is function and target.__code__ is watch_code:
                    if not under(getframe(0).f_back, keeper_code):
                        raise PermissionError_("course_lib.grade: the grader's watch is not to be changed")
            elif name in frames and ident() == main:
                if under(getframe(0).f_back, me):
                    return  # this blocker, looking
                frame = _getattr(target, name)
                if frame is not None and under(frame, keeper_code):
                    raise PermissionError_("course_lib.grade: the grader's keeper is not to be looked at")
            return
        if event == "sys.addaudithook":
            raise RuntimeError_("course_lib.grade: no audit hook of the student's while grading")
        if event == "sys.setprofile" or event == "sys.settrace":
            caller = getframe(0).f_back.f_code
            if caller is setter_code or caller is bootstrap_code:
                return
            raise PermissionError_("course_lib.grade: your solution may not turn off or replace the grader's watch")
        if event == "compile":
            caller = getframe(0).f_back
            if importing(caller, "compile") or not student(caller):
                return
            source, filename = args[0], args[1]
            if _type(filename) is _bytes:
                filename = filename.decode("utf-8", "replace")
            if _type(filename) is _str and (filename.startswith(course) or filename.startswith(library)):
                if own_text(filename, source):
                    return  # a package reading its own file (anyio parses its own __init__): its code, its name
                raise PermissionError_(
                    f"course_lib.grade: your solution compiles code under the file name {filename!r}, "
                    "course_lib's or an installed package's: write your own code"
                )
            if _type(filename) is _str and filename.startswith("<frozen"):
                raise PermissionError_("course_lib.grade: your solution compiles code as Python's own")
            if _type(source) is _str and "__create_fn__" in source:
                if under(caller, dataclass_code):
                    return  # a dataclass's methods, made by dataclasses
                raise PermissionError_("course_lib.grade: your solution makes a dataclass's methods by hand")
            if _type(source) is _bytes:
                source = source.decode("utf-8", "replace")
            if _type(source) is _str and lines:
                copied = 0
                for line in source.splitlines():
                    line = line.strip()
                    if len(line) >= long_line and blake2b(line.encode("utf-8"), digest_size=8).hexdigest() in lines:
                        copied += 1
                        if copied >= 3:
                            raise PermissionError_(
                                "course_lib.grade: your solution compiles course_lib's own code (its text, "
                                "copied while it runs): write your own code"
                            )
            return
        if event in by_the_student or event in for_the_student:
            caller = getframe(0).f_back
            if (event == "marshal.loads" or event == "marshal.load") and importing(caller, "marshal"):
                return
            if student(caller) if event in for_the_student else student(caller, immediate=True):
                raise PermissionError_(f"course_lib.grade: your solution may not use {event} while it is graded")
            return
        if event == "open":
            path = args[0]
            if _type(path) is _bytes:
                path = path.decode("utf-8", "replace")
            if _type(path) is _str and path.rstrip("/").rpartition("/")[2] in memory_files:
                raise PermissionError_("course_lib.grade: no process's memory may be opened as a file while grading")

    import dataclasses

    dataclass_code = dataclasses._process_class.__code__
    me = _blocker_hook.__code__
    return _blocker_hook
