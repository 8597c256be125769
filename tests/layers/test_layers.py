"""Module 03, layers: Parameter, Module's parameter discovery (order, names, tied weights),
train/eval, state_dict round trips and refusals, Linear, Dropout and Sequential."""
from collections import OrderedDict

import numpy as np
import pytest

from tinytorch.core.activations import ReLU, Tanh
from tinytorch.core.autograd import gradcheck
from tinytorch.core.layers import Dropout, Linear, Module, Parameter, Sequential, count_parameters
from tinytorch.core.tensor import Tensor


def to_float64(module):
    for p in module.parameters():
        p.data = p.data.astype(np.float64)
    return module


class Embedding(Module):
    "A minimal table, enough to build a tied language-model head."
    def __init__(self, rows, dim, seed=0):
        self.weight = Parameter(np.random.default_rng(seed).normal(size=(rows, dim)))


class TinyLM(Module):
    def __init__(self, vocab=5, dim=3):
        super().__init__()
        self.token_embedding = Embedding(vocab, dim)
        self.blocks = [Linear(dim, dim, seed=1), Linear(dim, dim, seed=2)]
        self.norms = {"final": Linear(dim, dim, bias=False, seed=3)}
        self.dropout = Dropout(0.5, seed=0)
        self.head = Linear(dim, vocab, bias=False, seed=4)
        self.head.weight = self.token_embedding.weight     # tied (vocab, dim), used as x @ W.T below
        self.steps = 0
        self.buffer = Tensor(np.zeros(3))                   # plain tensors are not parameters

    def forward(self, ids):
        x = self.token_embedding.weight[ids]
        for block in self.blocks:
            x = block(x).relu()
        x = self.dropout(self.norms["final"](x))
        return x @ self.head.weight.T


# --- Parameter ---------------------------------------------------------------------------------

def test_parameter_is_a_float_tensor_that_requires_grad():
    p = Parameter(np.arange(6).reshape(2, 3))
    assert isinstance(p, Tensor) and p.requires_grad and p.dtype == np.float32
    assert p.data.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert not Parameter([1.0, 2.0], requires_grad=False).requires_grad
    assert Parameter(Tensor([1.0, 2.0])).data.tolist() == [1.0, 2.0]


def test_parameter_owns_a_copy_of_its_data():
    source = np.zeros((2, 2), dtype=np.float32)
    p = Parameter(source)
    p.data += 1
    assert np.all(source == 0) and p.data is not source
    t = Tensor(np.ones(2))
    assert Parameter(t).data is not t.data


def test_results_of_operations_on_parameters_are_plain_tensors():
    p = Parameter([1.0, 2.0])
    y = p * p
    assert type(y) is Tensor and y.requires_grad
    y.sum().backward()
    assert p.grad.tolist() == [2.0, 4.0]


def test_parameter_repr_names_the_class():
    assert repr(Parameter([1.0])).startswith("Parameter([1.]") and "requires_grad=True" in repr(Parameter([1.0]))


# --- Module: discovery, names, sharing ---------------------------------------------------------

def test_named_parameters_follow_attribute_order_with_dotted_names():
    model = TinyLM()
    assert [name for name, _ in model.named_parameters()] == [
        "token_embedding.weight", "blocks.0.weight", "blocks.0.bias", "blocks.1.weight", "blocks.1.bias",
        "norms.final.weight"]


def test_a_tied_parameter_is_listed_once_under_its_first_name():
    model = TinyLM()
    params = model.parameters()
    assert model.head.weight is model.token_embedding.weight
    assert sum(p is model.token_embedding.weight for p in params) == 1
    assert len({id(p) for p in params}) == len(params) == 6
    assert count_parameters(model) == 5 * 3 + 2 * (9 + 3) + 9


def test_count_parameters_counts_a_shared_tensor_once_even_in_a_list():
    shared = Linear(4, 4, seed=0)
    model = Sequential(shared, ReLU(), shared)
    assert count_parameters(model) == 16 + 4
    assert [name for name, _ in model.named_parameters()] == ["0.weight", "0.bias"]


