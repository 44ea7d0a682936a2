"""The exercise checks of chapter 05 (PPO): edge cases and classic mistakes.

They sit in their own file so that ``course_lib/ppo.py`` reads as the algorithm
alone; ``course_lib.ppo`` re-exports every ``check_*`` so students call
``course_lib.checks.ppo.check_clipped_surrogate_loss(fn)`` as everywhere else.
"""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference
from course_lib.ppo import PPOLoss, clipped_surrogate, clipped_surrogate_loss, value_loss

def _policy_case(description, seed, shape, *, spread=1.0, clip_eps=0.2, same=False, mask_p=None, **extra):
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


def _surrogate(ratio_fn=None, objective=None, clip_eps_high_used=True, attached=None):
    """Build a wrong clipped surrogate: a different ratio or objective, or a constant left attached."""
    def per_element(logp, logp_old, adv, clip_eps, clip_eps_high=None):
        high = clip_eps if (clip_eps_high is None or not clip_eps_high_used) else clip_eps_high
        logp_old = logp_old if attached == "logp_old" else logp_old.detach()
        adv = adv if attached == "adv" else adv.detach()
        ratio = (ratio_fn or (lambda a, b: torch.exp(a - b)))(logp, logp_old)
        if objective is not None:
            return objective(ratio, adv, clip_eps, high, logp - logp_old)
        return -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + high) * adv)

    return per_element


_SURROGATE_MISTAKES = [
    ("your ratio looks like logp / logp_old; use exp(logp - logp_old)", dict(ratio_fn=lambda a, b: a / b)),
    ("your ratio is inverted: it is exp(logp - logp_old), new over old", dict(ratio_fn=lambda a, b: torch.exp(b - a))),
    ("you take the max of the two objectives; PPO takes the min (the pessimistic bound) before the minus sign",
     dict(objective=lambda r, a, lo, hi, lr: -torch.maximum(r * a, torch.clamp(r, 1 - lo, 1 + hi) * a))),
    ("there is no clip: that is the plain surrogate -ratio * adv; take the min with the clipped one",
     dict(objective=lambda r, a, lo, hi, lr: -r * a)),
    ("you clipped the advantage; clip the ratio to [1 - clip_eps, 1 + clip_eps] and multiply by adv",
     dict(objective=lambda r, a, lo, hi, lr: -torch.minimum(r * a, r * torch.clamp(a, 1 - lo, 1 + hi)))),
    ("you clipped the log-ratio; clip the ratio exp(logp - logp_old) to [1 - clip_eps, 1 + clip_eps]",
     dict(objective=lambda r, a, lo, hi, lr: -torch.minimum(r * a, torch.exp(torch.clamp(lr, 1 - lo, 1 + hi)) * a))),
    ("the minus sign is missing: the loss is -min(...), since the optimiser minimises",
     dict(objective=lambda r, a, lo, hi, lr: torch.minimum(r * a, torch.clamp(r, 1 - lo, 1 + hi) * a))),
    ("gradient flows into logp_old: the old log-probs are constants, use logp_old.detach()", dict(attached="logp_old")),
    ("gradient flows into adv: the advantages are constants, use adv.detach()", dict(attached="adv")),
    ("clip_eps_high is ignored: the upper clip is 1 + clip_eps_high (it defaults to clip_eps)",
     dict(clip_eps_high_used=False)),
]


def check_clipped_surrogate(fn) -> bool:
    """Check a student's ``clipped_surrogate(logp, logp_old, adv, clip_eps, clip_eps_high=None)``."""
    cases = [
        _policy_case("ratio exactly 1 (logp == logp_old): the plain surrogate -adv", 0, (6,), same=True),
        _policy_case("ratios near 1, inside the clip range", 1, (8,), spread=0.05),
        _policy_case("ratios far outside [1 - eps, 1 + eps], advantages of both signs", 2, (4, 6), spread=1.5),
        _policy_case("a (2, 3, 5) batch, clip_eps = 0.1", 3, (2, 3, 5), spread=0.5, clip_eps=0.1),
        _policy_case("clip-higher: clip_eps = 0.2, clip_eps_high = 0.28", 4, (5, 6), spread=0.4, clip_eps_high=0.28),
        _policy_case("a scalar (0-d) entry", 5, (), spread=1.0),
    ]
    mistakes = [Mistake(message, _surrogate(**options)) for message, options in _SURROGATE_MISTAKES]
    return check_against_reference(fn, clipped_surrogate, cases, name="clipped_surrogate", mistakes=mistakes)


