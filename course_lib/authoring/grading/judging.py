"""Judge a check cell in the grader's own process: the check run again on the kernel's records, and the guard's word.

A check cell that passed in the grading kernel proves little: the kernel runs the student's code. So the grader
runs the same check cell here (:func:`judge_with`), where ``check_against_reference`` reads the student's results
from the records the kernel wrote (copied out of its reach when the cell ended) instead of calling the student's
function, and runs the reference, the comparison and every diagnosis itself: the message is the one a student
sees in JupyterLab. The drawn cases come from the run's key, which the kernel never held. Then the guard's signed
verdict for the cell (:mod:`course_lib.checks.guard`) must say that the watch saw no borrowed call and no thread,
process or early look at the drawn cases.
"""

from __future__ import annotations

from pathlib import Path

from course_lib.authoring.grading.canonical import Canonical
from course_lib.authoring.grading.rebuild import record_folder
from course_lib.authoring.grading.runner import Run


class _Unjudged(BaseException):
    """The check called the student's function itself: the grader cannot replay it from records.

    A BaseException, so that a check's own ``except Exception`` (which turns a student's crash into
    feedback) lets it through."""


class _Student(dict):
    """Names a check cell reads that the imports do not define: the student's, which the grader never runs."""

    def __init__(self, namespace):
        super().__init__()
        self.namespace = namespace

    def __missing__(self, name):
        if name in self.namespace:
            return self.namespace[name]
        import builtins

        if hasattr(builtins, name):
            return getattr(builtins, name)

        def student_function(*args, **kwargs):
            raise _Unjudged(name)

        return student_function


def _cut(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[:limit] + " [...]"


def first_line(text, limit: int = 1000) -> str:
    """The first line that says something, as ``grades.csv`` keeps a message."""
    line = next((line.strip() for line in str(text).strip().splitlines() if line.strip()), "")
    return _cut(line, limit)


def full_text(text, limit: int = 1000) -> str:
    """Every line that says something, each cut as :func:`first_line` cuts its line (continuation lines keep their
    indentation): the message as the student sees it in JupyterLab, whose first line is ``first_line(text)``."""
    lines = [line.rstrip() for line in str(text).strip().splitlines() if line.strip()]
    return "\n".join(_cut(line, limit) for line in lines)


def row_line(message: str) -> str:
    """What ``grades.csv`` keeps of a message: its first line (``messages.jsonl`` keeps the whole)."""
    return message.split("\n", 1)[0]


def guard_says(run: Run, cell_id: str, exercise: str) -> tuple[str, str] | None:
    """The guard's signed verdict on a check cell: None when clean, else (status, message)."""
    from course_lib.checks import seal, watch

    lines = run.verdicts.get(cell_id)
    if not lines:
        return "error", (
            f"{exercise}: the grader's guard sent no verdict for this check (did the solution close or fill the "
            "grader's channel, or stop the check?)"
        )
    for line in lines:
        _, seen, problem = seal.parse_verdict(line)
        if seen.startswith("borrowed "):
            what = seen.removeprefix("borrowed ")
            reference = what.endswith(" reference")
            return "failed", watch.message(exercise, what.removesuffix(" reference"), reference)
        if problem.strip():
            return "failed", f"{exercise}: {problem.strip()}"
    return None


RECORDS_CHANGED = (
    "{exercise}: the check's records changed after its check ended (code that ran after the check rewrote "
    "them): a check's answers must come from the function it calls, while it calls it"
)


def records_final(run: Run, folder: Path, cell_id: str, exercise: str) -> tuple[str, str] | None:
    """None when the records the grader took for this check cell are those the guard signed when the check's watch
    ended (its digest in the cell's last signed verdict: a check armed again later is failed by ``guard_says``),
    else (status, message). No verdict: ``guard_says``."""
    from course_lib.checks import seal

    lines = run.verdicts.get(cell_id)
    if not lines:
        return None
    signed, _, _ = seal.parse_verdict(lines[-1])
    if signed != seal.make_digest()(str(folder)):
        return "failed", RECORDS_CHANGED.format(exercise=exercise)
    return None


def judge_with(notebook: Canonical, private: Path, run: Run):
    """judge_check for one run: the check cell run again in this process, on the kernel's records."""
    from course_lib.checks import guard, recording

    sources = {c.id: c.source for c in notebook.nb.cells if c.cell_type == "code"}

    def judge_check(cell_id: str, exercise: str) -> tuple[str, str] | None:
        namespace: dict = {}
        try:
            exec(compile(notebook.course_imports, "<course imports>", "exec"), namespace)
        except Exception:  # noqa: BLE001 - cannot judge here: the kernel's outcome stands
            return None
        seed = guard.seed_of(run.key, cell_id)
        folder = Path(record_folder(private, cell_id))
        changed = records_final(run, folder, cell_id, exercise)
        if changed is not None:
            return changed
        with recording.judging(folder, seed) as session:
            try:
                exec(compile(sources[cell_id], f"<check {cell_id}>", "exec"), namespace, _Student(namespace))
            except _Unjudged:
                pass
            except recording.NotRecorded as error:
                return "error", f"{error}"
            except NotImplementedError as error:
                return "not attempted", f"NotImplementedError: {full_text(error)}"
            except AssertionError as error:
                return "failed", full_text(error) or "an assertion failed"
            except Exception as error:  # noqa: BLE001 - the check itself failed on the records
                return "error", f"{type(error).__name__} while judging the check: {first_line(error)}"
        if session.calls == 0 and not session.replayed:
            return None  # a check written inline (asserts): judged in the kernel only
        return guard_says(run, cell_id, exercise) or ("passed", session.lines[0] if session.lines else "")

    return judge_check
