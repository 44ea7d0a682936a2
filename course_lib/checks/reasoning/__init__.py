"""Exercise checks of chapter 10 (why completions get longer): pass@k, token weights, styles.

The references live in ``course_lib.lectures.reasoning`` and ``course_lib.tasks_reasoning``; these modules
import them, never the reverse. One module a check: :mod:`.pass_at_k`, :mod:`.weights`, :mod:`.styles`.
"""

from course_lib.checks.reasoning.pass_at_k import check_pass_at_k
from course_lib.checks.reasoning.styles import check_completion_style, check_style_share
from course_lib.checks.reasoning.weights import check_aggregation_token_weight

__all__ = ["check_aggregation_token_weight", "check_completion_style", "check_pass_at_k", "check_style_share"]
