"""nbclient's ``NotebookClient``, without its two-minute stalls: every wait for a kernel's message in short slices.

nbclient waits for a cell's reply (and its output) with one long ``poll`` on an asyncio zmq socket. pyzmq learns
that a message arrived from the socket's file descriptor, which signals edges, not levels: now and then the wake-up
is missed, and the message sits there until the poll times out. pyzmq then polls once more, finds it, and the run
goes on as if nothing happened, a cell timeout later. In the course's test suite that was a test of two seconds
taking 121 to 123 s in three fresh clones of five, with the kernel and the test both idle, waiting for each other.

Waiting in slices of at most ``SLICE_S`` makes the same final check each second, so a missed wake-up costs at most
a second. The cell timeout itself is unchanged: the slices run up to the same deadline.
"""

from __future__ import annotations

import time
from queue import Empty

import nbclient
from jupyter_core.utils import run_sync

SLICE_S = 1.0


def _wait_in_slices(channel) -> None:
    """Replace ``channel.get_msg(timeout)`` by the same wait, made of polls of at most SLICE_S seconds."""
    get_msg = channel.get_msg

    async def get_msg_in_slices(timeout: float | None = None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = SLICE_S if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await get_msg(timeout=min(SLICE_S, left))
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    channel.get_msg = get_msg_in_slices


class NotebookClient(nbclient.NotebookClient):
    """``nbclient.NotebookClient`` whose kernel client reads its shell and IOPub channels in one-second slices."""

    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        _wait_in_slices(kc.shell_channel)
        _wait_in_slices(kc.iopub_channel)
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)  # the sync name, as nbclient defines it
