"""``Conv1d``: the causal conv1d and SiLU of a Mamba2 layer, one channel per cycle.

The hardware image of :func:`golden.conv1d.conv1d_hw`: a beat brings one
channel's window (``d_conv − 1`` raw values, oldest first), its new raw value
``x``, its ``d_conv`` taps and its bias; the block returns
``y = silu_lut(fl(acc + b))`` with ``acc`` the ascending fold of
``fl(fl(full[k]·w[k]) + acc)``, and the new window ``full[1:]``. The
multiply-adds are :meth:`hw.fp_ops.FPOps.muladd` (fabric FPMul + FPAdd, or one
DSPFP32 slice, ``P = M + C``, for ``"dspfp32"``), the SiLU is
:class:`hw.ssm_nonlinear.LUTFunction`. The block holds no state (why: the
:mod:`golden.conv1d` docstring): the sequencer keeps every node's window in
memory.
"""

from amaranth import Cat, Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from specgen.golden.conv1d import D_CONV_RANGE
from specgen.golden.mamba2 import MAMBA2_DEFAULTS
from specgen.golden.nonlinear import LUTSpec
from specgen.golden.validate import check_int
from specgen.hw.fp_arith import delay_line
from specgen.hw.fp_ops import FPOps
from specgen.hw.hierarchy import submodule
from specgen.hw.ssm_nonlinear import LUTFunction
from specgen.hw.stream_pipe import ALWAYS, credit_depth, credited_output

__all__ = ["Conv1d", "conv1d_in_layout", "conv1d_out_layout"]


def conv1d_in_layout(d_conv):
    """Input beat: ``window`` (``d_conv − 1`` words, oldest first), ``x``, ``taps``
    (``d_conv`` words, oldest first), ``bias``; word ``j`` in bits ``32j …`` of the
    payload, so words ``0 … d_conv − 1`` are the full window."""
    return data.StructLayout({"window": data.ArrayLayout(32, d_conv - 1), "x": 32,
                              "taps": data.ArrayLayout(32, d_conv), "bias": 32})


def conv1d_out_layout(d_conv):
    """Output beat: ``y`` (word 0), then the new ``window`` (``d_conv − 1`` words)."""
    return data.StructLayout({"y": 32, "window": data.ArrayLayout(32, d_conv - 1)})


