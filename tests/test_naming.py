"""A mistake is named only on evidence: a near miss of each catalogued mistake is never given its name.

For every check built on ``check_against_reference``, and every mistake in its catalogue that is wrong on
two cases or more, the *near miss* makes that mistake on the first of them and is right everywhere else.
It is wrong, so the check must reject it; and since it does not do what the mistake does on the second
case, the message must not name the mistake (issue 44: "named only when it reproduces the student's output
on every case where the student is wrong").
"""

from __future__ import annotations

import contextlib
import importlib
import io

import pytest
import torch

from course_lib.checks import check_against_reference
from course_lib.checks.compare import _cast, _compare, _default_outputs, _run

# (module, exercise): the checks whose catalogue is replayed; chapter 09's log-probs (a model per case) and
# chapter 02's Monte-Carlo gradient (sampling) are left to tests/test_mutants.py, to keep the suite quick.
CHECKS = [
    ("warmup", "discounted_return"),
    ("warmup", "reward_to_go"),
    ("rewards", "sort_inclusion_ordering_reward"),
    ("policy_gradient", "gather_log_probs"),
    ("policy_gradient", "reinforce_loss"),
    ("baselines", "compute_deltas"),
    ("gae", "compute_gae"),
    ("gae", "td_residuals"),
    ("ppo", "clipped_surrogate"),
    ("ppo", "clipped_surrogate_loss"),
    ("ppo", "value_loss"),
    ("kl", "kl_estimate"),
    ("grpo", "group_advantages"),
    ("grpo", "aggregate_loss"),
    ("grpo", "grpo_loss"),
    ("capstone.mask", "completion_mask"),
    ("reasoning.pass_at_k", "pass_at_k"),
    ("reasoning.styles", "completion_style"),
    ("family.rloo", "rloo_advantages"),
    ("family.cispo", "cispo_loss"),
    ("family.gspo", "gspo_sequence_log_ratio"),
    ("memory", "memory_accounting"),
    ("hf.config", "grpo_config_kwargs"),
]


PER_CHECK = 4
ALWAYS = ("the processes are forgotten",)
"""Mistakes replayed whatever the spread picks: each once had a near miss named from one field of its outputs."""


class _Captured(Exception):
    pass


def _arguments(module_name: str, exercise: str, monkeypatch) -> tuple[tuple, dict]:
    """What the check passes to check_against_reference (its reference, cases and catalogue)."""
    module = importlib.import_module(f"course_lib.checks.{module_name}")
    seen = {}

    def capture(*args, **kwargs):
        seen["args"], seen["kwargs"] = args, kwargs
        raise _Captured

    monkeypatch.setattr(module, "check_against_reference", capture)
    with pytest.raises(_Captured):
        getattr(module, f"check_{exercise}")(lambda **kwargs: None)
    monkeypatch.undo()
    return seen["args"], seen["kwargs"]


def _key(kwargs) -> tuple:
    """A case's inputs, as a hashable key (the check hands the function fresh copies)."""
    parts = []
    for name, value in sorted(kwargs.items()):
        if isinstance(value, torch.Tensor):
            parts.append((name, tuple(value.shape), tuple(value.detach().double().flatten().tolist())))
        else:
            parts.append((name, repr(value)))
    return tuple(parts)


def _wrong_cases(mistake, reference, cases, select, dtype) -> list[int]:
    wrong = []
    for number, case in enumerate(cases):
        if case.last:  # an edge promise is no evidence for or against a name (checks.Case): no near miss there
            continue
        kwargs = _cast(case.kwargs, dtype)
        try:
            mine = _run(mistake.fn, kwargs, case.grad, select, name="mistake", refuses=case.refuses)
            right = _run(reference, kwargs, case.grad, select, name="reference", refuses=case.refuses)
        except Exception:  # noqa: BLE001 - a mistake that cannot run there is not wrong there
            continue
        if _compare(right, mine, 1e-4, 1e-5) is not None:
            wrong.append(number)
    return wrong


