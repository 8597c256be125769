"""The learner's progress: which modules are started and which passed `tito module complete`.

Kept in `.tito/progress.json` at the repository root (gitignored: it is the
learner's, not the course's):

    {"version": 1,
     "modules": {"11_embeddings": {"started": "2026-05-01T10:00:00",
                                   "completed": "2026-05-02T16:30:12",
                                   "last_check": {"when": "...", "passed": true,
                                                  "pytest": {"passed": 161, "failed": 0, ...}}}}}

A module is *completed* only while its last `tito module complete` passed;
a later failing run takes the completion away again, so the file never claims
more than the learner's current code does.
"""
from __future__ import annotations

import datetime
import json
import os
import tempfile
from pathlib import Path

from tito import ui
from tito.repo import PROGRESS_FILE, RepoError

FORMAT_VERSION = 1


def now() -> str:
    return datetime.datetime.now().isoformat(timespec="seconds")


def shown(timestamp: str | None) -> str:
    """`2026-05-02T16:30:12` -> `2026-05-02 16:30`."""
    return (timestamp or "")[:16].replace("T", " ")


def _is_time(value) -> bool:
    return value is None or isinstance(value, str)


def _entry_problems(entry: dict) -> list[str]:
    """The fields of one module's entry that tito cannot use (each is then dropped), described."""
    problems = [f"{key!r} is {entry[key]!r}, not a date" for key in ("started", "completed")
                if key in entry and not _is_time(entry[key])]
    check = entry.get("last_check")
    if "last_check" in entry and check is not None and not (
            isinstance(check, dict) and _is_time(check.get("when")) and isinstance(check.get("passed", False), bool)
            and isinstance(check.get("pytest", {}), dict)):
        problems.append(f"'last_check' is {check!r}, not {{when, passed: true/false, pytest: {{...}}}}")
    return problems


def _usable_entries(path: Path, modules: dict) -> dict:
    """`modules` without the entries and fields tito cannot read, each named in a warning: a hand-edited or
    damaged entry costs that entry, never the whole command."""
    usable = {}
    for label, entry in modules.items():
        if not isinstance(entry, dict):
            ui.warn(f"{path}: entry {label!r} is {entry!r}, not an object; ignored")
            continue
        problems = _entry_problems(entry)
        for problem in problems:
            ui.warn(f"{path}: entry {label!r}: {problem}; ignored")
        bad = {"started", "completed", "last_check"} & {p.split("'")[1] for p in problems}
        usable[label] = {key: value for key, value in entry.items() if key not in bad}
    return usable


class Progress:
    def __init__(self, root: Path, modules: dict | None = None):
        self.path = root / PROGRESS_FILE
        self.modules: dict[str, dict] = modules or {}

    @classmethod
    def load(cls, root: Path) -> "Progress":
        path = root / PROGRESS_FILE
        if not path.is_file():
            return cls(root)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            modules = data["modules"]
            if not isinstance(modules, dict):
                raise TypeError("modules is not an object")
        except (ValueError, KeyError, TypeError) as error:
            raise RepoError(f"{path} is not a tito progress file ({error}); fix it or delete it to start over") from None
        return cls(root, _usable_entries(path, modules))

    def save(self) -> None:
        """Write atomically: a crash never leaves half a file."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"version": FORMAT_VERSION, "modules": self.modules}, indent=2, sort_keys=True) + "\n"
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".progress-", suffix=".json")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def entry(self, label: str) -> dict:
        return self.modules.get(label, {})

    def status(self, label: str) -> str:
        """`not started`, `started` or `completed`."""
        entry = self.entry(label)
        if entry.get("completed"):
            return "completed"
        return "started" if entry.get("started") else "not started"

    def mark_started(self, label: str) -> None:
        self.modules.setdefault(label, {}).setdefault("started", now())

    def restart(self, label: str) -> None:
        """After `tito module reset`: started now, not completed."""
        entry = self.modules.setdefault(label, {})
        entry["started"] = now()
        entry["completed"] = None

    def record_check(self, label: str, passed: bool, pytest_counts: dict[str, int]) -> None:
        entry = self.modules.setdefault(label, {})
        entry.setdefault("started", now())
        when = now()
        entry["last_check"] = {"when": when, "passed": passed, "pytest": pytest_counts}
        entry["completed"] = (entry.get("completed") or when) if passed else None