class Conv1d(wiring.Component):
    """``conv1d_hw`` of one channel per cycle, bit for bit, on valid/ready streams.

    Parameters
    ----------
    silu_lut : golden.nonlinear.LUTSpec
        The SiLU table (``SSMConfig.silu_lut``).
    d_conv : int
        Taps, 2 … 8 (Mamba2: 4).
    contract : str
        ``"ieee"`` (fabric FP units) or ``"dspfp32"`` (DSPFP32 slices, flush to zero).
    mul_stages, add_stages : int
        Registers of every fabric FPMul / FPAdd (``"ieee"`` only).

    Attributes
    ----------
    i : In(stream.Signature(conv1d_in_layout(d_conv)))
        One channel per beat. ``i.ready`` depends only on the block's own state
        (an output credit), never combinationally on ``o.ready``.
    o : Out(stream.Signature(conv1d_out_layout(d_conv)))
        Results in input order. A beat taken in cycle ``t`` is offered from cycle
        ``t +`` :attr:`latency`; ``o.payload`` holds while ``o.valid`` and not
        ``o.ready``.

    Notes
    -----
    Throughput one beat per cycle while ``o.ready`` is high (an output FIFO of
    :attr:`fifo_depth` beats keeps the credit). Synchronous reset drops every beat
    in flight. Operation schedule, in cycles after the input: ``full[0]·w[0]``
    from 0; multiply-add ``k`` (``k = 1 … d_conv − 1``) takes its operands at
    ``(k − 1)·step`` and its addend ``max_c_lag`` cycles later, where
    ``step = muladd_latency − max_c_lag`` (an FPAdd's stages, or 1 cycle on the
    DSP cascade); then ``+ b`` and the SiLU table.
    """

    def __init__(self, *, silu_lut, d_conv=MAMBA2_DEFAULTS["d_conv"], contract="ieee",
                 mul_stages=2, add_stages=2):
        if not isinstance(silu_lut, LUTSpec) or silu_lut.function != "silu":
            raise TypeError(f"Conv1d.silu_lut must be a LUTSpec of 'silu', not {silu_lut!r}")
        self._d = check_int("Conv1d", "d_conv", d_conv, min=D_CONV_RANGE[0], max=D_CONV_RANGE[1])
        self._ops = FPOps(contract=contract, mul_stages=mul_stages, add_stages=add_stages,
                          owner="Conv1d")
        self._silu = LUTFunction(spec=silu_lut, mul_stages=mul_stages, add_stages=add_stages,
                                 contract=contract)
        super().__init__({"i": In(stream.Signature(conv1d_in_layout(self._d))),
                          "o": Out(stream.Signature(conv1d_out_layout(self._d)))})

    @classmethod
    def from_config(cls, config):
        """The conv1d of a :class:`golden.config.Config`: its SSM unit's SiLU table and
        contract, its pipeline's FP stages, Mamba2's ``d_conv``."""
        return cls(silu_lut=config.ssm.silu_lut, contract=config.ssm.contract,
                   mul_stages=config.pipeline.fp_mul_stages,
                   add_stages=config.pipeline.fp_add_stages)

    @property
    def d_conv(self):
        return self._d

    @property
    def _step(self):
        ops = self._ops
        return ops.muladd_latency - ops.max_c_lag

    @property
    def pipeline_latency(self):
        """Cycles from an input beat to its result entering the output FIFO:
        ``mul + (d_conv − 1)·step + add + silu``."""
        ops = self._ops
        return (ops.mul_latency + (self._d - 1) * self._step + ops.add_latency
                + self._silu.latency)

    @property
    def latency(self):
        """Cycles from an ``i`` transfer to the result's first cycle on ``o``:
        :attr:`pipeline_latency` + 1 (the output FIFO)."""
        return self.pipeline_latency + 1

    @property
    def fifo_depth(self):
        """Output FIFO beats: enough for every beat in flight at full rate."""
        return credit_depth(self.pipeline_latency)

    @property
    def module_name(self):
        s = self._silu.spec
        return f"Conv1d_d{self._d}_silu_s{s.step_log2}_d{s.degree}_{self._ops.tag}"

    def elaborate(self, platform):
        m = Module()
        ops, d, en = self._ops, self._d, ALWAYS
        p = self.i.payload
        full = [p.window[k] for k in range(d - 1)] + [p.x]
        taps = [p.taps[k] for k in range(d)]
        lag, step = ops.max_c_lag, self._step
        acc = ops.mul(m, "tap0", full[0], taps[0], en)
        for k in range(1, d):
            t = (k - 1) * step + ops.mul_latency - lag
            a = delay_line(m, en, full[k], t, f"s{k}", reset_less=True)
            b = delay_line(m, en, taps[k], t, f"w{k}", reset_less=True)
            acc = ops.muladd(m, f"tap{k}", a, b, acc, en, c_lag=lag)
        t_acc = ops.mul_latency + (d - 1) * step
        bias = delay_line(m, en, p.bias, t_acc, "bias", reset_less=True)
        v = ops.add(m, "bias_add", acc, bias, en)
        silu = submodule(m, "silu", self._silu)
        m.d.comb += [silu.en.eq(1), silu.valid.eq(0), silu.x.eq(v)]
        lat = self.pipeline_latency
        window = delay_line(m, en, Cat(*full[1:]), lat, "window", reset_less=True)
        credited_output(m, i=self.i, o=self.o, data=Cat(silu.y, window), latency=lat)
        return m
