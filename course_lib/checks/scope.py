"""Where a wrong output is wrong: what the wrong cases share and the right ones lack.

A student whose function is right in three modes and wrong in the fourth, or right until a mask holds
padding, or right unless ``clip_eps`` is None, has one branch to look at. :func:`scope` reads each case's
arguments for such features (an argument's value, None or given, a mask with padding, a 0/1 tensor with a 1,
a row of equal entries, NaN or inf among the inputs, a last axis of length 1) and says the one that the wrong
cases share, when the right cases show it is not shared by everything: every wrong case has it, and a case
without it is right.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

from course_lib.checks.counts import is_mask

Feature = tuple[str, Callable[[Mapping[str, Any]], bool]]


def scope(evidence) -> str | None:
    """The words for the most specific feature every wrong case has, or None.

    Exact first (the wrong cases are exactly the cases with it), then pairs of features that are exact
    together, then a feature the wrong cases all have while some right cases have it too. One wrong case alone
    differs from the others in a great many ways: for it, only one feature of the kind a branch tests (None or
    given, a mode, a mask with padding), never a number or a pair."""
    cases = [seen.kwargs for seen in evidence]
    wrong = frozenset(i for i, seen in enumerate(evidence) if seen.wrong)
    if not wrong or len(wrong) == len(cases):
        return None
    holders = {}
    for words, has in _features(cases):
        holders[words] = frozenset(i for i, kwargs in enumerate(cases) if _safely(has, kwargs))
    if len(wrong) == 1:  # one case differs from the others in many ways: only a feature of the kind a branch tests
        holders = {words: held for words, held in holders.items() if not _numeric(words)}
    exact = sorted((words for words, held in holders.items() if held == wrong), key=len)
    if exact:
        return _exactly(exact, len(wrong), len(cases))
    if len(wrong) < 2:
        return None
    values = _values_of_one_argument(cases, wrong)
    if values is not None:
        return _exactly([values], len(wrong), len(cases))
    names = sorted(holders)
    for first in names:
        for second in names:
            if first < second and holders[first] & holders[second] == wrong:
                return _exactly([f"{first} and {second}"], len(wrong), len(cases))
    # Two right cases without the feature at least: a feature nearly every case has (the default eos_id) says nothing.
    shared = [(len(held), words) for words, held in holders.items() if wrong < held and len(held) <= len(cases) - 2]
    if not shared:
        return None
    size, words = min(shared)
    return (
        f"every case where yours is wrong has {words} (wrong on {len(wrong)} of the {size} such cases), "
        "and every other case is right"
    )


def _values_of_one_argument(cases: list[Mapping[str, Any]], wrong: frozenset) -> str | None:
    """Words for "`key` one of these values", when the wrong cases are exactly those where one argument takes one of
    a few named values (``weights_dtype`` "fp16" or "fp64": a table that lacks two entries). Read before pairs of
    features: two features that happen to meet on the same cases explain less than one argument's values do."""
    keys = []
    for kwargs in cases:
        keys += [key for key in kwargs if key not in keys]
    for key in keys:
        values = [kwargs.get(key) for kwargs in cases]
        if not all(v is None or isinstance(v, str) for v in values):  # a mode or a dtype: numbers meet by chance
            continue
        wrong_values = {values[i] for i in wrong}
        right_values = {v for i, v in enumerate(values) if i not in wrong}
        named = all(isinstance(v, str) for v in wrong_values)
        if named and len(wrong_values) >= 2 and right_values and not wrong_values & right_values:
            shown = " or ".join(f"`{key}={v!r}`" for v in sorted(wrong_values, key=repr))
            return shown
    return None


def _numeric(words: str) -> bool:
    """A feature that is one argument's number (``n=3``): on one case alone, more likely a coincidence than a cause."""
    if "=" not in words or words.endswith("=None`"):
        return False
    value = words.split("=", 1)[1].rstrip("`")
    return not (value.startswith(("'", '"')) or value in ("True", "False"))


