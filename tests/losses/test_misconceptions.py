"""Module 04's checks that recognise typical mistakes by name (tito/misconceptions/losses.py lists them).
Expected values come from NumPy alone."""
import numpy as np
import pytest

from tests.diagnosis import expect_close, misconception
from tinytorch.core.losses import cross_entropy
from tinytorch.core.tensor import Tensor


@pytest.mark.isolates("cross_entropy")     # reduction="none": `_reduce` only hands the losses back (its own checks)
def test_cross_entropy_of_a_confident_wrong_logit_is_finite():
    logits = Tensor(np.array([[1000.0, -1000.0, 0.0], [0.0, 1.0, 2.0]]), dtype=np.float64)
    got = cross_entropy(logits, np.array([1, 2]), reduction="none").data
    shifted = logits.data - logits.data.max(axis=1, keepdims=True)
    expected = -(shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True)))[[0, 1], [1, 2]]
    if not np.isfinite(got).all():
        raise misconception("log_softmax", "log(softmax(x)) takes the log of a probability that underflowed to 0; "
                            "log_softmax computes x - max - log Σ exp(x - max) without it", expected, got, "losses")
    expect_close(got, expected, "losses")
