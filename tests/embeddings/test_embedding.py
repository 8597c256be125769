"""Behaviour of tinytorch.text.embeddings: Embedding and its backward, id validation, inits, max_norm,
from_pretrained, tied output heads, FactorizedEmbedding and the memory analysis.

Positional encodings and EmbeddingLayer: test_positions.py; PyTorch parity: test_torch_parity.py.
"""
import math
import tracemalloc

import numpy as np
import pytest

from tinytorch.core.autograd import RowSparseGrad, gradcheck, no_grad
from tinytorch.core.layers import Parameter
from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import (
    INITS,
    Embedding,
    EmbeddingBackward,
    FactorizedEmbedding,
    as_token_ids,
    embedding,
)
from tinytorch.text.memory import BYTES_PER_FLOAT16, BYTES_PER_FLOAT32, BYTES_PER_INT8, embedding_memory, embedding_memory_table

pytestmark = pytest.mark.usefixtures("both_kernels")    # run with the plain and with the fast kernels (module 18)


def one_hot_gradient(ids, upstream, vocab_size):
    """dL/dW for out = onehot(ids) @ W: the definition the backward must match (independent of segment_sum)."""
    one_hot = np.eye(vocab_size)[np.asarray(ids).reshape(-1)]
    return one_hot.T @ np.asarray(upstream, dtype=np.float64).reshape(one_hot.shape[0], -1)


def dense(grad):
    return grad.to_dense() if isinstance(grad, RowSparseGrad) else grad


def test_public_names_import_from_the_package():
    from tinytorch.text.embeddings import (  # noqa: F401  (the import line of the acceptance criteria)
        Embedding, EmbeddingBackward, EmbeddingLayer, FactorizedEmbedding, PositionalEncoding, RotaryEmbedding,
        create_sinusoidal_embeddings, embedding)


# ------------------------------------------------------------------------------------------------ forward

@pytest.mark.parametrize("ids", [
    [3],
    [[1, 2, 3], [4, 5, 6]],
    np.array([[[0], [9]]], dtype=np.int32),
    np.array([7, 7, 0], dtype=np.uint8),
    Tensor([[2, 2]]),
    np.int64(4),
    5,
    np.zeros((2, 0), dtype=np.int64),
], ids=["list", "nested-list", "int32-3d", "uint8", "int-tensor", "numpy-scalar", "python-int", "empty-2x0"])
def test_forward_gathers_rows_for_any_leading_shape(ids):
    emb = Embedding(10, 4, seed=0)
    out = emb(ids)
    as_array = np.asarray(ids.data if isinstance(ids, Tensor) else ids)
    assert out.shape == as_array.shape + (4,)
    assert out.dtype == np.float32
    assert np.array_equal(out.data, emb.weight.data[as_array])


def test_empty_id_list_gives_zero_rows():
    emb = Embedding(10, 4, seed=0)
    out = emb([])
    assert out.shape == (0, 4)
    out.sum().backward()
    assert np.array_equal(emb.weight.grad, np.zeros((10, 4)))


def test_output_is_recorded_by_embedding_backward_and_is_not_a_view():
    emb = Embedding(6, 3, seed=0)
    out = emb([1, 2])
    assert isinstance(out._grad_fn, EmbeddingBackward) and out.requires_grad
    out.data[...] = 100.0
    assert not np.any(emb.weight.data == 100.0), "the output must be a copy, not a view of the table"
    with no_grad():
        assert emb([1])._grad_fn is None
    frozen = Embedding.from_pretrained(np.ones((3, 2)))
    assert frozen([0])._grad_fn is None and not frozen([0]).requires_grad


def test_functional_embedding_matches_the_module_and_accepts_an_array_table():
    emb = Embedding(8, 3, padding_idx=2, seed=0)
    ids = [[1, 2], [7, 1]]
    assert np.array_equal(embedding(ids, emb.weight, padding_idx=2).data, emb(ids).data)
    assert np.array_equal(embedding(ids, emb.weight.data).data, emb.weight.data[ids])
    with pytest.raises(ValueError, match=r"2-D .* got shape \(8,\)"):
        embedding([0], np.zeros(8))


