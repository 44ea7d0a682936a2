"""Classic wrong (and correct) ways to write the exercises of chapter 10 (why completions get longer).

``pass_at_k(n, c, k)``, ``aggregation_token_weight(length, mode, max_len=None)``,
``completion_style(text, n_digits=3)`` and ``style_share(labels, style)``, checked by
``course_lib.checks.reasoning``.
"""

import math
import re
from fractions import Fraction

import catalogue_round7_09_11 as round7
import numpy as np
import torch

# ---------------------------------------------------------------------------
# pass_at_k
# ---------------------------------------------------------------------------


def _loop(n, c, k, one):
    """Apply ``one(n, c, k)`` (plain ints) elementwise over the broadcast tensors."""
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x).long() for x in (n, c, k)))
    out = [one(int(a), int(b), int(d)) for a, b, d in zip(n.flatten(), c.flatten(), k.flatten())]
    return torch.tensor(out, dtype=torch.float64).reshape(n.shape)


def pass_biased(n, c, k):
    return _loop(n, c, k, lambda n, c, k: 1 - (1 - c / n) ** k)


def pass_float_binomials(n, c, k):
    # The student: binomials as exp(log-gamma), which overflow to inf past 1e308 (inf / inf is NaN).
    n, c, k = (torch.as_tensor(x, dtype=torch.float64) for x in (n, c, k))

    def comb(a, b):
        return torch.exp(torch.lgamma(a + 1) - torch.lgamma(b + 1) - torch.lgamma(a - b + 1))

    return 1 - torch.where(k <= n - c, comb(n - c, k), 0.0) / comb(n, k)


def pass_chen_verbatim(n, c, k):
    """Chen et al.'s numpy code as printed: right for k <= n, but 1 for c = 0 when k > n."""

    def one(n, c, k):
        if n - c < k:
            return 1.0
        return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))

    return _loop(n, c, k, one)


def pass_no_guard(n, c, k):
    return _loop(n, c, k, lambda n, c, k: 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1))))


def pass_guard_off_by_one(n, c, k):
    def one(n, c, k):
        if n - c <= k:
            return float(c > 0)
        return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))

    return _loop(n, c, k, one)


def pass_ignores_k(n, c, k):
    return _loop(n, c, k, lambda n, c, k: c / n)


def pass_without_replacement_ratio_flipped(n, c, k):
    """C(n, k) / C(n - c, k) inverted into the product: prod (1 - k / i) over the wrong range."""
    return _loop(
        n, c, k, lambda n, c, k: float(c > 0) if n - c < k else 1.0 - float(np.prod(1.0 - k / np.arange(n - c, n)))
    )


def pass_factorials(n, c, k):
    """C(a, b) as a! / (b! (a - b)!): fails as soon as n - c < k (c = n, say), where (n - c - k)! is undefined."""

    def comb(a, b):
        return math.factorial(a) // (math.factorial(b) * math.factorial(a - b))

    return _loop(n, c, k, lambda n, c, k: 1 - comb(n - c, k) / comb(n, k))


def pass_exact(n, c, k):
    """Exact rational arithmetic, k > n as pass@n."""

    def one(n, c, k):
        k = min(k, n)
        return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))

    return _loop(n, c, k, one)


def pass_log_space(n, c, k):
    """The ratio of binomials as one exp of log-gamma differences: no overflow, guards written out."""
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x).double() for x in (n, c, k)))
    safe = torch.where(n - c < k, n + k, n)  # any n with n - c >= k where the guard decides anyway
    log_ratio = (
        torch.lgamma(safe - c + 1)
        - torch.lgamma(safe - c - k + 1)
        - torch.lgamma(safe + 1)
        + torch.lgamma(safe - k + 1)
    )
    return torch.where(n - c < k, (c > 0).double(), 1 - torch.exp(log_ratio))


# ---------------------------------------------------------------------------
# aggregation_token_weight
# ---------------------------------------------------------------------------


