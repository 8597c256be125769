"""Module 06, optimizers: every update rule against a NumPy reference over several steps,
row-sparse gradients (sparse = dense where they must agree, lazy where they must not), the
all-or-nothing step, hyperparameter checks, and PyTorch trajectories when torch is installed."""
import math

import numpy as np
import pytest

from tinytorch.core.autograd import RowSparseGrad
from tinytorch.core.layers import Linear, Parameter
from tinytorch.core.optimizers import SGD, Adagrad, Adam, AdamW, Optimizer, SparseAdam
from tinytorch.core.tensor import Tensor
from tests.autograd.test_autograd import SparseGather   # table[ids] with a row-sparse backward

pytestmark = pytest.mark.usefixtures("both_kernels")    # run with the plain and with the fast kernels (module 18)


def parameter64(array):
    "A float64 parameter holding exactly `array`."
    p = Parameter(array)
    p.data = np.array(array, dtype=np.float64)
    return p


def run(optimizer_cls, start, grads, **settings):
    "Apply `grads` (one per step; RowSparseGrad or array) to a float64 copy of `start`; return (p, optimizer)."
    p = parameter64(start)
    optimizer = optimizer_cls([p], **settings)
    for g in grads:
        p.grad = g
        optimizer.step()
    return p, optimizer


def dense_grads(rng, shape, steps):
    return [rng.normal(size=shape) for _ in range(steps)]


# --- NumPy references, written from the formulas -------------------------------------------------------

def sgd_reference(p, grads, lr, momentum=0.0, weight_decay=0.0):
    p, buffer = p.copy(), None
    for g in grads:
        g = g + weight_decay * p
        if momentum:
            buffer = g.copy() if buffer is None else momentum * buffer + g
            g = buffer
        p = p - lr * g
    return p


def adam_reference(p, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False):
    p, m, v = p.copy(), np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        if decoupled:
            p = p - lr * weight_decay * p
        else:
            g = g + weight_decay * p
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g ** 2
        p = p - (lr / (1 - betas[0] ** t)) * m / (np.sqrt(v) / np.sqrt(1 - betas[1] ** t) + eps)
    return p


def adagrad_reference(p, grads, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10):
    p, total = p.copy(), np.full_like(p, initial_accumulator_value)
    for t, g in enumerate(grads, start=1):
        g = g + weight_decay * p
        total = total + g ** 2
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(total) + eps)
    return p