# ------------------------------------------------------------------------------------------------ bad ids

@pytest.mark.parametrize("ids, message", [
    ([1, 10], r"token id 10 at position \(1,\) is out of range \[0, 10\)"),
    ([[0, 3], [12, 11]], r"token id 12 at position \(1, 0\) is out of range \[0, 10\)"),
    ([4, -1], r"token id -1 at position \(1,\) is out of range \[0, 10\)"),
    (np.array(10), r"token id 10 at position \(\) is out of range \[0, 10\)"),
])
def test_out_of_range_ids_raise_index_error_naming_id_position_and_range(ids, message):
    with pytest.raises(IndexError, match=message):
        Embedding(10, 4, seed=0)(ids)


@pytest.mark.parametrize("ids, dtype_name", [
    ([1.0, 2.0], "float64"),
    (np.array([1, 2], dtype=np.float32), "float32"),
    (Tensor([1.0, 2.0]), "float32"),
    (np.array([True, False]), "bool"),
    ([True, False], "bool"),
    (np.array(["a", "b"]), "<U1"),
])
def test_float_bool_and_other_non_integer_ids_raise_type_error_naming_the_dtype(ids, dtype_name):
    with pytest.raises(TypeError, match=f"token ids must be integers; got dtype {dtype_name}"):
        Embedding(10, 4, seed=0)(ids)


def test_empty_float_array_is_still_a_type_error_but_an_empty_list_is_fine():
    with pytest.raises(TypeError, match="float64"):
        as_token_ids(np.array([], dtype=np.float64), 5)
    assert as_token_ids([], 5).dtype.kind == "i"


def test_a_failing_lookup_leaves_the_table_unchanged_even_with_max_norm():
    emb = Embedding(4, 2, max_norm=1.0, seed=0)
    emb.weight.data[...] = [[3, 4], [6, 8], [1, 0], [0, 9]]
    before = emb.weight.data.copy()
    with pytest.raises(IndexError, match="token id 4"):
        emb([0, 1, 4])
    with pytest.raises(TypeError):
        emb([0.0, 1.0])
    assert np.array_equal(emb.weight.data, before)


def test_as_token_ids_keeps_shape_and_integer_dtype():
    ids = as_token_ids([[1, 2, 3]], 4)
    assert ids.shape == (1, 3) and ids.dtype.kind == "i"
    assert as_token_ids(Tensor(np.array([0, 3], dtype=np.int32)), 4).dtype == np.int32


# ------------------------------------------------------------------------------------------------ constructor

@pytest.mark.parametrize("kwargs, error, message", [
    (dict(vocab_size=0, embedding_dim=4), ValueError, r"vocab_size must be a positive int; got 0"),
    (dict(vocab_size=-3, embedding_dim=4), ValueError, r"vocab_size must be a positive int; got -3"),
    (dict(vocab_size=10, embedding_dim=0), ValueError, r"embedding_dim must be a positive int; got 0"),
    (dict(vocab_size=2.5, embedding_dim=4), TypeError, r"vocab_size must be a positive int; got 2.5"),
    (dict(vocab_size=True, embedding_dim=4), TypeError, r"got True"),
    (dict(vocab_size=5, embedding_dim=4, padding_idx=5), ValueError, r"padding_idx=5 is outside \[-5, 5\)"),
    (dict(vocab_size=5, embedding_dim=4, padding_idx=-6), ValueError, r"padding_idx=-6 is outside \[-5, 5\)"),
    (dict(vocab_size=5, embedding_dim=4, padding_idx=1.0), TypeError, r"padding_idx must be an int"),
    (dict(vocab_size=5, embedding_dim=4, init="kaiming"),
     ValueError, r"unknown init 'kaiming'; choose one of 'xavier', 'normal', 'trunc_normal', 'gpt2'"),
    (dict(vocab_size=5, embedding_dim=4, device="cuda"), ValueError, r"device='cuda' .* tinytorch is CPU/NumPy only"),
    (dict(vocab_size=5, embedding_dim=4, device="mps"), ValueError, r"CPU/NumPy only"),
    (dict(vocab_size=5, embedding_dim=4, max_norm=0.0), ValueError, r"max_norm must be a positive number .* got 0.0"),
    (dict(vocab_size=5, embedding_dim=4, dtype=np.int64), TypeError, r"holds floats; got dtype int64"),
    (dict(vocab_size=5, embedding_dim=4, embed_dim=4), TypeError, r"got both embedding_dim=4 and embed_dim=4"),
    (dict(vocab_size=5, num_embeddings=6, embedding_dim=4), TypeError, r"got both vocab_size=5 and num_embeddings=6"),
    (dict(vocab_size=5), TypeError, r"missing required argument embedding_dim \(or its alias embed_dim\)"),
])
def test_bad_constructor_arguments_are_refused_with_the_value_in_the_message(kwargs, error, message):
    with pytest.raises(error, match=message):
        Embedding(**kwargs)


