"""Module 18, acceleration: the fast kernels equal the plain ones, and the fast machinery's own properties.

The battery runs each kernel plain and fast on the same random inputs (repeated, Zipf, distinct and empty ids,
padding, every row shape, float and id dtypes) and requires equal results; then whole training steps, plain
against fast. The rest tests what only the fast path has: long runs, `at=`, blocks, cores.
Whole steps with the fast kernels: test_steps.py.
"""
import multiprocessing
import os

import numpy as np
import pytest

from tinytorch import fast
from tinytorch.core import kernels
from tinytorch.core.autograd import RowSparseGrad, _row_sparse_from_rows
from tinytorch.core.autograd import segment_sum as plain_segment_sum
from tinytorch.core.layers import Parameter
from tinytorch.core.optimizers import SGD, Adagrad, Adam, AdamW, SparseAdam
from tinytorch.text.bag import EmbeddingBag
from tinytorch.text.embeddings import Embedding

ID_DISTRIBUTIONS = ("uniform", "zipf", "one id", "distinct", "empty")
ROW_SHAPES = ((), (3,), (2, 3), (64,))


def make_ids(distribution, n=700, vocab_size=300, dtype=np.int64, seed=0):
    rng = np.random.default_rng(seed)
    ids = {"uniform": lambda: rng.integers(0, vocab_size, n),
           "zipf": lambda: np.minimum(rng.zipf(1.2, n) - 1, vocab_size - 1),
           "one id": lambda: np.full(n, 7),
           "distinct": lambda: rng.permutation(vocab_size)[:n],
           "empty": lambda: np.zeros(0, np.int64)}[distribution]()
    return ids.astype(dtype)


def rows_for(ids, row_shape, dtype=np.float32, seed=1):
    return np.random.default_rng(seed).standard_normal((len(ids),) + row_shape).astype(dtype)


# ------------------------------------------------------------------------------------------------ the battery

def test_the_switch_is_explicit_and_restores_the_mode():
    assert kernels.mode() == "plain"                       # importing tinytorch.fast switched nothing
    with fast.fast_kernels():
        assert kernels.mode() == "fast" and kernels.kernel("segment_sum") is fast.segment_sum
        with fast.fast_kernels(on=False):
            assert kernels.kernel("segment_sum") is plain_segment_sum
        assert kernels.mode() == "fast"
    assert kernels.mode() == "plain"
    assert fast.use_fast() == "plain" and kernels.mode() == "fast"
    assert fast.use_plain() == "fast" and kernels.mode() == "plain"
    with pytest.raises(ValueError, match="mode must be one of"):
        kernels.set_mode("faster")
    with pytest.raises(ValueError, match="unknown kernel"):
        kernels.register("conv2d", lambda: None)


@pytest.mark.parametrize("distribution", ID_DISTRIBUTIONS)
@pytest.mark.parametrize("row_shape", ROW_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16], ids=lambda d: np.dtype(d).name)
def test_segment_sum_fast_equals_plain(distribution, row_shape, dtype):
    ids = make_ids(distribution)
    values = rows_for(ids, row_shape, dtype)
    (plain_ids, plain_sums), (fast_ids, fast_sums) = plain_segment_sum(ids, values), fast.segment_sum(ids, values)
    np.testing.assert_array_equal(fast_ids, plain_ids)
    np.testing.assert_array_equal(fast_sums, plain_sums)
    assert fast_sums.dtype == plain_sums.dtype == dtype and fast_sums.shape == plain_sums.shape


@pytest.mark.parametrize("id_dtype", [np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint64])
def test_segment_sum_and_from_rows_fast_equal_plain_for_every_id_dtype(id_dtype):
    ids = make_ids("zipf", vocab_size=100, dtype=id_dtype)
    rows = rows_for(ids, (5,))
    np.testing.assert_array_equal(fast.segment_sum(ids, rows)[1], plain_segment_sum(ids, rows)[1])
    plain, quick = _row_sparse_from_rows(ids, rows, (100, 5)), fast.from_rows(ids, rows, (100, 5))
    np.testing.assert_array_equal(quick.indices, plain.indices)
    np.testing.assert_array_equal(quick.values, plain.values)


