"""`tito grade`: grade a class's notebooks with the instructor's checks.

    tito grade FOLDER [--module NN ...] [--timeout SECONDS] [--test-timeout SECONDS] [--out DIR]

FOLDER holds one subfolder per learner. A learner's notebooks may sit anywhere inside it: as
`tito module start` leaves them (`release/NN_name/stem.ipynb`), as `tito module release --out` writes them
(`NN_name/stem.ipynb`), under `modules/NN_name/`, or loose (`stem.ipynb`). A notebook is matched to the
instructor's dev notebook by the release's metadata (`tito.learner_notebook_of`), else by its module folder
and file name, else by its file name alone.

What is graded. The grade comes from the instructor's repository, never from anything the learner could
edit: for each learner and module, a temporary copy of the instructor's repository is made, the code the
learner wrote *inside each solution block* (what replaced the release's `raise NotImplementedError` stub,
found by comparing their cell with the fresh release's) is put into the instructor's dev notebook in place
of the reference solution, the notebook is exported into the copy's package, and the module's pytest
files (the instructor's, as `tito test --module` runs them) run in that copy. The learner's tests, given
code and markdown are ignored. A block the learner did not write is a stub, a block that is not valid
Python is an error: either gets the release's stub, never the reference code, and the other blocks are
still graded. Each failing check is attributed to an exercise as the learner's summary attributes it
(`tito.summary.attribute`), with two corrections for learners with several mistakes (`attribute` below);
the exercise's status is

    passed    no check attributed to it failed
    failed    a check attributed to it failed
    stub      the learner left the stub (or no notebook for it was found)
    timeout   a check running it ran past --test-timeout, or the learner's --timeout ran out first
    error     its code is not valid Python, or it ended the process (sys.exit, os._exit, a crash)

and when it failed, the misconception catalogue (`tito/misconceptions/<module>.py`) names the mistake a
check recognised by name (`Misconception: <says>: ...`), else the mistakes whose `says` words appear in its
failures' messages. (Matching a learner's code to the catalogue's wrong implementations by behaviour is
not done: it needs a run of the checks per mistake.)

Output: DIR/grades.csv (learner, module, exercise, status, misconception, first_failure) and
DIR/summary.txt (ASCII), the summary also printed. DIR defaults to FOLDER-grades next to FOLDER.

Isolation: what it is, and what it is not. Every learner's code runs only in child processes, each in a
new process group (session), in a fresh temporary copy of the repository, with its working directory in
that copy and an environment that names no path of the instructor's (no TITO_ROOT, PYTHONPATH or PWD of
ours: the copy's root is its PYTHONPATH). Before any learner's code runs, every learner's notebooks have
been read, so no learner can change another's submission. The copy is restored from a pristine one
before every test process, so a learner who deletes or rewrites the copy's tests, package or tito cannot
change the checks that follow. Each test has a time limit (--test-timeout, enforced inside the process by
faulthandler's watchdog thread, which also names the exercise that hung), each learner a total time limit
(--timeout; the whole process group is killed with SIGKILL when it runs out, and always at the end, so
nothing it started in that group is left running). `os._exit` and `os.abort` raise `SystemExit` in the
test process; a process that ends anyway (a signal, `posix._exit`) loses only the test it was running, and
the run resumes after it. An exercise that hung or ended the process once is replaced by a line that
raises, so its other checks fail at once instead of hanging or crashing in turn. Standard output goes to
/dev/null (huge output costs time, not memory or disk), and the test process may write no file larger
than 64 MB (RLIMIT_FSIZE). Learners are graded one after another. The instructor's files that grading
reads (settings, package, tests, modules, tito) are hashed before and after each learner; a change is
reported and makes the command fail.

This is not a security sandbox. The learner's code runs as the same user, with the same file system and
network: code written to do harm on purpose can read or write any file that user can (the instructor's
repository included, if it finds the path, e.g. through /proc), start processes in a new session that
outlive the process group, use up memory or the network, or change in memory what the checks see
(monkeypatching NumPy, writing the grader's progress file). The Python that runs the checks is the
instructor's: if its virtual environment lives inside the repository (`.venv/`), sys.path shows the
repository's path. Grade untrusted code inside a container or a throwaway account.
"""
from __future__ import annotations

import argparse
import ast
import csv
import difflib
import hashlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

from tito import summary, ui
from tito.release import (
    _MARKER_LIKE, SolutionBlock, _functions_by_line, cell_source, read_notebook,
    release_notebook, solution_blocks, write_notebook,
)
from tito.repo import Module, RepoError, Settings, discover_modules, module_test_files, resolve_module

