"""The website's pages, as `make site` stages them (course_lib/authoring/site.py), checked without a browser.

The chapters follow course_lib/__init__.py's chapter list and the notebooks' names agree with it; every widget
becomes its stored picture (or its progress as text); the exercise pages are the stubs of exercises/, never the
solutions; the landing page links every chapter. tests/browser/test_site.py opens the built pages in Chromium.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from course_lib.authoring import site, site_cells, site_widgets

ROOT = site.ROOT


@pytest.fixture(scope="module")
def staged(tmp_path_factory) -> Path:
    """Every page staged once, as `make site` stages them before Sphinx runs."""
    source = tmp_path_factory.mktemp("site") / "site-src"
    site.stage(source)
    return source


def test_chapter_list_and_notebooks_agree():
    numbers = site.chapter_numbers()
    assert numbers == [f"{n:02d}" for n in range(len(numbers))], "course_lib/__init__.py lists chapters out of order"
    lectures = sorted(path.name[:2] for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    exercises = sorted(path.name[:2] for path in (ROOT / "exercises").glob("[0-9][0-9]_*.ipynb"))
    assert lectures == numbers, "notebooks/ and course_lib/__init__.py's chapter list name different chapters"
    assert exercises == numbers, "exercises/ and course_lib/__init__.py's chapter list name different chapters"
    order = site.reading_order(site.chapters())
    assert order[1:3] == ["lectures/00_welcome", "exercises/00_warmup"], "each lecture, then its exercises"


def _fake_course(root: Path, listed: list[str], lectures: list[str]) -> Path:
    (root / "course_lib").mkdir(parents=True)
    lines = "\n".join(f"- {n} chapter {n}" for n in listed)
    (root / "course_lib" / "__init__.py").write_text(f'"""The chapters:\n\n{lines}\n"""\n')
    for folder in ("notebooks", "exercises"):
        (root / folder).mkdir()
    for number in lectures:
        nbformat.write(nbformat.v4.new_notebook(), root / "notebooks" / f"{number}_name.ipynb")
    return root


def test_chapters_refuse_a_notebook_the_list_lacks(tmp_path):
    root = _fake_course(tmp_path, ["00", "01"], ["00", "01", "02"])
    with pytest.raises(ValueError, match=r"\['02'\] are not in the chapter list"):
        site.chapters(root)


def test_chapters_refuse_a_listed_chapter_without_a_lecture(tmp_path):
    root = _fake_course(tmp_path, ["00", "01"], ["00"])
    with pytest.raises(ValueError, match=r"\['01'\] .* have no notebooks/NN_\*.ipynb"):
        site.chapters(root)


def _widget_outputs(nb) -> list[dict]:
    return [o for cell in nb.cells for o in cell.get("outputs", []) if site_widgets.WIDGET_VIEW in o.get("data", {})]


# Parameters without ".ipynb": conftest.py times every test whose id names a notebook as a notebook run.
@pytest.mark.parametrize("stem", sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb")))
def test_widgets_become_their_stored_pictures(stem, staged):
    name = f"{stem}.ipynb"
    original = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    page = nbformat.read(staged / "lectures" / name, as_version=4)
    assert _widget_outputs(page) == [] and "widgets" not in page.metadata, "a widget left for the browser to load"
    state = original.metadata.get("widgets", {}).get(site_widgets.WIDGET_STATE, {}).get("state", {})
    outputs = [o for cell in page.cells for o in cell.get("outputs", [])]
    for widget in _widget_outputs(original):
        models = site_widgets._widget_models(widget["data"][site_widgets.WIDGET_VIEW]["model_id"], state)
        picture = site_widgets._stored_png(models)
        if picture is not None:
            shown = [i for i, o in enumerate(outputs) if o.get("data", {}).get("image/png") == picture]
            assert shown, f"{name}: a slider's stored picture is not on the page"
            note = outputs[shown[0] - 1]["data"]["text/html"]
            assert 'class="widget-note"' in note and "In JupyterLab, move " in note
        else:
            line = site_widgets.progress_line(models)
            assert any(o.get("text", "") == line + "\n" for o in outputs), f"{name}: progress bar missing: {line}"


def test_slider_note_names_the_controls_and_the_settings():
    models = [
        {"model_name": "VBoxModel", "state": {}},
        {"model_name": "FloatSliderModel", "state": {"description": "gamma"}},
        {"model_name": "FloatSliderModel", "state": {"description": "lam"}},
        {"model_name": "ImageModel", "state": {"description": ""}},
    ]
    note = site_widgets.slider_note(models, "SliderPlot(plot_gae_on_chain: gamma=0.95, lam=0.5)")
    assert note == (
        "In JupyterLab, move gamma and lam and the plot redraws; "
        "here, the picture the notebook stored, drawn at gamma=0.95, lam=0.5."
    )


def test_progress_bar_reads_as_tqdm_prints_it():
    models = [
        {"model_name": "HBoxModel", "state": {}},
        {"model_name": "HTMLModel", "state": {"value": "GRPO:\u2007\u200788%"}},
        {"model_name": "FloatProgressModel", "state": {"value": 7.0, "max": 8.0}},
        {"model_name": "HTMLModel", "state": {"value": "\u20077/8\u2007[00:04&lt;00:00,\u2007\u20072.03it/s]"}},
    ]
    assert site_widgets.progress_line(models) == "GRPO:  88%|█████████ | 7/8 [00:04<00:00,  2.03it/s]"


@pytest.mark.parametrize("stem", sorted(path.stem for path in (ROOT / "exercises").glob("*.ipynb")))
def test_exercise_pages_are_the_stubs(stem, staged):
    name = f"{stem}.ipynb"
    stubs = nbformat.read(ROOT / "exercises" / name, as_version=4)
    page = nbformat.read(staged / "exercises" / name, as_version=4)
    assert [c.source for c in page.cells if c.cell_type == "code"] == [
        site_cells.strip_markers(c.source) for c in stubs.cells if c.cell_type == "code"
    ], "an exercise page's code differs from exercises/ (less its test markers)"
    text = nbformat.writes(page)
    assert "NotImplementedError" in text and "### BEGIN SOLUTION" not in text
    download = [link for link in re.findall(r"\{download\}`[^`]*<([^>]+)>`", text) if link.endswith(".ipynb")]
    assert len(download) == 1 and download[0].endswith(f"exercises/{name}") and "solutions" not in download[0]
    assert (staged / "exercises" / download[0]).resolve() == (ROOT / "exercises" / name).resolve()


def test_landing_page_links_every_chapter_in_order(staged):
    index = (staged / "index.md").read_text()
    readme = site.site_links((ROOT / "README.md").read_text(), ROOT / "README.md", ROOT, staged)
    assert index.startswith(readme.split("\n", 1)[0]), "the README's title first"
    for chapter in site.chapters():
        assert f"](lectures/{chapter.lecture.name})" in index and f"](exercises/{chapter.exercises.name})" in index
    around_table = [line for line in site.section(readme, "## Chapters").splitlines()[1:] if not line.startswith("|")]
    assert "\n".join(around_table).strip() in index, "the README's words around its chapter table"
    listed = re.findall(r"<(lectures/[^>]+)>", index)
    assert listed == [name for name in site.reading_order(site.chapters()) if name.startswith("lectures/")]


def test_instructors_and_contributors_pages(staged):
    instructors = (staged / "instructors.md").read_text()
    assert instructors.startswith("# For instructors\n") and "](grading.md)" in instructors
    assert (staged / "grading.md").read_text().startswith("# ")
    contributing = (ROOT / "CONTRIBUTING.md").read_text().split("\n", 1)[0]
    contributors = (staged / "contributors.md").read_text()
    assert contributors.startswith(contributing) and "The design <design>" in contributors
    assert "](design.md)" in contributors, "CONTRIBUTING.md's link to docs/design.md leads to its page"
    assert (staged / "design.md").read_text().startswith("# Design")


# ---- what a reader gets beyond the stored notebook (course_lib/authoring/site_cells.py) ---------------------------


def _pages(staged: Path) -> list[Path]:
    return sorted((staged / "lectures").glob("*.ipynb")) + sorted((staged / "exercises").glob("*.ipynb"))


def test_test_markers_leave_the_code_and_nothing_else_does():
    source = "# NBVAL_CHECK_OUTPUT\nx = 1  # NBVAL_IGNORE_OUTPUT\n\nprint(x)  # a comment stays"
    assert site_cells.strip_markers(source) == "x = 1\n\nprint(x)  # a comment stays"
    assert site_cells.strip_markers("y = 2\n") == "y = 2"


def test_no_page_shows_a_test_marker(staged):
    for path in _pages(staged):
        nb = nbformat.read(path, as_version=4)
        assert not [c for c in nb.cells if c.cell_type == "code" and "NBVAL_" in c.source], path.name


def test_every_figure_has_alt_text_in_words(staged):
    figures = 0
    for path in _pages(staged):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code" and site_cells._has_figure(cell):
                figures += 1
                alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
                assert alt.startswith("Figure: ") and len(alt) > 20, f"{path.name}: {cell.source[-80:]!r}"
    assert figures >= 40


def test_alt_text_is_the_plot_title_or_the_plotting_docstring():
    assert site_cells.alt_text('fig = plot_x(h, title=f"Final reward, {label}")') == "Figure: Final reward, …"
    summary = site_cells._plotting_summaries()["plot_discount_weights"]
    assert site_cells.alt_text("fig = plot_discount_weights(gamma=0.5)") == f"Figure: {summary.rstrip('.')}"
    assert site_cells.alt_text("print(1)") is None


def test_alt_text_reads_a_docstrings_roles_as_names():
    assert site_cells._plain("A slider over :func:`~course_lib.plotting.plot_x`.") == "A slider over plot_x."
    assert site_cells._plain("The last ``last`` rounds of `seed`") == "The last last rounds of seed"
    assert not [text for text in site_cells._plotting_summaries().values() if "`" in text]


def test_a_figure_keeps_its_width_not_its_height(staged):
    """Sphinx writes both into the picture's style: a fixed height would squash a figure the column narrows."""
    sized = 0
    for path in _pages(staged):
        for cell in nbformat.read(path, as_version=4).cells:
            for output in cell.get("outputs", []):
                size = output.get("metadata", {}).get("image/png", {})
                assert "height" not in size, path.name
                sized += "width" in size
    assert sized >= 40


