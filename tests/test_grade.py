"""`python -m course_lib.grade`: a class of fixture submissions graded in one call.

The fixtures are generated here from the solution notebooks (the real ones in
`solutions/`, and a tiny synthetic chapter `98_synth` whose checks are written inline,
with hidden checks), each one a way a student's notebook can go wrong. The whole class
is graded by ONE run of the command (`-j 2`): starting kernels is the slow part.
Unit tests of the pieces (matching, reading, naming, hidden checks) run no kernel.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import re
import shutil
import time
import uuid
from pathlib import Path

import nbformat
import pytest

from course_lib.authoring import build, grade
from course_lib.authoring.grading import canonical as canonical_mod
from course_lib.authoring.grading import rebuild, report, submissions, verdict
from course_lib.authoring.grading.runner import CellOutcome

ROOT = Path(__file__).resolve().parent.parent
WARMUP = ROOT / "solutions" / "00_warmup.ipynb"
REAL = sorted((ROOT / "solutions").glob("*.ipynb"))
TIMEOUT = 8  # seconds per cell in the class run: the slowest cell (import torch) takes about 2
REAL_TIMEOUT = 60  # for the real solution notebooks, graded apart
ISOLATED = os.geteuid() == 0  # as root (CI, containers) kernels run as users of their own
MARKER = Path("/tmp") / f"course-grade-daemon-{uuid.uuid4().hex}"  # a daemonised process would create it

# --- a tiny synthetic chapter: two module-free exercises, checks inline --------------------------------


def _cell(source, cell_id, tags=(), exercise=None):
    cell = nbformat.v4.new_code_cell(source, id=cell_id)
    if tags:
        cell.metadata["tags"] = list(tags)
    if exercise:
        cell.metadata["course"] = {"exercise": exercise}
    return cell


def synth_solution() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["course"] = {
        "chapter": "98",
        "exercises": {"double": {"points": 1, "title": "Double"}, "halve": {"points": 2, "title": "Halve"}},
    }
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Synthetic chapter", id="intro"),
        _cell("import math\nfactor = 2", "setup"),
        _cell(
            "def double(x):\n    ### BEGIN SOLUTION\n    return factor * x\n    ### END SOLUTION",
            "double-solution",
            ["solution"],
            "double",
        ),
        _cell(
            'assert double(2) == 4, "double(2) should be 4"\nprint("\\u2714 double: correct")',
            "double-check",
            ["check"],
            "double",
        ),
        _cell(
            "def halve(x):\n    ### BEGIN SOLUTION\n    return x / factor\n    ### END SOLUTION",
            "halve-solution",
            ["solution"],
            "halve",
        ),
        _cell(
            'assert halve(4) == 2, "halve(4) should be 2"\nprint("\\u2714 halve: correct")',
            "halve-check",
            ["check"],
            "halve",
        ),
    ]
    return nb


HIDDEN_SYNTH = """\
# hidden checks of 98_synth: cases the students never see
big = 10 ** 6

# %% double
assert double(5) == 10, "double(5) should be 10"
assert double(big) == 2 * big, "double of a big number"

# %% halve
assert halve(3) == 1.5, "halve(3) should be 1.5 (true division)"
"""
HIDDEN_WARMUP = """\
import torch

# %% discounted_return
assert torch.allclose(discounted_return(torch.ones(2, 3), 1.0), torch.tensor([3.0, 3.0])), "gamma = 1, a batch"
"""

# --- editing notebooks as a student would -----------------------------------------------------------------


def exercise_of(solution: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """The student notebook, exactly as the build makes it."""
    return build.exercise_notebook(solution, name)


def by_id(nb, cell_id):
    return next(c for c in nb.cells if c.get("id") == cell_id)


def solution_cell(nb, exercise):
    return next(
        c
        for c in nb.cells
        if "solution" in c.metadata.get("tags", []) and c.metadata.get("course", {}).get("exercise") == exercise
    )


def check_cell(nb, exercise):
    return next(
        c
        for c in nb.cells
        if "check" in c.metadata.get("tags", []) and c.metadata.get("course", {}).get("exercise") == exercise
    )


def answer(nb, solution, exercise, body=None):
    """Fill the student's cell of ``exercise``: the real solution, or ``body`` in its place."""
    source = solution_cell(solution, exercise).source
    if body is not None:
        head = source.split("### BEGIN SOLUTION")[0]
        indent = head[len(head.rstrip(" \t")) :]
        tail = source.split("### END SOLUTION", 1)[1].split("\n", 1)
        source = (
            head.rstrip(" ")
            + "\n".join(indent + line for line in body.splitlines())
            + ("\n" + tail[1] if len(tail) > 1 else "")
        )
    solution_cell(nb, exercise).source = source
    return nb


def save(folder: Path, name: str, nb) -> None:
    (folder / name).write_text(json.dumps(nb, indent=1), encoding="utf-8")  # raw: keeps duplicated ids


WRONG_RETURN = "T = rewards.shape[-1]\nreturn (rewards * gamma ** torch.arange(1, T + 1, dtype=rewards.dtype)).sum(-1)"
WRONG_RTG = "return rewards.flip(-1).cumsum(-1).flip(-1)"
SIMPLE_LOOP = "while True:\n    pass"
STUBBORN_LOOP = "import time\nwhile True:\n    try:\n        time.sleep(0.01)\n    except BaseException:\n        pass"
PATCH_CHECKS = """\
import course_lib.checks, course_lib.checks.warmup
course_lib.checks.warmup.check_discounted_return = lambda fn: print("\\u2714 discounted_return: correct") or True
course_lib.checks.check_against_reference = lambda *args, **kwargs: True
check_discounted_return = course_lib.checks.warmup.check_discounted_return
"""


def warmup_class(folder: Path) -> dict[str, dict[str, tuple[str, str]]]:
    """Write the 00_warmup fixtures; return {student: {exercise: (status, substring of message or notes)}}."""
    solution = nbformat.read(WARMUP, as_version=4)

    def fresh():
        return exercise_of(solution, WARMUP.name)

    def correct():
        return answer(answer(fresh(), solution, "discounted_return"), solution, "reward_to_go")

    expect = {}

    save(folder, "ada_00_warmup.ipynb", correct())
    expect["ada"] = {"discounted_return": ("passed", "\u2714"), "reward_to_go": ("passed", "\u2714")}

    save(folder, "bo_00_warmup.ipynb", fresh())
    expect["bo"] = {
        "discounted_return": ("not attempted", "NotImplementedError"),
        "reward_to_go": ("not attempted", "NotImplementedError"),
    }

    nb = answer(correct(), solution, "discounted_return", WRONG_RETURN)
    save(folder, "cy_00_warmup.ipynb", nb)
    expect["cy"] = {"discounted_return": ("failed", "first reward is discounted too"), "reward_to_go": ("passed", "")}

    # Check cells deleted; the correct answer also writes warnings to stderr, which cost nothing.
    nb = answer(
        fresh(),
        solution,
        "discounted_return",
        "import sys, warnings\nwarnings.warn('a UserWarning on stderr')\nprint('noise', file=sys.stderr)\n"
        "T = rewards.shape[-1]\nreturn (rewards * gamma ** torch.arange(T, dtype=rewards.dtype)).sum(-1)",
    )
    nb.cells = [c for c in nb.cells if "check" not in c.metadata.get("tags", [])]
    save(folder, "di_00_warmup.ipynb", nb)
    expect["di"] = {"discounted_return": ("passed", ""), "reward_to_go": ("not attempted", "")}

    nb = answer(fresh(), solution, "discounted_return", WRONG_RETURN)
    check_cell(nb, "discounted_return").source = "pass"
    check_cell(nb, "reward_to_go").source = 'print("all passed")'
    save(folder, "ed_00_warmup.ipynb", nb)
    expect["ed"] = {"discounted_return": ("failed", "first reward"), "reward_to_go": ("not attempted", "")}

    # Metadata edited: tags dropped or swapped, exercises relabelled, points raised, checks allowed to raise.
    nb = answer(correct(), solution, "discounted_return", WRONG_RETURN)
    nb.metadata["course"]["exercises"] = {"discounted_return": {"points": 100, "title": "x"}}
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        cell.metadata = {
            "tags": ["raises-exception"] if "check" in tags else ["check"] if "solution" in tags else [],
            "course": {"exercise": "reward_to_go"},
        }
    save(folder, "fay_00_warmup.ipynb", nb)
    expect["fay"] = {"discounted_return": ("failed", "first reward"), "reward_to_go": ("passed", "")}

    save(folder, "gus_00_warmup.ipynb", answer(correct(), solution, "discounted_return", SIMPLE_LOOP))
    expect["gus"] = {"discounted_return": ("timeout", f"within {TIMEOUT} s"), "reward_to_go": ("passed", "")}

    save(folder, "hal_00_warmup.ipynb", answer(correct(), solution, "discounted_return", STUBBORN_LOOP))
    expect["hal"] = {"discounted_return": ("timeout", f"within {TIMEOUT} s"), "reward_to_go": ("passed", "")}

    (folder / "ivy_00_warmup.ipynb").write_text('{"cells": [{"cell_type": "code", "source": ', encoding="utf-8")
    expect["ivy"] = {
        "discounted_return": ("unreadable", "not valid JSON"),
        "reward_to_go": ("unreadable", "not valid JSON"),
    }

    # Copied into a new notebook (no cell ids: nbformat 4.4) and reordered; one solution keeps its metadata.
    nb = correct()
    rtg = solution_cell(nb, "reward_to_go")
    rtg.metadata = {}
    nb.cells.remove(rtg)
    nb.cells.insert(2, rtg)
    for cell in nb.cells:
        del cell["id"]
    nb.nbformat_minor = 4
    save(folder, "jo_00_warmup.ipynb", nb)
    expect["jo"] = {"discounted_return": ("passed", "by its metadata"), "reward_to_go": ("passed", "by its content")}

    # Monkeypatching the check module (and torch) from a solution cell, before the check runs.
    nb = answer(fresh(), solution, "discounted_return", WRONG_RETURN)
    solution_cell(nb, "discounted_return").source = PATCH_CHECKS + solution_cell(nb, "discounted_return").source
    nb = answer(nb, solution, "reward_to_go", WRONG_RTG)
    solution_cell(nb, "reward_to_go").source = (
        "torch.allclose = lambda *args, **kwargs: True\n" + solution_cell(nb, "reward_to_go").source
    )
    save(folder, "kim_00_warmup.ipynb", nb)
    expect["kim"] = {"discounted_return": ("failed", "first reward"), "reward_to_go": ("failed", "without discounting")}

    # Hiding errors: IPython shows no traceback, so nbval sees no error; the grader judges from the records.
    nb = answer(correct(), solution, "discounted_return", WRONG_RETURN)
    solution_cell(nb, "discounted_return").source = (
        "get_ipython().showtraceback = lambda *args, **kwargs: None\n" + solution_cell(nb, "discounted_return").source
    )
    save(folder, "lu_00_warmup.ipynb", nb)
    expect["lu"] = {"discounted_return": ("failed", "first reward"), "reward_to_go": ("passed", "")}

    # Duplicated cell ids (a wrong draft, then the final answer under the same id), and missing cells
    # (the markdown and the second solution cell deleted).
    nb = correct()
    final = solution_cell(nb, "discounted_return")
    draft = copy.deepcopy(final)
    draft.source = solution_cell(
        answer(fresh(), solution, "discounted_return", WRONG_RETURN), "discounted_return"
    ).source
    nb.cells.insert(nb.cells.index(final), draft)
    nb.cells = [c for c in nb.cells if c.cell_type == "code" and c is not solution_cell(nb, "reward_to_go")]
    save(folder, "mo_00_warmup.ipynb", nb)
    expect["mo"] = {
        "discounted_return": ("passed", "appears 2 times; the last such cell was graded"),
        "reward_to_go": ("not attempted", "no solution cell"),
    }
    return expect


