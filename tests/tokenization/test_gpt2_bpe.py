"""BPETokenizer to the GPT-2 standard (issue 24, item 3): GPT-2's pre-tokenisation pattern (and the `re`
fallback), special tokens, the greatest-byte-pair tie-break, streaming `encode_iterable`, and GPT-2's
vocab.json / merges.txt files, whose encoding must equal tiktoken's and Hugging Face tokenizers'."""
import inspect
import itertools
import json
import subprocess
import sys
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinytorch.text.tokenization import (
    BPE_CHUNK_PATTERN,
    BYTE_VOCAB_SIZE,
    PRETOKENIZER_ENGINE,
    BPETokenizer,
    bytes_to_unicode,
    learn_merges,
    load_tokenizer,
    merge_pair,
    most_frequent_pair,
    special_token_pattern,
    split_pattern,
)

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
SPECIALS = ["<|endoftext|>", "<|pad|>"]
MIXED = ("Héllo wörld! naïve café, Ça coûte 20€; ÅNGSTRÖM straße. 你好，世界！ こんにちは 😀🐕 👍🏽 "
         "they're we'll I'd it's you've I'm she's THEY'RE 12345 3.14159 1,000,000  multiple   spaces\n\n"
         "new\tlines\r\n  indented\n<|endoftext|>second document<|pad|><|pad|> end  ")
CORPUS = (("The naïve café owner said: they're here, we'll see, it's 2024 and I'd pay 3.50€! "
           "Straße, Ålesund, 你好世界 and 😀😀 emoji. Numbers 12345 678 and   spaced\n\n  lines.\n") * 30
          + "<|endoftext|>" + "Another document: coûte, ÅNGSTRÖM, こんにちは, 👍🏽 thumbs. " * 20)


def gpt2_bytes_to_unicode():
    "GPT-2's byte -> printable character table, as in openai/gpt-2 src/encoder.py (written out here on purpose)."
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(2 ** 8):
        if b not in bs:
            bs.append(b)
            cs.append(2 ** 8 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def naive_merges(text, vocab_size, specials=()):
    """Reference training: every pre-token occurrence its own list, pairs recounted from scratch each step,
    ties to the greatest (bytes, bytes); special tokens cut out first."""
    import re
    pieces = re.split("|".join(map(re.escape, sorted(specials, key=len, reverse=True))), text) if specials else [text]
    words = [list(chunk.encode("utf-8")) for piece in pieces for chunk in BPE_CHUNK_PATTERN.findall(piece)]
    vocab = [bytes([b]) for b in range(256)]
    merges = []
    for new_id in range(256, vocab_size - len(specials)):
        counts = {}
        for ids in words:
            for pair in zip(ids, ids[1:]):
                counts[pair] = counts.get(pair, 0) + 1
        if not counts:
            break
        best = max(counts, key=lambda pair: (counts[pair], vocab[pair[0]], vocab[pair[1]]))
        merges.append(best)
        vocab.append(vocab[best[0]] + vocab[best[1]])
        words = [list(merge_pair(ids, best, new_id)) for ids in words]
    return merges


@pytest.fixture
def trained():
    "Trained afresh for each test (16 ms), so each test runs the code it depends on."
    return BPETokenizer.train(CORPUS, vocab_size=BYTE_VOCAB_SIZE + 200 + len(SPECIALS), special_tokens=SPECIALS)


def write_gpt2_files(tokenizer, folder):
    """vocab.json and merges.txt in GPT-2's layout: the 256 byte tokens numbered in bytes_to_unicode's order
    (as GPT-2 numbers them), then the merges, then the special tokens; bytes spelled with bytes_to_unicode.
    Returns (vocab path, merges path, {bytes: id} of the ordinary tokens, {special: id})."""
    encoder = gpt2_bytes_to_unicode()
    spell = lambda data: "".join(encoder[b] for b in data)
    ranks = {bytes([byte]): rank for rank, byte in enumerate(encoder)}
    for left, right in tokenizer.merges:
        ranks[tokenizer.vocab[left] + tokenizer.vocab[right]] = len(ranks)
    assert len(ranks) == BYTE_VOCAB_SIZE + len(tokenizer.merges), "two merges made the same bytes"
    specials = {token: len(ranks) + i for i, token in enumerate(tokenizer.special_tokens)}
    table = {spell(data): rank for data, rank in ranks.items()} | specials
    vocab_path, merges_path = folder / "vocab.json", folder / "merges.txt"
    vocab_path.write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")
    merges_path.write_text("#version: 0.2\n" + "".join(f"{spell(tokenizer.vocab[left])} {spell(tokenizer.vocab[right])}\n"
                                                         for left, right in tokenizer.merges), encoding="utf-8")
    return vocab_path, merges_path, ranks, specials


@pytest.fixture
def gpt2_files(trained, tmp_path):
    return write_gpt2_files(trained, tmp_path)


# ---------------------------------------------------------------- pre-tokenisation

def test_the_engine_in_use_is_visible_and_is_the_regex_package_when_installed():
    expected = "regex" if _installed("regex") else "re"
    engine = PRETOKENIZER_ENGINE
    assert engine == expected
    assert BPETokenizer.pretokenizer_engine == engine


def _installed(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False


def test_pre_tokens_are_gpt2_s_on_contractions_numbers_spaces_and_unicode():
    regex = pytest.importorskip("regex")
    expected = regex.findall(GPT2_PATTERN, MIXED)
    pretokens = BPE_CHUNK_PATTERN.findall(MIXED)
    assert pretokens == expected
    contractions = BPE_CHUNK_PATTERN.findall("they're I'm")
    assert contractions == ["they", "'re", " I", "'m"]


def test_the_re_fallback_agrees_with_gpt2_s_pattern_except_on_rare_numerals():
    regex = pytest.importorskip("regex")
    engine, fallback = split_pattern("re")
    assert engine == "re"
    fallback_pretokens = fallback.findall(MIXED)
    expected = regex.findall(GPT2_PATTERN, MIXED)
    assert fallback_pretokens == expected
    # the documented difference: "²" is a number to \p{N}, a letter to the fallback
    assert regex.findall(GPT2_PATTERN, "x²") == ["x", "²"] and fallback.findall("x²") == ["x²"]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(categories=("L", "M", "N", "P", "S", "Z", "Cc", "Cf")), max_size=30))
