"""``messages.jsonl``: every line of each row's message, beside ``grades.csv``, for the students' feedback pages.

``grades.csv`` keeps one line per message, the first: what an instructor scans and what an LMS tool reads. A
check's message often says more after it: the case it was seen on, the inputs, a second mistake that gives the same
numbers. Each row's whole message is a JSON line here::

    {"submission": ..., "exercise": ..., "student": ..., "notebook": ..., "status": ..., "line": ..., "message": ...}

where ``line`` is the row's ``message`` column and ``message`` the whole text. Three rules keep the file consistent
with the rows, however a run ends:

1. A submission's messages are appended (flushed to disk) just *before* its rows. A grader killed between the two
   leaves messages with no row, never a row whose message is lost; the submission is graded again on the rerun.
2. A run that resumes first rewrites the file with the messages of the rows it keeps, and nothing else (no message of
   a submission graded again or dropped, no line half-written when the grader was killed); ``--regrade`` empties it.
3. A message is used only for the row it was written with: the same submission and exercise, and the same status
   and first line; the last one written wins. A page never shows a message from another grading of the file.

A row with no message here (a grades folder written by an older grader) keeps its one line: its page shows that.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from course_lib.authoring.grading.verdict import Row

FILE_NAME = "messages.jsonl"


def _entry(row: Row) -> dict:
    return {
        "submission": row.submission,
        "exercise": row.exercise,
        "student": row.student,
        "notebook": row.notebook,
        "status": row.status,
        "line": row.message,
        "message": row.full_message or row.message,
    }


def _lines(rows: list[Row]) -> str:
    # ensure_ascii: a name that is not UTF-8 (kept with surrogate escapes, as grades.csv keeps it) is written as \udcxx
    return "".join(json.dumps(_entry(row)) + "\n" for row in rows)


def append_messages(rows: list[Row], path: Path) -> None:
    """Add one submission's messages and make sure they are on disk (flush and fsync), before its rows are."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(_lines(rows))
        f.flush()
        os.fsync(f.fileno())


def read_messages(path: Path) -> dict[tuple[str, str], dict]:
    """(submission, exercise) -> the last message written for it; a line that is not a whole entry is skipped."""
    found: dict[tuple[str, str], dict] = {}
    if not path.is_file():
        return found
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                entry = json.loads(line)
                key = (entry["submission"], entry["exercise"])
            except (ValueError, KeyError, TypeError):
                continue
            found[key] = entry
    return found


def _matching(row: Row, messages: dict[tuple[str, str], dict]) -> str | None:
    """The whole message written with this row, or None (none written, or written for another grading)."""
    entry = messages.get((row.submission, row.exercise))
    if entry is None or entry.get("status") != row.status or entry.get("line") != row.message:
        return None
    message = entry.get("message")
    return message if isinstance(message, str) else None


def with_messages(rows: list[Row], path: Path) -> list[Row]:
    """The rows with their whole messages from ``path``; a row with none keeps its one line."""
    messages = read_messages(path)
    found = []
    for row in rows:
        message = _matching(row, messages)
        found.append(dataclasses.replace(row, full_message=message or ""))
    return found


def keep_messages(rows: list[Row], path: Path) -> None:
    """Rewrite ``path`` with the messages of ``rows`` only (the rows a resumed run keeps; none: an empty file).
    A row whose message is not there is left out: its page shows its one line, as before."""
    kept = [row for row in with_messages(rows, path) if row.full_message]
    scratch = path.with_name(path.name + ".tmp")
    with open(scratch, "w", encoding="utf-8") as f:
        f.write(_lines(kept))
        f.flush()
        os.fsync(f.fileno())
    os.replace(scratch, path)
