"""`tito demo positions` (tito/demos/positions.py) through bin/tito: --quick writes the JSON (and the PNG with
matplotlib) and prints a table with a row per scheme and a column per evaluation length; a seed gives the
same numbers twice; bad flags are one-line usage errors with exit status 2."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TITO = [sys.executable, str(ROOT / "bin" / "tito"), "demo", "positions"]
TINY = ["--length", "8", "--period", "3", "--steps", "3", "--dim", "8", "--heads", "2", "--layers", "1",
        "--batch", "4", "--eval-sequences", "4"]


def run_tito(*args, cwd):
    return subprocess.run([*TITO, *args], cwd=cwd, env=dict(os.environ), capture_output=True, text=True, timeout=600)


def table_rows(stdout):
    "The first table: header and one row per scheme, as lists of cells split on two or more spaces."
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("scheme"))
    rows = []
    for line in lines[start + 2:]:
        if not line.strip():
            break
        rows.append(line)
    return lines[start], rows


def test_quick_run_writes_json_png_and_the_table(tmp_path):
    result = run_tito("--quick", "--out", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "out" / "positions.json").read_text())
    L = data["setup"]["train_len"]
    assert data["lengths"] == [L, 2 * L, 4 * L, 8 * L]
    header, rows = table_rows(result.stdout)
    assert header.split()[:3] == ["scheme", str(L), "(L)"] and header.split()[3:] == [str(2 * L), str(4 * L), str(8 * L)]
    schemes = [row.split()[0] for row in rows]
    assert {"none", "learned", "sinusoidal", "rope", "alibi"} <= set(schemes)
    learned = next(row for row in rows if row.split()[0] == "learned")
    assert learned.count(f"n/a (table has {L} rows)") == 3
    assert data["summary"]["learned"][str(2 * L)] is None and data["summary"]["learned-8L"][str(2 * L)] is not None
    for scheme in ("none", "sinusoidal", "rope", "alibi"):
        for n in data["lengths"]:
            row = data["summary"][scheme][str(n)]
            assert 0 <= row["accuracy_mean"] <= 1 and row["loss_mean"] > 0
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "PNG skipped" in result.stdout
    else:
        assert (tmp_path / "out" / "positions_loss.png").stat().st_size > 1000


def test_same_seed_same_numbers_and_seeds_give_a_spread(tmp_path):
    first = run_tito(*TINY, "--out", "a", cwd=tmp_path)
    again = run_tito(*TINY, "--out", "b", cwd=tmp_path)
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    a, b = (json.loads((tmp_path / d / "positions.json").read_text()) for d in ("a", "b"))
    for d in (a, b):
        for runs in d["runs"].values():
            for run in runs.values():
                run.pop("seconds")
    assert a == b
    other = run_tito(*TINY, "--seed", "1", "--out", "c", cwd=tmp_path)
    c = json.loads((tmp_path / "c" / "positions.json").read_text())
    assert c["summary"] != a["summary"], "another seed, other numbers"
    two = run_tito(*TINY, "--seeds", "2", "--out", "d", cwd=tmp_path)
    assert two.returncode == 0 and ("±" in two.stdout or "+/-" in two.stdout)   # "+/-" on an ASCII terminal
    d = json.loads((tmp_path / "d" / "positions.json").read_text())
    assert d["seeds"] == [0, 1] and d["summary"]["alibi"]["8"]["loss_spread"] > 0


def test_tying_counts_shared_weights_once(tmp_path):
    result = run_tito(*TINY, "--tying", "--out", "t", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "t" / "positions_tying.json").read_text())
    tied, untied = data["summary"]["tied"], data["summary"]["untied"]
    run = data["runs"][0]
    assert len(run["tied"]["table_grad_norms"]) == 3 and len(run["untied"]["head_grad_norms"]) == 3
    from tinytorch.models.positions import corpus_words
    _, vocab = corpus_words()
    assert untied["parameters"] - tied["parameters"] == vocab * 8       # one (d, V) head matrix
    assert f"tying saves {vocab * 8:,} parameters" in result.stdout


@pytest.mark.parametrize("flags, words", [
    (["--steps", "0"], "--steps"), (["--length", "many"], "expected an integer"),
    (["--dim", "30", "--heads", "4"], "multiple of --heads"), (["--period", "9", "--length", "8"], "--period 9"),
    (["--seeds", "0"], "--seeds"), (["--bogus"], "unrecognized"), (["--lr", "nan"], "--lr"),
])
def test_bad_flags_are_one_line_errors_with_exit_2(tmp_path, flags, words, usage_error):
    usage_error(run_tito(*flags, cwd=tmp_path), words, tmp_path)


def test_out_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "taken").write_text("x")
    result = run_tito(*TINY, "--out", "taken", cwd=tmp_path)
    assert result.returncode == 2 and "is a file" in result.stderr


def test_long_context_writes_json_png_and_a_row_per_scaling(tmp_path):
    "Issue 26 item 3: --long-context trains one RoPE model, reads it at L..8L with each RoPE scaling."
    result = run_tito(*TINY, "--long-context", "--out", "lc", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "lc" / "positions_long_context.json").read_text())
    assert data["scalings"] == ["none", "linear", "dynamic", "yarn", "llama3"] and data["lengths"] == [8, 16, 32, 64]
    assert len(data["runs"]["0"]["train_losses"]) == 3 and data["setup"]["lr"] == 0.01     # the mode's own default
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("scaling"))
    assert lines[start].split()[:3] == ["scaling", "8", "(L)"]
    assert [line.split()[0] for line in lines[start + 2:start + 7]] == data["scalings"]
    for name in data["scalings"]:
        for n in data["lengths"]:
            row = data["summary"][name][str(n)]
            assert row["copy_loss_mean"] > 0 and 0 <= row["passkey_accuracy_mean"] <= 1
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "PNG skipped" in result.stdout
    else:
        assert (tmp_path / "lc" / "positions_long_context.png").stat().st_size > 1000


def test_long_context_and_tying_together_is_a_usage_error(tmp_path, usage_error):
    usage_error(run_tito(*TINY, "--long-context", "--tying", cwd=tmp_path), "--long-context", tmp_path)
