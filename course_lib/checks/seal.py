"""What the grader's guard seals when a check's watch ends, and what it holds still while a check runs.

- **The records** (:func:`make_digest`): a digest of a check cell's records folder, which the keeper
  (:mod:`course_lib.checks.guard`) signs in the cell's verdict when the watch ends, and which the grader compares
  with its own copy before it judges: what any code does to the records after that moment is refused.
- **The import machinery and IPython's transformers** (:func:`canonical`): what decides which code a check cell's
  imports and lines run, kept at the grader's first cell; the keeper refuses to arm a check when they differ.

Both are bound when made, like the keeper: they look up no global name when they run.
"""

from __future__ import annotations

RECORDS = "records"  # the folder of the kernel's scratch folder where check cells record, one folder per cell
MAX_RECORD = 64 << 20  # bytes of one record file: a larger one is not taken (nbval_report), nor read here
NAME_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def record_name(cell: str) -> str:
    """The name of the folder where the check cell ``cell`` records (letters, digits, ``_`` and ``-``)."""
    return "".join(c if c in NAME_CHARACTERS else "_" for c in cell)


def make_digest(builtins=None):
    """``digest(folder)``: one sha256 of what a check cell's records folder holds, the same in the kernel (the
    keeper signs it when the check's watch ends) and in the grader (over its own copy, before judging): every
    entry's name and, for a regular file, its content; anything else (a link, a folder, a file over
    ``MAX_RECORD``) counts as ``-``, which the grader's copy never holds. Everything it uses is bound here (the
    keeper looks up no global name): ``builtins`` is the builtins dictionary to take them from."""
    import _hashlib
    import os
    import stat

    if builtins is None:
        import builtins as module

        builtins = vars(module)
    _sorted, _OSError = builtins["sorted"], builtins["OSError"]
    sha256, fstat, is_file, listdir, open_, read, close = (
        _hashlib.openssl_sha256,
        os.fstat,
        stat.S_ISREG,
        os.listdir,
        os.open,
        os.read,
        os.close,
    )
    folder_flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    file_flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    largest = MAX_RECORD

    def file_digest(name, folder):
        try:
            fd = open_(name, file_flags, dir_fd=folder)
        except _OSError:
            return b"-"
        try:
            info = fstat(fd)
            if not is_file(info.st_mode) or info.st_size > largest:
                return b"-"
            one = sha256()
            chunk = read(fd, 1 << 20)
            while chunk:
                one.update(chunk)
                chunk = read(fd, 1 << 20)
            return one.hexdigest().encode("ascii")
        finally:
            close(fd)

    def digest(path):
        try:
            folder = open_(path, folder_flags)
        except _OSError:
            return "none"
        try:
            total = sha256()
            for name in _sorted(listdir(folder)):
                total.update(name.encode("utf-8", "surrogateescape") + b"\0" + file_digest(name, folder) + b"\n")
            return total.hexdigest()
        finally:
            close(folder)

    return digest


def parse_verdict(text: str) -> tuple[str, str, str]:
    """(records digest, what the watch saw, problems) of a verdict the keeper signed, without "cell <id> "."""
    digest, _, rest = text.partition(" ")
    seen, _, problems = rest.partition(" | ")
    return digest.removeprefix("records="), seen, problems.strip()


def canonical(builtins):
    """``changed()``: whether what decides which code a check cell's lines import and run differs from now: Python's
    import machinery (``sys.meta_path``, ``sys.path_hooks``, ``sys.path``, the finders cached for each folder,
    ``builtins.__import__``, importlib's own functions) and IPython's input and AST transformers. Each check cell
    puts them back first (``rebuild.PROLOGUE``); the keeper refuses to arm a check where that did not happen (the
    student's code replaced the restore). IPython's event hooks are put back too, but they run only after a check's
    watch has ended, when its records are final. Bound here, like the keeper: no global name is looked up when it
    runs, and objects are compared by identity."""
    import sys

    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        shell = None
    _id, _tuple, _getattr, _list, _type, _str, _len = (
        builtins[n] for n in ("id", "tuple", "getattr", "list", "type", "str", "len")
    )
    module = sys.modules["builtins"]
    owners = [(sys, "meta_path"), (sys, "path_hooks"), (sys, "path")]
    if shell is not None:
        manager = shell.input_transformer_manager
        owners += [
            (shell, "input_transformers_cleanup"),
            (shell, "input_transformers_post"),
            (shell, "ast_transformers"),
            (manager, "cleanup_transforms"),
            (manager, "line_transforms"),
            (manager, "token_transformers"),
        ]
    owners = _tuple(owners)
    from importlib import _bootstrap, _bootstrap_external

    # What the interpreter's import calls in importlib (``_find_and_load`` & co.), and the finders it caches.
    functions = _tuple(
        (vars(m), name) for m in (_bootstrap, _bootstrap_external) for name, value in vars(m).items() if callable(value)
    )
    import zipimport

    finder = _bootstrap_external.FileFinder
    finders = frozenset({_id(finder), _id(type(None)), _id(zipimport.zipimporter)})
    loaders = frozenset(
        _id(c)
        for c in (
            _bootstrap_external.SourceFileLoader,
            _bootstrap_external.SourcelessFileLoader,
            _bootstrap_external.ExtensionFileLoader,
        )
    )
    caches = sys.path_importer_cache
    caches_id = _id(caches)
    classes = frozenset(_id(v) for v in caches.values() if _type(v) is type)  # an editable install's own finder

    def cached_finders_changed():
        if _id(_getattr(sys, "path_importer_cache")) != caches_id:
            return True
        for path, value in _list(caches.items()):
            kind = _type(value)
            if _id(kind) not in finders and not (kind is _type and _id(value) in classes):
                return True
            if kind is finder:
                if _type(value.path) is not _str or _type(path) is not _str or value.path != path:
                    return True
                if _type(value._loaders) is not _list:
                    return True
                for pair in value._loaders:
                    if _type(pair) is not _tuple or _id(pair[-1]) not in loaders:  # (suffix, loader)
                        return True
        return False

    # Python's import lists are compared up to their length at install: a finder, a hook or a folder added after
    # the canonical ones is asked only for what they do not find (the course's modules are found first), and a
    # package may add one as it is imported (transformers adds a finder for its old module names).
    prefixes = {"meta_path": 0, "path_hooks": 0, "path": 0}

    def now():
        found = [_id(_getattr(module, "__import__")), _id(_getattr(module, "__build_class__"))]
        for namespace, name in functions:
            found.append(_id(namespace.get(name)))
        for owner, name in owners:
            items = _getattr(owner, name)
            found.append((_id(owner), name, _id(items)))
            if _type(items) is _list:  # a list of the student's own type is not iterated (its code would run here)
                kept = prefixes.get(name) if owner is sys else None
                found.append(_len(items) >= kept if kept is not None else _len(items))
                for item in items if kept is None else items[:kept]:
                    found.append(_id(item))
        return _tuple(found)

    for name in prefixes:
        prefixes[name] = _len(_getattr(sys, name))
    expected = now()

    def changed():
        return now() != expected or cached_finders_changed()

    return changed
