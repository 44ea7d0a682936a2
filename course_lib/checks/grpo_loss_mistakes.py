"""Classic wrong implementations of chapter 06's ``grpo_loss``, which ``check_grpo_loss`` recognises.

:func:`wrong_grpo` builds a loss with the exercise's signature from the mistake's options (a KL the wrong way
round, a constant left attached, an advantage normalised over the batch, an aggregation or a clip ignored, a wrong
diagnostic in ``info``), and ``GRPO_LOSS_MISTAKES`` pairs each with the message that names it and its fix.
:mod:`course_lib.checks.grpo` holds the cases and the checks.
"""

from __future__ import annotations

import torch

from course_lib.checks import Mistake
from course_lib.checks.grpo_info_mistakes import info_adv, info_clip_fraction, info_kl, ratio_of
from course_lib.grpo import aggregate_loss, group_advantages, grpo_loss, kl_estimate, masked_mean
from course_lib.ppo import clipped_surrogate


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
    kl_token_mean=False,
    coef_on_surrogate=False,
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
        adv_used = a.detach()  # (B, G): what the info's mistakes report from
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
        if coef_on_surrogate:  # kl_coef * surrogate + KL: the coefficient weighs the wrong term
            surrogate, coef = coef * surrogate, 1.0
        k = None
        if logp_ref is not None:
            k = (
                kl(logp, logp_ref, kind)
                if kl
                else kl_estimate(logp_old.detach() if old_kl else logp, logp_ref.detach(), kind)
            )
            if not kl_token_mean:
                surrogate = surrogate + coef * k
        loss = (
            agg(surrogate, mask)
            if agg
            else aggregate_loss(surrogate, mask, loss_agg, None if ignore_max_len else max_len)
        )
        if kl_token_mean and k is not None:  # the KL averaged apart, over every valid token of the batch
            loss = loss + coef * masked_mean(k, mask)
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
        if adv_fn is not None or renormalise_adv:  # the advantages are the student's own: so is their magnitude
            right["adv_abs_mean"] = float(adv_used.abs().mean())
        if info is not None:
            right = {
                **right,
                **info(
                    logp.detach(),
                    logp_old.detach(),
                    logp_ref,
                    adv_used,
                    mask.bool(),
                    clip_eps,
                    clip_eps if clip_eps_high is None else clip_eps_high,
                    kl_coef,
                    kl_kind,
                ),
            }
        if rewards is None:
            right.pop("reward_mean", None)  # promised only with rewards
        return loss, right

    return loss_fn


def surrogate_attached(*, old=False, adv=False):
    def surrogate(logp, logp_old, a, clip_eps, high):
        ratio = torch.exp(logp - (logp_old if old else logp_old.detach()))
        a = a if adv else a.detach()
        return -torch.minimum(ratio * a, ratio.clamp(1 - clip_eps, 1 + high) * a)

    return surrogate


