"""Parity of tinytorch.text.embeddings with PyTorch (skipped when torch is not installed; pip install torch==2.13.0).

Embedding outputs and gradients against torch.nn.functional.embedding for padding_idx, max_norm,
scale_grad_by_freq and sparse=True; RoPE against Meta's complex-number formulation (interleaved) and
Hugging Face's rotate_half (half-split), both written here in torch."""
import numpy as np
import pytest

from tinytorch.core.autograd import RowSparseGrad
from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import Embedding, RotaryEmbedding

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("both_kernels")]   # plain and fast kernels


def torch_embedding_grad(torch, table, ids, upstream, **options):
    weight = torch.tensor(table, requires_grad=True)
    out = torch.nn.functional.embedding(torch.tensor(ids), weight, **options)
    out.backward(torch.tensor(upstream))
    grad = weight.grad.coalesce().to_dense() if weight.grad.is_sparse else weight.grad
    return out.detach().numpy(), grad.numpy(), weight.detach().numpy()


def ours(table, ids, upstream, **options):
    emb = Embedding.from_pretrained(table, freeze=False, **options)
    out = emb(ids)
    out.backward(upstream)
    grad = emb.weight.grad.to_dense() if isinstance(emb.weight.grad, RowSparseGrad) else emb.weight.grad
    return out.data, grad, emb.weight.data


@pytest.mark.parametrize("options", [
    dict(),
    dict(padding_idx=3),
    dict(padding_idx=-1),
    dict(scale_grad_by_freq=True),
    dict(scale_grad_by_freq=True, padding_idx=0),
    dict(sparse=True),
    dict(sparse=True, padding_idx=2),
    dict(max_norm=1.0),
    dict(max_norm=0.5, norm_type=1.0, padding_idx=1),
], ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "plain")
def test_outputs_gradients_and_renormalised_tables_match_pytorch(torch, options):
    rng = np.random.default_rng(0)
    table = rng.standard_normal((12, 5))                   # norms around 2: max_norm rescales most rows
    ids = rng.integers(0, 12, size=(4, 9))
    ids[0, :4] = [3, 11, 0, 2]                              # every padding index in the cases occurs
    upstream = rng.standard_normal((4, 9, 5))
    theirs = torch_embedding_grad(torch, table, ids, upstream, **options)
    mine = ours(table, ids, upstream, **options)
    for name, a, b in zip(("output", "gradient", "table after forward"), mine, theirs):
        assert np.allclose(a, b, atol=1e-6), name


def test_sparse_with_scale_grad_by_freq_equals_pytorchs_dense_result(torch):
    """PyTorch refuses this pair (a TODO in its C++); it is well defined and tinytorch supports it."""
    rng = np.random.default_rng(1)
    table, ids, upstream = rng.standard_normal((10, 3)), rng.integers(0, 10, (3, 8)), rng.standard_normal((3, 8, 3))
    with pytest.raises(RuntimeError, match="scale_grad_by_freq not supported with sparse"):
        torch_embedding_grad(torch, table, ids, upstream, scale_grad_by_freq=True, sparse=True)
    _, dense_grad, _ = torch_embedding_grad(torch, table, ids, upstream, scale_grad_by_freq=True)
    _, sparse_grad, _ = ours(table, ids, upstream, scale_grad_by_freq=True, sparse=True)
    assert np.allclose(sparse_grad, dense_grad, atol=1e-12)


def test_from_pretrained_padding_row_keeps_its_values_like_pytorch(torch):
    table = np.arange(8.0).reshape(4, 2)
    theirs = torch.nn.Embedding.from_pretrained(torch.tensor(table), padding_idx=1).weight.detach().numpy()
    assert np.array_equal(Embedding.from_pretrained(table, padding_idx=1).weight.data, theirs)


def test_tied_head_gradient_matches_pytorch(torch):
    rng = np.random.default_rng(2)
    table, ids, upstream = rng.standard_normal((7, 4)), np.array([[1, 2, 2, 6]]), rng.standard_normal((1, 4, 7))
    weight = torch.tensor(table, requires_grad=True)
    hidden = torch.nn.functional.embedding(torch.tensor(ids), weight).tanh()
    torch.nn.functional.linear(hidden, weight).backward(torch.tensor(upstream))
    emb = Embedding.from_pretrained(table, freeze=False)
    emb.attend(emb(ids).tanh()).backward(upstream)
    assert np.allclose(emb.weight.grad, weight.grad.numpy(), atol=1e-12)


def meta_llama_rope(torch, x, positions, base=10000.0):
    "Interleaved RoPE as in Meta's LLaMA code: pairs viewed as complex numbers times exp(i m theta)."
    dim = x.shape[-1]
    theta = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    rotations = torch.polar(torch.ones(len(positions), dim // 2, dtype=torch.float64),
                            torch.outer(torch.tensor(positions, dtype=torch.float64), theta))
    pairs = torch.view_as_complex(torch.tensor(x).reshape(*x.shape[:-1], dim // 2, 2).contiguous())
    return torch.view_as_real(pairs * rotations).flatten(-2).numpy()


def hugging_face_rope(torch, x, positions, base=10000.0):
    "Half-split RoPE as in Hugging Face: x * cos + rotate_half(x) * sin with frequencies repeated twice."
    dim = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    angles = torch.outer(torch.tensor(positions, dtype=torch.float64), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    x = torch.tensor(x)
    rotate_half = torch.cat((-x[..., dim // 2:], x[..., : dim // 2]), dim=-1)
    return (x * angles.cos() + rotate_half * angles.sin()).numpy()


@pytest.mark.parametrize("interleaved", [True, False])
def test_rope_layouts_match_the_llama_and_hugging_face_formulations(torch, interleaved):
    rng = np.random.default_rng(3)
    x, positions = rng.standard_normal((2, 6, 8)), [0, 5, 1, 1, 4000, 17]
    reference = (meta_llama_rope if interleaved else hugging_face_rope)(torch, x, positions)
    rope = RotaryEmbedding(8, max_seq_len=16, interleaved=interleaved)
    assert np.allclose(rope(Tensor(x, dtype=np.float64), positions=positions).data, reference, atol=1e-10)
