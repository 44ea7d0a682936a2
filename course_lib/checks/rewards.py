"""The exercise checks of chapter 01 (rewards): edge cases and classic mistakes.

They sit in their own file so that ``course_lib/rewards.py`` reads as the reward
functions alone; ``course_lib.rewards`` re-exports every ``check_*``.
"""

from __future__ import annotations

import torch

from course_lib.checks import (
    Case,
    Mistake,
    check_against_reference,
    drawing,
    forget_pass,
    record_pass,
    recording,
    scalar_reply,
)
from course_lib.checks.math_reward_mistakes import MATH_MISTAKES as _MATH_MISTAKES
from course_lib.checks.rewards_mistakes import (
    SORT_MISTAKES_MORE,
    inclusion_of,
    mistake_gated_ordering,
    mistake_isin_whole_batch,
    mistake_missing_pair,
    mistake_positionwise,
    mistake_response_in_prompt,
    mistake_set_intersection,
    mistake_strict_order,
    mistake_wrapped_pairs,
    ordering_of,
)
from course_lib.rewards import (
    math_answer_reward,
    sort_inclusion_ordering_reward,
)


def check_sort_inclusion_ordering_reward(fn) -> bool:
    """Check a student's ``sort_inclusion_ordering_reward`` against the reference."""
    g = torch.Generator().manual_seed(17)
    t = lambda rows: torch.tensor(rows, dtype=torch.long)  # noqa: E731
    cases = [
        Case(
            "the lecture's example: prompt [3, 1, 0, 2], response [0, 1, 2, 3] (4 + 3 = 7)",
            {"prompt": t([3, 1, 0, 2]), "response": t([0, 1, 2, 3])},
        ),
        Case(
            "a single token: prompt [3], response [3] (1 + 0 = 1: no pairs at all)",
            {"prompt": t([3]), "response": t([3])},
        ),
        Case(
            "the lecture's partial credit: prompt [3, 1, 0, 2], response [7, 2, 2, 5] (1 + 2 = 3)",
            {"prompt": t([3, 1, 0, 2]), "response": t([7, 2, 2, 5])},
        ),
        Case(
            "a response repeating one token: prompt [1, 0, 2], response [2, 2, 2] (1 + 2 = 3)",
            {"prompt": t([1, 0, 2]), "response": t([2, 2, 2])},
        ),
        Case(
            "response tokens that are not in the prompt: prompt [1, 0, 2], response [4, 3, 4] (0 + 1 = 1)",
            {"prompt": t([1, 0, 2]), "response": t([4, 3, 4])},
        ),
        Case(
            "an already-sorted prompt answered correctly: [0, 1, 2] -> [0, 1, 2] (3 + 2 = 5)",
            {"prompt": t([0, 1, 2]), "response": t([0, 1, 2])},
        ),
        Case(
            "the reversed answer: prompt [1, 0, 2], response [2, 1, 0] (3 + 0 = 3)",
            {"prompt": t([1, 0, 2]), "response": t([2, 1, 0])},
        ),
        Case(
            "a prompt with a repeated token: prompt [2, 2, 1], response [1, 2, 1] (3 + 1 = 4)",
            {"prompt": t([2, 2, 1]), "response": t([1, 2, 1])},
        ),
        Case(
            "the lecture's three prompts, each with a different response, shape (3, 3)",
            {"prompt": t([[1, 0, 2], [3, 2, 4], [1, 2, 3]]), "response": t([[0, 1, 2], [4, 3, 2], [1, 1, 3]])},
        ),
        Case(
            "a batch of 6 prompts of length 5 with random responses, shape (6, 5)",
            {
                "prompt": torch.rand(6, 8, generator=g).argsort(-1)[:, :5],
                "response": torch.randint(0, 8, (6, 5), generator=g),
            },
        ),
        Case(
            "2 prompts of shape (2, 1, 4) against a group of 3 responses each, shape (2, 3, 4) (broadcasting)",
            {
                "prompt": torch.rand(2, 1, 6, generator=g).argsort(-1)[..., :4],
                "response": torch.randint(0, 6, (2, 3, 4), generator=g),
            },
        ),
    ]
    mistakes = [
        Mistake(
            "you count pairs with response[t] < response[t + 1]; the ordering point is for a "
            "non-decreasing pair (<=), so a repeated token such as [2, 2] earns it",
            mistake_strict_order,
        ),
        Mistake(
            "you count the response tokens that appear in the prompt; count the prompt tokens that "
            "appear in the response, so repeating one right token cannot collect several points",
            mistake_response_in_prompt,
        ),
        Mistake(
            "torch.isin(prompt, response) tests each prompt token against every response token of the whole "
            "batch, not only its own row's: compare within each row, "
            "(prompt[..., :, None] == response[..., None, :]).any(-1)",
            mistake_isin_whole_batch,
        ),
        Mistake(
            "you count the distinct values shared by prompt and response (a set intersection); "
            "count each prompt position whose token appears in the response",
            mistake_set_intersection,
        ),
        Mistake(
            "you give the ordering points only when every prompt token is included; the two parts "
            "are independent: always add both",
            mistake_gated_ordering,
        ),
        Mistake(
            "you compare T pairs, wrapping from the last token back to the first (as torch.roll does); "
            "a response has T - 1 adjacent pairs: response[..., :-1] against response[..., 1:]",
            mistake_wrapped_pairs,
        ),
        Mistake(
            "you compare only T - 2 adjacent pairs; response[..., :-1] <= response[..., 1:] gives all T - 1",
            mistake_missing_pair,
        ),
        Mistake(
            "the inclusion points are missing: add one point for each prompt token that appears in the response",
            lambda prompt, response: ordering_of(response).float(),
        ),
        Mistake(
            "the ordering points are missing: add one point for each adjacent pair with response[t] <= response[t + 1]",
            lambda prompt, response: inclusion_of(prompt, response).float(),
        ),
        Mistake(
            "you count the positions where the response equals the sorted prompt (another reward of "
            "the lecture); this one adds inclusion points and ordering points",
            mistake_positionwise,
        ),
        *SORT_MISTAKES_MORE,
    ]
    return check_against_reference(
        fn,
        sort_inclusion_ordering_reward,
        cases,
        name="sort_inclusion_ordering_reward",
        mistakes=mistakes,
        outputs=_float_rewards,
        dtypes=(torch.int64,),
        draw=_draw_sorting,
        check_dtype=True,
    )