def test_keyword_aliases_and_device_cpu_are_accepted():
    for emb in (Embedding(num_embeddings=7, embedding_dim=3), Embedding(7, embed_dim=3), Embedding(7, 3, device="cpu")):
        assert (emb.vocab_size, emb.num_embeddings, emb.embedding_dim, emb.weight.shape) == (7, 7, 3, (7, 3))


def test_negative_padding_idx_counts_from_the_end():
    emb = Embedding(5, 2, padding_idx=-1, init="normal", seed=0)
    assert emb.padding_idx == 4 and np.all(emb.weight.data[4] == 0)


def test_repr_parameters_and_state_dict_follow_pytorch_names():
    assert repr(Embedding(10, 3)) == "Embedding(10, 3)"
    assert repr(Embedding(10, 3, padding_idx=0, sparse=True, init="gpt2")) == \
        "Embedding(10, 3, padding_idx=0, sparse=True, init='gpt2')"
    assert repr(Embedding(10, 3, max_norm=1.0, norm_type=1.0)) == "Embedding(10, 3, max_norm=1.0, norm_type=1.0)"
    emb = Embedding(10, 3, seed=0)
    assert [name for name, _ in emb.named_parameters()] == ["weight"] and emb.parameters() == [emb.weight]
    assert isinstance(emb.weight, Parameter)
    state = emb.state_dict()
    assert list(state) == ["weight"] and np.array_equal(state["weight"], emb.weight.data)
    other = Embedding(10, 3, seed=1)
    other.load_state_dict(state)
    assert np.array_equal(other.weight.data, emb.weight.data)


# ------------------------------------------------------------------------------------------------ backward

def test_reference_padding_gradient_counts():
    emb = Embedding(5, 3, padding_idx=0, seed=0)
    emb([[0, 1, 1, 2]]).sum().backward()
    assert np.array_equal(emb.weight.grad, np.repeat([[0.0], [2.0], [1.0], [0.0], [0.0]], 3, axis=1))


def test_reference_scale_grad_by_freq():
    emb = Embedding(5, 2, scale_grad_by_freq=True, seed=0)
    emb([1, 1, 3]).sum().backward()
    assert np.array_equal(emb.weight.grad[:, 0], [0.0, 1.0, 0.0, 1.0, 0.0])


@pytest.mark.parametrize("sparse", [False, True])
def test_repeated_ids_accumulate_like_the_one_hot_product(sparse, rng):
    ids = rng.integers(0, 12, size=(6, 40))                  # 240 lookups into 12 rows: many repeats
    upstream = rng.standard_normal((6, 40, 5))
    emb = Embedding(12, 5, sparse=sparse, dtype=np.float64, seed=0)
    emb(ids).backward(upstream)
    assert np.allclose(dense(emb.weight.grad), one_hot_gradient(ids, upstream, 12))


