"""What the website shows in place of a notebook's widgets (``course_lib.authoring.site``).

A widget cannot move without a kernel. The notebooks store each widget's state with them (JupyterLab saves it), and
the course's sliders keep their picture there: an ``ipywidgets.Image`` whose PNG is a base64 buffer of the widget
state. So a slider becomes that picture, under one line saying what moves in JupyterLab and at which settings the
picture was drawn; a tqdm progress bar becomes the line tqdm would print in a terminal.
"""

from __future__ import annotations

import html
import re

import nbformat

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PROGRESS_MODELS = ("FloatProgressModel", "IntProgressModel")


def _widget_models(model_id: str, state: dict) -> list[dict]:
    """The widget's model and all its descendants' (a slider plot is a VBox of controls, an Image and an Output)."""
    models, queue = [], [model_id]
    while queue:
        model = state.get(queue.pop(0))
        if model is not None:
            models.append(model)
            queue += [child.removeprefix("IPY_MODEL_") for child in model["state"].get("children", [])]
    return models


def _stored_png(models: list[dict]) -> str | None:
    """The base64 PNG of the first ``ipywidgets.Image`` that stored its picture, if any."""
    for model in models:
        if model["model_name"] == "ImageModel" and model["state"].get("format", "png") == "png":
            for buffer in model.get("buffers", []):
                if buffer.get("path") == ["value"] and buffer.get("encoding") == "base64":
                    return buffer["data"]
    return None


def _words(names: list[str]) -> str:
    """``["a", "b", "c"]`` -> ``"a, b and c"``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def slider_note(models: list[dict], text: str) -> str:
    """One line under a slider's picture: what moves in JupyterLab, and the settings the picture was drawn at.

    ``text`` is the widget's plain-text repr, ``SliderPlot(plot_gae_on_chain: gamma=0.95, lam=0.5)``."""
    controls = [m["state"]["description"] for m in models if m["state"].get("description")]
    what = f"move {_words(controls)}" if controls else "move the sliders"
    settings = re.fullmatch(r"\w+\((?:[\w.]+: )?(.+)\)", text.strip())
    shown = f", drawn at {settings.group(1)}" if settings else ""
    return f"In JupyterLab, {what} and the plot redraws; here, the picture the notebook stored{shown}."


def progress_line(models: list[dict]) -> str:
    """A tqdm progress bar as tqdm prints it in a terminal: ``label: 100%|██████████| 100/100 [00:01<00:00]``."""
    labels = [html.unescape(m["state"]["value"]) for m in models if m["model_name"] == "HTMLModel"]
    bar = next(m["state"] for m in models if m["model_name"] in PROGRESS_MODELS)
    filled = round(10 * bar["value"] / bar["max"]) if bar["max"] else 10
    line = (labels[0] if labels else "") + "|" + "█" * filled + " " * (10 - filled) + "|" + "".join(labels[1:])
    return line.replace("\u2007", " ")


def static_outputs(output: dict, state: dict) -> list[nbformat.NotebookNode]:
    """What the site shows for one output: itself, or for a widget its stored picture and a line, or its text."""
    if WIDGET_VIEW not in output.get("data", {}):
        return [output]
    models = _widget_models(output["data"][WIDGET_VIEW]["model_id"], state)
    text = "".join(output["data"].get("text/plain", ""))
    png = _stored_png(models)
    if png is not None:
        note = f'<p class="widget-note">{html.escape(slider_note(models, text))}</p>'
        return [
            nbformat.v4.new_output("display_data", data={"text/html": note}),
            nbformat.v4.new_output("display_data", data={"image/png": png}),
        ]
    if any(m["model_name"] in PROGRESS_MODELS for m in models):
        return [nbformat.v4.new_output("stream", name="stdout", text=progress_line(models) + "\n")]
    note = "An interactive widget that stored no picture: open the notebook in JupyterLab to use it."
    return [nbformat.v4.new_output("display_data", data={"text/html": f'<p class="widget-note">{note}</p>'})]
