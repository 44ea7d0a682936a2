"""Run one rebuilt notebook under nbval, in its own pytest process and kernel, and say what each cell did.

The command line is the one an instructor would type for a single notebook::

    python -m pytest NOTEBOOK --nbval-lax --nbval-current-env --nbval-cell-timeout=60 \\
        --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider -c pytest.ini -o addopts=

plus ``-p course_lib.authoring.grading.nbval_report``, which writes one JSON line per cell event
(with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` and ``-p nbval.plugin``: no other plugin loads).
``-c`` points at an empty ``pytest.ini`` next to the notebook, so the repository's
``addopts`` (coverage) and ``conftest.py`` are not used.

A cell that raises does not stop the run: nbval runs every cell of the notebook in one
kernel, so a wrong answer or a crash in one exercise costs only that exercise (unless a
later exercise calls its function). What nbval does on a timeout (read in ``nbval/plugin.py``): after ``--nbval-cell-timeout``
seconds it interrupts the kernel. Usually the cell then ends with ``KeyboardInterrupt``
and the later cells run on in the same kernel (nbval marks them xfail, which is why
the plugin records each call's real outcome). If the cell swallows the interrupt
(``except BaseException: pass`` in a loop), nbval waits 5 more seconds, stops the kernel,
and every later cell fails with "Kernel dead on test start"; if the cell keeps printing,
nbval never stops reading its output. So the runner stops the whole process tree (pytest
and the kernel, which runs in a session of its own) as soon as a cell has timed out,
or has run ``timeout + GRACE`` seconds, and :mod:`course_lib.authoring.grading.verdict` runs the
notebook again from the start without that exercise: one infinite loop costs only its
own exercise, and the later cells are graded in a kernel that never saw it.
"""

from __future__ import annotations

import json
import os
import re
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil  # installed with ipykernel, which the course needs anyway

ROOT = Path(__file__).resolve().parents[3]
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # IPython colours its tracebacks
GRACE = 2.0  # seconds past the cell timeout (nbval interrupts at the timeout) before the watchdog stops all
STARTUP = 120.0  # seconds allowed for pytest and the kernel to start


@dataclass
class CellOutcome:
    """What one code cell did: ``passed``, ``error``, ``timeout``, ``skipped``, ``dead`` (the kernel was
    gone before it started), ``not run`` (never reached) or ``setup-error`` (no kernel at all)."""

    outcome: str
    ename: str = ""
    evalue: str = ""
    stdout: str = ""
    message: str = ""


@dataclass
class Run:
    cells: dict[int, CellOutcome] = field(default_factory=dict)  # by position among code cells
    output: str = ""  # pytest's own report, for the log
    killed: bool = False  # the watchdog had to stop it
    seconds: float = 0.0
    kernel_retries: int = 0  # kernels that died before answering, started again


KERNEL_START_TRIES = 3


def child_env(threads: int) -> dict[str, str]:
    """The environment of the pytest process and its kernel: this course_lib first, quiet, few threads."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COV_CORE_", "COVERAGE_", "PYTEST_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("MPLBACKEND", "Agg")
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only nbval and ours: a second less per submission
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.setdefault(name, str(threads))  # -j N kernels share the cores instead of fighting over them
    return env


def _events(path: Path) -> list[dict]:
    records = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line cut short by a kill
    return records


def _stop_tree(proc: subprocess.Popen, kernel_pid: int | None) -> None:
    """Kill pytest, its kernel (which runs in a session of its own) and anything they started."""
    victims = []
    for pid in (proc.pid, kernel_pid):
        try:
            if pid:
                parent = psutil.Process(pid)
                victims += [parent] + parent.children(recursive=True)
        except psutil.Error:
            pass
    for victim in victims:
        try:
            victim.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    proc.wait()


def run_nbval(notebook: Path, timeout: float, threads: int = 1, sanitize: Path | None = None) -> Run:
    """Run ``notebook`` under ``pytest --nbval-lax`` in a subprocess, up to its first timeout.

    The run is stopped as soon as a cell times out (the later cells are "not run"): the
    kernel's state after an interrupt is not worth grading on, and a later cell calling
    the same function would hang again. Never raises for what the notebook does.

    A kernel that dies before it answers at all is the grader's failure, not the
    student's (kernels started side by side with ``-j`` can race for the same ports),
    so such a run is started again, up to ``KERNEL_START_TRIES`` times in all.
    """
    for retry in range(KERNEL_START_TRIES):
        run = _run_once(notebook, timeout, threads, sanitize)
        run.kernel_retries = retry
        if not any(cell.outcome == "setup-error" for cell in run.cells.values()):
            break
        time.sleep(0.5 + random.random())  # out of step with whichever kernel it raced
    return run


def _run_once(notebook: Path, timeout: float, threads: int, sanitize: Path | None) -> Run:
    folder = notebook.parent
    events_path, output_path = folder / "cells.jsonl", folder / "pytest-output.txt"
    events_path.unlink(missing_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    command = [sys.executable, "-m", "pytest", notebook.name, "--nbval-lax", "--nbval-current-env",
               f"--nbval-cell-timeout={timeout:g}", "-p", "no:cacheprovider", "-p", "course_lib.authoring.grading.nbval_report",
               "-p", "nbval.plugin", f"--grade-events={events_path}",
               "-c", "pytest.ini", "--rootdir", ".", "-o", "addopts=", "--color=no", "-q", "-rfE"]
    if sanitize is not None:
        command.append(f"--nbval-sanitize-with={sanitize}")
    run, start, stuck = Run(), time.monotonic(), None
    with open(output_path, "wb") as output:
        proc = subprocess.Popen(command, cwd=folder, stdout=output, stderr=subprocess.STDOUT,
                                env=child_env(threads), start_new_session=True)
        kernel_pid = None
        while proc.poll() is None:
            time.sleep(0.2)
            records = _events(events_path)
            kernel_pid = next((r["pid"] for r in records if r["event"] == "kernel"), kernel_pid)
            started = {r["cell"]: r["time"] for r in records if r["event"] == "start"}
            ended = {r["cell"]: _outcome(r) for r in records if r["event"] == "end"}
            running = {cell: t for cell, t in started.items() if cell not in ended}
            if running and time.time() - max(running.values()) > timeout + GRACE:
                stuck = max(running, key=running.get)  # nbval could not stop it: we do
            timed_out = any(cell.outcome == "timeout" for cell in ended.values())
            if stuck is not None or timed_out or (not records and time.monotonic() - start > STARTUP):
                run.killed = True
                _stop_tree(proc, kernel_pid)
        if kernel_pid and psutil.pid_exists(kernel_pid):  # nbval stops its kernel; make sure
            _stop_tree(proc, kernel_pid)
    run.seconds = time.monotonic() - start
    run.output = ANSI.sub("", output_path.read_text(encoding="utf-8", errors="replace"))
    for record in _events(events_path):
        if record["event"] == "end":
            run.cells[record["cell"]] = _outcome(record)
    if stuck is not None:
        run.cells[stuck] = CellOutcome("timeout", message="stopped by the grader's watchdog")
    return run


def _outcome(record: dict) -> CellOutcome:
    message = record.get("message", "")
    outcome = record["outcome"]
    if outcome == "error" and "Timeout of" in message:
        outcome = "timeout"
    elif outcome == "error" and "Kernel dead" in message:
        outcome = "dead"
    return CellOutcome(outcome, record.get("ename", ""), record.get("evalue", ""), record.get("stdout", ""), message)