@pytest.mark.parametrize("padding_idx", [None, 0, 3, -1])
@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
def test_sparse_gradient_equals_the_dense_one(padding_idx, scale_grad_by_freq, rng):
    ids = rng.integers(0, 30, size=(3, 17))
    ids[0, :3] = 29                                           # make sure the -1 pad id occurs
    upstream = rng.standard_normal((3, 17, 4)).astype(np.float32)
    grads = []
    for sparse in (False, True):
        emb = Embedding(30, 4, padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse, seed=0)
        emb(ids).backward(upstream)
        grads.append(emb.weight.grad)
    dense_grad, sparse_grad = grads
    assert isinstance(sparse_grad, RowSparseGrad) and isinstance(dense_grad, np.ndarray)
    assert sparse_grad.shape == (30, 4) and sparse_grad.dtype == np.float32 == dense_grad.dtype
    expected_rows = sorted(set(ids.reshape(-1).tolist()) - ({padding_idx % 30} if padding_idx is not None else set()))
    assert sparse_grad.indices.tolist() == expected_rows, "unique sorted touched rows, padding excluded"
    assert np.allclose(sparse_grad.to_dense(), dense_grad, atol=1e-6)
    touched = np.zeros(30, bool)
    touched[expected_rows] = True
    assert np.all(dense_grad[~touched] == 0), "rows not looked up (and the pad row) get exactly zero"


def test_scale_grad_by_freq_divides_each_row_by_its_count(rng):
    ids = np.array([[4, 4, 4, 1], [1, 0, 4, 2]])
    upstream = rng.standard_normal((2, 4, 3))
    emb = Embedding(6, 3, scale_grad_by_freq=True, dtype=np.float64, seed=0)
    emb(ids).backward(upstream)
    counts = np.bincount(ids.reshape(-1), minlength=6)
    expected = one_hot_gradient(ids, upstream, 6) / np.maximum(counts, 1)[:, None]
    assert np.allclose(emb.weight.grad, expected)


@pytest.mark.parametrize("sparse", [False, True])
def test_scale_grad_by_freq_is_the_finite_difference_gradient_of_the_count_weighted_loss(sparse, rng):
    """scale_grad_by_freq is not the derivative of the lookup; it is, exactly, the derivative of the loss in
    which every position is weighted by 1 / (count of its id). Checked by central differences."""
    ids = np.array([[0, 2, 2], [2, 4, 0]])
    upstream = rng.standard_normal((2, 3, 3))
    emb = Embedding(5, 3, scale_grad_by_freq=True, sparse=sparse, dtype=np.float64, seed=0)
    emb(ids).backward(upstream)
    weights = 1.0 / np.bincount(ids.reshape(-1), minlength=5)[ids][..., None]

    def weighted_loss(table):
        return float((table[ids] * upstream * weights).sum())

    numeric, table, eps = np.zeros((5, 3)), emb.weight.data, 1e-6
    for i in np.ndindex(table.shape):
        original = table[i]
        table[i] = original + eps
        plus = weighted_loss(table)
        table[i] = original - eps
        numeric[i] = (plus - weighted_loss(table)) / (2 * eps)
        table[i] = original
    assert np.allclose(dense(emb.weight.grad), numeric, atol=1e-6)


@pytest.mark.parametrize("padding_idx", [1, -2])
@pytest.mark.parametrize("sparse", [False, True])
def test_padding_row_is_zero_at_init_and_never_gets_gradient(padding_idx, sparse):
    for init in INITS:
        emb = Embedding(6, 3, padding_idx=padding_idx, sparse=sparse, init=init, seed=0)
        assert np.all(emb.weight.data[padding_idx] == 0), init
    emb([[padding_idx % 6, padding_idx % 6, 0]]).sum().backward()
    grad = dense(emb.weight.grad)
    assert np.all(grad[padding_idx] == 0) and np.all(grad[0] == 1)
    only_padding = Embedding(6, 3, padding_idx=padding_idx, sparse=sparse, seed=0)
    only_padding([padding_idx % 6]).sum().backward()
    assert not np.any(dense(only_padding.weight.grad))
    if sparse:
        assert len(only_padding.weight.grad.indices) == 0


def test_gradients_accumulate_over_two_backward_passes_dense_and_sparse():
    for sparse in (False, True):
        emb = Embedding(8, 2, sparse=sparse, seed=0)
        emb([1, 2]).sum().backward()
        emb([2, 5, 5]).sum().backward()
        assert isinstance(emb.weight.grad, RowSparseGrad) == sparse
        assert np.array_equal(dense(emb.weight.grad)[:, 0], [0, 1, 2, 0, 0, 2, 0, 0])


