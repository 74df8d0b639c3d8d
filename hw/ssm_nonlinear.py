"""Table-driven exp, softplus and SiLU of the SSM unit: ``LUTFunction``.

The hardware image of :func:`golden.nonlinear.lut_eval` (contract in
``docs/ssm-numerics.md``): classify the binary32 input, split it into the node
index ``i = trunc(x·2**s)`` and the exact residual ``r = x − i·2**-s``, read the
node's Taylor row ``c_0..c_d`` from a ROM whose contents are
:func:`golden.nonlinear.lut_tables` (never retyped), and run Horner's rule
``y = c_d; y = fl(fl(y·r) + c_k)`` on :class:`hw.fp_arith.FPMul` and
:class:`hw.fp_arith.FPAdd` (no fused multiply-add). Outside ``[lo, hi]`` the
result saturates as :data:`golden.nonlinear.SATURATION` says; a NaN input gives
the canonical NaN ``0x7FC00000``.
"""

import numpy as np
from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from golden.fp import FP32
from golden.nonlinear import CANONICAL_NAN32, SATURATION, LUTSpec, lut_tables
from golden.validate import check_int
from hw.bits import shift_left, wire, zero_extend
from hw.fp_arith import (
    FPAdd,
    FPMul,
    add_const,
    count_leading_zeros,
    delay_line,
    shift_right_sticky,
    sub_mod,
)
from hw.fp_datapath import ge_const
from hw.hierarchy import submodule

__all__ = ["LUTFunction", "order_key"]


def order_key(bits):
    """Python twin of the RTL's total-order key of a non-NaN binary32 (−0 maps to +0)."""
    bits = int(bits) & 0xFFFFFFFF
    if bits == 0x80000000:
        bits = 0
    return (~bits) & 0xFFFFFFFF if bits >> 31 else bits | 0x80000000