def _wrong_loss(per_element=None, *, ignore_mask=False, clip_fraction="outside"):
    """A wrong clipped_surrogate_loss built from a wrong per-element loss or a wrong reduction."""
    def loss_fn(logp, logp_old, adv, clip_eps, mask=None):
        per = (per_element or clipped_surrogate)(logp, logp_old, adv, clip_eps)
        valid = torch.ones_like(logp) if (mask is None or ignore_mask) else mask.to(logp.dtype)
        loss = (per * valid).sum() / valid.sum().clamp(min=1)
        ratio = torch.exp(logp - logp_old).detach()
        if clip_fraction == "binding":
            clipped = ((ratio > 1 + clip_eps) & (adv > 0)) | ((ratio < 1 - clip_eps) & (adv < 0))
        else:
            clipped = (ratio - 1).abs() > clip_eps
        n_valid = valid.sum().clamp(min=1).item()
        return loss, {"clip_fraction": (clipped.to(logp.dtype) * valid).sum().item() / n_valid}

    return loss_fn


def check_clipped_surrogate_loss(fn) -> bool:
    """Check a student's ``clipped_surrogate_loss(logp, logp_old, adv, clip_eps, mask=None)``: loss and clip_fraction."""
    cases = [
        _policy_case("ratio exactly 1 (logp == logp_old), no mask", 0, (6,), same=True),
        _policy_case("ratios far outside [1 - eps, 1 + eps], advantages of both signs", 2, (4, 6), spread=1.5),
        _policy_case("ratios near 1, an uneven mask (padding at random places)", 1, (3, 7), spread=0.1, mask_p=0.6),
        _policy_case("ratios far outside the range with an uneven mask", 3, (4, 5), spread=1.5, mask_p=0.5),
        _policy_case("a (2, 3, 4) batch, clip_eps = 0.1, mask", 4, (2, 3, 4), spread=0.5, clip_eps=0.1, mask_p=0.7),
        _policy_case("one entry", 5, (1,), spread=1.0),
    ]
    mistakes = [Mistake(message, _wrong_loss(_surrogate(**options))) for message, options in _SURROGATE_MISTAKES[:-1]]
    mistakes += [
        Mistake("the mask is ignored: average only over valid entries (sum of masked losses / number valid)",
                _wrong_loss(ignore_mask=True)),
        Mistake("clip_fraction counts only where the clip binds (TRL's definition); the course counts every valid "
                "entry with |ratio - 1| > clip_eps, whatever the sign of adv", _wrong_loss(clip_fraction="binding")),
    ]
    return check_against_reference(
        fn, clipped_surrogate_loss, cases, name="clipped_surrogate_loss", mistakes=mistakes,
        outputs=lambda result: {"loss": result[0], "clip_fraction": result[1]["clip_fraction"]})


def _value_case(description, seed, shape, *, clip_eps=None, mask_p=None):
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


def _wrong_value_loss(*, half=True, reduce=torch.maximum, detach_returns=True, detach_old=True,
                      clip_values=False, ignore_mask=False):
    def wrong(values, returns, values_old=None, clip_eps=None, mask=None):
        if detach_returns:
            returns = returns.detach()
        error = (values - returns) ** 2
        if clip_eps is not None:
            old = values_old.detach() if detach_old else values_old
            clipped = torch.clamp(values, -clip_eps, clip_eps) if clip_values else \
                old + torch.clamp(values - old, -clip_eps, clip_eps)
            error = reduce(error, (clipped - returns) ** 2)
        valid = torch.ones_like(values) if (mask is None or ignore_mask) else mask.to(values.dtype)
        return (0.5 if half else 1.0) * (error * valid).sum() / valid.sum()

    return wrong