def test_named_modules_and_children_visit_each_module_once():
    model = TinyLM()
    names = [name for name, _ in model.named_modules()]
    assert names == ["", "token_embedding", "blocks.0", "blocks.1", "norms.final", "dropout", "head"]
    assert model.children() == [model.token_embedding, model.blocks[0], model.blocks[1], model.norms["final"],
                                 model.dropout, model.head]
    assert [name for name, _ in model.named_modules(prefix="lm")][:2] == ["lm", "lm.token_embedding"]


def test_named_parameters_prefix():
    assert [n for n, _ in Linear(2, 2).named_parameters(prefix="encoder")] == ["encoder.weight", "encoder.bias"]


def test_module_without_super_init_works_and_is_in_training_mode():
    class Bare(Module):
        def __init__(self):
            self.w = Parameter(np.ones(2))

    bare = Bare()
    assert bare.training and bare.parameters() == [bare.w]
    with pytest.raises(NotImplementedError, match="Bare"):
        bare(Tensor([1.0]))


def test_a_module_cycle_does_not_loop_forever():
    a, b = Linear(2, 2), Linear(2, 2)
    a.partner, b.partner = b, a
    assert len(a.parameters()) == 4 and [n for n, _ in a.named_modules()] == ["", "partner"]


def test_train_and_eval_reach_every_module_and_return_self():
    model = TinyLM()
    assert model.eval() is model
    assert all(not m.training for _, m in model.named_modules())
    assert model.train() is model
    assert all(m.training for _, m in model.named_modules())
    model.train(False)
    assert not model.dropout.training and not model.blocks[1].training


def test_zero_grad_clears_every_gradient():
    model = TinyLM()
    model(np.array([[0, 1, 4]])).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_tied_weight_gets_the_gradient_of_both_uses():
    model = TinyLM().eval()
    to_float64(model)
    ids = np.array([0, 2, 2])
    assert gradcheck(lambda w: model(ids), [model.token_embedding.weight])


# --- state_dict / load_state_dict ----------------------------------------------------------------

def test_state_dict_is_an_ordered_dict_of_copies():
    model = TinyLM()
    state = model.state_dict()
    assert isinstance(state, OrderedDict)
    assert list(state) == [name for name, _ in model.named_parameters()]
    for (name, p), array in zip(model.named_parameters(), state.values()):
        assert isinstance(array, np.ndarray) and array is not p.data and np.array_equal(array, p.data)
    state["blocks.0.bias"][...] = 99
    assert not np.any(model.blocks[0].bias.data == 99)


def test_load_state_dict_round_trip_copies_in_place_and_casts():
    source, target = TinyLM(), TinyLM()
    for p in source.parameters():
        p.data[...] = np.random.default_rng(p.size).normal(size=p.shape)
    arrays = [p.data for p in target.parameters()]
    state = {name: array.astype(np.float64) for name, array in source.state_dict().items()}
    result = target.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []
    for array, p, q in zip(arrays, target.parameters(), source.parameters()):
        assert p.data is array and p.dtype == np.float32 and np.array_equal(p.data, q.data)
    assert np.array_equal(target.head.weight.data, source.token_embedding.weight.data), "tied weight follows"
    ids = np.array([[1, 3]])
    np.testing.assert_array_equal(target.eval()(ids).data, source.eval()(ids).data)


def test_load_state_dict_accepts_tensors():
    model, other = Linear(2, 3, seed=0), Linear(2, 3, seed=1)
    model.load_state_dict({name: Tensor(p.data) for name, p in other.named_parameters()})
    assert np.array_equal(model.weight.data, other.weight.data)


def snapshot(model):
    return [p.data.copy() for p in model.parameters()]


@pytest.mark.parametrize("case", ["missing", "unexpected", "shape", "dtype"])
def test_load_state_dict_errors_name_the_key_and_change_nothing(case):
    model = TinyLM()
    state = {name: np.full(array.shape, 7.0) for name, array in model.state_dict().items()}
    before = snapshot(model)
    if case == "missing":
        del state["blocks.1.bias"]
        error, fragments = KeyError, ["blocks.1.bias"]
    elif case == "unexpected":
        state["head.weight"] = np.zeros((5, 3))
        error, fragments = KeyError, ["head.weight"]
    elif case == "shape":
        state["norms.final.weight"] = np.zeros((3, 4))
        error, fragments = ValueError, ["norms.final.weight", "(3, 4)", "(3, 3)"]
    else:
        state["blocks.1.weight"] = np.full((3, 3), "x")
        error, fragments = TypeError, ["blocks.1.weight"]
    with pytest.raises(error) as caught:
        model.load_state_dict(state)
    assert all(f in str(caught.value) for f in fragments), str(caught.value)
    assert all(np.array_equal(a, p.data) for a, p in zip(before, model.parameters())), "nothing was written"


