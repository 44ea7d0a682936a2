"""Every generated exercise notebook runs top to bottom, and only its stubs fail.

A student who opens an exercise notebook and runs all cells should see
NotImplementedError from the cells they are meant to fill in (and from the checks
and demos that call them), and nothing else: no import error, no broken given code.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = sorted((ROOT / "exercises").glob("*.ipynb"))


def _errors(nb):
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                yield cell, output


@pytest.mark.parametrize("path", EXERCISES, ids=[f"exercises/{p.name}" for p in EXERCISES])
def test_exercise_runs_with_only_stubs_failing(path):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=180, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    errors = list(_errors(nb))
    # CheckNotPassed (a NotImplementedError) is a demo cell refusing to run a function whose check has not passed.
    wrong = [f"cell {cell.id}: {out.ename}: {out.evalue}" for cell, out in errors
             if out.ename not in ("NotImplementedError", "CheckNotPassed")]
    assert not wrong, "errors other than NotImplementedError:\n" + "\n".join(wrong)
    failing = {cell.id for cell, _ in errors}
    checks = [c for c in nb.cells if "check" in c.metadata.get("tags", [])]
    assert checks, "an exercise notebook needs check cells"
    unfailed = [c.id for c in checks if c.id not in failing]
    assert not unfailed, f"check cells that pass on an untouched stub: {unfailed}"
