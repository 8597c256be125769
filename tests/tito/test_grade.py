"""`tito grade` (issue 25, item 3): a class of three learners built from module 02's release, graded in one run.

* `complete` pasted every solution (notebook where `tito module start` leaves it, release/02_activations/);
* `mistakes` made two of the catalogue's mistakes (tito/misconceptions/activations.py), the rest right
  (notebook as `tito module release --out` writes it, 02_activations/);
* `hostile` (a loose notebook, activations.ipynb) tries, in its first check (ReLU.forward), to rewrite the
  checks and delete the package of every repository it can find from inside its process (its environment,
  sys.path, its working directory and the parents of all three; it writes what it found to a witness file),
  prints 30 MB (Sigmoid.forward), calls `os._exit` (Tanh.forward), loops forever (GELU.forward) and calls
  `sys.exit` (Softmax.forward) and kills its own process (LogSoftmax.forward). Expected: ReLU and Sigmoid
  passed (its attack reached only its own copy, which is restored before the checks after the hang), Tanh,
  Softmax and LogSoftmax error, GELU timeout.

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
import os, sys, shutil
from pathlib import Path
if hasattr(ReLU, "tried"):                         # once per process is enough
    return x.relu()
ReLU.tried = True
own = Path(os.environ["GRADE_TEST_WITNESS"]).parent
places = {Path(p) for p in [*os.environ.values(), *sys.path, os.getcwd()] if p and os.path.isabs(p)}
places |= {parent for place in list(places) for parent in place.parents}
found = []
for place in places:
    # Only grade's temporary copies and this test's own folder (the witness file's, which holds the instructor's
    # copy): a checkout found elsewhere, e.g. the real one through the parents of a venv kept inside it (a
    # documented limit of the isolation), must not be touched.
    ours = own in place.parents or "tito-grade-learner-" in str(place)
    if not ours or not (place / "settings.ini").is_file():
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
    "LogSoftmax.forward": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
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
                        "GELU.forward": "timeout", "Softmax.forward": "error", "LogSoftmax.forward": "error"}, \
        graded["text"]
    assert "SystemExit" in table["Softmax.forward"]["first_failure"]
    assert "os._exit" in table["Tanh.forward"]["first_failure"]
    assert "4 s" in table["GELU.forward"]["first_failure"]
    assert "SIGKILL" in table["LogSoftmax.forward"]["first_failure"]
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
    assert "[FAIL] hostile: 02_activations 2/6 passed (1 timeout, 3 error)" in text
    assert "ReLU.forward" in text.split("Per exercise")[1]
    assert graded["process"].stdout.decode("ascii")          # the terminal got it too, in ASCII (PYTHONIOENCODING)


# ---------------------------------------------------------------- reading what a learner wrote (no processes)


def _release_02():
    module = resolve_module(ROOT, MODULE)
    dev = read_notebook(module.notebook)
    return module, dev, release_notebook(dev, where=module.notebook.relative_to(ROOT).as_posix())


def _cell_of(notebook: dict, function: str) -> dict:
    return next(cell for cell in notebook["cells"] if f'raise NotImplementedError("{function}:' in cell_source(cell))


def test_only_the_code_written_in_place_of_a_stub_is_taken_and_edits_to_given_code_are_ignored(tmp_path):
    from tito.grade import learner_bodies

    module, dev, learner = _release_02()
    cell = _cell_of(learner, "Sigmoid.forward")
    source = replace_stub(cell_source(cell), "Sigmoid.forward", "y = x.sigmoid()\nreturn y")
    # The learner also edits given code: a docstring line and the class line of Tanh.
    cell["source"] = source.replace("class Tanh(Activation):", "class Tanh(Activation):  # mine now")
    gelu = _cell_of(learner, "GELU.forward")
    gelu["source"] = cell_source(gelu).replace("def extra_repr(self):", "def extra_repr(self):\n        import os")
    path = tmp_path / "activations.ipynb"
    write_notebook(learner, path)
    bodies = learner_bodies(ROOT, module.notebook, path)
    assert bodies["Sigmoid.forward"].kind == "code" and bodies["Sigmoid.forward"].text == "y = x.sigmoid()\nreturn y"
    assert {name: body.kind for name, body in bodies.items() if name != "Sigmoid.forward"} == \
        dict.fromkeys(set(EXERCISES) - {"Sigmoid.forward"}, "stub")


def test_a_block_that_is_not_python_is_an_error_its_neighbour_in_the_cell_is_still_graded_and_no_solution_leaks():
    from tito.grade import Body, filled_notebook

    module, dev, _ = _release_02()
    bodies = {"Sigmoid.forward": Body("code", "return x.sigmoid(("), "Tanh.forward": Body("code", "return (x * 1).tanh()")}
    filled = filled_notebook(module.notebook, bodies)
    assert bodies["Sigmoid.forward"].kind == "error" and "SyntaxError" in bodies["Sigmoid.forward"].note
    text = "\n".join(cell_source(cell) for cell in filled["cells"])
    assert "return (x * 1).tanh()" in text and 'raise NotImplementedError("Sigmoid.forward:' in text
    for block in solution_blocks(dev, module.notebook.name):                # no reference solution survives
        assert "\n".join(block.solution) not in text, block.function
    for cell in filled["cells"]:
        if "### BEGIN SOLUTION" in cell_source(cell):
            compile(cell_source(cell), "cell", "exec")              # every filled cell is valid Python


def test_a_notebook_whose_cell_ids_changed_is_still_read_and_a_deleted_function_is_a_stub(tmp_path):
    from tito.grade import learner_bodies

    module, dev, learner = _release_02()
    for cell in learner["cells"]:
        cell["id"] = "x" + str(cell.get("id"))
    cell = _cell_of(learner, "ReLU.forward")
    cell["source"] = replace_stub(cell_source(cell), "ReLU.forward", "return x.relu()")
    cell = _cell_of(learner, "GELU.forward")
    cell["source"] = "x = 1\n"                                    # the learner deleted the class
    path = tmp_path / "activations.ipynb"
    write_notebook(learner, path)
    bodies = learner_bodies(ROOT, module.notebook, path)
    assert bodies["ReLU.forward"].kind == "code" and bodies["ReLU.forward"].text == "return x.relu()"
    assert bodies["GELU.forward"].kind == "stub" and "no GELU.forward" in bodies["GELU.forward"].note


def test_notebooks_are_found_in_every_layout_and_a_folder_without_learners_is_refused(tmp_path):
    from tito.grade import Learner, find_notebooks, learner_folders
    from tito.repo import RepoError

    module, _, learner = _release_02()
    del learner["metadata"]["tito"]                              # matched by file name and folder
    for name, relative in [("a", f"modules/{MODULE}/activations.ipynb"), ("b", "activations_dev.ipynb"),
                           ("c", f"work/{MODULE}/activations.ipynb")]:
        write_notebook(learner, tmp_path / "class" / name / relative)
    (tmp_path / "class" / ".hidden").mkdir()
    folders = learner_folders(tmp_path / "class")
    assert [folder.name for folder in folders] == ["a", "b", "c"]
    for folder in folders:
        found = Learner(folder.name, folder)
        find_notebooks(ROOT, found, [module])
        assert list(found.notebooks) == [module.notebook], folder.name
    with pytest.raises(RepoError, match="no subfolders"):
        learner_folders(tmp_path / "class" / ".hidden")


def test_with_two_mistakes_a_failure_is_not_blamed_on_an_exercise_that_only_ran_alongside_them():
    """Module 11, a learner with a backward that loses repeated ids and a sin/cos table swapped: the backward's
    tests also run the lookup's forward, so by the spectrum alone the forward looks worst, and a failed
    assertion in a test that runs the forward and the sinusoidal table would be blamed on the forward."""
    from tito.grade import Body, ModuleRun, attribute, rows_for
    from tito.summary import exercises

    module = resolve_module(ROOT, "11")

    def failure(nodeid, message, exception="AssertionError"):
        return {"nodeid": nodeid, "when": "call", "exception": exception, "message": [message],
                "raised_in": None, "raised_through": [], "check": None, "line": None, "values": None}

    forward, backward = "EmbeddingBackward.forward", "EmbeddingBackward.backward"
    table, lookup = "create_sinusoidal_embeddings", "Embedding.forward"
    tests = {f"t_backward_{n}": {"outcome": "failed", "executed": [forward, backward]} for n in range(3)}
    tests |= {"t_manual": {"outcome": "failed", "executed": [forward, lookup, table]},
              "t_table": {"outcome": "failed", "executed": [table]},
              "t_lookup": {"outcome": "passed", "executed": [forward, lookup]}}
    failures = [failure(f"t_backward_{n}", "Misconception: repeated ids: row 3 received 1 of its 3 gradient rows",
                        "Misconception") for n in range(3)]
    failures += [failure("t_manual", "AssertionError: position 0 is [0, 1, 0, 1, ...]"),
                 failure("t_table", "Misconception: sin and cos swapped: column 2i is sin", "Misconception")]
    chosen = exercises(ROOT, [module])
    run = ModuleRun(module, chosen, {e.name: Body("code", "...") for e in chosen}, tests=tests, failures=failures)
    groups = attribute(run)
    assert {name: len(group) for name, group in groups.items()} == {backward: 3, table: 2}
    rows = {row.exercise: row for row in rows_for("bob", run)}
    assert (rows[backward].status, rows[backward].misconception) == ("failed", "repeated-ids-lost")
    assert (rows[table].status, rows[table].misconception) == ("failed", "sin-cos-swapped")
    assert rows[forward].status == rows[lookup].status == "passed"


def test_a_run_past_its_time_limit_is_killed_with_everything_it_started(tmp_path):
    import os

    from tito.grade import _run

    pid_file = tmp_path / "pid"
    code = ("import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
            f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
            "time.sleep(120)\n")
    started = time.monotonic()
    returncode, _ = _run([sys.executable, "-c", code], tmp_path, dict(os.environ), 3)
    assert returncode is None and time.monotonic() - started < 30
    child = int(pid_file.read_text())
    for _ in range(50):                                    # killed, then reaped by init
        status = Path(f"/proc/{child}/status")
        if not status.exists() or "\nState:\tZ" in status.read_text():
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the grandchild {child} outlived its process group's time limit")
