"""``distinct_rows``: the distinct rows of a small integer tensor and where each row went, fast on small batches.

A group's G completions share their prompt; TinyLM reads each distinct prompt once (``TinyLM.continuation_hidden``,
``TinyLM.generate``) and needs, for a minibatch of prompts, which rows are the same.
"""

from __future__ import annotations

import math

import torch


def distinct_rows(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(N, P)`` ids to their ``(U, P)`` distinct rows and the ``(N,)`` index of each row among them.

    What ``torch.unique(ids, dim=0, return_inverse=True)`` returns, faster: that splits the tensor into rows
    (4 ms for 256 rows). A row of small ids is written as one int64, its digits in base ``max id + 1``, and the
    numbers are made unique; rows too long for that are sorted by each column, the last first, instead.
    """
    base = int(ids.max()) + 1 if ids.numel() else 1
    if ids.shape[1] * math.log2(max(base, 2)) < 62:  # one int64 holds the row
        digits = base ** torch.arange(ids.shape[1] - 1, -1, -1)  # (P,)
        keys, index = torch.unique((ids * digits).sum(-1), return_inverse=True)  # (U,), (N,)
        first = torch.empty_like(keys).scatter_(0, index, torch.arange(len(ids)))  # (U,): a row of each key
        return ids[first], index
    order = torch.arange(ids.shape[0])  # (N,)
    for column in reversed(range(ids.shape[1])):
        order = order[torch.sort(ids[order, column], stable=True).indices]
    ordered = ids[order]  # (N, P), equal rows adjacent
    starts = torch.ones(ids.shape[0], dtype=torch.bool)  # (N,): the row differs from the one before
    starts[1:] = (ordered[1:] != ordered[:-1]).any(-1)
    index = torch.empty_like(order)
    index[order] = torch.cumsum(starts.long(), 0) - 1
    return ordered[starts], index
