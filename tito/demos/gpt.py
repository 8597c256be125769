"""`tito demo gpt`: train a small character-level GPT on the built-in corpus and sample from it.

The model and the training loop are `tinytorch.models` (module 13); this file parses the flags, draws
the progress bar, prints the report and writes the loss-curve PNG.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

# The matrices of this demo are small (64 x 64): one BLAS thread is faster than two, and on a machine
# whose cores are busy, OpenBLAS threads waiting for each other can make a step 50 times slower.
# Only the demo's own process is affected, and only when the user has not chosen a value.
if "numpy" not in sys.modules:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402  (after the thread setting above)

from tinytorch.models import TransformerConfig, TransformerLM, train_language_model  # noqa: E402
from tinytorch.text.corpus import load_corpus  # noqa: E402
from tinytorch.text.tokenization import CharTokenizer  # noqa: E402
from tito.demos.embeddings import plot_hint  # noqa: E402  (spelt for this Python: .venv/bin/pip ...)

EXIT_OK, EXIT_USAGE = 0, 2
DEFAULT_OUT = "demo_output"
PLOT_FILE = "gpt_loss.png"


class _Parser(argparse.ArgumentParser):
    "argparse that reports a usage error in one line (and exits with status 2)."

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def _number(kind, minimum, maximum=None):
    "An argparse type: a number of `kind` (int or float) in [minimum, maximum], else a message naming the value."
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
        if not (value >= minimum and (maximum is None or value <= maximum)):
            bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tito demo gpt",
                     description="Train a small character-level GPT (tinytorch.models) on the built-in corpus, "
                                 "report the evaluation loss against the unigram baseline, and sample text.")
    parser.add_argument("--steps", metavar="N", type=_number(int, 1), default=300, help="training steps (default: 300)")
    parser.add_argument("--layers", metavar="L", type=_number(int, 1, 12), default=2, help="blocks (default: 2)")
    parser.add_argument("--dim", metavar="D", type=_number(int, 8, 512), default=64,
                        help="model width, a multiple of --heads (default: 64)")
    parser.add_argument("--heads", metavar="H", type=_number(int, 1, 16), default=4, help="attention heads (default: 4)")
    parser.add_argument("--context", metavar="T", type=_number(int, 8, 512), default=64,
                        help="characters per training window (default: 64)")
    parser.add_argument("--batch", metavar="B", type=_number(int, 1, 256), default=16, help="windows per step (default: 16)")
    parser.add_argument("--lr", metavar="LR", type=_number(float, 1e-6, 1.0), default=3e-3,
                        help="peak AdamW learning rate (default: 0.003)")
    parser.add_argument("--temperature", metavar="TEMP", type=_number(float, 0.0, 10.0), default=0.8,
                        help="sampling temperature, 0 = greedy (default: 0.8)")
    parser.add_argument("--sample-chars", metavar="N", type=_number(int, 0, 2000), default=200,
                        help="characters to sample after training (default: 200)")
    parser.add_argument("--out", metavar="DIR", default=DEFAULT_OUT, help=f"folder for {PLOT_FILE} (default: ./{DEFAULT_OUT})")
    parser.add_argument("--seed", metavar="S", type=_number(int, 0), default=0, help="random seed (default: 0)")
    return parser


class ProgressBar:
    "`[#####.....] step 120/200 loss 1.83 eval 1.91`: redrawn with \\r on a terminal, about 10 lines otherwise."

    def __init__(self, total: int, stream=None, width: int = 30, lines: int = 10):
        self.total, self.width = total, width
        self.stream = sys.stdout if stream is None else stream
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = max(1, total // lines)
        self.last_draw, self.eval_loss = 0.0, None

    def text(self, step: int, loss: float) -> str:
        filled = int(self.width * step / self.total)
        evaluation = f" eval {self.eval_loss:.3f}" if self.eval_loss is not None else ""
        return f"[{'#' * filled}{'.' * (self.width - filled)}] step {step}/{self.total} loss {loss:.3f}{evaluation}"

    def update(self, step: int, loss: float) -> None:
        if self.interactive:
            now = time.perf_counter()
            if step == self.total or now - self.last_draw >= 0.05:
                self.last_draw = now
                self.stream.write("\r" + self.text(step, loss) + ("\n" if step == self.total else ""))
                self.stream.flush()
        elif step % self.every == 0 or step == self.total:
            self.stream.write(self.text(step, loss) + "\n")
            self.stream.flush()

    def evaluated(self, step: int, loss: float) -> None:
        self.eval_loss = loss


def save_loss_plot(run, path: Path) -> Path:
    "Training and evaluation loss against the step, with the unigram baseline; ImportError without matplotlib."
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    axis.plot(run.steps, run.train_losses, alpha=0.4, label="training batch loss")
    axis.plot(run.eval_steps, run.eval_losses, "o-", label="evaluation loss (held-out 10%)")
    axis.axhline(run.unigram_loss, color="grey", linestyle="--", label=f"unigram baseline {run.unigram_loss:.2f}")
    axis.set_xlabel("step")
    axis.set_ylabel("cross-entropy (nats per character)")
    axis.set_title("tito demo gpt: character-level GPT on the built-in corpus")
    axis.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    "`tito demo gpt`: train, report, sample, plot. Returns the exit status."
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:                   # --help, or a usage error already printed
        return exit_request.code if isinstance(exit_request.code, int) else EXIT_USAGE
    if args.dim % args.heads:
        print(f"{parser.prog}: error: --dim {args.dim} must be a multiple of --heads {args.heads}", file=sys.stderr)
        return EXIT_USAGE
    if Path(args.out).exists() and not Path(args.out).is_dir():
        print(f"{parser.prog}: error: --out {args.out} is a file, not a folder", file=sys.stderr)
        return EXIT_USAGE

    text = load_corpus(None)
    tokenizer = CharTokenizer.from_text(text)
    ids = np.array(tokenizer.encode(text), dtype=np.int64)
    split = int(0.9 * len(ids))
    config = TransformerConfig(arch="gpt2", vocab_size=tokenizer.vocab_size, max_seq_len=args.context,
                               d_model=args.dim, num_layers=args.layers, num_heads=args.heads)
    model = TransformerLM(config, seed=args.seed)
    parameters = sum(p.size for p in model.parameters())
    print(f"Character-level GPT on the built-in corpus: {len(ids):,} characters, vocabulary {tokenizer.vocab_size}, "
          f"{split:,} for training and {len(ids) - split:,} held out")
    print(f"model: GPT-2 architecture, {args.layers} blocks, width {args.dim}, {args.heads} heads, context "
          f"{args.context}, tied head: {parameters:,} parameters")
    print(f"training: {args.steps} steps of {args.batch} windows, AdamW peak lr {args.lr}, seed {args.seed}")
    progress = ProgressBar(args.steps, lines=8)
    eval_every = max(1, args.steps // 8)                # the bar's lines then show a fresh evaluation loss
    run = train_language_model(model, ids[:split], ids[split:], steps=args.steps, batch_size=args.batch,
                               seq_len=args.context, lr=args.lr, eval_every=eval_every, seed=args.seed,
                               on_step=progress.update, on_eval=progress.evaluated)

    print(f"\n{args.steps} steps in {run.seconds:.1f} s")
    print("evaluation loss (nats per character) by step:")
    print("  " + "  ".join(f"{step}: {loss:.3f}" for step, loss in zip(run.eval_steps, run.eval_losses)))
    final = run.eval_losses[-1]
    verdict = "below" if final < run.unigram_loss else "NOT below"
    print(f"unigram baseline (each character's frequency, no context): {run.unigram_loss:.3f}")
    print(f"final evaluation loss {final:.3f}: {verdict} the baseline by {run.unigram_loss - final:+.3f}")

    if args.sample_chars:
        prompt = "the "
        room = config.max_seq_len - len(prompt)
        out = tokenizer.encode(prompt)
        rng = np.random.default_rng(args.seed)
        while len(out) - len(prompt) < args.sample_chars:                 # continue in windows of the context
            window = out[-(config.max_seq_len // 2):]
            count = min(room, config.max_seq_len - len(window), args.sample_chars - (len(out) - len(prompt)))
            new = model.generate(window, count, temperature=args.temperature, seed=int(rng.integers(2**31)))
            out += new[len(window):].tolist()
        print(f"\nsampled text (temperature {args.temperature}, prompt {prompt!r}):")
        print("  " + tokenizer.decode(out).replace("\n", "\n  "))

    path = Path(args.out) / PLOT_FILE
    try:
        save_loss_plot(run, path)
    except ImportError:
        print(f"\nPNG skipped: {plot_hint()}")
    except OSError as error:
        print(f"{parser.prog}: error: could not write {path}: {error}", file=sys.stderr)
        return EXIT_USAGE
    else:
        print(f"\nwrote {path} (training and evaluation loss by step, with the unigram baseline)")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
