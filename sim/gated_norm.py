"""cocotb bench of :class:`hw.gated_norm.GatedRMSNorm` against
:func:`golden.rmsnorm.gated_rmsnorm_hw`, bit for bit, at the block's lanes.

Vectors of random normal values at several scales (``1``, ``1e-19``: squares
near the flush boundary ``2**-126``, ``1e15``), some with IEEE special values
(a NaN, an Inf, subnormals, all zeros) and gates ``z`` across the SiLU table's
range and beyond. Every output beat is compared under random source idle and
sink back-pressure; at full rate the exact latency and throughput are checked;
resets in mid-vector must leave nothing behind, and the next vectors must come
out right.
"""

import cocotb
import numpy as np

from specgen.golden.fp import FP16, FP32, convert
from specgen.golden.nonlinear import LUTSpec
from specgen.golden.rmsnorm import gated_rmsnorm_hw
from specgen.sim.bench import TB, params
from specgen.sim.streams import abandon_and_reset, run_vectors

__all__ = ["norm_vectors"]


def norm_vectors(rng, count, n):
    """``(y, z, w)``: ``count`` vectors of ``n`` elements (float32), shared ``w``."""
    scale = rng.choice([1.0, 1.0, 1e-19, 3e-20, 1e15], size=(count, 1))
    y = (rng.standard_normal((count, n)) * scale).astype(np.float32)
    z = (rng.standard_normal((count, n)) * 8).astype(np.float32)
    w = (1 + 0.2 * rng.standard_normal(n)).astype(np.float32)
    # 5 in 12 vectors hold a special case; one always holds subnormals (the flushes).
    kinds = rng.integers(0, 12, size=count)
    kinds[rng.integers(0, count)] = 2
    for v in range(count):
        kind = kinds[v]
        j = rng.integers(0, n)
        if kind == 0:
            y[v, j] = np.nan
        elif kind == 1:
            y[v, j] = np.inf if rng.random() < 0.5 else -np.inf
        elif kind == 2:
            # Unit scale, so r is near 1 and g·r of a subnormal g stays subnormal under "ieee".
            y[v] = rng.standard_normal(n).astype(np.float32)
            y[v, rng.integers(0, n, size=n // 2)] = np.uint32(0x00000300).view(np.float32)
        elif kind == 3:
            y[v] = 0.0
            y[v, j] = -0.0
        elif kind == 4:
            z[v, j] = np.nan if rng.random() < 0.5 else -np.inf
    return y, z, w


class _Vectors:
    """``count`` vectors as input beats of ``lanes`` elements (each field's lanes low
    first) and the expected output beats, packed the same way."""

    def __init__(self, rng, count, p):
        n, gate, L = p["size"], p["gate"], p.get("lanes", 1)
        y, z, w = norm_vectors(rng, count, n)
        want = gated_rmsnorm_hw(y, z if gate else None, w, silu_lut=LUTSpec(**p["silu_lut"]),
                                rsqrt_lut=LUTSpec(**p["rsqrt_lut"]), eps=p["eps"],
                                contract=p["contract"], lanes=L).view(np.uint32)
        if p.get("out16"):
            # The binary16 output: the binary32 result rounded once (IEEE convertFormat).
            want = convert(want, FP32, FP16)
        yb, zb, wb = y.view(np.uint32), z.view(np.uint32), w.view(np.uint32)
        self.beats = []
        for v in range(count):
            for b in range(0, n, L):
                fields = [yb[v, b:b + L], zb[v, b:b + L], wb[b:b + L]] if gate else \
                    [yb[v, b:b + L], wb[b:b + L]]
                words = [x for f in fields for x in f]
                self.beats.append(sum(int(x) << (32 * k) for k, x in enumerate(words)))
        width = 16 if p.get("out16") else 32
        self.expected = [sum(int(x) << (width * k) for k, x in enumerate(beat))
                         for beat in want.reshape(-1, L)]
        if p.get("corrupt"):
            self.expected[len(self.expected) // 2] ^= 1 << (width - 1)


def _beats(p):
    """Beats of one vector."""
    return p["size"] // p.get("lanes", 1)


async def _start(dut):
    p = params()
    tb = TB(dut)
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    await tb.reset()
    return tb, p, np.random.default_rng(tb.rng.getrandbits(64))


@cocotb.test()
async def random_flow(dut):
    """Vectors under random idle and back-pressure, every output bit for bit."""
    tb, p, rng = await _start(dut)
    vec = _Vectors(rng, p.get("vectors", 24), p)
    await run_vectors(tb, vec.beats, vec.expected, n=_beats(p), idle=0.2, stall=0.3)


@cocotb.test()
async def full_rate(dut):
    """No idle, no back-pressure: the first output ``latency`` cycles after a vector's last
    input, one output beat per cycle, the second vector loaded without a wait (the other
    bank), and two vectors every ``pair_cycles`` cycles."""
    tb, p, rng = await _start(dut)
    n, count = _beats(p), 6
    vec = _Vectors(rng, count, p)
    t_in, t_out = await run_vectors(tb, vec.beats, vec.expected, n=n, idle=0, stall=0)
    first = [t_in[v * n] for v in range(count)]
    for v in range(count):
        ins, outs = t_in[v * n:(v + 1) * n], t_out[v * n:(v + 1) * n]
        assert outs[0] - ins[-1] == p["latency"], (v, outs[0] - ins[-1], p["latency"])
        assert outs[-1] - outs[0] == n - 1 and ins[-1] - ins[0] == n - 1, (v, ins, outs)
        if v >= 2:
            assert first[v] - first[v - 2] == p["pair_cycles"], (v, first, p["pair_cycles"])
    assert first[1] - first[0] == n, first


@cocotb.test()
async def reset_mid_stream(dut):
    """Resets in mid-load and mid-emit; after each, fresh vectors come out right."""
    tb, p, rng = await _start(dut)
    n = _beats(p)
    for cut in (n // 2, n + 1, n * 2 - 1, 3):
        old = _Vectors(rng, 3, p)        # abandoned: only the reset's cleanliness is checked
        await abandon_and_reset(tb, old.beats, cut)
        fresh = _Vectors(rng, 2, p)
        await run_vectors(tb, fresh.beats, fresh.expected, n=n, idle=0.3, stall=0.4)
