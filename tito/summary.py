"""The learner's summary after `tito test --module N` and `tito module complete N`.

pytest's own report lists failures test by test; a wrong function early in a
module can fail dozens of tests, and the learner has to work out which of
their functions to look at. This summary answers that instead: per exercise
function (the functions with solution markers, `tito.release`), in the order
the notebooks teach them (a later one builds on an earlier one, so fix the
first one first), the most telling failing check (one that names the misconception, else one that shows expected
against actual values, else the first) with its values,
and the command that shows more.

A failure is attributed to an exercise function by evidence from the pytest
run (`tito.pytest_plugin`):

1. the exception was raised inside the function (the innermost traceback frame
   that is an exercise: a `NotImplementedError` stub, a shape error, ...);
2. otherwise (a test's own `assert` failed on a wrong value), the exercise that
   ran in the failing tests and least in the passing ones: for each exercise
   `f` that ran during the failing test, its Ochiai score
   failed(f) / sqrt(failed_total * (failed(f) + passed(f))), the usual measure of
   spectrum-based fault localisation; ties go to the earlier exercise.

Only the exercises of the module under test and of modules whose package files
hold the learner's code are candidates: reference code is not blamed.

A check that isolates an exercise outranks both: a failing test that ran one exercise of its module
and no other (the rest replaced by independent references, or never needed), or that says which one
it isolates with `@pytest.mark.isolates("name")`, proves that exercise wrong. Every failure of a test
that ran such a proven-wrong exercise is blamed on the earliest of them in teaching order: a later
exercise is never blamed for an earlier one's bug (a saved state that a forward got wrong fails its
backward's checks too, but the forward's own check says it is the forward). Only a stub that raised
`NotImplementedError` keeps its own failures: an unimplemented exercise is always named.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from tito.release import ReleaseError, default_export, read_notebook, solution_blocks
from tito.repo import Module, discover_modules, exported_from, learner_notebook, package_file

MAX_FUNCTIONS_IN_DETAIL = 6


@dataclass(frozen=True)
class Exercise:
    name: str  # qualified name, e.g. "EmbeddingBackward.backward"
    module: Module
    notebook: Path  # the dev notebook it is taught in
    package_file: Path  # where nbdev exports it
    order: int  # position in the course: module number, then notebook, then cell

    def entry(self) -> dict:
        return {"name": self.name, "file": str(self.package_file)}


def exercises(root: Path, modules: list[Module] | None = None) -> list[Exercise]:
    """Every marked function of `modules` (default: all), in teaching order."""
    found: list[Exercise] = []
    seen = set()
    for module in modules if modules is not None else discover_modules(root):
        for notebook in module.notebooks:
            if not notebook.is_file():
                continue
            try:
                content = read_notebook(notebook)
                dotted = default_export(content)
                blocks = solution_blocks(content, notebook.name)
            except (OSError, ValueError, ReleaseError):
                continue
            if not dotted:
                continue
            target = package_file(root, dotted)
            for block in blocks:
                if (target, block.function) not in seen:
                    seen.add((target, block.function))
                    found.append(Exercise(block.function, module, notebook, target, len(found)))
    return found


def candidate_exercises(root: Path, module: Module) -> list[Exercise]:
    """The exercises a failure of `module` may be blamed on: its own, and those of other modules whose
    package file currently holds the learner's code (from `release/`)."""
    chosen = []
    for exercise in exercises(root):
        if exercise.module == module:
            chosen.append(exercise)
            continue
        source = exported_from(exercise.package_file)
        if source is not None and source == learner_notebook(root, exercise.module, exercise.notebook).resolve():
            chosen.append(exercise)
    return chosen


def write_exercises(path: Path, chosen: list[Exercise]) -> None:
    path.write_text(json.dumps([exercise.entry() for exercise in chosen]), encoding="utf-8")


# ---------------------------------------------------------------------------
# Attribution


