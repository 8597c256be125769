"""Property tests for the tensor: random shapes, broadcast pairs, id multisets and reduction axes, each
compared with finite differences or a NumPy reference. segment_sum's: tests/autograd/test_properties.py."""
import numpy as np
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

from tinytorch.core.autograd import gradcheck
from tinytorch.core.tensor import Tensor

FAST = settings(max_examples=25, deadline=None)

BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}


def float64_param(rng, shape, away_from_zero=False):
    values = rng.standard_normal(shape)
    if away_from_zero:                                     # |v| in [0.5, 1.5]: a safe denominator
        values = np.where(values < 0, -1.0, 1.0) * (0.5 + rng.random(shape))
    return Tensor(values, requires_grad=True, dtype=np.float64)


@FAST
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
       op=st.sampled_from(sorted(BINARY)), seed=st.integers(0, 2**32 - 1))
def test_binary_ops_broadcast_and_match_finite_differences(shapes, op, seed):
    rng = np.random.default_rng(seed)
    shape_a, shape_b = shapes.input_shapes
    a = float64_param(rng, shape_a)
    b = float64_param(rng, shape_b, away_from_zero=op == "div")
    out = BINARY[op](a, b)
    assert out.shape == shapes.result_shape
    assert gradcheck(BINARY[op], [a, b])


@FAST
@given(vocab=st.integers(1, 8), dim=st.integers(1, 3), seed=st.integers(0, 2**32 - 1),
       ids_shape=st.sampled_from([(0,), (1,), (5,), (12,), (2, 3), (3, 4)]))
def test_gather_gradient_equals_np_add_at(vocab, dim, ids_shape, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(-vocab, vocab, size=ids_shape)     # negative ids name the same rows from the end
    table = float64_param(rng, (vocab, dim))
    upstream = rng.integers(-3, 4, size=ids_shape + (dim,)).astype(np.float64)
    table[ids].backward(upstream)
    expected = np.zeros((vocab, dim))
    np.add.at(expected, ids, upstream)
    np.testing.assert_array_equal(table.grad, expected)  # integer-valued: sums are exact in any order


@st.composite
def shape_and_axes(draw):
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    ndim = len(shape)
    chosen = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    signed = tuple(a - ndim if draw(st.booleans()) else a for a in chosen)
    axis = draw(st.sampled_from([None, signed, signed[0] if signed else None]))
    return shape, axis


@FAST
@given(case=shape_and_axes(), keepdims=st.booleans(), reduction=st.sampled_from(["sum", "mean"]),
       seed=st.integers(0, 2**32 - 1))
def test_reductions_over_random_axes(case, keepdims, reduction, seed):
    shape, axis = case
    x = float64_param(np.random.default_rng(seed), shape)
    out = getattr(x, reduction)(axis=axis, keepdims=keepdims)
    expected = getattr(x.data, reduction)(axis=axis, keepdims=keepdims)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out.data, expected)
    assert gradcheck(lambda x: getattr(x, reduction)(axis=axis, keepdims=keepdims), [x])
