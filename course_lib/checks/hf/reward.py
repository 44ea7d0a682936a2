"""The check of chapter 09's reward function in TRL's calling convention (reference:
``course_lib.hf.trl_contract.answer_reward``). A reply is turned into a float tensor, NaN for None, as TRL does."""

from __future__ import annotations

import copy
import math
import re

import torch

from course_lib.checks import Case, Mistake, check_against_reference, drawing
from course_lib.hf.trl_contract import answer_reward, completion_text
from course_lib.rewards import math_answer_reward

F64 = torch.float64

# ---------------------------------------------------------------------------
# 1. answer_reward(prompts, completions, answer, **kwargs)
# ---------------------------------------------------------------------------


def _reward_list(result) -> dict:
    """A reward function's reply as ``{"rewards": float64 tensor}``; None becomes NaN, as in TRL."""
    if isinstance(result, torch.Tensor):
        raise TypeError(
            "TRL's contract is a Python list with one float (or None) per completion; return "
            "rewards.tolist() rather than a tensor"
        )
    if isinstance(result, (int, float)):
        raise TypeError(
            "one number for the whole batch; TRL needs one reward per completion, a list as long as completions"
        )
    if not isinstance(result, (list, tuple)):
        raise TypeError(f"TRL needs a list of floats, one per completion, got {type(result).__name__}")
    values = []
    for i, reward in enumerate(result):
        if reward is not None and not isinstance(reward, (int, float)):
            raise TypeError(
                f"reward [{i}] is a {type(reward).__name__}; each reward is a float, or None for "
                "no reward (use float(...))"
            )
        values.append(math.nan if reward is None else float(reward))
    return {"rewards": torch.tensor(values, dtype=F64)}


def _reward_cases() -> list[Case]:
    G = 3
    questions = ["What is 5 + 7?", "What is 9 - 2?"]
    texts = ["5 + 7 = 12. Answer: 12", "Answer: 13", "I think it is 12", "Answer: 7", "\\boxed{7}", "7 apples"]
    answers = ["12", "7"]
    plain_prompts = [q for q in questions for _ in range(G)]  # TRL repeats every prompt G times...
    repeated = [a for a in answers for _ in range(G)]  # ...and every column with it
    chat = [[{"role": "user", "content": q}] for q in plain_prompts]
    said = [[{"role": "assistant", "content": t}] for t in texts]
    tools = [
        [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "calculator", "arguments": {"expression": q.split("is ")[1].rstrip("?")}},
                    }
                ],
            },
            {"role": "tool", "name": "calculator", "content": a},
            {"role": "assistant", "content": f"Answer: {a if i % 2 == 0 else '0'}"},
        ]
        for i, (q, a) in enumerate(zip(plain_prompts, repeated))
    ]
    ids = [[5, 6, 0]] * len(texts)
    extra = {"completion_ids": ids, "trainer_state": None, "level": ["easy"] * len(texts)}
    three = ["What is 1 + 1?", "What is 4 - 2?", "What is 3 + 4?"]
    return [
        Case(
            "B=2 prompts, G=3 plain-text completions each (TRL repeats each answer G times)",
            {"prompts": plain_prompts, "completions": texts, "answer": repeated, **extra},
        ),
        Case(
            "conversational: prompts and completions are lists of messages",
            {"prompts": chat, "completions": said, "answer": repeated, **extra},
        ),
        Case(
            "a tool call: each completion is three messages (call, result, answer); the answer is in the last",
            {"prompts": chat, "completions": tools, "answer": repeated, **extra},
        ),
        Case(
            "rows without an answer (answer None: no reward from this function) beside rows with one",
            {"prompts": plain_prompts, "completions": texts, "answer": ["12", "12", "12", None, None, None], **extra},
        ),
        Case(
            "answers in another numeric format: 12.0, 1,000 and $7$ (numbers compare as numbers)",
            {
                "prompts": [q for q in three for _ in range(2)],
                "answer": ["12", "12", "1000", "1000", "7", "7"],
                "completions": ["Answer: 12.0", "Answer: 12.5", "Answer: 1,000", "Answer: 100", "Answer: $7$", "7"],
                "completion_ids": [[5, 0]] * 6,
            },
        ),
        Case(
            "two assistant messages, a draft then the final word: only the last message is the completion's answer "
            "(the first row's last message states none; the second's says 7 after a draft of 12)",
            {
                "prompts": [[{"role": "user", "content": q}] for q in ("What is 5 + 7?", "What is 3 + 4?")],
                "answer": ["12", "7"],
                "completions": [
                    [
                        {"role": "assistant", "content": "Answer: 12"},
                        {"role": "assistant", "content": "Let me check that again."},
                    ],
                    [{"role": "assistant", "content": "Answer: 12"}, {"role": "assistant", "content": "7"}],
                ],
                "completion_ids": [[5, 0]] * 2,
            },
        ),
        Case(
            "few-shot prompts that hold a worked example ('Answer: 4'), and completions that correct themselves "
            "('Answer: 5. No, wait. Answer: 4'): the final answer is the last one stated, in the completion",
            {
                "prompts": ["Q: 2 + 2? Answer: 4\nQ: 1 + 3?"] * 2 + ["Q: 2 + 2? Answer: 4\nQ: 6 + 7?"] * 2,
                "answer": ["4", "4", "13", "13"],
                "completions": ["Answer: 5. No, wait. Answer: 4", "Answer: 4. Hmm, no: Answer: 5", "13", "Answer: 12"],
                "completion_ids": [[5, 0]] * 4,
            },
        ),
        Case(
            "B=3 prompts, G=2, two prompts with the same answer",
            {
                "prompts": [q for q in three for _ in range(2)],
                "answer": ["2", "2", "2", "2", "7", "7"],
                "completions": ["Answer: 2", "Answer: 3", "Answer: 2", "Answer: 2", "Answer: 2", "Answer: 7"],
                "completion_ids": [[5, 0]] * 6,
            },
        ),
    ]