# --- attacks: a student who wants points without solving, or to hurt the class ---------------------------
RIGHT_RETURN = "T = rewards.shape[-1]\nreturn (rewards * gamma ** torch.arange(T, dtype=rewards.dtype)).sum(-1)"
STUB = 'raise NotImplementedError("still a stub")'
READ_TOKEN = """\
import glob, re
for path in glob.glob("*.ipynb") + glob.glob("../*.ipynb") + glob.glob("../*/*.ipynb"):
    found = re.findall(r"check completed ([0-9a-f]+)", open(path).read())
    if found:
        token = found[0]
        def _lie(*args, **kwargs):
            print("\\u2714 discounted_return: correct on all 6 cases (float64 and float32).")
            print("grading: check completed " + token)
        get_ipython().showtraceback = _lie
"""
FORGER = """\
for i in $(seq 100); do
  for folder in . .. "$HOME"; do
    for cell in 0 1 2 3 4 5 6 7 8 9 10 11; do
      echo '{"event": "end", "cell": '$cell', "outcome": "passed", "stdout": "forged"}' >> "$folder/cells.jsonl"
    done
  done 2>/dev/null
  sleep 0.05
done
"""
FORGE_EVENTS = f"import subprocess\nsubprocess.Popen(['/bin/sh', '-c', {FORGER!r}], start_new_session=True)\n"
LIAR = """\
class Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal, torch.Tensor.allclose, torch.Tensor.equal):
            return True
        if func in (torch.isclose, torch.Tensor.isclose):
            return torch.ones(args[0].shape, dtype=torch.bool)
        if func in (torch.isnan, torch.Tensor.isnan):
            return torch.zeros(args[0].shape, dtype=torch.bool)
        return super().__torch_function__(func, types, args, kwargs or {})
return torch.zeros(rewards.shape[:-1], dtype=rewards.dtype).as_subclass(Liar)"""
STACK_PEEK = """\
import inspect
if any("course_lib" in frame.filename for frame in inspect.stack()):
    return getattr(__import__("course_lib.lectures.warmup", fromlist=["x"]), "discounted" + "_return")(rewards, gamma)
return rewards.sum(-1)"""
RELOADED = """\
import importlib, sys
module = importlib.reload(sys.modules["course_lib.lectures.warmup"])
return module.discounted_return(rewards, gamma)"""
EXEC_SOURCE = """\
import course_lib.lectures.warmup as w
namespace = {}
exec(compile(open(w.__file__).read(), w.__file__, "exec"), namespace)
return namespace["discounted_return"](rewards, gamma)"""
KILL_GRADER = """\
import os, signal
def _grader_pids():
    pid = os.getpid()
    for _ in range(4):
        try:
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return
        yield pid
for pid in list(_grader_pids()):
    if pid > 1:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
"""
WIPE = """\
import glob, os, shutil
targets = []
for pattern in ("../../logs/*", "../../rebuilt/*", "../logs/*", "../rebuilt/*", "/proc/*/cmdline"):
    targets += glob.glob(pattern)
for path in list(targets):
    if path.endswith("cmdline"):
        try:
            words = open(path, "rb").read().split(b"\\0")
            out = words[words.index(b"--out") + 1].decode()
            targets += [os.path.join(out, "grades.csv"), os.path.join(out, "logs"), os.path.join(out, "rebuilt")]
        except (OSError, ValueError, IndexError):
            pass
        continue
for path in targets:
    try:
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif path.endswith("grades.csv"):
            open(path, "a").write("wiper,00_warmup,discounted_return,100,1,passed,forged,,x\\n")
        else:
            os.remove(path)
    except OSError:
        pass
"""
DAEMON_CODE = f"setsid /bin/sh -c 'sleep 4; echo alive > {MARKER}' >/dev/null 2>&1 &"  # a double fork
DAEMON = f"import subprocess\nsubprocess.Popen(['/bin/sh', '-c', {DAEMON_CODE!r}], start_new_session=True)\n"
SIBLING = """\
from course_lib.gae import discounted_returns  # another course_lib function computing the same thing
last = torch.zeros(rewards.shape[:-1], dtype=rewards.dtype)
return discounted_returns(rewards, torch.zeros_like(rewards), last, gamma)[..., 0]"""


def attack_class(folder: Path) -> dict[str, dict[str, tuple[str, str]]]:
    """Submissions that attack the grader, each with the row it must produce (all 00_warmup)."""
    solution = nbformat.read(WARMUP, as_version=4)

    def correct():
        return answer(
            answer(exercise_of(solution, WARMUP.name), solution, "discounted_return"), solution, "reward_to_go"
        )

    def attack(student, prelude="", body=None, rtg_prelude=""):
        nb = answer(correct(), solution, "discounted_return", body) if body is not None else correct()
        cell = solution_cell(nb, "discounted_return")
        cell.source = prelude + cell.source
        rtg = solution_cell(nb, "reward_to_go")
        rtg.source = rtg_prelude + rtg.source
        save(folder, f"{student}_00_warmup.ipynb", nb)

    passed = ("passed", "\u2714")
    expect = {}
    # 1. The per-run token read from the rebuilt notebook, and printed in place of the traceback: a wrong answer.
    attack("tok", READ_TOKEN, WRONG_RETURN)
    expect["tok"] = {"discounted_return": ("failed", "first reward is discounted too"), "reward_to_go": passed}
    # 2. A detached process forging the events file, for a stub.
    attack("eve", body=STUB, rtg_prelude=FORGE_EVENTS)  # (the forger still runs when reward_to_go's check begins)
    expect["eve"] = {
        "discounted_return": ("not attempted", "still a stub"),
        "reward_to_go": ("failed", "still running when the check began"),
    }
    # 3. Links to the solution notebook: a file, and a folder.
    os.symlink(WARMUP, folder / "sym_00_warmup.ipynb")
    expect["sym"] = {"discounted_return": ("symlink", "symbolic link"), "reward_to_go": ("symlink", "never followed")}
    os.symlink(WARMUP.parent, folder / "symdir")
    expect["symdir"] = {"": ("symlink", "symbolic link")}
    # 4. Lying return values: a tensor subclass that compares equal to anything; the reference called only
    #    when a check is on the stack, reached through getattr(__import__(...)); a reloaded module; the source.
    attack("liar", body=LIAR)
    expect["liar"] = {"discounted_return": ("failed", "your output is 0 in every entry"), "reward_to_go": passed}
    attack("peek", body=STACK_PEEK)
    expect["peek"] = {
        "discounted_return": ("failed", "calls course_lib's own discounted_return"),
        "reward_to_go": passed,
    }
    attack("reload", body=RELOADED)
    expect["reload"] = {
        "discounted_return": ("failed", "calls course_lib's own discounted_return"),
        "reward_to_go": passed,
    }
    attack("source", body=EXEC_SOURCE)
    expect["source"] = {  # the grading kernel's course_lib has no source: only compiled code
        "discounted_return": ("failed", "discounted_return raised"),
        "reward_to_go": passed,
    }
    # 5. Hurting the class: killing the grader, wiping the logs and rebuilt notebooks and forging rows,
    #    a daemon that outlives its kernel. Each solves the exercise honestly besides, and keeps its points.
    if ISOLATED:  # without isolation these would succeed: never run them on a developer's machine
        attack("killer", KILL_GRADER)
        expect["killer"] = {"discounted_return": passed, "reward_to_go": passed}
        attack("wiper", WIPE)
        expect["wiper"] = {"discounted_return": passed, "reward_to_go": passed}
        attack("daemon", rtg_prelude=DAEMON)  # still running when its check begins: that check fails
        expect["daemon"] = {"discounted_return": passed, "reward_to_go": ("failed", "still running when the check")}
    # 6. Statuses: os._exit is a dead kernel, not a timeout; pytest killed; a huge printout; too much memory.
    attack("exits", body="import os\nos._exit(0)")
    expect["exits"] = {"discounted_return": ("error", "the kernel died"), "reward_to_go": passed}
    if ISOLATED:
        attack("ppid", rtg_prelude="import os\ntry:\n    os.kill(os.getppid(), 9)\nexcept OSError:\n    pass\n")
        expect["ppid"] = {"discounted_return": passed, "reward_to_go": passed}
    attack("loud", "print('x' * 50_000_000)\n")
    expect["loud"] = {"discounted_return": passed, "reward_to_go": passed}
    attack("greedy", body="hog = bytearray(64 * 2 ** 30)\n" + RIGHT_RETURN)
    expect["greedy"] = {"discounted_return": ("failed", "MemoryError"), "reward_to_go": passed}
    # 7. Borrowed: a sibling course_lib function computing the same thing (not the reference).
    attack("sibling", body=SIBLING)
    expect["sibling"] = {
        "discounted_return": ("failed", "calls course_lib's own gae.discounted_returns"),
        "reward_to_go": passed,
    }
    # 8. Honest students whose results were lost: 21,000 characters printed inside the checked function;
    #    a 200 MB exception message; 3 GiB allocated (under the 4 GB limit of resident memory, over it in
    #    address space); a 100 MB notebook (a large saved output); a solution cell then 1.5 million blank lines.
    attack("chatty", body="print('x' * 21_000)\n" + RIGHT_RETURN)
    expect["chatty"] = {"discounted_return": passed, "reward_to_go": passed}
    attack("shout", body='raise ValueError("x" * 200_000_000)')
    expect["shout"] = {"discounted_return": ("failed", "ValueError"), "reward_to_go": passed}
    attack("big3", "import torch\nheld = torch.empty(3 * 2 ** 30 // 8, dtype=torch.float64)\n")  # untouched
    expect["big3"] = {"discounted_return": passed, "reward_to_go": passed}
    nb = correct()
    by_id(nb, "warmup-setup").outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * (100 << 20))]
    save(folder, "bulky_00_warmup.ipynb", nb)
    expect["bulky"] = {"discounted_return": passed, "reward_to_go": passed}
    nb = correct()
    solution_cell(nb, "discounted_return").source += "\n" * 1_500_000
    save(folder, "blank_00_warmup.ipynb", nb)
    expect["blank"] = {"discounted_return": passed, "reward_to_go": passed}
    # 9. Files that are no notebook file: a FIFO, a student folder that is a link (to a folder, to nothing),
    #    a file name that is not UTF-8.
    os.mkfifo(folder / "fifo_00_warmup.ipynb")
    expect["fifo"] = {"discounted_return": ("unreadable", "not a regular file"), "reward_to_go": ("unreadable", "")}
    (folder.parent / "elsewhere").mkdir(exist_ok=True)
    save(folder.parent / "elsewhere", "00_warmup.ipynb", correct())
    os.symlink(folder.parent / "elsewhere", folder / "linkfolder")
    expect["linkfolder"] = {"": ("symlink", "symbolic link")}
    os.symlink(folder.parent / "nowhere", folder / "deadlink")
    expect["deadlink"] = {"": ("symlink", "symbolic link")}
    with open(os.path.join(os.fsencode(folder), b"\xff\xfe_00_warmup.ipynb"), "w", encoding="utf-8") as f:
        f.write(json.dumps(correct()))
    expect[os.fsdecode(b"\xff\xfe")] = {"discounted_return": passed, "reward_to_go": passed}
    return expect


