"""Issue 15, reliability second pass: the engine under mutation, threads, processes and persistence.

Each section guards one defect the adversarial pass found; every test here failed before its fix.
"""
import multiprocessing
import os
import threading

import numpy as np
import pytest

from tinytorch.core import checkpoint
from tinytorch.core.autograd import RowSparseGrad, gradcheck
from tinytorch.core.layers import Dropout, Linear, Module, Parameter, Sequential
from tinytorch.core.optimizers import SGD, Adam, Adagrad, AdamW, SparseAdam
from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import Embedding
from tinytorch.text.quantization import QuantizedEmbedding


# ------------------------------------------------------------------------------------------------ buffers (defect 4)

class WithBuffers(Module):
    "A parameter, a persistent integer buffer, a non-persistent cache and a sub-module with its own buffer."

    def __init__(self):
        self.weight = Parameter(np.ones(3))
        self.register_buffer("counts", np.zeros(3, dtype=np.int64))
        self.register_buffer("cache", np.ones(2), persistent=False)
        self.inner = Linear(3, 2, seed=0)
        self.inner.register_buffer("mask", np.array([True, False]))


def test_buffers_are_listed_saved_and_loaded_but_are_not_parameters():
    model = WithBuffers()
    assert [name for name, _ in model.named_buffers()] == ["counts", "cache", "inner.mask"]
    assert [b.dtype for b in model.buffers()] == [np.int64, np.float64, np.bool_]
    assert [name for name, _ in model.named_parameters()] == ["weight", "inner.weight", "inner.bias"]
    assert list(model.state_dict()) == ["weight", "inner.weight", "inner.bias", "counts", "inner.mask"]
    model.counts[...] = [4, 5, 6]
    model.inner.mask[...] = [False, True]
    other = WithBuffers()
    counts_array = other.counts
    other.load_state_dict(model.state_dict())
    assert other.counts is counts_array and other.counts.tolist() == [4, 5, 6]
    assert other.inner.mask.tolist() == [False, True]
    SGD(model.parameters(), lr=1.0)                           # buffers never reach an optimiser
    assert all(not isinstance(b, Tensor) for b in model.buffers())


def test_a_bad_buffer_value_leaves_every_parameter_and_buffer_unchanged():
    model, state = WithBuffers(), WithBuffers().state_dict()
    state["weight"] = np.full(3, 9.0)
    state["counts"] = np.full(3, 1.5)                        # floats cannot be stored in int64 counts
    with pytest.raises(TypeError, match="'counts'.*int64"):
        model.load_state_dict(state)
    assert model.weight.data.tolist() == [1, 1, 1] and model.counts.tolist() == [0, 0, 0]
    del state["counts"]
    with pytest.raises(KeyError, match="missing key.*'counts'"):
        model.load_state_dict(state)
    assert model.load_state_dict(state, strict=False).missing_keys == ["counts"]


def test_register_buffer_refuses_clashes_tensors_and_non_numbers():
    model = WithBuffers()
    with pytest.raises(KeyError, match="'weight'.*already exists"):
        model.register_buffer("weight", np.zeros(3))
    with pytest.raises(TypeError, match="ndarray, not a Tensor"):
        model.register_buffer("table", Tensor([1.0]))
    with pytest.raises(TypeError, match="dtype object"):
        model.register_buffer("table", np.array([object()]))
    model.register_buffer("counts", np.ones(3, dtype=np.int64))     # re-registering one's own buffer is fine
    model.register_buffer("empty", None)                              # None: listed nowhere, like PyTorch
    assert "empty" not in dict(model.named_buffers()) and "empty" not in model.state_dict()


def test_checkpoints_carry_buffers(tmp_path):
    model = WithBuffers()
    model.counts[...] = [7, 8, 9]
    path = checkpoint.save(model, tmp_path / "model.npz")
    assert list(checkpoint.load(path)) == list(model.state_dict())
    other = WithBuffers()
    checkpoint.load_into(other, path)
    assert other.counts.tolist() == [7, 8, 9] and other.counts.dtype == np.int64


@pytest.mark.parametrize("bits", [8, 4])
def test_a_quantized_embedding_round_trips_through_a_checkpoint(tmp_path, bits):
    source = QuantizedEmbedding.from_float(Embedding(20, 6, init="normal", seed=1), bits=bits)
    assert list(source.state_dict()) == ["codes", "scales", "offsets"]
    path = checkpoint.save(Sequential(source), tmp_path / "quantized.npz")
    target = Sequential(QuantizedEmbedding.from_float(Embedding(20, 6, init="normal", seed=2), bits=bits))
    assert not np.array_equal(target(np.arange(20)).data, source(np.arange(20)).data)
    checkpoint.load_into(target, path)
    assert np.array_equal(target(np.arange(20)).data, source(np.arange(20)).data)
    wrong_size = Sequential(QuantizedEmbedding.from_float(Embedding(21, 6, seed=0), bits=bits))
    with pytest.raises(checkpoint.CheckpointError, match="0.codes"):
        checkpoint.load_into(wrong_size, path)


