"""A borrowed call of the exercise's own earlier functions (course_lib.checks.watch.EARLIER): the rule's words first,
then, in a notebook only, what the check finds with that call allowed. The grading kernel says the rule alone."""

from __future__ import annotations

import contextvars

import pytest
import torch
from torch import nn

from course_lib.checks import recording, watch
from course_lib.checks.ppo import check_ppo_loss
from course_lib.gae import td_residuals
from course_lib.ppo import clipped_surrogate_loss, value_loss

RULE = watch.message("PPOLoss", "course_lib.ppo.clipped_surrogate_loss")


def _valid_mean(x, mask):
    valid = torch.ones_like(x, dtype=torch.bool) if mask is None else mask.bool()
    return torch.where(valid, x, torch.zeros_like(x)).sum() / valid.sum().clamp(min=1)


class _Borrowing(nn.Module):
    """A PPOLoss built on course_lib's clipped_surrogate_loss and value_loss; ``sign`` is the entropy term's."""

    sign = -1.0

    def __init__(self, clip_epsilon=0.2, value_loss_coef=0.5, entropy_coef=0.01):
        super().__init__()
        self.clip_epsilon, self.value_loss_coef, self.entropy_coef = clip_epsilon, value_loss_coef, entropy_coef

    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        policy_loss, _ = clipped_surrogate_loss(
            policy_logprobs, old_policy_logprobs, advantages, self.clip_epsilon, mask
        )
        bonus = self.sign * self.entropy_coef * _valid_mean(entropy, mask)
        return policy_loss + self.value_loss_coef * value_loss(values, returns, mask=mask) + bonus


class _EntropyAdded(_Borrowing):
    sign = 1.0


class _AlsoBorrowsGae(_Borrowing):
    def forward(self, policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask=None):
        td_residuals(values, values, torch.zeros_like(values), values[..., -1], 0.9)  # not an earlier function
        return super().forward(policy_logprobs, old_policy_logprobs, values, returns, advantages, entropy, mask)


def _first_line(cls) -> str:
    with pytest.raises(watch.ReferenceCalled) as rejected:
        check_ppo_loss(cls)
    return str(rejected.value).splitlines()[0]


def test_the_rule_comes_first_and_the_next_mistake_after_it():
    first = _first_line(_EntropyAdded)
    assert first.startswith(RULE + "; and with it, the entropy term has the wrong sign"), first


def test_a_loss_right_but_for_the_call_is_told_so():
    assert _first_line(_Borrowing) == RULE + "; otherwise your PPOLoss agrees with the reference"


def test_another_borrowed_call_leaves_the_rule_alone():
    assert _first_line(_AlsoBorrowsGae) == watch.message("PPOLoss", "course_lib.gae.td_residuals")


def test_the_grading_kernel_says_the_rule_alone(tmp_path):
    def record():
        recording.start(str(tmp_path / "records"), seed=1234)
        return check_ppo_loss(_EntropyAdded)

    with pytest.raises(recording.ReferenceCalled) as rejected:
        contextvars.copy_context().run(record)
    assert str(rejected.value) == RULE
