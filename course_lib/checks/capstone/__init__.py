"""The exercise checks of chapter 08 (the capstone): a reward, the completion mask, one GRPO step.

Each check compares the student's function with the reference over edge cases and, when
they differ, names the classic mistake the student's output reproduces:

- ``addition_exact_reward(completion, answer)``: missing EOS, leading zeros, extra text,
  text after EOS (which must never earn reward);
- ``completion_mask(completions, eos_id)``: the EOS token dropped, the mask off by one,
  rows with no EOS, the last EOS in place of the first;
- ``grpo_step(...)``: log-probs read at the wrong position (logits not shifted, or the
  prompt's last token skipped), the EOS dropped from the mask, padding counted, no
  gradient clipping, a stale gradient (no ``zero_grad``).

One module a check: :mod:`.reward`, :mod:`.mask`, :mod:`.step`.
"""

from course_lib.checks.capstone.mask import check_completion_mask
from course_lib.checks.capstone.reward import check_addition_exact_reward
from course_lib.checks.capstone.step import check_grpo_step

__all__ = ["check_addition_exact_reward", "check_completion_mask", "check_grpo_step"]