EXIT_OK, EXIT_FAILED = 0, 1
STATUSES = ("passed", "failed", "stub", "timeout", "error")
CSV_COLUMNS = ("learner", "module", "exercise", "status", "misconception", "first_failure")
DEFAULT_TIMEOUT = 600.0
DEFAULT_TEST_TIMEOUT = 60.0
MAX_NOTEBOOK_BYTES = 20_000_000
MAX_FILE_BYTES = 64 * 1024 * 1024          # RLIMIT_FSIZE of the test process
MAX_LINE = 200
# What the copy holds: the package, the checks and tito itself (the pytest plugins), and the notebooks.
COPIED = ("settings.ini", "pyproject.toml", "README.md", "bin", "tinytorch", "tests", "modules")
_NOT_SOURCE = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", ".pytest_cache", ".hypothesis")
# Variables that would tell the learner's code where the instructor's repository or tito is.
_HIDDEN_ENV = ("TITO_ROOT", "PYTHONPATH", "PWD", "OLDPWD", "PYTHONSTARTUP", "PYTEST_ADDOPTS")
_TITO_DIR = Path(__file__).resolve().parent


# ---------------------------------------------------------------------------
# What a learner wrote


@dataclass
class Body:
    """The learner's code for one solution block."""

    kind: str                 # "code", "stub" or "error"
    text: str = ""            # dedented code ("code")
    note: str = ""            # why it is a stub or an error


@dataclass
class Learner:
    name: str
    folder: Path
    notebooks: dict[Path, Path] = field(default_factory=dict)   # dev notebook -> the learner's notebook
    warnings: list[str] = field(default_factory=list)


@dataclass
class Row:
    learner: str
    module: str
    exercise: str
    status: str
    misconception: str = ""
    first_failure: str = ""
    explanation: str = ""     # the misconception in one sentence (summary only)

    def csv(self) -> list[str]:
        return [self.learner, self.module, self.exercise, self.status, self.misconception, self.first_failure]


def learner_folders(folder: Path) -> list[Path]:
    """The subfolders of `folder`, one per learner (hidden and `_`-prefixed ones left out)."""
    if not folder.is_dir():
        raise RepoError(f"{folder} is not a folder of learners' work")
    found = sorted(path for path in folder.iterdir() if path.is_dir() and not path.name.startswith((".", "_")))
    if not found:
        raise RepoError(f"{folder} has no subfolders: put each learner's notebooks in a folder of their own")
    return found


def _stem(dev: Path) -> str:
    return dev.stem[: -len("_dev")] if dev.stem.endswith("_dev") else dev.stem


def find_notebooks(root: Path, learner: Learner, modules: list[Module]) -> None:
    """Match the learner's notebooks to the instructor's dev notebooks (see the module docstring)."""
    settings = Settings.read(root)
    devs = [dev for module in modules for dev in module.notebooks if dev.is_file()]
    by_relative = {dev.relative_to(root).as_posix(): dev for dev in devs}
    candidates: dict[Path, list[tuple[int, Path]]] = {}
    for path in sorted(learner.folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts or not path.is_file():
            continue
        match, rank = None, 3
        try:
            if path.stat().st_size <= MAX_NOTEBOOK_BYTES:
                metadata = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
                origin = (metadata.get("tito") or {}).get("learner_notebook_of") if isinstance(metadata, dict) else None
                if isinstance(origin, str) and origin in by_relative:
                    match, rank = by_relative[origin], 0
        except (OSError, ValueError, AttributeError):
            pass
        if match is None:
            stem = _stem(path)
            same_name = [dev for dev in devs if _stem(dev) == stem]
            in_folder = [dev for dev in same_name if dev.parent.name == path.parent.name]
            if len(in_folder) == 1:
                match, rank = in_folder[0], 1
            elif len(same_name) == 1:
                match, rank = same_name[0], 2
        if match is not None:
            candidates.setdefault(match, []).append((rank, path))
    for dev, found in candidates.items():
        found.sort(key=lambda item: (item[0], len(item[1].parts), str(item[1])))
        learner.notebooks[dev] = found[0][1]
        if len(found) > 1:
            others = ", ".join(str(path.relative_to(learner.folder)) for _, path in found[1:])
            learner.warnings.append(f"{learner.name}: graded {found[0][1].relative_to(learner.folder)} for "
                                    f"{dev.relative_to(root / settings.nbs_path)}; also found {others}")


def _code_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line.strip() and not line.strip().startswith("#")]


def _function_span(lines: list[str], name: str) -> tuple[int, int] | None:
    """0-based [start, end) of function `name` (qualified) in the cell's lines, or None."""
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return None
    spans = [(node.lineno - 1, node.end_lineno) for node, qualified in _functions_by_line(tree) if qualified == name]
    return spans[-1] if spans else None


