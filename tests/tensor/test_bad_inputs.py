"""Hostile inputs to module 01, the Tensor: this subject's table of the bad-input battery
(tests/bad_input_battery.py): each case calls the API with one mistake and must raise the documented
error, naming the offending value, and change nothing; then the empty inputs that are valid.
"""
import numpy as np
import pytest

from tests.bad_input_battery import Case, check_case, check_empty, constructing, on
from tinytorch.core.tensor import Tensor, concatenate, stack

F32 = np.float32


CASES = [
    # ---------------------------------------------------------------- shapes: wrong ranks and shapes
    Case("shapes/add-not-broadcastable", on(lambda: Tensor(np.ones((2, 3)), requires_grad=True),
                                            lambda x: x + Tensor(np.ones(4))),
         ValueError, r"cannot add tensors of shapes \(2, 3\) and \(4,\): they do not broadcast"),
    Case("shapes/multiply-not-broadcastable", on(lambda: Tensor(np.ones((2, 3))), lambda x: np.ones((3, 2)) * x),
         ValueError, r"cannot multiply tensors of shapes \(3, 2\) and \(2, 3\)"),
    Case("shapes/matmul-inner-dimensions", on(lambda: Tensor(np.ones((2, 3))), lambda x: x @ Tensor(np.ones((4, 5)))),
         ValueError, r"cannot matmul shapes \(2, 3\) and \(4, 5\): inner dimensions 3 and 4 differ"),
    Case("shapes/matmul-0d", on(lambda: Tensor(np.ones(3)), lambda x: x @ Tensor(2.0)),
         ValueError, r"matmul needs at least 1-D tensors; got shapes \(3,\) and \(\)"),
    Case("shapes/matmul-batch", on(lambda: Tensor(np.ones((2, 3, 4))), lambda x: x @ Tensor(np.ones((5, 4, 2)))),
         ValueError, r"batch dimensions \(2,\) and \(5,\) do not broadcast"),
    Case("shapes/permute-repeated-axis", on(lambda: Tensor(np.ones((2, 3))), lambda x: x.permute(0, 0)),
         ValueError, r"permute of a 2-D tensor needs each axis 0..1 \(or -2..-1\) exactly once; got \(0, 0\)"),
    Case("shapes/item-of-many", on(lambda: Tensor(np.ones(3)), lambda x: x.item()),
         ValueError, r"item\(\) needs a tensor with one element; this one has shape \(3,\)"),
    Case("shapes/stack-different-shapes", constructing(lambda: stack([Tensor(np.ones(2)), Tensor(np.ones(3))])),
         ValueError, r"stack needs tensors of one shape; got shapes \[\(2,\), \(3,\)\]"),
    Case("shapes/concatenate-nothing", constructing(lambda: concatenate([])),
         ValueError, r"concatenate needs at least one tensor"),
    Case("shapes/concatenate-axis-out-of-range",
         constructing(lambda: concatenate([Tensor(np.ones((2, 3))), Tensor(np.ones((2, 3)))], axis=5)),
         IndexError, r"axis 5 is out of range for a 2-D tensor \(valid axes are -2..1\)"),
    Case("shapes/transpose-axis-out-of-range", on(lambda: Tensor(np.ones((2, 3))), lambda x: x.transpose(0, 5)),
         IndexError, r"axis 5 is out of range for a 2-D tensor \(valid axes are -2..1\)"),
    Case("shapes/transpose-of-1d", on(lambda: Tensor(np.ones(3), requires_grad=True), lambda x: x.transpose()),
         IndexError, r"axis -2 is out of range for a 1-D tensor \(valid axes are -1..0\)"),
    Case("shapes/transpose-float-axis", on(lambda: Tensor(np.ones((2, 3))), lambda x: x.transpose(0, 1.0)),
         TypeError, r"axis must be an int; got 1.0"),
    Case("shapes/max-of-empty", on(lambda: Tensor(np.zeros((0, 3)), requires_grad=True), lambda x: x.max()),
         ValueError, r"max over axis=None of a tensor of shape \(0, 3\) is undefined: "
                     r"every reduced axis needs at least one element"),
    Case("shapes/max-over-empty-axis", on(lambda: Tensor(np.zeros((2, 0))), lambda x: x.max(axis=-1)),
         ValueError, r"max over axis=-1 of a tensor of shape \(2, 0\)"),
    Case("shapes/strings-as-tensor", constructing(lambda: Tensor(["a", "b"])),
         TypeError, r"Tensor data must be numbers or bools; got dtype <U1"),
    Case("shapes/integer-tensor-requires-grad", constructing(lambda: Tensor([1, 2], requires_grad=True)),
         TypeError, r"only floating-point tensors can require gradients; this one is int64"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_raises_the_documented_error_and_changes_nothing(case):
    check_case(case)


# ------------------------------------------------------------------------------------------------ empty inputs (valid)

EMPTY = {
    "stack of empties": (lambda: stack([Tensor(np.zeros(0)), Tensor(np.zeros(0))]).data, np.zeros((2, 0), F32)),
}


@pytest.mark.parametrize("name", EMPTY, ids=list(EMPTY))
def test_empty_inputs_are_valid_and_give_empty_results(name):
    check_empty(*EMPTY[name])
