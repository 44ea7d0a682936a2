"""The exercise checks of chapter 06 (GRPO): edge cases and classic mistakes.

They sit in their own file so that ``course_lib/grpo.py`` reads as the algorithm
alone; ``course_lib.grpo`` re-exports every ``check_*`` so students call
``course_lib.checks.grpo.check_group_advantages(fn)`` as everywhere else.
"""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference
from course_lib.checks.baselines import _std
from course_lib.checks.kl import check_kl_estimate  # noqa: F401 (chapter 06's notebook imports it from here)
from course_lib.grpo import (
    LOSS_AGG_MODES,
    aggregate_loss,
    group_advantages,
    grpo_loss,
    kl_estimate,
    masked_mean,
)
from course_lib.ppo import clipped_surrogate


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

    def advantages_with(
        *,
        std=lambda r: _std(r, dim=-1),
        mean_dim=-1,
        centre=True,
        eps_used=True,
        always_normalize=False,
        g1_zero=True,
        ignore_eps=False,
        never_normalize=False,
    ):
        def wrong(rewards, normalize_std=True, eps=1e-6):
            eps = 1e-6 if ignore_eps else eps
            mean = rewards.mean() if mean_dim is None else rewards.mean(dim=mean_dim, keepdim=True)
            adv = rewards - mean if centre else rewards.clone()
            if never_normalize or not (normalize_std or always_normalize):
                return adv
            if rewards.shape[-1] == 1 and g1_zero:
                return torch.zeros_like(rewards)
            return adv / (std(rewards) + (eps if eps_used else 0.0))

        return wrong

    def batch_std(r):
        return _std(r.flatten(), dim=0).expand_as(r)

    mistakes = [
        Mistake(
            "you used the statistics of the whole batch; GRPO's baseline and std are each prompt's group's: "
            "rewards.mean(dim=-1, keepdim=True) and rewards.std(dim=-1, keepdim=True)",
            advantages_with(mean_dim=None, std=batch_std, g1_zero=False),
        ),
        Mistake(
            "you used the statistics of the whole batch; GRPO's baseline and std are each prompt's group's: "
            "rewards.mean(dim=-1, keepdim=True) and rewards.std(dim=-1, keepdim=True)",
            advantages_with(mean_dim=None, std=batch_std),
        ),
        Mistake(
            "the mean and the std are over the batch (dim=0); take both within each group (dim=-1)",
            advantages_with(mean_dim=0, std=lambda r: _std(r, dim=0).expand_as(r), g1_zero=False),
        ),
        Mistake(
            "normalize_std is ignored: normalize_std=True (GRPO) divides the centred rewards by std + eps",
            advantages_with(never_normalize=True),
        ),
        Mistake(
            "the eps argument is ignored (1e-6 is used whatever is passed): divide by std + eps",
            advantages_with(ignore_eps=True),
        ),
        Mistake(
            "the std divides by G, not G - 1: GRPO (like TRL and verl) uses Bessel's correction, rewards.std(dim=-1)",
            advantages_with(std=lambda r: _std(r, dim=-1, correction=0)),
        ),
        Mistake(
            "equal rewards give 0 / 0 = NaN: add eps to the std, (r - mean) / (std + eps)",
            advantages_with(eps_used=False),
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
            advantages_with(std=lambda r: _std(r, dim=0).expand_as(r)),
        ),
        Mistake("you divided the raw rewards by the std: subtract the group mean first", advantages_with(centre=False)),
        Mistake(
            "you divided by the variance; divide by the standard deviation",
            advantages_with(std=lambda r: _std(r, dim=-1) ** 2),
        ),
        Mistake(
            "normalize_std=False (Dr. GRPO) must only centre the rewards, not divide by the std",
            advantages_with(always_normalize=True),
        ),
    ]
    return check_against_reference(fn, group_advantages, cases, name="group_advantages", mistakes=mistakes)


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

    def ignore_mask(x, m, L):
        return x.mean()

    mistakes = [
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
            aggregate_with(**dict.fromkeys(LOSS_AGG_MODES, ignore_mask)),
        ),
        Mistake(
            "padding is counted in the denominator: divide by the number of valid tokens, mask.sum(), "
            "not by the padded size",
            aggregate_with(
                **{"token-mean": lambda x, m, L: (x * m).mean(), "seq-mean-token-mean": lambda x, m, L: (x * m).mean()}
            ),
        ),
        Mistake(
            "an empty response (no valid token) gives 0 / 0 = NaN; it contributes 0: divide by "
            "mask.sum(-1).clamp(min=1)",
            aggregate_with(**{"seq-mean-token-mean": lambda x, m, L: (seq_sum(x, m) / n_tokens(m)).mean()}),
        ),
    ]
    return check_against_reference(fn, aggregate_loss, cases, name="aggregate_loss", mistakes=mistakes)


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
        Case(
            "no reference model (logp_ref=None): no KL term",
            {**base, "logp_ref": None},
            ("logp", "logp_old", "rewards"),
        ),
        Case("kl_coef=0.5 with the k1 estimator", {**base, "kl_coef": 0.5, "kl_kind": "k1"}, grad),
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

    def wrong_grpo(
        *,
        kl=None,
        adv_fn=None,
        per_token=None,
        agg=None,
        ignore_high=False,
        kl_coef_used=None,
        kl_kind_used=None,
        info=None,
        clip=None,
        ignore_max_len=False,
        old_kl=False,
        ratio_ref=False,
        renormalise_adv=False,
    ):
        def loss_fn(
            logp,
            logp_old,
            logp_ref,
            rewards,
            mask,
            clip_eps=0.2,
            kl_coef=0.04,
            kl_kind="k3",
            normalize_std=True,
            loss_agg="seq-mean-token-mean",
            max_len=None,
            clip_eps_high=None,
            adv=None,
        ):
            if adv is not None:
                a = group_advantages(adv.detach(), normalize_std) if renormalise_adv else adv.detach()
            else:
                a = adv_fn(rewards, normalize_std) if adv_fn else group_advantages(rewards.detach(), normalize_std)
            a = a[..., None].expand_as(logp)
            high = None if ignore_high else clip_eps_high
            eps = clip_eps if clip is None else clip
            if ratio_ref and logp_ref is None:
                raise ValueError("no reference here")  # this mistake cannot run on this case
            denominator = logp_ref if ratio_ref else logp_old
            surrogate = (
                per_token(logp, denominator, a, eps, eps if high is None else high)
                if per_token and not ratio_ref
                else clipped_surrogate(logp, denominator, a, eps, high)
            )
            kind = kl_kind if kl_kind_used is None else kl_kind_used
            coef = kl_coef if kl_coef_used is None else kl_coef_used
            if logp_ref is not None:
                k = (
                    kl(logp, logp_ref, kind)
                    if kl
                    else kl_estimate(logp_old.detach() if old_kl else logp, logp_ref.detach(), kind)
                )
                surrogate = surrogate + coef * k
            loss = (
                agg(surrogate, mask)
                if agg
                else aggregate_loss(surrogate, mask, loss_agg, None if ignore_max_len else max_len)
            )
            _, right = grpo_loss(
                logp.detach(),
                logp_old.detach(),
                None if logp_ref is None else logp_ref.detach(),
                None if rewards is None else rewards.detach(),
                mask,
                clip_eps,
                kl_coef,
                kl_kind,
                normalize_std,
                loss_agg,
                max_len,
                high,
                None if adv is None else adv.detach(),
            )  # the info, right unless the mistake is in it (or in clip_eps_high)
            if info is not None and rewards is not None:
                right = {
                    **right,
                    **info(
                        logp.detach(),
                        logp_old.detach(),
                        logp_ref,
                        rewards.detach(),
                        mask.bool(),
                        clip_eps,
                        kl_coef,
                        kl_kind,
                        normalize_std,
                    ),
                }
            return loss, right

        return loss_fn

    def ratio_of(logp, logp_old):
        return torch.exp(logp - logp_old)

    def info_clip_fraction(binding=False, every_token=False):
        def info(p, p_old, q, r, valid, eps, coef, kind, norm):
            ratio = ratio_of(p, p_old)
            a = group_advantages(r, norm)[..., None].expand_as(p)
            out = (ratio < 1 - eps) | (ratio > 1 + eps)
            if binding:
                out = ((ratio > 1 + eps) & (a > 0)) | ((ratio < 1 - eps) & (a < 0))
            where = torch.ones_like(valid) if every_token else valid
            return {"clip_fraction": float((out & where).sum()) / float(where.sum())}

        return info

    def info_kl(transform):
        def info(p, p_old, q, r, valid, eps, coef, kind, norm):
            if q is None:
                return {}
            return {"kl": float(transform(kl_estimate(p, q.detach(), kind), valid, coef))}

        return info

    def info_adv(value):
        def info(p, p_old, q, r, valid, eps, coef, kind, norm):
            return {"adv_abs_mean": float(value(group_advantages(r, norm)))}

        return info

    def surrogate_attached(*, old=False, adv=False):
        def surrogate(logp, logp_old, a, clip_eps, high):
            ratio = torch.exp(logp - (logp_old if old else logp_old.detach()))
            a = a if adv else a.detach()
            return -torch.minimum(ratio * a, ratio.clamp(1 - clip_eps, 1 + high) * a)

        return surrogate

    mistakes = [
        Mistake(
            "the KL penalty points the wrong way (reversed direction: use log_r = logp_ref - logp, "
            "k3 = exp(log_r) - log_r - 1)",
            wrong_grpo(kl=lambda p, q, kind: kl_estimate(q.detach(), p, kind)),
        ),
        Mistake(
            "the KL penalty is subtracted; the loss adds kl_coef * KL (the objective subtracts it)",
            wrong_grpo(kl=lambda p, q, kind: -kl_estimate(p, q.detach(), kind)),
        ),
        Mistake(
            "a gradient flows into logp_old: the old policy's log-probs are constants; detach them",
            wrong_grpo(per_token=surrogate_attached(old=True)),
        ),
        Mistake(
            "a gradient flows into the rewards (or advantages): they are constants; detach them",
            wrong_grpo(adv_fn=lambda r, n: group_advantages(r, n), per_token=surrogate_attached(adv=True)),
        ),
        Mistake(
            "a gradient flows into logp_ref: the reference model is frozen; detach logp_ref",
            wrong_grpo(kl=lambda p, q, kind: kl_estimate(p, q, kind)),
        ),
        Mistake(
            "the advantages are normalised over the whole batch; GRPO normalises within each prompt's group (dim=-1)",
            wrong_grpo(adv_fn=lambda r, n: (r - r.mean()) / (r.std() + 1e-6) if n else r - r.mean()),
        ),
        Mistake(
            "the advantage std divides by G; use Bessel's correction (torch.std's default)",
            wrong_grpo(
                adv_fn=lambda r, n: (
                    (r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True, correction=0) + 1e-6)
                    if n
                    else r - r.mean(-1, keepdim=True)
                )
            ),
        ),
        Mistake(
            "clip_eps_high is ignored: the ratio is clipped to [1 - clip_eps, 1 + clip_eps_high] "
            "(DAPO's clip-higher); clip_eps_high=None means clip_eps",
            wrong_grpo(ignore_high=True),
        ),
        Mistake(
            "loss_agg is ignored: the tokens are always averaged over the whole batch (token-mean); "
            "pass loss_agg (and max_len) to aggregate_loss",
            wrong_grpo(agg=lambda x, m: masked_mean(x, m)),
        ),
        Mistake(
            "loss_agg is ignored: each response's tokens are always averaged first (seq-mean-token-mean); "
            "pass loss_agg (and max_len) to aggregate_loss",
            wrong_grpo(agg=lambda x, m: aggregate_loss(x, m, "seq-mean-token-mean")),
        ),
        Mistake(
            "max_len is ignored: Dr. GRPO divides each response's token sum by max_len when it is given "
            "(pass max_len to aggregate_loss)",
            wrong_grpo(ignore_max_len=True),
        ),
        Mistake(
            "there is no clip: the per-token loss is -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A), "
            "not -ratio * A",
            wrong_grpo(per_token=lambda p, p_old, a, eps, hi: -ratio_of(p, p_old.detach()) * a),
        ),
        Mistake(
            "only the clipped term is there (no min): take -min(ratio * A, clip(ratio) * A)",
            wrong_grpo(per_token=lambda p, p_old, a, eps, hi: -ratio_of(p, p_old.detach()).clamp(1 - eps, 1 + hi) * a),
        ),
        Mistake(
            "you take the max of the two objectives; PPO and GRPO take the min (the pessimistic bound)",
            wrong_grpo(
                per_token=lambda p, p_old, a, eps, hi: (
                    -torch.maximum(
                        ratio_of(p, p_old.detach()) * a, ratio_of(p, p_old.detach()).clamp(1 - eps, 1 + hi) * a
                    )
                )
            ),
        ),
        Mistake(
            "your ratio looks like logp / logp_old; use exp(logp - logp_old)",
            wrong_grpo(
                per_token=lambda p, p_old, a, eps, hi: (
                    -torch.minimum(p / p_old.detach() * a, (p / p_old.detach()).clamp(1 - eps, 1 + hi) * a)
                )
            ),
        ),
        Mistake(
            "clip_eps is ignored (0.2 is used whatever is passed): clip the ratio to [1 - clip_eps, 1 + clip_eps]",
            wrong_grpo(clip=0.2),
        ),
        Mistake(
            "the KL penalty is missing: add kl_coef * kl_estimate(logp, logp_ref, kl_kind) to every token's loss",
            wrong_grpo(kl_coef_used=0.0),
        ),
        Mistake(
            "kl_coef is ignored (0.04 is used whatever is passed): add kl_coef * KL", wrong_grpo(kl_coef_used=0.04)
        ),
        Mistake("the KL penalty has no coefficient: add kl_coef * KL, not KL", wrong_grpo(kl_coef_used=1.0)),
        Mistake(
            "kl_kind is ignored (k3 is used whatever is passed): pass kl_kind to kl_estimate",
            wrong_grpo(kl_kind_used="k3"),
        ),
        Mistake(
            "normalize_std is ignored: the advantages are always divided by the group std; normalize_std=False "
            "(Dr. GRPO) only centres them",
            wrong_grpo(adv_fn=lambda r, n: group_advantages(r.detach(), True)),
        ),
        Mistake(
            "normalize_std is ignored: the advantages are never divided by the group std; normalize_std=True "
            "(GRPO) divides them by std + eps",
            wrong_grpo(adv_fn=lambda r, n: group_advantages(r.detach(), False)),
        ),
        Mistake(
            "the advantages are the raw rewards: GRPO's advantage is the reward minus its group's mean "
            "(divided by the group's std with normalize_std)",
            wrong_grpo(adv_fn=lambda r, n: r.detach().clone()),
        ),
        Mistake(
            "adv is centred (or normalised) again: advantages passed in are used as they are; only rewards go "
            "through group_advantages",
            wrong_grpo(renormalise_adv=True),
        ),
        Mistake(
            "the KL penalty is computed from logp_old; it is the current policy's: kl_estimate(logp, logp_ref)",
            wrong_grpo(old_kl=True),
        ),
        Mistake(
            "the ratio's denominator is the reference policy; it is the old policy that sampled the data: "
            "exp(logp - logp_old)",
            wrong_grpo(ratio_ref=True),
        ),
        Mistake(
            "info's adv_abs_mean is averaged over tokens; it is the mean |advantage| over responses",
            wrong_grpo(
                info=lambda p, p_old, q, r, valid, eps, coef, kind, norm: {
                    "adv_abs_mean": float(group_advantages(r, norm)[..., None].expand_as(p).abs()[valid].mean())
                }
            ),
        ),
        Mistake(
            "info's clip_fraction counts only where the clip binds; the course counts every valid token whose "
            "ratio lies outside [1 - clip_eps, 1 + clip_eps_high], as ppo.clipped_surrogate_loss",
            wrong_grpo(info=info_clip_fraction(binding=True)),
        ),
        Mistake(
            "info's clip_fraction counts padding tokens too: count valid tokens only (mask)",
            wrong_grpo(info=info_clip_fraction(every_token=True)),
        ),
        Mistake(
            "info's kl averages padding tokens too: it is the mean of the KL estimate over valid tokens",
            wrong_grpo(info=info_kl(lambda k, valid, coef: k.mean())),
        ),
        Mistake(
            "info's kl is the penalty kl_coef * KL; report the KL estimate itself, averaged over valid tokens",
            wrong_grpo(info=info_kl(lambda k, valid, coef: coef * k[valid].mean())),
        ),
        Mistake(
            "info's kl is averaged per response first; it is the mean of the KL estimate over all valid tokens",
            wrong_grpo(info=info_kl(lambda k, valid, coef: aggregate_loss(k, valid, "seq-mean-token-mean"))),
        ),
        Mistake(
            "info's adv_abs_mean is the mean advantage (about 0 after centring); report the mean of its "
            "absolute value, adv.abs().mean()",
            wrong_grpo(info=info_adv(lambda a: a.mean())),
        ),
        Mistake(
            "info's adv_abs_mean is the advantages' std; report the mean of their absolute value, adv.abs().mean()",
            wrong_grpo(info=info_adv(lambda a: a.std())),
        ),
    ]
    passed = check_against_reference(fn, grpo_loss, cases, name="grpo_loss", mistakes=mistakes, outputs=_grpo_outputs)
    return passed


_GRPO_INFO = ("clip_fraction", "kl", "adv_abs_mean")


def _grpo_outputs(result):
    """The loss and the three diagnostics of API.md: clip_fraction, kl and the mean advantage magnitude."""
    if not (isinstance(result, tuple) and len(result) == 2):
        raise TypeError("it should return a tuple (loss, info)")
    loss, info = result
    if not isinstance(info, dict):
        raise TypeError(f"the second returned value should be the info dict, got {type(info).__name__}")
    missing = [key for key in _GRPO_INFO if key not in info]
    if missing:
        raise TypeError(
            f"its info dict has no {', '.join(map(repr, missing))}: the exercise asks for "
            f"{', '.join(_GRPO_INFO)} (the mean |advantage| over responses)"
        )
    return {"loss": loss, **{key: info[key] for key in _GRPO_INFO}}