def extract_body(fresh_lines: list[str], learner_lines: list[str], block: SolutionBlock) -> Body:
    """What the learner wrote in place of `block`'s stub: the lines of their cell between the given lines
    that surround the stub in the fresh release's cell (compared line by line, within the function when
    both cells parse)."""
    stub = block.stub.strip()
    positions = [number for number, line in enumerate(fresh_lines) if line.strip() == stub]
    if not positions:
        return Body("error", note=f"the release has no stub for {block.function}")
    fresh_span = _function_span(fresh_lines, block.function) or (0, len(fresh_lines))
    mine_span = _function_span(learner_lines, block.function)
    if mine_span is None:
        if _parses(learner_lines):
            return Body("stub", note=f"no {block.function} in the notebook")
        mine_span = (0, len(learner_lines))          # their cell does not parse: compare the whole cell
        fresh_span = (0, len(fresh_lines))
    ours = fresh_lines[fresh_span[0]:fresh_span[1]]
    theirs = learner_lines[mine_span[0]:mine_span[1]]
    at = next(position for position in positions if fresh_span[0] <= position < fresh_span[1]) - fresh_span[0]
    matcher = difflib.SequenceMatcher(None, [line.rstrip() for line in ours], [line.rstrip() for line in theirs],
                                      autojunk=False)
    before, after = -1, len(theirs)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            continue
        for offset in range(i2 - i1):
            i, j = i1 + offset, j1 + offset
            if not ours[i].strip():
                continue                              # a blank line is no anchor
            if i < at:
                before = max(before, j)
            elif i > at:
                after = min(after, j)
            else:
                return Body("stub", note="still the release's stub")
    written = [line for line in theirs[before + 1:after] if not _MARKER_LIKE.match(line)]
    code = _code_lines(written)
    if not code:
        return Body("stub", note="nothing written in place of the stub")
    if len(code) == 1 and code[0].strip() == stub:
        return Body("stub", note="still the release's stub")
    return Body("code", text=textwrap.dedent("\n".join(written)).strip("\n"))


def _parses(lines: list[str]) -> bool:
    try:
        ast.parse("\n".join(lines))
    except SyntaxError:
        return False
    return True


def _cells_by_id(notebook: dict) -> dict[str, dict]:
    return {cell.get("id"): cell for cell in notebook.get("cells", []) if cell.get("cell_type") == "code"}


def learner_bodies(root: Path, dev: Path, mine: Path | None) -> dict[str, Body]:
    """Exercise (qualified name) -> the learner's body, for every solution block of the dev notebook."""
    dev_notebook = read_notebook(dev)
    blocks = solution_blocks(dev_notebook, dev.name)
    if mine is None:
        return {block.function: Body("stub", note=f"no notebook {_stem(dev)}.ipynb found") for block in blocks}
    try:
        if mine.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise ValueError(f"larger than {MAX_NOTEBOOK_BYTES // 1_000_000} MB")
        learner = read_notebook(mine)
        if not isinstance(learner.get("cells"), list):
            raise ValueError("no cells")
    except (OSError, ValueError, AttributeError) as error:
        return {block.function: Body("error", note=f"cannot read {mine.name}: {error}") for block in blocks}
    fresh = _cells_by_id(release_notebook(dev_notebook, where=dev.relative_to(root).as_posix()))
    theirs = _cells_by_id(learner)
    bodies = {}
    for block in blocks:
        cell_id = dev_notebook["cells"][block.cell_number - 1].get("id")
        fresh_lines = cell_source(fresh[cell_id]).splitlines()
        cell = theirs.get(cell_id)
        if cell is None:                          # the cell's id changed: the last cell defining the function
            defining = [c for c in theirs.values() if _function_span(cell_source(c).splitlines(), block.function)]
            cell = defining[-1] if defining else None
        if cell is None:
            bodies[block.function] = Body("stub", note=f"no {block.function} in {mine.name}")
            continue
        bodies[block.function] = extract_body(fresh_lines, cell_source(cell).splitlines(), block)
    return bodies


def module_bodies(root: Path, module: Module, learner: Learner) -> dict[str, Body]:
    """Exercise -> the learner's body, for every exercise of `module`."""
    bodies: dict[str, Body] = {}
    for dev in module.notebooks:
        if dev.is_file():
            bodies.update(learner_bodies(root, dev, learner.notebooks.get(dev)))
    return bodies


# ---------------------------------------------------------------------------
# The instructor's notebook with the learner's code in it


def _fill(source: str, blocks: list[SolutionBlock], bodies: dict[str, Body], replaced: dict[str, str]) -> str:
    """`source` (a dev cell) with each block's reference solution replaced by the learner's body, or by the
    release's stub, or (`replaced`: exercise -> why) by a line that raises saying why it is not run again;
    the markers stay, so the exported file still shows where the exercises are."""
    lines = source.splitlines()
    for block in sorted(blocks, key=lambda b: b.begin_line, reverse=True):
        body = bodies.get(block.function, Body("stub"))
        if block.function in replaced:
            text = [f'{block.indent}raise RuntimeError({f"{block.function}: {replaced[block.function]}; not run again"!r})']
        elif body.kind == "code":
            text = textwrap.indent(body.text, block.indent, lambda line: True).splitlines()
        else:
            text = [block.stub]
        lines[block.begin_line:block.end_line - 1] = text
    return "\n".join(lines) + ("\n" if source.endswith("\n") else "")


