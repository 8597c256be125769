"""Hugging Face checkpoint folders without PyTorch (module 13, `tinytorch.models.pretrained`; issue 26 item 2).

Checkpoints written by transformers' `save_pretrained` (GPT-2, LLaMA, a tied LLaMA; float32 and bfloat16; one
file and sharded) are loaded by our NumPy reader in a subprocess where `import torch` fails, and their logits
match transformers' within 1e-4; our `save_pretrained` folders load in transformers with the same logits.
The reader's refusals (truncated header, offsets out of range, unknown dtype, missing shard) name the file.
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.diagnosis import expect_close

from tinytorch.models import TransformerConfig, TransformerLM
from tinytorch.models.pretrained import (INDEX_NAME, WEIGHTS_NAME, SafetensorsError, bfloat16_to_float32,
                                         float32_to_bfloat16, from_pretrained, load_file, read_state_dict,
                                         save_file, save_pretrained)

ROOT = Path(__file__).resolve().parents[2]
IDS = np.array([[5, 17, 3, 60, 22, 9, 41, 0], [1, 2, 3, 4, 5, 6, 7, 8]])
TOLERANCE = 1e-4
SHARD_BYTES = 3000          # tiny models: a handful of shards each


def hf_configs(transformers):
    small = dict(vocab_size=64)
    return {
        "gpt2": transformers.GPT2Config(n_positions=32, n_embd=16, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0,
                                        **small),
        "llama": transformers.LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                          **small),
        "llama_tied": transformers.LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                               num_attention_heads=4, num_key_value_heads=2,
                                               max_position_embeddings=32, tie_word_embeddings=True, **small),
    }


@pytest.fixture(scope="module")
def hf_checkpoints(tmp_path_factory):
    """name -> (folder, transformers' float32 logits of that folder) for each (config, dtype, sharding)."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("hf")
    checkpoints = {}
    for name, config in hf_configs(transformers).items():
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(config)
        with torch.no_grad():                       # weights big enough that a wrong layout shows in the logits
            for p in model.parameters():
                p.normal_(0.0, 0.3)
        for dtype in ("float32", "bfloat16"):
            model.to(getattr(torch, dtype))
            for sharded in (False, True):
                folder = root / f"{name}-{dtype}-{'sharded' if sharded else 'single'}"
                model.save_pretrained(folder, max_shard_size=SHARD_BYTES if sharded else "5GB")
                assert (folder / INDEX_NAME).is_file() == sharded and (folder / WEIGHTS_NAME).is_file() != sharded
            with torch.no_grad():                   # the checkpoint's weights (bfloat16 ones upcast), in float32
                logits = model.to(torch.float32).eval()(torch.from_numpy(IDS)).logits.numpy()
            for sharded in ("single", "sharded"):
                checkpoints[f"{name}-{dtype}-{sharded}"] = (root / f"{name}-{dtype}-{sharded}", logits)
    return checkpoints


TORCHLESS = """
import sys
sys.modules["torch"] = None          # `import torch` now raises ImportError
sys.modules["safetensors"] = None
sys.modules["transformers"] = None
import numpy as np
from tinytorch.models.pretrained import from_pretrained
ids, out, folders = np.load(sys.argv[1]), sys.argv[2], sys.argv[3:]
try:
    import torch
    raise SystemExit("torch was importable")
except ImportError:
    pass
np.savez(out, **{folder: from_pretrained(folder)(ids).data for folder in folders})
assert not any(m for m in sys.modules if m.split(".")[0] in ("torch", "safetensors", "transformers") and sys.modules[m])
"""


def test_transformers_checkpoints_load_without_torch_with_the_same_logits(hf_checkpoints, tmp_path):
    np.save(tmp_path / "ids.npy", IDS)
    folders = [str(folder) for folder, _ in hf_checkpoints.values()]
    run = subprocess.run([sys.executable, "-c", TORCHLESS, str(tmp_path / "ids.npy"), str(tmp_path / "out.npz"),
                          *folders], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-3000:]
    ours = np.load(tmp_path / "out.npz")
    assert len(hf_checkpoints) == 12
    for name, (folder, reference) in hf_checkpoints.items():
        logits = ours[str(folder)]
        assert np.abs(reference).max() > 1.0, "logits large enough to tell layouts apart"
        assert np.allclose(logits, reference, atol=TOLERANCE, rtol=0), \
            f"{name}: max difference {np.abs(logits - reference).max():.3g}"


def test_bfloat16_checkpoints_are_upcast_exactly(hf_checkpoints):
    folder, _ = hf_checkpoints["llama-bfloat16-single"]
    ours = read_state_dict(folder)
    table = ours["model.embed_tokens.weight"]
    assert table.dtype == np.float32
    bits = table.view(np.uint32)
    assert np.all(bits & 0xFFFF == 0), "a bfloat16 value is float32 with its low 16 bits zero"
    full, _ = hf_checkpoints["llama-float32-single"]
    assert np.abs(table - read_state_dict(full)["model.embed_tokens.weight"]).max() < 0.3 * 2 ** -7 * 4


def test_dtype_option_and_tied_head(hf_checkpoints):
    folder, reference = hf_checkpoints["llama_tied-float32-sharded"]
    model = from_pretrained(folder, dtype=np.float64)
    assert all(p.data.dtype == np.float64 for p in model.parameters())
    assert model.config.tie_embeddings and "lm_head.weight" not in read_state_dict(folder)
    assert np.allclose(model(IDS).data, reference, atol=TOLERANCE)


def randomised(arch, tied, seed=0):
    model = TransformerLM(TransformerConfig(arch=arch, vocab_size=64, max_seq_len=32, d_model=16, num_heads=4,
                                            num_kv_heads=2 if arch == "llama" else None, num_layers=2, d_ff=32,
                                            tie_embeddings=tied), seed=seed)
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p.data[...] = rng.normal(0.0, 0.3, p.shape)
    return model


@pytest.mark.parametrize("arch, tied", [("gpt2", True), ("llama", False), ("llama", True)])
@pytest.mark.parametrize("dtype, sharded", [(None, False), (None, True), ("bfloat16", True)])
def test_our_save_pretrained_loads_in_transformers(tmp_path, arch, tied, dtype, sharded):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    model = randomised(arch, tied)
    files = save_pretrained(model, tmp_path, max_shard_size=SHARD_BYTES if sharded else None, dtype=dtype)
    assert (len(files) > 1) == sharded
    loaded, info = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32,
                                                                     output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    assert type(loaded).__name__ == {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM"}[arch]
    assert loaded.config.tie_word_embeddings == tied
    with torch.no_grad():
        theirs = loaded.eval()(torch.from_numpy(IDS)).logits.numpy()
    expected = model(IDS).data if dtype is None else from_pretrained(tmp_path)(IDS).data
    assert np.abs(expected).max() > 1.0
    assert np.allclose(theirs, expected, atol=TOLERANCE, rtol=0), np.abs(theirs - expected).max()
    if dtype == "bfloat16":
        assert json.loads((tmp_path / "config.json").read_text())["dtype"] == "bfloat16"
        raw = (tmp_path / files[0]).read_bytes()
        header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
        assert {entry["dtype"] for name, entry in header.items() if name != "__metadata__"} == {"BF16"}
        assert np.allclose(expected, model(IDS).data, atol=0.5), "rounded weights, nearly the same model"


def test_float32_to_bfloat16_rounds_to_nearest_ties_to_even():
    "Bit patterns worked out by hand: bfloat16 keeps 7 mantissa bits, a step of 2**-7 above 1."
    values = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -10, -2.0, np.inf], np.float32)
    expected = [0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC000, 0x7F80]      # ties go to the even pattern
    got = float32_to_bfloat16(values)
    truncated = values.view(np.uint32) >> 16
    expect_close(got.astype(np.int64), expected, "float32_to_bfloat16([1, 1 + 2^-8, 1 + 3·2^-8, 1 + 2^-8 + 2^-10, -2, inf])",
                 rtol=0, atol=0, diagnoses=[("truncates", "the low 16 bits were dropped, which rounds towards zero: "
                                             "add 0x7FFF plus the lowest kept bit before shifting (round to nearest, "
                                             "ties to even)", truncated.astype(np.int64))])


