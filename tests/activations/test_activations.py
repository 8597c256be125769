"""Module 02, activations: each layer matches its formula, its gradient passes gradcheck, and the
numerically delicate cases (saturation, huge logits, log of tiny probabilities) behave."""
import numpy as np
import pytest

from tinytorch.core.activations import GELU, Activation, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from tinytorch.core.autograd import gradcheck
from tinytorch.core.tensor import Tensor

GELU_C = np.sqrt(2 / np.pi)

FORMULAS = {
    ReLU: lambda x: np.maximum(x, 0),
    Sigmoid: lambda x: 1 / (1 + np.exp(-x)),
    Tanh: np.tanh,
    GELU: lambda x: 0.5 * x * (1 + np.tanh(GELU_C * (x + 0.044715 * x ** 3))),
}


def float64(values, requires_grad=False):
    return Tensor(values, requires_grad=requires_grad, dtype=np.float64)


def softmax_reference(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("cls", list(FORMULAS), ids=lambda c: c.__name__)
def test_elementwise_activation_matches_formula_and_keeps_shape(cls, rng):
    x = rng.normal(scale=3, size=(2, 3, 4))
    y = cls()(float64(x))
    assert y.shape == (2, 3, 4) and y.dtype == np.float64
    np.testing.assert_allclose(y.data, FORMULAS[cls](x), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("cls", list(FORMULAS), ids=lambda c: c.__name__)
def test_elementwise_activation_gradcheck(cls, rng):
    x = rng.normal(size=(3, 5))
    x[np.abs(x) < 1e-3] = 0.5                           # keep ReLU's kink away from the finite-difference step
    assert gradcheck(cls(), [float64(x, requires_grad=True)])


@pytest.mark.parametrize("cls,axis", [(Softmax, -1), (Softmax, 0), (Softmax, 1), (LogSoftmax, -1), (LogSoftmax, 0)])
def test_softmax_family_matches_reference_on_every_axis_and_gradchecks(cls, axis, rng):
    x = rng.normal(size=(2, 3, 4))
    expected = softmax_reference(x, axis)
    y = cls(axis=axis)(float64(x)).data
    np.testing.assert_allclose(y, expected if cls is Softmax else np.log(expected), rtol=1e-12)
    assert gradcheck(cls(axis=axis), [float64(x, requires_grad=True)])


def test_softmax_rows_sum_to_one_and_are_shift_invariant(rng):
    x = rng.normal(size=(5, 7))
    p = Softmax()(float64(x)).data
    np.testing.assert_allclose(p.sum(axis=-1), np.ones(5), rtol=1e-12)
    shifted = Softmax()(float64(x + 1000.0)).data
    assert np.all(np.isfinite(shifted))
    np.testing.assert_allclose(shifted, p, rtol=1e-12)


def test_log_softmax_stays_finite_where_log_of_softmax_underflows():
    logits = Tensor([[0.0, -200.0, 5.0]])                # float32: e^-205 underflows to 0
    with np.errstate(divide="ignore"):
        naive = np.log(Softmax()(logits).data)
    stable = LogSoftmax()(logits).data
    assert np.isneginf(naive[0, 1])
    log_sum = 5.0 + np.log1p(np.exp(-5.0) + np.exp(-205.0))
    np.testing.assert_allclose(stable[0], [-log_sum, -200.0 - log_sum, 5.0 - log_sum], rtol=1e-6)


def test_sigmoid_is_finite_for_extreme_inputs_and_saturates():
    x = float64([-1000.0, -20.0, 0.0, 20.0, 1000.0], requires_grad=True)
    y = Sigmoid()(x)
    assert np.all(np.isfinite(y.data)) and y.data[0] == 0.0 and y.data[-1] == 1.0 and y.data[2] == 0.5
    y.sum().backward()
    assert x.grad[2] == 0.25, "the largest slope of the sigmoid is 1/4, at 0"
    assert 0 < x.grad[3] < 3e-9 and x.grad[0] == 0.0, "saturated: the gradient vanishes"


def test_tanh_is_a_rescaled_sigmoid(rng):
    x = rng.normal(scale=2, size=10)
    np.testing.assert_allclose(Tanh()(float64(x)).data, 2 * Sigmoid()(float64(2 * x)).data - 1, atol=1e-12)


def test_relu_gradient_is_zero_at_and_below_zero():
    x = float64([-3.0, -1e-9, 0.0, 1e-9, 3.0], requires_grad=True)
    ReLU()(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]


def test_gelu_minimum_and_large_input_behaviour():
    grid = np.linspace(-3, 3, 6001)
    y = GELU()(float64(grid)).data
    assert y.min() == pytest.approx(-0.17, abs=0.005)
    assert grid[y.argmin()] == pytest.approx(-0.75, abs=0.02)
    np.testing.assert_allclose(y[grid >= 3], grid[grid >= 3], atol=0.01)


def test_gelu_refuses_the_exact_erf_form_by_name():
    with pytest.raises(ValueError, match="approximate='none'"):
        GELU(approximate="none")


def test_activations_accept_arrays_have_no_parameters_and_a_readable_repr():
    layers = [ReLU(), Sigmoid(), Tanh(), GELU(), Softmax(), LogSoftmax(axis=0)]
    assert [repr(layer) for layer in layers] == [
        "ReLU()", "Sigmoid()", "Tanh()", "GELU(approximate='tanh')", "Softmax(axis=-1)", "LogSoftmax(axis=0)"]
    for layer in layers:
        assert isinstance(layer, Activation) and layer.parameters() == []
        out = layer(np.array([[1.0, -2.0]]))
        assert isinstance(out, Tensor) and out.shape == (1, 2) and out.dtype == np.float32


def test_activation_output_keeps_float32_and_the_graph():
    x = Tensor(np.ones((2, 2)), requires_grad=True)
    for layer in (ReLU(), Sigmoid(), Tanh(), GELU(), Softmax(), LogSoftmax()):
        y = layer(x)
        assert y.dtype == np.float32 and y.requires_grad and y._grad_fn is not None


# ---------------------------------------------------------------- issue 23, second part: integer inputs give float32

@pytest.mark.parametrize("layer", [Sigmoid(), Tanh(), GELU(), Softmax(), LogSoftmax()])
def test_float_activations_of_integer_inputs_give_float32(layer):
    out = layer(Tensor([0, 1, 2]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.data, layer(Tensor([0.0, 1.0, 2.0])).data, rtol=1e-6)
