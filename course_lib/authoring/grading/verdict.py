"""Grade one submission: rebuild it, run it, run it again without what hung, and judge each exercise.

An exercise is judged on its cells in notebook order (its solution cells, its check
cells, then its hidden checks); the first cell that does not pass decides:

=================  ==============================================================
status             when
=================  ==============================================================
passed             every cell passed and each check printed this run's token
failed             a check (or hidden check) raised ``AssertionError``
not attempted      ``NotImplementedError`` (the untouched stub), or no solution cell
timeout            a cell ran past ``--timeout`` seconds
over the memory    the kernel's resident memory passed ``--memory`` under a cell of the
limit              exercise (it is stopped, and the notebook run again without it)
error              any other exception, in the solution cell or in the check; or the
                   kernel died while a cell of the exercise ran (``os._exit``, a crash,
                   out of memory): "the kernel died ..."
=================  ==============================================================

and, for a whole submission that cannot be graded, one of ``unreadable`` (not a
notebook: broken JSON, a file that cannot be read), ``wrong notebook`` (a notebook of
another chapter under this one's name), ``unknown notebook`` (no solution notebook to
grade it against), ``symlink`` (a symbolic link, never followed), ``grader error``
(the grader itself failed: see the log). Such a
submission gets a row per exercise when its notebook is known, otherwise one row.
"""

from __future__ import annotations

import configparser
import json
import os
import queue
import re
import secrets
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course_lib.authoring.grading.canonical import Canonical
from course_lib.authoring.grading.judging import first_line, full_text, judge_with, row_line
from course_lib.authoring.grading.rebuild import GradedCell, match_solutions, rebuild
from course_lib.authoring.grading.runner import CellOutcome, Run, run_nbval
from course_lib.authoring.grading.sandbox import Sandbox, fresh_scratch, remove_scratch
from course_lib.authoring.grading.submissions import identify, is_symlink, name_in_file, read_submission, student_name
from course_lib.authoring.grading.watchdog import kill_kernel_processes
from course_lib.checks import seal

WHERE = {"solution": "your solution cell", "check": "the check", "hidden": "a hidden check"}


@dataclass
class Row:
    """One line of grades.csv, and the whole of its message (kept in ``messages.jsonl``, not in grades.csv)."""

    student: str
    notebook: str
    exercise: str
    points: float
    max_points: float
    status: str
    message: str  # what grades.csv keeps: the first line of a check's message
    notes: str
    submission: str
    # Every line of the message ("" when it is ``message`` itself, or unknown: a grades folder from an older grader).
    full_message: str = field(default="", compare=False, repr=False)


@dataclass
class Options:
    timeout: float = 60.0
    threads: int = 1
    sanitize: Path | None = None
    work: Path = Path("rebuilt")  # one folder per submission, kept for the instructor
    notebook: str | None = None  # --notebook: what every submission is expected to be
    sandboxes: "queue.Queue[Sandbox] | None" = None  # one per -j slot; None: the kernel is not isolated
    memory: int = 4 << 30  # bytes of resident memory per kernel (for the message; the sandboxes enforce it)


@dataclass
class Graded:
    student: str
    submission: Path
    rows: list[Row] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    seconds: float = 0.0
    key: str = ""


def sanitizer(path: Path | None):
    """A function applying nbval's sanitize file (regex/replace sections) to a message, line by line (so that its
    first line is cleaned as it would be alone: grades.csv keeps that line)."""
    rules = []
    if path is not None and path.is_file():
        parser = configparser.ConfigParser(interpolation=None)
        parser.read(path, encoding="utf-8")
        rules = [
            (re.compile(parser[s]["regex"]), parser[s].get("replace", ""))
            for s in parser.sections()
            if "regex" in parser[s]
        ]

    def clean_line(text: str) -> str:
        for pattern, replacement in rules:
            text = pattern.sub(replacement, text)
        return text

    def clean(text: str) -> str:
        return "\n".join(clean_line(line) for line in text.split("\n"))

    return clean


