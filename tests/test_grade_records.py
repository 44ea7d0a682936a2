"""The grader takes each check cell's records out of the kernel's scratch folder, as root, on the host: a folder the
student's code owns. These tests replace each level of ``scratch/records/<cell>/<file>`` with a link, to a folder of
the test and to another submission, and show that nothing outside the scratch folder is read or removed; and that
the attack does succeed when the defence (O_NOFOLLOW on every folder opened) is switched off, so the tests measure it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from course_lib.authoring.grading import nbval_report


def _host(tmp_path: Path) -> dict[str, Path]:
    """Folders standing for what the grader must never touch: another student's submission, an instructor's files."""
    classmate = tmp_path / "submissions" / "alice"
    classmate.mkdir(parents=True)
    (classmate / "00_warmup.ipynb").write_text("alice's notebook", encoding="utf-8")
    instructor = tmp_path / "instructor" / "cell_like_name"
    instructor.mkdir(parents=True)
    (instructor / "answers.npz").write_bytes(b"the instructor's file")
    return {"classmate": classmate, "instructor": instructor}


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _scratch_with_a_record(tmp_path: Path) -> Path:
    scratch = tmp_path / "scratch"
    cell = scratch / "records" / "warmup-rtg-check"
    cell.mkdir(parents=True)
    (cell / "case_0.npz").write_bytes(b"a real record")
    return scratch


@pytest.mark.parametrize("target", ["classmate", "instructor"])
def test_records_as_a_link_reads_and_removes_nothing_outside_the_scratch(tmp_path, target):
    host = _host(tmp_path)
    before = _files(tmp_path / "submissions") | _files(tmp_path / "instructor")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    os.symlink(host[target].parent, scratch / "records")
    private = tmp_path / "private"
    nbval_report.take_records(scratch, private)
    assert _files(tmp_path / "submissions") | _files(tmp_path / "instructor") == before
    assert not (private / "records").exists()  # nothing was read through the link
    assert not os.path.lexists(scratch / "records")  # the link itself is gone (it is the kernel's)


@pytest.mark.parametrize("level", ["scratch", "cell", "file"])
def test_every_level_as_a_link_is_left_unfollowed(tmp_path, level):
    host = _host(tmp_path)
    before = _files(tmp_path / "submissions") | _files(tmp_path / "instructor")
    scratch = _scratch_with_a_record(tmp_path)
    records = scratch / "records"
    if level == "scratch":  # the scratch folder itself replaced: the grader is handed a path that is now a link
        real = tmp_path / "moved"
        scratch.rename(real)
        os.symlink(host["classmate"].parent, scratch)
    elif level == "cell":  # a cell's folder replaced by a link to a folder of the host
        os.symlink(host["instructor"], records / "other-check")
    else:  # a record file replaced by a link to a host file
        os.symlink(host["instructor"] / "answers.npz", records / "warmup-rtg-check" / "case_1.npz")
    private = tmp_path / "private"
    nbval_report.take_records(scratch, private)
    assert _files(tmp_path / "submissions") | _files(tmp_path / "instructor") == before
    taken = _files(private) if private.exists() else {}
    assert b"the instructor's file" not in taken.values()
    assert "alice's notebook".encode() not in taken.values()
    if level != "scratch":  # the real record still comes out, and the links go
        assert taken == {"records/warmup-rtg-check/case_0.npz": b"a real record"}
        assert not os.path.lexists(records / "other-check")
        assert not os.path.lexists(records / "warmup-rtg-check")


def test_a_record_is_taken_and_removed(tmp_path):
    scratch = _scratch_with_a_record(tmp_path)
    nested = scratch / "records" / "warmup-rtg-check" / "deeper" / "still"
    nested.mkdir(parents=True)
    (nested / "x").write_bytes(b"x")
    private = tmp_path / "private"
    nbval_report.take_records(scratch, private)
    assert _files(private) == {"records/warmup-rtg-check/case_0.npz": b"a real record"}
    assert list((scratch / "records").iterdir()) == []


def test_a_folder_name_that_is_no_cell_is_removed_unread(tmp_path):
    scratch = _scratch_with_a_record(tmp_path)
    odd = scratch / "records" / "not a cell!"
    odd.mkdir()
    (odd / "case_0.npz").write_bytes(b"?")
    private = tmp_path / "private"
    nbval_report.take_records(scratch, private)
    assert sorted(p.name for p in (private / "records").iterdir()) == ["warmup-rtg-check"]
    assert list((scratch / "records").iterdir()) == []


def test_the_attack_succeeds_when_links_are_followed(tmp_path, monkeypatch):
    """The defence switched off (folders opened without O_NOFOLLOW, as os.scandir on a path did): the link is
    followed, the host folder is copied and deleted. So the tests above measure the defence."""
    host = _host(tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    os.symlink(host["instructor"].parent, scratch / "records")
    monkeypatch.setattr(nbval_report, "FOLDER", os.O_RDONLY | os.O_DIRECTORY)
    private = tmp_path / "private"
    nbval_report.take_records(scratch, private)
    assert not host["instructor"].exists()  # deleted through the link
    assert _files(private) == {"records/cell_like_name/answers.npz": b"the instructor's file"}


LINK_RECORDS = """\
import os, shutil
shutil.rmtree("records", ignore_errors=True)
os.symlink({target!r}, "records")
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the attack is on a grader that runs as root")
def test_a_class_graded_as_root_loses_nothing_to_a_records_link(tmp_path):
    """End to end, as root (round five's attack): one submission links its kernel's ``records`` to the
    submissions folder, then to an instructor's folder; the classmate is graded and every host file is intact."""
    import nbformat
    from test_grade import WARMUP, answer, exercise_of, save, solution_cell

    from course_lib.authoring import grade
    from course_lib.authoring.grading import report

    if not WARMUP.exists():
        pytest.skip("needs solutions/00_warmup.ipynb")
    solution = nbformat.read(WARMUP, as_version=4)
    folder, out = tmp_path / "submissions", tmp_path / "out"
    instructor = tmp_path / "instructor" / "keys"
    instructor.mkdir(parents=True)
    (instructor / "answers.txt").write_text("root-only", encoding="utf-8")
    os.chmod(tmp_path / "instructor", 0o700)
    for student in ("alice", "mallory"):
        (folder / student).mkdir(parents=True)
        nb = exercise_of(solution, WARMUP.name)
        for exercise in solution.metadata["course"]["exercises"]:
            answer(nb, solution, exercise)
        if student == "mallory":
            first, second = list(solution.metadata["course"]["exercises"])[:2]
            cell = solution_cell(nb, first)
            cell.source = LINK_RECORDS.format(target=str(folder)) + cell.source
            cell = solution_cell(nb, second)
            cell.source = LINK_RECORDS.format(target=str(instructor.parent)) + cell.source
        save(folder / student, WARMUP.name, nb)
    before = {str(p): p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    code = grade.main([str(folder), "--out", str(out), "--timeout", "60", "-j", "1", "--quiet"])
    assert code == 0
    after = {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    after |= {str(p): p.read_bytes() for p in sorted(instructor.parent.rglob("*")) if p.is_file()}
    assert after == {k: v for k, v in before.items() if k.startswith((str(folder), str(instructor.parent)))}
    rows = {(r.student, r.exercise): r.status for r in report.read_rows(out / "grades.csv")}
    assert {e: s for (who, e), s in rows.items() if who == "alice"} == {
        e: "passed" for e in solution.metadata["course"]["exercises"]
    }
