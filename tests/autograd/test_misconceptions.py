"""Module 05's checks that recognise typical mistakes by name (tito/misconceptions/autograd.py lists them).
Expected values come from NumPy alone."""
import numpy as np

from tests.diagnosis import expect_close, misconception
from tinytorch.core.autograd import RowSparseGrad, segment_sum


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
