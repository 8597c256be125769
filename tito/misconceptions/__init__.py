"""The misconception catalogue: the wrong implementations learners typically write, one per entry.

Each module's entries are in `tito/misconceptions/<name>.py` (`tensor.py` for 01_tensor, `embeddings.py`
for 11_embeddings, ...) as a list `MISTAKES` of `Mistake`s. An entry is

* `exercise`: the function the learner writes, by the qualified name the summary uses
  (`EmbeddingBackward.backward`, `init_table`, `Adam._update.update_block`);
* `misconception`: what the learner believed, in one sentence;
* `replacement`: the learner's wrong body, source text that takes the place of the solution block
  (`### BEGIN SOLUTION` ... `### END SOLUTION`), exactly where the learner writes it (it is dedented and
  re-indented to the markers' indentation);
* `says`: the words the checks say when they recognise this mistake (`"repeated ids"`), or None when the
  mistake has no name beyond "wrong values".

`tests/tito/test_misconceptions.py` proves every entry is caught: the module's checks fail, the summary's
first entry names the exercise and shows expected against actual, and says `says`; `tito grade` uses
`says` to name the misconception it sees in a learner's failures.

Applying a mistake (`patched_source`, `patched_code`) works on the exported package file, where the
solution markers survive as comments: the block is replaced as the learner's export would replace it.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import textwrap
import types
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tito.release import cell_blocks


@dataclass(frozen=True)
class Mistake:
    exercise: str
    misconception: str
    replacement: str
    says: str | None = None
    name: str = ""          # a short id, unique within its module ("repeated-ids-lost")

    def __post_init__(self):
        if not self.name:
            object.__setattr__(self, "name", self.exercise)


class CatalogueError(Exception):
    """An entry cannot be applied: its exercise has no solution block in the package file."""


def catalogue() -> dict[str, list[Mistake]]:
    """Module name (`embeddings`) -> its mistakes, in the order the entries are written."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        if info.name.startswith("_") or info.name in ("prove",):
            continue
        entries = importlib.import_module(f"{__name__}.{info.name}")
        mistakes = getattr(entries, "MISTAKES", None)
        if mistakes is not None:
            found[info.name] = list(mistakes)
    return found


def mistakes_of(module_name: str) -> list[Mistake]:
    try:
        entries = importlib.import_module(f"{__name__}.{module_name}")
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{module_name}":
            raise
        return []
    return list(getattr(entries, "MISTAKES", []))


# ---------------------------------------------------------------------------
# Applying a mistake to exported code


def replace_block(source: str, exercise: str, replacement: str, where: str = "package file") -> str:
    """`source` (a package file, or a notebook cell) with the solution block of `exercise` replaced by
    `replacement` (markers included), at the markers' indentation."""
    blocks = [block for block in cell_blocks(source, where, 1) if block.function == exercise]
    if len(blocks) != 1:
        raise CatalogueError(f"{where}: {len(blocks)} solution blocks in {exercise}, expected 1")
    block = blocks[0]
    body = textwrap.indent(textwrap.dedent(replacement).strip("\n"), block.indent).splitlines()
    lines = source.splitlines()
    lines[block.begin_line - 1:block.end_line] = body
    return "\n".join(lines) + ("\n" if source.endswith("\n") else "")


def replace_stub(source: str, exercise: str, replacement: str) -> str:
    """A learner notebook cell's `source` with the release stub of `exercise` replaced by `replacement`:
    what a learner who holds this misconception pastes in."""
    from tito.release import STUB_SUFFIX

    stub = f'raise NotImplementedError("{exercise}{STUB_SUFFIX}")'
    lines = source.splitlines()
    hits = [number for number, line in enumerate(lines) if line.strip() == stub]
    if len(hits) != 1:
        raise CatalogueError(f"the stub of {exercise} is not in the cell once ({len(hits)} times)")
    indent = lines[hits[0]][: len(lines[hits[0]]) - len(lines[hits[0]].lstrip())]
    lines[hits[0]:hits[0] + 1] = textwrap.indent(textwrap.dedent(replacement).strip("\n"), indent).splitlines()
    return "\n".join(lines) + ("\n" if source.endswith("\n") else "")


def _outermost_function(exercise: str, source: str) -> str:
    """The qualified name of the outermost function around `exercise` (`Adam._update` for
    `Adam._update.update_block`): the code object that is swapped."""
    import ast

    tree = ast.parse(source)
    parts, node, qualified = exercise.split("."), tree, []
    for part in parts:
        child = next((c for c in node.body if isinstance(c, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and c.name == part), None)
        if child is None:
            raise CatalogueError(f"no {exercise} in the package file")
        qualified.append(part)
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return ".".join(qualified)
        node = child
    raise CatalogueError(f"{exercise} is not a function")


def _find_code(code: types.CodeType, qualname: str) -> types.CodeType | None:
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            if constant.co_qualname == qualname:
                return constant
            found = _find_code(constant, qualname)
            if found is not None:
                return found
    return None


def _function_object(module: types.ModuleType, qualname: str) -> types.FunctionType:
    """The function object behind `qualname` in `module`, through staticmethod/classmethod/property and
    functools.wraps (`__wrapped__`)."""
    target = module
    for part in qualname.split("."):
        namespace = vars(target) if isinstance(target, (type, types.ModuleType)) else {}
        if part not in namespace:
            raise CatalogueError(f"{module.__name__} has no {qualname}")
        target = namespace[part]
        if isinstance(target, (staticmethod, classmethod)):
            target = target.__func__
        elif isinstance(target, property):
            target = target.fget
    while not isinstance(target, types.FunctionType) and hasattr(target, "__wrapped__"):
        target = target.__wrapped__
    while isinstance(target, types.FunctionType) and hasattr(target, "__wrapped__"):
        target = target.__wrapped__
    if not isinstance(target, types.FunctionType):
        raise CatalogueError(f"{module.__name__}.{qualname} is not a Python function")
    return target


@contextmanager
def applied(module: types.ModuleType, mistake: Mistake):
    """Within the block, `module` (an imported package module) runs `mistake` instead of its solution.

    The package file is patched in memory and compiled under its own file name; the code object of the
    outermost function around the exercise is swapped into the live function object, so every reference
    to it (a class, `from ... import`, the kernel table) runs the learner's version. Restored after."""
    path = Path(inspect.getfile(module))
    source = path.read_text(encoding="utf-8")
    patched = replace_block(source, mistake.exercise, mistake.replacement, where=path.name)
    outer = _outermost_function(mistake.exercise, source)
    code = _find_code(compile(patched, str(path), "exec"), outer)
    if code is None:
        raise CatalogueError(f"compiling the patched {path.name} gave no {outer}")
    function = _function_object(module, outer)
    if len(code.co_freevars) != len(function.__code__.co_freevars):
        raise CatalogueError(f"{outer}: the replacement changes the function's closure variables")
    original = function.__code__
    function.__code__ = code
    try:
        yield function
    finally:
        function.__code__ = original
