"""Checking one module: its pytest files, its notebooks, and stubs left in the package.

Used by `tito test --module` and `tito module complete`. Whether a module
passed is decided by pytest's exit code, each notebook's execution result and
the stub scan, never by what any of them printed.

Which notebooks run: `tito module complete` runs the notebooks it just
exported. `tito test --module` tests whatever is currently exported: for each
of the module's dev notebooks it reads nbdev's header in the package file that
notebook exports to, and if that file came from the learner's copy
(`release/NN_name/stem.ipynb`) it runs the learner's copy instead of the dev
notebook, since that is the code the package now holds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tito import hints, summary, ui
from tito.notebooks import NotebookResult, run_notebook
from tito.pytest_run import PytestResult, run_pytest
from tito.release import default_export, find_stubs, read_notebook
from tito.repo import Module, Settings, exported_from, learner_notebook, module_test_files, package_file


# pytest's arguments when the learner gave none: progress dots and counts, no per-failure tracebacks.
LEARNER_PYTEST_ARGS = ["--tb=no", "-rN"]  # settings: addopts = -q already
NOTEBOOK_TRACEBACK_LINES = 15


@dataclass
class ModuleCheck:
    module: Module
    tests: PytestResult | None  # None: the module has no pytest files
    notebooks: dict[Path, NotebookResult] = field(default_factory=dict)
    stubs: dict[Path, list[str]] = field(default_factory=dict)  # this module's package files -> stub names

    @property
    def ok(self) -> bool:
        tests_ok = self.tests is None or self.tests.ok
        return tests_ok and all(result.ok for result in self.notebooks.values()) and not self.stubs


def _default_export_of(notebook: Path) -> str | None:
    try:
        return default_export(read_notebook(notebook))
    except (OSError, ValueError):  # missing or not JSON: running it reports the problem
        return None


def module_package_files(root: Path, module: Module) -> list[Path]:
    """The package files the module's dev notebooks export to."""
    dotted_names = [_default_export_of(notebook) for notebook in module.notebooks]
    return [package_file(root, dotted) for dotted in dotted_names if dotted]


def exported_notebooks(root: Path, module: Module) -> list[tuple[Path, bool]]:
    """For each of the module's dev notebooks, the notebook its package file was
    exported from: (the learner's copy, True) when that is where it came from,
    else (the dev notebook, False)."""
    chosen = []
    for notebook in module.notebooks:
        learner = learner_notebook(root, module, notebook)
        dotted = _default_export_of(notebook)
        source = exported_from(package_file(root, dotted)) if dotted else None
        if source is not None and learner.is_file() and source == learner.resolve():
            chosen.append((learner, True))
        else:
            chosen.append((notebook, False))
    return chosen


def package_stubs(root: Path) -> dict[Path, list[str]]:
    """Every package file that still holds release stubs -> the stubbed functions."""
    package = root / Settings.read(root).lib_path
    found = {}
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" not in path.parts:
            names = find_stubs(path)
            if names:
                found[path] = names
    return found


def check_module(root: Path, module: Module, pytest_args: list[str],
                 notebooks: list[Path] | None = None) -> ModuleCheck:
    """Run the module's pytest files and notebooks (default: the ones its package
    files were exported from) and scan the package for stubs; print as it goes."""
    ui.heading(f"module {module.number:02d} {module.name} ({module.folder.relative_to(root)})")
    if notebooks is None:
        notebooks = []
        for notebook, is_learners in exported_notebooks(root, module):
            if is_learners:
                ui.info(f"the package holds your code from {notebook.relative_to(root)}: testing that notebook")
            notebooks.append(notebook)

    from tito import freshness

    for finding in freshness.check_files(root, module_package_files(root, module)):
        if finding.kind == "stale":                 # stubs are listed in the summary below
            ui.warn(freshness.describe(root, finding))

    test_files = module_test_files(root, module)
    tests = None
    candidates = summary.candidate_exercises(root, module)
    if test_files:
        relative = [str(path.relative_to(root)) for path in test_files]
        # With no pytest arguments of the learner's, pytest prints its progress and counts only: the summary
        # below says what failed and where. Any argument after `--` gives pytest's own full report back.
        quiet = [] if pytest_args else LEARNER_PYTEST_ARGS
        ui.info(f"pytest {' '.join([*relative, *quiet, *pytest_args])}")
        tests = run_pytest(root, [*relative, *quiet, *pytest_args],
                           exercises=[exercise.entry() for exercise in candidates])

    check = ModuleCheck(module, tests)
    for path in notebooks:
        ui.info(f"executing {path.relative_to(root)}")
        check.notebooks[path] = run_notebook(path, root=root)

    all_stubs = package_stubs(root)
    own_files = {path.resolve() for path in module_package_files(root, module)}
    check.stubs = {path: names for path, names in all_stubs.items() if path.resolve() in own_files}
    others = {path: names for path, names in all_stubs.items() if path.resolve() not in own_files}
    _print_summary(root, check, others, candidates)
    return check


def _print_summary(root: Path, check: ModuleCheck, other_stubs: dict[Path, list[str]],
                   candidates: list[summary.Exercise]) -> None:
    """pytest's and each notebook's outcome, the stubs left, then last, in a box that fits one screen, what to
    fix: every failing or unimplemented function in teaching order (tito.summary)."""
    module = check.module
    print(f"\nSummary for {module.label}:")
    if check.tests is not None:
        ui.status(check.tests.ok, f"pytest: {check.tests.summary} (exit code {check.tests.exit_code})")
    else:
        ui.warn(f"pytest: no test files (tests/{module.name}/test_*.py, tests/test_{module.name}.py or tests/test_{module.name}_*.py)")
    for path, notebook in check.notebooks.items():
        outcome = "executed OK" if notebook.ok else "failed"
        headline = notebook.headline.splitlines()[0] if notebook.failure is not None else notebook.headline
        ui.status(notebook.ok, f"notebook {path.name}: {outcome}: {headline}")
        if notebook.failure is not None:                   # its last lines hold the error message in full
            print(ui.indent(_tail(notebook.failure.traceback, NOTEBOOK_TRACEBACK_LINES)))
    if check.stubs:
        names = [name for stubbed in check.stubs.values() for name in stubbed]
        ui.status(False, f"not implemented yet ({len(names)} function{'s' if len(names) != 1 else ''} "
                         f"still raise NotImplementedError):")
        _print_stubs(root, check.stubs)
    if other_stubs:
        ui.warn("other modules in the package are not implemented yet either; this module may depend on them:")
        _print_stubs(root, other_stubs)
    stubbed = {(path.resolve(), name) for path, names in {**check.stubs, **other_stubs}.items() for name in names}
    stubs = [exercise.name for exercise in candidates if (exercise.package_file.resolve(), exercise.name) in stubbed]
    failures = check.tests.failures if check.tests is not None else []
    lines = summary.render(module, hints.tito(), failures, check.tests.tests if check.tests is not None else {},
                           candidates, stubs)
    if lines:
        print()
        print("\n".join(summary.boxed(lines)))


def _tail(text: str, lines: int) -> str:
    """The last `lines` lines of a traceback (where it was raised and the message), saying what was cut."""
    kept = text.rstrip().splitlines()
    if len(kept) <= lines:
        return text
    return "\n".join([f"... ({len(kept) - lines} earlier traceback lines)", *kept[-lines:]])


def _print_stubs(root: Path, stubs: dict[Path, list[str]]) -> None:
    for path, names in stubs.items():
        print(f"    {path.relative_to(root).as_posix()}: {', '.join(names)}")
