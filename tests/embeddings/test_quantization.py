"""Behaviour of tinytorch.text.quantization: per-row int8/int4 quantisation (error bounds, packing, constant
rows), QuantizedEmbedding (sizes, lookups, inference-only rule, id checks) and the bytes-per-token analysis.
PyTorch parity (its per_channel_affine_float_qparams scales and codes) when torch is installed.
"""
import tracemalloc
import warnings

import numpy as np
import pytest

from tinytorch.core import checkpoint
from tinytorch.core.layers import Dropout, Linear, Module, Sequential
from tinytorch.core.optimizers import SGD
from tinytorch.core.tensor import Tensor
from tinytorch.text.bag import EmbeddingBag
from tinytorch.text.embeddings import Embedding
from tinytorch.text.quantization import (
    QUANTIZATION_BITS,
    SERVING_DTYPES,
    QuantizedEmbedding,
    bytes_per_token,
    dequantize_rows,
    lookup_cost_table,
    measure_lookup_bandwidth,
    pack_int4,
    quantize_rows,
    table_bytes,
    table_size_rows,
    unpack_int4,
)

LEVELS = {8: 255, 4: 15}


@pytest.fixture(scope="module")
def gpt2_width_table():
    "A 1000 x 768 float32 table, N(0, 1) so values reach about ±5 (float32 rounding is largest there)."
    return Embedding(1000, 768, init="normal", seed=0)


# ------------------------------------------------------------------------------------------------ acceptance

@pytest.mark.parametrize("bits", QUANTIZATION_BITS)
def test_reconstruction_error_of_every_row_is_at_most_half_a_step(gpt2_width_table, bits):
    table = gpt2_width_table.weight.data
    quantized = QuantizedEmbedding.from_float(gpt2_width_table, bits=bits)
    restored = quantized(np.arange(1000)).data
    row_error = np.abs(restored.astype(np.float64) - table).max(axis=1)
    bound = (table.max(axis=1).astype(np.float64) - table.min(axis=1)) / LEVELS[bits] / 2 + 1e-6
    assert np.all(row_error <= bound)
    assert row_error.max() > 0.5 * (bound - 1e-6).max(), "the error should use most of its budget, not be trivially 0"
    assert quantized.max_abs_error == pytest.approx(row_error.max(), abs=1e-7)


@pytest.mark.parametrize("bits, budget", [(8, 0.26), (4, 0.14)])
def test_table_bytes_at_d_768_are_within_budget(gpt2_width_table, bits, budget):
    quantized = QuantizedEmbedding.from_float(gpt2_width_table, bits=bits)
    float_bytes = 1000 * 768 * 4
    assert quantized.nbytes == quantized.codes.nbytes + quantized.scales.nbytes + quantized.offsets.nbytes
    assert quantized.nbytes <= budget * float_bytes
    assert quantized.nbytes == table_bytes(1000, 768, f"int{bits}")
    assert quantized.compression_ratio == pytest.approx(float_bytes / quantized.nbytes)
    assert quantized.codes.shape == (1000, 768 if bits == 8 else 384) and quantized.codes.dtype == np.uint8
    assert quantized.scales.dtype == quantized.offsets.dtype == np.float32


@pytest.mark.parametrize("bits", [3, 16, 0, True, 8.0, "8", None])
def test_unsupported_bits_raise_value_error_naming_bits_and_choices(bits):
    with pytest.raises(ValueError) as info:
        QuantizedEmbedding.from_float(Embedding(4, 2, seed=0), bits=bits)
    assert f"bits={bits!r}" in str(info.value) and "choose one of 8, 4" in str(info.value)


# ------------------------------------------------------------------------------------------------ the format

def test_scale_offset_and_codes_follow_the_per_row_affine_formula():
    rng = np.random.default_rng(1)
    table = rng.standard_normal((20, 9)).astype(np.float32)
    for bits in QUANTIZATION_BITS:
        codes, scales, offsets = quantize_rows(table, bits)
        low, high = table.min(axis=1), table.max(axis=1)
        np.testing.assert_array_equal(offsets, low)
        np.testing.assert_allclose(scales, (high.astype(np.float64) - low) / LEVELS[bits], rtol=1e-6)
        unpacked = codes if bits == 8 else unpack_int4(codes, 9)
        expected = np.rint((table.astype(np.float64) - offsets[:, None]) / scales[:, None].astype(np.float64))
        np.testing.assert_array_equal(unpacked, expected)
        assert unpacked.min() == 0 and unpacked.max(axis=1).tolist() == [LEVELS[bits]] * 20


