"""Round seven of the catalogue (issue 44, item 3): new wrong answers to chapters 05 to 08, each the kind a new
student plausibly writes, none already in the catalogue or in the class files.

Each student is a function (a class for chapter 05's ``PPOLoss``) with its exercise's signature, written as one of
the students of ``class_six_students.py`` would (a port of CleanRL, TRL or verl; a loop writer; a vectoriser; one
careless with masks, edge cases, dtypes or strings). ``ROWS`` lists them with the truth: what each did wrong, in
one sentence. ``tests/test_catalogue_round7_05_08.py`` asserts that each is rejected and that the first line of
its message names what it did (``NAMED``, a phrase of that line). Rerun the whole table with
``python tests/run_class_four.py --students catalogue_round7_05_08``. This module holds no tests.
"""

import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import nn

from course_lib.grpo import grpo_loss
from course_lib.policy_gradient import gather_log_probs

# ---------------------------------------------------------------------------------------------------------------
# Chapter 05: clipped_surrogate_loss
# ---------------------------------------------------------------------------------------------------------------


def _surrogate(
    logp,
    logp_old,
    adv,
    clip_eps,
    mask=None,
    clip_eps_high=None,
    *,
    per_row=False,
    kl_over_padding=False,
    fraction_high=True,
    dual_clip=None,
    where_after=False,
    kl_sign=1.0,
    fraction_scale=1.0,
    normalise_adv=False,
    detach_logp=False,
    high_both_sides=False,
):
    """A right clipped_surrogate_loss, with one slip switched on by its options (each student below sets one)."""
    high = clip_eps if clip_eps_high is None else clip_eps_high
    low = high if high_both_sides else clip_eps
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    adv = adv.detach()
    if normalise_adv:  # CleanRL's norm_adv, done inside the loss
        adv = (adv - adv[valid].mean()) / (adv[valid].std() + 1e-8)
    if detach_logp:
        logp = logp.detach()
    if where_after:  # the ratio of the padding too, its loss zeroed afterwards
        log_ratio = logp - logp_old.detach()
    else:
        log_ratio = torch.where(valid, logp - logp_old.detach(), torch.zeros_like(logp))
    ratio = torch.exp(log_ratio)
    per = -torch.minimum(ratio * adv, ratio.clamp(1 - low, 1 + high) * adv)
    if dual_clip is not None:  # Ye et al. 2020: for adv < 0, the loss is at most -dual_clip * adv
        per = torch.where(adv < 0, torch.minimum(per, -dual_clip * adv), per)
    per = torch.where(valid, per, torch.zeros_like(per))
    n = valid.sum().clamp(min=1)
    if per_row:
        rows = per.sum(-1) / valid.sum(-1).clamp(min=1)
        loss = rows.mean()
    else:
        loss = per.sum() / n
    with torch.no_grad():
        r = torch.where(valid, ratio, torch.ones_like(ratio))
        lr = torch.where(valid, log_ratio, torch.zeros_like(log_ratio))
        top = high if fraction_high else clip_eps
        outside = ((r < 1 - low) | (r > 1 + top)) & valid
        binding = (((r > 1 + high) & (adv > 0)) | ((r < 1 - low) & (adv < 0))) & valid
        k3 = (r - 1) - lr
        kl_n = valid.numel() if kl_over_padding else n
        info = {
            "clip_fraction": fraction_scale * float(outside.sum()) / float(n),
            "clip_active_fraction": float(binding.sum()) / float(n),
            "approx_kl": kl_sign * float(k3.sum()) / float(kl_n),
        }
    return loss, info


def w05_csl_seq_mean(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, per_row=True)


def w05_csl_kl_over_padding(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, kl_over_padding=True)


def w05_csl_fraction_ignores_high(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, fraction_high=False)


def w05_csl_dual_clip(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, dual_clip=3.0)


def w05_csl_where_after_ratio(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, where_after=True)


def w05_csl_kl_sign(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, kl_sign=-1.0)


def w05_csl_fraction_percent(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, fraction_scale=100.0)


def w05_csl_normalises_adv(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, normalise_adv=True)


def w05_csl_detached_logp(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, detach_logp=True)


def w05_csl_high_both_sides(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    return _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high, high_both_sides=True)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 05: value_loss
# ---------------------------------------------------------------------------------------------------------------


