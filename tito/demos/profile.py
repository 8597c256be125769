"""`tito demo profile`: where a training step's time goes, per autograd op and per module (module 14's profiler).

Two steps are profiled: a small GPT-2-architecture training step (AdamW) and a sparse embedding step at GPT-2's
table size (lookup, sparse backward, SGD). The profiler is `tinytorch.profiler.profile`; this file builds the
steps, parses the flags and prints the tables.
"""
from __future__ import annotations

import sys
from typing import Optional, Sequence

import numpy as np

from tinytorch.core.optimizers import SGD, AdamW
from tinytorch.models import TransformerConfig, TransformerLM
from tinytorch.profiler import profile
from tinytorch.text.embeddings import Embedding
from tito.demos.gpt import EXIT_OK, EXIT_USAGE, _number, _Parser

STEPS = ("gpt", "embedding")
SORT_KEYS = ("total", "self", "forward", "backward", "calls", "bytes")


def build_parser():
    parser = _Parser(prog="tito demo profile",
                     description="Profile training steps with module 14's profiler: one table per step, one row per "
                                 "autograd op and per module, sorted by time.")
    add = parser.add_argument
    add("--step", choices=STEPS + ("both",), default="both", help="which step to profile (default: both)")
    add("--repeat", type=_number(int, 1, 100), default=3, help="steps profiled after one warm-up step (default: 3)")
    add("--rows", type=_number(int, 1, 1000), default=15, help="table rows (default: 15)")
    add("--sort", choices=SORT_KEYS, default="total", help="sort the rows by this column (default: total)")
    add("--fast", action="store_true", help="use module 18's fast kernels (tinytorch.fast.use_fast())")
    return parser


def gpt_step():
    "A GPT-2-architecture training step: 4 blocks, width 128, vocabulary 512, 8 sequences of 64 tokens, AdamW."
    config = TransformerConfig(arch="gpt2", vocab_size=512, max_seq_len=64, d_model=128, num_layers=4, num_heads=4)
    model = TransformerLM(config, seed=0)
    optimizer = AdamW(model.parameters(), lr=1e-3)
    ids = np.random.default_rng(0).integers(0, config.vocab_size, (8, 65))

    def step():
        optimizer.zero_grad()
        model.loss(ids[:, :-1], ids[:, 1:]).backward()
        optimizer.step()
    return "GPT-2 architecture, 4 x 128, V=512, 8 x 64 tokens, AdamW", step


def embedding_step():
    "A sparse embedding step at GPT-2's table size: 50257 x 768, 8 x 1024 ids, sparse gradient, SGD."
    table = Embedding(50257, 768, sparse=True, seed=0)
    optimizer = SGD(table.parameters(), lr=0.1)
    ids = np.random.default_rng(0).integers(0, 50257, (8, 1024))
    upstream = np.random.default_rng(1).standard_normal((8, 1024, 768)).astype(np.float32)

    def step():
        optimizer.zero_grad()
        table(ids).backward(upstream)
        optimizer.step()
    return "sparse embedding, 50257 x 768, 8 x 1024 ids, SGD", step


def main(argv: Optional[Sequence[str]] = None) -> int:
    "`tito demo profile`. Returns the exit status."
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:                   # --help, or a usage error already printed
        return exit_request.code if isinstance(exit_request.code, int) else EXIT_USAGE
    from tinytorch import fast
    (fast.use_fast if args.fast else fast.use_plain)()
    chosen = STEPS if args.step == "both" else (args.step,)
    for name in chosen:
        title, step = (gpt_step if name == "gpt" else embedding_step)()
        step()                                           # warm up: first-touch allocations, caches
        with profile() as prof:
            for _ in range(args.repeat):
                step()
        print(f"\n{title}: {args.repeat} step{'s' if args.repeat > 1 else ''}, {1e3 * prof.wall / args.repeat:.1f} ms a step "
              f"({'fast' if args.fast else 'plain'} kernels)")
        print(prof.table(sort_by=args.sort, row_limit=args.rows))
    print("\nModule rows include the modules and ops inside them; compare ops with ops. "
          "Module 14's notebook explains the columns.")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
