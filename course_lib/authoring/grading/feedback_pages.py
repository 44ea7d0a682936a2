"""The feedback pages on disk: ``feedback/<student>.md`` and ``feedback/<student>.html``.

Both render the same :class:`~course_lib.authoring.grading.feedback.Page`. The HTML is one file with its style
inline and no script, image, font or link to anything else, so a student opens it offline, from an e-mail or a
shared drive; every piece of text in it is escaped (a student's file name, a check's message).

:func:`write_feedback` writes every student's pair and removes the pages of students no longer in ``grades.csv``
(``--regrade`` after a submission was withdrawn), so the folder always matches the rows.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from course_lib.authoring.grading.canonical import Canonical
from course_lib.authoring.grading.feedback import ExerciseResult, Page, lecture_files, number, pages
from course_lib.authoring.grading.verdict import Row

PASSED_MARK, OTHER_MARK = "✔", "✘"


def file_stems(students: list[str]) -> dict[str, str]:
    """A file-name-safe, unique stem per student (``alice``, ``bob_smith``, ``x-2`` on a clash), in the order given."""
    stems, taken = {}, set()
    for student in students:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", student).strip("._") or "student"
        unique, n = stem, 1
        while unique in taken:
            n += 1
            unique = f"{stem}-{n}"
        taken.add(unique)
        stems[student] = unique
    return stems


def heading(ex: ExerciseResult) -> str:
    mark = PASSED_MARK if ex.status == "passed" else OTHER_MARK
    if not ex.exercise:
        return f"{mark} The whole notebook"
    if not ex.number:  # a notebook with no solution to grade against: its exercise's id is all there is
        return f"{mark} `{ex.exercise}`"
    return f"{mark} Exercise {ex.number}: {ex.title} (`{ex.exercise}`)"


def next_steps(ex: ExerciseResult) -> str:
    return ex.next_step + (f"; {ex.reread}" if ex.reread else "")


def of(points: float, max_points: float) -> str:
    """``1 of 2 points``, ``0 of 1 point``."""
    return f"{number(points)} of {number(max_points)} point" + ("" if max_points == 1 else "s")


def total_line(page: Page) -> str:
    return f"Total: {of(page.points, page.max_points)} over the notebooks you sent."


def score_line(ex: ExerciseResult) -> str:
    return f"{ex.status}, {of(ex.points, ex.max_points)}."


def message_lines(ex: ExerciseResult) -> list[str]:
    """The message's lines as a page shows them: each on a line of its own, without the indentation that marks a
    continuation in JupyterLab (four spaces would make Markdown show it as code)."""
    lines = [line.strip() for line in (ex.message or "(no message)").splitlines() if line.strip()]
    return lines or ["(no message)"]


def also_graded(others: list[tuple[str, float]]) -> str:
    listed = ", ".join(f"`{name}` ({number(points)} point{'' if points == 1 else 's'})" for name, points in others)
    return f"You sent this notebook more than once; the file with the most points counts. Also graded: {listed}."


# ---- Markdown --------------------------------------------------------------------------------------------------

# What Markdown would read as markup; `_` only where it can start or end emphasis (not in `discounted_return`).
MARKDOWN_SPECIAL = re.compile(r"([\\*<\[\]|]|(?<!\w)_|_(?!\w))")


def plain(text: str) -> str:
    """Text shown as written in Markdown: `code` spans kept, ``gamma ** t`` never turned bold."""
    parts = str(text).split("`")
    out = []
    for n, part in enumerate(parts):
        is_code = n % 2 == 1 and n < len(parts) - 1
        out.append(part if is_code else MARKDOWN_SPECIAL.sub(r"\\\1", part))
    return "`".join(out)


def markdown(page: Page) -> str:
    lines = [f"# Feedback for {plain(page.student)}", "", f"**{total_line(page)}**", ""]
    lines += ["| notebook | points |", "|---|---|"]
    lines += [f"| {plain(n.notebook)} | {of(n.points, n.max_points)} |" for n in page.notebooks]
    for part in page.notebooks:
        lines += ["", f"## {plain(part.notebook)}: {of(part.points, part.max_points)}", ""]
        lines += [f"Graded file: `{part.file}`."]
        if part.others:
            lines += ["", plain(also_graded(part.others))]
        for ex in part.exercises:
            lines += ["", f"### {plain(heading(ex))}", "", f"**{score_line(ex)}**", ""]
            quoted = [f"> {plain(line)}" for line in message_lines(ex)]
            lines += [line + "\\" for line in quoted[:-1]] + quoted[-1:]  # a backslash ends a line: a hard break
            if ex.next_step:
                lines += ["", f"What to do next: {plain(next_steps(ex))}."]
    return "\n".join(lines) + "\n"


# ---- HTML ------------------------------------------------------------------------------------------------------

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5;
       color: #1d1d1f; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.7rem; text-align: left; }
code { background: #f2f2f2; padding: 0 0.2rem; }
blockquote { margin: 0.5rem 0; padding: 0.4rem 0.8rem; background: #f7f7f7; border-left: 4px solid #999; }
.passed blockquote { border-left-color: #2e7d32; }
.other blockquote { border-left-color: #c62828; }
"""


