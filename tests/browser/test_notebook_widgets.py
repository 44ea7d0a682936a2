"""The notebooks with live widgets, used as a student uses them: in JupyterLab, in a real (headless) browser.

For each notebook in TABLE that exists: open it, wait until JupyterLab shows its kernel idle, clear the stored outputs
and run all cells from the Run menu, wait until every code cell has run, and check that no cell shows an error. Then
for each slider of the row: focus its handle, press the row's keys one at a time, and after each press check that the
value label changed and the plot redrew (a new image, with different pixels). A MutationObserver in the page times
each redraw from the key press to the new image; the times are printed at the end of the run. Screenshots of each
notebook after the interaction go to `test-artifacts/browser/`.

Every wait is on something JupyterLab shows (the kernel indicator, the cell prompts, the widget's image), never a
sleep, and every wait has a bound and a message that says what did not happen.
"""

from __future__ import annotations

import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
KERNEL = "course-grpo"  # the kernel every course notebook declares (`make setup` registers it)
KERNEL_READY_TIMEOUT_S = 90  # opening JupyterLab from cold and starting the kernel
RUN_ALL_TIMEOUT_S = 180  # a notebook runs in under 60 s on 2 cores; leave room for a busy machine
REDRAW_TIMEOUT_S = 20  # one slider step: a comm message, a matplotlib figure, an image


@dataclass(frozen=True)
class Slider:
    """A slider to move: its description (the first of `labels` found on the page) and the keys to press."""

    labels: tuple[str, ...]
    keys: tuple[str, ...]  # one at a time; each must change the value and redraw the plot


@dataclass(frozen=True)
class Row:
    """A notebook (a glob under the repository root) and its sliders; optional rows appear when the notebook does."""

    pattern: str
    sliders: tuple[Slider, ...]
    required: bool = False


TABLE = [
    Row("notebooks/00_welcome.ipynb", (Slider(("gamma",), ("ArrowLeft", "ArrowLeft", "ArrowRight")),), required=True),
    Row(
        "notebooks/04_*.ipynb",
        (Slider(("lam", "lambda"), ("ArrowLeft", "ArrowLeft", "ArrowRight")), Slider(("gamma",), ("ArrowLeft",))),
    ),
    Row("notebooks/05_*.ipynb", (Slider(("clip_eps", "epsilon"), ("ArrowRight", "ArrowRight", "ArrowLeft")),)),
    # Chapter 07's sweep browser: SelectionSliders over precomputed results.
    Row(
        "notebooks/07_*.ipynb",
        (Slider(("group_size",), ("ArrowRight", "ArrowLeft")), Slider(("clip_eps",), ("ArrowLeft",))),
    ),
]


def _rows():
    """One test per notebook that exists; a required notebook that is missing becomes a failing test."""
    for row in TABLE:
        paths = sorted(ROOT.glob(row.pattern))
        if not paths and row.required:
            yield pytest.param(row.pattern, row.sliders, id=Path(row.pattern).stem)
        for path in paths:
            yield pytest.param(path.relative_to(ROOT).as_posix(), row.sliders, id=path.stem)


# --- what the page shows, read with small scripts -------------------------------------------------------------------

# The notebook panel JupyterLab shows (the current tab), and in it the state of the kernel and of every code cell.
NOTEBOOK_STATE_JS = """() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  if (!panel) return null;
  const indicator = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  const kernel = panel.querySelector('.jp-Toolbar-kernelName');
  const dialog = document.querySelector('.jp-Dialog');
  return {
    status: indicator ? indicator.getAttribute('data-status') : null,
    kernel: kernel ? kernel.textContent.trim() : null,
    prompts: [...panel.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')].map(p => p.textContent.trim()),
    dialog: dialog ? dialog.innerText.trim() : null,
  };
}"""

# Outputs that show an error: a traceback (JupyterLab renders errors as stderr), or a widget that failed to display.
ERRORS_JS = """() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const found = [];
  for (const cell of panel.querySelectorAll('.jp-CodeCell')) {
    const prompt = cell.querySelector('.jp-InputArea-prompt').textContent.trim();
    for (const out of cell.querySelectorAll('.jp-OutputArea-output')) {
      const text = out.innerText;
      const isStderr = out.getAttribute('data-mime-type') === 'application/vnd.jupyter.stderr';
      if ((isStderr && /Traceback|^\\w*(Error|Exception)\\b/m.test(text)) || /Error displaying widget/.test(text))
        found.push(prompt + ' ' + text);
    }
  }
  return found;
}"""

# Both scripts above, installed in every page the tests open, so that the waits below can call them.
PAGE_HELPERS_JS = "window.browserTest = {state: " + NOTEBOOK_STATE_JS + ", errors: " + ERRORS_JS + "};"

