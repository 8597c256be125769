"""Hostile inputs to the public API of modules 01-11, as one table.

Each case builds fresh objects, calls the API with one mistake, and checks three things:
the documented exception type, a message naming the offending value and the allowed range (a regex),
and no partial state change: every array, tensor, gradient, optimiser buffer, random-generator state and
attribute reachable from the objects involved is byte-identical before and after the failing call.

Where an empty input is valid, `test_empty_inputs_are_valid_and_give_empty_results` checks the result
instead (and a far RoPE position, which is valid too, has its own test); how mixed float dtypes behave is
documented by the `test_mixed_float_dtypes_*` tests.
"""
from collections import Counter, namedtuple

import numpy as np
import pytest

from tinytorch.core.activations import GELU
from tinytorch.core.autograd import RowSparseGrad, gradcheck, segment_sum
from tinytorch.core.layers import Dropout, Linear, Parameter, Sequential
from tinytorch.core.losses import CrossEntropyLoss, MSELoss, cross_entropy, mse_loss
from tinytorch.core.optimizers import SGD, Adagrad, Adam, AdamW, SparseAdam
from tinytorch.core.tensor import Tensor, concatenate, stack
from tinytorch.text.embeddings import (
    Embedding,
    EmbeddingLayer,
    FactorizedEmbedding,
    PositionalEncoding,
    RotaryEmbedding,
    create_sinusoidal_embeddings,
    embedding,
    init_table,
)
from tinytorch.text.memory import embedding_memory
from tinytorch.text.tokenization import BPETokenizer, CharTokenizer, WordTokenizer

F16, F32, F64 = np.float16, np.float32, np.float64
NAN = float("nan")


# ------------------------------------------------------------------------------------------------ state snapshots

def state_of(obj, _seen=None):
    """A comparable picture of everything reachable from `obj`: arrays as dtype, shape and bytes, random
    generators as their state, objects through their attributes. Equal pictures mean nothing changed."""
    seen = set() if _seen is None else _seen
    if isinstance(obj, np.ndarray):
        return ("array", obj.dtype.str, obj.shape, obj.tobytes())
    if isinstance(obj, np.random.Generator):
        return ("rng", repr(obj.bit_generator.state))
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes, np.generic, type)):
        return ("value", repr(obj))                     # repr: NaN equals NaN
    if id(obj) in seen:
        return ("seen",)
    seen.add(id(obj))
    if isinstance(obj, dict):
        return ("dict", [(repr(key), state_of(value, seen)) for key, value in obj.items()])
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [state_of(item, seen) for item in obj])
    if isinstance(obj, (set, frozenset)):
        return ("set", sorted(map(repr, obj)))
    if hasattr(obj, "__dict__"):
        return (type(obj).__name__, [(name, state_of(value, seen)) for name, value in vars(obj).items()])
    return ("opaque", type(obj).__name__)


# ------------------------------------------------------------------------------------------------ case builders
# A case's `build()` makes fresh objects and returns (call, watched): `call()` must raise; the objects in
# `watched` must be unchanged afterwards.

Case = namedtuple("Case", "id build error match")


def on(make, action):
    "Build: make a fresh object, then `action(obj)` is the failing call; the object is watched."
    def build():
        obj = make()
        return (lambda: action(obj)), [obj]
    return build


def constructing(factory, *watched_makers):
    "Build: a constructor (or pure function) call; `watched_makers` make inputs it receives, which are watched."
    def build():
        watched = [make() for make in watched_makers]
        return (lambda: factory(*watched)), watched
    return build


def emb(**options):
    return lambda: Embedding(10, 4, seed=0, **options)


def layer(**options):
    "An EmbeddingLayer in training mode with dropout, so a failing call must not advance the dropout generator."
    options = {"max_seq_len": 6, "dropout": 0.5, "seed": 0, **options}
    return lambda: EmbeddingLayer(10, 4, **options).train()


def table():
    return Tensor(np.arange(8.0).reshape(4, 2) + 1)


def logits():
    return Tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)


def one_param():
    return [Parameter(np.ones(3))]


def stepped(optimizer, bad_grad, sparse_first=False):
    """Build: two parameters, one good step (so the optimiser has state), then a good gradient for the first
    and `bad_grad(second)` for the second; `step()` must refuse before updating either."""
    def build():
        first, second = Parameter(np.linspace(1, 2, 6).reshape(3, 2)), Parameter(np.linspace(-1, 1, 10).reshape(5, 2))
        opt = optimizer([first, second])
        first.grad = RowSparseGrad([0, 2], np.ones((2, 2), np.float32), (3, 2)) if sparse_first else np.ones((3, 2))
        second.grad = RowSparseGrad([1], np.ones((1, 2), np.float32), (5, 2)) if sparse_first else np.ones((5, 2))
        opt.step()
        first.grad = RowSparseGrad([1], np.ones((1, 2), np.float32), (3, 2)) if sparse_first else np.full((3, 2), 0.5)
        second.grad = bad_grad(second)
        return opt.step, [opt]
    return build


def after_setting_lr(build_stepped, lr):
    "Build: as `build_stepped`, whose gradients are all fine, but with `opt.lr = lr` set after the first step."
    def build():
        step, watched = build_stepped()
        watched[0].lr = lr
        return step, watched
    return build


def backward_with(gradient):
    "Build: y = 2x after one good backward (x.grad set); y.backward(gradient) must refuse and leave x.grad."
    def build():
        x = Tensor(np.ones(2), requires_grad=True)
        (x * 2).sum().backward()
        y = x * 2
        return (lambda: y.backward(gradient) if gradient is not None else y.backward()), [x]
    return build


def sparse_rows(indices, shape=(5, 2)):
    return lambda p: RowSparseGrad(indices, np.ones((len(indices), shape[1]), np.float32), shape)


char_tokenizer = lambda: CharTokenizer.from_text("abc")      # noqa: E731  vocabulary: <unk>, a, b, c
RANGE10 = r"is out of range \[0, 10\) for a vocabulary of 10"


# ------------------------------------------------------------------------------------------------ the table

