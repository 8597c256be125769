"""Hostile inputs to RoPE (module 12; imported from tinytorch.text.embeddings, where module 11 re-exports it): this subject's table of the bad-input battery
(tests/bad_input_battery.py): each case calls the API with one mistake and must raise the documented
error, naming the offending value, and change nothing; then the valid empty input and far position, how
mixed float dtypes combine, and the RoPE defects of issue 15.
"""
import numpy as np
import pytest

from tests.bad_input_battery import Case, check_case, check_empty, constructing, on
from tinytorch.core.autograd import gradcheck
from tinytorch.core.losses import cross_entropy
from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import RotaryEmbedding

F16, F32, F64 = np.float16, np.float32, np.float64
NAN = float("nan")


CASES = [
    # ---------------------------------------------------------------- shapes: wrong ranks and shapes
    Case("shapes/rope-width", on(lambda: RotaryEmbedding(4, max_seq_len=8), lambda r: r(np.ones((2, 6)))),
         ValueError, r"RotaryEmbedding\(dim=4\) needs x of shape \(\*, seq, 4\); got \(2, 6\)"),
    Case("shapes/rope-no-sequence-axis", on(lambda: RotaryEmbedding(4, max_seq_len=8), lambda r: r(np.ones(4))),
         ValueError, r"x of shape \(4,\) has no sequence axis"),
    Case("shapes/rope-positions-shape", on(lambda: RotaryEmbedding(4, max_seq_len=8),
                                           lambda r: r(np.ones((2, 5, 4)), positions=[0, 1, 100])),
         ValueError, r"positions of shape \(3,\) do not broadcast to x.shape\[:-1\] = \(2, 5\)"),
    Case("shapes/rope-float-positions", on(lambda: RotaryEmbedding(4, max_seq_len=8),
                                           lambda r: r(np.ones((3, 4)), positions=[100.0, 1.0, 2.0])),
         TypeError, r"positions must be integers; got dtype float64"),
    Case("shapes/rope-bool-positions", on(lambda: RotaryEmbedding(4, max_seq_len=8),
                                          lambda r: r(np.ones((2, 4)), positions=[True, False])),
         TypeError, r"positions must be integers; got dtype bool"),

    # ---------------------------------------------------------------- odd dims for pairwise (rotary) encodings
    Case("odd-dims/rope-5", constructing(lambda: RotaryEmbedding(5)),
         ValueError, r"RotaryEmbedding rotates pairs of numbers, so dim must be even; got dim=5"),
    Case("odd-dims/rope-1", constructing(lambda: RotaryEmbedding(1)),
         ValueError, r"dim must be even; got dim=1"),
    Case("odd-dims/rope-7-half-split", constructing(lambda: RotaryEmbedding(7, interleaved=False)),
         ValueError, r"dim must be even; got dim=7"),

    # ---------------------------------------------------------------- zero, negative and non-integer sizes
    Case("sizes/rope-base-none", constructing(lambda: RotaryEmbedding(4, base=None)),
         TypeError, r"base must be a number greater than 1; got None"),
    Case("sizes/rope-dim-0", constructing(lambda: RotaryEmbedding(0)),
         ValueError, r"dim must be a positive int; got 0"),
    Case("sizes/rope-max-seq-len-0", constructing(lambda: RotaryEmbedding(4, max_seq_len=0)),
         ValueError, r"max_seq_len must be a positive int; got 0"),
    Case("sizes/rope-base-nan", constructing(lambda: RotaryEmbedding(4, base=NAN)),
         ValueError, r"base must be a number greater than 1; got nan"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_raises_the_documented_error_and_changes_nothing(case):
    check_case(case)


# ------------------------------------------------------------------------------------------------ empty inputs (valid)

EMPTY = {
    "rope": (lambda: RotaryEmbedding(4)(np.zeros((2, 0, 4), F32)).data, np.zeros((2, 0, 4), F32)),
}


@pytest.mark.parametrize("name", EMPTY, ids=list(EMPTY))
def test_empty_inputs_are_valid_and_give_empty_results(name):
    check_empty(*EMPTY[name])


def test_a_far_rope_position_is_valid_and_computed_without_growing_the_cache():
    """A position far beyond max_seq_len (a stray 2**40, or the most negative int64) is rotated with angles
    computed for that call only: the cos/sin cache stays within 4 x max_seq_len rather than growing to 2**40
    rows (8 TiB), the result matches an independent float64 rotation, and gradients still flow."""
    rope = RotaryEmbedding(4, max_seq_len=8)
    x = np.random.default_rng(0).standard_normal((4, 4))
    positions = np.array([2**40, 3, -(2**40) - 1, 2**40 + 1])
    out = rope(Tensor(x, dtype=F64), positions=positions).data
    assert len(rope._cos) <= 4 * 8
    angles = positions[:, None].astype(F64) * 10000.0 ** (-np.arange(0, 4, 2) / 4)
    a, b = x[:, 0::2], x[:, 1::2]
    np.testing.assert_allclose(out[:, 0::2], a * np.cos(angles) - b * np.sin(angles), rtol=0, atol=1e-12)
    np.testing.assert_allclose(out[:, 1::2], a * np.sin(angles) + b * np.cos(angles), rtol=0, atol=1e-12)
    assert gradcheck(lambda t: rope(t, positions=positions), [Tensor(x, requires_grad=True, dtype=F64)])
    extreme = rope(Tensor(x[:1], dtype=F64), positions=[np.iinfo(np.int64).min]).data
    assert np.all(np.isfinite(extreme)) and np.isclose(np.linalg.norm(extreme), np.linalg.norm(x[0]))
    assert len(rope._cos) <= 4 * 8


# ------------------------------------------------------------------------------------------------ mixed float dtypes
# The documented behaviour is in tests/bad_input_battery.py's docstring.

FLOATS = [F16, F32, F64]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_mixed_float_dtypes_constants_take_the_tensors_dtype_and_rope_follows_its_input(dtype):
    x = Tensor(np.ones(2), dtype=dtype)
    assert (x * 3.0).dtype == dtype and (x + np.ones(2, F64)).dtype == dtype and (np.float64(2) - x).dtype == dtype
    assert RotaryEmbedding(4)(Tensor(np.ones((2, 4)), dtype=dtype)).dtype == dtype
    assert RotaryEmbedding(4)(np.ones((2, 4), dtype)).dtype == (F16 if dtype == F16 else F32), \
        "a raw ndarray becomes a Tensor first: float64 data gives float32 (the Tensor default)"
    assert cross_entropy(Tensor(np.zeros((2, 3)), dtype=dtype), [0, 1]).dtype == dtype


# ------------------------------------------------------------------------------------------------ issue 15's defects
# Found by the adversarial pass of issue 15, one test each (each failed before its fix); the numbers in the
# test names are the defect numbers.

def test_7_rotary_refuses_integer_input_instead_of_returning_zeros():
    rope = RotaryEmbedding(4)
    with pytest.raises(TypeError, match=r"RotaryEmbedding rotates float vectors; got dtype int64"):
        rope(np.ones((3, 4), dtype=np.int64))
    with pytest.raises(TypeError, match="got dtype int32"):
        rope(Tensor(np.ones((3, 4), dtype=np.int32), dtype=np.int32))


@pytest.mark.parametrize("dtype, position", [(np.int8, -128), (np.int16, -32768)])
def test_9_rope_at_the_most_negative_small_int_takes_the_right_angle(dtype, position):
    rope = RotaryEmbedding(4, max_seq_len=40_000)
    x = Tensor(np.random.default_rng(0).standard_normal((1, 4)), dtype=np.float64)
    narrow = rope(x, positions=np.array([position], dtype=dtype))
    wide = rope(x, positions=np.array([position], dtype=np.int64))
    angles = position * 10000.0 ** (-np.arange(0, 4, 2) / 4)
    a, b = x.data[0, 0::2], x.data[0, 1::2]
    expected = np.empty(4)
    expected[0::2], expected[1::2] = a * np.cos(angles) - b * np.sin(angles), a * np.sin(angles) + b * np.cos(angles)
    assert np.allclose(wide.data[0], expected, atol=1e-12)
    assert np.allclose(narrow.data[0], expected, atol=1e-12)


# ------------------------------------------------------------------------------------------------ issue 24: attention masks

from tinytorch.core.attention import MultiHeadAttention    # noqa: E402

X = np.ones((2, 3, 8), F32)


def _mha(**options):
    return lambda: MultiHeadAttention(8, 2, seed=0, **options)


MASK_CASES = [
    Case("masks/attn-mask-shape", on(_mha(), lambda m: m(X, np.ones((3, 4), bool))),
         ValueError, r"attn_mask of shape \(3, 4\) does not broadcast to the scores' shape .* = \(2, 2, 3, 3\)"),
    Case("masks/attn-mask-5d", on(_mha(), lambda m: m(X, np.ones((1, 1, 1, 3, 3), bool))),
         ValueError, r"attn_mask of shape \(1, 1, 1, 3, 3\) does not broadcast"),
    Case("masks/attn-mask-int", on(_mha(), lambda m: m(X, np.ones((3, 3), np.int64))),
         TypeError, r"attn_mask must be boolean or float; got dtype int64"),
    Case("masks/padding-shape", on(_mha(), lambda m: m(X, key_padding_mask=np.ones((2, 4), bool))),
         ValueError, r"key_padding_mask must have shape \(batch, keys\) = \(2, 3\); got \(2, 4\)"),
    Case("masks/padding-int", on(_mha(), lambda m: m(X, key_padding_mask=np.ones((2, 3), np.int8))),
         TypeError, r"key_padding_mask must be boolean or float; got dtype int8"),
    Case("masks/positions-without-rope", on(_mha(), lambda m: m(X, token_positions=np.arange(3))),
         ValueError, r"token_positions rotate queries and keys by RoPE, and this attention has no rope"),
    Case("masks/positions-float", on(_mha(rope=RotaryEmbedding(4)), lambda m: m(X, token_positions=np.ones(3))),
         ValueError, r"token_positions must be integers of shape \(seq,\) = \(3,\) or \(batch, seq\) = \(2, 3\); "
                     r"got dtype float64"),
    Case("masks/positions-shape", on(_mha(rope=RotaryEmbedding(4)), lambda m: m(X, token_positions=np.arange(4))),
         ValueError, r"token_positions must be integers of shape .* got dtype int64, shape \(4,\)"),
    Case("masks/need-weights-string", on(_mha(), lambda m: m(X, need_weights="yes")),
         TypeError, r"need_weights must be True or False; got 'yes'"),
    Case("masks/average-none", on(_mha(), lambda m: m(X, need_weights=True, average_attn_weights=None)),
         TypeError, r"average_attn_weights must be True or False; got None"),
]


@pytest.mark.parametrize("case", MASK_CASES, ids=[case.id for case in MASK_CASES])
def test_bad_mask_arguments_raise_the_documented_error_and_change_nothing(case):
    check_case(case)
