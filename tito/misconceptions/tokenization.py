"""Module 10 (tokenization): the mistakes learners typically make in the character and BPE tokenizers."""
from tito.misconceptions import Mistake

MISTAKES = [
    Mistake(
        name="encode-drops-unknown", exercise="CharTokenizer.encode",
        misconception="A character the vocabulary lacks can be skipped: but then the ids no longer line up "
                      "with the text; it becomes the unknown token.",
        replacement="""
return [self.token_to_id[char] for char in _require_text(text) if char in self.token_to_id]
"""),
    Mistake(
        name="decode-joins-with-spaces", exercise="CharTokenizer.decode",
        misconception="Tokens are words, so decoding joins them with spaces: but character tokens join with "
                      "nothing.",
        replacement="""
return " ".join(self.id_to_token[i] for i in _check_ids(ids, self.vocab_size))
"""),
    Mistake(
        name="count-pairs-ignores-frequency", exercise="count_pairs",
        misconception="Each distinct chunk counts once: but a chunk seen 100 times contributes its pairs 100 "
                      "times.",
        replacement="""
pair_counts = Counter()
for ids, count in sequences.items():
    for pair in zip(ids, ids[1:]):
        pair_counts[pair] += 1
return pair_counts
"""),
    Mistake(
        name="merge-overlapping", exercise="merge_pair",
        misconception="After a merge the scan moves on by one: but the merged pair used two ids, so it moves on "
                      "by two (`aaa` with (a, a) becomes [aa, a], not [aa, aa]).",
        replacement="""
merged, i = [], 0
while i < len(ids):
    if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
        merged.append(new_id)
    else:
        merged.append(ids[i])
    i += 1
return tuple(merged)
"""),
    Mistake(
        name="train-ties-by-first-seen", exercise="BPETokenizer.train",
        misconception="Any most frequent pair will do: but ties must be broken the same way every time (the "
                      "smallest pair), or two runs learn different merges.",
        replacement="""
chunk_counts = Counter(tuple(chunk.encode("utf-8")) for chunk in BPE_CHUNK_PATTERN.findall(text))
merges = []
for new_id in range(BYTE_VOCAB_SIZE, vocab_size):
    pair_counts = count_pairs(chunk_counts)
    if not pair_counts:
        break
    best_pair = max(pair_counts, key=lambda pair: (pair_counts[pair], pair))
    merges.append(best_pair)
    merged_counts = Counter()
    for ids, count in chunk_counts.items():
        merged_counts[merge_pair(ids, best_pair, new_id)] += count
    chunk_counts = merged_counts
return cls(merges)
"""),
    Mistake(
        name="encode-merges-left-to-right", exercise="BPETokenizer._encode_chunk",
        misconception="Merges apply where they are found, left to right: but the learned order matters, the "
                      "earliest-learned merge first.",
        replacement="""
ids = tuple(chunk)
while len(ids) >= 2:
    pair = next((p for p in zip(ids, ids[1:]) if p in self.merge_rank), None)
    if pair is None:
        break
    ids = merge_pair(ids, pair, BYTE_VOCAB_SIZE + self.merge_rank[pair])
return ids
"""),
]
