"""Module 12: scaled dot-product attention, multi-head attention, the KV cache (NumPy only).

PyTorch comparisons live in tests/attention/test_torch_parity.py."""
import math

import numpy as np
import pytest

from tinytorch.core.attention import (
    KVCache, MultiHeadAttention, attention_scores, attention_weights, causal_mask, scaled_dot_product_attention,
)
from tinytorch.core.autograd import gradcheck, no_grad
from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import RotaryEmbedding


def leaf(rng, *shape):
    return Tensor(rng.standard_normal(shape), requires_grad=True, dtype=np.float64)


def reference_attention(q, k, v, mask=None, scale=None):
    "Plain NumPy: softmax(q kᵀ · scale + bias) v, -inf for False; fully masked rows give 0."
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None and mask.dtype == bool:
        s = np.where(mask, s, -np.inf)
    elif mask is not None:
        s = s + mask
    top = s.max(-1, keepdims=True)
    w = np.exp(s - np.where(np.isfinite(top), top, 0))
    total = w.sum(-1, keepdims=True)
    w = np.divide(w, total, out=np.zeros_like(w), where=total > 0)
    return w @ v


def float64_copy(module):
    for p in module.parameters():
        p.data = p.data.astype(np.float64)
    return module


# --- scaled_dot_product_attention -----------------------------------------------------------------------------

def test_sdpa_matches_the_formula_with_batch_axes_and_custom_scale(rng):
    q, k, v = rng.standard_normal((2, 3, 4, 8)), rng.standard_normal((2, 3, 6, 8)), rng.standard_normal((2, 3, 6, 5))
    out = scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), scale=0.3)
    assert out.shape == (2, 3, 4, 5)
    assert np.allclose(out.data, reference_attention(q, k, v, scale=0.3), atol=1e-5)


def test_boolean_float_and_causal_masks(rng):
    q, k, v = rng.standard_normal((2, 4, 8)), rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 5, 3))
    mask = rng.random((4, 5)) > 0.4
    mask[:, 0] = True
    out = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert np.allclose(out.data, reference_attention(q, k, v, mask), atol=1e-5)
    bias = rng.standard_normal((2, 1, 5))
    out = scaled_dot_product_attention(q, k, v, attn_mask=bias)
    assert np.allclose(out.data, reference_attention(q, k, v, bias), atol=1e-5)
    out = scaled_dot_product_attention(q, k, v, is_causal=True)
    assert np.allclose(out.data, reference_attention(q, k, v, np.tril(np.ones((4, 5), bool))), atol=1e-5)


def test_a_fully_masked_row_is_zero_not_nan_and_passes_no_gradient(rng):
    q, k, v = leaf(rng, 3, 4), leaf(rng, 5, 4), leaf(rng, 5, 2)
    mask = np.ones((3, 5), bool)
    mask[1] = False
    out = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert not np.isnan(out.data).any() and np.all(out.data[1] == 0)
    out.sum().backward()
    assert np.all(q.grad[1] == 0) and not np.isnan(k.grad).any()


@pytest.mark.parametrize("case", ["plain", "bool", "float", "causal", "empty_row", "broadcast_heads"])
def test_sdpa_gradcheck(rng, case):
    q, k, v = leaf(rng, 2, 3, 4), leaf(rng, 2, 5, 4), leaf(rng, 2, 5, 3)
    mask, causal = None, False
    if case == "bool":
        mask = rng.random((3, 5)) > 0.5
        mask[:, 2] = True
    elif case == "float":
        mask = rng.standard_normal((2, 3, 5))
    elif case == "causal":
        causal = True
    elif case == "empty_row":
        mask = rng.random((3, 5)) > 0.5
        mask[0] = False
    elif case == "broadcast_heads":                  # grouped-query layout: one kv head for two query heads
        q, k, v = leaf(rng, 2, 2, 3, 4), leaf(rng, 2, 1, 5, 4), leaf(rng, 2, 1, 5, 3)
    assert gradcheck(lambda a, b, c: scaled_dot_product_attention(a, b, c, attn_mask=mask, is_causal=causal), [q, k, v])


