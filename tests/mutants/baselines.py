"""Classic wrong (and correct) ways to write the exercises of chapter 03.

``compute_deltas(rewards[B, G], mode)`` and ``gradient_variance(grad_samples[N, P])``,
checked by ``course_lib.checks.baselines.check_compute_deltas`` and ``check_gradient_variance``.
"""

import torch
from catalogue_round7_00_04 import (
    r03_deltas_std_mean,
    r03_variance_cov_trace,
    w03_deltas_center_then_std_of_centred_biased,
    w03_deltas_eps_fixed,
    w03_deltas_eps_in_numerator,
    w03_deltas_g1_nan_to_num,
    w03_deltas_in_place,
    w03_deltas_layer_norm,
    w03_deltas_leave_one_out,
    w03_deltas_mean_abs_deviation,
    w03_deltas_min_max,
    w03_deltas_no_keepdim,
    w03_deltas_sqrt_var_plus_eps,
    w03_deltas_std_floor,
    w03_deltas_unbiased_false,
    w03_variance_cov_diag_mean,
    w03_variance_max_coordinate,
    w03_variance_mean_of_sq_norm,
    w03_variance_norm_of_mean_subtracted,
    w03_variance_numpy_default,
    w03_variance_of_norms,
    w03_variance_of_the_sum,
    w03_variance_scalar_mean,
    w03_variance_sqrt,
    w03_variance_std_sum,
    w03_variance_times_n_minus_one_over_n,
    w03_variance_trace_over_N,
)

# ---------------------------------------------------------------------------
# compute_deltas: wrong
# ---------------------------------------------------------------------------


def _deltas(rewards, mode, *, centre, scale):
    """Shared skeleton: ``centre(rewards)`` and ``scale(rewards)`` are the parts a mutant changes."""
    if mode == "rewards":
        return rewards.clone()
    centred = centre(rewards)
    if mode == "centered_rewards":
        return centred
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    return centred / scale(rewards)


def _group_centre(r):
    return r - r.mean(dim=-1, keepdim=True)


def deltas_population_std(rewards, mode, eps=1e-6):
    return _deltas(rewards, mode, centre=_group_centre, scale=lambda r: r.std(dim=-1, keepdim=True, correction=0) + eps)


def deltas_no_eps(rewards, mode, eps=1e-6):
    return _deltas(rewards, mode, centre=_group_centre, scale=lambda r: r.std(dim=-1, keepdim=True))


