"""The wrong ways to turn a group's rewards into deltas (chapter 03), which ``checks/baselines.py`` names, and chapter
06's ``check_group_advantages`` too (``group_advantages`` is ``compute_deltas`` in two of its modes); and the wrong
total variances of ``gradient_variance``. :func:`wrong_deltas` builds a wrong ``compute_deltas`` from options, one
mistake each; the round-seven lists at the end pair more of what students wrote with its message.
"""

from __future__ import annotations

import torch

from course_lib.checks import Mistake


def group_std(r):
    """Each group's std, Bessel-corrected: the right one."""
    return _std(r, dim=-1)


def population_std(r):
    """Each group's std divided by G, not G - 1."""
    return _std(r, dim=-1, correction=0)


def batch_std(r):
    """The std of the whole batch, for every entry."""
    return _std(r.flatten(), dim=0).expand_as(r)


def wrong_deltas(
    centre=True,
    mean_dim=-1,
    std_fn=group_std,
    eps_where="outside",
    g1_zero=True,
    eps_used=None,
    modes=None,
    equal_zero=False,
):
    """A wrong ``compute_deltas(rewards, mode, eps)``: each option is one mistake (the defaults are right).

    ``centre=False`` skips the mean before dividing (mode 'normalized_rewards'), ``centre="never"`` in both
    modes; ``mean_dim`` is the mean's axis (``None``: the whole batch); ``std_fn`` the
    spread divided by; ``eps_where`` ``"inside"`` a square root or ``"none"``; ``g1_zero=False`` divides a group of
    one by its NaN std; ``eps_used`` replaces the ``eps`` passed; ``modes`` maps a mode to the one computed;
    ``equal_zero=True`` sets a group of equal rewards to zero, as the reference does (so that a mistake made elsewhere
    is replayed with that promise kept, as a student who kept it wrote it).
    """

    def wrong(rewards, mode, eps=1e-6):
        mode = (modes or {}).get(mode, mode)
        eps = eps if eps_used is None else eps_used
        if mode == "rewards":
            return rewards.clone()
        mean = rewards.mean() if mean_dim is None else rewards.mean(dim=mean_dim, keepdim=True)
        centred = rewards - mean
        if equal_zero:  # a group whose rewards all agree carries no signal: zero, whatever the mean subtracted
            all_equal = (rewards == rewards[..., :1]).all(dim=-1, keepdim=True)
            centred = torch.where(all_equal, torch.zeros_like(centred), centred)
        if mode == "centered_rewards":
            return rewards.clone() if centre == "never" else centred
        x = centred if centre is True else rewards.clone()
        if rewards.shape[-1] == 1 and g1_zero:
            return torch.zeros_like(rewards)
        spread = std_fn(rewards)
        if eps_where == "outside":
            return x / (spread + eps)
        if eps_where == "floor":
            return x / spread.clamp(min=eps)
        if eps_where == "inside":
            return x / torch.sqrt(spread + eps)  # spread is a variance here
        return x / spread

    return wrong


def _std(r: torch.Tensor, dim: int, correction: int = 1) -> torch.Tensor:
    """``torch.std(r, dim, keepdim=True)`` without its warning for a single entry (it gives NaN).

    The checks' mistakes use it: a wrong implementation replayed on a group of one
    should give its NaN quietly, not print a warning into the student's notebook.
    """
    if r.shape[dim] - correction > 0:  # torch's own std, so a mistake rounds as a student's torch.std does
        return r.std(dim=dim, keepdim=True, correction=correction)
    centred = r - r.mean(dim=dim, keepdim=True)
    return ((centred**2).sum(dim=dim, keepdim=True) / (r.shape[dim] - correction)).sqrt()


def zeroed_below_eps(rewards, normalize_std=True, eps=1e-6):
    """group_advantages with "no spread" read as std < eps instead of rewards all equal (chapter 06's mistake)."""
    G = rewards.shape[-1]
    std = group_std(rewards) if G > 1 else torch.zeros_like(rewards[..., :1])
    flat = std < eps  # (B, 1)
    centred = torch.where(flat, torch.zeros_like(rewards), rewards - rewards.mean(-1, keepdim=True))
    return centred if not normalize_std else torch.where(flat, torch.zeros_like(centred), centred / (std + eps))


# ---------------------------------------------------------------------------
# Round seven: more of what students write
# ---------------------------------------------------------------------------


def _zeroed_where_flat(eps):
    """Groups of equal rewards zeroed exactly (as asked), the others divided by the std alone: eps not used."""

    def wrong(rewards, mode, eps=eps):
        if mode == "rewards":
            return rewards.clone()
        flat = (rewards == rewards[..., :1]).all(-1, keepdim=True)
        centred = torch.where(flat, torch.zeros_like(rewards), rewards - rewards.mean(-1, keepdim=True))
        if mode == "centered_rewards" or rewards.shape[-1] == 1:
            return centred
        std = group_std(rewards)
        return torch.where(flat, centred, centred / torch.where(flat, torch.ones_like(std), std))

    return wrong


def _leave_one_out(rewards, mode, eps=1e-6):
    if mode == "rewards":
        return rewards.clone()
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    baseline = (rewards.sum(-1, keepdim=True) - rewards) / (G - 1)  # (B, G): the mean of the others
    centred = rewards - baseline
    if mode == "centered_rewards":
        return centred
    return centred / (group_std(rewards) + eps)


