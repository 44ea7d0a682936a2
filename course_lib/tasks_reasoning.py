"""Addition with an optional scratchpad: a task where a model can answer at once or work first (chapter 10).

A prompt is the prompt of :class:`course_lib.tasks.AdditionTask` (``"478+567="``). A completion
takes one of two styles, both ending with the answer and EOS (written ``$``):

=============== ========================= =============================================================
style           completion                what it is
=============== ========================= =============================================================
``direct``      ``1045$``                 the answer at once (the model must find every carry silently)
``scratchpad``  ``[15,14,10]1045$``       the column totals first, right to left, carries included
                                          (8+7=15, 7+6+1=14, 4+5+1=10): each answer digit is then a
                                          total's last digit, and each carry is written down
``filler``      ``[........]1045$``       the control: a run of dots as long as the longest scratchpad's
                                          content (``3 * n_digits - 1``), the same for every prompt
=============== ========================= =============================================================

Why it is built this way. Reinforcement learning on such a task can make completions
longer for two different reasons (chapter 10): *selection* (the scratchpad earns more
reward, so RL picks it) and GRPO's *length bias* (the per-sequence mean ``1/|o|`` punishes
each token of a long wrong answer less; Liu et al. 2025, "Understanding R1-Zero-like
training"). The filler style is as long as a scratchpad but carries nothing, so under
an unbiased loss it can only win through the few extra positions it gives the transformer
to compute in ("pause tokens", Goyal et al. 2024); what it gains beyond that is the bias.
Its length is fixed on purpose: dots as many as *this* pair's scratchpad has characters
(``filler_matches_length=True``) would tell which columns carry (``"[5,9]"`` has 3 characters,
``"[15,14]"`` 5), so a model that writes the right number of dots has done part of the sum,
and the control would carry content after all.

The verifier (:meth:`ScratchpadAdditionTask.score`) is an *outcome* reward with a format
gate, like DeepSeek-R1-Zero's: 1 when the answer that follows the scratchpad is exact and
the completion is well formed, else 0. It checks the scratchpad's form, never its content
(wrong column totals followed by the right answer earn 1): the reward never pays for the
steps themselves, so a scratchpad can only win by helping the model find the answer. What
counts as *malformed* (reward 0) is listed in :func:`completion_style`.

Shapes: ``N`` pairs or prompts, ``P`` prompt tokens, ``L`` completion tokens.
"""

from __future__ import annotations

import random
import re

import numpy as np
import torch

from course_lib import _validate
from course_lib.tasks import AdditionTask
from course_lib.tiny_lm import EOS_TEXT, CharTokenizer

STYLES = ("direct", "scratchpad", "filler", "malformed")
"""The labels of :func:`completion_style`, in a fixed order."""

ALPHABET = "0123456789+=[],."
"""The addition task's alphabet (digits keep their ids) plus the scratchpad's brackets, comma and dot."""


# ---------------------------------------------------------------------------
# 1. Reading a completion: its style and its answer
# ---------------------------------------------------------------------------


def parse_completion(text: str, n_digits: int) -> tuple[str, str | None]:
    """The style of a decoded completion and the answer it gives (``None`` when malformed).

    Args:
        text: a completion as :meth:`CharTokenizer.decode` writes it (``"[15,14,10]1045$"``);
            whatever follows the first ``$`` is ignored.
        n_digits: digits per operand: a real scratchpad holds this many column totals.

    Returns:
        ``(style, answer)``: a label of :data:`STYLES` and the digits after the scratchpad.
    """
    if not isinstance(text, str):
        raise ValueError(f"text: expected a str, got {type(text).__name__}")
    _validate.require_int("n_digits", n_digits, minimum=1)
    body, eos, _ = text.partition(EOS_TEXT)
    if not eos:
        return "malformed", None  # never stopped
    if re.fullmatch(r"[0-9]+", body):
        return "direct", body
    m = re.fullmatch(r"\[([^\[\]]+)\]([0-9]+)", body)
    if m is None:
        return "malformed", None
    content, answer = m.groups()
    if re.fullmatch(r"\.+", content):
        return "filler", answer
    total = r"(?:1?[0-9])"  # 0 to 19, no leading zero
    if re.fullmatch(rf"{total}(?:,{total}){{{n_digits - 1}}}", content):
        return "scratchpad", answer
    return "malformed", None


