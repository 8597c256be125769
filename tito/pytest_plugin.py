"""A pytest plugin that hands pytest's own result counts back to tito.

Loaded with `-p tito.pytest_plugin` in the pytest subprocess that tito starts.
It reads the same statistics pytest's terminal reporter uses for its closing
line (`N passed, M failed in Xs`) and writes them as JSON to the file named by
$TITO_PYTEST_REPORT, so tito never has to parse or invent numbers.
"""
from __future__ import annotations

import json
import os

REPORT_ENV_VAR = "TITO_PYTEST_REPORT"
CATEGORIES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "deselected")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    destination = os.environ.get(REPORT_ENV_VAR)
    if not destination:
        return
    counts = {}
    for category in CATEGORIES:
        reports = terminalreporter.stats.get(category, [])
        counts[category] = sum(1 for report in reports if getattr(report, "count_towards_summary", True))
    with open(destination, "w", encoding="utf-8") as handle:
        json.dump({"counts": counts, "exitstatus": int(exitstatus)}, handle)