@pytest.mark.parametrize("distribution", ID_DISTRIBUTIONS)
def test_gather_rows_fast_equals_plain(distribution, monkeypatch):
    monkeypatch.setattr(fast, "PARALLEL_MIN_BYTES", 0)     # split even small gathers over the cores
    monkeypatch.setattr(fast._Workers, "count", 2)
    table = np.random.default_rng(2).standard_normal((300, 6)).astype(np.float32)
    ids = make_ids(distribution).reshape(-1, 2) if distribution != "empty" else make_ids(distribution)
    np.testing.assert_array_equal(fast.gather_rows(table, ids), kernels._gather_rows(table, ids))
    for bad in (np.array([300]), np.array([-1])):
        for gather in (fast.gather_rows, kernels._gather_rows):
            with pytest.raises(IndexError, match=r"\[0, 300\)"):
                gather(table, bad)


@pytest.mark.parametrize("distribution", ID_DISTRIBUTIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_sparse_from_rows_and_its_readers_fast_equal_plain(distribution, dtype):
    ids = make_ids(distribution)
    rows = rows_for(ids, (4,), dtype)
    plain, quick = _row_sparse_from_rows(ids, rows, (300, 4)), fast.from_rows(ids, rows, (300, 4))
    assert isinstance(quick, RowSparseGrad) and quick.dtype == plain.dtype == dtype
    blocks = {}
    for name, grad, for_blocks in (("plain", plain, kernels._for_row_blocks), ("fast", quick, fast.for_row_blocks)):
        seen = np.zeros((300, 4), dtype)
        for_blocks(grad, lambda r, v: seen.__setitem__(r, v))
        blocks[name] = seen
    np.testing.assert_array_equal(blocks["fast"], blocks["plain"])
    np.testing.assert_array_equal(quick.to_dense(), plain.to_dense())
    np.testing.assert_array_equal(quick.values, plain.values)
    np.testing.assert_array_equal((quick + plain).to_dense(), 2 * plain.to_dense())


def test_for_dense_blocks_fast_equals_plain(monkeypatch):
    monkeypatch.setattr(fast, "BLOCK_BYTES", 1 << 10)       # many blocks
    monkeypatch.setattr(fast, "PARALLEL_MIN_BYTES", 0)
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((301, 7)).astype(np.float32) for _ in range(2)]

    def update(a, b):
        a *= 0.9
        a += np.sqrt(np.abs(b)) * 0.1
    plain = [x.copy() for x in arrays]
    kernels._for_dense_blocks(update, *plain)
    quick = [x.copy() for x in arrays]
    fast.for_dense_blocks(update, *quick)
    np.testing.assert_array_equal(quick[0], plain[0])


def train(mode, sparse, make_optimizer, distribution, padding_idx=None, steps=3):
    "Weights after a few steps of an Embedding table, with the plain or the fast kernels in force."
    rng = np.random.default_rng(4)
    weights = rng.standard_normal((500, 24)).astype(np.float32)
    batches = [(make_ids(distribution, n=256, vocab_size=500, seed=10 + step).reshape(4, -1)
                if distribution != "empty" else np.zeros((4, 0), np.int64),
                rng.standard_normal((4, 64 if distribution != "empty" else 0, 24)).astype(np.float32))
               for step in range(steps)]
    with fast.fast_kernels(on=mode == "fast"):
        table = Embedding.from_pretrained(weights, freeze=False, sparse=sparse, padding_idx=padding_idx)
        optimizer = make_optimizer([table.weight])
        for ids, upstream in batches:
            optimizer.zero_grad()
            table(ids).backward(upstream)
            optimizer.step()
    return table.weight.data


