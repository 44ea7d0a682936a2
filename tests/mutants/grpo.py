"""Classic wrong (and correct) ways to write the exercises of chapter 06.

``group_advantages(rewards[B, G], normalize_std=True, eps=1e-6)``,
``kl_estimate(logp, logp_ref, kind)``, ``aggregate_loss(per_token[..., T], mask, mode, max_len=None)``
and ``grpo_loss(...)``, checked by the ``check_*`` functions of ``course_lib.grpo``.
"""

import torch


def clipped_surrogate(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    """PPO's clipped surrogate written out, as a student writes it inside grpo_loss (course_lib's own would be
    borrowed code: grpo_loss may call group_advantages, aggregate_loss and kl_estimate only)."""
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())
    adv = adv.detach()
    return -torch.min(ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + high) * adv)


# ---------------------------------------------------------------------------
# group_advantages: wrong
# ---------------------------------------------------------------------------


def _advantages(rewards, normalize_std, eps, *, mean_dim=-1, std=None, centre=True, add_eps=True):
    adv = rewards - rewards.mean(dim=mean_dim, keepdim=True) if centre else rewards.clone()
    if not normalize_std:
        return adv
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    spread = std(rewards) if std else rewards.std(dim=-1, keepdim=True)
    return adv / (spread + eps) if add_eps else adv / spread


def advantages_population_std(rewards, normalize_std=True, eps=1e-6):
    return _advantages(rewards, normalize_std, eps, std=lambda r: r.std(dim=-1, keepdim=True, correction=0))


def advantages_no_eps(rewards, normalize_std=True, eps=1e-6):
    return _advantages(rewards, normalize_std, eps, add_eps=False)


def advantages_batch_mean(rewards, normalize_std=True, eps=1e-6):
    return _advantages(rewards, normalize_std, eps, mean_dim=0)


def advantages_not_centred(rewards, normalize_std=True, eps=1e-6):
    return _advantages(rewards, normalize_std, eps, centre=False)


def advantages_always_normalised(rewards, normalize_std=True, eps=1e-6):
    return _advantages(rewards, True, eps)


def advantages_nan_for_group_of_one(rewards, normalize_std=True, eps=1e-6):
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    return adv / (rewards.std(dim=-1, keepdim=True) + eps) if normalize_std else adv


def advantages_eps_ignored(rewards, normalize_std=True, eps=1e-6):
    return _advantages(rewards, normalize_std, 1e-6)


def advantages_whole_batch(rewards, normalize_std=True, eps=1e-6):
    centred = rewards - rewards.mean()
    return centred / (rewards.std() + eps) if normalize_std else centred


def advantages_normalize_std_ignored(rewards, normalize_std=True, eps=1e-6):
    return rewards - rewards.mean(dim=-1, keepdim=True)


# ---------------------------------------------------------------------------
# group_advantages: correct variants
# ---------------------------------------------------------------------------


def advantages_trl_style(rewards, normalize_std=True, eps=1e-6):
    """TRL's layout: a flat vector of B * G rewards, group statistics repeated G times."""
    B, G = rewards.shape
    flat = rewards.reshape(-1)  # (B * G,)
    mean = flat.view(B, G).mean(dim=1).repeat_interleave(G)
    adv = flat - mean
    spread = flat.view(B, G).max(dim=1).values - flat.view(B, G).min(dim=1).values
    adv = torch.where(spread.repeat_interleave(G) == 0, torch.zeros_like(adv), adv)  # all-equal groups: zeros
    if normalize_std:
        if G == 1:
            return torch.zeros_like(rewards)
        std = flat.view(B, G).std(dim=1).repeat_interleave(G)
        adv = adv / (std + eps)
    return adv.view(B, G)


# ---------------------------------------------------------------------------
# kl_estimate: wrong
# ---------------------------------------------------------------------------


def _kl(logp, logp_ref, kind, **wrong):
    log_r = logp_ref - logp
    if kind in wrong:
        return wrong[kind](logp, logp_ref)
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    return torch.exp(log_r) - log_r - 1


def kl_k1_reversed(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k1=lambda p, q: q - p)


def kl_k3_ratio_inverted(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k3=lambda p, q: torch.exp(p - q) - (p - q) - 1)


def kl_k3_without_minus_one(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k3=lambda p, q: torch.exp(q - p) - (q - p))


def kl_k2_without_half(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k2=lambda p, q: (p - q) ** 2)