def _draw_sorting(g: torch.Generator) -> list[Case]:
    """Fresh prompts (a permutation of a few tokens, or tokens repeated) and responses (random, the sorted prompt,
    one token repeated), in batches and broadcast groups."""
    cases = []
    for _ in range(3):
        B, T, V = drawing.integer(g, 1, 5), drawing.integer(g, 1, 6), drawing.integer(g, 6, 10)
        prompt = torch.rand(B, V, generator=g).argsort(-1)[:, :T]
        if drawing.integer(g, 0, 1):
            prompt = torch.randint(0, V, (B, T), generator=g)
        response = drawing.choice(
            g,
            (
                torch.randint(0, V, (B, T), generator=g),
                prompt.sort(-1).values,
                prompt[:, :1].expand(B, T).clone(),
            ),
        )
        cases.append(
            Case(f"prompts {prompt.tolist()}, responses {response.tolist()}", {"prompt": prompt, "response": response})
        )
    prompt = torch.rand(2, 1, 7, generator=g).argsort(-1)[..., :4]
    response = torch.randint(0, 7, (2, 3, 4), generator=g)
    cases.append(
        Case(
            "prompts of shape (2, 1, 4) against groups of 3 responses (2, 3, 4)",
            {"prompt": prompt, "response": response},
        )
    )
    return cases


def _float_rewards(result):
    if isinstance(result, torch.Tensor) and not result.is_floating_point():
        raise TypeError(f"expected a floating-point tensor of rewards, got dtype {result.dtype}: convert with .float()")
    return {"output": result}


