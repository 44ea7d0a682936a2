"""Rebuild a gradable notebook: the canonical notebook with the student's solution cells in it.

Only the student's *solution cells* are taken; every other cell (given code, checks,
their order, their metadata, the points) is the instructor's. A student who deletes,
edits or weakens a check cell, or edits cell metadata, changes nothing that runs.

Finding each solution cell, most trusted first:

1. **by cell id**: the student's code cell with the canonical solution cell's id (cell ids
   survive editing, moving and reordering). If the id appears several times, the last
   such cell wins (it is the definition a top-to-bottom run would keep), and a note says so;
2. **by metadata**: a code cell tagged ``solution`` whose ``course.exercise`` names the
   exercise (cells copied into another notebook keep metadata but get new ids);
3. **by position**: the code cell at the same position among code cells, when it still
   looks like this solution (it defines the same function, or resembles the stub);
4. **by content**: any remaining code cell that defines the function of the stub.

A solution cell found nowhere is "not attempted"; the canonical stub runs in its place,
so later cells fail exactly as for a student who never touched it.

Check cells are guarded (:func:`guard_check`). A first cell, added before any student
code, remembers the attributes of ``torch``, ``torch.nn.functional``, ``torch.linalg``,
``torch.Tensor`` and the builtins. Before the canonical check code, each check cell puts
back whatever a solution cell replaced there, forgets every cached ``course_lib`` module
and runs the notebook's ``course_lib`` imports again: a solution cell that monkeypatched
the check module, the check machinery, ``torch.allclose`` or a check's name is undone.
(So a check gets fresh ``course_lib`` classes: check functions build their own inputs
rather than take objects made by earlier cells.) After the check code, a line prints a
random token chosen for this grading run; a check counts as passed only when its token
is printed, so a solution cell that hides errors (patching IPython's traceback display,
which nbval would take for a pass) cannot make a failing check pass. What this does not
cover is listed under "Limits" in ``docs/grading.md``.
"""

from __future__ import annotations

import copy
import difflib
import re
from dataclasses import dataclass, field

import nbformat

from course_lib.authoring.build import strip_solutions
from course_lib.authoring.grading.canonical import Canonical, cell_role
from course_lib.authoring.grading.submissions import StudentCell, Submission
from course_lib.checks import seal

