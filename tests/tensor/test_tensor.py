"""Module 01, the Tensor: every differentiable op against finite differences, dtype rules,
errors on bad input, and the bookkeeping of gradients (no_grad, accumulation, grad_fn).

`tito test --module tensor` runs this file; breaking any op's backward makes it fail.
"""
import numpy as np
import pytest

from tinytorch.core.autograd import gradcheck, is_grad_enabled, no_grad
from tinytorch.core.tensor import Tensor, concatenate, stack

pytestmark = pytest.mark.usefixtures("both_kernels")    # run with the plain and with the fast kernels (module 18)


def param(rng, *shape, low=None):
    "A float64 tensor that requires grad; with `low`, values have magnitude in [low, low + 1] and random sign."
    values = rng.standard_normal(shape)
    if low is not None:
        values = np.sign(values + 1e-12) * (low + rng.random(shape))
    return Tensor(values, requires_grad=True, dtype=np.float64)


def positive(rng, *shape):
    "A float64 tensor with values in [0.5, 1.5] (for log, sqrt, division, powers)."
    return Tensor(0.5 + rng.random(shape), requires_grad=True, dtype=np.float64)


# ---------------------------------------------------------------- binary ops, with broadcasting

BROADCAST_PAIRS = [
    ((2, 3), (2, 3)),
    ((2, 3), (3,)),
    ((3,), (2, 3)),
    ((2, 1), (1, 3)),
    ((4, 1, 3), (2, 1)),
    ((), (2, 3)),
    ((2, 3), ()),
]

BINARY_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow_tensor_exponent": lambda a, b: a ** b,
}


@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("op", BINARY_OPS)
def test_binary_op_gradients_broadcast(op, shapes, rng):
    shape_a, shape_b = shapes
    a = positive(rng, *shape_a) if op == "pow_tensor_exponent" else param(rng, *shape_a)
    b = param(rng, *shape_b, low=0.5) if op == "div" else param(rng, *shape_b)
    out = BINARY_OPS[op](a, b)
    assert out.shape == np.broadcast_shapes(shape_a, shape_b)
    assert gradcheck(BINARY_OPS[op], [a, b])


def test_binary_op_checks_only_the_tensor_that_requires_grad(rng):
    a = param(rng, 2, 3)
    b = Tensor(rng.standard_normal(3), dtype=np.float64)
    assert gradcheck(lambda a, b: a * b + b / (a * a + 1), [a, b])
    assert b.grad is None


CONSTANT_OPS = {
    "x+c": lambda x: x + 2.5,
    "c+x": lambda x: 2.5 + x,
    "x-c": lambda x: x - 1.5,
    "c-x": lambda x: 1.5 - x,
    "x*c": lambda x: x * 3,
    "c*x": lambda x: -3 * x,
    "x/c": lambda x: x / 4.0,
    "c/x": lambda x: 2.0 / x,
    "x+array": lambda x: x + np.array([1.0, -2.0, 3.0]),
    "array-x": lambda x: np.array([1.0, -2.0, 3.0]) - x,
    "array*x": lambda x: np.array([[2.0], [-1.0]]) * x,
    "array/x": lambda x: np.array([[2.0], [-1.0]]) / x,
    "-x": lambda x: -x,
    "x**3": lambda x: x ** 3,
    "x**2": lambda x: x ** 2,
    "x**-1.5": lambda x: abs_(x) ** -1.5,
    "x**0.5": lambda x: abs_(x) ** 0.5,
    "x**array": lambda x: abs_(x) ** np.array([1.0, 2.0, 3.0]),
    "2**x": lambda x: 2 ** x,
    "0.5**x": lambda x: 0.5 ** x,
}


def abs_(x):
    "|x| built from differentiable ops (x has no zeros in these tests)."
    return (x * x).sqrt()


@pytest.mark.parametrize("op", CONSTANT_OPS)
def test_ops_with_constants_on_either_side(op, rng):
    x = param(rng, 2, 3, low=0.5)
    assert isinstance(CONSTANT_OPS[op](x), Tensor)
    assert gradcheck(CONSTANT_OPS[op], [x])


