"""Tests of chapter 10's task (course_lib.tasks_reasoning): the two answer styles, the filler, the verifier."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.tasks import AdditionTask
from course_lib.tasks_reasoning import STYLES, ScratchpadAdditionTask, completion_style, parse_completion


def _ids(task, texts):
    """Completions as ids, PAD after the text (a text may hold EOS, '$', anywhere)."""
    tok, L = task.tokenizer, task.max_new_tokens
    rows = [tok.encode(t)[:L] for t in texts]
    return torch.tensor([r + [tok.pad_id] * (L - len(r)) for r in rows])


# ---------------------------------------------------------------------------
# Hand-written cases
# ---------------------------------------------------------------------------


def test_texts_of_the_three_styles():
    task = ScratchpadAdditionTask(3)
    assert task.column_totals(478, 567) == [15, 14, 10]
    assert task.completion_text(478, 567, "direct") == "1045$"
    assert task.completion_text(478, 567, "scratchpad") == "[15,14,10]1045$"
    assert task.completion_text(478, 567, "filler") == "[........]1045$"  # as long as "18,19,19", the longest
    assert task.completion_text(5, 3, "filler") == "[........]8$"  # the same dots for every pair
    assert task.completion_text(5, 3, "filler", filler_matches_length=True) == "[.....]8$"  # as long as "8,0,0"
    assert task.completion_text(5, 3, "scratchpad") == "[8,0,0]8$"
    assert task.completion_text(999, 999, "scratchpad") == "[18,19,19]1998$"  # the longest: 3n + 1 + n + 1 + 1
    assert task.max_new_tokens == len("[18,19,19]1998$") == 15
    assert task.prompt_length == 8


def test_prompt_ids_match_the_addition_task():
    pairs = [(478, 567), (0, 9)]
    assert torch.equal(ScratchpadAdditionTask(3).prompts(pairs), AdditionTask(3).prompts(pairs))
    assert ScratchpadAdditionTask(2).split(10, 20) == AdditionTask(2).split(10, 20)


@pytest.mark.parametrize(
    "text, style, answer",
    [
        ("1045$", "direct", "1045"),
        ("[15,14,10]1045$", "scratchpad", "1045"),
        ("[........]1045$", "filler", "1045"),
        ("[.]1045$", "filler", "1045"),  # the dots are not counted
        ("[1,2,3]999$", "scratchpad", "999"),  # wrong totals keep their form: the content is not graded
        ("0001045$", "direct", "0001045"),  # leading zeros: direct, but not the answer
        ("1045$[15,14,10]", "direct", "1045"),  # text after EOS is ignored
        ("1045", "malformed", None),  # no EOS
        ("[15,14,10]1045", "malformed", None),
        ("$", "malformed", None),  # nothing before EOS
        ("[15,14,10]$", "malformed", None),  # no answer after the scratchpad
        ("[]1045$", "malformed", None),
        ("[15,14]1045$", "malformed", None),  # two totals for three digits
        ("[15,14,10,1]1045$", "malformed", None),
        ("[15,,14,10]1045$", "malformed", None),
        ("[15,4.,10]1045$", "malformed", None),  # dots and digits mixed
        ("[15,14,20]1045$", "malformed", None),  # no column total reaches 20
        ("[15,14,05]1045$", "malformed", None),  # a leading zero
        ("[15,14,10]]1045$", "malformed", None),
        ("[15,14,10[1045$", "malformed", None),
        ("[15,14,10]10,45$", "malformed", None),
        ("10,45$", "malformed", None),
        ("1045]$", "malformed", None),
        ("+1045$", "malformed", None),
    ],
)
def test_parse_completion(text, style, answer):
    assert parse_completion(text, 3) == (style, answer)
    assert completion_style(text, 3) == style


def test_score_and_styles_on_ids():
    task = ScratchpadAdditionTask(3)
    prompts = task.prompts([(478, 567)])  # (1, P)
    texts = [
        "1045$",
        "[15,14,10]1045$",
        "[........]1045$",
        "[1,2,3]1045$",
        "1046$",
        "[15,14,10]1046$",
        "[15,14]1045$",
        "1045",
        "1045$9999",
        "[15,14,10]1045$[1,1,1]",
    ]
    completions = _ids(task, texts)[None]  # (1, G, L)
    assert task.score(prompts[:, None, :], completions).tolist() == [[1, 1, 1, 1, 0, 0, 0, 0, 1, 1]]
    labels = task.styles(completions)
    assert labels.shape == (1, len(texts))
    assert labels.tolist() == [
        [
            "direct",
            "scratchpad",
            "filler",
            "scratchpad",
            "direct",
            "scratchpad",
            "malformed",
            "malformed",
            "direct",
            "scratchpad",
        ]
    ]
    assert task.score(prompts[:, None, :], completions).dtype == torch.float32
    assert task.totals_right(prompts[:, None, :], completions).tolist() == [
        [False, True, False, False, False, True, False, False, False, True]
    ]


def test_score_broadcasts_like_score_completions():
    task = ScratchpadAdditionTask(2)
    pairs = [(47, 85), (3, 4)]
    prompts, demos = task.demonstrations(pairs, scratchpad_share=1.0)
    assert task.score(prompts, demos).tolist() == [1.0, 1.0]  # (N, P) with (N, L)
    groups = torch.stack([demos, demos.flip(0)], dim=1)  # (N, 2, L): the second is the other pair's
    assert task.score(prompts[:, None, :], groups).tolist() == [[1.0, 0.0], [1.0, 0.0]]
    assert task.score(prompts[:1], groups[0]).tolist() == [1.0, 0.0]  # one prompt against two completions


def test_demonstrations_mix_and_filler():
    task = ScratchpadAdditionTask(3)
    pairs = task.split(200, 10)["demos"]
    for share in (0.0, 0.3, 0.5, 1.0):
        prompts, completions = task.demonstrations(pairs, scratchpad_share=share)
        labels = task.styles(completions)
        assert (labels == "scratchpad").sum() == round(share * 200)
        assert set(labels.tolist()) <= {"direct", "scratchpad"}
        assert task.score(prompts, completions).sum() == 200
    _, filler = task.demonstrations(pairs, 0.5, filler=True)
    _, real = task.demonstrations(pairs, 0.5)
    labels = task.styles(filler)
    assert (labels == "filler").sum() == 100
    assert np.array_equal(labels == "filler", task.styles(real) == "scratchpad")  # the same pairs worked
    dots = (filler == task.tokenizer.stoi["."]).sum(-1)
    assert set(dots.tolist()) == {0, 8}  # the same filler for every pair: it tells nothing of the carries
    _, matched = task.demonstrations(pairs, 0.5, filler=True, filler_matches_length=True)
    assert torch.equal(matched != task.tokenizer.pad_id, real != task.tokenizer.pad_id)  # the prototype's: same lengths
    assert not torch.equal(task.demonstrations(pairs, 0.5, seed=1)[1], real)


def test_validation():
    task = ScratchpadAdditionTask(2)
    with pytest.raises(ValueError, match="scratchpad_share"):
        task.demonstrations([(1, 2)], scratchpad_share=1.5)
    with pytest.raises(ValueError, match="style"):
        task.completion_text(1, 2, "malformed")
    with pytest.raises(ValueError, match="completions"):
        task.styles(torch.zeros(2, 5))
    with pytest.raises(ValueError, match="prompts"):
        task.score(task.prompts([(1, 2)] * 3), _ids(task, ["3$", "3$"]))
    with pytest.raises(ValueError, match="text"):
        parse_completion(b"3$", 2)
    with pytest.raises(ValueError, match="n_digits"):
        ScratchpadAdditionTask(5)


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(n_digits=st.integers(1, 4), data=st.data())
def test_every_demonstration_is_right_in_its_own_style(n_digits, data):
    task = ScratchpadAdditionTask(n_digits)
    top = 10**n_digits - 1
    a, b = data.draw(st.integers(0, top)), data.draw(st.integers(0, top))
    totals = task.column_totals(a, b)
    # The totals are the sum, column by column: last digits give the answer, the final carry leads it.
    assert sum((t % 10) * 10**i for i, t in enumerate(totals)) + (totals[-1] // 10) * 10**n_digits == a + b
    for style in STYLES[:3]:
        text = task.completion_text(a, b, style)
        assert parse_completion(text, n_digits) == (style, str(a + b))
        assert len(task.tokenizer.encode(text)) <= task.max_new_tokens
        prompts, completions = task.prompts([(a, b)]), _ids(task, [text])
        assert task.score(prompts, completions).item() == 1.0
    assert len(task.completion_text(a, b, "filler", True)) == len(task.completion_text(a, b, "scratchpad"))
    assert len(task.completion_text(a, b, "filler")) >= len(task.completion_text(a, b, "scratchpad"))


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="0123456789[],.$", max_size=16))
def test_any_text_gets_one_style_and_only_wellformed_text_an_answer(text):
    style, answer = parse_completion(text, 3)
    assert style in STYLES
    assert (answer is None) == (style == "malformed")
    if "$" not in text:
        assert style == "malformed"
    if style != "malformed":
        assert answer.isdigit() and text.partition("$")[0].endswith(answer)
    assert parse_completion(text.partition("$")[0] + "$" + "123", 3) == parse_completion(text, 3) or "$" not in text


@settings(max_examples=60, deadline=None)
@given(a=st.integers(0, 99), b=st.integers(0, 99), wrong=st.integers(0, 199))
def test_score_pays_only_the_exact_sum(a, b, wrong):
    task = ScratchpadAdditionTask(2)
    text = task.scratchpad_text(a, b) + str(wrong) + "$"
    got = task.score(task.prompts([(a, b)]), _ids(task, [text])).item()
    assert got == float(wrong == a + b)
    assert np.asarray(task.styles(_ids(task, [text]))).tolist() == ["scratchpad"]
