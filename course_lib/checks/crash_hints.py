"""Hints for crashes that say little by themselves, read from torch's own error text.

When a student's function raises inside torch (two shapes that do not broadcast, an index past an axis, ``~`` on a
float tensor, a tensor used as a truth value), the check reports the error with the case it happened on and, where
the wording points to a likely cause, one sentence about it. Each pattern is torch's own wording, tested against the
installed torch (``tests/test_checks.py``), so a release that rewords an error is caught by the tests, not by a
student who misses the hint.
"""

from __future__ import annotations

import linecache

# Two causes, either of which the cases may tell apart (course_lib.checks.explain.explain_crash reads them).
BROADCAST_HINT = (
    " (two shapes that do not broadcast: did a .mean(), .std() or .sum() drop an axis? keepdim=True "
    "keeps it, or index with [..., None] to add one back. Or was a size read from the wrong axis: len(x) "
    "and x.shape[0] are the first axis, x.shape[-1] the last, the one a [..., T] docstring means)"
)


def _crash_hint(error: Exception) -> str:
    """A likely cause of a crash that says little by itself, as words to append to its message ("" if none)."""
    text = str(error)
    if "must match the size of tensor" in text or "shapes cannot be multiplied" in text:
        return BROADCAST_HINT
    if "is out of bounds for dimension" in text and text.endswith("with size 0"):
        return (
            " (the axis is empty on this case: a selection such as nonzero(), a boolean mask or a filter kept "
            "nothing, so there is no first entry to take: which condition did no entry meet here?)"
        )
    if "is out of bounds for dimension" in text or "index out of range" in text:
        return (
            " (an index past the end of an axis: which size was it computed from? A flat index splits into "
            "(row, column) by the number of columns, and a size read with len(x) is the first axis's)"
        )
    if "operator.invert" in text or "bitwise_not" in text or "bitwise_xor" in text:
        return " (~ negates bool tensors only: for 0/1 numbers use 1 - x, after x.float() where x is bool)"
    if "with a bool tensor is not supported" in text or "with two bool tensors is not supported" in text:
        return " (a bool tensor such as dones or a mask: convert it first, for example dones.float())"
    if "'NoneType' object" in text:
        return (
            " (something is None on this case: an optional argument this case leaves out (None), or a value"
            " taken from a function that returns nothing?)"
        )
    if "expected np.ndarray (got numpy." in text:
        return (
            " (torch.from_numpy takes an array, and a numpy sum down to one number is a numpy scalar: "
            "torch.as_tensor takes both; or stay in torch, which keeps the inputs' dtype)"
        )
    if isinstance(error, ZeroDivisionError):
        return (
            " (a Python division by a count, a size or a binomial that is 0 on this case: what should it give there?)"
        )
    if isinstance(error, OverflowError) and "int too large to convert to float" in text:
        return (
            " (an exact Python int past what a float64 holds, about 1.8e308, made a float: a binomial coefficient, "
            "math.comb, or a factorial is one for large n; keep such numbers out of floats: compute a ratio of two "
            "of them as a product of ratios of small numbers, or in log space with torch.lgamma)"
        )
    if "derivative for aten::floor_divide" in text or "derivative for aten::round" in text:
        return " (// and round() have no gradient: divide with /, which keeps the gradient)"
    if "Boolean value of Tensor with more than one value is ambiguous" in text:
        return (
            " (a tensor of several entries used as a truth value: `if mask:`, `not mask`, `and`/`or` between "
            "tensors; say which you mean, mask.any() or mask.all(), or keep it a tensor: torch.where, &, |, ~)"
        )
    if "without replacement" in text:
        return (
            " (torch.multinomial draws without replacement by default, so never more draws than categories: "
            "pass replacement=True to draw each sample independently)"
        )
    if "where expected condition to be a boolean tensor" in text:
        return " (torch.where needs a bool condition: a 0/1 mask becomes one with mask.bool() or mask > 0)"
    if "Sizes of tensors must match except in dimension" in text:
        return (
            " (torch.cat joins along one axis, and every other axis must agree: one piece has a size there that the "
            "others lack; was an axis added in the wrong place? unsqueeze(-1) adds a last axis, unsqueeze(0) a first)"
        )
    if isinstance(error, AttributeError) and text.startswith(("'int' object", "'float' object", "'list' object")):
        return (
            " (a Python number or list where your code expects a tensor: the docstring allows one here; "
            "torch.as_tensor(x) makes a tensor of it first)"
        )
    if "Tensors must have same number of dimensions" in text:
        return (
            " (torch.cat joins tensors that have the same number of axes: add the missing one to the smaller, "
            "x.unsqueeze(-1) or x[..., None], rather than reshaping it)"
        )
    if "values to unpack (expected" in text:
        return (
            " (the shape was unpacked into a fixed number of axes, as B, T = x.shape; a [..., T] docstring allows any "
            "number of leading axes: read the last with x.shape[-1], and keep the others as they come)"
        )
    if isinstance(error, (ValueError, TypeError)) and _raised_by_the_student(error):
        return (
            " (your own code refused this case, but the exercise allows it: the reference answers it. Compare what "
            "your function checks with what the docstring's Args allow)"
        )
    if "einsum()" in text and "does not match the number of dimensions" in text:
        return (
            " (an einsum equation names every axis, so it fits one number of dimensions only: write the leading "
            "axes as an ellipsis, '...t,t->...', to accept (T,), (B, T) and (B, G, T) alike)"
        )
    return ""


def _raised_by_the_student(error: Exception) -> bool:
    """Whether the innermost frame of ``error`` is the student's code, not torch's, numpy's, Python's or the
    course's: a ValueError raised there is a validation the student wrote."""
    frame = error.__traceback__
    if frame is None:
        return False
    while frame.tb_next is not None:
        frame = frame.tb_next
    filename = frame.tb_frame.f_code.co_filename
    outside = ("site-packages", "/lib/python", "course_lib/")
    if any(part in filename.replace("\\", "/") for part in outside):
        return False
    # Only a `raise` the student wrote: a TypeError of an operator on None, or str.index's ValueError, is a
    # crash of the student's code, not a refusal.
    return linecache.getline(filename, frame.tb_lineno).strip().startswith("raise ")
