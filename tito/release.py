"""Learner notebooks: the dev notebooks with the solutions taken out.

A dev notebook marks what the learner writes with two comment lines inside an
exported function's body:

    def backward(ctx, grad):
        \"\"\"...TODO / APPROACH / HINTS for the learner...\"\"\"
        ### BEGIN SOLUTION
        a, b = ctx.saved
        return grad * b, grad * a
        ### END SOLUTION

`release_notebook` replaces each such block, markers included, with one line
at the markers' indentation,

        raise NotImplementedError("MulBackward.backward: implement this (see TODO above)")

keeps everything else (docstrings, markdown, tests, the `#| export` and
`#| default_exp` directives) and clears the outputs. Markers must sit inside a
function body, in pairs, not nested; anything else is a `ReleaseError` naming
the notebook, the cell and the line, because a stray marker would either leak
a solution or break the learner's notebook.

The stub's message has a fixed shape, `"<function>: implement this"`, so
`find_stubs` can name the functions still unimplemented in exported code.

Where the learner notebooks live, `release/NN_name/name.ipynb`, is defined
in `tito.repo` (`learner_notebook`).
"""
from __future__ import annotations

import ast
import copy
import json
import re
from dataclasses import dataclass
from pathlib import Path

BEGIN_MARKER = "### BEGIN SOLUTION"
END_MARKER = "### END SOLUTION"
STUB_SUFFIX = ": implement this (see TODO above)"
# `raise NotImplementedError("Cls.method: implement this ...")` -> "Cls.method"
_STUB_MESSAGE = re.compile(r"^(?P<name>[A-Za-z_][\w.]*): implement this\b")
# Any comment that looks like a marker, so that a misspelt one is caught instead of leaking a solution.
_MARKER_LIKE = re.compile(r"^\s*#.*\b(BEGIN|END)\s+SOLUTION\b", re.IGNORECASE)
HEADER_CELL_ID = "tito-learner-header"


class ReleaseError(Exception):
    """The solution markers of a notebook cannot be turned into a learner notebook."""


@dataclass(frozen=True)
class SolutionBlock:
    """One `### BEGIN SOLUTION` ... `### END SOLUTION` block in a code cell."""

    cell_number: int  # 1-based among all cells, as Jupyter shows them
    begin_line: int  # 1-based line of the BEGIN marker within the cell
    end_line: int  # 1-based line of the END marker
    indent: str  # the markers' indentation, used for the stub
    function: str  # qualified name of the enclosing function, e.g. "MulBackward.backward"
    docstring: str  # the enclosing function's docstring ("" if none)
    solution: tuple[str, ...]  # the lines strictly between the markers

    @property
    def stub(self) -> str:
        return f'{self.indent}raise NotImplementedError("{self.function}{STUB_SUFFIX}")'


# ---------------------------------------------------------------------------
# Reading notebooks


