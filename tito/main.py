"""The `tito` command line.

    tito test --module NAME_OR_NUMBER [--module ...] [-- PYTEST_ARGS]
    tito test --all [-- PYTEST_ARGS]
    tito export
    tito module list
    tito module release NAME_OR_NUMBER | --all [--out DIR] [--force]   (alias: generate)
    tito module start NAME_OR_NUMBER
    tito module status
    tito module reset NAME_OR_NUMBER [--yes]
    tito module export NAME_OR_NUMBER
    tito module complete NAME_OR_NUMBER [-- PYTEST_ARGS]
    tito system doctor
    tito demo embeddings [DEMO_ARGS]
    tito docs [--out DIR] [--solutions] [--strict]
    tito grade FOLDER [--module NAME_OR_NUMBER ...] [--timeout SECONDS] [--test-timeout SECONDS] [--out DIR]

Exit codes: 0 success, 1 something failed, 2 usage error (e.g. unknown module).
Only the standard library is imported here; nbdev, execnb and pytest run in
subprocesses started by the commands that need them.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from tito import freshness, hints, learner, ui
from tito.docs import DEFAULT_OUT as DEFAULT_DOCS_OUT, cmd_docs
from tito.repo import (
    RepoError, Settings, describe_modules, discover_modules, find_root, resolve_module, subprocess_env,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

# Demo name -> module with a `main(argv) -> int | None` function.
DEMOS = {
    "embeddings": "tito.demos.embeddings",
    "gpt": "tito.demos.gpt",
    "positions": "tito.demos.positions",
    "profile": "tito.demos.profile",
    "train": "tito.demos.train",
}


# ---------------------------------------------------------------------------
# tito test


def _test_modules(root: Path, references: list[str], pytest_args: list[str]) -> int:
    """Each module's pytest files, the notebooks its package code was exported
    from, and a scan for unimplemented stubs (see tito.checks)."""
    from tito.checks import check_module

    modules = [resolve_module(root, reference) for reference in references]  # fail fast on a typo
    results = {module.label: check_module(root, module, pytest_args).ok for module in dict.fromkeys(modules)}
    if len(results) > 1:
        print("\nAll modules:")
        for label, ok in results.items():
            ui.status(ok, label)
    return EXIT_OK if all(results.values()) else EXIT_FAILED


def parallel_args(extra: list[str], cpus: int | None = None) -> list[str]:
    """pytest-xdist's arguments for the whole suite: one worker per core (at most 4), whole files per
    worker (`--dist loadfile`: a file's fixtures and module-level state stay in one process). Nothing when
    pytest-xdist is not installed, or when the arguments after `--` choose for themselves (`-n`, `--dist`,
    `-p no:xdist`)."""
    import importlib.util

    if importlib.util.find_spec("xdist") is None:
        return []
    chooses = any(arg in ("-n", "--numprocesses", "--dist", "no:xdist") or arg.startswith(("-n", "--numprocesses=", "--dist="))
                  for arg in extra)
    if chooses:
        return []
    if cpus is None:
        cpus = os.cpu_count() or 1      # os.cpu_count() is None when it cannot tell
    workers = min(4, cpus)
    return [] if workers < 2 else ["-n", str(workers), "--dist", "loadfile"]


def cmd_test(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    if args.all:
        ui.info(f"pytest tests/ in {root} (unit tests, notebook execution, export sync)")
        sys.stdout.flush()
        # pytest's own closing line is the last thing printed: nothing after it.
        command = [sys.executable, "-m", "pytest", "tests", *parallel_args(extra), *extra]
        return subprocess.run(command, cwd=root, env=subprocess_env(root)).returncode
    return _test_modules(root, args.module, extra)


# ---------------------------------------------------------------------------
# tito export


def _export_and_report(root: Path) -> bool:
    from tito.sync import Changes, ExportError, export, snapshot

    package = Settings.read(root).lib_path
    before = snapshot(root / package)
    learners = learner.learner_exports(root)
    try:
        export(root)
    except ExportError as error:
        ui.status(False, f"nbdev_export failed:\n{ui.indent(str(error))}")
        return False
    changes = Changes.between(before, snapshot(root / package))
    if changes:
        ui.status(True, f"exported notebooks into {package}/; changed files:")
        for line in changes.lines(prefix=f"{package}/"):
            print(f"    {line}")
    else:
        ui.status(True, f"exported notebooks into {package}/; no files changed")
    for path, notebook in learners.items():
        if path.is_file() and learner.exported_from(path) != notebook:
            ui.info(f"{path.relative_to(root).as_posix()} held your code from {notebook.relative_to(root).as_posix()}; "
                    f"it holds the reference code again (your notebook is untouched)")
    return True


def cmd_export(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    return EXIT_OK if _export_and_report(root) else EXIT_FAILED


# ---------------------------------------------------------------------------
# tito module ...


def cmd_module_list(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    modules = discover_modules(root)
    print(f"Modules in {root / Settings.read(root).nbs_path}:")
    for module in modules:
        notebooks = [path for path in module.notebooks if path.is_file()]
        shown = ", ".join(str(path.relative_to(root)) for path in notebooks) or "(no notebook yet)"
        print(f"  {module.number:02d}  {module.name:<16} {shown}")
    if not modules:
        print(describe_modules(modules))
    return EXIT_OK


# ---------------------------------------------------------------------------
# tito system doctor


def _version_of(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _check_import(root: Path, package: str) -> tuple[bool, str]:
    """Import the package the way a user's script would: from a folder outside the repo."""
    code = f"import {package}, os; print(os.path.dirname({package}.__file__)); print(getattr({package}, '__version__', '?'))"
    with tempfile.TemporaryDirectory() as elsewhere:
        process = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, capture_output=True, text=True)
    if process.returncode != 0:
        last_line = (process.stderr.strip().splitlines() or ["?"])[-1]
        return False, f"`import {package}` fails in this Python ({last_line}); run: {hints.editable_install(root)}"
    location, version = process.stdout.strip().splitlines()[-2:]
    expected = (root / Settings.read(root).lib_path).resolve()
    if Path(location).resolve() != expected:
        return False, (f"`import {package}` loads {location}, not this checkout's {expected}; run: "
                       f"{hints.editable_install(root)}")
    return True, f"{package} {version} imports from {location}"


