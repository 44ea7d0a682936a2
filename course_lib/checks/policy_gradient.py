"""Exercise checks of chapter 02 (policy gradient): log-probs and the REINFORCE loss.

The checks import the reference implementations of ``course_lib.policy_gradient``; the maths module never
imports its checks, so the file a student opens is the maths alone.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_lib.checks import Case, Mistake, check_against_reference
from course_lib.checks.policy_gradient_mistakes import GATHER_MISTAKES_MORE, REINFORCE_MISTAKES_MORE
from course_lib.policy_gradient import gather_log_probs, reinforce_loss


def check_gather_log_probs(fn) -> bool:
    """Check a student's ``gather_log_probs(logits, tokens)`` against the reference."""
    g = torch.Generator().manual_seed(0)

    def case(description, shape, scale=2.0, logits=None):
        *lead, V = shape
        if logits is None:
            logits = scale * torch.randn(*shape, generator=g, dtype=torch.float64)
        tokens = torch.randint(0, V, tuple(lead), generator=g)
        return Case(description, {"logits": logits, "tokens": tokens}, grad=("logits",))

    far = torch.tensor([[0.0, 1000.0, -5.0], [2.0, 0.0, -1000.0]], dtype=torch.float64)
    cases = [
        case("one response of T=5 tokens, vocabulary V=4 (logits (5, 4))", (5, 4)),
        case("B=2 responses of T=3 tokens, V=6 (logits (2, 3, 6))", (2, 3, 6)),
        case("B=2 prompts, G=3 responses of T=4 tokens, V=5 (logits (2, 3, 4, 5))", (2, 3, 4, 5)),
        case("a single token, T=1, V=7", (1, 1, 7)),
        case("a vocabulary of one token, V=1: log pi is 0", (2, 3, 1)),
        Case(
            "logits 1000 apart: log(softmax) underflows to -inf, log_softmax does not",
            {"logits": far, "tokens": torch.tensor([0, 2])},
            grad=("logits",),
        ),
    ]

    def softmax_probs(logits, tokens):
        return torch.softmax(logits, -1).gather(-1, tokens.long()[..., None]).squeeze(-1)

    def log_of_softmax(logits, tokens):
        return torch.log(torch.softmax(logits, -1)).gather(-1, tokens.long()[..., None]).squeeze(-1)

    def wrong_axis(logits, tokens):
        return torch.log_softmax(logits, -2).gather(-1, tokens.long()[..., None]).squeeze(-1)

    def fixed_axis(axis):
        # An axis counted from the front: the vocabulary for one rank of logits, another axis for the others.
        def wrong(logits, tokens):
            return torch.log_softmax(logits, axis).gather(-1, tokens.long()[..., None]).squeeze(-1)

        return wrong

    def raw_logits(logits, tokens):
        return logits.gather(-1, tokens.long()[..., None]).squeeze(-1)

    def shifted(pad):
        # The language-model shift (logits at t score token t + 1) on inputs already aligned: T - 1 entries, or T
        # with a 0 put in front (pad "cat": zeros_like(x[..., :1]); pad "pad": F.pad, a 0 even where T = 1).
        def wrong(logits, tokens):
            logp_all = torch.log_softmax(logits, -1)[..., :-1, :]
            picked = logp_all.gather(-1, tokens.long()[..., 1:, None]).squeeze(-1)  # (..., T - 1)
            if pad == "pad":
                return F.pad(picked, (1, 0))
            if pad == "cat":
                return torch.cat([torch.zeros_like(picked[..., :1]), picked], dim=-1)
            return picked

        return wrong

    def next_position(logits, tokens):
        logp_all = torch.log_softmax(logits, -1)
        # Position t reads position t + 1; the last position, having no next one, reads itself.
        logp_all = torch.cat([logp_all[..., 1:, :], logp_all[..., -1:, :]], dim=-2)
        return logp_all.gather(-1, tokens.long()[..., None]).squeeze(-1)

    def rolled(shift):
        def wrong(logits, tokens):
            return torch.log_softmax(logits, -1).gather(-1, tokens.long().roll(shift, -1)[..., None]).squeeze(-1)

        return wrong

    def negated(logits, tokens):
        return -torch.log_softmax(logits, -1).gather(-1, tokens.long()[..., None]).squeeze(-1)

    def log_softmax_plus_eps(logits, tokens):
        p = torch.softmax(logits, -1).gather(-1, tokens.long()[..., None]).squeeze(-1)
        return torch.log(p + 1e-8)

    def normalised_after_gather(logits, tokens):  # log_softmax over the T picked logits, not over the vocabulary
        return torch.log_softmax(raw_logits(logits, tokens), -1)

    def without_max_shift(logits, tokens):  # logits - log(sum(exp(logits))): overflows for large logits
        return logits.gather(-1, tokens.long()[..., None]).squeeze(-1) - torch.log(torch.exp(logits).sum(-1))

    shift_text = (
        "the tokens are shifted by one position (tokens.roll({s}, -1) or a slice): logits[..., t, :] is "
        "the distribution of tokens[..., t] itself; gather tokens[..., t] at the same position t"
    )
    mistakes = [
        Mistake(shift_text.format(s=-1), rolled(-1)),
        Mistake(shift_text.format(s=1), rolled(1)),
        Mistake(
            "these are negative log-probabilities (a cross-entropy, -log pi); return log pi itself, "
            "torch.log_softmax(logits, dim=-1) gathered at the tokens",
            negated,
        ),
        Mistake(
            "log(softmax(...) + eps) is off for unlikely tokens and wrong for very unlikely ones: use "
            "torch.log_softmax, which is exact there",
            log_softmax_plus_eps,
        ),
        Mistake(
            "log(sum(exp(logits))) overflows for large logits: use torch.log_softmax (or torch.logsumexp), "
            "which subtracts the max first",
            without_max_shift,
        ),
        Mistake(
            "these are probabilities, not log-probabilities: use torch.log_softmax(logits, dim=-1), not torch.softmax",
            softmax_probs,
        ),
        Mistake(
            "log(softmax(...)) underflows to -inf for very unlikely tokens: use torch.log_softmax, "
            "which is exact there",
            log_of_softmax,
        ),
        Mistake(
            "the log_softmax normalises over the wrong axis (the token axis T); normalise over the "
            "vocabulary, the last axis: torch.log_softmax(logits, dim=-1)",
            wrong_axis,
        ),
        *(
            Mistake(
                f"the log_softmax normalises over dim={axis}, an axis counted from the front: that is the "
                "vocabulary only for logits of one rank, and a batch, a group or the token axis for the others; "
                "the vocabulary is always the last axis: torch.log_softmax(logits, dim=-1)",
                fixed_axis(axis),
            )
            for axis in (0, 1, 2)
        ),
        Mistake("you gathered raw logits; normalise them first with torch.log_softmax(logits, dim=-1)", raw_logits),
        *(
            Mistake(
                "you shifted logits and tokens by one position, as in next-token training; here "
                "logits[..., t, :] is already the distribution of tokens[..., t]: gather without a shift",
                shifted(pad),
            )
            for pad in (None, "cat", "pad")
        ),
        Mistake(
            "you gathered each token from the logits of the next position; logits[..., t, :] is "
            "the distribution of tokens[..., t]: use the same position t",
            next_position,
        ),
        Mistake(
            "you normalised after the gather: log_softmax of the picked logits compares the T tokens with each "
            "other; normalise each position over the vocabulary first, torch.log_softmax(logits, dim=-1), "
            "then gather the tokens' entries",
            normalised_after_gather,
        ),
        *GATHER_MISTAKES_MORE,
    ]
    return check_against_reference(
        fn, gather_log_probs, cases, name="gather_log_probs", mistakes=mistakes, check_dtype=True
    )