def completion_style(text: str, n_digits: int = 3) -> str:
    """The style of a decoded completion: ``"direct"``, ``"scratchpad"``, ``"filler"`` or ``"malformed"``.

    Only the text up to the first ``$`` (EOS) is read; what follows it is ignored. Then:

    - ``"direct"``: digits only, ``"1045$"`` (leading zeros too: the style, not the answer, is judged);
    - ``"scratchpad"``: ``"[" + totals + "]"`` then digits, where ``totals`` is exactly ``n_digits``
      integers from 0 to 19 (9 + 9 + a carry of 1 at most) without leading zeros, joined by commas:
      ``"[15,14,10]1045$"``; the totals need not be right (the verifier grades form, not content);
    - ``"filler"``: ``"["`` + one or more dots + ``"]"`` then digits, ``"[........]1045$"`` (the dots are
      not counted: they carry no content);
    - ``"malformed"``: everything else: no ``$`` at all (the completion never stopped), nothing before it
      (``"$"``), a bracket that is empty, unclosed or doubled, no digits after it (``"[15,14,10]$"``),
      the wrong number of totals (``"[15,14]1045$"`` with three digits), a total of 20 or more or with a
      leading zero, dots mixed with digits, any other character (``"10,45$"``).

    Args:
        text: a completion as ``CharTokenizer.decode`` writes it, EOS as ``$``.
        n_digits: digits per operand (a real scratchpad holds one total per column).

    Returns:
        One of the four labels.
    """
    return parse_completion(text, n_digits)[0]


# ---------------------------------------------------------------------------
# 2. The task
# ---------------------------------------------------------------------------


