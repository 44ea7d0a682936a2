"""Tasks with verifiable answers: sorting a few integers, and small arithmetic word problems.

The sorting task is the running example of Stanford CS336 (2025), lecture 17 ("Policy
gradient"): a prompt is a short sequence of distinct small integers, say ``[1, 0, 2]``;
the response is a sequence of the same length, one token per integer; the ideal
response is the sorted prompt ``[0, 1, 2]``. Tokens *are* integers here, so the
vocabulary is ``{0, ..., V - 1}`` with ``V`` one more than the largest integer.

Why such a toy? It has everything RL for language models has (a prompt, a response
generated token by token, a reward computed by a program at the end), yet a policy
over it fits in a few hundred parameters and trains in seconds on a CPU.

The arithmetic problems are free text: ``(question, answer)`` pairs such as
``("Mia has 3 apples and buys 5 more. How many apples does Mia have now?", "8")``.
They feed the math answer reward of ``course_lib.rewards``, which must find the
answer inside a model's free-text response.

Shapes: ``B`` prompts, ``G`` responses per prompt, ``T`` tokens per prompt (and per
response), ``V`` vocabulary size.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import NamedTuple

import torch

from course_lib import _validate
from course_lib.rewards import ADDITION_REWARDS, addition_answer

# ---------------------------------------------------------------------------
# The sorting task
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SortingTask:
    """A batch of sorting prompts and the vocabulary they live in.

    Args:
        vocab_size: ``V``, the number of token ids; every token is an integer in ``[0, V)``.
        prompt_length: ``T``, the number of integers in each prompt (and in each response).
        prompts: ``(B, T)`` LongTensor, one prompt per row.
    """

    vocab_size: int
    prompt_length: int
    prompts: torch.Tensor

    def __post_init__(self) -> None:
        _validate.require_int("vocab_size", self.vocab_size, minimum=1)
        _validate.require_int("prompt_length", self.prompt_length, minimum=1)
        _require_token_tensor("prompts", self.prompts, vocab_size=self.vocab_size)
        if self.prompts.dim() != 2 or self.prompts.shape[1] != self.prompt_length:
            raise ValueError(
                f"prompts: expected shape (B, {self.prompt_length}) for prompt_length={self.prompt_length}, "
                f"got {tuple(self.prompts.shape)}"
            )

    @classmethod
    def from_prompts(cls, prompts: torch.Tensor, vocab_size: int | None = None) -> "SortingTask":
        """The task over ``prompts`` (``(B, T)``); ``vocab_size`` defaults to the largest token + 1."""
        _require_token_tensor("prompts", prompts)
        if prompts.dim() != 2:
            raise ValueError(f"prompts: expected shape (B, T), got {tuple(prompts.shape)}")
        if vocab_size is None:
            vocab_size = int(prompts.max()) + 1 if prompts.numel() else 1
        return cls(vocab_size=vocab_size, prompt_length=prompts.shape[1], prompts=prompts.long())

    @property
    def num_prompts(self) -> int:
        """``B``, the number of prompts."""
        return self.prompts.shape[0]

    def targets(self) -> torch.Tensor:
        """``(B, T)``: the ideal response to each prompt, the prompt sorted."""
        return sorted_responses(self.prompts)


def sorting_prompts() -> torch.Tensor:
    """The three prompts of the CS336 lecture: ``[[1, 0, 2], [3, 2, 4], [1, 2, 3]]``.

    Returns:
        ``(3, 3)`` LongTensor. The largest token is 4, so the vocabulary is ``V = 5``.
    """
    return torch.tensor([[1, 0, 2], [3, 2, 4], [1, 2, 3]], dtype=torch.long)


def random_sorting_prompts(n: int, length: int, vocab_size: int, seed: int = 0) -> torch.Tensor:
    """``n`` prompts of ``length`` distinct integers drawn uniformly from ``[0, vocab_size)``.

    Args:
        n: ``B``, the number of prompts.
        length: ``T``, the integers per prompt; at most ``vocab_size`` (they are distinct).
        vocab_size: ``V``.
        seed: seeds a private ``torch.Generator``, so the same arguments give the same prompts.

    Returns:
        ``(n, length)`` LongTensor.
    """
    _validate.require_int("n", n, minimum=0)
    _validate.require_int("vocab_size", vocab_size, minimum=1)
    _validate.require_int("length", length, minimum=1)
    if length > vocab_size:
        raise ValueError(
            f"length: expected at most vocab_size={vocab_size} (the integers of a prompt are distinct), got {length}"
        )
    _validate.require_int("seed", seed)
    g = torch.Generator().manual_seed(seed)
    # Distinct integers: the first `length` entries of a random permutation of the vocabulary.
    # Sorting i.i.d. uniform keys gives one uniformly random permutation per row.
    keys = torch.rand(n, vocab_size, generator=g)  # (B, V)
    return keys.argsort(dim=-1)[:, :length].long()  # (B, T)


def sorted_responses(prompts: torch.Tensor) -> torch.Tensor:
    """The ideal responses: each prompt sorted in non-decreasing order.

    Args:
        prompts: ``(..., T)`` integer tensor.

    Returns:
        ``(..., T)`` tensor of the same dtype.
    """
    _require_token_tensor("prompts", prompts)
    return torch.sort(prompts, dim=-1).values


def uniform_random_responses(prompts: torch.Tensor, group_size: int, vocab_size: int, seed: int = 0) -> torch.Tensor:
    """``G`` responses per prompt from the uniform random policy: every token i.i.d. uniform on ``[0, V)``.

    This is the policy an untrained model with all-equal logits would follow; its mean
    reward is the floor any learning must beat.

    Args:
        prompts: ``(B, T)`` integer tensor (only its shape is used: this policy ignores the prompt).
        group_size: ``G``, responses per prompt.
        vocab_size: ``V``.
        seed: seeds a private ``torch.Generator``.

    Returns:
        ``(B, G, T)`` LongTensor.
    """
    _require_token_tensor("prompts", prompts)
    if prompts.dim() != 2:
        raise ValueError(f"prompts: expected shape (B, T), got {tuple(prompts.shape)}")
    _validate.require_int("group_size", group_size, minimum=1)
    _validate.require_int("vocab_size", vocab_size, minimum=1)
    _validate.require_int("seed", seed)
    g = torch.Generator().manual_seed(seed)
    B, T = prompts.shape
    return torch.randint(0, vocab_size, (B, group_size, T), generator=g)  # (B, G, T)


# ---------------------------------------------------------------------------
# Arithmetic word problems
# ---------------------------------------------------------------------------


class MathProblem(NamedTuple):
    """A question in words and its answer as a string (the ground truth of the math reward)."""

    question: str
    answer: str


_NAMES = ("Mia", "Noah", "Lena", "Omar", "Ava", "Ravi", "Zoe", "Theo")
_ITEMS = ("apples", "marbles", "stickers", "pencils", "cookies", "stamps")


def arithmetic_problems(n: int, seed: int = 0) -> list[MathProblem]:
    """``n`` small arithmetic word problems, generated deterministically from ``seed``.

    Four templates (addition, subtraction, multiplication, exact division), with
    operands small enough that every answer is a non-negative integer below 200.

    Args:
        n: number of problems.
        seed: seeds a private ``random.Random``; the same seed gives the same list.

    Returns:
        A list of ``MathProblem(question, answer)`` (each also unpacks as a pair).
    """
    _validate.require_int("n", n, minimum=0)
    _validate.require_int("seed", seed)
    rng = random.Random(seed)
    problems = []
    for _ in range(n):
        name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
        kind = rng.choice(("add", "sub", "mul", "div"))
        if kind == "add":
            a, b = rng.randint(2, 40), rng.randint(2, 40)
            question = f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have now?"
            answer = a + b
        elif kind == "sub":
            a = rng.randint(10, 60)
            b = rng.randint(1, a - 1)
            question = f"{name} has {a} {item} and gives away {b}. How many {item} does {name} have left?"
            answer = a - b
        elif kind == "mul":
            a, b = rng.randint(2, 12), rng.randint(2, 12)
            question = f"{name} fills {a} bags with {b} {item} each. How many {item} is that in total?"
            answer = a * b
        else:
            b, answer = rng.randint(2, 9), rng.randint(2, 12)
            question = (
                f"{name} shares {b * answer} {item} equally among {b} friends. How many {item} does each friend get?"
            )
        problems.append(MathProblem(question, str(answer)))
    return problems


# ---------------------------------------------------------------------------
# Multi-digit addition, written as text (chapter 08)
# ---------------------------------------------------------------------------


class AdditionTask:
    """Addition of two ``n_digits``-digit numbers as text: prompt ``"47+85="``, answer ``"132"`` then EOS.

    Operands are written with leading zeros (``"07+85="``), so every prompt has the same
    length ``P = 2 * n_digits + 2`` and a batch of prompts needs no padding; answers are
    written without leading zeros (``"92"``, ``"132"``, ``"7"``), so completions have
    different lengths and the model must learn where to stop (EOS). The answer of the
    hundreds column depends on a carry from every column to its right, which a model
    that writes from the left must work out before its first token: a small model
    trained on a few hundred demonstrations gets it wrong most of the time, and a
    program (the verifier) can tell it exactly when it is right.

    Args:
        n_digits: digits per operand, 1 to 4.
    """

    def __init__(self, n_digits: int = 2):
        from course_lib.tiny_lm import CharTokenizer  # the model's tokenizer; tiny_lm does not import tasks

        self.n_digits = _validate.require_int("n_digits", n_digits, minimum=1)
        if n_digits > 4:
            raise ValueError(f"n_digits: at most 4, got {n_digits}")
        self.tokenizer = CharTokenizer("0123456789+=")
        self.prompt_length = 2 * n_digits + 2
        self.max_new_tokens = n_digits + 2  # the longest answer (n + 1 digits) and its EOS

    def prompt_text(self, a: int, b: int) -> str:
        """``"07+85="`` for ``(7, 85)`` with two digits."""
        return f"{a:0{self.n_digits}d}+{b:0{self.n_digits}d}="

    def answer_text(self, a: int, b: int) -> str:
        """``"92"``: the sum, without leading zeros and without EOS."""
        return str(a + b)

    def all_pairs(self) -> list[tuple[int, int]]:
        """Every ``(a, b)`` with ``0 <= a, b < 10 ** n_digits``, in order."""
        n = 10**self.n_digits
        return [(a, b) for a in range(n) for b in range(n)]

    def split(self, n_demos: int, n_heldout: int, seed: int = 0) -> dict[str, list[tuple[int, int]]]:
        """Shuffle every pair and cut it into held-out prompts and training prompts.

        Returns:
            ``{"heldout": ..., "train": ..., "demos": ...}``: ``n_heldout`` pairs never
            trained on, the rest for RL, and the first ``n_demos`` of those as the
            supervised demonstrations.
        """
        pairs = self.all_pairs()
        _validate.require_int("n_heldout", n_heldout, minimum=1)
        _validate.require_int("n_demos", n_demos, minimum=0)
        if n_heldout + max(n_demos, 1) > len(pairs):
            raise ValueError(f"n_heldout: {n_heldout} + n_demos {n_demos} exceed the {len(pairs)} pairs")
        random.Random(seed).shuffle(pairs)
        train = pairs[n_heldout:]
        return {"heldout": pairs[:n_heldout], "train": train, "demos": train[:n_demos]}

    def prompts(self, pairs: list[tuple[int, int]]) -> torch.Tensor:
        """``(N, P)`` token ids of the prompts of ``pairs``: ``prompt_text``, encoded.

        Built from the digits with tensor arithmetic rather than by encoding a million strings
        (3 digits: every training pair is encoded at the start of a run, 6 s the slow way).
        """
        ab = torch.as_tensor(pairs, dtype=torch.long)  # (N, 2)
        n = 10**self.n_digits
        if ab.dim() != 2 or ab.shape[0] == 0 or ab.shape[1] != 2 or ab.min() < 0 or ab.max() >= n:
            raise ValueError(f"pairs: expected a non-empty list of (a, b) with 0 <= a, b < {n}")
        ids = self.tokenizer.stoi
        place = 10 ** torch.arange(self.n_digits - 1, -1, -1)  # (n_digits,): 100, 10, 1
        digits = torch.tensor([ids[d] for d in "0123456789"])[ab[:, :, None] // place % 10]  # (N, 2, n_digits)
        plus, equals = (torch.full((len(ab), 1), ids[c]) for c in "+=")  # (N, 1) each
        return torch.cat([digits[:, 0], plus, digits[:, 1], equals], dim=1)  # (N, P)

    def demonstrations(self, pairs: list[tuple[int, int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Prompts with their correct completions, for supervised warm-up.

        Returns:
            ``(prompts, completions)``: ``(N, P)`` ids and ``(N, L)`` ids of the answer, EOS,
            then PAD (``L = max_new_tokens``).
        """
        tok, L = self.tokenizer, self.max_new_tokens
        rows = []
        for a, b in pairs:
            ids = tok.encode(self.answer_text(a, b)) + [tok.eos_id]
            rows.append(ids + [tok.pad_id] * (L - len(ids)))
        return self.prompts(pairs), torch.tensor(rows, dtype=torch.long)  # (N, P), (N, L)


