"""Module 06 (optimizers): the mistakes learners typically make in the update rules."""
from tito.misconceptions import Mistake

MISTAKES = [
    Mistake(
        name="sgd-ascends", exercise="SGD._update",
        misconception="The step adds lr times the gradient: but the gradient points uphill, so descent "
                      "subtracts it.",
        replacement="""
if self.weight_decay:
    grad = grad + self.weight_decay * p.data
if self.momentum:
    buffer = state.get("momentum_buffer")
    if buffer is None:
        buffer = _scaled(grad, 1.0)
    elif isinstance(buffer, np.ndarray) and isinstance(grad, np.ndarray):
        buffer *= self.momentum
        buffer += grad
    else:
        buffer = _scaled(buffer, self.momentum) + grad
    state["momentum_buffer"] = grad = buffer
_add_to(p.data, grad, self.lr)
"""),
    Mistake(
        name="adam-no-square", exercise="Adam._update.update_block",
        misconception="The second moment is a running mean of the gradient: but it is of the squared gradient, "
                      "so the step is scaled by the gradient's size.",
        replacement="""
if self.weight_decay and self._decoupled:
    w *= 1 - self.lr * self.weight_decay
elif self.weight_decay:
    g = g + self.weight_decay * w
m += (1 - beta1) * (g - m)
v *= beta2
v += (1 - beta2) * np.abs(g)
w -= step_size * (m / (np.sqrt(v) / correction2 + self.eps))
"""),
    Mistake(
        name="sparse-adam-state-not-stored", exercise="SparseAdam._update.update_block",
        misconception="m[rows] gives the rows to update in place: but fancy indexing copies, so the moments "
                      "must be written back.",
        replacement="""
m_old, v_old = m[rows], v[rows]
m_old += (g - m_old) * (1 - beta1)
v_old += (g * g - v_old) * (1 - beta2)
p.data[rows] += -step_size * (m_old / (np.sqrt(v_old) + self.eps))
"""),
]
