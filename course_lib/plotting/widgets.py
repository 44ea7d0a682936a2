"""Sliders over the plots of :mod:`course_lib.plotting`, for the lecture notebooks.

A widget here is a plotting function plus sliders, nothing more: the function
is an ordinary ``plot_<what>(**knobs) -> Figure`` with defaults, tested without a
browser, and :func:`slider_plot` binds one slider to each keyword argument.

Redraws happen on every slider step (``continuous_update=True``), so they must be
cheap: the aim is a new picture within 200 ms of the key press, on 2 busy cores.
Measured, most of a redraw is matplotlib: building a new figure, and above all
drawing its text (tick labels, titles, legends), which a slider rarely changes. So
a plot that can moves in place: beside ``plot_<what>`` its module has an
``update_<what>(fig, **knobs)``, a plain function too, that changes the artists of a
figure ``plot_<what>`` drew (new heights, new curves, a new title) and returns the
artists it changed. The widget then draws everything else once, keeps those pixels,
and on each move pastes them back and draws only the changed artists on top
(matplotlib's "blitting"), then sends the picture as a PNG. Tests check that a figure
updated in place gives exactly the pixels of one drawn from scratch. Without an update
function, or when it returns None (the figure would change shape), the widget calls
the plotting function again.

The PNG goes to the browser as the value of an ``ipywidgets.Image``: one binary message,
and the browser swaps the picture of the same ``<img>`` element. (Displaying it into an
``Output`` widget instead costs a clear, a base64-encoded display message and a new output
area on every move: measured in the browser test under load, a p95 of 154 ms against 123 ms.)
A move that raises shows its traceback in an ``Output`` under the picture.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable

import ipywidgets
import matplotlib.pyplot as plt
from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image as PILImage

from course_lib.plotting import plot_discount_weights, update_discount_weights

# zlib level 1: a 1000x400 plot encodes in a few ms instead of about 20 (level 6), for a PNG a little larger.
PNG_COMPRESS_LEVEL = 1


def _png(canvas: FigureCanvasAgg) -> bytes:
    """The canvas's pixels as PNG bytes (what savefig would write, without drawing again)."""
    width, height = canvas.get_width_height(physical=True)
    image = PILImage.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    if image.getextrema()[3][0] == 255:  # opaque, as the course's figures are: a quarter fewer bytes to compress
        image = image.convert("RGB")
    png = io.BytesIO()
    image.save(png, format="png", compress_level=PNG_COMPRESS_LEVEL)
    return png.getvalue()


def _draw_order(fig: Figure, artist: Artist) -> tuple:
    """Where matplotlib draws ``artist`` in ``fig``: axes by axes, by zorder, ties in the order they were added."""
    ax = artist.axes
    if ax is None:  # a figure-level artist (suptitle, figure legend): after the axes
        return (len(fig.axes), artist.get_zorder(), 0)
    return (fig.axes.index(ax), artist.get_zorder(), ax.get_children().index(artist))


class Frame:
    """A figure kept for a widget, drawn in two layers: what stays (drawn once) and what moves (drawn per move).

    ``moving`` are the artists the plot's update function changes. They are marked animated, so that
    the figure's own draw leaves them out; the pixels of that draw are kept, and :meth:`render` pastes
    them back and draws the moving artists over them, in the order matplotlib would.
    """

    def __init__(self, fig: Figure, moving: Iterable[Artist]):
        self.fig = fig
        self.canvas = FigureCanvasAgg(fig)  # its own canvas: pyplot has closed the figure, the widget keeps it
        self.moving = set(moving)
        for artist in self.moving:
            artist.set_animated(True)
        self.canvas.draw()
        self.background = self.canvas.copy_from_bbox(fig.bbox)

    def can_render(self, changed: Iterable[Artist]) -> bool:
        """Whether ``changed`` are all artists of this frame's moving layer."""
        return set(changed) <= self.moving

    def render(self) -> bytes:
        """The figure as PNG bytes: the kept background, then the moving artists drawn over it."""
        self.canvas.restore_region(self.background)
        renderer = self.canvas.get_renderer()
        for artist in sorted(self.moving, key=lambda a: _draw_order(self.fig, a)):
            artist.draw(renderer)
        return _png(self.canvas)