CASES = [
    # ---------------------------------------------------------------- ids: out of range, negative, float, bool, NaN
    Case("ids/embedding-id-equals-vocab", on(emb(), lambda e: e([[1, 10]])),
         IndexError, r"token id 10 at position \(0, 1\) " + RANGE10),
    Case("ids/embedding-negative", on(emb(), lambda e: e([3, -1])),
         IndexError, r"token id -1 at position \(1,\) " + RANGE10),
    Case("ids/embedding-float", on(emb(), lambda e: e([1.0, 2.0])),
         TypeError, r"token ids must be integers; got dtype float64"),
    Case("ids/embedding-bool", on(emb(), lambda e: e([True, False])),
         TypeError, r"token ids must be integers; got dtype bool \(a boolean mask is not a list of ids\)"),
    Case("ids/embedding-nan", on(emb(), lambda e: e(np.array([1, NAN]))),
         TypeError, r"token ids must be integers; got dtype float64"),
    Case("ids/embedding-string", on(emb(), lambda e: e(["a"])),
         TypeError, r"token ids must be integers; got dtype <U1"),
    Case("ids/embedding-huge-int64", on(emb(), lambda e: e(np.array([2**62]))),
         IndexError, r"token id 4611686018427387904 at position \(0,\) " + RANGE10),
    Case("ids/embedding-huge-uint64", on(emb(), lambda e: e(np.array([0, 2**64 - 1], np.uint64))),
         IndexError, r"token id 18446744073709551615 at position \(1,\) " + RANGE10),
    Case("ids/embedding-int32-tensor", on(emb(), lambda e: e(Tensor(np.array([[0, 12]], np.int32)))),
         IndexError, r"token id 12 at position \(0, 1\) " + RANGE10),
    Case("ids/embedding-max-norm-table-untouched", on(emb(max_norm=0.1), lambda e: e([0, 1, 10])),
         IndexError, r"token id 10 at position \(2,\) " + RANGE10),
    Case("ids/embedding-sparse", on(emb(sparse=True, padding_idx=0), lambda e: e([[9, 10]])),
         IndexError, r"token id 10 at position \(0, 1\) " + RANGE10),
    Case("ids/functional-out-of-range", on(table, lambda w: embedding([0, 4], w)),
         IndexError, r"token id 4 at position \(1,\) is out of range \[0, 4\) for a vocabulary of 4"),
    Case("ids/functional-negative", on(table, lambda w: embedding([[-2]], w)),
         IndexError, r"token id -2 at position \(0, 0\) is out of range \[0, 4\)"),
    Case("ids/functional-float", on(table, lambda w: embedding(np.array([0.5]), w)),
         TypeError, r"token ids must be integers; got dtype float64"),
    Case("ids/functional-max-norm-table-untouched", on(table, lambda w: embedding([0, 1, 4], w, max_norm=0.5)),
         IndexError, r"token id 4 at position \(2,\) is out of range \[0, 4\)"),
    Case("ids/layer-id-equals-vocab", on(layer(), lambda m: m([[1, 10]])),
         IndexError, r"token id 10 at position \(0, 1\) " + RANGE10),
    Case("ids/layer-negative", on(layer(), lambda m: m([[-3, 1]])),
         IndexError, r"token id -3 at position \(0, 0\) " + RANGE10),
    Case("ids/layer-float", on(layer(), lambda m: m(np.ones((2, 3)))),
         TypeError, r"token ids must be integers; got dtype float64"),
    Case("ids/layer-bool", on(layer(), lambda m: m(np.ones((2, 3), bool))),
         TypeError, r"got dtype bool"),
    Case("ids/layer-sinusoidal-huge", on(layer(pos_encoding="sinusoidal"), lambda m: m(np.array([[2**40]]))),
         IndexError, r"token id 1099511627776 at position \(0, 0\) " + RANGE10),
    Case("ids/factorized-out-of-range", on(lambda: FactorizedEmbedding(10, 8, rank=2, seed=0), lambda f: f([3, 10])),
         IndexError, r"token id 10 at position \(1,\) " + RANGE10),
    Case("ids/cross-entropy-target-equals-classes", on(logits, lambda z: cross_entropy(z, [0, 3])),
         IndexError, r"target 3 is out of range for 3 classes: expected 0 <= target < 3"),
    Case("ids/cross-entropy-negative-target", on(logits, lambda z: cross_entropy(z, np.array([-1, 0]))),
         IndexError, r"target -1 is out of range for 3 classes: expected 0 <= target < 3"),
    Case("ids/cross-entropy-float-targets", on(logits, lambda z: cross_entropy(z, [0.0, 1.0])),
         TypeError, r"targets must be integer class indices; got dtype float64"),
    Case("ids/cross-entropy-bool-targets", on(logits, lambda z: cross_entropy(z, np.array([True, False]))),
         TypeError, r"targets must be integer class indices; got dtype bool"),
    Case("ids/cross-entropy-nan-target", on(logits, lambda z: cross_entropy(z, np.array([NAN, 0.0]))),
         TypeError, r"targets must be integer class indices; got dtype float64"),
    Case("ids/cross-entropy-huge-target", on(logits, lambda z: cross_entropy(z, np.array([2**62, 0]))),
         IndexError, r"target 4611686018427387904 is out of range for 3 classes"),
    Case("ids/cross-entropy-besides-ignore-index", on(logits, lambda z: cross_entropy(z, [-100, 3], ignore_index=-100)),
         IndexError, r"target 3 is out of range for 3 classes: expected 0 <= target < 3 "
                     r"or target == ignore_index \(-100\)"),
    Case("ids/cross-entropy-loss-layer", on(logits, lambda z: CrossEntropyLoss()(z, [5, 0])),
         IndexError, r"target 5 is out of range for 3 classes"),
    Case("ids/char-decode-out-of-range", on(char_tokenizer, lambda t: t.decode([1, 4])),
         IndexError, r"token id 4 is out of range for a vocabulary of 4 tokens \(valid ids are 0..3\)"),
    Case("ids/char-decode-negative", on(char_tokenizer, lambda t: t.decode([-1])),
         IndexError, r"token id -1 is out of range for a vocabulary of 4 tokens \(valid ids are 0..3\)"),
    Case("ids/char-decode-huge", on(char_tokenizer, lambda t: t.decode([2**70])),
         IndexError, r"token id 1180591620717411303424 is out of range .* \(valid ids are 0..3\)"),
    Case("ids/word-decode-out-of-range", on(lambda: WordTokenizer(["cat", "dog"]), lambda t: t.decode([2, 4])),
         IndexError, r"token id 4 is out of range for a vocabulary of 4 tokens \(valid ids are 0..3\)"),
    Case("ids/bpe-decode-unlearned-merge", on(BPETokenizer, lambda t: t.decode([104, 256])),
         IndexError, r"token id 256 is out of range for a vocabulary of 256 tokens \(valid ids are 0..255\)"),
    Case("ids/char-decode-bool", on(char_tokenizer, lambda t: t.decode([True, False])),
         TypeError, r"token ids must be integers; got True of type bool"),
    Case("ids/char-decode-float", on(char_tokenizer, lambda t: t.decode([1.5])),
         TypeError, r"token ids must be integers; got 1.5 of type float"),
    Case("ids/char-decode-nan", on(char_tokenizer, lambda t: t.decode([NAN])),
         TypeError, r"token ids must be integers; got nan"),
    Case("ids/char-decode-float-array", on(char_tokenizer, lambda t: t.decode(np.array([1.0, 2.0]))),
         TypeError, r"token ids must be integers; got .*1\.0.* of type float64"),
    Case("ids/word-decode-numpy-bool", on(lambda: WordTokenizer(["cat", "dog"]), lambda t: t.decode([np.True_])),
         TypeError, r"token ids must be integers; got .*True.* of type bool"),
    Case("ids/embedding-python-int-beyond-int64", on(emb(), lambda e: e([1, 2**70])),
         IndexError, r"token id 1180591620717411303424 at position \(1,\) " + RANGE10),
    Case("ids/functional-python-int-beyond-int64", on(table, lambda w: embedding([[0], [-2**70]], w)),
         IndexError, r"token id -1180591620717411303424 at position \(1, 0\) is out of range \[0, 4\)"),

    # ---------------------------------------------------------------- shapes: wrong ranks and shapes
    Case("shapes/add-not-broadcastable", on(lambda: Tensor(np.ones((2, 3)), requires_grad=True),
                                            lambda x: x + Tensor(np.ones(4))),
         ValueError, r"cannot add tensors of shapes \(2, 3\) and \(4,\): they do not broadcast"),
    Case("shapes/multiply-not-broadcastable", on(lambda: Tensor(np.ones((2, 3))), lambda x: np.ones((3, 2)) * x),
         ValueError, r"cannot multiply tensors of shapes \(3, 2\) and \(2, 3\)"),
    Case("shapes/matmul-inner-dimensions", on(lambda: Tensor(np.ones((2, 3))), lambda x: x @ Tensor(np.ones((4, 5)))),
         ValueError, r"cannot matmul shapes \(2, 3\) and \(4, 5\): inner dimensions 3 and 4 differ"),
    Case("shapes/matmul-0d", on(lambda: Tensor(np.ones(3)), lambda x: x @ Tensor(2.0)),
         ValueError, r"matmul needs at least 1-D tensors; got shapes \(3,\) and \(\)"),
    Case("shapes/matmul-batch", on(lambda: Tensor(np.ones((2, 3, 4))), lambda x: x @ Tensor(np.ones((5, 4, 2)))),
         ValueError, r"batch dimensions \(2,\) and \(5,\) do not broadcast"),
    Case("shapes/permute-repeated-axis", on(lambda: Tensor(np.ones((2, 3))), lambda x: x.permute(0, 0)),
         ValueError, r"permute of a 2-D tensor needs each axis 0..1 \(or -2..-1\) exactly once; got \(0, 0\)"),
    Case("shapes/backward-gradient-shape", backward_with(np.ones(3)),
         ValueError, r"gradient has shape \(3,\) but the tensor has shape \(2,\)"),
    Case("shapes/backward-non-scalar-without-gradient", backward_with(None),
         ValueError, r"one-element tensor .* has shape \(2,\)"),
    Case("shapes/item-of-many", on(lambda: Tensor(np.ones(3)), lambda x: x.item()),
         ValueError, r"item\(\) needs a tensor with one element; this one has shape \(3,\)"),
    Case("shapes/stack-different-shapes", constructing(lambda: stack([Tensor(np.ones(2)), Tensor(np.ones(3))])),
         ValueError, r"stack needs tensors of one shape; got shapes \[\(2,\), \(3,\)\]"),
    Case("shapes/concatenate-nothing", constructing(lambda: concatenate([])),
         ValueError, r"concatenate needs at least one tensor"),
    Case("shapes/concatenate-axis-out-of-range",
         constructing(lambda: concatenate([Tensor(np.ones((2, 3))), Tensor(np.ones((2, 3)))], axis=5)),
         IndexError, r"axis 5 is out of range for a 2-D tensor \(valid axes are -2..1\)"),
    Case("shapes/transpose-axis-out-of-range", on(lambda: Tensor(np.ones((2, 3))), lambda x: x.transpose(0, 5)),
         IndexError, r"axis 5 is out of range for a 2-D tensor \(valid axes are -2..1\)"),
    Case("shapes/transpose-of-1d", on(lambda: Tensor(np.ones(3), requires_grad=True), lambda x: x.transpose()),
         IndexError, r"axis -2 is out of range for a 1-D tensor \(valid axes are -1..0\)"),
    Case("shapes/transpose-float-axis", on(lambda: Tensor(np.ones((2, 3))), lambda x: x.transpose(0, 1.0)),
         TypeError, r"axis must be an int; got 1.0"),
    Case("shapes/max-of-empty", on(lambda: Tensor(np.zeros((0, 3)), requires_grad=True), lambda x: x.max()),
         ValueError, r"max over axis=None of a tensor of shape \(0, 3\) is undefined: "
                     r"every reduced axis needs at least one element"),
    Case("shapes/max-over-empty-axis", on(lambda: Tensor(np.zeros((2, 0))), lambda x: x.max(axis=-1)),
         ValueError, r"max over axis=-1 of a tensor of shape \(2, 0\)"),
    Case("shapes/strings-as-tensor", constructing(lambda: Tensor(["a", "b"])),
         TypeError, r"Tensor data must be numbers or bools; got dtype <U1"),
    Case("shapes/integer-tensor-requires-grad", constructing(lambda: Tensor([1, 2], requires_grad=True)),
         TypeError, r"only floating-point tensors can require gradients; this one is int64"),
    Case("shapes/backward-without-grad", on(lambda: Tensor(np.ones(1)), lambda x: (x * 2).backward()),
         RuntimeError, r"backward\(\) needs a tensor that requires grad"),
    Case("shapes/segment-sum-rows", constructing(lambda: segment_sum([0, 1, 2], np.ones((2, 3)))),
         ValueError, r"segment_sum needs one row of values per id: 3 ids, values of shape \(2, 3\)"),
    Case("shapes/row-sparse-values", constructing(lambda: RowSparseGrad([0, 1], np.ones((3, 2)), (5, 2))),
         ValueError, r"RowSparseGrad values have shape \(3, 2\), expected \(2, 2\)"),
    Case("shapes/row-sparse-row-out-of-range", constructing(lambda: RowSparseGrad([1, 7], np.ones((2, 2)), (5, 2))),
         ValueError, r"RowSparseGrad indices must be sorted, unique and in \[0, 5\); got \[1, 7\]"),
    Case("shapes/row-sparse-negative-row", constructing(lambda: RowSparseGrad([-1], np.ones((1, 2)), (5, 2))),
         ValueError, r"RowSparseGrad indices must be sorted, unique and in \[0, 5\); got \[-1\]"),
    Case("shapes/gradcheck-float32", on(lambda: Tensor(np.ones(2), requires_grad=True),
                                       lambda x: gradcheck(lambda a: a * 2, [x])),
         TypeError, r"gradcheck needs float64 inputs .* input 0 is float32"),
    Case("shapes/linear-in-features", on(lambda: Linear(3, 2, seed=0), lambda m: m(np.ones((4, 5), F32))),
         ValueError, r"cannot matmul shapes \(4, 5\) and \(3, 2\): inner dimensions 5 and 3 differ"),
    Case("shapes/linear-integer-input", on(lambda: Linear(3, 2, seed=0), lambda m: m(np.ones((4, 3), np.int64))),
         TypeError, r"Linear needs floating-point input; got dtype int64"),
    Case("shapes/dropout-integer-input", on(lambda: Dropout(0.5, seed=0), lambda d: d(np.ones(4, np.int64))),
         TypeError, r"Dropout needs floating-point input; got dtype int64"),
    Case("shapes/sequential-index", on(lambda: Sequential(Linear(2, 2, seed=0)), lambda s: s[3]),
         IndexError, r"Sequential index 3 out of range for 1 layers"),
    Case("shapes/sequential-not-callable", constructing(lambda: Sequential(Linear(2, 2, seed=0), 3)),
         TypeError, r"Sequential layer 1 must be callable .* got int"),
    Case("shapes/load-state-dict-wrong-shape", on(lambda: Linear(2, 3, seed=0),
                                                 lambda m: m.load_state_dict({"weight": np.zeros((2, 3)),
                                                                              "bias": np.zeros(4)})),
         ValueError, r"state_dict\['bias'\] has shape \(4,\) but the parameter 'bias' has shape \(3,\)"),
    Case("shapes/load-state-dict-missing-key", on(lambda: Linear(2, 3, seed=0),
                                                 lambda m: m.load_state_dict({"weight": np.zeros((2, 3))})),
         KeyError, r"missing key\(s\) \['bias'\]; the module expects \['weight', 'bias'\]"),
    Case("shapes/load-state-dict-none", on(lambda: Linear(2, 3, seed=0), lambda m: m.load_state_dict(None)),
         TypeError, r"state_dict must be a mapping of parameter name -> array, such as module.state_dict\(\); "
                    r"got NoneType"),
    Case("shapes/load-state-dict-list", on(lambda: Linear(2, 3, seed=0),
                                          lambda m: m.load_state_dict([np.zeros((2, 3)), np.zeros(3)])),
         TypeError, r"state_dict must be a mapping .* got list"),
    Case("shapes/load-state-dict-strings", on(lambda: Linear(2, 3, seed=0),
                                             lambda m: m.load_state_dict({"weight": np.zeros((2, 3)),
                                                                          "bias": np.array(["a", "b", "c"])})),
         TypeError, r"state_dict\['bias'\] must hold numbers; got dtype <U1"),
    Case("shapes/cross-entropy-target-shape", on(logits, lambda z: cross_entropy(z, [0, 1, 2])),
         ValueError, r"targets of shape \(3,\) do not match logits of shape \(2, 3\): "
                     r"expected targets of shape \(2,\)"),
    Case("shapes/cross-entropy-0d-logits", constructing(lambda: cross_entropy(Tensor(1.0), np.array(0))),
         ValueError, r"logits must be at least 1-D, of shape \(\*, C\) .* got a 0-D tensor"),
    Case("shapes/cross-entropy-integer-logits", constructing(lambda: cross_entropy(np.zeros((2, 3), np.int64), [0, 1])),
         TypeError, r"logits must be floating point; got dtype int64"),
    Case("shapes/mse-shapes", on(lambda: Tensor(np.ones((2, 3)), requires_grad=True),
                                 lambda x: mse_loss(x, np.ones((3, 2)))),
         ValueError, r"mse_loss needs pred and target of the same shape; got pred \(2, 3\) and target \(3, 2\)"),
    Case("shapes/embedding-table-1d", constructing(lambda: embedding([0], np.ones(4))),
         ValueError, r"the embedding table must be 2-D \(vocab_size, embedding_dim\); got shape \(4,\)"),
    Case("shapes/from-pretrained-1d", constructing(lambda w: Embedding.from_pretrained(w), lambda: np.ones(4)),
         ValueError, r"pretrained weights must be 2-D .* got shape \(4,\)"),
    Case("shapes/attend-hidden-size", on(emb(), lambda e: e.attend(np.ones((2, 5), F32))),
         ValueError, r"attend needs hidden states of shape \(\*, 4\); got \(2, 5\)"),
    Case("shapes/embedding-ragged-ids", on(emb(), lambda e: e([[1, 2], [3]])),
         ValueError, r"token ids must form a rectangular array \(nested lists of equal lengths\); "
                     r"got \[\[1, 2\], \[3\]\]"),
    Case("shapes/layer-ragged-ids", on(layer(), lambda m: m([[1, 2, 3], [4]])),
         ValueError, r"token ids must form a rectangular array .* got \[\[1, 2, 3\], \[4\]\]"),
    Case("shapes/layer-single-id", on(layer(), lambda m: m(3)),
         ValueError, r"EmbeddingLayer needs token ids of shape \(seq,\) or \(batch, seq\); got a single id"),
    Case("shapes/positional-encoding-width", on(lambda: PositionalEncoding(8, 4, seed=0),
                                                lambda p: p(np.ones((2, 3, 5)))),
         ValueError, r"expected vectors of shape \(seq, 4\) or \(batch, seq, 4\); got \(2, 3, 5\)"),
    Case("shapes/positional-encoding-1d", on(lambda: PositionalEncoding(8, 4, seed=0), lambda p: p(np.ones(4))),
         ValueError, r"expected vectors of shape \(seq, 4\) or \(batch, seq, 4\); got \(4,\)"),
    Case("shapes/rope-width", on(lambda: RotaryEmbedding(4, max_seq_len=8), lambda r: r(np.ones((2, 6)))),
         ValueError, r"RotaryEmbedding\(dim=4\) needs x of shape \(\*, seq, 4\); got \(2, 6\)"),
    Case("shapes/rope-no-sequence-axis", on(lambda: RotaryEmbedding(4, max_seq_len=8), lambda r: r(np.ones(4))),
         ValueError, r"x of shape \(4,\) has no sequence axis"),
    Case("shapes/rope-positions-shape", on(lambda: RotaryEmbedding(4, max_seq_len=8),
                                           lambda r: r(np.ones((2, 5, 4)), positions=[0, 1, 100])),
         ValueError, r"positions of shape \(3,\) do not broadcast to x.shape\[:-1\] = \(2, 5\)"),
    Case("shapes/rope-float-positions", on(lambda: RotaryEmbedding(4, max_seq_len=8),
                                           lambda r: r(np.ones((3, 4)), positions=[100.0, 1.0, 2.0])),
         TypeError, r"positions must be integers; got dtype float64"),
    Case("shapes/rope-bool-positions", on(lambda: RotaryEmbedding(4, max_seq_len=8),
                                          lambda r: r(np.ones((2, 4)), positions=[True, False])),
         TypeError, r"positions must be integers; got dtype bool"),

    # ---------------------------------------------------------------- sequence longer than the position table
    Case("sequence/positional-encoding", on(lambda: PositionalEncoding(6, 4, seed=0), lambda p: p(np.ones((2, 7, 4)))),
         ValueError, r"sequence length 7 exceeds max_seq_len=6: the position table has rows 0..5 only"),
    Case("sequence/layer-learned", on(layer(), lambda m: m(np.zeros((2, 7), np.int64))),
         ValueError, r"sequence length 7 exceeds max_seq_len=6: the position table has rows 0..5 only"),
    Case("sequence/layer-learned-1d", on(layer(), lambda m: m(list(range(7)))),
         ValueError, r"sequence length 7 exceeds max_seq_len=6"),
    Case("sequence/layer-sinusoidal", on(layer(pos_encoding="sinusoidal"), lambda m: m(np.zeros((1, 9), np.int64))),
         ValueError, r"sequence length 9 exceeds max_seq_len=6: the position table has rows 0..5 only"),
    Case("sequence/layer-long-and-bad-ids", on(layer(), lambda m: m(np.full((1, 7), 99))),
         ValueError, r"sequence length 7 exceeds max_seq_len=6"),

    # ---------------------------------------------------------------- odd dims for pairwise (rotary) encodings
    Case("odd-dims/rope-5", constructing(lambda: RotaryEmbedding(5)),
         ValueError, r"RotaryEmbedding rotates pairs of numbers, so dim must be even; got dim=5"),
    Case("odd-dims/rope-1", constructing(lambda: RotaryEmbedding(1)),
         ValueError, r"dim must be even; got dim=1"),
    Case("odd-dims/rope-7-half-split", constructing(lambda: RotaryEmbedding(7, interleaved=False)),
         ValueError, r"dim must be even; got dim=7"),

    # ---------------------------------------------------------------- zero, negative and non-integer sizes
    Case("sizes/embedding-vocab-0", constructing(lambda: Embedding(0, 4)),
         ValueError, r"vocab_size must be a positive int; got 0"),
    Case("sizes/embedding-vocab-negative", constructing(lambda: Embedding(-3, 4)),
         ValueError, r"vocab_size must be a positive int; got -3"),
    Case("sizes/embedding-dim-0", constructing(lambda: Embedding(10, 0)),
         ValueError, r"embedding_dim must be a positive int; got 0"),
    Case("sizes/embedding-dim-negative-alias", constructing(lambda: Embedding(num_embeddings=10, embed_dim=-1)),
         ValueError, r"embedding_dim must be a positive int; got -1"),
    Case("sizes/embedding-float-size", constructing(lambda: Embedding(2.5, 4)),
         TypeError, r"vocab_size must be a positive int; got 2.5"),
    Case("sizes/embedding-bool-size", constructing(lambda: Embedding(True, 4)),
         TypeError, r"vocab_size must be a positive int; got True"),
    Case("sizes/embedding-max-norm-0", constructing(lambda: Embedding(10, 4, max_norm=0.0)),
         ValueError, r"max_norm must be a positive number or None; got 0.0"),
    Case("sizes/embedding-max-norm-nan", constructing(lambda: Embedding(10, 4, max_norm=NAN)),
         ValueError, r"max_norm must be a positive number or None; got nan"),
    Case("sizes/embedding-max-norm-string", constructing(lambda: Embedding(10, 4, max_norm="1")),
         TypeError, r"max_norm must be a positive number or None; got '1'"),
    Case("sizes/functional-max-norm-negative", on(table, lambda w: embedding([0, 1], w, max_norm=-1.0)),
         ValueError, r"max_norm must be a positive number or None; got -1.0"),  # would negate the rows it reads
    Case("sizes/from-pretrained-empty", constructing(lambda w: Embedding.from_pretrained(w), lambda: np.ones((0, 3))),
         ValueError, r"vocab_size must be a positive int; got 0"),
    Case("sizes/linear-in-0", constructing(lambda: Linear(0, 3)),
         ValueError, r"in_features must be a positive int; got 0"),
    Case("sizes/linear-out-negative", constructing(lambda: Linear(3, -2)),
         ValueError, r"out_features must be a positive int; got -2"),
    Case("sizes/linear-float", constructing(lambda: Linear(2.0, 3)),
         TypeError, r"in_features must be a positive int; got 2.0"),
    Case("sizes/positional-max-seq-len-0", constructing(lambda: PositionalEncoding(0, 4)),
         ValueError, r"max_seq_len must be a positive int; got 0"),
    Case("sizes/positional-dim-negative", constructing(lambda: PositionalEncoding(8, -4)),
         ValueError, r"embedding_dim must be a positive int; got -4"),
    Case("sizes/factorized-rank-0", constructing(lambda: FactorizedEmbedding(10, 8, rank=0)),
         ValueError, r"rank must be a positive int; got 0"),
    Case("sizes/factorized-rank-negative", constructing(lambda: FactorizedEmbedding(10, 8, rank=-2)),
         ValueError, r"rank must be a positive int; got -2"),
    Case("sizes/factorized-rank-float", constructing(lambda: FactorizedEmbedding(10, 8, rank=1.5)),
         TypeError, r"rank must be a positive int; got 1.5"),
    Case("sizes/factorized-rank-missing", constructing(lambda: FactorizedEmbedding(10, 8)),
         TypeError, r"missing required argument rank"),
    Case("sizes/sinusoidal-length-0", constructing(lambda: create_sinusoidal_embeddings(0, 4)),
         ValueError, r"max_seq_len must be a positive int; got 0"),
    Case("sizes/sinusoidal-dim-negative", constructing(lambda: create_sinusoidal_embeddings(4, -2)),
         ValueError, r"embedding_dim must be a positive int; got -2"),
    Case("sizes/sinusoidal-base-1", constructing(lambda: create_sinusoidal_embeddings(4, 4, base=1)),
         ValueError, r"base must be a number greater than 1; got 1"),
    Case("sizes/sinusoidal-base-string", constructing(lambda: create_sinusoidal_embeddings(4, 4, base="10000")),
         TypeError, r"base must be a number greater than 1; got '10000'"),
    Case("sizes/rope-base-none", constructing(lambda: RotaryEmbedding(4, base=None)),
         TypeError, r"base must be a number greater than 1; got None"),
    Case("sizes/rope-dim-0", constructing(lambda: RotaryEmbedding(0)),
         ValueError, r"dim must be a positive int; got 0"),
    Case("sizes/rope-max-seq-len-0", constructing(lambda: RotaryEmbedding(4, max_seq_len=0)),
         ValueError, r"max_seq_len must be a positive int; got 0"),
    Case("sizes/rope-base-nan", constructing(lambda: RotaryEmbedding(4, base=NAN)),
         ValueError, r"base must be a number greater than 1; got nan"),
    Case("sizes/layer-max-seq-len-0", constructing(lambda: EmbeddingLayer(10, 4, max_seq_len=0)),
         ValueError, r"max_seq_len must be a positive int; got 0"),
    Case("sizes/embedding-memory-0", constructing(lambda: embedding_memory(0, 768)),
         ValueError, r"vocab_size must be a positive int; got 0"),
    Case("sizes/bpe-vocab-below-bytes", constructing(lambda: BPETokenizer.train("abc", 100)),
         ValueError, r"vocab_size=100 is smaller than the base alphabet of 256 byte tokens; choose vocab_size >= 256"),
    Case("sizes/word-max-vocab-1", constructing(lambda: WordTokenizer.from_text("a b", max_vocab=1)),
         ValueError, r"max_vocab must be an int >= 2 \(room for <pad> and <unk>\), got 1"),

    # ---------------------------------------------------------------- dropout p outside [0, 1)
    Case("dropout/p-1", constructing(lambda: Dropout(1.0)),
         ValueError, r"dropout probability p must be in \[0, 1\); got p=1.0"),
    Case("dropout/p-1.5", constructing(lambda: Dropout(1.5)),
         ValueError, r"dropout probability p must be in \[0, 1\); got p=1.5"),
    Case("dropout/p-negative", constructing(lambda: Dropout(-0.1)),
         ValueError, r"dropout probability p must be in \[0, 1\); got p=-0.1"),
    Case("dropout/p-nan", constructing(lambda: Dropout(NAN)),
         ValueError, r"dropout probability p must be in \[0, 1\); got p=nan"),
    Case("dropout/p-bool", constructing(lambda: Dropout(True)),
         ValueError, r"dropout probability p must be in \[0, 1\); got p=True"),
    Case("dropout/p-string", constructing(lambda: Dropout("0.5")),
         ValueError, r"dropout probability p must be in \[0, 1\); got p='0.5'"),
    Case("dropout/layer-dropout-1", constructing(lambda: EmbeddingLayer(10, 4, dropout=1.0)),
         ValueError, r"dropout probability p must be in \[0, 1\); got p=1.0"),

    # ---------------------------------------------------------------- optimisers: lr < 0 or NaN, bad betas and settings
    *[Case(f"optimizers/{cls.__name__.lower()}-lr-{label}",
           constructing(lambda p, cls=cls, lr=lr: cls(p, lr=lr), one_param),
           ValueError, rf"lr must be >= 0; got lr={lr}")
      for cls in (SGD, Adam, AdamW, Adagrad, SparseAdam) for label, lr in (("negative", -0.01), ("nan", NAN))],
    Case("optimizers/lr-string", constructing(lambda p: SGD(p, lr="0.1"), one_param),
         TypeError, r"lr must be a number; got '0.1'"),
    Case("optimizers/lr-bool", constructing(lambda p: Adam(p, lr=True), one_param),
         TypeError, r"lr must be a number; got True"),
    Case("optimizers/adam-beta1-1", constructing(lambda p: Adam(p, betas=(1.0, 0.999)), one_param),
         ValueError, r"betas\[0\] must be in \[0, 1\); got 1.0"),
    Case("optimizers/adamw-beta2-1", constructing(lambda p: AdamW(p, betas=(0.9, 1.0)), one_param),
         ValueError, r"betas\[1\] must be in \[0, 1\); got 1.0"),
    Case("optimizers/sparse-adam-beta-negative", constructing(lambda p: SparseAdam(p, betas=(-0.1, 0.9)), one_param),
         ValueError, r"betas\[0\] must be in \[0, 1\); got -0.1"),
    Case("optimizers/adam-beta-nan", constructing(lambda p: Adam(p, betas=(0.9, NAN)), one_param),
         ValueError, r"betas\[1\] must be in \[0, 1\); got nan"),
    Case("optimizers/adam-betas-not-a-pair", constructing(lambda p: Adam(p, betas=(0.9,)), one_param),
         ValueError, r"betas must be a pair \(beta1, beta2\); got \(0.9,\)"),
    Case("optimizers/adam-betas-none", constructing(lambda p: Adam(p, betas=None), one_param),
         TypeError, r"betas must be a pair \(beta1, beta2\) of numbers; got None"),
    Case("optimizers/adam-betas-string", constructing(lambda p: Adam(p, betas="ab"), one_param),
         TypeError, r"betas must be a pair \(beta1, beta2\) of numbers; got 'ab'"),
    Case("optimizers/sparse-adam-beta-string", constructing(lambda p: SparseAdam(p, betas=(0.9, "0.99")), one_param),
         TypeError, r"betas must be a pair \(beta1, beta2\) of numbers; got \(0.9, '0.99'\)"),
    Case("optimizers/sgd-momentum-negative", constructing(lambda p: SGD(p, lr=0.1, momentum=-0.9), one_param),
         ValueError, r"momentum must be >= 0; got momentum=-0.9"),
    Case("optimizers/sgd-weight-decay-nan", constructing(lambda p: SGD(p, lr=0.1, weight_decay=NAN), one_param),
         ValueError, r"weight_decay must be >= 0; got weight_decay=nan"),
    Case("optimizers/adam-eps-negative", constructing(lambda p: Adam(p, eps=-1e-8), one_param),
         ValueError, r"eps must be >= 0; got eps=-1e-08"),
    Case("optimizers/adagrad-lr-decay-negative", constructing(lambda p: Adagrad(p, lr_decay=-0.1), one_param),
         ValueError, r"lr_decay must be >= 0; got lr_decay=-0.1"),
    Case("optimizers/adagrad-initial-accumulator-negative",
         constructing(lambda p: Adagrad(p, initial_accumulator_value=-1.0), one_param),
         ValueError, r"initial_accumulator_value must be >= 0; got initial_accumulator_value=-1.0"),
    Case("optimizers/empty-parameter-list", constructing(lambda: SGD([], lr=0.1)),
         ValueError, r"optimizer got an empty parameter list"),
    Case("optimizers/single-tensor", constructing(lambda p: SGD(p, lr=0.1), lambda: Parameter(np.ones(2))),
         TypeError, r"params must be an iterable of tensors, such as model.parameters\(\); got a single Tensor"),
    Case("optimizers/integer-parameter", constructing(lambda: SGD([Tensor(np.ones(2, np.int64))], lr=0.1)),
         TypeError, r"params\[0\] must be floating point to be optimised; got dtype int64"),
    Case("optimizers/sgd-step-gradient-shape", stepped(lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda p: np.ones(5)),
         ValueError, r"params\[1\] has shape \(5, 2\) but its gradient has shape \(5,\)"),
    Case("optimizers/adam-step-gradient-shape", stepped(lambda ps: Adam(ps, lr=0.1), lambda p: np.ones((2, 5))),
         ValueError, r"params\[1\] has shape \(5, 2\) but its gradient has shape \(2, 5\)"),
    Case("optimizers/adam-step-sparse-gradient", stepped(lambda ps: AdamW(ps, lr=0.1), sparse_rows([0, 3])),
         TypeError, r"params\[1\] \(shape \(5, 2\)\): AdamW does not accept row-sparse gradients .* use SparseAdam"),
    Case("optimizers/sparse-adam-step-dense-gradient",
         stepped(lambda ps: SparseAdam(ps, lr=0.1), lambda p: np.ones((5, 2)), sparse_first=True),
         TypeError, r"params\[1\] \(shape \(5, 2\)\): SparseAdam needs a row-sparse gradient .* use Adam"),
    # `lr` may be changed between steps (a schedule): step() checks it again before touching anything
    *[Case(f"optimizers/{name}-lr-set-to-{label}-between-steps",
           after_setting_lr(stepped(optimizer, good_grad, sparse_first=sparse), lr), error, match)
      for name, optimizer, good_grad, sparse in (
          ("sgd", lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda p: np.full((5, 2), 0.5), False),
          ("adam", lambda ps: Adam(ps, lr=0.1), lambda p: np.full((5, 2), 0.5), False),
          ("adagrad", lambda ps: Adagrad(ps, lr=0.1), lambda p: np.full((5, 2), 0.5), False),
          ("sparse-adam", lambda ps: SparseAdam(ps, lr=0.1), sparse_rows([1, 3]), True))
      for label, lr, error, match in (("negative", -0.01, ValueError, r"lr must be >= 0; got lr=-0.01"),
                                      ("nan", NAN, ValueError, r"lr must be >= 0; got lr=nan"),
                                      ("none", None, TypeError, r"lr must be a number; got None"))],
    Case("optimizers/adagrad-weight-decay-sparse",
         stepped(lambda ps: Adagrad(ps, lr=0.1, weight_decay=0.1), sparse_rows([2])),
         TypeError, r"params\[1\] \(shape \(5, 2\)\): Adagrad's weight_decay=0.1 cannot be used with row-sparse"),

    # ---------------------------------------------------------------- options: unknown names, devices, padding_idx
    Case("options/embedding-init", constructing(lambda: Embedding(10, 4, init="kaiming")),
         ValueError, r"unknown init 'kaiming'; choose one of 'xavier', 'normal', 'trunc_normal', 'gpt2'"),
    Case("options/positional-init", constructing(lambda: PositionalEncoding(8, 4, init="zeros")),
         ValueError, r"unknown init 'zeros'; choose one of 'xavier', 'normal', 'trunc_normal', 'gpt2'"),
    Case("options/layer-init", constructing(lambda: EmbeddingLayer(10, 4, init="he")),
         ValueError, r"unknown init 'he'; choose one of"),
    Case("options/factorized-init", constructing(lambda: FactorizedEmbedding(10, 8, rank=2, init="uniform")),
         ValueError, r"unknown init 'uniform'; choose one of"),
    Case("options/init-table", constructing(lambda: init_table((3, 2), init="glorot")),
         ValueError, r"unknown init 'glorot'; choose one of"),
    Case("options/pos-encoding", constructing(lambda: EmbeddingLayer(10, 4, pos_encoding="rotary")),
         ValueError, r"unknown pos_encoding 'rotary'; choose one of 'learned', 'sinusoidal', 'none' \(or None\)"),
    Case("options/cross-entropy-reduction", on(logits, lambda z: cross_entropy(z, [0, 1], reduction="avg")),
         ValueError, r"unknown reduction 'avg'; choose one of 'mean', 'sum', 'none'"),
    Case("options/cross-entropy-float-ignore-index", on(logits, lambda z: cross_entropy(z, [0, 1], ignore_index=1.5)),
         TypeError, r"ignore_index must be an int or None; got 1.5"),
    Case("options/cross-entropy-loss-layer-ignore-index", constructing(lambda: CrossEntropyLoss(ignore_index="pad")),
         TypeError, r"ignore_index must be an int or None; got 'pad'"),
    Case("options/mse-reduction", constructing(lambda: mse_loss(np.ones(2), np.ones(2), reduction="max")),
         ValueError, r"unknown reduction 'max'; choose one of 'mean', 'sum', 'none'"),
    Case("options/cross-entropy-loss-layer-reduction", constructing(lambda: CrossEntropyLoss(reduction=None)),
         ValueError, r"unknown reduction None; choose one of 'mean', 'sum', 'none'"),
    Case("options/mse-loss-layer-reduction", constructing(lambda: MSELoss(reduction="Mean")),
         ValueError, r"unknown reduction 'Mean'; choose one of 'mean', 'sum', 'none'"),
    Case("options/device-cuda", constructing(lambda: Embedding(10, 4, device="cuda")),
         ValueError, r"device='cuda' is not available: tinytorch is CPU/NumPy only \(use None or 'cpu'\)"),
    Case("options/device-cuda-0", constructing(lambda: Embedding(10, 4, device="cuda:0")),
         ValueError, r"device='cuda:0' is not available"),
    Case("options/padding-equals-vocab", constructing(lambda: Embedding(5, 4, padding_idx=5)),
         ValueError, r"padding_idx=5 is outside \[-5, 5\) for a vocabulary of 5"),
    Case("options/padding-below-minus-vocab", constructing(lambda: Embedding(5, 4, padding_idx=-6)),
         ValueError, r"padding_idx=-6 is outside \[-5, 5\) for a vocabulary of 5"),
    Case("options/padding-float", constructing(lambda: Embedding(5, 4, padding_idx=1.0)),
         TypeError, r"padding_idx must be an int or None; got 1.0"),
    Case("options/functional-padding", on(table, lambda w: embedding([0, 1], w, padding_idx=4, max_norm=0.5)),
         ValueError, r"padding_idx=4 is outside \[-4, 4\) for a vocabulary of 4"),
    Case("options/layer-padding", constructing(lambda: EmbeddingLayer(10, 4, padding_idx=-11)),
         ValueError, r"padding_idx=-11 is outside \[-10, 10\) for a vocabulary of 10"),
    Case("options/from-pretrained-padding",
         constructing(lambda w: Embedding.from_pretrained(w, padding_idx=3), lambda: np.ones((3, 2))),
         ValueError, r"padding_idx=3 is outside \[-3, 3\) for a vocabulary of 3"),
    Case("options/embedding-norm-type", constructing(lambda: Embedding(10, 4, max_norm=1.0, norm_type="fro")),
         TypeError, r"norm_type must be a positive number \(the p of the p-norm\); got 'fro'"),
    Case("options/embedding-norm-type-zero", constructing(lambda: Embedding(10, 4, max_norm=1.0, norm_type=0)),
         ValueError, r"norm_type must be a positive number \(the p of the p-norm\); got 0"),
    Case("options/embedding-sparse-not-bool", constructing(lambda: Embedding(10, 4, sparse="yes")),
         TypeError, r"sparse must be True or False; got 'yes'"),
    Case("options/embedding-scale-grad-not-bool", constructing(lambda: Embedding(10, 4, scale_grad_by_freq=1)),
         TypeError, r"scale_grad_by_freq must be True or False; got 1"),
    Case("options/functional-sparse-not-bool", on(table, lambda w: embedding([0], w, sparse="no")),
         TypeError, r"sparse must be True or False; got 'no'"),
    Case("options/embedding-integer-dtype", constructing(lambda: Embedding(10, 4, dtype=np.int64)),
         TypeError, r"an embedding table holds floats; got dtype int64"),
    Case("options/from-pretrained-integer-table",
         constructing(lambda w: Embedding.from_pretrained(w), lambda: np.ones((3, 2), np.int64)),
         TypeError, r"an embedding table holds floats; got dtype int64"),
    Case("options/gelu-exact", constructing(lambda: GELU(approximate="none")),
         ValueError, r"GELU supports approximate='tanh' only; got approximate='none'"),
]


