"""Prove that a module's checks catch each mistake of the catalogue, fast: one process per module.

    python -m tito.misconceptions.prove embeddings [--out result.json] [--only NAME]

The module's pytest files run once on the reference code (all must pass); the run records which
exercises each test executed (`tito.pytest_plugin`). Then, per mistake, the mistake is applied in this
process (`tito.misconceptions.applied`: the exercise's code swapped for the patched package file's) and
pytest runs again, in process, on the tests that executed that exercise: a test that never calls the
function cannot see its mistake, so the others keep their reference outcome. From the merged outcomes
the learner's summary is rendered exactly as `tito module complete` renders it (`tito.summary.render`),
and judged:

* caught: some check fails;
* named: the summary's first entry is the exercise, and shows expected against actual values;
* says: when the mistake has a name (`Mistake.says`), the first entry says it;
* alone: no other exercise is blamed.

Tests that run the package in a subprocess (notebooks, demos) see the reference code here; the full
learner round trip (`tests/tito/test_misconceptions.py`, one case) covers them.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

# Tests slower than this on the reference code are not run again per mistake (they are left out of its
# spectrum, counted neither way): the 512 MB sparse-step test alone would double the proof's time. Each
# mistake they would catch has a fast check of its own; the full round trip runs them all.
SLOW_TEST_SECONDS = 1.0
PYTEST_ARGS = ["-q", "--tb=no", "-rN", "-p", "no:cacheprovider", "-p", "tito.pytest_plugin"]


def first_entry(lines: list[str]) -> tuple[str | None, str]:
    """(exercise named first, that entry's text) from the summary's lines."""
    entry, name = [], None
    for line in lines:
        if line.startswith("  1. "):
            name = line[5:].split()[0]
            entry.append(line)
        elif name is not None:
            if line.startswith("  ") and line[2:3].isdigit() or not line.startswith("     "):
                break
            entry.append(line)
    return name, "\n".join(entry)


def shows_expected_and_actual(text: str) -> bool:
    """Both values are on screen: `expected ... actual ...`, or gradcheck's `analytic ... numeric ...`."""
    lowered = text.lower()
    return ("expected" in lowered and ("actual" in lowered or " got " in lowered or "got:" in lowered)
            or "analytic" in lowered and "numeric" in lowered)


def judge(mistake, lines: list[str], named_groups: list[str], failed: int) -> dict:
    name, entry = first_entry(lines)
    says = mistake.says
    return {
        "exercise": mistake.exercise, "name": mistake.name, "misconception": mistake.misconception,
        "says": says, "failed_tests": failed, "first": name, "blamed": named_groups,
        "caught": failed > 0,
        "named": name == mistake.exercise and shows_expected_and_actual(entry),
        "said": says is None or (name == mistake.exercise and says.lower() in entry.lower()),
        "alone": [group for group in named_groups if group != mistake.exercise] == [],
        "summary": lines,
    }


class _Durations:
    """A pytest plugin object: each test's setup + call + teardown time."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report):
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration


class Runner:
    """pytest, in this process, with tito's plugin reporting into a file."""

    def __init__(self, root: Path, module, scratch: Path):
        from tito import summary
        from tito.repo import module_test_files

        self.root, self.module = root, module
        self.chosen = summary.exercises(root, [module])
        self.files = [str(path.relative_to(root)) for path in module_test_files(root, module)]
        self.report = scratch / "report.json"
        listing = scratch / "exercises.json"
        summary.write_exercises(listing, self.chosen)
        os.environ["TITO_PYTEST_REPORT"] = str(self.report)
        os.environ["TITO_EXERCISES"] = str(listing)
        import tito.pytest_plugin as plugin  # reads the two variables on import

        self.plugin = plugin
        self.durations = _Durations()

    def run(self, args: list[str]) -> dict:
        import pytest

        self.plugin._TESTS.clear()
        self.plugin._FAILURES.clear()
        if self.report.exists():
            self.report.unlink()
        output = io.StringIO()
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            code = pytest.main([*args, *PYTEST_ARGS], plugins=[self.durations])
        data = json.loads(self.report.read_text(encoding="utf-8")) if self.report.exists() else {}
        data["exitstatus"], data["output"] = int(code), output.getvalue()
        return data


def prove(root: Path, module_name: str, only: str | None = None) -> dict:
    from tito import summary
    from tito.misconceptions import applied, mistakes_of
    from tito.repo import resolve_module

    module = resolve_module(root, module_name)
    os.chdir(root)
    with tempfile.TemporaryDirectory(prefix="tito-prove-") as scratch:
        runner = Runner(root, module, Path(scratch))
        baseline = runner.run(runner.files)
        reference_seconds = dict(runner.durations.seconds)
        broken = [failure["nodeid"] for failure in baseline.get("failures", [])]
        if baseline["exitstatus"] != 0 or broken:
            return {"module": module.label, "error": f"the reference code fails its checks: {broken[:5]}",
                    "output": baseline["output"][-3000:], "results": []}
        results = []
        for mistake in mistakes_of(module.name):
            if only and mistake.name != only:
                continue
            exercise = next((e for e in runner.chosen if e.name == mistake.exercise), None)
            if exercise is None:
                results.append({"exercise": mistake.exercise, "name": mistake.name,
                                "error": f"{mistake.exercise} is not an exercise of {module.label}"})
                continue
            dotted = ".".join(exercise.package_file.relative_to(root).with_suffix("").parts)
            running = [nodeid for nodeid, test in baseline["tests"].items()
                       if mistake.exercise in test.get("executed", [])]
            slow = {nodeid for nodeid in running if reference_seconds.get(nodeid, 0.0) > SLOW_TEST_SECONDS}
            selected = [nodeid for nodeid in running if nodeid not in slow]
            tests = {nodeid: dict(test) for nodeid, test in baseline["tests"].items() if nodeid not in slow}
            failures = []
            if selected:
                with applied(importlib.import_module(dotted), mistake):
                    rerun = runner.run(selected)
                tests.update(rerun.get("tests", {}))
                failures = rerun.get("failures", [])
            lines = summary.render(module, "tito", failures, tests, runner.chosen)
            groups = summary.attribute([dict(f) for f in failures], tests, runner.chosen, module) if failures else {}
            result = judge(mistake, lines, [name for name in groups if name is not None], len(failures))
            result["rerun_tests"], result["slow_tests_left_out"] = len(selected), sorted(slow)
            results.append(result)
    return {"module": module.label, "tests": len(baseline["tests"]), "results": results}


def main(argv: list[str] | None = None) -> int:
    from tito.repo import find_root

    parser = argparse.ArgumentParser(prog="python -m tito.misconceptions.prove", description=__doc__.split("\n")[0])
    parser.add_argument("module")
    parser.add_argument("--out", help="write the results as JSON here (default: print a table)")
    parser.add_argument("--only", help="one mistake, by its name")
    args = parser.parse_args(argv)
    root = find_root()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    result = prove(root, args.module, args.only)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1), encoding="utf-8")
    else:
        if result.get("error"):
            print(result["error"])
            print(result.get("output", ""))
        for entry in result["results"]:
            if "error" in entry:
                print(f"ERROR {entry['name']}: {entry['error']}")
                continue
            marks = " ".join(f"{key}={'ok' if entry[key] else 'NO'}" for key in ("caught", "named", "said", "alone"))
            print(f"{entry['name']:<40} {marks}  first={entry['first']} blamed={entry['blamed']} "
                  f"(reran {entry['rerun_tests']}, {entry['failed_tests']} failed)")
            if not all(entry[key] for key in ("caught", "named", "said", "alone")):
                print("\n".join("      " + line for line in entry["summary"][:14]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
