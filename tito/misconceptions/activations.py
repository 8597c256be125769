"""Module 02 (activations): each layer's forward is one call of the differentiable op of module 01; the
typical mistake is to compute the formula in NumPy instead, which gives the right values and no gradient,
or to reach for a neighbouring op."""
from tito.misconceptions import Mistake

MISTAKES = [
    Mistake(
        name="relu-numpy", says="no gradient", exercise="ReLU.forward",
        misconception="np.maximum(x, 0) is ReLU: but a NumPy result is outside the graph, so nothing before "
                      "the layer learns.",
        replacement="""
return Tensor(np.maximum(x.data, 0))
"""),
    Mistake(
        name="sigmoid-is-tanh", says="tanh", exercise="Sigmoid.forward",
        misconception="Sigmoid and tanh are the same squashing function: but sigmoid maps to (0, 1), "
                      "tanh to (−1, 1).",
        replacement="""
return x.tanh()
"""),
    Mistake(
        name="tanh-numpy", says="no gradient", exercise="Tanh.forward",
        misconception="np.tanh on the data is tanh: but it leaves the graph, so no gradient flows back.",
        replacement="""
return Tensor(np.tanh(x.data))
"""),
    Mistake(
        name="gelu-is-relu", exercise="GELU.forward",
        misconception="GELU is a smooth ReLU, so ReLU will do: but GELU(x) = x·Φ(x) is negative for small "
                      "negative x and smooth at 0.",
        replacement="""
return x.relu()
"""),
    Mistake(
        name="softmax-wrong-axis", exercise="Softmax.forward",
        misconception="Softmax normalises over the first axis, like a column sum: but each row of logits is "
                      "one distribution, so it normalises over `self.axis` (the last by default).",
        replacement="""
return x.softmax(axis=0)
"""),
    Mistake(
        name="log-softmax-as-log-of-softmax", exercise="LogSoftmax.forward",
        misconception="log(softmax(x)) is log-softmax: but softmax underflows to 0 for very negative logits and "
                      "log(0) is −inf; log_softmax computes it stably.",
        replacement="""
return x.softmax(axis=self.axis).log()
"""),
]
