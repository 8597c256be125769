"""Module 13: Hugging Face's attention_mask and position_ids through DecoderBlock and TransformerLM, generation of
left-padded batches, and the interleaved RoPE layout (issue 24, item 4). Parity with transformers is in
test_hf_parity.py; this file checks the same behaviour with NumPy only (each padded row against the row alone)."""
import numpy as np
import pytest

from tinytorch.core.autograd import gradcheck, no_grad
from tinytorch.core.tensor import Tensor
from tinytorch.models import DecoderBlock, TransformerConfig, TransformerLM
from tinytorch.text.embeddings import POSITIONS, RotaryEmbedding


def model_for(arch, position="default", **overrides):
    options = dict(arch=arch, vocab_size=37, max_seq_len=24, d_model=16, num_layers=2, num_heads=4)
    if position != "default":
        options["position"] = position
    options.update(overrides)
    return TransformerLM(TransformerConfig(**options), seed=0)


def left_padded(rng, lengths, width):
    ids, mask = np.zeros((len(lengths), width), np.int64), np.zeros((len(lengths), width), np.int64)
    for row, n in enumerate(lengths):
        ids[row, width - n:], mask[row, width - n:] = rng.integers(0, 37, size=n), 1
    return ids, mask


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_a_left_padded_row_gives_the_logits_of_the_row_alone(rng, arch, position):
    model = model_for(arch, position)
    ids, mask = left_padded(rng, [6, 2, 4], 6)
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
    logits = model(ids, attention_mask=mask, position_ids=positions).data
    for row, n in enumerate([6, 2, 4]):
        np.testing.assert_allclose(logits[row, 6 - n:], model(ids[row, 6 - n:]).data, atol=1e-5)


def test_no_padding_and_default_positions_change_nothing(rng):
    for arch in ("gpt2", "llama"):
        model = model_for(arch)
        ids = rng.integers(0, 37, size=(2, 7))
        plain = model(ids).data
        np.testing.assert_array_equal(model(ids, attention_mask=np.ones((2, 7), bool)).data, plain)
        np.testing.assert_array_equal(model(ids, position_ids=np.arange(7)).data, plain)
        np.testing.assert_array_equal(model(ids[0], np.ones(7, np.int64), np.arange(7)).data, plain[0])


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_cached_decoding_with_an_attention_mask_over_past_and_new_keys(rng, arch):
    "Hugging Face's convention: while decoding, attention_mask covers the cached keys and the new ones."
    model = model_for(arch)
    ids, mask = left_padded(rng, [7, 3], 7)
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
    full = model(ids, mask, positions).data
    caches = model.new_caches()
    with no_grad():
        head = model(ids[:, :5], mask[:, :5], positions[:, :5], caches=caches).data
        tail = model(ids[:, 5:], mask, positions[:, 5:], caches=caches).data
    real = mask.astype(bool)
    np.testing.assert_allclose(np.concatenate([head, tail], axis=1)[real], full[real], atol=1e-5)


@pytest.mark.parametrize("position", ["learned", "rope", "alibi"])
@pytest.mark.parametrize("use_cache", [True, False])
def test_generate_gives_each_left_padded_row_its_own_tokens(rng, position, use_cache):
    model = model_for("llama" if position == "rope" else "gpt2", position)
    lengths = [1, 5, 3]
    ids, mask = left_padded(rng, lengths, 5)
    batch = model.generate(ids, 9, attention_mask=mask, use_cache=use_cache)
    assert batch.shape == (3, 14) and np.array_equal(batch[:, :5], ids)
    for row, n in enumerate(lengths):
        alone = model.generate(ids[row, 5 - n:], 9, use_cache=use_cache)
        assert np.array_equal(batch[row, 5:], alone[n:]), f"row {row} (length {n})"
    sampled = [model.generate(ids, 5, temperature=1.0, seed=4, attention_mask=mask, use_cache=u) for u in (True, False)]
    assert np.array_equal(*sampled)


def test_generate_counts_only_real_tokens_against_the_position_table(rng):
    "A padded prompt may continue to the table's end: positions start at its first real token."
    model = model_for("gpt2", max_seq_len=8)
    ids, mask = left_padded(rng, [2, 3], 6)
    assert model.generate(ids, 5, attention_mask=mask).shape == (2, 11)          # real 3 + 5 = 8 positions
    with pytest.raises(ValueError, match=r"prompt \(3\) \+ max_new_tokens \(6\) = 9 positions exceed"):
        model.generate(ids, 6, attention_mask=mask)


