"""Checkpoints to and from open binary files (module 03's `save`/`load`), as well as to paths.

CS336's checkpointing saves to a path *or* an open binary file (`open(..., "wb")`, `io.BytesIO`).
"""
import io

import numpy as np
import pytest

from tinytorch.core.checkpoint import CheckpointError, load, load_into, save
from tinytorch.core.layers import Linear


def test_save_to_and_load_from_a_bytes_buffer():
    model = Linear(3, 2, seed=0)
    buffer = io.BytesIO()
    assert save(model, buffer) is buffer
    buffer.seek(0)
    state = load(buffer)
    assert list(state) == ["weight", "bias"]
    for name, array in model.state_dict().items():
        assert np.array_equal(state[name], array) and state[name].dtype == array.dtype


def test_a_file_object_is_read_and_written_from_its_current_position(tmp_path):
    with open(tmp_path / "two.bin", "wb") as file:
        file.write(b"header")
        save({"w": np.arange(4.0)}, file)
    with open(tmp_path / "two.bin", "rb") as file:
        assert file.read(6) == b"header"
        assert np.array_equal(load(file)["w"], np.arange(4.0))


def test_load_into_accepts_a_file_object(tmp_path):
    source, target = Linear(3, 2, seed=1), Linear(3, 2, seed=2)
    with open(tmp_path / "m.npz", "wb") as file:
        save(source, file)
    with open(tmp_path / "m.npz", "rb") as file:
        load_into(target, file)
    assert np.array_equal(source.weight.data, target.weight.data)


def test_text_files_and_damaged_bytes_are_refused_clearly():
    with pytest.raises(TypeError, match="binary mode"):
        save({"w": np.ones(2)}, io.StringIO())
    with pytest.raises(TypeError, match="binary mode"):
        load(io.StringIO("PK"))
    with pytest.raises(CheckpointError, match="not a zip archive"):
        load(io.BytesIO(b"not a checkpoint"))
    buffer = io.BytesIO()
    save({"w": np.ones(2)}, buffer)
    with pytest.raises(CheckpointError, match="damaged or not a tinytorch checkpoint"):
        load(io.BytesIO(buffer.getvalue()[:-40]))
