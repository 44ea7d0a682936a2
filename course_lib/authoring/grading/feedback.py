"""What a student gets back: ``feedback/<student>.md`` and the same page as a standalone ``.html``.

A page is written from the rows of ``grades.csv`` (:func:`course_lib.authoring.grading.report.read_rows`), never
from a run's memory, so a grader killed half-way and resumed writes the same pages as one uninterrupted run. For
each notebook the student sent, the page lists every exercise in notebook order with its status, its points and
the check's message in full (every line, from ``messages.jsonl``: the named mistake, its fix, the case it was seen
on; only the line ``grades.csv`` holds when a grades folder has no ``messages.jsonl``), then what to do next: rerun
the check cell under the solution, and the lecture section to reread (``metadata.course.exercises.<id>.reread`` of
the solution notebook: a chapter and a section heading of ``notebooks/NN_*.ipynb``).

What a student must not see is left out: the ``notes`` column (for the instructor), the submission's path (only
its file name is shown), and any absolute path a message carries (a temporary folder, another student's folder);
a submission the grader refused as a symbolic link, or failed on for its own reasons, gets a fixed sentence
instead of its message, since those messages name link targets and the grader's internals. A student sees only
their own rows, and a classmate's name (of three letters or more: shorter ones cannot be told from a maths symbol)
is cut from a message too, as a file name or a path relative to the class folder would carry it. A hidden check's
message is its first line only (:func:`course_lib.authoring.grading.verdict.judge`): the lines after it would show
the instructor's hidden case.

The page is built once as a small structure (:class:`Page`) and rendered twice, as Markdown and as HTML, in
:mod:`course_lib.authoring.grading.feedback_pages`, so the two never disagree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from course_lib.authoring.grading.canonical import Canonical
from course_lib.authoring.grading.verdict import Row

# A classmate's name is cut when it is at least this long; a shorter one could as well be a symbol (`t`, `k`, `A`).
NAME_LENGTH = 3
# A path with at least two parts (`/tmp/x`, `/home/bob/00_warmup.ipynb`); not a lone `/` in maths (`a / b`), not a URL.
ABSOLUTE_PATH = re.compile(r"(?<![\w.)\]:/])/(?:[\w.@+~-]+/)+[\w.@+~-]*")
# Statuses whose message is for the instructor only: the student gets this sentence instead.
INSTEAD = {
    "symlink": "the file you sent is a symbolic link, not a notebook: send the notebook file itself",
    "grader error": "the grader could not grade this file, for a reason of its own, not of your work: "
    "your instructor will look at it",
}
# What to do next, per status (the lecture section to reread follows when the exercise names one).
NEXT_STEP = {
    "failed": "fix your solution, then rerun the check cell under it: it shows this same message until it shows ✔",
    "not attempted": "write your solution in the cell that still raises NotImplementedError, then run the check cell "
    "under it",
    "error": "run your solution cell and the check cell under it in JupyterLab: the whole traceback shows where "
    "your code failed",
    "timeout": "your code ran past the time limit (an infinite loop?): make it finish, then rerun the check cell",
    "over the memory limit": "your code used more memory than grading allows: avoid building large tensors, "
    "then rerun the check cell",
    "unreadable": "send the notebook file (.ipynb) itself, saved from JupyterLab",
    "wrong notebook": "send the exercise notebook of this chapter under its own name",
    "unknown notebook": "send one of the course's exercise notebooks, under its own name (NN_name.ipynb)",
    "symlink": "send the notebook file itself",
    "grader error": "nothing: your instructor will grade this file again",
}
# Statuses about the student's code, where rereading the lecture helps (not a file sent under the wrong name).
REREAD = {"failed", "not attempted", "error", "timeout", "over the memory limit"}


@dataclass
class ExerciseResult:
    """One exercise of one notebook, as the student sees it."""

    number: int  # 1, 2, ... in notebook order (0 when the notebook is unknown)
    exercise: str
    title: str
    status: str
    points: float
    max_points: float
    message: str
    next_step: str  # "" when passed
    reread: str  # "" when passed, when the file itself was the problem, or when the exercise names no section


@dataclass
class NotebookResult:
    """The submission of one notebook that counts (the best, when a student sent several)."""

    notebook: str
    file: str  # the submitted file's name, without its folder
    points: float
    max_points: float
    exercises: list[ExerciseResult] = field(default_factory=list)
    others: list[tuple[str, float]] = field(default_factory=list)  # (file name, points) of the other submissions


@dataclass
class Page:
    """One student's page: every notebook they sent, in name order."""

    student: str
    notebooks: list[NotebookResult]

    @property
    def points(self) -> float:
        return sum(n.points for n in self.notebooks)

    @property
    def max_points(self) -> float:
        return sum(n.max_points for n in self.notebooks)


def number(x: float) -> str:
    return f"{x:g}"


