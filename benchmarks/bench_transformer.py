"""A GPT-2-architecture model in tinytorch vs Hugging Face transformers on PyTorch CPU, same weights, one table.

    python benchmarks/bench_transformer.py             # the small step and decoding (about a minute)
    python benchmarks/bench_transformer.py --gpt2      # also a step at GPT-2 width and vocabulary (peak ~5 GB)
    python benchmarks/bench_transformer.py --scale     # also how a step grows with tokens, width and vocabulary
    python benchmarks/bench_transformer.py --quick     # one round of everything asked for (seconds; no verdicts)

Rows, whole step first and its parts below it (issue 27):
* training step: forward, cross-entropy loss, backward and AdamW step, on the small model (4 blocks, width 128,
  vocabulary 512, 8 x 64 tokens; target <= 0.6x transformers) and with --gpt2 at GPT-2 width and vocabulary
  (6 blocks, width 768, 12 heads, vocabulary 50257, 4 x 128 tokens; target <= 1.0x). Below it: forward + loss,
  backward, optimiser step, each timed alone.
* 64 KV-cached greedy decoding steps after a 16-token prompt (`model.generate` in both; target <= 0.6x).
* where the step's time goes: the step's matrix products alone, NumPy's (the floor of any NumPy step) beside
  PyTorch's, then the rest of each step (the step minus its products): the part each framework decides.
  Below them, the OS's share of one step: its page faults and system time (`resource.getrusage`, the median of
  three steps), most of it spent giving the step fresh memory (module 18, section 5).
* decoding with the fast kernels (module 18's decode plan: the model's arithmetic on plain arrays) and, below it,
  with the plain kernels (the model's own forward, a Tensor op at a time), so the framework's per-op cost shows.
* with --scale: the small step with batch tokens, width and vocabulary each at three sizes, both columns, so the
  cost curve shows rather than one point.
The implementations take turns (a pause, one untimed call, one timed call), each figure is the best of
`--repeat` rounds, and the ratio (tinytorch / PyTorch) is what to read. Needs `pip install torch==2.13.0
transformers` for the PyTorch column (tinytorch alone is timed otherwise). Also prints the peak memory:
tinytorch's NumPy allocations during one small training step (tracemalloc) and the process's peak resident size.
"""
import argparse
import resource
import sys
import time
import tracemalloc

import numpy as np

from tinytorch.core.optimizers import AdamW
from tinytorch.fast import fast_kernels
from tinytorch.models import TransformerConfig, TransformerLM, config_to_hf, to_hf

from _kernels import add_kernels_option, use_kernels
from _torch_reference import settle, torch, torch_text

try:
    import transformers
except ImportError:
    transformers = None
if transformers is None:
    torch = None                 # the PyTorch column needs both (Hugging Face's GPT-2 on torch)

SMALL = dict(name="small: 4 blocks x 128 wide, 4 heads, V=512, 8 x 64 tokens", vocab_size=512, d_model=128,
             num_layers=4, num_heads=4, batch=8, seq=64, target=0.6)
GPT2 = dict(name="GPT-2 width and vocabulary: 6 blocks x 768 wide, 12 heads, V=50257, 4 x 128 tokens",
            vocab_size=50257, d_model=768, num_layers=6, num_heads=12, batch=4, seq=128, target=1.0)
SCALES = {"batch tokens (B x T)": [dict(batch=b) for b in (4, 8, 16)],
          "width (d_model)": [dict(d_model=d) for d in (64, 128, 256)],
          "vocabulary (V)": [dict(vocab_size=v) for v in (512, 4096, 32768)]}
PROMPT, NEW_TOKENS, LR, DECODE_TARGET = 16, 64, 1e-3, 0.6