def test_reflected_ops_compute_the_right_values():
    x = Tensor([1.0, 2.0, 4.0], dtype=np.float64)
    np.testing.assert_allclose((10 - x).data, [9, 8, 6])
    np.testing.assert_allclose((8 / x).data, [8, 4, 2])
    np.testing.assert_allclose((2 ** x).data, [2, 4, 16])
    np.testing.assert_allclose((x ** 2).data, [1, 4, 16])
    np.testing.assert_allclose((x ** Tensor([2.0, 0.5, 0.5], dtype=np.float64)).data, [1, 2 ** 0.5, 2])
    np.testing.assert_allclose((np.array([1.0, 1.0, 1.0]) - x).data, [0, -1, -3])


# ---------------------------------------------------------------- matmul

MATMUL_SHAPES = [
    ((2, 3), (3, 4)),
    ((5, 2, 3), (5, 3, 4)),
    ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)),
    ((2, 1, 2, 3), (4, 3, 2)),
    ((3,), (3, 4)),
    ((2, 3), (3,)),
    ((3,), (3,)),
    ((3,), (2, 3, 4)),
    ((2, 4, 3), (3,)),
]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=lambda s: f"{s[0]}@{s[1]}")
def test_matmul_gradients(shapes, rng):
    a, b = param(rng, *shapes[0]), param(rng, *shapes[1])
    out = a @ b
    np.testing.assert_allclose(out.data, np.matmul(a.data, b.data))
    assert gradcheck(lambda a, b: a @ b, [a, b])


def test_matmul_with_array_on_either_side(rng):
    a = param(rng, 2, 3)
    m = rng.standard_normal((3, 2))
    assert isinstance(m.T @ a.T, Tensor)
    assert gradcheck(lambda a: a @ m, [a])
    assert gradcheck(lambda a: m @ a, [a])


# ---------------------------------------------------------------- reductions and shapes

AXES = [None, 0, 1, -1, (0, 2), (-1, 0), (0, 1, 2)]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("reduction", ["sum", "mean", "max"])
def test_reduction_gradients(reduction, axis, keepdims, rng):
    x = param(rng, 2, 3, 4)                   # continuous random values: no tied maxima
    out = getattr(x, reduction)(axis=axis, keepdims=keepdims)
    expected = getattr(x.data, reduction)(axis=axis, keepdims=keepdims)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out.data, expected)
    assert gradcheck(lambda x: getattr(x, reduction)(axis=axis, keepdims=keepdims), [x])


def test_max_shares_the_gradient_between_tied_maxima():
    x = Tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]], requires_grad=True, dtype=np.float64)
    x.max(axis=1).sum().backward()
    np.testing.assert_array_equal(x.grad, [[0, 0.5, 0.5], [0.5, 0, 0.5]])


SHAPE_OPS = {
    "reshape": lambda x: x.reshape(6, 4),
    "reshape_tuple": lambda x: x.reshape((4, -1)),
    "reshape_flat": lambda x: x.reshape(-1),
    "permute": lambda x: x.permute(2, 0, 1),
    "permute_tuple_negative": lambda x: x.permute((-1, 0, 1)),
    "transpose_default": lambda x: x.transpose(),
    "transpose_0_2": lambda x: x.transpose(0, 2),
    "T": lambda x: x.T,
}


@pytest.mark.parametrize("op", SHAPE_OPS)
def test_shape_op_gradients(op, rng):
    x = param(rng, 2, 3, 4)
    assert gradcheck(SHAPE_OPS[op], [x])


def test_shape_ops_match_numpy(rng):
    x = param(rng, 2, 3, 4)
    np.testing.assert_array_equal(x.permute(2, 0, 1).data, np.transpose(x.data, (2, 0, 1)))
    np.testing.assert_array_equal(x.transpose().data, np.swapaxes(x.data, -1, -2))
    np.testing.assert_array_equal(x.T.data, x.data.T)
    assert x.reshape(4, -1).shape == (4, 6)


# ---------------------------------------------------------------- indexing

