"""``python -m course_lib.authoring.site``: the course as a static website, to read before installing anything.

``make site`` runs it. No notebook is executed: each page shows the outputs its notebook stores, the ones nbval
checks. Two steps:

1. **Stage** the pages in ``_build/site-src/``: the landing page (the README's opening, its chapter table with links,
   how to run the course), one page per lecture notebook (``notebooks/``) and per exercise notebook (``exercises/``:
   the stubs, never ``solutions/``), each with a link to download the notebook itself, then a page for instructors
   (the README's "For instructors" and ``docs/grading.md``) and one for contributors (``CONTRIBUTING.md``, then
   ``docs/design.md``). Chapters
   come in the order of the chapter list in ``course_lib/__init__.py``, each lecture followed by its exercises; a
   notebook whose chapter is not in the list, or a listed chapter without a lecture notebook, stops the build.
   A widget cannot move without a kernel, so each one is replaced by what it stored: a slider's picture (the
   ``ipywidgets.Image`` in the notebook's widget state) under one line saying that it moves in JupyterLab, a
   progress bar's last state as a line of text.
2. **Build** ``_build/site/`` with Sphinx, myst-nb and the book theme (configured in ``docs/site/conf.py``). MathJax,
   the theme's fonts and scripts are copied into the site: no page requests anything from another host.

Usage::

    python -m course_lib.authoring.site              # build _build/site/, then open _build/site/index.html
    python -m course_lib.authoring.site --out DIR    # build elsewhere (the staging and caches go beside DIR)
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_lib.authoring.site_cells import box_cell, for_the_site, get_the_course
from course_lib.authoring.site_widgets import WIDGET_STATE, static_outputs

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "docs" / "site"  # conf.py and the site's stylesheet
OUT = ROOT / "_build" / "site"
# The repository's Markdown files that are pages of the site: a link to one of them leads to its page.
PAGE_OF = {
    "README.md": "index.md",
    "docs/grading.md": "grading.md",
    "CONTRIBUTING.md": "contributors.md",
    "docs/design.md": "design.md",
}
# What each page's download link says after "Download NN_name.ipynb".
LECTURE_DOWNLOAD = "to run it in JupyterLab, where its sliders move."
EXERCISES_DOWNLOAD = (
    "and fill in its stubs in JupyterLab: under each one, a check cell says whether your code is right."
)
ARCHIVE = "grpo-course.zip"  # the whole course, as committed, for the "Get the course" box


# ---- the chapters, in the order of course_lib/__init__.py --------------------------------------------------------


@dataclass(frozen=True)
class Chapter:
    """One chapter's notebooks: ``notebooks/NN_name.ipynb`` and, when it has one, ``exercises/NN_name.ipynb``."""

    number: str
    lecture: Path
    exercises: Path | None


def chapter_numbers(root: Path = ROOT) -> list[str]:
    """The chapters' numbers in the order of the chapter list (``- 00 welcome ...``) in ``course_lib``'s docstring."""
    docstring = ast.get_docstring(ast.parse((root / "course_lib" / "__init__.py").read_text())) or ""
    return re.findall(r"^- (\d\d) ", docstring, flags=re.MULTILINE)


def _by_number(folder: Path) -> dict[str, Path]:
    """The notebooks ``NN_name.ipynb`` of ``folder``, by chapter number."""
    found: dict[str, Path] = {}
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        number = path.name[:2]
        if number in found:
            raise ValueError(f"{folder.name}/: two notebooks for chapter {number}: {found[number].name}, {path.name}")
        found[number] = path
    return found


def chapters(root: Path = ROOT) -> list[Chapter]:
    """Every chapter's notebooks in reading order; ``ValueError`` when the notebooks and the chapter list differ."""
    numbers = chapter_numbers(root)
    lectures, exercises = _by_number(root / "notebooks"), _by_number(root / "exercises")
    unlisted = sorted((set(lectures) | set(exercises)) - set(numbers))
    if unlisted:
        raise ValueError(f"notebooks of chapters {unlisted} are not in the chapter list of course_lib/__init__.py")
    missing = [number for number in numbers if number not in lectures]
    if missing:
        raise ValueError(f"chapters {missing} of course_lib/__init__.py's list have no notebooks/NN_*.ipynb")
    return [Chapter(number, lectures[number], exercises.get(number)) for number in numbers]