@pytest.mark.parametrize("options", [dict(), dict(sparse=True)], ids=["dense", "sparse"])
def test_gradcheck_with_duplicate_ids(options):
    """(scale_grad_by_freq is deliberately *not* the gradient, so it is checked against its definition above.)"""
    weight = Tensor(np.random.default_rng(0).standard_normal((7, 3)), requires_grad=True, dtype=np.float64)
    ids = np.array([[[1, 1, 6], [0, 1, 3]], [[6, 6, 6], [2, 0, 1]]])          # (2, 2, 3): repeats, 3-D ids
    assert gradcheck(lambda w: embedding(ids, w, **options), [weight])


@pytest.mark.parametrize("sparse", [False, True])
def test_gradcheck_with_padding_when_padded_positions_are_masked(sparse):
    """The pad row is defined to get no gradient although the output reads it; with padded positions masked out
    of the loss (what real models do) the output no longer depends on it, and finite differences agree."""
    emb = Embedding(6, 3, padding_idx=2, sparse=sparse, dtype=np.float64, seed=0)
    ids = np.array([[1, 2, 2, 5], [2, 1, 0, 0]])
    mask = Tensor((ids != 2)[..., None].astype(np.float64), dtype=np.float64)
    assert gradcheck(lambda w: emb(ids) * mask, [emb.weight])


def test_gradient_has_the_table_dtype():
    for dtype in (np.float32, np.float64):
        for sparse in (False, True):
            emb = Embedding(5, 2, sparse=sparse, scale_grad_by_freq=True, dtype=dtype, seed=0)
            emb([1, 1]).backward(np.ones((2, 2)))
            assert emb.weight.grad.dtype == dtype


def test_sparse_backward_never_allocates_a_vocab_by_dim_array():
    """2,000,000 x 64 float32 = 512 MB. np.zeros reserves it lazily (untouched pages cost nothing) before tracing
    starts; then a sparse lookup + backward must stay within a few times the size of the batch."""
    vocab_size, dim = 2_000_000, 64
    table = Parameter(np.zeros((vocab_size, dim), dtype=np.float32))
    ids = np.random.default_rng(0).integers(0, vocab_size, size=(8, 512))
    upstream = np.ones((8, 512, dim), dtype=np.float32)
    batch_bytes = upstream.nbytes                               # 1 MB
    tracemalloc.start()
    try:
        embedding(ids, table, sparse=True, scale_grad_by_freq=True).backward(upstream)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(table.grad, RowSparseGrad) and len(table.grad.indices) == len(np.unique(ids))
    assert peak < 8 * batch_bytes < vocab_size * dim * 4 / 60, f"peak {peak / 1e6:.1f} MB"


def test_the_memory_probe_does_see_a_dense_vocab_by_dim_gradient():
    "Control for the test above: the same measurement on the dense path finds the (V, d) array."
    vocab_size, dim = 200_000, 64
    table = Parameter(np.zeros((vocab_size, dim), dtype=np.float32))
    ids = np.random.default_rng(0).integers(0, vocab_size, size=(8, 512))
    tracemalloc.start()
    try:
        embedding(ids, table).backward(np.ones((8, 512, dim), dtype=np.float32))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak >= vocab_size * dim * 4


# ------------------------------------------------------------------------------------------------ max_norm

def test_reference_max_norm_renormalises_in_place_before_the_lookup():
    emb = Embedding(3, 2, max_norm=1.0, seed=0)
    emb.weight.data[...] = [[3, 4], [0.3, 0.4], [6, 8]]
    table = emb.weight.data
    out = emb([0, 0, 1])
    assert emb.weight.data is table, "modified in place, not replaced"
    assert np.allclose(table, [[0.6, 0.8], [0.3, 0.4], [6, 8]], atol=1e-6), "row 2 was not looked up"
    assert np.allclose(out.data, [[0.6, 0.8], [0.6, 0.8], [0.3, 0.4]], atol=1e-6)
    assert np.allclose(np.linalg.norm(table[0]), 1.0, atol=1e-6)


