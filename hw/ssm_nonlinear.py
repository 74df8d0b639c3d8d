"""Table-driven exp, softplus and SiLU of the SSM unit: ``LUTFunction``.

The hardware image of :func:`golden.nonlinear.lut_eval` (contract in
``docs/ssm-numerics.md``): classify the binary32 input, split it into the node
index ``i = trunc(x·2**s)`` and the exact residual ``r = x − i·2**-s``, read the
node's Taylor row ``c_0..c_d`` from a ROM whose contents are
:func:`golden.nonlinear.lut_tables` (never retyped), and run Horner's rule
``y = c_d; y = fl(fl(y·r) + c_k)`` with the operations of :class:`hw.fp_ops.FPOps`
(fabric FP units, or one DSPFP32 slice per step; no fused multiply-add). Outside ``[lo, hi]`` the
result saturates as :data:`golden.nonlinear.SATURATION` says; a NaN input gives
the canonical NaN ``0x7FC00000``.
"""

import numpy as np
from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from specgen.golden.fp import FP32
from specgen.golden.nonlinear import CANONICAL_NAN32, SATURATION, LUTSpec, lut_tables
from specgen.hw.bits import eq_const, shift_left, zero_extend
from specgen.hw.fp_arith import (
    add_const,
    count_leading_zeros,
    delay_line,
    shift_right_sticky,
    sub_mod,
)
from specgen.hw.fp_datapath import ge_const
from specgen.hw.fp_ops import FPOps
from specgen.hw.hierarchy import submodule

__all__ = ["CoefficientROM", "LUTFunction", "order_key"]


def _ge_tree(value, k):
    """``value >= k`` for a constant ``k`` as a balanced comparator (high half greater,
    or equal and the low half at least): logarithmic depth, where :func:`ge_const`'s
    ripple is linear in the width."""
    n = len(value)
    if k <= 0:
        return C(1, 1)
    if k >> n:
        return C(0, 1)
    if n <= 4:
        return ge_const(value, k)
    h = n // 2
    hi, lo = value[h:], value[:h]
    khi, klo = k >> h, k & ((1 << h) - 1)
    return _ge_tree(hi, khi + 1) | (eq_const(hi, khi) & _ge_tree(lo, klo))


def order_key(bits):
    """Python twin of the RTL's total-order key of a non-NaN binary32 (−0 maps to +0)."""
    bits = int(bits) & 0xFFFFFFFF
    if bits == 0x80000000:
        bits = 0
    return (~bits) & 0xFFFFFFFF if bits >> 31 else bits | 0x80000000


class CoefficientROM(wiring.Component):
    """The coefficient table of a :class:`golden.nonlinear.LUTSpec` as a synchronous ROM.

    One word per node holds ``c_0 … c_d`` (``c_j`` in bits ``32j …``), the
    contents of :func:`golden.nonlinear.lut_tables`. Its own module, so the
    Yosys proxy can take it as a black box (:meth:`blackbox_verilog`) and count
    it as block RAM from its geometry instead of reading thousands of initial
    words (the initializers dominated the SSM unit's synthesis time).

    Attributes
    ----------
    addr : In(⌈log2 nodes⌉)
        Row; with ``en`` high, ``data`` shows it after the clock edge.
    en : In(1)
    data : Out(32·(degree + 1))
    """

    def __init__(self, *, spec):
        if not isinstance(spec, LUTSpec):
            raise TypeError(f"CoefficientROM.spec must be a LUTSpec, not {spec!r}")
        self._spec = spec
        super().__init__({"addr": In((spec.nodes - 1).bit_length() or 1), "en": In(1),
                          "data": Out(32 * (spec.degree + 1))})

    @property
    def depth(self):
        return self._spec.nodes

    @property
    def width(self):
        return 32 * (self._spec.degree + 1)

    @property
    def module_name(self):
        s = self._spec
        first = f"m{-s.first_index}" if s.first_index < 0 else f"{s.first_index}"
        return f"CoefficientROM_{s.function}_s{s.step_log2}_d{s.degree}_i{first}_n{s.nodes}"

    def blackbox_verilog(self):
        """An empty ``(* blackbox *)`` module of the same ports, for the Yosys proxy."""
        return (f"(* blackbox *)\nmodule {self.module_name} (\n  input clk,\n  input rst,\n"
                f"  input [{len(self.addr) - 1}:0] addr,\n  input en,\n"
                f"  output [{self.width - 1}:0] data\n);\nendmodule\n")

    def elaborate(self, platform):
        m = Module()
        spec = self._spec
        table = lut_tables(spec).view(np.uint32)
        d = spec.degree
        words = [sum(int(table[j, n]) << (32 * j) for j in range(d + 1)) for n in range(spec.nodes)]
        m.submodules.table = rom = Memory(shape=self.width, depth=spec.nodes, init=words)
        rd = rom.read_port(domain="sync")
        m.d.comb += [rd.addr.eq(self.addr), rd.en.eq(self.en), self.data.eq(rd.data)]
        return m


