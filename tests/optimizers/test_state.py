"""Optimiser state: `state_dict()` / `load_state_dict()` for every optimiser (module 06), in PyTorch's layout.

Resuming from a state dict continues the uninterrupted run bit for bit, with the plain and the fast kernels;
the layout and the values match torch.optim's after the same steps; bad state dicts are refused by name and
change nothing.
"""
import numpy as np
import pytest

from tinytorch.core.autograd import RowSparseGrad
from tinytorch.core.layers import Parameter
from tinytorch.core.optimizers import SGD, Adagrad, Adam, AdamW, SparseAdam

pytestmark = pytest.mark.usefixtures("both_kernels")

SETTINGS = {
    "SGD": (SGD, {"lr": 0.1}),
    "SGD momentum": (SGD, {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}),
    "Adam": (Adam, {"lr": 0.01, "weight_decay": 0.1}),
    "AdamW": (AdamW, {"lr": 0.01, "betas": (0.8, 0.9)}),
    "Adagrad": (Adagrad, {"lr": 0.1, "lr_decay": 0.01, "initial_accumulator_value": 0.1}),
}
SPARSE_SETTINGS = {
    "SGD momentum, sparse": (SGD, {"lr": 0.1, "momentum": 0.9}),
    "Adagrad, sparse": (Adagrad, {"lr": 0.1}),
    "SparseAdam": (SparseAdam, {"lr": 0.01}),
}


def gradients(rng, shape, count, sparse):
    if not sparse:
        return [rng.standard_normal(shape).astype(np.float32) for _ in range(count)]
    return [RowSparseGrad(np.sort(rng.choice(shape[0], 3, replace=False)),
                          rng.standard_normal((3, shape[1])).astype(np.float32), shape) for _ in range(count)]


def run(cls, settings, params, grads, state=None):
    optimizer = cls(params, **settings)
    if state is not None:
        optimizer.load_state_dict(state)
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = g
        optimizer.step()
    return optimizer


@pytest.mark.parametrize("name", [*SETTINGS, *SPARSE_SETTINGS])
def test_resume_from_state_dict_is_bit_exact(name, rng):
    cls, settings = {**SETTINGS, **SPARSE_SETTINGS}[name]
    sparse = name in SPARSE_SETTINGS
    start = [rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal((6, 4)).astype(np.float32)]
    grads = [gradients(rng, (6, 4), 2, sparse) for _ in range(8)]
    grads[2][1] = None                                          # a parameter without a gradient at one step
    straight = [Parameter(a.copy()) for a in start]
    run(cls, settings, straight, grads)
    resumed = [Parameter(a.copy()) for a in start]
    saved = run(cls, settings, resumed, grads[:4]).state_dict()
    run(cls, settings, resumed, grads[4:], state=saved)
    for a, b in zip(straight, resumed):
        assert a.data.dtype == b.data.dtype == np.float32
        assert np.array_equal(a.data, b.data), f"{name}: 4 + save + load + 4 steps differ from 8 steps"


def test_state_dict_is_a_copy_and_load_copies(rng):
    p = Parameter(np.ones((3, 2)))
    optimizer = SGD([p], lr=0.1, momentum=0.9)
    p.grad = np.ones((3, 2))
    optimizer.step()
    saved = optimizer.state_dict()
    saved["state"][0]["momentum_buffer"][:] = 5
    assert np.all(optimizer.state[0]["momentum_buffer"] == 1)
    saved = optimizer.state_dict()
    optimizer.load_state_dict(saved)
    saved["state"][0]["momentum_buffer"][:] = 5
    assert np.all(optimizer.state[0]["momentum_buffer"] == 1)


def test_a_state_dict_before_any_step_has_no_state():
    saved = Adam([Parameter(np.ones(2))], lr=0.5).state_dict()
    assert saved == {"state": {}, "param_groups": [{"lr": 0.5, "betas": (0.9, 0.999), "eps": 1e-8,
                                                      "weight_decay": 0.0, "amsgrad": False, "params": [0]}]}


def test_loading_restores_the_hyperparameters_as_pytorch_does():
    p = Parameter(np.ones(2))
    source = Adam([p], lr=0.02, betas=(0.5, 0.6), eps=1e-3)
    target = Adam([p], lr=1.0)
    target.load_state_dict(source.state_dict())
    assert (target.lr, target.betas, target.eps) == (0.02, (0.5, 0.6), 1e-3)


