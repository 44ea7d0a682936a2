"""A fresh class of students, written after issue 44's fixes and never shown to the catalogues first.

Each row is a plausible answer a student writes, wrong or right, with what the check should say: a wrong
answer must be rejected; when ``named`` is given, the first line must contain it (the mistake the student
made); when ``named`` is None, the message must not name a catalogued mistake at all (the generic message:
"differs from the reference", a crash, a shape, a NaN). A right answer must pass. The figures this table
gives are in the closing note of issue 44; ``test_fresh_class_figures`` keeps them from sliding back.
"""

from __future__ import annotations

import contextlib
import io

import pytest
import torch
from mutants.issue44 import (  # the same wrong answers, written once: the catalogue's
    advantages_bessel_twice,
    advantages_clamped_std,
    gae_returns_before_loop,
    mask_argmax,
    mask_roll,
    rloo_divides_by_g,
    rtg_last_reward_twice,
    rtg_never_reversed,
    surrogate_sides_swapped,
    value_loss_half_twice,
    value_loss_numel,
)
from test_mutants import _check

# ") returned ": the string checks' plain difference, a call with its arguments and both answers.
GENERIC = ("differs from the reference", "contains NaN", "has shape", "raised ", "could not be checked", ") returned ")


# --- chapter 00 ------------------------------------------------------------------------------------------


def rtg_cumsum_flip(rewards, gamma):  # meant right; 0 ** t divides by 0 when gamma = 0, and the check says so
    T = rewards.shape[-1]
    powers = gamma ** torch.arange(T, dtype=rewards.dtype)
    flipped = (rewards * powers).flip(-1).cumsum(-1).flip(-1)
    return flipped / powers


# --- chapter 04 ------------------------------------------------------------------------------------------


def gae_vectorised_right(rewards, values, dones, last_values, gamma, lam):
    d = dones.to(rewards.dtype)
    next_values = torch.cat([values[..., 1:], last_values[..., None]], dim=-1)
    deltas = rewards + gamma * (1 - d) * next_values - values
    adv = torch.zeros_like(rewards)
    running = torch.zeros_like(last_values)
    for t in range(rewards.shape[-1] - 1, -1, -1):
        running = deltas[..., t] + gamma * lam * (1 - d[..., t]) * running
        adv[..., t] = running
    return adv, adv + values


# --- chapter 05 ------------------------------------------------------------------------------------------


def value_loss_huber(values, returns, values_old=None, clip_eps=None, mask=None):  # Huber, and no value clip
    m = torch.ones_like(values) if mask is None else mask.to(values.dtype)
    error = torch.nn.functional.smooth_l1_loss(values, returns.detach(), reduction="none")
    return (error * m).sum() / m.sum()


def value_loss_mse_of_the_selection(values, returns, values_old=None, clip_eps=None, mask=None):  # NaN on no entry
    m = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    error = (values - returns.detach()).pow(2)
    if clip_eps is not None:
        v_clip = values_old.detach() + torch.clamp(values - values_old.detach(), -clip_eps, clip_eps)
        error = torch.maximum(error, (v_clip - returns.detach()).pow(2))
    return 0.5 * error[m].mean()


# --- chapter 06 ------------------------------------------------------------------------------------------


def advantages_einops_style_right(rewards, normalize_std=True, eps=1e-6):
    mean = rewards.mean(dim=-1, keepdim=True)
    same = (rewards.amax(-1, keepdim=True) - rewards.amin(-1, keepdim=True)) == 0
    centred = torch.where(same, torch.zeros_like(rewards), rewards - mean)
    if not normalize_std or rewards.shape[-1] < 2:
        return centred
    return centred / (torch.std(rewards, dim=-1, keepdim=True, unbiased=True) + eps)


def kl_k3_log1p(logp, logp_ref, kind):  # right: k3 written with expm1
    log_r = logp_ref - logp.new_zeros(()) - logp
    return {"k1": -log_r, "k2": 0.5 * log_r**2, "k3": torch.expm1(log_r) - log_r}[kind]


def kl_k2_abs(logp, logp_ref, kind):
    log_r = logp_ref - logp
    return {"k1": -log_r, "k2": 0.5 * log_r.abs(), "k3": torch.expm1(log_r) - log_r}[kind]


# --- chapter 08 ------------------------------------------------------------------------------------------


def mask_cummax_right(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).int()
    seen_before = torch.cat([torch.zeros_like(is_eos[..., :1]), is_eos[..., :-1]], dim=-1).cummax(-1).values
    return (seen_before == 0).float()


# --- chapter 11 ------------------------------------------------------------------------------------------


