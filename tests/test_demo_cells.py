"""Demo cells run the student's function, say so, and show (or refuse) a wrong one (issue 22).

Every given code cell of the solutions that calls an exercise's function calls it through
``course_lib.checks.your``, which prints whether its check passed; the demos that a wrong function
could pass off as right (a training run, a gradient ascent) refuse it with ``CheckNotPassed``.
The cells are run here in-process, with a mutant from ``tests/mutants`` in place of the solution.
"""

from __future__ import annotations

import contextlib
import io
import re
import tokenize
from pathlib import Path

import nbformat
import pytest

from course_lib.checks import CheckNotPassed

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))


def _cells(path: Path) -> dict:
    return {cell.id: cell for cell in nbformat.read(path, as_version=4).cells}


def _role(cell) -> str:
    tags = cell.metadata.get("tags", [])
    return "solution" if "solution" in tags else "check" if "check" in tags else "given"


def _code_only(source: str) -> str:
    """The cell's code with its comments and string literals blanked out (each character a space, lines kept)."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    chars = list(source)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING):
            begin = starts[token.start[0] - 1] + token.start[1]
            end = starts[token.end[0] - 1] + token.end[1]
            chars[begin:end] = [c if c == "\n" else " " for c in chars[begin:end]]
    return "".join(chars)


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.name for p in SOLUTIONS])
def test_every_demo_calls_the_student_function_through_your(path):
    nb = nbformat.read(path, as_version=4)
    exercises = list(nb.metadata["course"]["exercises"])
    demos = [c for c in nb.cells if c.cell_type == "code" and _role(c) == "given" and not c.id.endswith("-setup")]
    problems = []
    for cell in demos:
        code = _code_only(cell.source)  # comments and docstrings may name the function
        for name in exercises:
            uses = re.findall(rf"(?<![\w.]){name}\b", code)
            through_your = re.findall(rf"\byour\(\s*{name}\b", code)
            if uses and len(uses) != len(through_your):
                problems.append(f"{cell.id} calls {name} without your(...)")
    assert not problems, "\n".join(problems)
    # and the cells of every exercise with a demo say it ran the student's function
    for cell in demos:
        if any(re.search(rf"\byour\(\s*{n}\b", cell.source) for n in exercises):
            text = "".join(o.get("text", "") for o in cell.outputs)
            assert "Running your" in text, f"{cell.id}: its stored output does not say whose function ran"


class Kernel:
    """A notebook's cells run in one namespace, the way a student runs them in order."""

    def __init__(self, path: Path):
        self.cells = _cells(path)
        self.namespace: dict = {}

    def run(self, cell_id: str, **replace) -> str:
        self.namespace.update(replace)
        with contextlib.redirect_stdout(io.StringIO()) as out:
            exec(compile(self.cells[cell_id].source, cell_id, "exec"), self.namespace)  # noqa: S102
        return out.getvalue()

    def solution(self, cell_id: str) -> None:
        self.run(cell_id)

    def check_fails(self, cell_id: str) -> str:
        with pytest.raises(AssertionError) as rejected:
            self.run(cell_id)
        return str(rejected.value)


def _notebook(stem: str) -> Path:
    return next(p for p in SOLUTIONS if p.stem == stem)


def test_a_biased_gradient_is_shown_and_refused_by_the_ascent():
    from mutants.mc_gradient import mc_onehot_without_minus_pi

    nb = Kernel(_notebook("02_policy_gradient"))
    nb.run("pgx02-setup")
    nb.namespace["mc_policy_gradient"] = mc_onehot_without_minus_pi
    assert "without its -pi term" in nb.check_fails("pgx02-mc-check")
    shown = nb.run("pgx02-mc-try")
    assert "Running your mc_onehot_without_minus_pi: the check above has not passed yet" in shown
    errors = [float(x) for x in re.findall(r"RMS error (\d\.\d+)", shown)]
    assert errors[-1] > 3 * errors[0] / 16, "a biased estimate's error must not fall like 1/sqrt(n)"
    with pytest.raises(CheckNotPassed, match="the check above has not passed yet"):
        nb.run("pgx02-ascent")


def test_the_ascent_runs_the_students_checked_function():
    nb = Kernel(_notebook("02_policy_gradient"))
    nb.run("pgx02-setup")
    nb.solution("pgx02-mc-solution")
    nb.run("pgx02-mc-check")
    nb.run("pgx02-mc-try")
    calls = []
    checked = nb.namespace["mc_policy_gradient"]
    # The same object, only counting its calls: the demo must call it, not the library's.
    import course_lib.checks.demo as demo

    def counting(*args, **kwargs):
        calls.append(1)
        return checked(*args, **kwargs)

    demo.record_pass("mc_policy_gradient", counting)
    nb.namespace["mc_policy_gradient"] = counting
    shown = nb.run("pgx02-ascent")
    assert shown.startswith("Running your counting (its check passed).") and len(calls) == 201