OPTIMIZERS = {
    "sparse SGD": (True, lambda p: SGD(p, lr=0.1)),
    "sparse SGD momentum": (True, lambda p: SGD(p, lr=0.1, momentum=0.9)),
    "SparseAdam": (True, lambda p: SparseAdam(p, lr=0.01)),
    "sparse Adagrad": (True, lambda p: Adagrad(p, lr=0.1)),
    "dense SGD": (False, lambda p: SGD(p, lr=0.1, weight_decay=0.01)),
    "dense Adam": (False, lambda p: Adam(p, lr=0.01, weight_decay=0.1)),
    "dense AdamW": (False, lambda p: AdamW(p, lr=0.01)),
}


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("distribution", ["uniform", "zipf", "one id", "empty"])
def test_training_steps_fast_equal_plain(optimizer, distribution):
    sparse, make = OPTIMIZERS[optimizer]
    np.testing.assert_array_equal(train("fast", sparse, make, distribution), train("plain", sparse, make, distribution))


@pytest.mark.parametrize("sparse", [False, True])
def test_padding_row_fast_equals_plain_and_gets_no_gradient(sparse):
    make = OPTIMIZERS["sparse SGD" if sparse else "dense SGD"][1]
    quick = train("fast", sparse, make, "zipf", padding_idx=0)
    np.testing.assert_array_equal(quick, train("plain", sparse, make, "zipf", padding_idx=0))
    initial = np.random.default_rng(4).standard_normal((500, 24)).astype(np.float32)
    if sparse:                                             # dense SGD's weight decay moves every row
        np.testing.assert_array_equal(quick[0], initial[0])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_backward_fast_equals_plain(mode):
    ids = make_ids("zipf", n=120, vocab_size=40).reshape(30, 4)
    grads = {}
    for on in (False, True):
        with fast.fast_kernels(on=on):
            bag = EmbeddingBag(40, 6, mode=mode, seed=0)
            bag(ids).backward(np.ones((30, 6), np.float32))
            grads[on] = bag.weight.grad
    np.testing.assert_array_equal(grads[True], grads[False])


# ------------------------------------------------------------------------------------------------ fast only

def test_segment_sum_mixes_long_runs_short_runs_and_singletons_exactly():
    "Zipf-like ids: one id far past fast.LONG_RUN, others repeated a few times, the rest once."
    rng = np.random.default_rng(7)
    ids = np.concatenate([np.full(3 * fast.LONG_RUN + 5, 4), np.repeat([1, 9, 2], [2, 3, fast.LONG_RUN - 1]),
                          np.array([0, 7, 8]), np.full(fast.LONG_RUN, 6)])
    rng.shuffle(ids)
    values = rng.integers(-8, 8, (len(ids), 5)).astype(np.float64)   # integer-valued: sums are exact in any order
    unique_ids, sums = fast.segment_sum(ids, values)
    reference = np.zeros((10, 5))
    np.add.at(reference, ids, values)
    assert unique_ids.tolist() == sorted(set(ids.tolist()))
    np.testing.assert_array_equal(sums, reference[unique_ids])
    again = fast.segment_sum(ids, values.astype(np.float32))[1]
    np.testing.assert_array_equal(again, fast.segment_sum(ids, values.astype(np.float32))[1])   # deterministic


@pytest.mark.parametrize("row_shape", [(1,), (1, 1), (1, 1, 1)], ids=str)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_rows_of_one_number_are_summed_in_order_like_the_plain_kernel(row_shape, dtype):
    "np.add.reduce adds a (n, 1) block pairwise, not row after row: such rows must still give the plain bits."
    rng = np.random.default_rng(3)
    ids = np.concatenate([np.full(4 * fast.LONG_RUN + 3, 5), np.repeat([1, 2], [3, fast.LONG_RUN - 1]), [0]])
    rng.shuffle(ids)
    values = rng.standard_normal((len(ids),) + row_shape).astype(dtype)
    plain_ids, plain_sums = plain_segment_sum(ids, values)
    fast_ids, fast_sums = fast.segment_sum(ids, values)
    np.testing.assert_array_equal(fast_ids, plain_ids)
    assert fast_sums.shape == plain_sums.shape == (4,) + row_shape and fast_sums.dtype == dtype
    assert fast_sums.tobytes() == plain_sums.tobytes()
    lazy = fast.from_rows(ids, values.reshape(len(ids), -1), (10, 1))       # the lazy gradient's sums, too
    assert lazy.values.tobytes() == plain_sums.reshape(4, 1).tobytes()


