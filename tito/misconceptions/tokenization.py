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
        name="ties-to-the-smallest-pair", exercise="most_frequent_pair",
        misconception="Any fixed tie rule will do, e.g. the smallest pair of ids: but GPT-2 and CS336 take the "
                      "greatest pair of byte strings, and only that rule learns their merges.",
        replacement="""
top = max(pair_counts.values())
return min(pair for pair, count in pair_counts.items() if count == top)
"""),
    Mistake(
        name="ties-by-ids-not-bytes", exercise="most_frequent_pair",
        misconception="The greatest pair of ids is the greatest pair: but ids follow the merge order, and "
                      "(b'b', b'a') > (b'aa', b'a') although 98 < 256; compare the bytes.",
        replacement="""
top = max(pair_counts.values())
return max(pair for pair, count in pair_counts.items() if count == top)
"""),
    Mistake(
        name="train-ties-by-first-seen", exercise="most_frequent_pair",
        misconception="Any most frequent pair will do: but `max(counts, key=counts.get)` picks the first tied "
                      "pair in the text's order, so training depends on word order.",
        replacement="""
return max(pair_counts, key=pair_counts.get)
"""),
    Mistake(
        name="update-ignores-word-counts", exercise="learn_merges",
        misconception="Updating the pair counts after a merge, each changed word counts once: but a pre-token "
                      "seen 10 times moves its pairs' counts by 10.",
        replacement="""
words, counts = list(word_counts), list(word_counts.values())
pair_counts = count_pairs(word_counts)
where = defaultdict(set)
for index, word in enumerate(words):
    for pair in zip(word, word[1:]):
        where[pair].add(index)
vocab = [bytes([byte]) for byte in range(BYTE_VOCAB_SIZE)]
merges = []
for new_id in range(BYTE_VOCAB_SIZE, BYTE_VOCAB_SIZE + num_merges):
    if not pair_counts:
        break
    best = most_frequent_pair(pair_counts, vocab)
    merges.append(best)
    vocab.append(vocab[best[0]] + vocab[best[1]])
    for index in where.pop(best, ()):
        word = words[index]
        merged = merge_pair(word, best, new_id)
        if len(merged) == len(word):
            continue
        for pair in zip(word, word[1:]):
            pair_counts[pair] -= 1
            if pair_counts[pair] <= 0:
                del pair_counts[pair]
        for pair in zip(merged, merged[1:]):
            pair_counts[pair] += 1
            where[pair].add(index)
        words[index] = merged
return merges
"""),
    Mistake(
        name="old-pairs-not-subtracted", exercise="learn_merges",
        misconception="After a merge only the new pairs need counting: but the merged word lost its old pairs, "
                      "whose counts must go down, or a pair that is gone keeps winning.",
        replacement="""
words, counts = list(word_counts), list(word_counts.values())
pair_counts = count_pairs(word_counts)
where = defaultdict(set)
for index, word in enumerate(words):
    for pair in zip(word, word[1:]):
        where[pair].add(index)
vocab = [bytes([byte]) for byte in range(BYTE_VOCAB_SIZE)]
merges = []
for new_id in range(BYTE_VOCAB_SIZE, BYTE_VOCAB_SIZE + num_merges):
    if not pair_counts:
        break
    best = most_frequent_pair(pair_counts, vocab)
    merges.append(best)
    vocab.append(vocab[best[0]] + vocab[best[1]])
    pair_counts.pop(best)
    for index in where.pop(best, ()):
        word, count = words[index], counts[index]
        merged = merge_pair(word, best, new_id)
        for pair in zip(merged, merged[1:]):
            if pair not in zip(word, word[1:]):
                pair_counts[pair] += count
                where[pair].add(index)
        words[index] = merged
return merges
"""),
    Mistake(
        name="special-tokens-in-given-order", exercise="special_token_pattern",
        misconception="The special tokens can go into the pattern in any order: but `re` takes the first "
                      "alternative that matches, so a token that starts a longer one must come after it.",
        replacement="""
return re.compile("(" + "|".join(re.escape(token) for token in special_tokens) + ")")
"""),
    Mistake(
        name="special-tokens-unescaped", exercise="special_token_pattern",
        misconception="A special token is plain text in the pattern: but `<|endoftext|>` holds `|`, which a "
                      "regex reads as 'or'; escape each token.",
        replacement="""
longest_first = sorted(special_tokens, key=len, reverse=True)
return re.compile("(" + "|".join(longest_first) + ")")
"""),
    Mistake(
        name="others-numbered-by-byte-value", exercise="bytes_to_unicode",
        misconception="A non-printable byte b becomes chr(256 + b): but the others are numbered by their place "
                      "among the others (byte 127 is the 34th: chr(256 + 33)).",
        replacement="""
printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
table = {byte: chr(byte) for byte in printable}
for byte in range(BYTE_VOCAB_SIZE):
    if byte not in table:
        table[byte] = chr(BYTE_VOCAB_SIZE + byte)
return table
"""),
    Mistake(
        name="encode-merges-left-to-right", exercise="BPETokenizer._encode_chunk",
        misconception="Merges apply where they are found, left to right: but the learned order matters, the "
                      "earliest-learned merge first.",
        replacement="""
ids = tuple(self.byte_ids[byte] for byte in chunk)
while len(ids) >= 2:
    pair = next((p for p in zip(ids, ids[1:]) if p in self.merge_rank), None)
    if pair is None:
        break
    ids = merge_pair(ids, pair, self.merge_id[pair])
return ids
"""),
    Mistake(
        name="bytes-are-their-own-ids", exercise="BPETokenizer._encode_chunk",
        misconception="Byte b is token b: true for a tokenizer trained here, but GPT-2's files number the 256 "
                      "byte tokens in another order (\"!\" is 0); start from `byte_ids`.",
        replacement="""
ids = tuple(chunk)
while len(ids) >= 2:
    pair = min(zip(ids, ids[1:]), key=lambda p: self.merge_rank.get(p, len(self.merges)))
    if pair not in self.merge_rank:
        break
    ids = merge_pair(ids, pair, self.merge_id[pair])
return ids
"""),
]
