"""The exercise checks of chapter 09 (TRL): a reward function in TRL's calling convention, the mask and log-probs
of ``model.generate``'s output, a course config as ``GRPOConfig``'s kwargs (references: ``course_lib.hf.trl_contract``).

Rewards and config fields are not tensors: each check's ``outputs`` turns a reply into named numbers (rewards into a
float tensor with NaN for None; a config field into a number, a string into its index in TRL's names, spelled out in
the label), so the comparison, the known mistakes and grading's record-then-judge work as for every other check.
One module a check: :mod:`.reward`, :mod:`.logps`, :mod:`.config`.
"""

from course_lib.checks.hf.config import check_grpo_config_kwargs
from course_lib.checks.hf.logps import check_completion_logps
from course_lib.checks.hf.reward import check_answer_reward

__all__ = ["check_answer_reward", "check_completion_logps", "check_grpo_config_kwargs"]
