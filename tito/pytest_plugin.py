"""A pytest plugin that hands pytest's own results back to tito.

Loaded with `-p tito.pytest_plugin` in the pytest subprocess that tito starts;
it does nothing unless $TITO_PYTEST_REPORT names a file to write. It writes, as JSON:

* `counts`: the statistics pytest's terminal reporter uses for its closing line
  (`N passed, M failed in Xs`), so tito never has to parse or invent numbers;
* `failures`: for each failed test, what a learner needs to find the bug: the
  exercise function the exception was raised in (the innermost traceback frame
  whose code is one of the exercises listed in the file $TITO_EXERCISES), the
  failing statement of the test, the exception's first lines, and, when an
  `assert` compared two values, both values (rows that differ shown side by side);
* `tests`: for every test, whether it passed and which exercise functions ran
  while it did (recorded with a `sys.settrace` hook that only looks at function
  entries, and only when $TITO_EXERCISES is set). tito uses these to attribute
  a failed assertion in a test to the exercise most likely to be wrong, and, with
  `@pytest.mark.isolates("name")`, the exercise a test isolates (checks it alone, the others it runs
  being proven by their own checks).
"""
from __future__ import annotations

import ast
import json
import linecache
import os
import sys
from pathlib import Path

import pytest

REPORT_ENV_VAR = "TITO_PYTEST_REPORT"
EXERCISES_ENV_VAR = "TITO_EXERCISES"
CATEGORIES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "deselected")
MAX_MESSAGE_LINES, MAX_LINE = 8, 160
MAX_ROWS = 3
# Calls that the value display may re-evaluate in the failed test's frame: they only read.
READ_ONLY_CALLS = {
    "tolist", "item", "copy", "astype", "reshape", "to_dense", "todense", "numpy", "flatten", "ravel", "squeeze",
    "transpose", "asarray", "array", "approx", "sorted", "list", "tuple", "len", "abs", "float", "int", "round",
    "sum", "mean", "max", "min", "all", "any", "dense", "norm", "isclose", "stack", "concatenate", "zeros",
    "zeros_like", "ones", "ones_like", "eye", "arange", "bincount", "where", "sqrt", "exp", "log", "cos", "sin",
    "dot", "matmul", "outer", "einsum", "cumsum", "float32", "float64", "int64", "full", "repeat", "tile", "take",
}


class _Exercises:
    """The exercise functions (qualified names) per package file, and a fast `code -> name` lookup."""

    def __init__(self, entries: list[dict]):
        self.by_file: dict[str, set[str]] = {}
        for entry in entries:
            self.by_file.setdefault(os.path.realpath(entry["file"]), set()).add(entry["name"])
        self._names: dict[object, str | None] = {}
        self._lines: dict[str, dict[int, str]] = {}

    def _qualnames_by_line(self, filename: str) -> dict[int, str]:
        """For Pythons without `co_qualname`: first line of each function (decorators included) -> qualified name."""
        if filename not in self._lines:
            found: dict[int, str] = {}
            try:
                tree = ast.parse(Path(filename).read_text(encoding="utf-8"))
            except (OSError, SyntaxError, UnicodeDecodeError):
                tree = None

            def visit(node, prefix):
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        name = prefix + child.name
                        for line in [child.lineno] + [decorator.lineno for decorator in child.decorator_list]:
                            found[line] = name
                        visit(child, name + ".")
                    elif isinstance(child, ast.ClassDef):
                        visit(child, prefix + child.name + ".")
                    else:
                        visit(child, prefix)

            if tree is not None:
                visit(tree, "")
            self._lines[filename] = found
        return self._lines[filename]

    def name_of(self, code) -> str | None:
        try:
            return self._names[code]
        except KeyError:
            pass
        name = None
        names = self.by_file.get(os.path.realpath(code.co_filename))
        if names:
            qualname = getattr(code, "co_qualname", None)
            if qualname is not None:                     # a nested exercise: `Adam._update.<locals>.update_block`
                qualname = qualname.replace(".<locals>", "")
            else:
                qualname = self._qualnames_by_line(os.path.realpath(code.co_filename)).get(code.co_firstlineno)
            name = qualname if qualname in names else None
        self._names[code] = name
        return name


