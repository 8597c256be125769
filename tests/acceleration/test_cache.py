"""Module 18's buffer cache (`fast.empty`, `empty_cache`, `memory_reserved`): big arrays' memory is reused, never
while anything uses it.

The cache only takes arrays of `CACHE_MIN_BYTES` or more (32 MB); most tests lower that threshold with
monkeypatch so that small arrays exercise it. The last tests run training steps with every kernel result cached
and compare them, bit for bit, with the same steps uncached.
"""
import os
import threading

import numpy as np
import pytest

from tinytorch import fast
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.models import TransformerConfig, TransformerLM


def address(array):
    return array.__array_interface__["data"][0]


@pytest.fixture
def cache(monkeypatch):
    "An empty cache that takes arrays of 1 KB or more, holding at most 1 MB; emptied again afterwards."
    monkeypatch.setattr(fast, "CACHE_MIN_BYTES", 1 << 10)
    monkeypatch.setattr(fast, "CACHE_MAX_BYTES", 1 << 20)
    monkeypatch.setattr(fast._Cache, "buffers", [])
    yield
    fast.empty_cache()


def test_small_arrays_are_numpys_own():
    small = fast.empty((4, 5), np.float32)
    assert small.flags.owndata and small.shape == (4, 5) and small.dtype == np.float32
    assert fast.empty(7, np.float64).shape == (7,)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int64, np.complex128, np.bool_])
def test_a_cached_array_has_the_shape_dtype_and_alignment_asked_for(cache, dtype):
    array = fast.empty((16, 64), dtype)
    assert array.shape == (16, 64) and array.dtype == dtype
    assert array.flags.c_contiguous and array.flags.writeable and array.flags.aligned
    assert not array.flags.owndata and fast.memory_reserved() == array.nbytes     # a view of a cached buffer


def test_object_arrays_and_negative_sizes_are_numpys_business(cache):
    assert fast.empty((200,), object).flags.owndata and fast.memory_reserved() == 0
    with pytest.raises(ValueError, match="negative"):
        fast.empty((-1, 4096), np.float32)


def test_a_free_buffer_of_the_same_size_is_handed_out_again(cache):
    first = fast.empty((64, 64), np.float32)
    where = address(first)
    del first
    again = fast.empty((4096,), np.float32)                  # same bytes, another shape
    assert address(again) == where and fast.memory_reserved() == 64 * 64 * 4


@pytest.mark.parametrize("keep", ["a view", "a transpose", "a reshape", "an ndarray made from it", "a Tensor",
                                  "a saved tensor"])
def test_a_buffer_in_use_is_never_handed_out(cache, keep):
    first = fast.empty((64, 64), np.float32)
    first[:] = 1.0
    holder = {"a view": lambda a: a[3:], "a transpose": lambda a: a.T, "a reshape": lambda a: a.reshape(-1),
              "an ndarray made from it": np.asarray, "a Tensor": Tensor,
              "a saved tensor": lambda a: Tensor(a, requires_grad=True) * 2.0}[keep](first)
    where = address(first)
    del first
    second = fast.empty((64, 64), np.float32)
    second[:] = 2.0
    assert address(second) != where
    if keep == "a saved tensor":                             # the graph holds the product's input
        holder = holder._grad_fn.inputs[0]
    kept = holder.data if isinstance(holder, Tensor) else holder
    assert np.all(kept == 1.0)                               # untouched by the second array


def test_the_cache_holds_at_most_its_limit_and_lets_go_of_free_buffers_of_other_sizes_first(cache):
    used = [fast.empty((256, 256), np.float32) for _ in range(3)]        # 3 x 256 KB, in use
    spare = fast.empty((64, 256), np.float32)                            # 64 KB
    del spare                                                             # free: 832 KB held
    assert fast.memory_reserved() == 3 * 256 * 1024 + 64 * 1024
    fourth = fast.empty((256, 256), np.float32)                          # needs 256 KB: the free 64 KB goes first,
    assert not fourth.flags.owndata                                      # then 1 MB is full (4 x 256 KB)
    assert fast.memory_reserved() == 4 * 256 * 1024
    over = fast.empty((64, 256), np.float32)                             # no room and nothing free: NumPy's own
    assert over.flags.owndata and fast.memory_reserved() == 4 * 256 * 1024
    del used, fourth, over


