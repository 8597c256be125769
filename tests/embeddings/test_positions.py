"""Behaviour of the position parts of tinytorch.text.embeddings: the sinusoidal table, learned positions
(PositionalEncoding) and the input block (EmbeddingLayer). Rotary embeddings (RotaryEmbedding, which lives
with attention in module 12): tests/attention/test_rope.py."""
import math

import numpy as np
import pytest

from tinytorch.core.autograd import gradcheck
from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import (
    Embedding,
    EmbeddingLayer,
    PositionalEncoding,
    create_sinusoidal_embeddings,
)

F64 = np.float64


# ------------------------------------------------------------------------------------------------ sinusoidal

@pytest.mark.parametrize("length, dim, position, expected", [
    (2, 4, 1, [0.8414710, 0.5403023, 0.0099998, 0.9999500]),
    (3, 8, 2, [0.9092974, -0.4161468, 0.1986693, 0.9800666, 0.0199987, 0.9998000, 0.0020000, 0.9999980]),
    (2, 5, 1, [0.8414710, 0.5403023, 0.0251162, 0.9996845, 0.0006310]),
], ids=["d4", "d8", "odd-d5"])
def test_sinusoidal_reference_rows(length, dim, position, expected):
    table = create_sinusoidal_embeddings(length, dim)
    assert table.shape == (length, dim) and table.dtype == np.float32
    assert np.allclose(table.data[position], expected, atol=1e-6)


def test_sinusoidal_row_zero_norms_and_no_gradient():
    table = create_sinusoidal_embeddings(200, 16)
    assert np.array_equal(table.data[0], [0, 1] * 8)
    assert np.allclose(np.linalg.norm(table.data, axis=1), math.sqrt(16 / 2), atol=1e-5)
    assert not table.requires_grad and table._grad_fn is None
    assert create_sinusoidal_embeddings(3, 4, dtype=F64).dtype == F64


def test_sinusoidal_matches_the_paper_formula_column_by_column():
    length, dim = 50, 10
    table = create_sinusoidal_embeddings(length, dim, dtype=F64).data
    for pos in range(length):
        for column in range(dim):
            angle = pos / 10000 ** ((column - column % 2) / dim)
            assert table[pos, column] == pytest.approx(math.sin(angle) if column % 2 == 0 else math.cos(angle), abs=1e-12)


def test_sinusoidal_offset_is_a_rotation_of_each_pair():
    "The paper's reason for sinusoids: PE(pos + k) is a fixed linear map (a rotation per pair) of PE(pos)."
    dim, offset = 8, 7
    table = create_sinusoidal_embeddings(60, dim, dtype=F64).data
    frequencies = 10000.0 ** (-np.arange(0, dim, 2) / dim)
    for i, w in enumerate(frequencies):
        # (sin(a + b), cos(a + b)) = (sin a, cos a) @ [[cos b, -sin b], [sin b, cos b]] for b = offset * w
        rotation = np.array([[math.cos(offset * w), -math.sin(offset * w)], [math.sin(offset * w), math.cos(offset * w)]])
        pairs = table[:, 2 * i: 2 * i + 2]
        assert np.allclose(pairs[:-offset] @ rotation, pairs[offset:], atol=1e-12)


def test_sinusoidal_base_and_bad_arguments():
    assert not np.allclose(create_sinusoidal_embeddings(4, 4, base=100.0).data, create_sinusoidal_embeddings(4, 4).data)
    with pytest.raises(ValueError, match="max_seq_len must be a positive int; got 0"):
        create_sinusoidal_embeddings(0, 4)
    with pytest.raises(ValueError, match="embedding_dim must be a positive int; got -2"):
        create_sinusoidal_embeddings(4, -2)
    with pytest.raises(ValueError, match="base must be a number greater than 1; got 1.0"):
        create_sinusoidal_embeddings(4, 4, base=1.0)


# ------------------------------------------------------------------------------------------------ learned positions

@pytest.mark.parametrize("shape", [(2, 5, 3), (5, 3), (2, 2, 4, 3)])
def test_positional_encoding_adds_the_first_seq_rows(shape, rng):
    pos = PositionalEncoding(8, 3, seed=0)
    x = rng.standard_normal(shape).astype(np.float32)
    out = pos(Tensor(x))
    assert out.shape == shape
    assert np.allclose(out.data, x + pos.position_embeddings.data[: shape[-2]])


