"""Classic wrong (and correct) ways to write the exercises of chapter 08 (the capstone).

``addition_exact_reward(completion, answer)``, ``completion_mask(completions, eos_id)`` and
``grpo_step(...)``, checked by ``course_lib.checks.capstone``.
"""

import torch

from course_lib.checks.capstone import reward as r
from course_lib.checks.capstone import step as c
from course_lib.lectures.capstone import grpo_step
from course_lib.lm_sampling import completion_mask


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


def _first_eos_mask(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return ((torch.cumsum(is_eos, -1) - is_eos) == 0).float()


def mask_drops_eos(completion_ids, eos_id):
    return (torch.cumsum((completion_ids == eos_id).long(), -1) == 0).float()


def mask_off_by_one(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    before = torch.cumsum(is_eos, -1) - is_eos
    shifted = torch.cat([torch.zeros_like(before[..., :1]), before[..., :-1]], -1)  # one token too far
    return (shifted == 0).float()


def mask_no_eos_rows_empty(completion_ids, eos_id):
    return _first_eos_mask(completion_ids, eos_id) * (completion_ids == eos_id).any(-1, keepdim=True).float()


def mask_last_eos(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    after = torch.flip(torch.cumsum(torch.flip(is_eos, [-1]), -1), [-1])  # EOS at or after t
    return ((after > 0) | (is_eos.sum(-1, keepdim=True) == 0)).float()


def mask_not_pad(completion_ids, eos_id):
    return (completion_ids != eos_id + 1).float()  # PAD = eos_id + 1 in the course's tokenizer


def mask_inclusive_count(completion_ids, eos_id):
    # issue 44, class four: counts the EOS at t itself, so the mask runs on to the second EOS
    eos_so_far = torch.cumsum((completion_ids == eos_id).long(), dim=-1)
    return (eos_so_far <= 1).float()


def mask_bool(completion_ids, eos_id):
    """Right places, wrong kind: a bool mask where the docstring promises float32 (issue 44: kinds are checked)."""
    return _first_eos_mask(completion_ids, eos_id) > 0


def mask_borrowed(completion_ids, eos_id):
    """course_lib's own mask, called: borrowed, in the notebook as at grading."""
    return completion_mask(completion_ids, eos_id) > 0


def step_returns_tensor(*args, **kwargs):
    """The reference's step, called: borrowed."""
    return torch.tensor(grpo_step(*args, **kwargs))


MUTANTS = [
    ("addition_exact_reward", r._reward_mistakes()[0].fn, "no EOS"),
    ("addition_exact_reward", r._reward_mistakes()[1].fn, "after the first EOS"),
    ("addition_exact_reward", r._reward_mistakes()[2].fn, "leading zeros"),
    ("addition_exact_reward", r._reward_mistakes()[3].fn, "spaces"),
    ("addition_exact_reward", r._reward_mistakes()[4].fn, "extra digits"),
    ("completion_mask", mask_drops_eos, "EOS token is masked out"),
    ("completion_mask", mask_off_by_one, "off by one"),
    ("completion_mask", mask_no_eos_rows_empty, "no EOS"),
    ("completion_mask", mask_last_eos, "last EOS"),
    ("completion_mask", mask_not_pad, "tests for PAD"),
    ("completion_mask", mask_inclusive_count, "runs on after the first EOS"),
    ("completion_mask", mask_borrowed, "calls course_lib's own lm_sampling.completion_mask"),
    ("completion_mask", mask_bool, "is a bool tensor; the exercise asks for a float32 tensor"),
    ("grpo_step", step_returns_tensor, "calls course_lib's own lectures.capstone.grpo_step"),
    ("grpo_step", c._wrong_step(shifted=False), "not shifted"),
    ("grpo_step", c._wrong_step(mask="drop_eos"), "EOS token is masked out"),
    ("grpo_step", c._wrong_step(mask="ones"), "padding"),
    ("grpo_step", c._wrong_step(clip=False), "clip"),
    ("grpo_step", c._wrong_step(zero_grad=False), "zero_grad"),
    ("grpo_step", c._wrong_step(zero_grad="after"), "comes after loss.backward()"),
    ("grpo_step", c._wrong_step(tiled=True), "prompts are tiled"),
]

VARIANTS = [
    ("addition_exact_reward", reward_regex),
    ("completion_mask", mask_loop),
]


# Round seven of issue 44: new wrong answers to chapter(s) 08, written as students write them, each with the phrase
# its message names it by (tests/catalogue_round7_05_08.py).
from catalogue_round7_05_08 import ROWS as ROUND_SEVEN  # noqa: E402

MUTANTS += [(row["exercise"], row["student"], row["named"]) for row in ROUND_SEVEN if row["chapter"] == "08"]

# Class seven's student whose own, right step returns the loss as a 0-dim tensor (the docstring says float).
from class_seven_students import w119_grpo_step_returns_tensor  # noqa: E402

MUTANTS.append(("grpo_step", w119_grpo_step_returns_tensor, "the exercise asks for a Python float"))