def filled_notebook(dev: Path, bodies: dict[str, Body], replaced: dict[str, str] | None = None) -> dict:
    """The dev notebook with the learner's code in its solution blocks. A block whose code makes its cell
    invalid Python becomes an error (its body is then the stub); outputs are cleared."""
    notebook, replaced = read_notebook(dev), replaced or {}
    by_cell: dict[int, list[SolutionBlock]] = {}
    for block in solution_blocks(notebook, dev.name):
        by_cell.setdefault(block.cell_number, []).append(block)
    for number, cell in enumerate(notebook["cells"], start=1):
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        if number not in by_cell:
            continue
        source = cell_source(cell)
        filled = _fill(source, by_cell[number], bodies, replaced)
        try:
            ast.parse(filled)
        except SyntaxError:
            for block in by_cell[number]:
                alone = {name: body for name, body in bodies.items() if name == block.function}
                try:
                    ast.parse(_fill(source, by_cell[number], alone, replaced))
                except SyntaxError as error:
                    bodies[block.function] = Body("error", note=f"SyntaxError: {error.msg} (line "
                                                  f"{(error.lineno or block.begin_line) - block.begin_line} of "
                                                  f"the solution)")
            filled = _fill(source, by_cell[number], bodies, replaced)
        cell["source"] = filled
    return notebook


# ---------------------------------------------------------------------------
# One learner's module, in a temporary copy


def source_snapshot(root: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every file of the instructor's repository that grading reads."""
    digests = {}
    for name in (*COPIED, "tito"):
        top = root / name
        paths = [top] if top.is_file() else sorted(top.rglob("*")) if top.is_dir() else []
        for path in paths:
            relative = path.relative_to(root)
            if path.is_file() and "__pycache__" not in relative.parts and path.suffix != ".pyc":
                digests[relative.as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def _copy_repository(root: Path, destination: Path) -> None:
    destination.mkdir(parents=True)
    for name in COPIED:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=_NOT_SOURCE)
        elif source.is_file():
            shutil.copy2(source, destination / name)
    shutil.copytree(_TITO_DIR, destination / "tito", ignore=_NOT_SOURCE)   # the plugins the checks load


def _learner_env(copy: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _HIDDEN_ENV}
    env.update(PYTHONPATH=str(copy), TITO_ROOT=str(copy), PWD=str(copy), MPLBACKEND="Agg",
               PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def _limits() -> None:  # pragma: no cover - runs in the child between fork and exec
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _run(command: list[str], cwd: Path, env: dict[str, str], seconds: float) -> tuple[int | None, str]:
    """Run in a new session with output to a capped file; kill the whole group on timeout and at the end.
    (return code or None on timeout, the last of its stderr)."""
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=errors, start_new_session=True,
                                   preexec_fn=_limits if os.name == "posix" else None)
        try:
            code = process.wait(timeout=max(seconds, 0.1))
        except subprocess.TimeoutExpired:
            code = None
        _kill_group(process)
        errors.seek(0, os.SEEK_END)
        errors.seek(max(errors.tell() - 4000, 0))
        return code, errors.read().decode("utf-8", errors="replace")


_EXPORT_CODE = "import sys; from nbdev.export import nb_export; [nb_export(path) for path in sys.argv[1:]]"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<name>\S+)')


@dataclass
class ModuleRun:
    """What happened to one learner's module; turned into rows by `rows_for`."""

    module: Module
    exercises: list[summary.Exercise]
    bodies: dict[str, Body]
    tests: dict[str, dict] = field(default_factory=dict)       # nodeid -> {"outcome", "executed"}
    failures: list[dict] = field(default_factory=list)         # tito.pytest_plugin's failure descriptions
    collected: list[str] = field(default_factory=list)
    timed_out: dict[str, str] = field(default_factory=dict)    # exercise -> what timed out
    crashed: dict[str, str] = field(default_factory=dict)      # exercise -> how the process ended
    out_of_time: bool = False                                  # the learner's --timeout ran out
    problem: str = ""                                          # the module could not be graded at all


