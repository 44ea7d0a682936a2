"""What grading writes: ``grades.csv``, ``summary.md`` and one log per submission.

``grades.csv`` has one row per submission and exercise::

    student,notebook,exercise,points,max_points,status,message,notes,submission

``message`` is the first line of what decided the status (the check's assertion, the
exception, "✔ ..." when passed); ``notes`` says what was odd about the file (duplicated
cell ids, cells found by position, reordered cells, a hung given cell).

``summary.md`` has a table per student (points per notebook and in total; a notebook a
student did not submit counts 0; when a student sent the same notebook twice the best
one counts and the problem list says so), a table per exercise (average points and how
many submissions ended in each status) with class averages, and the list of
submissions an instructor should look at.
"""

from __future__ import annotations

import csv
import io
import os
from collections import Counter, defaultdict
from pathlib import Path

from course_lib.authoring.grading.verdict import Graded, Row

COLUMNS = ["student", "notebook", "exercise", "points", "max_points", "status", "message", "notes", "submission"]
STATUS_ORDER = ["passed", "failed", "error", "timeout", "over the memory limit", "not attempted"]


def _number(x: float) -> str:
    return f"{x:g}"


def write_csv(rows: list[Row], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerow(COLUMNS)
    append_rows(rows, path)


def append_rows(rows: list[Row], path: Path) -> None:
    """Add one submission's rows to grades.csv and make sure they are on disk (fsync).

    The rows go in one ``write`` of the whole text, so that a grader killed while adding them leaves the file
    with all of them or none (only a machine that stops mid-write can cut a row: :func:`rows_to_resume` mends
    that)."""
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    for row in rows:
        values = [getattr(row, column) for column in COLUMNS]
        writer.writerow([_number(v) if isinstance(v, (int, float)) else v for v in values])
    data = text.getvalue().encode("utf-8", errors="surrogateescape")  # any file name
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = 0
        while written < len(data):  # a regular file takes it in one call; the loop is for the rule, not the case
            written += os.write(descriptor, data[written:])
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def read_rows(path: Path) -> list[Row]:
    """The rows of an earlier run's grades.csv (none if it is missing or not ours); a row cut short is dropped."""
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != COLUMNS:
            return []
        rows = []
        for record in reader:
            if None in record.values() or None in record:
                continue
            try:
                rows.append(
                    Row(**{**record, "points": float(record["points"]), "max_points": float(record["max_points"])})
                )
            except (TypeError, ValueError):
                continue
    return rows


def rows_to_resume(path: Path) -> list[Row]:
    """The rows an interrupted run left in ``path`` that a new run keeps, with the file rewritten to hold only them.

    A file that does not end with a line break was cut mid-row (the machine stopped while rows were written): the
    cut line is dropped, and so is every row of the last whole row's submission, which may be the one that was
    being written; those submissions are graded again. Rewriting the file (a new file put in place whole) means
    the next rows start on a line of their own instead of joining the cut one, where they would be lost.
    """
    if not path.is_file():
        return []
    data = path.read_bytes()
    cut = not data.endswith(b"\n")
    fresh = path.with_name(path.name + ".resume")
    fresh.write_bytes(data[: data.rfind(b"\n") + 1] if cut else data)  # whole lines only
    rows = read_rows(fresh)
    if cut and rows:
        suspect = rows[-1].submission
        rows = [row for row in rows if row.submission != suspect]
    if not rows:
        fresh.unlink()
        return []
    write_csv(rows, fresh)
    os.replace(fresh, path)
    return rows


def write_log(graded: Graded, folder: Path) -> Path:
    path = folder / f"{graded.key}.log"
    path.write_text("\n".join(graded.log) + "\n", encoding="utf-8", errors="backslashreplace")
    return path


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def summary_markdown(results: list[Graded], header: str) -> str:
    rows = [row for result in results for row in result.rows]
    max_by_notebook = defaultdict(float)
    for (notebook, _), points in {(r.notebook, r.exercise): r.max_points for r in rows if r.exercise}.items():
        max_by_notebook[notebook] += points
    notebooks = sorted(max_by_notebook)  # a notebook with no solution to grade against has no column
    best: dict[tuple[str, str], float] = {}
    sent: Counter = Counter()
    for result in results:
        notebook = result.rows[0].notebook if result.rows else ""
        sent[(result.student, notebook)] += 1
        score = sum(row.points for row in result.rows)
        best[(result.student, notebook)] = max(score, best.get((result.student, notebook), 0.0))
    students = sorted({result.student for result in results})
    class_max = sum(max_by_notebook[n] for n in notebooks)
    lines = ["# Grades", "", header, "", "## Per student", ""]
    lines += [
        "| student | "
        + " | ".join(f"{n} (/{_number(max_by_notebook[n])})" for n in notebooks)
        + f" | total (/{_number(class_max)}) | % |",
        "|---" * (len(notebooks) + 3) + "|",
    ]
    totals = []
    for student in students:
        scores = [best.get((student, n)) for n in notebooks]
        total = sum(s or 0.0 for s in scores)
        totals.append(total)
        shown = ["—" if s is None else _number(s) for s in scores]
        lines.append(
            f"| {_cell(student)} | " + " | ".join(shown) + f" | {_number(total)} | {_percent(total, class_max)} |"
        )
    if students:
        averages = [sum(best.get((s, n), 0.0) for s in students) / len(students) for n in notebooks]
        mean = sum(totals) / len(totals)
        lines.append(
            "| **class average** | "
            + " | ".join(f"{a:.2f}" for a in averages)
            + f" | {mean:.2f} | {_percent(mean, class_max)} |"
        )
    lines += [
        "",
        "A notebook a student did not send (—) counts 0 in the total and in the class average.",
        "",
        "## Per exercise",
        "",
        "| notebook | exercise | points | average | " + " | ".join(STATUS_ORDER) + " | other |",
        "|---" * (len(STATUS_ORDER) + 5) + "|",
    ]
    by_exercise = defaultdict(list)
    for row in rows:
        if row.exercise:
            by_exercise[(row.notebook, row.exercise)].append(row)
    for (notebook, exercise), group in sorted(by_exercise.items(), key=lambda item: item[0][0]):
        counts = Counter(row.status for row in group)
        other = sum(n for status, n in counts.items() if status not in STATUS_ORDER)
        average = sum(row.points for row in group) / len(group)
        lines.append(
            f"| {notebook} | {exercise} | {_number(group[0].max_points)} | {average:.2f} | "
            + " | ".join(str(counts[s]) for s in STATUS_ORDER)
            + f" | {other} |"
        )
    lines += ["", "## To look at", ""]
    problems = _problems(results, sent)
    lines += problems or ["Nothing: every submission was read and graded normally."]
    return "\n".join(lines) + "\n"


def _percent(x: float, total: float) -> str:
    return f"{100 * x / total:.0f}%" if total else "—"


def _problems(results: list[Graded], sent: Counter) -> list[str]:
    lines = []
    for (student, notebook), n in sorted(sent.items()):
        if n > 1:
            lines.append(f"- {_cell(student)}: {n} submissions of {notebook or 'an unknown notebook'}; the best counts")
    for result in results:
        whole = {row.status for row in result.rows} - set(STATUS_ORDER)
        notes = {row.notes for row in result.rows if row.notes}
        timeouts = [row.exercise for row in result.rows if row.status == "timeout"]
        what = [f"{status}: {next(r.message for r in result.rows if r.status == status)}" for status in sorted(whole)]
        what += sorted(notes) + ([f"timeout in {', '.join(timeouts)}"] if timeouts else [])
        if what:
            lines.append(
                f"- {_cell(result.student)}, `{result.submission}`: "
                + "; ".join(_cell(w) for w in what)
                + f" (log: `logs/{result.key}.log`)"
            )
    return lines
