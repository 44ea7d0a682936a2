"""The runner's watchdog: a kernel's memory, watched; a run's processes, stopped.

The runner (:mod:`course_lib.authoring.grading.runner`) polls a running notebook five times a second: a kernel
over the memory limit, a cell past its timeout, a kernel that died are stopped here, with everything they
started, and nothing else (a pid is never looked up again once its process may have ended).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import psutil  # installed with ipykernel, which the course needs anyway

from course_lib.authoring.grading.sandbox import PRIVATE_TMP, Sandbox


class Memory:
    """The memory of a kernel, watched against a limit: what it and every process it started hold resident, plus
    what its scratch folder and its own ``/tmp``, ``/var/tmp`` and ``/dev/shm`` hold (tmpfs: RAM too).

    Resident, not virtual: torch reserves far more address space than it uses, so ``RLIMIT_AS``
    (kept only as a backstop, well above the limit) would fail honest solutions. The processes and the
    tmpfs are looked at again each second; the resident sizes are read every time (``/proc/PID/statm``).
    """

    def __init__(self, limit: int, mounts: list[str] | None = None, namespaces: bool = False, taken=None):
        self.limit, self.pids, self.listed, self.peak = limit, [], 0.0, 0
        self.mounts, self.namespaces, self.files = list(mounts or []), namespaces, 0
        self.taken = taken  # the grader's folder of the records taken out of the kernel: on the host's disk

    def over(self, kernel: psutil.Process | None) -> bool:
        if not self.limit or kernel is None:
            return False
        if time.monotonic() - self.listed > 1.0:
            try:
                self.pids = (
                    [kernel.pid] + [child.pid for child in kernel.children(recursive=True)]
                    if kernel.is_running()
                    else []
                )
            except psutil.Error:
                self.pids = []
            self.listed = time.monotonic()
            self.files = self._in_tmpfs() + self._taken()
        total = self.files
        for pid in self.pids:
            try:
                with open(f"/proc/{pid}/statm", "rb") as f:
                    total += int(f.read().split()[1]) * PAGE
            except (OSError, ValueError, IndexError):
                pass
        self.peak = max(self.peak, total)
        return total > self.limit

    def _in_tmpfs(self) -> int:
        """Bytes held by the kernel's tmpfs (seen from here through its first process's root)."""
        paths = list(self.mounts)
        if self.namespaces and len(self.pids) > 1:  # pids[1]: the kernel's shell, pid 1 of its namespace
            paths += [f"/proc/{self.pids[1]}/root{folder}" for folder in PRIVATE_TMP]
        used = 0
        for path in paths:
            try:
                info = os.statvfs(path)
                used += (info.f_blocks - info.f_bfree) * info.f_frsize
            except OSError:
                pass
        return used

    def _taken(self) -> int:
        """Bytes of the records taken out of the kernel so far (``records/<cell>/<file>``, files the grader wrote):
        the kernel's to spend, like its memory, so that it cannot fill the host's disk through them."""
        if self.taken is None:
            return 0
        used = 0
        try:
            with os.scandir(self.taken) as cells:
                for cell in cells:
                    with os.scandir(cell.path) as files:
                        used += sum(f.stat(follow_symlinks=False).st_size for f in files)
        except OSError:
            pass
        return used


PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _alive(kernel: psutil.Process) -> bool:
    try:
        return kernel.is_running() and kernel.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _pinned(pid: int | None) -> psutil.Process | None:
    """The process with this pid now (its start time kept: see :func:`_stop_tree`)."""
    try:
        return psutil.Process(pid) if pid else None
    except psutil.Error:
        return None


def kill_kernel_processes(sandbox: Sandbox | None, kernel: psutil.Process | None) -> None:
    """Kill every process the kernel started. In namespaces of its own there is nothing to do: they all died
    with the kernel (the first process of its pid namespace). Isolated without them, every process of its user
    (never in that case two graders at once: they share the users); not isolated, every process of its session."""
    if sandbox is not None and sandbox.namespaces:
        return
    sid = None
    if (sandbox is None or sandbox.uid is None) and kernel is not None and kernel.is_running():
        sid = os.getsid(kernel.pid)
    for _ in range(3):  # a process forking while we kill: sweep again
        victims = []
        for proc in psutil.process_iter(["uids", "pid"]):
            try:
                if sandbox is not None and sandbox.uid is not None:
                    if sandbox.uid in (proc.info["uids"].real, proc.info["uids"].effective):
                        victims.append(proc)
                elif sid is not None and proc.pid != os.getpid() and os.getsid(proc.pid) == sid:
                    victims.append(proc)
            except (psutil.Error, OSError, AttributeError):
                pass
        if not victims:
            return
        _kill(victims)


def _kill(victims: list[psutil.Process]) -> None:
    for victim in victims:
        try:
            victim.send_signal(signal.SIGKILL)  # psutil refuses a pid that another process has taken since
        except psutil.Error:
            pass
    psutil.wait_procs(victims, timeout=2)


def _stop_tree(
    proc: subprocess.Popen, kernel: psutil.Process | None, sandbox: Sandbox | None, pytest: psutil.Process | None = None
) -> None:
    """Kill pytest, its kernel (which runs in a session of its own) and anything they started.

    The kernel is the :class:`psutil.Process` seen when it started, never its pid looked up again: once
    it has ended, its pid may be another process's, a classmate's kernel say (a kernel can make pids
    come round again quickly, by forking), and looking it up would kill that one."""
    victims = []
    for process in (pytest, kernel):
        try:
            if process is not None and process.is_running():
                victims += [process] + process.children(recursive=True)
        except psutil.Error:
            pass
    _kill(victims)
    proc.wait()
    kill_kernel_processes(sandbox, kernel)
