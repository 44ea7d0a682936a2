"""The exercise check of chapter 06's KL estimators (``course_lib.kl``): k1, k2, k3 and their classic mistakes.

``course_lib.checks.grpo`` re-exports :func:`check_kl_estimate`, where the chapter's notebook imports it.
"""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference
from course_lib.kl import KL_KINDS, kl_estimate

_KL_TEXT = {
    "k1": "logp - logp_ref",
    "k2": "0.5 * (logp - logp_ref)**2",
    "k3": "exp(log_r) - log_r - 1 with log_r = logp_ref - logp",
}


def check_kl_estimate(fn) -> bool:
    """Check a student's ``kl_estimate(logp, logp_ref, kind)``, gradients included."""
    g = torch.Generator().manual_seed(7)
    logp = -3.0 * torch.rand(2, 3, 4, generator=g, dtype=torch.float64)
    near = logp + 0.1 * torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
    # Log-ratios spread evenly over [-4, 4]: k3 reaches exp(4) - 5 = 49.6, past the clamps libraries add.
    far = logp + torch.linspace(-4.0, 4.0, 24, dtype=torch.float64).reshape(2, 3, 4)
    grids = [
        ("B=2, G=3, T=4 tokens, the reference close to the policy", {"logp": logp, "logp_ref": near}),
        ("the reference far from the policy (log-ratios from -4 to +4)", {"logp": logp, "logp_ref": far}),
        ("the policy equal to the reference: every estimate is 0", {"logp": logp, "logp_ref": logp.clone()}),
        ("one token (0-dimensional tensors)", {"logp": torch.tensor(-0.5), "logp_ref": torch.tensor(-1.7)}),
    ]
    cases = [
        Case(f"{text}, kind={kind!r}", {**kwargs, "kind": kind}, grad=("logp",))
        for kind in KL_KINDS
        for text, kwargs in grids
    ]

    def estimator(k1=None, k2=None, k3=None):
        wrong = {"k1": k1, "k2": k2, "k3": k3}

        def kl(logp, logp_ref, kind):
            if wrong[kind] is not None:
                return wrong[kind](logp, logp_ref)
            return kl_estimate(logp, logp_ref, kind)

        return kl

    formulas = {
        "k1": lambda p, q: p - q,
        "k2": lambda p, q: 0.5 * (p - q) ** 2,
        "k3": lambda p, q: torch.exp(q - p) - (q - p) - 1,
    }
    swaps = []
    for asked, used in (("k1", "k2"), ("k1", "k3"), ("k2", "k1"), ("k2", "k3"), ("k3", "k1"), ("k3", "k2")):
        swaps.append(
            Mistake(
                f"kind={asked!r} returns the {used} estimate; {asked} is {_KL_TEXT[asked]}",
                estimator(**{asked: formulas[used]}),
            )
        )
    for a, b in (("k1", "k2"), ("k1", "k3"), ("k2", "k3")):
        swaps.append(
            Mistake(
                f"the estimators {a} and {b} are swapped: {a} is {_KL_TEXT[a]}, {b} is {_KL_TEXT[b]}",
                estimator(**{a: formulas[b], b: formulas[a]}),
            )
        )
    mistakes = swaps + [
        Mistake(
            "the estimate is clamped (to [-10, 10], as verl's low_var_kl does): the course's estimators are "
            "not clamped, so a far reference (log-ratio 4: k3 = 49.6) is penalised in full",
            lambda logp, logp_ref, kind: kl_estimate(logp, logp_ref, kind).clamp(-10.0, 10.0),
        ),
        Mistake(
            "the sign is flipped: every estimate of KL(pi_theta || pi_ref) is >= 0 on average (k2 and k3 "
            "always); k1 = logp - logp_ref, k2 = 0.5 * log_r**2, k3 = exp(log_r) - log_r - 1",
            lambda logp, logp_ref, kind: -kl_estimate(logp, logp_ref, kind),
        ),
        Mistake(
            "k3 estimates KL(pi_ref || pi_theta) here (r * log r - (r - 1)); with log_r = logp_ref - logp, "
            "k3 = exp(log_r) - log_r - 1",
            estimator(k3=lambda p, q: torch.exp(q - p) * (q - p) - torch.expm1(q - p)),
        ),
        Mistake(
            "k1 is the log-ratio itself, not its absolute value: logp - logp_ref (it can be negative)",
            estimator(k1=lambda p, q: (p - q).abs()),
        ),
        Mistake(
            "k3's constant has the wrong sign: k3 = exp(log_r) - log_r - 1, which is 0 when the policies agree",
            estimator(k3=lambda p, q: torch.exp(q - p) - (q - p) + 1),
        ),
        Mistake(
            "k2 is 0.5 * log_r**2, the square of the log-ratio, not of the ratio minus 1",
            estimator(k2=lambda p, q: 0.5 * torch.expm1(q - p) ** 2),
        ),
        Mistake(
            "the KL direction is reversed: k1 = logp - logp_ref estimates KL(pi_theta || pi_ref) "
            "from samples of pi_theta",
            estimator(k1=lambda p, q: q - p),
        ),
        Mistake(
            "k1 is the log-ratio logp - logp_ref, not the ratio exp(logp - logp_ref)",
            estimator(k1=lambda p, q: torch.exp(p - q)),
        ),
        Mistake(
            "k2 is 0.5 * log_r**2, the square of the log-ratio, not 0.5 * |log_r|",
            estimator(k2=lambda p, q: 0.5 * (p - q).abs()),
        ),
        Mistake("k2 is 0.5 * (logp - logp_ref)**2: the factor 0.5 is missing", estimator(k2=lambda p, q: (p - q) ** 2)),
        Mistake(
            "k3's ratio is inverted: with log_r = logp_ref - logp, k3 = exp(log_r) - log_r - 1 "
            "(the ratio is pi_ref / pi_theta)",
            estimator(k3=lambda p, q: torch.exp(p - q) - (p - q) - 1),
        ),
        Mistake(
            "k3 is missing its -1: k3 = exp(log_r) - log_r - 1, which is 0 when the policies agree",
            estimator(k3=lambda p, q: torch.exp(q - p) - (q - p)),
        ),
        Mistake(
            "k3's log-ratio term has the wrong sign: k3 = exp(log_r) - log_r - 1 with log_r = logp_ref - logp",
            estimator(k3=lambda p, q: torch.exp(q - p) + (q - p) - 1),
        ),
        Mistake(
            "k3 is missing its -log_r term: k3 = exp(log_r) - log_r - 1 with log_r = logp_ref - logp",
            estimator(k3=lambda p, q: torch.exp(q - p) - 1),
        ),
        Mistake(
            "k3 is halved: k3 = exp(log_r) - log_r - 1 has no factor 0.5 (k2 has one)",
            estimator(k3=lambda p, q: 0.5 * (torch.exp(q - p) - (q - p) - 1)),
        ),
        Mistake(
            "k3 is replaced by its Taylor expansion (r - 1)^2 / 2, which only agrees near r = 1; k3 = exp(log_r) - "
            "log_r - 1 exactly, with log_r = logp_ref - logp",
            estimator(k3=lambda p, q: 0.5 * torch.expm1(q - p) ** 2),
        ),
        Mistake(
            "k3's values are right but its gradient is not: exp(log_r) is detached; every term of "
            "exp(log_r) - log_r - 1 carries the gradient of logp",
            estimator(k3=lambda p, q: torch.exp(q - p).detach() - (q - p) - 1),
        ),
        Mistake(
            "k2 is 0.5 * (logp - logp_ref)**2, the square of the difference, not the difference of the squares "
            "0.5 * (logp**2 - logp_ref**2)",
            estimator(k2=lambda p, q: 0.5 * (p**2 - q**2)),
        ),
        Mistake(
            "k2 squares the difference of the probabilities, exp(logp) - exp(logp_ref); it squares the difference "
            "of the log-probs: 0.5 * (logp - logp_ref)**2",
            estimator(k2=lambda p, q: 0.5 * (p.exp() - q.exp()) ** 2),
        ),
        Mistake(
            "k1 is squared: k1 = logp - logp_ref, the log-ratio itself (it can be negative)",
            estimator(k1=lambda p, q: (p - q) ** 2),
        ),
        *(
            Mistake(
                f"the estimates are {words}; kl_estimate returns one estimate per token, the shape of logp "
                "([...]): the loss reduces them later",
                lambda logp, logp_ref, kind, reduce=reduce: reduce(kl_estimate(logp, logp_ref, kind)),
            )
            for words, reduce in (
                ("averaged to one number", lambda k: k.mean()),
                ("summed to one number", lambda k: k.sum()),
                ("summed over the last axis (one per sequence)", lambda k: k.sum(-1) if k.dim() else k),
                ("averaged over the last axis (one per sequence)", lambda k: k.mean(-1) if k.dim() else k),
            )
        ),
    ]
    return check_against_reference(fn, kl_estimate, cases, name="kl_estimate", mistakes=mistakes, check_dtype=True)