def cmd_doctor(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    settings = Settings.read(root)
    checks: list[bool] = []

    def report(ok: bool, message: str) -> None:
        checks.append(ok)
        ui.status(ok, message)

    print(f"tito system doctor for {root}")
    report(sys.version_info >= (3, 9), f"python {platform.python_version()} ({sys.executable})")
    numpy_version = _version_of("numpy")
    report(numpy_version is not None, f"numpy {numpy_version or 'not installed'}")
    nbdev_version = _version_of("nbdev")
    report(nbdev_version is not None, f"nbdev {nbdev_version or f'not installed ({hints.editable_install(root)})'}")
    report(*_check_import(root, settings.lib_name))

    if nbdev_version is None:
        report(False, "sync check skipped: it needs nbdev")
    else:
        from tito.sync import ExportError, check_sync

        try:
            drift = check_sync(root)
        except ExportError as error:
            report(False, f"nbdev_export failed:\n{ui.indent(str(error))}")
        else:
            if drift:
                report(False, f"{settings.lib_path}/ is out of sync with the notebooks (run `{hints.tito_command('export')}`):")
                for line in drift.drift_lines(prefix=f"{settings.lib_path}/"):
                    print(f"    {line}")
                for path, notebook in learner.learner_exports(root).items():
                    print(f"    ({path.relative_to(root).as_posix()} holds your code from "
                          f"{notebook.relative_to(root).as_posix()}; `{hints.tito_command('export')}` restores the reference)")
            else:
                report(True, f"{settings.lib_path}/ is in sync with the notebooks in {settings.nbs_path}/")
    return EXIT_OK if all(checks) else EXIT_FAILED


# ---------------------------------------------------------------------------
# tito demo


def cmd_demo(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    module_name = DEMOS[args.name]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        demo = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and (module_name + ".").startswith(error.name + "."):
            ui.status(False, f"the {args.name} demo is not built yet ({module_name} does not exist)")
            return EXIT_FAILED
        package = Settings.read(root).lib_name
        if error.name is not None and (error.name == package or error.name.startswith(package + ".")):
            ui.status(False, f"the {args.name} demo needs {error.name}, which the package in {root} does not "
                             f"have yet (export the module that makes it: {hints.tito_command('export')})")
            return EXIT_FAILED
        _warn_about_the_export(root, None)
        raise
    except Exception:
        _warn_about_the_export(root, None)      # a stale export may not even import: say so above the traceback
        raise
    _warn_about_the_export(root, freshness.loaded_package_files(root))
    try:
        result = demo.main([*args.demo_args, *extra])
    except NotImplementedError as error:
        from tito.release import STUB_SUFFIX

        message = str(error)
        if not message.endswith(STUB_SUFFIX):
            raise
        name = message[:-len(STUB_SUFFIX)]
        where = [finding for finding in freshness.check_files(root, freshness.loaded_package_files(root))
                 if name in finding.names]
        ui.status(False, f"the {args.name} demo stopped: {name} is not implemented yet in the package"
                         + (f" ({freshness._shown(root, where[0].notebook)}): {freshness.fix(root, where[0])}"
                            if where else ""))
        return EXIT_FAILED
    return int(result or 0)


def _warn_about_the_export(root: Path, files: list[Path] | None) -> None:
    """One line per package file (of `files`, default: all) that is older than its notebook or still holds
    stubs: the demo runs on the package as last exported, not on the notebooks."""
    if files is None:
        package = root / Settings.read(root).lib_path
        files = [path for path in sorted(package.rglob("*.py")) if "__pycache__" not in path.parts]
    for finding in freshness.check_files(root, files):
        ui.warn(freshness.describe(root, finding))


# ---------------------------------------------------------------------------
# What each command needs beyond the standard library


# (command, subcommand) -> modules it imports, itself or in the subprocesses it starts with this Python.
NEEDS = {
    ("test", None): ("numpy", "pytest", "execnb", "nbdev"),
    ("export", None): ("nbdev",),
    ("module", "export"): ("nbdev",),
    ("module", "complete"): ("numpy", "pytest", "execnb", "nbdev"),
    ("demo", None): ("numpy",),
    ("grade", None): ("numpy", "pytest", "nbdev"),
}


def missing_tools(args: argparse.Namespace) -> list[str]:
    """The modules the chosen command needs that this Python cannot import."""
    import importlib.util

    needed = NEEDS.get((args.command, getattr(args, "module_command", None)), ())
    missing = []
    for name in needed:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def explain_missing_tools(root: Path, missing: list[str], argv: list[str]) -> None:
    """Say how to get the dev extras, instead of the traceback the command would end in."""
    ui.status(False, f"this Python ({sys.executable}) cannot import {', '.join(missing)}, which `tito "
                     f"{' '.join(argv[:2])}` needs: tinytorch's development tools are not installed in it.")
    venv_tito = root / ".venv" / "bin" / "tito"
    if not venv_tito.is_file():
        print(f"    Set them up once, in {root}:")
        print('      python3 -m venv .venv && .venv/bin/pip install -e ".[dev]"')
    elif Path(sys.executable).parent != venv_tito.parent:
        print(f"    The repository's venv has them. Run:  {hints._shown(venv_tito)} {' '.join(argv)}")
    else:
        print(f"    Install them into this venv:  {hints.editable_install(root)}")


# ---------------------------------------------------------------------------
# Argument parsing


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tito", description="The tinytorch command line: export notebooks, run tests, check your setup.",
        epilog="Arguments after `--` are passed on to pytest (tito test, tito module complete).",
    )
    parser.add_argument("--repo", metavar="PATH",
                        help="repository root (default: $TITO_ROOT, else the nearest parent with settings.ini)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    test = commands.add_parser("test", help="run a module's tests and notebook, or the whole suite")
    which = test.add_mutually_exclusive_group(required=True)
    which.add_argument("--module", "-m", action="append", metavar="NAME_OR_NUMBER",
                       help="a module by name (embeddings), number (11) or folder (11_embeddings); repeatable")
    which.add_argument("--all", action="store_true", help="the whole pytest suite in tests/ (what CI runs)")
    test.set_defaults(handler=cmd_test)

    export = commands.add_parser("export", help="nbdev_export the notebooks into the package and list changed files")
    export.set_defaults(handler=cmd_export)

    module = commands.add_parser("module", help="work with one module")
    module_commands = module.add_subparsers(dest="module_command", metavar="ACTION", required=True)
    listing = module_commands.add_parser("list", help="list the modules found in modules/")
    listing.set_defaults(handler=cmd_module_list)
    release = module_commands.add_parser(
        "release", aliases=["generate"],
        help="write learner notebooks (solutions replaced by stubs) to release/NN_name/")
    which_release = release.add_mutually_exclusive_group()
    which_release.add_argument("module", nargs="?", metavar="NAME_OR_NUMBER")
    which_release.add_argument("--all", action="store_true", help="every module")
    release.add_argument("--out", metavar="DIR", help="write to DIR/NN_name/ instead of release/NN_name/")
    release.add_argument("--force", action="store_true", help="overwrite a learner notebook that has changes")
    release.set_defaults(handler=learner.cmd_release)
    start = module_commands.add_parser("start", help="create your notebook for a module (never overwrites it)")
    start.add_argument("module", metavar="NAME_OR_NUMBER")
    start.set_defaults(handler=learner.cmd_start)
    status = module_commands.add_parser("status", help="which modules you started and completed")
    status.set_defaults(handler=learner.cmd_status)
    reset = module_commands.add_parser("reset", help="replace your notebook with a fresh copy (asks first)")
    reset.add_argument("module", metavar="NAME_OR_NUMBER")
    reset.add_argument("--yes", "-y", action="store_true", help="do not ask")
    reset.set_defaults(handler=learner.cmd_reset)
    export_one = module_commands.add_parser("export", help="export your notebook for a module into the package")
    export_one.add_argument("module", metavar="NAME_OR_NUMBER")
    export_one.set_defaults(handler=learner.cmd_export)
    complete = module_commands.add_parser(
        "complete", help="export your notebook, run the module's tests and notebook, record completion on a pass")
    complete.add_argument("module", metavar="NAME_OR_NUMBER")
    complete.set_defaults(handler=learner.cmd_complete)

    system = commands.add_parser("system", help="check the environment")
    system_commands = system.add_subparsers(dest="system_command", metavar="ACTION", required=True)
    doctor = system_commands.add_parser("doctor", help="versions, import check and notebook/package sync check")
    doctor.set_defaults(handler=cmd_doctor)

    demo = commands.add_parser("demo", help="run an end-to-end demo")
    demo.add_argument("name", choices=sorted(DEMOS))
    demo.add_argument("demo_args", nargs=argparse.REMAINDER, help="arguments for the demo")
    demo.set_defaults(handler=cmd_demo)

    docs = commands.add_parser(
        "docs", help="build the documentation site (notebooks, API reference, search) with Sphinx + MyST-NB")
    docs.add_argument("--out", metavar="DIR", help=f"write the site to DIR (default: {DEFAULT_DOCS_OUT}/ in the repository)")
    docs.add_argument("--solutions", action="store_true",
                      help="show the dev notebooks with their solutions (default: the learner's notebooks, stubs in place)")
    docs.add_argument("--strict", action="store_true", help="fail on any Sphinx warning (a broken reference, ...)")
    docs.set_defaults(handler=cmd_docs)

    from tito.grade import DEFAULT_TEST_TIMEOUT, DEFAULT_TIMEOUT

    grade = commands.add_parser(
        "grade", help="grade a class: each learner's solution blocks run against the instructor's checks",
        description="Grade a folder of learners' notebooks (one subfolder per learner) with this repository's "
                    "checks: each learner's solution blocks go into a temporary copy of the repository, in a process "
                    "group of their own with a time limit; writes grades.csv and summary.txt. Not a security "
                    "sandbox: the learners' code runs as you (see `python -c 'import tito.grade; "
                    "help(tito.grade)'`).")
    grade.add_argument("folder", metavar="FOLDER", help="one subfolder per learner, holding their notebooks")
    grade.add_argument("--module", "-m", action="append", metavar="NAME_OR_NUMBER",
                       help="grade this module (repeatable; default: every module a learner has a notebook of)")
    grade.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                       help=f"time limit per learner, all modules together (default {DEFAULT_TIMEOUT:g})")
    grade.add_argument("--test-timeout", type=float, default=DEFAULT_TEST_TIMEOUT, metavar="SECONDS",
                       help=f"time limit per check (default {DEFAULT_TEST_TIMEOUT:g})")
    grade.add_argument("--out", metavar="DIR", help="where grades.csv and summary.txt go (default: FOLDER-grades)")
    grade.set_defaults(handler=_grade)
    return parser


def _grade(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    from tito.grade import cmd_grade

    return cmd_grade(root, args, extra)


def main(argv: list[str] | None = None) -> int:
    ui.make_output_safe()
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, extra = argv[:split], argv[split + 1:]
    parser = build_parser()
    args = parser.parse_args(argv)
    if extra and args.handler not in (cmd_test, learner.cmd_complete, cmd_demo):
        parser.error(f"`tito {args.command}` takes no arguments after --")
    try:
        root = find_root(args.repo)
        missing = missing_tools(args)
        if missing:
            explain_missing_tools(root, missing, argv + (["--", *extra] if extra else []))
            return EXIT_FAILED
        return args.handler(root, args, extra)
    except RepoError as error:
        ui.status(False, str(error))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `tito module list | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except OSError as error:  # a file tito had to write or read: the reason and the path, not a traceback
        where = f": {error.filename}" if error.filename else ""
        ui.status(False, f"{error.strerror or error}{where}")
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
