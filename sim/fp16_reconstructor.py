"""cocotb bench of :class:`hw.fp16_reconstructor.FP16Reconstructor` against ``golden.bsfp``.

The stimulus is every one of the 65,536 possible ``(nibble, residue)`` pairs (in a seeded
random order), i.e. every stored word, including ``W = 1`` on a code the encoder never
remaps. The expected word is :func:`golden.bsfp.restore_stored` of
:func:`golden.bsfp.merge_planes` of the same two planes. The stream scoreboard is
:func:`sim.exponent_decoder.run_stream`.
"""

import cocotb
import numpy as np

from golden.bsfp import merge_planes, restore_stored
from sim.bench import params
from sim.exponent_decoder import config_from, shuffled_words
from sim.streams import run_stream, start


def vectors(config, words):
    """``(inputs, expected)``: ``words`` read as ``nibble << 12 | residue`` (the input
    payload), and the golden's reconstructed word for each; lists of ints."""
    nibbles = (words >> 12).astype(np.uint8)
    residue = words & np.uint16(0x0FFF)
    expected = restore_stored(merge_planes(nibbles, residue), config=config)
    return words.astype(np.int64).tolist(), expected.astype(np.int64).tolist()


def _setup():
    """The run's config and stage count (from :func:`sim.bench.params`)."""
    p = params()
    return config_from(p), p["stages"]


def _labels(words):
    return [f"nibble 0x{int(w) >> 12:x} residue 0x{int(w) & 0xFFF:03x}" for w in words]


@cocotb.test()
async def exhaustive(dut):
    """Every nibble x residue pair, under random source idle and sink back-pressure."""
    config, stages = _setup()
    rng = await start(dut)
    words = shuffled_words(rng, params().get("limit"))
    inputs, expected = vectors(config, words)
    stats = await run_stream(dut, rng, inputs=inputs, expected=expected, stages=stages,
                             idle=0.1, stall=0.1, labels=_labels(words))
    assert stats["delivered"] == len(words), stats


@cocotb.test()
async def full_rate(dut):
    """No idle, no back-pressure: one item per cycle, each after exactly ``stages`` cycles."""
    config, stages = _setup()
    rng = await start(dut)
    words = shuffled_words(rng, 500)
    inputs, expected = vectors(config, words)
    stats = await run_stream(dut, rng, inputs=inputs, expected=expected, stages=stages,
                             idle=0, stall=0, labels=_labels(words))
    assert stats["cycles"] == len(words) + stages, stats


@cocotb.test()
async def reset_mid_stream(dut):
    """Synchronous resets at random points while items are in flight."""
    config, stages = _setup()
    rng = await start(dut)
    words = shuffled_words(rng, 3000)
    inputs, expected = vectors(config, words)
    stats = await run_stream(dut, rng, inputs=inputs, expected=expected, stages=stages,
                             idle=0.3, stall=0.4, reset_every=60, labels=_labels(words))
    assert stats["resets"] > 0, stats
    if stages:
        assert stats["dropped"] > 0, stats
