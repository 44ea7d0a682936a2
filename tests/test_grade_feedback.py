"""What grading hands back: the students' feedback pages and the LMS gradebook.

One class is graded once (`-j 2`, the smallest notebooks): two solution notebooks, a wrong answer, an untouched
stub, a symbolic link to a classmate's file and a file that is not a notebook. The pages must match `grades.csv`
exercise by exercise, show each check's message whole (`messages.jsonl`: every line of the wrong answer's), name no
other student and no path of the grader's, and come out the same when a run is interrupted and resumed; the
gradebook's totals must be the sums of the rows. The layouts, the roster, the messages' filtering and the page's
escaping are tested on rows made here, with no kernel.
"""

from __future__ import annotations

import csv
import html
import json
import os
import re
import shutil
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest
from test_grade import WARMUP, WRONG_RETURN, answer, exercise_of, save

from course_lib.authoring import grade
from course_lib.authoring.grading import feedback, feedback_pages, gradebook, messages, report, verdict
from course_lib.authoring.grading.runner import CellOutcome
from course_lib.authoring.grading.verdict import Row

ROOT = Path(__file__).resolve().parent.parent
REWARDS = ROOT / "solutions" / "01_rewards.ipynb"
# Names that occur in no message, title or section of the course, so that finding one on a page is a leak.
STUDENTS = ["ayla", "brody", "cyrus", "dario", "eliska"]


@pytest.fixture(scope="module")
def handed_back(tmp_path_factory):
    """Grade the class once; keep each page's text as first written."""
    tmp = tmp_path_factory.mktemp("handback")
    folder, out = tmp / "submissions", tmp / "out"
    folder.mkdir()
    warmup = nbformat.read(WARMUP, as_version=4)
    rewards = nbformat.read(REWARDS, as_version=4)
    save(folder, "ayla_00_warmup.ipynb", warmup)  # the solution notebook itself: every exercise passes
    save(folder, "ayla_01_rewards.ipynb", rewards)
    wrong = answer(exercise_of(warmup, "00_warmup.ipynb"), warmup, "discounted_return", WRONG_RETURN)
    save(folder, "brody_00_warmup.ipynb", answer(wrong, warmup, "reward_to_go"))
    save(folder, "cyrus_00_warmup.ipynb", exercise_of(warmup, "00_warmup.ipynb"))  # untouched stubs
    os.symlink("brody_00_warmup.ipynb", folder / "dario_00_warmup.ipynb")  # a link to a classmate's file
    (folder / "eliska_00_warmup.ipynb").write_text("{ not json", encoding="utf-8")
    args = [str(folder), "--out", str(out), "--timeout", "60", "-j", "2", "--quiet"]
    code = grade.main(args)
    pages = {p.stem: p.read_text(encoding="utf-8") for p in (out / "feedback").glob("*.md")}
    html_pages = {p.stem: p.read_text(encoding="utf-8") for p in (out / "feedback").glob("*.html")}
    return {"code": code, "out": out, "args": args, "tmp": tmp, "md": pages, "html": html_pages}


def counted_rows(out: Path) -> dict[str, list[Row]]:
    """Each student's rows of grades.csv, with their whole messages (one submission per notebook in this class)."""
    rows: dict[str, list[Row]] = {}
    for row in messages.with_messages(report.read_rows(out / "grades.csv"), out / messages.FILE_NAME):
        rows.setdefault(row.student, []).append(row)
    return rows


def test_every_student_gets_a_page_in_markdown_and_html(handed_back):
    assert handed_back["code"] == 0
    assert sorted(handed_back["md"]) == STUDENTS
    assert sorted(handed_back["html"]) == STUDENTS


def md_exercises(page: str) -> dict[str, tuple[str, str]]:
    """exercise id -> (its score line, its message's lines as written, hard breaks taken off) on a Markdown page."""
    found = {}
    for block in page.split("\n### ")[1:]:
        heading, _, rest = block.partition("\n")
        exercise = re.search(r"`(\w+)`\)?$", heading)
        score = re.search(r"^\*\*(.+)\*\*$", rest, re.M).group(1)
        quoted = re.findall(r"^> (.*)$", rest, re.M)
        message = "\n".join(line.removesuffix("\\") for line in quoted)
        found[exercise.group(1) if exercise else ""] = (score, message)
    return found


