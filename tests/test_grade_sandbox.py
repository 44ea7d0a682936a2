"""Round four's defences that only the sandbox gives (the grader run as root), each shown to matter (issue 45, 6).

Each test grades a small class as root twice: once as the grader is, and once with one defence of the kernel's
sandbox switched off, and only that one. The attack earns nothing (or reaches nothing) with its defence on, and
earns its points (or reads, keeps or starts what it should not) with it off: so each test measures its defence.

- **course_lib without its source** (``isolation.source_free_course``): round four's ``recompile`` and ``disk``
  read the reference's text (``inspect.getsource``, ``family.py`` from disk) and compile it. Switched off in the
  test process: a copy of course_lib with its source. (Both runs switch off the blocker's "copied text", as
  ``tests/test_grade_round5.py`` does, so that the copy is the one thing that differs.)
- **the solutions, submissions and output folder hidden** (``isolation._hidden_folders``): a solution cell that
  reads the solution notebook and runs its answer. Switched off in the test process (and "copied text" in both
  runs: the solution's text is course_lib's).
- **the kernel's namespaces and task limit** (``sandbox.NAMESPACES``, ``PRIVATE_TMP``, ``MAX_TASKS``), switched off
  in pytest's plugin (``tests/sandbox_off.py``): round four's ``boxed`` probe, split by namespace (the grader's
  command line in ``/proc``, a port of the host, files left in the host's ``/tmp``), a kernel that starts 400
  threads (pid exhaustion, at class level), and the process that hops from pid to pid to kill the classmate graded
  next as the same user, which the guard's "still running when the check began" sees only in the kernel's own pid
  namespace (``test_nothing_a_kernel_leaves_kills_the_classmate_graded_next``: graded as the grader is, and with that
  namespace off).

Every run uses grading users of its own (``course-grade-test-N``): an attack that succeeds with its defence off
(400 threads, a ``kill(-1)``) then reaches only this test's kernels, never those of a class graded beside it.
The per-student user itself is not switched off anywhere: without it the kernel is root, and an attack that
succeeds would reach the machine.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from test_grade import FAMILY, FROM_DISK, RECOMPILED, ROOT, WARMUP, answer, exercise_of, save, solution_cell
from test_grade_round5 import _source_free_with_switches

from course_lib.authoring import grade
from course_lib.authoring.grading import isolation, report, runner, watchdog

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the kernels isolated, as the grader is run")
TEST_USER = "course-grade-test-{slot}"  # grading users of this module's own (see the module docstring)


def _grade(folder: Path, out: Path, *, jobs: int = 2, off: tuple[str, ...] = (), patches=()) -> dict:
    """Grade ``folder`` as root with the sandbox's ``off`` defences switched off in pytest's plugin and
    ``patches`` ((module, name, value)) in this process; {(student, exercise): row}."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(isolation, "USER", TEST_USER)
        patch.setattr(runner, "PLUGIN", "sandbox_off")
        patch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
        patch.setenv("COURSE_TEST_SANDBOX_OFF", ",".join(off))
        if "tmp" in off:  # the watch counts the kernel's /tmp as its memory: not the host's (tens of GB here)
            patch.setattr(watchdog, "PRIVATE_TMP", ())
        for module, name, value in patches:
            patch.setattr(module, name, value)
        code = grade.main([str(folder), "--out", str(out), "--timeout", "60", "-j", str(jobs), "--quiet"])
    assert code == 0
    assert "Kernels ran isolated" in (out / "summary.md").read_text(encoding="utf-8")
    return {(r.student, r.exercise): r for r in report.read_rows(out / "grades.csv")}


def _warmup(folder: Path, student: str, prelude: str = "", body: str | None = None, rtg_prelude: str = "") -> None:
    """A chapter 00 submission: both exercises solved, ``prelude`` before discounted_return's answer (or ``body``
    in its place), ``rtg_prelude`` before reward_to_go's."""
    solution = nbformat.read(WARMUP, as_version=4)
    nb = exercise_of(solution, WARMUP.name)
    answer(nb, solution, "discounted_return", body)
    answer(nb, solution, "reward_to_go")
    solution_cell(nb, "discounted_return").source = prelude + solution_cell(nb, "discounted_return").source
    solution_cell(nb, "reward_to_go").source = rtg_prelude + solution_cell(nb, "reward_to_go").source
    save(folder, f"{student}_00_warmup.ipynb", nb)


