"""Classic wrong (and correct) ways to write the exercises of chapter 02.

``gather_log_probs(logits[..., T, V], tokens[..., T]) -> [..., T]`` and
``reinforce_loss(logp[..., T], deltas[...], mask=None) -> scalar``, checked by
``course_lib.checks.policy_gradient.check_gather_log_probs`` and ``check_reinforce_loss``.
"""

import torch
from catalogue_round7_00_04 import (
    r02_gather_take_along_dim,
    r02_reinforce_masked_fill,
    r02_reinforce_masked_select,
    r02_reinforce_nansum,
    w02_gather_cross_entropy_mean,
    w02_gather_detached,
    w02_gather_dim_two,
    w02_gather_float32,
    w02_gather_greedy_max,
    w02_gather_keeps_last_axis,
    w02_gather_log_softmax_eps,
    w02_gather_logsumexp_wrong_axis,
    w02_gather_minus_max_only,
    w02_gather_onehot_mean,
    w02_gather_softmax_dim0,
    w02_gather_softmax_then_log_of_gathered_eps,
    w02_gather_squeeze_everything,
    w02_gather_temperature,
    w02_reinforce_batch_mean_of_sums,
    w02_reinforce_centred_deltas,
    w02_reinforce_drgrpo_constant,
    w02_reinforce_fresh_zero,
    w02_reinforce_logp_detached,
    w02_reinforce_mean_of_deltas_times_mean_logp,
    w02_reinforce_mean_over_T_only,
    w02_reinforce_neg_logp_mean_only,
    w02_reinforce_normalises_deltas,
    w02_reinforce_squared_deltas,
    w02_reinforce_sum_over_batch_mean_over_T,
)

# ---------------------------------------------------------------------------
# gather_log_probs: wrong
# ---------------------------------------------------------------------------


def gather_probs_not_log_probs(logits, tokens):
    return torch.softmax(logits, dim=-1).gather(-1, tokens[..., None]).squeeze(-1)


def gather_log_of_softmax(logits, tokens):
    return torch.log(torch.softmax(logits, dim=-1)).gather(-1, tokens[..., None]).squeeze(-1)


def gather_log_softmax_over_tokens(logits, tokens):
    return torch.log_softmax(logits, dim=-2).gather(-1, tokens[..., None]).squeeze(-1)


def gather_raw_logits(logits, tokens):
    return logits.gather(-1, tokens[..., None]).squeeze(-1)


def gather_shifted_like_lm_training(logits, tokens):
    logp_all = torch.log_softmax(logits[..., :-1, :], dim=-1)
    return logp_all.gather(-1, tokens[..., 1:, None]).squeeze(-1)


def gather_from_next_position(logits, tokens):
    logp_all = torch.log_softmax(logits, dim=-1)
    # Position t reads the logits of position t + 1 (the last one reads itself).
    shifted = torch.cat([logp_all[..., 1:, :], logp_all[..., -1:, :]], dim=-2)
    return shifted.gather(-1, tokens[..., None]).squeeze(-1)


def gather_tokens_rolled(logits, tokens):
    # The next token's id gathered at every position (tokens shifted by one, wrapping).
    return torch.log_softmax(logits, dim=-1).gather(-1, torch.roll(tokens, -1, dims=-1).unsqueeze(-1)).squeeze(-1)


def gather_negative_log_probs(logits, tokens):
    return torch.nn.functional.cross_entropy(logits.flatten(0, -2), tokens.flatten(), reduction="none").view(
        tokens.shape
    )


def gather_log_softmax_eps(logits, tokens):
    return torch.log(torch.softmax(logits, dim=-1) + 1e-8).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def gather_detached(logits, tokens):
    logp_all = torch.log_softmax(logits.detach(), dim=-1)
    return logp_all.gather(-1, tokens[..., None]).squeeze(-1)


# ---------------------------------------------------------------------------
# gather_log_probs: correct variants
# ---------------------------------------------------------------------------


def gather_with_one_hot(logits, tokens):
    one_hot = torch.nn.functional.one_hot(tokens, logits.shape[-1]).to(logits.dtype)
    return (torch.log_softmax(logits, dim=-1) * one_hot).sum(-1)


def gather_minus_logsumexp(logits, tokens):
    picked = logits.gather(-1, tokens[..., None]).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


# ---------------------------------------------------------------------------
# reinforce_loss: wrong
# ---------------------------------------------------------------------------


def _mean_over_valid(per_token, mask):
    if mask is None:
        return per_token.mean()
    return _valid_only(per_token, mask).sum() / mask.sum().clamp(min=1)


def _valid_only(per_token, mask):
    # These students select the padding away with torch.where, as the exercise asks (it may hold NaN), and make
    # one mistake each; reinforce_padding_multiplied is the one who multiplies by the mask.
    return torch.where(mask.bool(), per_token, torch.zeros_like(per_token))


def reinforce_deltas_attached(logp, deltas, mask=None):
    logp = logp if mask is None else _valid_only(logp, mask)  # the padding zeroed first, as the reference does
    return _mean_over_valid(-(deltas[..., None] * logp), mask)