def _draw_rewards(g: torch.Generator) -> list[Case]:
    """Fresh batches as TRL builds them: B prompts repeated G times, plain, conversational or with a tool call,
    answers right, wrong or missing (None), written in each of the answer formats, with other columns beside."""
    cases = []
    for kind in ("plain", "conversational", "tool"):
        B, G = drawing.integer(g, 1, 3), drawing.integer(g, 1, 4)
        sums = [(drawing.integer(g, 1, 99), drawing.integer(g, 1, 99)) for _ in range(B)]
        questions = [f"What is {a} + {b}?" for a, b in sums for _ in range(G)]
        per_prompt = [None if drawing.integer(g, 0, 3) == 0 else str(a + b) for a, b in sums]  # None: no answer
        truths = [truth for truth in per_prompt for _ in range(G)]  # TRL repeats every column G times
        texts = []
        for a, b in [s for s in sums for _ in range(G)]:
            said = str(drawing.choice(g, (a + b, a + b, a + b + 1, a * b)))
            texts.append(drawing.choice(g, (f"Answer: {said}", f"{a} + {b} = {said}", f"\\boxed{{{said}}}", said)))
        if kind == "plain":
            prompts, completions = questions, texts
        else:
            prompts = [[{"role": "user", "content": q}] for q in questions]
            completions = [[{"role": "assistant", "content": t}] for t in texts]
            if kind == "tool":
                completions = [
                    [{"role": "assistant", "content": "", "tool_calls": []}, {"role": "tool", "content": "?"}] + c
                    for c in completions
                ]
        extra = {
            "completion_ids": [[5, 0]] * len(texts),
            drawing.choice(g, ("level", "source", "topic")): ["x"] * len(texts),
        }
        cases.append(
            Case(
                f"B={B} prompts, G={G} {kind} completions each, answers {truths}",
                {"prompts": prompts, "completions": completions, "answer": truths, **extra},
            )
        )
    return cases


def _string_score(text: str, truth: str) -> float:
    """What follows the last 'Answer:' compared with the ground truth as a string, nothing normalised."""
    if "Answer:" not in text:
        return math_answer_reward(text, truth)
    return float(text.rsplit("Answer:", 1)[-1].strip() == truth.strip())