GUARD = """\
# --- added by course_lib.grade: use the check on disk, whatever a solution cell patched ---
_grading_restore()  # undo what a solution cell replaced in torch or the builtins
import sys as _grading_sys
for _grading_name in [_n for _n in list(_grading_sys.modules) if _n.split(".")[0] == "course_lib"]:
    del _grading_sys.modules[_grading_name]
{imports}
{record}# --- the instructor's check cell ---
"""
RECORD = """\
import course_lib.checks.recording as _grading_recording  # record, then the grader judges (course_lib.checks)
_grading_recording.start({folder!r}, exercise={exercise!r}, allowed={allowed!r}, names={names!r}, cell={cell!r})
"""
GUARDED = """\
# --- added by course_lib.grade: the grader's guard, before any student code (course_lib.checks.guard) ---
import course_lib.checks.guard
course_lib.checks.guard.install()
"""
PROLOGUE = """\
# --- added by course_lib.grade: remember torch, the builtins, the import machinery and IPython's cell handling ---
def _grading_snapshot():
    import builtins
    import sys
    import types
    from importlib import _bootstrap, _bootstrap_external
    shell = get_ipython()
    manager = shell.input_transformer_manager
    lists = [(sys, name, getattr(sys, name)) for name in ("meta_path", "path_hooks", "path")]
    lists += [(shell, name, getattr(shell, name))
              for name in ("input_transformers_cleanup", "input_transformers_post", "ast_transformers")]
    lists += [(manager, name, getattr(manager, name))
              for name in ("cleanup_transforms", "line_transforms", "token_transformers")]
    lists = [(owner, name, items, list(items)) for owner, name, items in lists]
    events = {event: (callbacks, list(callbacks)) for event, callbacks in shell.events.callbacks.items()}
    library = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix})
    owners = [builtins, _bootstrap, _bootstrap_external]
    if {uses_torch}:
        import torch
        import torch.nn.functional
        owners += [torch, torch.nn.functional, torch.linalg, torch.Tensor]
    saved = [(owner, dict(vars(owner))) for owner in owners]
    every_name = (builtins, _bootstrap, _bootstrap_external)  # underscore names too: __import__, _find_and_load

    def library_function(callback):  # an event hook an installed package added (matplotlib's figure display)
        code = getattr(callback, "__code__", None)
        return type(callback) is types.FunctionType and code is not None and code.co_filename.startswith(library)

    def restore():
        for owner, attributes in saved:
            is_class = isinstance(owner, type)
            added = [n for n in vars(owner) if is_class and n not in attributes]  # e.g. torch.Tensor.allclose
            changed = [n for n, v in attributes.items()
                       if (is_class or owner in every_name or not n.startswith("_")) and n != "_"
                       and vars(owner).get(n) is not v]
            for name in added + changed:
                try:
                    if name in added:
                        delattr(owner, name)
                    else:
                        setattr(owner, name, attributes[name])
                except (AttributeError, TypeError):
                    pass
        for owner, name, items, contents in lists:
            if getattr(owner, name) is not items:
                setattr(owner, name, items)
            items[:] = contents
        sys.path_importer_cache.clear()  # finders a path hook of the student's made; the canonical hooks remake them
        for event, (callbacks, contents) in events.items():
            if shell.events.callbacks.get(event) is not callbacks:
                shell.events.callbacks[event] = callbacks
            callbacks[:] = contents + [c for c in callbacks if c not in contents and library_function(c)]
        for event in [e for e in shell.events.callbacks if e not in events]:
            del shell.events.callbacks[event]
    return restore


_grading_restore = _grading_snapshot()
del _grading_snapshot


import course_lib.checks.guard as _grading_guard  # a 200 MB exception message is cut before the kernel formats it
_grading_guard.cut_long_errors(get_ipython())
del _grading_guard
"""
TOKEN_LINE = 'print("grading: check completed {token}")'
SKIPPED = "# course_lib.grade: this cell was not run ({why})"
MARKERS = re.compile(r"^[ \t]*#[ \t]*NBVAL_\w+[ \t]*$", re.MULTILINE)  # [ \t], not \s: linear time


@dataclass
class Match:
    """The student's source for each canonical solution cell, and what was odd about finding it."""

    sources: dict[str, str] = field(default_factory=dict)  # canonical cell id -> student source
    missing: set[str] = field(default_factory=set)  # exercise ids with a solution cell found nowhere
    notes: list[str] = field(default_factory=list)


@dataclass
class GradedCell:
    """What a code cell of the rebuilt notebook is, by its position among code cells."""

    cell_id: str
    role: str  # "prologue", "given", "solution", "check", "hidden" or "skipped"
    exercise: str | None


def _def_line(stub: str) -> str | None:
    """``def name(`` of the function a stub defines, if it defines one."""
    found = re.search(r"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(", stub, re.MULTILINE)
    return found.group(1) if found else None


