"""Run pytest in a subprocess and get its own counts back."""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tito.pytest_plugin import REPORT_ENV_VAR
from tito.repo import subprocess_env

# pytest's exit code when it collected nothing.
NO_TESTS_COLLECTED = 5


@dataclass
class PytestResult:
    exit_code: int
    counts: dict[str, int] = field(default_factory=dict)  # from pytest itself; empty if it never got that far

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


def run_pytest(root: Path, args: list[str]) -> PytestResult:
    """`python -m pytest ARGS` in `root`, output streamed to the terminal."""
    with tempfile.TemporaryDirectory(prefix="tito-pytest-") as scratch:
        report = Path(scratch) / "report.json"
        env = subprocess_env(root, **{REPORT_ENV_VAR: str(report)})
        command = [sys.executable, "-m", "pytest", "-p", "tito.pytest_plugin", *args]
        exit_code = subprocess.run(command, cwd=root, env=env).returncode
        counts = json.loads(report.read_text(encoding="utf-8"))["counts"] if report.is_file() else {}
    return PytestResult(exit_code, counts)
