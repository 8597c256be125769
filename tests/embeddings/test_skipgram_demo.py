"""The skip-gram demo: the model and training (tinytorch.text.skipgram) learn, deterministically; the command
around them (tito.demos.embeddings, `tito demo embeddings`) reports bad input in one line with exit status 2
and no traceback."""
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinytorch.core.autograd import RowSparseGrad, gradcheck
from tinytorch.core.tensor import Tensor
from tinytorch.text.corpus import generate_corpus
from tinytorch.text.skipgram import (
    NegativeSampler, SkipGram, build_corpus, chance_purity, fit_skipgram, log_sigmoid, negative_sampling_loss,
    skipgram_pairs,
)
from tito.demos.embeddings import PLOT_FILE, ProgressBar, main

ROOT = Path(__file__).resolve().parents[2]
TITO = [sys.executable, str(ROOT / "bin" / "tito"), "demo", "embeddings"]
FAST = ["--steps", "30", "--dim", "8"]          # a tiny configuration for the command-line tests


def run_tito(*args, cwd, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([*TITO, *args], cwd=cwd, env=env, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def small_corpus():
    return build_corpus(generate_corpus(n_sentences=600, seed=0))


@pytest.fixture(scope="module")
def reduced_run(small_corpus):
    "The reduced configuration: 600 sentences, 16 dimensions, 150 steps of 128 pairs."
    return fit_skipgram(small_corpus, steps=150, dim=16, batch_size=128, seed=0)


# ---------------------------------------------------------------- learning

def test_reduced_run_learns_categories(reduced_run, small_corpus):
    chance = chance_purity(small_corpus.labels)
    assert chance == pytest.approx(9 / 49)
    before, after = reduced_run.purity(5, after=False), reduced_run.purity(5, after=True)
    assert abs(before - chance) < 0.12, f"random vectors should score near chance {chance:.2f}, got {before:.2f}"
    assert after >= 0.8, f"trained purity {after:.2f} is not well above chance {chance:.2f}"


def test_loss_decreases(reduced_run):
    assert reduced_run.eval_loss_before == pytest.approx(6 * np.log(2), rel=1e-5), "zero context table: (1+K) log 2"
    assert reduced_run.eval_loss_after < 0.6 * reduced_run.eval_loss_before
    assert np.mean(reduced_run.losses[-20:]) < np.mean(reduced_run.losses[:20])


def test_same_seed_same_run_other_seed_other_run(small_corpus):
    first, second = (fit_skipgram(small_corpus, steps=40, dim=8, batch_size=64, seed=7) for _ in range(2))
    assert first.losses == second.losses and first.eval_loss_after == second.eval_loss_after
    assert np.array_equal(first.vectors_after, second.vectors_after)
    other = fit_skipgram(small_corpus, steps=40, dim=8, batch_size=64, seed=8)
    assert other.losses != first.losses


def test_sgd_also_trains_on_sparse_gradients(small_corpus):
    run = fit_skipgram(small_corpus, steps=60, dim=8, batch_size=256, lr=5.0, optimizer="sgd", seed=0)
    assert run.eval_loss_after < 0.8 * run.eval_loss_before
    with pytest.raises(ValueError, match="sparse_adam"):
        fit_skipgram(small_corpus, steps=1, optimizer="adam")


def test_fit_rejects_bad_settings(small_corpus):
    for name, value in [("steps", 0), ("dim", 0), ("dim", -2), ("batch_size", 0)]:
        with pytest.raises(ValueError, match=name):
            fit_skipgram(small_corpus, **{name: value})
    with pytest.raises(ValueError, match="no line with two or more words"):
        fit_skipgram(build_corpus("one\ntwo\nthree"), steps=1)


# ---------------------------------------------------------------- the pieces

def test_pairs_stay_inside_lines():
    corpus = build_corpus("a b c\nd e", labelled=False)
    centres, contexts = skipgram_pairs(corpus.lines, window=5)
    words = corpus.words
    pairs = {(words[c], words[x]) for c, x in zip(centres, contexts)}
    assert ("c", "d") not in pairs and ("d", "c") not in pairs
    assert len(centres) == 2 * (2 + 1) + 2 * 1


def test_log_sigmoid_is_finite_and_its_gradient_exact_at_zero():
    x = Tensor(np.array([-1000.0, -50.0, 0.0, 3.0, 1000.0]), requires_grad=True, dtype=np.float64)
    out = log_sigmoid(x)
    assert np.all(np.isfinite(out.data)) and np.allclose(out.data, -np.logaddexp(0, -x.data))
    out.sum().backward()
    assert np.allclose(x.grad, 1 / (1 + np.exp(x.data.clip(-700, 700))))   # d/dx log σ(x) = σ(-x)
    assert gradcheck(log_sigmoid, [Tensor(np.zeros(3), requires_grad=True, dtype=np.float64)])


def test_loss_gradcheck_and_sparse_gradients(rng):
    u = Tensor(rng.normal(size=(4, 3)), requires_grad=True, dtype=np.float64)
    v = Tensor(rng.normal(size=(4, 3, 3)), requires_grad=True, dtype=np.float64)
    assert gradcheck(negative_sampling_loss, [u, v])
    model = SkipGram(30, 4, seed=0)
    model(np.array([1, 1, 5]), np.array([[2, 9, 9], [3, 0, 1], [4, 2, 2]])).backward()
    assert isinstance(model.centre.weight.grad, RowSparseGrad) and model.centre.weight.grad.indices.tolist() == [1, 5]
    assert model.context.weight.grad.indices.tolist() == [0, 1, 2, 3, 4, 9]


def test_negative_sampler_follows_unigram_to_the_three_quarters(rng):
    sampler = NegativeSampler([1, 16, 81])
    assert np.allclose(sampler.probs, np.array([1, 8, 27]) / 36)
    draws = sampler.sample(rng, 100_000)
    assert np.allclose(np.bincount(draws, minlength=3) / draws.size, sampler.probs, atol=0.01)


def test_progress_bar_redraws_on_a_terminal_and_prints_lines_otherwise():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    bar = ProgressBar(20, stream=terminal, width=10)
    for step in range(1, 21):
        bar.update(step, 0.5)
    assert terminal.getvalue().startswith("\r[") and terminal.getvalue().endswith("[##########] step 20/20 loss 0.500\n")
    assert terminal.getvalue().count("\n") == 1
    log = io.StringIO()
    bar = ProgressBar(20, stream=log, width=10)
    for step in range(1, 21):
        bar.update(step, 0.5)
    assert "\r" not in log.getvalue() and len(log.getvalue().splitlines()) == 1 + 10, "step 1, then every 10%"


def test_progress_bar_shows_a_smoothed_loss_that_follows_the_trend():
    log = io.StringIO()
    bar = ProgressBar(100, stream=log, width=10, lines=100)
    noise = np.random.default_rng(0).normal(scale=0.5, size=100)
    losses = np.linspace(4.0, 1.0, 100) + noise                  # a drop of 3 hidden in noise of 0.5
    for step, loss in enumerate(losses, start=1):
        bar.update(step, float(loss))
    shown = [float(line.rsplit(" ", 1)[1]) for line in log.getvalue().splitlines()]
    assert shown[0] == pytest.approx(losses[0], abs=1e-3), "bias-corrected: the first value is the first loss"
    assert np.all(np.diff(shown[20:]) < 0.2), "no jumps of the size of the noise"
    assert np.abs(np.diff(shown)).mean() < 0.5 * np.abs(np.diff(losses)).mean()
    assert shown[-1] < shown[10] - 1.5, "the drop shows"


# ---------------------------------------------------------------- the command, in process

def test_main_prints_what_was_learned(tmp_path, capsys):
    assert main(["--steps", "200", "--dim", "16", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for expected in ("loss on a fixed evaluation batch: start 4.159", "BEFORE training", "AFTER training",
                     "dog", "apple", "car", "red", "one", "Category purity", "before training", "after training"):
        assert expected in out, expected
    purity_line = next(line for line in out.splitlines() if line.strip().startswith("before training"))
    before, after = (float(word) for word in purity_line.split() if word[0].isdigit())
    assert before < 0.35 and after >= 0.9
    assert out.isascii() and "\r" not in out, "plain ASCII; no carriage returns when stdout is not a terminal"


@pytest.mark.parametrize("argv, mentioned", [
    (["--steps", "0"], "--steps"), (["--steps", "-4"], "--steps"), (["--steps", "many"], "--steps"),
    (["--dim", "0"], "--dim"), (["--seed", "-1"], "--seed"), (["--k", "0"], "--k"),
    (["--k", "50"], "--k"),                                  # the built-in corpus has 50 labelled words
    (["--nonsense"], "--nonsense"),
])
def test_bad_arguments_exit_2_with_one_line(argv, mentioned, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert mentioned in captured.err and len(captured.err.strip().splitlines()) == 1, captured.err
    assert "step" not in captured.out, "nothing was trained"


@pytest.mark.parametrize("content, message", [
    (b"", "empty"), (b"  \n\t\n", "empty"), (b"\x89PNG\r\n\x1a\n\x00\x00", "not a text file"),
    (b"caf\xe9 cr\xe8me", "not a text file"), (b"... !!! ???", "no words"),
    (b"alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\nalpha", "no line with two or more words"),
    (b"the cat sat", "--k 2 or less"),                       # 3 distinct words, 5 neighbours asked for
])
def test_bad_corpus_files_exit_2_naming_the_problem(tmp_path, content, message, capsys):
    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    assert main(["--corpus", str(path), *FAST, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("dim", ["1", "2"])
def test_tiny_dimensions_still_draw_a_projection(dim, tmp_path, capsys):
    assert main(["--steps", "20", "--dim", dim, "--out", str(tmp_path)]) == 0
    assert "2-D PCA projection" in capsys.readouterr().out


def test_out_must_be_a_folder(tmp_path, capsys):
    occupied = tmp_path / "a_file"
    occupied.write_text("x")
    assert main([*FAST, "--out", str(occupied)]) == 2
    assert "is a file" in capsys.readouterr().err


def test_a_small_user_corpus_works_without_purity(tmp_path, capsys):
    text = "\n".join(["The quick fox jumps over the lazy dog.", "A lazy dog sleeps; the quick fox runs!",
                      "Foxes and dogs: the fox, the dog."] * 5)
    path = tmp_path / "mine.txt"
    path.write_text(text, encoding="utf-8")
    assert main(["--corpus", str(path), *FAST, "--k", "3", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Category purity: skipped" in out
    assert "  the " in out, "neighbours of the most frequent word"


def test_help_exits_0(capsys):
    assert main(["--help"]) == 0
    assert "--corpus FILE" in capsys.readouterr().out


def test_png_is_written_with_matplotlib(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the PNG needs matplotlib (pip install -e '.[plot]')")
    assert main([*FAST, "--out", str(tmp_path / "plots")]) == 0
    png = tmp_path / "plots" / PLOT_FILE
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {png}" in capsys.readouterr().out


def test_without_matplotlib_the_demo_says_how_to_get_the_png(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)       # `import matplotlib` now raises ImportError
    assert main([*FAST, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert 'pip install -e ".[plot]"' in out and "pip install matplotlib" in out
    assert "Category purity" in out, "the rest of the demo still runs"
    assert not (tmp_path / PLOT_FILE).exists()


# ---------------------------------------------------------------- the command, as a user runs it

def test_tito_missing_corpus_gives_a_message_not_a_traceback(tmp_path):
    result = run_tito("--corpus", "missing.txt", cwd=tmp_path)
    err = result.stderr.decode()
    assert result.returncode == 2
    assert "missing.txt" in err and "not found" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_tito_bad_steps_from_the_command_line(tmp_path):
    result = run_tito("--steps", "0", cwd=tmp_path)
    assert result.returncode == 2 and b"--steps" in result.stderr and b"Traceback" not in result.stderr


def test_tito_demo_runs_with_an_ascii_terminal(tmp_path):
    corpus = tmp_path / "accents.txt"
    corpus.write_text("le caf\u00e9 est chaud\nle th\u00e9 est chaud\nle caf\u00e9 est noir\nle th\u00e9 est vert\n" * 3,
                      encoding="utf-8")
    for args in ([*FAST, "--out", str(tmp_path)], ["--corpus", str(corpus), *FAST, "--k", "3", "--out", str(tmp_path)]):
        result = run_tito(*args, cwd=tmp_path, env_extra={"PYTHONIOENCODING": "ascii"})
        assert result.returncode == 0, result.stderr.decode(errors="replace")
        assert b"Traceback" not in result.stderr
        result.stdout.decode("ascii")                           # raises if anything non-ASCII was written
        assert b"step 30/30" in result.stdout
