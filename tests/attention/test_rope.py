"""Behaviour of rotary position embeddings (RotaryEmbedding, rotate_pairs; module 12, imported from
tinytorch.text.embeddings, where module 11 re-exports them): reference vectors for both layouts, scores that
depend only on the offset, explicit rotation matrices, broadcasting over heads, the cache, gradients, and
bad inputs."""
import math

import numpy as np
import pytest

from tinytorch.core.autograd import gradcheck
from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import RotaryBackward, RotaryEmbedding, rotate_pairs

F64 = np.float64


def rotation_reference(x, positions, base=10000.0, interleaved=True):
    """RoPE written from the definition, pair by pair, with explicit 2x2 rotation matrices (slow, obvious)."""
    x, out = np.asarray(x, F64), np.empty(np.shape(x))
    dim = x.shape[-1]
    positions = np.broadcast_to(positions, x.shape[:-1])
    for index in np.ndindex(x.shape[:-1]):
        for i in range(dim // 2):
            a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + dim // 2)
            angle = positions[index] * base ** (-2 * i / dim)
            rotation = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
            out[index + (a,)], out[index + (b,)] = rotation @ [x[index + (a,)], x[index + (b,)]]
    return out


def test_rope_reference_vectors_for_both_layouts():
    x = Tensor([[1.0, 2.0, 3.0, 4.0]], dtype=F64)
    assert np.allclose(RotaryEmbedding(4)(x, positions=[1]).data,
                       [[-1.1426397, 1.9220756, 2.9598507, 4.0297995]], atol=1e-7)
    assert np.allclose(RotaryEmbedding(4, interleaved=False)(x, positions=[1]).data,
                       [[-1.9841106, 1.9599007, 2.4623779, 4.0197997]], atol=1e-7)


@pytest.mark.parametrize("m, n", [(5, 3), (2, 0), (1000, 998), (0, -2), (3000, 2998)])
def test_rope_scores_depend_only_on_the_offset(m, n):
    rope = RotaryEmbedding(4, max_seq_len=16)
    q, k = Tensor([[0.1, 0.2, 0.3, 0.4]], dtype=F64), Tensor([[0.5, -0.6, 0.7, 0.8]], dtype=F64)
    score = float(rope(q, positions=[m]).data[0] @ rope(k, positions=[n]).data[0])
    assert score == pytest.approx(0.4127367, abs=1e-7)


@pytest.mark.parametrize("interleaved", [True, False])
def test_rope_matches_explicit_rotation_matrices_for_arbitrary_positions(interleaved, rng):
    rope = RotaryEmbedding(6, max_seq_len=4, base=500.0, interleaved=interleaved)
    x = rng.standard_normal((2, 5, 6))
    positions = np.array([[7, 0, 7, 2, -3], [1, 1, 1, 12, 0]])
    assert np.allclose(rope(Tensor(x, dtype=F64), positions=positions).data,
                       rotation_reference(x, positions, base=500.0, interleaved=interleaved), atol=1e-12)


def test_rope_default_positions_norms_identity_and_dtype(rng):
    rope = RotaryEmbedding(8)
    x = rng.standard_normal((3, 6, 8)).astype(np.float32)
    out = rope(x)
    assert out.shape == x.shape and out.dtype == np.float32
    assert np.allclose(out.data, rotation_reference(x, np.arange(6)), atol=1e-5)
    assert np.allclose(np.linalg.norm(out.data, axis=-1), np.linalg.norm(x, axis=-1), atol=1e-5)
    assert np.array_equal(out.data[:, 0], x[:, 0])
    assert rope.parameters() == [] and rope.state_dict() == {}


def test_rope_positions_broadcast_over_heads(rng):
    rope = RotaryEmbedding(4)
    x = rng.standard_normal((2, 3, 5, 4))                        # (batch, heads, seq, dim)
    positions = np.array([[[0, 1, 2, 3, 4]], [[10, 11, 12, 13, 14]]])   # (batch, 1, seq)
    out = rope(Tensor(x, dtype=F64), positions=positions).data
    assert np.allclose(out, rotation_reference(x, positions))
    assert np.allclose(rope(Tensor(x, dtype=F64), positions=np.arange(5)).data, rotation_reference(x, np.arange(5)))


def test_negative_positions_rotate_backwards(rng):
    rope = RotaryEmbedding(6)
    x = Tensor(rng.standard_normal((1, 4, 6)), dtype=F64)
    positions = np.array([3, 8, 0, 2])
    assert np.allclose(rope(rope(x, positions=positions), positions=-positions).data, x.data, atol=1e-12)


def test_rope_cache_grows_on_demand_without_changing_values(rng):
    small, large = RotaryEmbedding(4, max_seq_len=2), RotaryEmbedding(4, max_seq_len=100)
    x = Tensor(rng.standard_normal((1, 3, 4)), dtype=F64)
    positions = [50, 1, 73]
    assert np.allclose(small(x, positions=positions).data, large(x, positions=positions).data, atol=1e-12)
    assert small.max_seq_len == 2 and len(small.cos_sin(np.array([0]))[0]) == 1


@pytest.mark.parametrize("interleaved", [True, False])
def test_rope_gradcheck_with_unsorted_repeated_negative_and_long_positions(interleaved, rng):
    rope = RotaryEmbedding(6, max_seq_len=4, interleaved=interleaved)
    x = Tensor(rng.standard_normal((2, 5, 6)), requires_grad=True, dtype=F64)
    positions = np.array([[9, 0, 9, 2, -3], [4, 4, 1, 100, 0]])
    assert gradcheck(lambda x: rope(x, positions=positions), [x])
    out = rope(x, positions=positions)
    assert isinstance(out._grad_fn, RotaryBackward)


def test_rope_gradcheck_through_attention_scores(rng):
    "Rotate queries and keys, score them, softmax: the way attention uses RoPE."
    rope = RotaryEmbedding(4)
    q = Tensor(rng.standard_normal((3, 4)), requires_grad=True, dtype=F64)
    k = Tensor(rng.standard_normal((3, 4)), requires_grad=True, dtype=F64)
    assert gradcheck(lambda q, k: (rope(q) @ rope(k).T).softmax(axis=-1), [q, k])


def test_rotate_pairs_backward_is_the_inverse_rotation(rng):
    angles = rng.standard_normal((5, 3))
    x = rng.standard_normal((5, 6))
    for interleaved in (True, False):
        rotated = rotate_pairs(x, np.cos(angles), np.sin(angles), interleaved)
        assert np.allclose(rotate_pairs(rotated, np.cos(angles), -np.sin(angles), interleaved), x)


def test_rope_bad_inputs():
    with pytest.raises(ValueError, match="dim must be even; got dim=5"):
        RotaryEmbedding(5)
    with pytest.raises(ValueError, match="dim must be a positive int; got 0"):
        RotaryEmbedding(0)
    rope = RotaryEmbedding(4)
    with pytest.raises(ValueError, match=r"positions of shape \(3,\) do not broadcast to x.shape\[:-1\] = \(2, 5\)"):
        rope(np.zeros((2, 5, 4)), positions=[0, 1, 2])
    with pytest.raises(ValueError, match=r"positions of shape \(2, 5\) do not broadcast to x.shape\[:-1\] = \(5,\)"):
        rope(np.zeros((5, 4)), positions=np.zeros((2, 5), dtype=np.int64))
    with pytest.raises(TypeError, match="positions must be integers; got dtype float64"):
        rope(np.zeros((2, 4)), positions=[0.0, 1.0])
    with pytest.raises(TypeError, match="got dtype bool"):
        rope(np.zeros((2, 4)), positions=[True, False])
    with pytest.raises(ValueError, match=r"shape \(\*, seq, 4\); got \(2, 6\)"):
        rope(np.zeros((2, 6)))
    with pytest.raises(ValueError, match="no sequence axis"):
        rope(np.zeros(4))
    assert rope(np.ones(4), positions=2).shape == (4,)
    assert repr(rope) == "RotaryEmbedding(dim=4, max_seq_len=2048, base=10000.0, interleaved=True)"
