"""The benchmarks run (speed itself is never asserted: a benchmark prints ratios, a test only checks it works).

Each is run in process on a tiny size with `--quick`, so a broken benchmark fails here and not on a quiet
machine an hour into a measurement session."""
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def bench_transformer(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for name in ("bench_transformer", "_kernels", "_torch_reference"):
        sys.modules.pop(name, None)
    import bench_transformer
    tiny = dict(vocab_size=37, d_model=16, num_layers=1, num_heads=2, batch=2, seq=8)
    monkeypatch.setattr(bench_transformer, "SMALL", {**bench_transformer.SMALL, **tiny})
    monkeypatch.setattr(bench_transformer, "NEW_TOKENS", 3)
    monkeypatch.setattr(bench_transformer, "PROMPT", 4)
    monkeypatch.setattr(bench_transformer, "SCALES", {"width (d_model)": [dict(d_model=8), dict(d_model=16)]})
    yield bench_transformer
    from tinytorch import fast
    fast.use_plain()                                   # the benchmark switches to the fast kernels, as users run it


def test_bench_transformer_prints_the_step_its_parts_the_floor_decoding_and_the_scale_rows(bench_transformer, capsys):
    assert bench_transformer.main(["--quick", "--scale"]) == 0
    out = capsys.readouterr().out
    for row in ("training step (fwd+loss+bwd+AdamW)", "  forward + loss", "  backward", "  AdamW step",
                "the matrix products alone", "the rest (step minus its products)", "cached greedy steps",
                "the same with the plain kernels", "width = 8", "width = 16", "peak memory"):
        assert row in out, row
    assert "MISSED" not in out and " met" not in out          # one round gives no verdict


def test_bench_transformer_refuses_a_bad_repeat(bench_transformer, capsys):
    with pytest.raises(SystemExit):
        bench_transformer.main(["--repeat", "0"])
    assert "--repeat must be >= 1; got 0" in capsys.readouterr().err


def test_the_floor_times_every_product_of_the_step(bench_transformer, monkeypatch):
    "The floor is forward + two gradients of 6 products per block and the head: 3 x (6 L + 1) matmuls."
    import numpy as np
    calls = []
    real = np.matmul
    monkeypatch.setattr(bench_transformer.np, "matmul", lambda *a, **k: calls.append(1) or real(*a, **k))
    size = {**bench_transformer.SMALL, "num_layers": 2}
    bench_transformer.matmul_floor_ms(size, repeat=1)
    per_run = 2 * (6 * 2 + 1)                       # np.matmul calls: the two gradients (the forward uses @)
    assert len(calls) == 2 * per_run                # one untimed run and one timed


def test_bench_tokenizer_prints_ours_its_parts_and_the_peer(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    sys.modules.pop("bench_tokenizer", None)
    import bench_tokenizer
    assert bench_tokenizer.main(["--quick", "--merges", "20"]) == 0
    out = capsys.readouterr().out
    for row in ("tinytorch BPETokenizer.train", "pre-tokenise and count", "learn_merges", "Hugging Face tokenizers"):
        assert row in out, row
    assert "MISSED" not in out and " met" not in out          # a quick run gives no verdict
    with pytest.raises(SystemExit):
        bench_tokenizer.main(["--repeat", "0"])
