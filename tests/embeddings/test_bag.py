"""Behaviour of tinytorch.text.bag.EmbeddingBag (and `embedding_bag`): sum/mean/max bags from 2-D ids or
1-D ids with offsets, empty bags, padding, per-sample weights, gradients (against a plain-NumPy reference
written bag by bag, finite differences and PyTorch), and the errors for bad input.
"""
import numpy as np
import pytest

from tinytorch.core.autograd import RowSparseGrad, gradcheck
from tinytorch.core.tensor import Tensor
from tinytorch.text.bag import BAG_MODES, EmbeddingBag, EmbeddingBagBackward, embedding_bag

pytestmark = pytest.mark.usefixtures("both_kernels")    # run with the plain and with the fast kernels (module 18)


def bag_bounds(ids, offsets, include_last_offset):
    "(start, end) of each bag, from the PyTorch rules, written out one bag at a time."
    ids = np.asarray(ids)
    if ids.ndim == 2:
        n = ids.shape[1]
        return [(b * n, (b + 1) * n) for b in range(ids.shape[0])]
    offsets = list(offsets)
    ends = offsets[1:] if include_last_offset else offsets[1:] + [len(ids)]
    starts = offsets[:-1] if include_last_offset else offsets
    return list(zip(starts, ends))


def reference_bags(table, ids, offsets, mode, upstream, per_sample_weights=None, padding_idx=None,
                   include_last_offset=False):
    """Output, dL/dtable and dL/dper_sample_weights written from the definition in plain NumPy, bag by bag and
    position by position (independent of EmbeddingBag and of Embedding's backward)."""
    flat, table = np.asarray(ids).reshape(-1), np.asarray(table)
    weights = None if per_sample_weights is None else np.asarray(per_sample_weights).reshape(-1)
    bounds = bag_bounds(ids, offsets, include_last_offset)
    out, grad_table = np.zeros((len(bounds), table.shape[1])), np.zeros_like(table)
    grad_weights = np.zeros(len(flat))
    for b, (start, end) in enumerate(bounds):
        kept = [p for p in range(start, end) if flat[p] != padding_idx]
        if not kept:
            continue                                                          # an empty bag: zeros, no gradient
        rows = table[flat[kept]]                                              # (k, d)
        if mode == "sum":
            scale = np.ones(len(kept)) if weights is None else weights[kept]
            out[b] = (rows * scale[:, None]).sum(axis=0)
            for p, w in zip(kept, scale):
                grad_table[flat[p]] += w * upstream[b]
                grad_weights[p] = table[flat[p]] @ upstream[b]
        elif mode == "mean":
            out[b] = rows.mean(axis=0)
            for p in kept:
                grad_table[flat[p]] += upstream[b] / len(kept)
        else:
            out[b] = rows.max(axis=0)
            for column in range(table.shape[1]):
                winner = kept[int(np.argmax(rows[:, column]))]                # ties: the first position
                grad_table[flat[winner], column] += upstream[b, column]
    return out, grad_table, grad_weights