class SliderPlot(ipywidgets.VBox):
    """A column of sliders above the figure that ``plot_fn(**slider values)`` returns.

    With ``update_fn``, a move updates that figure in place (``update_fn(fig, **slider values)`` returns the
    artists it changed, or None when only a new figure will do) and redraws only those artists.
    """

    def __init__(
        self,
        plot_fn: Callable[..., Figure],
        sliders: dict[str, ipywidgets.ValueWidget],
        update_fn: Callable[..., list[Artist] | None] | None = None,
    ):
        self.plot_fn = plot_fn
        self.update_fn = update_fn
        self.sliders = dict(sliders)
        self.frame: Frame | None = None
        self.image = ipywidgets.Image(format="png")  # the picture, replaced in place on every move
        self.out = ipywidgets.Output()  # empty, unless a move raised: then its traceback
        # Kept here, not read from ``out.outputs``: that copy reaches the kernel from the browser, a move later.
        self._showing_error = False
        super().__init__(children=[*self.sliders.values(), self.image, self.out])
        for slider in self.sliders.values():
            slider.observe(self._on_change, names="value")
        self.redraw()

    def __repr__(self) -> str:
        # Not ipywidgets' repr, which would print the picture's bytes where a notebook is shown without widgets.
        name = getattr(self.plot_fn, "__name__", None) or getattr(getattr(self.plot_fn, "func", None), "__name__", "?")
        knobs = ", ".join(f"{key}={value!r}" for key, value in self.values().items())
        return f"{type(self).__name__}({name}: {knobs})"

    def values(self) -> dict:
        """The keyword arguments the plot is drawn with now."""
        return {name: slider.value for name, slider in self.sliders.items()}

    def redraw(self) -> Figure:
        """Draw the plot for the current slider values into the image; return the figure (closed in pyplot)."""
        values = self.values()
        changed = None
        if self.frame is not None and self.update_fn is not None:
            changed = self.update_fn(self.frame.fig, **values)
        if changed is None or not self.frame.can_render(changed):
            self.frame = self._new_frame(values)
        self.image.value = self.frame.render()
        return self.frame.fig

    def _new_frame(self, values: dict) -> Frame:
        fig = self.plot_fn(**values)
        if not isinstance(fig, Figure):
            raise TypeError(f"plot_fn: expected a matplotlib Figure back, got {type(fig).__name__}")
        # Closed in pyplot at once: the inline backend would draw it a second time, and figures would pile up.
        plt.close(fig)
        # The update function names the artists that move: called with the values just drawn, it changes nothing.
        moving = self.update_fn(fig, **values) if self.update_fn is not None else None
        return Frame(fig, moving or [])

    def _on_change(self, change) -> None:
        if self._showing_error:  # the last move raised; this one starts clean
            self.out.clear_output()
            self._showing_error = False
        try:
            self.redraw()
        except Exception:
            self._showing_error = True
            # In a kernel, the Output shows the traceback under the picture (not only in JupyterLab's log console)
            # and swallows it; anywhere else (a test, a script) the error propagates.
            with self.out:
                raise


def slider_plot(
    plot_fn: Callable[..., Figure],
    update_fn: Callable[..., list[Artist] | None] | None = None,
    **sliders: ipywidgets.ValueWidget,
) -> SliderPlot:
    """Sliders named after ``plot_fn``'s keyword arguments above the figure it draws, redrawn on every change.

    ``update_fn(fig, **knobs)``, when given, updates a figure of ``plot_fn`` in place and returns the artists it
    changed (see the module's docstring).
    """
    if not callable(plot_fn):
        raise ValueError(f"plot_fn: expected a function returning a Figure, got {type(plot_fn).__name__}")
    if update_fn is not None and not callable(update_fn):
        raise ValueError(f"update_fn: expected a function or None, got {type(update_fn).__name__}")
    if not sliders:
        raise ValueError("sliders: expected at least one slider, as name=ipywidgets.FloatSlider(...)")
    for name, slider in sliders.items():
        if not isinstance(slider, ipywidgets.ValueWidget):
            raise ValueError(f"{name}: expected an ipywidgets slider, got {type(slider).__name__}")
        slider.description = slider.description or name
        # Visible values, and a redraw on every step of the slider rather than on release.
        for trait in ("readout", "continuous_update"):
            if slider.has_trait(trait):
                setattr(slider, trait, True)
    return SliderPlot(plot_fn, sliders, update_fn)


def discount_widget(gamma: float = 0.9) -> SliderPlot:
    """A gamma slider over :func:`~course_lib.plotting.plot_discount_weights`."""
    slider = ipywidgets.FloatSlider(value=gamma, min=0.0, max=1.0, step=0.01, description="gamma", readout_format=".2f")
    return slider_plot(plot_discount_weights, update_discount_weights, gamma=slider)


def gae_widget(gamma: float = 0.95, lam: float = 0.5) -> SliderPlot:
    """gamma and lam sliders over :func:`~course_lib.plotting.plot_gae_on_chain` (chapter 04).

    The batch of episodes is sampled once; each redraw recomputes only the critic,
    the truth and GAE on that batch.
    """
    from course_lib.plotting import plot_gae_on_chain, update_gae_on_chain

    gamma_slider = ipywidgets.FloatSlider(
        value=gamma, min=0.5, max=1.0, step=0.01, description="gamma", readout_format=".2f"
    )
    lam_slider = ipywidgets.FloatSlider(value=lam, min=0.0, max=1.0, step=0.05, description="lam", readout_format=".2f")
    return slider_plot(plot_gae_on_chain, update_gae_on_chain, gamma=gamma_slider, lam=lam_slider)


