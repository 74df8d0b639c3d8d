"""``GatedRMSNorm``: ``RMSNorm(y ⊙ SiLU(z))·w_norm`` of one vector, bit for bit.

The hardware image of :func:`golden.rmsnorm.gated_rmsnorm_hw`, in two passes
over an on-chip buffer of two banks (a vector loads into one while the other's
is normalized and emitted), ``lanes`` elements a beat (``golden.config.VectorConfig``;
each lane a copy of the datapath below):

* **load**: one beat per cycle; per lane the gate ``g = fl(y·silu_lut(z))``
  (:class:`hw.ssm_nonlinear.LUTFunction` and one multiply), ``g`` and ``w``
  written to the buffer, and ``fl(g·g)`` folded into the lane's sum of squares in
  ascending order: on one DSPFP32 slice a lane accumulating on its own ``P``
  (``P = M + (−0)``, then ``P = M + P``; AMD AM004) for ``"dspfp32"``, or a
  fabric multiplier and a combinational adder in a one-cycle loop for
  ``"ieee"`` (the ``sim`` preset, as the SSM unit's accumulator);
* **tail**: the lanes' sums added by a tree of neighbours (``log2 lanes`` adders
  deep, :func:`golden.rmsnorm.gated_rmsnorm_hw`), ``ms = fl(acc·inv_n)``, ``t = fl(ms + eps)``, ``r = rsqrt_hw(t)``:
  the exponent-field range reduction into ``[1, 4)``, the ``"rsqrt"`` table
  (:class:`LUTFunction`), and the exponent put back;
* **emit**: one beat per cycle from the buffer, per lane ``out = fl(fl(g·r)·w)``,
  every NaN made canonical, into a credited output FIFO
  (:func:`hw.stream_pipe.credited_output`); with ``out_fmt=FP16`` it is rounded to
  binary16 first (:class:`hw.fp_arith.FPNarrow`, :func:`golden.fp.convert`): the
  activation format of the linear engine the norm feeds (``in_proj`` after the
  pre-norm, ``out_proj`` after the gated norm, the LM head after the final norm).
"""

from types import SimpleNamespace

import numpy as np
from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from specgen.golden.fp import FP16, FP32
from specgen.golden.nonlinear import CANONICAL_NAN32, LUTSpec
from specgen.golden.rmsnorm import NORM_EPS, RSQRT_LUT, inv_n32
from specgen.golden.validate import check_float, check_int
from specgen.hw.bits import eq_const, index_width
from specgen.hw.dsp58 import DSPFP32, OP_ACC_P, OP_START
from specgen.hw.fp_arith import FPAdd, FPNarrow, add_const, delay_line, sub_mod
from specgen.hw.fp_ops import FPOps
from specgen.hw.hierarchy import submodule
from specgen.hw.ssm_nonlinear import LUTFunction
from specgen.hw.stream_pipe import ALWAYS, credited_output

__all__ = ["GatedRMSNorm", "norm_in_layout", "NARROW_STAGES"]

#: Registers of the binary16 output's rounding (``out_fmt=FP16``): every boundary of
#: :class:`hw.fp_arith.FPNarrow` (classify, shift, round). With two, the exponent
#: arithmetic and the denormalizing shift shared a stage of 10.1 logic levels on the
#: UltraScale+ proxy, over the 7 of 250 MHz; with three the worst stage is 6.0.
NARROW_STAGES = 3


def norm_in_layout(gate, lanes=1):
    """Input beat: ``y``, ``z`` (only with the gate) and ``w``, ``lanes`` words each (lane
    ``j`` in bits ``32j …``), in that order."""
    return data.StructLayout({"y": 32 * lanes, **({"z": 32 * lanes} if gate else {}),
                              "w": 32 * lanes})


def _bits(value):
    return int(np.float32(value).view(np.uint32))


