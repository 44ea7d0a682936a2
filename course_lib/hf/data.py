"""The task a Hugging Face model trains on: prompts with known answers, and the rewards that score them.

Both loops (the course's, ``loop``, and TRL's, ``trl_grpo``) read their prompts and their
rewards from here, so they train on exactly the same thing.

- Problems are ``course_lib.tasks.arithmetic_problems`` (``--task arithmetic``) or the lines
  of a local JSONL file (``--dataset``), each ``{"question": ..., "answer": ...}``.
- A prompt is the question and an instruction to finish with ``Answer: <number>``, passed
  through the tokenizer's chat template when it has one (an instruct model expects it).
- Rewards are the course's own (``course_lib.rewards``): ``answer`` is
  ``math_answer_reward`` (answer extraction, never "the last number in the text");
  ``answer_format`` pays 1 for stating any answer that ``extract_final_answer`` finds
  (a format reward for this task; hackable on its own, as chapter 01 shows, so it is only
  a small weight next to correctness); ``format`` is DeepSeek-R1's think/answer tags
  (``format_reward``); ``length`` is ``length_reward``.
"""

from __future__ import annotations

import json
from pathlib import Path

from course_lib import rewards as course_rewards
from course_lib.tasks import MathProblem, arithmetic_problems

TASKS = ("arithmetic",)
INSTRUCTION = "End with: Answer: <number>"


def load_problems(task: str = "arithmetic", n: int = 64, seed: int = 0, dataset=None) -> list[MathProblem]:
    """The problems to train on: ``n`` generated ones, or every line of a JSONL file.

    Args:
        task: ``"arithmetic"`` (the course's word problems).
        n: how many problems to generate (ignored with ``dataset``).
        seed: seeds the generator.
        dataset: a path to a JSONL file whose lines hold ``"question"`` (or ``"prompt"``) and ``"answer"``.

    Returns:
        A list of ``MathProblem(question, answer)``.
    """
    if task not in TASKS:
        raise ValueError(f"task: expected one of {TASKS}, got {task!r}")
    if dataset is None:
        return arithmetic_problems(n, seed=seed)
    path = Path(dataset)
    if not path.is_file():
        raise ValueError(f"dataset: no such file {str(path)!r} (expected a JSONL file of question/answer lines)")
    problems = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            question = row.get("question", row.get("prompt"))
            answer = row["answer"]
        except (json.JSONDecodeError, KeyError, AttributeError):
            raise ValueError(
                f"dataset: line {number} of {path} is not a JSON object with 'question' and 'answer'"
            ) from None
        if not isinstance(question, str):
            raise ValueError(f"dataset: line {number} of {path} has no 'question' string")
        problems.append(MathProblem(question, str(answer)))
    if not problems:
        raise ValueError(f"dataset: {path} holds no problems")
    return problems


def format_prompt(question: str, tokenizer) -> str:
    """The text a model is prompted with: the question and the answer instruction, chat-templated if possible."""
    content = f"{question}\n{INSTRUCTION}"
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
        )
    return content + "\n"


# ---------------------------------------------------------------------------
# Rewards: the course's functions, one float per completion
# ---------------------------------------------------------------------------


def answer_format_reward(text: str) -> float:
    """1.0 when the response states an answer that ``extract_final_answer`` can find, else 0.0."""
    return float(course_rewards.extract_final_answer(text) is not None)


REWARDS = {
    "answer": lambda text, answer: course_rewards.math_answer_reward(text, answer),
    "answer_format": lambda text, answer: answer_format_reward(text),
    "format": lambda text, answer: course_rewards.format_reward(text),
    "length": lambda text, answer: course_rewards.length_reward(text, target=20),
}
DEFAULT_REWARD_WEIGHTS = {"answer": 1.0, "answer_format": 0.5}


def check_reward_weights(reward_weights: dict) -> dict:
    """Validate ``{reward name: weight}``; returns it as a plain dict of floats."""
    if not isinstance(reward_weights, dict) or not reward_weights:
        raise ValueError(f"reward_weights: expected a non-empty dict of name -> weight, got {reward_weights!r}")
    unknown = sorted(set(reward_weights) - set(REWARDS))
    if unknown:
        raise ValueError(f"reward_weights: unknown rewards {unknown}; expected names among {sorted(REWARDS)}")
    return {name: float(weight) for name, weight in reward_weights.items()}


def score(completions: list[str], answers: list[str], reward_weights: dict = DEFAULT_REWARD_WEIGHTS) -> list[float]:
    """The weighted sum of the chosen rewards for every completion.

    Args:
        completions: ``B * G`` decoded completions.
        answers: the ground truth of each completion's prompt (same length).
        reward_weights: ``{reward name: weight}`` over ``REWARDS``.
    """
    reward_weights = check_reward_weights(reward_weights)
    if len(completions) != len(answers):
        raise ValueError(f"answers: expected one per completion ({len(completions)}), got {len(answers)}")
    return [
        sum(w * REWARDS[name](text, answer) for name, w in reward_weights.items())
        for text, answer in zip(completions, answers)
    ]


def reward_breakdown(completions: list[str], answers: list[str], names=("answer", "answer_format")) -> dict:
    """The mean of each named reward over the completions: what a policy has learned, reward by reward."""
    if len(completions) != len(answers) or not completions:
        raise ValueError(f"answers: expected one per completion ({len(completions)}), got {len(answers)}")
    unknown = sorted(set(names) - set(REWARDS))
    if unknown:
        raise ValueError(f"names: unknown rewards {unknown}; expected names among {sorted(REWARDS)}")
    return {name: sum(REWARDS[name](t, a) for t, a in zip(completions, answers)) / len(completions) for name in names}


def trl_reward_functions(reward_weights: dict = DEFAULT_REWARD_WEIGHTS) -> tuple[list, list[float]]:
    """The same rewards in the form TRL's ``GRPOTrainer`` calls: ``f(completions, answer, **kwargs) -> list[float]``.

    Returns:
        ``(functions, weights)`` for ``GRPOTrainer(reward_funcs=...)`` and ``GRPOConfig(reward_weights=...)``;
        TRL sums ``weight * reward`` as :func:`score` does.
    """
    reward_weights = check_reward_weights(reward_weights)
    functions = []
    for name in reward_weights:

        def reward(completions, answer, _name=name, **kwargs):
            return [REWARDS[_name](text, truth) for text, truth in zip(completions, answer)]

        reward.__name__ = f"{name}_reward"  # TRL logs each reward under its function's name
        functions.append(reward)
    return functions, list(reward_weights.values())