# ------------------------------------------------------------------------------------------------ the battery

def category(case):
    return case.id.split("/", 1)[0]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_raises_the_documented_error_and_changes_nothing(case):
    call, watched = case.build()
    before = [state_of(obj) for obj in watched]
    with pytest.raises(case.error, match=case.match):
        call()
    after = [state_of(obj) for obj in watched]
    assert after == before, f"{case.id}: the failing call changed the state of {[type(o).__name__ for o in watched]}"


def test_the_battery_covers_every_category_with_at_least_60_cases():
    counts = Counter(category(case) for case in CASES)
    assert sum(counts.values()) >= 60, counts
    required = {"ids", "shapes", "sequence", "odd-dims", "sizes", "dropout", "optimizers", "options"}
    assert required <= set(counts), required - set(counts)
    assert len({case.id for case in CASES}) == len(CASES), "case ids are unique"
    print("\nbad-input cases by category:", dict(sorted(counts.items())), "total", sum(counts.values()))


def test_state_of_sees_every_kind_of_change():
    """The no-partial-change check must be able to fail: each of these mutations changes the picture."""
    mutations = {
        "weight value": lambda m: m.token_embedding.weight.data.__setitem__((0, 0), 123.0),
        "gradient": lambda m: setattr(m.token_embedding.weight, "grad", np.ones((10, 4), F32)),
        "dropout generator": lambda m: m.dropout.rng.random(),
        "attribute": lambda m: setattr(m, "max_seq_len", 7),
        "position table": lambda m: m.position_encoding.position_embeddings.data.__imul__(2),
    }
    for label, mutate in mutations.items():
        model = layer()()
        before = state_of(model)
        mutate(model)
        assert state_of(model) != before, label
    opt = SGD([Parameter(np.ones(2))], lr=0.1, momentum=0.9)
    opt.params[0].grad = np.ones(2)
    before = state_of(opt)
    opt.step()
    assert state_of(opt) != before, "an optimiser step"
    rope = RotaryEmbedding(4, max_seq_len=8)
    before = state_of(rope)
    rope(np.ones((1, 4)), positions=[20])
    assert state_of(rope) != before, "the RoPE cache growing"