# ---- the pages --------------------------------------------------------------------------------------------------


def title(nb: nbformat.NotebookNode) -> str:
    """The first ``# `` heading of a notebook's markdown, as plain text."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return re.sub(r"[*_`]", "", line[2:]).strip()
    return "Untitled"


def toctree(entries: list[str], caption: str | None = None) -> str:
    """A hidden Sphinx toctree: the sidebar's entries and the order of the pages' previous and next links."""
    options = ":hidden:\n" + (f":caption: {caption}\n" if caption else "")
    return "```{toctree}\n" + options + "\n" + "\n".join(entries) + "\n```\n"


def notebook_page(
    path: Path, page: Path, download: str, children: list[str], archive: Path | None = None, root: Path = ROOT
) -> nbformat.NotebookNode:
    """The notebook at ``path`` as the page ``page``: widgets replaced, a download line and the box under its title.

    ``archive`` is the staged zip of the course (None: there is none); ``site_cells`` says what else changes.
    """
    nb = nbformat.read(path, as_version=4)
    # The "generated from solutions/, do not edit" notice speaks to authors; the download line speaks to students.
    nb.cells = [cell for cell in nb.cells if not cell.metadata.get("course", {}).get("generated")]
    state = nb.metadata.pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [new for output in cell.outputs for new in static_outputs(output, state)]
    for_the_site(nb)
    link = os.path.relpath(path, page.parent).replace(os.sep, "/")
    line = nbformat.v4.new_markdown_cell(f"{{download}}`Download {path.name} <{link}>` {download}")
    line.metadata["course"] = {"site": "download"}
    archive_link = None if archive is None else os.path.relpath(archive, page.parent).replace(os.sep, "/")
    box = box_cell(archive_link, path.relative_to(root).as_posix())
    titled = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown" and "\n# " in "\n" + cell.source]
    at = titled[0] + 1 if titled else 0
    nb.cells[at:at] = [line, box]
    if children:
        nb.cells.append(nbformat.v4.new_markdown_cell(toctree(children)))
    return nb


def section(markdown: str, heading: str) -> str:
    """The section of ``markdown`` that starts at the line ``heading``, up to the next heading as high as it."""
    lines = markdown.splitlines()
    if heading not in lines:
        raise ValueError(f"heading: no line {heading!r} in the page the site takes it from")
    start = lines.index(heading)
    level = len(heading) - len(heading.lstrip("#"))
    end = len(lines)
    for i in range(start + 1, len(lines)):
        if re.match(rf"#{{1,{level}}} ", lines[i]) and _outside_code(lines, i):
            end = i
            break
    return "\n".join(lines[start:end]).strip() + "\n"


def _outside_code(lines: list[str], index: int) -> bool:
    """Whether line ``index`` sits outside every fenced code block."""
    return sum(line.startswith("```") for line in lines[:index]) % 2 == 0


def shift_headings(markdown: str, top: int = 1) -> str:
    """Moves every heading (outside code blocks) up or down so that the highest one has ``top`` hashes."""
    lines = markdown.splitlines()
    headings = [i for i, line in enumerate(lines) if re.match(r"#+ ", line) and _outside_code(lines, i)]
    if not headings:
        return markdown
    shift = top - min(len(lines[i]) - len(lines[i].lstrip("#")) for i in headings)
    for i in headings:
        level = len(lines[i]) - len(lines[i].lstrip("#"))
        lines[i] = "#" * (level + shift) + lines[i][level:]
    return "\n".join(lines) + "\n"


def site_links(markdown: str, source: Path, root: Path, staged: Path) -> str:
    """The links and images of ``markdown`` (the text of the file ``source``) made to work from the staged pages in
    ``staged``: a link to a file that has a page on the site (``PAGE_OF``) leads to that page, an image points at the
    repository's file, and a link to any other file of the repository, which the site does not hold, keeps only its
    text. Web addresses and anchors are left as they are."""

    def rewrite(match: re.Match) -> str:
        bang, text, target = match.groups()
        if re.match(r"[a-z]+:|#", target):
            return match.group(0)
        path, _, anchor = target.partition("#")
        file = (source.parent / path).resolve()
        if bang and file.is_file():
            return f"![{text}]({os.path.relpath(file, staged)})"
        key = file.relative_to(root.resolve()).as_posix() if file.is_relative_to(root.resolve()) else None
        if not bang and key in PAGE_OF:
            return f"[{text}]({PAGE_OF[key]}{'#' + anchor if anchor else ''})"
        return text

    return re.sub(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)", rewrite, markdown)


def _readme_rows(readme: str) -> dict[str, list[str]]:
    """The README's chapter table: number -> its cells (lecture, exercises, library)."""
    rows = {}
    for line in section(readme, "## Chapters").splitlines():
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) >= 3 and re.fullmatch(r"\d\d", cells[0]):
            rows[cells[0]] = cells[1:]
    return rows


