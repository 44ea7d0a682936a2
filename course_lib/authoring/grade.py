"""Grade a class: ``python -m course_lib.grade SUBMISSION... --out DIR``.

Each SUBMISSION is a notebook file or a folder of them (searched recursively). For
each notebook the command

1. finds which exercise notebook it is (its metadata, written by the build, and its
   file name) and the canonical ``solutions/NN_name.ipynb`` for it;
2. rebuilds a gradable notebook: the canonical notebook with only the student's
   solution cells put in (matched by cell id, then by metadata, position and content;
   see :mod:`course_lib.authoring.grading.rebuild`), so deleting, editing or weakening a check cell,
   or editing cell metadata, changes nothing; checks re-import ``course_lib`` fresh, so
   monkeypatching the check module from a solution cell changes nothing either;
3. appends the hidden checks (``grading/hidden/NN_name.py``, kept by the instructor;
   see :mod:`course_lib.authoring.grading.canonical`) after each exercise's own check;
4. runs it under nbval (``pytest --nbval-lax``) in its own process and kernel with a
   per-cell timeout; a watchdog stops a run that nbval cannot, and the notebook is run
   again without the cell that hung, so an infinite loop costs only its own exercise
   (:mod:`course_lib.authoring.grading.runner`);
5. judges every exercise from the cells' outcomes (:mod:`course_lib.authoring.grading.verdict`):
   passed, failed, error, timeout or not attempted; points from the solution
   notebook's ``metadata.course.exercises``, all or nothing per exercise.

It writes ``DIR/grades.csv`` (each message's first line) and ``DIR/messages.jsonl`` (each message whole; see
:mod:`course_lib.authoring.grading.messages`), ``DIR/summary.md``, ``DIR/logs/<student>__<notebook>.log``,
``DIR/gradebook.csv`` (a row per student, in an LMS's layout with ``--lms``; see
:mod:`course_lib.authoring.grading.gradebook`), ``DIR/feedback/<student>.md`` and ``.html`` for the
students (``--no-feedback`` to skip them; see :mod:`course_lib.authoring.grading.feedback`), and
keeps each rebuilt notebook in ``DIR/rebuilt/<student>__<notebook>/`` (rerun one by hand with
``pytest --nbval-lax`` there). See :mod:`course_lib.authoring.grading.report`.

Nothing is lost: each submission's rows are appended to ``grades.csv`` (flushed to disk)
as soon as it is graded, so a grader killed half-way keeps every finished row, and the
same command run again resumes: it skips the submissions already in ``grades.csv``
(``--regrade`` grades everything again). When it runs as root, every kernel runs as an
unprivileged user of its own (``course-grade-<slot>``, created if missing) in namespaces of
its own that hide the output folder, the submissions, the solutions, the hidden checks and
course_lib's source, with no network and private scratch space (see
:mod:`course_lib.authoring.grading.sandbox`); otherwise ``summary.md`` says that grading ran
without isolation. In every kernel the grader's guard (:mod:`course_lib.checks.guard`)
watches for borrowed code in every thread and signs each check cell's verdict.

Exit status: 0 when grading completed, whatever the students scored (an unreadable
file, a wrong notebook, a hang: each is a row of the CSV); 2 when it could not grade at
all: no submission found, no usable solution notebook, the output folder not writable,
or every submission failed for the grader's own reasons (no kernel could start).

What the defences do not cover is written in ``docs/grading.md`` ("Limits").
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from course_lib.authoring.grading.canonical import load_solutions
from course_lib.authoring.grading.gradebook import LAYOUTS, read_roster
from course_lib.authoring.grading.hand_back import hand_back
from course_lib.authoring.grading.isolation import CannotGrade, kernel_sandboxes
from course_lib.authoring.grading.messages import FILE_NAME, append_messages, keep_messages
from course_lib.authoring.grading.report import COLUMNS, append_rows, read_rows, summary_markdown, write_log
from course_lib.authoring.grading.submissions import find_submissions, student_name
from course_lib.authoring.grading.verdict import Graded, Options, grade_submission

ROOT = Path(__file__).resolve().parents[2]
CANNOT_GRADE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m course_lib.grade", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "submissions",
        nargs="+",
        type=Path,
        metavar="SUBMISSION",
        help="notebook files, or folders searched for *.ipynb",
    )
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="where grades.csv, summary.md, logs go")
    parser.add_argument(
        "--solutions",
        type=Path,
        default=ROOT / "solutions",
        metavar="DIR",
        help="the canonical solution notebooks (default: the course's solutions/)",
    )
    parser.add_argument(
        "--hidden",
        type=Path,
        default=ROOT / "grading" / "hidden",
        metavar="DIR",
        help="hidden checks, NN_name.py per notebook (default: grading/hidden/, used if present)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds per cell (default 60)")
    parser.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="grade N submissions at once")
    parser.add_argument("--notebook", metavar="NN_name", help="every submission should be this notebook")
    parser.add_argument(
        "--sanitize",
        type=Path,
        default=ROOT / "tests" / "nbval_sanitize.cfg",
        metavar="FILE",
        help="nbval sanitize file for volatile output (default: tests/nbval_sanitize.cfg)",
    )
    parser.add_argument(
        "--memory",
        type=float,
        default=4.0,
        metavar="GB",
        help="memory allowed to each kernel, its scratch space included (default 4, 0 for no limit)",
    )
    parser.add_argument(
        "--regrade",
        action="store_true",
        help="grade every submission again (default: skip those already in DIR/grades.csv)",
    )
    parser.add_argument(
        "--no-isolation", action="store_true", help="run kernels as this user even when root (summary.md says so)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--feedback",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write DIR/feedback/<student>.md and .html, one page per student (default: on)",
    )
    parser.add_argument("--lms", choices=LAYOUTS, default="generic", help="gradebook.csv's layout (default: generic)")
    parser.add_argument("--roster", type=Path, metavar="FILE", help="CSV: students' names ('submitted as') to LMS ids")
    return parser


def _key(student: str, path: Path, taken: set[str]) -> str:
    """A file-name-safe, unique ``<student>__<file stem>`` for the log and the rebuilt notebook."""
    key = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{student}__{path.stem}").strip("._") or "submission"
    unique, n = key, 1
    while unique in taken:
        n += 1
        unique = f"{key}-{n}"
    taken.add(unique)
    return unique


def _fail(message: str) -> int:
    print(f"course_lib.grade: {message}", file=sys.stderr)
    return CANNOT_GRADE


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.timeout <= 0 or args.jobs < 1:
        return _fail("--timeout must be positive and -j at least 1")
    if not args.solutions.is_dir():
        return _fail(f"no solutions folder at {args.solutions} (use --solutions DIR)")
    try:
        roster = read_roster(args.roster, args.lms) if args.roster else None
    except ValueError as error:
        return _fail(str(error))
    canonical, problems = load_solutions(args.solutions, args.hidden if args.hidden.is_dir() else None)
    for problem in problems:
        print(f"course_lib.grade: warning: {problem}", file=sys.stderr)
    if not canonical:
        return _fail(f"no usable solution notebook in {args.solutions}")
    if args.notebook and args.notebook not in canonical:
        return _fail(f"--notebook {args.notebook}: no such solution notebook (have: {', '.join(canonical)})")
    files, missing = find_submissions(args.submissions)
    for path in missing:
        print(f"course_lib.grade: warning: {path} does not exist", file=sys.stderr)
    if not files:
        return _fail("no submission found (give notebook files or folders of them)")
    csv_path, messages_path = args.out / "grades.csv", args.out / FILE_NAME
    try:
        for folder in (args.out, args.out / "logs", args.out / "rebuilt"):
            folder.mkdir(parents=True, exist_ok=True)
        previous = [] if args.regrade else read_rows(csv_path)
        if args.regrade or not previous:
            with open(csv_path, "w", newline="", encoding="utf-8") as f:
                csv.writer(f).writerow(COLUMNS)
        keep_messages(previous, messages_path)  # the messages of the rows kept, and nothing else
    except OSError as error:
        return _fail(f"cannot write to {args.out}: {error}")

    try:
        sandboxes, isolation = kernel_sandboxes(args, files, ROOT)
    except CannotGrade as error:
        return _fail(str(error))
    options = Options(
        timeout=args.timeout,
        threads=max(1, (os.cpu_count() or 1) // args.jobs),
        sanitize=args.sanitize if args.sanitize.is_file() else None,
        work=(args.out / "rebuilt").resolve(),
        notebook=args.notebook,
        sandboxes=sandboxes,
        memory=int(args.memory * (1 << 30)),
    )
    start, taken = time.monotonic(), set()
    done = {row.submission for row in previous}
    jobs = [(path, base, _key(student_name(path, base, canonical), path, taken)) for path, base in files]
    results = _resumed(previous, jobs)
    todo = [(path, base, key) for path, base, key in jobs if str(path) not in done]
    if len(todo) < len(jobs):
        print(
            f"course_lib.grade: {len(jobs) - len(todo)} submission(s) already in {csv_path}: skipped "
            "(--regrade to grade them again)",
            file=sys.stderr,
        )
    from tqdm import tqdm

    with (
        ThreadPoolExecutor(max_workers=args.jobs) as pool,
        tqdm(total=len(todo), desc="grading", unit="notebook", file=sys.stderr, disable=args.quiet) as bar,
    ):
        futures = [pool.submit(grade_submission, path, base, canonical, options, key) for path, base, key in todo]
        for future in as_completed(futures):
            result = future.result()
            write_log(result, args.out / "logs")  # at once: a crash later loses no log
            append_messages(result.rows, messages_path)  # before the rows: a kill between loses no row's message
            append_rows(result.rows, csv_path)  # at once, flushed to disk: a kill later loses no grade
            results.append(result)
            bar.update(1)
    total = time.monotonic() - start
    order = {str(path): n for n, (path, _, _) in enumerate(jobs)}
    results.sort(key=lambda r: (r.student, order.get(str(r.submission), len(order))))
    fresh = [r for r in results if r.seconds]
    per = sum(r.seconds for r in fresh) / len(fresh) if fresh else 0.0
    header = (
        f"{len(results)} submission(s) from {len({r.student for r in results})} student(s), graded against "
        f"`{args.solutions}` with a {args.timeout:g} s cell timeout and -j {args.jobs}: "
        f"{len(fresh)} graded in this run, {per:.1f} s per submission, {total:.0f} s in all.\n\n{isolation}"
    )
    (args.out / "summary.md").write_text(
        summary_markdown(results, header), encoding="utf-8", errors="backslashreplace"
    )  # a file name need not be UTF-8
    print(f"{header}\nwrote {csv_path}, {args.out / 'summary.md'} and {len(fresh)} log(s)")
    done, warnings = hand_back(args.out, canonical, args.lms, roster, args.feedback, ROOT / "notebooks")
    print("\n".join(done))
    for warning in warnings:
        print(f"course_lib.grade: warning: {warning}", file=sys.stderr)
    if fresh and all(_grader_failed(r) for r in fresh):
        return _fail("no submission could be graded (see the logs: did the kernel start?)")
    return 0


def _resumed(previous, jobs) -> list[Graded]:
    """The submissions already graded in an earlier run, rebuilt from their rows of grades.csv."""
    keys = {str(path): key for path, _, key in jobs}
    by_submission: dict[str, Graded] = {}
    for row in previous:
        graded = by_submission.setdefault(
            row.submission, Graded(row.student, Path(row.submission), key=keys.get(row.submission, row.student))
        )
        graded.rows.append(row)
    return list(by_submission.values())


def _grader_failed(result: Graded) -> bool:
    return bool(result.rows) and all(row.status == "grader error" for row in result.rows)


if __name__ == "__main__":
    sys.exit(main())