GAE = ROOT / "solutions" / "04_gae.ipynb"
TOKEN_FROM_HISTORY = """\
import re, sys
def _lie(*args, **kwargs):
    sources, tb = list(get_ipython().user_ns.get("In", [])), sys.exc_info()[2]
    while tb is not None:  # the check cell's own code, on the traceback
        sources += [c for c in tb.tb_frame.f_code.co_consts if isinstance(c, str)]
        tb = tb.tb_next
    for token in sorted(set(re.findall(r"check completed ([0-9a-f]+)", "\\n".join(sources)))):
        print("\\u2714 gae_table: all 5 deltas and 5 advantages agree (forged)")
        print("grading: check completed " + token)
get_ipython().showtraceback = _lie
"""


def direct_call_class(folder: Path) -> dict[str, dict[str, tuple[str, str]]]:
    """A check that calls the student's function itself (gae_table) is judged from the kernel's replies too:
    a wrong table whose failure is hidden, the token looked for in the check cell's own source, earns nothing."""
    solution = nbformat.read(GAE, as_version=4)
    nb = exercise_of(solution, GAE.name)
    for exercise in solution.metadata["course"]["exercises"]:
        answer(nb, solution, exercise)
    answer(nb, solution, "gae_table", "deltas = [0.0] * 5\nadvantages = [0.0] * 5")
    cell = solution_cell(nb, "gae_table")
    cell.source = TOKEN_FROM_HISTORY + cell.source
    save(folder, "hist_04_gae.ipynb", nb)
    passed = ("passed", "\u2714")
    # Whether or not it finds the token, no points: the kernel's check stops before the replies are saved,
    # so the judge finds no record (or the token is missing).
    return {"hist": {"gae_table": ("error", ""), "compute_gae": passed, "td_residuals": passed}}


PPO, REWARDS = ROOT / "solutions" / "05_ppo.ipynb", ROOT / "solutions" / "01_rewards.ipynb"


def borrowed_class(folder: Path) -> dict[str, dict[str, tuple[str, str]]]:
    """Answers borrowed from course_lib: the class an exercise asks for, imported; a function whose check calls
    the student's function itself (no check_against_reference), returning course_lib's own answer."""
    passed = ("passed", "\u2714")
    solution = nbformat.read(PPO, as_version=4)
    nb = exercise_of(solution, PPO.name)
    for exercise in solution.metadata["course"]["exercises"]:
        answer(nb, solution, exercise)
    solution_cell(nb, "PPOLoss").source = "from course_lib.ppo import PPOLoss"
    save(folder, "lib_05_ppo.ipynb", nb)
    expect = {
        "lib": {
            "PPOLoss": ("failed", "calls course_lib's own ppo.PPOLoss"),
            "clipped_surrogate_loss": passed,
            "value_loss": passed,
        }
    }
    solution = nbformat.read(REWARDS, as_version=4)
    nb = exercise_of(solution, REWARDS.name)
    for exercise in solution.metadata["course"]["exercises"]:
        answer(nb, solution, exercise)
    answer(
        nb,
        solution,
        "math_answer_reward",
        "import course_lib.rewards as library\nreturn library.math_answer_reward(response_text, ground_truth)",
    )
    save(folder, "lent_01_rewards.ipynb", nb)
    expect["lent"] = {
        "math_answer_reward": ("failed", "calls course_lib's own rewards.math_answer_reward"),
        "sort_inclusion_ordering_reward": passed,
    }
    return expect


def synth_class(folder: Path, solutions: Path) -> dict[str, dict[str, tuple[str, str]]]:
    solution = synth_solution()
    nbformat.write(solution, solutions / "98_synth.ipynb")

    def fresh():
        return exercise_of(solution, "98_synth.ipynb")

    expect = {}
    nb = answer(answer(fresh(), solution, "double"), solution, "halve")
    (folder / "ra").mkdir()
    save(folder / "ra", "98_synth.ipynb", nb)  # student from the folder name
    expect["ra"] = {"double": ("passed", "\u2714 double"), "halve": ("passed", "")}
    # double passes the visible check but not the hidden one; halve's cell does not even parse.
    nb = answer(answer(fresh(), solution, "double", "return x + 2"), solution, "halve", "return x / 2 +")
    save(folder, "qi-98_synth.ipynb", nb)
    expect["qi"] = {
        "double": ("failed", "hidden check: double(5) should be 10"),
        "halve": ("error", "SyntaxError in your solution cell"),
    }
    if WARMUP.exists():  # a notebook of another chapter under this one's name
        save(folder, "sam_98_synth.ipynb", exercise_of(nbformat.read(WARMUP, as_version=4), WARMUP.name))
        expect["sam"] = {"double": ("wrong notebook", "holds 00_warmup"), "halve": ("wrong notebook", "")}
    save(folder, "tom_42_nothing.ipynb", nbformat.v4.new_notebook())
    expect["tom"] = {"": ("unknown notebook", "42_nothing")}
    return expect


def real_class(folder: Path) -> dict[str, dict[tuple[str, str], tuple[str, str]]]:
    """Every real solution notebook, sent as a submission: it must pass every exercise.

    (That an untouched stub fails only with NotImplementedError is tests/test_exercise_notebooks.py's job.)
    """
    expect = {}
    for path in REAL:
        nb = nbformat.read(path, as_version=4)
        save(folder, f"sol_{path.name}", nb)
        exercises = nb.metadata["course"]["exercises"]
        expect.setdefault("sol", {}).update({(path.stem, e): ("passed", "\u2714") for e in exercises})
    return expect


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """Generate every fixture submission and grade the whole class in one call."""
    tmp = tmp_path_factory.mktemp("class")
    folder, solutions, hidden, out = tmp / "submissions", tmp / "solutions", tmp / "hidden", tmp / "out"
    for path in (folder, solutions, hidden):
        path.mkdir()
    for path in REAL:
        shutil.copy(path, solutions / path.name)
    expect = synth_class(folder, solutions)
    (hidden / "98_synth.py").write_text(HIDDEN_SYNTH, encoding="utf-8")
    if WARMUP.exists():
        expect.update(warmup_class(folder))
        expect.update(attack_class(folder))
    if PPO.exists() and REWARDS.exists():
        expect.update(borrowed_class(folder))
    if GAE.exists():
        expect.update(direct_call_class(folder))
        (hidden / "00_warmup.py").write_text(HIDDEN_WARMUP, encoding="utf-8")
    code = grade.main(
        [
            str(folder),
            "--out",
            str(out),
            "--solutions",
            str(solutions),
            "--hidden",
            str(hidden),
            "--timeout",
            str(TIMEOUT),
            "-j",
            "2",
            "--quiet",
        ]
    )
    ended = time.monotonic()
    with open(out / "grades.csv", encoding="utf-8", errors="surrogateescape") as f:  # a file name need not be UTF-8
        rows = list(csv.DictReader(f))
    return {
        "code": code,
        "rows": rows,
        "expect": expect,
        "out": out,
        "ended": ended,
        "args": [
            str(folder),
            "--out",
            str(out),
            "--solutions",
            str(solutions),
            "--hidden",
            str(hidden),
            "--timeout",
            str(TIMEOUT),
            "-j",
            "2",
            "--quiet",
        ],
    }


def _row(rows, student, exercise, notebook=None):
    found = [
        r
        for r in rows
        if r["student"] == student and r["exercise"] == exercise and (notebook is None or r["notebook"] == notebook)
    ]
    assert len(found) == 1, f"expected one row for {student}/{exercise}, got {found}"
    return found[0]


def test_class_grading_completes_with_exit_0_and_writes_every_report(graded_class):
    out = graded_class["out"]
    assert graded_class["code"] == 0, "grading completed: exit 0 whatever the students scored"
    assert list(graded_class["rows"][0]) == [
        "student",
        "notebook",
        "exercise",
        "points",
        "max_points",
        "status",
        "message",
        "notes",
        "submission",
    ]
    students = {r["student"] for r in graded_class["rows"]}
    assert students >= set(graded_class["expect"])
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "## Per student" in summary and "class average" in summary and "## Per exercise" in summary
    assert len(list((out / "logs").glob("*.log"))) == len({r["submission"] for r in graded_class["rows"]})


@pytest.mark.parametrize(
    "student",
    [
        "ada",
        "bo",
        "cy",
        "di",
        "ed",
        "fay",
        "gus",
        "hal",
        "ivy",
        "jo",
        "kim",
        "lu",
        "mo",
        "ra",
        "qi",
        "sam",
        "tom",
        "tok",
        "eve",
        "sym",
        "symdir",
        "liar",
        "peek",
        "reload",
        "source",
        "killer",
        "wiper",
        "daemon",
        "exits",
        "ppid",
        "loud",
        "greedy",
        "hist",
        "sibling",
        "lib",
        "lent",
        "chatty",
        "shout",
        "big3",
        "big6",
        "bulky",
        "blank",
        "fifo",
        "linkfolder",
        "deadlink",
        "\udcff\udcfe",
    ],
)
def test_fixture_submission_is_graded_as_it_should_be(graded_class, student):
    if student not in graded_class["expect"]:
        pytest.skip("needs solutions/00_warmup.ipynb, and root for the attacks that isolation stops")
    for exercise, (status, text) in graded_class["expect"][student].items():
        row = _row(graded_class["rows"], student, exercise)
        assert row["status"] == status, f"{student}/{exercise}: {row}"
        assert text in row["message"] + " " + row["notes"], f"{student}/{exercise}: {row}"
        assert float(row["points"]) == (float(row["max_points"]) if status == "passed" else 0.0)


def test_nothing_a_kernel_started_outlives_it_and_no_row_is_forged(graded_class):
    if "daemon" not in graded_class["expect"]:
        pytest.skip("needs root: kernels isolated as users of their own")
    time.sleep(max(0.0, graded_class["ended"] + 5 - time.monotonic()))
    assert not MARKER.exists(), "a daemonised process outlived its kernel"
    assert not [r for r in graded_class["rows"] if r["message"] == "forged"]
    summary = (graded_class["out"] / "summary.md").read_text(encoding="utf-8")
    assert "Kernels ran isolated" in summary


