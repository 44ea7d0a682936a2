"""Chapter 02's Monte-Carlo gradient, checked when the student samples differently from the reference.

A student who draws the actions another way (``torch.distributions.Categorical``, their own inverse CDF) can be
right and still differ from the reference sample by sample. :func:`_statistical_check` then asks what holds for
every right estimator: its mean over many estimates is the exact gradient (unbiased), and its mean squared error
shrinks like ``tr(Sigma) / n`` (consistent). :func:`_call_student` asks the student's function once per estimate,
recorded in the grading kernel and replayed by the grader.
"""

from __future__ import annotations

import math

import torch

from course_lib.checks import drawing, recording
from course_lib.checks.crash_hints import _crash_hint
from course_lib.lectures.mc_gradient import mc_gradient_std
from course_lib.policy_gradient import expected_reward_gradient

_SAMPLING = "torch.multinomial(torch.softmax(logits, dim=-1), n_samples, replacement=True, generator=generator)"


def _call_student(fn, name, logits, rewards, n, seed) -> torch.Tensor:
    """The student's estimate, as a float64 tensor (recorded in the grading kernel, replayed by the grader)."""
    return recording.replayable(lambda: _ask_student(fn, name, logits, rewards, n, seed))


def _ask_student(fn, name, logits, rewards, n, seed) -> torch.Tensor:
    """``seed=None`` passes ``generator=None``: the global RNG draws, seeded here and put back afterwards."""
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    try:
        if generator is None:
            with torch.random.fork_rng(devices=[]):  # the notebook's global RNG is left as it was
                torch.manual_seed(0)
                out = fn(logits.clone(), rewards.clone(), n, None)
        else:  # the global RNG untouched: a student who ignores the generator gets two different estimates
            out = fn(logits.clone(), rewards.clone(), n, generator)
    except NotImplementedError:
        raise
    except Exception as error:  # noqa: BLE001 - any crash becomes feedback
        if generator is None:
            raise AssertionError(
                f"{name}: with generator=None it raised {type(error).__name__}: {error}; the docstring allows "
                "None (sample with the global RNG: generator=None in torch.multinomial)"
            ) from error
        raise AssertionError(f"{name} raised {type(error).__name__}: {error}{_crash_hint(error)}") from error
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(logits.shape):
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        # One number for a vector: the mean over the n samples took every axis (.mean() with no dim).
        hint = ": a mean or sum over every axis? average over the samples only, dim=0" if shape == () else ""
        raise AssertionError(
            f"{name}: expected a tensor of shape {tuple(logits.shape)} (one entry per action), got {shape}{hint}"
        )
    return out.detach().to(torch.float64)


def _statistical_check(fn, name, exact_problem: str) -> None:
    """Unbiased (mean of many estimates ~ exact) and consistent (MSE ~ tr(Sigma) / n). At grading the policy, the
    rewards and the seeds are drawn afresh; every estimate is asked before anything is computed from the answer."""
    logits = torch.tensor([0.5, -1.0, 1.5, 0.0], dtype=torch.float64)
    rewards = torch.tensor([1.0, 0.0, 3.0, -2.0], dtype=torch.float64)
    first = 0
    session = recording.current()
    if session is not None:
        g = torch.Generator().manual_seed(session.seed * 1000 + 999)
        logits = torch.randn(4, generator=g, dtype=torch.float64)
        rewards = torch.randn(4, generator=g, dtype=torch.float64)
        first = drawing.integer(g, 10_000, 10**6)
    # Unbiased: 2000 estimates of n = 4 samples each, 8000 samples in all; consistent: 100 of n = 64.
    M, n, S, n_mse = 2000, 4, 100, 64
    estimates = [_call_student(fn, name, logits, rewards, n, first + 1000 + s) for s in range(M)]
    spread = [_call_student(fn, name, logits, rewards, n_mse, first + 5000 + s) for s in range(S)]
    exact = expected_reward_gradient(logits, rewards)  # (V,)
    sigma = mc_gradient_std(logits, rewards)  # RMS error of one sample
    hint = (
        f"\n  (with the same seed it also differs from the reference, which samples with {_SAMPLING}: "
        f"{exact_problem.splitlines()[0]})"
    )
    mean = sum(estimates) / M
    # The mean's error has RMS sigma / sqrt(M n); 5 of those is far outside chance.
    bias = float(torch.linalg.vector_norm(mean - exact))
    if bias > 5 * sigma / math.sqrt(M * n):
        raise AssertionError(
            f"{name}: the estimate is biased: the mean of {M} estimates (n={n} each) is {_fmt(mean)}, the exact "
            f"gradient is {_fmt(exact)}; average r[a] * (onehot(a) - pi) over actions a sampled from pi{hint}"
        )
    mse = sum(float(((estimate - exact) ** 2).sum()) for estimate in spread) / S
    expected = sigma**2 / n_mse
    if not 0.5 * expected < mse < 2.0 * expected:
        raise AssertionError(
            f"{name}: with n={n_mse} samples the mean squared error to the exact gradient is {mse:.3g}; a Monte-Carlo "
            f"average of n independent samples has {expected:.3g}: use all n_samples samples, each drawn "
            f"independently from pi, and average them once{hint}"
        )


def _fmt(t: torch.Tensor) -> str:
    return "[" + ", ".join(f"{x:.3g}" for x in t.tolist()) + "]"
