"""The shared check machinery: what it accepts, what it rejects, and what it says."""

import contextlib
import io

import pytest
import torch

from course_lib.checks import Case, Mistake, check_against_reference


def reference(x, y):
    return (x * y.detach()).mean()


CASES = [Case("three numbers", {"x": torch.tensor([1.0, 2.0, 3.0]), "y": torch.tensor([0.5, -1.0, 2.0])}, grad=("x", "y"))]


def _run(fn, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        result = check_against_reference(fn, reference, CASES, name="f", **kwargs)
    return result, out.getvalue()


def test_accepts_reference_and_prints_one_line():
    result, printed = _run(reference)
    assert result is True
    assert printed.count("\n") == 1 and printed.startswith("\u2714 f:")


def test_names_a_known_mistake():
    def attached(x, y):
        return (x * y).mean()

    with pytest.raises(AssertionError, match="y must be a constant"):
        _run(attached, mistakes=[Mistake("y must be a constant", attached)])


def test_gradient_of_a_constant_is_caught_without_a_catalogue():
    with pytest.raises(AssertionError, match="gradient of"):
        _run(lambda x, y: (x * y).mean())


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda x, y: None, "forget the `return`"),
        (lambda x, y: (x * y).sum(), "differs from the reference"),
        (lambda x, y: (x * y.detach()).mean().detach(), "carries no gradient"),
        (lambda x, y: (x * y.detach().mul_(2.0)).mean(), "in place"),
        (lambda x, y: 1 / 0, "ZeroDivisionError"),
        (lambda x, y: x * y.detach(), "shape"),
        (lambda x, y: "a string", "tensor or a number"),
    ],
)
def test_rejects_with_a_specific_message(wrong, message):
    with pytest.raises(AssertionError, match=message):
        _run(wrong)


def test_not_implemented_passes_through():
    def stub(x, y):
        raise NotImplementedError("Exercise f")

    with pytest.raises(NotImplementedError):
        _run(stub)


def test_patching_torch_allclose_does_not_help(monkeypatch):
    monkeypatch.setattr(torch, "allclose", lambda *args, **kwargs: True)
    with pytest.raises(AssertionError, match="differs"):
        _run(lambda x, y: (x * y.detach()).sum())


def test_not_callable():
    with pytest.raises(AssertionError, match="expected a function"):
        _run(42)


def test_two_mistakes_at_once_names_the_one_behind_the_first_difference():
    # Wrong scale (sum, not mean) *and* y left attached: no catalogued mistake matches both,
    # but "sum" explains the first difference (the value), so that is what the student hears.
    def summed(x, y):
        return (x * y.detach()).sum()

    def attached(x, y):
        return (x * y).mean()

    mistakes = [Mistake("you summed; take the mean", summed), Mistake("y must be a constant", attached)]
    with pytest.raises(AssertionError, match="(?s)you summed; take the mean.*there may be more to fix"):
        _run(lambda x, y: (x * y).sum(), mistakes=mistakes)
    # Fixed the sum, y still attached: now the exact match names the second mistake.
    with pytest.raises(AssertionError, match="y must be a constant"):
        _run(attached, mistakes=mistakes)


def test_a_partial_match_must_reproduce_the_wrong_component():
    # A mistake that agrees with the reference on the differing component explains nothing.
    def harmless(x, y):
        return (x * y.detach()).mean() + 0.0 * x.sum()

    with pytest.raises(AssertionError, match="differs from the reference"):
        _run(lambda x, y: (x * y.detach()).sum(), mistakes=[Mistake("irrelevant", harmless)])
