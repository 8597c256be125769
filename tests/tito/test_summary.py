"""The learner's summary after `tito test --module` / `tito module complete` (tito.summary, tito.pytest_plugin).

* attribution: a failure raised inside an exercise function is that function's; a failed assert
  in a test goes to the exercise that ran in failing tests and least in passing ones;
* the plugin, on a small package in tmp_path: the raising function, the failing statement, both
  sides of a failed comparison and the rows that differ;
* the issue's acceptance case, on the real module 11 in a temporary copy of the repository: a
  learner whose only mistake is `dense[ids] += grad` in `EmbeddingBackward.backward` gets a short
  output whose summary names that function first and shows expected and actual rows.
"""
import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tito.release import cell_source, read_notebook, write_notebook
from tito.repo import Module, discover_modules, learner_notebook
from tito.summary import Exercise, attribute, render

ROOT = Path(__file__).resolve().parents[2]


def exercise(name, order):
    module = Module(11, "embeddings", Path("modules/11_embeddings"))
    return Exercise(name, module, Path("modules/11_embeddings/embeddings_dev.ipynb"), Path("x.py"), order)


CHOSEN = [exercise("EmbeddingBackward.forward", 0), exercise("EmbeddingBackward.backward", 1),
          exercise("EmbeddingBagBackward.backward", 2)]


def failure(nodeid, raised_in=None, **extra):
    return {"nodeid": nodeid, "when": "call", "exception": "AssertionError", "message": ["AssertionError: assert False"],
            "raised_in": raised_in, "check": "assert ok", "line": 3, "values": None, **extra}


# ---------------------------------------------------------------- attribution


def test_a_wrong_value_is_blamed_on_the_exercise_that_ran_mostly_in_failing_tests():
    tests = {
        "t.py::test_lookup": {"outcome": "passed", "executed": ["EmbeddingBackward.forward"]},
        "t.py::test_unique_ids": {"outcome": "passed",
                                  "executed": ["EmbeddingBackward.forward", "EmbeddingBackward.backward"]},
        "t.py::test_repeated_ids": {"outcome": "failed",
                                    "executed": ["EmbeddingBackward.forward", "EmbeddingBackward.backward"]},
        "t.py::test_bag_vs_embedding": {"outcome": "failed", "executed": [
            "EmbeddingBackward.forward", "EmbeddingBackward.backward", "EmbeddingBagBackward.backward"]},
        "t.py::test_bag_alone": {"outcome": "passed", "executed": ["EmbeddingBagBackward.backward"]},
    }
    failures = [failure("t.py::test_repeated_ids"), failure("t.py::test_bag_vs_embedding")]
    groups = attribute(failures, tests, CHOSEN)
    assert list(groups) == ["EmbeddingBackward.backward"]
    assert "ran in 2 failing and 1 passing tests" in groups["EmbeddingBackward.backward"][0]["how"]


def test_raised_inside_wins_groups_follow_the_notebook_order_and_the_rest_is_unattributed():
    tests = {"t.py::a": {"outcome": "failed", "executed": ["EmbeddingBagBackward.backward"]},
             "t.py::b": {"outcome": "failed", "executed": ["EmbeddingBackward.forward"]},
             "t.py::c": {"outcome": "failed", "executed": []}}
    failures = [failure("t.py::a", raised_in="EmbeddingBagBackward.backward"),
                failure("t.py::b", raised_in="EmbeddingBackward.forward"), failure("t.py::c")]
    groups = attribute(failures, tests, CHOSEN)
    assert list(groups) == ["EmbeddingBackward.forward", "EmbeddingBagBackward.backward", None]
    assert groups["EmbeddingBackward.forward"][0]["how"] == "raised inside it"


def test_reference_code_outside_the_candidates_is_never_blamed():
    tests = {"t.py::a": {"outcome": "failed", "executed": ["segment_sum"]}}
    assert list(attribute([failure("t.py::a", raised_in="segment_sum")], tests, CHOSEN)) == [None]