def _weights(one_mode):
    def fn(length, mode, max_len=None):
        o = length.double()
        L = o.max() if max_len is None else max_len
        w = one_mode(o, o.numel(), L, mode)
        weights = torch.where(o > 0, w, torch.zeros_like(w))
        return weights.to(length.dtype if length.is_floating_point() else torch.get_default_dtype())

    return fn


def _right(o, N, L, mode):
    if mode == "seq-mean-token-mean":
        return 1 / (N * o.clamp(min=1))
    if mode == "token-mean":
        return torch.ones_like(o) / o.sum()
    return torch.ones_like(o) / (N * L)


weights_inverted = _weights(lambda o, N, L, m: o / N if m == "seq-mean-token-mean" else _right(o, N, L, m))
weights_no_mean_over_responses = _weights(
    lambda o, N, L, m: 1 / o.clamp(min=1) if m == "seq-mean-token-mean" else _right(o, N, L, m)
)
weights_token_mean_over_responses = _weights(
    lambda o, N, L, m: torch.ones_like(o) / N if m == "token-mean" else _right(o, N, L, m)
)
weights_drgrpo_per_length = _weights(
    lambda o, N, L, m: 1 / (N * o.clamp(min=1)) if m == "seq-mean-token-sum-norm" else _right(o, N, L, m)
)
weights_drgrpo_sum = _weights(
    lambda o, N, L, m: torch.ones_like(o) / L if m == "seq-mean-token-sum-norm" else _right(o, N, L, m)
)
weights_modes_swapped = _weights(
    lambda o, N, L, m: _right(
        o, N, L, {"token-mean": "seq-mean-token-mean", "seq-mean-token-mean": "token-mean"}.get(m, m)
    )
)


def weights_max_len_ignored(length, mode, max_len=None):
    return _weights(_right)(length, mode, None)


def weights_empty_not_zero(length, mode, max_len=None):
    o = length.double()
    return _right(o, o.numel(), o.max() if max_len is None else max_len, mode)


def weights_by_autograd(length, mode, max_len=None):
    """The oracle: differentiate the course's aggregate_loss. Borrowed: the notebook says so, as grading does."""
    from course_lib.grpo import aggregate_loss

    T = max(int(length.max()), 1)
    mask = (torch.arange(T) < length[..., None]).double()
    x = torch.zeros(*length.shape, T, dtype=torch.float64, requires_grad=True)
    aggregate_loss(x, mask, mode, max_len if max_len is not None else T).backward()
    return x.grad[..., 0] * (length > 0)


# ---------------------------------------------------------------------------
# completion_style
# ---------------------------------------------------------------------------


def _style(text, n_digits=3, *, eos_required=True, cut_after_eos=True, dots_are_filler=True, strict=True):
    if cut_after_eos:
        body, eos, _ = text.partition("$")
    else:
        body, eos = (text[:-1], "$") if text.endswith("$") else (text, "")
    if not eos and eos_required:
        return "malformed"
    if re.fullmatch(r"[0-9]+", body):
        return "direct"
    m = re.fullmatch(r"\[([^\[\]]+)\]([0-9]+)", body)
    if not m:
        return "malformed"
    content = m.group(1)
    if re.fullmatch(r"\.+", content):
        return "filler" if dots_are_filler else "scratchpad"
    pattern = rf"(?:1?[0-9])(?:,(?:1?[0-9])){{{n_digits - 1}}}" if strict else r"[0-9.,]+"
    return "scratchpad" if re.fullmatch(pattern, content) else "malformed"


def style_no_eos_needed(text, n_digits=3):
    return _style(text, n_digits, eos_required=False)


def style_reads_past_eos(text, n_digits=3):
    return _style(text, n_digits, cut_after_eos=False)


def style_dots_are_scratchpad(text, n_digits=3):
    return _style(text, n_digits, dots_are_filler=False)


def style_any_bracket_content(text, n_digits=3):
    return _style(text, n_digits, strict=False)


def style_counts_brackets_only(text, n_digits=3):
    """A scratchpad is anything with a '[': the answer and the totals are never read."""
    if not text.partition("$")[1]:
        return "malformed"
    body = text.partition("$")[0]
    if "[" in body:
        return "filler" if "." in body else "scratchpad"
    return "direct"


