"""Module 01's checks that recognise typical mistakes by name (tito/misconceptions/tensor.py lists them;
tests/tito/test_misconceptions.py proves each one is met). Expected values come from NumPy alone."""
import numpy as np
import pytest

from tests.diagnosis import expect_close, misconception
from tinytorch.core.autograd import Context
from tinytorch.core.tensor import MatMulBackward, MulBackward, ReLUBackward, SumBackward, Tensor


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


# ---------------------------------------------------------------- each forward alone, each backward alone
# A forward's saved state is read by its backward, so a wrong one fails every gradient check; these checks
# run the learner's forward with the backward the docstring describes (written here from NumPy), or the
# learner's backward on a context saved by hand, so each failure names one exercise.


def saved_by(forward, *arrays):
    ctx = Context()
    return ctx, forward(ctx, *arrays)


def test_mul_forward_saves_a_then_b_as_its_backward_reads_them():
    a, b, grad = np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0, 30.0]), np.array([1.0, -1.0, 2.0])
    ctx, out = saved_by(MulBackward.forward, a, b)
    expect_close(out, a * b, "MulBackward.forward(a, b)")
    if len(ctx.saved) != 2:
        raise misconception("saved", "backward reads `a, b = ctx.saved`: save exactly (a, b)", 2, len(ctx.saved),
                            "len(ctx.saved)")
    first, second = ctx.saved
    grad_a = grad * second                        # the backward of the docstring: a, b = ctx.saved; grad * b
    expect_close(grad_a, grad * b, "dL/da from what forward saved", diagnoses=[
        ("saved in the wrong order", "forward saved (b, a) but backward reads `a, b = ctx.saved`, so each "
         "operand gets the other's gradient", grad * a)])
    expect_close(first, a, "ctx.saved[0]")


def test_relu_forward_saves_the_mask_its_backward_multiplies_by():
    x, grad = np.array([-2.0, 0.0, 3.0, 0.5]), np.array([5.0, 5.0, 5.0, 5.0])
    ctx, out = saved_by(ReLUBackward.forward, x)
    expect_close(out, np.maximum(x, 0), "ReLUBackward.forward(x)")
    if len(ctx.saved) != 1:
        raise misconception("saved", "backward reads `(positive,) = ctx.saved`: save the mask x > 0 alone", 1,
                            len(ctx.saved), "len(ctx.saved)")
    (positive,) = ctx.saved
    got = grad * np.asarray(positive)             # the backward of the docstring: grad * positive
    expect_close(got, grad * (x > 0), "dL/dx from what forward saved", diagnoses=[
        ("saved the input, not the mask", "backward multiplies the gradient by what forward saved: with x "
         "itself it scales the gradient by x; save `x > 0`", grad * x)])


def call_backward(backward, saved, grad, what):
    """The learner's backward on a context saved by hand; an exception becomes expected against actual."""
    ctx = Context()
    ctx.save_for_backward(*saved)
    try:
        return backward(ctx, grad)
    except (ValueError, IndexError) as error:
        raise AssertionError(f"{what} raised instead of returning a gradient\n  expected a gradient of the "
                             f"input's shape\n  actual   {type(error).__name__}: {error}") from None


@pytest.mark.parametrize("shapes", [((3, 3), (3, 3)), ((2, 3), (3, 4))], ids=["square", "oblong"])
def test_matmul_backward_multiplies_by_the_other_operand_transposed(shapes):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    grad = rng.standard_normal((shapes[0][0], shapes[1][1]))
    grad_a, grad_b = call_backward(MatMulBackward.backward, (a, b), grad, "MatMulBackward.backward")
    wrong = [("transpose", "dL/da is grad @ bᵀ (and dL/db is aᵀ @ grad): the shapes (n, m) @ (m, k) say so",
              grad @ b if b.shape[0] == grad.shape[1] else np.full(grad_a.shape, np.nan))]
    expect_close(grad_a, grad @ b.T, "dL/da", diagnoses=wrong)
    expect_close(grad_b, a.T @ grad, "dL/db", diagnoses=[("transpose", "dL/db is aᵀ @ grad",
                                                          a @ grad if a.shape[1] == grad.shape[0] else
                                                          np.full(grad_b.shape, np.nan))])


@pytest.mark.parametrize("shape", [(3, 3), (2, 3)])
def test_sum_backward_puts_each_row_s_gradient_back_on_its_row(shape):
    grad = np.arange(1.0, shape[0] + 1)           # x.sum(axis=1): one gradient per row
    (got,) = call_backward(SumBackward.backward, (shape, 1, False), grad, "SumBackward.backward")
    expected = np.repeat(grad[:, None], shape[1], axis=1)
    wrong = np.broadcast_to(grad, shape) if shape[0] == shape[1] else np.full(shape, np.nan)
    expect_close(got, expected, "dL/dx for x.sum(axis=1)", diagnoses=[
        ("reduced axis not restored", "broadcasting grad (3,) to (3, 3) lines it up with the last axis: give it "
         "back the summed axis first (size 1), then broadcast", wrong)])