def test_bfloat16_to_float32_reinterprets_the_bits():
    bits = np.array([0x3F80, 0xC000, 0x7F80, 0x0001, 0x3F81], np.uint16)
    expected = np.array([1.0, -2.0, np.inf, 2.0 ** -133, 1 + 2 ** -7])
    got = bfloat16_to_float32(bits)
    expect_close(got, expected, "bfloat16_to_float32([0x3F80, 0xC000, 0x7F80, 0x0001, 0x3F81])", rtol=0, atol=0,
                 diagnoses=[("converted, not reinterpreted", "the 16 bits are the top half of a float32 word: shift "
                             "them up and `.view(np.float32)`, do not convert the integer", bits.astype(np.float32))])


def test_float32_to_bfloat16_matches_torch():
    torch = pytest.importorskip("torch")
    values = np.random.default_rng(0).standard_normal(10_000).astype(np.float32) * np.float32(1e3)
    special = np.array([np.inf, -np.inf, 0.0, -0.0, 3.4028235e38, 1e-40, 1 + 2 ** -8, 1 + 3 * 2 ** -8], np.float32)
    values = np.concatenate([values, special])
    theirs = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(float32_to_bfloat16(values), theirs)
    assert np.array_equal(bfloat16_to_float32(theirs), torch.from_numpy(theirs.view(np.int16)).view(torch.bfloat16)
                          .float().numpy())


