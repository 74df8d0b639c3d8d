"""``FPOps``: binary32 multiply, add and multiply-add of one arithmetic contract.

The SSM unit and its table functions are written once against this factory; the
contract of their config (:data:`golden.dsp.SSM_CONTRACTS`) chooses what each
operation is built from:

* ``"ieee"``: :class:`hw.fp_arith.FPMul` and :class:`hw.fp_arith.FPAdd` in
  fabric, IEEE 754 with gradual underflow, ``mul_stages`` / ``add_stages``
  registers each (the ``sim`` preset);
* ``"dspfp32"``: one :class:`hw.dsp58.DSPFP32` slice per operation (AMD AM004,
  "DSPFP32 Unisim Primitive"), flush to zero as :mod:`golden.dsp` specifies.
  A multiply is the slice's ``FPM_OUT`` (3 cycles); an add is ``a × 1.0 + c``
  on its adder (4 cycles: ``× 1.0`` is exact, and the flushes and NaN rules
  are those of the adder alone, since a NaN product always meets the adder);
  a multiply-add ``fl(fl(a·b) + c)`` is one slice, ``P = M + C`` (4 cycles).

Every instance holds with the pipeline's clock enable ``en`` (for DSPFP32,
every ``CE*`` pin of the slice), so a pipeline built from these stalls as one.
"""

from amaranth import C

from specgen.golden.dsp import SSM_CONTRACTS
from specgen.golden.fp import FP32
from specgen.golden.validate import check_choice, check_int

from .dsp58 import DSPFP32, OP_ACC_C
from .fp_arith import FPAdd, FPMul, delay_line
from .hierarchy import submodule

__all__ = ["FPOps", "ONE32"]

#: binary32 1.0: the B operand that makes a DSPFP32 multiplier pass A to its adder.
ONE32 = 0x3F80_0000


class FPOps:
    """Builds binary32 operations of one contract into a module.

    Parameters
    ----------
    contract : str
        ``"ieee"`` or ``"dspfp32"``.
    mul_stages, add_stages : int
        Registers of each fabric :class:`hw.fp_arith.FPMul` / ``FPAdd``
        (``"ieee"`` only; the DSP's pipeline is fixed).
    owner : str
        The component whose parameters these are, for error messages.

    Notes
    -----
    Timing is in enabled cycles: operands presented in cycle ``t`` give the
    result in cycle ``t + latency``. :meth:`muladd` samples its addend
    ``c_lag`` cycles after ``a`` and ``b`` (``0 ≤ c_lag ≤`` :attr:`max_c_lag`),
    so an addend that is itself a product can start with them.
    """

    def __init__(self, *, contract, mul_stages=2, add_stages=2, owner="FPOps"):
        self.contract = check_choice(owner, "contract", contract, SSM_CONTRACTS)
        self._lm = check_int(owner, "mul_stages", mul_stages, min=0, max=len(FPMul.BOUNDARIES))
        self._la = check_int(owner, "add_stages", add_stages, min=0, max=len(FPAdd.BOUNDARIES))
        self.dsp = contract == "dspfp32"

    @property
    def mul_latency(self):
        """Cycles of :meth:`mul`: ``mul_stages``, or 3 (``FPM_OUT``)."""
        return DSPFP32.adder_stage if self.dsp else self._lm

    @property
    def add_latency(self):
        """Cycles of :meth:`add`: ``add_stages``, or 4 (``P``)."""
        return DSPFP32.latency if self.dsp else self._la

    @property
    def muladd_latency(self):
        """Cycles of :meth:`muladd`: ``mul_stages + add_stages``, or 4."""
        return DSPFP32.latency if self.dsp else self._lm + self._la

    @property
    def max_c_lag(self):
        """Latest cycle after ``a``/``b`` at which :meth:`muladd` may sample ``c``."""
        return DSPFP32.adder_stage if self.dsp else self._lm

    @property
    def tag(self):
        """Short text for module names: ``m<stages>a<stages>`` or ``dsp``."""
        return "dsp" if self.dsp else f"m{self._lm}a{self._la}"

    def _slice(self, m, name, en, *, fpcreg):
        dsp = submodule(m, name, DSPFP32(a_fmt=FP32, b_fmt=FP32, fpcreg=fpcreg, stall=True))
        m.d.comb += [dsp.ce.eq(en), dsp.cea.eq(1), dsp.ceb.eq(1), dsp.cefpa.eq(1),
                     dsp.fpopmode.eq(OP_ACC_C)]
        return dsp

    def mul(self, m, name, a, b, en):
        """``fl(a·b)``, :attr:`mul_latency` cycles after ``a`` and ``b``."""
        if self.dsp:
            dsp = self._slice(m, name, en, fpcreg=0)
            m.d.comb += [dsp.a.eq(a), dsp.b.eq(b), dsp.c.eq(0)]
            return dsp.m
        mul = submodule(m, name, FPMul(fmt=FP32, stages=self._lm))
        m.d.comb += [mul.en.eq(en), mul.valid.eq(0), mul.a.eq(a), mul.b.eq(b)]
        return mul.result

    def add(self, m, name, a, b, en):
        """``fl(a + b)``, :attr:`add_latency` cycles after ``a`` and ``b``."""
        if self.dsp:
            dsp = self._slice(m, name, en, fpcreg=3)
            m.d.comb += [dsp.a.eq(a), dsp.b.eq(C(ONE32, 32)), dsp.c.eq(b)]
            return dsp.p
        add = submodule(m, name, FPAdd(fmt=FP32, stages=self._la))
        m.d.comb += [add.en.eq(en), add.valid.eq(0), add.a.eq(a), add.b.eq(b)]
        return add.result

    def muladd(self, m, name, a, b, c, en, *, c_lag=0):
        """``fl(fl(a·b) + c)`` (two roundings), :attr:`muladd_latency` cycles after
        ``a`` and ``b``; ``c`` is sampled ``c_lag`` cycles after them."""
        check_int("FPOps.muladd", "c_lag", c_lag, min=0, max=self.max_c_lag)
        if self.dsp:
            dsp = self._slice(m, name, en, fpcreg=DSPFP32.adder_stage - c_lag)
            m.d.comb += [dsp.a.eq(a), dsp.b.eq(b), dsp.c.eq(c)]
            return dsp.p
        prod = self.mul(m, f"{name}_mul", a, b, en)
        c_d = delay_line(m, en, c, self._lm - c_lag, f"{name}_c")
        return self.add(m, f"{name}_add", prod, c_d, en)
