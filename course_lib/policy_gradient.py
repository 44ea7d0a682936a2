"""Policy gradient: log-probs of the tokens taken and the REINFORCE loss.

Williams 1992, "Simple Statistical Gradient-Following Algorithms for Connectionist
Reinforcement Learning" (REINFORCE). The log-derivative trick turns the gradient
of the expected reward into an expectation we can sample:

    grad J(theta) = grad E_{y ~ pi_theta}[R(y)]
                  = E_{y ~ pi_theta}[ R(y) * grad log pi_theta(y) ]
                  = E_{y ~ pi_theta}[ R(y) * sum_t grad log pi_theta(y_t | y_<t) ].

A language model gives ``logits[..., t, :]``, the scores of the token at position
``t``; :func:`gather_log_probs` picks ``log pi(y_t | y_<t)`` out of them. The
REINFORCE loss is a surrogate whose gradient is the estimate above: the weights
(``deltas``: the reward, or the reward minus a baseline, see ``baselines``) are
constants, and the minus sign turns gradient *ascent* on J into the gradient
*descent* an optimiser performs.

:func:`expected_reward_gradient` gives the exact gradient for a one-step
categorical policy, so chapter 02 can check a Monte-Carlo estimate against it.
"""

from __future__ import annotations

import torch

from course_lib import _validate
from course_lib.checks import Case, Mistake, check_against_reference

_INTEGER_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def gather_log_probs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Log-probability of each token taken: ``log pi(tokens[..., t] | logits[..., t, :])``.

    ``logits[..., t, :]`` is the distribution of ``tokens[..., t]`` itself: the
    caller has already dropped the last position of the model's output (and the
    prompt), as every trainer does before it calls this. No shift happens here.

    Args:
        logits: ``[..., T, V]`` unnormalised scores over the vocabulary.
        tokens: ``[..., T]`` integer token ids in ``[0, V)``.

    Returns:
        ``[..., T]`` log pi of every token taken (differentiable in ``logits``).
    """
    _validate.require_tensor("logits", logits, min_dim=2)
    _validate.require_tensor("tokens", tokens, floating=False)
    if tokens.dtype not in _INTEGER_DTYPES:
        raise ValueError(f"tokens: expected an integer tensor of token ids, got dtype {tokens.dtype}")
    _validate.require_shape("tokens", tokens, logits.shape[:-1], like="logits without its last (V) axis")
    V = logits.shape[-1]
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= V):
        raise ValueError(f"tokens: expected ids in [0, {V}) for a vocabulary of V={V}, "
                         f"got ids from {int(tokens.min())} to {int(tokens.max())}")

    # log_softmax, not log(softmax): it subtracts the log-sum-exp in one step, so a
    # token far below the best one gets a large negative number, never log(0) = -inf.
    logp_all = torch.log_softmax(logits, dim=-1)  # (..., T, V)
    # Pick the entry of the token taken at every position.
    logp = logp_all.gather(-1, tokens.long().unsqueeze(-1))  # (..., T, 1)
    return logp.squeeze(-1)  # (..., T)


def reinforce_loss(logp: torch.Tensor, deltas: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The REINFORCE loss ``-(deltas * logp)``, averaged over the valid tokens.

    Every token of a response shares its response's weight ``deltas``. The
    average is over all valid tokens of the batch at once (a "token mean"; the
    ``grpo`` chapter compares it with the other ways to aggregate).

    Args:
        logp: ``[..., T]`` log pi of the tokens taken (carries the gradient).
        deltas: ``[...]`` one weight per response: its reward, or reward minus a
            baseline. A constant: no gradient flows into it.
        mask: ``[..., T]`` 1 (or True) for real tokens, 0 for padding; ``None``
            means every token is valid. Padding never changes the result.

    Returns:
        A scalar. A batch with no valid token gives 0 (not NaN).
    """
    _validate.require_tensor("logp", logp, min_dim=1)
    _validate.require_same_shape("deltas", deltas, "logp without its last (T) axis", logp[..., 0])
    # The weights are constants of the estimator: the reward does not depend on theta.
    deltas = deltas.detach()
    per_token = -(deltas.unsqueeze(-1) * logp)  # (..., T)
    if mask is None:
        return per_token.mean()
    valid = _validate.require_mask("mask", mask, "logp", logp) > 0  # (..., T)
    # torch.where, not a product: padding may hold -inf or NaN, and 0 * NaN is NaN.
    total = torch.where(valid, per_token, torch.zeros_like(per_token)).sum()
    return total / valid.sum().clamp(min=1)


