"""Warmed-up models kept on disk: every run of a seed starts from the same warm-up, which is trained once.

A benchmark's jobs run in a pool of processes, several of them on one seed at once; the first to finish the
warm-up writes its weights, and the others read them. The file is written whole or not at all.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import torch

from course_lib.lectures.protocol import recipe_hash


def save_whole(state: dict, path: Path) -> None:
    """Writes the ``state`` dict to ``path`` through a temporary file: a job never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    torch.save(state, partial)
    partial.replace(path)  # atomic on one file system


def cached_warm_up(warm_up, cfg, seed: int, cache: Path):
    """``warm_up(cfg, seed)``'s model, task and split, its weights kept in ``cache`` under the config's hash.

    Args:
        warm_up: chapter 08's ``capstone.warm_up`` or chapter 10's ``reasoning.warm_up_reasoning``: it returns
            ``(lm, task, split, losses)``, and with ``sft_steps=0`` builds the same task and split untrained.
        cfg: the chapter's config dataclass (its ``sft_steps`` field is the warm-up's length).
        seed: the seed of the warm-up and of the task's split.
        cache: the folder of the cached weights.
    """
    path = cache / f"warm_{recipe_hash(dataclasses.asdict(cfg))}_{seed}.pt"
    if path.exists():
        lm, task, split, _ = warm_up(dataclasses.replace(cfg, sft_steps=0), seed)
        lm.load_state_dict(torch.load(path, weights_only=True))
        return lm, task, split
    lm, task, split, _ = warm_up(cfg, seed)
    save_whole(lm.state_dict(), path)
    return lm, task, split
