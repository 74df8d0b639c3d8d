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

from golden.fp import FP32
from golden.nonlinear import CANONICAL_NAN32, SATURATION, LUTSpec, lut_tables
from hw.bits import shift_left, wire, zero_extend
from hw.fp_arith import (
    add_const,
    count_leading_zeros,
    delay_line,
    shift_right_sticky,
    sub_mod,
)
from hw.fp_datapath import ge_const
from hw.fp_ops import FPOps
from hw.hierarchy import submodule

__all__ = ["CoefficientROM", "LUTFunction", "order_key"]


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
    One input per enabled cycle. :attr:`latency` = 4 (classify; shift; row
    address and leading-zero count; normalize: one register after each, so no
    stage holds more than one shifter or one carry chain) + 1 (ROM read, a
    synchronous block-RAM port) + ``degree`` multiply-adds (Horner) + 1
    (saturation and output register).
    """

    #: Registers of the classify / reduce pipeline in front of the ROM.
    REDUCE_STAGES = 4

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

        # -- stage 1: classify on a total-order key (−0 counts as +0), and the shift
        x = self.x
        sign, efield, frac = x[31], x[mb:31], x[:mb]
        mag_nz = x[:31].any()
        nan = efield.all() & frac.any()
        neg = sign & mag_nz
        key = wire(m, Mux(neg, Cat(~x[:31], C(0, 1)), Cat(x[:31], C(1, 1))), "key")
        lo_bits = int(np.float32(spec.lo).view(np.uint32))
        hi_bits = int(np.float32(spec.hi).view(np.uint32))
        below = ~nan & ~ge_const(key, order_key(lo_bits))
        above = ~nan & ge_const(key, order_key(hi_bits) + 1)
        # |x|·2**s = sig·2**-k with k = (man_bits − s + bias) − efield.
        kw = 10
        k = add_const(~zero_extend(efield, kw), mb - spec.step_log2 + fmt.bias + 1, kw)
        x1, k1 = reg(x, "x1"), reg(k, "k1")
        flags1 = reg(Cat(nan, below, above, self.valid), "flags1")

        # -- stage 2: integer part and the bits below the node
        sig1 = Cat(x1[:mb], x1[mb:31].any())
        ipart, _ = shift_right_sticky(m, sig1, k1, p, "ipart")
        keep = shift_left(C((1 << p) - 1, p), k1, p, m=m, name="mask")
        rem = sig1 & ~keep                                 # r·2**(m−E)
        x2, ipart2, rem2 = reg(x1, "x2"), reg(ipart, "ipart2"), reg(rem, "rem2")
        small2 = reg(ge_const(k1, p), "small2")
        flags2 = reg(flags1, "flags2")

        # -- stage 3: row address i − first_index (i = ±ipart), leading zeros of rem
        aw = max(spec.nodes.bit_length() + 2, 24)
        ip = zero_extend(ipart2, aw)
        row = Mux(x2[31], add_const(~ip, 1 - spec.first_index, aw),
                  add_const(ip, -spec.first_index, aw))
        abits = (spec.nodes - 1).bit_length() or 1
        inside2 = ~flags2[0] & ~flags2[1] & ~flags2[2]
        lz = count_leading_zeros(m, rem2, p, "rclz")
        x3, rem3, lz3, small3 = reg(x2, "x3"), reg(rem2, "rem3"), reg(lz, "lz3"), reg(small2, "small3")
        addr3 = reg(Mux(inside2, row[:abits], 0), "addr3")
        flags3 = reg(flags2, "flags3")

        # -- stage 4: the residual, exact and normalized; |x| < step gives r = x; r = 0 gives +0.
        r_norm = shift_left(rem3, lz3, p, m=m, name="rnorm")
        r_field = sub_mod(x3[mb:31], lz3, 8)
        r = Signal(32, name="residual")
        with m.If(~rem3.any()):
            m.d.comb += r.eq(0)
        with m.Elif(small3):
            m.d.comb += r.eq(x3)
        with m.Else():
            m.d.comb += r.eq(Cat(r_norm[:mb], r_field, x3[31]))
        r1, addr1 = reg(r, "r"), reg(addr3, "addr")
        flags4 = reg(flags3, "flags4")
        x4 = reg(x3, "x4")

        # look up: one ROM word holds c_0..c_d of a node (a synchronous read port).
        d = spec.degree
        rom = submodule(m, "coefficients", CoefficientROM(spec=spec))
        m.d.comb += [rom.addr.eq(addr1), rom.en.eq(en)]
        coef = [rom.data[32 * j:32 * (j + 1)] for j in range(d + 1)]
        r2, flags5, x5 = reg(r1, "r2"), reg(flags4, "flags5"), reg(x4, "x5")

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