def read_notebook(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_notebook(notebook: dict, path: Path) -> None:
    """Write like nbdev_clean does (indent 1, UTF-8, trailing newline)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def default_export(notebook: dict) -> str | None:
    """The module a notebook exports to (`#| default_exp core.tensor` -> `core.tensor`)."""
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        for line in cell_source(cell).splitlines():
            match = re.match(r"^\s*#\|\s*default_exp\s+(\S+)", line)
            if match:
                return match[1]
    return None


# ---------------------------------------------------------------------------
# Finding the blocks


def _functions_by_line(tree: ast.AST) -> list[tuple[ast.AST, str]]:
    """Every function in `tree` with its qualified name (`Class.method`, `outer.inner`)."""
    found = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                found.append((child, name))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _is_code(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def cell_blocks(source: str, where: str, cell_number: int) -> list[SolutionBlock]:
    """The solution blocks of one cell's source; `where` names the notebook in errors."""
    lines = source.splitlines()
    place = f"{where}, cell {cell_number}"
    pairs, begin = [], None
    for number, line in enumerate(lines, start=1):
        if not _MARKER_LIKE.match(line):
            continue
        stripped = line.strip()
        if stripped == BEGIN_MARKER:
            if begin is not None:
                raise ReleaseError(f"{place}, line {number}: `{BEGIN_MARKER}` inside the block opened on line "
                                   f"{begin}; solution blocks cannot be nested")
            begin = number
        elif stripped == END_MARKER:
            if begin is None:
                raise ReleaseError(f"{place}, line {number}: `{END_MARKER}` without a `{BEGIN_MARKER}` before it")
            if _indent_of(line) != _indent_of(lines[begin - 1]):
                raise ReleaseError(f"{place}, lines {begin} and {number}: the BEGIN and END markers must be "
                                   f"indented alike")
            pairs.append((begin, number))
            begin = None
        else:
            raise ReleaseError(f"{place}, line {number}: {stripped!r} looks like a solution marker but is not "
                               f"exactly `{BEGIN_MARKER}` or `{END_MARKER}`")
    if begin is not None:
        raise ReleaseError(f"{place}, line {begin}: `{BEGIN_MARKER}` is never closed by `{END_MARKER}`")
    if not pairs:
        return []

    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise ReleaseError(f"{place}: cannot parse the cell to find the function around its solution markers "
                           f"({error.msg}, line {error.lineno})") from None
    functions = _functions_by_line(tree)
    blocks = []
    for begin, end in pairs:
        indent = _indent_of(lines[begin - 1])
        body = lines[begin:end - 1]
        code_lines = [begin + 1 + offset for offset, line in enumerate(body) if _is_code(line)]
        if not code_lines:
            raise ReleaseError(f"{place}, lines {begin}-{end}: the solution block holds no code")
        for number in code_lines:
            if len(_indent_of(lines[number - 1])) < len(indent):
                raise ReleaseError(f"{place}, line {number}: solution code is indented less than its markers "
                                   f"(line {begin}); the block must sit inside one function body")
        enclosing = [
            (node, name) for node, name in functions
            if node.body[0].lineno <= code_lines[0] and code_lines[-1] <= node.end_lineno
        ]
        if not enclosing:
            raise ReleaseError(f"{place}, lines {begin}-{end}: solution markers must be inside a function body")
        node, name = max(enclosing, key=lambda item: item[0].lineno)  # the innermost
        if len(indent) <= node.col_offset:
            raise ReleaseError(f"{place}, line {begin}: the markers must be indented as the body of {name}()")
        blocks.append(SolutionBlock(
            cell_number=cell_number, begin_line=begin, end_line=end, indent=indent, function=name,
            docstring=ast.get_docstring(node) or "", solution=tuple(body),
        ))
    return blocks


def solution_blocks(notebook: dict, where: str = "notebook") -> list[SolutionBlock]:
    """All solution blocks of a notebook, in order; raises ReleaseError on bad markers."""
    blocks = []
    for cell_number, cell in enumerate(notebook.get("cells", []), start=1):
        source = cell_source(cell)
        if cell.get("cell_type") != "code":
            if any(_MARKER_LIKE.match(line) for line in source.splitlines()):
                raise ReleaseError(f"{where}, cell {cell_number}: solution markers in a {cell.get('cell_type')} "
                                   f"cell; they belong in a code cell, inside a function body")
            continue
        blocks += cell_blocks(source, where, cell_number)
    return blocks


# ---------------------------------------------------------------------------
# Writing the learner notebook


def _stubbed_source(source: str, blocks: list[SolutionBlock]) -> str:
    lines = source.splitlines()
    for block in sorted(blocks, key=lambda b: b.begin_line, reverse=True):
        lines[block.begin_line - 1:block.end_line] = [block.stub]
    return "\n".join(lines) + ("\n" if source.endswith("\n") else "")


def _header_cell(dev_name: str, command_hint: str) -> dict:
    text = (
        f"**Your notebook.** `tito module release` made it from `{dev_name}` with the solutions taken out: "
        "every function that raises `NotImplementedError` is yours to write (its docstring says what to do). "
        f"Run the cells as you go; when they all pass, run `{command_hint}`. "
        "`tito module reset` gives you a fresh copy."
    )
    return {"cell_type": "markdown", "id": HEADER_CELL_ID, "metadata": {}, "source": text}


def release_notebook(notebook: dict, where: str = "notebook", command_hint: str = "tito module complete") -> dict:
    """The learner version of a dev notebook: stubs for solutions, outputs cleared.

    `where` names the notebook in errors and in the header cell.
    """
    blocks = solution_blocks(notebook, where)
    learner = copy.deepcopy(notebook)
    by_cell: dict[int, list[SolutionBlock]] = {}
    for block in blocks:
        by_cell.setdefault(block.cell_number, []).append(block)
    for cell_number, cell in enumerate(learner["cells"], start=1):
        if cell.get("cell_type") != "code":
            continue
        if cell_number in by_cell:
            source = _stubbed_source(cell_source(cell), by_cell[cell_number])
            try:
                ast.parse(source)
            except SyntaxError as error:  # not expected once the checks above pass; never write a broken notebook
                raise ReleaseError(f"{where}, cell {cell_number}: replacing the solution by a stub gives invalid "
                                   f"Python ({error.msg}, line {error.lineno})") from None
            cell["source"] = source
        cell["outputs"] = []
        cell["execution_count"] = None
    learner["cells"] = [_header_cell(Path(where).name, command_hint)] + [
        cell for cell in learner["cells"] if cell.get("id") != HEADER_CELL_ID
    ]
    learner.setdefault("metadata", {})["tito"] = {"learner_notebook_of": Path(where).as_posix()}
    return learner


def stubs_in_notebook(notebook: dict) -> list[str]:
    """Functions whose body is still a release stub, in notebook order."""
    names = []
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code":
            names += _stub_names(cell_source(cell))
    return names


# ---------------------------------------------------------------------------
# Finding stubs in exported code


def _stub_names(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
            continue
        call = node.exc
        if getattr(call.func, "id", None) != "NotImplementedError" or not call.args:
            continue
        message = call.args[0]
        if isinstance(message, ast.Constant) and isinstance(message.value, str):
            match = _STUB_MESSAGE.match(message.value)
            if match:
                names.append((node.lineno, match["name"]))
    return [name for _, name in sorted(names)]


def find_stubs(path: Path) -> list[str]:
    """Functions in a Python file whose body is still a release stub, in file order."""
    try:
        return _stub_names(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return []