def test_load_state_dict_non_strict_reports_missing_and_unexpected_but_checks_shapes():
    model = Linear(2, 3, seed=0)
    result = model.load_state_dict({"weight": np.ones((2, 3)), "extra": np.zeros(1)}, strict=False)
    assert result.missing_keys == ["bias"] and result.unexpected_keys == ["extra"]
    assert np.all(model.weight.data == 1)
    with pytest.raises(ValueError, match="weight"):
        model.load_state_dict({"weight": np.ones((3, 2))}, strict=False)


# --- repr ----------------------------------------------------------------------------------------

def test_repr_is_pytorch_style_with_extra_repr():
    model = Sequential(Linear(4, 8), ReLU(), Dropout(0.1), Linear(8, 2, bias=False), Tanh())
    assert repr(model) == (
        "Sequential(\n"
        "  (0): Linear(in_features=4, out_features=8, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Dropout(p=0.1)\n"
        "  (3): Linear(in_features=8, out_features=2, bias=False)\n"
        "  (4): Tanh()\n"
        ")")


def test_nested_repr_indents_children():
    class Net(Module):
        def __init__(self):
            self.encoder = Sequential(Linear(2, 2), ReLU())
            self.act = Tanh()

    assert repr(Net()) == ("Net(\n"
                           "  (encoder): Sequential(\n"
                           "    (0): Linear(in_features=2, out_features=2, bias=True)\n"
                           "    (1): ReLU()\n"
                           "  )\n"
                           "  (act): Tanh()\n"
                           ")")


# --- Linear --------------------------------------------------------------------------------------

def test_linear_forward_is_x_at_w_plus_b_with_in_out_layout(rng):
    layer = Linear(4, 3, seed=0)
    assert layer.weight.shape == (4, 3) and layer.bias.shape == (3,)
    x = rng.normal(size=(2, 5, 4))
    y = layer(Tensor(x))
    assert y.shape == (2, 5, 3)
    np.testing.assert_allclose(y.data, x @ layer.weight.data + layer.bias.data, rtol=1e-5, atol=1e-6)
    assert layer(np.ones(4)).shape == (3,), "a single 1-D input works"


def test_linear_init_is_uniform_within_one_over_sqrt_fan_in_and_seeded():
    layer = Linear(100, 50, seed=3)
    bound = 1 / np.sqrt(100)
    for p in (layer.weight, layer.bias):
        assert np.all(np.abs(p.data) <= bound)
    assert np.abs(layer.weight.data).max() > 0.9 * bound, "spans the interval"
    assert abs(layer.weight.data.std() - bound / np.sqrt(3)) < 0.005, "std of U(-k, k) is k/sqrt(3)"
    assert np.array_equal(Linear(100, 50, seed=3).weight.data, layer.weight.data)
    assert not np.array_equal(Linear(100, 50, seed=4).weight.data, layer.weight.data)


def test_linear_gradcheck_on_input_weight_and_bias(rng):
    layer = to_float64(Linear(3, 2, seed=0))
    x = Tensor(rng.normal(size=(4, 3)), requires_grad=True, dtype=np.float64)
    assert gradcheck(lambda x, w, b: layer(x), [x, layer.weight, layer.bias])


def test_linear_without_bias():
    layer = Linear(3, 2, bias=False, seed=0)
    assert layer.bias is None and layer.parameters() == [layer.weight]
    np.testing.assert_allclose(layer(np.ones((1, 3))).data, np.ones((1, 3)) @ layer.weight.data, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("args,error,fragment", [((0, 3), ValueError, "in_features"),
                                                  ((3, -1), ValueError, "-1"),
                                                  ((2.0, 3), TypeError, "2.0"),
                                                  ((True, 3), TypeError, "True")])
def test_linear_refuses_bad_sizes(args, error, fragment):
    with pytest.raises(error, match=fragment):
        Linear(*args)


@pytest.mark.parametrize("layer", [Linear(3, 2), Dropout(0.5)], ids=["Linear", "Dropout"])
def test_layers_refuse_integer_input(layer):
    with pytest.raises(TypeError, match="int64"):
        layer(np.array([[1, 2, 3]]))


def test_load_state_dict_strict_error_lists_missing_and_unexpected_together():
    state = {"weight": np.zeros((2, 3)), "bias_typo": np.zeros(3)}
    with pytest.raises(KeyError) as caught:
        Linear(2, 3).load_state_dict(state)
    assert "missing key(s) ['bias']" in str(caught.value) and "unexpected key(s) ['bias_typo']" in str(caught.value)


def test_linear_shape_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"\(2, 5\).*\(4, 3\)"):
        Linear(4, 3)(np.ones((2, 5)))


