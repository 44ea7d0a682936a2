"""The structural diagnoses (course_lib/checks/structure.py, scope.py): each said when it explains every wrong case,
and never when one wrong case breaks it.

Each row is a small exercise (a reference and its cases), a wrong answer that makes one structural mistake on every
case, and the words the first line must hold. Its near miss is the same answer with one wrong case spoiled a little
more (a pattern added): the relation no longer holds there, so the words must not be said.
"""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

from course_lib.checks import Case, Mistake, check_against_reference


def _tensor(*shape, seed=0, low=-2.0, high=2.0):
    g = torch.Generator().manual_seed(seed + 17 * len(shape) + sum(shape))
    return low + (high - low) * torch.rand(shape, generator=g, dtype=torch.float64)


def _mask(*shape, seed=0):
    g = torch.Generator().manual_seed(seed + 5)
    lengths = torch.randint(1, shape[-1] + 1, shape[:-1], generator=g)
    return torch.arange(shape[-1]) < lengths[..., None]


SHAPES = [(2, 3), (4, 5), (3,), (2, 2, 6), (3, 4)]


def _cases(*names, shapes=SHAPES, **extra):
    cases = []
    for number, shape in enumerate(shapes):
        kwargs = {name: _tensor(*shape, seed=number + 7 * i) for i, name in enumerate(names)}
        cases.append(Case(f"shape {shape}", {**kwargs, **extra}))
    return cases


def _first_line(student, reference, cases, **options) -> str:
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(AssertionError) as rejected:
        check_against_reference(student, reference, cases, name="f", **options)
    return str(rejected.value).splitlines()[0]


def _spoiled(student, target_shape):
    """The student, with one more error on the case whose first tensor has ``target_shape``."""

    def near_miss(*args, **kwargs):
        out = student(*args, **kwargs)
        first = next(v for v in [*args, *kwargs.values()] if isinstance(v, torch.Tensor))
        if tuple(first.shape) != tuple(target_shape):
            return out
        pattern = 0.37 * (1 + torch.arange(out.numel(), dtype=out.dtype)).reshape(out.shape) ** 1.5
        return out + pattern

    return near_miss


# --- the exercises --------------------------------------------------------------------------------------


def mean_last(x):
    return x.mean(-1)


def backward_cumsum(x):
    return x.flip(-1).cumsum(-1).flip(-1)


def centred(x):
    return x - x.mean(-1, keepdim=True)


def unit_rows(x):
    return x / x.norm(dim=-1, keepdim=True)


def masked(x, mask):
    return torch.where(mask, x, torch.zeros_like(x))


def product(a, b):
    return a * b


def row_sums(x):
    return x.sum(-1)


def picked_log_probs(logits, tokens):
    return torch.log_softmax(logits, -1).gather(-1, tokens[..., None]).squeeze(-1)


def shifted_time(x):
    return torch.cat([torch.zeros_like(x[..., :1]), backward_cumsum(x)[..., :-1]], -1)


def bootstrapped(x, dones):
    # a stand-in for a TD residual: the next entry is added where the step did not terminate
    following = torch.cat([x[..., 1:], torch.zeros_like(x[..., :1])], -1)
    return x + 0.9 * following * (1 - dones.to(x.dtype))


def _done_cases():
    cases = []
    for i, s in enumerate(SHAPES):
        g = torch.Generator().manual_seed(40 + i)
        dones = torch.rand(s, generator=g) < 0.4
        dones[..., 0] = True  # every case has a terminal step
        cases.append(Case(f"shape {s}", {"x": _tensor(*s, seed=i), "dones": dones}))
    return cases


def _mask_cases():
    return [Case(f"shape {s}", {"x": _tensor(*s, seed=i), "mask": _mask(*s, seed=i)}) for i, s in enumerate(SHAPES)]


