"""Module 04, losses: cross_entropy and mse_loss against NumPy references, their gradients
(closed form and gradcheck), ignore_index, reductions, refusals, and PyTorch when present."""
import numpy as np
import pytest

from tinytorch.core.autograd import gradcheck
from tinytorch.core.losses import CrossEntropyLoss, MSELoss, cross_entropy, mse_loss
from tinytorch.core.tensor import Tensor


def float64(values, requires_grad=False):
    return Tensor(values, requires_grad=requires_grad, dtype=np.float64)


def cross_entropy_reference(logits, targets):
    "Per-position loss, float64, class axis last."
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return -np.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# --- cross_entropy: values -----------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(7, 5), (2, 3, 4), (6,)])
def test_cross_entropy_matches_numpy_for_every_reduction(shape, rng):
    logits = rng.normal(scale=2, size=shape)
    targets = rng.integers(0, shape[-1], size=shape[:-1])
    reference = cross_entropy_reference(logits, targets)
    x = float64(logits)
    assert cross_entropy(x, targets).item() == pytest.approx(reference.mean(), rel=1e-12)
    assert cross_entropy(x, targets, reduction="sum").item() == pytest.approx(reference.sum(), rel=1e-12)
    per_position = cross_entropy(x, targets, reduction="none")
    assert per_position.shape == targets.shape
    np.testing.assert_allclose(per_position.data, reference, rtol=1e-12)


def test_cross_entropy_of_uniform_logits_is_log_num_classes():
    for classes in (2, 10, 50_257):
        loss = cross_entropy(Tensor(np.zeros((3, classes))), np.array([0, 1, classes - 1]))
        assert loss.item() == pytest.approx(np.log(classes), rel=1e-6)


def test_cross_entropy_is_stable_for_huge_logits():
    logits = float64([[1000.0, -1000.0, 0.0], [-5e4, 5e4, 0.0]])
    losses = cross_entropy(logits, np.array([1, 1]), reduction="none").data
    np.testing.assert_allclose(losses, [2000.0, 0.0], atol=1e-9)


def test_cross_entropy_keeps_float32_and_accepts_tensor_targets(rng):
    logits = Tensor(rng.normal(size=(4, 3)))
    loss = cross_entropy(logits, Tensor(np.array([0, 1, 2, 0])))
    assert loss.dtype == np.float32 and loss.shape == ()
    assert cross_entropy(logits, np.array([0, 1, 2, 0], dtype=np.uint8)).item() == pytest.approx(loss.item())


# --- cross_entropy: gradients ---------------------------------------------------------------------

