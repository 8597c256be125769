"""Execute a dev notebook top to bottom, the way `nbdev_test` does, and say
exactly which cell failed.

`run_notebook(path)` starts a fresh Python process (`python -m tito.notebooks`)
so that every notebook gets a clean interpreter, with the notebook's folder as
the working directory and the repository root first on `sys.path`. That
process reads the notebook with execnb and runs its code cells one by one in
an execnb `CaptureShell` (an IPython shell, the same engine `nbdev_test` uses),
skipping the cells nbdev skips:

* cells marked `#| eval: false` (heavy analysis, demos);
* cells carrying one of settings.ini's `tst_flags` (`#| notest`, `#| slow`);
* cells that call `nbdev_export(`.

It stops at the first cell that raises and reports it; a notebook whose early
cells print success but whose later cell raises is a failure.

We do not call `nbdev_test` itself: it only reports pass/fail per notebook
(and prints a traceback to stderr), while tito wants the failing cell's number,
source and error as data.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tito.repo import SETTINGS_FILE, Settings, subprocess_env

DEFAULT_TIMEOUT_SECONDS = float(os.environ.get("TITO_NOTEBOOK_TIMEOUT", "600"))
_OUTPUT_TAIL_CHARS = 2000
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # IPython colours its tracebacks


@dataclass
class CellFailure:
    """The first cell that raised."""

    cell_number: int  # 1-based position among all cells, as Jupyter shows them
    code_cell_number: int  # 1-based position among code cells
    source: str  # the cell's source
    error: str  # e.g. "AssertionError: shapes differ"
    traceback: str  # plain-text traceback, IPython's own frames removed
    stdout: str  # what the cell printed before it raised (tail)

    @property
    def test_name(self) -> str | None:
        """The notebook check that raised (`test_unit_...`), from the traceback's frames; None when no test ran."""
        match = re.search(r"\bin (test_\w+)\b", _ANSI.sub("", self.traceback))
        return match.group(1) if match else None

    @property
    def first_line(self) -> str:
        lines = [line for line in self.source.splitlines() if line.strip() and not line.lstrip().startswith("#|")]
        return lines[0].strip() if lines else ""


@dataclass
class NotebookResult:
    """What happened when a notebook ran."""

    path: Path
    ok: bool
    cells_run: int = 0
    cells_skipped: int = 0
    seconds: float = 0.0
    failure: CellFailure | None = None  # a cell raised
    problem: str | None = None  # the run failed outside any cell (missing file, crash, timeout)

    @property
    def headline(self) -> str:
        if self.ok:
            return f"ran {self.cells_run} code cells ({self.cells_skipped} skipped) in {self.seconds:.1f}s"
        if self.failure is not None:
            failure = self.failure
            what = f"`{failure.test_name}`, " if failure.test_name else ""
            return (
                f"cell {failure.cell_number} (code cell {failure.code_cell_number}, {what}"
                f"`{failure.first_line}`) raised {failure.error}"
            )
        return self.problem or "failed"

    def describe(self) -> str:
        """A multi-line account for test failures and the CLI."""
        text = [f"{self.path}: {self.headline}"]
        if self.failure is not None:
            if self.failure.stdout.strip():
                text += ["--- the cell printed:", self.failure.stdout.rstrip()]
            text += ["--- traceback:", self.failure.traceback.rstrip()]
        return "\n".join(text)


def _repo_root_of(path: Path) -> Path | None:
    for candidate in path.parents:
        if (candidate / SETTINGS_FILE).is_file():
            return candidate
    return None


