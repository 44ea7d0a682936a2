"""course_lib.authoring.notebook_client: a kernel's message is read in one-second slices, up to the same deadline."""

from __future__ import annotations

import asyncio
import concurrent.futures
from queue import Empty

import pytest

from course_lib.authoring import notebook_client


class Channel:
    """A channel whose message is there from the start, but seen only by a poll that ends (a missed wake-up)."""

    def __init__(self, found_on_poll: int):
        self.found_on_poll, self.timeouts = found_on_poll, []

    async def get_msg(self, timeout=None):
        self.timeouts.append(timeout)
        if len(self.timeouts) < self.found_on_poll:
            await asyncio.sleep(timeout or 0)
            raise Empty
        return {"msg_type": "execute_reply"}


def _run(coroutine):
    """``asyncio.run`` in a thread of its own: a test that ran before on this worker may have left an event loop
    marked as running in the main thread (seen once under pytest-xdist), where asyncio.run refuses to start."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def test_a_long_wait_is_made_of_short_polls(monkeypatch):
    monkeypatch.setattr(notebook_client, "SLICE_S", 0.01)
    channel = Channel(found_on_poll=3)
    notebook_client._wait_in_slices(channel)
    assert _run(channel.get_msg(timeout=120)) == {"msg_type": "execute_reply"}
    assert len(channel.timeouts) == 3 and max(channel.timeouts) <= 0.01


def test_no_timeout_waits_in_slices_until_the_message(monkeypatch):
    monkeypatch.setattr(notebook_client, "SLICE_S", 0.01)
    channel = Channel(found_on_poll=5)
    notebook_client._wait_in_slices(channel)
    assert _run(channel.get_msg()) == {"msg_type": "execute_reply"}
    assert channel.timeouts[:4] == [0.01] * 4


def test_the_deadline_is_kept():
    channel = Channel(found_on_poll=10**6)
    notebook_client._wait_in_slices(channel)
    with pytest.raises(Empty):
        _run(channel.get_msg(timeout=0.05))
    assert sum(channel.timeouts) == pytest.approx(0.05, abs=0.02)


def test_the_client_reads_both_channels_in_slices(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    client = notebook_client.NotebookClient(
        nb, kernel_name="python3", timeout=60, resources={"metadata": {"path": str(tmp_path)}}
    )
    with client.setup_kernel():
        assert client.kc.shell_channel.get_msg.__name__ == "get_msg_in_slices"
        assert client.kc.iopub_channel.get_msg.__name__ == "get_msg_in_slices"
        client.execute_cell(nb.cells[0], 0)
    assert nb.cells[0].outputs[0].text == "42\n"
