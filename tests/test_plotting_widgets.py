"""Tests of course_lib.plotting and course_lib.plotting.widgets, without a browser.

The plotting functions are inspected as matplotlib objects. The widgets are
tested twice: in this process (the sliders, the redraw plumbing, no figure left
open), and in a real kernel driven by nbclient, which plays the front end's part
for ``ipywidgets.Output`` and sends the captured outputs back to the kernel, so
``out.outputs`` there is what JupyterLab would show.
"""

from __future__ import annotations

import io
import json
from functools import partial

import ipywidgets
import matplotlib
import numpy as np
import pytest
from matplotlib.figure import Figure
from nbformat.v4 import new_code_cell, new_notebook
from PIL import Image

from course_lib.authoring.notebook_client import NotebookClient

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after choosing the backend

from course_lib.lectures.sweep import load_sweep
from course_lib.plotting import (
    plot_discount_weights,
    plot_gae_on_chain,
    plot_ppo_clip,
    plot_sweep,
    update_discount_weights,
    update_gae_on_chain,
    update_ppo_clip,
    update_sweep,
)
from course_lib.plotting.widgets import Frame, SliderPlot, discount_widget, slider_plot


@pytest.fixture(autouse=True)
def _no_figures_left(no_figures_left_behind):
    """Every test here must close the figures it opens (tests/conftest.py)."""


def _bars(fig: Figure):
    (ax,) = fig.axes
    return [p for p in ax.patches if isinstance(p, matplotlib.patches.Rectangle)]


def _vertical_lines(fig: Figure):
    (ax,) = fig.axes
    return [c for c in ax.collections if isinstance(c, matplotlib.collections.LineCollection)]


# ---------------------------------------------------------------------------
# plot_discount_weights
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("gamma, horizon", [(0.9, 30), (0.5, 7), (0.0, 5), (1.0, 12)])
def test_discount_weights_one_bar_per_step(gamma, horizon):
    fig = plot_discount_weights(gamma=gamma, horizon=horizon)
    assert isinstance(fig, Figure)
    bars = _bars(fig)
    assert len(bars) == horizon
    # bar t has height gamma^t (0^0 = 1: the first reward always counts fully)
    for t, bar in enumerate(bars):
        assert bar.get_height() == pytest.approx(gamma**t)
    plt.close(fig)


def test_discount_weights_marks_the_effective_horizon():
    fig = plot_discount_weights(gamma=0.9)
    (line,) = _vertical_lines(fig)
    # 1 / (1 - 0.9) = 10 steps: the line separates bars 0..9 from bar 10, at x = 9.5
    (segment,) = line.get_segments()
    assert segment[0][0] == pytest.approx(9.5)
    assert "10 steps" in " ".join(t.get_text() for t in fig.axes[0].get_legend().get_texts())
    plt.close(fig)


@pytest.mark.parametrize("gamma", [0.99, 1.0])
def test_discount_weights_no_line_when_the_horizon_is_off_the_chart(gamma):
    fig = plot_discount_weights(gamma=gamma, horizon=30)
    assert _vertical_lines(fig) == []
    plt.close(fig)


@pytest.mark.parametrize(
    "kwargs, argname",
    [
        ({"gamma": 1.5}, "gamma"),
        ({"gamma": -0.1}, "gamma"),
        ({"horizon": 0}, "horizon"),
        ({"horizon": 2.5}, "horizon"),
        ({"horizon": True}, "horizon"),
    ],
)
def test_discount_weights_bad_input(kwargs, argname):
    with pytest.raises(ValueError, match=argname):
        plot_discount_weights(**kwargs)


# ---------------------------------------------------------------------------
# slider_plot and discount_widget, in this process
# ---------------------------------------------------------------------------


class Recorder:
    """A plot function that remembers how it was called."""

    def __init__(self):
        self.calls = []

    def __call__(self, a=1.0, n=3):
        self.calls.append({"a": a, "n": n})
        fig, ax = plt.subplots()
        ax.bar(range(n), [a] * n)
        return fig


def test_slider_plot_layout_and_slider_settings():
    widget = slider_plot(
        Recorder(),
        a=ipywidgets.FloatSlider(value=0.5, continuous_update=False),
        n=ipywidgets.IntSlider(value=3, min=1, max=9, description="steps"),
    )
    assert isinstance(widget, ipywidgets.VBox)
    a, n, image, out = widget.children
    assert isinstance(image, ipywidgets.Image) and image is widget.image and image.format == "png"
    assert bytes(image.value).startswith(b"\x89PNG")  # drawn at creation
    assert isinstance(out, ipywidgets.Output) and out is widget.out  # for a traceback, if a move raises
    assert (a.description, n.description) == ("a", "steps")  # an empty label gets the argument's name
    assert a.readout and n.readout
    assert a.continuous_update and n.continuous_update  # redraw while sliding, not only on release