def test_a_far_rope_position_is_valid_and_computed_without_growing_the_cache():
    """A position far beyond max_seq_len (a stray 2**40, or the most negative int64) is rotated with angles
    computed for that call only: the cos/sin cache stays within 4 x max_seq_len rather than growing to 2**40
    rows (8 TiB), the result matches an independent float64 rotation, and gradients still flow."""
    rope = RotaryEmbedding(4, max_seq_len=8)
    x = np.random.default_rng(0).standard_normal((4, 4))
    positions = np.array([2**40, 3, -(2**40) - 1, 2**40 + 1])
    out = rope(Tensor(x, dtype=F64), positions=positions).data
    assert len(rope._cos) <= 4 * 8
    angles = positions[:, None].astype(F64) * 10000.0 ** (-np.arange(0, 4, 2) / 4)
    a, b = x[:, 0::2], x[:, 1::2]
    np.testing.assert_allclose(out[:, 0::2], a * np.cos(angles) - b * np.sin(angles), rtol=0, atol=1e-12)
    np.testing.assert_allclose(out[:, 1::2], a * np.sin(angles) + b * np.cos(angles), rtol=0, atol=1e-12)
    assert gradcheck(lambda t: rope(t, positions=positions), [Tensor(x, requires_grad=True, dtype=F64)])
    extreme = rope(Tensor(x[:1], dtype=F64), positions=[np.iinfo(np.int64).min]).data
    assert np.all(np.isfinite(extreme)) and np.isclose(np.linalg.norm(extreme), np.linalg.norm(x[0]))
    assert len(rope._cos) <= 4 * 8


