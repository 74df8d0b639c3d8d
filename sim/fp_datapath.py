"""cocotb benches of :mod:`hw.fp_datapath` against :mod:`golden.dot`, bit for bit.

One cocotb test per block (the pytest entry picks it with ``testcase``):

* ``multiplier``: :class:`hw.fp_datapath.ExactMultiplier` against
  :func:`golden.dot.product_terms`, every field of the term, every cycle.
* ``accumulator``: :class:`hw.fp_datapath.ExactAccumulator` against
  :func:`golden.dot.accumulate` at the RTL LSB (the exact integer and the flags).
* ``normalize_round``: :class:`hw.fp_datapath.NormalizeRound` against
  :func:`golden.dot.round_accumulator`.

Every run toggles the clock enable ``en`` at random (a stalled pipeline must hold)
and leaves random idle cycles between inputs. Expected values come only from the
golden functions; the operand mixes are built from :class:`golden.fp.FPFormat`
properties (no typed constants).
"""

from collections import deque

import cocotb
import numpy as np

from specgen.golden.dot import (
    Accumulator,
    accumulate,
    accumulator_spec,
    product_terms,
    round_accumulator,
)
from specgen.golden.fp import FPFormat
from specgen.sim.bench import TB, params, seed


class CombTB:
    """:class:`sim.bench.TB` for a block built with ``stages=0`` (no clock, no reset)."""

    def __init__(self, dut):
        import random
        self.dut = dut
        self.rng = random.Random(seed())

    async def reset(self):
        pass

    async def settle(self):
        from cocotb.triggers import Timer
        await Timer(1, unit="ns")

    async def edge(self):
        from cocotb.triggers import Timer
        await Timer(9, unit="ns")


def make_tb(dut):
    """A clocked :class:`TB`, or :class:`CombTB` for a design without a clock."""
    return TB(dut) if hasattr(dut, "clk") else CombTB(dut)


def fmt_of(p, key):
    e, m = p[key]
    return FPFormat(exp_bits=e, man_bits=m)


