"""Tests for course_lib.rewards: the sorting rewards, answer extraction, format and hackable rewards."""

import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.checks.rewards import check_math_answer_reward, check_sort_inclusion_ordering_reward
from course_lib.rewards import (
    connective_coherence_reward,
    degenerate_responses,
    extract_final_answer,
    format_reward,
    length_reward,
    math_answer_reward,
    normalize_answer,
    sort_exact_match_reward,
    sort_inclusion_ordering_reward,
)


def t(rows):
    return torch.tensor(rows, dtype=torch.long)


def lecture_reward(prompt: list[int], response: list[int]) -> int:
    """The CS336 lecture 17 formula on Python lists, written out as the lecture states it."""
    inclusion_reward = sum(1 for x in prompt if x in response)
    ordering_reward = sum(1 for x, y in zip(response, response[1:]) if x <= y)
    return inclusion_reward + ordering_reward


# ---------------------------------------------------------------------------
# sort_inclusion_ordering_reward: hand-computed values
# ---------------------------------------------------------------------------


def test_lecture_example_sorted_response():
    # prompt [3, 1, 0, 2], response [0, 1, 2, 3]
    # inclusion: 3, 1, 0, 2 all appear in the response -> 4
    # ordering: 0<=1, 1<=2, 2<=3 -> 3;  total 4 + 3 = 7 = 2T - 1 for T = 4
    assert sort_inclusion_ordering_reward(t([3, 1, 0, 2]), t([0, 1, 2, 3])).item() == 7.0


def test_lecture_example_partial_credit():
    # prompt [3, 1, 0, 2], response [7, 2, 2, 5]
    # inclusion: 3 no, 1 no, 0 no, 2 yes -> 1
    # ordering: 7<=2 no, 2<=2 yes, 2<=5 yes -> 2;  total 1 + 2 = 3
    assert sort_inclusion_ordering_reward(t([3, 1, 0, 2]), t([7, 2, 2, 5])).item() == 3.0


def test_more_hand_values():
    prompts = t([[1, 0, 2], [1, 0, 2], [1, 0, 2], [2, 2, 1], [3, 2, 4]])
    responses = t([[2, 2, 2], [4, 3, 4], [2, 1, 0], [1, 2, 1], [2, 3, 4]])
    expected = [
        1 + 2,  # [2, 2, 2]: only prompt token 2 appears -> 1; 2<=2, 2<=2 -> 2
        0 + 1,  # [4, 3, 4]: no prompt token appears -> 0; 4<=3 no, 3<=4 yes -> 1
        3 + 0,  # [2, 1, 0]: all three appear -> 3; 2<=1 no, 1<=0 no -> 0
        # prompt [2, 2, 1]: 2 yes, 2 yes, 1 yes -> 3 (a repeated prompt token counts twice); 1<=2 yes, 2<=1 no -> 1
        3 + 1,
        3 + 2,  # the sorted answer to [3, 2, 4]: 3 + 2 = 5, the maximum 2T - 1
    ]
    assert sort_inclusion_ordering_reward(prompts, responses).tolist() == expected


def test_single_token_has_no_pairs():
    # T = 1: inclusion 1 (or 0), and no adjacent pair at all.
    assert sort_inclusion_ordering_reward(t([3]), t([3])).item() == 1.0
    assert sort_inclusion_ordering_reward(t([3]), t([2])).item() == 0.0


def test_output_dtype_and_shapes():
    prompts = torch.randint(0, 6, (2, 3, 5))
    responses = torch.randint(0, 6, (2, 3, 5))
    reward = sort_inclusion_ordering_reward(prompts, responses)
    assert reward.shape == (2, 3) and reward.dtype == torch.float32
    assert sort_inclusion_ordering_reward(prompts.int(), responses.to(torch.int16)).dtype == torch.float32


def test_prompt_broadcasts_against_a_group_of_responses():
    g = torch.Generator().manual_seed(0)
    prompts = torch.rand(4, 9, generator=g).argsort(-1)[:, :5]  # (B, T)
    responses = torch.randint(0, 9, (4, 6, 5), generator=g)  # (B, G, T)
    broadcast = sort_inclusion_ordering_reward(prompts[:, None, :], responses)  # (B, G)
    expanded = sort_inclusion_ordering_reward(prompts[:, None, :].expand_as(responses), responses)
    assert broadcast.shape == (4, 6)
    assert torch.equal(broadcast, expanded)


def test_does_not_change_its_inputs():
    prompt, response = t([3, 1, 0, 2]), t([7, 2, 2, 5])
    sort_inclusion_ordering_reward(prompt, response)
    assert prompt.tolist() == [3, 1, 0, 2] and response.tolist() == [7, 2, 2, 5]


