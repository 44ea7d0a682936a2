"""Baselines: subtract the group mean from the reward, and maybe divide by the group std.

Williams 1992 already notes that any baseline ``b`` that does not depend on the
response leaves the REINFORCE gradient unbiased, because
``E_{y ~ pi}[b * grad log pi(y)] = b * grad sum_y pi(y) = b * grad 1 = 0``,
while a good one shrinks its variance. With ``G`` responses sampled per prompt,
the mean reward of the group is such a baseline (an estimate of V(prompt)), and
dividing by the group's standard deviation is GRPO's normalisation (Shao et al.
2024, "DeepSeekMath", section 4.1.2: ``adv_i = (r_i - mean(r)) / std(r)``).

The weights ``deltas`` that multiply ``log pi`` in the REINFORCE loss come in
three modes (:func:`compute_deltas`):

==================== ========================================== ======================
mode                 deltas[b, g]                               what it is
==================== ========================================== ======================
rewards              r[b, g]                                    plain REINFORCE
centered_rewards     r[b, g] - mean_g r[b, :]                   group mean as baseline
normalized_rewards   (r[b, g] - mean_g r[b, :]) / (std + eps)   GRPO's advantage
==================== ========================================== ======================

Convention: the std is Bessel-corrected (divides by ``G - 1``), as ``torch.std``
computes it and as TRL (``GRPOTrainer``) and verl (``compute_grpo_outcome_advantage``)
use it; the GRPO paper does not say. ``eps`` is added to the std, outside the
square root: the course uses ``1e-6`` like verl, TRL uses ``1e-4``. A group whose
rewards are all equal gets zeros, and so does a group of one (verl leaves a
group of one unchanged instead; the course gives it no signal, as its mean is
its own reward).

:func:`gradient_variance` measures what the baseline buys: the total variance
of per-sample gradient estimates, with and without it.
"""

from __future__ import annotations

import torch

from course_lib import _validate
from course_lib.checks import Case, Mistake, check_against_reference

MODES = ("rewards", "centered_rewards", "normalized_rewards")


def compute_deltas(rewards: torch.Tensor, mode: str, eps: float = 1e-6) -> torch.Tensor:
    """The weights of the REINFORCE loss: rewards, centred rewards or normalised rewards.

    Args:
        rewards: ``[B, G]`` the reward of response ``g`` to prompt ``b``.
        mode: ``"rewards"`` (unchanged), ``"centered_rewards"`` (minus the group
            mean) or ``"normalized_rewards"`` (centred, then divided by the
            group's Bessel-corrected std plus ``eps``).
        eps: added to the std so that the division is safe; positive.

    Returns:
        ``[B, G]`` deltas, never NaN. Groups whose rewards are all equal, and groups
        of one (``G == 1``), get zeros in the centred and normalised modes.
    """
    _validate.require_tensor("rewards", rewards)
    if rewards.dim() != 2:
        raise ValueError(f"rewards: expected shape (B, G), one row of G rewards per prompt, "
                         f"got {tuple(rewards.shape)}")
    _validate.require_choice("mode", mode, MODES)
    eps = _validate.require_positive("eps", eps)
    if mode == "rewards":
        return rewards.clone()

    # The baseline: the mean reward of each prompt's group (axis G, not the batch axis B).
    mean = rewards.mean(dim=-1, keepdim=True)  # (B, 1)
    centred = rewards - mean  # (B, G)
    # A group whose rewards all agree carries no signal. Rounding in its mean would
    # otherwise leave noise of size ulp / eps after the division (0.06 for float32
    # rewards of 0.7), so it is set to zero exactly.
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)  # (B, 1)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if mode == "centered_rewards":
        return centred

    G = rewards.shape[-1]
    if G == 1:
        # Bessel's correction divides by G - 1 = 0: torch.std gives NaN. A group of
        # one is already all zeros after centring.
        return centred
    std = rewards.std(dim=-1, keepdim=True)  # (B, 1), unbiased: divides by G - 1
    return centred / (std + eps)  # (B, G)