def _logit_cases():
    cases = []
    for number, (T, V) in enumerate([(5, 4), (3, 6), (7, 3), (4, 4)]):
        g = torch.Generator().manual_seed(number)
        tokens = torch.randint(0, V, (T,), generator=g)
        cases.append(Case(f"T={T}, V={V}", {"logits": _tensor(T, V, seed=number), "tokens": tokens}))
    return cases


# (reference, cases, wrong answer, the words of its diagnosis)
ROWS = [
    (mean_last, _cases("x"), lambda x: x.sum(-1), "times `x.shape[-1]`"),
    (mean_last, _cases("x"), lambda x: 2.5 * x.mean(-1), "times 2.5"),
    (mean_last, _cases("x"), lambda x: -x.mean(-1), "sign flipped"),
    (mean_last, _cases("x"), lambda x: x.mean(-1) + 0.25, "plus +0.25"),
    (mean_last, _cases("x"), lambda x: x.sum(-1) / (x.shape[-1] - 1), "`x.shape[-1] - 1`"),
    (backward_cumsum, _cases("x"), lambda x: torch.cat([0 * x[..., :1], backward_cumsum(x)[..., 1:]], -1), "first"),
    (backward_cumsum, _cases("x"), lambda x: torch.cat([backward_cumsum(x)[..., :-1], x[..., -1:] * 3], -1), "last"),
    (backward_cumsum, _cases("x"), lambda x: backward_cumsum(x).flip(-1), "reversed along the last axis"),
    (shifted_time, _cases("x"), lambda x: backward_cumsum(x), "shifted one step earlier"),
    (masked, _mask_cases(), lambda x, mask: torch.where(mask, x, 2 * x), "only at padded positions"),
    (
        bootstrapped,
        _done_cases(),
        lambda x, dones: bootstrapped(x, dones) * (1 - dones.to(x.dtype)),
        "wrong only where `dones` is 1 (and 0 there)",
    ),
    (centred, _cases("x"), lambda x: x - x.mean(), "the same along the last axis within each row"),
    (unit_rows, _cases("x"), lambda x: x / x.norm(), "times a factor of its own"),
    (product, _cases("a", "b"), lambda a, b: a * b * b, "is the reference times `b`"),
    (row_sums, _cases("x"), lambda x: x.sum(-1).sum(-1), "summed over the last axis"),
    (row_sums, _cases("x"), lambda x: x, "keeps the last axis"),
    (
        picked_log_probs,
        _logit_cases(),
        lambda logits, tokens: torch.log_softmax(logits.gather(-1, tokens[..., None]).squeeze(-1), -1),
        "a log-softmax",
    ),
]


def _shape_of_a_wrong_case(reference, cases, student) -> tuple:
    """The first tensor's shape on the last case where the student is wrong (a case the near miss spoils)."""
    for case in reversed(cases):
        kwargs = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in case.kwargs.items()}
        got, want = student(**kwargs), reference(**kwargs)
        if got.shape != want.shape or not torch.allclose(got, want):
            return tuple(next(v for v in case.kwargs.values() if isinstance(v, torch.Tensor)).shape)
    raise AssertionError("the wrong answer is right everywhere")


@pytest.mark.parametrize("reference, cases, student, words", ROWS, ids=[row[3] for row in ROWS])
def test_a_structural_mistake_is_described(reference, cases, student, words):
    first = _first_line(student, reference, cases)
    assert words in first, first
    assert "differs from the reference" not in first


@pytest.mark.parametrize("reference, cases, student, words", ROWS, ids=[row[3] for row in ROWS])
def test_a_near_miss_is_not_described(reference, cases, student, words):
    near_miss = _spoiled(student, _shape_of_a_wrong_case(reference, cases, student))
    first = _first_line(near_miss, reference, cases)
    # The generic message may still describe its first case alone ("differs from the reference by one position").
    assert words not in first or "differs from the reference" in first, (
        f"said although a wrong case contradicts it: {first}"
    )