def test_slider_plot_redraws_once_at_creation_and_on_every_change(capsys):
    plot_fn = Recorder()
    widget = slider_plot(plot_fn, a=ipywidgets.FloatSlider(value=0.5), n=ipywidgets.IntSlider(value=3, min=1))
    assert plot_fn.calls == [{"a": 0.5, "n": 3}]
    widget.sliders["a"].value = 0.75
    widget.sliders["n"].value = 5
    widget.sliders["n"].value = 5  # no change, no redraw
    assert plot_fn.calls[1:] == [{"a": 0.75, "n": 3}, {"a": 0.75, "n": 5}]
    assert widget.values() == {"a": 0.75, "n": 5}
    assert plt.get_fignums() == []  # every figure closed once shown


def test_slider_plot_bad_input():
    with pytest.raises(ValueError, match="plot_fn"):
        slider_plot("not a function", a=ipywidgets.FloatSlider())
    with pytest.raises(ValueError, match="sliders"):
        slider_plot(Recorder())
    with pytest.raises(ValueError, match="^a: expected an ipywidgets slider"):
        slider_plot(Recorder(), a=0.5)


def test_discount_widget_slider_and_figure(capsys):
    widget = discount_widget()
    assert isinstance(widget, SliderPlot) and widget.plot_fn is plot_discount_weights
    (gamma,) = widget.sliders.values()
    assert (gamma.description, gamma.min, gamma.max, gamma.step, gamma.value) == ("gamma", 0.0, 1.0, 0.01, 0.9)
    assert gamma.readout and gamma.continuous_update
    assert repr(widget) == "SliderPlot(plot_discount_weights: gamma=0.9)"  # not the picture's bytes
    gamma.value = 0.5
    fig = widget.redraw()  # the figure just shown, for inspection
    assert len(_bars(fig)) == 30
    assert _bars(fig)[1].get_height() == pytest.approx(0.5)
    assert plt.get_fignums() == []


# ---------------------------------------------------------------------------
# update_<what>: a figure moved in place shows exactly the pixels of a new one
# ---------------------------------------------------------------------------


def _pixels(fig: Figure) -> np.ndarray:
    """What a fresh figure looks like: drawn once on its own Agg canvas, as RGBA pixels."""
    canvas = matplotlib.backends.backend_agg.FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).copy()


_SWEEP = load_sweep()["sweep"]
# Each widget's plot, its update function, and moves: the first is drawn, then each later one is an update.
UPDATES = {
    "00 gamma": (plot_discount_weights, update_discount_weights, [{"gamma": g} for g in (0.9, 0.89, 0.0)]),
    # (1, 1): the error bars reach the legend, which then moves too; back to (0.95, 0.5) with it moving.
    "04 gamma, lam": (
        plot_gae_on_chain,
        update_gae_on_chain,
        [
            {"gamma": 0.95, "lam": 0.5},
            {"gamma": 0.94, "lam": 0.45},
            {"gamma": 1.0, "lam": 1.0},
            {"gamma": 0.95, "lam": 0.5},
        ],
    ),
    "05 clip_eps": (plot_ppo_clip, update_ppo_clip, [{"clip_eps": e} for e in (0.2, 0.21, 0.5)]),
    # Two corners of the table too: the outline there touches the frame.
    "07 group_size, clip_eps": (
        partial(plot_sweep, sweep=_SWEEP),
        partial(update_sweep, sweep=_SWEEP),
        [{"group_size": g, "clip_eps": e} for g, e in ((8, 0.2), (12, 0.1), (2, 0.05), (16, 0.5))],
    ),
}


@pytest.mark.parametrize("name", UPDATES)
def test_an_update_in_place_draws_the_pixels_of_a_new_figure(name):
    plot_fn, update_fn, moves = UPDATES[name]
    fig = plot_fn(**moves[0])
    plt.close(fig)
    frame = Frame(fig, update_fn(fig, **moves[0]))
    for knobs in moves[1:]:
        changed = update_fn(frame.fig, **knobs)
        assert changed is not None, knobs
        if not frame.can_render(changed):  # as the widget does: a layer more to move (04's legend, reached)
            fig = plot_fn(**knobs)
            plt.close(fig)
            frame = Frame(fig, update_fn(fig, **knobs))
        png = frame.render()
        fresh = plot_fn(**knobs)
        plt.close(fresh)
        want = _pixels(fresh)
        differ = (np.asarray(frame.canvas.buffer_rgba()) != want).any(axis=2)
        assert not differ.any(), f"{name} {knobs}: {differ.sum()} pixels differ, first at {np.argwhere(differ)[0]}"
        shown = np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))
        assert np.array_equal(shown, want), f"{name} {knobs}: the PNG is not what was drawn"


@pytest.mark.parametrize("before, after", [(0.9, 0.97), (0.97, 1.0), (1.0, 0.5), (0.9, 0.9)])
def test_discount_update_asks_for_a_new_figure_when_the_horizon_mark_changes_kind(before, after):
    fig = plot_discount_weights(gamma=before)
    plt.close(fig)
    crosses = (before >= 29 / 30) != (after >= 29 / 30) or (before == 1.0) != (after == 1.0)
    assert (update_discount_weights(fig, gamma=after) is None) == crosses
    assert update_discount_weights(fig, gamma=before, horizon=31) is None  # another number of bars