def test_cross_entropy_gradient_is_softmax_minus_onehot_over_n(rng):
    logits, targets = rng.normal(size=(5, 4)), np.array([3, 0, 0, 2, 1])
    x = float64(logits, requires_grad=True)
    cross_entropy(x, targets).backward()
    np.testing.assert_allclose(x.grad, (softmax(logits) - np.eye(4)[targets]) / 5, rtol=1e-10, atol=1e-15)
    x.grad = None
    cross_entropy(x, targets, reduction="sum").backward()
    np.testing.assert_allclose(x.grad, softmax(logits) - np.eye(4)[targets], rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_gradcheck(reduction, rng):
    logits, targets = rng.normal(size=(2, 3, 4)), rng.integers(0, 4, size=(2, 3))
    targets[0, 1] = -1
    assert gradcheck(lambda z: cross_entropy(z, targets, ignore_index=-1, reduction=reduction),
                     [float64(logits, requires_grad=True)])


def test_cross_entropy_repeated_targets_accumulate(rng):
    logits = rng.normal(size=(1, 3))
    x = float64(np.repeat(logits, 4, axis=0), requires_grad=True)
    cross_entropy(x, np.array([1, 1, 1, 1]), reduction="sum").backward()
    np.testing.assert_allclose(x.grad, np.repeat(softmax(logits) - np.eye(3)[[1]], 4, axis=0), rtol=1e-10)


# --- ignore_index -----------------------------------------------------------------------------------

def test_ignore_index_drops_positions_from_the_sum_and_the_divisor(rng):
    logits, targets = rng.normal(size=(6, 3)), np.array([0, 9, 2, 9, 9, 1])
    kept = targets != 9
    reference = cross_entropy_reference(logits[kept], targets[kept])
    x = float64(logits, requires_grad=True)
    loss = cross_entropy(x, targets, ignore_index=9)
    assert loss.item() == pytest.approx(reference.mean(), rel=1e-12)
    loss.backward()
    assert np.all(x.grad[~kept] == 0)
    np.testing.assert_allclose(x.grad[kept], (softmax(logits[kept]) - np.eye(3)[targets[kept]]) / 3, rtol=1e-10)
    none = cross_entropy(x, targets, ignore_index=9, reduction="none").data
    assert np.all(none[~kept] == 0) and none[kept] == pytest.approx(reference)
    assert cross_entropy(x, targets, ignore_index=9, reduction="sum").item() == pytest.approx(reference.sum())


def test_ignore_index_may_be_a_valid_class_such_as_padding_zero(rng):
    logits, targets = rng.normal(size=(4, 5)), np.array([0, 3, 0, 4])
    loss = cross_entropy(float64(logits), targets, ignore_index=0).item()
    assert loss == pytest.approx(cross_entropy_reference(logits[[1, 3]], targets[[1, 3]]).mean())


def test_all_targets_ignored_gives_nan_and_zero_gradient():
    x = float64(np.ones((2, 3)), requires_grad=True)
    loss = cross_entropy(x, np.array([-100, -100]), ignore_index=-100)
    loss.backward()
    assert np.isnan(loss.item()) and np.all(x.grad == 0)


# --- refusals ------------------------------------------------------------------------------------------

def test_float_targets_are_refused():
    with pytest.raises(TypeError, match="float"):
        cross_entropy(Tensor(np.zeros((2, 3))), np.array([0.0, 1.0]))
    with pytest.raises(TypeError, match="bool"):
        cross_entropy(Tensor(np.zeros((2, 3))), np.array([True, False]))


def test_integer_logits_are_refused():
    with pytest.raises(TypeError, match="int"):
        cross_entropy(Tensor(np.zeros((2, 3), dtype=np.int64)), np.array([0, 1]))


@pytest.mark.parametrize("bad", [3, -1, 100])
def test_out_of_range_target_names_the_target_and_the_range(bad):
    with pytest.raises(IndexError) as caught:
        cross_entropy(Tensor(np.zeros((3, 3))), np.array([0, bad, 1]))
    assert f"target {bad}" in str(caught.value) and "0 <= target < 3" in str(caught.value)


def test_out_of_range_message_mentions_ignore_index_when_set():
    with pytest.raises(IndexError, match="ignore_index \\(-100\\)"):
        cross_entropy(Tensor(np.zeros((2, 3))), np.array([-1, 0]), ignore_index=-100)


@pytest.mark.parametrize("targets_shape", [(3,), (2, 1), (2, 3)])
def test_shape_mismatch_names_both_shapes(targets_shape):
    with pytest.raises(ValueError) as caught:
        cross_entropy(Tensor(np.zeros((2, 3))), np.zeros(targets_shape, dtype=np.int64))
    assert str(targets_shape) in str(caught.value) and "(2, 3)" in str(caught.value)


@pytest.mark.parametrize("fn,args", [(cross_entropy, (np.zeros((2, 3)), np.array([0, 1]))),
                                     (mse_loss, (np.zeros(2), np.zeros(2)))])
def test_unknown_reduction_lists_the_choices(fn, args):
    with pytest.raises(ValueError) as caught:
        fn(Tensor(args[0]), args[1], reduction="average")
    assert all(word in str(caught.value) for word in ("'average'", "'mean'", "'sum'", "'none'"))


# --- mse_loss ------------------------------------------------------------------------------------------

def test_mse_matches_numpy_and_its_gradient(rng):
    pred, target = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    x = float64(pred, requires_grad=True)
    loss = mse_loss(x, target)
    assert loss.item() == pytest.approx(np.mean((pred - target) ** 2), rel=1e-12)
    loss.backward()
    np.testing.assert_allclose(x.grad, 2 * (pred - target) / 12, rtol=1e-12)
    assert mse_loss(x, target, reduction="sum").item() == pytest.approx(np.sum((pred - target) ** 2), rel=1e-12)
    np.testing.assert_allclose(mse_loss(x, target, reduction="none").data, (pred - target) ** 2, rtol=1e-12)


def test_mse_gradcheck_on_both_inputs(rng):
    assert gradcheck(mse_loss, [float64(rng.normal(size=(2, 3)), True), float64(rng.normal(size=(2, 3)), True)])


def test_mse_keeps_float32():
    assert mse_loss(Tensor(np.ones(3)), np.zeros(3)).dtype == np.float32


def test_mse_refuses_broadcasting_shapes():
    with pytest.raises(ValueError, match=r"\(4, 1\).*\(4,\)"):
        mse_loss(Tensor(np.zeros((4, 1))), np.zeros(4))


# --- loss layers -------------------------------------------------------------------------------------------

def test_loss_layers_call_the_functions(rng):
    logits, targets = Tensor(rng.normal(size=(5, 3))), np.array([0, 1, 2, 1, 0])
    assert CrossEntropyLoss(ignore_index=1, reduction="sum")(logits, targets).item() == pytest.approx(
        cross_entropy(logits, targets, ignore_index=1, reduction="sum").item())
    assert MSELoss()(logits, np.zeros((5, 3))).item() == pytest.approx(float(np.mean(logits.data ** 2)), rel=1e-6)
    assert repr(CrossEntropyLoss()) == "CrossEntropyLoss(ignore_index=None, reduction='mean')"
    assert repr(MSELoss("sum")) == "MSELoss(reduction='sum')"
    with pytest.raises(ValueError, match="'avg'"):
        CrossEntropyLoss(reduction="avg")


# --- PyTorch parity ------------------------------------------------------------------------------------------

def test_cross_entropy_and_mse_match_pytorch(torch, rng):
    logits, targets = rng.normal(size=(2, 5, 7)), rng.integers(0, 7, size=(2, 5))
    targets[1, 2] = -100
    ours = float64(logits, requires_grad=True)
    loss = cross_entropy(ours, targets, ignore_index=-100)
    loss.backward()
    theirs = torch.tensor(logits, requires_grad=True)
    reference = torch.nn.functional.cross_entropy(theirs.permute(0, 2, 1), torch.tensor(targets), ignore_index=-100)
    reference.backward()
    assert loss.item() == pytest.approx(reference.item(), rel=1e-12)
    np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-10, atol=1e-14)
    pred, target = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    for reduction in ("mean", "sum"):
        expected = torch.nn.functional.mse_loss(torch.tensor(pred), torch.tensor(target), reduction=reduction)
        assert mse_loss(float64(pred), target, reduction=reduction).item() == pytest.approx(expected.item(), rel=1e-12)


