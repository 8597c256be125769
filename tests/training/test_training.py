"""Module 07, training: clipping, schedules, schedulers, resumable checkpoints and the loop.

Checked against PyTorch 2.13 where it has the same thing (clip_grad_norm_, get_total_norm, the schedulers of
torch.optim.lr_scheduler) and against CS336's published values for the cosine schedule; the resume test is
bit-exact for SGD, Adam, AdamW and SparseAdam, with the plain and the fast kernels.
"""
import io
import math

import numpy as np
import pytest

from tinytorch.core.activations import ReLU
from tinytorch.core.autograd import Function, RowSparseGrad
from tinytorch.core.checkpoint import CheckpointError, save
from tinytorch.core.layers import Linear, Module, Parameter, Sequential
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import SGD, Adagrad, Adam, AdamW, SparseAdam
from tinytorch.training import (TRAINING_META, ConstantSchedule, CosineSchedule, History, LinearSchedule, LRScheduler,
                                _optimizer_state, _training_entries, clip_grad_norm_, evaluate, scale_gradient,
                                fit, get_lr_constant_schedule, get_lr_cosine_schedule, get_lr_linear_schedule,
                                get_total_norm, load_checkpoint, save_checkpoint, train_step)

CS336_COSINE = [0, 0.14285714285714285, 0.2857142857142857, 0.42857142857142855, 0.5714285714285714,
                0.7142857142857143, 0.8571428571428571, 1.0, 0.9887175604818206, 0.9554359905560885,
                0.9018241671106134, 0.8305704108364301, 0.7452476826029011, 0.6501344202803414, 0.55,
                0.44986557971965857, 0.3547523173970989, 0.26942958916356996, 0.19817583288938662,
                0.14456400944391146, 0.11128243951817937, 0.1, 0.1, 0.1, 0.1]


# ---- clipping ---------------------------------------------------------------------------------------------------

def parameters_with_grads(rng, shapes, scale=1.0, dtype=np.float32):
    params = []
    for shape in shapes:
        p = Parameter(np.zeros(shape))
        p.grad = (scale * rng.standard_normal(shape)).astype(dtype)
        params.append(p)
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, 0.5, math.inf, "inf"])
@pytest.mark.parametrize("max_norm", [0.0, 0.5, 5.0, 1e6])
def test_clip_grad_norm_matches_pytorch(torch, rng, norm_type, max_norm):
    shapes = [(4, 3), (7,), (2, 2, 2), (1,)]
    ours = parameters_with_grads(rng, shapes, scale=2.0)
    theirs = [torch.nn.Parameter(torch.zeros(shape)) for shape in shapes]
    for p, q in zip(ours, theirs):
        q.grad = torch.tensor(p.grad.copy())
    total = clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    assert type(total) is float
    np.testing.assert_allclose(total, expected.item(), rtol=1e-5)
    for p, q in zip(ours, theirs):
        assert p.grad.dtype == np.float32
        np.testing.assert_allclose(p.grad, q.grad.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_clip_grad_norm_non_finite_gradients_match_pytorch(torch, rng, bad):
    ours = parameters_with_grads(rng, [(3,), (2, 2)])
    ours[0].grad[1] = bad
    theirs = [torch.nn.Parameter(torch.zeros(p.shape)) for p in ours]
    for p, q in zip(ours, theirs):
        q.grad = torch.tensor(p.grad.copy())
    total = clip_grad_norm_(ours, 1.0)
    expected = torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    np.testing.assert_equal(total, expected.item())
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.grad, q.grad.numpy(), equal_nan=True)
    with pytest.raises(RuntimeError, match="error_if_nonfinite"):
        clip_grad_norm_(ours, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError, match="error_if_nonfinite"):
        torch.nn.utils.clip_grad_norm_(theirs, 1.0, error_if_nonfinite=True)


def test_get_total_norm_matches_pytorch(torch, rng):
    arrays = [rng.standard_normal((5, 4)), rng.standard_normal(3)]
    for norm_type in (2.0, 1.0, math.inf):
        expected = torch.nn.utils.get_total_norm([torch.tensor(a) for a in arrays], norm_type)
        np.testing.assert_allclose(get_total_norm(arrays, norm_type), expected.item(), rtol=1e-12)
        # an empty gradient adds nothing (PyTorch refuses it for the inf-norm: max of nothing)
        assert get_total_norm([*arrays, np.zeros((0, 3))], norm_type) == get_total_norm(arrays, norm_type)
    assert get_total_norm([]) == 0.0 == torch.nn.utils.get_total_norm([]).item()


