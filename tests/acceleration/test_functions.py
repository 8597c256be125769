"""Module 18's two fast autograd Functions, `FoldedMatMulBackward` (the `matmul` kernel) and
`SavedProbabilitiesLogSoftmaxBackward` (the `log_softmax` kernel), against the learner's plain ones.

They change the order in which BLAS adds products (one (B·T, k) @ (k, n) instead of B products), so the
numbers agree to float rounding, not bit for bit: compared with float32/float64 tolerances; and both are
gradchecked in float64. The model-level check (Hugging Face parity with the fast kernels on) is in
tests/acceleration/test_models.py.
"""
import numpy as np
import pytest

from tinytorch import fast
from tinytorch.core import kernels
from tinytorch.core.autograd import gradcheck
from tinytorch.core.tensor import LogSoftmaxBackward, MatMulBackward, Tensor

TOLERANCE = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}

# (a shape, b shape): the fold's case first (a shared 2-D weight under batch axes), then every case it leaves alone
MATMUL_SHAPES = [((8, 5, 3), (3, 4)), ((2, 3, 5, 3), (3, 4)), ((1, 1, 3), (3, 2)), ((0, 5, 3), (3, 4)),
                 ((5, 3), (3, 4)), ((3,), (3, 4)), ((2, 5, 3), (3,)), ((2, 5, 3), (2, 3, 4)), ((2, 5, 3), (1, 3, 4)),
                 ((5, 3), (2, 3, 4)), ((3,), (3,))]


def both_ways(fn):
    "fn() with the plain kernels, then with the fast ones; the mode is restored."
    with fast.fast_kernels(on=False):
        plain = fn()
    with fast.fast_kernels():
        quick = fn()
    return plain, quick


def matmul_run(a_shape, b_shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = Tensor(rng.standard_normal(a_shape), requires_grad=True, dtype=dtype)
    b = Tensor(rng.standard_normal(b_shape), requires_grad=True, dtype=dtype)

    def run():
        a.grad = b.grad = None
        out = a @ b
        out.backward(np.random.default_rng(seed + 1).standard_normal(out.shape).astype(dtype))
        return out.data, a.grad, b.grad, type(out._grad_fn)
    return run


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("a_shape,b_shape", MATMUL_SHAPES, ids=str)
def test_folded_matmul_equals_the_plain_one_in_value_gradient_shape_and_dtype(a_shape, b_shape, dtype):
    plain, quick = both_ways(matmul_run(a_shape, b_shape, dtype))
    for got, want, what in zip(quick[:3], plain[:3], ("a @ b", "a.grad", "b.grad")):
        assert got.shape == want.shape and got.dtype == want.dtype == dtype, what
        np.testing.assert_allclose(got, want, **TOLERANCE[dtype], err_msg=what)
    assert plain[3] is MatMulBackward
    assert quick[3] is fast.FoldedMatMulBackward and issubclass(quick[3], MatMulBackward)


def test_the_fold_is_the_path_for_a_shared_weight_and_the_plain_backward_the_rest(monkeypatch):
    calls = []
    plain_backward = MatMulBackward.backward
    monkeypatch.setattr(MatMulBackward, "backward", staticmethod(lambda ctx, g: calls.append(1) or plain_backward(ctx, g)))
    with fast.fast_kernels():
        matmul_run((4, 5, 3), (3, 2), np.float64)()         # folded: the learner's backward is not called
        assert calls == []
        matmul_run((4, 5, 3), (4, 3, 2), np.float64)()      # batched b: the learner's backward does it
        assert calls == [1]


def test_a_tied_heads_transposed_table_gets_its_gradient_in_the_tables_own_layout():
    "hidden @ table.T (a tied output head): the table's gradient comes back C-ordered, equal to the plain one."
    rng = np.random.default_rng(5)
    hidden, table_data = rng.standard_normal((2, 3, 4)), rng.standard_normal((6, 4))     # (B, T, d), (V, d)

    def run():
        table = Tensor(table_data, requires_grad=True, dtype=np.float64)
        h = Tensor(hidden, requires_grad=True, dtype=np.float64)
        out = h @ table.T                                                               # (2, 3, 6)
        out.backward(np.random.default_rng(6).standard_normal(out.shape))
        return out.data, h.grad, table.grad
    plain, quick = both_ways(run)
    for got, want in zip(quick, plain):
        np.testing.assert_allclose(got, want, **TOLERANCE[np.float64])
    assert quick[2].flags.c_contiguous                  # an F-ordered gradient made adding another one a strided pass
    table = Tensor(table_data, requires_grad=True, dtype=np.float64)
    with fast.fast_kernels():
        assert gradcheck(lambda x, t: x @ t.T, [Tensor(hidden, requires_grad=True, dtype=np.float64), table])


@pytest.mark.parametrize("a_shape,b_shape", [((2, 3, 4), (4, 5)), ((3, 4), (4, 2)), ((2, 3, 4), (2, 4, 2))], ids=str)
def test_folded_matmul_gradcheck(a_shape, b_shape):
    rng = np.random.default_rng(3)
    a = Tensor(rng.standard_normal(a_shape), requires_grad=True, dtype=np.float64)
    b = Tensor(rng.standard_normal(b_shape), requires_grad=True, dtype=np.float64)
    with fast.fast_kernels():
        assert gradcheck(lambda x, y: x @ y, [a, b])


def test_folded_matmul_keeps_the_checks_and_integer_promotion():
    with fast.fast_kernels():
        with pytest.raises(ValueError, match="inner dimensions 3 and 4 differ"):
            Tensor(np.ones((2, 5, 3))) @ Tensor(np.ones((4, 2)))
        out = Tensor(np.ones((2, 5, 3), np.int64)) @ Tensor(np.ones((3, 2), np.float32))
        assert out.dtype == np.float32 and out.shape == (2, 5, 2)


def test_folded_matmul_on_a_non_contiguous_input():
    rng = np.random.default_rng(4)
    base, weight = rng.standard_normal((5, 3, 8)), rng.standard_normal((8, 2))

    def run():
        a = Tensor(base, requires_grad=True, dtype=np.float64)
        w = Tensor(weight, requires_grad=True, dtype=np.float64)
        out = a.permute(1, 0, 2) @ w                          # (3, 5, 8), not contiguous
        out.sum().backward()
        return out.data, a.grad, w.grad
    plain, quick = both_ways(run)
    for got, want in zip(quick, plain):
        np.testing.assert_allclose(got, want, **TOLERANCE[np.float64])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape,axis", [((4, 7), -1), ((4, 7), 0), ((2, 3, 5), 1), ((6,), 0), ((2, 3, 5), 2),
                                        ((6, 150, 500), -1), ((3, 90000), 1)], ids=str)