def test_pieces_agree_with_the_whole(rng):
    q, k, v = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
    mask = causal_mask(3, 5, offset=2)
    weights = attention_weights(attention_scores(Tensor(q), Tensor(k)), mask)
    assert np.allclose(weights.data.sum(-1), 1)
    assert np.allclose((weights @ Tensor(v)).data, scaled_dot_product_attention(q, k, v, attn_mask=mask).data)


def test_causal_mask_offsets():
    assert np.array_equal(causal_mask(2, 2), [[True, False], [True, True]])
    assert np.array_equal(causal_mask(2, 4, offset=2), [[True, True, True, False], [True, True, True, True]])
    assert np.array_equal(causal_mask(3, 2), [[True, False], [True, True], [True, True]])


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(key=np.zeros((5, 3))), ValueError, "same E"),
    (dict(value=np.zeros((4, 2))), ValueError, "same S"),
    (dict(attn_mask=np.ones((3, 4), bool)), ValueError, "does not broadcast"),
    (dict(attn_mask=np.ones((2, 5), np.int64)), TypeError, "boolean"),
    (dict(attn_mask=np.ones((2, 5), bool), is_causal=True), ValueError, "not both"),
    (dict(query=np.zeros(4)), ValueError, "at least 2-D"),
    (dict(query=np.zeros((2, 4), np.int64)), TypeError, "floating point"),
    (dict(scale=float("nan")), ValueError, "scale"),
    (dict(is_causal="yes"), TypeError, "is_causal"),
])
def test_sdpa_bad_inputs_name_the_problem(kwargs, error, words):
    args = dict(query=np.zeros((2, 4)), key=np.zeros((5, 4)), value=np.zeros((5, 2)))
    args.update(kwargs)
    with pytest.raises(error, match=words):
        scaled_dot_product_attention(**args)


# --- MultiHeadAttention -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("options", [
    dict(), dict(fused_qkv=True), dict(num_kv_heads=2), dict(num_kv_heads=1, bias=False),
    dict(num_kv_heads=2, rope="half"), dict(rope="interleaved", fused_qkv=True), dict(causal=False),
])
def test_multi_head_attention_gradcheck(rng, options):
    options = dict(options)
    if options.get("rope"):
        options["rope"] = RotaryEmbedding(2, interleaved=options["rope"] == "interleaved")
    mha = float64_copy(MultiHeadAttention(8, 4, seed=0, **options))
    x = leaf(rng, 2, 3, 8)
    assert gradcheck(lambda inp, *params: mha(inp), [x] + mha.parameters())


def test_grouped_query_heads_share_keys_like_repeat_kv(rng):
    "GQA equals full multi-head attention whose k/v projections repeat each kv head for its group (HF repeat_kv)."
    gqa = MultiHeadAttention(12, 6, num_kv_heads=2, seed=3)
    full = MultiHeadAttention(12, 6, seed=4)
    full.q_proj.weight.data[...] = gqa.q_proj.weight.data
    full.q_proj.bias.data[...] = gqa.q_proj.bias.data
    full.o_proj.weight.data[...], full.o_proj.bias.data[...] = gqa.o_proj.weight.data, gqa.o_proj.bias.data
    for name in ("k_proj", "v_proj"):
        small, big = getattr(gqa, name), getattr(full, name)
        w = small.weight.data.reshape(12, 2, 1, 2)                         # (in, kv_heads, 1, head_dim)
        big.weight.data[...] = np.broadcast_to(w, (12, 2, 3, 2)).reshape(12, 12)
        big.bias.data[...] = np.broadcast_to(small.bias.data.reshape(2, 1, 2), (2, 3, 2)).reshape(12)
    x = rng.standard_normal((2, 5, 12)).astype(np.float32)
    assert np.allclose(gqa(x).data, full(x).data, atol=1e-5)


def test_causal_attention_ignores_the_future(rng):
    mha = MultiHeadAttention(8, 2, rope=RotaryEmbedding(4), seed=0)
    x = rng.standard_normal((1, 6, 8))
    changed = x.copy()
    changed[:, 4:] = rng.standard_normal((1, 2, 8))
    assert np.allclose(mha(x).data[:, :4], mha(changed).data[:, :4], atol=1e-6)
    assert not np.allclose(MultiHeadAttention(8, 2, causal=False, seed=0)(x).data[:, :4],
                           MultiHeadAttention(8, 2, causal=False, seed=0)(changed).data[:, :4])


