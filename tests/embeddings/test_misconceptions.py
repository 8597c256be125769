"""Module 11's checks that recognise the typical mistakes by name (tito/misconceptions/embeddings.py lists
them; tests/tito/test_misconceptions.py proves each one is met by its message here).

Each check builds its expected values with NumPy alone, never with another exercise of the learner's, so a
mistake in one function fails only that function's check (issue 25).
"""
import math
import tracemalloc

import numpy as np
import pytest

from tests.diagnosis import expect_close, misconception
from tinytorch.core.tensor import Tensor
from tinytorch.text.bag import EmbeddingBag
from tinytorch.text.embeddings import (
    Embedding, EmbeddingBackward, EmbeddingLayer, LearnedPositionalEncoding, SinusoidalPositionalEncoding,
    create_sinusoidal_embeddings, init_table,
)
from tinytorch.text.quantization import dequantize_rows, quantize_rows


def sinusoids(positions, d):
    """The paper's table, row by row: [p, 2i] = sin(p / 10000**(2i/d)), [p, 2i+1] = cos(...)."""
    table = np.zeros((len(positions), d))
    for row, p in enumerate(positions):
        for column in range(d):
            angle = p / 10000.0 ** (2 * (column // 2) / d)
            table[row, column] = math.sin(angle) if column % 2 == 0 else math.cos(angle)
    return table


def table_of(rows):
    return np.asarray(rows, dtype=np.float64)


# ---------------------------------------------------------------- the lookup and its backward


@pytest.mark.parametrize("padding_idx", [None, 0, 4])
def test_repeated_ids_add_up_their_gradient_rows(padding_idx):
    weight = Tensor(np.zeros((5, 2)), requires_grad=True)
    ids = np.array([3, 1, 3, 3])
    out = EmbeddingBackward.apply(weight, ids=ids, padding_idx=padding_idx)
    out.backward(np.ones((4, 2)))
    got = np.asarray(weight.grad)
    counts = np.bincount(ids, minlength=5)
    for row in np.flatnonzero(counts > 1):
        if np.allclose(got[row], 1.0):
            raise misconception("repeated ids", f"row {row} received 1 of its {counts[row]} gradient rows "
                                f"(`grad[ids] += rows` writes a repeated id once; add them with a segment sum)",
                                np.full(2, float(counts[row])), got[row], f"grad[{row}]")
    expect_close(got, counts[:, None] * np.ones((5, 2)), "weight.grad")


@pytest.mark.parametrize("shape", [(2, 3), (4,), (1, 2, 2)])
def test_the_lookup_keeps_the_ids_shape(shape):
    weight = Tensor(np.arange(20.0).reshape(5, 4))
    ids = np.arange(int(np.prod(shape))).reshape(shape) % 5
    out = EmbeddingBackward.apply(weight, ids=ids)
    if out.shape != shape + (4,):
        raise misconception("ids.shape + (d,)", f"ids of shape {shape} must give one row per id in that shape",
                            shape + (4,), out.shape, "output shape")
    expect_close(out.data, np.arange(20.0).reshape(5, 4)[ids], "the looked-up rows")


def test_the_padding_row_starts_at_zero_and_gets_no_gradient():
    table = Embedding(6, 3, padding_idx=2, seed=0)
    if table.weight.shape == (6, 3) and not np.allclose(table.weight.data[2], 0):
        raise misconception("padding", "the padding row (padding_idx=2) must start as zeros", np.zeros(3),
                            table.weight.data[2], "weight[2]")
    table(np.array([[2, 1, 2]])).backward(np.ones((1, 3, 3)))
    grad = np.asarray(table.weight.grad)
    if not np.allclose(grad[2], 0):
        raise misconception("padding", "the padding row received gradient; its positions must be dropped in the "
                            "backward (and forward must pass padding_idx on)", np.zeros(3), grad[2], "grad[2]")
    expect_close(grad, np.array([[0, 0, 0], [1, 1, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]]), "weight.grad")


def test_a_sparse_backward_allocates_nothing_vocab_sized():
    vocab, dim = 400_000, 8                                         # a V x d float32 array is 12.8 MB
    weight = Tensor(np.zeros((vocab, dim), np.float32), requires_grad=True)
    ids = np.array([5, 17, 5, 399_999])
    EmbeddingBackward.apply(weight, ids=ids, sparse=True).backward(np.ones((4, dim), np.float32))
    weight.grad = None
    tracemalloc.start()
    EmbeddingBackward.apply(weight, ids=ids, sparse=True).backward(np.ones((4, dim), np.float32))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if peak > vocab * dim * 4 // 4:
        raise misconception("vocab-sized", "the sparse backward allocated an array the size of the table; "
                            "build the RowSparseGrad from the rows read only", f"< {vocab * dim:,} bytes",
                            f"{peak:,} bytes", "peak allocation")
    expect_close(weight.grad.to_dense()[[5, 17, 399_999]], [[2.0] * dim, [1.0] * dim, [1.0] * dim], "grad rows")


@pytest.mark.isolates("Embedding.forward")  # the lookup is replaced by a recorder: only what forward hands it counts
def test_forward_hands_the_lookup_the_table_s_padding_idx_and_sparse(monkeypatch):
    table = Embedding(6, 3, padding_idx=2, sparse=True, seed=0)
    handed = {}

    def recorder(cls, weight, **options):
        handed.update(options)
        return Tensor(np.asarray(weight.data)[np.asarray(options["ids"])])

    monkeypatch.setattr(EmbeddingBackward, "apply", classmethod(recorder))
    table(np.array([[2, 1, 2]]))
    expected = {"padding_idx": 2, "sparse": True}
    got = {name: handed.get(name) for name in expected}
    if got["padding_idx"] != 2:
        raise misconception("padding", "Embedding.forward must hand the lookup its padding_idx: the backward only "
                            "knows what forward passed on, so without it the padding row learns", expected, got,
                            "EmbeddingBackward.apply options")
    if got != expected:
        raise AssertionError(f"Embedding.forward hands the lookup the table's options\n  expected {expected}\n"
                             f"  actual   {got}")
    expect_close(handed["ids"], [[2, 1, 2]], "ids handed to the lookup")


@pytest.mark.isolates("Embedding.__init__")  # init_table (taught before it) has checks of its own
def test_the_table_has_one_row_per_token():
    table = Embedding(7, 3, seed=0)
    if table.weight.shape != (7, 3):
        raise misconception("(vocab_size, embedding_dim)", "the table holds one row per token id", (7, 3),
                            table.weight.shape, "weight.shape")


def test_the_tied_head_multiplies_by_the_transposed_table():
    table = Embedding(3, 2, seed=0)
    table.weight.data[...] = [[1, 0], [0, 1], [1, 1]]
    hidden = Tensor(np.array([[2.0, 3.0]]))
    try:
        logits = table.attend(hidden)
    except ValueError as error:
        raise misconception("transpose", f"hidden (1, 2) @ weight (3, 2) does not multiply ({error}); "
                            "the head is hidden @ weight.T", (1, 3), "an error", "logits shape") from None
    expect_close(logits.data, [[2.0, 3.0, 5.0]], "logits")


@pytest.mark.parametrize("init, std", [("gpt2", 0.02), ("normal", 1.0), ("xavier", math.sqrt(2.0 / (400 + 300)))])
def test_init_draws_each_scheme_with_its_own_std(init, std):
    table = init_table((400, 300), init, rng=0)
    if abs(table.std() - std) > 0.05 * std:
        raise misconception("std", f"init={init!r} draws with std {std:.4f}", std, round(float(table.std()), 4),
                            "table.std()")


# ---------------------------------------------------------------- positions


def test_the_sinusoidal_table_interleaves_sin_and_cos():
    got = create_sinusoidal_embeddings(5, 6).data
    expected = sinusoids(range(5), 6)
    swapped, halves = expected.copy(), np.empty_like(expected)
    swapped[:, 0::2], swapped[:, 1::2] = expected[:, 1::2], expected[:, 0::2]
    halves[:, :3], halves[:, 3:] = expected[:, 0::2], expected[:, 1::2]
    expect_close(got, expected, "table", atol=1e-6, diagnoses=[
        ("sin and cos swapped", "column 2i is sin(p / 10000**(2i/d)), column 2i+1 its cos", swapped),
        ("not interleaved", "sin and cos are interleaved (sin at even columns, cos at odd ones), not in two "
                            "halves", halves)])


@pytest.mark.parametrize("start, seq", [(0, 3), (2, 3), (5, 1), (0, 8)])
def test_sinusoidal_positions_are_added_from_start(start, seq):
    positions = SinusoidalPositionalEncoding(8, 4)
    x = np.zeros((1, seq, 4))
    got = positions(Tensor(x), start=start).data[0]
    expect_close(got, sinusoids(range(start, start + seq), 4), "x + positions", atol=1e-6, diagnoses=[
        ("start", f"token t is at position start + t: rows {start}..{start + seq - 1}, not from 0",
         sinusoids(range(seq), 4))])


def test_the_sinusoidal_table_is_a_buffer_left_out_of_the_state_dict():
    positions = SinusoidalPositionalEncoding(6, 4)
    saved = list(positions.state_dict())
    if saved:
        raise misconception("persistent", "a table computed from the sizes is not saved: "
                            "register_buffer(..., persistent=False)", [], saved, "state_dict keys")


@pytest.mark.parametrize("start", [0, 1, 3])
def test_learned_positions_are_the_table_rows_from_start_and_learn(start):
    positions = LearnedPositionalEncoding(6, 2, seed=0)
    if positions.position_embeddings.shape != (6, 2):
        raise misconception("(max_seq_len, embedding_dim)", "one row per position",
                            (6, 2), positions.position_embeddings.shape, "position_embeddings.shape")
    positions.position_embeddings.data[...] = np.arange(12.0).reshape(6, 2)
    out = positions(Tensor(np.zeros((1, 2, 2)), requires_grad=True), start=start)
    expect_close(out.data[0], np.arange(12.0).reshape(6, 2)[start:start + 2], "x + positions")
    out.backward(np.ones((1, 2, 2)))
    grad = positions.position_embeddings.grad
    if grad is None:
        raise misconception("no gradient", "slice the Parameter itself, not its .data, so the rows used learn",
                            "rows start, start+1 = 1", None, "position_embeddings.grad")
    expected = np.zeros((6, 2))
    expected[start:start + 2] = 1
    expect_close(np.asarray(grad), expected, "position_embeddings.grad")


# ---------------------------------------------------------------- GPT-2's input block


def known_layer(scale=False, dropout=0.0, position="learned"):
    """A layer whose token rows are 10 * id and whose position rows are 1, 2, 3, ... (d = 4)."""
    layer = EmbeddingLayer(5, 4, max_seq_len=6, position=position, scale_embeddings=scale, dropout=dropout, seed=0)
    layer.token_embedding.weight.data[...] = 10.0 * np.arange(5)[:, None] * np.ones((1, 4))
    if position == "learned":
        layer.position_encoding.position_embeddings.data[...] = np.arange(1.0, 7.0)[:, None] * np.ones((1, 4))
    return layer


def reference_layer(tokens, start, scale):
    tokens = np.asarray(tokens)
    token_rows = 10.0 * tokens[..., None] * np.ones(4)
    position_rows = np.arange(1.0, 7.0)[start:start + tokens.shape[-1], None] * np.ones(4)
    return token_rows * (2.0 if scale else 1.0), position_rows


@pytest.mark.parametrize("start", [0, 2])
def test_the_input_block_adds_position_start_plus_t_to_token_t(start):
    layer = known_layer()
    tokens = [[1, 4, 2]]
    token_rows, position_rows = reference_layer(tokens, start, False)
    shifted = np.arange(1.0, 8.0)[start + 1:start + 4, None] * np.ones(4)
    if start + 4 <= 6:
        wrong = token_rows + shifted
    else:
        wrong = np.zeros_like(token_rows)
    try:
        got = layer(tokens, start=start).data
    except ValueError as error:
        raise misconception("off by one", f"token t is at position start + t; start + 1 ran past the table "
                            f"({error})", token_rows + position_rows, "an error", "output") from None
    expect_close(got, token_rows + position_rows, "output", diagnoses=[
        ("off by one", "token t is at position start + t (the first at row start), not start + t + 1", wrong)])


def test_the_input_block_scales_the_token_vectors_by_sqrt_d_only():
    layer = known_layer(scale=True)                                # d = 4: √d = 2
    tokens = [[1, 3]]
    token_rows, position_rows = reference_layer(tokens, 0, True)
    expect_close(layer(tokens).data, token_rows + position_rows, "output", diagnoses=[
        ("√d applied to the positions too", "only the token vectors are multiplied by √d, before the positions "
                                            "are added", token_rows + 2 * position_rows),
        ("√d not applied", "scale_embeddings=True multiplies the token vectors by √d", token_rows / 2 + position_rows)])


def test_the_input_block_is_deterministic_in_eval_mode():
    layer = known_layer(dropout=0.5)
    layer.eval()
    token_rows, position_rows = reference_layer([[1, 2, 3]], 0, False)
    first, second = layer([[1, 2, 3]]).data, layer([[1, 2, 3]]).data
    if first.shape == token_rows.shape and (not np.array_equal(first, second) or np.any(first == 0)):
        raise misconception("eval", "dropout is for training only: in eval mode the output is the input, untouched",
                            token_rows + position_rows, first, "output")
    expect_close(first, token_rows + position_rows, "output in eval mode")


def test_the_input_block_builds_the_position_scheme_it_is_asked_for():
    layer = EmbeddingLayer(5, 4, max_seq_len=6, position="sinusoidal", seed=0)
    names = [name for name, _ in layer.named_parameters()]
    if not isinstance(layer.position_encoding, SinusoidalPositionalEncoding):
        raise misconception("sinusoidal", "position='sinusoidal' is the fixed table, with no parameters",
                            "SinusoidalPositionalEncoding", type(layer.position_encoding).__name__,
                            "position_encoding")
    assert names == ["token_embedding.weight"]


# ---------------------------------------------------------------- bags and quantization


def test_each_row_gets_its_own_quantization_scale():
    table = np.stack([np.linspace(-1, 1, 16), np.linspace(-0.01, 0.01, 16), np.linspace(5, 50, 16)]).astype(np.float32)
    codes, scales, offsets = quantize_rows(table, bits=8)
    step = (table.max(axis=1) - table.min(axis=1)) / 255
    expect_close(scales, step, "scales", rtol=1e-5, diagnoses=[
        ("per row", "each row has its own scale (max - min) / 255 and offset, so a small row keeps its digits",
         np.full(3, (table.max() - table.min()) / 255))])
    restored = dequantize_rows(codes, scales, offsets, 8, 16)
    assert np.all(np.abs(restored - table).max(axis=1) <= step / 2 + 1e-6)


def test_a_mean_bag_shares_its_gradient_equally():
    bag = EmbeddingBag(5, 2, mode="mean", seed=0)
    bag(np.array([[1, 2, 2, 3]])).backward(np.ones((1, 2)))
    grad = np.asarray(bag.weight.grad)
    expected = np.array([[0, 0], [1, 1], [2, 2], [1, 1], [0, 0]]) / 4
    expect_close(grad, expected, "weight.grad", diagnoses=[
        ("mean", "each of n members of a mean gets 1/n of the bag's gradient", expected * 4)])