def _spread(fn):
    """A wrong spread with the right centring, eps added outside: wrong_deltas with ``std_fn=fn``."""
    return wrong_deltas(std_fn=fn)


def deltas_zeroed_below_eps(rewards, mode, eps=1e-6):
    """compute_deltas with "no spread" read as std < eps instead of rewards all equal, in both centred modes."""
    if mode == "rewards":
        return rewards.clone()
    return zeroed_below_eps(rewards, mode == "normalized_rewards", eps)


DELTAS_MISTAKES_MORE = [
    Mistake(
        "a group whose std is below eps is set to zero, but only a group whose rewards are all equal has nothing "
        "to learn: rewards that differ by less than eps still give (r - mean) / (std + eps), small and not 0; "
        "test (rewards == rewards[..., :1]).all(-1) for the equal groups",
        deltas_zeroed_below_eps,
    ),
    *(
        Mistake(
            f"eps is fixed at {eps:g} in yours, whatever the eps argument is: divide by std + eps with the eps "
            "passed in (1e-6 unless given)",
            wrong_deltas(eps_used=eps),
        )
        for eps in (1e-2, 1e-3, 1e-4, 1e-5, 1e-7)
    ),
    Mistake(
        "eps is a floor in yours (std.clamp(min=eps)); the exercise adds it: centred / (std + eps), which "
        "differs wherever the std is near eps or below it",
        wrong_deltas(eps_where="floor"),
    ),
    Mistake(
        "eps is not used: you divide by the std alone (and set groups without spread to 0); divide by "
        "std + eps, with the eps argument (1e-6 unless given)",
        _zeroed_where_flat(0.0),
    ),
    Mistake(
        "you subtracted the mean of the *other* responses (RLOO's leave-one-out baseline), which is the group "
        "mean's centring times G / (G - 1); compute_deltas subtracts the group mean itself",
        _leave_one_out,
    ),
    Mistake(
        "F.layer_norm (or sqrt(var + eps)) divides by the population std with eps under the square root; "
        "the exercise divides by the Bessel-corrected std plus eps: centred / (rewards.std(-1, keepdim=True) + eps)",
        wrong_deltas(std_fn=lambda r: _std(r, dim=-1, correction=0) ** 2, eps_where="inside"),
    ),
    Mistake(
        "you divided by the range (max - min); normalising divides by the group's standard deviation, "
        "rewards.std(dim=-1, keepdim=True) + eps",
        _spread(lambda r: r.amax(-1, keepdim=True) - r.amin(-1, keepdim=True)),
    ),
    Mistake(
        "you divided by the mean absolute deviation; normalising divides by the group's standard deviation, "
        "rewards.std(dim=-1, keepdim=True) + eps",
        _spread(lambda r: (r - r.mean(-1, keepdim=True)).abs().mean(-1, keepdim=True)),
    ),
]


def _one_pass_variance(grad_samples):
    """E[g^2] - E[g]^2 per coordinate, Bessel-corrected and summed: a Python float, as the reference returns (so
    that only the values, never the kind, tell it apart)."""
    N = grad_samples.shape[0]
    mean_of_squares = (grad_samples**2).mean(dim=0)  # (P,)
    square_of_mean = grad_samples.mean(dim=0) ** 2  # (P,)
    return float(((mean_of_squares - square_of_mean) * N / (N - 1)).sum())


VARIANCE_MISTAKES_MORE = [
    Mistake(
        "you summed the standard deviations; the total variance sums the variances, grad_samples.var(dim=0).sum()",
        lambda grad_samples: grad_samples.std(dim=0).sum(),
    ),
    Mistake(
        "you returned the square root of the total variance (a spread, in the gradient's units); the exercise "
        "asks for the variance itself, grad_samples.var(dim=0).sum()",
        lambda grad_samples: grad_samples.var(dim=0).sum().sqrt(),
    ),
    Mistake(
        "you took the variance of the gradients' norms; the total variance is each coordinate's variance over "
        "the samples, summed: grad_samples.var(dim=0).sum()",
        lambda grad_samples: grad_samples.norm(dim=1).var(),
    ),
    Mistake(
        "you subtracted one mean, over every entry, from all coordinates; each coordinate has its own mean: "
        "grad_samples.mean(dim=0) (or grad_samples.var(dim=0).sum())",
        lambda grad_samples: ((grad_samples - grad_samples.mean()) ** 2).sum() / (grad_samples.shape[0] - 1),
    ),
    Mistake(
        "you returned the largest coordinate's variance; the total variance sums them all, "
        "grad_samples.var(dim=0).sum()",
        lambda grad_samples: grad_samples.var(dim=0).max(),
    ),
    Mistake(
        "you took the variance of the sum of the coordinates, which adds their covariances; the total variance "
        "is the sum of each coordinate's variance, grad_samples.var(dim=0).sum()",
        lambda grad_samples: grad_samples.sum(dim=1).var(),
    ),
    Mistake(
        "you took one variance of all N x P entries pooled and multiplied it by P; pooling mixes the coordinates' "
        "different means into the spread: take each coordinate's variance over the samples (dim=0) and sum them",
        lambda grad_samples: float(grad_samples.var() * grad_samples.shape[1]),
    ),
    Mistake(
        "you used the one-pass formula E[g^2] - E[g]^2: when the mean is large next to the spread, the two terms "
        "agree in nearly every digit and their difference is mostly rounding (in float32 here); subtract the mean "
        "first, grad_samples.var(dim=0).sum()",
        _one_pass_variance,
    ),
]
