"""Module 05 (autograd): the mistakes learners typically make in the engine: the grad-mode switch,
unbroadcasting, the topological order, the walk, the segment sum, the row-sparse gradient and the graph's layers."""
from tito.misconceptions import Mistake

MISTAKES = [
    Mistake(
        name="no-grad-not-restored", exercise="no_grad",
        misconception="Leaving no_grad switches gradients back on: but it restores the mode in force before "
                      "(a nested no_grad must not switch them on), also when the block raises.",
        replacement="""
_grad_mode.enabled = False
yield
_grad_mode.enabled = True
"""),
    Mistake(
        name="unbroadcast-leading-only", exercise="unbroadcast",
        misconception="Broadcasting only adds leading axes: but it also stretches axes of size 1, whose "
                      "gradient must be summed back (keepdims).",
        replacement="""
if grad.shape == shape:
    return grad
added = grad.ndim - len(shape)
if added > 0:
    grad = grad.sum(axis=tuple(range(added)))
return grad.reshape(shape)
"""),
    Mistake(
        name="topo-preorder", exercise="topological_order",
        misconception="The order nodes are first reached in is a topological order: but a node used twice must "
                      "come after all of its inputs, so it is appended when its inputs are done (post-order).",
        replacement="""
order, visited = [], set()
stack = [root]
while stack:
    tensor = stack.pop()
    if id(tensor) in visited:
        continue
    visited.add(id(tensor))
    order.append(tensor)
    if tensor._grad_fn is not None:
        for inp in tensor._grad_fn.inputs:
            if inp.requires_grad:
                stack.append(inp)
return order[::-1]
"""),
    Mistake(
        name="backward-assigns", exercise="backward",
        misconception="Each input's gradient is the one its consumer hands back: but an input used twice gets "
                      "two, and they add up (accumulate, never assign).",
        replacement="""
order = topological_order(root)
for tensor in order:
    if tensor._grad_fn is not None:
        check_saved_versions(tensor)
grads = {id(root): grad}
for tensor in reversed(order):
    g = grads.pop(id(tensor), None)
    if g is None:
        continue
    node = tensor._grad_fn
    if node is None:
        tensor.grad = accumulate(tensor.grad, g)
        continue
    if isinstance(g, RowSparseGrad):
        g = g.to_dense()
    for inp, input_grad in zip(node.inputs, node.backward(node.ctx, g)):
        if input_grad is None or not inp.requires_grad:
            continue
        if not isinstance(input_grad, RowSparseGrad):
            input_grad = unbroadcast(np.asarray(input_grad), inp.shape).astype(inp.dtype, copy=False).copy()
        grads[id(inp)] = input_grad
"""),
    Mistake(
        name="segment-sum-fancy-add", exercise="segment_sum",
        misconception="`sums[slots] += values` adds every row into its slot: but NumPy's fancy-index `+=` "
                      "writes a repeated slot once.",
        says="repeated ids",
        replacement="""
unique_ids, slots = np.unique(ids, return_inverse=True)
sums = np.zeros((len(unique_ids),) + values.shape[1:], dtype=values.dtype)
sums[slots] += values
return unique_ids, sums
"""),
    Mistake(
        name="ranks-by-highest-input", says="arrow points up", exercise="layer_ranks",
        misconception="A node goes one layer below its first (or nearest) input: but it must sit below all of "
                      "them, so below the lowest, 1 + the largest rank (the longest path), or an arrow points up.",
        replacement="""
preds, succs = _neighbours(node_ids, edges)
rank = {}
for node_id in node_ids:
    rank[node_id] = min((rank[p] + 1 for p in preds[node_id]), default=0)
for node_id in node_ids:
    if not preds[node_id] and succs[node_id]:
        rank[node_id] = min(rank[s] for s in succs[node_id]) - 1
return rank
"""),
    Mistake(
        name="to-dense-float64", says="dtype", exercise="RowSparseGrad.to_dense",
        misconception="np.zeros gives the right array: but its default dtype is float64, and a float32 table "
                      "needs a float32 gradient.",
        replacement="""
dense = np.zeros(self.shape)

def put(rows, values):
    dense[rows] = values
self.for_row_blocks(put)
return dense
"""),
]