def test_a_count_is_named_when_it_changes_from_case_to_case():
    first = _first_line(lambda x: x.sum(-1), mean_last, _cases("x"))
    assert "(the factors" in first and "`x.shape[-1]`" in first


def test_no_gradient_and_a_gradient_too_many_are_described():
    cases = [Case(f"shape {s}", {"x": _tensor(*s), "y": _tensor(*s, seed=3)}, grad=("x", "y")) for s in SHAPES]

    def reference(x, y):
        return (x * y).sum()

    first = _first_line(lambda x, y: (x * y.detach()).sum(), reference, cases)
    assert "no gradient reaches `y`" in first

    def detached(x, y):
        return (x * y.detach()).sum()

    first = _first_line(reference, detached, cases)
    assert "`y` gets a gradient" in first


def test_scope_names_the_mode_the_wrong_cases_share_and_not_when_a_right_mode_is_wrong_too():
    def reference(x, mode):
        return x.mean(-1) if mode == "mean" else x.sum(-1)

    cases = [
        Case(f"{mode} {s}", {"x": _tensor(*s, seed=i), "mode": mode})
        for mode in ("mean", "sum")
        for i, s in enumerate(SHAPES)
    ]

    def wrong_in_sum(x, mode):
        return reference(x, mode) + (torch.sin(7 * x).sum(-1) if mode == "sum" else 0)

    assert "every case with `mode='sum'`" in _first_line(wrong_in_sum, reference, cases)

    def also_once_in_mean(x, mode):
        extra = 0.5 if mode == "mean" and x.shape == (4, 5) else 0
        return wrong_in_sum(x, mode) + extra

    assert "mode=" not in _first_line(also_once_in_mean, reference, cases)


def test_a_catalogued_mistake_is_named_before_any_structure():
    mistakes = [Mistake("you summed where the exercise averages", lambda x: x.sum(-1))]
    first = _first_line(lambda x: x.sum(-1), mean_last, _cases("x"), mistakes=mistakes)
    assert first.endswith("you summed where the exercise averages")


def test_a_crash_on_one_case_leaves_the_generic_message():
    def sum_then_crash(x):
        if x.dim() == 3:
            raise RuntimeError("boom")
        return x.sum(-1)

    first = _first_line(sum_then_crash, mean_last, _cases("x"))
    assert "differs from the reference" in first


def test_a_mask_compared_entry_by_entry():
    def up_to_first_eos(ids, eos_id):
        seen = torch.cumsum((ids == eos_id).long(), -1) - (ids == eos_id).long()
        return (seen == 0).float()

    cases = []
    for number, row in enumerate([[1, 3, 9, 4, 9], [9, 2, 2, 9], [5, 9, 9, 1, 2, 9]]):
        cases.append(Case(f"ids {number}", {"ids": torch.tensor([row]), "eos_id": 9}))
    words = "is `ids != eos_id`"
    assert words in _first_line(lambda ids, eos_id: (ids != eos_id).float(), up_to_first_eos, cases)

    def near_miss(ids, eos_id):
        out = (ids != eos_id).float()
        return 1 - out if ids.shape[-1] == 4 else out

    assert words not in _first_line(near_miss, up_to_first_eos, cases)


def test_the_right_numbers_in_the_wrong_places():
    def interleaved(x):
        return x.repeat_interleave(2, dim=-1)

    def tiled(x):
        return x.repeat(*([1] * (x.dim() - 1)), 2)

    assert "holds the reference's numbers, each of them, in another order" in _first_line(
        tiled, interleaved, _cases("x")
    )
    near_miss = _spoiled(tiled, _shape_of_a_wrong_case(interleaved, _cases("x"), tiled))
    assert "in another order" not in _first_line(near_miss, interleaved, _cases("x"))
    square = [Case(f"{n}", {"x": _tensor(n, n, seed=n)}) for n in (2, 3, 4)]
    assert "transposed" in _first_line(lambda x: 2 * x.T, lambda x: 2 * x, square)


