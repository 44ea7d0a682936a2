"""Repository-wide pytest hooks: how `make test` shares the 2 cores, and how long each notebook took.

`make test` runs pytest twice, at once (see the Makefile). The tests marked ``serial`` (``SERIAL`` below says
which and why) run at normal priority, one at a time, because they time something: a neighbour competing for the
cores would be measured too. Everything else runs beside them at the lowest priority (``.ci/lowest-priority``), so
it takes only the cycles they leave idle, with pytest-xdist on two workers (``-n 2``), scheduled by
``CourseScheduling``:

- nbval makes one test item per cell, and the cells of a notebook share one kernel and must run in order:
  a notebook is one unit of work, run whole by one worker;
- a test module that defines a module-scoped fixture (a class graded once, a model trained once) is one
  unit too, so the fixture is built once; every other test is a unit of its own, so the two workers
  finish together;
- the units start in this order: the module groups (the longest set-ups), the lecture notebooks, the
  solution notebooks, then single tests, short, that fill the gaps at the end;
- each worker, and each kernel it starts, computes on one thread: two workers already fill the two cores,
  and a second torch thread per worker mostly waits.

(pytest-xdist's own ``--dist loadgroup`` would group by ``xdist_group`` marks, but it renames node ids in a way
pytest 9.2 no longer sees, so the grouping is done here, from node ids, which is all the controller has.)

nbval reports one test item per cell; `notebook run times` sums them per notebook (from the first cell's start,
kernel start-up included, to the last cell's end) so the test report shows each notebook's run time, the budget
the course keeps (under 60 s each, alone; beside the serial tests, at the lowest priority, a notebook waits too).
Under xdist the reports reach the controller, which prints the section, with the worker that ran each notebook.
"""

from __future__ import annotations

import functools
import os
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

# Tests that need the cores whenever they ask, and why: each is marked `serial` here, so the list stays in one place.
SERIAL = {
    "tests/browser/": "times each slider's redraw, from key press to new picture, against a 200 ms aim",
    "tests/test_grade.py": "grades classes with a per-cell timeout of a few seconds and kernels as the shared "
    "course-grade-N users: a busy neighbour core turns slow imports into timeouts",
    "tests/test_grade_records.py": "grades a class as root, with kernels as the shared course-grade-N users",
    "tests/test_grade_feedback.py": "grades a class (feedback pages, gradebook) with kernels as the shared "
    "course-grade-N users",
    "tests/test_grade_round5.py": "grades a class as root, twice (round five's attacks and those of round four it "
    "shares with tests/test_grade.py's red team, graded here only), with kernels as the shared course-grade-N users",
    "tests/test_grade_sandbox.py": "grades small classes as root, each twice (each kernel with one sandbox defence "
    "off), with a per-cell timeout and kernels as the course-grade-test-N users",
}

_spans: dict[str, list[float]] = defaultdict(list)
_graded: dict[str, float] = {}  # notebook -> seconds, for the solution notebooks that tests/test_grade.py grades
_workers: dict[str, str] = {}

# Kernels the tests start (nbval's, nbclient's) talk to them over CurveZMQ, with keys jupyter_client makes per kernel:
# without them every kernel logs "Kernel is running over TCP without encryption". The same setting for JupyterLab is
# in .venv/etc/jupyter (the Makefile's setup) and in the browser tests' server config.
from jupyter_client.manager import KernelManager  # noqa: E402

KernelManager.transport_encryption.default_value = "auto"  # "auto": when the kernelspec says it supports it

if os.environ.get("COURSE_LOWEST_PRIORITY"):
    # This pass runs at the lowest priority (.ci/lowest-priority sets the variable), but jupyter_client starts every
    # kernel in a session of its own, and so in an autogroup of its own at nice 0: each kernel sets its session's
    # autogroup to nice 19 (the process's nice, 19, it inherits) before it becomes the kernel, in the same process.
    import jupyter_client.provisioning.local_provisioner as _provisioner  # noqa: E402

    _LOWEST = 'echo 19 > /proc/self/autogroup 2>/dev/null; exec "$@"'
    _launch = _provisioner.launch_kernel
    _provisioner.launch_kernel = lambda cmd, **kw: _launch(["/bin/sh", "-c", _LOWEST, "sh", *cmd], **kw)

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Before torch is imported (test modules import it at collection); kernels inherit the environment.
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, "1")
    # A test that asks torch for two threads (tests/test_lm_rl_bit_identity.py: its digests were taken on two) gets
    # OpenMP threads that spin while they wait for work, and on tiny tensors they mostly wait: its 19 cases took
    # 51 CPU s at a load of 9, 4.9 with the threads sleeping instead, digests unchanged (the same threads add in
    # the same order; only how an idle one waits differs).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@functools.cache
