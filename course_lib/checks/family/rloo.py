"""The check of chapter 11's RLOO advantages (reference: ``course_lib.family.rloo_advantages``)."""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference, drawing
from course_lib.family import rloo_advantages
from course_lib.grpo import group_advantages

F64 = torch.float64


# Two mistakes that each come in a few shapes (with or without a guard for groups of one), told the same way.
_BATCH_AXIS = "the baseline runs over the batch (dim=0); RLOO leaves one out of each prompt's own group (dim=-1)"
_WHOLE_BATCH = (
    "the responses left one out of are the whole batch's (rewards.sum() over every prompt); RLOO's baseline "
    "is the mean of the other responses to the same prompt: sum over the last axis, keepdim=True"
)


def _rloo_cases() -> list[Case]:
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
    return cases


def check_rloo_advantages(fn) -> bool:
    """Check a student's ``rloo_advantages(rewards)``."""
    cases = _rloo_cases()

    def rloo_with(
        *, divisor=lambda G: G - 1, keep_self=False, dim=-1, sign=1.0, g1_zero=True, shift=0.0, size_dim=None
    ):
        # size_dim: the axis whose size is the count divided by (and tested for a group of one), dim's by default
        counted = dim if size_dim is None else size_dim

        def wrong(rewards):
            if rewards.shape[counted] == 1 and g1_zero:  # nothing to leave one out of, along the axis used
                return torch.zeros_like(rewards)
            total = rewards.sum(dim=dim, keepdim=True)
            others = total if keep_self else total - rewards
            return sign * (rewards - (others / divisor(rewards.shape[counted]) + shift))

        return wrong

    mistakes = [
        Mistake(
            "the others' sum is divided by G; there are G - 1 other responses: (sum - r_i) / (G - 1)",
            rloo_with(divisor=lambda G: G, g1_zero=False),
        ),
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
            _BATCH_AXIS,
            rloo_with(dim=0),
        ),
        # The sum over the batch axis with the group's own size, G - 1, dividing it.
        Mistake(_BATCH_AXIS, rloo_with(dim=0, size_dim=-1)),
        Mistake(
            _BATCH_AXIS,
            lambda rewards: torch.zeros_like(rewards) if rewards.shape[-1] == 1 else rloo_with(dim=0)(rewards),
        ),
        Mistake(
            "the others' mean is floored (// or rounding_mode='floor'): rewards are not whole numbers, and the "
            "baseline is their plain mean, (sum - r_i) / (G - 1) with /",
            lambda rewards: (
                torch.zeros_like(rewards)
                if rewards.shape[-1] == 1
                else rewards
                - torch.div(rewards.sum(-1, keepdim=True) - rewards, rewards.shape[-1] - 1, rounding_mode="floor")
            ),
        ),
        Mistake(
            # Groups of one guarded on the group axis, the baseline taken over the batch axis: one prompt leaves
            # nothing over dim=0, and (sum - r) / (B - 1) is 0 / 0.
            _BATCH_AXIS,
            lambda rewards: (
                torch.zeros_like(rewards) if rewards.shape[-1] == 1 else rloo_with(dim=0, g1_zero=False)(rewards)
            ),
        ),
        Mistake(
            "the sign is reversed: the advantage is r_i minus its baseline, not the baseline minus r_i",
            rloo_with(sign=-1.0),
        ),
        Mistake(
            "RLOO does not divide by the group's std (that is GRPO's normalisation): only subtract the "
            "leave-one-out mean",
            lambda rewards: rloo_with()(rewards) / (_group_std(rewards) + 1e-6),
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
        *[
            Mistake(
                f"RLOO is the centred reward times G / (G - 1), r_i - mean(r) scaled up (the mean of the others sits "
                f"further from r_i than the group mean does); yours scales it by {name}",
                _centred_times(factor),
            )
            for name, factor in (("(G - 1) / G", lambda G: (G - 1) / G), ("G / (G + 1)", lambda G: G / (G + 1)))
        ],
        Mistake(
            "operator precedence: (sum - r_i) / G - 1 divides by G, then subtracts 1; the others' mean is "
            "(sum - r_i) / (G - 1), with the brackets",
            rloo_with(divisor=lambda G: G, shift=1.0),
        ),
        Mistake(
            _WHOLE_BATCH,
            _whole_batch,
        ),
        Mistake(
            _WHOLE_BATCH,
            lambda rewards: torch.zeros_like(rewards) if rewards.shape[-1] == 1 else _whole_batch(rewards),
        ),
        Mistake(
            "the others' sum is divided by B - 1, B read from the first axis (rewards.shape[0]); G is the group "
            "size, the last axis: rewards.shape[-1] - 1",
            _divided_by_b_minus_1,
        ),
        Mistake(
            "the baseline is added to r_i; the advantage is r_i minus the mean of the others",
            lambda rewards: (
                2 * rewards - rloo_advantages(rewards) if rewards.shape[-1] > 1 else rloo_advantages(rewards)
            ),
        ),
        Mistake(
            "the others' sum is multiplied by G - 1; their mean divides it by G - 1: (sum - r_i) / (G - 1)",
            rloo_with(divisor=lambda G: 1 / (G - 1)),
        ),
        Mistake(
            "this is the baseline alone, the mean of the other responses' rewards; the advantage is r_i minus it",
            lambda rewards: torch.zeros_like(rewards) if rewards.shape[-1] == 1 else rewards - rloo_advantages(rewards),
        ),
        Mistake(
            "the others' sum uses the group's mean where it needs the group's sum: (sum - r_i) / (G - 1), with "
            "sum = rewards.sum(-1, keepdim=True) (or G * the mean)",
            lambda rewards: rloo_with()(rewards) if rewards.shape[-1] == 1 else _mean_for_sum(rewards),
        ),
        Mistake(
            "the other responses are averaged over every prompt at once (one mean of a (B, G - 1) block); each "
            "prompt's baseline is the mean of its own row's others: .mean(-1), or (sum - r_i) / (G - 1) per row",
            _others_of_every_prompt,
        ),
        Mistake(
            "a group of one has no other response to compare with: its advantage is 0 (as TRL's RLOOTrainer gives), "
            "not its raw reward (verl's convention); return zeros when G == 1",
            lambda rewards: rewards.clone() if rewards.shape[-1] == 1 else rloo_advantages(rewards),
        ),
    ]
    return check_against_reference(
        fn, rloo_advantages, cases, name="rloo_advantages", mistakes=mistakes, draw=_draw_rewards, check_dtype=True
    )


