"""Module 01's checks that recognise typical mistakes by name (tito/misconceptions/tensor.py lists them;
tests/tito/test_misconceptions.py proves each one is met). Expected values come from NumPy alone."""
import numpy as np
import pytest

from tests.diagnosis import expect_close, misconception
from tinytorch.core.tensor import Tensor


def test_indexing_with_repeated_indices_adds_their_gradients():
    table = Tensor(np.zeros((4, 2)), requires_grad=True)
    ids = np.array([2, 0, 2, 2])
    table[ids].backward(np.ones((4, 2)))
    got = np.asarray(table.grad)
    if np.allclose(got[2], 1.0):
        raise misconception("repeated indices", "row 2 is picked 3 times and received 1 of its 3 gradient rows "
                            "(`full[index] += grad` writes a repeated index once)", [3.0, 3.0], got[2], "grad[2]")
    expect_close(got, [[1, 1], [0, 0], [3, 3], [0, 0]], "table.grad")


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "sigmoid"])
def test_large_inputs_do_not_overflow(op):
    x = Tensor(np.array([[1000.0, 0.0, -1000.0]]))
    with np.errstate(over="raise", invalid="raise"):
        try:
            got = getattr(x, op)().data
        except FloatingPointError as error:
            raise misconception("overflow", f"{op} of ±1000 overflowed ({error}): subtract the maximum (or use "
                                f"exp(-|x|)) so exp never sees a large argument", "finite values", "an overflow",
                                f"{op}(x)") from None
    expected = {"softmax": [[1.0, 0.0, 0.0]], "log_softmax": [[0.0, -1000.0, -2000.0]],
                "sigmoid": [[1.0, 0.5, 0.0]]}[op]
    expect_close(got, expected, f"{op}(x)")
