"""A tiny pytest plugin: what happened in each notebook cell, one JSON line per event; and the kernel's sandbox.

``python -m course_lib.grade`` runs every rebuilt submission under nbval in its own
pytest process, with ``-p course_lib.authoring.grading.nbval_report --grade-events FILE``.
nbval reports a cell only as passed or failed, and after a timeout it marks every
later cell "xfail", which hides whether that cell really passed. This plugin writes,
for each cell, the raw truth the grader needs:

- ``{"event": "start", "cell": k, "time": t}`` when code cell ``k`` starts, flushed at
  once, so a watchdog outside the process sees which cell hangs even if pytest is killed;
- ``{"event": "end", "cell": k, "outcome": ..., "ename": ..., "evalue": ..., "stdout": ...,
  "message": ...}`` when it ends, read from the call itself, not from the xfail-adjusted report;
- ``{"event": "kernel", "pid": p}`` once the kernel is up, so the watchdog can stop it.

``outcome`` is ``passed``, ``error``, ``skipped`` (``NBVAL_SKIP``) or ``setup-error`` (the
kernel did not start). The grader, not this plugin, decides what an outcome means.

The events file is in the grader's private folder: the kernel, which runs as another
user in its own scratch folder (see :mod:`course_lib.authoring.grading.runner`), can
neither read nor write it. This plugin also starts the kernel in that sandbox (the
runner passes it in the ``COURSE_GRADE_SANDBOX`` environment variable, which the kernel
does not inherit) and drops what a cell prints beyond ``max_output`` characters as it
arrives, so a print loop costs neither memory nor disk.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from pathlib import Path

import pytest

# nbval reads notebooks with nbformat, whose validator imports jsonschema, which imports
# rfc3987_syntax when installed: building its grammar takes a second of CPU per grading
# process, for URI formats that the notebook schema never uses. This plugin is loaded
# before nbval (``-p`` order), so jsonschema finds it missing and skips those formats.
sys.modules.setdefault("rfc3987_syntax", None)

MAX_STDOUT = 20_000  # characters kept per cell in the events (its start and its end, where the token is)
TOKEN = re.compile(r"^grading: check completed [0-9a-f]+$", re.MULTILINE)  # kept past the output budget
SANDBOX = json.loads(os.environ.pop("COURSE_GRADE_SANDBOX", "null") or "null")


def pytest_addoption(parser):
    parser.addoption("--grade-events", default=None, help="course_lib.grade: write per-cell events (JSON lines) here")


def pytest_configure(config):
    # CurveZMQ keys for the kernel, made per kernel by jupyter_client (as the test suite's conftest and JupyterLab's
    # config do): without them every kernel logs "Kernel is running over TCP without encryption".
    from jupyter_client.manager import KernelManager

    KernelManager.transport_encryption.default_value = "auto"
    if SANDBOX is not None:
        _sandbox_kernels(SANDBOX)


def _sandbox_kernels(box: dict) -> None:
    from nbval.kernel import RunningKernel

    from course_lib.authoring.grading.sandbox import launch_in

    launch_in(box)
    original_get = RunningKernel.get_message
    budget_total = int(box.get("max_output") or 0)

    def get_message(self, stream, timeout=None):
        msg = original_get(self, stream, timeout=timeout)
        if stream != "iopub" or not budget_total:
            return msg
        kind, content = msg.get("msg_type") or msg.get("header", {}).get("msg_type"), msg.get("content", {})
        if kind == "execute_input":
            self._grade_budget = budget_total  # a new cell: a new allowance
        budget = getattr(self, "_grade_budget", budget_total)
        if kind == "stream":
            text = content.get("text", "")
            content["text"] = text[: max(budget, 0)] + (
                "\n[output truncated by the grader]\n" if budget >= 0 and len(text) > budget else ""
            )
            if len(text) > budget:  # the check's last line, whatever the student's code printed before it
                content["text"] += "".join(line + "\n" for line in TOKEN.findall(text, max(budget, 0)))
            self._grade_budget = budget - len(text) - (1 if len(text) > budget else 0)
        elif kind in ("display_data", "execute_result", "update_display_data"):
            size = sum(len(str(v)) for v in content.get("data", {}).values())
            if size > budget:
                content["data"] = {"text/plain": "[output truncated by the grader]"}
            self._grade_budget = budget - size
        elif kind == "error":
            content["evalue"] = str(content.get("evalue", ""))[:MAX_STDOUT]
            content["traceback"] = [str(line)[:MAX_STDOUT] for line in content.get("traceback", [])[-50:]]
        return msg

    RunningKernel.get_message = get_message


def _write(config, record) -> None:
    path = config.getoption("--grade-events")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())


def _cell_number(item) -> int | None:
    return getattr(item, "cell_num", None)


def pytest_runtest_call(item):
    if _cell_number(item) is None:
        return
    kernel = getattr(item.parent, "kernel", None)
    if kernel is not None and not getattr(item.parent, "_grade_pid_written", False):
        item.parent._grade_pid_written = True
        pid = getattr(getattr(kernel.km, "provisioner", None), "pid", None)
        _write(item.config, {"event": "kernel", "pid": pid})
    _write(item.config, {"event": "start", "cell": item.cell_num, "time": time.time()})


MAX_RECORD = 64 << 20  # bytes of one record file (as course_lib.checks.recording reads them)
CELL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,200}$")  # rebuild.record_folder's names: nothing else is a cell's folder
FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_DEPTH = 8  # folders deeper than this inside a cell's folder are left to the scratch folder's removal


# Everything below runs in pytest, as the grader (root, when it grades as root), on a folder the student's code
# owns and can change at any moment: any part of ``scratch/records/<cell>/<file>`` may have been replaced by a link
# to a host folder. So no path under the scratch folder is ever resolved by name. Each folder is opened relative
# to the one above it (``dir_fd``) with O_NOFOLLOW, which refuses a link instead of following it, and every read
# and every removal goes through those descriptors: what the grader touches is what it opened, inside the scratch.


def _open_folder(name, parent: int | None = None) -> int | None:
    """A descriptor of the folder ``name`` (relative to the open folder ``parent``), or None if it is not a real
    folder: a link, a file, gone."""
    try:
        return os.open(name, FOLDER, dir_fd=parent)
    except OSError:
        return None


def _entries(folder: int) -> list[tuple[str, bool]]:
    """(name, is a real folder) for what the open folder holds, read once."""
    with os.scandir(folder) as entries:
        return [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]


def _copy_record(name: str, cell: int, target: Path) -> None:
    """The regular file ``name`` of the open cell folder, copied into ``target`` (links, devices, pipes and files
    over MAX_RECORD are skipped: the judge then finds no record)."""
    try:
        fd = os.open(name, FILE, dir_fd=cell)
    except OSError:
        return
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_RECORD:
            (target / name).write_bytes(f.read(MAX_RECORD + 1)[:MAX_RECORD])


def _remove(name: str, parent: int, depth: int = 0) -> None:
    """Remove ``name`` from the open folder ``parent``: a link or a file is unlinked (never followed), a real folder
    is emptied through its own descriptor first."""
    try:
        os.unlink(name, dir_fd=parent)
        return
    except IsADirectoryError:
        pass  # a real folder (unlink refuses folders, and removes a link to one as a link)
    except OSError:
        return
    folder = _open_folder(name, parent)
    if folder is None or depth >= MAX_DEPTH:
        if folder is not None:
            os.close(folder)
        return
    try:
        for child, _ in _entries(folder):
            _remove(child, folder, depth + 1)
    finally:
        os.close(folder)
    try:
        os.rmdir(name, dir_fd=parent)
    except OSError:
        pass


def take_records(scratch: Path, private: Path, names=None) -> None:
    """Move what the check cells recorded out of the kernel's reach: each file copied (a new file, not the kernel's
    inode, which a process of its might still hold open) into the grader's private folder, then removed from the
    kernel's. Nothing is followed through a link (see above): a ``records`` folder, a cell folder or a file that is
    a link is left where it is, unread, and only the link itself is removed.

    Each cell's folder is taken once: the first copy is final, and what a later cell writes under the same name is
    removed unread (the guard's signed digest says what the check recorded: ``judging`` compares). ``names``: the
    folders of the notebook's check cells (None: any cell-like name); anything else is removed unread, so what a
    kernel moves out to the host's disk is at most one folder per check cell (counted as the kernel's memory)."""
    top = _open_folder(scratch)
    if top is None:
        return
    try:
        records = _open_folder("records", top)
        if records is None:  # none, or not a real folder: a link is removed as a link, its target never seen
            _remove("records", top)
            return
    finally:
        os.close(top)
    try:
        for name, is_folder in _entries(records):
            wanted = CELL_NAME.match(name) if names is None else name in names
            target = private / "records" / name
            if is_folder and wanted and not target.exists():
                _take_cell(name, records, target)
            _remove(name, records)
    finally:
        os.close(records)


def _take_cell(name: str, records: int, target: Path) -> None:
    """The files of one check cell's folder, copied into ``target``."""
    target.mkdir(parents=True, exist_ok=True)  # taken, even when there is nothing to copy: never taken again
    cell = _open_folder(name, records)
    if cell is None:
        return
    try:
        for file_name, is_folder in _entries(cell):
            if not is_folder:
                _copy_record(file_name, cell, target)
    finally:
        os.close(cell)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    yield
    number = _cell_number(item)
    if number is not None and call.when == "call" and SANDBOX is not None and item.config.getoption("--grade-events"):
        private = Path(item.config.getoption("--grade-events")).parent
        take_records(Path(SANDBOX["cwd"]), private, names=SANDBOX.get("records"))
    if number is None or call.when not in ("setup", "call"):
        return
    if call.when == "setup" and call.excinfo is None:
        return
    record = {
        "event": "end",
        "cell": number,
        "time": time.time(),
        "ename": "",
        "evalue": "",
        "stdout": "",
        "message": "",
    }
    for output in getattr(item, "test_outputs", None) or []:
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            record["stdout"] += output.get("text", "")
        elif output.get("output_type") == "error":
            record["ename"], record["evalue"] = output.get("ename", ""), output.get("evalue", "")
    if call.excinfo is None:
        record["outcome"] = "passed"
    elif call.excinfo.errisinstance(pytest.skip.Exception):
        record["outcome"] = "skipped"
    else:
        record["outcome"] = "setup-error" if call.when == "setup" else "error"
        record["message"] = str(call.excinfo.value)[:MAX_STDOUT]
    if len(record["stdout"]) > MAX_STDOUT:  # the "✔" line comes first, the completion token last
        record["stdout"] = record["stdout"][: MAX_STDOUT // 2] + "\n[...]\n" + record["stdout"][-MAX_STDOUT // 2 :]
    record["evalue"] = record["evalue"][:MAX_STDOUT]
    _write(item.config, record)