def judge(role: str, cell: CellOutcome, token: str, options: Options, clean) -> tuple[str, str] | None:
    """(status, message) when this cell decides its exercise's grade, None when it passed. The message is whole
    (every line of the exception's); a hidden check's is its first line only, as its later lines show the
    instructor's hidden case."""
    where = WHERE[role]
    if cell.outcome in ("passed", "skipped"):
        if role != "solution" and token not in cell.stdout:
            return "error", (
                f"{where} did not report completion (did a solution cell redirect the output "
                "or patch how errors are shown?)"
            )
        return None
    if cell.outcome == "timeout":
        return "timeout", f"{where} did not finish within {options.timeout:g} s (an infinite loop?)"
    if cell.outcome == "memory":
        return "over the memory limit", (
            f"{where} used more than the {options.memory / 2**30:g} GB of memory "
            f"each kernel may use ({cell.message}; the instructor's --memory)"
        )
    if cell.outcome == "died":
        if "grading process" in cell.message:
            return "error", f"the grading process was killed while {where} ran (twice)"
        return "error", f"the kernel died while {where} ran (os._exit, a crash, or out of memory?)"
    if cell.outcome in ("dead", "not run"):
        return "error", f"{where} did not run: an earlier cell stopped the kernel"
    if cell.outcome == "setup-error":
        return "grader error", f"the kernel did not start: {first_line(cell.message)}"
    ename, message = cell.ename, clean(full_text(cell.evalue))
    if not ename:
        return "error", f"{where}: {clean(first_line(cell.message))}"
    if ename == "NotImplementedError":
        return "not attempted", f"NotImplementedError: {message}"
    if ename == "ReferenceCalled":  # course_lib.checks.recording: the solution ran the reference
        return "failed", message
    if ename == "AssertionError" and role == "hidden":
        return "failed", "hidden check: " + (row_line(message) or "an assertion failed")
    if ename == "AssertionError" and role != "solution":
        return "failed", message or "an assertion failed"
    return "error", f"{ename} in {where}: {message}"


def exercise_verdict(
    exercise, graded: list[GradedCell], run: Run, token, options, clean, judge_check=None
) -> tuple[str, str]:
    """The first cell of the exercise that did not pass decides; a check cell that passed in the kernel is then
    judged by ``judge_check(cell id, exercise id)`` from what the kernel recorded (None: from the kernel alone)."""
    passed_line = ""
    for number, cell in enumerate(graded):
        if cell.exercise != exercise.id or cell.role not in WHERE:
            continue
        outcome = run.cells.get(number, CellOutcome("not run"))
        verdict = judge(cell.role, outcome, token, options, clean)
        if verdict is not None:
            return verdict
        judged = judge_check(cell.cell_id, exercise.id) if judge_check is not None and cell.role == "check" else None
        if judged is not None and judged[0] != "passed":
            return judged[0], clean(judged[1])
        if cell.role == "check" and not passed_line:
            passed_line = (
                judged[1]
                if judged is not None and judged[1]
                else next((line for line in outcome.stdout.splitlines() if line.startswith("\u2714")), "")
            )
    return "passed", clean(passed_line) or f"\u2714 {exercise.id}: passed (its check ran in the grading kernel)"


def _culprit(graded: list[GradedCell], run: Run) -> int | None:
    """The cell to leave out of the next run: the first that timed out, else the one that killed the kernel."""
    outcomes = [run.cells.get(n, CellOutcome("not run")).outcome for n in range(len(graded))]
    stopped = [n for n, outcome in enumerate(outcomes) if outcome in ("timeout", "died", "memory")]
    if stopped:
        return stopped[0]
    if "dead" in outcomes and outcomes.index("dead") > 0:
        return outcomes.index("dead") - 1
    return None


