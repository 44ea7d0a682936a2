"""An output's *kind* beside its value: a tensor's dtype, or "a Python number", compared like any other output.

``check_against_reference(..., check_dtype=True)`` wraps a check's ``outputs`` in :func:`_with_dtypes`, which adds
one output ``dtype of <name>`` per output, a code for its kind; :mod:`course_lib.checks.compare` tells a difference
there in words (:func:`_kind_name`) with the call that converts it (:func:`_kind_hint`), after every value. A wrong
shape, the other way an output can be of the wrong kind, gets its likely cause from :func:`_shape_hint`.
"""

from __future__ import annotations

import torch

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32, torch.int64, torch.bool)


def _with_dtypes(select):
    """``select``, with each output's kind as one more output (``dtype of <name>``), compared like the rest.

    The kind is a tensor's dtype, "a Python number" for a ``float``, or "a Python int": a docstring that
    promises a float64 tensor is not met by a float32 one, one that promises a number (a clip fraction in
    ``info``) is not met by a tensor, and one that promises an int (a count of bytes) is not met by a float.
    An int where a float is promised is fine, as Python's own type hints have it: ``compare`` accepts it."""

    def with_dtypes(result):
        named = dict(select(result))
        for key, value in list(named.items()):
            named[f"dtype of {key}"] = torch.tensor(float(_kind_code(value)), dtype=torch.float64)
        return named

    return with_dtypes


_NUMBER = len(DTYPES)  # the kind code of a Python float
_OTHER = len(DTYPES) + 1  # a tensor of a dtype not in DTYPES, or anything else
_INT = len(DTYPES) + 2  # the kind code of a Python int (a bool is another type)


def _kind_code(value) -> int:
    if isinstance(value, torch.Tensor):
        return DTYPES.index(value.dtype) if value.dtype in DTYPES else _OTHER
    if isinstance(value, bool):
        return _OTHER
    if isinstance(value, int):
        return _INT
    if isinstance(value, float):
        return _NUMBER
    return _OTHER


def same_kind(got_code: int, expected_code: int) -> bool:
    """Whether a returned kind meets the promised one: the same, or an int where a float is promised."""
    return got_code == expected_code or (got_code == _INT and expected_code == _NUMBER)


def _kind_hint(got: torch.Tensor, expected: torch.Tensor) -> str:
    """How to turn what the student returned into what the exercise asks for, where one call does it."""
    got_code, expected_code = int(got.item()), int(expected.item())
    if expected_code == _INT and got_code == _NUMBER:
        return " (`//` divides whole numbers into a whole number; `int(...)` converts one that is whole)"
    if expected_code in (_NUMBER, _INT) and got_code < len(DTYPES):
        return " (`.item()` turns a one-element tensor into a number)"
    if got_code < len(DTYPES) and expected_code < len(DTYPES):
        wanted = str(DTYPES[expected_code])
        if DTYPES[got_code].is_floating_point and DTYPES[expected_code].is_floating_point:
            return (
                " (compute in the inputs' dtype: a constant made with `torch.tensor(...)` or a `.float()` on"
                f" the way changes it; `.to({wanted})` at the end also works)"
            )
        return f" (`.to({wanted})` converts it)"
    return ""


def _kind_name(code: int) -> str:
    """A kind code in words: "a float32 tensor", "a Python number"."""
    if code == _NUMBER:
        return "a Python number"
    if code == _INT:
        return "a Python int"
    if code == _OTHER:
        return "another type"
    name = str(DTYPES[code]).replace("torch.", "")
    article = "an" if name.startswith("int") else "a"
    return f"{article} {name} tensor"


def _shape_hint(got: torch.Tensor, expected: torch.Tensor) -> str:
    """What a wrong shape likely is, where its sizes say so: an axis of size 1 too many or too few, a reduction too
    many (one number where one per entry is asked) or one missing."""
    squeezed = [n for n in got.shape if n != 1] == [n for n in expected.shape if n != 1]
    if got.numel() == expected.numel() and squeezed:
        return (
            " (the same entries, with an axis of size 1 added or dropped: a keepdim=True, [..., None] or .squeeze()?)"
        )
    if got.dim() == 0:
        return " (one number where the answer keeps an axis: a .mean() or .sum() too many?)"
    if expected.dim() == 0:
        return " (several numbers where the answer is one: a final .mean() or .sum() missing?)"
    return ""


def not_a_value(name: str, key: str, value) -> str:
    """What to say of an output that is neither a tensor nor a number. A tuple's item that is a dict (or a list)
    is most often a loss returned with its parts, ``return loss, {"policy": ...}``, where the loss alone is asked."""
    kind = type(value).__name__
    if key.startswith("output[") and isinstance(value, (dict, list)):
        return (
            f"{name}: you returned a tuple whose {key} is a {kind}; return the answer alone (a loss and a {kind} of "
            f"its parts is two answers): the exercise asks for tensors or numbers only"
        )
    return f"{name}: {key} should be a tensor or a number, got {kind}"