class GatedRMSNorm(wiring.Component):
    """``gated_rmsnorm_hw`` of ``size``-element vectors on valid/ready streams.

    Parameters
    ----------
    size : int
        Elements per vector, ``n`` (``d_inner`` for the layer's norm, ``d_model``
        for the final norm), >= 2.
    gate : bool
        ``True``: ``g = y·silu(z)``; ``False``: ``g = y`` (no ``z`` in the beat).
    silu_lut, rsqrt_lut : golden.nonlinear.LUTSpec
    eps : float
        RMSNorm epsilon (Mamba2: 1e-5), rounded to binary32.
    contract : str
        ``"ieee"`` or ``"dspfp32"``.
    mul_stages, add_stages : int
        Registers of every fabric FPMul / FPAdd (``"ieee"`` only).
    out_fmt : golden.fp.FPFormat
        ``FP32`` (default) or ``FP16``: the output rounded to binary16 (RNE, gradual
        underflow) by a :class:`hw.fp_arith.FPNarrow` of :data:`NARROW_STAGES` registers.
    lanes : int
        Elements a beat, ``L``: a power of two dividing ``size``. The sum of squares is
        ``L`` partial sums (the golden's ``lanes``), so it is part of the result.

    Attributes
    ----------
    i : In(stream.Signature(norm_in_layout(gate, lanes)))
        The vectors' elements in order, ``L`` a beat (element ``L·b + j`` in lane ``j``
        of beat ``b``), ``size / L`` beats per vector. ``i.ready`` is
        high while a bank is free: low from a vector's last beat while both banks
        hold vectors whose last element has not been read back (a registered
        condition; no path from ``o.ready``).
    o : Out(stream.Signature(L · out_fmt.width))
        The normalized elements in order, ``L`` a beat as on ``i``; held while
        ``o.valid`` and not ``o.ready``.

    Notes
    -----
    A vector whose last beat is taken in cycle ``t`` shows its first output in
    cycle ``t +`` :attr:`latency` and, while ``o.ready`` is high, one output per
    cycle after it. At full rate two vectors take :attr:`pair_cycles` cycles
    (``size / L`` cycles each when ``latency`` is small against that). A
    synchronous reset abandons the vectors in flight; the next beat starts a new
    vector.
    """

    def __init__(self, *, size, silu_lut, gate=True, rsqrt_lut=RSQRT_LUT, eps=NORM_EPS,
                 contract="ieee", mul_stages=2, add_stages=2, out_fmt=FP32, lanes=1):
        self._n = check_int("GatedRMSNorm", "size", size, min=2)
        self._L = check_int("GatedRMSNorm", "lanes", lanes, min=1)
        if lanes & (lanes - 1) or size % lanes:
            raise ValueError(f"GatedRMSNorm.lanes must be a power of two dividing size "
                             f"({size}), not {lanes}")
        if out_fmt not in (FP32, FP16):
            raise ValueError(f"GatedRMSNorm.out_fmt must be FP32 or FP16 (golden.fp), not "
                             f"{out_fmt!r}")
        self._out_fmt = out_fmt
        if not isinstance(gate, bool):
            raise TypeError(f"GatedRMSNorm.gate must be True or False, not {gate!r}")
        for name, spec, fn in (("silu_lut", silu_lut, "silu"), ("rsqrt_lut", rsqrt_lut, "rsqrt")):
            if not isinstance(spec, LUTSpec) or spec.function != fn:
                raise TypeError(f"GatedRMSNorm.{name} must be a LUTSpec of {fn!r}, not {spec!r}")
        if (rsqrt_lut.lo, rsqrt_lut.hi) != (1.0, 4.0):
            raise ValueError(f"GatedRMSNorm.rsqrt_lut must cover [1.0, 4.0], not "
                             f"[{rsqrt_lut.lo}, {rsqrt_lut.hi}]")
        self._eps = check_float("GatedRMSNorm", "eps", eps, min=0.0, max=1.0)
        self._gate = gate
        self._ops = FPOps(contract=contract, mul_stages=mul_stages, add_stages=add_stages,
                          owner="GatedRMSNorm")
        self._lm, self._la = mul_stages, add_stages
        self._silu_spec, self._rsqrt_spec = silu_lut, rsqrt_lut
        super().__init__({"i": In(stream.Signature(norm_in_layout(gate, lanes))),
                          "o": Out(stream.Signature(out_fmt.width * lanes))})

    @classmethod
    def from_config(cls, config, *, gate=True, out_fmt=FP32, size=None):
        """The layer's gated norm of a :class:`golden.config.Config` (``size`` defaults to
        ``d_inner``; the pre-norm and the final norm, with ``gate=False``, normalize
        ``d_model`` elements, which the config does not hold, so their caller gives
        ``size``), with the config's ``vector.lanes``."""
        size = config.ssm.d_inner if size is None else size
        return cls(size=size, gate=gate, silu_lut=config.ssm.silu_lut,
                   contract=config.ssm.contract, mul_stages=config.pipeline.fp_mul_stages,
                   add_stages=config.pipeline.fp_add_stages, out_fmt=out_fmt,
                   lanes=config.stage_lanes("norm"))

    def _lut(self, spec):
        return LUTFunction(spec=spec, mul_stages=self._lm, add_stages=self._la,
                           contract=self._ops.contract)

    def _lut_latency(self, spec):
        # A throwaway table, built only for its latency: never elaborated, so silenced
        # (Amaranth warns about every elaboratable it sees unused).
        lut = self._lut(spec)
        lut._MustUse__silence = True
        return lut.latency

    # -- schedule ---------------------------------------------------------------------

    @property
    def size(self):
        return self._n

    @property
    def lanes(self):
        return self._L

    @property
    def beats(self):
        """Beats of one vector: ``size / lanes``."""
        return self._n // self._L

    @property
    def _tree_levels(self):
        return self._L.bit_length() - 1

    @property
    def gate(self):
        return self._gate

    @property
    def _gate_latency(self):
        """Cycles from a beat to its ``g``: the SiLU table and one multiply, or 0."""
        if not self._gate:
            return 0
        return self._lut_latency(self._silu_spec) + self._ops.mul_latency

    @property
    def _acc_latency(self):
        """Cycles from ``g`` to the accumulated sum including it."""
        return DSPFP32.latency if self._ops.dsp else self._ops.mul_latency + 1

    @property
    def _tail_latency(self):
        """Cycles from the sums' register to ``r``: ``1`` (register) ``+ log2(lanes)·add``
        (the lanes' tree) ``+ mul + add + 1`` (reduction) ``+ rsqrt table + 1``
        (exponent)."""
        ops = self._ops
        return (1 + self._tree_levels * ops.add_latency + ops.mul_latency + ops.add_latency
                + 1 + self._lut_latency(self._rsqrt_spec) + 1)

    @property
    def _emit_latency(self):
        """Pipeline cycles from a buffer read's address to its output: read + two multiplies
        (+ the binary16 rounding)."""
        return 1 + 2 * self._ops.mul_latency + self._narrow_latency

    @property
    def _narrow_latency(self):
        return NARROW_STAGES if self._out_fmt is FP16 else 0

    @property
    def out_fmt(self):
        """The output format (``golden.fp.FP32`` or ``FP16``)."""
        return self._out_fmt

    @property
    def latency(self):
        """Cycles from a vector's last input transfer to its first output on ``o``."""
        return (self._gate_latency + self._acc_latency + self._tail_latency + 1
                + self._emit_latency + 1)

    @property
    def pair_cycles(self):
        """Cycles per two vectors at full rate, first input of a vector to that of the
        vector after next: ``2·beats − 2 + latency − emit``. A vector's bank is free in
        the cycle after its last read, ``emit = 1 + 2·mul`` cycles before that element's
        result enters the output FIFO; the vector in between loads into the other bank
        without waiting."""
        return 2 * self.beats - 2 + self.latency - self._emit_latency

    @property
    def module_name(self):
        g = f"silu_s{self._silu_spec.step_log2}" if self._gate else "nogate"
        out = "_o16" if self._out_fmt is FP16 else ""
        lanes = f"_l{self._L}" if self._L > 1 else ""
        return (f"GatedRMSNorm_n{self._n}_{g}_rsqrt_s{self._rsqrt_spec.step_log2}"
                f"_{self._ops.tag}{out}{lanes}")

    # -- the parts ----------------------------------------------------------------------

    def _accumulate(self, m, g, tag_first, tag_valid, sfx=""):
        """A lane's sum of squares, ascending; returns the sum (valid after the last ``g``)."""
        ops = self._ops
        if ops.dsp:
            dsp = submodule(m, f"sumsq{sfx}", DSPFP32(a_fmt=FP32, b_fmt=FP32, stall=True))
            m.d.comb += [dsp.ce.eq(1), dsp.cea.eq(1), dsp.ceb.eq(1), dsp.a.eq(g), dsp.b.eq(g),
                         dsp.c.eq(0), dsp.fpopmode.eq(Mux(tag_first, OP_START, OP_ACC_P)),
                         dsp.cefpa.eq(delay_line(m, ALWAYS, tag_valid, DSPFP32.adder_stage,
                                                 f"sumsq{sfx}_valid"))]
            return dsp.p
        sq = ops.mul(m, f"square{sfx}", g, g, ALWAYS)
        first = delay_line(m, ALWAYS, tag_first, ops.mul_latency, f"sq{sfx}_first")
        valid = delay_line(m, ALWAYS, tag_valid, ops.mul_latency, f"sq{sfx}_valid")
        acc = Signal(32, name=f"sumsq{sfx}")
        add = submodule(m, f"sumsq{sfx}_add", FPAdd(fmt=FP32, stages=0))
        m.d.comb += [add.en.eq(1), add.valid.eq(0), add.a.eq(sq),
                     add.b.eq(Mux(first, C(0x80000000, 32), acc))]
        with m.If(valid):
            m.d.sync += acc.eq(add.result)
        return acc

    def _rsqrt(self, m, t, t_valid):
        """``rsqrt_hw(t)``: returns ``(r, r_valid)``, ``1 + rsqrt table + 1`` cycles later."""
        efield, frac, sign = t[23:31], t[:23], t[31]
        # E = efield − 127; its parity p is the complement of efield's low bit, and the
        # reduced mantissa m = 1.f·2**p has exponent field 127 + p.
        p = ~efield[0]
        mant = Cat(frac, Mux(p, C(128, 8), C(127, 8)), C(0, 1))
        # q = floor(E/2): the arithmetic shift of E as a 9-bit two's complement value.
        q = add_const(Cat(efield, C(0, 1)), -127, 9)[1:9]
        nan = efield.all() & frac.any()
        inf = efield.all() & ~frac.any()
        zero = ~efield.any()
        flags = Cat(nan | (sign & ~zero), inf & ~sign, zero, sign)

        def reg(v, name):
            return delay_line(m, ALWAYS, v, 1, name)
        mant1, q1, flags1 = reg(mant, "rsqrt_m"), reg(q, "rsqrt_q1"), reg(flags, "rsqrt_f")
        valid1 = reg(t_valid, "rsqrt_v")
        lut = submodule(m, "rsqrt", self._lut(self._rsqrt_spec))
        m.d.comb += [lut.en.eq(1), lut.valid.eq(0), lut.x.eq(mant1)]
        n = lut.latency
        q2 = delay_line(m, ALWAYS, q1, n, "rsqrt_q2")
        f2 = delay_line(m, ALWAYS, flags1, n, "rsqrt_f2")
        v2 = delay_line(m, ALWAYS, valid1, n, "rsqrt_v2")
        # rho is in (0.5, 1] and q in [-63, 63]: the exponent field stays in [63, 190].
        scaled = Cat(lut.y[:23], sub_mod(lut.y[23:31], q2, 8), C(0, 1))
        r = Signal(32, name="rsqrt_r")
        with m.If(f2[0]):
            m.d.comb += r.eq(int(CANONICAL_NAN32))
        with m.Elif(f2[2]):
            m.d.comb += r.eq(Cat(C(0x7F800000, 31), f2[3]))
        with m.Elif(f2[1]):
            m.d.comb += r.eq(0)
        with m.Else():
            m.d.comb += r.eq(scaled)
        return reg(r, "r"), reg(v2, "r_valid")

    def elaborate(self, platform):
        m = Module()
        ops, n, en, L = self._ops, self.beats, ALWAYS, self._L
        p = self.i.payload
        cw, aw = index_width(n), index_width(2 * n)
        # Lane j's names carry a suffix; one lane keeps the unsuffixed names.
        sfx = [f"_l{j}" if L > 1 else "" for j in range(L)]

        def lane(value, j):
            return value[32 * j:32 * (j + 1)]

        def bank_addr(bank, index):
            """Buffer address of beat ``index`` of bank ``bank``: ``bank·beats + index``."""
            a = Cat(index, C(0, aw))[:aw]
            return Mux(bank, add_const(a, n, aw), a)

        # Two banks of the buffer: a vector loads into one while the other's vector
        # is normalized and emitted. full: loaded and not yet read back; ready: r known.
        full = Signal(2, name="bank_full")
        ready = Signal(2, name="bank_ready")
        load_bank = Signal(name="load_bank")
        emit_bank = Signal(name="emit_bank")

        # -- load: one beat per cycle into a free bank --------------------------------
        cnt_in = Signal(cw, name="cnt_in")
        m.d.comb += self.i.ready.eq(~Mux(load_bank, full[1], full[0]))
        accept = self.i.valid & self.i.ready
        in_last = eq_const(cnt_in, n - 1)
        with m.If(accept):
            m.d.sync += cnt_in.eq(Mux(in_last, 0, add_const(cnt_in, 1, cw)))
            with m.If(in_last):
                m.d.sync += load_bank.eq(~load_bank)
        tag = Cat(accept, accept & eq_const(cnt_in, 0), accept & in_last, load_bank, cnt_in)
        lg = self._gate_latency
        gs = []
        for j in range(L):
            if self._gate:
                silu = submodule(m, f"silu{sfx[j]}", self._lut(self._silu_spec))
                m.d.comb += [silu.en.eq(1), silu.valid.eq(0), silu.x.eq(lane(p.z, j))]
                y_d = delay_line(m, en, lane(p.y, j), silu.latency, f"y{sfx[j]}_d",
                                 reset_less=True)
                gs.append(ops.mul(m, f"gate{sfx[j]}", y_d, silu.y, en))
            else:
                gs.append(lane(p.y, j))
        w_g = delay_line(m, en, p.w, lg, "w_g", reset_less=True)
        tag_g = delay_line(m, en, tag, lg, "tag_g")
        buf = Memory(shape=64 * L, depth=2 * n, init=[])
        m.submodules.buffer = buf
        wp = buf.write_port()
        m.d.comb += [wp.addr.eq(bank_addr(tag_g[3], tag_g[4:])), wp.data.eq(Cat(*gs, w_g)),
                     wp.en.eq(tag_g[0])]
        totals = [self._accumulate(m, g, tag_g[1], tag_g[0], sfx[j]) for j, g in enumerate(gs)]
        # (the vector's last beat, its bank), when the sums including it are on `totals`
        done = delay_line(m, en, Cat(tag_g[2], tag_g[3]), self._acc_latency, "sum_done")

        # -- tail: the lanes' tree, ms, t, rsqrt, with the bank travelling beside ------------
        sums = [delay_line(m, done[0], total, 1, f"sumsq{sfx[j]}_reg", reset_less=True)
                for j, total in enumerate(totals)]
        level = 0
        while len(sums) > 1:
            # Neighbours first, as golden.rmsnorm's tree: fl(a0 + a1), fl(a2 + a3), ...
            sums = [ops.add(m, f"lanes_add{level}_{k // 2}", sums[k], sums[k + 1], en)
                    for k in range(0, len(sums), 2)]
            level += 1
        ss = sums[0]
        ss_valid = delay_line(m, en, done, 1 + self._tree_levels * ops.add_latency,
                              "sumsq_valid_reg")
        ms = ops.mul(m, "mean", ss, C(_bits(inv_n32(self._n)), 32), en)
        t = ops.add(m, "eps_add", ms, C(_bits(self._eps), 32), en)
        t_valid = delay_line(m, en, ss_valid, ops.mul_latency + ops.add_latency, "t_valid")
        r, r_valid = self._rsqrt(m, t, t_valid)
        r_hold = [Signal(32, name=f"r_hold{b}", reset_less=True) for b in range(2)]
        for b in range(2):
            with m.If(r_valid[0] & eq_const(r_valid[1], b)):
                m.d.sync += r_hold[b].eq(r)

        # -- emit: one beat per cycle from a ready bank, under the output's credit ---------
        cnt_out = Signal(cw, name="cnt_out")
        issue_port = SimpleNamespace(valid=Signal(name="emit_valid"), ready=Signal(name="emit_ready"))
        m.d.comb += issue_port.valid.eq(Mux(emit_bank, ready[1], ready[0]))
        rp = buf.read_port(domain="sync")
        m.d.comb += [rp.addr.eq(bank_addr(emit_bank, cnt_out)), rp.en.eq(1)]
        # r of the bank, registered with the read (the bank may switch after a last read).
        r_e = delay_line(m, en, Mux(emit_bank, r_hold[1], r_hold[0]), 1, "r_e", reset_less=True)
        outs = []
        for j in range(L):
            g_e, w_e = lane(rp.data, j), lane(rp.data, L + j)
            scaled = ops.mul(m, f"scale{sfx[j]}", g_e, r_e, en)
            out = ops.mul(m, f"weight{sfx[j]}", scaled,
                          delay_line(m, en, w_e, ops.mul_latency, f"w{sfx[j]}_e",
                                     reset_less=True), en)
            canon = Signal(32, name=f"out{sfx[j]}_canon")
            m.d.comb += canon.eq(Mux(out[23:31].all() & out[:23].any(), int(CANONICAL_NAN32),
                                     out))
            if self._out_fmt is FP16:
                narrow = submodule(m, f"narrow{sfx[j]}",
                                   FPNarrow(fmt=FP32, dst=FP16, stages=NARROW_STAGES))
                m.d.comb += [narrow.en.eq(en), narrow.valid.eq(1), narrow.a.eq(canon)]
                canon = narrow.result
            outs.append(canon)
        issue = credited_output(m, i=issue_port, o=self.o, data=Cat(*outs),
                                latency=self._emit_latency)
        out_last = eq_const(cnt_out, n - 1)
        with m.If(issue):
            m.d.sync += cnt_out.eq(Mux(out_last, 0, add_const(cnt_out, 1, cw)))
            with m.If(out_last):
                m.d.sync += emit_bank.eq(~emit_bank)

        # -- bank bookkeeping: a bank fills at its last load, is ready with its r, and is
        # free again after its last read (a bank is never loaded and read out at once).
        for b in range(2):
            with m.If(accept & in_last & eq_const(load_bank, b)):
                m.d.sync += full[b].eq(1)
            with m.If(issue & out_last & eq_const(emit_bank, b)):
                m.d.sync += [full[b].eq(0), ready[b].eq(0)]
            with m.If(r_valid[0] & eq_const(r_valid[1], b)):
                m.d.sync += ready[b].eq(1)
        return m
