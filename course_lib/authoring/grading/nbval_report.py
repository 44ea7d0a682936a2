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
import shlex
import sys
import time

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


def _limits(memory: int):
    """Run in the kernel's process before it starts: no core files, a bounded scratch file size, and an address
    space far above ``memory`` (torch reserves much more than it uses: the runner's watcher limits what is
    resident; this only stops one huge allocation at once)."""

    def apply():
        import resource

        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (2 * memory + (4 << 30),) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 30, 1 << 30))

    return apply


def kernel_command(cmd: list[str], box: dict) -> list[str]:
    """The kernel's command line, wrapped: namespaces of its own (mounts hiding the grader's folders; processes,
    so that all it started dies with it and it can signal no other process), then the kernel's user."""
    if box.get("uid") is None:
        return cmd
    mounts = []
    for private, keeps in box.get("expose", []):  # e.g. /root hidden, but the Python and the course in it kept
        mounts += [
            f'stage{n}=$(mktemp -d); mount --bind {shlex.quote(keep)} "$stage{n}"' for n, keep in enumerate(keeps)
        ]
        mounts.append(f"mount -t tmpfs -o size=4k,mode=0711 none {shlex.quote(private)}")
        mounts += [
            f'mkdir -p {shlex.quote(keep)}; mount --move "$stage{n}" {shlex.quote(keep)}; rmdir "$stage{n}"'
            for n, keep in enumerate(keeps)
        ]
    mounts += [
        f"if [ -d {shlex.quote(path)} ]; then mount -t tmpfs -o size=4k,mode=0555 none {shlex.quote(path)}; fi"
        for path in box.get("hide", [])
    ]
    mounts += [f"mount --bind -o ro {shlex.quote(src)} {shlex.quote(dst)}" for src, dst in box.get("binds", [])]
    drop = [
        "setpriv",
        f"--reuid={int(box['uid'])}",
        f"--regid={int(box['gid'])}",
        "--clear-groups",
        "--no-new-privs",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ]
    if not box.get("namespaces"):  # no namespaces to be had (``unshare`` failed): the user alone
        return [*drop, *cmd]
    script = "; ".join(["set -e"] + mounts + [f'exec {" ".join(drop)} "$@"'])
    return ["unshare", *NAMESPACES, "--", "/bin/sh", "-c", script, "grading-kernel", *cmd]


NAMESPACES = ["--mount", "--propagation", "private", "--pid", "--fork", "--kill-child"]  # not --mount-proc:
# with its own /proc, a kernel died in the 08 grpo_step check (cause not found); signals need no /proc anyway


def _sandbox_kernels(box: dict) -> None:
    from jupyter_client.provisioning import local_provisioner
    from nbval.kernel import RunningKernel

    original_launch = local_provisioner.launch_kernel

    def launch_kernel(cmd, **kwargs):
        env = dict(kwargs.get("env") or os.environ)
        env.pop("COURSE_GRADE_SANDBOX", None)
        scratch = box["cwd"]
        env.update(
            HOME=scratch,
            TMPDIR=scratch,
            IPYTHONDIR=os.path.join(scratch, ".ipython"),
            MPLCONFIGDIR=os.path.join(scratch, ".matplotlib"),
            JUPYTER_RUNTIME_DIR=scratch,
        )
        kwargs.update(env=env, cwd=scratch, preexec_fn=_limits(int(box.get("memory") or 0)))
        if box.get("uid") is not None and "-f" in cmd:  # the kernel must read its connection file
            os.chown(cmd[cmd.index("-f") + 1], int(box["uid"]), int(box["gid"]))
        return original_launch(kernel_command(list(cmd), box), **kwargs)

    local_provisioner.launch_kernel = launch_kernel
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    yield
    number = _cell_number(item)
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