def gradient_variance(grad_samples: torch.Tensor) -> float:
    """Total variance of a gradient estimator: the trace of the covariance of its samples.

    With ``N`` independent estimates ``g_1 .. g_N`` of a ``P``-dimensional
    gradient, ``sum_p Var(g[:, p])``, each variance Bessel-corrected (divided by
    ``N - 1``, as ``torch.var``). This is the variance of a single estimate, not
    of their mean (which is ``N`` times smaller). It is the number to compare
    with and without a baseline.

    Args:
        grad_samples: ``[N, P]`` one flattened gradient estimate per row, ``N >= 2``.

    Returns:
        A Python float.
    """
    _validate.require_tensor("grad_samples", grad_samples)
    if grad_samples.dim() != 2 or grad_samples.shape[0] < 2:
        raise ValueError(f"grad_samples: expected shape (N, P) with N >= 2 samples, got {tuple(grad_samples.shape)}")
    centred = grad_samples - grad_samples.mean(dim=0, keepdim=True)  # (N, P)
    N = grad_samples.shape[0]
    per_coordinate = (centred**2).sum(dim=0) / (N - 1)  # (P,)
    return float(per_coordinate.sum())


# ---------------------------------------------------------------------------
# Exercise checks
# ---------------------------------------------------------------------------


def check_compute_deltas(fn) -> bool:
    """Check a student's ``compute_deltas(rewards, mode)`` in all three modes."""
    g = torch.Generator().manual_seed(3)
    grids = [
        ("B=3 prompts, G=4 random rewards", torch.randn(3, 4, generator=g, dtype=torch.float64)),
        ("B=2 prompts, G=5 correct/incorrect (0/1) rewards",
         torch.tensor([[1.0, 0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0, 0.0]], dtype=torch.float64)),
        ("a group whose rewards are all equal (must give zeros, not NaN) beside a mixed one",
         torch.tensor([[0.5, 0.5, 0.5, 0.5], [1.0, 0.0, 2.0, 1.0]], dtype=torch.float64)),
        ("groups of one response (G=1): no spread, so zeros, not NaN",
         torch.tensor([[0.3], [1.0], [-2.0]], dtype=torch.float64)),
        ("G=2 responses per prompt, where Bessel's correction matters most",
         torch.tensor([[1.0, 0.0], [3.0, 1.0]], dtype=torch.float64)),
        ("nearly equal rewards (std 1e-3, close to eps)",
         torch.tensor([[0.0, 1e-3, 2e-3], [1e-3, 0.0, 0.0]], dtype=torch.float64)),
        ("one prompt, G=6 rewards on a large scale", 100.0 * torch.randn(1, 6, generator=g, dtype=torch.float64)),
    ]
    cases = [Case(f"{text}, mode={mode!r}", {"rewards": rewards, "mode": mode})
             for mode in MODES for text, rewards in grids]

    def deltas_with(centre=True, mean_dim=-1, std_fn=None, eps_where="outside", g1_zero=True):
        def wrong(rewards, mode, eps=1e-6):
            if mode == "rewards":
                return rewards.clone()
            x = rewards - rewards.mean(dim=mean_dim, keepdim=True) if centre else rewards.clone()
            if mode == "centered_rewards":
                return x
            if rewards.shape[-1] == 1 and g1_zero:
                return torch.zeros_like(rewards)
            spread = std_fn(rewards)
            if eps_where == "outside":
                return x / (spread + eps)
            if eps_where == "inside":
                return x / torch.sqrt(spread + eps)  # spread is a variance here
            return x / spread
        return wrong

    def std(r):
        return _std(r, dim=-1)

    def population_std(r):
        return _std(r, dim=-1, correction=0)

    mistakes = [
        Mistake("the std divides by G, not G - 1: use Bessel's correction, rewards.std(dim=-1) "
                "(torch's default)", deltas_with(std_fn=population_std)),
        Mistake("a group whose rewards are all equal gives 0 / 0 = NaN: add eps to the std, "
                "centred / (std + eps)", deltas_with(std_fn=std, eps_where="none")),
        Mistake("a group of one (G=1) gives NaN: torch.std with Bessel's correction divides by G - 1 = 0; "
                "return zeros for such groups", deltas_with(std_fn=std, g1_zero=False)),
        Mistake("the mean is over the batch axis (dim=0); the baseline is each prompt's group mean, "
                "rewards.mean(dim=-1, keepdim=True)", deltas_with(mean_dim=0, std_fn=std)),
        Mistake("the std is over the batch axis; take it over each group, rewards.std(dim=-1, keepdim=True)",
                deltas_with(std_fn=lambda r: _std(r, dim=0).expand_as(r))),
        Mistake("you divided the raw rewards by the std: centre them first (subtract the group mean)",
                deltas_with(centre=False, std_fn=std)),
        Mistake("you divided by the variance; divide by the standard deviation (its square root)",
                deltas_with(std_fn=lambda r: _std(r, dim=-1) ** 2)),
        Mistake("eps is inside the square root (sqrt(var + eps)); add it to the std: centred / (std + eps)",
                deltas_with(std_fn=lambda r: _std(r, dim=-1) ** 2, eps_where="inside")),
        Mistake("you subtracted the mean in mode 'rewards', which must return the rewards unchanged",
                lambda rewards, mode, eps=1e-6: rewards - rewards.mean(dim=-1, keepdim=True)),
    ]
    return check_against_reference(fn, compute_deltas, cases, name="compute_deltas", mistakes=mistakes)