def test_render_names_the_function_the_check_the_values_and_how_to_see_more():
    values = {"actual": {"expr": "emb.weight.grad", "value": "[[0. 0.] [1. 1.]]"},
              "expected": {"expr": "expected", "value": "[[0. 0.] [2. 2.]]"},
              "rows": [{"index": 1, "actual": "[1. 1.]", "expected": "[2. 2.]"}], "rows_summary": "1 of 2 rows differ"}
    tests = {"tests/test_e.py::test_repeated[True]": {"outcome": "failed", "executed": ["EmbeddingBackward.backward"]}}
    lines = render(CHOSEN[0].module, "tito", [failure("tests/test_e.py::test_repeated[True]", values=values)],
                   tests, CHOSEN)
    text = "\n".join(lines)
    assert "1. EmbeddingBackward.backward" in text
    assert "expected expected" in text and "[1] expected [2. 2.]" in text and "[1] actual   [1. 1.]" in text
    assert "tito test --module 11 -- -x -k test_repeated\n" in text + "\n"
    assert render(CHOSEN[0].module, "tito", [], tests, CHOSEN) == []


def test_a_forward_proven_wrong_by_its_own_check_takes_the_blame_from_the_backward_that_reads_its_state():
    # The forward saved its inputs swapped: every gradient check that ran both fails, and by the spectrum
    # alone the backward (run in fewer passing tests) looks guiltier. The forward's own check ran it alone.
    chosen = [exercise("MulBackward.forward", 0), exercise("MulBackward.backward", 1)]
    both = ["MulBackward.forward", "MulBackward.backward"]
    tests = {"t.py::test_forward_alone": {"outcome": "failed", "executed": ["MulBackward.forward"]},
             **{f"t.py::test_product{i}": {"outcome": "passed", "executed": ["MulBackward.forward"]} for i in range(10)},
             "t.py::test_backward_alone": {"outcome": "passed", "executed": ["MulBackward.backward"]},
             **{f"t.py::test_grad{i}": {"outcome": "failed", "executed": both} for i in range(3)}}
    failures = [failure(f"t.py::test_grad{i}") for i in range(3)] + [failure("t.py::test_forward_alone")]
    spectrum_only = {name: test for name, test in tests.items() if name != "t.py::test_forward_alone"}
    assert list(attribute([dict(f) for f in failures[:3]], spectrum_only, chosen)) == ["MulBackward.backward"]
    groups = attribute(failures, tests, chosen)
    assert list(groups) == ["MulBackward.forward"] and len(groups["MulBackward.forward"]) == 4
    assert "its own check fails (test_forward_alone), and it ran here" in groups["MulBackward.forward"][0]["how"]


def test_a_check_marked_isolates_proves_its_exercise_and_the_earliest_proven_one_is_blamed():
    chosen = [exercise("_reduce", 0), exercise("cross_entropy", 1)]
    both = ["_reduce", "cross_entropy"]
    tests = {"t.py::test_stable": {"outcome": "failed", "executed": both, "isolates": ["cross_entropy"]},
             "t.py::test_mean": {"outcome": "failed", "executed": both},
             "t.py::test_reduce_alone": {"outcome": "passed", "executed": ["_reduce"]}}
    groups = attribute([failure("t.py::test_stable"), failure("t.py::test_mean")], tests, chosen)
    assert list(groups) == ["cross_entropy"]
    # When _reduce's own check fails too, it is the earlier one: a later exercise is never blamed for it.
    tests["t.py::test_reduce_alone"]["outcome"] = "failed"
    groups = attribute([failure("t.py::test_stable"), failure("t.py::test_mean"), failure("t.py::test_reduce_alone")],
                       tests, chosen)
    assert list(groups) == ["_reduce"] and len(groups["_reduce"]) == 3


def test_a_stub_keeps_its_own_failures_even_when_an_earlier_exercise_is_proven_wrong():
    chosen = [exercise("init_table", 0), exercise("Embedding.forward", 1)]
    tests = {"t.py::test_init": {"outcome": "failed", "executed": ["init_table"]},
             "t.py::test_lookup": {"outcome": "failed", "executed": ["init_table", "Embedding.forward"]}}
    stub = failure("t.py::test_lookup", raised_in="Embedding.forward", exception="NotImplementedError",
                   message=["NotImplementedError: Embedding.forward: implement this (see TODO above)"])
    groups = attribute([failure("t.py::test_init"), stub], tests, chosen)
    assert list(groups) == ["init_table", "Embedding.forward"]


def named(text):
    """The words of a summary, in order (function names stand alone between spaces, commas and brackets)."""
    import re

    return [word.rstrip(":.") for word in re.split(r"[\s,()]+", text) if word]


