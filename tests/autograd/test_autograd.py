"""Module 05, the autograd engine: the backward walk (deep chains, shared nodes counted),
unbroadcast, segment_sum, RowSparseGrad and its accumulation, gradcheck, no_grad."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinytorch.core.autograd import (
    Function, GradcheckError, RowSparseGrad, backward, gradcheck, is_grad_enabled, no_grad, topological_order,
    unbroadcast,
)
from tinytorch.core.kernels import segment_sum          # through the kernel table: plain or fast, as in force
from tinytorch.core.tensor import Tensor

pytestmark = pytest.mark.usefixtures("both_kernels")    # every test runs with the plain and with the fast kernels


class Counted(Function):
    "Base for ops that count how often their backward runs (per subclass)."
    calls = 0


class CountedDouble(Counted):
    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        CountedDouble.calls += 1
        return (2 * grad,)


class CountedAdd(Counted):
    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, grad):
        CountedAdd.calls += 1
        return grad, grad


class SparseGather(Function):
    "table[ids] whose backward hands the table a RowSparseGrad (as a sparse embedding would)."
    @staticmethod
    def forward(ctx, table, ids):
        ctx.save_for_backward(table.shape, ids)
        return table[ids]

    @staticmethod
    def backward(ctx, grad):
        shape, ids = ctx.saved
        rows, sums = segment_sum(ids.reshape(-1), grad.reshape((-1,) + shape[1:]))
        return RowSparseGrad(rows, sums, shape), None


def float64(values, requires_grad=True):
    return Tensor(values, requires_grad=requires_grad, dtype=np.float64)


def diamond_ladder(x, rungs):
    "Each rung uses the previous value twice: v <- 2v + 2v, so dv/dx = 4**rungs."
    v = x
    for _ in range(rungs):
        v = CountedAdd.apply(CountedDouble.apply(v), CountedDouble.apply(v))
    return v


# ---------------------------------------------------------------- the backward walk

def test_ten_thousand_op_chain_backpropagates_without_recursion():
    x = float64([1.0, 2.0])
    factor = 1.0001
    y = x
    for _ in range(10_000):
        y = y * factor
    limit = sys.getrecursionlimit()
    y.sum().backward()
    assert sys.getrecursionlimit() == limit
    expected = 1.0
    for _ in range(10_000):
        expected *= factor
    np.testing.assert_allclose(x.grad, [expected, expected], rtol=1e-12)
    assert expected > 2.7                     # the chain really compounds (1.0001**10000 ≈ e)


def test_ten_thousand_uses_of_one_leaf_accumulate():
    x = float64([0.5])
    y = x
    for _ in range(10_000):
        y = y + x
    y.backward(np.ones(1))
    assert x.grad[0] == 10_001.0


def test_diamond_ladder_runs_each_backward_once():
    CountedDouble.calls = CountedAdd.calls = 0
    x = float64(1.0)
    v = diamond_ladder(x, 30)
    nodes = len(topological_order(v)) - 1     # everything except the leaf x
    assert nodes == 90
    v.backward()
    assert x.grad == 4.0 ** 30                # exact: 2**60 is representable
    assert CountedDouble.calls == 60 and CountedAdd.calls == 30
    assert CountedDouble.calls + CountedAdd.calls == nodes


def test_diamond_ladder_backward_twice_runs_each_node_twice_and_accumulates():
    CountedDouble.calls = CountedAdd.calls = 0
    x = float64(1.0)
    v = diamond_ladder(x, 10)
    v.backward()
    v.backward()
    assert x.grad == 2 * 4.0 ** 10
    assert (CountedDouble.calls, CountedAdd.calls) == (40, 20)


def test_topological_order_visits_each_node_once_inputs_first():
    x = float64([1.0, 2.0])
    constant = Tensor([3.0, 4.0], dtype=np.float64)
    a = x * constant
    b = a + x
    c = a * b
    out = (c + a).sum()
    order = topological_order(out)
    assert len(order) == len({id(t) for t in order}) == 6          # x a b c c+a out; not the constant
    assert all(t is not constant for t in order)
    position = {id(t): i for i, t in enumerate(order)}
    for t in order:
        if t._grad_fn is not None:
            for inp in t._grad_fn.inputs:
                if inp.requires_grad:
                    assert position[id(inp)] < position[id(t)]
    assert order[-1] is out and order[0] is x


def test_engine_skips_inputs_that_do_not_require_grad():
    x = float64([1.0, 2.0])
    constant = Tensor([3.0, 4.0], dtype=np.float64)
    (x * constant).sum().backward()
    assert constant.grad is None
    np.testing.assert_array_equal(x.grad, [3, 4])


def test_module_level_backward_accepts_a_root_gradient():
    x = float64([1.0, 2.0, 3.0])
    y = x * x
    backward(y, np.array([1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(x.grad, [2, 0, 12])


# ---------------------------------------------------------------- unbroadcast

@pytest.mark.parametrize("grad_shape, shape", [
    ((4, 2, 3), (3,)),
    ((4, 2, 3), (2, 1)),
    ((2, 3), ()),
    ((2, 3), (1, 3)),
    ((5, 4, 3), (1, 4, 1)),
    ((5, 4, 3), (4, 3)),
    ((2, 3), (2, 3)),
])
def test_unbroadcast_is_the_adjoint_of_broadcasting(grad_shape, shape, rng):
    grad = rng.standard_normal(grad_shape)
    v = rng.standard_normal(shape)
    reduced = unbroadcast(grad, shape)
    assert reduced.shape == shape
    # <grad, broadcast(v)> == <unbroadcast(grad), v> for every v
    np.testing.assert_allclose((grad * np.broadcast_to(v, grad_shape)).sum(), (reduced * v).sum())


def test_unbroadcast_values_and_same_shape_passthrough():
    grad = np.arange(24.0).reshape(4, 2, 3)
    np.testing.assert_array_equal(unbroadcast(grad, (3,)), grad.sum(axis=(0, 1)))
    np.testing.assert_array_equal(unbroadcast(grad, (2, 1)), grad.sum(axis=(0, 2))[:, None])
    assert unbroadcast(grad, (4, 2, 3)) is grad


# ---------------------------------------------------------------- segment_sum

def reference(ids, values, size):
    out = np.zeros((size,) + values.shape[1:], dtype=values.dtype)
    np.add.at(out, ids, values)
    return out


def test_segment_sum_matches_np_add_at_exactly_on_integer_valued_data(rng):
    ids = rng.integers(0, 10, size=1000)                          # about 100 copies of each id
    values = rng.integers(-5, 6, size=(1000, 4)).astype(np.float64)
    rows, sums = segment_sum(ids, values)
    np.testing.assert_array_equal(rows, np.unique(ids))
    dense = np.zeros((10, 4))
    dense[rows] = sums
    np.testing.assert_array_equal(dense, reference(ids, values, 10))


def test_segment_sum_matches_np_add_at_on_random_floats(rng):
    ids = rng.integers(0, 50, size=500)
    values = rng.standard_normal((500, 3)).astype(np.float32)
    rows, sums = segment_sum(ids, values)
    dense = np.zeros((50, 3), dtype=np.float32)
    dense[rows] = sums
    np.testing.assert_allclose(dense, reference(ids, values, 50), rtol=1e-5, atol=1e-5)
    assert sums.dtype == np.float32


def test_segment_sum_is_deterministic(rng):
    ids = rng.integers(0, 7, size=300)
    values = rng.standard_normal((300, 5))
    first, second = segment_sum(ids, values), segment_sum(ids.copy(), values.copy())
    assert first[0].tobytes() == second[0].tobytes()
    assert first[1].tobytes() == second[1].tobytes()


def test_segment_sum_empty_input():
    rows, sums = segment_sum(np.array([], dtype=np.int64), np.zeros((0, 4)))
    assert rows.shape == (0,) and rows.dtype == np.int64
    assert sums.shape == (0, 4)


def test_segment_sum_all_unique_ids_reorders_rows(rng):
    ids = rng.permutation(8)
    values = rng.standard_normal((8, 2))
    rows, sums = segment_sum(ids, values)
    np.testing.assert_array_equal(rows, np.arange(8))
    np.testing.assert_array_equal(sums, values[np.argsort(ids)])


def test_segment_sum_on_3d_rows(rng):
    ids = np.array([2, 0, 2, 2, 5])
    values = rng.standard_normal((5, 2, 3))
    rows, sums = segment_sum(ids, values)
    np.testing.assert_array_equal(rows, [0, 2, 5])
    dense = np.zeros((6, 2, 3))
    dense[rows] = sums
    np.testing.assert_allclose(dense, reference(ids, values, 6))


def test_segment_sum_keeps_what_scatter_assignment_drops():
    ids = np.array([3, 1, 3, 3])
    values = np.ones((4, 1))
    rows, sums = segment_sum(ids, values)
    assert dict(zip(rows.tolist(), sums[:, 0].tolist())) == {1: 1.0, 3: 3.0}


def test_segment_sum_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match=r"3 ids.*\(4, 2\)"):
        segment_sum(np.array([0, 1, 2]), np.zeros((4, 2)))


# ---------------------------------------------------------------- RowSparseGrad

def test_row_sparse_plus_row_sparse_stays_sparse_and_adds_shared_rows():
    a = RowSparseGrad([1, 3], [[1.0, 2.0], [3.0, 4.0]], (5, 2))
    b = RowSparseGrad([0, 3], [[10.0, 10.0], [100.0, 100.0]], (5, 2))
    total = a + b
    assert isinstance(total, RowSparseGrad)
    assert total.indices.tolist() == [0, 1, 3] and total.indices.dtype == np.int64
    np.testing.assert_array_equal(total.to_dense(), a.to_dense() + b.to_dense())
    np.testing.assert_array_equal(a.to_dense()[3], [3, 4])          # operands unchanged


def test_row_sparse_plus_dense_is_dense_both_ways():
    sparse = RowSparseGrad([2], [[1.0, 1.0]], (3, 2))
    dense = np.arange(6.0).reshape(3, 2)
    before = dense.copy()
    for total in (sparse + dense, dense + sparse):
        assert type(total) is np.ndarray
        np.testing.assert_array_equal(total, before + sparse.to_dense())
    np.testing.assert_array_equal(dense, before)


def test_row_sparse_to_dense():
    grad = RowSparseGrad(np.array([0, 4]), np.array([[1.0], [2.0]]), (6, 1))
    np.testing.assert_array_equal(grad.to_dense()[:, 0], [1, 0, 0, 0, 2, 0])
    assert grad.dtype == np.float64 and grad.shape == (6, 1)


def test_row_sparse_shape_mismatches_name_the_shapes():
    a = RowSparseGrad([1], [[1.0, 2.0]], (5, 2))
    with pytest.raises(ValueError, match=r"\(5, 2\).*\(4, 2\)"):
        a + RowSparseGrad([1], [[1.0, 2.0]], (4, 2))
    with pytest.raises(ValueError, match=r"\(5, 2\).*\(5, 3\)"):
        a + np.zeros((5, 3))
    with pytest.raises(ValueError, match=r"\(1, 3\)"):
        RowSparseGrad([1], [[1.0, 2.0, 3.0]], (5, 2))


def test_row_sparse_repr_shows_shape_rows_dtype_and_indices():
    text = repr(RowSparseGrad(np.arange(20), np.zeros((20, 2), dtype=np.float32), (30, 2)))
    assert "(30, 2)" in text and "rows=20" in text and "float32" in text
    assert "[0, 1, 2, 3, 4, 5, 6, 7]..." in text
    assert "..." not in repr(RowSparseGrad([1, 3], np.zeros((2, 2)), (5, 2)))


# ---------------------------------------------------------------- sparse gradients through the engine

def test_sparse_gradient_accumulates_sparse_across_backward_passes():
    table = float64(np.zeros((6, 2)))
    ids_a, ids_b = np.array([1, 4, 1]), np.array([4, 5])
    SparseGather.apply(table, Tensor(ids_a)).sum().backward()
    assert isinstance(table.grad, RowSparseGrad)
    SparseGather.apply(table, Tensor(ids_b)).sum().backward()
    assert isinstance(table.grad, RowSparseGrad)
    expected = reference(np.concatenate([ids_a, ids_b]), np.ones((5, 2)), 6)
    np.testing.assert_array_equal(table.grad.to_dense(), expected)
    assert table.grad.indices.tolist() == [1, 4, 5]


def test_sparse_and_dense_paths_to_one_leaf_in_one_pass(rng):
    table = float64(rng.standard_normal((5, 3)))
    ids = np.array([0, 3, 3])
    weights = rng.standard_normal((5, 3))
    loss = SparseGather.apply(table, Tensor(ids)).sum() + (table * weights).sum()
    loss.backward()
    assert type(table.grad) is np.ndarray
    np.testing.assert_allclose(table.grad, weights + reference(ids, np.ones((3, 3)), 5))


@pytest.mark.parametrize("sparse_first", [True, False])
def test_sparse_and_dense_across_two_passes(sparse_first, rng):
    table = float64(rng.standard_normal((5, 3)))
    ids = np.array([2, 2, 4])
    weights = rng.standard_normal((5, 3))
    passes = [lambda: SparseGather.apply(table, Tensor(ids)).sum(), lambda: (table * weights).sum()]
    for make_loss in passes if sparse_first else passes[::-1]:
        make_loss().backward()
    assert type(table.grad) is np.ndarray
    np.testing.assert_allclose(table.grad, weights + reference(ids, np.ones((3, 3)), 5))


def test_sparse_gradient_into_a_computed_tensor_is_made_dense(rng):
    weight = float64(rng.standard_normal((4, 2)))
    ids = np.array([1, 1, 3])
    SparseGather.apply(weight * 3.0, Tensor(ids)).sum().backward()
    np.testing.assert_array_equal(weight.grad, 3.0 * reference(ids, np.ones((3, 2)), 4))


def test_gradcheck_accepts_row_sparse_gradients(rng):
    table = float64(rng.standard_normal((5, 2)))
    ids = Tensor(np.array([4, 0, 4]))
    assert gradcheck(lambda t: SparseGather.apply(t, ids) * 2.0, [table])


# ---------------------------------------------------------------- gradcheck itself

class SquareWrongAtOneElement(Function):
    "x**2 whose backward is off by one at position (1, 2) only."
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved
        wrong = 2 * x * grad
        wrong[1, 2] += 1.0
        return (wrong,)


def test_gradcheck_detects_a_broken_function_and_names_input_and_index(rng):
    scale = Tensor(rng.standard_normal((2, 3)), dtype=np.float64)        # input 0: not checked
    x = float64(rng.standard_normal((2, 3)))                            # input 1
    with pytest.raises(GradcheckError) as error:
        gradcheck(lambda s, x: SquareWrongAtOneElement.apply(x) * s, [scale, x])
    message = str(error.value)
    assert "input 1" in message and "(1, 2)" in message
    assert isinstance(error.value, AssertionError)


def test_gradcheck_passes_a_correct_function_and_resets_stale_grads(rng):
    x = float64(rng.standard_normal((2, 3)))
    x.grad = np.full((2, 3), 123.0)
    assert gradcheck(lambda x: (x * x).sum(axis=0), [x]) is True


def test_gradcheck_perturbs_non_contiguous_inputs(rng):
    x = float64(rng.standard_normal((3, 4)).T)                          # a strided view
    assert not x.data.flags.c_contiguous
    before = x.data.copy()
    assert gradcheck(lambda x: (x * x).exp(), [x])
    np.testing.assert_array_equal(x.data, before)                        # restored exactly


def test_gradcheck_refuses_float32():
    with pytest.raises(TypeError, match="float64"):
        gradcheck(lambda x: x * 2, [Tensor([1.0, 2.0], requires_grad=True)])


def test_gradcheck_refuses_inputs_without_requires_grad():
    with pytest.raises(ValueError, match="requires_grad"):
        gradcheck(lambda x: x * 2, [Tensor([1.0, 2.0], dtype=np.float64)])


# ---------------------------------------------------------------- grad mode

def test_no_grad_nests_and_restores():
    assert is_grad_enabled()
    with no_grad():
        assert not is_grad_enabled()
        with no_grad():
            assert not is_grad_enabled()
        assert not is_grad_enabled()
    assert is_grad_enabled()


def test_no_grad_restores_after_an_exception():
    with pytest.raises(KeyError):
        with no_grad():
            with no_grad():
                raise KeyError("boom")
    assert is_grad_enabled()


def test_function_apply_under_no_grad_records_no_node():
    x = float64([1.0, 2.0])
    with no_grad():
        y = CountedDouble.apply(x)
    assert y._grad_fn is None and not y.requires_grad
    np.testing.assert_array_equal(y.data, [2, 4])
    z = CountedDouble.apply(x)
    assert isinstance(z._grad_fn, CountedDouble) and z._grad_fn.inputs == (x,)


def test_function_apply_records_nothing_for_constant_inputs():
    y = CountedDouble.apply(Tensor([1.0]))
    assert y._grad_fn is None and not y.requires_grad


# ---------------------------------------------------------------- import hygiene

def test_importing_tinytorch_prints_nothing():
    result = subprocess.run(
        [sys.executable, "-c", "import tinytorch, tinytorch.core.tensor, tinytorch.core.autograd"],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""


# ================================================================ issue 23: reliability, third pass
# (one block per defect; appended here so that the tests/ reorganisation merges cleanly)

# ---------------------------------------------------------------- defect 1: views share their base's version counter

STALE = "modified by an inplace operation"

VIEWS = {                                   # each a view of the (3, 4) parameter w, in NumPy as in PyTorch
    "row": lambda w: w[0],
    "slice": lambda w: w[1:, ::2],
    "reshape": lambda w: w.reshape(2, 6),
    "transpose": lambda w: w.T,
    "permute then row": lambda w: w.permute(1, 0)[2],
}


def _squares_of(view):
    "A loss whose backward needs the view's values (PyTorch's MulBackward saves both factors of view * view)."
    return (view * view).sum()


@pytest.mark.parametrize("name", VIEWS)
def test_an_in_place_step_on_the_base_makes_a_saved_view_stale(name):
    "What an optimiser step does (write into w.data, then mark_modified); the optimisers' own test is in test_optimizers."
    w = Tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    loss = _squares_of(VIEWS[name](w))
    w.data[...] -= 0.1                      # writes into w.data, which the view saved for its backward
    w.mark_modified()
    with pytest.raises(RuntimeError, match=STALE):
        loss.backward()
    assert w.grad is None


@pytest.mark.parametrize("name", VIEWS)
def test_an_in_place_write_through_a_view_makes_the_base_stale(name):
    w = Tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    loss = _squares_of(w)                   # saves w itself
    with no_grad():
        view = VIEWS[name](w)
    view.data[...] = 0
    view.mark_modified()
    assert w._version == view._version == 1, "one counter for the base and all its views"
    with pytest.raises(RuntimeError, match=STALE):
        loss.backward()


def test_a_copy_is_not_a_view_and_keeps_its_own_counter():
    "w[[0, 2]] (an integer-array index) copies in NumPy as in PyTorch: writing into w leaves it valid."
    w = Tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    picked = w[np.array([0, 2])]
    loss = _squares_of(picked)
    w.data[...] = 0
    w.mark_modified()
    assert picked._version == 0
    loss.backward()
    np.testing.assert_array_equal(w.grad[[0, 2]], 2 * np.arange(12.0).reshape(3, 4)[[0, 2]])


def test_detach_shares_the_version_counter_as_in_pytorch():
    w = Tensor([1.0, 2.0], requires_grad=True)
    loss = _squares_of(w)
    alias = w.detach()
    alias.data[0] = 7
    alias.mark_modified()
    with pytest.raises(RuntimeError, match=STALE):
        loss.backward()


@pytest.mark.torch
@pytest.mark.parametrize("name", [*VIEWS, "integer-array index"])
def test_views_raise_exactly_where_pytorch_raises(name, torch):
    "The same graph, the same in-place write into the base: both frameworks raise, or both give the same gradient."
    view_of = VIEWS.get(name, lambda w: w[[0, 2]])
    start = np.arange(12.0).reshape(3, 4)
    ours, theirs = Tensor(start.copy(), requires_grad=True), torch.tensor(start.copy(), requires_grad=True)
    our_loss, their_loss = _squares_of(view_of(ours)), _squares_of(view_of(theirs))
    ours.data *= 2                          # the setter counts it, as an optimiser's mark_modified does
    with torch.no_grad():
        theirs.mul_(2)
    outcomes = []
    for loss, w in [(our_loss, ours), (their_loss, theirs)]:
        try:
            loss.backward()
            outcomes.append(np.asarray(w.grad))
        except RuntimeError as error:
            assert STALE in str(error)
            outcomes.append("raised")
    if name in VIEWS:
        assert outcomes == ["raised", "raised"]
    else:
        np.testing.assert_allclose(outcomes[0], outcomes[1], rtol=1e-6)
