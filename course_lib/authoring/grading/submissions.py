"""The students' side of grading: which files, whose they are, which notebook, which cells.

A submission is read as plain JSON, not through nbformat's validator: nbformat
repairs duplicated cell ids and rejects odd cells, and the grader must see exactly
what the student sent to report it. Nothing here trusts the student's metadata for
grading; it is used only to *find* the solution cells and to name the notebook.

Student names (documented in ``docs/grading.md``):

1. a file inside a folder given on the command line, in a sub-folder of it, belongs to
   that sub-folder: ``submissions/alice/00_warmup.ipynb`` -> ``alice``;
2. otherwise, the file name before the notebook's name: ``alice_00_warmup.ipynb`` ->
   ``alice`` (``alice-00_warmup (1).ipynb`` too);
3. otherwise (the file is just ``00_warmup.ipynb``), the folder it is in.

Which notebook a submission is: the one its metadata names (``course.generated_from``,
written by the build, else ``course.chapter`` when one notebook has that chapter), and
the one its file name names (or ``--notebook``). When both are known and differ, the
student sent a notebook of another chapter under this one's name: every exercise of
the expected notebook is reported "wrong notebook".
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

SEPARATORS = "_- ."


@dataclass
class StudentCell:
    """One cell as the student sent it."""

    index: int  # position among all the submission's cells
    cell_type: str
    source: str
    cell_id: str | None
    tags: list[str]
    exercise: str | None  # the student's metadata.course.exercise: a hint for matching, never trusted


@dataclass
class Submission:
    path: Path
    student: str
    cells: list[StudentCell] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    problem: str | None = None  # why the file cannot be read as a notebook

    @property
    def code_cells(self) -> list[StudentCell]:
        return [c for c in self.cells if c.cell_type == "code"]


def find_submissions(arguments: list[Path]) -> tuple[list[tuple[Path, Path | None]], list[Path]]:
    """(file, the folder argument it was found in, or None) for every notebook; and arguments that do not exist.

    Symbolic links are never followed: a link (to a file or to a folder) found inside a
    folder, or given as a file, is returned as it is, and graded ``symlink`` (a student's
    link to ``solutions/00_warmup.ipynb`` is not the student's work). A folder named on
    the command line is the instructor's choice and is read even if it is a link.
    """
    found, missing = [], []
    for argument in arguments:
        if argument.is_dir() and not (argument.is_symlink() and argument.suffix == ".ipynb"):
            for folder, subfolders, files in os.walk(argument, followlinks=False):
                subfolders[:] = sorted(d for d in subfolders if d != ".ipynb_checkpoints")
                here = Path(folder)
                for name in list(subfolders):
                    if (here / name).is_symlink():
                        subfolders.remove(name)
                        found.append((here / name, argument))  # graded "symlink"
                for name in sorted(files):  # whatever it is (a FIFO, a broken link): it gets a row
                    if name.endswith(".ipynb") or (here / name).is_symlink() and here == Path(argument):
                        found.append((here / name, argument))
        elif argument.exists() or argument.is_symlink():
            found.append((argument, None))
        else:
            missing.append(argument)
    return found, missing


def name_in_file(path: Path, names) -> str | None:
    """The longest known notebook name inside the file name (``alice_00_warmup (1)`` -> ``00_warmup``)."""
    hits = [name for name in names if name in path.stem]
    return max(hits, key=len) if hits else None


def student_name(path: Path, base: Path | None, names) -> str:
    """Whose submission ``path`` is (rules in the module docstring)."""
    if base is not None:
        relative = path.relative_to(base)
        if len(relative.parts) > 1:
            return relative.parts[0]
    notebook = name_in_file(path, names)
    if notebook is None:
        match = re.search(r"\d\d_", path.stem)
        notebook = path.stem[match.start() :] if match else None
    if notebook is not None:
        before = path.stem[: path.stem.find(notebook)].strip(SEPARATORS)
        if before:
            return before
        return path.resolve().parent.name
    return path.stem


def read_submission(path: Path, base: Path | None, names) -> Submission:
    """Read one file; a file that is not a notebook comes back with ``problem`` set, never an exception."""
    submission = Submission(path, student_name(path, base, names))
    try:
        data = json.loads(read_no_follow(path))
    except json.JSONDecodeError as error:
        submission.problem = f"not valid JSON ({error.msg} at line {error.lineno}, column {error.colno})"
        return submission
    except (OSError, UnicodeDecodeError) as error:
        submission.problem = f"cannot be read ({type(error).__name__}: {error})"
        return submission
    if isinstance(data, dict) and data.get("nbformat") == 3 and "worksheets" in data:
        data = _upgrade_v3(data)
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        submission.problem = "not a Jupyter notebook (no list of cells)"
        return submission
    submission.metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    for index, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict):
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(str(part) for part in source)
        metadata = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
        tags = metadata.get("tags") if isinstance(metadata.get("tags"), list) else []
        course = metadata.get("course") if isinstance(metadata.get("course"), dict) else {}
        cell_id = cell.get("id") if isinstance(cell.get("id"), str) else None
        submission.cells.append(
            StudentCell(
                index,
                str(cell.get("cell_type", "")),
                str(source),
                cell_id,
                [str(t) for t in tags],
                course.get("exercise"),
            )
        )
    return submission


# A JSON string, or one structural character: enough to find where a cell's outputs end, in C (re).
_TOKENS = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[\[\]{}]')  # possessive: no backtracking memory
_DROPPED = (b'"outputs"', b'"attachments"')  # of a cell: what grading never reads, often most of the file


def read_no_follow(path: Path, limit: int = 50 << 20) -> bytes:
    """The JSON text of a notebook file without its cells' outputs and attachments.

    A regular file only: a symbolic link is refused (``O_NOFOLLOW``), and so are a FIFO or a
    device (they would block or never end). The file is mapped, not read: a notebook with a
    large saved output costs no memory for it. What is left must be under ``limit`` bytes.
    """
    import mmap

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        if not _regular(f):
            raise OSError("not a regular file")
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            kept, start, size = [], 0, 0
            tokens = _TOKENS.finditer(data)
            stack = []
            for token in tokens:
                text = data[token.start() : min(token.end(), token.start() + 16)]  # never copy a long string
                if text in (b"[", b"{"):
                    stack.append(text)
                elif text in (b"]", b"}"):
                    if stack:
                        stack.pop()
                elif (
                    text in _DROPPED
                    and stack[-2:] == [b"[", b"{"]
                    and data[token.end() : token.end() + 64].lstrip(b" \t\r\n").startswith(b":")
                ):
                    value = next(tokens, None)  # the value's opening bracket (or a string: kept)
                    if value is None or data[value.start()] not in b"[{":
                        continue
                    depth = 1
                    for inner in tokens:
                        depth += data[inner.start()] in b"[{"
                        depth -= data[inner.start()] in b"]}"
                        if depth == 0:
                            break
                    kept.append(data[start : value.start()] + (b"[]" if data[value.start()] == ord("[") else b"{}"))
                    size += len(kept[-1])
                    start = inner.end() if depth == 0 else len(data)
                    if size > limit:
                        break
            kept.append(data[start : start + limit + 1 - size])
    text = b"".join(kept)
    if len(text) > limit:
        raise OSError(f"larger than {limit >> 20} MB without its outputs")
    return text


def _regular(f) -> bool:
    import stat

    return stat.S_ISREG(os.fstat(f.fileno()).st_mode)


def is_symlink(path: Path, base: Path | None) -> bool:
    """Whether ``path``, or a folder between it and the folder argument it was found in, is a symbolic link."""
    if path.is_symlink():
        return True
    if base is None:
        return False
    for parent in path.parents:
        if parent == base or len(parent.parts) <= len(base.parts):
            return False
        if parent.is_symlink():
            return True
    return False


def _upgrade_v3(data: dict) -> dict:
    """An old (v3) notebook, converted by nbformat; its cells have no ids, so matching falls back to position."""
    import nbformat

    try:
        return json.loads(nbformat.writes(nbformat.reads(json.dumps(data), as_version=4)))
    except Exception:  # noqa: BLE001 - an unconvertible notebook is reported as not a notebook
        return {}


def notebook_from_metadata(submission: Submission, canonical) -> str | None:
    """The canonical notebook the submission's own metadata names, if any."""
    course = submission.metadata.get("course")
    if not isinstance(course, dict):
        return None
    source = course.get("generated_from")
    if isinstance(source, str) and Path(source).stem in canonical:
        return Path(source).stem
    chapter = course.get("chapter")
    same_chapter = [name for name, c in canonical.items() if c.chapter == chapter]
    return same_chapter[0] if len(same_chapter) == 1 else None


def identify(submission: Submission, canonical, expected: str | None = None) -> tuple[str | None, str | None]:
    """(the notebook the submission should be, the notebook it holds); either may be None when unknown."""
    expected = expected or name_in_file(submission.path, canonical)
    return expected, notebook_from_metadata(submission, canonical)
