"""The sorting reward's classic wrong implementations (chapter 01), each a function with the reference's signature,
replayed by :func:`course_lib.checks.rewards.check_sort_inclusion_ordering_reward` on a case the student's reward
got wrong: if one gives the student's numbers on every such case, the check names it."""

from __future__ import annotations

import torch


def inclusion_of(prompt, response):
    return (prompt[..., :, None] == response[..., None, :]).any(-1).sum(-1)


def ordering_of(response):
    return (response[..., :-1] <= response[..., 1:]).sum(-1)


def mistake_strict_order(prompt, response):
    return (inclusion_of(prompt, response) + (response[..., :-1] < response[..., 1:]).sum(-1)).float()


def mistake_response_in_prompt(prompt, response):
    return (inclusion_of(response, prompt) + ordering_of(response)).float()


def mistake_isin_whole_batch(prompt, response):
    # torch.isin (numpy's isin habit) flattens its second argument: every response of the batch, not this row's
    return (torch.isin(prompt, response).sum(-1) + ordering_of(response)).float()


def mistake_set_intersection(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    rows = zip(prompt.reshape(-1, prompt.shape[-1]).tolist(), response.reshape(-1, response.shape[-1]).tolist())
    shared = torch.tensor([len(set(p) & set(r)) for p, r in rows]).reshape(prompt.shape[:-1])
    return (shared + ordering_of(response)).float()


def mistake_gated_ordering(prompt, response):
    inclusion = inclusion_of(prompt, response)
    return (inclusion + ordering_of(response) * (inclusion == prompt.shape[-1])).float()


def mistake_wrapped_pairs(prompt, response):
    return (inclusion_of(prompt, response) + (response <= response.roll(-1, dims=-1)).sum(-1)).float()


def mistake_missing_pair(prompt, response):
    return (inclusion_of(prompt, response) + ordering_of(response[..., :-1])).float()


def mistake_positionwise(prompt, response):
    return (response == torch.sort(prompt, dim=-1).values).sum(-1).float()


# The math check compares strings, which check_against_reference (tensors only) does
# not handle; the loop below keeps its behaviour and its message style.
