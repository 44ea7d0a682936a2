"""The parts of ``python -m course_lib.grade`` (see :mod:`course_lib.authoring.grade`), in the order they run.

- ``canonical``: the instructor's solution notebooks and hidden checks;
- ``submissions``: finding, reading and naming the students' files;
- ``rebuild``: the student's solution cells placed into the canonical notebook;
- ``runner``: one rebuilt notebook run under nbval in its own process, with a watchdog, its kernel in a sandbox;
- ``nbval_report``: the pytest plugin that records each cell's outcome and starts the sandboxed kernel;
- ``verdict``: each exercise's status and points from the cells' outcomes and, judged here from the kernel's
  records (:mod:`course_lib.checks.recording`), the checks' own verdicts;
- ``report``: grades.csv, summary.md and the logs.
"""
