"""``SSMUnit``: one Mamba2 decode step for all heads, bit for bit ``ssm_step_hw``.

SpecMamba's SSM unit is a pipeline of element-wise multiply units (EMUs) that
sweeps the ``nheads × P × N`` binary32 state once per token (SpecMamba, arXiv 2509.19873). This
implementation sweeps it in the order head → row → group of ``lanes`` columns,
``lanes`` state elements per enabled cycle, and follows the contract of
``docs/ssm-numerics.md`` operation for operation (``golden.mamba2``):

* prologue, per head: ``s = dt + dt_bias``, ``delta = softplus_lut(s)``,
  ``a = delta·A``, ``dA = exp_lut(a)`` (:class:`hw.ssm_nonlinear.LUTFunction`),
  written to a per-head buffer;
* sweep, per group: ``u = delta·x[p]`` and ``D·x[p]`` (recomputed each cycle: the
  same rounding, one multiplier each), then per lane ``h' = dA·h + u·B[n]``,
  ``q = h'·C[n]``; ``h'`` is written back to the state memory;
* reduction: a balanced pairwise tree over the ``lanes`` products, then the
  row's group sums accumulated in ascending ``n`` (``acc = T_0``, then
  ``acc + T_k``), then ``y = acc + D·x``.

See ``docs/blocks-ssm.md`` for ports, timing and the state interface.
"""

from types import SimpleNamespace

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from specgen.golden.fp import FP32
from specgen.golden.mamba2 import SSMConfig
from specgen.golden.validate import check_int
from specgen.hw.bits import eq_const, index_width
from specgen.hw.dsp58 import DSPFP32, OP_ACC_P, OP_START
from specgen.hw.fp_arith import FPAdd, add_const, delay_line
from specgen.hw.fp_datapath import ge_const
from specgen.hw.fp_ops import ONE32, FPOps
from specgen.hw.hierarchy import submodule, template
from specgen.hw.ssm_nonlinear import LUTFunction

__all__ = [
    "SEL_A",
    "SEL_B",
    "SEL_C",
    "SEL_D",
    "SEL_DT",
    "SEL_DT_BIAS",
    "SEL_X",
    "EMUGroup",
    "SSMDatapath",
    "SSMUnit",
    "StateBank",
    "beat_word",
    "eq_const",
    "host_members",
    "state_members",
]

#: ``wr_sel`` codes of the input write port.
SEL_B, SEL_C, SEL_X, SEL_DT, SEL_A, SEL_DT_BIAS, SEL_D = range(7)


class _Counter:
    """A wrapping counter ``0 .. n−1`` that steps when ``step`` is high."""

    def __init__(self, m, n, name):
        self.n = n
        self.value = Signal(index_width(n), name=name)
        self.last = eq_const(self.value, n - 1)
        self._m = m

    def step(self, cond):
        with self._m.If(cond):
            self._m.d.sync += self.value.eq(
                Mux(self.last, 0, add_const(self.value, 1, len(self.value))))