# ---------------------------------------------------------------------------
# sort_inclusion_ordering_reward: properties
# ---------------------------------------------------------------------------

tokens = st.integers(0, 7)


@st.composite
def prompt_response(draw, distinct=False):
    length = draw(st.integers(1, 6))
    if distinct:
        prompt = draw(st.lists(tokens, min_size=length, max_size=length, unique=True))
    else:
        prompt = draw(st.lists(tokens, min_size=length, max_size=length))
    response = draw(st.lists(tokens, min_size=length, max_size=length))
    return prompt, response


@settings(max_examples=50, deadline=None)
@given(prompt_response())
def test_agrees_with_the_lecture_formula_and_is_bounded(pair):
    prompt, response = pair
    reward = sort_inclusion_ordering_reward(t(prompt), t(response)).item()
    assert reward == lecture_reward(prompt, response)
    assert 0 <= reward <= 2 * len(prompt) - 1


@settings(max_examples=50, deadline=None)
@given(prompt_response(distinct=True))
def test_sorted_prompt_is_the_maximum_and_the_only_one(pair):
    prompt, response = pair
    T = len(prompt)
    sorted_prompt = t(sorted(prompt))
    assert sort_inclusion_ordering_reward(t(prompt), sorted_prompt).item() == 2 * T - 1
    # For distinct prompt tokens, 2T - 1 means all T tokens present (a permutation) and in order: the sorted prompt.
    reward = sort_inclusion_ordering_reward(t(prompt), t(response)).item()
    exact = sort_exact_match_reward(t(prompt), t(response)).item()
    assert (reward == 2 * T - 1) == (exact == 1.0)
    assert sort_exact_match_reward(t(prompt), sorted_prompt).item() == 1.0


@settings(max_examples=50, deadline=None)
@given(prompt_response(), st.randoms(use_true_random=False))
def test_invariant_to_permuting_the_prompt(pair, rng):
    # Inclusion counts prompt tokens, in any order; ordering looks at the response only.
    prompt, response = pair
    shuffled = list(prompt)
    rng.shuffle(shuffled)
    assert sort_inclusion_ordering_reward(t(shuffled), t(response)) == sort_inclusion_ordering_reward(
        t(prompt), t(response)
    )


@settings(max_examples=50, deadline=None)
@given(prompt_response())
def test_sorting_the_response_never_lowers_the_reward(pair):
    # Sorting keeps the response's tokens (same inclusion) and makes every pair ordered.
    prompt, response = pair
    before = sort_inclusion_ordering_reward(t(prompt), t(response)).item()
    after = sort_inclusion_ordering_reward(t(prompt), t(sorted(response))).item()
    assert after >= before
    assert after - before == (len(response) - 1) - sum(x <= y for x, y in zip(response, response[1:]))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_batched_equals_row_by_row(B, T, seed):
    g = torch.Generator().manual_seed(seed)
    prompts = torch.randint(0, 6, (B, T), generator=g)
    responses = torch.randint(0, 6, (B, T), generator=g)
    batched = sort_inclusion_ordering_reward(prompts, responses)
    rows = [lecture_reward(p, r) for p, r in zip(prompts.tolist(), responses.tolist())]
    assert batched.tolist() == rows


# ---------------------------------------------------------------------------
# sort_exact_match_reward
# ---------------------------------------------------------------------------


def test_exact_match_hand_values():
    prompts = t([[1, 0, 2], [1, 0, 2], [2, 2, 1], [3, 2, 4]])
    responses = t([[0, 1, 2], [0, 1, 1], [1, 2, 2], [2, 4, 3]])
    assert sort_exact_match_reward(prompts, responses).tolist() == [1.0, 0.0, 1.0, 0.0]
    assert sort_exact_match_reward(prompts, responses).dtype == torch.float32


# ---------------------------------------------------------------------------
# Bad input to the sorting rewards
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [sort_inclusion_ordering_reward, sort_exact_match_reward])
def test_sorting_rewards_bad_input(fn):
    with pytest.raises(ValueError, match="response"):
        fn(t([1, 0, 2]), t([0, 1]))  # T differs
    with pytest.raises(ValueError, match="response"):
        fn(t([[1, 0, 2], [3, 2, 4]]), t([[0, 1, 2]] * 3))  # (2, 3) and (3, 3) do not broadcast
    with pytest.raises(ValueError, match="prompt"):
        fn(torch.tensor([1.0, 0.0, 2.0]), t([0, 1, 2]))
    with pytest.raises(ValueError, match="response"):
        fn(t([1, 0, 2]), torch.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="prompt"):
        fn(torch.tensor([True, False]), t([0, 1]))
    with pytest.raises(ValueError, match="prompt"):
        fn([1, 0, 2], t([0, 1, 2]))
    with pytest.raises(ValueError, match="prompt"):
        fn(torch.tensor(3), t([3]))  # a 0-dim tensor has no token axis


