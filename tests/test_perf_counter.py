"""``hw.perf_counter.PerfCounter`` against a plain Python count, every cycle."""

import random

import pytest
from amaranth.sim import Simulator

from specgen.hw.perf_counter import PerfCounter


def _run(dut, stimulus):
    """Run ``stimulus`` [(inc, clear, snap)] and return ``value`` after every edge."""
    seen = []

    async def bench(ctx):
        for inc, clear, snap in stimulus:
            ctx.set(dut.inc, inc)
            ctx.set(dut.clear, clear)
            ctx.set(dut.snap, snap)
            await ctx.tick()
            seen.append(ctx.get(dut.value))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return seen


def _model(width, stimulus):
    count, value, out = 0, 0, []
    for inc, clear, snap in stimulus:
        if snap:
            value = count
        count = 0 if clear else (count + inc) % (1 << width)
        out.append(value)
    return out


@pytest.mark.parametrize("width,low,step", [(48, 12, 1), (16, 4, 3), (10, 2, 1)])
def test_snapshot_is_the_count(width, low, step):
    rng = random.Random(width * 100 + low)
    # Long runs of increments so the low part carries many times, snapshots in the
    # cycle of a carry and right after it, and two clears.
    n = max(3000, 3 << low)
    stimulus = [(rng.randrange(1, 1 << step) if rng.random() < 0.9 else 0,
                 int(i in (100, n - 50)), int(rng.random() < 0.3)) for i in range(n)]
    expected = _model(width, stimulus)
    assert max(expected) >> low >= 2  # the upper part is exercised
    got = _run(PerfCounter(width=width, low_bits=low, step_bits=step), stimulus)
    assert got == expected


def test_wraps_modulo_width():
    # 10 bits, low part 2: 1,100 increments wrap the count once (1100 mod 1024 = 76).
    stimulus = [(1, 0, 0)] * 1100 + [(0, 0, 1), (0, 0, 0)]
    assert _run(PerfCounter(width=10, low_bits=2), stimulus)[-1] == 76


@pytest.mark.parametrize("kwargs,message", [
    ({"width": 48, "low_bits": 48}, "PerfCounter.low_bits must be an integer"),
    ({"width": 48, "low_bits": 12, "step_bits": 12}, "PerfCounter.step_bits must be an integer"),
    ({"width": 2}, "PerfCounter.width must be an integer"),
])
def test_rejects_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PerfCounter(**kwargs)
