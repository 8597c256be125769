"""Module 08, data: token files written in bounded memory, memory-mapped, and batches with CS336's semantics.

`get_batch(dataset, batch_size, context_length, rng)`: x = tokens[i:i+m], y = tokens[i+1:i+m+1], i uniform in
0 .. N - m - 1 inclusive, seeded, reading only the windows of a memory-mapped file.
"""
import itertools
import tracemalloc

import numpy as np
import pytest

from tinytorch.data import _check_chunk, get_batch, open_tokens, sequential_batches, write_tokens


class CountingTokens:
    "A 1-D token array that counts the elements read through it (a stand-in for a file far larger than memory)."

    def __init__(self, array):
        self.array, self.read, self.reads = array, 0, 0
        self.ndim, self.dtype = array.ndim, array.dtype

    def __len__(self):
        return len(self.array)

    def __getitem__(self, index):
        values = self.array[index]
        self.read += np.size(values)
        self.reads += 1
        return values

    def __array__(self, *args, **kwargs):
        raise AssertionError("the whole dataset was converted to an array")


def test_cs336_get_batch_semantics():
    """CS336's test: dataset 0..99, context 7, batch 32; starts in [0, 92], all reachable, roughly uniform."""
    dataset = np.arange(0, 100)
    rng = np.random.default_rng(0)
    starts = []
    for _ in range(1000):
        x, y = get_batch(dataset, batch_size=32, context_length=7, rng=rng)
        assert x.shape == y.shape == (32, 7)
        np.testing.assert_array_equal(x + 1, y)
        starts.extend(x[:, 0].tolist())
    counts = np.bincount(starts, minlength=100)
    np.testing.assert_array_equal(counts > 0, np.arange(100) < 93, "every start 0..92 drawn and nothing beyond")
    expected = 32 * 1000 / 93
    standard_deviation = np.sqrt(32 * 1000 * (1 / 93) * (1 - 1 / 93))
    assert np.all(np.abs(counts[:93] - expected) < 5 * standard_deviation)


@pytest.mark.parametrize("length, context_length", [(2, 1), (8, 7), (10, 3), (1000, 64)])
def test_every_window_is_reachable_including_the_last(length, context_length):
    dataset = np.arange(length, dtype=np.uint16)
    rng = np.random.default_rng(1)
    seen = set()
    for _ in range(400):
        seen.update(get_batch(dataset, 64, context_length, rng)[0][:, 0].tolist())
    assert sorted(seen) == list(range(length - context_length))


def test_get_batch_is_seeded_and_a_generator_advances():
    dataset = np.arange(500)
    assert np.array_equal(get_batch(dataset, 4, 8, 3)[0], get_batch(dataset, 4, 8, 3)[0])
    assert np.array_equal(get_batch(dataset, 4, 8, np.random.default_rng(3))[0], get_batch(dataset, 4, 8, 3)[0])
    rng = np.random.default_rng(3)
    assert not np.array_equal(get_batch(dataset, 4, 8, rng)[0], get_batch(dataset, 4, 8, rng)[0])
    per_iteration = [get_batch(dataset, 4, 8, np.random.default_rng([0, it]))[0] for it in (5, 5, 6)]
    assert np.array_equal(per_iteration[0], per_iteration[1]) and not np.array_equal(per_iteration[0], per_iteration[2])


def test_get_batch_reads_only_the_windows():
    tokens = CountingTokens(np.arange(1_000_000, dtype=np.uint16) % 50_000)
    x, y = get_batch(tokens, 8, 32, 0)
    assert tokens.read == 8 * 33 and tokens.reads == 1
    assert x.dtype == np.int64 and np.array_equal(y[:, :-1], x[:, 1:])


def test_get_batch_on_a_memmap_file(tmp_path):
    ids = np.random.default_rng(0).integers(0, 50_257, 200_000)
    write_tokens(iter(ids.tolist()), tmp_path / "t.bin")
    mapped = open_tokens(tmp_path / "t.bin")
    kind = type(mapped).__name__
    assert kind == "memmap"
    assert mapped.dtype == np.uint16 and len(mapped) == 200_000
    x, y = get_batch(mapped, 16, 128, 9)
    expected_x, expected_y = get_batch(ids, 16, 128, 9)
    assert np.array_equal(x, expected_x) and np.array_equal(y, expected_y)
    assert type(x) is np.ndarray and x.dtype == np.int64


def test_get_batch_matches_the_torch_reference_layout(torch):
    """What CS336's reference gives for the same starts: torch.stack of the slices."""
    dataset = np.arange(50, 150)
    rng = np.random.default_rng(4)
    x, y = get_batch(dataset, 5, 9, np.random.default_rng(4))
    starts = rng.integers(0, len(dataset) - 9, size=5)
    reference_x = torch.stack([torch.from_numpy(dataset[i:i + 9].astype(np.int64)) for i in starts])
    reference_y = torch.stack([torch.from_numpy(dataset[i + 1:i + 10].astype(np.int64)) for i in starts])
    assert np.array_equal(x, reference_x.numpy()) and np.array_equal(y, reference_y.numpy())