def _statuses(rows: dict, student: str) -> dict[str, str]:
    return {exercise: row.status for (who, exercise), row in rows.items() if who == student}


# --- course_lib without its source ----------------------------------------------------------------------------------

COPIED_TEXT_OFF = "import builtins as _b\n_b._round5_off = ('copied text',)\nimport torch\n"
# Round four's recompile compiled the function alone, which calls family.py's helpers: given the source, it failed by
# a NameError of its own. The module's text, compiled whole, brings the helpers along.
RECOMPILED_WHOLE = RECOMPILED.replace("inspect.getsource(family.rloo_advantages)", "inspect.getsource(family)")
RECOMPILED_WHOLE = RECOMPILED_WHOLE.replace('namespace = {"torch": torch}', "namespace = {}")


@pytest.mark.skipif(not FAMILY.exists(), reason="needs solutions/11_grpo_family.ipynb")
def test_the_reference_s_source_is_not_in_the_kernel(tmp_path):
    """``recompile`` and ``disk`` read the reference's text: with the source-free copy, there is none (OSError,
    FileNotFoundError); with a copy that has its source, they earn their points."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    family = nbformat.read(FAMILY, as_version=4)
    for student, body in (("recompile", RECOMPILED_WHOLE), ("disk", FROM_DISK)):
        nb = exercise_of(family, FAMILY.name)
        for exercise in family.metadata["course"]["exercises"]:
            answer(nb, family, exercise)
        answer(nb, family, "rloo_advantages", body)
        solution_cell(nb, "rloo_advantages").source = COPIED_TEXT_OFF + solution_cell(nb, "rloo_advantages").source
        save(folder, f"{student}_11_grpo_family.ipynb", nb)
    compiled = _source_free_with_switches(tmp_path / "compiled")
    on = _grade(folder, tmp_path / "on", patches=[(isolation, "source_free_course", compiled)])
    with_source = _source_free_with_switches(tmp_path / "with-source", with_source=True)
    off = _grade(folder, tmp_path / "off", patches=[(isolation, "source_free_course", with_source)])
    for student, error in (("recompile", "OSError"), ("disk", "FileNotFoundError")):
        attacked = on[(student, "rloo_advantages")]
        assert attacked.points == 0 and error in attacked.message, attacked
        others = _statuses(on, student)
        others.pop("rloo_advantages")
        assert set(others.values()) == {"passed"}, others
        assert set(_statuses(off, student).values()) == {"passed"}, [r for r in off.values() if r.student == student]


# --- the solutions hidden ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(not WARMUP.exists(), reason="needs solutions/00_warmup.ipynb")
def test_the_solutions_are_hidden_from_the_kernel(tmp_path):
    """A solution cell that reads the solution notebook and runs its answer: an empty folder where the solutions
    are (FileNotFoundError); with nothing hidden (the course readable by others, as the grading users need), the
    solution's answer earns its points. (The solution's text is course_lib's: both runs switch off the blocker's
    "copied text", which would refuse it next, so that what is hidden is the one thing that differs.)"""
    solution = nbformat.read(WARMUP, as_version=4)
    cell_id = solution_cell(solution, "discounted_return").get("id")
    reader = (
        "import json\n"
        f"cells = json.load(open({str(WARMUP)!r}))['cells']\n"
        f"source = ''.join(next(c for c in cells if c.get('id') == {cell_id!r})['source'])\n"
        "namespace = {'torch': torch}\n"
        "exec(source, namespace)\n"
        "return namespace['discounted_return'](rewards, gamma)"
    )
    folder = tmp_path / "submissions"
    folder.mkdir()
    _warmup(folder, "reader", prelude=COPIED_TEXT_OFF, body=reader)
    compiled = (isolation, "source_free_course", _source_free_with_switches(tmp_path / "compiled"))
    on = _grade(folder, tmp_path / "on", jobs=1, patches=[compiled])
    assert on[("reader", "discounted_return")].points == 0, on
    assert "FileNotFoundError" in on[("reader", "discounted_return")].message, on
    assert on[("reader", "reward_to_go")].status == "passed", on
    nothing_hidden = (isolation, "_hidden_folders", lambda *args: [])
    off = _grade(folder, tmp_path / "off", jobs=1, patches=[compiled, nothing_hidden])
    assert set(_statuses(off, "reader").values()) == {"passed"}, off


# --- the kernel's namespaces and its task limit -----------------------------------------------------------------------

SEES_THE_GRADER = """\
import os
for _pid in [p for p in os.listdir("/proc") if p.isdigit()]:  # what WIPE looked for: the grader's command line
    try:
        _line = open(f"/proc/{_pid}/cmdline", "rb").read()
    except OSError:
        continue
    if b"--grade-events" in _line:
        raise RuntimeError("saw the grader's command line")
