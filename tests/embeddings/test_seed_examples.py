"""The documented usage of the codebases module 11 learns from runs as written (issue 11, item 5).

Each test is one seed's example, spelled the way that seed spells it: TinyTorch's module-11 manual test,
Stanford CS336's `Embedding` signature, GPT-2's input block, and the "I love dogs" walkthrough. The
expected numbers come from the definitions (the paper's formula, the table's own rows), not from our output.
"""
import math

import numpy as np
import pytest

from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import Embedding, EmbeddingLayer, PositionalEncoding, create_sinusoidal_embeddings
from tinytorch.text.tokenization import WordTokenizer


def test_tinytorch_module_11_manual_example():
    vocab_size, embed_dim = 100, 64
    token_emb = Embedding(vocab_size, embed_dim)
    tokens = Tensor([[1, 5, 23], [42, 7, 19]])
    token_embeddings = token_emb.forward(tokens)
    assert token_embeddings.shape == (2, 3, embed_dim)
    assert np.array_equal(token_embeddings.data, token_emb.weight.data[[[1, 5, 23], [42, 7, 19]]])
    assert len(token_emb.parameters()) == 1 and token_emb.embed_dim == embed_dim

    pos_encoding = PositionalEncoding(max_seq_len=512, embed_dim=256)
    assert pos_encoding.position_embeddings.shape == (512, 256) and pos_encoding.embed_dim == 256
    assert pos_encoding(np.zeros((2, 10, 256), np.float32)).shape == (2, 10, 256)

    sinusoidal = create_sinusoidal_embeddings(max_seq_len=512, embed_dim=256)
    assert sinusoidal.shape == (512, 256)
    assert np.array_equal(sinusoidal.data[0], np.tile([0.0, 1.0], 128)), "position 0 is [0, 1, 0, 1, ...]"
    position, i = 7, 5                                    # sin(pos / 10000^(2i/d)) in column 2i
    assert math.isclose(sinusoidal.data[position, 2 * i], math.sin(position / 10000 ** (2 * i / 256)), abs_tol=1e-6)


@pytest.mark.parametrize("leading", [(), (5,), (2, 3), (2, 1, 4)], ids=str)
def test_cs336_embedding_signature_trunc_normal_any_leading_shape(leading):
    num_embeddings, embedding_dim = 1000, 64
    emb = Embedding(num_embeddings, embedding_dim, device=None, dtype=None, init="trunc_normal", seed=0)
    weight = emb.weight.data
    assert weight.dtype == np.float32 and emb.num_embeddings == num_embeddings and emb.embedding_dim == embedding_dim
    assert np.abs(weight).max() <= 3 and 0.95 < weight.std() < 1.0, "N(0, 1) truncated at [-3, 3]: std 0.986"
    token_ids = np.random.default_rng(1).integers(0, num_embeddings, leading)
    out = emb(token_ids)
    assert out.shape == leading + (embedding_dim,)
    assert np.array_equal(out.data, weight[token_ids])


def test_none_dtype_and_device_mean_the_defaults_everywhere():
    assert Embedding(10, 4, dtype=None, device=None).weight.dtype == np.float32
    assert Embedding(1000, 64, device=None, dtype=None).weight.dtype == np.float32
    assert EmbeddingLayer(10, 4, dtype=None)([[1, 2]]).dtype == np.float32
    assert create_sinusoidal_embeddings(4, 2, dtype=None).dtype == np.float32


def test_gpt2_input_block_token_plus_position_plus_dropout():
    vocab_size, n_embd, block_size = 50, 16, 8
    block = EmbeddingLayer(vocab_size, n_embd, max_seq_len=block_size, dropout=0.1, init="gpt2", seed=0)
    idx = np.random.default_rng(0).integers(0, vocab_size, (4, block_size))
    wte, wpe = block.token_embedding.weight.data, block.position_encoding.position_embeddings.data
    assert abs(wte.std() - 0.02) < 0.005 and abs(wpe.std() - 0.02) < 0.005, "GPT-2 init: N(0, 0.02^2)"
    block.eval()
    expected = wte[idx] + wpe[np.arange(block_size)]           # drop(wte(idx) + wpe(pos)) with drop the identity
    assert np.allclose(block(idx).data, expected, atol=1e-7)
    assert np.array_equal(block(idx).data, block(idx).data), "eval is deterministic"
    block.train()
    out = block(idx).data
    dropped = out == 0
    assert 0.03 < dropped.mean() < 0.2, "about 10% of the numbers are dropped"
    assert np.allclose(out[~dropped], expected[~dropped] / 0.9, atol=1e-6), "the rest are scaled by 1 / (1 - p)"


def test_i_love_dogs_walkthrough():
    tokenizer = WordTokenizer.from_text("I love dogs. I love cats.")
    ids = tokenizer.encode("I love dogs")
    assert len(ids) == 3 and tokenizer.decode(ids) == "i love dogs"
    table = Embedding(tokenizer.vocab_size, 8, seed=0)
    vectors = table(ids)
    assert vectors.shape == (3, 8) and np.array_equal(vectors.data, table.weight.data[ids])
    batched = table([ids])
    assert batched.shape == (1, 3, 8) and np.array_equal(batched.data[0], vectors.data)


def test_every_size_takes_the_seed_spellings_and_reads_them_back():
    from tinytorch.text.bag import EmbeddingBag
    from tinytorch.text.embeddings import FactorizedEmbedding, SinusoidalPositionalEncoding, init_table
    from tinytorch.text.memory import embedding_memory

    for module in (Embedding(num_embeddings=6, embed_dim=4), EmbeddingBag(num_embeddings=6, embed_dim=4),
                   FactorizedEmbedding(num_embeddings=6, embed_dim=4, rank=2),
                   EmbeddingLayer(num_embeddings=6, embedding_dim=4)):
        assert (module.num_embeddings, module.embedding_dim, module.embed_dim) == (6, 4, 4), type(module).__name__
    for module in (PositionalEncoding(8, embed_dim=4), SinusoidalPositionalEncoding(8, embed_dim=4)):
        assert (module.embedding_dim, module.embed_dim) == (4, 4), type(module).__name__
    assert create_sinusoidal_embeddings(8, embed_dim=4).shape == (8, 4)
    assert embedding_memory(num_embeddings=10, embed_dim=4) == embedding_memory(10, 4) == 160
    assert embedding_memory(10, 4, dtype=None) == 160 and init_table((2, 2), dtype=None).dtype == np.float32
    with pytest.raises(TypeError, match="got both embedding_dim=4 and embed_dim=5"):
        Embedding(10, 4, embed_dim=5)
