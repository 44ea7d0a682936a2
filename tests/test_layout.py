"""The package's tree is the course's map: no import circles, no long modules, checks apart from the maths.

These tests keep the structure that issue 11 set up from drifting back:
- ``course_lib`` has no import circle (module-level and function-level imports alike);
- no module is over 400 lines (STYLE.md: split a file that passes 400);
- maths, tasks, models and trainers never import ``course_lib.checks`` (only checks import references);
- successive algorithms differ by their idea: the REINFORCE and PPO losses' kernels differ in a few lines, and
  GRPOTrainer is PGTrainer with its advantage, logp_old/logp_ref and loss (``python tests/test_layout.py`` prints
  the trainers' diff sizes).
"""

from __future__ import annotations

import ast
import difflib
import inspect
import textwrap
from pathlib import Path

import pytest

from course_lib import policy_gradient, ppo

LIB = Path(__file__).resolve().parent.parent / "course_lib"
MODULES = {".".join(p.relative_to(LIB.parent).with_suffix("").parts).removesuffix(".__init__"): p
           for p in sorted(LIB.rglob("*.py"))}


def _imports(path: Path, name: str) -> set[str]:
    """The course_lib modules that ``name`` imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in found if m in MODULES and m != name and m != "course_lib"}


GRAPH = {name: _imports(path, name) for name, path in MODULES.items()}


def test_no_import_circle():
    state: dict[str, int] = {}

    def visit(node, stack):
        state[node] = 1
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_is_at_most_400_lines(name):
    n = len(MODULES[name].read_text().splitlines())
    assert n <= 400, f"{name} has {n} lines: split it (STYLE.md, principle 1)"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if not n.startswith(("course_lib.checks", "course_lib.authoring"))))
def test_only_checks_import_checks(name):
    assert not any(m.startswith("course_lib.checks") for m in GRAPH[name]), f"{name} imports course_lib.checks"


def _code_lines(fn) -> list[str]:
    """A function's non-blank lines without its docstring."""
    node = ast.parse(inspect.getsource(fn).lstrip()).body[0]
    doc = node.body[0] if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) else None
    lines = inspect.getsource(fn).lstrip().splitlines()
    skip = set(range(doc.lineno - 1, doc.end_lineno)) if doc else set()
    return [line for i, line in enumerate(lines) if i not in skip and line.strip()]


def changed_lines(a, b) -> int:
    """Lines removed plus lines added by ``diff`` from function ``a`` to function ``b``."""
    diff = difflib.unified_diff(_code_lines(a), _code_lines(b), lineterm="", n=0)
    return sum(1 for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---")))


def test_ppo_loss_is_reinforce_plus_ratio_and_clip():
    # The kernels: PPO zeroes logp_old and adv too, then adds the ratio and the clip; the rest is shared.
    assert changed_lines(policy_gradient._reinforce_loss, ppo._clipped_surrogate_loss) < 20
    # The public functions: the new arguments (logp_old, clip_eps, clip_eps_high) and their validation.
    assert changed_lines(policy_gradient.reinforce_loss, ppo.clipped_surrogate_loss) < 20


# ---------------------------------------------------------------------------
# The trainers: one skeleton, each algorithm its idea
# ---------------------------------------------------------------------------


def _method_lines(fn) -> list[tuple[bool, str]]:
    """A method's non-blank lines without its docstring, each flagged True if it is a decorator or ``def`` line."""
    src = textwrap.dedent(inspect.getsource(fn))
    node = ast.parse(src).body[0]
    first = node.body[0]
    doc = first if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) else None
    skip = set(range(doc.lineno - 1, doc.end_lineno)) if doc else set()
    return [(i < first.lineno - 1, line) for i, line in enumerate(src.splitlines()) if i not in skip and line.strip()]


def flattened(cls) -> list[str]:
    """The code a trainer runs: every method, the most derived one, in the order the base defines them.

    An override that calls ``super().name(...)`` has that line replaced by the base method's body, so a
    subclass reads as what it is: its base plus the lines it adds or changes.
    """
    methods: dict[str, list[tuple[bool, str]]] = {}
    for klass in reversed(cls.__mro__[:-1]):
        for name, attr in vars(klass).items():
            fn = attr.__func__ if isinstance(attr, classmethod) else attr
            if not inspect.isfunction(fn):
                continue
            lines = []
            for is_header, line in _method_lines(fn):
                if f"super().{name}(" in line and name in methods:
                    lines += [(False, base_line) for header, base_line in methods[name] if not header]
                else:
                    lines.append((is_header, line))
            methods[name] = lines
    return [line for lines in methods.values() for _, line in lines]


def _diff_size(a: list[str], b: list[str]) -> tuple[int, int]:
    """``(changed, kept)``: lines removed plus added by ``diff`` from ``a`` to ``b``, and lines of ``a`` kept."""
    diff = [line for line in difflib.unified_diff(a, b, lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    removed = sum(line.startswith("-") for line in diff)
    return len(diff), len(a) - removed


def test_grpo_trainer_is_the_pg_trainer_plus_its_idea():
    from course_lib.trainers.grpo_trainer import GRPOTrainer
    from course_lib.trainers.pg_trainer import PGTrainer

    assert issubclass(GRPOTrainer, PGTrainer)
    # Overridden: the homework constructor (ref_model), the reference copy, the group advantage, logp_old/logp_ref
    # held for the batch, and the loss (grpo_loss: ratio, clip, KL). The loop, sampling, rewards are PGTrainer's.
    pg = flattened(PGTrainer)
    changed, kept = _diff_size(pg, flattened(GRPOTrainer))
    assert changed <= 40 and kept >= 0.9 * len(pg), (changed, kept, len(pg))


def test_ppo_trainer_shares_the_pattern_and_writes_the_loss_once():
    from course_lib.trainers.grpo_trainer import GRPOTrainer
    from course_lib.trainers.ppo_trainer import PPOTrainer

    # PPO collects episodes from environments and trains a critic, so its methods are its own; before the skeleton
    # (PPOTrainer and GRPOTrainer as two unrelated classes) the diff changed 264 lines. The total loss is PPOLoss's.
    changed, _ = _diff_size(flattened(GRPOTrainer), flattened(PPOTrainer))
    assert changed < 264, changed
    source = inspect.getsource(PPOTrainer)
    assert "PPOLoss(" in source and "value_coef * " not in source and "ent_coef * " not in source
    for cls in (GRPOTrainer, PPOTrainer):
        assert hasattr(cls, "Config") and hasattr(cls, "History") and "ent_coef" in cls.Config.__dataclass_fields__
    # Chapter 05 comes before chapter 06: its trainer takes the KL estimators from course_lib.kl, not from grpo.
    assert not any(m.startswith("course_lib.grpo") for m in GRAPH["course_lib.trainers.ppo_trainer"])


if __name__ == "__main__":  # print the diff sizes quoted in issue 11's note
    from course_lib.trainers.grpo_trainer import GRPOTrainer
    from course_lib.trainers.pg_trainer import PGTrainer
    from course_lib.trainers.ppo_trainer import PPOTrainer

    for a, b in ((PGTrainer, GRPOTrainer), (GRPOTrainer, PPOTrainer)):
        changed, kept = _diff_size(flattened(a), flattened(b))
        print(f"{a.__name__} ({len(flattened(a))} lines) -> {b.__name__} ({len(flattened(b))} lines): "
              f"{changed} changed, {kept} kept")
