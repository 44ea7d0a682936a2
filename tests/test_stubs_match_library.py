"""Every exercise function has the signature and the docstring of the library function it reproduces.

A student's stub and the reference are one function written twice: when the library gains an
argument (``clip_eps_high``) or a docstring changes, the exercise must follow, or the check
would test what the stub never asked for. Functions an exercise defines that the library does
not hold (a table by hand, a helper) are skipped.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import nbformat
import pytest

import course_lib

ROOT = Path(__file__).resolve().parent.parent
SKIP_PACKAGES = {"course_lib.authoring", "course_lib.checks", "course_lib.plotting"}


def _library_functions() -> dict[str, list]:
    """Every public function of the library, by name (maths, tasks, trainers and lecture modules).

    A name may be defined in several modules (``completion_mask`` in ``tiny_lm`` and ``hf.loop``):
    all of them are kept, and the exercise must reproduce one.
    """
    found = {}
    for info in pkgutil.walk_packages(course_lib.__path__, "course_lib."):
        if any(info.name == p or info.name.startswith(p + ".") for p in SKIP_PACKAGES) or info.name.endswith(
            "__main__"
        ):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if not name.startswith("_") and inspect.isfunction(obj) and obj.__module__ == info.name:
                found.setdefault(name, []).append(obj)
    return found


def _exercise_functions():
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type != "code" or "solution" not in cell.metadata.get("tags", []):
                continue
            for node in ast.parse(cell.source).body:
                if isinstance(node, ast.FunctionDef):
                    yield path.name, node


LIBRARY = _library_functions()
EXERCISES = [(nb, node) for nb, node in _exercise_functions() if node.name in LIBRARY]


def _signature_of(node: ast.FunctionDef) -> str:
    args = ast.unparse(node.args)
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    return f"({args}){returns}"


def _library_signature(fn) -> str:
    node = ast.parse(inspect.getsource(fn).lstrip()).body[0]
    return _signature_of(node)


def _words(doc: str | None) -> list[str]:
    """A docstring's words in order, without the rules of its tables."""
    return [word for word in (doc or "").split() if set(word) != {"="}]


def test_exercises_reproduce_library_functions():
    assert len(EXERCISES) >= 12, [node.name for _, node in EXERCISES]


@pytest.mark.parametrize("notebook, node", EXERCISES, ids=[f"{nb}-{node.name}" for nb, node in EXERCISES])
def test_stub_matches_library(notebook, node):
    candidates = LIBRARY[node.name]
    # The one with the same signature, if any (else the first, for the message).
    fn = next((f for f in candidates if _signature_of(node) == _library_signature(f)), candidates[0])
    assert _signature_of(node) == _library_signature(fn), (
        f"{notebook}: {node.name} has the signature {_signature_of(node)}, the library's "
        f"{fn.__module__}.{node.name} has {_library_signature(fn)}"
    )
    # Word for word, not line for line: the notebooks are written at 88 columns, the library at 120 (a table's rules
    # of "=" are as wide as its columns, so they are left out).
    stub_doc, library_doc = _words(ast.get_docstring(node)), _words(inspect.getdoc(fn))
    assert stub_doc == library_doc, (
        f"{notebook}: the docstring of {node.name} differs from {fn.__module__}.{node.name}'s"
    )
