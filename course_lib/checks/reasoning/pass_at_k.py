"""The check of chapter 10's unbiased pass@k (reference: ``course_lib.lectures.reasoning.pass_at_k``)."""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference, drawing
from course_lib.checks.crash_hints import _crash_hint
from course_lib.lectures.reasoning import pass_at_k

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


def _log_gamma_unguarded(n, c, k):
    """1 - C(n - c, k) / C(n, k) in log space (no overflow), with no guard where n - c < k."""
    n, c, k = (torch.as_tensor(x).double() for x in (n, c, k))
    log_ratio = torch.lgamma(n - c + 1) - torch.lgamma(n - c - k + 1) - torch.lgamma(n + 1) + torch.lgamma(n - k + 1)
    return 1.0 - torch.exp(log_ratio)


def _product_one_early(n, c, k):
    """The product over i = n - c, ..., n - 1: each factor one step early."""
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x).long() for x in (n, c, k)))
    j = torch.arange(int(c.max()), dtype=torch.float64)
    i = (n - c).double()[..., None] + j
    prod = torch.where(j < c.double()[..., None], 1.0 - k.double()[..., None] / i, 1.0).prod(-1)
    return torch.where(n - c < k, (c > 0).double(), 1.0 - prod)


def _product_from_k(n, c, k):
    """The product over every i = k + 1, ..., n whatever c is (c > 0, n - c >= k): 1 - 1 / C(n, k), the value
    of c = n - k."""
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x).long() for x in (n, c, k)))
    return pass_at_k(n, torch.where((c > 0) & (n - c >= k), n - k, c), k)


def _product_with(*, first=1, last=0, numerator=lambda k: k.double(), floor=False, complement=True, padding=1.0):
    """The guarded product over i = n - c + first, ..., n - last of (1 - numerator / i), then 1 minus it (or not):
    the reference at first=1, last=0, where the slips of a loop's bounds, of k and of the division are one argument
    each. ``padding`` fills the factors past an entry's own count (the entries of a batch have different c), where
    the product's neutral value, 1, belongs."""

    def wrong(n, c, k):
        n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x).long() for x in (n, c, k)))
        count = c + 1 - first - last  # factors in the product
        j = torch.arange(max(int(count.max()), 0), dtype=torch.float64)
        i = (n - c + first).double()[..., None] + j
        top = numerator(k)[..., None]
        ratio = torch.div(top, i, rounding_mode="floor") if floor else top / i
        all_wrong = torch.where(j < count.double()[..., None], 1.0 - ratio, padding).prod(-1)
        if complement:
            return torch.where(n - c < k, (c > 0).double(), 1.0 - all_wrong)
        return torch.where(n - c < k, (c == 0).double(), all_wrong)

    return wrong


def _union_bound(n, c, k):
    n, c, k = (torch.as_tensor(x).double() for x in (n, c, k))
    return torch.clamp(k * c / n, max=1.0)


def _draw_pass_at_k(g: torch.Generator) -> list[Case]:
    """Fresh counts: ints and integer tensors, k above and below n - c, c = 0 and c = n among them."""
    t = torch.tensor
    n = drawing.integer(g, 2, 40)
    c, k = drawing.integer(g, 0, n), drawing.integer(g, 1, n + 5)
    many = t([drawing.integer(g, 1, 60) for _ in range(5)])
    right = t([drawing.integer(g, 0, int(m)) for m in many])
    ks = t(sorted({drawing.integer(g, 1, 70) for _ in range(4)}))
    return [
        Case(f"n={n}, c={c}, k={k} (ints)", {"n": n, "c": c, "k": k}),
        Case(f"n={many.tolist()}, c={right.tolist()}, k=3 (tensors of shape (5,))", {"n": many, "c": right, "k": 3}),
        Case(f"n=64, c=0, 3, 64 (shape (3, 1)) against k={ks.tolist()}", {"n": 64, "c": t([[0], [3], [64]]), "k": ks}),
    ]


def _plug_in(n, c, k):
    n, c, k = (torch.as_tensor(x).double() for x in (n, c, k))
    return 1.0 - (1.0 - c / n) ** k