def test_sparse_momentum_buffer_stays_sparse_through_a_state_dict():
    p = Parameter(np.zeros((5, 2)))
    optimizer = SGD([p], lr=0.1, momentum=0.9)
    p.grad = RowSparseGrad([1, 3], np.ones((2, 2)), (5, 2))
    optimizer.step()
    saved = optimizer.state_dict()["state"][0]["momentum_buffer"]
    assert isinstance(saved, RowSparseGrad) and saved.indices.tolist() == [1, 3]
    fresh = SGD([p], lr=0.1, momentum=0.9)
    fresh.load_state_dict(optimizer.state_dict())
    assert isinstance(fresh.state[0]["momentum_buffer"], RowSparseGrad)


@pytest.mark.parametrize("change, error, words", [
    (lambda s: s.pop("state"), ValueError, "the keys 'state' and 'param_groups'"),
    (lambda s: s["param_groups"].append({}), ValueError, "a list of one group"),
    (lambda s: s["param_groups"][0].pop("eps"), ValueError, "Adam saves ['amsgrad', 'betas', 'eps'"),
    (lambda s: s["param_groups"][0].update(lr=-1.0), ValueError, "lr must be >= 0"),
    (lambda s: s["param_groups"][0].update(betas=(0.9, 1.5)), ValueError, "betas[1]"),
    (lambda s: s["param_groups"][0].update(params=[0]), ValueError, "is for 1 parameters; this optimizer has 2"),
    (lambda s: s["state"].update({7: s["state"][0]}), ValueError, "the key 7"),
    (lambda s: s["state"][0].pop("step"), ValueError, "Adam keeps ['exp_avg', 'exp_avg_sq', 'step']"),
    (lambda s: s["state"][0].update(step=-1), ValueError, "['step'] must be a whole number >= 0"),
    (lambda s: s["state"][0].update(step=2.5), ValueError, "['step'] must be a whole number >= 0"),
    (lambda s: s["state"][1].update(exp_avg=np.zeros(3)), ValueError, "['exp_avg'] has shape (3,)"),
    (lambda s: s["state"][1].update(exp_avg=np.array(["a"] * 4).reshape(2, 2)), TypeError, "must hold numbers"),
])
def test_a_bad_state_dict_is_refused_by_name_and_changes_nothing(change, error, words):
    params = [Parameter(np.ones(3)), Parameter(np.ones((2, 2)))]
    optimizer = Adam(params, lr=0.1)
    for p in params:
        p.grad = np.ones(p.shape)
    optimizer.step()
    saved = optimizer.state_dict()
    change(saved)
    target = Adam(params, lr=0.3)
    with pytest.raises(error) as caught:
        target.load_state_dict(saved)
    assert words in str(caught.value)
    assert target.state == [{}, {}] and target.lr == 0.3


def test_a_state_dict_of_another_optimiser_kind_is_refused():
    p = Parameter(np.ones(3))
    adam = Adam([p])
    p.grad = np.ones(3)
    adam.step()
    with pytest.raises(ValueError, match="another kind of optimiser"):
        SGD([p], lr=0.1).load_state_dict(adam.state_dict())
    with pytest.raises(ValueError, match="another kind of optimiser"):   # same hyperparameters, other buffers
        Adagrad([p]).load_state_dict({"state": adam.state_dict()["state"],
                                      "param_groups": Adagrad([p]).state_dict()["param_groups"]})


