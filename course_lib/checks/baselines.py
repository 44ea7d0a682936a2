"""Exercise checks of chapter 03 (baselines): deltas in three modes, gradient variance.

The checks import the reference implementations of ``course_lib.baselines``; the maths module never
imports its checks, so the file a student opens is the maths alone.
"""

from __future__ import annotations

import torch

from course_lib.baselines import MODES, compute_deltas, gradient_variance
from course_lib.checks import Case, Mistake, check_against_reference, recording
from course_lib.checks.baselines_mistakes import (
    DELTAS_MISTAKES_MORE,
    VARIANCE_MISTAKES_MORE,
    _std,
    batch_std,
    group_std,
    population_std,
    wrong_deltas,
    zeroed_below_eps,
)

# chapter 06's check_group_advantages names these too: group_advantages is compute_deltas in two of its modes
__all__ = ["check_compute_deltas", "check_gradient_variance", "_std", "batch_std", "group_std", "population_std"]
__all__ += ["wrong_deltas", "zeroed_below_eps"]


def check_compute_deltas(fn) -> bool:
    """Check a student's ``compute_deltas(rewards, mode)`` in all three modes."""
    g = torch.Generator().manual_seed(3)
    grids = [
        ("B=3 prompts, G=4 random rewards", torch.randn(3, 4, generator=g, dtype=torch.float64)),
        (
            "B=2 prompts, G=5 correct/incorrect (0/1) rewards",
            torch.tensor([[1.0, 0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0, 0.0]], dtype=torch.float64),
        ),
        (
            "a group whose rewards are all equal (must give zeros, not NaN) beside a mixed one",
            torch.tensor([[0.5, 0.5, 0.5, 0.5], [1.0, 0.0, 2.0, 1.0]], dtype=torch.float64),
        ),
        (
            "groups of one response (G=1): no spread, so zeros, not NaN",
            torch.tensor([[0.3], [1.0], [-2.0]], dtype=torch.float64),
        ),
        (
            "G=2 responses per prompt, where Bessel's correction matters most",
            torch.tensor([[1.0, 0.0], [3.0, 1.0]], dtype=torch.float64),
        ),
        (
            "nearly equal rewards (std 1e-3, close to eps)",
            torch.tensor([[0.0, 1e-3, 2e-3], [1e-3, 0.0, 0.0]], dtype=torch.float64),
        ),
        ("one prompt, G=6 rewards on a large scale", 100.0 * torch.randn(1, 6, generator=g, dtype=torch.float64)),
        # alone in its batch: torch reduces one row another way, and in float32 its std is 6e-8 there, not 0
        ("one group of seven rewards of 0.7 alone (B=1)", torch.full((1, 7), 0.7, dtype=torch.float64)),
        (
            "seven rewards of 0.7 beside a mixed group (in float32 their mean rounds: zeros exactly, not 0.06)",
            torch.tensor([[0.7] * 7, [1.0, 0.0, 0.5, 0.2, 0.9, 0.3, 0.1]], dtype=torch.float64),
        ),
    ]
    cases = [
        Case(f"{text}, mode={mode!r}", {"rewards": rewards, "mode": mode}) for mode in MODES for text, rewards in grids
    ]
    cases.append(
        Case(
            "eps=0.5 given explicitly, mode='normalized_rewards'",
            {"rewards": grids[0][1], "mode": "normalized_rewards", "eps": 0.5},
        )
    )
    # eps must matter: a group whose std is below eps, passed explicitly and by default (std + eps, not a floor).
    cases.append(
        Case(
            "eps=0.5 given explicitly, a group whose std (0.1) is below it, mode='normalized_rewards'",
            {
                "rewards": torch.tensor([[0.0, 0.1, 0.2], [1.0, 0.0, 2.0]], dtype=torch.float64),
                "mode": "normalized_rewards",
                "eps": 0.5,
            },
        )
    )
    cases.append(
        Case(
            "a group whose std (1e-7) is below the default eps, mode='normalized_rewards'",
            {
                "rewards": torch.tensor([[0.0, 1e-7, 2e-7], [1.0, 0.0, 2.0]], dtype=torch.float64),
                "mode": "normalized_rewards",
            },
        )
    )

    mistakes = [
        Mistake(
            "a group of equal rewards is not set to zero exactly: in float32 the mean of seven 0.7s rounds, and "
            "(r - mean) / (std + eps) turns that rounding into 0.06; where (rewards == rewards[..., :1]).all(-1), "
            "the group's deltas are 0",
            wrong_deltas(),
        ),
        Mistake(
            "you used the statistics of the whole batch; the baseline and the std are each prompt's group's: "
            "rewards.mean(dim=-1, keepdim=True) and rewards.std(dim=-1, keepdim=True)",
            wrong_deltas(mean_dim=None, std_fn=batch_std, g1_zero=False),
        ),
        Mistake(
            "you used the statistics of the whole batch; the baseline and the std are each prompt's group's: "
            "rewards.mean(dim=-1, keepdim=True) and rewards.std(dim=-1, keepdim=True)",
            wrong_deltas(mean_dim=None, std_fn=batch_std),
        ),
        Mistake(
            "the mean and the std are over the batch axis (dim=0); take both over each group, the last axis: "
            "rewards.mean(dim=-1, keepdim=True) and rewards.std(dim=-1, keepdim=True)",
            wrong_deltas(mean_dim=0, std_fn=lambda r: _std(r, dim=0).expand_as(r), g1_zero=False),
        ),
        Mistake(
            "the baseline is the mean of the whole batch; it is each prompt's group mean, "
            "rewards.mean(dim=-1, keepdim=True)",
            wrong_deltas(mean_dim=None, std_fn=group_std),
        ),
        Mistake(
            "the std is the whole batch's; take it within each group, rewards.std(dim=-1, keepdim=True)",
            wrong_deltas(std_fn=batch_std),
        ),
        Mistake(
            "mode 'centered_rewards' only subtracts the group mean; dividing by std + eps is 'normalized_rewards'",
            wrong_deltas(std_fn=group_std, modes={"centered_rewards": "normalized_rewards"}),
        ),
        Mistake(
            "mode 'normalized_rewards' divides the centred rewards by std + eps too; subtracting the mean "
            "alone is 'centered_rewards'",
            wrong_deltas(std_fn=group_std, modes={"normalized_rewards": "centered_rewards"}),
        ),
        Mistake(
            "the modes 'centered_rewards' and 'normalized_rewards' are swapped: centred subtracts the group "
            "mean, normalised also divides by std + eps",
            wrong_deltas(
                std_fn=group_std,
                modes={"normalized_rewards": "centered_rewards", "centered_rewards": "normalized_rewards"},
            ),
        ),
        Mistake(
            "the eps argument is ignored (1e-6 is used whatever is passed): divide by std + eps",
            wrong_deltas(std_fn=group_std, eps_used=1e-6),
        ),
        Mistake(
            "eps is 1e-6 by default (the eps argument), not 1e-8: divide by std + eps",
            wrong_deltas(std_fn=group_std, eps_used=1e-8),
        ),
        Mistake(
            "the std divides by G, not G - 1: use Bessel's correction, rewards.std(dim=-1) (torch's default)",
            wrong_deltas(std_fn=population_std),
        ),
        Mistake(
            "a group whose rewards are all equal gives 0 / 0 = NaN: add eps to the std, centred / (std + eps)",
            wrong_deltas(std_fn=group_std, eps_where="none"),
        ),
        Mistake(
            "a group of one (G=1) gives NaN: torch.std with Bessel's correction divides by G - 1 = 0; "
            "return zeros for such groups",
            wrong_deltas(std_fn=group_std, g1_zero=False),
        ),
        *(
            Mistake(
                "the mean is over the batch axis (dim=0); the baseline is each prompt's group mean, "
                "rewards.mean(dim=-1, keepdim=True)",
                wrong_deltas(mean_dim=0, std_fn=group_std, equal_zero=equal_zero),
            )
            for equal_zero in (False, True)  # with the groups of equal rewards zeroed, as asked, or not
        ),
        Mistake(
            "the std is over the batch axis; take it over each group, rewards.std(dim=-1, keepdim=True)",
            wrong_deltas(std_fn=lambda r: _std(r, dim=0).expand_as(r)),
        ),
        Mistake(
            "you divided the raw rewards by the std: centre them first (subtract the group mean)",
            wrong_deltas(centre=False, std_fn=group_std),
        ),
        Mistake(
            "you divided by the variance; divide by the standard deviation (its square root)",
            wrong_deltas(std_fn=lambda r: _std(r, dim=-1) ** 2),
        ),
        Mistake(
            "eps is inside the square root (sqrt(var + eps)); add it to the std: centred / (std + eps)",
            wrong_deltas(std_fn=lambda r: _std(r, dim=-1) ** 2, eps_where="inside"),
        ),
        Mistake(
            "the rewards are never centred: subtract the group mean, rewards.mean(dim=-1, keepdim=True), "
            "in modes 'centered_rewards' and 'normalized_rewards'",
            wrong_deltas(centre="never", std_fn=group_std),
        ),
        Mistake(
            "you subtracted the mean in mode 'rewards', which must return the rewards unchanged",
            wrong_deltas(std_fn=group_std, modes={"rewards": "centered_rewards"}),
        ),
        *DELTAS_MISTAKES_MORE,
    ]
    _require_a_new_tensor(fn)
    return check_against_reference(
        fn, compute_deltas, cases, name="compute_deltas", mistakes=mistakes, check_dtype=True
    )