def style_read_with_int(text, n_digits=3):
    """Each number read with int(), which also takes a leading '+' ('+1045$' direct): '+' is in the alphabet."""

    def number(x):
        try:
            int(x)
        except ValueError:
            return False
        return x.strip() == x  # int() takes spaces too; this student saw those

    body, eos, _ = text.partition("$")
    if not eos or not body:
        return "malformed"
    if number(body):
        return "direct"
    if not body.startswith("[") or body.count("]") != 1 or body.count("[") != 1:
        return "malformed"
    content, answer = body[1:].split("]")
    if not content or not number(answer):
        return "malformed"
    if set(content) == {"."}:
        return "filler"
    totals = content.split(",")
    if len(totals) != n_digits:
        return "malformed"
    for t in totals:
        digits = t.lstrip("+")
        if not number(t) or not 0 <= int(t) <= 19 or (len(digits) > 1 and digits[0] == "0"):
            return "malformed"
    return "scratchpad"


def style_by_split(text, n_digits=3):
    """A correct variant without regular expressions."""
    body, eos, _ = text.partition("$")
    if not eos or not body:
        return "malformed"
    if body.isdigit():
        return "direct"
    if not body.startswith("[") or body.count("]") != 1 or body.count("[") != 1:
        return "malformed"
    content, answer = body[1:].split("]")
    if not content or not answer.isdigit():
        return "malformed"
    if set(content) == {"."}:
        return "filler"
    totals = content.split(",")
    if len(totals) != n_digits:
        return "malformed"
    for t in totals:
        if not t.isdigit() or not 0 <= int(t) <= 19 or (len(t) > 1 and t[0] == "0"):
            return "malformed"
    return "scratchpad"


# ---------------------------------------------------------------------------
# style_share
# ---------------------------------------------------------------------------


def share_count(labels, style):
    return float(sum(label == style for label in np.asarray(labels).reshape(-1)))


def share_over_wellformed(labels, style):
    flat = np.asarray(labels).reshape(-1)
    return float((flat == style).sum() / (flat != "malformed").sum())


def share_per_row(labels, style):
    flat = np.asarray(labels).reshape(-1)
    return float((flat == style).sum() / len(labels))


def share_first_row(labels, style):
    """Only the first prompt's group (or the first label of a flat list) is looked at."""
    return float(np.mean(np.asarray(labels)[0] == style))


def share_loop(labels, style):
    """Correct: a loop over the rows, and no share of no labels."""
    flat = [label for row in labels for label in (row if isinstance(row, (list, np.ndarray)) else [row])]
    if not flat:
        raise ValueError("labels: no label, so no share")
    return sum(1 for label in flat if label == style) / len(flat)


def share_list_count(labels, style):
    """list.count on the labels as given: a nested list's rows are never equal to a label."""
    return labels.count(style) / len(labels)


def share_of_nothing_is_nan(labels, style):
    flat = np.asarray(labels).reshape(-1)
    return float(np.mean(flat == style)) if flat.size else float("nan")


def pass_product_one_early(n, c, k):
    """The product over i = n - c, ..., n - 1."""
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x).long() for x in (n, c, k)))
    j = torch.arange(int(c.max()), dtype=torch.float64)
    i = (n - c).double()[..., None] + j
    prod = torch.where(j < c.double()[..., None], 1.0 - k.double()[..., None] / i, 1.0).prod(-1)
    return torch.where(n - c < k, (c > 0).double(), 1.0 - prod)


def pass_float32(n, c, k):
    return pass_exact(n, c, k).float()


def weights_n_over_nonempty(length, mode, max_len=None):
    """N counts the responses that have tokens (an empty one left out of the mean)."""
    o = length.double()
    L = o.max() if max_len is None else max_len
    w = _right(o, int((o > 0).sum()), L, mode)
    weights = torch.where(o > 0, w, torch.zeros_like(w))
    return weights.to(length.dtype if length.is_floating_point() else torch.get_default_dtype())


