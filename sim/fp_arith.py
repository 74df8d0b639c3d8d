"""cocotb bench of :class:`hw.fp_arith.FPMul` / :class:`hw.fp_arith.FPAdd` against
:func:`golden.fp.mul` / :func:`golden.fp.add`, bit for bit.

The operands are every pair of the format's special encodings (zeros, smallest
and largest subnormal, normal edges, one, max, Inf, NaNs, both signs), then
``count`` random pairs mixing uniform bit patterns, specials, exponents at both
ends of the range (subnormal, near overflow) and sparse fractions (ties).
Expected values come only from the golden functions. ``en`` toggles at random
(a stalled pipeline must hold) and ``valid`` drops at random (bubbles must
travel as bubbles).
"""

from collections import deque

import cocotb
import numpy as np

from specgen.golden.fp import add, mul
from specgen.sim.bench import params
from specgen.sim.fp_datapath import fmt_of, make_tb, random_operands, special_operands

__all__ = ["operand_pairs"]


def operand_pairs(rng, fmt, count):
    """All special-class pairs followed by ``count`` random pairs (uint arrays)."""
    specials = np.array(special_operands(fmt), dtype=fmt.dtype)
    sa, sb = np.meshgrid(specials, specials)
    a = np.concatenate([sa.ravel(), random_operands(rng, fmt, count)])
    b = np.concatenate([sb.ravel(), random_operands(rng, fmt, count)])
    return a, b


@cocotb.test()
async def arith(dut):
    """Every result of the special and random pairs, under random stalls and bubbles."""
    p = params()
    fmt = fmt_of(p, "fmt")
    op = {"mul": mul, "add": add}[p["op"]]
    latency = p["latency"]
    tb = make_tb(dut)
    rng = np.random.default_rng(tb.rng.getrandbits(64))
    a, b = operand_pairs(rng, fmt, p.get("count", 3000))
    want = op(a, b, fmt)
    dut.en.value = 0
    dut.valid.value = 0
    await tb.reset()
    # Operand index (or None for a bubble) presented at each enabled edge, newest first.
    hist = deque([None] * latency, maxlen=max(latency, 1))
    checked, i = 0, 0
    while checked < len(a):
        en = int(tb.rng.random() < 0.8) if latency else 1
        bubble = tb.rng.random() < 0.1 or i >= len(a)
        cur = None if bubble else i
        dut.en.value = en
        dut.valid.value = int(cur is not None)
        dut.a.value = int(a[cur]) if cur is not None else tb.rng.getrandbits(fmt.width)
        dut.b.value = int(b[cur]) if cur is not None else tb.rng.getrandbits(fmt.width)
        await tb.settle()
        j = cur if latency == 0 else hist[latency - 1]
        got_valid = int(dut.result_valid.value)
        assert got_valid == int(j is not None), f"result_valid = {got_valid}, expected {j is not None}"
        if j is not None:
            got = int(dut.result.value)
            assert got == int(want[j]), (
                f"{p['op']} {fmt} a={int(a[j]):#x} b={int(b[j]):#x}: result {got:#x}, "
                f"golden.fp.{p['op']} says {int(want[j]):#x}")
            checked += 1
        if en:
            if latency:
                hist.appendleft(cur)
            if cur is not None:
                i += 1
        await tb.edge()
    dut._log.info("checked %d results (%d special pairs)", checked, len(special_operands(fmt)) ** 2)