class Grader:
    def __init__(self, root: Path, timeout: float, test_timeout: float):
        self.root, self.timeout, self.test_timeout = root, timeout, test_timeout
        self.settings = Settings.read(root)

    def grade_module(self, module: Module, bodies: dict[str, Body], deadline: float) -> ModuleRun:
        """Grade one learner's bodies for `module` (see `module_bodies`) in a temporary copy."""
        run = ModuleRun(module, summary.exercises(self.root, [module]), dict(bodies))
        if not run.exercises or all(body.kind != "code" for body in bodies.values()):
            return run                                # nothing of theirs to run
        if time.monotonic() >= deadline:
            run.out_of_time = True
            return run
        # Three folders: the grader's files (named in the test process's environment), the pristine copy
        # (named nowhere the learner's code can see), and the learner's working copy.
        with tempfile.TemporaryDirectory(prefix="tito-grade-", ignore_cleanup_errors=True) as scratch_name, \
                tempfile.TemporaryDirectory(prefix="tito-grade-", ignore_cleanup_errors=True) as pristine_name, \
                tempfile.TemporaryDirectory(prefix="tito-grade-learner-", ignore_cleanup_errors=True) as home_name:
            scratch, copy = Path(scratch_name), Path(home_name) / "repo"
            pristine = Path(pristine_name) / "repo"
            _copy_repository(self.root, pristine)
            if not self._prepare(run, pristine, deadline):
                return run
            self._test(run, pristine, copy, scratch, deadline)
        return run

    def _prepare(self, run: ModuleRun, pristine: Path, deadline: float) -> bool:
        """The learner's code into the pristine copy's dev notebooks, exported into its package."""
        replaced = {name: "ended the test process in an earlier check" for name in run.crashed}
        replaced |= {name: "ran past the time limit in an earlier check" for name in run.timed_out}
        paths = []
        for dev in run.module.notebooks:
            if not dev.is_file():
                continue
            target = pristine / dev.relative_to(self.root)
            write_notebook(filled_notebook(dev, run.bodies, replaced), target)
            paths.append(str(target))
        env = _learner_env(pristine)
        code, errors = _run([sys.executable, "-c", _EXPORT_CODE, *paths], pristine, env, deadline - time.monotonic())
        if code != 0:
            run.problem = ("the learner's time limit ran out while exporting" if code is None else
                           "exporting the notebook failed: " + (errors.strip().splitlines() or ["?"])[-1])
            run.out_of_time = code is None
            return False
        return True

    def _test(self, run: ModuleRun, pristine: Path, copy: Path, scratch: Path, deadline: float) -> None:
        module = run.module
        tests = [str(path.relative_to(self.root)) for path in module_test_files(self.root, module)]
        if not tests:
            run.problem = f"no test files for {module.label}"
            return
        listing, skip = scratch / "exercises.json", scratch / "skip.txt"
        chosen = [summary.Exercise(e.name, e.module, e.notebook, pristine / e.package_file.relative_to(self.root),
                                   e.order) for e in run.exercises]
        spans = self._spans(chosen)
        names = {e.name for e in run.exercises}
        done: set[str] = set()
        for attempt in range(1, 1000):
            left = deadline - time.monotonic()
            if left <= 0:
                run.out_of_time = True
                return
            if copy.exists():
                shutil.rmtree(copy, ignore_errors=True)
            if copy.exists():
                run.problem = f"cannot remove the previous copy {copy}"
                return
            shutil.copytree(pristine, copy, symlinks=True)
            # The exercise list names the files of the copy the tests import.
            listing.write_text(json.dumps([{"name": e.name, "file": str(copy / e.package_file.relative_to(pristine))}
                                           for e in chosen]), encoding="utf-8")
            skip.write_text("\n".join(sorted(done)), encoding="utf-8")
            progress, dump = scratch / f"progress-{attempt}.jsonl", scratch / f"dump-{attempt}.txt"
            env = _learner_env(copy, TITO_GRADE_PROGRESS=str(progress), TITO_GRADE_SKIP=str(skip),
                               TITO_GRADE_DUMP=str(dump), TITO_GRADE_TEST_TIMEOUT=str(self.test_timeout),
                               TITO_EXERCISES=str(listing))
            command = [sys.executable, "-m", "pytest", *tests, "-p", "tito.grade_plugin", "-p", "no:cacheprovider",
                       "-q", "-s", "--tb=no", "-rN"]
            code, errors = _run(command, copy, env, left)
            started, entered, collected_now = None, [], None
            for entry in _read_progress(progress):
                if "collected" in entry and collected_now is None:
                    collected_now = entry["collected"]
                    if not run.collected:
                        run.collected = list(collected_now)
                elif "collect_error" in entry:
                    run.failures.append({"nodeid": entry["collect_error"], "when": "collect",
                                         "exception": "collection error", "message": entry.get("message", []),
                                         "raised_in": None, "raised_through": [], "check": None, "line": None,
                                         "values": None})
                elif "start" in entry:
                    started, entered = entry["start"], []
                elif "enter" in entry:
                    entered.append(entry["enter"])
                elif "done" in entry and entry["done"] not in done:
                    done.add(entry["done"])
                    started = None
                    run.tests[entry["done"]] = {"outcome": entry.get("outcome", "failed"),
                                                "executed": [n for n in entry.get("executed", []) if n in names]}
                    run.failures += entry.get("failures", [])
            if started is None:
                if code is None:
                    run.out_of_time = True
                elif code not in (0, 1) and not run.tests and not run.failures:
                    run.problem = f"pytest exited with code {code}: " + (errors.strip().splitlines() or ["?"])[-1]
                return                                # the run went to its end
            # The process ended in the middle of a test: say why, blame an exercise, go on after it.
            done.add(started)
            blamed = None
            hung = dump.is_file() and dump.stat().st_size > 0
            if hung:
                blamed = self._hung_in(dump.read_text(encoding="utf-8", errors="replace"), spans)
            blamed = blamed or (entered[-1] if entered else None)
            entered = [name for name in dict.fromkeys(entered) if name in names]
            run.tests[started] = {"outcome": "failed", "executed": entered}
            if code is None and not hung:
                run.out_of_time = True
                self._add_crash(run, started, blamed, "timeout", "the learner's time limit ran out in this check")
                return
            if hung:
                what = f"ran longer than {self.test_timeout:g} s"
                self._add_crash(run, started, blamed, "timeout", what)
                if blamed is not None and blamed not in run.timed_out:
                    run.timed_out[blamed] = f"{started.split('::')[-1]} {what}"
                    if not self._prepare(run, pristine, deadline):   # its other checks now fail at once
                        return
            else:
                how = f"the test process ended during this check ({_ended(code)})"
                self._add_crash(run, started, blamed, "crash", how)
                if blamed is not None and blamed not in run.crashed:
                    run.crashed[blamed] = f"{started.split('::')[-1]}: {how}"
                    if not self._prepare(run, pristine, deadline):   # its other checks now fail at once
                        return
            if collected_now is not None and set(collected_now) <= done:
                return

    def _add_crash(self, run: ModuleRun, nodeid: str, blamed: str | None, kind: str, message: str) -> None:
        run.failures.append({"nodeid": nodeid, "when": "call", "exception": kind, "message": [message],
                             "raised_in": blamed, "raised_through": [blamed] if blamed else [], "check": None,
                             "line": None, "values": None})

    def _spans(self, chosen: list[summary.Exercise]) -> dict[str, list[tuple[int, int, str]]]:
        """Package file (real path) -> (first line, last line, exercise) of each exercise function."""
        spans: dict[str, list[tuple[int, int, str]]] = {}
        for exercise in chosen:
            try:
                tree = ast.parse(exercise.package_file.read_text(encoding="utf-8"))
            except (OSError, SyntaxError):
                continue
            for node, name in _functions_by_line(tree):
                if name == exercise.name:
                    spans.setdefault(exercise.package_file.name + "|" + exercise.package_file.parent.name, []).append(
                        (node.lineno, node.end_lineno, name))
        return spans

    @staticmethod
    def _hung_in(dump: str, spans: dict[str, list[tuple[int, int, str]]]) -> str | None:
        """The innermost exercise on the stack faulthandler wrote (most recent call first)."""
        for line in dump.splitlines():
            match = _FRAME.match(line)
            if not match:
                continue
            path = Path(match["file"])
            for first, last, name in spans.get(path.name + "|" + path.parent.name, []):
                if first <= int(match["line"]) <= last:
                    return name
        return None