def _centred_times(factor):
    """The group-centred rewards times ``factor(G)`` (RLOO's is G / (G - 1)); 0 for a group of one."""

    def wrong(rewards):
        G = rewards.shape[-1]
        if G == 1:
            return torch.zeros_like(rewards)
        return factor(G) * (rewards - rewards.mean(-1, keepdim=True))

    return wrong


def _mean_for_sum(rewards):
    G = rewards.shape[-1]
    return rewards - (rewards.mean(-1, keepdim=True) - rewards) / (G - 1)


def _others_of_every_prompt(rewards):
    """Response i's baseline: the mean of column i's others over every row together."""
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    others_sum = rewards.sum() - rewards.sum(0, keepdim=True)  # (1, G): every entry outside column i
    return rewards - others_sum / (rewards.shape[0] * (G - 1))


def _whole_batch(rewards):
    """Each reward minus the mean of every other reward of the batch, all prompts together."""
    n = rewards.numel()
    if n == 1:
        return torch.zeros_like(rewards)
    return rewards - (rewards.sum() - rewards) / (n - 1)


def _divided_by_b_minus_1(rewards):
    """The others' sum over the group divided by B - 1 (the first axis), not G - 1; 0 for a group of one."""
    B, G = rewards.shape
    if G == 1:
        return torch.zeros_like(rewards)
    return rewards - (rewards.sum(-1, keepdim=True) - rewards) / max(B - 1, 1)


def _group_std(rewards: torch.Tensor) -> torch.Tensor:
    """The group's std (1 for a group of one, which has none), without torch's warning for it."""
    if rewards.shape[-1] < 2:
        return torch.ones_like(rewards[..., :1])
    return rewards.std(-1, keepdim=True)


def _draw_rewards(g: torch.Generator) -> list[Case]:
    """Fresh groups: 0/1 rewards and real ones, of sizes 1 to 8, with all-equal groups among them."""
    cases = []
    for _ in range(3):
        B, G = drawing.integer(g, 1, 4), drawing.choice(g, (1, 2, 3, 5, 8))
        binary = (torch.rand(B, G, generator=g) < 0.4).to(F64)
        binary[0] = binary[0, 0]  # one group all equal
        cases.append(Case(f"B={B}, G={G} 0/1 rewards, the first group all equal", {"rewards": binary}))
        scaled = drawing.integer(g, 1, 20) * torch.randn(B, G, generator=g, dtype=F64)
        cases.append(Case(f"B={B}, G={G} real rewards", {"rewards": scaled}))
    return cases
