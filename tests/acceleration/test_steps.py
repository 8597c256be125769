"""Module 18's fast kernels in whole training steps (issue 16): no extra passes, and what must not change on the way.

Every test here runs with the fast kernels in force (`fast_kernels` fixture); tests/acceleration/test_acceleration.py
compares them with the plain ones.

- `RowSparseGrad.from_rows` sums only repeated ids and reads rows seen once from the upstream gradient;
  every way of reading it (`.values`, `to_dense`, an optimiser's blocks) gives the same numbers, bit for bit.
- `Tensor.backward` passes the caller's gradient on without copying it, and no `.grad` aliases it.
- Dense Adam runs on blocks of rows: bit-identical to the whole-array formulas, on one core or two.
- Results are the same across runs and thread counts.
"""
import math

import numpy as np
import pytest

from tinytorch import fast
from tinytorch.core import autograd
from tinytorch.core.autograd import RowSparseGrad
from tinytorch.core.optimizers import SGD, Adam, AdamW, SparseAdam
from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import Embedding

try:
    import torch
except ImportError:
    torch = None

pytestmark = pytest.mark.usefixtures("fast_kernels")


def reference_sum(ids, rows, vocab_size):
    "Row v = sum of rows[k] with ids[k] == v, in float64, with np.add.at (slow, obviously right)."
    dense = np.zeros((vocab_size,) + rows.shape[1:])
    np.add.at(dense, ids, rows.astype(np.float64))
    return dense


