"""``python -m course_lib.authoring.rewrap``: the notebook lines ``ruff format`` leaves too long, rewrapped.

The notebooks' code is formatted at 88 columns (``notebooks/ruff.toml``, ``solutions/ruff.toml``), but the
formatter never splits a comment or a string. This does, in the notebooks of ``notebooks/`` and ``solutions/``:

- a comment on its own line wraps onto more comment lines at the same indentation;
- a comment after code moves onto its own lines above that code;
- a string literal alone on its line (an argument, an item) splits at spaces into adjacent literals, one a line,
  which Python joins back into the same string;
- ``name=<string>`` and ``name = <string>`` split the same way, the string put in parentheses;
- a docstring line breaks at a space, its rest flowed into the line that continues its paragraph (an exercise's
  docstring is its library function's word for word, not line for line: the library is written at 120).

Every change is checked: the cell's syntax tree must be the same before and after (comments are not in it,
adjacent literals are joined by the parser, and a docstring is compared word by word), or the cell is left as it
was. Tables (a rule of ``=``, columns aligned by runs of spaces) are left as they are. Run ``ruff format`` on the
notebooks before and after; what is still too long (a table, an expression) is left for a person.

Usage::

    python -m course_lib.authoring.rewrap [--width 88] [NOTEBOOK ...]
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import textwrap
import tokenize
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
WIDTH = 88
STRING_START = re.compile(r"(?i)^(?:[rbuf]|rb|br|fr|rf)?(['\"])")


DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _parse(source: str) -> ast.Module | None:
    """A cell's syntax tree, IPython magics and shell lines blanked; None when it does not parse."""
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _docstrings(tree: ast.Module) -> list[ast.Constant]:
    """The docstring constants of the functions and classes of ``tree``."""
    return [node.body[0].value for node in ast.walk(tree) if isinstance(node, DEFINITIONS) and ast.get_docstring(node)]


def _tree(source: str) -> str | None:
    """The syntax tree of a cell, dumped, each docstring as its words; None when it does not parse."""
    tree = _parse(source)
    if tree is None:
        return None
    for constant in _docstrings(tree):
        constant.value = " ".join(constant.value.split())
    return ast.dump(tree)


def _wrap_comment(indent: str, text: str, width: int) -> list[str]:
    """``# text`` at ``indent`` as comment lines no wider than ``width``."""
    return textwrap.wrap(text, width=width, initial_indent=indent + "# ", subsequent_indent=indent + "# ")


