"""Exercise checks of chapter 10 (why completions get longer): pass@k, token weights, styles.

The references live in ``course_lib.lectures.reasoning`` and ``course_lib.tasks_reasoning``; this module
imports them, never the reverse.
"""

from __future__ import annotations

import numpy as np
import torch

from course_lib.checks import Case, Mistake, check_against_reference
from course_lib.grpo import LOSS_AGG_MODES
from course_lib.lectures.reasoning import aggregation_token_weight, pass_at_k, style_share
from course_lib.tasks_reasoning import STYLES, completion_style

# ---------------------------------------------------------------------------
# pass@k
# ---------------------------------------------------------------------------


def _all_wrong_product(n, c, k):
    """prod_{i=n-c+1}^{n} (1 - k / i), with no guard: the raw product every mistake below starts from."""
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x).long() for x in (n, c, k)))
    j = torch.arange(int(c.max()), dtype=torch.float64)
    i = (n - c + 1).double()[..., None] + j
    return n, c, k, torch.where(j < c.double()[..., None], 1.0 - k.double()[..., None] / i, 1.0).prod(-1)


def _no_guard(n, c, k):
    n, c, k, prod = _all_wrong_product(n, c, k)
    return 1.0 - prod


def _guard(rule, value_at_guard):
    def wrong(n, c, k):
        n, c, k, prod = _all_wrong_product(n, c, k)
        return torch.where(rule(n, c, k), value_at_guard(c), 1.0 - prod)

    return wrong


def _binomials(n, c, k):
    """1 - C(n - c, k) / C(n, k) with each binomial as a float (exp of log-gamma): overflows past 1e308."""
    n, c, k = (torch.as_tensor(x).double() for x in (n, c, k))

    def comb(a, b):
        return torch.where(b <= a, torch.exp(torch.lgamma(a + 1) - torch.lgamma(b + 1) - torch.lgamma(a - b + 1)), 0.0)

    return 1.0 - comb(n - c, k) / comb(n, k)


def _plug_in(n, c, k):
    n, c, k = (torch.as_tensor(x).double() for x in (n, c, k))
    return 1.0 - (1.0 - c / n) ** k


def _same_factor(n, c, k):
    n, c, k = (torch.as_tensor(x).double() for x in (n, c, k))
    return 1.0 - torch.clamp(1.0 - k / n, min=0.0) ** c


