"""Hostile inputs to module 11, embeddings: this subject's table of the bad-input battery
(tests/bad_input_battery.py): each case calls the API with one mistake and must raise the documented
error, naming the offending value, and change nothing; then the empty inputs that are valid, how mixed
float dtypes combine, and the bad-input defects of issue 15.
"""
import numpy as np
import pytest

from tests.bad_input_battery import Case, check_case, check_empty, constructing, on
from tinytorch.core.autograd import RowSparseGrad
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import SGD, Adagrad, SparseAdam
from tinytorch.core.tensor import Tensor
from tinytorch.text.bag import embedding_bag
from tinytorch.text.embeddings import (
    Embedding,
    EmbeddingLayer,
    FactorizedEmbedding,
    PositionalEncoding,
    RotaryEmbedding,
    as_token_ids,
    create_sinusoidal_embeddings,
    embedding,
    init_table,
)
from tinytorch.text.memory import embedding_memory

F16, F32, F64 = np.float16, np.float32, np.float64
NAN = float("nan")


def emb(**options):
    return lambda: Embedding(10, 4, seed=0, **options)


def layer(**options):
    "An EmbeddingLayer in training mode with dropout, so a failing call must not advance the dropout generator."
    options = {"max_seq_len": 6, "dropout": 0.5, "seed": 0, **options}
    return lambda: EmbeddingLayer(10, 4, **options).train()


def table():
    return Tensor(np.arange(8.0).reshape(4, 2) + 1)


RANGE10 = r"is out of range \[0, 10\) for a vocabulary of 10"


