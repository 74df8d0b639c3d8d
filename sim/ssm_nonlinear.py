"""cocotb bench of :class:`hw.ssm_nonlinear.LUTFunction` against
:func:`golden.nonlinear.lut_eval`, bit for bit.

Inputs: random values across and beyond ``[lo, hi]``, every node's binary32
neighbours for a random sample of nodes, the range ends and their neighbours,
tiny and subnormal values of both signs, ±0, ±Inf, NaNs and uniform random bit
patterns. ``en`` toggles at random and ``valid`` drops at random.
"""

from collections import deque

import cocotb
import numpy as np

from specgen.golden.dsp import Binary32Ops
from specgen.golden.nonlinear import LUTSpec, lut_eval
from specgen.sim.bench import TB, params

__all__ = ["lut_inputs"]


def lut_inputs(rng, spec, count):
    """binary32 bit patterns (uint32) exercising ``spec``'s table, ends and specials."""
    f32 = np.float32
    width = spec.hi - spec.lo
    nodes = (spec.first_index + rng.integers(0, spec.nodes, size=count // 8)) * spec.step
    nodes = nodes.astype(f32)
    ends = np.array([spec.lo, spec.hi], dtype=f32)
    tiny = np.ldexp(1.0, -rng.integers(1, 150, size=count // 16)).astype(f32)
    fixed = np.concatenate([
        ends, np.nextafter(ends, f32(np.inf)), np.nextafter(ends, f32(-np.inf)),
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, spec.step, -spec.step,
                  1e-45, -1e-45, 1.1754942e-38, -1.1754942e-38], dtype=f32)]).view(np.uint32)
    parts = [
        fixed,
        rng.uniform(spec.lo - width / 4, spec.hi + width / 4, size=count // 2).astype(f32).view(np.uint32),
        nodes.view(np.uint32),
        np.nextafter(nodes, f32(np.inf)).view(np.uint32),
        np.nextafter(nodes, f32(-np.inf)).view(np.uint32),
        tiny.view(np.uint32), (-tiny).view(np.uint32),
        rng.integers(0, 1 << 32, size=count // 8, dtype=np.uint64).astype(np.uint32),
        np.array([0x7F800001, 0xFFC00000, 0x7FFFFFFF], dtype=np.uint32),
    ]
    return np.concatenate(parts).astype(np.uint32)


@cocotb.test()
async def lut(dut):
    """Every result against ``lut_eval`` under random stalls and bubbles."""
    p = params()
    spec = LUTSpec(**p["spec"])
    latency = p["latency"]
    tb = TB(dut)
    rng = np.random.default_rng(tb.rng.getrandbits(64))
    x = lut_inputs(rng, spec, p.get("count", 2000))
    ops = Binary32Ops(p.get("contract", "ieee"))
    want = lut_eval(spec, x.view(np.float32), ops=ops).view(np.uint32)
    dut.en.value = 0
    dut.valid.value = 0
    await tb.reset()
    hist = deque([None] * latency, maxlen=latency)
    checked, i = 0, 0
    while checked < len(x):
        en = int(tb.rng.random() < 0.85)
        cur = None if (tb.rng.random() < 0.1 or i >= len(x)) else i
        dut.en.value = en
        dut.valid.value = int(cur is not None)
        dut.x.value = int(x[cur]) if cur is not None else tb.rng.getrandbits(32)
        await tb.settle()
        j = hist[latency - 1]
        assert int(dut.y_valid.value) == int(j is not None), "y_valid out of step"
        if j is not None:
            got = int(dut.y.value)
            xv = float(x[j:j + 1].view(np.float32)[0])
            assert got == int(want[j]), (f"{spec.function}(x={int(x[j]):#010x} = {xv!r}): "
                                         f"y {got:#010x}, lut_eval says {int(want[j]):#010x}")
            checked += 1
        if en:
            hist.appendleft(cur)
            if cur is not None:
                i += 1
        await tb.edge()
    dut._log.info("checked %d results", checked)
