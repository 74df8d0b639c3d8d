"""cocotb bench of :class:`hw.fp_arith.FPMul` / :class:`hw.fp_arith.FPAdd` against
:func:`golden.fp.mul` / :func:`golden.fp.add`, and of :class:`hw.fp_arith.FPNarrow`
against :func:`golden.fp.convert`, bit for bit.

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

from specgen.golden.fp import add, convert, mul
from specgen.sim.bench import params
from specgen.sim.fp_datapath import fmt_of, make_tb, random_operands, special_operands

__all__ = ["operand_pairs", "narrow_operands"]


def operand_pairs(rng, fmt, count):
    """All special-class pairs followed by ``count`` random pairs (uint arrays)."""
    specials = np.array(special_operands(fmt), dtype=fmt.dtype)
    sa, sb = np.meshgrid(specials, specials)
    a = np.concatenate([sa.ravel(), random_operands(rng, fmt, count)])
    b = np.concatenate([sb.ravel(), random_operands(rng, fmt, count)])
    return a, b


def narrow_operands(rng, src, dst, count):
    """Encodings of ``src`` for a conversion to ``dst``: ``src``'s specials, ``dst``'s edges
    in ``src`` (its max, the overflow threshold, its smallest normal and subnormal, half
    of that) with their neighbours and both signs, the ties between ``dst`` values on the
    normal and subnormal sides, and ``count`` random encodings weighted to ``dst``'s range."""
    one = np.uint64(1)
    at = lambda v: np.float64(v).astype(np.float32).view(np.uint32).astype(np.uint64)  # noqa: E731
    edges = [at(v) for v in (65504.0, 65520.0, 2.0 ** -14, 2.0 ** -24, 2.0 ** -25, 1.0, 1.5)]
    drop = np.uint64(src.man_bits - dst.man_bits)
    half = one << (drop - one)
    # Ties: a dst value's LSB position with the bit below it set, above and below 2**-14.
    ties = [at(1.0) | half, at(1.0) | half | (one << drop), at(2.0 ** -20) | (one << np.uint64(22)),
            at(3 * 2.0 ** -24) | (one << np.uint64(22))]
    base = [int(v) + d for v in edges + ties for d in (-1, 0, 1)]
    base += [int(v) for v in special_operands(src)]
    magnitude = (1 << (src.width - 1)) - 1
    signed = [(v & magnitude) | sgn for v in base for sgn in (0, 1 << (src.width - 1))]
    # Random: uniform bits, and exponents within a few of dst's range.
    n = count
    sign = rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(src.width - 1)
    lo = max(0, src.bias - dst.bias - dst.man_bits - 3)
    hi = min(src.exp_mask, src.bias + dst.bias + 3)
    efield = rng.integers(lo, hi, n, dtype=np.uint64)
    frac = rng.integers(0, 1 << src.man_bits, n, dtype=np.uint64)
    near = sign | (efield << np.uint64(src.man_bits)) | frac
    uni = random_operands(rng, src, n).astype(np.uint64)
    rnd = np.where(rng.random(n) < 0.7, near, uni)
    return np.concatenate([np.array(signed, np.uint64), rnd]).astype(src.dtype)


async def _drive(dut, tb, operands, want, latency, describe):
    """Present ``operands`` (port name -> encodings of ``fmt``) one index at a time under
    random clock-enable stalls and bubbles, and check each ``result`` against ``want``
    ``latency`` enabled edges later (``describe(j)`` names operand ``j`` in a failure).
    Returns the count checked."""
    n = len(next(iter(operands.values())))
    dut.en.value = 0
    dut.valid.value = 0
    await tb.reset()
    # Operand index (or None for a bubble) presented at each enabled edge, newest first.
    hist = deque([None] * latency, maxlen=max(latency, 1))
    checked, i = 0, 0
    while checked < n:
        en = int(tb.rng.random() < 0.8) if latency else 1
        bubble = tb.rng.random() < 0.1 or i >= n
        cur = None if bubble else i
        dut.en.value = en
        dut.valid.value = int(cur is not None)
        for port, values in operands.items():
            width = len(getattr(dut, port))
            getattr(dut, port).value = int(values[cur]) if cur is not None else tb.rng.getrandbits(width)
        await tb.settle()
        j = cur if latency == 0 else hist[latency - 1]
        got_valid = int(dut.result_valid.value)
        assert got_valid == int(j is not None), f"result_valid = {got_valid}, expected {j is not None}"
        if j is not None:
            got = int(dut.result.value)
            assert got == int(want[j]), f"{describe(j)}: result {got:#x}, golden says {int(want[j]):#x}"
            checked += 1
        if en:
            if latency:
                hist.appendleft(cur)
            if cur is not None:
                i += 1
        await tb.edge()
    return checked


@cocotb.test()
async def narrow(dut):
    """Every conversion of the edge and random operands, under random stalls and bubbles."""
    p = params()
    src, dst = fmt_of(p, "fmt"), fmt_of(p, "dst")
    tb = make_tb(dut)
    rng = np.random.default_rng(tb.rng.getrandbits(64))
    a = narrow_operands(rng, src, dst, p.get("count", 3000))
    checked = await _drive(dut, tb, {"a": a}, convert(a, src, dst), p["latency"],
                           lambda j: f"golden.fp.convert {src} -> {dst} of a={int(a[j]):#x}")
    dut._log.info("checked %d conversions", checked)


@cocotb.test()
async def arith(dut):
    """Every result of the special and random pairs, under random stalls and bubbles."""
    p = params()
    fmt = fmt_of(p, "fmt")
    op = {"mul": mul, "add": add}[p["op"]]
    tb = make_tb(dut)
    rng = np.random.default_rng(tb.rng.getrandbits(64))
    a, b = operand_pairs(rng, fmt, p.get("count", 3000))
    checked = await _drive(dut, tb, {"a": a, "b": b}, op(a, b, fmt), p["latency"],
                           lambda j: f"golden.fp.{p['op']} {fmt} a={int(a[j]):#x} b={int(b[j]):#x}")
    dut._log.info("checked %d results (%d special pairs)", checked, len(special_operands(fmt)) ** 2)