def test_the_re_fallback_covers_every_text_as_gpt2_s_pattern_does(text):
    regex = pytest.importorskip("regex")
    fallback = split_pattern("re")[1]
    assert "".join(fallback.findall(text)) == text
    if not any(ch.isnumeric() and not ch.isdecimal() for ch in text):
        assert fallback.findall(text) == regex.findall(GPT2_PATTERN, text)


def test_without_the_regex_package_tinytorch_falls_back_to_re_and_says_so():
    code = ("import sys; sys.modules['regex'] = None\n"
            "from tinytorch.text.tokenization import PRETOKENIZER_ENGINE, BPETokenizer, BPE_CHUNK_PATTERN\n"
            "import re; assert isinstance(BPE_CHUNK_PATTERN, re.Pattern)\n"
            "t = BPETokenizer.train(\"it's the dog's ball, they're 12 dogs\", 270)\n"
            "assert t.decode(t.encode('naïve 你好 😀 it\\'s')) == 'naïve 你好 😀 it\\'s'\n"
            "print(PRETOKENIZER_ENGINE, BPETokenizer.pretokenizer_engine)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["re", "re"]


def test_split_pattern_refuses_an_unknown_engine():
    with pytest.raises(ValueError, match="engine must be None, 'regex' or 're'; got 'pcre'"):
        split_pattern("pcre")


# ---------------------------------------------------------------- training

def test_most_frequent_pair_breaks_ties_by_the_greatest_byte_pair_not_the_greatest_ids():
    vocab = [bytes([i]) for i in range(256)] + [b"aa"]
    chosen = most_frequent_pair({(256, 97): 2, (98, 97): 2, (97, 98): 1}, vocab)
    expected = (98, 97)                                # (b"b", b"a") > (b"aa", b"a") although 98 < 256
    assert chosen == expected
    chosen = most_frequent_pair({(97, 98): 2, (256, 97): 2}, vocab)
    expected = (256, 97)                               # (b"aa", b"a") > (b"a", b"b")
    assert chosen == expected
    chosen = most_frequent_pair({(97, 98): 1, (99, 100): 4}, vocab)
    expected = (99, 100)
    assert chosen == expected


def test_most_frequent_pair_refuses_no_pairs():
    with pytest.raises(ValueError, match="pair_counts is empty"):
        most_frequent_pair({}, [])


def test_training_breaks_ties_by_the_greatest_byte_pair():
    merges = BPETokenizer.train("aaabdaaabac", vocab_size=259).merges
    expected = [(97, 97), (256, 97), (257, 98)]        # the worked example: (aa, a) beats (a, b) at 2 each
    assert merges == expected


def test_incremental_training_matches_recounting_from_scratch_on_unicode_text_with_specials():
    text = CORPUS[:1500] + CORPUS[-600:]
    vocab_size = BYTE_VOCAB_SIZE + 80 + len(SPECIALS)
    merges = BPETokenizer.train(text, vocab_size, special_tokens=SPECIALS).merges
    expected = naive_merges(text, vocab_size, SPECIALS)
    assert merges == expected


def test_learn_merges_weights_each_pre_token_by_its_count():
    merges = learn_merges({tuple(b"ab"): 1, tuple(b" ab"): 2, tuple(b" cd"): 1}, 2)
    expected = [(97, 98), (32, 256)]                   # then (32, 256) = 2 beats (32, 99) = (99, 100) = 1
    assert merges == expected


def test_learn_merges_lowers_the_counts_of_pairs_a_merge_removed():
    # after (b, c) -> 256, (a, b) survives only in 'abd' (count 1); (a, 256) = 3 must win
    merges = learn_merges({tuple(b"abc"): 3, tuple(b"abd"): 1, tuple(b"bc"): 3}, 2)
    expected = [(98, 99), (97, 256)]
    assert merges == expected


def test_learn_merges_counts_the_new_pairs_a_merge_creates():
    merges = learn_merges({tuple(b"abab"): 3, tuple(b"abc"): 2}, 2)
    expected = [(97, 98), (256, 256)]
    assert merges == expected


def test_learn_merges_stops_when_no_pair_is_left_and_refuses_a_negative_count():
    merges = learn_merges({tuple(b"ab"): 5, (99,): 1}, 10)
    expected = [(97, 98)]
    assert merges == expected
    with pytest.raises(ValueError, match="num_merges must be an int >= 0, got -1"):
        learn_merges({}, -1)


def test_special_tokens_never_reach_training_and_take_the_last_ids(trained):
    expected = {"<|endoftext|>": trained.vocab_size - 2, "<|pad|>": trained.vocab_size - 1}
    assert trained.special_tokens == expected
    learned = [trained.vocab[trained.merge_id[pair]] for pair in trained.merges]
    assert not any(b"<|" in token or b"|>" in token for token in learned)


# ---------------------------------------------------------------- special tokens at encode time

def test_a_special_token_is_one_id_and_is_never_split(trained):
    ids = trained.encode("a<|endoftext|>b<|pad|>")
    expected = [trained.byte_ids[ord("a")], trained.special_tokens["<|endoftext|>"], trained.byte_ids[ord("b")],
                trained.special_tokens["<|pad|>"]]
    assert ids == expected
    assert trained.decode(ids) == "a<|endoftext|>b<|pad|>"


def test_overlapping_special_tokens_resolve_longest_first():
    tokenizer = BPETokenizer(special_tokens=["<|endoftext|>", "<|endoftext|><|endoftext|>"])
    single, double = tokenizer.special_tokens["<|endoftext|>"], tokenizer.special_tokens["<|endoftext|><|endoftext|>"]
    ids = tokenizer.encode("Hi<|endoftext|><|endoftext|><|endoftext|>")
    expected = [ord("H"), ord("i"), double, single]
    assert ids == expected
    assert tokenizer.decode(ids) == "Hi<|endoftext|><|endoftext|><|endoftext|>"


def test_special_token_pattern_escapes_the_tokens_and_puts_the_longest_first():
    pieces = special_token_pattern(["<|a|>", "<|a|><|a|>", "[x]"]).split("q<|a|><|a|><|a|>[x]x|a")
    expected = ["q", "<|a|><|a|>", "", "<|a|>", "", "[x]", "x|a"]
    assert pieces == expected
    assert special_token_pattern([]) is None


def test_bytes_to_unicode_is_gpt2_s_table():
    table = bytes_to_unicode()
    expected = gpt2_bytes_to_unicode()
    assert table == expected


def test_without_special_tokens_their_text_is_ordinary_text():
    tokenizer = BPETokenizer()
    ids = tokenizer.encode("<|endoftext|>")
    expected = list(b"<|endoftext|>")
    assert ids == expected


def test_special_tokens_survive_save_and_load(trained, tmp_path):
    trained.save(tmp_path / "bpe.json")
    restored = load_tokenizer(tmp_path / "bpe.json")
    assert restored.special_tokens == trained.special_tokens
    assert restored.encode(MIXED) == trained.encode(MIXED)


@pytest.mark.parametrize("special_tokens, error, message", [
    ("<|endoftext|>", TypeError, "special_tokens must be a list of strings"),
    ([""], ValueError, "non-empty strings"),
    ([3], ValueError, "non-empty strings"),
    (["<a>", "<a>"], ValueError, "repeated"),
])
def test_bad_special_tokens_are_refused(special_tokens, error, message):
    with pytest.raises(error, match=message):
        BPETokenizer(special_tokens=special_tokens)
    with pytest.raises(error, match=message):
        BPETokenizer.train("abc", 300, special_tokens=special_tokens)


def test_vocab_size_must_leave_room_for_the_special_tokens():
    with pytest.raises(ValueError, match=r"vocab_size=257 .*256 byte tokens \+ 2 special tokens; choose vocab_size >= 258"):
        BPETokenizer.train("abc", 257, special_tokens=SPECIALS)


# ---------------------------------------------------------------- encode_iterable

def test_encode_iterable_is_a_generator_equal_to_encode_over_a_file(trained, tmp_path):
    path = tmp_path / "text.txt"
    path.write_text(MIXED * 40, encoding="utf-8", newline="")
    trained.stream_chars = 100
    try:
        with open(path, encoding="utf-8", newline="") as file:
            stream = trained.encode_iterable(file)
            assert inspect.isgenerator(stream)
            ids = list(stream)
    finally:
        del trained.stream_chars
    expected = trained.encode(MIXED * 40)
    assert ids == expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, 9), min_size=1, max_size=40), st.integers(4, 40))