# ------------------------------------------------------------------------------------------------ fork (defect 1)

def _big_lookup(seed):
    "A lookup over the parallel threshold: 64 x 128 ids into a 50000 x 256 float32 table (8 MB of rows)."
    from tinytorch.fast import gather_rows
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((50_000, 256), dtype=np.float32)
    ids = rng.integers(0, 50_000, (64, 128))
    rows = gather_rows(table, ids)
    return bool(np.array_equal(rows, table[ids]))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() exists only on POSIX")
def test_a_forked_child_can_use_the_worker_pool_the_parent_started(monkeypatch):
    from tinytorch import fast
    monkeypatch.setattr(fast._Workers, "count", 2)           # two workers even on a one-core machine
    assert _big_lookup(0)                                     # the parent now holds a pool with live threads
    assert fast._Workers.pool is not None
    with multiprocessing.get_context("fork").Pool(1) as pool:
        result = pool.apply_async(_big_lookup, (1,))
        try:
            assert result.get(timeout=120), "the child's lookup was wrong"
        except multiprocessing.TimeoutError:
            pool.terminate()
            pytest.fail("the forked child hung: it waited on pool threads that exist only in the parent")


# ------------------------------------------------------------------------------------------------ threads (defect 3)

def test_no_grad_in_one_thread_does_not_stop_another_thread_recording():
    from tinytorch.core.autograd import is_grad_enabled, no_grad
    inside, done = threading.Event(), threading.Event()
    seen = {}

    def evaluate():
        with no_grad():
            inside.set()
            done.wait(timeout=60)
            seen["evaluator"] = is_grad_enabled()

    evaluator = threading.Thread(target=evaluate)
    evaluator.start()
    try:
        assert inside.wait(timeout=60)
        w = Tensor([1.0, 2.0], requires_grad=True)
        y = (w * w).sum()                                     # this thread is not inside no_grad()
        assert is_grad_enabled() and y.requires_grad
        y.backward()
        assert w.grad.tolist() == [2.0, 4.0]
    finally:
        done.set()
        evaluator.join(timeout=60)
    assert seen == {"evaluator": False}
    assert is_grad_enabled()


# ------------------------------------------------------------------------------------------------ versions (defect 2)


STALE = "modified by an inplace operation"


def test_version_counter_api():
    t = Tensor([1.0, 2.0])
    assert t._version == 0
    t.data[0] = 5.0                     # a raw write into the ndarray: NumPy cannot tell us
    assert t._version == 0
    t.mark_modified()
    assert t._version == 1
    t.data = np.zeros(2, np.float32)    # reassigning the array is a change too
    assert t._version == 2
    t.data += 1                         # augmented assignment to the attribute goes through the setter
    assert t._version == 3
    assert Parameter(np.ones(2))._version == 0 and (t * 2)._version == 0


def test_reassigning_data_between_forward_and_backward_raises_naming_the_op_and_tensor():
    w = Tensor(np.array([[1.0, 2.0]]), requires_grad=True)
    loss = (w * w).sum()
    w.data = w.data * 3
    with pytest.raises(RuntimeError, match=rf"{STALE}.*shape \(1, 2\) and dtype float32.*MulBackward.*version 1"):
        loss.backward()
    assert w.grad is None


def test_mark_modified_after_an_in_place_write_raises_and_no_grad_changes():
    w = Tensor([3.0, 4.0], requires_grad=True)
    v = Tensor([1.0, 1.0], requires_grad=True)
    loss = (v * 2).sum() + (w * w).sum()          # v's branch is fine; w's is stale
    w.data[...] = [0.6, 0.8]
    w.mark_modified()
    with pytest.raises(RuntimeError, match=STALE):
        loss.backward()
    assert v.grad is None and w.grad is None, "all or nothing: the check runs before any gradient moves"
    (w * w).sum().backward()                      # a fresh forward uses the new values
    np.testing.assert_allclose(w.grad, [1.2, 1.6], rtol=1e-6)


def test_an_op_that_saved_its_output_refuses_when_the_output_changes():
    "ExpBackward keeps exp(x) for its backward; writing into that output afterwards would change dL/dx."
    x = Tensor([0.0, 1.0], requires_grad=True)
    y = x.exp()
    loss = y.sum()                                # SumBackward saves no array: only ExpBackward can notice
    y.data[...] = 0.0
    y.mark_modified()
    with pytest.raises(RuntimeError, match=rf"{STALE}.*the output of ExpBackward"):
        loss.backward()


