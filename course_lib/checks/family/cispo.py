"""The check of chapter 11's CISPO loss (reference: ``course_lib.family.cispo_loss``)."""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference, drawing
from course_lib.checks.family.gspo import _logps
from course_lib.family import cispo_loss

F64 = torch.float64


def check_cispo_loss(fn) -> bool:
    """Check a student's ``cispo_loss(logp, logp_old, adv, clip_eps_high, clip_eps=None)``, gradients included."""
    g = torch.Generator().manual_seed(13)
    logp_old = -2.0 * torch.rand(2, 3, 4, generator=g, dtype=F64)
    logp = logp_old + 0.5 * torch.randn(2, 3, 4, generator=g, dtype=F64)  # ratios from about 0.3 to 3
    adv = torch.tensor([[1.0, -0.5, -0.5], [-1.2, 0.6, 0.6]], dtype=F64)[..., None].expand(2, 3, 4).clone()
    mixed = torch.randn(2, 3, 4, generator=g, dtype=F64)
    base = {"logp": logp, "logp_old": logp_old, "adv": adv}
    grad = ("logp", "logp_old", "adv")
    cases = [
        Case(
            "B=2, G=3, T=4, ratios from about 0.3 to 3, clip_eps_high=0.2 (weights capped at 1.2)",
            {**base, "clip_eps_high": 0.2},
            grad,
        ),
        Case(
            "a different advantage at every token, of both signs, clip_eps_high=0.28",
            {**base, "adv": mixed, "clip_eps_high": 0.28},
            grad,
        ),
        Case(
            "ScaleRL's cap: clip_eps_high=4.0 (weights capped at 5: hardly any cap)",
            {**base, "clip_eps_high": 4.0},
            grad,
        ),
        Case(
            "a lower bound too: clip_eps=0.2, clip_eps_high=0.2 (weights kept in [0.8, 1.2])",
            {**base, "clip_eps_high": 0.2, "clip_eps": 0.2},
            grad,
        ),
        Case(
            "asymmetric bounds: clip_eps=0.1, clip_eps_high=0.3 (weights kept in [0.9, 1.3])",
            {**base, "clip_eps_high": 0.3, "clip_eps": 0.1},
            grad,
        ),
        Case(
            "the first update: logp equals logp_old, every weight 1",
            {**base, "logp": logp_old.clone(), "clip_eps_high": 0.2},
            grad,
        ),
        Case(
            "one token (0-dimensional tensors), ratio e^0.5 = 1.65 with a positive advantage",
            {
                "logp": torch.tensor(-1.0, dtype=F64),
                "logp_old": torch.tensor(-1.5, dtype=F64),
                "adv": torch.tensor(2.0, dtype=F64),
                "clip_eps_high": 0.2,
            },
            grad,
        ),
    ]

    def cispo_with(
        *,
        detach_weight=True,
        detach_old=True,
        detach_adv=True,
        low=None,
        sign=-1.0,
        clamp=True,
        ignore_low=False,
        ppo=False,
        cap=lambda high: 1 + high,
    ):
        def wrong(logp, logp_old, adv, clip_eps_high, clip_eps=None):
            old = logp_old.detach() if detach_old else logp_old
            a = adv.detach() if detach_adv else adv
            ratio = torch.exp(logp - old)
            if ppo:
                # PPO's floor 1 - clip_eps_high where clip_eps is None, or CISPO's bounds (no floor then)
                floor = None if ppo == "cispo bounds" and clip_eps is None else 1 - (clip_eps or clip_eps_high)
                clipped = ratio.clamp(floor, 1 + clip_eps_high)
                return -torch.minimum(ratio * a, clipped * a)
            floor = low(clip_eps_high) if low else (None if clip_eps is None or ignore_low else 1 - clip_eps)
            weight = ratio.clamp(min=floor, max=cap(clip_eps_high)) if clamp else ratio
            weight = weight.detach() if detach_weight else weight
            return sign * weight * a * logp

        return wrong

    mistakes = [
        Mistake(
            "the weight is not detached: the gradient also flows through the clipped ratio; CISPO stops it, "
            "sg(clip(ratio)) = clip(ratio).detach(), so the gradient is -w * A * grad logp",
            cispo_with(detach_weight=False),
        ),
        Mistake(
            "the weight is clipped below too (at 1 - clip_eps_high); with clip_eps=None CISPO has no lower "
            "bound (MiniMax-M1 and TRL): clamp(ratio, max=1 + clip_eps_high)",
            cispo_with(low=lambda high: 1 - high),
        ),
        Mistake(
            "the weight is clipped below at 1 - 0.2 although clip_eps=None: no lower bound unless clip_eps is given",
            cispo_with(low=lambda high: 0.8),
        ),
        Mistake(
            "clip_eps is ignored: when it is given, the weight is also floored at 1 - clip_eps",
            cispo_with(ignore_low=True),
        ),
        Mistake(
            "the sign is reversed: the loss is -w * A * logp (minimising it raises logp where A > 0)",
            cispo_with(sign=1.0),
        ),
        Mistake(
            "the weight is not clipped: cap it at 1 + clip_eps_high, torch.clamp(ratio, max=1 + clip_eps_high)",
            cispo_with(clamp=False),
        ),
        Mistake(
            "the weight is capped at clip_eps_high itself (TRL's convention: its epsilon_high is the cap); the "
            "course caps at 1 + clip_eps_high, as every clip here: torch.clamp(ratio, max=1 + clip_eps_high)",
            cispo_with(cap=lambda high: high),
        ),
        *[
            Mistake(
                "this is PPO's clipped surrogate; CISPO multiplies the clipped, detached weight by A * logp, "
                "so a clipped token keeps its gradient",
                cispo_with(ppo=bounds),
            )
            for bounds in (True, "cispo bounds")
        ],
        Mistake(
            "neither the weight nor logp_old is detached: the gradient flows into the old policy's "
            "log-probs and through the weight; use clip(exp(logp - logp_old.detach())).detach()",
            cispo_with(detach_old=False, detach_weight=False),
        ),
        Mistake("a gradient flows into the advantages: they are constants; detach them", cispo_with(detach_adv=False)),
        Mistake(
            "the lower bound uses clip_eps_high: the weight is kept in [1 - clip_eps, 1 + clip_eps_high], "
            "each bound with its own eps",
            lambda logp, logp_old, adv, clip_eps_high, clip_eps=None: cispo_loss(
                logp, logp_old, adv, clip_eps_high, None if clip_eps is None else clip_eps_high
            ),
        ),
        Mistake(
            "the two bounds are swapped: the weight is kept in [1 - clip_eps, 1 + clip_eps_high] (clip_eps below, "
            "clip_eps_high above)",
            lambda logp, logp_old, adv, clip_eps_high, clip_eps=None: (
                cispo_loss(logp, logp_old, adv, clip_eps_high)
                if clip_eps is None
                else cispo_loss(logp, logp_old, adv, clip_eps, clip_eps_high)
            ),
        ),
        Mistake(
            "with clip_eps=None the weight is floored at 1 - clip_eps_high (clip_eps defaulting to clip_eps_high, "
            "as in PPO's clip-higher); CISPO has no lower bound unless clip_eps is given (MiniMax-M1 and TRL)",
            _floor_defaults_to_high,
        ),
        Mistake(
            "this is PPO's clipped term alone, -clip(ratio) * A: its gradient flows through the ratio and stops "
            "where the clip binds; CISPO detaches the clipped weight and multiplies it by logp, "
            "-clip(ratio).detach() * A * logp, so every token keeps its gradient",
            _clipped_ratio_as_loss,
        ),
        Mistake(
            "the loss is averaged over every token; cispo_loss returns the per-token loss, shape [..., T]: the "
            "aggregation (a token mean, a per-sequence mean) comes after it, in aggregate_loss",
            lambda logp, logp_old, adv, clip_eps_high, clip_eps=None: cispo_loss(
                logp, logp_old, adv, clip_eps_high, clip_eps
            ).mean(),
        ),
        Mistake(
            "the loss is averaged over each response's tokens (the last axis); cispo_loss returns the per-token "
            "loss, shape [..., T]: the aggregation comes after it, in aggregate_loss",
            lambda logp, logp_old, adv, clip_eps_high, clip_eps=None: cispo_loss(
                logp, logp_old, adv, clip_eps_high, clip_eps
            ).mean(-1),
        ),
        *[
            Mistake(
                f"the loss is summed {where}; cispo_loss returns the per-token loss, shape [..., T]: the "
                "aggregation comes after it, in aggregate_loss",
                lambda logp, logp_old, adv, clip_eps_high, clip_eps=None, _dims=dims: cispo_loss(
                    logp, logp_old, adv, clip_eps_high, clip_eps
                ).sum(*_dims),
            )
            for where, dims in (("over every token", ()), ("over each response's tokens (the last axis)", (-1,)))
        ],
        Mistake(
            "the weight is capped at 1 - clip_eps_high, below 1; the cap is 1 + clip_eps_high, above it",
            cispo_with(cap=lambda high: 1 - high),
        ),
        Mistake(
            "the weight multiplies the probability exp(logp); CISPO's loss is -w * A * logp, the log-prob",
            lambda logp, logp_old, adv, clip_eps_high, clip_eps=None: (
                -_weight(logp, logp_old, clip_eps_high, clip_eps) * adv.detach() * logp.exp()
            ),
        ),
        Mistake(
            "with clip_eps given, both bounds use it, [1 - clip_eps, 1 + clip_eps]; the upper bound is always "
            "1 + clip_eps_high: [1 - clip_eps, 1 + clip_eps_high]",
            lambda logp, logp_old, adv, clip_eps_high, clip_eps=None: cispo_loss(
                logp, logp_old, adv, clip_eps_high if clip_eps is None else clip_eps, clip_eps
            ),
        ),
        Mistake(
            "the ratio is inverted: the importance weight is pi_theta / pi_old = exp(logp - logp_old), not "
            "exp(logp_old - logp)",
            _ratio_inverted,
        ),
        Mistake(
            "the detached weight multiplies the ratio; CISPO multiplies it by logp, -w * A * logp, so the gradient "
            "is -w * A * grad logp (REINFORCE, weighted)",
            lambda logp, logp_old, adv, clip_eps_high, clip_eps=None: (
                -_weight(logp, logp_old, clip_eps_high, clip_eps) * adv.detach() * torch.exp(logp - logp_old.detach())
            ),
        ),
        Mistake(
            "the weight multiplies the log ratio logp - logp_old; CISPO's loss is -w * A * logp (the same gradient, "
            "but another value)",
            lambda logp, logp_old, adv, clip_eps_high, clip_eps=None: (
                -_weight(logp, logp_old, clip_eps_high, clip_eps) * adv.detach() * (logp - logp_old.detach())
            ),
        ),
        Mistake(
            "the log ratio is clipped at clip_eps_high (a cap of e^eps); the ratio itself is capped at "
            "1 + clip_eps_high: torch.clamp(ratio, max=1 + clip_eps_high)",
            _log_ratio_clipped,
        ),
        Mistake(
            "the weight is capped only where the advantage is positive (PPO's clip binds one side per sign); "
            "CISPO caps every token's weight at 1 + clip_eps_high, whatever the advantage's sign",
            _capped_where_positive,
        ),
    ]
    try:
        return check_against_reference(
            fn, cispo_loss, cases, name="cispo_loss", mistakes=mistakes, draw=_draw_cispo, check_dtype=True
        )
    except AssertionError as error:
        first, _, rest = str(error).partition("\n")
        if "raised TypeError" in first and "'NoneType'" in first:
            raise AssertionError(
                f"{first} (clip_eps is None by default, and then there is no lower bound: "
                f"clamp(ratio, min=None if clip_eps is None else 1 - clip_eps, max=1 + clip_eps_high))\n{rest}"
            ) from None
        raise