@pytest.mark.parametrize("call, error, words", [
    (lambda: get_batch(np.arange(10).reshape(2, 5), 1, 2, 0), ValueError, "dataset must be 1-D"),
    (lambda: get_batch(np.linspace(0, 1, 10), 1, 2, 0), TypeError, "dataset must hold integer token ids; got dtype float64"),
    (lambda: get_batch("hello", 1, 2, 0), TypeError, "dataset must be a 1-D array of token ids"),
    (lambda: get_batch(np.arange(10), 0, 2, 0), ValueError, "batch_size must be a positive int"),
    (lambda: get_batch(np.arange(10), 2.0, 2, 0), TypeError, "batch_size must be a positive int"),
    (lambda: get_batch(np.arange(10), 1, True, 0), TypeError, "context_length must be a positive int"),
    (lambda: get_batch(np.arange(10), 1, 10, 0), ValueError, "dataset has 10 tokens; a window of context_length + 1 = 11"),
    (lambda: get_batch(np.arange(10), 1, 2, -1), ValueError, "seed must be a non-negative int"),
    (lambda: get_batch(np.arange(10), 1, 2, "seed"), TypeError, "seed must be a non-negative int"),
])
def test_get_batch_bad_arguments_are_named(call, error, words):
    with pytest.raises(error) as caught:
        call()
    assert words in str(caught.value)


def test_write_tokens_streams_in_bounded_memory(tmp_path):
    peaks = {}
    for count in (200_000, 2_000_000):
        tracemalloc.start()
        written = write_tokens((i % 60_000 for i in range(count)), tmp_path / f"{count}.bin", chunk_size=32_768)
        peaks[count] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert written == count and (tmp_path / f"{count}.bin").stat().st_size == 2 * count
    assert peaks[2_000_000] < 1.5 * peaks[200_000] + 100_000, f"memory grows with the stream: {peaks}"
    assert peaks[2_000_000] < 2_000_000, peaks
    tokens = open_tokens(tmp_path / "2000000.bin")
    assert tokens[59_999] == 59_999 and tokens[60_000] == 0 and tokens[-1] == (2_000_000 - 1) % 60_000


def test_write_tokens_accepts_ints_and_sequences_and_other_dtypes(tmp_path):
    assert write_tokens([[1, 2], np.array([3], np.int32), (4, 5), []], tmp_path / "a.bin") == 5
    assert open_tokens(tmp_path / "a.bin").tolist() == [1, 2, 3, 4, 5]
    assert write_tokens(np.array([7, 8, 9]), tmp_path / "b.bin", dtype=np.int32) == 3
    assert open_tokens(tmp_path / "b.bin", np.int32).tolist() == [7, 8, 9]
    assert write_tokens(iter([100_000, 1]), tmp_path / "c.bin", dtype=np.uint32) == 2
    assert open_tokens(tmp_path / "c.bin", "uint32").tolist() == [100_000, 1]
    assert write_tokens([], tmp_path / "empty.bin") == 0 and len(open_tokens(tmp_path / "empty.bin")) == 0


def test_write_tokens_refuses_what_does_not_fit_and_keeps_the_old_file(tmp_path):
    path = tmp_path / "t.bin"
    write_tokens(range(4), path)
    before = path.read_bytes()
    with pytest.raises(ValueError, match="token id 65536 at position 70000 does not fit in uint16 \\(0 to 65,535\\)"):
        write_tokens(itertools.chain((i % 1000 for i in range(70_000)), [65_536]), path, chunk_size=1000)
    with pytest.raises(ValueError, match="token id -3 at position 1"):
        write_tokens([1, -3], path)
    with pytest.raises(TypeError, match="ids must be integer token ids"):
        write_tokens([1.5, 2.0], path)
    with pytest.raises(TypeError, match="tokenize it first"):
        write_tokens("some text", path)
    with pytest.raises(TypeError, match="dtype must be one of"):
        write_tokens([1], path, dtype=np.float32)
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        write_tokens([1], path, chunk_size=0)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        write_tokens([1], tmp_path / "missing" / "t.bin")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.bin"], "no temporary file left behind"


def test_open_tokens_refuses_a_size_that_does_not_fit_the_dtype(tmp_path):
    (tmp_path / "odd.bin").write_bytes(b"\x01\x00\x02")
    with pytest.raises(ValueError, match="3 bytes, not a whole number of uint16 tokens"):
        open_tokens(tmp_path / "odd.bin")
    with pytest.raises(FileNotFoundError):
        open_tokens(tmp_path / "missing.bin")


def test_sequential_batches_targets_are_the_inputs_one_token_later():
    dataset = np.arange(100, 150)
    for inputs, targets in sequential_batches(dataset, 3, 5):
        np.testing.assert_array_equal(targets, inputs + 1)