def test_a_rebuilt_notebook_rerun_by_hand_judges_in_its_kernel(graded_class):
    """The notebook kept in rebuilt/ records nothing: rerun by hand, a wrong answer fails its check cell."""
    from course_lib.authoring.notebook_client import NotebookClient

    if "cy" not in graded_class["expect"]:
        pytest.skip("needs solutions/00_warmup.ipynb")
    kept = next((graded_class["out"] / "rebuilt").glob("cy__*/00_warmup.ipynb"))
    nb = nbformat.read(kept, as_version=4)
    assert "recording" not in "".join(c.source for c in nb.cells)
    env_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env_path] if env_path else []))
    try:
        NotebookClient(
            nb, kernel_name="python3", allow_errors=True, timeout=60, resources={"metadata": {"path": str(kept.parent)}}
        ).execute()
    finally:
        os.environ.pop("PYTHONPATH") if env_path is None else os.environ.__setitem__("PYTHONPATH", env_path)
    errors = [o for o in by_id(nb, "warmup-return-check").outputs if o.output_type == "error"]
    assert errors and errors[0].ename == "AssertionError" and "first reward is discounted too" in errors[0].evalue
    assert not [o for o in by_id(nb, "warmup-rtg-check").outputs if o.output_type == "error"]


def _grade_alone(tmp_path, notebooks: dict, *extra, cwd=ROOT, env=None, preexec_fn=None):
    """Grade ``{file name: notebook}`` in a fresh python -m course_lib.grade; {(student, exercise): row}."""
    import subprocess
    import sys

    folder, out = tmp_path / "subs", tmp_path / "out"
    folder.mkdir()
    for name, nb in notebooks.items():
        save(folder, name, nb)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "course_lib.grade",
            str(folder),
            "--out",
            str(out),
            "--quiet",
            "--timeout",
            "30",
            *extra,
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=preexec_fn,
    )
    rows = {(r.student, r.exercise): r for r in report.read_rows(out / "grades.csv")}
    return done, rows


def test_a_kernel_whose_pid_came_round_again_is_not_killed():
    """How one kernel could kill a classmate's, as another user: pids come round (pid_max is often 32768, and a
    kernel can fork its way round), so a pid looked up again after the kernel ended may be the classmate's
    kernel. The runner kills the process it saw start, never a pid looked up again."""
    import subprocess
    import sys

    import psutil

    from course_lib.authoring.grading import watchdog
    from course_lib.authoring.grading.sandbox import Sandbox

    classmate = subprocess.Popen(["sleep", "30"])
    pytest_stand_in = subprocess.Popen([sys.executable, "-c", "pass"])
    seen = psutil.Process(classmate.pid)  # the ended kernel, as seen when it started: same pid, earlier start
    seen._create_time = seen.create_time() - 100.0
    seen._ident = (seen.pid, seen._create_time)
    try:
        watchdog._stop_tree(pytest_stand_in, seen, Sandbox(), psutil.Process(pytest_stand_in.pid))
        time.sleep(0.2)
        assert classmate.poll() is None, "the classmate's process was killed"
    finally:
        classmate.kill()
        classmate.wait()


SHM_MARKER = f"course-shm-{uuid.uuid4().hex}"  # a file a kernel writes to its /dev/shm: never the host's


@pytest.fixture(scope="module")
def over_memory(tmp_path_factory):
    """One grading command under ``--memory 1``, ``-j 2``: 1.5 GiB held by a solution cell, and as root 900 MB
    written to the kernel's /dev/shm (each one's test below)."""
    if not WARMUP.exists():
        pytest.skip("needs solutions/00_warmup.ipynb")
    solution = nbformat.read(WARMUP, as_version=4)

    def correct():
        return answer(
            answer(exercise_of(solution, WARMUP.name), solution, "discounted_return"), solution, "reward_to_go"
        )

    held = correct()
    solution_cell(held, "discounted_return").source = (
        "import torch\nheld = torch.ones(3 * 2 ** 30 // 8)  # 1.5 GiB of float32\n"
        + solution_cell(held, "discounted_return").source
    )
    notebooks = {"m_00_warmup.ipynb": held}
    if ISOLATED:  # not as root, the kernel's /dev/shm is the host's: that test is skipped
        shm = correct()
        solution_cell(shm, "discounted_return").source = (
            f"import time\nwith open('/dev/shm/{SHM_MARKER}', 'wb') as f:\n    f.write(bytes(900 << 20))\n"
            "time.sleep(4)\n" + solution_cell(shm, "discounted_return").source
        )
        notebooks["s_00_warmup.ipynb"] = shm
    return _grade_alone(tmp_path_factory.mktemp("memory"), notebooks, "--memory", "1", "-j", "2")


def test_over_the_memory_limit_is_its_own_status(over_memory):
    """Resident memory is watched: 1.5 GiB written under --memory 1 is stopped, and the next exercise graded."""
    done, rows = over_memory
    assert done.returncode == 0, done.stderr
    assert rows[("m", "discounted_return")].status == "over the memory limit", rows
    assert "more than the 1 GB" in rows[("m", "discounted_return")].message
    assert rows[("m", "reward_to_go")].status == "passed", rows


@pytest.mark.skipif(not (ISOLATED and WARMUP.exists()), reason="needs root: kernels isolated as users of their own")
def test_a_course_in_a_private_folder_grades_as_root(tmp_path):
    """The course in a folder the grading users cannot enter (mode 700): kernels still start, and pass."""
    private = tmp_path / "private"
    course = private / "course"
    (course / "solutions").mkdir(parents=True)
    private.chmod(0o700)
    shutil.copytree(ROOT / "course_lib", course / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(WARMUP, course / "solutions")
    solution = nbformat.read(WARMUP, as_version=4)
    correct = answer(
        answer(exercise_of(solution, WARMUP.name), solution, "discounted_return"), solution, "reward_to_go"
    )
    env = {**os.environ, "PYTHONPATH": str(course)}
    done, rows = _grade_alone(tmp_path, {"c_00_warmup.ipynb": correct}, cwd=course, env=env)
    assert done.returncode == 0, done.stderr
    assert {key: r.status for key, r in rows.items()} == {
        ("c", "discounted_return"): "passed",
        ("c", "reward_to_go"): "passed",
    }, rows


def test_running_again_resumes_and_regrades_nothing(graded_class, capsys):
    before = (graded_class["out"] / "grades.csv").read_bytes()
    start = time.monotonic()
    assert grade.main(graded_class["args"]) == 0
    assert time.monotonic() - start < 20, "every submission was already graded: no kernel should start"
    assert (graded_class["out"] / "grades.csv").read_bytes() == before
    assert "already in" in capsys.readouterr().err


def test_points_come_from_the_solution_notebook_not_the_submission(graded_class):
    if "fay" not in graded_class["expect"]:
        pytest.skip("needs solutions/00_warmup.ipynb, which does not exist yet")
    assert _row(graded_class["rows"], "fay", "discounted_return")["max_points"] == "1"  # fay claimed 100
    assert _row(graded_class["rows"], "ra", "halve")["max_points"] == "2"


LOGGED_CELL = re.compile(r"^cell +(\d+) (\w+) +\S* +(\S+): (\S+)(.*)$")


@pytest.mark.skipif(not REAL, reason="no solution notebook in solutions/ yet")
def test_every_real_solution_notebook_passes_when_sent_as_a_submission(tmp_path, record_property):
    """The solution notebooks, graded as an instructor would: every exercise passes, and every cell of each
    notebook runs without an error, under nbval (given cells keep their stored outputs, so a cell marked
    NBVAL_CHECK_OUTPUT is compared as `pytest --nbval-lax solutions/` would compare it). This is how `make test`
    runs solutions/ under nbval: once, through the grader, rather than twice. The cell timeout is one that their
    demos, which train models for seconds, never come near (the class above needs a short one for its loops)."""
    folder, out = tmp_path / "submissions", tmp_path / "out"
    folder.mkdir()
    expect = real_class(folder)
    assert grade.main([str(folder), "--out", str(out), "--timeout", str(REAL_TIMEOUT), "-j", "2", "--quiet"]) == 0
    with open(out / "grades.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for student, expected in expect.items():
        for (notebook, exercise), (status, text) in expected.items():
            row = _row(rows, student, exercise, notebook)
            assert row["status"] == status and text in row["message"], row
    seconds, failed = {}, []
    for log in sorted((out / "logs").glob("*.log")):
        lines = log.read_text(encoding="utf-8").splitlines()
        notebook = next(line.split()[1] for line in lines if line.startswith("notebook: "))
        runs = [line for line in lines if line.startswith("--- run ")]
        assert len(runs) == 1, f"{notebook} was run {len(runs)} times (a cell hung or stopped the kernel):\n{runs}"
        seconds[f"solutions/{notebook}.ipynb"] = float(runs[0].split()[3])
        cells = [LOGGED_CELL.match(line) for line in lines if line.startswith("cell ")]
        assert cells and all(cells), f"{log.name}: the cell lines of the log did not parse"
        failed += [f"{notebook} cell {m[1]} ({m[2]}, {m[3]}): {m[4]}{m[5]}" for m in cells if m[4] != "passed"]
    assert sorted(seconds) == sorted(f"solutions/{path.name}" for path in REAL)
    assert not failed, "cells that did not pass in the graded solution notebooks:\n" + "\n".join(failed)
    record_property("notebook_seconds", seconds)  # conftest.py's `notebook run times` lists them


# --- the pieces, without a kernel --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "relative, base, student",
    [
        ("submissions/alice/00_warmup.ipynb", "submissions", "alice"),
        ("submissions/alice/deep/any.ipynb", "submissions", "alice"),
        ("submissions/alice_00_warmup.ipynb", "submissions", "alice"),
        ("x/bob-00_warmup (1).ipynb", None, "bob"),
        ("carol/00_warmup.ipynb", None, "carol"),
        ("dan_07_trainers.ipynb", None, "dan"),
        ("homework.ipynb", None, "homework"),
    ],
    ids=[
        "sub-folder",
        "deep-sub-folder",
        "prefix",
        "prefix-and-copy-suffix",
        "parent-folder",
        "unknown-notebook",
        "no-notebook-name",
    ],
)
def test_student_names(tmp_path, relative, base, student):
    path = tmp_path / relative
    assert submissions.student_name(path, tmp_path / base if base else None, ["00_warmup"]) == student


def test_unreadable_files_come_back_with_a_problem_not_an_exception(tmp_path):
    cases = {"broken.ipynb": '{"cells": [', "list.ipynb": "[1, 2]", "binary.ipynb": b"\xff\xfe\x00"}
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        assert submissions.read_submission(path, None, []).problem, name


def test_reading_keeps_duplicated_ids_and_joins_list_sources(tmp_path):
    cells = [
        {"cell_type": "code", "id": "a", "source": ["x = 1\n", "y = 2"], "metadata": {}, "outputs": []},
        {"cell_type": "code", "id": "a", "source": "z = 3", "metadata": {"tags": "not a list"}, "outputs": []},
    ]
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    read = submissions.read_submission(path, None, [])
    assert [c.cell_id for c in read.cells] == ["a", "a"] and read.cells[0].source == "x = 1\ny = 2"
    assert read.cells[1].tags == []


def _synth_canonical(tmp_path, hidden=None) -> canonical_mod.Canonical:
    path = tmp_path / "98_synth.ipynb"
    nbformat.write(synth_solution(), path)
    if hidden is not None:
        (tmp_path / "hidden").mkdir(exist_ok=True)
        (tmp_path / "hidden" / "98_synth.py").write_text(hidden, encoding="utf-8")
    return canonical_mod.load_canonical(path, tmp_path / "hidden")


def _submission(tmp_path, nb) -> submissions.Submission:
    path = tmp_path / "s_98_synth.ipynb"
    save(tmp_path, path.name, nb)
    return submissions.read_submission(path, None, ["98_synth"])


def test_hidden_checks_are_split_per_exercise_with_the_preamble(tmp_path):
    canonical = _synth_canonical(tmp_path, HIDDEN_SYNTH)
    assert list(canonical.exercises) == ["double", "halve"]
    double = canonical.exercises["double"].hidden[0]
    assert double.startswith("# hidden checks") and "big = 10 ** 6" in double and "double(5)" in double
    assert "halve(3)" not in double and "big = 10 ** 6" in canonical.exercises["halve"].hidden[0]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("# %% nosuch\nassert True\n", "names no exercise"),
        ("# %% double\nassert (\n", "does not compile"),
        ("assert True\n", "no '# %% <exercise id>' section"),
    ],
)
def test_bad_hidden_checks_are_a_setup_error(tmp_path, text, problem):
    with pytest.raises(canonical_mod.SetupError, match=problem):
        _synth_canonical(tmp_path, text)