def test_positional_encoding_gradient_reaches_exactly_the_used_rows(rng):
    pos = PositionalEncoding(max_seq_len=10, embed_dim=3, dtype=F64, seed=0)
    upstream = rng.standard_normal((4, 6, 3))
    pos(np.zeros((4, 6, 3))).backward(upstream)
    assert np.allclose(pos.position_embeddings.grad[:6], upstream.sum(axis=0))
    assert np.all(pos.position_embeddings.grad[6:] == 0)


def test_positional_encoding_gradcheck_table_and_input(rng):
    pos = PositionalEncoding(7, 3, dtype=F64, seed=0)
    x = Tensor(rng.standard_normal((2, 5, 3)), requires_grad=True, dtype=F64)
    assert gradcheck(lambda x, table: pos(x) * pos(x), [x, pos.position_embeddings])


def test_positional_encoding_names_init_and_errors():
    pos = PositionalEncoding(6, 4, init="gpt2", seed=0)
    assert [name for name, _ in pos.named_parameters()] == ["position_embeddings"]
    assert repr(pos) == "LearnedPositionalEncoding(6, 4, init='gpt2')"   # PositionalEncoding is its old name
    with pytest.raises(ValueError, match=r"sequence length 7 exceeds max_seq_len=6"):
        pos(np.zeros((1, 7, 4)))
    with pytest.raises(ValueError, match=r"\(seq, 4\) or \(batch, seq, 4\); got \(2, 5\)"):
        pos(np.zeros((2, 5)))
    with pytest.raises(ValueError, match=r"got \(4,\)"):
        pos(np.zeros(4))
    with pytest.raises(ValueError, match="unknown init 'zeros'"):
        PositionalEncoding(6, 4, init="zeros")
    reseeded = PositionalEncoding(6, 4, init="gpt2", seed=0)
    assert np.array_equal(reseeded.position_embeddings.data, pos.position_embeddings.data)


# ------------------------------------------------------------------------------------------------ EmbeddingLayer

def test_gpt2_input_block_sizes_names_and_init():
    layer = EmbeddingLayer(vocab_size=50257, embed_dim=768, max_seq_len=1024, dropout=0.1, init="gpt2", seed=0)
    named = dict(layer.named_parameters())
    assert list(named) == ["token_embedding.weight", "position_encoding.position_embeddings"]
    assert named["token_embedding.weight"].size == 38_597_376
    assert named["position_encoding.position_embeddings"].size == 786_432
    assert list(layer.state_dict()) == list(named)
    assert abs(named["token_embedding.weight"].data.std() - 0.02) < 1e-4
    assert layer.dropout.p == 0.1
    assert layer.eval()([[50256, 0, 5]]).shape == (1, 3, 768)


def test_learned_layer_is_token_plus_position_and_deterministic_in_eval():
    layer = EmbeddingLayer(20, 8, max_seq_len=6, dropout=0.3, seed=0).eval()
    tokens = np.array([[1, 2, 3, 3], [4, 0, 6, 19]])
    expected = layer.token_embedding.weight.data[tokens] + layer.position_encoding.position_embeddings.data[:4]
    assert np.allclose(layer(tokens).data, expected) and np.array_equal(layer(tokens).data, layer(tokens).data)
    assert np.allclose(layer(tokens[0]).data, expected[0])


def test_dropout_acts_only_in_train_mode():
    layer = EmbeddingLayer(20, 16, max_seq_len=64, dropout=0.25, seed=0)
    tokens = np.arange(64).reshape(4, 16) % 20
    clean = layer.eval()(tokens).data
    noisy = layer.train()(tokens).data
    dropped = noisy == 0
    assert 0.2 < dropped.mean() < 0.3
    assert np.allclose(noisy[~dropped], clean[~dropped] / 0.75, atol=1e-6)


@pytest.mark.parametrize("pos_encoding", ["learned", "sinusoidal", None])
def test_every_position_choice_gradchecks_in_eval_mode(pos_encoding):
    layer = EmbeddingLayer(9, 4, max_seq_len=5, pos_encoding=pos_encoding, scale_embeddings=True,
                           dropout=0.5, padding_idx=0, dtype=F64, seed=0).eval()
    tokens = np.array([[1, 3, 3, 8], [0, 8, 2, 1]])
    mask = Tensor((tokens != 0)[..., None].astype(F64), dtype=F64)
    params = layer.parameters()
    assert gradcheck(lambda *p: layer(tokens) * mask, params)


