"""Regression tests of RoPE (module 12) named after real upstream bugs in Hugging Face transformers.

Each test reproduces the situation of one reported bug with tinytorch and checks that we do the right
thing; its docstring cites the issue, so a reader sees what it guards. Expected numbers are derived
here from the definitions, not copied from our own output.
"""
import numpy as np

from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import RotaryEmbedding


def _rotate(x, position, interleaved, base=10000.0):
    "RoPE written out from its definition: pairs (a, b) -> (a cos - b sin, a sin + b cos) at angle position * theta_i."
    d = len(x)
    theta = base ** (-np.arange(0, d, 2) / d)
    cos, sin = np.cos(position * theta), np.sin(position * theta)
    first, second = (np.arange(0, d, 2), np.arange(1, d, 2)) if interleaved else (np.arange(d // 2), np.arange(d // 2, d))
    out = np.empty(d)
    out[first] = x[first] * cos - x[second] * sin
    out[second] = x[first] * sin + x[second] * cos
    return out


def test_rope_interleaved_and_half_split_are_different_layouts():
    """transformers #25199: Hugging Face's LLaMA rotates half-split pairs (x_i, x_{i+d/2}) (`rotate_half`, GPT-NeoX
    style) while Meta's code rotates interleaved pairs (x0, x1), (x2, x3) (GPT-J style); the weights are permuted at
    conversion. The two layouts must each match their definition and must differ, so using the wrong one is visible.
    x = [1, 2, 3, 4] at position 1 (theta = [1, 0.01])."""
    x = np.array([1.0, 2.0, 3.0, 4.0])
    interleaved = RotaryEmbedding(4, interleaved=True)(Tensor(x[None, :], dtype=np.float64), positions=[1]).data[0]
    half_split = RotaryEmbedding(4, interleaved=False)(Tensor(x[None, :], dtype=np.float64), positions=[1]).data[0]
    np.testing.assert_allclose(interleaved, _rotate(x, 1, interleaved=True), rtol=1e-12)
    np.testing.assert_allclose(half_split, _rotate(x, 1, interleaved=False), rtol=1e-12)
    cos, sin = np.cos(np.tile([1.0, 0.01], 2)), np.sin(np.tile([1.0, 0.01], 2))       # transformers' formula
    rotate_half = np.concatenate([-x[2:], x[:2]])
    np.testing.assert_allclose(half_split, x * cos + rotate_half * sin, rtol=1e-12)
    assert np.abs(interleaved - half_split).max() > 0.4
