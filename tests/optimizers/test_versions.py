"""The version counter and the optimisers (issue 15, defect 2); the engine's own version tests are in
tests/autograd/test_versions.py, and these live here because an optimiser step is one of the writes.

Property test: random graphs, then random in-place writes through the tracked API (`t.data = ...`, a write into `.data` followed by `mark_modified()`, an SGD step)
between the forward and `backward()`. Either backward raises, changing no gradient, or every gradient is
exactly the one the recorded forward values give."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tinytorch.core.autograd import RowSparseGrad
from tinytorch.core.layers import Linear
from tinytorch.core.optimizers import SGD, Adagrad, Adam, AdamW, SparseAdam
from tinytorch.core.tensor import Tensor

OPS = {                                   # name -> (number of inputs, op); some save their inputs, some do not
    "add": (2, lambda a, b: a + b),
    "mul": (2, lambda a, b: a * b),
    "div": (2, lambda a, b: a / (b * b + 1.0)),
    "matmul": (2, lambda a, b: a @ b),
    "pow": (1, lambda a: a ** 2),
    "exp": (1, lambda a: a.exp()),
    "tanh": (1, lambda a: a.tanh()),
    "relu": (1, lambda a: a.relu()),
    "max": (1, lambda a: a.max(axis=0)),
    "gather": (1, lambda a: a[np.array([0, 2, 2])]),
    "mean": (1, lambda a: a.mean(axis=1)),
}
LEAVES = 3
terms = st.lists(st.tuples(st.sampled_from(sorted(OPS)), st.integers(0, LEAVES - 1), st.integers(0, LEAVES - 1)),
                 min_size=1, max_size=5)
writes = st.lists(st.tuples(st.integers(0, LEAVES - 1), st.sampled_from(["assign", "write+mark", "sgd"])),
                  max_size=3)


def loss_of(leaves, chosen_terms):
    "Sum of the chosen terms, each an op applied to one or two of the leaves."
    total = None
    for name, i, j in chosen_terms:
        arity, op = OPS[name]
        term = (op(leaves[i], leaves[j]) if arity == 2 else op(leaves[i])).sum()
        total = term if total is None else total + term
    return total


def fresh_leaves(arrays):
    return [Tensor(array.copy(), requires_grad=True, dtype=np.float64) for array in arrays]


@settings(max_examples=150, deadline=None)
@given(chosen_terms=terms, chosen_writes=writes, seed=st.integers(0, 2**32 - 1))
def test_in_place_writes_between_forward_and_backward_raise_or_leave_gradients_exact(chosen_terms, chosen_writes, seed):
    rng = np.random.default_rng(seed)
    recorded = [rng.standard_normal((3, 3)) for _ in range(LEAVES)]
    leaves = fresh_leaves(recorded)
    loss = loss_of(leaves, chosen_terms)
    for i, kind in chosen_writes:
        leaf = leaves[i]
        if kind == "assign":
            leaf.data = leaf.data + 1.0
        elif kind == "write+mark":
            leaf.data[0] = 5.0
            leaf.mark_modified()
        else:
            leaf.grad = np.ones((3, 3))
            SGD([leaf], lr=0.5).step()
            leaf.grad = None
    try:
        loss.backward()
    except RuntimeError as error:
        assert chosen_writes, "nothing changed, so nothing may raise"
        assert "modified by an inplace operation" in str(error)
        assert all(leaf.grad is None for leaf in leaves), "a refused backward changes no gradient"
        return
    reference = fresh_leaves(recorded)                # the same graph on the values the forward really used
    loss_of(reference, chosen_terms).backward()
    for leaf, expected in zip(leaves, reference):
        if expected.grad is None:
            assert leaf.grad is None
        else:
            np.testing.assert_array_equal(leaf.grad, expected.grad)


@pytest.mark.parametrize("name", sorted(OPS))
def test_each_op_either_saves_nothing_of_its_input_or_refuses_after_a_write(name):
    "Writing into an input after the forward: ops that read the input in backward raise; the rest stay exact."
    arity, op = OPS[name]
    recorded = np.arange(1.0, 10.0).reshape(3, 3) / 10
    leaf = fresh_leaves([recorded])[0]
    loss = (op(leaf, leaf) if arity == 2 else op(leaf)).sum()
    leaf.data[...] = -leaf.data
    leaf.mark_modified()
    saves_input = name in {"mul", "div", "matmul", "pow", "max"}
    if saves_input:
        with pytest.raises(RuntimeError, match=r"modified by an inplace operation: a Tensor of shape \(3, 3\)"):
            loss.backward()
    else:
        loss.backward()
        reference = fresh_leaves([recorded])[0]
        (op(reference, reference) if arity == 2 else op(reference)).sum().backward()
        np.testing.assert_array_equal(leaf.grad, reference.grad)


# ------------------------------------------------------------------------------------------------ an optimiser step between forward and backward

STALE = "modified by an inplace operation"

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


def test_an_ordinary_training_loop_never_trips_the_check():
    model = Linear(3, 1, seed=0)
    optimizer = Adam(model.parameters(), lr=0.01)
    x = Tensor(np.random.default_rng(0).standard_normal((8, 3)))
    for _ in range(5):
        optimizer.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        optimizer.step()