def grade_submission(
    path: Path, base: Path | None, canonical: dict[str, Canonical], options: Options, key: str
) -> Graded:
    """Grade one file; whatever happens, the result has rows and a log (never an exception)."""
    start = time.monotonic()
    names = list(canonical)
    graded = Graded(student=path.stem, submission=path, key=key)
    try:
        if is_symlink(path, base):
            _refuse_link(path, base, canonical, options, graded)
        else:
            _grade(path, base, canonical, options, graded)
    except Exception:  # noqa: BLE001 - a grader bug must cost one submission, not the class
        graded.log += ["grader error:", traceback.format_exc()]
        notebook = options.notebook or name_in_file(path, names)
        graded.rows = _whole(
            graded,
            canonical.get(notebook),
            notebook or "",
            "grader error",
            f"the grader failed on this file: {first_line(traceback.format_exc().splitlines()[-1])}",
        )
    graded.seconds = time.monotonic() - start
    graded.log.append(f"graded in {graded.seconds:.1f} s")
    return graded


def _refuse_link(
    path: Path, base: Path | None, canonical: dict[str, Canonical], options: Options, graded: Graded
) -> None:
    graded.student = student_name(path, base, canonical)
    notebook = options.notebook or name_in_file(path, list(canonical))
    message = (
        f"a symbolic link (to {os.readlink(path) if path.is_symlink() else 'a linked folder'}): not graded, "
        "never followed; send the notebook file itself"
    )
    graded.log.append(f"symlink: {path}: {message}")
    graded.rows = _whole(graded, canonical.get(notebook), notebook or "", "symlink", message)


def _whole(
    graded: Graded, notebook: Canonical | None, name: str, status: str, message: str, notes: str = ""
) -> list[Row]:
    """Rows for a submission that cannot be graded: one per exercise when the notebook is known."""
    if notebook is None:
        return [Row(graded.student, name, "", 0, 0, status, message, notes, str(graded.submission))]
    return [
        Row(graded.student, notebook.name, ex.id, 0, ex.points, status, message, notes, str(graded.submission))
        for ex in notebook.exercises.values()
    ]