def html_exercises(page: str) -> dict[str, tuple[str, str]]:
    """exercise id -> (its score line, its message's lines), as the HTML page shows them."""
    found = {}
    for section in re.findall(r'<section class="\w+">(.*?)</section>', page, re.S):
        exercise = re.search(r"<code>(\w+)</code>\)?</h3>", section)
        score = re.search(r"<p><strong>(.+?)</strong></p>", section).group(1)
        quoted = re.search(r"<blockquote>(.*?)</blockquote>", section, re.S).group(1)
        message = "\n".join(html.unescape(re.sub(r"</?code>", "`", line)) for line in quoted.split("<br>"))
        found[exercise.group(1) if exercise else ""] = (html.unescape(score), message)
    return found


def shown_lines(row: Row, classmates=()) -> list[str]:
    """The lines of a row's message a page shows: every line, stripped, with nothing the student must not see."""
    return [line.strip() for line in feedback.student_message(row, classmates).splitlines() if line.strip()]


def test_each_page_matches_grades_csv_exercise_by_exercise(handed_back):
    for student, rows in counted_rows(handed_back["out"]).items():
        shown = md_exercises(handed_back["md"][student])
        shown_html = html_exercises(handed_back["html"][student])
        assert sorted(shown) == sorted(row.exercise for row in rows), student
        for row in rows:
            score = f"{row.status}, {feedback_pages.of(row.points, row.max_points)}."
            assert shown[row.exercise][0] == score, (student, row.exercise)
            assert shown_html[row.exercise][0] == score, (student, row.exercise)
            lines = shown_lines(row)
            assert shown[row.exercise][1] == "\n".join(feedback_pages.plain(line) for line in lines), (student, row)
            assert shown_html[row.exercise][1] == "\n".join(lines), (student, row)
    brody = md_exercises(handed_back["md"]["brody"])
    assert brody["discounted_return"][0] == "failed, 0 of 1 point."
    assert "the first reward is discounted too" in brody["discounted_return"][1]  # the named mistake and its fix
    assert brody["reward_to_go"][0] == "passed, 1 of 1 point."
    assert "section “Lectures, exercises and checks”" in handed_back["md"]["brody"]  # where to reread


def test_no_page_names_another_student_or_a_path_of_the_grader(handed_back):
    rows = counted_rows(handed_back["out"])
    assert "brody" in rows["dario"][0].message  # grades.csv names the link's target: the page must not
    assert str(handed_back["tmp"]) in rows["ayla"][0].submission
    internals = [str(handed_back["tmp"]), "/tmp/", "rebuilt", "course-grade", "prologue", "logs/", "notes"]
    for student in STUDENTS:
        for text in (handed_back["md"][student], handed_back["html"][student]):
            for other in STUDENTS:
                if other != student:
                    assert other not in text, f"{student}'s page names {other}"
            for internal in internals:
                assert internal not in text, f"{student}'s page shows {internal!r}"


def test_gradebook_totals_are_the_sums_of_the_rows(handed_back):
    rows = counted_rows(handed_back["out"])
    with open(handed_back["out"] / "gradebook.csv", encoding="utf-8") as f:
        table = list(csv.reader(f))
    header, maxima, body = table[0], table[1], table[2:]
    assert header == ["student", "00_warmup", "01_rewards", "total"]
    assert maxima == ["(max points)", "2", "4", "6"]
    assert [line[0] for line in body] == STUDENTS
    for line in body:
        student_rows = rows[line[0]]
        assert float(line[-1]) == sum(row.points for row in student_rows)
        for notebook, cell in zip(header[1:-1], line[1:-1]):
            mine = [row.points for row in student_rows if row.notebook == notebook]
            assert cell == ("" if not mine else feedback.number(sum(mine)))
    assert body[0] == ["ayla", "2", "4", "6"]


def test_a_wrong_answer_gets_every_line_of_its_check_message(handed_back):
    """grades.csv keeps the first line; messages.jsonl and both pages have every line: mistake, fix and case."""
    (wrong,) = [row for row in counted_rows(handed_back["out"])["brody"] if row.exercise == "discounted_return"]
    lines = wrong.full_message.splitlines()
    assert len(lines) >= 2 and lines[0] == wrong.message, wrong.full_message  # grades.csv: the first line, as before
    assert "the first reward is discounted too" in lines[0] and "use gamma ** t" in lines[0]  # the mistake, the fix
    assert lines[1].strip().startswith("seen on the case:")
    md_page, html_page = handed_back["md"]["brody"], handed_back["html"]["brody"]
    for line in lines:
        assert feedback_pages.plain(line.strip()) in md_page, line
        assert html.escape(line.strip()) in html_page, line
    assert md_exercises(md_page)["discounted_return"][1] == "\n".join(feedback_pages.plain(x.strip()) for x in lines)
    assert html_exercises(html_page)["discounted_return"][1] == "\n".join(x.strip() for x in lines)