def isolated_failures(tests: dict[str, dict], chosen: list[Exercise],
                      module: Module | None = None) -> dict[str, str]:
    """Exercise -> the first failing test that isolates it: marked `isolates` it, or ran it and no other
    exercise of `module` (default: of any module in `chosen`)."""
    order = {exercise.name: exercise.order for exercise in chosen}
    own = {exercise.name for exercise in chosen if module is None or exercise.module == module}
    proven: dict[str, str] = {}
    for nodeid, test in tests.items():
        if test.get("outcome") != "failed":
            continue
        marked = [name for name in test.get("isolates", []) if name in order]
        ran = [name for name in test.get("executed", []) if name in own]
        for name in marked or (ran if len(ran) == 1 else []):
            proven.setdefault(name, nodeid)
    return proven


def _is_stub(failure: dict) -> bool:
    return failure.get("exception") == "NotImplementedError" and any(
        "implement this" in line for line in failure.get("message") or [])


def attribute(failures: list[dict], tests: dict[str, dict], chosen: list[Exercise],
              module: Module | None = None) -> dict[str | None, list[dict]]:
    """failure -> exercise name (None: not attributable), grouped, groups in teaching order."""
    order = {exercise.name: exercise.order for exercise in chosen}
    proven = isolated_failures(tests, chosen, module)
    failed_total = sum(1 for test in tests.values() if test.get("outcome") == "failed") or 1
    ran_failed: dict[str, int] = {}
    ran_passed: dict[str, int] = {}
    for test in tests.values():
        counter = ran_failed if test.get("outcome") == "failed" else ran_passed
        for name in test.get("executed", []):
            counter[name] = counter.get(name, 0) + 1

    def suspicion(name: str) -> float:
        failed = ran_failed.get(name, 0)
        return failed / math.sqrt(failed_total * (failed + ran_passed.get(name, 0))) if failed else 0.0

    groups: dict[str | None, list[dict]] = {}
    for failure in failures:
        through = [n for n in failure.get("raised_through") or [failure.get("raised_in")] if n in order]
        name = through[0] if through else None
        executed_here = set(tests.get(failure["nodeid"], {}).get("executed", []))
        # A method may fail on state its class's constructor made (a transposed table): the constructor
        # is a suspect too, when it ran in this test.
        makers = [f"{n.rsplit('.', 1)[0]}.__init__" for n in through if "." in n]
        suspects = through + [n for n in dict.fromkeys(makers) if n in order and n in executed_here and n not in through]
        if len(suspects) > 1:
            # Raised in the innermost exercise, called by others: the innermost may have been handed a
            # caller's bad argument (a position past the table, a wrong shape), so the suspect that the
            # other tests suspect most is blamed; ties go to the innermost.
            name = max(suspects, key=lambda n: (round(suspicion(n), 9), -suspects.index(n)))
        if name is not None:
            failure["how"] = ("raised inside it" if name == through[0] else
                              f"raised in {through[0]}, called by it" if name in through else
                              f"raised in {through[0]}, on what it built")
        else:
            executed = [n for n in tests.get(failure["nodeid"], {}).get("executed", []) if n in order]
            name = None
            if executed:
                name = max(executed, key=lambda n: (round(suspicion(n), 9), -order[n]))
                failure["how"] = (f"ran in {ran_failed.get(name, 0)} failing and {ran_passed.get(name, 0)} "
                                  f"passing tests")
        culprits = sorted((n for n in executed_here if n in proven), key=lambda n: order[n])
        if culprits and not _is_stub(failure):
            if name != culprits[0]:
                failure["how"] = (f"its own check fails ({_test_name(proven[culprits[0]])}), and it ran here"
                                  + (f" before {name}" if name is not None else ""))
            name = culprits[0]
            failure["isolating"] = failure["nodeid"] == proven[name]
        groups.setdefault(name, []).append(failure)
    ordered = sorted((name for name in groups if name is not None), key=lambda n: order[n])
    return {name: groups[name] for name in ordered + ([None] if None in groups else [])}