def test_clip_grad_norm_of_sparse_gradients_equals_their_dense_form(torch, rng):
    rows = rng.standard_normal((3, 4)).astype(np.float32)
    table, dense = Parameter(np.zeros((10, 4))), Parameter(np.zeros((2, 4)))
    table.grad = RowSparseGrad([1, 5, 9], rows, (10, 4))
    dense.grad = rng.standard_normal((2, 4)).astype(np.float32)
    theirs = [torch.nn.Parameter(torch.zeros(10, 4)), torch.nn.Parameter(torch.zeros(2, 4))]
    theirs[0].grad, theirs[1].grad = torch.tensor(table.grad.to_dense()), torch.tensor(dense.grad.copy())
    total = clip_grad_norm_([table, dense], 0.3)
    expected = torch.nn.utils.clip_grad_norm_(theirs, 0.3)
    np.testing.assert_allclose(total, expected.item(), rtol=1e-6)
    assert isinstance(table.grad, RowSparseGrad) and table.grad.indices.tolist() == [1, 5, 9]
    assert table.grad.dtype == np.float32
    np.testing.assert_allclose(table.grad.to_dense(), theirs[0].grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(dense.grad, theirs[1].grad.numpy(), rtol=1e-6)


def test_scale_gradient_keeps_kind_and_dtype():
    dense = np.array([[1.0, -2.0], [0.5, 4.0]], np.float32)
    scaled = scale_gradient(dense, np.float64(0.25))
    assert scaled.dtype == np.float32
    np.testing.assert_array_equal(scaled, dense * np.float32(0.25))
    rows = np.array([[1.0, 2.0, 3.0]], np.float32)
    sparse = scale_gradient(RowSparseGrad([4], rows, (6, 3)), np.float64(3.0))
    kind = type(sparse).__name__
    assert kind == "RowSparseGrad"
    assert sparse.values.dtype == np.float32
    np.testing.assert_array_equal(sparse.values, rows * 3)
    assert sparse.indices.tolist() == [4] and sparse.shape == (6, 3)


def test_clip_grad_norm_takes_a_single_tensor_skips_missing_grads_and_counts_shared_ones_once():
    p, q = Parameter(np.zeros(2)), Parameter(np.zeros(2))
    p.grad = np.array([3.0, 4.0])
    assert clip_grad_norm_(p, 1.0) == pytest.approx(5.0)
    p.grad = np.array([3.0, 4.0])
    assert clip_grad_norm_([p, q, p], 100.0) == pytest.approx(5.0)      # q has no grad; p once
    assert q.grad is None


def test_clip_grad_norm_does_not_write_into_the_old_gradient_array():
    p = Parameter(np.zeros(2))
    old = np.array([3.0, 4.0])
    p.grad = old
    clip_grad_norm_([p], 1.0)
    assert old.tolist() == [3.0, 4.0] and p.grad[0] == pytest.approx(0.6)


@pytest.mark.parametrize("call, error, words", [
    (lambda ps: clip_grad_norm_(ps, -1.0), ValueError, "max_norm must be >= 0"),
    (lambda ps: clip_grad_norm_(ps, float("nan")), ValueError, "max_norm must be >= 0"),
    (lambda ps: clip_grad_norm_(ps, None), TypeError, "max_norm must be a number"),
    (lambda ps: clip_grad_norm_(ps, 1.0, norm_type=0), ValueError, "norm_type must be a number > 0"),
    (lambda ps: clip_grad_norm_(ps, 1.0, norm_type="fro"), TypeError, "norm_type must be a number > 0"),
    (lambda ps: clip_grad_norm_(ps, 1.0, error_if_nonfinite="no"), TypeError, "error_if_nonfinite must be True or False"),
    (lambda ps: clip_grad_norm_(3, 1.0), TypeError, "parameters must be a Tensor or an iterable"),
    (lambda ps: clip_grad_norm_([ps[0], "w"], 1.0), TypeError, "parameters[1] must be a Tensor"),
])
def test_clip_grad_norm_bad_arguments_are_named(call, error, words):
    p = Parameter(np.zeros(2))
    p.grad = np.ones(2)
    with pytest.raises(error) as caught:
        call([p])
    assert words in str(caught.value)
    assert p.grad.tolist() == [1.0, 1.0]


# ---- schedules --------------------------------------------------------------------------------------------------

def test_cosine_schedule_gives_cs336s_values():
    got = [get_lr_cosine_schedule(it, max_learning_rate=1, min_learning_rate=0.1, warmup_iters=7,
                                  cosine_cycle_iters=21) for it in range(25)]
    np.testing.assert_allclose(got, CS336_COSINE, rtol=1e-12)


@pytest.mark.parametrize("warmup, decay, high, low", [(2, 6, 1.0, 0.0), (3, 11, 0.5, 0.1), (0, 4, 2.0, 1.0),
                                                    (5, 5, 1.0, 0.3)])
def test_linear_schedule_is_the_polyline_through_its_corners(warmup, decay, high, low):
    """Independent reference: np.interp through (0, 0), (warmup, max), (decay, min), flat after."""
    its = np.arange(decay + 4)
    got = np.array([get_lr_linear_schedule(int(it), high, low, warmup, decay) for it in its])
    if warmup == decay:
        expected = np.where(its < warmup, its / max(warmup, 1) * high, low)
    else:
        expected = np.interp(its, [0, warmup, decay] if warmup else [warmup, decay], [0.0, high, low] if warmup else [high, low])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("warmup, high", [(4, 2.0), (0, 3.0), (1, 0.5)])
def test_constant_schedule_warms_up_then_holds(warmup, high):
    got = np.array([get_lr_constant_schedule(it, high, warmup) for it in range(8)])
    expected = np.minimum(np.arange(8) / max(warmup, 1), 1.0) * high if warmup else np.full(8, high)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


class _Counting(LRScheduler):
    "A schedule of this test's own: the rate says the iteration (10 + it), so LRScheduler.step is checked alone."

    def __init__(self, optimizer):
        super().__init__(optimizer, {})

    def lr_at(self, it):
        return 10.0 + it


def test_scheduler_step_counts_then_sets_the_rate_of_the_new_iteration():
    optimizer = SGD([Parameter(np.zeros(1))], lr=0.5)
    scheduler = _Counting(optimizer)
    rates = [optimizer.lr]
    for _ in range(4):
        scheduler.step()
        rates.append(optimizer.lr)
    assert rates == [10.0, 11.0, 12.0, 13.0, 14.0]
    assert scheduler.last_epoch == 4


def drive(torch_scheduler_factory, ours_factory, steps):
    "The learning rates of a torch scheduler and ours, stepped the same way, at iterations 0..steps."
    import torch
    param = torch.nn.Parameter(torch.zeros(1))
    torch_optimizer = torch.optim.SGD([param], lr=1.0)
    reference = torch_scheduler_factory(torch_optimizer)
    optimizer = SGD([Parameter(np.zeros(1))], lr=1.0)
    scheduler = ours_factory(optimizer)
    theirs, ours = [reference.get_last_lr()[0]], [scheduler.get_last_lr()[0]]
    for _ in range(steps):
        torch_optimizer.step()
        reference.step()
        optimizer.step()
        scheduler.step()
        theirs.append(reference.get_last_lr()[0])
        ours.append(optimizer.lr)
    return ours, theirs


def test_cosine_schedule_without_warmup_is_pytorchs_cosine_annealing(torch):
    ours, theirs = drive(lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=30, eta_min=0.05),
                         lambda o: CosineSchedule(o, warmup_iters=0, cosine_cycle_iters=30, min_learning_rate=0.05), 30)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)


