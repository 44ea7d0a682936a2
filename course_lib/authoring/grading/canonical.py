"""The instructor's side of grading: the canonical solution notebooks and the hidden checks.

A canonical notebook is ``solutions/NN_name.ipynb``. Grading trusts only it for
everything but the student's solution cells: its given code, its check cells, its
cell order and the points of each exercise (``metadata.course.exercises``).

Hidden checks are extra check cases run only at grading time. They live apart from
the notebooks, in ``grading/hidden/NN_name.py`` (a folder the instructor keeps out of
the students' copy of the course; ``python -m course_lib.build`` never reads it), one
section per exercise, each section the source of one extra check cell::

    # Hidden checks for 00_warmup: run after each exercise's own check, at grading time only.
    import torch

    # %% discounted_return
    r = torch.tensor([[1.0, 2.0], [0.0, 4.0]])
    assert torch.allclose(discounted_return(r, 0.5), torch.tensor([2.0, 2.0])), "wrong on a batch of two episodes"

    # %% reward_to_go
    ...

The lines before the first ``# %% <exercise id>`` header (imports, helpers) are put at
the top of every section. A section runs in the student's kernel right after the
exercise's last check cell, so it calls the student's function by its name; an
``AssertionError`` there fails the exercise with "hidden check: <message>".
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

HEADER = re.compile(r"^# %%[ \t]+(?P<exercise>[A-Za-z_][\w.-]*)[ \t]*$")


class SetupError(Exception):
    """The instructor's material cannot be used (a broken solution notebook or hidden-check file)."""


@dataclass
class Exercise:
    """One graded exercise of a canonical notebook."""

    id: str
    title: str
    points: float
    solution_cells: list[str] = field(default_factory=list)  # cell ids, notebook order
    check_cells: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)  # sources of hidden check cells
    allowed: list[str] = field(default_factory=list)  # course_lib code the solution may call (metadata)
    names: list[str] = field(default_factory=list)  # what its solution cells define: the student's own code


@dataclass
class Canonical:
    """A solution notebook ready to receive a student's solution cells."""

    name: str  # "00_warmup"
    chapter: str  # "00"
    path: Path
    nb: nbformat.NotebookNode
    exercises: dict[str, Exercise]  # in notebook order
    course_imports: str  # every `import course_lib...` statement of the notebook, one per line

    @property
    def max_points(self) -> float:
        return sum(ex.points for ex in self.exercises.values())


def cell_role(cell) -> tuple[str, str | None]:
    """("solution" | "check" | "given", exercise id) of a canonical code cell, from its tags and metadata."""
    tags = cell.get("metadata", {}).get("tags", [])
    exercise = cell.get("metadata", {}).get("course", {}).get("exercise")
    if "solution" in tags:
        return "solution", exercise
    if "check" in tags:
        return "check", exercise
    return "given", None


