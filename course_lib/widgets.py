"""Sliders over the plots of :mod:`course_lib.plotting`, for the lecture notebooks.

A widget here is a plotting function plus sliders, nothing more: the function
is an ordinary ``plot_<what>(**knobs) -> Figure`` with defaults, tested without a
browser, and :func:`slider_plot` binds one slider to each keyword argument.

Redraws happen on every slider step (``continuous_update=True``), so they must be
cheap: each one calls the plotting function once, shows its figure in an
``ipywidgets.Output`` (replacing the previous one) and closes it, so figures do
not pile up in pyplot and the inline backend does not draw them a second time.
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets
import matplotlib.pyplot as plt
from IPython.display import display
from matplotlib.figure import Figure

from course_lib.plotting import plot_discount_weights


class SliderPlot(ipywidgets.VBox):
    """A column of sliders above the figure that ``plot_fn(**slider values)`` returns."""

    def __init__(self, plot_fn: Callable[..., Figure], sliders: dict[str, ipywidgets.ValueWidget]):
        self.plot_fn = plot_fn
        self.sliders = dict(sliders)
        self.out = ipywidgets.Output()
        super().__init__(children=[*self.sliders.values(), self.out])
        for slider in self.sliders.values():
            slider.observe(self._on_change, names="value")
        self.redraw()

    def values(self) -> dict:
        """The keyword arguments the plot is drawn with now."""
        return {name: slider.value for name, slider in self.sliders.items()}

    def redraw(self) -> Figure:
        """Draw the plot for the current slider values into the output area; return the (closed) figure."""
        fig = self.plot_fn(**self.values())
        if not isinstance(fig, Figure):
            raise TypeError(f"plot_fn: expected a matplotlib Figure back, got {type(fig).__name__}")
        with self.out:
            # wait=True keeps the old picture until the new one arrives: no flicker while sliding.
            self.out.clear_output(wait=True)
            display(fig)
        plt.close(fig)
        return fig

    def _on_change(self, change) -> None:
        self.redraw()


def slider_plot(plot_fn: Callable[..., Figure], **sliders: ipywidgets.ValueWidget) -> SliderPlot:
    """Sliders named after ``plot_fn``'s keyword arguments above the figure it draws, redrawn on every change."""
    if not callable(plot_fn):
        raise ValueError(f"plot_fn: expected a function returning a Figure, got {type(plot_fn).__name__}")
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
    return SliderPlot(plot_fn, sliders)


def discount_widget(gamma: float = 0.9) -> SliderPlot:
    """A gamma slider over :func:`~course_lib.plotting.plot_discount_weights`."""
    slider = ipywidgets.FloatSlider(value=gamma, min=0.0, max=1.0, step=0.01, description="gamma",
                                    readout_format=".2f")
    return slider_plot(plot_discount_weights, gamma=slider)