def test_cross_check_with_the_safetensors_package(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    tensors = {"f64": np.linspace(0, 1, 6).reshape(2, 3), "f32": np.ones((3,), np.float32), "f16": np.arange(4, dtype=np.float16),
               "i64": np.array([2 ** 40, -1]), "i32": np.array([[7]], np.int32), "u8": np.arange(5, dtype=np.uint8),
               "bool": np.array([True, False, True]), "empty": np.zeros((0, 3), np.float32)}
    save_file(tensors, tmp_path / "ours.safetensors", metadata={"format": "np"})
    theirs = safetensors_numpy.load_file(str(tmp_path / "ours.safetensors"))
    assert set(theirs) == set(tensors)
    for name, value in tensors.items():
        assert theirs[name].dtype == value.dtype and np.array_equal(theirs[name], value), name
    safetensors_numpy.save_file(tensors, str(tmp_path / "theirs.safetensors"))
    ours = load_file(tmp_path / "theirs.safetensors")
    for name, value in tensors.items():
        assert ours[name].dtype == value.dtype and np.array_equal(ours[name], value), name


def test_load_file_options(tmp_path):
    save_file({"a": np.ones((2, 2), np.float16), "b": np.arange(3)}, tmp_path / "x.safetensors")
    both = load_file(tmp_path / "x.safetensors", dtype=np.float64)
    assert both["a"].dtype == np.float64 and both["b"].dtype == np.int64, "dtype= converts floating tensors only"
    assert set(load_file(tmp_path / "x.safetensors", names=["b"])) == {"b"}
    with pytest.raises(KeyError, match=r"x\.safetensors.*'c'"):
        load_file(tmp_path / "x.safetensors", names=["c"])
    loaded = load_file(tmp_path / "x.safetensors")["a"]
    loaded[0, 0] = 5                                    # arrays of their own, writable
    assert load_file(tmp_path / "x.safetensors")["a"][0, 0] == 1


def good_file(path):
    save_file({"w": np.arange(6, dtype=np.float32).reshape(2, 3), "v": np.ones(2, np.float32)}, path)
    raw = path.read_bytes()
    length = int.from_bytes(raw[:8], "little")
    return raw, length, json.loads(raw[8:8 + length])


def with_header(path, header, data):
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)