def _ended(code: int | None) -> str:
    if code is None:
        return "killed"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _read_progress(path: Path) -> list[dict]:
    entries = []
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict):
                    entries.append(entry)
    except OSError:
        pass
    return entries


# ---------------------------------------------------------------------------
# Rows


def _first_line(failure: dict) -> str:
    message = failure.get("message") or [failure.get("exception", "")]
    text = message[0] if message else ""
    values = failure.get("values")
    if values and text.startswith("AssertionError: assert"):
        text = (f"expected {values['expected']['expr']} = {values['expected']['value']}, "
                f"actual {values['actual']['expr']} = {values['actual']['value']}")
    test = failure.get("nodeid", "").split("::")[-1]
    return " ".join(f"{test}: {text}".split())[:MAX_LINE]


def _failure_text(failure: dict) -> str:
    parts = [*(failure.get("message") or []), failure.get("check") or ""]
    values = failure.get("values") or {}
    if values:
        parts += [str(values.get("rows_summary", "")), str(values.get("expected", "")), str(values.get("actual", ""))]
    return "\n".join(parts)


def _named(failure: dict, mistake) -> bool:
    """The failure is a check that recognised `mistake` by name (`Misconception: <says>: ...`)."""
    if not mistake.says or failure.get("exception") != "Misconception":
        return False
    message = " ".join(failure.get("message") or []).lower()
    return message.startswith("misconception: " + mistake.says.lower())


def match_misconceptions(module: Module, exercise: str, failures: list[dict]) -> list:
    """The catalogue's mistakes of `exercise` seen in its failures: those a check named (its
    `Misconception` message starts with their `says`), else those whose `says` words appear anywhere in the
    failures' messages, checks and values."""
    from tito.misconceptions import mistakes_of

    own = [mistake for mistake in mistakes_of(module.name) if mistake.exercise == exercise and mistake.says]
    named = [mistake for mistake in own if any(_named(failure, mistake) for failure in failures)]
    if named:
        return named
    text = "\n".join(_failure_text(failure) for failure in failures).lower()
    return [mistake for mistake in own if mistake.says.lower() in text]