def test_linear_schedule_without_warmup_is_pytorchs_linear_lr(torch):
    ours, theirs = drive(lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=1.0, end_factor=0.2,
                                                                    total_iters=12),
                         lambda o: LinearSchedule(o, warmup_iters=0, decay_iters=12, min_learning_rate=0.2), 20)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["cosine", "linear", "constant"])
def test_schedulers_follow_pytorchs_stepping_protocol_with_warmup(torch, name):
    functions = {"cosine": lambda it: get_lr_cosine_schedule(it, 1.0, 0.1, 5, 20),
                 "linear": lambda it: get_lr_linear_schedule(it, 1.0, 0.1, 5, 20),
                 "constant": lambda it: get_lr_constant_schedule(it, 1.0, 5)}
    ours_factory = {"cosine": lambda o: CosineSchedule(o, 5, 20, min_learning_rate=0.1),
                    "linear": lambda o: LinearSchedule(o, 5, 20, min_learning_rate=0.1),
                    "constant": lambda o: ConstantSchedule(o, 5)}[name]
    ours, theirs = drive(lambda o: torch.optim.lr_scheduler.LambdaLR(o, functions[name]), ours_factory, 25)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)


def test_scheduler_state_dict_round_trip_and_resume():
    optimizer = Adam([Parameter(np.zeros(1))], lr=0.3)
    scheduler = CosineSchedule(optimizer, 3, 10, min_learning_rate=0.03)
    for _ in range(4):
        scheduler.step()
    saved = scheduler.state_dict()
    assert saved == {"last_epoch": 4, "max_learning_rate": 0.3, "min_learning_rate": 0.03, "warmup_iters": 3,
                     "cosine_cycle_iters": 10}
    other = Adam([Parameter(np.zeros(1))], lr=1.0)
    restored = CosineSchedule(other, 1, 2)
    restored.load_state_dict(saved)
    assert other.lr == optimizer.lr and restored.last_epoch == 4
    scheduler.step()
    restored.step()
    assert other.lr == optimizer.lr
    assert "CosineSchedule(max_learning_rate=0.3" in repr(restored)


def test_a_scheduler_drives_every_optimiser():
    for make in (lambda ps: SGD(ps, lr=1.0), lambda ps: Adam(ps, lr=1.0), lambda ps: AdamW(ps, lr=1.0),
                 lambda ps: Adagrad(ps, lr=1.0), lambda ps: SparseAdam(ps, lr=1.0)):
        optimizer = make([Parameter(np.zeros((2, 2)))])
        scheduler = LinearSchedule(optimizer, warmup_iters=2, decay_iters=4)
        assert optimizer.lr == 0.0
        scheduler.step()
        assert optimizer.lr == 0.5


@pytest.mark.parametrize("call, error, words", [
    (lambda: get_lr_cosine_schedule(1.5, 1.0, 0.1, 1, 5), TypeError, "it must be a non-negative int"),
    (lambda: get_lr_cosine_schedule(True, 1.0, 0.1, 1, 5), TypeError, "it must be a non-negative int"),
    (lambda: get_lr_cosine_schedule(0, "1", 0.1, 1, 5), TypeError, "max_learning_rate must be a number"),
    (lambda: get_lr_cosine_schedule(0, float("nan"), 0.1, 1, 5), ValueError, "max_learning_rate must be >= 0"),
    (lambda: get_lr_cosine_schedule(0, 1.0, 0.1, -1, 5), ValueError, "warmup_iters must be a non-negative int"),
    (lambda: get_lr_cosine_schedule(0, 1.0, 0.1, 6, 5), ValueError, "cosine_cycle_iters must be >= warmup_iters"),
    (lambda: get_lr_linear_schedule(0, 1.0, 0.1, 6, 5), ValueError, "decay_iters must be >= warmup_iters"),
    (lambda: get_lr_constant_schedule(0, 1.0, None), TypeError, "warmup_iters must be a non-negative int"),
    (lambda: CosineSchedule(SGD([Parameter(np.zeros(1))], lr=1.0), 2, 1), ValueError, "cosine_cycle_iters"),
    (lambda: CosineSchedule(object(), 1, 2), TypeError, "optimizer must be an optimiser"),
])
def test_schedule_bad_arguments_are_named(call, error, words):
    with pytest.raises(error) as caught:
        call()
    assert words in str(caught.value)