# ------------------------------------------------------------------------------------------------ empty inputs (valid)

def _empty_backward(sparse):
    emb = Embedding(10, 4, sparse=sparse, seed=0)
    emb(np.zeros((2, 0), np.int64)).sum().backward()
    grad = emb.weight.grad
    return grad.to_dense() if isinstance(grad, RowSparseGrad) else grad


EMPTY = {
    "embedding (0,)": (lambda: Embedding(10, 4, seed=0)(np.zeros(0, np.int64)).data, np.zeros((0, 4), F32)),
    "embedding (2, 0)": (lambda: Embedding(10, 4, seed=0)(np.zeros((2, 0), np.int64)).data, np.zeros((2, 0, 4), F32)),
    "embedding []": (lambda: Embedding(10, 4, seed=0)([]).data, np.zeros((0, 4), F32)),
    "functional embedding": (lambda: embedding([], np.ones((3, 2))).data, np.zeros((0, 2), F32)),
    "embedding dense backward": (lambda: _empty_backward(False), np.zeros((10, 4), F32)),
    "embedding sparse backward": (lambda: _empty_backward(True), np.zeros((10, 4), F32)),
    "factorized": (lambda: FactorizedEmbedding(10, 8, rank=2, seed=0)(np.zeros(0, np.int64)).data,
                   np.zeros((0, 8), F32)),
    "layer learned (2, 0)": (lambda: EmbeddingLayer(10, 4, seed=0)(np.zeros((2, 0), np.int64)).data,
                             np.zeros((2, 0, 4), F32)),
    "layer sinusoidal (2, 0)": (lambda: EmbeddingLayer(10, 4, pos_encoding="sinusoidal", seed=0)(
        np.zeros((2, 0), np.int64)).data, np.zeros((2, 0, 4), F32)),
    "positional encoding": (lambda: PositionalEncoding(8, 4, seed=0)(np.zeros((2, 0, 4), F32)).data,
                            np.zeros((2, 0, 4), F32)),
    "rope": (lambda: RotaryEmbedding(4)(np.zeros((2, 0, 4), F32)).data, np.zeros((2, 0, 4), F32)),
    "linear": (lambda: Linear(3, 2, seed=0)(np.zeros((0, 3), F32)).data, np.zeros((0, 2), F32)),
    "dropout in training": (lambda: Dropout(0.5, seed=0)(np.zeros((0, 3), F32)).data, np.zeros((0, 3), F32)),
    "cross entropy sum": (lambda: cross_entropy(np.zeros((0, 3)), np.zeros(0, np.int64), reduction="sum").data,
                          np.array(0.0, F32)),
    "cross entropy none": (lambda: cross_entropy(np.zeros((0, 3)), np.zeros(0, np.int64), reduction="none").data,
                           np.zeros(0, F32)),
    "cross entropy mean is NaN": (lambda: cross_entropy(np.zeros((0, 3)), np.zeros(0, np.int64)).data,
                                  np.array(NAN, F32)),
    "mse sum": (lambda: mse_loss(np.zeros(0), np.zeros(0), reduction="sum").data, np.array(0.0, F32)),
    "segment_sum": (lambda: segment_sum(np.zeros(0, np.int64), np.zeros((0, 3)))[1], np.zeros((0, 3))),
    "stack of empties": (lambda: stack([Tensor(np.zeros(0)), Tensor(np.zeros(0))]).data, np.zeros((2, 0), F32)),
    "char decode": (lambda: np.array(CharTokenizer.from_text("ab").decode([])), np.array("")),
    "bpe encode": (lambda: np.array(BPETokenizer().encode(""), np.int64), np.zeros(0, np.int64)),
}