def test_unsaved_inputs_may_change_freely():
    "AddBackward saves nothing: changing its inputs cannot make its gradient wrong, so it must not raise."
    a, b = Tensor([1.0], requires_grad=True), Tensor([2.0], requires_grad=True)
    loss = (a + b).sum()
    a.data = np.array([7.0], np.float32)
    loss.backward()
    assert a.grad.tolist() == [1.0] and b.grad.tolist() == [1.0]


def _sparse_grad(p):
    return RowSparseGrad([1], np.ones((1, p.shape[1]), p.dtype), p.shape)


@pytest.mark.parametrize("make, sparse", [
    (lambda ps: SGD(ps, lr=0.1), False), (lambda ps: SGD(ps, lr=0.1, momentum=0.9), False),
    (lambda ps: SGD(ps, lr=0.1), True), (lambda ps: Adam(ps, lr=0.1), False), (lambda ps: AdamW(ps, lr=0.1), False),
    (lambda ps: Adagrad(ps, lr=0.1), False), (lambda ps: Adagrad(ps, lr=0.1), True),
    (lambda ps: SparseAdam(ps, lr=0.1), True)])
def test_an_optimiser_step_before_a_delayed_backward_raises(make, sparse):
    model = Linear(3, 2, seed=0)
    optimizer = make(model.parameters())
    x = Tensor(np.ones((4, 3)))
    first, delayed = (model(x) ** 2).sum(), (model(x) * 3).sum()
    if sparse:
        model.weight.grad, model.bias.grad = _sparse_grad(model.weight), None
    else:
        first.backward()
    before = model.weight._version
    optimizer.step()
    assert model.weight._version > before
    with pytest.raises(RuntimeError, match=rf"{STALE}: the parameter 'Linear.weight' of shape \(3, 2\).*MatMulBackward"):
        delayed.backward()


def test_load_state_dict_marks_the_parameters_it_overwrites():
    model = Linear(2, 2, seed=0)
    loss = (model(Tensor(np.ones((1, 2)))) ** 2).sum()
    model.load_state_dict(Linear(2, 2, seed=1).state_dict())
    with pytest.raises(RuntimeError, match=STALE):
        loss.backward()


def test_an_ordinary_training_loop_never_trips_the_check():
    model = Linear(3, 1, seed=0)
    optimizer = Adam(model.parameters(), lr=0.01)
    x = Tensor(np.random.default_rng(0).standard_normal((8, 3)))
    for _ in range(5):
        optimizer.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        optimizer.step()


def test_gradcheck_still_perturbs_data_in_place():
    w = Tensor(np.array([[0.5, -1.0], [2.0, 0.25]]), requires_grad=True, dtype=np.float64)
    assert gradcheck(lambda t: (t * t * t).sum(), [w])
    assert w._version == 0, "gradcheck restores every element it perturbs, so it leaves no mark"


# ------------------------------------------------------------------------------------------------ train/eval (defect 5)

class RefusesEval(Module):
    "A module that cannot leave training mode (the mirror image of QuantizedEmbedding)."

    def _check_mode(self, mode):
        if not mode:
            raise RuntimeError("RefusesEval stays in training mode")


def test_train_is_all_or_nothing_when_a_quantized_embedding_refuses():
    model = Sequential(Linear(4, 4, seed=0), Dropout(0.5), QuantizedEmbedding.from_float(Embedding(10, 4, seed=0)))
    model.eval()
    with pytest.raises(RuntimeError, match="inference-only"):
        model.train()
    assert [module.training for _, module in model.named_modules()] == [False, False, False, False]


def test_eval_is_all_or_nothing_for_any_module_that_refuses():
    model = Sequential(Dropout(0.5), RefusesEval(), Dropout(0.5))
    with pytest.raises(RuntimeError, match="stays in training"):
        model.eval()
    assert all(module.training for _, module in model.named_modules())


# ------------------------------------------------------------------------------------------------ pow (defect 6)

def _value_and_grads(fn, *values):
    "fn's values and the gradients of sum(fn) for float64 leaves holding `values`."
    leaves = [Tensor(np.asarray(v, dtype=np.float64), requires_grad=True, dtype=np.float64) for v in values]
    out = fn(*leaves)
    out.sum().backward()
    return out.data, [leaf.grad for leaf in leaves]


