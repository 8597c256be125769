"""Regression tests of module 11 named after real upstream bugs in PyTorch and Hugging Face transformers.

Each test reproduces the situation of one reported bug with tinytorch and checks that we do the right
thing; its docstring cites the issue, so a reader sees what it guards. Expected numbers are derived
here from the definitions, not copied from our own output. RoPE's (transformers #25199):
tests/attention/test_upstream_bugs.py.
"""
import numpy as np
import pytest

from tinytorch.core.autograd import RowSparseGrad
from tinytorch.core.tensor import Tensor
from tinytorch.text.bag import EmbeddingBag
from tinytorch.text.embeddings import Embedding, create_sinusoidal_embeddings, embedding


def test_max_norm_renormalising_in_place_after_another_use_of_the_weight():
    """PyTorch #26596 and #28959: `max_norm` rescales the looked-up rows of the table in place, after an earlier
    op (here `weight * weight`) saved the table for its backward. PyTorch raises "modified by an inplace
    operation"; silently using the rescaled values gives a wrong gradient. Either is acceptable here except the
    wrong gradient. Recorded forward: w = [[3, 4], [.3, .4]], so d/dw sum(w * w) = 2w = [[6, 8], [.6, .8]], plus 1
    on row 0 from the lookup: [[7, 9], [.6, .8]] (the rescaled table would give [[2.2, 2.6], ...])."""
    emb = Embedding.from_pretrained(np.array([[3.0, 4.0], [0.3, 0.4]]), freeze=False, max_norm=1.0)
    loss = (emb.weight * emb.weight).sum() + emb([0]).sum()
    np.testing.assert_allclose(emb.weight.data[0], np.array([3.0, 4.0]) / (5.0 + 1e-7), rtol=1e-6)  # renormalised
    try:
        loss.backward()
    except RuntimeError as error:
        assert "modified by an inplace operation" in str(error)
        return
    np.testing.assert_allclose(emb.weight.grad, [[7.0, 9.0], [0.6, 0.8]], rtol=1e-6)


def test_padding_idx_row_gets_no_gradient_however_long_the_input():
    """PyTorch #26302 and #28716: on GPU the row at `padding_idx` received gradient (505 per element in #26302;
    from 769 ids on in #28716). Its gradient must be zero for any input length. ids [[0, 1, 1, 2]], padding_idx 0,
    loss = sum: row gradients are the id counts without the padding row, [0, 2, 1, 0, 0]."""
    emb = Embedding(5, 3, padding_idx=0, seed=0)
    emb(np.array([[0, 1, 1, 2]])).sum().backward()
    np.testing.assert_array_equal(emb.weight.grad, np.repeat([[0.0], [2.0], [1.0], [0.0], [0.0]], 3, axis=1))
    emb.weight.grad = None
    ids = np.zeros((1, 769), dtype=np.int64)
    ids[0, ::2] = 3                                     # 385 threes, 384 padding ids
    emb(ids).sum().backward()
    np.testing.assert_array_equal(emb.weight.grad[0], 0.0)
    np.testing.assert_array_equal(emb.weight.grad[3], 385.0)


def test_sparse_gradients_also_skip_the_padding_row():
    """PyTorch #3506: `Embedding(sparse=True)` ignored `padding_idx` in its backward (fixed by PR #3842). The
    row-sparse gradient must leave the padding row out and equal the dense gradient everywhere."""
    ids = np.array([[0, 1, 1, 2], [2, 0, 4, 4]])
    dense, sparse = Embedding(5, 3, padding_idx=0, seed=0), Embedding(5, 3, padding_idx=0, sparse=True, seed=0)
    dense(ids).sum().backward()
    sparse(ids).sum().backward()
    assert isinstance(sparse.weight.grad, RowSparseGrad)
    assert sparse.weight.grad.indices.tolist() == [1, 2, 4]        # 0 is the padding row; 3 was not used
    np.testing.assert_array_equal(sparse.weight.grad.to_dense(), dense.weight.grad)


def test_scale_grad_by_freq_divides_by_each_ids_count_in_the_batch():
    """PyTorch's `scale_grad_by_freq` semantics (aten Embedding.cpp): each row's gradient is divided by how often
    its id appears in the mini-batch. ids [1, 1, 3] with an upstream gradient of ones: row 1 gets (1 + 1) / 2 = 1,
    row 3 gets 1 / 1 = 1, every other row 0. Dividing by the wrong count (or not at all) gives row 1 = 2."""
    emb = Embedding(5, 2, scale_grad_by_freq=True, seed=0)
    emb([1, 1, 3]).backward(np.ones((3, 2)))
    np.testing.assert_array_equal(emb.weight.grad, [[0, 0], [1, 1], [0, 0], [1, 1], [0, 0]])


def test_sinusoidal_table_with_an_odd_dimension():
    """transformers PR #8226 (issue #8021): BART's `SinusoidalPositionalEmbedding` broke for an odd `embedding_dim`
    (ceil(d/2) sine columns but floor(d/2) cosine columns). d = 5, position 1: sines at columns 0, 2, 4 with
    frequencies 10000^(-0/5), 10000^(-2/5), 10000^(-4/5); cosines at columns 1, 3 with the first two."""
    row = create_sinusoidal_embeddings(2, 5, dtype=np.float64).data[1]
    frequencies = 10000.0 ** (-np.array([0.0, 2.0, 4.0]) / 5)
    expected = [np.sin(frequencies[0]), np.cos(frequencies[0]), np.sin(frequencies[1]), np.cos(frequencies[1]),
                np.sin(frequencies[2])]
    np.testing.assert_allclose(row, expected, rtol=1e-12)


@pytest.mark.parametrize("lookup", [
    lambda ids: Embedding(8, 1, seed=0)(ids),
    lambda ids: embedding(ids, Tensor(np.arange(8.0)[:, None])),
    lambda ids: EmbeddingBag(8, 1, mode="sum", seed=0)(ids[None, :]),
])
def test_negative_ids_are_refused_not_wrapped_around(lookup):
    """PyTorch #151918: under torch.compile (Inductor) `torch.embedding` with ids [-4, ..., 3] returned rows
    [4, ..., 3] (wrapped around, as Python indexing would) instead of raising as eager mode does. A negative
    token id is a bug upstream (a padding sentinel, an overflow), so it must raise naming the id and the range."""
    with pytest.raises(IndexError, match=r"-4.*\[0, 8\)"):
        lookup(np.arange(-4, 4))
