"""EmbeddingBag's max mode with NaN in the table (issue 15, defect 10): the value and the gradient follow
PyTorch's CPU rule, a scan that keeps the first value unless a later one is larger (NaN > x is False), checked
against that scan written out here and against PyTorch (`pip install torch==2.13.0`; skipped without it)."""
import numpy as np
import pytest

from tinytorch.text.bag import EmbeddingBag


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
