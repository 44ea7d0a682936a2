"""Classic wrong aggregations of chapter 06, which ``check_aggregate_loss`` (in :mod:`course_lib.checks.grpo`) names.

Each wrong ``aggregate_loss`` is the reference with one mode computed another way (:func:`aggregate_with`), or
the mask, ``max_len`` or the final mean handled wrongly; ``AGGREGATE_MISTAKES`` pairs each with the message that
names it and its fix.
"""

from __future__ import annotations

import torch

from course_lib.checks import Mistake
from course_lib.checks.grpo_loss_mistakes import EMPTY_LEFT_OUT
from course_lib.grpo import aggregate_loss

SEQ_MODES = ("seq-mean-token-mean", "seq-mean-token-sum-norm")


def seq_sum(x, m):
    return _kept(x, m).sum(-1)


def _kept(x, m):
    # Each mistake selects the valid tokens as the reference does: padding may hold inf, and x * m would add a
    # second mistake (0 * inf = NaN) to the one the mistake is about. The one that multiplies says so.
    return torch.where(m > 0, x, torch.zeros_like(x))


def n_tokens(m):
    return m.to(torch.float64).sum(-1)


def aggregate_with(**wrong_modes):
    def agg(per_token, mask, mode, max_len=None):
        mask = mask.to(per_token.dtype)
        if mode in wrong_modes:
            return wrong_modes[mode](per_token, mask, max_len or per_token.shape[-1])
        return aggregate_loss(per_token, mask, mode, max_len)

    return agg


def token_mean(x, m, L):
    return _kept(x, m).sum() / m.sum().clamp(min=1)


def seq_mean(x, m, L):
    return (seq_sum(x, m) / m.sum(-1).clamp(min=1)).mean()


def nonempty_mean(per_response, m):
    # the mean over the responses that have a valid token (an empty one's 0 / 0 never enters)
    kept = n_tokens(m) > 0  # (...)
    return per_response[kept].sum() / kept.sum().clamp(min=1)


def ignore_mask(per_token, mask, mode, max_len=None):
    return aggregate_loss(per_token, torch.ones_like(per_token), mode, max_len)


def always_token_mean(per_token, mask, mode, max_len=None):
    return token_mean(per_token, mask.to(per_token.dtype), max_len)


def longest_valid(per_token, mask, mode, max_len=None):
    # Dr. GRPO's default divisor taken as the longest response's number of valid tokens, not T.
    if mode == "seq-mean-token-sum-norm" and max_len is None:
        max_len = float(n_tokens(mask).max().clamp(min=1))
    return aggregate_loss(per_token, mask, mode, max_len)


AGGREGATE_MISTAKES = [
    Mistake(
        "every mode gives the token mean (DAPO): `mode` is ignored; each mode aggregates in its own way "
        "(the docstring's table), so branch on it",
        always_token_mean,
    ),
    Mistake(
        "this is the token mean (DAPO), but the mode asks for the mean over responses of each "
        "response's token mean: average within each response first (no length bias between them)",
        aggregate_with(**{"seq-mean-token-mean": token_mean}),
    ),
    Mistake(
        "this is the mean over responses, but 'token-mean' averages over all valid tokens of the "
        "batch at once: (loss * mask).sum() / mask.sum()",
        aggregate_with(**{"token-mean": seq_mean}),
    ),
    Mistake(
        "Dr. GRPO divides each response's token sum by the constant max_len, not by its number of valid tokens",
        aggregate_with(**{"seq-mean-token-sum-norm": seq_mean}),
    ),
    Mistake(
        "max_len was given but you divided by T, the padded length; divide by max_len when it is not None",
        aggregate_with(**{"seq-mean-token-sum-norm": lambda x, m, L: seq_sum(x, m).mean() / x.shape[-1]}),
    ),
    Mistake(
        "you summed over all responses and divided by max_len (verl's variant); the course's Dr. GRPO "
        "then takes the mean over responses",
        aggregate_with(**{"seq-mean-token-sum-norm": lambda x, m, L: seq_sum(x, m).sum() / L}),
    ),
    Mistake(
        "the mask is ignored: padding tokens are averaged in; keep only valid tokens",
        ignore_mask,
    ),
    Mistake(
        "padding is counted in the denominator: divide by the number of valid tokens, mask.sum(), "
        "not by the padded size",
        aggregate_with(
            **{
                "token-mean": lambda x, m, L: _kept(x, m).mean(),
                "seq-mean-token-mean": lambda x, m, L: _kept(x, m).mean(),
            }
        ),
    ),
    Mistake(
        "a batch with no valid token gives 0 / 0 = NaN in the token mean; the loss is 0 there: divide by "
        "mask.sum().clamp(min=1)",
        aggregate_with(**{"token-mean": lambda x, m, L: _kept(x, m).sum() / m.sum()}),
    ),
    Mistake(
        "an empty response (no valid token) gives 0 / 0 = NaN; it contributes 0: divide by mask.sum(-1).clamp(min=1)",
        aggregate_with(**{"seq-mean-token-mean": lambda x, m, L: (seq_sum(x, m) / n_tokens(m)).mean()}),
    ),
    Mistake(
        EMPTY_LEFT_OUT,
        aggregate_with(**{"seq-mean-token-mean": lambda x, m, L: nonempty_mean(seq_sum(x, m) / n_tokens(m), m)}),
    ),
    Mistake(
        EMPTY_LEFT_OUT,  # the same with .mean() over the kept responses: NaN when every response is empty
        aggregate_with(
            **{"seq-mean-token-mean": lambda x, m, L: (seq_sum(x, m) / n_tokens(m))[n_tokens(m) > 0].mean()}
        ),
    ),
    Mistake(
        EMPTY_LEFT_OUT,
        aggregate_with(
            **{
                "seq-mean-token-mean": lambda x, m, L: nonempty_mean(seq_sum(x, m) / n_tokens(m), m),
                "seq-mean-token-sum-norm": lambda x, m, L: nonempty_mean(seq_sum(x, m) / L, m),
            }
        ),
    ),
    Mistake(
        "you divided by the longest response's number of valid tokens, mask.sum(-1).max(); Dr. GRPO's "
        "constant without max_len is T, the padded length per_token.shape[-1], whatever the responses' lengths",
        longest_valid,
    ),
]


