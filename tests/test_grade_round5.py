"""Round five's red team (issue 45), graded as root, and each defence shown to matter.

One module fixture grades the class twice, as root (kernels isolated):

- **on**: the grader as it is. Every attack earns nothing.
- **off**: the same submissions, with each attack's own defence switched off, and only that one: a submission names
  the defences it attacks in ``builtins._round5_off`` (its first line), and the kernel runs a copy of course_lib
  whose defences read that name (:data:`KERNEL_SWITCHES`, compiled into the source-free copy the sandbox mounts);
  the grader's side is switched off in the test process (the digest check, the restore in the first cell) and in
  pytest's plugin (records taken at every cell's end, ``tests/round5_take_every_time.py``). Every attack then
  earns its points: so each test measures its defence.

The attacks (chapter 11's ``rloo_advantages`` unless said):

- **records rewritten after their check** (section 2): the function returns zeros, notes its check's session (its
  seed, its folder) through C calls the watch does not see, and a trigger re-runs the check on the reference into
  that folder once the watch is off: IPython's ``post_run_cell``, ``post_execute`` and ``pre_run_cell`` events, a
  replaced ``sys.stdout``, an input or AST transformer added during the check, a callback left in the kernel's
  asyncio loop, a daemon thread waiting for the profile hook to go, a ``SIGALRM`` timer, a ``gc.callbacks`` entry,
  the next solution cell;
- **student code inside the armed check cell** (section 3): a ``sys.meta_path`` finder and a replaced
  ``builtins.__import__`` that hand the check cell's import a module of the student's, an input transformer that
  inserts a line after the guard's ``start()``; each records the reference's answers from the check cell's top level;
- **the blocker's trampoline** (section 4): ``recording.replayable(gc.get_objects)`` under ``watch.trusting()``, for
  the keeper's key and so the check's seed; ``code.replace`` and ``FunctionType`` through it, the reference relabelled
  as torch's code;
- **answers read from the check's frame** (section 5): chapter 01's ``math_answer_reward`` reads the drawn cases'
  expected rewards from the check's ``cases``;
- **a record bomb** (section 5): a record that ``np.load`` would expand to hundreds of MB (on only: off, it would cost
  the test machine that memory).

The smaller holes of section 5 that a class run cannot show safely (a kernel's tasks, the host's disk, the verdict
pipe, the bomb with its cap off) are shown at their own level below, each with its defence on and off.
"""

from __future__ import annotations

import os
import py_compile
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
from test_grade import FAMILY, REWARDS, ROOT, ROUND_FOUR_IN_ROUND_FIVE, answer, exercise_of, save, solution_cell

from course_lib import checks
from course_lib.authoring import grade
from course_lib.authoring.grading import isolation, judging, nbval_report, rebuild, report, runner

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the kernels isolated, as the grader is run")
OFF = """\
def _round5_off(name):  # tests/test_grade_round5.py: is this defence switched off for this submission?
    import builtins
    return name in getattr(builtins, "_round5_off", ())
"""
# file -> [(text of the defence, the same with its switch)]: the kernel's defences, each switched off by its name.
KERNEL_SWITCHES = {
    "checks/watch.py": [  # the check cell's top level watched; the watch in every thread (round four)
        ("                if checked:\n", "                if checked or _off('top-level'):\n"),
        ("        _top=TOP_LEVEL,\n", "        _top=TOP_LEVEL,\n        _off=_round5_off,\n"),
        (
            '        if event != "call":\n',
            '        if event != "call" or (_off("every thread") and _ident() != _main):\n',
        ),
    ],
    "checks/blocker.py": [  # course_lib's frames looked through; the watch kept on; code made; copied text (round four)
        (
            "            if path.startswith(course):\n                frame = frame.f_back\n",
            "            if path.startswith(course):\n                if _round5_off('look-through'):\n"
            "                    return False\n                frame = frame.f_back\n",
        ),
        (
            "            if caller is setter_code or caller is bootstrap_code:\n",
            "            if caller is setter_code or caller is bootstrap_code or _round5_off('watch kept on'):\n",
        ),
        (
            "            if _type(source) is _str and lines:\n",
            "            if _type(source) is _str and lines and not _round5_off('copied text'):\n",
        ),
        (
            "        if event in by_the_student or event in for_the_student:\n",
            "        if (event in by_the_student or event in for_the_student) and not _round5_off(event):\n",
        ),
    ],
    "checks/guard.py": [  # the machinery checked at arm; the seed given once, the tasks counted (round four)
        ("                if changed():\n", "                if changed() and not _round5_off('machinery'):\n"),
        (
            '                if cell in state["released"]:\n',
            '                if cell in state["released"] and not _round5_off("seed once"):\n',
        ),
        (
            '                if own and read("/proc/sys/kernel/ns_last_pid") != armed["tasks"]:\n',
            '                if own and read("/proc/sys/kernel/ns_last_pid") != armed["tasks"]'
            ' and not _round5_off("tasks"):\n',
        ),
    ],
    "checks/rewards.py": [("if scored else None", "if scored or _round5_off('math') else None")],
    "checks/__init__.py": [  # drawn cases (round four); the grader's judge is switched off in the test process
        (
            "    if session is not None:\n        cases = list(cases) + drawn_cases(",
            "    if session is not None and not _round5_off('drawn'):\n        cases = list(cases) + drawn_cases(",
        ),
    ],
}
RESTORE_SWITCH = (  # the first cell's restore, switched off for a submission that names "machinery"
    "    def restore():\n",
    "    def restore():\n        if 'machinery' in getattr(builtins, '_round5_off', ()):\n            return\n",
)