# ---------------------------------------------------------------------------
# extract_final_answer and normalize_answer
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("\\boxed{14}", "14"),
        ("so $x = \\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),  # nested braces
        ("\\boxed{\\sqrt{\\frac{a}{b}}} done", "\\sqrt{\\frac{a}{b}}"),  # two levels of nesting
        ("first \\boxed{12}, then \\boxed{14}", "14"),  # the last box
        ("the answer is 12, but \\boxed{14}", "14"),  # a box wins over a statement
        ("\\boxed{14} and a broken \\boxed{15", "14"),  # an unclosed box is skipped
        ("\\boxed{}", None),  # an empty answer is no answer
        ("The answer is 14.", "14"),
        ("the ANSWER IS 14", "14"),
        ("Answer: 14", "14"),
        ("answer:14", "14"),
        ("The answer is: 14!", "14"),
        ("The answer is 12. Wait, the answer is 14.", "14"),  # the last statement
        ("The answer is 14. I checked by counting.", "14"),  # up to the end of the sentence
        ("The answer is 3.5.", "3.5"),  # a decimal point is not a sentence end
        ("The answer is\n14", "14"),
        ("The answer is 14\nand more text", "14"),  # up to the end of the line
        ("<answer>The answer is 14.</answer>", "14"),  # up to the next tag
        ("The answer is $1,000$.", "1000"),
        ("The answer is 14.0", "14"),
        ("(the answer is 14)", "14"),  # a ")" that closes nothing
        ("The answer is", None),  # a statement with nothing after it
        ("6 + 8 = 14", None),  # a number but no statement: no answer
        ("Maybe 12, or 13, or 14", None),
        ("", None),
    ],
)
def test_extract_final_answer(text, expected):
    assert extract_final_answer(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("  14  ", "14"),
        ("14.", "14"),
        ("$14$", "14"),
        ("\\$14", "14"),
        ("1,000", "1000"),
        ("1,234,567.5", "1234567.5"),
        ("1,23", "1,23"),  # not a thousands separator: left alone
        ("(1, 2)", "(1, 2)"),  # balanced parentheses are kept
        ("14.0", "14"),
        ("14.000", "14"),
        ("14.50", "14.50"),  # only a whole number loses its zeros; math_answer_reward compares numerically
        ("-3.", "-3"),
        ("\\frac{1}{2}", "\\frac{1}{2}"),
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


# ---------------------------------------------------------------------------
# math_answer_reward
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "response, truth, expected",
    [
        ("The answer is 14.", "14", 1.0),
        ("The answer is 14", "14.0", 1.0),
        ("The answer is 14.00", "14", 1.0),
        ("The answer is .5", "0.5", 1.0),
        ("The answer is 0.5", "\\frac{1}{2}", 0.0),  # no symbolic simplification
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}", 1.0),
        ("The answer is 140", "14", 0.0),
        ("6 + 8 = 14", "14", 0.0),  # the right number, never stated as the answer
        ("The answer is $1,250.", "1250", 1.0),
    ],
)
def test_math_answer_reward_values(response, truth, expected):
    assert math_answer_reward(response, truth) == expected


@settings(max_examples=50, deadline=None)
@given(st.integers(-(10**7), 10**7), st.integers(-(10**7), 10**7))
def test_math_answer_reward_on_integers(n, m):
    assert math_answer_reward(f"So the answer is {n:,}.", str(n)) == 1.0
    assert math_answer_reward(f"\\boxed{{{n}}}", f"{n}.0") == 1.0
    assert math_answer_reward(f"The answer is {n}", str(m)) == float(n == m)


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet="0123456789 +-=.,abcxyz\n", max_size=60))
def test_no_statement_no_reward(text):
    # Text without "answer" and without \boxed states no answer, whatever numbers it holds.
    assert extract_final_answer(text) is None
    assert math_answer_reward(text, "14") == 0.0


def test_math_answer_reward_bad_input():
    with pytest.raises(ValueError, match="response_text"):
        math_answer_reward(None, "14")
    with pytest.raises(ValueError, match="ground_truth"):
        math_answer_reward("The answer is 14", 14)
    with pytest.raises(ValueError, match="text"):
        extract_final_answer(b"bytes")
    with pytest.raises(ValueError, match="text"):
        normalize_answer(14)


