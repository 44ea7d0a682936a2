"""The shared check machinery: what it accepts, what it rejects, and what it says."""

import contextlib
import io
import math

import pytest
import torch

from course_lib.checks import Case, Mistake, check_against_reference


def reference(x, y):
    return (x * y.detach()).mean()


CASES = [
    Case("three numbers", {"x": torch.tensor([1.0, 2.0, 3.0]), "y": torch.tensor([0.5, -1.0, 2.0])}, grad=("x", "y"))
]


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


# --- what a case ran in: integer inputs are not labelled float64 ---------------------------------------------


def _count(tokens):
    return (tokens > 0).sum(-1).to(torch.float64)


INTEGER_CASES = [Case("three token ids", {"tokens": torch.tensor([[0, 2, 3], [1, 0, 0]])})]


def test_integer_inputs_are_labelled_by_their_dtype():
    with pytest.raises(AssertionError) as rejected:
        check_against_reference(lambda tokens: _count(tokens) + 1, _count, INTEGER_CASES, name="count")
    assert "(int64)" in str(rejected.value) and "float64" not in str(rejected.value)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        check_against_reference(_count, _count, INTEGER_CASES, name="count")
    assert "(int64)" in out.getvalue() and "float" not in out.getvalue()


def test_float_inputs_are_labelled_without_the_torch_prefix():
    with pytest.raises(AssertionError) as rejected:
        _run(lambda x, y: (x * y.detach()).sum())
    assert "(float64)" in str(rejected.value) and "torch.float64" not in str(rejected.value)


# --- mistakes that agree on the failing case ------------------------------------------------------------------

TWO_CASES = CASES + [
    Case("two numbers", {"x": torch.tensor([1.0, -1.0]), "y": torch.tensor([2.0, 2.0])}, grad=("x", "y"))
]


def test_the_other_cases_tell_apart_mistakes_that_agree_on_one():
    # On "three numbers" both mistakes give the same loss; on "two numbers" only the sum of squares does.
    double = Mistake("you doubled it", lambda x, y: 2 * (x * y.detach()).mean())
    # Scaled by 2 n / 3: twice the mean for the three numbers, 4/3 of it for the two.
    scaled = Mistake("you scaled it by the length", lambda x, y: (x * y.detach()).mean() * x.numel() * 2 / 3)
    with pytest.raises(AssertionError) as rejected:
        check_against_reference(
            lambda x, y: 2 * (x * y.detach()).mean(), reference, TWO_CASES, name="f", mistakes=[scaled, double]
        )
    assert str(rejected.value).startswith("f: you doubled it")


def test_mistakes_no_case_tells_apart_are_named_together():
    twice = Mistake("you doubled it", lambda x, y: 2 * (x * y.detach()).mean())
    added = Mistake("you added it to itself", lambda x, y: (x * y.detach()).mean() + (x * y.detach()).mean())
    with pytest.raises(AssertionError) as rejected:
        check_against_reference(
            lambda x, y: 2 * (x * y.detach()).mean(), reference, TWO_CASES, name="f", mistakes=[twice, added]
        )
    message = str(rejected.value)
    assert message.startswith("f: you doubled it") and "or, giving the same numbers on every case: you added" in message


def test_a_single_value_where_a_tuple_is_due_is_named():
    def pair(x, y):
        return x * y.detach(), x + y.detach()

    with pytest.raises(AssertionError, match="should return a tuple of 2"):
        check_against_reference(lambda x, y: x * y.detach(), pair, [Case("three", CASES[0].kwargs)], name="f")


def test_a_shape_mismatch_crash_gets_a_hint():
    with pytest.raises(AssertionError, match="keepdim=True"):
        _run(lambda x, y: (x[:2] * y.detach()).mean())


# --- demo cells: your() and the record of passed checks -------------------------------------------------------


def test_your_says_whether_the_check_passed_and_refuses_when_asked():
    from course_lib.checks import CheckNotPassed, passed, your

    def mine(x, y):
        return (x * y.detach()).mean()

    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert your(mine) is mine
    assert "has not passed yet" in out.getvalue()
    with pytest.raises(CheckNotPassed, match="the check above has not passed yet"):
        your(mine, needs_pass=True)
    _run(mine)
    assert passed(mine)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert your(mine, needs_pass=True) is mine
    assert out.getvalue().startswith("Running your mine (its check passed)")


