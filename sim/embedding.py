"""cocotb bench of :class:`hw.embedding.EmbeddingReader` against
:func:`golden.embedding.embedding_command`.

Random tokens over the whole id range (bad ones ``≥ vocab`` included, which
must issue nothing and raise ``bad``), the first and the last row, under random
idle and back-pressure, at full rate, and across resets (which clear ``bad``).
"""

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from specgen.golden.embedding import embedding_command
from specgen.hw.axi_master import command_layout
from specgen.sim.bench import TB, params
from specgen.sim.streams import abandon_and_reset, run_vectors

__all__ = ["embedding_vectors"]


def embedding_vectors(rng, count, p, *, bad=True):
    """Tokens and the packed commands of the good ones."""
    top = (1 << p["token_bits"]) if bad else p["vocab"]
    tokens = [0, p["vocab"] - 1] + [int(t) for t in rng.integers(0, top, size=count)]
    layout = command_layout(p["beat_bits"])
    a, b = layout["addr"].offset, layout["beats"].offset
    want, any_bad = [], False
    for t in tokens:
        addr, beats, is_bad = embedding_command(t, vocab=p["vocab"], row_bytes=p["row_bytes"],
                                                beat_bytes=p["beat_bytes"], base=p["base"])
        any_bad |= is_bad
        if not is_bad:
            want.append(addr << a | beats << b)
    if p.get("corrupt"):
        want[len(want) // 2] ^= 1 << a
    return tokens, want, any_bad


async def _start(dut):
    p = params()
    tb = TB(dut)
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    dut.base.value = p["base"]
    await tb.reset()
    return tb, p, np.random.default_rng(tb.rng.getrandbits(64))


async def _bad_flag(dut):
    await ReadOnly()
    value = int(dut.bad.value)
    await RisingEdge(dut.clk)
    return value


@cocotb.test()
async def random_flow(dut):
    """Every command under random idle and back-pressure; ``bad`` after a bad token."""
    tb, p, rng = await _start(dut)
    tokens, want, any_bad = embedding_vectors(rng, 400, p)
    await run_vectors(tb, tokens, want, n=1, idle=0.3, stall=0.4)
    assert await _bad_flag(dut) == int(any_bad)


@cocotb.test()
async def full_rate(dut):
    """A command ``latency`` cycles after its token; a token every two cycles."""
    tb, p, rng = await _start(dut)
    tokens, want, _ = embedding_vectors(rng, 50, p, bad=False)
    t_in, t_out = await run_vectors(tb, tokens, want, n=1, idle=0, stall=0)
    assert all(o - i == p["latency"] for i, o in zip(t_in, t_out)), (t_in, t_out)
    assert t_in[-1] - t_in[0] == 2 * (len(tokens) - 1), t_in
    assert await _bad_flag(dut) == 0


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset with a command waiting drops it and clears ``bad``."""
    tb, p, rng = await _start(dut)
    for cut in (1, 2, 5):
        old = [(1 << p["token_bits"]) - 1] + [int(t) for t in rng.integers(0, p["vocab"], 5)]
        await abandon_and_reset(tb, old, cut)
        assert await _bad_flag(dut) == 0, "reset did not clear bad"
        tokens, want, _ = embedding_vectors(rng, 30, p, bad=False)
        await run_vectors(tb, tokens, want, n=1, idle=0.3, stall=0.4)
