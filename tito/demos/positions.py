"""`tito demo positions`: train short, test long, one small model per position scheme; `--tying`: tied vs untied head;
`--long-context`: one RoPE model read 2-8x longer than trained with each RoPE scaling (copy loss, passkey retrieval).

The experiment is `tinytorch.models.positions` (module 13); this file parses the flags, draws the progress
bars, prints the tables and writes the JSON and the PNG.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Optional, Sequence

# Small matrices: one BLAS thread is faster than two on a busy machine (see tito/demos/gpt.py).
if "numpy" not in sys.modules:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from tinytorch.models.positions import (LONG_CONTEXT_SCALINGS, SCHEMES, PositionExperiment,  # noqa: E402
                                        long_context_experiment, position_experiment, tying_experiment)
from tito import ui  # noqa: E402
from tito.demos.embeddings import plot_hint  # noqa: E402
from tito.demos.gpt import EXIT_OK, EXIT_USAGE, ProgressBar, _number, _Parser  # noqa: E402

DEFAULT_OUT = "demo_output"
JSON_FILE, PLOT_FILE = "positions.json", "positions_loss.png"
TYING_JSON, TYING_PLOT = "positions_tying.json", "positions_tying.png"
LONG_JSON, LONG_PLOT = "positions_long_context.json", "positions_long_context.png"
# (value of the default run, value of --quick); an explicit flag wins over both
PROFILES = {"length": (32, 16), "period": (8, 4), "steps": (300, 80), "dim": (64, 32), "layers": (2, 2),
            "heads": (4, 4), "batch": (16, 16), "eval_sequences": (64, 32)}
# --long-context trains one model on two tasks: longer and faster (measured: passkey 100% at L after 400 steps)
LONG_PROFILES = {"steps": (400, 80), "lr": (1e-2, 1e-2)}


def build_parser():
    parser = _Parser(prog="tito demo positions",
                     description="Train one small model per position scheme (none, learned, learned-8L, sinusoidal, "
                                 "rope, alibi) at length L on a repeat-the-segment task, evaluate at L, 2L, 4L, 8L; "
                                 "or, with --tying, compare a tied and an untied output head.")
    add = parser.add_argument
    add("--quick", action="store_true", help="a small setting for CI (L=16, period 4, 80 steps, width 32)")
    add("--tying", action="store_true", help="run the tied-vs-untied head experiment instead")
    add("--long-context", action="store_true",
        help="train one RoPE model at L (copy + passkey tasks), evaluate at 2L-8L with each RoPE scaling "
             "(none, linear, dynamic, yarn, llama3); default 400 steps at lr 0.01")
    add("--length", metavar="L", type=_number(int, 4, 256), help="training length (default: 32; --quick 16)")
    add("--period", metavar="P", type=_number(int, 2, 111), help="segment length of the task (default: 8; --quick 4)")
    add("--steps", metavar="N", type=_number(int, 1, 100000), help="training steps per model (default: 300; --quick 80)")
    add("--dim", metavar="D", type=_number(int, 4, 512), help="model width, a multiple of --heads (default: 64)")
    add("--layers", metavar="N", type=_number(int, 1, 12), help="blocks (default: 2)")
    add("--heads", metavar="H", type=_number(int, 1, 16), help="attention heads (default: 4)")
    add("--batch", metavar="B", type=_number(int, 1, 256), help="sequences per step (default: 16)")
    add("--eval-sequences", metavar="N", type=_number(int, 1, 4096), help="held-out sequences per length (default: 64)")
    add("--lr", metavar="LR", type=_number(float, 1e-6, 1.0),
        help="peak AdamW learning rate (default: 0.003; --long-context 0.01)")
    add("--seed", metavar="S", type=_number(int, 0), default=0, help="first random seed (default: 0)")
    add("--seeds", metavar="N", type=_number(int, 1, 20), default=1,
        help="repeat with seeds S, S+1, ..., report mean +/- standard deviation (default: 1)")
    add("--out", metavar="DIR", default=DEFAULT_OUT, help=f"folder for the JSON and PNG (default: ./{DEFAULT_OUT})")
    return parser


def _setup(args):
    profile = 1 if args.quick else 0
    profiles = {**PROFILES, "lr": (3e-3, 3e-3), **(LONG_PROFILES if args.long_context else {})}
    value = {name: getattr(args, name) if getattr(args, name) is not None else pair[profile]
             for name, pair in profiles.items()}
    return PositionExperiment(train_len=value["length"], period=value["period"], steps=value["steps"],
                              batch_size=value["batch"], d_model=value["dim"], num_layers=value["layers"],
                              num_heads=value["heads"], lr=value["lr"], eval_sequences=value["eval_sequences"],
                              seed=args.seed)


class _Runs:
    "One header line and one progress bar per training run."

    def __init__(self, total, steps):
        self.total, self.steps, self.count, self.bar = total, steps, 0, None

    def start(self, name, seed):
        self.count += 1
        print(f"[{self.count}/{self.total}] {name} (seed {seed})", flush=True)
        self.bar = ProgressBar(self.steps, lines=3)

    def step(self, step, loss):
        self.bar.update(step, loss)


def _cell(row, key, seeds):
    if row is None:
        return None
    mean, spread = row[f"{key}_mean"], row[f"{key}_spread"]
    if mean is None:
        return "-"
    if key.startswith("accuracy"):
        return f"{100 * mean:.1f}%" + (f" {ui.mark('plus_minus')} {100 * spread:.1f}" if seeds > 1 else "")
    return f"{mean:.3f}" + (f" {ui.mark('plus_minus')} {spread:.3f}" if seeds > 1 else "")


def format_table(result, new_only=False):
    "The scheme × length table (loss / accuracy) as text lines; `new_only` uses positions >= L only."
    lengths, seeds, train_len = result["lengths"], len(result["seeds"]), result["setup"]["train_len"]
    suffix = "_new" if new_only else ""
    cells = {}
    for scheme in result["schemes"]:
        for n in lengths:
            row = result["summary"][scheme][n]
            loss, accuracy = _cell(row, "loss" + suffix, seeds), _cell(row, "accuracy" + suffix, seeds)
            cells[scheme, n] = f"n/a (table has {train_len} rows)" if row is None else (
                "-" if loss == "-" else f"{loss} / {accuracy}")
    return _length_table("scheme", result["schemes"], lengths, train_len, cells)


def _length_table(label, rows, lengths, train_len, cells):
    "Text lines of a table: one row per name in `rows`, one column per length (L marked), `cells[row, length]`."
    first = max(len(label), *(len(row) for row in rows))
    titles = {n: f"{n} (L)" if n == train_len else str(n) for n in lengths}
    widths = {n: max(len(titles[n]), *(len(cells[row, n]) for row in rows)) for n in lengths}
    header = label.ljust(first) + "  " + "  ".join(titles[n].ljust(widths[n]) for n in lengths)
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append(row.ljust(first) + "  " + "  ".join(cells[row, n].ljust(widths[n]) for n in lengths))
    return [line.rstrip() for line in lines]


def save_plot(result, path):
    "Loss against evaluation length, one line per scheme, the training length marked; ImportError without matplotlib."
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.2))
    markers = dict(zip(SCHEMES, "os^vDx"))               # learned and learned-8L coincide at L: different markers
    for scheme in result["schemes"]:
        points = [(n, result["summary"][scheme][n]) for n in result["lengths"] if result["summary"][scheme][n]]
        xs = [n for n, _ in points]
        ys = np.array([row["loss_mean"] for _, row in points])
        spread = np.array([row["loss_spread"] for _, row in points])
        line, = axis.plot(xs, ys, "-", marker=markers.get(scheme, "o"), markersize=8 if scheme == "learned" else 6,
                          label=scheme)
        if len(result["seeds"]) > 1:
            axis.fill_between(xs, ys - spread, ys + spread, color=line.get_color(), alpha=0.15)
    axis.axvline(result["setup"]["train_len"], color="grey", linestyle=":", label="training length L")
    axis.axhline(result["chance_loss"], color="grey", linestyle="--", label=f"chance log(words) = {result['chance_loss']:.2f}")
    axis.set_xscale("log", base=2)
    axis.set_xticks(result["lengths"], [str(n) for n in result["lengths"]])
    axis.set_xlabel("evaluation length (tokens)")
    axis.set_ylabel("loss on the predictable tokens (nats)")
    axis.set_title(f"train at L={result['setup']['train_len']}, test longer ({len(result['seeds'])} seed(s))")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def save_tying_plot(runs, path):
    "Gradient norm of the token table by step, tied and untied (first seed); ImportError without matplotlib."
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    for name, result in runs[0].items():
        axis.plot(range(1, len(result.table_grad_norms) + 1), result.table_grad_norms, label=f"{name}: token table")
        if result.head_grad_norms:
            axis.plot(range(1, len(result.head_grad_norms) + 1), result.head_grad_norms, alpha=0.6,
                      label=f"{name}: separate head")
    axis.set_xlabel("step")
    axis.set_ylabel("gradient norm (Frobenius)")
    axis.set_yscale("log")
    axis.set_title("tito demo positions --tying: gradient norms during training")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _write(out, name, data):
    path = out / name
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def _plot(saver, data, path):
    try:
        saver(data, path)
    except ImportError:
        print(f"PNG skipped: {plot_hint()}")
    else:
        print(f"wrote {path}")


def _mean_spread(values):
    values = np.array(values, dtype=float)
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0


def run_tying(args, setup, out):
    seeds = list(range(args.seed, args.seed + args.seeds))
    print(f"Tied vs untied output head: word-level language model of the built-in corpus, width {setup.d_model}, "
          f"{setup.num_layers} blocks, context {setup.train_len}, {setup.steps} steps, seeds {seeds}")
    runs, progress = [], _Runs(2 * len(seeds), setup.steps)
    for seed in seeds:
        runs.append(tying_experiment(PositionExperiment(**{**asdict(setup), "seed": seed}),
                                     on_run=progress.start, on_step=progress.step))
    print(f"\nunigram baseline (no context): {runs[0]['tied'].unigram_loss:.3f} nats per word")
    header = (f"{'head':7} {'parameters':>10}  {'final train loss':>16}  {'final eval loss':>15}  "
              f"{'table grad norm: first 10% / last 10% / max':>44}")
    print(header + "\n" + "-" * len(header))
    summary = {}
    for name in ("tied", "untied"):
        tenth = max(1, setup.steps // 10)
        stats = {"parameters": runs[0][name].parameters,
                 "final_train_loss": _mean_spread([r[name].final_train_loss for r in runs]),
                 "final_eval_loss": _mean_spread([r[name].final_eval_loss for r in runs]),
                 "table_grad_first": _mean_spread([np.mean(r[name].table_grad_norms[:tenth]) for r in runs]),
                 "table_grad_last": _mean_spread([np.mean(r[name].table_grad_norms[-tenth:]) for r in runs]),
                 "table_grad_max": _mean_spread([np.max(r[name].table_grad_norms) for r in runs])}
        summary[name] = stats

        def show(pair, digits=3):
            return f"{pair[0]:.{digits}f}" + (f" {ui.mark('plus_minus')} {pair[1]:.{digits}f}" if len(seeds) > 1 else "")
        grads = " / ".join(show(stats[k]) for k in ("table_grad_first", "table_grad_last", "table_grad_max"))
        print(f"{name:7} {stats['parameters']:>10,}  {show(stats['final_train_loss']):>16}  "
              f"{show(stats['final_eval_loss']):>15}  {grads:>44}")
    saved = runs[0]["untied"].parameters - runs[0]["tied"].parameters
    print(f"\ntying saves {saved:,} parameters ({100 * saved / runs[0]['untied'].parameters:.1f}% of the untied model); "
          f"parameters shared by the input table and the head are counted once")
    data = {"setup": asdict(setup), "seeds": seeds, "summary": summary,
            "runs": [{name: asdict(result) for name, result in run.items()} for run in runs]}
    print(f"wrote {_write(out, TYING_JSON, data)}")
    _plot(save_tying_plot, runs, out / TYING_PLOT)
    return EXIT_OK


def format_long_context_table(result):
    "The scaling × length table (copy loss / passkey accuracy) as text lines."
    lengths, seeds, train_len = result["lengths"], len(result["seeds"]), result["setup"]["train_len"]
    pm = f" {ui.mark('plus_minus')} "

    def cell(row):
        loss = f"{row['copy_loss_mean']:.3f}" + (f"{pm}{row['copy_loss_spread']:.3f}" if seeds > 1 else "")
        key = f"{100 * row['passkey_accuracy_mean']:.1f}%" + (
            f"{pm}{100 * row['passkey_accuracy_spread']:.1f}" if seeds > 1 else "")
        return f"{loss} / {key}"
    cells = {(s, n): cell(result["summary"][s][n]) for s in result["scalings"] for n in lengths}
    return _length_table("scaling", result["scalings"], lengths, train_len, cells)


def save_long_context_plot(result, path):
    "Copy loss and passkey accuracy against evaluation length, one line per scaling; ImportError without matplotlib."
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (loss_axis, key_axis) = plt.subplots(1, 2, figsize=(10, 4.2))
    for scaling, marker in zip(result["scalings"], "osv^D"):
        rows = [result["summary"][scaling][n] for n in result["lengths"]]
        loss_axis.plot(result["lengths"], [r["copy_loss_mean"] for r in rows], "-", marker=marker, label=scaling)
        key_axis.plot(result["lengths"], [100 * r["passkey_accuracy_mean"] for r in rows], "-", marker=marker,
                      label=scaling)
    loss_axis.axhline(result["chance_loss"], color="grey", linestyle="--",
                      label=f"chance log(words) = {result['chance_loss']:.2f}")
    key_axis.axhline(100 * result["passkey_chance"], color="grey", linestyle="--", label="chance 1/16")
    for axis in (loss_axis, key_axis):
        axis.axvline(result["setup"]["train_len"], color="grey", linestyle=":", label="training length L")
        axis.set_xscale("log", base=2)
        axis.set_xticks(result["lengths"], [str(n) for n in result["lengths"]])
        axis.set_xlabel("evaluation length (tokens); factor = length / L")
    loss_axis.set_ylabel("copy task: loss on the predictable tokens (nats)")
    key_axis.set_ylabel("passkey retrieval: accuracy (%)")
    key_axis.set_ylim(-2, 102)
    loss_axis.legend(fontsize=8)
    key_axis.legend(fontsize=8)
    figure.suptitle(f"one RoPE model trained at L={result['setup']['train_len']}, read longer with each RoPE scaling "
                    f"({len(result['seeds'])} seed(s))")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def run_long_context(args, setup, out):
    seeds = list(range(args.seed, args.seed + args.seeds))
    print(f"Long context: one RoPE model trained at L = {setup.train_len} on the copy task (period {setup.period}) and "
          f"passkey retrieval, evaluated at {setup.eval_lengths} with RoPE scaling {', '.join(LONG_CONTEXT_SCALINGS)} "
          f"(factor = length / L; no fine-tuning)")
    print(f"model: GPT-2 parts with RoPE, {setup.num_layers} blocks, width {setup.d_model}, {setup.num_heads} heads; "
          f"{setup.steps} steps of {setup.batch_size} sequences, AdamW peak lr {setup.lr}, seeds {seeds}")
    progress = _Runs(len(seeds), setup.steps)
    result = long_context_experiment(setup, LONG_CONTEXT_SCALINGS, seeds, on_run=progress.start, on_step=progress.step)
    spread = f" (mean {ui.mark('plus_minus')} standard deviation over seeds)" if len(seeds) > 1 else ""
    print(f"\ncopy-task loss (nats; chance {result['chance_loss']:.3f}) / passkey accuracy (chance "
          f"{100 * result['passkey_chance']:.1f}%), by evaluation length{spread}")
    print("\n".join(format_long_context_table(result)))
    print(f"\nwrote {_write(out, LONG_JSON, result)}")
    _plot(save_long_context_plot, result, out / LONG_PLOT)
    return EXIT_OK


def main(argv: Optional[Sequence[str]] = None) -> int:
    "`tito demo positions`: train, evaluate, print the tables, write JSON and PNG. Returns the exit status."
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:                   # --help, or a usage error already printed
        return exit_request.code if isinstance(exit_request.code, int) else EXIT_USAGE
    try:                                                # the flags' names in the message, not the fields'
        if args.tying and args.long_context:
            raise ValueError("pass --tying or --long-context, not both")
        if args.dim and args.heads and args.dim % args.heads:
            raise ValueError(f"--dim {args.dim} must be a multiple of --heads {args.heads}")
        if args.period and args.length and args.period > args.length:
            raise ValueError(f"--period {args.period} must be at most --length {args.length}")
        setup = _setup(args)
        if setup.d_model % setup.num_heads:
            raise ValueError(f"--dim {setup.d_model} must be a multiple of --heads {setup.num_heads}")
        if setup.period > setup.train_len:
            raise ValueError(f"--period {setup.period} must be at most --length {setup.train_len}")
    except ValueError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        print(f"{parser.prog}: error: --out {args.out} is a file, not a folder", file=sys.stderr)
        return EXIT_USAGE
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(f"{parser.prog}: error: could not create --out {args.out}: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.tying:
        return run_tying(args, setup, out)
    if args.long_context:
        return run_long_context(args, setup, out)

    seeds = list(range(args.seed, args.seed + args.seeds))
    print(f"Train short, test long: repeat-a-segment task (period {setup.period}, words of the built-in corpus), "
          f"trained at L = {setup.train_len}, evaluated at {setup.eval_lengths}")
    print(f"model: GPT-2 parts, {setup.num_layers} blocks, width {setup.d_model}, {setup.num_heads} heads, tied head; "
          f"{setup.steps} steps of {setup.batch_size} sequences, AdamW peak lr {setup.lr}, seeds {seeds}")
    progress = _Runs(len(SCHEMES) * len(seeds), setup.steps)
    result = position_experiment(setup, SCHEMES, seeds, on_run=progress.start, on_step=progress.step)
    spread = f" (mean {ui.mark('plus_minus')} standard deviation over seeds)" if len(seeds) > 1 else ""
    print(f"\nloss (nats) / accuracy on the predictable tokens, by evaluation length{spread}; "
          f"chance loss {result['chance_loss']:.3f}")
    print("\n".join(format_table(result)))
    print(f"\nthe same, counting only positions >= L = {setup.train_len} (never seen in training)")
    print("\n".join(format_table(result, new_only=True)))
    print(f"\nwrote {_write(out, JSON_FILE, result)}")
    _plot(save_plot, result, out / PLOT_FILE)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
