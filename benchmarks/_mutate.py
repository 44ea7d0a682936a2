"""Mutants of a reference function, made mechanically from its source.

Mutation testing asks of a test suite: if the code were wrong in a small way, would a test notice? Tools such as
mutmut and cosmic-ray answer it for a whole project; here we need it for one function at a time (the reference of
an exercise), judged by one check, so the operators are written out below, small enough to read.

A mutant is the reference with ONE change at ONE place of its syntax tree. The operators are the classic ones:

- ``binop``: an arithmetic operator swapped (``+`` and ``-``, ``*`` and ``/``, ``**`` to ``*``, ``//`` to ``/``),
  in expressions and in augmented assignments (``x += y``);
- ``compare``: a comparison swapped (``<`` and ``<=``, ``>`` and ``>=``, ``==`` and ``!=``, ``is`` and ``is not``,
  ``in`` and ``not in``);
- ``boolop``: ``and`` and ``or``; ``not``: a ``not`` dropped; ``negate``: a unary minus dropped;
- ``constant``: a number moved by one (``n`` to ``n + 1`` and ``n - 1``), a boolean flipped, ``zeros`` and
  ``ones`` swapped;
- ``reduction``: a reduction or an axis function swapped (``sum`` and ``mean``, ``max`` and ``min``, ``cumsum``
  and ``cumprod``, ``argmax`` and ``argmin``, ``flip`` dropped); ``order``: ``reversed(...)`` dropped;
- ``detach``: a ``.detach()`` dropped, or one added to a returned value (where the function is annotated to
  return tensors);
- ``inplace``: an out-of-place tensor method made in-place (``x.clamp(...)`` to ``x.clamp_(...)``), and
  ``x = x + y`` written ``x += y`` (both change a tensor the caller still holds).

Each mutant has a stable key, ``<name>:<line>:<column>:<operator>:<n>``, with the line counted from the ``def``
(or ``class``), so a list of mutants known to be equivalent survives edits elsewhere in the module.

Helpers. Some references are thin wrappers: chapter 01's ``math_answer_reward`` is one line that calls
``extract_final_answer`` and ``_same_answer``, so its own source has nothing to mutate, and a check that compared
nothing would score as well as one that compared everything. A wrapper's logic lives in its helpers, so a
reference whose own source yields fewer than ``HELPER_THRESHOLD`` mutants also has the functions it calls mutated,
to ``HELPER_DEPTH`` calls deep: the plain names it calls that resolve, in its module, to a function defined in that
module. Argument-validation helpers (``_require*``, ``_check*``, ``_validate*``) are left out: their mutants test
the refusals, which the exercises mostly do not ask for. Calls through an attribute (``_validate.require_int``,
``torch.where``) reach other modules and are never followed.

A helper's mutant is still one change at one place, in the helper. Its key names both functions,
``<reference>><helper>:<line>:<column>:<operator>:<n>``, the line counted from the helper's ``def``. ``build``
compiles the mutated helper into a copy of the module's namespace, then executes there, unchanged, the source of
the other helpers and of the reference itself, so that every call on the way (the reference's, and a helper's call
to a deeper one) resolves to the copy, and so to the mutated helper.
"""

from __future__ import annotations

import ast
import copy
import inspect
import textwrap
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

BINOP_SWAPS = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.Pow: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
}
COMPARE_SWAPS = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
BOOL_SWAPS = {ast.And: ast.Or, ast.Or: ast.And}
REDUCTION_SWAPS = {
    "sum": "mean",
    "mean": "sum",
    "max": "min",
    "min": "max",
    "amax": "amin",
    "amin": "amax",
    "argmax": "argmin",
    "argmin": "argmax",
    "cumsum": "cumprod",
    "cumprod": "cumsum",
    "std": "var",
    "var": "std",
    "logsumexp": "sum",
    "softmax": "log_softmax",
    "log_softmax": "softmax",
}
INITIAL_SWAPS = {"zeros": "ones", "ones": "zeros", "zeros_like": "ones_like", "ones_like": "zeros_like"}
HELPER_THRESHOLD = 8  # a reference with fewer mutants of its own also has its helpers mutated
HELPER_DEPTH = 2  # the reference's callees, and theirs
VALIDATION_PREFIXES = ("_require", "_check", "_validate")
INPLACE_METHODS = {"add", "sub", "mul", "div", "clamp", "exp", "log", "neg", "abs", "sqrt", "pow", "masked_fill"}


@dataclass(frozen=True)
class Mutant:
    """One change at one place of the reference."""

    key: str  # <name>:<line>:<column>:<operator>:<n>, the line counted from the def; <name> is <reference>><helper>
    operator: str
    description: str  # what changed, as source: "`a + b` -> `a - b`"
    source: str  # the whole mutated function (or class): the helper, for a helper's mutant
    helper: str = ""  # the name of the helper changed, or "" where the reference itself is


