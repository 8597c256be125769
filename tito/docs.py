"""`tito docs`: the documentation site, built from the notebooks with Sphinx and MyST-NB.

nbdev 2's own `nbdev_docs` needs Quarto, a separate binary whose pip package (`quarto-cli`) downloads
it from GitHub while installing; the site is built with Sphinx + MyST-NB instead (both pip packages,
offline once installed). The configuration is `docs/conf.py`; every page is generated here, into a
scratch folder, from the repository as it is:

- `index.md`: README.md, the home page, followed by the tables of contents;
- `modules/NN_name/stem.ipynb`: every `*_dev.ipynb` of every module (`tito.repo.discover_modules`),
  as the learner gets it (the solution blocks replaced by their stubs, see `tito.release`) unless
  `solutions=True`; outputs cleared, nbdev's `#|` directive lines taken out, never executed;
- `api/*.md`: one page per module of the package, from its `__all__` (Sphinx's autodoc).

The site is written to the output folder (`_docs/` by default, gitignored); nothing generated is
written into the repository. Sphinx's warnings are collected: a broken reference is a warning, and
`strict=True` (`tito docs --strict`, the test) turns any warning into a failure.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tito.repo import Module, Settings, discover_modules, subprocess_env

DOCS_CONFIG_DIR = "docs"          # holds conf.py (the only configuration)
DEFAULT_OUT = "_docs"             # nbdev's doc_path in settings.ini; gitignored
NEEDED = ("sphinx", "myst_nb", "pydata_sphinx_theme")
_DIRECTIVE = re.compile(r"^\s*#\|")


class DocsError(Exception):
    """The site could not be generated (a notebook that cannot be read or released)."""


@dataclass
class DocsResult:
    """What one build produced."""

    out: Path
    returncode: int
    seconds: float
    warnings: list[str] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)       # document names of the module pages, in order
    api_pages: list[str] = field(default_factory=list)   # document names of the API pages
    log: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def missing_tools() -> list[str]:
    """The docs packages this Python cannot import (install them with the `docs` extra)."""
    return [name for name in NEEDED if importlib.util.find_spec(name) is None]


# ---------------------------------------------------------------------------
# Module pages


def page_name(module: Module, notebook: Path) -> str:
    """The document name of a notebook's page: `modules/11_embeddings/embeddings` for `embeddings_dev.ipynb`."""
    stem = notebook.stem[: -len("_dev")] if notebook.stem.endswith("_dev") else notebook.stem
    return f"modules/{module.label}/{stem}"


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def page_notebook(path: Path, solutions: bool) -> dict:
    """The notebook as its page shows it: the learner's version (or the solutions), without outputs and
    without nbdev's directive lines; cells marked `#| hide` are left out."""
    from tito.release import HEADER_CELL_ID, ReleaseError, release_notebook

    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DocsError(f"{path}: cannot read the notebook ({error})") from None
    if not solutions:
        try:
            notebook = release_notebook(notebook, where=path.name)
        except ReleaseError as error:
            raise DocsError(str(error)) from None
        notebook["cells"] = [cell for cell in notebook["cells"] if cell.get("id") != HEADER_CELL_ID]
    cells = []
    for cell in notebook.get("cells", []):
        cell = dict(cell)
        if cell.get("cell_type") == "code":
            lines = _source(cell).splitlines()
            directives = [line for line in lines if _DIRECTIVE.match(line)]
            if any(re.match(r"^\s*#\|\s*hide\b", line) for line in directives):
                continue
            kept = [line for line in lines if not _DIRECTIVE.match(line)]
            while kept and not kept[0].strip():
                kept.pop(0)
            if not kept:
                continue
            cell["source"] = "\n".join(kept)
            cell["outputs"] = []
            cell["execution_count"] = None
        cells.append(cell)
    notebook["cells"] = cells
    notebook.setdefault("metadata", {}).pop("tito", None)
    return notebook


# ---------------------------------------------------------------------------
# API pages


def package_modules(root: Path) -> list[str]:
    """Every importable module of the package with an `__all__`, dotted, sorted (packages first)."""
    package = Settings.read(root).lib_path
    found = []
    for path in sorted((root / package).rglob("*.py")):
        relative = path.relative_to(root).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts.pop()
        if any(part.startswith("_") for part in parts):
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"^__all__\s*=", text, re.MULTILINE):
            found.append(".".join(parts))
    return found