POW_CASES = {   # name -> (fn, inputs, value, gradients), derived by hand from d/dx x^y = y x^(y-1), d/dy = x^y ln x
    "x**0 at 0": (lambda x: x ** 0, ([0.0, 2.0],), [1.0, 1.0], [[0.0, 0.0]]),        # d/dx x^0 = 0 everywhere
    "x**Tensor(2.) at -2": (lambda x: x ** Tensor(2.0, dtype=np.float64), ([-2.0, 3.0],), [4.0, 9.0], [[-4.0, 6.0]]),
    "(-2.0)**x at 2 and 3": (lambda x: (-2.0) ** x, ([2.0, 3.0],), [4.0, -8.0], [[np.nan, np.nan]]),  # ln(-2): NaN
    "0.0**x at 0, 1, 2": (lambda x: 0.0 ** x, ([0.0, 1.0, 2.0],), [1.0, 0.0, 0.0], [[0.0, 0.0, 0.0]]),
    "x**y at x = 0": (lambda x, y: x ** y, ([0.0, 0.0, 0.0], [0.0, 1.0, 2.0]), [1.0, 0.0, 0.0],
                      [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]),
    "x**y at x = -2, y = 2": (lambda x, y: x ** y, ([-2.0], [2.0]), [4.0], [[-4.0], [np.nan]]),
}


@pytest.mark.parametrize("case", POW_CASES)
def test_pow_at_zero_and_negative_bases_matches_the_derivation(case):
    fn, inputs, value, grads = POW_CASES[case]
    out, got = _value_and_grads(fn, *inputs)
    np.testing.assert_array_equal(out, value)
    for g, expected in zip(got, grads):
        np.testing.assert_array_equal(g, expected)            # NaN == NaN here: torch gives NaN for ln(-2) too


@pytest.mark.torch
@pytest.mark.parametrize("case", POW_CASES)
def test_pow_at_zero_and_negative_bases_matches_torch(case, torch):
    fn, inputs, _, _ = POW_CASES[case]
    out, got = _value_and_grads(fn, *inputs)
    leaves = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in inputs]
    torch_fn = {"x**Tensor(2.) at -2": lambda x: x ** torch.tensor(2.0, dtype=torch.float64)}.get(case, fn)
    expected = torch_fn(*leaves)
    expected.sum().backward()
    np.testing.assert_array_equal(out, expected.detach().numpy())
    for g, leaf in zip(got, leaves):
        np.testing.assert_array_equal(g, leaf.grad.numpy())


# ------------------------------------------------------------------------------------------------ smaller ones (defect 10)

def test_save_into_a_missing_directory_names_the_path_asked_for(tmp_path):
    path = tmp_path / "no-such-directory" / "model.npz"
    with pytest.raises(FileNotFoundError) as caught:
        checkpoint.save(Linear(2, 2, seed=0), path)
    assert str(path) in str(caught.value) and ".tmp" not in str(caught.value)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_save_onto_a_symlink_writes_through_it(tmp_path):
    real, link = tmp_path / "checkpoints" / "real.npz", tmp_path / "latest.npz"
    real.parent.mkdir()
    checkpoint.save(Linear(2, 2, seed=0), real)
    link.symlink_to(real)
    newer = Linear(2, 2, seed=1)
    assert checkpoint.save(newer, link) == link
    assert link.is_symlink() and link.resolve() == real.resolve()
    np.testing.assert_array_equal(checkpoint.load(real)["weight"], newer.weight.data)
    assert sorted(p.name for p in real.parent.iterdir()) == ["real.npz"], "no temporary file left behind"


@pytest.mark.parametrize("data, truth", [([0.0], False), (0.0, False), ([2.5], True), (1.0, True), ([[0]], False)])
def test_the_truth_of_a_one_element_tensor_is_its_value(data, truth):
    assert bool(Tensor(data)) is truth
    assert bool(np.array(data)) is truth                      # NumPy's rule, which PyTorch follows too


@pytest.mark.parametrize("data", [[1.0, 2.0], [], [[1.0], [0.0]]])
def test_the_truth_of_other_sizes_is_ambiguous(data):
    with pytest.raises(ValueError, match=rf"{np.size(data)} elements.*ambiguous.*any\(\).*all\(\)"):
        bool(Tensor(data))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_reductions_take_a_list_of_axes(reduce):
    data = np.arange(24.0).reshape(2, 3, 4)
    x = Tensor(data, requires_grad=True, dtype=np.float64)
    out = getattr(x, reduce)(axis=[0, 1])
    np.testing.assert_array_equal(out.data, getattr(data, reduce)(axis=(0, 1)))
    assert gradcheck(lambda t: getattr(t, reduce)(axis=[0, -2], keepdims=True), [x])