@pytest.mark.parametrize("options", [dict(fused_qkv=True), dict(num_kv_heads=1, rope=True), dict(num_kv_heads=2)])
def test_kv_cache_decoding_equals_the_full_pass(rng, options):
    options = dict(options)
    if options.get("rope"):
        options["rope"] = RotaryEmbedding(4, interleaved=False)
    mha = MultiHeadAttention(16, 4, seed=5, **options)
    x = rng.standard_normal((2, 7, 16)).astype(np.float32)
    full = mha(x).data
    cache = KVCache()
    with no_grad():
        parts = [mha(x[:, :3], cache=cache).data, mha(x[:, 3:5], cache=cache).data]   # prefill, then two at once
        parts += [mha(x[:, t:t + 1], cache=cache).data for t in (5, 6)]               # then one at a time
    assert cache.length == 7 and cache.keys.shape == (2, mha.num_kv_heads, 7, 4)
    assert np.allclose(np.concatenate(parts, axis=1), full, atol=1e-5)


def test_rope_positions_continue_from_the_cache(rng):
    "A token decoded after a cache of length n is rotated as position n, not 0."
    mha = MultiHeadAttention(8, 2, rope=RotaryEmbedding(4), seed=1)
    x = rng.standard_normal((1, 4, 8)).astype(np.float32)
    cache = KVCache()
    with no_grad():
        mha(x[:, :3], cache=cache)
        last = mha(x[:, 3:], cache=cache).data
    rotated_keys = cache.keys.data[0, 0]
    raw = (x[0] @ mha.k_proj.weight.data + mha.k_proj.bias.data).reshape(4, 2, 4)[:, 0]
    assert np.allclose(rotated_keys, RotaryEmbedding(4)(raw).data, atol=1e-5)
    assert np.allclose(last, mha(x).data[:, 3:], atol=1e-5)


@pytest.mark.parametrize("kwargs, words", [
    (dict(d_model=8, num_heads=3), "not divisible"),
    (dict(d_model=8, num_heads=4, num_kv_heads=3), "must divide"),
    (dict(d_model=0, num_heads=1), "d_model"),
    (dict(d_model=8, num_heads=2, rope=RotaryEmbedding(8)), "head_dim=4"),
])
def test_multi_head_attention_bad_arguments(kwargs, words):
    with pytest.raises(ValueError, match=words):
        MultiHeadAttention(**kwargs)


def test_multi_head_attention_bad_input_shape():
    with pytest.raises(ValueError, match=r"\(batch, seq, 8\)"):
        MultiHeadAttention(8, 2)(np.zeros((3, 8), np.float32))


def test_a_cache_of_another_batch_is_refused_and_left_unchanged(rng):
    mha = MultiHeadAttention(8, 2, seed=0)
    cache = KVCache()
    with no_grad():
        mha(rng.standard_normal((2, 3, 8)), cache=cache)
        with pytest.raises(ValueError, match="holds 2 sequences"):
            mha(rng.standard_normal((1, 1, 8)), cache=cache)
    assert cache.length == 3


def test_rope_lives_with_attention_and_is_importable_from_both_places():
    """RoPE moved from module 11 to attention (core must not import text); the old import path still works."""
    from tinytorch.core import attention
    from tinytorch.text import embeddings

    for name in ("rotate_pairs", "RotaryBackward", "ROPE_CACHE_FACTOR", "RotaryEmbedding"):
        assert getattr(embeddings, name) is getattr(attention, name), name
        assert name in embeddings.__all__ and name in attention.__all__, name
    assert attention.RotaryEmbedding.__module__ == "tinytorch.core.attention"


