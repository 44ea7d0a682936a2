"""Every generated exercise notebook runs top to bottom, and only its stubs fail.

A student who opens an exercise notebook and runs all cells should see
NotImplementedError from the cells they are meant to fill in (and from the checks
and demos that call them), and nothing else: no import error, no broken given code.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync

from course_lib.authoring.notebook_client import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = sorted((ROOT / "exercises").glob("*.ipynb"))


def _errors(nb):
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                yield cell, output


@pytest.fixture(scope="module")
def kernel():
    """One kernel for all the exercise notebooks: starting a kernel and importing torch cost more than most of these
    notebooks' own cells. Before each notebook the kernel forgets every name (``%reset -f``), so a notebook that lacks
    an import still fails as in a fresh kernel; what stays is what a student's kernel would keep too on a second run
    (imported modules, torch's thread count)."""
    km = AsyncKernelManager(kernel_name="python3")  # started by the first notebook's client, in exercises/
    yield km
    if km.has_kernel:
        run_sync(km.shutdown_kernel)(now=True)


@pytest.mark.parametrize("path", EXERCISES, ids=[f"exercises/{p.name}" for p in EXERCISES])
def test_exercise_runs_with_only_stubs_failing(path, kernel):
    nb = nbformat.read(path, as_version=4)
    if kernel.has_kernel and not run_sync(kernel.is_alive)():
        run_sync(kernel.restart_kernel)(now=True)  # a notebook before this one stopped it
    nb.cells.insert(0, nbformat.v4.new_code_cell("%reset -f"))  # added: forget the names of the notebook before
    client = NotebookClient(
        nb, km=kernel, timeout=180, allow_errors=True, resources={"metadata": {"path": str(path.parent)}}
    )
    try:
        client.execute()  # the first notebook starts the kernel; a client that did not create it leaves it running
    finally:
        if client.kc is not None:
            client.kc.stop_channels()
    errors = list(_errors(nb))
    # CheckNotPassed (a NotImplementedError) is a demo cell refusing to run a function whose check has not passed.
    wrong = [
        f"cell {cell.id}: {out.ename}: {out.evalue}"
        for cell, out in errors
        if out.ename not in ("NotImplementedError", "CheckNotPassed")
    ]
    assert not wrong, "errors other than NotImplementedError:\n" + "\n".join(wrong)
    failing = {cell.id for cell, _ in errors}
    checks = [c for c in nb.cells if "check" in c.metadata.get("tags", [])]
    assert checks, "an exercise notebook needs check cells"
    unfailed = [c.id for c in checks if c.id not in failing]
    assert not unfailed, f"check cells that pass on an untouched stub: {unfailed}"
