"""Module 13 against Hugging Face transformers (and PyTorch): tiny random GPT2LMHeadModel and LlamaForCausalLM
built from configs (no download) give the same logits and the same greedy tokens here; to_hf/from_hf round-trip;
weights trained here load into transformers with the same logits; LayerNorm/RMSNorm match PyTorch with gradients."""
import numpy as np
import pytest

from tinytorch.core.autograd import no_grad
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.models import LayerNorm, RMSNorm, config_to_hf, from_hf, to_hf

pytestmark = pytest.mark.torch
ATOL = 1e-4


@pytest.fixture(scope="module")
def transformers():
    pytest.importorskip("torch", reason="torch not installed; parity tests need pip install torch==2.13.0")
    return pytest.importorskip("transformers", reason="transformers not installed; parity tests need "
                                                      "pip install transformers")


def hf_gpt2(transformers, **overrides):
    import torch
    torch.manual_seed(0)
    options = dict(vocab_size=61, n_positions=40, n_embd=32, n_layer=2, n_head=4, bos_token_id=None,
                   eos_token_id=None, attn_implementation="eager")
    options.update(overrides)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(**options)).eval()


def hf_llama(transformers, **overrides):
    import torch
    torch.manual_seed(0)
    options = dict(vocab_size=61, hidden_size=32, intermediate_size=72, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=64, rope_theta=500.0, rms_norm_eps=1e-5,
                   bos_token_id=None, eos_token_id=None, pad_token_id=None, attn_implementation="eager")
    options.update(overrides)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**options)).eval()
    with torch.no_grad():                              # random norm weights, so a wrong eps or layout shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    return model


def numpy_state(hf):
    return {name: tensor.detach().numpy().copy() for name, tensor in hf.state_dict().items()}


def hf_logits(hf, ids):
    import torch
    with torch.no_grad():
        return hf(torch.tensor(ids)).logits.numpy()


BUILDERS = {"gpt2": hf_gpt2, "llama": hf_llama,
            "llama_mha_tied": lambda t: hf_llama(t, num_key_value_heads=4, tie_word_embeddings=True),
            "gpt2_untied_n_inner": lambda t: hf_gpt2(t, tie_word_embeddings=False, n_inner=48, layer_norm_epsilon=1e-3)}


@pytest.mark.parametrize("name", BUILDERS)
def test_logits_match_transformers(transformers, rng, name):
    hf = BUILDERS[name](transformers)
    model = from_hf(numpy_state(hf), hf.config.to_dict())
    ids = rng.integers(0, 61, size=(2, 17))
    assert np.allclose(model(ids).data, hf_logits(hf, ids), atol=ATOL)


def hf_greedy(hf, prompt, max_new_tokens):
    "transformers' greedy `generate` of `prompt` (B, T), no padding: ids (B, T + max_new_tokens)."
    import torch
    with torch.no_grad():
        return hf.generate(torch.tensor(prompt), max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=0,
                           attention_mask=torch.ones(prompt.shape, dtype=torch.long)).numpy()


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_greedy_generation_matches_transformers(transformers, rng, name):
    hf = BUILDERS[name](transformers)
    model = from_hf(numpy_state(hf), hf.config.to_dict())
    prompt = rng.integers(0, 61, size=(2, 5))
    expected = hf_greedy(hf, prompt, 15)
    for use_cache in (True, False):
        assert np.array_equal(model.generate(prompt, 15, use_cache=use_cache), expected)


