"""The grading kernel's sandbox: whom it runs as, what it can see, reach and use.

When the grader is root, each kernel starts as an unprivileged user of its own (one per ``-j`` slot), through
``unshare`` into namespaces of its own, set up by a short shell script before it drops its privileges:

- **processes**: a pid namespace of which the kernel is the first process, with its own ``/proc``: it sees only
  what it started, and all of that dies with it;
- **network**: a network namespace with nothing in it (not even loopback up): it reaches no port, holds none of
  the host's, and talks to the grader over Unix sockets in its scratch folder (ZMQ's ``ipc`` transport);
- **files**: a mount namespace in which the output folder, the submissions, the solutions and the hidden checks
  are covered by empty folders; folders others cannot enter (``/root`` with pyenv in it) are covered too, with
  only what the kernel needs put back; ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are tmpfs of its own, as large as
  the memory limit (the runner counts what they hold as the kernel's memory), gone when it ends; and
  ``course_lib`` is a copy without its source (compiled code only), so no reference can be read back as text;
- **SysV IPC and POSIX message queues**: an IPC namespace of its own.

Without namespaces (``unshare`` failed) the kernel runs as that user alone. Limits set before it starts: no core
files, each file it writes at most 1 GB, at most ``MAX_TASKS`` processes and threads for its user, and an address
space far above ``--memory`` (torch reserves much more than it uses: the runner's watcher limits what is resident;
this only stops one huge allocation), capped at the hard limit the grader itself runs under (``ulimit -v``),
which no process can raise.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

NAMESPACES = ["--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--net", "--ipc"]
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")  # each a tmpfs of the kernel's own
MAX_OUTPUT = 200_000  # characters of a cell's output that pytest keeps (the rest is dropped as it arrives)
# Tasks (processes and threads) a kernel's user may hold at once: a kernel needs a few dozen; a container's pids.max
# is shared by every kernel, so one kernel making thousands of threads would leave its classmates none.
MAX_TASKS = 256


@dataclass
class Sandbox:
    """How one kernel is confined (see the module docstring); an empty one confines nothing but memory."""

    uid: int | None = None  # run the kernel as this user (needs root), with gid
    gid: int | None = None
    memory: int = 0  # resident memory allowed, in bytes (0 for no limit), watched by the runner
    hide: list[str] = field(default_factory=list)  # folders an empty tmpfs covers in the kernel's mount namespace
    expose: list[tuple[str, list[str]]] = field(default_factory=list)  # (private folder, what to keep of it)
    keep_tmp: list[str] = field(default_factory=list)  # what the kernel needs under /tmp (the course, its Python)
    course: tuple[str, str] | None = None  # (course_lib without its source, the course_lib folder it covers)
    namespaces: bool = False  # namespaces of its own (``unshare``)
    max_output: int = MAX_OUTPUT
    pipe: int | None = None  # the write end of the pipe the kernel's guard writes its signed verdicts to

    def for_plugin(self, scratch: Path) -> str:
        return json.dumps({**self.__dict__, "cwd": str(scratch)})


def address_space(memory: int) -> int | None:
    """The address space a kernel gets for ``memory`` bytes of resident memory (None: no limit), never above the
    hard limit the grader runs under."""
    import resource

    if not memory:
        return None
    wanted = 2 * memory + (4 << 30)
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    return wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)


def limits(memory: int, tasks: int | None = None):
    """Run in the kernel's process before it starts (module docstring). ``tasks``: ``RLIMIT_NPROC`` for the
    kernel's own user (one per ``-j`` slot, so it counts that kernel's tasks alone; root, which starts it, is not
    held to it)."""

    def apply():
        import resource

        if tasks is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))
        space = address_space(memory)
        if space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (space, space))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 30, 1 << 30))

    return apply


def _cover(folder: str, keeps: list[str], options: str) -> list[str]:
    """Shell lines: a tmpfs over ``folder``, with the ``keeps`` under it put back (bound before, moved after)."""
    lines = [f'stage{n}=$(mktemp -d -p /run); mount --bind {shlex.quote(k)} "$stage{n}"' for n, k in enumerate(keeps)]
    lines.append(f"mount -t tmpfs -o {options} none {shlex.quote(folder)}")
    lines += [
        f'mkdir -p {shlex.quote(k)}; mount --move "$stage{n}" {shlex.quote(k)}; rmdir "$stage{n}"'
        for n, k in enumerate(keeps)
    ]
    return lines


def kernel_command(cmd: list[str], box: dict) -> list[str]:
    """The kernel's command line, wrapped: namespaces of its own and their mounts (module docstring), then the
    kernel's user."""
    if box.get("uid") is None:
        return cmd
    drop = [
        "setpriv",
        f"--reuid={int(box['uid'])}",
        f"--regid={int(box['gid'])}",
        "--clear-groups",
        "--no-new-privs",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ]
    if not box.get("namespaces"):  # no namespaces to be had (``unshare`` failed): the user alone
        return [*drop, *cmd]
    mounts = ["mount -t proc proc /proc"]
    for private, keeps in box.get("expose", []):  # e.g. /root hidden, but the Python and the course in it kept
        mounts += _cover(private, keeps, "size=4k,mode=0711")
    mounts += [
        f"if [ -d {shlex.quote(path)} ]; then mount -t tmpfs -o size=4k,mode=0555 none {shlex.quote(path)}; fi"
        for path in box.get("hide", [])
    ]
    if box.get("course"):  # before /tmp is covered: the copy may be there
        source_free, course = box["course"]
        mounts.append(f"mount --bind -o ro {shlex.quote(source_free)} {shlex.quote(course)}")
    size = int(box.get("memory") or 0) or (1 << 30)
    scratch = str(box["cwd"])
    for folder in PRIVATE_TMP:
        keeps = [k for k in [scratch, *box.get("keep_tmp", [])] if k.startswith(folder + os.sep)]
        cover = "; ".join(_cover(folder, keeps, f"size={size},mode=1777"))
        mounts.append(f"if [ -d {folder} ]; then {cover}; fi")
    script = "; ".join(["set -e"] + mounts + [f'exec {" ".join(drop)} "$@"'])
    return ["unshare", *NAMESPACES, "--", "/bin/sh", "-c", script, "grading-kernel", *cmd]