INDEXES = {
    "int": lambda t: t[1],
    "negative_int": lambda t: t[-1],
    "int_pair": lambda t: t[1, 2],
    "slice": lambda t: t[1:4],
    "strided_slices": lambda t: t[::2, 1:],
    "ellipsis": lambda t: t[..., 1],
    "none": lambda t: t[None, 1],
    "none_middle": lambda t: t[:, None],
    "ids_repeated": lambda t: t[np.array([3, 1, 3, 3])],
    "ids_list": lambda t: t[[3, 1, 3, 3]],
    "ids_negative": lambda t: t[np.array([-1, 4, 0, -5, -1])],
    "ids_2d": lambda t: t[np.array([[0, 4], [4, 4], [2, 0]])],
    "pairs_repeated": lambda t: t[[0, 0, 2], [1, 1, 2]],
    "pairs_arrays": lambda t: t[np.array([1, 1, -1]), np.array([2, 2, 0])],
    "mask_2d": lambda t: t[t.data > 0],
    "mask_rows": lambda t: t[np.array([True, False, True, True, False])],
    "ids_then_slice": lambda t: t[[1, 1, 3], 1:],
    "slice_then_ids": lambda t: t[:, [0, 0, 2]],
    "int_tensor": lambda t: t[Tensor([3, 3, 0])],
    "int_tensor_2d": lambda t: t[Tensor([[1, 1], [4, 1]])],
    "tuple_with_tensor": lambda t: t[Tensor([1, 1, 2]), 2],
}


@pytest.mark.parametrize("name", INDEXES)
def test_getitem_gradients(name, rng):
    table = param(rng, 5, 3)
    out = INDEXES[name](table)
    index_of = {"int_tensor": np.array([3, 3, 0]), "int_tensor_2d": np.array([[1, 1], [4, 1]]),
                "tuple_with_tensor": (np.array([1, 1, 2]), 2)}
    if name in index_of:
        np.testing.assert_array_equal(out.data, table.data[index_of[name]])
    assert gradcheck(INDEXES[name], [table])


@pytest.mark.parametrize("index", [(np.array([1, 1, 0]),), (Ellipsis, 0, slice(None)), (np.array([[1, 1]]), slice(None), 2)],
                         ids=["ids", "ellipsis", "ids_2d_slice_int"])
def test_getitem_on_3d(index, rng):
    x = param(rng, 2, 3, 4)
    assert gradcheck(lambda x: x[index], [x])


def test_getitem_repeated_ids_accumulate_like_np_add_at(rng):
    table = param(rng, 5, 3)
    ids = np.array([3, 1, 3, 3])
    upstream = rng.standard_normal((4, 3))
    table[ids].backward(upstream)

    expected = np.zeros((5, 3))
    np.add.at(expected, ids, upstream)
    np.testing.assert_allclose(table.grad, expected, rtol=1e-12, atol=0)

    overwriting = np.zeros((5, 3))
    overwriting[ids] += upstream              # the classic bug: keeps one of the three row-3 gradients
    assert not np.allclose(overwriting, expected), "this case must be able to tell the two apart"

    table.grad = None
    table[ids].sum().backward()
    np.testing.assert_array_equal(table.grad[:, 0], [0, 1, 0, 3, 0])


def test_getitem_negative_and_positive_ids_of_one_row_accumulate(rng):
    table = param(rng, 5, 2)
    table[np.array([-1, 4, 4, -1])].sum().backward()
    np.testing.assert_array_equal(table.grad[:, 0], [0, 0, 0, 0, 4])


def test_getitem_paired_arrays_with_repeats_accumulate(rng):
    table = param(rng, 3, 3)
    rows, cols = np.array([0, 0, 2, 0]), np.array([1, 1, 2, 1])
    upstream = np.array([1.0, 2.0, 4.0, 8.0])
    table[rows, cols].backward(upstream)
    expected = np.zeros((3, 3))
    np.add.at(expected, (rows, cols), upstream)
    np.testing.assert_array_equal(table.grad, expected)
    assert table.grad[0, 1] == 11.0


def test_getitem_2d_ids_accumulate(rng):
    table = param(rng, 6, 2)
    ids = np.array([[5, 0, 5], [5, 5, 1]])
    upstream = rng.standard_normal((2, 3, 2))
    table[Tensor(ids)].backward(upstream)
    expected = np.zeros((6, 2))
    np.add.at(expected, ids, upstream)
    np.testing.assert_allclose(table.grad, expected, rtol=1e-12)


def test_getitem_out_of_range_id_names_it(rng):
    table = param(rng, 5, 3)
    with pytest.raises(IndexError, match="7"):
        table[np.array([1, 7])]


# ---------------------------------------------------------------- elementwise functions