def _unmasked_in(unmasked):
    """The mask ignored in the mode ``unmasked`` alone (every token, padding included, counts there)."""

    def agg(per_token, mask, mode, max_len=None):
        return aggregate_loss(per_token, torch.ones_like(per_token) if mode == unmasked else mask, mode, max_len)

    return agg


def _default_max_len(read):
    """Dr. GRPO's default constant read another way than T = per_token.shape[-1]."""

    def agg(per_token, mask, mode, max_len=None):
        if mode == "seq-mean-token-sum-norm" and max_len is None:
            max_len = read(per_token)
        return aggregate_loss(per_token, mask, mode, max_len)

    return agg


def _per_group_token_mean(x, m, L):
    """The token mean of each group (a prompt's responses together), then the mean over groups."""
    if x.dim() < 3:
        return token_mean(x, m, L)
    return (_kept(x, m).sum((-1, -2)) / m.sum((-1, -2)).clamp(min=1)).mean()


def _per_response(x, m, L, mode):
    return seq_sum(x, m) / (m.sum(-1).clamp(min=1) if mode == "seq-mean-token-mean" else L)


AGGREGATE_MISTAKES += [
    *(
        Mistake(
            f"the mask is ignored in mode {mode!r}: padding tokens (whatever they hold) enter the loss there; "
            "keep only the valid tokens, as in the other modes",
            _unmasked_in(mode),
        )
        for mode in ("token-mean", *SEQ_MODES)
    ),
    Mistake(
        "padding is counted in the denominator in mode 'token-mean': divide by the number of valid tokens, "
        "mask.sum(), not by the padded size",
        aggregate_with(**{"token-mean": lambda x, m, L: _kept(x, m).mean()}),
    ),
    Mistake(
        "padding is counted in each response's denominator in mode 'seq-mean-token-mean': divide each response's "
        "sum by its number of valid tokens, mask.sum(-1), not by the padded length",
        aggregate_with(**{"seq-mean-token-mean": lambda x, m, L: _kept(x, m).mean(-1).mean()}),
    ),
    Mistake(
        "'token-mean' sums each response's tokens and averages over responses: that divides by the number of "
        "responses, not of tokens; DAPO's token mean is (loss * mask).sum() / mask.sum() over the whole batch",
        aggregate_with(**{"token-mean": lambda x, m, L: seq_sum(x, m).mean()}),
    ),
    Mistake(
        "'token-mean' is taken within each group (each prompt's responses), then averaged over groups; it runs "
        "over every valid token of the batch at once: (loss * mask).sum() / mask.sum()",
        aggregate_with(**{"token-mean": _per_group_token_mean}),
    ),
    Mistake(
        "the padding reaches the loss: per_token * mask is NaN where the padding holds inf or NaN (0 * inf); "
        "select the valid tokens, torch.where(mask, per_token, 0)",
        aggregate_with(
            **{
                "token-mean": lambda x, m, L: (x * m).sum() / m.sum().clamp(min=1),
                "seq-mean-token-mean": lambda x, m, L: ((x * m).sum(-1) / m.sum(-1).clamp(min=1)).mean(),
                "seq-mean-token-sum-norm": lambda x, m, L: ((x * m).sum(-1) / L).mean(),
            }
        ),
    ),
    Mistake(
        "Dr. GRPO's default constant T is read from the first axis (per_token.shape[0]); T is the padded length, "
        "the last axis: per_token.shape[-1]",
        _default_max_len(lambda x: x.shape[0]),
    ),
    Mistake(
        "Dr. GRPO's default constant is T + 1; it is T, the padded length per_token.shape[-1]",
        _default_max_len(lambda x: x.shape[-1] + 1),
    ),
    Mistake(
        "there is no mean over the responses: you returned one value per response; the loss is their mean, a scalar",
        aggregate_with(**{mode: lambda x, m, L, mode=mode: _per_response(x, m, L, mode) for mode in SEQ_MODES}),
    ),
    Mistake(
        "the sum over responses is divided by the first axis's size (B, the prompts); the mean runs over every "
        "response, all B * G of them: per_response.mean()",
        aggregate_with(
            **{mode: lambda x, m, L, mode=mode: _per_response(x, m, L, mode).sum() / x.shape[0] for mode in SEQ_MODES}
        ),
    ),
]