def student_message(row: Row, classmates: Sequence[str] = ()) -> str:
    """The row's whole message (its one line when no more is known) with nothing the student must not see: no
    path, no grader internals, none of ``classmates``' names."""
    if row.status in INSTEAD:
        return INSTEAD[row.status]
    message = ABSOLUTE_PATH.sub("…", row.full_message or row.message)
    return without_names(message, classmates)


def without_names(text: str, names: Sequence[str]) -> str:
    """``text`` with each of ``names`` (``NAME_LENGTH`` letters or more) cut wherever it stands alone or in a file
    name (``bo_00_warmup.ipynb``), in any case; the longest first, so that no part of a name is left."""
    cut = sorted((name for name in names if len(name) >= NAME_LENGTH), key=len, reverse=True)
    if not cut:
        return text
    pattern = re.compile(
        "(?<![A-Za-z0-9])(?:" + "|".join(re.escape(name) for name in cut) + ")(?![A-Za-z0-9])", re.IGNORECASE
    )
    return pattern.sub("…", text)


def lecture_files(notebooks: Path) -> dict[str, str]:
    """Chapter number -> the lecture notebook's file name (``notebooks/02_policy_gradient.ipynb``)."""
    found = {}
    for path in sorted(notebooks.glob("[0-9][0-9]_*.ipynb")):
        found.setdefault(path.name[:2], path.name)
    return found


def reread_of(canonical: Canonical | None, exercise: str, lectures: dict[str, str]) -> str:
    """The lecture section an exercise names, as a sentence (``""`` when it names none)."""
    if canonical is None:
        return ""
    info = canonical.nb.metadata.get("course", {}).get("exercises", {}).get(exercise, {})
    reread = info.get("reread") or {}
    chapter, section = str(reread.get("chapter", "")), str(reread.get("section", ""))
    if not section:
        return ""
    where = f"chapter {chapter}'s lecture" + (f" (`notebooks/{lectures[chapter]}`)" if chapter in lectures else "")
    return f"reread {where}, section “{section}”"


def _by_submission(rows: list[Row]) -> dict[str, list[Row]]:
    submissions: dict[str, list[Row]] = {}
    for row in rows:
        submissions.setdefault(row.submission, []).append(row)
    return submissions


def best_submissions(rows: list[Row]) -> dict[tuple[str, str], list[list[Row]]]:
    """(student, notebook) -> the rows of each submission, the one that counts first (most points; the first
    sent on a tie), as summary.md and the gradebook count them."""
    grouped: dict[tuple[str, str], list[list[Row]]] = {}
    for submission_rows in _by_submission(rows).values():
        first = submission_rows[0]
        grouped.setdefault((first.student, first.notebook), []).append(submission_rows)
    for key, submissions in grouped.items():
        grouped[key] = sorted(submissions, key=lambda s: -sum(row.points for row in s))  # stable: ties keep order
    return grouped


def notebook_result(
    submissions: list[list[Row]], canonical: Canonical | None, lectures: dict[str, str], classmates: Sequence[str] = ()
) -> NotebookResult:
    """What the page says of one notebook: the submission that counts, exercise by exercise. ``classmates``: the
    other students of the class, whose names no message may show."""
    counted = submissions[0]
    first = counted[0]
    order = list(canonical.exercises) if canonical is not None else []
    result = NotebookResult(
        notebook=first.notebook or "an unknown notebook",
        file=Path(first.submission).name,
        points=sum(row.points for row in counted),
        max_points=sum(row.max_points for row in counted),
        others=[(Path(s[0].submission).name, sum(row.points for row in s)) for s in submissions[1:]],
    )
    for row in counted:
        known = canonical is not None and row.exercise in canonical.exercises
        passed = row.status == "passed"
        result.exercises.append(
            ExerciseResult(
                number=order.index(row.exercise) + 1 if known else 0,
                exercise=row.exercise,
                title=canonical.exercises[row.exercise].title if known else "",
                status=row.status,
                points=row.points,
                max_points=row.max_points,
                message=student_message(row, classmates),
                next_step="" if passed else NEXT_STEP.get(row.status, "look at the message above"),
                reread=reread_of(canonical, row.exercise, lectures) if row.status in REREAD else "",
            )
        )
    return result


def pages(rows: list[Row], canonical: dict[str, Canonical], lectures: dict[str, str]) -> list[Page]:
    """One page per student, notebooks in name order."""
    grouped = best_submissions(rows)
    students = sorted({student for student, _ in grouped})
    built = []
    for student in students:
        notebooks = sorted(notebook for who, notebook in grouped if who == student)
        classmates = [other for other in students if other != student]
        parts = [notebook_result(grouped[(student, n)], canonical.get(n), lectures, classmates) for n in notebooks]
        built.append(Page(student, parts))
    return built
