"""Checks that point at one RoPE-scaling exercise each (tito/misconceptions/attention.py lists the mistakes): the
expected values are computed here with NumPy alone, from the published formulas, never with the learner's code."""
import math

import numpy as np
import pytest

from tests.diagnosis import expect_close
from tinytorch.core.rope_scaling import RopeFrequencies, yarn_correction_range, yarn_inv_freq


def reference_yarn(dim, base, factor, trained, beta_fast=32.0, beta_slow=1.0):
    "YaRN's frequencies by the paper: keep pairs that turn more than beta_fast times, divide those under beta_slow."
    def pair_index(turns):
        return dim * math.log(trained / (turns * 2 * math.pi)) / (2 * math.log(base))
    low, high = max(math.floor(pair_index(beta_fast)), 0), min(math.ceil(pair_index(beta_slow)), dim - 1)
    high = high + 0.001 if low == high else high
    theta = base ** (-np.arange(0, dim, 2) / dim)
    ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    return theta * (1 - ramp) + theta / factor * ramp, theta * ramp + theta / factor * (1 - ramp)


@pytest.mark.isolates("yarn_inv_freq")     # yarn_correction_range, taught before it, has checks of its own
@pytest.mark.parametrize("dim, base, factor, trained", [(16, 500.0, 4.0, 16), (64, 10000.0, 8.0, 4096)])
def test_yarn_keeps_the_fast_pairs_and_divides_the_slow_ones(dim, base, factor, trained):
    expected, reversed_ramp = reference_yarn(dim, base, factor, trained)
    expect_close(yarn_inv_freq(dim, base, factor, trained), expected, f"yarn_inv_freq({dim}, {base}, {factor}, {trained})",
                 rtol=1e-9, atol=0, diagnoses=[("ramp reversed", "the ramp's 0 (fast pairs, many turns in training) "
                                                "keeps theta and its 1 (slow pairs) takes theta / factor", reversed_ramp)])


def plain(dim, base):
    return base ** (-np.arange(0, dim, 2) / dim)


def ntk(dim, base, factor, seq_len, trained):
    scale = factor * max(seq_len, trained) / trained - (factor - 1)
    return plain(dim, base * scale ** (dim / (dim - 2)))


@pytest.mark.isolates("RopeFrequencies.update")   # dynamic_ntk_inv_freq has checks of its own
def test_the_dynamic_rule_grows_keeps_and_resets_as_transformers_does():
    dim, base, factor, trained = 8, 10000.0, 4.0, 16
    frequencies = RopeFrequencies(dim, base, {"rope_type": "dynamic", "factor": factor}, trained)
    calls = [32, 20, 10, 16, 40]
    expected = [ntk(dim, base, factor, 32, trained), ntk(dim, base, factor, 32, trained), plain(dim, base),
                plain(dim, base), ntk(dim, base, factor, 40, trained)]
    never_resets = expected[:2] + [ntk(dim, base, factor, 32, trained)] * 2 + expected[4:]
    got = []
    for seq_len in calls:
        frequencies.update(seq_len)
        got.append(np.array(frequencies.inv_freq, dtype=np.float64))
    expect_close(np.stack(got), np.stack(expected), f"inv_freq after update({', '.join(map(str, calls))}) in turn",
                 rtol=1e-9, atol=0, diagnoses=[("never resets", "after a stretch, a sequence shorter than the trained "
                                                "length goes back to plain RoPE", np.stack(never_resets))])


@pytest.mark.parametrize("dim, base, trained, expected", [
    (16, 10000.0, 64, (0, 3)),          # i(32) = -0.99 -> 0 after the floor and the clip, i(1) = 2.02 -> 3
    (64, 10000.0, 4096, (10, 23)),      # i(32) = 10.47 -> 10, i(1) = 22.51 -> 23
])
def test_yarn_correction_range_takes_low_from_beta_fast_and_high_from_beta_slow(dim, base, trained, expected):
    def pair_index(turns):                                   # the pair that turns `turns` times in `trained` positions
        return dim * math.log(trained / (turns * 2 * math.pi)) / (2 * math.log(base))
    assert expected == (max(math.floor(pair_index(32.0)), 0), min(math.ceil(pair_index(1.0)), dim - 1))
    swapped = (max(math.floor(pair_index(1.0)), 0), min(math.ceil(pair_index(32.0)), dim - 1))
    expect_close(yarn_correction_range(dim, base, trained), expected, f"yarn_correction_range({dim}, {base}, {trained})",
                 rtol=0, atol=0, diagnoses=[("range swapped", "more turns is a faster pair, a smaller index: low is "
                                             "the pair of beta_fast (32 turns), high that of beta_slow (1 turn)", swapped)])
