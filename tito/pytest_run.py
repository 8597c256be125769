"""Run pytest in a subprocess and get its own counts back."""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tito.pytest_plugin import EXERCISES_ENV_VAR, REPORT_ENV_VAR
from tito.repo import subprocess_env

# pytest's exit code when it collected nothing.
NO_TESTS_COLLECTED = 5


@dataclass
class PytestResult:
    exit_code: int
    counts: dict[str, int] = field(default_factory=dict)  # from pytest itself; empty if it never got that far
    failures: list[dict] = field(default_factory=list)  # tito.pytest_plugin's description of each failure
    tests: dict[str, dict] = field(default_factory=dict)  # nodeid -> outcome and the exercises that ran

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def summary(self) -> str:
        """pytest's counts in its own words, e.g. `12 passed, 1 skipped`."""
        parts = [f"{number} {name}" for name, number in self.counts.items() if number]
        if not parts:
            return "no tests ran" if self.counts else f"pytest exited with code {self.exit_code} before reporting"
        return ", ".join(parts)


def run_pytest(root: Path, args: list[str], exercises: list[dict] | None = None) -> PytestResult:
    """`python -m pytest ARGS` in `root`, output streamed to the terminal.

    `exercises` ({"name": qualified name, "file": package file}): the functions the plugin
    watches to say which of them a failure comes from (see tito.pytest_plugin)."""
    with tempfile.TemporaryDirectory(prefix="tito-pytest-") as scratch:
        report = Path(scratch) / "report.json"
        extra = {REPORT_ENV_VAR: str(report)}
        if exercises:
            listing = Path(scratch) / "exercises.json"
            listing.write_text(json.dumps(exercises), encoding="utf-8")
            extra[EXERCISES_ENV_VAR] = str(listing)
        env = subprocess_env(root, **extra)
        command = [sys.executable, "-m", "pytest", "-p", "tito.pytest_plugin", *args]
        exit_code = subprocess.run(command, cwd=root, env=env).returncode
        data = {}
        if report.is_file():
            try:
                data = json.loads(report.read_text(encoding="utf-8"))
            except ValueError:
                data = {}
    return PytestResult(exit_code, data.get("counts", {}), data.get("failures", []), data.get("tests", {}))
