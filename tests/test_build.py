"""`python -m course_lib.build`: one source (solutions/) for the student notebooks (exercises/)."""

import shutil
from pathlib import Path

import nbformat
import pytest

from course_lib.authoring import build

ROOT = Path(__file__).resolve().parent.parent


def _solution_notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    solution = nbformat.v4.new_code_cell(
        "def double(x):\n"
        '    """Twice x."""\n'
        "    ### BEGIN SOLUTION\n"
        "    y = x * 2\n"
        "    return y\n"
        "    ### END SOLUTION\n",
        id="double-solution",
    )
    solution.metadata = {"tags": ["solution"], "course": {"exercise": "double"}}
    solution.outputs = [nbformat.v4.new_output("stream", text="hello\n")]
    solution.execution_count = 3
    check = nbformat.v4.new_code_cell("assert double(2) == 4", id="double-check")
    check.metadata = {"tags": ["check"], "course": {"exercise": "double"}}
    nb.cells = [nbformat.v4.new_markdown_cell("# Doubling", id="intro"), solution, check]
    return nb


def test_strip_solutions_keeps_indentation_and_surroundings():
    source = "def f(x):\n    a = 1\n    ### BEGIN SOLUTION\n    return x + a\n    ### END SOLUTION\n# after"
    stripped = build.strip_solutions(source, "f")
    assert stripped.splitlines() == [
        "def f(x):",
        "    a = 1",
        "    raise NotImplementedError(",  # the notebooks' 88 columns: the stub on four lines
        '        "Exercise f: write your solution here, "',
        '        "then run the check cell below."',
        "    )",
        "# after",
    ]


def test_strip_solutions_handles_several_regions_and_top_level():
    source = "### BEGIN SOLUTION\nx = 1\n### END SOLUTION\ny = 2\n  ### BEGIN SOLUTION\n  z = 3\n  ### END SOLUTION"
    lines = build.strip_solutions(source).splitlines()
    stubs = [i for i, line in enumerate(lines) if "raise NotImplementedError(" in line]
    assert len(stubs) == 2 and "x = 1" not in lines and "  z = 3" not in lines
    assert lines[stubs[0]].startswith("raise NotImplementedError(")
    assert stubs[0] < lines.index("y = 2") < stubs[1]
    assert lines[stubs[1]].startswith("  raise NotImplementedError(")


@pytest.mark.parametrize(
    "source, problem",
    [
        ("### BEGIN SOLUTION\nx = 1", "no matching"),
        ("x = 1\n### END SOLUTION", "never opened"),
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "inside another"),
    ],
)
def test_unbalanced_markers_raise(source, problem):
    with pytest.raises(ValueError, match=problem):
        build.strip_solutions(source)


def test_exercise_notebook_clears_outputs_and_adds_notice():
    solution = _solution_notebook()
    exercise = build.exercise_notebook(solution, "99_double.ipynb")
    assert exercise.cells[0].id == build.NOTICE_ID
    assert "generated" in exercise.cells[0].source and "99_double.ipynb" in exercise.cells[0].source
    code = exercise.cells[2]
    assert "NotImplementedError" in code.source and "x * 2" not in code.source
    assert code.outputs == [] and code.execution_count is None
    assert code.metadata["tags"] == ["solution"], "tags and exercise metadata survive for grading"
    assert exercise.cells[3].source == "assert double(2) == 4", "check cells are kept verbatim"
    assert solution.cells[1].outputs, "the solution notebook object is left alone"


def test_generated_stub_raises_not_implemented():
    exercise = build.exercise_notebook(_solution_notebook(), "99_double.ipynb")
    namespace = {}
    exec(exercise.cells[2].source, namespace)
    with pytest.raises(NotImplementedError, match="double"):
        namespace["double"](2)


def test_build_writes_then_check_passes_and_detects_drift(tmp_path, capsys):
    (tmp_path / "solutions").mkdir()
    nbformat.write(_solution_notebook(), tmp_path / "solutions" / "99_double.ipynb")
    assert build.main(["--root", str(tmp_path), "--check"]) == 1, "missing exercise is drift"
    assert build.main(["--root", str(tmp_path)]) == 0
    assert build.main(["--root", str(tmp_path), "--check"]) == 0
    target = tmp_path / "exercises" / "99_double.ipynb"
    target.write_text(target.read_text().replace("Doubling", "Tripling"))
    assert build.main(["--root", str(tmp_path), "--check"]) == 1, "a hand edit is drift"
    build.main(["--root", str(tmp_path)])
    (tmp_path / "exercises" / "00_orphan.ipynb").write_text(target.read_text())
    assert build.main(["--root", str(tmp_path), "--check"]) == 1, "an exercise without a source is drift"
    build.main(["--root", str(tmp_path)])
    assert not (tmp_path / "exercises" / "00_orphan.ipynb").exists()
    assert "out of date" in capsys.readouterr().err


def test_repository_exercises_are_up_to_date(tmp_path):
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    shutil.copytree(ROOT / "exercises", tmp_path / "exercises")
    assert build.build(tmp_path, check=True) == [], "run `python -m course_lib.build` and commit exercises/"


def test_every_solution_cell_has_markers_and_every_exercise_a_check():
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        declared = set(nb.metadata.get("course", {}).get("exercises", {}))
        solved, checked = set(), set()
        for cell in nb.cells:
            tags = cell.metadata.get("tags", [])
            exercise = cell.metadata.get("course", {}).get("exercise")
            if "solution" in tags:
                assert "### BEGIN SOLUTION" in cell.source, f"{path.name}: solution cell {cell.id} has no markers"
                solved.add(exercise)
            if "check" in tags:
                checked.add(exercise)
        assert declared, f"{path.name}: metadata.course.exercises is empty"
        assert solved == declared, f"{path.name}: solution cells {solved} vs declared exercises {declared}"
        assert checked == declared, f"{path.name}: check cells {checked} vs declared exercises {declared}"


def test_executing_stores_each_run_of_prints_in_one_piece():
    """How the kernel's messages split a cell's prints depends on the machine's load; the stored text does not."""
    stream = nbformat.v4.new_output
    outputs = [
        stream("stream", name="stdout", text="a\n"),
        stream("stream", name="stdout", text="b\n"),
        stream("stream", name="stderr", text="warning\n"),
        stream("stream", name="stdout", text="c\n"),
        stream("display_data", data={"text/plain": "figure"}),
        stream("stream", name="stdout", text="d\n"),
        stream("stream", name="stdout", text="e\n"),
    ]
    merged = build.coalesce_streams(outputs)
    assert [(o.output_type, o.get("name"), o.get("text")) for o in merged] == [
        ("stream", "stdout", "a\nb\n"),
        ("stream", "stderr", "warning\n"),
        ("stream", "stdout", "c\n"),
        ("display_data", None, None),
        ("stream", "stdout", "d\ne\n"),
    ]