def check_reinforce_loss(fn) -> bool:
    """Check a student's ``reinforce_loss(logp, deltas, mask=None)``, gradients included."""
    g = torch.Generator().manual_seed(1)

    def logp_of(*shape):
        # Negative numbers, like real log-probs.
        return -torch.rand(*shape, generator=g, dtype=torch.float64) * 3.0

    def deltas_of(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    ragged = torch.tensor([[[1, 1, 1, 1], [1, 1, 0, 0]], [[1, 0, 0, 0], [1, 1, 1, 0]]])
    with_empty = torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 0, 0]])
    padded_logp = logp_of(3, 4)
    padded_logp[with_empty == 0] = -50.0  # garbage in the padding
    grad = ("logp", "deltas")
    cases = [
        Case(
            "one response of T=4 tokens, deltas a scalar, no mask",
            {"logp": logp_of(4), "deltas": torch.tensor(1.5)},
            grad,
        ),
        Case(
            "B=3 responses of T=3 tokens (B == T: deltas[b] must weight row b)",
            {"logp": logp_of(3, 3), "deltas": deltas_of(3)},
            grad,
        ),
        Case("B=3 responses of T=5 tokens, no mask", {"logp": logp_of(3, 5), "deltas": deltas_of(3)}, grad),
        Case(
            "B=2 prompts, G=2 responses of lengths 4, 2, 1, 3 (padded to T=4)",
            {"logp": logp_of(2, 2, 4), "deltas": deltas_of(2, 2), "mask": ragged},
            grad,
        ),
        Case(
            "a bool mask, lengths 3, 0 (an empty response) and 2, padding holds -50",
            {"logp": padded_logp, "deltas": deltas_of(3), "mask": with_empty.bool()},
            grad,
        ),
        Case(
            "every token is padding: the loss is 0",
            {"logp": logp_of(2, 3), "deltas": deltas_of(2), "mask": torch.zeros(2, 3)},
            grad,
        ),
    ]
    # Drawn after the cases above, so that their values stay as they were.
    nan_mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 0, 0]])
    nan, inf = float("nan"), float("inf")
    junk = torch.tensor([[nan, nan, nan, nan], [-inf, nan, -inf, nan], [nan, nan, -inf, nan]], dtype=torch.float64)
    nan_padded_logp = torch.where(nan_mask.bool(), logp_of(3, 4), junk)  # NaN and -inf in the padding only
    cases.append(
        Case(
            "lengths 3, 1 and 2, padding holds NaN and -inf (a padded log-prob may be anything; it must change "
            "neither the loss nor its gradient)",
            {"logp": nan_padded_logp, "deltas": deltas_of(3), "mask": nan_mask},
            grad,
        )
    )
    more_axes = {"logp": logp_of(2, 3, 4), "deltas": deltas_of(2, 3)}  # drawn last: the values above stay
    cases.append(Case("B=2 prompts, G=3 responses of T=4 tokens, no mask", more_axes, grad))

    def multiplied(logp, deltas, mask=None):
        per_token = -(deltas.detach()[..., None] * logp)
        if mask is None:
            return per_token.mean()
        mask = mask.to(per_token.dtype)
        return (per_token * mask).sum() / mask.sum().clamp(min=1)

    def attached(logp, deltas, mask=None):
        logp = logp if mask is None else _valid_only(logp, mask)  # first, so no NaN reaches deltas' gradient
        per_token = -(deltas[..., None] * logp)
        return _masked_token_mean(per_token, mask)

    def no_minus(logp, deltas, mask=None):
        return _masked_token_mean(deltas.detach()[..., None] * logp, mask)

    def summed(logp, deltas, mask=None):
        per_token = -(deltas.detach()[..., None] * logp)
        return per_token.sum() if mask is None else _valid_only(per_token, mask).sum()

    def unmasked(logp, deltas, mask=None):
        return (-(deltas.detach()[..., None] * logp)).mean()

    def all_tokens(logp, deltas, mask=None):
        per_token = -(deltas.detach()[..., None] * logp)
        return per_token.mean() if mask is None else _valid_only(per_token, mask).mean()

    def seq_mean(logp, deltas, mask=None):
        per_token = -(deltas.detach()[..., None] * logp)
        if mask is None:
            return per_token.mean()
        return (_valid_only(per_token, mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()

    def nan_when_empty(logp, deltas, mask=None):
        per_token = -(deltas.detach()[..., None] * logp)
        return per_token.mean() if mask is None else _valid_only(per_token, mask).sum() / mask.sum()

    def wrong_broadcast(logp, deltas, mask=None):
        return _masked_token_mean(-(deltas.detach() * logp), mask)

    def token_position(index):
        def wrong(logp, deltas, mask=None):
            return (-(deltas.detach() * logp[..., index])).mean()

        return wrong

    def sequence_sum(logp, deltas, mask=None):
        valid = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
        return (-(deltas.detach() * torch.where(valid > 0, logp, torch.zeros_like(logp)).sum(-1))).mean()

    def probabilities(logp, deltas, mask=None):
        return _masked_token_mean(-(deltas.detach()[..., None] * logp.exp()), mask)

    def inverted_mask(logp, deltas, mask=None):
        return _masked_token_mean(
            -(deltas.detach()[..., None] * logp), None if mask is None else 1 - mask.to(logp.dtype)
        )

    def indexed_by_mask_as_given(logp, deltas, mask=None):
        # an integer tensor used as an index picks positions (rows 0 and 1), not the entries where it is 1
        per_token = -(deltas.detach()[..., None] * logp)
        if mask is None:
            return per_token.mean()
        return per_token[mask].sum() / mask.sum().clamp(min=1)

    def indexed_by_mask_as_given_mean(logp, deltas, mask=None):
        # the same index, averaged over what it picked
        per_token = -(deltas.detach()[..., None] * logp)
        picked = per_token if mask is None else per_token[mask]
        return picked.sum() / max(picked.numel(), 1)

    def mean_delta(logp, deltas, mask=None):
        return _masked_token_mean(-(deltas.detach().mean() * logp), mask)

    mistakes = [
        Mistake(
            "per_token[mask] with a 0/1 integer mask picks rows 0 and 1 (an integer tensor indexes by position), "
            "not the valid tokens; select with a bool mask, per_token[mask.bool()]",
            indexed_by_mask_as_given,
        ),
        Mistake(
            "per_token[mask] with a 0/1 integer mask picks rows 0 and 1 (an integer tensor indexes by position), "
            "not the valid tokens; select with a bool mask, per_token[mask.bool()]",
            indexed_by_mask_as_given_mean,
        ),
        Mistake(
            "only the first token of each response is used; every valid token t carries -deltas * logp[..., t], "
            "averaged over all valid tokens",
            token_position(0),
        ),
        Mistake(
            "only the last token of each response is used; every valid token t carries -deltas * logp[..., t], "
            "averaged over all valid tokens",
            token_position(-1),
        ),
        Mistake(
            "you summed each response's log-probs and averaged over responses; reinforce_loss averages "
            "-deltas * logp over all valid tokens of the batch at once",
            sequence_sum,
        ),
        Mistake(
            "you weighted the probabilities exp(logp); REINFORCE weights the log-probabilities: -(deltas * logp)",
            probabilities,
        ),
        Mistake("the mask is inverted: 1 (True) marks a real token, 0 the padding", inverted_mask),
        Mistake(
            "every token is weighted by the mean of deltas; each response has its own weight: deltas[..., None] * logp",
            mean_delta,
        ),
        Mistake("a gradient flows into deltas: they are constant weights; use deltas.detach()", attached),
        Mistake(
            "the sign is flipped: the loss is -(deltas * logp), so that gradient descent on the loss "
            "is gradient ascent on the expected reward",
            no_minus,
        ),
        Mistake(
            "you summed over tokens; average over the valid tokens instead "
            "(torch.where(mask.bool(), loss, 0).sum() / mask.sum())",
            summed,
        ),
        Mistake(
            "padding is not masked: select the valid tokens (torch.where(mask.bool(), loss, 0)) before you average",
            unmasked,
        ),
        Mistake(
            "the padding is multiplied by 0, and a padded log-prob of NaN or -inf times 0 is NaN: select the valid "
            "tokens with torch.where(mask.bool(), per_token, 0) (or per_token[mask.bool()]) instead",
            multiplied,
        ),
        Mistake(
            "you averaged over all tokens, padding included; divide by the number of valid tokens, "
            "mask.sum(), not by mask.numel()",
            all_tokens,
        ),
        Mistake(
            "you averaged each response first, then across responses; reinforce_loss averages over "
            "all valid tokens of the batch at once",
            seq_mean,
        ),
        Mistake(
            "a batch with no valid token gives NaN (0 / 0); it contributes nothing: divide by mask.sum().clamp(min=1)",
            nan_when_empty,
        ),
        Mistake(
            "deltas broadcast along the token axis: deltas[b] must weight every token of row b; "
            "use deltas[..., None] * logp",
            wrong_broadcast,
        ),
        *REINFORCE_MISTAKES_MORE,
    ]
    return check_against_reference(
        fn, reinforce_loss, cases, name="reinforce_loss", mistakes=mistakes, check_dtype=True
    )


def _masked_token_mean(per_token: torch.Tensor, mask) -> torch.Tensor:
    """Mean over valid tokens, for the mistakes above (mask may be None)."""
    if mask is None:
        return per_token.mean()
    return _valid_only(per_token, mask).sum() / mask.sum().clamp(min=1)


def _valid_only(per_token: torch.Tensor, mask) -> torch.Tensor:
    """The padding selected away (torch.where, as the reference): each mistake above makes its one slip, and a NaN
    in the padding stays out of it, so a student who selects the padding away as asked is named for that slip."""
    return torch.where(mask.bool(), per_token, torch.zeros_like(per_token))
