"""Run one rebuilt notebook under nbval, in its own pytest process and an isolated kernel; say what each cell did.

The command line is the one an instructor would type for a single notebook::

    python -m pytest NOTEBOOK --nbval-lax --nbval-current-env --nbval-cell-timeout=60 \\
        --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider -c pytest.ini -o addopts=

plus ``-p course_lib.authoring.grading.nbval_report``, which writes one JSON line per cell event
(with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` and ``-p nbval.plugin``: no other plugin loads),
truncates what a cell prints, and starts the kernel inside its :class:`Sandbox`.

Who can touch what. The rebuilt notebook, ``pytest.ini``, the events file and pytest's
output live in a *private* folder of the grader's (mode 0700). pytest runs as the grader;
only the kernel runs the student's code, in a *scratch* folder of its own. When the
grader is root, the kernel runs as an unprivileged user of its own (one per ``-j`` slot),
in a mount namespace where the output folder, the submissions, the solutions and the
hidden checks are hidden under empty folders, and a pid namespace of which it is the
first process: it cannot read the notebook (so not the per-run seed of the cases), forge
the events, write the reports or signal the grader or another kernel, and whatever it
forked or daemonised dies with it. Its resident memory is watched (:class:`Memory`).

A cell that raises does not stop the run: nbval runs every cell of the notebook in one
kernel, so a wrong answer or a crash in one exercise costs only that exercise. What nbval
does on a timeout (read in ``nbval/plugin.py``): after ``--nbval-cell-timeout`` seconds it
interrupts the kernel; a cell that swallows the interrupt, or keeps printing, is not
stopped by nbval. So the runner stops the whole process tree as soon as a cell has
timed out, has run ``timeout + GRACE`` seconds, or the kernel died while it ran, and
:mod:`course_lib.authoring.grading.verdict` runs the notebook again without that exercise.
"""

from __future__ import annotations

import json
import os
import random
import re
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from course_lib.authoring.grading.sandbox import Sandbox
from course_lib.authoring.grading.watchdog import Memory, _alive, _pinned, _stop_tree
from course_lib.checks import guard

ROOT = Path(__file__).resolve().parents[3]
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # IPython colours its tracebacks
GRACE = 2.0  # seconds past the cell timeout (nbval interrupts at the timeout) before the watchdog stops all
STARTUP = 120.0  # seconds allowed for pytest and the kernel to start
KERNEL_START_TRIES = 3
MAX_LOG = 1_000_000  # characters of pytest's own report read back for the log
SANDBOX_ENV = "COURSE_GRADE_SANDBOX"  # how the runner tells the plugin (in the pytest process) what to do
PLUGIN = "course_lib.authoring.grading.nbval_report"  # the plugin pytest loads (a test may load a variant of it)


@dataclass
class CellOutcome:
    """What one code cell did: ``passed``, ``error``, ``timeout``, ``skipped``, ``died`` (the kernel or pytest
    died while it ran), ``memory`` (stopped over the memory limit), ``dead`` (the kernel was gone before it
    started), ``not run`` (never reached) or ``setup-error`` (no kernel at all)."""

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
    pytest_died: bool = False  # pytest itself ended by a signal nobody here sent
    seconds: float = 0.0
    kernel_retries: int = 0  # kernels that died before answering, started again
    key: bytes = b""  # the run's key: the seeds of its drawn cases, and the signature of its guard's verdicts
    verdicts: dict[str, list[str]] = field(default_factory=dict)  # check cell id -> its guard's signed verdicts


