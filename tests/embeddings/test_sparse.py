"""Sparse-row gradients end to end: Embedding(sparse=True) -> RowSparseGrad -> sparse optimisers.

The sparse path must give the same weights as the dense one, never allocate a (V, d) array per
step, and be bit-for-bit deterministic.
"""
import tracemalloc

import numpy as np
import pytest

from tinytorch.core.autograd import RowSparseGrad
from tinytorch.core.optimizers import SGD, Adagrad, Adam, SparseAdam
from tinytorch.text.embeddings import Embedding

pytestmark = pytest.mark.usefixtures("both_kernels")    # run with the plain and with the fast kernels (module 18)

VOCAB, DIM = 12, 4
# Repeated ids and the padding id 0 in every batch.
BATCHES = [np.array([[1, 3, 3, 0], [5, 1, 1, 3]]), np.array([[7, 0, 7, 7], [2, 3, 11, 0]]),
           np.array([[3, 3, 3, 3], [0, 0, 9, 1]])]


def twin_tables(padding_idx=0, seed=0):
    "A dense and a sparse Embedding holding the same float64 table."
    start = np.random.default_rng(seed).standard_normal((VOCAB, DIM))
    dense = Embedding.from_pretrained(start, freeze=False, padding_idx=padding_idx)
    sparse = Embedding.from_pretrained(start, freeze=False, padding_idx=padding_idx, sparse=True)
    return start, dense, sparse


def loss_of(table, ids, seed):
    "A loss whose upstream gradient differs per position, so duplicate ids carry different rows."
    out = table(ids)
    weights = np.random.default_rng(seed).standard_normal(out.shape)
    return (out * weights).sum()


def train(table, optimizer, batches=BATCHES):
    for step, ids in enumerate(batches):
        optimizer.zero_grad()
        loss_of(table, ids, seed=step).backward()
        optimizer.step()
    return table.weight.data


@pytest.mark.parametrize("make", [lambda p: SGD(p, lr=0.1), lambda p: SGD(p, lr=0.1, momentum=0.9),
                                  lambda p: Adagrad(p, lr=0.3)], ids=["sgd", "sgd-momentum", "adagrad"])