def _value(values, returns, values_old=None, clip_eps=None, mask=None, *, slip=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    target = returns.detach()
    v = values
    if slip == "detach_values":  # the wrong side detached: the critic gets no gradient, the targets do
        v, target = values.detach(), returns
    error = (v - target) ** 2
    if slip == "abs":
        error = (v - target).abs()
    if clip_eps is not None:
        old = values_old.detach()
        if slip == "relative":  # a clip range relative to the old value, as for a ratio
            clipped = torch.minimum(torch.maximum(v, old * (1 - clip_eps)), old * (1 + clip_eps))
        else:
            clipped = old + (v - old).clamp(-clip_eps, clip_eps)
        if slip == "detach_clipped":
            clipped = clipped.detach()
        clipped_error = (clipped - target).abs() if slip == "abs" else (clipped - target) ** 2
        if slip == "average":
            error = 0.5 * (error + clipped_error)
        else:
            error = torch.maximum(error, clipped_error)
    masked = torch.where(valid, error, torch.zeros_like(error))
    if slip == "per_row":
        return 0.5 * (masked.sum(-1) / valid.sum(-1).clamp(min=1)).mean()
    if slip == "sum_last":
        return 0.5 * masked.sum(-1).mean()
    if slip == "rmse":
        return 0.5 * torch.sqrt(masked.sum() / valid.sum().clamp(min=1))
    if slip == "square_of_mean":
        diff = torch.where(valid, v - target, torch.zeros_like(v))
        return 0.5 * (diff.sum() / valid.sum().clamp(min=1)) ** 2
    return 0.5 * masked.sum() / valid.sum().clamp(min=1)


def w05_value_detached_values(values, returns, values_old=None, clip_eps=None, mask=None):
    return _value(values, returns, values_old, clip_eps, mask, slip="detach_values")


def w05_value_abs_error(values, returns, values_old=None, clip_eps=None, mask=None):
    return _value(values, returns, values_old, clip_eps, mask, slip="abs")


def w05_value_relative_clip(values, returns, values_old=None, clip_eps=None, mask=None):
    return _value(values, returns, values_old, clip_eps, mask, slip="relative")


def w05_value_clipped_detached(values, returns, values_old=None, clip_eps=None, mask=None):
    return _value(values, returns, values_old, clip_eps, mask, slip="detach_clipped")


def w05_value_average_of_errors(values, returns, values_old=None, clip_eps=None, mask=None):
    return _value(values, returns, values_old, clip_eps, mask, slip="average")


def w05_value_per_row_mean(values, returns, values_old=None, clip_eps=None, mask=None):
    return _value(values, returns, values_old, clip_eps, mask, slip="per_row")


def w05_value_sum_last_axis(values, returns, values_old=None, clip_eps=None, mask=None):
    return _value(values, returns, values_old, clip_eps, mask, slip="sum_last")


def w05_value_rmse(values, returns, values_old=None, clip_eps=None, mask=None):
    return _value(values, returns, values_old, clip_eps, mask, slip="rmse")


def w05_value_square_of_mean(values, returns, values_old=None, clip_eps=None, mask=None):
    return _value(values, returns, values_old, clip_eps, mask, slip="square_of_mean")


# ---------------------------------------------------------------------------------------------------------------
# Chapter 05: PPOLoss
# ---------------------------------------------------------------------------------------------------------------


class _PPOLossCoefficients(nn.Module):
    """The ``__init__`` the exercise gives; each student below writes ``forward``."""

    def __init__(self, clip_epsilon=0.2, value_loss_coef=0.5, entropy_coef=0.01):
        super().__init__()
        self.clip_epsilon = clip_epsilon
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef

    def parts(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask, **slips):
        """The three terms, each right unless a slip says otherwise."""
        mask_policy = None if slips.get("policy_ignores_mask") else mask
        if slips.get("policy_ignores_mask"):
            policy_loss, _ = _surrogate(policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, None)
        else:
            policy_loss, _ = _surrogate(
                policy_logprobs,
                old_policy_logprobs,
                advantages,
                self.clip_epsilon,
                mask_policy,
                normalise_adv=slips.get("normalise_adv", False),
            )
        if slips.get("policy_sum"):
            valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
            policy_loss = policy_loss * valid.sum()
        v_slip = "detach_values" if slips.get("detach_values") else None
        v_loss = _value(values, returns, mask=mask, slip=v_slip)
        valid = torch.ones_like(entropy, dtype=torch.bool) if mask is None else mask.bool()
        if slips.get("entropy_sum_over_valid"):
            mean_entropy = entropy.sum() / valid.sum()  # the padding's entropy summed in
        else:
            mean_entropy = torch.where(valid, entropy, torch.zeros_like(entropy)).sum() / valid.sum().clamp(min=1)
        return policy_loss, v_loss, mean_entropy


class W05PPOLossNormalisesAdvantages(_PPOLossCoefficients):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        p, v, h = self.parts(
            policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask, normalise_adv=True
        )
        return p + self.value_loss_coef * v - self.entropy_coef * h


class W05PPOLossCoefficientsSwapped(_PPOLossCoefficients):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        p, v, h = self.parts(policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask)
        return p + self.entropy_coef * v - self.value_loss_coef * h


class W05PPOLossMeanOfTerms(_PPOLossCoefficients):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        p, v, h = self.parts(policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask)
        return (p + self.value_loss_coef * v - self.entropy_coef * h) / 3


class W05PPOLossEntropySumOverValid(_PPOLossCoefficients):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        p, v, h = self.parts(
            policy_logprobs,
            old_policy_logprobs,
            values,
            returns,
            advantages,
            entropy,
            mask,
            entropy_sum_over_valid=True,
        )
        return p + self.value_loss_coef * v - self.entropy_coef * h


class W05PPOLossDetachedValues(_PPOLossCoefficients):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        p, v, h = self.parts(
            policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask, detach_values=True
        )
        return p + self.value_loss_coef * v - self.entropy_coef * h


class W05PPOLossPolicyIgnoresMask(_PPOLossCoefficients):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        p, v, h = self.parts(
            policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask, policy_ignores_mask=True
        )
        return p + self.value_loss_coef * v - self.entropy_coef * h


class W05PPOLossPolicySummed(_PPOLossCoefficients):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        p, v, h = self.parts(
            policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask, policy_sum=True
        )
        return p + self.value_loss_coef * v - self.entropy_coef * h


class W05PPOLossValueHalvedAgain(_PPOLossCoefficients):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        p, v, h = self.parts(policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask)
        return p + 0.5 * self.value_loss_coef * v - self.entropy_coef * h


# ---------------------------------------------------------------------------------------------------------------
# Chapter 06: group_advantages
# ---------------------------------------------------------------------------------------------------------------


def _equal(rewards):
    return (rewards == rewards[..., :1]).all(-1, keepdim=True)


def w06_adv_range_normalised(rewards, normalize_std=True, eps=1e-6):
    centred = torch.where(_equal(rewards), 0.0, rewards - rewards.mean(-1, keepdim=True))
    if not normalize_std:
        return centred
    spread = rewards.amax(-1, keepdim=True) - rewards.amin(-1, keepdim=True)
    return centred / (spread + eps)


def w06_adv_median_baseline(rewards, normalize_std=True, eps=1e-6):
    centred = rewards - rewards.median(-1, keepdim=True).values
    centred = torch.where(_equal(rewards), 0.0, centred)
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(-1, keepdim=True) + eps)


def w06_adv_leave_one_out(rewards, normalize_std=True, eps=1e-6):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    others = (rewards.sum(-1, keepdim=True) - rewards) / (G - 1)  # RLOO's baseline
    centred = torch.where(_equal(rewards), 0.0, rewards - others)
    if not normalize_std:
        return centred
    return centred / (rewards.std(-1, keepdim=True) + eps)


def w06_adv_single_response_raw(rewards, normalize_std=True, eps=1e-6):
    if rewards.shape[-1] == 1:
        return rewards.clone()  # nothing to compare with: keep the reward
    centred = torch.where(_equal(rewards), 0.0, rewards - rewards.mean(-1, keepdim=True))
    if not normalize_std:
        return centred
    return centred / (rewards.std(-1, keepdim=True) + eps)


def w06_adv_cleanrl_eps(rewards, normalize_std=True, eps=1e-6):
    centred = torch.where(_equal(rewards), 0.0, rewards - rewards.mean(-1, keepdim=True))
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(-1, keepdim=True) + 1e-8)  # CleanRL's constant


def w06_adv_float32(rewards, normalize_std=True, eps=1e-6):
    r = rewards.float()
    centred = torch.where(_equal(r), 0.0, r - r.mean(-1, keepdim=True))
    if not normalize_std or r.shape[-1] == 1:
        return centred
    return centred / (r.std(-1, keepdim=True) + eps)


def w06_adv_mean_abs_deviation(rewards, normalize_std=True, eps=1e-6):
    centred = torch.where(_equal(rewards), 0.0, rewards - rewards.mean(-1, keepdim=True))
    if not normalize_std:
        return centred
    return centred / (centred.abs().mean(-1, keepdim=True) + eps)


def w06_adv_std_of_all_groups_mean(rewards, normalize_std=True, eps=1e-6):
    centred = torch.where(_equal(rewards), 0.0, rewards - rewards.mean(-1, keepdim=True))
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    std = rewards.std(-1, keepdim=True).mean()  # one std for the batch: the mean of the groups' stds
    return centred / (std + eps)


def w06_adv_in_place(rewards, normalize_std=True, eps=1e-6):
    equal = _equal(rewards)
    std = rewards.std(-1, keepdim=True) if rewards.shape[-1] > 1 else None
    rewards -= rewards.mean(-1, keepdim=True)
    rewards.masked_fill_(equal, 0.0)
    if normalize_std and std is not None:
        rewards /= std + eps
    return rewards


# ---------------------------------------------------------------------------------------------------------------
# Chapter 06: kl_estimate
# ---------------------------------------------------------------------------------------------------------------


def _kl(logp, logp_ref, kind, *, k3=None, k2=None, k1=None, after=None):
    log_r = logp_ref - logp
    if kind == "k1":
        out = k1(logp, logp_ref) if k1 else logp - logp_ref
    elif kind == "k2":
        out = k2(logp, logp_ref) if k2 else 0.5 * log_r**2
    else:
        out = k3(logp, logp_ref) if k3 else torch.exp(log_r) - log_r - 1
    return after(out) if after else out


def w06_kl_k3_halved(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k3=lambda p, q: 0.5 * (torch.exp(q - p) - (q - p) - 1))


def w06_kl_mean_reduced(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, after=lambda x: x.mean())


def w06_kl_summed_per_sequence(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, after=lambda x: x.sum(-1) if x.dim() else x)


def w06_kl_k3_exp_detached(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k3=lambda p, q: torch.exp(q - p).detach() - (q - p) - 1)


def w06_kl_k3_no_log_term(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k3=lambda p, q: torch.exp(q - p) - 1)


def w06_kl_k2_difference_of_squares(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k2=lambda p, q: 0.5 * (p**2 - q**2))


def w06_kl_float32(logp, logp_ref, kind):
    return _kl(logp.float(), logp_ref.float(), kind)


def w06_kl_k1_squared(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k1=lambda p, q: (p - q) ** 2)


def w06_kl_k3_taylor(logp, logp_ref, kind):
    # k3 by its second-order Taylor expansion, (r - 1)^2 / 2: "the same near r = 1"
    return _kl(logp, logp_ref, kind, k3=lambda p, q: 0.5 * torch.expm1(q - p) ** 2)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 06: aggregate_loss
