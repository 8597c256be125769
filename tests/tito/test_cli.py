"""The tito CLI, run as a user would (`python bin/tito ...`) against small fake
repositories built in tmp_path, so these tests do not depend on which real
modules exist yet."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from tito.notebooks import run_notebook
from tito.repo import RepoError, discover_modules, module_test_files, resolve_module

ROOT = Path(__file__).resolve().parents[2]
TITO = ROOT / "bin" / "tito"

SETTINGS_INI = """\
[DEFAULT]
repo = fakerepo
lib_name = tinytorch
lib_path = tinytorch
nbs_path = modules
version = 0.0.1
min_python = 3.9
recursive = True
tst_flags = notest slow
put_version_in_init = True
jupyter_hooks = False
clean_ids = True
clear_all = False
doc_path = _docs
branch = main
user = fake
author = fake
author_email = fake@example.invalid
copyright = fake
description = fake
keywords = fake
language = English
status = 3
title = fake
"""

PRINTS_SUCCESS_THEN_RAISES = [
    "print('\u2705 all unit tests passed')",
    "raise RuntimeError('boom in cell three')",
    "print('never reached')",
]


def write_notebook(path: Path, sources: list[str]) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# A module")] + [nbformat.v4.new_code_cell(s) for s in sources]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


def make_repo(root: Path, notebook_cells: list[str], test_source: str = "def test_ok():\n    assert True\n") -> Path:
    """A repo with one module, 07_toy, its notebook and tests/test_toy.py."""
    (root / "settings.ini").write_text(SETTINGS_INI)
    write_notebook(root / "modules" / "07_toy" / "toy_dev.ipynb", notebook_cells)
    (root / "tests").mkdir()
    (root / "tests" / "test_toy.py").write_text(test_source)
    (root / "tinytorch").mkdir()
    (root / "tinytorch" / "__init__.py").write_text('__version__ = "0.0.1"\n')
    return root


def tito(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "TITO_ROOT": str(root), **env}
    process = subprocess.run(
        [sys.executable, str(TITO), *args], cwd=root, env=environment, capture_output=True, timeout=120,
    )
    process.text = process.stdout.decode("utf-8", errors="replace") + process.stderr.decode("utf-8", errors="replace")
    return process


# --- module map -------------------------------------------------------------


def test_modules_are_found_by_name_number_and_folder(tmp_path):
    make_repo(tmp_path, ["x = 1"])
    (tmp_path / "modules" / "11_embeddings").mkdir()
    (tmp_path / "modules" / "notes").mkdir()  # not NN_name: not a module

    assert [m.label for m in discover_modules(tmp_path)] == ["07_toy", "11_embeddings"]
    for reference in ["toy", "7", "07", "007", "07_toy", "modules/07_toy/"]:
        module = resolve_module(tmp_path, reference)
        assert (module.number, module.name) == (7, "toy"), reference
    assert resolve_module(tmp_path, "11").notebook == tmp_path / "modules" / "11_embeddings" / "embeddings_dev.ipynb"
    with pytest.raises(RepoError, match=r"(?s)unknown module 'tensor'.*07_toy.*11_embeddings"):
        resolve_module(tmp_path, "tensor")


def test_module_test_files_follow_the_naming_rule(tmp_path):
    make_repo(tmp_path, ["x = 1"])
    (tmp_path / "modules" / "08_toy_box").mkdir()
    for name in ["test_toy_parity.py", "test_toyota.py", "test_toy_box.py", "test_toy_box_extra.py"]:
        (tmp_path / "tests" / name).write_text("")

    toy = resolve_module(tmp_path, "toy")
    assert [p.name for p in module_test_files(tmp_path, toy)] == ["test_toy.py", "test_toy_parity.py"]
    toy_box = resolve_module(tmp_path, "toy_box")
    assert [p.name for p in module_test_files(tmp_path, toy_box)] == ["test_toy_box.py", "test_toy_box_extra.py"]


def test_a_module_runs_all_its_dev_notebooks_main_one_first(tmp_path):
    make_repo(tmp_path, ["x = 1"])
    write_notebook(tmp_path / "modules" / "07_toy" / "corpus_dev.ipynb", ["y = 2"])
    (tmp_path / "modules" / "07_toy" / "scratch.ipynb").write_text("{}")  # not a dev notebook

    names = [path.name for path in resolve_module(tmp_path, "toy").notebooks]
    assert names == ["toy_dev.ipynb", "corpus_dev.ipynb"]


def test_unknown_module_is_a_usage_error_listing_the_modules(tmp_path):
    make_repo(tmp_path, ["x = 1"])
    result = tito(tmp_path, "test", "--module", "nope")
    assert result.returncode == 2
    assert "unknown module 'nope'" in result.text and "07_toy" in result.text


# --- notebook execution -----------------------------------------------------


def test_run_notebook_names_the_cell_that_raised_after_printing_success(tmp_path):
    notebook = write_notebook(tmp_path / "modules" / "07_toy" / "toy_dev.ipynb", PRINTS_SUCCESS_THEN_RAISES)
    result = run_notebook(notebook)
    assert not result.ok
    assert (result.failure.cell_number, result.failure.code_cell_number) == (3, 2)
    assert result.failure.error == "RuntimeError: boom in cell three"
    assert result.cells_run == 2


def test_run_notebook_skips_eval_false_and_test_flag_cells(tmp_path):
    make_repo(tmp_path, [
        "import os\nassert os.getcwd().endswith('07_toy'), os.getcwd()",  # runs in the notebook's folder
        "#| eval: false\nraise RuntimeError('heavy analysis must not run')",
        "#|eval:false\nraise RuntimeError('nor in compact spelling')",
        "#| notest\nraise RuntimeError('tst_flags from settings.ini are skipped')",
        "print('done')",
    ])
    result = run_notebook(tmp_path / "modules" / "07_toy" / "toy_dev.ipynb")
    assert result.ok, result.describe()
    assert (result.cells_run, result.cells_skipped) == (2, 3)


# --- tito test --------------------------------------------------------------


def test_module_fails_when_a_notebook_cell_raises(tmp_path):
    make_repo(tmp_path, PRINTS_SUCCESS_THEN_RAISES)
    result = tito(tmp_path, "test", "--module", "7")
    assert result.returncode == 1, result.text
    assert "1 passed" in result.text  # pytest's own count for tests/test_toy.py
    assert "cell 3" in result.text and "RuntimeError: boom in cell three" in result.text


def test_module_fails_when_its_pytest_file_fails_and_reports_pytest_counts(tmp_path):
    make_repo(tmp_path, ["x = 1"], test_source="def test_ok():\n    pass\n\ndef test_bad():\n    assert 1 == 2\n")
    result = tito(tmp_path, "test", "--module", "07_toy")
    assert result.returncode == 1, result.text
    assert "pytest: 1 passed, 1 failed" in result.text
    assert "notebook toy_dev.ipynb: executed OK" in result.text


def test_output_falls_back_to_ascii(tmp_path):
    make_repo(tmp_path, ["#| eval: false\nraise RuntimeError('skipped')", "print('\u2705 fine')"])
    result = tito(tmp_path, "test", "--module", "toy", PYTHONIOENCODING="ascii")
    assert result.returncode == 0, result.text
    result.stdout.decode("ascii")  # nothing but ASCII reached the terminal
    assert "[OK] notebook toy_dev.ipynb: executed OK" in result.text


def test_all_runs_the_whole_suite_and_ends_with_pytests_closing_line(tmp_path):
    make_repo(tmp_path, ["x = 1"])
    (tmp_path / "tests" / "test_other.py").write_text("def test_other():\n    pass\n")
    result = tito(tmp_path, "test", "--all", "--", "-k", "other")
    assert result.returncode == 0, result.text
    last = result.text.strip().splitlines()[-1]
    # pytest's closing line; under pytest-xdist the workers deselect, so the count of deselected tests
    # is not reported there
    assert last.startswith("=") and " 1 passed" in last and "failed" not in last, last


# --- tito export, doctor, demo ----------------------------------------------


def test_export_then_doctor_detects_a_hand_edited_generated_file(tmp_path):
    make_repo(tmp_path, ["#| default_exp core.toy", "#| export\ndef double(x):\n    return 2 * x"])
    exported = tito(tmp_path, "export")
    assert exported.returncode == 0, exported.text
    assert "added: tinytorch/core/toy.py" in exported.text
    assert "def double" in (tmp_path / "tinytorch" / "core" / "toy.py").read_text()

    assert "is in sync with the notebooks" in tito(tmp_path, "system", "doctor").text
    with (tmp_path / "tinytorch" / "core" / "toy.py").open("a") as generated:
        generated.write("# a hand edit\n")
    doctor = tito(tmp_path, "system", "doctor")
    assert doctor.returncode == 1
    assert "differs from a fresh export: tinytorch/core/toy.py" in doctor.text


def test_doctor_finds_a_stale_generated_file_whose_header_follows_a_docstring(tmp_path):
    make_repo(tmp_path, ["#| default_exp core.toy", "#| export\ndef double(x):\n    return 2 * x"])
    assert tito(tmp_path, "export").returncode == 0
    # nbdev writes a notebook's `> summary` line as a module docstring above its header line.
    (tmp_path / "tinytorch" / "core" / "old.py").write_text(
        '"""A module no notebook makes any more."""\n\n'
        "# AUTOGENERATED! DO NOT EDIT! File to edit: ../../modules/07_toy/old_dev.ipynb.\n\n# %% auto #0\n")
    doctor = tito(tmp_path, "system", "doctor")
    assert doctor.returncode == 1
    assert "stale, no notebook generates it (delete it): tinytorch/core/old.py" in doctor.text


def test_demo_says_which_package_module_it_needs_when_the_package_lacks_it(tmp_path, monkeypatch, capsys):
    from tito import main as tito_main

    make_repo(tmp_path, ["x = 1"])
    # A checkout whose package has no skip-gram module yet (an editable install would supply the real
    # one to a subprocess through its import hook, so this runs in process with the module blocked).
    monkeypatch.delitem(sys.modules, "tito.demos.embeddings", raising=False)
    monkeypatch.setitem(sys.modules, "tinytorch.text.skipgram", None)
    assert tito_main.main(["--repo", str(tmp_path), "demo", "embeddings"]) == 1
    out = capsys.readouterr().out
    assert "the embeddings demo needs tinytorch.text.skipgram" in out and "Traceback" not in out
    assert tito_main.DEMOS["embeddings"] == "tito.demos.embeddings", "demo front ends live in tito/demos/"


def test_demo_dispatches_to_the_front_ends_main_with_the_arguments(tmp_path, monkeypatch, capsys):
    from tito import main as tito_main

    make_repo(tmp_path, ["x = 1"])
    (tmp_path / "fake_demo_front_end.py").write_text(textwrap.dedent("""\
        def main(argv):
            print("demo got", argv)
            return 3
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(tito_main.DEMOS, "embeddings", "fake_demo_front_end")
    assert tito_main.main(["--repo", str(tmp_path), "demo", "embeddings", "--steps", "3"]) == 3
    assert "demo got ['--steps', '3']" in capsys.readouterr().out
    monkeypatch.setitem(tito_main.DEMOS, "embeddings", "fake_demo_front_end_that_does_not_exist")
    assert tito_main.main(["--repo", str(tmp_path), "demo", "embeddings"]) == 1
    assert "the embeddings demo is not built yet" in capsys.readouterr().out


def test_the_whole_suite_runs_on_every_core_unless_the_arguments_choose(monkeypatch):
    import importlib.util

    from tito.main import parallel_args

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name == "xdist" else None)
    assert parallel_args([], cpus=2) == ["-n", "2", "--dist", "loadfile"]
    assert parallel_args([], cpus=16) == ["-n", "4", "--dist", "loadfile"], "at most four workers"
    assert parallel_args([], cpus=1) == [], "one core: no workers to start"
    for chosen in (["-n", "0"], ["-n0"], ["--numprocesses=3"], ["--dist", "load"], ["-p", "no:xdist"]):
        assert parallel_args(["-x", *chosen], cpus=2) == [], chosen
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert parallel_args([], cpus=2) == [], "without pytest-xdist the suite runs in one process"
