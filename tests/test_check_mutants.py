"""The mutation operators of ``benchmarks/check_mutants.py``, on small functions whose mutants are known by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import _mutate  # noqa: E402
import check_mutants  # noqa: E402


def row_sum_of_difference(x, y) -> torch.Tensor:
    """Sum over the last axis of x - y (this docstring is never mutated: 1 + 1)."""
    return (x - y).sum(dim=-1)


def running_total(rewards, gamma=1.0) -> torch.Tensor:
    total = torch.zeros(rewards.shape[:-1], dtype=rewards.dtype)
    for t in reversed(range(rewards.shape[-1])):
        total = rewards[..., t] + gamma * total
    return total.detach()


def test_each_operator_makes_the_change_it_names():
    found = {m.description: m.operator for m in _mutate.mutants(row_sum_of_difference)}
    assert found["`x - y` -> `x + y`"] == "binop"
    assert found["`(x - y).sum(dim=-1)` -> `(x - y).mean(dim=-1)`"] == "reduction"
    assert found["`-1` -> `1`"] == "negate"
    assert found["`1` -> `2`"] == "constant" and found["`1` -> `0`"] == "constant"
    assert "detach" in found.values()
    assert not [d for d in found if "this docstring" in d]


def test_every_mutant_builds_and_computes_something_else():
    x, y = torch.randn(2, 3, 4, dtype=torch.float64), torch.randn(2, 3, 4, dtype=torch.float64)  # 3-D: dim=1 is not -1
    expected = row_sum_of_difference(x, y)
    for mutant in _mutate.mutants(row_sum_of_difference):
        if mutant.operator == "detach":
            continue  # the same values, no gradient: a check that asks for gradients tells it apart
        fn = _mutate.build(mutant, row_sum_of_difference)
        assert fn.__code__.co_filename.startswith("<mutant ")
        try:
            got = fn(x, y)
        except Exception:  # noqa: BLE001 - a mutant that crashes is a different function too
            continue
        assert got.shape != expected.shape or not torch.allclose(got, expected), mutant.description


def test_order_initial_value_and_detach_operators():
    found = {m.description for m in _mutate.mutants(running_total)}
    assert "`reversed(range(rewards.shape[-1]))` -> `range(rewards.shape[-1])`" in found
    assert any("torch.ones(" in d for d in found)
    assert "`total.detach()` -> `total`" in found


def test_keys_are_unique_and_stable():
    first = [m.key for m in _mutate.mutants(running_total)]
    assert len(first) == len(set(first))
    assert first == [m.key for m in _mutate.mutants(running_total)]
    assert all(key.startswith("running_total:") for key in first)


def _third(x):  # three calls from thin: past the depth that is followed
    return x + 3.0


def _second(x):
    return _third(x) * 2.0


def _first(x):
    return _second(x) - 1.0


def _require_finite(x):  # argument validation: never mutated
    if not torch.isfinite(x).all():
        raise ValueError("x: expected finite values")


def thin(x) -> torch.Tensor:
    """A thin wrapper: fewer than HELPER_THRESHOLD mutants of its own, its logic in _first and _second."""
    _require_finite(x)
    return _first(x).sum(dim=-1)


def test_a_thin_reference_has_its_helpers_mutated_two_calls_deep():
    found = _mutate.mutants(thin)
    keys = [m.key for m in found]
    assert len([m for m in found if not m.helper]) < _mutate.HELPER_THRESHOLD
    assert [helper.__name__ for helper in _mutate.helpers(thin)] == ["_first", "_second"]
    assert any(key.startswith("thin>_first:") for key in keys) and any(key.startswith("thin>_second:") for key in keys)
    assert not [key for key in keys if "_third" in key or "_require" in key]
    assert len(keys) == len(set(keys))
    x = torch.tensor([[1.0, 2.0]])
    # _second's `* 2.0` made `/ 2.0`, two calls deep: thin reaches it through _first, recompiled beside it
    divided = next(m for m in found if m.key.startswith("thin>_second:") and m.operator == "binop")
    assert divided.key == "thin>_second:1:11:binop:1"
    assert _mutate.build(divided, thin)(x).item() == ((x + 3.0) / 2.0 - 1.0).sum().item()
    assert thin(x).item() == ((x + 3.0) * 2.0 - 1.0).sum().item()  # the module's own functions are untouched


def test_a_reference_with_enough_mutants_of_its_own_keeps_its_helpers():
    def wide(x) -> torch.Tensor:
        return (_first(x) * 2.0 + 1.0).sum(dim=-1) - x.mean(dim=-1)

    assert len(_mutate.mutants(wide)) >= _mutate.HELPER_THRESHOLD
    assert not [m for m in _mutate.mutants(wide) if m.helper]


def test_equivalent_keys_may_be_patterns(monkeypatch):
    monkeypatch.setattr(check_mutants, "EQUIVALENT", {"f:3:*:detach:*": "a target, never differentiated"})
    assert check_mutants.equivalent("f:3:4:detach:2") == "a target, never differentiated"
    assert check_mutants.equivalent("f:3:4:binop:1") is None
    assert check_mutants.listed("f:3:4:detach:2") == "f:3:*:detach:*"


def test_every_equivalent_mutant_is_counted_with_the_entry_that_lists_it(monkeypatch):
    """Two survivors listed by one pattern: two equivalent mutants, one reason; an unlisted one survives."""

    def reference(x) -> torch.Tensor:
        return (x * 2.0).sum(dim=-1)

    def check(fn):  # a check that only looks at the shape: every mutant that runs passes it
        assert fn(torch.ones(2, 3)).shape == (2,)

    monkeypatch.setattr(check_mutants, "EQUIVALENT", {"reference:1:*:constant:*": "a test's reason"})
    counts, survivors = check_mutants.score("reference", reference, check, None)
    # 2.0 -> 3.0 and 2.0 -> 1.0 pass (listed); dim=-1 -> dim=-2 or dim=0 changes the shape (rejected)
    assert counts["equivalent"] == 2 and counts["reasons"] == 1
    assert counts["survived"] == len(survivors) and all(":constant:" not in m.key for m, _ in survivors)


def test_a_mutant_that_never_ends_is_a_timeout(monkeypatch):
    monkeypatch.setattr(check_mutants, "TIME_LIMIT", 1)

    def check(fn):
        while True:
            pass

    assert check_mutants.judge(check, None) == ("timeout", "ran past 1 s")


def test_a_check_that_rejects_with_a_named_mistake_is_named():
    def check(fn):
        raise AssertionError("f: the reward-to-go counts the last reward twice\n  seen on the case: ...")

    def generic(fn):
        raise AssertionError("f: the output differs from the reference\n  on the case: ...")

    def string_table(fn):  # the math and addition tables' line when no catalogued mistake explains the replies
        raise AssertionError("f('The answer is 14', '14') returned 0.0, expected 1.0\n  on the case: ...")

    assert check_mutants.judge(check, None)[0] == "named"
    assert check_mutants.judge(generic, None)[0] == "generic"
    assert check_mutants.judge(string_table, None)[0] == "generic"


def as_config(lr):
    return {"learning_rate": lr * 1.0}


def test_no_detach_is_added_where_no_tensor_is_returned():
    assert "detach" not in {m.operator for m in _mutate.mutants(as_config)}
    assert "detach" in {m.operator for m in _mutate.mutants(running_total)}


def test_every_listed_equivalent_mutant_still_exists():
    """A listed key that matches no mutant of today's references is stale (its reference changed): it would list
    whatever mutant later lands at that place, unread. Making the mutants runs no check, so this is quick."""
    library = check_mutants.references()
    keys = []
    for name in check_mutants.exercises():
        if name in library:
            keys += [m.key for m in _mutate.mutants(library[name])]
    stale = [
        pattern for pattern in check_mutants.EQUIVALENT if not any(check_mutants.listed(k) == pattern for k in keys)
    ]
    assert not stale, f"entries of benchmarks/_equivalent_mutants.py that match no mutant: {stale}"