def test_right_in_float64_and_wrong_in_float32_is_said():
    def normalised(x):
        centred = x - x.mean(-1, keepdim=True)
        equal = (x == x[..., :1]).all(-1, keepdim=True)
        return torch.where(equal, torch.zeros_like(x), centred / (x.std(-1, keepdim=True) + 1e-6))

    def no_guard(x):  # the mean of seven 0.7s rounds in float32: 0.056 where 0 is due
        return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-6)

    cases = [Case(f"row of {n} equal", {"x": torch.full((2, n), 0.7, dtype=torch.float64)}) for n in (3, 7, 10)]
    first = _first_line(no_guard, normalised, cases)
    assert "it is right on every case in float64 and wrong in float32" in first, first


def test_a_number_that_marks_one_wrong_case_alone_is_not_said():
    def reference(x, n):
        return x * n

    cases = [Case(f"n={n}", {"x": _tensor(2, 3, seed=n), "n": n}) for n in (1, 2, 3, 4)]

    def wrong_once(x, n):
        return x * n + (torch.sin(x) if x.flatten()[0] == cases[2].kwargs["x"].flatten()[0] else 0)

    assert "n=3" not in _first_line(wrong_once, reference, cases)


def test_an_input_returned_as_it_came_in():
    def returns(values, adv):
        return values + adv

    cases = _cases("values", "adv")
    words = "is the input `values` as it came in"
    assert words in _first_line(lambda values, adv: values.clone(), returns, cases)
    near_miss = _spoiled(
        lambda values, adv: values.clone(), _shape_of_a_wrong_case(returns, cases, lambda values, adv: values)
    )
    assert words not in _first_line(near_miss, returns, cases)


def test_whole_rows_of_a_mask_wrong():
    def until_first_nine(ids):
        return (torch.cumsum((ids == 9).long(), -1) - (ids == 9).long() == 0).float()

    rows = [[1, 9, 2, 3], [4, 5, 6, 9], [9, 1, 1, 1]]
    cases = [Case(f"rows {n}", {"ids": torch.tensor(rows[n:] + rows[:n])}) for n in range(3)]

    def last_row_flipped(ids):
        out = until_first_nine(ids)
        ends_with_it = (ids[:, -1] == 9)[:, None]  # a row that ends with its marker: all 0 where all 1 is due
        return torch.where(ends_with_it, torch.zeros_like(out), out)

    assert "whole rows of your output are wrong" in _first_line(last_row_flipped, until_first_nine, cases)


def test_a_feature_nearly_every_case_has_is_not_said():
    def reference(x, eos_id):
        return x * 2

    cases = [Case(f"{i}", {"x": _tensor(3, 4, seed=i), "eos_id": 12 if i else 3}) for i in range(6)]
    odd = {float(cases[i].kwargs["x"][0, 0]) for i in (1, 2)}

    def wrong_on_two(x, eos_id):
        return x * 2 + (torch.sin(5 * x) if float(x[0, 0]) in odd else 0)

    assert "eos_id=12" not in _first_line(wrong_on_two, reference, cases)


def test_a_failure_while_reading_the_evidence_leaves_the_plain_message(monkeypatch):
    import course_lib.checks.explain as explain

    def broken(*args, **kwargs):
        raise RuntimeError("the check's own bug")

    monkeypatch.setattr(explain, "describe", broken)
    first = _first_line(lambda x: x.sum(-1), mean_last, _cases("x"))
    assert "differs from the reference" in first


def test_wrong_entries_that_are_clip_bounds():
    def ratio_clipped(x, eps):
        return x.exp()

    def clipped(x, eps):
        return torch.clamp(x.exp(), 1 - eps, 1 + eps)

    cases = _cases("x", eps=0.2)
    words = "each entry is a bound itself (1 + eps, 1 - eps)"
    assert words in _first_line(clipped, ratio_clipped, cases)
    near_miss = _spoiled(clipped, _shape_of_a_wrong_case(ratio_clipped, cases, clipped))
    assert "a bound itself" not in _first_line(near_miss, ratio_clipped, cases)


