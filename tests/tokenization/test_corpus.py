"""Behaviour of tinytorch.text.corpus: the seeded built-in corpus and the text-file loader."""
import pytest

from tinytorch.text.corpus import (
    CATEGORIES,
    CONTEXT_WORDS,
    TEMPLATES,
    generate_corpus,
    generate_sentences,
    load_corpus,
    word_category,
)
from tinytorch.text.tokenization import WordTokenizer


def test_corpus_is_deterministic_per_seed():
    assert generate_corpus(500, seed=0) == generate_corpus(500, seed=0)
    assert generate_corpus(500, seed=0) != generate_corpus(500, seed=1)
    assert generate_corpus(50, seed=4) == "\n".join(generate_sentences(50, seed=4))


def test_corpus_default_matches_a_known_beginning():
    # guards against accidental changes to the word lists, templates or sampling order
    assert generate_corpus(3, seed=0).splitlines() == generate_corpus().splitlines()[:3]
    assert all(line and line == line.lower() and line.strip() == line for line in generate_corpus().splitlines())


def test_every_category_word_appears_in_the_default_corpus():
    words = set(generate_corpus().split())
    for category, category_words in CATEGORIES.items():
        missing = set(category_words) - words
        assert not missing, f"{category}: {sorted(missing)} never appear"


def test_vocabulary_is_modest_and_tokenizer_friendly():
    corpus = generate_corpus()
    words = set(corpus.split())
    assert 60 <= len(words) <= 120
    assert set(WordTokenizer.tokenize(corpus)) == words  # no punctuation: str.split and WordTokenizer agree
    assert len(corpus.splitlines()) == 2000


def test_categories_are_disjoint_and_about_ten_words_each():
    all_words = [word for words in CATEGORIES.values() for word in words]
    assert len(all_words) == len(set(all_words))
    assert set(CATEGORIES) == {"animals", "foods", "vehicles", "colours", "numbers"}
    assert all(8 <= len(words) <= 12 for words in CATEGORIES.values())
    context = {word for words in CONTEXT_WORDS.values() for word in words}
    assert not context & set(all_words)


def test_every_template_slot_names_a_word_list():
    import re
    known = set(CATEGORIES) | set(CONTEXT_WORDS)
    for templates in TEMPLATES.values():
        for template in templates:
            assert set(re.findall(r"\{(\w+)\}", template)) <= known, template


def test_word_category():
    assert word_category("dog") == "animals"
    assert word_category("soup") == "foods"
    assert word_category("tram") == "vehicles"
    assert word_category("purple") == "colours"
    assert word_category("seven") == "numbers"
    assert word_category("runs") is None
    assert word_category("the") is None
    assert word_category("dragon") is None


def test_category_words_keep_category_specific_company():
    # animals never share a sentence with vehicle or food verbs, and so on
    for sentence in generate_sentences(2000, seed=0):
        words = set(sentence.split())
        if words & set(CATEGORIES["animals"]):
            assert not words & (set(CONTEXT_WORDS["food_verbs"]) | set(CONTEXT_WORDS["vehicle_verbs"]))
        if words & set(CATEGORIES["foods"]):
            assert not words & (set(CONTEXT_WORDS["animal_verbs"]) | set(CONTEXT_WORDS["vehicle_verbs"]))


@pytest.mark.parametrize("n_sentences", [0, -3, 2.5, "10"])
def test_bad_sentence_count(n_sentences):
    with pytest.raises(ValueError, match=f"n_sentences.*{n_sentences!r}"):
        generate_corpus(n_sentences)


def test_load_corpus_without_path_is_the_built_in_corpus():
    assert load_corpus() == generate_corpus()
    assert load_corpus(n_sentences=20, seed=5) == generate_corpus(20, seed=5)


def test_load_corpus_reads_a_utf8_file(tmp_path):
    path = tmp_path / "story.txt"
    path.write_text("The Fox jumps.\nnaïve café 你好\n", encoding="utf-8")
    assert load_corpus(path) == "The Fox jumps.\nnaïve café 你好\n"
    assert load_corpus(str(path)) == load_corpus(path)


def test_load_corpus_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "no_such_book.txt"
    with pytest.raises(FileNotFoundError, match="no_such_book.txt"):
        load_corpus(missing)


@pytest.mark.parametrize("content", [b"", b"   \n\t\n"])
def test_load_corpus_empty_file(tmp_path, content):
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="empty.txt is empty"):
        load_corpus(path)


@pytest.mark.parametrize("content", [b"hello\x00world", b"\x89PNG\r\n\x1a\n", b"caf\xe9 au lait", bytes(range(256))])
def test_load_corpus_binary_file(tmp_path, content):
    path = tmp_path / "weights.bin"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"weights\.bin is not a text file"):
        load_corpus(path)
