"""Module 11's re-cut: the learner's classes and PyTorch's options around them (options_dev.ipynb).

The names (`position=` with `pos_encoding=` kept, `LearnedPositionalEncoding` with `PositionalEncoding` kept),
a Module as the position scheme, `ScaleGradByFreq` on its own, the hook that keeps `Embedding.forward` the
plain lookup, and the public names of `tinytorch.text.embeddings` before the re-cut, all still importable.
"""
import importlib

import numpy as np
import pytest

from tinytorch.core.autograd import RowSparseGrad, gradcheck
from tinytorch.core.layers import Module
from tinytorch.core.tensor import Tensor
from tinytorch.text.embedding_options import POS_ENCODINGS, ScaleGradByFreq, lookup_with_options, position_choice
from tinytorch.text.embeddings import (
    Embedding, EmbeddingBackward, EmbeddingLayer, LearnedPositionalEncoding, PositionalEncoding,
    SinusoidalPositionalEncoding,
)

F64 = np.float64

# tinytorch.text.embeddings.__all__ before module 11 was re-cut (commit a79f1a1)
NAMES_BEFORE = ['INITS', 'GPT2_INIT_STD', 'SHOWN', 'ROPE_CACHE_FACTOR', 'POS_ENCODINGS', 'as_token_ids', 'padding_index',
                'table_grad', 'EmbeddingBackward', 'lookup_options', 'renorm_rows_', 'lookup', 'embedding', 'init_table',
                'Table', 'Embedding', 'create_sinusoidal_embeddings', 'position_window', 'SinusoidalPositionalEncoding',
                'PositionalEncoding', 'rotate_pairs', 'RotaryBackward', 'RotaryEmbedding', 'EmbeddingLayer',
                'FactorizedEmbedding']


def test_every_name_exported_before_the_recut_is_still_exported():
    module = importlib.import_module("tinytorch.text.embeddings")
    assert [name for name in NAMES_BEFORE if not hasattr(module, name)] == []
    assert set(NAMES_BEFORE) <= set(module.__all__)
    assert "LearnedPositionalEncoding" in module.__all__


def test_learned_positional_encoding_keeps_its_old_name_and_parameter_name():
    assert PositionalEncoding is LearnedPositionalEncoding
    assert list(LearnedPositionalEncoding(4, 2, seed=0).state_dict()) == ["position_embeddings"]


@pytest.mark.parametrize("scheme, kind", [("learned", LearnedPositionalEncoding),
                                          ("sinusoidal", SinusoidalPositionalEncoding), (None, type(None))])
def test_position_and_its_seed_spelling_pos_encoding_build_the_same_layer(scheme, kind):
    new = EmbeddingLayer(12, 4, max_seq_len=6, position=scheme, seed=3)
    old = EmbeddingLayer(12, 4, max_seq_len=6, pos_encoding=scheme, seed=3)
    positional = EmbeddingLayer(12, 4, 6, scheme, seed=3)
    for layer in (new, old, positional):
        assert isinstance(layer.position_encoding, kind)
    assert {k: v.tolist() for k, v in new.state_dict().items()} == {k: v.tolist() for k, v in old.state_dict().items()}
    tokens = [[1, 2, 3]]
    assert np.array_equal(new(tokens).data, old(tokens).data)


def test_position_spelling_errors_name_the_spelling_used():
    with pytest.raises(ValueError, match=r"unknown position 'abs'; choose one of 'learned', 'sinusoidal', 'none'"):
        EmbeddingLayer(10, 4, position="abs")
    with pytest.raises(ValueError, match=r"unknown pos_encoding 'abs'"):
        EmbeddingLayer(10, 4, pos_encoding="abs")
    with pytest.raises(TypeError, match=r"got both position='sinusoidal' and pos_encoding=None"):
        EmbeddingLayer(10, 4, position="sinusoidal", pos_encoding=None)
    assert POS_ENCODINGS == ("learned", "sinusoidal", None)
    assert position_choice("learned") == "learned" and position_choice("learned", None) is None


class Ramp(Module):
    "A position module of the caller's own: adds 10 * (start + t) at position t."

    def forward(self, x, start=0):
        return x + Tensor(10.0 * (start + np.arange(x.shape[-2]))[:, None], dtype=F64)


def test_a_module_may_be_the_position_scheme_and_may_be_assigned_after_construction():
    layer = EmbeddingLayer(12, 4, max_seq_len=3, position=Ramp(), dtype=F64, seed=0).eval()
    table = layer.token_embedding.weight.data
    assert isinstance(layer.position_encoding, Ramp) and list(layer.state_dict()) == ["token_embedding.weight"]
    out = layer([[1, 2, 3, 4, 5]], start=2)                        # no table, so no max_seq_len limit
    assert np.allclose(out.data, table[[[1, 2, 3, 4, 5]]] + 10.0 * np.arange(2, 7)[:, None])
    assert "position=Ramp" in repr(layer)
    other = EmbeddingLayer(12, 4, max_seq_len=3, position=None, dtype=F64, seed=0).eval()
    other.position_encoding = Ramp()
    assert np.allclose(other([[1, 2]]).data, table[[[1, 2]]] + 10.0 * np.arange(2)[:, None])


def test_embedding_layer_keeps_the_contract_attributes():
    layer = EmbeddingLayer(30, 8, max_seq_len=16, scale_embeddings=True, dropout=0.1, seed=0)
    assert (layer.vocab_size, layer.embedding_dim, layer.max_seq_len, layer.scale_embeddings) == (30, 8, 16, True)
    assert isinstance(layer.token_embedding, Embedding) and layer.dropout.p == 0.1
    assert (layer.num_embeddings, layer.embed_dim) == (30, 8)


