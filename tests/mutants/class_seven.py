"""Mutants from the seventh blind class (tests/class_seven_students.py): the wrong answers whose names were added
after its first sight, each with the phrase its message names it by. The students are imported, not copied: the
class file is the record of what its writer wrote."""

from __future__ import annotations

import class_seven_students as seven  # tests/ is on the path (tests/conftest.py)

MUTANTS = [
    ("compute_deltas", seven.w33_compute_deltas_tiny_spread_counts_as_equal, "a group whose std is below eps"),
    ("value_loss", seven.w65_value_loss_clips_around_returns, "or clipped around the returns"),
    ("group_advantages", seven.w72_group_advantages_flag_inverted, "normalize_std is read backwards"),
    ("group_advantages", seven.w74_group_advantages_trl_flat_repeat, ".repeat(G), which tiles them"),
    ("memory_accounting", seven.w99_memory_accounting_bits_over_eight, "the exercise asks for a Python int"),
    ("grpo_step", seven.w116_grpo_step_clips_after_the_step, "the step used an unclipped gradient"),
    ("answer_reward", seven.w120_answer_reward_no_kwargs, "end its signature with **kwargs"),
    ("answer_reward", seven.w123_answer_reward_by_prompt, "no set or dict key"),
    ("pass_at_k", seven.w140_pass_at_k_one_factor_too_many, "the product starts one factor early"),
    ("style_share", seven.w155_style_share_without_malformed, "malformed completions are left out"),
    ("rloo_advantages", seven.w160_rloo_advantages_others_of_the_batch, "the baseline runs over the batch"),
]