def kl_k3_sign_of_log_term(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k3=lambda p, q: torch.exp(q - p) + (q - p) - 1)


def kl_k1_ratio_not_log_ratio(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k1=lambda p, q: torch.exp(p - q))


def kl_detached(logp, logp_ref, kind):
    return _kl(logp.detach(), logp_ref, kind)


def kl_k1_returns_k3(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k1=lambda p, q: torch.exp(q - p) - (q - p) - 1)


def kl_k3_returns_k1(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k3=lambda p, q: p - q)


def kl_k2_k3_swapped(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k2=lambda p, q: torch.exp(q - p) - (q - p) - 1, k3=lambda p, q: 0.5 * (p - q) ** 2)


def kl_k1_k2_swapped(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k1=lambda p, q: 0.5 * (p - q) ** 2, k2=lambda p, q: p - q)


def kl_every_sign_flipped(logp, logp_ref, kind):
    return -_kl(logp, logp_ref, kind)


def kl_k1_absolute(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k1=lambda p, q: torch.abs(p - q))


def kl_k3_other_direction(logp, logp_ref, kind):
    # r log r - (r - 1), with r = pi_ref / pi_theta: an estimate of KL(pi_ref || pi_theta).
    def k3(p, q):
        r = torch.exp(q - p)
        return r * torch.log(r) - (r - 1)

    return _kl(logp, logp_ref, kind, k3=k3)


def kl_k3_plus_one(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k3=lambda p, q: torch.exp(q - p) - (q - p) + 1)


# ---------------------------------------------------------------------------
# kl_estimate: correct variants
# ---------------------------------------------------------------------------


def kl_clamped_like_verl(logp, logp_ref, kind):
    """Issue 44's student: a clamp copied from a library (verl clamps its low-variance KL to [-10, 10])."""
    return torch.clamp(_kl(logp, logp_ref, kind), min=-10, max=10)


def kl_via_ratio(logp, logp_ref, kind):
    """Written with the ratio r = pi_ref / pi_theta, as in Schulman's note."""
    r = torch.exp(logp_ref - logp)
    return {"k1": -torch.log(r), "k2": 0.5 * torch.log(r) ** 2, "k3": (r - 1) - torch.log(r)}[kind]


# ---------------------------------------------------------------------------
# aggregate_loss: wrong
# ---------------------------------------------------------------------------


def _aggregate(per_token, mask, mode, max_len=None, **wrong):
    mask = mask.to(per_token.dtype)
    L = per_token.shape[-1] if max_len is None else max_len
    if mode in wrong:
        return wrong[mode](per_token, mask, L)
    kept = torch.where(mask > 0, per_token, 0.0)  # padding may hold inf: selected, not multiplied
    if mode == "token-mean":
        return kept.sum() / mask.sum().clamp(min=1)
    if mode == "seq-mean-token-mean":
        return (kept.sum(-1) / mask.sum(-1).clamp(min=1)).mean()
    return (kept.sum(-1) / L).mean()


def aggregate_token_mean_for_seq_mean(per_token, mask, mode, max_len=None):
    return _aggregate(
        per_token, mask, mode, max_len, **{"seq-mean-token-mean": lambda x, m, L: (x * m).sum() / m.sum().clamp(min=1)}
    )


def aggregate_seq_mean_for_token_mean(per_token, mask, mode, max_len=None):
    return _aggregate(
        per_token,
        mask,
        mode,
        max_len,
        **{"token-mean": lambda x, m, L: ((x * m).sum(-1) / m.sum(-1).clamp(min=1)).mean()},
    )


def aggregate_dr_grpo_by_valid_tokens(per_token, mask, mode, max_len=None):
    return _aggregate(
        per_token,
        mask,
        mode,
        max_len,
        **{"seq-mean-token-sum-norm": lambda x, m, L: ((x * m).sum(-1) / m.sum(-1).clamp(min=1)).mean()},
    )


def aggregate_dr_grpo_ignores_max_len(per_token, mask, mode, max_len=None):
    return _aggregate(
        per_token,
        mask,
        mode,
        max_len,
        **{"seq-mean-token-sum-norm": lambda x, m, L: ((x * m).sum(-1) / x.shape[-1]).mean()},
    )


def aggregate_dr_grpo_verl_sum(per_token, mask, mode, max_len=None):
    return _aggregate(per_token, mask, mode, max_len, **{"seq-mean-token-sum-norm": lambda x, m, L: (x * m).sum() / L})