# --- issue 44, class four: descriptions of what the student did not do ----------------------------------------


def _per_row_reward(prompt, response):
    """One number per row of a (B, T) batch: its last axis is the batch, not time."""
    inclusion = (prompt[..., :, None] == response[..., None, :]).any(-1).sum(-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(-1)
    return (inclusion + ordering).double()


def _isin_across_the_batch(prompt, response):
    """torch.isin looks for each prompt token in the whole batch's responses: wrong on some rows only."""
    inclusion = torch.isin(prompt, response).sum(-1)
    ordering = (response[..., :-1] <= response[..., 1:]).sum(-1)
    return (inclusion + ordering).double()


_REWARD_CASES = [
    Case(
        "three rows",
        {
            "prompt": torch.tensor([[1, 0, 2], [3, 2, 4], [1, 2, 0]]),
            "response": torch.tensor([[0, 1, 2], [4, 3, 2], [1, 1, 4]]),
        },
    ),
    Case(
        "two rows", {"prompt": torch.tensor([[5, 6, 7], [1, 2, 3]]), "response": torch.tensor([[5, 6, 7], [1, 2, 3]])}
    ),
]


def test_a_wrong_last_row_of_a_per_row_output_is_not_called_its_last_step():
    """One reward per row, the last row wrong: "the last position along the last axis" would name a step of time
    where there is only an example of the batch."""
    first = _first_line(_isin_across_the_batch, _per_row_reward, _REWARD_CASES, dtypes=(torch.float64,))
    assert "last position" not in first and "final step" not in first, first
    assert "shifted" not in first, first
    assert "in 1 of 3 entries" in first, first


def test_the_pattern_of_one_case_needs_two_wrong_rows_to_name_a_place():
    from course_lib.checks.compare import _pattern

    one_row = torch.tensor([5.0, 3.0, 4.0])
    assert "last position" not in _pattern(one_row, torch.tensor([5.0, 3.0, 5.0]), 1e-6, 1e-8)
    two_rows = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    last_wrong = two_rows + torch.tensor([0.0, 0.0, 1.0])
    assert "only in the last position" in _pattern(two_rows, last_wrong, 1e-6, 1e-8)
    one_row_last_wrong = two_rows.clone()
    one_row_last_wrong[1, 2] += 1.0
    assert "last position" not in _pattern(two_rows, one_row_last_wrong, 1e-6, 1e-8)


def test_a_mask_one_entry_longer_is_not_called_a_shift():
    """The mask that runs on past its EOS to the row's end differs from the reference in its last entry only; that
    lines up with a shift of the reference, and is not one. A mask whose rows each move two entries is."""
    from course_lib.checks.compare import _pattern

    expected = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0, 0.0]])
    runs_on = torch.ones(2, 5)
    assert "shifted" not in _pattern(expected, runs_on, 1e-6, 1e-8)
    window = torch.tensor([[0.0, 1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0, 0.0]])
    moved = torch.tensor([[0.0, 0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0, 1.0]])
    assert "shifted one step later" in _pattern(window, moved, 1e-6, 1e-8)

    def first_eos(ids, eos_id):
        is_eos = (ids == eos_id).long()
        return ((torch.cumsum(is_eos, -1) - is_eos) == 0).double()

    def inclusive_count(ids, eos_id):
        return (torch.cumsum((ids == eos_id).long(), -1) <= 1).double()

    cases = [
        Case("EOS then PAD", {"ids": torch.tensor([[1, 3, 2, 12, 13]]), "eos_id": 12}),
        Case("EOS then PAD, again", {"ids": torch.tensor([[4, 12, 13]]), "eos_id": 12}),
        Case("no EOS", {"ids": torch.tensor([[1, 2, 3]]), "eos_id": 12}),
    ]
    first = _first_line(inclusive_count, first_eos, cases, dtypes=(torch.float64,))
    assert "shifted" not in first, first  # wrong at the last entry on two cases: that much may be said