UNARY = {
    "exp": (lambda x: x.exp(), "normal"),
    "log": (lambda x: x.log(), "positive"),
    "sqrt": (lambda x: x.sqrt(), "positive"),
    "tanh": (lambda x: x.tanh(), "normal"),
    "relu": (lambda x: x.relu(), "away_from_zero"),
    "sigmoid": (lambda x: x.sigmoid(), "normal"),
    "gelu": (lambda x: x.gelu(), "normal"),
    "softmax_last": (lambda x: x.softmax(), "normal"),
    "softmax_axis0": (lambda x: x.softmax(axis=0), "normal"),
    "softmax_axis1": (lambda x: x.softmax(axis=1), "normal"),
    "log_softmax_last": (lambda x: x.log_softmax(), "normal"),
    "log_softmax_axis0": (lambda x: x.log_softmax(axis=0), "normal"),
    "log_softmax_axis_neg2": (lambda x: x.log_softmax(axis=-2), "normal"),
}


@pytest.mark.parametrize("name", UNARY)
def test_elementwise_gradients(name, rng):
    fn, domain = UNARY[name]
    x = {"normal": lambda: param(rng, 2, 3, 4), "positive": lambda: positive(rng, 2, 3, 4),
         "away_from_zero": lambda: param(rng, 2, 3, 4, low=0.1)}[domain]()
    assert gradcheck(fn, [x])


# One test per op, so a mistake in one exercise fails only that exercise's test
# (the summary blames the first exercise a failing test ran).

def test_relu_values():
    x = Tensor([-2.0, 0.0, 1.5], dtype=np.float64)
    np.testing.assert_allclose(x.relu().data, [0, 0, 1.5])


def test_sigmoid_values_and_extremes():
    x = Tensor([-2.0, 0.0, 1.5], dtype=np.float64)
    np.testing.assert_allclose(x.sigmoid().data, 1 / (1 + np.exp(-x.data)))
    assert np.isfinite(Tensor([-1000.0, 1000.0]).sigmoid().data).all()


def test_gelu_values():
    x = Tensor([-2.0, 0.0, 1.5], dtype=np.float64)
    c = np.sqrt(2 / np.pi)
    np.testing.assert_allclose(x.gelu().data, 0.5 * x.data * (1 + np.tanh(c * (x.data + 0.044715 * x.data ** 3))))


LOGITS = [[1.0, 2.0, 3.0], [1000.0, -1000.0, 0.0]]


def test_softmax_values_sum_to_one_even_for_large_logits():
    probabilities = Tensor(LOGITS, dtype=np.float64).softmax(axis=-1).data
    np.testing.assert_allclose(probabilities.sum(axis=-1), [1, 1])
    np.testing.assert_allclose(probabilities[0], np.exp([-2.0, -1.0, 0.0]) / np.exp([-2.0, -1.0, 0.0]).sum())


def test_log_softmax_values_finite_for_large_logits():
    out = Tensor(LOGITS, dtype=np.float64).log_softmax().data
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out[0], [-2.0, -1.0, 0.0] - np.log(np.exp([-2.0, -1.0, 0.0]).sum()))


# ---------------------------------------------------------------- joining

@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenate_gradients(axis, rng):
    sizes = [1, 3, 2]
    parts = [param(rng, *[n if d == axis % 3 else 2 for d in range(3)]) for n in sizes]
    out = concatenate(parts, axis=axis)
    np.testing.assert_array_equal(out.data, np.concatenate([p.data for p in parts], axis=axis))
    assert gradcheck(lambda *ps: concatenate(ps, axis=axis), parts)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_stack_gradients(axis, rng):
    parts = [param(rng, 2, 3) for _ in range(3)]
    out = stack(parts, axis=axis)
    np.testing.assert_array_equal(out.data, np.stack([p.data for p in parts], axis=axis))
    assert gradcheck(lambda *ps: stack(ps, axis=axis), parts)


def test_stack_rejects_different_shapes_naming_them(rng):
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)|\(3, 2\).*\(2, 3\)"):
        stack([param(rng, 2, 3), param(rng, 3, 2)])


# ---------------------------------------------------------------- dtype rules

def test_float64_input_becomes_float32_by_default():
    assert Tensor(np.zeros(3, dtype=np.float64)).dtype == np.float32
    assert Tensor([1.5, 2.5]).dtype == np.float32
    assert Tensor(3.0).dtype == np.float32


def test_dtype_keyword_is_respected():
    assert Tensor([1.5, 2.5], dtype=np.float64).dtype == np.float64
    assert Tensor(np.zeros(3), dtype=np.float16).dtype == np.float16
    assert Tensor([1, 2], dtype=np.float32).dtype == np.float32