def test_sparse_and_dense_training_reach_the_same_weights(make):
    start, dense, sparse = twin_tables()
    dense_weights = train(dense, make([dense.weight]))
    sparse_weights = train(sparse, make([sparse.weight]))
    np.testing.assert_allclose(sparse_weights, dense_weights, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(sparse_weights[0], start[0])           # padding row never moves
    never_used = sorted(set(range(VOCAB)) - set(np.concatenate([b.ravel() for b in BATCHES]).tolist()))
    np.testing.assert_array_equal(sparse_weights[never_used], start[never_used])
    assert not np.allclose(sparse_weights, start)


def test_sparse_adam_equals_dense_adam_when_every_row_is_in_every_batch():
    "SparseAdam is lazy Adam: with all rows present each step the two agree (eps placement aside)."
    every_row = [np.random.default_rng(s).permutation(np.repeat(np.arange(VOCAB), 2)).reshape(2, VOCAB)
                 for s in range(3)]
    _, dense, sparse = twin_tables(padding_idx=None)
    dense_weights = train(dense, Adam([dense.weight], lr=0.05, eps=0.0), every_row)
    sparse_weights = train(sparse, SparseAdam([sparse.weight], lr=0.05, eps=0.0), every_row)
    np.testing.assert_allclose(sparse_weights, dense_weights, rtol=1e-10, atol=1e-12)


def test_sparse_adam_leaves_absent_rows_and_their_moments_alone():
    start, _, sparse = twin_tables()
    optimizer = SparseAdam([sparse.weight], lr=0.05)
    weights = train(sparse, optimizer)
    used = np.unique(np.concatenate([b.ravel() for b in BATCHES]))
    absent = np.setdiff1d(np.arange(VOCAB), used)
    state = optimizer.state[0]
    np.testing.assert_array_equal(weights[absent], start[absent])
    assert not state["exp_avg"][absent].any() and not state["exp_avg_sq"][absent].any()
    assert state["exp_avg"][[1, 3, 7]].all()


def test_sparse_weight_grad_is_row_sparse_and_accumulates_over_two_backward_passes():
    _, dense, sparse = twin_tables()
    for ids, seed in ((BATCHES[0], 0), (BATCHES[1], 1)):
        loss_of(sparse, ids, seed).backward()
        loss_of(dense, ids, seed).backward()
    grad = sparse.weight.grad
    assert isinstance(grad, RowSparseGrad)
    assert grad.indices.tolist() == sorted(set(np.concatenate([BATCHES[0].ravel(), BATCHES[1].ravel()]).tolist()) - {0})
    np.testing.assert_allclose(grad.to_dense(), dense.weight.grad, rtol=1e-12, atol=1e-12)


def test_gradients_are_bit_for_bit_deterministic():
    rng = np.random.default_rng(3)
    ids = rng.zipf(1.3, (16, 64)) % 500
    upstream = rng.standard_normal((16, 64, 32)).astype(np.float32)
    table = rng.standard_normal((500, 32)).astype(np.float32)
    results = []
    for sparse in (False, True, False, True):
        embedding = Embedding.from_pretrained(table, freeze=False, sparse=sparse)
        embedding(ids).backward(upstream)
        grad = embedding.weight.grad
        results.append(grad.to_dense() if sparse else grad)
    assert results[0].tobytes() == results[2].tobytes() and results[1].tobytes() == results[3].tobytes()
    assert results[0].tobytes() == results[1].tobytes()


def test_a_sparse_training_step_never_allocates_a_vocab_sized_array():
    "Forward, sparse backward and an SGD step on a 4,000,000-row table stay within a few batch-sized arrays."
    vocab, dim = 4_000_000, 32                                   # the table is 512 MB; the batch is 2 MB
    table = Embedding.from_pretrained(np.zeros((vocab, dim), np.float32), freeze=False, sparse=True)
    optimizer = SGD([table.weight], lr=0.1)
    ids = np.random.default_rng(0).integers(0, vocab, (16, 1024))
    upstream = np.ones((16, 1024, dim), np.float32)
    batch_bytes = ids.size * dim * 4

    def step():
        optimizer.zero_grad()
        table(ids).backward(upstream)
        optimizer.step()

    step()                                                       # first-call allocations are not the step's
    tracemalloc.start()
    step()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 6 * batch_bytes, f"a sparse step peaked at {peak / 1e6:.1f} MB (batch is {batch_bytes / 1e6:.1f} MB)"
    assert np.count_nonzero(table.weight.data[:, 0]) == len(np.unique(ids))


def test_sparse_training_matches_pytorch_sparse_adam_trajectory():
    torch = pytest.importorskip("torch", reason="torch not installed; the PyTorch parity tests need pip install torch==2.13.0")
    start = np.random.default_rng(0).standard_normal((VOCAB, DIM))
    ours = Embedding.from_pretrained(start, freeze=False, padding_idx=0, sparse=True)
    theirs = torch.nn.Embedding.from_pretrained(torch.tensor(start), freeze=False, padding_idx=0, sparse=True)
    our_optimizer = SparseAdam([ours.weight], lr=0.05)
    their_optimizer = torch.optim.SparseAdam(list(theirs.parameters()), lr=0.05)
    for step, ids in enumerate(BATCHES * 2):
        upstream = np.random.default_rng(step).standard_normal(ids.shape + (DIM,))
        our_optimizer.zero_grad()
        ours(ids).backward(upstream)
        their_optimizer.zero_grad()
        theirs(torch.tensor(ids)).backward(torch.tensor(upstream))
        np.testing.assert_allclose(ours.weight.grad.to_dense(), theirs.weight.grad.to_dense().numpy(),
                                   rtol=1e-12, atol=1e-12)
        our_optimizer.step()
        their_optimizer.step()
        np.testing.assert_allclose(ours.weight.data, theirs.weight.detach().numpy(), rtol=1e-10, atol=1e-12)


# ================================================================ issue 23: reliability, third pass
# ---------------------------------------------------------------- defect 3: the sparse gradient owns its rows

@pytest.mark.parametrize("ids", [np.array([1, 3, 3, 0]), np.array([4, 2, 7, 9]), np.array([5, 5, 5, 5])],
                         ids=["repeated", "distinct", "one id"])
def test_writing_into_the_callers_gradient_after_backward_leaves_the_sparse_grad_alone(ids):
    "The upstream array passed to backward() stays the caller's: writing into it afterwards changes no .grad."
    table = Embedding.from_pretrained(np.zeros((VOCAB, DIM)), freeze=False, sparse=True)
    upstream = np.arange(len(ids) * DIM, dtype=np.float64).reshape(len(ids), DIM)
    expected = np.zeros((VOCAB, DIM))
    np.add.at(expected, ids, upstream)
    table(ids).backward(upstream)
    upstream[...] = 1e6                                   # the caller reuses its buffer (the next batch)
    np.testing.assert_array_equal(table.weight.grad.to_dense(), expected)
    np.testing.assert_array_equal(table.weight.grad.values, expected[np.unique(ids)])
    SGD([table.weight], lr=1.0).step()                    # the optimiser reads the rows: still the old ones
    np.testing.assert_array_equal(table.weight.data, -expected)


def test_from_rows_keeps_no_view_of_read_only_rows():
    "A read-only array is someone else's (the caller's gradient, as Tensor.backward passes it on): never kept, as in `accumulate`."
    buffer = np.ones((3, DIM))
    seen_by_backward = buffer.view()
    seen_by_backward.flags.writeable = False
    grad = RowSparseGrad.from_rows(np.array([2, 6, 2]), seen_by_backward, (VOCAB, DIM))
    buffer[...] = 7
    np.testing.assert_array_equal(grad.to_dense()[[2, 6]], [[2.0] * DIM, [1.0] * DIM])


def test_an_embedding_bag_gradient_owns_its_rows_too():
    from tinytorch.text.bag import EmbeddingBag
    bag = EmbeddingBag.from_pretrained(np.zeros((VOCAB, DIM)), freeze=False, mode="sum", sparse=True)
    upstream = np.ones((2, DIM))
    bag(np.array([[1, 2], [2, 5]])).backward(upstream)
    upstream[...] = 50
    np.testing.assert_array_equal(bag.weight.grad.to_dense()[[1, 2, 5]], [[1.0] * DIM, [2.0] * DIM, [1.0] * DIM])
