"""Hostile inputs to module 04, losses: this subject's table of the bad-input battery
(tests/bad_input_battery.py): each case calls the API with one mistake and must raise the documented
error, naming the offending value, and change nothing; then the empty inputs that are valid.
"""
import numpy as np
import pytest

from tests.bad_input_battery import Case, check_case, check_empty, constructing, on
from tinytorch.core.losses import CrossEntropyLoss, MSELoss, cross_entropy, mse_loss
from tinytorch.core.tensor import Tensor

F32 = np.float32
NAN = float("nan")


def logits():
    return Tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)


CASES = [
    # ---------------------------------------------------------------- ids: out of range, negative, float, bool, NaN
    Case("ids/cross-entropy-target-equals-classes", on(logits, lambda z: cross_entropy(z, [0, 3])),
         IndexError, r"target 3 is out of range for 3 classes: expected 0 <= target < 3"),
    Case("ids/cross-entropy-negative-target", on(logits, lambda z: cross_entropy(z, np.array([-1, 0]))),
         IndexError, r"target -1 is out of range for 3 classes: expected 0 <= target < 3"),
    Case("ids/cross-entropy-float-targets", on(logits, lambda z: cross_entropy(z, [0.0, 1.0])),
         TypeError, r"targets must be integer class indices; got dtype float64"),
    Case("ids/cross-entropy-bool-targets", on(logits, lambda z: cross_entropy(z, np.array([True, False]))),
         TypeError, r"targets must be integer class indices; got dtype bool"),
    Case("ids/cross-entropy-nan-target", on(logits, lambda z: cross_entropy(z, np.array([NAN, 0.0]))),
         TypeError, r"targets must be integer class indices; got dtype float64"),
    Case("ids/cross-entropy-huge-target", on(logits, lambda z: cross_entropy(z, np.array([2**62, 0]))),
         IndexError, r"target 4611686018427387904 is out of range for 3 classes"),
    Case("ids/cross-entropy-besides-ignore-index", on(logits, lambda z: cross_entropy(z, [-100, 3], ignore_index=-100)),
         IndexError, r"target 3 is out of range for 3 classes: expected 0 <= target < 3 "
                     r"or target == ignore_index \(-100\)"),
    Case("ids/cross-entropy-loss-layer", on(logits, lambda z: CrossEntropyLoss()(z, [5, 0])),
         IndexError, r"target 5 is out of range for 3 classes"),

    # ---------------------------------------------------------------- shapes: wrong ranks and shapes
    Case("shapes/cross-entropy-target-shape", on(logits, lambda z: cross_entropy(z, [0, 1, 2])),
         ValueError, r"targets of shape \(3,\) do not match logits of shape \(2, 3\): "
                     r"expected targets of shape \(2,\)"),
    Case("shapes/cross-entropy-0d-logits", constructing(lambda: cross_entropy(Tensor(1.0), np.array(0))),
         ValueError, r"logits must be at least 1-D, of shape \(\*, C\) .* got a 0-D tensor"),
    Case("shapes/cross-entropy-integer-logits", constructing(lambda: cross_entropy(np.zeros((2, 3), np.int64), [0, 1])),
         TypeError, r"logits must be floating point; got dtype int64"),
    Case("shapes/mse-shapes", on(lambda: Tensor(np.ones((2, 3)), requires_grad=True),
                                 lambda x: mse_loss(x, np.ones((3, 2)))),
         ValueError, r"mse_loss needs pred and target of the same shape; got pred \(2, 3\) and target \(3, 2\)"),

    # ---------------------------------------------------------------- options: unknown names, devices, padding_idx
    Case("options/cross-entropy-reduction", on(logits, lambda z: cross_entropy(z, [0, 1], reduction="avg")),
         ValueError, r"unknown reduction 'avg'; choose one of 'mean', 'sum', 'none'"),
    Case("options/cross-entropy-float-ignore-index", on(logits, lambda z: cross_entropy(z, [0, 1], ignore_index=1.5)),
         TypeError, r"ignore_index must be an int or None; got 1.5"),
    Case("options/cross-entropy-loss-layer-ignore-index", constructing(lambda: CrossEntropyLoss(ignore_index="pad")),
         TypeError, r"ignore_index must be an int or None; got 'pad'"),
    Case("options/mse-reduction", constructing(lambda: mse_loss(np.ones(2), np.ones(2), reduction="max")),
         ValueError, r"unknown reduction 'max'; choose one of 'mean', 'sum', 'none'"),
    Case("options/cross-entropy-loss-layer-reduction", constructing(lambda: CrossEntropyLoss(reduction=None)),
         ValueError, r"unknown reduction None; choose one of 'mean', 'sum', 'none'"),
    Case("options/mse-loss-layer-reduction", constructing(lambda: MSELoss(reduction="Mean")),
         ValueError, r"unknown reduction 'Mean'; choose one of 'mean', 'sum', 'none'"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_raises_the_documented_error_and_changes_nothing(case):
    check_case(case)


# ------------------------------------------------------------------------------------------------ empty inputs (valid)

EMPTY = {
    "cross entropy sum": (lambda: cross_entropy(np.zeros((0, 3)), np.zeros(0, np.int64), reduction="sum").data,
                          np.array(0.0, F32)),
    "cross entropy none": (lambda: cross_entropy(np.zeros((0, 3)), np.zeros(0, np.int64), reduction="none").data,
                           np.zeros(0, F32)),
    "cross entropy mean is NaN": (lambda: cross_entropy(np.zeros((0, 3)), np.zeros(0, np.int64)).data,
                                  np.array(NAN, F32)),
    "mse sum": (lambda: mse_loss(np.zeros(0), np.zeros(0), reduction="sum").data, np.array(0.0, F32)),
}


@pytest.mark.parametrize("name", EMPTY, ids=list(EMPTY))
def test_empty_inputs_are_valid_and_give_empty_results(name):
    check_empty(*EMPTY[name])
