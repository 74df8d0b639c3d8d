"""cocotb bench of :class:`hw.fp16_reconstructor.FP16Reconstructor` against ``golden.bsfp``.

The stimulus is every one of the 65,536 possible ``(nibble, residue)`` pairs (in a seeded
random order), i.e. every stored word, including ``W = 1`` on a code the encoder never
remaps. The expected word is :func:`golden.bsfp.restore_stored` of
:func:`golden.bsfp.merge_planes` of the same two planes. The stream scoreboard is
:func:`sim.streams.run_stream`.
"""

import numpy as np

from specgen.golden.bsfp import merge_planes, restore_stored
from specgen.sim.streams import word_stream_tests


def vectors(config, words):
    """``(inputs, expected)``: ``words`` read as ``nibble << 12 | residue`` (the input
    payload), and the golden's reconstructed word for each; lists of ints."""
    nibbles = (words >> 12).astype(np.uint8)
    residue = words & np.uint16(0x0FFF)
    expected = restore_stored(merge_planes(nibbles, residue), config=config)
    return words.astype(np.int64).tolist(), expected.astype(np.int64).tolist()


def _labels(words):
    return [f"nibble 0x{int(w) >> 12:x} residue 0x{int(w) & 0xFFF:03x}" for w in words]


exhaustive, full_rate, reset_mid_stream = word_stream_tests(vectors, _labels, module=__name__)