MUTANTS = [
    ("pass_at_k", pass_product_one_early, "the product runs over i = n - c + 1"),
    ("pass_at_k", pass_float32, "is a float32 tensor; the exercise asks for a float64 tensor"),
    ("aggregation_token_weight", weights_n_over_nonempty, "N counts every response"),
    ("pass_at_k", pass_biased, "plug-in"),
    ("pass_at_k", pass_float_binomials, "overflow"),
    ("pass_at_k", pass_chen_verbatim, "c = 0"),
    ("pass_at_k", pass_no_guard, "k > n"),
    ("pass_at_k", pass_guard_off_by_one, "off by one"),
    ("pass_at_k", pass_ignores_k, "pass@1"),
    ("pass_at_k", pass_without_replacement_ratio_flipped, "the product runs over i = n - c + 1"),
    ("pass_at_k", pass_factorials, "factorial"),
    ("aggregation_token_weight", weights_inverted, "inverted"),
    ("aggregation_token_weight", weights_no_mean_over_responses, "mean over the N responses"),
    ("aggregation_token_weight", weights_token_mean_over_responses, "total number of tokens"),
    ("aggregation_token_weight", weights_drgrpo_per_length, "constant max_len"),
    ("aggregation_token_weight", weights_drgrpo_sum, "verl"),
    ("aggregation_token_weight", weights_max_len_ignored, "ignored"),
    ("aggregation_token_weight", weights_empty_not_zero, "empty response"),
    ("aggregation_token_weight", weights_modes_swapped, "are swapped"),
    ("completion_style", style_no_eos_needed, "no EOS"),
    ("completion_style", style_reads_past_eos, "after the first EOS"),
    ("completion_style", style_dots_are_scratchpad, "filler"),
    ("completion_style", style_any_bracket_content, "exactly n_digits"),
    ("completion_style", style_counts_brackets_only, "a bracket alone does not make a scratchpad"),
    ("completion_style", style_read_with_int, "'+' sign"),
    ("style_share", share_count, "count"),
    ("style_share", share_over_wellformed, "malformed"),
    ("style_share", share_per_row, "number of prompts"),
    ("style_share", share_first_row, "only the first row"),
    ("style_share", share_list_count, "counted at the top level"),
    ("style_share", share_of_nothing_is_nan, "must raise ValueError"),
    ("aggregation_token_weight", weights_by_autograd, "calls course_lib's own grpo.aggregate_loss"),
]

VARIANTS = [
    ("pass_at_k", pass_exact),
    ("pass_at_k", pass_log_space),
    ("aggregation_token_weight", _weights(_right)),
    ("completion_style", style_by_split),
    ("style_share", share_loop),
]

