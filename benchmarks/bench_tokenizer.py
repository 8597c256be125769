"""BPE training speed: 500 merges on a few-MB corpus (issue 24: under 1.5 s here), beside Hugging Face tokenizers.

    python benchmarks/bench_tokenizer.py              # ~3 MB of text, 500 merges, best of 3
    python benchmarks/bench_tokenizer.py --quick      # a tiny run that only checks the benchmark works

The corpus is the text of `pydoc_data.topics` (the interpreter's own help pages, shipped with every Python)
repeated to the size asked for, with `<|endoftext|>` between copies as a special token. The rows: tinytorch's
`BPETokenizer.train` as a whole, then its two parts (GPT-2 pre-tokenisation and counting; learning the merges);
Hugging Face `tokenizers` (Rust, a BpeTrainer with GPT-2's byte-level pre-tokenizer, on every core) when it is
installed. Each is the best of `--repeat` runs, as wall time and as this process's CPU time (on a busy
machine the wall time includes waiting for a core; HF's CPU time adds up its threads). The last column says
whether the issue's target (wall time) is met.
"""
import argparse
import sys
import time

from pydoc_data.topics import topics

from tinytorch.text.tokenization import (BYTE_VOCAB_SIZE, PRETOKENIZER_ENGINE, BPETokenizer, _pretoken_counts,
                                         learn_merges)

SPECIAL = "<|endoftext|>"
TARGET_SECONDS = 1.5


def corpus(size: int) -> str:
    "The help pages' text, copies joined by the special token, cut to `size` characters."
    text = "\n".join(topics.values())
    copies = size // (len(text) + len(SPECIAL)) + 1
    return SPECIAL.join([text] * copies)[:size]


def best_seconds(fn, repeat: int) -> tuple:
    "(best wall time, best CPU time of this process) over `repeat` runs, in seconds."
    wall = cpu = float("inf")
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - start), min(cpu, time.process_time() - start_cpu)
    return wall, cpu


def hugging_face(text: str, merges: int):
    "A function that trains HF tokenizers' byte-level BPE to the same vocabulary size, or None without it."
    try:
        import tokenizers
    except ImportError:
        return None

    def train():
        model = tokenizers.Tokenizer(tokenizers.models.BPE())
        model.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = tokenizers.trainers.BpeTrainer(
            vocab_size=BYTE_VOCAB_SIZE + merges + 1, special_tokens=[SPECIAL], show_progress=False,
            initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
        model.train_from_iterator([text], trainer=trainer)
    return train


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=3.0, help="corpus size in millions of characters")
    parser.add_argument("--merges", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the best is shown")
    parser.add_argument("--quick", action="store_true", help="a tiny corpus and one run (checks the benchmark)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1; got {args.repeat}")
    if args.merges < 0 or args.megabytes <= 0:
        parser.error(f"--merges must be >= 0 and --megabytes > 0; got {args.merges} and {args.megabytes}")
    size, repeat = (20_000, 1) if args.quick else (int(args.megabytes * 1e6), args.repeat)
    text = corpus(size)
    vocab_size = BYTE_VOCAB_SIZE + args.merges + 1
    tokenizer = BPETokenizer.train(text, vocab_size, special_tokens=[SPECIAL])
    print(f"BPE training: {len(text):,} characters, {len(tokenizer.merges)} merges, pre-tokenizer "
          f"{PRETOKENIZER_ENGINE!r}, best of {repeat}")
    ours = best_seconds(lambda: BPETokenizer.train(text, vocab_size, special_tokens=[SPECIAL]), repeat)
    pattern = BPETokenizer(special_tokens=[SPECIAL])._special_pattern
    counts = _pretoken_counts(text, pattern)
    rows = [("tinytorch BPETokenizer.train", ours),
            ("  pre-tokenise and count", best_seconds(lambda: _pretoken_counts(text, pattern), repeat)),
            ("  learn_merges", best_seconds(lambda: learn_merges(counts, args.merges), repeat))]
    hf = hugging_face(text, args.merges)
    if hf is not None:
        rows.append(("Hugging Face tokenizers (Rust)", best_seconds(hf, repeat)))
    else:
        rows.append(("Hugging Face tokenizers", None))
    print(f"  {'':<34} {'wall':>9} {'CPU':>9}")
    for name, seconds in rows:
        shown = ("not installed (pip install tokenizers)" if seconds is None
                 else f"{seconds[0]:8.3f}s {seconds[1]:8.3f}s")
        verdict = ""
        if name.startswith("tinytorch") and not args.quick:
            verdict = f"   target: wall < {TARGET_SECONDS} s: " + ("met" if seconds[0] < TARGET_SECONDS else "MISSED")
        print(f"  {name:<34} {shown}{verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
