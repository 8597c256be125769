"""Hostile inputs to module 05, the autograd engine: this subject's table of the bad-input battery
(tests/bad_input_battery.py): each case calls the API with one mistake and must raise the documented
error, naming the offending value, and change nothing; then the empty inputs that are valid.
"""
import numpy as np
import pytest

from tests.bad_input_battery import Case, check_case, check_empty, constructing, on
from tinytorch.core.autograd import RowSparseGrad, gradcheck, segment_sum
from tinytorch.core.tensor import Tensor


def backward_with(gradient):
    "Build: y = 2x after one good backward (x.grad set); y.backward(gradient) must refuse and leave x.grad."
    def build():
        x = Tensor(np.ones(2), requires_grad=True)
        (x * 2).sum().backward()
        y = x * 2
        return (lambda: y.backward(gradient) if gradient is not None else y.backward()), [x]
    return build


CASES = [
    # ---------------------------------------------------------------- shapes: wrong ranks and shapes
    Case("shapes/backward-gradient-shape", backward_with(np.ones(3)),
         ValueError, r"gradient has shape \(3,\) but the tensor has shape \(2,\)"),
    Case("shapes/backward-non-scalar-without-gradient", backward_with(None),
         ValueError, r"one-element tensor .* has shape \(2,\)"),
    Case("shapes/backward-without-grad", on(lambda: Tensor(np.ones(1)), lambda x: (x * 2).backward()),
         RuntimeError, r"backward\(\) needs a tensor that requires grad"),
    Case("shapes/segment-sum-rows", constructing(lambda: segment_sum([0, 1, 2], np.ones((2, 3)))),
         ValueError, r"segment_sum needs one row of values per id: 3 ids, values of shape \(2, 3\)"),
    Case("shapes/row-sparse-values", constructing(lambda: RowSparseGrad([0, 1], np.ones((3, 2)), (5, 2))),
         ValueError, r"RowSparseGrad values have shape \(3, 2\), expected \(2, 2\)"),
    Case("shapes/row-sparse-row-out-of-range", constructing(lambda: RowSparseGrad([1, 7], np.ones((2, 2)), (5, 2))),
         ValueError, r"RowSparseGrad indices must be sorted, unique and in \[0, 5\); got \[1, 7\]"),
    Case("shapes/row-sparse-negative-row", constructing(lambda: RowSparseGrad([-1], np.ones((1, 2)), (5, 2))),
         ValueError, r"RowSparseGrad indices must be sorted, unique and in \[0, 5\); got \[-1\]"),
    Case("shapes/gradcheck-float32", on(lambda: Tensor(np.ones(2), requires_grad=True),
                                       lambda x: gradcheck(lambda a: a * 2, [x])),
         TypeError, r"gradcheck needs float64 inputs .* input 0 is float32"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_raises_the_documented_error_and_changes_nothing(case):
    check_case(case)


# ------------------------------------------------------------------------------------------------ empty inputs (valid)

EMPTY = {
    "segment_sum": (lambda: segment_sum(np.zeros(0, np.int64), np.zeros((0, 3)))[1], np.zeros((0, 3))),
}


@pytest.mark.parametrize("name", EMPTY, ids=list(EMPTY))
def test_empty_inputs_are_valid_and_give_empty_results(name):
    check_empty(*EMPTY[name])
