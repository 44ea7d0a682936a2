"""The catalogue of classic wrong implementations: every check must reject each one.

Each file in tests/mutants/ lists ``MUTANTS`` as ``(check_name, wrong_fn, expected_substring)``
and ``VARIANTS`` as ``(check_name, correct_fn)``. ``check_name`` is the exercise's function
name; its check is ``check_<name>`` in whichever ``course_lib.checks`` module defines it.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import pkgutil
from pathlib import Path

import pytest

import course_lib.checks

MUTANT_DIR = Path(__file__).resolve().parent / "mutants"
# Every check lives in a module of course_lib.checks, named after the module of its reference.
CHECK_MODULES = [m.name for m in pkgutil.iter_modules(course_lib.checks.__path__)]


def _catalogue():
    mutants, variants = [], []
    for path in sorted(MUTANT_DIR.glob("*.py")):
        if path.name.startswith("_"):
            continue
        module = importlib.import_module(f"mutants.{path.stem}")
        mutants += [(path.stem, *entry) for entry in getattr(module, "MUTANTS", [])]
        variants += [(path.stem, *entry) for entry in getattr(module, "VARIANTS", [])]
    return mutants, variants


def _check(name: str):
    for module_name in CHECK_MODULES:
        module = importlib.import_module(f"course_lib.checks.{module_name}")
        if hasattr(module, f"check_{name}"):
            return getattr(module, f"check_{name}")
    raise LookupError(f"no check_{name} in course_lib.checks")


MUTANTS, VARIANTS = _catalogue()

# The catalogues of issue 22's bar: every classic mistake of GAE, the deltas, PPO, KL and REINFORCE is named,
# none left with only "... differs from the reference" on its first line.
NAMED_CATALOGUES = (
    "gae",
    "baselines",
    "ppo",
    "grpo",
    "policy_gradient",
    "mc_gradient",
    "hf",
    "reasoning",
    "family",
    "issue44",
    "class_three",
)


@pytest.mark.parametrize(
    "catalogue, name, wrong, expected", MUTANTS, ids=[f"{m[0]}-{m[1]}-{m[2].__name__}" for m in MUTANTS]
)
def test_check_rejects_mutant(catalogue, name, wrong, expected):
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        with pytest.raises(AssertionError) as rejected:
            _check(name)(wrong)
    assert "\u2714" not in printed.getvalue(), "a rejected mutant must not print the success line"
    if expected:
        assert expected.lower() in str(rejected.value).lower(), f"message should mention {expected!r}"
    if catalogue in NAMED_CATALOGUES:
        first = str(rejected.value).splitlines()[0]
        assert "differs from the reference" not in first, f"only a difference, no cause: {first}"


@pytest.mark.parametrize("catalogue, name, correct", VARIANTS, ids=[f"{v[0]}-{v[1]}-{v[2].__name__}" for v in VARIANTS])
def test_check_accepts_correct_variant(catalogue, name, correct):
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert _check(name)(correct) is True
    assert "\u2714" in printed.getvalue()


@pytest.mark.parametrize("catalogue", NAMED_CATALOGUES)
def test_every_classic_mistake_has_a_named_message(catalogue):
    unnamed = [m[2].__name__ for m in MUTANTS if m[0] == catalogue and not m[3]]
    assert not unnamed, f"mutants of {catalogue} with no expected message: {unnamed}"


def test_catalogue_size():
    assert len(MUTANTS) >= 30, f"only {len(MUTANTS)} mutants in the catalogue"
    assert len(VARIANTS) >= 5


def test_stub_is_not_attempted_not_wrong():
    def stub(*args, **kwargs):
        raise NotImplementedError("Exercise: write your solution here")

    for name in sorted({m[1] for m in MUTANTS}):
        with pytest.raises(NotImplementedError):
            _check(name)(stub)
