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
from course_lib.masked import masked_mean

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
    _check_gather_log_probs(logits, tokens)

    # log_softmax, not log(softmax): it subtracts the log-sum-exp in one step, so a
    # token far below the best one gets a large negative number, never log(0) = -inf.
    logp_all = torch.log_softmax(logits, dim=-1)  # (..., T, V)
    # Pick the entry of the token taken at every position.
    logp = logp_all.gather(-1, tokens.long().unsqueeze(-1))  # (..., T, 1)
    return logp.squeeze(-1)  # (..., T)


def reinforce_loss(
    logp: torch.Tensor,
    deltas: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
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
    _check_reinforce_loss(logp, deltas, mask)
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()  # (..., T)

    # Padding may hold anything (a -inf or NaN log-prob): zero it before it reaches the loss or its gradient.
    logp = torch.where(valid, logp, torch.zeros_like(logp))
    # The weights are constants (the reward does not depend on theta), one per response: adv is (..., 1).
    adv = deltas.detach()[..., None]
    per_token = -(adv * logp)  # (..., T)
    return masked_mean(per_token, valid)


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
# Argument checks: a public function's first line calls its own
# ---------------------------------------------------------------------------


def _check_gather_log_probs(logits, tokens) -> None:
    _validate.require_tensor("logits", logits, min_dim=2)
    _validate.require_tensor("tokens", tokens, floating=False)
    if tokens.dtype not in _INTEGER_DTYPES:
        raise ValueError(f"tokens: expected an integer tensor of token ids, got dtype {tokens.dtype}")
    _validate.require_shape("tokens", tokens, logits.shape[:-1], like="logits without its last (V) axis")
    V = logits.shape[-1]
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= V):
        raise ValueError(
            f"tokens: expected ids in [0, {V}) for a vocabulary of V={V}, "
            f"got ids from {int(tokens.min())} to {int(tokens.max())}"
        )


def _check_reinforce_loss(logp, deltas, mask) -> None:
    _validate.require_tensor("logp", logp, min_dim=1)
    _validate.require_same_shape("deltas", deltas, "logp without its last (T) axis", logp[..., 0])
    if mask is not None:
        _validate.require_mask("mask", mask, "logp", logp)
