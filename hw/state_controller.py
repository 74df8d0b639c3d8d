"""``StateController``: SpecMamba's state backtracking next to one :class:`hw.ssm_unit.SSMUnit`.

A Mamba2 state overwrites its past, so a rejected draft must be backtracked
(SpecMamba's hybrid backtracking, arXiv 2509.19873; ``docs/backtracking.md``). This block realizes the on-chip policies
of :mod:`golden.backtrack` for the state held by one SSM unit:

* **store** (:class:`golden.backtrack.StoreStates`): ``CHECKPOINT s`` copies
  the unit's whole state (every tile) and the conv window into slot ``s`` of
  a checkpoint buffer; ``RESTORE s`` copies it back.
* **replay** (:class:`golden.backtrack.StoreIntermediates`): ``CAPTURE r``
  arms the capture of the next host token's light inputs (``x``, ``B``,
  ``dt``: the words the state update ``h' = dA·h + (Δ·x)·B`` depends on, with
  ``Δ`` and ``dA`` recomputed from ``dt`` by the unit's prologue) into record
  ``r``, by snooping the unit's write port; ``REPLAY r`` feeds record ``r``
  back into the unit as a token and discards its ``y``. Restore along an
  accepted path = ``RESTORE`` of the committed checkpoint, then one
  ``REPLAY`` per path node.
* **recompute** (:class:`golden.backtrack.Recompute`): ``CHECKPOINT``/``RESTORE``
  of the committed state; the host feeds the path's tokens again.

The hybrid pairings of :data:`golden.backtrack.SYSTEM_POLICIES` are one of the
above per model (one controller per SSM unit).

The copy engine moves one tile (``32·lanes`` bits) per cycle through the unit's
state tile port, pipelined (the read of tile ``a + 1`` overlaps the write of
tile ``a``), and the conv window through a port of its own at the same time,
so a restore takes ``max(state_tiles, conv_depth) + 2`` cycles once the unit is
drained (:attr:`StateController.restore_cycles`). See ``docs/blocks-state.md``.
"""

from amaranth import Array, C, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from specgen.golden.mamba2 import MAMBA2_DEFAULTS, SSMConfig
from specgen.golden.validate import check_int
from specgen.hw.bits import index_width, zero_extend
from specgen.hw.fp_arith import add_const
from specgen.hw.fp_datapath import ge_const
from specgen.hw.hierarchy import submodule
from specgen.hw.ssm_unit import (
    SEL_B,
    SEL_DT,
    SEL_X,
    StateBank,
    eq_const,
    host_members,
    state_members,
)

__all__ = ["Op", "StateController", "cmd_layout", "resp_layout", "connect_ssm", "COUNTER_BITS"]

#: Width of the performance counters (as :class:`hw.linear_unit.LinearUnit`).
COUNTER_BITS = 48

# Tokens committed to the unit whose y rows are not all out. Bounded by the two
# input banks plus the tokens whose sweep is done but whose rows are still in
# the pipeline: at most ⌈latency / sweep spacing⌉ + 1 ≤ 37 < 64 for an SSMUnit
# of up to 128 lanes, even with every FP stage registered (latency ≤ 70 +
# ⌈N/lanes⌉ cycles at mul_stages 5, add_stages 6; sweeps ≥ max(⌈N/lanes⌉, 2) apart).
_INFLIGHT_BITS = 6


class Op(enum.Enum, shape=2):
    """Command codes of :attr:`StateController.cmd`."""

    #: Copy the unit's state and the conv window into slot ``index``.
    CHECKPOINT = 0
    #: Copy slot ``index`` into the unit's state and the conv window.
    RESTORE = 1
    #: Capture the next host token's x, B, dt into record ``index``.
    CAPTURE = 2
    #: Feed record ``index`` to the unit as a token; its y is discarded.
    REPLAY = 3


def cmd_layout(index_bits):
    """One command: ``op`` (:class:`Op`) and the slot or record ``index``."""
    return data.StructLayout({"op": Op, "index": index_bits})


def resp_layout(index_bits):
    """One response: the command's ``op`` and ``index``, and ``error``."""
    return data.StructLayout({"op": Op, "index": index_bits, "error": 1})


