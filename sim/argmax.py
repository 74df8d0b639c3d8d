"""cocotb bench of :class:`hw.argmax.Argmax` against :func:`golden.argmax.argmax_hw`,
one logit a beat or ``lanes``.

Logit vectors with many ties (small integers), zeros of both signs, ±Inf,
NaNs (one vector all NaN) and random normal values; every result (index, value
bits, NaN flag) under random idle and back-pressure, at full rate (latency and
cycles per vector) and after resets in mid-vector and with a result waiting.
"""

import cocotb
import numpy as np

from specgen.golden.argmax import argmax_hw_bits
from specgen.hw.argmax import argmax_out_layout
from specgen.sim.bench import TB, params
from specgen.sim.streams import abandon_and_reset, run_vectors

__all__ = ["logit_vectors", "argmax_vectors"]


def logit_vectors(rng, count, v):
    """``count`` vectors of ``v`` logits (``uint32``): ties, signed zeros, Infs and NaNs."""
    x = rng.integers(-4, 5, size=(count, v)).astype(np.float32)
    x[count // 3:] = rng.standard_normal((count - count // 3, v)).astype(np.float32)
    specials = np.array([0x80000000, 0x00000000, 0x7F800000, 0xFF800000, 0x7FC00000,
                         0xFFFFFFFF, 0x00000001, 0x80000001], np.uint32).view(np.float32)
    mask = rng.random((count, v)) < 0.05
    x[mask] = rng.choice(specials, size=int(mask.sum()))
    x[0] = np.float32(np.nan)                                  # all NaN
    x[1] = np.float32(-0.0)
    x[1, min(3, v - 1)] = 0.0                                  # −0 first: −0 wins the tie
    x[2] = np.float32(-np.inf)
    x[2, :2] = np.float32(np.nan)
    return x.view(np.uint32)


def argmax_vectors(rng, count, size, lanes=1):
    """Beats (``lanes`` logits each, lane ``j`` in bits ``32j …``) and the expected packed
    results, in vector order."""
    x = logit_vectors(rng, count, size)
    x = x[rng.permutation(count)]
    index, value, nan = argmax_hw_bits(x)
    layout = argmax_out_layout(size)
    off = {name: layout[name].offset for name in ("index", "value", "nan")}
    want = [int(i) << off["index"] | int(v) << off["value"] | int(f) << off["nan"]
            for i, v, f in zip(index, value, nan)]
    words = x.reshape(-1, lanes)
    beats = [sum(int(w) << 32 * j for j, w in enumerate(row)) for row in words]
    return beats, want


async def _start(dut):
    tb = TB(dut)
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    await tb.reset()
    p = params()
    return tb, p, np.random.default_rng(tb.rng.getrandbits(64))


def _vectors(p, rng, count):
    beats, want = argmax_vectors(rng, count, p["size"], p.get("lanes", 1))
    if p.get("corrupt"):
        want[len(want) // 2] ^= 1                           # the index's lowest bit
    return beats, want


@cocotb.test()
async def random_flow(dut):
    """Every result under random idle and back-pressure."""
    tb, p, rng = await _start(dut)
    beats, want = _vectors(p, rng, 60)
    await run_vectors(tb, beats, want, n=1, idle=0.2, stall=0.5)


@cocotb.test()
async def full_rate(dut):
    """Results ``latency`` cycles after each vector's last logit, a vector every
    ``vector_cycles`` cycles."""
    tb, p, rng = await _start(dut)
    n, count = p["size"] // p.get("lanes", 1), 5
    beats, want = _vectors(p, rng, count)
    t_in, t_out = await run_vectors(tb, beats, want, n=1, idle=0, stall=0)
    for v in range(count):
        assert t_out[v] - t_in[(v + 1) * n - 1] == p["latency"], (v, t_in, t_out)
        if v:                       # the result's cycle holds the input once per vector
            assert t_in[(v + 1) * n - 1] - t_in[v * n - 1] == p["vector_cycles"], (v, t_in)


@cocotb.test()
async def reset_mid_stream(dut):
    """Resets in mid-vector and with a result waiting; fresh vectors then come out right."""
    tb, p, rng = await _start(dut)
    n = p["size"] // p.get("lanes", 1)
    for cut in (n // 2, n, n + 3, 2 * n):
        old, _ = _vectors(p, rng, 3)
        await abandon_and_reset(tb, old, cut)
        beats, want = _vectors(p, rng, 4)
        await run_vectors(tb, beats, want, n=1, idle=0.3, stall=0.4)