# Round seven (chapter 10): the new wrong answers of tests/catalogue_round7_09_11.py, each named by its check.
MUTANTS += [
    ("pass_at_k", round7.g10_pass_at_k_lgamma_unguarded, "log-gamma ratio"),
    ("aggregation_token_weight", round7.g10_weight_dr_grpo_empty_not_zero, "no token to weigh"),
    ("aggregation_token_weight", round7.g10_weight_seq_mean_row_loop, "aggregated alone"),
    ("completion_style", round7.g10_style_index_of_eos, "text.index('$')"),
    ("completion_style", round7.g10_style_int_totals, "read with int()"),
    ("style_share", round7.g10_share_generator, "top level"),
    ("pass_at_k", round7.h10_pass_at_k_plug_in_capped, "capped at n"),
    ("pass_at_k", round7.h10_pass_at_k_averaged, "averaged over the prompts"),
    ("aggregation_token_weight", round7.h10_weight_token_mean_row_loop, "aggregated alone"),
    ("aggregation_token_weight", round7.h10_weight_nan_for_empty, "inf * 0 is NaN"),
    ("completion_style", round7.h10_style_leading_zero_totals, "leading zero"),
    ("completion_style", round7.h10_style_default_two_digits, "defaults to 3"),
    ("completion_style", round7.h10_style_no_eos_check, "no EOS"),
    ("style_share", round7.h10_share_counter, "number of prompts"),
    ("pass_at_k", round7.w10_pass_at_k_chen_scalar_port, "torch.where"),
    ("pass_at_k", round7.w10_pass_at_k_all_wrong_probability, "1 minus it"),
    ("pass_at_k", round7.w10_pass_at_k_union_bound, "union bound"),
    ("pass_at_k", round7.w10_pass_at_k_product_one_short, "one factor short"),
    ("pass_at_k", round7.w10_pass_at_k_integer_division, "integer division"),
    ("pass_at_k", round7.w10_pass_at_k_float32, "float32"),
    ("pass_at_k", round7.w10_pass_at_k_k_minus_one, "k - 1"),
    ("pass_at_k", round7.w10_pass_at_k_python_float, "Python number"),
    ("aggregation_token_weight", round7.w10_weight_per_row, "aggregated alone"),
    ("aggregation_token_weight", round7.w10_weight_n_from_first_axis, "first axis"),
    ("aggregation_token_weight", round7.w10_weight_empty_divides_by_zero, "1 / 0"),
    ("aggregation_token_weight", round7.w10_weight_token_mean_empty_not_zero, "no token to weigh"),
    ("aggregation_token_weight", round7.w10_weight_default_float32, "float32"),
    ("aggregation_token_weight", round7.w10_weight_dr_grpo_mean_length, "mean length"),
    ("aggregation_token_weight", round7.w10_weight_token_mean_normalised_per_response, "share of the tokens"),
    ("completion_style", round7.w10_style_prefix_match, "re.fullmatch"),
    ("completion_style", round7.w10_style_totals_not_counted, "any number of them"),
    ("completion_style", round7.w10_style_totals_one_per_answer_digit, "n_digits + 1"),
    ("completion_style", round7.w10_style_fixed_dot_count, "any run of one or more dots"),
    ("completion_style", round7.w10_style_empty_answer_allowed, "at least one digit"),
    ("completion_style", round7.w10_style_no_leading_zero_answer, "leading zeros in the answer"),
    ("completion_style", round7.w10_style_single_digit_totals, "10 to 19"),
    ("completion_style", round7.w10_style_empty_brackets_are_filler, "empty brackets"),
    ("completion_style", round7.w10_style_totals_up_to_18, "can be 19"),
    ("style_share", round7.w10_share_percent, "percentage"),
    ("style_share", round7.w10_share_nan_for_empty, "must raise ValueError"),
    ("style_share", round7.w10_share_list_compared_whole, "compares the whole list"),
    ("style_share", round7.w10_share_odds, "odds"),
    ("style_share", round7.w10_share_rounded, "rounded"),
    ("style_share", round7.w10_share_floor_division, "floor division"),
    ("style_share", round7.w10_share_tensor, "Python number"),
    ("style_share", round7.w10_share_distinct_styles, "distinct labels"),
]
VARIANTS += [
    ("pass_at_k", round7.g10_pass_at_k_float32_product),
    ("pass_at_k", round7.r10_pass_at_k_guard_k_at_least_n),
]


def pass_product_one_long(n, c, k):
    n, c, k = torch.broadcast_tensors(*(torch.as_tensor(x).long() for x in (n, c, k)))
    j = torch.arange(int(c.max()) + 1, dtype=torch.float64)
    i = (n - c + 1).double()[..., None] + j
    factors = torch.where(j <= c[..., None], 1.0 - k.double()[..., None] / i, 1.0)  # j <= c: one factor too many
    return torch.where(n - c < k, (c > 0).double(), 1.0 - factors.prod(-1))


def share_of_the_others(labels, style):
    flat = np.asarray(labels, dtype=object).reshape(-1)
    if flat.size == 0:
        raise ValueError("labels: empty")
    return float(np.mean(flat != style))


MUTANTS += [
    ("pass_at_k", pass_product_one_long, "one factor too many"),
    ("style_share", share_of_the_others, "other labels"),
]
