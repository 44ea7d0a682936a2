"""The exercise checks of chapter 06 (GRPO): edge cases, and the classic mistakes each one names.

They sit in their own file so that ``course_lib/grpo.py`` reads as the algorithm alone; students call
``course_lib.checks.grpo.check_group_advantages(fn)`` as everywhere else. The wrong ``grpo_loss`` functions that
:func:`check_grpo_loss` recognises are built in :mod:`course_lib.checks.grpo_loss_mistakes`.
"""

from __future__ import annotations

import torch

from course_lib.checks import Case, check_against_reference
from course_lib.checks.aggregate_mistakes import AGGREGATE_MISTAKES
from course_lib.checks.group_advantage_mistakes import GROUP_ADVANTAGE_MISTAKES
from course_lib.checks.grpo_loss_mistakes import GRPO_LOSS_MISTAKES
from course_lib.checks.kl import check_kl_estimate  # noqa: F401 (chapter 06's notebook imports it from here)
from course_lib.checks.ppo import loss_and_info
from course_lib.grpo import (
    LOSS_AGG_MODES,
    aggregate_loss,
    group_advantages,
    grpo_loss,
)


def check_group_advantages(fn) -> bool:
    """Check a student's ``group_advantages(rewards, normalize_std=True, eps=1e-6)``."""
    g = torch.Generator().manual_seed(6)
    grids = [
        ("B=3 prompts, G=4 random rewards", torch.randn(3, 4, generator=g, dtype=torch.float64)),
        (
            "B=2 prompts, G=6 correct/incorrect (0/1) rewards",
            torch.tensor([[1.0, 0, 0, 1, 0, 0], [0, 1, 1, 1, 1, 1]], dtype=torch.float64),
        ),
        (
            "an all-correct group (rewards all equal: zeros, not NaN) beside a mixed one",
            torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.5]], dtype=torch.float64),
        ),
        ("groups of one response (G=1): zeros, not NaN", torch.tensor([[0.7], [-1.0]], dtype=torch.float64)),
        ("G=2 responses per prompt", torch.tensor([[2.0, 0.0], [0.0, 1.0], [5.0, 4.0]], dtype=torch.float64)),
        ("nearly equal rewards (std 1e-3, close to eps)", torch.tensor([[0.0, 1e-3, 2e-3, 0.0]], dtype=torch.float64)),
        (
            "rewards that differ by less than eps (std 6e-8): not all equal, so not zeroed",
            torch.tensor([[0.0, 1e-7, 0.0, 1e-7], [1.0, 0.0, 0.0, 1.0]], dtype=torch.float64),
        ),
        (
            # exact in float32 too (steps of 2^-9 near 2^10), so only the test for equal rewards is measured
            "rewards near 1024 that differ by 1/512 (torch.isclose's rtol=1e-5 calls them equal; they are not)",
            torch.tensor([[1024.0, 1024.0 + 2**-9, 1024.0, 1024.0 + 2**-8], [1.0, 0.0, 0.0, 1.0]], dtype=torch.float64),
        ),
        (
            "seven rewards of 0.7 beside a mixed group (in float32 their mean rounds: zeros exactly, not 0.06)",
            torch.tensor([[0.7] * 7, [1.0, 0.0, 0.5, 0.2, 0.9, 0.3, 0.1]], dtype=torch.float64),
        ),
    ]
    cases = [
        Case(f"{text}, normalize_std={flag}", {"rewards": rewards, "normalize_std": flag})
        for flag in (True, False)
        for text, rewards in grids
    ]
    cases.append(
        Case(
            "eps=0.5 given explicitly, normalize_std=True", {"rewards": grids[0][1], "normalize_std": True, "eps": 0.5}
        )
    )
    # The signature's default: a student whose normalize_std defaults to False passes every case above.
    cases.append(Case("normalize_std left at its default (True: GRPO divides by the std)", {"rewards": grids[1][1]}))

    mistakes = GROUP_ADVANTAGE_MISTAKES
    return check_against_reference(
        fn, group_advantages, cases, name="group_advantages", mistakes=mistakes, check_dtype=True
    )


def check_aggregate_loss(fn) -> bool:
    """Check a student's ``aggregate_loss(per_token, mask, mode, max_len=None)``, gradients included."""
    g = torch.Generator().manual_seed(8)

    def per_token_of(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    ragged = torch.tensor(
        [[[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]], [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 0, 0, 0]]]
    )  # lengths 5,2,1 / 3,4,2
    with_empty = torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 0, 0]], dtype=torch.bool)
    garbage = per_token_of(3, 4)
    garbage[~with_empty] = 1e3  # padding holds garbage: it must never change the loss
    grids = [
        (
            "B=2, G=3 responses of lengths 5, 2, 1 / 3, 4, 2 (padded to T=5)",
            {"per_token": per_token_of(2, 3, 5), "mask": ragged},
        ),
        (
            "3 responses of lengths 3, 0 (empty) and 2, a bool mask, 1000 in the padding",
            {"per_token": garbage, "mask": with_empty},
        ),
        ("4 responses all of full length T=3", {"per_token": per_token_of(4, 3), "mask": torch.ones(4, 3)}),
        (
            "one response of 6 tokens, the last 2 padding",
            {"per_token": per_token_of(6), "mask": torch.tensor([1, 1, 1, 1, 0, 0])},
        ),
        (
            "a batch whose every response is empty (all padding): the loss is 0, not 0 / 0",
            {"per_token": per_token_of(2, 3), "mask": torch.zeros(2, 3)},
        ),
        (
            "lengths 5, 2, 1 / 3, 4, 2 with inf and NaN in the padding (it may hold anything)",
            {"per_token": _poisoned(per_token_of(2, 3, 5), ragged), "mask": ragged},
        ),
    ]
    # Edge promises, told once every other case is right: an all-padding batch, and padding that holds inf or NaN.
    cases = [
        Case(f"{text}, mode={mode!r}", {**kwargs, "mode": mode}, grad=("per_token",), last=_edge(kwargs))
        for mode in LOSS_AGG_MODES
        for text, kwargs in grids
    ]
    cases.append(
        Case(
            "the lengths 5, 2, 1 / 3, 4, 2 again, mode='seq-mean-token-sum-norm', max_len=8 given",
            {**grids[0][1], "mode": "seq-mean-token-sum-norm", "max_len": 8},
            grad=("per_token",),
        )
    )

    mistakes = AGGREGATE_MISTAKES
    return check_against_reference(
        fn, aggregate_loss, cases, name="aggregate_loss", mistakes=mistakes, check_dtype=True
    )