def score_completions(
    prompts: torch.Tensor, completions: torch.Tensor, tokenizer, reward: str = "exact"
) -> torch.Tensor:
    """Decode and score completions of addition prompts: the verifier, on token ids.

    Args:
        prompts: ``(..., P)`` prompt ids; broadcast against ``completions`` (``(B, 1, P)``
            against ``(B, G, L)`` scores a group per prompt).
        completions: ``(..., L)`` completion ids (decoding stops at the first EOS).
        tokenizer: the :class:`course_lib.tiny_lm.CharTokenizer` that wrote them.
        reward: a key of :data:`course_lib.rewards.ADDITION_REWARDS`, or several joined by ``"+"`` (summed).

    Returns:
        ``(...)`` float32 rewards.
    """
    parts = [_validate.require_choice("reward", part, tuple(ADDITION_REWARDS)) for part in str(reward).split("+")]

    def fn(completion, answer):
        return sum(ADDITION_REWARDS[part](completion, answer) for part in parts)

    shape = torch.broadcast_shapes(prompts.shape[:-1], completions.shape[:-1])
    prompts = prompts.expand(*shape, prompts.shape[-1]).reshape(-1, prompts.shape[-1])
    completions = completions.expand(*shape, completions.shape[-1]).reshape(-1, completions.shape[-1])
    answers = {}
    scored = {}  # a group often repeats a completion, and every copy earns the same: each is scored once
    out = []
    for p, c in zip(prompts.tolist(), completions.tolist()):
        key = (tuple(p), tuple(c))
        if key not in scored:
            if key[0] not in answers:
                answers[key[0]] = addition_answer(tokenizer.decode(p))
            scored[key] = fn(tokenizer.decode(c), answers[key[0]])
        out.append(scored[key])
    return torch.tensor(out, dtype=torch.float32).reshape(shape)  # (...)


# ---------------------------------------------------------------------------
# Validation helpers
# ---------------------------------------------------------------------------


def _require_token_tensor(name: str, x, vocab_size: int | None = None) -> torch.Tensor:
    _validate.require_tensor(name, x, floating=False, min_dim=1)
    if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
        raise ValueError(f"{name}: expected an integer tensor of token ids, got dtype {x.dtype}")
    if vocab_size is not None and x.numel() and (int(x.min()) < 0 or int(x.max()) >= vocab_size):
        raise ValueError(
            f"{name}: expected token ids in [0, {vocab_size}), got values in [{int(x.min())}, {int(x.max())}]"
        )
    return x
