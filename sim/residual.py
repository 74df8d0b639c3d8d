"""cocotb bench of :class:`hw.residual.Residual` against :func:`golden.residual.residual_hw`.

Random pairs, near-cancelling pairs whose sums are subnormal (the flush boundary
of ``"dspfp32"``) and every pairing of the IEEE special values, under random idle
and back-pressure, at full rate and across resets in mid-stream.
"""

import cocotb
import numpy as np

from specgen.golden.residual import residual_hw_bits
from specgen.sim.bench import params
from specgen.sim.streams import run_stream, start

__all__ = ["SPECIALS", "residual_inputs", "residual_vectors"]

#: Bit patterns paired with each other: FTZ boundaries, zeros, Infs, NaNs, the largest finite.
SPECIALS = np.array([0x00000001, 0x807FFFFF, 0x00800000, 0x80800000, 0x007FFFFF, 0x00000000,
                     0x80000000, 0x7F800000, 0xFF800000, 0x7FC00001, 0xFFA00000, 0x7F7FFFFF,
                     0xFF7FFFFF, 0x00400000, 0x80400001], dtype=np.uint32)



def residual_inputs(rng, n):
    """Random values, near-cancelling pairs, and the special values in every pairing."""
    h = rng.standard_normal(n).astype(np.float32)
    d = rng.standard_normal(n).astype(np.float32)
    near = rng.choice(n, n // 4, replace=False)
    d[near] = -h[near] * np.float32(1 + 2 ** -20)            # cancellation: tiny, subnormal sums
    tiny = rng.choice(n, n // 8, replace=False)
    h[tiny] = h[tiny] * np.float32(1e-37)
    d[tiny] = -h[tiny] * np.float32(1.0000001)
    sa, sb = np.meshgrid(SPECIALS, SPECIALS)
    hb = np.concatenate([h.view(np.uint32), sa.ravel()])
    db = np.concatenate([d.view(np.uint32), sb.ravel()])
    return hb, db



def residual_vectors(rng, count, contract):
    """Packed beats ``h | d << 32`` and the golden sums."""
    h, d = residual_inputs(rng, count)
    want = residual_hw_bits(h, d, contract=contract)
    return [int(a) | int(b) << 32 for a, b in zip(h, d)], [int(v) for v in want]


async def _run(dut, *, count, idle, stall, reset_every=None):
    p = params()
    rng = await start(dut)
    inputs, expected = residual_vectors(np.random.default_rng(rng.getrandbits(64)), count,
                                        p["contract"])
    if p.get("corrupt"):
        expected[len(expected) // 2] ^= 1
    return await run_stream(dut, rng, inputs=inputs, expected=expected, stages=p["latency"],
                            idle=idle, stall=stall, reset_every=reset_every,
                            capacity=p["capacity"])


@cocotb.test()
async def random_flow(dut):
    """Every sum under random idle and back-pressure."""
    stats = await _run(dut, count=1000, idle=0.2, stall=0.3)
    assert stats["delivered"] == stats["sent"], stats


@cocotb.test()
async def full_rate(dut):
    """One sum per cycle, each exactly ``latency`` cycles after its operands."""
    stats = await _run(dut, count=300, idle=0, stall=0)
    assert stats["cycles"] == stats["sent"] + params()["latency"], stats


@cocotb.test()
async def reset_mid_stream(dut):
    """Synchronous resets with sums in the adder and the FIFO."""
    stats = await _run(dut, count=1500, idle=0.3, stall=0.4, reset_every=50)
    assert stats["resets"] > 0 and stats["dropped"] > 0, stats
