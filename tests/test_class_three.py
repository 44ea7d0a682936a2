"""A third class of students, written on 2026-11-27 after issue 44's fixes and shown to no catalogue first.

As in ``test_fresh_class.py``: each row is a plausible answer, wrong or right, and what the check should say.
A wrong answer must be rejected; a name in the row must be on the first line (the mistake the student made);
None means the generic message (no catalogued mistake named). A right answer must pass. What the class gave at
first sight (22 wrong answers: 22 rejected, 13 named truly, 0 named falsely once a 0/1 mask wrong in one place
was no longer described as a shift; 11 of 11 right answers accepted) is in issue 44's closing note. The 9
answers left with the generic message then are catalogued since, each written again by another student in
tests/mutants/class_three.py: all 22 are now named truly.
"""

from __future__ import annotations

import contextlib
import io
import math

import pytest
import torch
import torch.nn.functional as F
from test_fresh_class import assert_student_judged
from test_naming import _arguments, _key, _wrong_cases

from course_lib.checks import check_against_reference
from course_lib.checks.compare import _cast, _default_outputs


# --- chapter 00 ------------------------------------------------------------------------------------------
def discounted_return_horner_forward(rewards, gamma):  # Horner's rule run forwards: weights gamma^(T-1-t)
    G = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1]):
        G = G * gamma + rewards[..., t]
    return G


def discounted_return_right_loop(rewards, gamma):
    G = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        G = rewards[..., t] + gamma * G
    return G


def reward_to_go_skips_first(rewards, gamma):  # range(T - 1, 0, -1): step 0 never written
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1] - 1, 0, -1):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out


def reward_to_go_slices_right(rewards, gamma):
    T = rewards.shape[-1]
    cols = []
    for t in range(T):
        tail = rewards[..., t:]
        cols.append((tail * gamma ** torch.arange(T - t, dtype=rewards.dtype)).sum(-1))
    return torch.stack(cols, -1)


# --- chapter 02 ------------------------------------------------------------------------------------------
def gather_log_probs_ce_right(logits, tokens):
    V = logits.shape[-1]
    flat = -F.cross_entropy(logits.reshape(-1, V), tokens.reshape(-1).long(), reduction="none")
    return flat.reshape(tokens.shape)


def gather_log_probs_softmax_of_gathered(logits, tokens):  # log_softmax over the picked logits, not the vocabulary
    picked = logits.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)
    return torch.log_softmax(picked, dim=-1)


def reinforce_loss_seq_mean(logp, deltas, mask=None):  # a mean per response, then over responses
    m = torch.ones_like(logp) if mask is None else mask.to(logp.dtype)
    logp = torch.where(m > 0, logp, torch.zeros_like(logp))
    per_resp = -(deltas.detach()[..., None] * logp * m).sum(-1) / m.sum(-1).clamp(min=1)
    return per_resp.mean()


def reinforce_loss_right_index(logp, deltas, mask=None):
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    per_token = -(deltas.detach()[..., None].expand_as(logp) * logp)
    if not valid.any():
        return per_token.sum() * 0.0
    return per_token[valid].mean()


# --- chapter 03 ------------------------------------------------------------------------------------------
def compute_deltas_batch_std(rewards, mode, eps=1e-6):  # the std of the whole batch, not of each group
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(-1, keepdim=True)
    same = (rewards == rewards[:, :1]).all(-1, keepdim=True)
    centred = torch.where(same, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std() + eps)


def compute_deltas_eps_in_sqrt(rewards, mode, eps=1e-6):  # sqrt(var + eps), not std + eps
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(-1, keepdim=True)
    same = (rewards == rewards[:, :1]).all(-1, keepdim=True)
    centred = torch.where(same, torch.zeros_like(centred), centred)
    if mode == "centered_rewards" or rewards.shape[-1] == 1:
        return centred
    return centred / torch.sqrt(rewards.var(-1, keepdim=True) + eps)


# --- chapter 04 ------------------------------------------------------------------------------------------
def td_residuals_roll(rewards, values, dones, last_values, gamma):  # roll wraps V(s_0) into the last step
    d = dones.to(rewards.dtype)
    return rewards + gamma * (1 - d) * values.roll(-1, dims=-1) - values


