"""Commands that tito suggests, spelt so that they run as printed.

A learner who made the repository's venv but never activated it has no `tito`,
`pip` or `jupyter` on PATH: a hint saying `pip install ...` fails for them. So
every command tito prints names the program the way this process can reach it:

* the bare name when PATH finds that very program (an activated venv, or an
  installed `tito`);
* else the path of the program next to this Python (`.venv/bin/pip`), relative
  to the current directory when it lies below it, absolute otherwise;
* for tito itself, the way it was started (`bin/tito`, `.venv/bin/tito`,
  `python -m tito`).
"""
from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

_OWN_CHECKOUT = Path(__file__).resolve().parent.parent


def _shown(path: Path) -> str:
    """`path` relative to the current directory when it lies below it, else absolute."""
    path = Path(os.path.abspath(path))
    try:
        relative = path.relative_to(Path.cwd().resolve())
    except ValueError:
        try:
            relative = path.relative_to(Path(os.path.abspath(os.getcwd())))
        except ValueError:
            return shlex.quote(str(path))
    text = relative.as_posix()
    return shlex.quote(text if "/" in text else f"./{text}")


def _same_file(a: str | os.PathLike | None, b: str | os.PathLike | None) -> bool:
    try:
        return a is not None and b is not None and os.path.samefile(a, b)
    except OSError:
        return False


def _scripts_dir() -> Path:
    """Where this Python's console scripts live (`.venv/bin`); not resolved, so a venv's symlinked python stays in the venv."""
    return Path(os.path.abspath(sys.executable)).parent


def python() -> str:
    """This Python, as a command."""
    for name in ("python3", "python"):
        on_path = shutil.which(name)
        if on_path and _same_file(on_path, sys.executable) and Path(os.path.abspath(on_path)).parent == _scripts_dir():
            return name
    return _shown(Path(sys.executable))


def program(name: str) -> str | None:
    """The command for console script `name` of this Python's environment (`pip`, `jupyter`),
    or None when that environment does not have it."""
    beside = _scripts_dir() / name
    if not beside.is_file():
        return None
    if _same_file(shutil.which(name), beside):
        return name
    return _shown(beside)


def pip() -> str:
    """The pip of this Python (`pip`, `.venv/bin/pip`, or `python -m pip`)."""
    return program("pip") or f"{python()} -m pip"


def pip_install(spec: str) -> str:
    """e.g. pip_install('-e ".[plot]"') -> `.venv/bin/pip install -e ".[plot]"`."""
    return f"{pip()} install {spec}"


def tito() -> str:
    """How to run tito again the way it was started."""
    started = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if started and Path(started).name == "tito" and Path(started).is_file():
        if _same_file(shutil.which("tito"), started):
            return "tito"
        script = _shown(Path(started))
        if Path(os.path.abspath(started)).parent == _scripts_dir():
            return script                                  # a console script: it names its own Python
        # bin/tito: its `#!/usr/bin/env python3` finds PATH's python3, which may not be this one
        default = shutil.which("python3")
        if default and Path(os.path.abspath(default)).parent == _scripts_dir():
            return script
        return f"{python()} {script}"
    installed = program("tito")
    if installed is not None:
        return installed
    return f"{python()} -m tito"


def tito_command(arguments: str) -> str:
    """e.g. tito_command('module complete 11') -> `.venv/bin/tito module complete 11`."""
    return f"{tito()} {arguments}"


def jupyter_lab(paths: str) -> str:
    """How to open notebooks in this environment, or how to get Jupyter when it has none."""
    jupyter = program("jupyter")
    if jupyter is None:
        return f"{pip_install('jupyterlab')}  then: {python()} -m jupyter lab {paths}"
    return f"{jupyter} lab {paths}"


def editable_install(root: Path | None = None, extras: str = "dev") -> str:
    """The command that installs the checkout at `root` (default: the one tito lives in) with `extras`
    into this Python: `.venv/bin/pip install -e ".[dev]"` (a path instead of `.` outside the checkout)."""
    root = _OWN_CHECKOUT if root is None else root
    where = "."
    if Path(os.path.abspath(root)) != Path(os.path.abspath(os.getcwd())):
        where = _shown(Path(root)).strip("'")
    return pip_install(f'-e "{where}[{extras}]"')