def test_a_solution_notebook_without_points_is_a_setup_error(tmp_path):
    nb = synth_solution()
    nb.metadata["course"]["exercises"]["double"]["points"] = "many"
    nbformat.write(nb, tmp_path / "98_synth.ipynb")
    with pytest.raises(canonical_mod.SetupError, match="points"):
        canonical_mod.load_canonical(tmp_path / "98_synth.ipynb")


def test_rebuild_takes_only_solution_cells_and_guards_the_checks(tmp_path):
    canonical = _synth_canonical(tmp_path, HIDDEN_SYNTH)
    nb = exercise_of(synth_solution(), "98_synth.ipynb")
    by_id(nb, "double-solution").source = "def double(x):\n    return 2 * x"
    by_id(nb, "double-check").source = "pass"
    by_id(nb, "setup").source = "factor = 3"
    match = rebuild.match_solutions(canonical, _submission(tmp_path, nb))
    rebuilt, graded = rebuild.rebuild(canonical, match, "TOKEN")
    assert by_id(rebuilt, "double-solution").source == "def double(x):\n    return 2 * x"
    assert by_id(rebuilt, "setup").source == "import math\nfactor = 2", "given code is the instructor's"
    check = by_id(rebuilt, "double-check").source
    assert "assert double(2) == 4" in check and "TOKEN" in check and "del _grading_sys.modules" in check
    assert [g.role for g in graded] == [
        "prologue",
        "given",
        "solution",
        "check",
        "hidden",
        "solution",
        "check",
        "hidden",
    ]
    stubbed, _ = rebuild.rebuild(canonical, match, "TOKEN", stubbed={"double"})
    assert "NotImplementedError" in by_id(stubbed, "double-solution").source
    assert "not run" in by_id(stubbed, "double-check").source


def test_matching_by_id_metadata_position_and_content(tmp_path):
    canonical = _synth_canonical(tmp_path)
    nb = exercise_of(synth_solution(), "98_synth.ipynb")
    by_id(nb, "double-solution")["id"] = "pasted-1"  # metadata still says solution/double
    halve = by_id(nb, "halve-solution")
    halve["id"], halve.metadata = "pasted-2", {}  # same position among code cells
    match = rebuild.match_solutions(canonical, _submission(tmp_path, nb))
    assert set(match.sources) == {"double-solution", "halve-solution"} and not match.missing
    assert any("by its metadata" in n for n in match.notes) and any("by position" in n for n in match.notes)
    nb.cells = [c for c in nb.cells if c is not halve]
    nb.cells.insert(1, halve)  # moved up: found by the function it defines
    match = rebuild.match_solutions(canonical, _submission(tmp_path, nb))
    assert any("by its content" in n for n in match.notes) and any("reordered" in n for n in match.notes)
    nb.cells = [c for c in nb.cells if c is not halve]
    match = rebuild.match_solutions(canonical, _submission(tmp_path, nb))
    assert match.missing == {"halve"}


def test_duplicated_ids_grade_the_last_cell_and_say_so(tmp_path):
    canonical = _synth_canonical(tmp_path)
    nb = exercise_of(synth_solution(), "98_synth.ipynb")
    second = copy.deepcopy(by_id(nb, "double-solution"))
    second.source = "def double(x):\n    return x + x"
    nb.cells.insert(4, second)
    match = rebuild.match_solutions(canonical, _submission(tmp_path, nb))
    assert match.sources["double-solution"] == "def double(x):\n    return x + x"
    assert any("appears 2 times" in n for n in match.notes)


@pytest.mark.skipif(not WARMUP.exists(), reason="needs solutions/00_warmup.ipynb")
def test_a_solution_that_calls_the_reference_gets_a_note(tmp_path):
    canonical = canonical_mod.load_canonical(WARMUP)
    solution = nbformat.read(WARMUP, as_version=4)
    nb = answer(
        exercise_of(solution, WARMUP.name),
        solution,
        "discounted_return",
        "from course_lib.lectures.warmup import discounted_return as ref\nreturn ref(rewards, gamma)",
    )
    save(tmp_path, "s_00_warmup.ipynb", nb)
    match = rebuild.match_solutions(canonical, submissions.read_submission(tmp_path / "s_00_warmup.ipynb", None, []))
    assert [n for n in match.notes if "own discounted_return" in n], match.notes
    assert not [n for n in match.notes if "reward_to_go" in n], "an untouched stub is not flagged"


@pytest.mark.parametrize(
    "role, cell, status, text",
    [
        ("check", CellOutcome("passed", stdout="\u2714 ok\nTOKEN\n"), None, ""),
        ("check", CellOutcome("passed", stdout="\u2714 ok\n"), "error", "did not report completion"),
        ("check", CellOutcome("error", "AssertionError", "f: wrong\n  on the case: x"), "failed", "f: wrong"),
        ("hidden", CellOutcome("error", "AssertionError", "big case"), "failed", "hidden check: big case"),
        ("check", CellOutcome("error", "NotImplementedError", "stub"), "not attempted", "stub"),
        ("solution", CellOutcome("error", "SyntaxError", "bad"), "error", "SyntaxError in your solution cell"),
        ("solution", CellOutcome("error", "AssertionError", "own assert"), "error", "AssertionError"),
        ("check", CellOutcome("timeout"), "timeout", "within 60 s"),
        ("check", CellOutcome("dead"), "error", "did not run"),
        ("check", CellOutcome("error", "TypeError", "at 0x7f00aa in /tmp/abc/x.py"), "error", "at ADDR in TMPPATH"),
    ],
)
def test_judge_maps_cell_outcomes_to_statuses(role, cell, status, text):
    clean = verdict.sanitizer(ROOT / "tests" / "nbval_sanitize.cfg")
    got = verdict.judge(role, cell, "TOKEN", verdict.Options(), clean)
    assert (got is None) if status is None else (got[0] == status and text in got[1]), got


def test_a_grader_bug_costs_one_submission_not_the_class(tmp_path, monkeypatch):
    canonical = {"98_synth": _synth_canonical(tmp_path)}
    path = tmp_path / "zed_98_synth.ipynb"
    nbformat.write(synth_solution(), path)

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the grader")

    monkeypatch.setattr(verdict, "match_solutions", broken)
    result = verdict.grade_submission(path, None, canonical, verdict.Options(work=tmp_path / "w"), "zed")
    assert [(r.exercise, r.status) for r in result.rows] == [("double", "grader error"), ("halve", "grader error")]
    assert "a bug in the grader" in result.rows[0].message and "Traceback" in "\n".join(result.log)


def test_summary_totals_averages_and_problems():
    def result(student, notebook, points, status="passed", notes=""):
        rows = [
            verdict.Row(student, notebook, "e1", points[0], 1, status, "", notes, f"{student}.ipynb"),
            verdict.Row(student, notebook, "e2", points[1], 2, status, "", "", f"{student}.ipynb"),
        ]
        return verdict.Graded(student, Path(f"{student}.ipynb"), rows, key=student)

    results = [
        result("a", "00_x", (1, 2)),
        result("b", "00_x", (0, 0), "unreadable"),
        result("a", "00_x", (0, 2), notes="reordered"),
    ]
    text = report.summary_markdown(results, "header")
    assert "| a | 3 | 3 | 100% |" in text, "the best of a's two submissions counts"
    assert "| b | 0 | 0 | 0% |" in text and "| **class average** | 1.50 | 1.50 | 50% |" in text
    assert "a: 2 submissions of 00_x" in text and "unreadable" in text and "reordered" in text


def test_cannot_grade_at_all_exits_2(tmp_path, capsys):
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    nbformat.write(synth_solution(), solutions / "98_synth.ipynb")
    empty = tmp_path / "empty"
    empty.mkdir()
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    sub = tmp_path / "s_98_synth.ipynb"
    nbformat.write(synth_solution(), sub)
    assert grade.main([str(empty), "--out", str(tmp_path / "o"), "--solutions", str(solutions)]) == 2
    assert grade.main([str(sub), "--out", str(tmp_path / "o"), "--solutions", str(empty)]) == 2
    assert grade.main([str(sub), "--out", str(tmp_path / "o"), "--solutions", str(tmp_path / "no")]) == 2
    assert grade.main([str(sub), "--out", str(blocker / "o"), "--solutions", str(solutions)]) == 2
    assert "no submission found" in capsys.readouterr().err


def test_a_kernel_that_dies_before_answering_is_started_again(monkeypatch, tmp_path):
    from course_lib.authoring.grading import runner

    outcomes = iter(
        [
            runner.CellOutcome("setup-error", message="Kernel died before replying to kernel_info"),
            runner.CellOutcome("passed"),
        ]
    )
    calls = []

    def fake_run_once(notebook, timeout, threads, sanitize, *sandbox):
        calls.append(notebook)
        return runner.Run(cells={0: next(outcomes)})

    monkeypatch.setattr(runner, "_run_once", fake_run_once)
    monkeypatch.setattr(runner.time, "sleep", lambda seconds: None)
    run = runner.run_nbval(tmp_path / "nb.ipynb", timeout=5)
    assert len(calls) == 2 and run.kernel_retries == 1
    assert run.cells[0].outcome == "passed"


