"""Module 04 (losses): the mistakes learners typically make in the reduction, cross-entropy and MSE."""
from tito.misconceptions import Mistake

MISTAKES = [
    Mistake(
        name="mean-over-all-positions", exercise="_reduce",
        misconception="The mean divides by the number of positions: but ignored positions do not count, so it "
                      "divides by `count`, the positions kept.",
        replacement="""
if reduction == "none":
    return losses
total = losses.sum()
if reduction == "sum":
    return total
return total / float(losses.size) if losses.size > 0 else total + float("nan")
"""),
    Mistake(
        name="cross-entropy-log-of-softmax", says="log_softmax", exercise="cross_entropy",
        misconception="Cross-entropy is −log(softmax(x)[target]): but softmax underflows to 0 for a confident "
                      "wrong logit and log(0) is −inf; log_softmax computes it stably.",
        replacement="""
safe = np.where(keep, targets, 0).reshape(-1).astype(np.int64)
rows = np.arange(safe.size, dtype=np.int64)
picked = logits.softmax(axis=-1).log().reshape(-1)[rows * classes + safe]
losses = -picked if keep.all() else -picked * Tensor(keep.reshape(-1), dtype=logits.dtype)
return _reduce(losses.reshape(targets.shape), int(keep.sum()), reduction)
"""),
    Mistake(
        name="mse-absolute", exercise="mse_loss",
        misconception="The error's size is its absolute value: but MSE squares it.",
        replacement="""
diff = pred - target
return _reduce(diff.relu() + (-diff).relu(), diff.size, reduction)
"""),
]