# ---------------------------------------------------------------------------
# Rendering


def _test_name(nodeid: str) -> str:
    """`tests/x/test_x.py::test_y[param]` -> `test_y` (what -k matches)."""
    return nodeid.split("::")[-1].split("[")[0]


def _failure_lines(failure: dict, indent: str) -> list[str]:
    lines = [f"{indent}failing check: {failure['nodeid']}" + (f" (line {failure['line']})" if failure.get("line") else "")]
    if failure.get("check"):
        lines.append(_fit(f"{indent}  {failure['check']}"))     # the statement: its start says which
    values = failure.get("values")
    message = failure.get("message") or []
    if values:
        width = max(len(values["actual"]["expr"]), len(values["expected"]["expr"]), 1)
        width = min(width, 40)
        lines.append(f"{indent}  expected {values['expected']['expr']:<{width}} = {values['expected']['value']}")
        lines.append(f"{indent}  actual   {values['actual']['expr']:<{width}} = {values['actual']['value']}")
        if values.get("rows_summary"):
            lines.append(f"{indent}  {values['rows_summary']}" + (":" if values.get("rows") else ""))
        for row in values.get("rows", []):
            lines.append(f"{indent}    [{row['index']}] expected {row['expected']}")
            lines.append(f"{indent}    [{row['index']}] actual   {row['actual']}")
        first = message[0] if message else ""
        if first.startswith("AssertionError: ") and not first.startswith("AssertionError: assert "):
            lines.append(f"{indent}  {first}")  # the test's own message
    else:
        shown = message[:4]
        if shown and "implement this" in shown[0]:
            shown = ["still a stub: raises " + shown[0]]
        lines += [f"{indent}  {line}" for line in shown]
    return lines


def _shows_expected(failure: dict) -> bool:
    """The failure's own message shows both values (a check that raised with expected and actual)."""
    text = " ".join(failure.get("message") or []).lower()
    return "expected" in text and ("actual" in text or " got " in text)


def _most_telling(group: list[dict]) -> dict:
    """The failure to show for an exercise: the first check that names a misconception (it raised
    `Misconception`, see tests/diagnosis.py), else the first check that isolates it and shows expected
    against actual values, else the first that shows them, else the first to fail."""
    for wanted in (lambda f: f.get("exception") == "Misconception",
                   lambda f: f.get("isolating") and (f.get("values") or _shows_expected(f)),
                   lambda f: f.get("values") or _shows_expected(f)):
        for failure in group:
            if wanted(failure):
                return failure
    return group[0]


# What "fits one screen" means for the summary's box: lines, and columns a line is cut to.
SCREEN_LINES, SCREEN_COLUMNS = 40, 120


def _fit(line: str, columns: int = SCREEN_COLUMNS) -> str:
    return line if len(line) <= columns else line[:columns - 3] + "..."


def _wrapped(lines: list[str], columns: int = SCREEN_COLUMNS) -> list[str]:
    """Lines longer than `columns` continue on the next, indented under their own start. A command to run
    (`see it: ...`) ends each broken line with ` \\`, so that pasted whole it still runs as one command."""
    import textwrap

    out = []
    for line in lines:
        if len(line) <= columns:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()) + 4)
        command = line.lstrip().startswith("see it: ")
        pieces = textwrap.wrap(line, columns - 2 if command else columns, subsequent_indent=indent,
                               break_on_hyphens=False, break_long_words=not command,
                               drop_whitespace=True) or [line[:columns]]
        out += [piece + " \\" for piece in pieces[:-1]] + pieces[-1:] if command else pieces
    return out