# Classic wrong implementations, built from the two halves of the reward.
_MATH_CASES = [
    # (response_text, ground_truth, expected, what the case tests)
    ("6 + 8 = 14, so the answer is 14.", "14", 1.0, "'the answer is' with a trailing period"),
    ("\\boxed{14}", "14", 1.0, "a boxed answer"),
    ("So $x = \\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}", 1.0, "nested braces inside \\boxed{...}"),
    ("The answer is 1,000", "1000", 1.0, "a thousands separator"),
    ("The answer is 1000.", "1,000", 1.0, "a thousands separator in the ground truth"),
    ("The answer is 1,234,567", "1234567", 1.0, "two thousands separators"),
    ("Answer: 14.0", "14", 1.0, "'Answer:' and a number written as 14.0"),
    ("The answer is 2.50", "2.5", 1.0, "numbers compared as numbers"),
    ("The answer is 3.75. I rounded it.", "3.75", 1.0, "a decimal answer: only its second '.' ends the sentence"),
    ("The answer is 14", " 14 ", 1.0, "whitespace around the ground truth"),
    ("the ANSWER is 14", "14", 1.0, "a statement in another case"),
    ("The answer is $14$.", "14", 1.0, "dollar signs and a trailing period"),
    ("Answer: $14", "14", 1.0, "a currency dollar sign"),
    ("The answer is 14. I checked it by counting again.", "14", 1.0, "more text after the answer's sentence"),
    ("The answer is -3.", "-3", 1.0, "a negative answer"),
    ("The answer is -2.50", "-2.5", 1.0, "a negative decimal with a trailing zero: the sign is part of the number"),
    ("The answer is +5", "5", 1.0, "a number with a plus sign: +5 is 5"),
    ("<answer>The answer is 14</answer>", "14", 1.0, "a closing tag: the next '<' ends the answer"),
    ("\\boxed{7}", "7", 1.0, "an answer of one character"),
    ("The answer is (1, 2", "(1, 2)", 0.0, "an unclosed pair: a ')' that closes something is kept"),
    ("The answer is 14)", "14)", 1.0, "a ')' after the answer and after the ground truth: both normalised alike"),
    ("The answer is 14)", "15)", 0.0, "a ')' after a wrong answer and after the ground truth"),
    ("Answer: b) 15", "b) 14", 0.0, "a wrong answer after an unmatched ')'"),
    ("Answer: ) 15", ") 15", 1.0, "an answer that begins with an unmatched ')'"),
    ("Answer: 14;\nI added 6 and 8.", "14", 1.0, "a line break ends the answer, and the ';' before it is stripped"),
    ("I could not solve this one.", "14", 0.0, "no answer at all"),
    ("6 + 8 = 14", "14", 0.0, "the right number, but no answer statement"),
    ("Maybe 12, or 13, or 14", "14", 0.0, "candidates listed, none stated as the answer"),
    ("The answer is 12. No wait, the answer is 14.", "14", 1.0, "two answers: the last counts"),
    ("The answer is 12. No wait, the answer is 14.", "12", 0.0, "two answers: the first does not count"),
    ("At first I thought the answer is 12, but \\boxed{14}", "14", 1.0, "\\boxed{...} before 'the answer is'"),
    ("The answer is 15.", "14", 0.0, "a wrong answer"),
    ("The answer is 140", "14", 0.0, "an answer that contains the ground truth"),
    ("First \\boxed{12}, then checked: \\boxed{14}", "14", 1.0, "\\boxed{...} twice: the last counts"),
    ("First \\boxed{12}, then checked: \\boxed{14}", "12", 0.0, "\\boxed{...} twice: the first does not count"),
    (
        "\\boxed{14} is what I get, not \\boxed{15",
        "14",
        1.0,
        "an unclosed \\boxed{ last: the last box that closes counts",
    ),
    ("The answer is x + 1.", "x + 1", 1.0, "a stated answer that is not a number"),
    ("The answer is blue.", "red", 0.0, "a wrong stated answer that is not a number"),
    ("The answer is fourteen.", "14", 0.0, "an answer in words against a number: they compare as strings"),
    ("The answer is 2.5", "2", 0.0, "a decimal answer against a whole number: 2.5 is not 2"),
    ("The answer is 1,2", "12", 0.0, "a comma that is no thousands separator: '1,2' is not 12"),
    ("The answer is 14.2", "14", 0.0, "an answer close to the ground truth is still another number"),
]


