"""A tiny pytest plugin: what happened in each notebook cell, one JSON line per event.

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
"""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

# nbval reads notebooks with nbformat, whose validator imports jsonschema, which imports
# rfc3987_syntax when installed: building its grammar takes a second of CPU per grading
# process, for URI formats that the notebook schema never uses. This plugin is loaded
# before nbval (``-p`` order), so jsonschema finds it missing and skips those formats.
sys.modules.setdefault("rfc3987_syntax", None)

MAX_STDOUT = 20_000  # characters kept per cell: a print loop must not fill the disk


def pytest_addoption(parser):
    parser.addoption("--grade-events", default=None, help="course_lib.grade: write per-cell events (JSON lines) here")


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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    yield
    number = _cell_number(item)
    if number is None or call.when not in ("setup", "call"):
        return
    if call.when == "setup" and call.excinfo is None:
        return
    record = {"event": "end", "cell": number, "time": time.time(), "ename": "", "evalue": "", "stdout": "",
              "message": ""}
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
    record["stdout"] = record["stdout"][:MAX_STDOUT]
    record["evalue"] = record["evalue"][:MAX_STDOUT]
    _write(item.config, record)