def _std(r: torch.Tensor, dim: int, correction: int = 1) -> torch.Tensor:
    """``torch.std(r, dim, keepdim=True)`` without its warning for a single entry (it gives NaN).

    The checks' mistakes use it: a wrong implementation replayed on a group of one
    should give its NaN quietly, not print a warning into the student's notebook.
    """
    centred = r - r.mean(dim=dim, keepdim=True)
    return ((centred**2).sum(dim=dim, keepdim=True) / (r.shape[dim] - correction)).sqrt()


def check_gradient_variance(fn) -> bool:
    """Check a student's ``gradient_variance(grad_samples)``."""
    g = torch.Generator().manual_seed(4)
    cases = [
        Case("N=50 samples of a P=4 gradient with a large mean",
             {"grad_samples": 5.0 + torch.randn(50, 4, generator=g, dtype=torch.float64)}),
        Case("N=2 samples of a P=3 gradient", {"grad_samples": torch.randn(2, 3, generator=g, dtype=torch.float64)}),
        Case("N=10 samples of a P=1 gradient", {"grad_samples": torch.randn(10, 1, generator=g, dtype=torch.float64)}),
        Case("N=4 identical samples: zero variance",
             {"grad_samples": torch.tensor([[1.0, -2.0, 3.0]], dtype=torch.float64).repeat(4, 1)}),
        Case("N=3 samples of P=3 (square)", {"grad_samples": torch.randn(3, 3, generator=g, dtype=torch.float64)}),
    ]
    mistakes = [
        Mistake("the variance divides by N, not N - 1: use Bessel's correction (torch.var's default)",
                lambda grad_samples: grad_samples.var(dim=0, correction=0).sum()),
        Mistake("this is the variance of the mean of the N samples; measure the variance of one sample "
                "(do not divide by N again)", lambda grad_samples: grad_samples.var(dim=0).sum() / grad_samples.shape[0]),
        Mistake("the variance is over the wrong axis: rows are samples, so take it over dim=0, "
                "then sum over the P coordinates", lambda grad_samples: grad_samples.var(dim=1).sum()),
        Mistake("you took the variance of all entries flattened together; take each coordinate's variance "
                "over the samples (dim=0) and sum them", lambda grad_samples: grad_samples.flatten().var()),
        Mistake("you averaged the per-coordinate variances; the trace of the covariance is their sum",
                lambda grad_samples: grad_samples.var(dim=0).mean()),
        Mistake("you did not subtract the mean: that is the second moment, not the variance",
                lambda grad_samples: (grad_samples**2).sum(dim=1).mean()),
    ]
    return check_against_reference(fn, gradient_variance, cases, name="gradient_variance", mistakes=mistakes)
