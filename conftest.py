"""Repository-wide pytest hooks: how `make test` shares the 2 cores, and how long each notebook took.

`make test` runs pytest twice (see the Makefile). First the tests marked ``serial``, alone: they time
something (the browser tests time each slider's redraw) or keep both cores busy themselves (the grading
of a class with ``-j 2``, TRL under ``accelerate launch`` with two processes), so a neighbour would make
them slow or flaky. Then everything else with pytest-xdist on two workers (``-n 2 --dist loadgroup``),
where the hooks below decide what runs together:

- nbval makes one test item per cell, and the cells of a notebook share one kernel and must run in order:
  every cell of a notebook gets the notebook's ``xdist_group``, so one worker runs the whole notebook;
- tests that share a module-scoped fixture (a class graded once, a model trained once) get their module's
  group, so the fixture is built once, on one worker; every other test is scheduled on its own;
- the heaviest units go first (lecture notebooks, then solution notebooks, then module groups, then single
  tests), so that the last units to start are short and neither worker waits long for the other;
- each worker, and the kernels it starts, computes on one thread: the two workers already fill the two
  cores, and a second torch thread per worker mostly waits.

nbval reports one test item per cell; `notebook run times` sums them per notebook (from the first cell's start,
kernel start-up included, to the last cell's end) so the test report shows each notebook's run time, the budget
the course keeps (under 60 s each). Under xdist the reports reach the controller, which prints the section.
"""

from __future__ import annotations

import os
from collections import defaultdict

import pytest

# Tests that need the machine to themselves, and why: each is marked `serial` here, so the list stays in one place.
SERIAL = {
    "tests/browser/": "times each slider's redraw, from key press to new picture, against a 200 ms aim",
    "tests/test_grade.py": "grades a class with -j 2 (both cores) under an 8 s per-cell timeout, and times a resume",
    "tests/test_hf_accelerate.py::test_trl_script_under_accelerate_launch_two_cpu_processes":
        "runs TRL in two processes under accelerate launch (both cores)",
}

_spans: dict[str, list[float]] = defaultdict(list)
_workers: dict[str, str] = {}

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Before torch is imported (test modules import it at collection); kernels inherit the environment.
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, "1")


def _notebook(item: pytest.Item) -> str | None:
    """The notebook an nbval cell belongs to (its path as pytest shows it), or None for any other test."""
    path = item.nodeid.split("::")[0]
    return path if path.endswith(".ipynb") and type(item).__name__ == "IPyNbCell" else None


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    fixtures = getattr(item, "_fixtureinfo", None)
    if fixtures is None:
        return False
    return any(d.scope == "module" for defs in fixtures.name2fixturedefs.values() for d in defs)


def _unit_rank(item: pytest.Item) -> int:
    """Which scheduling units start first: 0 lecture notebooks, 1 solution notebooks, 2 module groups, 3 the rest."""
    notebook = _notebook(item)
    if notebook is not None:
        return 0 if notebook.startswith("notebooks/") else 1
    return 2 if _shares_a_module_fixture(item) else 3


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects, and before xdist turns xdist_group marks into node ids
def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(item.nodeid.startswith(prefix) for prefix in SERIAL):
            item.add_marker(pytest.mark.serial)
    if not config.pluginmanager.hasplugin("xdist") or config.getoption("dist", "no") != "loadgroup":
        return
    for item in items:
        notebook = _notebook(item)
        if notebook is not None:
            item.add_marker(pytest.mark.xdist_group(notebook))
        elif _shares_a_module_fixture(item) and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    # A stable sort: within a unit (a notebook's cells, a module's tests) the order is kept.
    items.sort(key=_unit_rank)


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    if ".ipynb" in report.nodeid and hasattr(report, "start"):
        path = path if path.endswith(".ipynb") else report.nodeid.split("[", 1)[-1].rstrip("]")
        _spans[path] += [report.start, report.stop]
        worker = getattr(report, "node", None)  # under xdist, the worker that ran it (on the controller)
        if worker is not None:
            _workers[path] = worker.gateway.id


def pytest_terminal_summary(terminalreporter):
    if not _spans or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    terminalreporter.section("notebook run times")
    total = 0.0
    for path in sorted(_spans):
        seconds = max(_spans[path]) - min(_spans[path])
        total += seconds
        where = f"  ({_workers[path]})" if path in _workers else ""
        terminalreporter.write_line(f"{seconds:7.1f} s  {path}{where}")
    terminalreporter.write_line(f"{total:7.1f} s  all notebooks under nbval")