# --- section 2: records rewritten after their check --------------------------------------------------------------

REWRITE = """\
import builtins as _b, sys as _s
_b._round5_off = {off!r}
_NOTE = {{}}


def _rewrite(*_args, **_kwargs):
    # The check run again on the reference, into the folder and with the seed its check used, once the watch is off;
    # the new records put in place whole (a rename), so that the grader never takes half of them.
    if "folder" not in _NOTE or _NOTE.get("done") or _NOTE.get("busy") or _s.getprofile() is not None:
        return
    _NOTE["busy"] = True
    try:
        import os, shutil
        recording = _s.modules["course_lib.checks.recording"]
        from course_lib.checks.family import check_rloo_advantages
        from course_lib.family import rloo_advantages as reference
        folder = _NOTE["folder"]
        made = folder.parent / (folder.name + "-new")
        shutil.rmtree(made, ignore_errors=True)
        made.mkdir(parents=True)
        token = recording._SESSION.set(recording.Session("record", made, _NOTE["seed"], guarded=True))
        try:
            check_rloo_advantages(reference)
        finally:
            recording._SESSION.reset(token)
        shutil.rmtree(folder, ignore_errors=True)
        os.rename(made, folder)
        _NOTE["done"] = True
    except Exception:  # noqa: BLE001 - at an awkward moment (inside an import, say): tried again at the next trigger
        pass
    finally:
        _NOTE["busy"] = False


{trigger}
"""
NOTE_AND_ZEROS = """\
session = _s.modules["course_lib.checks.recording"]._SESSION.get()  # C calls: nothing the watch sees
if session is not None and "folder" not in _NOTE:
    _NOTE.update(folder=session.folder, seed=session.seed)
    _trigger()
return torch.zeros_like(rewards)"""
TRIGGERS = {
    "post_run_cell": 'def _trigger():\n    get_ipython().events.register("post_run_cell", _rewrite)',
    "post_execute": 'def _trigger():\n    get_ipython().events.register("post_execute", _rewrite)',
    "pre_run_cell": 'def _trigger():\n    get_ipython().events.register("pre_run_cell", _rewrite)',
    "stdout": """\
class _Out:
    def __init__(self, inner):
        self.inner = inner

    def write(self, text):  # (never replaces sys.stdout while print holds it: CPython 3.11 would crash)
        if "grading: check completed" in text:
            _rewrite()
        return self.inner.write(text)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _trigger():
    _s.stdout = _Out(_s.stdout)""",
    "input_transformer": """\
def _lines(lines):
    _rewrite()
    return lines


def _trigger():
    get_ipython().input_transformers_post.append(_lines)""",
    "ast_transformer": """\
import ast


class _Tree(ast.NodeTransformer):
    def visit_Module(self, node):
        _rewrite()
        return node


def _trigger():
    get_ipython().ast_transformers.append(_Tree())""",
    "asyncio": """\
import asyncio


def _trigger():
    loop = asyncio.get_event_loop()

    def wait():
        if _s.getprofile() is None:
            _rewrite()
        if not _NOTE.get("done"):
            loop.call_later(0.01, wait)

    loop.call_soon(wait)""",
    "daemon_thread": """\
import threading, time


def _wait_for_the_watch_to_go():
    while "folder" not in _NOTE:
        time.sleep(0.005)
    while not _NOTE.get("done"):  # _rewrite waits for the profile hook (the watch) to go
        _rewrite()
        time.sleep(0.005)


def _trigger():
    pass


threading.Thread(target=_wait_for_the_watch_to_go, daemon=True).start()""",
    "sigalrm": """\
import signal


def _alarm(signum, frame):
    if _s.getprofile() is None:
        _rewrite()  # a try at an awkward moment (the guard still closing the check) fails: the next tick tries again
        if _NOTE.get("done"):
            signal.setitimer(signal.ITIMER_REAL, 0)


def _trigger():
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)""",
    "gc_callback": """\
import gc


def _trigger():
    gc.callbacks.append(lambda phase, info: phase == "stop" and _rewrite())""",
    "next_cell": "def _trigger():\n    pass",
}
LATER_CELLS = {  # what the next solution cell does before its answer
    "next_cell": "_rewrite()\n",
    # An alarm's handler runs between the main thread's bytecodes; between cells the kernel can be idle for less than
    # the alarm's 20 ms, so the attack gives itself a window it does not depend on load for: the next (unwatched)
    # cell sleeps, and the alarm interrupts the sleep.
    "sigalrm": "import time\ntime.sleep(0.5)\n",
    # The asyncio task runs only when the kernel's event loop is free, and between cells that can be too short under
    # load; the next (unwatched) cell awaits at its top level, which hands the loop to the task for half a second.
    "asyncio": "import asyncio\nawait asyncio.sleep(0.5)\n",
}