def test_a_kernel_that_never_starts_is_reported_after_the_last_try(monkeypatch, tmp_path):
    from course_lib.authoring.grading import runner

    monkeypatch.setattr(runner, "_run_once", lambda *args: runner.Run(cells={0: runner.CellOutcome("setup-error")}))
    monkeypatch.setattr(runner.time, "sleep", lambda seconds: None)
    run = runner.run_nbval(tmp_path / "nb.ipynb", timeout=5)
    assert run.kernel_retries == runner.KERNEL_START_TRIES - 1
    assert run.cells[0].outcome == "setup-error"


# --- losing nothing, statuses, recording: no class run needed ---------------------------------------------


def test_a_grader_killed_mid_class_keeps_finished_rows_and_resumes(tmp_path):
    """Kill the command after its first submission; every finished row stays, and a rerun grades the rest."""
    import subprocess
    import sys

    solutions, folder, out = tmp_path / "solutions", tmp_path / "subs", tmp_path / "out"
    solutions.mkdir()
    folder.mkdir()
    solution = synth_solution()
    nbformat.write(solution, solutions / "98_synth.ipynb")
    for student in ("a1", "a2", "a3"):
        save(
            folder,
            f"{student}_98_synth.ipynb",
            answer(answer(exercise_of(solution, "98_synth.ipynb"), solution, "double"), solution, "halve"),
        )
    args = [str(folder), "--out", str(out), "--solutions", str(solutions), "-j", "1", "--quiet", "--timeout", "20"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "course_lib.grade", *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(report.read_rows(out / "grades.csv")) < 2:
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    kept = report.read_rows(out / "grades.csv")
    assert len(kept) >= 2 and all(r.status == "passed" for r in kept), kept
    assert grade.main(args) == 0
    rows = report.read_rows(out / "grades.csv")
    assert sorted((r.student, r.exercise) for r in rows) == [
        (s, e) for s in ("a1", "a2", "a3") for e in ("double", "halve")
    ]
    assert [r for r in rows if r.status != "passed"] == []
    entries = [json.loads(line) for line in (out / "messages.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted((e["submission"], e["exercise"]) for e in entries) == sorted((r.submission, r.exercise) for r in rows)


def test_symlinks_are_found_but_never_followed(tmp_path):
    (tmp_path / "real").mkdir()
    nbformat.write(synth_solution(), tmp_path / "real" / "x_98_synth.ipynb")
    subs = tmp_path / "subs"
    subs.mkdir()
    os.symlink(tmp_path / "real" / "x_98_synth.ipynb", subs / "ln_98_synth.ipynb")
    os.symlink(tmp_path / "real", subs / "linked")
    found, missing = submissions.find_submissions([subs])
    assert sorted(p.name for p, _ in found) == ["linked", "ln_98_synth.ipynb"] and not missing
    assert all(submissions.is_symlink(p, b) for p, b in found)
    with pytest.raises(OSError):
        submissions.read_no_follow(subs / "ln_98_synth.ipynb")


def test_a_dead_kernel_and_a_killed_pytest_are_named():
    clean = verdict.sanitizer(None)
    died = CellOutcome("died", message="the kernel died while this cell ran")
    assert verdict.judge("check", died, "T", verdict.Options(), clean)[1].startswith("the kernel died")
    killed = CellOutcome("died", message="the grading process was killed while this cell ran")
    assert "grading process was killed" in verdict.judge("solution", killed, "T", verdict.Options(), clean)[1]


def test_rows_are_appended_and_read_back(tmp_path):
    path = tmp_path / "grades.csv"
    report.write_csv([verdict.Row("a", "00_x", "e", 1, 1, "passed", "\u2714, with a comma", "", "a.ipynb")], path)
    report.append_rows([verdict.Row("b", "00_x", "e", 0, 1, "failed", "no", "", "b.ipynb")], path)
    with open(path, "a", encoding="utf-8") as f:
        f.write("c,00_x,e,0")  # a row cut short by a kill
    assert [(r.student, r.points, r.message) for r in report.read_rows(path)] == [
        ("a", 1.0, "\u2714, with a comma"),
        ("b", 0.0, "no"),
    ]


def _csv_row(student: str, exercise: str, submission: str) -> verdict.Row:
    return verdict.Row(student, "00_x", exercise, 1, 1, "passed", "ok", "", submission)


@pytest.mark.parametrize("cut_at", ["c,00_x,e,0", "c,00_x,e2,1,1,passed,ok,,c.ipy"])  # mid-row; in its last column
def test_a_resume_after_a_cut_row_loses_no_row(tmp_path, cut_at):
    """A machine that stops while rows are written leaves a cut line. The resume drops it with every row of the
    last whole row's submission (it may be the one being written: graded again) and rewrites the file, so that the
    next rows start on a line of their own. Without the rewrite, the next appended row joins the cut line and is
    lost; a cut in the last column even leaves a row with a wrong submission, which the resume also drops."""
    path = tmp_path / "grades.csv"
    report.write_csv([_csv_row("a", "e", "a.ipynb"), _csv_row("c", "e", "c.ipynb")], path)
    with open(path, "a", encoding="utf-8") as f:
        f.write(cut_at)
    kept = report.rows_to_resume(path)
    assert [(r.student, r.submission) for r in kept] == [("a", "a.ipynb")]  # c is graded again
    report.append_rows([_csv_row("c", "e", "c.ipynb"), _csv_row("c", "e2", "c.ipynb")], path)
    assert [(r.student, r.exercise) for r in report.read_rows(path)] == [("a", "e"), ("c", "e"), ("c", "e2")]
    assert not (tmp_path / "grades.csv.resume").exists()


def test_without_the_resume_rewrite_a_row_after_a_cut_is_lost(tmp_path):
    """The defence switched off: rows appended after a cut line (as before the rewrite) lose the first of them."""
    path = tmp_path / "grades.csv"
    report.write_csv([_csv_row("a", "e", "a.ipynb")], path)
    with open(path, "a", encoding="utf-8") as f:
        f.write("c,00_x,e,0")
    report.append_rows([_csv_row("d", "e", "d.ipynb")], path)
    assert ("d", "e") not in [(r.student, r.exercise) for r in report.read_rows(path)]


def test_an_unbroken_file_is_kept_whole_by_the_resume(tmp_path):
    path = tmp_path / "grades.csv"
    report.write_csv([_csv_row("a", "e", "a.ipynb"), _csv_row("b", "e", "b.ipynb")], path)
    before = path.read_bytes()
    assert [r.student for r in report.rows_to_resume(path)] == ["a", "b"]
    assert path.read_bytes() == before
    assert report.rows_to_resume(tmp_path / "missing.csv") == []


RIGHT = "return (rewards * gamma ** torch.arange(rewards.shape[-1], dtype=rewards.dtype)).sum(-1)"


@pytest.mark.skipif(not WARMUP.exists(), reason="needs course_lib.checks.warmup")
@pytest.mark.parametrize(
    "body, status, text",
    [
        (RIGHT, "passed", "\u2714 discounted_return: correct on all 6 cases"),
        (WRONG_RETURN, "failed", "first reward is discounted too"),
        (
            "key = round(float(rewards.sum()), 3)\nif key in MEMO:\n    return MEMO[key].to(rewards.dtype)\n"
            "return rewards.sum(-1)",
            "failed",
            "drawn at grading time",
        ),  # the notebook's cases learnt by heart
        (
            "from course_lib.lectures.warmup import discounted_return as ref\nreturn ref(rewards, gamma)",
            "record",
            "calls course_lib's own discounted_return",
        ),
        ("raise NotImplementedError('stub')", "record", "stub"),
    ],
    ids=["right", "wrong", "memorised", "reference", "stub"],
)
def test_record_then_judge_gives_the_notebooks_feedback(tmp_path, body, status, text):
    """The check records in one context and judges in another, with the notebook's messages."""
    import contextvars

    import torch

    from course_lib.checks import recording
    from course_lib.checks.warmup import _cases, check_discounted_return
    from course_lib.lectures.warmup import discounted_return

    memo = {round(float(c.kwargs["rewards"].sum()), 3): discounted_return(**c.kwargs) for c in _cases()}
    namespace = {"torch": torch, "MEMO": memo}
    exec("def discounted_return(rewards, gamma):\n" + "\n".join("    " + line for line in body.splitlines()), namespace)
    fn = namespace["discounted_return"]

    def record():
        recording.start(str(tmp_path / "records"), seed=1234)
        return check_discounted_return(fn)

    if status == "record":  # stopped in the kernel already, with the same message as in a notebook
        with pytest.raises((recording.ReferenceCalled, NotImplementedError), match=text):
            contextvars.copy_context().run(record)
        return
    assert contextvars.copy_context().run(record) is True
    assert recording.current() is None, "the record session stays in its own context"
    with recording.judging(tmp_path / "records", seed=1234) as session:
        try:
            check_discounted_return(lambda *a, **k: pytest.fail("the judge never calls the student's function"))
            judged = session.lines[0]
        except AssertionError as error:
            judged = str(error)
    assert text in judged, judged
    if status != "failed" or "drawn" not in text:
        try:
            check_discounted_return(fn)
            in_notebook = session.lines[0]
        except AssertionError as error:
            in_notebook = str(error)
        assert judged.splitlines()[0] == in_notebook.splitlines()[0], "the same feedback as in a notebook"


def test_a_forged_record_is_refused(tmp_path):
    import numpy as np

    from course_lib.checks import recording

    (tmp_path / "r").mkdir()
    with open(tmp_path / "r" / "record-1.npz", "wb") as f:
        np.savez(f, name=np.array("discounted_return"), **{"0.float64.value.output": np.array([object()])})
    with pytest.raises(recording.NotRecorded):
        recording.load(tmp_path / "r" / "record-1.npz", "discounted_return")
    os.symlink("/etc/passwd", tmp_path / "r" / "record-2.npz")
    with pytest.raises(recording.NotRecorded):
        recording.load(tmp_path / "r" / "record-2.npz", "discounted_return")
    with open(tmp_path / "r" / "record-3.npz", "wb") as f:
        np.savez(f, name=np.array("reward_to_go"))
    with pytest.raises(recording.NotRecorded, match="another check"):
        recording.load(tmp_path / "r" / "record-3.npz", "discounted_return")


def test_pytest_killed_from_a_cell_costs_only_that_exercise(tmp_path):
    """Without isolation a cell can kill its pytest: run again once, then only that exercise is lost."""
    solutions, folder, out = tmp_path / "solutions", tmp_path / "subs", tmp_path / "out"
    solutions.mkdir()
    folder.mkdir()
    solution = synth_solution()
    nbformat.write(solution, solutions / "98_synth.ipynb")
    nb = answer(answer(exercise_of(solution, "98_synth.ipynb"), solution, "double"), solution, "halve")
    by_id(nb, "halve-solution").source = (
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + by_id(nb, "halve-solution").source
    )
    save(folder, "kay_98_synth.ipynb", nb)
    assert (
        grade.main(
            [
                str(folder),
                "--out",
                str(out),
                "--solutions",
                str(solutions),
                "--no-isolation",
                "--quiet",
                "--timeout",
                "20",
            ]
        )
        == 0
    )
    rows = {r.exercise: r for r in report.read_rows(out / "grades.csv")}
    assert rows["double"].status == "passed", rows["double"]
    assert rows["halve"].status == "error" and "grading process was killed" in rows["halve"].message, rows["halve"]
    assert "without isolation" in (out / "summary.md").read_text(encoding="utf-8")
    assert "running the submission again once" in next((out / "logs").glob("*.log")).read_text(encoding="utf-8")


def _record_and_judge(tmp_path, check, fn):
    """Record ``check(fn)`` as the grading kernel would, then judge it from the records alone: (message, replayed)."""
    import contextvars

    from course_lib.checks import recording

    def record():
        recording.start(str(tmp_path / "records"), seed=7)
        check(fn)
        recording.finish()

    contextvars.copy_context().run(record)
    with recording.judging(tmp_path / "records", seed=7) as session:
        try:
            check(lambda *a, **k: pytest.fail("the judge never calls the student's function"))
            return session.lines[0], session.replayed
        except AssertionError as error:
            return str(error).splitlines()[0], session.replayed


def test_a_check_that_calls_the_function_itself_is_replayed_in_the_judge(tmp_path):
    from course_lib.checks.gae import check_gae_table
    from course_lib.checks.rewards import _MATH_CASES, check_math_answer_reward
    from course_lib.rewards import math_answer_reward

    assert _record_and_judge(tmp_path / "a", check_math_answer_reward, math_answer_reward) == (
        f"\u2714 math_answer_reward: correct on all {len(_MATH_CASES)} cases.",
        True,
    )
    # Wrong in the kernel already: the kernel fails it, with the notebook's message.
    with pytest.raises(AssertionError, match="5 of the 5 deltas are wrong"):
        _record_and_judge(tmp_path / "b", check_gae_table, lambda: ([0.0] * 5, [0.0] * 5))


# --- round four's red team: attacks on the watch, the drawn cases, the records and the sandbox -------------------

FAMILY, REASONING, TRL_NB = (
    ROOT / "solutions" / f"{n}.ipynb" for n in ("11_grpo_family", "10_reasoning_length", "09_trl")
)
RED_MARKER = f"course-red-{uuid.uuid4().hex}"  # a file the sandbox must keep off the host's /tmp and /dev/shm
THREAD = """\
import _thread, time
from course_lib import family
out = []
_thread.start_new_thread(lambda: out.append(family.rloo_advantages(rewards)), ())
while not out:
    time.sleep(0.001)
return out[0]"""
WORKER = """\
import queue, threading
from course_lib import family
_jobs, _answers = queue.Queue(), queue.Queue()
def _worker():
    while True:
        _answers.put(family.rloo_advantages(_jobs.get()))
threading.Thread(target=_worker, daemon=True).start()
"""
WATCH_OFF = """\
import sys
from course_lib import family
hook = sys.getprofile()
sys.setprofile(None)
out = family.rloo_advantages(rewards)
sys.setprofile(hook)
return out"""
RECOMPILED = """\
import inspect
from course_lib import family
namespace = {"torch": torch}
exec(compile(inspect.getsource(family.rloo_advantages), "<mine>", "exec"), namespace)
return namespace["rloo_advantages"](rewards)"""
RELABELLED = """\
import types, torch as _t
from course_lib import family
code = family.rloo_advantages.__code__.replace(co_filename=_t.__file__)
return types.FunctionType(code, family.__dict__)(rewards)"""
FROM_DISK = """\
from course_lib import family
namespace = {}
exec(open(family.__file__.replace(".pyc", ".py")).read(), namespace)
return namespace["rloo_advantages"](rewards)"""
CARRIED = """\
namespace = {}
exec(SOURCE, namespace)
return namespace["rloo_advantages"](rewards)"""
GRADED_ONLY = """\
import getpass, sys
if getpass.getuser().startswith("course-grade") or sys.getprofile() is not None:
    return MEMO.get(tuple(rewards.flatten().tolist()), torch.zeros_like(rewards))
return torch.zeros_like(rewards)"""
EARLY_SEED = """\
from course_lib.checks import recording as _recording
try:  # a spy run of the check in the solution cell: the drawn cases' seed, asked for before the check cell runs
    _recording.start("/tmp/spy-records", cell="ex11-rloo-check", exercise="rloo_advantages")
    SPIED_SEED = _recording.current().seed
    _recording.finish()
except Exception as error:
    SPIED_SEED = error
"""
SPOIL_RECORDS = """\
import os
# rloo's check cell has ended and the grader took its records: garbage where they were (the grader keeps its copy;
# before round five it copied the folder again at this cell's end; tests/test_grade_round5.py shows it with that off)
folder = os.path.expanduser("~/records/ex11-rloo-check")
os.makedirs(folder, exist_ok=True)
with open(os.path.join(folder, "record-1.npz"), "wb") as f:
    f.write(b"garbage")
"""
SANDBOXED = f"""\
import os, socket
assert len([p for p in os.listdir("/proc") if p.isdigit()]) <= 3, "the kernel sees the host's processes"
for folder in ("/tmp", "/dev/shm", "/var/tmp"):
    open(os.path.join(folder, "{RED_MARKER}"), "w").write("left behind")
held = []
for _ in range(2000):  # every port it may: in its own network namespace, nobody else's
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    held.append(s)
try:
    socket.create_connection(("127.0.0.1", 22), timeout=1)
    raise AssertionError("the kernel reached a port outside its namespace")
except OSError:
    pass
"""


# Round four's attacks that round five's class (tests/test_grade_round5.py, as root) grades as they are here, each
# behind a line that names its defence for that module's "off" run, and the message each must get there: as root they
# are graded once, in that class; not as root (no round five), in the red team's class below.
ROUND_FOUR_IN_ROUND_FIVE = {
    "worker": "calls course_lib's own rloo_advantages (the reference",
    "watchoff": "may not turn off or replace the grader's watch",
    "relabel": "may not use code.__new__",
    "carried": "compiles course_lib's own code",
    "thread": "started a thread or a process while the check ran",
    "spoil": "\u2714",  # an honest rloo whose records a later cell garbles: it keeps its points
}


def red_team_class(folder: Path) -> dict[str, dict[tuple[str, str], tuple[str, str]]]:
    """Submissions of round four's red team, each with the rows it must get (they earn nothing). As root, those in
    ``ROUND_FOUR_IN_ROUND_FIVE`` are graded in round five's class instead (the same code), not twice."""
    from course_lib.checks.family import rloo as family_checks
    from course_lib.family import rloo_advantages

    solution = nbformat.read(FAMILY, as_version=4)
    passed = ("passed", "\u2714")
    expect = {}

    def family_submission(student, body, prelude="", later=""):
        nb = exercise_of(solution, FAMILY.name)
        for exercise in solution.metadata["course"]["exercises"]:
            answer(nb, solution, exercise)
        if body is not None:
            answer(nb, solution, "rloo_advantages", body)
        solution_cell(nb, "rloo_advantages").source = prelude + solution_cell(nb, "rloo_advantages").source
        solution_cell(nb, "gspo_sequence_log_ratio").source = (
            later + solution_cell(nb, "gspo_sequence_log_ratio").source
        )
        save(folder, f"{student}_11_grpo_family.ipynb", nb)

    def rows(rloo, gspo=passed):
        return {
            ("11_grpo_family", "rloo_advantages"): rloo,
            ("11_grpo_family", "gspo_sequence_log_ratio"): gspo,
            ("11_grpo_family", "cispo_loss"): passed,
        }

    learnt = {}  # the reference's answers to the notebook's cases, learnt by heart
    for case in family_checks._rloo_cases():
        learnt[tuple(case.kwargs["rewards"].flatten().tolist())] = rloo_advantages(**case.kwargs).tolist()
    memo = f"MEMO = {learnt!r}\nMEMO = {{k: torch.tensor(v, dtype=torch.float64) for k, v in MEMO.items()}}\n"
    if not ISOLATED:  # as root, round five's class grades these same submissions (ROUND_FOUR_IN_ROUND_FIVE)
        # The watch, whatever thread runs the reference, and whatever turns it off or relabels it.
        family_submission("worker", "_jobs.put(rewards)\nreturn _answers.get()", prelude=WORKER)
        expect["worker"] = rows(("failed", ROUND_FOUR_IN_ROUND_FIVE["worker"]))
        family_submission("watchoff", WATCH_OFF)
        expect["watchoff"] = rows(("failed", ROUND_FOUR_IN_ROUND_FIVE["watchoff"]))
        family_submission("relabel", RELABELLED)
        expect["relabel"] = rows(("failed", ROUND_FOUR_IN_ROUND_FIVE["relabel"]))
        # course_lib's text, carried in the notebook (or read from another copy of the course) and compiled at run
        # time.
        source = (ROOT / "course_lib" / "family.py").read_text(encoding="utf-8")
        family_submission("carried", CARRIED, prelude=f"SOURCE = {source!r}\n")
        expect["carried"] = rows(("failed", ROUND_FOUR_IN_ROUND_FIVE["carried"]))
    # Answers learnt by heart, used only when graded: wrong on the cases drawn at grading time.
    family_submission("heart", GRADED_ONLY, prelude=memo)
    expect["heart"] = rows(("failed", "rloo_advantages"))  # on a case drawn at grading time
    # A spy run of the check in the solution cell, to learn the drawn cases: the seed is given once, to the check.
    family_submission("spy", None, prelude=EARLY_SEED)
    expect["spy"] = rows(("failed", "drawn cases were asked for before the check ran"))
    if not ISOLATED:
        # An honest rloo whose records a later cell garbles: the grader took them when rloo's check cell ended.
        family_submission("spoil", None, later=SPOIL_RECORDS)
        expect["spoil"] = rows(passed)
    if ISOLATED:  # what only the sandbox stops (without isolation the source is readable, threads unseen)
        family_submission("recompile", RECOMPILED)
        expect["recompile"] = rows(("failed", "rloo_advantages raised OSError"))
        family_submission("disk", FROM_DISK)
        expect["disk"] = rows(("failed", "rloo_advantages raised FileNotFoundError"))
        family_submission("boxed", None, prelude=SANDBOXED)
        expect["boxed"] = rows(passed)
    # 10 and 09: answers learnt by heart for integer, string and config inputs earn nothing either.
    reasoning = nbformat.read(REASONING, as_version=4)
    nb = exercise_of(reasoning, REASONING.name)
    for exercise in reasoning.metadata["course"]["exercises"]:
        answer(nb, reasoning, exercise)
    answer(
        nb,
        reasoning,
        "completion_style",
        "TABLE = " + repr({t: s for t, s in _style_table()}) + "\nreturn TABLE.get(text, 'malformed')",
    )
    save(folder, "table_10_reasoning_length.ipynb", nb)
    expect["table"] = {
        ("10_reasoning_length", "completion_style"): ("failed", "completion_style"),  # on a drawn completion
        ("10_reasoning_length", "pass_at_k"): passed,
    }
    trl = nbformat.read(TRL_NB, as_version=4)
    nb = exercise_of(trl, TRL_NB.name)
    for exercise in trl.metadata["course"]["exercises"]:
        answer(nb, trl, exercise)
    answer(nb, trl, "grpo_config_kwargs", "return dict(CONFIGS[repr(cfg), num_processes])")
    solution_cell(nb, "grpo_config_kwargs").source = _config_table() + solution_cell(nb, "grpo_config_kwargs").source
    save(folder, "table_09_trl.ipynb", nb)
    expect["table"].update(
        {
            ("09_trl", "grpo_config_kwargs"): ("failed", "grpo_config_kwargs"),  # a config it never learnt
            ("09_trl", "answer_reward"): passed,
        }
    )
    return expect


def _style_table():
    from course_lib.checks.reasoning.styles import _CLASSIFIER_CASES
    from course_lib.tasks_reasoning import completion_style

    return [(text, completion_style(text, n)) for text, n in _CLASSIFIER_CASES]


def _config_table() -> str:
    """A solution cell's prelude: the answers to the notebook's config cases, learnt by heart."""
    from course_lib.checks.hf.config import _config_cases
    from course_lib.hf.trl_contract import grpo_config_kwargs

    table = {}
    for case in _config_cases():
        if not case.refuses:
            kwargs = case.kwargs
            table[(repr(kwargs["cfg"]), kwargs.get("num_processes", 1))] = grpo_config_kwargs(**kwargs)
    return "CONFIGS = " + repr(table) + "\n"


@pytest.fixture(scope="module")
def red_team(tmp_path_factory):
    """Round four's red team, graded in one call."""
    if not (FAMILY.exists() and REASONING.exists() and TRL_NB.exists()):
        pytest.skip("needs solutions/09, 10 and 11")
    tmp = tmp_path_factory.mktemp("red")
    folder, out = tmp / "submissions", tmp / "out"
    folder.mkdir()
    expect = red_team_class(folder)
    code = grade.main([str(folder), "--out", str(out), "--timeout", "60", "-j", "2", "--quiet"])
    rows = report.read_rows(out / "grades.csv")
    return {"code": code, "expect": expect, "rows": {(r.student, r.notebook, r.exercise): r for r in rows}}


@pytest.mark.parametrize(
    "student",
    [
        "worker",
        "watchoff",
        "relabel",
        "carried",
        "heart",
        "spy",
        "spoil",
        "thread",
        "recompile",
        "disk",
        "boxed",
        "table",
    ],
)
def test_round_four_red_team_earns_nothing(red_team, student):
    if student not in red_team["expect"]:
        if ISOLATED:
            assert student in ROUND_FOUR_IN_ROUND_FIVE, student
            pytest.skip("graded as root in round five's class (tests/test_grade_round5.py, four-*)")
        pytest.skip("needs root: what only the kernels' sandbox stops")
    assert red_team["code"] == 0
    for (notebook, exercise), (status, text) in red_team["expect"][student].items():
        row = red_team["rows"][(student, notebook, exercise)]
        assert row.status == status and text in row.message, (student, exercise, row)


def test_the_sandbox_leaves_nothing_on_the_host(red_team):
    if "boxed" not in red_team["expect"]:
        pytest.skip("needs root")
    for folder in ("/tmp", "/dev/shm", "/var/tmp"):
        assert not (Path(folder) / RED_MARKER).exists(), f"a kernel's file was left in the host's {folder}"


def test_a_check_cell_holds_no_seed(tmp_path):
    """The drawn cases' seed is the guard's to give, once, after the watch is on: never in the cell's source."""
    canonical = _synth_canonical(tmp_path)
    submission = _submission(tmp_path, exercise_of(synth_solution(), "98_synth.ipynb"))
    match = rebuild.match_solutions(canonical, submission)
    nb, _ = rebuild.rebuild(canonical, match, "tok", scratch=tmp_path / "scratch")
    check = next(c for c in nb.cells if c.get("id") == "double-check")
    assert "seed" not in check.source and "cell='double-check'" in check.source


def test_a_kernel_that_never_runs_the_grader_first_cell_is_the_grader_fault(tmp_path):
    """A kernel that fails in the grader's own first cell (before any student code) is a grader error: retried,
    then reported as such, never "your solution cell did not run"."""
    from course_lib.authoring.grading import runner

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("raise SystemExit('the grader broke')"), nbformat.v4.new_code_cell("x = 1")]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    run = runner.run_nbval(path, timeout=30)
    assert run.kernel_retries == runner.KERNEL_START_TRIES - 1
    assert {c.outcome for c in run.cells.values()} == {"setup-error"}
    status, message = verdict.judge("solution", run.cells[1], "T", verdict.Options(), verdict.sanitizer(None))
    assert status == "grader error" and "first cell" in message


@pytest.mark.skipif(not (ISOLATED and WARMUP.exists()), reason="needs root: kernels isolated as users of their own")
def test_grading_works_under_a_hard_address_space_limit(tmp_path):
    """Under `ulimit -v` (8 GiB, hard), the grader asks each kernel for no more than that: grading works, and the
    summary says so."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))

    solution = nbformat.read(WARMUP, as_version=4)
    nb = answer(answer(exercise_of(solution, WARMUP.name), solution, "discounted_return"), solution, "reward_to_go")
    done, rows = _grade_alone(tmp_path, {"v_00_warmup.ipynb": nb}, preexec_fn=limit)
    assert done.returncode == 0, done.stderr
    assert {key: r.status for key, r in rows.items()} == {
        ("v", "discounted_return"): "passed",
        ("v", "reward_to_go"): "passed",
    }
    assert "capped at 8.0 GB" in (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")


@pytest.mark.skipif(not (ISOLATED and WARMUP.exists()), reason="needs root: kernels isolated as users of their own")
def test_a_kernel_scratch_space_is_its_own_and_counted_as_memory(over_memory):
    """900 MB written to /dev/shm under --memory 1: RAM all the same, so over the memory limit; and gone after."""
    done, rows = over_memory
    assert done.returncode == 0, done.stderr
    assert rows[("s", "discounted_return")].status == "over the memory limit", rows
    assert rows[("s", "reward_to_go")].status == "passed", rows
    assert not (Path("/dev/shm") / SHM_MARKER).exists(), "the kernel's /dev/shm was the host's"


def test_borrowed_code_allowed_in_the_notebooks_is_in_the_checks_table():
    """One rule: what a solution notebook's metadata allows, the check's own table allows too (the notebook's
    check cell says the same as grading)."""
    from course_lib.checks.watch import ALLOWED

    for path in REAL:
        exercises = nbformat.read(path, as_version=4).metadata["course"]["exercises"]
        for name, exercise in exercises.items():
            assert set(exercise.get("allowed", [])) <= set(ALLOWED.get(name, ())), (path.name, name)


def _exercises_of_the_course():
    for path in REAL:
        yield from nbformat.read(path, as_version=4).metadata["course"]["exercises"]


def _the_check(name: str):
    """``check_<name>`` wherever it is in course_lib.checks (a class's check is named after it in snake case)."""
    import importlib
    import pkgutil

    import course_lib.checks

    for module in pkgutil.walk_packages(course_lib.checks.__path__, "course_lib.checks."):
        snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
        found = getattr(importlib.import_module(module.name), f"check_{snake}", None)
        if found is not None:
            return found
    raise LookupError(name)


# Exercises whose check calls the student's function itself, with cases it draws in its own code (the next test),
# and gae_table: five numbers computed by hand for one given episode (fixed by design, docs/grading.md's Limits).
DRAWS_ITS_OWN = {"math_answer_reward", "addition_exact_reward", "grpo_step", "mc_policy_gradient"}
FIXED_BY_DESIGN = {"gae_table"}


@pytest.mark.parametrize("name", sorted(set(_exercises_of_the_course()) - DRAWS_ITS_OWN - FIXED_BY_DESIGN))
def test_every_exercise_is_asked_cases_the_notebook_never_showed(name, tmp_path, monkeypatch):
    """A table of the notebook's answers learnt by heart earns nothing: at grading, every check_against_reference
    asks cases drawn from the run's seed that equal none of the notebook's (integers, strings, lists, configs and
    0/1 masks included)."""
    import contextvars

    import torch

    import course_lib.checks as checks
    from course_lib.checks import recording

    seen = []

    def spy(cases, seed, draw=None):
        drawn = real(cases, seed, draw)
        seen.append((list(cases), drawn))
        return drawn

    real = checks.drawn_cases
    monkeypatch.setattr(checks, "drawn_cases", spy)

    def stub(*args, **kwargs):
        raise NotImplementedError("a stub: only the cases are looked at")

    def record():
        recording.start(str(tmp_path / "records"), seed=20260101, exercise=name)
        with pytest.raises(NotImplementedError):
            _the_check(name)(stub)

    contextvars.copy_context().run(record)
    assert seen, f"check_{name} asks no case drawn at grading time"

    def same(a, b) -> bool:
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            return (
                isinstance(a, torch.Tensor)
                and isinstance(b, torch.Tensor)
                and a.shape == b.shape
                and bool(torch.equal(a.double(), b.double()))
            )
        return type(a) is type(b) and repr(a) == repr(b)

    for cases, drawn in seen:
        new = [
            d
            for d in drawn
            if not any(
                d.kwargs.keys() == c.kwargs.keys() and all(same(d.kwargs[k], c.kwargs[k]) for k in d.kwargs)
                for c in cases
            )
        ]
        assert new, f"check_{name}: every case drawn at grading time is one of the notebook's"


def _asked(value):
    """What a table learnt by heart could key on: tensors as numbers, strings and numbers as they are."""
    import torch

    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), tuple(value.detach().double().flatten().tolist()))
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_asked(v) for v in value)
    return type(value).__name__  # a model or an optimizer: its numbers are in the tensors asked with it