def test_integers_stay_integers_and_exact():
    big_id = 16_777_217                        # 2**24 + 1: float32 would round it to 16,777,216
    ids = Tensor([big_id, 3])
    assert ids.dtype == np.int64
    assert int(ids.data[0]) == big_id
    assert Tensor(np.array([1, 2], dtype=np.int32)).dtype == np.int32
    assert Tensor(np.array([1, 2], dtype=np.uint8)).dtype == np.uint8


def test_bools_stay_bools():
    mask = Tensor([True, False])
    assert mask.dtype == np.bool_


def test_only_float_tensors_can_require_grad():
    with pytest.raises(TypeError, match="int64"):
        Tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError):
        Tensor([True], requires_grad=True)
    ids = Tensor([1, 2])
    with pytest.raises(TypeError):
        ids.requires_grad = True


@pytest.mark.parametrize("data", [["a", "b"], np.array([object(), 1], dtype=object), [1 + 2j]], ids=["str", "object", "complex"])
def test_non_numeric_data_is_rejected(data):
    with pytest.raises(TypeError, match="dtype"):
        Tensor(data)


DTYPE_OPS = {
    "x*float": lambda x, y: x * 0.5,
    "float*x": lambda x, y: 0.5 * x,
    "x*int": lambda x, y: x * 2,
    "int-x": lambda x, y: 2 - x,
    "x/int": lambda x, y: x / 2,
    "x*array": lambda x, y: x * np.ones(3),
    "x*int_array": lambda x, y: x * np.arange(3),
    "x*mask": lambda x, y: x * np.array([True, False, True]),
    "x+y": lambda x, y: x + y,
    "x**2": lambda x, y: x ** 2,
    "x**np_float": lambda x, y: x ** np.float64(2.0),
    "2**x": lambda x, y: 2 ** x,
    "x**y": lambda x, y: x ** y,
    "x@y": lambda x, y: x @ y,
    "sum": lambda x, y: x.sum(axis=0),
    "mean": lambda x, y: x.mean(),
    "max": lambda x, y: x.max(axis=1),
    "getitem": lambda x, y: x[[1, 1, 0]],
    "exp": lambda x, y: x.exp(),
    "log": lambda x, y: x.log(),
    "sqrt": lambda x, y: x.sqrt(),
    "tanh": lambda x, y: x.tanh(),
    "relu": lambda x, y: x.relu(),
    "sigmoid": lambda x, y: x.sigmoid(),
    "gelu": lambda x, y: x.gelu(),
    "softmax": lambda x, y: x.softmax(),
    "log_softmax": lambda x, y: x.log_softmax(),
    "concatenate": lambda x, y: concatenate([x, x], axis=0),
    "stack": lambda x, y: stack([x, x]),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("op", DTYPE_OPS)
def test_ops_preserve_float_dtype_and_gradients_match_parameter_dtype(op, dtype, rng):
    x = Tensor(0.5 + rng.random((2, 3)), requires_grad=True, dtype=dtype)
    y = Tensor(0.5 + rng.random(3), requires_grad=True, dtype=dtype)
    out = DTYPE_OPS[op](x, y)
    assert out.dtype == dtype, f"{op} turned {np.dtype(dtype)} into {out.dtype}"
    out.sum().backward()
    assert x.grad.dtype == dtype
    if y.grad is not None:
        assert y.grad.dtype == dtype


def test_float64_times_python_float_stays_float64():
    assert (Tensor([1.0], dtype=np.float64) * 0.1).dtype == np.float64


def test_ndarray_times_tensor_returns_a_tensor():
    x = Tensor([1.0, 2.0], requires_grad=True)
    out = np.array([3.0, 4.0]) * x
    assert isinstance(out, Tensor)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.data, [3, 8])
    assert type(out._grad_fn).__name__ == "MulBackward"


def test_gradient_dtype_matches_mixed_precision_parameters(rng):
    w32 = Tensor(rng.standard_normal(3), requires_grad=True)                    # float32
    w64 = Tensor(rng.standard_normal(3), requires_grad=True, dtype=np.float64)
    (w32 * w64).sum().backward()
    assert w32.grad.dtype == np.float32 and w64.grad.dtype == np.float64


def test_integer_ops_stay_integer():
    ids = Tensor([1, 2, 3])
    assert (ids + 1).dtype.kind == "i"
    assert (ids * ids).dtype.kind == "i"
    assert (ids * 0.5).dtype == np.float32      # a float constant gives the default float dtype, as in PyTorch


