"""The exercise checks of chapter 11 (the GRPO family): RLOO's advantages, GSPO's sequence ratio, CISPO's loss.

They import the references of ``course_lib.family``; the maths module never imports its checks.
One module a check: :mod:`.rloo`, :mod:`.gspo`, :mod:`.cispo`.
"""

from course_lib.checks.family.cispo import check_cispo_loss
from course_lib.checks.family.gspo import check_gspo_sequence_log_ratio
from course_lib.checks.family.rloo import check_rloo_advantages

__all__ = ["check_cispo_loss", "check_gspo_sequence_log_ratio", "check_rloo_advantages"]