@pytest.mark.parametrize("name", BUILDERS)
def test_to_hf_of_from_hf_round_trips(transformers, name):
    state = numpy_state(BUILDERS[name](transformers))
    hf = BUILDERS[name](transformers)
    again = to_hf(from_hf(state, hf.config.to_dict()))
    assert again.keys() == state.keys()
    assert all(again[key].shape == state[key].shape and np.array_equal(again[key], state[key]) for key in state)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_weights_trained_here_give_the_same_logits_in_transformers(transformers, rng, name):
    import torch
    hf = BUILDERS[name](transformers)
    model = from_hf(numpy_state(hf), hf.config.to_dict())
    before = to_hf(model)
    optimizer = AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(3):
        ids = rng.integers(0, 61, size=(4, 12))
        loss = model.loss(ids[:, :-1], ids[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    trained = to_hf(model)
    assert all(not np.array_equal(trained[k], before[k]) for k in trained if not k.endswith("norm.weight"))
    config = config_to_hf(model.config)
    config_class = transformers.GPT2Config if name == "gpt2" else transformers.LlamaConfig
    model_class = transformers.GPT2LMHeadModel if name == "gpt2" else transformers.LlamaForCausalLM
    fresh = model_class(config_class(**{k: v for k, v in config.items() if k != "model_type"})).eval()
    fresh.load_state_dict({k: torch.from_numpy(v) for k, v in trained.items()}, strict=True)
    ids = rng.integers(0, 61, size=(2, 9))
    assert np.allclose(model(ids).data, hf_logits(fresh, ids), atol=ATOL)


@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_norms_match_pytorch_forward_and_gradients(torch, rng, kind):
    import torch.nn.functional as F
    norm = LayerNorm(6, eps=1e-5) if kind == "layer" else RMSNorm(6, eps=1e-6)
    for p in norm.parameters():
        p.data = rng.standard_normal(p.shape)
    array = rng.standard_normal((3, 4, 6))
    x, tx = Tensor(array, requires_grad=True, dtype=np.float64), torch.tensor(array, requires_grad=True)
    tweight = torch.tensor(norm.weight.data, requires_grad=True)
    if kind == "layer":
        tbias = torch.tensor(norm.bias.data, requires_grad=True)
        theirs = F.layer_norm(tx, (6,), tweight, tbias, eps=1e-5)
    else:
        theirs = F.rms_norm(tx, (6,), tweight, eps=1e-6)
    ours = norm(x)
    assert np.allclose(ours.data, theirs.detach().numpy(), atol=1e-10)
    upstream = rng.standard_normal(ours.shape)
    ours.backward(upstream)
    theirs.backward(torch.tensor(upstream))
    assert np.allclose(x.grad, tx.grad.numpy(), atol=1e-9)
    assert np.allclose(norm.weight.grad, tweight.grad.numpy(), atol=1e-9)
    if kind == "layer":
        assert np.allclose(norm.bias.grad, tbias.grad.numpy(), atol=1e-9)


# ================================================================ issue 23: reliability, third pass
# ---------------------------------------------------------------- defect 5: from_hf(dtype=float64) keeps float64

@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_a_float64_hugging_face_model_loads_in_float64_with_float64_logits(transformers, arch):
    import torch
    hf = BUILDERS[arch](transformers).double()
    with torch.no_grad():                              # values float32 cannot hold
        for p in hf.parameters():
            p.add_(1e-12)
    ours = from_hf(numpy_state(hf), hf.config.to_dict(), dtype=np.float64)
    assert {p.dtype for p in ours.parameters()} == {np.dtype(np.float64)}
    for name, value in to_hf(ours).items():
        np.testing.assert_array_equal(value, numpy_state(hf)[name], err_msg=name)
    ids = np.random.default_rng(0).integers(0, 61, size=(2, 9))
    with no_grad():
        logits = ours(ids).data
    # Hugging Face's LLaMA computes its RoPE angles in float32 even in a float64 model ("force float32")
    np.testing.assert_allclose(logits, hf_logits(hf, ids), atol=1e-10 if arch == "gpt2" else 1e-6)



# ================================================================ issue 24: padding, positions, interleaved RoPE

def left_padded(rng, lengths, width, vocab=61):
    "Prompts of `lengths` padded on the left to `width`: ids (B, width) (pad id 0), attention_mask (B, width) of 1/0."
    ids, mask = np.zeros((len(lengths), width), np.int64), np.zeros((len(lengths), width), np.int64)
    for row, n in enumerate(lengths):
        ids[row, width - n:], mask[row, width - n:] = rng.integers(1, vocab, size=n), 1
    return ids, mask


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_logits_with_attention_mask_and_position_ids_match_transformers(transformers, rng, name):
    "Hugging Face's attention_mask (1 = real) and position_ids, given explicitly to both: the real positions agree."
    import torch
    hf = BUILDERS[name](transformers)
    model = from_hf(numpy_state(hf), hf.config.to_dict())
    ids, mask = left_padded(rng, [9, 4, 7], 9)
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
    with torch.no_grad():
        expected = hf(torch.tensor(ids), attention_mask=torch.tensor(mask),
                      position_ids=torch.tensor(positions)).logits.numpy()
    got = model(ids, attention_mask=mask, position_ids=positions).data
    real = mask.astype(bool)
    assert np.allclose(got[real], expected[real], atol=ATOL)
    shifted = positions + 3 * (name == "gpt2") + 11 * (name == "llama")      # positions other than 0.. as well
    with torch.no_grad():
        expected = hf(torch.tensor(ids), attention_mask=torch.tensor(mask),
                      position_ids=torch.tensor(shifted)).logits.numpy()
    assert np.allclose(model(ids, mask, shifted).data[real], expected[real], atol=ATOL)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_left_padded_greedy_generation_matches_transformers(transformers, rng, name):
    import torch
    hf = BUILDERS[name](transformers)
    model = from_hf(numpy_state(hf), hf.config.to_dict())
    ids, mask = left_padded(rng, [3, 6, 1], 6)
    with torch.no_grad():
        expected = hf.generate(torch.tensor(ids), attention_mask=torch.tensor(mask), max_new_tokens=10,
                               do_sample=False, pad_token_id=0).numpy()
    for use_cache in (True, False):
        assert np.array_equal(model.generate(ids, 10, attention_mask=mask, use_cache=use_cache), expected)


@pytest.mark.parametrize("num_kv_heads", [2, 4])
def test_an_interleaved_rope_llama_exports_to_transformers_with_the_same_logits(transformers, rng, num_kv_heads):
    """rope_interleaved=True (CS336's layout): to_hf permutes the q/k projection rows into HF's half-split layout;
    LlamaForCausalLM then gives our logits, and from_hf(rope_interleaved=True) reads the same weights back."""
    import torch
    from tinytorch.models import TransformerConfig, TransformerLM
    model = TransformerLM(TransformerConfig(arch="llama", vocab_size=61, max_seq_len=64, d_model=32, num_heads=4,
                                            num_kv_heads=num_kv_heads, rope_theta=500.0, rope_interleaved=True), seed=7)
    for p in model.parameters():                                       # larger weights, so a wrong layout shows
        p.data[...] = rng.standard_normal(p.shape) * 0.3
    config = config_to_hf(model.config)
    hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        **{k: v for k, v in config.items() if k != "model_type"}, attn_implementation="eager")).eval()
    hf.load_state_dict({k: torch.from_numpy(v) for k, v in to_hf(model).items()}, strict=True)
    ids = rng.integers(0, 61, size=(2, 11))
    assert np.allclose(model(ids).data, hf_logits(hf, ids), atol=ATOL)
    unpermuted = {k: torch.from_numpy(v) for k, v in to_hf(model).items()}
    for i in range(model.config.num_layers):                          # the permutation is needed: without it, not equal
        for proj in ("q_proj", "k_proj"):
            unpermuted[f"model.layers.{i}.self_attn.{proj}.weight"] = torch.from_numpy(
                np.ascontiguousarray(getattr(model.model.layers[i].self_attn, proj).weight.data.T))
    hf.load_state_dict(unpermuted)
    assert not np.allclose(model(ids).data, hf_logits(hf, ids), atol=ATOL)
    back = from_hf(to_hf(model), config, rope_interleaved=True)
    assert back.config.rope_interleaved
    assert all(np.array_equal(a.data, b.data) for a, b in zip(back.parameters(), model.parameters()))
