"""RoPE scaling in a whole model (issue 26, item 3): a tiny LlamaForCausalLM with each rope_type (linear, dynamic
NTK, YaRN, llama3) gives the same logits here, within 1e-4, also beyond the trained length (dynamic NTK's
frequencies grow and reset as transformers' do); config_from_hf / config_to_hf carry `rope_parameters`
(transformers 5) and the older `rope_scaling`; bad rope_scaling configs are refused naming the field."""
import numpy as np
import pytest

from tinytorch.core.autograd import no_grad
from tinytorch.models import TransformerConfig, TransformerLM, config_from_hf, config_to_hf, from_hf

ATOL = 1e-4
TRAINED = 24                                                   # max_position_embeddings of the tiny model

SCALINGS = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": TRAINED},
    "yarn_deepseek": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 12, "beta_fast": 16.0,
                      "beta_slow": 2.0, "mscale": 1.0, "mscale_all_dim": 0.5, "truncate": False},
    "yarn_attention_factor": {"rope_type": "yarn", "factor": 2.0, "attention_factor": 1.3},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 12},
}


@pytest.fixture(scope="module")
def transformers():
    pytest.importorskip("torch", reason="torch not installed; parity tests need pip install torch==2.13.0")
    return pytest.importorskip("transformers", reason="transformers not installed; pip install transformers")


def hf_llama(transformers, rope_parameters):
    import torch
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=53, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=TRAINED, rms_norm_eps=1e-5, bos_token_id=None,
        eos_token_id=None, pad_token_id=None, attn_implementation="eager",
        rope_parameters=None if rope_parameters is None else {**rope_parameters, "rope_theta": 500.0},
        rope_theta=500.0)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():               # scores of order 1, so that positions (and their scaling) show in the logits
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.normal_(0.0, 0.5)
            layer.self_attn.k_proj.weight.normal_(0.0, 0.5)
            layer.self_attn.v_proj.weight.normal_(0.0, 0.3)
    return model


def hf_logits(hf, ids):
    import torch
    with torch.no_grad():
        return hf(torch.tensor(ids)).logits.numpy()


def numpy_state(hf):
    return {name: tensor.detach().numpy().copy() for name, tensor in hf.state_dict().items()}