def landing_page(readme: str, pages: list[tuple[Chapter, str, str | None]], archive: str | None = None) -> str:
    """The landing page: the README's opening, the chapters with links, how to run the course and who it is for.

    ``pages`` holds, for each chapter, its lecture's title and its exercises' title (None without exercises);
    ``archive`` links the course's zip from the landing page (None: the site has none)."""
    opening = readme.split("\n## ", 1)[0].strip()
    rows = _readme_rows(readme)
    table = ["| # | lecture | exercises |", "|---|---|---|"]
    for chapter, lecture_title, exercises_title in pages:
        lecture_text, exercises_text = (rows.get(chapter.number, []) + ["", ""])[:2]
        name, _, details = (lecture_text or lecture_title).partition(": ")
        lecture = f"[{name}](lectures/{chapter.lecture.name})" + (f": {details}" if details else "")
        exercises = ""
        if chapter.exercises is not None:
            exercises = f"[{exercises_text or exercises_title}](exercises/{chapter.exercises.name})"
        table.append(f"| {chapter.number} | {lecture} | {exercises} |")
    # What the README says around its table (the table itself is the one above, with links).
    around_table = [line for line in section(readme, "## Chapters").splitlines()[1:] if not line.startswith("|")]
    entries = []
    for chapter, lecture_title, _ in pages:
        short = lecture_title.split(": ")[0]  # the sidebar's label: "08 · Capstone", the page keeps its whole title
        label = short if short.startswith(chapter.number) else f"{chapter.number} · {short}"
        entries.append(f"{label} <lectures/{chapter.lecture.stem}>")
    return "\n\n".join(
        [
            opening,
            "This site shows each lecture notebook with the outputs and figures it stores, and each exercise notebook "
            "as a student receives it. To run them, move the sliders and have your functions checked, download a "
            "notebook from its page, or get the course and run `make lab`.",
            get_the_course(archive),
            "## Chapters",
            "\n".join(table),
            "\n".join(around_table).strip(),
            section(readme, "## The two commands").strip(),
            section(readme, "## For students").strip(),
            "## For instructors and contributors",
            "- [For instructors](instructors.md): grading a class with one command, hidden checks, authoring "
            "exercises; [the grading reference](grading.md).\n"
            "- [For contributors](contributors.md): the conventions every part of the course follows, and "
            "[the design](design.md): the map of the library, the loop, the checks and the protocol.",
            toctree(entries, caption="Chapters"),
            toctree(
                ["For instructors <instructors>", "For contributors <contributors>"],
                caption="Instructors, contributors",
            ),
        ]
    )


def instructors_page(readme: str) -> str:
    """The README's "For instructors", then a link to ``docs/grading.md`` (its own page, under this one)."""
    return (
        shift_headings(section(readme, "## For instructors"))
        + "\n## The grading reference\n\n"
        + "How each submission is graded, which process decides what, the time a class takes, the attacks tested and "
        + "what is not detected: [grading a class, in full](grading.md).\n\n"
        + toctree(["The grading reference <grading>"])
    )


def contributors_page(contributing: str, readme: str) -> str:
    """``CONTRIBUTING.md``, the README's repository layout, then ``docs/design.md`` (a page under this one)."""
    return (
        shift_headings(contributing)
        + "\n"
        + section(readme, "## Repository layout")
        + "\n"
        + toctree(["The design <design>"])
    )


# ---- staging and building ---------------------------------------------------------------------------------------


