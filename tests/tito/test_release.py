"""Learner notebooks (`tito.release`): solutions out, stubs in, nothing else changed.

The first tests use small made-up notebooks; the last ones run on every dev
notebook in modules/ that has solution markers."""
import ast
import json
from pathlib import Path

import pytest

from tito.release import (
    BEGIN_MARKER, END_MARKER, ReleaseError, cell_source, find_stubs, read_notebook, release_notebook,
    solution_blocks, stubs_in_notebook,
)
from tito.repo import Settings

ROOT = Path(__file__).resolve().parents[2]
DEV_NOTEBOOKS = sorted((ROOT / Settings.read(ROOT).nbs_path).glob("*/*_dev.ipynb"))
MARKED_NOTEBOOKS = [path for path in DEV_NOTEBOOKS if BEGIN_MARKER in path.read_text(encoding="utf-8")]

OPS_CELL = '''\
#| export
class MulBackward(Function):
    @staticmethod
    def forward(ctx, a, b):
        """The product.

        TODO: return a * b.
        """
        ### BEGIN SOLUTION
        ctx.save_for_backward(a, b)
        return a * b
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        "TODO: the gradients."
        a, b = ctx.saved
        if grad is not None:
            ### BEGIN SOLUTION
            secret_product = grad * b
            return secret_product, grad * a
            ### END SOLUTION
        return None, None


def scale(x, factor):
    """TODO: multiply."""
    factor = float(factor)  # kept: not inside the markers
    ### BEGIN SOLUTION
    def helper(v):
        return v * factor
    return helper(x)
    ### END SOLUTION'''