def check_pass_at_k(fn) -> bool:
    """Check a student's ``pass_at_k(n, c, k)`` (unbiased, vectorised over tensors)."""
    t = torch.tensor
    cases = [
        Case("n=10 samples, c=3 right, k=1: pass@1 is the fraction right, 0.3", {"n": 10, "c": 3, "k": 1}),
        Case("n=5, c=2, k=3: by hand 1 - C(3, 3) / C(5, 3) = 0.9", {"n": 5, "c": 2, "k": 3}),
        Case("n=5, c=2, k=4: n - c = 3 < k, every draw of 4 holds a right sample, so 1", {"n": 5, "c": 2, "k": 4}),
        Case("c = 0 (no sample right), k = 1, 2, 5 (a tensor of k)", {"n": 5, "c": 0, "k": t([1, 2, 5])}),
        Case("c = n = 8 (every sample right), k = 1, 4, 8", {"n": 8, "c": 8, "k": t([1, 4, 8])}),
        Case(
            "k = 100 > n = 64 samples, c = 0, 1, 5: pass@k is then pass@n (1 if any sample was right)",
            {"n": 64, "c": t([0, 1, 5]), "k": 100},
        ),
        Case(
            "large n: n=5000, c=2500, k=200 (C(5000, 200) is about 1e400, past what a float64 holds)",
            {"n": 5000, "c": 2500, "k": 200},
        ),
        Case(
            "six prompts with n=64 samples each, c = 0, 1, 3, 10, 32, 64 right, k=8 (c a tensor of shape (6,))",
            {"n": 64, "c": t([0, 1, 3, 10, 32, 64]), "k": 8},
        ),
        Case(
            "a grid: c of shape (4, 1) against k = 1, 2, 4, ..., 64 of shape (7,), n=64",
            {"n": t(64), "c": t([[0], [2], [16], [63]]), "k": t([1, 2, 4, 8, 16, 32, 64])},
        ),
        Case(
            "n and c per prompt (shape (3,)): n = 4, 16, 100, c = 1, 8, 99, k=3",
            {"n": t([4, 16, 100]), "c": t([1, 8, 99]), "k": 3},
        ),
    ]
    mistakes = [
        Mistake(
            "this is the plug-in estimate 1 - (1 - c/n)**k, which draws with replacement and is biased low; "
            "the unbiased one draws k of the n samples without replacement: 1 - C(n-c, k) / C(n, k)",
            _plug_in,
        ),
        Mistake(
            "every factor uses n: the product runs over i = n - c + 1, ..., n, each factor (1 - k / i) with its own i",
            _same_factor,
        ),
        Mistake(
            "the binomial coefficients overflow for large n (C(5000, 200) is about 1e400, past float64's "
            "1e308, and inf / inf is NaN): compute the ratio C(n-c, k) / C(n, k) as the product "
            "prod_{i=n-c+1}^{n} (1 - k/i), whose factors all lie in [0, 1)",
            _binomials,
        ),
        Mistake(
            "k > n is not handled: the product is only meaningful for k <= n; when n - c < k return 1 "
            "if c > 0 (and 0 if c = 0)",
            _no_guard,
        ),
        Mistake(
            "k > n with c = 0 gave 1 (Chen et al.'s `if n - c < k: return 1.0` assumes k <= n): "
            "with no right sample, pass@k is 0 for every k",
            _guard(lambda n, c, k: n - c < k, lambda c: torch.ones_like(c, dtype=torch.float64)),
        ),
        Mistake(
            "off by one: when n - c == k exactly one draw of k samples is all wrong, so pass@k is "
            "1 - 1/C(n, k), not 1; the guard is n - c < k",
            _guard(lambda n, c, k: n - c <= k, lambda c: (c > 0).double()),
        ),
        Mistake(
            "you returned c / n for every k: that is pass@1; pass@k grows with k",
            lambda n, c, k: (
                (torch.as_tensor(c).double() / torch.as_tensor(n).double())
                * torch.ones_like(torch.as_tensor(k).double())
            ),
        ),
    ]
    return check_against_reference(fn, pass_at_k, cases, name="pass_at_k", mistakes=mistakes, rtol=1e-6, atol=1e-9)


# ---------------------------------------------------------------------------
# The weight of one token under each aggregation
# ---------------------------------------------------------------------------


def _weights_with(**wrong):
    def weights(length, mode, max_len=None):
        if mode in wrong:
            o = length.double()
            return wrong[mode](o, o.numel(), o.max() if max_len is None else max_len)
        return aggregation_token_weight(length, mode, max_len)

    return weights


