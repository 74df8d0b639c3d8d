"""cocotb bench of :class:`hw.exponent_decoder.ExponentDecoder` against ``golden.bsfp``.

The stimulus is the draft pass's view of every one of the 65,536 possible stored words
(in a seeded random order): its nibble ``s << 3 | c`` (:func:`golden.bsfp.split_planes`),
or ``s << 4 | W << 3 | c`` for the 5-bit ``"E3M0+W"`` draft. The expected sign and
exponent come from :func:`golden.bsfp.draft_table` and :func:`golden.bsfp.draft_index`
of the same word, so every stored word, misread ones included, is checked against the
golden's draft value.

:func:`run_stream` is the stream scoreboard shared with ``sim/fp16_reconstructor.py``:
one source with random idle, one sink with random back-pressure, a queue of items in
flight, and checks that nothing is lost, duplicated, reordered or early.
"""


import numpy as np

from specgen.golden.bsfp import draft_index, draft_table, split_planes
from specgen.sim.streams import word_stream_tests

def vectors(config, words):
    """``(inputs, expected)`` for the decoder: lists of ints, one per stored word."""
    nibbles, _ = split_planes(words)
    index = draft_index(words, config=config)
    sig, exp = draft_table(config)
    assert np.all(sig == 1), "an E3M0 draft weight is a power of two"
    sign = (words >> 15).astype(np.int64)
    if config.draft == "E3M0+W":
        inputs = (sign << 4) | index
    else:
        inputs = nibbles.astype(np.int64)
    expected = (sign << 4) | (exp[index].astype(np.int64) + 15)
    return inputs.tolist(), expected.tolist()


def _labels(words):
    return [f"word 0x{int(w):04x}" for w in words]


exhaustive, full_rate, reset_mid_stream = word_stream_tests(vectors, _labels, module=__name__)
