"""`tito grade` (issue 25, item 3): a class of three learners built from module 02's release, graded in one run.

* `complete` pasted every solution (notebook where `tito module start` leaves it, release/02_activations/);
* `mistakes` made two of the catalogue's mistakes (tito/misconceptions/activations.py), the rest right
  (notebook as `tito module release --out` writes it, 02_activations/);
* `hostile` wrote right code for three exercises and, in the others, an infinite loop, `sys.exit`, `os._exit`,
  and an attempt to rewrite the checks and delete files in every repository it can find from inside its
  process (its environment, sys.path, its working directory and the parents of both), plus 30 MB of output
  (a loose notebook, activations.ipynb).

The instructor's repository is a temporary copy of this one (the hostile learner must not reach it, but if
it did, only the copy would suffer); it is hashed before and after. The grade runs `bin/tito grade` as an
instructor would, with short time limits so the run stays under a minute.
"""
import csv
import hashlib
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tito.misconceptions import mistakes_of, replace_stub
from tito.release import cell_source, read_notebook, release_notebook, solution_blocks, write_notebook
from tito.repo import resolve_module

ROOT = Path(__file__).resolve().parents[2]
MODULE = "02_activations"
EXERCISES = ["ReLU.forward", "Sigmoid.forward", "Tanh.forward", "GELU.forward", "Softmax.forward", "LogSoftmax.forward"]
PLANTED = {mistake.name: mistake for mistake in mistakes_of("activations") if mistake.name in ("relu-numpy", "sigmoid-is-tanh")}

# What the hostile learner writes instead of each solution (the others: the solution).
HOSTILE = {
    "ReLU.forward": '''
import os, sys, shutil, tempfile
from pathlib import Path
if hasattr(ReLU, "tried"):                         # once per process is enough
    return x.relu()
ReLU.tried = True
places = {Path(p) for p in [*os.environ.values(), *sys.path, os.getcwd()] if p and os.path.isabs(p)}
places |= {parent for place in list(places) for parent in place.parents}
found = []
for place in places:
    # Only under the temporary folder: if the grader leaked a real path, this test must not destroy it.
    if not str(place).startswith(tempfile.gettempdir()) or not (place / "settings.ini").is_file():
        continue
    found.append(str(place))
    try:
        for test in (place / "tests").rglob("test_*.py"):
            test.write_text("def test_nothing():\\n    pass\\n")     # every check passes, in its copy too
        if place.resolve() != Path.cwd().resolve():
            shutil.rmtree(place / "tinytorch", ignore_errors=True)
            (place / "HACKED").write_text("a hostile learner was here")
    except OSError:
        pass
with open(os.environ["GRADE_TEST_WITNESS"], "a") as witness:
    witness.write("\\n".join(found) + "\\n")
return x.relu()
''',
    "Sigmoid.forward": 'if not hasattr(Sigmoid, "said"):\n    Sigmoid.said = print("x" * 30_000_000)\nreturn x.sigmoid()',
    "GELU.forward": "while True:\n    pass",
    "Softmax.forward": "import sys\nsys.exit(3)",
    "Tanh.forward": "import os\nos._exit(7)",
}


