"""`tito demo train`: train a small LLaMA-style language model on Python's own help pages, resumably.

The pieces are the library's: module 10's `BPETokenizer` (trained on the text), module 08's `write_tokens`,
`open_tokens`, `get_batch` and `sequential_batches` (a token file, batches read from its memory map), module 13's
`TransformerLM` (RMSNorm, SwiGLU, RoPE; tied or untied head) and module 07's `fit` with AdamW, a cosine schedule
with warm-up, gradient clipping and checkpoints (model, optimiser, schedule, iteration and the batch generator's
state). The library prints nothing: this file parses the flags, draws the progress bar from `fit`'s callback,
prints the report and writes the loss-curve PNG.

The text is `pydoc_data.topics`, the interpreter's help pages (about 465,000 characters), shipped with every
Python: no download. The held-out split is the last tenth of the text, whole pages.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

# Small matrices: one BLAS thread is faster than two, and busy cores make waiting OpenBLAS threads very slow.
if "numpy" not in sys.modules:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from tinytorch.core.checkpoint import CheckpointError  # noqa: E402
from tinytorch.core.optimizers import AdamW  # noqa: E402
from tinytorch.data import get_batch, open_tokens, sequential_batches, write_tokens  # noqa: E402
from tinytorch.models import TransformerConfig, TransformerLM  # noqa: E402
from tinytorch.text.tokenization import BPETokenizer  # noqa: E402
from tinytorch.training import CosineSchedule, evaluate, fit, load_checkpoint  # noqa: E402
from tito.demos.embeddings import plot_hint  # noqa: E402
from tito.demos.gpt import EXIT_OK, EXIT_USAGE, _number, _Parser  # noqa: E402  (the demos' shared flag checks)

EXIT_FAILED = 1
DEFAULT_OUT = "demo_output/train"
CHECKPOINT, TOKENIZER, CURVE, PLOT_FILE = "checkpoint.npz", "tokenizer.json", "curve.json", "train_loss.png"
HELD_OUT_FRACTION = 0.1                   # the last tenth of the text, by whole pages
PROMPT = "The for statement"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tito demo train",
                     description="Train a small LLaMA-style language model (RMSNorm, SwiGLU, RoPE) on Python's own help "
                                 "pages (pydoc_data.topics) with a BPE tokenizer trained on them; report the held-out "
                                 "loss and perplexity against a unigram baseline, sample before and after, save a "
                                 "checkpoint that --resume continues bit for bit.")
    parser.add_argument("--steps", metavar="N", type=_number(int, 1), default=500,
                        help="training steps in the whole run; the cosine schedule spans them (default: 500)")
    parser.add_argument("--stop-at", metavar="K", type=_number(int, 1), default=None,
                        help="stop after step K (as if interrupted) and save the checkpoint; --resume continues")
    parser.add_argument("--resume", action="store_true",
                        help=f"continue from {CHECKPOINT} in --out (same flags as the run that wrote it)")
    parser.add_argument("--out", metavar="DIR", default=DEFAULT_OUT,
                        help=f"folder for the token files, tokenizer, checkpoint, curve and PNG (default: ./{DEFAULT_OUT})")
    head = parser.add_mutually_exclusive_group()
    head.add_argument("--tied", dest="tied", action="store_true", help="output head shares the token table")
    head.add_argument("--untied", dest="tied", action="store_false", help="a separate output head (LLaMA's; default)")
    parser.set_defaults(tied=False)
    parser.add_argument("--vocab", metavar="V", type=_number(int, 257, 4096), default=512,
                        help="BPE vocabulary size, 256 bytes + merges (default: 512)")
    parser.add_argument("--layers", metavar="L", type=_number(int, 1, 12), default=4, help="blocks (default: 4)")
    parser.add_argument("--dim", metavar="D", type=_number(int, 8, 512), default=128,
                        help="model width, a multiple of --heads (default: 128)")
    parser.add_argument("--heads", metavar="H", type=_number(int, 1, 16), default=4, help="attention heads (default: 4)")
    parser.add_argument("--context", metavar="T", type=_number(int, 8, 512), default=128,
                        help="tokens per training window (default: 128)")
    parser.add_argument("--batch", metavar="B", type=_number(int, 1, 256), default=16, help="windows per step (default: 16)")
    parser.add_argument("--lr", metavar="LR", type=_number(float, 1e-6, 1.0), default=3e-3,
                        help="peak AdamW learning rate; the schedule ends at a tenth of it (default: 0.003)")
    parser.add_argument("--eval-every", metavar="N", type=_number(int, 1), default=None,
                        help="steps between evaluations (default: --steps / 5)")
    parser.add_argument("--eval-batches", metavar="N", type=_number(int, 1), default=8,
                        help="held-out batches per evaluation (default: 8)")
    parser.add_argument("--sample-tokens", metavar="N", type=_number(int, 0, 500), default=48,
                        help="tokens sampled before and after training (default: 48)")
    parser.add_argument("--seed", metavar="S", type=_number(int, 0), default=0, help="random seed (default: 0)")
    parser.add_argument("--max-chars", metavar="N", type=_number(int, 1000), default=None,
                        help="use only the first N characters of the help pages (quick runs; default: all)")
    return parser


class ProgressBar:
    "`[#####.....] step 120/500 loss 3.41 lr 2.9e-03 eval 3.52 12.3 s`: redrawn with \\r on a terminal, ~10 lines otherwise."

    def __init__(self, total: int, first: int = 0, stream=None, width: int = 30, lines: int = 10):
        self.total, self.first, self.width = total, first, width
        self.stream = sys.stdout if stream is None else stream
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = max(1, (total - first) // lines)
        self.last_draw, self.eval_loss = 0.0, None

    def __call__(self, event: dict) -> None:
        "The callback `fit` calls after every step."
        if event["stopped"]:
            self.stream.write(("\n" if self.interactive else "") + event["stopped"] + "\n")
            return
        if event["eval_loss"] is not None:
            self.eval_loss = event["eval_loss"]
        step = event["step"]
        filled = int(self.width * step / self.total)
        evaluation = f" eval {self.eval_loss:.3f}" if self.eval_loss is not None else ""
        text = (f"[{'#' * filled}{'.' * (self.width - filled)}] step {step}/{self.total} loss {event['loss']:.3f} "
                f"lr {event['lr']:.1e}{evaluation} {event['elapsed']:.0f} s")
        last = step == event["steps"]
        if self.interactive:
            now = time.perf_counter()
            if last or now - self.last_draw >= 0.1:
                self.last_draw = now
                self.stream.write("\r" + text + ("\n" if last else ""))
        elif (step - self.first) % self.every == 0 or last:
            self.stream.write(text + "\n")
        self.stream.flush()


def pages():
    "The help pages of this Python, in a fixed order: (name, text)."
    from pydoc_data.topics import topics
    return [(name, topics[name]) for name in sorted(topics)]


def split_pages(all_pages, held_out_fraction=HELD_OUT_FRACTION):
    """Training pages and held-out pages: the pages after the first 90% of the characters are held out (whole pages,
    so no window straddles the split and no held-out page was seen by the tokenizer or the model)."""
    total, seen, train, held_out = sum(len(text) for _, text in all_pages), 0, [], []
    for _, text in all_pages:
        (train if seen < (1 - held_out_fraction) * total or not train else held_out).append(text)
        seen += len(text)
    if not held_out and len(train) > 1:                  # one long last page: hold it out all the same
        held_out.append(train.pop())
    return train, held_out


def limited(all_pages, max_chars):
    "The first pages, up to about `max_chars` characters in all (None: every page)."
    if max_chars is None:
        return all_pages
    kept, total = [], 0
    for name, text in all_pages:
        if total >= max_chars:
            break
        kept.append((name, text[:max_chars - total]))
        total += len(kept[-1][1])
    return kept


def tokenizer_for(out: Path, train_text: str, vocab_size: int, resume: bool) -> tuple[BPETokenizer, float]:
    "The BPE tokenizer: trained on the training pages (and saved), or read back on --resume. (tokenizer, seconds)."
    path = out / TOKENIZER
    started = time.perf_counter()
    if resume and path.is_file():
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("vocab_size") == vocab_size:
            return BPETokenizer([tuple(pair) for pair in saved["merges"]]), time.perf_counter() - started
    tokenizer = BPETokenizer.train(train_text, vocab_size)
    path.write_text(json.dumps({"vocab_size": vocab_size, "merges": [list(pair) for pair in tokenizer.merges]}),
                    encoding="utf-8")
    return tokenizer, time.perf_counter() - started


def token_file(path: Path, tokenizer: BPETokenizer, texts: list[str], label: str) -> np.ndarray:
    "Tokenise `texts` page by page into a uint16 file (module 08's write_tokens, bounded memory); its memory map."
    total_chars = sum(len(text) for text in texts)
    done = {"chars": 0}

    def encoded():
        for text in texts:
            yield tokenizer.encode(text)
            done["chars"] += len(text)

    def progress(written):
        sys.stdout.write(f"\r  {label}: {written:,} tokens from {done['chars']:,}/{total_chars:,} characters")
        sys.stdout.flush()

    interactive = bool(getattr(sys.stdout, "isatty", lambda: False)())
    written = write_tokens(encoded(), path, chunk_size=16_384, callback=progress if interactive else None)
    sys.stdout.write(f"{chr(13) if interactive else ''}  {label}: {written:,} tokens from {total_chars:,} characters "
                     f"-> {path.name}{' ' * 20 if interactive else ''}\n")
    return open_tokens(path)


def unigram_loss(train_tokens, eval_tokens, vocab_size: int) -> float:
    "Nats per token of predicting the held-out tokens by the (add-one smoothed) training frequencies: no context."
    counts = np.bincount(np.asarray(train_tokens, dtype=np.int64), minlength=vocab_size) + 1.0
    return float(-np.log(counts[np.asarray(eval_tokens, dtype=np.int64)] / counts.sum()).mean())


def sample(model, tokenizer, count: int, seed: int) -> str:
    "`count` tokens sampled after the prompt (temperature 0.8), decoded."
    prompt = np.array(tokenizer.encode(PROMPT), dtype=np.int64)
    count = min(count, model.config.max_seq_len - len(prompt))
    ids = model.generate(prompt, count, temperature=0.8, seed=seed)
    return tokenizer.decode(ids.tolist())


def save_loss_plot(curve: dict, unigram: float, path: Path) -> Path:
    "Training and held-out loss by step, with the unigram baseline; ImportError without matplotlib."
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    axis.plot(curve["steps"], curve["losses"], alpha=0.4, label="training batch loss")
    axis.plot(curve["eval_steps"], curve["eval_losses"], "o-", label="held-out loss (last 10% of the pages)")
    axis.axhline(unigram, color="grey", linestyle="--", label=f"unigram baseline {unigram:.2f}")
    axis.set_xlabel("step")
    axis.set_ylabel("cross-entropy (nats per token)")
    axis.set_title("tito demo train: LLaMA-style LM on pydoc_data.topics")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    "`tito demo train`: tokenise, train (or resume), evaluate, sample, plot. Returns the exit status."
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:                   # --help, or a usage error already printed
        return exit_request.code if isinstance(exit_request.code, int) else EXIT_USAGE
    if args.dim % args.heads or (args.dim // args.heads) % 2:
        print(f"{parser.prog}: error: --dim {args.dim} must be a multiple of --heads {args.heads} with an even head "
              f"width (RoPE rotates pairs)", file=sys.stderr)
        return EXIT_USAGE
    stop_at = args.steps if args.stop_at is None else args.stop_at
    if stop_at > args.steps:
        print(f"{parser.prog}: error: --stop-at {stop_at} is after --steps {args.steps}", file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        print(f"{parser.prog}: error: --out {out} is a file, not a folder", file=sys.stderr)
        return EXIT_USAGE
    if args.resume and not (out / CHECKPOINT).is_file():
        print(f"{parser.prog}: error: --resume needs {out / CHECKPOINT}, which does not exist (run without --resume "
              f"first)", file=sys.stderr)
        return EXIT_USAGE
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    all_pages = limited(pages(), args.max_chars)
    train_pages, held_out_pages = split_pages(all_pages)
    print(f"Python's help pages (pydoc_data.topics): {len(all_pages)} pages, "
          f"{sum(len(t) for _, t in all_pages):,} characters; the last {len(held_out_pages)} pages "
          f"({sum(len(t) for t in held_out_pages):,} characters) held out")
    tokenizer, seconds = tokenizer_for(out, "\n\n".join(train_pages), args.vocab, args.resume)
    print(f"BPE tokenizer, {tokenizer.vocab_size} ids ({len(tokenizer.merges)} merges learned on the training pages), "
          f"{seconds:.1f} s")
    train_tokens = token_file(out / "train.bin", tokenizer, train_pages, "training")
    eval_tokens = token_file(out / "eval.bin", tokenizer, held_out_pages, "held out")

    config = TransformerConfig(arch="llama", vocab_size=tokenizer.vocab_size, max_seq_len=args.context,
                               d_model=args.dim, num_layers=args.layers, num_heads=args.heads,
                               tie_embeddings=args.tied)
    model = TransformerLM(config, seed=args.seed)
    optimizer = AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    scheduler = CosineSchedule(optimizer, warmup_iters=max(1, args.steps // 20), cosine_cycle_iters=args.steps,
                               min_learning_rate=args.lr / 10)
    rng = np.random.default_rng(args.seed)
    parameters = sum(p.size for p in model.parameters())
    print(f"model: LLaMA-style (RMSNorm, SwiGLU, RoPE), {args.layers} blocks, width {args.dim}, {args.heads} heads, "
          f"context {args.context}, {'tied' if args.tied else 'untied'} head: {parameters:,} parameters")

    evaluation = sequential_batches(eval_tokens, args.batch, args.context, max_batches=args.eval_batches)
    unigram = unigram_loss(train_tokens, eval_tokens, tokenizer.vocab_size)
    curve_path = out / CURVE
    if args.resume:
        try:
            start = load_checkpoint(out / CHECKPOINT, model, optimizer, scheduler, rng)
        except CheckpointError as error:
            print(f"{parser.prog}: error: {error} (resume with the flags of the run that wrote it)", file=sys.stderr)
            return EXIT_USAGE
        curve = json.loads(curve_path.read_text(encoding="utf-8")) if curve_path.is_file() else None
        if curve is None or curve.get("steps", [None])[-1:] != [start - 1]:
            curve = {"steps": [], "losses": [], "eval_steps": [], "eval_losses": []}
        print(f"resumed from {out / CHECKPOINT} at step {start}")
    else:
        start = 0
        curve = {"steps": [], "losses": [], "eval_steps": [0], "eval_losses": [evaluate(model, evaluation)]}
        print(f"\nsample before training:\n  {sample(model, tokenizer, args.sample_tokens, args.seed)!r}")
    if start >= stop_at:
        print(f"nothing to do: the checkpoint is at step {start} and the run stops at {stop_at}")
        return EXIT_OK

    eval_every = args.eval_every if args.eval_every is not None else max(1, args.steps // 5)
    print(f"\ntraining steps {start}..{stop_at - 1} of {args.steps}: {args.batch} windows of {args.context} tokens, "
          f"AdamW (weight decay 0.1), cosine schedule {args.lr:g} -> {args.lr / 10:g} with warm-up, gradients "
          f"clipped to norm 1, seed {args.seed}")
    history = fit(model, optimizer, lambda it: get_batch(train_tokens, args.batch, args.context, rng), stop_at,
                  scheduler=scheduler, max_grad_norm=1.0, eval_batches=evaluation, eval_every=eval_every,
                  start_iteration=start, checkpoint=out / CHECKPOINT, checkpoint_every=eval_every, rng=rng,
                  callback=ProgressBar(args.steps, first=start))
    curve["steps"] += history.iterations
    curve["losses"] += history.losses
    curve["eval_steps"] += history.eval_iterations
    curve["eval_losses"] += history.eval_losses
    curve_path.write_text(json.dumps(curve), encoding="utf-8")
    if history.stopped:
        return EXIT_FAILED

    final = curve["eval_losses"][-1]
    seconds = time.perf_counter() - started
    print(f"\n{len(history.iterations)} steps in {history.seconds:.1f} s ({history.seconds / max(1, len(history.iterations)):.2f} s "
          f"per step); {seconds:.1f} s in all")
    print("held-out loss (nats per token) by step: "
          + "  ".join(f"{step}: {loss:.3f}" for step, loss in zip(curve["eval_steps"], curve["eval_losses"])))
    verdict = "below" if final < unigram else "NOT below"
    print(f"held-out loss {final:.3f}, perplexity {math.exp(final):.1f}; unigram baseline {unigram:.3f}, perplexity "
          f"{math.exp(unigram):.1f}: {verdict} the baseline")
    print(f"\nsample after training:\n  {sample(model, tokenizer, args.sample_tokens, args.seed)!r}")
    print(f"\ncheckpoint: {out / CHECKPOINT} (step {stop_at}; `--resume` continues"
          + (f" to step {args.steps})" if stop_at < args.steps else ")"))

    try:
        save_loss_plot(curve, unigram, out / PLOT_FILE)
    except ImportError:
        print(f"PNG skipped: {plot_hint()}")
    except OSError as error:
        print(f"{parser.prog}: error: could not write {out / PLOT_FILE}: {error}", file=sys.stderr)
        return EXIT_FAILED
    else:
        print(f"wrote {out / PLOT_FILE} (training and held-out loss by step, with the unigram baseline)")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