# ---------------------------------------------------------------------------------------------------------------


def _agg(per_token, mask, mode, max_len=None, *, slip=None):
    m = mask.to(per_token.dtype)
    x = torch.where(m.bool(), per_token, torch.zeros_like(per_token))
    lengths = m.sum(-1)
    if mode == "token-mean":
        if slip == "token_sum_per_response":
            return x.sum(-1).mean()
        if slip == "token_mean_per_group" and x.dim() == 3:
            return (x.sum((-1, -2)) / m.sum((-1, -2)).clamp(min=1)).mean()
        return x.sum() / m.sum().clamp(min=1)
    if mode == "seq-mean-token-mean":
        per_response = x.sum(-1) / lengths.clamp(min=1)
    else:
        if max_len is None:
            max_len = per_token.shape[0] if slip == "first_axis_T" else per_token.shape[-1]
        total = per_token.sum(-1) if slip == "drgrpo_ignores_mask" else x.sum(-1)
        per_response = total / max_len
    if slip == "no_final_mean":
        return per_response
    if slip == "divide_by_first_axis":
        return per_response.sum() / per_response.shape[0]
    if slip == "item":
        return torch.tensor(float(per_response.mean()), dtype=per_token.dtype)
    return per_response.mean()


def w06_agg_token_mean_sums_per_response(per_token, mask, mode, max_len=None):
    return _agg(per_token, mask, mode, max_len, slip="token_sum_per_response")


def w06_agg_token_mean_per_group(per_token, mask, mode, max_len=None):
    return _agg(per_token, mask, mode, max_len, slip="token_mean_per_group")


def w06_agg_T_from_first_axis(per_token, mask, mode, max_len=None):
    return _agg(per_token, mask, mode, max_len, slip="first_axis_T")


def w06_agg_drgrpo_ignores_mask(per_token, mask, mode, max_len=None):
    return _agg(per_token, mask, mode, max_len, slip="drgrpo_ignores_mask")


def w06_agg_no_final_mean(per_token, mask, mode, max_len=None):
    return _agg(per_token, mask, mode, max_len, slip="no_final_mean")


def w06_agg_divides_by_first_axis(per_token, mask, mode, max_len=None):
    return _agg(per_token, mask, mode, max_len, slip="divide_by_first_axis")


def w06_agg_item(per_token, mask, mode, max_len=None):
    return _agg(per_token, mask, mode, max_len, slip="item")


def w06_agg_max_len_plus_one(per_token, mask, mode, max_len=None):
    if mode == "seq-mean-token-sum-norm" and max_len is None:
        max_len = per_token.shape[-1] + 1  # "the longest a response could be, EOS included"
    return _agg(per_token, mask, mode, max_len)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 06: grpo_loss (the student's own parts: group_advantages, aggregate_loss and kl_estimate are allowed)
# ---------------------------------------------------------------------------------------------------------------


def _own_adv(rewards, normalize_std=True, eps=1e-6):
    centred = torch.where(_equal(rewards), 0.0, rewards - rewards.mean(-1, keepdim=True))
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(-1, keepdim=True) + eps)


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
    slip=None,
):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    low = high if slip == "high_both_sides" else clip_eps
    valid = mask.bool()
    if slip == "ignores_adv":
        a = _own_adv(rewards.detach(), normalize_std)
    elif adv is None:
        eps = 1e-4 if slip == "trl_eps" else 1e-6
        a = _own_adv(rewards.detach(), normalize_std, eps)
    else:
        a = adv.detach()
    a_tok = a[..., None].expand_as(logp)
    p = logp.detach() if slip == "detached_surrogate" else logp
    ratio = torch.exp(p - logp_old.detach())
    per = -torch.minimum(ratio * a_tok, ratio.clamp(1 - low, 1 + high) * a_tok)
    kl = None
    if logp_ref is not None:
        log_r = logp_ref.detach() - logp
        kl = {"k1": -log_r, "k2": 0.5 * log_r**2, "k3": torch.exp(log_r) - log_r - 1}[kl_kind]
    m = valid.to(logp.dtype)

    def aggregate(x):
        x = torch.where(valid, x, torch.zeros_like(x))
        if loss_agg == "token-mean":
            return x.sum() / m.sum().clamp(min=1)
        if loss_agg == "seq-mean-token-mean":
            return (x.sum(-1) / m.sum(-1).clamp(min=1)).mean()
        return (x.sum(-1) / (logp.shape[-1] if max_len is None else max_len)).mean()

    if kl is not None and slip != "kl_token_mean":
        per = per + kl_coef * kl
    loss = aggregate(per)
    if kl is not None and slip == "kl_token_mean":
        loss = loss + kl_coef * torch.where(valid, kl, torch.zeros_like(kl)).sum() / m.sum().clamp(min=1)
    with torch.no_grad():
        r = torch.exp(logp - logp_old)
        top = clip_eps if slip == "fraction_ignores_high" else high
        outside = ((r < 1 - low) | (r > 1 + top)) & valid
        info = {
            "clip_fraction": float(outside.sum()) / float(valid.sum().clamp(min=1)),
            "kl": float(torch.where(valid, kl, torch.zeros_like(kl)).sum() / m.sum()) if kl is not None else 0.0,
            "adv_abs_mean": float(a.abs().mean()),
        }
        if slip == "kl_none" and kl is None:
            info["kl"] = None
        if rewards is not None and slip != "no_reward_mean":
            info["reward_mean"] = float(rewards.mean())
    return loss, info


def w06_grpo_kl_token_mean(logp, logp_old, logp_ref, rewards, mask, **options):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **options, slip="kl_token_mean")


def w06_grpo_fraction_ignores_high(logp, logp_old, logp_ref, rewards, mask, **options):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **options, slip="fraction_ignores_high")


def w06_grpo_trl_eps(logp, logp_old, logp_ref, rewards, mask, **options):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **options, slip="trl_eps")


def w06_grpo_high_both_sides(logp, logp_old, logp_ref, rewards, mask, **options):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **options, slip="high_both_sides")


def w06_grpo_ignores_adv(logp, logp_old, logp_ref, rewards, mask, **options):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **options, slip="ignores_adv")


def w06_grpo_no_reward_mean(logp, logp_old, logp_ref, rewards, mask, **options):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **options, slip="no_reward_mean")


def w06_grpo_kl_none(logp, logp_old, logp_ref, rewards, mask, **options):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **options, slip="kl_none")


def w06_grpo_detached_surrogate(logp, logp_old, logp_ref, rewards, mask, **options):
    return _grpo(logp, logp_old, logp_ref, rewards, mask, **options, slip="detached_surrogate")


# ---------------------------------------------------------------------------------------------------------------
# Chapter 07: memory_accounting
# ---------------------------------------------------------------------------------------------------------------

_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp64": 8}


def _memory(
    n_params_actor,
    n_params_critic=0,
    n_params_ref=0,
    n_params_reward=0,
    weights_dtype="bf16",
    optimizer_dtype="fp32",
    *,
    slip=None,
):
    table = dict(_BYTES)
    if slip == "no_fp64":
        table["fp64"] = 4  # "fp64 is rare: 4 like fp32"
    w, o = table[weights_dtype], table[optimizer_dtype]
    g = o if slip == "grads_in_optimizer_dtype" else w
    master_bytes = w if slip == "master_in_weights_dtype" else o
    needs_master = (w != o) if slip == "master_when_different" else (w < o)
    trained = n_params_actor + n_params_critic
    account = {
        "actor": n_params_actor * (w + g),
        "critic": n_params_critic * (w if slip == "critic_no_grads" else w + g),
        "reference": n_params_ref * w,
        "reward": n_params_reward * w,
        "optimizer": trained * (2 * o + (master_bytes if needs_master else 0)),
    }
    if slip == "grads_in_optimizer_row":
        account["actor"] = n_params_actor * w
        account["critic"] = n_params_critic * w
        account["optimizer"] += trained * g
    account["total"] = sum(account.values())
    if slip == "total_without_optimizer":
        account["total"] -= account["optimizer"]
    if slip == "gigabytes":
        account = {k: v / 1e9 for k, v in account.items()}
    return account