def test_a_refused_scheduler_leaves_the_optimiser_rate_alone():
    optimizer = SGD([Parameter(np.zeros(1))], lr=0.7)
    with pytest.raises(ValueError):
        CosineSchedule(optimizer, 5, 2)
    assert optimizer.lr == 0.7


# ---- checkpoints: bit-exact resume ------------------------------------------------------------------------------

class SparseLookup(Function):
    "table[ids] with a row-sparse gradient (module 11's Embedding(sparse=True) in four lines)."

    @staticmethod
    def forward(ctx, table, ids):
        ctx.save_for_backward(ids, table.shape)
        return table[ids]

    @staticmethod
    def backward(ctx, grad):
        ids, shape = ctx.saved
        return (RowSparseGrad.from_rows(ids.reshape(-1), grad.reshape(-1, shape[1]), shape),)


class BagClassifier(Module):
    "A row-sparse table of 50 rows, averaged over 4 ids, then a dense head: sparse and dense gradients in one model."

    def __init__(self, seed=0):
        self.table = Parameter(np.random.default_rng(seed).standard_normal((50, 8)) * 0.1)
        self.head = Linear(8, 3, seed=seed)

    def forward(self, ids):
        return self.head(SparseLookup.apply(self.table, ids=ids).mean(axis=1))


def bag_batch(it):
    rng = np.random.default_rng([7, it])
    ids = rng.integers(0, 50, (16, 4))
    return ids, ids[:, 0] % 3


def dense_batch(it):
    rng = np.random.default_rng([3, it])
    x = rng.standard_normal((16, 5)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0)


OPTIMIZERS = {
    "SGD": lambda m: SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3),
    "Adam": lambda m: Adam(m.parameters(), lr=0.01),
    "AdamW": lambda m: AdamW(m.parameters(), lr=0.01, weight_decay=0.1),
    "SparseAdam": lambda m: SparseAdam([m.table], lr=0.01),
}


def model_for(name, seed):
    return BagClassifier(seed) if name == "SparseAdam" else Sequential(Linear(5, 16, seed=seed), ReLU(),
                                                                      Linear(16, 3, seed=seed + 1))


def batches_for(name):
    return bag_batch if name == "SparseAdam" else dense_batch


def by_hand(model, optimizer, scheduler, first, last, batches):
    "Iterations first .. last - 1 written out, independent of fit."
    for it in range(first, last):
        inputs, targets = batches(it)
        model.zero_grad()                                   # all of them: SparseAdam steps the table only
        cross_entropy(model(inputs), targets).backward()
        clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        scheduler.step()


@pytest.mark.usefixtures("both_kernels")
@pytest.mark.parametrize("name", OPTIMIZERS)
@pytest.mark.parametrize("target", ["path", "bytes", "file"])
def test_ten_steps_equal_five_plus_save_load_five_bit_for_bit(name, target, tmp_path):
    batches = batches_for(name)
    straight = model_for(name, 0)
    optimizer = OPTIMIZERS[name](straight)
    by_hand(straight, optimizer, CosineSchedule(optimizer, 2, 10), 0, 10, batches)

    first = model_for(name, 0)
    optimizer = OPTIMIZERS[name](first)
    scheduler = CosineSchedule(optimizer, 2, 10)
    by_hand(first, optimizer, scheduler, 0, 5, batches)
    path = tmp_path / "run.ckpt"
    if target == "path":
        save_checkpoint(first, optimizer, 5, path, scheduler)
        source = path
    elif target == "bytes":
        source = io.BytesIO()
        save_checkpoint(first, optimizer, 5, source, scheduler)
        source.seek(0)
    else:
        with open(path, "wb") as file:
            save_checkpoint(first, optimizer, 5, file, scheduler)
        source = open(path, "rb")
    del first, optimizer, scheduler

    second = model_for(name, 11)                             # other weights, fresh optimiser state
    optimizer = OPTIMIZERS[name](second)
    scheduler = CosineSchedule(optimizer, 1, 3)               # other settings: the checkpoint's win
    try:
        start = load_checkpoint(source, second, optimizer, scheduler)
    finally:
        if target == "file":
            source.close()
    assert start == 5
    by_hand(second, optimizer, scheduler, start, 10, batches)
    for (key, a), b in zip(straight.state_dict().items(), second.state_dict().values()):
        assert a.dtype == b.dtype and np.array_equal(a, b), f"{name}: {key} differs after resuming"


