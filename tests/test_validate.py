"""Argument validation: every message names the argument and says what was expected."""

import pytest
import torch

from course_lib import _validate


@pytest.mark.parametrize("value, minimum", [(1.5, None), (True, None), ("3", None), (0, 1), (-2, 0)])
def test_require_int_rejects(value, minimum):
    with pytest.raises(ValueError, match=r"^group_size: expected an int"):
        _validate.require_int("group_size", value, minimum)


def test_require_int_accepts_and_returns():
    assert _validate.require_int("seed", 0, 0) == 0
    assert _validate.require_int("n", -5) == -5


@pytest.mark.parametrize("value", [-0.1, 1.1, float("nan"), "0.9", None])
def test_unit_interval(value):
    with pytest.raises(ValueError, match="^gamma: expected a number"):
        _validate.require_unit_interval("gamma", value)


def test_positive_accepts_one_element_tensor():
    assert _validate.require_positive("clip_eps", torch.tensor(0.2)) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="^clip_eps: expected a positive number, got 0.0"):
        _validate.require_positive("clip_eps", 0.0)


def test_mask_shape_values_and_dtype():
    like = torch.zeros(2, 3)
    assert _validate.require_mask("mask", torch.ones(2, 3, dtype=torch.bool), "logp", like).dtype == torch.float32
    with pytest.raises(ValueError, match=r"^mask: expected shape \(2, 3\) like logp, got \(3, 2\)"):
        _validate.require_mask("mask", torch.ones(3, 2), "logp", like)
    with pytest.raises(ValueError, match="^mask: expected only 0 and 1"):
        _validate.require_mask("mask", torch.full((2, 3), 0.5), "logp", like)


def test_tensor_dtype_and_choice():
    with pytest.raises(ValueError, match="^rewards: expected a floating-point tensor"):
        _validate.require_tensor("rewards", torch.ones(3, dtype=torch.long))
    with pytest.raises(ValueError, match="^mode: expected one of 'a', 'b', got 'c'"):
        _validate.require_choice("mode", "c", ["a", "b"])
