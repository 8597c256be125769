"""Embedding training speed and memory, side by side in one run (serving-side lookups: bench_serving.py).

    python benchmarks/bench_embeddings.py            # GPT-2 size and a small size (about a minute)
    python benchmarks/bench_embeddings.py --small    # the small size only (seconds, under 500 MB)

The last line is the run's peak memory (maximum resident set size). The V=1,000,000 sparse-step
rows hold a whole 1,000,000 x d table, so --small uses d=16 there (64 MB) where the full run
uses GPT-2's d=768 (3 GB).

Columns: tinytorch; a plain-NumPy baseline (`np.add.at` for scatter-adds, the obvious NumPy
code otherwise); PyTorch CPU when it is installed (`pip install torch==2.13.0`), skipped
otherwise. Each time is the best of several runs; what matters are the ratios in the last
columns, measured in the same run on the same machine, not the absolute milliseconds.
"""
import argparse
import ctypes
import gc
import sys
import time
import tracemalloc

import numpy as np

from tinytorch.core.autograd import RowSparseGrad
from tinytorch.core.optimizers import SGD, Adam, SparseAdam
from tinytorch.text.embeddings import Embedding

try:
    import torch
except ImportError:
    torch = None

GPT2 = dict(name="GPT-2 (50257x768, 8x1024 ids)", vocab_size=50257, dim=768, batch=8, seq=1024)
SMALL = dict(name="small (10000x256, 32x128 ids)", vocab_size=10000, dim=256, batch=32, seq=128)
LR = 0.1


def best_ms(fn, setup=None, repeat=5):
    "Best wall time of `fn()` in milliseconds over `repeat` runs; `setup()` runs untimed before each."
    best = float("inf")
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def make_ids(vocab_size, count, distribution, rng):
    "Token ids: uniform over the table, or Zipf-distributed like real text (a few ids very often)."
    if distribution == "uniform":
        return rng.integers(0, vocab_size, count)
    ranks = rng.zipf(1.1, count) - 1
    return np.minimum(ranks, vocab_size - 1)


# ---------------------------------------------------------------------------------------------
# One function per (implementation, operation). Each returns milliseconds.