CASES = [
    # ---------------------------------------------------------------- ids: out of range, negative, float, bool, NaN
    Case("ids/embedding-id-equals-vocab", on(emb(), lambda e: e([[1, 10]])),
         IndexError, r"token id 10 at position \(0, 1\) " + RANGE10),
    Case("ids/embedding-negative", on(emb(), lambda e: e([3, -1])),
         IndexError, r"token id -1 at position \(1,\) " + RANGE10),
    Case("ids/embedding-float", on(emb(), lambda e: e([1.0, 2.0])),
         TypeError, r"token ids must be integers; got dtype float64"),
    Case("ids/embedding-bool", on(emb(), lambda e: e([True, False])),
         TypeError, r"token ids must be integers; got dtype bool \(a boolean mask is not a list of ids\)"),
    Case("ids/embedding-nan", on(emb(), lambda e: e(np.array([1, NAN]))),
         TypeError, r"token ids must be integers; got dtype float64"),
    Case("ids/embedding-string", on(emb(), lambda e: e(["a"])),
         TypeError, r"token ids must be integers; got dtype <U1"),
    Case("ids/embedding-huge-int64", on(emb(), lambda e: e(np.array([2**62]))),
         IndexError, r"token id 4611686018427387904 at position \(0,\) " + RANGE10),
    Case("ids/embedding-huge-uint64", on(emb(), lambda e: e(np.array([0, 2**64 - 1], np.uint64))),
         IndexError, r"token id 18446744073709551615 at position \(1,\) " + RANGE10),
    Case("ids/embedding-int32-tensor", on(emb(), lambda e: e(Tensor(np.array([[0, 12]], np.int32)))),
         IndexError, r"token id 12 at position \(0, 1\) " + RANGE10),
    Case("ids/embedding-max-norm-table-untouched", on(emb(max_norm=0.1), lambda e: e([0, 1, 10])),
         IndexError, r"token id 10 at position \(2,\) " + RANGE10),
    Case("ids/embedding-sparse", on(emb(sparse=True, padding_idx=0), lambda e: e([[9, 10]])),
         IndexError, r"token id 10 at position \(0, 1\) " + RANGE10),
    Case("ids/functional-out-of-range", on(table, lambda w: embedding([0, 4], w)),
         IndexError, r"token id 4 at position \(1,\) is out of range \[0, 4\) for a vocabulary of 4"),
    Case("ids/functional-negative", on(table, lambda w: embedding([[-2]], w)),
         IndexError, r"token id -2 at position \(0, 0\) is out of range \[0, 4\)"),
    Case("ids/functional-float", on(table, lambda w: embedding(np.array([0.5]), w)),
         TypeError, r"token ids must be integers; got dtype float64"),
    Case("ids/functional-max-norm-table-untouched", on(table, lambda w: embedding([0, 1, 4], w, max_norm=0.5)),
         IndexError, r"token id 4 at position \(2,\) is out of range \[0, 4\)"),
    Case("ids/layer-id-equals-vocab", on(layer(), lambda m: m([[1, 10]])),
         IndexError, r"token id 10 at position \(0, 1\) " + RANGE10),
    Case("ids/layer-negative", on(layer(), lambda m: m([[-3, 1]])),
         IndexError, r"token id -3 at position \(0, 0\) " + RANGE10),
    Case("ids/layer-float", on(layer(), lambda m: m(np.ones((2, 3)))),
         TypeError, r"token ids must be integers; got dtype float64"),
    Case("ids/layer-bool", on(layer(), lambda m: m(np.ones((2, 3), bool))),
         TypeError, r"got dtype bool"),
    Case("ids/layer-sinusoidal-huge", on(layer(pos_encoding="sinusoidal"), lambda m: m(np.array([[2**40]]))),
         IndexError, r"token id 1099511627776 at position \(0, 0\) " + RANGE10),
    Case("ids/factorized-out-of-range", on(lambda: FactorizedEmbedding(10, 8, rank=2, seed=0), lambda f: f([3, 10])),
         IndexError, r"token id 10 at position \(1,\) " + RANGE10),
    Case("ids/embedding-python-int-beyond-int64", on(emb(), lambda e: e([1, 2**70])),
         IndexError, r"token id 1180591620717411303424 at position \(1,\) " + RANGE10),
    Case("ids/functional-python-int-beyond-int64", on(table, lambda w: embedding([[0], [-2**70]], w)),
         IndexError, r"token id -1180591620717411303424 at position \(1, 0\) is out of range \[0, 4\)"),

    # ---------------------------------------------------------------- shapes: wrong ranks and shapes
    Case("shapes/embedding-table-1d", constructing(lambda: embedding([0], np.ones(4))),
         ValueError, r"the embedding table must be 2-D \(vocab_size, embedding_dim\); got shape \(4,\)"),
    Case("shapes/from-pretrained-1d", constructing(lambda w: Embedding.from_pretrained(w), lambda: np.ones(4)),
         ValueError, r"pretrained weights must be 2-D .* got shape \(4,\)"),
    Case("shapes/attend-hidden-size", on(emb(), lambda e: e.attend(np.ones((2, 5), F32))),
         ValueError, r"attend needs hidden states of shape \(\*, 4\); got \(2, 5\)"),
    Case("shapes/embedding-ragged-ids", on(emb(), lambda e: e([[1, 2], [3]])),
         ValueError, r"token ids must form a rectangular array \(nested lists of equal lengths\); "
                     r"got \[\[1, 2\], \[3\]\]"),
    Case("shapes/layer-ragged-ids", on(layer(), lambda m: m([[1, 2, 3], [4]])),
         ValueError, r"token ids must form a rectangular array .* got \[\[1, 2, 3\], \[4\]\]"),
    Case("shapes/layer-single-id", on(layer(), lambda m: m(3)),
         ValueError, r"EmbeddingLayer needs token ids of shape \(seq,\) or \(batch, seq\); got a single id"),
    Case("shapes/positional-encoding-width", on(lambda: PositionalEncoding(8, 4, seed=0),
                                                lambda p: p(np.ones((2, 3, 5)))),
         ValueError, r"expected vectors of shape \(seq, 4\) or \(batch, seq, 4\); got \(2, 3, 5\)"),
    Case("shapes/positional-encoding-1d", on(lambda: PositionalEncoding(8, 4, seed=0), lambda p: p(np.ones(4))),
         ValueError, r"expected vectors of shape \(seq, 4\) or \(batch, seq, 4\); got \(4,\)"),

    # ---------------------------------------------------------------- sequence longer than the position table
    Case("sequence/positional-encoding", on(lambda: PositionalEncoding(6, 4, seed=0), lambda p: p(np.ones((2, 7, 4)))),
         ValueError, r"sequence length 7 exceeds max_seq_len=6: the position table has rows 0..5 only"),
    Case("sequence/layer-learned", on(layer(), lambda m: m(np.zeros((2, 7), np.int64))),
         ValueError, r"sequence length 7 exceeds max_seq_len=6: the position table has rows 0..5 only"),
    Case("sequence/layer-learned-1d", on(layer(), lambda m: m(list(range(7)))),
         ValueError, r"sequence length 7 exceeds max_seq_len=6"),
    Case("sequence/layer-sinusoidal", on(layer(pos_encoding="sinusoidal"), lambda m: m(np.zeros((1, 9), np.int64))),
         ValueError, r"sequence length 9 exceeds max_seq_len=6: the position table has rows 0..5 only"),
    Case("sequence/layer-long-and-bad-ids", on(layer(), lambda m: m(np.full((1, 7), 99))),
         ValueError, r"sequence length 7 exceeds max_seq_len=6"),

    # ---------------------------------------------------------------- zero, negative and non-integer sizes
    Case("sizes/embedding-vocab-0", constructing(lambda: Embedding(0, 4)),
         ValueError, r"vocab_size must be a positive int; got 0"),
    Case("sizes/embedding-vocab-negative", constructing(lambda: Embedding(-3, 4)),
         ValueError, r"vocab_size must be a positive int; got -3"),
    Case("sizes/embedding-dim-0", constructing(lambda: Embedding(10, 0)),
         ValueError, r"embedding_dim must be a positive int; got 0"),
    Case("sizes/embedding-dim-negative-alias", constructing(lambda: Embedding(num_embeddings=10, embed_dim=-1)),
         ValueError, r"embedding_dim must be a positive int; got -1"),
    Case("sizes/embedding-float-size", constructing(lambda: Embedding(2.5, 4)),
         TypeError, r"vocab_size must be a positive int; got 2.5"),
    Case("sizes/embedding-bool-size", constructing(lambda: Embedding(True, 4)),
         TypeError, r"vocab_size must be a positive int; got True"),
    Case("sizes/embedding-max-norm-0", constructing(lambda: Embedding(10, 4, max_norm=0.0)),
         ValueError, r"max_norm must be a positive number or None; got 0.0"),
    Case("sizes/embedding-max-norm-nan", constructing(lambda: Embedding(10, 4, max_norm=NAN)),
         ValueError, r"max_norm must be a positive number or None; got nan"),
    Case("sizes/embedding-max-norm-string", constructing(lambda: Embedding(10, 4, max_norm="1")),
         TypeError, r"max_norm must be a positive number or None; got '1'"),
    Case("sizes/functional-max-norm-negative", on(table, lambda w: embedding([0, 1], w, max_norm=-1.0)),
         ValueError, r"max_norm must be a positive number or None; got -1.0"),  # would negate the rows it reads,
    Case("sizes/from-pretrained-empty", constructing(lambda w: Embedding.from_pretrained(w), lambda: np.ones((0, 3))),
         ValueError, r"vocab_size must be a positive int; got 0"),
    Case("sizes/positional-max-seq-len-0", constructing(lambda: PositionalEncoding(0, 4)),
         ValueError, r"max_seq_len must be a positive int; got 0"),
    Case("sizes/positional-dim-negative", constructing(lambda: PositionalEncoding(8, -4)),
         ValueError, r"embedding_dim must be a positive int; got -4"),
    Case("sizes/factorized-rank-0", constructing(lambda: FactorizedEmbedding(10, 8, rank=0)),
         ValueError, r"rank must be a positive int; got 0"),
    Case("sizes/factorized-rank-negative", constructing(lambda: FactorizedEmbedding(10, 8, rank=-2)),
         ValueError, r"rank must be a positive int; got -2"),
    Case("sizes/factorized-rank-float", constructing(lambda: FactorizedEmbedding(10, 8, rank=1.5)),
         TypeError, r"rank must be a positive int; got 1.5"),
    Case("sizes/factorized-rank-missing", constructing(lambda: FactorizedEmbedding(10, 8)),
         TypeError, r"missing required argument rank"),
    Case("sizes/sinusoidal-length-0", constructing(lambda: create_sinusoidal_embeddings(0, 4)),
         ValueError, r"max_seq_len must be a positive int; got 0"),
    Case("sizes/sinusoidal-dim-negative", constructing(lambda: create_sinusoidal_embeddings(4, -2)),
         ValueError, r"embedding_dim must be a positive int; got -2"),
    Case("sizes/sinusoidal-base-1", constructing(lambda: create_sinusoidal_embeddings(4, 4, base=1)),
         ValueError, r"base must be a number greater than 1; got 1"),
    Case("sizes/sinusoidal-base-string", constructing(lambda: create_sinusoidal_embeddings(4, 4, base="10000")),
         TypeError, r"base must be a number greater than 1; got '10000'"),
    Case("sizes/layer-max-seq-len-0", constructing(lambda: EmbeddingLayer(10, 4, max_seq_len=0)),
         ValueError, r"max_seq_len must be a positive int; got 0"),
    Case("sizes/embedding-memory-0", constructing(lambda: embedding_memory(0, 768)),
         ValueError, r"vocab_size must be a positive int; got 0"),

    # ---------------------------------------------------------------- dropout p outside [0, 1)
    Case("dropout/layer-dropout-1", constructing(lambda: EmbeddingLayer(10, 4, dropout=1.0)),
         ValueError, r"dropout probability p must be in \[0, 1\); got p=1.0"),

    # ---------------------------------------------------------------- options: unknown names, devices, padding_idx
    Case("options/embedding-init", constructing(lambda: Embedding(10, 4, init="kaiming")),
         ValueError, r"unknown init 'kaiming'; choose one of 'xavier', 'normal', 'trunc_normal', 'gpt2'"),
    Case("options/positional-init", constructing(lambda: PositionalEncoding(8, 4, init="zeros")),
         ValueError, r"unknown init 'zeros'; choose one of 'xavier', 'normal', 'trunc_normal', 'gpt2'"),
    Case("options/layer-init", constructing(lambda: EmbeddingLayer(10, 4, init="he")),
         ValueError, r"unknown init 'he'; choose one of"),
    Case("options/factorized-init", constructing(lambda: FactorizedEmbedding(10, 8, rank=2, init="uniform")),
         ValueError, r"unknown init 'uniform'; choose one of"),
    Case("options/init-table", constructing(lambda: init_table((3, 2), init="glorot")),
         ValueError, r"unknown init 'glorot'; choose one of"),
    Case("options/pos-encoding", constructing(lambda: EmbeddingLayer(10, 4, pos_encoding="rotary")),
         ValueError, r"unknown pos_encoding 'rotary'; choose one of 'learned', 'sinusoidal', 'none' \(or None\)"),
    Case("options/device-cuda", constructing(lambda: Embedding(10, 4, device="cuda")),
         ValueError, r"device='cuda' is not available: tinytorch is CPU/NumPy only \(use None or 'cpu'\)"),
    Case("options/device-cuda-0", constructing(lambda: Embedding(10, 4, device="cuda:0")),
         ValueError, r"device='cuda:0' is not available"),
    Case("options/padding-equals-vocab", constructing(lambda: Embedding(5, 4, padding_idx=5)),
         ValueError, r"padding_idx=5 is outside \[-5, 5\) for a vocabulary of 5"),
    Case("options/padding-below-minus-vocab", constructing(lambda: Embedding(5, 4, padding_idx=-6)),
         ValueError, r"padding_idx=-6 is outside \[-5, 5\) for a vocabulary of 5"),
    Case("options/padding-float", constructing(lambda: Embedding(5, 4, padding_idx=1.0)),
         TypeError, r"padding_idx must be an int or None; got 1.0"),
    Case("options/functional-padding", on(table, lambda w: embedding([0, 1], w, padding_idx=4, max_norm=0.5)),
         ValueError, r"padding_idx=4 is outside \[-4, 4\) for a vocabulary of 4"),
    Case("options/layer-padding", constructing(lambda: EmbeddingLayer(10, 4, padding_idx=-11)),
         ValueError, r"padding_idx=-11 is outside \[-10, 10\) for a vocabulary of 10"),
    Case("options/from-pretrained-padding",
         constructing(lambda w: Embedding.from_pretrained(w, padding_idx=3), lambda: np.ones((3, 2))),
         ValueError, r"padding_idx=3 is outside \[-3, 3\) for a vocabulary of 3"),
    Case("options/embedding-norm-type", constructing(lambda: Embedding(10, 4, max_norm=1.0, norm_type="fro")),
         TypeError, r"norm_type must be a positive number \(the p of the p-norm\); got 'fro'"),
    Case("options/embedding-norm-type-zero", constructing(lambda: Embedding(10, 4, max_norm=1.0, norm_type=0)),
         ValueError, r"norm_type must be a positive number \(the p of the p-norm\); got 0"),
    Case("options/embedding-sparse-not-bool", constructing(lambda: Embedding(10, 4, sparse="yes")),
         TypeError, r"sparse must be True or False; got 'yes'"),
    Case("options/embedding-scale-grad-not-bool", constructing(lambda: Embedding(10, 4, scale_grad_by_freq=1)),
         TypeError, r"scale_grad_by_freq must be True or False; got 1"),
    Case("options/functional-sparse-not-bool", on(table, lambda w: embedding([0], w, sparse="no")),
         TypeError, r"sparse must be True or False; got 'no'"),
    Case("options/embedding-integer-dtype", constructing(lambda: Embedding(10, 4, dtype=np.int64)),
         TypeError, r"an embedding table holds floats; got dtype int64"),
    Case("options/from-pretrained-integer-table",
         constructing(lambda w: Embedding.from_pretrained(w), lambda: np.ones((3, 2), np.int64)),
         TypeError, r"an embedding table holds floats; got dtype int64"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_raises_the_documented_error_and_changes_nothing(case):
    check_case(case)


# ------------------------------------------------------------------------------------------------ empty inputs (valid)

def _empty_backward(sparse):
    emb = Embedding(10, 4, sparse=sparse, seed=0)
    emb(np.zeros((2, 0), np.int64)).sum().backward()
    grad = emb.weight.grad
    return grad.to_dense() if isinstance(grad, RowSparseGrad) else grad


EMPTY = {
    "embedding (0,)": (lambda: Embedding(10, 4, seed=0)(np.zeros(0, np.int64)).data, np.zeros((0, 4), F32)),
    "embedding (2, 0)": (lambda: Embedding(10, 4, seed=0)(np.zeros((2, 0), np.int64)).data, np.zeros((2, 0, 4), F32)),
    "embedding []": (lambda: Embedding(10, 4, seed=0)([]).data, np.zeros((0, 4), F32)),
    "functional embedding": (lambda: embedding([], np.ones((3, 2))).data, np.zeros((0, 2), F32)),
    "embedding dense backward": (lambda: _empty_backward(False), np.zeros((10, 4), F32)),
    "embedding sparse backward": (lambda: _empty_backward(True), np.zeros((10, 4), F32)),
    "factorized": (lambda: FactorizedEmbedding(10, 8, rank=2, seed=0)(np.zeros(0, np.int64)).data,
                   np.zeros((0, 8), F32)),
    "layer learned (2, 0)": (lambda: EmbeddingLayer(10, 4, seed=0)(np.zeros((2, 0), np.int64)).data,
                             np.zeros((2, 0, 4), F32)),
    "layer sinusoidal (2, 0)": (lambda: EmbeddingLayer(10, 4, pos_encoding="sinusoidal", seed=0)(
        np.zeros((2, 0), np.int64)).data, np.zeros((2, 0, 4), F32)),
    "positional encoding": (lambda: PositionalEncoding(8, 4, seed=0)(np.zeros((2, 0, 4), F32)).data,
                            np.zeros((2, 0, 4), F32)),
}


@pytest.mark.parametrize("name", EMPTY, ids=list(EMPTY))
def test_empty_inputs_are_valid_and_give_empty_results(name):
    check_empty(*EMPTY[name])


def test_empty_cross_entropy_mean_has_a_zero_gradient_and_empty_sparse_steps_move_nothing():
    x = Tensor(np.zeros((0, 3)), requires_grad=True)
    cross_entropy(x, np.zeros(0, np.int64)).backward()
    assert x.grad.shape == (0, 3)
    emb = Embedding(10, 4, sparse=True, seed=0)
    emb(np.zeros(0, np.int64)).sum().backward()
    for opt in (SparseAdam(emb.parameters()), SGD(emb.parameters(), lr=0.1), Adagrad(emb.parameters())):
        before = emb.weight.data.copy()
        opt.step()
        assert np.array_equal(emb.weight.data, before), type(opt).__name__


# ------------------------------------------------------------------------------------------------ mixed float dtypes
# The documented behaviour is in tests/bad_input_battery.py's docstring.

@pytest.mark.parametrize("table_dtype, position_dtype", [(F16, F32), (F32, F64), (F64, F16), (F16, F16)],
                         ids=["f16+f32", "f32+f64", "f64+f16", "f16+f16"])
def test_mixed_float_dtypes_token_plus_position_follow_numpy_promotion(table_dtype, position_dtype):
    tokens = Embedding(10, 4, dtype=table_dtype, seed=0)
    positions = PositionalEncoding(6, 4, dtype=position_dtype, seed=0)
    out = positions(tokens([[1, 2, 3]]))
    assert out.dtype == np.result_type(table_dtype, position_dtype)
    out.sum().backward()
    assert tokens.weight.grad.dtype == table_dtype and positions.position_embeddings.grad.dtype == position_dtype
    assert EmbeddingLayer(10, 4, dtype=table_dtype, pos_encoding="sinusoidal", seed=0)([[1, 2]]).dtype == table_dtype


# ------------------------------------------------------------------------------------------------ issue 15's defects
# Found by the adversarial pass of issue 15, one test each (each failed before its fix); the numbers in the
# test names are the defect numbers.

def test_8_object_dtype_python_int_ids_are_converted_when_they_fit():
    ids = np.array([[1, 2], [3, 0]], dtype=object)
    assert as_token_ids(ids, 5).dtype == np.int64
    table = Embedding(5, 2, seed=0)
    assert np.array_equal(table(ids).data, table.weight.data[ids.astype(np.int64)])
    with pytest.raises(IndexError, match=rf"token id {2**70} at position \(1,\) is out of range \[0, 5\)"):
        table(np.array([1, 2**70], dtype=object))
    with pytest.raises(TypeError, match="token ids must be integers"):
        table(np.array([1, "2"], dtype=object))


def test_10_flags_are_checked_like_embeddings():
    with pytest.raises(TypeError, match="interleaved must be True or False; got 'no'"):
        RotaryEmbedding(4, interleaved="no")
    with pytest.raises(TypeError, match="scale_embeddings must be True or False; got 'no'"):
        EmbeddingLayer(10, 4, scale_embeddings="no")


def test_10_uint64_offsets_beyond_int64_are_reported_as_given():
    big = np.uint64(2**63 + 5)
    with pytest.raises(ValueError, match=rf"offsets\[1\] = {int(big)} is beyond the end of ids"):
        embedding_bag(np.array([1, 2]), np.ones((3, 2)), offsets=np.array([0, big], dtype=np.uint64))
    with pytest.raises(ValueError, match=r"offsets\[2\] = 1 comes after offsets\[1\] = 2"):
        embedding_bag(np.array([1, 2]), np.ones((3, 2)), offsets=np.array([0, 2, 1], dtype=np.uint64))


def test_10_seed_and_impossible_sizes_get_our_own_errors():
    with pytest.raises(ValueError, match=r"seed must be a non-negative int .*; got -1"):
        Embedding(10, 4, seed=-1)
    with pytest.raises(MemoryError, match=r"a \(1099511627776, 1099511627776\) table of float32 needs [\d,]+ bytes"):
        Embedding(2**40, 2**40)
