"""Where the repository is and which modules it has.

The module map is read from the filesystem and nowhere else: every folder
`modules/NN_name/` is module number NN called `name`, whose notebook is
`modules/NN_name/name_dev.ipynb` and whose pytest files are the `test_*.py`
files under `tests/name/` (and, in a flat layout, `tests/test_name.py` and
`tests/test_name_*.py`).

A learner's copy of a dev notebook `modules/NN_name/stem_dev.ipynb` is
`release/NN_name/stem.ipynb` (made by `tito module release/start`). It lives
outside `modules/` so that `nbdev_export`, which exports every notebook under
`modules/`, never sees it: two notebooks with the same `default_exp` would
overwrite each other's module.
"""
from __future__ import annotations

import configparser
import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path

SETTINGS_FILE = "settings.ini"
LEARNER_DIR = "release"  # learner notebooks: release/NN_name/stem.ipynb (generated, gitignored)
PROGRESS_FILE = Path(".tito") / "progress.json"  # the learner's progress (gitignored)
ROOT_ENV_VAR = "TITO_ROOT"
MODULE_FOLDER = re.compile(r"^(?P<number>\d+)_(?P<name>[A-Za-z][A-Za-z0-9_]*)$")

# The checkout this copy of tito lives in; used when cwd is outside any repo.
_OWN_CHECKOUT = Path(__file__).resolve().parent.parent


class RepoError(Exception):
    """A problem finding the repository or a module in it (exit code 2)."""


def _is_repo(path: Path) -> bool:
    settings = path / SETTINGS_FILE
    if not settings.is_file():
        return False
    try:
        return "lib_path" in _read_ini(settings)
    except configparser.Error:
        return False


def _read_ini(settings: Path) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(settings, encoding="utf-8")
    return dict(parser["DEFAULT"])


def find_root(explicit: str | os.PathLike | None = None) -> Path:
    """The repository root: `explicit`, else $TITO_ROOT, else the nearest
    parent of the current directory holding an nbdev settings.ini, else the
    checkout tito itself was loaded from."""
    for given, origin in ((explicit, "--repo"), (os.environ.get(ROOT_ENV_VAR), ROOT_ENV_VAR)):
        if given:
            path = Path(given).expanduser().resolve()
            if not _is_repo(path):
                raise RepoError(f"{origin} points at {path}, which has no nbdev {SETTINGS_FILE} with lib_path")
            return path
    cwd = Path.cwd().resolve()
    for candidate in (cwd, *cwd.parents):
        if _is_repo(candidate):
            return candidate
    if _is_repo(_OWN_CHECKOUT):
        return _OWN_CHECKOUT
    raise RepoError(
        f"no {SETTINGS_FILE} found in {cwd} or its parents; run tito inside the repository "
        f"or pass --repo PATH (or set {ROOT_ENV_VAR})"
    )


@dataclass(frozen=True)
class Settings:
    """The parts of settings.ini that tito needs."""

    lib_name: str
    lib_path: str
    nbs_path: str
    tst_flags: tuple[str, ...]

    @classmethod
    def read(cls, root: Path) -> "Settings":
        values = _read_ini(root / SETTINGS_FILE)
        return cls(
            lib_name=values.get("lib_name", "tinytorch"),
            lib_path=values.get("lib_path", values.get("lib_name", "tinytorch")),
            nbs_path=values.get("nbs_path", "modules"),
            tst_flags=tuple(values.get("tst_flags", "").split()),
        )


@dataclass(frozen=True)
class Module:
    """One learner module: the folder `modules/NN_name/`."""

    number: int
    name: str
    folder: Path

    @property
    def label(self) -> str:
        """The folder name, e.g. `11_embeddings`."""
        return self.folder.name

    @property
    def notebook(self) -> Path:
        """The module's main notebook, `name_dev.ipynb`."""
        return self.folder / f"{self.name}_dev.ipynb"

    @property
    def notebooks(self) -> list[Path]:
        """Every `*_dev.ipynb` in the folder, the main notebook first (a module
        may split its material, e.g. `10_tokenization/corpus_dev.ipynb`).
        Just the main notebook's path when there are none yet."""
        others = sorted(path for path in self.folder.glob("*_dev.ipynb") if path != self.notebook)
        present = [self.notebook] if self.notebook.is_file() else []
        return present + others or [self.notebook]


def discover_modules(root: Path) -> list[Module]:
    """All module folders under the notebooks path, sorted by number."""
    modules_dir = root / Settings.read(root).nbs_path
    if not modules_dir.is_dir():
        return []
    found = []
    for folder in modules_dir.iterdir():
        match = MODULE_FOLDER.match(folder.name)
        if folder.is_dir() and match:
            found.append(Module(int(match["number"]), match["name"], folder))
    return sorted(found, key=lambda module: (module.number, module.name))


