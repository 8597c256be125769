"""Module 12 against PyTorch: scaled_dot_product_attention forward and gradients (masks, causal, fully masked
rows, grouped-query heads) and multi-head attention with RoPE against a PyTorch re-implementation."""
import numpy as np
import pytest

from tinytorch.core.attention import MultiHeadAttention, scaled_dot_product_attention
from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import RotaryEmbedding

pytestmark = pytest.mark.torch


def both(rng, *shape):
    import torch
    array = rng.standard_normal(shape)
    return Tensor(array, requires_grad=True, dtype=np.float64), torch.tensor(array, requires_grad=True)


def assert_same_outputs_and_grads(torch, rng, ours, theirs, inputs):
    "Same output, then the same gradient for every (our input, PyTorch's input) pair after one random upstream."
    assert np.allclose(ours.data, theirs.detach().numpy(), atol=1e-10)
    upstream = rng.standard_normal(ours.shape)
    ours.backward(upstream)
    theirs.backward(torch.tensor(upstream))
    for mine, reference in inputs:
        assert np.allclose(mine.grad, reference.grad.numpy(), atol=1e-10)


def masks(rng, case):
    import torch
    if case == "bool":
        mask = rng.random((4, 6)) > 0.5
        mask[:, 0] = True
    elif case == "empty_row":
        mask = rng.random((4, 6)) > 0.5
        mask[2] = False
    elif case == "float":
        mask = rng.standard_normal((2, 1, 4, 6))
    else:
        return None, None
    return mask, torch.tensor(mask)


@pytest.mark.parametrize("case", ["plain", "bool", "empty_row", "float", "causal", "scale"])
def test_sdpa_forward_and_gradients_match_pytorch(torch, rng, case):
    import torch.nn.functional as F
    (q, tq), (k, tk), (v, tv) = both(rng, 2, 3, 4, 8), both(rng, 2, 3, 6, 8), both(rng, 2, 3, 6, 5)
    mask, tmask = masks(rng, case)
    causal, scale = case == "causal", 0.7 if case == "scale" else None
    if causal:                                            # PyTorch's is_causal is top-left aligned: L = S here
        (k, tk), (v, tv) = both(rng, 2, 3, 4, 8), both(rng, 2, 3, 4, 5)
    ours = scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale)
    theirs = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask, is_causal=causal, scale=scale)
    assert_same_outputs_and_grads(torch, rng, ours, theirs, ((q, tq), (k, tk), (v, tv)))


def test_grouped_query_heads_match_pytorch_enable_gqa(torch, rng):
    import torch.nn.functional as F
    (q, tq), (k, tk), (v, tv) = both(rng, 2, 6, 5, 4), both(rng, 2, 2, 5, 4), both(rng, 2, 2, 5, 3)
    theirs = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True, enable_gqa=True)      # (2, 6, 5, 3)
    grouped = scaled_dot_product_attention(q.reshape(2, 2, 3, 5, 4), k.reshape(2, 2, 1, 5, 4), v.reshape(2, 2, 1, 5, 3),
                                           is_causal=True).reshape(2, 6, 5, 3)
    assert_same_outputs_and_grads(torch, rng, grouped, theirs, ((q, tq), (k, tk), (v, tv)))


def rotate_half(x):
    half = x.shape[-1] // 2
    import torch
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def torch_attention(torch, mha, x, base):
    "Hugging Face LLaMA's attention, written out in PyTorch: rotate_half RoPE, repeat_kv, causal softmax."
    import torch.nn.functional as F
    B, T, _ = x.shape
    H, Hkv, D = mha.num_heads, mha.num_kv_heads, mha.head_dim
    weight = {name: torch.tensor(getattr(mha, name).weight.data.astype(np.float64), requires_grad=True)
              for name in ("q_proj", "k_proj", "v_proj", "o_proj")}
    q = (x @ weight["q_proj"]).view(B, T, H, D).transpose(1, 2)
    k = (x @ weight["k_proj"]).view(B, T, Hkv, D).transpose(1, 2)
    v = (x @ weight["v_proj"]).view(B, T, Hkv, D).transpose(1, 2)
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq
    emb = torch.cat((angles, angles), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, H * D)
    return out @ weight["o_proj"], weight


def test_llama_style_attention_matches_pytorch_forward_and_gradients(torch, rng):
    mha = MultiHeadAttention(16, 4, num_kv_heads=2, bias=False, rope=RotaryEmbedding(4, base=500.0, interleaved=False),
                             seed=0)
    for p in mha.parameters():
        p.data = p.data.astype(np.float64)
    x, tx = both(rng, 2, 6, 16)
    ours = mha(x)
    theirs, weight = torch_attention(torch, mha, tx, base=500.0)
    assert np.allclose(ours.data, theirs.detach().numpy(), atol=1e-10)
    upstream = rng.standard_normal(ours.shape)
    ours.backward(upstream)
    theirs.backward(torch.tensor(upstream))
    assert np.allclose(x.grad, tx.grad.numpy(), atol=1e-10)
    for name, tensor in weight.items():
        assert np.allclose(getattr(mha, name).weight.grad, tensor.grad.numpy(), atol=1e-10)


# ================================================================ issue 23: reliability, third pass
# ---------------------------------------------------------------- defect 4: a float mask row of -inf, as PyTorch

@pytest.mark.parametrize("rows", ["one row", "every row of one batch", "partly -inf"])
def test_a_float_mask_of_minus_inf_rows_matches_pytorch_values_and_gradients(torch, rng, rows):
    import torch.nn.functional as F
    (q, tq), (k, tk), (v, tv) = both(rng, 2, 3, 4, 8), both(rng, 2, 3, 6, 8), both(rng, 2, 3, 6, 5)
    mask = rng.standard_normal((2, 1, 4, 6))
    if rows == "one row":
        mask[0, 0, 2] = -np.inf
    elif rows == "every row of one batch":
        mask[1] = -np.inf
    else:
        mask[:, :, 1, :4] = -np.inf
    ours = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    theirs = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.tensor(mask))
    assert not np.isnan(ours.data).any()
    assert_same_outputs_and_grads(torch, rng, ours, theirs, ((q, tq), (k, tk), (v, tv)))