def message_entries(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / messages.FILE_NAME).read_text(encoding="utf-8").splitlines()]


def test_a_resumed_run_writes_the_same_pages(handed_back):
    """Killed after some submissions: the rerun grades the rest and rewrites every page from grades.csv and
    messages.jsonl. The kill is the worst there is for the messages: cyrus's were written, his rows were not, and
    the last line was cut half-way; those stale messages, matching his rows' first lines, say STALE."""
    out = handed_back["tmp"] / "resumed"
    shutil.copytree(handed_back["out"], out, ignore=shutil.ignore_patterns("feedback", "gradebook.csv"))
    rows = report.read_rows(out / "grades.csv")
    report.write_csv([row for row in rows if row.student != "cyrus"], out / "grades.csv")  # cyrus not graded yet
    cyrus = [row for row in rows if row.student == "cyrus"]
    stale = [replace(row, full_message=f"{row.message}\nSTALE, from a grading the rows never got") for row in cyrus]
    messages.append_messages(stale, out / messages.FILE_NAME)
    with open(out / messages.FILE_NAME, "a", encoding="utf-8") as f:
        f.write('{"submission": "half-writ')
    args = [*handed_back["args"]]
    args[args.index("--out") + 1] = str(out)
    assert grade.main(args) == 0
    again = {p.stem: p.read_text(encoding="utf-8") for p in (out / "feedback").glob("*.md")}
    assert again == handed_back["md"]  # brody's whole message kept, cyrus's new one shown
    assert {p.stem: p.read_text(encoding="utf-8") for p in (out / "feedback").glob("*.html")} == handed_back["html"]
    assert (out / "gradebook.csv").read_text() == (handed_back["out"] / "gradebook.csv").read_text()
    entries = message_entries(out)
    assert "STALE" not in (out / messages.FILE_NAME).read_text(encoding="utf-8")
    keys = sorted((e["submission"], e["exercise"]) for e in entries)
    assert keys == sorted((r.submission, r.exercise) for r in report.read_rows(out / "grades.csv"))  # one per row
    first = {(e["submission"], e["exercise"]): e for e in message_entries(handed_back["out"])}
    assert all(first[(e["submission"], e["exercise"])] == e for e in entries)  # the messages of one uninterrupted run
    quiet = handed_back["tmp"] / "quiet"
    shutil.copytree(handed_back["out"], quiet, ignore=shutil.ignore_patterns("feedback"))
    args[args.index("--out") + 1] = str(quiet)
    assert grade.main([*args, "--no-feedback", "--lms", "moodle"]) == 0
    assert not (quiet / "feedback").exists()
    assert (quiet / "gradebook.csv").read_text().splitlines()[0] == "Username,00_warmup,01_rewards"


def test_a_grades_folder_without_messages_shows_each_rows_line(handed_back, capsys):
    """An older grader wrote no messages.jsonl: the pages show grades.csv's lines, and nothing says it broke."""
    out = handed_back["tmp"] / "older"
    shutil.copytree(handed_back["out"], out, ignore=shutil.ignore_patterns("feedback", messages.FILE_NAME))
    args = [*handed_back["args"]]
    args[args.index("--out") + 1] = str(out)
    assert grade.main(args) == 0  # every submission already graded: no kernel starts
    assert "warning" not in capsys.readouterr().err
    for student, rows in counted_rows(out).items():
        shown = md_exercises((out / "feedback" / f"{student}.md").read_text(encoding="utf-8"))
        for row in rows:
            assert not row.full_message
            assert shown[row.exercise][1] == "\n".join(feedback_pages.plain(line) for line in shown_lines(row))
    brody = md_exercises((out / "feedback" / "brody.md").read_text(encoding="utf-8"))["discounted_return"][1]
    assert "the first reward is discounted too" in brody and "seen on the case" not in brody


# ---- no kernel: layouts, roster, messages, escaping ----------------------------------------------------------


def row(student, notebook, exercise, points, max_points, status="passed", message="✔", submission=None):
    submission = submission or f"/subs/{student}_{notebook}.ipynb"
    return Row(student, notebook, exercise, points, max_points, status, message, "", submission)


