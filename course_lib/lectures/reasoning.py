"""Chapter 10: why completions get longer under RL, measured on a tiny model that can work before it answers.

Three things are tangled when a model's answers grow under RL, and this chapter measures each apart:

- *selection*: RL picks the scratchpad (:mod:`course_lib.tasks_reasoning`) because it earns more reward;
- *length bias*: GRPO's per-sequence mean weights each token of a response by ``1 / |o|``, so a long
  wrong answer is punished less per token than a short one (Liu et al. 2025, "Understanding
  R1-Zero-like training", the Dr. GRPO paper): :func:`aggregation_token_weight`;
- *sharpening or new ability*: whether RL only moves probability onto answers the model could already
  sample, which pass@k for large k tells (Yue et al. 2025, "Does reinforcement learning really
  incentivize reasoning capacity in LLMs beyond the base model?"): :func:`pass_at_k`.

The pure functions come first (the exercises of ``solutions/10_reasoning_length.ipynb``), then
:class:`ReasoningConfig`, whose ``rl`` field is the recipe of :mod:`course_lib.lectures.reasoning_rl` (RL itself),
and the warm-up (:func:`warm_up_reasoning`). What the samples look like before and after RL is measured in
:mod:`course_lib.lectures.reasoning_stats`.

Shapes: ``N`` prompts (or responses), ``G`` samples per prompt, ``P`` prompt tokens, ``L`` completion tokens.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from course_lib import _validate, lm_rl
from course_lib.grpo import LOSS_AGG_MODES
from course_lib.lectures.capstone import sft
from course_lib.tasks_reasoning import STYLES, ScratchpadAdditionTask
from course_lib.tiny_lm import TinyLM, TinyLMConfig

# ---------------------------------------------------------------------------
# 1. pass@k: the chance that at least one of k samples is right (Chen et al. 2021)
# ---------------------------------------------------------------------------


def pass_at_k(n, c, k) -> torch.Tensor:
    """The unbiased estimate of pass@k from ``n`` samples of which ``c`` are right (Chen et al. 2021, eq. 1).

    Drawing ``k`` of the ``n`` samples without replacement, the chance that all ``k`` are wrong is
    ``C(n - c, k) / C(n, k)``, so

        pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n - c + 1}^{n} (1 - k / i).

    The product (the numerically stable form of Chen et al.'s code) never forms a binomial
    coefficient: ``C(5000, 200)`` is about 1e363, past what a float64 holds, while each factor
    lies in ``[0, 1)``. Its average over prompts is unbiased for the model's pass@k; the plug-in
    ``1 - (1 - c / n) ** k`` is not: it draws with replacement, never exceeds this estimate, and
    underestimates pass@k on average whenever ``1 < k`` (Jensen: ``(1 - p) ** k`` is convex in ``p``).

    Edge cases: ``c = 0`` gives 0 (the empty product is 1); ``n - c < k`` gives 1 (every draw of
    ``k`` holds a right one; the product has a zero factor ``i = k``); for ``k > n``, where ``k``
    samples cannot be drawn from ``n``, the estimate is pass@n: 1 when any sample was right, else 0.

    Args:
        n: samples per prompt, ``>= 1``; an int or an integer tensor / array ``[...]``.
        c: right samples per prompt, ``0 <= c <= n``; broadcast with ``n``.
        k: ``>= 1``; an int or an integer tensor broadcast with ``n`` and ``c``.

    Returns:
        ``[...]`` float64 tensor (0-dimensional for ints).
    """
    n, c, k = _check_counts(n, c, k)  # broadcast int64 tensors
    # ALGO LOGIC: one factor (1 - k / i) for i = n - c + 1, ..., n along a new last axis; those past c are 1.
    j = torch.arange(int(c.max()), dtype=torch.float64)  # (C,)
    i = (n - c + 1).double()[..., None] + j  # (..., C)
    one = torch.ones((), dtype=torch.float64)
    factors = torch.where(j < c[..., None], 1.0 - k[..., None] / i, one)  # (..., C)
    all_wrong = factors.prod(dim=-1)  # (...): C(n - c, k) / C(n, k)
    # n - c < k: every draw holds a right sample (this also covers k > n, where the product means nothing).
    return torch.where(n - c < k, (c > 0).double(), 1.0 - all_wrong)  # (...)


def _check_counts(n, c, k) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n``, ``c``, ``k`` as broadcast int64 tensors, or ``ValueError`` naming the one that is wrong."""
    out = {}
    for name, x, least in (("n", n, 1), ("c", c, 0), ("k", k, 1)):
        t = torch.as_tensor(x)
        if t.dtype == torch.bool or t.is_complex() or t.numel() == 0:
            raise ValueError(f"{name}: expected whole numbers, got {t.dtype} of shape {tuple(t.shape)}")
        if t.is_floating_point() and not (torch.isfinite(t).all() and (t == t.round()).all()):
            raise ValueError(f"{name}: expected whole numbers, got {t.flatten()[:4].tolist()}")
        if bool((t < least).any()):
            raise ValueError(f"{name}: expected values >= {least}, got {int(t.min())}")
        out[name] = t.long()
    n, c, k = torch.broadcast_tensors(out["n"], out["c"], out["k"])
    if bool((c > n).any()):
        raise ValueError("c: expected at most n right samples out of n")
    return n, c, k


# ---------------------------------------------------------------------------
# 2. Length bias: the weight of one token under each loss aggregation
# ---------------------------------------------------------------------------


def aggregation_token_weight(length, mode: str, max_len=None) -> torch.Tensor:
    """The weight that :func:`course_lib.grpo.aggregate_loss` gives each token of each response.

    The aggregated loss is linear in the per-token losses, ``loss = sum_i w_i sum_{t < |o_i|} l_{i,t}``,
    and this returns ``w_i = d loss / d l_{i,t}`` for the ``N`` responses aggregated together
    (a group, or a whole batch: every entry of ``length`` is one response):

    =========================== ================================ ======================================
    mode                        ``w_i``                          a long response's tokens
    =========================== ================================ ======================================
    ``seq-mean-token-mean``     ``1 / (N * |o_i|)``              weigh less: the length bias (GRPO)
    ``token-mean``              ``1 / sum_j |o_j|``              weigh the same as any other (DAPO)
    ``seq-mean-token-sum-norm`` ``1 / (N * max_len)``            weigh the same, a constant (Dr. GRPO)
    =========================== ================================ ======================================

    With a negative advantage every token of a wrong response is pushed down by ``|A| * w_i``:
    under the per-sequence mean a wrong answer twice as long is pushed down half as hard per
    token, so long wrong answers are the cheap ones to keep (Liu et al. 2025, section 3.1). A
    response of length 0 has no token to weigh: its weight is 0.

    Args:
        length: ``[...]`` numbers of valid tokens ``|o_i|`` (EOS included), an integer or
            floating tensor of whole numbers ``>= 0``; all its entries are aggregated together.
        mode: one of :data:`course_lib.grpo.LOSS_AGG_MODES`.
        max_len: Dr. GRPO's constant (positive); ``None`` means the longest length, the padded
            ``T`` of a batch padded to its longest response (``aggregate_loss``'s default).

    Returns:
        ``[...]`` weights, float (the dtype of a floating ``length``, else the default dtype).
    """
    _validate.require_tensor("length", length, floating=False)
    _validate.require_choice("mode", mode, LOSS_AGG_MODES)
    if length.numel() == 0 or bool((length < 0).any()):
        raise ValueError(f"length: expected a non-empty tensor of lengths >= 0, got {length.tolist()}")
    o = length.to(length.dtype if length.is_floating_point() else torch.get_default_dtype())  # (...)
    N = o.numel()
    max_len = o.max().clamp(min=1) if max_len is None else _validate.require_positive("max_len", max_len)
    # ALGO LOGIC: one line per mode (the table above).
    if mode == "seq-mean-token-mean":
        w = 1.0 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum().clamp(min=1)
    else:  # seq-mean-token-sum-norm
        w = torch.ones_like(o) / (N * max_len)
    return torch.where(o > 0, w, torch.zeros_like(w))  # (...)


# ---------------------------------------------------------------------------
# 3. The style share
# ---------------------------------------------------------------------------


def style_share(labels, style: str) -> float:
    """The fraction of all completions whose label is ``style``.

    Args:
        labels: labels of :data:`course_lib.tasks_reasoning.STYLES` (a list, a nested list ``[B][G]``
            or a numpy array of any shape, as ``ScratchpadAdditionTask.styles`` returns);
            every completion counts in the denominator, malformed ones included.
        style: the label to count.

    Returns:
        A float in ``[0, 1]``.
    """
    _validate.require_choice("style", style, STYLES)
    flat = np.asarray(labels, dtype=object).reshape(-1)
    if flat.size == 0:
        raise ValueError("labels: expected at least one label, got none")
    return float(np.mean(flat == style))


# ---------------------------------------------------------------------------
# 4. The warm-up, measured before RL
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class ReasoningConfig:
    """The warm-up of chapter 10: a TinyLM taught both styles by supervised learning.

    Measured before RL (``measure_warm_up``: 200 held-out prompts x 64 samples at temperature 1, seeds 0-2,
    one thread each, on a shared 2-core machine). The defaults (3 digits, 1000 demonstrations half with a
    scratchpad, 500 steps): scratchpad share 0.48-0.53, accuracy with it 0.51-0.65 against 0.13-0.20
    without, 0.64-0.81 of scratchpads with every total right, mean length 8.5-9.0 tokens, pass@1
    0.32-0.43, pass@64 0.98-0.99. 300 steps gave a share of 0.31 and 1000 steps 0.55 with 0.90 / 0.47
    (seed 0). ``filler_control()``: filler share 0.35-0.39, accuracy 0.18-0.30 with filler against
    0.17-0.30 without (the fixed dots help no more than answering at once), length 6.0-6.3; the
    prototype's matched-length filler, at 300 steps (seeds 1-2): share 0.51, 0.26-0.34 against 0.23-0.29.
    """

    n_digits: int = 3
    """Digits per operand: 3 for the scratchpad runs, 2 for the filler control."""
    n_demos: int = 1000
    """Demonstrations for the warm-up (the rest of the training prompts are RL's)."""
    scratchpad_share: float = 0.5
    """The fraction of demonstrations written with a scratchpad (or with the filler)."""
    filler: bool = False
    """The control: dots in place of the column totals."""
    filler_matches_length: bool = False
    """As many dots as each pair's totals have characters (leaks the carries), not a fixed run."""
    n_heldout: int = 500
    """Test prompts never trained on or tuned on, the same for every seed."""
    n_val: int = 500
    """Validation prompts, cut from the end of the training prompts and never trained on: what RL was tuned on."""
    sft_steps: int = 500
    """Adam steps of warm-up (batches of 64 demonstrations)."""
    sft_lr: float = 3e-3
    """Learning rate of the warm-up."""
    d_model: int = 64
    """Width of the TinyLM (2 layers, 4 heads)."""
    rl: lm_rl.LMRLConfig = dataclasses.field(
        default_factory=lambda: lm_rl.LMRLConfig(
            iterations=25,
            prompts_per_step=64,
            group_size=8,
            update_epochs=2,
            lr=1e-3,
            warmup_iterations=5,
            lr_schedule="linear",
            kl_coef=0.02,
        )
    )
    """RL's hyperparameters (:func:`course_lib.lectures.reasoning_rl.run`): 64 prompts x G = 8 per round;
    ``benchmarks/reasoning_length.py``'s docstring lists every tuning run."""
    eval_every: int = 10
    """Rounds between two greedy evaluations."""

    @classmethod
    def filler_control(cls, **changes) -> "ReasoningConfig":
        """The control: the scratchpad run's task and warm-up, with filler dots in place of the column totals.

        Everything else is the scratchpad run's (3-digit addition, 1,000 demonstrations half in the second style,
        500 steps, the same seed and RL recipe), so the two runs differ in what the long style carries alone."""
        return dataclasses.replace(cls(filler=True), **changes)


def warm_up_reasoning(
    cfg: ReasoningConfig | None = None, seed: int = 0
) -> tuple[TinyLM, ScratchpadAdditionTask, dict, list[float]]:
    """The task, its split and a TinyLM after supervised warm-up on a mix of both styles.

    Returns:
        ``(lm, task, split, sft_losses)``; ``split`` as :meth:`AdditionTask.split` (``"heldout"``: the test
        prompts, ``"train"``, ``"demos"``: the first ``n_demos`` of ``"train"``) with ``"val"`` added: the last
        ``n_val`` training prompts, taken out of ``"train"``. The same for every seed.
    """
    cfg = cfg or ReasoningConfig()
    task = ScratchpadAdditionTask(cfg.n_digits)
    split = task.split(cfg.n_demos, cfg.n_heldout, seed=0)
    _validate.require_int("n_val", cfg.n_val, minimum=1)
    if cfg.n_val + cfg.n_demos >= len(split["train"]):
        raise ValueError(f"n_val: {cfg.n_val} + n_demos {cfg.n_demos} leave no prompt for RL ({len(split['train'])})")
    split["val"], split["train"] = split["train"][-cfg.n_val :], split["train"][: -cfg.n_val]  # demos stay in train
    lm = TinyLM(
        TinyLMConfig(
            vocab_size=task.tokenizer.vocab_size,
            d_model=cfg.d_model,
            block_size=task.prompt_length + task.max_new_tokens,
        ),
        seed=seed,
    )
    prompts, completions = task.demonstrations(
        split["demos"], cfg.scratchpad_share, filler=cfg.filler, filler_matches_length=cfg.filler_matches_length
    )
    losses = (
        sft(lm, prompts, completions, task.tokenizer.eos_id, steps=cfg.sft_steps, lr=cfg.sft_lr, seed=seed)
        if cfg.sft_steps
        else []
    )  # 0 steps: the untrained model (to load a saved warm-up into)
    return lm.eval(), task, split, losses