def compute_gae_next_done(rewards, values, dones, last_values, gamma, lam):  # the done of step t + 1 cuts A_t
    d = dones.to(rewards.dtype)
    nxt = torch.cat([values[..., 1:], last_values[..., None]], -1)
    deltas = rewards + gamma * (1 - d) * nxt - values
    adv = torch.zeros_like(deltas)
    running = torch.zeros_like(last_values, dtype=deltas.dtype)
    T = deltas.shape[-1]
    for t in reversed(range(T)):
        cut = d[..., t + 1] if t + 1 < T else torch.zeros_like(running)
        running = deltas[..., t] + gamma * lam * (1 - cut) * running
        adv[..., t] = running
    return adv, adv + values


def compute_gae_mc_returns(rewards, values, dones, last_values, gamma, lam):  # returns: Monte Carlo, not adv + V
    d = dones.to(rewards.dtype)
    nxt = torch.cat([values[..., 1:], last_values[..., None]], -1)
    deltas = rewards + gamma * (1 - d) * nxt - values
    adv = torch.zeros_like(deltas)
    ret = torch.zeros_like(deltas)
    running = torch.zeros_like(last_values, dtype=deltas.dtype)
    g = last_values.to(deltas.dtype).clone()
    for t in reversed(range(deltas.shape[-1])):
        running = deltas[..., t] + gamma * lam * (1 - d[..., t]) * running
        adv[..., t] = running
        g = rewards[..., t] + gamma * (1 - d[..., t]) * g
        ret[..., t] = g
    return adv, ret


# --- chapter 05 ------------------------------------------------------------------------------------------
def surrogate_clamps_product(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):  # clamp(ratio * A)
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    logp = torch.where(valid, logp, torch.zeros_like(logp))
    lo = torch.where(valid, logp_old.detach(), torch.zeros_like(logp_old))
    a = torch.where(valid, adv.detach(), torch.zeros_like(adv))
    ratio = torch.exp(logp - lo)
    obj = torch.min(ratio * a, torch.clamp(ratio * a, 1 - clip_eps, 1 + high))
    loss = -(obj * valid).sum() / valid.sum().clamp(min=1)
    n = valid.sum().clamp(min=1)
    outside = ((ratio < 1 - clip_eps) | (ratio > 1 + high)) & valid
    binds = (((ratio < 1 - clip_eps) & (a < 0)) | ((ratio > 1 + high) & (a > 0))) & valid
    info = {
        "clip_fraction": float(outside.sum() / n),
        "clip_active_fraction": float(binds.sum() / n),
        "approx_kl": float((((ratio - 1) - torch.log(ratio)) * valid).sum() / n),
    }
    return loss, info


def value_loss_mse_over_padding(values, returns, values_old=None, clip_eps=None, mask=None):  # mse over every entry
    m = torch.ones_like(values) if mask is None else mask.to(values.dtype)
    v = torch.where(m > 0, values, torch.zeros_like(values))
    r = torch.where(m > 0, returns.detach(), torch.zeros_like(returns))
    err = (v - r) ** 2
    if clip_eps is not None:
        vo = torch.where(m > 0, values_old.detach(), torch.zeros_like(values_old))
        vc = vo + torch.clamp(v - vo, -clip_eps, clip_eps)
        err = torch.maximum(err, (vc - r) ** 2)
    return 0.5 * err.mean()


def value_loss_clip_around_returns(values, returns, values_old=None, clip_eps=None, mask=None):
    m = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    r = returns.detach()
    err = (values - r) ** 2
    if clip_eps is not None:  # the clip centred on the target instead of the old value
        vc = r + torch.clamp(values - r, -clip_eps, clip_eps)
        err = torch.maximum(err, (vc - r) ** 2)
    err = torch.where(m, err, torch.zeros_like(err))
    return 0.5 * err.sum() / m.sum().clamp(min=1)


# --- chapter 06 ------------------------------------------------------------------------------------------
def group_advantages_var_sqrt_right(rewards, normalize_std=True, eps=1e-6):
    centred = rewards - rewards.mean(-1, keepdim=True)
    same = (rewards == rewards[:, :1]).all(-1, keepdim=True)
    centred = torch.where(same, torch.zeros_like(centred), centred)
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.var(-1, keepdim=True).sqrt() + eps)


def group_advantages_batch_mean(rewards, normalize_std=True, eps=1e-6):  # the batch's mean as every group's baseline
    centred = rewards - rewards.mean()
    same = (rewards == rewards[:, :1]).all(-1, keepdim=True)
    centred = torch.where(same, torch.zeros_like(centred), centred)
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(-1, keepdim=True) + eps)


def kl_k3_exp_minus_one_right(logp, logp_ref, kind):
    log_r = logp_ref - logp
    if kind == "k1":
        return logp - logp_ref
    if kind == "k2":
        return 0.5 * log_r * log_r
    return torch.exp(log_r) - 1 - log_r