def deltas_nan_for_group_of_one(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    if mode == "centered_rewards":
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def deltas_batch_mean(rewards, mode, eps=1e-6):
    return _deltas(
        rewards,
        mode,
        centre=lambda r: r - r.mean(dim=0, keepdim=True),
        scale=lambda r: r.std(dim=-1, keepdim=True) + eps,
    )


def deltas_batch_std(rewards, mode, eps=1e-6):
    return _deltas(rewards, mode, centre=_group_centre, scale=lambda r: r.std(dim=0, keepdim=True) + eps)


def deltas_not_centred_before_dividing(rewards, mode, eps=1e-6):
    if mode == "normalized_rewards":
        return _deltas(rewards, mode, centre=lambda r: r, scale=lambda r: r.std(dim=-1, keepdim=True) + eps)
    return _deltas(rewards, mode, centre=_group_centre, scale=None)


def deltas_divide_by_variance(rewards, mode, eps=1e-6):
    return _deltas(rewards, mode, centre=_group_centre, scale=lambda r: r.var(dim=-1, keepdim=True) + eps)


def deltas_eps_inside_sqrt(rewards, mode, eps=1e-6):
    return _deltas(rewards, mode, centre=_group_centre, scale=lambda r: torch.sqrt(r.var(dim=-1, keepdim=True) + eps))


def deltas_centred_in_rewards_mode(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards - rewards.mean(dim=-1, keepdim=True)
    return _deltas(rewards, mode, centre=_group_centre, scale=lambda r: r.std(dim=-1, keepdim=True) + eps)


def deltas_modes_swapped(rewards, mode, eps=1e-6):
    swapped = {"centered_rewards": "normalized_rewards", "normalized_rewards": "centered_rewards"}
    return _deltas(
        rewards, swapped.get(mode, mode), centre=_group_centre, scale=lambda r: r.std(dim=-1, keepdim=True) + eps
    )


# ---------------------------------------------------------------------------
# compute_deltas: correct variants
# ---------------------------------------------------------------------------


def deltas_loop_over_groups(rewards, mode, eps=1e-6):
    """One group at a time, the std written out with Bessel's correction."""
    if mode == "rewards":
        return rewards.clone()
    out = torch.zeros_like(rewards)
    B, G = rewards.shape
    for b in range(B):
        group = rewards[b]
        if bool((group == group[0]).all()):
            continue  # an all-equal group stays zeros (its rounded mean would leave noise)
        mean = group.sum() / G
        centred = group - mean
        if mode == "centered_rewards":
            out[b] = centred
        elif G > 1:
            std = torch.sqrt((centred**2).sum() / (G - 1))
            out[b] = centred / (std + eps)
    return out


def deltas_from_population_std(rewards, mode, eps=1e-6):
    """The population std rescaled by sqrt(G / (G - 1)) is Bessel's std; nan_to_num handles G = 1."""
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    centred = centred * (rewards != rewards[:, :1]).any(dim=-1, keepdim=True)  # all-equal groups: exact zeros
    if mode == "centered_rewards":
        return centred
    G = rewards.shape[-1]
    std = rewards.std(dim=-1, keepdim=True, correction=0) * (G / max(G - 1, 1)) ** 0.5
    return torch.nan_to_num(centred / (std + eps))


# ---------------------------------------------------------------------------
# gradient_variance: wrong
# ---------------------------------------------------------------------------


def variance_population(grad_samples):
    return grad_samples.var(dim=0, correction=0).sum()


def variance_of_the_mean(grad_samples):
    return grad_samples.var(dim=0).sum() / grad_samples.shape[0]


def variance_over_coordinates(grad_samples):
    return grad_samples.var(dim=1).sum()


def variance_flattened(grad_samples):
    return grad_samples.flatten().var()


def variance_averaged_not_summed(grad_samples):
    return grad_samples.var(dim=0).mean()


def variance_not_centred(grad_samples):
    return (grad_samples**2).sum(dim=1).mean()


# ---------------------------------------------------------------------------
# gradient_variance: correct variants
# ---------------------------------------------------------------------------


def variance_trace_of_covariance(grad_samples):
    cov = torch.atleast_2d(torch.cov(grad_samples.T))  # (P, P), rows of .T are the coordinates
    return float(torch.diagonal(cov).sum())


def variance_mean_squared_distance(grad_samples):
    """E|g - mean|^2 with Bessel's correction, written as a loop over samples."""
    mean = grad_samples.mean(dim=0)
    total = sum(float(((g - mean) ** 2).sum()) for g in grad_samples)
    return total / (grad_samples.shape[0] - 1)


def deltas_whole_batch_statistics(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean()
    if mode == "centered_rewards":
        return centred
    return centred / (rewards.std() + eps)


def deltas_dim0_everywhere(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(0, keepdim=True)
    if mode == "centered_rewards":
        return centred
    return centred / (rewards.std(0, keepdim=True) + eps)


def deltas_centred_mode_normalises(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    return _deltas(
        rewards, "normalized_rewards", centre=_group_centre, scale=lambda r: r.std(dim=-1, keepdim=True) + eps
    )


def deltas_normalised_mode_only_centres(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    return rewards - rewards.mean(dim=-1, keepdim=True)


def deltas_eps_argument_ignored(rewards, mode, eps=1e-6):
    return _deltas(rewards, mode, centre=_group_centre, scale=lambda r: r.std(dim=-1, keepdim=True) + 1e-6)


def deltas_eps_1e8(rewards, mode, eps=1e-6):
    return _deltas(rewards, mode, centre=_group_centre, scale=lambda r: r.std(dim=-1, keepdim=True) + 1e-8)


def deltas_mean_without_keepdim(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    centred = rewards - rewards.mean(dim=-1)
    if mode == "centered_rewards":
        return centred
    return centred / (rewards.std(dim=-1) + eps)


MUTANTS = [
    ("compute_deltas", deltas_population_std, "Bessel"),
    ("compute_deltas", deltas_no_eps, "add eps"),
    ("compute_deltas", deltas_nan_for_group_of_one, "group of one"),
    ("compute_deltas", deltas_batch_mean, "batch axis (dim=0)"),
    ("compute_deltas", deltas_batch_std, "std is over the batch axis"),
    ("compute_deltas", deltas_not_centred_before_dividing, "centre them first"),
    ("compute_deltas", deltas_divide_by_variance, "variance"),
    ("compute_deltas", deltas_eps_inside_sqrt, "inside the square root"),
    ("compute_deltas", deltas_centred_in_rewards_mode, "unchanged"),
    ("compute_deltas", deltas_modes_swapped, "swapped"),
    ("compute_deltas", deltas_whole_batch_statistics, "whole batch"),
    ("compute_deltas", deltas_dim0_everywhere, "mean and the std are over the batch axis"),
    ("compute_deltas", deltas_centred_mode_normalises, "'centered_rewards' only subtracts"),
    ("compute_deltas", deltas_normalised_mode_only_centres, "divides the centred rewards by std + eps too"),
    ("compute_deltas", deltas_eps_argument_ignored, "eps argument is ignored"),
    ("compute_deltas", deltas_eps_1e8, "not 1e-8"),
    ("compute_deltas", deltas_mean_without_keepdim, "keepdim=True"),
    ("gradient_variance", variance_population, "N - 1"),
    ("gradient_variance", variance_of_the_mean, "variance of the mean"),
    ("gradient_variance", variance_over_coordinates, "wrong axis"),
    ("gradient_variance", variance_flattened, "flattened"),
    ("gradient_variance", variance_averaged_not_summed, "their sum"),
    ("gradient_variance", variance_not_centred, "second moment"),
]

VARIANTS = [
    ("compute_deltas", deltas_loop_over_groups),
    ("compute_deltas", deltas_from_population_std),
    ("gradient_variance", variance_trace_of_covariance),
    ("gradient_variance", variance_mean_squared_distance),
]


# Round seven of issue 44 (chapters 00 to 04): the wrong answers of tests/catalogue_round7_00_04.py, each
# named by the mistake it makes, and its right variants.
MUTANTS += [
    ("compute_deltas", w03_deltas_std_floor, "eps is a floor in yours"),
    ("compute_deltas", w03_deltas_leave_one_out, "you subtracted the mean of the *other*"),
    ("compute_deltas", w03_deltas_layer_norm, "F.layer_norm (or sqrt(var + eps)) divides by"),
    ("compute_deltas", w03_deltas_min_max, "you divided by the range (max - min);"),
    ("compute_deltas", w03_deltas_in_place, "changed its input `rewards` in place"),
    ("compute_deltas", w03_deltas_no_keepdim, "keepdim=True keeps it"),
    ("compute_deltas", w03_deltas_eps_in_numerator, "eps is not used: you divide by the std alone"),
    ("compute_deltas", w03_deltas_mean_abs_deviation, "you divided by the mean absolute deviation;"),
    ("compute_deltas", w03_deltas_g1_nan_to_num, "a group of equal rewards is not set to zero"),
    ("gradient_variance", w03_variance_std_sum, "you summed the standard deviations; the"),
    ("gradient_variance", w03_variance_of_norms, "you took the variance of the gradients'"),
    ("gradient_variance", w03_variance_scalar_mean, "you subtracted one mean, over every entry,"),
    ("gradient_variance", w03_variance_max_coordinate, "you returned the largest coordinate's"),
    ("gradient_variance", w03_variance_sqrt, "you returned the square root of the total"),
    ("gradient_variance", w03_variance_norm_of_mean_subtracted, "the variance divides by N, not N - 1: use"),
    ("gradient_variance", w03_variance_of_the_sum, "you took the variance of the sum of the"),
    ("gradient_variance", w03_variance_cov_diag_mean, "you averaged the per-coordinate variances;"),
]

VARIANTS += [
    ("compute_deltas", r03_deltas_std_mean),
    ("gradient_variance", r03_variance_cov_trace),
]

# Wave two of round seven, written after the fixes for wave one.
MUTANTS += [
    ("compute_deltas", w03_deltas_unbiased_false, "the std divides by G, not G - 1: use"),
    ("compute_deltas", w03_deltas_eps_fixed, "eps is fixed at 0.0001 in yours, whatever"),
    ("gradient_variance", w03_variance_mean_of_sq_norm, "the variance divides by N, not N - 1: use"),
    ("gradient_variance", w03_variance_trace_over_N, "this is the variance of the mean of the N"),
]

# Wave three of round seven, written after the fixes for wave two.
MUTANTS += [
    ("compute_deltas", w03_deltas_center_then_std_of_centred_biased, "the std divides by G, not G - 1: use"),
    ("gradient_variance", w03_variance_numpy_default, "the variance divides by N, not N - 1: use"),
]

# Wave four of round seven, written after the fixes for wave three.
MUTANTS += [
    ("compute_deltas", w03_deltas_sqrt_var_plus_eps, "eps is inside the square root (sqrt(var"),
    ("gradient_variance", w03_variance_times_n_minus_one_over_n, "the variance divides by N, not N - 1:"),
]
