"""The documentation site (`tito docs`, issue 26): built once with Sphinx + MyST-NB into a temporary folder,
then read back as a visitor would: every module notebook has a page, every internal link and anchor
resolves, no page shows an error cell or a solution, the API reference describes (or links) every public
name, and the search index is there. Skipped when the docs extra (sphinx, myst-nb, the theme) is absent."""
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tito import docs
from tito.repo import discover_modules, subprocess_env

ROOT = Path(__file__).resolve().parents[2]

for _name in docs.NEEDED:
    pytest.importorskip(_name, reason=f"{_name} not installed; the docs extra is: pip install -e '.[docs]'")


class Page(HTMLParser):
    """The ids (anchors), links, classes and text of one HTML page."""

    def __init__(self, path: Path):
        super().__init__()
        self.path, self.ids, self.links, self.classes, self.text = path, set(), [], set(), []
        self.feed(path.read_text(encoding="utf-8"))

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        self.classes.update((attrs.get("class") or "").split())
        for key in ("href", "src"):
            if attrs.get(key) is not None:
                self.links.append(attrs[key])

    def handle_data(self, data):
        self.text.append(data)

    @property
    def plain(self) -> str:
        return " ".join(" ".join(self.text).split())


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    result = docs.build(ROOT, tmp_path_factory.mktemp("docs") / "site")
    assert result.ok, f"sphinx failed:\n{result.log[-4000:]}"
    pages = {path.resolve(): Page(path) for path in result.out.rglob("*.html")
             if "_static" not in path.relative_to(result.out).parts}   # theme templates, not pages
    return result, pages


def _page(site, name: str) -> Page:
    result, pages = site
    path = (result.out / f"{name}.html").resolve()
    assert path in pages, f"no page {name}.html in the site"
    return pages[path]


def test_the_build_has_no_warnings(site):
    result, _ = site
    assert not result.warnings, "sphinx warned (a broken reference or markup):\n" + "\n".join(result.warnings)


def _first_heading(notebook: Path) -> str:
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return ""


def test_every_module_notebook_has_a_page_linked_from_the_home_page(site):
    home = _page(site, "index")
    notebooks = [(module, notebook) for module in discover_modules(ROOT) for notebook in module.notebooks
                 if notebook.is_file()]
    assert notebooks, "no module notebooks found"
    for module, notebook in notebooks:
        name = docs.page_name(module, notebook)
        page = _page(site, name)
        heading = re.sub(r"[`*]", "", _first_heading(notebook))
        assert heading and " ".join(heading.split()) in page.plain, f"{name}: the notebook's title {heading!r} is not shown"
        assert f"{name}.html" in home.links, f"the home page does not link to {name}.html"


def test_home_page_is_the_readme(site):
    home = _page(site, "index").plain
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for line in ("Quick start", "Modules", "Working through a module"):
        if f"## {line}" in readme:
            assert line in home
    first_sentence = re.sub(r"[`*\[\]]|\(http[^)]*\)", "", readme.split("\n\n")[1].split(".")[0])
    assert " ".join(first_sentence.split()) in home


def test_every_internal_link_and_anchor_resolves(site):
    _, pages = site
    broken, checked = [], 0
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:", "data:")):
                continue
            checked += 1
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.name}: {link} (no such file)")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in pages[target].ids:
                broken.append(f"{path.name}: {link} (no such anchor)")
    assert checked > 100, f"only {checked} internal links found: the pages were not read"
    assert not broken, f"{len(broken)} broken internal links:\n" + "\n".join(broken[:40])


def test_no_page_shows_an_error_cell_or_markup_error(site):
    _, pages = site
    bad = {"traceback", "output_error", "stderr", "system-message", "problematic"}
    for path, page in pages.items():
        shown = bad & page.classes
        assert not shown, f"{path.name} shows {sorted(shown)}"
        assert "Traceback (most recent call last)" not in page.plain, f"{path.name} shows a traceback"


def test_notebook_pages_are_the_learners_version(site):
    result, pages = site
    module_pages = [page for path, page in pages.items() if (result.out / "modules") in path.parents]
    assert module_pages
    for page in module_pages:
        assert "BEGIN SOLUTION" not in page.plain, f"{page.path.name} shows a solution"
        assert "#| export" not in page.plain, f"{page.path.name} shows nbdev's directives"
    assert any("implement this" in page.plain for page in module_pages), "no exercise stub shown on any page"


def test_api_reference_describes_or_links_every_public_name(site):
    for dotted in docs.package_modules(ROOT):
        page = _page(site, f"api/{dotted}")
        names = docs.read_names(ROOT, dotted)
        missing = [name for name in names.public if f"{dotted}.{name}" not in page.ids
                   and not any(link.endswith(f".{name}") and "#" in link for link in page.links)]
        assert not missing, f"api/{dotted}: {missing} in __all__ but neither described nor linked"


@pytest.mark.parametrize("name, module", [
    ("Tensor", "tinytorch.core.tensor"), ("Embedding", "tinytorch.text.embeddings"),
    ("EmbeddingLayer", "tinytorch.text.embeddings"), ("TransformerLM", "tinytorch.models.transformer"),
])
def test_api_reference_has_the_key_names(site, name, module):
    page = _page(site, f"api/{module}")
    assert f"{module}.{name}" in page.ids
    assert name in page.plain


def test_search_index_exists_and_knows_the_words(site):
    result, _ = site
    _page(site, "search")
    index = (result.out / "searchindex.js").read_text(encoding="utf-8")
    for word in ("embed", "tensor", "gradient"):
        assert f'"{word}' in index, f"searchindex.js has no term starting {word!r}"


def test_a_broken_reference_is_a_warning(tmp_path):
    """The configuration the site builds with turns a link to a missing page or a missing Python name into
    a warning (which the build test above fails on): the check cannot pass vacuously."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "index.md").write_text("# Home\n\nSee [a page](gone.md) and {py:obj}`tinytorch.no_such_name`.\n",
                                     encoding="utf-8")
    warnings = tmp_path / "warnings.txt"
    subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-c", str(ROOT / docs.DOCS_CONFIG_DIR),
                    "-w", str(warnings), str(source), str(tmp_path / "out")],
                   cwd=ROOT, env=subprocess_env(ROOT), capture_output=True, text=True, check=False)
    text = warnings.read_text(encoding="utf-8")
    assert "gone" in text and "tinytorch.no_such_name" in text, text


def test_tito_docs_never_wipes_a_folder_it_did_not_build(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(docs.DocsError, match="not a site built by `tito docs`"):
        docs.build(ROOT, out)
    assert (out / "notes.txt").read_text(encoding="utf-8") == "keep me"