def sparse_adam_reference(p, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    "Lazy Adam, one row at a time: rows absent from a step are skipped; t counts the table's steps."
    p, m, v = p.copy(), np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        for row, values in zip(g.indices, g.values):
            m[row] = betas[0] * m[row] + (1 - betas[0]) * values
            v[row] = betas[1] * v[row] + (1 - betas[1]) * values ** 2
            step_size = lr * math.sqrt(1 - betas[1] ** t) / (1 - betas[0] ** t)
            p[row] = p[row] - step_size * m[row] / (np.sqrt(v[row]) + eps)
    return p, m, v


def random_sparse(rng, shape, rows):
    return RowSparseGrad(np.sort(np.asarray(rows)), rng.normal(size=(len(rows),) + shape[1:]), shape)


# --- dense rules over several steps ------------------------------------------------------------------------

@pytest.mark.parametrize("settings", [{"lr": 0.1}, {"lr": 0.1, "momentum": 0.9}, {"lr": 0.05, "weight_decay": 0.1},
                                      {"lr": 0.05, "momentum": 0.5, "weight_decay": 0.01}])
def test_sgd_matches_reference(settings, rng):
    start, grads = rng.normal(size=(4, 3)), dense_grads(rng, (4, 3), 6)
    p, _ = run(SGD, start, grads, **settings)
    np.testing.assert_allclose(p.data, sgd_reference(start, grads, **settings), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("cls,settings,decoupled", [
    (Adam, {"lr": 0.01}, False),
    (Adam, {"lr": 0.02, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.1}, False),
    (AdamW, {"lr": 0.01}, True),                                   # default weight_decay = 0.01
    (AdamW, {"lr": 0.01, "weight_decay": 0.5}, True)])
def test_adam_and_adamw_match_reference(cls, settings, decoupled, rng):
    start, grads = rng.normal(size=(3, 5)), dense_grads(rng, (3, 5), 7)
    p, optimizer = run(cls, start, grads, **settings)
    if cls is AdamW:
        settings = {"weight_decay": 0.01, **settings}
    np.testing.assert_allclose(p.data, adam_reference(start, grads, **settings, decoupled=decoupled),
                               rtol=1e-11, atol=1e-13)
    assert optimizer.state[0]["step"] == 7


def test_adamw_decay_differs_from_adam_l2(rng):
    start, grads = rng.normal(size=4), dense_grads(rng, (4,), 3)
    l2, _ = run(Adam, start, grads, lr=0.1, weight_decay=0.5)
    decoupled, _ = run(AdamW, start, grads, lr=0.1, weight_decay=0.5)
    assert not np.allclose(l2.data, decoupled.data)


def test_adam_first_step_is_lr_times_sign_of_gradient():
    p, _ = run(Adam, np.zeros(4), [np.array([1e3, 2.0, -1e-3, 0.0])], lr=0.05)
    np.testing.assert_allclose(p.data, [-0.05, -0.05, 0.05, 0.0], rtol=1e-4)


@pytest.mark.parametrize("settings", [{"lr": 0.1}, {"lr": 0.5, "lr_decay": 0.2, "initial_accumulator_value": 0.1},
                                      {"lr": 0.1, "weight_decay": 0.3, "eps": 1e-4}])
def test_adagrad_matches_reference(settings, rng):
    start, grads = rng.normal(size=(5, 2)), dense_grads(rng, (5, 2), 5)
    p, _ = run(Adagrad, start, grads, **settings)
    np.testing.assert_allclose(p.data, adagrad_reference(start, grads, **settings), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("settings", [{"lr": 0.01}, {"lr": 0.1, "betas": (0.5, 0.9), "eps": 1e-3}])
def test_sparse_adam_matches_lazy_reference(settings, rng):
    start = rng.normal(size=(6, 3))
    grads = [random_sparse(rng, (6, 3), rows) for rows in ([0, 2], [2, 5], [1], [], [0, 1, 2, 3, 4, 5], [4])]
    p, optimizer = run(SparseAdam, start, grads, **settings)
    expected, m, v = sparse_adam_reference(start, grads, **settings)
    np.testing.assert_allclose(p.data, expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(optimizer.state[0]["exp_avg"], m, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(optimizer.state[0]["exp_avg_sq"], v, rtol=1e-12, atol=1e-14)
    assert optimizer.state[0]["step"] == 6, "an empty gradient still counts as a step, as in PyTorch"


# --- sparse versus dense -------------------------------------------------------------------------------------

def sparse_and_dense(rng, shape, row_lists):
    grads = [random_sparse(rng, shape, rows) for rows in row_lists]
    return grads, [g.to_dense() for g in grads]


def test_sparse_sgd_step_equals_dense_sgd_step_and_touches_only_its_rows(rng):
    start = rng.normal(size=(8, 3))
    sparse_grads, dense = sparse_and_dense(rng, (8, 3), [[1, 6], [0, 1], [6]])
    sparse_p, _ = run(SGD, start, sparse_grads, lr=0.3)
    dense_p, _ = run(SGD, start, dense, lr=0.3)
    np.testing.assert_array_equal(sparse_p.data, dense_p.data)
    untouched = [2, 3, 4, 5, 7]
    np.testing.assert_array_equal(sparse_p.data[untouched], start[untouched])


@pytest.mark.parametrize("settings", [{"momentum": 0.9}, {"momentum": 0.9, "weight_decay": 0.1},
                                      {"weight_decay": 0.1}])
def test_sparse_sgd_with_momentum_or_decay_equals_dense(settings, rng):
    start = rng.normal(size=(7, 2))
    sparse_grads, dense = sparse_and_dense(rng, (7, 2), [[0, 3], [3, 5], [1], [0, 3]])
    sparse_p, optimizer = run(SGD, start, sparse_grads, lr=0.1, **settings)
    dense_p, _ = run(SGD, start, dense, lr=0.1, **settings)
    np.testing.assert_allclose(sparse_p.data, dense_p.data, rtol=1e-12, atol=1e-14)
    if "weight_decay" not in settings:
        buffer = optimizer.state[0]["momentum_buffer"]
        assert isinstance(buffer, RowSparseGrad) and buffer.indices.tolist() == [0, 1, 3, 5], "union of rows seen"
        np.testing.assert_array_equal(sparse_p.data[[2, 4, 6]], start[[2, 4, 6]])


def test_sparse_momentum_keeps_moving_rows_absent_from_the_current_step(rng):
    start = np.zeros((3, 1))
    grads = [RowSparseGrad([0], np.ones((1, 1)), (3, 1)), RowSparseGrad([2], np.ones((1, 1)), (3, 1))]
    p, _ = run(SGD, start, grads, lr=1.0, momentum=0.5)
    assert p.data[:, 0].tolist() == [-1.5, 0.0, -1.0], "row 0: -1 then -0.5 on momentum alone"


def test_sparse_adagrad_equals_dense_when_every_row_is_present(rng):
    start = rng.normal(size=(4, 3))
    sparse_grads, dense = sparse_and_dense(rng, (4, 3), [[0, 1, 2, 3]] * 5)
    settings = {"lr": 0.3, "lr_decay": 0.1, "initial_accumulator_value": 0.2}
    sparse_p, _ = run(Adagrad, start, sparse_grads, **settings)
    dense_p, _ = run(Adagrad, start, dense, **settings)
    np.testing.assert_array_equal(sparse_p.data, dense_p.data)


def test_sparse_adagrad_updates_only_present_rows_of_weights_and_sums(rng):
    start = rng.normal(size=(5, 2))
    sparse_grads, dense = sparse_and_dense(rng, (5, 2), [[0, 4], [4], [1, 4]])
    sparse_p, optimizer = run(Adagrad, start, sparse_grads, lr=0.2)
    dense_p, dense_optimizer = run(Adagrad, start, dense, lr=0.2)
    np.testing.assert_allclose(sparse_p.data, dense_p.data, rtol=1e-12)   # absent rows: dense adds 0, moves by 0
    np.testing.assert_array_equal(sparse_p.data[[2, 3]], start[[2, 3]])
    assert np.all(optimizer.state[0]["sum"][[2, 3]] == 0)
    np.testing.assert_allclose(optimizer.state[0]["sum"], dense_optimizer.state[0]["sum"], rtol=1e-12)


def test_sparse_adam_equals_dense_adam_when_every_row_is_present(rng):
    start = rng.normal(size=(4, 3))
    sparse_grads, dense = sparse_and_dense(rng, (4, 3), [[0, 1, 2, 3]] * 6)
    exact_sparse, _ = run(SparseAdam, start, sparse_grads, lr=0.01, eps=0.0)
    exact_dense, _ = run(Adam, start, dense, lr=0.01, eps=0.0)
    np.testing.assert_allclose(exact_sparse.data, exact_dense.data, rtol=1e-12)
    default_sparse, _ = run(SparseAdam, start, sparse_grads, lr=0.01)
    default_dense, _ = run(Adam, start, dense, lr=0.01)
    np.testing.assert_allclose(default_sparse.data, default_dense.data, rtol=0, atol=1e-6)   # eps placement only


def test_sparse_adam_leaves_absent_rows_weights_and_moments_untouched(rng):
    start = rng.normal(size=(5, 2))
    p = parameter64(start)
    optimizer = SparseAdam([p], lr=0.1)
    p.grad = random_sparse(rng, (5, 2), [0, 1, 2, 3, 4])
    optimizer.step()
    state = optimizer.state[0]
    before = [p.data.copy(), state["exp_avg"].copy(), state["exp_avg_sq"].copy()]
    p.grad = random_sparse(rng, (5, 2), [1, 3])
    optimizer.step()
    for after, previous in zip([p.data, state["exp_avg"], state["exp_avg_sq"]], before):
        np.testing.assert_array_equal(after[[0, 2, 4]], previous[[0, 2, 4]])
        assert np.all(after[[1, 3]] != previous[[1, 3]])
    dense_p = parameter64(start)
    dense_optimizer = Adam([dense_p], lr=0.1)
    dense_p.grad = np.zeros((5, 2))
    dense_p.grad[[0, 2]] = 1.0
    dense_optimizer.step()
    dense_p.grad = np.zeros((5, 2))
    moved = dense_p.data.copy()
    dense_optimizer.step()
    assert np.all(dense_p.data[[0, 2]] != moved[[0, 2]]), "dense Adam, unlike SparseAdam, moves rows with zero gradient"


def test_sparse_adam_uses_the_tables_step_count_for_a_row_seen_late():
    p = parameter64(np.zeros((2, 1)))
    optimizer = SparseAdam([p], lr=0.1, betas=(0.9, 0.999), eps=1e-8)
    for _ in range(2):
        p.grad = RowSparseGrad([0], np.ones((1, 1)), (2, 1))
        optimizer.step()
    p.grad = RowSparseGrad([1], np.full((1, 1), 2.0), (2, 1))
    optimizer.step()
    m, v, t = 0.1 * 2.0, 0.001 * 4.0, 3
    expected = -0.1 * math.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (math.sqrt(v) + 1e-8)
    assert p.data[1, 0] == pytest.approx(expected, rel=1e-12)


def test_sparse_rows_must_be_coalesced_before_any_optimizer_sees_them(rng):
    "RowSparseGrad refuses unsorted, repeated or out-of-range rows, so optimizers can trust its rows."
    for rows in ([3, 1], [1, 3, 3], [4], [-1]):
        with pytest.raises(ValueError, match=r"sorted, unique and in \[0, 4\)"):
            RowSparseGrad(np.array(rows), rng.normal(size=(len(rows), 2)), (4, 2))


def test_end_to_end_sparse_gradient_from_backward_trains_like_dense(rng):
    start, ids = rng.normal(size=(10, 4)), np.array([[1, 7, 7], [2, 1, 9]])
    tables = [parameter64(start), parameter64(start)]
    optimizers = [SparseAdam([tables[0]], lr=0.05), Adam([tables[1]], lr=0.05)]
    for step in range(3):
        for table, optimizer in zip(tables, optimizers):
            optimizer.zero_grad()
            rows = SparseGather.apply(table, Tensor(ids)) if optimizer is optimizers[0] else table[ids]
            (rows * rows).sum().backward()
            optimizer.step()
        assert isinstance(tables[0].grad, RowSparseGrad) and tables[0].grad.indices.tolist() == [1, 2, 7, 9]
    used = [1, 2, 7, 9]
    np.testing.assert_allclose(tables[0].data[used], tables[1].data[used], rtol=0, atol=1e-6)   # rows used every step
    np.testing.assert_array_equal(tables[0].data[[0, 3, 4, 5, 6, 8]], start[[0, 3, 4, 5, 6, 8]])


# --- refusals leave everything unchanged ---------------------------------------------------------------------

@pytest.mark.parametrize("cls", [Adam, AdamW])
def test_dense_adam_refuses_a_sparse_gradient_naming_sparse_adam_and_changes_nothing(cls, rng):
    weight, table = parameter64(rng.normal(size=3)), parameter64(rng.normal(size=(4, 2)))
    optimizer = cls([weight, table], lr=0.1)
    weight.grad, table.grad = np.ones(3), np.ones((4, 2))
    optimizer.step()
    before = [weight.data.copy(), table.data.copy(), optimizer.state[0]["exp_avg"].copy(),
              optimizer.state[0]["exp_avg_sq"].copy()]
    table.grad = RowSparseGrad([2], np.ones((1, 2)), (4, 2))
    with pytest.raises(TypeError, match="SparseAdam") as caught:
        optimizer.step()
    assert "params[1]" in str(caught.value)
    after = [weight.data, table.data, optimizer.state[0]["exp_avg"], optimizer.state[0]["exp_avg_sq"]]
    assert all(np.array_equal(a, b) for a, b in zip(after, before)), "the valid first parameter was not updated"
    assert optimizer.state[0]["step"] == 1 and optimizer.state[1]["step"] == 1


def test_sparse_adam_refuses_a_dense_gradient_naming_adam():
    table = Parameter(np.ones((3, 2)))
    table.grad = np.ones((3, 2))
    with pytest.raises(TypeError, match=r"\bAdam\b"):
        SparseAdam([table]).step()
    assert np.all(table.data == 1)


def test_adagrad_refuses_weight_decay_with_a_sparse_gradient():
    a, table = Parameter(np.ones(2)), Parameter(np.ones((3, 2)))
    a.grad, table.grad = np.ones(2), RowSparseGrad([0], np.ones((1, 2)), (3, 2))
    optimizer = Adagrad([a, table], weight_decay=0.1)
    with pytest.raises(TypeError, match="weight_decay"):
        optimizer.step()
    assert np.all(a.data == 1) and np.all(table.data == 1) and optimizer.state == [{}, {}]


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW, Adagrad])
def test_wrong_gradient_shape_is_refused_naming_both_shapes(cls):
    p = Parameter(np.ones((2, 3)))
    p.grad = np.ones((3, 2))
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        cls([p], lr=0.1).step()
    assert np.all(p.data == 1)


# --- the loop: in place, skip None, zero_grad, dedup -------------------------------------------------------------

@pytest.mark.parametrize("cls,sparse", [(SGD, False), (SGD, True), (Adam, False), (AdamW, False), (Adagrad, False),
                                        (Adagrad, True), (SparseAdam, True)])
def test_updates_are_in_place(cls, sparse, rng):
    p = Parameter(rng.normal(size=(4, 2)))
    array, start = p.data, p.data.copy()
    optimizer = cls([p], lr=0.1)
    for _ in range(2):
        p.grad = random_sparse(rng, (4, 2), [1, 2]) if sparse else rng.normal(size=(4, 2))
        optimizer.step()
    assert p.data is array and p.dtype == np.float32
    assert not np.array_equal(p.data[1:3], start[1:3])


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW, Adagrad])
def test_parameters_without_gradient_are_skipped_and_their_state_does_not_advance(cls, rng):
    used, unused = Parameter(rng.normal(size=3)), Parameter(rng.normal(size=3))
    optimizer = cls([used, unused], lr=0.1, **({"momentum": 0.9} if cls is SGD else {}))
    before = unused.data.copy()
    for _ in range(3):
        used.grad = np.ones(3)
        optimizer.step()
    np.testing.assert_array_equal(unused.data, before)
    assert optimizer.state[1] == {}


def test_zero_grad_sets_every_grad_to_none():
    model = Linear(3, 2)
    optimizer = SGD(model.parameters(), lr=0.1)
    model(np.ones((1, 3))).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    optimizer.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_a_parameter_listed_twice_is_kept_once_and_updated_once():
    p = parameter64(np.zeros(2))
    optimizer = SGD([p, p, p], lr=1.0)
    assert optimizer.params == [p]
    p.grad = np.ones(2)
    optimizer.step()
    assert p.data.tolist() == [-1.0, -1.0]


def test_optimizer_accepts_a_generator_and_trains_a_linear_layer(rng):
    layer = Linear(3, 1, seed=0)
    optimizer = Adam((p for p in layer.parameters()), lr=0.05)
    x, w = rng.normal(size=(32, 3)), np.array([[1.0], [-2.0], [0.5]])
    losses = []
    for _ in range(200):
        optimizer.zero_grad()
        error = layer(Tensor(x)) - Tensor(x @ w)
        loss = (error * error).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 1e-3 * losses[0]
    np.testing.assert_allclose(layer.weight.data, w, atol=0.05)


def test_lr_zero_is_allowed_and_moves_nothing_but_counts_the_step():
    p = Parameter(np.ones(2))
    optimizer = Adam([p], lr=0.0)
    p.grad = np.ones(2)
    optimizer.step()
    assert np.all(p.data == 1) and optimizer.state[0]["step"] == 1


def test_lr_can_be_changed_between_steps():
    p = parameter64(np.zeros(1))
    optimizer = SGD([p], lr=1.0)
    p.grad = np.ones(1)
    optimizer.step()
    optimizer.lr = 0.5
    optimizer.step()
    assert p.data[0] == -1.5


# --- bad construction ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [SGD, Adam, AdamW, Adagrad, SparseAdam])
def test_every_optimizer_refuses_negative_lr_and_an_empty_list(cls):
    with pytest.raises(ValueError, match="lr=-0.01"):
        cls([Parameter(np.ones(2))], lr=-0.01)
    with pytest.raises(ValueError, match="lr=nan"):
        cls([Parameter(np.ones(2))], lr=float("nan"))
    with pytest.raises(ValueError, match="empty parameter list"):
        cls([], lr=0.1)


@pytest.mark.parametrize("cls", [Adam, AdamW, SparseAdam])
@pytest.mark.parametrize("betas,fragment", [((1.0, 0.999), "betas[0]"), ((0.9, 1.0), "betas[1]"),
                                            ((-0.1, 0.9), "betas[0]"), ((0.9,), "pair")])
def test_betas_outside_zero_to_one_are_refused(cls, betas, fragment):
    with pytest.raises(ValueError) as caught:
        cls([Parameter(np.ones(2))], betas=betas)
    assert fragment in str(caught.value)


@pytest.mark.parametrize("cls,kwargs,name", [(SGD, {"lr": 0.1, "momentum": -0.9}, "momentum"),
                                             (SGD, {"lr": 0.1, "weight_decay": -1e-4}, "weight_decay"),
                                             (Adam, {"eps": -1e-8}, "eps"),
                                             (AdamW, {"weight_decay": -0.01}, "weight_decay"),
                                             (Adagrad, {"lr_decay": -0.1}, "lr_decay"),
                                             (Adagrad, {"initial_accumulator_value": -1.0}, "initial_accumulator_value")])
def test_negative_hyperparameters_are_refused_by_name(cls, kwargs, name):
    with pytest.raises(ValueError, match=f"{name}="):
        cls([Parameter(np.ones(2))], **kwargs)


def test_params_must_be_an_iterable_of_float_tensors():
    p = Parameter(np.ones(2))
    with pytest.raises(TypeError, match="single Tensor"):
        SGD(p, lr=0.1)
    with pytest.raises(TypeError, match="Linear"):
        SGD(Linear(2, 2), lr=0.1)
    with pytest.raises(TypeError, match=r"params\[1\].*ndarray"):
        SGD([p, np.ones(2)], lr=0.1)
    with pytest.raises(TypeError, match="int64"):
        SGD([Tensor(np.ones(2, dtype=np.int64))], lr=0.1)


def test_base_optimizer_needs_an_update_rule():
    p = Parameter(np.ones(1))
    p.grad = np.ones(1)
    with pytest.raises(NotImplementedError, match="_update"):
        Optimizer([p], lr=0.1).step()


def test_repr_shows_the_hyperparameters():
    p = Parameter(np.ones(1))
    assert repr(SGD([p], lr=0.1, momentum=0.9)) == "SGD(lr=0.1, momentum=0.9, weight_decay=0.0, params=1)"
    assert repr(AdamW([p])) == "AdamW(lr=0.001, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.01, params=1)"


# --- PyTorch trajectories ----------------------------------------------------------------------------------------------

def torch_trajectory(torch, optimizer_factory, start, grads):
    "Run torch.optim on a float64 copy of `start` with the given gradients (dense arrays or RowSparseGrad)."
    p = torch.nn.Parameter(torch.tensor(start))
    optimizer = optimizer_factory([p])
    with torch.sparse.check_sparse_tensor_invariants():      # validate our indices (and silence torch's warning)
        for g in grads:
            if isinstance(g, RowSparseGrad):
                p.grad = torch.sparse_coo_tensor(torch.tensor(g.indices)[None, :], torch.tensor(g.values), g.shape)
            else:
                p.grad = torch.tensor(g)
            optimizer.step()
    return p.detach().numpy()


@pytest.mark.torch
@pytest.mark.parametrize("name,ours,theirs", [
    ("sgd", lambda ps: SGD(ps, lr=0.1), lambda o, ps: o.SGD(ps, lr=0.1)),
    ("sgd-momentum", lambda ps: SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
     lambda o, ps: o.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01)),
    ("adam", lambda ps: Adam(ps, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1),
     lambda o, ps: o.Adam(ps, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1)),
    ("adamw", lambda ps: AdamW(ps, lr=0.01), lambda o, ps: o.AdamW(ps, lr=0.01)),
    ("adagrad", lambda ps: Adagrad(ps, lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.2),
     lambda o, ps: o.Adagrad(ps, lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.2))])