def attribute(run: ModuleRun) -> dict[str | None, list[dict]]:
    """Failures grouped by exercise: `tito.summary.attribute`, then, for a class, two corrections it cannot
    make for one learner's summary. A learner may have several mistakes at once, and a failed assertion in
    a test (no exception raised inside an exercise) is blamed there by the spectrum of all failing tests,
    which then points at an exercise that merely ran alongside a wrong one. So: a check that names a
    catalogue mistake (`Misconception: <says>`) goes to that mistake's exercise when it ran in the test;
    and a failure blamed by the spectrum alone goes, among the exercises its test ran, to one already known
    wrong (a failure raised inside it, or named), when there is one."""
    from tito.misconceptions import mistakes_of

    if not run.failures:
        return {}
    groups = summary.attribute([dict(f) for f in run.failures], run.tests, run.exercises)
    order = {exercise.name: exercise.order for exercise in run.exercises}
    mistakes = mistakes_of(run.module.name)
    blamed: list[tuple[str | None, dict]] = [(name, failure) for name, group in groups.items() for failure in group]
    spectrum_only, known = [], set()
    for position, (name, failure) in enumerate(blamed):
        ran = set(run.tests.get(failure["nodeid"], {}).get("executed", []))
        named = {m.exercise for m in mistakes if m.exercise in ran and _named(failure, m)}
        if len(named) == 1:
            name = next(iter(named))
            blamed[position] = (name, failure)
            known.add(name)
        elif name is not None and not str(failure.get("how", "")).startswith("ran in"):
            known.add(name)
        else:
            spectrum_only.append(position)
    for position in spectrum_only:
        name, failure = blamed[position]
        ran = [n for n in run.tests.get(failure["nodeid"], {}).get("executed", []) if n in known]
        if ran and name not in ran:
            blamed[position] = (min(ran, key=lambda n: order.get(n, 0)), failure)
    regrouped: dict[str | None, list[dict]] = {}
    for name, failure in blamed:
        regrouped.setdefault(name, []).append(failure)
    return regrouped


def rows_for(learner: str, run: ModuleRun) -> list[Row]:
    label = run.module.label
    groups = attribute(run)
    executed = {name for test in run.tests.values() for name in test.get("executed", [])}
    rows = []
    for exercise in run.exercises:
        name, body = exercise.name, run.bodies.get(exercise.name, Body("stub"))
        group = groups.get(name, [])
        row = Row(learner, label, name, "passed")
        if body.kind == "stub":
            row.status, row.first_failure = "stub", body.note
        elif body.kind == "error":
            row.status, row.first_failure = "error", body.note
        elif name in run.timed_out:
            row.status, row.first_failure = "timeout", run.timed_out[name]
        elif any(f.get("exception") == "timeout" for f in group):
            row.status, row.first_failure = "timeout", _first_line(next(f for f in group if f.get("exception") == "timeout"))
        elif name in run.crashed or any(f.get("exception") == "SystemExit" for f in group):
            exits = [f for f in group if f.get("exception") in ("SystemExit", "crash")]
            row.status = "error"
            row.first_failure = _first_line(exits[0]) if exits else run.crashed[name]
        elif group:
            stubbed = all("implement this" in " ".join(f.get("message") or []) for f in group)
            row.status = "stub" if stubbed else "failed"
            row.first_failure = _first_line(summary._most_telling(group))
            if not stubbed:
                matched = match_misconceptions(run.module, name, group)
                row.misconception = "; ".join(mistake.name for mistake in matched)
                row.explanation = " / ".join(mistake.misconception for mistake in matched)
        elif run.out_of_time:
            row.status, row.first_failure = "timeout", "the learner's time limit ran out before its checks ended"
        elif run.problem:
            row.status, row.first_failure = "error", run.problem[:MAX_LINE]
        elif name not in executed:
            row.first_failure = "(no check ran it)"
        rows.append(row)
    others = groups.get(None, [])
    if others:
        rows.append(Row(learner, label, "(not traced to an exercise)", "failed",
                        first_failure=_first_line(others[0]) + (f" (+{len(others) - 1} more)" if len(others) > 1 else "")))
    return rows


# ---------------------------------------------------------------------------
# The readable summary


_ASCII_MARK = {"passed": "ok", "failed": "FAIL", "stub": "stub", "timeout": "TIME", "error": "ERR"}