class StateController(wiring.Component):
    """Checkpoint, restore and replay of one SSM unit's state (and its conv window).

    Parameters
    ----------
    ssm_cfg : golden.mamba2.SSMConfig
        The unit's config (``state_format="fp32"``, ``lanes <= d_state``, as
        :class:`hw.ssm_unit.SSMUnit`). Tiles: ``T = nheads·headdim·⌈d_state/lanes⌉``
        words of ``32·lanes`` bits.
    slots : int
        Full-state checkpoint slots, 1 … 1024.
    records : int
        Replay records (``x``, ``B``, ``dt`` of one token each: ``W = d_state +
        nheads·headdim + nheads`` binary32 words), 0 … 1024; 0 leaves out the
        capture/replay logic (``CAPTURE``/``REPLAY`` then answer ``error``).
    conv_width : int
        Bits of one conv-window word, 1 … 4096; default ``32·lanes`` (the
        window moves at the state's rate).
    conv_depth : int
        Conv-window words per slot, 0 … 2**20; 0 means no conv window (the conv
        port is unused). Default :meth:`default_conv_depth`: the ``d_conv − 1 = 3``
        rows of ``d_inner + 2·d_state`` binary32 values of Mamba2, packed into
        ``conv_width``-bit words.

    Attributes
    ----------
    cmd : In(stream.Signature(cmd_layout(index_bits)))
        Commands (:class:`Op`), one at a time; taken in ``IDLE`` or with the
        previous response. ``index`` out of range (``>= slots`` or ``>=
        records``), ``RESTORE`` of a slot never checkpointed and ``REPLAY`` of a
        record never captured are answered with ``error`` and do nothing.
    resp : Out(stream.Signature(resp_layout(index_bits)))
        One beat per command, when it is done: ``CHECKPOINT``/``RESTORE`` when
        the last tile and word are written; ``CAPTURE`` in the cycle after it
        is taken (the capture is armed); ``REPLAY`` when the token is
        committed to the unit (its sweep and discarded y follow; every later
        command and token is ordered after it).
    wr_en, wr_sel, wr_addr, wr_data, token_valid : In
    fill_free, token_ready : Out
    y : Out(stream.Signature(32))
        The host side of the unit's input port and ``y`` stream, forwarded to
        the ``ssm_*`` ports combinationally (same meaning and timing as on
        :class:`hw.ssm_unit.SSMUnit`), except: ``token_ready`` is low from the
        cycle after a ``CHECKPOINT``/``RESTORE``/``REPLAY`` is taken until its
        copy or commit is done, and while replayed tokens are in flight;
        ``fill_free`` is low and writes are dropped while a ``REPLAY`` runs;
        ``y`` of replayed tokens is consumed here and not forwarded.
    ssm_wr_en, ssm_wr_sel, ssm_wr_addr, ssm_wr_data, ssm_token_valid : Out
    ssm_fill_free, ssm_token_ready : In
    ssm_y : In(stream.Signature(32))
    ssm_hold : Out(1)
    ssm_idle : In(1)
    ssm_st_addr, ssm_st_we, ssm_st_wdata : Out
    ssm_st_rdata : In(32·lanes)
        To the unit's ports of the same names (:func:`connect_ssm`). ``ssm_hold``
        is high only while tiles move (the unit's handshake: raise ``hold``,
        see ``idle``, move tiles, drop ``hold``). Between copies
        ``ssm_st_addr`` rests on the last tile, ``state_tiles − 1`` (the unit
        re-reads its state port at ``st_addr`` when its pipeline stalls right
        after a sweep's last tile; that tile is the one still in flight).
    conv_hold : Out(1)
    conv_idle : In(1)
    conv_addr, conv_we, conv_wdata : Out
    conv_rdata : In(conv_width)
        The conv window's port, the same handshake and timing as the tile
        port (``conv_rdata`` one cycle after ``conv_addr``; ``conv_we`` writes
        ``conv_wdata`` at ``conv_addr``). Tie ``conv_idle`` high if nothing
        else writes the window while ``conv_hold`` is high.
    busy : Out(1)
        A command is in progress (taken, its copy or commit not done) or
        replayed tokens are still in the unit. Low: the unit's state is the
        result of every command and token so far once the host's own tokens
        are out.
    busy_cycles, wait_cycles, done_count : Out(48)
        Performance counters since reset: cycles with a command in progress
        (taken, response not yet valid); the part of those spent waiting for
        the unit (tokens to drain, ``idle``, ``fill_free``); responses sent.

    Notes
    -----
    Ordering: a command acts on the state after every token committed before
    it was taken (a commit in the same cycle counts as before), and tokens
    committed after its response see its result. ``CHECKPOINT``/``RESTORE``
    therefore wait until every earlier token's ``y`` has been taken (so the
    consumer of ``y`` must keep draining), then raise ``ssm_hold``: with the
    unit drained, the copy starts in the cycle after the command is taken and
    the response is valid :attr:`restore_cycles` cycles after it is taken.
    The host may write (not commit) the next token during a checkpoint or
    restore. ``REPLAY`` uses the unit's fill bank: issue it between a commit
    and the next token's first write. ``CAPTURE``: the token's writes must
    start after its response.

    The buffer's contents and their valid bits survive a reset of the sync
    domain (memory); a command cut short by a reset leaves its target slot or
    record invalid, so a later ``RESTORE``/``REPLAY`` of it answers ``error``
    instead of restoring a torn state.
    """

    def __init__(self, *, ssm_cfg, slots, records=0, conv_width=None, conv_depth=None):
        if not isinstance(ssm_cfg, SSMConfig):
            raise TypeError(f"StateController.ssm_cfg must be an SSMConfig, not {ssm_cfg!r}")
        if ssm_cfg.state_format != "fp32":
            raise ValueError(f"StateController.ssm_cfg.state_format must be 'fp32', "
                             f"not {ssm_cfg.state_format!r}")
        if ssm_cfg.lanes > ssm_cfg.d_state:
            raise ValueError(f"StateController.ssm_cfg.lanes must be <= d_state "
                             f"({ssm_cfg.d_state}), not {ssm_cfg.lanes!r}")
        self._cfg = ssm_cfg
        self._slots = check_int("StateController", "slots", slots, min=1, max=1024)
        self._records = check_int("StateController", "records", records, min=0, max=1024)
        L = ssm_cfg.lanes
        cw = 32 * L if conv_width is None else conv_width
        self._cw = check_int("StateController", "conv_width", cw, min=1, max=4096)
        cd = self.default_conv_depth(ssm_cfg, conv_width=self._cw) if conv_depth is None else conv_depth
        self._cd = check_int("StateController", "conv_depth", cd, min=0, max=1 << 20)
        H, P, N = ssm_cfg.state_shape
        self._tiles = H * P * ssm_cfg.groups_per_row     # SSMUnit.state_tiles
        # Replay records hold the unit's input beats (input_words binary32 words each).
        self._beat = ssm_cfg.input_words
        self._words = (N + H * P + H) // self._beat
        self._ib = index_width(max(self._slots, self._records, 2))
        super().__init__({
            "cmd": In(stream.Signature(cmd_layout(self._ib))),
            "resp": Out(stream.Signature(resp_layout(self._ib))),
            # host side of the unit's input port and y, and the unit side of
            # those, the handshake and the tile port (ssm_*, flipped)
            **host_members(ssm_cfg),
            **{f"ssm_{name}": member.flip()
               for name, member in {**host_members(ssm_cfg), **state_members(ssm_cfg)}.items()},
            # conv window
            "conv_hold": Out(1),
            "conv_idle": In(1),
            "conv_addr": Out(index_width(max(self._cd, 1))),
            "conv_we": Out(1),
            "conv_wdata": Out(self._cw),
            "conv_rdata": In(self._cw),
            # performance counters
            "busy_cycles": Out(COUNTER_BITS),
            "wait_cycles": Out(COUNTER_BITS),
            "done_count": Out(COUNTER_BITS),
            "busy": Out(1),
        })

    @staticmethod
    def default_conv_depth(ssm_cfg, *, conv_width, d_conv=MAMBA2_DEFAULTS["d_conv"]):
        """Words of ``conv_width`` bits that hold Mamba2's conv window.

        ``(d_conv − 1)`` rows of ``conv_dim = d_inner + 2·d_state`` binary32
        values, each row packed into ``⌈32·conv_dim / conv_width⌉`` words.
        """
        conv_dim = ssm_cfg.d_inner + 2 * ssm_cfg.d_state
        return (d_conv - 1) * -(-32 * conv_dim // conv_width)

    # -- parameters and timing --------------------------------------------------------

    @property
    def ssm_cfg(self):
        return self._cfg

    @property
    def slots(self):
        return self._slots

    @property
    def records(self):
        return self._records

    @property
    def conv_width(self):
        return self._cw

    @property
    def conv_depth(self):
        return self._cd

    @property
    def index_bits(self):
        """Width of ``cmd.index`` / ``resp.index``."""
        return self._ib

    @property
    def state_tiles(self):
        """Tiles per state: ``nheads·headdim·⌈d_state/lanes⌉`` (:attr:`hw.ssm_unit.SSMUnit.state_tiles`)."""
        return self._tiles

    @property
    def record_words(self):
        """Input beats per replay record: ``(d_state + nheads·headdim + nheads) / input_words``
        (B, x, dt; one binary32 word a beat when ``input_words = 1``)."""
        return self._words

    @property
    def copy_overhead(self):
        """Fixed cycles of a checkpoint/restore besides one per tile: 2 (see :attr:`restore_cycles`)."""
        return 2

    @property
    def restore_cycles(self):
        """Cycles from a ``RESTORE`` being taken to its response, unit drained:
        ``max(state_tiles, conv_depth) + 2``.

        Cycle 0 takes the command; cycle 1 sees the unit drained and idle,
        raises ``ssm_hold`` and reads tile 0 of the slot; tile ``a`` is read in
        cycle ``a + 1`` and written to the unit in cycle ``a + 2``; the
        response is valid in the cycle after the last write.
        """
        return max(self._tiles, self._cd) + self.copy_overhead

    @property
    def checkpoint_cycles(self):
        """The same for a ``CHECKPOINT`` (tile ``a`` read from the unit in cycle
        ``a + 1``, written to the slot in cycle ``a + 2``)."""
        return self.restore_cycles

    @property
    def replay_cycles(self):
        """Cycles from a ``REPLAY`` being taken to its response (the commit),
        fill bank free: ``record_words + 2`` (one beat per cycle on the
        unit's input port; the commit goes with the last beat)."""
        return self._words + 2

    @property
    def module_name(self):
        c = self._cfg
        return (f"StateController_h{c.nheads}_p{c.headdim}_n{c.d_state}_l{c.lanes}"
                f"_s{self._slots}_r{self._records}_c{self._cw}x{self._cd}"
                + (f"_w{self._beat}" if self._beat > 1 else ""))

    # -- logic ------------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        H, P, N = cfg.state_shape
        L = cfg.lanes
        T, CD, W, R, S = self._tiles, self._cd, self._words, self._records, self._slots
        ib = self._ib
        cmd, resp = self.cmd, self.resp

        # ---- command register and state machine -------------------------------------
        op = Signal(Op, name="op")
        index = Signal(ib, name="index")
        error = Signal(name="error")
        take = Signal(name="take")
        m.d.comb += take.eq(cmd.valid & cmd.ready)
        with m.If(take):
            m.d.sync += [op.eq(cmd.payload.op), index.eq(cmd.payload.index)]

        # Tokens in flight in the unit: +1 per commit, −1 with the last y row of a token.
        inflight = Signal(_INFLIGHT_BITS, name="inflight")
        yrow = Signal(index_width(H * P), name="y_row")
        commit = self.ssm_token_valid & self.ssm_token_ready
        y_take = self.ssm_y.valid & self.ssm_y.ready
        tok_done = y_take & eq_const(yrow, H * P - 1)
        with m.If(y_take):
            m.d.sync += yrow.eq(Mux(eq_const(yrow, H * P - 1), 0, add_const(yrow, 1, len(yrow))))
        with m.If(commit & ~tok_done):
            m.d.sync += inflight.eq(add_const(inflight, 1, _INFLIGHT_BITS))
        with m.Elif(tok_done & ~commit):
            m.d.sync += inflight.eq(add_const(inflight, -1, _INFLIGHT_BITS))
        drained = ~inflight.any()

        # Replayed tokens in flight: their y is discarded, host commits wait.
        replay_mode = Signal(name="replay_mode")

        # Valid bits of slots and records: memory-like, so a reset keeps them
        # (a torn target was invalidated when its command was taken).
        slot_valid = Signal(S, name="slot_valid", reset_less=True)
        rec_valid = Signal(max(R, 1), name="rec_valid", reset_less=True)

        def bit(vector, n):
            # vector[cmd.payload.index], padded to every index value (a complete case statement)
            return Array([vector[i] for i in range(n)] + [C(0, 1)] * ((1 << ib) - n))[cmd.payload.index]

        ci = cmd.payload.index
        cop = cmd.payload.op
        cop_is = lambda k: eq_const(cop.as_value(), k.value)  # noqa: E731
        slot_ok = ~ge_const(ci, S)
        rec_ok = ~ge_const(ci, R) if R else C(0, 1)
        bad = Signal(name="cmd_bad")
        m.d.comb += bad.eq(Mux(cop_is(Op.CHECKPOINT), ~slot_ok,
                           Mux(cop_is(Op.RESTORE), ~slot_ok | ~bit(slot_valid, S),
                           Mux(cop_is(Op.CAPTURE), ~rec_ok,
                               ~rec_ok | (~bit(rec_valid, R) if R else C(1, 1))))))

        # Phases: IDLE → (WAIT → COPY | FEED) → RESP; CAPTURE and errors go straight to RESP.
        # A state register compared bit-wise (eq_const): Verilator -Wall rejects the
        # `!state` that Yosys writes for a comparison with 0.
        IDLE, WAIT, COPY, FEED, RESP = range(5)
        phase = Signal(3, name="phase")
        idle_, waiting, copying, feeding, responding = (eq_const(phase, k) for k in range(5))
        go = Signal(name="go")                    # WAIT → COPY/FEED this cycle
        copy_last = Signal(name="copy_last")      # COPY: last writes this cycle
        feed_last = Signal(name="feed_last")      # FEED: the commit happens this cycle
        op_is = lambda k: eq_const(op.as_value(), k.value)  # noqa: E731
        is_copy = op_is(Op.CHECKPOINT) | op_is(Op.RESTORE)
        is_replay = op_is(Op.REPLAY)
        restore = op_is(Op.RESTORE)
        m.d.comb += go.eq(waiting & Mux(is_copy, drained & self.ssm_idle & self.conv_idle,
                                        (replay_mode | drained) & self.ssm_fill_free))
        m.d.comb += [cmd.ready.eq(idle_ | responding & resp.ready), resp.valid.eq(responding)]
        with m.If(take):
            m.d.sync += [error.eq(bad), phase.eq(Mux(bad | cop_is(Op.CAPTURE), RESP, WAIT))]
        with m.Elif(go):
            m.d.sync += phase.eq(Mux(is_copy, COPY, FEED))
        with m.Elif(copying & copy_last | feeding & feed_last):
            m.d.sync += phase.eq(RESP)
        with m.Elif(responding & resp.ready):
            m.d.sync += phase.eq(IDLE)
        m.d.comb += [resp.payload.op.eq(op), resp.payload.index.eq(index),
                     resp.payload.error.eq(error)]

        # ---- valid bits -------------------------------------------------------------
        for i in range(S):
            with m.If(take & cop_is(Op.CHECKPOINT) & eq_const(ci, i)):
                m.d.sync += slot_valid[i].eq(0)
            with m.Elif(copying & copy_last & op_is(Op.CHECKPOINT) & eq_const(index, i)):
                m.d.sync += slot_valid[i].eq(1)

        # ---- copy engine: state tiles and conv words ------------------------------------
        copy_en = go & is_copy | copying
        m.d.comb += self.ssm_hold.eq(copy_en), self.conv_hold.eq(copy_en)

        def engine(name, n):
            """Address counters of one copy stream of ``n`` words per slot."""
            aw = index_width(n)
            bw = index_width(max(S * n, 2))
            run = Signal(name=f"{name}_run")        # reads still to issue
            a = Signal(aw, name=f"{name}_a")        # unit-side index of the read
            b = Signal(bw, name=f"{name}_b")        # buffer address of the read
            wv = Signal(name=f"{name}_wv")          # a write this cycle
            wa = Signal(aw, name=f"{name}_wa")
            wb = Signal(bw, name=f"{name}_wb")
            issue = copy_en & run
            last = eq_const(a, n - 1)
            with m.If(take):
                m.d.sync += [run.eq(1), a.eq(0), b.eq(base(n, bw))]
            with m.If(issue):
                m.d.sync += [a.eq(add_const(a, 1, aw)), b.eq(add_const(b, 1, bw))]
                with m.If(last):
                    m.d.sync += run.eq(0)
            m.d.sync += [wv.eq(issue), wa.eq(a), wb.eq(b)]
            return run, a, b, wv, wa, wb

        def base(n, bw):
            # slot · n, a table rather than a multiplier
            return Array([C(k * n, bw) for k in range(S)] + [C(0, bw)] * ((1 << ib) - S))[ci]

        t_run, t_a, t_b, t_wv, t_wa, t_wb = engine("tile", T)
        banks = [StateBank(depth=max(S * T, 2)) for _ in range(L)]
        for i, bank in enumerate(banks):
            submodule(m, f"slot_bank{i}", bank)
            sl = slice(32 * i, 32 * (i + 1))
            m.d.comb += [
                # RESTORE reads the slot at the issue address ...
                bank.r_addr.eq(t_b), bank.r_en.eq(1),
                self.ssm_st_wdata[sl].eq(bank.r_data),
                # ... CHECKPOINT writes the tile read one cycle earlier.
                bank.w_addr.eq(t_wb), bank.w_data.eq(self.ssm_st_rdata[sl]),
                bank.w_en.eq(t_wv & ~restore),
            ]
        # Between copies the address rests on the last tile: while the unit's sweep
        # pipeline is stalled (y back-pressure) right after the last tile's issue,
        # SSMUnit reads its state port at st_addr again and loses the tile's data
        # unless st_addr is that tile (whose write-back cannot happen during the stall).
        m.d.comb += [self.ssm_st_addr.eq(Mux(copy_en, Mux(restore, t_wa, t_a), T - 1)),
                     self.ssm_st_we.eq(t_wv & restore)]
        run_any = t_run
        if CD:
            c_run, c_a, c_b, c_wv, c_wa, c_wb = engine("conv", CD)
            cmem = Memory(shape=self._cw, depth=max(S * CD, 2), init=[])
            m.submodules.conv_buffer = cmem
            crp = cmem.read_port(domain="sync")
            cwp = cmem.write_port()
            m.d.comb += [crp.addr.eq(c_b), crp.en.eq(1), self.conv_wdata.eq(crp.data),
                         cwp.addr.eq(c_wb), cwp.data.eq(self.conv_rdata), cwp.en.eq(c_wv & ~restore),
                         self.conv_addr.eq(Mux(restore, c_wa, c_a)), self.conv_we.eq(c_wv & restore)]
            run_any = run_any | c_run
        # Last writes this cycle: nothing left to issue (the copy only starts from WAIT).
        m.d.comb += copy_last.eq(~run_any)

        # ---- capture and replay ---------------------------------------------------------
        replay_active = Signal(name="replay_active")   # a REPLAY command between take and commit
        m.d.comb += replay_active.eq((waiting | feeding) & is_replay)
        host_wr = self.wr_en & ~replay_active
        rp_en = Signal(name="replay_wr_en")
        rp_sel = Signal(3, name="replay_wr_sel")
        rp_addr = Signal(len(self.wr_addr), name="replay_wr_addr")
        rp_data = Signal(len(self.wr_data), name="replay_wr_data")
        rp_commit = Signal(name="replay_commit")
        if R:
            rw = index_width(max(R * W, 2))
            rmem = Memory(shape=len(self.wr_data), depth=max(R * W, 2), init=[])
            m.submodules.record_buffer = rmem
            rrp = rmem.read_port(domain="sync")
            rwp = rmem.write_port()

            def rbase(i):
                return Array([C(k * W, rw) for k in range(R)] + [C(0, rw)] * ((1 << ib) - R))[i]

            # capture: armed by CAPTURE, disarmed by the host's next commit
            armed = Signal(name="capture_armed")
            cap_base = Signal(rw, name="capture_base")
            cap_index = Signal(index_width(R), name="capture_index")
            host_commit = self.token_valid & self.token_ready
            take_capture = take & cop_is(Op.CAPTURE)
            with m.If(take_capture & rec_ok):
                m.d.sync += [armed.eq(1), cap_base.eq(rbase(ci)), cap_index.eq(zero_extend(ci, index_width(R)))]
            with m.Elif(host_commit):
                m.d.sync += armed.eq(0)
            for i in range(R):
                with m.If(take_capture & eq_const(ci, i)):
                    m.d.sync += rec_valid[i].eq(0)
                with m.Elif(host_commit & armed & eq_const(cap_index, i)):
                    m.d.sync += rec_valid[i].eq(1)
            # record layout: B[0..N), x[0..H·P), dt[0..H)
            sel, a = self.wr_sel, self.wr_addr
            a_ext = zero_extend(a, rw)
            off = Signal(rw, name="capture_offset")
            ok = Signal(name="capture_in_range")
            # Beats of each section (wr_addr counts beats of input_words words).
            nb, xb, hb = N // self._beat, H * P // self._beat, H // self._beat
            m.d.comb += [
                off.eq(Mux(eq_const(sel, SEL_B), a_ext,
                       Mux(eq_const(sel, SEL_X), add_const(a_ext, nb, rw), add_const(a_ext, nb + xb, rw)))),
                ok.eq(Mux(eq_const(sel, SEL_B), ~ge_const(a, nb),
                      Mux(eq_const(sel, SEL_X), ~ge_const(a, xb),
                          eq_const(sel, SEL_DT) & ~ge_const(a, hb)))),
            ]
            cap_addr = Signal(rw, name="capture_addr")
            m.d.comb += [cap_addr.eq((cap_base + off)[:rw]),
                         rwp.addr.eq(cap_addr), rwp.data.eq(self.wr_data),
                         rwp.en.eq(host_wr & armed & ok)]

            # replay: read the record word by word, write each to the unit one cycle later
            r_addr = Signal(rw, name="replay_addr")
            sec = Signal(2, name="replay_section")       # 0 B, 1 x, 2 dt
            idx = Signal(len(self.wr_addr), name="replay_index")
            sec_last = Mux(eq_const(sec, 0), eq_const(idx, nb - 1),
                           Mux(eq_const(sec, 1), eq_const(idx, xb - 1), eq_const(idx, hb - 1)))
            word_last = eq_const(sec, 2) & eq_const(idx, hb - 1)
            f_run = Signal(name="feed_run")
            f_issue = Signal(name="feed_issue")
            m.d.comb += f_issue.eq((go & is_replay | feeding) & f_run)
            with m.If(take):
                m.d.sync += [f_run.eq(1), r_addr.eq(rbase(ci)), sec.eq(0), idx.eq(0)]
            with m.If(f_issue):
                m.d.sync += r_addr.eq(add_const(r_addr, 1, rw))
                with m.If(sec_last):
                    m.d.sync += [sec.eq(add_const(sec, 1, 2)), idx.eq(0)]
                with m.Else():
                    m.d.sync += idx.eq(add_const(idx, 1, len(idx)))
                with m.If(word_last):
                    m.d.sync += f_run.eq(0)
            d_sec = Signal(2, name="replay_section_d")
            d_last = Signal(name="replay_last_d")
            pend = Signal(name="replay_commit_pending")
            m.d.sync += [rp_en.eq(f_issue), d_sec.eq(sec), rp_addr.eq(idx),
                         d_last.eq(f_issue & word_last)]
            m.d.comb += [rrp.addr.eq(r_addr), rrp.en.eq(1), rp_data.eq(rrp.data),
                         rp_sel.eq(Mux(eq_const(d_sec, 0), SEL_B, Mux(eq_const(d_sec, 1), SEL_X, SEL_DT)))]
            # The commit goes with the last word: that write lands in the fill bank
            # at the edge at which the banks swap. The fill bank was free when the
            # feed started and only the feed commits, so token_ready is high; a
            # commit not taken at once would stay pending.
            m.d.comb += [rp_commit.eq(feeding & (d_last | pend)),
                         feed_last.eq(rp_commit & self.ssm_token_ready)]
            with m.If(rp_commit & ~self.ssm_token_ready):
                m.d.sync += pend.eq(1)
            with m.Elif(take | feed_last):
                m.d.sync += pend.eq(0)

        with m.If(go & is_replay):
            m.d.sync += replay_mode.eq(1)
        with m.Elif(replay_mode & drained & ~waiting & ~feeding):
            m.d.sync += replay_mode.eq(0)

        # ---- the unit's input port: host or replay -------------------------------------
        block_commit = waiting | copying | feeding | replay_mode
        m.d.comb += [
            self.ssm_wr_en.eq(Mux(feeding, rp_en, host_wr)),
            self.ssm_wr_sel.eq(Mux(feeding, rp_sel, self.wr_sel)),
            self.ssm_wr_addr.eq(Mux(feeding, rp_addr, self.wr_addr)),
            self.ssm_wr_data.eq(Mux(feeding, rp_data, self.wr_data)),
            self.fill_free.eq(self.ssm_fill_free & ~replay_active),
            self.token_ready.eq(self.ssm_token_ready & ~block_commit),
            self.ssm_token_valid.eq(Mux(feeding, rp_commit, self.token_valid & ~block_commit)),
            # y: forwarded, except the rows of replayed tokens, which are dropped here
            self.y.payload.eq(self.ssm_y.payload),
            self.y.valid.eq(self.ssm_y.valid & ~replay_mode),
            self.ssm_y.ready.eq(self.y.ready | replay_mode),
        ]

        # ---- performance counters -------------------------------------------------------
        busy = waiting | copying | feeding
        m.d.comb += self.busy.eq(busy | replay_mode)
        with m.If(busy):
            m.d.sync += self.busy_cycles.eq(add_const(self.busy_cycles, 1, COUNTER_BITS))
        with m.If(waiting & ~go):
            m.d.sync += self.wait_cycles.eq(add_const(self.wait_cycles, 1, COUNTER_BITS))
        with m.If(resp.valid & resp.ready):
            m.d.sync += self.done_count.eq(add_const(self.done_count, 1, COUNTER_BITS))
        return m


def connect_ssm(m, ctrl, ssm):
    """Wire ``ctrl``'s ``ssm_*`` ports to :class:`hw.ssm_unit.SSMUnit` ``ssm`` in module ``m``.

    The host then drives ``ctrl``'s ``wr_*``/``token_valid`` and takes ``ctrl.y``.
    """
    m.d.comb += [
        ssm.wr_en.eq(ctrl.ssm_wr_en), ssm.wr_sel.eq(ctrl.ssm_wr_sel),
        ssm.wr_addr.eq(ctrl.ssm_wr_addr), ssm.wr_data.eq(ctrl.ssm_wr_data),
        ctrl.ssm_fill_free.eq(ssm.fill_free),
        ssm.token_valid.eq(ctrl.ssm_token_valid), ctrl.ssm_token_ready.eq(ssm.token_ready),
        ssm.hold.eq(ctrl.ssm_hold), ctrl.ssm_idle.eq(ssm.idle),
        ssm.st_addr.eq(ctrl.ssm_st_addr), ssm.st_we.eq(ctrl.ssm_st_we),
        ssm.st_wdata.eq(ctrl.ssm_st_wdata), ctrl.ssm_st_rdata.eq(ssm.st_rdata),
    ]
    wiring.connect(m, ssm.y, ctrl.ssm_y)