def _detach_if_tensor(value):
    """What the ``detach`` operator adds to a returned value: a tensor detached, anything else as it is."""
    return value.detach() if isinstance(value, torch.Tensor) else value


# ---------------------------------------------------------------------------------------------------------------
# The operators. Each takes a node and yields (operator, replacement node) pairs: the change, at that node only.
# ---------------------------------------------------------------------------------------------------------------


def _binop(node) -> Iterator[tuple[str, ast.AST]]:
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in BINOP_SWAPS:
        changed = copy.copy(node)
        changed.op = BINOP_SWAPS[type(node.op)]()
        yield "binop", changed


def _compare(node):
    if isinstance(node, ast.Compare):
        for position, op in enumerate(node.ops):
            if type(op) in COMPARE_SWAPS:
                changed = copy.copy(node)
                changed.ops = list(node.ops)
                changed.ops[position] = COMPARE_SWAPS[type(op)]()
                yield "compare", changed


def _boolean(node):
    if isinstance(node, ast.BoolOp):
        changed = copy.copy(node)
        changed.op = BOOL_SWAPS[type(node.op)]()
        yield "boolop", changed
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "not", node.operand
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        yield "negate", node.operand


def _constant(node):
    if not isinstance(node, ast.Constant):
        return
    if isinstance(node.value, bool):
        yield "constant", ast.Constant(not node.value)
    elif isinstance(node.value, (int, float)):
        yield "constant", ast.Constant(node.value + 1)
        yield "constant", ast.Constant(node.value - 1)


def _reduction(node):
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return
    name = node.func.attr
    if name in REDUCTION_SWAPS:
        changed = copy.copy(node)
        changed.func = ast.Attribute(node.func.value, REDUCTION_SWAPS[name], ast.Load())
        yield "reduction", changed
    if name == "flip":  # x.flip(-1) -> x: the reversal forgotten
        yield "reduction", node.func.value
    if name in INITIAL_SWAPS:  # torch.zeros(...) -> torch.ones(...): a running sum started at the wrong value
        changed = copy.copy(node)
        changed.func = ast.Attribute(node.func.value, INITIAL_SWAPS[name], ast.Load())
        yield "constant", changed


def _order(node):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "reversed":
        yield "order", node.args[0]  # a backward recursion run forwards


def _detach(node, returns_tensors: bool):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "detach":
        if not node.args and not node.keywords:
            yield "detach", node.func.value  # x.detach() -> x
    # A detach added where the function says it returns tensors (its annotation): a dict, a float or a list of
    # strings has no gradient to lose, and such a mutant would be the reference itself.
    if returns_tensors and isinstance(node, ast.Return) and node.value is not None:
        values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        for position, value in enumerate(values):
            if isinstance(value, ast.Constant):
                continue
            detached = ast.Call(ast.Name("_detach_if_tensor", ast.Load()), [value], [])
            changed = copy.copy(node)
            if isinstance(node.value, ast.Tuple):
                elements = list(values)
                elements[position] = detached
                changed.value = ast.Tuple(elements, ast.Load())
            else:
                changed.value = detached
            yield "detach", changed


def _inplace(node):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in INPLACE_METHODS:
        if not (isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"):
            changed = copy.copy(node)
            changed.func = ast.Attribute(node.func.value, node.func.attr + "_", ast.Load())
            yield "inplace", changed
    if (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.BinOp)
        and isinstance(node.value.left, ast.Name)
        and node.value.left.id == node.targets[0].id
    ):
        target = ast.Name(node.targets[0].id, ast.Store())
        yield "inplace", ast.AugAssign(target, node.value.op, node.value.right)


OPERATORS: list[Callable] = [_binop, _compare, _boolean, _constant, _reduction, _order, _detach, _inplace]


# ---------------------------------------------------------------------------------------------------------------
# Walking the tree: every (node, operator) pair, applied to a fresh copy of the tree.
# ---------------------------------------------------------------------------------------------------------------