def special_operands(fmt):
    """Edge encodings of ``fmt``: zeros, subnormal and normal edges, max, Inf, NaNs."""
    mags = [0, fmt.min_subnormal_bits, fmt.man_mask, fmt.min_normal_bits,
            fmt.min_normal_bits + 1, fmt.one_bits, fmt.one_bits + 1, fmt.max_bits,
            fmt.max_bits - 1, fmt.inf_bits, fmt.nan_bits, fmt.inf_bits | 1, fmt.inf_bits | fmt.man_mask,
            (fmt.bias // 2) << fmt.man_bits, (fmt.bias + fmt.bias // 2) << fmt.man_bits]
    return [v | s for v in mags for s in (0, fmt.sign_mask)]


def random_operands(rng, fmt, count):
    """A mix: uniform bits, specials, exponents near the edges, sparse fractions."""
    specials = np.array(special_operands(fmt), dtype=np.uint64)
    out = rng.integers(0, 1 << fmt.width, size=count, dtype=np.uint64)
    kind = rng.integers(0, 4, size=count)
    pick = specials[rng.integers(0, len(specials), size=count)]
    out = np.where(kind == 0, pick, out)
    # Exponent fields biased to both ends and the middle; sparse fractions give ties.
    efield = rng.choice(np.array([0, 1, 2, fmt.bias - 1, fmt.bias, fmt.bias + 1,
                                  fmt.exp_mask - 2, fmt.exp_mask - 1], dtype=np.uint64), size=count)
    frac = rng.integers(0, 1 << fmt.man_bits, size=count, dtype=np.uint64)
    sparse = frac & (np.uint64(1) << rng.integers(0, fmt.man_bits, size=count, dtype=np.uint64))
    frac = np.where(rng.random(count) < 0.3, sparse, frac)
    sign = rng.integers(0, 2, size=count, dtype=np.uint64) << np.uint64(fmt.width - 1)
    edge = sign | (efield << np.uint64(fmt.man_bits)) | frac
    out = np.where(kind == 1, edge, out)
    return out.astype(fmt.dtype)


def to_signed(value, width):
    return value - (1 << width) if value >> (width - 1) else value


def pack(values, width):
    """Pack lane values (two's complement for negatives) into one integer, lane 0 lowest."""
    word = 0
    for i, v in enumerate(values):
        word |= (int(v) & ((1 << width) - 1)) << (i * width)
    return word


def acc_int(acc, row=()):
    """The exact value of a golden accumulator row, in units of ``2**acc.lsb_exp``."""
    limbs = acc.limbs[row]
    return sum(int(limb) << (32 * k) for k, limb in enumerate(limbs))


def acc_from_int(value, *, lsb_exp, width, nan=False, pos_inf=False, neg_inf=False,
                 all_neg_zero=False, count=1):
    """A golden :class:`Accumulator` holding ``value`` (the limb layout of golden.dot)."""
    nlimbs = width // 32 + 2
    limbs = [(value >> (32 * k)) & 0xFFFFFFFF for k in range(nlimbs - 1)]
    limbs.append(value >> (32 * (nlimbs - 1)))
    return Accumulator(limbs=np.array(limbs, dtype=np.int64), lsb_exp=lsb_exp, count=count,
                       nan=np.bool_(nan), pos_inf=np.bool_(pos_inf), neg_inf=np.bool_(neg_inf),
                       all_neg_zero=np.bool_(all_neg_zero))


@cocotb.test()
async def multiplier(dut):
    """Random and special operand pairs, random clock enable: every term field, every cycle."""
    p = params()
    fmt = fmt_of(p, "fmt")
    latency = p["latency"]
    tb = make_tb(dut)
    rng = np.random.default_rng(tb.rng.getrandbits(64))
    count = p.get("count", 4000)
    a = random_operands(rng, fmt, count)
    b = random_operands(rng, fmt, count)
    specials = np.array(special_operands(fmt), dtype=fmt.dtype)
    sa, sb = np.meshgrid(specials, specials)
    a = np.concatenate([sa.ravel(), a])
    b = np.concatenate([sb.ravel(), b])
    t = product_terms(a, b, fmt)
    exp_width = len(dut.exp)
    dut.en.value = 0
    await tb.reset()
    hist = deque(maxlen=max(latency, 1))   # indices presented at enabled edges, newest first
    checked, i = 0, 0
    for _ in range(len(a) + 2 * latency + 40):
        en = int(tb.rng.random() < 0.85)
        cur = i % len(a)
        dut.en.value = en
        dut.a.value = int(a[cur])
        dut.b.value = int(b[cur])
        await tb.settle()
        j = cur if latency == 0 else (hist[latency - 1] if len(hist) >= latency else None)
        if j is not None:
            got = (int(dut.sign.value), int(dut.sig.value), to_signed(int(dut.exp.value), exp_width),
                   int(dut.nan.value), int(dut.inf.value))
            want = (int(t.sign[j]), int(t.sig[j]), int(t.exp[j]), int(t.nan[j]), int(t.inf[j]))
            assert got == want, (f"{fmt} a={int(a[j]):#x} b={int(b[j]):#x}: "
                                 f"(sign, sig, exp, nan, inf) = {got}, golden says {want}")
            checked += 1
        if en:
            hist.appendleft(cur)
            i += 1
        await tb.edge()
    assert checked >= len(a) * 0.8, checked


def _dot_terms(rng, fmt, n, lanes):
    """One dot product's operands as FP16 pairs: random, specials or massive cancellation."""
    kind = rng.integers(0, 5)
    if kind == 0:      # massive cancellation: x*y - x*y (shuffled) plus maybe one small term
        half = max(1, n // 2)
        x = random_operands(rng, fmt, half)
        y = random_operands(rng, fmt, half)
        a = np.concatenate([x, x ^ fmt.dtype.type(fmt.sign_mask)])
        b = np.concatenate([y, y])
        if len(a) < n:
            a = np.append(a, fmt.dtype.type(fmt.min_subnormal_bits))
            b = np.append(b, fmt.dtype.type(fmt.one_bits))
        order = rng.permutation(len(a))[:n]
        return a[order], b[order]
    if kind == 1:      # all negative zeros (the -0 rule) or zeros of mixed sign
        z = np.full(n, fmt.sign_mask, fmt.dtype)
        w = random_operands(rng, fmt, n) & fmt.dtype.type(fmt.sign_mask ^ ((1 << fmt.width) - 1))
        w = np.where(rng.random(n) < 0.5, w, 0).astype(fmt.dtype)
        if rng.random() < 0.5:
            z[rng.integers(0, n)] = 0
        return z, w
    return random_operands(rng, fmt, n), random_operands(rng, fmt, n)


@cocotb.test()
async def accumulator(dut):
    """Dot products of random length with random lane masks, idle beats and clock enable."""
    p = params()
    fmt = fmt_of(p, "fmt")
    lanes, n_max = p["lanes"], p["n"]
    spec = accumulator_spec(fmt, n_max)
    tb = make_tb(dut)
    rng = np.random.default_rng(tb.rng.getrandbits(64))
    sig_w, exp_w = len(dut.sig) // lanes, len(dut.exp) // lanes
    width = len(dut.acc)
    assert width == spec.width, (width, spec.width)
    # Build the beats of every dot product and its golden accumulator.
    beats, expected = [], []
    for _ in range(p.get("dots", 150)):
        n = int(rng.integers(1, n_max + 1))
        if rng.random() < 0.05:
            n = 0
        a, b = _dot_terms(rng, fmt, max(n, 1), lanes)
        a, b = a[:n], b[:n]
        t = product_terms(a, b, fmt) if n else None
        acc = accumulate(t, lsb_exp=spec.lsb_exp) if n else None
        expected.append((acc_int(acc) if n else 0,
                         (bool(acc.nan), bool(acc.pos_inf), bool(acc.neg_inf),
                          bool(acc.all_neg_zero)) if n else (False, False, False, True),
                         n == 0))
        # Spread the n terms over beats with random masks; masked lanes carry garbage.
        pos, dot_beats = 0, []
        while pos < n or not dot_beats:
            mask = [int(rng.random() < 0.75) for _ in range(lanes)]
            lane_terms = []
            for i in range(lanes):
                if mask[i] and pos < n:
                    lane_terms.append((int(t.sign[pos]), int(t.sig[pos]), int(t.exp[pos]),
                                       int(t.nan[pos]), int(t.inf[pos])))
                    pos += 1
                else:
                    mask[i] = 0
                    lane_terms.append((int(rng.integers(0, 2)), int(rng.integers(0, 1 << sig_w)),
                                       int(rng.integers(spec.lsb_exp, spec.msb_exp)),
                                       int(rng.integers(0, 2)), int(rng.integers(0, 2))))
            dot_beats.append((mask, lane_terms))
        for j, (mask, lane_terms) in enumerate(dot_beats):
            beats.append((j == 0, j == len(dot_beats) - 1, mask, lane_terms))
    dut.en.value = 0
    dut.valid.value = 0
    await tb.reset()
    pending = deque(expected)
    state = {"beat": 0, "done": 0}

    def drive(en):
        idle = tb.rng.random() < 0.2 or state["beat"] >= len(beats)
        dut.valid.value = int(not idle)
        state["drove"] = not idle
        if idle:
            return
        first, last, mask, lane_terms = beats[state["beat"]]
        dut.first.value = int(first)
        dut.last.value = int(last)
        dut.lane_valid.value = pack(mask, 1)
        dut.sign.value = pack([x[0] for x in lane_terms], 1)
        dut.sig.value = pack([x[1] for x in lane_terms], sig_w)
        dut.exp.value = pack([x[2] for x in lane_terms], exp_w)
        dut.nan.value = pack([x[3] for x in lane_terms], 1)
        dut.inf.value = pack([x[4] for x in lane_terms], 1)

    def check(en):
        if int(dut.done.value) and en:
            assert pending, "done without a dot product in flight"
            value, flags, empty = pending.popleft()
            got_value = to_signed(int(dut.acc.value), width)
            got_flags = (bool(int(dut.acc_nan.value)), bool(int(dut.pos_inf.value)),
                         bool(int(dut.neg_inf.value)), bool(int(dut.all_neg_zero.value)))
            assert got_value == value, f"dot {state['done']}: acc = {got_value}, golden {value}"
            assert got_flags == flags, f"dot {state['done']}: flags {got_flags}, golden {flags}"
            assert bool(int(dut.empty.value)) == empty, f"dot {state['done']}: empty flag"
            state["done"] += 1
        if en and state["drove"]:
            state["beat"] += 1

    # Registered outputs hold while en is low: a result counts on an enabled edge only.
    cycles = 0
    while state["done"] < len(expected):
        en = int(tb.rng.random() < 0.8)
        dut.en.value = en
        drive(en)
        await tb.settle()
        check(en)
        await tb.edge()
        cycles += 1
        assert cycles < 20 * len(beats) + 100, f"stuck: {state}, {len(pending)} dots pending"
    assert not pending


@cocotb.test()
async def normalize_round(dut):
    """Golden accumulators (random terms, cancellation, edges near ties/overflow/underflow)."""
    p = params()
    fmt_in, fmt_out = fmt_of(p, "fmt"), fmt_of(p, "fmt_out")
    spec = accumulator_spec(fmt_in, p["n"])
    width = spec.width
    tb = make_tb(dut)
    rng = np.random.default_rng(tb.rng.getrandbits(64))
    cases = []
    for _ in range(p.get("count", 1500)):
        kind = rng.integers(0, 4)
        if kind == 0:   # a real dot product's accumulator
            n = int(rng.integers(1, p["n"] + 1))
            a, b = _dot_terms(rng, fmt_in, n, 1)
            acc = accumulate(product_terms(a[:n], b[:n], fmt_in), lsb_exp=spec.lsb_exp)
            cases.append(acc)
            continue
        # Values with m + 2 random significant bits at any position, +-0/1/ulp offsets:
        # exercises ties, carries, subnormal/normal and overflow edges.
        top = int(rng.integers(0, width - 1))
        sig_bits = fmt_out.man_bits + 2
        sig = int(rng.integers(0, 1 << sig_bits)) | (1 << (sig_bits - 1))
        value = sig << max(0, top - sig_bits + 1) >> max(0, sig_bits - 1 - top)
        value += int(rng.choice([0, 0, 1, -1]))
        if kind == 2:
            value = int(rng.integers(0, 1 << 62)) << int(rng.integers(0, max(1, width - 63)))
        if kind == 3 and rng.random() < 0.3:
            value = int(rng.choice([0, (1 << (width - 1)) - 1]))
        value = max(0, min(value, (1 << (width - 1)) - 1))
        if rng.random() < 0.5:
            value = -value
        if rng.random() < 0.02:
            value = -(1 << (width - 1))
        flags = [rng.random() < 0.05, rng.random() < 0.05, rng.random() < 0.05]
        zero_flags = value == 0 and rng.random() < 0.7
        cases.append(acc_from_int(value, lsb_exp=spec.lsb_exp, width=width,
                                  nan=flags[0], pos_inf=flags[1], neg_inf=flags[2],
                                  all_neg_zero=bool(zero_flags or rng.random() < 0.1),
                                  count=int(rng.random() < 0.9)))
    # One batched golden call per count class (count only matters as count > 0).
    want = [0] * len(cases)
    for nonempty in (False, True):
        idx = [j for j, acc in enumerate(cases) if (acc.count > 0) == nonempty]
        if not idx:
            continue
        nlimbs = width // 32 + 2
        ints = [acc_int(cases[j]) for j in idx]
        limbs = np.array([[(v >> (32 * k)) & 0xFFFFFFFF for k in range(nlimbs - 1)]
                          + [v >> (32 * (nlimbs - 1))] for v in ints], dtype=np.int64)
        flags = {name: np.array([bool(getattr(cases[j], name)) for j in idx])
                 for name in ("nan", "pos_inf", "neg_inf", "all_neg_zero")}
        batch = Accumulator(limbs=limbs, lsb_exp=spec.lsb_exp, count=int(nonempty), **flags)
        for j, bits in zip(idx, round_accumulator(batch, fmt_out)):
            want[j] = int(bits)
    dut.en.value = 0
    dut.valid.value = 0
    await tb.reset()
    state = {"i": 0, "done": 0}
    cycles = 0
    while state["done"] < len(cases):
        en = int(tb.rng.random() < 0.8)
        dut.en.value = en
        drive = state["i"] < len(cases) and tb.rng.random() < 0.85
        dut.valid.value = int(drive)
        if drive:
            acc = cases[state["i"]]
            dut.acc.value = acc_int(acc) & ((1 << width) - 1)
            dut.nan.value = int(acc.nan)
            dut.pos_inf.value = int(acc.pos_inf)
            dut.neg_inf.value = int(acc.neg_inf)
            dut.all_neg_zero.value = int(acc.all_neg_zero)
            dut.empty.value = int(acc.count == 0)
        await tb.settle()
        # Outputs hold while en is low: a result counts on an enabled edge only.
        if int(dut.done.value) and en:
            j = state["done"]
            c = cases[j]
            got = int(dut.result.value)
            flags = (bool(c.nan), bool(c.pos_inf), bool(c.neg_inf), bool(c.all_neg_zero), c.count)
            assert got == want[j], (f"case {j}: acc={acc_int(c)} (nan, +inf, -inf, all_neg_zero, "
                                    f"count)={flags} -> {got:#x}, golden {want[j]:#x}")
            state["done"] += 1
        if en and drive:
            state["i"] += 1
        await tb.edge()
        cycles += 1
        assert cycles < 10 * len(cases) + 100, state