def test_a_failed_check_forgets_an_earlier_pass():
    from course_lib.checks import passed

    class Mine:  # a callable whose answer can change after it passed
        factor = 1.0

        def __call__(self, x, y):
            return self.factor * (x * y.detach()).mean()

    mine = Mine()
    _run(mine)
    assert passed(mine)
    mine.factor = 2.0
    with pytest.raises(AssertionError):
        _run(mine)
    assert not passed(mine)


def test_a_pass_survives_a_fresh_import_of_course_lib():
    """Grading imports course_lib afresh at the top of every check cell: an earlier cell's pass must still count."""
    import importlib
    import sys

    def mine(x, y):
        return (x * y.detach()).mean()

    _run(mine)
    saved = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "course_lib"}
    try:
        for name in saved:
            del sys.modules[name]
        fresh = importlib.import_module("course_lib.checks")
        assert fresh.passed(mine)
    finally:
        sys.modules.update(saved)


# --- a difference no catalogue names is still described: its pattern, in words ---------------------------------

_REF = torch.tensor([[0.5, -1.0, 2.0, 0.25], [1.5, 0.75, -0.5, 3.0]], dtype=torch.float64)


@pytest.mark.parametrize(
    "got, words",
    [
        (-_REF, "by its sign"),
        (0.5 * _REF, "constant factor 0.5"),
        (_REF + 0.3, "constant +0.3"),
        (torch.cat([_REF[:, 1:], _REF[:, :1]], dim=1), "shifted one step earlier"),
        (torch.cat([_REF[:, -1:], _REF[:, :-1]], dim=1), "shifted one step later"),
        (torch.cat([_REF[:, :-1], _REF[:, -1:] + 1.0], dim=1), "only in the last position"),
        (torch.cat([_REF[:, :1] - 1.0, _REF[:, 1:]], dim=1), "only in the first position"),
        (torch.where(_REF > 1, _REF * 3, _REF), "in 3 of 8 entries"),
    ],
)
def test_an_unnamed_difference_is_described_by_its_pattern(got, words):
    from course_lib.checks.compare import _pattern

    assert words in _pattern(_REF, got, rtol=1e-6, atol=1e-8)


def test_a_mask_wrong_in_one_place_is_not_called_a_shift():
    """A 0/1 mask that marks every non-EOS token (1 after the EOS too) lines up with a shift of the right mask;
    the position the shift would vacate holds a 1, which no off-by-one leaves there, so no shift is claimed.
    The mask that drops its EOS differs in one entry of its row: that lines up with a shift too, and with other
    mistakes (issue 44: a mask one entry longer is no shift), so a 0/1 shift needs a row moved in two entries."""
    from course_lib.checks.compare import _pattern

    expected = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])
    every_non_eos = torch.tensor([[1.0, 1.0, 1.0, 0.0, 1.0]])
    eos_dropped = torch.tensor([[1.0, 1.0, 1.0, 0.0, 0.0]])
    assert "shifted" not in _pattern(expected, every_non_eos, rtol=1e-6, atol=1e-8)
    assert "shifted" not in _pattern(expected, eos_dropped, rtol=1e-6, atol=1e-8)
    window = torch.tensor([[0.0, 1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0, 0.0]])
    assert "shifted one step earlier" in _pattern(window, window.roll(-1, -1), rtol=1e-6, atol=1e-8)


def test_the_pattern_reaches_the_message():
    from course_lib.checks.compare import _compare, _Outcome

    message = _compare(_Outcome(values={"output": _REF}), _Outcome(values={"output": 2 * _REF}), 1e-6, 1e-8)
    assert message.startswith("output differs from the reference by a constant factor 2 ")