@dataclass
class ModuleNames:
    """What a package module's source says about its public names (read with `ast`, never imported)."""

    dotted: str
    public: list[str]                 # __all__, in order
    defined: dict[str, str]           # name -> "class", "function" or "data", for names assigned here
    imported: dict[str, str]          # name -> the dotted module it is imported from


def _module_file(root: Path, dotted: str) -> Path:
    path = root / dotted.replace(".", "/")
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def read_names(root: Path, dotted: str) -> ModuleNames:
    tree = ast.parse(_module_file(root, dotted).read_text(encoding="utf-8"))
    is_package = _module_file(root, dotted).name == "__init__.py"
    public, defined, imported = [], {}, {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            defined[node.name] = "class"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined[node.name] = "function"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            # `PAD, GAP_X, GAP_Y = 8, 24, 36` defines three names
            targets = [name for target in targets
                       for name in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target])]
            for target in targets:
                if isinstance(target, ast.Name):
                    if target.id == "__all__":
                        try:
                            public = [str(name) for name in ast.literal_eval(node.value)]
                        except ValueError:
                            pass
                    else:
                        defined[target.id] = "data"
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = dotted.split(".") if is_package else dotted.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                imported[alias.asname or alias.name] = source
    return ModuleNames(dotted, public, defined, imported)


def defining_module(root: Path, dotted: str, name: str) -> str | None:
    """The package module that defines `name`, following `from .x import name` chains; None if outside it."""
    seen = set()
    while dotted not in seen:
        seen.add(dotted)
        try:
            names = read_names(root, dotted)
        except (OSError, SyntaxError):
            return None
        if name in names.defined:
            return dotted
        if name not in names.imported:
            return None
        dotted = names.imported[name]
    return None


def _api_page(root: Path, dotted: str) -> str:
    names = read_names(root, dotted)
    data = [name for name in names.public if names.defined.get(name) == "data"]
    lines = [f"# `{dotted}`", "", "```{eval-rst}", f".. automodule:: {dotted}"]
    if data:  # autodoc leaves undocumented constants out; they are listed explicitly, once
        lines.append(f"   :exclude-members: {', '.join(data)}")
    lines += [""] + [f".. autodata:: {dotted}.{name}" for name in data]
    lines += ["```", ""]
    # Names this module re-exports from another of the package: linked to their one description there.
    elsewhere = [(name, defining_module(root, dotted, name)) for name in names.public if name not in names.defined]
    elsewhere = [(name, origin) for name, origin in elsewhere if origin is not None]
    if elsewhere:
        lines += ["Also importable from here, described where they are defined:", ""]
        lines += [f"- {{py:obj}}`{name} <{origin}.{name}>` from {{py:mod}}`{origin}`" for name, origin in elsewhere]
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# The source tree and the build


def _index_page(root: Path, module_pages: list[tuple[Module, list[str]]], api_pages: list[str]) -> str:
    readme = (root / "README.md").read_text(encoding="utf-8")
    lines = [readme.rstrip(), "", "## Contents", ""]
    for module, pages in module_pages:   # one table of contents per module, captioned like its folder
        lines += ["```{toctree}", f":caption: {module.number:02d} {module.name}", ":maxdepth: 1", "", *pages, "```", ""]
    lines += ["```{toctree}", ":caption: API reference", ":maxdepth: 1", "", "api/index", "```", ""]
    return "\n".join(lines)


def write_sources(root: Path, source: Path, solutions: bool = False) -> tuple[list[str], list[str]]:
    """Generate every page into `source`; returns the module pages' and the API pages' document names."""
    module_pages: list[tuple[Module, list[str]]] = []
    for module in discover_modules(root):
        pages = []
        for notebook in module.notebooks:
            if not notebook.is_file():
                continue
            name = page_name(module, notebook)
            target = source / f"{name}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(page_notebook(notebook, solutions), indent=1), encoding="utf-8")
            pages.append(name)
        if pages:
            module_pages.append((module, pages))

    api_pages = []
    dotted_names = package_modules(root)
    api_dir = source / "api"
    api_dir.mkdir(parents=True, exist_ok=True)
    for dotted in dotted_names:
        (api_dir / f"{dotted}.md").write_text(_api_page(root, dotted), encoding="utf-8")
        api_pages.append(f"api/{dotted}")
    index = ["# API reference", "",
             f"The public names of `{Settings.read(root).lib_name}` (each module's `__all__`), module by module.", "",
             "```{toctree}", ":maxdepth: 1", "", *[dotted for dotted in dotted_names], "```", ""]
    (api_dir / "index.md").write_text("\n".join(index), encoding="utf-8")
    api_pages.insert(0, "api/index")

    (source / "index.md").write_text(_index_page(root, module_pages, api_pages), encoding="utf-8")
    return [page for _, pages in module_pages for page in pages], api_pages


