"""Module 05's checks that recognise typical mistakes by name (tito/misconceptions/autograd.py lists them).
Expected values come from NumPy alone."""
import numpy as np
import pytest

from tests.diagnosis import expect_close, misconception
from tinytorch.core.autograd import RowSparseGrad, is_grad_enabled, no_grad, segment_sum, unbroadcast
from tinytorch.core.graph import layer_ranks
from tinytorch.core.tensor import Tensor


def test_segment_sum_adds_the_rows_of_repeated_ids():
    ids, sums = segment_sum(np.array([4, 1, 4, 4]), np.ones((4, 2)))
    expect_close(ids, [1, 4], "unique ids")
    if np.allclose(sums[1], 1.0):
        raise misconception("repeated ids", "id 4 appears 3 times and its sum holds 1 of its 3 rows "
                            "(`sums[slots] += values` writes a repeated slot once; use np.add.at)",
                            [3.0, 3.0], sums[1], "sums[1]")
    expect_close(sums, [[1, 1], [3, 3]], "sums")


def test_a_row_sparse_gradient_densifies_in_its_own_dtype():
    grad = RowSparseGrad(np.array([0, 2]), np.ones((2, 3), np.float32), (4, 3))
    dense = grad.to_dense()
    if dense.dtype != np.float32:
        raise misconception("dtype", "a float32 table's gradient stays float32: np.zeros(shape, dtype=self.dtype)",
                            "float32", str(dense.dtype), "to_dense().dtype")
    expect_close(dense, [[1, 1, 1], [0, 0, 0], [1, 1, 1], [0, 0, 0]], "to_dense()")


def test_a_node_is_drawn_below_all_of_its_inputs():
    "(a * b + a).sum() by hand: t0 a, t1 b, o0 Mul, t2 a*b, o1 Add, t3 a*b+a, o2 Sum, t4 the sum."
    ids = ["t0", "t1", "o0", "t2", "o1", "t3", "o2", "t4"]
    edges = [("t0", "o0"), ("t1", "o0"), ("o0", "t2"), ("t2", "o1"), ("t0", "o1"), ("o1", "t3"), ("t3", "o2"),
             ("o2", "t4")]
    ranks = layer_ranks(ids, edges)
    expected = [0, 0, 1, 2, 3, 4, 5, 6]
    if ranks["o1"] <= ranks["t2"]:
        raise misconception("arrow points up", "AddBackward's inputs are a*b (rank 2) and a (rank 0): it goes one "
                            "layer below the lowest of them, 1 + the largest rank, not the smallest",
                            expected, [ranks[i] for i in ids], f"ranks of {ids}")
    expect_close([ranks[i] for i in ids], expected, f"ranks of {ids}")


def test_leaving_a_nested_no_grad_restores_the_mode_before_it():
    seen = {}
    with no_grad():
        with no_grad():
            pass
        seen["after the inner block"] = is_grad_enabled()
    seen["after both"] = is_grad_enabled()
    expected = {"after the inner block": False, "after both": True}
    if seen != expected:
        raise misconception("restores", "leaving no_grad puts back the mode in force before it (saved on entry), "
                            "not True: an inner block must leave the outer one's False", expected, seen,
                            "is_grad_enabled()")


def test_leaving_no_grad_by_an_exception_restores_the_mode():
    with pytest.raises(KeyError):
        with no_grad():
            raise KeyError("the body fails")
    enabled = is_grad_enabled()
    if not enabled:
        import tinytorch.core.autograd as autograd
        autograd._grad_mode.enabled = True      # leave the next tests a working engine
        raise misconception("restores", "the body raised and gradients stayed off: restore in `finally:`", True,
                            enabled, "is_grad_enabled()")


@pytest.mark.parametrize("grad_shape, shape", [((2, 3), (2, 1)), ((4, 2, 3), (2, 1)), ((2, 3), (1, 3))])
def test_unbroadcast_sums_the_stretched_size_one_axes(grad_shape, shape):
    grad = np.arange(1.0, np.prod(grad_shape) + 1).reshape(grad_shape)
    expected = np.broadcast_to(grad, grad_shape).reshape((-1,) + grad_shape[-len(shape):]).sum(axis=0)
    expected = expected.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True)
    try:
        got = unbroadcast(grad, shape)
    except ValueError as error:
        raise misconception("size-1 axes", f"broadcasting also stretches axes of size 1: sum grad {grad_shape} over "
                            f"them (keepdims) before reshaping to {shape}", expected, f"ValueError: {error}",
                            f"unbroadcast(grad, {shape})") from None
    expect_close(got, expected, f"unbroadcast(grad, {shape})")


@pytest.mark.isolates("backward")         # topological_order and unbroadcast have checks of their own
def test_backward_adds_the_gradients_of_an_input_used_twice():
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True, dtype=np.float64)
    (x * 2.0 + x * 3.0).sum().backward()
    got = np.asarray(x.grad)
    if np.allclose(got, 2.0) or np.allclose(got, 3.0):
        raise misconception("accumulate", "x is used twice, so its gradient is the sum of both uses' gradients: "
                            "add into the gradient an input already has, never assign", [5.0, 5.0], got, "x.grad")
    expect_close(got, [5.0, 5.0], "x.grad")