def test_get_batch_draws_the_last_window_of_a_tiny_stream():
    """Three windows (starts 0, 1, 2) of 2 tokens in 4 + ... tokens: 300 draws see each about 100 times."""
    starts = get_batch(np.arange(4), 300, 1, np.random.default_rng(0))[0][:, 0]
    assert sorted(set(starts.tolist())) == [0, 1, 2]
    assert np.bincount(starts, minlength=3)[:3].min() > 50


def test_sequential_batches_cover_the_stream_in_order():
    dataset = np.arange(1000)
    batches = sequential_batches(dataset, 4, 10)
    inputs = np.concatenate([x for x, _ in batches])
    targets = np.concatenate([y for _, y in batches])
    assert inputs[:, 0].tolist() == list(range(0, 990, 10))
    assert np.array_equal(targets, inputs + 1) and targets[-1, -1] == 990
    assert len(sequential_batches(dataset, 4, 10, max_batches=3)) == 3
    with pytest.raises(ValueError, match="max_batches must be a positive int"):
        sequential_batches(dataset, 4, 10, max_batches=0)
    with pytest.raises(ValueError, match="dataset has 5 tokens"):
        sequential_batches(np.arange(5), 1, 5)


def test_sequential_batches_read_only_their_windows():
    tokens = CountingTokens(np.arange(100_000, dtype=np.uint16))
    sequential_batches(tokens, 8, 16, max_batches=2)
    assert tokens.read == 2 * 8 * 17


@pytest.mark.parametrize("chunk, start, position", [([5, 70_000, 3], 10, 11), ([-1, 2], 0, 0),
                                                    ([1, 2, 65_536, -4], 7, 9), ([65_535, 65_536], 100, 101)])
def test_check_chunk_names_the_first_id_that_does_not_fit_and_its_stream_position(chunk, start, position):
    message = error_message(lambda: _check_chunk(np.array(chunk, dtype=np.int64), start, np.dtype(np.uint16)))
    expected = f"token id {chunk[position - start]} at position {position} does not fit in uint16"
    assert message[:len(expected)] == expected


def error_message(call):
    "The ValueError message of `call()`, or 'no error' (so a check shows expected against actual text)."
    try:
        call()
    except ValueError as error:
        return str(error)
    return "no error"


def test_write_tokens_names_the_stream_position_of_a_bad_id_in_a_later_chunk(tmp_path):
    ids = [1, 2, 3, 4, 5, 70_000, 6]
    message = error_message(lambda: write_tokens(iter(ids), tmp_path / "t.bin", chunk_size=2))
    expected = "token id 70000 at position 5 does not fit in uint16"
    assert message[:len(expected)] == expected


def test_write_tokens_writes_every_chunk_in_order(tmp_path):
    for count, chunk_size in ((10, 3), (9, 3), (1, 5), (1000, 64)):
        written = write_tokens(iter(range(count)), tmp_path / "t.bin", chunk_size=chunk_size)
        assert written == count
        np.testing.assert_array_equal(np.fromfile(tmp_path / "t.bin", dtype=np.uint16), np.arange(count))


@pytest.mark.parametrize("dtype, chunk", [(np.uint16, [0, 65_535, 7]), (np.uint8, [0, 255]), (np.int32, [2**31 - 1]),
                                          (np.uint16, [])])
def test_check_chunk_accepts_every_id_in_range(dtype, chunk):
    _check_chunk(np.array(chunk, dtype=np.int64), 0, np.dtype(dtype))


def test_write_tokens_reports_its_progress_after_every_chunk(tmp_path):
    reports = []
    assert write_tokens(iter(range(10)), tmp_path / "t.bin", chunk_size=4, callback=reports.append) == 10
    assert reports == [4, 8, 10]
    assert np.array_equal(np.fromfile(tmp_path / "t.bin", dtype=np.uint16), np.arange(10))
    with pytest.raises(TypeError, match="callback must be a function"):
        write_tokens([1], tmp_path / "u.bin", callback="print")


def test_write_tokens_prints_nothing(tmp_path, capsys):
    write_tokens(range(100), tmp_path / "t.bin", chunk_size=7)
    assert capsys.readouterr() == ("", "")


def test_open_tokens_maps_the_file_read_only_without_reading_it(tmp_path):
    path = tmp_path / "t.bin"
    np.arange(1000, dtype=np.uint16).tofile(path)
    tokens = open_tokens(path)
    kind = type(tokens).__name__
    assert kind == "memmap"
    assert tokens.flags.writeable is False
    np.testing.assert_array_equal(tokens[[0, 999]], [0, 999])
    (tmp_path / "empty.bin").write_bytes(b"")
    empty = open_tokens(tmp_path / "empty.bin", np.uint32)
    assert (empty.shape, empty.dtype) == ((0,), np.dtype(np.uint32))
