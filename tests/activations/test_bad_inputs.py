"""Hostile inputs to module 02, activations: this subject's table of the bad-input battery
(tests/bad_input_battery.py): each case calls the API with one mistake and must raise the documented
error, naming the offending value, and change nothing.
"""
import pytest

from tests.bad_input_battery import Case, check_case, constructing
from tinytorch.core.activations import GELU


CASES = [
    # ---------------------------------------------------------------- options: unknown names, devices, padding_idx
    Case("options/gelu-exact", constructing(lambda: GELU(approximate="none")),
         ValueError, r"GELU supports approximate='tanh' only; got approximate='none'"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_raises_the_documented_error_and_changes_nothing(case):
    check_case(case)