def build(root: Path, out: Path | None = None, solutions: bool = False, strict: bool = False) -> DocsResult:
    """Generate the pages and run Sphinx (html) into `out`; returns the warnings and the time taken."""
    out = Path(out) if out is not None else root / DEFAULT_OUT
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tinytorch-docs-") as scratch:
        source, doctrees, warnings_file = Path(scratch) / "src", Path(scratch) / "doctrees", Path(scratch) / "warnings.txt"
        source.mkdir()
        pages, api_pages = write_sources(root, source, solutions)
        _clear(root, out)
        command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-c", str(root / DOCS_CONFIG_DIR),
                   "-d", str(doctrees), "-w", str(warnings_file), "--keep-going",
                   *(["-W"] if strict else []), str(source), str(out)]
        process = subprocess.run(command, cwd=root, env=subprocess_env(root), capture_output=True, text=True)
        warnings = _warnings(warnings_file.read_text(encoding="utf-8") if warnings_file.is_file() else "", scratch)
    return DocsResult(out=out, returncode=process.returncode, seconds=time.perf_counter() - started,
                      warnings=warnings, pages=pages, api_pages=api_pages,
                      log=(process.stdout + process.stderr).replace(scratch, "<docs>"))


def _clear(root: Path, out: Path) -> None:
    """Empty `out` for a fresh build, but only if it is empty or a site Sphinx built (it has Sphinx's
    `.buildinfo`): `--out` pointing at a folder of other files is refused, never wiped."""
    if not out.exists():
        return
    resolved = out.resolve()
    if not out.is_dir() or resolved == root.resolve() or resolved in root.resolve().parents:
        raise DocsError(f"--out {out} is not a folder for the site (a file, or the repository or a parent of it)")
    if any(out.iterdir()) and not (out / ".buildinfo").is_file():
        raise DocsError(f"{out} holds files that are not a site built by `tito docs`; "
                        f"choose another --out or empty it first")
    shutil.rmtree(out)


def _warnings(text: str, scratch: str) -> list[str]:
    """One entry per warning (a warning may run over several lines), scratch paths shortened."""
    entries: list[str] = []
    for line in text.replace(scratch + "/src/", "").replace(scratch, "<docs>").splitlines():
        if not line.strip():
            continue
        if entries and line.startswith((" ", "\t")):
            entries[-1] += "\n" + line
        else:
            entries.append(line)
    return entries


def cmd_docs(root: Path, args, extra: list[str]) -> int:
    from tito import hints, ui

    missing = missing_tools()
    if missing:
        ui.status(False, f"this Python ({sys.executable}) cannot import {', '.join(missing)}, which `tito docs` "
                         f"needs; install the docs extra: {hints.editable_install(root, extras='docs')}")
        return 1
    out = Path(args.out).expanduser().resolve() if args.out else root / DEFAULT_OUT
    version = "the solutions" if args.solutions else "the learner's notebooks (solutions taken out)"
    ui.info(f"building the documentation site into {out} from {version}")
    sys.stdout.flush()
    try:
        result = build(root, out, solutions=args.solutions, strict=args.strict)
    except DocsError as error:
        ui.status(False, str(error))
        return 1
    for warning in result.warnings:
        print(f"    {warning}")
    if not result.ok:
        if result.log.strip() and not result.warnings:
            print(result.log.rstrip())
        ui.status(False, f"sphinx failed after {result.seconds:.0f} s"
                         + (f" ({len(result.warnings)} warnings, --strict)" if result.warnings else ""))
        return 1
    counts = f"{len(result.pages)} notebook pages, {len(result.api_pages)} API pages"
    said = f", {len(result.warnings)} warnings (above)" if result.warnings else ", no warnings"
    ui.status(True, f"built in {result.seconds:.0f} s: {counts}{said}; open {out / 'index.html'}")
    return 0
