"""Hostile inputs to module 03, layers: this subject's table of the bad-input battery
(tests/bad_input_battery.py): each case calls the API with one mistake and must raise the documented
error, naming the offending value, and change nothing; then the empty inputs that are valid.
"""
import numpy as np
import pytest

from tests.bad_input_battery import Case, check_case, check_empty, constructing, on
from tinytorch.core.layers import Dropout, Linear, Sequential
from tinytorch.core.tensor import Tensor

F16, F32, F64 = np.float16, np.float32, np.float64
NAN = float("nan")


CASES = [
    # ---------------------------------------------------------------- shapes: wrong ranks and shapes
    Case("shapes/linear-in-features", on(lambda: Linear(3, 2, seed=0), lambda m: m(np.ones((4, 5), F32))),
         ValueError, r"cannot matmul shapes \(4, 5\) and \(3, 2\): inner dimensions 5 and 3 differ"),
    Case("shapes/linear-integer-input", on(lambda: Linear(3, 2, seed=0), lambda m: m(np.ones((4, 3), np.int64))),
         TypeError, r"Linear needs floating-point input; got dtype int64"),
    Case("shapes/dropout-integer-input", on(lambda: Dropout(0.5, seed=0), lambda d: d(np.ones(4, np.int64))),
         TypeError, r"Dropout needs floating-point input; got dtype int64"),
    Case("shapes/sequential-index", on(lambda: Sequential(Linear(2, 2, seed=0)), lambda s: s[3]),
         IndexError, r"Sequential index 3 out of range for 1 layers"),
    Case("shapes/sequential-not-callable", constructing(lambda: Sequential(Linear(2, 2, seed=0), 3)),
         TypeError, r"Sequential layer 1 must be callable .* got int"),
    Case("shapes/load-state-dict-wrong-shape", on(lambda: Linear(2, 3, seed=0),
                                                 lambda m: m.load_state_dict({"weight": np.zeros((2, 3)),
                                                                              "bias": np.zeros(4)})),
         ValueError, r"state_dict\['bias'\] has shape \(4,\) but the parameter 'bias' has shape \(3,\)"),
    Case("shapes/load-state-dict-missing-key", on(lambda: Linear(2, 3, seed=0),
                                                 lambda m: m.load_state_dict({"weight": np.zeros((2, 3))})),
         KeyError, r"missing key\(s\) \['bias'\]; the module expects \['weight', 'bias'\]"),
    Case("shapes/load-state-dict-none", on(lambda: Linear(2, 3, seed=0), lambda m: m.load_state_dict(None)),
         TypeError, r"state_dict must be a mapping of parameter name -> array, such as module.state_dict\(\); "
                    r"got NoneType"),
    Case("shapes/load-state-dict-list", on(lambda: Linear(2, 3, seed=0),
                                          lambda m: m.load_state_dict([np.zeros((2, 3)), np.zeros(3)])),
         TypeError, r"state_dict must be a mapping .* got list"),
    Case("shapes/load-state-dict-strings", on(lambda: Linear(2, 3, seed=0),
                                             lambda m: m.load_state_dict({"weight": np.zeros((2, 3)),
                                                                          "bias": np.array(["a", "b", "c"])})),
         TypeError, r"state_dict\['bias'\] must hold numbers; got dtype <U1"),

    # ---------------------------------------------------------------- zero, negative and non-integer sizes
    Case("sizes/linear-in-0", constructing(lambda: Linear(0, 3)),
         ValueError, r"in_features must be a positive int; got 0"),
    Case("sizes/linear-out-negative", constructing(lambda: Linear(3, -2)),
         ValueError, r"out_features must be a positive int; got -2"),
    Case("sizes/linear-float", constructing(lambda: Linear(2.0, 3)),
         TypeError, r"in_features must be a positive int; got 2.0"),

    # ---------------------------------------------------------------- dropout p outside [0, 1)
    Case("dropout/p-1", constructing(lambda: Dropout(1.0)),
         ValueError, r"dropout probability p must be in \[0, 1\); got p=1.0"),
    Case("dropout/p-1.5", constructing(lambda: Dropout(1.5)),
         ValueError, r"dropout probability p must be in \[0, 1\); got p=1.5"),
    Case("dropout/p-negative", constructing(lambda: Dropout(-0.1)),
         ValueError, r"dropout probability p must be in \[0, 1\); got p=-0.1"),
    Case("dropout/p-nan", constructing(lambda: Dropout(NAN)),
         ValueError, r"dropout probability p must be in \[0, 1\); got p=nan"),
    Case("dropout/p-bool", constructing(lambda: Dropout(True)),
         ValueError, r"dropout probability p must be in \[0, 1\); got p=True"),
    Case("dropout/p-string", constructing(lambda: Dropout("0.5")),
         ValueError, r"dropout probability p must be in \[0, 1\); got p='0.5'"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_raises_the_documented_error_and_changes_nothing(case):
    check_case(case)


# ------------------------------------------------------------------------------------------------ empty inputs (valid)

EMPTY = {
    "linear": (lambda: Linear(3, 2, seed=0)(np.zeros((0, 3), F32)).data, np.zeros((0, 2), F32)),
    "dropout in training": (lambda: Dropout(0.5, seed=0)(np.zeros((0, 3), F32)).data, np.zeros((0, 3), F32)),
}


@pytest.mark.parametrize("name", EMPTY, ids=list(EMPTY))
def test_empty_inputs_are_valid_and_give_empty_results(name):
    check_empty(*EMPTY[name])


# ------------------------------------------------------------------------------------------------ mixed float dtypes
# The documented behaviour is in tests/bad_input_battery.py's docstring.

FLOATS = [F16, F32, F64]
TOLERANCE = {F16: 2e-2, F32: 1e-5, F64: 1e-12}


@pytest.mark.parametrize("weight_dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("input_dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_mixed_float_dtypes_linear_promotes_like_numpy_and_grads_keep_their_owners_dtype(weight_dtype, input_dtype):
    rng = np.random.default_rng(0)
    weight64, bias64, x64 = rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal((4, 3))
    linear = Linear(3, 2, seed=0)
    linear.weight.data, linear.bias.data = weight64.astype(weight_dtype), bias64.astype(weight_dtype)
    x = Tensor(x64, dtype=input_dtype, requires_grad=True)
    y = linear(x)
    y.sum().backward()
    assert y.dtype == np.result_type(weight_dtype, input_dtype)
    assert linear.weight.grad.dtype == weight_dtype and linear.bias.grad.dtype == weight_dtype
    assert x.grad.dtype == input_dtype
    low = max(TOLERANCE[weight_dtype], TOLERANCE[input_dtype])
    reference = x64.astype(input_dtype).astype(F64) @ weight64.astype(weight_dtype).astype(F64) + \
        bias64.astype(weight_dtype).astype(F64)
    np.testing.assert_allclose(y.data.astype(F64), reference, rtol=low, atol=low)


def test_mixed_float_dtypes_load_state_dict_casts_to_the_parameters_dtype():
    linear = Linear(2, 3, seed=0)
    linear.load_state_dict({"weight": np.full((2, 3), 1 / 3, F64), "bias": np.ones(3, F16)})
    assert linear.weight.dtype == F32 and linear.bias.dtype == F32
    assert np.array_equal(linear.weight.data, np.full((2, 3), 1 / 3, F64).astype(F32))