# ---------------------------------------------------------------------------
# format_reward
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>6 + 8 = 14</think> <answer>14</answer>", 1.0),
        ("<think>\n6 + 8 = 14\n</think>\n<answer>\n14\n</answer>\n", 1.0),
        ("  <think>x</think><answer>14</answer>  ", 1.0),
        ("<think></think><answer></answer>", 1.0),  # empty but well formed: the hack the notebook shows
        ("<think>x</think> <answer>14</answer> and more", 0.0),  # text after </answer>
        ("Sure! <think>x</think> <answer>14</answer>", 0.0),  # text before <think>
        ("<think>x</think> so <answer>14</answer>", 0.0),  # text between the blocks
        ("<answer>14</answer> <think>x</think>", 0.0),  # wrong order
        ("<think>x</think>", 0.0),  # no answer block
        ("<answer>14</answer>", 0.0),  # no think block
        ("<think>x</think> <answer>1</answer> <answer>2</answer>", 0.0),  # two answers
        ("<think>x <think>y</think> <answer>14</answer>", 0.0),  # a second <think>
        ("The answer is 14.", 0.0),
    ],
)
def test_format_reward(text, expected):
    assert format_reward(text) == expected


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet="ab 1+=\n", max_size=20), st.text(alphabet="ab 1+=\n", max_size=20))
def test_format_reward_accepts_open_r1_layout(think, answer):
    # open-r1's stricter pattern (a newline after every tag): whatever it accepts, ours accepts too.
    text = f"<think>\n{think}\n</think>\n<answer>\n{answer}\n</answer>"
    assert re.match(r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$", text, re.DOTALL)
    assert format_reward(text) == 1.0


def test_format_reward_bad_input():
    with pytest.raises(ValueError, match="response_text"):
        format_reward(["<think>"])


# ---------------------------------------------------------------------------
# Hackable rewards
# ---------------------------------------------------------------------------


def test_length_reward():
    assert length_reward("one two three", target=6) == 0.5  # 3 words / 6
    assert length_reward("word " * 500) == 1.0  # capped at 1
    assert length_reward("") == 0.0
    with pytest.raises(ValueError, match="target"):
        length_reward("text", target=0)
    with pytest.raises(ValueError, match="target"):
        length_reward("text", target=2.5)
    with pytest.raises(ValueError, match="text"):
        length_reward(3)


def test_connective_coherence_reward():
    assert connective_coherence_reward("6 + 8 = 14, so the answer is 14.") == 1.0  # 1 connective / 1 sentence
    # 2 sentences; "Because" and "thus" are connectives (any case): 2 / 2 = 1.0
    assert connective_coherence_reward("Because it rains, we stay in. Thus we read.") == 1.0
    assert connective_coherence_reward("We read. We sleep. So it goes.") == pytest.approx(1 / 3)
    assert connective_coherence_reward("") == 0.0
    assert connective_coherence_reward("also, some, sofa") == 0.0  # whole words only
    with pytest.raises(ValueError, match="text"):
        connective_coherence_reward(None)


def test_degenerate_responses_beat_an_honest_answer():
    honest = "<think>Mia has 6 apples and gets 8 more, so 6 + 8 = 14.</think> <answer>The answer is 14.</answer>"
    degenerate = degenerate_responses()
    assert set(degenerate) == {"length_reward", "connective_coherence_reward", "format_reward"}
    assert length_reward(degenerate["length_reward"]) == 1.0 > length_reward(honest)
    assert connective_coherence_reward(degenerate["connective_coherence_reward"]) == 100.0
    assert connective_coherence_reward(honest) < 100.0
    assert format_reward(degenerate["format_reward"]) == format_reward(honest) == 1.0
    # None of them answers the question; the honest response does.
    assert math_answer_reward(honest, "14") == 1.0
    for text in degenerate.values():
        assert math_answer_reward(text, "14") == 0.0


# ---------------------------------------------------------------------------
# The checks accept the reference and let an untouched stub through
# ---------------------------------------------------------------------------


@pytest.mark.usefixtures("trusting")
def test_checks_accept_the_reference(capsys):
    assert check_sort_inclusion_ordering_reward(sort_inclusion_ordering_reward) is True
    assert check_math_answer_reward(math_answer_reward) is True
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2 and all(line.startswith("\u2714") for line in out)


def test_checks_let_not_implemented_through():
    def stub(*args, **kwargs):
        raise NotImplementedError("Exercise: write your solution here")

    with pytest.raises(NotImplementedError):
        check_sort_inclusion_ordering_reward(stub)
    with pytest.raises(NotImplementedError):
        check_math_answer_reward(stub)


def test_math_check_names_the_failing_input():
    def always_zero(response_text, ground_truth):
        return 0.0

    with pytest.raises(AssertionError, match=r"returned 0\.0, expected 1\.0") as info:
        check_math_answer_reward(always_zero)
    assert "the answer is 14." in str(info.value)


def test_checks_reject_non_functions():
    with pytest.raises(AssertionError, match="expected a function"):
        check_math_answer_reward(3)
    with pytest.raises(AssertionError, match="expected a function"):
        check_sort_inclusion_ordering_reward("f")