def aggregate_mask_ignored(per_token, mask, mode, max_len=None):
    return _aggregate(per_token, torch.ones_like(per_token), mode, max_len)


def aggregate_padding_in_denominator(per_token, mask, mode, max_len=None):
    return _aggregate(
        per_token,
        mask,
        mode,
        max_len,
        **{"token-mean": lambda x, m, L: (x * m).mean(), "seq-mean-token-mean": lambda x, m, L: (x * m).mean()},
    )


def aggregate_nan_on_empty_response(per_token, mask, mode, max_len=None):
    return _aggregate(
        per_token, mask, mode, max_len, **{"seq-mean-token-mean": lambda x, m, L: ((x * m).sum(-1) / m.sum(-1)).mean()}
    )


# ---------------------------------------------------------------------------
# aggregate_loss: correct variants
# ---------------------------------------------------------------------------


def aggregate_loop(per_token, mask, mode, max_len=None):
    """Response by response, token by token."""
    T = per_token.shape[-1]
    rows, masks = per_token.reshape(-1, T), mask.reshape(-1, T).bool()
    L = T if max_len is None else max_len
    zero = torch.where(mask.bool(), per_token, 0.0).sum() * 0.0  # a 0 on the graph; padding may hold inf
    per_response, total, count = [], zero, 0
    for row, valid in zip(rows, masks):
        row_sum, n = zero, 0
        for t in range(T):
            if valid[t]:
                row_sum = row_sum + row[t]
                n += 1
        total, count = total + row_sum, count + n
        per_response.append(row_sum / max(n, 1) if mode == "seq-mean-token-mean" else row_sum / L)
    if mode == "token-mean":
        return total / max(count, 1)
    return torch.stack(per_response).mean()


# ---------------------------------------------------------------------------
# grpo_loss: wrong
# ---------------------------------------------------------------------------


def _grpo(
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
    *,
    kl=None,
    adv_fn=None,
    surrogate=None,
    agg=None,
    info=None,
    kl_coef_used=None,
    kl_kind_used=None,
):
    if adv is not None:
        a = adv.detach()
    else:
        a = adv_fn(rewards, normalize_std) if adv_fn else advantages_trl_style(rewards.detach(), normalize_std)
    own_adv = a if adv_fn else adv  # a student's diagnostics report the advantages their loss used
    a = a[..., None].expand_as(logp)  # (B, G, T)
    high = clip_eps if clip_eps_high is None else clip_eps_high
    per_token = (
        surrogate(logp, logp_old, a, clip_eps, high)
        if surrogate
        else clipped_surrogate(logp, logp_old, a, clip_eps, clip_eps_high)
    )
    if logp_ref is not None:
        kind = kl_kind if kl_kind_used is None else kl_kind_used
        coef = kl_coef if kl_coef_used is None else kl_coef_used
        per_token = per_token + coef * (kl(logp, logp_ref, kind) if kl else _kl(logp, logp_ref.detach(), kind))
    loss = agg(per_token, mask) if agg else _aggregate(per_token, mask, loss_agg, max_len)
    return loss, _grpo_info(
        logp,
        logp_old,
        logp_ref,
        rewards,
        mask,
        clip_eps,
        kl_kind,
        normalize_std,
        clip_eps_high,
        **(info or {}),
        adv=own_adv,
    )


def _grpo_info(
    logp,
    logp_old,
    logp_ref,
    rewards,
    mask,
    clip_eps,
    kl_kind,
    normalize_std,
    clip_eps_high=None,
    *,
    binding=False,
    kl_over_all=False,
    adv_mean=False,
    adv=None,
):
    with torch.no_grad():
        valid = mask.bool()
        high = clip_eps if clip_eps_high is None else clip_eps_high
        ratio = torch.exp(logp - logp_old)
        a = advantages_trl_style(rewards, normalize_std) if adv is None else adv.detach()
        a_tok = a[..., None].expand_as(logp)
        if binding:
            out = ((ratio > 1 + high) & (a_tok > 0)) | ((ratio < 1 - clip_eps) & (a_tok < 0))
        else:
            out = (ratio > 1 + high) | (ratio < 1 - clip_eps)
        if logp_ref is None:
            kl = 0.0
        else:
            k = _kl(logp, logp_ref, kl_kind)
            kl = (k.mean() if kl_over_all else k[valid].mean()).item()
        info = {
            "clip_fraction": out[valid].double().mean().item(),
            "kl": kl,
            "adv_abs_mean": (a.mean() if adv_mean else a.abs().mean()).item(),
        }
        if rewards is not None:
            info["reward_mean"] = rewards.mean().item()
        return info


