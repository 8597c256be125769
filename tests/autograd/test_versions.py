"""The version counter (issue 15, defect 2): a tensor counts its tracked in-place changes, and `backward()`
refuses, naming the op and the tensor and changing no gradient, when an array an op saved for its backward
changed after the forward; ops that saved nothing stay exact. With optimiser steps as the writes:
tests/optimizers/test_versions.py; load_state_dict: tests/layers/test_layers.py."""
import numpy as np
import pytest

from tinytorch.core.autograd import gradcheck
from tinytorch.core.layers import Parameter
from tinytorch.core.tensor import Tensor

STALE = "modified by an inplace operation"


def test_version_counter_api():
    t = Tensor([1.0, 2.0])
    assert t._version == 0
    t.data[0] = 5.0                     # a raw write into the ndarray: NumPy cannot tell us
    assert t._version == 0
    t.mark_modified()
    assert t._version == 1
    t.data = np.zeros(2, np.float32)    # reassigning the array is a change too
    assert t._version == 2
    t.data += 1                         # augmented assignment to the attribute goes through the setter
    assert t._version == 3
    assert Parameter(np.ones(2))._version == 0 and (t * 2)._version == 0


def test_reassigning_data_between_forward_and_backward_raises_naming_the_op_and_tensor():
    w = Tensor(np.array([[1.0, 2.0]]), requires_grad=True)
    loss = (w * w).sum()
    w.data = w.data * 3
    with pytest.raises(RuntimeError, match=rf"{STALE}.*shape \(1, 2\) and dtype float32.*MulBackward.*version 1"):
        loss.backward()
    assert w.grad is None


def test_mark_modified_after_an_in_place_write_raises_and_no_grad_changes():
    w = Tensor([3.0, 4.0], requires_grad=True)
    v = Tensor([1.0, 1.0], requires_grad=True)
    loss = (v * 2).sum() + (w * w).sum()          # v's branch is fine; w's is stale
    w.data[...] = [0.6, 0.8]
    w.mark_modified()
    with pytest.raises(RuntimeError, match=STALE):
        loss.backward()
    assert v.grad is None and w.grad is None, "all or nothing: the check runs before any gradient moves"
    (w * w).sum().backward()                      # a fresh forward uses the new values
    np.testing.assert_allclose(w.grad, [1.2, 1.6], rtol=1e-6)


def test_an_op_that_saved_its_output_refuses_when_the_output_changes():
    "ExpBackward keeps exp(x) for its backward; writing into that output afterwards would change dL/dx."
    x = Tensor([0.0, 1.0], requires_grad=True)
    y = x.exp()
    loss = y.sum()                                # SumBackward saves no array: only ExpBackward can notice
    y.data[...] = 0.0
    y.mark_modified()
    with pytest.raises(RuntimeError, match=rf"{STALE}.*the output of ExpBackward"):
        loss.backward()


def test_unsaved_inputs_may_change_freely():
    "AddBackward saves nothing: changing its inputs cannot make its gradient wrong, so it must not raise."
    a, b = Tensor([1.0], requires_grad=True), Tensor([2.0], requires_grad=True)
    loss = (a + b).sum()
    a.data = np.array([7.0], np.float32)
    loss.backward()
    assert a.grad.tolist() == [1.0] and b.grad.tolist() == [1.0]


def test_gradcheck_still_perturbs_data_in_place():
    w = Tensor(np.array([[0.5, -1.0], [2.0, 0.25]]), requires_grad=True, dtype=np.float64)
    assert gradcheck(lambda t: (t * t * t).sum(), [w])
    assert w._version == 0, "gradcheck restores every element it perturbs, so it leaves no mark"


def test_a_result_shares_its_inputs_counter_exactly_when_it_shares_their_memory():
    "A fresh result (which skips the overlap test) counts anew; the input's own array, or a view, shares."
    from tinytorch.core.autograd import Function

    class Identity(Function):                   # returns the input's array itself, as an op may
        forward = staticmethod(lambda ctx, x: x)
        backward = staticmethod(lambda ctx, grad: (grad,))

    class Whole(Function):                      # returns the array that owns a view's memory
        forward = staticmethod(lambda ctx, x: x.base)
        backward = staticmethod(lambda ctx, grad: (grad,))

    w = Tensor(np.arange(6.0).reshape(2, 3))
    row = w[0]
    for shared in (Identity.apply(w), w.reshape(3, 2), w.T, Whole.apply(row)):
        assert shared._versions is w._versions
    for fresh in (w * 2, w + w, Tensor(w.data.copy())):
        assert fresh._versions is not w._versions
    same = Identity.apply(w)
    same.mark_modified()
    assert w._version == 1 and row._version == 1


def test_a_result_owning_memory_a_strided_view_comes_from_shares_that_views_counter():
    "sliding_window_view's base is a helper object, not the array: the owner is found along the .base chain."
    from numpy.lib.stride_tricks import sliding_window_view
    from tinytorch.core.autograd import Function

    class Owner(Function):                      # returns the array that owns the window's memory
        forward = staticmethod(lambda ctx, x: x.base.base)
        backward = staticmethod(lambda ctx, grad: (grad,))

    w = Tensor(np.arange(6.0), dtype=np.float64)
    window = Tensor._from_array(sliding_window_view(w.data, 3), sources=[w])
    assert window._versions is w._versions and not isinstance(window.data.base, np.ndarray)
    assert Owner.apply(window)._versions is w._versions
