"""Students whose answers are right whenever every argument is passed, and wrong at a default of the signature
(found by ``benchmarks/check_mutants.py``: no case called these exercises without the argument).

The checks now call each of them once with the argument left out; the message may be the generic one (a default
that differs is a difference, not a known mistake), so this catalogue is not among the named ones.
"""

from __future__ import annotations

import torch

from .reasoning import _style


def group_advantages_dr_grpo_by_default(rewards, normalize_std=False, eps=1e-6):
    """GRPO's advantages, right in both modes, but Dr. GRPO's (no std) when normalize_std is left out."""
    mean = rewards.mean(dim=-1, keepdim=True)
    centred = rewards - mean
    all_equal = (rewards == rewards[:, :1]).all(dim=-1, keepdim=True)
    centred = torch.where(all_equal, torch.zeros_like(centred), centred)
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    return centred / (rewards.std(dim=-1, keepdim=True) + eps)


def style_two_digits_by_default(text, n_digits=2):
    """The classifier, right for every n_digits passed, with the wrong default (the chapter adds 3-digit numbers)."""
    return _style(text, n_digits)


MUTANTS = [
    ("group_advantages", group_advantages_dr_grpo_by_default, "normalize_std left at its default"),
    ("completion_style", style_two_digits_by_default, "n_digits left at its default"),
]
