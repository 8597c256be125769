"""The library holds no command line: nothing in `tinytorch/` parses arguments, exits the process,
reconfigures or replaces the standard streams, or imports tito. Command-line front ends live in
`tito/` (`tito/demos/` for the demos), since a library that does any of these does it to every
program that imports it.

Checked on the syntax tree of every file in the package, so a comment or a docstring that mentions
`sys.exit` is fine and an aliased import (`import sys as s; s.exit()`) is still caught.
"""
import ast
from pathlib import Path

import pytest

from tito.repo import Settings

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / Settings.read(ROOT).lib_path
CLI_MODULES = {"argparse", "optparse", "getopt", "click", "typer", "tito"}
STREAMS = {"stdout", "stderr", "stdin"}


def cli_uses(source: str) -> list[str]:
    """What in `source` belongs to a command line, as `line N: description` strings."""
    tree = ast.parse(source)
    sys_names, exit_names, found = set(), set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in CLI_MODULES:
                    found.append(f"line {node.lineno}: import {alias.name}")
                if alias.name == "sys":
                    sys_names.add(alias.asname or "sys")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            if top in CLI_MODULES:
                found.append(f"line {node.lineno}: from {node.module} import ...")
            if node.module == "sys":
                for alias in node.names:
                    if alias.name == "exit":
                        exit_names.add(alias.asname or "exit")
                    if alias.name in STREAMS:
                        found.append(f"line {node.lineno}: from sys import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in sys_names:
            if node.attr == "exit":
                found.append(f"line {node.lineno}: sys.exit")
            if node.attr == "argv":
                found.append(f"line {node.lineno}: sys.argv")
        if isinstance(node, ast.Call):
            function = node.func
            if isinstance(function, ast.Name) and function.id in exit_names | {"exit", "quit"}:
                found.append(f"line {node.lineno}: {function.id}()")
            if (isinstance(function, ast.Attribute) and function.attr == "reconfigure"
                    and isinstance(function.value, ast.Attribute) and function.value.attr in STREAMS):
                found.append(f"line {node.lineno}: {function.value.attr}.reconfigure()")
            if isinstance(function, ast.Attribute) and function.attr == "reconfigure":
                found.append(f"line {node.lineno}: .reconfigure() (of a stream?)")
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr in STREAMS | {"__stdout__", "__stderr__"}:
                    found.append(f"line {node.lineno}: replaces {target.attr}")
    return sorted(set(found), key=lambda text: int(text.split()[1].rstrip(":")))


LIBRARY_FILES = sorted(path for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts)


@pytest.mark.parametrize("path", LIBRARY_FILES, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_library_file_has_no_command_line(path):
    found = cli_uses(path.read_text(encoding="utf-8"))
    assert not found, (f"{path.relative_to(ROOT)} holds command-line code; move it to tito/ (tito/demos/ for a "
                       f"demo):\n  " + "\n  ".join(found))


def test_the_package_was_scanned():
    names = {path.relative_to(PACKAGE).as_posix() for path in LIBRARY_FILES}
    assert {"__init__.py", "text/skipgram.py", "text/embeddings.py"} <= names


@pytest.mark.parametrize("source, expected", [
    ("import argparse", "import argparse"),
    ("import sys\nsys.exit(2)", "sys.exit"),
    ("import sys as system\nsystem.exit(2)", "sys.exit"),
    ("from sys import exit as leave\nleave(1)", "leave()"),
    ("exit(0)", "exit()"),
    ("import sys\nsys.stdout.reconfigure(errors='replace')", "stdout.reconfigure()"),
    ("import sys, io\nsys.stdout = io.StringIO()", "replaces stdout"),
    ("import sys\nprint(sys.argv[1])", "sys.argv"),
    ("from tito.demos import embeddings", "from tito.demos import ..."),
    ("import tito.main", "import tito.main"),
])
def test_the_scan_catches_command_line_code(source, expected):
    assert any(expected in found for found in cli_uses(source)), cli_uses(source)


def test_the_scan_ignores_prose_and_other_exits():
    source = '"""Never call sys.exit or argparse here."""\nimport sys\n# sys.exit(1)\nx = sys.maxsize\nstack.exit()\n'
    assert cli_uses(source) == []


def test_the_demos_are_outside_the_package_and_the_demo_code_is_importable_from_it():
    from tito.main import DEMOS

    for name, module in DEMOS.items():
        assert module.startswith("tito.demos."), f"demo {name!r} front end {module} belongs in tito/demos/"
    from tinytorch.text import skipgram

    assert callable(skipgram.fit_skipgram) and not hasattr(skipgram, "main")