TORCH_PAIRS = {
    "SGD": (SGD, "SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}),
    "Adam": (Adam, "Adam", {"lr": 0.01, "weight_decay": 0.1}),
    "AdamW": (AdamW, "AdamW", {"lr": 0.01}),
    "Adagrad": (Adagrad, "Adagrad", {"lr": 0.1, "lr_decay": 0.01}),
}


@pytest.mark.parametrize("name", TORCH_PAIRS)
def test_layout_and_values_match_pytorch(name, torch, rng):
    cls, torch_name, settings = TORCH_PAIRS[name]
    start = rng.standard_normal((4, 3))
    grads = [rng.standard_normal((4, 3)) for _ in range(3)]
    ours = Parameter(start.copy())
    ours.data = start.copy()                                      # float64, as the torch tensor below
    optimizer = cls([ours], **settings)
    theirs = torch.nn.Parameter(torch.tensor(start.copy()))
    reference = getattr(torch.optim, torch_name)([theirs], **settings)
    for g in grads:
        ours.grad, theirs.grad = g, torch.tensor(g)
        optimizer.step()
        reference.step()
    mine, expected = optimizer.state_dict(), reference.state_dict()
    assert set(mine) == set(expected) == {"state", "param_groups"}
    assert set(mine["param_groups"][0]) <= set(expected["param_groups"][0])
    for key, value in mine["param_groups"][0].items():
        assert value == (tuple(expected["param_groups"][0][key]) if key == "betas" else expected["param_groups"][0][key])
    assert set(mine["state"]) == set(expected["state"]) == {0}
    assert set(mine["state"][0]) == set(expected["state"][0])
    for key, value in mine["state"][0].items():
        np.testing.assert_allclose(np.asarray(value), np.asarray(expected["state"][0][key]), rtol=1e-10, atol=1e-12)
    # and PyTorch's own state (tensors, a float step) loads into ours and continues as PyTorch does
    continued = Parameter(theirs.detach().numpy().copy())
    continued.data = theirs.detach().numpy().copy()
    resumed = cls([continued], lr=1.0)
    resumed.load_state_dict({"state": {0: dict(expected["state"][0])},
                             "param_groups": [{key: expected["param_groups"][0][key]
                                               for key in mine["param_groups"][0]}]})
    g = rng.standard_normal((4, 3))
    continued.grad, theirs.grad = g, torch.tensor(g)
    resumed.step()
    reference.step()
    np.testing.assert_allclose(continued.data, theirs.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.filterwarnings("ignore:Sparse invariant checks")
def test_sparse_adam_layout_matches_pytorch(torch, rng):
    table = rng.standard_normal((6, 2))
    ours = Parameter(table.copy())
    ours.data = table.copy()
    optimizer = SparseAdam([ours], lr=0.01)
    theirs = torch.nn.Parameter(torch.tensor(table.copy()))
    reference = torch.optim.SparseAdam([theirs], lr=0.01)
    for _ in range(3):
        rows, values = np.sort(rng.choice(6, 2, replace=False)), rng.standard_normal((2, 2))
        ours.grad = RowSparseGrad(rows, values, (6, 2))
        theirs.grad = torch.sparse_coo_tensor(torch.tensor(rows)[None], torch.tensor(values), (6, 2))
        optimizer.step()
        reference.step()
    mine, expected = optimizer.state_dict(), reference.state_dict()
    assert set(mine["param_groups"][0]) <= set(expected["param_groups"][0])
    assert set(mine["state"][0]) == set(expected["state"][0])
    for key, value in mine["state"][0].items():
        np.testing.assert_allclose(np.asarray(value), np.asarray(expected["state"][0][key]), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- issue 23, second part: nesterov and amsgrad in the state

def test_amsgrad_and_nesterov_travel_with_the_state_dict():
    p = Parameter(np.ones(3))
    adam = Adam([p], lr=0.1, amsgrad=True)
    p.grad = np.array([1.0, -2.0, 3.0])
    adam.step()
    saved = adam.state_dict()
    assert saved["param_groups"][0]["amsgrad"] is True and set(saved["state"][0]) == {
        "step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
    fresh = Adam([p], lr=0.1)                              # amsgrad comes back with the hyperparameters
    fresh.load_state_dict(saved)
    assert fresh.amsgrad and np.array_equal(fresh.state[0]["max_exp_avg_sq"], adam.state[0]["max_exp_avg_sq"])
    sgd = SGD([p], lr=0.1, momentum=0.9, nesterov=True)
    sgd.step()
    other = SGD([p], lr=0.5)
    other.load_state_dict(sgd.state_dict())
    assert other.nesterov and other.momentum == 0.9


def test_a_nesterov_state_dict_without_momentum_is_refused_and_changes_nothing():
    p = Parameter(np.ones(3))
    saved = SGD([p], lr=0.1, momentum=0.9, nesterov=True).state_dict()
    saved["param_groups"][0]["momentum"] = 0.0
    target = SGD([p], lr=0.5)
    with pytest.raises(ValueError, match="nesterov=True needs a momentum"):
        target.load_state_dict(saved)
    assert target.lr == 0.5 and not target.nesterov
    saved["param_groups"][0].update(momentum=0.9, nesterov="yes")
    with pytest.raises(TypeError, match="nesterov must be True or False"):
        target.load_state_dict(saved)
