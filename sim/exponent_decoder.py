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


import cocotb
import numpy as np

from golden.bsfp import BSFPConfig, draft_index, draft_table, split_planes
from sim.bench import params
from sim.streams import run_stream, start

WORDS = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


def config_from(p):
    """The :class:`BSFPConfig` a bench run's JSON parameters describe."""
    return BSFPConfig(remap=tuple(tuple(pair) for pair in p["remap"]), draft=p["draft"],
                      pair_representative=p.get("pair_representative", "lower"))


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


def shuffled_words(rng, limit=None):
    """All 65,536 words in a random order drawn from the run's seed (or the first ``limit``)."""
    words = WORDS[np.random.default_rng(rng.getrandbits(64)).permutation(WORDS.size)]
    return words if limit is None else words[:limit]


def _setup():
    """The run's config and stage count (from :func:`sim.bench.params`)."""
    p = params()
    return config_from(p), p["stages"]


@cocotb.test()
async def exhaustive(dut):
    """Every stored word's draft, under random source idle and sink back-pressure."""
    config, stages = _setup()
    rng = await start(dut)
    words = shuffled_words(rng, params().get("limit"))
    inputs, expected = vectors(config, words)
    labels = [f"word 0x{int(w):04x}" for w in words]
    stats = await run_stream(dut, rng, inputs=inputs, expected=expected, stages=stages,
                             idle=0.1, stall=0.1, labels=labels)
    assert stats["delivered"] == len(words), stats


@cocotb.test()
async def full_rate(dut):
    """No idle, no back-pressure: one item per cycle, each after exactly ``stages`` cycles."""
    config, stages = _setup()
    rng = await start(dut)
    words = shuffled_words(rng, 500)
    inputs, expected = vectors(config, words)
    stats = await run_stream(dut, rng, inputs=inputs, expected=expected, stages=stages,
                             idle=0, stall=0)
    assert stats["cycles"] == len(words) + stages, stats


@cocotb.test()
async def reset_mid_stream(dut):
    """Synchronous resets at random points while items are in flight."""
    config, stages = _setup()
    rng = await start(dut)
    words = shuffled_words(rng, 3000)
    inputs, expected = vectors(config, words)
    stats = await run_stream(dut, rng, inputs=inputs, expected=expected, stages=stages,
                             idle=0.3, stall=0.4, reset_every=60)
    assert stats["resets"] > 0, stats
    if stages:
        assert stats["dropped"] > 0, stats
