"""What the instructor hands back, written at the end of every grading run from every row of ``grades.csv``.

``gradebook.csv`` for the LMS (:mod:`course_lib.authoring.grading.gradebook`) and, unless ``--no-feedback``, a
page per student (:mod:`course_lib.authoring.grading.feedback`). Both read the rows back from disk, so a resumed
run (submissions graded by an earlier, interrupted run and skipped by this one) hands back the whole class. The
pages show each message whole, from ``messages.jsonl`` (:mod:`course_lib.authoring.grading.messages`).
"""

from __future__ import annotations

from pathlib import Path

from course_lib.authoring.grading.canonical import Canonical
from course_lib.authoring.grading.feedback_pages import write_feedback
from course_lib.authoring.grading.gradebook import Roster, write_gradebook
from course_lib.authoring.grading.messages import FILE_NAME, with_messages
from course_lib.authoring.grading.report import read_rows


def hand_back(
    out: Path, canonical: dict[str, Canonical], lms: str, roster: Roster | None, feedback: bool, notebooks: Path
) -> tuple[list[str], list[str]]:
    """Write ``out/gradebook.csv`` and, when ``feedback``, ``out/feedback/``; (what was written, warnings)."""
    rows = with_messages(read_rows(out / "grades.csv"), out / FILE_NAME)  # no messages.jsonl: each row's line
    unmapped, absent = write_gradebook(rows, out / "gradebook.csv", lms, roster)
    done, warnings = [f"wrote {out / 'gradebook.csv'} ({lms})"], []
    if unmapped:
        left = " (left out of the gradebook)" if lms != "generic" else ""
        warnings.append(f"not in the roster{left}: {', '.join(unmapped)}")
    if absent:
        warnings.append(f"in the roster, no submission: {', '.join(absent)}")
    if feedback:
        pages = write_feedback(rows, canonical, out / "feedback", notebooks)
        done.append(f"wrote {len(pages)} feedback page(s) to {out / 'feedback'} (.md and .html)")
    return done, warnings
