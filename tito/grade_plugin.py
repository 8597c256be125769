"""The pytest plugin `tito grade` loads into each learner's test process (`-p tito.grade_plugin`).

It reports test by test, as each test happens, into the file named by $TITO_GRADE_PROGRESS (one JSON object
a line, flushed at once), so that the grader still knows what happened when the process is killed or ends
in the middle of a test:

* `{"collected": [nodeid, ...]}` once collection is done;
* `{"start": nodeid}` when a test starts; `{"enter": name}` the first time the test runs an exercise
  function (the functions listed in $TITO_EXERCISES, as for `tito.pytest_plugin`);
* `{"done": nodeid, "outcome": "passed"|"failed"|"skipped", "executed": [...], "failures": [...]}` when it
  is over, the failures described by `tito.pytest_plugin` (the exercise they were raised in, the check,
  expected and actual values);
* `{"collect_error": nodeid, "message": [...]}` for a test file that cannot be imported.

Tests named in the file $TITO_GRADE_SKIP (one nodeid a line) are deselected: the grader's restarts after a
test that hung or ended the process skip what already ran.

Each test runs under `faulthandler.dump_traceback_later($TITO_GRADE_TEST_TIMEOUT, exit=True)`: a test still
running after that many seconds has every thread's stack written to $TITO_GRADE_DUMP and the process ends;
the grader reads the stack to name the exercise that hung. `os._exit` and `os.abort` are replaced by a
function that raises `SystemExit`, so a learner's exit call fails the test that made it instead of ending
the run.
"""
from __future__ import annotations

import faulthandler
import json
import os
import sys
from pathlib import Path

import pytest

import tito.pytest_plugin as described

PROGRESS_ENV_VAR = "TITO_GRADE_PROGRESS"
SKIP_ENV_VAR = "TITO_GRADE_SKIP"
DUMP_ENV_VAR = "TITO_GRADE_DUMP"
TEST_TIMEOUT_ENV_VAR = "TITO_GRADE_TEST_TIMEOUT"

_progress = None
_dump = None
_failures: list[dict] = []


def _write(entry: dict) -> None:
    if _progress is None:
        return
    try:
        _progress.write(json.dumps(entry) + "\n")
        _progress.flush()
    except (OSError, ValueError):  # the learner's code closed or removed it: nothing more to report
        pass


def _refuse_exit(*args, **kwargs):
    raise SystemExit(f"os._exit{args!r} called during a check (tito grade does not let it end the run)")


def _refuse_abort(*args, **kwargs):
    raise SystemExit("os.abort() called during a check (tito grade does not let it end the run)")


def pytest_configure(config):
    global _progress, _dump
    path = os.environ.get(PROGRESS_ENV_VAR)
    if not path:
        return
    _progress = open(path, "a", encoding="utf-8")
    dump = os.environ.get(DUMP_ENV_VAR)
    if dump:
        _dump = open(dump, "w", encoding="utf-8")
    # tito.pytest_plugin reads its exercise list only when its own report is asked for; it describes
    # failures for us here, so it gets the list directly.
    described._EXERCISES = described._load_exercises()
    os._exit, os.abort = _refuse_exit, _refuse_abort


def pytest_collection_modifyitems(config, items):
    if _progress is None:
        return
    skip_file = os.environ.get(SKIP_ENV_VAR)
    skipped = set()
    if skip_file and Path(skip_file).is_file():
        skipped = set(Path(skip_file).read_text(encoding="utf-8").splitlines())
    if skipped:
        kept = [item for item in items if item.nodeid not in skipped]
        config.hook.pytest_deselected(items=[item for item in items if item.nodeid in skipped])
        items[:] = kept
    _write({"collected": [item.nodeid for item in items]})


def pytest_collectreport(report):
    if report.failed and _progress is not None:
        text = getattr(report, "longreprtext", "") or str(report.longrepr)
        lines = [line for line in text.strip().splitlines() if line.strip()]
        errors = [line[1:].strip() for line in lines if line.startswith("E ")] or lines[-1:]
        _write({"collect_error": report.nodeid or "(collection)", "message": errors[:4]})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _progress is None:
        yield
        return
    exercises = described._EXERCISES
    executed: set[str] = set()

    def on_call(frame, event, arg):
        name = exercises.name_of(frame.f_code) if exercises is not None else None
        if name is not None and name not in executed:
            executed.add(name)
            _write({"enter": name})
        return None  # function entries only, no line events

    _failures.clear()
    state = {"outcome": "passed"}
    item.stash[_OUTCOME] = state
    _write({"start": item.nodeid})
    timeout = float(os.environ.get(TEST_TIMEOUT_ENV_VAR, "0") or 0)
    if timeout > 0 and _dump is not None:
        faulthandler.dump_traceback_later(timeout, exit=True, file=_dump)
    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        yield
    finally:
        sys.settrace(previous)
        if timeout > 0 and _dump is not None:
            faulthandler.cancel_dump_traceback_later()
        _write({"done": item.nodeid, "outcome": state["outcome"], "executed": sorted(executed),
                "failures": list(_failures)})


_OUTCOME = pytest.StashKey[dict]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if _progress is None:
        return
    report = outcome.get_result()
    state = item.stash.get(_OUTCOME, None)
    if state is None:
        return
    if report.failed:
        state["outcome"] = "failed"
        if call.excinfo is not None:
            try:
                _failures.append(described._describe_failure(item, call))
            except Exception as error:  # noqa: BLE001 - a description must never break the run
                _failures.append({"nodeid": item.nodeid, "when": call.when, "exception": type(error).__name__,
                                  "message": [f"(tito could not describe this failure: {error})"],
                                  "raised_in": None, "raised_through": [], "check": None, "line": None,
                                  "values": None})
    elif report.skipped and state["outcome"] == "passed" and call.when in ("setup", "call"):
        state["outcome"] = "skipped"