def test_a_watch_left_on_by_a_check_that_raised_is_removed_at_exit(tmp_path):
    """The grader's profile hook, armed by a check that raised (so never finished), must not outlive the module
    globals it calls: Python would print "Exception ignored ... 'NoneType' object is not callable" at exit."""
    import subprocess
    import sys

    script = f"from course_lib.checks import recording\nrecording.start({str(tmp_path)!r}, 0)\nimport course_lib.gae\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr


# --- naming with evidence (issue 44): one case is not enough -------------------------------------------------


EVIDENCE_CASES = TWO_CASES + [Case("one number", {"x": torch.tensor([2.0]), "y": torch.tensor([3.0])}, grad=("x", "y"))]


def test_a_mistake_that_matches_one_case_but_not_another_is_not_named():
    # "doubled" explains the first case (x * 2 there), but on "one number" the student is right and
    # "doubled" is not: the student did something else, so the mistake must not be named.
    doubled = Mistake("you doubled it", lambda x, y: 2 * (x * y.detach()).mean())

    def first_case_only(x, y):
        right = (x * y.detach()).mean()
        return 2 * right if x.numel() == 3 else right

    with pytest.raises(AssertionError) as rejected:
        check_against_reference(first_case_only, reference, EVIDENCE_CASES, name="f", mistakes=[doubled])
    message = str(rejected.value)
    assert "doubled" not in message
    # The generic message instead: the difference, the case, and its inputs to replay it by hand.
    assert "differs from the reference" in message and "inputs: x=[1, 2, 3] (shape (3,))" in message


def test_a_mistake_that_matches_every_case_is_still_named():
    doubled = Mistake("you doubled it", lambda x, y: 2 * (x * y.detach()).mean())
    with pytest.raises(AssertionError, match="you doubled it"):
        check_against_reference(doubled.fn, reference, EVIDENCE_CASES, name="f", mistakes=[doubled])


def test_a_partial_match_is_named_only_when_it_holds_on_every_case():
    # y attached everywhere; the value summed on the first case, shifted by 1 on the others: "summed"
    # explains the value of the first case only.
    summed = Mistake("you summed; take the mean", lambda x, y: (x * y.detach()).sum())

    def attached_and_summed_once(x, y):
        if x.numel() == 3:
            return (x * y).sum()
        return (x * y).mean() + 1.0

    with pytest.raises(AssertionError) as rejected:
        check_against_reference(attached_and_summed_once, reference, EVIDENCE_CASES, name="f", mistakes=[summed])
    assert "you summed" not in str(rejected.value)


# --- errors that teach (issue 44): crashes become messages that name the case, hints match today's torch ------


def _message(fn) -> str:
    with pytest.raises(AssertionError) as rejected:
        _run(fn)
    return str(rejected.value)


def _two_axes(x):
    batch, steps = x.shape  # written for (B, T): a 1-D x has one axis to unpack
    return x.sum() / (batch * steps)


def _refuses_negatives(x):
    if (x < 0).any():  # a validation the exercise never asked for
        raise ValueError("x must not be negative")
    return x.mean()


