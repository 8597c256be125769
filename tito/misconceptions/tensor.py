"""Module 01 (tensor): the mistakes learners typically make in the local derivatives of `Tensor`'s ops.
Each `replacement` is the learner's whole solution block."""
from tito.misconceptions import Mistake

MISTAKES = [
    Mistake(
        name="mul-saves-swapped", says="saved in the wrong order", exercise="MulBackward.forward",
        misconception="The order in which forward saves its inputs does not matter: but backward unpacks them "
                      "in the order saved, so each operand gets the other's gradient.",
        replacement="""
ctx.save_for_backward(b, a)
return a * b
"""),
    Mistake(
        name="mul-grad-self", exercise="MulBackward.backward",
        misconception="Each factor's gradient is the upstream gradient times itself: but d(a·b)/da is b.",
        replacement="""
a, b = ctx.saved
return grad * a, grad * b
"""),
    Mistake(
        name="div-sign", exercise="DivBackward.backward",
        misconception="d(a/b)/db is a/b²: but it is −a/b², the quotient rule's minus sign.",
        replacement="""
a, b = ctx.saved
return grad / b, grad * a / (b * b)
"""),
    Mistake(
        name="matmul-no-transpose", says="transpose", exercise="MatMulBackward.backward",
        misconception="The gradient of a @ b with respect to a is grad @ b: but the shapes say grad @ bᵀ.",
        replacement="""
a, b = ctx.saved
return grad @ b, a @ grad
"""),
    Mistake(
        name="sum-broadcast-back", says="reduced axis not restored", exercise="SumBackward.backward",
        misconception="Broadcasting the reduced gradient back to the input's shape puts each value where it "
                      "came from: but without the reduced axes restored it lines up with the wrong axis.",
        replacement="""
shape, axis, keepdims = ctx.saved
return (np.broadcast_to(grad, shape).astype(grad.dtype),)
"""),
    Mistake(
        name="getitem-repeated-lost", exercise="GetItemBackward.backward",
        misconception="`full[index] += grad` adds every picked gradient: but NumPy writes a repeated index once.",
        says="repeated indices",
        replacement="""
shape, index = ctx.saved
full = np.zeros(shape, dtype=grad.dtype)
full[index] += grad
return (full,)
"""),
    Mistake(
        name="tanh-derivative", exercise="TanhBackward.backward",
        misconception="tanh' is 1 − tanh: but it is 1 − tanh².",
        replacement="""
(out,) = ctx.saved
return (grad * (1 - out),)
"""),
    Mistake(
        name="relu-saves-input", says="not the mask", exercise="ReLUBackward.forward",
        misconception="Saving the input is enough for backward: but ReLU's backward needs the mask x > 0, and "
                      "the input itself multiplies the gradient by x.",
        replacement="""
ctx.save_for_backward(x)
return np.maximum(x, 0)
"""),
    Mistake(
        name="relu-no-chain-rule", exercise="ReLUBackward.backward",
        misconception="The backward returns the local derivative: but it returns the upstream gradient times it.",
        replacement="""
(positive,) = ctx.saved
return (positive.astype(grad.dtype),)
"""),
    Mistake(
        name="sigmoid-overflows", says="overflow", exercise="SigmoidBackward.forward",
        misconception="1 / (1 + exp(−x)) is the sigmoid: but exp(−x) overflows for x below about −710 (and "
                      "−88 in float32), so it is computed from exp(−|x|).",
        replacement="""
out = (1 / (1 + np.exp(-x))).astype(x.dtype, copy=False)
ctx.save_for_backward(out)
return out
"""),
    Mistake(
        name="sigmoid-derivative", exercise="SigmoidBackward.backward",
        misconception="σ' is σ: but it is σ(1 − σ).",
        replacement="""
(out,) = ctx.saved
return (grad * out,)
"""),
    Mistake(
        name="gelu-product-rule", exercise="GELUBackward.backward",
        misconception="GELU's derivative is 0.5(1 + tanh(...)): but x multiplies the tanh, so the product rule "
                      "adds 0.5·x·tanh'(...)·inner'.",
        replacement="""
x, inner = ctx.saved
return (grad * 0.5 * (1 + inner),)
"""),
    Mistake(
        name="softmax-unstable", says="overflow", exercise="SoftmaxBackward.forward",
        misconception="exp(x) / Σ exp(x) is the softmax: but exp(1000) is inf, so subtract the row's maximum "
                      "first (it cancels).",
        replacement="""
e = np.exp(x)
out = e / e.sum(axis=axis, keepdims=True)
ctx.save_for_backward(out, axis)
return out
"""),
    Mistake(
        name="softmax-diagonal-only", exercise="SoftmaxBackward.backward",
        misconception="Softmax's derivative is s(1 − s) per entry: but every output depends on every input, "
                      "so the Jacobian has off-diagonal terms −s_i s_j.",
        replacement="""
out, axis = ctx.saved
return (grad * out * (1 - out),)
"""),
    Mistake(
        name="log-softmax-unstable", says="overflow", exercise="LogSoftmaxBackward.forward",
        misconception="log(softmax(x)) is x − log Σ exp(x): but exp overflows unless the maximum is "
                      "subtracted first.",
        replacement="""
out = x - np.log(np.exp(x).sum(axis=axis, keepdims=True))
ctx.save_for_backward(out, axis)
return out
"""),
    Mistake(
        name="log-softmax-no-sum", exercise="LogSoftmaxBackward.backward",
        misconception="d log softmax is 1 − softmax per entry: but each output depends on the whole row, so "
                      "it is grad − softmax · Σ grad.",
        replacement="""
out, axis = ctx.saved
return (grad - np.exp(out) * grad,)
"""),
]