class LUTFunction(wiring.Component):
    """``y = lut_eval(spec, x)`` on binary32 bit patterns, fully pipelined.

    Parameters
    ----------
    spec : golden.nonlinear.LUTSpec
        Function, range, step and degree; the ROM holds ``lut_tables(spec)``.
    mul_stages : int
        Pipeline registers of each Horner multiplier (0..4).
    add_stages : int
        Pipeline registers of each Horner adder (0..5).

    Attributes
    ----------
    en : In(1)
        Clock enable of every register, the ROM read included; holds while low.
    valid : In(1)
        Qualifies ``x``; travels to ``y_valid``.
    x : In(32)
        binary32 input.
    y : Out(32)
        binary32 result of the ``x`` presented :attr:`latency` enabled edges
        earlier, bit for bit :func:`golden.nonlinear.lut_eval`.
    y_valid : Out(1)

    Notes
    -----
    One input per enabled cycle. :attr:`latency` = 1 (index register) + 1 (ROM
    read, a synchronous block-RAM port) + ``degree·(mul_stages + add_stages)``
    (Horner) + 1 (saturation and output register).
    """

    def __init__(self, *, spec, mul_stages=2, add_stages=2):
        if not isinstance(spec, LUTSpec):
            raise TypeError(f"LUTFunction.spec must be a LUTSpec, not {spec!r}")
        self._spec = spec
        self._mul_stages = check_int("LUTFunction", "mul_stages", mul_stages, min=0,
                                     max=len(FPMul.BOUNDARIES))
        self._add_stages = check_int("LUTFunction", "add_stages", add_stages, min=0,
                                     max=len(FPAdd.BOUNDARIES))
        super().__init__({
            "en": In(1), "valid": In(1), "x": In(32),
            "y": Out(32), "y_valid": Out(1),
        })

    @property
    def spec(self):
        return self._spec

    @property
    def latency(self):
        """Enabled clock edges from ``x`` to ``y``."""
        return 3 + self._spec.degree * (self._mul_stages + self._add_stages)

    @property
    def module_name(self):
        """Verilog name encoding the parameters, e.g. ``LUTFunction_exp_s7_d3_m2a2``."""
        s = self._spec
        return (f"LUTFunction_{s.function}_s{s.step_log2}_d{s.degree}"
                f"_m{self._mul_stages}a{self._add_stages}")

    def elaborate(self, platform):
        m = Module()
        spec, en = self._spec, self.en
        fmt = FP32
        mb, p = fmt.man_bits, fmt.man_bits + 1
        x = self.x
        sign, efield, frac = x[31], x[mb:31], x[:mb]
        mag_nz = x[:31].any()
        nan = efield.all() & frac.any()
        sig = Cat(frac, efield.any())

        # classify: range check on a total-order key (−0 counts as +0).
        neg = sign & mag_nz
        key = wire(m, Mux(neg, Cat(~x[:31], C(0, 1)), Cat(x[:31], C(1, 1))), "key")
        lo_bits = int(np.float32(spec.lo).view(np.uint32))
        hi_bits = int(np.float32(spec.hi).view(np.uint32))
        below = ~nan & ~ge_const(key, order_key(lo_bits))
        above = ~nan & ge_const(key, order_key(hi_bits) + 1)
        inside = ~nan & ~below & ~above

        # reduce: |x|·2**s = sig·2**-k with k = (man_bits − s + bias) − efield.
        kw = 10
        k = wire(m, add_const(~zero_extend(efield, kw), mb - spec.step_log2 + fmt.bias + 1, kw), "k")
        ipart, _ = shift_right_sticky(m, sig, k, p, "ipart")
        keep = shift_left(C((1 << p) - 1, p), k, p, m=m, name="mask")
        rem = wire(m, sig & ~keep, "rem")             # the bits below the node: r·2**(m−E)
        # Row address: i − first_index, i = ±ipart.
        aw = max(spec.nodes.bit_length() + 2, 24)
        i_signed = Mux(sign, add_const(~zero_extend(ipart, aw), 1, aw), zero_extend(ipart, aw))
        row = wire(m, add_const(i_signed, -spec.first_index, aw), "row")
        abits = (spec.nodes - 1).bit_length() or 1
        addr = Mux(inside, row[:abits], 0)
        # residual: exact, normalized; |x| < step gives r = x; r = 0 gives +0.
        lz = count_leading_zeros(m, rem, p, "rclz")
        r_norm = shift_left(rem, lz, p, m=m, name="rnorm")
        r_field = sub_mod(efield, lz, 8)
        small = ge_const(k, p)
        r = Signal(32, name="residual")
        with m.If(~rem.any()):
            m.d.comb += r.eq(0)
        with m.Elif(small):
            m.d.comb += r.eq(x)
        with m.Else():
            m.d.comb += r.eq(Cat(r_norm[:mb], r_field, sign))

        def reg(value, name):
            return delay_line(m, en, value, 1, name)

        # index register
        r1, addr1 = reg(r, "r"), reg(addr, "addr")
        flags1 = reg(Cat(nan, below, above, self.valid), "flags")
        x1 = reg(x, "x")

        # look up: one ROM word holds c_0..c_d of a node (a synchronous read port).
        table = lut_tables(spec).view(np.uint32)
        d = spec.degree
        words = [sum(int(table[j, n]) << (32 * j) for j in range(d + 1)) for n in range(spec.nodes)]
        m.submodules.rom = rom = Memory(shape=32 * (d + 1), depth=spec.nodes, init=words)
        rd = rom.read_port(domain="sync")
        m.d.comb += [rd.addr.eq(addr1), rd.en.eq(en)]
        coef = [rd.data[32 * j:32 * (j + 1)] for j in range(d + 1)]
        r2, flags2, x2 = reg(r1, "r2"), reg(flags1, "flags2"), reg(x1, "x2")

        # Horner
        lm, la = self._mul_stages, self._add_stages
        y = coef[d]
        for step, kk in enumerate(range(d - 1, -1, -1)):
            mul = FPMul(fmt=fmt, stages=lm)
            add = FPAdd(fmt=fmt, stages=la)
            submodule(m, f"mul{step}", mul)
            submodule(m, f"add{step}", add)
            t0 = step * (lm + la)
            m.d.comb += [
                mul.en.eq(en), mul.valid.eq(0), mul.a.eq(y),
                mul.b.eq(delay_line(m, en, r2, t0, f"r_h{step}")),
                add.en.eq(en), add.valid.eq(0), add.a.eq(mul.result),
                add.b.eq(delay_line(m, en, coef[kk], t0 + lm, f"c{kk}")),
            ]
            y = add.result
        total = d * (lm + la)
        flags3 = delay_line(m, en, flags2, total, "flags_h")
        x3 = delay_line(m, en, x2, total, "x_h")

        # saturate (SATURATION) and register the output.
        lo_mode, hi_mode = SATURATION[spec.function]
        below_val = C(0x80000000 if lo_mode == "-zero" else 0, 32)
        above_val = x3 if hi_mode == "identity" else C(0x7F800000, 32)
        out = Signal(32, name="saturated")
        with m.If(flags3[0]):
            m.d.comb += out.eq(int(CANONICAL_NAN32))
        with m.Elif(flags3[1]):
            m.d.comb += out.eq(below_val)
        with m.Elif(flags3[2]):
            m.d.comb += out.eq(above_val)
        with m.Else():
            m.d.comb += out.eq(y)
        m.d.comb += [self.y.eq(reg(out, "y")), self.y_valid.eq(reg(flags3[3], "y_valid"))]
        return m