def check_aggregation_token_weight(fn) -> bool:
    """Check a student's ``aggregation_token_weight(length, mode, max_len=None)``."""
    t = torch.tensor
    grids = [
        ("a group of 3 responses of 10, 5 and 2 tokens", t([10, 5, 2])),
        ("B=2 prompts x G=3 responses (shape (2, 3)), lengths 3, 4, 2 / 8, 1, 1", t([[3, 4, 2], [8, 1, 1]])),
        ("4 responses of equal length 6", t([6, 6, 6, 6])),
        ("3 responses of 4, 0 (empty: no token, weight 0) and 2 tokens", t([4, 0, 2])),
        ("one response of 7 tokens, lengths as a float tensor", t([7.0])),
    ]
    cases = [
        Case(f"{text}, mode={mode!r}", {"length": length, "mode": mode})
        for mode in LOSS_AGG_MODES
        for text, length in grids
    ]
    cases.append(
        Case(
            "lengths 10, 5, 2 with mode='seq-mean-token-sum-norm' and max_len=16 given",
            {"length": grids[0][1], "mode": "seq-mean-token-sum-norm", "max_len": 16},
        )
    )
    nonzero = lambda o, w: torch.where(o > 0, w, 0.0)  # noqa: E731
    mistakes = [
        Mistake(
            "the weights are inverted: a token of a long response weighs *less* under the per-sequence "
            "mean, 1 / (N * |o|): that is the length bias",
            _weights_with(**{"seq-mean-token-mean": lambda o, N, L: nonzero(o, o / N)}),
        ),
        Mistake(
            "the mean over the N responses is missing: seq-mean-token-mean gives 1 / (N * |o_i|), not 1 / |o_i|",
            _weights_with(**{"seq-mean-token-mean": lambda o, N, L: nonzero(o, 1 / o)}),
        ),
        Mistake(
            "token-mean divides by the total number of tokens of all responses, sum_j |o_j|, "
            "so every token weighs the same",
            _weights_with(**{"token-mean": lambda o, N, L: nonzero(o, 1 / (N * o.clamp(min=1)))}),
        ),
        Mistake(
            "token-mean's denominator is the total number of tokens, sum_j |o_j|, not the number of responses N",
            _weights_with(**{"token-mean": lambda o, N, L: nonzero(o, torch.full_like(o, 1 / N))}),
        ),
        Mistake(
            "Dr. GRPO divides by the constant max_len, the same for every response, not by |o_i|",
            _weights_with(**{"seq-mean-token-sum-norm": lambda o, N, L: nonzero(o, 1 / (N * o.clamp(min=1)))}),
        ),
        Mistake(
            "Dr. GRPO still takes the mean over the N responses: 1 / (N * max_len), not 1 / max_len "
            "(verl's sum over responses)",
            _weights_with(**{"seq-mean-token-sum-norm": lambda o, N, L: nonzero(o, torch.ones_like(o) / L)}),
        ),
        Mistake(
            "max_len was given but ignored: when it is not None, Dr. GRPO divides by it",
            _weights_with(
                **{"seq-mean-token-sum-norm": lambda o, N, L: nonzero(o, torch.ones_like(o) / (N * o.max()))}
            ),
        ),
        Mistake(
            "an empty response (length 0) has no token to weigh: its weight is 0, not the weight a token would have",
            _weights_with(
                **{
                    "seq-mean-token-mean": lambda o, N, L: 1 / (N * o.clamp(min=1)),
                    "token-mean": lambda o, N, L: torch.ones_like(o) / o.sum(),
                    "seq-mean-token-sum-norm": lambda o, N, L: torch.ones_like(o) / (N * L),
                }
            ),
        ),
    ]
    return check_against_reference(
        fn, aggregation_token_weight, cases, name="aggregation_token_weight", mistakes=mistakes
    )


# ---------------------------------------------------------------------------
# Styles: the classifier and the share
# ---------------------------------------------------------------------------

_CLASSIFIER_CASES = [  # (text, n_digits): each teaches one rule of the module docstring of tasks_reasoning
    ("1045$", 3),
    ("[15,14,10]1045$", 3),
    ("[........]1045$", 3),
    ("[.]1045$", 3),
    ("[1,2,3]999$", 3),
    ("0001045$", 3),
    ("1045$[15,14,10]", 3),
    ("[15,14]132$", 2),
    ("[7,0]7$", 2),
    ("1045", 3),
    ("[15,14,10]1045", 3),
    ("$", 3),
    ("[15,14,10]$", 3),
    ("[]1045$", 3),
    ("[15,14]1045$", 3),
    ("[15,14,10,1]1045$", 3),
    ("[15,,14,10]1045$", 3),
    ("[15,4.,10]1045$", 3),
    ("[15,14,20]1045$", 3),
    ("[15,14,05]1045$", 3),
    ("[15,14,10]]1045$", 3),
    ("[15,14,10]10,45$", 3),
    ("1045]$", 3),
]


