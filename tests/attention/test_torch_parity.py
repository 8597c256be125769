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


# ================================================================ issue 24: masks, padding, need_weights (nn.MultiheadAttention)

def mha_pair(torch, rng, embed_dim=8, num_heads=2):
    """Our fused MultiHeadAttention (no causal mask, float64) and a torch.nn.MultiheadAttention with the same weights.

    PyTorch's in_proj_weight (3E, E) and out_proj.weight (E, E) are (out, in): ours are their transposes."""
    ours = MultiHeadAttention(embed_dim=embed_dim, num_heads=num_heads, fused_qkv=True, causal=False, seed=1)
    for p in ours.parameters():
        p.data = p.data.astype(np.float64)
        p.data[...] = rng.standard_normal(p.shape) * 0.5
    theirs = torch.nn.MultiheadAttention(embed_dim, num_heads, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.tensor(ours.c_attn.weight.data.T))
        theirs.in_proj_bias.copy_(torch.tensor(ours.c_attn.bias.data))
        theirs.out_proj.weight.copy_(torch.tensor(ours.c_proj.weight.data.T))
        theirs.out_proj.bias.copy_(torch.tensor(ours.c_proj.bias.data))
    return ours, theirs


def mha_masks(torch, rng, case, B=2, H=2, T=4):
    """(our attn_mask, our key_padding_mask), (PyTorch's attn_mask, key_padding_mask) for one case.

    Boolean masks have nn.MultiheadAttention's convention in both (True = ignore, attn_mask and key padding mask
    alike); a per-head mask is (B·H, T, S) there, (B, H, T, S) here."""
    attn = padding = None
    if case in ("bool", "bool + padding"):
        attn = rng.random((T, T)) < 0.4                         # True = ignore
        attn[:, 0] = False                                      # no query without a key (PyTorch would give NaN)
    if case in ("float per head", "float + padding"):
        attn = rng.standard_normal((B, H, T, T))
    if case in ("padding", "bool + padding", "float + padding"):
        padding = np.array([[False, False, True, True], [False, True, False, True]])
    if case == "float padding":
        padding = rng.standard_normal((B, T))
    torch_attn = None if attn is None else torch.tensor(attn if attn.dtype == bool else attn.reshape(B * H, T, T))
    torch_padding = None if padding is None else torch.tensor(padding)
    return (attn, padding), (torch_attn, torch_padding)


@pytest.mark.parametrize("case", ["bool", "float per head", "padding", "float padding", "bool + padding",
                                  "float + padding"])
@pytest.mark.parametrize("average", [True, False])
@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")   # PyTorch on a float + bool pair
def test_masked_multi_head_attention_matches_nn_multihead_attention(torch, rng, case, average):
    mha, reference = mha_pair(torch, rng)
    (attn, padding), (tattn, tpadding) = mha_masks(torch, rng, case)
    x, tx = both(rng, 2, 4, 8)
    out, weights = mha(x, attn, key_padding_mask=padding, need_weights=True, average_attn_weights=average)
    tout, tweights = reference(tx, tx, tx, attn_mask=tattn, key_padding_mask=tpadding, need_weights=True,
                               average_attn_weights=average)
    assert weights.shape == tuple(tweights.shape) == ((2, 4, 4) if average else (2, 2, 4, 4))
    assert np.allclose(weights.data, tweights.detach().numpy(), atol=1e-10)
    assert_same_outputs_and_grads(torch, rng, out, tout, [(x, tx)])
    assert np.allclose(mha.c_attn.weight.grad, reference.in_proj_weight.grad.numpy().T, atol=1e-10)
    assert np.allclose(mha.c_proj.weight.grad, reference.out_proj.weight.grad.numpy().T, atol=1e-10)


def test_need_weights_gradient_matches_pytorch(torch, rng):
    "The returned weights are part of the graph: a loss on them back-propagates as in PyTorch."
    mha, reference = mha_pair(torch, rng)
    (_, padding), (_, tpadding) = mha_masks(torch, rng, "padding")
    x, tx = both(rng, 2, 4, 8)
    _, weights = mha(x, key_padding_mask=padding, need_weights=True, average_attn_weights=False)
    _, tweights = reference(tx, tx, tx, key_padding_mask=tpadding, need_weights=True, average_attn_weights=False)
    assert_same_outputs_and_grads(torch, rng, weights, tweights, [(x, tx)])


def test_causal_plus_padding_matches_sdpa_with_the_combined_mask(torch, rng):
    "Our causal MultiHeadAttention with a key padding mask = PyTorch's SDPA given causal & not-padding by hand."
    import torch.nn.functional as F
    mha = MultiHeadAttention(8, 2, bias=False, seed=2)
    for p in mha.parameters():
        p.data = p.data.astype(np.float64)
    x, tx = both(rng, 2, 5, 8)
    padding = np.array([[True, True, False, False, False], [False, False, False, False, True]])
    allowed = np.tril(np.ones((5, 5), bool))[None, None] & ~padding[:, None, None, :]
    allowed[0, :, :2, 0] = True       # PyTorch's SDPA gives NaN for a query with no key; those rows are ours' zeros
    weights = {n: torch.tensor(getattr(mha, n).weight.data) for n in ("q_proj", "k_proj", "v_proj", "o_proj")}
    q, k, v = ((tx @ weights[n]).view(2, 5, 2, 4).transpose(1, 2) for n in ("q_proj", "k_proj", "v_proj"))
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(allowed))
    theirs = theirs.transpose(1, 2).reshape(2, 5, 8) @ weights["o_proj"]
    ours = mha(x, key_padding_mask=padding)
    assert np.allclose(ours.data[0, :2], 0.0), "a query whose every key is masked gets 0 (no NaN)"
    assert np.allclose(ours.data[0, 2:], theirs.detach().numpy()[0, 2:], atol=1e-10)
    assert np.allclose(ours.data[1], theirs.detach().numpy()[1], atol=1e-10)