def rloo_mean_minus_self(rewards):  # right: the leave-one-out mean, through the group mean
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return G / (G - 1) * (rewards - rewards.mean(-1, keepdim=True))


# (exercise, student, what the check should name; None for the generic message, "pass" for a right answer)
TABLE = [
    ("reward_to_go", rtg_last_reward_twice, "the last reward is counted twice"),
    ("reward_to_go", rtg_never_reversed, "reverse time order"),
    ("reward_to_go", rtg_cumsum_flip, "divide by gamma ** t"),
    ("compute_gae", gae_returns_before_loop, "before the loop filled the advantages"),
    ("compute_gae", gae_vectorised_right, "pass"),
    ("clipped_surrogate", surrogate_sides_swapped, "two sides are swapped"),
    ("value_loss", value_loss_numel, "mask.numel()"),
    ("value_loss", value_loss_half_twice, "0.5 is applied twice"),
    ("value_loss", value_loss_huber, None),
    ("value_loss", value_loss_mse_of_the_selection, "a mask with no valid entry gives 0 / 0"),
    ("group_advantages", advantages_bessel_twice, "Bessel's correction is applied twice"),
    ("group_advantages", advantages_clamped_std, "floored at eps"),
    ("group_advantages", advantages_einops_style_right, "pass"),
    ("kl_estimate", kl_k3_log1p, "pass"),
    ("kl_estimate", kl_k2_abs, "not 0.5 * |log_r|"),
    ("completion_mask", mask_argmax, "argmax"),
    ("completion_mask", mask_roll, "roll, which wraps around"),
    ("completion_mask", mask_cummax_right, "pass"),
    ("rloo_advantages", rloo_mean_minus_self, "pass"),
    ("rloo_advantages", rloo_divides_by_g, "divided by G"),
]


def _verdict(exercise, student):
    """("pass", message), ("named", first line) or ("generic", first line)."""
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            _check(exercise)(student)
        except AssertionError as error:
            first = str(error).splitlines()[0]
            return ("generic" if any(g in first for g in GENERIC) else "named"), first
    return "pass", ""


def assert_student_judged(exercise, student, named):
    """The check's verdict on ``student`` is the row's: passed ("pass"), the generic message (None), or ``named``."""
    verdict, first = _verdict(exercise, student)
    if named == "pass":
        assert verdict == "pass", f"a right answer was rejected: {first}"
    elif named is None:
        assert verdict == "generic", f"named with a mistake the student did not make: {first}"
    else:
        assert verdict == "named" and named in first, f"expected the mistake {named!r}, got: {first}"


@pytest.mark.parametrize("exercise, student, named", TABLE, ids=[row[1].__name__ for row in TABLE])
def test_fresh_student(exercise, student, named):
    assert_student_judged(exercise, student, named)


# Each named row with the catalogue entry that names it switched off, as at first sight: what the structural
# diagnoses alone say (course_lib/checks/structure.py, scope.py); None: the generic message.
STRUCTURAL = {
    "the last reward is counted twice": None,
    "reverse time order": "is the reference reversed along the last axis",
    "divide by gamma ** t": "holds NaN or inf where the reference has numbers",
    "before the loop filled the advantages": "your output[1] is the input `values` as it came in",
    "two sides are swapped": "it is wrong on every case with `clip_eps_high` given",
    "mask.numel()": "times `mask.sum()` (the number of valid positions) / `mask.numel()`",
    "0.5 is applied twice": "is the reference times 0.5",
    "Bessel's correction is applied twice": "each row is the reference's row times a factor of its own",
    "floored at eps": "each row is the reference's row times a factor of its own",
    "not 0.5 * |log_r|": "every case where yours is wrong has `kind='k2'`",
    "argmax": "a row of `completion_ids` with no `eos_id` in it",
    "roll, which wraps around": "whole rows of your mask are wrong",
    "divided by G": None,
}


@pytest.mark.parametrize(
    "exercise, student, named",
    [row for row in TABLE if row[2] in STRUCTURAL],
    ids=[row[1].__name__ for row in TABLE if row[2] in STRUCTURAL],
)
def test_first_sight_without_the_catalogue(exercise, student, named, monkeypatch):
    import course_lib.checks as checks

    real = checks._fail

    def fail(name, case, dtype, problem, got, mistakes, *args, **kwargs):
        kept = [m for m in mistakes if named not in m.message]
        return real(name, case, dtype, problem, got, kept, *args, **kwargs)

    monkeypatch.setattr(checks, "_fail", fail)
    assert_student_judged(exercise, student, STRUCTURAL[named])