def grpo_kl_reversed(logp, logp_old, logp_ref, rewards, mask, **kw):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw, kl=lambda p, q, kind: _kl(q.detach(), p, kind))


def grpo_kl_subtracted(logp, logp_old, logp_ref, rewards, mask, **kw):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw, kl=lambda p, q, kind: -_kl(p, q.detach(), kind))


def grpo_old_logp_attached(logp, logp_old, logp_ref, rewards, mask, **kw):
    def surrogate(p, p_old, a, eps, high):
        ratio = torch.exp(p - p_old)
        return -torch.minimum(ratio * a, ratio.clamp(1 - eps, 1 + high) * a)

    return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw, surrogate=surrogate)


def grpo_rewards_attached(logp, logp_old, logp_ref, rewards, mask, **kw):
    # Its own surrogate, which (unlike ppo.clipped_surrogate) does not detach the advantages.
    def surrogate(p, p_old, a, eps, high):
        ratio = torch.exp(p - p_old.detach())
        return -torch.minimum(ratio * a, ratio.clamp(1 - eps, 1 + high) * a)

    return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw, adv_fn=advantages_trl_style, surrogate=surrogate)


def grpo_ref_attached(logp, logp_old, logp_ref, rewards, mask, **kw):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw, kl=_kl)


def grpo_batch_normalised(logp, logp_old, logp_ref, rewards, mask, **kw):
    def adv(r, normalize_std):
        r = r.detach()
        return (r - r.mean()) / (r.std() + 1e-6) if normalize_std else r - r.mean()

    return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw, adv_fn=adv)


def grpo_always_token_mean(logp, logp_old, logp_ref, rewards, mask, **kw):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw, agg=lambda x, m: (x * m).sum() / m.sum().clamp(min=1))


def grpo_unclipped(logp, logp_old, logp_ref, rewards, mask, **kw):
    return _grpo(
        logp,
        logp_old,
        logp_ref,
        rewards,
        mask,
        **kw,
        surrogate=lambda p, p_old, a, eps, high: -torch.exp(p - p_old.detach()) * a,
    )


def grpo_no_kl(logp, logp_old, logp_ref, rewards, mask, **kw):
    return _grpo(logp, logp_old, None, rewards, mask, **kw)


def grpo_kl_value_only(logp, logp_old, logp_ref, rewards, mask, **kw):  # the penalty read off as a number
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw, kl=lambda p, q, kind: _kl(p, q, kind).detach())


def grpo_ignores_clip_eps_high(logp, logp_old, logp_ref, rewards, mask, clip_eps_high=None, **kw):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw)


def grpo_clipped_term_only(logp, logp_old, logp_ref, rewards, mask, **kw):
    return _grpo(
        logp,
        logp_old,
        logp_ref,
        rewards,
        mask,
        **kw,
        surrogate=lambda p, p_old, a, eps, high: -torch.exp(p - p_old.detach()).clamp(1 - eps, 1 + high) * a,
    )


def grpo_kl_coef_ignored(logp, logp_old, logp_ref, rewards, mask, **kw):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw, kl_coef_used=0.04)


def grpo_kl_kind_ignored(logp, logp_old, logp_ref, rewards, mask, **kw):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw, kl_kind_used="k3")


def grpo_normalize_std_ignored(logp, logp_old, logp_ref, rewards, mask, normalize_std=True, **kw):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw, normalize_std=True)


def grpo_clip_fraction_binding(logp, logp_old, logp_ref, rewards, mask, **kw):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw, info={"binding": True})


def grpo_kl_info_over_padding(logp, logp_old, logp_ref, rewards, mask, **kw):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw, info={"kl_over_all": True})


def grpo_adv_info_signed(logp, logp_old, logp_ref, rewards, mask, **kw):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw, info={"adv_mean": True})


def grpo_info_missing_kl(logp, logp_old, logp_ref, rewards, mask, **kw):
    loss, info = _grpo(logp, logp_old, logp_ref, rewards, mask, **kw)
    del info["kl"]
    return loss, info


def grpo_kl_from_old_policy(logp, logp_old, logp_ref, rewards, mask, **kw):
    return _grpo(
        logp, logp_old, logp_ref, rewards, mask, **kw, kl=lambda p, q, kind: _kl(logp_old.detach(), q.detach(), kind)
    )


