"""Module 03 (layers): the mistakes learners typically make in `Module`, `Linear` and `Dropout`."""
from tito.misconceptions import Mistake

MISTAKES = [
    Mistake(
        name="named-parameters-top-level-only", exercise="Module.named_parameters",
        misconception="A module's parameters are its own attributes: but a model's parameters sit in its "
                      "submodules too, found by walking them (each shared one once).",
        replacement="""
for entry_name, value in self._named_entries():
    if isinstance(value, Parameter):
        yield (f"{prefix}.{entry_name}" if prefix else entry_name), value
"""),
    Mistake(
        name="linear-weight-out-in", says="(in_features, out_features)", exercise="Linear.__init__",
        misconception="The weight is (out_features, in_features) as PyTorch stores it: but here forward is "
                      "x @ weight, so it is (in_features, out_features).",
        replacement="""
rng = np.random.default_rng(seed)
bound = 1 / np.sqrt(in_features)
self.weight = Parameter(rng.uniform(-bound, bound, size=(out_features, in_features)))
self.bias = Parameter(rng.uniform(-bound, bound, size=(out_features,))) if bias else None
"""),
    Mistake(
        name="linear-bias-ignored", exercise="Linear.forward",
        misconception="The bias is optional, so forward may leave it out: but when it exists it is added.",
        replacement="""
return x @ self.weight
"""),
    Mistake(
        name="dropout-in-eval", exercise="Dropout.forward",
        misconception="Dropout always drops: but in eval mode it is the identity.",
        says="eval",
        replacement="""
if self.p == 0:
    return x
keep = self.rng.random(x.shape) >= self.p
return x * Tensor(keep.astype(x.dtype) / (1 - self.p), dtype=x.dtype)
"""),
    Mistake(
        name="dropout-not-scaled", exercise="Dropout.forward",
        misconception="Dropout only zeroes entries: but inverted dropout scales the survivors by 1/(1 − p) so "
                      "the expected output equals the input.",
        replacement="""
if not self.training or self.p == 0:
    return x
keep = self.rng.random(x.shape) >= self.p
return x * Tensor(keep.astype(x.dtype), dtype=x.dtype)
"""),
]