def _skipped(tree: ast.Module) -> set[int]:
    """Nodes no operator touches (by id): docstrings, and the decorators."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                skipped |= {id(n) for n in ast.walk(decorator)}
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skipped |= {id(n) for n in ast.walk(body[0])}
    return skipped


def _returns_tensors(unit: ast.AST) -> bool:
    """Whether a function is annotated to return tensors (``-> torch.Tensor``, a tuple of them); a class: yes."""
    if isinstance(unit, ast.ClassDef):
        return True
    return unit.returns is not None and "Tensor" in ast.unparse(unit.returns)


class _Replace(ast.NodeTransformer):
    """Put ``replacement`` in the place of the ``index``-th node of ``ast.walk`` order."""

    def __init__(self, index: int, replacement: ast.AST):
        self.index = index
        self.replacement = replacement
        self.target = None

    def run(self, tree: ast.Module) -> ast.Module:
        self.target = list(ast.walk(tree))[self.index]
        return ast.fix_missing_locations(self.visit(tree))

    def visit(self, node):
        if node is self.target:
            return ast.copy_location(self.replacement, node)
        return self.generic_visit(node)


def _source(obj) -> str:
    return textwrap.dedent(inspect.getsource(obj))


def _mutants_of(source: str, name: str, helper: str = "") -> list[Mutant]:
    """Every single-change mutant of one function's (or class's) source, in a stable order, keyed ``<name>:...``."""
    tree = ast.parse(source)
    original = ast.unparse(tree)
    skipped = _skipped(tree)
    returns_tensors = _returns_tensors(tree.body[0])
    found = []
    counts: dict[str, int] = {}
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in skipped or not hasattr(node, "lineno"):
            continue
        for operator in OPERATORS:
            changes = operator(node, returns_tensors) if operator is _detach else operator(node)
            for kind, replacement in changes:
                # the same walk over a fresh parse meets the same node at the same index
                changed = _Replace(index, copy.deepcopy(replacement)).run(ast.parse(source))
                mutated = ast.unparse(changed)
                if mutated == original:
                    continue
                where = f"{name}:{node.lineno - 1}:{node.col_offset}:{kind}"
                counts[where] = counts.get(where, 0) + 1
                before = ast.unparse(node).splitlines()[0]
                after = ast.unparse(replacement).splitlines()[0]
                description = f"`{before}` -> `{after}`"
                found.append(Mutant(f"{where}:{counts[where]}", kind, description, mutated, helper))
    return found


# ---------------------------------------------------------------------------------------------------------------
# Helpers: the functions of the reference's own module that a thin wrapper hands its work to.
# ---------------------------------------------------------------------------------------------------------------


def _called_names(obj) -> list[str]:
    """The plain names ``obj`` calls (``f(...)``, not ``m.f(...)``), each once, in the walk's order."""
    names = []
    for node in ast.walk(ast.parse(_source(obj))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in names:
            names.append(node.func.id)
    return names


def _is_helper(name: str, obj, module) -> bool:
    """A function defined in ``module`` (not imported into it) that does not only validate arguments."""
    defined_here = inspect.isfunction(obj) and obj.__module__ == module.__name__
    return defined_here and not name.startswith(VALIDATION_PREFIXES)


def helpers(reference) -> list:
    """The helpers ``reference`` calls, to ``HELPER_DEPTH`` calls deep, each once, the nearest first."""
    module = inspect.getmodule(reference)
    found = []
    callers = [reference]
    for _ in range(HELPER_DEPTH):
        callees = []
        for caller in callers:
            for name in _called_names(caller):
                obj = vars(module).get(name)
                if not _is_helper(name, obj, module) or obj is reference or obj in found or obj in callees:
                    continue
                callees.append(obj)
        found += callees
        callers = callees
    return found


def mutants(obj) -> list[Mutant]:
    """Every single-change mutant of the function or class ``obj``, in a stable order; then, where those are fewer
    than ``HELPER_THRESHOLD``, every single-change mutant of each of its helpers."""
    found = _mutants_of(_source(obj), obj.__name__)
    if len(found) >= HELPER_THRESHOLD or not inspect.isfunction(obj):
        return found
    for helper in helpers(obj):
        found += _mutants_of(_source(helper), f"{obj.__name__}>{helper.__name__}", helper.__name__)
    return found


# ---------------------------------------------------------------------------------------------------------------
# Building: the mutant as a live function.
# ---------------------------------------------------------------------------------------------------------------


def build(mutant: Mutant, reference) -> Callable:
    """The mutant as a live function (or class), compiled in a copy of the reference's module namespace, under a
    file name of its own (so nothing mistakes it for the course's code).

    For a helper's mutant the copy receives the mutated helper, then the other helpers and the reference, each
    unchanged: recompiled there, their calls look names up in the copy, so they reach the mutated helper."""
    module = inspect.getmodule(reference)
    namespace = dict(vars(module))
    namespace["_detach_if_tensor"] = _detach_if_tensor
    sources = [mutant.source]
    if mutant.helper:
        sources += [_source(helper) for helper in helpers(reference) if helper.__name__ != mutant.helper]
        sources.append(_source(reference))
    for source in sources:
        code = compile(source, f"<mutant {mutant.key}>", "exec")
        exec(code, namespace)  # noqa: S102 - the mutant is made here, from the course's own source
    return namespace[reference.__name__]
