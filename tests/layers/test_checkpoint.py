"""Checkpoints (tinytorch.core.checkpoint): the .npz format, never unpickling, atomic saves, and loading
damaged, tampered or mismatched files (one documented error, CheckpointError, and an unchanged model),
including a fuzz test that flips random bytes of a saved checkpoint 200 times.

Module 03's tests use modules 01-03 only, so the models here are built from Parameter, Linear and Sequential
(a `Table` picks rows by indexing, named like an embedding: `token_embedding.weight`). Checkpoints of the
module 11 embeddings, and their trip to PyTorch, are tested in tests/embeddings/test_interop.py."""
import io
import json
import os
import struct
import zipfile
from collections import Counter

import numpy as np
import pytest

from tinytorch.core.checkpoint import (
    CHECKPOINT_FORMAT_VERSION,
    FORMAT_KEY,
    MANIFEST_KEY,
    CheckpointError,
    load,
    load_into,
    save,
)
from tinytorch.core import checkpoint
from tinytorch.core.layers import Linear, Module, Parameter, Sequential
from tinytorch.core.tensor import Tensor

F64 = np.float64


# ------------------------------------------------------------------------------------------------ helpers

class Table(Module):
    "A (rows, width) lookup table: ids (*) -> weight[ids] (*, width), by tensor indexing."

    def __init__(self, rows, width, seed, dtype=None):
        self.weight = Parameter(np.random.default_rng(seed).standard_normal((rows, width)), dtype=dtype)

    def forward(self, ids):
        return self.weight[np.asarray(ids)]


class TinyLanguageModel(Module):
    "Token and position tables and an output head, named as GPT-2-style models name them."

    def __init__(self, seed, max_seq_len=5, vocab_size=12, width=4):
        self.token_embedding = Table(vocab_size, width, seed)
        self.position_embedding = Table(max_seq_len, width, seed + 1)
        self.head = Linear(width, 3, seed=seed)

    def forward(self, tokens):
        tokens = np.asarray(tokens)
        return self.head(self.token_embedding(tokens) + self.position_embedding(np.arange(tokens.shape[-1])))


def small_language_model(seed, **sizes):
    return TinyLanguageModel(seed, **sizes)


def snapshot(module):
    return {name: (p.data.dtype, p.data.tobytes()) for name, p in module.named_parameters()}


def members(blob):
    "name -> bytes of every member of the zip in `blob`, in order."
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def rezip(entries):
    "A new, valid zip (fresh CRC-32s) holding `entries` (name -> bytes), uncompressed."
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def npy_bytes(array, allow_pickle=False):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.asarray(array), allow_pickle=allow_pickle)
    return buffer.getvalue()


def last_data_byte(blob, member):
    "Offset of the last byte of an uncompressed member's data in the zip bytes `blob`."
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        info = archive.getinfo(member)
    name_length, extra_length = struct.unpack_from("<HH", blob, info.header_offset + 26)
    return info.header_offset + 30 + name_length + extra_length + info.compress_size - 1


def flip(blob, offset, mask=0xFF):
    return blob[:offset] + bytes([blob[offset] ^ mask]) + blob[offset + 1:]


def leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def saved(tmp_path):
    model = small_language_model(seed=0)
    path = save(model, tmp_path / "model.npz")
    return model, path


# ------------------------------------------------------------------------------------------------ format

def test_round_trip_keeps_names_order_dtypes_and_bits(saved):
    model, path = saved
    state = load(path)
    assert list(state) == ["token_embedding.weight", "position_embedding.weight", "head.weight", "head.bias"]
    assert list(state) == list(model.state_dict())
    for name, array in model.state_dict().items():
        assert state[name].dtype == array.dtype and state[name].tobytes() == array.tobytes(), name


def test_load_into_gives_identical_outputs_and_keeps_tied_weights(saved, tmp_path):
    model, path = saved
    other = small_language_model(seed=1)
    assert load_into(other, path) == ([], [])
    tokens = np.array([[1, 2, 3, 11], [0, 5, 5, 7]])
    assert np.array_equal(other(tokens).data, model(tokens).data)

    class Tied(Module):
        def __init__(self, seed):
            self.token_embedding = Table(6, 3, seed)
            self.head = self.token_embedding.weight          # the output head shares the table

    source, target = Tied(0), Tied(1)
    load_into(target, save(source, tmp_path / "tied.npz"))
    assert list(load(tmp_path / "tied.npz")) == ["token_embedding.weight"], "a shared parameter is saved once"
    assert target.head is target.token_embedding.weight and np.array_equal(target.head.data, source.head.data)