# ---------------------------------------------------------------- issue 23, second part: label_smoothing (PyTorch's)

@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index", [None, 2])
def test_label_smoothing_matches_pytorch(smoothing, reduction, ignore_index):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    logits_np, targets = rng.standard_normal((3, 4, 5)) * 3, rng.integers(0, 5, (3, 4))
    logits = Tensor(logits_np, requires_grad=True, dtype=np.float64)
    loss = cross_entropy(logits, targets, ignore_index=ignore_index, reduction=reduction, label_smoothing=smoothing)
    reference_logits = torch.tensor(logits_np, requires_grad=True)
    reference = torch.nn.functional.cross_entropy(
        reference_logits.permute(0, 2, 1), torch.tensor(targets), reduction=reduction, label_smoothing=smoothing,
        ignore_index=-100 if ignore_index is None else ignore_index)
    np.testing.assert_allclose(loss.data, reference.detach().numpy(), rtol=1e-12, atol=1e-12)
    weights = rng.standard_normal(loss.shape)
    (loss * Tensor(weights, dtype=np.float64)).sum().backward()
    (reference * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(logits.grad, reference_logits.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_label_smoothing_layer_form_and_gradcheck():
    rng = np.random.default_rng(1)
    logits = Tensor(rng.standard_normal((4, 6)), requires_grad=True, dtype=np.float64)
    targets = rng.integers(0, 6, 4)
    assert gradcheck(lambda x: cross_entropy(x, targets, label_smoothing=0.2), [logits])
    layer = CrossEntropyLoss(label_smoothing=0.2)
    assert layer(logits, targets).item() == cross_entropy(logits, targets, label_smoothing=0.2).item()
    assert "label_smoothing=0.2" in repr(layer)


@pytest.mark.parametrize("bad, kind", [(-0.1, ValueError), (1.5, ValueError), (float("nan"), ValueError),
                                       ("0.1", TypeError), (True, TypeError)])
def test_label_smoothing_must_be_in_0_1(bad, kind):
    with pytest.raises(kind, match="label_smoothing"):
        cross_entropy(Tensor(np.zeros((2, 3))), [0, 1], label_smoothing=bad)
    with pytest.raises(kind, match="label_smoothing"):
        CrossEntropyLoss(label_smoothing=bad)