def _code_and_comment(line: str) -> tuple[str, str | None]:
    """A line split into its code and its trailing comment (None without one), by Python's tokenizer."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line + "\n").readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        # A line that opens or closes a bracket does not tokenize alone: take the last "  # " after which no quote
        # is open (the syntax-tree check in rewrap_source catches a wrong guess).
        at = line.rfind("  # ")
        if at < 0 or line[:at].count('"') % 2 or line[:at].count("'") % 2:
            return line, None
        return line[:at].rstrip(), line[at + 4 :].strip()
    for token in tokens:
        if token.type == tokenize.COMMENT:
            return line[: token.start[1]].rstrip(), token.string[1:].strip()
    return line, None


def _string_token(text: str) -> tuple[str, str, str] | None:
    """``(prefix, quote, body)`` when ``text`` is exactly one single-quoted-line string literal, else None."""
    match = STRING_START.match(text)
    if match is None:
        return None
    quote = match.group(1)
    prefix = text[: match.start(1)]
    body = text[match.end(1) :]
    if not body.endswith(quote) or body.startswith(quote * 2):
        return None
    body = body[:-1]
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text + "\n").readline) if t.string.strip()]
    except (tokenize.TokenError, SyntaxError):
        return None
    if len(tokens) != 1 or tokens[0].type != tokenize.STRING:  # one literal, not two side by side
        return None
    return prefix, quote, body


def _split_body(body: str, first: int, rest: int, is_f: bool) -> list[str] | None:
    """``body`` cut after spaces (outside ``{...}`` in an f-string) or after a placeholder into pieces: the first at
    most ``first`` wide, the others ``rest``; None when no cut fits."""
    cuts, depth = [], 0
    for i, char in enumerate(body):
        if is_f and char == "{":
            depth += 1
        elif is_f and char == "}":
            depth -= 1
            if depth == 0 and body[i + 1 : i + 2] not in ("}", ""):  # between two placeholders, say
                cuts.append(i + 1)
        elif char == " " and depth == 0 and (i == 0 or body[i - 1] != "\\"):
            cuts.append(i + 1)
    pieces, start, limit = [], 0, first
    while len(body) - start > limit:
        fitting = [cut for cut in cuts if start < cut <= start + limit]
        if not fitting:
            return None
        pieces.append(body[start : fitting[-1]])
        start, limit = fitting[-1], rest
    pieces.append(body[start:])
    return pieces


def _literal(prefix: str, quote: str, piece: str) -> str:
    # A piece without a placeholder drops the f, so that no literal is an f-string with nothing in it.
    if "f" in prefix.lower() and "{" not in piece:
        prefix = re.sub("[fF]", "", prefix)
    return f"{prefix}{quote}{piece}{quote}"


def _split_string_line(line: str, width: int) -> list[str] | None:
    """A line that is ``[name=|name = ]<string>[,|)]`` as several lines, or None when it is not one."""
    indent = line[: len(line) - len(line.lstrip())]
    stripped = line.strip()
    lead = re.match(r"^(\w+\s*=\s*)", stripped)
    head = lead.group(1) if lead else ""
    rest = stripped[len(head) :]
    tail = re.search(r"[,)\]]*$", rest).group(0)
    literal = rest[: len(rest) - len(tail)] if tail else rest
    parsed = _string_token(literal)
    if parsed is None:
        return None
    prefix, quote, body = parsed
    if head and " = " in head:  # an assignment: the string goes into parentheses
        inner = indent + "    "
        overhead = len(inner) + len(prefix) + 2
        pieces = _split_body(body, width - overhead, width - overhead, "f" in prefix.lower())
        if pieces is None:
            return None
        return (
            [f"{indent}{head}("] + [inner + _literal(prefix, quote, piece) for piece in pieces] + [f"{indent}){tail}"]
        )
    first_overhead = len(indent) + len(head) + len(prefix) + 2
    overhead = len(indent) + len(prefix) + 2
    pieces = _split_body(body, width - first_overhead, width - overhead - len(tail), "f" in prefix.lower())
    if pieces is None:
        return None
    lines = [indent + head + _literal(prefix, quote, pieces[0])]
    lines += [indent + _literal(prefix, quote, piece) for piece in pieces[1:]]
    lines[-1] += tail
    return lines


# ---- docstrings -------------------------------------------------------------------------------------------------


def _is_table(line: str) -> bool:
    """A line of a table or a code example: a rule of ``=``, or columns aligned by runs of spaces."""
    text = line.strip()
    return text.startswith("==") or re.search(r"\S {3,}\S", text) is not None


def _starts_item(text: str) -> bool:
    """Whether a docstring line starts an item or a section (``name: ...``, ``- ...``, ``Returns:``)."""
    return bool(re.match(r"^([\w*][\w, *]*( \([^)]*\))?: |- |\w+:$)", text))


def _continuation(lines: list[str], i: int, last: int) -> str:
    """The indentation of the text that continues docstring line ``i`` (the docstring's last line is ``last``)."""
    line = lines[i]
    indent = line[: len(line) - len(line.lstrip())]
    text = line.strip().lstrip('"')
    if re.match(r"^[\w*][\w, *]*( \([^)]*\))?: ", text):  # an item of Args: its text hangs 4 further in
        return indent + "    "
    if text.startswith("- "):
        return indent + "  "
    following = lines[i + 1] if i < last else ""
    if following.strip() and len(following) - len(following.lstrip()) > len(indent):
        return following[: len(following) - len(following.lstrip())]
    return indent


def _rewrap_docstrings(source: str, width: int) -> str:
    """``source`` with each docstring line wider than ``width`` broken at a space, its rest flowed into the line
    that continues its paragraph (or onto a new line at that paragraph's indentation)."""
    tree = _parse(source)
    if tree is None:
        return source
    lines = source.split("\n")
    for constant in sorted(_docstrings(tree), key=lambda c: -c.lineno):
        i, last = constant.lineno - 1, constant.end_lineno - 1
        while i <= last:
            line = lines[i]
            cut = line.rfind(" ", len(line) - len(line.lstrip()) + 1, width + 1)
            if len(line) <= width or _is_table(line) or cut < 0:
                i += 1
                continue
            indent = _continuation(lines, i, last)
            rest = line[cut + 1 :].strip()
            lines[i] = line[:cut].rstrip()
            following = lines[i + 1] if i < last else ""
            same_paragraph = (
                following.strip()
                and following[: len(following) - len(following.lstrip())] == indent
                and not _starts_item(following.strip())
                and not _is_table(following)
                and not following.strip().startswith('"""')
                and not rest.endswith('"""')
            )
            if same_paragraph:
                lines[i + 1] = indent + rest + " " + following.strip()
            else:
                lines.insert(i + 1, indent + rest)
                last += 1
            i += 1
    return "\n".join(lines)


def rewrap_source(source: str, width: int = WIDTH) -> str:
    """``source`` with its too-long comments and strings rewrapped, if its syntax tree stays the same."""
    before = _tree(source)
    if before is None:
        return source
    out = []
    for line in source.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        code, comment = _code_and_comment(line)
        if comment is not None and not code.strip():
            out += _wrap_comment(indent, comment, width)
            continue
        if comment is not None and not comment.startswith(("noqa", "type:")):
            out += _wrap_comment(indent, comment, width)
            line = code
            if len(line) <= width:
                out.append(line)
                continue
        split = _split_string_line(line, width)
        out += split if split else [line]
    new = _rewrap_docstrings("\n".join(out), width)
    return new if _tree(new) == before else source


def rewrap_notebook(path: Path, width: int = WIDTH) -> int:
    """Rewraps every code cell of the notebook at ``path`` in place; returns how many cells changed."""
    nb = nbformat.read(path, as_version=4)
    changed = 0
    for cell in nb.cells:
        if cell.cell_type == "code":
            new = rewrap_source(cell.source, width)
            if new != cell.source:
                cell.source = new
                changed += 1
    if changed:
        nbformat.write(nb, path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib.authoring.rewrap", description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/ and solutions/")
    parser.add_argument("--width", type=int, default=WIDTH, help=f"the longest line (default {WIDTH})")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted(
        (ROOT / "solutions").glob("*.ipynb")
    )
    for path in paths:
        changed = rewrap_notebook(path, args.width)
        if changed:
            print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {changed} cells rewrapped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