def test_refuses_a_truncated_header(tmp_path):
    path = tmp_path / "model.safetensors"
    raw, length, _ = good_file(path)
    path.write_bytes(raw[:5])
    with pytest.raises(SafetensorsError, match=r"model\.safetensors: truncated: 5 bytes"):
        load_file(path)
    path.write_bytes(raw[:8 + length - 1])
    with pytest.raises(SafetensorsError, match=rf"model\.safetensors: truncated or not safetensors: the header says {length} bytes"):
        load_file(path)
    path.write_bytes(raw[:8] + b"{not json" + raw[17:])
    with pytest.raises(SafetensorsError, match=r"model\.safetensors: the header is not JSON"):
        load_file(path)


def test_refuses_offsets_out_of_range(tmp_path):
    path = tmp_path / "w.safetensors"
    raw, length, header = good_file(path)
    data = raw[8 + length:]
    path.write_bytes(raw[:-4])                          # the last tensor's bytes cut short
    with pytest.raises(SafetensorsError, match=r"w\.safetensors: tensor 'v' has data_offsets \[24, 32\] outside the data \[0, 28\]"):
        load_file(path)
    header["w"]["data_offsets"] = [0, 20]               # the right place, the wrong size
    with_header(path, header, data)
    with pytest.raises(SafetensorsError, match=r"w\.safetensors: tensor 'w' \(F32, shape \[2, 3\]\) needs 24 bytes"):
        load_file(path)
    header["w"]["data_offsets"] = [-4, 20]
    with_header(path, header, data)
    with pytest.raises(SafetensorsError, match=r"tensor 'w' has data_offsets \[-4, 20\] outside"):
        load_file(path)


def test_refuses_an_unknown_dtype(tmp_path):
    path = tmp_path / "q.safetensors"
    raw, length, header = good_file(path)
    header["v"]["dtype"] = "F8_E4M3"
    with_header(path, header, raw[8 + length:])
    with pytest.raises(SafetensorsError, match=r"q\.safetensors: tensor 'v' has dtype 'F8_E4M3', which is not supported"):
        load_file(path)


def test_refuses_a_missing_or_wrong_shard(tmp_path):
    model = randomised("llama", False)
    files = save_pretrained(model, tmp_path, max_shard_size=SHARD_BYTES)
    index = json.loads((tmp_path / INDEX_NAME).read_text())
    (tmp_path / files[1]).rename(tmp_path / "elsewhere.safetensors")
    with pytest.raises(FileNotFoundError, match=rf"shard\(s\) \['{files[1]}'\] listed in {INDEX_NAME} are missing"):
        from_pretrained(tmp_path)
    (tmp_path / "elsewhere.safetensors").rename(tmp_path / files[1])
    name = next(n for n, f in index["weight_map"].items() if f == files[0])
    index["weight_map"][name] = files[1]                # the index points at a shard that lacks the tensor
    (tmp_path / INDEX_NAME).write_text(json.dumps(index))
    with pytest.raises(SafetensorsError, match=rf"{files[1]}: no tensor\(s\) \['{name}'\], which {INDEX_NAME} says it holds"):
        from_pretrained(tmp_path)


def test_refuses_a_folder_without_a_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"config\.json: no model config here"):
        from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (tmp_path / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(FileNotFoundError, match=r"neither model\.safetensors nor .* \(only \['pytorch_model\.bin'\]: PyTorch pickles"):
        from_pretrained(tmp_path)


def test_save_pretrained_checks_its_arguments_and_cleans_old_shards(tmp_path):
    model = randomised("gpt2", True)
    for bad in (0, -5, "5 parsecs", 2.5, True):
        with pytest.raises(ValueError, match="max_shard_size must be"):
            save_pretrained(model, tmp_path, max_shard_size=bad)
    with pytest.raises(TypeError, match="the saved weights"):
        save_pretrained(model, tmp_path, dtype=np.int32)
    assert not any(tmp_path.iterdir()), "nothing written on a refused call"
    files = save_pretrained(model, tmp_path, max_shard_size="3KB")
    assert len(files) > 1 and all((tmp_path / f).is_file() for f in files)
    save_pretrained(model, tmp_path, max_shard_size="1MiB")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", WEIGHTS_NAME]