# ================================================================ issue 23: reliability, third pass
# ---------------------------------------------------------------- defect 4: a float mask row of -inf masks every key

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_float_mask_row_of_minus_inf_is_zero_not_nan_like_a_boolean_one(rng, dtype):
    q, k, v = (Tensor(rng.standard_normal(shape), requires_grad=True, dtype=dtype) for shape in ((3, 4), (5, 4), (5, 2)))
    boolean = np.ones((3, 5), bool)
    boolean[1] = False
    boolean[2, :3] = False
    additive = np.where(boolean, 0.0, -np.inf)                 # the same mask written as a float one
    out = scaled_dot_product_attention(q, k, v, attn_mask=additive)
    assert out.dtype == dtype and not np.isnan(out.data).any() and np.all(out.data[1] == 0)
    out.backward(np.ones(out.shape))
    grads = [t.grad.copy() for t in (q, k, v)]
    assert not any(np.isnan(g).any() for g in grads) and np.all(grads[0][1] == 0)
    for t in (q, k, v):
        t.grad = None
    reference = scaled_dot_product_attention(q, k, v, attn_mask=boolean)
    np.testing.assert_array_equal(out.data, reference.data)
    reference.backward(np.ones(reference.shape))
    for ours, expected in zip(grads, (q.grad, k.grad, v.grad)):
        np.testing.assert_allclose(ours, expected, rtol=1e-6, atol=1e-7)


def test_a_broadcast_float_mask_with_a_minus_inf_row_masks_that_row_in_every_batch(rng):
    q, k, v = leaf(rng, 2, 3, 4), leaf(rng, 2, 5, 4), leaf(rng, 2, 5, 2)
    mask = np.zeros((3, 5))
    mask[0] = -np.inf
    out = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert np.all(out.data[:, 0] == 0) and np.isfinite(out.data).all()
    assert gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, attn_mask=mask), [q, k, v])


# ---------------------------------------------------------------- issue 23, second part: flags and sizes

ATTENTION_CALLS = {
    "bias='no'": (lambda: MultiHeadAttention(8, 2, bias="no"), TypeError, "bias must be True or False"),
    "fused_qkv='no'": (lambda: MultiHeadAttention(8, 2, fused_qkv="no"), TypeError, "fused_qkv must be True or False"),
    "causal='no'": (lambda: MultiHeadAttention(8, 2, causal="no"), TypeError, "causal must be True or False"),
    "alibi='no'": (lambda: MultiHeadAttention(8, 2, alibi="no"), TypeError, "alibi must be True or False"),
    "causal_mask(-1, 2)": (lambda: causal_mask(-1, 2), ValueError, "query_len"),
    "causal_mask(2.5, 2)": (lambda: causal_mask(2.5, 2), TypeError, "query_len"),
    "causal_mask(2, -3)": (lambda: causal_mask(2, -3), ValueError, "key_len"),
    "causal_mask(2, 2, offset=0.5)": (lambda: causal_mask(2, 2, offset=0.5), TypeError, "offset"),
    "causal_mask(2, 2, offset='1')": (lambda: causal_mask(2, 2, offset="1"), TypeError, "offset"),
}


@pytest.mark.parametrize("case", ATTENTION_CALLS)
def test_attention_refuses_bad_flags_and_sizes_naming_them(case):
    call, kind, words = ATTENTION_CALLS[case]
    with pytest.raises(kind, match=words):
        call()


def test_causal_mask_takes_zero_and_negative_offsets():
    assert causal_mask(0, 3).shape == (0, 3) and causal_mask(2, 0).shape == (2, 0)
    assert causal_mask(2, 2, offset=-1).tolist() == [[False, False], [True, False]]


def test_rotate_pairs_refuses_a_non_bool_interleaved():
    with pytest.raises(TypeError, match="interleaved must be True or False"):
        RotaryEmbedding(4, interleaved="no")
    from tinytorch.core.attention import rotate_pairs
    with pytest.raises(TypeError, match="interleaved must be True or False"):
        rotate_pairs(np.ones((1, 4)), np.ones((1, 2)), np.zeros((1, 2)), interleaved="no")


# ---------------------------------------------------------------- issue 23, second part: empty sequences

