"""Tests for course_lib.tasks: the sorting prompts and the arithmetic word problems."""

import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.rewards import math_answer_reward
from course_lib.tasks import (
    MathProblem,
    SortingTask,
    arithmetic_problems,
    random_sorting_prompts,
    sorted_responses,
    sorting_prompts,
    uniform_random_responses,
)

# ---------------------------------------------------------------------------
# Sorting
# ---------------------------------------------------------------------------


def test_sorting_prompts_are_the_lectures_three():
    prompts = sorting_prompts()
    assert prompts.dtype == torch.long
    assert prompts.tolist() == [[1, 0, 2], [3, 2, 4], [1, 2, 3]]


def test_sorting_task_from_the_lecture_prompts():
    task = SortingTask.from_prompts(sorting_prompts())
    # The largest token is 4, so the vocabulary is {0, ..., 4}: V = 4 + 1 = 5.
    assert task.vocab_size == 5
    assert task.prompt_length == 3
    assert task.num_prompts == 3
    assert task.targets().tolist() == [[0, 1, 2], [2, 3, 4], [1, 2, 3]]


def test_sorting_task_explicit_vocab_size():
    task = SortingTask.from_prompts(sorting_prompts(), vocab_size=10)
    assert task.vocab_size == 10


def test_sorting_task_rejects_bad_fields():
    prompts = sorting_prompts()
    with pytest.raises(ValueError, match="prompts"):
        SortingTask(vocab_size=5, prompt_length=4, prompts=prompts)  # length 3, not 4
    with pytest.raises(ValueError, match="prompts"):
        SortingTask(vocab_size=4, prompt_length=3, prompts=prompts)  # token 4 is outside [0, 4)
    with pytest.raises(ValueError, match="prompts"):
        SortingTask(vocab_size=5, prompt_length=3, prompts=prompts.float())
    with pytest.raises(ValueError, match="vocab_size"):
        SortingTask(vocab_size=0, prompt_length=3, prompts=prompts)
    with pytest.raises(ValueError, match="prompt_length"):
        SortingTask(vocab_size=5, prompt_length=2.5, prompts=prompts)
    with pytest.raises(ValueError, match="prompts"):
        SortingTask.from_prompts(prompts[0])  # (T,), not (B, T)
    with pytest.raises(ValueError, match="prompts"):
        SortingTask.from_prompts([[1, 0, 2]])


def test_random_sorting_prompts_shape_range_and_distinctness():
    prompts = random_sorting_prompts(50, 4, 7, seed=3)
    assert prompts.shape == (50, 4) and prompts.dtype == torch.long
    assert int(prompts.min()) >= 0 and int(prompts.max()) < 7
    assert all(len(set(row)) == 4 for row in prompts.tolist())


def test_random_sorting_prompts_is_seeded():
    assert torch.equal(random_sorting_prompts(5, 3, 5, seed=0), random_sorting_prompts(5, 3, 5, seed=0))
    assert not torch.equal(random_sorting_prompts(20, 3, 9, seed=0), random_sorting_prompts(20, 3, 9, seed=1))


def test_random_sorting_prompts_are_roughly_uniform():
    # 6000 single-token prompts over V = 6: each token expected 1000 times, std about 29.
    counts = torch.bincount(random_sorting_prompts(6000, 1, 6, seed=0).flatten(), minlength=6)
    assert ((counts - 1000).abs() < 150).all(), counts


@settings(max_examples=50, deadline=None)
@given(n=st.integers(0, 8), vocab_size=st.integers(1, 9), data=st.data())
def test_random_sorting_prompts_property(n, vocab_size, data):
    length = data.draw(st.integers(1, vocab_size))
    seed = data.draw(st.integers(0, 2**31 - 1))
    prompts = random_sorting_prompts(n, length, vocab_size, seed=seed)
    assert prompts.shape == (n, length)
    for row in prompts.tolist():
        assert len(set(row)) == length and all(0 <= x < vocab_size for x in row)


def test_random_sorting_prompts_bad_arguments():
    with pytest.raises(ValueError, match="length"):
        random_sorting_prompts(3, 6, 5)  # six distinct integers cannot come from a vocabulary of five
    with pytest.raises(ValueError, match="n"):
        random_sorting_prompts(-1, 3, 5)
    with pytest.raises(ValueError, match="vocab_size"):
        random_sorting_prompts(3, 3, 0)
    with pytest.raises(ValueError, match="length"):
        random_sorting_prompts(3, 0, 5)
    with pytest.raises(ValueError, match="seed"):
        random_sorting_prompts(3, 3, 5, seed=1.5)


def test_sorted_responses_any_leading_shape():
    prompts = torch.tensor([[[3, 1, 2], [0, 2, 1]]])  # (1, 2, 3)
    assert sorted_responses(prompts).tolist() == [[[1, 2, 3], [0, 1, 2]]]
    assert sorted_responses(torch.tensor([2, 0, 1], dtype=torch.int32)).dtype == torch.int32
    with pytest.raises(ValueError, match="prompts"):
        sorted_responses(torch.tensor([0.5, 1.0]))


def test_uniform_random_responses():
    prompts = sorting_prompts()
    responses = uniform_random_responses(prompts, group_size=4, vocab_size=5, seed=0)
    assert responses.shape == (3, 4, 3) and responses.dtype == torch.long
    assert int(responses.min()) >= 0 and int(responses.max()) < 5
    assert torch.equal(responses, uniform_random_responses(prompts, 4, 5, seed=0))
    with pytest.raises(ValueError, match="group_size"):
        uniform_random_responses(prompts, 0, 5)
    with pytest.raises(ValueError, match="vocab_size"):
        uniform_random_responses(prompts, 2, 0)
    with pytest.raises(ValueError, match="prompts"):
        uniform_random_responses(prompts[0], 2, 5)


# ---------------------------------------------------------------------------
# Arithmetic word problems
# ---------------------------------------------------------------------------


def _solve(question: str) -> int:
    """Recompute a problem's answer from its words (an independent reading of the templates)."""
    a, b = (int(x) for x in re.findall(r"\d+", question))
    if "more" in question:
        return a + b
    if "gives away" in question:
        return a - b
    if "bags" in question:
        return a * b
    assert "equally" in question
    return a // b


def test_arithmetic_problems_are_deterministic_and_correct():
    problems = arithmetic_problems(40, seed=5)
    assert problems == arithmetic_problems(40, seed=5)
    assert problems != arithmetic_problems(40, seed=6)
    assert len(problems) == 40
    for question, answer in problems:
        assert isinstance(question, str) and question.endswith("?")
        assert answer == str(_solve(question))
        assert 0 <= int(answer) < 200


def test_arithmetic_problems_use_all_four_templates():
    questions = [p.question for p in arithmetic_problems(60, seed=0)]
    for word in ("more", "gives away", "bags", "equally"):
        assert any(word in q for q in questions), word


def test_arithmetic_problem_is_a_named_pair():
    problem = arithmetic_problems(1, seed=0)[0]
    assert isinstance(problem, MathProblem)
    question, answer = problem
    assert (question, answer) == (problem.question, problem.answer)


def test_arithmetic_answers_score_with_the_math_reward():
    for _question, answer in arithmetic_problems(10, seed=1):
        assert math_answer_reward(f"Let me work it out. The answer is {answer}.", answer) == 1.0


def test_arithmetic_problems_bad_arguments():
    assert arithmetic_problems(0) == []
    with pytest.raises(ValueError, match="n"):
        arithmetic_problems(-2)
    with pytest.raises(ValueError, match="seed"):
        arithmetic_problems(3, seed="x")
