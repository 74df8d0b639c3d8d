"""``DSPFP32``: one Versal DSP58 slice in floating-point mode, as a component.

The component has two implementations behind one port list and one module name:

* a **behavioural** model, what Amaranth elaborates (simulation, Verilator,
  Icarus, the Yosys estimate of a whole design), built from
  :class:`hw.fp_arith.FPMul` and :class:`hw.fp_arith.FPAdd` with the
  flush-to-zero of :mod:`golden.dsp`, bit for bit that golden model;
* the **primitive**: :meth:`DSPFP32.primitive_verilog` writes a module of the
  same name whose body is an instance of AMD's ``DSPFP32`` UNISIM primitive
  (AMD AM004 "Versal ACAP DSP Engine Architecture Manual", section "DSPFP32
  Unisim Primitive"; port and attribute names as in AMD's Versal libraries
  guides, UG1353/UG1485 "DSPFP32"). Vivado synthesizes this one: the mode is
  instantiated, never inferred (AMD UG1273 "DSP Primitives").
  :meth:`DSPFP32.blackbox_verilog` gives the empty shell that the Yosys proxy
  counts as one DSP.

Configuration (the DSP's defaults except ``FPCREG``): ``AREG = 1``,
``FPBREG = 1``, ``FPMPIPEREG = 1``, ``FPM_PREG = 1``, ``FPA_PREG = 1``,
``FPOPMREG = 3``, ``INMODEREG = 1`` with ``FPINMODE = 1`` (the multiplier takes
``B``). ``FPCREG`` is a parameter, 0 to 3: with 0 (the linear unit's choice)
``C`` enters the adder unregistered, so a partial sum read from fabric memory
closes a two-cycle loop; with 3 ``C`` is taken with the operands it is added to.
With ``stall=True`` the component has a ``ce`` port that gates every register
of the slice (every ``CE*`` pin of the primitive), so a pipeline with a global
clock enable can hold the DSP with the rest of its stages.

Timing, for operands presented in cycle ``c`` with ``cea``/``ceb`` (cycles
counted in enabled cycles when ``stall=True``):

* ``M = A × B`` is on ``m`` (``FPM_OUT``) in cycle ``c + 3`` and reaches the
  adder in that cycle, together with the ``fpopmode`` presented in cycle ``c``;
* ``c`` (the ``C`` port) must be presented in cycle ``c + 3 − FPCREG``
  (:attr:`DSPFP32.c_lag` cycles after the operands);
* ``P = P0 + P1`` is registered at the end of ``c + 3`` when ``cefpa`` is high in
  that cycle, and held otherwise: :attr:`DSPFP32.latency` = 4.

``fpopmode`` (AM004 "Adder Input Selection"): bits ``[1:0]`` choose ``P0``
(``00`` zero, ``01`` M), bits ``[4:2]`` choose ``P1`` (``0xx`` zero, ``10x`` P,
``110`` C), bit 5 negates ``P0`` and bit 6 ``P1``. The codes the linear unit
uses are :data:`OP_START` (``P = M + (−0)``), :data:`OP_ACC_P` (``P = M + P``)
and :data:`OP_ACC_C` (``P = M + C``). The behavioural model implements exactly
these selections (``PCIN`` and ``D`` read as zero); the primitive has more.
"""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from specgen.golden.fp import FP16, FP32

from .fp_arith import FPAdd, FPMul

__all__ = ["DSPFP32", "OP_START", "OP_ACC_P", "OP_ACC_C"]

#: ``P = M + (−0)``: the first product of a sum (−0 is the exact identity).
OP_START = 0b100_0001
#: ``P = M + P``: single-cycle accumulation on the adder's own register.
OP_ACC_P = 0b001_0001
#: ``P = M + C``: accumulation of a partial sum from fabric.
OP_ACC_C = 0b001_1001

_FPTYPE = {FP16: "B16", FP32: "B32"}