@pytest.mark.parametrize("name", EMPTY, ids=list(EMPTY))
def test_empty_inputs_are_valid_and_give_empty_results(name):
    compute, expected = EMPTY[name]
    result = np.asarray(compute())
    assert result.shape == expected.shape and result.dtype == expected.dtype
    np.testing.assert_array_equal(result, expected)


def test_empty_cross_entropy_mean_has_a_zero_gradient_and_empty_sparse_steps_move_nothing():
    x = Tensor(np.zeros((0, 3)), requires_grad=True)
    cross_entropy(x, np.zeros(0, np.int64)).backward()
    assert x.grad.shape == (0, 3)
    emb = Embedding(10, 4, sparse=True, seed=0)
    emb(np.zeros(0, np.int64)).sum().backward()
    for opt in (SparseAdam(emb.parameters()), SGD(emb.parameters(), lr=0.1), Adagrad(emb.parameters())):
        before = emb.weight.data.copy()
        opt.step()
        assert np.array_equal(emb.weight.data, before), type(opt).__name__


# ------------------------------------------------------------------------------------------------ mixed float dtypes
# The documented behaviour: an op's result follows NumPy's promotion of its operands' dtypes
# (np.result_type), every gradient has the dtype of the tensor it belongs to, Python numbers and plain
# NumPy arrays combined with a tensor take the tensor's dtype, a raw ndarray given to a layer becomes a Tensor
# first (float64 data -> float32, the Tensor default), and parameters keep their dtype through optimiser
# steps and loads.