def _last_number(text: str, truth: str) -> float:
    """The last number anywhere in the text (thousands separators dropped), compared with the truth as a number."""
    numbers = re.findall(r"-?\d+(?:\.\d+)?", text.replace(",", ""))
    try:
        return float(bool(numbers) and float(numbers[-1]) == float(truth))
    except ValueError:
        return 0.0


def _first_marker(text: str, truth: str) -> float:
    """math_answer_reward of what follows the first 'Answer:' of the text (the last one elsewhere)."""
    if "Answer:" in text:
        text = "Answer: " + text.split("Answer:")[1].strip()
    return math_answer_reward(text, truth)


def _reward_with(
    *, text=completion_text, none=None, align="same", dedupe=False, score=math_answer_reward, source="completions"
):
    def wrong(prompts, completions, answer, **kwargs):
        firsts = [i for i, p in enumerate(prompts) if prompts.index(p) == i]  # each distinct prompt once
        if dedupe:  # one reward per prompt
            return [score(text(completions[i]), answer[i]) for i in firsts]
        G = len(completions) // len(firsts) if align == "per_prompt" else 1
        scored = prompts if source == "prompts" else completions
        return [none if answer[i // G] is None else score(text(c), answer[i // G]) for i, c in enumerate(scored)]

    return wrong


def _reward_without_missing(prompts, completions, answer, **kwargs):
    """The rows whose answer is None left out of the list (it no longer lines up with completions)."""
    return [math_answer_reward(completion_text(c), a) for c, a in zip(completions, answer) if a is not None]


def _reward_hint(message: str) -> str:
    """A crash of a reward function, explained by how TRL calls it."""
    if "unexpected keyword argument" in message:
        return (
            "TRL calls a reward function with every dataset column and more (completion_ids, trainer_state, "
            "log_extra, log_metric) as keyword arguments: end its signature with **kwargs"
        )
    if "required positional argument" in message or "required keyword" in message:
        return (
            "TRL passes arguments by name only: prompts=, completions=, and each dataset column under its "
            "column's name; a parameter named otherwise (solution, target) is never given: call it answer"
        )
    if "unhashable" in message:
        return (
            "conversational prompts are lists of messages (no set or dict key); TRL already repeated every "
            "column per completion: zip(completions, answer)"
        )
    if "NoneType" in message:
        return "some rows have answer None: return None for them (TRL's 'no reward')"
    if "got list" in message or "'list' object" in message or "'dict' object" in message:
        return "a conversational completion is a list of messages: its text is completion[-1]['content']"
    return ""


def check_answer_reward(fn) -> bool:
    """Check a student's ``answer_reward(prompts, completions, answer, **kwargs)``, called as TRL calls it."""
    mistakes = [
        Mistake(
            "TRL has already repeated each row's columns G times: answer[i] belongs to completions[i]; "
            "indexing answer[i // G] (one answer per prompt) scores completions against other prompts' answers",
            _reward_with(align="per_prompt"),
        ),
        Mistake(
            "one reward per distinct prompt; TRL needs one per completion (B * G): the G completions of a "
            "prompt are scored one by one against the same answer",
            _reward_with(dedupe=True),
        ),
        Mistake(
            "a conversational completion is a list of messages; str() of it is not its text: take "
            "completion[-1]['content']",
            _reward_with(text=lambda c: c if isinstance(c, str) else str(c)),
        ),
        Mistake(
            "the text is in the last message (after a tool call and its result), not the first: "
            "completion[-1]['content']",
            _reward_with(text=lambda c: c if isinstance(c, str) else c[0]["content"]),
        ),
        Mistake(
            "the text is every message of the completion joined; an earlier message (a draft, a tool's result) is "
            "not the answer: score the last message only, completion[-1]['content']",
            _reward_with(text=lambda c: c if isinstance(c, str) else "\n".join(m["content"] for m in c)),
        ),
        Mistake(
            "the answers are compared as strings: '12.0' is 12 and '1,000' is 1000; score each completion with "
            "chapter 01's math_answer_reward(text, answer), which compares numbers as numbers",
            _reward_with(score=_string_score),
        ),
        Mistake(
            "the answer is taken as the last number in the text; chapter 01's rule reads only a \\boxed{...} or the "
            "text after the last 'Answer:' (or 'the answer is'), never the last number ('I think it is 12' states "
            "no answer): score with math_answer_reward(text, answer)",
            _reward_with(score=_last_number),
        ),
        Mistake(
            "the reward is 1 whenever the answer appears somewhere in the text ('12' is in '12.5' and in 'not 12'): "
            "extract the final answer first, math_answer_reward(text, answer)",
            _reward_with(score=lambda text, truth: float(truth.strip() in text)),
        ),
        Mistake(
            "the whole completion is compared with the answer, so 'Answer: 12' never equals '12': extract the "
            "final answer first, math_answer_reward(text, answer)",
            _reward_with(score=lambda text, truth: float(text.strip() == truth.strip())),
        ),
        Mistake(
            "the answer is read after the first 'Answer:'; a completion that corrects itself states its final "
            "answer last: the text after the last 'Answer:' counts (math_answer_reward reads it so)",
            _reward_with(score=_first_marker),
        ),
        Mistake(
            "math_answer_reward's arguments are swapped, so no answer is ever found (every reward 0): it takes "
            "(response_text, ground_truth), math_answer_reward(text, answer)",
            _reward_with(score=lambda text, truth: math_answer_reward(truth, text)),
        ),
        Mistake(
            "the prompts are scored, not the completions: the text to score is completions[i] (its last message "
            "when it is a conversation)",
            _reward_with(source="prompts"),
        ),
        Mistake(
            "a wrong answer gets -1; math_answer_reward's reward is 1.0 for a right answer and 0.0 for a wrong one",
            _reward_with(score=lambda text, truth: 2.0 * math_answer_reward(text, truth) - 1.0),
        ),
        Mistake(
            "the rows whose answer is None are left out, so the rewards no longer line up with the completions: "
            "TRL needs one entry per completion, None where the row has no answer",
            _reward_without_missing,
        ),
        Mistake(
            "a row with answer None gets 0.0, a punishment; return None: TRL reads it as no reward (NaN) and "
            "leaves it out of the sum over reward functions",
            _reward_with(none=0.0),
        ),
    ]
    try:
        return check_against_reference(
            fn,
            answer_reward,
            _reward_cases(),
            name="answer_reward",
            mistakes=mistakes,
            outputs=_reward_list,
            dtypes=(F64,),
            draw=_draw_rewards,
            check_dtype=True,
        )
    except AssertionError as error:
        hint = _reward_hint(str(error))
        first, _, rest = str(error).partition("\n")
        if hint and "raised" in first:
            # On the first line, where a student reads first: the crash, then how TRL's call explains it.
            raise AssertionError(f"{first} ({hint})\n{rest}") from None
        row = _first_row_that_differs(fn) if first.startswith("answer_reward: rewards differs") else None
        if row is not None:
            raise AssertionError(f"{first}; {row}\n{rest}") from None
        raise


def _first_row_that_differs(fn) -> str | None:
    """The first completion of the fixed cases whose reward differs from the reference's, in words; None when the
    lists do not line up row by row (a length, a crash: the plain difference says it)."""
    for case in _reward_cases():
        try:
            got = fn(**copy.deepcopy(case.kwargs))
        except Exception:  # noqa: BLE001 - the check itself has said what a crash says
            return None
        expected = answer_reward(**copy.deepcopy(case.kwargs))
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return None
        for completion, truth, want, have in zip(case.kwargs["completions"], case.kwargs["answer"], expected, got):
            if want != have:
                return (
                    f"the first row that differs is the completion {completion_text(completion)!r} with answer "
                    f"{truth!r}: math_answer_reward(text, answer) gives {want}, yours {have}. Is the final answer "
                    "found and compared as chapter 01's math_answer_reward does it (\\boxed{...} first, then the "
                    "last 'Answer:'; '12.0' = '12', '1,000' = '1000', '$7$' = '7')? Calling it does both"
                )
    return None
