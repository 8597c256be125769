"""Embedding training speed and memory, side by side in one run (serving-side lookups: bench_serving.py).

    python benchmarks/bench_embeddings.py            # GPT-2 size and a small size (a few minutes)
    python benchmarks/bench_embeddings.py --small    # the small size only (under 500 MB)

The headline rows are whole training steps, as users run them: `zero_grad(); table(ids).backward(g);
opt.step()` with dense Adam, sparse SGD and SparseAdam. The parts of a step follow below them. tinytorch's
sparse backward only sorts the ids; the repeated ids' rows are summed when the step first reads the
gradient, so the sparse update rows include that sum (each timed update gets a new gradient).
Columns: tinytorch; PyTorch CPU when it is installed (`pip install torch==2.13.0`), at its default
thread count; for the parts, a plain-NumPy baseline (`np.add.at` for scatter-adds, the obvious NumPy
code otherwise); for the sparse SGD step, the NumPy floor (one gather of the ids' rows and one update of the
touched rows, the repeated ids' sums given: no NumPy step can be faster). Below the sparse SGD step, PyTorch's
step once more, given a copy of the caller's gradient: PyTorch's sparse gradient keeps a view of that array,
tinytorch's may not (issue 23), so that line is PyTorch under tinytorch's rule. Below the forward lookup, the
same lookup ten times back to back, per call (the lookup row times one call after a pause, as every row does).
The implementations take turns within each row (one run of each, repeated; the best
of each is kept), so drift in the machine hits them alike. What matters are the ratios, and the
last column says whether each target (from the sparse-training issue) is met in this run.

The last line is the run's peak memory (maximum resident set size). The V=1,000,000 sparse-step
rows hold a whole 1,000,000 x d table, so --small uses d=16 there (64 MB) where the full run
uses GPT-2's d=768 (3 GB).
"""
import argparse
import ctypes
import gc
import random
import sys
import time
import tracemalloc

import numpy as np

from tinytorch.core.optimizers import SGD, Adam, SparseAdam
from tinytorch.text.embeddings import Embedding

from _kernels import add_kernels_option, use_kernels
from _torch_reference import settle, torch, torch_text

GPT2 = dict(name="GPT-2 (50257x768, 8x1024 ids)", key="gpt2", vocab_size=50257, dim=768, batch=8, seq=1024)
SMALL = dict(name="small (10000x256, 32x128 ids)", key="small", vocab_size=10000, dim=256, batch=32, seq=128)
LR = 0.1


def interleaved_ms(runs, repeat):
    """Best wall time in ms of each implementation: `runs` maps a name to `(fn, setup)` (setup may be None, and
    runs untimed before each call). The implementations take turns, `repeat` rounds, after one warm-up round,
    in a new order each round (shuffled with a fixed seed): none always runs right after the same other one,
    whose memory and cache state it would inherit. Each turn is `settle()`, one untimed call, one timed call:
    the timed call runs back to back with its own kind, as in a training loop, not in the wake of another."""
    best = {name: float("inf") for name in runs}
    order, shuffle = list(runs), random.Random(0).shuffle
    for round_ in range(repeat + 1):
        shuffle(order)
        for name in order:
            fn, setup = runs[name]
            settle()                                      # threads the last run left spinning go to sleep
            for timed in (False, True):                   # warm this implementation's threads and caches
                if setup is not None:
                    setup()
                start = time.perf_counter()
                fn()
                if timed and round_:                      # round 0 warms up (first-call allocations, caches)
                    best[name] = min(best[name], time.perf_counter() - start)
    return {name: ms * 1e3 for name, ms in best.items()}


def make_ids(vocab_size, count, distribution, rng):
    "Token ids: uniform over the table, or Zipf-distributed like real text (a few ids very often)."
    if distribution == "uniform":
        return rng.integers(0, vocab_size, count)
    ranks = rng.zipf(1.1, count) - 1
    return np.minimum(ranks, vocab_size - 1)