def reading_order(chapters: list[Chapter]) -> list[str]:
    """The site's pages as Sphinx names them, in reading order: each chapter's lecture, then its exercises."""
    order = ["index"]
    for chapter in chapters:
        order += [f"lectures/{chapter.lecture.stem}"]
        order += [f"exercises/{chapter.exercises.stem}"] if chapter.exercises else []
    return order + ["instructors", "grading", "contributors", "design"]


def course_archive(path: Path, root: Path = ROOT) -> bool:
    """Writes the course as last committed (``git archive`` of HEAD, in a folder ``grpo-course/``) to ``path``.

    Returns False, writing nothing, where ``root`` is not a git checkout or git is missing: the box then asks for
    the repository instead. An unchanged archive is left alone, so Sphinx copies it again only when it changed.
    """
    try:
        done = subprocess.run(
            ["git", "archive", "--format=zip", "--prefix=grpo-course/", "HEAD"],
            cwd=root,
            capture_output=True,
            check=False,
        )
    except OSError:
        return False
    if done.returncode != 0:
        return False
    if not path.exists() or path.read_bytes() != done.stdout:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(done.stdout)
    return True


def stage(source: Path, root: Path = ROOT) -> None:
    """Writes every page into ``source``. A file whose text is unchanged is left alone, so Sphinx rebuilds only the
    pages that changed; a file that no page needs any more is deleted."""
    linked = {name: site_links((root / name).read_text(), root / name, root, source) for name in PAGE_OF}
    readme = linked["README.md"]
    archive = source / ARCHIVE if course_archive(source / ARCHIVE, root) else None
    pages: dict[str, str] = {}
    titles = []
    for chapter in chapters(root):
        children = []
        exercises_title = None
        if chapter.exercises is not None:
            page = source / "exercises" / chapter.exercises.name
            nb = notebook_page(chapter.exercises, page, EXERCISES_DOWNLOAD, [], archive, root)
            pages[f"exercises/{chapter.exercises.name}"] = nbformat.writes(nb)
            exercises_title = title(nb)
            label = exercises_title if exercises_title.startswith("Exercises") else f"Exercises: {exercises_title}"
            children.append(f"{label} </exercises/{chapter.exercises.stem}>")
        page = source / "lectures" / chapter.lecture.name
        nb = notebook_page(chapter.lecture, page, LECTURE_DOWNLOAD, children, archive, root)
        pages[f"lectures/{chapter.lecture.name}"] = nbformat.writes(nb)
        titles.append((chapter, title(nb), exercises_title))
    pages["index.md"] = landing_page(readme, titles, ARCHIVE if archive else None)
    pages["instructors.md"] = instructors_page(readme)
    pages["grading.md"] = shift_headings(linked["docs/grading.md"])
    pages["contributors.md"] = contributors_page(linked["CONTRIBUTING.md"], readme)
    pages["design.md"] = shift_headings(linked["docs/design.md"])
    for relative, text in pages.items():
        path = source / relative
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    for path in source.rglob("*"):
        if path.is_file() and path.relative_to(source).as_posix() not in {*pages, ARCHIVE}:
            path.unlink()


def build(out: Path = OUT, root: Path = ROOT, warnings: Path | None = None) -> int:
    """Stages the pages beside ``out`` (in ``<out>-src/``, with Sphinx's cache in ``<out>-doctrees/``) and builds
    the site into ``out``. Returns Sphinx's exit status (0: built); Sphinx's warnings go to stderr, and to the file
    ``warnings`` when given."""
    from sphinx.cmd.build import build_main  # the dev extras' Sphinx, imported only to build

    source, doctrees = out.parent / f"{out.name}-src", out.parent / f"{out.name}-doctrees"
    stage(source, root)
    options = ["-b", "html", "-q", "-c", str(CONF), "-d", str(doctrees)]
    options += ["-w", str(warnings)] if warnings else []
    return build_main(options + [str(source), str(out)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib.authoring.site", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="the site's folder (default: _build/site)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    status = build(args.out.resolve())
    if status == 0:
        index = args.out.resolve() / "index.html"
        print(f"site: built in {time.monotonic() - start:.1f} s; open {index}")
    return status


if __name__ == "__main__":
    sys.exit(main())
