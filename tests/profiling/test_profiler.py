"""Module 14's profiler (tinytorch.profiler): its accounting, its hooks, and that profiling changes no result.

* a known sleep inside a custom Function shows up under that Function, forward and backward apart;
* backward time is attributed to the op that made the node, and to the modules it ran inside;
* nested modules add up: a module's total = its self time + its child modules' totals;
* a profiled training step gives bit-identical losses and parameters, and nothing records afterwards;
* bad arguments are refused by name.
"""
import time

import numpy as np
import pytest

from tinytorch.core.autograd import PROFILERS, Function, RowSparseGrad
from tinytorch.core.layers import Module
from tinytorch.core.tensor import Tensor
from tinytorch.profiler import measure_bandwidth, nbytes, profile, roofline, timed

pytestmark = pytest.mark.usefixtures("both_kernels")


class Nap(Function):
    "Sleeps `forward_s` forward and `backward_s` backward."
    forward_s, backward_s = 0.01, 0.03

    @staticmethod
    def forward(ctx, x):
        time.sleep(Nap.forward_s)
        return x + 1

    @staticmethod
    def backward(ctx, grad):
        time.sleep(Nap.backward_s)
        return (grad,)


class Leaf(Module):
    def forward(self, x):
        return Nap.apply(x)


class Branch(Module):
    def __init__(self):
        self.left, self.right = Leaf(), Leaf()

    def forward(self, x):
        return self.right(self.left(x))


class Root(Module):
    def __init__(self):
        self.branch = Branch()

    def forward(self, x):
        return self.branch(x) * Nap.apply(x)


