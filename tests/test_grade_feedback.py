"""What grading hands back: the students' feedback pages and the LMS gradebook.

One class is graded once (`-j 2`, the smallest notebooks): two solution notebooks, a wrong answer, an untouched
stub, a symbolic link to a classmate's file and a file that is not a notebook. The pages must match `grades.csv`
exercise by exercise, name no other student and no path of the grader's, and come out the same when a run is
interrupted and resumed; the gradebook's totals must be the sums of the rows. The layouts, the roster and the
page's escaping are tested on rows made here, with no kernel.
"""

from __future__ import annotations

import csv
import html
import json
import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from test_grade import WARMUP, WRONG_RETURN, answer, exercise_of, save

from course_lib.authoring import grade
from course_lib.authoring.grading import feedback, feedback_pages, gradebook, report
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
    """Each student's rows of grades.csv (one submission per notebook in this class)."""
    rows: dict[str, list[Row]] = {}
    for row in report.read_rows(out / "grades.csv"):
        rows.setdefault(row.student, []).append(row)
    return rows


def test_every_student_gets_a_page_in_markdown_and_html(handed_back):
    assert handed_back["code"] == 0
    assert sorted(handed_back["md"]) == STUDENTS
    assert sorted(handed_back["html"]) == STUDENTS


def md_exercises(page: str) -> dict[str, tuple[str, str]]:
    """exercise id -> (its score line, its message) as the Markdown page shows them."""
    found = {}
    for block in page.split("\n### ")[1:]:
        heading, _, rest = block.partition("\n")
        exercise = re.search(r"`(\w+)`\)?$", heading)
        score = re.search(r"^\*\*(.+)\*\*$", rest, re.M).group(1)
        message = re.search(r"^> (.*)$", rest, re.M).group(1)
        found[exercise.group(1) if exercise else ""] = (score, message)
    return found


def html_exercises(page: str) -> dict[str, str]:
    """exercise id -> its score line, as the HTML page shows it."""
    found = {}
    for section in re.findall(r'<section class="\w+">(.*?)</section>', page, re.S):
        exercise = re.search(r"<code>(\w+)</code>\)?</h3>", section)
        score = re.search(r"<p><strong>(.+?)</strong></p>", section).group(1)
        found[exercise.group(1) if exercise else ""] = html.unescape(score)
    return found


def test_each_page_matches_grades_csv_exercise_by_exercise(handed_back):
    for student, rows in counted_rows(handed_back["out"]).items():
        shown = md_exercises(handed_back["md"][student])
        shown_html = html_exercises(handed_back["html"][student])
        assert sorted(shown) == sorted(row.exercise for row in rows), student
        for row in rows:
            score = f"{row.status}, {feedback_pages.of(row.points, row.max_points)}."
            assert shown[row.exercise][0] == score, (student, row.exercise)
            assert shown_html[row.exercise] == score, (student, row.exercise)
            assert shown[row.exercise][1] == feedback_pages.plain(feedback.student_message(row)), (student, row)
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


def test_a_resumed_run_writes_the_same_pages(handed_back):
    """Killed after some submissions: the rerun grades the rest and rewrites every page from grades.csv."""
    out = handed_back["tmp"] / "resumed"
    shutil.copytree(handed_back["out"], out, ignore=shutil.ignore_patterns("feedback", "gradebook.csv"))
    rows = report.read_rows(out / "grades.csv")
    report.write_csv([row for row in rows if row.student != "cyrus"], out / "grades.csv")  # cyrus not graded yet
    args = [*handed_back["args"]]
    args[args.index("--out") + 1] = str(out)
    assert grade.main(args) == 0
    again = {p.stem: p.read_text(encoding="utf-8") for p in (out / "feedback").glob("*.md")}
    assert again == handed_back["md"]
    assert (out / "gradebook.csv").read_text() == (handed_back["out"] / "gradebook.csv").read_text()
    quiet = handed_back["tmp"] / "quiet"
    shutil.copytree(handed_back["out"], quiet, ignore=shutil.ignore_patterns("feedback"))
    args[args.index("--out") + 1] = str(quiet)
    assert grade.main([*args, "--no-feedback", "--lms", "moodle"]) == 0
    assert not (quiet / "feedback").exists()
    assert (quiet / "gradebook.csv").read_text().splitlines()[0] == "Username,00_warmup,01_rewards"


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
