"""Every option an exercise documents is exercised by some case of its check (issue 44, item 1).

A check that never passes ``clip_eps_high`` cannot tell a student who ignores it from one who honours it. For
every check built on ``check_against_reference``, each optional argument of the reference (one with a default)
must be passed by at least one case with a value other than its default. PPOLoss's tensors (its ``forward``)
are read from the class.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from test_naming import CHECKS, _arguments

from course_lib.ppo import PPOLoss


def _options(reference) -> dict:
    """The reference's optional arguments and their defaults."""
    parameters = inspect.signature(reference).parameters.values()
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def _differs(value, default) -> bool:
    if isinstance(value, torch.Tensor) or isinstance(default, torch.Tensor):
        return value is not default
    return value != default


@pytest.mark.parametrize("module_name, exercise", CHECKS, ids=[c[1] for c in CHECKS])
def test_every_documented_option_is_exercised(module_name, exercise, monkeypatch):
    args, _ = _arguments(module_name, exercise, monkeypatch)
    _, reference, cases = args
    unexercised = [
        name
        for name, default in _options(reference).items()
        if not any(name in case.kwargs and _differs(case.kwargs[name], default) for case in cases)
    ]
    assert not unexercised, f"{exercise}: no case passes {unexercised} (each is an option the exercise offers)"


def test_ppo_loss_cases_exercise_every_tensor_of_forward(monkeypatch):
    from course_lib.checks import ppo as checks

    seen = {}

    def capture(fn, reference, cases, **kwargs):
        seen["cases"] = cases
        return True

    monkeypatch.setattr(checks, "check_against_reference", capture)
    checks.check_ppo_loss(PPOLoss)
    forward = _options(PPOLoss.forward)
    forward.pop("values_old")  # only with clip_value_loss, which the exercise's class does not take
    unexercised = [name for name in forward if not any(name in case.kwargs for case in seen["cases"])]
    assert not unexercised, f"PPOLoss: no case passes {unexercised}"


def test_every_mode_of_a_mode_argument_is_exercised(monkeypatch):
    from course_lib.baselines import MODES
    from course_lib.grpo import KL_KINDS, LOSS_AGG_MODES

    for module_name, exercise, argument, modes in [
        ("baselines", "compute_deltas", "mode", MODES),
        ("grpo", "aggregate_loss", "mode", LOSS_AGG_MODES),
        ("kl", "kl_estimate", "kind", KL_KINDS),
        ("grpo", "grpo_loss", "loss_agg", LOSS_AGG_MODES),
        ("grpo", "grpo_loss", "kl_kind", KL_KINDS),
    ]:
        (_, _, cases), _ = _arguments(module_name, exercise, monkeypatch)
        used = {case.kwargs.get(argument) for case in cases}
        missing = [mode for mode in modes if mode not in used]
        if argument in ("loss_agg", "kl_kind"):  # the default is used when the argument is left out
            missing = [
                mode for mode in missing if mode != inspect.signature(_reference(exercise)).parameters[argument].default
            ]
        assert not missing, f"{exercise}: no case passes {argument}={missing}"


def _reference(exercise):
    from course_lib import grpo

    return getattr(grpo, exercise)


@pytest.mark.parametrize("module_name, exercise", CHECKS, ids=[c[1] for c in CHECKS])
def test_every_default_is_exercised(module_name, exercise, monkeypatch):
    """The other half of a promise: some case leaves each optional argument out, so a student whose signature has
    another default (GRPO's normalize_std=False, n_digits=2) is told (benchmarks/check_mutants.py found three)."""
    args, _ = _arguments(module_name, exercise, monkeypatch)
    _, reference, cases = args
    never_left_out = [name for name in _options(reference) if all(name in case.kwargs for case in cases)]
    assert not never_left_out, f"{exercise}: every case passes {never_left_out}; leave it out in one"


@pytest.mark.parametrize("module_name, exercise", CHECKS, ids=[c[1] for c in CHECKS])
def test_every_check_holds_the_kind_its_docstring_states(module_name, exercise, monkeypatch):
    """Every docstring states what its function returns: a dtype ("float32 mask", "the input's dtype") or a
    number ("floats" in an info dict). A float32 answer to float64 inputs, a bool mask where float32 is
    documented, a tensor where a number is: each is told (tests/mutants hold one of each)."""
    _, kwargs = _arguments(module_name, exercise, monkeypatch)
    assert kwargs.get("check_dtype") is True, f"{exercise}: its check does not compare the outputs' kinds"


def test_every_call_of_the_comparison_checks_kinds():
    """The same, read from the source, for the checks CHECKS does not list (PPOLoss, the sweep, chapter 09's)."""
    import ast
    import pathlib

    import course_lib.checks as package

    missing = []
    for path in sorted(pathlib.Path(package.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check_against_reference":
                flags = {k.arg: k.value for k in node.keywords}
                if not (isinstance(flags.get("check_dtype"), ast.Constant) and flags["check_dtype"].value is True):
                    missing.append(f"{path.name}:{node.lineno}")
    assert not missing, f"check_against_reference without check_dtype=True: {missing}"