@pytest.mark.parametrize("distribution", ["uniform", "zipf", "all distinct", "one id"])
def test_from_rows_sums_rows_per_id(distribution):
    rng = np.random.default_rng(0)
    vocab_size, n = 300, 700
    ids = {"uniform": rng.integers(0, vocab_size, n), "zipf": np.minimum(rng.zipf(1.3, n) - 1, vocab_size - 1),
           "all distinct": rng.permutation(vocab_size)[:n], "one id": np.full(n, 7)}[distribution]
    rows = rng.standard_normal((len(ids), 5)).astype(np.float32)
    grad = RowSparseGrad.from_rows(ids, rows, (vocab_size, 5))
    expected = reference_sum(ids, rows, vocab_size)
    np.testing.assert_array_equal(grad.indices, np.unique(ids))
    np.testing.assert_allclose(grad.to_dense(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad.values, expected[grad.indices], rtol=1e-5, atol=1e-5)
    assert grad.values.dtype == np.float32 and grad.dtype == np.float32


def test_from_rows_gives_the_same_bits_for_ids_above_and_below_16_bits():
    "Ids below 65,536 are sorted as uint16 (NumPy radix-sorts those); larger ids as they are: same order either way."
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 300, 2000)
    rows = rng.standard_normal((len(ids), 4)).astype(np.float32)
    small = RowSparseGrad.from_rows(ids, rows, (300, 4))
    large = RowSparseGrad.from_rows(ids + 70_000, rows, (70_300, 4))   # same ids, shifted past 16 bits
    np.testing.assert_array_equal(large.indices, small.indices + 70_000)
    assert large.values.tobytes() == small.values.tobytes()
    np.testing.assert_allclose(small.values, reference_sum(ids, rows, 300)[small.indices], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad", [-1, 65_536 + 5])
def test_from_rows_names_an_id_out_of_range(bad):
    ids = np.array([0, 3, bad, 3])
    with pytest.raises(ValueError, match=str(bad)):
        RowSparseGrad.from_rows(ids, np.ones((4, 2), np.float32), (10, 2))


def test_from_rows_every_reader_gets_the_same_bits():
    rng = np.random.default_rng(1)
    ids, rows = rng.integers(0, 50, 400), rng.standard_normal((400, 6)).astype(np.float32)
    lazy = RowSparseGrad.from_rows(ids, rows, (50, 6))
    dense_before = lazy.to_dense()                         # read through the blocks, nothing built
    assert lazy._values is None
    blocks = np.zeros((50, 6), np.float32)

    def put(r, v):
        blocks[r] = v
    fast.for_row_blocks(lazy, put, block_rows=7)
    values = lazy.values                                   # now built
    np.testing.assert_array_equal(dense_before, blocks)
    np.testing.assert_array_equal(dense_before[lazy.indices], values)
    np.testing.assert_array_equal(lazy.to_dense(), dense_before)
    eager = RowSparseGrad(lazy.indices, values.copy(), (50, 6))
    np.testing.assert_array_equal(eager.to_dense(), dense_before)


def test_sgd_step_is_the_same_whether_or_not_the_gradient_was_looked_at():
    rng = np.random.default_rng(2)
    weights = rng.standard_normal((40, 8)).astype(np.float32)
    ids, upstream = rng.integers(0, 40, (6, 30)), rng.standard_normal((6, 30, 8)).astype(np.float32)
    results = []
    for look in (False, True):
        table = Embedding.from_pretrained(weights.copy(), freeze=False, sparse=True)
        table(ids).backward(upstream)
        if look:
            assert np.isfinite(table.weight.grad.values).all()
        SGD([table.weight], lr=0.5).step()
        results.append(table.weight.data.copy())
    np.testing.assert_array_equal(results[0], results[1])
    expected = weights - 0.5 * reference_sum(ids.reshape(-1), upstream.reshape(-1, 8), 40)
    np.testing.assert_allclose(results[0], expected, rtol=1e-5, atol=1e-5)


def test_an_in_place_change_to_the_values_is_what_the_step_uses():
    table = Embedding.from_pretrained(np.zeros((5, 2), np.float32), freeze=False, sparse=True)
    table(np.array([1, 3, 3])).backward(np.ones((3, 2), np.float32))
    table.weight.grad.values[...] *= 10                    # e.g. gradient clipping done by hand
    SGD([table.weight], lr=1.0).step()
    np.testing.assert_array_equal(table.weight.data[[1, 3]], [[-10, -10], [-20, -20]])


@pytest.mark.skipif(torch is None, reason="PyTorch not installed (pip install torch==2.13.0)")
def test_unlike_pytorch_the_sparse_gradient_does_not_refer_to_the_callers_gradient():
    """PyTorch's sparse embedding gradient keeps a view of the upstream gradient, so a write into the caller's
    buffer after backward changes it. Ours reads a caller's (read-only) gradient at once and keeps nothing of it
    (issue 23, defect 3; the fast kernel sums it then): the same numbers before the write, no change after it."""
    ids, upstream = np.array([1, 2, 2]), np.ones((3, 3), np.float32)
    ours = Embedding(10, 3, sparse=True)
    ours(ids).backward(upstream)
    theirs = torch.nn.Embedding(10, 3, sparse=True)
    theirs(torch.from_numpy(ids)).backward(torch.from_numpy(upstream.copy()))
    np.testing.assert_array_equal(ours.weight.grad.values, theirs.weight.grad.coalesce().values().numpy())
    upstream *= 100
    np.testing.assert_array_equal(ours.weight.grad.values, [[1, 1, 1], [2, 2, 2]])


def test_a_loss_gradient_is_still_read_in_place():
    "The engine's own upstream (a fresh, writeable array) is not summed at once: the rows seen once are read where they are."
    from tinytorch.core import kernels
    table, seen = Embedding(10, 3, sparse=True), []

    def watched(ids, rows, shape):
        seen.append(rows)
        return fast.from_rows(ids, rows, shape)
    kernels.register("row_sparse_from_rows", watched, mode="fast")
    try:
        (table(np.array([1, 2, 4])) * 2.0).sum().backward()
    finally:
        kernels.register("row_sparse_from_rows", fast.from_rows, mode="fast")
    assert seen[0].flags.writeable and table.weight.grad._once[1] is seen[0]


def test_backward_does_not_copy_the_callers_gradient_and_no_grad_aliases_it():
    leaf = Tensor(np.zeros((4, 3), np.float32), requires_grad=True)
    gradient = np.ones((4, 3), np.float32)
    leaf.backward(gradient)                                # the root is the leaf itself
    assert not np.shares_memory(leaf.grad, gradient)
    leaf.grad *= 2                                         # a .grad is ours to change
    np.testing.assert_array_equal(gradient, 1)
    shaped = Tensor(np.zeros(12, np.float32), requires_grad=True)
    shaped.reshape(4, 3).backward(gradient)                # reshape's backward passes a view on
    assert not np.shares_memory(shaped.grad, gradient) and shaped.grad.flags.writeable
    a, b = Tensor(np.zeros(3), requires_grad=True), Tensor(np.zeros(3), requires_grad=True)
    g = np.arange(3.0)
    (a + b).backward(g)
    assert not np.shares_memory(a.grad, g) and not np.shares_memory(b.grad, g)
    assert not np.shares_memory(a.grad, b.grad)


def test_backward_reads_the_callers_array_without_a_copy(monkeypatch):
    "The array the engine receives is a read-only view of the caller's gradient, not a copy of it."
    seen = []
    real = autograd.backward
    monkeypatch.setattr("tinytorch.core.tensor.backward", lambda root, grad: (seen.append(grad), real(root, grad)))
    table = Embedding(20, 4)
    upstream = np.ones((5, 4), np.float32)
    table(np.arange(5)).backward(upstream)
    assert np.shares_memory(seen[0], upstream) and not seen[0].flags.writeable
    assert upstream.flags.writeable                        # the caller's own array is left as it was


def adam_by_formula(weights, grads, lr, betas, eps, weight_decay, decoupled):
    "PyTorch's Adam/AdamW formulas on whole arrays, float32 like the parameter."
    w = weights.copy()
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        if weight_decay and decoupled:
            w *= 1 - lr * weight_decay
        elif weight_decay:
            g = g + weight_decay * w
        m += (1 - betas[0]) * (g - m)
        v *= betas[1]
        v += (1 - betas[1]) * g * g
        w -= lr / (1 - betas[0] ** t) * (m / (np.sqrt(v) / math.sqrt(1 - betas[1] ** t) + eps))
    return w


@pytest.mark.parametrize("cls, weight_decay", [(Adam, 0.0), (Adam, 0.1), (AdamW, 0.01)])
@pytest.mark.parametrize("cores", [1, 2])
def test_blocked_adam_is_the_whole_array_formula_bit_for_bit(cls, weight_decay, cores, monkeypatch):
    monkeypatch.setattr(fast._Workers, "count", cores)
    monkeypatch.setattr(fast, "BLOCK_BYTES", 1 << 12)   # many blocks of rows
    monkeypatch.setattr(fast, "PARALLEL_MIN_BYTES", 0)                    # and really on two cores
    rng = np.random.default_rng(3)
    weights = rng.standard_normal((300, 17)).astype(np.float32)
    grads = [rng.standard_normal((300, 17)).astype(np.float32) for _ in range(3)]
    p = Tensor(weights.copy(), requires_grad=True)
    opt = cls([p], lr=0.01, weight_decay=weight_decay)
    for g in grads:
        p.grad = g
        opt.step()
    expected = adam_by_formula(weights, grads, 0.01, (0.9, 0.999), 1e-8, weight_decay, cls is AdamW)
    np.testing.assert_array_equal(p.data, expected)


def train(sparse, optimizer, cores, monkeypatch, distribution="uniform"):
    "Three steps on a table: the final weights."
    monkeypatch.setattr(fast._Workers, "count", cores)
    monkeypatch.setattr(fast, "PARALLEL_MIN_BYTES", 0)
    rng = np.random.default_rng(4)
    table = Embedding.from_pretrained(rng.standard_normal((500, 24)).astype(np.float32), freeze=False, sparse=sparse)
    opt = optimizer([table.weight])
    for _ in range(3):
        ids = (rng.integers(0, 500, (4, 64)) if distribution == "uniform"
               else np.minimum(rng.zipf(1.2, (4, 64)) - 1, 499))
        opt.zero_grad()
        table(ids).backward(rng.standard_normal((4, 64, 24)).astype(np.float32))
        opt.step()
    return table.weight.data.copy()


@pytest.mark.parametrize("sparse, optimizer", [(True, lambda p: SGD(p, lr=0.1)), (True, lambda p: SparseAdam(p)),
                                               (True, lambda p: SGD(p, lr=0.1, momentum=0.9)),
                                               (False, lambda p: Adam(p)), (False, lambda p: SGD(p, lr=0.1))])
@pytest.mark.parametrize("distribution", ["uniform", "zipf"])
def test_training_steps_are_bit_identical_across_runs_and_core_counts(sparse, optimizer, distribution, monkeypatch):
    first = train(sparse, optimizer, 2, monkeypatch, distribution)
    np.testing.assert_array_equal(first, train(sparse, optimizer, 2, monkeypatch, distribution))
    np.testing.assert_array_equal(first, train(sparse, optimizer, 1, monkeypatch, distribution))


def test_dense_and_sparse_sgd_agree_bit_for_bit(monkeypatch):
    "The dense gradient is the sparse one written into zeros: plain SGD moves the table identically."
    dense = train(False, lambda p: SGD(p, lr=0.1), 2, monkeypatch)
    np.testing.assert_array_equal(dense, train(True, lambda p: SGD(p, lr=0.1), 2, monkeypatch))


def test_a_callers_gradient_is_summed_at_once_into_a_plain_gradient_equal_to_the_lazy_one():
    "Read-only rows give a plain RowSparseGrad (nothing left to read later); the same bits as the lazy path."
    from tinytorch.core.autograd import RowSparseGrad
    rng = np.random.default_rng(8)
    ids = np.minimum(rng.zipf(1.3, 500) - 1, 99)
    rows = rng.standard_normal((500, 6)).astype(np.float32)
    read_only = rows.view()
    read_only.flags.writeable = False
    summed, lazy = fast.from_rows(ids, read_only, (100, 6)), fast.from_rows(ids, rows.copy(), (100, 6))
    assert type(summed) is RowSparseGrad and isinstance(lazy, fast.LazyRowSparseGrad)
    assert not np.shares_memory(summed.values, rows)
    np.testing.assert_array_equal(summed.indices, lazy.indices)
    assert summed.values.tobytes() == lazy.values.tobytes()