def _require_a_new_tensor(fn) -> None:
    """Mode 'rewards' returns the rewards unchanged, as a new tensor: the exercise's table asks for it, since a
    caller that changes the deltas in place (``deltas *= 2``) would otherwise change the rewards too."""

    def returns_its_input() -> float:
        try:
            for mode in MODES:
                rewards = torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64)
                fn(rewards, mode)
                if not torch.equal(rewards, torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64)):
                    return 0.0  # it works in place: the check's cases say so, more usefully
            deltas = fn(rewards, "rewards")
        except Exception:  # noqa: BLE001 - a function that fails here fails the cases too, with their message
            return 0.0
        shares = isinstance(deltas, torch.Tensor) and deltas.data_ptr() == rewards.data_ptr()
        return float(shares)

    if recording.replayable(returns_its_input, "compute_deltas"):
        raise AssertionError(
            "compute_deltas: mode 'rewards' returned the input tensor itself (or a view of it); return a new "
            "tensor, rewards.clone(): a caller that changes the deltas in place would change the rewards too\n"
            "  seen on the case: rewards=[[1.0, 0.0], [0.5, 0.5]] (float64), mode='rewards'"
        )


def check_gradient_variance(fn) -> bool:
    """Check a student's ``gradient_variance(grad_samples)``."""
    g = torch.Generator().manual_seed(4)
    cases = [
        Case(
            "N=50 samples of a P=4 gradient with a large mean",
            {"grad_samples": 5.0 + torch.randn(50, 4, generator=g, dtype=torch.float64)},
        ),
        Case("N=2 samples of a P=3 gradient", {"grad_samples": torch.randn(2, 3, generator=g, dtype=torch.float64)}),
        Case("N=10 samples of a P=1 gradient", {"grad_samples": torch.randn(10, 1, generator=g, dtype=torch.float64)}),
        Case(
            "N=4 identical samples: zero variance",
            {"grad_samples": torch.tensor([[1.0, -2.0, 3.0]], dtype=torch.float64).repeat(4, 1)},
        ),
        Case("N=3 samples of P=3 (square)", {"grad_samples": torch.randn(3, 3, generator=g, dtype=torch.float64)}),
        Case(  # float32 keeps about 7 digits: E[g^2] and E[g]^2 near 10^6 agree in all but the last one
            "N=20 samples of a P=3 gradient with a mean near 1000 and a spread near 1",
            {"grad_samples": 1000.0 + torch.randn(20, 3, generator=g, dtype=torch.float64)},
        ),
    ]
    mistakes = [
        Mistake(
            "the variance divides by N, not N - 1: use Bessel's correction (torch.var's default)",
            lambda grad_samples: grad_samples.var(dim=0, correction=0).sum(),
        ),
        Mistake(
            "this is the variance of the mean of the N samples; measure the variance of one sample "
            "(do not divide by N again)",
            lambda grad_samples: grad_samples.var(dim=0).sum() / grad_samples.shape[0],
        ),
        Mistake(
            "the variance is over the wrong axis: rows are samples, so take it over dim=0, "
            "then sum over the P coordinates",
            lambda grad_samples: grad_samples.var(dim=1).sum(),
        ),
        Mistake(
            "you took the variance of all entries flattened together; take each coordinate's variance "
            "over the samples (dim=0) and sum them",
            lambda grad_samples: grad_samples.flatten().var(),
        ),
        Mistake(
            "you averaged the per-coordinate variances; the trace of the covariance is their sum",
            lambda grad_samples: grad_samples.var(dim=0).mean(),
        ),
        *(
            Mistake(
                "you did not subtract the mean: that is the second moment, not the variance",
                second_moment,
            )
            for second_moment in (
                lambda grad_samples: (grad_samples**2).sum(dim=1).mean(),
                lambda grad_samples: float((grad_samples**2).sum() / (grad_samples.shape[0] - 1)),  # Bessel's N - 1
            )
        ),
        *VARIANCE_MISTAKES_MORE,
    ]
    return check_against_reference(
        fn, gradient_variance, cases, name="gradient_variance", mistakes=mistakes, check_dtype=True
    )