def child_env(threads: int) -> dict[str, str]:
    """The environment of the pytest process and its kernel: this course_lib first, quiet, few threads."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COV_CORE_", "COVERAGE_", "PYTEST_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("MPLBACKEND", "Agg")
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only nbval and ours: a second less per submission
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.setdefault(name, str(threads))  # -j N kernels share the cores instead of fighting over them
    return env


def _ended(path) -> set[int]:
    """The cells whose end the plugin has recorded so far."""
    return {r["cell"] for r in _events(path) if r["event"] == "end"}


def _events(path: Path) -> list[dict]:
    records = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line cut short by a kill
    return records


def run_nbval(
    notebook: Path,
    timeout: float,
    threads: int = 1,
    sanitize: Path | None = None,
    scratch: Path | None = None,
    sandbox: Sandbox | None = None,
    records: tuple[str, ...] = (),
) -> Run:
    """Run ``notebook`` under ``pytest --nbval-lax`` in a subprocess, up to its first timeout or death.

    ``records``: the names of the check cells' record folders, which the plugin takes once each (``take_records``).

    The run is stopped as soon as a cell times out or the kernel dies under a cell (the
    later cells are "not run"). Never raises for what the notebook does.

    A kernel that dies before it answers at all is the grader's failure, not the
    student's (kernels started side by side with ``-j`` can race for the same ports),
    so such a run is started again, up to ``KERNEL_START_TRIES`` times in all.
    """
    for retry in range(KERNEL_START_TRIES):
        run = _run_once(notebook, timeout, threads, sanitize, scratch or notebook.parent, sandbox, records)
        run.kernel_retries = retry
        first = run.cells.get(0, CellOutcome("not run"))
        if first.outcome not in ("passed", "setup-error") and not run.pytest_died:
            # the grader's first cell (before any student code) failed, or the kernel died in it: the grader's fault
            why = first.message or f"{first.ename}: {first.evalue}".strip(": ") or first.outcome
            run.cells = {
                n: CellOutcome("setup-error", message=f"the grading kernel's first cell: {why}") for n in run.cells
            }
            run.cells.setdefault(0, CellOutcome("setup-error", message=f"the grading kernel's first cell: {why}"))
        if not any(cell.outcome == "setup-error" for cell in run.cells.values()):
            break
        time.sleep(0.5 + random.random())  # out of step with whichever kernel it raced
    return run


def _run_once(
    notebook: Path,
    timeout: float,
    threads: int,
    sanitize: Path | None,
    scratch: Path,
    sandbox: Sandbox | None,
    records: tuple[str, ...] = (),
) -> Run:
    folder = notebook.parent
    events_path, output_path = folder / "cells.jsonl", folder / "pytest-output.txt"
    events_path.unlink(missing_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "pytest",
        notebook.name,
        "--nbval-lax",
        "--nbval-current-env",
        f"--nbval-cell-timeout={timeout:g}",
        "-p",
        "no:cacheprovider",
        "-p",
        PLUGIN,
        "-p",
        "nbval.plugin",
        f"--grade-events={events_path}",
        "-c",
        "pytest.ini",
        "--rootdir",
        ".",
        "-o",
        "addopts=",
        "--color=no",
        "-q",
        "-rfE",
    ]
    if sanitize is not None:
        command.append(f"--nbval-sanitize-with={sanitize}")
    env = child_env(threads)
    env["JUPYTER_RUNTIME_DIR"] = str(scratch)  # the connection file, and the kernel's Unix sockets (sandbox.py)
    run, start, stuck, died, greedy = Run(), time.monotonic(), None, None, None
    run.key, (read_end, write_end) = secrets.token_bytes(16), os.pipe()
    _give_key(scratch, sandbox, run.key, write_end)
    box = sandbox or Sandbox()
    env[SANDBOX_ENV] = json.dumps({**json.loads(box.for_plugin(scratch)), "pipe": write_end, "records": list(records)})
    os.set_blocking(read_end, False)
    pipe = VerdictPipe(run.key)
    with open(output_path, "wb") as output:
        proc = subprocess.Popen(
            command,
            cwd=folder,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            pass_fds=(write_end,),
        )
        os.close(write_end)  # the kernel holds it now; the grader only reads
        mounts = [str(scratch)] if box.uid is not None and os.path.ismount(scratch) else []
        kernel, pytest = None, _pinned(proc.pid)
        memory = Memory(box.memory, mounts, box.namespaces, taken=folder / "records")
        while proc.poll() is None:
            time.sleep(0.2)
            pipe.read(read_end)
            records = _events(events_path)
            if kernel is None:  # pinned as soon as its first cell starts, while it surely runs
                kernel = _pinned(next((r["pid"] for r in records if r["event"] == "kernel"), None))
            started = {r["cell"]: r["time"] for r in records if r["event"] == "start"}
            ended = {r["cell"]: _outcome(r) for r in records if r["event"] == "end"}
            running = {cell: t for cell, t in started.items() if cell not in ended}
            if running and time.time() - max(running.values()) > timeout + GRACE:
                stuck = max(running, key=running.get)  # nbval could not stop it: we do
            elif (
                running
                and kernel is not None
                and not _alive(kernel)
                and proc.poll() is None
                and max(running, key=running.get) not in _ended(events_path)
            ):
                # the kernel died under this cell: no need to wait. (Read the events again first: the cell may
                # have ended since the read above, and nbval stops its kernel after the last cell.)
                died = max(running, key=running.get)
            elif started and memory.over(kernel):
                greedy = max(started, key=started.get)  # the cell running, or the last one that ran
            timed_out = any(cell.outcome == "timeout" for cell in ended.values())
            if (
                stuck is not None
                or died is not None
                or greedy is not None
                or timed_out
                or (not records and time.monotonic() - start > STARTUP)
            ):
                run.killed = True
                _stop_tree(proc, kernel, sandbox, pytest)
        if not run.killed and proc.returncode < 0:
            run.pytest_died = True  # killed by a signal that did not come from the watchdog
        _stop_tree(proc, kernel, sandbox, pytest)  # nbval stops its kernel; make sure, and its children too
    pipe.read(read_end)
    os.close(read_end)
    run.verdicts = pipe.verdicts
    run.seconds = time.monotonic() - start
    with open(output_path, encoding="utf-8", errors="replace") as f:
        run.output = ANSI.sub("", f.read(MAX_LOG))
    records = _events(events_path)
    for record in records:
        if record["event"] == "end":
            run.cells[record["cell"]] = _outcome(record)
    if stuck is not None:
        run.cells[stuck] = CellOutcome("timeout", message="stopped by the grader's watchdog")
    if greedy is not None:
        run.cells[greedy] = CellOutcome("memory", message=f"{memory.peak / 2**30:.1f} GB resident")
    if died is None and run.pytest_died:
        running = [r["cell"] for r in records if r["event"] == "start" and r["cell"] not in run.cells]
        died = running[-1] if running else None
    if died is not None and died not in run.cells:  # a cell whose end was recorded did not die
        why = "the grading process was killed" if run.pytest_died else "the kernel died"
        run.cells[died] = CellOutcome("died", message=f"{why} while this cell ran")
    return run


def _give_key(scratch: Path, sandbox: Sandbox | None, key: bytes, pipe: int) -> None:
    """The run's key and the guard's pipe, in a file of the kernel's that its first cell reads and deletes."""
    path = scratch / guard.KEY_FILE
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f"{key.hex()} {pipe}")
        if sandbox is not None and sandbox.uid is not None:
            os.fchown(f.fileno(), sandbox.uid, sandbox.gid)  # the file opened, not a name that could be a link now


