"""Every command tito suggests runs as printed, for a learner who never activated the venv.

The subprocesses here get PATH=/usr/bin:/bin, so a bare `tito`, `pip` or `jupyter` would not be
found (unless installed system-wide, which the tests check first); tito must print the path of the
program next to the Python it runs on, or the way it was started.
"""
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tito import hints
from tito.repo import RepoError, resolve_module

ROOT = Path(__file__).resolve().parents[2]
BARE_PATH = "/usr/bin:/bin"


def bare_environment(copy: Path, **extra: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONHOME")}
    return {**env, "PATH": BARE_PATH, "TITO_ROOT": str(copy), "PYTHONPATH": str(copy), "PYTHONIOENCODING": "ascii",
            **extra}


def run(command, cwd: Path, env: dict, timeout: int = 300) -> subprocess.CompletedProcess:
    process = subprocess.run(command, cwd=cwd, env=env, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    process.text = process.stdout.decode("ascii") + process.stderr.decode("utf-8", errors="replace")
    return process


def program_runs_as_printed(word: str, cwd: Path) -> bool:
    """`word` (the first word of a printed command) names an executable from `cwd` with PATH=/usr/bin:/bin."""
    if "/" in word:
        path = Path(word) if Path(word).is_absolute() else cwd / word
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(word, path=BARE_PATH) is not None


@pytest.fixture
def copy(tmp_path):
    from .test_roundtrip import copy_repository

    return copy_repository(tmp_path / "repo")


@pytest.mark.skipif(shutil.which("tito", path=BARE_PATH) is not None, reason="a system-wide tito is installed")
def test_the_next_hints_of_module_start_run_as_printed_without_an_activated_venv(copy):
    started = run([sys.executable, str(copy / "bin" / "tito"), "module", "start", "11"], copy, bare_environment(copy))
    assert started.returncode == 0, started.text
    lines = started.text.split("Next:", 1)[1].splitlines()
    open_line = next(line for line in lines if "open your notebook:" in line).split(":", 1)[1].strip()
    check_line = next(line for line in lines if "check it:" in line).split(":", 1)[1].strip().split("   (")[0]

    jupyter = shlex.split(open_line)
    assert program_runs_as_printed(jupyter[0], copy), open_line
    assert run([jupyter[0] if "/" not in jupyter[0] or Path(jupyter[0]).is_absolute() else str(copy / jupyter[0]),
                "--version"], copy, bare_environment(copy)).returncode == 0

    words = shlex.split(check_line)
    assert words[-3:] == ["module", "complete", "11"], check_line
    assert program_runs_as_printed(words[0], copy), check_line
    status = run([*words[:-3], "module", "status"], copy, bare_environment(copy))  # the same program, a quick command
    assert status.returncode == 0 and "11  embeddings" in status.text, status.text


def test_hints_name_programs_next_to_this_python_unless_path_finds_them(monkeypatch, tmp_path):
    scripts = Path(os.path.abspath(sys.executable)).parent
    if not (scripts / "pip").is_file():
        pytest.skip(f"no pip next to {sys.executable}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", BARE_PATH)
    assert hints.pip() == shlex.quote(str(scripts / "pip"))
    assert hints.editable_install(tmp_path, "plot") == f'{shlex.quote(str(scripts / "pip"))} install -e ".[plot]"'
    monkeypatch.setenv("PATH", f"{scripts}{os.pathsep}{BARE_PATH}")
    assert hints.pip() == "pip" and hints.pip_install("matplotlib") == "pip install matplotlib"
    monkeypatch.chdir(scripts.parent.parent)
    monkeypatch.setenv("PATH", BARE_PATH)
    if scripts.parent.parent in Path.cwd().parents or scripts.parent.parent == Path.cwd():
        assert hints.pip() == f"{scripts.parent.name}/bin/pip", "below the current directory: a relative path"


def test_a_misspelt_module_suggests_the_nearest_one():
    with pytest.raises(RepoError, match=r"unknown module 'embedings'; did you mean 'embeddings' \(11_embeddings\)\?"):
        resolve_module(ROOT, "embedings")
    with pytest.raises(RepoError) as nothing_close:
        resolve_module(ROOT, "xyzzy")
    assert "did you mean" not in str(nothing_close.value)


def test_tito_test_with_a_typo_says_so_in_ascii(copy):
    result = run([sys.executable, str(copy / "bin" / "tito"), "test", "--module", "embedings"], copy,
                 bare_environment(copy))
    assert result.returncode == 2 and "did you mean 'embeddings'" in result.text and "Traceback" not in result.text


def test_without_the_dev_extras_tito_says_how_to_install_them(copy):
    # `python -S`: no site-packages, so nbdev, execnb, pytest and numpy cannot be imported, as under a
    # system python3 without the dev extras; tito itself needs only the standard library.
    command = [sys.executable, "-S", str(copy / "bin" / "tito"), "test", "--module", "01"]
    result = run(command, copy, bare_environment(copy))
    assert result.returncode == 1, result.text
    assert "Traceback" not in result.text and "cannot import" in result.text
    assert 'python3 -m venv .venv && .venv/bin/pip install -e ".[dev]"' in result.text

    venv_tito = copy / ".venv" / "bin" / "tito"            # a checkout whose venv exists: point at it
    venv_tito.parent.mkdir(parents=True)
    venv_tito.write_text("#!/bin/sh\n")
    result = run(command, copy, bare_environment(copy))
    assert result.returncode == 1 and "Run:  .venv/bin/tito test --module 01" in result.text, result.text

    listing = run([sys.executable, "-S", str(copy / "bin" / "tito"), "module", "list"], copy, bare_environment(copy))
    assert listing.returncode == 0, "commands that need no extras still work"


def test_the_demo_plot_hint_names_a_pip_that_exists(monkeypatch, tmp_path):
    from tito.demos.embeddings import plot_hint

    monkeypatch.setenv("PATH", BARE_PATH)
    monkeypatch.chdir(ROOT)
    hint = plot_hint()
    command = hint.split("matplotlib: ", 1)[1].split("  (or:")[0]
    assert command.endswith('install -e ".[plot]"'), hint
    assert program_runs_as_printed(shlex.split(command)[0], ROOT) or shlex.split(command)[1:3] == ["-m", "pip"], hint
