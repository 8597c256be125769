"""`tito demo train` (tito/demos/train.py, issue 24 item 5) through bin/tito, on a tiny configuration: bad flags are
one-line usage errors with exit status 2; a run reports the held-out loss against the unigram baseline, samples
and writes its curve; and a run stopped halfway and resumed from its checkpoint ends with the same weights, bit for
bit, as the run that was never stopped (model, AdamW's moments, the cosine schedule and the batch generator are
all in the checkpoint)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinytorch.core.checkpoint import load

ROOT = Path(__file__).resolve().parents[2]
TITO = [sys.executable, str(ROOT / "bin" / "tito"), "demo", "train"]
TINY = ["--steps", "6", "--vocab", "300", "--dim", "16", "--heads", "2", "--layers", "1", "--context", "16",
        "--batch", "4", "--eval-batches", "2", "--sample-tokens", "4", "--max-chars", "20000", "--eval-every", "2"]


def run_tito(*args, cwd):
    return subprocess.run([*TITO, *args], cwd=cwd, env=dict(os.environ), capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("flags, words", [
    (["--steps", "0"], "--steps"), (["--steps", "many"], "expected an integer"), (["--vocab", "100"], "--vocab"),
    (["--dim", "30", "--heads", "4"], "multiple"), (["--dim", "12", "--heads", "4"], "even head width"),
    (["--steps", "4", "--stop-at", "5"], "--stop-at 5 is after --steps 4"), (["--lr", "nan"], "--lr"),
    (["--tied", "--untied"], "not allowed with"), (["--resume"], "--resume needs"),
])
def test_bad_flags_are_one_line_errors_with_exit_2(tmp_path, flags, words, usage_error):
    usage_error(run_tito(*flags, cwd=tmp_path), words, tmp_path)


def model_arrays(path):
    return {name: array for name, array in load(path).items() if name.startswith("model/")}


def test_half_a_run_resumed_from_its_checkpoint_equals_the_whole_run_bit_for_bit(tmp_path):
    whole = run_tito(*TINY, "--tied", "--out", "whole", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    assert "unigram baseline" in whole.stdout and "step 6/6" in whole.stdout and "sample after training" in whole.stdout
    assert "tied head" in whole.stdout
    first = run_tito(*TINY, "--tied", "--stop-at", "3", "--out", "halves", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "step 3/6" in first.stdout and "step 4/6" not in first.stdout
    second = run_tito(*TINY, "--tied", "--resume", "--out", "halves", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "resumed from" in second.stdout and "at step 3" in second.stdout and "step 6/6" in second.stdout

    expected, resumed = model_arrays(tmp_path / "whole" / "checkpoint.npz"), model_arrays(tmp_path / "halves" / "checkpoint.npz")
    assert sorted(resumed) == sorted(expected)
    for name in expected:
        assert np.array_equal(resumed[name], expected[name]), name
    curve, halves = (json.loads((tmp_path / folder / "curve.json").read_text()) for folder in ("whole", "halves"))
    assert halves["steps"] == curve["steps"] == list(range(6))
    assert halves["losses"] == curve["losses"], "the resumed run continues the same curve"
    assert curve["eval_steps"] == [0, 2, 4, 6]
    assert halves["eval_steps"] == [0, 2, 3, 4, 6], "the interrupted run also evaluated where it stopped"
    held_out = dict(zip(halves["eval_steps"], halves["eval_losses"]))
    assert [held_out[step] for step in curve["eval_steps"]] == curve["eval_losses"]
    if "PNG skipped" not in whole.stdout:
        assert (tmp_path / "whole" / "train_loss.png").stat().st_size > 0


def test_untied_is_the_default_and_has_its_own_head(tmp_path):
    result = run_tito(*TINY, "--steps", "2", "--eval-every", "1", "--out", "run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "untied head" in result.stdout
    assert "lm_head.weight" in {name[len("model/"):] for name in model_arrays(tmp_path / "run" / "checkpoint.npz")}