def timed(fn, after_blas=False):
    """Milliseconds of `fn()`, after a pause (the other implementation's threads sleep) and one untimed call;
    a long pause with `after_blas=True` (the other implementation ran NumPy's matrix products)."""
    settle(after_blas)
    fn()
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def build(size, seed=0):
    "The tinytorch model for `size`, and a batch of token ids (B, T + 1) to train on."
    config = TransformerConfig(arch="gpt2", vocab_size=size["vocab_size"], max_seq_len=max(128, size["seq"]),
                               d_model=size["d_model"], num_layers=size["num_layers"], num_heads=size["num_heads"])
    ids = np.random.default_rng(seed).integers(0, size["vocab_size"], size=(size["batch"], size["seq"] + 1))
    return TransformerLM(config, seed=seed), ids


def tinytorch_runners(model, ids):
    "name -> function for the step, its parts and decoding."
    optimizer = AdamW(model.parameters(), lr=LR)
    state = {}

    def forward():
        model.train()
        state["loss"] = model.loss(ids[:, :-1], ids[:, 1:])

    def backward():                       # needs a fresh graph each time: the forward runs untimed before it
        optimizer.zero_grad()
        state["loss"].backward()

    def step():
        forward()
        backward()
        optimizer.step()
    return {"step": step, "forward + loss": forward, "backward": (forward, backward), "optimiser step": optimizer.step,
            "decode": lambda: model.generate(ids[:1, :PROMPT], NEW_TOKENS, use_cache=True)}


def torch_runners(model, ids):
    config = {k: v for k, v in config_to_hf(model.config).items() if k != "model_type"}
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(bos_token_id=None, eos_token_id=None, **config))
    hf.load_state_dict({k: torch.from_numpy(v) for k, v in to_hf(model).items()})
    optimizer = torch.optim.AdamW(hf.parameters(), lr=LR)
    inputs, targets = torch.from_numpy(ids[:, :-1]), torch.from_numpy(ids[:, 1:])
    prompt = torch.from_numpy(ids[:1, :PROMPT])
    state = {}

    def forward():
        hf.train()
        logits = hf(inputs).logits
        state["loss"] = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def backward():
        optimizer.zero_grad()
        state["loss"].backward()

    def step():
        forward()
        backward()
        optimizer.step()

    def decode():
        hf.eval()
        with torch.no_grad():
            return hf.generate(prompt, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                               pad_token_id=0, attention_mask=torch.ones_like(prompt)).numpy()
    return {"step": step, "forward + loss": forward, "backward": (forward, backward), "optimiser step": optimizer.step,
            "decode": decode}


def best_ms(runners, names, repeat):
    """{implementation: {name: best ms}}: the implementations take turns, `repeat` rounds. A runner given as
    (setup, fn) times only `fn`, after an untimed `setup()` before each call."""
    best = {impl: {name: float("inf") for name in names} for impl in runners}
    for _ in range(repeat):
        for impl, table in runners.items():
            for turn, name in enumerate(names):
                run, after_blas = table[name], turn == 0 and len(runners) > 1   # another implementation ran last
                if isinstance(run, tuple):
                    setup, fn = run
                    settle(after_blas)
                    setup(); fn()                                  # untimed: warms this implementation
                    setup()
                    start = time.perf_counter()
                    fn()
                    ms = (time.perf_counter() - start) * 1e3
                else:
                    ms = timed(run, after_blas)
                best[impl][name] = min(best[impl][name], ms)
    return best


def make_runners(size):
    model, ids = build(size)
    runners = {"tinytorch": tinytorch_runners(model, ids)}
    if torch is not None:
        runners["PyTorch"] = torch_runners(model, ids)             # same weights (to_hf before any step)
    return model, runners, ids


