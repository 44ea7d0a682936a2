"""The reading of the inputs' number of axes (course_lib.checks.ranks): a student right on one shape alone is told
so, whether the other shapes crash or give other numbers, and nothing is said when one right case could be chance;
the wrong cases named by the values of one argument (course_lib.checks.scope); and an output rounded to a narrower
dtype than its inputs (course_lib.checks.relations)."""

import pytest
import torch

from course_lib.checks.capstone import check_completion_mask
from course_lib.checks.gae import check_td_residuals
from course_lib.checks.policy_gradient import check_reinforce_loss
from course_lib.checks.ranks import axes
from course_lib.checks.rewards import check_sort_inclusion_ordering_reward
from course_lib.checks.warmup import check_discounted_return


def one_row_discounted_return(rewards, gamma):
    # written for one episode: len() and rewards[t] read the first axis, a batch's episodes
    total = torch.zeros((), dtype=rewards.dtype)
    for t in range(len(rewards)):
        total = total + gamma**t * rewards[t]
    return total


def one_row_td_residuals(rewards, values, dones, last_values, gamma):
    # values[1:] drops the first episode of a batch, not the first step: a crash or a wrong shape there
    next_values = torch.cat([values[1:], last_values.reshape(1)])
    return rewards + gamma * (1.0 - dones.to(rewards.dtype)) * next_values - values


def rows_only_completion_mask(completion_ids, eos_id):
    # a loop written for (B, L) alone: right there, wrong on a single row and on more leading axes
    mask = torch.ones(completion_ids.shape, dtype=torch.float32)
    for b in range(completion_ids.shape[0]):
        hits = (completion_ids[b] == eos_id).nonzero()
        if len(hits):
            mask[b, hits[0, -1] + 1 :] = 0.0
    return mask


def any_shape_completion_mask(completion_ids, eos_id):
    seen_eos = torch.cummax((completion_ids == eos_id).long(), dim=-1).values  # 1 from the first EOS on
    before = torch.cat([torch.zeros_like(seen_eos[..., :1]), seen_eos[..., :-1]], dim=-1)
    return (1 - before).float()


def test_a_function_for_one_row_is_told_to_count_from_the_end():
    with pytest.raises(AssertionError) as raised:
        check_discounted_return(one_row_discounted_return)
    first = str(raised.value).splitlines()[0]
    assert "right on every case of one row" in first
    assert "`rewards` has more leading axes" in first


def test_a_crash_on_a_batch_is_read_the_same_way_and_kept_below():
    with pytest.raises(AssertionError) as raised:
        check_td_residuals(one_row_td_residuals)
    message = str(raised.value)
    assert "right on every case of one row" in message.splitlines()[0]
    assert "first seen as: td_residuals raised" in message


def test_a_function_for_one_shape_is_told_so():
    with pytest.raises(AssertionError) as raised:
        check_completion_mask(rows_only_completion_mask)
    first = str(raised.value).splitlines()[0]
    assert "right on every case where `completion_ids` has 2 axes" in first


def diff_down_the_batch_sort_reward(prompt, response):
    # torch.diff's default axis is the last, but dim=0 was written: one row is right, a batch crashes on a broadcast
    inclusion = (prompt[..., :, None] == response[..., None, :]).any(dim=-1).sum(dim=-1)
    ordering = (torch.diff(response, dim=0) >= 0).sum(dim=-1)
    return (inclusion + ordering).float()


def column_weights_reinforce_loss(logp, deltas, mask=None):
    # deltas.reshape(-1, 1) is a column for (B,) deltas; (B, G) deltas become B * G rows, which do not broadcast
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    per_token = torch.where(valid, -(deltas.detach().reshape(-1, 1) * logp), torch.zeros_like(logp))
    return per_token.sum() / valid.sum().clamp(min=1)


def test_a_broadcast_crash_on_every_batch_is_read_as_the_batch_axis():
    """The broadcast hint names two causes (an axis dropped, a size read from the front): the cases tell which."""
    with pytest.raises(AssertionError) as raised:
        check_sort_inclusion_ordering_reward(diff_down_the_batch_sort_reward)
    message = str(raised.value)
    assert "right on every case of one row" in message.splitlines()[0]
    assert "first seen as: sort_inclusion_ordering_reward raised RuntimeError" in message


def test_a_function_right_up_to_some_axes_is_told_so():
    with pytest.raises(AssertionError) as raised:
        check_reinforce_loss(column_weights_reinforce_loss)
    first = str(raised.value).splitlines()[0]
    assert "right on every case where `deltas` has at most 1 axis and fails on every case with more" in first


def test_a_right_answer_still_passes():
    assert check_completion_mask(any_shape_completion_mask)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(torch.zeros(2, 3), 2), (torch.tensor(1.0), 0), (torch.zeros(4).numpy(), 1), ([[1, 2]], None), (0.5, None)],
)
def test_axes_counts_tensors_and_arrays_only(value, expected):
    assert axes(value) == expected


def test_the_wrong_cases_named_by_one_arguments_values():
    # course_lib.checks.scope: a student who counts fp16 and fp64 weights as 4 bytes is wrong on exactly the cases
    # with those two dtypes; two other features that meet on the same two cases are not said instead
    from class_eleven_students import w109_memory_accounting_fp16_is_bf16_only as four_bytes_for_fp16_and_fp64

    from course_lib.checks.memory import check_memory_accounting

    with pytest.raises(AssertionError) as raised:
        check_memory_accounting(four_bytes_for_fp16_and_fp64)
    first = str(raised.value).splitlines()[0]
    assert "wrong on every case with `weights_dtype='fp16'` or `weights_dtype='fp64'`" in first


def test_a_value_rounded_to_a_narrower_dtype_is_named():
    # course_lib.checks.relations._rounded: every value of the student's is exactly a bfloat16 number, though the
    # inputs are float64 (k3's cancellation makes the difference up to 6% of the output: too far for "nearly")
    from course_lib.checks.grpo import check_kl_estimate

    def kl_in_bfloat16(logp, logp_ref, kind):
        log_r = (logp_ref - logp).bfloat16()
        if kind == "k1":
            out = -log_r
        elif kind == "k2":
            out = 0.5 * log_r**2
        else:
            out = torch.expm1(log_r) - log_r
        return out.to(logp.dtype)

    with pytest.raises(AssertionError) as raised:
        check_kl_estimate(kl_in_bfloat16)
    first = str(raised.value).splitlines()[0]
    assert "is exactly a bfloat16 number" in first
    assert "though the inputs are float64" in first
