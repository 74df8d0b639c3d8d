"""cocotb bench of :class:`hw.conv1d.Conv1d` against :func:`golden.conv1d.conv1d_hw`, bit for bit.

Channels are random normal values at several scales, mixed with the IEEE
special values (±0, ±Inf, NaNs with payloads) and the flush-to-zero boundaries
(the largest subnormal, the smallest normal, products that round across
``2**-126``), so the ``"dspfp32"`` contract's flushes happen in the stream. Every
output beat (``y`` and the new window) is compared under random source idle
cycles and sink back-pressure, at full rate (exact latency and one beat per
cycle), and across synchronous resets in mid-stream.
"""

import cocotb
import numpy as np

from specgen.golden.conv1d import conv1d_hw
from specgen.golden.nonlinear import LUTSpec
from specgen.sim.bench import params
from specgen.sim.streams import run_stream, start

__all__ = ["channel_inputs", "conv1d_vectors"]

#: Bit patterns mixed into the channels: FTZ boundaries, zeros, Infs, NaNs.
SPECIALS = np.array([0x00000001, 0x807FFFFF, 0x00800000, 0x80800000, 0x007FFFFF, 0x00000000,
                     0x80000000, 0x7F800000, 0xFF800000, 0x7FC00001, 0xFFA00000, 0x1F800000,
                     0x20000000, 0x9F000000, 0x7F7FFFFF, 0x00400000, 0x3F800000],
                    dtype=np.uint32)


def channel_inputs(rng, count, d_conv):
    """``(window, x, w, b)`` of ``count`` channels as float32 arrays (golden shapes)."""
    scale = rng.choice([1.0, 1e-3, 1e-18, 1e-19, 1e18], size=count).astype(np.float32)
    window = (rng.standard_normal((d_conv - 1, count)) * scale).astype(np.float32)
    x = (rng.standard_normal(count) * scale).astype(np.float32)
    # Tiny channels get tiny taps too: products near 2**-126, where the flushes are.
    wscale = np.where(scale < 1e-10, np.float32(1e-19), np.float32(1))[:, None]
    w = (rng.standard_normal((count, d_conv)) * wscale).astype(np.float32)
    b = (rng.standard_normal(count) * scale * wscale[:, 0]).astype(np.float32)
    for arr in (window, x, w, b):
        flat = arr.reshape(-1)
        idx = rng.choice(flat.size, size=flat.size // 10, replace=False)
        flat[idx] = rng.choice(SPECIALS, size=idx.size).view(np.float32)
    return window, x, w, b


def conv1d_vectors(rng, count, *, d_conv, silu_lut, contract):
    """Packed input beats and the golden output beats (Python ints, word ``j`` at bit 32j)."""
    window, x, w, b = channel_inputs(rng, count, d_conv)
    y, win = conv1d_hw(window, x, w, b, silu_lut=silu_lut, contract=contract)
    words_in = np.concatenate((window, x[None], w.T, b[None]), axis=0).view(np.uint32)
    words_out = np.concatenate((y[None], win), axis=0).view(np.uint32)

    def pack(col):
        return sum(int(v) << (32 * j) for j, v in enumerate(col))
    return ([pack(words_in[:, c]) for c in range(count)],
            [pack(words_out[:, c]) for c in range(count)])


def _setup(count):
    p = params()
    return p, LUTSpec(**p["silu_lut"]), count if p.get("count") is None else min(count, p["count"])


async def _run(dut, *, count, idle, stall, reset_every=None):
    p, spec, n = _setup(count)
    rng = await start(dut)
    nrng = np.random.default_rng(rng.getrandbits(64))
    inputs, expected = conv1d_vectors(nrng, n, d_conv=p["d_conv"], silu_lut=spec,
                                      contract=p["contract"])
    if p.get("corrupt"):
        # The negative control: one expected beat is wrong, so the bench must fail.
        expected[n // 2] ^= 1
    return await run_stream(dut, rng, inputs=inputs, expected=expected, stages=p["latency"],
                            idle=idle, stall=stall, reset_every=reset_every,
                            capacity=p["capacity"], labels=[f"channel {c}" for c in range(n)])


@cocotb.test()
async def random_flow(dut):
    """Every beat against the golden model under random idle and back-pressure."""
    stats = await _run(dut, count=1500, idle=0.2, stall=0.3)
    assert stats["delivered"] == stats["sent"], stats


@cocotb.test()
async def full_rate(dut):
    """No idle, no back-pressure: one beat per cycle, each after exactly ``latency`` cycles."""
    p, _, n = _setup(400)
    stats = await _run(dut, count=400, idle=0, stall=0)
    assert stats["cycles"] == n + p["latency"], stats


@cocotb.test()
async def reset_mid_stream(dut):
    """Synchronous resets at random points with beats in the pipeline and the FIFO."""
    stats = await _run(dut, count=2000, idle=0.3, stall=0.4, reset_every=80)
    assert stats["resets"] > 0 and stats["dropped"] > 0, stats
