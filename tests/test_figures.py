"""Figures stored for the web (course_lib/authoring/figures.py): 150 dpi, 256 colours, the size to show them at.

`python -m course_lib.build --execute` stores each figure drawn at 150 dpi in a palette of 256 colours, with the
size a student's own run shows it at (the figure's dpi) in the output's metadata. The palette changes a pixel by a
fraction of a level on average; a transparent figure keeps matplotlib's PNG; every figure the notebooks store was
stored that way.
"""

from __future__ import annotations

import base64
import io
import json
import struct
from pathlib import Path

import matplotlib.pyplot as plt  # the Agg backend: tests/conftest.py
import nbformat
import numpy as np
import pytest
from IPython.core.pylabtools import print_figure
from PIL import Image

from course_lib.authoring import figures
from course_lib.authoring.build import execute_in_place
from course_lib.plotting import plot_discount_weights

ROOT = Path(__file__).resolve().parents[1]


def _image(data: str | bytes) -> Image.Image:
    raw = base64.b64decode(data) if isinstance(data, str) else data
    return Image.open(io.BytesIO(raw))


def test_a_figure_is_drawn_at_150_dpi_and_shown_at_its_own_size():
    fig = plot_discount_weights(gamma=0.9, horizon=30)
    data, size = figures.web_png(fig)
    stored = _image(data)
    drawn_as_matplotlib_shows_it = _image(print_figure(fig, fmt="png", bbox_inches="tight"))  # at fig.dpi, 100
    plt.close(fig)
    assert stored.mode == "P" and len(stored.getcolors()) <= figures.COLOURS
    assert abs(size["width"] - drawn_as_matplotlib_shows_it.width) <= 1
    assert abs(size["height"] - drawn_as_matplotlib_shows_it.height) <= 1
    assert stored.width == pytest.approx(size["width"] * 1.5, abs=2)
    assert stored.height == pytest.approx(size["height"] * 1.5, abs=2)


def test_the_palette_changes_a_pixel_by_a_fraction_of_a_level():
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    rng = np.random.default_rng(0)
    for run in range(4):
        ax.plot(np.cumsum(rng.normal(size=200)), label=f"run {run}")
    ax.fill_between(range(200), -5, 5, alpha=0.2)
    ax.legend()
    data, _ = figures.web_png(fig)
    full_colour = _image(print_figure(fig, fmt="png", bbox_inches="tight", dpi=figures.STORED_DPI)).convert("RGB")
    plt.close(fig)
    difference = np.abs(np.asarray(_image(data).convert("RGB"), dtype=int) - np.asarray(full_colour, dtype=int))
    assert difference.mean() < 0.5
    assert len(full_colour.getcolors(1 << 24)) > figures.COLOURS  # the palette had something to do


def test_a_transparent_figure_keeps_matplotlibs_png_and_an_empty_one_shows_nothing():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([1, 2])
    fig.patch.set_alpha(0.0)
    data, size = figures.web_png(fig)
    plt.close(fig)
    assert _image(data).mode == "RGBA"
    assert _image(data).width == pytest.approx(1.5 * size["width"], abs=2)
    empty = plt.figure()
    assert figures.web_png(empty) is None
    plt.close(empty)


def test_store_figures_needs_a_shell():
    with pytest.raises(ValueError, match="shell"):
        figures.store_figures_for_the_web()


def test_the_storing_kernel_stores_every_figure_for_the_web(tmp_path):
    """A notebook whose first cell loads pyplot and draws (the inline backend then installs its own formatter in
    that very cell), and a later cell: both figures are stored at 150 dpi with their size."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("from course_lib.plotting import plot_discount_weights\nplot_discount_weights();"),
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nplt.subplots(figsize=(3, 2))[1].plot([1, 2]);"),
    ]
    path = tmp_path / "figures.ipynb"
    nbformat.write(nb, path)
    execute_in_place(path, timeout=120)
    stored = nbformat.read(path, as_version=4)
    shown = [(o.data["image/png"], o.metadata) for c in stored.cells for o in c.outputs if "image/png" in o.data]
    assert len(shown) == 2
    for data, metadata in shown:
        assert _image(data).width == pytest.approx(1.5 * metadata["image/png"]["width"], abs=2)


def _stored_figures(folder: str):
    for path in sorted((ROOT / folder).glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            for output in cell.get("outputs", []):
                data = output.get("data", {}).get("image/png")
                if data is not None:
                    yield path.name, "".join(data), output.get("metadata", {}).get("image/png", {})


@pytest.mark.parametrize("folder", ["notebooks", "solutions"])
def test_every_stored_figure_was_stored_for_the_web(folder):
    """Re-execute a notebook with `python -m course_lib.build --execute`, not from JupyterLab: a figure saved
    from a student's kernel is stored at 100 dpi, without the size to show it at."""
    for name, data, metadata in _stored_figures(folder):
        width = struct.unpack(">I", base64.b64decode(data[:32])[16:20])[0]
        assert "width" in metadata, f"{name}: a figure stored without its size; re-execute it with --execute"
        assert width == pytest.approx(1.5 * metadata["width"], abs=2), f"{name}: a figure not drawn at 150 dpi"