ROWS = [
    row("ann", "00_warmup", "discounted_return", 1, 1),
    row("ann", "00_warmup", "reward_to_go", 0, 1, "failed", "reward_to_go: wrong"),
    row("ann", "00_warmup", "discounted_return", 1, 1, submission="/subs/ann/00_warmup (1).ipynb"),
    row("ann", "00_warmup", "reward_to_go", 1, 1, submission="/subs/ann/00_warmup (1).ipynb"),
    row("bo", "01_rewards", "math_answer_reward", 2, 2),
    row("bo", "01_rewards", "sort_inclusion_ordering_reward", 0, 2, "error", "KeyError in your solution cell"),
]


def test_the_best_submission_counts_and_a_missing_notebook_is_empty():
    table, unmapped, absent = gradebook.gradebook_rows(ROWS)
    assert table == [
        ["student", "00_warmup", "01_rewards", "total"],
        ["(max points)", "2", "4", "6"],
        ["ann", "2", "", "2"],
        ["bo", "", "2", "2"],
    ]
    assert unmapped == absent == []


def roster_file(tmp_path, text) -> Path:
    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_canvas_layout_is_what_its_importer_reads(tmp_path):
    """Canvas's importer: `Student`, `ID` first, `Section` last of the student columns, a `Points Possible` row."""
    roster = gradebook.read_roster(
        roster_file(tmp_path, 'submitted as,Student,ID,SIS Login ID,Section\nann,"Lee, Ann",7,alee,A\nzoe,Z,9,z,A\n'),
        "canvas",
    )
    table, unmapped, absent = gradebook.gradebook_rows(ROWS, "canvas", roster)
    assert table[0] == [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        "00_warmup",
        "01_rewards",
        "Final Points",
    ]
    assert table[1] == ["Points Possible", "", "", "", "", "2", "4", "6"]
    assert table[2:] == [["Lee, Ann", "7", "", "alee", "A", "2", "", "2"]]
    assert unmapped == ["bo"] and absent == ["zoe"]  # bo is named, and left out: Canvas would not find him


def test_moodle_layout_has_no_row_a_user_cannot_be_found_for(tmp_path):
    roster = gradebook.read_roster(roster_file(tmp_path, "submitted as,Email address\nann,ann@uni.edu\n"), "moodle")
    table, unmapped, _ = gradebook.gradebook_rows(ROWS, "moodle", roster)
    assert table == [["Email address", "00_warmup", "01_rewards"], ["ann@uni.edu", "2", ""]]
    assert unmapped == ["bo"]
    generic, _, _ = gradebook.gradebook_rows(ROWS, "generic", roster)
    assert generic[0] == ["student", "Email address", "00_warmup", "01_rewards", "total"]
    assert generic[3] == ["bo", "", "", "2", "2"]  # kept, with no id: the warning names him