@pytest.mark.parametrize("name", sorted(DRAWS_ITS_OWN))
def test_checks_that_call_the_function_themselves_ask_new_cases_at_grading(name, tmp_path):
    """The checks that call the student's function directly ask, at grading, questions the notebook never asks."""
    import contextvars

    from course_lib.checks import recording
    from course_lib.checks.watch import trusting

    references = {
        "math_answer_reward": "course_lib.rewards",
        "addition_exact_reward": "course_lib.rewards",
        "grpo_step": "course_lib.lectures.capstone",
        "mc_policy_gradient": "course_lib.lectures.mc_gradient",
    }
    import importlib

    reference = getattr(importlib.import_module(references[name]), name)

    def spy_into(asked):
        def spy(*args, **kwargs):
            asked.add((_asked(args), tuple(sorted((k, _asked(v)) for k, v in kwargs.items()))))
            return reference(*args, **kwargs)

        return spy

    in_notebook, at_grading = set(), set()
    with trusting():
        assert _the_check(name)(spy_into(in_notebook)) is True

    def record():
        recording.start(str(tmp_path / "records"), seed=20260101, exercise=name)
        try:
            _the_check(name)(spy_into(at_grading))
        except AssertionError:
            pass  # the watch sees the spy call course_lib: only the questions matter here

    contextvars.copy_context().run(record)
    assert at_grading - in_notebook, f"check_{name} asks at grading only what the notebook asks"
