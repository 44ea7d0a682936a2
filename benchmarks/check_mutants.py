"""A mutation score for every exercise check: how many small, mechanical changes to the reference does it reject?

The catalogue in ``tests/mutants/`` holds the mistakes people wrote; it is all caught, so it no longer tells how
much a check would miss. Here the mistakes are made by machine instead (``benchmarks/_mutate.py``: operators
swapped, numbers moved by one, reductions and axes changed, ``detach`` added or dropped, in-place variants), one
change at a time, to the reference of every exercise, and each mutant is handed to that exercise's check, with the
pristine reference as the reference. For each check the table gives:

- ``generated``: mutants made from the reference's source (and, for a thin wrapper, from its helpers':
  ``benchmarks/_mutate.py`` says which);
- ``rejected``: the check raised (a wrong answer, as the student would see it), or the mutant ran past the time
  limit (graded as a timeout); ``crashed`` counts those where the check itself failed with another exception;
- ``named``: rejected with a message that names a mistake (its first line is not "differs from the reference",
  not the string tables' "f(...) returned x, expected y", and not a crash), as ``tests/test_mutants.py`` asks of
  the classic mistakes;
- ``equivalent``: the check passed, and the mutant is listed in ``benchmarks/_equivalent_mutants.py`` with a
  one-line reason why it computes the same thing as the reference on every input the exercise allows;
  ``reasons`` counts the listed entries (each one reason, a key or a pattern of keys) that these mutants matched;
- ``survived``: the check passed and no reason is listed: a case is missing from the check.

    python benchmarks/check_mutants.py                       # every check
    python benchmarks/check_mutants.py --only compute_gae    # one check, with its survivors listed
    python benchmarks/check_mutants.py --quick               # three checks, 12 mutants each (for the tests)

The last line: ``mutants: checks=… generated=… rejected=… named=… equivalent=… survived=…``.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import importlib
import inspect
import io
import pkgutil
import signal
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _equivalent_mutants import EQUIVALENT  # noqa: E402
from _mutate import Mutant, build, mutants  # noqa: E402

from course_lib.checks import watch  # noqa: E402

SKIP_PACKAGES = ("course_lib.authoring", "course_lib.checks", "course_lib.plotting")
TIME_LIMIT = 20  # seconds for one mutant's check: a mutated loop bound can run for ever
QUICK = ("discounted_return", "compute_gae", "group_advantages")


def exercises() -> list[str]:
    """Every exercise of the course, in chapter order (the solution notebooks' metadata)."""
    names = []
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        names += list(nbformat.read(path, as_version=4).metadata["course"]["exercises"])
    return names


def _modules(package: str, skip=()) -> list:
    found = []
    base = importlib.import_module(package)
    for info in pkgutil.walk_packages(base.__path__, package + "."):
        if info.name.endswith("__main__") or info.name.startswith(skip):
            continue
        found.append(importlib.import_module(info.name))
    return found


def references() -> dict:
    """Every public function and class of the library, by name, where it is defined."""
    found = {}
    for module in _modules("course_lib", skip=SKIP_PACKAGES):
        for name, obj in vars(module).items():
            defined_here = getattr(obj, "__module__", None) == module.__name__
            if not name.startswith("_") and defined_here and (inspect.isfunction(obj) or inspect.isclass(obj)):
                found.setdefault(name, obj)
    return found


def checks() -> dict:
    """``check_<exercise>`` by exercise name, from every module of course_lib.checks."""
    found = {}
    for module in _modules("course_lib.checks"):
        for name, obj in vars(module).items():
            if name.startswith("check_") and callable(obj):
                found.setdefault(name[len("check_") :], obj)
    return found


class _TooLong(Exception):
    pass


def _alarm(signum, frame):
    raise _TooLong


def judge(check, mutant_fn) -> tuple[str, str]:
    """(outcome, first line of the message): ``passed``, ``named``, ``generic``, ``crashed`` or ``timeout``."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT)
    try:
        with watch.trusting(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check(mutant_fn)
    except _TooLong:
        return "timeout", f"ran past {TIME_LIMIT} s"
    except AssertionError as error:
        first = (str(error).splitlines() or [""])[0]
        # the generic lines: check_against_reference's, a crash's, and the string tables' "f(...) returned x, expected y"
        string_table = ") returned " in first and ", expected " in first
        generic = "differs from the reference" in first or " raised " in first or string_table
        return ("generic" if generic else "named"), first
    except Exception as error:  # noqa: BLE001 - the check itself failed: counted, and shown
        return "crashed", f"{type(error).__name__}: {error}".splitlines()[0]
    finally:
        signal.alarm(0)
    return "passed", ""


def listed(key: str) -> str | None:
    """The entry of ``EQUIVALENT`` that lists ``key`` (a listed key may hold ``*``, as in a file name pattern)."""
    for pattern in EQUIVALENT:
        if fnmatch.fnmatchcase(key, pattern):
            return pattern
    return None


def equivalent(key: str) -> str | None:
    """The reason ``key`` is listed as equivalent, or None."""
    pattern = listed(key)
    return None if pattern is None else EQUIVALENT[pattern]


def score(name: str, reference, check, limit: int | None) -> tuple[Counter, list[tuple[Mutant, str]]]:
    """The counts for one check, and its survivors with the mutant's description."""
    counts = Counter()
    survivors = []
    reasons = set()
    made = mutants(reference)[:limit]
    for mutant in made:
        counts["generated"] += 1
        try:
            mutant_fn = build(mutant, reference)
        except Exception:  # noqa: BLE001 - a mutant that does not compile is not a mutant
            counts["generated"] -= 1
            continue
        outcome, _ = judge(check, mutant_fn)
        if outcome == "passed" and equivalent(mutant.key):
            counts["equivalent"] += 1
            reasons.add(listed(mutant.key))
        elif outcome == "passed":
            counts["survived"] += 1
            survivors.append((mutant, mutant.description))
        else:
            counts["rejected"] += 1
            counts["named"] += outcome == "named"
            counts["crashed"] += outcome == "crashed"
    counts["reasons"] = len(reasons)
    return counts, survivors


COLUMNS = ("generated", "rejected", "named", "crashed", "equivalent", "reasons", "survived")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="three checks, 12 mutants each")
    parser.add_argument("--only", nargs="*", help="only these exercises (their survivors are listed)")
    parser.add_argument("--limit", type=int, default=None, help="at most this many mutants per check")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    limit = 12 if args.quick else args.limit
    wanted = QUICK if args.quick else args.only
    library, by_exercise = references(), checks()
    totals, skipped, all_survivors = Counter(), [], []
    start = time.process_time()
    print(f"{'check':34s} " + " ".join(f"{c:>10s}" for c in COLUMNS))
    for name in exercises():
        if wanted and name not in wanted:
            continue
        if name not in library or name not in by_exercise:
            skipped.append(name)
            continue
        counts, survivors = score(name, library[name], by_exercise[name], limit)
        all_survivors += survivors
        totals += counts
        totals["checks"] += 1
        print(f"{name:34s} " + " ".join(f"{counts[c]:>10d}" for c in COLUMNS), flush=True)
    print(f"{'all':34s} " + " ".join(f"{totals[c]:>10d}" for c in COLUMNS))
    if skipped:
        print(f"no reference function in the library (answers by hand, or several functions): {', '.join(skipped)}")
    for mutant, description in all_survivors:
        print(f"survived: {mutant.key}  {description}")
    print(f"({time.process_time() - start:.0f} CPU-s)")
    print(
        f"mutants: checks={totals['checks']} generated={totals['generated']} rejected={totals['rejected']} "
        f"named={totals['named']} equivalent={totals['equivalent']} survived={totals['survived']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
