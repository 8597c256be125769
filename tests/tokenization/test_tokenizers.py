"""Behaviour of tinytorch.text.tokenization: char, word and byte-level BPE tokenizers and their JSON files."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinytorch.text.tokenization import (
    BPE_CHUNK_PATTERN,
    BYTE_VOCAB_SIZE,
    BPETokenizer,
    CharTokenizer,
    WordTokenizer,
    count_pairs,
    load_tokenizer,
    merge_pair,
)

SAMPLE_TEXT = (
    "The brown dog runs in the park. The black cat sleeps in the barn! "
    "A red car drives down the road, and the dog's ball rolls after it. "
) * 10


@pytest.fixture(scope="module")
def bpe():
    return BPETokenizer.train(SAMPLE_TEXT, vocab_size=320)


# ---------------------------------------------------------------- CharTokenizer

def test_char_encode_gives_one_id_per_character():
    tokenizer = CharTokenizer.from_text(SAMPLE_TEXT)
    ids = tokenizer.encode(SAMPLE_TEXT)
    expected = [tokenizer.token_to_id[char] for char in SAMPLE_TEXT]
    assert ids == expected
    assert tokenizer.vocab_size == len(set(SAMPLE_TEXT)) + 1


def test_char_decode_joins_the_characters_back_into_the_text():
    tokenizer = CharTokenizer.from_text(SAMPLE_TEXT)
    text = tokenizer.decode([tokenizer.token_to_id[char] for char in SAMPLE_TEXT])
    expected = SAMPLE_TEXT
    assert text == expected


def test_char_vocabulary_is_sorted_after_unk():
    tokenizer = CharTokenizer.from_text("cab")
    assert tokenizer.id_to_token == ["<unk>", "a", "b", "c"]
    ids = tokenizer.encode("abc")
    expected = [1, 2, 3]
    assert ids == expected


def test_char_unknown_characters_map_to_unk():
    tokenizer = CharTokenizer.from_text("hello")
    ids = tokenizer.encode("hex!")
    expected = [tokenizer.token_to_id["h"], tokenizer.token_to_id["e"], 0, 0]
    assert ids == expected
    assert tokenizer.unk_id == 0


def test_char_unk_decodes_to_its_token():
    tokenizer = CharTokenizer.from_text("hello")
    text = tokenizer.decode([0, tokenizer.token_to_id["h"]])
    expected = "<unk>h"
    assert text == expected


@pytest.mark.parametrize("bad_id", [5, 99, -1])
def test_char_decode_out_of_range_names_id_and_range(bad_id):
    tokenizer = CharTokenizer.from_text("abcd")  # vocab_size 5
    with pytest.raises(IndexError, match=rf"token id {bad_id} .* 5 tokens .*0\.\.4"):
        tokenizer.decode([1, bad_id])


def test_char_decode_accepts_numpy_ids():
    tokenizer = CharTokenizer.from_text("abc")
    text = tokenizer.decode(np.array([3, 1, 2]))
    expected = "cab"
    assert text == expected


def test_char_rejects_non_text():
    with pytest.raises(TypeError, match="bytes"):
        CharTokenizer.from_text(b"abc")
    with pytest.raises(TypeError, match="list"):
        CharTokenizer.from_text("abc").encode(["a"])


# ---------------------------------------------------------------- WordTokenizer

def test_word_split_lowercases_and_separates_punctuation():
    assert WordTokenizer.tokenize("The Dog's ball, red!") == ["the", "dog's", "ball", ",", "red", "!"]


def test_word_vocabulary_order_is_frequency_then_alphabetical():
    tokenizer = WordTokenizer.from_text("b a c b a d")
    assert tokenizer.id_to_token == ["<pad>", "<unk>", "a", "b", "c", "d"]
    assert (tokenizer.pad_id, tokenizer.unk_id) == (0, 1)
    shuffled = WordTokenizer.from_text("d a b c a b")
    assert shuffled.id_to_token == tokenizer.id_to_token


def test_word_round_trip_gives_normalised_text():
    tokenizer = WordTokenizer.from_text(SAMPLE_TEXT)
    sentence = "The Dog runs, the cat sleeps!"
    assert tokenizer.decode(tokenizer.encode(sentence)) == "the dog runs , the cat sleeps !"


def test_word_unknown_words_and_padding():
    tokenizer = WordTokenizer.from_text("the dog runs")
    ids = tokenizer.encode("the dragon runs")
    assert ids[1] == tokenizer.unk_id
    assert tokenizer.decode(ids + [tokenizer.pad_id] * 3) == "the <unk> runs"
    assert tokenizer.decode([tokenizer.pad_id] + ids, skip_pad=False) == "<pad> the <unk> runs"


def test_word_max_vocab_and_min_freq():
    text = "a a a b b c"
    assert WordTokenizer.from_text(text, max_vocab=3).id_to_token == ["<pad>", "<unk>", "a"]
    assert WordTokenizer.from_text(text, min_freq=2).id_to_token == ["<pad>", "<unk>", "a", "b"]
    assert WordTokenizer.from_text(text, max_vocab=100).vocab_size == 5


@pytest.mark.parametrize("kwargs, message", [({"max_vocab": 1}, "max_vocab.*1"), ({"min_freq": 0}, "min_freq.*0")])
def test_word_bad_options_name_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WordTokenizer.from_text("a b", **kwargs)


def test_word_decode_out_of_range():
    tokenizer = WordTokenizer.from_text("a b")
    with pytest.raises(IndexError, match="token id 4 .*0\\.\\.3"):
        tokenizer.decode([4])


# ---------------------------------------------------------------- BPETokenizer

def test_bpe_known_merges_on_tiny_example():
    tokenizer = BPETokenizer.train("aaabdaaabac", vocab_size=259)
    # after "aa" the pairs (256, a) and (a, b) tie at 2: the greater byte pair (b"aa", b"a") wins
    merges = tokenizer.merges
    expected = [(97, 97), (256, 97), (257, 98)]
    assert merges == expected
    assert [tokenizer.vocab[i] for i in range(256, 259)] == [b"aa", b"aaa", b"aaab"]
    assert tokenizer.encode("aaabdaaabac") == [258, ord("d"), 258, ord("a"), ord("c")]
    assert tokenizer.vocab_size == 259


def test_bpe_training_is_deterministic():
    first = BPETokenizer.train(SAMPLE_TEXT, vocab_size=300)
    second = BPETokenizer.train(SAMPLE_TEXT, vocab_size=300)
    assert first.merges == second.merges
    assert len(first.merges) == 300 - BYTE_VOCAB_SIZE


def test_bpe_vocab_size_256_learns_nothing():
    tokenizer = BPETokenizer.train("hello", vocab_size=256)
    assert tokenizer.merges == [] and tokenizer.encode("hi") == [104, 105]


def test_bpe_stops_when_nothing_is_left_to_merge():
    tokenizer = BPETokenizer.train("ab ab", vocab_size=1000)
    assert tokenizer.vocab_size < 1000
    assert tokenizer.encode("ab ab") == [tokenizer.vocab.index(b"ab"), tokenizer.vocab.index(b" ab")]


def test_bpe_merges_do_not_cross_word_boundaries(bpe):
    # a learned token is either whitespace or a chunk piece whose only space is a leading one
    for token in bpe.vocab[BYTE_VOCAB_SIZE:]:
        assert token.isspace() or b" " not in token[1:], token


@pytest.mark.parametrize("text", ["the dog runs in the park.", "Zebras?! 12345 __init__ \t\n  ",
                                  "naïve café, 你好, 😀🐕", "", " "])
def test_bpe_round_trip_ascii_and_non_ascii(bpe, text):
    assert bpe.decode(bpe.encode(text)) == text


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_bpe_round_trips_any_text(text):
    tokenizer = BPETokenizer.train("the dog runs in the park. " * 5 + text, vocab_size=280)
    assert tokenizer.decode(tokenizer.encode(text)) == text


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_bpe_chunks_cover_the_text(text):
    assert "".join(BPE_CHUNK_PATTERN.findall(text)) == text


def test_bpe_compresses_training_like_text(bpe):
    sentence = "the brown dog runs in the park."
    fresh = BPETokenizer.from_dict(bpe.to_dict())     # no pre-tokens remembered from other tests
    assert len(fresh.encode(sentence)) < len(sentence.encode("utf-8")) / 2


def test_bpe_decode_of_a_cut_character_uses_replacement_char():
    tokenizer = BPETokenizer()
    euro = "€".encode("utf-8")
    assert tokenizer.decode(list(euro[:2])) == "\ufffd"
    assert tokenizer.decode(list(euro)) == "€"


def test_merge_pair_is_left_to_right_and_non_overlapping():
    assert merge_pair((1, 1, 1, 2), (1, 1), 9) == (9, 1, 2)
    assert merge_pair((1, 1, 1, 1), (1, 1), 9) == (9, 9)


def test_count_pairs_weights_each_sequence_by_its_count():
    counts = count_pairs({(1, 1, 1): 1, (1, 2): 3, (5,): 7, (): 2})
    assert counts == {(1, 1): 2, (1, 2): 3}


def test_merge_pair_returns_a_tuple_and_leaves_unmatched_ids():
    assert merge_pair([1, 2, 3], (3, 1), 9) == (1, 2, 3)
    assert merge_pair((), (1, 2), 9) == ()
    assert merge_pair((1, 2, 1, 2, 1), (1, 2), 9) == (9, 9, 1)


def naive_bpe_merges(text, vocab_size):
    """Reference training (no special tokens): test_gpt2_bpe's `naive_merges`, every chunk occurrence its own
    list, pairs recounted from scratch each step, ties to the greatest pair of byte strings."""
    from tests.tokenization.test_gpt2_bpe import naive_merges

    return naive_merges(text, vocab_size)


def naive_bpe_encode(merges, text):
    """Reference encoding: apply every merge in the order learned, over each whole chunk. A merge
    can only create pairs that contain its new id, which rank later, so this equals replaying the
    earliest-ranked pair first."""
    ids = []
    for chunk in BPE_CHUNK_PATTERN.findall(text):
        chunk_ids = tuple(chunk.encode("utf-8"))
        for rank, pair in enumerate(merges):
            chunk_ids = merge_pair(chunk_ids, pair, BYTE_VOCAB_SIZE + rank)
        ids.extend(chunk_ids)
    return ids


def test_bpe_training_matches_a_naive_reference_on_repeated_chunks():
    # SAMPLE_TEXT repeats every chunk 10 times: counting distinct chunks must weight them by occurrence
    merges = BPETokenizer.train(SAMPLE_TEXT, vocab_size=330).merges
    expected = naive_bpe_merges(SAMPLE_TEXT, 330)
    assert merges == expected


def test_bpe_encoding_replays_merges_by_rank_not_left_to_right():
    tokenizer = BPETokenizer([(98, 99), (97, 98)])   # "bc" was learned before "ab"
    ids = tokenizer.encode("abc")
    expected = [97, 256]                             # a + bc, not ab + c
    assert ids == expected
    assert tokenizer.encode("abc") == naive_bpe_encode(tokenizer.merges, "abc")


@pytest.mark.parametrize("merges, text, expected", [
    ([(98, 99), (97, 98)], "abc", [97, 256]),                      # bc before ab: a + bc
    ([(98, 99), (97, 98)], "xabcab", [120, 97, 256, 257]),
    ([(99, 100), (98, 99), (97, 98)], "abcd", [258, 256]),         # cd first; then ab (b + cd is no merge)
    ([(97, 98), (98, 99), (256, 99)], "abc", [258]),               # ab, then (ab)c
    ([(98, 98), (97, 98)], "abbb", [97, 256, 98]),
])
def test_bpe_encoding_applies_the_earliest_learned_merge_first(merges, text, expected):
    ids = BPETokenizer(merges).encode(text)
    assert ids == expected


@pytest.mark.parametrize("text", ["the dog's ball rolls after the black cat.", "barn park dark", "aaaa bbbb ab",
                                  "naïve café 😀"])
def test_bpe_encoding_matches_applying_the_merges_in_order(bpe, text):
    assert bpe.encode(text) == naive_bpe_encode(bpe.merges, text)


@pytest.mark.parametrize("vocab_size", [0, 100, 255])
def test_bpe_vocab_size_below_byte_alphabet_names_both_numbers(vocab_size):
    with pytest.raises(ValueError, match=rf"vocab_size={vocab_size}\b.*256"):
        BPETokenizer.train("abc", vocab_size=vocab_size)


@pytest.mark.parametrize("text", [b"abc", None, 42, ["a"]])
def test_bpe_rejects_non_str_text(text):
    with pytest.raises(TypeError, match=type(text).__name__):
        BPETokenizer.train(text, vocab_size=300)
    with pytest.raises(TypeError, match=type(text).__name__):
        BPETokenizer().encode(text)


def test_bpe_decode_out_of_range(bpe):
    with pytest.raises(IndexError, match=rf"token id {bpe.vocab_size} .*{bpe.vocab_size} tokens"):
        bpe.decode([bpe.vocab_size])


def test_bpe_rejects_merges_that_refer_to_future_ids():
    with pytest.raises(ValueError, match="id 300"):
        BPETokenizer([(97, 97), (256, 300)])


# ---------------------------------------------------------------- save / load

@pytest.fixture
def trained_tokenizers(bpe):
    return [CharTokenizer.from_text(SAMPLE_TEXT), WordTokenizer.from_text(SAMPLE_TEXT, max_vocab=20), bpe]


def test_save_load_round_trip(tmp_path, trained_tokenizers):
    sentence = "The brown cat drives to the barn, naïvely."
    for tokenizer in trained_tokenizers:
        path = tmp_path / f"{tokenizer.kind}.json"
        tokenizer.save(path)
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["type"] == tokenizer.kind and data["format_version"] == 1
        restored = load_tokenizer(path)
        assert type(restored) is type(tokenizer)
        assert restored.to_dict() == tokenizer.to_dict()
        assert restored.vocab_size == tokenizer.vocab_size
        assert restored.encode(sentence) == tokenizer.encode(sentence)
        assert type(tokenizer).load(str(path)).encode(sentence) == tokenizer.encode(sentence)


def test_load_as_the_wrong_class_names_both_types(tmp_path, bpe):
    path = tmp_path / "bpe.json"
    bpe.save(path)
    with pytest.raises(ValueError, match="'bpe' tokenizer, not a 'char' tokenizer"):
        CharTokenizer.load(path)


def test_load_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.json"):
        load_tokenizer(tmp_path / "nowhere.json")


@pytest.mark.parametrize("content, message", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "not a tinytorch tokenizer file"),
    (b"{not json", "not a tinytorch tokenizer file"),
    (b"[1, 2, 3]", "not a tinytorch tokenizer file"),
    (b'{"type": "bpe", "merges": []}', "not a tinytorch tokenizer file"),
    (b'{"format": "tinytorch.tokenizer", "format_version": 7, "type": "bpe", "merges": []}', "format_version 7"),
    (b'{"format": "tinytorch.tokenizer", "format_version": 1, "type": "magic"}', "unknown tokenizer type 'magic'"),
    (b'{"format": "tinytorch.tokenizer", "format_version": 1, "type": "char"}', "damaged 'char'"),
    (b'{"format": "tinytorch.tokenizer", "format_version": 1, "type": "char", "chars": ["ab"]}', "damaged 'char'"),
    (b'{"format": "tinytorch.tokenizer", "format_version": 1, "type": "word", "words": ["a", "a"]}', "damaged 'word'"),
    (b'{"format": "tinytorch.tokenizer", "format_version": 1, "type": "bpe", "merges": [[1, 999]]}', "damaged 'bpe'"),
    (b'{"format": "tinytorch.tokenizer", "format_version": 1, "type": "bpe", "merges": [[1]]}', "damaged 'bpe'"),
])
def test_load_bad_files_raise_value_error(tmp_path, content, message):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as error:
        load_tokenizer(path)
    assert str(path) in str(error.value)


# ---------------------------------------------------------------- issue 23, second part: malformed files, lone surrogates

@pytest.mark.parametrize("kind, field, value", [
    ("word", "words", "abc"), ("char", "chars", "abc"), ("bpe", "merges", "ab"), ("word", "words", {"a": 1}),
    ("bpe", "merges", [[97, 98, 99]]),
])
def test_a_tokenizer_file_whose_list_is_not_a_list_is_refused(tmp_path, kind, field, value):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"format": "tinytorch.tokenizer", "format_version": 1, "type": kind, field: value}))
    with pytest.raises(ValueError, match=field):
        load_tokenizer(path)


def test_word_tokenizer_refuses_one_string_as_its_vocabulary():
    with pytest.raises(TypeError, match="words"):
        WordTokenizer("abc")


@pytest.mark.parametrize("text", ["a\ud800b", "\udfff"])
def test_bpe_names_a_lone_surrogate(text):
    tokenizer = BPETokenizer.train("aaabdaaabac", vocab_size=258)
    with pytest.raises(ValueError, match=r"lone surrogate U\+D[8-F][0-9A-F]{2} at position \d"):
        tokenizer.encode(text)
    with pytest.raises(ValueError, match="lone surrogate"):
        BPETokenizer.train(text, vocab_size=258)