def test_sgd_sparse_momentum_resumes_bit_for_bit():
    straight, resumed = BagClassifier(0), BagClassifier(0)
    make = lambda m: SGD(m.parameters(), lr=0.1, momentum=0.9)
    optimizer = make(straight)
    by_hand(straight, optimizer, ConstantSchedule(optimizer), 0, 8, bag_batch)
    optimizer = make(resumed)
    by_hand(resumed, optimizer, ConstantSchedule(optimizer), 0, 4, bag_batch)
    assert isinstance(optimizer.state[0]["momentum_buffer"], RowSparseGrad)
    buffer = io.BytesIO()
    save_checkpoint(resumed, optimizer, 4, buffer)
    buffer.seek(0)
    fresh = BagClassifier(5)
    optimizer = make(fresh)
    assert load_checkpoint(buffer, fresh, optimizer) == 4
    assert isinstance(optimizer.state[0]["momentum_buffer"], RowSparseGrad)
    by_hand(fresh, optimizer, ConstantSchedule(optimizer), 4, 8, bag_batch)
    assert all(np.array_equal(a, b) for a, b in zip(straight.state_dict().values(), fresh.state_dict().values()))


def _header(entries):
    import json
    return json.loads(entries[TRAINING_META].tobytes().decode("utf-8"))


def test_training_entries_hold_the_weights_the_moments_the_schedule_the_iteration_and_the_generator():
    model = Linear(3, 2, seed=0)
    optimizer = Adam(model.parameters(), lr=0.01)
    model.weight.grad, model.bias.grad = np.full((3, 2), 2.0, np.float32), np.full(2, -1.0, np.float32)
    optimizer.step()
    scheduler = ConstantSchedule(optimizer, 3)
    rng = np.random.default_rng(4)
    rng.random(3)
    entries = _training_entries(model, optimizer, 9, scheduler, rng)
    state = optimizer.state_dict()["state"]
    assert sorted(entries) == sorted(["model/weight", "model/bias", "optimizer/0/exp_avg", "optimizer/0/exp_avg_sq",
                                      "optimizer/1/exp_avg", "optimizer/1/exp_avg_sq", TRAINING_META])
    assert np.array_equal(entries["model/weight"], model.weight.data)
    assert np.array_equal(entries["optimizer/0/exp_avg"], state[0]["exp_avg"])
    assert np.array_equal(entries["optimizer/1/exp_avg_sq"], state[1]["exp_avg_sq"])
    header = _header(entries)
    assert header["iteration"] == 9
    assert header["optimizer"] == "Adam"
    assert header["state"] == {"0": {"step": {"number": 1}, "exp_avg": "array", "exp_avg_sq": "array"},
                               "1": {"step": {"number": 1}, "exp_avg": "array", "exp_avg_sq": "array"}}
    assert header["scheduler"] == {"kind": "ConstantSchedule", "state": scheduler.state_dict()}
    assert header["rng"] == rng.bit_generator.state
    assert header["param_groups"][0]["lr"] == optimizer.lr


def test_training_entries_keep_sparse_momentum_as_rows():
    table = Parameter(np.zeros((6, 2)))
    optimizer = SGD([table], lr=0.1, momentum=0.9)
    table.grad = RowSparseGrad([1, 4], np.ones((2, 2)), (6, 2))
    optimizer.step()
    entries = _training_entries(Linear(1, 1), optimizer, 0)
    assert np.array_equal(entries["optimizer/0/momentum_buffer/indices"], [1, 4])
    assert np.array_equal(entries["optimizer/0/momentum_buffer/values"], np.ones((2, 2)))
    header = _header(entries)
    assert header["state"]["0"]["momentum_buffer"] == {"rows": [6, 2]}
    assert header["scheduler"] is None and header["rng"] is None


def test_optimizer_state_is_rebuilt_from_arrays_and_header():
    m, rows = np.arange(6.0).reshape(3, 2), np.full((2, 3), 0.25)
    arrays = {"optimizer/0/exp_avg": m, "optimizer/3/momentum_buffer/indices": np.array([0, 2]),
              "optimizer/3/momentum_buffer/values": rows}
    groups = [{"lr": 0.5, "params": [0, 3]}]
    header = {"state": {"0": {"step": {"number": 7}, "exp_avg": "array"}, "3": {"momentum_buffer": {"rows": [4, 3]}}},
              "param_groups": groups}
    rebuilt = _optimizer_state(arrays, header)
    assert sorted(rebuilt["state"]) == [0, 3]
    assert rebuilt["state"][0]["step"] == 7
    assert np.array_equal(rebuilt["state"][0]["exp_avg"], m)
    buffer = rebuilt["state"][3]["momentum_buffer"]
    assert isinstance(buffer, RowSparseGrad)
    expected = np.zeros((4, 3))
    expected[[0, 2]] = rows
    assert np.array_equal(buffer.to_dense(), expected)
    assert rebuilt["param_groups"] == groups


def test_a_checkpoint_restores_the_batch_generator(tmp_path):
    model = Linear(2, 2, seed=0)
    optimizer = SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(12)
    rng.integers(0, 10, 5)
    save_checkpoint(model, optimizer, 3, tmp_path / "c.npz", rng=rng)
    expected = rng.random(4)
    fresh = np.random.default_rng(0)
    assert load_checkpoint(tmp_path / "c.npz", model, optimizer, rng=fresh) == 3
    assert np.array_equal(fresh.random(4), expected)
    with pytest.raises(CheckpointError, match="no generator state"):
        save_checkpoint(model, optimizer, 3, tmp_path / "d.npz")
        load_checkpoint(tmp_path / "d.npz", model, optimizer, rng=np.random.default_rng(1))
    with pytest.raises(CheckpointError, match="PCG64 state; the rng given is a MT19937"):
        load_checkpoint(tmp_path / "c.npz", model, optimizer, rng=np.random.Generator(np.random.MT19937(0)))
    with pytest.raises(TypeError, match="rng must be a NumPy Generator"):
        save_checkpoint(model, optimizer, 3, tmp_path / "e.npz", rng=np.random.RandomState(0))


