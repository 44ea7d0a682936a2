"""Chapter 10, RL itself: GRPO on the scratchpad task through the one LM RL loop, every round's styles noted.

- :func:`run`: the warmed-up model of :func:`course_lib.lectures.reasoning.warm_up_reasoning`, trained in place by
  :func:`course_lib.lm_rl.train` with the verifier as reward; the samples of every round are sorted by style on the
  way (:func:`round_style_stats`), so the history shows what RL selects at no extra sampling;
- :func:`greedy_accuracy`: greedy exact match and the greedy completions' styles;
- :func:`share_range`: how far a share moved over a run (the filler control's number).

``benchmarks/reasoning_length.py`` runs these on the report seeds; ``notebooks/10_reasoning_length.ipynb`` reads
what it saved. Shapes: ``B`` prompts, ``G`` samples per prompt, ``P`` prompt tokens, ``L`` completion tokens.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from course_lib import _validate, lm_rl, lm_sampling
from course_lib._threads import one_thread
from course_lib.lectures.reasoning import ReasoningConfig, style_share
from course_lib.tasks_reasoning import STYLES, ScratchpadAdditionTask
from course_lib.tiny_lm import TinyLM


def share_range(shares, smooth: int = 5) -> float:
    """How far a share moved over a run: the max minus the min of its trailing mean over ``smooth`` rounds.

    One round's share is noisy (512 samples: a standard error near 0.02), and the raw max minus min would
    report that noise as movement; the trailing mean (over fewer rounds at the start) damps it.

    Args:
        shares: one share per round, ``[R]`` (a list or 1-d array), ``R >= 1``.
        smooth: rounds per trailing mean, ``>= 1`` (1: the raw range).

    Returns:
        A float in ``[0, 1]`` for shares in ``[0, 1]``.
    """
    x = np.asarray(shares, dtype=np.float64)
    if x.ndim != 1 or x.size == 0 or not np.isfinite(x).all():
        raise ValueError(f"shares: expected a non-empty 1-d sequence of finite numbers, got shape {x.shape}")
    _validate.require_int("smooth", smooth, minimum=1)
    c = np.concatenate([[0.0], np.cumsum(x)])
    i = np.arange(1, x.size + 1)
    trailing = (c[i] - c[np.maximum(i - smooth, 0)]) / np.minimum(i, smooth)  # (R,)
    return float(trailing.max() - trailing.min())


def greedy_accuracy(
    lm: TinyLM, task: ScratchpadAdditionTask, pairs, max_new_tokens: int | None = None
) -> tuple[float, dict]:
    """Greedy exact match on ``pairs`` and the share of each style among the greedy completions.

    ``max_new_tokens``: the most tokens a completion may have (default the task's, room for the longest
    scratchpad); a completion cut off before its EOS is malformed, and wrong."""
    prompts, tok = task.prompts(pairs), task.tokenizer
    limit = task.max_new_tokens if max_new_tokens is None else max_new_tokens
    greedy = lm_sampling.sample_completions(lm, prompts, None, 1, limit, tok.eos_id, tok.pad_id, greedy=True)
    labels = task.styles(greedy)  # (N,)
    return float(task.score(prompts, greedy).mean()), {style: style_share(labels, style) for style in STYLES}


def round_style_stats(
    task: ScratchpadAdditionTask, prompts: torch.Tensor, completions: torch.Tensor, rewards: torch.Tensor
) -> dict:
    """One round's samples by style: ``share``, ``accuracy`` (``nan`` for a style not sampled) and ``length``.

    Args:
        prompts: ``(B, P)`` ids; completions: ``(B, G, L)`` ids; rewards: ``(B, G)`` the verifier's.

    Returns:
        ``{"share": {style: float}, "accuracy": {style: float}, "length": float, "length_right": float,
        "length_wrong": float, "truncated": float}``: every style of :data:`STYLES`; ``length`` is the mean number
        of tokens, EOS included, over all completions, over those with reward 1 and over the others (``nan`` where
        there are none); ``truncated`` the share cut off by the length limit (no EOS: malformed).
    """
    _validate.require_tensor("completions", completions, floating=False, min_dim=3)
    if tuple(rewards.shape) != tuple(completions.shape[:2]) or prompts.shape[0] != completions.shape[0]:
        raise ValueError(
            f"rewards: expected shape {tuple(completions.shape[:2])} for {prompts.shape[0]} prompts, "
            f"got {tuple(rewards.shape)}"
        )
    labels = task.styles(completions)  # (B, G)
    r = rewards.detach().float().numpy()
    out = {"share": {}, "accuracy": {}}
    for style in STYLES:
        pick = labels == style
        out["share"][style] = style_share(labels, style)
        out["accuracy"][style] = float(r[pick].mean()) if pick.any() else float("nan")
    eos_id = task.tokenizer.eos_id
    lengths = lm_sampling.completion_mask(completions, eos_id).sum(-1).float().numpy()  # (B, G)
    right = r == 1.0
    out["length"] = float(lengths.mean())
    out["length_right"] = float(lengths[right].mean()) if right.any() else float("nan")
    out["length_wrong"] = float(lengths[~right].mean()) if (~right).any() else float("nan")
    out["truncated"] = float((~(completions == eos_id).any(-1)).float().mean())
    return out


def run(
    lm: TinyLM,
    task: ScratchpadAdditionTask,
    split: dict,
    cfg: ReasoningConfig | None = None,
    seed: int = 0,
    eval_on: str = "heldout",
    progress: bool = False,
    max_new_tokens: int | None = None,
    **changes,
) -> dict:
    """GRPO from the warmed-up ``lm`` (trained in place) through :func:`course_lib.lm_rl.train`.

    The reward is the verifier (:meth:`ScratchpadAdditionTask.score`, an outcome reward: nothing pays for
    the scratchpad itself). Every round's samples are sorted by style on the way to the loop, so the
    history shows what RL selects at no extra sampling. ``changes`` override fields of ``cfg.rl``
    (``loss_agg="token-mean"``, say); ``eval_on`` is ``"heldout"`` (the test prompts) or ``"val"`` (tuning).
    ``max_new_tokens`` caps the completions, in training and in evaluation (default the task's: room for the
    longest scratchpad; chapter 11 cuts it to 14, so that the longest scratchpads are truncated).

    Returns:
        The loop's history with ``history["eval"]["score"]`` the greedy exact match on ``split[eval_on]``
        (every ``cfg.eval_every`` rounds), ``history["eval"]["greedy_share"]`` the greedy completions'
        style shares there (one dict per evaluation), and ``history["style_share"]``,
        ``history["style_accuracy"]``: ``{style: one value per round}`` of the round's samples (T = 1), and
        ``history["length_right"]``, ``history["length_wrong"]``, ``history["truncated"]``: one value per round
        (per draw of prompts, with dynamic sampling) of :func:`round_style_stats`.
    """
    cfg = cfg or ReasoningConfig()
    _validate.require_choice("eval_on", eval_on, ("heldout", "val"))
    limit = (
        task.max_new_tokens if max_new_tokens is None else _validate.require_int("max_new_tokens", max_new_tokens, 1)
    )
    rl = dataclasses.replace(cfg.rl, seed=seed, max_new_tokens=limit, **changes)
    prompts, tok = task.prompts(split["train"]), task.tokenizer  # (M, P)
    rounds, greedy_shares = [], []

    def reward_fn(pick, completions):  # (B,), (B, G, L) -> (B, G): the verifier, and a note of the styles
        rewards = task.score(prompts[pick][:, None, :], completions)
        rounds.append(round_style_stats(task, prompts[pick], completions, rewards))
        return rewards

    def eval_fn(model):
        acc, share = greedy_accuracy(model, task, split[eval_on], limit)
        greedy_shares.append(share)
        return acc

    with one_thread():  # a 100k-parameter model: a second thread only waits
        history = lm_rl.train(
            lm,
            reward_fn,
            prompts,
            rl,
            tok.eos_id,
            tok.pad_id,
            eval_fn=eval_fn,
            eval_every=cfg.eval_every,
            progress=progress,
        )
    history["eval"]["greedy_share"] = greedy_shares
    for key, part in (("style_share", "share"), ("style_accuracy", "accuracy")):
        history[key] = {style: [r[part][style] for r in rounds] for style in STYLES}
    for key in ("length_right", "length_wrong", "truncated"):
        history[key] = [r[key] for r in rounds]
    return history