def grpo_ratio_against_reference(logp, logp_old, logp_ref, rewards, mask, **kw):
    if logp_ref is None:
        return _grpo(logp, logp_old, logp_ref, rewards, mask, **kw)
    loss, _ = _grpo(logp, logp_ref, logp_ref, rewards, mask, **kw)
    return loss, _grpo(logp.detach(), logp_old, logp_ref, rewards, mask, **kw)[1]


def grpo_adv_centred_again(logp, logp_old, logp_ref, rewards, mask, adv=None, **kw):
    """Advantages passed in go through group_advantages again."""
    if adv is not None:
        adv = advantages_trl_style(adv.detach(), kw.get("normalize_std", True))
    return _grpo(logp, logp_old, logp_ref, rewards, mask, adv=adv, **kw)


def grpo_adv_info_per_token(logp, logp_old, logp_ref, rewards, mask, normalize_std=True, **kw):
    loss, info = _grpo(logp, logp_old, logp_ref, rewards, mask, normalize_std=normalize_std, **kw)
    a = advantages_trl_style(rewards, normalize_std)[..., None].expand_as(logp)
    info["adv_abs_mean"] = a.abs()[mask.bool()].mean().item()
    return loss, info


# ---------------------------------------------------------------------------
# grpo_loss: correct variants
# ---------------------------------------------------------------------------


