"""RoPE scaling frequencies (module 12, rope_scaling_dev; issue 26 item 3): each rope_type's inverse frequencies and
attention factor equal transformers' ROPE_INIT_FUNCTIONS; RotaryEmbedding(rope_scaling=...) gives the cos/sin of
transformers' LlamaRotaryEmbedding, dynamic update rule included; the properties each scaling promises; gradcheck;
bad dicts refused naming the field."""
import math

import numpy as np
import pytest

from tinytorch.core.autograd import gradcheck
from tinytorch.core.attention import RotaryEmbedding
from tinytorch.core.rope_scaling import (ROPE_SCALING_TYPES, RopeFrequencies, check_rope_scaling,
                                         dynamic_ntk_inv_freq, linear_inv_freq, llama3_inv_freq, rope_inv_freq,
                                         yarn_attention_factor, yarn_inv_freq)
from tinytorch.core.tensor import Tensor

HF_CASES = [
    (16, 500.0, 64, {"rope_type": "linear", "factor": 3.0}),
    (16, 500.0, 64, {"rope_type": "dynamic", "factor": 4.0}),
    (32, 10000.0, 128, {"rope_type": "dynamic", "factor": 2.5}),
    (16, 500.0, 64, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}),
    (32, 10000.0, 256, {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64, "beta_fast": 16.0,
                        "beta_slow": 2.0, "mscale": 1.0, "mscale_all_dim": 0.5, "truncate": False}),
    (8, 10000.0, 16, {"rope_type": "yarn", "factor": 2.0, "attention_factor": 0.9}),
    (16, 500.0, 64, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 16}),
    (64, 500000.0, 8192, {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 8192}),          # LLaMA 3.2's values
]


@pytest.fixture(scope="module")
def transformers():
    pytest.importorskip("torch", reason="torch not installed; parity tests need pip install torch==2.13.0")
    return pytest.importorskip("transformers", reason="transformers not installed; pip install transformers")


def hf_config(transformers, dim, base, trained, scaling):
    return transformers.LlamaConfig(hidden_size=2 * dim, num_attention_heads=2, head_dim=dim,
                                    max_position_embeddings=trained,
                                    rope_parameters=None if scaling is None else {**scaling, "rope_theta": base},
                                    rope_theta=base)


@pytest.mark.parametrize("dim, base, trained, scaling", HF_CASES)
def test_frequencies_equal_transformers_rope_init_functions(transformers, dim, base, trained, scaling):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    config = hf_config(transformers, dim, base, trained, scaling)
    for seq_len in ((None, trained + 1, 3 * trained) if scaling["rope_type"] == "dynamic" else (None,)):
        expected, expected_factor = ROPE_INIT_FUNCTIONS[scaling["rope_type"]](config, "cpu", seq_len=seq_len)
        frequencies = RopeFrequencies(dim, base, scaling, trained)
        if seq_len is not None:
            frequencies.update(seq_len)
        assert np.allclose(frequencies.inv_freq, expected.numpy(), rtol=1e-6, atol=0), seq_len
        assert frequencies.attention_factor == pytest.approx(expected_factor, rel=1e-12)