def inline(text: str) -> str:
    """Escaped text, with Markdown's `code` spans as <code> (the only markup the pages use inside a line)."""
    parts = str(text).split("`")
    out = []
    for n, part in enumerate(parts):
        escaped = html.escape(part)
        out.append(f"<code>{escaped}</code>" if n % 2 == 1 and n < len(parts) - 1 else escaped)
    return "".join(out)


def page_html(page: Page) -> str:
    title = f"Feedback for {page.student}"
    body = [f"<h1>{inline(title)}</h1>", f"<p><strong>{inline(total_line(page))}</strong></p>"]
    body += ["<table>", "<tr><th>notebook</th><th>points</th></tr>"]
    for part in page.notebooks:
        body.append(f"<tr><td>{inline(part.notebook)}</td><td>{of(part.points, part.max_points)}</td></tr>")
    body.append("</table>")
    for part in page.notebooks:
        body.append(f"<h2>{inline(part.notebook)}: {of(part.points, part.max_points)}</h2>")
        body.append(f"<p>Graded file: {inline(f'`{part.file}`')}.</p>")
        if part.others:
            body.append(f"<p>{inline(also_graded(part.others))}</p>")
        for ex in part.exercises:
            kind = "passed" if ex.status == "passed" else "other"
            body.append(f'<section class="{kind}">')
            body.append(f"<h3>{inline(heading(ex))}</h3>")
            body.append(f"<p><strong>{inline(score_line(ex))}</strong></p>")
            body.append(f"<blockquote>{'<br>'.join(inline(line) for line in message_lines(ex))}</blockquote>")
            if ex.next_step:
                body.append(f"<p>What to do next: {inline(next_steps(ex))}.</p>")
            body.append("</section>")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{inline(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


# ---- on disk ---------------------------------------------------------------------------------------------------


def write_feedback(rows: list[Row], canonical: dict[str, Canonical], folder: Path, notebooks: Path) -> list[Path]:
    """Write ``<student>.md`` and ``<student>.html`` for every student of ``rows`` into ``folder``; remove the
    pages of students no longer there. ``notebooks`` is the folder of the lecture notebooks (for the sections to
    reread). Returns the Markdown files written."""
    folder.mkdir(parents=True, exist_ok=True)
    built = pages(rows, canonical, lecture_files(notebooks))
    stems = file_stems([page.student for page in built])
    written = []
    for page in built:
        path = folder / f"{stems[page.student]}.md"
        # A student name need not be UTF-8 (grades.csv keeps it with surrogate escapes): show it escaped.
        path.write_text(markdown(page), encoding="utf-8", errors="backslashreplace")
        path.with_suffix(".html").write_text(page_html(page), encoding="utf-8", errors="backslashreplace")
        written.append(path)
    keep = {p.name for p in written} | {p.with_suffix(".html").name for p in written}
    for stale in [*folder.glob("*.md"), *folder.glob("*.html")]:
        if stale.name not in keep:
            stale.unlink()
    return written