# Finds the slider whose description is one of `labels`, and the nearest box around it (within its cell) that holds
# an image: the widget's plot. Marks both with data attributes so that Python can address them with selectors.
FIND_SLIDER_JS = """([labels, mark]) => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  for (const slider of panel.querySelectorAll('.widget-slider')) {
    const label = slider.querySelector('.widget-label');
    if (!label || !labels.includes(label.textContent.trim())) continue;
    let box = slider.parentElement;
    while (box && !box.querySelector('img') && !box.classList.contains('jp-Cell')) box = box.parentElement;
    if (!box || !box.querySelector('img')) continue;
    slider.setAttribute('data-browser-test-slider', mark);
    box.setAttribute('data-browser-test-plot', mark);
    return label.textContent.trim();
  }
  return null;
}"""

# Before a key press: remember the plot's images and start two clocks, the key press (the keydown event's time
# stamp) and the redraw (a MutationObserver notes when the box shows a new, different set of images).
ARM_REDRAW_CLOCK_JS = """(mark) => {
  const box = document.querySelector(`[data-browser-test-plot="${mark}"]`);
  const images = () => [...box.querySelectorAll('img')].map(img => img.src).join('|');
  const clock = window.__redrawClock = {before: images(), keyAt: null, drawnAt: null};
  document.addEventListener('keydown', e => { if (clock.keyAt === null) clock.keyAt = e.timeStamp; },
                            {capture: true, once: true});
  clock.observer = new MutationObserver(() => {
    const now = images();
    if (clock.drawnAt === null && now && now !== clock.before) {
      clock.drawnAt = performance.now();
      clock.observer.disconnect();
    }
  });
  clock.observer.observe(box, {subtree: true, childList: true, attributes: true, attributeFilter: ['src']});
}"""

# Resolves when the browser has a moment with nothing to do (or after 2 s). The test waits for it before each key
# press: the screenshots it takes just before (the plot's pixels, to compare after) keep the browser and the machine
# busy for a few tens of milliseconds after they return, which the first redraw of a slider was timed with
# (measured: the comm message left 36 to 51 ms after the key press instead of 1 to 3). A student reading the plot
# between two moves gives the page that moment too.
PAGE_IDLE_JS = "() => new Promise(done => requestIdleCallback(() => done(), {timeout: 2000}))"

# The redraw is done when the observer saw new images and every image in the box has loaded; a traceback in the box
# (a callback that raised inside the widget's Output) ends the wait at once.
REDRAWN_JS = """(mark) => {
  const clock = window.__redrawClock;
  const box = document.querySelector(`[data-browser-test-plot="${mark}"]`);
  const errors = [...box.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
    .map(out => out.innerText).filter(text => /Traceback/.test(text));
  if (errors.length > 0) return {error: errors.join('\\n')};
  const images = [...box.querySelectorAll('img')];
  const loaded = images.length > 0 && images.every(img => img.complete && img.naturalWidth > 0);
  return clock.drawnAt !== null && loaded ? {keyAt: clock.keyAt, drawnAt: clock.drawnAt} : false;
}"""

# --- the steps a student takes -------------------------------------------------------------------------------------