def test_segment_sum_adds_each_short_run_in_order_of_position(rng):
    "Runs of many lengths below fast.LONG_RUN: each sum is rows[first] + rows[second] + ... in float32, bit for bit."
    ids = np.repeat(np.arange(40), rng.integers(1, fast.LONG_RUN, 40))     # 40 ids, each 1 to fast.LONG_RUN-1 times
    rng.shuffle(ids)
    values = rng.standard_normal((len(ids), 3)).astype(np.float32)
    unique_ids, sums = fast.segment_sum(ids, values)
    for v, total in zip(unique_ids, sums):
        expected = np.zeros(3, np.float32)
        for row in values[ids == v]:                                  # positions in increasing order
            expected = expected + row
        assert expected.tobytes() == total.tobytes(), f"id {v}"


def test_segment_sum_at_reads_rows_in_place_like_a_copy(rng):
    ids = rng.integers(0, 6, 50)
    values = rng.standard_normal((200, 4)).astype(np.float32)
    at = rng.choice(200, 50, replace=False)
    rows, sums = fast.segment_sum(ids, values, at=at)
    copied_rows, copied_sums = fast.segment_sum(ids, values[at])
    np.testing.assert_array_equal(rows, copied_rows)
    assert sums.tobytes() == copied_sums.tobytes()


@pytest.mark.parametrize("at, message", [(np.array([0, 1]), r"3 ids, 2 positions"),
                                         (np.array([0, 1, 5]), r"in \[0, 5\).*from 0 to 5"),
                                         (np.array([-1, 0, 1]), r"from -1 to 1")])
def test_segment_sum_rejects_bad_positions(at, message):
    with pytest.raises(ValueError, match=message):
        fast.segment_sum(np.array([0, 1, 1]), np.zeros((5, 2)), at=at)


