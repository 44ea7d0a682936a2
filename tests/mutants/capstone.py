"""Classic wrong (and correct) ways to write the exercises of chapter 08 (the capstone).

``addition_exact_reward(completion, answer)``, ``completion_mask(completions, eos_id)`` and
``grpo_step(...)``, checked by ``course_lib.checks.capstone``.
"""

import torch

from course_lib.checks import capstone as c
from course_lib.lectures.capstone import grpo_step
from course_lib.lm_rl import completion_mask


def reward_regex(completion, answer):
    import re

    m = re.match(r"([0-9]*)\$", completion)
    return float(m is not None and m.group(1) == answer)


def mask_loop(completion_ids, eos_id):
    out = torch.zeros(completion_ids.shape)
    flat, flat_out = completion_ids.reshape(-1, completion_ids.shape[-1]), out.view(-1, completion_ids.shape[-1])
    for i, row in enumerate(flat.tolist()):
        for t, tok in enumerate(row):
            flat_out[i, t] = 1.0
            if tok == eos_id:
                break
    return out


def mask_bool(completion_ids, eos_id):
    return completion_mask(completion_ids, eos_id) > 0


def step_returns_tensor(*args, **kwargs):
    return torch.tensor(grpo_step(*args, **kwargs))


MUTANTS = [
    ("addition_exact_reward", c._reward_mistakes()[0].fn, "no EOS"),
    ("addition_exact_reward", c._reward_mistakes()[1].fn, "after the first EOS"),
    ("addition_exact_reward", c._reward_mistakes()[2].fn, "leading zeros"),
    ("addition_exact_reward", c._reward_mistakes()[3].fn, "spaces"),
    ("addition_exact_reward", c._reward_mistakes()[4].fn, "extra digits"),
    ("completion_mask", c._mask_drops_eos, "EOS token is masked out"),
    ("completion_mask", c._mask_off_by_one, "off by one"),
    ("completion_mask", c._mask_no_eos_rows_empty, "no EOS"),
    ("completion_mask", c._mask_last_eos, "last EOS"),
    ("completion_mask", c._mask_not_pad, "PAD"),
    ("grpo_step", c._wrong_step(shifted=False), "not shifted"),
    ("grpo_step", c._wrong_step(mask="drop_eos"), "EOS token is masked out"),
    ("grpo_step", c._wrong_step(mask="ones"), "padding"),
    ("grpo_step", c._wrong_step(clip=False), "clip"),
    ("grpo_step", c._wrong_step(zero_grad=False), "zero_grad"),
]

VARIANTS = [
    ("addition_exact_reward", reward_regex),
    ("completion_mask", mask_loop),
    ("completion_mask", mask_bool),
    ("grpo_step", step_returns_tensor),
]
