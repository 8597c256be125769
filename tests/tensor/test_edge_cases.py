"""The Tensor at the edges of its definitions (issue 15, defects 6 and 10): pow at zero and at negative bases,
by derivation and against PyTorch (skipped without torch); the truth value of a tensor (NumPy's rule, which
PyTorch follows); reductions over a list of axes."""
import numpy as np
import pytest

from tinytorch.core.autograd import gradcheck
from tinytorch.core.tensor import Tensor


def _value_and_grads(fn, *values):
    "fn's values and the gradients of sum(fn) for float64 leaves holding `values`."
    leaves = [Tensor(np.asarray(v, dtype=np.float64), requires_grad=True, dtype=np.float64) for v in values]
    out = fn(*leaves)
    out.sum().backward()
    return out.data, [leaf.grad for leaf in leaves]


POW_CASES = {   # name -> (fn, inputs, value, gradients), derived by hand from d/dx x^y = y x^(y-1), d/dy = x^y ln x
    "x**0 at 0": (lambda x: x ** 0, ([0.0, 2.0],), [1.0, 1.0], [[0.0, 0.0]]),        # d/dx x^0 = 0 everywhere
    "x**Tensor(2.) at -2": (lambda x: x ** Tensor(2.0, dtype=np.float64), ([-2.0, 3.0],), [4.0, 9.0], [[-4.0, 6.0]]),
    "(-2.0)**x at 2 and 3": (lambda x: (-2.0) ** x, ([2.0, 3.0],), [4.0, -8.0], [[np.nan, np.nan]]),  # ln(-2): NaN
    "0.0**x at 0, 1, 2": (lambda x: 0.0 ** x, ([0.0, 1.0, 2.0],), [1.0, 0.0, 0.0], [[0.0, 0.0, 0.0]]),
    "x**y at x = 0": (lambda x, y: x ** y, ([0.0, 0.0, 0.0], [0.0, 1.0, 2.0]), [1.0, 0.0, 0.0],
                      [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]),
    "x**y at x = -2, y = 2": (lambda x, y: x ** y, ([-2.0], [2.0]), [4.0], [[-4.0], [np.nan]]),
}


@pytest.mark.parametrize("case", POW_CASES)
def test_pow_at_zero_and_negative_bases_matches_the_derivation(case):
    fn, inputs, value, grads = POW_CASES[case]
    out, got = _value_and_grads(fn, *inputs)
    np.testing.assert_array_equal(out, value)
    for g, expected in zip(got, grads):
        np.testing.assert_array_equal(g, expected)            # NaN == NaN here: torch gives NaN for ln(-2) too


@pytest.mark.torch
@pytest.mark.parametrize("case", POW_CASES)
def test_pow_at_zero_and_negative_bases_matches_torch(case, torch):
    fn, inputs, _, _ = POW_CASES[case]
    out, got = _value_and_grads(fn, *inputs)
    leaves = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in inputs]
    torch_fn = {"x**Tensor(2.) at -2": lambda x: x ** torch.tensor(2.0, dtype=torch.float64)}.get(case, fn)
    expected = torch_fn(*leaves)
    expected.sum().backward()
    np.testing.assert_array_equal(out, expected.detach().numpy())
    for g, leaf in zip(got, leaves):
        np.testing.assert_array_equal(g, leaf.grad.numpy())


@pytest.mark.parametrize("data, truth", [([0.0], False), (0.0, False), ([2.5], True), (1.0, True), ([[0]], False)])
def test_the_truth_of_a_one_element_tensor_is_its_value(data, truth):
    assert bool(Tensor(data)) is truth
    assert bool(np.array(data)) is truth                      # NumPy's rule, which PyTorch follows too


@pytest.mark.parametrize("data", [[1.0, 2.0], [], [[1.0], [0.0]]])
def test_the_truth_of_other_sizes_is_ambiguous(data):
    with pytest.raises(ValueError, match=rf"{np.size(data)} elements.*ambiguous.*any\(\).*all\(\)"):
        bool(Tensor(data))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_reductions_take_a_list_of_axes(reduce):
    data = np.arange(24.0).reshape(2, 3, 4)
    x = Tensor(data, requires_grad=True, dtype=np.float64)
    out = getattr(x, reduce)(axis=[0, 1])
    np.testing.assert_array_equal(out.data, getattr(data, reduce)(axis=(0, 1)))
    assert gradcheck(lambda t: getattr(t, reduce)(axis=[0, -2], keepdims=True), [x])