# ---------------------------------------------------------------------------------------------
# Whole training steps: zero_grad + forward + backward + optimiser step.

OPTIMIZERS = {"dense Adam step": (False, lambda p: Adam(p, lr=1e-3), lambda p: torch.optim.Adam(p, lr=1e-3)),
              "sparse SGD step": (True, lambda p: SGD(p, lr=LR), lambda p: torch.optim.SGD(p, lr=LR)),
              "SparseAdam step": (True, lambda p: SparseAdam(p, lr=1e-3), lambda p: torch.optim.SparseAdam(p, lr=1e-3))}


def tinytorch_step(weights, ids, upstream, sparse, make_optimizer):
    table = Embedding.from_pretrained(weights.copy(), freeze=False, sparse=sparse)
    optimizer = make_optimizer([table.weight])

    def step():
        optimizer.zero_grad()
        table(ids).backward(upstream)
        optimizer.step()
    return step


def torch_step(weights, ids, upstream, sparse, make_optimizer, copy_upstream=False):
    """PyTorch's step. `copy_upstream=True` passes `backward` a copy of the caller's gradient made in the step:
    PyTorch's sparse gradient keeps a view of the array given to `backward` (a later write into it changes the
    gradient), which tinytorch may not (issue 23), so this is PyTorch keeping no view of the caller's array."""
    table = torch.nn.Embedding.from_pretrained(torch.from_numpy(weights.copy()), freeze=False, sparse=sparse)
    optimizer = make_optimizer([table.weight])
    token_ids, grad_out = torch.from_numpy(ids), torch.from_numpy(upstream)

    def step():
        optimizer.zero_grad()
        table(token_ids).backward(grad_out.clone() if copy_upstream else grad_out)
        optimizer.step()
    return step


def numpy_floor_sparse_sgd_step(weights, ids, upstream):
    """The fewest NumPy passes a sparse SGD step needs (issue 27's floor): one gather of the ids' rows (the forward)
    and one read-modify-write of the touched rows (`table[u] -= lr * sums`). The sums of repeated ids are given,
    computed untimed: a real step must also compute them, so no NumPy step can be faster than this."""
    table = weights.copy()
    flat = ids.reshape(-1)
    unique, inverse = np.unique(flat, return_inverse=True)
    sums = np.zeros((len(unique), table.shape[1]), table.dtype)
    np.add.at(sums, inverse, upstream.reshape(-1, table.shape[1]))
    sums *= LR

    def step():
        np.take(table, ids, axis=0)
        table[unique] -= sums
    return step


COPYING = "torch, copying"        # PyTorch's step given a copy of the caller's gradient (torch_step, copy_upstream)
IN_A_ROW = 10                     # "lookup, 10 in a row": calls back to back, timed together, shown per call