def test_saved_probabilities_log_softmax_equals_the_plain_one(shape, axis, dtype):
    "The last two shapes are over 1 MB: row blocks on every core, one row a block for the 90,000 classes."
    rng = np.random.default_rng(5)
    data = rng.standard_normal(shape).astype(dtype) * 30          # large logits: the shift by the maximum matters
    upstream = rng.standard_normal(shape).astype(dtype)

    def run():
        x = Tensor(data, requires_grad=True, dtype=dtype)
        out = x.log_softmax(axis=axis)
        out.backward(upstream)
        return out.data, x.grad, type(out._grad_fn)
    plain, quick = both_ways(run)
    for got, want in zip(quick[:2], plain[:2]):
        assert got.dtype == want.dtype == dtype and got.shape == shape
        np.testing.assert_allclose(got, want, **TOLERANCE[dtype])
    assert plain[2] is LogSoftmaxBackward and quick[2] is fast.SavedProbabilitiesLogSoftmaxBackward


def test_saved_probabilities_log_softmax_gradcheck_and_edge_cases():
    rng = np.random.default_rng(6)
    x = Tensor(rng.standard_normal((3, 4)), requires_grad=True, dtype=np.float64)
    with fast.fast_kernels():
        assert gradcheck(lambda t: t.log_softmax(axis=-1), [x])
        assert gradcheck(lambda t: t.log_softmax(axis=0), [x])
        extreme = Tensor([[1000.0, -1000.0, 0.0]]).log_softmax()
        assert np.isfinite(extreme.data).all() and extreme.data[0, 0] == 0.0
        assert Tensor(np.zeros((0, 3))).log_softmax().shape == (0, 3)       # empty: no NaN, as plain
        with pytest.raises(IndexError, match="axis"):
            Tensor(np.zeros((2, 3))).log_softmax(axis=2)
        out = Tensor(np.arange(6).reshape(2, 3)).log_softmax()             # integers give float32
        assert out.dtype == np.float32


def test_the_row_blocks_take_any_layout_of_input_and_gradient():
    "A transposed input goes all at once; a transposed gradient is read as it is: both equal the plain kernel."
    rng = np.random.default_rng(7)
    data, upstream = rng.standard_normal((300, 40)), rng.standard_normal((40, 300))

    def run():
        x = Tensor(data, requires_grad=True, dtype=np.float64)
        out = x.T.log_softmax(axis=-1)                       # (40, 300), not C-ordered
        out.backward(upstream)
        y = Tensor(data, requires_grad=True, dtype=np.float64)
        y.log_softmax(axis=-1).backward(upstream.T)          # C-ordered input, a transposed gradient
        return out.data, x.grad, y.grad
    plain, quick = both_ways(run)
    for got, want in zip(quick, plain):
        np.testing.assert_allclose(got, want, **TOLERANCE[np.float64])


def test_the_backward_does_not_write_into_the_gradient_it_is_given():
    grad = np.ones((2, 3), np.float32)
    grad.flags.writeable = False
    with fast.fast_kernels():
        x = Tensor(np.zeros((2, 3), np.float32), requires_grad=True)
        x.log_softmax().backward(grad)
    np.testing.assert_allclose(x.grad, 1 - 3 * np.full((2, 3), 1 / 3), atol=1e-6)


def test_the_two_kernels_are_registered_both_ways():
    with fast.fast_kernels(on=False):
        assert kernels.kernel("matmul") is MatMulBackward and kernels.kernel("log_softmax") is LogSoftmaxBackward
    with fast.fast_kernels():
        assert kernels.kernel("matmul") is fast.FoldedMatMulBackward
        assert kernels.kernel("log_softmax") is fast.SavedProbabilitiesLogSoftmaxBackward
