"""Buffers (issue 15, defect 4): `register_buffer` keeps arrays that are state but not parameters (persistent or
not), listed by `named_buffers`, saved and loaded by `state_dict` and checkpoints, and checked all or nothing on
load. That buffers never reach an optimiser: tests/optimizers/test_buffers.py."""
import numpy as np
import pytest

from tinytorch.core import checkpoint
from tinytorch.core.layers import Linear, Module, Parameter
from tinytorch.core.tensor import Tensor


class WithBuffers(Module):
    "A parameter, a persistent integer buffer, a non-persistent cache and a sub-module with its own buffer."

    def __init__(self):
        self.weight = Parameter(np.ones(3))
        self.register_buffer("counts", np.zeros(3, dtype=np.int64))
        self.register_buffer("cache", np.ones(2), persistent=False)
        self.inner = Linear(3, 2, seed=0)
        self.inner.register_buffer("mask", np.array([True, False]))


def test_a_bad_buffer_value_leaves_every_parameter_and_buffer_unchanged():
    model, state = WithBuffers(), WithBuffers().state_dict()
    state["weight"] = np.full(3, 9.0)
    state["counts"] = np.full(3, 1.5)                        # floats cannot be stored in int64 counts
    with pytest.raises(TypeError, match="'counts'.*int64"):
        model.load_state_dict(state)
    assert model.weight.data.tolist() == [1, 1, 1] and model.counts.tolist() == [0, 0, 0]
    del state["counts"]
    with pytest.raises(KeyError, match="missing key.*'counts'"):
        model.load_state_dict(state)
    assert model.load_state_dict(state, strict=False).missing_keys == ["counts"]


def test_register_buffer_refuses_clashes_tensors_and_non_numbers():
    model = WithBuffers()
    with pytest.raises(KeyError, match="'weight'.*already exists"):
        model.register_buffer("weight", np.zeros(3))
    with pytest.raises(TypeError, match="ndarray, not a Tensor"):
        model.register_buffer("table", Tensor([1.0]))
    with pytest.raises(TypeError, match="dtype object"):
        model.register_buffer("table", np.array([object()]))
    model.register_buffer("counts", np.ones(3, dtype=np.int64))     # re-registering one's own buffer is fine
    model.register_buffer("empty", None)                              # None: listed nowhere, like PyTorch
    assert "empty" not in dict(model.named_buffers()) and "empty" not in model.state_dict()


def test_checkpoints_carry_buffers(tmp_path):
    model = WithBuffers()
    model.counts[...] = [7, 8, 9]
    path = checkpoint.save(model, tmp_path / "model.npz")
    assert list(checkpoint.load(path)) == list(model.state_dict())
    other = WithBuffers()
    checkpoint.load_into(other, path)
    assert other.counts.tolist() == [7, 8, 9] and other.counts.dtype == np.int64