def describe_modules(modules: list[Module]) -> str:
    if not modules:
        return "  (none: no modules/NN_name/ folders yet)"
    return "\n".join(f"  {module.label}" for module in modules)


def resolve_module(root: Path, reference: str) -> Module:
    """Find a module by name (`embeddings`), number (`11`, `011`) or folder
    (`11_embeddings`, `modules/11_embeddings/`)."""
    modules = discover_modules(root)
    wanted = Path(reference.strip()).name  # accept a folder path too
    if wanted.isdigit():
        matches = [module for module in modules if module.number == int(wanted)]
    else:
        matches = [module for module in modules if wanted in (module.name, module.label)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        names = ", ".join(module.label for module in matches)
        raise RepoError(f"module {reference!r} is ambiguous: {names}")
    suggestion = nearest_module(wanted, modules)
    hint = f"; did you mean {suggestion.name!r} ({suggestion.label})?" if suggestion is not None else ""
    raise RepoError(f"unknown module {reference!r}{hint}\navailable modules:\n{describe_modules(modules)}")


def nearest_module(wanted: str, modules: list[Module]) -> Module | None:
    """The module whose name or folder is closest to a misspelt `wanted` (difflib), if any is close."""
    spellings = {}
    for module in modules:
        spellings.setdefault(module.name.lower(), module)
        spellings.setdefault(module.label.lower(), module)
    close = difflib.get_close_matches(wanted.lower(), list(spellings), n=1, cutoff=0.6)
    return spellings[close[0]] if close else None


def module_test_files(root: Path, module: Module) -> list[Path]:
    """Every `test_*.py` under `tests/<name>/` (one folder per module, the
    repository's layout), plus the flat `tests/test_<name>.py` and
    `tests/test_<name>_*.py`, leaving out flat files that belong to another
    module whose name extends this one (a module `text` must not pick up
    `tests/test_text_utils.py` of a module `text_utils`)."""
    tests_dir = root / "tests"
    folder = tests_dir / module.name
    files = [*(folder.rglob("test_*.py") if folder.is_dir() else []),
             tests_dir / f"test_{module.name}.py", *tests_dir.glob(f"test_{module.name}_*.py")]
    longer_names = [
        other.name for other in discover_modules(root)
        if other.name != module.name and other.name.startswith(module.name + "_")
    ]

    def owned(path: Path) -> bool:
        return path.parent != tests_dir or not any(
            path.stem == f"test_{other}" or path.stem.startswith(f"test_{other}_") for other in longer_names
        )

    return sorted({path for path in files if path.is_file() and owned(path)})


def subprocess_env(root: Path, **extra: str) -> dict[str, str]:
    """Environment for child processes (pytest, notebooks, nbdev): the repo
    root first on PYTHONPATH so its working-copy package is the one imported,
    then the checkout holding tito (for `-m tito...` and the pytest plugin)."""
    env = dict(os.environ)
    paths = [str(root), str(_OWN_CHECKOUT)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.setdefault("MPLBACKEND", "Agg")  # notebooks may plot; never open a window
    env.update(extra)
    return env


def learner_notebook(root: Path, module: Module, dev_notebook: Path, folder: Path | None = None) -> Path:
    """Where the learner's copy of `dev_notebook` lives: `release/NN_name/stem.ipynb`
    (or `folder/NN_name/stem.ipynb`)."""
    stem = dev_notebook.stem
    stem = stem[: -len("_dev")] if stem.endswith("_dev") else stem
    return (folder or root / LEARNER_DIR) / module.label / f"{stem}.ipynb"


def package_file(root: Path, dotted: str) -> Path:
    """The file nbdev writes for `#| default_exp dotted`: `tinytorch/core/tensor.py` for `core.tensor`."""
    return root / Settings.read(root).lib_path / (dotted.replace(".", "/") + ".py")


_EXPORTED_FROM = re.compile(r"^# AUTOGENERATED! DO NOT EDIT! File to edit: (?P<path>.+?\.ipynb)\.?\s*$")


def exported_from(path: Path) -> Path | None:
    """The notebook a generated package file was exported from, read from nbdev's
    header line (which may follow a module docstring); None if there is none."""
    try:
        with path.open(encoding="utf-8") as handle:
            for _, line in zip(range(40), handle):
                match = _EXPORTED_FROM.match(line)
                if match:
                    return (path.parent / match["path"]).resolve()
                if line.startswith("# %%"):
                    break
    except (OSError, UnicodeDecodeError):
        pass
    return None