def test_the_file_is_a_plain_uncompressed_npz_with_a_version_and_a_manifest(saved):
    model, path = saved
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
    assert [i.filename for i in infos] == [f"{name}.npy" for name in (FORMAT_KEY, MANIFEST_KEY, *model.state_dict())]
    assert {i.compress_type for i in infos} == {zipfile.ZIP_STORED}
    with np.load(path, allow_pickle=False) as plain:
        assert plain[FORMAT_KEY].dtype == np.int64 and int(plain[FORMAT_KEY]) == CHECKPOINT_FORMAT_VERSION == 1
        manifest = json.loads(str(plain[MANIFEST_KEY]))
        assert [entry["name"] for entry in manifest] == list(model.state_dict())
        first = manifest[0]
        assert first["dtype"] == "<f4" and first["shape"] == [12, 4] and len(first["sha256"]) == 64
        assert np.array_equal(plain["head.bias"], model.state_dict()["head.bias"])


@pytest.mark.parametrize("array", [
    np.arange(6, dtype=F64).reshape(2, 3),
    np.array([True, False, True]),
    np.array(7, dtype=np.int64),
    np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),
    np.arange(4, dtype=">f4"),
    np.zeros((0, 5), np.float16),
    np.arange(12, dtype=np.uint8).reshape(2, 2, 3)[:, ::-1],
], ids=["float64", "bool", "int64-0d", "fortran", "big-endian", "empty-float16", "strided-uint8"])
def test_any_numeric_array_round_trips_exactly(tmp_path, array):
    state = load(save({"x": array}, tmp_path / "one.npz"))
    assert state["x"].dtype == array.dtype and state["x"].shape == array.shape and np.array_equal(state["x"], array)


def test_mappings_with_tensors_and_unusual_names(tmp_path):
    state = {"blocks/0.weight": Tensor(np.ones((2, 2))), "é.ünïcode": np.zeros(2, np.float32), "file": np.ones(1),
             "allow_pickle": np.ones(1)}
    back = load(save(state, tmp_path / "names.npz"))
    assert list(back) == list(state)
    assert np.array_equal(back["blocks/0.weight"], np.ones((2, 2), np.float32))


def test_save_writes_exactly_the_path_it_is_given_and_returns_it(tmp_path):
    returned = save({"x": np.ones(2)}, str(tmp_path / "weights.ckpt"))
    assert returned == tmp_path / "weights.ckpt" and returned.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["weights.ckpt"], "no .npz suffix, no temporary file"


@pytest.mark.parametrize("state, error, message", [
    ({"weight": np.array([object()], dtype=object)}, TypeError, r"dtype object: .* pickle"),
    ({"names": np.array(["a", "b"])}, TypeError, r"state\['names'\] has dtype <U1"),
    ({"z": np.array([1j])}, TypeError, r"dtype complex128"),
    ({"__tinytorch_format__": np.ones(1)}, ValueError, r"'__tinytorch_format__' is reserved"),
    ({"__tinytorch_extra": np.ones(1)}, ValueError, r"reserved"),
    ({3: np.ones(1)}, TypeError, r"non-empty strings; got 3"),
    ({"": np.ones(1)}, TypeError, r"non-empty strings; got ''"),
    ([np.ones(1)], TypeError, r"a Module or a state dict .* got list"),
])
def test_save_refuses_what_cannot_be_loaded_safely_and_keeps_the_old_file(tmp_path, state, error, message):
    path = save({"x": np.arange(3.0)}, tmp_path / "model.npz")
    before = path.read_bytes()
    with pytest.raises(error, match=message):
        save(state, path)
    assert path.read_bytes() == before and leftovers(tmp_path) == []


# ------------------------------------------------------------------------------------------------ atomic writes

class SimulatedCrash(RuntimeError):
    pass