def tinytorch_times(weights, ids, upstream, repeat):
    vocab_size, dim = weights.shape
    times = {}
    dense = Embedding.from_pretrained(weights, freeze=False)
    sparse = Embedding.from_pretrained(weights, freeze=False, sparse=True)
    times["forward lookup"] = best_ms(lambda: dense(ids), repeat=repeat)

    out_dense, out_sparse = dense(ids), sparse(ids)
    clear = lambda: (setattr(dense.weight, "grad", None), setattr(sparse.weight, "grad", None))
    times["dense backward"] = best_ms(lambda: out_dense.backward(upstream), clear, repeat)
    times["sparse backward"] = best_ms(lambda: out_sparse.backward(upstream), clear, repeat)

    out_sparse.backward(upstream)
    sparse_grad = sparse.weight.grad
    sgd = SGD([sparse.weight], lr=LR)
    times["sparse SGD step"] = best_ms(sgd.step, lambda: setattr(sparse.weight, "grad", sparse_grad), repeat)
    sparse_adam = SparseAdam([sparse.weight], lr=1e-3)
    times["SparseAdam step"] = best_ms(sparse_adam.step, lambda: setattr(sparse.weight, "grad", sparse_grad), repeat)

    out_dense.backward(upstream)
    dense_grad = dense.weight.grad
    adam = Adam([dense.weight], lr=1e-3)
    times["dense Adam step"] = best_ms(adam.step, lambda: setattr(dense.weight, "grad", dense_grad),
                                       max(2, repeat // 2))
    return times


def numpy_baseline_times(weights, ids, upstream, repeat):
    "The obvious NumPy: fancy-index gather, np.add.at scatter-adds, Adam with temporaries."
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

    def sparse_sgd_step():                    # the naive sparse update: scatter straight into the table
        np.add.at(table, flat_ids, -LR * rows)

    m, v, grad = np.zeros_like(table), np.zeros_like(table), np.ones_like(table)

    def dense_adam_step():
        nonlocal m, v
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        table[...] -= 1e-3 * (m / 0.1) / (np.sqrt(v / 0.001) + 1e-8)

    return {"forward lookup": best_ms(lambda: table[ids], repeat=repeat),
            "dense backward": best_ms(dense_backward, repeat=repeat),
            "sparse backward": best_ms(sparse_backward, repeat=repeat),
            "sparse SGD step": best_ms(sparse_sgd_step, repeat=repeat),
            "dense Adam step": best_ms(dense_adam_step, repeat=max(2, repeat // 2))}


def torch_times(weights, ids, upstream, repeat):
    table_dense = torch.nn.Embedding.from_pretrained(torch.from_numpy(weights.copy()), freeze=False)
    table_sparse = torch.nn.Embedding.from_pretrained(torch.from_numpy(weights.copy()), freeze=False, sparse=True)
    token_ids, grad_out = torch.from_numpy(ids), torch.from_numpy(upstream)
    times = {}
    with torch.no_grad():
        times["forward lookup"] = best_ms(lambda: table_dense(token_ids), repeat=repeat)
    clear = lambda: (setattr(table_dense.weight, "grad", None), setattr(table_sparse.weight, "grad", None))
    out_dense, out_sparse = table_dense(token_ids), table_sparse(token_ids)
    times["dense backward"] = best_ms(lambda: out_dense.backward(grad_out, retain_graph=True), clear, repeat)
    times["sparse backward"] = best_ms(lambda: out_sparse.backward(grad_out, retain_graph=True), clear, repeat)

    out_sparse.backward(grad_out, retain_graph=True)
    sparse_grad = table_sparse.weight.grad
    restore_sparse = lambda: setattr(table_sparse.weight, "grad", sparse_grad)
    sgd = torch.optim.SGD([table_sparse.weight], lr=LR)
    times["sparse SGD step"] = best_ms(sgd.step, restore_sparse, repeat)
    sparse_adam = torch.optim.SparseAdam([table_sparse.weight], lr=1e-3)
    times["SparseAdam step"] = best_ms(sparse_adam.step, restore_sparse, repeat)
    # The sparse table, its graph and its optimizers' state are done with: free them before the dense Adam
    # step allocates its own state, so the two do not add up in the run's peak memory (--small: < 500 MB).
    del sgd, sparse_adam, restore_sparse, sparse_grad, out_sparse, table_sparse, clear
    release_freed_memory()

    out_dense.backward(grad_out, retain_graph=True)
    dense_grad = table_dense.weight.grad
    adam = torch.optim.Adam([table_dense.weight], lr=1e-3)
    times["dense Adam step"] = best_ms(adam.step, lambda: setattr(table_dense.weight, "grad", dense_grad),
                                       max(2, repeat // 2))
    return times


# ---------------------------------------------------------------------------------------------
# Tables

OPERATIONS = ["forward lookup", "dense backward", "sparse backward", "sparse SGD step", "SparseAdam step",
              "dense Adam step"]
# Targets from the sparse-training issue, as ratios against PyTorch (and np.add.at for dense backward).
TARGETS = {"forward lookup": "<= 1.0x torch", "dense backward": "<= 1.0x torch, >= 4x faster than add.at",
           "sparse SGD step": "<= 2.0x torch", "SparseAdam step": "<= 1.0x torch"}


def cell(value, width, spec=".2f", suffix=""):
    "A right-aligned table cell; '-' where there is no measurement."
    return ("-" if value is None else format(value, spec) + suffix).rjust(width)


def comparison_rows(config, distribution, repeat, rng):
    vocab_size, dim = config["vocab_size"], config["dim"]
    weights = (rng.standard_normal((vocab_size, dim)) * 0.02).astype(np.float32)
    ids = make_ids(vocab_size, config["batch"] * config["seq"], distribution, rng).reshape(config["batch"], config["seq"])
    upstream = rng.standard_normal((config["batch"], config["seq"], dim)).astype(np.float32)
    ours = tinytorch_times(weights, ids, upstream, repeat)
    release_freed_memory()
    baseline = numpy_baseline_times(weights, ids, upstream, repeat)
    release_freed_memory()
    reference = torch_times(weights, ids, upstream, repeat) if torch is not None else {}
    rows = []
    for op in OPERATIONS:
        t, b, r = ours.get(op), baseline.get(op), reference.get(op)
        rows.append(dict(op=op, tinytorch=t, numpy=b, torch=r,
                         speedup_vs_numpy=None if b is None else b / t,
                         ratio_vs_torch=None if r is None else t / r, target=TARGETS.get(op, ""),
                         unique=len(np.unique(ids))))
    return rows


def print_comparison(config, distribution, rows):
    print(f"\n{config['name']}, {distribution} ids ({rows[0]['unique']} distinct)")
    print(f"  {'operation':<17}{'tinytorch ms':>13}{'numpy ms':>10}{'torch ms':>10}"
          f"{'numpy/ours':>12}{'ours/torch':>12}  target")
    for row in rows:
        print(f"  {row['op']:<17}{cell(row['tinytorch'], 13)}{cell(row['numpy'], 10)}{cell(row['torch'], 10)}"
              f"{cell(row['speedup_vs_numpy'], 12, '.1f', 'x')}{cell(row['ratio_vs_torch'], 12, '.2f', 'x')}"
              f"  {row['target']}")


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
        rows.append((vocab_size, best_ms(sparse_step(vocab_size, dim, ids, upstream), repeat=repeat)))
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
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement; the best is kept")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"numpy {np.__version__}; torch {torch.__version__ + f' ({torch.get_num_threads()} threads)' if torch else 'not installed (pip install torch==2.13.0 adds its column)'}")
    # The vocabulary-size rows first: their 1,000,000-row tables are freed (and returned to the OS) before
    # the comparisons start, whose PyTorch column keeps its allocator's memory; printed in the usual order.
    # --small keeps its 1,000,000-row table at 64 MB (d=16; the step briefly holds two copies), so the
    # whole run stays under 500 MB.
    dim, batch, seq = (16, 32, 128) if args.small else (768, 8, 1024)
    ids = make_ids(10_000, batch * seq, "uniform", rng).reshape(batch, seq)
    upstream = rng.standard_normal((batch, seq, dim)).astype(np.float32)
    scaling = scaling_rows(dim, ids, upstream, args.repeat)
    peak = peak_sparse_step_bytes(1_000_000, dim, ids, upstream)

    configs = [SMALL] if args.small else [GPT2, SMALL]
    for config in configs:
        for distribution in ("uniform", "zipf"):
            release_freed_memory()
            print_comparison(config, distribution, comparison_rows(config, distribution, args.repeat, rng))

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
