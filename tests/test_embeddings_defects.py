"""Defects of module 11 found by the adversarial pass of issue 15, one test each (each failed before its fix).

Numbers in the test names are the issue's defect numbers. PyTorch is the reference where it defines the
behaviour (`pip install torch==2.13.0`; those checks are skipped without it).
"""
import numpy as np
import pytest

from tinytorch.core.tensor import Tensor
from tinytorch.text.bag import EmbeddingBag, embedding_bag
from tinytorch.text.embeddings import Embedding, EmbeddingLayer, RotaryEmbedding, as_token_ids


def test_7_rotary_refuses_integer_input_instead_of_returning_zeros():
    rope = RotaryEmbedding(4)
    with pytest.raises(TypeError, match=r"RotaryEmbedding rotates float vectors; got dtype int64"):
        rope(np.ones((3, 4), dtype=np.int64))
    with pytest.raises(TypeError, match="got dtype int32"):
        rope(Tensor(np.ones((3, 4), dtype=np.int32), dtype=np.int32))


def test_8_object_dtype_python_int_ids_are_converted_when_they_fit():
    ids = np.array([[1, 2], [3, 0]], dtype=object)
    assert as_token_ids(ids, 5).dtype == np.int64
    table = Embedding(5, 2, seed=0)
    assert np.array_equal(table(ids).data, table.weight.data[ids.astype(np.int64)])
    with pytest.raises(IndexError, match=rf"token id {2**70} at position \(1,\) is out of range \[0, 5\)"):
        table(np.array([1, 2**70], dtype=object))
    with pytest.raises(TypeError, match="token ids must be integers"):
        table(np.array([1, "2"], dtype=object))


@pytest.mark.parametrize("dtype, position", [(np.int8, -128), (np.int16, -32768)])
def test_9_rope_at_the_most_negative_small_int_takes_the_right_angle(dtype, position):
    rope = RotaryEmbedding(4, max_seq_len=40_000)
    x = Tensor(np.random.default_rng(0).standard_normal((1, 4)), dtype=np.float64)
    narrow = rope(x, positions=np.array([position], dtype=dtype))
    wide = rope(x, positions=np.array([position], dtype=np.int64))
    angles = position * 10000.0 ** (-np.arange(0, 4, 2) / 4)
    a, b = x.data[0, 0::2], x.data[0, 1::2]
    expected = np.empty(4)
    expected[0::2], expected[1::2] = a * np.cos(angles) - b * np.sin(angles), a * np.sin(angles) + b * np.cos(angles)
    assert np.allclose(wide.data[0], expected, atol=1e-12)
    assert np.allclose(narrow.data[0], expected, atol=1e-12)


def test_10_flags_are_checked_like_embeddings():
    with pytest.raises(TypeError, match="interleaved must be True or False; got 'no'"):
        RotaryEmbedding(4, interleaved="no")
    with pytest.raises(TypeError, match="scale_embeddings must be True or False; got 'no'"):
        EmbeddingLayer(10, 4, scale_embeddings="no")


def test_10_uint64_offsets_beyond_int64_are_reported_as_given():
    big = np.uint64(2**63 + 5)
    with pytest.raises(ValueError, match=rf"offsets\[1\] = {int(big)} is beyond the end of ids"):
        embedding_bag(np.array([1, 2]), np.ones((3, 2)), offsets=np.array([0, big], dtype=np.uint64))
    with pytest.raises(ValueError, match=r"offsets\[2\] = 1 comes after offsets\[1\] = 2"):
        embedding_bag(np.array([1, 2]), np.ones((3, 2)), offsets=np.array([0, 2, 1], dtype=np.uint64))


def test_10_seed_and_impossible_sizes_get_our_own_errors():
    with pytest.raises(ValueError, match=r"seed must be a non-negative int .*; got -1"):
        Embedding(10, 4, seed=-1)
    with pytest.raises(MemoryError, match=r"a \(1099511627776, 1099511627776\) table of float32 needs [\d,]+ bytes"):
        Embedding(2**40, 2**40)


def nan_table():
    return np.array([[1.0, 2.0], [np.nan, 0.0], [3.0, np.nan], [np.nan, 5.0]])


BAGS = [[0, 1, 2, 3], [3, 0, 1, 2], [2, 1], [1, 3]]


def nan_max_reference(table, ids):
    "PyTorch's CPU rule written as its scan: keep the first value unless a later one is larger (NaN > x is False)."
    best, winner = table[ids[0]].copy(), np.zeros(table.shape[1], dtype=int)
    for position, token in enumerate(ids[1:], start=1):
        larger = table[token] > best
        best[larger], winner[larger] = table[token][larger], position
    return best, winner


@pytest.mark.parametrize("ids", BAGS, ids=str)
def test_10_max_bag_with_nan_sends_the_gradient_to_the_position_that_won(ids):
    bag = EmbeddingBag.from_pretrained(nan_table(), freeze=False, mode="max")
    out = bag(np.array(ids), offsets=[0])
    out.backward(np.array([[10.0, 100.0]]))
    best, winner = nan_max_reference(nan_table(), ids)
    expected_grad = np.zeros((4, 2))
    for column, position in enumerate(winner):
        expected_grad[ids[position], column] += [10.0, 100.0][column]
    assert np.allclose(out.data[0], best, equal_nan=True)
    assert np.array_equal(bag.weight.grad, expected_grad)


@pytest.mark.parametrize("ids", BAGS, ids=str)
def test_10_max_bag_with_nan_matches_pytorch(torch, ids):
    bag = EmbeddingBag.from_pretrained(nan_table(), freeze=False, mode="max")
    out = bag(np.array(ids), offsets=[0])
    out.backward(np.array([[10.0, 100.0]]))
    weight = torch.tensor(nan_table(), requires_grad=True)
    expected = torch.nn.functional.embedding_bag(torch.tensor(ids), weight, torch.tensor([0]), mode="max")
    expected.backward(torch.tensor([[10.0, 100.0]], dtype=torch.float64))
    assert np.allclose(out.data, expected.detach().numpy(), equal_nan=True)
    assert np.array_equal(bag.weight.grad, weight.grad.numpy())


def test_2_max_norm_renormalising_a_saved_table_refuses_to_backward():
    "The issue's repro: without the version bump the gradient was [[2.2, 2.6], [.6, .8]] instead of [[7, 9], [.6, .8]]."
    emb = Embedding.from_pretrained([[3.0, 4.0], [0.3, 0.4]], freeze=False, max_norm=1.0)
    loss = (emb.weight * emb.weight).sum() + emb([0]).sum()
    with pytest.raises(RuntimeError, match="modified"):
        loss.backward()


def test_2_max_norm_that_changes_nothing_keeps_the_graph_usable():
    emb = Embedding.from_pretrained([[0.3, 0.4], [0.6, 0.8]], freeze=False, max_norm=1.0)
    ((emb.weight * emb.weight).sum() + emb([0, 1]).sum()).backward()
    assert np.allclose(emb.weight.grad, 2 * emb.weight.data + 1)