def test_a_limit_of_zero_turns_the_cache_off_and_lets_go_of_free_buffers(cache, monkeypatch):
    spare = fast.empty((64, 64), np.float32)
    del spare
    monkeypatch.setattr(fast, "CACHE_MAX_BYTES", 0)
    array = fast.empty((32, 64), np.float32)
    assert array.flags.owndata and fast.memory_reserved() == 0


def test_empty_cache_lets_go_of_free_buffers_only(cache):
    used, spare = fast.empty((64, 64), np.float32), fast.empty((32, 64), np.float32)
    del spare
    assert fast.empty_cache() == 32 * 64 * 4
    assert fast.memory_reserved() == used.nbytes and fast.empty_cache() == 0
    del used
    assert fast.empty_cache() == 64 * 64 * 4 and fast.memory_reserved() == 0


def test_threads_never_share_a_buffer(cache):
    barrier, failures = threading.Barrier(4), []

    def work(value):
        for _ in range(50):
            array = fast.empty((32, 32), np.float32)
            array.fill(value)
            barrier.wait()                                  # all four threads hold one at the same time
            if not np.all(array == value):
                failures.append(value)
            barrier.wait()
            del array
    threads = [threading.Thread(target=work, args=(float(value),)) for value in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures and fast.memory_reserved() <= 4 * 32 * 32 * 4


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_can_use_the_cache_even_if_the_lock_was_held(cache):
    with fast._Cache.lock:                                  # held at the fork, as another thread might
        pid = os.fork()
        if pid == 0:                                        # the child: a new lock, the cache works
            try:
                os._exit(0 if fast.empty((64, 64), np.float32).shape == (64, 64) else 1)
            except BaseException:
                os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def train(steps, tied):
    "Losses, last logits and parameters of a few AdamW steps of a small GPT with the fast kernels."
    config = TransformerConfig(arch="gpt2", vocab_size=97, max_seq_len=16, d_model=32, num_layers=2, num_heads=4,
                               tie_embeddings=tied)
    model = TransformerLM(config, seed=0)
    optimizer = AdamW(model.parameters(), lr=1e-2)
    ids = np.random.default_rng(1).integers(0, 97, (3, 13))
    losses, kept_logits = [], []
    with fast.fast_kernels():
        for _ in range(steps):
            optimizer.zero_grad()
            logits = model(ids[:, :-1])
            loss = cross_entropy(logits, ids[:, 1:])
            loss.backward()
            optimizer.step()
            losses.append(float(loss.data))
            kept_logits.append((logits.data, logits.data.copy()))       # the user keeps every step's logits
    return losses, kept_logits, [p.data.copy() for p in model.parameters()]


@pytest.mark.parametrize("tied", [True, False])
def test_training_with_every_kernel_result_cached_gives_the_same_bits(monkeypatch, tied):
    uncached = train(4, tied)
    monkeypatch.setattr(fast, "CACHE_MIN_BYTES", 0)          # now every matmul and log-softmax result is cached
    monkeypatch.setattr(fast._Cache, "buffers", [])
    cached = train(4, tied)
    assert fast.memory_reserved() > 0
    assert cached[0] == uncached[0]
    for (kept, copy), (_, expected) in zip(cached[1], uncached[1]):
        np.testing.assert_array_equal(kept, copy)            # later steps never wrote into logits still held
        np.testing.assert_array_equal(kept, expected)
    for ours, theirs in zip(cached[2], uncached[2]):
        np.testing.assert_array_equal(ours, theirs)
    fast.empty_cache()