def load_canonical(path: Path, hidden_folder: Path | None = None) -> Canonical:
    """Read and validate one solution notebook (and its hidden checks); raise SetupError when unusable."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as error:  # noqa: BLE001 - any reason makes the notebook unusable
        raise SetupError(f"{path}: cannot read the solution notebook ({error})") from None
    course = nb.metadata.get("course", {})
    declared = course.get("exercises") or {}
    if not declared:
        raise SetupError(f"{path}: metadata.course.exercises is missing or empty")
    exercises = {}
    for exercise_id, info in declared.items():
        points = info.get("points")
        if not isinstance(points, (int, float)) or isinstance(points, bool) or points < 0:
            raise SetupError(f"{path}: exercise {exercise_id!r} needs a non-negative number of points, got {points!r}")
        allowed = info.get("allowed", [])
        if not isinstance(allowed, list) or not all(isinstance(a, str) and a.startswith("course_lib") for a in allowed):
            raise SetupError(
                f"{path}: exercise {exercise_id!r}: 'allowed' must be a list of course_lib names, got {allowed!r}"
            )
        exercises[exercise_id] = Exercise(exercise_id, str(info.get("title", exercise_id)), points, allowed=allowed)
    seen_ids = set()
    for number, cell in enumerate(nb.cells):
        if not cell.get("id") or cell.id in seen_ids:
            raise SetupError(f"{path}: cell {number} has a missing or duplicated id {cell.get('id')!r}")
        seen_ids.add(cell.id)
        if cell.cell_type != "code":
            continue
        role, exercise_id = cell_role(cell)
        if role == "given":
            continue
        if exercise_id not in exercises:
            raise SetupError(
                f"{path}: {role} cell {cell.id!r} names exercise {exercise_id!r}, "
                "which metadata.course.exercises does not declare"
            )
        getattr(exercises[exercise_id], f"{role}_cells").append(cell.id)
        if role == "solution":
            exercises[exercise_id].names += _defined_names(cell.source)
    for exercise in exercises.values():
        if not exercise.solution_cells or not exercise.check_cells:
            raise SetupError(f"{path}: exercise {exercise.id!r} needs a solution cell and a check cell")
    # Notebook order, not metadata order: the summary lists exercises as the student meets them.
    order = {cell_id: n for n, cell_id in enumerate(c.id for c in nb.cells)}
    exercises = dict(sorted(exercises.items(), key=lambda item: order[item[1].solution_cells[0]]))
    if hidden_folder is not None and (hidden_folder / f"{path.stem}.py").is_file():
        for exercise_id, source in parse_hidden(hidden_folder / f"{path.stem}.py").items():
            if exercise_id not in exercises:
                raise SetupError(
                    f"{hidden_folder / (path.stem + '.py')}: section {exercise_id!r} names no exercise "
                    f"of {path.name} (its exercises: {', '.join(exercises)})"
                )
            exercises[exercise_id].hidden.append(source)
    chapter = str(course.get("chapter") or path.stem.split("_", 1)[0])
    return Canonical(path.stem, chapter, path, nb, exercises, _course_imports(nb))


def parse_hidden(path: Path) -> dict[str, str]:
    """Split a hidden-check file into one source per exercise (the preamble on top of each)."""
    preamble, sections, current = [], {}, None
    for line in path.read_text(encoding="utf-8").splitlines():
        header = HEADER.match(line)
        if header:
            current = header.group("exercise")
            if current in sections:
                raise SetupError(f"{path}: two sections for exercise {current!r}")
            sections[current] = []
        elif current is None:
            preamble.append(line)
        else:
            sections[current].append(line)
    if not sections:
        raise SetupError(f"{path}: no '# %% <exercise id>' section")
    sources = {}
    for exercise_id, lines in sections.items():
        source = "\n".join(preamble + lines).strip() + "\n"
        try:
            compile(source, f"{path}:{exercise_id}", "exec")
        except SyntaxError as error:
            raise SetupError(f"{path}: section {exercise_id!r} does not compile ({error})") from None
        sources[exercise_id] = source
    return sources


def _course_imports(nb) -> str:
    """Every statement of the notebook's given and check cells that imports from course_lib.

    Grading runs them again, after forgetting every cached course_lib module, at the
    top of each check cell: whatever a solution cell did to the check module, or to a
    name bound to it, the check that runs is the one on disk.
    """
    statements = []
    for cell in nb.cells:
        if cell.cell_type != "code" or cell_role(cell)[0] == "solution":
            continue
        # IPython syntax (%magic, !shell) is not Python: blank it before parsing.
        source = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in cell.source.splitlines())
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            if names and all(n == "course_lib" or n.startswith("course_lib.") for n in names):
                statement = ast.unparse(copy.deepcopy(node))
                if statement not in statements:
                    statements.append(statement)
    return "\n".join(statements)


def _defined_names(source: str) -> list[str]:
    """The names a solution cell binds at its top level (``def``, ``class``, ``x = ...``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def load_solutions(folder: Path, hidden_folder: Path | None = None) -> tuple[dict[str, Canonical], list[str]]:
    """Every usable solution notebook of ``folder`` by name, and a line per unusable one."""
    canonical, problems = {}, []
    for path in sorted(folder.glob("*.ipynb")):
        try:
            canonical[path.stem] = load_canonical(path, hidden_folder)
        except SetupError as error:
            problems.append(str(error))
    if hidden_folder is not None and hidden_folder.is_dir():
        for extra in sorted(hidden_folder.glob("*.py")):
            if not (folder / f"{extra.stem}.ipynb").exists():
                problems.append(f"{extra}: hidden checks for {extra.stem}, which has no solution notebook in {folder}")
    return canonical, problems