def baseline_variance_widget(group_size: int = 8, baseline: str = "leave_one_out") -> SliderPlot:
    """A group-size slider and a baseline menu over :func:`~course_lib.plotting.plot_baseline_variance` (chapter 03).

    Every (group size, baseline) pair is measured once, when the widget is built
    (:func:`course_lib.lectures.variance.group_variance_table`, about a second); a redraw only plots.
    """
    from functools import partial

    from course_lib.lectures import variance
    from course_lib.plotting import plot_baseline_variance

    table = variance.default_group_variance_table()
    size_slider = ipywidgets.IntSlider(
        value=group_size, min=min(table.group_sizes), max=max(table.group_sizes), step=1, description="group_size"
    )
    menu = ipywidgets.Dropdown(
        options=[(variance.BASELINE_LABELS[name], name) for name in variance.BASELINES],
        value=baseline,
        description="baseline",
    )
    return slider_plot(partial(plot_baseline_variance, table=table), group_size=size_slider, baseline=menu)


def mc_gradient_widget(n_samples: int = 16, seed: int = 0) -> SliderPlot:
    """Sample-size and seed sliders over :func:`~course_lib.plotting.plot_mc_gradient_estimate` (chapter 02).

    The sample size moves in powers of 4, from 1 to 4096: each step should halve the error.
    """
    from course_lib.plotting import plot_mc_gradient_estimate

    sizes = [4**k for k in range(7)]
    if n_samples not in sizes:
        raise ValueError(f"n_samples: expected one of {sizes}, got {n_samples!r}")
    size_slider = ipywidgets.SelectionSlider(options=sizes, value=n_samples, description="n_samples")
    seed_slider = ipywidgets.IntSlider(value=seed, min=0, max=20, step=1, description="seed")
    return slider_plot(plot_mc_gradient_estimate, n_samples=size_slider, seed=seed_slider)


def ppo_clip_widget(clip_eps: float = 0.2) -> SliderPlot:
    """A clip_eps slider over :func:`~course_lib.plotting.plot_ppo_clip` (chapter 05).

    Each redraw recomputes the objective and its gradient by autograd through
    :func:`course_lib.ppo.clipped_surrogate` (a few hundred points) and draws two panels.
    """
    from course_lib.plotting import plot_ppo_clip, update_ppo_clip

    slider = ipywidgets.FloatSlider(
        value=clip_eps, min=0.05, max=0.5, step=0.01, description="clip_eps", readout_format=".2f"
    )
    return slider_plot(plot_ppo_clip, update_ppo_clip, clip_eps=slider)


def grpo_group_widget(group_size: int = 8) -> SliderPlot:
    """A group_size slider over :func:`~course_lib.plotting.plot_group_signal` (chapter 06).

    For binary rewards: how often a group of G carries no signal (all rewards equal),
    and how large the advantages of a mixed group are with and without GRPO's std
    normalisation, as a function of the prompt's success rate.
    """
    from course_lib.plotting import plot_group_signal

    if isinstance(group_size, bool) or not isinstance(group_size, int) or not 2 <= group_size <= 64:
        raise ValueError(f"group_size: expected an int in [2, 64], got {group_size!r}")
    slider = ipywidgets.IntSlider(value=group_size, min=2, max=64, step=1, description="group_size")
    return slider_plot(plot_group_signal, group_size=slider)


def sweep_widget(group_size: int = 8, clip_eps: float = 0.2) -> SliderPlot:
    """group_size and clip_eps sliders over :func:`~course_lib.plotting.plot_sweep` (chapter 07).

    Browses the precomputed sweep of ``course_lib/lectures/data/sweep_07.json`` (``benchmarks/sweep_07.py``
    regenerates it): the file is read once, when the widget is built; a redraw only plots.
    """
    from functools import partial

    from course_lib.lectures.sweep import load_sweep
    from course_lib.plotting import plot_sweep, update_sweep

    sweep = load_sweep()["sweep"]
    if group_size not in sweep["group_sizes"]:
        raise ValueError(f"group_size: expected one of {sweep['group_sizes']}, got {group_size!r}")
    if clip_eps not in sweep["clip_eps"]:
        raise ValueError(f"clip_eps: expected one of {sweep['clip_eps']}, got {clip_eps!r}")
    size_slider = ipywidgets.SelectionSlider(options=sweep["group_sizes"], value=group_size, description="group_size")
    eps_slider = ipywidgets.SelectionSlider(options=sweep["clip_eps"], value=clip_eps, description="clip_eps")
    return slider_plot(
        partial(plot_sweep, sweep=sweep),
        partial(update_sweep, sweep=sweep),
        group_size=size_slider,
        clip_eps=eps_slider,
    )
