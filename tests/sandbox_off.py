"""A variant of the grader's pytest plugin for tests/test_grade_sandbox.py: the kernel's sandbox with the defences
named in ``COURSE_TEST_SANDBOX_OFF`` switched off (a comma-separated list), to show that the attacks each one stops
succeed without it. Never used to grade.

``COURSE_TEST_SANDBOX_OFF=marked`` switches off, for each submission, the defences its own notebook names in a line
``# sandbox off: NAME`` (one pytest process runs one submission): a class of probes graded in one run, each with its
own defence off, and only that one.

- ``pid``: no pid namespace (the kernel sees the host's processes, and what it starts may outlive it);
- ``net``: no network namespace (the kernel reaches the host's ports);
- ``tmp``: no private ``/tmp``, ``/var/tmp`` and ``/dev/shm`` (what the kernel writes there stays on the host);
- ``tasks``: no ``RLIMIT_NPROC`` for the kernel's user (it may start as many threads as it likes).
"""

import os
import re
import sys
from pathlib import Path

from course_lib.authoring.grading import sandbox
from course_lib.authoring.grading.nbval_report import *  # noqa: F403 - pytest finds the plugin's hooks here

OFF = set(filter(None, os.environ.get("COURSE_TEST_SANDBOX_OFF", "").split(",")))
if "marked" in OFF:  # the notebook this pytest process runs (``python -m pytest NOTEBOOK ...``, in its folder)
    notebook = next((Path(arg) for arg in sys.argv[1:] if arg.endswith(".ipynb")), None)
    text = notebook.read_text(encoding="utf-8") if notebook is not None else ""
    OFF = set(re.findall(r"# sandbox off: (\w+)", text))
if "pid" in OFF:
    sandbox.NAMESPACES = [flag for flag in sandbox.NAMESPACES if flag not in ("--pid", "--fork", "--kill-child")]
if "net" in OFF:
    sandbox.NAMESPACES = [flag for flag in sandbox.NAMESPACES if flag != "--net"]
if "tmp" in OFF:
    sandbox.PRIVATE_TMP = ()
if "tasks" in OFF:
    sandbox.MAX_TASKS = None
