"""Issue 15, reliability second pass: the engine under mutation, threads, processes and persistence.

Each section guards one defect the adversarial pass found; every test here failed before its fix.
"""
import multiprocessing
import os
import threading

import numpy as np
import pytest

from tinytorch.core import checkpoint
from tinytorch.core.layers import Linear, Module, Parameter, Sequential
from tinytorch.core.optimizers import SGD, Adam
from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import Embedding
from tinytorch.text.quantization import QuantizedEmbedding


# ------------------------------------------------------------------------------------------------ buffers (defect 4)

class WithBuffers(Module):
    "A parameter, a persistent integer buffer, a non-persistent cache and a sub-module with its own buffer."

    def __init__(self):
        self.weight = Parameter(np.ones(3))
        self.register_buffer("counts", np.zeros(3, dtype=np.int64))
        self.register_buffer("cache", np.ones(2), persistent=False)
        self.inner = Linear(3, 2, seed=0)
        self.inner.register_buffer("mask", np.array([True, False]))


def test_buffers_are_listed_saved_and_loaded_but_are_not_parameters():
    model = WithBuffers()
    assert [name for name, _ in model.named_buffers()] == ["counts", "cache", "inner.mask"]
    assert [b.dtype for b in model.buffers()] == [np.int64, np.float64, np.bool_]
    assert [name for name, _ in model.named_parameters()] == ["weight", "inner.weight", "inner.bias"]
    assert list(model.state_dict()) == ["weight", "inner.weight", "inner.bias", "counts", "inner.mask"]
    model.counts[...] = [4, 5, 6]
    model.inner.mask[...] = [False, True]
    other = WithBuffers()
    counts_array = other.counts
    other.load_state_dict(model.state_dict())
    assert other.counts is counts_array and other.counts.tolist() == [4, 5, 6]
    assert other.inner.mask.tolist() == [False, True]
    SGD(model.parameters(), lr=1.0)                           # buffers never reach an optimiser
    assert all(not isinstance(b, Tensor) for b in model.buffers())


def test_a_bad_buffer_value_leaves_every_parameter_and_buffer_unchanged():
    model, state = WithBuffers(), WithBuffers().state_dict()
    state["weight"] = np.full(3, 9.0)
    state["counts"] = np.full(3, 1.5)                        # floats cannot be stored in int64 counts
    with pytest.raises(TypeError, match="'counts'.*int64"):
        model.load_state_dict(state)
    assert model.weight.data.tolist() == [1, 1, 1] and model.counts.tolist() == [0, 0, 0]
    del state["counts"]
    with pytest.raises(KeyError, match="missing key.*'counts'"):
        model.load_state_dict(state)
    assert model.load_state_dict(state, strict=False).missing_keys == ["counts"]


def test_register_buffer_refuses_clashes_tensors_and_non_numbers():
    model = WithBuffers()
    with pytest.raises(KeyError, match="'weight'.*already exists"):
        model.register_buffer("weight", np.zeros(3))
    with pytest.raises(TypeError, match="ndarray, not a Tensor"):
        model.register_buffer("table", Tensor([1.0]))
    with pytest.raises(TypeError, match="dtype object"):
        model.register_buffer("table", np.array([object()]))
    model.register_buffer("counts", np.ones(3, dtype=np.int64))     # re-registering one's own buffer is fine
    model.register_buffer("empty", None)                              # None: listed nowhere, like PyTorch
    assert "empty" not in dict(model.named_buffers()) and "empty" not in model.state_dict()


def test_checkpoints_carry_buffers(tmp_path):
    model = WithBuffers()
    model.counts[...] = [7, 8, 9]
    path = checkpoint.save(model, tmp_path / "model.npz")
    assert list(checkpoint.load(path)) == list(model.state_dict())
    other = WithBuffers()
    checkpoint.load_into(other, path)
    assert other.counts.tolist() == [7, 8, 9] and other.counts.dtype == np.int64


@pytest.mark.parametrize("bits", [8, 4])
def test_a_quantized_embedding_round_trips_through_a_checkpoint(tmp_path, bits):
    source = QuantizedEmbedding.from_float(Embedding(20, 6, init="normal", seed=1), bits=bits)
    assert list(source.state_dict()) == ["codes", "scales", "offsets"]
    path = checkpoint.save(Sequential(source), tmp_path / "quantized.npz")
    target = Sequential(QuantizedEmbedding.from_float(Embedding(20, 6, init="normal", seed=2), bits=bits))
    assert not np.array_equal(target(np.arange(20)).data, source(np.arange(20)).data)
    checkpoint.load_into(target, path)
    assert np.array_equal(target(np.arange(20)).data, source(np.arange(20)).data)
    wrong_size = Sequential(QuantizedEmbedding.from_float(Embedding(21, 6, seed=0), bits=bits))
    with pytest.raises(checkpoint.CheckpointError, match="0.codes"):
        checkpoint.load_into(wrong_size, path)


# ------------------------------------------------------------------------------------------------ fork (defect 1)

def _big_lookup(seed):
    "A lookup over the parallel threshold: 64 x 128 ids into a 50000 x 256 float32 table (8 MB of rows)."
    from tinytorch.core.autograd import gather_rows
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((50_000, 256), dtype=np.float32)
    ids = rng.integers(0, 50_000, (64, 128))
    rows = gather_rows(table, ids)
    return bool(np.array_equal(rows, table[ids]))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() exists only on POSIX")
def test_a_forked_child_can_use_the_worker_pool_the_parent_started(monkeypatch):
    from tinytorch.core import autograd
    monkeypatch.setattr(autograd._Workers, "count", 2)       # two workers even on a one-core machine
    assert _big_lookup(0)                                     # the parent now holds a pool with live threads
    assert autograd._Workers.pool is not None
    with multiprocessing.get_context("fork").Pool(1) as pool:
        result = pool.apply_async(_big_lookup, (1,))
        try:
            assert result.get(timeout=120), "the child's lookup was wrong"
        except multiprocessing.TimeoutError:
            pool.terminate()
            pytest.fail("the forked child hung: it waited on pool threads that exist only in the parent")


# ------------------------------------------------------------------------------------------------ threads (defect 3)

def test_no_grad_in_one_thread_does_not_stop_another_thread_recording():
    from tinytorch.core.autograd import is_grad_enabled, no_grad
    inside, done = threading.Event(), threading.Event()
    seen = {}

    def evaluate():
        with no_grad():
            inside.set()
            done.wait(timeout=60)
            seen["evaluator"] = is_grad_enabled()

    evaluator = threading.Thread(target=evaluate)
    evaluator.start()
    try:
        assert inside.wait(timeout=60)
        w = Tensor([1.0, 2.0], requires_grad=True)
        y = (w * w).sum()                                     # this thread is not inside no_grad()
        assert is_grad_enabled() and y.requires_grad
        y.backward()
        assert w.grad.tolist() == [2.0, 4.0]
    finally:
        done.set()
        evaluator.join(timeout=60)
    assert seen == {"evaluator": False}
    assert is_grad_enabled()
