"""Property tests for the embeddings (hypothesis, bounded budget): random vocabularies, widths, id multisets
and options; each property is checked against finite differences, np.add.at, or the algebra it rests on.

- Embedding: the gradient equals an np.add.at reference (padding row dropped, rows divided by their counts
  under scale_grad_by_freq) and finite differences; the sparse and dense paths give the same gradient and
  the same SGD step; EmbeddingLayer gradchecks for every position choice.
- Sinusoidal rows have norm sqrt(d/2) for even d (and the odd-d formula).

RoPE's properties: tests/attention/test_properties.py; segment_sum's: tests/autograd/test_properties.py.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tinytorch.core.autograd import RowSparseGrad, gradcheck
from tinytorch.core.optimizers import SGD
from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import (
    Embedding,
    EmbeddingLayer,
    create_sinusoidal_embeddings,
    embedding,
)

pytestmark = pytest.mark.usefixtures("both_kernels")    # run with the plain and with the fast kernels (module 18)

F64 = np.float64
BUDGET = settings(max_examples=25, deadline=None)
SEEDS = st.integers(0, 2**32 - 1)


@st.composite
def lookups(draw, max_vocab=8, max_dim=3):
    """A lookup problem: table size, an id multiset of some shape (repeats likely), options, and a seed."""
    vocab = draw(st.integers(1, max_vocab))
    dim = draw(st.integers(1, max_dim))
    shape = draw(st.sampled_from([(0,), (1,), (6,), (2, 5), (3, 1, 4)]))
    padding_idx = draw(st.none() | st.integers(-vocab, vocab - 1))
    scale_grad_by_freq = draw(st.booleans())
    return vocab, dim, shape, padding_idx, scale_grad_by_freq, draw(SEEDS)


def reference_gradient(vocab, dim, ids, upstream, padding_idx, scale_grad_by_freq):
    "dL/dW by definition: scatter-add each position's upstream row into its id's row (np.add.at)."
    expected = np.zeros((vocab, dim))
    np.add.at(expected, ids.reshape(-1), upstream.reshape(-1, dim))
    if scale_grad_by_freq:
        counts = np.bincount(ids.reshape(-1), minlength=vocab)
        expected /= np.maximum(counts, 1)[:, None]
    if padding_idx is not None:
        expected[padding_idx % vocab] = 0
    return expected


def gradient_of(table, ids, upstream, sparse, **options):
    emb = Embedding.from_pretrained(table, freeze=False, sparse=sparse, **options)
    emb(ids).backward(upstream)
    return emb.weight.grad


@BUDGET
@given(problem=lookups())
def test_embedding_gradient_equals_the_np_add_at_reference_dense_and_sparse(problem):
    vocab, dim, shape, padding_idx, scale_grad_by_freq, seed = problem
    rng = np.random.default_rng(seed)
    table, ids = rng.standard_normal((vocab, dim)), rng.integers(0, vocab, size=shape)
    upstream = rng.integers(-3, 4, size=shape + (dim,)).astype(F64)     # integers: sums are exact in any order
    expected = reference_gradient(vocab, dim, ids, upstream, padding_idx, scale_grad_by_freq)
    options = dict(padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq)
    dense = gradient_of(table, ids, upstream, sparse=False, **options)
    sparse = gradient_of(table, ids, upstream, sparse=True, **options)
    assert isinstance(dense, np.ndarray) and dense.dtype == F64
    assert isinstance(sparse, RowSparseGrad) and sparse.dtype == F64
    # Integer rows sum exactly in any order; with scale_grad_by_freq each row is divided by its count first
    # (as in PyTorch), and those quotients are rounded: a sum that is exactly 0 can come out as 1e-17.
    np.testing.assert_allclose(dense, expected, rtol=1e-14, atol=1e-13 if scale_grad_by_freq else 0)
    assert np.array_equal(sparse.to_dense(), dense), "sparse and dense paths give the same gradient"
    used = set(ids.reshape(-1).tolist()) - ({padding_idx % vocab} if padding_idx is not None else set())
    assert sparse.indices.tolist() == sorted(used), "the sparse gradient holds exactly the touched rows"


@BUDGET
@given(problem=lookups(max_vocab=6))
def test_embedding_gradient_equals_finite_differences(problem):
    """gradcheck on a float64 table. Padded positions are masked out of the loss (their rows get no gradient by
    design, so the finite difference would disagree); scale_grad_by_freq is a reweighting, not a derivative,
    so it is covered by the reference test above instead."""
    vocab, dim, shape, padding_idx, _, seed = problem
    rng = np.random.default_rng(seed)
    weight = Tensor(rng.standard_normal((vocab, dim)), dtype=F64, requires_grad=True)
    ids = rng.integers(0, vocab, size=shape)
    keep = np.ones(shape + (1,)) if padding_idx is None else (ids != padding_idx % vocab)[..., None].astype(F64)
    mask = Tensor(keep, dtype=F64)
    for sparse in (False, True):
        assert gradcheck(lambda w: embedding(ids, w, padding_idx=padding_idx, sparse=sparse) * mask, [weight])


@BUDGET
@given(problem=lookups(), lr=st.floats(1e-3, 1.0), momentum=st.sampled_from([0.0, 0.9]))
def test_a_sparse_sgd_step_equals_the_dense_step(problem, lr, momentum):
    vocab, dim, shape, padding_idx, scale_grad_by_freq, seed = problem
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((vocab, dim))
    tables = []
    for sparse in (False, True):
        emb = Embedding.from_pretrained(table, freeze=False, sparse=sparse, padding_idx=padding_idx,
                                        scale_grad_by_freq=scale_grad_by_freq)
        opt = SGD(emb.parameters(), lr=lr, momentum=momentum)
        for step in range(2):
            ids = np.random.default_rng(seed + step).integers(0, vocab, size=shape)
            opt.zero_grad()
            (emb(ids) * Tensor(np.arange(dim, dtype=F64) + 1, dtype=F64)).sum().backward()
            opt.step()
        tables.append(emb.weight.data)
    np.testing.assert_allclose(tables[1], tables[0], rtol=1e-13, atol=1e-13)


@BUDGET
@given(pos_encoding=st.sampled_from(["learned", "sinusoidal", None]), scale=st.booleans(),
       padding_idx=st.none() | st.integers(0, 4), batch=st.integers(1, 2), seq=st.integers(1, 4), seed=SEEDS)
def test_embedding_layer_gradient_equals_finite_differences(pos_encoding, scale, padding_idx, batch, seq, seed):
    layer = EmbeddingLayer(5, 2, max_seq_len=4, pos_encoding=pos_encoding, scale_embeddings=scale, dropout=0.3,
                           padding_idx=padding_idx, dtype=F64, seed=seed % 1000).eval()
    tokens = np.random.default_rng(seed).integers(0, 5, size=(batch, seq))
    keep = (tokens != padding_idx)[..., None] if padding_idx is not None else np.ones((batch, seq, 1))
    mask = Tensor(keep.astype(F64), dtype=F64)
    assert gradcheck(lambda *params: layer(tokens) * mask, layer.parameters())


# ------------------------------------------------------------------------------------------------ sinusoidal

@BUDGET
@given(length=st.integers(1, 64), dim=st.integers(1, 48), base=st.sampled_from([2.0, 100.0, 10000.0, 1e6]))
def test_sinusoidal_row_norms(length, dim, base):
    """Even d: each (sin, cos) pair has norm 1, so every row has norm sqrt(d/2). Odd d: the last column is a
    sine without its cosine, so norm^2 = (d - 1)/2 + sin^2(pos * base^(-(d-1)/d))."""
    table = create_sinusoidal_embeddings(length, dim, base=base, dtype=F64).data
    norms_squared = (table ** 2).sum(axis=1)
    if dim % 2 == 0:
        np.testing.assert_allclose(norms_squared, dim / 2, rtol=1e-12)
        np.testing.assert_allclose(np.linalg.norm(table, axis=1), np.sqrt(dim / 2), rtol=1e-12)
    else:
        last_frequency = base ** (-(dim - 1) / dim)
        expected = (dim - 1) / 2 + np.sin(np.arange(length) * last_frequency) ** 2
        np.testing.assert_allclose(norms_squared, expected, rtol=1e-12)
    assert np.array_equal(table, create_sinusoidal_embeddings(length, dim, base=base, dtype=F64).data)