# --- section 3: the student's code at the top of the armed check cell --------------------------------------------

RECORD_THE_REFERENCE = """\
def _record_the_reference():
    # What check_rloo_advantages records, with the reference's answers, called from the check cell's top level.
    import importlib
    import torch
    from course_lib.checks import compare, drawing, recording
    from course_lib.family import rloo_advantages as reference
    rloo = importlib.import_module("course_lib.checks.family.rloo")
    session = recording.current()
    cases = rloo._rloo_cases()
    cases = list(cases) + drawing.drawn_cases(cases, session.seed, rloo._draw_rewards)
    records = session.begin("rloo_advantages")
    for dtype in (torch.float64, torch.float32):
        for number, case in enumerate(cases):
            kwargs = compare._cast(case.kwargs, dtype)
            outcome = compare._run_student(reference, kwargs, case, compare._default_outputs, "rloo_advantages")
            records.put(number, dtype, outcome)
    records.save()
    print("\\u2714 rloo_advantages: correct")
"""
FAKE_CHECKS = """\
import builtins as _b, sys as _s, types as _types
_b._round5_off = {off!r}
{record}

_FAKE = []


def _fake_checks():
    # A module in place of course_lib.checks.family: the real package's code, but its rloo check records the
    # reference's answers.
    if _FAKE:
        return _FAKE[0]
    import importlib.machinery
    folder = _s.modules["course_lib.checks"].__path__[0] + "/family"
    module = _types.ModuleType("course_lib.checks.family")
    module.__path__ = [folder]
    module.__package__ = "course_lib.checks.family"
    _s.modules["course_lib.checks.family"] = module
    loader = importlib.machinery.SourcelessFileLoader("course_lib.checks.family", folder + "/__init__.pyc")
    exec(loader.get_code("course_lib.checks.family"), vars(module))
    module.check_rloo_advantages = lambda fn: _record_the_reference()
    _FAKE.append(module)
    return module


{install}
"""
META_PATH = """\
import importlib.abc, importlib.util


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name == "course_lib.checks.family":
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        _FAKE.clear()  # a check cell imports afresh: a new module each time
        return _fake_checks()

    def exec_module(self, module):
        pass


_s.meta_path.insert(0, _Finder())"""
IMPORT = """\
_real_import = _b.__import__


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    if name == "course_lib.checks.family" and fromlist:
        return _fake_checks()
    return _real_import(name, globals, locals, fromlist, level)


_b.__import__ = _import"""
INSERTED_LINE = """\
import builtins as _b
_b._round5_off = {off!r}
{record}

def _insert(lines):
    # After the guard's start(): a line of the student's, run at the check cell's top level.
    out = []
    for line in lines:
        out.append(line)
        if "_grading_recording.start(" in line:
            out.append("_record_the_reference()\\n")
    return out


get_ipython().input_transformers_post.append(_insert)
"""

# --- section 4: the blocker's trampoline ---------------------------------------------------------------------------

TRAMPOLINE_KEY = """\
import builtins as _b, gc, types
_b._round5_off = {off!r}
import torch
from course_lib.checks import drawing as _drawing, guard as _guard, recording as _recording, watch as _watch
from course_lib.checks.family import rloo as _rloo
from course_lib.family import rloo_advantages as _reference


def _key_of(f):
    return dict(zip(f.__code__.co_freevars, (c.cell_contents for c in f.__closure__)))["key"]


try:  # the garbage collector's list of objects, through course_lib's own frame: the keeper's closure, its key
    with _watch.trusting():
        _objects = _recording.replayable(gc.get_objects)
    _keeper = [o for o in _objects if type(o) is types.FunctionType and o.__code__.co_name == "_keeper_hook"]
    _seed = _guard.seed_of(_key_of(_keeper[0]), "ex11-rloo-check")
    _cases = list(_rloo._rloo_cases()) + _drawing.drawn_cases(_rloo._rloo_cases(), _seed, _rloo._draw_rewards)
except Exception:  # noqa: BLE001 - refused: only the notebook's cases are known
    _cases = list(_rloo._rloo_cases())
MEMO = {{}}
for _case in _cases:
    for _dtype in (torch.float64, torch.float32):
        _r = _case.kwargs["rewards"].to(_dtype)
        MEMO[(tuple(_r.shape), tuple(_r.flatten().tolist()))] = _reference(_r)
"""
HEART = """\
from course_lib.checks.family import rloo as _rloo
from course_lib.family import rloo_advantages as _reference

MEMO = {}  # the reference's answers to the notebook's own cases, learnt by heart
for _case in _rloo._rloo_cases():
    for _dtype in (torch.float64, torch.float32):
        _r = _case.kwargs["rewards"].to(_dtype)
        MEMO[(tuple(_r.shape), tuple(_r.flatten().tolist()))] = _reference(_r)
"""
SPY = """\
from course_lib.checks import drawing as _drawing, recording as _recording
from course_lib.checks.family import rloo as _rloo
from course_lib.family import rloo_advantages as _reference

# A spy run of the check in the solution cell: its drawn cases' seed, asked for before the check cell runs.
_recording.start("/tmp/spy-records", cell="ex11-rloo-check", exercise="rloo_advantages")
_seed = _recording._SESSION.get().seed  # C calls: the watch, on now, sees nothing
_recording.finish()
_cases = list(_rloo._rloo_cases()) + _drawing.drawn_cases(_rloo._rloo_cases(), _seed, _rloo._draw_rewards)
MEMO = {}
for _case in _cases:
    for _dtype in (torch.float64, torch.float32):
        _r = _case.kwargs["rewards"].to(_dtype)
        MEMO[(tuple(_r.shape), tuple(_r.flatten().tolist()))] = _reference(_r)
"""
MEMO_ANSWER = """\
return MEMO.get((tuple(rewards.shape), tuple(rewards.flatten().tolist())), torch.zeros_like(rewards))"""
TRAMPOLINE_RELABEL = """\
import builtins as _b, functools, types
_b._round5_off = {off!r}
import torch as _torch
from course_lib.checks import recording as _recording, watch as _watch
from course_lib.family import rloo_advantages as _reference

_mine = None
try:  # the reference's code relabelled as torch's, and made a function, through course_lib's own frame
    with _watch.trusting():
        _code = _recording.replayable(functools.partial(_reference.__code__.replace, co_filename=_torch.__file__))
        _mine = _recording.replayable(functools.partial(types.FunctionType, _code, _reference.__globals__))
except Exception:  # noqa: BLE001 - refused
    pass
"""
RELABELLED_ANSWER = "return _mine(rewards) if _mine is not None else torch.zeros_like(rewards)"