def test_scale_grad_by_freq_is_an_identity_whose_backward_divides_by_the_count():
    x = Tensor(np.arange(12.0).reshape(2, 3, 2), requires_grad=True, dtype=F64)
    ids = np.array([[4, 4, 1], [4, 0, 1]])                          # id 4 three times, id 1 twice, id 0 once
    out = ScaleGradByFreq.apply(x, ids=ids)
    assert np.array_equal(out.data, x.data)
    out.backward(np.ones((2, 3, 2)))
    assert np.allclose(x.grad[..., 0], [[1 / 3, 1 / 3, 1 / 2], [1 / 3, 1, 1 / 2]])


def test_embedding_forward_is_the_plain_lookup_and_the_call_adds_pytorchs_options():
    emb = Embedding(5, 2, scale_grad_by_freq=True, dtype=F64, seed=0)
    plain = emb.forward([1, 1, 3])
    assert isinstance(plain._grad_fn, EmbeddingBackward)
    called = emb([1, 1, 3])
    assert isinstance(called._grad_fn, ScaleGradByFreq) and np.array_equal(called.data, plain.data)
    called.backward(np.ones((3, 2)))
    assert np.array_equal(emb.weight.grad[:, 0], [0, 1, 0, 1, 0])
    renorm = Embedding.from_pretrained([[3.0, 4.0], [0.3, 0.4]], max_norm=1.0)
    assert np.array_equal(renorm.forward([0]).data, [[3.0, 4.0]]), "forward alone leaves the table as it is"
    renorm([0])
    assert np.allclose(renorm.weight.data, [[0.6, 0.8], [0.3, 0.4]])


@pytest.mark.parametrize("sparse", [False, True])
def test_lookup_with_options_puts_both_extras_around_any_gather(sparse):
    weight = Tensor(np.random.default_rng(0).standard_normal((6, 3)), requires_grad=True, dtype=F64)
    ids = np.array([2, 2, 5, 0])
    gather = lambda i: EmbeddingBackward.apply(weight, ids=i, sparse=sparse)   # noqa: E731
    lookup_with_options(gather, weight, ids, scale_grad_by_freq=True).backward(np.ones((4, 3)))
    grad = weight.grad.to_dense() if isinstance(weight.grad, RowSparseGrad) else weight.grad
    assert np.allclose(grad[:, 0], [1, 0, 1, 0, 0, 1])
    weights = Tensor((1 / np.array([2, 2, 1, 1]))[:, None], dtype=F64)
    assert gradcheck(lambda w: EmbeddingBackward.apply(w, ids=ids) * weights, [weight])


def test_reset_parameters_uses_the_learners_init_table_from_the_hook():
    emb = Embedding(40, 6, init="gpt2", padding_idx=3, seed=1)
    emb.weight.data[...] = 7.0
    emb.reset_parameters()
    assert abs(emb.weight.data.std() - 0.02) < 0.01 and np.all(emb.weight.data[3] == 0)
    again = Embedding(40, 6, init="gpt2", padding_idx=3, seed=1)
    again.reset_parameters()
    assert np.array_equal(again.weight.data, emb.weight.data), "the same generator, the same second draw"


# ---------------------------------------------------------------- one list of position schemes (modules 11 and 13)


def test_module_13_takes_module_11s_position_names_the_same_tuple():
    from tinytorch.models import POSITIONS as model_positions
    from tinytorch.text.embeddings import POSITIONS

    assert model_positions is POSITIONS and POSITIONS == ("learned", "sinusoidal", "rope", "alibi", "none")
    assert EmbeddingLayer(10, 4, position="none").position_encoding is None
    assert EmbeddingLayer(10, 4, position=None).position_encoding is None


@pytest.mark.parametrize("scheme", ["rope", "alibi"])
def test_the_input_block_refuses_attention_schemes_and_says_where_they_go(scheme):
    for kwargs, name in (({"position": scheme}, "position"), ({"pos_encoding": scheme}, "pos_encoding")):
        with pytest.raises(ValueError, match=rf"{name}='{scheme}' acts inside attention \(module 12\).*"
                                             rf"TransformerConfig\(position='{scheme}'\)"):
            EmbeddingLayer(10, 4, **kwargs)


# ------------------------------------------------------------------------------------------------ max_norm and saved tables
# Issue 15, defect 2: renormalising rows in place bumps the table's version, so a backward that saved the table
# refuses rather than give a wrong gradient.

def test_2_max_norm_renormalising_a_saved_table_refuses_to_backward():
    "The issue's repro: without the version bump the gradient was [[2.2, 2.6], [.6, .8]] instead of [[7, 9], [.6, .8]]."
    emb = Embedding.from_pretrained([[3.0, 4.0], [0.3, 0.4]], freeze=False, max_norm=1.0)
    loss = (emb.weight * emb.weight).sum() + emb([0]).sum()
    with pytest.raises(RuntimeError, match="modified"):
        loss.backward()


def test_2_max_norm_that_changes_nothing_keeps_the_graph_usable():
    emb = Embedding.from_pretrained([[0.3, 0.4], [0.6, 0.8]], freeze=False, max_norm=1.0)
    ((emb.weight * emb.weight).sum() + emb([0, 1]).sum()).backward()
    assert np.allclose(emb.weight.grad, 2 * emb.weight.data + 1)


# ------------------------------------------------------------------------------------------------ issue 23, second part

def test_from_pretrained_refuses_a_non_bool_freeze():
    with pytest.raises(TypeError, match="freeze must be True or False"):
        Embedding.from_pretrained(np.ones((3, 2)), freeze="no")
