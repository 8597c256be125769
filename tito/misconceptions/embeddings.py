"""Module 11 (embeddings): the mistakes learners typically make in the lookup, its backward, positions and
GPT-2's input block. Each `replacement` is the learner's whole solution block."""
from tito.misconceptions import Mistake

# The reference backward up to the dense gradient; the mistakes below change one step of it.
_BACKWARD_HEAD = """
ids, (vocab_size, dim), dtype, padding_idx, sparse = ctx.saved
ids, rows = ids.reshape(-1), grad.reshape(-1, dim).astype(dtype, copy=False)
"""

MISTAKES = [
    Mistake(
        name="repeated-ids-lost", exercise="EmbeddingBackward.backward",
        misconception="`dense[ids] += rows` adds every gradient row, but NumPy's fancy-index `+=` writes each "
                      "repeated id once, so an id read three times gets one row instead of the sum of three.",
        says="repeated ids",
        replacement=_BACKWARD_HEAD + """
if padding_idx is not None:
    keep = ids != padding_idx
    ids, rows = ids[keep], rows[keep]
if sparse:
    return (RowSparseGrad.from_rows(ids, rows, (vocab_size, dim)),)
dense = np.zeros((vocab_size, dim), dtype=dtype)
dense[ids] += rows
return (dense,)
"""),
    Mistake(
        name="padding-row-learns", exercise="EmbeddingBackward.backward",
        misconception="The padding row is zero at the start, so it stays zero: but it receives gradient like any "
                      "other row unless the backward drops the padding positions.",
        says="padding",
        replacement=_BACKWARD_HEAD + """
if sparse:
    return (RowSparseGrad.from_rows(ids, rows, (vocab_size, dim)),)
unique_ids, sums = kernels.segment_sum(ids, rows)
return (RowSparseGrad(unique_ids, sums, (vocab_size, dim)).to_dense(),)
"""),
    Mistake(
        name="dense-grad-for-sparse", exercise="EmbeddingBackward.backward",
        misconception="A sparse gradient is a dense one with the unused rows dropped afterwards, so it may be "
                      "built as a V×d array first (at GPT-2 size that is 154 MB per step for a few rows).",
        says="vocab-sized",
        replacement=_BACKWARD_HEAD + """
if padding_idx is not None:
    keep = ids != padding_idx
    ids, rows = ids[keep], rows[keep]
dense = np.zeros((vocab_size, dim), dtype=dtype)
np.add.at(dense, ids, rows)
if sparse:
    used = np.unique(ids)
    return (RowSparseGrad(used, dense[used], (vocab_size, dim)),)
return (dense,)
"""),
    Mistake(
        name="output-not-reshaped", exercise="EmbeddingBackward.forward",
        misconception="A lookup returns one row per id, so a flat (n, d) array will do: but a batch of ids "
                      "(B, T) must give (B, T, d), ids.shape + (d,).",
        says="ids.shape + (d,)",
        replacement="""
ctx.save_for_backward(ids, weight.shape, weight.dtype, padding_idx, sparse)
return kernels.gather_rows(weight, ids.reshape(-1))
"""),
    Mistake(
        name="table-transposed", exercise="Embedding.__init__",
        misconception="The table maps dimensions to tokens, (embedding_dim, vocab_size), as a Linear layer's "
                      "(in, out) weight would: but a lookup reads row `id`, so it is (vocab_size, embedding_dim).",
        says="(vocab_size, embedding_dim)",
        replacement="""
self.vocab_size = positive_int("vocab_size", vocab_size)
self.embedding_dim = positive_int("embedding_dim", embedding_dim)
self.padding_idx = padding_index(padding_idx, self.vocab_size)
self.sparse = flag("sparse", sparse)
table = init_table((self.embedding_dim, self.vocab_size), init, rng, dtype)
self.weight = Parameter(table, dtype=table.dtype)
"""),
    Mistake(
        name="padding-row-not-zeroed", exercise="Embedding.__init__",
        misconception="padding_idx only matters in the backward, so the padding row may start random: but a "
                      "padding token must read as zeros from the start.",
        says="padding",
        replacement="""
self.vocab_size = positive_int("vocab_size", vocab_size)
self.embedding_dim = positive_int("embedding_dim", embedding_dim)
self.padding_idx = padding_index(padding_idx, self.vocab_size)
self.sparse = flag("sparse", sparse)
table = init_table((self.vocab_size, self.embedding_dim), init, rng, dtype)
self.weight = Parameter(table, dtype=table.dtype)
"""),
    Mistake(
        name="forward-drops-padding", exercise="Embedding.forward",
        misconception="The table knows its padding row, so the lookup need not pass padding_idx on: but the "
                      "backward only sees what forward hands it, and then the padding row learns.",
        says="padding",
        replacement="""
ids = as_token_ids(indices, self.vocab_size)
return EmbeddingBackward.apply(self.weight, ids=ids, sparse=self.sparse)
"""),
    Mistake(
        name="tied-head-untransposed", exercise="Embedding.attend",
        misconception="The tied output head multiplies by the table itself: but hidden (*, d) needs (d, V), "
                      "the table transposed, to give one logit per token.",
        says="transpose",
        replacement="""
hidden = hidden_states(hidden, self.embedding_dim)
return hidden @ self.weight
"""),
    Mistake(
        name="init-ignores-name", exercise="init_table",
        misconception="Every init is a standard normal: but GPT-2 draws with std 0.02 and xavier uniformly "
                      "within ±sqrt(6 / (rows + d)).",
        says="std",
        replacement="""
rng, init = new_rng(rng), one_of("init", init, INITS)
draw = np.float64 if dtype == np.float64 else np.float32
return rng.standard_normal(shape, dtype=draw).astype(dtype, copy=False)
"""),
    Mistake(
        name="sin-cos-swapped", exercise="create_sinusoidal_embeddings",
        misconception="Which of sin and cos takes the even columns does not matter: but the paper (and every "
                      "pretrained model) puts sin at 2i and cos at 2i+1.",
        says="sin and cos swapped",
        replacement="""
max_seq_len, embedding_dim = positive_int("max_seq_len", max_seq_len), positive_int("embedding_dim", embedding_dim)
positions = np.arange(max_seq_len, dtype=np.float64)[:, None]
frequencies = float(base) ** (-np.arange(0, embedding_dim, 2) / embedding_dim)
angles = positions * frequencies
table = np.empty((max_seq_len, embedding_dim))
table[:, 0::2] = np.cos(angles)
table[:, 1::2] = np.sin(angles[:, :embedding_dim // 2])
return Tensor(table, dtype=float_dtype(dtype, "a position table"))
"""),
    Mistake(
        name="sin-cos-halves", exercise="create_sinusoidal_embeddings",
        misconception="Sines then cosines, [sin | cos] in two halves, is the same table: but the paper "
                      "interleaves them, sin at even columns and cos at odd ones.",
        says="interleaved",
        replacement="""
max_seq_len, embedding_dim = positive_int("max_seq_len", max_seq_len), positive_int("embedding_dim", embedding_dim)
positions = np.arange(max_seq_len, dtype=np.float64)[:, None]
frequencies = float(base) ** (-np.arange(0, embedding_dim, 2) / embedding_dim)
angles = positions * frequencies
table = np.concatenate([np.sin(angles), np.cos(angles[:, :embedding_dim // 2])], axis=1)
return Tensor(table, dtype=float_dtype(dtype, "a position table"))
"""),
    Mistake(
        name="sinusoidal-ignores-start", exercise="SinusoidalPositionalEncoding.forward",
        misconception="Positions always start at 0: but generating with a cache continues at `start`, so token "
                      "t is at position start + t.",
        says="start",
        replacement="""
x = x if isinstance(x, Tensor) else Tensor(x)
stop = position_window(x.shape, start, self.max_seq_len, self.embedding_dim)
return x + Tensor(self.table[:stop - start])
"""),
    Mistake(
        name="sinusoidal-table-persistent", exercise="SinusoidalPositionalEncoding.__init__",
        misconception="Every buffer belongs in the checkpoint: but a table computed from the sizes is not "
                      "state, and saving it makes checkpoints larger and incompatible with PyTorch's.",
        says="persistent",
        replacement="""
self.max_seq_len = positive_int("max_seq_len", max_seq_len)
self.embedding_dim = positive_int("embedding_dim", embedding_dim)
self.base = base
table = create_sinusoidal_embeddings(self.max_seq_len, self.embedding_dim, base, dtype)
self.register_buffer("table", table.data)
"""),
    Mistake(
        name="learned-positions-transposed", exercise="LearnedPositionalEncoding.__init__",
        misconception="The position table is (embedding_dim, max_seq_len): but like the token table it has one "
                      "row per position, (max_seq_len, embedding_dim).",
        says="(max_seq_len, embedding_dim)",
        replacement="""
self.max_seq_len = positive_int("max_seq_len", max_seq_len)
self.embedding_dim = positive_int("embedding_dim", embedding_dim)
table = init_table((self.embedding_dim, self.max_seq_len), init, rng, dtype)
self.position_embeddings = Parameter(table, dtype=table.dtype)
"""),
    Mistake(
        name="learned-positions-detached", exercise="LearnedPositionalEncoding.forward",
        misconception="Slicing `.data` is the same rows: but a NumPy slice is outside the graph, so the position "
                      "table never learns.",
        says="no gradient",
        replacement="""
x = x if isinstance(x, Tensor) else Tensor(x)
stop = position_window(x.shape, start, self.max_seq_len, self.embedding_dim)
return x + Tensor(self.position_embeddings.data[start:stop])
"""),
    Mistake(
        name="layer-sinusoidal-ignored", exercise="EmbeddingLayer.__init__",
        misconception="Every position scheme is a learned table: but position='sinusoidal' asks for the fixed "
                      "table, with no parameters.",
        says="sinusoidal",
        replacement="""
self.max_seq_len = positive_int("max_seq_len", max_seq_len)
self.scale_embeddings = flag("scale_embeddings", scale_embeddings)
token_seed, position_seed, dropout_seed = child_seeds(seed, 3)
self.token_embedding = Embedding(vocab_size, embedding_dim, padding_idx=padding_idx, init=init, dtype=dtype,
                                 seed=token_seed)
self.vocab_size, self.embedding_dim = self.token_embedding.vocab_size, self.token_embedding.embedding_dim
if position in ("learned", "sinusoidal"):
    position = LearnedPositionalEncoding(self.max_seq_len, self.embedding_dim, init, dtype, position_seed)
self.position_encoding = position
self.dropout = Dropout(dropout, seed=dropout_seed)
"""),
    Mistake(
        name="positions-off-by-one", exercise="EmbeddingLayer.forward",
        misconception="Positions count from 1, like token numbers in a sentence: but the first token is at "
                      "position 0 (row `start`), so every token gets its neighbour's position.",
        says="off by one",
        replacement="""
check_sequence(tokens, start, self.position_encoding, self.embedding_dim)
x = self.token_embedding(tokens)
if self.scale_embeddings:
    x = x * math.sqrt(self.embedding_dim)
if self.position_encoding is not None:
    x = self.position_encoding(x, start + 1)
return self.dropout(x)
"""),
    Mistake(
        name="sqrt-d-on-positions", exercise="EmbeddingLayer.forward",
        misconception="√d scales the input vector, so it may be applied after the positions are added: but it "
                      "scales the token vectors only, so they are not drowned by the positions.",
        says="√d",
        replacement="""
check_sequence(tokens, start, self.position_encoding, self.embedding_dim)
x = self.token_embedding(tokens)
if self.position_encoding is not None:
    x = self.position_encoding(x, start)
if self.scale_embeddings:
    x = x * math.sqrt(self.embedding_dim)
return self.dropout(x)
"""),
    Mistake(
        name="sqrt-d-never", exercise="EmbeddingLayer.forward",
        misconception="scale_embeddings is a detail that can be left out: but the original Transformer "
                      "multiplies the token vectors by √d, and a model trained so expects it.",
        says="√d",
        replacement="""
check_sequence(tokens, start, self.position_encoding, self.embedding_dim)
x = self.token_embedding(tokens)
if self.position_encoding is not None:
    x = self.position_encoding(x, start)
return self.dropout(x)
"""),
    Mistake(
        name="dropout-in-eval", exercise="EmbeddingLayer.forward",
        misconception="Dropout is a random mask applied in forward: but it is for training only; in eval mode "
                      "the same input must give the same output, untouched.",
        says="eval",
        replacement="""
check_sequence(tokens, start, self.position_encoding, self.embedding_dim)
x = self.token_embedding(tokens)
if self.scale_embeddings:
    x = x * math.sqrt(self.embedding_dim)
if self.position_encoding is not None:
    x = self.position_encoding(x, start)
if self.dropout.p > 0:
    keep = self.dropout.rng.random(x.shape) >= self.dropout.p
    x = x * Tensor(keep.astype(x.dtype) / (1 - self.dropout.p), dtype=x.dtype)
return x
"""),
    Mistake(
        name="factorized-savings", exercise="FactorizedEmbedding.__init__",
        misconception="The factorised table saves V·d − V·r parameters: but the projection (r, d) costs r·d "
                      "more, so it saves V·d − (V·r + r·d).",
        says="parameter_savings",
        replacement="""
self.rank = positive_int("rank", rank)
embedding_seed, projection_seed = child_seeds(seed, 2)
self.embedding = Embedding(vocab_size, self.rank, init=init, dtype=dtype, seed=embedding_seed)
self.vocab_size = self.embedding.vocab_size
self.embedding_dim = positive_int("embedding_dim", embedding_dim)
table_dtype = self.embedding.weight.dtype
projection = init_table((self.rank, self.embedding_dim), init, projection_seed, table_dtype)
self.projection = Parameter(projection, dtype=table_dtype)
self.parameter_savings = self.vocab_size * self.embedding_dim - self.vocab_size * self.rank
"""),
    Mistake(
        name="bag-mean-not-divided", exercise="EmbeddingBagBackward.backward",
        misconception="The gradient of a bag's mean reaches each member whole, as for a sum: but each of n "
                      "members contributed 1/n of the mean, so each gets 1/n of the gradient.",
        says="mean",
        replacement="""
if mode == "max":
    share = np.zeros((len(ids), dim), dtype=grad.dtype)
    share[winners, np.arange(dim)] = grad[present]
else:
    share = np.take(grad, bags, axis=0)
    if scale is not None:
        share = share * scale[:, None]
weight_grad = table_grad(ids, share, (vocab_size, dim), dtype, sparse)
if scale is None:
    return (weight_grad,)
grad_per_sample = np.zeros(n, dtype=grad.dtype)
grad_per_sample[positions] = np.einsum("kd,kd->k", np.take(weight, ids, axis=0), np.take(grad, bags, axis=0))
return weight_grad, grad_per_sample
"""),
    Mistake(
        name="quantize-global-scale", exercise="quantize_rows",
        misconception="One scale for the whole table is enough: but rows have very different ranges, and a "
                      "shared scale leaves small rows with a handful of codes (per-row scales keep each row exact "
                      "to half a step).",
        says="per row",
        replacement="""
low_all, high_all = float(table.min()), float(table.max())
for start in range(0, vocab_size, _ROWS_PER_BLOCK):
    block = table[start:start + _ROWS_PER_BLOCK].astype(np.float64)
    scale = np.full(len(block), (high_all - low_all) / levels or 1.0, dtype=np.float32)
    offset = np.full(len(block), low_all, dtype=np.float32)
    steps = (block - offset[:, None].astype(np.float64)) / scale[:, None].astype(np.float64)
    block_codes = np.clip(np.rint(steps), 0, levels).astype(np.uint8)
    codes[start:start + len(block)] = block_codes if bits == 8 else pack_int4(block_codes)
    scales[start:start + len(block)], offsets[start:start + len(block)] = scale, offset
"""),
]
