"""`tito docs` without building (issue 26): what a notebook page shows, how the API pages are read from
the package's source, and what the command says when the docs tools are missing. The build itself is
tested in tests/project/test_docs.py."""
from pathlib import Path

import nbformat

from tito import docs, main

ROOT = Path(__file__).resolve().parents[2]

SOLVED = '''#| export
def double(x):
    """TODO: twice `x`.
    APPROACH: multiply."""
    ### BEGIN SOLUTION
    return 2 * x
    ### END SOLUTION'''


def _notebook(tmp_path: Path) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# A module\n\nProse."),
        nbformat.v4.new_code_cell("#| default_exp things"),
        nbformat.v4.new_code_cell("#| hide\nimport secret_setup"),
        nbformat.v4.new_code_cell(SOLVED),
        nbformat.v4.new_code_cell("double(2)", outputs=[nbformat.v4.new_output("stream", text="4\n")],
                                  execution_count=3),
    ]
    path = tmp_path / "things_dev.ipynb"
    nbformat.write(notebook, path)
    return path


def _code(notebook: dict) -> list[str]:
    return [cell["source"] for cell in notebook["cells"] if cell["cell_type"] == "code"]


def test_a_page_shows_the_learners_stub_without_directives_hidden_cells_or_outputs(tmp_path):
    page = docs.page_notebook(_notebook(tmp_path), solutions=False)
    code = _code(page)
    assert len(code) == 2, code                         # the default_exp-only and the #| hide cells are gone
    assert "return 2 * x" not in code[0] and "BEGIN SOLUTION" not in code[0]
    assert 'raise NotImplementedError("double: implement this' in code[0]
    assert not any("#|" in source for source in code)
    assert all(not cell.get("outputs") and cell.get("execution_count") is None
               for cell in page["cells"] if cell["cell_type"] == "code")
    assert "".join(page["cells"][0]["source"]).startswith("# A module")   # no learner header cell before the title


def test_with_solutions_a_page_shows_the_dev_code(tmp_path):
    code = _code(docs.page_notebook(_notebook(tmp_path), solutions=True))
    assert "return 2 * x" in code[0]


def test_api_names_are_read_from_source_and_reexports_traced_to_their_definition():
    names = docs.read_names(ROOT, "tinytorch.models")
    assert "TransformerLM" in names.public and "TransformerLM" not in names.defined
    assert docs.defining_module(ROOT, "tinytorch.models", "TransformerLM") == "tinytorch.models.transformer"
    # POSITIONS reaches tinytorch.models through two re-exports
    assert docs.defining_module(ROOT, "tinytorch.models", "POSITIONS") == "tinytorch.text.embedding_options"
    assert docs.read_names(ROOT, "tinytorch.core.tensor").defined["Tensor"] == "class"
    assert "tinytorch.core.tensor" in docs.package_modules(ROOT)


def test_tito_docs_without_the_docs_extra_says_how_to_install_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(docs, "missing_tools", lambda: ["sphinx", "myst_nb"])
    assert main.main(["--repo", str(ROOT), "docs", "--out", str(tmp_path / "site")]) == 1
    said = capsys.readouterr().out
    assert "sphinx, myst_nb" in said and ".[docs]" in said
    assert not (tmp_path / "site").exists()


def test_constants_assigned_together_are_each_defined(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "shapes.py").write_text("__all__ = ['PAD', 'GAP_X', 'GAP_Y', 'ONE']\nPAD, GAP_X, GAP_Y = 8, 24, 36\n[ONE] = [1]\n")
    names = docs.read_names(tmp_path, "pkg.shapes")
    assert {name: names.defined.get(name) for name in names.public} == dict.fromkeys(["PAD", "GAP_X", "GAP_Y", "ONE"],
                                                                                       "data")