@pytest.mark.parametrize("name", SCALINGS)
def test_logits_match_transformers_within_and_beyond_the_trained_length(transformers, rng, name):
    hf = hf_llama(transformers, SCALINGS[name])
    model = from_hf(numpy_state(hf), hf.config.to_dict())
    assert model.config.rope_scaling["rope_type"] == SCALINGS[name]["rope_type"]
    for length in (TRAINED // 2, 3 * TRAINED, 5 * TRAINED):       # dynamic: plain, then stretched, then more
        ids = rng.integers(0, 53, size=(2, length))
        expected = hf_logits(hf, ids)
        with no_grad():
            got = model(ids).data
        assert np.abs(got - expected).max() < ATOL, (name, length, np.abs(got - expected).max())


def test_scaling_changes_the_logits_beyond_the_trained_length(transformers, rng):
    "The parity test is not vacuous: each type's logits differ from plain RoPE's at 3x the trained length."
    ids = rng.integers(0, 53, size=(1, 3 * TRAINED))
    plain = hf_logits(hf_llama(transformers, None), ids)
    for name, scaling in SCALINGS.items():
        assert np.abs(hf_logits(hf_llama(transformers, scaling), ids) - plain).max() > 100 * ATOL, name


def test_dynamic_ntk_follows_the_grow_and_reset_rule_of_transformers(transformers, rng):
    "One model, calls of changing lengths: 60 (stretch), 40 (keeps the 60-token frequencies), 10 (reset), 40 again."
    hf = hf_llama(transformers, SCALINGS["dynamic"])
    model = from_hf(numpy_state(hf), hf.config.to_dict())
    for length in (60, 40, 10, 40):
        ids = rng.integers(0, 53, size=(1, length))
        with no_grad():
            got = model(ids).data
        assert np.abs(got - hf_logits(hf, ids)).max() < ATOL, length


@pytest.mark.parametrize("name", ["linear", "yarn", "llama3"])
def test_cached_decoding_beyond_the_trained_length_equals_the_full_pass(rng, name):
    "Static scalings have fixed frequencies, so a KV cache reproduces the full pass at any position."
    config = TransformerConfig(arch="llama", vocab_size=53, max_seq_len=8, d_model=32, num_heads=2, num_layers=1,
                               rope_scaling=SCALINGS[name] if "original" not in SCALINGS[name] else
                               {k: v for k, v in SCALINGS[name].items() if k != "original_max_position_embeddings"})
    model = TransformerLM(config, seed=0)
    ids = rng.integers(0, 53, size=(1, 30))
    caches = model.new_caches()
    with no_grad():
        full = model(ids).data
        steps = [model(ids[:, :5], caches=caches).data] + [model(ids[:, t:t + 1], caches=caches).data
                                                            for t in range(5, 30)]
    assert np.allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


@pytest.mark.parametrize("name", SCALINGS)
def test_config_round_trips_through_hugging_face(transformers, name):
    config = config_from_hf(hf_llama(transformers, SCALINGS[name]).config.to_dict())
    assert config_from_hf(config_to_hf(config)) == config
    written = config_to_hf(config)
    assert written["rope_parameters"]["rope_type"] == SCALINGS[name]["rope_type"]
    again = transformers.LlamaConfig(**{k: v for k, v in written.items() if k != "model_type"})
    assert config_from_hf(again.to_dict()) == config
    for key, value in SCALINGS[name].items():
        assert again.rope_parameters[key] == value


def test_legacy_rope_scaling_and_default_rope_parameters_are_read():
    base = dict(model_type="llama", vocab_size=53, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                num_attention_heads=2, max_position_embeddings=TRAINED, rms_norm_eps=1e-5, rope_theta=500.0)
    legacy = config_from_hf({**base, "rope_scaling": {"type": "linear", "factor": 2.0}})
    assert legacy.rope_scaling == {"rope_type": "linear", "factor": 2.0} and legacy.rope_theta == 500.0
    plain = config_from_hf({**base, "rope_parameters": {"rope_type": "default", "rope_theta": 123.0}})
    assert plain.rope_scaling is None and plain.rope_theta == 123.0
    assert "rope_parameters" not in config_to_hf(plain)
    filled = config_from_hf({**base, "rope_parameters": {"rope_type": "yarn", "factor": 2.0}})
    assert filled.rope_scaling["original_max_position_embeddings"] == TRAINED     # as transformers fills it


BAD_HF = [({"rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0]}, "rope_type"),
          ({"rope_type": "linear"}, "factor"),
          ({"rope_type": "linear", "factor": 0.5}, "rope_scaling['factor']"),
          ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0}, "low_freq_factor"),
          ({"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5}, "partial_rotary_factor"),
          ({"rope_type": "dynamic", "factor": 2.0, "beta_fast": 4.0}, "beta_fast")]


@pytest.mark.parametrize("params, words", BAD_HF)
def test_config_from_hf_refuses_what_it_cannot_compute_naming_the_field(params, words):
    config = dict(model_type="llama", vocab_size=53, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                  num_attention_heads=2, max_position_embeddings=TRAINED, rms_norm_eps=1e-5,
                  rope_parameters={**params, "rope_theta": 500.0})
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        config_from_hf(config)


BAD_CONFIGS = [({"rope_type": "yarn"}, ValueError, "factor"),
               ({"factor": 2.0}, ValueError, "rope_type"),
               ({"rope_type": "ntk", "factor": 2.0}, ValueError, "rope_scaling['rope_type']"),
               ({"rope_type": "linear", "factor": "2"}, TypeError, "rope_scaling['factor']"),
               ({"rope_type": "linear", "factor": float("inf")}, ValueError, "rope_scaling['factor']"),
               ({"rope_type": "yarn", "factor": 2.0, "truncate": "yes"}, TypeError, "rope_scaling['truncate']"),
               ({"rope_type": "yarn", "factor": 2.0, "beta_fast": 1.0, "beta_slow": 2.0}, ValueError, "beta_fast"),
               ({"rope_type": "yarn", "factor": 2.0, "attention_factor": -1.0}, ValueError,
                "rope_scaling['attention_factor']"),
               ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 0}, ValueError, "rope_scaling['original_max_position_embeddings']"),
               ({"rope_type": "linear", "factor": 2.0, "rope_theta": 10.0}, ValueError, "rope_theta"),
               ("linear", TypeError, "rope_scaling")]


@pytest.mark.parametrize("scaling, kind, words", BAD_CONFIGS)
def test_transformer_config_refuses_bad_rope_scaling_naming_the_field(scaling, kind, words):
    with pytest.raises(kind) as error:
        TransformerConfig(arch="llama", rope_scaling=scaling)
    assert words in str(error.value)


def test_rope_scaling_needs_rope_positions_and_is_copied():
    with pytest.raises(ValueError, match="position='rope'"):
        TransformerConfig(arch="gpt2", rope_scaling={"rope_type": "linear", "factor": 2.0})
    scaling = {"rope_type": "linear", "factor": 2}
    config = TransformerConfig(arch="gpt2", position="rope", rope_scaling=scaling)
    scaling["factor"] = 100.0                                  # the caller's dict is not the config's
    assert config.rope_scaling == {"rope_type": "linear", "factor": 2.0}
    assert isinstance(config.rope_scaling["factor"], float)


@pytest.mark.parametrize("name", ["dynamic", "yarn"])
def test_greedy_generation_past_the_trained_length_matches_transformers(transformers, rng, name):
    "With a KV cache, dynamic NTK re-stretches at every step as transformers' does (keys keep their old rotation)."
    import torch
    hf = hf_llama(transformers, SCALINGS[name])
    model = from_hf(numpy_state(hf), hf.config.to_dict())
    prompt = rng.integers(0, 53, size=(1, 20))
    with torch.no_grad():
        expected = hf.generate(torch.tensor(prompt), max_new_tokens=30, do_sample=False, pad_token_id=0,
                               attention_mask=torch.ones(prompt.shape, dtype=torch.long)).numpy()
    assert np.array_equal(model.generate(prompt, 30, use_cache=True), expected)
