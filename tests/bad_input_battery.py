"""The bad-input battery: hostile inputs to the public API, one table of cases per subject.

Each subject's `test_bad_inputs.py` (tests/tensor/, tests/layers/, tests/embeddings/, ...) holds a table
`CASES`. Each case builds fresh objects, calls the API with one mistake, and checks three things:
the documented exception type, a message naming the offending value and the allowed range (a regex),
and no partial state change: every array, tensor, gradient, optimiser buffer, random-generator state and
attribute reachable from the objects involved is byte-identical before and after the failing call.

Where an empty input is valid, each subject's `test_empty_inputs_are_valid_and_give_empty_results` checks the
result instead (and a far RoPE position, which is valid too, has its own test in tests/attention/); how mixed
float dtypes behave is documented by the `test_mixed_float_dtypes_*` tests: an op's result follows NumPy's
promotion of its operands' dtypes (np.result_type), every gradient has the dtype of the tensor it belongs to,
Python numbers and plain NumPy arrays combined with a tensor take the tensor's dtype, a raw ndarray given to a
layer becomes a Tensor first (float64 data -> float32, the Tensor default), and parameters keep their dtype
through optimiser steps and loads.

The battery as a whole (at least 60 cases, every category) is checked by tests/project/test_bad_input_battery.py.
"""
from collections import namedtuple

import numpy as np
import pytest


# ------------------------------------------------------------------------------------------------ state snapshots

def state_of(obj, _seen=None):
    """A comparable picture of everything reachable from `obj`: arrays as dtype, shape and bytes, random
    generators as their state, objects through their attributes. Equal pictures mean nothing changed."""
    seen = set() if _seen is None else _seen
    if isinstance(obj, np.ndarray):
        return ("array", obj.dtype.str, obj.shape, obj.tobytes())
    if isinstance(obj, np.random.Generator):
        return ("rng", repr(obj.bit_generator.state))
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes, np.generic, type)):
        return ("value", repr(obj))                     # repr: NaN equals NaN
    if id(obj) in seen:
        return ("seen",)
    seen.add(id(obj))
    if isinstance(obj, dict):
        return ("dict", [(repr(key), state_of(value, seen)) for key, value in obj.items()])
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [state_of(item, seen) for item in obj])
    if isinstance(obj, (set, frozenset)):
        return ("set", sorted(map(repr, obj)))
    if hasattr(obj, "__dict__"):
        return (type(obj).__name__, [(name, state_of(value, seen)) for name, value in vars(obj).items()])
    return ("opaque", type(obj).__name__)


# ------------------------------------------------------------------------------------------------ case builders
# A case's `build()` makes fresh objects and returns (call, watched): `call()` must raise; the objects in
# `watched` must be unchanged afterwards.

Case = namedtuple("Case", "id build error match")


def on(make, action):
    "Build: make a fresh object, then `action(obj)` is the failing call; the object is watched."
    def build():
        obj = make()
        return (lambda: action(obj)), [obj]
    return build


def constructing(factory, *watched_makers):
    "Build: a constructor (or pure function) call; `watched_makers` make inputs it receives, which are watched."
    def build():
        watched = [make() for make in watched_makers]
        return (lambda: factory(*watched)), watched
    return build


def category(case):
    return case.id.split("/", 1)[0]


def check_case(case):
    "The battery's check: `case`'s call raises its documented error, and the watched objects are unchanged."
    call, watched = case.build()
    before = [state_of(obj) for obj in watched]
    with pytest.raises(case.error, match=case.match):
        call()
    after = [state_of(obj) for obj in watched]
    assert after == before, f"{case.id}: the failing call changed the state of {[type(o).__name__ for o in watched]}"


def check_empty(compute, expected):
    "A valid empty input: `compute()` gives exactly `expected` (shape, dtype and values)."
    result = np.asarray(compute())
    assert result.shape == expected.shape and result.dtype == expected.dtype
    np.testing.assert_array_equal(result, expected)