def test_fit_with_checkpoints_resumes_bit_for_bit(tmp_path):
    def run(last, seed=0, resume=None, checkpoint=None, checkpoint_every=None):
        model = model_for("Adam", seed)
        optimizer = AdamW(model.parameters(), lr=0.01)
        scheduler = CosineSchedule(optimizer, 3, 20, min_learning_rate=0.001)
        start = 0 if resume is None else load_checkpoint(resume, model, optimizer, scheduler)
        history = fit(model, optimizer, dense_batch, last, scheduler=scheduler, max_grad_norm=1.0, start_iteration=start,
                      checkpoint=checkpoint, checkpoint_every=checkpoint_every)
        return model, history

    whole, history = run(20)
    run(20, checkpoint=tmp_path / "every4.ckpt", checkpoint_every=4)      # the last save is at the end (20)
    run(12, checkpoint=tmp_path / "at12.ckpt")
    resumed, tail = run(20, seed=9, resume=tmp_path / "at12.ckpt")
    remaining = list(range(12, 20))                               # the checkpoint holds the next iteration, 12
    assert tail.iterations == remaining
    assert tail.losses == history.losses[12:] and tail.learning_rates == history.learning_rates[12:]
    assert all(np.array_equal(a, b) for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()))
    model = model_for("Adam", 4)
    optimizer = AdamW(model.parameters(), lr=0.01)
    assert load_checkpoint(tmp_path / "every4.ckpt", model, optimizer, CosineSchedule(optimizer, 3, 20)) == 20


def test_the_checkpoint_is_module_03s_format_and_holds_no_pickle(tmp_path):
    from tinytorch.core.checkpoint import load
    model = model_for("Adam", 0)
    optimizer = Adam(model.parameters())
    by_hand(model, optimizer, ConstantSchedule(optimizer), 0, 2, dense_batch)
    save_checkpoint(model, optimizer, 2, tmp_path / "c.npz")
    arrays = load(tmp_path / "c.npz")
    assert {"model/0.weight", "optimizer/0/exp_avg", "optimizer/3/exp_avg_sq", "training/meta"} <= set(arrays)
    assert all(array.dtype.kind in "biuf" for array in arrays.values())
    with np.load(tmp_path / "c.npz", allow_pickle=False) as plain:      # readable as a plain .npz too
        assert np.array_equal(plain["model/0.weight"], model.state_dict()["0.weight"])


