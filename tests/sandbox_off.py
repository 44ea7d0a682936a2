"""A variant of the grader's pytest plugin for tests/test_grade_sandbox.py: the kernel's sandbox with the defences
named in ``COURSE_TEST_SANDBOX_OFF`` switched off (a comma-separated list), to show that the attacks each one stops
succeed without it. Never used to grade.

- ``pid``: no pid namespace (the kernel sees the host's processes, and what it starts may outlive it);
- ``net``: no network namespace (the kernel reaches the host's ports);
- ``tmp``: no private ``/tmp``, ``/var/tmp`` and ``/dev/shm`` (what the kernel writes there stays on the host);
- ``tasks``: no ``RLIMIT_NPROC`` for the kernel's user (it may start as many threads as it likes).
"""

import os

from course_lib.authoring.grading import sandbox
from course_lib.authoring.grading.nbval_report import *  # noqa: F403 - pytest finds the plugin's hooks here

OFF = set(filter(None, os.environ.get("COURSE_TEST_SANDBOX_OFF", "").split(",")))
if "pid" in OFF:
    sandbox.NAMESPACES = [flag for flag in sandbox.NAMESPACES if flag not in ("--pid", "--fork", "--kill-child")]
if "net" in OFF:
    sandbox.NAMESPACES = [flag for flag in sandbox.NAMESPACES if flag != "--net"]
if "tmp" in OFF:
    sandbox.PRIVATE_TMP = ()
if "tasks" in OFF:
    sandbox.MAX_TASKS = None