def kl_k3_reverse(logp, logp_ref, kind):  # the ratio the wrong way round: pi_theta / pi_ref
    log_r = logp_ref - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r**2
    return torch.expm1(-log_r) + log_r


def aggregate_token_mean_of_sums_right(per_token, mask, mode, max_len=None):
    m = mask.to(per_token.dtype)
    pt = torch.where(m > 0, per_token, torch.zeros_like(per_token))
    sums = (pt * m).sum(-1)
    lengths = m.sum(-1)
    if mode == "token-mean":
        total = lengths.sum()
        return sums.sum() / total if total > 0 else sums.sum() * 0
    if mode == "seq-mean-token-mean":
        return (sums / lengths.clamp(min=1)).mean()
    L = per_token.shape[-1] if max_len is None else max_len
    return (sums / L).mean()


def aggregate_dr_grpo_over_valid_max(per_token, mask, mode, max_len=None):  # Dr. GRPO divided by the longest valid
    m = mask.to(per_token.dtype)
    pt = torch.where(m > 0, per_token, torch.zeros_like(per_token))
    sums = (pt * m).sum(-1)
    lengths = m.sum(-1)
    if mode == "token-mean":
        return sums.sum() / lengths.sum().clamp(min=1)
    if mode == "seq-mean-token-mean":
        return (sums / lengths.clamp(min=1)).mean()
    L = lengths.max().clamp(min=1) if max_len is None else max_len
    return (sums / L).mean()


# --- chapter 08 ------------------------------------------------------------------------------------------
def completion_mask_shifted_cumprod_right(completion_ids, eos_id):
    not_eos = (completion_ids != eos_id).long()
    before = torch.cumprod(not_eos, -1)
    ones = torch.ones_like(before[..., :1])
    return torch.cat([ones, before[..., :-1]], -1).float()


def completion_mask_ne_eos(completion_ids, eos_id):  # marks every non-EOS token, also after the EOS
    return (completion_ids != eos_id).float()


# --- chapter 10 ------------------------------------------------------------------------------------------
def pass_at_k_comb_right(n, c, k):
    n, c, k = (torch.as_tensor(x) for x in (n, c, k))
    n, c, k = torch.broadcast_tensors(n, c, k)
    out = torch.empty(n.shape, dtype=torch.float64)
    for idx in range(n.numel()):
        nn_, cc, kk = int(n.reshape(-1)[idx]), int(c.reshape(-1)[idx]), int(k.reshape(-1)[idx])
        if kk > nn_:
            val = 1.0 if cc > 0 else 0.0
        elif nn_ - cc < kk:
            val = 1.0
        else:
            val = 1.0 - math.prod(1.0 - kk / i for i in range(nn_ - cc + 1, nn_ + 1))
        out.reshape(-1)[idx] = val
    return out


def pass_at_k_prod_to_n(n, c, k):  # the product over every i up to n, not only the last c
    n, c, k = (torch.as_tensor(x) for x in (n, c, k))
    n, c, k = torch.broadcast_tensors(n, c, k)
    out = torch.empty(n.shape, dtype=torch.float64)
    for idx in range(n.numel()):
        nn_, cc, kk = int(n.reshape(-1)[idx]), int(c.reshape(-1)[idx]), int(k.reshape(-1)[idx])
        if nn_ - cc < kk:
            val = 1.0 if cc > 0 else 0.0
        else:
            val = 1.0 - math.prod(1.0 - kk / i for i in range(kk + 1, nn_ + 1)) if cc > 0 else 0.0
        out.reshape(-1)[idx] = val
    return out


# --- chapter 11 ------------------------------------------------------------------------------------------
def rloo_no_g1_guard(rewards):  # a group of one divides by G - 1 = 0
    G = rewards.shape[-1]
    return rewards - (rewards.sum(-1, keepdim=True) - rewards) / (G - 1)


