"""Notebook code fits the page: no code line of a notebook is wider than 88 characters.

88 columns show whole in the site's column at 1280 px and in a laptop's JupyterLab. The notebooks are formatted at
that width (``notebooks/ruff.toml``, ``solutions/ruff.toml``); ``python -m course_lib.authoring.rewrap`` splits the
comments, strings and docstrings the formatter leaves long (an exercise function's docstring is its library
function's word for word, ``tests/test_stubs_match_library.py``, rewrapped at 88).
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 88
NOTEBOOKS = sorted(
    path.relative_to(ROOT).as_posix()
    for folder in ("notebooks", "solutions", "exercises")
    for path in (ROOT / folder).glob("*.ipynb")
)


def too_wide(nb) -> list[str]:
    """``cell N, line M (L characters): text`` for each code line wider than :data:`WIDTH`."""
    found = []
    for n, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for m, line in enumerate(cell.source.split("\n")):
            if len(line) > WIDTH:
                found.append(f"cell {n}, line {m + 1} ({len(line)} characters): {line.strip()[:60]}")
    return found


@pytest.mark.parametrize("name", [name.removesuffix(".ipynb") for name in NOTEBOOKS])
def test_no_code_line_is_wider_than_88(name):
    path = ROOT / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    assert too_wide(nb) == []


def test_the_check_sees_a_wide_line_and_a_wide_docstring():
    wide = "x = " + "1 + " * 30 + "1"
    doc = 'def f():\n    """' + "word " * 25 + '"""\n'
    narrow = "y = 2"
    cells = [nbformat.v4.new_code_cell(source) for source in (wide, narrow, doc)]
    nb = nbformat.v4.new_notebook(cells=cells)
    assert [line.split(",")[0] for line in too_wide(nb)] == ["cell 0", "cell 2"]


def test_rewrap_splits_comments_and_strings_and_keeps_the_code():
    from course_lib.authoring.rewrap import rewrap_source

    source = (
        "x = 1  # " + "a comment that goes on " * 4 + "\n"
        "print(\n"
        '    f"{x:>5} and then some words that make this line much too long for the page, {x}"\n'
        ")"
    )
    wrapped = rewrap_source(source, width=60)
    assert max(len(line) for line in wrapped.split("\n")) <= 60
    assert ast.dump(ast.parse(wrapped)) == ast.dump(ast.parse(source))
    assert wrapped.split("\n")[0].startswith("# a comment")
    # A docstring flows into its next line, word for word.
    doc = 'def f():\n    """' + "word " * 15 + 'end.\n\n    More words.\n    """'
    flowed = rewrap_source(doc, width=40)
    assert (
        max(len(line) for line in flowed.split("\n")) <= 40 and flowed.replace('"""', " ").split().count("word") == 15
    )
    # A string alone on its line outside brackets cannot be split into two: left as it was.
    bare = "'" + "word " * 20 + "'"
    assert rewrap_source(bare, width=40) == bare