def crash_in_writer(monkeypatch, on_call, exception=SimulatedCrash("disk full")):
    "Make NumPy's array writer write half an array on its `on_call`-th call and raise."
    original, calls = np.lib.format.write_array, []

    def half_then_raise(stream, array, *args, **kwargs):
        calls.append(array)
        if len(calls) == on_call:
            stream.write(np.ascontiguousarray(array).tobytes()[: max(1, array.nbytes // 2)])
            raise exception
        return original(stream, array, *args, **kwargs)

    monkeypatch.setattr(np.lib.format, "write_array", half_then_raise)
    return calls


@pytest.mark.parametrize("on_call", [1, 2, 3, 6])
@pytest.mark.parametrize("exception", [SimulatedCrash("disk full"), KeyboardInterrupt()], ids=["error", "ctrl-c"])
def test_an_interrupted_save_keeps_the_previous_checkpoint_and_leaves_no_temporary_file(
        saved, tmp_path, monkeypatch, on_call, exception):
    model, path = saved
    before = path.read_bytes()
    calls = crash_in_writer(monkeypatch, on_call, exception)
    with pytest.raises(type(exception)):
        save(small_language_model(seed=7), path)
    assert len(calls) == on_call, "the crash happened where it was simulated"
    monkeypatch.undo()
    assert path.read_bytes() == before and leftovers(tmp_path) == []
    assert all(np.array_equal(a, b) for a, b in zip(load(path).values(), model.state_dict().values()))


def test_an_interrupted_first_save_creates_nothing(tmp_path, monkeypatch):
    crash_in_writer(monkeypatch, on_call=3)
    with pytest.raises(SimulatedCrash):
        save(small_language_model(seed=0), tmp_path / "new.npz")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_a_failing_rename_or_fsync_keeps_the_old_file(saved, tmp_path, monkeypatch, failing):
    _, path = saved
    before = path.read_bytes()

    def refuse(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, refuse)
    with pytest.raises(OSError, match="No space left"):
        save(small_language_model(seed=3), path)
    monkeypatch.undo()
    assert path.read_bytes() == before and leftovers(tmp_path) == []


def test_a_completed_save_replaces_the_old_checkpoint(saved, tmp_path):
    _, path = saved
    newer = small_language_model(seed=5)
    save(newer, path)
    assert all(np.array_equal(a, b) for a, b in zip(load(path).values(), newer.state_dict().values()))
    assert leftovers(tmp_path) == []


# ------------------------------------------------------------------------------------------------ never pickle

UNPICKLED = []


def record_unpickling(tag):
    "What a hostile pickle in these tests would call: it only records that it ran."
    UNPICKLED.append(tag)


class Payload:
    def __reduce__(self):
        return record_unpickling, ("payload ran",)


def hostile_checkpoint(path):
    "A checkpoint-shaped .npz whose 'weight' is an object array holding a pickle (NumPy's default writer)."
    listing = [{"name": "weight", "dtype": "|O", "shape": [1], "sha256": "0" * 64}]
    np.savez(path, **{FORMAT_KEY: np.array(1), MANIFEST_KEY: np.array(json.dumps(listing)),
                      "weight": np.array([Payload()], dtype=object)})


def test_a_pickle_inside_a_checkpoint_is_refused_and_never_runs(tmp_path):
    path = tmp_path / "hostile.npz"
    hostile_checkpoint(path)
    UNPICKLED.clear()
    with np.load(path, allow_pickle=True) as unsafe:      # the payload is live: unpickling would run it
        unsafe["weight"]
    assert UNPICKLED == ["payload ran"]
    UNPICKLED.clear()
    target = Sequential(Linear(2, 2, seed=0))
    before = snapshot(target)
    with pytest.raises(CheckpointError, match=r"entry 'weight' holds Python objects \(dtype object\): reading it "
                                              r"would mean unpickling"):
        load(path)
    with pytest.raises(CheckpointError):
        load_into(target, path)
    assert UNPICKLED == [] and snapshot(target) == before


# ------------------------------------------------------------------------------------------------ loading bad files

def test_a_missing_path_is_file_not_found_not_a_damaged_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nope.npz")
    assert not issubclass(FileNotFoundError, CheckpointError)
    assert issubclass(CheckpointError, ValueError)


def build(saved_blob, replace=None, drop=(), add=None):
    "A valid zip made from a saved checkpoint's members, with some replaced, dropped or added (fresh CRCs)."
    entries = {k: v for k, v in members(saved_blob).items() if k not in drop}
    entries.update(replace or {})
    entries.update(add or {})
    return rezip(entries)


def manifest_of(blob):
    with np.load(io.BytesIO(blob), allow_pickle=False) as plain:
        return json.loads(str(plain[MANIFEST_KEY]))


BAD_FILES = {
    "empty": (lambda blob: b"", r"not a zip archive"),
    "text": (lambda blob: b"hello, I am not a checkpoint", r"not a zip archive"),
    "single npy": (lambda blob: npy_bytes(np.ones(3)), r"not a zip archive"),
    "truncated half": (lambda blob: blob[: len(blob) // 2], r"damaged .*BadZipFile"),
    "truncated last byte": (lambda blob: blob[:-1], r"damaged"),
    "zip without format": (lambda blob: build(blob, drop=[f"{FORMAT_KEY}.npy"]), r"no '__tinytorch_format__' entry"),
    "format 2": (lambda blob: build(blob, replace={f"{FORMAT_KEY}.npy": npy_bytes(np.array(2))}),
                 r"checkpoint format 2; this tinytorch reads format 1 only"),
    "format as text": (lambda blob: build(blob, replace={f"{FORMAT_KEY}.npy": npy_bytes(np.array("1"))}),
                       r"checkpoint format '1'"),
    "no manifest": (lambda blob: build(blob, drop=[f"{MANIFEST_KEY}.npy"]), r"no '__tinytorch_manifest__' entry"),
    "manifest not json": (lambda blob: build(blob, replace={f"{MANIFEST_KEY}.npy": npy_bytes(np.array("[{"))}),
                          r"damaged .*JSONDecodeError"),
    "manifest of numbers": (lambda blob: build(blob, replace={f"{MANIFEST_KEY}.npy": npy_bytes(np.arange(3))}),
                            r"manifest is not a string"),
    "manifest records": (lambda blob: build(blob, replace={f"{MANIFEST_KEY}.npy": npy_bytes(np.array('[{"a": 1}]'))}),
                         r"not a list of \{name, dtype, shape, sha256\} records"),
    "array missing": (lambda blob: build(blob, drop=["head.bias.npy"]), r"missing \['head.bias'\], not listed \[\]"),
    "array not listed": (lambda blob: build(blob, add={"extra.npy": npy_bytes(np.ones(2))}),
                         r"missing \[\], not listed \['extra'\]"),
    "member not npy": (lambda blob: build(blob, add={"README.txt": b"hi"}), r"one .npy member per name"),
    "values edited, CRC fixed": (
        lambda blob: build(blob, replace={"head.bias.npy": npy_bytes(np.array([9, 9, 9], np.float32))}),
        r"array 'head.bias' fails its SHA-256 check"),
    "dtype changed": (lambda blob: build(blob, replace={"head.bias.npy": npy_bytes(np.zeros(3, F64))}),
                      r"array 'head.bias' is <f8 \[3\] but the manifest says <f4 \[3\]"),
    "shape changed": (lambda blob: build(blob, replace={"head.bias.npy": npy_bytes(np.zeros((1, 3), np.float32))}),
                      r"array 'head.bias' is <f4 \[1, 3\] but the manifest says <f4 \[3\]"),
    "header claims a terabyte": (
        lambda blob: build(blob, replace={"head.bias.npy": npy_bytes(np.zeros(3, np.float32)).replace(
            b"(3,)", b"(250000000000,)".ljust(4))}),
        r"entry 'head.bias' claims shape \(250000000000,\) of float32, more than the \d+ bytes it holds"),
    "magic damaged": (lambda blob: build(blob, replace={"head.bias.npy": b"XNUMPY" + npy_bytes(np.zeros(3))[6:]}),
                      r"damaged .*ValueError"),
}


@pytest.mark.parametrize("case", BAD_FILES, ids=list(BAD_FILES))
def test_every_bad_file_raises_checkpoint_error_naming_the_path_and_the_problem_and_changes_nothing(
        saved, tmp_path, case):
    model, path = saved
    make, message = BAD_FILES[case]
    bad = tmp_path / "bad.npz"
    bad.write_bytes(make(path.read_bytes()))
    target = small_language_model(seed=9)
    before = snapshot(target)
    with pytest.raises(CheckpointError, match=message) as caught:
        load(bad)
    assert str(caught.value).startswith(str(bad))
    with pytest.raises(CheckpointError):
        load_into(target, bad)
    assert snapshot(target) == before


def test_the_manifest_must_list_every_array_and_the_same_dtype(saved, tmp_path):
    _, path = saved
    blob = path.read_bytes()
    listing = manifest_of(blob)
    listing[-1]["dtype"] = "<f8"
    bad = tmp_path / "bad.npz"
    bad.write_bytes(build(blob, replace={f"{MANIFEST_KEY}.npy": npy_bytes(np.array(json.dumps(listing)))}))
    with pytest.raises(CheckpointError, match=r"'head.bias' is <f4 \[3\] but the manifest says <f8 \[3\]"):
        load(bad)
    listing = manifest_of(blob) + [manifest_of(blob)[0]]          # a name listed twice
    bad.write_bytes(build(blob, replace={f"{MANIFEST_KEY}.npy": npy_bytes(np.array(json.dumps(listing)))}))
    with pytest.raises(CheckpointError, match="do not match the manifest"):
        load(bad)


def test_a_duplicated_zip_member_is_refused(saved, tmp_path):
    _, path = saved
    blob = path.read_bytes()
    buffer = io.BytesIO(blob)
    with pytest.warns(UserWarning, match="Duplicate name"):
        with zipfile.ZipFile(buffer, "a") as archive:      # a second 'head.bias.npy' with other values
            archive.writestr("head.bias.npy", npy_bytes(np.ones(3, np.float32)))
    bad = tmp_path / "bad.npz"
    bad.write_bytes(buffer.getvalue())
    with pytest.raises(CheckpointError, match="one .npy member per name"):
        load(bad)


def test_zip_crc32_catches_a_flipped_data_byte_and_sha256_catches_an_edit_that_keeps_the_zip_valid(saved, tmp_path):
    """Does NumPy's .npz reader verify the zip CRC-32? Yes: zipfile checks it when a member is read to its end,
    which read_array does. An edit that rewrites the member (fresh CRC) gets past zipfile; the SHA-256 catches it."""
    _, path = saved
    blob = path.read_bytes()
    flipped = tmp_path / "flipped.npz"
    flipped.write_bytes(flip(blob, last_data_byte(blob, "head.weight.npy"), 0x01))
    with np.load(flipped, allow_pickle=False) as plain, pytest.raises(zipfile.BadZipFile, match="Bad CRC-32"):
        plain["head.weight"]
    with pytest.raises(CheckpointError, match="Bad CRC-32 for file 'head.weight.npy'") as caught:
        load(flipped)
    assert isinstance(caught.value.__cause__, zipfile.BadZipFile)

    edited_weight = np.load(io.BytesIO(members(blob)["head.weight.npy"]), allow_pickle=False).copy()
    edited_weight.reshape(-1)[-1] = np.nextafter(edited_weight.reshape(-1)[-1], np.inf)   # one ulp
    edited = tmp_path / "edited.npz"
    edited.write_bytes(build(blob, replace={"head.weight.npy": npy_bytes(edited_weight)}))
    with np.load(edited, allow_pickle=False) as plain:
        assert plain["head.weight"].shape == (4, 3), "the zip itself is valid"
    with pytest.raises(CheckpointError, match="'head.weight' fails its SHA-256 check") as caught:
        load(edited)
    assert caught.value.__cause__ is None


@pytest.mark.parametrize("length_fraction", np.linspace(0, 0.999, 25).tolist())
def test_truncation_anywhere_raises_checkpoint_error(saved, tmp_path, length_fraction):
    _, path = saved
    blob = path.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(blob[: int(len(blob) * length_fraction)])
    with pytest.raises(CheckpointError):
        load(cut)


# ------------------------------------------------------------------------------------------------ load_into

def test_load_into_refuses_another_models_checkpoint_and_changes_nothing(tmp_path):
    target = small_language_model(seed=0)
    before = snapshot(target)
    longer = small_language_model(seed=1, max_seq_len=6)
    no_head = {k: v for k, v in small_language_model(seed=1).state_dict().items() if not k.startswith("head.")}
    extra = dict(small_language_model(seed=1).state_dict(), **{"head2.weight": np.ones((3, 3), np.float32)})
    for source, message in [(longer, r"\['position_embedding.weight'\] has shape \(6, 4\) but the "
                                      r"parameter .* has shape \(5, 4\)"),
                            (no_head, r"missing key\(s\) \['head.weight', 'head.bias'\]"),
                            (extra, r"unexpected key\(s\) \['head2.weight'\]")]:
        path = save(source, tmp_path / "other.npz")
        with pytest.raises(CheckpointError, match=r"other.npz does not fit this TinyLanguageModel: .*" + message):
            load_into(target, path)
        assert snapshot(target) == before


def test_load_into_non_strict_reports_but_still_checks_shapes(tmp_path):
    target = small_language_model(seed=0)
    path = save(dict(small_language_model(seed=1).state_dict(), extra=np.ones(2)), tmp_path / "extra.npz")
    assert load_into(target, path, strict=False) == ([], ["extra"])
    assert np.array_equal(target.state_dict()["head.bias"], load(path)["head.bias"])


def test_load_into_casts_to_each_parameters_dtype(tmp_path):
    source = Table(6, 3, seed=0, dtype=F64)
    target = Table(6, 3, seed=1)
    load_into(target, save(source, tmp_path / "f64.npz"))
    assert target.weight.dtype == np.float32
    assert np.array_equal(target.weight.data, source.weight.data.astype(np.float32))


# ------------------------------------------------------------------------------------------------ fuzz

FUZZ_ROUNDS = 200


def test_200_random_byte_flips_either_load_identical_tensors_or_raise_checkpoint_error(tmp_path):
    """Flip 1-3 random bytes (seeded) of a small checkpoint, 200 times. A small model keeps the zip and .npy
    structure (headers, central directory, manifest) a large share of the file, so flips land everywhere."""
    model = Sequential(Table(5, 3, seed=0), Linear(3, 2, seed=0))
    path = save(model, tmp_path / "model.npz")
    blob = path.read_bytes()
    expected = load(path)
    rng = np.random.default_rng(2024)
    outcomes, causes = Counter(), Counter()
    damaged = tmp_path / "damaged.npz"
    for _ in range(FUZZ_ROUNDS):
        data = bytearray(blob)
        for offset in rng.choice(len(data), size=rng.integers(1, 4), replace=False):
            data[offset] ^= int(rng.integers(1, 256))
        damaged.write_bytes(bytes(data))
        try:
            state = load(damaged)
        except CheckpointError as error:
            outcomes["CheckpointError"] += 1
            causes[type(error.__cause__).__name__ if error.__cause__ else "own check"] += 1
            continue
        outcomes["identical"] += 1
        assert list(state) == list(expected)
        for name, array in expected.items():
            assert state[name].dtype == array.dtype and state[name].tobytes() == array.tobytes(), name
    assert sum(outcomes.values()) == FUZZ_ROUNDS
    assert outcomes["CheckpointError"] > FUZZ_ROUNDS // 2, outcomes
    assert len(causes) >= 3, f"damage should surface in several layers (zip, npy header, our checks): {causes}"
    assert leftovers(tmp_path) == []


def test_200_random_edits_inside_members_with_valid_crcs_are_caught_past_zipfile(tmp_path):
    """The zip CRC-32 stops almost every flip above before NumPy sees it. Here each round flips 1-2 bytes inside
    one member and re-zips it with a fresh CRC, as an editor would: NumPy's header parser (ValueError, and
    tokenize.TokenError, which is not a ValueError), json, and our own checks (SHA-256, manifest) must catch it."""
    model = Sequential(Table(5, 3, seed=0), Linear(3, 2, seed=0))
    blob = save(model, tmp_path / "model.npz").read_bytes()
    expected, original = load(tmp_path / "model.npz"), members(blob)
    rng = np.random.default_rng(7)
    causes = Counter()
    damaged = tmp_path / "damaged.npz"
    for _ in range(FUZZ_ROUNDS):
        entries = dict(original)
        name = list(entries)[rng.integers(len(entries))]
        data = bytearray(entries[name])
        for offset in rng.choice(len(data), size=rng.integers(1, 3), replace=False):
            data[offset] ^= int(rng.integers(1, 256))
        entries[name] = bytes(data)
        damaged.write_bytes(rezip(entries))
        try:
            state = load(damaged)
        except CheckpointError as error:
            cause = error.__cause__
            causes[type(cause).__name__ if cause else "SHA-256" if "SHA-256" in str(error) else "own check"] += 1
            continue
        causes["identical"] += 1
        assert all(state[k].dtype == v.dtype and state[k].tobytes() == v.tobytes() for k, v in expected.items())
    assert sum(causes.values()) == FUZZ_ROUNDS
    assert {"ValueError", "JSONDecodeError", "SHA-256", "own check"} <= set(causes), causes


# ================================================================ issue 23: reliability, third pass
# ---------------------------------------------------------------- defect 7: names are checked before anything is written

@pytest.mark.parametrize("state, error, message", [
    ({"w": np.ones(2), "w.npy": np.zeros(3)}, ValueError, r"'w.npy' and 'w' .* same entry"),
    ({"w.npy": np.zeros(3), "w": np.ones(2)}, ValueError, r"'w.npy' and 'w' .* same entry"),
    ({"x" * 70_000: np.ones(1)}, ValueError, r"name of 70000 characters .* at most 65531 bytes"),
    ({"é" * 40_000: np.ones(1)}, ValueError, r"80000 bytes in UTF-8.* at most 65531 bytes"),
    ({"bad\ud800name": np.ones(1)}, ValueError, r"cannot be encoded as UTF-8"),
    ({"cut\x00here": np.ones(1)}, ValueError, r"NUL character"),
], ids=["w.npy-after-w", "w.npy-before-w", "overlong", "overlong-in-bytes", "lone-surrogate", "nul"])
def test_names_that_cannot_be_stored_are_refused_before_writing_and_the_old_checkpoint_survives(
        tmp_path, state, error, message):
    path = save({"x": np.arange(3.0)}, tmp_path / "model.npz")
    before = path.read_bytes()
    with pytest.raises(error, match=message):
        save(state, path)
    assert path.read_bytes() == before and leftovers(tmp_path) == []
    assert list(load(path)) == ["x"]


def test_the_longest_storable_name_and_a_lone_w_npy_round_trip(tmp_path):
    longest = "n" * (0xFFFF - len(".npy"))
    state = {longest: np.ones(2), "w.npy": np.arange(3.0), "v": np.zeros(1)}
    back = load(save(state, tmp_path / "edge.npz"))
    assert list(back) == list(state) and np.array_equal(back["w.npy"], np.arange(3.0))


# ------------------------------------------------------------------------------------------------ odd save paths (issue 15, defect 10)

def test_save_into_a_missing_directory_names_the_path_asked_for(tmp_path):
    path = tmp_path / "no-such-directory" / "model.npz"
    with pytest.raises(FileNotFoundError) as caught:
        checkpoint.save(Linear(2, 2, seed=0), path)
    assert str(path) in str(caught.value) and ".tmp" not in str(caught.value)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_save_onto_a_symlink_writes_through_it(tmp_path):
    real, link = tmp_path / "checkpoints" / "real.npz", tmp_path / "latest.npz"
    real.parent.mkdir()
    checkpoint.save(Linear(2, 2, seed=0), real)
    link.symlink_to(real)
    newer = Linear(2, 2, seed=1)
    assert checkpoint.save(newer, link) == link
    assert link.is_symlink() and link.resolve() == real.resolve()
    np.testing.assert_array_equal(checkpoint.load(real)["weight"], newer.weight.data)
    assert sorted(p.name for p in real.parent.iterdir()) == ["real.npz"], "no temporary file left behind"


# ------------------------------------------------------------------------------------------------ issue 23, second part
# A member may not expand beyond what its shape and dtype need, nor beyond the file's own size.

def _recompressed(blob, compression, pad=b""):
    "The checkpoint `blob` rewritten with every member compressed by `compression` and `pad` appended to each array."
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in members(blob).items():
            archive.writestr(name, data + (pad if not name.startswith("__") else b""))
    return buffer.getvalue()


def test_a_deflate_bomb_is_refused_before_it_is_decompressed(tmp_path, monkeypatch):
    path = save({"zeros": np.zeros(2_000_000, np.float32)}, tmp_path / "bomb.npz")   # 8 MB of zeros
    bomb = _recompressed(path.read_bytes(), zipfile.ZIP_DEFLATED)
    assert len(bomb) * 200 < path.stat().st_size, "the test needs a real bomb: a ratio of hundreds to one"
    path.write_bytes(bomb)
    reads = []
    original_open = zipfile.ZipFile.open
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda self, name, *a, **k: reads.append(name) or
                        original_open(self, name, *a, **k))
    with pytest.raises(CheckpointError, match="compress"):
        load(path)
    assert not any("zeros" in str(getattr(name, "filename", name)) for name in reads), "refused unread"


def test_a_member_longer_than_its_shape_needs_is_refused(tmp_path):
    path = save({"w": np.arange(6.0)}, tmp_path / "padded.npz")
    path.write_bytes(_recompressed(path.read_bytes(), zipfile.ZIP_STORED, pad=b"\0" * 100_000))
    with pytest.raises(CheckpointError, match="'w'.*100"):
        load(path)