def test_sinusoidal_and_none_layers_with_sqrt_d_scale():
    tokens = [[1, 2, 3]]
    sinusoidal = EmbeddingLayer(20, 8, max_seq_len=6, pos_encoding="sinusoidal", scale_embeddings=True, seed=0)
    table = sinusoidal.token_embedding.weight.data
    assert np.allclose(sinusoidal(tokens).data, table[tokens] * math.sqrt(8) + create_sinusoidal_embeddings(6, 8).data[:3],
                       atol=1e-6)
    assert [name for name, _ in sinusoidal.named_parameters()] == ["token_embedding.weight"]
    plain = EmbeddingLayer(20, 8, pos_encoding=None, seed=0)
    assert plain.position_encoding is None and np.array_equal(plain(tokens).data, plain.token_embedding.weight.data[tokens])
    assert plain(np.zeros((1, 600), dtype=np.int64)).shape == (1, 600, 8), "no position table, no length limit"


def test_embedding_layer_padding_seed_aliases_and_repr():
    layer = EmbeddingLayer(10, embedding_dim=4, padding_idx=0, seed=1)
    assert layer.embed_dim == 4 and np.all(layer.token_embedding.weight.data[0] == 0)
    again = EmbeddingLayer(num_embeddings=10, embed_dim=4, padding_idx=0, seed=1)
    assert np.array_equal(again.token_embedding.weight.data, layer.token_embedding.weight.data)
    assert not np.array_equal(layer.token_embedding.weight.data[1:5],
                              layer.position_encoding.position_embeddings.data[:4]), "tables get different seeds"
    text = repr(layer)
    assert text.startswith("EmbeddingLayer(\n  10, 4, max_seq_len=512, position='learned'\n")
    assert "(token_embedding): Embedding(10, 4, padding_idx=0)" in text and "(dropout): Dropout(p=0.0)" in text


def test_embedding_layer_bad_inputs():
    layer = EmbeddingLayer(10, 4, max_seq_len=6, seed=0)
    weight_before = layer.token_embedding.weight.data.copy()
    with pytest.raises(ValueError, match=r"sequence length 7 exceeds max_seq_len=6"):
        layer(np.zeros((2, 7), dtype=np.int64))
    with pytest.raises(ValueError, match=r"sequence length 7 exceeds max_seq_len=6"):
        EmbeddingLayer(10, 4, max_seq_len=6, pos_encoding="sinusoidal")(list(range(7)))
    with pytest.raises(ValueError, match=r"unknown pos_encoding 'rotary'; choose one of 'learned', 'sinusoidal', 'none'"):
        EmbeddingLayer(10, 4, pos_encoding="rotary")
    with pytest.raises(ValueError, match="single id"):
        layer(3)
    with pytest.raises(IndexError, match=r"token id 10 .* \[0, 10\)"):
        layer([[1, 10]])
    with pytest.raises(ValueError, match="max_seq_len must be a positive int; got 0"):
        EmbeddingLayer(10, 4, max_seq_len=0)
    with pytest.raises(ValueError, match=r"dropout probability p must be in \[0, 1\); got p=1.5"):
        EmbeddingLayer(10, 4, dropout=1.5)
    assert np.array_equal(layer.token_embedding.weight.data, weight_before)
    assert isinstance(layer.token_embedding, Embedding)


def test_tables_share_creation_reset_from_pretrained_and_repr():
    from tinytorch.text.bag import EmbeddingBag
    from tinytorch.text.embeddings import Table

    pretrained = np.arange(8.0).reshape(4, 2)
    for cls, name in ((Embedding, "weight"), (EmbeddingBag, "weight"), (PositionalEncoding, "position_embeddings")):
        assert issubclass(cls, Table)
        module = cls.from_pretrained(pretrained)
        table = getattr(module, name)
        assert np.array_equal(table.data, pretrained) and table.dtype == np.float64 and not table.requires_grad
        assert cls.from_pretrained(pretrained, freeze=False).__getattribute__(name).requires_grad
        before = table.data.copy()
        module.reset_parameters()
        assert not np.array_equal(table.data, before), f"{cls.__name__}.reset_parameters draws again"
        assert repr(module).startswith(f"{cls.__name__}(4, 2")
    assert repr(PositionalEncoding(6, 3, init="gpt2")) == "LearnedPositionalEncoding(6, 3, init='gpt2')"