@pytest.fixture
def fake_clock(monkeypatch):
    """time.perf_counter that moves only when something sleeps (and time.sleep that moves it instead of
    sleeping): the accounting is then exact, whatever else the machine is doing."""
    now = [1000.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(time, "sleep", lambda seconds: now.__setitem__(0, now[0] + seconds))
    return now


def test_a_sleep_inside_a_function_is_counted_under_that_function_forward_and_backward_apart():
    x = Tensor(np.ones(4), requires_grad=True)
    with profile() as prof:
        y = Nap.apply(x)
        y.sum().backward()
    nap = prof.stat("op", "Nap")
    assert nap.calls == 1
    assert nap.forward >= 0.01 and nap.backward >= 0.03, nap     # real sleeps: lower bounds only (they overrun)
    assert prof.wall >= 0.04


def test_with_a_clock_that_moves_only_in_sleeps_the_sleeps_are_counted_exactly_where_they_happen(fake_clock):
    x = Tensor(np.ones(4), requires_grad=True)
    with profile() as prof:
        y = Nap.apply(x)
        y.sum().backward()
    nap = prof.stat("op", "Nap")
    assert nap.forward == pytest.approx(0.01) and nap.backward == pytest.approx(0.03), nap
    assert prof.wall == pytest.approx(0.04)
    assert [s.name for s in prof.key_averages()][0] == "Nap"
    sum_stat = prof.stat("op", "SumBackward") if ("op", "SumBackward") in prof.stats else None
    assert sum_stat is None or sum_stat.total < nap.total


def test_backward_time_goes_to_the_op_that_made_the_node_and_to_the_modules_it_ran_in():
    x = Tensor(np.ones(3), requires_grad=True)
    with profile() as prof:
        out = Root()(x)
    out.sum().backward()                                  # outside the block: the graph was built inside it
    leaf, branch, root = (prof.stat("module", name) for name in ("Leaf", "Branch", "Root"))
    assert (leaf.calls, branch.calls, root.calls, prof.stat("op", "Nap").calls) == (2, 1, 1, 3)
    nap = prof.stat("op", "Nap")
    assert leaf.backward >= 0.06 and nap.backward >= 0.09, (leaf, nap)         # two Naps' backward, and three
    assert branch.backward == pytest.approx(leaf.backward, abs=1e-9)          # Branch's backward is its Leafs'
    mul = prof.stat("op", "MulBackward")                                      # Root's own product
    assert root.backward == pytest.approx(nap.backward + mul.backward, abs=1e-9)  # every op ran inside Root


def test_nested_modules_add_up():
    with profile() as prof:
        Root()(Tensor(np.ones(3)))
    leaf, branch, root = (prof.stat("module", name) for name in ("Leaf", "Branch", "Root"))
    assert root.total == pytest.approx(root.self_time + branch.total, abs=1e-9)
    assert branch.total == pytest.approx(branch.self_time + leaf.total, abs=1e-9)
    assert root.self_time >= 0.01 and branch.self_time < root.self_time  # Root's own Nap; Branch only calls
    assert root.forward >= branch.forward + 0.01


def test_a_profiled_training_step_is_bit_identical_and_the_graph_keeps_its_node_classes():
    from tinytorch.core.optimizers import AdamW
    from tinytorch.models import TransformerConfig, TransformerLM
    from tinytorch.text.embeddings import EmbeddingBackward

    config = TransformerConfig(arch="gpt2", vocab_size=64, max_seq_len=16, d_model=32, num_layers=2, num_heads=2)
    ids = np.random.default_rng(0).integers(0, 64, (2, 17))
    results = []
    for profiled in (False, True):
        model = TransformerLM(config, seed=0)
        optimizer = AdamW(model.parameters(), lr=1e-2)
        losses = []
        for _ in range(2):
            optimizer.zero_grad()
            if profiled:
                with profile() as prof:
                    loss = model.loss(ids[:, :-1], ids[:, 1:])
                    loss.backward()
                    optimizer.step()
            else:
                loss = model.loss(ids[:, :-1], ids[:, 1:])
                loss.backward()
                optimizer.step()
            losses.append(loss.item())
        results.append((losses, [p.data.copy() for p in model.parameters()]))
    (plain_losses, plain_params), (prof_losses, prof_params) = results
    assert plain_losses == prof_losses
    assert all(np.array_equal(a, b) for a, b in zip(plain_params, prof_params))
    assert prof.stat("op", "EmbeddingBackward").calls == 1 and prof.stat("module", "TransformerLM").calls == 1
    with profile():
        node = TransformerLM(config, seed=0).token_embedding(np.array([[1, 2]]))._grad_fn
    assert isinstance(node, EmbeddingBackward) and type(node).__name__ == "EmbeddingBackward"
    assert PROFILERS == []


def test_the_innermost_profiler_records_and_an_exception_leaves_no_profiler_behind():
    x = Tensor(np.ones(2), requires_grad=True)
    with profile() as outer:
        with profile() as inner:
            Nap.apply(x)
    assert ("op", "Nap") in inner.stats and ("op", "Nap") not in outer.stats
    with pytest.raises(ZeroDivisionError):
        with profile():
            1 / 0
    assert PROFILERS == []


def test_nbytes_counts_a_row_sparse_gradient_as_its_indices_and_rows():
    assert nbytes(RowSparseGrad(np.array([0]), np.zeros((1, 3), np.float64), (4, 3))) == 8 + 24


def test_timed_roofline_and_bandwidth():
    result, seconds, size = timed(np.zeros, (10, 10))
    assert result.shape == (10, 10) and size == 800 and seconds >= 0
    assert roofline(2e9, 1.0, 1e10) == pytest.approx(5.0)
    assert 1e8 < measure_bandwidth(4 * 2**20, repeats=2) < 1e13


@pytest.mark.parametrize("call, error, words", [
    (lambda p: p.table(sort_by="time"), ValueError, "unknown sort_by 'time'; choose one of 'total'"),
    (lambda p: p.table(row_limit=0), ValueError, "row_limit must be a positive int; got 0"),
    (lambda p: measure_bandwidth(repeats=0), ValueError, "repeats must be a positive int; got 0"),
])
def test_bad_arguments_are_refused_by_name(call, error, words):
    with profile() as prof:
        Nap.apply(Tensor(np.ones(1)))
    with pytest.raises(error, match=words.replace("(", r"\(")):
        call(prof)


def test_the_table_lists_the_rows_sorted_and_limited():
    with profile() as prof:
        Root()(Tensor(np.ones(3)))
    lines = prof.table(row_limit=2).splitlines()
    assert lines[0].split()[:3] == ["name", "kind", "calls"] and len(lines) == 4
    assert lines[1].split()[0] == "Root" and lines[-1].startswith("wall time inside the profile")
    by_calls = [s.calls for s in prof.key_averages("calls")]
    assert by_calls == sorted(by_calls, reverse=True)


def test_tito_demo_profile_prints_one_table_per_step_and_refuses_bad_flags(capsys):
    from tito.demos.profile import main

    assert main(["--repeat", "1", "--rows", "3", "--sort", "self"]) == 0
    out = capsys.readouterr().out
    assert "GPT-2 architecture" in out and "sparse embedding, 50257 x 768" in out
    assert out.count("wall time inside the profile") == 2 and "EmbeddingBackward" in out
    for bad, words in ((["--rows", "0"], "--rows: must be in [1, 1000], got 0"), (["--step", "bert"], "invalid choice")):
        assert main(bad) == 2
        assert words in capsys.readouterr().err
