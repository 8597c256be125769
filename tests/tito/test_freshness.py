"""Issue 25: tito says when the package is not what the notebooks say, before it runs the package.

A learner who exported their notebook and then changed it (`tito module reset`, an edit, a restore) without
exporting again runs a demo on the old export; one whose export still holds stubs runs a demo that reaches
one. Either way tito says which notebook and which command, in one line, before the demo's own output, and
a stub stops the demo with one line instead of a traceback. (tito.freshness; tito demo; tito test --module)
"""
from pathlib import Path

import pytest

from tito import freshness
from tito.release import cell_source, read_notebook, write_notebook
from tito.repo import Settings

from .test_roundtrip import copy_repository, tito

ROOT = Path(__file__).resolve().parents[2]


def package_files(root):
    return [path for path in sorted((root / Settings.read(root).lib_path).rglob("*.py")) if "__pycache__" not in path.parts]


def test_the_exported_package_matches_its_notebooks_cell_for_cell():
    # A check that cried wolf would be ignored: on a package freshly exported (the project checks it is)
    # there is nothing to say.
    assert freshness.check_files(ROOT, package_files(ROOT)) == []


def test_a_changed_exported_cell_or_a_removed_one_makes_its_file_stale(tmp_path):
    copy = copy_repository(tmp_path / "repo")
    target = copy / "tinytorch" / "core" / "losses.py"
    text = target.read_text(encoding="utf-8")
    assert freshness.check_files(copy, [target]) == []
    target.write_text(text.replace("return total / float(count)", "return total / float(count + 1)"), encoding="utf-8")
    (finding,) = freshness.check_files(copy, [target])
    assert finding.kind == "stale" and finding.notebook.name == "losses_dev.ipynb"
    line = freshness.describe(copy, finding)
    assert line.startswith("tinytorch/core/losses.py is older than modules/04_losses/losses_dev.ipynb")
    assert line.endswith("run `tito export`") or "export`" in line.rsplit(":", 1)[1], line


@pytest.fixture(scope="module")
def learner_copy(tmp_path_factory):
    """A repository copy where the learner started module 04 and exported their untouched notebook."""
    copy = copy_repository(tmp_path_factory.mktemp("fresh") / "repo")
    assert tito(copy, "module", "start", "04").returncode == 0
    exported = tito(copy, "module", "export", "04")
    assert exported.returncode == 0, exported.text
    return copy


def test_an_exported_release_names_every_stub_its_notebook_and_both_commands(learner_copy):
    target = learner_copy / "tinytorch" / "core" / "losses.py"
    (finding,) = freshness.check_files(learner_copy, [target])
    assert finding.kind == "stubs" and finding.learners
    assert set(finding.names) == {"_reduce", "cross_entropy", "mse_loss"}
    line = freshness.describe(learner_copy, finding)
    assert "release/04_losses/losses.ipynb" in line and "module export 04`" in line and "export` for the reference" in line
    assert "\n" not in line


def test_a_notebook_changed_after_its_export_is_reported_before_a_demo_runs(learner_copy, tmp_path):
    notebook = learner_copy / "release" / "04_losses" / "losses.ipynb"
    content = read_notebook(notebook)
    saved = notebook.read_bytes()
    cell = next(cell for cell in content["cells"] if "def mse_loss" in cell_source(cell))
    cell["source"] = cell_source(cell).replace('raise NotImplementedError("mse_loss', 'raise NotImplementedError("mse_loss ')
    write_notebook(content, notebook)
    try:
        findings = freshness.check_files(learner_copy, [learner_copy / "tinytorch" / "core" / "losses.py"])
        assert [finding.kind for finding in findings] == ["stale", "stubs"]
        result = tito(learner_copy, "demo", "positions", "--help")
        lines = result.text.splitlines()
        stale = [line for line in lines if "losses.py is older than release/04_losses/losses.ipynb" in line]
        assert len(stale) == 1 and "module export 04`" in stale[0], result.text
        assert result.text.index(stale[0]) < result.text.index("usage:"), "said before the demo's own output"
        tested = tito(learner_copy, "test", "--module", "04")
        assert tested.text.count("losses.py is older than release/04_losses/losses.ipynb") == 1, tested.text
        assert tested.text.index("is older than") < tested.text.index("pytest "), "said before the tests run"
    finally:
        notebook.write_bytes(saved)


def test_a_demo_that_reaches_a_stub_stops_with_one_line_and_no_traceback(learner_copy, tmp_path):
    result = tito(learner_copy, "demo", "positions", "--quick", "--steps", "1", "--out", str(tmp_path))
    assert result.returncode == 1, result.text
    assert "Traceback" not in result.text, result.text
    assert "still has 3 unimplemented exercises (_reduce, cross_entropy, mse_loss) from release/04_losses" in result.text
    stopped = [line for line in result.text.splitlines() if "demo stopped: " in line]
    assert len(stopped) == 1 and "is not implemented yet in the package (release/04_losses/losses.ipynb)" in stopped[0]
    assert "module export 04`" in stopped[0], stopped