def run_notebook(
    path: str | os.PathLike,
    root: str | os.PathLike | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    skip_flags: tuple[str, ...] | None = None,
) -> NotebookResult:
    """Execute the notebook at `path` in a fresh process; see the module docstring.

    `root` is the repository (default: nearest parent with settings.ini);
    `skip_flags` default to its `tst_flags`; `timeout` bounds the whole run.
    """
    path = Path(path).resolve()
    if not path.is_file():
        return NotebookResult(path, ok=False, problem=f"notebook not found: {path}")
    root = Path(root).resolve() if root is not None else _repo_root_of(path)
    if skip_flags is None:
        skip_flags = Settings.read(root).tst_flags if root is not None else ()
    env = subprocess_env(root or path.parent)

    with tempfile.TemporaryDirectory(prefix="tito-nb-") as scratch:
        result_file = Path(scratch) / "result.json"
        command = [
            sys.executable, "-m", "tito.notebooks", str(path),
            "--result", str(result_file), "--skip-flags", " ".join(skip_flags),
        ]
        started = time.perf_counter()
        try:
            process = subprocess.run(
                command, cwd=path.parent, env=env, capture_output=True, text=True,
                errors="replace", timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return NotebookResult(path, ok=False, seconds=time.perf_counter() - started,
                                  problem=f"timed out after {timeout:.0f}s")
        if not result_file.is_file():
            output = (process.stderr or process.stdout or "")[-_OUTPUT_TAIL_CHARS:]
            return NotebookResult(path, ok=False, seconds=time.perf_counter() - started,
                                  problem=f"the notebook process died (exit code {process.returncode}):\n{output}")
        data = json.loads(result_file.read_text(encoding="utf-8"))

    failure = CellFailure(**data["failure"]) if data["failure"] else None
    return NotebookResult(
        path, ok=data["ok"], cells_run=data["cells_run"], cells_skipped=data["cells_skipped"],
        seconds=data["seconds"], failure=failure, problem=data["problem"],
    )


# ---------------------------------------------------------------------------
# The worker: runs inside the fresh process started by run_notebook().


def _should_skip(cell, skip_flags: set[str]) -> bool:
    """nbdev_test's rule for which cells not to run."""
    from nbdev.process import extract_directives

    if cell.cell_type != "code" or not cell.source.strip():
        return True
    if "nbdev_export" + "(" in cell.source:
        return True
    directives = extract_directives(cell, remove=False)
    if directives.get("eval:", [""])[0].lower() == "false":
        return True
    return bool(skip_flags & directives.keys())


def _plain_traceback(error_output: dict) -> str:
    """execnb's traceback minus the frames inside IPython's machinery."""
    lines = error_output.get("traceback", [])
    kept = [line for line in lines if f"{os.sep}IPython{os.sep}" not in line]
    return "".join(kept)


def _stream_text(outputs: list[dict], name: str) -> str:
    return "".join("".join(o["text"]) for o in outputs if o.get("output_type") == "stream" and o.get("name") == name)


def _execute(path: Path, skip_flags: set[str]) -> dict:
    from execnb.nbio import read_nb
    from execnb.shell import CaptureShell

    os.environ.setdefault("IN_TEST", "1")  # as nbdev_test sets it
    notebook = read_nb(path)
    shell = CaptureShell(path)  # puts the notebook's folder on sys.path
    # Keep IPython from also writing a coloured traceback into the captured
    # stdout; the exception itself is still recorded for us.
    shell.showtraceback = lambda *args, **kwargs: None
    shell.showsyntaxerror = lambda *args, **kwargs: None

    result = {"ok": True, "cells_run": 0, "cells_skipped": 0, "failure": None, "problem": None}
    code_cell_number = 0
    for position, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type == "code":
            code_cell_number += 1
        if _should_skip(cell, skip_flags):
            result["cells_skipped"] += cell.cell_type == "code"
            continue
        outputs = shell.run(cell.source)
        result["cells_run"] += 1
        if shell.exc is not None:
            error = next((o for o in outputs if o.get("output_type") == "error"), {})
            result["ok"] = False
            result["failure"] = asdict(CellFailure(
                cell_number=position,
                code_cell_number=code_cell_number,
                source=cell.source,
                error=f"{type(shell.exc).__name__}: {shell.exc}",
                traceback=_plain_traceback(error),
                stdout=_stream_text(outputs, "stdout")[-_OUTPUT_TAIL_CHARS:],
            ))
            break
    return result


def _worker_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tito.notebooks", description="Execute one notebook (worker).")
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--result", type=Path, required=True, help="where to write the JSON result")
    parser.add_argument("--skip-flags", default="", help="space separated nbdev flags whose cells are skipped")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    root = _repo_root_of(args.notebook.resolve())
    if root is not None:
        sys.path.insert(0, str(root))  # the working copy's package wins over any installed one
    try:
        result = _execute(args.notebook.resolve(), set(args.skip_flags.split()))
    except Exception as error:  # reading the notebook or starting the shell failed
        result = {"ok": False, "cells_run": 0, "cells_skipped": 0, "failure": None,
                  "problem": f"could not run the notebook: {type(error).__name__}: {error}"}
    result["seconds"] = time.perf_counter() - started
    args.result.write_text(json.dumps(result), encoding="utf-8")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(_worker_main())