def test_np_array_of_tensor_copies_and_asarray_shares():
    x = Tensor([1.0, 2.0])
    copied = np.array(x)
    copied[0] = 99.0
    assert x.data[0] == 1.0
    assert np.asarray(x) is x.data or np.shares_memory(np.asarray(x), x.data)
    assert np.asarray(x, dtype=np.float64).dtype == np.float64


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_mismatched_shapes_name_both(op):
    a, b = Tensor(np.ones((2, 3))), Tensor(np.ones((4,)))
    with pytest.raises(ValueError) as error:
        BINARY_OPS[op](a, b)
    assert "(2, 3)" in str(error.value) and "(4,)" in str(error.value)


def test_matmul_inner_dimension_mismatch_names_shapes_and_dims():
    with pytest.raises(ValueError) as error:
        Tensor(np.ones((2, 3))) @ Tensor(np.ones((4, 5)))
    message = str(error.value)
    assert "(2, 3)" in message and "(4, 5)" in message and "3" in message and "4" in message


def test_matmul_batch_mismatch_names_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3, 4\).*\(3, 4, 5\)"):
        Tensor(np.ones((2, 3, 4))) @ Tensor(np.ones((3, 4, 5)))


def test_matmul_of_a_scalar_is_rejected():
    with pytest.raises(ValueError, match=r"\(\)"):
        Tensor(2.0) @ Tensor(np.ones(3))


def test_backward_on_non_scalar_without_gradient_says_what_to_pass():
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ValueError) as error:
        (x * 2).backward()
    message = str(error.value)
    assert "(2, 3)" in message and "gradient" in message and ".sum()" in message


def test_backward_without_requires_grad_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="requires grad"):
        (Tensor([1.0]) * 2).sum().backward()
    x = Tensor([1.0], requires_grad=True)
    with no_grad():
        y = (x * 2).sum()
    with pytest.raises(RuntimeError):
        y.backward()


def test_backward_gradient_of_wrong_shape_names_both():
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ValueError) as error:
        (x * 2).backward(np.ones((3, 2)))
    assert "(3, 2)" in str(error.value) and "(2, 3)" in str(error.value)


def test_item_needs_one_element():
    assert Tensor([[4.0]]).item() == 4.0
    assert isinstance(Tensor([7]).item(), int)
    with pytest.raises(ValueError, match=r"\(2,\)"):
        Tensor([1.0, 2.0]).item()


@pytest.mark.parametrize("dims", [(0,), (0, 0), (0, 2), (0, -3), (1, 1), (0, 1, 2)])
def test_permute_with_bad_dims(dims):
    with pytest.raises(ValueError, match="permute"):
        Tensor(np.ones((2, 3))).permute(*dims)


# ---------------------------------------------------------------- graph bookkeeping

def test_no_grad_records_nothing():
    x = Tensor([1.0, 2.0], requires_grad=True)
    with no_grad():
        assert not is_grad_enabled()
        y = x * 2 + 1
        z = y.exp().sum()
    assert is_grad_enabled()
    for t in (y, z):
        assert not t.requires_grad and t._grad_fn is None and t.is_leaf
    np.testing.assert_allclose(y.data, [3, 5])


def test_detach_shares_data_but_not_the_graph():
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = (x * 3).detach()
    assert not y.requires_grad and y._grad_fn is None
    z = x * 2
    d = z.detach()
    assert np.shares_memory(d.data, z.data)
    (d * x).sum().backward()                # d is a constant here: dx = d
    np.testing.assert_allclose(x.grad, [2, 4])


def test_zero_grad_forgets_and_backward_accumulates():
    x = Tensor([1.0, 2.0], requires_grad=True, dtype=np.float64)
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [6, 6])
    x.zero_grad()
    assert x.grad is None
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [3, 3])


def test_value_used_twice_gets_both_contributions():
    x = Tensor([1.0, -2.0, 3.0], requires_grad=True, dtype=np.float64)
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad, 2 * x.data)
    x.zero_grad()
    (x + x).sum().backward()
    np.testing.assert_array_equal(x.grad, [2, 2, 2])
    x.zero_grad()
    y = x * 3
    (y * y + y).sum().backward()            # d/dx (9x² + 3x) = 18x + 3
    np.testing.assert_allclose(x.grad, 18 * x.data + 3)


def test_leaves_get_their_own_gradient_arrays():
    a = Tensor([1.0, 2.0], requires_grad=True)
    b = Tensor([3.0, 4.0], requires_grad=True)
    (a + b).sum().backward()                # the add hands both inputs the same upstream array
    assert not np.shares_memory(a.grad, b.grad)
    a.grad *= 10                            # e.g. in-place gradient clipping
    np.testing.assert_array_equal(b.grad, [1, 1])


