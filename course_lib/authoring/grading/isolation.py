"""Who a grading kernel runs as, and what it may see: the grading users, one sandbox per ``-j`` slot, and a
preflight that starts the course once as those users before anyone is graded.

As root (course machines, containers, CI), each kernel runs as an unprivileged user of its own
(``course-grade-<slot>``, created if missing) in namespaces of its own that hide the output folder, the
submissions, the solutions, the hidden checks and course_lib's source (:mod:`course_lib.authoring.grading.sandbox`
sets them up). Not as root, kernels run as the grader's own user, and ``summary.md`` says so in bold.
"""

from __future__ import annotations

import json
import os
import pwd
import queue
import subprocess
import sys
import tempfile
from pathlib import Path

from course_lib.authoring.grading.runner import child_env
from course_lib.authoring.grading.sandbox import NAMESPACES, Sandbox, address_space, source_free_course

USER = "course-grade-{slot}"


def kernel_sandboxes(args, files, root: Path) -> tuple["queue.Queue[Sandbox]", str]:
    """One sandbox per -j slot, and the sentence summary.md says about isolation (``args`` are
    ``python -m course_lib.grade``'s, ``root`` the course's folder); raises :class:`CannotGrade`
    when the grading users cannot run the course at all."""
    memory = int(args.memory * (1 << 30))
    slots: "queue.Queue[Sandbox]" = queue.Queue()
    isolated = os.geteuid() == 0 and not args.no_isolation and sys.platform.startswith("linux")
    box: dict = {}
    if isolated:
        try:
            users = [_grading_user(USER.format(slot=slot)) for slot in range(args.jobs)]
            box["hide"] = _hidden_folders(args, files, root)
            box["namespaces"] = subprocess.run(["unshare", *NAMESPACES, "true"], capture_output=True).returncode == 0
            if box["namespaces"]:
                needed = [sys.base_prefix, sys.prefix, root / "course_lib"]
                box["expose"] = _private_folders(needed)
                box["keep_tmp"] = sorted({str(Path(p).resolve()) for p in needed})
                box["course"] = (str(source_free_course()), str((root / "course_lib").resolve()))
        except (OSError, subprocess.SubprocessError, KeyError) as error:
            print(f"course_lib.grade: warning: cannot isolate the kernels ({error})", file=sys.stderr)
            isolated, box = False, {}
    for slot in range(args.jobs):
        if isolated:
            uid, gid = users[slot]
            slots.put(Sandbox(uid=uid, gid=gid, memory=memory, **box))
        else:
            slots.put(Sandbox(memory=memory))
    if isolated:
        problem = _preflight(slots.queue[0], root)
        if problem:
            raise CannotGrade(problem)
    space = address_space(memory)
    capped = (
        f" (their address space capped at {space / 2**30:.1f} GB: the hard limit this grader runs under, "
        "`ulimit -v`, which no process can raise)"
        if space is not None and space < 2 * memory + (4 << 30)
        else ""
    )
    if isolated and box.get("namespaces"):
        text = (
            f"Kernels ran isolated: as unprivileged users ({USER.format(slot='N')}), in namespaces of their own "
            f"(every process a kernel started ended with it; no network; its own /proc, /tmp, /var/tmp and "
            f"/dev/shm), in a fresh folder outside the output folder, with the output folder, the submissions, the "
            f"solutions, the hidden checks and course_lib's source hidden from them, at most {args.memory:g} GB of "
            f"memory each{capped}."
        )
    elif isolated:
        text = (
            "Kernels ran as unprivileged users, but without namespaces (`unshare` failed): "
            f"they could read every world-readable file, other submissions included{capped}."
        )
    else:
        text = (
            "**Grading ran without isolation**: the grader is not root, so the students' code ran as "
            f"{pwd.getpwuid(os.getuid()).pw_name}, with your files (only its memory was limited, to "
            f"{args.memory:g} GB{capped}). Grade untrusted work as root in a container, where kernels get users of "
            "their own."
        )
    return slots, text


class CannotGrade(Exception):
    """A reason to grade no one (exit 2), said in one message."""


def _private_folders(needed) -> list[tuple[str, list[str]]]:
    """(a folder others cannot enter, what of it the kernel needs) for each such folder above a needed one
    (pyenv in /root, a course cloned into a mode-700 folder): the kernel's mount namespace covers that folder
    with an empty one and puts back only what is needed."""
    private: dict[str, list[str]] = {}
    for path in needed:
        path = Path(path).resolve()
        for folder in [*reversed(path.parents), path][:-1]:
            if not folder.stat().st_mode & 0o001:  # not searchable by others
                private.setdefault(str(folder), []).append(str(path))
                break
    return [(folder, sorted(set(keeps))) for folder, keeps in private.items()]


PROBE = (
    "import course_lib, importlib.util, os; [open(importlib.util.find_spec(m).origin, 'rb').close() "
    "for m in ('ipykernel', 'torch')]; print(os.path.dirname(course_lib.__file__))"
)


def _preflight(box: Sandbox, root: Path) -> str | None:
    """Why the kernels' user cannot run the course (its Python, course_lib, ipykernel), or None: one kernel
    of the sandbox started for nothing, before anyone is graded."""
    from course_lib.authoring.grading.sandbox import kernel_command

    with tempfile.TemporaryDirectory() as scratch:
        os.chown(scratch, box.uid, box.gid)
        probe = subprocess.run(
            kernel_command([sys.executable, "-c", PROBE], json.loads(box.for_plugin(Path(scratch)))),
            capture_output=True,
            text=True,
            cwd=scratch,
            env=child_env(1),
        )
    mine = str((root / "course_lib").resolve())
    if probe.returncode == 0 and probe.stdout.strip() == mine:
        return None
    why = (probe.stderr.strip().splitlines() or [f"it imports course_lib from {probe.stdout.strip()}"])[-1]
    return (
        f"the grading users ({USER.format(slot='N')}), as whom kernels run when grading as root, cannot run "
        f"the course at {root} with {Path(sys.executable)} ({why}). Make the course, its Python and its "
        "virtual environment readable by others (chmod -R o+rX), or grade with --no-isolation (only work "
        "you trust)."
    )


def _grading_user(name: str) -> tuple[int, int]:
    """(uid, gid) of an unprivileged system user for kernels, created if missing."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--user-group",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                name,
            ],
            check=True,
            capture_output=True,
        )
        entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


def _hidden_folders(args, files, root: Path) -> list[str]:
    """Folders a kernel must not see; never one that holds what the kernel needs (the course, Python, /tmp)."""
    wanted = {args.out, args.solutions, args.hidden, root / "solutions", root / "grading", root / ".git"}
    wanted |= {root / "tests", root / "notebooks", root / "benchmarks"}  # correct variants, the lectures' code
    wanted |= {base if base is not None else path.parent for path, base in files}
    needed = [root / "course_lib", Path(sys.prefix), Path(sys.base_prefix), Path(tempfile.gettempdir())]
    needed = [p.resolve() for p in needed]
    hide = []
    for folder in wanted:
        folder = folder.resolve()
        if folder.is_dir() and not any(n == folder or folder in n.parents for n in needed):
            hide.append(str(folder))
    return sorted(set(hide))