# --- section 5: answers read from the check's frame; a record bomb --------------------------------------------------

FRAME_READER = """\
import sys as _s
frame = _s._getframe(1)
while frame is not None:
    if frame.f_code.co_name == "check_math_answer_reward":
        for text, truth, expected, _ in frame.f_locals["cases"]:
            if text == response_text and truth == ground_truth and expected is not None:
                return float(expected)
    frame = frame.f_back
return 1.0"""
BOMB = """\
import sys as _s
_bomb = {}


class _Out:  # the check's "recorded for grading" line, printed after its record is saved, while it is watched
    def __init__(self, inner):
        self.inner = inner

    def write(self, text):
        if "rloo_advantages: recorded for grading" in text and "folder" in _bomb and "done" not in _bomb:
            _bomb["done"] = True
            import io, zipfile
            import numpy as np
            with zipfile.ZipFile(_bomb["folder"] / "record-1.npz", "w", zipfile.ZIP_DEFLATED) as archive:
                name = io.BytesIO()
                np.save(name, np.array("rloo_advantages"))
                archive.writestr("name.npy", name.getvalue())
                with archive.open("zeros.npy", "w", force_zip64=True) as array:  # 320 MB of zeros, 1 MB at a time
                    header = {"descr": "<f8", "fortran_order": False, "shape": (40_000_000,)}
                    np.lib.format.write_array_header_1_0(array, header)
                    for _ in range(320):
                        array.write(bytes(1_000_000))
        return self.inner.write(text)

    def __getattr__(self, name):
        return getattr(self.inner, name)
"""
BOMB_ANSWER = """\
session = _s.modules["course_lib.checks.recording"]._SESSION.get()
if session is not None and "folder" not in _bomb:
    _bomb["folder"] = session.folder
    _s.stdout = _Out(_s.stdout)
others = rewards.sum(-1, keepdim=True) - rewards
G = rewards.shape[-1]
return rewards - others / max(G - 1, 1) if G > 1 else torch.zeros_like(rewards)"""


# --- the class ------------------------------------------------------------------------------------------------------


