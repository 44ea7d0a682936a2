"""Demo cells: run the student's function, and say whether its check passed.

A check that passes remembers the very object it checked (:func:`record_pass`); a demo cell
hands the student's function through :func:`your`, which says in the cell's output that the
demo runs *your* function and whether its check passed, and refuses, with
:class:`CheckNotPassed`, where a wrong function would look right (a training run that still
improves with a biased gradient). Redefining the function (running its cell again) makes a
new object, which has not passed until its check runs again.
"""

from __future__ import annotations

from typing import Any

# The mark sits on the function object itself, not in a table of this module: grading imports course_lib
# afresh at the top of every check cell, and a table would forget the earlier cells' passes.
_MARK = "_course_lib_check_passed"


class CheckNotPassed(NotImplementedError):
    """A demo cell refused to run a function whose check has not passed (yet).

    A ``NotImplementedError``: like an untouched stub, the exercise is not done yet.
    """

    def _render_traceback_(self):  # IPython shows this line alone, without a traceback
        return [f"{type(self).__name__}: {self}"]


def record_pass(name: str, fn: Any) -> None:
    """Mark ``fn`` as having passed the check called ``name`` (demo cells ask :func:`passed`)."""
    try:
        setattr(fn, _MARK, name)
    except (AttributeError, TypeError):  # an object that takes no attribute (a bound method): its demos just warn
        pass


def forget_pass(fn: Any) -> None:
    """``fn`` failed its check (or is being checked again): an earlier pass no longer counts."""
    if _MARK in getattr(fn, "__dict__", {}):
        try:
            delattr(fn, _MARK)
        except (AttributeError, TypeError):
            pass


def passed(fn: Any) -> bool:
    """Whether this very function (or class) passed its check in this kernel, as it is now defined."""
    return _MARK in getattr(fn, "__dict__", {})


def your(fn: Any, *, needs_pass: bool = False) -> Any:
    """``fn`` for a demo cell, announced: the demo runs the student's function, and says whether its check passed.

    With ``needs_pass`` (a demo that would hide a wrong function, such as a training run that
    still improves with a biased gradient), a function whose check has not passed is refused
    with :class:`CheckNotPassed`: "the check above has not passed yet".
    """
    if not callable(fn):
        raise AssertionError(f"the demo expected your function, got {type(fn).__name__}: run its cell first")
    name = getattr(fn, "__name__", "function")
    if passed(fn):
        print(f"Running your {name} (its check passed).")
    elif needs_pass:
        raise CheckNotPassed(
            f"{name}: the check above has not passed yet, so this demo does not run your {name}; "
            "run the check cell, fix what it says, then run this cell again."
        )
    else:
        print(f"Running your {name}: the check above has not passed yet, so what follows may be wrong.")
    return fn
