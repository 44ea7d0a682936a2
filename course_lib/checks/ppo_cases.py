"""The cases of chapter 05's checks: seeded log-probs, advantages, values and masks, built to reach every branch
of the PPO loss (ratios beyond the clip range on both sides, advantages of both signs, padding that holds -inf or
NaN). The checks themselves, and their messages, are in :mod:`course_lib.checks.ppo`."""

from __future__ import annotations

import torch

from course_lib.checks import Case


def policy_case(description, seed, shape, *, spread=1.0, clip_eps=0.2, same=False, mask_p=None, **extra):
    """Seeded log-probs (negative, as log-probs are), advantages of both signs, an optional uneven mask."""
    g = torch.Generator().manual_seed(seed)
    logp_old = -torch.rand(shape, generator=g, dtype=torch.float64) * 3.0 - 0.05
    logp = logp_old.clone() if same else logp_old + spread * torch.randn(shape, generator=g, dtype=torch.float64)
    adv = 1.5 * torch.randn(shape, generator=g, dtype=torch.float64)  # some beyond 1 + clip_eps
    kwargs = dict(logp=logp, logp_old=logp_old, adv=adv, clip_eps=clip_eps, **extra)
    if mask_p is not None:
        mask = torch.rand(shape, generator=g) < mask_p
        mask.view(-1)[0] = True  # at least one valid entry
        kwargs["mask"] = mask
    return Case(description, kwargs, grad=("logp", "logp_old", "adv"))


def padded_case(case: Case, fill: float, description: str) -> Case:
    """``case`` with ``fill`` (-inf, NaN) in its log-probs wherever the mask says padding: padding may hold
    anything, and must change neither the loss nor its gradient (``x * mask`` is NaN where x is -inf)."""
    kwargs = dict(case.kwargs)
    padding = ~kwargs["mask"].bool()
    for key in ("logp", "logp_old"):
        kwargs[key] = kwargs[key].masked_fill(padding, fill)
    return Case(description, kwargs, grad=case.grad)


def value_case(description, seed, shape, *, clip_eps=None, mask_p=None):
    """Seeded returns, old values near them and new values near those; clipping and an uneven mask optional."""
    g = torch.Generator().manual_seed(seed)
    returns = torch.randn(shape, generator=g, dtype=torch.float64)
    values_old = returns + 0.5 * torch.randn(shape, generator=g, dtype=torch.float64)
    values = values_old + 0.4 * torch.randn(shape, generator=g, dtype=torch.float64)
    kwargs = dict(values=values, returns=returns)
    grad = ("values", "returns")
    if clip_eps is not None:
        kwargs.update(values_old=values_old, clip_eps=clip_eps)
        grad += ("values_old",)
    if mask_p is not None:
        mask = torch.rand(shape, generator=g) < mask_p
        mask.view(-1)[0] = True
        kwargs["mask"] = mask
    return Case(description, kwargs, grad=grad)


def padded_value_case(seed: int, shape: tuple[int, ...]) -> Case:
    """A masked value case whose padding holds inf in ``values`` and NaN in ``returns``: the exercise says the mask
    works as in the clipped surrogate's, where padding may hold anything (``x * mask`` is NaN where x is inf). An
    edge promise (``last``): told once every other case is right."""
    case = value_case("", seed, shape, mask_p=0.6)
    kwargs = dict(case.kwargs)
    padding = ~kwargs["mask"]
    kwargs["values"] = kwargs["values"].masked_fill(padding, float("inf"))
    kwargs["returns"] = kwargs["returns"].masked_fill(padding, float("nan"))
    description = (
        "padding whose values are inf and returns NaN (the mask says so): it changes nothing, gradients included"
    )
    return Case(description, kwargs, grad=case.grad, last=True)