def _plug_in_capped(n, c, k):
    n, c, k = (torch.as_tensor(x).double() for x in (n, c, k))
    return 1.0 - (1.0 - c / n) ** torch.minimum(k, n)


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
            "k = 4 > n = 3 samples, c = 1, 2 (k only just past n): pass@n, 1, not the product (1 - k / i), "
            "whose factors are negative there",
            {"n": 3, "c": t([1, 2]), "k": 4},
        ),
        Case(
            "large n: n=5000, c=100, k=200 (C(4900, 200) and C(5000, 200) are both past 1e308, what a float64 holds)",
            {"n": 5000, "c": 100, "k": 200},
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
            "this is the plug-in estimate 1 - (1 - c/n)**k (with k capped at n), which draws with replacement and "
            "is biased low; the unbiased one draws k of the n samples without replacement: 1 - C(n-c, k) / C(n, k)",
            _plug_in_capped,
        ),
        Mistake(
            "pass@k is averaged over the prompts (one number); pass_at_k returns one estimate per entry of the "
            "broadcast counts, the average is taken afterwards",
            lambda n, c, k: pass_at_k(n, c, k).mean(),
        ),
        Mistake(
            "every factor uses n: the product runs over i = n - c + 1, ..., n, each factor (1 - k / i) with its own i",
            _same_factor,
        ),
        Mistake(
            "the binomial coefficients overflow for large n (C(5000, 200) is about 1e363, past float64's "
            "1e308, and inf / inf is NaN): compute the ratio C(n-c, k) / C(n, k) as the product "
            "prod_{i=n-c+1}^{n} (1 - k/i), whose factors all lie in [0, 1)",
            _binomials,
        ),
        Mistake(
            "where n - c < k (k > n among them) the log-gamma ratio has no value: lgamma(n - c - k + 1) is lgamma "
            "of 0 or less, inf, and inf - inf is NaN; return 1 there when c > 0 (0 when c = 0), with torch.where",
            _log_gamma_unguarded,
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
            "off by one: the product runs over i = n - c + 1, ..., n (the last factor is 1 - k / n), not "
            "i = n - c, ..., n - 1",
            _product_one_early,
        ),
        Mistake(
            "your product runs over every i = k + 1, ..., n, whatever c is (it gives 1 - 1 / C(n, k) for any c > 0); "
            "it runs over the last c values only, i = n - c + 1, ..., n",
            _product_from_k,
        ),
        Mistake(
            "you returned c / n for every k: that is pass@1; pass@k grows with k",
            lambda n, c, k: (
                (torch.as_tensor(c).double() / torch.as_tensor(n).double())
                * torch.ones_like(torch.as_tensor(k).double())
            ),
        ),
        Mistake(
            "this is the chance that all k draws are wrong, C(n - c, k) / C(n, k); pass@k is 1 minus it, the chance "
            "that at least one of the k is right",
            _product_with(complement=False),
        ),
        Mistake(
            "this is the union bound min(1, k * c / n), which counts a draw with two right samples twice; the "
            "unbiased estimate is 1 - C(n - c, k) / C(n, k)",
            _union_bound,
        ),
        Mistake(
            "off by one: the product stops one factor short, at i = n - 1; it runs over i = n - c + 1, ..., n "
            "(range(n - c + 1, n + 1): a range leaves out its end)",
            _product_with(last=1),
        ),
        Mistake(
            "off by one: the product takes one factor too many, up to i = n + 1; it runs over the c values "
            "i = n - c + 1, ..., n (j < c, not j <= c)",
            _product_with(last=-1),
        ),
        Mistake(
            "off by one: the product starts one factor early, at i = n - c; it runs over the c values "
            "i = n - c + 1, ..., n (range(n - c + 1, n + 1))",
            _product_with(first=0),
        ),
        Mistake(
            "k / i is an integer division (// or rounding_mode='floor'), 0 whenever k < i: each factor 1 - k / i is "
            "a fraction, so divide as floats",
            _product_with(floor=True),
        ),
        Mistake(
            "the factors past each entry's own c are filled with 0 (where a batch's c differ, the product is padded "
            "to the largest c), which makes the product 0 for every smaller c; pad with 1, which leaves a product "
            "as it is: torch.where(j < c[..., None], 1 - k / i, 1.0)",
            _product_with(padding=0.0),
        ),
        Mistake(
            "each factor uses k - 1; it is 1 - k / i: the chance that sample i is left out of a draw of k",
            _product_with(numerator=lambda k: (k - 1).double()),
        ),
    ]
    try:
        return _check(fn, cases, mistakes)
    except AssertionError as error:
        first, _, rest = str(error).partition("\n")
        if "Boolean value of Tensor" in first and "raised" in first:
            first = first.removesuffix(_crash_hint(RuntimeError(first)))  # the general hint gives way to this one
            raise AssertionError(
                f"{first} (an `if`, `and`, `or` or `min()` on a tensor of several counts, as in Chen et al.'s "
                "code for one prompt: pass_at_k takes tensors of counts, one per prompt, as well as ints; write "
                f"each branch with torch.where)\n{rest}"
            ) from None
        if first.startswith("pass_at_k raised OverflowError: int too large to convert to float"):
            first = first.removesuffix(_crash_hint(OverflowError(first.partition(": ")[2])))
            raise AssertionError(
                f"{first} (a binomial coefficient or a factorial, exact as a Python int, made a float: for large n "
                "they pass float64's 1e308, C(5000, 200) is about 1e363; compute the ratio C(n-c, k) / C(n, k) as "
                "the product "
                f"prod_{{i=n-c+1}}^{{n}} (1 - k/i), whose factors all lie in [0, 1))\n{rest}"
            ) from None
        raise


def _check(fn, cases, mistakes) -> bool:
    return check_against_reference(
        fn,
        pass_at_k,
        cases,
        name="pass_at_k",
        mistakes=mistakes,
        rtol=1e-6,
        atol=1e-9,
        draw=_draw_pass_at_k,
        check_dtype=True,
    )