def test_max_norm_uses_the_pytorch_scale_and_the_p_norm():
    emb = Embedding(2, 2, max_norm=1.0, norm_type=1.0, dtype=np.float64, seed=0)
    emb.weight.data[...] = [[3, 4], [0.5, 0.25]]
    emb([0, 1])
    assert np.allclose(emb.weight.data[0], np.array([3, 4]) * (1.0 / (7 + 1e-7)))
    assert np.array_equal(emb.weight.data[1], [0.5, 0.25])


def test_no_gradient_flows_through_the_renormalisation():
    emb = Embedding(3, 2, max_norm=1.0, dtype=np.float64, seed=0)
    emb.weight.data[...] = [[3, 4], [1, 0], [0, 0]]
    emb([0, 0]).sum().backward()
    assert np.array_equal(emb.weight.grad, [[2, 2], [0, 0], [0, 0]])


# ------------------------------------------------------------------------------------------------ initialisation

def test_xavier_init_is_uniform_within_the_glorot_bound():
    vocab_size, dim = 4000, 100
    table = Embedding(vocab_size, dim, seed=0).weight.data
    bound = math.sqrt(6 / (vocab_size + dim))
    assert table.dtype == np.float32
    assert -bound <= table.min() < -0.99 * bound and 0.99 * bound < table.max() <= bound
    assert abs(table.mean()) < 0.01 * bound
    assert abs(table.std() - bound / math.sqrt(3)) < 0.01 * bound / math.sqrt(3)


def test_normal_init_is_standard_normal():
    table = Embedding(4000, 100, init="normal", seed=0).weight.data
    assert abs(table.mean()) < 0.01 and abs(table.std() - 1) < 0.01 and np.abs(table).max() > 4


def test_trunc_normal_init_is_cut_at_three_standard_deviations():
    table = Embedding(4000, 100, init="trunc_normal", seed=0).weight.data.astype(np.float64)
    # std of N(0, 1) truncated to [-3, 3]: sqrt(1 - 2*3*phi(3) / (2*Phi(3) - 1)) = 0.98658...
    phi = math.exp(-4.5) / math.sqrt(2 * math.pi)
    expected_std = math.sqrt(1 - 6 * phi / math.erf(3 / math.sqrt(2)))
    assert np.abs(table).max() <= 3 and np.abs(table).max() > 2.9
    assert abs(table.mean()) < 0.01 and abs(table.std() - expected_std) < 0.005
    assert abs(table.std() - 1) > 0.01, "truncation must show in the std (it is not a plain normal)"


def test_gpt2_init_has_std_002():
    table = Embedding(4000, 100, init="gpt2", seed=0).weight.data
    assert abs(table.mean()) < 2e-4 and abs(table.std() - 0.02) < 2e-4


def test_seeds_make_tables_reproducible_and_reset_parameters_redraws():
    a, b, c = Embedding(50, 8, seed=3), Embedding(50, 8, seed=3), Embedding(50, 8, seed=4)
    assert np.array_equal(a.weight.data, b.weight.data) and not np.array_equal(a.weight.data, c.weight.data)
    first = a.weight.data.copy()
    a.reset_parameters()
    b.reset_parameters()
    assert not np.array_equal(a.weight.data, first), "reset draws new values"
    assert np.array_equal(a.weight.data, b.weight.data), "and the same ones for the same seed"
    padded = Embedding(50, 8, padding_idx=7, init="normal", seed=0)
    padded.weight.data[7] = 5.0
    padded.reset_parameters()
    assert np.all(padded.weight.data[7] == 0)


def test_float64_tables_stay_float64():
    emb = Embedding(5, 3, dtype=np.float64, init="trunc_normal", seed=0)
    assert emb.weight.dtype == np.float64 and emb([1, 2]).dtype == np.float64


# ------------------------------------------------------------------------------------------------ from_pretrained

