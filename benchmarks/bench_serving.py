"""Serving-side embedding speed and bytes: quantised vs float lookups, EmbeddingBag, and memory bandwidth.

    python benchmarks/bench_serving.py            # GPT-2 size: 50257 x 768 table, 8 x 1024 ids (about 10 s; 20 s with PyTorch)
    python benchmarks/bench_serving.py --small    # 10000 x 256, 2 x 1024 ids (seconds)

One table. Rows: a lookup of every id from a table stored as float32 / float16 / int8 / int4
(`Embedding`, `QuantizedEmbedding`), then `EmbeddingBag` forward and forward + backward for each mode
(the ids cut into bags of random lengths by offsets), with `Embedding` + mean as the unfused baseline.
Columns: the table's bytes and the bytes one token reads from it; our best time; the table bytes read
per second as a fraction of this machine's memcpy bandwidth (np.copyto of 256 MB, bytes copied / time);
our time relative to the float32 lookup; PyTorch CPU (`torch.nn.Embedding`, `torch.ao.nn.quantized.Embedding`
with quint8 / quint4x2, `torch.nn.EmbeddingBag`) when it is installed (`pip install torch==2.13.0`), and
our time relative to it. Times are the best of several runs; compare ratios from the same run, not
milliseconds across machines.
"""
import argparse
import sys
import warnings

import numpy as np

from tinytorch.text.bag import EmbeddingBag
from tinytorch.text.embeddings import Embedding
from tinytorch.text.quantization import (QuantizedEmbedding, best_seconds, bytes_per_token, memcpy_bandwidth,
                                         table_bytes)

from _kernels import add_kernels_option, use_kernels
from _torch_reference import torch, torch_text

GPT2 = dict(name="GPT-2 (50257x768, 8x1024 ids, 1024 bags)", vocab_size=50257, dim=768, tokens=8 * 1024, bags=1024)
SMALL = dict(name="small (10000x256, 2x1024 ids, 256 bags)", vocab_size=10000, dim=256, tokens=2 * 1024, bags=256)
BAG_MODES = ("sum", "mean", "max")


def best_ms(fn, repeat):
    return best_seconds(fn, repeat) * 1e3


def random_offsets(num_tokens, num_bags, rng):
    "Where each of `num_bags` bags of random lengths starts in `num_tokens` ids (the first at 0, some empty)."
    return np.concatenate(([0], np.sort(rng.integers(0, num_tokens + 1, num_bags - 1))))


# ---------------------------------------------------------------------------------------------
# One function per implementation; each returns {operation: milliseconds}.

