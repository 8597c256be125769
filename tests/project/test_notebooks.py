"""The notebooks are the source: each must run top to bottom, be committed
without outputs, and match the generated package byte for byte."""
import json
from pathlib import Path

import pytest

from tito.notebooks import run_notebook
from tito.repo import Settings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = Settings.read(ROOT)
NOTEBOOKS = sorted((ROOT / SETTINGS.nbs_path).glob("*/*_dev.ipynb"))


def _notebook_id(path: Path) -> str:
    """`11_embeddings` for the module's own notebook (`tito test --module`
    and `-k 11_embeddings` select it by that), `folder/stem` for any other."""
    module_name = path.parent.name.split("_", 1)[-1]
    return path.parent.name if path.stem == f"{module_name}_dev" else f"{path.parent.name}/{path.stem}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_notebook_id)
def test_notebook_runs_top_to_bottom(notebook):
    result = run_notebook(notebook, root=ROOT)
    if not result.ok:
        pytest.fail(result.describe(), pytrace=False)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_notebook_id)
def test_notebook_is_committed_without_outputs(notebook):
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    dirty = [
        number for number, cell in enumerate(cells, start=1)
        if cell["cell_type"] == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)
    ]
    assert not dirty, (
        f"{notebook.relative_to(ROOT)}: cells {dirty} have outputs or execution counts; "
        "clear them (nbdev_clean --clear_all, or Clear All Outputs in Jupyter)"
    )


def test_package_matches_a_fresh_export():
    pytest.importorskip("nbdev", reason="the export check needs nbdev (pip install -e '.[dev]')")
    from tito.sync import check_sync

    drift = check_sync(ROOT)
    if drift:
        pytest.fail(
            f"{SETTINGS.lib_path}/ is out of sync with the notebooks; edit the notebook, then run `tito export`:\n"
            + "\n".join(drift.drift_lines(prefix=f"{SETTINGS.lib_path}/")),
            pytrace=False,
        )