FLOATS = [F16, F32, F64]
TOLERANCE = {F16: 2e-2, F32: 1e-5, F64: 1e-12}


@pytest.mark.parametrize("weight_dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("input_dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_mixed_float_dtypes_linear_promotes_like_numpy_and_grads_keep_their_owners_dtype(weight_dtype, input_dtype):
    rng = np.random.default_rng(0)
    weight64, bias64, x64 = rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal((4, 3))
    linear = Linear(3, 2, seed=0)
    linear.weight.data, linear.bias.data = weight64.astype(weight_dtype), bias64.astype(weight_dtype)
    x = Tensor(x64, dtype=input_dtype, requires_grad=True)
    y = linear(x)
    y.sum().backward()
    assert y.dtype == np.result_type(weight_dtype, input_dtype)
    assert linear.weight.grad.dtype == weight_dtype and linear.bias.grad.dtype == weight_dtype
    assert x.grad.dtype == input_dtype
    low = max(TOLERANCE[weight_dtype], TOLERANCE[input_dtype])
    reference = x64.astype(input_dtype).astype(F64) @ weight64.astype(weight_dtype).astype(F64) + \
        bias64.astype(weight_dtype).astype(F64)
    np.testing.assert_allclose(y.data.astype(F64), reference, rtol=low, atol=low)


@pytest.mark.parametrize("table_dtype, position_dtype", [(F16, F32), (F32, F64), (F64, F16), (F16, F16)],
                         ids=["f16+f32", "f32+f64", "f64+f16", "f16+f16"])
def test_mixed_float_dtypes_token_plus_position_follow_numpy_promotion(table_dtype, position_dtype):
    tokens = Embedding(10, 4, dtype=table_dtype, seed=0)
    positions = PositionalEncoding(6, 4, dtype=position_dtype, seed=0)
    out = positions(tokens([[1, 2, 3]]))
    assert out.dtype == np.result_type(table_dtype, position_dtype)
    out.sum().backward()
    assert tokens.weight.grad.dtype == table_dtype and positions.position_embeddings.grad.dtype == position_dtype
    assert EmbeddingLayer(10, 4, dtype=table_dtype, pos_encoding="sinusoidal", seed=0)([[1, 2]]).dtype == table_dtype


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_mixed_float_dtypes_constants_take_the_tensors_dtype_and_rope_follows_its_input(dtype):
    x = Tensor(np.ones(2), dtype=dtype)
    assert (x * 3.0).dtype == dtype and (x + np.ones(2, F64)).dtype == dtype and (np.float64(2) - x).dtype == dtype
    assert RotaryEmbedding(4)(Tensor(np.ones((2, 4)), dtype=dtype)).dtype == dtype
    assert RotaryEmbedding(4)(np.ones((2, 4), dtype)).dtype == (F16 if dtype == F16 else F32), \
        "a raw ndarray becomes a Tensor first: float64 data gives float32 (the Tensor default)"
    assert cross_entropy(Tensor(np.zeros((2, 3)), dtype=dtype), [0, 1]).dtype == dtype


@pytest.mark.parametrize("param_dtype", [F16, F64], ids=["f16", "f64"])
@pytest.mark.parametrize("cls", [SGD, Adam, Adagrad])
def test_mixed_float_dtypes_optimisers_cast_gradients_to_the_parameters_dtype(cls, param_dtype):
    p = Parameter(np.ones(3))
    p.data = p.data.astype(param_dtype)
    p.grad = np.full(3, 0.5, dtype=F32 if param_dtype == F64 else F64)
    cls([p], lr=0.1).step()
    assert p.dtype == param_dtype and np.all(p.data < 1)


def test_mixed_float_dtypes_load_state_dict_casts_to_the_parameters_dtype():
    linear = Linear(2, 3, seed=0)
    linear.load_state_dict({"weight": np.full((2, 3), 1 / 3, F64), "bias": np.ones(3, F16)})
    assert linear.weight.dtype == F32 and linear.bias.dtype == F32
    assert np.array_equal(linear.weight.data, np.full((2, 3), 1 / 3, F64).astype(F32))
