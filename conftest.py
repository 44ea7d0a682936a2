"""Repository-wide pytest hooks: print how long each notebook took to run.

nbval reports one test item per cell; this sums them per notebook (from the first
cell's start, kernel start-up included, to the last cell's end) so the test report
shows each notebook's run time, the budget the course keeps (under 60 s each).
"""

from __future__ import annotations

from collections import defaultdict

_spans: dict[str, list[float]] = defaultdict(list)


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    if ".ipynb" in report.nodeid and hasattr(report, "start"):
        path = path if path.endswith(".ipynb") else report.nodeid.split("[", 1)[-1].rstrip("]")
        _spans[path] += [report.start, report.stop]


def pytest_terminal_summary(terminalreporter):
    if not _spans:
        return
    terminalreporter.section("notebook run times")
    total = 0.0
    for path in sorted(_spans):
        seconds = max(_spans[path]) - min(_spans[path])
        total += seconds
        terminalreporter.write_line(f"{seconds:7.1f} s  {path}")
    terminalreporter.write_line(f"{total:7.1f} s  all notebooks under nbval")
