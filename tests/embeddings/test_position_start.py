"""Positions that start later than 0: what a KV-cached decoder needs when it feeds one new token at a time.

Every position module takes `start`, the position of its input's first vector. Feeding a sequence in
pieces, each with its start, must give exactly what feeding it whole gives. The references are plain
NumPy (the paper's formula, the table's own rows), not other tinytorch modules.
"""
import numpy as np
import pytest

from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import (
    EmbeddingLayer,
    PositionalEncoding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
)

F64 = np.float64


def sinusoid_reference(positions, dim, base=10000.0):
    "The Transformer paper's PE rows for `positions`, written from the formula with explicit loops."
    out = np.zeros((len(positions), dim))
    for row, pos in enumerate(positions):
        for col in range(dim):
            angle = pos / base ** ((col - col % 2) / dim)
            out[row, col] = np.sin(angle) if col % 2 == 0 else np.cos(angle)
    return out


def rope_reference(x, positions, base=10000.0):
    "Interleaved RoPE of x (seq, d) at `positions`, one 2x2 rotation per pair."
    out = np.empty_like(x)
    dim = x.shape[-1]
    for row, pos in enumerate(positions):
        for i in range(dim // 2):
            angle = pos * base ** (-2 * i / dim)
            a, b = x[row, 2 * i], x[row, 2 * i + 1]
            out[row, 2 * i], out[row, 2 * i + 1] = a * np.cos(angle) - b * np.sin(angle), a * np.sin(angle) + b * np.cos(angle)
    return out


def test_learned_positions_add_rows_start_to_start_plus_seq():
    pos = PositionalEncoding(8, 3, dtype=F64, seed=0)
    x = np.random.default_rng(0).standard_normal((2, 3, 3))
    out = pos(Tensor(x, dtype=F64), start=4)
    assert np.array_equal(out.data, x + pos.position_embeddings.data[4:7])
    out.sum().backward()
    expected = np.zeros((8, 3))
    expected[4:7] = 2                                  # two batch rows, positions 4, 5, 6
    assert np.array_equal(pos.position_embeddings.grad, expected)


def test_sinusoidal_module_adds_the_formula_rows_from_start_and_has_no_parameters():
    pos = SinusoidalPositionalEncoding(16, 6, dtype=F64)
    assert list(pos.parameters()) == []
    x = np.zeros((1, 4, 6))
    assert np.allclose(pos(x, start=5).data[0], sinusoid_reference(range(5, 9), 6), atol=1e-12)
    assert np.allclose(pos(x).data[0], sinusoid_reference(range(4), 6), atol=1e-12)
    assert SinusoidalPositionalEncoding(4, embed_dim=2).embedding_dim == 2


def test_rope_start_shifts_the_default_positions():
    rope = RotaryEmbedding(4)
    x = np.random.default_rng(1).standard_normal((3, 4))
    assert np.allclose(rope(Tensor(x, dtype=F64), start=7).data, rope_reference(x, [7, 8, 9]), atol=1e-12)
    assert np.allclose(rope(Tensor(x, dtype=F64), start=7).data, rope(Tensor(x, dtype=F64), positions=[7, 8, 9]).data)
    with pytest.raises(ValueError, match="either positions or start"):
        rope(Tensor(x, dtype=F64), positions=[0, 1, 2], start=1)


@pytest.mark.parametrize("pos_encoding", ["learned", "sinusoidal", None])
def test_embedding_layer_fed_token_by_token_equals_the_whole_sequence(pos_encoding):
    layer = EmbeddingLayer(20, 6, max_seq_len=8, pos_encoding=pos_encoding, scale_embeddings=True, dtype=F64, seed=0)
    tokens = np.array([[3, 1, 4, 1, 5]])
    whole = layer(tokens).data
    pieces = [layer(tokens[:, :2]).data] + [layer(tokens[:, t:t + 1], start=t).data for t in range(2, 5)]
    assert np.allclose(np.concatenate(pieces, axis=1), whole, atol=1e-12)


@pytest.mark.parametrize("make", [lambda: PositionalEncoding(6, 2, seed=0), lambda: SinusoidalPositionalEncoding(6, 2)],
                         ids=["learned", "sinusoidal"])
def test_positions_past_the_table_name_start_seq_and_max_seq_len(make):
    pos = make()
    with pytest.raises(ValueError, match=r"start=5 \+ sequence length 2 = 7 exceeds max_seq_len=6"):
        pos(np.zeros((2, 2)), start=5)
    assert pos(np.zeros((2, 2)), start=4).shape == (2, 2)
    with pytest.raises(ValueError, match="start must be a non-negative int.*got -1"):
        pos(np.zeros((2, 2)), start=-1)
    with pytest.raises(TypeError, match="start must be a non-negative int.*got 1.5"):
        pos(np.zeros((2, 2)), start=1.5)


def test_embedding_layer_refuses_start_past_the_table_before_any_lookup():
    layer = EmbeddingLayer(10, 4, max_seq_len=6, seed=0)
    with pytest.raises(ValueError, match=r"start=6 \+ sequence length 1 = 7 exceeds max_seq_len=6"):
        layer([[1]], start=6)


def test_sinusoidal_table_is_a_buffer_not_a_parameter_and_not_saved():
    layer = EmbeddingLayer(10, 4, max_seq_len=6, pos_encoding="sinusoidal", seed=0)
    buffers = dict(layer.named_buffers())
    assert list(buffers) == ["position_encoding.table"] and buffers["position_encoding.table"].shape == (6, 4)
    assert [name for name, _ in layer.named_parameters()] == ["token_embedding.weight"]
    assert list(layer.state_dict()) == ["token_embedding.weight"], "recomputed by the constructor, so not saved"