@pytest.mark.parametrize(
    "text, layout, problem",
    [
        ("name,ID\nann,1\n", "generic", "expected a column 'submitted as'"),
        ("submitted as,ID\nann,1\nann,2\n", "generic", "'ann' is in the 'submitted as' column twice"),
        ("submitted as,ID\nann,1\n", "moodle", "needs one of the columns Username, ID number, Email address"),
    ],
)
def test_a_roster_that_cannot_be_used_stops_grading_before_it_starts(tmp_path, capsys, text, layout, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        gradebook.read_roster(roster_file(tmp_path, text), layout)
    code = grade.main(
        [str(tmp_path), "--out", str(tmp_path / "out"), "--roster", str(tmp_path / "roster.csv"), "--lms", layout]
    )
    assert code == grade.CANNOT_GRADE and problem in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_message_loses_paths_and_grader_internals_but_keeps_its_maths():
    leaky = row(
        "ann", "00_warmup", "x", 0, 1, "unreadable", "cannot be read (OSError: '/srv/class/bo/00_warmup.ipynb')"
    )
    assert feedback.student_message(leaky) == "cannot be read (OSError: '…')"
    maths = row("ann", "00_warmup", "x", 0, 1, "failed", "use exp(logp - logp_old), not logp / logp_old; r_t/T")
    assert feedback.student_message(maths) == maths.message
    for status in ("symlink", "grader error"):
        hidden = row("ann", "00_warmup", "x", 0, 1, status, "a symbolic link (to ../bo/00_warmup.ipynb)")
        assert "bo" not in feedback.student_message(hidden).split()


def test_pages_escape_what_a_student_or_a_check_wrote():
    rows = [row("<b>ann</b>", "00_warmup", "discounted_return", 0, 1, "failed", "gamma ** t <script>alert(1)</script>")]
    page = feedback.pages(rows, {}, {})[0]
    text = feedback_pages.page_html(page)
    assert "<script>" not in text and "&lt;script&gt;" in text and "<b>ann" not in text
    assert "gamma \\*\\* t" in feedback_pages.markdown(page)  # not bold
    assert not re.search(r"""(src|href)=|@import|url\(""", text)  # nothing loaded from anywhere


def test_every_exercise_names_a_lecture_section_that_exists():
    headings = {}
    for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        headings[path.name[:2]] = {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        exercises = nbformat.read(path, as_version=4).metadata["course"]["exercises"]
        for exercise, info in exercises.items():
            reread = info.get("reread", {})
            assert reread.get("section") in headings.get(reread.get("chapter"), set()), (path.name, exercise, reread)


def test_a_whole_message_loses_a_scratch_path_and_a_classmates_name():
    """A message's later lines are filtered as its first: a kernel's scratch path, a classmate's file and name."""
    first = "discounted_return: the first reward is discounted too: use gamma ** t with t from 0"
    whole = (
        f"{first}\n  seen on the case: one episode of 5 steps\n"
        "  your function read /tmp/course-grade-3f/scratch/cache.pt and ../Brody/brody_00_warmup.ipynb (brody's)"
    )
    leaky = replace(row("ann", "00_warmup", "discounted_return", 0, 1, "failed", first), full_message=whole)
    class_rows = [leaky, row("brody", "00_warmup", "discounted_return", 1, 1), row("bo", "00_warmup", "x", 1, 1)]
    assert "brody" in feedback.student_message(leaky).lower()  # the defence off: the name is there to leak
    shown = feedback.student_message(leaky, ["brody", "bo"])
    assert shown.splitlines()[:2] == whole.splitlines()[:2]  # every line kept, the mistake and its fix first
    assert "/tmp/" not in shown and "scratch" not in shown and "brody" not in shown.lower()
    assert shown.splitlines()[2] == "  your function read … and ../…/…_00_warmup.ipynb (…'s)"
    page = feedback.pages(class_rows, {}, {})[0]
    for text in (feedback_pages.markdown(page), feedback_pages.page_html(page)):
        assert "seen on the case: one episode of 5 steps" in text
        assert "/tmp/" not in text and "brody" not in text.lower()
    maths = replace(leaky, full_message=f"{first}\n  gamma ** t, A_t, k = 3, bootstrapping")
    assert feedback.student_message(maths, ["t", "k", "A", "boot"]) == maths.full_message  # short names and parts


def test_judge_keeps_a_checks_whole_message_and_a_hidden_checks_first_line():
    clean = verdict.sanitizer(ROOT / "tests" / "nbval_sanitize.cfg")
    evalue = "f: the first reward is discounted too\n  seen on the case: /tmp/k/x.pt, 2.5 s\n"
    check = verdict.judge("check", CellOutcome("error", "AssertionError", evalue), "T", verdict.Options(), clean)
    assert check == ("failed", "f: the first reward is discounted too\n  seen on the case: TMPPATH, TIME")
    hidden = verdict.judge("hidden", CellOutcome("error", "AssertionError", evalue), "T", verdict.Options(), clean)
    assert hidden == ("failed", "hidden check: f: the first reward is discounted too")  # the hidden case stays hidden


def test_a_resume_keeps_only_the_messages_of_the_rows_it_keeps(tmp_path):
    """The kill between a submission's messages and its rows, with the last line cut: without the rewrite at the
    start of the resumed run, the regraded submission's new message is lost in the cut line and the stale one shows."""
    old = row("ann", "00_warmup", "discounted_return", 0, 1, "failed", "wrong")
    kept = row("bo", "00_warmup", "discounted_return", 0, 1, "failed", "wrong")
    stale, new = replace(old, full_message="wrong\nSTALE"), replace(old, full_message="wrong\nnew")
    for defence in (False, True):
        path = tmp_path / f"{defence}.jsonl"
        messages.append_messages([replace(kept, full_message="wrong\nkept")], path)
        messages.append_messages([stale], path)
        with open(path, "a", encoding="utf-8") as f:
            f.write('{"submission": "cut')
        if defence:
            messages.keep_messages([kept], path)  # what grade.main does before it grades ann again
        messages.append_messages([new], path)
        rows = messages.with_messages([kept, old], path)
        assert rows[0].full_message == "wrong\nkept"
        assert rows[1].full_message == ("wrong\nnew" if defence else "wrong\nSTALE"), defence
    other = replace(old, status="error", message="NameError")  # a row from another grading: its one line only
    assert messages.with_messages([other], tmp_path / "True.jsonl")[0].full_message == ""
    assert messages.with_messages([old], tmp_path / "missing.jsonl")[0].full_message == ""