def render(module: Module, tito_command: str, failures: list[dict], tests: dict[str, dict],
           chosen: list[Exercise], stubs: list[str] | tuple[str, ...] = (),
           max_lines: int = SCREEN_LINES - 2) -> list[str]:
    """The summary's lines (empty when nothing failed and nothing is a stub), at most `max_lines` of them.

    `stubs`: the exercises (of `chosen`) whose package code is still a release stub. Each is named, in
    teaching order, even when no check reached it (an earlier stub raised first): a learner who starts
    a module sees every function to write, the first one first."""
    stubbed = [name for name in dict.fromkeys(stubs) if any(exercise.name == name for exercise in chosen)]
    if not failures and not stubbed:
        return []
    groups = attribute(failures, tests, chosen, module) if failures else {}
    where = {exercise.name: exercise for exercise in chosen}
    named = [name for name in groups if name is not None]
    entries = sorted(named + [name for name in stubbed if name not in groups], key=lambda n: where[n].order)
    number = f"{module.number:02d}"
    counts = [f"{len(failures)} failing test{'s' if len(failures) != 1 else ''}"] if failures else []
    if stubbed:
        counts.append(f"{len(stubbed)} function{'s' if len(stubbed) != 1 else ''} not implemented yet")
    lines = _wrapped([f"What to fix ({', '.join(counts)}), in the order the notebooks teach them; fix the "
                      f"first one first, later ones build on it:"])

    def entry(position: int, name: str) -> list[str]:
        exercise = where[name]
        if name not in groups:
            return _wrapped([f"  {position}. {name}  ({exercise.notebook.name}; not implemented yet: it still raises "
                             f"NotImplementedError, and no check reached it past an earlier stub)"])
        group = groups[name]
        block = [f"  {position}. {name}  ({exercise.notebook.name}; {len(group)} failing "
                 f"test{'s' if len(group) != 1 else ''}; {group[0].get('how', '')})"]
        first = _most_telling(group)
        block += _failure_lines(first, "     ")
        block.append(f"     see it: {tito_command} test --module {number} -- -x -k {_test_name(first['nodeid'])}")
        return _wrapped(block)

    others = groups.get(None, [])
    tail = []
    if others:
        tail.append(f"  Not traced to one of the functions you write ({len(others)} failing "
                    f"test{'s' if len(others) != 1 else ''}):")
        for failure in others[:3]:
            message = (failure.get("message") or [failure.get("exception", "")])[0]
            how = "cannot be imported" if failure.get("when") == "collect" else "failed"
            tail.append(_fit(f"    {failure['nodeid']} {how}: {message}"))
        if len(others) > 3:
            tail.append(f"    ... and {len(others) - 3} more")
    tail += _wrapped([f"More: every failure's full traceback: {tito_command} test --module {number} -- -x (stops "
                      f"at the first); one test: -- -k NAME; all tracebacks: -- --tb=short"])

    def then(rest: list[str]) -> list[str]:
        """The functions not shown in detail, by name, wrapped."""
        failing = [f"{name} ({len(groups[name])})" for name in rest if name in groups]
        unwritten = [name for name in rest if name not in groups]
        return _wrapped(([f"  then: {', '.join(failing)}"] if failing else [])
                        + ([f"  {'and ' if failing else 'then '}not implemented yet: {', '.join(unwritten)}"]
                           if unwritten else []))

    shown = 0
    for position, name in enumerate(entries, start=1):
        block = entry(position, name)
        room = max_lines - len(lines) - len(tail) - len(then(entries[position:]))
        if shown >= MAX_FUNCTIONS_IN_DETAIL or (shown and len(block) > room):
            break
        lines += block
        shown += 1
    lines += then(entries[shown:])
    return lines + tail


def boxed(lines: list[str], columns: int = SCREEN_COLUMNS) -> list[str]:
    """The summary between two rules, each line cut to `columns`: the last thing on screen, one screen tall
    (render keeps it to SCREEN_LINES - 2 lines)."""
    rule = "=" * columns
    return [rule, *(_fit(line, columns) for line in lines), rule]
