"""Module 13's batcher `random_windows` reaches every window, the last one included (issue 23 defect 12, issue 24).

It used to draw starts from 0 .. N - m - 2, so the last window (and with it the last token as a target) was never
chosen. It now is module 08's `get_batch`, under its old name.
"""
import numpy as np

from tinytorch.data import get_batch
from tinytorch.models.train import random_windows


def test_random_windows_reaches_the_last_window():
    ids = np.arange(12)
    rng = np.random.default_rng(0)
    starts = set()
    for _ in range(200):
        inputs, targets = random_windows(ids, 8, 4, rng)
        assert np.array_equal(targets, inputs + 1)
        starts.update(inputs[:, 0].tolist())
    assert starts == set(range(12 - 4)), f"starts never drawn: {sorted(set(range(8)) - starts)}"


def test_random_windows_works_on_the_shortest_stream():
    inputs, targets = random_windows(np.array([3, 4, 5]), 2, 2, np.random.default_rng(0))
    assert inputs.tolist() == [[3, 4]] * 2 and targets.tolist() == [[4, 5]] * 2


def test_random_windows_is_get_batch():
    ids = np.random.default_rng(1).integers(0, 100, 500)
    for a, b in zip(random_windows(ids, 4, 16, np.random.default_rng(2)), get_batch(ids, 4, 16, np.random.default_rng(2))):
        assert np.array_equal(a, b)
