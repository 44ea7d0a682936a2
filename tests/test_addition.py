"""Tests of chapter 08's task (course_lib.tasks.AdditionTask) and rewards (course_lib.rewards, section 5)."""

import pytest
import torch

from course_lib.rewards import (
    addition_answer,
    addition_digit_reward,
    addition_exact_reward,
    addition_format_reward,
    completion_length_penalty,
)
from course_lib.tasks import AdditionTask, score_completions


def test_task_texts_and_shapes():
    task = AdditionTask(2)
    assert task.prompt_text(7, 85) == "07+85="
    assert task.answer_text(7, 85) == "92"
    assert (task.prompt_length, task.max_new_tokens) == (6, 4)
    prompts, completions = task.demonstrations([(47, 85), (0, 3)])
    assert task.tokenizer.decode(prompts[0]) == "47+85="
    assert completions.tolist() == [[1, 3, 2, 12], [3, 12, 13, 13]]


@pytest.mark.parametrize("n_digits", [1, 2, 3, 4])
def test_prompt_ids_are_the_encoded_prompt_texts(n_digits):
    # prompts() builds the ids from digits with tensor arithmetic; it must equal encoding the texts one by one.
    task = AdditionTask(n_digits)
    n = 10**n_digits
    pairs = [(a, b) for a in (0, 1, n // 2, n - 1) for b in (0, 7 % n, n - 1)] + [(n - 1, n - 1)]
    expected = task.tokenizer.encode_batch([task.prompt_text(a, b) for a, b in pairs])
    got = task.prompts(pairs)
    assert got.dtype == torch.long and torch.equal(got, expected)
    assert torch.equal(task.prompts(pairs[:1]), expected[:1])


@pytest.mark.parametrize("pairs", [[], [(100, 1)], [(-1, 2)], [(3, 100)], [(1, 2, 3), (4, 5, 6)], [1, 2]])
def test_prompts_reject_pairs_out_of_range(pairs):
    with pytest.raises(ValueError, match="pairs: expected a non-empty list of \\(a, b\\) with 0 <= a, b < 100"):
        AdditionTask(2).prompts(pairs)


def test_split_is_disjoint_seeded_and_complete():
    task = AdditionTask(2)
    split = task.split(n_demos=300, n_heldout=500, seed=0)
    assert len(split["heldout"]) == 500 and len(split["train"]) == 9500 and len(split["demos"]) == 300
    assert not set(split["heldout"]) & set(split["train"])
    assert set(split["demos"]) <= set(split["train"])
    assert split == task.split(300, 500, seed=0)
    assert split["heldout"] != task.split(300, 500, seed=1)["heldout"]


def test_task_validates():
    with pytest.raises(ValueError, match="n_digits"):
        AdditionTask(0)
    with pytest.raises(ValueError, match="n_heldout"):
        AdditionTask(1).split(10, 100)


def test_addition_answer():
    assert addition_answer("47+85=") == "132"
    assert addition_answer("00+00=") == "0"
    with pytest.raises(ValueError, match="prompt"):
        addition_answer("47-85=")


@pytest.mark.parametrize(
    "completion, exact, fmt, digits",
    [
        ("132$", 1.0, 1.0, 1.0),
        ("132$77", 1.0, 1.0, 1.0),  # text after EOS is never read
        ("132$$", 1.0, 1.0, 1.0),
        ("132", 0.0, 0.0, 1.0),  # no EOS: not an answer, but every digit is right (the hackable blind spot)
        ("0132$", 0.0, 0.0, 0.75),  # leading zero: wrong and malformed; 3 of 4 columns right
        ("142$", 0.0, 1.0, 2 / 3),
        ("32$", 0.0, 1.0, 2 / 3),  # a missing digit costs its column
        ("1320$", 0.0, 1.0, 0.0),  # columns align from the units: all shifted
        ("13 2$", 0.0, 0.0, 0.0),  # extra text before EOS
        ("+132$", 0.0, 0.0, 0.0),
        ("$132", 0.0, 0.0, 0.0),  # stopped at once
        ("", 0.0, 0.0, 0.0),
    ],
)
def test_addition_rewards_hand_cases(completion, exact, fmt, digits):
    assert addition_exact_reward(completion, "132") == exact
    assert addition_format_reward(completion) == fmt
    assert addition_digit_reward(completion, "132") == pytest.approx(digits)


def test_format_reward_zero_is_well_formed():
    assert addition_format_reward("0$") == 1.0
    assert addition_format_reward("00$") == 0.0
    assert addition_exact_reward("0$", "0") == 1.0


def test_length_penalty():
    assert completion_length_penalty("132$", 4) == 0.0
    assert completion_length_penalty("1$", 4) == 0.0
    assert completion_length_penalty("13245$", 4) == pytest.approx(-0.5)
    assert completion_length_penalty("1324", 4) == pytest.approx(-0.25), "no EOS counts one token more"
    with pytest.raises(ValueError, match="max_tokens"):
        completion_length_penalty("1$", 0)


def test_rewards_validate():
    with pytest.raises(ValueError, match="completion"):
        addition_exact_reward(132, "132")
    with pytest.raises(ValueError, match="answer"):
        addition_digit_reward("132$", 132)


def test_score_completions_on_ids_broadcasts_groups():
    task = AdditionTask(2)
    tok = task.tokenizer
    prompts = task.prompts([(47, 85), (1, 2)])  # (2, 6)
    completions = torch.tensor(
        [
            [tok.encode("132$"), tok.encode("131$")],
            [tok.encode("3$") + [13, 13], tok.encode("03$") + [13]],
        ]
    )  # (2, 2, 4)
    r = score_completions(prompts[:, None, :], completions, tok, "exact")
    assert r.shape == (2, 2) and r.tolist() == [[1.0, 0.0], [1.0, 0.0]]
    both = score_completions(prompts[:, None, :], completions, tok, "digits+exact")
    assert both[0].tolist() == pytest.approx([2.0, 2 / 3])
    with pytest.raises(ValueError, match="reward"):
        score_completions(prompts, completions[:, 0], tok, "nope")


def test_score_completions_scores_a_repeated_completion_as_it_scores_it_alone():
    """Each distinct (prompt, completion) is scored once and its score copied: the same numbers as one by one,
    and a completion repeated under another prompt is scored against that prompt's answer."""
    task = AdditionTask(2)
    tok = task.tokenizer
    prompts = task.prompts([(47, 85), (66, 66)])  # both answers are 132
    right, wrong = tok.encode("132$"), tok.encode("131$")
    completions = torch.tensor([[right, wrong, right, right], [wrong, wrong, right, wrong]])  # (2, 4, 4)
    together = score_completions(prompts[:, None, :], completions, tok, "digits+exact")
    alone = [
        [score_completions(prompts[b : b + 1], completions[b, g : g + 1], tok, "digits+exact").item() for g in range(4)]
        for b in range(2)
    ]
    assert together.tolist() == alone
    other = task.prompts([(10, 10)])  # answer 20: the same completion scores differently
    assert score_completions(other, completions[0, :1], tok, "exact").item() == 0.0