def _wait(page, script, arg, timeout_s, what_did_not_happen, explain=None):
    """Waits until `script` returns something truthy, and returns it; fails saying what did not happen.

    `explain` is a function of the page whose text (where things stood) is added to the failure message.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    try:
        return page.wait_for_function(script, arg=arg, timeout=timeout_s * 1000, polling=100).json_value()
    except PlaywrightTimeoutError:
        pass  # fail below, outside the except block, so that the report shows our message alone
    where = f"\n{explain(page)}" if explain else ""
    pytest.fail(f"within {timeout_s} s, {what_did_not_happen}{where}", pytrace=False)


def _notebook_state(page):
    return f"last state of the notebook: {page.evaluate(NOTEBOOK_STATE_JS)}"


def _log_console_errors(page):
    """The text of JupyterLab's log console when it holds a traceback, else "".

    Output of a widget callback outside any Output widget (a callback that raised, say) is not shown in the
    notebook: JupyterLab puts it in the log console and shows a counter in the status bar.
    """
    item = page.locator(".jp-LogConsoleStatusItem:not(.lm-mod-hidden)")
    if item.count() == 0:
        return ""
    item.click()
    panel = page.locator(".jp-LogConsolePanel")
    panel.wait_for(state="visible", timeout=10_000)
    text = panel.inner_text()
    return text if re.search(r"Traceback|^\w*(Error|Exception)\b", text, re.MULTILINE) else ""


def _open_and_wait_for_kernel(page, jupyterlab, notebook, kernel_name):
    """Opens the notebook in a fresh workspace and waits until JupyterLab shows its kernel as idle."""
    page.goto(jupyterlab.lab_url(notebook, workspace=f"browser-test-{Path(notebook).stem}"))
    ready = """() => {
      const s = window.browserTest.state();
      if (!s) return false;
      if (s.dialog) return s;  // e.g. "Select Kernel" when the notebook's kernel is not installed
      return s.status === 'idle' && s.kernel !== null && s.kernel !== 'No Kernel' ? s : false;
    }"""
    state = _wait(
        page, ready, None, KERNEL_READY_TIMEOUT_S,
        f"JupyterLab did not show {notebook} with an idle kernel", explain=_notebook_state,
    )  # fmt: skip
    assert not state["dialog"], (
        f"JupyterLab opened a dialog instead of starting the kernel {kernel_name!r} "
        f"(is it registered? `make setup` does that):\n{state['dialog']}"
    )


def _menu(page, menu, command):
    """Clicks a menu of the menu bar, then the item that runs `command` (JupyterLab's command id)."""
    page.locator("li.lm-MenuBar-item", has_text=re.compile(rf"^{menu}$")).click()
    page.locator(f'li.lm-Menu-item[data-command="{command}"]').click()


def _run_all_cells(page, notebook, n_to_run):
    """Clears the stored outputs, runs all cells, and waits until every code cell with code has run (or one failed)."""
    _menu(page, "Edit", "editmenu:clear-all")
    _menu(page, "Run", "runmenu:run-all")
    done = """(n) => {
      const s = window.browserTest.state();
      const numbered = s.prompts.filter(p => /^\\[\\d+\\]:$/.test(p)).length;
      const busy = s.status !== 'idle' || s.prompts.some(p => p.includes('*'));
      return !busy && (numbered >= n || window.browserTest.errors().length > 0);
    }"""
    _wait(
        page, done, n_to_run, RUN_ALL_TIMEOUT_S,
        f"Run All Cells did not finish: expected {n_to_run} code cells of {notebook} to show an execution count",
        explain=_notebook_state,
    )  # fmt: skip


def _assert_no_errors(page, notebook):
    errors = page.evaluate(ERRORS_JS)
    shown = "\n\n".join(error[-2000:] for error in errors)
    assert not errors, f"{notebook}: {len(errors)} cell output(s) show an error:\n{shown}"


def _move_slider(page, notebook, slider, mark, redraw_times, artifacts):
    """Presses the slider's keys one by one; after each, the value label changes and the plot redraws."""
    label = _wait(
        page, FIND_SLIDER_JS, [list(slider.labels), mark], REDRAW_TIMEOUT_S,
        f"{notebook} shows no slider described {' or '.join(map(repr, slider.labels))} with a plot beside it",
    )  # fmt: skip
    handle = page.locator(f'[data-browser-test-slider="{mark}"] .noUi-handle').first
    readout = page.locator(f'[data-browser-test-slider="{mark}"] .widget-readout').first
    plot = page.locator(f'[data-browser-test-plot="{mark}"]')
    image = plot.locator("img").first
    stem = Path(notebook).stem
    handle.scroll_into_view_if_needed()
    plot.screenshot(path=artifacts / f"{stem}-{label}-before.png")
    for key in slider.keys:
        value_before, pixels_before = readout.inner_text(), image.screenshot()
        page.evaluate(ARM_REDRAW_CLOCK_JS, mark)
        handle.focus()  # as a student who clicked the handle: the arrow keys now move it one step
        page.evaluate(PAGE_IDLE_JS)
        page.keyboard.press(key)
        clock = _wait(
            page, REDRAWN_JS, mark, REDRAW_TIMEOUT_S,
            f"the plot beside slider {label!r} of {notebook} did not redraw after {key} (value {value_before})",
            explain=lambda page: _log_console_errors(page)[-3000:] or "JupyterLab's log console shows no error",
        )  # fmt: skip
        assert "error" not in clock, f"{key} on slider {label!r} of {notebook} shows an error:\n{clock.get('error')}"
        value_after = readout.inner_text()
        assert value_after != value_before, f"{key} on slider {label!r} left its value label at {value_before}"
        assert image.screenshot() != pixels_before, f"{key} on slider {label!r} gave a new image with the same pixels"
        assert clock["keyAt"] is not None, f"the page saw no keydown for {key} on slider {label!r}"
        ms = clock["drawnAt"] - clock["keyAt"]
        what = f"{stem}: {label} {key} {value_before} -> {value_after}"
        load = os.getloadavg()[0]
        redraw_times.append((what, ms, load))
        print(f"{what}: plot redrawn {ms:.0f} ms after the key press (load average {load:.1f})")
    plot.screenshot(path=artifacts / f"{stem}-{label}-after.png")
    errors = _log_console_errors(page)
    assert not errors, f"a widget callback of {notebook} raised (JupyterLab's log console):\n{errors[-2000:]}"


def _cells_to_run(path):
    """How many code cells Run All executes: JupyterLab skips a code cell that holds only whitespace."""
    nb = nbformat.read(path, as_version=4)
    return sum(cell.cell_type == "code" and cell.source.strip() != "" for cell in nb.cells)


def _save_artifacts(page, artifacts, stem, console):
    """A screenshot (after the interaction, or where a failure left the page) and the browser console; best effort,
    so that a page that died does not hide the failure that killed it."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        page.screenshot(path=artifacts / f"{stem}.png")
    except PlaywrightError as err:
        console.append(f"(no screenshot: {err})")
    (artifacts / f"{stem}-console.log").write_text("\n".join(console) + "\n")


@contextmanager
def _student_at(chromium, jupyterlab, artifacts, notebook):
    """A fresh browser context with `notebook` open, its kernel idle; afterwards a screenshot and the console go to
    test-artifacts, and the notebook's kernel is shut down."""
    nb = nbformat.read(jupyterlab.root / notebook, as_version=4)
    kernel_name = nb.metadata.get("kernelspec", {}).get("name", "?")
    stem = Path(notebook).stem
    context = chromium.new_context(viewport={"width": 1280, "height": 1000})
    context.add_init_script(PAGE_HELPERS_JS)
    page = context.new_page()
    page.set_default_timeout(30_000)
    console = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    try:
        _open_and_wait_for_kernel(page, jupyterlab, notebook, kernel_name)
        yield page
    finally:
        _save_artifacts(page, artifacts, stem, console)
        context.close()
        jupyterlab.shut_down_kernels(notebook)


@pytest.mark.parametrize("notebook, sliders", list(_rows()))
def test_notebook_runs_and_sliders_redraw(notebook, sliders, chromium, jupyterlab, artifacts, redraw_times):
    assert (ROOT / notebook).exists(), f"{notebook} is missing: the course needs it (see {Path(__file__).name})"
    n_to_run = _cells_to_run(jupyterlab.root / notebook)
    started = time.monotonic()
    with _student_at(chromium, jupyterlab, artifacts, notebook) as page:
        opened = time.monotonic()
        _run_all_cells(page, notebook, n_to_run)
        ran = time.monotonic()
        print(f"{notebook}: opened with the kernel idle in {opened - started:.1f} s, Run All took {ran - opened:.1f} s")
        _assert_no_errors(page, notebook)
        for i, slider in enumerate(sliders):
            _move_slider(page, notebook, slider, f"slider-{i}", redraw_times, artifacts)


def test_a_cell_that_raises_is_seen(chromium, jupyterlab, artifacts):
    """The error check above is not vacuous: in a notebook whose second cell raises, Run All stops there and the
    check sees the traceback. (The notebook is written into the server's temporary folder, never the repository.)"""
    notebook = "browser-test/raises.ipynb"
    cells = ["print('first')", "raise RuntimeError('browser-test canary')", "print('never runs')"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code in cells])
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": KERNEL, "language": "python"}
    (jupyterlab.root / notebook).parent.mkdir(exist_ok=True)
    nbformat.write(nb, jupyterlab.root / notebook)
    with _student_at(chromium, jupyterlab, artifacts, notebook) as page:
        _run_all_cells(page, notebook, n_to_run=len(cells))
        errors = page.evaluate(ERRORS_JS)
        prompts = page.evaluate(NOTEBOOK_STATE_JS)["prompts"]
    assert len(errors) == 1 and "RuntimeError: browser-test canary" in errors[0], errors
    assert prompts == ["[1]:", "[2]:", "[ ]:"], f"Run All should stop at the error; prompts: {prompts}"


def test_kernels_are_reached_over_curvezmq(chromium, jupyterlab, artifacts):
    """The server gives each kernel CurveZMQ keys (conftest.py's SERVER_CONFIG, as `make setup` does for `make lab`),
    so no kernel logs that it runs over TCP without encryption."""
    notebook = "browser-test/quiet.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('kernel up')")])
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": KERNEL, "language": "python"}
    (jupyterlab.root / notebook).parent.mkdir(exist_ok=True)
    nbformat.write(nb, jupyterlab.root / notebook)
    with _student_at(chromium, jupyterlab, artifacts, notebook) as page:
        _run_all_cells(page, notebook, n_to_run=1)
    warnings = [line for line in jupyterlab.log.read_text().splitlines() if "without encryption" in line]
    assert not warnings, f"a kernel ran unencrypted ({jupyterlab.log}):\n{warnings[0]}"