def rloo_scaled_centring_right(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return G / (G - 1) * (rewards - rewards.mean(-1, keepdim=True))


def gspo_mean_over_all_positions(logp, logp_old, mask):  # the mean over T, padding included (as zeros)
    m = mask.bool()
    diff = torch.where(m, logp - logp_old.detach(), torch.zeros_like(logp))
    return diff.mean(-1)


def gspo_right_where(logp, logp_old, mask):
    m = mask.bool()
    diff = torch.where(m, logp - logp_old.detach(), torch.zeros_like(logp))
    return diff.sum(-1) / m.sum(-1).clamp(min=1).to(diff.dtype)


def cispo_clip_logp(logp, logp_old, adv, clip_eps_high, clip_eps=None):  # the ratio used as the loss, PPO-style
    ratio = torch.exp(logp - logp_old.detach())
    low = 0.0 if clip_eps is None else 1 - clip_eps
    return -torch.clamp(ratio, low, 1 + clip_eps_high) * adv.detach()


def cispo_low_default_eps(
    logp, logp_old, adv, clip_eps_high, clip_eps=None
):  # a floor at 1 - clip_eps_high when none given
    ratio = torch.exp(logp - logp_old.detach())
    low = 1 - (clip_eps_high if clip_eps is None else clip_eps)
    w = torch.clamp(ratio, low, 1 + clip_eps_high).detach()
    return -w * adv.detach() * logp


# --- chapter 01 ------------------------------------------------------------------------------------------
def math_reward_regex_boxed(response_text, ground_truth):  # \\boxed{[^{}]*}: a nested brace hides the answer
    import re

    boxed = re.findall(r"\\boxed\{([^{}]*)\}", response_text)
    if boxed:
        answer = boxed[-1]
    else:
        parts = re.split(r"(?i)the answer is|answer:", response_text)
        if len(parts) < 2:
            return 0.0
        answer = re.split(r"[.!?](?:\s|$)|\n|<", parts[-1])[0]

    def norm(text):
        text = text.strip().strip("$").strip().rstrip(".,;:!?").replace(",", "")
        return text

    a, b = norm(answer), norm(ground_truth)
    try:
        return float(float(a) == float(b))
    except ValueError:
        return float(a == b)


# (exercise, student, what the check should name; None for the generic message, "pass" for a right answer)
TABLE = [
    ("discounted_return", discounted_return_horner_forward, "your discount runs backwards"),
    ("discounted_return", discounted_return_right_loop, "pass"),
    ("reward_to_go", reward_to_go_skips_first, "G_0 is never written"),
    ("reward_to_go", reward_to_go_slices_right, "pass"),
    ("gather_log_probs", gather_log_probs_softmax_of_gathered, "you normalised after the gather"),
    ("gather_log_probs", gather_log_probs_ce_right, "pass"),
    ("reinforce_loss", reinforce_loss_seq_mean, "averaged each response first"),
    ("reinforce_loss", reinforce_loss_right_index, "pass"),
    ("compute_deltas", compute_deltas_batch_std, "the std is the whole batch's"),
    ("compute_deltas", compute_deltas_eps_in_sqrt, "eps is inside the square root"),
    ("td_residuals", td_residuals_roll, "values.roll(-1) wraps"),
    ("compute_gae", compute_gae_next_done, "off by one in the recursion"),
    ("compute_gae", compute_gae_mc_returns, "returns should be advantages + values"),
    ("clipped_surrogate_loss", surrogate_clamps_product, "you clipped the product ratio * adv"),
    ("value_loss", value_loss_mse_over_padding, "padding is counted in the denominator"),
    ("value_loss", value_loss_clip_around_returns, "clip_eps is ignored"),  # centred on the target: no clip at all
    ("group_advantages", group_advantages_batch_mean, "the baseline is the mean of the whole batch"),
    ("group_advantages", group_advantages_var_sqrt_right, "pass"),
    ("kl_estimate", kl_k3_reverse, "k3's ratio is inverted"),
    ("kl_estimate", kl_k3_exp_minus_one_right, "pass"),
    ("aggregate_loss", aggregate_dr_grpo_over_valid_max, "the longest response's number of valid tokens"),
    ("aggregate_loss", aggregate_token_mean_of_sums_right, "pass"),
    ("completion_mask", completion_mask_ne_eos, "the mask is 0 only at the EOS itself"),
    ("completion_mask", completion_mask_shifted_cumprod_right, "pass"),
    ("pass_at_k", pass_at_k_prod_to_n, "whatever c is"),
    ("pass_at_k", pass_at_k_comb_right, "pass"),
    ("rloo_advantages", rloo_no_g1_guard, "a group of one"),
    ("rloo_advantages", rloo_scaled_centring_right, "pass"),
    ("gspo_sequence_log_ratio", gspo_mean_over_all_positions, "padding is counted in the denominator"),
    ("gspo_sequence_log_ratio", gspo_right_where, "pass"),
    ("cispo_loss", cispo_clip_logp, "PPO's clipped term alone"),
    ("cispo_loss", cispo_low_default_eps, "floored at 1 - clip_eps_high"),
    # Two mistakes: the box stops at the first '}', and every comma is removed ('1,2' read as 12, a case since
    # round seven). Neither explains every wrong case, so neither is named: the generic message.
    ("math_answer_reward", math_reward_regex_boxed, None),
]


@pytest.mark.parametrize("exercise, student, named", TABLE, ids=[row[1].__name__ for row in TABLE])
def test_third_class_student(exercise, student, named):
    assert_student_judged(exercise, student, named)


# The mistakes catalogued for this class: (module of the check, exercise, a part of the message).
CATALOGUED = [
    ("warmup", "reward_to_go", "G_0 is never written"),
    ("policy_gradient", "gather_log_probs", "you normalised after the gather"),
    ("ppo", "clipped_surrogate_loss", "you clipped the product ratio * adv"),
    ("grpo", "group_advantages", "the baseline is the mean of the whole batch"),
    ("grpo", "aggregate_loss", "the longest response's number of valid tokens"),
    ("capstone.mask", "completion_mask", "the mask is 0 only at the EOS itself"),
    ("reasoning.pass_at_k", "pass_at_k", "whatever c is"),
    ("family.cispo", "cispo_loss", "PPO's clipped term alone"),
    ("family.cispo", "cispo_loss", "floored at 1 - clip_eps_high"),
]


@pytest.mark.parametrize("module_name, exercise, named", CATALOGUED, ids=[row[2] for row in CATALOGUED])
def test_a_near_miss_of_this_class_is_not_named(module_name, exercise, named, monkeypatch, trusting):
    """The mistake on its first wrong case only, right everywhere else: rejected, never given the mistake's name;
    the mistake itself, on every case, is named (so the near miss is not spared by a name that never shows)."""
    args, kwargs = _arguments(module_name, exercise, monkeypatch)
    _, reference, cases = args
    select = kwargs.get("outputs") or _default_outputs
    dtype = kwargs.get("dtypes", (torch.float64,))[0]
    (mistake,) = [m for m in kwargs["mistakes"] if named in m.message]
    wrong = _wrong_cases(mistake, reference, cases, select, dtype)
    assert len(wrong) >= 2, f"{named!r} is wrong on {len(wrong)} case: no near miss tells it apart"
    target = _key(_cast(cases[wrong[0]].kwargs, dtype))

    def near_miss(**inputs):
        return (mistake.fn if _key(inputs) == target else reference)(**inputs)

    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(AssertionError) as rejected:
        check_against_reference(near_miss, *args[1:], **kwargs)
    assert mistake.message not in str(rejected.value)
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(AssertionError) as named_error:
        check_against_reference(mistake.fn, *args[1:], **kwargs)
    assert str(named_error.value).splitlines()[0].endswith(mistake.message)


# With the 9 catalogue entries above switched off, as at first sight: what the structural diagnoses alone say
# (course_lib/checks/structure.py, scope.py). Each is a fact about the output on every wrong case; None: the
# generic message. Both students of each mistake (the class's own, and the one written again) are judged.
STRUCTURAL = {
    "G_0 is never written": "wrong only at the first position along the last axis, and there yours is 0",
    "you normalised after the gather": "is a log-softmax: exp(yours) sums to 1 along the last axis",
    "you clipped the product ratio * adv": None,
    "the baseline is the mean of the whole batch": "minus the reference is the same along the last axis within each",
    "the longest response's number of valid tokens": "/ `mask.sum(-1).max()` (the longest row's valid positions)",
    "the mask is 0 only at the EOS itself": "is `completion_ids != eos_id`, entry by entry",
    "whatever c is": None,
    "PPO's clipped term alone": "a factor `logp` is missing from yours",
    "floored at 1 - clip_eps_high": "every case where yours is wrong has `clip_eps` None or left out",
}


def _without_catalogue_entries(monkeypatch):
    import course_lib.checks as checks

    real = checks._fail

    def fail(name, case, dtype, problem, got, mistakes, *args, **kwargs):
        kept = [m for m in mistakes if not any(named in m.message for named in STRUCTURAL)]
        return real(name, case, dtype, problem, got, kept, *args, **kwargs)

    monkeypatch.setattr(checks, "_fail", fail)


def _class_three_students():
    from mutants.class_three import MUTANTS

    own = [(exercise, student, named) for exercise, student, named in TABLE if named in STRUCTURAL]
    return own + list(MUTANTS)


@pytest.mark.parametrize(
    "exercise, student, named", _class_three_students(), ids=[row[1].__name__ for row in _class_three_students()]
)
def test_first_sight_without_the_catalogue(exercise, student, named, monkeypatch):
    _without_catalogue_entries(monkeypatch)
    words = STRUCTURAL[named]
    assert_student_judged(exercise, student, words)