def _poisoned(per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``per_token`` with inf and NaN in turn at its padded positions: ``x * mask`` is NaN there, a select is not."""
    padding = ~mask.bool()
    fill = torch.full_like(per_token, float("inf"))
    fill.view(-1)[::2] = float("nan")
    return torch.where(padding, fill, per_token)


def _edge(kwargs: dict) -> bool:
    return not kwargs["mask"].any() or not bool(torch.isfinite(kwargs["per_token"]).all())


def check_grpo_loss(fn) -> bool:
    """Check a student's ``grpo_loss(...)``: the loss value and its gradients."""
    g = torch.Generator().manual_seed(9)
    B, G, T = 2, 3, 4
    mask = torch.tensor([[[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0]], [[1, 0, 0, 0], [1, 1, 1, 1], [1, 1, 0, 0]]])
    rewards = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]], dtype=torch.float64)
    logp_old = -2.0 * torch.rand(B, G, T, generator=g, dtype=torch.float64)
    logp = logp_old + 0.3 * torch.randn(B, G, T, generator=g, dtype=torch.float64)  # ratios inside and outside the clip
    logp_ref = logp_old + 0.2 * torch.randn(B, G, T, generator=g, dtype=torch.float64)
    base = {"logp": logp, "logp_old": logp_old, "logp_ref": logp_ref, "rewards": rewards, "mask": mask}
    given_adv = torch.tensor([[0.9, -0.2, 0.4], [-1.1, 0.3, 0.5]], dtype=torch.float64)  # not centred per group
    grad = ("logp", "logp_old", "logp_ref", "rewards")
    cases = [
        Case("B=2 prompts, G=3 responses of lengths 4, 2, 3 / 1, 4, 2, the defaults", base, grad),
        Case("the first update: logp equals logp_old, so every ratio is 1", {**base, "logp": logp_old.clone()}, grad),
        Case("the same batch with a bool mask (the docstring's 1 (True))", {**base, "mask": mask.bool()}, grad),
        Case(
            "no reference model (logp_ref=None): no KL term",
            {**base, "logp_ref": None},
            ("logp", "logp_old", "rewards"),
        ),
        Case("kl_coef=0.5 with the k1 estimator", {**base, "kl_coef": 0.5, "kl_kind": "k1"}, grad),
        Case("kl_coef=0.2 with the k2 estimator", {**base, "kl_coef": 0.2, "kl_kind": "k2"}, grad),
        Case(
            "kl_coef=0 with a reference given: no KL in the loss, but info's kl still measures it",
            {**base, "kl_coef": 0.0},
            grad,
            last=True,  # an edge value: told once the rest is right, and no evidence against a name found there
        ),
        Case(
            "Dr. GRPO: normalize_std=False, loss_agg='seq-mean-token-sum-norm', max_len=6",
            {**base, "normalize_std": False, "loss_agg": "seq-mean-token-sum-norm", "max_len": 6},
            grad,
        ),
        Case("DAPO's loss_agg='token-mean', clip_eps=0.1", {**base, "loss_agg": "token-mean", "clip_eps": 0.1}, grad),
        Case(
            "DAPO's clip-higher: clip_eps=0.1, clip_eps_high=0.3 (the ratio is clipped to [0.9, 1.3])",
            {**base, "clip_eps": 0.1, "clip_eps_high": 0.3},
            grad,
        ),
        Case(
            "clip_eps=0.05 with clip_eps_high=0.4 (the ratio is clipped to [0.95, 1.4]: the two sides differ)",
            {**base, "clip_eps": 0.05, "clip_eps_high": 0.4},
            grad,
        ),
        Case(
            "advantages computed elsewhere: rewards=None, adv given (used as they are, not centred again)",
            {**base, "rewards": None, "adv": given_adv},
            ("logp", "logp_old", "logp_ref", "adv"),
        ),
    ]

    return check_against_reference(
        fn, grpo_loss, cases, name="grpo_loss", mistakes=GRPO_LOSS_MISTAKES, outputs=_grpo_outputs, check_dtype=True
    )


_GRPO_INFO = ("clip_fraction", "kl", "adv_abs_mean")


def _grpo_outputs(result):
    """The loss and the three diagnostics of API.md: clip_fraction, kl and the mean advantage magnitude; and
    ``reward_mean``, which the docstring promises when ``rewards`` are given (where the reference returns it, a
    reply without it is told that it is missing)."""
    outputs = loss_and_info(result, _GRPO_INFO, " (the mean |advantage| over responses)")
    info = result[1]
    if "reward_mean" in info:
        outputs["reward_mean"] = info["reward_mean"]
    return outputs
