"""``Residual``: the residual add ``out = fl(h + d)`` of a Mamba2 layer, one element per cycle.

The hardware image of :func:`golden.residual.residual_hw`: one
:meth:`hw.fp_ops.FPOps.add` (a fabric FPAdd, or a DSPFP32 adder for
``"dspfp32"``), a canonical-NaN select, and a credited output FIFO
(:func:`hw.stream_pipe.credited_output`).
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from specgen.golden.nonlinear import CANONICAL_NAN32
from specgen.hw.fp_ops import FPOps
from specgen.hw.stream_pipe import ALWAYS, credit_depth, credited_output

__all__ = ["Residual", "RESIDUAL_IN"]

#: Input beat: the residual stream's ``h`` (word 0) and the layer's output ``d`` (word 1).
RESIDUAL_IN = data.StructLayout({"h": 32, "d": 32})


class Residual(wiring.Component):
    """``residual_hw`` of one element per cycle, bit for bit, on valid/ready streams.

    Parameters
    ----------
    contract : str
        ``"ieee"`` (fabric FPAdd) or ``"dspfp32"`` (a DSPFP32 adder, flush to zero).
    add_stages : int
        Registers of the fabric FPAdd (``"ieee"`` only).

    Attributes
    ----------
    i : In(stream.Signature(RESIDUAL_IN))
        ``i.ready`` depends only on the output credit.
    o : Out(stream.Signature(32))
        ``fl(h + d)``, every NaN ``0x7FC00000``; a beat taken in cycle ``t`` is
        offered from cycle ``t +`` :attr:`latency`, one per cycle at full rate.
    """

    def __init__(self, *, contract="ieee", add_stages=2):
        self._ops = FPOps(contract=contract, add_stages=add_stages, owner="Residual")
        super().__init__({"i": In(stream.Signature(RESIDUAL_IN)), "o": Out(stream.Signature(32))})

    @classmethod
    def from_config(cls, config):
        """The residual add of a :class:`golden.config.Config` (its SSM contract and FP stages)."""
        return cls(contract=config.ssm.contract, add_stages=config.pipeline.fp_add_stages)

    @property
    def latency(self):
        """Cycles from an ``i`` transfer to the result on ``o``: the add, plus the FIFO."""
        return self._ops.add_latency + 1

    @property
    def fifo_depth(self):
        return credit_depth(self._ops.add_latency)

    @property
    def module_name(self):
        return f"Residual_{self._ops.tag}"

    def elaborate(self, platform):
        m = Module()
        s = self._ops.add(m, "add", self.i.payload.h, self.i.payload.d, ALWAYS)
        out = Signal(32, name="sum_canon")
        m.d.comb += out.eq(Mux(s[23:31].all() & s[:23].any(), int(CANONICAL_NAN32), s))
        credited_output(m, i=self.i, o=self.o, data=out, latency=self._ops.add_latency)
        return m