def _load_exercises() -> _Exercises | None:
    path = os.environ.get(EXERCISES_ENV_VAR)
    if not path:
        return None
    try:
        return _Exercises(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


_EXERCISES = _load_exercises() if os.environ.get(REPORT_ENV_VAR) else None
_TESTS: dict[str, dict] = {}
_FAILURES: list[dict] = []


# ---------------------------------------------------------------------------
# Which exercises ran during each test


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _EXERCISES is None:
        yield
        return
    executed: set[str] = set()
    name_of = _EXERCISES.name_of

    def on_call(frame, event, arg):
        name = name_of(frame.f_code)
        if name is not None:
            executed.add(name)
        return None  # no line events: only function entries are seen

    previous = sys.gettrace()
    _TESTS[item.nodeid] = {"executed": [], "outcome": "passed"}
    isolates = [name for marker in item.iter_markers("isolates") for name in marker.args]
    if isolates:                                 # the check says which exercise it isolates (tito.summary)
        _TESTS[item.nodeid]["isolates"] = isolates
    sys.settrace(on_call)
    try:
        yield
    finally:
        sys.settrace(previous)
        _TESTS[item.nodeid]["executed"] = sorted(executed)


def pytest_configure(config):
    config.addinivalue_line("markers", "isolates(name): this check isolates the named exercise (tito's summary "
                                       "blames its failure on that exercise)")


def pytest_runtest_logreport(report):
    if report.nodeid in _TESTS and report.failed:
        _TESTS[report.nodeid]["outcome"] = "failed"


# ---------------------------------------------------------------------------
# What a failure looks like to a learner


def _compact(text: str, lines: int = MAX_MESSAGE_LINES) -> list[str]:
    kept = [line.rstrip()[:MAX_LINE] for line in str(text).strip().splitlines() if line.strip()]
    return kept[:lines] + ([f"... ({len(kept) - lines} more lines)"] if len(kept) > lines else [])


def _statement_at(filename: str, lineno: int) -> ast.stmt | None:
    """The innermost statement of `filename` that spans `lineno`."""
    source = "".join(linecache.getlines(filename))
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= lineno <= (node.end_lineno or node.lineno):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.With, ast.For,
                                     ast.While, ast.If, ast.Try)):
                best = node
    return best


def _segment(filename: str, node: ast.AST) -> str:
    source = "".join(linecache.getlines(filename))
    text = ast.get_source_segment(source, node) or ""
    return " ".join(line.strip() for line in text.splitlines())


