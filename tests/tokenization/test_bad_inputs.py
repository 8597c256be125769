"""Hostile inputs to module 10, tokenization: this subject's table of the bad-input battery
(tests/bad_input_battery.py): each case calls the API with one mistake and must raise the documented
error, naming the offending value, and change nothing; then the empty inputs that are valid.
"""
import numpy as np
import pytest

from tests.bad_input_battery import Case, check_case, check_empty, constructing, on
from tinytorch.text.tokenization import BPETokenizer, CharTokenizer, WordTokenizer

NAN = float("nan")


char_tokenizer = lambda: CharTokenizer.from_text("abc")      # noqa: E731  vocabulary: <unk>, a, b, c


CASES = [
    # ---------------------------------------------------------------- ids: out of range, negative, float, bool, NaN
    Case("ids/char-decode-out-of-range", on(char_tokenizer, lambda t: t.decode([1, 4])),
         IndexError, r"token id 4 is out of range for a vocabulary of 4 tokens \(valid ids are 0..3\)"),
    Case("ids/char-decode-negative", on(char_tokenizer, lambda t: t.decode([-1])),
         IndexError, r"token id -1 is out of range for a vocabulary of 4 tokens \(valid ids are 0..3\)"),
    Case("ids/char-decode-huge", on(char_tokenizer, lambda t: t.decode([2**70])),
         IndexError, r"token id 1180591620717411303424 is out of range .* \(valid ids are 0..3\)"),
    Case("ids/word-decode-out-of-range", on(lambda: WordTokenizer(["cat", "dog"]), lambda t: t.decode([2, 4])),
         IndexError, r"token id 4 is out of range for a vocabulary of 4 tokens \(valid ids are 0..3\)"),
    Case("ids/bpe-decode-unlearned-merge", on(BPETokenizer, lambda t: t.decode([104, 256])),
         IndexError, r"token id 256 is out of range for a vocabulary of 256 tokens \(valid ids are 0..255\)"),
    Case("ids/char-decode-bool", on(char_tokenizer, lambda t: t.decode([True, False])),
         TypeError, r"token ids must be integers; got True of type bool"),
    Case("ids/char-decode-float", on(char_tokenizer, lambda t: t.decode([1.5])),
         TypeError, r"token ids must be integers; got 1.5 of type float"),
    Case("ids/char-decode-nan", on(char_tokenizer, lambda t: t.decode([NAN])),
         TypeError, r"token ids must be integers; got nan"),
    Case("ids/char-decode-float-array", on(char_tokenizer, lambda t: t.decode(np.array([1.0, 2.0]))),
         TypeError, r"token ids must be integers; got .*1\.0.* of type float64"),
    Case("ids/word-decode-numpy-bool", on(lambda: WordTokenizer(["cat", "dog"]), lambda t: t.decode([np.True_])),
         TypeError, r"token ids must be integers; got .*True.* of type bool"),

    # ---------------------------------------------------------------- zero, negative and non-integer sizes
    Case("sizes/bpe-vocab-below-bytes", constructing(lambda: BPETokenizer.train("abc", 100)),
         ValueError, r"vocab_size=100 is smaller than the base alphabet of 256 byte tokens; choose vocab_size >= 256"),
    Case("sizes/word-max-vocab-1", constructing(lambda: WordTokenizer.from_text("a b", max_vocab=1)),
         ValueError, r"max_vocab must be an int >= 2 \(room for <pad> and <unk>\), got 1"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_raises_the_documented_error_and_changes_nothing(case):
    check_case(case)


# ------------------------------------------------------------------------------------------------ empty inputs (valid)

EMPTY = {
    "char decode": (lambda: np.array(CharTokenizer.from_text("ab").decode([])), np.array("")),
    "bpe encode": (lambda: np.array(BPETokenizer().encode(""), np.int64), np.zeros(0, np.int64)),
}


@pytest.mark.parametrize("name", EMPTY, ids=list(EMPTY))
def test_empty_inputs_are_valid_and_give_empty_results(name):
    check_empty(*EMPTY[name])