def render(rows: list[Row], learners: list[Learner], marks: bool = False) -> list[str]:
    """The summary's lines: per learner, the exercises that did not pass, with the misconception; then, per
    exercise, how many learners passed it. ASCII only unless `marks` (emoji where the terminal shows them)."""
    lines = []
    by_learner: dict[str, list[Row]] = {}
    for row in rows:
        by_learner.setdefault(row.learner, []).append(row)
    for learner in learners:
        mine = by_learner.get(learner.name, [])
        for warning in learner.warnings:
            lines.append(f"  note: {warning}")
        modules = list(dict.fromkeys(row.module for row in mine))
        for module in modules:
            module_rows = [row for row in mine if row.module == module and row.exercise[0] != "("]
            passed = sum(1 for row in module_rows if row.status == "passed")
            ok = passed == len(module_rows) and all(row.status == "passed" for row in mine if row.module == module)
            counts = ", ".join(f"{sum(1 for row in module_rows if row.status == status)} {status}"
                               for status in STATUSES[1:] if any(row.status == status for row in module_rows))
            head = f"{learner.name}: {module} {passed}/{len(module_rows)} passed" + (f" ({counts})" if counts else "")
            lines.append((f"{ui.mark('ok' if ok else 'fail')} " if marks else f"[{'OK' if ok else 'FAIL'}] ") + head)
            for row in mine:
                if row.module != module or row.status == "passed":
                    continue
                named = f"  [{row.misconception}]" if row.misconception else ""
                lines.append(f"    {_ASCII_MARK.get(row.status, row.status):<5} {row.exercise}{named}")
                if row.explanation:
                    lines.append(f"          misconception: {row.explanation}")
                if row.first_failure:
                    lines.append(f"          {row.first_failure}")
        if not modules:
            lines.append(f"[--] {learner.name}: no notebooks of the graded modules found")
    exercises: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        if row.exercise[0] != "(":
            exercises.setdefault((row.module, row.exercise), []).append(row)
    if exercises:
        lines.append("")
        lines.append(f"Per exercise ({len(learners)} learner{'s' if len(learners) != 1 else ''}):")
        width = min(max(len(exercise) for _, exercise in exercises), 40)
        for (module, exercise), group in exercises.items():
            passed = sum(1 for row in group if row.status == "passed")
            seen: dict[str, int] = {}
            for row in group:
                for name in filter(None, row.misconception.split("; ")):
                    seen[name] = seen.get(name, 0) + 1
            common = ", ".join(f"{name} x{count}" for name, count in sorted(seen.items(), key=lambda kv: -kv[1]))
            lines.append(f"  {module} {exercise:<{width}} {passed}/{len(group)} passed" + (f"; {common}" if common else ""))
    return [line.encode("ascii", "backslashreplace").decode("ascii") if not marks else line for line in lines]


def write_csv(path: Path, rows: list[Row]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow(row.csv())


# ---------------------------------------------------------------------------
# The command


def _modules_to_grade(root: Path, references: list[str] | None, learners: list[Learner]) -> list[Module]:
    if references:
        return list(dict.fromkeys(resolve_module(root, reference) for reference in references))
    with_exercises = [module for module in discover_modules(root) if summary.exercises(root, [module])]
    wanted = {dev for learner in learners for dev in learner.notebooks}
    return [module for module in with_exercises if any(dev in wanted for dev in module.notebooks)]


def grade(root: Path, folder: Path, references: list[str] | None = None, timeout: float = DEFAULT_TIMEOUT,
          test_timeout: float = DEFAULT_TEST_TIMEOUT, progress=print) -> tuple[list[Row], list[Learner], list[str]]:
    """Grade every learner in `folder`: (rows, learners, changes the grading saw in the instructor's files)."""
    learners = [Learner(path.name, path) for path in learner_folders(folder)]
    every = [module for module in discover_modules(root) if summary.exercises(root, [module])]
    candidates = [resolve_module(root, reference) for reference in references] if references else every
    for learner in learners:
        find_notebooks(root, learner, candidates)
    modules = _modules_to_grade(root, references, learners)
    if not modules:
        raise RepoError(f"no learner in {folder} has a notebook of a module with exercises; name one with --module")
    # Every submission is read before any learner's code runs.
    bodies = {learner.name: {module.label: module_bodies(root, module, learner) for module in modules}
              for learner in learners}
    grader = Grader(root, timeout, test_timeout)
    before = source_snapshot(root)
    rows: list[Row] = []
    changed: list[str] = []
    for learner in learners:
        started = time.monotonic()
        deadline = started + timeout
        for module in modules:
            run = grader.grade_module(module, bodies[learner.name][module.label], deadline)
            rows += rows_for(learner.name, run)
        after = source_snapshot(root)
        if after != before:
            names = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
            changed.append(f"while grading {learner.name}: {', '.join(names[:8])}" + (" ..." if len(names) > 8 else ""))
            before = after
        mine = [row for row in rows if row.learner == learner.name and row.exercise[0] != "("]
        progress(f"graded {learner.name}: {sum(row.status == 'passed' for row in mine)}/{len(mine)} exercises "
                 f"passed ({time.monotonic() - started:.1f} s)")
    return rows, learners, changed


def cmd_grade(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    folder = Path(args.folder).expanduser().resolve()
    for name, value in (("--timeout", args.timeout), ("--test-timeout", args.test_timeout)):
        if not (math.isfinite(value) and value > 0):
            raise RepoError(f"{name} must be a finite number of seconds > 0; got {value}")
    out = Path(args.out).expanduser().resolve() if args.out else folder.parent / f"{folder.name}-grades"
    ui.heading(f"grading the learners in {folder} with the checks of {root}")
    rows, learners, changed = grade(root, folder, args.module, args.timeout, min(args.test_timeout, args.timeout),
                                    progress=ui.info)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "grades.csv", rows)
    text = render(rows, learners)
    (out / "summary.txt").write_text("\n".join(text) + "\n", encoding="ascii")
    print()
    print("\n".join(render(rows, learners, marks=ui.can_show_emoji())))
    print()
    ui.info(f"wrote {out / 'grades.csv'} and {out / 'summary.txt'}")
    for change in changed:
        ui.status(False, f"the instructor's repository changed {change}")
    return EXIT_FAILED if changed else EXIT_OK
