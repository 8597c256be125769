"""Buffers are listed, saved and loaded but are not parameters, so they never reach an optimiser (issue 15,
defect 4). Here, with module 06, because it builds an optimiser; the rest of the buffer tests and the
`WithBuffers` module: tests/layers/test_buffers.py."""
import numpy as np

from tests.layers.test_buffers import WithBuffers
from tinytorch.core.optimizers import SGD
from tinytorch.core.tensor import Tensor


def test_buffers_are_listed_saved_and_loaded_but_are_not_parameters():
    model = WithBuffers()
    assert [name for name, _ in model.named_buffers()] == ["counts", "cache", "inner.mask"]
    assert [b.dtype for b in model.buffers()] == [np.int64, np.float64, np.bool_]
    assert [name for name, _ in model.named_parameters()] == ["weight", "inner.weight", "inner.bias"]
    assert list(model.state_dict()) == ["weight", "inner.weight", "inner.bias", "counts", "inner.mask"]
    model.counts[...] = [4, 5, 6]
    model.inner.mask[...] = [False, True]
    other = WithBuffers()
    counts_array = other.counts
    other.load_state_dict(model.state_dict())
    assert other.counts is counts_array and other.counts.tolist() == [4, 5, 6]
    assert other.inner.mask.tolist() == [False, True]
    SGD(model.parameters(), lr=1.0)                           # buffers never reach an optimiser
    assert all(not isinstance(b, Tensor) for b in model.buffers())