def test_an_untouched_release_names_every_stub_first_one_first_even_those_no_check_reached():
    names = ["table_grad", "EmbeddingBackward.forward", "EmbeddingBackward.backward", "init_table", "Embedding.__init__",
             "Embedding.forward", "Embedding.attend", "create_sinusoidal_embeddings", "EmbeddingLayer.forward",
             "quantize_rows", "EmbeddingBagBackward.backward", "FactorizedEmbedding.__init__", "skipgram_step"]
    chosen = [exercise(name, order) for order, name in enumerate(names)]
    # Only some stubs are reached by a check (an earlier stub raises first in the others' tests).
    reached = names[1::3]
    tests = {f"t.py::test_{name}": {"outcome": "failed", "executed": [name]} for name in reached}
    failures = [failure(f"t.py::test_{name}", raised_in=name, exception="NotImplementedError",
                        message=[f"NotImplementedError: {name}: implement this (see TODO above)"]) for name in reached]
    lines = render(chosen[0].module, "tito", failures, tests, chosen, stubs=names)
    text = "\n".join(lines)
    assert lines[0].startswith(f"What to fix ({len(reached)} failing tests, 13 functions not implemented yet)")
    first = next(line for line in lines if line.startswith("  1. "))
    assert first.startswith("  1. table_grad  (") and "not implemented yet" in first
    words = named(text)
    assert set(names) <= set(words), f"not named: {set(names) - set(words)}\n{text}"
    import re

    detailed = re.findall(r"^  \d+\. (\S+)", text, re.MULTILINE)
    assert len(detailed) >= 3 and detailed == names[:len(detailed)], "the first ones in detail, in teaching order"
    assert "  1. table_grad  (" in "\n".join(render(chosen[0].module, "tito", [], {}, chosen, stubs=names[:1]))
    # A module with three times as many exercises still fits one screen, every one of them named.
    from tito.summary import SCREEN_COLUMNS, SCREEN_LINES, boxed

    many = [f"{name}{copy}" for copy in ("", "_b", "_c") for name in names]
    chosen = [exercise(name, order) for order, name in enumerate(many)]
    box = boxed(render(chosen[0].module, "tito", failures, tests, chosen, stubs=many))
    assert len(box) <= SCREEN_LINES and all(len(line) <= SCREEN_COLUMNS for line in box), "\n".join(box)
    assert set(many) <= set(named("\n".join(box))), "\n".join(box)


def test_the_summary_fits_one_screen_in_its_box_however_many_functions_fail():
    from tito.summary import SCREEN_COLUMNS, SCREEN_LINES, boxed

    names = [f"Layer{i}.forward" for i in range(20)]
    chosen = [exercise(name, order) for order, name in enumerate(names)]
    values = {"actual": {"expr": "got", "value": "[" + "1.2345 " * 30 + "]"},
              "expected": {"expr": "expected", "value": "[" + "2.3456 " * 30 + "]"},
              "rows": [{"index": i, "actual": "[1.] " * 30, "expected": "[2.] " * 30} for i in range(3)],
              "rows_summary": "3 of 9 rows differ"}
    tests = {f"t.py::test_{name}": {"outcome": "failed", "executed": [name]} for name in names}
    failures = [failure(f"t.py::test_{name}", values=values, check="assert np.allclose(got, expected)  # " + "x" * 200)
                for name in names]
    box = boxed(render(chosen[0].module, "tito", failures, tests, chosen))
    assert len(box) <= SCREEN_LINES and all(len(line) <= SCREEN_COLUMNS for line in box), "\n".join(box)
    assert box[0] == box[-1] == "=" * SCREEN_COLUMNS
    text = "\n".join(box)
    assert "  1. Layer0.forward" in text and "expected expected" in text and "actual   got" in text
    assert all(name in text for name in names), "the ones not shown in detail are still named"
    assert "then: " in text and text.rstrip("=\n").splitlines()[-1].startswith(("More:", "    "))


# ---------------------------------------------------------------- the plugin, on a tiny package

PACKAGE = '''
import numpy as np

class Scatter:
    @staticmethod
    def add(ids, values, size):
        out = np.zeros((size, values.shape[1]))
        out[ids] += values                     # the bug: repeated ids keep one row
        return out

def must_be_positive(x):
    if x <= 0:
        raise ValueError(f"x must be positive, got {x}")
    return x
'''

