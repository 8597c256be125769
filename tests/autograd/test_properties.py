"""Property tests for segment_sum (hypothesis, bounded budget): against np.add.at on random id multisets,
deterministic bit for bit, and leaving its inputs alone (that one with the plain and with the fast kernels)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tinytorch.core.autograd import segment_sum

FAST = settings(max_examples=25, deadline=None)
BUDGET = settings(max_examples=25, deadline=None)
SEEDS = st.integers(0, 2**32 - 1)


@FAST
@given(n=st.integers(0, 60), vocab=st.integers(1, 10), width=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_segment_sum_equals_np_add_at(n, vocab, width, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, size=n)
    values = rng.integers(-100, 100, size=(n, width)).astype(np.float64)
    rows, sums = segment_sum(ids, values)
    assert rows.tolist() == sorted(set(ids.tolist()))
    dense = np.zeros((vocab, width))
    dense[rows] = sums
    expected = np.zeros((vocab, width))
    np.add.at(expected, ids, values)
    np.testing.assert_array_equal(dense, expected)


@pytest.mark.usefixtures("both_kernels")    # run with the plain and with the fast kernels (module 18)
@BUDGET
@given(n=st.integers(0, 80), vocab=st.integers(1, 10), width=st.integers(1, 3), seed=SEEDS)
def test_segment_sum_is_deterministic_leaves_inputs_alone_and_matches_np_add_at(n, vocab, width, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, size=n)
    values = rng.standard_normal((n, width)) * 10.0 ** rng.integers(-3, 4, size=(n, 1))   # mixed magnitudes
    ids_before, values_before = ids.copy(), values.copy()
    rows, sums = segment_sum(ids, values)
    again_rows, again_sums = segment_sum(ids.copy(), values.copy())
    assert np.array_equal(ids, ids_before) and np.array_equal(values, values_before), "inputs untouched"
    assert rows.tobytes() == again_rows.tobytes() and sums.tobytes() == again_sums.tobytes(), "bit for bit"
    strided = np.asfortranarray(values)                                    # same numbers, another memory layout
    assert segment_sum(ids, strided)[1].tobytes() == sums.tobytes()
    assert rows.tolist() == sorted(set(ids.tolist()))
    expected = np.zeros((vocab, width))
    np.add.at(expected, ids, values)
    np.testing.assert_allclose(sums, expected[rows], rtol=1e-12, atol=1e-9)