def check_math_answer_reward(fn) -> bool:
    """Check a student's ``math_answer_reward`` on a table of responses (strings, not tensors)."""
    name = "math_answer_reward"
    forget_pass(fn)  # until this run of the check passes
    if not callable(fn):
        raise AssertionError(f"{name}: expected a function, got {type(fn).__name__}")
    session = recording.current()
    # At grading, fresh responses too; their answers are not known in the grading kernel (the judge scores them).
    cases = _MATH_CASES + (_drawn_math(session.seed, scored=session.mode == "judge") if session is not None else [])
    # Every case is asked before any is judged: the grading kernel records the replies, the judge replays them.
    student = [_run_math(fn, response_text, ground_truth, d) for response_text, ground_truth, _, d in cases]
    for (response_text, ground_truth, expected, description), got in zip(cases, student):
        if expected is not None and got != expected:
            _fail_math(name, response_text, ground_truth, expected, got, description, cases, student)
    recording.report(f"\u2714 {name}: correct on all {len(_MATH_CASES)} cases.")
    record_pass(name, fn)
    return True


def _run_math(fn, response_text, ground_truth, description, name="math_answer_reward"):
    """The student's reward as a float (recorded in the grading kernel, replayed by the grader)."""
    return recording.replayable(lambda: _ask_math(fn, response_text, ground_truth, description, name))


def _ask_math(fn, response_text, ground_truth, description, name):
    return scalar_reply(
        fn,
        name,
        f"{name}({response_text!r}, {ground_truth!r})",
        kwargs={"response_text": response_text, "ground_truth": ground_truth},
        what="a float (1.0 or 0.0)",
        context=f"\n  on the case: {description}",
    )


def _drawn_math(seed: int, scored: bool) -> list[tuple]:
    """Fresh responses for grading, each scored by the reference when ``scored`` (else None): numbers drawn,
    written in every answer format, right, wrong, or never stated."""
    g = torch.Generator().manual_seed(seed * 1000 + 999)
    drawn = []
    for _ in range(8):
        truth = drawing.integer(g, -50, 5000)
        said = drawing.choice(g, (truth, truth, truth + drawing.integer(g, 1, 9), truth * 10))
        shown = drawing.choice(g, (f"{said}", f"{said:,}", f"{said}.0"))
        template = drawing.choice(
            g,
            (
                "The answer is {x}.",
                "\\boxed{{{x}}}",
                "Answer: {x}",
                "So the answer is ${x}$.",
                "{x}",
                "I get {x}, maybe.",
            ),
        )
        text = template.format(x=shown)
        truth_text = drawing.choice(g, (str(truth), f"{truth:,}", f" {truth} "))
        expected = math_answer_reward(text, truth_text) if scored else None  # never scored in the grading kernel
        drawn.append((text, truth_text, expected, f"a case drawn at grading time: {text!r}"))
    return drawn


def _fail_math(name, response_text, ground_truth, expected, got, description, cases, student):
    # A mistake explains the failure only when it gives the student's reward on every case whose answer is
    # known: each error of the student's is the mistake's, and each error of the mistake's is the student's.
    for mistake in _MATH_MISTAKES:
        try:
            wrong = [float(mistake.fn(r, g)) for r, g, _, _ in cases]
        except Exception:  # noqa: BLE001 - a mistake that crashes tells nothing
            continue
        known = [i for i, case in enumerate(cases) if case[2] is not None]
        if all(student[i] == wrong[i] for i in known):
            raise AssertionError(
                f"{name}: {mistake.message}\n  seen on the case: {description}: "
                f"{name}({response_text!r}, {ground_truth!r}) returned {got}, expected {expected}"
            )
    raise AssertionError(
        f"{name}({response_text!r}, {ground_truth!r}) returned {got}, expected {expected}\n  on the case: {description}"
    )
