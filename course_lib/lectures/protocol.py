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
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import dataclass

from course_lib import _validate

# ---------------------------------------------------------------------------
# The Student-t quantile
# ---------------------------------------------------------------------------


def _t_density(x: float, df: int) -> float:
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(x * x / df))


def _t_cdf(x: float, df: int, steps: int = 2000) -> float:
    """P(T <= x) for ``x >= 0``: one half plus the density integrated from 0 to ``x`` (Simpson's rule)."""
    h = x / steps
    inner = sum((4 if i % 2 else 2) * _t_density(i * h, df) for i in range(1, steps))
    return 0.5 + h / 3 * (_t_density(0.0, df) + inner + _t_density(x, df))


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
    """``b - a`` over seeds run with both: the mean difference and its t-interval."""

    n: int
    mean: float
    half_width: float
    """Half the width of the interval: it runs from ``mean - half_width`` to ``mean + half_width``."""
    level: float

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    def excludes_zero(self) -> bool:
        """Whether the interval lies wholly on one side of 0: the difference is resolved at this level."""
        return self.low > 0 or self.high < 0

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
