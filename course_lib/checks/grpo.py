"""The exercise checks of chapter 06 (GRPO): edge cases, and the classic mistakes each one names.

They sit in their own file so that ``course_lib/grpo.py`` reads as the algorithm alone; students call
``course_lib.checks.grpo.check_group_advantages(fn)`` as everywhere else. The wrong ``grpo_loss`` functions that
:func:`check_grpo_loss` recognises are built in :mod:`course_lib.checks.grpo_loss_mistakes`.
"""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference
from course_lib.checks.baselines import _std, batch_std, group_std, population_std, wrong_deltas, zeroed_below_eps
from course_lib.checks.grpo_loss_mistakes import EMPTY_LEFT_OUT, GRPO_LOSS_MISTAKES
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

    def advantages_with(**mistake):
        # group_advantages is compute_deltas in two of its modes, so its mistakes are chapter 03's.
        wrong = wrong_deltas(**mistake)

        def advantages(rewards, normalize_std=True, eps=1e-6):
            return wrong(rewards, "normalized_rewards" if normalize_std else "centered_rewards", eps)

        return advantages

    def batch_baseline(rewards, normalize_std=True, eps=1e-6):
        # The whole batch's mean as every group's baseline; each group's own std, and zeros where a group is equal.
        equal = (rewards == rewards[..., :1]).all(-1, keepdim=True)
        centred = torch.where(equal, torch.zeros_like(rewards), rewards - rewards.mean())
        if not normalize_std or rewards.shape[-1] == 1:
            return centred
        return centred / (group_std(rewards) + eps)

    mistakes = [
        Mistake(
            "a group of equal rewards is not set to zero exactly: in float32 the mean of seven 0.7s rounds, and "
            "(r - mean) / (std + eps) turns that rounding into 0.06; where (rewards == rewards[..., :1]).all(-1), "
            "the group's advantages are 0",
            advantages_with(),
        ),
        Mistake(
            "you used the statistics of the whole batch; GRPO's baseline and std are each prompt's group's: "
            "rewards.mean(dim=-1, keepdim=True) and rewards.std(dim=-1, keepdim=True)",
            advantages_with(mean_dim=None, std_fn=batch_std, g1_zero=False),
        ),
        Mistake(
            "you used the statistics of the whole batch; GRPO's baseline and std are each prompt's group's: "
            "rewards.mean(dim=-1, keepdim=True) and rewards.std(dim=-1, keepdim=True)",
            advantages_with(mean_dim=None, std_fn=batch_std),
        ),
        Mistake(
            "the mean and the std are over the batch (dim=0); take both within each group (dim=-1)",
            advantages_with(mean_dim=0, std_fn=lambda r: _std(r, dim=0).expand_as(r), g1_zero=False),
        ),
        Mistake(
            "normalize_std is ignored: normalize_std=True (GRPO) divides the centred rewards by std + eps",
            advantages_with(modes={"normalized_rewards": "centered_rewards"}),
        ),
        Mistake(
            "the eps argument is ignored (1e-6 is used whatever is passed): divide by std + eps",
            advantages_with(eps_used=1e-6),
        ),
        Mistake(
            "Bessel's correction is applied twice: rewards.std(dim=-1) already divides by G - 1; multiplying by "
            "sqrt(G / (G - 1)) again inflates the std",
            advantages_with(std_fn=lambda r: group_std(r) * (r.shape[-1] / max(r.shape[-1] - 1, 1)) ** 0.5),
        ),
        Mistake(
            "the std is floored at eps (std.clamp(min=eps)); GRPO adds eps to it: (r - mean) / (std + eps)",
            advantages_with(eps_where="floor"),
        ),
        Mistake(
            "eps is inside the square root (sqrt(var + eps)); add it to the std: (r - mean) / (std + eps)",
            advantages_with(std_fn=lambda r: _std(r, dim=-1) ** 2, eps_where="inside"),
        ),
        Mistake(
            "a group whose std is below eps is set to zero, but only a group whose rewards are all equal has "
            "nothing to learn: rewards that differ by less than eps still give (r - mean) / (std + eps), small and "
            "not 0; test (rewards == rewards[..., :1]).all(-1) for the equal groups",
            zeroed_below_eps,
        ),
        Mistake(
            "the std divides by G, not G - 1: GRPO (like TRL and verl) uses Bessel's correction, rewards.std(dim=-1)",
            advantages_with(std_fn=population_std),
        ),
        Mistake(
            "equal rewards give 0 / 0 = NaN: add eps to the std, (r - mean) / (std + eps)",
            advantages_with(eps_where="none"),
        ),
        Mistake(
            "a group of one (G=1) gives NaN: torch.std divides by G - 1 = 0; return zeros there",
            advantages_with(g1_zero=False),
        ),
        Mistake(
            "the mean is over the batch (dim=0); the baseline is each prompt's own group mean, "
            "rewards.mean(dim=-1, keepdim=True)",
            advantages_with(mean_dim=0),
        ),
        Mistake(
            "the std is over the batch (dim=0); take it within each group, rewards.std(dim=-1)",
            advantages_with(std_fn=lambda r: _std(r, dim=0).expand_as(r)),
        ),
        Mistake("you divided the raw rewards by the std: subtract the group mean first", advantages_with(centre=False)),
        Mistake(
            "the rewards are never centred: subtract the group mean first, with normalize_std or without",
            advantages_with(centre="never"),
        ),
        Mistake(
            "you divided by the variance; divide by the standard deviation",
            advantages_with(std_fn=lambda r: group_std(r) ** 2),
        ),
        Mistake(
            "normalize_std=False (Dr. GRPO) must only centre the rewards, not divide by the std",
            advantages_with(modes={"centered_rewards": "normalized_rewards"}),
        ),
        Mistake(
            "the baseline is the mean of the whole batch, rewards.mean(); GRPO's baseline is each prompt's own "
            "group mean, rewards.mean(dim=-1, keepdim=True)",
            batch_baseline,
        ),
    ]
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
    ]
    cases = [
        Case(f"{text}, mode={mode!r}", {**kwargs, "mode": mode}, grad=("per_token",))
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

    def seq_sum(x, m):
        return (x * m).sum(-1)

    def n_tokens(m):
        return m.to(torch.float64).sum(-1)

    def aggregate_with(**wrong_modes):
        def agg(per_token, mask, mode, max_len=None):
            mask = mask.to(per_token.dtype)
            if mode in wrong_modes:
                return wrong_modes[mode](per_token, mask, max_len or per_token.shape[-1])
            return aggregate_loss(per_token, mask, mode, max_len)

        return agg

    def token_mean(x, m, L):
        return (x * m).sum() / m.sum().clamp(min=1)

    def seq_mean(x, m, L):
        return (seq_sum(x, m) / m.sum(-1).clamp(min=1)).mean()

    def nonempty_mean(per_response, m):
        # the mean over the responses that have a valid token (an empty one's 0 / 0 never enters)
        kept = n_tokens(m) > 0  # (...)
        return per_response[kept].sum() / kept.sum().clamp(min=1)

    def ignore_mask(per_token, mask, mode, max_len=None):
        return aggregate_loss(per_token, torch.ones_like(per_token), mode, max_len)

    def always_token_mean(per_token, mask, mode, max_len=None):
        return token_mean(per_token, mask.to(per_token.dtype), max_len)

    def longest_valid(per_token, mask, mode, max_len=None):
        # Dr. GRPO's default divisor taken as the longest response's number of valid tokens, not T.
        if mode == "seq-mean-token-sum-norm" and max_len is None:
            max_len = float(n_tokens(mask).max().clamp(min=1))
        return aggregate_loss(per_token, mask, mode, max_len)

    mistakes = [
        Mistake(
            "every mode gives the token mean (DAPO): `mode` is ignored; each mode aggregates in its own way "
            "(the docstring's table), so branch on it",
            always_token_mean,
        ),
        Mistake(
            "this is the token mean (DAPO), but the mode asks for the mean over responses of each "
            "response's token mean: average within each response first (no length bias between them)",
            aggregate_with(**{"seq-mean-token-mean": token_mean}),
        ),
        Mistake(
            "this is the mean over responses, but 'token-mean' averages over all valid tokens of the "
            "batch at once: (loss * mask).sum() / mask.sum()",
            aggregate_with(**{"token-mean": seq_mean}),
        ),
        Mistake(
            "Dr. GRPO divides each response's token sum by the constant max_len, not by its number of valid tokens",
            aggregate_with(**{"seq-mean-token-sum-norm": seq_mean}),
        ),
        Mistake(
            "max_len was given but you divided by T, the padded length; divide by max_len when it is not None",
            aggregate_with(**{"seq-mean-token-sum-norm": lambda x, m, L: seq_sum(x, m).mean() / x.shape[-1]}),
        ),
        Mistake(
            "you summed over all responses and divided by max_len (verl's variant); the course's Dr. GRPO "
            "then takes the mean over responses",
            aggregate_with(**{"seq-mean-token-sum-norm": lambda x, m, L: seq_sum(x, m).sum() / L}),
        ),
        Mistake(
            "the mask is ignored: padding tokens are averaged in; keep only valid tokens",
            ignore_mask,
        ),
        Mistake(
            "padding is counted in the denominator: divide by the number of valid tokens, mask.sum(), "
            "not by the padded size",
            aggregate_with(
                **{"token-mean": lambda x, m, L: (x * m).mean(), "seq-mean-token-mean": lambda x, m, L: (x * m).mean()}
            ),
        ),
        Mistake(
            "a batch with no valid token gives 0 / 0 = NaN in the token mean; the loss is 0 there: divide by "
            "mask.sum().clamp(min=1)",
            aggregate_with(**{"token-mean": lambda x, m, L: (x * m).sum() / m.sum()}),
        ),
        Mistake(
            "an empty response (no valid token) gives 0 / 0 = NaN; it contributes 0: divide by "
            "mask.sum(-1).clamp(min=1)",
            aggregate_with(**{"seq-mean-token-mean": lambda x, m, L: (seq_sum(x, m) / n_tokens(m)).mean()}),
        ),
        Mistake(
            EMPTY_LEFT_OUT,
            aggregate_with(**{"seq-mean-token-mean": lambda x, m, L: nonempty_mean(seq_sum(x, m) / n_tokens(m), m)}),
        ),
        Mistake(
            EMPTY_LEFT_OUT,  # the same with .mean() over the kept responses: NaN when every response is empty
            aggregate_with(
                **{"seq-mean-token-mean": lambda x, m, L: (seq_sum(x, m) / n_tokens(m))[n_tokens(m) > 0].mean()}
            ),
        ),
        Mistake(
            EMPTY_LEFT_OUT,
            aggregate_with(
                **{
                    "seq-mean-token-mean": lambda x, m, L: nonempty_mean(seq_sum(x, m) / n_tokens(m), m),
                    "seq-mean-token-sum-norm": lambda x, m, L: nonempty_mean(seq_sum(x, m) / L, m),
                }
            ),
        ),
        Mistake(
            "you divided by the longest response's number of valid tokens, mask.sum(-1).max(); Dr. GRPO's "
            "constant without max_len is T, the padded length per_token.shape[-1], whatever the responses' lengths",
            longest_valid,
        ),
    ]
    return check_against_reference(
        fn, aggregate_loss, cases, name="aggregate_loss", mistakes=mistakes, check_dtype=True
    )


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