@pytest.mark.parametrize("dim, base, trained, scaling", HF_CASES[:7])
def test_cos_sin_equal_transformers_rotary_embedding_over_a_sequence_of_calls(transformers, dim, base, trained,
                                                                              scaling):
    "Calls of lengths T/2, 3T, 2T, T/4, 5T on one layer each: dynamic NTK's grow and reset as transformers'."
    import torch
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    hf = LlamaRotaryEmbedding(hf_config(transformers, dim, base, trained, scaling))
    rope = RotaryEmbedding(dim, max_seq_len=trained, base=base, interleaved=False, rope_scaling=scaling)
    for length in (trained // 2, 3 * trained, 2 * trained, trained // 4, 5 * trained):
        positions = np.arange(length)
        cos, sin = hf(torch.zeros(1, dtype=torch.float32), torch.tensor(positions)[None])
        ours_cos, ours_sin = rope.cos_sin(positions)
        half = dim // 2                                        # transformers repeats the angles: cat((a, a))
        tolerance = 2e-7 * length                              # its angles are float32: m·θ off by ~m·6e-8
        assert np.abs(ours_cos - cos[0, :, :half].numpy()).max() < tolerance, length
        assert np.abs(ours_sin - sin[0, :, :half].numpy()).max() < tolerance, length


def test_plain_rope_is_unchanged_and_each_type_changes_it():
    plain = RotaryEmbedding(16, max_seq_len=32)
    assert np.array_equal(plain.inv_freq, 10000.0 ** (-np.arange(0, 16, 2) / 16)) and plain.rope_scaling is None
    positions = np.arange(200)
    for kind, scaling in (("linear", {"factor": 4.0}), ("dynamic", {"factor": 4.0}), ("yarn", {"factor": 4.0}),
                          ("llama3", {"factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0})):
        scaled = RotaryEmbedding(16, max_seq_len=32, rope_scaling={"rope_type": kind, **scaling})
        assert not np.allclose(scaled.cos_sin(positions)[0], plain.cos_sin(positions)[0]), kind


def test_linear_is_position_interpolation(rng):
    "Rotating position m with factor f equals plain RoPE at position m / f (f = 2: even positions)."
    x = rng.standard_normal((1, 40, 8))
    scaled = RotaryEmbedding(8, max_seq_len=16, rope_scaling={"rope_type": "linear", "factor": 2.0})(x).data
    plain = RotaryEmbedding(8, max_seq_len=16)(x, positions=np.arange(40) // 2).data
    assert np.allclose(scaled[:, 0::2], plain[:, 0::2], atol=1e-12)


def test_dynamic_ntk_is_plain_rope_within_the_trained_length_and_divides_the_slowest_pair_beyond():
    dim, base, trained, factor = 16, 10000.0, 32, 4.0
    theta = rope_inv_freq(dim, base)
    assert np.allclose(dynamic_ntk_inv_freq(dim, base, factor, trained, trained), theta, rtol=1e-14)
    for seq_len in (40, 64, 200):
        scale = factor * seq_len / trained - (factor - 1)
        stretched = dynamic_ntk_inv_freq(dim, base, factor, seq_len, trained)
        assert stretched[0] == pytest.approx(1.0) and stretched[-1] == pytest.approx(theta[-1] / scale, rel=1e-12)


def test_yarn_keeps_fast_pairs_interpolates_slow_ones_and_ramps_between():
    dim, base, factor, original = 64, 10000.0, 8.0, 256
    theta, yarn = rope_inv_freq(dim, base), yarn_inv_freq(dim, base, factor, original)
    turns = original * theta / (2 * math.pi)                   # full circles each pair makes in training
    assert np.array_equal(yarn[turns > 64], theta[turns > 64])                      # beyond beta_fast = 32, rounded
    assert np.allclose(yarn[turns < 0.5], theta[turns < 0.5] / factor, rtol=1e-14)  # below beta_slow = 1, rounded
    ratio = yarn / theta
    assert np.all(np.diff(ratio) <= 1e-15) and ((ratio < 1) & (ratio > 1 / factor)).any()   # a ramp in between
    assert yarn_attention_factor(1.0) == 1.0 and yarn_attention_factor(np.e ** 10) == pytest.approx(2.0)


def test_llama3_bands_by_wavelength():
    theta, original, factor = rope_inv_freq(64, 500000.0), 8192, 8.0
    scaled = llama3_inv_freq(theta, factor, 1.0, 4.0, original)
    wavelength = 2 * np.pi / theta
    assert np.array_equal(scaled[wavelength < original / 4], theta[wavelength < original / 4])
    assert np.allclose(scaled[wavelength > original], theta[wavelength > original] / factor, rtol=1e-14)
    middle = (wavelength >= original / 4) & (wavelength <= original)
    assert middle.any() and np.all((scaled[middle] <= theta[middle]) & (scaled[middle] >= theta[middle] / factor))
    assert np.allclose(linear_inv_freq(theta, factor), theta / factor)


@pytest.mark.parametrize("kind", ROPE_SCALING_TYPES)
def test_gradcheck_with_scaling_beyond_the_trained_length(kind, rng):
    extra = {"low_freq_factor": 1.0, "high_freq_factor": 4.0} if kind == "llama3" else {}
    rope = RotaryEmbedding(6, max_seq_len=4, rope_scaling={"rope_type": kind, "factor": 2.0, **extra})
    x = Tensor(rng.standard_normal((2, 11, 6)), requires_grad=True, dtype=np.float64)
    assert gradcheck(lambda x: rope(x), [x])


def test_repr_and_the_checked_copy():
    scaling = {"rope_type": "yarn", "factor": 4}
    rope = RotaryEmbedding(4, max_seq_len=8, rope_scaling=scaling)
    assert rope.rope_scaling == {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8}
    assert scaling == {"rope_type": "yarn", "factor": 4}                   # the caller's dict is left alone
    assert "rope_scaling={'rope_type': 'yarn'" in repr(rope)
    assert repr(RotaryEmbedding(4)) == "RotaryEmbedding(dim=4, max_seq_len=2048, base=10000.0, interleaved=True)"
    assert check_rope_scaling(None, 8) is None


@pytest.mark.parametrize("scaling, kind, words", [
    ({"rope_type": "linear", "factor": 0.9}, ValueError, "rope_scaling['factor'] must be >= 1"),
    ({"rope_type": "linear", "factor": True}, TypeError, "rope_scaling['factor']"),
    ({"rope_type": "linear", "factor": float("nan")}, ValueError, "rope_scaling['factor']"),
    ({"rope_type": "default"}, ValueError, "rope_scaling['rope_type']"),
    ({"type": "linear", "factor": 2.0}, ValueError, "rope_type"),
    ({"rope_type": "linear", "factor": 2.0, "original_max_position_embeddings": 4}, ValueError,
     "original_max_position_embeddings"),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0}, ValueError, "high_freq_factor"),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 2.0, "high_freq_factor": 2.0}, ValueError,
     "rope_scaling['low_freq_factor']"),
    ({"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 2.5}, TypeError,
     "rope_scaling['original_max_position_embeddings']"),
    ({"rope_type": "yarn", "factor": 2.0, "mscale": 0}, ValueError, "rope_scaling['mscale']"),
    ([("rope_type", "linear")], TypeError, "rope_scaling must be a dict"),
])
def test_bad_rope_scaling_is_refused_naming_the_field(scaling, kind, words):
    with pytest.raises(kind) as error:
        RotaryEmbedding(8, max_seq_len=16, rope_scaling=scaling)
    assert words in str(error.value)