@pytest.mark.parametrize("row_shape", [(), (3,), (2, 3)])
def test_long_runs_give_the_same_bits_on_one_core_or_two(row_shape, monkeypatch):
    "sum_long_runs deals runs out over the cores; the chunks are fixed by the run lengths, so the bits are not."
    rng = np.random.default_rng(11)
    monkeypatch.setattr(fast, "ROW_BLOCK_BYTES", 48)           # blocks of 12, 4 or 2 rows: many per run
    ids = np.concatenate([np.full(3 * fast.LONG_RUN + 7, 5), np.full(fast.LONG_RUN + 1, 2),
                          np.full(2 * fast.LONG_RUN, 9), rng.integers(0, 12, 300)])
    rng.shuffle(ids)
    values = rng.standard_normal((len(ids),) + row_shape).astype(np.float32)
    results = []
    for cores in (1, 2):
        monkeypatch.setattr(fast._Workers, "count", cores)
        monkeypatch.setattr(fast, "PARALLEL_MIN_BYTES", 0)       # share out even this small a problem
        results.append(fast.segment_sum(ids, values))
    assert results[0][1].tobytes() == results[1][1].tobytes()
    reference = np.zeros((12,) + row_shape)
    np.add.at(reference, ids, values.astype(np.float64))
    np.testing.assert_allclose(results[0][1], reference[results[0][0]], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("ids", [[1] * 40 + [2], [3] * 40, [0, 0, 1], [4, 5] * 33])
def test_segment_sum_with_only_long_runs_or_only_short_ones(ids):
    ids = np.array(ids)
    values = np.arange(2.0 * len(ids)).reshape(-1, 2)
    rows, sums = fast.segment_sum(ids, values)
    reference = np.zeros((ids.max() + 1, 2))
    np.add.at(reference, ids, values)
    np.testing.assert_array_equal(rows, np.unique(ids))
    np.testing.assert_array_equal(sums, reference[rows])


def test_segment_sum_at_must_hold_integers_and_may_be_empty():
    rows, sums = fast.segment_sum(np.array([], np.int64), np.zeros((3, 2)), at=[])
    assert rows.shape == (0,) and sums.shape == (0, 2)
    for bad in ([True, False], [0.0, 1.5]):
        with pytest.raises(TypeError, match="integer row positions.*(bool|float64)"):
            fast.segment_sum(np.array([0, 1]), np.zeros((3, 2)), at=bad)


@pytest.mark.parametrize("block_rows", [0, -3, 2.5])
def test_for_row_blocks_rejects_a_block_size_that_is_not_a_positive_integer(block_rows):
    grad = fast.from_rows(np.array([0, 2, 2]), np.ones((3, 4), np.float32), (5, 4))
    with pytest.raises(ValueError, match=f"block_rows must be a positive integer or None; got {block_rows}"):
        fast.for_row_blocks(grad, lambda rows, values: None, block_rows)


# ---------------------------------------------------------------- module 14's profiler and the lazy gradient


def test_the_profiler_counts_a_lazy_sparse_gradient_without_summing_it():
    from tinytorch import fast
    from tinytorch.profiler import nbytes

    ids, rows = np.array([3, 1, 3, 3]), np.ones((4, 5), np.float32)
    grad = fast.from_rows(ids, rows, (10, 5))
    assert nbytes(grad) == grad.indices.nbytes + 2 * 5 * 4
    assert grad._values is None                          # still lazy: counting read no rows


# ------------------------------------------------------------------------------------------------ fork (issue 15, defect 1)

def _big_lookup(seed):
    "A lookup over the parallel threshold: 64 x 128 ids into a 50000 x 256 float32 table (8 MB of rows)."
    from tinytorch.fast import gather_rows
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((50_000, 256), dtype=np.float32)
    ids = rng.integers(0, 50_000, (64, 128))
    rows = gather_rows(table, ids)
    return bool(np.array_equal(rows, table[ids]))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() exists only on POSIX")
def test_a_forked_child_can_use_the_worker_pool_the_parent_started(monkeypatch):
    from tinytorch import fast
    monkeypatch.setattr(fast._Workers, "count", 2)           # two workers even on a one-core machine
    assert _big_lookup(0)                                     # the parent now holds a pool with live threads
    assert fast._Workers.pool is not None
    with multiprocessing.get_context("fork").Pool(1) as pool:
        result = pool.apply_async(_big_lookup, (1,))
        try:
            assert result.get(timeout=120), "the child's lookup was wrong"
        except multiprocessing.TimeoutError:
            pool.terminate()
            pytest.fail("the forked child hung: it waited on pool threads that exist only in the parent")


# ------------------------------------------------------------------------------------------------ issue 23, second part

def test_fast_kernels_refuses_a_non_bool_and_keeps_the_mode():
    before = kernels.mode()
    with pytest.raises(TypeError, match="on must be True or False"):
        with fast.fast_kernels(on="no"):
            pass
    assert kernels.mode() == before


@pytest.mark.parametrize("make", [
    lambda ps: Adam(ps, lr=0.01, amsgrad=True), lambda ps: AdamW(ps, lr=0.01, amsgrad=True, weight_decay=0.1),
    lambda ps: SGD(ps, lr=0.01, momentum=0.9, nesterov=True, weight_decay=0.01),
])
def test_amsgrad_and_nesterov_steps_are_equal_bit_for_bit_with_both_kernels(make):
    rng = np.random.default_rng(0)
    start, grads = rng.standard_normal((3000, 64)).astype(np.float32), [
        rng.standard_normal((3000, 64)).astype(np.float32) for _ in range(4)]
    results = []
    for on in (False, True):
        with fast.fast_kernels(on=on):
            p = Parameter(start.copy())
            optimizer = make([p])
            for grad in grads:
                p.grad = grad
                optimizer.step()
            results.append(p.data.copy())
    assert np.array_equal(results[0], results[1])