def step_rows(weights, ids, upstream, repeat):
    rows = {}
    for op, (sparse, ours, theirs) in OPTIMIZERS.items():
        runs = {"tinytorch": (tinytorch_step(weights, ids, upstream, sparse, ours), None)}
        if torch is not None:
            runs["torch"] = (torch_step(weights, ids, upstream, sparse, theirs), None)
        if op == "sparse SGD step":
            runs["numpy"] = (numpy_floor_sparse_sgd_step(weights, ids, upstream), None)
            if torch is not None:
                runs[COPYING] = (torch_step(weights, ids, upstream, sparse, theirs, copy_upstream=True), None)
        rows[op] = interleaved_ms(runs, repeat if sparse else max(3, repeat // 3))
        del runs
        release_freed_memory()
    return rows


# ---------------------------------------------------------------------------------------------
# The parts of a step, each timed alone (the other parts' results restored untimed before each run).

def in_a_row(lookup):
    "`lookup` called IN_A_ROW times back to back, as one timed run (part_rows divides its time by IN_A_ROW)."
    def run():
        for _ in range(IN_A_ROW):
            lookup()
    return run


def tinytorch_parts(weights, ids, upstream, sparse):
    table = Embedding.from_pretrained(weights.copy(), freeze=False, sparse=sparse)
    out = table(ids)
    clear = lambda: setattr(table.weight, "grad", None)
    out.backward(upstream)
    grad = table.weight.grad
    restore = lambda: setattr(table.weight, "grad", grad)
    if not sparse:
        return {"forward lookup": (lambda: table(ids), None), "lookup, 10 in a row": (in_a_row(lambda: table(ids)), None),
                "dense backward": (lambda: out.backward(upstream), clear),
                "dense Adam update": (Adam([table.weight], lr=1e-3).step, restore)}
    def fresh():                                # a new lazy gradient: the update sums its repeated ids itself,
        clear()                                 # as in a step (restoring `grad` would reuse the first sums)
        out.backward(upstream)
    return {"sparse backward": (lambda: out.backward(upstream), clear),
            "sparse SGD update": (SGD([table.weight], lr=LR).step, fresh),
            "SparseAdam update": (SparseAdam([table.weight], lr=1e-3).step, fresh)}


def torch_parts(weights, ids, upstream, sparse):
    table = torch.nn.Embedding.from_pretrained(torch.from_numpy(weights.copy()), freeze=False, sparse=sparse)
    token_ids, grad_out = torch.from_numpy(ids), torch.from_numpy(upstream)
    out = table(token_ids)
    clear = lambda: setattr(table.weight, "grad", None)
    backward = lambda: out.backward(grad_out, retain_graph=True)
    backward()
    grad = table.weight.grad
    restore = lambda: setattr(table.weight, "grad", grad)
    if not sparse:
        return {"forward lookup": (lambda: table(token_ids), None),
                "lookup, 10 in a row": (in_a_row(lambda: table(token_ids)), None), "dense backward": (backward, clear),
                "dense Adam update": (torch.optim.Adam([table.weight], lr=1e-3).step, restore)}
    return {"sparse backward": (backward, clear), "sparse SGD update": (torch.optim.SGD([table.weight], lr=LR).step, restore),
            "SparseAdam update": (torch.optim.SparseAdam([table.weight], lr=1e-3).step, restore)}


def numpy_parts(weights, ids, upstream, sparse):
    """The obvious NumPy: fancy-index gather, np.add.at scatter-adds (no Adam: its eight table-sized temporaries
    would push --small over 500 MB, and no target compares with it)."""
    vocab_size, dim = weights.shape
    flat_ids, rows = ids.reshape(-1), upstream.reshape(-1, dim)
    table = weights.copy()

    def dense_backward():
        grad = np.zeros_like(table)
        np.add.at(grad, flat_ids, rows)

    def sparse_backward():
        unique, inverse = np.unique(flat_ids, return_inverse=True)
        sums = np.zeros((len(unique), dim), table.dtype)
        np.add.at(sums, inverse, rows)

    def sparse_sgd_update():                  # the naive sparse update: scatter straight into the table
        np.add.at(table, flat_ids, -LR * rows)

    if sparse:
        return {"sparse backward": (sparse_backward, None), "sparse SGD update": (sparse_sgd_update, None)}
    return {"forward lookup": (lambda: table[ids], None), "lookup, 10 in a row": (in_a_row(lambda: table[ids]), None),
            "dense backward": (dense_backward, None)}


PARTS = ["forward lookup", "lookup, 10 in a row", "dense backward", "sparse backward", "sparse SGD update", "SparseAdam update",
         "dense Adam update"]
SPARSE_PARTS = {"sparse backward", "sparse SGD update", "SparseAdam update"}


def part_rows(weights, ids, upstream, repeat):
    makers = {"tinytorch": tinytorch_parts, "numpy": numpy_parts}
    if torch is not None:
        makers["torch"] = torch_parts
    rows = {}
    for op in PARTS:                         # each row builds its own tables, so rows' memory does not add up
        sparse = op in SPARSE_PARTS
        runs = {name: make(weights, ids, upstream, sparse).get(op) for name, make in makers.items()}
        rounds = max(3, repeat // 3) if op.startswith("dense") else repeat
        rows[op] = interleaved_ms({name: run for name, run in runs.items() if run is not None}, rounds)
        if op == "lookup, 10 in a row":
            rows[op] = {name: ms / IN_A_ROW for name, ms in rows[op].items()}      # per call
        del runs
        release_freed_memory()
    return rows


# ---------------------------------------------------------------------------------------------
# Targets (ratios tinytorch / PyTorch, whole steps at GPT-2 size) and the tables.

def target(op, config, times):
    "(target text, met) for this row, or None where the issue sets no target."
    ours, theirs, numpy_ms = times.get("tinytorch"), times.get("torch"), times.get("numpy")
    ratio = None if theirs is None else ours / theirs
    if op == "dense backward":
        if config["key"] == "gpt2":
            return ">= 4x faster than np.add.at", numpy_ms / ours >= 4
        return "<= 2.0x torch", None if ratio is None else ratio <= 2.0
    if config["key"] != "gpt2":
        return None
    limits = {"sparse SGD step": (1.5, "<= 1.5x torch (stretch 1.0x)"), "SparseAdam step": (0.8, "<= 0.8x torch"),
              "dense Adam step": (1.0, "<= 1.0x torch"), "forward lookup": (1.0, "<= 1.0x torch")}
    if op not in limits:
        return None
    return limits[op][1], None if ratio is None else ratio <= limits[op][0]


def cell(value, width, spec=".2f", suffix=""):
    "A right-aligned table cell; '-' where there is no measurement."
    return ("-" if value is None else format(value, spec) + suffix).rjust(width)


def print_rows(title, config, rows, numpy_header="numpy ms"):
    print(f"  {title:<19}{'tinytorch ms':>13}{'torch ms':>10}{numpy_header:>10}{'ours/torch':>12}{'numpy/ours':>12}"
          f"  target")
    for op, times in rows.items():
        ours, theirs, numpy_ms = times.get("tinytorch"), times.get("torch"), times.get("numpy")
        goal = target(op, config, times)
        verdict = "" if goal is None else f"{goal[0]}: " + {True: "met", False: "MISSED", None: "needs torch"}[goal[1]]
        print(f"  {op:<19}{cell(ours, 13)}{cell(theirs, 10)}{cell(numpy_ms, 10)}"
              f"{cell(None if theirs is None else ours / theirs, 12, '.2f', 'x')}"
              f"{cell(None if numpy_ms is None else numpy_ms / ours, 12, '.1f', 'x')}  {verdict}")
        if COPYING in times:
            print(f"    (PyTorch keeps a view of the gradient given to backward, tinytorch may not (issue 23); PyTorch "
                  f"copying it first: {times[COPYING]:.2f} ms, ours {ours / times[COPYING]:.2f}x that)")
        if op == "lookup, 10 in a row":
            print(f"    (per call, {IN_A_ROW} calls back to back with no pause: the row above times one call after a pause)")


def comparison(config, distribution, repeat, rng):
    vocab_size, dim = config["vocab_size"], config["dim"]
    weights = (rng.standard_normal((vocab_size, dim)) * 0.02).astype(np.float32)
    ids = make_ids(vocab_size, config["batch"] * config["seq"], distribution, rng).reshape(config["batch"], config["seq"])
    upstream = rng.standard_normal((config["batch"], config["seq"], dim)).astype(np.float32)
    print(f"\n{config['name']}, {distribution} ids ({len(np.unique(ids))} distinct)")
    print_rows("whole step", config, step_rows(weights, ids, upstream, repeat), numpy_header="floor ms")
    print_rows("part of a step", config, part_rows(weights, ids, upstream, repeat))


def sparse_step(vocab_size, dim, ids, upstream):
    "Forward, sparse backward and one SGD step on a table of `vocab_size` rows (zeros: cheap to make)."
    table = Embedding.from_pretrained(np.zeros((vocab_size, dim), np.float32), freeze=False, sparse=True)
    sgd = SGD([table.weight], lr=LR)

    def step():
        table.weight.grad = None
        table(ids).backward(upstream)
        sgd.step()
    return step


def scaling_rows(dim, ids, upstream, repeat):
    "A sparse step should cost the same whatever the vocabulary size: it touches only the batch's rows."
    rows = []
    for vocab_size in (10_000, 100_000, 1_000_000):
        rows.append((vocab_size, interleaved_ms({"tinytorch": (sparse_step(vocab_size, dim, ids, upstream), None)},
                                                repeat)["tinytorch"]))
    return rows


def peak_sparse_step_bytes(vocab_size, dim, ids, upstream):
    "Peak memory NumPy allocates during one sparse step (forward, backward, SGD), via tracemalloc."
    step = sparse_step(vocab_size, dim, ids, upstream)
    step()                                    # warm up: first-call allocations are not the step's
    tracemalloc.start()
    step()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="only the small size (quick)")
    parser.add_argument("--repeat", type=int, default=15,
                        help="rounds per row (dense Adam rows: a third of them); each implementation's best is kept")
    add_kernels_option(parser)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"numpy {np.__version__}; torch {torch_text()}")
    print(use_kernels(args.kernels, args.workers_apart))
    # The vocabulary-size rows first: their 1,000,000-row tables are freed (and returned to the OS) before
    # the comparisons start, whose PyTorch column keeps its allocator's memory; printed in the usual order.
    # --small keeps its 1,000,000-row table at 64 MB (d=16; the step briefly holds two copies), so the
    # whole run stays under 500 MB.
    dim, batch, seq = (16, 32, 128) if args.small else (768, 8, 1024)
    ids = make_ids(10_000, batch * seq, "uniform", rng).reshape(batch, seq)
    upstream = rng.standard_normal((batch, seq, dim)).astype(np.float32)
    scaling = scaling_rows(dim, ids, upstream, args.repeat)
    peak = peak_sparse_step_bytes(1_000_000, dim, ids, upstream)
    release_freed_memory()

    configs = [SMALL] if args.small else [GPT2, SMALL]
    for config in configs:
        for distribution in ("uniform", "zipf"):
            release_freed_memory()
            comparison(config, distribution, args.repeat, rng)

    print(f"\nSparse step (forward + sparse backward + SGD) vs vocabulary size, d={dim}, same {batch}x{seq} ids")
    for vocab_size, ms in scaling:
        print(f"  V={vocab_size:>9,}  {ms:8.2f} ms  ({ms / scaling[0][1]:.2f}x V=10k; target <= 1.3x)")
    budget = 4 * ids.size * dim * 4
    print(f"\nPeak extra memory of one sparse step at V=1,000,000: {peak / 1e6:.1f} MB "
          f"(budget 4 x ids x d x 4 B = {budget / 1e6:.1f} MB; a dense V x d gradient would be "
          f"{1_000_000 * dim * 4 / 1e6:.0f} MB)")
    print(f"\nPeak memory of this run (max resident set size, torch included if installed): {peak_rss_text()}")
    return 0


def release_freed_memory():
    """Between sections, untimed: hand memory that the last section freed back to the OS (glibc keeps freed
    10 MB arrays in its heap once its mmap threshold has grown), so sections' peaks do not add up."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):                    # not glibc (macOS, Windows, musl): nothing to do
        pass


def peak_rss_text():
    "This process's peak resident memory so far, as text (`resource` is Unix-only)."
    try:
        import resource
    except ImportError:
        return "not measured (no `resource` module on this platform)"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak_bytes = peak if sys.platform == "darwin" else peak * 1024      # macOS reports bytes, Linux KiB
    return f"{peak_bytes / 1e6:.0f} MB"


if __name__ == "__main__":
    sys.exit(main())