def test_backward_on_a_scalar_leaf_and_with_explicit_gradient():
    x = Tensor([[1.0, 2.0]], requires_grad=True, dtype=np.float64)
    (x * 4).backward(Tensor([[1.0, -1.0]], dtype=np.float64))
    np.testing.assert_array_equal(x.grad, [[4, -4]])
    s = Tensor(3.0, requires_grad=True)
    s.backward()
    assert s.grad == 1.0


GRAD_FN_NAMES = {
    "AddBackward": lambda a, b, c: a + b,
    "SubBackward": lambda a, b, c: a - b,
    "MulBackward": lambda a, b, c: a * b,
    "DivBackward": lambda a, b, c: a / b,
    "NegBackward": lambda a, b, c: -a,
    "PowBackward": lambda a, b, c: a ** 2,
    "MatMulBackward": lambda a, b, c: a @ c,
    "SumBackward": lambda a, b, c: a.sum(),
    "MeanBackward": lambda a, b, c: a.mean(),
    "MaxBackward": lambda a, b, c: a.max(),
    "ReshapeBackward": lambda a, b, c: a.reshape(-1),
    "PermuteBackward": lambda a, b, c: a.T,
    "GetItemBackward": lambda a, b, c: a[0],
    "ExpBackward": lambda a, b, c: a.exp(),
    "LogBackward": lambda a, b, c: a.log(),
    "SqrtBackward": lambda a, b, c: a.sqrt(),
    "TanhBackward": lambda a, b, c: a.tanh(),
    "ReLUBackward": lambda a, b, c: a.relu(),
    "SigmoidBackward": lambda a, b, c: a.sigmoid(),
    "GELUBackward": lambda a, b, c: a.gelu(),
    "SoftmaxBackward": lambda a, b, c: a.softmax(),
    "LogSoftmaxBackward": lambda a, b, c: a.log_softmax(),
    "ConcatenateBackward": lambda a, b, c: concatenate([a, b]),
    "StackBackward": lambda a, b, c: stack([a, b]),
}


@pytest.mark.parametrize("name", GRAD_FN_NAMES)
def test_grad_fn_type_names_the_op(name):
    a = Tensor([[1.0, 2.0]], requires_grad=True)
    b = Tensor([[3.0, 4.0]], requires_grad=True)
    c = Tensor([[5.0], [6.0]], requires_grad=True)
    out = GRAD_FN_NAMES[name](a, b, c)
    # the op's class, or with module 18's fast kernels on, a subclass of it (FoldedMatMulBackward is a MatMulBackward)
    assert name in [cls.__name__ for cls in type(out._grad_fn).__mro__]
    assert not out.is_leaf and out.requires_grad
    assert a.is_leaf and b.is_leaf
    assert all(inp is a or inp is b or inp is c for inp in out._grad_fn.inputs)
    assert name in repr(out)


def test_constants_make_no_graph():
    out = Tensor([1.0]) * Tensor([2.0])
    assert out._grad_fn is None and not out.requires_grad


def test_properties_and_repr():
    x = Tensor(np.zeros((2, 3, 4)), requires_grad=True)
    assert (x.shape, x.ndim, x.size, len(x)) == ((2, 3, 4), 3, 24, 2)
    assert x.numpy() is x.data
    assert "requires_grad=True" in repr(x) and "float32" in repr(x)


def test_paired_index_backward_allocates_no_position_label_per_element():
    "x[rows, cols] finds flat positions directly; labelling every element (int64) would triple the memory."
    import tracemalloc
    x = Tensor(np.zeros((2000, 2000), dtype=np.float32), requires_grad=True)   # 16 MB; labels would be 32 MB
    picked = x[np.array([1, 1, 1999]), np.array([0, 0, -1])]
    tracemalloc.start()
    picked.backward(np.ones(3, dtype=np.float32))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1.5 * x.data.nbytes, f"backward peaked at {peak / 1e6:.0f} MB for a {x.data.nbytes / 1e6:.0f} MB input"
    assert x.grad[1, 0] == 2.0 and x.grad[1999, 1999] == 1.0 and x.grad.sum() == 3.0


# ---------------------------------------------------------------- issue 23, second part: integer inputs, PyTorch's promotion