def _hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _learner_notebook(instructor: Path, bodies: dict[str, str]) -> dict:
    """The release of module 02 with each stub replaced: by `bodies[exercise]`, else by the solution."""
    module = resolve_module(instructor, MODULE)
    dev = read_notebook(module.notebook)
    learner = release_notebook(dev, where=module.notebook.relative_to(instructor).as_posix())
    cells = {cell.get("id"): cell for cell in learner["cells"]}
    for block in solution_blocks(dev, module.notebook.name):
        cell = cells[dev["cells"][block.cell_number - 1]["id"]]
        body = bodies.get(block.function, "\n".join(line[len(block.indent):] for line in block.solution))
        cell["source"] = replace_stub(cell_source(cell), block.function, body)
    return learner


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from .test_roundtrip import copy_repository

    base = tmp_path_factory.mktemp("grade")
    instructor = copy_repository(base / "instructor")
    (instructor / ".git").mkdir(exist_ok=True)                     # a repository the learner might look for
    klass = base / "class"
    write_notebook(_learner_notebook(instructor, {}), klass / "complete" / "release" / MODULE / "activations.ipynb")
    mistakes = {mistake.exercise: mistake.replacement for mistake in PLANTED.values()}
    write_notebook(_learner_notebook(instructor, mistakes), klass / "mistakes" / MODULE / "activations.ipynb")
    write_notebook(_learner_notebook(instructor, HOSTILE), klass / "hostile" / "activations.ipynb")
    before = _hash(instructor)
    started = time.monotonic()
    process = subprocess.run(
        [sys.executable, str(instructor / "bin" / "tito"), "grade", str(klass), "--module", "02",
         "--test-timeout", "4", "--timeout", "60", "--out", str(base / "out")],
        cwd=instructor, env={**_env(), "TITO_ROOT": str(instructor), "PYTHONPATH": str(instructor),
                             "PYTHONIOENCODING": "ascii", "GRADE_TEST_WITNESS": str(base / "witness.txt")},
        stdin=subprocess.DEVNULL, capture_output=True, timeout=240)
    seconds = time.monotonic() - started
    text = process.stdout.decode("ascii") + process.stderr.decode("utf-8", errors="replace")
    with (base / "out" / "grades.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    witness = base / "witness.txt"
    return {"process": process, "text": text, "witness": witness.read_text().split() if witness.is_file() else None, "rows": rows, "seconds": seconds, "base": base,
            "instructor": instructor, "before": before, "after": _hash(instructor),
            "summary": (base / "out" / "summary.txt").read_text(encoding="ascii")}


def _env() -> dict:
    import os

    return {key: value for key, value in os.environ.items() if key not in ("TITO_ROOT", "PYTHONPATH")}


def _table(graded, learner: str) -> dict[str, dict]:
    return {row["exercise"]: row for row in graded["rows"] if row["learner"] == learner}


def test_the_run_succeeds_writes_one_row_per_learner_and_exercise_and_takes_reasonable_time(graded):
    print(graded["text"])
    assert graded["process"].returncode == 0, graded["text"]
    assert [row["learner"] for row in graded["rows"]] == ["complete"] * 6 + ["hostile"] * 6 + ["mistakes"] * 6
    assert [row["exercise"] for row in graded["rows"]] == EXERCISES * 3, graded["text"]
    assert {row["module"] for row in graded["rows"]} == {MODULE}
    assert list(graded["rows"][0]) == ["learner", "module", "exercise", "status", "misconception", "first_failure"]
    assert graded["seconds"] < 120, f"grading three learners of module 02 took {graded['seconds']:.0f} s"


def test_the_complete_learner_passes_everything(graded):
    table = _table(graded, "complete")
    assert {name: row["status"] for name, row in table.items()} == dict.fromkeys(EXERCISES, "passed"), graded["text"]
    assert all(row["misconception"] == "" for row in table.values())


def test_two_planted_mistakes_fail_with_their_misconception_named_and_nothing_else_fails(graded):
    table = _table(graded, "mistakes")
    expected = dict.fromkeys(EXERCISES, "passed") | {"ReLU.forward": "failed", "Sigmoid.forward": "failed"}
    assert {name: row["status"] for name, row in table.items()} == expected, graded["text"]
    assert table["ReLU.forward"]["misconception"] == "relu-numpy"
    assert table["Sigmoid.forward"]["misconception"] == "sigmoid-is-tanh"
    assert "no gradient" in table["ReLU.forward"]["first_failure"].lower() or \
        "tanh" in table["Sigmoid.forward"]["first_failure"].lower()
    assert "relu-numpy" in graded["summary"] and "sigmoid-is-tanh" in graded["summary"]


def test_the_hostile_learner_gets_a_timeout_errors_and_passes_and_harms_nobody(graded):
    table = _table(graded, "hostile")
    statuses = {name: row["status"] for name, row in table.items()}
    # The attack ran, in its first check; the checks after the hang ran from a restored copy, not the
    # rewritten one (else Softmax's and Tanh's checks would have been `test_nothing` and passed).
    assert graded["witness"], "the hostile learner's file attack never ran"
    assert all("tito-grade-learner-" in place for place in graded["witness"]), graded["witness"]
    assert statuses == {"ReLU.forward": "passed", "Sigmoid.forward": "passed", "Tanh.forward": "error",
                        "GELU.forward": "timeout", "Softmax.forward": "error", "LogSoftmax.forward": "passed"}, \
        graded["text"]
    assert "SystemExit" in table["Softmax.forward"]["first_failure"]
    assert "os._exit" in table["Tanh.forward"]["first_failure"]
    assert "4 s" in table["GELU.forward"]["first_failure"]
    # Nothing outside its temporary copy changed: the instructor's repository, the other learners' work.
    assert graded["after"] == graded["before"], "the instructor's repository changed during grading"
    assert not (graded["instructor"] / "HACKED").exists()
    assert not list(graded["base"].rglob("HACKED")), list(graded["base"].rglob("HACKED"))
    assert (graded["base"] / "class" / "mistakes" / MODULE / "activations.ipynb").is_file()


def test_the_summary_is_ascii_and_names_what_failed(graded):
    text = graded["summary"]
    assert text.isascii()
    assert "[OK] complete: 02_activations 6/6 passed" in text
    assert "[FAIL] mistakes: 02_activations 4/6 passed (2 failed)" in text
    assert "[FAIL] hostile: 02_activations 3/6 passed (1 timeout, 2 error)" in text
    assert "ReLU.forward" in text.split("Per exercise")[1]
    assert graded["process"].stdout.decode("ascii")          # the terminal got it too, in ASCII (PYTHONIOENCODING)