def test_worked_example_by_hand():
    codes, scales, offsets = quantize_rows(np.array([[-1.0, -0.52, 0.13, 0.91, 2.0]], np.float32), bits=4)
    assert unpack_int4(codes, 5).tolist() == [[0, 2, 6, 10, 15]]
    assert codes.tolist() == [[0 + 2 * 16, 6 + 10 * 16, 15]]
    assert scales[0] == np.float32(0.2) and offsets[0] == -1.0
    np.testing.assert_allclose(dequantize_rows(codes, scales, offsets, 4, 5), [[-1.0, -0.6, 0.2, 1.0, 2.0]], atol=1e-6)


@pytest.mark.parametrize("dim", [1, 2, 5, 8, 11])
def test_int4_packing_round_trips_for_odd_and_even_widths(dim):
    codes = np.random.default_rng(dim).integers(0, 16, (6, dim)).astype(np.uint8)
    packed = pack_int4(codes)
    assert packed.shape == (6, (dim + 1) // 2) and packed.dtype == np.uint8
    np.testing.assert_array_equal(unpack_int4(packed, dim), codes)
    np.testing.assert_array_equal(packed[:, 0] & 15, codes[:, 0])
    table = np.random.default_rng(dim).standard_normal((6, dim)).astype(np.float32)
    quantized = QuantizedEmbedding.from_float(table, bits=4)
    assert quantized([0, 5]).shape == (2, dim)
    assert quantized.max_abs_error <= ((table.max(1) - table.min(1)) / 15 / 2).max() + 1e-6


@pytest.mark.parametrize("bits", QUANTIZATION_BITS)
def test_constant_rows_are_exact_and_need_no_division_by_zero(bits):
    table = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    table[1], table[3] = 0.0, -2.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # a division by zero would warn
        with np.errstate(all="raise"):
            quantized = QuantizedEmbedding.from_float(table, bits=bits)
            restored = quantized.dequantize()
    assert np.all(np.isfinite(quantized.scales))
    assert restored[1].tolist() == [0.0] * 7 and restored[3].tolist() == [-2.5] * 7


def test_float64_tables_and_tensors_quantise_too():
    table = np.random.default_rng(3).standard_normal((30, 10))
    for source in (table, Tensor(table, dtype=np.float64)):
        quantized = QuantizedEmbedding.from_float(source, bits=8)
        error = np.abs(quantized.dequantize() - table).max(axis=1)
        assert np.all(error <= (table.max(1) - table.min(1)) / 255 / 2 + 1e-6)
        assert quantized.padding_idx is None


@pytest.mark.parametrize("table, words", [
    (np.ones(5), "2-D float table"),
    (np.ones((3, 2), np.int64), "dtype int64"),
    (np.array([[1.0, np.nan], [0.0, 1.0]]), "row 0 holds a non-finite value (nan)"),
    (np.array([[1.0, 2.0], [np.inf, 1.0]]), "row 1 holds a non-finite value (inf)"),
])
def test_bad_tables_are_refused(table, words):
    with pytest.raises(ValueError) as info:
        QuantizedEmbedding.from_float(table)
    assert words in str(info.value)


def test_direct_construction_checks_the_arrays():
    codes, scales, offsets = quantize_rows(np.ones((4, 6), np.float32), 4)
    assert QuantizedEmbedding(codes, scales, offsets, 4, 6).dequantize().tolist() == [[1.0] * 6] * 4
    with pytest.raises(ValueError, match=r"uint8 codes \(V, 6\)"):
        QuantizedEmbedding(codes, scales, offsets, 8, 6)


# ------------------------------------------------------------------------------------------------ lookups

def test_forward_matches_the_dequantised_table_for_any_id_shape():
    source = Embedding(50, 8, init="gpt2", seed=2)
    quantized = QuantizedEmbedding.from_float(source, bits=8)
    full = quantized.dequantize()
    assert full.shape == (50, 8) and full.dtype == np.float32
    for ids in ([3], [[1, 2, 49], [0, 0, 7]], np.array(4), np.zeros((2, 0), np.int64), [], Tensor([[5, 5]])):
        out = quantized(ids)
        as_array = np.asarray(ids.data if isinstance(ids, Tensor) else ids, dtype=np.int64)
        assert isinstance(out, Tensor) and out.dtype == np.float32 and not out.requires_grad
        assert out.shape == as_array.shape + (8,)
        np.testing.assert_array_equal(out.data, full[as_array])


def test_forward_dequantises_only_the_rows_looked_up():
    quantized = QuantizedEmbedding.from_float(np.zeros((20_000, 64), np.float32) + np.arange(64, dtype=np.float32),
                                              bits=4)
    quantized([1, 2, 3])                                    # warm up
    tracemalloc.start()
    quantized([[1, 2, 3], [19_999, 0, 7]])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 20_000 * 64 * 4 / 100, f"a 6-id lookup allocated {peak:,} bytes: it must not dequantise the table"


@pytest.mark.parametrize("bad, error, words", [
    ([1, 50], IndexError, "token id 50 at position (1,) is out of range [0, 50)"),
    ([-1], IndexError, "token id -1 at position (0,)"),
    ([1.0], TypeError, "token ids must be integers; got dtype float64"),
    (np.array([True]), TypeError, "a boolean mask is not a list of ids"),
])
def test_bad_ids_raise_the_same_errors_as_embedding(bad, error, words):
    quantized = QuantizedEmbedding.from_float(Embedding(50, 4, seed=0))
    for module in (quantized, Embedding(50, 4, seed=0)):
        with pytest.raises(error) as info:
            module(bad)
        assert words in str(info.value)


def test_padding_idx_is_carried_over_and_its_zero_row_reads_back_exactly():
    source = Embedding(12, 5, padding_idx=-2, seed=0)
    for bits in QUANTIZATION_BITS:
        quantized = QuantizedEmbedding.from_float(source, bits=bits)
        assert quantized.padding_idx == 10
        assert quantized([10]).data.tolist() == [[0.0] * 5]
    assert QuantizedEmbedding.from_float(EmbeddingBag(6, 3, padding_idx=1, seed=0)).padding_idx == 1
    assert repr(quantized) == "QuantizedEmbedding(12, 5, bits=4, padding_idx=10)"


# ------------------------------------------------------------------------------------------------ inference only

def test_it_is_inference_only():
    quantized = QuantizedEmbedding.from_float(Embedding(10, 4, seed=0), bits=8)
    assert quantized.parameters() == [] and list(quantized.state_dict()) == ["codes", "scales", "offsets"]
    assert quantized.training is False and quantized.requires_grad is False
    assert quantized.eval() is quantized and quantized.train(False) is quantized
    with pytest.raises(RuntimeError, match="inference-only.*train the float Embedding and quantise it again"):
        quantized.train()
    with pytest.raises(RuntimeError, match="inference-only"):
        quantized.requires_grad = True
    with pytest.raises(ValueError, match="empty parameter list"):
        SGD(quantized.parameters(), lr=0.1)
    out = quantized([1, 2])
    with pytest.raises(RuntimeError, match="requires grad"):
        out.sum().backward()


def test_a_model_holding_it_can_evaluate_but_not_train():
    model = Sequential(QuantizedEmbedding.from_float(Embedding(10, 4, seed=0)))
    assert model.eval() is model and model([1, 2]).shape == (2, 4)
    with pytest.raises(RuntimeError, match="inference-only"):
        model.train()


def test_gradients_still_flow_to_float_layers_that_consume_its_output():
    quantized = QuantizedEmbedding.from_float(Embedding(10, 4, seed=0))
    scale = Tensor(np.ones(4), requires_grad=True)
    (quantized([[1, 2]]) * scale).sum().backward()
    np.testing.assert_allclose(scale.grad, quantized.dequantize([1, 2]).sum(axis=0), rtol=1e-6)


# ------------------------------------------------------------------------------------------------ bytes and bandwidth

def test_bytes_per_token_at_gpt2_and_gpt3_sizes():
    rows = {(row["model"], row["dtype"]): row for row in lookup_cost_table()}
    expected = {"GPT-2 small": (768, 50257), "GPT-3 175B": (12288, 50257)}
    for model, (dim, vocab_size) in expected.items():
        per_token = [rows[model, dtype]["bytes_per_token"] for dtype in SERVING_DTYPES]
        assert per_token == [4 * dim, 2 * dim, dim + 8, dim // 2 + 8]
        for dtype in SERVING_DTYPES:
            assert rows[model, dtype]["table_bytes"] == vocab_size * rows[model, dtype]["bytes_per_token"]
    assert rows["GPT-2 small", "float32"]["table_bytes"] == 154_389_504
    assert rows["GPT-3 175B", "float32"]["table_bytes"] == 4 * 617_558_016
    assert rows["GPT-2 small", "int4"]["fraction_of_float32"] == pytest.approx(392 / 3072)
    assert [row["dtype"] for row in lookup_cost_table({"tiny": (10, 3)})] == list(SERVING_DTYPES)
    assert bytes_per_token(3, "int4") == 2 + 8


@pytest.mark.parametrize("call, words", [
    (lambda: bytes_per_token(768, "bfloat16"), "unknown dtype 'bfloat16'; choose one of 'float32', 'float16', 'int8', 'int4'"),
    (lambda: bytes_per_token(0), "embedding_dim must be a positive int; got 0"),
    (lambda: table_bytes(-5, 768), "vocab_size must be a positive int; got -5"),
])
def test_bad_sizes_and_dtypes(call, words):
    with pytest.raises(ValueError) as info:
        call()
    assert words in str(info.value)


def test_table_size_grows_linearly_with_the_vocabulary_for_every_dtype():
    rows = table_size_rows((1000, 3000), embedding_dim=64)
    for dtype in SERVING_DTYPES:
        assert rows[1][dtype] == 3 * rows[0][dtype] == 3 * 1000 * bytes_per_token(64, dtype)


def test_measure_lookup_bandwidth_reports_consistent_rows():
    rows = measure_lookup_bandwidth(vocab_size=200, embedding_dim=16, num_tokens=128, repeat=1, bandwidth=2e9)
    assert [row["dtype"] for row in rows] == list(SERVING_DTYPES)
    for row in rows:
        assert row["seconds"] > 0 and row["bytes_per_token"] == bytes_per_token(16, row["dtype"])
        assert row["bytes_per_second"] == pytest.approx(row["bytes_per_token"] * 128 / row["seconds"])
        assert row["fraction_of_memcpy"] == pytest.approx(row["bytes_per_second"] / 2e9)


# ------------------------------------------------------------------------------------------------ PyTorch

@pytest.mark.torch
@pytest.mark.parametrize("bits", QUANTIZATION_BITS)
def test_scales_and_codes_match_pytorchs_float_qparams_observer(torch, bits):
    from torch.ao.quantization import PerChannelMinMaxObserver

    table = np.random.default_rng(4).standard_normal((300, 32)).astype(np.float32)
    table[7] = 0.5                                                      # a constant row
    dtype = torch.quint8 if bits == 8 else torch.quint4x2
    observer = PerChannelMinMaxObserver(ch_axis=0, dtype=dtype, qscheme=torch.per_channel_affine_float_qparams,
                                        quant_min=0, quant_max=LEVELS[bits])
    observer(torch.from_numpy(table))
    torch_scales, torch_zero_points = observer.calculate_qparams()
    codes, scales, offsets = quantize_rows(table, bits)
    np.testing.assert_allclose(scales, torch_scales.numpy(), rtol=1e-6)       # constant row: both use scale 1
    # PyTorch stores zero_point = -min / scale; ours stores the offset min itself
    np.testing.assert_allclose(-torch_zero_points.numpy() * torch_scales.numpy(), offsets, rtol=1e-5, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                                 # quantize_per_channel is deprecated in 2.13
        quantized = torch.quantize_per_channel(torch.from_numpy(table), torch_scales.float(), torch_zero_points.float(),
                                               0, dtype)
        torch_restored = quantized.dequantize().numpy()
    restored = dequantize_rows(codes, scales, offsets, bits, 32)
    steps = np.abs(restored - torch_restored) / scales[:, None]
    assert np.mean(steps < 1e-3) > 0.99, "nearly every value lands on the same level as PyTorch's"
    assert steps.max() < 1 + 1e-3, "rounding of exact halves may differ by one level, never more"


# ------------------------------------------------------------------------------------------------ checkpoints and train/eval (issue 15, defects 4 and 5)

@pytest.mark.parametrize("bits", [8, 4])
def test_a_quantized_embedding_round_trips_through_a_checkpoint(tmp_path, bits):
    source = QuantizedEmbedding.from_float(Embedding(20, 6, init="normal", seed=1), bits=bits)
    assert list(source.state_dict()) == ["codes", "scales", "offsets"]
    path = checkpoint.save(Sequential(source), tmp_path / "quantized.npz")
    target = Sequential(QuantizedEmbedding.from_float(Embedding(20, 6, init="normal", seed=2), bits=bits))
    assert not np.array_equal(target(np.arange(20)).data, source(np.arange(20)).data)
    checkpoint.load_into(target, path)
    assert np.array_equal(target(np.arange(20)).data, source(np.arange(20)).data)
    wrong_size = Sequential(QuantizedEmbedding.from_float(Embedding(21, 6, seed=0), bits=bits))
    with pytest.raises(checkpoint.CheckpointError, match="0.codes"):
        checkpoint.load_into(wrong_size, path)


def test_train_is_all_or_nothing_when_a_quantized_embedding_refuses():
    model = Sequential(Linear(4, 4, seed=0), Dropout(0.5), QuantizedEmbedding.from_float(Embedding(10, 4, seed=0)))
    model.eval()
    with pytest.raises(RuntimeError, match="inference-only"):
        model.train()
    assert [module.training for _, module in model.named_modules()] == [False, False, False, False]
