"""The check of chapter 08's completion mask (reference: ``course_lib.lm_sampling.completion_mask``)."""

from __future__ import annotations

import torch

from course_lib.checks import (
    Case,
    Mistake,
    check_against_reference,
    drawing,
)
from course_lib.checks.compare import Unfit
from course_lib.lm_sampling import completion_mask

# ---------------------------------------------------------------------------
# 2. The completion mask
# ---------------------------------------------------------------------------


def _mask_drops_eos(completion_ids, eos_id):
    return (torch.cumsum((completion_ids == eos_id).long(), -1) == 0).float()


def _mask_off_by_one(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    before = torch.cumsum(is_eos, -1) - is_eos
    shifted = torch.cat([torch.zeros_like(before[..., :1]), before[..., :-1]], -1)  # one token too far
    return (shifted == 0).float()


def _mask_argmax(completion_ids, eos_id):
    first = (completion_ids == eos_id).long().argmax(dim=-1, keepdim=True)  # 0 where a row has no EOS
    return (torch.arange(completion_ids.shape[-1]) <= first).float()


def _mask_roll(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return (is_eos.roll(1, dims=-1).cumsum(-1) == 0).float()  # the last token's EOS wraps to the front


def _mask_no_eos_rows_empty(completion_ids, eos_id):
    mask = completion_mask(completion_ids, eos_id)
    return mask * (completion_ids == eos_id).any(-1, keepdim=True).float()


def _mask_last_eos(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    after = torch.flip(torch.cumsum(torch.flip(is_eos, [-1]), -1), [-1])  # EOS at or after t
    return ((after > 0) | (is_eos.sum(-1, keepdim=True) == 0)).float()


def _mask_not_pad(completion_ids, eos_id):
    return (completion_ids != eos_id + 1).float()  # PAD = eos_id + 1 in the course's tokenizer


def _mask_not_eos(completion_ids, eos_id):
    return (completion_ids != eos_id).float()  # 0 at each EOS only: the tokens after it stay 1


def _mask_runs_on(completion_ids, eos_id):
    eos_so_far = torch.cumsum((completion_ids == eos_id).long(), dim=-1)  # counts the EOS at t itself
    return (eos_so_far <= 1).float()  # 1 until the second EOS: the tokens after the first stay in


def _mask_every_eos_kept(completion_ids, eos_id):
    is_eos = completion_ids == eos_id
    return ((torch.cumsum(is_eos.long(), -1) == 0) | is_eos).float()  # a later EOS comes back in


def _mask_shifted_the_other_way(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    next_is_eos = torch.cat([is_eos[..., 1:], torch.zeros_like(is_eos[..., :1])], -1)  # the EOS one step *later*
    return (torch.cumsum(next_is_eos, -1) == 0).float()


def _mask_first_row_for_all(completion_ids, eos_id):
    # The first row's first EOS, used for every row.
    first_row = completion_ids.reshape(-1, completion_ids.shape[-1])[:1]
    return (
        completion_mask(first_row, eos_id)
        .expand(completion_ids.reshape(-1, completion_ids.shape[-1]).shape)
        .reshape(completion_ids.shape)
    )


def _mask_keeps_a_batch_axis(completion_ids, eos_id):
    return completion_mask(completion_ids[None] if completion_ids.dim() == 1 else completion_ids, eos_id)


def _mask_rows_of_two_axes_only(completion_ids, eos_id):
    # A loop over rows of a (B, L) batch: the rows of a (B, G, L) batch are groups, where no id equals eos_id.
    if completion_ids.dim() != 2:
        return torch.ones(completion_ids.shape)
    return completion_mask(completion_ids, eos_id)


def _mask_along(axis):
    # The running count taken along an axis counted from the front: the tokens for one rank of ids only.
    def wrong(completion_ids, eos_id):
        is_eos = (completion_ids == eos_id).long()
        return ((torch.cumsum(is_eos, dim=axis) - is_eos) == 0).float()

    return wrong


def check_completion_mask(fn) -> bool:
    """Check a student's ``completion_mask(completion_ids, eos_id) -> float mask``."""
    E, P = 12, 13
    cases = [
        Case("EOS in the middle, PAD after it", {"completion_ids": torch.tensor([[1, 3, 2, E, P]]), "eos_id": E}),
        Case("EOS first: one valid token", {"completion_ids": torch.tensor([[E, P, P, P]]), "eos_id": E}),
        Case(
            "a row with no EOS (ran out of tokens): all valid",
            {"completion_ids": torch.tensor([[1, 2, 3, 4], [5, E, P, P]]), "eos_id": E},
        ),
        Case("EOS at the last position", {"completion_ids": torch.tensor([[4, 5, 6, E]]), "eos_id": E}),
        Case(
            "two EOS: only the first counts, and what follows it is not PAD",
            {"completion_ids": torch.tensor([[1, E, 2, E, 7]]), "eos_id": E},
        ),
        Case(
            "a (B, G, L) batch",
            {"completion_ids": torch.tensor([[[1, E, P], [2, 3, E]], [[E, P, P], [4, 5, 6]]]), "eos_id": E},
        ),
        Case("another EOS id (3)", {"completion_ids": torch.tensor([[0, 1, 3, 2, 2]]), "eos_id": 3}),
        Case(
            "one completion, a 1-D row ([..., L] with no leading axis)",
            {"completion_ids": torch.tensor([6, E, P]), "eos_id": E},
        ),
        Case(
            "an early EOS, then other tokens, then a second EOS: nothing after the first counts",
            {"completion_ids": torch.tensor([[3, E, 4, 5, 6, E, P]]), "eos_id": E},
        ),
    ]
    mistakes = [
        Mistake(
            "the EOS token is masked out: it is part of the completion (the model chose to stop, "
            "and that choice must get the advantage too)",
            _mask_drops_eos,
        ),
        Mistake("the mask is off by one: it keeps the token after EOS", _mask_off_by_one),
        Mistake(
            "rows with no EOS get an empty mask: a completion that ran out of tokens is valid everywhere",
            _mask_no_eos_rows_empty,
        ),
        Mistake(
            "the first EOS is found with argmax, which gives 0 for a row with no EOS at all (all its tokens "
            "are valid): test (ids == eos_id).any(-1) too, or use a cumulative sum",
            _mask_argmax,
        ),
        Mistake(
            "the shift uses roll, which wraps around: an EOS at the last position comes back to the front and "
            "masks the whole row; shift with torch.cat([zeros, x[..., :-1]], -1)",
            _mask_roll,
        ),
        Mistake("the mask runs to the last EOS: everything after the first EOS is masked", _mask_last_eos),
        Mistake(
            "the mask runs on after the first EOS (up to the next EOS or the row's end): keep tokens through the "
            "FIRST EOS only, e.g. (cumsum(is_eos) - is_eos) == 0",
            _mask_runs_on,
        ),
        Mistake(
            "the mask tests for PAD instead of finding the first EOS: tokens after EOS are not always PAD",
            _mask_not_pad,
        ),
        Mistake(
            "the mask is 0 only at the EOS itself (ids != eos_id): the EOS belongs to the completion (1), and "
            "every token after the first EOS is 0; keep the tokens up to and including the first EOS",
            _mask_not_eos,
        ),
    ]

    mistakes += [
        Mistake(
            "every EOS is kept, the later ones too ((cumsum(is_eos) == 0) | is_eos): only the first EOS belongs to "
            "the completion; what follows it, another EOS included, is 0: (cumsum(is_eos) - is_eos) == 0",
            _mask_every_eos_kept,
        ),
        Mistake(
            "the shift goes the wrong way: you counted the EOS one step *later* (is_eos[..., 1:]), so the mask "
            "stops before the token ahead of EOS; count the EOS strictly before t, cumsum(is_eos) - is_eos",
            _mask_shifted_the_other_way,
        ),
        Mistake(
            "every row uses the first row's EOS position: each row's mask depends on where its own first EOS is",
            _mask_first_row_for_all,
        ),
        Mistake(
            "a 1-D row gets a batch axis it did not have: the mask has the shape of completion_ids, [..., L]",
            _mask_keeps_a_batch_axis,
        ),
        Mistake(
            "only a (B, L) batch is handled: a (B, G, L) batch's rows are groups, no id equals eos_id there, and "
            "they stay valid; work along the last axis whatever the shape (cumsum(dim=-1), or a loop over "
            "ids.reshape(-1, L))",
            _mask_rows_of_two_axes_only,
        ),
    ]
    mistakes += [
        Mistake(
            f"the running count of EOS is taken along dim={axis}, an axis counted from the front: that is the "
            "tokens only for ids of one rank, and the batch or the group for the others; count along the last "
            "axis, dim=-1 (the docstring's [..., L])",
            _mask_along(axis),
        )
        for axis in (0, 1)
    ]

    def reference(completion_ids, eos_id):
        return completion_mask(completion_ids, eos_id)

    def as_mask(result):
        # A tensor as it is: its dtype is checked too (the docstring promises float32; a bool or a long mask
        # multiplies differently, and a float64 one turns every loss it weights into float64).
        if not isinstance(result, torch.Tensor):
            raise Unfit(f"it returned a {type(result).__name__}; the exercise asks for a float32 tensor")
        return {"mask": result}

    return check_against_reference(
        fn,
        reference,
        cases,
        name="completion_mask",
        mistakes=mistakes,
        outputs=as_mask,
        dtypes=(torch.float64,),
        draw=_draw_completions,
        check_dtype=True,
    )


def _draw_completions(g: torch.Generator) -> list[Case]:
    """Fresh completions: shapes, EOS ids, EOS anywhere (several, or none), PAD or more EOS after it."""
    cases = []
    for _ in range(4):
        shape = drawing.choice(g, ((1, 5), (3, 4), (2, 2, 6), (4, 1)))
        eos = drawing.choice(g, (12, 3, 0))
        ids = torch.randint(0, 12, shape, generator=g)
        ids[ids == eos] = eos + 1
        flat = ids.view(-1, shape[-1])
        for row in flat:
            for _ in range(drawing.integer(g, 0, 2)):
                row[drawing.integer(g, 0, shape[-1] - 1)] = eos
        cases.append(Case(f"completions {ids.tolist()}, eos_id={eos}", {"completion_ids": ids, "eos_id": eos}))
    return cases