def launch_in(box: dict) -> None:
    """Start every kernel of this pytest process in ``box`` (patches jupyter_client's local launcher)."""
    from jupyter_client.manager import KernelManager
    from jupyter_client.provisioning import local_provisioner

    if box.get("namespaces"):  # no network in the kernel's namespace: Unix sockets in its scratch folder
        original_init = KernelManager.__init__

        def __init__(self, *args, **kwargs):
            original_init(self, *args, **kwargs)
            self.transport = "ipc"
            self.connection_file = os.path.join(box["cwd"], "kernel.json")
            self.ip = os.path.join(box["cwd"], "kernel-ipc")

        KernelManager.__init__ = __init__
    original_launch = local_provisioner.launch_kernel

    def launch_kernel(cmd, **kwargs):
        env = dict(kwargs.get("env") or os.environ)
        env.pop("COURSE_GRADE_SANDBOX", None)
        scratch = box["cwd"]
        env.update(
            HOME=scratch,
            TMPDIR=scratch,
            IPYTHONDIR=os.path.join(scratch, ".ipython"),
            MPLCONFIGDIR=os.path.join(scratch, ".matplotlib"),
            JUPYTER_RUNTIME_DIR=scratch,
        )
        tasks = MAX_TASKS if box.get("uid") is not None else None  # the grader's own user is not the kernel's
        kwargs.update(env=env, cwd=scratch, preexec_fn=limits(int(box.get("memory") or 0), tasks))
        if box.get("pipe") is not None:
            kwargs["pass_fds"] = (int(box["pipe"]),)
        if box.get("uid") is not None and "-f" in cmd:  # the kernel must read its connection file
            os.chown(cmd[cmd.index("-f") + 1], int(box["uid"]), int(box["gid"]))
        return original_launch(kernel_command(list(cmd), box), **kwargs)

    local_provisioner.launch_kernel = launch_kernel


def fresh_scratch(previous: Path | None, sandbox: Sandbox | None) -> Path:
    """An empty working folder for the kernel, outside the output folder, owned by the kernel's user; when
    isolated, a tmpfs as large as the memory limit (the runner counts what it holds; unmounted after)."""
    remove_scratch(previous)
    scratch = Path(tempfile.mkdtemp(prefix="course-grade-kernel-"))
    if sandbox is not None and sandbox.uid is not None:
        size = sandbox.memory or (1 << 30)
        options = f"size={size},mode=0700,uid={sandbox.uid},gid={sandbox.gid}"
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "none", str(scratch)], capture_output=True)
        os.chown(scratch, sandbox.uid, sandbox.gid)
    return scratch


def remove_scratch(scratch: Path | None) -> None:
    """The kernel's folder gone, its tmpfs unmounted first."""
    if scratch is None:
        return
    if os.path.ismount(scratch):
        subprocess.run(["umount", "-l", str(scratch)], capture_output=True)
    shutil.rmtree(scratch, ignore_errors=True)


def source_free_course() -> Path:
    """A copy of course_lib with compiled code only (each module's .pyc where its .py was, with the .py's name
    inside, so tracebacks and the watch name the real file), for the kernels: no reference can be read back as
    text. Made once per grading command, removed at exit."""
    import atexit
    import py_compile

    course = Path(__file__).resolve().parents[2]  # the course_lib package
    target = Path(tempfile.mkdtemp(prefix="course-grade-lib-"))
    atexit.register(shutil.rmtree, target, True)
    for path in sorted(course.rglob("*")):
        relative = path.relative_to(course)
        if "__pycache__" in relative.parts or path.is_dir():
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".py":
            py_compile.compile(str(path), cfile=str(destination.with_suffix(".pyc")), dfile=str(path), doraise=True)
        else:
            shutil.copy2(path, destination)
    from course_lib.checks.blocker import SOURCE_LINES, source_lines

    (target / SOURCE_LINES).write_text("\n".join(sorted(source_lines(course))), encoding="ascii")
    for folder in [target, *[p for p in target.rglob("*") if p.is_dir()]]:
        folder.chmod(0o755)
    for path in target.rglob("*"):
        if path.is_file():
            path.chmod(0o644)
    return target