CASES = {
    # name: (ids, offsets, include_last_offset)
    "2-D fixed bags": (np.array([[1, 2, 2], [0, 5, 3], [4, 4, 4]]), None, False),
    "offsets with empty bags": (np.array([1, 2, 2, 0, 5, 3, 3, 0]), [0, 3, 3, 5, 8], False),
    "include_last_offset": (np.array([3, 1, 1, 0, 0, 2, 6]), [0, 2, 2, 5, 7], True),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
@pytest.mark.parametrize("mode", BAG_MODES)
@pytest.mark.parametrize("padding_idx", [None, 0])
@pytest.mark.parametrize("sparse", [False, True])
def test_outputs_and_gradients_match_a_numpy_reference(case, mode, padding_idx, sparse):
    ids, offsets, include_last_offset = CASES[case]
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((7, 4))
    bag = EmbeddingBag.from_pretrained(weights, freeze=False, mode=mode, padding_idx=padding_idx,
                                       include_last_offset=include_last_offset, sparse=sparse)
    psw = rng.standard_normal(ids.shape) if mode == "sum" else None
    ours_psw = None if psw is None else Tensor(psw, requires_grad=True, dtype=np.float64)

    out = bag(ids, offsets, per_sample_weights=ours_psw)
    upstream = rng.standard_normal(out.shape)
    expected, expected_grad, expected_psw_grad = reference_bags(weights, ids, offsets, mode, upstream, psw,
                                                                padding_idx, include_last_offset)
    out.backward(upstream)

    assert isinstance(out._grad_fn, EmbeddingBagBackward)
    assert out.shape == expected.shape and out.dtype == np.float64
    np.testing.assert_allclose(out.data, expected, atol=1e-12)
    assert isinstance(bag.weight.grad, RowSparseGrad) == sparse
    grad = bag.weight.grad.to_dense() if sparse else bag.weight.grad
    np.testing.assert_allclose(grad, expected_grad, atol=1e-12)
    if padding_idx is not None:
        assert np.all(grad[padding_idx] == 0)
    if psw is not None:
        assert ours_psw.grad.shape == ids.shape
        np.testing.assert_allclose(ours_psw.grad.reshape(-1), expected_psw_grad, atol=1e-12)


@pytest.mark.parametrize("mode", BAG_MODES)
def test_gradcheck_with_repeated_ids_padding_and_per_sample_weights(mode):
    rng = np.random.default_rng(1)
    bag = EmbeddingBag(6, 3, mode=mode, padding_idx=2, dtype=np.float64, seed=0)
    bag.weight.data[...] = rng.standard_normal((6, 3))            # distinct values: no ties between rows
    ids, offsets = np.array([1, 1, 2, 4, 0, 0, 5, 2, 3, 3, 3]), np.array([0, 4, 4, 7, 8])
    inputs = [bag.weight]
    if mode == "sum":
        inputs.append(Tensor(rng.standard_normal(len(ids)), requires_grad=True, dtype=np.float64))
    assert gradcheck(lambda *tensors: bag(ids, offsets, per_sample_weights=tensors[1] if mode == "sum" else None),
                     inputs)


def test_per_sample_weights_alone_can_require_grad():
    bag = EmbeddingBag.from_pretrained(np.arange(12.0).reshape(4, 3), freeze=True, mode="sum")
    weights = Tensor([[0.5, 2.0], [1.0, -1.0]], requires_grad=True, dtype=np.float64)
    out = bag([[1, 3], [2, 2]], per_sample_weights=weights)
    assert out.requires_grad and bag.weight.grad is None
    out.backward(np.ones((2, 3)))
    # dL/dw_p = weight[ids[p]] · grad[b] = sum of row ids[p]
    assert weights.grad.tolist() == [[12.0, 30.0], [21.0, 21.0]]
    assert bag.weight.grad is None


def test_mean_counts_only_non_padding_ids_and_padding_only_bags_are_zero():
    weights = np.array([[100.0, 100.0], [1.0, 2.0], [3.0, 6.0]])
    bag = EmbeddingBag.from_pretrained(weights, mode="mean", padding_idx=0)
    out = bag(np.array([1, 0, 2, 0, 0]), [0, 3])
    assert out.data.tolist() == [[2.0, 4.0], [0.0, 0.0]]
    maxed = EmbeddingBag.from_pretrained(-weights, mode="max", padding_idx=0)
    assert maxed(np.array([1, 0, 2, 0, 0]), [0, 3]).data.tolist() == [[-1.0, -2.0], [0.0, 0.0]]


def test_max_mode_routes_each_column_to_the_first_position_that_reaches_the_maximum():
    bag = EmbeddingBag.from_pretrained(np.array([[1.0, 5.0], [1.0, 2.0], [0.0, 5.0]]), freeze=False, mode="max")
    out = bag([[0, 1, 2], [2, 1, 0]])
    assert out.data.tolist() == [[1.0, 5.0], [1.0, 5.0]]
    out[0].sum().backward()
    assert bag.weight.grad.tolist() == [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]   # row 0 comes first in bag 0
    bag.zero_grad()
    out = bag([[2, 1, 0]])
    out.sum().backward()
    assert bag.weight.grad.tolist() == [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]   # column 0: row 1 first; column 1: row 2


def test_max_mode_ties_on_integer_tables_follow_the_first_position_rule():
    rng = np.random.default_rng(5)
    weights = rng.integers(0, 3, (9, 6)).astype(np.float64)              # values 0, 1, 2: ties everywhere
    ids = rng.integers(0, 9, 60)
    offsets = np.concatenate(([0], np.sort(rng.integers(0, 61, 11))))
    bag = EmbeddingBag.from_pretrained(weights, freeze=False, mode="max")
    upstream = rng.standard_normal((12, 6))
    out = bag(ids, offsets)
    out.backward(upstream)
    expected_out, expected_grad = np.zeros((12, 6)), np.zeros((9, 6))
    for b, (start, end) in enumerate(bag_bounds(ids, offsets, False)):
        if start == end:
            continue
        rows = weights[ids[start:end]]                                   # (length, d)
        expected_out[b] = rows.max(axis=0)
        for column in range(6):
            first = start + int(np.flatnonzero(rows[:, column] == rows[:, column].max())[0])
            expected_grad[ids[first], column] += upstream[b, column]
    np.testing.assert_array_equal(out.data, expected_out)
    np.testing.assert_allclose(bag.weight.grad, expected_grad, atol=1e-12)


def test_empty_input_shapes():
    bag = EmbeddingBag(5, 3, mode="sum", seed=0)
    assert bag(np.zeros((4, 0), np.int64)).data.tolist() == [[0.0] * 3] * 4
    assert bag([], [0]).shape == (1, 3) and not bag([], [0]).data.any()
    assert bag(np.zeros((0, 2), np.int64)).shape == (0, 3)
    assert EmbeddingBag(5, 3, include_last_offset=True, seed=0)([], [0]).shape == (0, 3)
    out = bag([], [0, 0])
    out.sum().backward()
    assert out.shape == (2, 3) and not bag.weight.grad.any()


def test_module_basics():
    bag = EmbeddingBag(10, 4, padding_idx=-1, seed=3)
    assert bag.mode == "mean" and bag.padding_idx == 9 and bag.num_embeddings == 10
    assert [name for name, _ in bag.named_parameters()] == ["weight"] and bag.weight.requires_grad
    assert not bag.weight.data[9].any() and bag.weight.data[:9].any()
    assert np.array_equal(EmbeddingBag(10, 4, seed=3).weight.data, EmbeddingBag(10, 4, seed=3).weight.data)
    assert EmbeddingBag(num_embeddings=6, embed_dim=2, init="gpt2").weight.shape == (6, 2)
    assert repr(EmbeddingBag(6, 2, mode="max", sparse=True)) == "EmbeddingBag(6, 2, mode='max', sparse=True)"
    frozen = EmbeddingBag.from_pretrained(np.ones((3, 2)))
    assert not frozen.weight.requires_grad and frozen.weight.dtype == np.float64
    functional = embedding_bag([[0, 1]], Tensor(np.eye(2)), mode="sum")
    assert functional.data.tolist() == [[1.0, 1.0]]


@pytest.mark.parametrize("call, error, words", [
    (lambda bag: bag([1, 2], [1]), ValueError, "offsets[0] = 1: the first bag must start at position 0"),
    (lambda bag: bag([1, 2, 3], [0, 2, 1]), ValueError, "offsets[2] = 1 comes after offsets[1] = 2"),
    (lambda bag: bag([1, 2, 3], np.array([0, 2, 1], np.uint8)), ValueError, "offsets[2] = 1 comes after"),
    (lambda bag: bag([1, 2], [0, 1, 3, 4]), ValueError, "offsets[2] = 3 is beyond the end of ids"),
    (lambda bag: bag([[1, 2]], [0]), ValueError, "offsets must be None"),
    (lambda bag: EmbeddingBag(6, 2, include_last_offset=True)([1, 2, 3], [0, 2]), ValueError,
     "the last offset is where the last bag ends, so it must be len(ids) = 3; got offsets[1] = 2"),
    (lambda bag: bag([1, 2]), ValueError, "1-D ids need offsets"),
    (lambda bag: bag([1, 2], []), ValueError, "offsets is empty, so there are no bags"),
    (lambda bag: bag([1, 2], [0.0]), TypeError, "offsets must be integers"),
    (lambda bag: bag(3, [0]), ValueError, "got shape ()"),
    (lambda bag: bag([1, 6], [0]), IndexError, "token id 6 at position (1,) is out of range [0, 6)"),
    (lambda bag: bag([1.0, 2.0], [0]), TypeError, "token ids must be integers"),
    (lambda bag: bag([1, 2], [0], per_sample_weights=[1.0, 2.0]), ValueError, "got mode='mean'"),
    (lambda bag: EmbeddingBag(6, 2, mode="max")([[1, 2]], per_sample_weights=[[1.0, 2.0]]), ValueError,
     "only supported with mode='sum'"),
    (lambda bag: EmbeddingBag(6, 2, mode="sum")([1, 2], [0], per_sample_weights=[1.0]), ValueError,
     "per_sample_weights must have the shape of ids, (2,); got (1,)"),
    (lambda bag: EmbeddingBag(6, 2, mode="sum")([1, 2], [0], per_sample_weights=[1, 2]), TypeError, "must be floats"),
    (lambda bag: EmbeddingBag(6, 2, mode="median"), ValueError, "unknown mode 'median'; choose one of 'sum', 'mean', 'max'"),
    (lambda bag: EmbeddingBag(6, 2, padding_idx=6), ValueError, "padding_idx=6 is outside [-6, 6)"),
], ids=["offset0", "decreasing", "decreasing-uint", "beyond-end", "2d-with-offsets", "last-offset", "1d-no-offsets", "empty-offsets",
        "float-offsets", "scalar-ids", "id-range", "float-ids", "psw-mean", "psw-max", "psw-shape", "psw-int",
        "mode", "padding"])
def test_bad_input_raises_a_clear_error(call, error, words):
    bag = EmbeddingBag(6, 2, seed=0)
    with pytest.raises(error) as info:
        call(bag)
    assert words in str(info.value)


# ------------------------------------------------------------------------------------------------ PyTorch

TORCH_CASES = {
    "2-D": (np.array([[1, 2, 2, 0], [5, 3, 3, 3]]), None, False),
    "offsets": (np.array([1, 2, 2, 0, 5, 3, 0, 4]), [0, 3, 3, 6], False),
    "include_last_offset": (np.array([3, 1, 1, 0, 0, 2, 6, 6]), [0, 2, 2, 5, 8], True),
}


@pytest.mark.torch
@pytest.mark.parametrize("case", TORCH_CASES, ids=list(TORCH_CASES))
@pytest.mark.parametrize("mode", BAG_MODES)
@pytest.mark.parametrize("padding_idx", [None, 0])
def test_outputs_and_gradients_match_pytorch(torch, case, mode, padding_idx):
    ids, offsets, include_last_offset = TORCH_CASES[case]
    rng = np.random.default_rng(2)
    weights = rng.standard_normal((7, 5))
    weights[3, 1] = weights[5, 1] = 9.0                   # ids 5 and 3 share a bag: a tie in max mode
    psw = rng.standard_normal(ids.shape) if mode == "sum" else None
    upstream = rng.standard_normal((ids.shape[0] if offsets is None else len(offsets) - include_last_offset, 5))

    bag = EmbeddingBag.from_pretrained(weights, freeze=False, mode=mode, padding_idx=padding_idx,
                                       include_last_offset=include_last_offset)
    ours_psw = None if psw is None else Tensor(psw, requires_grad=True, dtype=np.float64)
    out = bag(ids, offsets, per_sample_weights=ours_psw)
    out.backward(upstream)

    reference = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(weights.copy()), freeze=False, mode=mode,
                                                      padding_idx=padding_idx, include_last_offset=include_last_offset)
    torch_psw = None if psw is None else torch.from_numpy(psw.copy()).requires_grad_()
    torch_out = reference(torch.from_numpy(ids), None if offsets is None else torch.tensor(offsets),
                          per_sample_weights=torch_psw)
    torch_out.backward(torch.from_numpy(upstream))

    np.testing.assert_allclose(out.data, torch_out.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(bag.weight.grad, reference.weight.grad.numpy(), atol=1e-12)
    if psw is not None:
        np.testing.assert_allclose(ours_psw.grad, torch_psw.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("option", ["sparse", "include_last_offset"])
def test_bag_flags_must_be_bools(option):
    "A string like 'no' is truthy; it must not silently switch an option on."
    with pytest.raises(TypeError, match=rf"{option} must be True or False; got 'no'"):
        EmbeddingBag(10, 4, **{option: "no"})


# ------------------------------------------------------------------------------------------------ issue 23, second part

@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_no_bags_give_an_empty_result_as_in_pytorch(mode):
    bag = EmbeddingBag(5, 3, mode=mode, seed=0)
    out = bag(np.zeros(0, np.int64), offsets=np.zeros(0, np.int64))
    assert out.shape == (0, 3)
    out.sum().backward()
    assert not np.asarray(bag.weight.grad).any()


def test_empty_offsets_with_ids_or_with_include_last_offset_are_refused_naming_offsets():
    with pytest.raises(ValueError, match="offsets"):
        EmbeddingBag(5, 3)(np.array([1, 2]), offsets=np.zeros(0, np.int64))
    with pytest.raises(ValueError, match="offsets"):
        EmbeddingBag(5, 3, include_last_offset=True)(np.zeros(0, np.int64), offsets=np.zeros(0, np.int64))