def notebook(*cells):
    """A notebook from ("code" | "markdown", source) pairs, code cells with outputs."""
    made = []
    for number, (kind, source) in enumerate(cells):
        cell = {"cell_type": kind, "id": f"c{number}", "metadata": {}, "source": source}
        if kind == "code":
            cell.update(execution_count=number + 1,
                        outputs=[{"output_type": "stream", "name": "stdout", "text": "secret output\n"}])
        made.append(cell)
    return {"cells": made, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_blocks_become_stubs_at_their_indentation_and_the_rest_is_kept():
    dev = notebook(("code", "#| default_exp core.ops"), ("markdown", "# Ops\nWhy before how."), ("code", OPS_CELL))
    learner = release_notebook(dev, where="modules/07_ops/ops_dev.ipynb", command_hint="tito module complete 07")

    assert learner["cells"][0]["cell_type"] == "markdown" and "tito module complete 07" in learner["cells"][0]["source"]
    assert learner["metadata"]["tito"] == {"learner_notebook_of": "modules/07_ops/ops_dev.ipynb"}
    assert [cell["id"] for cell in learner["cells"][1:]] == ["c0", "c1", "c2"]
    assert learner["cells"][2] == dev["cells"][1]  # markdown untouched
    for cell in learner["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None

    source = cell_source(learner["cells"][3])
    assert '        raise NotImplementedError("MulBackward.forward: implement this (see TODO above)")' in source
    assert '            raise NotImplementedError("MulBackward.backward: implement this (see TODO above)")' in source
    assert '    raise NotImplementedError("scale: implement this (see TODO above)")' in source
    for kept in ['"""The product.', "TODO: return a * b.", "a, b = ctx.saved", "if grad is not None:",
                 "return None, None", "factor = float(factor)  # kept", "#| export"]:
        assert kept in source, kept
    for removed in ["ctx.save_for_backward", "secret_product", "def helper", "return helper(x)", "SOLUTION"]:
        assert removed not in source, removed
    ast.parse(source)
    assert stubs_in_notebook(learner) == ["MulBackward.forward", "MulBackward.backward", "scale"]
    assert dev["cells"][2]["outputs"], "release must not modify the dev notebook it was given"


def test_solution_blocks_name_their_function_and_keep_its_docstring():
    blocks = solution_blocks(notebook(("code", OPS_CELL)), "ops_dev.ipynb")
    assert [(b.cell_number, b.function, b.indent) for b in blocks] == [
        (1, "MulBackward.forward", " " * 8), (1, "MulBackward.backward", " " * 12), (1, "scale", " " * 4)]
    assert blocks[0].docstring.startswith("The product.") and "TODO" in blocks[2].docstring
    assert blocks[0].solution == ("        ctx.save_for_backward(a, b)", "        return a * b")


BAD_MARKERS = {
    "unclosed": ("def f():\n    ### BEGIN SOLUTION\n    return 1\n",
                 r"cell 1, line 2: `### BEGIN SOLUTION` is never closed"),
    "end without begin": ("def f():\n    return 1\n    ### END SOLUTION\n",
                          r"cell 1, line 3: `### END SOLUTION` without"),
    "nested": ("def f():\n    ### BEGIN SOLUTION\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n"
               "    ### END SOLUTION\n", r"cell 1, line 3: .*cannot be nested"),
    "misspelt": ("def f():\n    ## BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n",
                 r"cell 1, line 2: '## BEGIN SOLUTION' looks like a solution marker"),
    "lower case": ("def f():\n    # begin solution\n    return 1\n", r"cell 1, line 2: .*looks like a solution marker"),
    "outside a function": ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n",
                           r"cell 1, lines 1-3: solution markers must be inside a function"),
    "empty": ("def f():\n    ### BEGIN SOLUTION\n    # only a comment\n    ### END SOLUTION\n    return 1\n",
              r"cell 1, lines 2-4: the solution block holds no code"),
    "indented unlike": ("def f():\n    ### BEGIN SOLUTION\n    return 1\n        ### END SOLUTION\n",
                        r"cell 1, lines 2 and 4: the BEGIN and END markers must be indented alike"),
    "spans a dedent": ("def f():\n    if True:\n        ### BEGIN SOLUTION\n        x = 1\n    y = 2\n"
                       "        ### END SOLUTION\n", r"cell 1, line 5: solution code is indented less than its markers"),
    "not python": ("%time x = 1\ndef f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n",
                   r"cell 1: cannot parse the cell"),
}


@pytest.mark.parametrize("source, message", BAD_MARKERS.values(), ids=BAD_MARKERS.keys())
def test_bad_markers_are_errors_naming_notebook_cell_and_line(source, message):
    with pytest.raises(ReleaseError, match=r"^modules/07_x/x_dev\.ipynb, " + message):
        release_notebook(notebook(("code", source)), where="modules/07_x/x_dev.ipynb")


def test_markers_in_a_markdown_cell_are_an_error():
    dev = notebook(("code", "x = 1"), ("markdown", "```\n### BEGIN SOLUTION\n```"))
    with pytest.raises(ReleaseError, match=r"x_dev\.ipynb, cell 2: solution markers in a markdown cell"):
        release_notebook(dev, where="x_dev.ipynb")


def test_find_stubs_names_only_release_stubs(tmp_path):
    module = tmp_path / "ops.py"
    module.write_text(
        "class Function:\n    def forward(self):\n        raise NotImplementedError\n\n"
        "class MulBackward(Function):\n    def forward(self):\n"
        '        raise NotImplementedError("MulBackward.forward: implement this (see TODO above)")\n\n'
        'def other():\n    raise NotImplementedError("not supported: implement this some day? no")\n\n'
        'def scale():\n    raise NotImplementedError("scale: implement this (see TODO above)")\n'
    )
    assert find_stubs(module) == ["MulBackward.forward", "scale"]
    assert find_stubs(tmp_path / "missing.py") == []


# --- the real dev notebooks -------------------------------------------------


def test_some_dev_notebooks_have_solution_markers():
    assert {path.parent.name for path in MARKED_NOTEBOOKS} >= {"01_tensor", "05_autograd"}


def _trivial(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#") or stripped in {"pass", "return", "continue", "break", ")", "]",
                                                                     "}", "else:", "try:"}


@pytest.mark.parametrize("dev_path", MARKED_NOTEBOOKS, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_no_solution_text_survives_in_the_released_notebook(dev_path):
    dev = read_notebook(dev_path)
    blocks = solution_blocks(dev, dev_path.name)
    released = release_notebook(dev, where=dev_path.name)
    released_text = json.dumps(released, ensure_ascii=False)
    released_sources = "\n".join(cell_source(cell) for cell in released["cells"])

    # Text outside the markers (docstrings, prose, other functions) may legitimately repeat a solution
    # line, e.g. an APPROACH step quoting `dense[rows] = sums`; every other solution line must be gone.
    outside = []
    for number, cell in enumerate(dev["cells"], start=1):
        lines = cell_source(cell).splitlines()
        for block in sorted((b for b in blocks if b.cell_number == number), key=lambda b: -b.begin_line):
            del lines[block.begin_line - 1:block.end_line]
        outside.append("\n".join(lines))
    outside_text = "\n".join(outside)

    distinctive = {line.strip() for block in blocks for line in block.solution
                   if not _trivial(line) and line.strip() not in outside_text}
    assert len(distinctive) >= len(blocks), "too few distinctive solution lines for this check to mean anything"
    leaked = sorted(line for line in distinctive if line in released_sources)
    assert not leaked, f"solution lines survive in the learner notebook: {leaked}"
    assert BEGIN_MARKER not in released_text and END_MARKER not in released_text
    for cell in released["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None
            ast.parse(cell_source(cell))
    assert stubs_in_notebook(released) == [block.function for block in blocks]


@pytest.mark.parametrize("dev_path", MARKED_NOTEBOOKS, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_every_function_a_learner_writes_says_what_to_do(dev_path):
    blocks = solution_blocks(read_notebook(dev_path), dev_path.name)
    vague = [block.function for block in blocks if "TODO" not in block.docstring]
    assert not vague, f"{dev_path.name}: functions with solution markers but no TODO in their docstring: {vague}"