@pytest.mark.parametrize("L, S", [(3, 0), (0, 3), (0, 0)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_attention_over_empty_sequences_matches_pytorch(L, S, is_causal):
    rng = np.random.default_rng(0)
    q = Tensor(rng.standard_normal((2, 2, L, 4)), requires_grad=True)
    k = Tensor(rng.standard_normal((2, 2, S, 4)), requires_grad=True)
    v = Tensor(rng.standard_normal((2, 2, S, 5)), requires_grad=True)
    out = scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    assert out.shape == (2, 2, L, 5) and out.dtype == np.float32 and not out.data.any()   # no keys: 0, as torch
    (out * Tensor(rng.standard_normal(out.shape))).sum().backward()
    assert q.grad.shape == q.shape and not q.grad.any() and k.grad.shape == k.shape


def test_softmax_over_an_empty_axis_is_empty():
    for op in ("softmax", "log_softmax"):
        x = Tensor(np.zeros((3, 0)), requires_grad=True)
        out = getattr(x, op)(axis=-1)
        out.sum().backward()
        assert out.shape == (3, 0) and x.grad.shape == (3, 0)


def test_multi_head_attention_takes_an_empty_sequence():
    attention = MultiHeadAttention(8, 2, seed=0)
    assert attention(Tensor(np.ones((2, 0, 8)))).shape == (2, 0, 8)
    cache = KVCache()
    assert attention(Tensor(np.ones((1, 0, 8))), cache=cache).shape == (1, 0, 8)


@pytest.mark.parametrize("seed", [-1, 1.5, "0"])
def test_attention_refuses_a_bad_seed_naming_it(seed):
    with pytest.raises((TypeError, ValueError), match="seed"):
        MultiHeadAttention(8, 2, seed=seed)


# --- masks, padding, positions and weights (issue 24) ----------------------------------------------------------

from tinytorch.core.attention import merge_masks    # noqa: E402  (the issue-24 exercise)


def test_merge_masks_equals_elementwise_reference(rng):
    "Booleans: a key takes part only if every mask lets it (key_padding_mask True = ignore); any float: sums of 0/-inf."
    causal = np.tril(np.ones((4, 5), bool), k=1)
    own = rng.random((2, 3, 4, 5)) > 0.3
    padding = rng.random((2, 5)) > 0.7
    got = np.broadcast_to(merge_masks(causal, own, key_padding_mask=padding), (2, 3, 4, 5))
    for index in np.ndindex(2, 3, 4, 5):
        b, h, i, j = index
        assert got[index] == (causal[i, j] and own[index] and not padding[b, j])
    bias = rng.standard_normal((3, 4, 5))
    got = np.broadcast_to(merge_masks(causal, bias, key_padding_mask=padding), (2, 3, 4, 5))
    for index in np.ndindex(2, 3, 4, 5):
        b, h, i, j = index
        expected = bias[h, i, j] if causal[i, j] and not padding[b, j] else -np.inf
        assert got[index] == expected
    assert merge_masks() is None and merge_masks(None, None) is None


@pytest.mark.parametrize("options", [dict(), dict(num_kv_heads=2, rope=True), dict(fused_qkv=True, causal=False),
                                     dict(num_kv_heads=1, alibi=True)])
@pytest.mark.parametrize("masks", ["bool", "float", "padding", "bool + float padding"])
def test_masked_multi_head_attention_gradcheck(rng, options, masks):
    options = dict(options, rope=RotaryEmbedding(2, interleaved=False)) if options.get("rope") else options
    mha = float64_copy(MultiHeadAttention(8, 4, seed=0, **options))
    x = leaf(rng, 2, 3, 8)
    attn = padding = None
    if masks in ("bool", "bool + float padding"):
        attn = rng.random((2, 4, 3, 3)) < 0.3                 # nn.MultiheadAttention's convention: True = ignore
    if masks == "float":
        attn = rng.standard_normal((3, 3))
    if masks == "padding":
        padding = np.array([[False, False, True], [True, False, False]])
    if masks == "bool + float padding":
        padding = rng.standard_normal((2, 3))
    assert gradcheck(lambda inp, *params: mha(inp, attn, key_padding_mask=padding), [x] + mha.parameters())


def test_per_head_masks_reach_their_own_head_under_grouped_queries(rng):
    "A (B, H, T, S) mask with 4 query heads in 2 kv groups: each head's weights are 0 exactly where it may not attend."
    mha = MultiHeadAttention(8, 4, num_kv_heads=2, causal=False, seed=0)
    mask = rng.random((2, 4, 3, 3)) > 0.4
    mask[..., 0] = True
    # `mask` says where each head attends; MultiHeadAttention takes nn.MultiheadAttention's True = ignore
    _, weights = mha(Tensor(rng.standard_normal((2, 3, 8))), ~mask, need_weights=True, average_attn_weights=False)
    assert weights.shape == (2, 4, 3, 3)
    assert np.array_equal(weights.data > 0, mask)
    np.testing.assert_allclose(weights.data.sum(-1), 1.0, rtol=1e-6)


def test_averaged_weights_are_the_mean_of_the_per_head_weights(rng):
    mha = MultiHeadAttention(8, 4, num_kv_heads=2, seed=0)
    x = Tensor(rng.standard_normal((2, 5, 8)))
    out_mean, averaged = mha(x, need_weights=True)
    out_heads, per_head = mha(x, need_weights=True, average_attn_weights=False)
    assert averaged.shape == (2, 5, 5) and per_head.shape == (2, 4, 5, 5)
    np.testing.assert_allclose(averaged.data, per_head.data.mean(axis=1), rtol=1e-6)
    np.testing.assert_array_equal(out_mean.data, out_heads.data)
    np.testing.assert_array_equal(out_mean.data, mha(x).data)
    assert np.all(np.triu(per_head.data[0, 0], k=1) == 0), "the causal mask shows in the weights"


@pytest.mark.parametrize("rope", ["half", "interleaved"])
def test_left_padding_with_positions_equals_each_row_alone(rng, rope):
    "key_padding_mask + token_positions counted from the first real token: padded rows give each sequence's own output."
    mha = float64_copy(MultiHeadAttention(8, 2, rope=RotaryEmbedding(4, interleaved=rope == "interleaved"), seed=4))
    lengths = [5, 2, 3]
    x = rng.standard_normal((3, 5, 8))
    padding = np.arange(5)[None, :] < (5 - np.array(lengths))[:, None]           # left padding, True = pad
    positions = np.maximum(np.cumsum(~padding, axis=1) - 1, 0)
    out = mha(Tensor(x), key_padding_mask=padding, token_positions=positions).data
    for row, n in enumerate(lengths):
        alone = mha(Tensor(x[row:row + 1, 5 - n:])).data[0]
        np.testing.assert_allclose(out[row, 5 - n:], alone, atol=1e-12)


def test_token_positions_equal_the_default_positions_and_continue_after_a_cache(rng):
    mha = MultiHeadAttention(8, 2, num_kv_heads=1, rope=RotaryEmbedding(4), seed=5)
    x = Tensor(rng.standard_normal((2, 6, 8)))
    full = mha(x).data
    np.testing.assert_array_equal(mha(x, token_positions=np.arange(6)).data, full)
    np.testing.assert_array_equal(mha(x, token_positions=np.tile(np.arange(6), (2, 1))).data, full)
    shifted = mha(x, token_positions=np.arange(6) + 7).data
    np.testing.assert_allclose(shifted, full, atol=1e-5)            # RoPE scores depend only on distances
    cache = KVCache()
    with no_grad():
        first = mha(x[:, :4], cache=cache).data
        last = mha(x[:, 4:], cache=cache, token_positions=np.array([4, 5])).data
    np.testing.assert_allclose(np.concatenate([first, last], axis=1), full, atol=1e-6)


def test_key_padding_mask_covers_cached_keys(rng):
    "With a cache, the key padding mask spans every key, cached and new (Hugging Face's attention_mask over the past)."
    mha = MultiHeadAttention(8, 2, seed=6)
    x = Tensor(rng.standard_normal((1, 4, 8)))
    padding = np.array([[True, False, False, False]])
    full = mha(x, key_padding_mask=padding).data
    cache = KVCache()
    with no_grad():
        head = mha(x[:, :3], key_padding_mask=padding[:, :3], cache=cache).data
        tail = mha(x[:, 3:], key_padding_mask=padding, cache=cache).data
    np.testing.assert_allclose(np.concatenate([head, tail], axis=1), full, atol=1e-6)


def test_a_cache_passed_where_the_mask_goes_is_refused():
    "Issue 24: `mha(x, mask)` once read the mask as the KV cache; the cache is keyword-only now."
    mha = MultiHeadAttention(8, 2, seed=0)
    cache = KVCache()
    with pytest.raises(TypeError, match=r"second argument .* is attn_mask; got a KVCache: pass the cache by name"):
        mha(np.ones((1, 2, 8)), cache)
    assert cache.length == 0
    with pytest.raises(TypeError, match="cache must be a KVCache or None"):
        mha(np.ones((1, 2, 8)), cache=np.ones((2, 2)))


def test_embed_dim_is_accepted_as_in_pytorch():
    a, b = MultiHeadAttention(embed_dim=8, num_heads=2, seed=0), MultiHeadAttention(8, 2, seed=0)
    assert a.d_model == a.embed_dim == 8
    assert [p.shape for p in a.parameters()] == [p.shape for p in b.parameters()]
    with pytest.raises(TypeError, match=r"got both d_model=8 and embed_dim=8"):
        MultiHeadAttention(8, 2, embed_dim=8)
    with pytest.raises(TypeError, match=r"missing required argument d_model \(or its alias embed_dim\)"):
        MultiHeadAttention(num_heads=2)


# --- the exercises one at a time, against plain NumPy (so a wrong one is named alone) --------------------------

from tinytorch.core.attention import alibi_bias, alibi_slopes    # noqa: E402


def masked_softmax_reference(scores, allowed):
    "softmax over the allowed keys, per row; a row with no allowed key is 0."
    out = np.zeros_like(scores)
    for index in np.ndindex(scores.shape[:-1]):
        keep = np.broadcast_to(allowed, scores.shape)[index]
        if keep.any():
            e = np.exp(scores[index][keep] - scores[index][keep].max())
            out[index][keep] = e / e.sum()
    return out


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("empty", ["one empty row", "no empty row", "every row empty in one batch"])
def test_attention_weights_are_a_softmax_over_the_allowed_keys(rng, kind, empty):
    scores = rng.standard_normal((2, 3, 4))
    allowed = rng.random((2, 3, 4)) > 0.4
    allowed[..., 2] = True
    if empty == "one empty row":
        allowed[0, 1] = False
    elif empty == "every row empty in one batch":
        allowed[1] = False
    mask = allowed if kind == "bool" else np.where(allowed, 0.0, -np.inf)
    weights = attention_weights(Tensor(scores), mask).data
    expected = masked_softmax_reference(scores, allowed)
    assert np.allclose(weights, expected, atol=1e-12)


@pytest.mark.parametrize("offset", [0, 3])
def test_alibi_bias_is_minus_slope_times_distance_from_the_query_position(offset):
    heads, L, S = 4, 2, 5
    bias = alibi_bias(heads, L, S, offset=offset, dtype=np.float64)
    expected = np.array([[[-m * abs(i + offset - j) for j in range(S)] for i in range(L)]
                         for m in [2.0 ** (-8 * h / heads) for h in range(1, heads + 1)]])
    assert np.allclose(bias, expected)


def test_alibi_attention_decoded_with_a_cache_equals_the_full_pass(rng):
    mha = MultiHeadAttention(8, 2, alibi=True, seed=1)
    x = Tensor(rng.standard_normal((1, 5, 8)))
    full = mha(x).data
    cache = KVCache()
    with no_grad():
        parts = [mha(x[:, :2], cache=cache).data] + [mha(x[:, t:t + 1], cache=cache).data for t in range(2, 5)]
    assert np.allclose(np.concatenate(parts, axis=1), full, atol=1e-6)


@pytest.mark.parametrize("query_len, key_len, offset", [(1, 1, 0), (4, 4, 0), (3, 6, 3), (2, 5, 1), (4, 3, -1)])
def test_causal_mask_lets_query_i_see_keys_up_to_and_including_i_plus_offset(query_len, key_len, offset):
    expected = np.array([[j <= i + offset for j in range(key_len)] for i in range(query_len)])
    mask = causal_mask(query_len, key_len, offset=offset)
    assert np.array_equal(mask, expected)


def test_a_boolean_attn_mask_means_ignore_as_in_nn_multihead_attention_and_a_float_one_is_added(rng):
    "MultiHeadAttention follows nn.MultiheadAttention (True = do not attend), not scaled_dot_product_attention."
    mha = MultiHeadAttention(8, 2, causal=False, seed=0)
    x = Tensor(rng.standard_normal((1, 3, 8)))
    ignore = np.array([[False, True, True], [False, False, True], [True, False, False]])
    _, weights = mha(x, ignore, need_weights=True)
    assert np.array_equal(weights.data[0] == 0, ignore), weights.data[0]
    _, same = mha(x, np.where(ignore, -np.inf, 0.0), need_weights=True)      # the float mask that says the same
    np.testing.assert_allclose(same.data, weights.data, rtol=1e-12)