def test_a_wrong_gae_is_shown_beside_the_expected_columns():
    from mutants.gae import gae_lam_not_gamma_lam

    nb = Kernel(_notebook("04_gae"))
    nb.run("ex04-setup")
    nb.namespace["compute_gae"] = gae_lam_not_gamma_lam
    assert "lam alone" in nb.check_fails("ex04-gae-check")
    shown = nb.run("ex04-gae-try")
    assert "has not passed yet" in shown
    yours, expected = re.search(r"lam = 1, yours: (\[.*?\])\s+the return minus V:\s+(\[.*?\])", shown).groups()
    assert yours != expected


def test_cartpole_refuses_a_wrong_loss_and_names_the_students_ppoloss():
    from mutants.ppo import loss_clipped_term_only

    nb = Kernel(_notebook("05_ppo"))
    nb.run("ex05-setup")
    for cell in ("ex05-surrogate-solution", "ex05-value-solution", "ex05-ppoloss-solution"):
        nb.solution(cell)
    nb.run("ex05-value-check")
    nb.run("ex05-ppoloss-check")
    nb.namespace["clipped_surrogate_loss"] = loss_clipped_term_only
    assert "only the clipped term" in nb.check_fails("ex05-surrogate-check")
    assert "yours" in nb.run("ex05-surrogate-try")
    with pytest.raises(CheckNotPassed, match="loss_clipped_term_only: the check above has not passed yet"):
        nb.run("ex05-train")
    source = nb.cells["ex05-train"].source
    assert "ppo_loss=loss" in source and "your(PPOLoss, needs_pass=True)" in source


def test_the_grpo_steps_refuse_a_wrong_loss():
    from mutants.grpo import grpo_unclipped

    nb = Kernel(_notebook("06_grpo"))
    nb.run("ex06-setup")
    nb.namespace["grpo_loss"] = grpo_unclipped
    assert "there is no clip" in nb.check_fails("ex06-loss-check")
    with pytest.raises(CheckNotPassed, match="grpo_unclipped: the check above has not passed yet"):
        nb.run("ex06-step")


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.name for p in SOLUTIONS])
def test_check_cells_show_one_line_not_a_stray_true(path):
    for cell in nbformat.read(path, as_version=4).cells:
        if _role(cell) == "check":
            assert cell.source.rstrip().endswith(";"), f"{cell.id}: end the check call with ';' (no echoed True)"
            shown = [o for o in cell.outputs if o.output_type == "execute_result"]
            assert not shown, f"{cell.id} shows {shown[0]['data']['text/plain']} under its check line"


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.name for p in SOLUTIONS])
def test_cells_show_no_warning_the_student_did_not_cause(path):
    """The stored outputs of a solution notebook (run as the student runs it) hold nothing on stderr: a warning
    from the course's own code (11's std() of one value, say) lands in the student's cell as noise."""
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "code":
            noise = [o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stderr"]
            assert not noise, f"{cell.id} prints on stderr: {noise[0][:200]}"


def test_the_capstone_demo_tells_a_wrong_step_from_the_course_update():
    """Solution 08's demo steps a copy with the course's grpo_step in its first round, on the same samples: a wrong
    step (here the one that forgets zero_grad, the smallest difference of the catalogue) is named there, and the
    solution's step agreed when the notebook was built. One round, not the demo's twenty."""
    from mutants.capstone import MUTANTS

    forgets_zero_grad = next(fn for name, fn, label in MUTANTS if name == "grpo_step" and label == "zero_grad")
    nb = Kernel(ROOT / "solutions" / "08_capstone.ipynb")
    stored = "".join(o.get("text", "") for o in nb.cells["s08-12"].outputs)
    assert "end 0.0e+00 away: the same update" in stored, stored
    nb.run("s08-01")
    for cell in ("s08-03", "s08-06"):
        nb.solution(cell)
    demo = nb.cells["s08-12"].source
    definitions = demo[: demo.index('print(f"held-out')]  # the cell without its 20-round run
    assert "capstone.grpo_step" in definitions and "train()" in demo[len(definitions) :]
    nb.namespace["grpo_step"] = forgets_zero_grad
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(definitions, "s08-12", "exec"), nb.namespace)  # noqa: S102
        nb.namespace["train"](rounds=1)
    assert "NOT the course update" in out.getvalue(), out.getvalue()
