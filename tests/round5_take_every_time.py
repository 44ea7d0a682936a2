"""A variant of the grader's pytest plugin for tests/test_grade_round5.py: records taken at every cell's end, each
copy over the last (the defence "each check cell's folder taken once" switched off), to show the attacks that
rewrite records after their check succeed without it. Never used to grade."""

from course_lib.authoring.grading import nbval_report
from course_lib.authoring.grading.nbval_report import *  # noqa: F403 - pytest finds the plugin's hooks here

_take = nbval_report.take_records


def _take_every_time(scratch, private, names=None):
    import shutil

    for name in names or ():
        if (scratch / "records" / name).is_dir():  # written again since the last copy: taken again, over it
            shutil.rmtree(private / "records" / name, ignore_errors=True)
    _take(scratch, private, names=names)


nbval_report.take_records = _take_every_time