class VerdictPipe:
    """The guard's verdicts, read from its pipe as they come (see :mod:`course_lib.checks.guard`): each line is
    checked as soon as it is whole and kept only when signed with the run's key, so what the kernel writes there
    costs the grader at most ``MAX_LINE`` bytes, however much it writes (a line longer than that is dropped)."""

    MAX_LINE = 16 << 10  # bytes: a verdict is a cell id, a digest, a name and a problem or two
    MAX_READ = 1 << 20  # bytes read per call: the rest waits for the next poll

    def __init__(self, key: bytes):
        self.key = key
        self.partial = b""  # the start of a line not yet whole
        self.skipping = False  # inside a line already too long: dropped up to its end
        self.verdicts: dict[str, list[str]] = {}  # check cell id -> its guard's signed verdicts, in order

    def read(self, fd: int) -> None:
        """What the pipe holds now (never blocks)."""
        for _ in range(self.MAX_READ // 65536):
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                return
            self.feed(chunk)

    def feed(self, chunk: bytes) -> None:
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            if self.skipping:
                self.skipping = False  # the end of the long line: the next one may be the guard's
            elif len(line) <= self.MAX_LINE:
                self._keep(line)
        if len(self.partial) > self.MAX_LINE:
            self.partial, self.skipping = b"", True

    def _keep(self, line: bytes) -> None:
        """A verdict: ``"cell <id> records=<digest> clean | <problems>"``; a line not signed with the run's key
        (written by the student's code) is dropped."""
        text = guard.verify(self.key, line.decode("utf-8", "replace"))
        if text is not None and text.startswith("cell "):
            cell, _, rest = text[len("cell ") :].partition(" ")
            self.verdicts.setdefault(cell, []).append(rest)


def _outcome(record: dict) -> CellOutcome:
    message = record.get("message", "")
    outcome = record["outcome"]
    if outcome == "error" and "Timeout of" in message:
        outcome = "timeout"
    elif outcome == "error" and "Kernel dead" in message:
        outcome = "dead"
    elif outcome == "error" and "Kernel died" in message:
        outcome = "died"
    return CellOutcome(outcome, record.get("ename", ""), record.get("evalue", ""), record.get("stdout", ""), message)
