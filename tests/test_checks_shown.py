"""How a difference is shown: the entries a message shows must include where the outputs differ."""

import pytest
import torch

from course_lib.checks import Case, check_against_reference


def _mask(completion_lengths):
    """One row per length, five steps, 1 through that length (a completion mask)."""
    return (torch.arange(5) < torch.tensor(completion_lengths)[:, None]).double()


def test_a_difference_past_the_first_eight_entries_is_shown_from_where_it_starts():
    # Three rows of a mask: the first eight entries agree, so a prefix would show two identical lists.
    def reference(x):
        return _mask([2, 4, 5]) + 0 * x

    def wrong(x):
        return _mask([2, 4, 1]) + 0 * x

    with pytest.raises(AssertionError) as rejected:
        check_against_reference(wrong, reference, [Case("three rows", {"x": torch.zeros(())})], name="mask")
    message = str(rejected.value)
    assert "expected [..., 1, 1, 1, 1] (shape (3, 5), from flat index 11)" in message
    assert "got [..., 0, 0, 0, 0] (shape (3, 5), from flat index 11)" in message


def test_a_difference_among_the_first_eight_entries_is_shown_from_the_start():
    def reference(x):
        return _mask([2, 4, 5]) + 0 * x

    def wrong(x):
        return _mask([3, 4, 5]) + 0 * x

    with pytest.raises(AssertionError) as rejected:
        check_against_reference(wrong, reference, [Case("three rows", {"x": torch.zeros(())})], name="mask")
    assert "expected [1, 1, 0, 0, 0, 1, 1, 1, ...] (shape (3, 5))," in str(rejected.value)