@pytest.mark.parametrize("mask, words", [
    (np.array([[1, 1, 0]]), r"row\(s\) \[0\] end in padding: .* pad on the left"),
    (np.array([[1, 0, 1]]), r"must be left padding"),
    (np.array([[0, 2, 1]]), r"must hold 1 \(a real token\) or 0 \(padding\)"),
    (np.ones((1, 4), np.int64), r"in the prompt's shape \(1, 3\); got dtype int64, shape \(1, 4\)"),
])
def test_generate_refuses_masks_that_are_not_left_padding(mask, words):
    model = model_for("gpt2")
    with pytest.raises(ValueError, match=words):
        model.generate(np.array([[1, 2, 3]]), 2, attention_mask=mask)


@pytest.mark.parametrize("call, error, words", [
    (lambda m: m(np.ones((2, 3), np.int64), attention_mask=np.ones((2, 4))),
     ValueError, r"attention_mask must hold 1 .* \(2, 3\) \(cached \+ new tokens\); got dtype float64, shape \(2, 4\)"),
    (lambda m: m(np.ones((2, 3), np.int64), attention_mask=np.full((2, 3), 2)),
     ValueError, r"attention_mask must hold 1 \(a real token\) or 0"),
    (lambda m: m(np.ones((2, 3), np.int64), position_ids=np.array([0, -1, 2])),
     ValueError, r"position_ids must be integers >= 0 .* minimum -1"),
    (lambda m: m(np.ones((2, 3), np.int64), position_ids=np.zeros((2, 4), np.int64)),
     ValueError, r"position_ids must be integers >= 0 of shape \(3,\) or \(2, 3\)"),
    (lambda m: m(np.ones((2, 3), np.int64), position_ids=np.array([0.0, 1.0, 2.0])),
     ValueError, r"got dtype float64"),
    (lambda m: m(np.ones((1, 3), np.int64), position_ids=np.array([20, 21, 24])),
     ValueError, r"positions 20..24 exceed the learned position table of max_seq_len=24 rows"),
    (lambda m: m(np.ones((1, 3), np.int64), np.ones((1, 3), np.int64), np.arange(3), m.new_caches()),
     TypeError, r"positional argument"),                               # caches are keyword-only
    (lambda m: m(np.ones((1, 3), np.int64), m.new_caches()),
     TypeError, r"second argument of TransformerLM.forward is attention_mask; got KVCaches: pass them by name"),
])
def test_bad_mask_and_position_arguments_are_refused(call, error, words):
    with pytest.raises(error, match=words):
        call(model_for("gpt2"))


def test_rope_interleaved_config_builds_the_interleaved_rotation(rng):
    assert TransformerConfig(arch="llama").rope_interleaved is False
    config = TransformerConfig(arch="llama", d_model=16, num_heads=4, rope_interleaved=True)
    model = TransformerLM(config, seed=0)
    rope = model.model.layers[0].self_attn.rope
    assert rope.interleaved and all(block.self_attn.rope is rope for block in model.blocks)
    half_split = TransformerLM(TransformerConfig(arch="llama", d_model=16, num_heads=4), seed=0)
    ids = rng.integers(0, 37, size=(1, 6))
    assert not np.allclose(model(ids).data, half_split(ids).data, atol=1e-6), "the layout changes the model"
    with pytest.raises(TypeError, match="rope_interleaved must be True or False; got 'yes'"):
        TransformerConfig(arch="llama", rope_interleaved="yes")


def test_decoder_block_gradcheck_with_padding_and_positions(rng):
    block = float64_copy(DecoderBlock(TransformerConfig(arch="llama", d_model=8, num_heads=2, d_ff=16),
                                      rope=RotaryEmbedding(4, interleaved=False), seed=0))
    x = Tensor(rng.standard_normal((2, 4, 8)), requires_grad=True, dtype=np.float64)
    padding = np.array([[True, False, False, False], [False, False, False, False]])
    positions = np.array([[0, 0, 1, 2], [0, 1, 2, 3]])
    bias = rng.standard_normal((4, 4))
    assert gradcheck(lambda inp, *params: block(inp, bias, key_padding_mask=padding, token_positions=positions),
                     [x] + block.parameters())


def float64_copy(module):
    for p in module.parameters():
        p.data = p.data.astype(np.float64)
    return module