"""
REACHES_THE_HOST = """\
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
except OSError:
    pass
else:
    raise RuntimeError("reached a port of the host")
"""
LEAVES_FILES = """\
for _folder in ("/tmp", "/var/tmp", "/dev/shm"):
    open(_folder + "/{marker}", "w").write("left behind")
"""
MANY_THREADS = """\
import threading, time
threading.stack_size(1 << 16)  # small stacks: the limit on tasks, not on memory, is what stops it
for _ in range(400):
    threading.Thread(target=time.sleep, args=(3,), daemon=True).start()
"""
MARKER = f"course-sandbox-test-{uuid.uuid4().hex}"
PROBES = {  # the defence switched off -> (the student, the probe before discounted_return's answer)
    "pid": ("proc", SEES_THE_GRADER),
    "net": ("port", REACHES_THE_HOST),
    "tmp": ("files", LEAVES_FILES.format(marker=MARKER)),
    "tasks": ("threads", MANY_THREADS),
}


def _left_on_the_host() -> list[Path]:
    return [Path(folder) / MARKER for folder in ("/tmp", "/var/tmp", "/dev/shm") if (Path(folder) / MARKER).exists()]


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    """The probes' class graded twice: once as the grader is, once with each probe's own defence switched off for
    its kernel alone (the line ``# sandbox off: NAME`` in its notebook, read by ``tests/sandbox_off.py``); a port
    of the host listened on for the network's probe."""
    if not WARMUP.exists():
        pytest.skip("needs solutions/00_warmup.ipynb")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    tmp = tmp_path_factory.mktemp("sandbox")
    everyone = tmp / "everyone"
    everyone.mkdir()
    for name, (student, probe) in PROBES.items():
        marked = f"# sandbox off: {name}\n" + probe.replace("{port}", str(listener.getsockname()[1]))
        _warmup(everyone, student, marked)
    on = _grade(everyone, tmp / "on")
    left = _left_on_the_host()
    try:
        # The watch counts the kernel's /tmp as its memory; "tmp" off, the kernel's /tmp is the host's (tens of GB).
        off = _grade(everyone, tmp / "off", off=("marked",), patches=[(watchdog, "PRIVATE_TMP", ())])
        yield {"on": on, "left": left, "off": off, "left_off": _left_on_the_host()}
    finally:
        listener.close()
        for path in _left_on_the_host():
            path.unlink()


@pytest.mark.parametrize("defence", list(PROBES))
def test_each_namespace_and_the_task_limit_stop_their_probe(probes, defence):
    """On: the kernel sees only its own processes, reaches no port, leaves no file in the host's /tmp, /var/tmp or
    /dev/shm, and cannot start 400 threads (``MAX_TASKS``); each switched off alone, its probe gets through."""
    student, _ = PROBES[defence]
    on = probes["on"]
    probed = on[(student, "discounted_return")]
    if defence == "tasks":
        assert probed.points == 0 and "can't start new thread" in probed.message, probed
    else:
        assert probed.status == "passed", probed
    assert on[(student, "reward_to_go")].status == "passed", on
    assert probes["left"] == []
    off = probes["off"]
    probed = off[(student, "discounted_return")]
    if defence == "pid":
        assert probed.points == 0 and "saw the grader's command line" in probed.message, probed
    elif defence == "net":
        assert probed.points == 0 and "reached a port of the host" in probed.message, probed
    elif defence == "tmp":
        assert probed.status == "passed", probed
        assert len(probes["left_off"]) == 3, "with /tmp, /var/tmp and /dev/shm the host's, the files stay"
    else:
        assert probed.status == "passed", probed
    assert off[(student, "reward_to_go")].status == "passed", off


# Round four's hopper (a fork that outlives its kernel), its first wait tied to its kernel's end instead of 8 s, so that
# it kills the classmate's kernel however fast the machine grades: it hops until its kernel is gone (and 3 s more,
# through the sweep of its user's processes), then kills every process of its user for KILL_FOR seconds (the
# classmate's kernel, and each one started again for it).
KILL_FOR = 45
HOPPER_AFTER_ITS_KERNEL = f"""\
import os, signal, time
_kernel = os.getpid()
if os.fork() == 0:  # a process that outlives its kernel: it hops to a new pid every few ms (no sweep finds
    os.setsid()      # it), then kills every process of its user: the classmate graded next as that user
    gone = None
    while gone is None or time.time() < gone + 3:
        if gone is None and not os.path.exists(f"/proc/{{_kernel}}"):
            gone = time.time()
        if os.fork():
            os._exit(0)
    end = time.time() + {KILL_FOR}
    while time.time() < end:
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        time.sleep(0.05)
    os._exit(0)
"""


def _wait_for_the_processes_of(user: str, seconds: float) -> list[tuple[int, str, str]]:
    """Wait (no more than ``seconds``) until ``user`` runs no process; (pid, status, command line) of each still
    running then."""
    import pwd

    import psutil

    uid = pwd.getpwnam(user).pw_uid
    end = time.monotonic() + seconds
    while True:
        left = [
            (proc.pid, proc.info["status"], " ".join(proc.info["cmdline"] or ())[:200])
            for proc in psutil.process_iter(["uids", "status", "cmdline"])
            if proc.info["uids"].real == uid
        ]
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.5)


