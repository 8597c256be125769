"""Module 03's checks that recognise typical mistakes by name (tito/misconceptions/layers.py lists them)."""
import numpy as np

from tests.diagnosis import misconception
from tinytorch.core.layers import Dropout, Linear
from tinytorch.core.tensor import Tensor


def test_dropout_is_the_identity_in_eval_mode():
    dropout = Dropout(0.5, seed=0)
    dropout.eval()
    x = Tensor(np.ones((4, 5)))
    got = dropout(x).data
    if not np.array_equal(got, x.data):
        raise misconception("eval", "dropout is for training only: in eval mode it returns its input untouched",
                            x.data[0], got[0], "output[0]")


def test_linear_weight_is_in_features_by_out_features():
    layer = Linear(4, 3, seed=0)
    if layer.weight.shape != (4, 3):
        raise misconception("(in_features, out_features)", "forward computes x @ weight, so the weight has one row "
                            "per input feature (PyTorch stores the transpose and computes x @ weight.T)", (4, 3),
                            layer.weight.shape, "Linear(4, 3).weight.shape")
    if layer.bias is None or layer.bias.shape != (3,):
        raise misconception("bias", "the bias has one entry per output feature", (3,),
                            None if layer.bias is None else layer.bias.shape, "Linear(4, 3).bias.shape")