def test_encode_iterable_equals_encode_wherever_the_pieces_are_cut(trained, cuts, window):
    text = MIXED[:200]
    edges = list(itertools.accumulate(cuts))
    pieces = [text[start:end] for start, end in zip([0] + edges, edges + [len(text)])]
    tokenizer = BPETokenizer.from_dict(trained.to_dict())
    tokenizer.stream_chars = window
    ids = list(tokenizer.encode_iterable(pieces))
    expected = trained.encode(text)
    assert ids == expected


def test_encode_iterable_streams_an_endless_source_in_bounded_memory(trained):
    lines = itertools.cycle(MIXED.splitlines(keepends=True))
    tracemalloc.start()
    try:
        count = sum(1 for _ in itertools.islice(trained.encode_iterable(lines), 60_000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == 60_000
    assert peak < 2_000_000, f"peak {peak:,} bytes while streaming"   # its ids as one list: over 2 MB


def test_encode_iterable_refuses_one_str(trained):
    with pytest.raises(TypeError, match="iterable of strs"):
        list(trained.encode_iterable("abc"))


# ---------------------------------------------------------------- from_vocab and GPT-2's files

def test_from_vocab_in_cs336_layout_encodes_as_the_trained_tokenizer(trained):
    vocab = dict(enumerate(trained.vocab))
    merges = [(trained.vocab[left], trained.vocab[right]) for left, right in trained.merges]
    rebuilt = BPETokenizer.from_vocab(vocab, merges, special_tokens=SPECIALS)
    ids = rebuilt.encode(MIXED)
    expected = trained.encode(MIXED)
    assert ids == expected
    assert rebuilt.special_tokens == trained.special_tokens


def cs336_layout(tokenizer):
    """(vocab, merges) as CS336's train_bpe may return them: the special tokens first (ids 0, 1, ...), then the
    256 bytes, then the merges' tokens; merges as pairs of bytes."""
    specials = [token.encode("utf-8") for token in tokenizer.special_tokens]
    ordinary = [tokenizer.vocab[i] for i in range(tokenizer.vocab_size) if i not in tokenizer.special_tokens.values()]
    vocab = dict(enumerate(specials + ordinary))
    merges = [(tokenizer.vocab[left], tokenizer.vocab[right]) for left, right in tokenizer.merges]
    return vocab, merges


@pytest.mark.parametrize("text", [MIXED, "they're 12345 spaced\n\n  lines, Straße 😀😀"])
def test_from_vocab_with_the_bytes_numbered_elsewhere_gives_the_same_tokens(trained, text):
    vocab, merges = cs336_layout(trained)
    rebuilt = BPETokenizer.from_vocab(vocab, merges, special_tokens=SPECIALS)
    assert rebuilt.byte_ids[0] == len(SPECIALS)
    tokens = [rebuilt.vocab[i] for i in rebuilt.encode(text)]
    expected = [trained.vocab[i] for i in trained.encode(text)]
    assert tokens == expected


def hand_made():
    "A CS336-layout vocabulary written by hand: <|endoftext|> = 0, byte b = b + 1, then ab = 257, abc = 258, ' a' = 259."
    vocab = {0: b"<|endoftext|>"} | {b + 1: bytes([b]) for b in range(256)} | {257: b"ab", 258: b"abc", 259: b" a"}
    merges = [(b"a", b"b"), (b"ab", b"c"), (b" ", b"a")]
    return BPETokenizer.from_vocab(vocab, merges)


@pytest.mark.parametrize("text, expected", [
    ("abc", [258]), ("ab", [257]), ("abcab", [258, 257]), ("x", [ord("x") + 1]), ("a abc", [98, 33, 258]),
    ("a a", [98, 259]), ("é", [0xC3 + 1, 0xA9 + 1]), ("ba", [99, 98]), ("abcabc ab", [258, 258, 33, 257]),
    ("\n", [11]),
])
def test_a_vocabulary_that_numbers_the_bytes_elsewhere_encodes_by_its_own_ids(text, expected):
    ids = hand_made().encode(text)
    assert ids == expected


def test_gpt2_files_load_to_the_same_tokens_under_gpt2_s_numbering(trained, gpt2_files):
    vocab_path, merges_path, ranks, specials = gpt2_files
    loaded = BPETokenizer.from_gpt2_files(vocab_path, merges_path, special_tokens=SPECIALS)
    assert loaded.byte_ids[ord("!")] == 0 and loaded.byte_ids[0] == 188          # GPT-2's byte order
    tokens = [loaded.vocab[i] for i in loaded.encode(MIXED)]
    expected = [trained.vocab[i] for i in trained.encode(MIXED)]
    assert tokens == expected
    assert loaded.decode(loaded.encode(MIXED)) == MIXED
    assert loaded.special_tokens == specials


def test_gpt2_files_encode_as_tiktoken_does(gpt2_files):
    tiktoken = pytest.importorskip("tiktoken")
    vocab_path, merges_path, ranks, specials = gpt2_files
    encoding = tiktoken.Encoding("tinytorch-test", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                                 special_tokens=specials)
    loaded = BPETokenizer.from_gpt2_files(vocab_path, merges_path, special_tokens=SPECIALS)
    for text in (MIXED, CORPUS[:3000], "  leading and trailing  \n\n\n", "’curly’ quotes — dashes… ¿qué? ¡sí!"):
        ids = loaded.encode(text)
        expected = encoding.encode(text, allowed_special="all")
        assert ids == expected


def test_gpt2_files_encode_as_hugging_face_tokenizers_does(gpt2_files):
    tokenizers = pytest.importorskip("tokenizers")
    vocab_path, merges_path, ranks, specials = gpt2_files
    hf = tokenizers.Tokenizer(tokenizers.models.BPE.from_file(str(vocab_path), str(merges_path)))
    hf.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = tokenizers.decoders.ByteLevel()
    hf.add_special_tokens(SPECIALS)
    loaded = BPETokenizer.from_gpt2_files(vocab_path, merges_path, special_tokens=SPECIALS)
    ids = loaded.encode(MIXED)
    expected = hf.encode(MIXED).ids
    assert ids == expected


def test_a_tokenizer_from_gpt2_files_saves_and_loads(gpt2_files, tmp_path):
    vocab_path, merges_path, _, _ = gpt2_files
    loaded = BPETokenizer.from_gpt2_files(vocab_path, merges_path, special_tokens=SPECIALS)
    loaded.save(tmp_path / "gpt2.json")
    restored = BPETokenizer.load(tmp_path / "gpt2.json")
    ids = restored.encode(MIXED)
    expected = loaded.encode(MIXED)
    assert ids == expected and restored.byte_ids == loaded.byte_ids


def test_from_vocab_refuses_an_incomplete_or_inconsistent_vocabulary():
    full = {i: bytes([i]) for i in range(256)}
    with pytest.raises(ValueError, match="lacks 1 single bytes"):
        BPETokenizer.from_vocab({i: bytes([i]) for i in range(255)}, [])
    with pytest.raises(ValueError, match=r"missing \[3\]"):
        BPETokenizer.from_vocab({i: v for i, v in full.items() if i != 3} | {256: b"x"}, [])
    with pytest.raises(ValueError, match=r"merges\[0\].*b'ab' is not in vocab"):
        BPETokenizer.from_vocab(full, [(b"a", b"b")])
    with pytest.raises(ValueError, match="repeats vocab"):
        BPETokenizer.from_vocab(full | {256: b"a"}, [])
    with pytest.raises(TypeError, match="vocab must be a dict"):
        BPETokenizer.from_vocab(list(full.values()), [])


def test_from_gpt2_files_names_a_malformed_merges_line(gpt2_files, tmp_path):
    vocab_path = gpt2_files[0]
    bad = tmp_path / "merges.txt"
    bad.write_text("#version: 0.2\nĠ t h\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2: expected two tokens"):
        BPETokenizer.from_gpt2_files(vocab_path, bad)