def round_five_class(folder: Path) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """The submissions, each as ``student -> (notebook, exercise attacked, defences it attacks)``."""
    family = nbformat.read(FAMILY, as_version=4)
    attacks = {}

    def family_submission(student, off, prelude, body, later=""):
        nb = exercise_of(family, FAMILY.name)
        for exercise in family.metadata["course"]["exercises"]:
            answer(nb, family, exercise)
        answer(nb, family, "rloo_advantages", body)
        cell = solution_cell(nb, "rloo_advantages")
        cell.source = prelude + "\n\n" + cell.source
        cell = solution_cell(nb, "gspo_sequence_log_ratio")
        cell.source = later + cell.source
        save(folder, f"{student}_11_grpo_family.ipynb", nb)
        attacks[student] = ("11_grpo_family", "rloo_advantages", tuple(off))

    # Section 2: records rewritten after their check, by every trigger; the defences: the digest the guard signs
    # when the watch ends, and each check cell's folder taken once.
    for trigger, code in TRIGGERS.items():
        off = ("digest", "taken once")
        prelude = REWRITE.format(off=off, trigger=code)
        later = LATER_CELLS.get(trigger, "")
        family_submission(f"rewrite-{trigger.replace('_', '-')}", off, prelude, NOTE_AND_ZEROS, later)
    # Round four's "a later cell garbling records", which garbled nothing (the folder was gone): the later cell
    # writes the folder again; the defence: each check cell's folder taken once.
    from test_grade import SPOIL_RECORDS

    family_submission("spoil", ("taken once",), "", None, later=SPOIL_RECORDS)
    # Round four's attacks, each against its own defence: the watch in every thread, the watch kept on, code made
    # or relabelled, course_lib's text compiled, cases drawn at grading, the seed given once, tasks counted.
    import test_grade as four

    for name, off, prelude, body in (
        ("worker", ("every thread",), four.WORKER, "_jobs.put(rewards)\nreturn _answers.get()"),
        ("watchoff", ("watch kept on",), "", four.WATCH_OFF),
        ("relabel", ("code.__new__", "function.__new__"), "", four.RELABELLED),
        ("carried", ("copied text",), f"SOURCE = {(ROOT / 'course_lib' / 'family.py').read_text()!r}\n", four.CARRIED),
        ("heart", ("drawn",), HEART, MEMO_ANSWER),
        ("spy", ("seed once",), SPY, MEMO_ANSWER),
        ("thread", ("tasks",), "", four.THREAD),
    ):
        switch = f"import builtins as _b\n_b._round5_off = {off!r}\nimport torch\n"
        family_submission(f"four-{name}", off, switch + prelude, body)
    # Section 3: the reference recorded from the check cell's top level, through a module of the student's or a
    # line inserted after start(); the defences: the machinery put back before the check, and checked at arm; the
    # check cell's top level watched.
    for name, install, off in (
        ("finder", META_PATH, ("machinery", "top-level")),
        ("import", IMPORT, ("machinery", "top-level")),
        ("finder-restore-off", META_PATH, ("machinery",)),  # one defence off: the other still stops it
    ):
        prelude = FAKE_CHECKS.format(off=off, record=RECORD_THE_REFERENCE, install=install)
        family_submission(name, off, prelude, "return torch.zeros_like(rewards)")
    family_submission(
        "inserted-line",
        ("top-level",),
        INSERTED_LINE.format(off=("top-level",), record=RECORD_THE_REFERENCE),
        "return torch.zeros_like(rewards)",
    )
    # Section 4: the blocker's trampoline.
    family_submission("trampoline-key", ("look-through",), TRAMPOLINE_KEY.format(off=("look-through",)), MEMO_ANSWER)
    family_submission(
        "trampoline-relabel", ("look-through",), TRAMPOLINE_RELABEL.format(off=("look-through",)), RELABELLED_ANSWER
    )
    # Section 5: chapter 01's drawn cases read from the check's frame; a record bomb (graded with its cap on only).
    rewards = nbformat.read(REWARDS, as_version=4)
    nb = exercise_of(rewards, REWARDS.name)
    for exercise in rewards.metadata["course"]["exercises"]:
        answer(nb, rewards, exercise)
    answer(nb, rewards, "math_answer_reward", FRAME_READER)
    cell = solution_cell(nb, "math_answer_reward")
    cell.source = "import builtins as _b\n_b._round5_off = ('math',)\n\n" + cell.source
    save(folder, "frame_01_rewards.ipynb", nb)
    attacks["frame"] = ("01_rewards", "math_answer_reward", ("math",))
    family_submission("bomb", (), BOMB, BOMB_ANSWER)
    return attacks


def _source_free_with_switches(target: Path, with_source: bool = False):
    """``source_free_course`` for the off run: course_lib compiled with :data:`KERNEL_SWITCHES` (each module's
    code named after the real file, as the grader's copy is). ``with_source``: the switched modules as source
    instead (``tests/test_grade_sandbox.py``: the source-free copy itself switched off)."""
    from course_lib.checks.blocker import SOURCE_LINES, source_lines

    course = ROOT / "course_lib"

    def build() -> Path:
        target.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target))
        for path in sorted(course.rglob("*")):
            relative = path.relative_to(course)
            if "__pycache__" in relative.parts or path.is_dir():
                continue
            destination = target / "course_lib" / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix != ".py":
                shutil.copy2(path, destination)
                continue
            text = path.read_text(encoding="utf-8")
            for old, new in KERNEL_SWITCHES.get(str(relative), []):
                assert old in text, f"{relative}: the defence's text changed; update KERNEL_SWITCHES"
                text = text.replace(old, new)
            if str(relative) in KERNEL_SWITCHES:
                text += "\n\n" + OFF
            if with_source:
                destination.write_text(text, encoding="utf-8")
                continue
            switched = staging / "switched.py"
            switched.write_text(text, encoding="utf-8")
            py_compile.compile(str(switched), cfile=str(destination.with_suffix(".pyc")), dfile=str(path), doraise=True)
        copy = target / "course_lib"
        (copy / SOURCE_LINES).write_text("\n".join(sorted(source_lines(course))), encoding="ascii")
        for folder in [copy, *[p for p in copy.rglob("*") if p.is_dir()]]:
            folder.chmod(0o755)
        for path in copy.rglob("*"):
            if path.is_file():
                path.chmod(0o644)
        target.chmod(0o755)
        return copy

    return build