def w07_memory_grads_in_optimizer_dtype(n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0,
                                        weights_dtype="bf16", optimizer_dtype="fp32"):  # fmt: skip
    return _memory(n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
                   slip="grads_in_optimizer_dtype")  # fmt: skip


def w07_memory_master_in_weights_dtype(n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0,
                                       weights_dtype="bf16", optimizer_dtype="fp32"):  # fmt: skip
    return _memory(n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
                   slip="master_in_weights_dtype")  # fmt: skip


def w07_memory_master_when_different(n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0,
                                     weights_dtype="bf16", optimizer_dtype="fp32"):  # fmt: skip
    return _memory(n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
                   slip="master_when_different")  # fmt: skip


def w07_memory_total_without_optimizer(n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0,
                                       weights_dtype="bf16", optimizer_dtype="fp32"):  # fmt: skip
    return _memory(n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
                   slip="total_without_optimizer")  # fmt: skip


def w07_memory_fp64_as_fp32(n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0,
                            weights_dtype="bf16", optimizer_dtype="fp32"):  # fmt: skip
    return _memory(n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
                   slip="no_fp64")  # fmt: skip


def w07_memory_critic_no_grads(n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0,
                               weights_dtype="bf16", optimizer_dtype="fp32"):  # fmt: skip
    return _memory(n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
                   slip="critic_no_grads")  # fmt: skip


def w07_memory_grads_in_optimizer_row(n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0,
                                      weights_dtype="bf16", optimizer_dtype="fp32"):  # fmt: skip
    return _memory(n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
                   slip="grads_in_optimizer_row")  # fmt: skip


def w07_memory_gigabytes(n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0,
                         weights_dtype="bf16", optimizer_dtype="fp32"):  # fmt: skip
    return _memory(n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype,
                   slip="gigabytes")  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# Chapter 07: read_sweep
# ---------------------------------------------------------------------------------------------------------------


def _sweep(group_sizes, clip_eps, reward, tol=0.1, *, slip=None):
    n_cols = reward.shape[1]
    flat = int(torch.argmax(reward))
    i, j = divmod(flat, n_cols)
    if slip == "best_column_apart":
        i = int(torch.argmax(reward.max(dim=1).values))
        j = int(torch.argmax(reward.max(dim=0).values))
    per_group = reward.max(dim=1).values
    best = reward.max()
    if slip == "tol_ignored":
        tol = 0.1
    if slip == "relative":
        within = per_group >= best * (1 - tol)
    elif slip == "strict":
        within = per_group > best - tol
    else:
        within = per_group >= best - tol
    found = within.nonzero()
    if slip == "strict" and len(found) == 0:
        k = len(group_sizes) - 1
    elif slip == "largest_within":
        k = int(found[-1, 0])
    else:
        k = int(found[0, 0])
    if slip == "best_column_only":  # saturation read in the best configuration's column alone
        column = reward[:, j]
        k = int((column >= best - tol).nonzero()[0, 0]) if bool((column >= best - tol).any()) else len(group_sizes) - 1
    if slip == "tensors":
        return group_sizes[i], clip_eps[j], group_sizes[k]
    if slip == "floats":
        return float(group_sizes[i]), float(clip_eps[j]), float(group_sizes[k])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def w07_sweep_relative_tol(group_sizes, clip_eps, reward, tol=0.1):
    return _sweep(group_sizes, clip_eps, reward, tol, slip="relative")


def w07_sweep_strict(group_sizes, clip_eps, reward, tol=0.1):
    return _sweep(group_sizes, clip_eps, reward, tol, slip="strict")


def w07_sweep_largest_within(group_sizes, clip_eps, reward, tol=0.1):
    return _sweep(group_sizes, clip_eps, reward, tol, slip="largest_within")


def w07_sweep_best_column_apart(group_sizes, clip_eps, reward, tol=0.1):
    return _sweep(group_sizes, clip_eps, reward, tol, slip="best_column_apart")


def w07_sweep_tol_ignored(group_sizes, clip_eps, reward, tol=0.1):
    return _sweep(group_sizes, clip_eps, reward, tol, slip="tol_ignored")


def w07_sweep_tensors(group_sizes, clip_eps, reward, tol=0.1):
    return _sweep(group_sizes, clip_eps, reward, tol, slip="tensors")


def w07_sweep_floats(group_sizes, clip_eps, reward, tol=0.1):
    return _sweep(group_sizes, clip_eps, reward, tol, slip="floats")


def w07_sweep_best_column_only(group_sizes, clip_eps, reward, tol=0.1):
    return _sweep(group_sizes, clip_eps, reward, tol, slip="best_column_only")


# ---------------------------------------------------------------------------------------------------------------
# Chapter 08: addition_exact_reward
# ---------------------------------------------------------------------------------------------------------------


def w08_exact_whole_completion(completion, answer):
    return float(completion == answer + "$")


def w08_exact_rstrip_eos(completion, answer):
    return float(completion.rstrip("$") == answer)


def w08_exact_substring(completion, answer):
    head, eos, _ = completion.partition("$")
    return float(bool(eos) and answer in head)


def w08_exact_single_eos(completion, answer):
    return float(completion.count("$") == 1 and completion.split("$")[0] == answer)


def w08_exact_returns_bool(completion, answer):
    head, eos, _ = completion.partition("$")
    return bool(eos) and head == answer


def w08_exact_lstrip_zeros(completion, answer):
    head, eos, _ = completion.partition("$")
    return float(bool(eos) and head.lstrip("0") == answer)


def w08_exact_int_parse(completion, answer):
    head, eos, _ = completion.partition("$")
    try:
        return float(bool(eos) and int(head) == int(answer))
    except ValueError:
        return 0.0


def w08_exact_last_eos(completion, answer):
    head, eos, _ = completion.rpartition("$")
    return float(bool(eos) and head == answer)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 08: completion_mask
# ---------------------------------------------------------------------------------------------------------------


def w08_mask_later_eos_kept(completion_ids, eos_id):
    is_eos = completion_ids == eos_id
    before = torch.cumsum(is_eos.long(), -1) == 0
    return (before | is_eos).float()  # "the EOS itself stays in"


def w08_mask_later_eos_kept_arithmetic(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).float()
    seen = torch.cumsum(is_eos, -1).clamp(max=1)
    return 1 - seen + is_eos


