"""`tito demo embeddings`: train skip-gram word vectors and show what they learned.

The model, the training and the text renderings (`fit_skipgram`, `neighbors_line`,
`projection_map`, ...) live in `tinytorch.text.skipgram` (notebook
`modules/11_embeddings/skipgram_dev.ipynb`). This file is only the command line
around them: argument parsing, exit codes, the progress bar, printing and the
matplotlib plot, none of which belongs in a library that other programs import.

Exit codes: 0 success, 2 a usage error (bad flag, unreadable or unsuitable
corpus, `--out` not a folder), reported in one line on stderr, never a traceback.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from tinytorch.text.corpus import load_corpus
from tinytorch.text.skipgram import (
    SkipGramRun, WordCorpus, build_corpus, category_letters, chance_purity, fit_skipgram, neighbors_line,
    project_2d, projection_map, showcase_words,
)
from tito import hints

EXIT_OK, EXIT_USAGE = 0, 2
DEFAULT_OUT = "demo_output"
PLOT_FILE = "embeddings_pca.png"
CATEGORY_COLOURS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink"]


def plot_hint() -> str:
    """How to get the PNG, spelt for this Python (`.venv/bin/pip ...` outside an activated venv)."""
    return f"the PNG needs matplotlib: {hints.editable_install(extras='plot')}  (or: {hints.pip_install('matplotlib')})"


# ---------------------------------------------------------------------------
# Progress


class ProgressBar:
    """A plain-text progress bar: `[#####.....] step 300/600 loss 2.31`, redrawn with \\r on a terminal.

    The loss shown is an exponential moving average of the per-step losses (`smoothing` = 0.95,
    bias-corrected as in Adam), since one batch's loss jumps around by more than the drop that
    training makes over a few dozen steps."""

    def __init__(self, total: int, stream=None, width: int = 30, lines: int = 10, smoothing: float = 0.95):
        self.total, self.width, self.smoothing = total, width, smoothing
        self.stream = sys.stdout if stream is None else stream
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = max(1, total // lines)                # non-interactive: step 1, then about `lines` lines
        self.last_draw = 0.0
        self.average, self.weight = 0.0, 0.0               # running EMA and the weight it has accumulated

    def smoothed(self, loss: float) -> float:
        """Fold `loss` into the moving average and return it (bias-corrected: the first value is `loss`)."""
        self.average = self.smoothing * self.average + (1 - self.smoothing) * loss
        self.weight = self.smoothing * self.weight + (1 - self.smoothing)
        return self.average / self.weight

    def text(self, step: int, loss: float) -> str:
        filled = int(self.width * step / self.total)
        return f"[{'#' * filled}{'.' * (self.width - filled)}] step {step}/{self.total} loss {loss:.3f}"

    def update(self, step: int, loss: float) -> None:
        shown = self.smoothed(loss)
        if self.interactive:
            now = time.perf_counter()
            if step == self.total or now - self.last_draw >= 0.05:     # at most 20 redraws a second
                self.last_draw = now
                self.stream.write("\r" + self.text(step, shown) + ("\n" if step == self.total else ""))
                self.stream.flush()
        elif step == 1 or step % self.every == 0 or step == self.total:   # step 1: the loss the drop starts from
            self.stream.write(self.text(step, shown) + "\n")
            self.stream.flush()


# ---------------------------------------------------------------------------
# The PNG


def save_projection_plot(run: SkipGramRun, path, max_words: int = 60) -> Path:
    """Save a PNG of the 2-D PCA projection before | after training, words coloured by category.

    Plots the labelled words, or the `max_words` most frequent words when there are no labels.
    Uses a matplotlib `Figure` with the Agg canvas (no pyplot, so no global backend is changed).
    Raises ImportError when matplotlib is not installed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    labels = run.corpus.labels
    rows = [i for i, label in enumerate(labels) if label is not None] or list(range(min(max_words, run.corpus.vocab_size)))
    categories = list(category_letters(labels)) or [None]
    colour = {category: CATEGORY_COLOURS[n % len(CATEGORY_COLOURS)] for n, category in enumerate(categories)}
    figure = Figure(figsize=(12, 5.5), layout="constrained")
    FigureCanvasAgg(figure)
    for axes, vectors, title in zip(figure.subplots(1, 2), (run.vectors_before, run.vectors_after),
                                    ("before training", f"after {len(run.losses)} steps")):
        points = project_2d(vectors[rows])
        for category in categories:
            members = [n for n, i in enumerate(rows) if labels[i] == category]
            axes.scatter(points[members, 0], points[members, 1], s=18, color=colour[category],
                         label=category or "word")
        for (x, y), i in zip(points, rows):
            axes.annotate(run.corpus.words[i], (x, y), fontsize=7, xytext=(2, 2), textcoords="offset points")
        axes.set_title(f"{title} (2-D PCA of {len(rows)} word vectors)")
        axes.set_xticks([])
        axes.set_yticks([])
    if categories != [None]:
        figure.axes[1].legend(loc="best", fontsize=8)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    return path


# ---------------------------------------------------------------------------
# Arguments


