"""Module 05's checks that recognise typical mistakes by name (tito/misconceptions/autograd.py lists them).
Expected values come from NumPy alone."""
import numpy as np

from tests.diagnosis import expect_close, misconception
from tinytorch.core.autograd import RowSparseGrad, segment_sum
from tinytorch.core.graph import layer_ranks


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
