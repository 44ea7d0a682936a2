"""More wrong ``gather_log_probs`` and ``reinforce_loss`` of chapter 02, which :mod:`course_lib.checks.policy_gradient`
names: what students wrote after the first catalogues (round seven of issue 44), each a function with the
reference's signature that makes one slip and is right otherwise.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_lib.checks import Mistake


def _picked(logp_all: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return logp_all.gather(-1, tokens.long()[..., None]).squeeze(-1)  # (..., T)


# ---------------------------------------------------------------------------
# gather_log_probs(logits[..., T, V], tokens[..., T]) -> [..., T]
# ---------------------------------------------------------------------------


def _cross_entropy(reduction: str):
    def wrong(logits, tokens):
        V = logits.shape[-1]
        return -F.cross_entropy(logits.reshape(-1, V), tokens.reshape(-1).long(), reduction=reduction)

    return wrong


def _floored(eps: float, how: str):
    def wrong(logits, tokens):
        probs = _picked(torch.softmax(logits, -1), tokens)
        return torch.log(probs.clamp(min=eps) if how == "clamp" else probs + eps)

    return wrong


def _tempered(temperature: float):
    def wrong(logits, tokens):
        return _picked(torch.log_softmax(logits / temperature, -1), tokens)

    return wrong


_FLOOR = (
    "log(softmax(...)) kept away from 0 (+ eps or clamp(min=eps), here eps = {eps:g}) is wrong for unlikely tokens: "
    "a token far below the best one has a log-prob far below log(eps); use torch.log_softmax, which is exact there"
)


def _normaliser_detached(logits, tokens):
    """log_softmax written out with its log-sum-exp taken from detached logits: right values, half a gradient."""
    return _picked(logits, tokens) - torch.logsumexp(logits.detach(), dim=-1)


GATHER_MISTAKES_MORE = [
    Mistake(
        "the normaliser (the log-sum-exp) is computed from detached logits: the values are right, but the gradient "
        "misses its -softmax part, so no logit but the taken token's gets any; use torch.log_softmax(logits, -1)",
        _normaliser_detached,
    ),
    Mistake(
        "your output keeps the gathered axis of 1, shape [..., T, 1]: .squeeze(-1) after the gather gives [..., T]",
        lambda logits, tokens: torch.log_softmax(logits, -1).gather(-1, tokens.long()[..., None]),
    ),
    Mistake(
        "you squeezed every axis of 1 (.squeeze() with no axis), so a single token (T = 1) or a batch of one "
        "loses its axis too: squeeze only the gathered one, .squeeze(-1)",
        lambda logits, tokens: torch.log_softmax(logits, -1).gather(-1, tokens.long()[..., None]).squeeze(),
    ),
    Mistake(
        "you took the largest log-prob of each position (.max(-1)), whatever token was taken: gather the entry "
        "of tokens[..., t] itself",
        lambda logits, tokens: torch.log_softmax(logits, -1).max(-1).values,
    ),
    Mistake(
        "you subtracted the max logit but not the log-sum-exp: logits - max is the first step of a stable "
        "log_softmax, not a log-probability; use torch.log_softmax(logits, dim=-1)",
        lambda logits, tokens: _picked(logits - logits.max(-1, keepdim=True).values, tokens),
    ),
    Mistake(
        "F.cross_entropy averages every token into one number by default (reduction='mean'); pass "
        "reduction='none', negate, and reshape to tokens.shape",
        _cross_entropy("mean"),
    ),
    Mistake(
        "F.cross_entropy with reduction='sum' adds every token into one number; pass reduction='none', negate, "
        "and reshape to tokens.shape",
        _cross_entropy("sum"),
    ),
    Mistake(
        "you averaged the one-hot product over the vocabulary (.mean(-1)), which divides by V: sum it, "
        "(one_hot * log_softmax).sum(-1), or gather",
        lambda logits, tokens: (
            F.one_hot(tokens.long(), logits.shape[-1]).to(logits.dtype) * torch.log_softmax(logits, -1)
        ).mean(-1),
    ),
    *(
        Mistake(_FLOOR.format(eps=eps), _floored(eps, how))
        for eps in [10.0**-k for k in range(4, 46) if k != 8]
        for how in ("clamp", "plus")
    ),
    *(
        Mistake(
            f"you divided the logits by a temperature ({temperature:g}): a sampling setting, not part of the "
            "policy's log-probs; use the logits as they are",
            _tempered(temperature),
        )
        for temperature in (0.5, 0.6, 0.7, 0.8, 0.9, 1.1, 1.2, 1.5, 2.0)
    ),
]


# ---------------------------------------------------------------------------
# reinforce_loss(logp[..., T], deltas[...], mask[..., T] | None) -> scalar
# ---------------------------------------------------------------------------


def _token_mean(logp, weights, mask):
    """-(weights[..., None] * logp) averaged over the valid tokens, padding selected away (the reference's way)."""
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    per_token = -(weights.detach()[..., None] * torch.where(valid, logp, torch.zeros_like(logp)))
    return per_token.sum() / valid.sum().clamp(min=1)


def _normalised_deltas(eps: float, guard: bool):
    def wrong(logp, deltas, mask=None):
        if guard and deltas.numel() < 2:
            return _token_mean(logp, deltas, mask)
        centred = deltas - deltas.mean()
        std = ((centred**2).sum() / (deltas.numel() - 1)).sqrt()  # torch.std, without its warning for one entry
        return _token_mean(logp, centred / (std + eps), mask)

    return wrong


def _row_sums_over_count(logp, deltas, mask=None):
    """Each response's summed loss divided by the batch's valid-token count, then averaged over the responses."""
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    per_token = -(deltas.detach()[..., None] * torch.where(valid, logp, torch.zeros_like(logp)))
    return (per_token.sum(-1) / valid.sum().clamp(min=1)).mean()


def _centred_deltas(logp, deltas, mask=None):
    return _token_mean(logp, deltas - deltas.mean(), mask)


def _sum_of_row_means(logp, deltas, mask=None):
    """Each response's token mean, summed over the responses (not averaged, and not a token mean)."""
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    per_token = -(deltas.detach()[..., None] * torch.where(valid, logp, torch.zeros_like(logp)))
    return (per_token.sum(-1) / valid.sum(-1).clamp(min=1)).sum()


def _over_length(logp, deltas, mask=None):
    """The masked sum divided by T, the padded length, once: neither the token count nor a per-row mean."""
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    per_token = -(deltas.detach()[..., None] * torch.where(valid, logp, torch.zeros_like(logp)))
    return per_token.sum() / logp.shape[-1]


def _detach_swapped(logp, deltas, mask=None):
    """logp detached and deltas left attached: the gradient reaches the weights and not the policy."""
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    per_token = -(deltas[..., None] * torch.where(valid, logp, torch.zeros_like(logp)).detach())
    return per_token.sum() / valid.sum().clamp(min=1)


REINFORCE_MISTAKES_MORE = [
    Mistake(
        "you detached logp and left deltas attached: the gradient must flow through logp (the policy's "
        "log-probs), and deltas are the constants: -(deltas.detach()[..., None] * logp)",
        _detach_swapped,
    ),
    Mistake(
        "you divided the summed loss by T, the padded length, once; the token mean divides by the number of "
        "valid tokens of the whole batch, mask.sum() (B * T without a mask)",
        _over_length,
    ),
    Mistake(
        "you subtracted the mean of the deltas inside the loss (a baseline); reinforce_loss weights each "
        "response by its deltas as given: baselines are compute_deltas' job",
        _centred_deltas,
    ),
    Mistake(
        "you averaged each response over its tokens and summed over the responses; reinforce_loss averages "
        "-deltas * logp over all valid tokens of the batch at once",
        _sum_of_row_means,
    ),
    *(
        Mistake(
            "you normalised the deltas inside the loss (minus their mean, over their std); reinforce_loss weights "
            "each response by its deltas as given: baselines and normalisation are compute_deltas' job",
            _normalised_deltas(eps, guard),
        )
        for eps in (1e-8, 1e-6, 1e-5, 0.0)
        for guard in (True, False)
    ),
    Mistake(
        "you weighted by |deltas|; a negative delta (worse than the baseline) must push its response's "
        "log-probs down: weight by deltas itself",
        lambda logp, deltas, mask=None: _token_mean(logp, deltas.abs(), mask),
    ),
    Mistake(
        "the deltas are missing: that is the negative log-likelihood, -mean(logp); REINFORCE weights each "
        "token by its response's delta, -(deltas[..., None] * logp)",
        lambda logp, deltas, mask=None: _token_mean(logp, torch.ones_like(deltas), mask),
    ),
    Mistake(
        "you divided each response's sum by the number of valid tokens of the whole batch and then averaged "
        "over the responses: that divides by the number of responses once too often; sum over everything, then "
        "divide by mask.sum()",
        _row_sums_over_count,
    ),
]