@pytest.mark.parametrize("op", ["exp", "log", "sqrt", "tanh", "sigmoid", "gelu", "softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_])
def test_float_functions_of_integers_give_float32(op, dtype):
    x = Tensor(np.array([0, 1, 2]).astype(dtype))
    with np.errstate(divide="ignore"):                                          # log(0) = -inf, as in torch
        out, expected = getattr(x, op)(), getattr(Tensor(x.data.astype(np.float32)), op)()
    assert out.dtype == np.float32, f"{op} of {np.dtype(dtype)} gave {out.dtype}"
    np.testing.assert_allclose(out.data, expected.data, rtol=1e-6)


def test_sigmoid_of_integers_is_not_rounded_to_0_or_1():
    assert np.allclose(Tensor([0, 1, 2]).sigmoid().data, [0.5, 0.7310586, 0.8807971])


@pytest.mark.parametrize("int_dtype", [np.int64, np.int32, np.int8, np.uint8, np.bool_])
@pytest.mark.parametrize("op", ["__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
                                "__truediv__", "__rtruediv__"])
def test_integer_tensor_with_float32_tensor_gives_float32(int_dtype, op):
    ints, floats = Tensor(np.array([1, 2, 1]).astype(int_dtype)), Tensor([0.5, 2.0, 4.0], requires_grad=True)
    out = getattr(floats, op)(ints)
    assert out.dtype == np.float32, f"float32 {op} {np.dtype(int_dtype)} gave {out.dtype}"
    out = getattr(ints, op)(floats)
    assert out.dtype == np.float32, f"{np.dtype(int_dtype)} {op} float32 gave {out.dtype}"
    out.sum().backward()
    assert floats.grad.dtype == np.float32


def test_integer_division_and_float_constants_give_float32_as_in_pytorch():
    ints = Tensor([1, 2, 3])
    assert (ints / 2).dtype == np.float32 and (ints / ints).dtype == np.float32 and (1 / ints).dtype == np.float32
    assert (ints * 0.5).dtype == np.float32 and (0.5 + ints).dtype == np.float32
    assert (ints + 1).dtype == np.int64 and (ints * ints).dtype == np.int64       # integers stay integers
    assert (Tensor([1.0], dtype=np.float64) + ints).dtype == np.float64          # a float64 tensor stays float64
    assert (Tensor([1.5]) @ Tensor([[2]])).dtype == np.float32


# ---------------------------------------------------------------- issue 23, second part: flags are True or False

@pytest.mark.parametrize("value", ["no", 1, None, np.array([True])])
def test_requires_grad_must_be_a_bool(value):
    with pytest.raises(TypeError, match="requires_grad must be True or False"):
        Tensor([1.0], requires_grad=value)
    x = Tensor([1.0])
    with pytest.raises(TypeError, match="requires_grad"):
        x.requires_grad = value
    assert x.requires_grad is False


@pytest.mark.parametrize("reduction", ["sum", "mean", "max"])
def test_keepdims_must_be_a_bool(reduction):
    with pytest.raises(TypeError, match="keepdims must be True or False"):
        getattr(Tensor([[1.0, 2.0]]), reduction)(axis=1, keepdims="no")


def test_the_mean_of_integers_is_float32():
    x = Tensor([1, 2, 4])
    assert x.mean().dtype == np.float32 and np.isclose(x.mean().item(), 7 / 3)
    assert x.sum().dtype == np.int64 and x.max().dtype == np.int64                # these stay integers, as in torch


@pytest.mark.parametrize("shape", [(2, 0), (2, 1)])
def test_softmax_names_a_bad_axis(shape):
    for op in ("softmax", "log_softmax"):
        with pytest.raises(IndexError, match="axis 3 is out of range"):
            getattr(Tensor(np.ones(shape)), op)(axis=3)


def test_matmul_method_is_the_at_operator_with_its_gradient(rng):
    "Issue 24: `Tensor.matmul`, PyTorch's method name, is `@` (same values, gradients and errors)."
    a, b = param(rng, 2, 3, 4), param(rng, 4, 5)
    np.testing.assert_array_equal(a.matmul(b).data, (a @ b).data)
    assert gradcheck(lambda a, b: a.matmul(b), [a, b])
    assert isinstance(a.matmul(rng.standard_normal((4,))), Tensor)
    with pytest.raises(ValueError, match=r"\(2, 3, 4\)"):
        a.matmul(param(rng, 5, 2))
