"""`tito demo gpt` (tito/demos/gpt.py) through bin/tito: bad flags are one-line usage errors with exit status 2;
a tiny run trains, reports the baseline, samples and writes its plot."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TITO = [sys.executable, str(ROOT / "bin" / "tito"), "demo", "gpt"]
TINY = ["--steps", "4", "--dim", "16", "--heads", "2", "--layers", "1", "--context", "16", "--batch", "4",
        "--sample-chars", "12"]


def run_tito(*args, cwd):
    return subprocess.run([*TITO, *args], cwd=cwd, env=dict(os.environ), capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("flags, words", [
    (["--steps", "0"], "--steps"), (["--steps", "many"], "expected an integer"), (["--dim", "30", "--heads", "4"], "multiple"),
    (["--temperature", "-1"], "--temperature"), (["--bogus"], "unrecognized"), (["--lr", "nan"], "--lr"),
])
def test_bad_flags_are_one_line_errors_with_exit_2(tmp_path, flags, words, usage_error):
    usage_error(run_tito(*flags, cwd=tmp_path), words, tmp_path)


def test_out_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "taken").write_text("x")
    result = run_tito(*TINY, "--out", "taken", cwd=tmp_path)
    assert result.returncode == 2 and "is a file" in result.stderr


def test_a_tiny_run_completes(tmp_path):
    result = run_tito(*TINY, "--out", "plots", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "unigram baseline" in result.stdout and "step 4/4" in result.stdout and "sampled text" in result.stdout
    if "PNG skipped" not in result.stdout:
        assert (tmp_path / "plots" / "gpt_loss.png").stat().st_size > 0
