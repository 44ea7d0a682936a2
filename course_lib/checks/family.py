"""The exercise checks of chapter 11 (the GRPO family): RLOO's advantages, GSPO's sequence ratio, CISPO's loss.

They import the references of ``course_lib.family``; the maths module never imports its checks.
"""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference
from course_lib.family import cispo_loss, gspo_sequence_log_ratio, rloo_advantages
from course_lib.grpo import group_advantages

F64 = torch.float64


def check_rloo_advantages(fn) -> bool:
    """Check a student's ``rloo_advantages(rewards)``."""
    g = torch.Generator().manual_seed(11)
    cases = [
        Case("B=3 prompts, G=4 random rewards", {"rewards": torch.randn(3, 4, generator=g, dtype=F64)}),
        Case(
            "B=2 prompts, G=5 correct/incorrect (0/1) rewards",
            {"rewards": torch.tensor([[1.0, 0, 0, 1, 0], [0, 1, 1, 1, 1]], dtype=F64)},
        ),
        Case(
            "an all-correct group (every advantage 0) beside a mixed one",
            {"rewards": torch.tensor([[1.0, 1.0, 1.0], [2.0, 0.0, 1.0]], dtype=F64)},
        ),
        Case(
            "G=2: each response is compared with the other one alone",
            {"rewards": torch.tensor([[2.0, 0.5], [0.0, 1.0]], dtype=F64)},
        ),
        Case(
            "groups of one response (G=1): no other response, so 0, not NaN",
            {"rewards": torch.tensor([[0.7], [-1.0]], dtype=F64)},
        ),
        Case("one prompt, G=8 rewards on a large scale", {"rewards": 50.0 * torch.randn(1, 8, generator=g, dtype=F64)}),
    ]

    def rloo_with(*, divisor=lambda G: G - 1, keep_self=False, dim=-1, sign=1.0, g1_zero=True):
        def wrong(rewards):
            G = rewards.shape[-1]
            if G == 1 and g1_zero:
                return torch.zeros_like(rewards)
            total = rewards.sum(dim=dim, keepdim=True)
            others = total if keep_self else total - rewards
            return sign * (rewards - others / divisor(rewards.shape[dim]))

        return wrong

    mistakes = [
        Mistake(
            "the others' sum is divided by G; there are G - 1 other responses: (sum - r_i) / (G - 1)",
            rloo_with(divisor=lambda G: G),
        ),
        Mistake(
            "the baseline includes the response itself (that is the group mean, GRPO's baseline): "
            "leave r_i out, (rewards.sum(-1, keepdim=True) - rewards) / (G - 1)",
            rloo_with(keep_self=True, divisor=lambda G: G),
        ),
        Mistake(
            "the baseline adds every reward of the group and divides by G - 1: subtract r_i from the sum first",
            rloo_with(keep_self=True),
        ),
        Mistake(
            "the baseline runs over the batch (dim=0); RLOO leaves one out of each prompt's own group (dim=-1)",
            rloo_with(dim=0),
        ),
        Mistake(
            "the sign is reversed: the advantage is r_i minus its baseline, not the baseline minus r_i",
            rloo_with(sign=-1.0),
        ),
        Mistake(
            "RLOO does not divide by the group's std (that is GRPO's normalisation): only subtract the "
            "leave-one-out mean",
            lambda rewards: rloo_with()(rewards) / (rewards.std(-1, keepdim=True).nan_to_num(1.0) + 1e-6),
        ),
        Mistake(
            "this is GRPO's advantage (centred by the group mean, divided by the std); RLOO subtracts the "
            "mean of the other G - 1 rewards and does not divide",
            lambda rewards: group_advantages(rewards),
        ),
        Mistake(
            "a group of one (G=1) divides 0 by G - 1 = 0 and gives NaN: return zeros when G == 1",
            rloo_with(g1_zero=False),
        ),
    ]
    return check_against_reference(fn, rloo_advantages, cases, name="rloo_advantages", mistakes=mistakes)