def tinytorch_times(weights, ids, offsets, repeat):
    dim = weights.shape[1]
    times = {}
    lookups = {"float32": Embedding.from_pretrained(weights), "float16": Embedding.from_pretrained(weights.astype(np.float16)),
               "int8": QuantizedEmbedding.from_float(weights, bits=8), "int4": QuantizedEmbedding.from_float(weights, bits=4)}
    for dtype, table in lookups.items():
        times[f"lookup {dtype}"] = best_ms(lambda: table(ids), repeat)

    upstream = np.random.default_rng(1).standard_normal((len(offsets), dim)).astype(np.float32)
    for mode in BAG_MODES:
        bag = EmbeddingBag.from_pretrained(weights, freeze=False, mode=mode)
        times[f"bag {mode} forward"] = best_ms(lambda: bag(ids, offsets), repeat)

        def forward_backward():
            bag.weight.grad = None
            bag(ids, offsets).backward(upstream)
        times[f"bag {mode} fwd+bwd"] = best_ms(forward_backward, max(2, repeat // 2))

    # the unfused way to average fixed-size bags: a lookup, then a mean over the bag axis
    table = Embedding.from_pretrained(weights)
    fixed = ids.reshape(len(offsets), -1) if len(ids) % len(offsets) == 0 else None
    if fixed is not None:
        times["Embedding + mean"] = best_ms(lambda: table(fixed).mean(axis=1), repeat)
        fixed_bag = EmbeddingBag.from_pretrained(weights, mode="mean")
        times["bag mean, fixed bags"] = best_ms(lambda: fixed_bag(fixed), repeat)
    return times


def torch_quantized_embedding(weights, bits):
    "PyTorch's quantised embedding with per-row float qparams (the same scheme), or None if unavailable."
    from torch.ao.quantization import PerChannelMinMaxObserver
    import torch.ao.nn.quantized as nnq

    dtype = torch.quint8 if bits == 8 else torch.quint4x2
    table = torch.from_numpy(weights)
    observer = PerChannelMinMaxObserver(ch_axis=0, dtype=dtype, qscheme=torch.per_channel_affine_float_qparams,
                                        quant_min=0, quant_max=2 ** bits - 1)
    observer(table)
    scales, zero_points = observer.calculate_qparams()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # quantize_per_channel is deprecated in torch 2.13
        quantized = torch.quantize_per_channel(table, scales.float(), zero_points.float(), 0, dtype)
        module = nnq.Embedding(*weights.shape, dtype=dtype)
        module.set_weight(quantized)
    return module


def torch_times(weights, ids, offsets, repeat):
    token_ids, starts = torch.from_numpy(ids), torch.from_numpy(offsets)
    times = {}
    with torch.no_grad():
        for dtype, table in (("float32", torch.from_numpy(weights.copy())),
                             ("float16", torch.from_numpy(weights.astype(np.float16)))):
            module = torch.nn.Embedding.from_pretrained(table)
            times[f"lookup {dtype}"] = best_ms(lambda: module(token_ids), repeat)
        for bits in (8, 4):
            try:
                module = torch_quantized_embedding(weights, bits)
            except Exception as error:                 # quantised kernels are optional builds
                print(f"  (torch int{bits} embedding unavailable: {type(error).__name__}: {error})")
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                times[f"lookup int{bits}"] = best_ms(lambda: module(token_ids), repeat)

    upstream = torch.from_numpy(np.random.default_rng(1).standard_normal((len(offsets), weights.shape[1])).astype(np.float32))
    for mode in BAG_MODES:
        bag = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(weights.copy()), freeze=False, mode=mode)
        with torch.no_grad():
            times[f"bag {mode} forward"] = best_ms(lambda: bag(token_ids, starts), repeat)

        def forward_backward():
            bag.weight.grad = None
            bag(token_ids, starts).backward(upstream)
        times[f"bag {mode} fwd+bwd"] = best_ms(forward_backward, max(2, repeat // 2))

    if len(ids) % len(offsets) == 0:
        fixed = token_ids.reshape(len(offsets), -1)
        table = torch.nn.Embedding.from_pretrained(torch.from_numpy(weights.copy()))
        bag = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(weights.copy()), mode="mean")
        with torch.no_grad():
            times["Embedding + mean"] = best_ms(lambda: table(fixed).mean(dim=1), repeat)
            times["bag mean, fixed bags"] = best_ms(lambda: bag(fixed), repeat)
    return times


# ---------------------------------------------------------------------------------------------
# The table

def read_bytes(operation, dim):
    "Table bytes one token reads for this operation (None for backward passes)."
    if operation.startswith("lookup "):
        return bytes_per_token(dim, operation.split()[1])
    return None if "bwd" in operation else bytes_per_token(dim, "float32")


def table_megabytes(operation, vocab_size, dim):
    dtype = operation.split()[1] if operation.startswith("lookup ") else "float32"
    return table_bytes(vocab_size, dim, dtype) / 1e6


def cell(value, width, spec=".2f", suffix=""):
    "A right-aligned table cell; '-' where there is no measurement."
    return ("-" if value is None else format(value, spec) + suffix).rjust(width)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="a small table only (quick)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement; the best is kept")
    add_kernels_option(parser)
    args = parser.parse_args(argv)
    config = SMALL if args.small else GPT2
    rng = np.random.default_rng(0)
    weights = (rng.standard_normal((config["vocab_size"], config["dim"]), dtype=np.float32) * 0.02)
    ids = rng.integers(0, config["vocab_size"], config["tokens"])
    offsets = random_offsets(config["tokens"], config["bags"], rng)

    print(f"numpy {np.__version__}; torch {torch_text('not installed (pip install torch==2.13.0 adds its columns)')}")
    print(use_kernels(args.kernels, args.workers_apart))
    bandwidth = memcpy_bandwidth(repeat=args.repeat)
    print(f"memcpy bandwidth: {bandwidth / 1e9:.1f} GB/s (np.copyto of 256 MB; bytes copied / time)")

    ours = tinytorch_times(weights, ids, offsets, args.repeat)
    reference = torch_times(weights, ids, offsets, args.repeat) if torch is not None else {}
    baseline = ours["lookup float32"]
    dim, tokens = config["dim"], config["tokens"]

    print(f"\n{config['name']}")
    print(f"  {'operation':<21}{'table MB':>9}{'B/token':>8}{'ours ms':>9}{'of memcpy':>10}{'vs f32 lookup':>14}"
          f"{'torch ms':>10}{'ours/torch':>11}")
    for operation, ms in ours.items():
        per_token = read_bytes(operation, dim)
        fraction = None if per_token is None else per_token * tokens / (ms / 1e3) / bandwidth
        torch_ms = reference.get(operation)
        print(f"  {operation:<21}{table_megabytes(operation, config['vocab_size'], dim):>9.1f}"
              f"{cell(per_token, 8, ',d')}{ms:>9.2f}{cell(None if fraction is None else 100 * fraction, 10, '.1f', '%')}"
              f"{ms / baseline:>13.2f}x{cell(torch_ms, 10)}"
              f"{cell(None if torch_ms is None else ms / torch_ms, 11, '.2f', 'x')}")
    print("\n  of memcpy = table bytes read per second / memcpy bandwidth. Quantised lookups read 4-8x fewer table"
          "\n  bytes but still write float32 rows; in NumPy the dequantisation passes over that output dominate.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
