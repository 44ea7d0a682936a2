"""The statistics of the course's protocol for trained results (``benchmarks/PROTOCOL.md``).

A trained result counts only if it holds on seeds that tuning never saw. Chapters 08, 10 and 11 compare methods
the same way: each method is run once per report seed, the runs are paired by seed (the same warm-up, the same
prompts), and a difference is reported with a Student-t interval over the per-seed differences, ``n - 1`` degrees
of freedom, beside the spread and the worst seed.

- :func:`summary`: mean, standard deviation, worst and best seed of one method;
- :func:`paired_difference`: the mean per-seed difference of two methods and its t-interval;
- :func:`t_quantile`: the Student-t quantile the interval needs (no SciPy: the density is integrated here);
- :func:`recipe_hash`: a short fingerprint of a recipe, printed beside its results, so that a result can be
  traced to the exact settings that produced it.

Version 2 of the protocol adds what a report needs to *answer* a question, not only to be honest about it:

- :func:`seeds_for_half_width`: how many report seeds a comparison needs for a stated half-width, from the paired
  standard deviation of the last report (power, planned before the runs);
- :func:`holm`: Holm's correction for a table of ``m`` intervals read together (a ladder, a claims table);
- :func:`matched_lr`: the same difference at each learning rate both methods were run at, so that a method's
  effect is told apart from its tuned rate's.

Results stored before version 2 carry no ``"protocol"`` key: :func:`protocol_version` reads them as version 1.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import statistics
from dataclasses import dataclass

from course_lib import _validate

# ---------------------------------------------------------------------------
# The Student-t quantile
# ---------------------------------------------------------------------------


def _t_cdf(x: float, df: int, steps: int = 2000) -> float:
    """P(T <= x) for ``x >= 0``, Student's t with ``df`` degrees of freedom.

    With ``u = x / sqrt(df + x^2)``, ``u^2`` follows Beta(1/2, df/2), so ``P(0 <= T <= x)`` is the integral from 0
    to ``u`` of ``(1 - v^2)^(df/2 - 1) / B(1/2, df/2)``: a bounded integrand on a finite range for ``df >= 2``
    (Simpson's rule), however far out ``x`` is. One degree of freedom is Cauchy's: ``1/2 + atan(x) / pi``.
    """
    if df == 1:
        return 0.5 + math.atan(x) / math.pi
    u = x / math.sqrt(df + x * x)
    log_beta = math.lgamma(0.5) + math.lgamma(df / 2) - math.lgamma((df + 1) / 2)
    power = df / 2 - 1

    def density(v: float) -> float:
        return math.exp(power * math.log1p(-v * v) - log_beta)

    h = u / steps
    inner = sum((4 if i % 2 else 2) * density(i * h) for i in range(1, steps))
    return 0.5 + h / 3 * (density(0.0) + inner + density(u))


@functools.lru_cache(maxsize=256)  # each costs a tenth of a second, and a report asks for the same few
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom, for ``0.5 <= p < 1``.

    ``t_quantile(0.975, 7)`` is 2.365: a 95% interval over 8 paired seeds is the mean difference plus or minus
    2.365 standard errors, not 2 (the normal's 1.96 would be too narrow for so few seeds).
    """
    df = _validate.require_int("df", df, minimum=1)
    if not 0.5 <= p < 1.0:
        raise ValueError(f"p: expected a probability in [0.5, 1), got {p}")
    low, high = 0.0, 1.0
    while _t_cdf(high, df) < p:  # bracket the quantile
        high *= 2.0
    for _ in range(60):  # bisection to well under 1e-6
        middle = 0.5 * (low + high)
        if _t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


# ---------------------------------------------------------------------------
# One method's spread, two methods' paired difference
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """One method's results over ``n`` report seeds."""

    n: int
    mean: float
    std: float
    """Standard deviation over seeds (Bessel-corrected; 0 for one seed)."""
    worst: float
    best: float


def summary(values: list[float]) -> Summary:
    """Mean, standard deviation, worst and best of one method's per-seed results."""
    if not values:
        raise ValueError("values: expected at least one result")
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return Summary(n=n, mean=mean, std=std, worst=min(values), best=max(values))


@dataclass(frozen=True)
class PairedDifference:
    """``b - a`` over seeds run with both: the mean difference and its t-interval.

    ``n = 0`` marks a difference not taken over paired seeds (chapter 11's estimator testbed): an exact value
    (``half_width`` 0) or a Monte Carlo mean with a normal interval.
    """

    n: int
    mean: float
    half_width: float
    """Half the width of the interval: it runs from ``mean - half_width`` to ``mean + half_width``."""
    level: float = 0.95

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    def excludes_zero(self) -> bool:
        """Whether the interval lies wholly on one side of 0: the difference is resolved at this level."""
        return self.low > 0 or self.high < 0

    def p_value(self) -> float:
        """The two-sided p-value of "no difference": below ``1 - level`` exactly when the interval excludes 0.

        The standard error is the half-width over the interval's quantile (Student's t with ``n - 1`` degrees of
        freedom; the normal's for ``n = 0``); an exact value (half-width 0) has p 0, or 1 if it is 0.
        """
        if self.half_width == 0:
            return 1.0 if self.mean == 0 else 0.0
        upper = (1 + self.level) / 2
        if self.n == 0:
            standard_error = self.half_width / statistics.NormalDist().inv_cdf(upper)
            return math.erfc(abs(self.mean) / standard_error / math.sqrt(2))
        standard_error = self.half_width / t_quantile(upper, self.n - 1)
        return max(0.0, 2 * (1 - _t_cdf(abs(self.mean) / standard_error, self.n - 1)))

    def __str__(self) -> str:
        return f"{self.mean:+.3f}±{self.half_width:.3f}"


def paired_difference(a: dict, b: dict, level: float = 0.95) -> PairedDifference:
    """``b - a`` paired by seed: ``a`` and ``b`` map seed -> result; only seeds in both count.

    The interval is ``mean ± t_{(1 + level) / 2, n - 1} * sd / sqrt(n)`` over the ``n`` per-seed differences.
    """
    seeds = sorted(set(a) & set(b))
    if len(seeds) < 2:
        raise ValueError(f"a, b: a paired interval needs at least 2 seeds run with both, got {len(seeds)}")
    differences = [b[seed] - a[seed] for seed in seeds]
    spread = summary(differences)
    half_width = t_quantile((1 + level) / 2, len(seeds) - 1) * spread.std / math.sqrt(len(seeds))
    return PairedDifference(n=len(seeds), mean=spread.mean, half_width=half_width, level=level)


# ---------------------------------------------------------------------------
# Version 2: power, multiplicity, matched learning rates
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SeedPlan:
    """How many report seeds give a paired interval of a stated half-width, if the paired sd is ``sd``."""

    sd: float
    """The paired standard deviation planned for: the last report's, over its seeds."""
    half_width: float
    level: float
    n: int
    """The smallest number of seeds whose expected half-width is at most ``half_width``."""
    steps: tuple[tuple[int, float], ...]
    """The iteration, as ``(seeds, the half-width they give)``: each guess uses the t quantile of the one before."""

    def __str__(self) -> str:
        tried = " -> ".join(f"n={n} (±{h:.4f})" for n, h in self.steps)
        return (
            f"paired sd {self.sd:.3f}, half-width {self.half_width:g} at {self.level:.0%}: "
            f"n = ceil((t * sd / h)^2), iterated: {tried}; needs {self.n} seeds"
        )


def expected_half_width(sd: float, n: int, level: float = 0.95) -> float:
    """The half-width of a ``level`` paired t-interval over ``n`` seeds whose differences have standard deviation
    ``sd``: ``t_{(1 + level) / 2, n - 1} * sd / sqrt(n)``."""
    n = _validate.require_int("n", n, minimum=2)
    return t_quantile((1 + level) / 2, n - 1) * sd / math.sqrt(n)


def seeds_for_half_width(sd: float, half_width: float, level: float = 0.95) -> SeedPlan:
    """The number of report seeds a comparison needs (protocol v2, rule 6), from the last report's paired sd.

    The half-width over ``n`` seeds is ``t_{n - 1} * sd / sqrt(n)``, and the t quantile depends on ``n``, so the
    answer is iterated: start from the normal quantile, ``n = ceil((z * sd / h)^2)``, then put ``t_{n - 1}`` in
    place of ``z`` until ``n`` stops moving. The result is the smallest ``n`` whose half-width is at most ``h``.
    It is a plan, not a promise: the report's own sd is a new estimate, and the interval will scatter around it.
    """
    sd = _validate.require_positive("sd", sd)
    half_width = _validate.require_positive("half_width", half_width)
    if not 0.5 < level < 1.0:
        raise ValueError(f"level: expected a probability in (0.5, 1), got {level}")
    z = statistics.NormalDist().inv_cdf((1 + level) / 2)
    n = max(2, math.ceil((z * sd / half_width) ** 2))
    steps = []
    for _ in range(20):  # a few steps settle it; the loop below makes the answer exact anyway
        steps.append((n, expected_half_width(sd, n, level)))
        guess = max(2, math.ceil((t_quantile((1 + level) / 2, n - 1) * sd / half_width) ** 2))
        if guess == n:
            break
        n = guess
    while expected_half_width(sd, n, level) > half_width:  # the iteration can stop one short: step up
        n += 1
    while n > 2 and expected_half_width(sd, n - 1, level) <= half_width:  # ... or one long: step down
        n -= 1
    if steps[-1][0] != n:
        steps.append((n, expected_half_width(sd, n, level)))
    return SeedPlan(sd=sd, half_width=half_width, level=level, n=n, steps=tuple(steps))


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the order given.

    Sort the ``m`` p-values from the smallest; the ``k``-th (from 0) is multiplied by ``m - k``; each adjusted value
    is at least the one before it, and at most 1. A difference is resolved at family level ``alpha`` when its
    adjusted p-value is below ``alpha``: the chance that any of the ``m`` is resolved by luck stays below ``alpha``.
    """
    if not p_values:
        raise ValueError("p_values: expected at least one p-value")
    if any(not 0 <= p <= 1 for p in p_values):
        raise ValueError(f"p_values: expected probabilities in [0, 1], got {p_values}")
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def holm_table(differences: dict[str, PairedDifference], alpha: float = 0.05) -> str:
    """The ``m`` intervals read together: each with its own p-value, Holm's adjusted one and the reading."""
    names = list(differences)
    adjusted = holm([differences[name].p_value() for name in names])
    width = max(len(name) for name in names)
    lines = [f"{len(names)} intervals read together; Holm's correction at family level {alpha:g}:"]
    for name, p_holm in zip(names, adjusted):
        d = differences[name]
        reading = "resolved" if p_holm < alpha else "unresolved"
        interval = f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"
        lines.append(f"  {name:<{width}}  {interval}  p {d.p_value():.3f}  Holm {p_holm:.3f}  {reading}")
    return "\n".join(lines)


def matched_lr(a: dict[float, dict], b: dict[float, dict], level: float = 0.95) -> dict[float, PairedDifference]:
    """``b - a`` at each learning rate both were run at, paired by seed (``lr -> seed -> value`` each).

    A tuned comparison sets each method at its own rate; the same difference at a shared rate tells the method's
    effect apart from its rate's. Rates with fewer than 2 seeds run by both are left out.
    """
    shared = sorted(set(a) & set(b))
    return {lr: paired_difference(a[lr], b[lr], level) for lr in shared if len(set(a[lr]) & set(b[lr])) >= 2}


PROTOCOL_VERSION = 2
"""The version of ``benchmarks/PROTOCOL.md`` that new results are run under."""


def protocol_version(results: dict) -> int:
    """The protocol a stored result was run under: its ``"protocol"`` key, or 1 for results stored before it."""
    return int(results.get("protocol", 1))


# ---------------------------------------------------------------------------
# A recipe's fingerprint
# ---------------------------------------------------------------------------


# Fields renamed after recipes were frozen, hashed under the names they had then, so that a frozen recipe
# (benchmarks/results/*_recipes.json, benchmarks/seed_sets.json) keeps its hash: new name -> name when frozen.
HASHED_AS = {
    "value_loss_coef": "vf_coef",  # LMRLConfig's value-loss weight, renamed to PPOLoss's and the trainers' name
}


def recipe_hash(recipe: dict) -> str:
    """Eight hex digits of the SHA-256 of ``recipe`` as sorted JSON: the same settings give the same hash.

    A key in :data:`HASHED_AS`, at any depth, is hashed under its old name.
    """
    text = json.dumps(_as_frozen(recipe), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _as_frozen(value):
    """``value`` with every dict key renamed by :data:`HASHED_AS`, at any depth (lists and tuples as lists)."""
    if isinstance(value, dict):
        renamed = {HASHED_AS.get(key, key): _as_frozen(item) for key, item in value.items()}
        if len(renamed) < len(value):
            both = sorted(key for key in value if key in HASHED_AS and HASHED_AS[key] in value)
            raise ValueError(f"recipe: holds {both} under both the new and the old name ({HASHED_AS})")
        return renamed
    if isinstance(value, (list, tuple)):
        return [_as_frozen(item) for item in value]
    return value
