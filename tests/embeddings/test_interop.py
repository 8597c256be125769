"""Moving weights between tinytorch and PyTorch (skipped when torch is not installed; pip install torch==2.13.0).

`state_dict()` of `Embedding` and `EmbeddingLayer` loads into the matching PyTorch modules with
`load_state_dict(strict=True)`, and back, with identical outputs; so does a tinytorch checkpoint file.

Name mapping (tinytorch -> PyTorch, written as GPT-2 / nanoGPT name their input block):

    Embedding                                   torch.nn.Embedding
      weight                                      weight                (same name, same (V, d) layout)
    EmbeddingLayer                              GPT2Input below: wte + wpe (or a sinusoidal buffer), dropout
      token_embedding.weight                      wte.weight
      position_encoding.position_embeddings       wpe.weight            (pos_encoding="learned" only)
      (sinusoidal table: not a parameter)         pe                    (a non-persistent buffer, not saved)
    Linear                                      torch.nn.Linear
      weight (in_features, out_features)          weight (out_features, in_features): TRANSPOSED
      bias                                        bias

Options that are constructor arguments on both sides, not state: padding_idx, max_norm, scale_embeddings
(sqrt(d) scaling), dropout p.
"""
import math

import numpy as np
import pytest

from tinytorch.core.checkpoint import load, load_into, save
from tinytorch.core.layers import Linear
from tinytorch.core.tensor import Tensor
from tinytorch.text.embeddings import Embedding, EmbeddingLayer, create_sinusoidal_embeddings

pytestmark = pytest.mark.torch

TINYTORCH_TO_TORCH = {
    "token_embedding.weight": "wte.weight",
    "position_encoding.position_embeddings": "wpe.weight",
}
TORCH_TO_TINYTORCH = {theirs: ours for ours, theirs in TINYTORCH_TO_TORCH.items()}


def to_torch(torch, state, names=None):
    "A tinytorch state dict (name -> ndarray) as a PyTorch one (renamed, tensors that own their memory)."
    names = names or {}
    return {names.get(name, name): torch.tensor(np.asarray(array)) for name, array in state.items()}


def from_torch(state, names=None):
    "A PyTorch state dict as a tinytorch one (renamed, ndarrays)."
    names = names or {}
    return {names.get(name, name): tensor.detach().cpu().numpy().copy() for name, tensor in state.items()}


