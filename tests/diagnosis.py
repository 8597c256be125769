"""Checks that recognise a typical mistake say so: `Misconception`, raised with the mistake's name first,
then expected against actual.

    Misconception: repeated ids: row 3 received 1 of its 3 gradient rows
      expected grad[3] = [3. 3.]
      actual   grad[3] = [1. 1.]

The learner's summary (`tito.summary`) shows such a failure before any other of the same exercise; the
catalogue of mistakes (`tito/misconceptions/`) names the words each check says, and
`tests/tito/test_misconceptions.py` proves each mistake is met by its message.
"""
import numpy as np


class Misconception(AssertionError):
    """A check recognised a typical mistake: its message names it, then shows expected against actual."""


Misconception.__module__ = "builtins"      # pytest then prints `Misconception: ...`, not the module path


def show(value) -> str:
    if not isinstance(value, (np.ndarray, np.generic)):    # a NumPy scalar's `.data` is a memoryview, not values
        value = getattr(value, "data", value)
    array = np.asarray(value)
    if array.dtype == object or array.ndim == 0:
        return repr(value.item() if isinstance(value, np.generic) else value)
    with np.printoptions(precision=4, threshold=8, edgeitems=2, linewidth=160, suppress=True):
        text = " ".join(np.array2string(array, separator=" ").split())
    return text + (f" shape {array.shape}" if array.ndim > 1 else "")


def misconception(name: str, detail: str, expected, actual, what: str = "") -> Misconception:
    """The exception to raise: `name: detail`, then expected and actual (of `what`)."""
    label = f"{what} = " if what else ""
    return Misconception(f"{name}: {detail}\n  expected {label}{show(expected)}\n  actual   {label}{show(actual)}")


def first_difference(actual, expected, rtol=1e-5, atol=1e-7):
    """The index of the first entry where two arrays of one shape differ, or None."""
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    differs = ~np.isclose(actual, expected, rtol=rtol, atol=atol)
    return tuple(int(i) for i in np.argwhere(differs)[0]) if differs.any() else None


def expect_close(actual, expected, what: str, rtol=1e-5, atol=1e-7, diagnoses=()):
    """Fail unless `actual` is close to `expected`. `diagnoses`: (name, detail, wrong) triples: when
    `actual` equals `wrong` (the result of a known mistake), the failure names that mistake."""
    actual, expected = np.asarray(getattr(actual, "data", actual)), np.asarray(getattr(expected, "data", expected))
    if actual.shape != expected.shape:
        raise misconception("shape", f"{what} has shape {actual.shape}, expected {expected.shape}",
                            expected.shape, actual.shape)
    index = first_difference(actual, expected, rtol, atol)
    if index is None:
        return
    for name, detail, wrong in diagnoses:
        wrong = np.asarray(getattr(wrong, "data", wrong))
        if wrong.shape == actual.shape and first_difference(actual, wrong, rtol, atol) is None:
            raise misconception(name, detail, expected[index[:1]], actual[index[:1]], f"{what}[{index[0]}]")
    raise AssertionError(f"{what} differs first at {index}\n  expected {show(expected[index[:1]])}\n"
                         f"  actual   {show(actual[index[:1]])}")