# --- Dropout -------------------------------------------------------------------------------------

@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_zeroes_about_p_and_preserves_the_mean(p):
    drop = Dropout(p, seed=42)
    y = drop(Tensor(np.ones((400, 500)))).data
    assert abs(np.mean(y == 0) - p) < 0.005, "200,000 draws: the zero fraction is within 0.005 of p"
    np.testing.assert_allclose(y[y != 0], 1 / (1 - p), rtol=1e-6)
    assert abs(y.mean() - 1.0) < 0.03


def test_dropout_gradient_is_the_mask():
    drop = Dropout(0.3, seed=0)
    x = Tensor(np.random.default_rng(0).normal(size=(50, 40)), requires_grad=True)
    y = drop(x)
    y.backward(np.ones(y.shape))
    mask = x.grad
    values = np.unique(mask)
    assert len(values) == 2 and values[0] == 0.0 and values[1] == pytest.approx(1 / 0.7, rel=1e-6)
    np.testing.assert_allclose(y.data, x.data * mask, rtol=1e-6)


def test_dropout_is_seeded_per_instance_and_advances():
    a, b = Dropout(0.5, seed=7), Dropout(0.5, seed=7)
    x = Tensor(np.ones((10, 10)))
    first_a, first_b = a(x).data, b(x).data
    assert np.array_equal(first_a, first_b)
    assert not np.array_equal(a(x).data, first_a), "the next call draws a new mask"


def test_dropout_is_identity_in_eval_and_for_p_zero():
    x = Tensor(np.ones((3, 3)), requires_grad=True)
    drop = Dropout(0.5).eval()
    assert drop(x) is x
    assert Dropout(0.0)(x) is x


def test_dropout_keeps_float64():
    assert Dropout(0.5, seed=0)(Tensor(np.ones(4), dtype=np.float64)).dtype == np.float64


@pytest.mark.parametrize("p", [1.0, 1, -0.01, 1.5, float("nan")])
def test_dropout_refuses_p_outside_zero_to_one(p):
    with pytest.raises(ValueError, match=r"\[0, 1\)") as caught:
        Dropout(p)
    assert f"p={p!r}" in str(caught.value)


# --- Sequential ----------------------------------------------------------------------------------

