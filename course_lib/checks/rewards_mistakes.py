"""The sorting reward's classic wrong implementations (chapter 01), each a function with the reference's signature,
replayed by :func:`course_lib.checks.rewards.check_sort_inclusion_ordering_reward` on a case the student's reward
got wrong: if one gives the student's numbers on every such case, the check names it."""

from __future__ import annotations

import torch

from course_lib.checks import Mistake


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


# More of what students write (round seven): each half of the reward written another way, the other half right.


def mistake_ordering_of_prompt(prompt, response):
    return (inclusion_of(prompt, response) + ordering_of(prompt)).float()


def mistake_descending_pairs(prompt, response):
    return (inclusion_of(prompt, response) + (response[..., :-1] >= response[..., 1:]).sum(-1)).float()


def mistake_same_position(prompt, response):
    prompt, response = torch.broadcast_tensors(prompt, response)
    return ((prompt == response).sum(-1) + ordering_of(response)).float()


def mistake_inclusion_fraction(prompt, response):
    return (inclusion_of(prompt, response) / prompt.shape[-1] + ordering_of(response)).float()


def mistake_every_pair(prompt, response):
    T = response.shape[-1]
    later = torch.ones(T, T, dtype=torch.bool).triu(1)  # (T, T): i < j
    in_order = (response[..., :, None] <= response[..., None, :]) & later
    return (inclusion_of(prompt, response) + in_order.sum((-2, -1))).float()


def mistake_all_or_nothing(prompt, response):
    T = response.shape[-1]
    ordering = ordering_of(response)
    return (inclusion_of(prompt, response) + (ordering == T - 1) * ordering).float()


def mistake_counts_matches(prompt, response):
    matches = (prompt[..., :, None] == response[..., None, :]).sum(-1)  # (..., T): how many, not whether
    return (matches.sum(-1) + ordering_of(response)).float()


def mistake_repeats_cost(prompt, response):
    steps = torch.diff(response, dim=-1)
    return (inclusion_of(prompt, response) + (steps > 0).sum(-1) - (steps == 0).sum(-1)).float()


def mistake_ordering_rescaled(prompt, response):
    T = response.shape[-1]
    return (inclusion_of(prompt, response) + ordering_of(response) * T / max(T - 1, 1)).float()


def mistake_ordering_in_place(prompt, response):
    in_place = (response == response.sort(-1).values).sum(-1)  # positions holding their sorted value
    return (inclusion_of(prompt, response) + in_place).float()


SORT_MISTAKES_MORE = [
    Mistake(
        "your ordering points count the positions where the response already holds its own sorted value; "
        "they count the adjacent pairs in order, response[t] <= response[t + 1] (T - 1 of them)",
        mistake_ordering_in_place,
    ),
    Mistake(
        "your ordering points look at the prompt; they are the response's: one point for each adjacent pair "
        "response[t] <= response[t + 1]",
        mistake_ordering_of_prompt,
    ),
    Mistake(
        "you count pairs in decreasing order (>=); the ordering point is for a non-decreasing pair, "
        "response[t] <= response[t + 1]",
        mistake_descending_pairs,
    ),
    Mistake(
        "your inclusion points count the positions where the response holds the prompt's token at the same place "
        "(prompt == response); inclusion asks whether each prompt token appears anywhere in the response",
        mistake_same_position,
    ),
    Mistake(
        "your inclusion points are a fraction (divided by T); the reward counts them, one point for each prompt "
        "token that appears in the response",
        mistake_inclusion_fraction,
    ),
    Mistake(
        "you count every pair i < j in order; the ordering points are for adjacent pairs only, "
        "response[..., :-1] <= response[..., 1:] (T - 1 of them)",
        mistake_every_pair,
    ),
    Mistake(
        "you give the ordering points only when the whole response is sorted; each adjacent pair in order "
        "earns its own point (partial credit)",
        mistake_all_or_nothing,
    ),
    Mistake(
        "your inclusion points count every matching response token (a .sum() over the response), so a prompt "
        "token the response repeats earns several points; it earns one: .any(-1), then .sum(-1)",
        mistake_counts_matches,
    ),
    Mistake(
        "a repeated token costs you a point (+1 for a rise, -1 for a repeat); a pair of equal tokens earns the "
        "ordering point like a rise (<=), and no pair loses one",
        mistake_repeats_cost,
    ),
    Mistake(
        "your ordering points are rescaled (times T / (T - 1)); the reward counts them as they are, one point "
        "per adjacent pair in order",
        mistake_ordering_rescaled,
    ),
]