def test_load_checkpoint_refuses_what_does_not_fit_and_changes_nothing(tmp_path):
    model = model_for("Adam", 0)
    optimizer = Adam(model.parameters(), lr=0.01)
    by_hand(model, optimizer, ConstantSchedule(optimizer), 0, 2, dense_batch)
    save_checkpoint(model, optimizer, 2, tmp_path / "adam.ckpt")
    save(model, tmp_path / "weights-only.npz")

    target = model_for("Adam", 3)
    target_optimizer = Adam(target.parameters(), lr=0.5)
    weights = [w.copy() for w in target.state_dict().values()]

    def unchanged():
        return (all(np.array_equal(a, b) for a, b in zip(weights, target.state_dict().values()))
                and target_optimizer.state == [{}] * 4 and target_optimizer.lr == 0.5)

    with pytest.raises(CheckpointError, match="holds the state of a Adam optimiser; this optimizer is a SGD"):
        load_checkpoint(tmp_path / "adam.ckpt", target, SGD(target.parameters(), lr=0.1))
    with pytest.raises(CheckpointError, match="holds no schedule; the scheduler given is a CosineSchedule"):
        load_checkpoint(tmp_path / "adam.ckpt", target, target_optimizer, CosineSchedule(Adam(target.parameters()), 1, 2))
    with pytest.raises(CheckpointError, match="holds no training state"):
        load_checkpoint(tmp_path / "weights-only.npz", target, target_optimizer)
    wider = Sequential(Linear(5, 17), ReLU(), Linear(17, 3))
    with pytest.raises(CheckpointError, match="does not fit this model and optimiser"):
        load_checkpoint(tmp_path / "adam.ckpt", wider, Adam(wider.parameters()))
    fewer = Adam(target.parameters()[:2], lr=0.5)                       # the weights load, the optimiser does not
    with pytest.raises(CheckpointError, match="is for 4 parameters; this optimizer has 2"):
        load_checkpoint(tmp_path / "adam.ckpt", target, fewer)
    assert all(np.array_equal(a, b) for a, b in zip(weights, target.state_dict().values())), "weights put back"
    damaged = (tmp_path / "adam.ckpt").read_bytes()
    (tmp_path / "damaged.ckpt").write_bytes(damaged[: len(damaged) // 2])
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "damaged.ckpt", target, target_optimizer)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.ckpt", target, target_optimizer)
    assert unchanged()


@pytest.mark.parametrize("call, error, words", [
    (lambda m, o, p: save_checkpoint(m, o, -1, p), ValueError, "iteration must be a non-negative int"),
    (lambda m, o, p: save_checkpoint(m, o, 2.0, p), TypeError, "iteration must be a non-negative int"),
    (lambda m, o, p: save_checkpoint(m, "adam", 1, p), TypeError, "optimizer must have a state_dict()"),
    (lambda m, o, p: save_checkpoint(m, o, 1, p, scheduler="cosine"), TypeError, "scheduler must be an LRScheduler"),
    (lambda m, o, p: save_checkpoint(m, o, 1, io.StringIO()), TypeError, "binary mode"),
])
def test_save_checkpoint_bad_arguments_are_named(call, error, words, tmp_path):
    model = model_for("Adam", 0)
    with pytest.raises(error) as caught:
        call(model, Adam(model.parameters()), tmp_path / "x.ckpt")
    assert words in str(caught.value)
    assert not (tmp_path / "x.ckpt").exists()


# ---- the loop ---------------------------------------------------------------------------------------------------

def test_train_step_clips_then_steps_and_skips_non_finite_steps():
    model = model_for("Adam", 0)
    optimizer = SGD(model.parameters(), lr=0.1)
    loss, norm = train_step(model, optimizer, dense_batch(0), max_grad_norm=1e-3)
    assert math.isfinite(loss) and norm > 1e-3
    assert get_total_norm([p.grad for p in model.parameters()]) == pytest.approx(1e-3, rel=1e-4)
    before = [w.copy() for w in model.state_dict().values()]
    inf_loss = lambda m, b: cross_entropy(m(b[0]), b[1]) * float("inf")
    with np.errstate(invalid="ignore"):
        loss, norm = train_step(model, optimizer, dense_batch(1), loss_fn=inf_loss)
    assert loss == math.inf
    assert all(np.array_equal(a, b) for a, b in zip(before, model.state_dict().values()))


def test_train_step_zeroes_stale_gradients_first():
    model = model_for("Adam", 0)
    reference = model_for("Adam", 0)
    for p in model.parameters():
        p.grad = np.ones_like(p.data)                            # left over from an earlier backward
    inputs, targets = dense_batch(0)
    cross_entropy(reference(inputs), targets).backward()
    expected = [p.data - 0.1 * p.grad for p in reference.parameters()]
    train_step(model, SGD(model.parameters(), lr=0.1), (inputs, targets))
    for p, e in zip(model.parameters(), expected):
        np.testing.assert_allclose(p.data, e, rtol=1e-6, atol=1e-7)


def test_evaluate_turns_dropout_off_and_records_no_graph():
    from tinytorch.core.autograd import is_grad_enabled
    from tinytorch.core.layers import Dropout, no_dropout
    model = Sequential(Linear(5, 32, seed=0), Dropout(0.5, seed=1), Linear(32, 3, seed=2))
    batches = [dense_batch(k) for k in range(3)]
    with no_dropout():
        expected = float(np.mean([cross_entropy(model(x), y).item() for x, y in batches]))
    grads = []
    watched = lambda m, b: (grads.append(is_grad_enabled()), cross_entropy(m(b[0]), b[1]))[1]
    loss = evaluate(model, batches, watched)
    np.testing.assert_allclose(loss, expected, rtol=1e-6)
    assert grads == [False, False, False]
    assert model.training


def test_fit_history_evaluation_callback_and_mode():
    model = model_for("Adam", 0)
    model.eval()
    optimizer = Adam(model.parameters(), lr=0.01)
    events = []
    evaluation = [dense_batch(1000 + k) for k in range(3)]
    history = fit(model, optimizer, dense_batch, 30, eval_batches=evaluation, eval_every=10, callback=events.append)
    assert isinstance(history, History) and history.stopped is None and history.seconds > 0
    assert history.iterations == list(range(30)) and len(history.losses) == len(history.grad_norms) == 30
    assert history.learning_rates == [0.01] * 30
    assert history.eval_iterations == [10, 20, 30]
    assert history.eval_losses[-1] == pytest.approx(evaluate(model, evaluation))
    assert [event["step"] for event in events] == list(range(1, 31))
    assert {key for event in events for key in event} == {"step", "steps", "loss", "lr", "grad_norm", "eval_loss",
                                                          "elapsed", "stopped"}
    assert [event["eval_loss"] for event in events if event["eval_loss"] is not None] == history.eval_losses
    assert [event["loss"] for event in events] == history.losses
    assert all(event["steps"] == 30 and event["stopped"] is None for event in events)
    elapsed = [event["elapsed"] for event in events]
    assert elapsed == sorted(elapsed) and elapsed[0] >= 0
    assert not model.training, "fit puts the model back in the mode it found it in"


def test_fit_prints_nothing(capsys):
    model = model_for("Adam", 0)
    nan_at_2 = lambda m, b: cross_entropy(m(b[0]), b[1]) * (float("nan") if b[2] == 2 else 1.0)
    fit(model, SGD(model.parameters(), lr=0.1), lambda it: (*dense_batch(it), it), 5, loss_fn=nan_at_2,
        eval_batches=[(*dense_batch(9), 9)])
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_fit_equals_the_steps_written_by_hand_with_a_schedule_and_clipping():
    """fit's loop against an independent reference: the same iterations written out, rate by rate."""
    def by_hand(model, optimizer, steps):
        rates = []
        for it in range(steps):
            optimizer.lr = 0.05 * (steps - it) / steps
            rates.append(optimizer.lr)
            inputs, targets = dense_batch(it)
            optimizer.zero_grad()
            cross_entropy(model(inputs), targets).backward()
            clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()
        return rates

    reference = model_for("Adam", 0)
    rates = by_hand(reference, Adam(reference.parameters(), lr=0.05), 8)
    model = model_for("Adam", 0)
    optimizer = Adam(model.parameters(), lr=0.05)
    scheduler = LinearSchedule(optimizer, warmup_iters=0, decay_iters=8)
    history = fit(model, optimizer, dense_batch, 8, scheduler=scheduler, max_grad_norm=0.5)
    assert history.learning_rates == pytest.approx(rates, abs=1e-15)
    for (name, expected), actual in zip(reference.state_dict().items(), model.state_dict().values()):
        assert np.array_equal(actual, expected), name


def test_fit_checkpoints_the_next_iteration_and_the_generator(tmp_path):
    model = model_for("Adam", 0)
    optimizer = Adam(model.parameters(), lr=0.01)
    rng = np.random.default_rng(5)
    draw = lambda it: dense_batch(int(rng.integers(0, 1000)))
    fit(model, optimizer, draw, 6, checkpoint=tmp_path / "c.npz", checkpoint_every=4, rng=rng)
    expected = rng.integers(0, 1000, 4)
    fresh = np.random.default_rng(0)
    other = model_for("Adam", 1)
    start = load_checkpoint(tmp_path / "c.npz", other, Adam(other.parameters()), rng=fresh)
    assert start == 6
    assert np.array_equal(fresh.integers(0, 1000, 4), expected)


def test_fit_stops_on_the_first_nan_with_a_clear_message():
    model = model_for("Adam", 0)
    optimizer = SGD(model.parameters(), lr=0.1)
    nan_at_4 = lambda m, b: cross_entropy(m(b[0]), b[1]) * (float("nan") if b[2] == 4 else 1.0)
    events = []
    history = fit(model, optimizer, lambda it: (*dense_batch(it), it), 10, loss_fn=nan_at_4, callback=events.append)
    assert history.iterations == [0, 1, 2, 3]
    assert history.stopped.startswith("stopped at iteration 4: the training loss is nan; the last finite loss was ")
    assert "at iteration 3" in history.stopped and "lower learning rate" in history.stopped
    assert events[-1]["stopped"] == history.stopped and events[-1]["step"] == 4
    assert all(np.isfinite(w).all() for w in model.state_dict().values())


def test_fit_stops_on_an_infinite_gradient_norm():
    model = model_for("Adam", 0)
    optimizer = SGD(model.parameters(), lr=0.1)

    def huge(m, b):
        return cross_entropy(m(b[0] * np.float32(1e30)), b[1]) * 1e30
    with np.errstate(over="ignore", invalid="ignore"):
        history = fit(model, optimizer, dense_batch, 3, loss_fn=huge)
    assert history.stopped is not None and "stopped at iteration 0" in history.stopped


FIT_BAD_ARGUMENTS = [
    ({"steps": 0}, ValueError, "steps must be a positive int"),
    ({"steps": 3, "start_iteration": 4}, ValueError, "start_iteration must be <= steps"),
    ({"steps": 3, "start_iteration": -1}, ValueError, "start_iteration must be a non-negative int"),
    ({"steps": 3, "train_batch": [1]}, TypeError, "train_batch must be a function"),
    ({"steps": 3, "loss_fn": "mse"}, TypeError, "loss_fn must be a function"),
    ({"steps": 3, "scheduler": 0.1}, TypeError, "scheduler must be an LRScheduler"),
    ({"steps": 3, "max_grad_norm": -1}, ValueError, "max_grad_norm must be >= 0"),
    ({"steps": 3, "eval_batches": []}, ValueError, "eval_batches must be a non-empty list"),
    ({"steps": 3, "eval_every": 0}, ValueError, "eval_every must be a positive int"),
    ({"steps": 3, "callback": "print"}, TypeError, "callback must be a function"),
    ({"steps": 3, "rng": 5}, TypeError, "rng must be a NumPy Generator"),
    ({"steps": 3, "checkpoint_every": 2}, ValueError, "checkpoint_every needs checkpoint="),
]


def test_fit_bad_arguments_are_named():
    """One test for all the cases: each is refused before the loop starts (so they do not count as runs of fit's
    loop when a failing check is traced to the exercise that caused it)."""
    model = model_for("Adam", 0)
    optimizer = SGD(model.parameters(), lr=0.1)
    for kwargs, error, words in FIT_BAD_ARGUMENTS:
        arguments = {"train_batch": dense_batch, **kwargs}
        with pytest.raises(error) as caught:
            fit(model, optimizer, **arguments)
        assert words in str(caught.value), kwargs


def test_the_default_loss_needs_input_target_pairs():
    model = model_for("Adam", 0)
    with pytest.raises(TypeError, match="needs a batch \\(inputs, targets\\)"):
        fit(model, SGD(model.parameters(), lr=0.1), lambda it: dense_batch(it)[0], 2)


# ---------------------------------------------------------------- issue 23, second part: finite hyper-parameters

def test_an_infinite_max_norm_measures_without_clipping_as_in_pytorch():
    p = Parameter(np.array([3.0, 4.0]))
    p.grad = np.array([3.0, 4.0])
    assert np.isclose(float(clip_grad_norm_([p], float("inf"))), 5.0)
    assert np.array_equal(p.grad, [3.0, 4.0])
    with pytest.raises(ValueError, match="max_norm"):
        clip_grad_norm_([p], float("nan"))