def test_sequential_chains_layers_and_names_parameters_by_position(rng):
    model = Sequential(Linear(4, 6, seed=0), ReLU(), Linear(6, 2, seed=1))
    x = rng.normal(size=(5, 4))
    expected = np.maximum(x @ model[0].weight.data + model[0].bias.data, 0) @ model[2].weight.data + model[2].bias.data
    np.testing.assert_allclose(model(Tensor(x)).data, expected, rtol=1e-5, atol=1e-6)
    assert [n for n, _ in model.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert list(model.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_sequential_indexing_len_iteration_and_slicing():
    layers = [Linear(2, 3), ReLU(), Linear(3, 1)]
    model = Sequential(*layers)
    assert len(model) == 3 and list(model) == layers
    assert model[0] is layers[0] and model[-1] is layers[2]
    head = model[1:]
    assert isinstance(head, Sequential) and list(head) == layers[1:]
    with pytest.raises(IndexError, match="3"):
        model[3]


def test_sequential_gradcheck(rng):
    model = to_float64(Sequential(Linear(3, 4, seed=0), Tanh(), Linear(4, 2, seed=1)))
    x = Tensor(rng.normal(size=(2, 3)), dtype=np.float64)
    assert gradcheck(lambda *params: model(x), model.parameters())


def test_sequential_refuses_a_non_callable():
    with pytest.raises(TypeError, match="layer 1.*str"):
        Sequential(Linear(2, 2), "relu")


# ================================================================ issue 23: reliability, third pass
# ---------------------------------------------------------------- defect 2: a local, per-thread "no dropout"

def test_no_dropout_turns_dropout_off_for_the_block_without_touching_training():
    from tinytorch.core.layers import is_dropout_enabled, no_dropout
    drop = Dropout(0.5, seed=0)
    x = Tensor(np.ones((20, 30)))
    with no_dropout():
        assert drop(x) is x and drop.training and not is_dropout_enabled()
        with no_dropout():
            pass
        assert not is_dropout_enabled(), "nested blocks restore the previous state, not 'on'"
    assert is_dropout_enabled() and (drop(x).data == 0).any()
    with pytest.raises(KeyError):
        with no_dropout():
            raise KeyError("boom")
    assert is_dropout_enabled()


def test_no_dropout_in_one_thread_leaves_dropout_on_in_another():
    import threading
    from tinytorch.core.layers import no_dropout
    inside, done, seen = threading.Event(), threading.Event(), {}

    def evaluate():
        with no_dropout():
            inside.set()
            done.wait(timeout=60)
            seen["evaluator"] = Dropout(0.5, seed=0)(Tensor(np.ones(100))).data.min()

    evaluator = threading.Thread(target=evaluate)
    evaluator.start()
    try:
        assert inside.wait(timeout=60)
        assert (Dropout(0.5, seed=0)(Tensor(np.ones(100))).data == 0).any(), "this thread is not inside no_dropout()"
    finally:
        done.set()
        evaluator.join(timeout=60)
    assert seen == {"evaluator": 1.0}


# ------------------------------------------------------------------------------------------------ train/eval and load_state_dict (issue 15, defects 5 and 2)

class RefusesEval(Module):
    "A module that cannot leave training mode (the mirror image of QuantizedEmbedding)."

    def _check_mode(self, mode):
        if not mode:
            raise RuntimeError("RefusesEval stays in training mode")


def test_eval_is_all_or_nothing_for_any_module_that_refuses():
    model = Sequential(Dropout(0.5), RefusesEval(), Dropout(0.5))
    with pytest.raises(RuntimeError, match="stays in training"):
        model.eval()
    assert all(module.training for _, module in model.named_modules())


STALE = "modified by an inplace operation"


def test_load_state_dict_marks_the_parameters_it_overwrites():
    model = Linear(2, 2, seed=0)
    loss = (model(Tensor(np.ones((1, 2)))) ** 2).sum()
    model.load_state_dict(Linear(2, 2, seed=1).state_dict())
    with pytest.raises(RuntimeError, match=STALE):
        loss.backward()


# ---------------------------------------------------------------- issue 23, second part: flags are True or False

FLAG_CALLS = {
    "Linear(bias='no')": (lambda: Linear(2, 3, bias="no"), "bias"),
    "Linear(bias=1)": (lambda: Linear(2, 3, bias=1), "bias"),
    "Module.train('no')": (lambda: Linear(2, 3).train("no"), "mode"),
    "register_buffer(persistent='no')": (lambda: Module().register_buffer("b", np.zeros(2), persistent="no"),
                                         "persistent"),
    "load_state_dict(strict='no')": (lambda: Linear(2, 3).load_state_dict({}, strict="no"), "strict"),
}


@pytest.mark.parametrize("case", FLAG_CALLS)
def test_a_flag_that_is_not_a_bool_is_refused_naming_it(case):
    call, name = FLAG_CALLS[case]
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        call()


def test_a_refused_train_mode_leaves_the_mode_alone():
    model = Sequential(Linear(2, 2), Dropout(0.5))
    with pytest.raises(TypeError):
        model.train("no")
    assert all(m.training for _, m in model.named_modules())
    assert not any(m.training for _, m in model.train(False).named_modules())


# ---------------------------------------------------------------- issue 23, second part: seeds

@pytest.mark.parametrize("seed", [-1, 1.5, "0"])
@pytest.mark.parametrize("make", [lambda seed: Linear(2, 2, seed=seed), lambda seed: Dropout(0.5, seed=seed)])
def test_a_bad_seed_is_refused_naming_it(make, seed):
    with pytest.raises((TypeError, ValueError), match="seed must be"):
        make(seed)
