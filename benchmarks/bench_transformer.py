"""A GPT-2-architecture model in tinytorch vs Hugging Face transformers on PyTorch CPU, same weights, one table.

    python benchmarks/bench_transformer.py            # 4 blocks, width 256, vocabulary 8192, batch 4 x 128 tokens
    python benchmarks/bench_transformer.py --small    # 2 blocks, width 64, vocabulary 512, batch 4 x 32 (seconds)

Rows: one training step (forward, cross-entropy loss, backward, AdamW step) and 64 KV-cached greedy decoding
steps after a 16-token prompt (`model.generate` in both). The implementations run interleaved, each time is
the best of `--repeat` runs, and the ratio column (tinytorch / PyTorch) is what to read: targets are <= 1.5
for the training step and <= 1.0 for decoding. Needs `pip install torch==2.13.0 transformers` for the
PyTorch column (tinytorch alone is timed otherwise). Also prints the peak memory: tinytorch's NumPy
allocations during one training step (tracemalloc) and the peak resident size of the whole process.
"""
import argparse
import resource
import sys
import time
import tracemalloc

import numpy as np

from tinytorch.core.optimizers import AdamW
from tinytorch.models import TransformerConfig, TransformerLM, config_to_hf, to_hf

from _kernels import add_kernels_option, use_kernels
from _torch_reference import settle, torch, torch_text

try:
    import transformers
except ImportError:
    transformers = None
if transformers is None:
    torch = None                 # the PyTorch column needs both (Hugging Face's GPT-2 on torch)

FULL = dict(name="GPT-2 arch, 4 blocks x 256 wide, V=8192, batch 4x128", vocab_size=8192, d_model=256, num_layers=4,
            num_heads=8, max_seq_len=256, batch=4, seq=128)
SMALL = dict(name="GPT-2 arch, 2 blocks x 64 wide, V=512, batch 4x32", vocab_size=512, d_model=64, num_layers=2,
             num_heads=4, max_seq_len=128, batch=4, seq=32)
PROMPT, NEW_TOKENS, LR = 16, 64, 1e-3


def timed(fn):
    "Milliseconds of `fn()`, run back to back after an untimed call (and a pause for the other's threads)."
    settle()                                      # threads the last run left spinning go to sleep (untimed)
    fn()                                          # untimed: warms this implementation's threads and caches
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def tinytorch_runners(model, ids):
    optimizer = AdamW(model.parameters(), lr=LR)

    def train_step():
        model.train()
        loss = model.loss(ids[:, :-1], ids[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def decode():
        return model.generate(ids[:1, :PROMPT], NEW_TOKENS, use_cache=True)
    return train_step, decode


def torch_runners(model, ids):
    config = {k: v for k, v in config_to_hf(model.config).items() if k != "model_type"}
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(bos_token_id=None, eos_token_id=None, **config))
    hf.load_state_dict({k: torch.from_numpy(v) for k, v in to_hf(model).items()})
    optimizer = torch.optim.AdamW(hf.parameters(), lr=LR)
    inputs, targets = torch.from_numpy(ids[:, :-1]), torch.from_numpy(ids[:, 1:])
    prompt = torch.from_numpy(ids[:1, :PROMPT])

    def train_step():
        hf.train()
        logits = hf(inputs).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def decode():
        hf.eval()
        with torch.no_grad():
            return hf.generate(prompt, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                               pad_token_id=0, attention_mask=torch.ones_like(prompt)).numpy()
    return train_step, decode


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="the small configuration (seconds)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement; the best is kept (default: 5)")
    add_kernels_option(parser)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1; got {args.repeat}")
    size = SMALL if args.small else FULL
    rng = np.random.default_rng(0)
    config = TransformerConfig(arch="gpt2", vocab_size=size["vocab_size"], max_seq_len=size["max_seq_len"],
                               d_model=size["d_model"], num_layers=size["num_layers"], num_heads=size["num_heads"])
    model = TransformerLM(config, seed=0)
    ids = rng.integers(0, size["vocab_size"], size=(size["batch"], size["seq"] + 1))
    parameters = sum(p.size for p in model.parameters())
    print(f"{size['name']}: {parameters:,} parameters; decoding: {PROMPT}-token prompt + {NEW_TOKENS} greedy tokens")
    print(use_kernels(args.kernels))

    runners = {"tinytorch": tinytorch_runners(model, ids)}
    if torch is not None:
        runners["PyTorch"] = torch_runners(model, ids)        # same initial weights (to_hf before any step)
        same = np.array_equal(runners["tinytorch"][1](), runners["PyTorch"][1]())
        print(f"transformers {transformers.__version__}, torch {torch_text()}; "
              f"greedy tokens identical before timing: {same}")
    else:
        print("PyTorch column skipped: pip install torch==2.13.0 transformers")

    best = {name: [float("inf"), float("inf")] for name in runners}
    for _ in range(args.repeat):                               # interleaved, so load changes hit both alike
        for name, (train_step, decode) in runners.items():
            best[name][0] = min(best[name][0], timed(train_step))
            best[name][1] = min(best[name][1], timed(decode))

    header = f"{'operation':<34}" + "".join(f"{name + ' ms':>14}" for name in runners)
    header += f"{'ratio':>10}{'target':>9}" if torch is not None else ""
    print("\n" + header + "\n" + "-" * len(header))
    for row, label, target in ((0, "training step (fwd+loss+bwd+AdamW)", 1.5), (1, f"{NEW_TOKENS} cached greedy steps", 1.0)):
        line = f"{label:<34}" + "".join(f"{best[name][row]:>14.1f}" for name in runners)
        if torch is not None:
            ratio = best["tinytorch"][row] / best["PyTorch"][row]
            line += f"{ratio:>9.2f}x{'<= ' + str(target):>9}"
        print(line)

    tracemalloc.start()
    runners["tinytorch"][0]()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    print(f"\npeak memory: tinytorch training step {peak / 2**20:.1f} MiB (tracemalloc, NumPy arrays); "
          f"peak resident size of this process {rss / 2**20:.0f} MiB (both implementations)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