def check_completion_style(fn) -> bool:
    """Check a student's ``completion_style(text, n_digits=3)`` on completions of every kind."""
    numbered = ", ".join(f"{s}={i}" for i, s in enumerate(STYLES))
    cases = [
        Case(
            f"the completion {text!r} with n_digits={n}, which is {completion_style(text, n)} "
            f"(labels as numbers: {numbered})",
            {"text": text, "n_digits": n},
        )
        for text, n in _CLASSIFIER_CASES
    ]

    def as_number(label):
        return {"style": float(STYLES.index(label)) if label in STYLES else -1.0}

    def keep(rule):
        def wrong(text, n_digits=3):
            return rule(text, n_digits) or completion_style(text, n_digits)

        return wrong

    mistakes = [
        Mistake(
            "a completion with no EOS never stopped: it is malformed, whatever it holds",
            keep(
                lambda s, n: (
                    (
                        "direct"
                        if s.isdigit()
                        else "scratchpad"
                        if s.endswith(tuple("0123456789"))
                        and s.startswith("[")
                        and "." not in s
                        and completion_style(s + "$", n) == "scratchpad"
                        else None
                    )
                    if "$" not in s
                    else None
                )
            ),
        ),
        Mistake(
            "the text after the first EOS ($) must be ignored: cut it off before classifying",
            keep(lambda s, n: "malformed" if "$" in s and not s.endswith("$") else None),
        ),
        Mistake(
            "a run of dots is the filler, not a scratchpad: the scratchpad holds column totals",
            keep(lambda s, n: "scratchpad" if completion_style(s, n) == "filler" else None),
        ),
        Mistake(
            "a real scratchpad holds exactly n_digits column totals, each 0 to 19 without a leading zero; "
            "anything else between the brackets is malformed",
            keep(
                lambda s, n: (
                    "scratchpad"
                    if completion_style(s, n) == "malformed"
                    and s.startswith("[")
                    and "]" in s
                    and s.endswith("$")
                    and s[s.index("]") + 1 : -1].isdigit()
                    and "." not in s
                    else None
                )
            ),
        ),
    ]
    return check_against_reference(
        fn,
        completion_style,
        cases,
        name="completion_style",
        mistakes=mistakes,
        outputs=as_number,
        dtypes=(torch.float64,),
    )


def check_style_share(fn) -> bool:
    """Check a student's ``style_share(labels, style)``."""
    flat = ["direct", "scratchpad", "scratchpad", "malformed", "filler", "direct", "scratchpad", "direct"]
    nested = [flat[:4], flat[4:]]
    cases = [
        Case("8 labels in a list, style='scratchpad' (3 of 8)", {"labels": flat, "style": "scratchpad"}),
        Case(
            "the same 8 labels as B=2 prompts x G=4 (a nested list), style='direct'",
            {"labels": nested, "style": "direct"},
        ),
        Case(
            "the same as a numpy array of shape (2, 4), style='malformed' (malformed ones count in the total)",
            {"labels": np.array(nested), "style": "malformed"},
        ),
        Case("a style that never occurs: share 0", {"labels": flat[:4], "style": "filler"}),
        Case("every label the same: share 1", {"labels": ["scratchpad"] * 5, "style": "scratchpad"}),
    ]

    def flatten(labels):
        return np.asarray(labels, dtype=object).reshape(-1)

    mistakes = [
        Mistake(
            "you returned a count; the share is the count divided by the number of completions",
            lambda labels, style: float((flatten(labels) == style).sum()),
        ),
        Mistake(
            "malformed completions count in the total: the share is over all completions, so a model "
            "that writes garbage cannot raise its shares",
            lambda labels, style: float(
                (flatten(labels) == style).sum() / max(1, (flatten(labels) != "malformed").sum())
            ),
        ),
        Mistake(
            "the denominator is the number of prompts (rows), not of completions: flatten the labels first",
            lambda labels, style: float((flatten(labels) == style).sum() / len(labels)),
        ),
    ]
    return check_against_reference(
        fn, style_share, cases, name="style_share", mistakes=mistakes, dtypes=(torch.float64,)
    )