def _has_module_fixture(path: str) -> bool:
    """Whether the test module at ``path`` (relative to the repository) defines a module-scoped fixture."""
    try:
        source = (ROOT / path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return 'scope="module"' in source or "scope='module'" in source


def _unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its notebook, its module (when it shares a module fixture), or itself."""
    path = nodeid.split("::", 1)[0]
    return path if path.endswith(".ipynb") or _has_module_fixture(path) else nodeid


def _unit_rank(nodeid: str) -> int:
    """Which units start first: 0 module groups, 1 lecture notebooks, 2 solution notebooks, 3 single tests."""
    unit = _unit(nodeid)
    if unit.endswith(".ipynb"):
        return 1 if unit.startswith("notebooks/") else 2
    return 0 if unit != nodeid else 3


def pytest_xdist_make_scheduler(config, log):
    """Under ``-n`` (xdist's ``--dist load``), units as ``_unit`` says, in the order the workers collected them."""
    if config.getvalue("dist") != "load":
        return None  # another --dist asked for explicitly: xdist's own
    from xdist.scheduler import LoadScopeScheduling

    class CourseScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    config.option.loadscopereorder = False  # keep the order below, not xdist's (units with most tests first)
    return CourseScheduling(config, log)


def pytest_ignore_collect(collection_path, config):
    """Under `make test`'s ``-m serial`` or ``-m "not serial"``, skip the files the other pass runs, unread.

    Deselecting by mark comes after collection, which imports every test module (torch, transformers, TRL,
    Playwright: about 20 s of one core in each pytest process); SERIAL already says which files hold the serial
    tests, so each pass imports only its own."""
    mark = (config.getoption("markexpr", "") or "").strip()
    if mark not in ("serial", "not serial"):
        return None
    try:
        relative = Path(collection_path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return None
    if relative == ".":
        return None
    is_dir = Path(collection_path).is_dir()
    serial = any((relative + "/" if is_dir else relative).startswith(prefix) for prefix in SERIAL)
    if mark == "not serial":
        return True if serial else None
    holds_serial = is_dir and any(prefix.startswith(relative + "/") for prefix in SERIAL)
    return None if serial or holds_serial else True


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(item.nodeid.startswith(prefix) for prefix in SERIAL):
            item.add_marker(pytest.mark.serial)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # A stable sort: within a unit (a notebook's cells, a module's tests) the order is kept.
        items.sort(key=lambda item: _unit_rank(item.nodeid))


def pytest_runtest_logreport(report):
    for name, value in getattr(report, "user_properties", ()):
        if name == "notebook_seconds" and report.when == "call":  # notebooks a test ran another way (graded)
            _graded.update(value)
    path = report.nodeid.split("::")[0]
    if ".ipynb" in report.nodeid and hasattr(report, "start"):
        # An nbval cell, or a test that runs a whole notebook named by its parameter (exercises/NN_name.ipynb);
        # not the tests whose parameter only names a notebook's exercise (00_warmup.ipynb-discounted_return).
        path = path if path.endswith(".ipynb") else report.nodeid.split("[", 1)[-1].rstrip("]")
        if not path.endswith(".ipynb"):
            return
        _spans[path] += [report.start, report.stop]
        worker = getattr(report, "node", None)  # under xdist, the worker that ran it (on the controller)
        if worker is not None:
            _workers[path] = worker.gateway.id


@pytest.hookimpl(trylast=True)  # after the coverage table: the report ends with the notebooks' times
def pytest_terminal_summary(terminalreporter):
    if not (_spans or _graded) or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    terminalreporter.section("notebook run times")
    if os.environ.get("COURSE_LOWEST_PRIORITY"):
        terminalreporter.write_line(
            "(wall clock at the lowest priority: a notebook that ran beside the serial tests "
            "waited for them; `pytest -n 2 notebooks` times them alone)"
        )
    total = 0.0
    for path in sorted(_spans):
        seconds = max(_spans[path]) - min(_spans[path])
        total += seconds
        where = f"  ({_workers[path]})" if path in _workers else ""
        terminalreporter.write_line(f"{seconds:7.1f} s  {path}{where}")
    for path in sorted(_graded):
        total += _graded[path]
        terminalreporter.write_line(f"{_graded[path]:7.1f} s  {path}  (graded as a submission, under nbval)")
    terminalreporter.write_line(f"{total:7.1f} s  all notebooks under nbval")
