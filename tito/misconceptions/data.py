"""Module 08 (data): the mistakes learners typically make with token files and batches."""
from tito.misconceptions import Mistake

MISTAKES = [
    Mistake(
        name="negative-ids-pass", exercise="_check_chunk",
        misconception="Only ids above the dtype's maximum are a problem: but a negative id wraps around to a "
                      "large one in an unsigned file just as silently.",
        replacement="""
info = np.iinfo(dtype)
bad = chunk > info.max
where = int(np.argmax(bad)) if bad.any() else None
"""),
    Mistake(
        name="position-within-chunk", exercise="write_tokens",
        misconception="A bad id's position is its index in the chunk: but the learner needs its position in the "
                      "whole stream, so the chunk's start must be added.",
        replacement="""
while True:
    chunk = np.fromiter(itertools.islice(stream, chunk_size), dtype=np.int64)
    if not chunk.size:
        break
    _check_chunk(chunk, 0, dtype)
    chunk.astype(dtype).tofile(file)
    written += chunk.size
    report(written)
"""),
    Mistake(
        name="last-window-unreachable", exercise="get_batch",
        misconception="The starts go up to N - m - 1, so that is the bound: but rng.integers excludes its upper "
                      "bound, so the last window is never drawn.",
        replacement="""
starts = rng.integers(0, len(dataset) - context_length - 1, size=batch_size)
positions = starts[:, None] + np.arange(context_length + 1)
windows = np.asarray(dataset[positions], dtype=np.int64)
return windows[:, :-1], windows[:, 1:]
"""),
    Mistake(
        name="targets-not-shifted", exercise="sequential_batches",
        misconception="The targets are the same windows as the inputs: but a language model predicts the next "
                      "token, so the targets are the windows one token later.",
        replacement="""
for first in range(0, len(starts), batch_size):
    if max_batches is not None and len(batches) == max_batches:
        break
    positions = starts[first:first + batch_size, None] + np.arange(context_length + 1)
    windows = np.asarray(dataset[positions], dtype=np.int64)
    batches.append((windows[:, :-1], windows[:, :-1]))
"""),
]

MISTAKES.insert(1, Mistake(
    name="file-read-whole", exercise="open_tokens",
    misconception="np.fromfile is the way to open a token file: but it reads every byte into memory, where a "
                  "memory map reads only the windows a batch touches.",
    replacement="""
return np.fromfile(path, dtype=dtype)
"""))
