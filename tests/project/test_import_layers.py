"""Each module's tests import only that module and earlier ones.

A learner works through the modules in order; a test of module 03 that imports
module 06 would fail for reasons the learner cannot fix yet. This checks every
module's pytest files (`tests/<name>/test_*.py`) and the code cells of its dev
notebooks (the inline tests).

Which module owns a `tinytorch.*` module is read from the notebooks' own
`#| default_exp` lines (and any cell-level `#| export <module>`), not from a
hand-written list.

Three exceptions, by design:
- `tinytorch.core.autograd` and its kernel table `tinytorch.core.kernels` (module 05,
  as TinyTorch numbers it) are available to every module. `Tensor` (module 01)
  imports the engine rather than being monkey-patched by it later, so the engine is
  needed from module 01 on; module 05 is where the learner studies and rewrites it.
- an import inside a module-level `__getattr__` (PEP 562) is not counted: that is how
  a name that moved to a later module (module 18's `PARALLEL_MIN_BYTES`, say) stays
  importable from where it was, loaded only when old code asks for it.
- a re-export is not a use: when a name moved to a later module, an exported cell
  may import it back and list it in nbdev's `_all_` in the same cell (module 11
  re-exports RoPE, which lives with attention in module 12), so old import paths
  keep working. Such an import counts only if it brings a name `_all_` omits.
"""
import ast
import re
from pathlib import Path

import pytest

from tito.release import cell_source, read_notebook
from tito.repo import Settings, discover_modules, module_test_files

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Settings.read(ROOT).lib_name
AVAILABLE_TO_EVERY_MODULE = {f"{PACKAGE}.core.autograd", f"{PACKAGE}.core.kernels"}
_EXPORT_TARGET = re.compile(r"^\s*#\|\s*(?:default_exp|export|exporti|exports)\s+([A-Za-z_][\w.]*)\s*$", re.MULTILINE)
MODULES = discover_modules(ROOT)


def owners(modules) -> dict[str, int]:
    """`tinytorch.core.tensor` -> 1, ... from the dev notebooks' export directives."""
    owner = {}
    for module in modules:
        for path in module.notebooks:
            if path.is_file():
                for cell in read_notebook(path)["cells"]:
                    if cell["cell_type"] == "code":
                        for target in _EXPORT_TARGET.findall(cell_source(cell)):
                            owner.setdefault(f"{PACKAGE}.{target}", module.number)
    return owner


def reexported_names(tree) -> set[str]:
    """The names of an nbdev `_all_ = [...]` list in `tree` (a cell's re-exports), or none."""
    return {element.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
            and any(isinstance(target, ast.Name) and target.id == "_all_" for target in node.targets)
            and isinstance(node.value, (ast.List, ast.Tuple))
            for element in node.value.elts if isinstance(element, ast.Constant)}


def imported_modules(source: str, known: set[str]) -> set[str]:
    """The `tinytorch...` modules that `source` imports (import statements, importlib/importorskip calls)."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]  # IPython magics
    tree = ast.parse("\n".join(lines))
    reexported = reexported_names(tree)
    lazy = {id(inner) for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
            for inner in ast.walk(node)}                       # lazy re-exports of names that moved later
    found = set()
    for node in ast.walk(tree):
        if id(node) in lazy:
            continue
        names = []
        if isinstance(node, ast.ImportFrom) and node.names and all(alias.name in reexported for alias in node.names):
            continue                                                    # a re-export (see the module docstring)
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module
                     for alias in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                "import_module", "importorskip") and node.args and isinstance(node.args[0], ast.Constant):
            names = [str(node.args[0].value)]
        found |= {name for name in names if name == PACKAGE or name.startswith(PACKAGE + ".")}
    return found


def _is_package(name: str) -> bool:
    return (ROOT / Path(*name.split(".")) / "__init__.py").is_file()


def violations(source: str, number: int, owner: dict[str, int]) -> list[str]:
    problems = []
    for name in sorted(imported_modules(source, set(owner))):
        if name in AVAILABLE_TO_EVERY_MODULE or (name not in owner and _is_package(name)):
            continue
        if name not in owner:
            problems.append(f"{name} (no notebook exports it)")
        elif owner[name] > number:
            problems.append(f"{name} (module {owner[name]:02d})")
    return problems


def test_the_module_map_comes_from_the_notebooks():
    owner = owners(MODULES)
    assert owner[f"{PACKAGE}.core.tensor"] == 1 and owner[f"{PACKAGE}.core.autograd"] == 5
    assert all(number in {module.number for module in MODULES} for number in owner.values())


def test_a_later_module_import_is_caught():
    owner = {f"{PACKAGE}.core.tensor": 1, f"{PACKAGE}.core.layers": 3, f"{PACKAGE}.core.autograd": 5}
    source = (f"import numpy\nfrom {PACKAGE}.core.tensor import Tensor\nfrom {PACKAGE}.core import layers\n"
              f"from {PACKAGE}.core.autograd import gradcheck\n"
              f"def test_x():\n    mod = pytest.importorskip('{PACKAGE}.text.nothing')\n")
    assert violations(source, 1, owner) == [f"{PACKAGE}.core.layers (module 03)",
                                            f"{PACKAGE}.text.nothing (no notebook exports it)"]
    assert violations(source.replace("text.nothing", "core.tensor"), 3, owner) == []


def test_a_reexport_listed_in_all_is_not_a_use_but_anything_more_is():
    owner = {f"{PACKAGE}.core.tensor": 1, f"{PACKAGE}.text.embeddings": 11, f"{PACKAGE}.core.attention": 12}
    reexport = f"from {PACKAGE}.core.attention import RotaryEmbedding, rotate_pairs\n_all_ = ['RotaryEmbedding', 'rotate_pairs']\n"
    assert violations(reexport, 11, owner) == []
    used = reexport.replace("rotate_pairs\n", "rotate_pairs, scaled_dot_product_attention\n", 1)
    assert violations(used, 11, owner) == [f"{PACKAGE}.core.attention (module 12)"]
    assert violations(reexport.replace("_all_", "names"), 11, owner) == [f"{PACKAGE}.core.attention (module 12)"]


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.label)
def test_a_modules_tests_import_only_it_and_earlier_modules(module):
    owner = owners(MODULES)
    problems = []
    for path in module_test_files(ROOT, module):
        for problem in violations(path.read_text(encoding="utf-8"), module.number, owner):
            problems.append(f"{path.relative_to(ROOT)} imports {problem}")
    for path in module.notebooks:
        if path.is_file():
            for number, cell in enumerate(read_notebook(path)["cells"], start=1):
                if cell["cell_type"] == "code":
                    for problem in violations(cell_source(cell), module.number, owner):
                        problems.append(f"{path.relative_to(ROOT)}, cell {number}, imports {problem}")
    assert not problems, f"module {module.label} may use only modules up to {module.number:02d}:\n" + "\n".join(problems)