def w08_mask_long(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return ((torch.cumsum(is_eos, -1) - is_eos) == 0).long()


def w08_mask_float64(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return ((torch.cumsum(is_eos, -1) - is_eos) == 0).double()


def w08_mask_pad_wrong_end(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    shifted = F.pad(is_eos, (0, 1))[..., 1:]  # meant: the EOS of the step before
    return (torch.cumsum(shifted, -1) == 0).float()


def w08_mask_first_row_eos(completion_ids, eos_id):
    flat = completion_ids.reshape(-1, completion_ids.shape[-1])
    hits = (flat[0] == eos_id).nonzero()
    first = int(hits[0]) if len(hits) else flat.shape[-1] - 1
    positions = torch.arange(completion_ids.shape[-1])
    return (positions <= first).float().expand(completion_ids.shape).clone()


def w08_mask_extra_axis(completion_ids, eos_id):
    ids = completion_ids if completion_ids.dim() > 1 else completion_ids[None]
    is_eos = (ids == eos_id).long()
    return ((torch.cumsum(is_eos, -1) - is_eos) == 0).float()


def w08_mask_row_loop(completion_ids, eos_id):
    mask = torch.ones(completion_ids.shape)
    for b in range(completion_ids.shape[0]):
        row = completion_ids[b].tolist()
        if eos_id in row:
            mask[b, row.index(eos_id) + 1 :] = 0.0
    return mask


# ---------------------------------------------------------------------------------------------------------------
# Chapter 08: grpo_step (each student uses a completion_mask of their own, as the exercise asks)
# ---------------------------------------------------------------------------------------------------------------


def _my_mask(completions, eos_id):
    is_eos = (completions == eos_id).long()
    return ((torch.cumsum(is_eos, -1) - is_eos) == 0).float()


def _step(
    policy,
    ref_model,
    optimizer,
    prompts,
    completions,
    rewards,
    logp_old,
    eos_id,
    clip_eps=0.2,
    kl_coef=0.04,
    max_grad_norm=1.0,
    *,
    slip=None,
):
    B, G, L = completions.shape
    P = prompts.shape[1]
    flat_prompts = repeat(prompts, "B P -> (B G) P", G=G)
    flat = rearrange(completions, "B G L -> (B G) L")
    ids = torch.cat([flat_prompts, flat[:, :-1]], dim=1)

    def logp_of(model):
        logits = model(ids)[:, P - 1 :, :]
        return rearrange(gather_log_probs(logits, flat), "(B G) L -> B G L", G=G)

    logp = logp_of(policy)
    if slip == "recomputes_old":
        logp_old = logp.detach()
    logp_ref = None
    if slip == "ref_when_none" and kl_coef > 0:
        with torch.no_grad():
            logp_ref = logp_of(ref_model)
    elif ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            logp_ref = logp_of(ref_model)
    mask = _my_mask(completions, eos_id)
    options = dict(clip_eps=clip_eps, kl_coef=kl_coef)
    if slip == "kl_coef_unpassed":
        options = dict(clip_eps=clip_eps)
    if slip == "clip_eps_unpassed":
        options = dict(kl_coef=kl_coef)
    if slip == "k1":
        options["kl_kind"] = "k1"
    if slip == "dr_grpo":
        options["normalize_std"] = False
    loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, mask, **options)
    optimizer.zero_grad()
    loss.backward()
    if slip == "clip_value":
        torch.nn.utils.clip_grad_value_(policy.parameters(), max_grad_norm)
    elif slip == "norm_hardcoded":
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    elif slip != "step_before_clip":
        torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    if slip == "step_before_clip":
        torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    return loss.item()


def _step_student(slip, name):
    def student(
        policy,
        ref_model,
        optimizer,
        prompts,
        completions,
        rewards,
        logp_old,
        eos_id,
        clip_eps=0.2,
        kl_coef=0.04,
        max_grad_norm=1.0,
    ):
        return _step(
            policy,
            ref_model,
            optimizer,
            prompts,
            completions,
            rewards,
            logp_old,
            eos_id,
            clip_eps,
            kl_coef,
            max_grad_norm,
            slip=slip,
        )

    student.__name__ = student.__qualname__ = name
    return student


w08_step_recomputes_logp_old = _step_student("recomputes_old", "w08_step_recomputes_logp_old")
w08_step_ref_when_none = _step_student("ref_when_none", "w08_step_ref_when_none")
w08_step_kl_coef_unpassed = _step_student("kl_coef_unpassed", "w08_step_kl_coef_unpassed")
w08_step_clip_eps_unpassed = _step_student("clip_eps_unpassed", "w08_step_clip_eps_unpassed")
w08_step_k1 = _step_student("k1", "w08_step_k1")
w08_step_dr_grpo = _step_student("dr_grpo", "w08_step_dr_grpo")
w08_step_clip_value = _step_student("clip_value", "w08_step_clip_value")
w08_step_norm_hardcoded = _step_student("norm_hardcoded", "w08_step_norm_hardcoded")
w08_step_step_before_clip = _step_student("step_before_clip", "w08_step_step_before_clip")


# ---------------------------------------------------------------------------------------------------------------
# Held out: twelve more, one an exercise, written after the catalogue above had been extended for the first 102
# (its first sight then measured how the extended catalogue generalises), and catalogued in their turn
# ---------------------------------------------------------------------------------------------------------------


def h05_csl_index_mean(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    # mean of the valid entries by indexing: NaN on an empty mask
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    ratio = torch.exp(logp[valid] - logp_old.detach()[valid])
    a = adv.detach()[valid]
    per = -torch.minimum(ratio * a, ratio.clamp(1 - clip_eps, 1 + high) * a)
    _, info = _surrogate(logp, logp_old, adv, clip_eps, mask, clip_eps_high)
    return per.mean(), info


def h05_value_anchor_returns(values, returns, values_old=None, clip_eps=None, mask=None):
    valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    r = returns.detach()
    error = (values - r) ** 2
    if clip_eps is not None:
        clipped = r + (values - r).clamp(-clip_eps, clip_eps)
        error = torch.maximum(error, (clipped - r) ** 2)
    return 0.5 * torch.where(valid, error, torch.zeros_like(error)).sum() / valid.sum().clamp(min=1)


class H05PPOLossCoefOnBoth(_PPOLossCoefficients):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        p, v, h = self.parts(policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask)
        return self.value_loss_coef * (p + v) - self.entropy_coef * h


def h06_adv_keepdim_extra_axis(rewards, normalize_std=True, eps=1e-6):
    centred = torch.where(_equal(rewards), 0.0, rewards - rewards.mean(-1, keepdim=True))
    if normalize_std and rewards.shape[-1] > 1:
        centred = centred / (rewards.std(-1, keepdim=True) + eps)
    return centred[..., None]


def h06_kl_k2_probabilities(logp, logp_ref, kind):
    return _kl(logp, logp_ref, kind, k2=lambda p, q: 0.5 * (p.exp() - q.exp()) ** 2)


def h06_agg_seq_mean_counts_padding(per_token, mask, mode, max_len=None):
    if mode == "seq-mean-token-mean":
        m = mask.to(per_token.dtype)
        return ((per_token * m).mean(-1)).mean()
    return _agg(per_token, mask, mode, max_len)


def h06_grpo_reward_mean_of_adv(logp, logp_old, logp_ref, rewards, mask, **options):
    loss, info = _grpo(logp, logp_old, logp_ref, rewards, mask, **options)
    if "reward_mean" in info:
        info["reward_mean"] = info["adv_abs_mean"]
    return loss, info


def h07_memory_reference_in_fp32(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    account = _memory(n_params_actor, n_params_critic, n_params_ref, n_params_reward, weights_dtype, optimizer_dtype)
    account["reference"] = n_params_ref * 4  # frozen models are kept in fp32
    account["reward"] = n_params_reward * 4
    account["total"] = sum(value for key, value in account.items() if key != "total")
    return account


def h07_sweep_columns_first(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(torch.argmax(reward.T))  # ties: the smallest clip range first
    j, i = divmod(flat, reward.shape[0])
    _, _, k = _sweep(group_sizes, clip_eps, reward, tol)
    return int(group_sizes[i]), float(clip_eps[j]), k


def h08_exact_strip_newline(completion, answer):
    head, eos, _ = completion.strip().partition("$")
    return float(bool(eos) and head == answer)


def h08_mask_cumprod_or_eos(completion_ids, eos_id):
    is_eos = completion_ids == eos_id
    before = (~is_eos).long().cumprod(-1).bool()
    return (before | is_eos).float()


def h08_step_norm_type_one(
    policy,
    ref_model,
    optimizer,
    prompts,
    completions,
    rewards,
    logp_old,
    eos_id,
    clip_eps=0.2,
    kl_coef=0.04,
    max_grad_norm=1.0,
):
    B, G, L = completions.shape
    P = prompts.shape[1]
    fp = repeat(prompts, "B P -> (B G) P", G=G)
    fc = rearrange(completions, "B G L -> (B G) L")
    ids = torch.cat([fp, fc[:, :-1]], 1)

    def lp(m):
        return rearrange(gather_log_probs(m(ids)[:, P - 1 :], fc), "(B G) L -> B G L", G=G)

    logp = lp(policy)
    ref = None
    if ref_model is not None and kl_coef > 0:
        with torch.no_grad():
            ref = lp(ref_model)
    loss, _ = grpo_loss(logp, logp_old, ref, rewards, _my_mask(completions, eos_id), clip_eps=clip_eps, kl_coef=kl_coef)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm, norm_type=1.0)
    optimizer.step()
    return loss.item()


# ---------------------------------------------------------------------------------------------------------------
# The table: what each student wrote, and the truth about it
# ---------------------------------------------------------------------------------------------------------------


def _row(exercise, chapter, student, mistake, named):
    """``named``: a phrase the first line of the check's message must hold for the student to be told truly."""
    return {
        "exercise": exercise,
        "chapter": chapter,
        "student": student,
        "right": False,
        "mistake": mistake,
        "named": named,
    }


ROWS = [
    # 05: clipped_surrogate_loss
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_csl_seq_mean,
        "Averages each row's valid entries first, then the rows, so rows with fewer valid entries weigh more.",
        "each row is averaged first",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_csl_kl_over_padding,
        "Divides approx_kl's sum by every entry, padding included, not by the number of valid entries.",
        "approx_kl counts the padding",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_csl_fraction_ignores_high,
        "Counts clip_fraction against 1 + clip_eps above, ignoring clip_eps_high (the loss itself uses it).",
        "clip_fraction's upper bound ignores clip_eps_high",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_csl_dual_clip,
        "Adds dual-clip PPO's third clip: for adv < 0 the loss is capped at -3 * adv.",
        "dual-clip PPO",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_csl_where_after_ratio,
        "Computes the ratio on the -inf/NaN padding and zeroes the per-entry loss with torch.where afterwards: the "
        "value is right, the gradient NaN.",
        "its gradient is NaN",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_csl_kl_sign,
        "Reports approx_kl with its sign flipped, log(ratio) - (ratio - 1).",
        "approx_kl is the reference with its sign flipped",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_csl_fraction_percent,
        "Reports clip_fraction as a percentage (times 100).",
        "clip_fraction is the reference times 100",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_csl_normalises_adv,
        "Normalises the advantages inside the loss (CleanRL's norm_adv) instead of using them as given.",
        "advantages are normalised inside the loss",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_csl_detached_logp,
        "Detaches logp, so the loss carries no gradient.",
        "carries no gradient",
    ),
    _row(
        "clipped_surrogate_loss",
        "05",
        w05_csl_high_both_sides,
        "Uses clip_eps_high on both sides of the clip (and of clip_fraction): [1 - clip_eps_high, 1 + clip_eps_high].",
        "clip_eps_high is used on both sides",
    ),
    # 05: value_loss
    _row(
        "value_loss",
        "05",
        w05_value_detached_values,
        "Detaches values instead of returns: the critic gets no gradient, the targets do.",
        "values is detached and returns is not",
    ),
    _row(
        "value_loss",
        "05",
        w05_value_abs_error,
        "Uses the absolute error 0.5 * |values - returns| in both branches instead of the squared error.",
        "absolute error",
    ),
    _row(
        "value_loss",
        "05",
        w05_value_relative_clip,
        "Clips the new value to values_old * (1 -/+ clip_eps), a relative range, instead of values_old -/+ clip_eps.",
        "value clip is relative",
    ),
    _row(
        "value_loss",
        "05",
        w05_value_clipped_detached,
        "Detaches the clipped value, so no gradient flows where the clipped error is the larger.",
        "clipped value is detached",
    ),
    _row(
        "value_loss",
        "05",
        w05_value_average_of_errors,
        "Averages the clipped and unclipped errors instead of taking their max.",
        "averages the two errors",
    ),
    _row(
        "value_loss",
        "05",
        w05_value_per_row_mean,
        "Averages each row's valid entries first, then the rows.",
        "each row is averaged first",
    ),
    _row(
        "value_loss",
        "05",
        w05_value_sum_last_axis,
        "Sums each row over the last axis, then averages the rows.",
        "each row is summed over its last axis",
    ),
    _row(
        "value_loss",
        "05",
        w05_value_rmse,
        "Takes the square root of the mean squared error (0.5 * RMSE).",
        "square root of the mean squared error",
    ),
    _row(
        "value_loss",
        "05",
        w05_value_square_of_mean,
        "Squares the mean error instead of averaging the squared errors.",
        "you squared the mean error",
    ),
    # 05: PPOLoss
    _row(
        "PPOLoss",
        "05",
        W05PPOLossNormalisesAdvantages,
        "Normalises the advantages inside forward (CleanRL's norm_adv); PPOLoss uses them as given.",
        "advantages are normalised inside the loss",
    ),
    _row(
        "PPOLoss",
        "05",
        W05PPOLossCoefficientsSwapped,
        "Weighs the value loss by entropy_coef and the entropy by value_loss_coef.",
        "coefficients are swapped",
    ),
    _row(
        "PPOLoss",
        "05",
        W05PPOLossMeanOfTerms,
        "Divides the weighted sum of the three terms by 3.",
        "divided by 3",
    ),
    _row(
        "PPOLoss",
        "05",
        W05PPOLossEntropySumOverValid,
        "Averages the entropy as entropy.sum() / mask.sum(): the padding's entropy in the sum, not in the count.",
        "entropy of the padding is summed in",
    ),
    _row(
        "PPOLoss",
        "05",
        W05PPOLossDetachedValues,
        "Detaches values instead of returns in the value loss.",
        "values is detached and returns is not",
    ),
    _row(
        "PPOLoss",
        "05",
        W05PPOLossPolicyIgnoresMask,
        "Computes the policy loss without the mask, so the padding's -inf log-probs make it NaN.",
        "policy loss ignores the mask",
    ),
    _row(
        "PPOLoss",
        "05",
        W05PPOLossPolicySummed,
        "Sums the policy loss over the valid entries instead of averaging it.",
        "policy loss is summed",
    ),
    _row(
        "PPOLoss",
        "05",
        W05PPOLossValueHalvedAgain,
        "Multiplies the value loss, which already holds its 0.5, by 0.5 again.",
        "0.5 is applied twice",
    ),
    # 06: group_advantages
    _row(
        "group_advantages",
        "06",
        w06_adv_range_normalised,
        "Divides the centred rewards by the group's range, max - min, instead of its std.",
        "group's range",
    ),
    _row(
        "group_advantages",
        "06",
        w06_adv_median_baseline,
        "Subtracts the group's median instead of its mean.",
        "median",
    ),
    _row(
        "group_advantages",
        "06",
        w06_adv_leave_one_out,
        "Subtracts the mean of the other responses (RLOO's baseline) instead of the whole group's mean.",
        "leave-one-out",
    ),
    _row(
        "group_advantages",
        "06",
        w06_adv_single_response_raw,
        "Returns the raw reward for a group of one instead of 0.",
        "a group of one (G=1) returns its raw reward",
    ),
    _row(
        "group_advantages",
        "06",
        w06_adv_cleanrl_eps,
        "Divides by std + 1e-8 (CleanRL's constant), ignoring the eps passed.",
        "eps argument is ignored (1e-08",
    ),
    _row(
        "group_advantages",
        "06",
        w06_adv_float32,
        "Computes in float32 (.float()) whatever the input's dtype.",
        "float32 tensor",
    ),
    _row(
        "group_advantages",
        "06",
        w06_adv_mean_abs_deviation,
        "Divides by the mean absolute deviation instead of the std.",
        "mean absolute deviation",
    ),
    _row(
        "group_advantages",
        "06",
        w06_adv_std_of_all_groups_mean,
        "Divides every group by the mean of the groups' stds, one number for the batch.",
        "one std for the whole batch",
    ),
    _row(
        "group_advantages",
        "06",
        w06_adv_in_place,
        "Centres and scales the caller's rewards in place.",
        "changed its input `rewards` in place",
    ),
    # 06: kl_estimate
    _row("kl_estimate", "06", w06_kl_k3_halved, "Multiplies k3 by 0.5.", "k3 is halved"),
    _row(
        "kl_estimate",
        "06",
        w06_kl_mean_reduced,
        "Returns the mean estimate, one number, instead of one per token.",
        "averaged to one number",
    ),
    _row(
        "kl_estimate",
        "06",
        w06_kl_summed_per_sequence,
        "Sums the estimates over the last axis (one per sequence).",
        "summed over the last axis",
    ),
    _row(
        "kl_estimate",
        "06",
        w06_kl_k3_exp_detached,
        "Detaches exp(log_r) in k3: right values, wrong gradient.",
        "exp(log_r) is detached",
    ),
    _row(
        "kl_estimate", "06", w06_kl_k3_no_log_term, "Writes k3 as exp(log_r) - 1, without -log_r.", "missing its -log_r"
    ),
    _row(
        "kl_estimate",
        "06",
        w06_kl_k2_difference_of_squares,
        "Writes k2 as 0.5 * (logp**2 - logp_ref**2).",
        "difference of the squares",
    ),
    _row("kl_estimate", "06", w06_kl_float32, "Computes in float32 whatever the inputs' dtype.", "float32 tensor"),
    _row("kl_estimate", "06", w06_kl_k1_squared, "Squares k1: (logp - logp_ref)**2.", "k1 is squared"),
    _row("kl_estimate", "06", w06_kl_k3_taylor, "Writes k3 as (r - 1)^2 / 2, its Taylor expansion.", "Taylor"),
    # 06: aggregate_loss
    _row(
        "aggregate_loss",
        "06",
        w06_agg_token_mean_sums_per_response,
        "For 'token-mean', sums each response's tokens and averages over responses (divides by responses, not tokens).",
        "'token-mean' sums each response's tokens",
    ),
    _row(
        "aggregate_loss",
        "06",
        w06_agg_token_mean_per_group,
        "For 'token-mean', takes the token mean within each group, then the mean over groups.",
        "'token-mean' is taken within each group",
    ),
    _row(
        "aggregate_loss",
        "06",
        w06_agg_T_from_first_axis,
        "Reads Dr. GRPO's default constant T from per_token.shape[0].",
        "read from the first axis",
    ),
    _row(
        "aggregate_loss",
        "06",
        w06_agg_drgrpo_ignores_mask,
        "In 'seq-mean-token-sum-norm', sums per_token without the mask.",
        "mask is ignored in mode 'seq-mean-token-sum-norm'",
    ),
    _row(
        "aggregate_loss",
        "06",
        w06_agg_no_final_mean,
        "In the two per-response modes, returns one value per response (no mean over responses).",
        "no mean over the responses",
    ),
    _row(
        "aggregate_loss",
        "06",
        w06_agg_divides_by_first_axis,
        "Divides the sum over responses by per_response.shape[0] (B), not by the number of responses.",
        "divided by the first axis's size",
    ),
    _row(
        "aggregate_loss",
        "06",
        w06_agg_item,
        "Returns the loss rebuilt from a Python float: no gradient.",
        "carries no gradient",
    ),
    _row(
        "aggregate_loss",
        "06",
        w06_agg_max_len_plus_one,
        "Uses T + 1 as Dr. GRPO's default constant.",
        "T + 1",
    ),
    # 06: grpo_loss
    _row(
        "grpo_loss",
        "06",
        w06_grpo_kl_token_mean,
        "Averages the KL over all valid tokens apart and adds it to the aggregated policy loss.",
        "KL term is averaged apart",
    ),
    _row(
        "grpo_loss",
        "06",
        w06_grpo_fraction_ignores_high,
        "Counts info's clip_fraction against 1 + clip_eps above, ignoring clip_eps_high (the loss uses it).",
        "clip_fraction ignores clip_eps_high",
    ),
    _row(
        "grpo_loss",
        "06",
        w06_grpo_trl_eps,
        "Normalises the group advantages with eps = 1e-4 (TRL's) instead of 1e-6.",
        "eps = 0.0001",
    ),
    _row(
        "grpo_loss",
        "06",
        w06_grpo_high_both_sides,
        "Clips the ratio to [1 - clip_eps_high, 1 + clip_eps_high].",
        "clip_eps_high is used on both sides",
    ),
    _row(
        "grpo_loss",
        "06",
        w06_grpo_ignores_adv,
        "Always computes advantages from rewards, ignoring adv (and crashing when rewards is None).",
        "something is None on this case",
    ),
    _row(
        "grpo_loss",
        "06",
        w06_grpo_no_reward_mean,
        "Leaves reward_mean out of info.",
        "reward_mean is missing",
    ),
    _row(
        "grpo_loss",
        "06",
        w06_grpo_kl_none,
        "Reports info's kl as None without a reference model, instead of 0.0.",
        "kl should be a tensor or a number, got NoneType",
    ),
    _row(
        "grpo_loss",
        "06",
        w06_grpo_detached_surrogate,
        "Computes the clipped surrogate from logp.detach(): only the KL term sends a gradient.",
        "clipped surrogate sends no gradient",
    ),
    # 07: memory_accounting
    _row(
        "memory_accounting",
        "07",
        w07_memory_grads_in_optimizer_dtype,
        "Counts the gradients in optimizer_dtype instead of weights_dtype.",
        "gradients are counted in optimizer_dtype",
    ),
    _row(
        "memory_accounting",
        "07",
        w07_memory_master_in_weights_dtype,
        "Counts the master copy in weights_dtype instead of optimizer_dtype.",
        "master copy is counted in weights_dtype",
    ),
    _row(
        "memory_accounting",
        "07",
        w07_memory_master_when_different,
        "Adds a master copy whenever the dtypes differ, fp64 weights with fp32 Adam included.",
        "whenever the two dtypes differ",
    ),
    _row(
        "memory_accounting",
        "07",
        w07_memory_total_without_optimizer,
        "Leaves the optimizer row out of the total.",
        "total leaves out the optimizer row",
    ),
    _row("memory_accounting", "07", w07_memory_fp64_as_fp32, "Counts fp64 as 4 bytes.", "fp64 takes 8 bytes"),
    _row(
        "memory_accounting",
        "07",
        w07_memory_critic_no_grads,
        "Gives the critic row weights only, no gradients.",
        "critic row has no gradients",
    ),
    _row(
        "memory_accounting",
        "07",
        w07_memory_grads_in_optimizer_row,
        "Counts the trained models' gradients in the optimizer row instead of their own rows.",
        "gradients are counted in the optimizer row",
    ),
    _row("memory_accounting", "07", w07_memory_gigabytes, "Reports gigabytes instead of bytes.", "in gigabytes"),
    # 07: read_sweep
    _row(
        "read_sweep",
        "07",
        w07_sweep_relative_tol,
        "Reads tol as relative: within best * (1 - tol).",
        "tol is read as relative",
    ),
    _row(
        "read_sweep",
        "07",
        w07_sweep_strict,
        "Asks for a reward strictly above best - tol (so tol = 0 finds nothing).",
        "strictly above best - tol",
    ),
    _row(
        "read_sweep",
        "07",
        w07_sweep_largest_within,
        "Returns the largest group size within tol of the best, not the smallest.",
        "*largest* group size within tol",
    ),
    _row(
        "read_sweep",
        "07",
        w07_sweep_best_column_apart,
        "Takes the best row and the best column of the whole table apart, not from one best entry.",
        "best clip range was taken over the whole table",
    ),
    _row("read_sweep", "07", w07_sweep_tol_ignored, "Uses tol = 0.1 whatever is passed.", "tol is ignored"),
    _row(
        "read_sweep",
        "07",
        w07_sweep_tensors,
        "Returns 0-d tensors instead of Python numbers.",
        "the exercise asks for a Python int",
    ),
    _row(
        "read_sweep",
        "07",
        w07_sweep_floats,
        "Returns the group sizes as floats instead of ints.",
        "a group size is an int",
    ),
    _row(
        "read_sweep",
        "07",
        w07_sweep_best_column_only,
        "Measures saturation in the best configuration's column only, not at each group size's best clip range.",
        "saturation reads only the best configuration's clip range",
    ),
    # 08: addition_exact_reward
    _row(
        "addition_exact_reward",
        "08",
        w08_exact_whole_completion,
        "Requires the whole completion to be answer + '$', so text after the first EOS costs the reward.",
        "whole completion must equal the answer",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w08_exact_rstrip_eos,
        "Compares completion.rstrip('$') with the answer: no EOS required, text after EOS not ignored.",
        "rstrip('$')",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w08_exact_substring,
        "Accepts the answer anywhere inside the text before EOS.",
        "only has to appear inside the text before EOS",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w08_exact_single_eos,
        "Gives 0 to a completion with more than one EOS.",
        "more than one EOS gets 0",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w08_exact_returns_bool,
        "Returns a bool instead of a float.",
        "it returned a bool",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w08_exact_lstrip_zeros,
        "Strips leading zeros before comparing ('0132$' passes, '0$' fails).",
        "leading zeros are stripped",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w08_exact_int_parse,
        "Compares int(head) with int(answer), which accepts zeros, spaces and a sign.",
        "compared as numbers with int()",
    ),
    _row(
        "addition_exact_reward",
        "08",
        w08_exact_last_eos,
        "Splits at the last EOS (rpartition): with two EOS the head holds a '$' and never matches, exactly as a "
        "reward that gives 0 to every completion with more than one EOS.",
        "more than one EOS gets 0",
    ),
    # 08: completion_mask
    _row(
        "completion_mask",
        "08",
        w08_mask_later_eos_kept,
        "Keeps every EOS, the later ones too: (cumsum(is_eos) == 0) | is_eos.",
        "every EOS is kept",
    ),
    _row(
        "completion_mask",
        "08",
        w08_mask_later_eos_kept_arithmetic,
        "Keeps every EOS, the later ones too: 1 - clamp(cumsum(is_eos), max=1) + is_eos.",
        "every EOS is kept",
    ),
    _row("completion_mask", "08", w08_mask_long, "Returns an int64 mask instead of float32.", "int64 tensor"),
    _row("completion_mask", "08", w08_mask_float64, "Returns a float64 mask instead of float32.", "float64 tensor"),
    _row(
        "completion_mask",
        "08",
        w08_mask_pad_wrong_end,
        "Shifts is_eos the wrong way (F.pad on the right, then [..., 1:]): the mask stops one token before EOS.",
        "the shift goes the wrong way",
    ),
    _row(
        "completion_mask",
        "08",
        w08_mask_first_row_eos,
        "Uses the first row's first EOS position for every row.",
        "every row uses the first row's EOS position",
    ),
    _row(
        "completion_mask",
        "08",
        w08_mask_extra_axis,
        "Adds a batch axis to a 1-D row and returns it.",
        "a 1-D row gets a batch axis",
    ),
    _row(
        "completion_mask",
        "08",
        w08_mask_row_loop,
        "Loops over the first axis as rows: a (B, G, L) batch is left all valid (and a 1-D row crashes).",
        "only a (B, L) batch is handled",
    ),
    # 08: grpo_step
    _row(
        "grpo_step",
        "08",
        w08_step_recomputes_logp_old,
        "Replaces the logp_old passed in by logp.detach(), so every ratio is 1.",
        "logp_old is recomputed",
    ),
    _row(
        "grpo_step",
        "08",
        w08_step_ref_when_none,
        "Runs ref_model whenever kl_coef > 0, even when it is None (a crash).",
        "something is None on this case",
    ),
    _row(
        "grpo_step",
        "08",
        w08_step_kl_coef_unpassed,
        "Does not pass kl_coef to grpo_loss (its default 0.04 is used).",
        "kl_coef is not passed",
    ),
    _row(
        "grpo_step",
        "08",
        w08_step_clip_eps_unpassed,
        "Does not pass clip_eps to grpo_loss (its default 0.2 is used).",
        "clip_eps is not passed",
    ),
    _row("grpo_step", "08", w08_step_k1, "Passes kl_kind='k1' to grpo_loss.", "the KL estimator is k1"),
    _row(
        "grpo_step",
        "08",
        w08_step_dr_grpo,
        "Passes normalize_std=False (Dr. GRPO) to grpo_loss.",
        "normalize_std=False",
    ),
    _row(
        "grpo_step",
        "08",
        w08_step_clip_value,
        "Clips each gradient entry (clip_grad_value_) instead of the global norm.",
        "clip_grad_value_",
    ),
    _row(
        "grpo_step",
        "08",
        w08_step_norm_hardcoded,
        "Clips the gradient norm to 1.0 whatever max_grad_norm is.",
        "max_grad_norm is ignored",
    ),
    _row(
        "grpo_step",
        "08",
        w08_step_step_before_clip,
        "Steps before clipping the gradient norm, so the update is not clipped.",
        "an unclipped gradient",
    ),
    # held out (see above)
    _row(
        "clipped_surrogate_loss",
        "05",
        h05_csl_index_mean,
        "Averages the valid entries by indexing, per[mask].mean(): NaN on an empty mask.",
        "an empty mask (no valid entry) gives 0 / 0 = NaN",
    ),
    _row(
        "value_loss",
        "05",
        h05_value_anchor_returns,
        "Clips the value around returns instead of values_old, so the clipped error is never the larger: the clip "
        "never acts, as if clip_eps were ignored.",
        "clip_eps is ignored",
    ),
    _row(
        "PPOLoss",
        "05",
        H05PPOLossCoefOnBoth,
        "Multiplies the policy loss by value_loss_coef too: value_loss_coef * (policy_loss + value_loss).",
        "value_loss_coef multiplies the policy loss too",
    ),
    _row(
        "group_advantages",
        "06",
        h06_adv_keepdim_extra_axis,
        "Returns the advantages with an extra axis of size 1, (B, G, 1).",
        "an axis of size 1 added or dropped",
    ),
    _row(
        "kl_estimate",
        "06",
        h06_kl_k2_probabilities,
        "Writes k2 as 0.5 * (exp(logp) - exp(logp_ref))**2, probabilities in place of log-probs.",
        "difference of the probabilities",
    ),
    _row(
        "aggregate_loss",
        "06",
        h06_agg_seq_mean_counts_padding,
        "In 'seq-mean-token-mean' alone, divides each response's sum by the padded length (padding in the count).",
        "padding is counted in each response's denominator",
    ),
    _row(
        "grpo_loss",
        "06",
        h06_grpo_reward_mean_of_adv,
        "Reports the mean |advantage| as reward_mean.",
        "reward_mean is the mean |advantage|",
    ),
    _row(
        "memory_accounting",
        "07",
        h07_memory_reference_in_fp32,
        "Counts the frozen models' weights (reference and reward) in 4 bytes (fp32) whatever weights_dtype is.",
        "counted in fp32 (4 bytes) whatever weights_dtype",
    ),
    _row(
        "read_sweep",
        "07",
        h07_sweep_columns_first,
        "Finds the best entry with the argmax of reward.T, so ties go to the smallest clip range first.",
        "smallest clip range first",
    ),
    _row(
        "addition_exact_reward",
        "08",
        h08_exact_strip_newline,
        "Strips spaces around the whole completion before reading it (' 132$' passes).",
        "stripped of spaces first",
    ),
    _row(
        "completion_mask",
        "08",
        h08_mask_cumprod_or_eos,
        "Keeps every EOS: cumprod(ids != eos) | is_eos.",
        "every EOS is kept",
    ),
    _row(
        "grpo_step",
        "08",
        h08_step_norm_type_one,
        "Clips the gradient with norm_type=1 instead of the L2 norm.",
        "norm_type=1",
    ),
]
