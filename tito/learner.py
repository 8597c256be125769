"""The learner's side of tito: `tito module release|start|status|reset|export|complete`.

* Learner notebooks are `release/NN_name/stem.ipynb`, made from
  `modules/NN_name/stem_dev.ipynb` by `tito.release` (solutions replaced by
  `raise NotImplementedError(...)` stubs). They are generated on demand and
  gitignored; they sit outside `modules/`, so `nbdev_export` never sees them.
* `tito module export NN` and `tito module complete NN` export the learner's
  notebooks with nbdev's single-notebook `nb_export`, so the package then holds
  the learner's code for that module. `tito export` exports the dev notebooks
  again and so restores the reference code.
* Progress is kept in `.tito/progress.json` (`tito.progress`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tito import hints, ui
from tito.progress import Progress, shown
from tito.release import ReleaseError, read_notebook, release_notebook, stubs_in_notebook, write_notebook
from tito.repo import (
    LEARNER_DIR, PROGRESS_FILE, Module, RepoError, Settings, discover_modules, exported_from, learner_notebook,
    resolve_module,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _relative(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _dev_notebooks(root: Path, module: Module) -> list[Path]:
    notebooks = [path for path in module.notebooks if path.is_file()]
    if not notebooks:
        raise RepoError(f"module {module.label} has no notebook yet ({_relative(root, module.notebook)})")
    return notebooks


def fresh_learner_notebook(root: Path, module: Module, dev_notebook: Path) -> dict:
    """The pristine learner notebook for `dev_notebook` (deterministic)."""
    return release_notebook(
        read_notebook(dev_notebook), where=_relative(root, dev_notebook),
        command_hint=f"tito module complete {module.number:02d}",
    )


def _is_same(path: Path, notebook: dict) -> bool:
    try:
        return read_notebook(path) == notebook
    except (OSError, ValueError):
        return False


def _describe_todo(notebook: dict) -> str:
    names = stubs_in_notebook(notebook)
    if not names:
        return "nothing to implement (no solution markers): a read-along notebook"
    return f"{len(names)} function{'s' if len(names) != 1 else ''} to implement: {', '.join(names)}"


def learner_exports(root: Path) -> dict[Path, Path]:
    """Package files whose code currently comes from a learner notebook -> that notebook."""
    package, learner_dir = root / Settings.read(root).lib_path, (root / LEARNER_DIR).resolve()
    found = {}
    for path in sorted(package.rglob("*.py")):
        source = exported_from(path)
        if source is not None and learner_dir in source.parents:
            found[path] = source
    return found


# ---------------------------------------------------------------------------
# tito module release


def cmd_release(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    if not args.all and args.module is None:
        raise RepoError(f"name a module ({hints.tito_command('module release 11')}) or pass --all")
    modules = discover_modules(root) if args.all else [resolve_module(root, args.module)]
    if args.out is not None and not args.out.strip():          # "" is not "no --out": it names no folder
        raise RepoError(f"--out needs a folder path; got {args.out!r}")
    folder = None if args.out is None else Path(args.out).resolve()
    ok = True
    for module in modules:
        notebooks = [path for path in module.notebooks if path.is_file()]
        if not notebooks:
            ui.warn(f"{module.label}: no notebook yet; nothing to release")
            continue
        for dev in notebooks:
            target = learner_notebook(root, module, dev, folder)
            try:
                fresh = fresh_learner_notebook(root, module, dev)
            except ReleaseError as error:
                ui.status(False, f"cannot release {_relative(root, dev)}: {error}")
                ok = False
                continue
            if target.is_file() and not _is_same(target, fresh) and not args.force:
                ui.status(False, f"{_relative(root, target)} exists and differs from a fresh release (the "
                                 f"learner's work?); left as it is. Use --force to overwrite it, or "
                                 f"`{hints.tito_command(f'module reset {module.number:02d}')}`")
                ok = False
                continue
            try:
                write_notebook(fresh, target)
            except OSError as error:              # --out /proc/x, a read-only or full disk: say so, go on
                ui.status(False, f"cannot write {target}: {error.strerror or error}")
                ok = False
                continue
            ui.status(True, f"wrote {_relative(root, target)} from {_relative(root, dev)}: {_describe_todo(fresh)}")
    return EXIT_OK if ok else EXIT_FAILED


# ---------------------------------------------------------------------------
# tito module start


def _release_errors_fail(command):
    """A notebook whose markers cannot be released is a failure (exit 1) with the reason, not a traceback."""
    def run(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
        try:
            return command(root, args, extra)
        except ReleaseError as error:
            ui.status(False, f"cannot make the learner notebook: {error}")
            return EXIT_FAILED
    run.__name__, run.__doc__ = command.__name__, command.__doc__
    return run


@_release_errors_fail
def cmd_start(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    module = resolve_module(root, args.module)
    progress = Progress.load(root)
    ui.heading(f"module {module.label}")
    paths = []
    for dev in _dev_notebooks(root, module):
        target = learner_notebook(root, module, dev)
        if target.is_file():
            current = read_notebook(target)
            ui.info(f"{_relative(root, target)} already exists; keeping your work in it. "
                    f"Still {_describe_todo(current).replace('functions to', 'functions left to')}")
        else:
            fresh = fresh_learner_notebook(root, module, dev)
            write_notebook(fresh, target)
            ui.status(True, f"created {_relative(root, target)}: {_describe_todo(fresh)}")
        paths.append(_relative(root, target))
    progress.mark_started(module.label)
    progress.save()
    number = f"{module.number:02d}"
    print("\nNext:")
    print(f"  1. open your notebook:  {hints.jupyter_lab(' '.join(paths))}")
    print("  2. write each function that raises NotImplementedError (its docstring has TODO, APPROACH and")
    print("     HINTS) and run the cells: each section's test_unit_* cell checks your work")
    print(f"  3. check it:  {hints.tito_command(f'module complete {number}')}   (exports your notebook into "
          f"{Settings.read(root).lib_path}/ and runs the module's tests)")
    return EXIT_OK


# ---------------------------------------------------------------------------
# tito module status


def exercise_progress(root: Path, module: Module) -> tuple[int, int]:
    """(written, total) exercises of `module`.

    total: the stubs a fresh release of the module's dev notebooks has (one per solution block).
    written: total minus the stubs still raising `NotImplementedError` in the learner's notebooks
    (`release/NN_name/*.ipynb`); a learner notebook not created yet counts as nothing written.
    "Written" means the stub was replaced, not that it is right: `tito module complete` runs the tests.
    """
    total = written = 0
    for dev in module.notebooks:
        if not dev.is_file():
            continue
        stubs = len(stubs_in_notebook(fresh_learner_notebook(root, module, dev)))
        mine = learner_notebook(root, module, dev)
        try:
            left = len(stubs_in_notebook(read_notebook(mine))) if mine.is_file() else stubs
        except (OSError, ValueError):
            left = stubs                                  # unreadable: nothing counts as written
        total += stubs
        written += max(stubs - left, 0)
    return written, total


def _exercise_count(root: Path, module: Module) -> str:
    try:
        written, total = exercise_progress(root, module)
    except ReleaseError:
        return "exercises ?"                              # bad markers: `tito module release` names them
    if not total:
        return "read-along"
    return f"exercises {written}/{total}"


def cmd_status(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    progress = Progress.load(root)
    modules = discover_modules(root)
    yours = {}
    for package_path, notebook in learner_exports(root).items():
        yours.setdefault(notebook.parent.name, []).append(package_path)
    print(f"Progress ({_relative(root, root / PROGRESS_FILE)}; your notebooks are in {LEARNER_DIR}/):")
    completed = 0
    for module in modules:
        status = progress.status(module.label)
        entry = progress.entry(module.label)
        if status == "completed":
            completed += 1
            text = f"completed {shown(entry['completed'])}"
        elif status == "started":
            text = f"started {shown(entry['started'])}"
            last = entry.get("last_check")
            if last and not last.get("passed"):
                text += f", last check failed {shown(last.get('when'))}"
        else:
            text = "not started"
        notebooks = [learner_notebook(root, module, dev) for dev in module.notebooks]
        present = [_relative(root, path) for path in notebooks if path.is_file()]
        where = ", ".join(present)
        if module.label in yours:
            where += "  (package holds your code)"
        print(f"  {module.number:02d}  {module.name:<14} {text:<28} {_exercise_count(root, module):<16} {where}".rstrip())
    if not modules:
        print("  (no modules/NN_name/ folders yet)")
    print(f"{completed} of {len(modules)} modules completed")
    return EXIT_OK


# ---------------------------------------------------------------------------
# tito module reset


def _confirm(question: str) -> bool | None:
    """True/False from the user's answer; None when stdin gives no answer at all."""
    print(f"{question} [y/N] ", end="", flush=True)
    try:
        answer = sys.stdin.readline() if sys.stdin is not None else ""
    except (OSError, ValueError):
        answer = ""
    if not answer or not sys.stdin.isatty():  # a typed answer ends the line on screen; piped input does not
        print()
    if not answer:
        return None
    return answer.strip().lower() in ("y", "yes")


