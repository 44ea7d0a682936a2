"""The check of chapter 10's token weight under each aggregation (reference:
``course_lib.lectures.reasoning.aggregation_token_weight``)."""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference, drawing
from course_lib.grpo import LOSS_AGG_MODES
from course_lib.lectures.reasoning import aggregation_token_weight

# ---------------------------------------------------------------------------
# The weight of one token under each aggregation
# ---------------------------------------------------------------------------


def _weights_with(**wrong):
    def weights(length, mode, max_len=None):
        right = aggregation_token_weight(length, mode, max_len)
        if mode in wrong:
            o = length.double()
            return wrong[mode](o, o.numel(), o.max() if max_len is None else max_len).to(right.dtype)
        return right

    return weights


def _per_row_in(*modes):
    """Each row (a slice along the last axis) aggregated alone under ``modes``: N, the total and the longest length
    are each row's own, where every entry of ``length`` is aggregated together."""

    def weights(length, mode, max_len=None):
        if mode not in modes:
            return aggregation_token_weight(length, mode, max_len)
        rows = length.reshape(-1, length.shape[-1])
        alone = [aggregation_token_weight(row, mode, max_len) for row in rows]
        return torch.stack(alone).reshape(length.shape)

    return weights


def _n_from_first_axis(length, mode, max_len=None):
    """N = len(length), the first axis's size, where N counts every entry."""
    right = aggregation_token_weight(length, mode, max_len)
    return right if mode == "token-mean" else right * length.numel() / len(length)


def _dr_grpo_constant(rule):
    """Dr. GRPO's constant, when max_len is None, ``rule(o)`` instead of the longest length."""

    def weights(length, mode, max_len=None):
        right = aggregation_token_weight(length, mode, max_len)
        if mode != "seq-mean-token-sum-norm" or max_len is not None:
            return right
        o = length.to(right.dtype)
        return torch.where(o > 0, 1.0 / (o.numel() * rule(o)), 0.0).to(right.dtype)

    return weights


def _modes_swapped(length, mode, max_len=None):
    swap = {"token-mean": "seq-mean-token-mean", "seq-mean-token-mean": "token-mean"}
    return aggregation_token_weight(length, swap.get(mode, mode), max_len)


