"""Chapter 10, measured: what a model's sampled completions look like, before and after RL.

:func:`sample_stats` samples many completions of held-out prompts and reports the share of each style, each
style's accuracy and length, whether a scratchpad's work was right and whether the answer followed it, pass@k,
and each long style's accuracy against direct answers on the same prompts (:func:`paired_style_accuracy`).
:func:`measure_warm_up` applies it to a fresh warm-up. ``benchmarks/reasoning_length.py`` calls these before and
after RL on every report seed.

Shapes: ``N`` prompts, ``G`` samples per prompt, ``P`` prompt tokens, ``L`` completion tokens.
"""

from __future__ import annotations

import numpy as np
import torch

from course_lib import _validate, lm_sampling
from course_lib._threads import one_thread
from course_lib.lectures.protocol import paired_difference
from course_lib.lectures.reasoning import ReasoningConfig, pass_at_k, style_share, warm_up_reasoning
from course_lib.tasks_reasoning import STYLES, ScratchpadAdditionTask
from course_lib.tiny_lm import TinyLM


@torch.no_grad()
def sample_completions(
    lm: TinyLM,
    task: ScratchpadAdditionTask,
    pairs,
    n_samples: int = 64,
    temperature: float = 1.0,
    seed: int = 0,
    chunk: int = 4096,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n_samples`` sampled completions of every prompt of ``pairs``.

    Returns:
        ``(prompts, completions)``: ``(N, P)`` ids and ``(N, G, L)`` ids, ``G = n_samples``.
    """
    _validate.require_int("n_samples", n_samples, minimum=1)
    prompts = task.prompts(pairs)  # (N, P)
    flat = prompts.repeat_interleave(n_samples, dim=0)  # (N*G, P)
    g = torch.Generator().manual_seed(seed)
    tok = task.tokenizer
    outs = [
        lm_sampling.sample_completions(
            lm,
            flat[s : s + chunk],
            None,
            1,
            task.max_new_tokens,
            tok.eos_id,
            tok.pad_id,
            temperature=temperature,
            generator=g,
        )
        for s in range(0, flat.shape[0], chunk)
    ]
    return prompts, torch.cat(outs).reshape(len(pairs), n_samples, -1)  # (N, P), (N, G, L)


def sample_stats(
    lm: TinyLM,
    task: ScratchpadAdditionTask,
    pairs,
    n_samples: int = 64,
    temperature: float = 1.0,
    ks=(1, 2, 4, 8, 16, 32, 64),
    seed: int = 0,
) -> dict:
    """What sampled completions of held-out prompts look like: styles, accuracy by style, length, pass@k.

    Returns:
        A dict of floats: ``share``, ``accuracy_by_style`` and ``length_by_style`` per style (among the
        completions of that style, ``nan`` where there are none), ``accuracy`` (all samples), ``length``
        (mean tokens, EOS included), ``totals_right`` (the share of scratchpads whose column totals are
        all right) and ``accuracy_given_totals`` (``{"right": .., "wrong": ..}``: accuracy of scratchpads
        with right and with wrong totals), ``pass_at_k`` ``{k: mean over prompts of pass@k}``, and
        ``greedy`` (``{"accuracy": .., "share": {style: ..}}`` of the greedy completions), and
        ``paired_accuracy``: for each long style, its accuracy minus the direct answers' on the same prompts
        (:func:`paired_style_accuracy`).
    """
    with one_thread():
        prompts, completions = sample_completions(lm, task, pairs, n_samples, temperature, seed)
        rewards = task.score(prompts[:, None, :], completions)  # (N, G)
        labels = task.styles(completions)  # (N, G)
        lengths = lm_sampling.completion_mask(completions, task.tokenizer.eos_id).sum(-1)  # (N, G)
        totals = task.totals_right(prompts[:, None, :], completions).numpy()  # (N, G)
        tok = task.tokenizer
        greedy = lm_sampling.sample_completions(
            lm, prompts, None, 1, task.max_new_tokens, tok.eos_id, tok.pad_id, greedy=True
        )
    out = {"share": {}, "accuracy_by_style": {}, "length_by_style": {}}
    r, n_tok = rewards.numpy(), lengths.numpy()
    for style in STYLES:
        pick = labels == style
        out["share"][style] = style_share(labels, style)
        out["accuracy_by_style"][style] = float(r[pick].mean()) if pick.any() else float("nan")
        out["length_by_style"][style] = float(n_tok[pick].mean()) if pick.any() else float("nan")
    out["accuracy"] = float(r.mean())
    out["length"] = float(n_tok.mean())
    worked = labels == "scratchpad"
    out["totals_right"] = float(totals[worked].mean()) if worked.any() else float("nan")
    out["accuracy_given_totals"] = {
        key: float(r[worked & (totals == flag)].mean()) if (worked & (totals == flag)).any() else float("nan")
        for key, flag in (("right", True), ("wrong", False))
    }
    greedy_labels = task.styles(greedy)
    out["greedy"] = {
        "accuracy": float(task.score(prompts, greedy).mean()),
        "share": {style: style_share(greedy_labels, style) for style in STYLES},
    }
    c = rewards.sum(-1).long()  # (N,) right samples per prompt
    out["pass_at_k"] = {int(k): float(pass_at_k(n_samples, c, k).mean()) for k in ks}
    out["paired_accuracy"] = {style: paired_style_accuracy(r, labels, style) for style in ("scratchpad", "filler")}
    return out


def paired_style_accuracy(rewards: np.ndarray, labels: np.ndarray, style: str, other: str = "direct") -> dict:
    """How much more often ``style``'s samples are right than ``other``'s, on the same prompts.

    A style's accuracy over all its samples mixes two things: how good the style is, and which prompts it is
    written for (a model may write a scratchpad for the hard sums and answer the easy ones at once). On each
    prompt with samples of both styles, the difference of their accuracies compares them on the same sum;
    the mean over those prompts comes with a 95% Student-t interval over prompts.

    Args:
        rewards: ``(N, G)`` 0/1 rewards of ``G`` samples of ``N`` prompts; labels: ``(N, G)`` their styles.

    Returns:
        ``{"prompts": n, "diff": mean difference, "half_width": of its interval}`` (``diff`` and ``half_width``
        nan when fewer than 2 prompts have both styles).
    """
    style_acc, other_acc = {}, {}
    for prompt, (row, row_labels) in enumerate(zip(rewards, labels)):
        has_style, has_other = row_labels == style, row_labels == other
        if has_style.any() and has_other.any():
            style_acc[prompt] = float(row[has_style].mean())
            other_acc[prompt] = float(row[has_other].mean())
    if len(style_acc) < 2:
        return {"prompts": len(style_acc), "diff": float("nan"), "half_width": float("nan")}
    d = paired_difference(other_acc, style_acc)
    return {"prompts": d.n, "diff": d.mean, "half_width": d.half_width}


def measure_warm_up(
    cfg: ReasoningConfig | None = None, seed: int = 0, n_prompts: int = 200, n_samples: int = 64
) -> dict:
    """:func:`warm_up_reasoning` then :func:`sample_stats` on the first ``n_prompts`` held-out prompts, one thread.

    Returns:
        ``sample_stats``'s dict with ``seed``, ``sft_loss`` (mean of the last 20 steps) and ``seconds`` added.
    """
    import time

    start = time.perf_counter()
    with one_thread():
        lm, task, split, losses = warm_up_reasoning(cfg, seed)
    stats = sample_stats(lm, task, split["heldout"][:n_prompts], n_samples=n_samples, seed=seed)
    return {
        "seed": seed,
        "sft_loss": sum(losses[-20:]) / max(1, len(losses[-20:])),
        **stats,
        "seconds": time.perf_counter() - start,
    }


# ---------------------------------------------------------------------------
# How strongly the answer depends on the work: a dependence measure, per seed
# ---------------------------------------------------------------------------


def work_answer_counts(stats: dict, n_samples: int) -> dict[str, int]:
    """The scratchpads of :func:`sample_stats` as a 2 x 2 table: work (every total right or not) by answer.

    ``stats`` keeps shares, not counts; ``n_samples`` (prompts x samples per prompt: 50 x 64 = 3,200 in the shipped
    report) turns them back into whole counts. Returns ``right_work_right``, ``right_work_wrong``,
    ``wrong_work_right`` and ``wrong_work_wrong``.
    """
    _validate.require_int("n_samples", n_samples, minimum=1)
    scratchpads = _whole(stats["share"]["scratchpad"] * n_samples, n_samples)
    right_work = _whole(stats["totals_right"] * scratchpads, n_samples) if scratchpads else 0
    wrong_work = scratchpads - right_work
    right_after_right = _whole(stats["accuracy_given_totals"]["right"] * right_work, n_samples) if right_work else 0
    right_after_wrong = _whole(stats["accuracy_given_totals"]["wrong"] * wrong_work, n_samples) if wrong_work else 0
    return {
        "right_work_right": right_after_right,
        "right_work_wrong": right_work - right_after_right,
        "wrong_work_right": right_after_wrong,
        "wrong_work_wrong": wrong_work - right_after_wrong,
    }


def _whole(count: float, n_samples: int) -> int:
    if abs(count - round(count)) > 1e-3:
        raise ValueError(f"n_samples: {n_samples} does not turn the shares back into whole counts (got {count:.4f})")
    return round(count)


def work_answer_log_odds(stats: dict, n_samples: int) -> float:
    """The log-odds ratio of a right answer given right work against given wrong work, among scratchpads:
    ``log[(a / b) / (c / d)]`` over :func:`work_answer_counts`' cells, each plus 0.5 (Haldane and Anscombe's
    correction, so that an empty cell gives a finite value).

    0: the answer is as often right after wrong work as after right work (no dependence); the larger, the more the
    answer follows the work. Unlike a difference of two accuracies, it does not move just because both rise.
    """
    cells = work_answer_counts(stats, n_samples)
    a, b = cells["right_work_right"] + 0.5, cells["right_work_wrong"] + 0.5
    c, d = cells["wrong_work_right"] + 0.5, cells["wrong_work_wrong"] + 0.5
    return float(np.log(a / b) - np.log(c / d))