def _stop_the_processes_of(user: str, seconds: float) -> list[tuple[int, str, str]]:
    """Kill every process of ``user`` until it runs none (a process that forks on can need a few rounds), for no
    more than ``seconds``; (pid, status, command line) of each still running then."""
    import pwd
    import signal

    import psutil

    uid = pwd.getpwnam(user).pw_uid
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        running = [proc for proc in psutil.process_iter(["uids"]) if proc.info["uids"].real == uid]
        if not running:
            break
        for proc in running:
            try:
                proc.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass
        time.sleep(0.2)
    return _wait_for_the_processes_of(user, 5)


@pytest.mark.skipif(not WARMUP.exists(), reason="needs solutions/00_warmup.ipynb")
def test_nothing_a_kernel_leaves_kills_the_classmate_graded_next(tmp_path):
    """Round four's hopper, graded before an honest classmate as the same user (``-j 1``): in its pid namespace it
    is seen by its own check and dies with its kernel; without one it goes unseen, escapes the sweep of its user's
    processes and kills the classmate's kernel at each start (bounded: it kills for ``KILL_FOR`` s, a window that
    covers every try of the classmate's kernel however slow the machine, and the test stops it once the classmate
    is graded)."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    _warmup(folder, "a", rtg_prelude=HOPPER_AFTER_ITS_KERNEL)
    _warmup(folder, "b")
    on = _grade(folder, tmp_path / "on", jobs=1)
    assert set(_statuses(on, "b").values()) == {"passed"}, on
    # The hopper still runs when its own check begins: that check fails (a check's answers come from its function),
    # and nothing else does.
    assert "still running when the check began" in on[("a", "reward_to_go")].message, on
    assert [(key, r.status) for key, r in on.items() if r.status != "passed"] == [(("a", "reward_to_go"), "failed")]
    assert _wait_for_the_processes_of(TEST_USER.format(slot=0), 10) == []  # the hopper died with its kernel
    try:
        off = _grade(folder, tmp_path / "off", jobs=1, off=("pid",))
    finally:
        # The classmate graded (every try of its kernel killed): the hopper has done what it shows, and would kill
        # for the rest of its window; it is this test's own user's, and stopped now rather than waited for.
        left = _stop_the_processes_of(TEST_USER.format(slot=0), KILL_FOR + 15)
    assert left == [], "the hopper could not be stopped"
    lost = [r for (who, _), r in off.items() if who == "b" and r.status != "passed"]
    assert lost and all("died" in r.message for r in lost), off
    # The guard's "still running when the check began" reads the last pid of the kernel's own namespace: without one,
    # the hopper is not seen either.
    assert off[("a", "reward_to_go")].status == "passed", off
