"""What the website changes in a notebook's cells before Sphinx sees them (``course_lib.authoring.site``).

A page shows what its notebook stores, with four changes for a reader:

1. the test markers (``# NBVAL_CHECK_OUTPUT``) go from the code: they speak to nbval, and a reader who copies a cell
   does not want them;
2. each figure gets alt text in words: the ``title=`` the cell gives its plot, or else the first line of the
   docstring of the ``course_lib.plotting`` function it calls (myst-nb reads it from the cell's ``mystnb`` metadata);
   and a figure stored at 150 dpi with the size to show it at (``course_lib.authoring.figures``) keeps that width
   but not its height, so that the column can narrow it without squashing it;
3. an arXiv id in the prose (``arXiv 2511.20347``) becomes a link to its abstract;
4. a "Get the course" box under the title says how to run the notebook: a page, or the notebook alone, cannot run
   without the course's library, ``course_lib``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import re

import nbformat

# The comments nbval reads in a cell's source (nbval's own list: check, ignore, skip, raises, ...).
MARKER = re.compile(r"[ \t]*#[ \t]*NBVAL_[A-Z_]+[ \t]*$")
ARXIV = re.compile(r"(?<![\w/\[])arXiv[ :](\d{4}\.\d{4,5})(v\d+)?(?![\w\]])")
FIGURE_MIME = ("image/png", "image/jpeg", "image/svg+xml")


# ---- 1. the test markers ----------------------------------------------------------------------------------------


def strip_markers(source: str) -> str:
    """``source`` without nbval's markers: a line that is only a marker goes, a marker after code leaves the code."""
    kept = []
    for line in source.splitlines():
        bare = MARKER.sub("", line)
        if bare.strip() or not line.strip() or bare == line:
            kept.append(bare)
    return "\n".join(kept).strip("\n")


# ---- 2. alt text ------------------------------------------------------------------------------------------------


@functools.cache
def _plotting_summaries() -> dict[str, str]:
    """Every public function of ``course_lib.plotting``'s modules, by name: the first line of its docstring."""
    import course_lib.plotting as plotting

    summaries = {}
    for info in pkgutil.iter_modules(plotting.__path__):
        module = importlib.import_module(f"course_lib.plotting.{info.name}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            doc = inspect.getdoc(function)
            if not name.startswith("_") and doc:
                summaries[name] = _plain(doc.splitlines()[0].strip())
    return summaries


def _plain(text: str) -> str:
    """``text`` as words to read out: Sphinx's roles give each name's last part (``:func:`~course_lib.plotting.plot_x```
    reads ``plot_x``), and code marks go."""
    named = re.sub(r":\w+:`~?([^`]*?\.)?([^.`]+)`", r"\2", text)
    return re.sub(r"`{1,2}([^`]*)`{1,2}", r"\1", named)


def _title(source: str) -> str | None:
    """The last ``title="..."`` (or f-string) the cell passes, its ``{...}`` parts written as an ellipsis."""
    titles = re.findall(r"""\btitle\s*=\s*f?(["'])(.+?)\1""", source)
    if not titles:
        return None
    return re.sub(r"\{[^}]*\}", "…", titles[-1][1]).strip()


def alt_text(source: str) -> str | None:
    """Words for the figures a cell with this ``source`` draws (None when the code says nothing usable)."""
    title = _title(source)
    if title:
        return f"Figure: {title}"
    summaries = _plotting_summaries()
    called = [name for name in re.findall(r"\b(\w+)\(", source) if name in summaries]
    if called:
        return f"Figure: {summaries[called[-1]].rstrip('.')}"
    return None


def _has_figure(cell) -> bool:
    return any(mime in output.get("data", {}) for output in cell.get("outputs", []) for mime in FIGURE_MIME)


def keep_width_only(cell) -> None:
    """Drops the ``height`` a figure's output stores beside its ``width``, in place.

    Sphinx writes both into the picture's ``style``; a fixed height would squash a figure that the column
    (``max-width: 100%``) makes narrower, where the width alone lets the browser keep its proportions.
    """
    for output in cell.get("outputs", []):
        for mime in FIGURE_MIME:
            output.get("metadata", {}).get(mime, {}).pop("height", None)


# ---- 3. arXiv links ---------------------------------------------------------------------------------------------


def arxiv_links(markdown: str) -> str:
    """Each ``arXiv NNNN.NNNNN`` outside code spans and maths becomes a link to ``arxiv.org/abs/NNNN.NNNNN``."""
    # Split off code spans, fenced blocks and maths, and rewrite only the prose between them.
    parts = re.split(r"(```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]*\$)", markdown, flags=re.DOTALL)
    for i in range(0, len(parts), 2):
        parts[i] = ARXIV.sub(lambda m: f"[arXiv {m.group(1)}](https://arxiv.org/abs/{m.group(1)})", parts[i])
    return "".join(parts)


# ---- 4. the "Get the course" box --------------------------------------------------------------------------------


def get_the_course(archive: str | None, notebook: str | None = None) -> str:
    """The box, in MyST: how to get the whole course and open it in JupyterLab.

    Args:
        archive: the link to the course's zip file from this page (None: the site has none, so no download line).
        notebook: the notebook this page shows, as a path in the course (``notebooks/05_ppo.ipynb``), or None.
    """
    steps = []
    if archive is not None:
        steps.append(f"{{download}}`Download the course <{archive}>` (a zip of its repository) and unzip it;")
    else:
        steps.append("get the course's repository (a clone of it, or a copy);")
    steps.append(
        "in its folder, run `make lab`: the first run installs the course into `.venv` (Python 3.10 or later, "
        "and `make`), then JupyterLab opens;"
    )
    steps.append(f"open `{notebook}`." if notebook else "open `notebooks/00_welcome.ipynb`.")
    numbered = "\n".join(f"{n}. {step}" for n, step in enumerate(steps, start=1))
    return (
        "```{admonition} Get the course\n:class: tip get-the-course\n"
        "This page shows what the notebook stores. To run it, move its sliders and have your exercises checked, "
        "get the whole course: a notebook imports the course's library, `course_lib`, so it cannot run alone.\n\n"
        f"{numbered}\n```\n"
    )


def box_cell(archive: str | None, notebook: str | None) -> nbformat.NotebookNode:
    """The box as a markdown cell, marked so that tests find it."""
    cell = nbformat.v4.new_markdown_cell(get_the_course(archive, notebook))
    cell.metadata["course"] = {"site": "get-the-course"}
    return cell


# ---- all four on one notebook -----------------------------------------------------------------------------------


def for_the_site(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Changes 1 to 3 on ``nb``'s cells, in place; returns ``nb`` (the box is placed by the page's builder)."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = arxiv_links(cell.source)
            continue
        if cell.cell_type != "code":
            continue
        alt = alt_text(cell.source) if _has_figure(cell) else None
        cell.source = strip_markers(cell.source)
        keep_width_only(cell)
        if alt:
            cell.metadata.setdefault("mystnb", {}).setdefault("image", {})["alt"] = alt
    return nb