TESTS = '''
import numpy as np
from mypkg.core import Scatter, must_be_positive

def test_scatter_unique_ids():
    assert np.allclose(Scatter.add(np.array([0, 1]), np.ones((2, 2)), 3), [[1, 1], [1, 1], [0, 0]])

def test_scatter_repeated_ids():
    got = Scatter.add(np.array([0, 0, 2]), np.ones((3, 2)), 3)
    expected = np.array([[2.0, 2.0], [0.0, 0.0], [1.0, 1.0]])
    assert np.allclose(got, expected)

def test_positive():
    assert must_be_positive(-1) == 1
'''


def test_the_plugin_reports_where_it_failed_what_ran_and_both_values(tmp_path):
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "core.py").write_text(PACKAGE)
    (tmp_path / "test_mypkg.py").write_text(TESTS)
    listing = tmp_path / "exercises.json"
    listing.write_text(json.dumps([{"name": name, "file": str(tmp_path / "mypkg" / "core.py")}
                                   for name in ("Scatter.add", "must_be_positive")]))
    report = tmp_path / "report.json"
    env = {**os.environ, "TITO_PYTEST_REPORT": str(report), "TITO_EXERCISES": str(listing),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    process = subprocess.run([sys.executable, "-m", "pytest", "-p", "tito.pytest_plugin", "-q", "--tb=no", "-rN",
                              "-p", "no:cacheprovider", "test_mypkg.py"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert process.returncode == 1, process.stdout + process.stderr
    data = json.loads(report.read_text())
    assert data["counts"]["failed"] == 2 and data["counts"]["passed"] == 1
    assert data["tests"]["test_mypkg.py::test_scatter_unique_ids"] == {"executed": ["Scatter.add"], "outcome": "passed"}
    assert data["tests"]["test_mypkg.py::test_scatter_repeated_ids"]["outcome"] == "failed"

    by_test = {entry["nodeid"].split("::")[1]: entry for entry in data["failures"]}
    repeated = by_test["test_scatter_repeated_ids"]
    assert repeated["raised_in"] is None and repeated["check"] == "assert np.allclose(got, expected)"
    values = repeated["values"]
    assert values["actual"]["expr"] == "got" and values["expected"]["expr"] == "expected"
    assert values["rows_summary"] == "1 of 3 rows differ"
    assert values["rows"] == [{"index": 0, "actual": "[1. 1.]", "expected": "[2. 2.]"}]

    positive = by_test["test_positive"]
    assert positive["raised_in"] == "must_be_positive" and positive["exception"] == "ValueError"
    assert positive["message"] == ["ValueError: x must be positive, got -1"]


def test_the_plugin_does_nothing_without_tito(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert 1 == 2\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith("TITO_")}
    env["PYTHONPATH"] = str(ROOT)
    process = subprocess.run([sys.executable, "-m", "pytest", "-p", "tito.pytest_plugin", "-p", "no:cacheprovider",
                              "test_one.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert process.returncode == 1 and "assert 1 == 2" in process.stdout    # pytest's own report, untouched
    assert not list(tmp_path.glob("*.json"))


# ---------------------------------------------------------------- acceptance: module 11

# The learner's EmbeddingBackward.backward: right for sparse gradients, but the dense gradient is
# `dense[ids] += grad`, which keeps one gradient per repeated id instead of their sum. Written as a
# wrapper around the notebook's own solution so that it follows any change of the notebook's ctx layout.
LEARNERS_BACKWARD = '''
    @staticmethod
    def backward(ctx, grad):
        (correct,) = EmbeddingBackward._solution_backward(ctx, grad)
        if not isinstance(correct, np.ndarray):
            return (correct,)
        saved = list(ctx.saved)
        while not any(isinstance(x, np.ndarray) and x.dtype.kind in "iu" for x in saved):
            saved = [y for x in saved for y in (x if isinstance(x, (tuple, list)) else [x])]
        ids = next(x for x in saved if isinstance(x, np.ndarray) and x.dtype.kind in "iu").reshape(-1)
        dense = np.zeros_like(correct)
        dense[ids] += grad.reshape(len(ids), correct.shape[-1]).astype(dense.dtype)
        dense[~correct.any(axis=-1)] = 0
        return (dense,)
'''


def break_embedding_backward(path: Path) -> None:
    notebook = read_notebook(path)
    for cell in notebook["cells"]:
        source = cell_source(cell)
        if cell["cell_type"] != "code" or "class EmbeddingBackward" not in source:
            continue
        tree = ast.parse(source)
        cls = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "EmbeddingBackward")
        method = next(node for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == "backward")
        lines = source.splitlines()
        lines[method.lineno - 1] = lines[method.lineno - 1].replace("def backward(", "def _solution_backward(")
        lines[method.end_lineno:method.end_lineno] = LEARNERS_BACKWARD.strip("\n").splitlines()
        cell["source"] = "\n".join(lines) + "\n"
        write_notebook(notebook, path)
        return
    raise AssertionError(f"no cell defines EmbeddingBackward in {path}")


@pytest.fixture
def copy(tmp_path):
    from .test_roundtrip import copy_repository

    return copy_repository(tmp_path / "repo")


def test_a_wrong_embedding_backward_gets_a_short_summary_naming_it_first_with_expected_and_actual(copy):
    from .test_roundtrip import paste_solutions_back, tito

    assert tito(copy, "module", "start", "11").returncode == 0
    module = next(m for m in discover_modules(copy) if m.label == "11_embeddings")
    paste_solutions_back(copy, module)
    break_embedding_backward(learner_notebook(copy, module, module.notebook))

    result = tito(copy, "module", "complete", "11")
    assert result.returncode == 1, result.text
    from .test_roundtrip import last_box
    from tito.summary import SCREEN_LINES

    assert "Traceback" not in result.text.split("Summary for", 1)[0], "no pytest tracebacks before the summary"
    assert len(result.text.splitlines()) < 120, result.text
    box = last_box(result.text)
    assert len(box) <= SCREEN_LINES, "\n".join(box)
    after = [line for line in result.text.split("\n".join(box), 1)[1].splitlines() if line.strip()]
    assert len(after) == 1 and "is not complete" in after[0], f"the box comes last: {after}"
    summary = "\n".join(box).split("What to fix", 1)[1]
    import re

    functions = [match[1] for match in re.finditer(r"^  \d+\. (\S+)", summary, re.MULTILINE)]
    assert functions and functions[0] == "EmbeddingBackward.backward", summary
    first = summary.split("  2. ")[0]
    assert "expected " in first and "actual " in first, first
    # the rows that differ, or the check that recognises the mistake by name (tests/diagnosis.py)
    assert "rows differ" in first or "entries differ" in first or "Misconception: repeated ids" in first, first
    command = first.split("see it: ", 1)[1].split("More:", 1)[0]
    command = re.sub(r" \\\n\s*", " ", command).strip()                # a wrapped command continues with ` \`
    assert "-- -x -k " in command and "\n" not in command, first


def test_a_test_file_that_cannot_be_imported_is_reported_with_its_error(tmp_path):
    (tmp_path / "test_broken.py").write_text("from mypkg_missing import thing\n\ndef test_a():\n    pass\n")
    report = tmp_path / "report.json"
    env = {**os.environ, "TITO_PYTEST_REPORT": str(report), "PYTHONPATH": str(ROOT)}
    process = subprocess.run([sys.executable, "-m", "pytest", "-p", "tito.pytest_plugin", "--tb=no", "-rN",
                              "-p", "no:cacheprovider", "test_broken.py"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert process.returncode == 2, process.stdout + process.stderr
    (entry,) = json.loads(report.read_text())["failures"]
    assert entry["when"] == "collect" and entry["message"] == ["ModuleNotFoundError: No module named 'mypkg_missing'"]
    lines = render(CHOSEN[0].module, "tito", [entry], {}, CHOSEN)
    assert "test_broken.py cannot be imported: ModuleNotFoundError: No module named 'mypkg_missing'" in "\n".join(lines)


def test_a_command_too_long_for_the_box_is_wrapped_with_continuations_so_it_still_runs_when_pasted():
    import shlex

    from tito.summary import _wrapped

    command = "/a/very/long/path/to/some/venv/bin/python3 bin/tito test --module 01 -- -x -k test_a_long_name" + " -q" * 12
    lines = _wrapped([f"     see it: {command}"], 60)
    assert len(lines) > 1 and all(len(line) <= 60 for line in lines), lines
    assert all(line.endswith(" \\") for line in lines[:-1]) and not lines[-1].endswith("\\")
    pasted = "\n".join(lines).split("see it: ", 1)[1]
    assert shlex.split(pasted.replace("\\\n", " ")) == shlex.split(command)     # what a shell runs
    prose = _wrapped(["     More: " + "word " * 30], 60)
    assert not any(line.endswith("\\") for line in prose), "only commands get continuations"