def test_arxiv_ids_become_links_outside_code_and_maths():
    text = "SAPO (arXiv 2511.20347), `arXiv 2511.20347` and $arXiv 1234.56789$; [arXiv 2402.03300](x)."
    assert site_cells.arxiv_links(text) == (
        "SAPO ([arXiv 2511.20347](https://arxiv.org/abs/2511.20347)), `arXiv 2511.20347` and $arXiv 1234.56789$; "
        "[arXiv 2402.03300](x)."
    )


def test_every_page_has_the_get_the_course_box_under_its_download_line(staged):
    for path in _pages(staged):
        cells = nbformat.read(path, as_version=4).cells
        marks = [cell.metadata.get("course", {}).get("site") for cell in cells]
        assert marks.count("get-the-course") == 1, path.name
        at = marks.index("get-the-course")
        assert marks[at - 1] == "download", path.name
        box = cells[at].source
        assert "make lab" in box and "course_lib" in box
        assert f"`{'notebooks' if path.parent.name == 'lectures' else 'exercises'}/{path.name}`" in box
        assert f"<../{site.ARCHIVE}>" in box
    index = (staged / "index.md").read_text()
    assert "{admonition} Get the course" in index and f"<{site.ARCHIVE}>" in index


def test_the_course_archive_is_the_repository(staged):
    import zipfile

    with zipfile.ZipFile(staged / site.ARCHIVE) as archive:
        names = set(archive.namelist())
    assert {
        "grpo-course/Makefile",
        "grpo-course/course_lib/__init__.py",
        "grpo-course/notebooks/00_welcome.ipynb",
    } <= names


def test_links_lead_to_pages_images_to_files_and_the_rest_to_text(tmp_path):
    root, staged = tmp_path / "course", tmp_path / "_build" / "site-src"
    (root / "docs" / "img").mkdir(parents=True)
    (root / "docs" / "img" / "lecture.png").write_bytes(b"png")
    text = (
        "See [the reference](grading.md#time), [CONTRIBUTING.md](../CONTRIBUTING.md), [a script](../benchmarks/x.py), "
        "[the web](https://example.org/) and [a heading](#names).\n![A picture](img/lecture.png)\n"
    )
    linked = site.site_links(text, root / "docs" / "grading.md", root, staged)
    assert linked == (
        "See [the reference](grading.md#time), [CONTRIBUTING.md](contributors.md), a script, "
        "[the web](https://example.org/) and [a heading](#names).\n![A picture](../../course/docs/img/lecture.png)\n"
    )


def test_section_and_headings():
    text = "# A\n\n## B\ntext\n```\n## not a heading\n```\n### C\n## D\nend\n"
    assert site.section(text, "## B") == "## B\ntext\n```\n## not a heading\n```\n### C\n"
    assert site.shift_headings(site.section(text, "## B")) == "# B\ntext\n```\n## not a heading\n```\n## C\n"
