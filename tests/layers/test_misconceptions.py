"""Module 03's checks that recognise typical mistakes by name (tito/misconceptions/layers.py lists them)."""
import numpy as np

from tests.diagnosis import misconception
from tinytorch.core.layers import Dropout
from tinytorch.core.tensor import Tensor


def test_dropout_is_the_identity_in_eval_mode():
    dropout = Dropout(0.5, seed=0)
    dropout.eval()
    x = Tensor(np.ones((4, 5)))
    got = dropout(x).data
    if not np.array_equal(got, x.data):
        raise misconception("eval", "dropout is for training only: in eval mode it returns its input untouched",
                            x.data[0], got[0], "output[0]")