@_release_errors_fail
def cmd_reset(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    module = resolve_module(root, args.module)
    progress = Progress.load(root)
    fresh = {learner_notebook(root, module, dev): fresh_learner_notebook(root, module, dev)
             for dev in _dev_notebooks(root, module)}
    changed = [path for path, notebook in fresh.items() if path.is_file() and not _is_same(path, notebook)]
    if changed and not args.yes:
        names = ", ".join(_relative(root, path) for path in changed)
        answer = _confirm(f"Replace {names} with a fresh copy? Your changes in it will be lost.")
        if answer is None:
            ui.status(False, f"no answer (stdin is closed or not interactive), so nothing was reset; "
                             f"to reset without a question: {hints.tito_command(f'module reset {module.number:02d} --yes')}")
            return EXIT_USAGE
        if not answer:
            ui.info("not reset; your notebook is unchanged")
            return EXIT_FAILED
    for path, notebook in fresh.items():
        if path.is_file() and path not in changed:
            ui.info(f"{_relative(root, path)} is already a fresh copy")
            continue
        write_notebook(notebook, path)
        ui.status(True, f"wrote a fresh {_relative(root, path)}: {_describe_todo(notebook)}")
    progress.restart(module.label)
    progress.save()
    held = [path for path, source in learner_exports(root).items() if source in {p.resolve() for p in fresh}]
    if held:
        files = ", ".join(_relative(root, path) for path in held)
        ui.info(f"{files} still holds the code you exported last; `{hints.tito_command(f'module export {module.number:02d}')}` "
                f"exports the fresh notebook, `{hints.tito_command('export')}` restores the reference code")
    return EXIT_OK


# ---------------------------------------------------------------------------
# tito module export / complete


def notebooks_to_export(root: Path, module: Module) -> list[tuple[Path, bool]]:
    """(notebook, is the learner's) for each of the module's notebooks: the
    learner's copy when it exists, else the dev notebook (saying so)."""
    chosen = []
    for dev in _dev_notebooks(root, module):
        learner = learner_notebook(root, module, dev)
        if learner.is_file():
            chosen.append((learner, True))
        else:
            ui.warn(f"no learner notebook {_relative(root, learner)}: using the reference notebook "
                    f"{_relative(root, dev)} (`{hints.tito_command(f'module start {module.number:02d}')}` creates yours)")
            chosen.append((dev, False))
    return chosen


def export_and_report(root: Path, notebooks: list[Path]) -> bool:
    from tito.sync import Changes, ExportError, export_notebooks, snapshot

    package = Settings.read(root).lib_path
    before = snapshot(root / package)
    try:
        export_notebooks(root, notebooks)
    except ExportError as error:
        ui.status(False, f"exporting {', '.join(_relative(root, p) for p in notebooks)} failed:\n"
                         f"{ui.indent(str(error))}")
        return False
    changes = Changes.between(before, snapshot(root / package))
    names = ", ".join(_relative(root, path) for path in notebooks)
    if changes:
        ui.status(True, f"exported {names} into {package}/; changed files:")
        for line in changes.lines(prefix=f"{package}/"):
            print(f"    {line}")
    else:
        ui.status(True, f"exported {names} into {package}/; no files changed")
    return True


def cmd_export(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    module = resolve_module(root, args.module)
    notebooks = [path for path, _ in notebooks_to_export(root, module)]
    if not export_and_report(root, notebooks):
        return EXIT_FAILED
    print(f"Test it: {hints.tito_command(f'test --module {module.number:02d}')}.  "
          f"Restore the reference code: {hints.tito_command('export')}")
    return EXIT_OK


def cmd_complete(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    from tito.checks import check_module

    module = resolve_module(root, args.module)
    progress = Progress.load(root)
    ui.heading(f"completing module {module.label}: export your notebook, then test it")
    chosen = notebooks_to_export(root, module)
    notebooks = [path for path, _ in chosen]
    if not export_and_report(root, notebooks):
        return EXIT_FAILED
    check = check_module(root, module, extra, notebooks=notebooks)
    learners = all(is_learners for _, is_learners in chosen)
    counts = check.tests.counts if check.tests is not None else {}
    print()
    if learners:
        progress.record_check(module.label, check.ok, counts)
        progress.save()
    if check.ok and learners:
        ui.status(True, f"module {module.label} completed; recorded in {_relative(root, root / PROGRESS_FILE)}")
    elif check.ok:
        ui.status(True, f"the reference notebooks of {module.label} pass; nothing recorded, since none of it "
                        f"is your code (`{hints.tito_command(f'module start {module.number:02d}')}`)")
    else:
        ui.status(False, f"module {module.label} is not complete: fix what failed above and run "
                         f"`{hints.tito_command(f'module complete {module.number:02d}')}` again")
    return EXIT_OK if check.ok else EXIT_FAILED