def matmul_floor_ms(size, repeat):
    """Best ms of the step's matrix products alone: {"tinytorch": NumPy's, "PyTorch": torch's (when installed)}.

    The products are float32, folded (rows, k) @ (k, n) where a weight is shared: forward and both gradients of
    every projection, the attention scores and mixing, and the head. No NumPy implementation of the step can
    take less than NumPy's; the rest of a step (elementwise work, the framework's own cost per op) is the step
    minus its products, in each column."""
    b, t, d, h, v = size["batch"], size["seq"], size["d_model"], size["num_heads"], size["vocab_size"]
    rows = b * t
    products = [((rows, d), (d, 3 * d)), ((rows, d), (d, d)), ((rows, d), (d, 4 * d)), ((rows, 4 * d), (4 * d, d)),
                ((b, h, t, d // h), (b, h, d // h, t)), ((b, h, t, t), (b, h, t, d // h))] * size["num_layers"]
    products.append(((rows, d), (d, v)))
    rng = np.random.default_rng(0)
    arrays = [(rng.standard_normal(a, dtype=np.float32), rng.standard_normal(w, dtype=np.float32)) for a, w in products]

    def numpy_products():
        for a, w in arrays:
            out = a @ w                                         # forward
            np.matmul(out, np.swapaxes(w, -1, -2))              # gradient of a
            np.matmul(np.swapaxes(a, -1, -2), out)              # gradient of w
    runners = {"tinytorch": numpy_products}
    if torch is not None:
        tensors = [(torch.from_numpy(a), torch.from_numpy(w)) for a, w in arrays]

        def torch_products():
            for a, w in tensors:
                out = a @ w
                torch.matmul(out, w.transpose(-1, -2))
                torch.matmul(a.transpose(-1, -2), out)
        runners["PyTorch"] = torch_products
    best = {impl: float("inf") for impl in runners}
    for _ in range(repeat):                                     # in turns, as the step rows
        for impl, run in runners.items():
            best[impl] = min(best[impl], timed(run, after_blas=True))
    return best


def os_cost(runners, calls):
    """{implementation: (page faults, system ms)} of one training step, the median of `calls` steps (each after a
    pause and one untimed step): what the OS spends on the step, mostly giving it fresh memory page by page."""
    cost = {}
    for impl, table in runners.items():
        faults, system = [], []
        for _ in range(calls):
            settle(after_blas=True)
            table["step"]()
            before = resource.getrusage(resource.RUSAGE_SELF)
            table["step"]()
            after = resource.getrusage(resource.RUSAGE_SELF)
            faults.append(after.ru_minflt - before.ru_minflt)
            system.append((after.ru_stime - before.ru_stime) * 1e3)
        cost[impl] = (int(np.median(faults)), float(np.median(system)))
    return cost


def verdict(ratio, target, quick):
    if ratio is None or target is None:
        return ""
    return f"<= {target}x: " + ("(one round)" if quick else "met" if ratio <= target else "MISSED")


def print_table(title, rows, best, targets, quick):
    "rows: labels in order (the whole step first); targets: label -> target ratio."
    impls = list(best)
    header = f"{title:<40}" + "".join(f"{impl + ' ms':>14}" for impl in impls)
    header += f"{'ratio':>9}  target" if "PyTorch" in best else ""
    print("\n" + header + "\n" + "-" * len(header))
    for label in rows:
        line = f"{label:<40}" + "".join(f"{best[impl][label]:>14.1f}" for impl in impls)
        if "PyTorch" in best:
            ratio = best["tinytorch"][label] / best["PyTorch"][label]
            line += f"{ratio:>8.2f}x  {verdict(ratio, targets.get(label), quick)}"
        print(line)


def step_section(size, repeat, quick, decode=False):
    model, runners, ids = make_runners(size)
    parameters = sum(p.size for p in model.parameters())
    print(f"\n{size['name']}: {parameters:,} parameters")
    if torch is not None and decode:
        same = np.array_equal(runners["tinytorch"]["decode"](), runners["PyTorch"]["decode"]())
        print(f"greedy tokens identical before timing: {same}")
    names = ["step", "forward + loss", "backward", "optimiser step"] + (["decode"] * decode)
    best = best_ms(runners, names, repeat)
    labels = {"step": "training step (fwd+loss+bwd+AdamW)", "forward + loss": "  forward + loss",
              "backward": "  backward", "optimiser step": "  AdamW step", "decode": f"{NEW_TOKENS} cached greedy steps"}
    best = {impl: {labels[name]: ms for name, ms in times.items()} for impl, times in best.items()}
    targets = {labels["step"]: size["target"], labels["decode"]: DECODE_TARGET}
    step_rows = [labels[n] for n in names if n != "decode"]
    print_table("whole step, then its parts", step_rows, best, targets, quick)
    floor = matmul_floor_ms(size, repeat)
    products, rest = "  the matrix products alone", "  the rest (step minus its products)"
    best = {impl: {**times, products: floor[impl], rest: times[labels["step"]] - floor[impl]}
            for impl, times in best.items()}
    print_table("where the step's time goes", [products, rest], best, {}, quick)
    print("  (tinytorch's products are NumPy's: no NumPy step takes less than that row; the rest row is the part"
          " a framework decides)")
    cost = os_cost(runners, 1 if quick else 3)
    print("  the OS's share of one step (page faults, system time): " + "; ".join(
        f"{impl} {faults:,} faults, {ms:.0f} ms" for impl, (faults, ms) in cost.items())
        + " (fresh memory is zeroed a page at a time; module 18, section 5)")
    if decode:
        plain = "  the same with the plain kernels"
        with fast_kernels(on=False):                    # the model's own forward, one Tensor op at a time
            best["tinytorch"][plain] = best_ms({"t": {"d": runners["tinytorch"]["decode"]}}, ["d"], repeat)["t"]["d"]
        if "PyTorch" in best:
            best["PyTorch"][plain] = best["PyTorch"][labels["decode"]]
        print_table("decoding", [labels["decode"], plain], best, targets, quick)
        print("  (the first row runs module 18's decode plan, the second your model's forward; the PyTorch column "
              "repeats PyTorch's decoding)")
    return model, runners


def scale_section(repeat):
    print("\nHow the small step grows (one quantity at a time; the rest as in the small model)")
    for quantity, changes in SCALES.items():
        rows, best = [], {}
        for change in changes:
            size = {**SMALL, **change}
            label = f"  {quantity.split(' (')[0]} = " + (f"{size['batch']} x {size['seq']}" if "batch" in change
                                                         else str(next(iter(change.values()))))
            _, runners, _ = make_runners(size)
            times = best_ms(runners, ["step"], repeat)
            for impl, t in times.items():
                best.setdefault(impl, {})[label] = t["step"]
            rows.append(label)
        print_table(quantity, rows, best, {}, True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpt2", action="store_true", help="also the step at GPT-2 width and vocabulary (peak ~5 GB)")
    parser.add_argument("--scale", action="store_true", help="also the scale rows (tokens, width, vocabulary)")
    parser.add_argument("--quick", action="store_true", help="one round of each row, no verdicts (a smoke test)")
    parser.add_argument("--repeat", type=int, default=None, help="rounds per row; the best is kept (default: 7; "
                        "--gpt2's row and the scale rows: 3)")
    add_kernels_option(parser)
    args = parser.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        parser.error(f"--repeat must be >= 1; got {args.repeat}")
    repeat = 1 if args.quick else 7 if args.repeat is None else args.repeat
    few = 1 if args.quick else 3 if args.repeat is None else args.repeat
    print(f"numpy {np.__version__}; transformers {getattr(transformers, '__version__', 'not installed')}, "
          f"torch {torch_text()}")
    print(use_kernels(args.kernels, args.workers_apart))
    if torch is None:
        print("PyTorch column skipped: pip install torch==2.13.0 transformers")

    model, runners = step_section(SMALL, repeat, args.quick, decode=True)
    tracemalloc.start()
    runners["tinytorch"]["step"]()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del model, runners
    if args.gpt2:
        step_section(GPT2, few, args.quick)
    if args.scale:
        scale_section(few)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    print(f"\npeak memory: tinytorch small training step {peak / 2**20:.1f} MiB (tracemalloc, NumPy arrays); "
          f"peak resident size of this process {rss / 2**20:.0f} MiB (both implementations)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