def test_from_pretrained_copies_and_freezes_by_default():
    weights = np.arange(12, dtype=np.float32).reshape(4, 3)
    emb = Embedding.from_pretrained(weights)
    assert not emb.weight.requires_grad and np.array_equal(emb([3]).data, [[9, 10, 11]])
    weights[0] = -1
    assert emb.weight.data[0, 0] == 0, "a copy, not an alias of the caller's array"
    emb.weight.data[1] = 7
    assert weights[1, 0] == 3
    assert (emb.vocab_size, emb.embedding_dim) == (4, 3)


def test_from_pretrained_unfrozen_trains_keeps_dtype_and_padding_values():
    source = Tensor(np.ones((4, 2)), dtype=np.float64)
    emb = Embedding.from_pretrained(source, freeze=False, padding_idx=0, sparse=True)
    assert emb.weight.requires_grad and emb.weight.dtype == np.float64 and emb.weight.data is not source.data
    assert np.all(emb.weight.data[0] == 1), "as in PyTorch, the pretrained pad row keeps its values"
    emb([0, 1, 1]).sum().backward()
    assert np.array_equal(emb.weight.grad.to_dense()[:, 0], [0, 2, 0, 0])


def test_from_pretrained_makes_one_copy_and_draws_no_table(monkeypatch):
    """PyTorch's constructor draws no table when `_weight` is given; a drawn one would be thrown away at once. With
    the draw, its arithmetic and a second copy, `from_pretrained` peaked at 4 times the table (tracemalloc)."""
    import tinytorch.text.embeddings as embeddings
    draws = []
    real = embeddings.init_table
    monkeypatch.setattr(embeddings, "init_table", lambda *a, **k: draws.append(a[0]) or real(*a, **k))
    weights = np.ones((2000, 64), np.float32)
    tracemalloc.start()
    try:
        emb = Embedding.from_pretrained(weights, padding_idx=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    positions = embeddings.LearnedPositionalEncoding.from_pretrained(weights[:16])
    assert draws == [], (f"Embedding.__init__ / LearnedPositionalEncoding.__init__: drew a table of shape {draws[0]} "
                         f"although `_weight` was given (from_pretrained); draw only when `_weight` is None")
    assert peak < 1.25 * weights.nbytes, f"from_pretrained held {peak / weights.nbytes:.1f} tables at its peak; expected 1"
    assert np.array_equal(emb.weight.data, weights) and not np.shares_memory(emb.weight.data, weights)
    assert np.array_equal(positions.position_embeddings.data, weights[:16])
    Embedding(3, 2)
    embeddings.LearnedPositionalEncoding(4, 2)
    assert draws == [(3, 2), (4, 2)], "without `_weight` each constructor draws its table"


def test_from_pretrained_refuses_bad_tables():
    with pytest.raises(ValueError, match=r"2-D .* got shape \(3,\)"):
        Embedding.from_pretrained(np.ones(3))
    with pytest.raises(TypeError, match="int64"):
        Embedding.from_pretrained(np.ones((3, 2), dtype=np.int64))


# ------------------------------------------------------------------------------------------------ tied output head

def tied_lm_loss(table, context_ids, targets):
    hidden = table(context_ids).mean(axis=-2).tanh()               # (batch, d)
    log_probs = table.attend(hidden).log_softmax(axis=-1)           # (batch, V)
    return -log_probs[np.arange(len(targets)), targets].mean()


def test_tied_language_model_gradcheck():
    table = Embedding(9, 4, dtype=np.float64, seed=0)
    assert gradcheck(lambda w: tied_lm_loss(table, [[1, 2, 2], [3, 8, 1]], np.array([5, 2])), [table.weight])


@pytest.mark.parametrize("sparse", [False, True])
def test_tied_gradient_is_the_sum_of_lookup_and_head_gradients(sparse, rng):
    table = Embedding(9, 4, sparse=sparse, dtype=np.float64, seed=0)
    ids, hidden_upstream = np.array([[1, 2, 2]]), rng.standard_normal((1, 3, 9))
    table.attend(table(ids)).backward(hidden_upstream)
    tied = dense(table.weight.grad)

    lookup_only = Embedding.from_pretrained(table.weight.data, freeze=False)
    head_only = Embedding.from_pretrained(table.weight.data, freeze=False)
    head_only.attend(Tensor(lookup_only(ids).data, dtype=np.float64)).backward(hidden_upstream)
    hidden_grad = hidden_upstream @ table.weight.data                              # dL/d(lookup output)
    lookup_only(ids).backward(hidden_grad)
    assert np.allclose(tied, lookup_only.weight.grad + head_only.weight.grad)


def test_attend_shapes_and_errors():
    table = Embedding(11, 4, seed=0)
    assert table.attend(np.ones((2, 3, 4))).shape == (2, 3, 11)
    assert table.attend(Tensor(np.ones(4))).shape == (11,)
    with pytest.raises(ValueError, match=r"shape \(\*, 4\); got \(2, 5\)"):
        table.attend(np.ones((2, 5)))


# ------------------------------------------------------------------------------------------------ factorised

def test_factorized_embedding_parameter_count_forward_and_names():
    factorized = FactorizedEmbedding(1000, 64, rank=8, seed=0)
    assert sum(p.size for p in factorized.parameters()) == 1000 * 8 + 8 * 64
    assert [name for name, _ in factorized.named_parameters()] == ["embedding.weight", "projection"]
    assert factorized.parameter_savings == 1000 * 64 - (1000 * 8 + 8 * 64)
    ids = [[1, 999], [5, 5]]
    out = factorized(ids)
    assert out.shape == (2, 2, 64)
    assert np.allclose(out.data, factorized.embedding.weight.data[ids] @ factorized.projection.data, atol=1e-6)
    assert "rank=8" in repr(factorized)


def test_factorized_embedding_gradcheck():
    factorized = FactorizedEmbedding(6, 5, rank=2, dtype=np.float64, seed=0)
    assert gradcheck(lambda w, p: factorized([[0, 5, 5], [1, 0, 5]]),
                     [factorized.embedding.weight, factorized.projection])


def test_factorized_rank_rules():
    no_saving = FactorizedEmbedding(10, 4, rank=4, seed=0)
    assert no_saving.parameter_savings <= 0
    with pytest.raises(ValueError, match="rank must be a positive int; got 0"):
        FactorizedEmbedding(10, 4, rank=0)
    with pytest.raises(TypeError, match="missing required argument rank"):
        FactorizedEmbedding(10, 4)
    assert FactorizedEmbedding(num_embeddings=10, embed_dim=4, rank=2).embedding_dim == 4


# ------------------------------------------------------------------------------------------------ memory

def test_embedding_memory_bytes():
    assert (BYTES_PER_FLOAT32, BYTES_PER_FLOAT16, BYTES_PER_INT8) == (4, 2, 1)
    assert embedding_memory(50257, 768) == 38_597_376 * BYTES_PER_FLOAT32
    assert embedding_memory(50257, 768, np.float16) == 38_597_376 * BYTES_PER_FLOAT16
    assert embedding_memory(1024, 768) // BYTES_PER_FLOAT32 == 786_432             # GPT-2's wpe
    with pytest.raises(ValueError, match="vocab_size must be a positive int; got 0"):
        embedding_memory(0, 768)


def test_memory_table_reference_models():
    rows = {row["model"]: row for row in embedding_memory_table()}
    gpt2, gpt3 = rows["GPT-2 small"], rows["GPT-3 175B"]
    assert (gpt2["vocab_size"], gpt2["embedding_dim"], gpt2["parameters"]) == (50257, 768, 38_597_376)
    assert round(gpt2["float32_bytes"] / 1e6, 1) == 154.4
    assert gpt3["parameters"] == 617_558_016 and round(gpt3["float32_bytes"] / 1e9, 2) == 2.47
    for row in rows.values():
        assert row["float32_bytes"] == 2 * row["float16_bytes"] == 4 * row["int8_bytes"] == 4 * row["parameters"]
    assert len(rows) >= 4


def test_memory_table_for_custom_models():
    rows = embedding_memory_table({"tiny": (10, 4)})
    assert rows == [{"model": "tiny", "vocab_size": 10, "embedding_dim": 4, "parameters": 40,
                     "float32_bytes": 160, "float16_bytes": 80, "int8_bytes": 40}]
