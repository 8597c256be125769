"""Is the package what its notebooks say? Checked before tito runs the package (a demo, a module's tests).

A learner's notebook and the package drift apart quietly: `tito module reset 11` (or an edit, or a
restore from a backup) changes `release/11_embeddings/embeddings.ipynb`, but the package keeps the code
of its last export, and a demo then crashes far away ("cannot add tensors of shapes (2048, 64) and
(64, 64)"). Two checks, both without running nbdev (they take milliseconds):

* stale: nbdev writes each exported cell under a `# %% <notebook> #<cell id>` line; a package file is
  stale when the cells under those lines differ from the `#| export` cells its notebook holds now;
* unimplemented: a package file that still holds release stubs (`raise NotImplementedError(...)`).

Each finding is one line naming the notebook and the command that fixes it, spelt as this tito was
started (`tito.hints`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tito import hints
from tito.release import cell_source, default_export, find_stubs, read_notebook
from tito.repo import LEARNER_DIR, Settings, exported_from, package_file

_CELL = re.compile(r"^# %% (?P<path>\S+) #(?P<id>\S+)\s*$")
_EXPORT = re.compile(r"^\s*#\|\s*export[i]?\b\s*(?P<target>\S+)?\s*$")


_FROM = re.compile(r"^(\s*)from\s+\S+\s+import\b")


def _normal(code: str) -> str:
    """Code as compared: no nbdev directives, no trailing blanks, and `from X import` with X left out (nbdev
    writes the package's own absolute imports as relative ones)."""
    lines = [_FROM.sub(r"\1from _ import", line.rstrip()) for line in code.splitlines()
             if not line.lstrip().startswith("#|")]
    return "\n".join(lines).strip("\n")


def package_cells(path: Path) -> dict[str, str]:
    """Cell id -> code, for every cell nbdev exported into a package file from a notebook."""
    cells: dict[str, list[str]] = {}
    current = None
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _CELL.match(line)
        if match:
            current = match["id"] if match["path"] != "auto" else None
            if current is not None:
                cells[current] = []
        elif current is not None:
            cells[current].append(line)
    return {cell: _normal("\n".join(lines)) for cell, lines in cells.items()}


def notebook_cells(notebook: dict, dotted: str) -> dict[str, str]:
    """Cell id -> code, for every cell of `notebook` that exports into the module `dotted`."""
    default, found = default_export(notebook), {}
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = cell_source(cell)
        for line in source.splitlines():
            match = _EXPORT.match(line)
            if match and (match["target"] or default) == dotted:
                found[cell.get("id", "")] = _normal(source)
                break
    return found


@dataclass(frozen=True)
class Finding:
    package_file: Path
    notebook: Path
    kind: str                      # "stale" or "stubs"
    names: tuple[str, ...] = ()    # the stubbed functions

    @property
    def learners(self) -> bool:
        return LEARNER_DIR in self.notebook.parts


def _dotted(root: Path, path: Path) -> str:
    lib = (root / Settings.read(root).lib_path).resolve()
    relative = path.resolve().relative_to(lib.parent).with_suffix("")
    return ".".join(relative.parts[1:] if relative.parts[0] == lib.name else relative.parts)


def check_files(root: Path, files: list[Path]) -> list[Finding]:
    """Stale and unimplemented package files among `files` (generated ones only)."""
    findings = []
    for path in files:
        notebook = exported_from(path)
        if notebook is None:
            continue
        if notebook.is_file():
            try:
                wanted = notebook_cells(read_notebook(notebook), _dotted(root, path))
                have = package_cells(path)
            except (OSError, ValueError):
                wanted, have = None, None
            if wanted is not None and wanted != have:
                findings.append(Finding(path, notebook, "stale"))
        names = find_stubs(path)
        if names:
            findings.append(Finding(path, notebook, "stubs", tuple(names)))
    return findings


def _module_number(notebook: Path) -> str | None:
    match = re.match(r"(\d+)_", notebook.parent.name)
    return match[1] if match else None


def _shown(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def fix(root: Path, finding: Finding) -> str:
    """The command(s) that bring the package in line with the notebook, spelt as this tito was started."""
    number = _module_number(finding.notebook)
    reference = hints.tito_command("export")
    if not (finding.learners and number):
        return f"run `{reference}`"
    own = f"`{hints.tito_command(f'module export {number}')}`"
    if finding.kind == "stubs":
        return f"implement them in {_shown(root, finding.notebook)} and run {own}, or `{reference}` for the reference code"
    return f"run {own} to use your notebook, or `{reference}` for the reference code"


def describe(root: Path, finding: Finding) -> str:
    """One line: what is wrong with the package file, which notebook, and the command that fixes it."""
    if finding.kind == "stale":
        return (f"{_shown(root, finding.package_file)} is older than {_shown(root, finding.notebook)} (the notebook "
                f"changed since its last export): {fix(root, finding)}")
    names = ", ".join(finding.names[:4]) + (f" and {len(finding.names) - 4} more" if len(finding.names) > 4 else "")
    return (f"{_shown(root, finding.package_file)} still has {len(finding.names)} unimplemented exercise"
            f"{'s' if len(finding.names) != 1 else ''} ({names}) from {_shown(root, finding.notebook)}: "
            f"{fix(root, finding)}")


def loaded_package_files(root: Path) -> list[Path]:
    """The package files of the modules imported in this process (what a demo runs on)."""
    import sys

    lib = (root / Settings.read(root).lib_path).resolve()
    files = []
    for name, module in sorted(sys.modules.items()):
        location = getattr(module, "__file__", None)
        if name.split(".")[0] == lib.name and location and Path(location).resolve().is_relative_to(lib):
            files.append(Path(location).resolve())
    return files


def module_files(root: Path, module) -> list[Path]:
    """The package files a module's notebooks export to."""
    files = []
    for notebook in module.notebooks:
        try:
            dotted = default_export(read_notebook(notebook))
        except (OSError, ValueError):
            continue
        if dotted:
            files.append(package_file(root, dotted))
    return [path for path in files if path.is_file()]
