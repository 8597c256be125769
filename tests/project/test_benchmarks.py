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


def test_bench_embeddings_prints_the_steps_their_parts_and_the_explaining_lines(monkeypatch, capsys):
    "The step rows, PyTorch under tinytorch's no-view rule, the lookups in a row (per call), the vocabulary rows."
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for name in ("bench_embeddings", "_kernels", "_torch_reference"):
        sys.modules.pop(name, None)
    import bench_embeddings
    monkeypatch.setattr(bench_embeddings, "SMALL", {**bench_embeddings.SMALL, "vocab_size": 40, "dim": 8, "batch": 2,
                                                    "seq": 16})
    monkeypatch.setattr(bench_embeddings, "settle", lambda: None)
    try:
        assert bench_embeddings.main(["--small", "--repeat", "1"]) == 0
    finally:
        from tinytorch import fast
        fast.use_plain()
    out = capsys.readouterr().out
    for row in ("dense Adam step", "sparse SGD step", "SparseAdam step", "forward lookup", "lookup, 10 in a row",
                "(per call, 10 calls back to back", "dense backward", "sparse backward", "sparse SGD update",
                "V=1,000,000", "Peak memory of this run"):
        assert row in out, row
    if bench_embeddings.torch is not None:
        assert out.count("PyTorch copying it first:") == 2            # uniform and Zipf ids


def test_the_copying_pytorch_step_gives_backward_a_copy_of_the_callers_gradient(monkeypatch):
    torch = pytest.importorskip("torch")
    import numpy as np
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    sys.modules.pop("bench_embeddings", None)
    import bench_embeddings
    seen = []
    real = torch.Tensor.backward
    monkeypatch.setattr(torch.Tensor, "backward", lambda self, gradient=None, **k: (seen.append(gradient),
                                                                                    real(self, gradient, **k))[1])
    weights, ids = np.zeros((10, 4), np.float32), np.array([[1, 2, 2]])
    upstream = np.ones((1, 3, 4), np.float32)
    for copy_upstream in (False, True):
        sparse, _, make = bench_embeddings.OPTIMIZERS["sparse SGD step"]
        bench_embeddings.torch_step(weights, ids, upstream, sparse, make, copy_upstream=copy_upstream)()
    assert np.shares_memory(seen[0].numpy(), upstream)
    assert not np.shares_memory(seen[1].numpy(), upstream) and np.array_equal(seen[1].numpy(), upstream)