def reinforce_no_minus(logp, deltas, mask=None):
    return _mean_over_valid(deltas.detach()[..., None] * logp, mask)


def reinforce_sum(logp, deltas, mask=None):
    per_token = -(deltas.detach()[..., None] * logp)
    return per_token.sum() if mask is None else _valid_only(per_token, mask).sum()


def reinforce_mask_ignored(logp, deltas, mask=None):
    return (-(deltas.detach()[..., None] * logp)).mean()


def reinforce_padding_in_denominator(logp, deltas, mask=None):
    per_token = -(deltas.detach()[..., None] * logp)
    return per_token.mean() if mask is None else _valid_only(per_token, mask).mean()


def reinforce_sequence_mean(logp, deltas, mask=None):
    per_token = -(deltas.detach()[..., None] * logp)
    if mask is None:
        return per_token.mean()
    return (_valid_only(per_token, mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()


def reinforce_nan_when_empty(logp, deltas, mask=None):
    per_token = -(deltas.detach()[..., None] * logp)
    return per_token.mean() if mask is None else _valid_only(per_token, mask).sum() / mask.sum()


def reinforce_broadcast_wrong_axis(logp, deltas, mask=None):
    return _mean_over_valid(-(deltas.detach() * logp), mask)


def reinforce_first_token_only(logp, deltas, mask=None):
    # Uses only the first token of each response (the log-prob of the whole
    # response is the sum over its tokens).
    return (-(deltas.detach() * logp[..., 0])).mean()


def reinforce_sequence_sum(logp, deltas, mask=None):
    # The padding selected away with torch.where, as the exercise asks (it may hold NaN): one mistake, the sum.
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    seq_logp = torch.where(valid, logp, torch.zeros_like(logp)).sum(dim=-1)  # log pi of each whole response
    return -(deltas.detach() * seq_logp).mean()


def reinforce_probabilities(logp, deltas, mask=None):
    return _mean_over_valid(-(deltas.detach()[..., None] * torch.exp(logp)), mask)


def reinforce_inverted_mask(logp, deltas, mask=None):
    return _mean_over_valid(-(deltas.detach()[..., None] * logp), None if mask is None else ~mask.bool())


def reinforce_mean_delta(logp, deltas, mask=None):
    return _mean_over_valid(-(deltas.detach().mean() * logp), mask)


# ---------------------------------------------------------------------------
# reinforce_loss: correct variants
# ---------------------------------------------------------------------------


def reinforce_padding_multiplied(logp, deltas, mask=None):
    """The padding zeroed by multiplying with the mask: a NaN or -inf log-prob there gives 0 * NaN = NaN."""
    m = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    per_token = -(deltas.detach()[..., None] * logp) * m
    return per_token.sum() / m.sum().clamp(min=1)


def reinforce_loop(logp, deltas, mask=None):
    """A loop over responses and tokens, as one would write it on paper."""
    flat_logp = logp.reshape(-1, logp.shape[-1])
    flat_deltas = deltas.detach().reshape(-1)
    flat_mask = torch.ones_like(flat_logp) if mask is None else mask.reshape(-1, logp.shape[-1])
    total, count = 0.0, 0
    for i in range(flat_logp.shape[0]):
        for t in range(flat_logp.shape[1]):
            if flat_mask[i, t]:
                total = total - flat_deltas[i] * flat_logp[i, t]
                count += 1
    return total / max(count, 1) if count else flat_logp.sum() * 0.0


def reinforce_masked_select(logp, deltas, mask=None):
    """Keep the valid tokens with boolean indexing, then take a plain mean (in float64)."""
    per_token = -(deltas.detach().to(torch.float64)[..., None] * logp.to(torch.float64))
    if mask is not None:
        per_token = per_token[mask.bool()]
    if per_token.numel() == 0:
        return logp.sum() * 0.0
    return per_token.mean().to(logp.dtype)


def gather_via_trl(logits, tokens):
    """The whole exercise as one call of TRL's: borrowed, like course_lib's own (docs/grading.md)."""
    from trl.trainer.utils import selective_log_softmax

    return selective_log_softmax(logits, tokens)


MUTANTS = [
    ("gather_log_probs", gather_via_trl, "calls TRL's own trl.trainer.utils.selective_log_softmax"),
    ("gather_log_probs", gather_probs_not_log_probs, "probabilities, not log-probabilities"),
    ("gather_log_probs", gather_log_of_softmax, "underflows"),
    ("gather_log_probs", gather_log_softmax_over_tokens, "wrong axis"),
    ("gather_log_probs", gather_raw_logits, "raw logits"),
    ("gather_log_probs", gather_shifted_like_lm_training, "shifted"),
    ("gather_log_probs", gather_from_next_position, "next position"),
    ("gather_log_probs", gather_detached, "no gradient"),
    ("gather_log_probs", gather_tokens_rolled, "tokens are shifted by one position"),
    ("gather_log_probs", gather_negative_log_probs, "negative log-probabilities"),
    ("gather_log_probs", gather_log_softmax_eps, "softmax(...) + eps"),
    ("reinforce_loss", reinforce_deltas_attached, "deltas.detach()"),
    ("reinforce_loss", reinforce_no_minus, "sign is flipped"),
    ("reinforce_loss", reinforce_sum, "summed"),
    ("reinforce_loss", reinforce_mask_ignored, "padding is not masked"),
    ("reinforce_loss", reinforce_padding_in_denominator, "mask.numel()"),
    ("reinforce_loss", reinforce_sequence_mean, "each response first"),
    ("reinforce_loss", reinforce_nan_when_empty, "clamp(min=1)"),
    ("reinforce_loss", reinforce_broadcast_wrong_axis, "deltas[..., None]"),
    ("reinforce_loss", reinforce_first_token_only, "only the first token"),
    ("reinforce_loss", reinforce_sequence_sum, "summed each response's log-probs"),
    ("reinforce_loss", reinforce_probabilities, "probabilities exp(logp)"),
    ("reinforce_loss", reinforce_inverted_mask, "mask is inverted"),
    ("reinforce_loss", reinforce_mean_delta, "mean of deltas"),
    ("reinforce_loss", reinforce_padding_multiplied, "multiplied by 0"),
]

VARIANTS = [
    ("gather_log_probs", gather_with_one_hot),
    ("gather_log_probs", gather_minus_logsumexp),
    ("reinforce_loss", reinforce_loop),
    ("reinforce_loss", reinforce_masked_select),
]


# Round seven of issue 44 (chapters 00 to 04): the wrong answers of tests/catalogue_round7_00_04.py, each
# named by the mistake it makes, and its right variants.
MUTANTS += [
    ("gather_log_probs", w02_gather_keeps_last_axis, "your output keeps the gathered axis of 1,"),
    ("gather_log_probs", w02_gather_greedy_max, "you took the largest log-prob of each"),
    ("gather_log_probs", w02_gather_minus_max_only, "you subtracted the max logit but not the"),
    ("gather_log_probs", w02_gather_cross_entropy_mean, "F.cross_entropy averages every token into"),
    ("gather_log_probs", w02_gather_onehot_mean, "you averaged the one-hot product over the"),
    ("gather_log_probs", w02_gather_detached, "carries no gradient"),
    ("gather_log_probs", w02_gather_float32, "output is a float32 tensor; the exercise"),
    ("gather_log_probs", w02_gather_log_softmax_eps, "log(softmax(...)) kept away from 0"),
    ("gather_log_probs", w02_gather_temperature, "you divided the logits by a temperature"),
    ("gather_log_probs", w02_gather_logsumexp_wrong_axis, "you normalised after the gather: log_softmax"),
    ("reinforce_loss", w02_reinforce_normalises_deltas, "you normalised the deltas inside the loss"),
    ("reinforce_loss", w02_reinforce_fresh_zero, "return a new tensor"),
    ("reinforce_loss", w02_reinforce_drgrpo_constant, "you averaged over all tokens, padding"),
    ("reinforce_loss", w02_reinforce_mean_of_deltas_times_mean_logp, "every token is weighted by the mean of"),
    ("reinforce_loss", w02_reinforce_squared_deltas, "you weighted by |deltas|; a negative delta"),
    ("reinforce_loss", w02_reinforce_neg_logp_mean_only, "the deltas are missing: that is the negative"),
    ("reinforce_loss", w02_reinforce_batch_mean_of_sums, "you divided each response's sum by the"),
]

VARIANTS += [
    ("gather_log_probs", r02_gather_take_along_dim),
    ("reinforce_loss", r02_reinforce_masked_fill),
    ("reinforce_loss", r02_reinforce_masked_select),
]

# Wave two of round seven, written after the fixes for wave one.
MUTANTS += [
    ("gather_log_probs", w02_gather_squeeze_everything, "you squeezed every axis of 1 (.squeeze()"),
    ("gather_log_probs", w02_gather_softmax_dim0, "the log_softmax normalises over dim=0, an"),
    ("reinforce_loss", w02_reinforce_sum_over_batch_mean_over_T, "you averaged each response over its tokens"),
    ("reinforce_loss", w02_reinforce_centred_deltas, "you subtracted the mean of the deltas inside"),
]

VARIANTS += [
    ("reinforce_loss", r02_reinforce_nansum),
]

# Wave three of round seven, written after the fixes for wave two.
MUTANTS += [
    ("gather_log_probs", w02_gather_softmax_then_log_of_gathered_eps, "log(softmax(...)) kept away from 0 (+ eps or"),
    ("reinforce_loss", w02_reinforce_mean_over_T_only, "you divided the summed loss by T, the padded"),
]

# Wave four of round seven, written after the fixes for wave three.
MUTANTS += [
    ("gather_log_probs", w02_gather_dim_two, "the log_softmax normalises over dim=2,"),
    ("reinforce_loss", w02_reinforce_logp_detached, "you detached logp and left deltas"),
]
