"""``one_thread()``: run a block of small tensor work on one CPU thread, then restore the setting.

The course's models and tensors are tiny (a few hundred parameters): splitting such a small
matrix product across threads costs more than the product itself, and a second thread only
adds waiting on a busy machine. Trainers, lecture experiments and widget callbacks wrap their
loops in it; the caller's setting is always restored, even when the block raises.
"""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def one_thread(num_threads: int | None = 1):
    """Set ``torch.set_num_threads(num_threads)`` inside the block (``None``: leave it); restore it after."""
    previous = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