def _flush(m, value, fmt, name):
    """``value`` with a subnormal read as the zero of its sign (AM004 "Subnormals")."""
    out = Signal(fmt.width, name=name)
    exp = value[fmt.man_bits:fmt.width - 1]
    m.d.comb += out.eq(Mux(~exp.any(), Cat(C(0, fmt.width - 1), value[-1]), value))
    return out


def _widen(m, value, name):
    """A flushed binary16 operand as binary32 (exact: normal or zero, Inf, NaN)."""
    out = Signal(32, name=name)
    exp, man, sign = value[10:15], value[:10], value[15]
    e32 = Mux(~exp.any(), C(0, 8), Mux(exp.all(), C(0xFF, 8),
                                     (Cat(exp, C(0, 3)) + (FP32.bias - FP16.bias))[:8]))
    m.d.comb += out.eq(Cat(C(0, 13), man, e32, sign))
    return out


class DSPFP32(wiring.Component):
    """One DSP58 in DSPFP32 mode: ``M = A × B``, ``P = P0 ± P1``.

    Parameters
    ----------
    a_fmt, b_fmt : golden.fp.FPFormat
        ``FP16`` or ``FP32``: the ``A_FPTYPE`` and ``B_D_FPTYPE`` attributes.

    Attributes
    ----------
    a : In(a_fmt.width)
        Multiplier operand A, taken into the A register when ``cea``.
    b : In(b_fmt.width)
        Multiplier operand B, taken into the B register when ``ceb``.
    cea, ceb : In(1)
        Clock enables of the A and B registers.
    fpopmode : In(7)
        Adder input selection, applied with the operands presented in the same cycle.
    c : In(32)
        The ``C`` port, three cycles after the operands it is added to.
    cefpa : In(1)
        Clock enable of the P register, in the cycle the sum is formed.
    p : Out(32)
        The P register (binary32).
    m : Out(32)
        The multiplier's output register ``FPM_OUT`` (binary32, flushed; a NaN
        has sign ``sign(A) XOR sign(B)``), three cycles after the operands.
    ce : In(1)
        Only with ``stall=True``: clock enable of every register of the slice.
    """

    def __init__(self, *, a_fmt=FP16, b_fmt=FP32, fpcreg=0, stall=False):
        for field, fmt in (("a_fmt", a_fmt), ("b_fmt", b_fmt)):
            if fmt not in _FPTYPE:
                raise ValueError(f"DSPFP32.{field} must be FP16 or FP32 (the B16/B32 input "
                                 f"formats of DSPFP32), not {fmt!r}")
        if fpcreg not in (0, 1, 2, 3) or isinstance(fpcreg, bool):
            raise ValueError(f"DSPFP32.fpcreg must be one of 0, 1, 2, 3 (the FPCREG "
                             f"attribute), not {fpcreg!r}")
        if not isinstance(stall, bool):
            raise TypeError(f"DSPFP32.stall must be True or False, not {stall!r}")
        self._a_fmt, self._b_fmt = a_fmt, b_fmt
        self._fpcreg, self._stall = fpcreg, stall
        members = {
            "a": In(a_fmt.width), "b": In(b_fmt.width), "cea": In(1), "ceb": In(1),
            "fpopmode": In(7), "c": In(32), "cefpa": In(1), "p": Out(32), "m": Out(32),
        }
        if stall:
            members["ce"] = In(1)
        super().__init__(members)

    #: Cycles from ``a``/``b`` to ``P`` (A register, multiplier pipe, M register, P register).
    latency = 4
    #: Cycles from ``a``/``b`` to the adder, where ``cefpa`` is taken and ``M`` is on ``m``.
    adder_stage = 3

    @property
    def c_lag(self):
        """Cycles from ``a``/``b`` to the ``c`` they are added to: ``3 − FPCREG``."""
        return self.adder_stage - self._fpcreg

    @property
    def module_name(self):
        return (f"DSPFP32_{_FPTYPE[self._a_fmt]}_{_FPTYPE[self._b_fmt]}_c{self._fpcreg}"
                + ("_ce" if self._stall else ""))

    def elaborate(self, platform):
        m = Module()
        ce = self.ce if self._stall else C(1, 1)
        a_reg = Signal(self._a_fmt.width)
        b_reg = Signal(self._b_fmt.width)
        with m.If(self.cea & ce):
            m.d.sync += a_reg.eq(self.a)
        with m.If(self.ceb & ce):
            m.d.sync += b_reg.eq(self.b)
        a = _flush(m, a_reg, self._a_fmt, "a_ftz")
        b = _flush(m, b_reg, self._b_fmt, "b_ftz")
        a32 = a if self._a_fmt == FP32 else _widen(m, a, "a32")
        b32 = b if self._b_fmt == FP32 else _widen(m, b, "b32")

        # FPMPIPEREG and FPM_PREG: the multiplier's two registers.
        m.submodules.mul = mul = FPMul(fmt=FP32, stages=2)
        m.d.comb += [mul.en.eq(ce), mul.valid.eq(1), mul.a.eq(a32), mul.b.eq(b32)]
        sign = Signal()
        sign_d = Signal()
        with m.If(ce):
            m.d.sync += [sign.eq(a32[31] ^ b32[31]), sign_d.eq(sign)]
        prod = mul.result
        is_nan = (prod[23:31] == 0xFF) & prod[:23].any()
        # The multiplier's NaN carries sign(A) XOR sign(B) (golden.dsp.mul).
        m_val = _flush(m, Cat(prod[:31], Mux(is_nan, sign_d, prod[31])), FP32, "m_ftz")
        m.d.comb += self.m.eq(m_val)

        # FPOPMREG = 3: the selection meets the product it was presented with.
        op = [Signal(7, name=f"fpopmode_{i}") for i in range(3)]
        c_regs = [Signal(32, name=f"c_{i}") for i in range(self._fpcreg)]
        with m.If(ce):
            m.d.sync += [op[0].eq(self.fpopmode), op[1].eq(op[0]), op[2].eq(op[1])]
            m.d.sync += [r.eq(prev) for r, prev in zip(c_regs, [self.c] + c_regs)]
        c_in = c_regs[-1] if c_regs else self.c
        sel = op[2]
        zero = C(0, 32)
        p0 = Mux(sel[0:2] == 0b01, m_val, zero)
        p1 = Mux(sel[4], Mux(sel[3], Mux(sel[2], zero, c_in), self.p), zero)
        p0n = Cat(p0[:31], p0[31] ^ sel[5])
        p1n = Cat(p1[:31], p1[31] ^ sel[6])
        m.submodules.add = add = FPAdd(fmt=FP32, stages=0)
        m.d.comb += [add.en.eq(1), add.valid.eq(1),
                     add.a.eq(_flush(m, p0n, FP32, "p0_ftz")),
                     add.b.eq(_flush(m, p1n, FP32, "p1_ftz"))]
        total = _flush(m, add.result, FP32, "p_ftz")
        with m.If(self.cefpa & ce):
            m.d.sync += self.p.eq(total)
        return m

    # -- the other views of the same module -----------------------------------------------

    def _ports(self):
        return [("input", "clk", 1), ("input", "rst", 1), ("input", "a", self._a_fmt.width),
                ("input", "b", self._b_fmt.width), ("input", "cea", 1), ("input", "ceb", 1),
                ("input", "fpopmode", 7), ("input", "c", 32), ("input", "cefpa", 1),
                ("output", "p", 32), ("output", "m", 32)] + (
                    [("input", "ce", 1)] if self._stall else [])

    def _header(self):
        decl = ",\n".join(f"  {d} {'' if w == 1 else f'[{w - 1}:0] '}{n}"
                          for d, n, w in self._ports())
        return f"module {self.module_name} (\n{decl}\n);\n"

    def blackbox_verilog(self):
        """An empty ``(* blackbox *)`` module: the Yosys proxy counts one DSP per instance."""
        return "(* blackbox *)\n" + self._header() + "endmodule\n"

    def primitive_verilog(self):
        """The module as an instance of AMD's ``DSPFP32`` primitive, for Vivado."""
        def operand(port, fmt, name):
            if fmt == FP32:
                return (f"    .{name}_SIGN({port}[31]), .{name}_EXP({port}[30:23]), "
                        f".{name}_MAN({port}[22:0]),")
            # B16 alignment (AM004 "Mixed Numerical Formats"): exp = {3'b0, e}, man = {m, 13'b0}.
            return (f"    .{name}_SIGN({port}[15]), .{name}_EXP({{3'b000, {port}[14:10]}}), "
                    f".{name}_MAN({{{port}[9:0], 13'b0}}),")
        def ce(pin):
            if not self._stall:
                return pin
            return "ce" if pin == one else f"{pin} & ce"
        one = "1'b1"
        return self._header() + "\n".join([
            "  DSPFP32 #(",
            f"    .A_FPTYPE(\"{_FPTYPE[self._a_fmt]}\"), .B_D_FPTYPE(\"{_FPTYPE[self._b_fmt]}\"),",
            "    .A_INPUT(\"DIRECT\"), .B_INPUT(\"DIRECT\"), .BCASCSEL(\"B\"), .PCOUTSEL(\"FPA\"),",
            "    .USE_MULT(\"MULTIPLY\"), .RESET_MODE(\"SYNC\"),",
            "    .ACASCREG(1), .AREG(1), .FPBREG(1), .FPDREG(1), .FPMPIPEREG(1), .FPM_PREG(1),",
            f"    .FPA_PREG(1), .FPCREG({self._fpcreg}), .FPOPMREG(3), .INMODEREG(1)",
            "  ) dsp (",
            "    .CLK(clk), .ASYNC_RST(1'b0),",
            operand("a", self._a_fmt, "A"),
            operand("b", self._b_fmt, "B"),
            "    .C(c), .FPINMODE(1'b1), .FPOPMODE(fpopmode),",
            "    .D_SIGN(1'b0), .D_EXP(8'b0), .D_MAN(23'b0), .PCIN(32'b0),",
            "    .ACIN_SIGN(1'b0), .ACIN_EXP(8'b0), .ACIN_MAN(23'b0),",
            "    .BCIN_SIGN(1'b0), .BCIN_EXP(8'b0), .BCIN_MAN(23'b0),",
            f"    .CEA1({ce('cea')}), .CEA2({ce('cea')}), .CEB({ce('ceb')}), "
            f".CEC({ce(one)}), .CED(1'b0), .CEFPA({ce('cefpa')}),",
            f"    .CEFPM({ce(one)}), .CEFPMPIPE({ce(one)}), "
            f".CEFPINMODE({ce(one)}), .CEFPOPMODE({ce(one)}),",
            "    .RSTA(rst), .RSTB(rst), .RSTC(rst), .RSTD(rst), .RSTFPA(rst), .RSTFPM(rst),",
            "    .RSTFPMPIPE(rst), .RSTFPINMODE(rst), .RSTFPOPMODE(rst),",
            "    .FPA_OUT(p), .FPM_OUT(m), .PCOUT(), .FPA_INVALID(), .FPA_OVERFLOW(),",
            "    .FPA_UNDERFLOW(), .FPM_INVALID(), .FPM_OVERFLOW(), .FPM_UNDERFLOW(),",
            "    .ACOUT_SIGN(), .ACOUT_EXP(), .ACOUT_MAN(), .BCOUT_SIGN(), .BCOUT_EXP(),",
            "    .BCOUT_MAN()",
            "  );",
            "endmodule",
        ]) + "\n"
