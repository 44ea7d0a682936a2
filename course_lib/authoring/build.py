"""Build the student notebooks in ``exercises/`` from the authored ``solutions/``.

One source, two notebooks: an author writes ``solutions/NN_name.ipynb`` with each
solution between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` lines. This
command writes ``exercises/NN_name.ipynb`` where each such region is replaced by
``raise NotImplementedError(...)`` at the same indentation, every output is
cleared, and a first cell says the file is generated.

Usage::

    python -m course_lib.build            # write exercises/ from solutions/
    python -m course_lib.build --check    # exit 1 if exercises/ is out of date
    python -m course_lib.build --execute solutions/00_warmup.ipynb   # store outputs (authors)
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
BEGIN = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION\b.*$")
END = re.compile(r"^[ \t]*### END SOLUTION\b.*$")
NOTICE_ID = "generated-notice"
STUB_WIDTH = 88  # the notebooks' width (notebooks/ruff.toml): a stub wider than it is written on four lines
KERNELSPEC = {"name": "course-grpo", "display_name": "Python 3 (GRPO course)", "language": "python"}


def strip_solutions(source: str, exercise: str | None = None) -> str:
    """Replace every marked solution region of a cell's source by a stub.

    >>> print(strip_solutions("def f(x):\\n    ### BEGIN SOLUTION\\n    return x\\n    ### END SOLUTION"))
    def f(x):
        raise NotImplementedError(
            "Exercise: write your solution here, "
            "then run the check cell below."
        )
    """
    label = f"Exercise {exercise}" if exercise else "Exercise"
    out, inside = [], False
    for number, line in enumerate(source.splitlines(), start=1):
        begin = BEGIN.match(line)
        if begin:
            if inside:
                raise ValueError(f"source: line {number} opens a solution region inside another one")
            inside = True
            out += _stub(begin.group("indent"), label)
        elif END.match(line):
            if not inside:
                raise ValueError(f"source: line {number} closes a solution region that was never opened")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("source: a '### BEGIN SOLUTION' has no matching '### END SOLUTION'")
    return "\n".join(out)


def _stub(indent: str, label: str) -> list[str]:
    """The lines that stand for a solution region: one line if it fits in :data:`STUB_WIDTH`, else four."""
    one_line = f'{indent}raise NotImplementedError("{label}: write your solution here, then run the check cell below.")'
    if len(one_line) <= STUB_WIDTH:
        return [one_line]
    return [
        f"{indent}raise NotImplementedError(",
        f'{indent}    "{label}: write your solution here, "',
        f'{indent}    "then run the check cell below."',
        f"{indent})",
    ]


def exercise_notebook(solution: nbformat.NotebookNode, source_name: str) -> nbformat.NotebookNode:
    """The student notebook for one solution notebook (a new object; the input is left alone)."""
    nb = copy.deepcopy(solution)
    for cell in nb.cells:
        if cell.cell_type == "code":
            exercise = cell.metadata.get("course", {}).get("exercise")
            cell.source = strip_solutions(cell.source, exercise)
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("execution", None)
    notice = nbformat.v4.new_markdown_cell(
        f"*This notebook is generated from `solutions/{source_name}` by `python -m course_lib.build`: "
        "course authors edit the solution notebook, never this file.*\n\n"
        "**Students:** each cell that raises `NotImplementedError` is yours to fill in; "
        "the check cell below it tells you whether your code is right and, if not, what is wrong.",
        id=NOTICE_ID,
    )
    notice.metadata["course"] = {"generated": True}
    nb.cells.insert(0, notice)
    nb.metadata["course"] = {**nb.metadata.get("course", {}), "generated_from": f"solutions/{source_name}"}
    for exercise in nb.metadata["course"].get("exercises", {}).values():
        exercise.pop("allowed", None)  # the grader's (course_lib code the solution may call), not the students'
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    """The exact text written to disk (stable, so --check can compare strings)."""
    return nbformat.writes(nb, version=4) + "\n"


def build(root: Path = ROOT, check: bool = False) -> list[str]:
    """Write (or, with ``check``, compare) every exercise notebook; return the names out of date."""
    solutions, exercises = root / "solutions", root / "exercises"
    exercises.mkdir(exist_ok=True)
    stale = []
    expected_names = set()
    for path in sorted(solutions.glob("*.ipynb")):
        expected_names.add(path.name)
        text = render(exercise_notebook(nbformat.read(path, as_version=4), path.name))
        target = exercises / path.name
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            stale.append(path.name)
            if not check:
                target.write_text(text, encoding="utf-8")
    for extra in sorted(exercises.glob("*.ipynb")):
        if extra.name not in expected_names:
            stale.append(f"{extra.name} (has no solutions/ source)")
            if not check:
                extra.unlink()
    return stale


def coalesce_streams(outputs: list) -> list:
    """``outputs`` with each run of prints to one stream as one output: a cell's text is stored in one piece,
    however the kernel's messages split it (the busier the machine, the more pieces), so that re-executing a
    notebook changes no output that did not change."""
    merged = []
    for output in outputs:
        previous = merged[-1] if merged else None
        same_stream = previous is not None and previous.output_type == "stream" and output.output_type == "stream"
        if same_stream and previous.name == output.name:
            previous.text += output.text
        else:
            merged.append(output)
    return merged


def execute_in_place(path: Path, timeout: int = 300) -> None:
    """Run a notebook top to bottom in its own folder and store its outputs (for authors).

    The kernel stores its figures for the web (``course_lib.authoring.figures``: 150 dpi, shown at their own size).
    """
    from jupyter_client.manager import KernelManager

    from course_lib.authoring.figures import KERNEL_SETUP
    from course_lib.authoring.notebook_client import NotebookClient

    KernelManager.transport_encryption.default_value = "auto"  # CurveZMQ keys: no "running over TCP" warning
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        extra_arguments=[f"--IPKernelApp.exec_lines={KERNEL_SETUP}"],
    )
    client.execute()
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = coalesce_streams(cell.outputs)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nbformat.write(nb, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib.build", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if exercises/ is out of date; write nothing")
    parser.add_argument("--execute", nargs="+", metavar="NOTEBOOK", help="run notebooks in place, storing outputs")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.execute:
        for name in args.execute:
            execute_in_place(Path(name).resolve())
            print(f"executed {name}")
    stale = build(args.root, check=args.check)
    if args.check:
        if stale:
            print("exercises/ is out of date with solutions/: " + ", ".join(stale), file=sys.stderr)
            print("run `python -m course_lib.build` and commit the result", file=sys.stderr)
            return 1
        print("exercises/ is up to date with solutions/")
        return 0
    print(f"wrote {len(stale)} exercise notebook(s)" + (": " + ", ".join(stale) if stale else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