def test_a_category_code_is_not_described_by_arithmetic():
    """Labels as numbers (direct=0, scratchpad=1, filler=2, malformed=3): a "factor 1/3" between two of them is an
    accident of the numbering. Declared categorical, the output is described by where it is wrong only."""
    labels = ["direct", "scratchpad", "filler", "malformed"]

    def classify(text, n_digits=3):
        return "scratchpad" if text.startswith("[") and text.count(",") == n_digits - 1 else "malformed"

    def two_digit_only(text, n_digits=3):
        return "scratchpad" if text.startswith("[") else "malformed"

    def as_number(label):
        return {"style": float(labels.index(label))}

    cases = [Case(f"{text} {n}", {"text": text, "n_digits": n}) for text in ("[1,2,3]", "[1,2]", "x") for n in (2, 3)]
    plain = _first_line(two_digit_only, classify, cases, outputs=as_number, dtypes=(torch.float64,))
    assert "times" in plain or "factor" in plain or "+" in plain, plain  # what the arithmetic says undeclared
    first = _first_line(
        two_digit_only, classify, cases, outputs=as_number, categorical=("style",), dtypes=(torch.float64,)
    )
    for arithmetic in ("times", "factor", "offset", "+", "sign", "largest difference"):
        assert arithmetic not in first, first


def test_a_case_that_never_ends_does_not_hang_the_explanation(monkeypatch):
    """The check stops at the first wrong case and then reads the others for evidence: a function that loops for
    ever on one of those must still get its message, in about one case's time limit, not hang the cell."""
    import time

    from course_lib.checks import explain
    from course_lib.checks.gae import check_td_residuals

    monkeypatch.setattr(explain, "CASE_SECONDS", 0.5)
    calls = []

    def wrong_then_stuck(rewards, values, dones, last_values, gamma):
        calls.append(1)
        if len(calls) > 1:
            while True:  # the loop a student meant to end
                pass
        return rewards * 0

    started = time.perf_counter()
    with pytest.raises(AssertionError) as failure:
        check_td_residuals(wrong_then_stuck)
    assert time.perf_counter() - started < 5
    assert "td_residuals" in str(failure.value)


def _discounted_rows(x):
    """A reward-to-go per row: G_t = x_t + 0.9 G_{t+1}, each row on its own."""
    out = torch.empty_like(x)
    running = torch.zeros_like(x[..., 0])
    for t in reversed(range(x.shape[-1])):
        running = x[..., t] + 0.9 * running
        out[..., t] = running
    return out


def test_a_value_carried_from_one_row_into_the_next():
    def not_reset(x):  # the running total starts each row where the last row's ended
        flat = x.reshape(-1, x.shape[-1])
        out = torch.empty_like(flat)
        running = torch.zeros((), dtype=x.dtype)
        for row in range(flat.shape[0]):
            for t in reversed(range(flat.shape[1])):
                running = flat[row, t] + 0.9 * running
                out[row, t] = running
        return out.reshape(x.shape)

    cases = _cases("x", shapes=[(2, 3), (4, 5), (3,), (3, 4)])
    words = "right in the first row and wrong in a later row"
    assert words in _first_line(not_reset, _discounted_rows, cases)
    # wrong in the first row too, on one case: no longer said
    near_miss = _spoiled(not_reset, (4, 5))
    assert words not in _first_line(near_miss, _discounted_rows, cases)


def test_one_number_everywhere_where_each_row_has_its_own():
    def row_means(x):
        return x.mean(-1)

    cases = _cases("x", shapes=[(2, 3), (4, 5), (3, 4)])
    words = "is one and the same number where the reference's differ"
    assert words in _first_line(lambda x: x.mean().expand(x.shape[:-1]), row_means, cases)
    assert words not in _first_line(lambda x: x.mean(-1) + x.mean(), row_means, cases)