def grpo_trl_layout(
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
    """Flattened to (B * G, T) as TRL holds completions, the clipped term written out."""
    B, G, T = logp.shape
    logp, logp_old, mask = logp.reshape(B * G, T), logp_old.reshape(B * G, T).detach(), mask.reshape(B * G, T)
    mask = mask.to(logp.dtype)
    given = adv
    if given is None:
        given = advantages_trl_style(rewards.detach(), normalize_std)
    adv = given.detach().reshape(B * G, 1)  # (B * G, 1)
    coef_1 = torch.exp(logp - logp_old)
    coef_2 = torch.clamp(coef_1, 1 - clip_eps, 1 + (clip_eps if clip_eps_high is None else clip_eps_high))
    per_token = -torch.min(coef_1 * adv, coef_2 * adv)  # (B * G, T)
    if logp_ref is not None:
        per_token = per_token + kl_coef * _kl(logp, logp_ref.reshape(B * G, T).detach(), kl_kind)
    info = _grpo_info(
        logp.detach().reshape(B, G, T),
        logp_old.reshape(B, G, T),
        logp_ref,
        None if rewards is None else rewards.detach(),
        mask.reshape(B, G, T),
        clip_eps,
        kl_kind,
        normalize_std,
        clip_eps_high,
        adv=given,
    )
    return aggregate_loop(per_token, mask, loss_agg, max_len), info


MUTANTS = [
    ("group_advantages", advantages_population_std, "Bessel"),
    ("group_advantages", advantages_no_eps, "add eps"),
    ("group_advantages", advantages_batch_mean, "mean is over the batch"),
    ("group_advantages", advantages_not_centred, "subtract the group mean"),
    ("group_advantages", advantages_always_normalised, "normalize_std=False"),
    ("group_advantages", advantages_nan_for_group_of_one, "group of one"),
    ("group_advantages", advantages_eps_ignored, "eps argument is ignored"),
    ("group_advantages", advantages_whole_batch, "whole batch"),
    ("group_advantages", advantages_normalize_std_ignored, "normalize_std is ignored"),
    ("kl_estimate", kl_k1_reversed, "reversed"),
    ("kl_estimate", kl_k3_ratio_inverted, "inverted"),
    ("kl_estimate", kl_k3_without_minus_one, "-1"),
    ("kl_estimate", kl_k2_without_half, "0.5"),
    ("kl_estimate", kl_k3_sign_of_log_term, "wrong sign"),
    ("kl_estimate", kl_k1_ratio_not_log_ratio, "not the ratio"),
    ("kl_estimate", kl_detached, "no gradient"),
    ("kl_estimate", kl_k1_returns_k3, "kind='k1' returns the k3 estimate"),
    ("kl_estimate", kl_k3_returns_k1, "kind='k3' returns the k1 estimate"),
    ("kl_estimate", kl_k2_k3_swapped, "k2 and k3 are swapped"),
    ("kl_estimate", kl_k1_k2_swapped, "k1 and k2 are swapped"),
    ("kl_estimate", kl_every_sign_flipped, "sign is flipped"),
    ("kl_estimate", kl_k1_absolute, "absolute value"),
    ("kl_estimate", kl_k3_other_direction, "KL(pi_ref || pi_theta)"),
    ("kl_estimate", kl_k3_plus_one, "constant has the wrong sign"),
    ("kl_estimate", kl_clamped_like_verl, "clamped"),
    ("aggregate_loss", aggregate_token_mean_for_seq_mean, "token mean (DAPO)"),
    ("aggregate_loss", aggregate_seq_mean_for_token_mean, "all valid tokens"),
    ("aggregate_loss", aggregate_dr_grpo_by_valid_tokens, "constant max_len"),
    ("aggregate_loss", aggregate_dr_grpo_ignores_max_len, "divided by T"),
    ("aggregate_loss", aggregate_dr_grpo_verl_sum, "verl"),
    ("aggregate_loss", aggregate_mask_ignored, "mask is ignored"),
    ("aggregate_loss", aggregate_padding_in_denominator, "denominator"),
    ("aggregate_loss", aggregate_nan_on_empty_response, "empty response"),
    ("grpo_loss", grpo_kl_reversed, "reversed direction"),
    ("grpo_loss", grpo_kl_subtracted, "subtracted"),
    ("grpo_loss", grpo_old_logp_attached, "logp_old"),
    ("grpo_loss", grpo_rewards_attached, "rewards"),
    ("grpo_loss", grpo_ref_attached, "frozen"),
    ("grpo_loss", grpo_batch_normalised, "whole batch"),
    ("grpo_loss", grpo_always_token_mean, "loss_agg is ignored"),
    ("grpo_loss", grpo_ignores_clip_eps_high, "clip_eps_high is ignored"),
    ("grpo_loss", grpo_unclipped, "there is no clip"),
    ("grpo_loss", grpo_no_kl, "KL penalty is missing"),
    ("grpo_loss", grpo_kl_value_only, "sends no gradient"),
    ("grpo_loss", grpo_clipped_term_only, "only the clipped term"),
    ("grpo_loss", grpo_kl_coef_ignored, "kl_coef is ignored"),
    ("grpo_loss", grpo_kl_kind_ignored, "kl_kind is ignored"),
    ("grpo_loss", grpo_normalize_std_ignored, "normalize_std is ignored"),
    ("grpo_loss", grpo_clip_fraction_binding, "clip_fraction counts only where the clip binds"),
    ("grpo_loss", grpo_kl_info_over_padding, "kl averages padding"),
    ("grpo_loss", grpo_adv_info_signed, "adv_abs_mean is the mean advantage"),
    ("grpo_loss", grpo_info_missing_kl, "no 'kl'"),
    ("grpo_loss", grpo_kl_from_old_policy, "computed from logp_old"),
    ("grpo_loss", grpo_ratio_against_reference, "denominator is the reference policy"),
    ("grpo_loss", grpo_adv_info_per_token, "averaged over tokens"),
    ("grpo_loss", grpo_adv_centred_again, "used as they are"),
]

VARIANTS = [
    ("group_advantages", advantages_trl_style),
    ("kl_estimate", kl_via_ratio),
    ("aggregate_loss", aggregate_loop),
    ("grpo_loss", grpo_trl_layout),
]


def advantages_no_equal_guard(rewards, normalize_std=True, eps=1e-6):
    """Issue 44's student: the textbook formula, with no exact zero for an all-equal group (0.06 in float32)."""
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


MUTANTS.append(("group_advantages", advantages_no_equal_guard, "not set to zero exactly"))


def aggregate_token_mean_of_nothing(per_token, mask, mode, max_len=None):
    """Issue 44's student: the token mean without a floor, NaN on a batch of empty responses."""
    return _aggregate(
        per_token, mask, mode, max_len, **{"token-mean": lambda x, m, L: torch.where(m > 0, x, 0.0).sum() / m.sum()}
    )


MUTANTS.append(("aggregate_loss", aggregate_token_mean_of_nothing, "no valid token"))


# Round seven of issue 44: new wrong answers to chapter(s) 06 07, written as students write them, each with the phrase
# its message names it by (tests/catalogue_round7_05_08.py).
from catalogue_round7_05_08 import ROWS as ROUND_SEVEN  # noqa: E402

MUTANTS += [(row["exercise"], row["student"], row["named"]) for row in ROUND_SEVEN if row["chapter"] in ("06", "07")]