class ScratchpadAdditionTask(AdditionTask):
    """:class:`AdditionTask` whose completions may carry a scratchpad of column totals (or filler).

    Prompts, pairs and splits are the addition task's (its prompt ids are unchanged: the
    alphabet only grows at its end). The completion is longer: the largest scratchpad has
    ``3 * n_digits + 1`` characters (``n_digits`` totals of two digits, the commas, the
    brackets), then the answer (``n_digits + 1`` digits at most) and EOS.

    Args:
        n_digits: digits per operand, 1 to 4.
    """

    def __init__(self, n_digits: int = 3):
        super().__init__(n_digits)
        self.tokenizer = CharTokenizer(ALPHABET)
        self.max_new_tokens = (3 * n_digits + 1) + (n_digits + 1) + 1  # scratchpad, answer, EOS

    def column_totals(self, a: int, b: int) -> list[int]:
        """The column sums from the right, each with the carry from the column before: ``[15, 14, 10]``."""
        totals, carry = [], 0
        for i in range(self.n_digits):
            t = (a // 10**i) % 10 + (b // 10**i) % 10 + carry
            totals.append(t)
            carry = t // 10
        return totals

    def scratchpad_text(self, a: int, b: int, filler: bool = False, filler_matches_length: bool = False) -> str:
        """``"[15,14,10]"``; with ``filler`` the dots ``"[........]"``, ``3 * n_digits - 1`` of them (as many as
        this pair's totals have characters with ``filler_matches_length``)."""
        content = ",".join(str(t) for t in self.column_totals(a, b))
        if filler:
            content = "." * (len(content) if filler_matches_length else 3 * self.n_digits - 1)
        return "[" + content + "]"

    def completion_text(self, a: int, b: int, style: str = "direct", filler_matches_length: bool = False) -> str:
        """The demonstration of ``style`` (``"direct"``, ``"scratchpad"`` or ``"filler"``), EOS included."""
        _validate.require_choice("style", style, STYLES[:3])
        pad = "" if style == "direct" else self.scratchpad_text(a, b, style == "filler", filler_matches_length)
        return pad + self.answer_text(a, b) + EOS_TEXT

    def demonstrations(
        self,
        pairs: list[tuple[int, int]],
        scratchpad_share: float = 0.5,
        filler: bool = False,
        seed: int = 0,
        filler_matches_length: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Prompts with correct completions for the warm-up, a share of them worked on a scratchpad.

        Args:
            pairs: the ``(a, b)`` to demonstrate.
            scratchpad_share: the fraction (rounded to a whole number of pairs) written with a
                scratchpad; the rest answer directly. Which pairs: a seeded shuffle, so the two
                styles cover the same kind of problems.
            filler: write the filler control (dots) in place of the column totals.
            seed: seeds the choice of pairs.
            filler_matches_length: as many dots as each pair's totals have characters (the
                prototype's filler, which leaks the carries), not the fixed ``3 * n_digits - 1``.

        Returns:
            ``(prompts, completions)``: ``(N, P)`` ids and ``(N, L)`` ids (completion, EOS, then PAD;
            ``L = max_new_tokens``).
        """
        share = _validate.require_unit_interval("scratchpad_share", scratchpad_share)
        _validate.require_bool("filler", filler)
        _validate.require_bool("filler_matches_length", filler_matches_length)
        _validate.require_int("seed", seed)
        order = list(range(len(pairs)))
        random.Random(seed).shuffle(order)
        worked = set(order[: round(share * len(pairs))])
        style = "filler" if filler else "scratchpad"
        tok, L = self.tokenizer, self.max_new_tokens
        rows = []
        for i, (a, b) in enumerate(pairs):
            ids = tok.encode(self.completion_text(a, b, style if i in worked else "direct", filler_matches_length))
            rows.append(ids + [tok.pad_id] * (L - len(ids)))
        return self.prompts(pairs), torch.tensor(rows, dtype=torch.long)  # (N, P), (N, L)

    # -- the verifier, on token ids ----------------------------------------------------------

    def styles(self, completions: torch.Tensor) -> np.ndarray:
        """The style of every completion: a numpy array of :data:`STYLES` labels.

        Args:
            completions: ``[..., L]`` ids (decoding stops at the first EOS).

        Returns:
            ``[...]`` array of str (``labels == "scratchpad"`` is a boolean array).
        """
        texts = self._decode("completions", completions)
        labels = [completion_style(t, self.n_digits) for t in texts]
        return np.array(labels, dtype="<U10").reshape(tuple(completions.shape[:-1]))

    def score(self, prompts: torch.Tensor, completions: torch.Tensor) -> torch.Tensor:
        """1.0 for an exact answer after a well-formed scratchpad (or none), else 0.0.

        Args:
            prompts: ``[..., P]`` prompt ids, broadcast against ``completions`` as in
                :func:`course_lib.tasks.score_completions` (``(B, 1, P)`` against ``(B, G, L)``).
            completions: ``[..., L]`` ids.

        Returns:
            ``[...]`` float32 rewards.
        """
        shape, pairs, texts = self._read(prompts, completions)
        # The answer is what follows the scratchpad; a malformed completion has none (None != any sum).
        out = [
            float(parse_completion(text, self.n_digits)[1] == self.answer_text(a, b))
            for (a, b), text in zip(pairs, texts)
        ]
        return torch.tensor(out, dtype=torch.float32).reshape(shape)  # (...)

    def totals_right(self, prompts: torch.Tensor, completions: torch.Tensor) -> torch.Tensor:
        """Whether each completion is a scratchpad whose column totals are all right (the verifier never asks).

        Args and broadcasting as :meth:`score`. Returns ``[...]`` bool: ``False`` for every other style.
        Beside :meth:`score` it tells whether the answers follow the work: right totals then a wrong
        answer, or wrong totals then a right one, would mean the scratchpad is decoration.
        """
        shape, pairs, texts = self._read(prompts, completions)
        right = [
            text.startswith(self.scratchpad_text(a, b)) and completion_style(text, self.n_digits) == "scratchpad"
            for (a, b), text in zip(pairs, texts)
        ]
        return torch.tensor(right, dtype=torch.bool).reshape(shape)  # (...)

    def _read(self, prompts: torch.Tensor, completions: torch.Tensor):
        """The broadcast leading shape, the ``(a, b)`` of every prompt and the text of every completion, flat."""
        _validate.require_tensor("prompts", prompts, floating=False, min_dim=1)
        _validate.require_tensor("completions", completions, floating=False, min_dim=1)
        try:
            shape = torch.broadcast_shapes(prompts.shape[:-1], completions.shape[:-1])
        except RuntimeError:
            raise ValueError(
                f"prompts: leading shape {tuple(prompts.shape[:-1])} does not broadcast with "
                f"completions' {tuple(completions.shape[:-1])}"
            ) from None
        prompt_texts = self._decode("prompts", prompts.expand(*shape, prompts.shape[-1]))
        pairs = [tuple(int(x) for x in p[:-1].split("+")) for p in prompt_texts]  # "478+567=" -> (478, 567)
        return shape, pairs, self._decode("completions", completions.expand(*shape, completions.shape[-1]))

    def _decode(self, name: str, ids: torch.Tensor) -> list[str]:
        if ids.is_floating_point() or ids.dtype == torch.bool:
            raise ValueError(f"{name}: expected integer token ids, got {ids.dtype}")
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.tokenizer.vocab_size):
            raise ValueError(f"{name}: ids must lie in [0, {self.tokenizer.vocab_size})")
        return [self.tokenizer.decode(row) for row in ids.reshape(-1, ids.shape[-1]).tolist()]