def _grade(path: Path, base: Path | None, canonical: dict[str, Canonical], options: Options, graded: Graded) -> None:
    clean = sanitizer(options.sanitize)
    submission = read_submission(path, base, canonical)
    graded.student = submission.student
    graded.log += [f"submission: {path}", f"student: {submission.student}"]
    expected, holds = identify(submission, canonical, options.notebook)
    if submission.problem:
        graded.log.append(f"unreadable: {submission.problem}")
        graded.rows = _whole(graded, canonical.get(expected), expected or "", "unreadable", submission.problem)
        return
    if expected and holds and expected != holds:
        message = f"this file holds {holds} (its metadata says so), not {expected}"
        graded.log.append(f"wrong notebook: {message}")
        graded.rows = _whole(graded, canonical[expected], expected, "wrong notebook", message)
        return
    if not (expected or holds):
        named = re.search(r"\d\d_\w+", path.stem)
        message = (
            f"no solution notebook {named.group(0)}.ipynb to grade it against"
            if named
            else "cannot tell which notebook this is (no course metadata, no NN_name in the file name)"
        )
        graded.log.append(f"unknown notebook: {message}")
        graded.rows = _whole(graded, None, named.group(0) if named else "", "unknown notebook", message)
        return
    notebook = canonical[holds or expected]
    match = match_solutions(notebook, submission)
    notes = list(match.notes)
    graded.log += [f"notebook: {notebook.name} (solution {notebook.path})"] + [f"note: {n}" for n in notes]
    token = secrets.token_hex(8)
    stubbed: dict[str, tuple[str, str]] = {}  # exercise -> its verdict from the run that hung
    skipped: set[str] = set()
    sandbox = options.sandboxes.get() if options.sandboxes is not None else None
    private = Path(tempfile.mkdtemp(prefix="course-grade-"))  # 0700: the notebook, the events, pytest's output
    scratch = None
    pytest_retried = False
    try:
        for attempt in range(1, len(notebook.exercises) + 5):
            scratch = fresh_scratch(scratch, sandbox)
            shutil.rmtree(private / "records", ignore_errors=True)  # what an earlier run recorded
            nb, cells = rebuild(notebook, match, token, stubbed=set(stubbed), skipped=skipped, scratch=scratch)
            target = private / f"{notebook.name}.ipynb"
            nbformat.write(nb, target)
            folders = tuple(seal.record_name(c.cell_id) for c in cells if c.role == "check")
            run = run_nbval(target, options.timeout, options.threads, options.sanitize, scratch, sandbox, folders)
            graded.log += _run_log(attempt, cells, run)
            if run.pytest_died and not pytest_retried:
                pytest_retried = True
                graded.log.append("pytest itself was killed: running the submission again once")
                continue
            culprit = _culprit(cells, run)
            if culprit is None:
                break
            cell = cells[culprit]
            graded.log.append(f"cell {culprit} ({cell.cell_id}) hung or stopped the kernel: running again without it")
            if cell.role in WHERE and cell.exercise not in stubbed:
                outcome = run.cells.get(culprit, CellOutcome("not run"))
                stubbed[cell.exercise] = judge(cell.role, outcome, token, options, clean) or (
                    "error",
                    f"{WHERE[cell.role]} stopped the kernel",
                )
            elif cell.role == "given" and cell.cell_id not in skipped:
                skipped.add(cell.cell_id)
                notes.append(f"given cell {cell.cell_id!r} hung (calling a student's function?) and was skipped")
            else:
                break
        kept = options.work / graded.key  # the notebook graded, for the instructor to rerun by hand: its
        kept.mkdir(parents=True, exist_ok=True)  # checks judge in the kernel, as in JupyterLab (nothing recorded)
        (kept / target.name).write_text(
            json.dumps(rebuild(notebook, match, token, stubbed=set(stubbed), skipped=skipped)[0], indent=1),
            encoding="utf-8",
        )
        verdicts = {
            ex.id: exercise_verdict(
                ex, cells, run, token, options, clean, judge_check=judge_with(notebook, private, run)
            )
            for ex in notebook.exercises.values()
            if ex.id not in match.missing and ex.id not in stubbed
        }
    finally:
        if sandbox is not None and sandbox.uid is not None:
            kill_kernel_processes(sandbox, None)  # whatever its user still runs
        shutil.rmtree(private, ignore_errors=True)
        remove_scratch(scratch)
        if sandbox is not None:
            options.sandboxes.put(sandbox)
    for exercise in notebook.exercises.values():
        if exercise.id in match.missing:
            status, message = "not attempted", "no solution cell for this exercise in the submission"
        elif exercise.id in stubbed:
            status, message = stubbed[exercise.id]
        else:
            status, message = verdicts[exercise.id]
        points = exercise.points if status == "passed" else 0
        line = row_line(message)
        graded.rows.append(
            Row(
                graded.student,
                notebook.name,
                exercise.id,
                points,
                exercise.points,
                status,
                line,
                "; ".join(notes),
                str(path),
                full_message=message if message != line else "",
            )
        )
        graded.log.append(f"{exercise.id}: {status} {points:g}/{exercise.points:g} {line}")


def _run_log(attempt: int, cells: list[GradedCell], run: Run) -> list[str]:
    lines = [
        f"--- run {attempt}: {run.seconds:.1f} s"
        + (" (stopped after a cell hung)" if run.killed else "")
        + (
            f" (kernel started again {run.kernel_retries} time(s): it died before answering)"
            if run.kernel_retries
            else ""
        )
    ]
    for number, cell in enumerate(cells):
        outcome = run.cells.get(number, CellOutcome("not run"))
        detail = (
            f" {outcome.ename}: {outcome.evalue}"
            if outcome.ename
            else (f" {first_line(outcome.message)}" if outcome.outcome != "passed" and outcome.message else "")
        )
        where = f"cell {number:2d} {cell.role:8s} {cell.exercise or '':20s} {cell.cell_id}"
        lines.append(f"{where}: {outcome.outcome}{detail}")
    for cell_id, verdicts in run.verdicts.items():
        lines += [f"guard: {cell_id}: {verdict}" for verdict in verdicts]
    lines += ["pytest output:", run.output.rstrip()]
    return lines
