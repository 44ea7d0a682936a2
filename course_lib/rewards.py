"""Reward functions: a program that scores a finished response.

In RL for language models the reward usually arrives once, at the end of the
response (an *outcome* reward). Where the answer can be checked by a program, the
reward is that program: a *verifiable* reward, as in DeepSeekMath (Shao et al.
2024) and DeepSeek-R1 (DeepSeek-AI 2025, section 2.2.2: an accuracy reward and a
format reward, both rule-based), a setting Lambert et al. 2024 ("Tulu 3") call RLVR.
Elsewhere a *learned* reward model stands in for human judgement, and the policy
learns to exploit its blind spots (Gao et al. 2023, "Scaling Laws for Reward Model
Overoptimization"). A hand-written reward has blind spots too: the last section
shows two that a policy would find at once.

Contents, in order:

1. the sorting rewards of Stanford CS336 (2025) lecture 17: ``sort_inclusion_ordering_reward``
   (dense partial credit) and ``sort_exact_match_reward`` (sparse: 1 or 0);
2. the math answer reward: ``extract_final_answer``, ``normalize_answer``, ``math_answer_reward``;
3. the format reward of DeepSeek-R1: ``format_reward``;
4. rewards that invite hacking: ``length_reward``, ``connective_coherence_reward`` and
   ``degenerate_responses`` (the strings that maximise them);
5. the exercise checks.

Every public function raises ``ValueError`` naming the argument on bad input.
Shapes: ``T`` tokens per prompt and per response; ``...`` any leading batch shape.
"""

from __future__ import annotations

import re

import torch

from course_lib import _validate

# ---------------------------------------------------------------------------
# 1. Sorting rewards (tensors in, tensors out)
# ---------------------------------------------------------------------------


def sort_inclusion_ordering_reward(prompt: torch.Tensor, response: torch.Tensor) -> torch.Tensor:
    """The CS336 sorting reward: inclusion points plus ordering points.

    - Inclusion: one point for each of the ``T`` prompt tokens that appears
      somewhere in the response. A prompt token that occurs twice in the prompt
      counts twice; a response that repeats one right token still earns that
      token's point only once.
    - Ordering: one point for each of the ``T - 1`` adjacent pairs
      ``(response[t], response[t + 1])`` in non-decreasing order (``<=``).

    The sorted prompt earns the maximum ``T + (T - 1) = 2T - 1`` (5 for three tokens).

    Args:
        prompt: ``(..., T)`` integer tensor of token ids.
        response: ``(..., T)`` integer tensor of token ids; leading dimensions
            broadcast against the prompt's (a ``(B, 1, T)`` prompt scores ``(B, G, T)`` responses).

    Returns:
        ``(...)`` float32 tensor of rewards.
    """
    _require_prompt_response(prompt, response)
    # Inclusion: matches[..., i, j] is True when prompt token i equals response token j.
    matches = prompt[..., :, None] == response[..., None, :]  # (..., T, T)
    inclusion = matches.any(dim=-1).sum(dim=-1)  # (...)
    # Ordering: the T - 1 adjacent pairs of the response.
    ordering = (response[..., :-1] <= response[..., 1:]).sum(dim=-1)  # (...)
    return (inclusion + ordering).to(torch.float32)


def sort_exact_match_reward(prompt: torch.Tensor, response: torch.Tensor) -> torch.Tensor:
    """1.0 when the response is exactly the sorted prompt, else 0.0: the sparse reward.

    A uniform random policy over ``V`` tokens hits it with probability ``1 / V**T``,
    so nearly every sampled response scores 0 and carries no learning signal
    (chapter 02 measures this).

    Args:
        prompt: ``(..., T)`` integer tensor of token ids.
        response: ``(..., T)`` integer tensor; leading dimensions broadcast as above.

    Returns:
        ``(...)`` float32 tensor of 0.0 and 1.0.
    """
    _require_prompt_response(prompt, response)
    target = torch.sort(prompt, dim=-1).values  # (..., T)
    return (response == target).all(dim=-1).to(torch.float32)


