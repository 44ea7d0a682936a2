"""Figures stored for the web: how ``python -m course_lib.build --execute`` stores a notebook's matplotlib figures.

Left alone, a notebook stores each figure as the inline backend draws it: a full-colour PNG at the figure's dpi
(matplotlib's 100, so a 6.4-inch plot is 640 pixels wide). The stored picture is what the course's website shows,
and what a student sees in JupyterLab before running the cell. The kernel that stores the outputs draws it instead:

1. at ``STORED_DPI`` (150), with the size to show it at beside it (``width`` and ``height`` in the output's metadata,
   at the figure's own dpi), as IPython's "retina" figures do at twice the dpi. JupyterLab and the site show the
   figure at the size a student's own run draws it, sharper on a high-density screen; on the site a click opens the
   picture itself, 1.5 times larger, where a multi-panel figure's legends can be read;
2. in at most ``COLOURS`` (256) colours, a palette PNG: a plot has a few hundred to a few thousand colours, most of
   them the edges of lines drawn smooth, and the nearest of 256 changes a pixel by a fraction of a level on average
   (measured on the course's 48 figures as they were stored at 100 dpi: a mean change under 0.2 of 255 in each, for
   PNGs 37% of the size). A figure that is not opaque keeps matplotlib's own PNG.

A kernel a student starts is not changed: it draws figures as matplotlib does, at the same size on screen. Nor is
a slider's picture (``course_lib.plotting.widgets``), which is not a displayed figure but pixels redrawn on every
move: it stays at the figure's dpi, where a redraw fits its time budget, and the site shows it as it is stored.
"""

from __future__ import annotations

import base64
import io

from matplotlib.figure import Figure
from PIL import Image

STORED_DPI = 150
COLOURS = 256
# The line the storing kernel runs before the notebook's first cell (``IPKernelApp.exec_lines``).
KERNEL_SETUP = "from course_lib.authoring.figures import store_figures_for_the_web; store_figures_for_the_web()"


def web_png(fig: Figure) -> tuple[str, dict] | None:
    """``fig`` as a notebook stores it: a base64 PNG drawn at ``STORED_DPI`` in at most ``COLOURS`` colours, and
    ``{"width": ..., "height": ...}``, the size in pixels to show it at (the figure's own dpi). None for a figure
    with nothing drawn, which IPython shows as nothing."""
    from IPython.core.pylabtools import print_figure

    drawn = print_figure(fig, fmt="png", bbox_inches="tight", dpi=STORED_DPI)
    if drawn is None:
        return None
    image = Image.open(io.BytesIO(drawn))
    shown = fig.dpi / STORED_DPI
    size = {"width": round(image.width * shown), "height": round(image.height * shown)}
    opaque = image.mode == "RGBA" and image.getextrema()[3][0] == 255
    if opaque:
        # Median cut without dithering: a flat colour stays flat, and the same figure gives the same bytes.
        palette = image.convert("RGB").quantize(COLOURS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
        png = io.BytesIO()
        palette.save(png, format="png", optimize=True)
        drawn = png.getvalue()
    return base64.b64encode(drawn).decode("ascii"), size


def store_figures_for_the_web(shell=None) -> None:
    """Makes the IPython ``shell`` (the running one when None) display every matplotlib figure through
    :func:`web_png`."""
    import matplotlib
    import matplotlib.pyplot as plt
    from IPython import get_ipython

    shell = shell if shell is not None else get_ipython()
    if shell is None:
        raise ValueError("shell: expected an IPython shell, and no IPython shell is running")

    def install(result=None) -> None:
        shell.display_formatter.formatters["image/png"].for_type(Figure, web_png)

    # The inline backend installs its own PNG formatter when it is loaded, at once or after the cell that loads it.
    # So it is loaded here, before the notebook's first cell, and this formatter is installed again after every
    # cell (a cell's figures are displayed when it ends, before "post_run_cell").
    plt.switch_backend(matplotlib.get_backend())
    install()
    shell.events.register("post_run_cell", install)