def _exactly(exact: list[str], wrong: int, total: int) -> str:
    """Every feature that marks exactly the wrong cases is said: one alone could hide the cause."""
    also = "".join(f" (the same cases as those with {words})" for words in exact[1:3])
    return f"it is wrong on every case with {exact[0]}{also} ({wrong} of {total} cases) and right on every other case"


def _safely(has, kwargs) -> bool:
    try:
        return bool(has(kwargs))
    except Exception:  # noqa: BLE001 - a feature that does not apply to this case's arguments
        return False


def _features(cases: list[Mapping[str, Any]]) -> list[Feature]:
    """Every feature of the arguments that some cases have and others lack."""
    found: list[Feature] = []
    keys = []
    for kwargs in cases:
        keys += [key for key in kwargs if key not in keys]
    for key in keys:
        values = [kwargs.get(key) for kwargs in cases]
        found += _value_features(key, values)
        tensors = [v for v in values if isinstance(v, torch.Tensor)]
        if tensors:
            found += _tensor_features(key)
            found += [_without(key, number) for number in keys if _whole_number(cases, number)]
    return [feature for feature in found if _varies(feature, cases)]


def _value_features(key: str, values: list) -> list[Feature]:
    found: list[Feature] = [
        (f"`{key}` None or left out", lambda kw, k=key: kw.get(k) is None),
        (f"`{key}` given", lambda kw, k=key: kw.get(k) is not None),
    ]
    plain = []
    for value in values:
        if isinstance(value, (bool, int, float, str)) and value not in plain:
            plain.append(value)
    for value in plain:
        found.append((f"`{key}={value!r}`", lambda kw, k=key, v=value: _same(kw.get(k), v)))
    return found


def _same(value, wanted) -> bool:
    return type(value) is type(wanted) and value == wanted


def _tensor_features(key: str) -> list[Feature]:
    def tensor(kwargs) -> torch.Tensor:
        value = kwargs[key]
        if not isinstance(value, torch.Tensor):
            raise TypeError(key)
        return value.detach()

    def padding(kwargs) -> bool:
        value = tensor(kwargs)
        return is_mask(key, value) and not bool(value.bool().all())

    def has_one(kwargs) -> bool:
        value = tensor(kwargs)
        binary = value.dtype == torch.bool or bool(((value == 0) | (value == 1)).all())
        return binary and not is_mask(key, value) and bool(value.bool().any())

    def equal_row(kwargs) -> bool:
        value = tensor(kwargs)
        if not value.is_floating_point() or value.dim() == 0 or value.shape[-1] < 2:
            return False
        return bool((value == value[..., :1]).all(-1).any())

    def not_finite(kwargs) -> bool:
        value = tensor(kwargs)
        return value.is_floating_point() and not bool(torch.isfinite(value).all())

    def one_long(kwargs) -> bool:
        value = tensor(kwargs)
        return value.dim() >= 1 and value.shape[-1] == 1

    return [
        (f"padding in `{key}` (a 0)", padding),
        (f"a 1 in `{key}`", has_one),
        (f"a row of equal entries in `{key}`", equal_row),
        (f"NaN or inf in `{key}`", not_finite),
        (f"a last axis of length 1 in `{key}`", one_long),
        (f"`{key}` as a bool tensor", lambda kw: tensor(kw).dtype == torch.bool),
    ]


def _whole_number(cases, key: str) -> bool:
    values = [kwargs.get(key) for kwargs in cases]
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def _without(key: str, number: str) -> Feature:
    """A row of an integer tensor (token ids) with no entry equal to an integer argument (eos_id): no EOS."""

    def has(kwargs) -> bool:
        ids = kwargs[key]
        if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.dim() == 0:
            return False
        return bool((ids != kwargs[number]).all(-1).any())

    return f"a row of `{key}` with no `{number}` in it", has


def _varies(feature: Feature, cases) -> bool:
    held = [_safely(feature[1], kwargs) for kwargs in cases]
    return any(held) and not all(held)