class _Parser(argparse.ArgumentParser):
    "argparse that reports a usage error in one line (and exits with status 2)."

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def _int_at_least(minimum: int):
    "An argparse type: an int >= `minimum`, else a message naming the value."
    kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {kind}, got {value}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tito demo embeddings",
                     description="Train skip-gram word embeddings (tinytorch Embedding, sparse gradients, SparseAdam) "
                                 "and show what they learned.")
    parser.add_argument("--corpus", metavar="FILE", help="a UTF-8 text file to train on (default: the built-in corpus)")
    parser.add_argument("--steps", metavar="N", type=_int_at_least(1), default=1000, help="training steps (default: 1000)")
    parser.add_argument("--dim", metavar="D", type=_int_at_least(1), default=32, help="embedding dimension (default: 32)")
    parser.add_argument("--out", metavar="DIR", default=DEFAULT_OUT,
                        help=f"folder for {PLOT_FILE} (default: ./{DEFAULT_OUT})")
    parser.add_argument("--seed", metavar="S", type=_int_at_least(0), default=0, help="random seed (default: 0)")
    parser.add_argument("--k", metavar="K", type=_int_at_least(1), default=5,
                        help="neighbours shown per word and used for category purity (default: 5)")
    return parser


def _load_words(path, k: int) -> WordCorpus:
    "The corpus to train on; ValueError / FileNotFoundError with a message for the user."
    if path is None:
        corpus = build_corpus(load_corpus(None), labelled=True, name="the built-in corpus")
    else:
        corpus = build_corpus(load_corpus(path), labelled=False, max_vocab=20_000, name=str(path))
    if corpus.vocab_size <= k:
        raise ValueError(f"{corpus.name} has {corpus.vocab_size} distinct word(s), too few to show {k} nearest "
                         f"neighbours of a word (that needs at least {k + 1}): use a longer text"
                         + (f" or --k {corpus.vocab_size - 1} or less" if corpus.vocab_size > 1 else ""))
    if not any(len(line) >= 2 for line in corpus.lines):
        raise ValueError(f"{corpus.name} has no line with two or more words, so there are no (centre, context) pairs "
                         f"to learn from (context windows stop at line breaks)")
    labelled = sum(label is not None for label in corpus.labels)
    if labelled and labelled <= k:
        raise ValueError(f"--k {k} is too large: category purity needs more than {k} labelled words, "
                         f"the corpus has {labelled}")
    return corpus


# ---------------------------------------------------------------------------
# The command


def _print_neighbors(corpus: WordCorpus, vectors: np.ndarray, words: Sequence[str], k: int) -> None:
    width = max(len(word) for word in words)
    for word in words:
        print("  " + neighbors_line(corpus, vectors, word, k, width))


def main(argv: Optional[Sequence[str]] = None) -> int:
    "`tito demo embeddings`: train skip-gram embeddings and report what they learned. Returns the exit status."
    for stream in (sys.stdout, sys.stderr):              # words of a user's file may not fit the terminal's encoding
        if callable(getattr(stream, "reconfigure", None)):
            stream.reconfigure(errors="backslashreplace")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:                   # --help, or a usage error already printed
        return exit_request.code if isinstance(exit_request.code, int) else EXIT_USAGE
    try:
        corpus = _load_words(args.corpus, args.k)
        if Path(args.out).exists() and not Path(args.out).is_dir():
            raise ValueError(f"--out {args.out} is a file, not a folder")
    except (OSError, ValueError) as error:              # missing, unreadable, empty, binary or too small
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return EXIT_USAGE

    builtin = args.corpus is None
    lr, window, negatives, batch_size = 0.05, 2, 5, 256
    print(f"Skip-gram word embeddings on {corpus.name}: {len(corpus.lines)} lines, {corpus.n_tokens} words, "
          f"vocabulary {corpus.vocab_size}")
    print(f"model: centre Embedding({corpus.vocab_size}, {args.dim}, sparse=True) + context "
          f"Embedding({corpus.vocab_size}, {args.dim}, sparse=True), {2 * corpus.vocab_size * args.dim} parameters")
    print(f"training: window {window}, {negatives} negatives per pair, batch {batch_size}, SparseAdam lr {lr}, "
          f"seed {args.seed}; the bar shows the training loss averaged over recent steps")
    words = showcase_words(corpus)
    progress = ProgressBar(args.steps)
    run = fit_skipgram(corpus, steps=args.steps, dim=args.dim, seed=args.seed, window=window, negatives=negatives,
                       batch_size=batch_size, lr=lr, on_step=progress.update)

    print(f"\n{run.n_pairs} (centre, context) pairs; {args.steps} steps in {run.seconds:.1f} s")
    print(f"loss on a fixed evaluation batch: start {run.eval_loss_before:.3f}, end {run.eval_loss_after:.3f}")
    print(f"\nNearest neighbours BEFORE training (cosine similarity, k={args.k}):")
    _print_neighbors(corpus, run.vectors_before, words, args.k)
    print("\nNearest neighbours AFTER training:")
    _print_neighbors(corpus, run.vectors_after, words, args.k)
    purity_before, purity_after = run.purity(args.k, after=False), run.purity(args.k, after=True)
    if purity_after is None:
        print("\nCategory purity: skipped (the words of your file have no known categories)")
    else:
        print(f"\nCategory purity (share of each category word's {args.k} nearest labelled words in its own "
              f"category; chance {chance_purity(corpus.labels):.2f}):")
        print(f"  before training {purity_before:.2f}   after training {purity_after:.2f}")
        print("\n2-D PCA projection of the category words:")
        print("\n".join(projection_map(run)))

    try:
        path = save_projection_plot(run, Path(args.out) / PLOT_FILE)
    except ImportError:
        print(f"\nPNG skipped: {plot_hint()}")
    except OSError as error:
        print(f"{parser.prog}: error: could not write {Path(args.out) / PLOT_FILE}: {error}", file=sys.stderr)
        return EXIT_USAGE
    else:
        print(f"\nwrote {path} (2-D PCA projection before and after training, coloured by category)"
              if builtin else f"\nwrote {path} (2-D PCA projection of the most frequent words)")
    return EXIT_OK