def _grade(folder: Path, out: Path) -> dict:
    code = grade.main([str(folder), "--out", str(out), "--timeout", "60", "-j", "2", "--quiet"])
    assert code == 0
    assert "without isolation" not in (out / "summary.md").read_text(encoding="utf-8")  # as root, isolated
    return {(r.student, r.notebook, r.exercise): r for r in report.read_rows(out / "grades.csv")}


@pytest.fixture(scope="module")
def round_five(tmp_path_factory):
    """Round five's class, graded on (the grader as it is) and off (each attack's defences switched off)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the attacks are on a grader run as root, kernels isolated")
    if not (FAMILY.exists() and REWARDS.exists()):
        pytest.skip("needs solutions/01 and 11")
    tmp = tmp_path_factory.mktemp("round5")
    folder = tmp / "submissions"
    folder.mkdir()
    attacks = round_five_class(folder)
    only = os.environ.get("ROUND5_ONLY")  # e.g. ROUND5_ONLY=rewrite-sigalrm,spoil: a part of the class, to debug
    if only:
        kept = only.split(",")
        attacks = {student: attack for student, attack in attacks.items() if student in kept}
        for submission in folder.glob("*.ipynb"):
            if not submission.name.startswith(tuple(f"{student}_" for student in kept)):
                submission.unlink()
    on = _grade(folder, tmp / "on")
    (folder / "bomb_11_grpo_family.ipynb").unlink(missing_ok=True)  # off, it would cost this machine gigabytes
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(isolation, "source_free_course", _source_free_with_switches(tmp / "switched"))
        patch.setattr(judging, "records_final", lambda *args: None)  # the digest, not compared
        patch.setattr(checks, "drawn_cases", lambda *args, **kwargs: [])  # the judge asks the notebook's cases only
        # The dtype check (issue 44's check_dtype=True) is not what these attacks are about: their forged answers
        # are judged on values alone, so that each one fails only by the defence its run switches off.
        patch.setattr(checks, "_with_dtypes", lambda select: select)
        patch.setattr(rebuild, "PROLOGUE", rebuild.PROLOGUE.replace(*RESTORE_SWITCH))
        patch.setattr(runner, "PLUGIN", "round5_take_every_time")  # each folder taken at every cell's end
        patch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
        off = _grade(folder, tmp / "off")
    return {"attacks": attacks, "on": on, "off": off}


# Round four's red team as tests/test_grade.py wrote it, graded as root here only (not twice): the message each gets.
ROUND_FOUR_MESSAGES = {
    (name if name == "spoil" else f"four-{name}"): text for name, text in ROUND_FOUR_IN_ROUND_FIVE.items()
}
ATTACKS = (
    [f"rewrite-{t.replace('_', '-')}" for t in TRIGGERS]
    + [
        "finder",
        "import",
        "finder-restore-off",
        "inserted-line",
        "trampoline-key",
        "trampoline-relabel",
        "frame",
        "bomb",
        "spoil",
    ]
    + [f"four-{name}" for name in ("worker", "watchoff", "relabel", "carried", "heart", "spy", "thread")]
)


@ROOT_ONLY
@pytest.mark.timeout(3600)  # the class graded twice, as root, on 2 shared cores
@pytest.mark.parametrize("student", ATTACKS)
def test_round_five_earns_nothing_and_its_defence_is_what_stops_it(round_five, student):
    if student not in round_five["attacks"]:
        pytest.skip("left out by ROUND5_ONLY")
    notebook, exercise, off = round_five["attacks"][student]
    on = round_five["on"][(student, notebook, exercise)]
    assert student == "spoil" or (on.points == 0 and on.status in ("failed", "error")), (student, on)
    assert ROUND_FOUR_MESSAGES.get(student, "") in on.message, (student, on)
    others = [r for (who, _, e), r in round_five["on"].items() if who == student and e != exercise]
    # A thread, or a gc callback (gc runs whenever the kernel allocates), may still run the rewrite inside the next
    # check, whose result it then spoils: the attacker's own loss, charged there.
    if student not in ("rewrite-daemon-thread", "rewrite-gc-callback"):
        assert all(r.status == "passed" for r in others), [(r.exercise, r.status, r.message) for r in others]
    if student == "spoil":  # an honest answer, its records garbled a cell later: it keeps its points
        assert on.status == "passed", on
        switched = round_five["off"][(student, notebook, exercise)]
        assert switched.status != "passed" and "record" in switched.message, switched
        return
    if student == "bomb":
        assert on.status == "error" and "decompressed" in on.message, on
        return
    switched = round_five["off"][(student, notebook, exercise)]
    if student == "finder-restore-off":  # its restore off: the watch of the check cell's top level still stops it
        assert switched.points == 0 and "calls course_lib's own" in switched.message, switched
        return
    assert switched.status == "passed", (student, off, switched)


# --- what a class run cannot show safely, at its own level: each defence on, then off --------------------------------


def _signed_verdict(key: bytes, cell: str, digest: str) -> str:
    import hmac

    text = f"cell {cell} records={digest} clean | "
    return hmac.digest(key, text.encode("utf-8"), "sha256").hex() + " " + text


def test_the_judge_refuses_records_changed_after_the_guard_signed_them(tmp_path, monkeypatch):
    """Section 2 at its own level: the digest the guard signed when the check's watch ended, and the records the
    grader took; one byte changed is refused (and taken as it is when the comparison is switched off)."""
    from course_lib.checks import seal

    folder = tmp_path / "records" / "ex-check"
    folder.mkdir(parents=True)
    (folder / "record-1.npz").write_bytes(b"what the check recorded")
    key = bytes(16)
    signed = seal.make_digest()(str(folder))
    run = runner.Run(key=key)
    pipe = runner.VerdictPipe(key)
    pipe.feed(_signed_verdict(key, "ex-check", signed).encode() + b"\n")
    run.verdicts = pipe.verdicts
    assert judging.records_final(run, folder, "ex-check", "ex") is None
    (folder / "record-1.npz").write_bytes(b"what the reference gave, written after the check")
    status, message = judging.records_final(run, folder, "ex-check", "ex")
    assert status == "failed" and "changed after its check ended" in message
    (folder / "record-1.npz").unlink()
    os.symlink("/etc/passwd", folder / "record-1.npz")  # what the kernel signed is never read through a link
    assert judging.records_final(run, folder, "ex-check", "ex") is not None


def _ask_the_keeper(keeper, event: str, args: tuple) -> None:
    keeper(event, args)  # the keeper answers only the code it knows: this function's, in the test below


def test_the_keeper_signs_the_records_before_the_watch_goes_off(tmp_path):
    """Section 2 at the keeper's own level: a rewrite run the moment the watch goes off (a SIGALRM handler runs
    between any two of the keeper's bytecodes: round five's rewrite-sigalrm once earned its points on CI) is not
    what the keeper signs, so the grader refuses it. The digest taken after the watch went off, it would be."""
    from course_lib.checks import guard, recording, seal, watch

    records = tmp_path / "records"
    folder = records / "ex-check"
    folder.mkdir(parents=True)
    (folder / "record-1.npz").write_bytes(b"the student's answers, recorded by the check")
    key = bytes(16)
    watch_on = []

    def all_threads(hook):
        watch_on.append(hook is not None)
        if hook is None:  # a signal handler's moment, with the watch just off
            (folder / "record-1.npz").write_bytes(b"the reference's answers, written by the handler")

    read_end, write_end = os.pipe()
    code = _ask_the_keeper.__code__
    keeper = guard._keeper(
        key,
        write_end,
        {(code.co_filename, code.co_name): code.co_code},
        all_threads,
        watch.make_hook(frozenset(), (), None, 0),
        vars(__builtins__) if not isinstance(__builtins__, dict) else __builtins__,
        (str(records) + os.sep, seal.NAME_CHARACTERS, seal.make_digest()),
        lambda: False,
    )
    armed: list = []
    _ask_the_keeper(keeper, recording.ARM, ("ex-check", "ex", (), armed))
    assert armed and armed[0][1] == () and watch_on == [True]
    disarmed: list = []
    _ask_the_keeper(keeper, recording.DISARM, (disarmed,))
    assert disarmed and watch_on == [True, False]
    line = os.read(read_end, 65536).decode("utf-8")
    os.close(read_end)
    os.close(write_end)
    text = guard.verify(key, line)
    assert text is not None and text.startswith("cell ex-check ")
    run = runner.Run(key=key)
    run.verdicts = {"ex-check": [text.removeprefix("cell ex-check ")]}
    status, message = judging.records_final(run, folder, "ex-check", "ex")
    assert status == "failed" and "changed after its check ended" in message


def _scratch_with(tmp_path: Path, cell: str, content: bytes) -> Path:
    scratch = tmp_path / "scratch"
    (scratch / "records" / cell).mkdir(parents=True, exist_ok=True)
    (scratch / "records" / cell / "record-1.npz").write_bytes(content)
    return scratch


def test_each_check_folder_is_taken_once_and_nothing_else(tmp_path, monkeypatch):
    """A later cell's rewrite is removed unread; a folder that is no check cell's is never copied to the host
    (switched off, as before this round, the rewrite replaces the first copy and every cell-like folder is taken)."""
    private = tmp_path / "private"
    names = ["ex-check"]
    nbval_report.take_records(_scratch_with(tmp_path, "ex-check", b"recorded by the check"), private, names)
    nbval_report.take_records(_scratch_with(tmp_path, "ex-check", b"rewritten a cell later"), private, names)
    nbval_report.take_records(_scratch_with(tmp_path, "filler-1", b"x" * 1000), private, names)
    assert (private / "records" / "ex-check" / "record-1.npz").read_bytes() == b"recorded by the check"
    assert sorted(p.name for p in (private / "records").iterdir()) == ["ex-check"]
    assert list((tmp_path / "scratch" / "records").iterdir()) == []
    import round5_take_every_time  # noqa: F401 - the plugin variant: taken at every cell's end

    before = tmp_path / "before"
    nbval_report.take_records(_scratch_with(tmp_path, "ex-check", b"recorded by the check"), before, names)
    nbval_report.take_records(_scratch_with(tmp_path, "ex-check", b"rewritten a cell later"), before, names)
    assert (before / "records" / "ex-check" / "record-1.npz").read_bytes() == b"rewritten a cell later"
    monkeypatch.setattr(nbval_report, "take_records", round5_take_every_time._take)
    nbval_report.take_records(_scratch_with(tmp_path, "filler-1", b"x" * 1000), before, None)
    assert (before / "records" / "filler-1").exists()  # without the names, any cell-like folder reaches the host


def test_records_taken_count_as_the_kernel_s_memory(tmp_path):
    """Host disk: what the grader took out of the kernel counts against its --memory like what it holds (switched
    off, as before this round, it counted for nothing)."""
    from course_lib.authoring.grading.watchdog import Memory

    taken = tmp_path / "records"
    (taken / "ex-check").mkdir(parents=True)
    (taken / "ex-check" / "record-1.npz").write_bytes(b"x" * 3000)
    assert Memory(10_000, taken=taken)._taken() == 3000
    assert Memory(10_000)._taken() == 0


def _bomb(path: Path, size: int) -> None:
    import numpy as np

    with open(path, "wb") as f:
        np.savez_compressed(f, name=np.array("rloo_advantages"), zeros=np.zeros(size // 8))


def test_a_record_bomb_is_refused_before_it_is_decompressed(tmp_path, monkeypatch):
    """A record of a few hundred kB that np.load would expand past the cap is the student's failure, read from the
    zip's directory and the array's header; with the cap off it is decompressed whole (here 300 MB, not 8 GiB)."""
    import tracemalloc

    from course_lib.checks import recording

    _bomb(tmp_path / "record-1.npz", 300 << 20)
    assert (tmp_path / "record-1.npz").stat().st_size < 1 << 20
    tracemalloc.start()
    with pytest.raises(recording.NotRecorded, match="decompressed"):
        recording.load(tmp_path / "record-1.npz", "rloo_advantages")
    refused_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert refused_peak < 16 << 20
    monkeypatch.setattr(recording, "MAX_UNPACKED", 1 << 40)
    tracemalloc.start()
    recording.load(tmp_path / "record-1.npz", "rloo_advantages")
    loaded_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert loaded_peak >= 300 << 20


def test_a_record_whose_header_claims_a_huge_array_is_refused(tmp_path):
    import io
    import zipfile

    import numpy as np

    from course_lib.checks import recording

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (10**9,)})
    name = io.BytesIO()
    np.save(name, np.array("rloo_advantages"))
    with zipfile.ZipFile(tmp_path / "record-1.npz", "w") as archive:
        archive.writestr("zeros.npy", header.getvalue() + b"\0" * 64)
        archive.writestr("name.npy", name.getvalue())
    with pytest.raises(recording.NotRecorded, match="decompressed"):
        recording.load(tmp_path / "record-1.npz", "rloo_advantages")


def test_the_verdict_pipe_costs_the_grader_a_line_however_much_is_written(monkeypatch):
    """50 MB of unsigned input, in one endless line and in many short ones, then the guard's signed verdict: the
    grader holds at most one line at a time and keeps the verdict (switched off, the line grows with the input)."""
    key = bytes(16)
    pipe = runner.VerdictPipe(key)
    held = 0
    for chunk in [b"x" * 65536] * 400 + [b"forged verdict\n" * 4000] * 400:
        pipe.feed(chunk)
        held = max(held, len(pipe.partial))
    pipe.feed(b"\n" + _signed_verdict(key, "ex-check", "abc").encode() + b"\n")
    assert held <= runner.VerdictPipe.MAX_LINE
    assert pipe.verdicts == {"ex-check": ["records=abc clean | "]}
    monkeypatch.setattr(runner.VerdictPipe, "MAX_LINE", 1 << 40)
    unbounded = runner.VerdictPipe(key)
    for chunk in [b"x" * 65536] * 400:
        unbounded.feed(chunk)
    assert len(unbounded.partial) == 400 * 65536


@ROOT_ONLY
def test_a_kernel_s_user_holds_at_most_max_tasks(tmp_path):
    """Pid exhaustion: a grading user's kernel cannot start more tasks than ``MAX_TASKS`` (here 32, to keep the
    test small); without the limit the same user starts 64 threads."""
    import pwd
    import subprocess
    import sys

    from course_lib.authoring.grading import sandbox

    user = next((u for u in pwd.getpwall() if u.pw_name.startswith("course-grade-")), None)
    if user is None:
        pytest.skip("no course-grade-N user yet (the class tests create them)")
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable  # one the grading user may run
    threads = (
        "import threading, time\n"
        "started = 0\n"
        "try:\n"
        "    for _ in range(64):\n"
        "        threading.Thread(target=time.sleep, args=(2,), daemon=True).start()\n"
        "        started += 1\n"
        "except RuntimeError:\n"
        "    pass\n"
        "print(started)\n"
    )

    def started(tasks):
        limit = sandbox.limits(0, tasks)

        def as_the_user():
            limit()
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)

        done = subprocess.run([python, "-c", threads], preexec_fn=as_the_user, capture_output=True, text=True, cwd="/")
        return int(done.stdout.strip())

    assert started(32) < 32
    assert started(None) == 64