@pytest.mark.parametrize("module_name, exercise", CHECKS, ids=[c[1] for c in CHECKS])
def test_a_near_miss_is_not_named_as_the_mistake(module_name, exercise, monkeypatch, trusting):
    args, kwargs = _arguments(module_name, exercise, monkeypatch)
    _, reference, cases = args
    select = kwargs.get("outputs") or _default_outputs
    dtype = kwargs.get("dtypes", (torch.float64,))[0]
    messages = [m.message for m in kwargs["mistakes"]]
    candidates = []
    for mistake in kwargs["mistakes"]:
        if messages.count(mistake.message) > 1:
            continue  # two catalogue entries under one message: either may rightly be named
        wrong = _wrong_cases(mistake, reference, cases, select, dtype)
        if len(wrong) >= 2:  # wrong on one case only: no near miss tells it apart
            candidates.append((mistake, wrong))
    assert candidates, f"{exercise}: no catalogued mistake is wrong on two cases"
    # A spread of the catalogue, PER_CHECK of them, keeps the suite quick (all of them pass too: PER_CHECK = 99).
    step = max(1, len(candidates) // PER_CHECK)
    chosen = candidates[::step][:PER_CHECK]
    chosen += [c for c in candidates if c[0].message.startswith(ALWAYS) and c not in chosen]
    for mistake, wrong in chosen:
        target = _key(_cast(cases[wrong[0]].kwargs, dtype))

        def near_miss(_mistake=mistake, _target=target, **inputs):
            chosen = _mistake.fn if _key(inputs) == _target else reference
            return chosen(**inputs)

        with contextlib.redirect_stdout(io.StringIO()), pytest.raises(AssertionError) as rejected:
            check_against_reference(near_miss, *args[1:], **kwargs)
        assert mistake.message not in str(rejected.value), (
            f"{exercise}: a near miss of {mistake.message!r} (its mistake on case {wrong[0]} only, right on "
            f"case {wrong[1]}) was given that mistake's name"
        )


def _table_near_misses(mistakes, table, reference):
    """For each mistake wrong on two rows or more of a string table: right everywhere but on its first wrong row;
    and wrong everywhere it is, plus on one row it gets right."""
    for mistake in mistakes:
        wrong = [row for row in table if float(mistake.fn(*row)) != float(reference(*row))]
        if len(wrong) < 2:
            continue

        def near_miss(*row, _mistake=mistake, _first=wrong[0]):
            return float(_mistake.fn(*row)) if tuple(row) == _first else float(reference(*row))

        yield mistake, near_miss
        # The other way round: the mistake on every row, and one more error where the mistake is right.
        right = next(row for row in table if row not in wrong)

        def overshoot(*row, _mistake=mistake, _right=right):
            reward = float(_mistake.fn(*row))
            return 1.0 - reward if tuple(row) == _right else reward

        yield mistake, overshoot


def test_the_string_tables_name_a_mistake_only_on_every_row(trusting):
    from course_lib.checks.capstone.reward import _REWARD_CASES, _reward_mistakes, check_addition_exact_reward
    from course_lib.checks.rewards import _MATH_CASES, _MATH_MISTAKES, check_math_answer_reward
    from course_lib.rewards import addition_exact_reward, math_answer_reward

    tables = [
        (check_math_answer_reward, _MATH_MISTAKES, [(r, g) for r, g, _, _ in _MATH_CASES], math_answer_reward),
        (check_addition_exact_reward, _reward_mistakes(), [(c, a) for c, a, _ in _REWARD_CASES], addition_exact_reward),
    ]
    tried = 0
    for check, mistakes, table, reference in tables:
        for mistake, near_miss in _table_near_misses(mistakes, table, reference):
            with contextlib.redirect_stdout(io.StringIO()), pytest.raises(AssertionError) as rejected:
                check(lambda *args, _f=near_miss, **kwargs: _f(*args, *kwargs.values()))
            assert mistake.message not in str(rejected.value)
            # ... and the mistake itself is still named.
            with contextlib.redirect_stdout(io.StringIO()), pytest.raises(AssertionError) as named:
                check(lambda *args, _m=mistake, **kwargs: float(_m.fn(*args, *kwargs.values())))
            assert mistake.message in str(named.value)
            tried += 1
    assert tried >= 6