GRPO_LOSS_MISTAKES = [
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
        "there is no clip: the per-token loss is -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A), not -ratio * A",
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
                -torch.maximum(ratio_of(p, p_old.detach()) * a, ratio_of(p, p_old.detach()).clamp(1 - eps, 1 + hi) * a)
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
        "the KL penalty is in the loss's value but sends no gradient: it is computed on detached log-probs "
        "(logp.detach() or .item()); only logp_ref is a constant, kl_estimate(logp, logp_ref.detach(), kl_kind)",
        wrong_grpo(kl=lambda p, q, kind: kl_estimate(p.detach(), q.detach(), kind)),
    ),
    Mistake(
        "the KL penalty is missing: add kl_coef * kl_estimate(logp, logp_ref, kl_kind) to every token's loss",
        wrong_grpo(kl_coef_used=0.0),
    ),
    Mistake("kl_coef is ignored (0.04 is used whatever is passed): add kl_coef * KL", wrong_grpo(kl_coef_used=0.04)),
    Mistake("the KL penalty has no coefficient: add kl_coef * KL, not KL", wrong_grpo(kl_coef_used=1.0)),
    Mistake(
        "with kl_coef = 0 the KL is skipped and info's kl is 0; info reports the KL estimate whenever logp_ref is "
        "given, whatever kl_coef weighs it by in the loss",
        wrong_grpo(info=lambda p, p_old, q, adv, valid, eps, high, coef, kind: {"kl": 0.0} if coef == 0 else {}),
    ),
    Mistake(
        "kl_coef multiplies the clipped surrogate and the KL is added bare; the coefficient weighs the KL "
        "penalty: surrogate + kl_coef * KL",
        wrong_grpo(coef_on_surrogate=True),
    ),
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
            info=lambda p, p_old, q, adv, valid, eps, high, coef, kind: {
                "adv_abs_mean": float(adv[..., None].expand_as(p).abs()[valid].mean())
            }
        ),
    ),
    Mistake(
        "info's clip_fraction counts only where the clip binds; the course counts every valid token whose "
        "ratio lies outside [1 - clip_eps, 1 + clip_eps_high], as ppo.clipped_surrogate_loss",
        wrong_grpo(info=info_clip_fraction(binding=True)),
    ),
    Mistake(
        "info's clip_fraction ignores clip_eps_high: it counts the tokens whose ratio lies outside "
        "[1 - clip_eps, 1 + clip_eps_high], the range the loss clips to",
        wrong_grpo(info=info_clip_fraction(bounds="low")),
    ),
    Mistake(
        "clip_eps_high is used on both sides: the ratio is clipped to [1 - clip_eps, 1 + clip_eps_high], "
        "clip_eps below and clip_eps_high above",
        wrong_grpo(
            per_token=lambda p, p_old, a, eps, hi: (
                -torch.minimum(ratio_of(p, p_old.detach()) * a, ratio_of(p, p_old.detach()).clamp(1 - hi, 1 + hi) * a)
            ),
            info=info_clip_fraction(bounds="high"),
        ),
    ),
    Mistake(
        "the KL term is averaged apart, over every valid token of the batch, and added to the aggregated loss; "
        "it is part of every token's loss, kl_coef * KL added before aggregate_loss, so it is aggregated the "
        "loss_agg way too",
        wrong_grpo(kl_token_mean=True),
    ),
    Mistake(
        "the clipped surrogate sends no gradient (its ratio is computed from a detached logp, or under "
        "torch.no_grad()): only the KL term trains the policy; the ratio is exp(logp - logp_old.detach()), with "
        "logp as it comes and the graph on",
        wrong_grpo(
            per_token=lambda p, p_old, a, eps, hi: (
                -torch.minimum(
                    ratio_of(p.detach(), p_old.detach()) * a,
                    ratio_of(p.detach(), p_old.detach()).clamp(1 - eps, 1 + hi) * a,
                )
            )
        ),
    ),
    *(
        Mistake(
            f"the group advantages use eps = {constant:g}; the course's is 1e-6 (group_advantages' default): "
            "(r - mean) / (std + 1e-6)",
            wrong_grpo(adv_fn=lambda r, n, constant=constant: group_advantages(r.detach(), n, eps=constant)),
        )
        for constant in (1e-4, 1e-8, 1e-5)
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
    *(
        Mistake(
            f"info's reward_mean is {words}; it is the mean reward of the batch, rewards.mean()",
            wrong_grpo(
                info=lambda p, p_old, q, adv, valid, eps, high, coef, kind, value=value: {"reward_mean": value(adv)}
            ),
        )
        for words, value in (
            ("the mean |advantage|", lambda a: float(a.abs().mean())),
            ("the mean advantage (about 0 after centring)", lambda a: float(a.mean())),
        )
    ),
    Mistake(
        "info's adv_abs_mean is the advantages' std; report the mean of their absolute value, adv.abs().mean()",
        wrong_grpo(info=info_adv(lambda a: a.std())),
    ),
]


# aggregate_loss's mistake of an empty response (check_aggregate_loss builds it in three forms)
EMPTY_LEFT_OUT = (
    "an empty response (no valid token) is left out of the mean over responses (as some verl versions do); "
    "the course counts it as a response that contributes 0: divide the sum over responses by their number, "
    "empty ones included"
)