def expected_reward_gradient(logits: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
    """Exact gradient of ``J = sum_a softmax(logits)_a * rewards_a`` with respect to the logits.

    For a one-step categorical policy ``pi = softmax(logits)`` the log-derivative
    trick can be summed instead of sampled:
    ``dJ/dlogits_j = sum_a pi_a * r_a * (1[a = j] - pi_j) = pi_j * (r_j - sum_a pi_a r_a)``.
    A Monte-Carlo REINFORCE estimate should approach this as the samples grow.

    Args:
        logits: ``[..., V]`` the policy's scores over ``V`` actions.
        rewards: ``[..., V]`` the reward of every action.

    Returns:
        ``[..., V]`` the gradient of the expected reward.
    """
    _validate.require_tensor("logits", logits, min_dim=1)
    _validate.require_same_shape("rewards", rewards, "logits", logits)
    pi = torch.softmax(logits, dim=-1)  # (..., V)
    expected_reward = (pi * rewards).sum(-1, keepdim=True)  # (..., 1)
    return pi * (rewards - expected_reward)  # (..., V)


# ---------------------------------------------------------------------------
# Exercise checks
# ---------------------------------------------------------------------------


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
        Case("logits 1000 apart: log(softmax) underflows to -inf, log_softmax does not",
             {"logits": far, "tokens": torch.tensor([0, 2])}, grad=("logits",)),
    ]

    def softmax_probs(logits, tokens):
        return torch.softmax(logits, -1).gather(-1, tokens.long()[..., None]).squeeze(-1)

    def log_of_softmax(logits, tokens):
        return torch.log(torch.softmax(logits, -1)).gather(-1, tokens.long()[..., None]).squeeze(-1)

    def wrong_axis(logits, tokens):
        return torch.log_softmax(logits, -2).gather(-1, tokens.long()[..., None]).squeeze(-1)

    def raw_logits(logits, tokens):
        return logits.gather(-1, tokens.long()[..., None]).squeeze(-1)

    def shifted(logits, tokens):
        logp_all = torch.log_softmax(logits, -1)[..., :-1, :]
        return logp_all.gather(-1, tokens.long()[..., 1:, None]).squeeze(-1)

    def next_position(logits, tokens):
        logp_all = torch.log_softmax(logits, -1)
        # Position t reads position t + 1; the last position, having no next one, reads itself.
        logp_all = torch.cat([logp_all[..., 1:, :], logp_all[..., -1:, :]], dim=-2)
        return logp_all.gather(-1, tokens.long()[..., None]).squeeze(-1)

    mistakes = [
        Mistake("these are probabilities, not log-probabilities: use torch.log_softmax(logits, dim=-1), "
                "not torch.softmax", softmax_probs),
        Mistake("log(softmax(...)) underflows to -inf for very unlikely tokens: use torch.log_softmax, "
                "which is exact there", log_of_softmax),
        Mistake("the log_softmax normalises over the wrong axis (the token axis T); normalise over the "
                "vocabulary, the last axis: torch.log_softmax(logits, dim=-1)", wrong_axis),
        Mistake("you gathered raw logits; normalise them first with torch.log_softmax(logits, dim=-1)",
                raw_logits),
        Mistake("you shifted logits and tokens by one position, as in next-token training; here "
                "logits[..., t, :] is already the distribution of tokens[..., t]: gather without a shift",
                shifted),
        Mistake("you gathered each token from the logits of the next position; logits[..., t, :] is "
                "the distribution of tokens[..., t]: use the same position t", next_position),
    ]
    return check_against_reference(fn, gather_log_probs, cases, name="gather_log_probs", mistakes=mistakes)


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
        Case("one response of T=4 tokens, deltas a scalar, no mask",
             {"logp": logp_of(4), "deltas": torch.tensor(1.5)}, grad),
        Case("B=3 responses of T=3 tokens (B == T: deltas[b] must weight row b)",
             {"logp": logp_of(3, 3), "deltas": deltas_of(3)}, grad),
        Case("B=3 responses of T=5 tokens, no mask", {"logp": logp_of(3, 5), "deltas": deltas_of(3)}, grad),
        Case("B=2 prompts, G=2 responses of lengths 4, 2, 1, 3 (padded to T=4)",
             {"logp": logp_of(2, 2, 4), "deltas": deltas_of(2, 2), "mask": ragged}, grad),
        Case("a bool mask, lengths 3, 0 (an empty response) and 2, padding holds -50",
             {"logp": padded_logp, "deltas": deltas_of(3), "mask": with_empty.bool()}, grad),
        Case("every token is padding: the loss is 0",
             {"logp": logp_of(2, 3), "deltas": deltas_of(2), "mask": torch.zeros(2, 3)}, grad),
    ]

    def attached(logp, deltas, mask=None):
        per_token = -(deltas[..., None] * logp)
        return _masked_token_mean(per_token, mask)

    def no_minus(logp, deltas, mask=None):
        return _masked_token_mean(deltas.detach()[..., None] * logp, mask)

    def summed(logp, deltas, mask=None):
        per_token = -(deltas.detach()[..., None] * logp)
        return per_token.sum() if mask is None else (per_token * mask).sum()

    def unmasked(logp, deltas, mask=None):
        return (-(deltas.detach()[..., None] * logp)).mean()

    def all_tokens(logp, deltas, mask=None):
        per_token = -(deltas.detach()[..., None] * logp)
        return per_token.mean() if mask is None else (per_token * mask).mean()

    def seq_mean(logp, deltas, mask=None):
        per_token = -(deltas.detach()[..., None] * logp)
        if mask is None:
            return per_token.mean()
        return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()

    def nan_when_empty(logp, deltas, mask=None):
        per_token = -(deltas.detach()[..., None] * logp)
        return per_token.mean() if mask is None else (per_token * mask).sum() / mask.sum()

    def wrong_broadcast(logp, deltas, mask=None):
        return _masked_token_mean(-(deltas.detach() * logp), mask)

    mistakes = [
        Mistake("a gradient flows into deltas: they are constant weights; use deltas.detach()", attached),
        Mistake("the sign is flipped: the loss is -(deltas * logp), so that gradient descent on the loss "
                "is gradient ascent on the expected reward", no_minus),
        Mistake("you summed over tokens; average over the valid tokens instead "
                "((loss * mask).sum() / mask.sum())", summed),
        Mistake("padding is not masked: multiply by mask (or select with it) before you average", unmasked),
        Mistake("you averaged over all tokens, padding included; divide by the number of valid tokens, "
                "mask.sum(), not by mask.numel()", all_tokens),
        Mistake("you averaged each response first, then across responses; reinforce_loss averages over "
                "all valid tokens of the batch at once", seq_mean),
        Mistake("a batch with no valid token gives NaN (0 / 0); it contributes nothing: divide by "
                "mask.sum().clamp(min=1)", nan_when_empty),
        Mistake("deltas broadcast along the token axis: deltas[b] must weight every token of row b; "
                "use deltas[..., None] * logp", wrong_broadcast),
    ]
    return check_against_reference(fn, reinforce_loss, cases, name="reinforce_loss", mistakes=mistakes)


def _masked_token_mean(per_token: torch.Tensor, mask) -> torch.Tensor:
    """Mean over valid tokens, for the mistakes above (mask may be None)."""
    if mask is None:
        return per_token.mean()
    mask = mask.to(per_token.dtype)
    return (per_token * mask).sum() / mask.sum().clamp(min=1)