def test_slider_plot_with_an_update_function_draws_once_then_moves_in_place():
    plot_fn = Recorder()
    updates = []

    def update_fn(fig, a=1.0, n=3):
        updates.append({"a": a, "n": n})
        (ax,) = fig.axes
        if len(ax.patches) != n:
            return None  # another number of bars: only a new figure will do
        for bar in ax.patches:
            bar.set_height(a)
        return list(ax.patches)

    widget = slider_plot(
        plot_fn, update_fn, a=ipywidgets.FloatSlider(value=0.5), n=ipywidgets.IntSlider(value=3, min=1)
    )
    widget.sliders["a"].value = 0.75
    assert plot_fn.calls == [{"a": 0.5, "n": 3}]  # moved in place, not drawn again
    assert [bar.get_height() for bar in widget.frame.fig.axes[0].patches] == [0.75] * 3
    widget.sliders["n"].value = 4
    assert plot_fn.calls[1:] == [{"a": 0.75, "n": 4}]  # the update said no: a new figure
    assert updates == [{"a": 0.5, "n": 3}, {"a": 0.75, "n": 3}, {"a": 0.75, "n": 4}, {"a": 0.75, "n": 4}]
    assert plt.get_fignums() == []
    with pytest.raises(ValueError, match="update_fn"):
        slider_plot(plot_fn, "not a function", a=ipywidgets.FloatSlider())


# ---------------------------------------------------------------------------
# discount_widget in a kernel: what the front end is sent
# ---------------------------------------------------------------------------

REPORT = """
import hashlib, json
def report():
    return {
        "png": hashlib.sha1(w.image.value).hexdigest() if bytes(w.image.value).startswith(b"\\x89PNG") else None,
        "outputs": len(w.out.outputs),
        "open_figures": plt.get_fignums(),
    }
print(json.dumps(report()))
"""


def test_widgets_in_a_kernel_show_the_picture_and_a_move_that_raises(tmp_path):
    """In one kernel (one start-up for both): discount_widget's cell shows the widget only, and its picture changes
    with gamma; a plot function that raises on a move puts its traceback in the widget's Output (where the student
    looks), keeps the last picture, and the next good move clears it."""
    nb = new_notebook(
        cells=[
            new_code_cell(
                "import matplotlib.pyplot as plt\n"
                "from course_lib.plotting.widgets import discount_widget\n"
                "w = discount_widget()\nw"
            ),
            new_code_cell(REPORT),
            new_code_cell("w.sliders['gamma'].value = 0.5"),
            new_code_cell("print(json.dumps(report()))"),
            # a slider over a plot function that raises for a < 0
            new_code_cell(
                "import ipywidgets\n"
                "from course_lib.plotting.widgets import slider_plot\n"
                "def plot(a=1.0):\n"
                "    if a < 0:\n"
                "        raise ValueError('a: expected a >= 0, got ' + str(a))\n"
                "    fig, ax = plt.subplots()\n"
                "    ax.plot([0, 1], [0, a])\n"
                "    return fig\n"
                "w = slider_plot(plot, a=ipywidgets.FloatSlider(value=1.0, min=-1.0))\n"
                "first = w.image.value\n"
                "w"
            ),
            new_code_cell("w.sliders['a'].value = -0.5\nprint(w.image.value == first)"),
            new_code_cell("print(len(w.out.outputs), w.out.outputs[0]['output_type'], w.out.outputs[0]['ename'])"),
            new_code_cell("w.sliders['a'].value = 0.5\nprint(w.image.value == first)"),
            new_code_cell("print(len(w.out.outputs))"),  # synced back from the front end: a cell later
        ]
    )
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown, first_report, changed, after, _, moved_bad, error_shown, moved_good, cleared = nb.cells
    before = json.loads(first_report.outputs[0].text)
    after = json.loads(after.outputs[0].text)
    # the cell shows the widget only: no stray inline copy of the figure
    assert [sorted(o.get("data", {})) for o in shown.outputs] == [
        ["application/vnd.jupyter.widget-view+json", "text/plain"]
    ]
    assert shown.outputs[0]["data"]["text/plain"] == "SliderPlot(plot_discount_weights: gamma=0.9)"
    assert changed.outputs == []
    for state in (before, after):
        assert state["png"] is not None and state["outputs"] == 0 and state["open_figures"] == []
    assert before["png"] != after["png"], "the picture should change with gamma"
    # the move that raised
    # What a cell printed, whole: a print may reach the client as two stream messages ("0", then "\n") under load.
    printed = lambda cell: "".join(o.text for o in cell.outputs if o.output_type == "stream")  # noqa: E731
    assert printed(moved_bad) == "True\n"  # the error is not the cell's: it is in the widget
    assert all(o.output_type == "stream" for o in moved_bad.outputs)
    assert printed(error_shown) == "1 error ValueError\n"
    assert printed(moved_good) == "False\n" and printed(cleared) == "0\n"