def test_dense_trajectories_match_pytorch(torch, name, ours, theirs, rng):
    start, grads = rng.normal(size=(5, 3)), dense_grads(rng, (5, 3), 10)
    p = parameter64(start)
    optimizer = ours([p])
    for g in grads:
        p.grad = g
        optimizer.step()
    expected = torch_trajectory(torch, lambda ps: theirs(torch.optim, ps), start, grads)
    np.testing.assert_allclose(p.data, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.torch
@pytest.mark.parametrize("name,ours,theirs", [
    ("sgd", lambda ps: SGD(ps, lr=0.1), lambda o, ps: o.SGD(ps, lr=0.1)),
    ("sgd-momentum", lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda o, ps: o.SGD(ps, lr=0.1, momentum=0.9)),
    ("adagrad", lambda ps: Adagrad(ps, lr=0.1, lr_decay=0.05), lambda o, ps: o.Adagrad(ps, lr=0.1, lr_decay=0.05)),
    ("sparse-adam", lambda ps: SparseAdam(ps, lr=0.05, betas=(0.8, 0.99)),
     lambda o, ps: o.SparseAdam(ps, lr=0.05, betas=(0.8, 0.99)))])
def test_sparse_trajectories_match_pytorch(torch, name, ours, theirs, rng):
    start = rng.normal(size=(8, 3))
    grads = [random_sparse(rng, (8, 3), rows) for rows in ([0, 3], [3, 7], [1], [0, 1, 2, 3, 4, 5, 6, 7], [5], [3])]
    p = parameter64(start)
    optimizer = ours([p])
    for g in grads:
        p.grad = g
        optimizer.step()
    expected = torch_trajectory(torch, lambda ps: theirs(torch.optim, ps), start, grads)
    np.testing.assert_allclose(p.data, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.torch
def test_float32_adam_stays_close_to_pytorch(torch, rng):
    start, grads = rng.normal(size=(16, 8)).astype(np.float32), dense_grads(rng, (16, 8), 20)
    p = Parameter(start)
    optimizer = Adam([p], lr=1e-2)
    for g in grads:
        p.grad = g.astype(np.float32)
        optimizer.step()
    theirs = torch.nn.Parameter(torch.tensor(start))
    reference = torch.optim.Adam([theirs], lr=1e-2)
    for g in grads:
        theirs.grad = torch.tensor(g.astype(np.float32))
        reference.step()
    np.testing.assert_allclose(p.data, theirs.detach().numpy(), rtol=1e-5, atol=1e-6)


# ================================================================ issue 23: reliability, third pass
# ---------------------------------------------------------------- defect 1: a step on a parameter makes its saved views stale

STALE = "modified by an inplace operation"


@pytest.mark.parametrize("view", [lambda w: w[0], lambda w: w[1:, ::2], lambda w: w.reshape(2, 6), lambda w: w.T],
                         ids=["row", "slice", "reshape", "transpose"])
@pytest.mark.parametrize("optimizer_class", [SGD, Adam, AdamW, Adagrad])
def test_a_step_before_backward_makes_a_graph_that_saved_a_view_of_the_parameter_stale(view, optimizer_class):
    w = Parameter(np.arange(12.0).reshape(3, 4))
    v = view(w)
    loss = (v * v).sum()                                   # saved the view's values (PyTorch's MulBackward does too)
    w.grad = np.ones(w.shape, np.float32)
    optimizer_class([w], lr=0.1).step()
    w.grad = None
    with pytest.raises(RuntimeError, match=STALE):
        loss.backward()
    assert w.grad is None


def test_a_tied_head_sees_the_step_on_the_shared_table():
    "nanoGPT's tied head: logits = h @ wte.weight.T. A step on wte.weight must make that graph stale."
    table = Parameter(np.random.default_rng(0).normal(size=(5, 3)))
    hidden = Tensor(np.random.default_rng(1).normal(size=(2, 3)), requires_grad=True)
    loss = (hidden @ table.T).sum()                        # d loss / d hidden needs table.T's values
    table.grad = np.ones(table.shape, np.float32)
    Adam([table], lr=0.1).step()
    table.grad = None
    with pytest.raises(RuntimeError, match=STALE):
        loss.backward()
    assert hidden.grad is None


# ---------------------------------------------------------------- issue 23, second part: hyper-parameters are finite

@pytest.mark.parametrize("make, name", [
    (lambda ps: Adam(ps, lr=float("inf")), "lr"), (lambda ps: AdamW(ps, lr=float("nan")), "lr"),
    (lambda ps: SGD(ps, lr=float("inf")), "lr"), (lambda ps: SGD(ps, lr=0.1, momentum=float("inf")), "momentum"),
    (lambda ps: Adam(ps, eps=float("inf")), "eps"), (lambda ps: AdamW(ps, weight_decay=float("inf")), "weight_decay"),
    (lambda ps: Adagrad(ps, lr_decay=float("inf")), "lr_decay"), (lambda ps: SparseAdam(ps, lr=float("inf")), "lr"),
    (lambda ps: SGD(ps, lr="0.1"), "lr"), (lambda ps: SGD(ps, lr=True), "lr"),
])
def test_optimizer_hyper_parameters_must_be_finite_numbers(make, name):
    with pytest.raises((TypeError, ValueError), match=name):
        make([Parameter(np.ones(3))])


def test_an_infinite_lr_set_between_steps_is_refused_and_changes_nothing():
    p = Parameter(np.ones(3))
    optimizer = Adam([p], lr=0.1)
    p.grad = np.ones(3)
    optimizer.lr = float("inf")
    with pytest.raises(ValueError, match="lr"):
        optimizer.step()
    assert np.array_equal(p.data, np.ones(3)) and optimizer.state == [{}]


# ---------------------------------------------------------------- issue 23, second part: nesterov and amsgrad (PyTorch's)

def _run_against_torch(make_ours, make_torch, steps=12, sparse_rows=None):
    "Both optimisers on the same float64 parameters and gradients for `steps` steps; the parameters compared each step."
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    start = rng.standard_normal((6, 5))
    ours, theirs = Parameter(start.copy(), dtype=np.float64), torch.tensor(start.copy(), requires_grad=True)
    optimizer, reference = make_ours([ours]), make_torch([theirs])
    for step in range(steps):
        grad = rng.standard_normal(start.shape) * (10.0 ** rng.integers(-3, 2))
        ours.grad, theirs.grad = grad.copy(), torch.tensor(grad.copy())
        optimizer.step()
        reference.step()
        np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-12, atol=1e-13,
                                   err_msg=f"step {step + 1}")
    return optimizer


@pytest.mark.parametrize("momentum, weight_decay", [(0.9, 0.0), (0.5, 0.01), (0.99, 0.1)])
def test_sgd_nesterov_matches_pytorch(momentum, weight_decay):
    torch = pytest.importorskip("torch")
    _run_against_torch(lambda ps: SGD(ps, lr=0.05, momentum=momentum, weight_decay=weight_decay, nesterov=True),
                       lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=momentum, weight_decay=weight_decay,
                                                  nesterov=True))