def host_members(cfg):
    """Signature members of the unit's input write port and ``y`` (see :class:`SSMUnit`),
    shared with :class:`hw.state_controller.StateController`, which forwards them."""
    H, P, N = cfg.state_shape
    W = cfg.input_words
    return {
        "wr_en": In(1),
        "wr_sel": In(3),
        "wr_addr": In(index_width(max(H * P, N, H) // W)),
        "wr_data": In(32 * W),
        "fill_free": Out(1),
        "token_valid": In(1),
        "token_ready": Out(1),
        "y": Out(stream.Signature(32)),
    }


def state_members(cfg):
    """Signature members of the hold/idle handshake and the state tile port."""
    H, P, _ = cfg.state_shape
    return {
        "hold": In(1),
        "idle": Out(1),
        "st_addr": In(index_width(H * P * cfg.groups_per_row)),
        "st_we": In(1),
        "st_wdata": In(32 * cfg.lanes),
        "st_rdata": Out(32 * cfg.lanes),
    }


class StateBank(wiring.Component):
    """One EMU lane's share of the SSM state: a simple dual-port RAM of binary32 words.

    Parameters
    ----------
    depth : int
        Words (tiles of the state), >= 2.

    Attributes
    ----------
    r_addr, r_en, r_data : In, In(1), Out(32)
        Synchronous read: with ``r_en`` high, ``r_data`` shows word ``r_addr``
        after the clock edge (old data if written in the same cycle); it holds
        while ``r_en`` is low.
    w_addr, w_en, w_data : In, In(1), In(32)
        Write ``w_data`` to ``w_addr`` at the clock edge while ``w_en``.
    """

    def __init__(self, *, depth):
        self._depth = check_int("StateBank", "depth", depth, min=2)
        aw = index_width(depth)
        super().__init__({"r_addr": In(aw), "r_en": In(1), "r_data": Out(32),
                          "w_addr": In(aw), "w_en": In(1), "w_data": In(32)})

    @property
    def module_name(self):
        return f"StateBank_w32_d{self._depth}"

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=32, depth=self._depth, init=[])
        rp, wp = mem.read_port(domain="sync"), mem.write_port()
        m.d.comb += [rp.addr.eq(self.r_addr), rp.en.eq(self.r_en), self.r_data.eq(rp.data),
                     wp.addr.eq(self.w_addr), wp.en.eq(self.w_en), wp.data.eq(self.w_data)]
        return m


class EMUGroup(wiring.Component):
    """One or two EMU lanes of the SSM unit and, for two, the tree's first adder.

    Lane ``i`` computes ``h'_i = fl(fl(dA·h_i) + fl(u·B_i))`` and ``q_i = fl(h'_i·C_i)``;
    a pair adds ``s = fl(q_1 + q_0)`` (IEEE addition commutes: the contract's
    ``q_0 + q_1``) as one multiply-add whose addend is ``q_0``. The unit holds
    ``⌊lanes/2⌋`` pairs and, for an odd ``lanes``, one single lane; one module
    per distinct group, so a board-scale unit is 64 instances of one module.

    Parameters
    ----------
    ops : hw.fp_ops.FPOps
        The arithmetic (contract and stages).
    lanes : int
        1 or 2.
    pad : tuple of bool
        Per lane: it may lie past column ``N − 1`` in a row's last tile; there
        its product is forced to ``(−0)·(+0) = −0``, the tree's exact identity.
    align : bool
        A single lane's ``s`` is delayed to a pair's (the odd value out of the
        first tree level); without it ``s = q_0`` as soon as it is ready.

    Attributes
    ----------
    en : In(1)
        Clock enable of every register.
    h, b, c : In(32·lanes)
        State, ``B`` and ``C`` words, presented in cycle ``r`` (the read data).
    da : In(32)
        ``dA`` of the head, in cycle ``r``.
    last : In(1)
        The tile is its row's last, in cycle ``r``.
    u : In(32)
        ``u = delta·x`` of the row, in cycle ``r +`` :attr:`u_lag`.
    hnew : Out(32·lanes)
        ``h'``, in cycle ``r +`` :attr:`h_latency`.
    s : Out(32)
        ``q_0 + q_1`` (or ``q_0``), in cycle ``r +`` :attr:`s_latency`.
    """

    def __init__(self, *, ops, lanes, pad, align=True):
        if not isinstance(ops, FPOps):
            raise TypeError(f"EMUGroup.ops must be an FPOps, not {ops!r}")
        self._ops = ops
        self._n = check_int("EMUGroup", "lanes", lanes, min=1, max=2)
        self._pad = tuple(bool(p) for p in pad)
        if len(self._pad) != lanes:
            raise ValueError(f"EMUGroup.pad must have one flag per lane ({lanes}), not {pad!r}")
        self._align = bool(align)
        n = self._n
        super().__init__({"en": In(1), "h": In(32 * n), "b": In(32 * n), "c": In(32 * n),
                          "da": In(32), "last": In(1), "u": In(32),
                          "hnew": Out(32 * n), "s": Out(32)})

    @property
    def u_lag(self):
        """Cycles from the read data to ``u`` (the row multiplier's latency)."""
        return self._ops.mul_latency

    @property
    def h_latency(self):
        """Cycles from the read data to ``h'``: ``Lmul + Lmuladd``."""
        return self._ops.mul_latency + self._ops.muladd_latency

    @property
    def s_latency(self):
        """Cycles from the read data to ``s``: ``h_latency + Lmuladd`` (a pair, or an aligned
        single lane) or ``h_latency + Lmul``."""
        ops = self._ops
        tail = ops.muladd_latency if self._n == 2 or self._align else ops.mul_latency
        return self.h_latency + tail

    @property
    def module_name(self):
        pad = "".join("p" if p else "c" for p in self._pad)
        return f"EMUGroup_{self._n}{pad}{'_a' if self._align and self._n == 1 else ''}_{self._ops.tag}"

    def elaborate(self, platform):
        m = Module()
        ops, en, n = self._ops, self.en, self._n
        lmul = ops.mul_latency
        # Data only (validity travels in the unit's reset tags): SRL-mappable chains.
        da_l = delay_line(m, en, self.da, lmul, "da_l", reset_less=True)
        h_l = delay_line(m, en, self.h, lmul, "h_l", reset_less=True)
        b_l = delay_line(m, en, self.b, lmul, "b_l", reset_less=True)
        c_l = delay_line(m, en, self.c, self.h_latency, "c_l", reset_less=True)
        last_q = delay_line(m, en, self.last, self.h_latency, "last_q")
        qa, qb = [], []
        for i in range(n):
            sl = slice(32 * i, 32 * (i + 1))
            ub = ops.mul(m, f"ub{i}", self.u, b_l[sl], en)
            hn = ops.muladd(m, f"h{i}", da_l, h_l[sl], ub, en, c_lag=lmul)
            m.d.comb += self.hnew[sl].eq(hn)
            a_op, b_op = hn, c_l[sl]
            if self._pad[i]:
                a_op = Mux(last_q, C(0x80000000, 32), hn)
                b_op = Mux(last_q, C(0, 32), c_l[sl])
            qa.append(a_op)
            qb.append(b_op)
        q0 = ops.mul(m, "hc0", qa[0], qb[0], en)
        if n == 2:
            s = ops.muladd(m, "hc1", qa[1], qb[1], q0, en, c_lag=lmul)
        elif self._align:
            s = delay_line(m, en, q0, ops.muladd_latency - lmul, "q0_d")
        else:
            s = q0
        m.d.comb += self.s.eq(s)
        return m


def beat_word(m, en, data, index, words, name, width=32):
    """Item ``index mod words`` of a beat of ``words`` items of ``width`` bits (binary32
    values, or several side by side) read one cycle after ``index`` was its address: the
    select is the index's low bits, registered with the read (enabled by ``en``)."""
    if words == 1:
        return data
    sel_d = delay_line(m, en, index[:index_width(words)], 1, f"{name}_sel")
    out = Signal(width, name=name)
    with m.Switch(sel_d):
        for i in range(words):
            with m.Case(i):
                m.d.comb += out.eq(data[width * i:width * (i + 1)])
    return out


class SSMDatapath(wiring.Component):
    """The arithmetic shared by :class:`SSMUnit` and :class:`hw.tree_ssm.TreeSSMUnit`:
    the per-head prologue, the EMU lanes with the reduction tree, and the row's
    accumulator and ``y`` adder, with their schedule (enabled cycles after a tile's
    issue, as properties). Subclasses add the memories and the issue order.

    Parameters
    ----------
    cfg : golden.mamba2.SSMConfig
        ``state_format="fp32"``. With ``lanes > d_state`` the datapath sweeps
        ``Q = lanes/d_state`` rows of a head a cycle (:attr:`rows_per_issue`): ``Q``
        reduction trees of ``d_state`` products, ``Q`` row multipliers and ``y`` adders,
        the rows' ``y`` side by side on the ``y`` stream; ``Q`` must divide ``headdim``
        and ``input_words``.
    mul_stages, add_stages : int
        Registers of the ``"ieee"`` contract's fabric units (:class:`hw.fp_ops.FPOps`).
    members : callable
        ``members(cfg)``: the subclass's signature members (called once ``cfg`` is
        checked).
    """

    #: Depth of the output FIFO behind ``y``: the pipeline's clock enable is a
    #: register that drops when the FIFO could not take one more row.
    Y_FIFO_DEPTH = 8

    def __init__(self, *, cfg, mul_stages, add_stages, members):
        owner = type(self).__name__
        if not isinstance(cfg, SSMConfig):
            raise TypeError(f"{owner}.cfg must be an SSMConfig, not {cfg!r}")
        if cfg.state_format != "fp32":
            raise ValueError(f"{owner} supports state_format 'fp32' only, not {cfg.state_format!r}")
        Q = cfg.rows_per_word
        if cfg.headdim % Q or cfg.input_words % Q:
            raise ValueError(f"{owner}.cfg.lanes ({cfg.lanes}) sweeps {Q} rows of "
                             f"{cfg.d_state} columns a cycle, which must divide headdim "
                             f"({cfg.headdim}) and input_words ({cfg.input_words}): the rows "
                             f"of a head, their x words from one input beat")
        self._cfg = cfg
        self._ops = FPOps(contract=cfg.contract, mul_stages=mul_stages, add_stages=add_stages,
                          owner=owner)
        self._lm, self._la = mul_stages, add_stages
        super().__init__(members(cfg))

    @property
    def cfg(self):
        return self._cfg

    @property
    def last_lanes(self):
        """Lanes of a row's last tile that hold columns (all of a row's tree width when it
        divides ``d_state``); lanes past them are padding."""
        c = self._cfg
        return c.d_state - (c.groups_per_row - 1) * c.tree_width

    def row_tags(self):
        """Name prefixes of an issue's rows: ``""`` for one row (the one-row unit's names),
        ``"r0_"``, ``"r1_"``, … for several."""
        Q = self._cfg.rows_per_word
        return [""] if Q == 1 else [f"r{q}_" for q in range(Q)]

    @property
    def rows_per_issue(self):
        """State rows one issue sweeps: ``lanes/d_state`` rows of a head when
        ``lanes > d_state`` (:attr:`golden.mamba2.SSMConfig.rows_per_word`), else 1."""
        return self._cfg.rows_per_word

    def _lut(self, spec):
        return LUTFunction(spec=spec, mul_stages=self._lm, add_stages=self._la,
                           contract=self._cfg.contract)

    # -- the pipeline's schedule, in enabled cycles after a tile's issue ----------------

    @property
    def _t_u(self):
        """``u = delta·x`` and ``D·x`` ready (the operands are read one cycle after issue)."""
        return 1 + self._ops.mul_latency

    @property
    def emu_latency(self):
        """Enabled cycles from a tile's read address to its write-back of ``h'``:
        ``1 + Lmul`` (``u``) ``+ Lmuladd`` (``h' = fl(dA·h) + fl(u·B)``, with ``u·B``
        started ``Lmul`` cycles earlier than ``dA·h``, as the multiply-add's addend)."""
        return self._t_u + self._ops.muladd_latency

    @property
    def _t_tree(self):
        """The tile's tree sum ready: ``q = h'·C`` with the first tree level fused in
        (odd lane ``fl(q_odd + q_even)`` is one multiply-add), then ``depth − 1`` adds."""
        ops, depth = self._ops, self._cfg.tree_depth
        if depth == 0:
            return self.emu_latency + ops.mul_latency
        return self.emu_latency + ops.muladd_latency + (depth - 1) * ops.add_latency

    @property
    def _acc_delay(self):
        """From a row's last tree sum to its accumulated value: a fabric register
        (``"ieee"``), nothing (``"dspfp32"``, one tile per row) or the DSP accumulator."""
        if not self._ops.dsp:
            return 1
        return 0 if self._cfg.groups_per_row == 1 else DSPFP32.latency

    @property
    def prologue_latency(self):
        """Enabled cycles from a head's issue to its ``delta``/``dA`` write."""
        c, ops = self._cfg, self._ops
        # Built only to read their latency: templates, never elaborated (hierarchy.template).
        return (1 + ops.add_latency + template(self._lut(c.softplus_lut)).latency
                + ops.mul_latency + template(self._lut(c.exp_lut)).latency)

    @property
    def latency(self):
        """Enabled cycles from a row's first tile issue to its ``y`` leaving the pipeline
        (entering the output FIFO; ``y.valid`` follows one or two cycles later)."""
        k = self._cfg.groups_per_row
        return self._t_tree + (k - 1) + self._acc_delay + self._ops.add_latency

    # -- the datapath pieces --------------------------------------------------------------

    def _prologue(self, m, en, dt_word, bias_word, a_word, tag):
        """``delta = softplus(dt + dt_bias)``, ``dA = exp(delta·A)`` of one head; the words
        arrive one cycle after the head's issue with ``tag``. Returns ``(delta, dA,
        tag)`` at the write (:attr:`prologue_latency` after the issue)."""
        cfg, ops = self._cfg, self._ops
        sp = submodule(m, "pro_softplus", self._lut(cfg.softplus_lut))
        ex = submodule(m, "pro_exp", self._lut(cfg.exp_lut))
        s_sum = ops.add(m, "pro_add_bias", dt_word, bias_word, en)
        m.d.comb += [sp.en.eq(en), sp.valid.eq(0), sp.x.eq(s_sum)]
        a_d = delay_line(m, en, a_word, ops.add_latency + sp.latency, "a_d")
        a_prod = ops.mul(m, "pro_mul_a", sp.y, a_d, en)
        m.d.comb += [ex.en.eq(en), ex.valid.eq(0), ex.x.eq(a_prod)]
        delta_d = delay_line(m, en, sp.y, ops.mul_latency + ex.latency, "delta_d")
        tag_end = delay_line(m, en, tag, ops.add_latency + sp.latency + ops.mul_latency
                             + ex.latency, "ptag")
        return delta_d, ex.y, tag_end

    def _emus(self, m, en, h, b, c, da, last, u):
        """The EMU lanes in :class:`EMUGroup` pairs and, per swept row, the balanced tree
        over its products. ``h`` (every lane), ``b``, ``c`` (a row's tree width of lanes,
        shared by the rows of an issue), ``da``, ``last`` are the tile's read data (one
        cycle after issue), ``u`` the rows' ``delta·x`` (a list, one per row of the
        issue; :attr:`_t_u` after issue). Returns ``(hnew, tsums)``: the lanes' ``h'``
        (:attr:`emu_latency`) and each row's tile tree sum (:attr:`_t_tree`)."""
        cfg, ops = self._cfg, self._ops
        W, last_lanes = cfg.tree_width, self.last_lanes
        hnew, tsums = [], []
        for q, tag in enumerate(self.row_tags()):
            # One row's tree (a single row keeps the names of the one-row unit).
            level = []
            for j in range(0, W, 2):
                n = min(2, W - j)
                g = submodule(m, f"emu{tag}{j // 2}", EMUGroup(
                    ops=ops, lanes=n, pad=tuple(j + i >= last_lanes for i in range(n)),
                    align=W > 1))
                sl = slice(32 * j, 32 * (j + n))
                hs = slice(32 * (q * W + j), 32 * (q * W + j + n))
                m.d.comb += [g.en.eq(en), g.h.eq(h[hs]), g.b.eq(b[sl]), g.c.eq(c[sl]),
                             g.da.eq(da), g.last.eq(last), g.u.eq(u[q])]
                hnew.append(g.hnew)
                level.append(g.s)
            depth = 1
            while len(level) > 1:
                nxt = []
                if len(level) % 2:
                    # The odd value out moves up unchanged, delayed like an adder.
                    level, odd = level[:-1], delay_line(m, en, level[-1], ops.add_latency,
                                                        f"{tag}tree{depth}_pass")
                else:
                    odd = None
                for j in range(0, len(level), 2):
                    nxt.append(ops.add(m, f"{tag}tree{depth}_{j // 2}", level[j], level[j + 1],
                                       en))
                if odd is not None:
                    nxt.append(odd)
                level, depth = nxt, depth + 1
            tsums.append(level[0])
        return hnew, tsums

    def _row_out(self, m, en, tsum, t_acc, dx, tag=""):
        """The row's accumulator over its tiles and ``y = acc + D·x``. ``t_acc`` is the
        tile tag (valid, first, last) at the tree sum, ``dx`` is ``D·x`` at :attr:`_t_u`;
        ``tag`` prefixes the names (a row of several an issue). Returns ``(y, y_valid)``
        at :attr:`latency` after the row's first issue."""
        cfg, ops = self._cfg, self._ops
        K = cfg.groups_per_row
        t_tree, t_u = self._t_tree, self._t_u
        # Accumulator: acc = T_0, then acc + T_k, in ascending n.
        acc_delay = self._acc_delay
        if ops.dsp:
            if K > 1:
                # On one DSPFP32: P = T_0 + (−0), then P = T_k + P on its own register
                # (AM004: the adder accumulates one value per cycle). A row's sum is on P
                # for one enabled cycle before the next row's T_0 replaces it.
                acc_dsp = submodule(m, f"{tag}acc", DSPFP32(a_fmt=FP32, b_fmt=FP32, stall=True))
                m.d.comb += [acc_dsp.ce.eq(en), acc_dsp.cea.eq(1), acc_dsp.ceb.eq(1),
                             acc_dsp.a.eq(tsum), acc_dsp.b.eq(C(ONE32, 32)), acc_dsp.c.eq(0),
                             acc_dsp.fpopmode.eq(Mux(t_acc[1], OP_START, OP_ACC_P)),
                             acc_dsp.cefpa.eq(delay_line(m, en, t_acc[0], DSPFP32.adder_stage,
                                                         f"{tag}acc_valid"))]
                acc = acc_dsp.p
            else:
                acc = tsum
        else:
            # A fabric adder in a one-cycle loop (the "ieee" contract, sim preset only).
            acc = Signal(32, name=f"{tag}acc")
            if K > 1:
                acc_add = submodule(m, f"{tag}acc_add", FPAdd(fmt=FP32, stages=0))
                m.d.comb += [acc_add.en.eq(en), acc_add.valid.eq(0), acc_add.a.eq(acc),
                             acc_add.b.eq(tsum)]
                acc_next = Mux(t_acc[1], tsum, acc_add.result)
            else:
                acc_next = tsum
            with m.If(en & t_acc[0]):
                m.d.sync += acc.eq(acc_next)
        # row end: y = acc + D·x
        t_row = t_tree + acc_delay
        r_end = delay_line(m, en, Cat(t_acc[0] & t_acc[2]), acc_delay, f"{tag}row_end")
        dx_end = delay_line(m, en, dx, t_row - t_u, f"{tag}dx_end")
        y_val = ops.add(m, f"{tag}y_add", acc, dx_end, en)
        y_valid = delay_line(m, en, r_end, ops.add_latency, f"{tag}y_valid")
        return y_val, y_valid

    def _y_out(self, m, en, y_fifo, rows, rows_in):
        """``y`` through the output FIFO, and the issues in flight: counted from an issue's
        last tile (``rows_in``) to its ``y`` transfer. ``rows`` is :meth:`_row_out`'s
        ``(y, valid)`` of each row of an issue (one beat, the first row in the low word;
        the rows run in lockstep). Returns the in-flight count (zero: no state access
        pending, as a row's write-backs come before its ``y``)."""
        y_val, y_valid = Cat(y for y, _ in rows), rows[0][1]
        # NaNs from the FP units and the DSP adders are canonical (0x7FC00000).
        m.d.comb += [y_fifo.w_data.eq(y_val), y_fifo.w_en.eq(en & y_valid),
                     self.y.payload.eq(y_fifo.r_data), self.y.valid.eq(y_fifo.r_rdy),
                     y_fifo.r_en.eq(self.y.ready)]
        inflight = Signal(range(self.latency + 4), name="inflight")
        rows_out = self.y.valid & self.y.ready
        with m.If(rows_in & ~rows_out):
            m.d.sync += inflight.eq(add_const(inflight, 1, len(inflight)))
        with m.Elif(rows_out & ~rows_in):
            m.d.sync += inflight.eq(add_const(inflight, -1, len(inflight)))
        return inflight


class SSMUnit(SSMDatapath):
    """The SSM unit of one Mamba2 layer (``ngroups = 1``, binary32 state).

    Parameters
    ----------
    cfg : golden.mamba2.SSMConfig
        Geometry, lanes, tables, arithmetic (``contract``: fabric FP units or
        DSPFP32 slices, :class:`hw.fp_ops.FPOps`) and input width
        (``input_words``). ``state_format`` must be ``"fp32"``; ``lanes`` may be
        any count up to ``d_state`` (a row's last tile may be partial;
        several rows a cycle, ``lanes > d_state``, are :class:`hw.tree_ssm.TreeSSMUnit`'s).
    mul_stages, add_stages : int
        Pipeline registers of every :class:`hw.fp_arith.FPMul` / ``FPAdd`` of
        the ``"ieee"`` contract (its accumulator's adder, when there is one, is
        combinational, see Notes); the DSPFP32 pipeline is fixed.

    Attributes
    ----------
    wr_en, wr_sel, wr_addr, wr_data : In
        Input write port, one beat of ``input_words`` binary32 words per cycle
        (word ``i`` in bits ``32i …``; not stalled by ``y``); ``wr_addr`` counts
        beats, beat ``a`` holding words ``a·W … a·W + W − 1`` of the array.
        ``wr_sel``: :data:`SEL_B` / :data:`SEL_C` (word ``n``), :data:`SEL_X`
        (``h·P + p``), :data:`SEL_DT` (``h``) write the *fill bank* of the
        double-buffered token inputs; :data:`SEL_A`, :data:`SEL_DT_BIAS`,
        :data:`SEL_D` (``h``) write the layer parameters (change them only
        while :attr:`idle`).
    fill_free : Out(1)
        The fill bank may be written (no token in flight uses it).
    token_valid : In(1), token_ready : Out(1)
        Handshake: ``token_valid`` says the fill bank holds a complete token; a
        cycle with both high commits it (the banks swap). ``token_ready`` equals
        ``fill_free``.
    y : Out(stream.Signature(32))
        ``y[h, p]`` in row-major order, one per row, from an output FIFO of
        :data:`Y_FIFO_DEPTH` rows; holding ``y`` (``valid`` and not ``ready``)
        stalls the prologue and the sweep one cycle later, through the
        registered clock enable (``y.ready`` drives no pipeline register).
    hold : In(1)
        No new sweep starts while high (state-controller handshake).
    idle : Out(1)
        No sweep running and no row in flight (every write-back done): with
        ``hold`` high the state ports below may be used. Committed tokens may
        still wait and run their prologues (they do not touch the state).
    st_addr, st_we, st_wdata, st_rdata : state tile port
        ``st_addr`` = ``(h·P + p)·(N/lanes) + k`` selects the tile of lanes
        ``n = k·lanes … k·lanes + lanes − 1`` of row ``(h, p)`` (lane ``i`` in
        bits ``32i … 32i+31``). Reads are synchronous: ``st_rdata`` shows the
        tile one cycle after ``st_addr``. ``st_we`` writes ``st_wdata``; it is
        taken only while ``idle`` and ``hold`` (the sweep owns the memory
        otherwise). Checkpoint/restore: raise ``hold``, wait for ``idle``, move
        tiles, drop ``hold`` (``docs/blocks-ssm.md``).

    Notes
    -----
    With the ``"ieee"`` contract the accumulator ``acc + T_k`` is a combinational
    adder in a one-cycle loop (the ``sim`` preset only). With ``"dspfp32"`` (the
    board presets) one DSPFP32 slice accumulates on its own P register
    (``P = T_0 + (−0)``, then ``P = T_k + P``), the single-cycle accumulation of
    AMD AM004. With one tile per row (``lanes == d_state``) there is none.
    """

    def __init__(self, *, cfg, mul_stages=2, add_stages=2):
        if isinstance(cfg, SSMConfig) and cfg.lanes > cfg.d_state:
            # Several rows a cycle are TreeSSMUnit's (the decoder's); this stream-fed unit,
            # with its state on chip, keeps one.
            raise ValueError(f"SSMUnit.cfg.lanes must be <= d_state ({cfg.d_state}): several "
                             f"rows a cycle are hw.tree_ssm.TreeSSMUnit's, not {cfg.lanes!r}")
        super().__init__(cfg=cfg, mul_stages=mul_stages, add_stages=add_stages,
                         members=lambda c: {**host_members(c), **state_members(c)})
        self._tiles = cfg.nheads * cfg.headdim * cfg.groups_per_row

    @classmethod
    def from_config(cls, config):
        """The SSM unit of a :class:`golden.config.Config` (its ``ssm`` and ``pipeline``)."""
        return cls(cfg=config.ssm, mul_stages=config.pipeline.fp_mul_stages,
                   add_stages=config.pipeline.fp_add_stages)

    @property
    def state_tiles(self):
        """Words of the state tile port: ``nheads·P·⌈N/lanes⌉`` (tile ``k`` of row ``(h, p)``
        at ``(h·P + p)·⌈N/lanes⌉ + k``)."""
        return self._tiles

    @property
    def sweep_cycles(self):
        """Issue cycles per token: ``nheads·P·⌈N/lanes⌉`` (``nheads·P·N/lanes`` when
        ``lanes`` divides ``N``; otherwise each row's last tile is partial)."""
        return self._tiles

    @property
    def module_name(self):
        c = self._cfg
        return (f"SSMUnit_h{c.nheads}_p{c.headdim}_n{c.d_state}_l{c.lanes}_{self._ops.tag}"
                + (f"_w{c.input_words}" if c.input_words > 1 else ""))

    def elaborate(self, platform):
        m = Module()
        cfg, ops = self._cfg, self._ops
        H, P, L = cfg.nheads, cfg.headdim, cfg.lanes
        K = cfg.groups_per_row
        last_lanes = self.last_lanes
        # The pipeline's clock enable is a register: y's ready never reaches the
        # thousands of registers and DSP CE pins it drives. It drops when the
        # output FIFO could not take a row in the next cycle, whatever y.ready does.
        m.submodules.y_fifo = y_fifo = SyncFIFOBuffered(width=32, depth=self.Y_FIFO_DEPTH)
        en = Signal(init=1, name="en", attrs={"max_fanout": 64})
        m.d.sync += en.eq(y_fifo.level <= self.Y_FIFO_DEPTH - 2)

        # -- memories ------------------------------------------------------------
        def mem(name, shape, depth):
            mm = Memory(shape=shape, depth=depth, init=[])
            m.submodules[name] = mm
            return mm

        # Token inputs, two banks each: bank b at addresses b·depth + i.
        bc = {sel: mem(f"mem_{'b' if sel == SEL_B else 'c'}", 32 * L, 2 * K) for sel in (SEL_B, SEL_C)}
        # x, dt and the parameters arrive W words a beat (wr_addr counts beats) and
        # are stored a beat a word: W·32 bits wide, read one beat and selected.
        W, wb = cfg.input_words, index_width(cfg.input_words) if cfg.input_words > 1 else 0
        xmem = mem("mem_x", 32 * W, 2 * H * P // W)
        dtmem = mem("mem_dt", 32 * W, 2 * H // W)
        # Depths of at least 2: a one-entry memory would have a zero-width address.
        par = {sel: mem(f"mem_{n}", 32 * W, max(H // W, 2))
               for sel, n in ((SEL_A, "a"), (SEL_DT_BIAS, "dt_bias"), (SEL_D, "d"))}
        dmem = mem("mem_delta", 32, 2 * H)
        damem = mem("mem_da", 32, 2 * H)
        # The state: one bank per EMU lane (lane i holds columns k·lanes + i), so
        # each bank is a plain 32-bit RAM (URAM/BRAM column) and one bank module
        # serves every lane; a single 32·lanes-bit memory would also carry a
        # 32·lanes-bit-wide initializer through emission.
        depth = max(self._tiles, 2)
        banks = [StateBank(depth=depth) for _ in range(L)]
        for i, bank in enumerate(banks):
            submodule(m, f"state_bank{i}", bank)
        aw = index_width(depth)
        rd_state = SimpleNamespace(addr=Signal(aw, name="st_rd_addr"), en=Signal(name="st_rd_en"),
                                   data=Signal(32 * L, name="st_rd_data"))
        wr_state = SimpleNamespace(addr=Signal(aw, name="st_wr_addr"), en=Signal(name="st_wr_en"),
                                   data=Signal(32 * L, name="st_wr_data"))
        # A sweep's write-back of a row's last tile skips the lanes past column N−1.
        pad_wb = Signal(name="pad_wb")
        for i, bank in enumerate(banks):
            sl = slice(32 * i, 32 * (i + 1))
            w_en = wr_state.en & ~pad_wb if i >= last_lanes else wr_state.en
            m.d.comb += [bank.r_addr.eq(rd_state.addr), bank.r_en.eq(rd_state.en),
                         rd_state.data[sl].eq(bank.r_data),
                         bank.w_addr.eq(wr_state.addr), bank.w_en.eq(w_en),
                         bank.w_data.eq(wr_state.data[sl])]

        fill_bank = Signal(name="fill_bank")
        busy = Signal(2, name="bank_busy")              # a committed token holds the bank
        m.d.comb += [self.fill_free.eq(~Mux(fill_bank, busy[1], busy[0])),
                     self.token_ready.eq(self.fill_free)]
        commit = self.token_valid & self.token_ready

        # host write port: beat a holds words a·W … a·W + W − 1 of the selected array.
        kw, xw, hw_ = index_width(2 * K), index_width(2 * H * P // W), index_width(2 * H)
        dw = index_width(2 * H // W)
        blocks = L // W                  # beats per tile of B or C (W divides lanes)
        for sel, mm in bc.items():
            wp = mm.write_port(granularity=32)
            if blocks & (blocks - 1) == 0:
                bw = index_width(blocks) if blocks > 1 else 0
                blk = self.wr_addr[:bw] if bw else C(0, 1)
                kidx = self.wr_addr[bw:]
            else:
                # Column n = a·W + i is lane n mod L of tile n div L (constant divisor).
                blk = Signal(index_width(blocks), name=f"wr_block_{sel}")
                kidx = Signal(index_width(K), name=f"wr_tile_{sel}")
                m.d.comb += [blk.eq(self.wr_addr % blocks), kidx.eq(self.wr_addr // blocks)]
            kk = Cat(kidx[:index_width(K)], C(0, 8))[:kw]
            m.d.comb += [wp.addr.eq(Mux(fill_bank, add_const(kk, K, kw), kk)),
                         wp.data.eq(self.wr_data.replicate(blocks))]
            for i in range(L):
                m.d.comb += wp.en[i].eq(self.wr_en & eq_const(self.wr_sel, sel) &
                                        (eq_const(blk, i // W) if blocks > 1 else C(1, 1)))
        for sel, mm, depth, aw in ((SEL_X, xmem, H * P // W, xw), (SEL_DT, dtmem, H // W, dw)):
            wp = mm.write_port()
            a = Cat(self.wr_addr, C(0, 8))[:aw]
            m.d.comb += [wp.addr.eq(Mux(fill_bank, add_const(a, depth, aw), a)),
                         wp.data.eq(self.wr_data),
                         wp.en.eq(self.wr_en & eq_const(self.wr_sel, sel))]
        pw = index_width(max(H // W, 2))
        for sel, mm in par.items():
            wp = mm.write_port()
            m.d.comb += [wp.addr.eq(Cat(self.wr_addr, C(0, 8))[:pw]), wp.data.eq(self.wr_data),
                         wp.en.eq(self.wr_en & eq_const(self.wr_sel, sel))]

        def word(data, index, name):
            return beat_word(m, en, data, index, W, name)

        # Token queue: at most two committed tokens (one per bank), in bank order.
        pro_pending = Signal(2, name="pro_pending")     # committed, prologue not started
        sweep_ready = Signal(2, name="sweep_ready")     # prologue finished
        with m.If(commit):
            m.d.sync += fill_bank.eq(~fill_bank)

        # -- prologue: one head per enabled cycle ---------------------------------
        pro_bank = Signal(name="pro_bank")
        pro_run = Signal(name="pro_run")
        pro_h = _Counter(m, H, "pro_h")
        pro_issue = en & pro_run
        rd_dt = dtmem.read_port(domain="sync")
        rd_bias = par[SEL_DT_BIAS].read_port(domain="sync")
        rd_a = par[SEL_A].read_port(domain="sync")
        hbeat = pro_h.value[wb:]
        ha = Cat(hbeat, C(0, 8))[:dw]
        m.d.comb += [rd_dt.addr.eq(Mux(pro_bank, add_const(ha, H // W, dw), ha)),
                     rd_bias.addr.eq(Cat(hbeat, C(0, 8))[:pw]), rd_a.addr.eq(Cat(hbeat, C(0, 8))[:pw]),
                     rd_dt.en.eq(en), rd_bias.en.eq(en), rd_a.en.eq(en)]
        dt_word = word(rd_dt.data, pro_h.value, "dt_word")
        bias_word = word(rd_bias.data, pro_h.value, "bias_word")
        a_word = word(rd_a.data, pro_h.value, "a_word")
        pro_step = Signal(name="pro_start")
        m.d.comb += pro_step.eq(~pro_run & Mux(pro_bank, pro_pending[1], pro_pending[0]))
        with m.If(pro_step):
            m.d.sync += pro_run.eq(1)
        with m.If(pro_issue & pro_h.last):
            m.d.sync += [pro_run.eq(0), pro_bank.eq(~pro_bank)]
        pro_h.step(pro_issue)
        # issue tags: valid, bank, head
        tag0 = Cat(pro_issue, pro_bank, pro_h.value)
        tag1 = delay_line(m, en, tag0, 1, "ptag1")
        delta_d, da_out, tag_end = self._prologue(m, en, dt_word, bias_word, a_word, tag1)
        wd, wda = dmem.write_port(), damem.write_port()
        tv, tb_, th = tag_end[0], tag_end[1], tag_end[2:]
        hwa = Cat(th, C(0, 8))[:hw_]
        waddr = Mux(tb_, add_const(hwa, H, hw_), hwa)
        m.d.comb += [wd.addr.eq(waddr), wd.data.eq(delta_d), wd.en.eq(en & tv),
                     wda.addr.eq(waddr), wda.data.eq(da_out), wda.en.eq(en & tv)]
        pro_done = en & tv & eq_const(th, H - 1)

        # -- sweep: one tile (lanes elements) per enabled cycle -------------------
        sw_bank = Signal(name="sw_bank")
        sw_run = Signal(name="sw_run")
        k_c, p_c, h_c = _Counter(m, K, "sw_k"), _Counter(m, P, "sw_p"), _Counter(m, H, "sw_h")
        row = _Counter(m, H * P, "sw_row")
        tile = _Counter(m, self._tiles, "sw_tile")
        # Read-after-write across tokens: a tile is read again only after its
        # write-back, so consecutive sweep starts are >= emu_latency + 1 apart.
        gap = self.emu_latency + 1
        since = Signal(index_width(gap + 1), init=gap, name="since_start")
        sw_start = Signal(name="sw_start")
        m.d.comb += sw_start.eq(en & ~sw_run & ~self.hold & Mux(sw_bank, sweep_ready[1], sweep_ready[0]) &
                                ge_const(since, gap))
        sw_issue = Signal(name="sw_issue")
        m.d.comb += sw_issue.eq(en & (sw_run | sw_start))
        last_tile = tile.last
        with m.If(sw_start):
            m.d.sync += sw_run.eq(1)
        with m.If(sw_issue & last_tile):
            m.d.sync += [sw_run.eq(0), sw_bank.eq(~sw_bank)]
        with m.If(sw_start):
            m.d.sync += since.eq(1)
        with m.Elif(en & ~ge_const(since, gap)):
            m.d.sync += since.eq(add_const(since, 1, len(since)))
        k_c.step(sw_issue)
        p_c.step(sw_issue & k_c.last)
        h_c.step(sw_issue & k_c.last & p_c.last)
        row.step(sw_issue & k_c.last)
        tile.step(sw_issue)

        # bank bookkeeping
        sweep_done = sw_issue & last_tile
        for b in range(2):
            with m.If(commit & eq_const(fill_bank, b)):
                m.d.sync += [busy[b].eq(1), pro_pending[b].eq(1)]
            with m.If(pro_step & eq_const(pro_bank, b)):
                m.d.sync += pro_pending[b].eq(0)
            with m.If(pro_done & eq_const(tb_, b)):
                m.d.sync += sweep_ready[b].eq(1)
            with m.If(sweep_done & eq_const(sw_bank, b)):
                m.d.sync += [sweep_ready[b].eq(0), busy[b].eq(0)]

        # reads at issue (synchronous ports, enabled with the pipeline)
        rd_x = xmem.read_port(domain="sync")
        rd_b = bc[SEL_B].read_port(domain="sync")
        rd_c = bc[SEL_C].read_port(domain="sync")
        rd_delta = dmem.read_port(domain="sync")
        rd_da = damem.read_port(domain="sync")
        rd_d = par[SEL_D].read_port(domain="sync")
        ka = Cat(k_c.value, C(0, 8))[:kw]
        xa = Cat(row.value[wb:], C(0, 8))[:xw]
        hh = Cat(h_c.value, C(0, 8))[:hw_]
        st_en = Signal(name="st_read_en")
        m.d.comb += [
            rd_state.addr.eq(Mux(sw_run | sw_start, tile.value, self.st_addr)),
            rd_state.en.eq(st_en),
            self.st_rdata.eq(rd_state.data),
            rd_x.addr.eq(Mux(sw_bank, add_const(xa, H * P // W, xw), xa)),
            rd_b.addr.eq(Mux(sw_bank, add_const(ka, K, kw), ka)),
            rd_c.addr.eq(Mux(sw_bank, add_const(ka, K, kw), ka)),
            rd_delta.addr.eq(Mux(sw_bank, add_const(hh, H, hw_), hh)),
            rd_da.addr.eq(Mux(sw_bank, add_const(hh, H, hw_), hh)),
            rd_d.addr.eq(Cat(h_c.value[wb:], C(0, 8))[:pw]),
        ]
        x_word = word(rd_x.data, row.value, "x_word")
        d_word = word(rd_d.data, h_c.value, "d_word")
        for rp in (rd_x, rd_b, rd_c, rd_delta, rd_da, rd_d):
            m.d.comb += rp.en.eq(en)
        # per-tile tags: valid, first group, last group, tile address
        tag0 = Cat(sw_issue, eq_const(k_c.value, 0), k_c.last, tile.value)
        t1 = delay_line(m, en, tag0, 1, "stag1")
        # The tile port reads every cycle while no tile is in the read stage;
        # a sweep's reads (its last tile's included, until its data has moved
        # on) follow the pipeline enable, so a y stall cannot re-read st_addr
        # over a tile that is still waiting to enter the EMUs.
        m.d.comb += st_en.eq(Mux(sw_run | sw_start | t1[0], en, 1))

        # u = delta·x and D·x (same value for every tile of a row), ready at t_u.
        u = ops.mul(m, "row_mul_u", rd_delta.data, x_word, en)
        dx = ops.mul(m, "row_mul_dx", d_word, x_word, en)
        t_h = self.emu_latency
        hnew, (tsum,) = self._emus(m, en, rd_state.data, rd_b.data, rd_c.data, rd_da.data,
                                   t1[2], [u])
        # write-back of h' (or the state port while idle)
        t_wb = delay_line(m, en, t1, t_h - 1, "stag_wb")
        wb = en & t_wb[0]
        m.d.comb += [
            wr_state.addr.eq(Mux(wb, t_wb[3:], self.st_addr)),
            wr_state.data.eq(Mux(wb, Cat(*hnew), self.st_wdata)),
            wr_state.en.eq(wb | (self.st_we & self.idle & self.hold)),
            pad_wb.eq(wb & t_wb[2]),
        ]
        t_tree = self._t_tree
        t_acc = delay_line(m, en, t1, t_tree - 1, "stag_acc")
        # idle: nothing committed, nothing in flight in the sweep pipeline
        inflight = self._y_out(m, en, y_fifo, [self._row_out(m, en, tsum, t_acc, dx)],
                               sw_issue & k_c.last)
        # A row is counted from its last tile's issue to its y transfer; its
        # write-backs all happen before its y, so idle means no state access.
        m.d.comb += self.idle.eq(~sw_run & ~inflight.any())
        return m
