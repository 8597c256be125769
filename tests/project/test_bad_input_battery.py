"""The bad-input battery as a whole (tests/bad_input_battery.py and each subject's test_bad_inputs.py): enough
cases, every category covered, unique ids, and a no-partial-change check that can fail."""
import importlib
from collections import Counter

import numpy as np

from tests.bad_input_battery import category, state_of
from tests.embeddings.test_bad_inputs import layer
from tinytorch.core.layers import Parameter
from tinytorch.core.optimizers import SGD
from tinytorch.text.embeddings import RotaryEmbedding

F32 = np.float32
SUBJECTS = ["tensor", "activations", "layers", "losses", "autograd", "optimizers", "tokenization", "embeddings",
            "attention"]
CASES = [case for subject in SUBJECTS for case in importlib.import_module(f"tests.{subject}.test_bad_inputs").CASES]


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
