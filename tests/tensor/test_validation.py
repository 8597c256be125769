"""tinytorch.core.validation: the one home of argument checks, each with one wording."""
import numpy as np
import pytest

from tinytorch.core.tensor import Tensor
from tinytorch.core.validation import (as_ids, check_seed, cpu_device, expect_equal, expect_error, flag, float_dtype,
                                       index_or_none, is_int, new_rng, nonnegative_int, number_above, number_at_least,
                                       one_of, positive_int, size)


@pytest.mark.parametrize("value", [1, np.int8(3), np.uint64(2**63)])
def test_positive_int_returns_python_ints(value):
    assert positive_int("n", value) == int(value) and type(positive_int("n", value)) is int


@pytest.mark.parametrize("value, error", [(0, ValueError), (-1, ValueError), (True, TypeError), (2.0, TypeError),
                                          ("3", TypeError), (None, TypeError)])
def test_positive_int_refuses_with_the_name_and_value(value, error):
    with pytest.raises(error, match=r"n must be a positive int|missing required argument n"):
        positive_int("n", value)


def test_size_takes_exactly_one_spelling():
    assert size("embedding_dim", 4) == size("embedding_dim", None, "embed_dim", 4) == 4
    with pytest.raises(TypeError, match="got both embedding_dim=4 and embed_dim=5"):
        size("embedding_dim", 4, "embed_dim", 5)
    with pytest.raises(TypeError, match=r"missing required argument embedding_dim \(or its alias embed_dim\)"):
        size("embedding_dim", None, "embed_dim", None)


def test_flag_one_of_number_above_and_nonnegative_int():
    assert flag("sparse", np.bool_(False)) is False
    for bad in ("no", 1, None):
        with pytest.raises(TypeError, match="sparse must be True or False"):
            flag("sparse", bad)
    assert one_of("mode", "max", ("sum", "max")) == "max"
    with pytest.raises(ValueError, match=r"unknown mode 'avg'; choose one of 'sum', 'max'"):
        one_of("mode", "avg", ("sum", "max"))
    with pytest.raises(ValueError, match="unknown pos 1"):
        one_of("pos", 1, (True, None))              # 1 == True in Python, but it is not the flag True
    assert number_above("base", 2, 1, "a number greater than 1") == 2
    with pytest.raises(ValueError, match="got nan"):
        number_above("base", float("nan"), 1, "a number greater than 1")
    with pytest.raises(TypeError, match="got True"):
        number_above("base", True, 0, "a positive number")
    assert number_at_least("lr", 0) == 0.0 and type(number_at_least("lr", np.int32(2))) is float
    for bad, error, words in ((-1e-8, ValueError, r"eps must be >= 0; got eps=-1e-08"),
                              (float("nan"), ValueError, r"eps must be >= 0; got eps=nan"),
                              (True, TypeError, r"eps must be a number; got True"),
                              (None, TypeError, r"eps must be a number; got None")):
        with pytest.raises(error, match=words):
            number_at_least("eps", bad)
    with pytest.raises(ValueError, match=r"beta must be >= 0.5; got beta=0.25"):
        number_at_least("beta", 0.25, 0.5)
    assert nonnegative_int("start", np.int16(0)) == 0
    with pytest.raises(ValueError, match=r"start must be a non-negative int \(the first position\); got -1"):
        nonnegative_int("start", -1, "the first position")


def test_index_or_none_and_ids():
    assert index_or_none("padding_idx", None, 5, "a vocabulary") is None
    assert index_or_none("padding_idx", -5, 5, "a vocabulary") == 0
    with pytest.raises(ValueError, match=r"padding_idx=5 is outside \[-5, 5\) for a vocabulary of 5"):
        index_or_none("padding_idx", 5, 5, "a vocabulary")
    assert as_ids(Tensor([1, 2]), 3).tolist() == [1, 2]
    assert as_ids([], 3).dtype == np.int64
    converted = as_ids(np.array([[1, 2]], dtype=object), 3)
    assert converted.dtype == np.int64 and converted.tolist() == [[1, 2]]
    with pytest.raises(IndexError, match=rf"token id {2**64} at position \(1,\) is out of range \[0, 3\)"):
        as_ids(np.array([1, 2**64], dtype=object), 3)
    with pytest.raises(TypeError, match="token ids must be integers"):
        as_ids(np.array([1, "a"], dtype=object), 3)
    with pytest.raises(ValueError, match="rectangular"):
        as_ids([[1], [1, 2]], 3)


def test_dtype_device_and_seed():
    assert float_dtype(None) == np.float32 and float_dtype("float16") == np.float16
    with pytest.raises(TypeError, match="holds floats; got dtype int32"):
        float_dtype(np.int32)
    assert cpu_device(None) is None and cpu_device("cpu") is None
    with pytest.raises(ValueError, match="device='mps' is not available"):
        cpu_device("mps")
    for good in (None, 0, np.random.SeedSequence(1), np.random.default_rng(2)):
        assert check_seed(good) is good
    for bad, error in ((-1, ValueError), (1.5, TypeError), ("7", TypeError)):
        with pytest.raises(error, match="seed must be a non-negative int"):
            check_seed(bad)
    generator = np.random.default_rng(3)
    assert new_rng(generator) is generator


def test_inline_checks_show_expected_and_got():
    with pytest.raises(AssertionError, match=r"(?s)rows.*expected \(shape \(2,\)\):\n\[1 3\].*got \(shape \(2,\)\):\n\[1 2\]"):
        expect_equal("rows", [1, 2], [1, 3])
    expect_equal("Tensors compare by value", Tensor([1.0, 2.0]), np.array([1.0, 2.0]))
    with pytest.raises(AssertionError, match="nothing was raised"):
        expect_error(ValueError, "x", lambda: None)
    with pytest.raises(AssertionError, match="expected ValueError.*got TypeError"):
        expect_error(ValueError, "x", lambda: int([]))
    assert is_int(np.int64(1)) and not is_int(True)