def _looks_like(cell: StudentCell, stub: str) -> bool:
    name = _def_line(stub)
    if name is not None:
        return re.search(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{name}[ \t]*\(", cell.source, re.MULTILINE) is not None
    if len(cell.source) > 3 * len(stub):  # cannot be 60% alike; and SequenceMatcher is slow on a huge cell
        return False
    return difflib.SequenceMatcher(None, stub, cell.source).ratio() >= 0.6


def match_solutions(canonical: Canonical, submission: Submission) -> Match:
    """Find the student's cell for every canonical solution cell (order of trust in the module docstring)."""
    match = Match()
    code = submission.code_cells
    by_id: dict[str, list[StudentCell]] = {}
    for cell in submission.cells:
        if cell.cell_id:
            by_id.setdefault(cell.cell_id, []).append(cell)
    canonical_code = [c for c in canonical.nb.cells if c.cell_type == "code"]
    wanted = [(n, c) for n, c in enumerate(canonical_code) if cell_role(c)[0] == "solution"]
    for cell_id, cells in by_id.items():
        if len(cells) > 1 and cell_id not in {c.id for _, c in wanted}:
            match.notes.append(f"cell id {cell_id!r} appears {len(cells)} times (not a solution cell: no effect)")
    claimed: dict[str, StudentCell] = {}

    def taken(cell: StudentCell) -> bool:
        return any(cell is other for other in claimed.values())

    def claim(cell, student: StudentCell, how: str | None = None) -> None:
        claimed[cell.id] = student
        # The student's NBVAL_SKIP & co. do nothing; trailing blank lines neither (IPython is slow on a million).
        match.sources[cell.id] = MARKERS.sub("", student.source).rstrip()
        if how:
            match.notes.append(f"{cell_role(cell)[1]}: solution cell found {how} (its cell id changed)")

    for _, cell in wanted:
        candidates = [c for c in by_id.get(cell.id, []) if c.cell_type == "code"]
        if candidates:
            claim(cell, candidates[-1])
            if len(candidates) > 1:
                match.notes.append(
                    f"{cell_role(cell)[1]}: cell id {cell.id!r} appears {len(candidates)} times; "
                    "the last such cell was graded"
                )
    for _, cell in wanted:
        tagged = [c for c in code if not taken(c) and "solution" in c.tags and c.exercise == cell_role(cell)[1]]
        if cell.id not in claimed and tagged:
            claim(cell, tagged[0], "by its metadata")
    for position, cell in wanted:
        stub = strip_solutions(cell.source, cell_role(cell)[1])
        there = code[position] if position < len(code) else None
        if cell.id not in claimed and there is not None and not taken(there) and _looks_like(there, stub):
            claim(cell, there, "by position")
    for _, cell in wanted:
        stub = strip_solutions(cell.source, cell_role(cell)[1])
        lookalikes = [c for c in code if not taken(c) and _looks_like(c, stub)] if _def_line(stub) else []
        if cell.id not in claimed and lookalikes:
            claim(cell, lookalikes[-1], "by its content")
    match.missing = {cell_role(cell)[1] for _, cell in wanted if cell.id not in claimed}
    order = [claimed[c.id].index for _, c in wanted if c.id in claimed]
    if order != sorted(order):
        match.notes.append("solution cells were reordered; graded in the notebook's order")
    known = {c.id for c in canonical_code}
    given = {c.source.strip() for c in canonical_code}
    given |= {strip_solutions(c.source, cell_role(c)[1]).strip() for c in canonical_code}
    extra = [c for c in code if not taken(c) and c.cell_id not in known and c.source.strip() not in given | {""}]
    if extra:
        match.notes.append(
            f"{len(extra)} code cell(s) of the student's own were not run (only solution cells are graded)"
        )
    for _, cell in wanted:
        reference = _uses_reference(match.sources.get(cell.id, ""), canonical, cell_role(cell)[1])
        if reference:
            match.notes.append(
                f"{cell_role(cell)[1]}: the solution seems to call course_lib's own {reference} "
                "(the reference): look at it by hand"
            )
    return match


def _uses_reference(source: str, canonical: Canonical, exercise: str) -> str | None:
    """The reference's name when a solution mentions it through course_lib (a hint for the instructor, not a grade).

    The reference of ``check_<name>`` is ``<name>`` in the same module; a solution that
    imports it from course_lib, or reaches it as an attribute (``warmup.<name>``), is
    probably calling it instead of implementing it.
    """
    for check_id in canonical.exercises[exercise].check_cells:
        check_source = next(c.source for c in canonical.nb.cells if c.get("id") == check_id)
        for name in re.findall(r"\bcheck_(\w+)\s*\(", check_source):
            imported = re.search(
                rf"^[ \t]*from[ \t]+course_lib[\w.]*[ \t]+import[ \t]+[^#\n]*\b{name}\b", source, re.MULTILINE
            )
            if imported or re.search(rf"\.\s*{name}\b", source):
                return name
    return None


def guard_check(source: str, imports: str, token: str, record: tuple | None = None) -> str:
    """A check (or hidden check) cell as it runs at grading time: fresh course_lib, then a completion token.

    ``record``: (folder, cell id, exercise) for a check cell whose checks record the student's results
    there for the grader to judge (and watch for borrowed course_lib code).
    """
    body = MARKERS.sub("", source).rstrip()  # output is never compared for checks: a warning cannot cost points
    record_code = ""
    if record:
        folder, cell, exercise = record
        record_code = RECORD.format(
            folder=folder,
            exercise=exercise.id,
            allowed=tuple(exercise.allowed),
            names=tuple(exercise.names),
            cell=cell,
        )
    finish = "_grading_recording.finish()  # fails if the reference ran since\n" if record else ""
    return (
        GUARD.format(imports=imports, record=record_code) + body + "\n" + finish + TOKEN_LINE.format(token=token) + "\n"
    )


def record_folder(scratch, cell_id: str) -> str:
    """Where the check cell ``cell_id`` records the student's results, in the kernel's scratch folder (the folder
    the grader's guard signs a digest of when the check's watch ends)."""
    return str(scratch / seal.RECORDS / seal.record_name(cell_id))


def rebuild(
    canonical: Canonical,
    match: Match,
    token: str,
    *,
    stubbed=frozenset(),
    skipped=frozenset(),
    scratch=None,
):
    """The gradable notebook, and a :class:`GradedCell` per code cell.

    Args:
        stubbed: exercises whose solution runs as the canonical stub and whose checks are
            skipped (an earlier run of them hung the kernel: they are graded "timeout").
        skipped: ids of given cells not to run (an earlier run of them hung the kernel).
        scratch: the kernel's folder, where check cells record (None: a notebook to rerun by hand, which
            judges in its kernel, without the grader's guard).
    """
    nb = copy.deepcopy(canonical.nb)
    cells, graded = [], []
    uses_torch = any("torch" in c.source for c in nb.cells if c.cell_type == "code")  # else no import: faster
    first = (GUARDED if scratch is not None else "") + PROLOGUE.replace("{uses_torch}", str(uses_torch))
    prologue = nbformat.v4.new_code_cell(first, id="grading-prologue")
    cells.append(prologue)
    graded.append(GradedCell(prologue.id, "prologue", None))

    def add(cell, role, exercise):
        cells.append(cell)
        graded.append(GradedCell(cell.id, role, exercise))

    for cell in nb.cells:
        if cell.cell_type != "code":
            cells.append(cell)
            continue
        role, exercise = cell_role(cell)
        if cell.id in skipped or exercise in stubbed and role == "check":
            why = "it hung in an earlier run" if cell.id in skipped else "its exercise hung in an earlier run"
            cell.source, cell.outputs, cell.execution_count = SKIPPED.format(why=why), [], None
            add(cell, "skipped", exercise)
            continue
        if role == "solution":
            student = None if exercise in stubbed else match.sources.get(cell.id)
            cell.source = student if student is not None else strip_solutions(cell.source, exercise)
        elif role == "check":
            ex = canonical.exercises[exercise]
            record = (record_folder(scratch, cell.id), cell.id, ex) if scratch is not None else None
            cell.source = guard_check(cell.source, canonical.course_imports, token, record)
        if role != "given":
            cell.outputs, cell.execution_count = [], None
        add(cell, role, exercise)
        ex = canonical.exercises.get(exercise)
        if role == "check" and ex is not None and cell.id == ex.check_cells[-1]:
            for number, source in enumerate(ex.hidden):
                hidden = nbformat.v4.new_code_cell(
                    guard_check(source, canonical.course_imports, token), id=f"hidden-{exercise}-{number}"
                )
                hidden.metadata = {"tags": ["check", "hidden"], "course": {"exercise": exercise}}
                add(hidden, "hidden", exercise)
    nb.cells = cells
    nb.metadata.setdefault("course", {})["graded"] = True
    return nb, graded