@pytest.mark.parametrize(
    "wrong, hint",
    [
        # Each crash is torch's own, raised by the installed torch: a reworded error fails here first.
        (lambda x, y: (x * ~y.detach()).mean(), "~ negates bool tensors only"),
        (lambda x, y: (x * (y.detach() ^ y.detach())).mean(), "~ negates bool tensors only"),
        (lambda x, y: (x * (1 - (y.detach() > 0))).mean(), "convert it first"),
        (lambda x, y: (x * ((y.detach() > 0) - (x.detach() > 0))).mean(), "convert it first"),
        (lambda x, y: (x[:2] * y.detach()).mean(), "keepdim=True"),
        (lambda x, y: (x[: len(x) - 1] * y.detach()).mean(), "len(x)"),
        (lambda x, y: (x * y.detach()[x.shape[-1]]).mean(), "an index past the end of an axis"),
        (lambda x, y: (x * y.detach()).mean() * (x[x > 100]).nonzero()[0, 0], "a selection such as nonzero()"),
        (lambda x, y: (x * y.detach()).mean() * (1 / (x.shape[-1] - 3)), "a Python division by a count"),
        (lambda x, y: (x * y.detach()).mean() if not (y > 0) else x.sum(), "mask.any() or mask.all()"),
        (lambda x, y: (x * torch.multinomial(y.detach().abs() + 1, 5)).mean(), "replacement=True"),
        (lambda x, y: torch.where((y > 0).long(), x, 0 * x).mean(), "mask.bool()"),
        (lambda x, y: torch.cat([x, y.detach()[None]]).mean(), "x.unsqueeze(-1)"),
        (lambda x, y: torch.cat([x[:, None], y.detach()[:2, None]], dim=-1).mean(), "unsqueeze(0) a first"),
        (lambda x, y: (x * y.detach()).mean() * x.shape[-1].double(), "torch.as_tensor(x)"),
        (lambda x, y: torch.einsum("bt,t->b", x, y.detach()).mean(), "'...t,t->...'"),
        (lambda x, y: _two_axes(x) * y.detach().mean(), "x.shape[-1]"),
        (lambda x, y: x.mean() * _refuses_negatives(y.detach()), "your own code refused this case"),
        (lambda x, y: x.mean() * float(math.comb(5000, 200)), "a binomial coefficient, math.comb"),
    ],
)
def test_every_crash_hint_matches_todays_torch(wrong, hint):
    message = _message(wrong)
    assert hint in message and "on the case: three numbers" in message


def test_a_crash_in_the_checks_own_backward_names_the_case():
    # Integer division: the student's function returns, and the check's backward (not the student's code) raises.
    message = _message(lambda x, y: (x // 1 * y.detach()).mean())
    assert "could not be checked" in message and "on the case: three numbers" in message
    assert "// and round() have no gradient" in message


def test_not_implemented_inside_torch_is_a_crash_not_an_untouched_stub():
    message = _message(lambda x, y: (x ^ y).mean())
    assert "NotImplementedError inside torch" in message and "on the case: three numbers" in message


# --- an edge promise told last (Case.last) ------------------------------------------------------------------------


def _masked_mean(x, mask):
    return torch.where(mask, x, torch.zeros_like(x)).sum() / mask.sum().clamp(min=1)


EDGE_CASES = [
    Case("a mask with padding", {"x": torch.tensor([1.0, 2.0, 4.0]), "mask": torch.tensor([True, False, True])}),
    Case("no padding", {"x": torch.tensor([3.0, -1.0]), "mask": torch.tensor([True, True])}),
    Case("no valid entry: 0", {"x": torch.tensor([5.0, 6.0]), "mask": torch.tensor([False, False])}, last=True),
]
UNCLAMPED = Mistake("0 / 0 on no valid entry", lambda x, mask: torch.where(mask, x, 0.0).sum() / mask.sum())
DOUBLED = Mistake("you doubled it", lambda x, mask: 2 * _masked_mean(x, mask))


def test_a_mistake_made_elsewhere_is_named_though_the_edge_is_wrong_too():
    """Doubled and unclamped: the edge case is no evidence against 'doubled' (told first); without ``last`` it is,
    and the student would get the plain difference."""

    def doubled_and_unclamped(x, mask):
        return 2 * torch.where(mask, x, 0.0).sum() / mask.sum()

    mistakes = [UNCLAMPED, DOUBLED]
    with pytest.raises(AssertionError, match="you doubled it"):
        check_against_reference(doubled_and_unclamped, _masked_mean, EDGE_CASES, name="f", mistakes=mistakes)
    plain = [Case(c.description, c.kwargs) for c in EDGE_CASES]
    with pytest.raises(AssertionError) as rejected:
        check_against_reference(doubled_and_unclamped, _masked_mean, plain, name="f", mistakes=mistakes)
    assert "doubled" not in str(rejected.value).splitlines()[0]


def test_the_edge_is_told_once_every_other_case_is_right():
    with pytest.raises(AssertionError, match="0 / 0 on no valid entry") as rejected:
        check_against_reference(UNCLAMPED.fn, _masked_mean, EDGE_CASES, name="f", mistakes=[UNCLAMPED, DOUBLED])
    assert "no valid entry: 0" in str(rejected.value)