def sinusoidal_in_torch(torch, length, dim):
    "The paper's table, written independently in torch: sin on even columns, cos on odd ones."
    position = torch.arange(length, dtype=torch.float64)[:, None]
    frequency = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    table = torch.zeros(length, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: dim // 2])
    return table.float()


def gpt2_input(torch, vocab_size, dim, max_seq_len, pos_encoding, scale_embeddings, dropout, padding_idx):
    "The PyTorch equivalent of EmbeddingLayer: wte (+ wpe or a sinusoidal buffer), optional sqrt(d), dropout."
    nn = torch.nn

    class GPT2Input(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab_size, dim, padding_idx=padding_idx)
            if pos_encoding == "learned":
                self.wpe = nn.Embedding(max_seq_len, dim)
            elif pos_encoding == "sinusoidal":
                self.register_buffer("pe", sinusoidal_in_torch(torch, max_seq_len, dim), persistent=False)
            self.drop = nn.Dropout(dropout)

        def forward(self, idx):
            x = self.wte(idx)
            if scale_embeddings:
                x = x * math.sqrt(dim)
            length = idx.shape[-1]
            if pos_encoding == "learned":
                x = x + self.wpe(torch.arange(length))
            elif pos_encoding == "sinusoidal":
                x = x + self.pe[:length]
            return self.drop(x)

    return GPT2Input()


def run_torch(torch, module, ids):
    with torch.no_grad():
        return module.eval()(torch.as_tensor(ids)).numpy()


IDS = np.array([[0, 3, 3, 9, 1], [7, 2, 0, 0, 5]])


# ------------------------------------------------------------------------------------------------ Embedding

@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("padding_idx", [None, 0])
def test_embedding_state_dict_loads_into_torch_and_back(torch, dtype, padding_idx):
    ours = Embedding(10, 6, padding_idx=padding_idx, init="normal", dtype=dtype, seed=0)
    theirs = torch.nn.Embedding(10, 6, padding_idx=padding_idx, dtype=getattr(torch, np.dtype(dtype).name))
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    theirs.load_state_dict(to_torch(torch, ours.state_dict()), strict=True)
    np.testing.assert_allclose(run_torch(torch, theirs, IDS), ours(IDS).data, rtol=0, atol=1e-6)
    assert np.array_equal(run_torch(torch, theirs, IDS), ours(IDS).data), "a lookup copies the numbers exactly"

    torch.manual_seed(1)
    fresh = torch.nn.Embedding(10, 6, padding_idx=padding_idx, dtype=getattr(torch, np.dtype(dtype).name))
    back = Embedding(10, 6, padding_idx=padding_idx, dtype=dtype, seed=2)
    back.load_state_dict(from_torch(fresh.state_dict()))
    assert back.weight.dtype == dtype
    assert np.array_equal(back(IDS).data, run_torch(torch, fresh, IDS))


def test_a_checkpoint_file_carries_an_embedding_to_torch_and_back(torch, tmp_path):
    ours = Embedding(10, 4, init="gpt2", seed=0)
    theirs = torch.nn.Embedding(10, 4)
    theirs.load_state_dict(to_torch(torch, load(save(ours, tmp_path / "ours.npz"))), strict=True)
    assert np.array_equal(run_torch(torch, theirs, IDS), ours(IDS).data)

    torch.manual_seed(3)
    trained_elsewhere = torch.nn.Embedding(10, 4)
    save(from_torch(trained_elsewhere.state_dict()), tmp_path / "theirs.npz")
    back = Embedding(10, 4, seed=5)
    load_into(back, tmp_path / "theirs.npz")
    assert np.array_equal(back(IDS).data, run_torch(torch, trained_elsewhere, IDS))


def test_the_tied_output_head_matches_torch_linear_with_the_same_table(torch):
    ours = Embedding(10, 4, init="normal", seed=0)
    theirs = torch.nn.Embedding(10, 4)
    theirs.load_state_dict(to_torch(torch, ours.state_dict()))
    hidden = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    with torch.no_grad():
        expected = torch.nn.functional.linear(torch.tensor(hidden), theirs.weight).numpy()
    np.testing.assert_allclose(ours.attend(Tensor(hidden)).data, expected, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------------------------ EmbeddingLayer

LAYERS = [
    dict(pos_encoding="learned", scale_embeddings=False, padding_idx=None),
    dict(pos_encoding="learned", scale_embeddings=True, padding_idx=0),
    dict(pos_encoding="sinusoidal", scale_embeddings=True, padding_idx=None),
    dict(pos_encoding="sinusoidal", scale_embeddings=False, padding_idx=0),
    dict(pos_encoding=None, scale_embeddings=False, padding_idx=None),
]


@pytest.mark.parametrize("options", LAYERS, ids=lambda o: f"{o['pos_encoding']}-scale{o['scale_embeddings']}"
                                                          f"-pad{o['padding_idx']}")
def test_embedding_layer_state_dict_loads_into_the_torch_equivalent_and_back(torch, options):
    ours = EmbeddingLayer(10, 8, max_seq_len=6, dropout=0.1, init="gpt2", seed=0, **options).eval()
    theirs = gpt2_input(torch, 10, 8, 6, dropout=0.1, **options)
    expected_names = [TINYTORCH_TO_TORCH[name] for name in ours.state_dict()]
    assert list(theirs.state_dict()) == expected_names, "the mapping covers every parameter, in order"
    theirs.load_state_dict(to_torch(torch, ours.state_dict(), TINYTORCH_TO_TORCH), strict=True)
    for ids in (IDS, IDS[0, :3], IDS[:, :6]):
        np.testing.assert_allclose(run_torch(torch, theirs, ids), ours(ids).data, rtol=0, atol=1e-6)

    torch.manual_seed(4)
    trained_elsewhere = gpt2_input(torch, 10, 8, 6, dropout=0.1, **options)
    back = EmbeddingLayer(10, 8, max_seq_len=6, dropout=0.1, seed=9, **options).eval()
    assert back.load_state_dict(from_torch(trained_elsewhere.state_dict(), TORCH_TO_TINYTORCH)) == ([], [])
    np.testing.assert_allclose(back(IDS).data, run_torch(torch, trained_elsewhere, IDS), rtol=0, atol=1e-6)


def test_our_sinusoidal_table_equals_the_torch_buffer(torch):
    np.testing.assert_allclose(create_sinusoidal_embeddings(64, 16).data, sinusoidal_in_torch(torch, 64, 16).numpy(),
                               rtol=0, atol=1e-6)


def test_gpt2_sized_input_block_round_trips_through_a_checkpoint_into_torch(torch, tmp_path):
    ours = EmbeddingLayer(50257, 32, max_seq_len=1024, dropout=0.1, init="gpt2", seed=0).eval()
    state = load(save(ours, tmp_path / "gpt2_input.npz"))
    theirs = gpt2_input(torch, 50257, 32, 1024, "learned", False, 0.1, None)
    theirs.load_state_dict(to_torch(torch, state, TINYTORCH_TO_TORCH), strict=True)
    ids = np.random.default_rng(0).integers(0, 50257, size=(2, 1024))
    np.testing.assert_allclose(run_torch(torch, theirs, ids), ours(ids).data, rtol=0, atol=1e-6)


# ------------------------------------------------------------------------------------------------ Linear (the trap)

def test_linear_weights_need_a_transpose_for_pytorch(torch):
    """Our Linear stores weight as (in, out); PyTorch as (out, in). A square layer loads without complaint
    either way, so the mapping must transpose: this test shows both the trap and the fix."""
    ours = Linear(4, 4, seed=0)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    naive, fixed = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    naive.load_state_dict(to_torch(torch, ours.state_dict()), strict=True)            # loads, silently wrong
    fixed.load_state_dict({"weight": torch.tensor(ours.weight.data.T.copy()), "bias": torch.tensor(ours.bias.data)})
    with torch.no_grad():
        assert not np.allclose(naive(torch.tensor(x)).numpy(), ours(x).data, atol=1e-3)
        np.testing.assert_allclose(fixed(torch.tensor(x)).numpy(), ours(x).data, rtol=1e-6, atol=1e-6)