def check_gspo_sequence_log_ratio(fn) -> bool:
    """Check a student's ``gspo_sequence_log_ratio(logp, logp_old, mask)``, gradients included."""
    g = torch.Generator().manual_seed(12)

    def logps(*shape):
        old = -3.0 * torch.rand(*shape, generator=g, dtype=F64)
        return old + 0.4 * torch.randn(*shape, generator=g, dtype=F64), old

    ragged = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 0, 0]])
    logp, logp_old = logps(4, 5)
    with_empty = torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 0, 0]], dtype=torch.bool)
    garbage, garbage_old = logps(3, 4)
    garbage[~with_empty] = -1e4  # padding may hold anything: it must never change the result
    grouped, grouped_old = logps(2, 3, 4)
    grad = ("logp", "logp_old")
    cases = [
        Case(
            "4 responses of lengths 5, 2, 1, 3 (padded to T=5)",
            {"logp": logp, "logp_old": logp_old, "mask": ragged},
            grad,
        ),
        Case(
            "3 responses of lengths 3, 0 (empty: log ratio 0) and 2, a bool mask, -10000 in the padding",
            {"logp": garbage, "logp_old": garbage_old, "mask": with_empty},
            grad,
        ),
        Case(
            "B=2, G=3 responses of T=4 tokens, all valid",
            {"logp": grouped, "logp_old": grouped_old, "mask": torch.ones(2, 3, 4)},
            grad,
        ),
        Case(
            "one response of 6 tokens, the last 2 padding",
            {
                "logp": logp[0, :4].repeat(2)[:6].clone(),
                "logp_old": logp_old[0, :4].repeat(2)[:6].clone(),
                "mask": torch.tensor([1, 1, 1, 1, 0, 0]),
            },
            grad,
        ),
        Case(
            "the first update: logp equals logp_old, every log ratio 0",
            {"logp": logp_old.clone(), "logp_old": logp_old, "mask": ragged},
            grad,
        ),
    ]

    def valid(x, mask):
        return torch.where(mask.bool(), x, torch.zeros_like(x))

    def count(mask):
        return mask.to(F64).sum(-1).clamp(min=1)

    def with_detach(fn_):
        return lambda logp, logp_old, mask: fn_(logp, logp_old.detach(), mask)

    mistakes = [
        Mistake(
            "this is the sum of the token log ratios (the log ratio of the whole sequences' probabilities); "
            "GSPO takes their mean, sum / |y_i|, so long responses do not get extreme ratios",
            with_detach(lambda p, q, m: valid(p - q, m).sum(-1)),
        ),
        Mistake(
            "the mask is ignored: padding is averaged in; average over the valid tokens only",
            with_detach(lambda p, q, m: (p - q).mean(-1)),
        ),
        Mistake(
            "padding is counted in the denominator: divide the masked sum by the number of valid tokens, "
            "mask.sum(-1), not by T",
            with_detach(lambda p, q, m: valid(p - q, m).sum(-1) / p.shape[-1]),
        ),
        Mistake(
            "this is the log of the mean of the token ratios (an arithmetic mean); GSPO's s_i is their "
            "geometric mean: the mean of the log ratios",
            with_detach(lambda p, q, m: torch.log(valid(torch.exp(p - q), m).sum(-1) / count(m))),
        ),
        Mistake(
            "this is a ratio of means (the mean probability under each policy); GSPO averages the token "
            "log ratios logp - logp_old",
            with_detach(lambda p, q, m: torch.log(valid(p.exp(), m).sum(-1) / valid(q.exp(), m).sum(-1))),
        ),
        Mistake(
            "the result is the ratio s_i; the function returns its log, the mean of logp - logp_old",
            with_detach(lambda p, q, m: torch.exp(valid(p - q, m).sum(-1) / count(m))),
        ),
        Mistake(
            "an empty response (no valid token) gives 0 / 0 = NaN; divide by mask.sum(-1).clamp(min=1)",
            with_detach(lambda p, q, m: valid(p - q, m).sum(-1) / m.to(F64).sum(-1)),
        ),
        Mistake(
            "a gradient flows into logp_old: the old policy's log-probs are constants; detach them",
            lambda p, q, m: valid(p - q, m).sum(-1) / count(m),
        ),
    ]
    return check_against_reference(
        fn, gspo_sequence_log_ratio, cases, name="gspo_sequence_log_ratio", mistakes=mistakes
    )


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
    ):
        def wrong(logp, logp_old, adv, clip_eps_high, clip_eps=None):
            old = logp_old.detach() if detach_old else logp_old
            a = adv.detach() if detach_adv else adv
            ratio = torch.exp(logp - old)
            if ppo:
                clipped = ratio.clamp(1 - (clip_eps or clip_eps_high), 1 + clip_eps_high)
                return -torch.minimum(ratio * a, clipped * a)
            floor = low(clip_eps_high) if low else (None if clip_eps is None or ignore_low else 1 - clip_eps)
            weight = ratio.clamp(min=floor, max=1 + clip_eps_high) if clamp else ratio
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
            "this is PPO's clipped surrogate; CISPO multiplies the clipped, detached weight by A * logp, "
            "so a clipped token keeps its gradient",
            cispo_with(ppo=True),
        ),
        Mistake(
            "neither the weight nor logp_old is detached: the gradient flows into the old policy's "
            "log-probs and through the weight; use clip(exp(logp - logp_old.detach())).detach()",
            cispo_with(detach_old=False, detach_weight=False),
        ),
        Mistake("a gradient flows into the advantages: they are constants; detach them", cispo_with(detach_adv=False)),
    ]
    return check_against_reference(fn, cispo_loss, cases, name="cispo_loss", mistakes=mistakes)
