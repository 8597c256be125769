"""The issue's acceptance round trip, on the real modules, in a temporary copy of the repository:

release the learner notebook, export it untouched, and `tito test --module` fails
naming the unimplemented functions; paste the solutions back in, export again,
and it passes. Run for every module whose dev notebooks have solution markers.

The copy holds the tracked files plus the working tree's modules/, tinytorch/,
tests/, tito/, bin/ and settings.ini, and must import its own `tinytorch` (not
the one installed in the venv): tito puts the repository root first on
PYTHONPATH, and the test checks that before relying on it.
"""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tito.release import BEGIN_MARKER, cell_source, find_stubs, read_notebook, solution_blocks, write_notebook
from tito.repo import Settings, discover_modules, learner_notebook

ROOT = Path(__file__).resolve().parents[2]
WORKING_TREE = ["modules", "tinytorch", "tests", "tito", "bin", "settings.ini", "pyproject.toml"]
_NOT_SOURCE = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", ".pytest_cache", ".hypothesis")
MARKED_MODULES = [
    module for module in discover_modules(ROOT)
    if any(path.is_file() and BEGIN_MARKER in path.read_text(encoding="utf-8") for path in module.notebooks)
]


def copy_repository(destination: Path) -> Path:
    destination.mkdir()
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True) if shutil.which("git") else None
    for name in tracked.stdout.decode().split("\0") if tracked and tracked.returncode == 0 else []:
        source = ROOT / name
        if name and source.is_file() and name.split("/")[0] not in WORKING_TREE:
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    for name in WORKING_TREE:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=_NOT_SOURCE)
        elif source.is_file():
            shutil.copy2(source, destination / name)
    return destination


def environment(copy: Path) -> dict:
    return {**os.environ, "TITO_ROOT": str(copy), "PYTHONPATH": str(copy), "PYTHONIOENCODING": "ascii"}


def tito(copy: Path, *args: str) -> subprocess.CompletedProcess:
    process = subprocess.run([sys.executable, str(copy / "bin" / "tito"), *args], cwd=copy, env=environment(copy),
                             stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    process.text = process.stdout.decode("ascii") + process.stderr.decode("utf-8", errors="replace")
    return process


def last_box(text: str) -> list[str]:
    """The summary's box, the last two rules of `=` in tito's output and the lines between them (rules included)."""
    from tito.summary import SCREEN_COLUMNS

    lines = text.splitlines()
    rules = [number for number, line in enumerate(lines) if line == "=" * SCREEN_COLUMNS]
    assert len(rules) >= 2, f"no summary box in:\n{text}"
    return lines[rules[-2]:rules[-1] + 1]


@pytest.fixture
def copy(tmp_path):
    copied = copy_repository(tmp_path / "repo")
    imported = subprocess.run(
        [sys.executable, "-c", "import tinytorch, tito; print(tinytorch.__file__); print(tito.__file__)"],
        cwd=tmp_path, env=environment(copied), capture_output=True, text=True, check=True,
    )
    for location in imported.stdout.split():
        assert Path(location).resolve().is_relative_to(copied.resolve()), f"the copy imports {location}"
    return copied


def paste_solutions_back(copy: Path, module) -> None:
    """What a learner does: replace each stub in their notebook by the solution's lines."""
    for dev_path in module.notebooks:
        dev = read_notebook(copy / Settings.read(copy).nbs_path / module.label / dev_path.name)
        target = learner_notebook(copy, module, dev_path)
        learner = read_notebook(target)
        cells_by_id = {cell.get("id"): cell for cell in learner["cells"]}
        for block in solution_blocks(dev, dev_path.name):
            cell = cells_by_id[dev["cells"][block.cell_number - 1]["id"]]
            source = cell_source(cell)
            assert source.count(block.stub) == 1, f"{block.function}: stub not found once in {target.name}"
            cell["source"] = source.replace(block.stub, "\n".join(block.solution))
        write_notebook(learner, target)


def package_files(copy: Path, module) -> list[Path]:
    from tito.release import default_export
    from tito.repo import package_file

    return [package_file(copy, default_export(read_notebook(path))) for path in module.notebooks]


@pytest.mark.parametrize("module", MARKED_MODULES, ids=lambda module: module.label)
def test_release_export_test_fails_naming_stubs_then_passes_with_solutions(copy, module):
    functions = [block.function for path in module.notebooks for block in solution_blocks(read_notebook(path))]
    number = f"{module.number:02d}"

    assert tito(copy, "module", "release", number).returncode == 0
    exported = tito(copy, "module", "export", number)
    assert exported.returncode == 0, exported.text
    for path in package_files(copy, module):
        assert f"release/{module.label}/" in path.read_text().split("\n# %%")[0]  # exported from the learner's copy

    failing = tito(copy, "test", "--module", module.name, "--", "-x")
    assert failing.returncode == 1, failing.text
    assert "not implemented yet" in failing.text
    named = failing.text.split("not implemented yet", 1)[1]
    for function in functions:
        assert function in named, f"`tito test` does not name the unimplemented {function}"
    # The summary's box, last, fits one screen and names every function to write, the first one first.
    from tito.summary import SCREEN_COLUMNS, SCREEN_LINES

    box = last_box(failing.text)
    assert len(box) <= SCREEN_LINES and all(len(line) <= SCREEN_COLUMNS for line in box), "\n".join(box)
    after = failing.text.split("\n".join(box), 1)[1].strip().splitlines()
    assert len(after) <= 2, f"the box is the last thing printed:\n{after}"
    boxed = "\n".join(box)
    assert boxed.split("  1. ", 1)[1].startswith(functions[0] + " "), boxed
    words = set(re.split(r"[\s,()]+", boxed))                 # a name may end a wrapped line
    for function in dict.fromkeys(functions):
        assert function in words, f"the box does not name {function}:\n{boxed}"

    paste_solutions_back(copy, module)
    assert tito(copy, "module", "export", number).returncode == 0
    assert not [path for path in package_files(copy, module) if find_stubs(path)]
    passing = tito(copy, "test", "--module", module.name)
    assert passing.returncode == 0, passing.text
    assert "not implemented yet" not in passing.text
    assert f"executing release/{module.label}/" in passing.text  # it ran the learner's notebook, not the dev one


@pytest.mark.skipif("11_embeddings" not in [m.label for m in MARKED_MODULES], reason="module 11 has no markers yet")
def test_complete_11_fails_when_the_notebook_raises_midway_after_printing_success(copy):
    assert tito(copy, "module", "start", "11").returncode == 0
    module = next(m for m in discover_modules(copy) if m.label == "11_embeddings")
    paste_solutions_back(copy, module)
    target = learner_notebook(copy, module, module.notebook)
    notebook = read_notebook(target)
    first_test = next(number for number, cell in enumerate(notebook["cells"])
                      if cell["cell_type"] == "code" and "def test_unit_" in cell_source(cell))
    notebook["cells"].insert(first_test + 1, {
        "cell_type": "code", "id": "learner-bug", "metadata": {}, "outputs": [], "execution_count": None,
        "source": "print('\\u2705 so far so good')\nraise RuntimeError('learner bug midway')",
    })
    write_notebook(notebook, target)

    result = tito(copy, "module", "complete", "11", "--", "-x", "-q")
    assert result.returncode == 1, result.text
    assert f"failed: cell {first_test + 2} " in result.text and "RuntimeError: learner bug midway" in result.text
    assert "module 11_embeddings is not complete" in result.text
    progress = json.loads((copy / ".tito" / "progress.json").read_text())["modules"]["11_embeddings"]
    assert progress["completed"] is None and progress["last_check"]["passed"] is False