def _is_read_only(node: ast.AST) -> bool:
    for child in ast.walk(node):
        if isinstance(child, (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
        if isinstance(child, ast.Call):
            function = child.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
            if name not in READ_ONLY_CALLS and not (name or "").startswith(("reference", "expected", "naive", "ref_")):
                return False
    return True


def _as_array(value):
    """NumPy view of a value for display: Tensor -> .data, RowSparseGrad -> dense, approx -> expected."""
    import numpy as np

    expected = getattr(value, "expected", None)           # pytest.approx
    if expected is not None and not isinstance(value, np.ndarray):
        value = expected
    if hasattr(value, "to_dense") and callable(value.to_dense):
        try:
            value = value.to_dense()
        except Exception:  # noqa: BLE001 - display only
            pass
    data = getattr(value, "data", None)
    if isinstance(data, np.ndarray):
        value = data
    try:
        array = np.asarray(value)
    except Exception:  # noqa: BLE001
        return None
    return array if array.dtype != object else None


def _show(value) -> str:
    import numpy as np

    array = _as_array(value)
    if array is None:
        return " ".join(repr(value).split())[:MAX_LINE]
    with np.printoptions(precision=4, threshold=12, edgeitems=2, linewidth=MAX_LINE, suppress=True):
        text = " ".join(np.array2string(array, separator=" ").split())
    shape = f" shape {array.shape}" if array.ndim > 1 or array.size > 12 else ""
    return (text + shape)[:MAX_LINE]


def _differing_rows(actual, expected) -> tuple[list[dict], str] | None:
    """Up to MAX_ROWS rows (first-axis entries) where the two arrays differ, and a count line."""
    import numpy as np

    a, e = _as_array(actual), _as_array(expected)
    if a is None or e is None or a.ndim == 0 or e.ndim == 0:
        return None
    if a.shape != e.shape:
        return [], f"shapes differ: actual {a.shape}, expected {e.shape}"
    try:
        close = np.isclose(a.astype(np.float64), e.astype(np.float64), rtol=1e-5, atol=1e-7, equal_nan=True)
    except (TypeError, ValueError):
        close = a == e
    rows = np.flatnonzero(~close.reshape(len(a), -1).all(axis=1)) if a.ndim > 1 else np.flatnonzero(~close)
    if not len(rows):
        return [], "all entries are close (the check asked for something stricter)"
    unit = "rows" if a.ndim > 1 else "entries"
    shown = []
    with np.printoptions(precision=4, threshold=12, edgeitems=3, linewidth=MAX_LINE, suppress=True):
        for row in rows[:MAX_ROWS]:
            shown.append({"index": int(row),
                          "actual": " ".join(np.array2string(a[row], separator=" ").split())[:MAX_LINE],
                          "expected": " ".join(np.array2string(e[row], separator=" ").split())[:MAX_LINE]})
    return shown, f"{len(rows)} of {len(a)} {unit} differ"


def _operands(test: ast.expr):
    """(actual, expected) expressions of an assert's test: `a == b`, `np.allclose(a, b)`, ... else None."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is)):
        return test.left, test.comparators[0]
    if isinstance(test, ast.Call) and len(test.args) >= 2:
        name = test.func.attr if isinstance(test.func, ast.Attribute) else getattr(test.func, "id", "")
        if name in ("allclose", "array_equal", "isclose", "array_equiv", "equal", "approx_equal"):
            return test.args[0], test.args[1]
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "all":
        return _operands(test.func.value)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return None                                       # which part failed is pytest's message to tell
    return None


def _looks_expected(expression: str) -> bool:
    return any(word in expression.lower() for word in ("expect", "reference", "want", "ref_", "naive", "truth"))


# NumPy's assertion functions: (actual, desired) are their first two arguments.
NUMPY_ASSERTS = {"assert_allclose", "assert_array_equal", "assert_equal", "assert_array_almost_equal",
                 "assert_almost_equal", "assert_array_less"}


def _numpy_assert_operands(statement: ast.stmt):
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return None
    call = statement.value
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name in NUMPY_ASSERTS and len(call.args) >= 2:
        return call.args[0], call.args[1]
    return None


def _values(frame, filename: str, statement: ast.stmt) -> dict | None:
    """Both sides of a failed comparison (an `assert a == b`, `assert np.allclose(a, b)`, or
    `np.testing.assert_allclose(actual, desired)`), evaluated again in the test's frame (read-only
    expressions only)."""
    if isinstance(statement, ast.Assert):
        operands = _operands(statement.test)
    else:
        operands = _numpy_assert_operands(statement)
    if operands is None:
        return None
    evaluated = []
    for node in operands:
        if not _is_read_only(node):
            return None
        try:
            value = eval(compile(ast.Expression(node), filename, "eval"), frame.f_globals, dict(frame.f_locals))
        except Exception:  # noqa: BLE001 - display only: leave it to pytest's message
            return None
        evaluated.append((_segment(filename, node), value))
    (actual_text, actual), (expected_text, expected) = evaluated
    if _looks_expected(actual_text) and not _looks_expected(expected_text):
        (actual_text, actual), (expected_text, expected) = (expected_text, expected), (actual_text, actual)
    result = {"actual": {"expr": actual_text[:MAX_LINE], "value": _show(actual)},
              "expected": {"expr": expected_text[:MAX_LINE], "value": _show(expected)}}
    differing = _differing_rows(actual, expected)
    if differing is not None:
        result["rows"], result["rows_summary"] = differing
    return result


def _describe_failure(item, call) -> dict:
    excinfo = call.excinfo
    entries = list(excinfo.traceback)
    # The innermost frame that is an exercise function: where the exception was raised in the learner's code.
    # Every exercise frame on the way, innermost first: the innermost may only have passed on a caller's bad
    # argument (tito.summary weighs them by the other tests).
    stack = []
    if _EXERCISES is not None:
        for entry in reversed(entries):
            name = _EXERCISES.name_of(entry.frame.code.raw)
            if name is not None and name not in stack:
                stack.append(name)
    raised_in = stack[0] if stack else None
    test_file = os.path.realpath(str(item.fspath))
    in_test = [entry for entry in entries if os.path.realpath(str(entry.path)) == test_file]
    failure = {
        "nodeid": item.nodeid,
        "when": call.when,
        "exception": excinfo.typename,
        "message": _compact(excinfo.exconly(tryshort=True)),
        "raised_in": raised_in,
        "raised_through": stack,
        "check": None,
        "line": None,
        "values": None,
    }
    if in_test:
        entry = in_test[-1]
        filename, lineno = str(entry.path), entry.lineno + 1
        failure["line"] = lineno
        statement = _statement_at(filename, lineno)
        if statement is not None:
            failure["check"] = _segment(filename, statement)[:2 * MAX_LINE]
            if excinfo.errisinstance(AssertionError):
                try:
                    failure["values"] = _values(entry.frame.raw, filename, statement)
                except Exception:  # noqa: BLE001 - a summary must never break the test run
                    failure["values"] = None
    return failure


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if not os.environ.get(REPORT_ENV_VAR):
        return
    report = outcome.get_result()
    if report.failed and call.excinfo is not None:
        try:
            _FAILURES.append(_describe_failure(item, call))
        except Exception as error:  # noqa: BLE001
            _FAILURES.append({"nodeid": item.nodeid, "when": call.when, "exception": type(error).__name__,
                              "message": [f"(tito could not describe this failure: {error})"],
                              "raised_in": None, "check": None, "line": None, "values": None})


def pytest_collectreport(report):
    """A test file that cannot even be imported (e.g. a name the learner's export lacks): its error's last lines."""
    if report.failed and os.environ.get(REPORT_ENV_VAR):
        text = getattr(report, "longreprtext", "") or str(report.longrepr)
        lines = [line for line in text.strip().splitlines() if line.strip()]
        errors = [line[1:].strip() for line in lines if line.startswith("E ")] or lines[-1:]
        _FAILURES.append({"nodeid": report.nodeid or "(collection)", "when": "collect",
                          "exception": "collection error", "message": _compact("\n".join(errors), 4),
                          "raised_in": None, "check": None, "line": None, "values": None})


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    destination = os.environ.get(REPORT_ENV_VAR)
    if not destination:
        return
    counts = {}
    for category in CATEGORIES:
        reports = terminalreporter.stats.get(category, [])
        counts[category] = sum(1 for report in reports if getattr(report, "count_towards_summary", True))
    with open(destination, "w", encoding="utf-8") as handle:
        json.dump({"counts": counts, "exitstatus": int(exitstatus), "failures": _FAILURES, "tests": _TESTS}, handle)