def _weight(logp, logp_old, clip_eps_high, clip_eps=None):
    """CISPO's detached weight, clip(exp(logp - logp_old), 1 - clip_eps, 1 + clip_eps_high)."""
    low = None if clip_eps is None else 1 - clip_eps
    return torch.exp(logp - logp_old.detach()).clamp(min=low, max=1 + clip_eps_high).detach()


def _ratio_inverted(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    low = None if clip_eps is None else 1 - clip_eps
    weight = torch.exp(logp_old.detach() - logp).clamp(min=low, max=1 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def _log_ratio_clipped(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    log_ratio = (logp - logp_old.detach()).clamp(min=None if clip_eps is None else -clip_eps, max=clip_eps_high)
    return -torch.exp(log_ratio).detach() * adv.detach() * logp


def _capped_where_positive(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach()).detach()
    weight = torch.where(adv > 0, _weight(logp, logp_old, clip_eps_high, clip_eps), ratio)
    return -weight * adv.detach() * logp


def _floor_defaults_to_high(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    floor = 1 - (clip_eps_high if clip_eps is None else clip_eps)
    weight = torch.exp(logp - logp_old.detach()).clamp(min=floor, max=1 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def _clipped_ratio_as_loss(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    floor = None if clip_eps is None else 1 - clip_eps
    return -torch.exp(logp - logp_old.detach()).clamp(min=floor, max=1 + clip_eps_high) * adv.detach()


def _draw_cispo(g: torch.Generator) -> list[Case]:
    """Fresh tokens: shapes, ratios from about 0.2 to 5, advantages of both signs, the caps and floors in use."""
    cases = []
    for _ in range(3):
        shape = drawing.choice(g, ((4,), (2, 3), (2, 2, 3)))
        logp, logp_old = _logps(g, *shape)
        logp = logp_old + 2.0 * (logp - logp_old)
        high = drawing.choice(g, (0.2, 0.28, 1.0, 4.0))
        low = drawing.choice(g, (None, None, 0.2, 0.5))
        kwargs = {"logp": logp, "logp_old": logp_old, "adv": torch.randn(*shape, generator=g, dtype=F64)}
        kwargs.update(clip_eps_high=high, **({} if low is None else {"clip_eps": low}))
        floor = "" if low is None else f", clip_eps={low}"
        cases.append(Case(f"shape {shape}, clip_eps_high={high}{floor}", kwargs, ("logp", "logp_old", "adv")))
    return cases
