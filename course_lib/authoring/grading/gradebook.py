"""``gradebook.csv``: one row per student, a column per notebook and a total, laid out for an LMS to import.

Points per notebook are those of the submission that counts (the best, when a student sent a notebook twice), as
in ``summary.md`` and the feedback pages; a notebook a student did not send is left empty and counts 0 in the
total. Three layouts (``--lms``):

``generic`` (the default)
    ``student``, then the roster's other columns (with ``--roster``), then one column per notebook and ``total``;
    the second row, ``(max points)``, holds each column's maximum.
``canvas``
    Canvas's own gradebook export, which its importer reads back (``app/models/gradebook_importer.rb`` in
    instructure/canvas-lms): the columns ``Student, ID, SIS User ID, SIS Login ID, Section``, then one column per
    notebook (a column whose title matches no assignment creates one), a ``Points Possible`` row with each
    notebook's maximum, and the total as ``Final Points``, a column the importer always skips (Canvas computes
    its own). Canvas finds a student by ``ID``, then ``SIS User ID`` or ``SIS Login ID``, then by name.
``moodle``
    Moodle's CSV import (``grade/import/csv/classes/load_data.php`` in moodle/moodle): a header row, then one row
    per student; on the import page each column is mapped, the student's to a user field (``Username``,
    ``ID number`` or ``Email address``) and each notebook's to a grade item. A row whose user Moodle cannot find
    aborts the whole import, so there is no row of maxima (each grade item holds its maximum), no total (Moodle
    computes the course total), and no student the roster could not map.

A roster (``--roster roster.csv``) maps the grader's names (folder or file names) to the LMS's: its column
``submitted as`` holds the grader's name, and the other columns are copied as the layout asks (an LMS's own
gradebook export, with that column added, is a roster). Students it cannot map are named, and left out of the
Canvas and Moodle layouts.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from course_lib.authoring.grading.feedback import best_submissions, number
from course_lib.authoring.grading.verdict import Row

LAYOUTS = ("generic", "canvas", "moodle")
KEY = "submitted as"  # the roster's column holding the grader's name for a student
CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_IDENTITY = ["Username", "ID number", "Email address"]


@dataclass
class Roster:
    columns: list[str]  # the roster's columns other than KEY, in its order
    by_student: dict[str, dict[str, str]]  # grader's name -> {column: value}


def read_roster(path: Path, layout: str = "generic") -> Roster:
    """Read ``roster.csv`` for ``layout``; ``ValueError`` naming the problem when it cannot be used."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # -sig: a spreadsheet's byte-order mark
            reader = csv.DictReader(f)
            fields = [name.strip() for name in reader.fieldnames or []]
            records = [{k.strip(): (v or "").strip() for k, v in r.items() if k is not None} for r in reader]
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise ValueError(f"--roster {path}: cannot be read ({error})") from None
    if KEY not in fields:
        raise ValueError(
            f"--roster {path}: expected a column {KEY!r} (the student's folder or file name), got {fields}"
        )
    by_student: dict[str, dict[str, str]] = {}
    for record in records:
        name = record.get(KEY, "")
        if not name:
            continue
        if name in by_student:
            raise ValueError(f"--roster {path}: {name!r} is in the {KEY!r} column twice")
        by_student[name] = record
    roster = Roster([c for c in fields if c != KEY], by_student)
    check_roster(roster, layout)
    return roster


def check_roster(roster: Roster | None, layout: str) -> None:
    """``ValueError`` when ``layout`` is unknown, or the roster has none of the columns the layout identifies by."""
    if layout not in LAYOUTS:
        raise ValueError(f"--lms: expected one of {', '.join(LAYOUTS)}, got {layout!r}")
    wanted = {"canvas": CANVAS_IDENTITY, "moodle": MOODLE_IDENTITY}.get(layout)
    if roster is not None and wanted and not set(wanted) & set(roster.columns):
        raise ValueError(f"--roster: a {layout} roster needs one of the columns {', '.join(wanted)}")


def notebook_scores(rows: list[Row]) -> tuple[list[str], dict[str, float], dict[str, dict[str, float]]]:
    """(notebooks, maximum per notebook, student -> notebook -> points of the submission that counts)."""
    maxima: dict[str, float] = {}
    for (notebook, _), points in {(r.notebook, r.exercise): r.max_points for r in rows if r.exercise}.items():
        maxima[notebook] = maxima.get(notebook, 0.0) + points
    scores: dict[str, dict[str, float]] = {}
    for (student, notebook), submissions in best_submissions(rows).items():
        if notebook in maxima:  # a file of no known notebook has no column
            scores.setdefault(student, {})[notebook] = sum(row.points for row in submissions[0])
        else:
            scores.setdefault(student, {})
    return sorted(maxima), maxima, scores


def _cells(notebooks: list[str], scores: dict[str, float]) -> list[str]:
    return [number(scores[n]) if n in scores else "" for n in notebooks]


def gradebook_rows(rows: list[Row], layout: str = "generic", roster: Roster | None = None):
    """(the CSV's rows, the students the roster could not map, the roster's students with no submission)."""
    check_roster(roster, layout)
    notebooks, maxima, scores = notebook_scores(rows)
    students = sorted(scores)
    unmapped = [s for s in students if roster is not None and s not in roster.by_student]
    absent = sorted(set(roster.by_student) - set(students)) if roster is not None else []
    mapped = [s for s in students if s not in unmapped]
    maximum = [number(maxima[n]) for n in notebooks]
    total_max = number(sum(maxima.values()))

    # 1. generic: the grader's name, the roster's columns, the notebooks and the total, a row of maxima.
    if layout == "generic":
        extra = roster.columns if roster is not None else []
        table = [["student", *extra, *notebooks, "total"], ["(max points)", *[""] * len(extra), *maximum, total_max]]
        for student in students:
            ids = roster.by_student.get(student, {}) if roster is not None else {}
            total = number(sum(scores[student].values()))
            table.append([student, *[ids.get(c, "") for c in extra], *_cells(notebooks, scores[student]), total])
    # 2. canvas: Canvas's export columns, a Points Possible row, the total as the read-only Final Points.
    elif layout == "canvas":
        table = [[*CANVAS_IDENTITY, *notebooks, "Final Points"]]
        table.append(["Points Possible", "", "", "", "", *maximum, total_max])
        for student in mapped:
            ids = roster.by_student[student] if roster is not None else {"Student": student}
            identity = [ids.get(c, "") for c in CANVAS_IDENTITY]
            identity[0] = identity[0] or student
            total = number(sum(scores[student].values()))
            table.append([*identity, *_cells(notebooks, scores[student]), total])
    # 3. moodle: the user fields the roster has (else the grader's name as Username), one column per notebook.
    else:
        fields = [c for c in MOODLE_IDENTITY if c in roster.columns] if roster is not None else ["Username"]
        table = [[*fields, *notebooks]]
        for student in mapped:
            ids = roster.by_student[student] if roster is not None else {"Username": student}
            table.append([*[ids.get(c, "") for c in fields], *_cells(notebooks, scores[student])])
    return table, unmapped, absent


def write_gradebook(rows: list[Row], path: Path, layout: str = "generic", roster: Roster | None = None):
    """Write ``gradebook.csv``; returns (unmapped students, roster students with no submission)."""
    table, unmapped, absent = gradebook_rows(rows, layout, roster)
    with open(path, "w", newline="", encoding="utf-8", errors="surrogateescape") as f:  # any folder name
        csv.writer(f).writerows(table)
    return unmapped, absent
