"""Greedy argmax (:mod:`golden.argmax`) against a plain loop that states the rules."""

import math

import numpy as np
import pytest

from specgen.golden.argmax import argmax_hw, argmax_hw_bits
from specgen.sim.argmax import logit_vectors
from tests.oracles import seeded_rng


def _loop_argmax(bits):
    """The rules one by one: skip NaNs, replace the best only on strictly greater."""
    vals = [float(np.uint32(b).view(np.float32)) for b in bits]
    best, nan = None, False
    for i, v in enumerate(vals):
        if math.isnan(v):
            nan = True
        elif best is None or v > vals[best]:
            best = i
    if best is None:
        return 0, 0x7FC00000, True
    return best, int(bits[best]), nan


def test_matches_the_loop():
    rng = seeded_rng("argmax_loop")
    x = logit_vectors(rng, 300, 37)
    index, value, nan = argmax_hw_bits(x)
    for k in range(x.shape[0]):
        assert (int(index[k]), int(value[k]), bool(nan[k])) == _loop_argmax(x[k]), k
    assert (index[0], value[0], nan[0]) == (0, 0x7FC00000, True)
    assert (index[1], value[1]) == (0, 0x80000000)
    assert (index[2], value[2], nan[2]) == (2, 0xFF800000, True)


def test_equals_numpy_without_nans():
    rng = seeded_rng("argmax_numpy")
    x = rng.standard_normal((50, 50_288)).astype(np.float32)      # a Mamba2 vocabulary
    assert np.array_equal(argmax_hw(x)[0], np.argmax(x, axis=-1))


def test_the_loop_can_tell_a_last_occurrence_rule():
    """A "greater or equal" rule (last maximum) disagrees on ties: the check is live."""
    x = np.array([[1.0, 3.0, 3.0, 0.0]], np.float32)
    assert argmax_hw(x)[0][0] == 1 and len(x[0]) - 1 - np.argmax(x[0][::-1]) == 2


def test_errors():
    with pytest.raises(ValueError, match=r"^argmax: logits must have at least one element on "
                                         r"the last axis, not shape \(3, 0\)$"):
        argmax_hw(np.zeros((3, 0), np.float32))
    with pytest.raises(TypeError, match=r"^logits must be a uint32 bit array, not float32$"):
        argmax_hw_bits(np.zeros(3, np.float32))