def check_value_loss(fn) -> bool:
    """Check a student's ``value_loss(values, returns, values_old=None, clip_eps=None, mask=None)``."""
    cases = [
        _value_case("no clipping, one environment", 0, (6,)),
        _value_case("no clipping, an uneven mask", 1, (3, 5), mask_p=0.6),
        _value_case("value clipping with clip_eps = 0.2", 2, (4, 6), clip_eps=0.2),
        _value_case("value clipping with clip_eps = 0.1 and a mask", 3, (2, 3, 4), clip_eps=0.1, mask_p=0.6),
    ]
    mistakes = [
        Mistake("the factor 0.5 is missing: the course's value loss is 0.5 * (values - returns)^2 "
                "(as CleanRL; SB3 leaves it out)", _wrong_value_loss(half=False)),
        Mistake("gradient flows into returns: the targets are constants, use returns.detach()",
                _wrong_value_loss(detach_returns=False)),
        Mistake("value clipping takes the min of the two errors; PPO takes the max (the pessimistic one)",
                _wrong_value_loss(reduce=torch.minimum)),
        Mistake("gradient flows into values_old: it is a constant, use values_old.detach()",
                _wrong_value_loss(detach_old=False)),
        Mistake("clip the change values - values_old to [-clip_eps, clip_eps] and add it to values_old; "
                "do not clip the values themselves", _wrong_value_loss(clip_values=True)),
        Mistake("the mask is ignored: average only over valid entries", _wrong_value_loss(ignore_mask=True)),
    ]
    return check_against_reference(fn, value_loss, cases, name="value_loss", mistakes=mistakes)


def _ppo_loss_reference(policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy,
                        clip_epsilon=0.2, value_loss_coef=0.5, entropy_coef=0.01):
    return PPOLoss(clip_epsilon, value_loss_coef, entropy_coef)(
        policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy)


def _wrong_ppo_loss(*, sign=-1.0, half=True, policy=None):
    def wrong(policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy,
              clip_epsilon=0.2, value_loss_coef=0.5, entropy_coef=0.01):
        per = (policy or clipped_surrogate)(policy_logprobs, old_policy_logprobs, advantages, clip_epsilon)
        v_loss = (0.5 if half else 1.0) * ((values - returns.detach()) ** 2).mean()
        return per.mean() + value_loss_coef * v_loss + sign * entropy_coef * entropy.mean()

    return wrong


def check_ppo_loss(fn) -> bool:
    """Check a student's full PPO loss.

    ``fn`` is either a class like :class:`PPOLoss` (built as ``fn(clip_epsilon, value_loss_coef,
    entropy_coef)``, then called with the six tensors) or a function taking the six tensors and
    those three keyword arguments.
    """
    if isinstance(fn, type):
        cls = fn
        fn = lambda clip_epsilon, value_loss_coef, entropy_coef, **tensors: cls(  # noqa: E731
            clip_epsilon, value_loss_coef, entropy_coef)(**tensors)

    def case(description, seed, shape, spread=1.0, **coefs):
        policy = _policy_case(description, seed, shape, spread=spread).kwargs
        value = _value_case(description, seed + 100, shape).kwargs
        g = torch.Generator().manual_seed(seed + 200)
        kwargs = dict(policy_logprobs=policy["logp"], old_policy_logprobs=policy["logp_old"],
                      values=value["values"], returns=value["returns"], advantages=policy["adv"],
                      entropy=torch.rand(shape, generator=g, dtype=torch.float64) * 2.0, **coefs)
        return Case(description, kwargs, grad=tuple(k for k in kwargs if isinstance(kwargs[k], torch.Tensor)))

    cases = [
        case("default coefficients (0.2, 0.5, 0.01), ratios far outside the clip range", 0, (4, 6), spread=1.5,
             clip_epsilon=0.2, value_loss_coef=0.5, entropy_coef=0.01),
        case("coefficients clip 0.1, value 1.0, entropy 0.1", 1, (8,), spread=0.3,
             clip_epsilon=0.1, value_loss_coef=1.0, entropy_coef=0.1),
        case("a (2, 3, 4) batch, no entropy bonus", 2, (2, 3, 4), clip_epsilon=0.3, value_loss_coef=0.25,
             entropy_coef=0.0),
    ]
    mistakes = [
        Mistake("the entropy term has the wrong sign: subtract entropy_coef * mean(entropy), "
                "so that more entropy lowers the loss", _wrong_ppo_loss(sign=1.0)),
        Mistake("the value loss lacks its factor 0.5 (0.5 * (values - returns)^2)", _wrong_ppo_loss(half=False)),
    ] + [Mistake(message, _wrong_ppo_loss(policy=_surrogate(**options))) for message, options in
         _SURROGATE_MISTAKES[:-1]]
    return check_against_reference(fn, _ppo_loss_reference, cases, name="PPOLoss", mistakes=mistakes)