def check_aggregation_token_weight(fn) -> bool:
    """Check a student's ``aggregation_token_weight(length, mode, max_len=None)``."""
    t = torch.tensor
    grids = [
        ("a group of 3 responses of 10, 5 and 2 tokens", t([10, 5, 2])),
        ("B=2 prompts x G=3 responses (shape (2, 3)), lengths 3, 4, 2 / 8, 1, 1", t([[3, 4, 2], [8, 1, 1]])),
        ("4 responses of equal length 6", t([6, 6, 6, 6])),
        ("3 responses of 4, 0 (empty: no token, weight 0) and 2 tokens", t([4, 0, 2])),
        ("one response of 7 tokens, lengths as a float tensor", t([7.0])),
        # The smallest lengths that are not all 0: the longest, and the total, are 1 (a clamp(min=...) shows).
        ("3 responses of 1, 0 and 0 tokens (one token in all)", t([1, 0, 0])),
    ]
    cases = [
        Case(f"{text}, mode={mode!r}", {"length": length, "mode": mode})
        for mode in LOSS_AGG_MODES
        for text, length in grids
    ]
    cases.append(
        Case(
            "lengths 10, 5, 2 with mode='seq-mean-token-sum-norm' and max_len=16 given",
            {"length": grids[0][1], "mode": "seq-mean-token-sum-norm", "max_len": 16},
        )
    )
    nonzero = lambda o, w: torch.where(o > 0, w, 0.0)  # noqa: E731
    mistakes = [
        Mistake(
            "token-mean and seq-mean-token-mean are swapped: token-mean weighs every token alike, "
            "1 / sum_j |o_j|; seq-mean-token-mean averages within each response, then over the N responses, "
            "1 / (N * |o_i|)",
            _modes_swapped,
        ),
        Mistake(
            "the weights are inverted: a token of a long response weighs *less* under the per-sequence "
            "mean, 1 / (N * |o|): that is the length bias",
            _weights_with(**{"seq-mean-token-mean": lambda o, N, L: nonzero(o, o / N)}),
        ),
        Mistake(
            "the mean over the N responses is missing: seq-mean-token-mean gives 1 / (N * |o_i|), not 1 / |o_i|",
            _weights_with(**{"seq-mean-token-mean": lambda o, N, L: nonzero(o, 1 / o)}),
        ),
        Mistake(
            "token-mean divides by the total number of tokens of all responses, sum_j |o_j|, "
            "so every token weighs the same",
            _weights_with(**{"token-mean": lambda o, N, L: nonzero(o, 1 / (N * o.clamp(min=1)))}),
        ),
        Mistake(
            "token-mean's denominator is the total number of tokens, sum_j |o_j|, not the number of responses N",
            _weights_with(**{"token-mean": lambda o, N, L: nonzero(o, torch.full_like(o, 1 / N))}),
        ),
        Mistake(
            "Dr. GRPO divides by the constant max_len, the same for every response, not by |o_i|",
            _weights_with(**{"seq-mean-token-sum-norm": lambda o, N, L: nonzero(o, 1 / (N * o.clamp(min=1)))}),
        ),
        Mistake(
            "Dr. GRPO still takes the mean over the N responses: 1 / (N * max_len), not 1 / max_len "
            "(verl's sum over responses)",
            _weights_with(**{"seq-mean-token-sum-norm": lambda o, N, L: nonzero(o, torch.ones_like(o) / L)}),
        ),
        Mistake(
            "max_len was given but ignored: when it is not None, Dr. GRPO divides by it",
            _weights_with(
                **{"seq-mean-token-sum-norm": lambda o, N, L: nonzero(o, torch.ones_like(o) / (N * o.max()))}
            ),
        ),
        Mistake(
            "N counts every response aggregated together, empty ones (length 0) included: they still count "
            "in the mean over responses (N = length.numel()), though their own weight is 0",
            _weights_with(
                **{
                    "seq-mean-token-mean": lambda o, N, L: nonzero(o, 1 / ((o > 0).sum() * o.clamp(min=1))),
                    "seq-mean-token-sum-norm": lambda o, N, L: nonzero(o, torch.ones_like(o) / ((o > 0).sum() * L)),
                }
            ),
        ),
        Mistake(
            "an empty response (length 0) has no token to weigh: its weight is 0, not the weight a token would have",
            _weights_with(
                **{
                    "seq-mean-token-mean": lambda o, N, L: 1 / (N * o.clamp(min=1)),
                    "token-mean": lambda o, N, L: torch.ones_like(o) / o.sum(),
                    "seq-mean-token-sum-norm": lambda o, N, L: torch.ones_like(o) / (N * L),
                }
            ),
        ),
        *[
            Mistake(
                "an empty response (length 0) has no token to weigh: its weight is 0, not the weight a token would "
                f"have (under mode={mode!r})",
                _weights_with(**{mode: rule}),
            )
            for mode, rule in (
                ("seq-mean-token-mean", lambda o, N, L: 1 / (N * o.clamp(min=1))),
                ("token-mean", lambda o, N, L: torch.ones_like(o) / o.sum()),
                ("seq-mean-token-sum-norm", lambda o, N, L: torch.ones_like(o) / (N * L)),
            )
        ],
        Mistake(
            "an empty response (length 0) divides by |o_i| = 0 (1 / 0 = inf): its weight is 0, it has no token; "
            "divide by o.clamp(min=1) and set the empty ones to 0 with torch.where(o > 0, w, 0)",
            _weights_with(**{"seq-mean-token-mean": lambda o, N, L: 1 / (N * o)}),
        ),
        Mistake(
            "an empty response's weight is zeroed with w * (o > 0), but its w is 1 / 0 = inf and inf * 0 is NaN: "
            "select with torch.where(o > 0, w, 0) (and divide by o.clamp(min=1))",
            _weights_with(**{"seq-mean-token-mean": lambda o, N, L: 1 / (N * o) * (o > 0)}),
        ),
        Mistake(
            "each row (the last axis) is aggregated alone; every entry of length is one response of the same "
            "aggregation, a (B, G) table included: N = length.numel(), the total and the longest over all entries",
            _per_row_in(*LOSS_AGG_MODES),
        ),
        *[
            Mistake(
                f"under mode={mode!r} each row (the last axis) is aggregated alone; every entry of length is one "
                "response of the same aggregation: N = length.numel(), the total and the longest over all entries",
                _per_row_in(mode),
            )
            for mode in LOSS_AGG_MODES
        ],
        Mistake(
            "N is len(length), the size of the first axis; N counts every response, length.numel(), a (B, G) table "
            "holds B * G of them",
            _n_from_first_axis,
        ),
        Mistake(
            "with max_len=None Dr. GRPO's constant is the longest length, length.max(), not the mean length",
            _dr_grpo_constant(lambda o: o.mean()),
        ),
        Mistake(
            "with max_len=None Dr. GRPO's constant is the longest length, length.max(), not length.shape[-1] (the "
            "number of responses along the last axis: length holds lengths, not tokens)",
            _dr_grpo_constant(lambda o: o.shape[-1]),
        ),
        Mistake(
            "under token-mean this is a response's share of the tokens, |o_i| / sum_j |o_j|; the weight of one of "
            "its tokens is 1 / sum_j |o_j|, the same for every token",
            _weights_with(**{"token-mean": lambda o, N, L: nonzero(o, o / o.sum())}),
        ),
    ]
    return check_against_reference(
        fn,
        aggregation_token_weight,
        cases,
        name="aggregation_token_weight",
        mistakes=mistakes,
        draw=_draw_lengths,
        check_dtype=True,
    )


def _draw_lengths(g: torch.Generator) -> list[Case]:
    """Fresh lengths: shapes, empty responses, int or float tensors, every mode, max_len given or not."""
    cases = []
    for mode in LOSS_AGG_MODES:
        shape = drawing.choice(g, ((4,), (2, 3), (1, 5)))
        length = torch.randint(0, 12, shape, generator=g)
        length.view(-1)[0] = drawing.integer(g, 1, 12)  # at least one response with tokens
        if drawing.integer(g, 0, 1):
            length = length.to(drawing.choice(g, (torch.float32, torch.float64)))
        kwargs = {"length": length, "mode": mode}
        if mode == "seq-mean-token-sum-norm" and drawing.integer(g, 0, 1):
            kwargs["max_len"] = drawing.integer(g, 12, 20)
        cases.append(Case(f"lengths {length.tolist()} ({length.dtype}), mode={mode!r}", kwargs))
    return cases
