"""Module 02's checks that recognise typical mistakes by name (tito/misconceptions/activations.py lists them).
Expected values come from NumPy alone."""
import numpy as np
import pytest

from tests.diagnosis import expect_close, misconception
from tinytorch.core.activations import GELU, ReLU, Sigmoid, Softmax, Tanh
from tinytorch.core.tensor import Tensor

X = np.array([[-2.0, -0.5, 0.0, 0.5, 2.0]])
REFERENCE = {ReLU: np.maximum(X, 0), Sigmoid: 1 / (1 + np.exp(-X)), Tanh: np.tanh(X)}


@pytest.mark.parametrize("layer", [ReLU, Sigmoid, Tanh, GELU, Softmax], ids=lambda layer: layer.__name__)
def test_each_activation_passes_the_gradient_back(layer):
    x = Tensor(X, requires_grad=True)
    out = layer()(x)
    if not isinstance(out, Tensor) or not out.requires_grad:
        raise misconception("no gradient", f"{layer.__name__} computed on `.data` leaves the graph: use the "
                            f"Tensor op (x.{layer.__name__.lower()}())", "a Tensor in the graph",
                            "a Tensor with requires_grad=False", "output")
    out.sum().backward()
    assert x.grad is not None


@pytest.mark.parametrize("layer", [ReLU, Sigmoid, Tanh], ids=lambda layer: layer.__name__)
def test_each_activation_computes_its_own_formula(layer):
    expect_close(layer()(Tensor(X)).data, REFERENCE[layer], f"{layer.__name__}(x)", diagnoses=[
        ("tanh", "sigmoid maps to (0, 1): 1 / (1 + exp(-x)), not tanh", np.tanh(X))] if layer is Sigmoid else [])
