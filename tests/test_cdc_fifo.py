"""``CDCFIFO``: the clock crossing of the AXI4 masters."""

import pytest

from specgen.hw.cdc_fifo import CDCFIFO
from specgen.sim.runner import run_bench

# (width, depth, write domain and MHz, read domain and MHz): the read master's data
# crossing on vck190 (memory 300 -> fabric 400) in block RAM (deeper than LUTRAM_DEPTH,
# read on the edge) and in distributed RAM, on vhk158 (450 -> 250), a command crossing
# (fabric -> memory, depth 4), and the smallest FIFO.
CONFIGS = [
    pytest.param(16, 128, ("mem", 300), ("sync", 400), id="w16-d128-300to400"),
    pytest.param(8, 16, ("mem", 300), ("sync", 400), id="w8-d16-300to400"),
    pytest.param(12, 8, ("mem", 450), ("sync", 250), id="w12-d8-450to250"),
    pytest.param(20, 4, ("sync", 400), ("mem", 300), id="w20-d4-400to300"),
    pytest.param(3, 2, ("sync", 250), ("mem", 450), id="w3-d2-250to450"),
]


def _ports(domain):
    return ("clk", "rst") if domain == "sync" else (f"{domain}_clk", f"{domain}_rst")


def _run(width, depth, w, r, testcase, **extra):
    fifo = CDCFIFO(width=width, depth=depth, w_domain=w[0], r_domain=r[0])
    (w_clk, w_rst), (r_clk, r_rst) = _ports(w[0]), _ports(r[0])
    run_bench(fifo, name=f"cdc_fifo_w{width}_d{depth}_{w[0]}", module="specgen.sim.cdc_fifo",
              testcase=testcase,
              params={"width": width, "depth": depth, "w_mhz": w[1], "r_mhz": r[1],
                      "w_clk": w_clk, "w_rst": w_rst, "r_clk": r_clk, "r_rst": r_rst,
                      "phases": 40, "resets": True, "rate_words": 400, **extra})


@pytest.mark.sim
@pytest.mark.parametrize("width,depth,w,r", CONFIGS)
def test_cdc_fifo_verilator(width, depth, w, r):
    """Random idle and stalls in phases that fill and drain, resets of both domains and
    of the write domain alone in mid-stream: every word written after a reset is read
    once, in order, and no other; the levels never count a word that is not there.
    From a depth of 8 the FIFO carries a word every edge of the slower clock."""
    tests = ["random_traffic"] + (["full_rate"] if depth >= 8 else [])
    _run(width, depth, w, r, tests)


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize("width,depth,w,r", CONFIGS[:4])
def test_cdc_fifo_long(width, depth, w, r):
    _run(width, depth, w, r, ["random_traffic"], phases=1500)


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"width": 8, "depth": 6}, ValueError, "CDCFIFO.depth must be a power of two >= 2, not 6"),
    ({"width": 8, "depth": 1}, ValueError, "CDCFIFO.depth must be an integer >= 2, not 1"),
    ({"width": 0, "depth": 4}, ValueError, "CDCFIFO.width must be an integer >= 1, not 0"),
    ({"width": 8, "depth": 4, "w_domain": "a", "r_domain": "a"}, ValueError,
     "CDCFIFO.r_domain must differ from w_domain ('a'): within one domain use a "
     "synchronous FIFO"),
    ({"width": 8, "depth": 4, "w_domain": 3}, TypeError,
     "CDCFIFO.w_domain must be a clock domain name, not 3"),
])
def test_cdc_fifo_rejects_bad_parameters(kwargs, exc, message):
    with pytest.raises(exc) as info:
        CDCFIFO(**kwargs)
    assert str(info.value) == message


def test_cdc_fifo_parameters_are_keyword_only():
    with pytest.raises(TypeError):
        CDCFIFO(8, 4)


def test_cdc_fifo_properties():
    f = CDCFIFO(width=12, depth=8, w_domain="mem", r_domain="sync")
    assert (f.width, f.depth, f.latency, f.lutram) == (12, 8, 3, True)
    assert not CDCFIFO(width=12, depth=128).lutram
    assert f.w_level.shape().width == f.r_written.shape().width == 4


@pytest.mark.parametrize("bits", [2, 3, 4, 7, 10, 12, 14])
def test_gray_decode_in_registers(bits):
    """``_ungray``: every Gray code of ``bits`` bits (a sample above 10) decodes to its
    binary value after :attr:`CDCFIFO.decode_stages` edges (one stage up to 3 bits, two
    above), checked against the definition (bit i = XOR of Gray bits ≥ i) computed
    here as the inverse of ``v ^ v >> 1``."""
    import random

    from amaranth import Module, Signal
    from amaranth.sim import Simulator

    from specgen.hw.cdc_fifo import DECODE_GROUP, _ungray
    m = Module()
    g = Signal(bits)
    out = _ungray(m, "sync", g, "dec")
    stages = 1 if bits <= DECODE_GROUP else 2
    values = list(range(2 ** bits)) if bits <= 10 else random.Random(bits).sample(
        range(2 ** bits), 600)
    seen = []

    async def bench(ctx):
        for v in values + [0] * stages:
            ctx.set(g, v ^ (v >> 1))
            await ctx.tick()
            seen.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen[stages - 1:stages - 1 + len(values)] == values


def test_cdc_fifo_decode_stages():
    assert [CDCFIFO(width=1, depth=d).decode_stages for d in (2, 4, 8, 512)] == [1, 1, 2, 2]


@pytest.mark.parametrize("width,depth", [(32, 512), (40, 4)])
def test_cdc_fifo_meets_the_vhk158_memory_clock_budget(width, depth):
    """Every stage within 3 levels, the budget of VHK158's 450 MHz memory clock: the
    write master's data crossing (32-bit beats, 512 deep, read in ``mem``, where a
    one-register decode of its 10-bit pointer measured 4.0) and a command crossing."""
    from specgen.gen.estimate.report import estimate_block
    est = estimate_block(CDCFIFO(width=width, depth=depth, w_domain="sync", r_domain="mem"),
                         name=f"cdc_fifo_w{width}_d{depth}_to_mem")
    worst = max(est.depth, key=lambda d: d.levels)
    assert worst.levels <= 3, (worst.module, worst.levels, worst.endpoint, worst.cells)


@pytest.mark.parametrize("width,depth", [(512, 128), (40, 4)])
def test_cdc_fifo_meets_the_vck190_level_budget(width, depth):
    """Every stage within 4 levels, the budget of VCK190's 400 MHz (UltraScale+ proxy,
    ``docs/estimate.md``): the read master's data crossing (512-bit words, 128 deep) and
    a command crossing. Amaranth's AsyncFIFO in the same place measures 7."""
    from specgen.gen.estimate.report import estimate_block
    est = estimate_block(CDCFIFO(width=width, depth=depth, w_domain="mem", r_domain="sync"),
                         name=f"cdc_fifo_w{width}_d{depth}")
    worst = max(est.depth, key=lambda d: d.levels)
    assert worst.levels <= 4, (worst.module, worst.levels, worst.endpoint, worst.cells)