def test_sgd_nesterov_with_row_sparse_gradients_equals_dense():
    rows = np.array([0, 2, 2, 5])
    dense, sparse = Parameter(np.ones((6, 3))), Parameter(np.ones((6, 3)))
    opt_dense = SGD([dense], lr=0.1, momentum=0.9, nesterov=True)
    opt_sparse = SGD([sparse], lr=0.1, momentum=0.9, nesterov=True)
    rng = np.random.default_rng(3)
    for _ in range(4):
        values = rng.standard_normal((len(rows), 3)).astype(np.float32)
        sparse.grad = RowSparseGrad.from_rows(rows, values, (6, 3))
        dense.grad = sparse.grad.to_dense()
        opt_dense.step()
        opt_sparse.step()
        np.testing.assert_allclose(sparse.data, dense.data, rtol=1e-6)


@pytest.mark.parametrize("bad, kind, words", [
    (dict(nesterov=True), ValueError, "nesterov=True needs a momentum"),
    (dict(momentum=0.9, nesterov="yes"), TypeError, "nesterov must be True or False"),
])
def test_sgd_nesterov_is_checked(bad, kind, words):
    with pytest.raises(kind, match=words):
        SGD([Parameter(np.ones(2))], lr=0.1, **bad)


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
@pytest.mark.parametrize("weight_decay", [0.0, 0.05])
def test_amsgrad_matches_pytorch(name, weight_decay):
    torch = pytest.importorskip("torch")
    ours, theirs = {"Adam": (Adam, torch.optim.Adam), "AdamW": (AdamW, torch.optim.AdamW)}[name]
    optimizer = _run_against_torch(
        lambda ps: ours(ps, lr=0.01, betas=(0.8, 0.9), weight_decay=weight_decay, amsgrad=True),
        lambda ps: theirs(ps, lr=0.01, betas=(0.8, 0.9), weight_decay=weight_decay, amsgrad=True))
    state = optimizer.state[0]
    assert set(state) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}, "PyTorch's state names"
    assert (state["max_exp_avg_sq"] >= state["exp_avg_sq"]).all()


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_without_amsgrad_still_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    ours, theirs = {"Adam": (Adam, torch.optim.Adam), "AdamW": (AdamW, torch.optim.AdamW)}[name]
    _run_against_torch(lambda ps: ours(ps, lr=0.01), lambda ps: theirs(ps, lr=0.01))


def test_amsgrad_must_be_a_bool_and_is_shown():
    with pytest.raises(TypeError, match="amsgrad must be True or False"):
        Adam([Parameter(np.ones(2))], amsgrad="no")
    assert "amsgrad=True" in repr(AdamW([Parameter(np.ones(2))], amsgrad=True))
    assert "nesterov=True" in repr(SGD([Parameter(np.ones(2))], lr=0.1, momentum=0.9, nesterov=True))