class LUTFunction(wiring.Component):
    """``y = lut_eval(spec, x)`` on binary32 bit patterns, fully pipelined.

    Parameters
    ----------
    spec : golden.nonlinear.LUTSpec
        Function, range, step and degree; the ROM holds ``lut_tables(spec)``.
    mul_stages : int
        Pipeline registers of each Horner multiplier (0..4; ``"ieee"`` only).
    add_stages : int
        Pipeline registers of each Horner adder (0..5; ``"ieee"`` only).
    contract : str
        Arithmetic of the Horner steps (:class:`hw.fp_ops.FPOps`): ``"ieee"``
        (fabric FP units) or ``"dspfp32"`` (one DSPFP32 slice per step,
        ``P = M + C``), bit for bit ``lut_eval`` with the same contract.

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
    One input per enabled cycle. :attr:`latency` = 5 (key; range check and
    shift; row address and per-byte leading zeros; their combination;
    normalize: one register after each, so no stage holds more than one
    shifter, one carry chain or half a leading-zero count, within 400 MHz's
    four logic levels) + 1 (ROM read, a synchronous block-RAM port) +
    ``degree`` multiply-adds (Horner) + 1 (saturation and output register).
    """

    #: Registers of the classify / reduce pipeline in front of the ROM.
    REDUCE_STAGES = 5

    def __init__(self, *, spec, mul_stages=2, add_stages=2, contract="ieee"):
        if not isinstance(spec, LUTSpec):
            raise TypeError(f"LUTFunction.spec must be a LUTSpec, not {spec!r}")
        self._spec = spec
        self._ops = FPOps(contract=contract, mul_stages=mul_stages, add_stages=add_stages,
                          owner="LUTFunction")
        super().__init__({
            "en": In(1), "valid": In(1), "x": In(32),
            "y": Out(32), "y_valid": Out(1),
        })

    @classmethod
    def from_config(cls, ssm, pipeline, function):
        """The table ``function`` (``"exp"``, ``"softplus"``, ``"silu"``) of an
        :class:`golden.mamba2.SSMConfig`, with a :class:`golden.config.PipelineConfig`."""
        return cls(spec=getattr(ssm, f"{function}_lut"), mul_stages=pipeline.fp_mul_stages,
                   add_stages=pipeline.fp_add_stages, contract=ssm.contract)

    @property
    def spec(self):
        return self._spec

    @property
    def latency(self):
        """Enabled clock edges from ``x`` to ``y``."""
        return self.REDUCE_STAGES + 2 + self._spec.degree * self._ops.muladd_latency

    @property
    def module_name(self):
        """Verilog name encoding the parameters, e.g. ``LUTFunction_exp_s7_d3_m2a2``."""
        s = self._spec
        return f"LUTFunction_{s.function}_s{s.step_log2}_d{s.degree}_{self._ops.tag}"

    def elaborate(self, platform):
        m = Module()
        spec, en = self._spec, self.en
        fmt = FP32
        mb, p = fmt.man_bits, fmt.man_bits + 1

        def reg(value, name):
            return delay_line(m, en, value, 1, name)

        # -- stage 1: the total-order key (−0 counts as +0), NaN, the shift amount
        x = self.x
        sign, efield, frac = x[31], x[mb:31], x[:mb]
        mag_nz = x[:31].any()
        nan = efield.all() & frac.any()
        neg = sign & mag_nz
        key = Mux(neg, Cat(~x[:31], C(0, 1)), Cat(x[:31], C(1, 1)))
        # |x|·2**s = sig·2**-k with k = (man_bits − s + bias) − efield.
        kw = 10
        k = add_const(~zero_extend(efield, kw), mb - spec.step_log2 + fmt.bias + 1, kw)
        k0 = mb - spec.step_log2 + fmt.bias
        x1, key1 = reg(x, "x1"), reg(key, "key1")
        sig1 = reg(Cat(frac, efield.any()), "sig1")       # the hidden bit, registered
        # The integer part's shift: k ≥ p leaves none (amount 31 moves every bit out),
        # so 5 bits of k suffice and the shifter has 5 stages, not 10.
        none = ge_const(k, p)
        amt1 = reg(Mux(none, 31, k[:5]), "amt1")
        none1 = reg(none, "none1")
        flags1 = reg(Cat(nan, self.valid), "flags1")

        # -- stage 2: range check; integer part and the bits below the node
        lo_bits = int(np.float32(spec.lo).view(np.uint32))
        hi_bits = int(np.float32(spec.hi).view(np.uint32))
        nan1 = flags1[0]
        below = ~nan1 & ~_ge_tree(key1, order_key(lo_bits))
        above = ~nan1 & _ge_tree(key1, order_key(hi_bits) + 1)
        ipart, _ = shift_right_sticky(m, sig1, amt1, p, "ipart")
        # The mask of the bits below the node, bit i set iff i < k, i.e. efield <
        # k0 − i with k0 = man_bits − s + bias: one constant compare per bit.
        e1 = x1[mb:31]
        below_node = Cat(*(~_ge_tree(e1, k0 - i) if k0 - i > 0 else C(0, 1) for i in range(p)))
        rem = sig1 & below_node                            # r·2**(m−E)
        x2, ipart2, rem2 = reg(x1, "x2"), reg(ipart, "ipart2"), reg(rem, "rem2")
        small2 = reg(none1, "small2")
        flags2 = reg(Cat(nan1, below, above, flags1[1]), "flags2")

        # -- stage 3: row address i − first_index (i = ±ipart); leading zeros per byte of rem
        aw = max(spec.nodes.bit_length() + 2, 24)
        ip = zero_extend(ipart2, aw)
        row = Mux(x2[31], add_const(~ip, 1 - spec.first_index, aw),
                  add_const(ip, -spec.first_index, aw))
        abits = (spec.nodes - 1).bit_length() or 1
        inside2 = ~flags2[0] & ~flags2[1] & ~flags2[2]
        chunks = [rem2[max(0, p - 8 * (i + 1)):p - 8 * i] for i in range(-(-p // 8))]
        clz = [count_leading_zeros(m, c, len(c), f"rclz{i}") for i, c in enumerate(chunks)]
        nz = Cat(*(c.any() for c in chunks))
        x3, rem3, small3 = reg(x2, "x3"), reg(rem2, "rem3"), reg(small2, "small3")
        clz3, nz3 = [reg(z, f"clz3_{i}") for i, z in enumerate(clz)], reg(nz, "nz3")
        addr3 = reg(Mux(inside2, row[:abits], 0), "addr3")
        flags3 = reg(flags2, "flags3")

        # -- stage 4: the leading-zero count: the first nonzero byte's, plus 8 per byte above
        lz = C(p, 5)
        for i in reversed(range(len(chunks))):
            lz = Mux(nz3[i], add_const(zero_extend(clz3[i], 5), 8 * i, 5), lz)
        # ... and the shift by whole bytes, so that stage 5 shifts by less than 8.
        by = C(0, p)
        lzlo = C(0, 3)
        for i in reversed(range(len(chunks))):
            by = Mux(nz3[i], (rem3 << (8 * i))[:p], by)
            lzlo = Mux(nz3[i], clz3[i][:3], lzlo)
        x4, small4 = reg(x3, "x4"), reg(small3, "small4")
        lz4, addr4, flags4 = reg(lz, "lz4"), reg(addr3, "addr4"), reg(flags3, "flags4")
        by4, lzlo4 = reg(by, "bytes4"), reg(lzlo, "lzlo4")
        zero4 = reg(~nz3.any(), "zero4")              # r = 0: the select is a register

        # -- stage 5: the residual, exact and normalized; |x| < step gives r = x; r = 0 gives +0.
        r_norm = shift_left(by4, lzlo4, p, m=m, name="rnorm")
        r_field = sub_mod(x4[mb:31], lz4, 8)
        r = Signal(32, name="residual")
        with m.If(zero4):
            m.d.comb += r.eq(0)
        with m.Elif(small4):
            m.d.comb += r.eq(x4)
        with m.Else():
            m.d.comb += r.eq(Cat(r_norm[:mb], r_field, x4[31]))
        r1, addr1 = reg(r, "r"), reg(addr4, "addr")
        flags_r, x_r = reg(flags4, "flags_r"), reg(x4, "x_r")

        # look up: one ROM word holds c_0..c_d of a node (a synchronous read port).
        d = spec.degree
        rom = submodule(m, "coefficients", CoefficientROM(spec=spec))
        m.d.comb += [rom.addr.eq(addr1), rom.en.eq(en)]
        coef = [rom.data[32 * j:32 * (j + 1)] for j in range(d + 1)]
        r2, flags5, x5 = reg(r1, "r2"), reg(flags_r, "flags5"), reg(x_r, "x5")

        # Horner: y = fl(fl(y·r) + c_k), one multiply-add per step.
        ops, lma = self._ops, self._ops.muladd_latency
        y = coef[d]
        for step, kk in enumerate(range(d - 1, -1, -1)):
            t0 = step * lma
            y = ops.muladd(m, f"horner{step}", y, delay_line(m, en, r2, t0, f"r_h{step}"),
                           delay_line(m, en, coef[kk], t0, f"c{kk}"), en)
        total = d * lma
        flags_h = delay_line(m, en, flags5, total, "flags_h")
        x_h = delay_line(m, en, x5, total, "x_h")

        # saturate (SATURATION) and register the output.
        lo_mode, hi_mode = SATURATION[spec.function]
        below_val = C(0x80000000 if lo_mode == "-zero" else 0, 32)
        above_val = x_h if hi_mode == "identity" else C(0x7F800000, 32)
        out = Signal(32, name="saturated")
        with m.If(flags_h[0]):
            m.d.comb += out.eq(int(CANONICAL_NAN32))
        with m.Elif(flags_h[1]):
            m.d.comb += out.eq(below_val)
        with m.Elif(flags_h[2]):
            m.d.comb += out.eq(above_val)
        with m.Else():
            m.d.comb += out.eq(y)
        m.d.comb += [self.y.eq(reg(out, "y")), self.y_valid.eq(reg(flags_h[3], "y_valid"))]
        return m