def _require_prompt_response(prompt, response) -> None:
    for name, x in (("prompt", prompt), ("response", response)):
        _validate.require_tensor(name, x, floating=False, min_dim=1)
        if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
            raise ValueError(f"{name}: expected an integer tensor of token ids (torch.long), got dtype {x.dtype}")
    if prompt.shape[-1] != response.shape[-1]:
        raise ValueError(
            f"response: expected the same length T={prompt.shape[-1]} as prompt (last dimension), "
            f"got shape {tuple(response.shape)} for prompt shape {tuple(prompt.shape)}"
        )
    try:
        torch.broadcast_shapes(prompt.shape, response.shape)
    except RuntimeError:
        raise ValueError(
            f"response: shape {tuple(response.shape)} does not broadcast against prompt shape {tuple(prompt.shape)}"
        ) from None


# ---------------------------------------------------------------------------
# 2. The math answer reward (strings in, a float out)
# ---------------------------------------------------------------------------

_BOXED = "\\boxed{"
_STATEMENT = re.compile(r"\banswer(?:\s+is\b\s*:?|\s*:)", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_WHOLE_WITH_ZEROS = re.compile(r"^([+-]?\d+)\.0+$")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")


def extract_final_answer(text: str) -> str | None:
    """The final answer stated in a free-text response, normalised, or None.

    1. The content of the last ``\\boxed{...}`` wins; braces inside it may nest
       (``\\boxed{\\frac{1}{2}}`` holds ``\\frac{1}{2}``).
    2. Otherwise, the text after the last "the answer is" or "Answer:" (any case),
       up to the end of its line or sentence (a ".", "!" or "?" followed by a space
       or the end) or the next tag ("<").
    3. Otherwise None: the response states no answer.

    Why not fall back to "the last number in the text", as quick scripts do? It
    pays for answers the response never commits to. A policy under optimisation
    finds such holes: it can list candidates ("maybe 12, or 13, or 14") and end
    with its best guess, or end every response with some number; the reward then
    measures "mentioned a number last", not "solved the problem", and that is
    what the policy gets better at. An answer must be stated to be rewarded.

    Args:
        text: the response.

    Returns:
        The answer after ``normalize_answer``, or None (also when it is empty).
    """
    _require_str("text", text)
    answer = _last_boxed(text)
    if answer is None:
        statements = list(_STATEMENT.finditer(text))
        answer = _stated_answer(text, statements[-1]) if statements else None
    if answer is None:
        return None
    answer = normalize_answer(answer)
    return answer or None


def _stated_answer(text: str, statement: re.Match) -> str:
    """The text after an answer statement, up to the end of its line, sentence or the next tag."""
    rest = text[statement.end() :].lstrip()
    rest = re.split(r"[\n<]", rest)[0]
    return _SENTENCE_END.split(rest)[0]


def _last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` whose braces close, or None."""
    start = text.rfind(_BOXED)
    while start != -1:
        depth, begin = 1, start + len(_BOXED)
        for i in range(begin, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return text[begin:i]
        start = text.rfind(_BOXED, 0, start)  # unclosed: try the one before
    return None


def normalize_answer(text: str) -> str:
    """Put an answer in canonical form, so equal answers compare equal as strings.

    Strips surrounding whitespace, dollar signs (``$14$``, ``\\$14``), trailing
    punctuation (``.``, ``,``, ``;``, ``:``, ``!``, ``?``, and a ``)`` that closes
    nothing), thousands separators (``1,000`` -> ``1000``) and a trailing ``.0``
    (``14.0`` -> ``14``). It does not simplify mathematics: ``\\frac{1}{2}`` and
    ``0.5`` stay different (symbolic checkers such as math-verify do that).

    Args:
        text: an extracted answer or a ground truth.
    """
    _require_str("text", text)
    answer = text.replace("\\$", "").replace("$", "").strip()
    while answer:
        if answer[-1] in ".,;:!?":
            answer = answer[:-1].rstrip()
        elif answer[-1] == ")" and answer.count(")") > answer.count("("):
            answer = answer[:-1].rstrip()
        else:
            break
    answer = _THOUSANDS.sub("", answer)
    return _WHOLE_WITH_ZEROS.sub(r"\1", answer)


def math_answer_reward(response_text: str, ground_truth: str) -> float:
    """1.0 when the response's final answer equals the ground truth, else 0.0.

    1. Find the final answer in ``response_text``: the content of the last
       ``\\boxed{...}`` (braces may nest: ``\\boxed{\\frac{1}{2}}`` holds ``\\frac{1}{2}``);
       if there is none, the text after the last "the answer is" or "Answer:"
       (any case) up to the end of its line or sentence (a ".", "!" or "?" followed
       by a space or the end) or the next "<"; if there is neither, the response
       has no answer and earns 0.0. Never fall back to the last number in the text.
    2. Normalise the answer and the ground truth alike: strip surrounding
       whitespace, dollar signs, trailing punctuation (".", ",", ";", ":", "!", "?",
       and a ")" that closes nothing) and thousands separators ("1,000" -> "1000").
    3. Compare them as numbers when both are plain decimal numbers
       ("14" == "14.0" == "14.00"), otherwise as strings.

    Args:
        response_text: the model's response, free text.
        ground_truth: the correct answer, e.g. ``"14"``.

    Returns:
        1.0 or 0.0.
    """
    _require_str("response_text", response_text)
    _require_str("ground_truth", ground_truth)
    return _same_answer(extract_final_answer(response_text), ground_truth)


def _same_answer(answer: str | None, ground_truth: str) -> float:
    """1.0 when an extracted (normalised) answer equals the ground truth, numerically where both are numbers."""
    if answer is None:
        return 0.0
    truth = normalize_answer(ground_truth)
    if _NUMBER.fullmatch(answer) and _NUMBER.fullmatch(truth):
        return float(float(answer) == float(truth))
    return float(answer == truth)


# ---------------------------------------------------------------------------
# 3. The format reward (DeepSeek-R1)
# ---------------------------------------------------------------------------

_TAGS = ("<think>", "</think>", "<answer>", "</answer>")
_FORMAT = re.compile(r"\s*<think>.*</think>\s*<answer>.*</answer>\s*", re.DOTALL)


def format_reward(response_text: str) -> float:
    """1.0 when the response reads ``<think>...</think> <answer>...</answer>``, else 0.0.

    Exactly one of each tag, in that order, with only whitespace before
    ``<think>``, between ``</think>`` and ``<answer>``, and after ``</answer>``.
    This is stricter than "contains the tags somewhere" (which a policy satisfies
    while rambling on after its answer) and looser than open-r1's pattern, which
    also demands a newline after each tag.

    Args:
        response_text: the model's response.
    """
    _require_str("response_text", response_text)
    if any(response_text.count(tag) != 1 for tag in _TAGS):
        return 0.0
    return 1.0 if _FORMAT.fullmatch(response_text) else 0.0


# ---------------------------------------------------------------------------
# 4. Rewards that invite hacking
# ---------------------------------------------------------------------------

CONNECTIVES = ("therefore", "because", "so", "thus", "hence", "since", "consequently")


def length_reward(text: str, target: int = 100) -> float:
    """``min(words / target, 1)``: "longer answers show more reasoning". A proxy to hack.

    The policy maximises it by padding, not by reasoning (see ``degenerate_responses``).

    Args:
        text: the response.
        target: the number of words that earns the full reward.
    """
    _require_str("text", text)
    if isinstance(target, bool) or not isinstance(target, int) or target < 1:
        raise ValueError(f"target: expected a positive int (a number of words), got {target!r}")
    return min(len(text.split()) / target, 1.0)


def connective_coherence_reward(text: str) -> float:
    """Connective words ("therefore", "because", "so", "thus", ...) per sentence.

    The kind of "reasoning quality" heuristic found in quick GRPO scripts: it
    counts the words of reasoning, not reasoning. It is unbounded, and a response
    made of nothing but connectives maximises it.

    Args:
        text: the response.
    """
    _require_str("text", text)
    words = re.findall(r"[a-z]+", text.lower())
    n_connectives = sum(word in CONNECTIVES for word in words)
    n_sentences = max(1, len([s for s in re.split(r"[.!?]+", text) if s.strip()]))
    return n_connectives / n_sentences


def degenerate_responses() -> dict[str, str]:
    """For each hackable reward, a response that maximises it while saying nothing.

    Returns:
        A dict from the reward's name to the degenerate response.
    """
    return {
        "length_reward": " ".join(["Let me think again."] * 25),  # 100 words of stalling
        "connective_coherence_reward": " ".join(["therefore because thus so"] * 25),  # one "sentence", 100 connectives
        "format_reward": "<think></think><answer></answer>",  # the format, with nothing in it
    }


# ---------------------------------------------------------------------------
# 5. Rewards of the addition task (chapter 08): strings in, floats out
# ---------------------------------------------------------------------------
# A completion is decoded with EOS written "$" (course_lib.tiny_lm.EOS_TEXT): "132$" is the
# answer 132 and a stop. Nothing after the first "$" is ever read: the model stopped there,
# and the trainer masks those tokens out, so they must not earn (or lose) reward either.

_EOS = "$"
_WELL_FORMED = re.compile(r"(0|[1-9][0-9]*)\$")


def _before_eos(completion: str) -> tuple[str, bool]:
    """The text before the first EOS, and whether there was one."""
    head, eos, _ = _require_str("completion", completion).partition(_EOS)
    return head, bool(eos)


def addition_answer(prompt: str) -> str:
    """The verifier's answer to an addition prompt: ``"47+85="`` -> ``"132"``."""
    m = re.fullmatch(r"([0-9]+)\+([0-9]+)=", _require_str("prompt", prompt))
    if m is None:
        raise ValueError(f"prompt: expected digits+digits=, got {prompt!r}")
    return str(int(m.group(1)) + int(m.group(2)))


def addition_exact_reward(completion: str, answer: str) -> float:
    """1.0 when the completion is exactly the answer then EOS (``"132$"``), else 0.0.

    No leading zeros (``"0132$"``), no extra text before EOS (``"132 $"``), and EOS
    required (``"132"`` never stopped). Whatever follows the first EOS is ignored.
    """
    head, stopped = _before_eos(completion)
    return float(stopped and head == _require_str("answer", answer))


def addition_format_reward(completion: str) -> float:
    """1.0 when the completion is a well-formed number (no leading zeros) then EOS, right or wrong."""
    head, stopped = _before_eos(completion)
    return float(_WELL_FORMED.fullmatch(head + _EOS) is not None and stopped)


def addition_digit_reward(completion: str, answer: str) -> float:
    """Dense partial credit: the fraction of digits right, columns aligned from the units.

    ``matches / max(len(written), len(answer))``, so a missing or an extra digit costs
    its column. 0.0 when the text before EOS is empty or holds anything but digits.
    A missing EOS is not penalised here (that is the format reward's job), which is
    exactly the blind spot a policy can exploit when nothing else holds it back.
    """
    head, _ = _before_eos(completion)
    answer = _require_str("answer", answer)
    if not head or not head.isdigit() or not head.isascii():
        return 0.0
    matches = sum(x == y for x, y in zip(reversed(head), reversed(answer)))
    return matches / max(len(head), len(answer))


def completion_length_penalty(completion: str, max_tokens: int) -> float:
    """``-(tokens beyond max_tokens) / max_tokens``, counting EOS as a token; 0 for a short enough one.

    A completion with no EOS counts as one token longer than written (it never stopped).
    """
    head, _ = _before_eos(completion)
    max_tokens = _validate.require_int("max_tokens", max_tokens, minimum=1)
    n_tokens = len(head) + 1  # the EOS, or the stop it failed to write
    return -max(0, n_tokens - max_tokens) / max_tokens


ADDITION_REWARDS = {
    "exact": addition_exact_reward,
    "format": lambda completion, answer: addition_format_reward(completion),
    "digits": addition_digit_reward,
}
"""The rewards of :func:`course_lib.tasks.score_completions` by name, ``(completion, answer) -> float``; a name such
as ``"digits+exact"`` sums its parts."""


def _require_str(name: str, value) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name}: expected a str, got {type(value).__name__}")
    return value
