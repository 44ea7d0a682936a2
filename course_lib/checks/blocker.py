"""The grading kernel's blocker: what the student's code may not do while it is graded (see
:mod:`course_lib.checks.guard`, which adds it as an audit hook before any student code runs).

It refuses, when the student's code asks (the nearest code on the stack that is neither an installed package's
nor course_lib's is a notebook cell's): replacing or turning off the watch (``sys.setprofile``,
``sys.settrace``: only the guard and a new thread's start may), new audit hooks, making or relabelling code
(``code.__new__`` and ``code.replace``, ``marshal``, ``compile`` under a course_lib or installed file name, a
function made from another's code), ``ctypes``, the garbage collector's lists of objects, other threads' frames.
From anyone: changing the watch's defaults or code, a look at a frame of the keeper (a signal handler run inside
it would see its key), or a process's memory opened as a file (``/proc/self/mem``). The import system compiling
or loading an installed or course_lib module is let through, when its machinery is untouched.

Like the keeper, it looks up no global name when it runs; unlike the keeper, it raises (``PermissionError``), so
its closure holds nothing secret and nothing mutable: its frame may show in a student's traceback.
"""

from __future__ import annotations

STUDENT_ONLY = (
    "code.__new__",
    "marshal.loads",
    "marshal.load",
    "marshal.dumps",
    "function.__new__",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "sys._current_frames",
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


def make_blocker(course, library, keeper_code, setter_code, watch_code):
    """The audit hook that refuses what the student's code may not do while it is graded (module docstring).
    Its closure holds no secret and nothing mutable: its frame may show in a student's traceback."""
    import _thread
    import builtins
    import sys
    import threading
    import types
    from importlib import _bootstrap, _bootstrap_external

    _type, _vars, _getattr, _str, _bytes, PermissionError_, RuntimeError_ = (
        builtins.type,
        builtins.vars,
        builtins.getattr,
        builtins.str,
        builtins.bytes,
        builtins.PermissionError,
        builtins.RuntimeError,
    )
    getframe, ident, function = sys._getframe, _thread.get_ident, types.FunctionType
    main = ident()
    bootstrap_code = threading.Thread._bootstrap_inner.__code__
    library = tuple(p for p in library if p != "<frozen ")
    student_only = STUDENT_ONLY
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

    def student(frame):
        """Whether the nearest code on the stack that is neither an installed package's nor course_lib's is a
        notebook cell's (a dataclass's generated methods are looked through)."""
        while frame is not None:
            code = frame.f_code
            path = code.co_filename
            if path.startswith(course):
                return False
            if not (
                path.startswith(library)
                or path.startswith("<frozen ")
                or (path == "<string>" and code.co_qualname.startswith("__create_fn__."))
            ):
                return True
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
                raise PermissionError_(
                    f"course_lib.grade: your solution compiles code under the file name {filename!r}, "
                    "course_lib's or an installed package's: write your own code"
                )
            if _type(filename) is _str and filename.startswith("<frozen"):
                raise PermissionError_("course_lib.grade: your solution compiles code as Python's own")
            if _type(source) is _str and "__create_fn__" in source and not under(caller, dataclass_code):
                raise PermissionError_("course_lib.grade: your solution makes a dataclass's methods by hand")
            return
        if event in student_only:
            caller = getframe(0).f_back
            if (event == "marshal.loads" or event == "marshal.load") and importing(caller, "marshal"):
                return
            if student(caller):
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
